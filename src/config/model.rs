//! The configuration model: every key, its type, its default and what it
//! means. `config/myplex.example.toml` documents the same keys for operators.

use serde::{Deserialize, Serialize};

/// The whole configuration.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Address MySQL clients connect to: `ip:port`, or a Unix socket path
    /// (absolute, or `unix:/path`).
    pub listen: String,
    /// Permissions of the `listen` socket file, octal (`"0660"`); empty =
    /// as created under the process umask. Unix socket only.
    pub listen_socket_mode: String,
    /// Owner of the `listen` socket file (user name or numeric uid); empty =
    /// the process's user. Unix socket only.
    pub listen_socket_owner: String,
    /// Group of the `listen` socket file (group name or numeric gid); empty =
    /// the process's group. Unix socket only.
    pub listen_socket_group: String,
    /// Address of the HTTP admin endpoint (/metrics, /status, /healthz, /readyz).
    pub admin_listen: String,
    /// File holding the admin endpoint's bearer token (e.g. a Kubernetes
    /// Secret mount); empty = no token (then `admin_listen` must be a
    /// loopback address). Read at every protected request, so a rotated
    /// Secret takes effect without a restart.
    pub admin_token_file: String,
    /// With a token: `/metrics` answers without it (for scrapers that
    /// cannot send one). `/healthz` and `/readyz` are always open.
    pub admin_metrics_public: bool,
    /// Accept queue length of the client listener (capped by the kernel's
    /// net.core.somaxconn).
    pub listen_backlog: u32,
    /// Control socket (an absolute path) through which a new myplex started
    /// with `--takeover` receives this process's listening sockets, and
    /// which `SIGUSR2` uses; empty = no hand-over (`--takeover` and
    /// `SIGUSR2` refused). Created with mode 0600.
    pub takeover_socket: String,
    /// Runtime worker threads; 0 = one per CPU.
    pub worker_threads: usize,
    /// Where client sessions run: on one worker thread per thread group, or
    /// on the shared work-stealing runtime.
    pub runtime: RuntimeMode,
    /// With `runtime = "per_group"`: the worker threads the thread groups
    /// are spread over (group `g` on thread `g mod n`), at most one per
    /// group; 0 = half the CPUs (at least one) when the server is on this
    /// host (`backend.address` a Unix socket, `localhost` or a loopback
    /// IP), where proxy and server share the CPUs and fewer session
    /// threads batch more work per wake-up; else one per CPU.
    pub session_threads: usize,
    /// Nice steps the threads carrying client sessions run below the
    /// process's own nice value (a higher CPU priority), so that a reply is
    /// relayed without waiting behind the server's threads on a busy host;
    /// 0 = as the process. Needs `CAP_SYS_NICE` or `RLIMIT_NICE` (systemd
    /// `LimitNICE=`); without it the threads go as far as allowed.
    pub worker_priority_boost: u8,
    /// Logging.
    pub log: LogConfig,
    /// The MySQL/MariaDB server behind the proxy.
    pub backend: BackendConfig,
    /// Client-facing protocol settings.
    pub frontend: FrontendConfig,
    /// Thread groups, queues and backend connection limits.
    pub pool: PoolConfig,
    /// Users allowed to log in.
    pub users: Vec<UserConfig>,
    /// Users looked up in the backend when not in `users`.
    pub server_users: super::ServerUsersConfig,
    /// The query-digest table (`SHOW MYPLEX DIGESTS`, `/digests`).
    pub digests: DigestsConfig,
    /// Where statements go with several servers (read/write split).
    pub routing: RoutingConfig,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:6033".into(),
            listen_socket_mode: String::new(),
            listen_socket_owner: String::new(),
            listen_socket_group: String::new(),
            admin_listen: "127.0.0.1:6034".into(),
            admin_token_file: String::new(),
            admin_metrics_public: false,
            listen_backlog: 4096,
            takeover_socket: String::new(),
            worker_threads: 0,
            runtime: RuntimeMode::default(),
            session_threads: 0,
            worker_priority_boost: 10,
            log: LogConfig::default(),
            backend: BackendConfig::default(),
            frontend: FrontendConfig::default(),
            pool: PoolConfig::default(),
            users: Vec::new(),
            server_users: Default::default(),
            digests: DigestsConfig::default(),
            routing: RoutingConfig::default(),
        }
    }
}

