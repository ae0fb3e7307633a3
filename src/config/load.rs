//! Loading and validation. Order: embedded `config/myplex.toml`, then the
//! file given on the command line, then `MYPLEX_<SECTION>__<KEY>` variables.

use std::net::SocketAddr;
use std::path::Path;

use super::address::Address;
use super::model::Config;

/// Largest share weight (keeps the scheduler's fixed-point tags exact).
pub const MAX_WEIGHT: u32 = 1000;

/// The shipped default configuration, embedded in the binary.
pub const DEFAULT_TOML: &str = include_str!("../../config/myplex.toml");

/// A configuration that cannot be used, with every problem found.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The sources could not be read or parsed (the text with echoed
    /// source lines and quoted values hidden: they may hold secrets).
    /// Not a `#[source]`: an error chain printer would show the original.
    #[error("{0}")]
    Source(String),
    /// Values parsed but are not valid.
    #[error("invalid configuration:\n  {}", .0.join("\n  "))]
    Invalid(Vec<String>),
}

/// Loads the configuration from the default, `path` (if any) and the environment.
pub fn load(path: Option<&Path>) -> Result<Config, ConfigError> {
    let mut b = config::Config::builder().add_source(config::File::from_str(
        DEFAULT_TOML,
        config::FileFormat::Toml,
    ));
    if let Some(p) = path {
        b = b.add_source(config::File::from(p).format(config::FileFormat::Toml));
    }
    b = b.add_source(
        config::Environment::with_prefix("MYPLEX")
            .prefix_separator("_")
            .separator("__")
            .try_parsing(true)
            .source(Some(config_env())),
    );
    finish(b)
}

/// The environment variables that are configuration: `MYPLEX_<SECTION>__<KEY>`
/// and `MYPLEX_<TOP_LEVEL_KEY>`. Other `MYPLEX_*` variables (a script's
/// `MYPLEX_BIN`, say) are not ours and must not fail the load.
fn config_env() -> config::Map<String, String> {
    const TOP: &[&str] = &[
        "LISTEN",
        "LISTEN_SOCKET_MODE",
        "LISTEN_SOCKET_OWNER",
        "LISTEN_SOCKET_GROUP",
        "ADMIN_LISTEN",
        "LISTEN_BACKLOG",
        "TAKEOVER_SOCKET",
        "WORKER_THREADS",
    ];
    std::env::vars()
        .filter(|(k, _)| {
            k.strip_prefix("MYPLEX_")
                .is_some_and(|rest| rest.contains("__") || TOP.contains(&rest))
        })
        .collect()
}

/// Loads from a TOML string only (tests, `check-config` of inline text).
pub fn load_str(toml: &str) -> Result<Config, ConfigError> {
    let b = config::Config::builder()
        .add_source(config::File::from_str(toml, config::FileFormat::Toml));
    finish(b)
}

impl From<config::ConfigError> for ConfigError {
    fn from(e: config::ConfigError) -> Self {
        Self::Source(super::redact::error_text(&e.to_string()))
    }
}

fn finish(b: config::ConfigBuilder<config::builder::DefaultState>) -> Result<Config, ConfigError> {
    let cfg: Config = b.build()?.try_deserialize()?;
    validate(&cfg)?;
    Ok(cfg)
}

/// A backend account that two `[[users]]` entries' clients log in as (as
/// `server::users_and_pools` picks it: `backend_user`, else the user's
/// own name when it has a password, else `backend.user`).
fn shared_backend_account(c: &Config) -> Option<&str> {
    let mut seen = std::collections::HashSet::new();
    c.users
        .iter()
        .map(
            |u| match (&u.backend_user, &u.backend_password, &u.password) {
                (Some(bu), _, _) => bu.as_str(),
                (None, Some(_), _) | (None, None, Some(_)) => u.name.as_str(),
                _ => c.backend.user.as_str(),
            },
        )
        .find(|a| !seen.insert(*a))
}

