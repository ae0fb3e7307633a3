//! The backend pool: thread groups with priority queues (the Percona /
//! MariaDB thread-pool model), the pool keys backend connections belong to
//! (credential pool × flavour, see [`keys`]), dialing with retry, and the
//! per-group timer and maintenance, and the elastic backend budget the groups
//! share ([`elastic`]; its ceiling is learnt here from the server's
//! `@@max_connections`).
//! Limits, timings and credential pools can be replaced at run time
//! ([`Pool::reconfigure`], on a configuration reload).

pub mod adaptive;
pub mod code_catalog;
pub mod elastic;
pub mod fair;
pub mod group;
pub mod health;
pub mod helper;
pub mod keys;
pub mod local_socket;
pub mod parking;
pub mod routing;
pub mod scheduler;
pub mod server_checks;
pub mod server_waits;
pub mod servers;
pub mod shares;
pub mod tenants;

use std::sync::{Arc, RwLock};

use arc_swap::ArcSwap;
use std::time::Duration;

use tokio::time::Instant;

use crate::backend::{self, BackendConn, BackendError, BackendParams, ServerInfo};
use crate::config::{Config, InflightMode, PoolConfig, PoolMode};
use crate::protocol::caps::Flavour;
use group::Group;
use keys::Keys;
use scheduler::Limits;

/// All thread groups and what is needed to open backend connections.
pub struct Pool {
    /// The thread groups.
    pub groups: Vec<Arc<Group>>,
    /// The backend budget the groups share: ceiling, bases, common pool.
    pub budget: Arc<elastic::Budget>,
    /// Users as the scheduler sees them: weights, per-user limits, figures.
    pub tenants: tenants::Tenants,
    /// The `[pool]` settings the budget and group limits derive from.
    pool_cfg: ArcSwap<PoolConfig>,
    /// The server's `@@global.max_connections` as last read (0 = not yet).
    server_max_connections: std::sync::atomic::AtomicUsize,
    /// 1 + the globals epoch it was read in (0 = read it at the next
    /// maintenance round: at start, after a reload or a `SET GLOBAL`).
    ceiling_epoch: std::sync::atomic::AtomicU64,
    /// Since when the server refuses backend logins as full (1040 / 1203):
    /// the common pool is held where it was until [`SERVER_FULL_HOLD`]
    /// passes without another refusal.
    full_since: std::sync::Mutex<Option<Instant>>,
    /// Login parameters per credential pool (indexes never change; a
    /// reload may append pools and update their settings). The flavour is
    /// added per pool key by [`Pool::params`].
    pub credentials: ArcSwap<Vec<BackendParams>>,
    /// Pool keys: (credential pool, flavour) → key, registered lazily.
    keys: Keys,
    /// Serializes changes of `credentials` (a reload, a server user's
    /// first login) so that none is lost.
    credential_writes: std::sync::Mutex<()>,
    /// The backend's greeting facts (refreshed on every successful dial).
    pub server: RwLock<Arc<ServerInfo>>,
    /// Pool mode.
    pub mode: PoolMode,
    /// How the in-flight limit is found (not reloadable).
    pub inflight: InflightMode,
    timings: ArcSwap<Timings>,
    /// Whether the backend is reachable, as the last dials saw it.
    pub health: health::Health,
    /// The servers behind `backend.address` and which one is the primary.
    pub servers: servers::Servers,
    /// An idle connection was found dead (maintenance closed it): the
    /// single server's next check logs in at once (see `server_checks`).
    pub(crate) dead_idle_seen: std::sync::atomic::AtomicBool,
    /// Whether dials take the server's Unix socket instead of loopback TCP.
    pub local_socket: local_socket::LocalSocket,
    /// Bumped by every `SET GLOBAL` a client ran through the proxy: a
    /// connection opened before has the old global values as its session
    /// values, and is reset (COM_RESET_CONNECTION re-reads them) before the
    /// next client gets it, as a new direct connection would see them.
    globals_epoch: std::sync::atomic::AtomicU64,
    /// A new server session's status flags (global autocommit, the global
    /// sql_mode's NO_BACKSLASH_ESCAPES / ANSI_QUOTES) in the low 16 bits,
    /// with the [`Pool::globals_epoch`] they were read in above them: the
    /// greeting and login OK a client gets, as the server's own would say.
    session_defaults: std::sync::atomic::AtomicU64,
    /// Bumped by SET DEFAULT ROLE: connections logged in before it have
    /// the old default role active, which neither a reset nor a change of
    /// user replaces; they are closed instead of shared.
    roles_epoch: std::sync::atomic::AtomicU64,
    /// The role a login of each credential pool got at each recent roles
    /// epoch (read by the backends logged in then): what a client that
    /// logged in at that epoch has active, as direct, unless it set one.
    login_roles: std::sync::Mutex<std::collections::HashMap<(usize, u64), Option<String>>>,
    /// The server could not say which role a login gets
    /// ([`DEFAULT_ROLE_SQL`] failed): it is not asked again.
    roles_unreadable: std::sync::atomic::AtomicBool,
    /// The last [`DEFAULT_ROLE_SQL`] reading of each credential pool (see
    /// [`Pool::check_default_role_on`]).
    default_readings: std::sync::Mutex<std::collections::HashMap<usize, Option<String>>>,
    /// Which names run code the text does not show (views, triggers).
    pub code_catalog: Arc<code_catalog::CodeCatalog>,
    /// What the read/write split decided so far.
    pub routing: RoutingStats,
    /// The primary's answer to [`DEFAULTS_SQL`], with the (primary,
    /// globals) epochs it was read in: what a replica must answer too.
    primary_defaults: std::sync::Mutex<Option<DefaultsReading>>,
}

/// A reading of [`DEFAULTS_SQL`] with the (primary, globals) epochs it was
/// made in.
type DefaultsReading = ((u64, u64), Vec<Option<String>>);