impl Config {
    /// The group workers to start (`session_threads` resolved): at least
    /// one, never more than the thread groups.
    pub fn effective_session_threads(&self) -> usize {
        let n = match self.session_threads {
            0 if self
                .backend
                .servers()
                .iter()
                .all(|a| super::Address::parse(a).is_this_host()) =>
            {
                cpus() / 2
            }
            0 => cpus(),
            n => n,
        };
        n.clamp(1, self.pool.effective_groups().max(1))
    }
}

/// `[routing]`: with several servers, which statements may go to a
/// replica (see `crate::pool::routing`). Reloadable.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct RoutingConfig {
    /// Send statements that provably only read, outside transactions and
    /// pins, to a healthy replica (off: everything goes to the primary).
    pub read_write_split: bool,
    /// A replica further behind than this (`Seconds_Behind_Master`) takes
    /// no reads until it catches up.
    pub max_replication_lag_s: u64,
    /// After a client's write, its reads go to a replica only once that
    /// replica has applied the client's last GTID, else to the primary.
    pub read_your_writes: bool,
    /// How long a read waits on a replica for the client's last GTID
    /// (`MASTER_GTID_WAIT`) before it goes to the primary instead.
    pub causal_wait_ms: u64,
}

impl Default for RoutingConfig {
    fn default() -> Self {
        Self {
            read_write_split: false,
            max_replication_lag_s: 10,
            read_your_writes: true,
            causal_wait_ms: 100,
        }
    }
}

/// `[digests]`: per (user, schema, statement digest) figures.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct DigestsConfig {
    /// Count statements per digest (applies at once on reload).
    pub enabled: bool,
    /// Most digests kept; the least recently used goes first when full
    /// (fixed at start).
    pub max_digests: usize,
    /// Digest text kept per entry, in bytes (longer texts are cut at a
    /// character boundary; the digest hash covers the whole text).
    pub max_text_bytes: usize,
}

impl Default for DigestsConfig {
    fn default() -> Self {
        Self {
            enabled: true,
            max_digests: 5000,
            max_text_bytes: 1024,
        }
    }
}

/// `[log]`
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// `text` or `json`.
    pub format: LogFormat,
    /// A `tracing` filter, e.g. `info` or `myplex=debug`.
    pub level: String,
    /// Statements slower than this (queue wait + execution) are logged with
    /// the split; 0 turns the slow-statement log off.
    pub slow_statement_ms: u64,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self {
            format: LogFormat::Text,
            level: "info".into(),
            slow_statement_ms: 1000,
        }
    }
}

/// Log output format.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// `[backend]`
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct BackendConfig {
    /// `host:port` of the server, or its Unix socket path (absolute, or
    /// `unix:/path`); several servers (a primary and its replicas) as a
    /// list, or as one string separated by commas (see
    /// [`BackendConfig::servers`]).
    #[serde(deserialize_with = "one_or_many")]
    pub address: String,
    /// User of pooled backend connections (unless a `[[users]]` entry overrides it).
    pub user: String,
    /// Password of `user`.
    pub password: String,
    /// Dial + login timeout.
    pub connect_timeout_ms: u64,
    /// Use TLS toward the backend.
    pub tls: bool,
    /// PEM CA bundle to verify the backend's certificate (empty = accept any certificate).
    pub tls_ca: String,
    /// Idle backend connections are pinged when unused this long.
    pub ping_interval_s: u64,
    /// With a loopback `address` (and no TLS): reach the server over its
    /// own Unix socket once proven to be the same server and account
    /// (`auto`), or always over TCP (`off`).
    pub local_socket: LocalSocketMode,
    /// How often each server is checked in the background (reachable,
    /// `@@read_only`); 0 = never (health is then learnt from dials only).
    pub health_check_interval_ms: u64,
    /// Failed checks in a row before a server counts as down (a refused or
    /// timed-out connect counts as down at once).
    pub health_check_failures: u32,
}

impl BackendConfig {
    /// The servers `address` names, in order (one for a single server).
    pub fn servers(&self) -> Vec<&str> {
        self.address
            .split(',')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .collect()
    }
}

/// `backend.address` as a string, or a list of strings kept as one string
/// separated by `, ` (what [`BackendConfig::servers`] splits).
fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    struct V;
    impl<'de> serde::de::Visitor<'de> for V {
        type Value = String;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an address or a list of addresses")
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<String, E> {
            Ok(v.to_string())
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<String, A::Error> {
            let mut all: Vec<String> = Vec::new();
            while let Some(a) = seq.next_element::<String>()? {
                if a.contains(',') {
                    return Err(serde::de::Error::custom(format!(
                        "{a:?}: an address in the list contains a comma"
                    )));
                }
                all.push(a);
            }
            Ok(all.join(", "))
        }
    }
    d.deserialize_any(V)
}

