//! The accept loop and process setup: build the shared context from the
//! config, raise the open-files limit, accept clients (TCP or Unix socket,
//! see `crate::listener`) (with the connection
//! limit and a reserve descriptor for refusing clients when descriptors run
//! out), and run one task per client.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::BytesMut;
use tokio::net::TcpListener;
use tokio::time::Instant;
use tracing::{Instrument, debug, info, info_span, warn};

use crate::backend::{self, BackendParams, ServerInfo};
use crate::config::Config;
use crate::frontend::admission::{Admission, Bounds, LoggedInGuard};
use crate::frontend::auth::Credential;
use crate::frontend::handshake;
use crate::frontend::session::{End, Session};
use crate::frontend::throttle::{self, Throttle};
use crate::frontend::{Shared, User};
use crate::listener::{Detached, Listener};
use crate::pool::Pool;
use crate::protocol::errors;
use crate::protocol::session_track::ClientTrackers;
use crate::shutdown::Shutdown;
use crate::wire::{PacketIo, Peer, Socket, Stream};

/// Errors that stop the proxy from starting.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A config value could not be turned into a running part.
    #[error("{0}")]
    Setup(String),
}

/// Binds a listener with a backlog big enough for connection storms (the
/// default of 128 overflows when thousands of clients connect at once, and
/// overflowed clients hang until their own timeout).
pub fn bind(addr: &str, backlog: u32) -> std::io::Result<TcpListener> {
    let addr: SocketAddr = addr.parse().map_err(|e| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{addr}: {e}"))
    })?;
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(backlog)
}

/// Raises the soft open-files limit to the hard limit; returns the new soft limit.
pub fn raise_fd_limit() -> Option<u64> {
    let (soft, hard) = rlimit::Resource::NOFILE.get().ok()?;
    if soft < hard {
        rlimit::Resource::NOFILE.set(hard, hard).ok()?;
    }
    Some(hard.max(soft))
}

pub(crate) fn load_server_tls(
    cfg: &Config,
) -> Result<Option<Arc<rustls::ServerConfig>>, StartError> {
    let f = &cfg.frontend;
    if f.tls_cert.is_empty() {
        return Ok(None);
    }
    let certs = std::fs::read(&f.tls_cert)
        .map_err(|e| StartError::Setup(format!("frontend.tls_cert {}: {e}", f.tls_cert)))?;
    let certs = rustls_pemfile::certs(&mut certs.as_slice())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| StartError::Setup(format!("frontend.tls_cert {}: {e}", f.tls_cert)))?;
    let key = std::fs::read(&f.tls_key)
        .map_err(|e| StartError::Setup(format!("frontend.tls_key {}: {e}", f.tls_key)))?;
    let key = rustls_pemfile::private_key(&mut key.as_slice())
        .map_err(|e| StartError::Setup(format!("frontend.tls_key {}: {e}", f.tls_key)))?
        .ok_or_else(|| {
            StartError::Setup(format!("frontend.tls_key {}: no private key", f.tls_key))
        })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let sc = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| StartError::Setup(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| StartError::Setup(format!("frontend TLS: {e}")))?;
    Ok(Some(Arc::new(sc)))
}

/// A backend login: (user, password).
pub(crate) type BackendLogin = (String, String);