fn validate(c: &Config) -> Result<(), ConfigError> {
    let mut errs = Vec::new();
    if let Ok(a) = c.admin_listen.parse::<SocketAddr>()
        && !a.ip().is_loopback()
        && c.admin_token_file.trim().is_empty()
    {
        errs.push(format!(
            "admin_listen: {} is reachable from other hosts, so /status and POST /reload \
             need a token: set admin_token_file (a file holding the bearer token) or \
             listen on a loopback address",
            c.admin_listen
        ));
    }
    let ip_port = |v: &str| v.parse::<SocketAddr>().is_ok();
    if let Some(p) = Address::parse(&c.listen).problem(ip_port) {
        errs.push(format!(
            "listen: {:?} {}",
            c.listen,
            p.replace("host:port", "ip:port")
        ));
    }
    if !ip_port(&c.admin_listen) {
        errs.push(format!(
            "admin_listen: {:?} is not an ip:port address",
            c.admin_listen
        ));
    }
    let host_port = |v: &str| !v.is_empty() && v.contains(':');
    let servers = c.backend.servers();
    if servers.is_empty() {
        errs.push("backend.address: no server address".into());
    }
    for a in &servers {
        if let Some(p) = Address::parse(a).problem(host_port) {
            errs.push(format!("backend.address: {a:?} {p}"));
        }
    }
    for (i, a) in servers.iter().enumerate() {
        if servers[..i].contains(a) {
            errs.push(format!("backend.address: {a:?} is listed twice"));
        }
    }
    if servers.len() > 1 && c.backend.health_check_interval_ms == 0 {
        errs.push(
            "backend.health_check_interval_ms: 0 (no checks) with several servers: the primary would never be chosen".into(),
        );
    }
    if c.backend.health_check_interval_ms > 3_600_000 {
        errs.push("backend.health_check_interval_ms: at most 3600000 (an hour)".into());
    }
    if c.backend.health_check_failures == 0 {
        errs.push("backend.health_check_failures: must be at least 1".into());
    }
    errs.extend(socket_file_errors(c));
    if !c.takeover_socket.is_empty() && !std::path::Path::new(&c.takeover_socket).is_absolute() {
        errs.push(format!(
            "takeover_socket: {:?} must be an absolute path (or empty: no hand-over)",
            c.takeover_socket
        ));
    }
    let p = &c.pool;
    if p.oversubscribe > 1000 {
        errs.push("pool.oversubscribe: must be at most 1000".into());
    }
    if p.proxies_per_server == 0 {
        errs.push("pool.proxies_per_server: must be at least 1".into());
    }
    if p.wait_probe_ms != 0 && !(10..=60_000).contains(&p.wait_probe_ms) {
        errs.push("pool.wait_probe_ms: 0 (off) or 10 to 60000".into());
    }
    if p.thread_groups > 1024 {
        errs.push("pool.thread_groups: must be at most 1024".into());
    }
    if p.max_backend_connections != 0 && p.max_backend_connections < p.effective_groups() {
        errs.push(format!(
            "pool.max_backend_connections: {} is less than one per thread group ({} groups)",
            p.max_backend_connections,
            p.effective_groups()
        ));
    }
    if p.stall_limit_ms == 0 {
        errs.push("pool.stall_limit_ms: must be positive".into());
    }
    if p.queue_timeout_ms == 0 {
        errs.push("pool.queue_timeout_ms: must be positive".into());
    }
    if p.max_client_connections == 0 {
        errs.push("pool.max_client_connections: must be positive".into());
    }
    if !(1..=MAX_WEIGHT).contains(&p.default_user_weight) {
        errs.push(format!(
            "pool.default_user_weight: must be between 1 and {MAX_WEIGHT}"
        ));
    }
    if c.frontend.max_allowed_packet < 1024 || c.frontend.max_allowed_packet > 1 << 30 {
        errs.push("frontend.max_allowed_packet: must be between 1024 and 1073741824".into());
    }
    if c.frontend.max_unauthenticated == 0 || c.frontend.max_unauthenticated_per_address == 0 {
        errs.push(
            "frontend.max_unauthenticated / max_unauthenticated_per_address: must be positive"
                .into(),
        );
    }
    if c.frontend.client_write_timeout_ms == 0 {
        errs.push("frontend.client_write_timeout_ms: must be positive".into());
    }
    if c.frontend.tls_cert.is_empty() != c.frontend.tls_key.is_empty() {
        errs.push("frontend.tls_cert / frontend.tls_key: set both or neither".into());
    }
    if c.frontend.require_tls && c.frontend.tls_cert.is_empty() {
        errs.push("frontend.require_tls: needs frontend.tls_cert and frontend.tls_key".into());
    }
    if c.digests.max_digests == 0 || c.digests.max_digests > 1_000_000 {
        errs.push(
            "digests.max_digests: must be between 1 and 1000000 (enabled = false turns digests off)"
                .into(),
        );
    }
    if c.routing.causal_wait_ms > 60_000 {
        errs.push("routing.causal_wait_ms: at most 60000".into());
    }
    if c.routing.max_replication_lag_s > 86_400 {
        errs.push("routing.max_replication_lag_s: at most 86400".into());
    }
    if c.digests.max_text_bytes < 16 {
        errs.push("digests.max_text_bytes: must be at least 16".into());
    }
    if c.users.is_empty() && !c.server_users.enabled {
        errs.push("users: at least one [[users]] entry is needed (or server_users.enabled)".into());
    }
    errs.extend(c.server_users.errors());
    if c.pool.code_catalog_refresh_ms == 0
        && !c.pool.allow_unplannable_kill
        && let Some(account) = shared_backend_account(c)
    {
        errs.push(format!(
            "pool.code_catalog_refresh_ms = 0 with [[users]] entries sharing the backend account {account:?}: myplex could not tell which statements run stored code that may KILL another client's backend thread, and would refuse every statement that may run stored code for them; give each user its own backend account, read the catalog (a positive interval), or set pool.allow_unplannable_kill = true"
        ));
    }
    let mut seen = std::collections::HashSet::new();
    for (i, u) in c.users.iter().enumerate() {
        let key = format!("users[{i}]");
        if u.name.is_empty() {
            errs.push(format!("{key}.name: must not be empty"));
        }
        if !seen.insert(u.name.as_str()) {
            errs.push(format!("{key}.name: duplicate user {:?}", u.name));
        }
        let n = [
            u.password.is_some(),
            u.password_sha1.is_some(),
            u.password_sha256.is_some(),
        ]
        .iter()
        .filter(|x| **x)
        .count();
        if n != 1 {
            errs.push(format!(
                "{key}: set exactly one of password, password_sha1, password_sha256"
            ));
        }
        if let Some(h) = &u.password_sha1
            && crate::frontend::auth::parse_sha1_hash(h).is_none()
        {
            errs.push(format!(
                "{key}.password_sha1: must be '*' followed by 40 hex digits"
            ));
        }
        if let Some(h) = &u.password_sha256
            && crate::frontend::auth::parse_sha256_hash(h).is_none()
        {
            errs.push(format!("{key}.password_sha256: must be 64 hex digits"));
        }
        if !(1..=MAX_WEIGHT).contains(&u.weight) {
            errs.push(format!("{key}.weight: must be between 1 and {MAX_WEIGHT}"));
        }
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(ConfigError::Invalid(errs))
    }
}