/// `backend.local_socket`.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum LocalSocketMode {
    /// The server's `@@socket`, when a TCP login proves it
    /// (`crate::pool::local_socket`).
    #[default]
    Auto,
    /// The address as written.
    Off,
}

impl Default for BackendConfig {
    fn default() -> Self {
        Self {
            address: "127.0.0.1:3306".into(),
            user: "app".into(),
            password: "secret".into(),
            connect_timeout_ms: 5000,
            tls: false,
            tls_ca: String::new(),
            ping_interval_s: 30,
            local_socket: LocalSocketMode::Auto,
            health_check_interval_ms: 1000,
            health_check_failures: 3,
        }
    }
}

/// `[frontend]`
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct FrontendConfig {
    /// PEM certificate chain; TLS is offered to clients when set with `tls_key`.
    pub tls_cert: String,
    /// PEM private key.
    pub tls_key: String,
    /// Refuse clients that do not upgrade to TLS.
    pub require_tls: bool,
    /// Auth plugin named in the greeting.
    pub default_auth_plugin: AuthPluginName,
    /// Largest client packet accepted (bytes); larger ones get error 1153.
    pub max_allowed_packet: usize,
    /// A client must finish the login within this time.
    pub handshake_timeout_ms: u64,
    /// Connections still logging in, overall; above it the oldest one still
    /// logging in is closed (separate from `pool.max_client_connections`).
    pub max_unauthenticated: usize,
    /// Connections still logging in from one address; above it that
    /// address's oldest one is closed.
    pub max_unauthenticated_per_address: usize,
    /// Failed logins (per address, per user) before logins wait.
    pub auth_throttle_free_failures: u32,
    /// Longest wait before a throttled login's outcome (0: no throttle).
    pub auth_throttle_max_delay_ms: u64,
    /// A result write the client does not read for this long ends the
    /// session, kills the statement and frees its backend (like the
    /// server's `net_write_timeout`).
    pub client_write_timeout_ms: u64,
}

impl Default for FrontendConfig {
    fn default() -> Self {
        Self {
            tls_cert: String::new(),
            tls_key: String::new(),
            require_tls: false,
            default_auth_plugin: AuthPluginName::MysqlNativePassword,
            max_allowed_packet: 64 * 1024 * 1024,
            handshake_timeout_ms: 10_000,
            max_unauthenticated: 4096,
            max_unauthenticated_per_address: 2048,
            auth_throttle_free_failures: 5,
            auth_throttle_max_delay_ms: 5000,
            client_write_timeout_ms: 60_000,
        }
    }
}

/// Authentication plugins myplex speaks.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum AuthPluginName {
    /// `mysql_native_password`.
    MysqlNativePassword,
    /// `caching_sha2_password`.
    CachingSha2Password,
}

impl AuthPluginName {
    /// The plugin's wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MysqlNativePassword => "mysql_native_password",
            Self::CachingSha2Password => "caching_sha2_password",
        }
    }
}

/// `pool.mode`.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum PoolMode {
    /// A backend is leased per statement / transaction.
    Transaction,
    /// A backend is held for the whole client session.
    Session,
}

/// `pool.high_prio_mode`.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum HighPrioMode {
    /// Statements of open transactions / lock holders are high priority.
    Transactions,
    /// Everything is high priority.
    Statements,
    /// Everything is low priority.
    None,
}

/// `runtime`.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum RuntimeMode {
    /// Sessions run on the main work-stealing runtime (`worker_threads`
    /// threads), with the listener, the admin endpoint and the timers.
    Shared,
    /// One single-threaded worker per thread group runs that group's
    /// sessions and backend connections (no cross-thread hand-offs inside a
    /// statement).
    #[default]
    PerGroup,
}

/// `pool.inflight`.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum InflightMode {
    /// The limit is found at run time per group from completions/s and
    /// latency, between 1 and the group's backend connections; statements
    /// running far longer than usual stop counting.
    #[default]
    Adaptive,
    /// At most `1 + oversubscribe` statements per group.
    Fixed,
}