/// Builds users and credential pools: one pool per distinct backend login.
/// `pools` holds the logins known so far (a reload keeps their indexes and
/// appends new ones).
pub(crate) fn users_and_pools(
    cfg: &Config,
    mut pools: Vec<BackendLogin>,
) -> Result<(Vec<User>, Vec<BackendLogin>), StartError> {
    let mut users = Vec::new();
    for u in &cfg.users {
        let credential = Credential::from_user(u)
            .ok_or_else(|| StartError::Setup(format!("user {}: no usable password", u.name)))?;
        let (bu, bp) = match (&u.backend_user, &u.backend_password, &u.password) {
            (Some(bu), Some(bp), _) => (bu.clone(), bp.clone()),
            (Some(bu), None, Some(pw)) => (bu.clone(), pw.clone()),
            (None, Some(bp), _) => (u.name.clone(), bp.clone()),
            (None, None, Some(pw)) => (u.name.clone(), pw.clone()),
            _ => (cfg.backend.user.clone(), cfg.backend.password.clone()),
        };
        let idx = match pools.iter().position(|p| *p == (bu.clone(), bp.clone())) {
            Some(i) => i,
            None => {
                pools.push((bu, bp));
                pools.len() - 1
            }
        };
        users.push(User {
            name: u.name.clone(),
            credential,
            pool: idx,
            admin: u.admin,
            enabled: true,
        });
    }
    if pools.is_empty() {
        // Only server users (`[server_users]`): pool 0 is `[backend]`'s.
        pools.push((cfg.backend.user.clone(), cfg.backend.password.clone()));
    }
    Ok((users, pools))
}

/// Login parameters of each credential pool.
pub(crate) fn backend_params(
    cfg: &Config,
    logins: Vec<BackendLogin>,
    tls: Option<Arc<rustls::ClientConfig>>,
) -> Vec<BackendParams> {
    logins
        .into_iter()
        .enumerate()
        .map(|(i, (user, password))| BackendParams {
            // With several servers each dial takes the primary's address
            // (`crate::pool::servers`); the first one until it is known.
            address: cfg
                .backend
                .servers()
                .first()
                .map_or_else(|| cfg.backend.address.clone(), |a| a.to_string()),
            user,
            password,
            tls: tls.clone(),
            connect_timeout: Duration::from_millis(cfg.backend.connect_timeout_ms),
            pool: i,
            flavour: crate::protocol::caps::Flavour::DEFAULT,
            native_stage1: None,
        })
        .collect()
}