/// Problems with `listen_socket_mode` / `_owner` / `_group`.
fn socket_file_errors(c: &Config) -> Vec<String> {
    let mut errs = Vec::new();
    let unix = Address::parse(&c.listen).unix_path().is_some();
    for (key, v) in [
        ("listen_socket_mode", &c.listen_socket_mode),
        ("listen_socket_owner", &c.listen_socket_owner),
        ("listen_socket_group", &c.listen_socket_group),
    ] {
        if !v.is_empty() && !unix {
            errs.push(format!(
                "{key}: only applies when listen is a Unix socket path"
            ));
        }
    }
    if !c.listen_socket_mode.is_empty() && socket_mode(&c.listen_socket_mode).is_none() {
        errs.push(format!(
            "listen_socket_mode: {:?} is not an octal mode between 0000 and 0777",
            c.listen_socket_mode
        ));
    }
    errs
}

/// `listen_socket_mode` as permission bits (octal, at most 0777).
pub fn socket_mode(v: &str) -> Option<u32> {
    u32::from_str_radix(v, 8).ok().filter(|m| *m <= 0o777)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_default_is_valid() {
        let c = load_str(DEFAULT_TOML).expect("default config loads");
        assert_eq!(c.listen, "127.0.0.1:6033");
        assert_eq!(c.backend.address, "127.0.0.1:3306");
    }

    #[test]
    fn example_is_valid() {
        let text = include_str!("../../config/myplex.example.toml");
        load_str(text).expect("example config loads");
    }

    #[test]
    fn session_threads_are_half_the_cpus_beside_the_server_and_at_most_the_groups() {
        let cpus = super::super::model::cpus();
        let with = |lines: &str| {
            load_str(&format!(
                "{lines}\n[[users]]\nname = \"a\"\npassword = \"b\"\n"
            ))
            .expect("loads")
        };
        let local = with("[backend]\naddress = \"127.0.0.1:3306\"");
        assert_eq!(local.effective_session_threads(), (cpus / 2).max(1));
        let socket = with("[backend]\naddress = \"/run/mysqld/mysqld.sock\"");
        assert_eq!(socket.effective_session_threads(), (cpus / 2).max(1));
        let remote = with("[backend]\naddress = \"10.1.2.3:3306\"");
        assert_eq!(remote.effective_session_threads(), cpus);
        let set = with("session_threads = 3\n[pool]\nthread_groups = 8");
        assert_eq!(set.effective_session_threads(), 3);
        let capped = with("session_threads = 5\n[pool]\nthread_groups = 2");
        assert_eq!(
            capped.effective_session_threads(),
            2,
            "never more than the groups"
        );
    }

    #[test]
    fn takeover_socket_is_an_absolute_path_or_empty() {
        let with = |v: &str| {
            load_str(&format!(
                "takeover_socket = \"{v}\"\n[[users]]\nname = \"a\"\npassword = \"b\"\n"
            ))
        };
        with("/run/myplex/takeover.sock").expect("absolute path");
        with("").expect("empty: no hand-over");
        let err = with("takeover.sock").expect_err("relative");
        assert!(err.to_string().contains("takeover_socket"), "{err}");
    }

    #[test]
    fn never_reading_the_catalog_needs_backend_accounts_of_their_own() {
        let users = "[[users]]\nname = \"a\"\npassword = \"x\"\nbackend_user = \"app\"\n\
                     [[users]]\nname = \"b\"\npassword = \"y\"\nbackend_user = \"app\"\n";
        let err = load_str(&format!("[pool]\ncode_catalog_refresh_ms = 0\n{users}"))
            .expect_err("shared account, catalog never read");
        assert!(err.to_string().contains("\"app\""), "{err}");
        load_str(&format!(
            "[pool]\ncode_catalog_refresh_ms = 0\nallow_unplannable_kill = true\n{users}"
        ))
        .expect("the operator allows it");
        load_str(users).expect("the catalog is read");
        load_str(
            "[pool]\ncode_catalog_refresh_ms = 0\n[[users]]\nname = \"a\"\npassword = \"x\"\n\
             [[users]]\nname = \"b\"\npassword = \"y\"\n",
        )
        .expect("accounts of their own");
    }

    #[test]
    fn unknown_key_is_rejected_with_its_name() {
        let err =
            load_str("listen = \"127.0.0.1:1\"\n[pool]\nthreads = 3\n").expect_err("unknown key");
        assert!(err.to_string().contains("threads"), "{err}");
    }

    #[test]
    fn several_servers_as_a_list_or_one_string() {
        let users = "[[users]]\nname = \"a\"\npassword = \"b\"\n";
        let with = |address: &str| load_str(&format!("[backend]\naddress = {address}\n{users}"));
        let c = with("[\"db1:3306\", \"/run/mysqld/mysqld.sock\"]").expect("a list");
        assert_eq!(c.backend.servers(), ["db1:3306", "/run/mysqld/mysqld.sock"]);
        let c = with("\"db1:3306, db2:3306\"").expect("one string");
        assert_eq!(c.backend.servers(), ["db1:3306", "db2:3306"]);
        let c = with("\"db1:3306\"").expect("one server");
        assert_eq!(c.backend.servers(), ["db1:3306"]);
        let s = with("[\"db1:3306\", \"db1:3306\"]")
            .expect_err("twice")
            .to_string();
        assert!(s.contains("listed twice"), "{s}");
        let s = with("[\"db1:3306\", \"nonsense\"]")
            .expect_err("bad")
            .to_string();
        assert!(s.contains("\"nonsense\""), "{s}");
        let s = with("[\"db1:3306\", \"a,b:1\"]")
            .expect_err("comma")
            .to_string();
        assert!(s.contains("comma"), "{s}");
        let s = with("[]").expect_err("none").to_string();
        assert!(s.contains("no server address"), "{s}");
    }

    #[test]
    fn unix_socket_addresses() {
        let ok = "listen = \"/tmp/myplex.sock\"\nlisten_socket_mode = \"0660\"\n[backend]\naddress = \"unix:/run/mysqld/mysqld.sock\"\n[[users]]\nname = \"a\"\npassword = \"b\"\n";
        let c = load_str(ok).expect("socket paths load");
        assert_eq!(socket_mode(&c.listen_socket_mode), Some(0o660));
        let bad = "listen = \"unix:rel.sock\"\nlisten_socket_mode = \"0999\"\n[backend]\naddress = \"unix:x\"\n[[users]]\nname = \"a\"\npassword = \"b\"\n";
        let s = load_str(bad).expect_err("invalid").to_string();
        assert!(s.contains("listen: "), "{s}");
        assert!(s.contains("listen_socket_mode"), "{s}");
        assert!(s.contains("backend.address"), "{s}");
        let tcp_mode = "listen_socket_owner = \"me\"\n[[users]]\nname = \"a\"\npassword = \"b\"\n";
        let s = load_str(tcp_mode).expect_err("invalid").to_string();
        assert!(s.contains("listen_socket_owner: only applies"), "{s}");
    }

    #[test]
    fn bad_values_are_all_reported() {
        let err =
            load_str("listen = \"nope\"\n[pool]\nqueue_timeout_ms = 0\n[[users]]\nname = \"a\"\n")
                .expect_err("invalid");
        let s = err.to_string();
        assert!(s.contains("listen"), "{s}");
        assert!(s.contains("pool.queue_timeout_ms"), "{s}");
        assert!(s.contains("users[0]"), "{s}");
    }
}