/// `[pool]` — names and meanings follow the Percona/MariaDB thread pool.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct PoolConfig {
    /// `transaction` (default) or `session`.
    pub mode: PoolMode,
    /// Number of thread groups; 0 = CPUs of the proxy host.
    pub thread_groups: usize,
    /// Per group, at most `1 + oversubscribe` statements execute at once
    /// (with `inflight = "adaptive"`: where the limit starts).
    pub oversubscribe: usize,
    /// `adaptive` (default): the per-group in-flight limit is found at run
    /// time; `fixed`: `1 + oversubscribe`.
    pub inflight: InflightMode,
    /// Total backend connections, split evenly across groups (a hard cap);
    /// 0 = each group's base share is 4 × (1 + oversubscribe), and with the
    /// adaptive limit groups borrow beyond it up to a ceiling learnt from
    /// the server: (`@@max_connections` − `reserved_server_connections`) /
    /// `proxies_per_server`, at most `max_learnt_backend_connections`.
    pub max_backend_connections: usize,
    /// With `max_backend_connections = 0`: the most the learnt ceiling may
    /// be (0 = no bound but the server's). A server past a few hundred busy
    /// connections does less, not more: at 4,096 I/O-bound sysbench clients
    /// a pool that grew towards the server's 8,392 connections stopped
    /// (0 TPS for 50 s, as direct clients did), one held at 512 kept
    /// serving (docs/benchmarks.md).
    pub max_learnt_backend_connections: usize,
    /// With `max_backend_connections = 0`: server connections left for
    /// administrators and other clients.
    pub reserved_server_connections: usize,
    /// With `max_backend_connections = 0`: proxies sharing the server (the
    /// learnt ceiling is divided among them).
    pub proxies_per_server: usize,
    /// With the adaptive limit and `max_backend_connections = 0`: how often
    /// the server's wait gauges are read (pending InnoDB reads and fsyncs,
    /// row-lock waits, `Threads_running`) on one connection of the pool's
    /// own; while they say nothing waits and few statements run, no group
    /// climbs past its base share on throughput alone. 0 = off (borrowing
    /// follows the completion rate alone).
    pub wait_probe_ms: u64,
    /// Stall detection / kickup timer period.
    pub stall_limit_ms: u64,
    /// Which statements are high priority (served first within their
    /// user's share).
    pub high_prio_mode: HighPrioMode,
    /// Consecutive high-priority admissions per session.
    pub high_prio_tickets: u32,
    /// Low-priority requests older than this become high priority (at the
    /// tail of their user's high-priority requests).
    pub prio_kickup_ms: u64,
    /// A request that waited this long fails with an error.
    pub queue_timeout_ms: u64,
    /// Clients beyond this get error 1040.
    pub max_client_connections: usize,
    /// Idle backend connections above `min_idle_per_group` close after this.
    pub idle_timeout_s: u64,
    /// Idle backend connections each group keeps open.
    pub min_idle_per_group: usize,
    /// Prepared statements kept open per backend connection (least recently
    /// used ones are closed above it).
    pub prepared_per_backend: usize,
    /// Distinct prepared statements (per user, schema, SQL) the registry
    /// keeps (least recently used leave first, held by a client or not).
    pub prepared_registry_size: usize,
    /// After a statement with warnings or an error, its backend (which holds
    /// the diagnostics area) stays with the client this long or until its
    /// next statement; 0 = never hold (diagnostic statements may then run
    /// on another backend).
    pub diagnostics_hold_ms: u64,
    /// A plain `BEGIN` from a session holding nothing is answered by the
    /// proxy (with the OK the server gave this session's last one) and
    /// sent with the transaction's first statement: no backend is held
    /// for the round trip in between.
    pub defer_begin: bool,
    /// In transaction pooling, the in-flight limit admits a transaction at
    /// its first statement (a lease); the statements of a transaction in
    /// progress (or of a session holding locks) then run at once, counted
    /// in flight, unless another user waits that is owed its share (they
    /// then wait first in their own user's lane). `false`: each of them
    /// waits for a slot as a high-priority request (the server thread
    /// pool's rule).
    pub admit_transactions_at_start: bool,
    /// Share weight of users looked up in the server (`[server_users]`),
    /// which all share one scheduler lane; `[[users]]` entries set their
    /// own `weight`.
    pub default_user_weight: u32,
    /// How often the server's views and triggers are read, to learn which
    /// names run code a statement's text does not show (views with effects,
    /// tables with triggers); 0 = never: every statement that may name a
    /// table is treated as running stored code (its backend is reset
    /// before it is shared).
    pub code_catalog_refresh_ms: u64,
    /// Let statements through that may run a KILL myplex cannot plan (a
    /// server thread id reaching the server, where it may name a pooled
    /// backend serving another account's client) for users whose backend
    /// account serves clients of other accounts too (`[[users]]` entries
    /// sharing a `backend_user`, a server user logging in as the same
    /// account): dynamic SQL built at run time in stored code created
    /// through myplex, a compound statement or a multi-statement, and
    /// statements running
    /// stored code whose body may kill (the word KILL, a procedure's
    /// dynamic SQL from a variable or expression, a body `backend.user`
    /// cannot read). Off (default): refused with 1235 for those users; a
    /// user whose backend account is its own is never refused them.
    pub allow_unplannable_kill: bool,
}