/// Everything `run` needs, built from a config.
pub async fn build(cfg: Config, shutdown: Shutdown) -> Result<Arc<Shared>, StartError> {
    let tls = load_server_tls(&cfg)?;
    let backend_tls = if cfg.backend.tls {
        Some(backend::tls::client_config(&cfg.backend.tls_ca).map_err(StartError::Setup)?)
    } else {
        None
    };
    let (users, pool_creds) = users_and_pools(&cfg, Vec::new())?;
    let params = backend_params(&cfg, pool_creds, backend_tls);
    // Learn the server's version and collation to mirror them; if the
    // backend is down at start, use a neutral greeting until it is up.
    let mut server = ServerInfo {
        version: b"5.5.5-10.11.0-MariaDB-myplex".to_vec(),
        collation: 45,
        session_status: crate::protocol::packets::status::AUTOCOMMIT,
        ..Default::default()
    };
    let mut trackers = default_trackers();
    let mut templates = crate::frontend::session::local::Templates::default();
    let limits = crate::backend::conn::ServerLimits::default();
    let mut start_error = None;
    // The first server that answers (with several, any of them tells the
    // version and collations to mirror until the primary is dialed).
    let mut first = backend::connect(&params[0]).await;
    for address in cfg.backend.servers().iter().skip(1) {
        if first.is_ok() {
            break;
        }
        first = backend::connect(&params[0].over(address)).await;
    }
    match first {
        Ok((mut conn, info)) => {
            info!(version = %String::from_utf8_lossy(&info.version), "backend reachable");
            server = info;
            server.collations = backend::connect::learn_collations(&mut conn)
                .await
                .ok()
                .map(Arc::new);
            if let Err(e) = conn.learn_limits(&limits).await {
                warn!(error = %e, "could not read the server's packet and statement limits");
            }
            if let Some(t) = probe_trackers(&mut conn).await {
                trackers = t;
            }
            templates.connection_id = conn
                .column_def("SELECT CONNECTION_ID()")
                .await
                .ok()
                .flatten();
            templates.found_rows = conn.column_def("SELECT FOUND_ROWS()").await.ok().flatten();
            templates.row_count = conn.column_def("SELECT ROW_COUNT()").await.ok().flatten();
            match crate::frontend::session::admin_local::ServerVars::capture(&mut conn).await {
                Ok(v) => templates.server_vars = Some(Arc::new(v)),
                Err(e) => {
                    warn!(error = %e, "could not read the server's variables (admin sessions will need a backend for SET NAMES)")
                }
            }
        }
        Err(e) => {
            warn!(error = %e, address = %cfg.backend.address, "backend not reachable at start; will retry per request");
            start_error = Some(e);
        }
    }
    let server_users = crate::server_users::ServerUsers::new(&cfg, &params[0]);
    let cfg_registry_size = cfg.pool.prepared_registry_size;
    let cfg_groups = cfg.pool.effective_groups();
    let cfg_max_digests = cfg.digests.max_digests;
    let workers = match cfg.runtime {
        crate::config::RuntimeMode::Shared => None,
        crate::config::RuntimeMode::PerGroup => Some(
            crate::workers::Workers::start(
                cfg.effective_session_threads(),
                cfg.worker_priority_boost,
            )
            .map_err(|e| StartError::Setup(format!("starting the group workers: {e}")))?,
        ),
    };
    let pool = Pool::new(&cfg, params, server);
    if let Some(su) = &server_users
        && pool.servers.len() > 1
    {
        let weak = Arc::downgrade(&pool);
        su.follow(move || {
            weak.upgrade()
                .and_then(|p| p.servers.primary().map(|(_, address)| address))
        });
    }
    pool.spawn_maintenance();
    // Before anything below dials: with several servers a dial waits for
    // the checks to choose the primary.
    tokio::spawn(crate::pool::server_checks::run(
        shutdown.clone(),
        Arc::downgrade(&pool),
    ));
    // The first reading of the views and triggers before clients come: until
    // it is read, every statement naming a table is reset after.
    let mut catalog_reader = crate::pool::code_catalog::Reader::default();
    if start_error.is_none() && cfg.pool.code_catalog_refresh_ms > 0 {
        let all = crate::pool::code_catalog::sees_for_all(&cfg);
        let interval = Duration::from_millis(cfg.pool.code_catalog_refresh_ms);
        let limit = Duration::from_millis(cfg.backend.connect_timeout_ms)
            .max(Duration::from_secs(2))
            .max(interval * 2);
        pool.code_catalog
            .refresh(
                &pool,
                &mut catalog_reader,
                !all,
                interval.max(limit / 2),
                limit,
            )
            .await;
    }
    if let Some(e) = start_error
        && pool.health.record(Err(&e))
    {
        pool.start_health_probe();
    }
    let admission = Admission::new(Bounds {
        total: cfg.frontend.max_unauthenticated,
        per_address: cfg.frontend.max_unauthenticated_per_address,
    });
    let throttle = Throttle::new(throttle::Settings {
        free_failures: cfg.frontend.auth_throttle_free_failures,
        max_delay: Duration::from_millis(cfg.frontend.auth_throttle_max_delay_ms),
    });
    let shared = Arc::new(Shared {
        config: arc_swap::ArcSwap::from_pointee(cfg),
        config_path: Default::default(),
        pool,
        users: arc_swap::ArcSwap::from_pointee(crate::frontend::Users(users)),
        server_users,
        tls: arc_swap::ArcSwapOption::new(tls),
        trackers,
        clients: Default::default(),
        next_id: std::sync::atomic::AtomicU32::new(1),
        known_schemas: Default::default(),
        templates,
        sessions: Default::default(),
        slow_log: crate::slow_log::SlowLog::new(std::time::Instant::now()),
        workers,
        metrics: crate::metrics::Metrics::new(cfg_groups),
        digests: crate::metrics::digests::Digests::new(cfg_max_digests),
        registry: std::sync::Mutex::new(crate::prepared::Registry::new(cfg_registry_size)),
        limits,
        shutdown,
        admission,
        throttle,
        mover: Default::default(),
    });
    let weak = Arc::downgrade(&shared);
    tokio::spawn(shared.pool.code_catalog.clone().run(
        catalog_reader,
        shared.shutdown.clone(),
        move || {
            let s = weak.upgrade()?;
            Some((s.config.load_full(), s.pool.clone()))
        },
    ));
    Ok(shared)
}