/// The global settings that shape a new session's answers (its sql_mode,
/// time zone, character sets, number and date formats, autocommit): a
/// replica takes reads only while they are the primary's, so that a read
/// answers there as it would on the primary.
pub const DEFAULTS_SQL: &str = "SELECT @@global.sql_mode, @@global.time_zone, \
     @@global.system_time_zone, @@global.character_set_server, @@global.collation_server, \
     @@global.div_precision_increment, @@global.group_concat_max_len, @@global.lc_time_names, \
     @@global.default_week_format, @@global.autocommit";

/// The read/write split's counters (`/status`, metrics).
#[derive(Debug, Default)]
pub struct RoutingStats {
    /// Reads that could have gone to a replica but stayed on the primary,
    /// by [`routing::Primary::index`] (only `hint`, `no_replica` and
    /// `causal` are counted: the others are every statement).
    pub kept: [std::sync::atomic::AtomicU64; 5],
    /// Waits on a replica for a session's last write, and how many of
    /// them ran out of time.
    pub causal_waits: std::sync::atomic::AtomicU64,
    /// Of `causal_waits`, those that failed (the read went to the primary).
    pub causal_timeouts: std::sync::atomic::AtomicU64,
    /// Time spent in those waits, microseconds.
    pub causal_wait_us: std::sync::atomic::AtomicU64,
}

impl RoutingStats {
    /// A read stayed on the primary for `why`.
    pub fn kept(&self, why: routing::Primary) {
        self.kept[why.index()].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// A wait for a session's write on a replica took `took`; `applied`:
    /// it succeeded.
    pub fn waited(&self, took: Duration, applied: bool) {
        use std::sync::atomic::Ordering::Relaxed;
        self.causal_waits.fetch_add(1, Relaxed);
        self.causal_wait_us
            .fetch_add(took.as_micros() as u64, Relaxed);
        if !applied {
            self.causal_timeouts.fetch_add(1, Relaxed);
        }
    }
}

/// The role a new login of the connection's account gets (its default
/// role; no row: none), as the account itself may read it.
pub const DEFAULT_ROLE_SQL: &str =
    "SELECT ROLE_NAME FROM information_schema.APPLICABLE_ROLES WHERE IS_DEFAULT = 'YES'";

/// Roles epochs whose login roles are kept (sessions older than that keep
/// whatever role a new backend logs in with).
const KEPT_ROLE_EPOCHS: u64 = 64;

/// The pool's reloadable durations and sizes.
#[derive(Debug, Clone, PartialEq)]
pub struct Timings {
    /// `queue_timeout_ms`.
    pub queue_timeout: Duration,
    /// `idle_timeout_s`.
    pub idle_timeout: Duration,
    /// `backend.ping_interval_s`.
    pub ping_interval: Duration,
    /// `min_idle_per_group`.
    pub min_idle: usize,
    /// `stall_limit_ms`.
    pub stall_limit: Duration,
    /// `backend.health_check_interval_ms` (zero: no checks).
    pub check_interval: Duration,
    /// `backend.health_check_failures`.
    pub check_failures: u32,
}

impl Timings {
    fn from_config(cfg: &Config) -> Self {
        Self {
            queue_timeout: Duration::from_millis(cfg.pool.queue_timeout_ms),
            idle_timeout: Duration::from_secs(cfg.pool.idle_timeout_s),
            ping_interval: Duration::from_secs(cfg.backend.ping_interval_s),
            min_idle: cfg.pool.min_idle_per_group,
            stall_limit: Duration::from_millis(cfg.pool.stall_limit_ms),
            check_interval: Duration::from_millis(cfg.backend.health_check_interval_ms),
            check_failures: cfg.backend.health_check_failures,
        }
    }
}

/// The proxy's backend ceiling, the sum of the groups' base shares, and
/// where the ceiling comes from, for `n` groups when the server allows
/// `max_connections` (0 = not known).
fn budget_for(p: &PoolConfig, n: usize, max_connections: usize) -> (usize, usize, elastic::Source) {
    if p.max_backend_connections > 0 {
        let m = p.max_backend_connections;
        return (m, m, elastic::Source::Configured);
    }
    let default = p.effective_max_backend_connections();
    if max_connections == 0 {
        return (default, default, elastic::Source::Default);
    }
    let learnt =
        max_connections.saturating_sub(p.reserved_server_connections) / p.proxies_per_server.max(1);
    // Never below the groups' bases: the bound limits borrowing only.
    let bound = match p.max_learnt_backend_connections {
        0 => usize::MAX,
        b => b.max(default),
    };
    let ceiling = learnt.min(bound).max(n);
    (ceiling, default.min(ceiling), elastic::Source::Server)
}

/// Group `i`'s limits out of `n`: the bases (`bases` in all) split evenly,
/// the first `bases % n` groups getting one more.
fn limits_for(p: &PoolConfig, i: usize, n: usize, bases: usize) -> Limits {
    let share = bases / n + usize::from(i < bases % n);
    Limits {
        cap: 1 + p.oversubscribe,
        adaptive: p.inflight == InflightMode::Adaptive,
        stall_cap: Duration::from_millis(p.stall_limit_ms),
        max_owned: share.max(1),
        kickup: Duration::from_millis(p.prio_kickup_ms),
    }
}

/// Period of the adaptive limit's timer (stalled statements, intervals).
const ADAPT_PERIOD: Duration = Duration::from_millis(25);
/// How long the common pool stays held after the server refused a backend
/// login as full.
pub const SERVER_FULL_HOLD: Duration = Duration::from_secs(10);

impl Pool {
    /// Builds the groups from the config; `params` are the credential pools.
    pub fn new(cfg: &Config, params: Vec<BackendParams>, server: ServerInfo) -> Arc<Self> {
        let n = cfg.pool.effective_groups();
        let (_, bases, source) = budget_for(&cfg.pool, n, 0);
        let budget = Arc::new(elastic::Budget::new(n, bases, source));
        let groups = (0..n)
            .map(|i| {
                Group::with_budget(
                    i,
                    limits_for(&cfg.pool, i, n, bases),
                    Some((budget.clone(), i)),
                )
            })
            .collect();
        Arc::new(Self {
            groups,
            budget,
            tenants: tenants::Tenants::new(cfg),
            pool_cfg: ArcSwap::from_pointee(cfg.pool.clone()),
            server_max_connections: std::sync::atomic::AtomicUsize::new(0),
            ceiling_epoch: std::sync::atomic::AtomicU64::new(0),
            full_since: std::sync::Mutex::new(None),
            keys: Keys::new(params.len()),
            credentials: ArcSwap::from_pointee(params),
            credential_writes: std::sync::Mutex::new(()),
            mode: cfg.pool.mode,
            inflight: cfg.pool.inflight,
            timings: ArcSwap::from_pointee(Timings::from_config(cfg)),
            health: health::Health::new(cfg.backend.address.clone()),
            servers: servers::Servers::new(&cfg.backend.servers()),
            dead_idle_seen: Default::default(),
            local_socket: local_socket::LocalSocket::new(cfg),
            code_catalog: Default::default(),
            globals_epoch: std::sync::atomic::AtomicU64::new(0),
            session_defaults: std::sync::atomic::AtomicU64::new(u64::from(server.session_status)),
            roles_epoch: std::sync::atomic::AtomicU64::new(0),
            login_roles: Default::default(),
            roles_unreadable: Default::default(),
            default_readings: Default::default(),
            routing: Default::default(),
            primary_defaults: Default::default(),
            server: RwLock::new(Arc::new(server)),
        })
    }