impl Default for PoolConfig {
    fn default() -> Self {
        Self {
            mode: PoolMode::Transaction,
            thread_groups: 0,
            oversubscribe: 3,
            inflight: InflightMode::Adaptive,
            max_backend_connections: 0,
            reserved_server_connections: 10,
            proxies_per_server: 1,
            max_learnt_backend_connections: 512,
            wait_probe_ms: 250,
            stall_limit_ms: 500,
            high_prio_mode: HighPrioMode::Transactions,
            high_prio_tickets: u32::MAX,
            prio_kickup_ms: 1000,
            queue_timeout_ms: 120_000,
            max_client_connections: 10_000,
            idle_timeout_s: 60,
            min_idle_per_group: 0,
            prepared_per_backend: 256,
            prepared_registry_size: 10_000,
            diagnostics_hold_ms: 1000,
            defer_begin: true,
            admit_transactions_at_start: true,
            default_user_weight: 1,
            code_catalog_refresh_ms: 1000,
            allow_unplannable_kill: false,
        }
    }
}

/// The CPUs this process may use, asked once: `available_parallelism`
/// reads cgroup files on every call (five syscalls), and the statement path
/// resolves the default group count through here.
pub(super) fn cpus() -> usize {
    static CPUS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CPUS.get_or_init(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    })
}

impl PoolConfig {
    /// Thread groups after resolving 0 = CPUs.
    pub fn effective_groups(&self) -> usize {
        if self.thread_groups > 0 {
            self.thread_groups
        } else {
            cpus()
        }
    }

    /// Backend connection cap after resolving 0 = default.
    pub fn effective_max_backend_connections(&self) -> usize {
        if self.max_backend_connections > 0 {
            self.max_backend_connections
        } else {
            4 * self.effective_groups() * (1 + self.oversubscribe)
        }
    }
}

/// One `[[users]]` entry.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct UserConfig {
    /// Login name.
    pub name: String,
    /// Cleartext password (either this or one of the hashes).
    pub password: Option<String>,
    /// `*` + hex SHA1(SHA1(password)), as in `mysql.user` (mysql_native_password only).
    pub password_sha1: Option<String>,
    /// hex SHA256(SHA256(password)) (caching_sha2_password only).
    pub password_sha256: Option<String>,
    /// Backend user for this user's connections (default: `backend.user`
    /// when only a hash is known, else the same name).
    pub backend_user: Option<String>,
    /// Backend password (default: `backend.password` or this user's password).
    pub backend_password: Option<String>,
    /// May use the `SHOW MYPLEX …` admin console.
    pub admin: bool,
    /// Share of each thread group's execution slots under contention,
    /// relative to the other users' weights (1–1000).
    pub weight: u32,
    /// This user's client connections; beyond it logins get 1040
    /// (0 = only `pool.max_client_connections`).
    pub max_client_connections: usize,
    /// Backend connections this user's sessions may hold at once, across
    /// all groups; beyond it its statements wait in the queue (0 = no cap).
    pub max_backend_connections: usize,
    /// This user's queue timeout in ms (0 = `pool.queue_timeout_ms`).
    pub queue_timeout_ms: u64,
}

impl Default for UserConfig {
    fn default() -> Self {
        Self {
            name: String::new(),
            password: None,
            password_sha1: None,
            password_sha256: None,
            backend_user: None,
            backend_password: None,
            admin: false,
            weight: 1,
            max_client_connections: 0,
            max_backend_connections: 0,
            queue_timeout_ms: 0,
        }
    }
}