/// MariaDB / MySQL defaults for a client's own trackers.
fn default_trackers() -> ClientTrackers {
    ClientTrackers {
        schema: true,
        state_change: false,
        system_variables: Some(
            [
                "autocommit",
                "character_set_client",
                "character_set_connection",
                "character_set_results",
                "time_zone",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
        ),
        transaction_info: false,
    }
}

/// Reads the server's global tracker settings: what a direct client sees.
async fn probe_trackers(conn: &mut backend::BackendConn) -> Option<ClientTrackers> {
    let row = conn
        .query_row("SELECT @@global.session_track_schema, @@global.session_track_state_change, @@global.session_track_system_variables, @@global.session_track_transaction_info")
        .await
        .ok()??;
    let get = |i: usize| row.get(i).cloned().flatten().unwrap_or_default();
    Some(ClientTrackers::from_values(
        &get(0),
        &get(1),
        &get(2),
        &get(3),
    ))
}

/// Accepts clients on `listener` (TCP or a Unix socket) until shutdown,
/// closes it (a socket file is removed), then waits for sessions to drain
/// (bounded by `drain`).
pub async fn run(listener: impl Into<Listener>, shared: Arc<Shared>, drain: Duration) {
    let listener = listener.into();
    let mut shutdown = shared.shutdown.clone();
    // Kept open so that when descriptors run out one can be freed to accept
    // and refuse a client with a proper error instead of leaving it hanging.
    let mut reserve = std::fs::File::open("/dev/null").ok();
    let flusher = tokio::spawn(flush_slow_log(shared.clone()));
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = shutdown.wait() => break,
        };
        match accepted {
            Ok((socket, peer)) => {
                let shared = shared.clone();
                let id = next_client_id(&shared);
                let span = info_span!("client", client.id = id, client.addr = %peer);
                let count = ClientCount::new(&shared);
                spawn_client(shared, socket, peer, id, count, span);
            }
            Err(e) if matches!(e.raw_os_error(), Some(23) | Some(24)) => {
                warn!("out of file descriptors; refusing a client");
                shared.metrics.rejected("fd_exhausted");
                reserve.take();
                if let Ok((socket, _)) = listener.accept().await {
                    refuse(
                        socket,
                        errors::out_of_resources("proxy has no free file descriptors"),
                    )
                    .await;
                }
                reserve = std::fs::File::open("/dev/null").ok();
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(e) => {
                warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    }
    // No new clients while draining: the port closes, a socket file goes.
    drop(listener);
    info!(clients = shared.clients.load(Ordering::Relaxed), "draining");
    let until = Instant::now() + drain;
    // Sessions the previous process may still move here count too (a
    // second upgrade right after the first passes them on).
    while (shared.clients.load(Ordering::Relaxed) > 0 || shared.mover.receiving())
        && Instant::now() < until
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    flusher.abort();
    shared.slow_log.flush_all();
}

/// Writes the slow log's aggregate line when a window ends, even when no
/// further slow statement arrives to carry it.
async fn flush_slow_log(shared: Arc<Shared>) {
    let mut tick = tokio::time::interval(crate::slow_log::INTERVAL / 2);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        shared.slow_log.flush_due();
    }
}

/// Runs a client's session: on its thread group's worker when there are
/// workers (the socket is moved to that worker's reactor), else here.
fn spawn_client(
    shared: Arc<Shared>,
    socket: Socket,
    peer: Peer,
    id: u32,
    count: ClientCount,
    span: tracing::Span,
) {
    let Some(workers) = shared.workers.as_ref() else {
        tokio::spawn(client(shared, socket, peer, id, count, span));
        return;
    };
    let group = shared.pool.group_for(id).id;
    let detached = match Detached::from_socket(socket) {
        Ok(s) => s,
        Err(e) => {
            warn!(error = %e, "could not hand a client socket to its worker");
            return;
        }
    };
    let task = {
        let shared = shared.clone();
        async move {
            match detached.attach() {
                Ok(socket) => client(shared, socket, peer, id, count, span).await,
                Err(e) => span.in_scope(
                    || warn!(error = %e, "could not register a client socket on its worker"),
                ),
            }
        }
    };
    workers.spawn(group, task);
}

/// The next proxy connection id: never 0, never one a live session holds
/// (the counter wraps after 2^32 connections).
fn next_client_id(shared: &Shared) -> u32 {
    loop {
        let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
        let live = shared
            .sessions
            .lock()
            .map(|m| m.contains_key(&id))
            .unwrap_or(false);
        if id != 0 && !live {
            return id;
        }
    }
}

async fn refuse(socket: Socket, e: crate::protocol::packets::ErrPacket) {
    let mut io = PacketIo::new(Stream::from(socket));
    let mut b = BytesMut::new();
    e.write(&mut b);
    let _ = tokio::time::timeout(Duration::from_secs(1), io.send_packet(0, &b)).await;
}

/// One accepted client in `Shared::clients`, counted from the accept on:
/// the drain never ends (and the process never exits) between an accept
/// and the start of that client's task.
struct ClientCount(Arc<Shared>);

impl ClientCount {
    fn new(shared: &Arc<Shared>) -> Self {
        let n = shared.clients.fetch_add(1, Ordering::Relaxed) + 1;
        shared.metrics.client_connections.set(n as f64);
        Self(shared.clone())
    }
}

impl Drop for ClientCount {
    fn drop(&mut self) {
        let n = self.0.clients.fetch_sub(1, Ordering::Relaxed) - 1;
        self.0.metrics.client_connections.set(n as f64);
    }
}

/// A client's connection: admission and login run inside its `span`; the
/// session after them does not (entering a span on every poll costs the
/// subscriber's bookkeeping on each statement's several polls), and the
/// few events a session logs at `info` and above name the client
/// themselves (`client.id`).
async fn client(
    shared: Arc<Shared>,
    socket: Socket,
    peer: Peer,
    id: u32,
    count: ClientCount,
    span: tracing::Span,
) {
    let admitted = admit(&shared, socket, peer, id)
        .instrument(span.clone())
        .await;
    // The logged-in guard counts the client against max_client_connections
    // until its session ends.
    let Some((logged_in, mut session, ok_seq, schema)) = admitted else {
        return;
    };
    let ended = session.run(ok_seq, schema).await;
    drop(session);
    drop(logged_in);
    drop(count);
    span.in_scope(|| match ended {
        Ok(()) | Err(End::ClientGone) => debug!("client left"),
        Err(e) => debug!(reason = %e, "session ended"),
    });
}

/// Admission and login: the client's place among the logged-in ones
/// (held while the session runs), the session that serves it, the
/// sequence id of its login OK and the schema it asked for; `None` when
/// the client was refused (and told why).
async fn admit<'a>(
    shared: &'a Arc<Shared>,
    socket: Socket,
    peer: Peer,
    id: u32,
) -> Option<(LoggedInGuard<'a>, Session, u8, Option<Vec<u8>>)> {
    // Only logged-in clients count toward max_client_connections; while
    // even the admin reserve is full, refuse before the handshake (cheap).
    let max = shared.config.load().pool.max_client_connections;
    if shared.admission.logged_in() >= max + crate::frontend::admission::ADMIN_RESERVE {
        debug!("too many connections");
        shared.metrics.rejected("max_client_connections");
        refuse(socket, errors::too_many_connections()).await;
        return None;
    }
    // Accepted before a hand-over: no other process will serve it.
    if shared.shutdown.is_triggered() && !shared.shutdown.handed_over() {
        shared.metrics.rejected("shutdown");
        refuse(socket, errors::shutting_down()).await;
        return None;
    }
    shared.metrics.client_connections_total.increment(1);
    if let Socket::Tcp(tcp) = &socket {
        let _ = tcp.set_nodelay(true);
    }
    let io = PacketIo::new(Stream::from(socket)).with_read_step(handshake::CLIENT_READ_STEP);
    let timeout = Duration::from_millis(shared.config.load().frontend.handshake_timeout_ms);
    let mut pending = shared.admission.enter(peer.address_key());
    let login = tokio::select! {
        // Boxed: the login's state is freed once the session runs (an idle
        // session's future stays small).
        r = tokio::time::timeout(timeout, Box::pin(handshake::login(shared, io, id, peer))) => r,
        _ = &mut pending.evicted => {
            debug!("handshake closed to make room for newer ones");
            shared.metrics.rejected("handshake_evicted");
            return None;
        }
    };
    drop(pending);
    let mut login = match login {
        Ok(Ok(l)) => l,
        Ok(Err(e)) => {
            debug!(error = %e, "login failed");
            // Refused logins (bad password, bad handshake) are `auth`; a peer
            // that connected and left without logging in (a port probe) is
            // `handshake_aborted`.
            let reason = match e {
                handshake::HandshakeError::Refused(_) => "auth",
                handshake::HandshakeError::Wire(_) => "handshake_aborted",
            };
            shared.metrics.rejected(reason);
            return None;
        }
        Err(_) => {
            debug!("login timed out");
            shared.metrics.rejected("handshake_timeout");
            return None;
        }
    };
    let admin = login.user.admin;
    let Some(logged_in) = shared.admission.log_in(max, admin) else {
        debug!("too many connections");
        shared.metrics.rejected("max_client_connections");
        let mut b = BytesMut::new();
        errors::too_many_connections().write(&mut b);
        let send = login.io.send_packet(login.ok_seq, &b);
        let _ = tokio::time::timeout(Duration::from_secs(1), send).await;
        return None;
    };
    let configured = shared.users.load().find(&login.user.name).is_some();
    let tenant = shared.pool.tenants.for_user(&login.user.name, configured);
    let slot = match tenant.enter() {
        Ok(slot) => slot,
        Err(limit) => {
            debug!(user = %login.user.name, limit, "user at max_client_connections");
            shared.metrics.rejected("user_max_client_connections");
            let mut b = BytesMut::new();
            errors::user_too_many_connections(&login.user.name, limit).write(&mut b);
            let send = login.io.send_packet(login.ok_seq, &b);
            let _ = tokio::time::timeout(Duration::from_secs(1), send).await;
            return None;
        }
    };
    let write_timeout =
        Duration::from_millis(shared.config.load().frontend.client_write_timeout_ms);
    login.io.set_write_timeout(write_timeout);
    // A socket client is `localhost`: the loopback address matches that
    // name where a client's host is compared (KILL USER).
    let (session, ok_seq, schema) =
        Session::new(shared.clone(), login, slot, id, peer.address_key());
    Some((logged_in, session, ok_seq, schema))
}

