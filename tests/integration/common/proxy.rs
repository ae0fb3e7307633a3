//! An in-process myplex in front of a test MariaDB, configured like a
//! sentence: `Proxy::builder(db).groups(2).max_backend(4).start().await`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use myplex::config::{Config, PoolMode, UserConfig};
use myplex::frontend::Shared;
use myplex::shutdown::{self, ShutdownTrigger};

use super::mariadb::{APP_PASSWORD, APP_USER, MariaDb, OTHER_PASSWORD, OTHER_USER};

/// A running proxy; stops when dropped.
pub struct Proxy {
    /// Where TCP clients connect (`0.0.0.0:0` when the proxy listens on a
    /// Unix socket: see `socket`).
    pub addr: SocketAddr,
    /// The Unix socket clients connect to, when listening on one.
    pub socket: Option<PathBuf>,
    /// The shared context (pool snapshots for assertions).
    pub shared: Arc<Shared>,
    /// The admin HTTP endpoint.
    pub admin: SocketAddr,
    trigger: ShutdownTrigger,
}

/// Builds a proxy config.
pub struct ProxyBuilder {
    cfg: Config,
}

/// GET `path` from an admin endpoint at `addr` (an in-process proxy's or a
/// binary's): (status code, body).
pub async fn admin_get(addr: impl tokio::net::ToSocketAddrs, path: &str) -> (u16, String) {
    admin_request(addr, "GET", path, "").await
}

/// `method path` to an admin endpoint at `addr`, with `headers` (each
/// ending in CRLF) after the Host line: (status code, body).
pub async fn admin_request(
    addr: impl tokio::net::ToSocketAddrs,
    method: &str,
    path: &str,
    headers: &str,
) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr)
        .await
        .expect("admin connect");
    s.write_all(format!("{method} {path} HTTP/1.1\r\nHost: x\r\n{headers}\r\n").as_bytes())
        .await
        .expect("admin write");
    let mut out = String::new();
    s.read_to_string(&mut out).await.expect("admin read");
    let code = out.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = out
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (code, body)
}

impl Proxy {
    /// A proxy in front of `db` with users app/secret and other/otherpw.
    pub fn builder(db: &MariaDb) -> ProxyBuilder {
        let mut cfg = Config {
            listen: "127.0.0.1:0".into(),
            ..Default::default()
        };
        cfg.backend.address = db.addr();
        cfg.backend.user = APP_USER.into();
        cfg.backend.password = APP_PASSWORD.into();
        cfg.pool.thread_groups = 2;
        cfg.pool.max_backend_connections = 8;
        cfg.users = vec![
            UserConfig {
                name: APP_USER.into(),
                password: Some(APP_PASSWORD.into()),
                ..Default::default()
            },
            UserConfig {
                name: OTHER_USER.into(),
                password: Some(OTHER_PASSWORD.into()),
                ..Default::default()
            },
        ];
        ProxyBuilder { cfg }
    }

    /// `mysql://user:pw@proxy/db`. `prefer_socket=false` matters: by
    /// default mysql_async asks for `@@socket` after login and, seeing a
    /// local server, silently reconnects over that unix socket, bypassing
    /// the proxy.
    pub fn url(&self, user: &str, password: &str, db: &str) -> String {
        format!(
            "mysql://{user}:{password}@{}/{db}?prefer_socket=false",
            self.addr
        )
    }

    /// `mysql://user:pw@localhost/db` through the proxy's Unix socket.
    pub fn socket_url(&self, user: &str, password: &str, db: &str) -> String {
        let socket = self.socket.as_ref().expect("proxy listens on a socket");
        format!(
            "mysql://{user}:{password}@localhost/{db}?socket={}",
            socket.display()
        )
    }

    /// The app user's URL for database `test`.
    pub fn app_url(&self) -> String {
        self.url(APP_USER, APP_PASSWORD, "test")
    }

    /// GET `path` from the admin endpoint: (status code, body).
    pub async fn http_get(&self, path: &str) -> (u16, String) {
        admin_get(self.admin, path).await
    }