    /// Applies a reloaded configuration (same thread groups and mode):
    /// group limits, timings and the credential pools.
    pub fn reconfigure(&self, cfg: &Config, params: Vec<BackendParams>) {
        self.pool_cfg.store(Arc::new(cfg.pool.clone()));
        self.tenants.reconfigure(cfg);
        self.apply_budget();
        // Read the server's max_connections again at the next round.
        self.ceiling_epoch
            .store(0, std::sync::atomic::Ordering::Release);
        self.timings.store(Arc::new(Timings::from_config(cfg)));
        let _w = self
            .credential_writes
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let cur = self.credentials.load_full();
        let mut params = params;
        // Server users' pools log in with SHA1(password), which the config
        // does not know; pools registered since the reload began stay.
        for (n, o) in params.iter_mut().zip(cur.iter()) {
            if n.user == o.user && n.password.is_empty() {
                n.native_stage1 = o.native_stage1;
            }
        }
        if cur.len() > params.len() {
            params.extend(cur[params.len()..].iter().cloned());
        }
        self.credentials.store(Arc::new(params));
    }

    /// Applies the budget for the current settings and the last known
    /// `@@max_connections`: the ceiling and the groups' base shares.
    fn apply_budget(&self) {
        let p = self.pool_cfg.load();
        let n = self.groups.len();
        let known = self
            .server_max_connections
            .load(std::sync::atomic::Ordering::Acquire);
        let (ceiling, bases, source) = budget_for(&p, n, known);
        self.budget.set(ceiling, bases, source);
        for (i, g) in self.groups.iter().enumerate() {
            g.set_limits(limits_for(&p, i, n, bases));
        }
    }

    /// The server refused a backend login as full (other clients or other
    /// proxies hold its connections): the common pool stops where it is,
    /// so that waiting sessions take backends the pool already has instead
    /// of dialling into the same refusal; lifted by [`Pool::maintain`] once
    /// [`SERVER_FULL_HOLD`] passed without another refusal.
    pub fn server_full(&self) {
        self.budget.hold_at_used();
        let mut since = self.full_since.lock().unwrap_or_else(|p| p.into_inner());
        if since.is_none() {
            let v = self.budget.view();
            tracing::warn!(
                ceiling = v.ceiling,
                "the server refuses backend logins as full: no more backends for now (raise its max_connections, or lower pool.max_backend_connections)"
            );
        }
        *since = Some(Instant::now());
    }

    /// Lifts a [`Pool::server_full`] hold that has lasted long enough.
    fn lift_full_hold(&self) {
        let mut since = self.full_since.lock().unwrap_or_else(|p| p.into_inner());
        if since.is_some_and(|t| t.elapsed() >= SERVER_FULL_HOLD) {
            *since = None;
            drop(since);
            self.apply_budget();
            tracing::info!(
                ceiling = self.budget.view().ceiling,
                "backend ceiling restored"
            );
        }
    }

    /// Records the server's `@@global.max_connections` and applies the
    /// budget it allows (with `pool.max_backend_connections = 0`).
    pub fn learn_max_connections(&self, max_connections: usize) {
        let old = self
            .server_max_connections
            .swap(max_connections, std::sync::atomic::Ordering::AcqRel);
        if old != max_connections {
            self.apply_budget();
            let v = self.budget.view();
            tracing::info!(
                max_connections,
                ceiling = v.ceiling,
                bases = v.bases,
                "backend ceiling learnt from the server"
            );
        }
    }

    /// Reads `@@global.max_connections` on a connection of its own (within
    /// the budget, closed afterwards) when not read yet, after a reload, or
    /// after a client's `SET GLOBAL`; only with
    /// `pool.max_backend_connections = 0`.
    async fn learn_ceiling(self: &Arc<Self>) {
        use std::sync::atomic::Ordering;
        if self.pool_cfg.load().max_backend_connections > 0 {
            return;
        }
        let epoch = self.globals_epoch();
        if self.ceiling_epoch.load(Ordering::Acquire) == epoch + 1 {
            return;
        }
        let Some(res) = self.groups.iter().find_map(|g| g.reserve_open()) else {
            return;
        };
        let deadline = Instant::now() + Duration::from_secs(2);
        let Ok(conn) = self.dial(0, deadline).await else {
            return;
        };
        // Dropped at the end: the connection closes and frees its room.
        let mut conn = res.fulfil(conn);
        match conn.query_row("SELECT @@global.max_connections").await {
            Ok(row) => {
                let n = row
                    .and_then(|r| r.into_iter().next().flatten())
                    .and_then(|v| v.trim().parse::<usize>().ok());
                if let Some(n) = n {
                    self.ceiling_epoch.store(epoch + 1, Ordering::Release);
                    self.learn_max_connections(n);
                }
            }
            Err(e) => tracing::warn!(error = %e, "could not read the server's max_connections"),
        }
    }