/// Serves the sessions the old process moves here after a hand-over
/// (`crate::takeover::moves`), one at a time, until it exits and closes
/// the control connection. Blocking: runs on a thread of its own, `rt`
/// being this process's runtime.
pub fn receive_moved_sessions(
    stream: std::os::unix::net::UnixStream,
    shared: Arc<Shared>,
    rt: tokio::runtime::Handle,
) {
    use crate::takeover::moves;
    let mut moved = 0u64;
    shared.mover.set_receiving(true);
    loop {
        let (fd, record) = match moves::receive(&stream) {
            Ok(Some(s)) => s,
            Ok(None) => break,
            Err(e) => {
                warn!(error = %e, "takeover: receiving a session failed; no more sessions move here");
                break;
            }
        };
        let outcome = adopt_moved(&shared, &rt, fd, &record);
        match &outcome {
            Ok(()) => {
                moved += 1;
                shared.metrics.session_moved("in", "moved");
            }
            Err(why) => {
                debug!(reason = %why, "takeover: a moving session was refused");
                shared.metrics.session_moved("in", "refused");
            }
        }
        if let Err(e) = moves::answer(&stream, &outcome) {
            warn!(error = %e, "takeover: answering the old process failed; no more sessions move here");
            break;
        }
    }
    shared.mover.set_receiving(false);
    info!(
        sessions = moved,
        "takeover: the old process is gone; sessions it moved are served here"
    );
}