    /// Good readings of the catalog of stored code so far.
    pub fn catalog_readings(&self) -> u64 {
        let refresh = Duration::from_millis(self.shared.config.load().pool.code_catalog_refresh_ms);
        self.shared.pool.code_catalog.status(refresh).readings
    }

    /// Waits until the catalog of stored code is known and has been read
    /// at least twice since `since` readings (one that began before a
    /// change made on the server may not show it).
    pub async fn catalog_learnt_since(&self, since: u64, within: Duration) {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let refresh =
                Duration::from_millis(self.shared.config.load().pool.code_catalog_refresh_ms);
            let s = self.shared.pool.code_catalog.status(refresh);
            if s.state == "known" && s.readings >= since + 2 {
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "catalog not read again: {s:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Backend connections owned across all groups.
    pub fn backends_owned(&self) -> usize {
        self.shared
            .pool
            .groups
            .iter()
            .map(|g| g.snapshot().owned)
            .sum()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.trigger.trigger();
    }
}

impl ProxyBuilder {
    /// Thread groups.
    pub fn groups(mut self, n: usize) -> Self {
        self.cfg.pool.thread_groups = n;
        self
    }
    /// Total backend connections.
    pub fn max_backend(mut self, n: usize) -> Self {
        self.cfg.pool.max_backend_connections = n;
        self
    }
    /// In-flight cap = 1 + n.
    pub fn oversubscribe(mut self, n: usize) -> Self {
        self.cfg.pool.oversubscribe = n;
        self
    }
    /// Queue timeout.
    pub fn queue_timeout_ms(mut self, ms: u64) -> Self {
        self.cfg.pool.queue_timeout_ms = ms;
        self
    }
    /// Session pooling.
    pub fn session_mode(mut self) -> Self {
        self.cfg.pool.mode = PoolMode::Session;
        self
    }
    /// Listen on a Unix socket file at `path` instead of TCP.
    pub fn listen_unix(mut self, path: &std::path::Path) -> Self {
        self.cfg.listen = path.display().to_string();
        self
    }
    /// The backend through its Unix socket.
    pub fn backend_socket(mut self, db: &MariaDb) -> Self {
        self.cfg.backend.address = db.socket.display().to_string();
        self
    }
    /// Any other change.
    pub fn with(mut self, f: impl FnOnce(&mut Config)) -> Self {
        f(&mut self.cfg);
        self
    }

    /// Binds 127.0.0.1:0 (or the configured Unix socket) and serves in
    /// the current runtime.
    pub async fn start(self) -> Proxy {
        trace_to_file();
        let socket = myplex::config::Address::parse(&self.cfg.listen)
            .unix_path()
            .map(|p| p.to_path_buf());
        let listener: myplex::listener::Listener = match socket {
            Some(_) => myplex::listener::Listener::bind(&self.cfg).expect("bind proxy socket"),
            None => myplex::server::bind("127.0.0.1:0", self.cfg.listen_backlog)
                .expect("bind proxy")
                .into(),
        };
        let addr = listener
            .local_addr()
            .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)));
        let (trigger, sd) = shutdown::channel();
        let shared = myplex::server::build(self.cfg, sd)
            .await
            .expect("proxy builds");
        tokio::spawn(myplex::server::run(
            listener,
            shared.clone(),
            Duration::from_secs(1),
        ));
        let admin_listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind admin");
        let admin = admin_listener.local_addr().expect("admin addr");
        tokio::spawn(myplex::admin::http::serve(admin_listener, shared.clone()));
        Proxy {
            addr,
            socket,
            shared,
            admin,
            trigger,
        }
    }
}

/// `MYPLEX_TEST_LOG=<file>` (with `RUST_LOG` as the filter, `debug` if
/// unset) sends the in-process proxies' tracing to that file, for working
/// on a failure; without it tests log nothing.
fn trace_to_file() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    let Some(path) = std::env::var_os("MYPLEX_TEST_LOG") else {
        return;
    };
    ONCE.call_once(|| {
        let file = std::fs::File::create(&path).expect("create MYPLEX_TEST_LOG file");
        let filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("debug"));
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_ansi(false)
            .with_writer(std::sync::Mutex::new(file))
            .try_init();
    });
}