    /// Current timings.
    pub fn timings(&self) -> arc_swap::Guard<Arc<Timings>> {
        self.timings.load()
    }

    /// `queue_timeout_ms` now.
    pub fn queue_timeout(&self) -> Duration {
        self.timings.load().queue_timeout
    }

    /// `backend.ping_interval_s` now.
    pub fn ping_interval(&self) -> Duration {
        self.timings.load().ping_interval
    }

    /// The group a client id belongs to.
    pub fn group_for(&self, client_id: u32) -> &Arc<Group> {
        &self.groups[client_id as usize % self.groups.len()]
    }

    /// The greeting facts to mirror.
    pub fn server_info(&self) -> Arc<ServerInfo> {
        self.server
            .read()
            .map(|s| s.clone())
            .unwrap_or_else(|p| p.into_inner().clone())
    }

    /// The pool key of clients of credential pool `credential` with
    /// `flavour` (registered on first use).
    pub fn key(&self, credential: usize, flavour: Flavour) -> usize {
        self.keys.key(credential, flavour)
    }

    /// The key with the flavour of `key` and credential pool `credential`
    /// (COM_CHANGE_USER keeps the client's capabilities).
    pub fn rekey(&self, key: usize, credential: usize) -> usize {
        let flavour = self.keys.get(key).map_or(Flavour::DEFAULT, |(_, f)| f);
        self.keys.key(credential, flavour)
    }

    /// Credential pool and flavour of a key.
    pub fn key_info(&self, key: usize) -> Option<(usize, Flavour)> {
        self.keys.get(key)
    }

    /// The key with the credential pool and flavour of `key` on replica
    /// `server` (a read routed there, see [`routing`]).
    pub fn replica_key(&self, key: usize, server: usize) -> usize {
        let (credential, flavour) = self.keys.get(key).unwrap_or((0, Flavour::DEFAULT));
        self.keys.key_at(credential, flavour, Some(server))
    }

    /// The replica pool key `key` dials (`None`: the primary).
    pub fn replica_of(&self, key: usize) -> Option<usize> {
        self.keys.target(key)
    }

    /// The backend users of all credential pools.
    pub fn backend_users(&self) -> Vec<String> {
        self.credentials
            .load()
            .iter()
            .map(|p| p.user.clone())
            .collect()
    }

    /// True when another credential pool (other credentials, a server
    /// user) logs in as the same server account as `credential`.
    pub fn shares_account(&self, credential: usize) -> bool {
        let all = self.credentials.load();
        let Some(mine) = all.get(credential) else {
            return false;
        };
        all.iter()
            .enumerate()
            .any(|(i, p)| i != credential && p.user == mine.user)
    }

    /// The credential pool logging in as `user` with SHA1(password)
    /// `stage1` (or no password), added on first use; address, TLS and
    /// timeouts are pool 0's.
    pub fn register(&self, user: &str, stage1: Option<[u8; 20]>) -> usize {
        let same = |p: &BackendParams| {
            p.user == user
                && p.native_stage1 == stage1
                && (stage1.is_some() || p.password.is_empty())
        };
        if let Some(i) = self.credentials.load().iter().position(same) {
            return i;
        }
        let _w = self
            .credential_writes
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let cur = self.credentials.load_full();
        if let Some(i) = cur.iter().position(same) {
            return i;
        }
        let Some(base) = cur.first() else {
            return 0;
        };
        let pool = cur.len();
        let mut next = (*cur).clone();
        next.push(BackendParams {
            user: user.to_string(),
            password: String::new(),
            native_stage1: stage1,
            pool,
            ..base.clone()
        });
        self.credentials.store(Arc::new(next));
        pool
    }

    /// Login parameters for connections of pool key `key`.
    pub fn params(&self, key: usize) -> Option<BackendParams> {
        let (credential, flavour) = self.keys.get(key)?;
        let mut p = self.credentials.load().get(credential)?.clone();
        p.pool = key;
        p.flavour = flavour;
        if let Some(server) = self.keys.target(key) {
            p.address = self.servers.address(server)?;
        }
        Some(p)
    }

    /// Feeds a connect's outcome into the health state (and starts the
    /// probe when it made the backend down), as a dial does.
    pub fn record_health(self: &Arc<Self>, r: Result<(), &BackendError>) {
        // The server dials go to now (one server: the one there is).
        let server = self.servers.primary().map(|(_, a)| a);
        let server = server.as_deref().unwrap_or(self.health.address());
        if self.health.record_at(r, server)
            && let Err(e) = r
        {
            tracing::warn!(error = %e, address = %server, "backend unreachable");
            self.start_health_probe();
        }
    }

    /// Dials a backend of pool key `pool`, retrying with backoff until
    /// `deadline`; every outcome feeds the health state.
    pub async fn dial(
        self: &Arc<Self>,
        pool: usize,
        deadline: Instant,
    ) -> Result<BackendConn, BackendError> {
        let r = self.dial_once(pool, deadline).await;
        // A replica's dial says nothing of the primary's reachability.
        if self.keys.target(pool).is_none() {
            self.record_health(r.as_ref().map(|_| ()));
        }
        r
    }