/// Starts serving one moved session (on its thread group's worker, as an
/// accepted client); `Err` says why not (the old process keeps it).
fn adopt_moved(
    shared: &Arc<Shared>,
    rt: &tokio::runtime::Handle,
    fd: std::os::fd::OwnedFd,
    record: &[u8],
) -> Result<(), String> {
    use crate::frontend::session::moving::{self, MovedSession};
    use std::sync::atomic::AtomicU8;
    if record.is_empty() {
        return Err("session record too large".into());
    }
    let rec: MovedSession =
        serde_json::from_slice(record).map_err(|e| format!("unreadable session record: {e}"))?;
    let socket = moving::moved_socket(fd).map_err(|e| format!("client socket: {e}"))?;
    let (tx, rx) = std::sync::mpsc::sync_channel::<Result<(), String>>(1);
    // Exactly one of the task (serving) and this thread (giving up after
    // the wait) decides: a session is never served by both processes.
    const PENDING: u8 = 0;
    const SERVING: u8 = 1;
    const ABANDONED: u8 = 2;
    let decided = Arc::new(AtomicU8::new(PENDING));
    let id = rec.id;
    let group = shared.pool.group_for(id).id;
    let task = {
        let shared = shared.clone();
        let decided = decided.clone();
        async move {
            let socket = match Detached::Tcp(socket).attach() {
                Ok(s) => s,
                Err(e) => {
                    let _ = tx.send(Err(format!("registering the client socket: {e}")));
                    return;
                }
            };
            let count = ClientCount::new(&shared);
            let max = shared.config.load().pool.max_client_connections;
            let Some(logged_in) = shared.admission.log_in(max, rec.admin) else {
                let _ = tx.send(Err("max_client_connections reached".into()));
                return;
            };
            let tenant = shared.pool.tenants.for_user(&rec.user, true);
            let Ok(slot) = tenant.enter() else {
                let _ = tx.send(Err(format!("user {} at max_client_connections", rec.user)));
                return;
            };
            let mut io =
                PacketIo::new(Stream::from(socket)).with_read_step(handshake::CLIENT_READ_STEP);
            io.set_write_timeout(Duration::from_millis(
                shared.config.load().frontend.client_write_timeout_ms,
            ));
            let mut session = match Session::adopt(shared.clone(), rec, io, slot) {
                Ok(s) => s,
                Err(why) => {
                    let _ = tx.send(Err(why));
                    return;
                }
            };
            if decided
                .compare_exchange(PENDING, SERVING, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
            {
                return;
            }
            let _ = tx.send(Ok(()));
            let ended = session.resume().await;
            drop(session);
            drop(logged_in);
            drop(count);
            match ended {
                Ok(()) | Err(End::ClientGone) => debug!(client.id = id, "client left"),
                Err(e) => debug!(client.id = id, reason = %e, "session ended"),
            }
        }
    };
    match shared.workers.as_ref() {
        Some(w) => w.spawn(group, task),
        None => drop(rt.spawn(task)),
    }
    match rx.recv_timeout(crate::takeover::LINE_TIMEOUT / 2) {
        Ok(r) => r,
        Err(_) => {
            match decided.compare_exchange(PENDING, ABANDONED, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => Err("the session did not start in time".into()),
                // It started right at the deadline: it is served here.
                Err(_) => Ok(()),
            }
        }
    }
}