    /// The current [`Pool::globals_epoch`] generation.
    pub fn globals_epoch(&self) -> u64 {
        self.globals_epoch
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// A client changed global variables through the proxy: every
    /// connection open now is stale.
    pub fn globals_changed(&self) {
        self.globals_epoch
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    }

    /// The current [`Pool::roles_epoch`] generation.
    pub fn roles_epoch(&self) -> u64 {
        self.roles_epoch.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The role a login of pool key `pool`'s account got at roles epoch
    /// `epoch` (`None` when no backend logged in then is on record).
    pub fn login_role_at(&self, pool: usize, epoch: u64) -> Option<Option<String>> {
        let (credential, _) = self.keys.get(pool)?;
        let roles = self.login_roles.lock().ok()?;
        roles.get(&(credential, epoch)).cloned()
    }

    /// Records the role a backend of pool key `pool` logged in with at
    /// roles epoch `epoch` (or, read after a SET DEFAULT ROLE, the role a
    /// login of its account gets now), while that epoch is current; epochs
    /// more than [`KEPT_ROLE_EPOCHS`] old are forgotten.
    pub fn note_login_role(&self, pool: usize, epoch: u64, role: &Option<String>) {
        let Some((credential, _)) = self.keys.get(pool) else {
            return;
        };
        if epoch != self.roles_epoch() {
            return;
        }
        if let Ok(mut roles) = self.login_roles.lock() {
            roles.retain(|(_, e), _| e + KEPT_ROLE_EPOCHS >= epoch);
            roles
                .entry((credential, epoch))
                .or_insert_with(|| role.clone());
        }
    }

    /// Records the role a login of pool key `pool`'s account gets, read on
    /// a connection of roles epoch `epoch` (at its login, or asked since),
    /// and returns the epoch that connection belongs to. A role other than
    /// the one on record for the current epoch means the account's default
    /// role changed outside this proxy (another proxy, a client of the
    /// server, an administrator's `SET DEFAULT ROLE … FOR`): a new epoch
    /// starts with it, so that no connection logged in before the change
    /// serves a session logged in after it (which would get the old role),
    /// and sessions logged in before are given back the role on record for
    /// theirs. A reading of an older epoch teaches nothing.
    pub fn observe_login_role(&self, pool: usize, epoch: u64, role: &Option<String>) -> u64 {
        if epoch != self.roles_epoch() {
            return epoch;
        }
        match self.login_role_at(pool, epoch) {
            Some(known) if known != *role => {
                self.default_roles_changed();
                let now = self.roles_epoch();
                self.note_login_role(pool, now, role);
                tracing::info!(
                    pool,
                    was = known.as_deref().unwrap_or("NONE"),
                    now = role.as_deref().unwrap_or("NONE"),
                    "a backend account's default role changed outside this proxy"
                );
                now
            }
            Some(_) => epoch,
            None => {
                self.note_login_role(pool, epoch, role);
                epoch
            }
        }
    }

    /// Asks on `c` (the code catalog's reading connection, every reading)
    /// which role a new login of its account gets ([`DEFAULT_ROLE_SQL`],
    /// read as the account itself) and compares it with the last such
    /// reading of the same account: a difference means the default role
    /// changed — outside this proxy when no `SET DEFAULT ROLE` ran through
    /// it (another proxy, a client of the server, an administrator's `SET
    /// DEFAULT ROLE … FOR`) — and a new roles epoch starts, so that no
    /// connection logged in before serves a session logged in after. Only
    /// readings of this query are compared with each other (a login's
    /// `CURRENT_ROLE()` may differ from the default without any change:
    /// `init_connect` may set a role, and MySQL spells roles otherwise).
    /// Reads a table, as the catalog reading does on the same connection.
    /// A server without `APPLICABLE_ROLES.IS_DEFAULT` is not asked again.
    pub async fn check_default_role_on(&self, c: &mut BackendConn) {
        use std::sync::atomic::Ordering;
        if self.roles_unreadable.load(Ordering::Relaxed) {
            return;
        }
        let Some((credential, _)) = self.keys.get(c.pool) else {
            return;
        };
        match c.query_row(DEFAULT_ROLE_SQL).await {
            Ok(row) => {
                let role = row.and_then(|r| r.into_iter().next().flatten());
                let before = match self.default_readings.lock() {
                    Ok(mut m) => m.insert(credential, role.clone()),
                    Err(_) => return,
                };
                if let Some(before) = before
                    && before != role
                {
                    self.default_roles_changed();
                    tracing::info!(
                        credential,
                        was = before.as_deref().unwrap_or("NONE"),
                        now = role.as_deref().unwrap_or("NONE"),
                        "a backend account's default role changed"
                    );
                }
            }
            // No such column or table: this server cannot say.
            Err(BackendError::Server(e)) if matches!(e.code, 1054 | 1109 | 1146) => {
                tracing::info!(error = %e.message, "cannot read the backend account's default role: one changed outside this proxy is noticed only when a backend connection is opened");
                self.roles_unreadable.store(true, Ordering::Relaxed);
            }
            // Asked again at the next reading (a failed connection fails
            // the reading that goes on with it too).
            Err(_) => {}
        }
    }

    /// A default role changed: connections opened before must not serve
    /// anyone again.
    pub fn default_roles_changed(&self) {
        self.roles_epoch
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    }

    /// The status flags a new server session starts with now (see
    /// [`status::SESSION_DEFAULTS`](crate::protocol::packets::status::SESSION_DEFAULTS)).
    pub fn session_status(&self) -> u16 {
        (self
            .session_defaults
            .load(std::sync::atomic::Ordering::Acquire)
            & 0xffff) as u16
    }

    /// Records a new session's status flags as read in globals epoch
    /// `epoch`; a reading from before the latest `SET GLOBAL` is ignored.
    pub fn learn_session_status(&self, epoch: u64, flags: u16) {
        use std::sync::atomic::Ordering;
        let flags = flags & crate::protocol::packets::status::SESSION_DEFAULTS;
        let _ = self
            .session_defaults
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |old| {
                (epoch >= old >> 16 && epoch == self.globals_epoch())
                    .then_some(epoch << 16 | u64::from(flags))
            });
    }

    async fn dial_once(&self, pool: usize, deadline: Instant) -> Result<BackendConn, BackendError> {
        let Some(p) = self.params(pool) else {
            return Err(BackendError::Protocol(format!("no pool key {pool}")));
        };
        if let Some(server) = self.keys.target(pool) {
            return self.dial_replica(server, pool, p).await;
        }
        let credential = self.keys.get(pool).map_or(0, |(c, _)| c);
        let mut p = p;
        let mut delay = Duration::from_millis(20);
        loop {
            // Read before the login: a change during it makes the
            // connection stale rather than wrongly current.
            let epoch = self.globals_epoch();
            let roles = self.roles_epoch();
            let (server_epoch, server) = match self.primary_for_dial(deadline).await {
                Ok((server_epoch, Some((server, address)))) => {
                    p.address = address;
                    (server_epoch, server)
                }
                Ok((server_epoch, None)) => (server_epoch, 0),
                Err(e) => return Err(e),
            };
            let dialed = self.connect_routed(credential, &p).await;
            match dialed {
                // The primary changed while this one logged in: it may be
                // the old one, so it is closed and the new one dialed.
                Ok(_) if !self.servers.is_current(server_epoch) => {
                    continue;
                }
                Ok((mut conn, mut info)) => {
                    conn.globals_epoch = epoch;
                    conn.server_epoch = server_epoch;
                    conn.server = server;
                    conn.roles_epoch = self.observe_login_role(pool, roles, &conn.login_role);
                    self.learn_session_status(epoch, info.session_status);
                    let current = self.server_info();
                    let same = current.same_greeting(&info);
                    if !same || current.collations.is_none() {
                        // A new server (or none learned yet): learn its
                        // collations on this connection.
                        info.collations = match backend::connect::learn_collations(&mut conn).await
                        {
                            Ok(c) => Some(Arc::new(c)),
                            Err(e) => {
                                tracing::warn!(error = %e, "could not read the backend's collations");
                                current.collations.clone().filter(|_| same)
                            }
                        };
                        if let Ok(mut s) = self.server.write() {
                            *s = Arc::new(info);
                        }
                    }
                    return Ok(conn);
                }
                // Wrong credentials or a refusal won't improve with retries.
                Err(e @ BackendError::Server(_)) => return Err(e),
                Err(e) if e.is_out_of_fds() => return Err(e),
                Err(e) => {
                    // Several servers: a primary that refuses connections
                    // is down now, not at its next check (the next round
                    // of this loop waits for another primary).
                    if self.servers.len() > 1 && server_checks::refused(&e) {
                        let changes = self.servers.observe_at(
                            server,
                            server_epoch,
                            servers::Check::Failed {
                                error: e.to_string(),
                                at_once: true,
                            },
                        );
                        self.after_server_checks(changes);
                    }
                    if Instant::now() + delay >= deadline {
                        return Err(e);
                    }
                    tracing::warn!(error = %e, retry_in_ms = delay.as_millis() as u64, "backend dial failed");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(1));
                }
            }
        }
    }

    /// One login at replica `server` for reads (no retry: a read that
    /// cannot have a replica backend goes to the primary instead). Nothing
    /// the pool learns from a primary's login (greeting, collations,
    /// session defaults, default role) is learnt from it; a refused
    /// connect makes it down at once, as for the primary. A replica whose
    /// greeting or session defaults differ from the primary's
    /// ([`DEFAULTS_SQL`], the status flags a session starts with) would
    /// answer reads otherwise: it is kept out of the read set for a while
    /// and the login fails.
    async fn dial_replica(
        &self,
        server: usize,
        key: usize,
        p: BackendParams,
    ) -> Result<BackendConn, BackendError> {
        let epoch = self.globals_epoch();
        let roles = self.roles_epoch();
        let (mut conn, info) = match backend::connect(&p).await {
            Ok(done) => done,
            Err(e) => {
                if server_checks::refused(&e) {
                    let changes = self.servers.observe(
                        server,
                        servers::Check::Failed {
                            error: e.to_string(),
                            at_once: true,
                        },
                        1,
                    );
                    self.after_server_checks(changes);
                } else {
                    // Slow, full, refusing the account: not for reads for a
                    // while (each read would pay the failure first).
                    self.servers
                        .unfit_for_reads(server, &format!("a login failed: {e}"));
                }
                return Err(e);
            }
        };
        let primary = self.server_info();
        let unlike =
            if info.capabilities != primary.capabilities || info.collation != primary.collation {
                Some("its greeting (capabilities, default collation) differs".to_string())
            } else if info.session_status != self.session_status() {
                Some(
                "a new session's status (autocommit, NO_BACKSLASH_ESCAPES, ANSI_QUOTES) differs"
                    .to_string(),
            )
            } else {
                match self.compare_defaults(&mut conn, key).await {
                    Ok(unlike) => unlike,
                    Err(e) => Some(format!("its session defaults could not be compared: {e}")),
                }
            };
        if let Some(why) = unlike {
            self.servers.unfit_for_reads(server, &why);
            conn.quit().await;
            return Err(BackendError::Protocol(format!(
                "replica not used for reads: {why}"
            )));
        }
        conn.globals_epoch = epoch;
        conn.roles_epoch = roles;
        conn.server_epoch = self.servers.epoch();
        conn.server = server;
        conn.counted = self.servers.count_backend(server);
        Ok(conn)
    }

    /// Why replica backend `conn` would answer otherwise than the primary
    /// ([`DEFAULTS_SQL`]), or `None`. A difference from the reading kept
    /// for this epoch is checked against a fresh one (globals may have been
    /// changed on the servers directly).
    async fn compare_defaults(
        &self,
        conn: &mut BackendConn,
        key: usize,
    ) -> Result<Option<String>, BackendError> {
        let mine = conn.query_row(DEFAULTS_SQL).await?;
        let mut theirs = self.primary_defaults(key, false).await?;
        if mine.as_ref() != Some(&theirs) {
            theirs = self.primary_defaults(key, true).await?;
        }
        Ok((mine.as_ref() != Some(&theirs)).then(|| {
            format!("its session defaults ({DEFAULTS_SQL}) differ: {mine:?} against the primary's {theirs:?}")
        }))
    }

    /// The primary's answer to [`DEFAULTS_SQL`], read on a login of its
    /// own (outside the budget) once per primary and globals epoch, or
    /// afresh.
    async fn primary_defaults(
        &self,
        key: usize,
        afresh: bool,
    ) -> Result<Vec<Option<String>>, BackendError> {
        let now = (self.servers.epoch(), self.globals_epoch());
        if !afresh
            && let Ok(g) = self.primary_defaults.lock()
            && let Some((at, v)) = g.as_ref()
            && *at == now
        {
            return Ok(v.clone());
        }
        let Some((_, address)) = self.servers.primary() else {
            return Err(BackendError::NoPrimary("no primary to compare with".into()));
        };
        let (credential, flavour) = self.keys.get(key).unwrap_or((0, Flavour::DEFAULT));
        let primary_key = self.keys.key(credential, flavour);
        let limit = self
            .params(primary_key)
            .map_or(Duration::from_secs(5), |p| p.connect_timeout);
        let mut c = self.login_at(primary_key, &address, limit).await?;
        let read = c.query_row(DEFAULTS_SQL).await;
        c.quit().await;
        let v = read?.unwrap_or_default();
        if let Ok(mut g) = self.primary_defaults.lock() {
            *g = Some((now, v.clone()));
        }
        Ok(v)
    }

    /// The primary-server epoch a dial starts in and, with several servers,
    /// the primary's address (one server: the address as configured);
    /// waits up to `deadline` while there is no primary, then fails with
    /// the reason.
    async fn primary_for_dial(
        &self,
        deadline: Instant,
    ) -> Result<(u64, Option<(usize, String)>), BackendError> {
        if self.servers.len() == 1 {
            return Ok((self.servers.epoch(), None));
        }
        loop {
            let epoch = self.servers.epoch();
            if let Some((e, i, address)) = self.servers.primary_at() {
                return Ok((e, Some((i, address))));
            }
            let changed = self.servers.changed_since(epoch);
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                let why = self
                    .servers
                    .no_primary()
                    .map_or_else(|| "no primary".to_string(), |(_, why)| why);
                return Err(BackendError::NoPrimary(why));
            }
        }
    }

    /// Acts on what the server checks changed: a new primary (or none)
    /// makes every connection to the old one stale — idle ones are closed
    /// now, busy ones when they come back —, and the globals, the session
    /// defaults, the ceiling and the code catalog are read again from the
    /// new one; a second writable server is refused, logged once.
    pub fn after_server_checks(&self, changes: servers::Changes) {
        if let Some(refused) = &changes.refused {
            tracing::error!(
                server = %refused,
                primary = ?self.servers.primary().map(|(_, a)| a),
                "a second backend server is writable: refused, statements stay on the primary (never two primaries)"
            );
        }
        if let Some((from, to)) = &changes.primary {
            tracing::warn!(from = ?from, to = ?to, "backend primary changed");
            self.globals_changed();
            self.code_catalog.server_changed();
        }
        if self.servers.len() > 1 {
            // Backends of a server that no longer has its role: closed.
            for g in &self.groups {
                drop(g.take_idle_where(|c| !self.usable(c)));
                drop(g.take_parked_where(|c| !self.usable(c)));
            }
            self.health.set_no_primary(self.servers.no_primary());
        }
    }

    /// True when `c` is a primary backend (not one dialed for reads) and
    /// its server is still the primary: the only kind background work
    /// (checks, probes, catalog readings) borrows.
    pub fn on_primary(&self, c: &BackendConn) -> bool {
        self.keys.target(c.pool).is_none() && self.servers.is_current(c.server_epoch)
    }

    /// True when `c` may still be used and shared for what it was dialed
    /// for: a primary backend while its server is the primary (see
    /// [`servers::Servers::is_current`]), a replica backend while its
    /// server serves reads ([`servers::Servers::serves_reads`]).
    pub fn usable(&self, c: &BackendConn) -> bool {
        match self.keys.target(c.pool) {
            None => self.servers.is_current(c.server_epoch),
            // After a SET GLOBAL through the proxy (the primary's globals
            // only) a replica's sessions no longer start as the primary's.
            Some(i) => self.servers.serves_reads(i) && c.globals_epoch == self.globals_epoch(),
        }
    }

    /// A login of pool key `key`'s credentials at `address` (a server of
    /// `backend.address`, whichever its role), within `limit`, outside the
    /// budget: for a health check or a KILL on a former primary.
    pub async fn login_at(
        &self,
        key: usize,
        address: &str,
        limit: Duration,
    ) -> Result<BackendConn, BackendError> {
        let Some(mut p) = self.params(key).map(|p| p.over(address)) else {
            return Err(BackendError::Protocol(format!("no pool key {key}")));
        };
        p.connect_timeout = limit;
        backend::connect(&p).await.map(|(c, _)| c)
    }

    /// An idle connection (of any account: a ping reads nothing) for a
    /// health check, unused for at least `quiet` (and by a session in the
    /// last moments, see [`helper`]): given back with `return_checked`, or
    /// closed by dropping it.
    pub fn idle_for_check(&self, quiet: Duration) -> Option<group::Leased> {
        self.take_one_idle_cold(quiet, false)
    }

    /// One login of credential pool `credential`, over the server's socket
    /// when [`Pool::local_socket`] says so. A socket that fails, or logs in
    /// as another account, falls back to TCP within the same attempt: the
    /// client never sees the socket's own error.
    async fn connect_routed(
        &self,
        credential: usize,
        p: &BackendParams,
    ) -> Result<(BackendConn, ServerInfo), BackendError> {
        use local_socket::Route;
        let route = match self.local_socket.route(credential, p) {
            Route::Socket { path, account } => {
                match self.connect_socket(credential, p, &path, &account).await {
                    Some(done) => return done,
                    // Back to TCP; this login may prove the socket again.
                    None => match self.local_socket.route(credential, p) {
                        Route::Socket { .. } => Route::Tcp { check: false },
                        tcp => tcp,
                    },
                }
            }
            tcp => tcp,
        };
        if route != (Route::Tcp { check: true }) {
            return backend::connect(p).await;
        }
        match backend::connect(p).await {
            Ok((mut conn, info)) => self
                .local_socket
                .check(credential, &mut conn, p)
                .await
                .map(|()| (conn, info)),
            Err(e) => {
                // Checked at the next TCP login instead.
                self.local_socket.failed_check(credential);
                Err(e)
            }
        }
    }

    /// A login over the server's socket that must be `account`; `None`
    /// when the socket failed (reported to [`Pool::local_socket`]).
    async fn connect_socket(
        &self,
        credential: usize,
        p: &BackendParams,
        path: &str,
        account: &str,
    ) -> Option<Result<(BackendConn, ServerInfo), BackendError>> {
        let error = match backend::connect(&p.over(path)).await {
            Ok((conn, info)) if conn.account.as_deref() == Some(account) => {
                return Some(Ok((conn, info)));
            }
            Ok((conn, _)) => {
                let got = format!("logged in as {:?}", conn.account);
                conn.quit().await;
                got
            }
            // Full is full on either transport.
            Err(e) if e.server_full().is_some() || e.is_out_of_fds() => return Some(Err(e)),
            Err(e) => e.to_string(),
        };
        self.local_socket.failed(credential, &error);
        None
    }

    /// Runs the per-group timers and idle maintenance until the process ends.
    pub fn spawn_maintenance(self: &Arc<Self>) {
        for g in &self.groups {
            let slow = g.clone();
            let pool = Arc::downgrade(self);
            tokio::spawn(async move {
                // The period is read each time: `stall_limit_ms` is reloadable.
                while let Some(period) = pool.upgrade().map(|p| p.timings().stall_limit) {
                    tokio::time::sleep(period).await;
                    slow.tick();
                }
            });
            if self.inflight == InflightMode::Adaptive {
                // Weak: the fast timer ends with the pool.
                let g = Arc::downgrade(g);
                tokio::spawn(async move {
                    let mut tick = tokio::time::interval(ADAPT_PERIOD);
                    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                    loop {
                        tick.tick().await;
                        let Some(g) = g.upgrade() else { break };
                        g.adapt();
                    }
                });
            }
        }
        if self.inflight == InflightMode::Adaptive {
            self.spawn_wait_probe();
        }
        let pool = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tick.tick().await;
                pool.maintain().await;
            }
        });
    }

    /// Closes idle connections past `idle_timeout` (above the minimum) and
    /// ones the server closed; keeps `min_idle` connections per group open.
    async fn maintain(self: &Arc<Self>) {
        // First, before anything here waits on the server.
        for g in &self.groups {
            parking::sweep(g);
        }
        self.tenants.roll();
        self.lift_full_hold();
        self.learn_ceiling().await;
        let t = self.timings.load_full();
        for g in &self.groups {
            let now = Instant::now();
            // Parked connections are not idle here: cleaned or taken back
            // by their sessions, never expired as idle nor handed out as
            // they are.
            let mut keep = g.clean_idle();
            let min = t.min_idle;
            // Dropping a Leased closes it and frees its place.
            let expired = g.take_idle_where(|c| {
                let dead = !c.io.idle_is_healthy();
                if dead {
                    self.dead_idle_seen
                        .store(true, std::sync::atomic::Ordering::Relaxed);
                }
                let old = now.duration_since(c.last_used) >= t.idle_timeout && keep > min;
                if dead || old {
                    keep -= 1;
                    true
                } else {
                    false
                }
            });
            if !expired.is_empty() {
                tracing::debug!(
                    group = g.id,
                    closed = expired.len(),
                    "closed idle backend connections"
                );
            }
            drop(expired);
            let idle = g.clean_idle();
            for _ in idle..min {
                let Some(res) = g.reserve_open() else { break };
                let deadline = Instant::now() + Duration::from_secs(5);
                match self.dial(0, deadline).await {
                    Ok(c) => res.fulfil(c).return_idle(),
                    Err(e) => {
                        tracing::warn!(error = %e, "could not pre-open backend connection");
                        break;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_learnt_ceiling_is_bounded_unless_the_bound_is_off() {
        let mut p = PoolConfig {
            max_backend_connections: 0,
            reserved_server_connections: 10,
            max_learnt_backend_connections: 512,
            ..PoolConfig::default()
        };
        let (ceiling, bases, source) = budget_for(&p, 2, 8_392);
        assert_eq!((ceiling, source), (512, elastic::Source::Server));
        assert_eq!(bases, p.effective_max_backend_connections().min(512));
        // A smaller server's own limit is below the bound: it wins.
        assert_eq!(budget_for(&p, 2, 100).0, 90);
        // Shared by two proxies: each gets half of the server's, bounded.
        p.proxies_per_server = 2;
        assert_eq!(budget_for(&p, 2, 610).0, 300);
        assert_eq!(budget_for(&p, 2, 8_392).0, 512);
        // 0 = no bound but the server's.
        p.proxies_per_server = 1;
        p.max_learnt_backend_connections = 0;
        assert_eq!(budget_for(&p, 2, 8_392).0, 8_382);
        // The bound never cuts the groups' bases (many CPUs).
        p.oversubscribe = 127;
        let base = p.effective_max_backend_connections();
        assert!(base > 16, "{base}");
        p.max_learnt_backend_connections = 16;
        assert_eq!(budget_for(&p, 2, 8_392).0, base);
        // A configured cap is a cap, whatever the bound.
        p.max_backend_connections = 1_000;
        p.max_learnt_backend_connections = 512;
        assert_eq!(
            budget_for(&p, 2, 8_392),
            (1_000, 1_000, elastic::Source::Configured)
        );
    }
}
