//! One client's command loop after login: local answers (PING, SET_OPTION,
//! RESET_CONNECTION), forwarding through the thread group's queues onto a
//! leased (or pinned) backend, state sync before each lease, and pin/unpin
//! decisions after each response.

use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use tokio::time::Instant;

pub mod admin_local;
mod begin;
pub mod bulk;
pub mod change_user;
mod digest;
mod execute;
mod idle;
use execute::{queue_timeout_err, sync};
pub mod kill;
mod kill_dynamic;
mod kill_params;
mod large;
pub mod local;
pub mod moving;
mod route;
mod row_count;
mod statements;

use super::Shared;
use super::handshake::Login;
use crate::config::PoolMode;
use crate::pool::group::{Group, Leased};
use crate::pool::scheduler::{Need, Priority};
use crate::protocol::caps::{Caps, flag};
use crate::protocol::command::*;
use crate::protocol::errors;
use crate::protocol::packets::{ErrPacket, OkPacket, eof_payload, ok_payload, status};
use crate::protocol::response::Shape;
use crate::session_state::{Inventory, PinReason, Pins, TrackedState};
use crate::wire::packet_io::{Incoming, Packet};
use crate::wire::{PacketIo, WireError};

/// Schemas verified at login are trusted this long.
const KNOWN_SCHEMA_TTL: Duration = Duration::from_secs(30);

/// Why a session ended.
#[derive(Debug, thiserror::Error)]
pub enum End {
    /// The client quit or closed its socket.
    #[error("client closed the connection")]
    ClientGone,
    /// Socket trouble on the client side.
    #[error("client i/o: {0}")]
    Client(#[from] WireError),
    /// The session cannot continue safely (its backend state was lost).
    #[error("{0}")]
    Fatal(String),
    /// The proxy is shutting down.
    #[error("shutdown")]
    Shutdown,
    /// Another session ran KILL CONNECTION on this one.
    #[error("killed")]
    Killed,
    /// The client stayed silent past its session's `wait_timeout` (see
    /// [`idle`]).
    #[error("idle past wait_timeout")]
    WaitTimeout,
    /// The server closed the backend holding this session's state while
    /// the client was idle (see [`idle`]).
    #[error("the server ended the held backend")]
    BackendEnded,
    /// The session moved to the process that took the listeners over (see
    /// [`moving`]): the client is served there now.
    #[error("moved to the new process")]
    Moved,
}

/// A logged-in client.
pub struct Session {
    shared: Arc<Shared>,
    id: u32,
    client: PacketIo,
    /// Status values the client's own connection shows where its backend
    /// connection's differ (`hop_status`).
    hop_status: Option<Arc<crate::frontend::hop_status::HopStatus>>,
    caps: Caps,
    pool: usize,
    group: Arc<Group>,
    /// State the client expects.
    state: TrackedState,
    /// Login collation and multi-statements option: what COM_RESET_CONNECTION
    /// returns the state to (kept small; rebuilt on demand).
    initial: (u16, bool),
    pins: Pins,
    /// Unshareable state held on the backend (decides the inventory pins).
    inv: Inventory,
    /// The session's schema was dropped by someone else: backends serve it
    /// without a schema until it selects another.
    schema_gone: bool,
    backend: Option<Leased>,
    status: u16,
    tickets: u32,
    /// Prepared statements by client statement id.
    stmts: crate::id_map::IdMap<u32, statements::ClientStmt>,
    /// False only when no client statement holds a cursor or long data
    /// (set where one starts to; a scan that finds none clears it), so the
    /// per-statement pin check need not scan the statements.
    stmts_held: bool,
    /// Last client statement id issued.
    next_stmt: u32,
    /// KILL statements the client prepared (carried out by the proxy).
    kills: kill::PreparedKills,
    /// The statement the last successful COM_STMT_PREPARE created: what
    /// the id 0xFFFFFFFF names (MariaDB; Connector/C's execute-direct
    /// pipelines PREPARE and EXECUTE with it).
    last_prepared: Option<u32>,
    /// While `Some`, errors the proxy would send are kept here instead: the
    /// command being served gets no reply (SEND_LONG_DATA; the server
    /// reports such errors at EXECUTE).
    swallowed: Option<Option<ErrPacket>>,
    /// Failed COM_CHANGE_USER attempts (the server refuses a fourth).
    failed_change_user: u8,
    /// Rows of the last result set (what FOUND_ROWS() returns).
    found_rows: u64,
    /// The role probe after stored code was put off (it would have replaced
    /// the FOUND_ROWS() the client reads next): run after the next
    /// statement, the session held (its role unknown) meanwhile.
    probe_role_later: bool,
    /// The pool's roles epoch when the client logged in (or changed
    /// user): the default role it got then stays its role, as direct,
    /// after a SET DEFAULT ROLE (see `restore_login_role`).
    login_roles_epoch: u64,
    /// What ROW_COUNT() returns after the client's previous command, when
    /// the proxy knows it (see [`row_count`]).
    row_count: Option<i64>,
    /// The counts (ROW_COUNT(), FOUND_ROWS()) to set on the next backend
    /// checked out for this command before its statement runs (see
    /// [`row_count::Plan::Prime`]).
    prime_row_count: Option<row_count::Prime>,
    /// What the command being served leaves as ROW_COUNT(), as far as the
    /// paths that answered it said (see [`row_count::after_command`]).
    row_count_now: Option<i64>,
    /// The greeting's scramble.
    nonce: [u8; 20],
    /// The logged-in user.
    user: Arc<super::User>,
    /// The user's tenant (scheduler lane, weight, limits, figures),
    /// counting this client against its `max_client_connections`.
    user_slot: crate::pool::tenants::ClientSlot,
    /// What other sessions see of this one (for KILL).
    handle: SessionHandle,
    /// Queue wait of the current command, when it used a backend.
    stmt_wait: Option<Duration>,
    /// When the open transaction started.
    txn_started: Option<Instant>,
    /// The current command is a ROLLBACK.
    last_is_rollback: bool,
    /// The current command reads the diagnostics area (keeps it).
    diagnostic_stmt: bool,
    /// The client's own `session_track_*` settings once it changed one
    /// (`None`: the server's defaults, `Shared::trackers`).
    own_trackers: Option<Box<crate::protocol::session_track::ClientTrackers>>,
    /// The server's global `max_allowed_packet` when the client logged in:
    /// the server copies it into a session at connect and a session cannot
    /// change it, so a later `SET GLOBAL` reaches new sessions only.
    login_max_packet: Option<u64>,
    /// When the statement whose warnings or error the held backend keeps
    /// ran: the hold goes on through statements that keep the list only
    /// for `pool.diagnostics_hold_ms` after it (a client polling with
    /// `SELECT NOW()` must not keep a backend for ever).
    diag_since: Option<Instant>,
    /// Columns the executing prepared statement had when prepared.
    expect_columns: Option<u64>,
    /// The executing prepared statement's column definitions as the client
    /// has them (cache-metadata; `Some(None)`: none yet).
    expect_metadata: Option<Option<u64>>,
    /// The text of the prepared statement being executed: what the
    /// session-state authority reads for a COM_STMT_EXECUTE.
    executing: Option<std::sync::Arc<crate::prepared::StmtEntry>>,
    /// The executing statement asked for a cursor.
    expect_cursor: bool,
    /// When the current command arrived.
    cmd_started: Instant,
    /// When the held backend last served a command or a keepalive.
    held_used: Instant,
    /// The current command was already sent to the backend as it arrived
    /// ([`large`]): `exchange` only relays the reply, and the text it sees
    /// is a prefix (its analysis is incomplete).
    streamed: bool,
    /// What the current command's reply showed, for the digest table.
    stmt_figures: Option<digest::Figures>,
    /// Scratch space for digest texts (reused; see [`digest`]).
    digest_buf: Vec<u8>,
    /// The lex options the current command's digest is read with, when it
    /// is counted in the digest table.
    digest_lex: Option<crate::sql::LexOptions>,
    /// The current COM_QUERY goes to a backend as the client sent it: its
    /// analysis builds the digest on the same pass (see `query_digest`).
    digest_pass: bool,
    /// The current COM_QUERY's digest hash, built with its analysis (its
    /// text is in `digest_buf`): the text is lexed once.
    query_digest: Option<u64>,
    /// What this session's last plain `BEGIN` answered ([`begin`]).
    begin_learnt: [Option<begin::Learnt>; 2],
    /// A `BEGIN` the client was answered, not yet sent: it goes ahead of
    /// the next command that reaches a backend ([`begin`]).
    pending_begin: bool,
    /// The token a backend this session parks is tagged with (see
    /// `crate::pool::parking`): new when the session starts over.
    owner: u64,
    /// This session parked a backend and has not leased one since: its
    /// next lease asks for that one first.
    parked: bool,
    /// The current command goes to this replica (read/write split, see
    /// [`route`]); `None`: the primary.
    route: Option<route::Routed>,
    /// What the session knows of its own writes (read-your-writes).
    writes: route::Writes,
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Ok(mut m) = self.shared.sessions.lock() {
            m.remove(&self.id);
        }
        // What the session parked that is still idle is cleaned in the
        // background (its token dies with it).
        crate::pool::parking::unpark_now(&self.group, self.owner);
        // A backend held only by session mode or for diagnostics is in a
        // known, replayable state: it goes back to the pool (through the
        // authority's release gate). Anything else (a transaction, user
        // variables, temporary tables, locks) is closed so no other client
        // inherits it.
        if let Some(b) = self.backend.take()
            && self.only_session_mode()
            && self.status & status::IN_TRANS == 0
            && b.io.idle_is_healthy()
        {
            execute::release_backend(&self.shared, b);
        }
    }
}

/// The part of a session other sessions can reach: to KILL it, or the
/// query it runs.
#[derive(Debug, Clone, Default)]
pub struct SessionHandle {
    /// Login name.
    pub user: Arc<std::sync::Mutex<String>>,
    /// Credential pool.
    pub pool: Arc<std::sync::atomic::AtomicUsize>,
    /// Server thread id of the backend executing for it (0 = none).
    pub backend_thread: Arc<std::sync::atomic::AtomicU32>,
    /// Set by KILL CONNECTION.
    pub killed: Arc<std::sync::atomic::AtomicBool>,
    /// Wakes the session when killed.
    pub wake: Arc<tokio::sync::Notify>,
    /// KILL QUERY: wakes the session while it waits for a statement's
    /// answer; it then ends that statement if it is the one `kill_query`
    /// names (a wake-up for an earlier statement is ignored). The session
    /// checks `kill_query` when it starts waiting too, so a KILL that came
    /// while the statement was being sent is not lost.
    pub interrupt: Arc<tokio::sync::Notify>,
    /// Statements started (with `backend_thread`, identifies the statement
    /// a KILL QUERY may interrupt).
    pub statement: Arc<std::sync::atomic::AtomicU64>,
    /// The statement (a `statement` count) a KILL QUERY asked to end, as
    /// read when the KILL ran: never a later one.
    pub kill_query: Arc<std::sync::atomic::AtomicU64>,
    /// Current pin reasons ([`Pins::bits`]).
    pub pins: Arc<std::sync::atomic::AtomicU32>,
    /// The client's address (what `KILL USER name@host` matches).
    pub ip: Option<std::net::IpAddr>,
}

impl Session {
    /// Creates the session for a completed login.
    pub fn new(
        shared: Arc<Shared>,
        login: Login,
        user_slot: crate::pool::tenants::ClientSlot,
        id: u32,
        ip: std::net::IpAddr,
    ) -> (Self, u8, Option<Vec<u8>>) {
        let pool = login.pool;
        let group = shared.pool.group_for(id).clone();
        let initial = (login.collation, login.caps.has(flag::MULTI_STATEMENTS));
        let state = initial_state(initial);
        let mut pins = Pins::default();
        if shared.pool.mode == PoolMode::Session {
            pins.add(PinReason::SessionMode);
        }
        let tickets = shared.config.load().pool.high_prio_tickets;
        let hop_status = crate::frontend::hop_status::HopStatus::of(
            // Compression starts after the login's final OK, sent later.
            login.caps.has(flag::COMPRESS),
            login
                .io
                .stream
                .server_tls_session()
                .map(|(suite, version)| crate::frontend::hop_status::TlsSession {
                    cipher: crate::frontend::hop_status::openssl_cipher_name(suite),
                    version: crate::frontend::hop_status::openssl_version_name(version),
                }),
            shared.config.load().backend.tls,
        );
        let login_max_packet = shared.limits.max_allowed_packet();
        let login_roles_epoch = shared.pool.roles_epoch();
        let s = Self {
            id,
            client: login.io,
            hop_status,
            caps: login.caps,
            pool,
            group,
            state,
            initial,
            pins,
            inv: Inventory::default(),
            schema_gone: false,
            backend: None,
            status: shared.pool.session_status(),
            tickets,
            shared,
            stmts: Default::default(),
            stmts_held: false,
            next_stmt: 0,
            kills: kill::PreparedKills::default(),
            last_prepared: None,
            nonce: login.nonce,
            user: login.user,
            user_slot,
            handle: SessionHandle {
                ip: Some(ip),
                ..Default::default()
            },
            stmt_wait: None,
            txn_started: None,
            last_is_rollback: false,
            diagnostic_stmt: false,
            diag_since: None,
            own_trackers: None,
            login_max_packet,
            expect_columns: None,
            expect_metadata: None,
            executing: None,
            expect_cursor: false,
            cmd_started: Instant::now(),
            held_used: Instant::now(),
            streamed: false,
            stmt_figures: None,
            digest_buf: Vec::new(),
            digest_lex: None,
            digest_pass: false,
            query_digest: None,
            begin_learnt: [None, None],
            pending_begin: false,
            swallowed: None,
            failed_change_user: 0,
            found_rows: 0,
            probe_role_later: false,
            login_roles_epoch,
            row_count: Some(0),
            prime_row_count: None,
            row_count_now: None,
            owner: crate::pool::parking::owner_token(),
            parked: false,
            route: None,
            writes: Default::default(),
        };
        if let Ok(mut u) = s.handle.user.lock() {
            *u = s.user.name.clone();
        }
        s.handle
            .pool
            .store(s.pool, std::sync::atomic::Ordering::Relaxed);
        if let Ok(mut m) = s.shared.sessions.lock() {
            m.insert(id, s.handle.clone());
        }
        (s, login.ok_seq, login.schema)
    }

    /// The largest command a client may send: below the server's
    /// `max_allowed_packet` and the configured limit, as the server counts.
    fn max_packet(&self) -> usize {
        crate::backend::conn::ServerLimits::packet_max(
            self.shared.config.load().frontend.max_allowed_packet,
            self.login_max_packet
                .or_else(|| self.shared.limits.max_allowed_packet()),
        )
    }

    /// Adds a pin reason, counting it when it is new.
    fn pin(&mut self, r: PinReason) {
        if !self.pins.has(r) {
            self.pins.add(r);
            self.shared.metrics.pinned(r.label());
        }
    }

    /// Sends an error the proxy originates.
    async fn send_err(&mut self, seq: u8, e: &ErrPacket) -> Result<(), End> {
        if let Some(kept) = self.swallowed.as_mut() {
            kept.get_or_insert_with(|| e.clone());
            return Ok(());
        }
        self.shared.metrics.error(e.code, false);
        self.row_count_now = Some(-1);
        let mut b = BytesMut::new();
        e.write(&mut b);
        self.client.send_packet(seq, &b).await?;
        Ok(())
    }

    async fn send_ok(&mut self, seq: u8) -> Result<(), End> {
        let mut b = BytesMut::new();
        ok_payload(&mut b, 0, self.status, 0);
        self.row_count_now = Some(0);
        self.client.send_packet(seq, &b).await?;
        Ok(())
    }

    /// Finishes the login (verifying the schema it named), then serves
    /// commands until the client leaves.
    pub async fn run(&mut self, ok_seq: u8, schema: Option<Vec<u8>>) -> Result<(), End> {
        if let Some(db) = schema {
            self.state.schema = Some(db.clone());
            if !self.schema_known(&db) {
                // Bring a backend to the login schema; a missing schema fails
                // the login as the server would.
                let mut pkt_seq = ok_seq;
                // Boxed, as the cold paths below: an idle session's future
                // holds only the state of waiting for a command.
                match Box::pin(self.verify_schema()).await {
                    Ok(()) => {
                        if let Ok(mut k) = self.shared.known_schemas.lock() {
                            k.insert(db, Instant::now());
                        }
                    }
                    Err(e) => {
                        self.send_err(pkt_seq, &e).await?;
                        pkt_seq = pkt_seq.wrapping_add(1);
                        let _ = pkt_seq;
                        return Ok(());
                    }
                }
            }
        }
        Box::pin(self.send_login_ok(ok_seq)).await?;
        self.serve_from(true).await
    }

    /// The OK that ends the login or a COM_CHANGE_USER. One that named a
    /// schema reports it in a session-state block, as the server does for a
    /// client that tracks it (and a state change, when the client tracks
    /// those).
    async fn send_login_ok(&mut self, seq: u8) -> Result<(), End> {
        let trackers = self
            .own_trackers
            .as_deref()
            .unwrap_or(&self.shared.trackers);
        let mut state = BytesMut::new();
        if let Some(db) = &self.state.schema
            && self.caps.session_track()
            && trackers.schema
        {
            use crate::protocol::session_track::{TRACK_SCHEMA, TRACK_STATE_CHANGE, put_entry};
            let mut name = BytesMut::new();
            crate::protocol::lenenc::put_lenenc_bytes(&mut name, db);
            put_entry(&mut state, TRACK_SCHEMA, &name);
            if trackers.state_change {
                put_entry(&mut state, TRACK_STATE_CHANGE, b"\x011");
            }
        }
        let mut b = BytesMut::new();
        OkPacket {
            header: crate::protocol::packets::OK_HEADER,
            status: self.status | status::SESSION_STATE_CHANGED,
            session_state: &state,
            ..Default::default()
        }
        .write(&mut b, true);
        self.client.send_packet(seq, &b).await?;
        Ok(())
    }

    fn schema_known(&self, db: &[u8]) -> bool {
        self.shared
            .known_schemas
            .lock()
            .map(|k| k.get(db).is_some_and(|t| t.elapsed() < KNOWN_SCHEMA_TTL))
            .unwrap_or(false)
    }

    async fn verify_schema(&mut self) -> Result<(), ErrPacket> {
        let deadline = Instant::now() + self.queue_timeout();
        let group = self.group.clone();
        let tenant = self.user_slot.tenant().clone();
        let mut full = execute::FullBackoff::new();
        let (adm, mut backend) = loop {
            let mut adm = group
                .acquire(
                    Need::Lease {
                        pool: self.pool,
                        parked: self.lease_parked(),
                    },
                    Priority::Low,
                    &tenant,
                    deadline,
                )
                .await
                .map_err(|t| queue_timeout_err(&t.to_string()))?;
            match self
                .obtain_backend(adm.backend.take(), adm.open.take())
                .await
            {
                Ok(b) => break (adm, b),
                // A full server: wait for one of the pool's own backends.
                Err(e) if full.may_wait(&e, deadline) => {
                    adm.slot.release_unmeasured();
                    full.wait().await;
                }
                Err(e) => return Err(e),
            }
        };
        let plan = backend.plan_toward(&self.state);
        match sync(&mut backend, &plan).await {
            Ok(None) => {
                self.finish(adm.slot, backend);
                Ok(())
            }
            Ok(Some(e)) => {
                self.finish(adm.slot, backend);
                Err(e)
            }
            Err(e) => Err(errors::backend_lost(&e.to_string())),
        }
    }

    /// Serves commands until the client leaves (`fresh`: it has sent none
    /// yet).
    async fn serve_from(&mut self, mut fresh: bool) -> Result<(), End> {
        let mut shutdown = self.shared.shutdown.clone();
        // A drain ends an idle session, but not one that has not sent its
        // first command yet: a client accepted right before a shutdown or a
        // hand-over (`crate::takeover`) gets that command answered instead
        // of a connection closed under it (bounded by the drain time).
        // After a hand-over an idle session moves to the new process
        // instead ([`moving`]); one that cannot move now tries again after
        // each command, one that can never move ends as a drain ends it.
        let mut may_move = true;
        let mut tried_move = false;
        // Shutdown seen (by this loop's own select: no shared state is
        // read per command).
        let mut triggered = false;
        // Not movable yet, though nothing holds it (a command half read):
        // the drain waits for the next command's end, when it tries again.
        let mut defer_drain = false;
        loop {
            let max = self.max_packet();
            // A compressed frame holds the command (and its header): one
            // announcing more is refused before it is inflated.
            self.client
                .set_frame_limit(max.saturating_add(crate::protocol::framing::HEADER_LEN));
            let held = self.pins.any() || self.pending_begin || fresh;
            if self.pins.has(PinReason::Diagnostics) {
                Box::pin(self.release_diagnostics_hold()).await?;
            }
            let wake = self.handle.wake.clone();
            self.client.release_idle_buffers();
            let idle = self.wait_timeout();
            // After a hand-over, each boundary is a chance to move (before
            // reading: the client's next command may wait in the socket,
            // and the new process reads it there).
            if may_move && triggered && !tried_move {
                tried_move = true;
                match Box::pin(self.move_out()).await {
                    Ok(()) => return Err(End::Moved),
                    // Lost half-way: the new process may serve the client;
                    // this one lets go of it without a word.
                    Err(None) => return Err(End::Moved),
                    Err(Some(moving::NotMovable::Ever(why))) => {
                        tracing::debug!(
                            client.id = self.id,
                            why,
                            "this session cannot move; it ends at a boundary"
                        );
                        may_move = false;
                    }
                    Err(Some(moving::NotMovable::Now(_))) => defer_drain = true,
                }
            }
            // Woken by the hand-over to try a move.
            let wake_to_move = may_move && !triggered;
            let pkt = tokio::select! {
                biased;
                r = self.client.read_command(max, Some(0), large::PREFIX) => r,
                _ = shutdown.wait(), if (!held && !defer_drain) || wake_to_move => {
                    if !triggered {
                        triggered = true;
                        // A plain drain moves nothing.
                        may_move &= self.shared.shutdown.handed_over();
                        if may_move {
                            continue;
                        }
                    }
                    if held {
                        continue;
                    }
                    return Err(End::Shutdown);
                }
                _ = wake.notified() => None.ok_or(WireError::Closed),
                _ = tokio::time::sleep(idle.unwrap_or_default()), if idle.is_some() => {
                    self.reset_on_close();
                    return Err(End::WaitTimeout);
                }
                r = idle::held_backend_stirs(&mut self.backend) => {
                    // A replica held for a warning list or a count: only
                    // those go with it (`route`), the session goes on.
                    if self.let_go_of_held_replica() {
                        continue;
                    }
                    return Err(Box::pin(self.held_backend_ended(r)).await);
                }
            };
            if self
                .handle
                .killed
                .load(std::sync::atomic::Ordering::Relaxed)
            {
                return Err(End::Killed);
            }
            let pkt = match pkt {
                Ok(Incoming::Whole(p)) => Ok(p),
                Ok(Incoming::Large(l)) if l.prefix.first() == Some(&COM_QUERY) => {
                    Box::pin(self.large_query(l, max)).await?;
                    continue;
                }
                Ok(Incoming::Large(l)) => Box::pin(self.client.complete_large(l, max)).await,
                Err(e) => Err(e),
            };
            let pkt = match pkt {
                Ok(p) => p,
                Err(e) => return Err(Box::pin(self.read_failed(e)).await),
            };
            fresh = false;
            tried_move = false;
            defer_drain = false;
            // Boxed: the (large) state of a running command is allocated per
            // command instead of living in every idle session's future.
            if Box::pin(self.command(pkt)).await? {
                return Ok(());
            }
        }
    }

    /// Answers a command that could not be read (too large, out of order)
    /// as the server would; the session then ends.
    async fn read_failed(&mut self, e: WireError) -> End {
        let r = async {
            match e {
                WireError::TooLarge => {
                    // Answered right after the header of the chunk that
                    // crossed the limit (which stays unread), as the server
                    // does; the connection then closes.
                    let seq = match self.client.next_header().await {
                        Ok(h) => h.seq.wrapping_add(1),
                        Err(_) => 1,
                    };
                    self.send_err(seq, &errors::packet_too_large()).await?;
                    Ok(End::Fatal("client packet too large".into()))
                }
                WireError::OutOfOrder => {
                    self.send_err(1, &errors::out_of_order()).await?;
                    Ok(End::Fatal("client packets out of order".into()))
                }
                WireError::Closed => Ok(End::ClientGone),
                e => Ok(End::Client(e)),
            }
        };
        r.await.unwrap_or_else(|e: End| e)
    }

    /// A command's latency: from its read to the moment its last reply
    /// bytes went to the socket (bookkeeping after the reply, such as a
    /// backend's release, is not the client's wait).
    fn answered_in(&self, started: Instant) -> std::time::Duration {
        match self.client.sent_at() {
            Some(t) if t >= started => t - started,
            _ => started.elapsed(),
        }
    }

    /// What column definitions depend on besides their bytes: the
    /// session's `character_set_client` (cache-metadata resends them when
    /// it changes, as the server does).
    fn metadata_seed(&self) -> u64 {
        let charset = self
            .state
            .vars
            .get("character_set_client")
            .map_or("", String::as_str);
        crate::frontend::metadata_cache::seed(charset, self.initial.0)
    }

    /// Handles one command; returns true when the client quit.
    async fn command(&mut self, pkt: Packet) -> Result<bool, End> {
        let started = Instant::now();
        self.cmd_started = started;
        self.stmt_wait = None;
        self.stmt_figures = None;
        let cmd = pkt.payload.first().copied();
        self.last_is_rollback = cmd == Some(COM_QUERY) && is_rollback(&pkt.payload[1..]);
        self.diagnostic_stmt = cmd == Some(COM_QUERY) && self.keeps_diagnostics(&pkt.payload[1..]);
        // The digest is read with the lex options the statement ran under.
        let digest_lex = (digest::counted(cmd) && self.shared.config.load().digests.enabled)
            .then(|| crate::session_state::authority::lex_options(&self.state, self.status));
        self.digest_lex = digest_lex;
        self.digest_pass = false;
        self.query_digest = None;
        self.prime_row_count = None;
        self.row_count_now = None;
        let quit = self.dispatch(&pkt).await;
        self.row_count = row_count::after_command(cmd, self.row_count, self.row_count_now);
        if self.stmt_wait.is_some() {
            self.held_used = Instant::now();
        } else if matches!(quit, Ok(false))
            && cmd != Some(COM_PING)
            && self.backend.is_some()
            && self.held_used.elapsed() >= self.keepalive_after()
        {
            // Answered without the held backend, which has been idle long
            // enough for the server's own timeout to matter: keep it alive
            // (not every time: a ping is not free of effects, e.g. on
            // ROW_COUNT()).
            Box::pin(self.keep_held_alive()).await?;
        }
        self.handle
            .pins
            .store(self.pins.bits(), std::sync::atomic::Ordering::Relaxed);
        if let (Some(wait), Some(cmd)) = (self.stmt_wait, cmd) {
            let group = self.group.id;
            let total = self.answered_in(started);
            self.shared.metrics.statement(group, cmd, wait, total);
            self.user_slot.tenant().statement(group, wait, total);
            let cfg = self.shared.config.load();
            if let Some(lex) = digest_lex {
                self.record_digest(&pkt.payload, lex, wait, total, cfg.digests.max_text_bytes);
            }
            let slow = cfg.log.slow_statement_ms;
            if slow > 0 && total.as_millis() >= u128::from(slow) {
                self.shared.slow_log.note(crate::slow_log::SlowStatement {
                    client: self.id,
                    group,
                    kind: crate::metrics::KINDS[crate::metrics::kind_index(cmd)],
                    queue_wait: wait,
                    execution: total.saturating_sub(wait),
                });
            }
        }
        quit
    }

    async fn dispatch(&mut self, pkt: &Packet) -> Result<bool, End> {
        let seq = pkt.last_seq.wrapping_add(1);
        let Some(&cmd) = pkt.payload.first() else {
            self.send_err(seq, &errors::unknown_command(0)).await?;
            return Ok(false);
        };
        self.shared.metrics.bytes(0, pkt.payload.len() as u64);
        match cmd {
            COM_QUIT => return Ok(true),
            COM_PING => {
                Box::pin(self.keep_held_alive()).await?;
                self.send_ok(seq).await?
            }
            COM_QUERY => {
                let sql = &pkt.payload[1..];
                if self.user.admin
                    && let Some(c) = crate::admin::console::parse(sql)
                {
                    if let crate::admin::console::Command::Invalid(why) = c {
                        self.send_err(seq, &ErrPacket::new(1064, "42000", why))
                            .await?;
                        return Ok(false);
                    }
                    let rs = crate::admin::console::run(c, &self.shared);
                    crate::admin::console::write(
                        &mut self.client,
                        seq,
                        &rs,
                        self.caps,
                        self.status,
                    );
                    self.client.flush().await?;
                    return Ok(false);
                }
                if self.answer_admin_local(seq, sql).await? || self.defer_begin(seq, sql).await? {
                    return Ok(false);
                }
                if let Some(quit) = self.sql_prepared_kill(seq, sql).await? {
                    return Ok(quit);
                }
                if let Some(what) = self.stored_code_may_kill(sql).await {
                    self.send_err(seq, &kill::refused(what)).await?;
                    return Ok(false);
                }
                let allow = || self.allow_unplanned_kill();
                let plan = match kill::plan_for(sql, &self.state, self.status, allow) {
                    Some(kill::KillPlan::Resolve { expr, stand_in }) => {
                        match Box::pin(self.resolve_dynamic(seq, &expr, stand_in)).await? {
                            kill_dynamic::Resolved::Forward => None,
                            kill_dynamic::Resolved::Answered => return Ok(false),
                            kill_dynamic::Resolved::StandIn(sql) => {
                                self.forward(&pkt.with_query(&sql), Shape::Query).await?;
                                return Ok(false);
                            }
                        }
                    }
                    p => p,
                };
                if let Some(plan) = plan {
                    return match plan {
                        kill::KillPlan::Run(k) => Box::pin(self.kill(seq, k)).await,
                        kill::KillPlan::Prepare { name, kill, sql } => {
                            self.remember_sql_kill(name, kill);
                            self.forward(&pkt.with_query(&sql), Shape::Query).await?;
                            Ok(false)
                        }
                        kill::KillPlan::Refuse(what) => {
                            self.send_err(seq, &kill::refused(what)).await?;
                            Ok(false)
                        }
                        kill::KillPlan::Fail(e) => {
                            self.send_err(seq, &e).await?;
                            Ok(false)
                        }
                        kill::KillPlan::Resolve { .. } => {
                            let what = "dynamic SQL through myplex";
                            self.send_err(seq, &kill::refused(what)).await?;
                            Ok(false)
                        }
                    };
                } else if let Some(q) = local::classify(sql)
                    .filter(|q| q.what != local::Local::FoundRows || !self.pins.any())
                    && self.answer_local(seq, q.what, &q.name).await?
                {
                } else {
                    // ROW_COUNT() must be the client's own (see row_count).
                    let Some(text) = self.row_count_gate(seq, sql).await? else {
                        return Ok(false);
                    };
                    let sql = text.as_deref().unwrap_or(sql);
                    if let Some(rewritten) = local::replace_connection_id(
                        sql,
                        self.id,
                        crate::session_state::authority::lex_options(&self.state, self.status),
                    ) {
                        self.forward(&pkt.with_query(&rewritten), Shape::Query)
                            .await?;
                    } else if text.is_some() {
                        self.forward(&pkt.with_query(sql), Shape::Query).await?;
                    } else {
                        self.digest_pass = true;
                        self.route_query(sql);
                        self.forward(pkt, Shape::Query).await?;
                    }
                }
            }
            COM_INIT_DB => self.forward(pkt, Shape::Query).await?,
            COM_FIELD_LIST => self.forward(pkt, Shape::FieldList).await?,
            COM_STATISTICS => self.forward(pkt, Shape::Single).await?,
            // OK/EOF, a result set (the process list) or the server's error
            // (privileges), relayed as sent.
            COM_REFRESH | COM_DEBUG | COM_PROCESS_INFO => self.forward(pkt, Shape::Query).await?,
            COM_SET_OPTION => {
                match pkt
                    .payload
                    .get(1..3)
                    .map(|b| u16::from_le_bytes([b[0], b[1]]))
                {
                    Some(0) => self.state.multi_statements = true,
                    Some(1) => self.state.multi_statements = false,
                    _ => {
                        let e = ErrPacket::new(1047, "08S01", "Unknown command");
                        self.send_err(seq, &e).await?;
                        return Ok(false);
                    }
                }
                let mut b = BytesMut::new();
                if self.caps.deprecate_eof() {
                    OkPacket {
                        header: 0xFE,
                        status: self.status,
                        ..Default::default()
                    }
                    .write(&mut b, false);
                } else {
                    eof_payload(&mut b, 0, self.status);
                }
                self.client.send_packet(seq, &b).await?;
            }
            COM_RESET_CONNECTION => Box::pin(self.reset_connection(seq)).await?,
            COM_STMT_PREPARE => {
                // A prepared KILL would run with a server thread id: the
                // proxy carries it out itself.
                if let Some(what) = self.stored_code_may_kill(&pkt.payload[1..]).await {
                    self.send_err(seq, &kill::refused(what)).await?;
                    return Ok(false);
                }
                let allow = || self.allow_unplanned_kill();
                match kill::plan_for(&pkt.payload[1..], &self.state, self.status, allow) {
                    Some(kill::KillPlan::Run(k)) => Box::pin(self.prepare_kill(seq, k)).await?,
                    Some(kill::KillPlan::Refuse(what)) => {
                        self.send_err(seq, &kill::refused(what)).await?;
                    }
                    Some(kill::KillPlan::Fail(e)) => self.send_err(seq, &e).await?,
                    // PREPARE and EXECUTE IMMEDIATE cannot be prepared.
                    Some(kill::KillPlan::Resolve { .. }) => {
                        let e = ErrPacket::new(
                            1295,
                            "HY000",
                            "This command is not supported in the prepared statement protocol yet",
                        );
                        self.send_err(seq, &e).await?;
                    }
                    // A text PREPARE cannot be prepared: the server says so.
                    Some(kill::KillPlan::Prepare { .. }) | None => self.stmt_prepare(pkt).await?,
                }
            }
            COM_STMT_EXECUTE
            | COM_STMT_FETCH
            | COM_STMT_RESET
            | COM_STMT_CLOSE
            | COM_STMT_SEND_LONG_DATA
            | COM_STMT_BULK_EXECUTE => {
                let id = self.client_stmt_id(&pkt.payload);
                if let Some(quit) = self
                    .prepared_kill_command(cmd, id, seq, &pkt.payload)
                    .await?
                {
                    return Ok(quit);
                }
                match cmd {
                    COM_STMT_EXECUTE => self.stmt_execute(pkt).await?,
                    COM_STMT_FETCH => self.stmt_fetch(pkt).await?,
                    COM_STMT_RESET => self.stmt_reset(pkt).await?,
                    COM_STMT_CLOSE => self.stmt_close(pkt).await?,
                    COM_STMT_SEND_LONG_DATA => self.stmt_send_long_data(pkt).await?,
                    _ => Box::pin(self.stmt_bulk_execute(pkt)).await?,
                }
            }
            COM_PROCESS_KILL => {
                let id = crate::prepared::execute::stmt_id(&pkt.payload).unwrap_or(0);
                let k = kill::Kill {
                    query: false,
                    target: kill::Target::Id(u64::from(id)),
                };
                return Box::pin(self.kill(seq, k)).await;
            }
            COM_CHANGE_USER => return Box::pin(self.change_user(pkt)).await,
            _ => self.send_err(seq, &errors::unknown_command(cmd)).await?,
        }
        Ok(false)
    }

    /// Lets go of the held backend after a COM_RESET_CONNECTION on it (its
    /// transaction, locks, temporary tables and variables end before the
    /// client hears back, as they would on its own server connection);
    /// a backend that cannot be reset is closed.
    async fn let_go_reset(&mut self) {
        if let Some(mut b) = self.backend.take()
            && b.reset(&crate::pool::parking::baseline()).await.is_ok()
        {
            b.return_idle();
        }
    }

    async fn reset_connection(&mut self, seq: u8) -> Result<(), End> {
        self.let_go_reset().await;
        self.start_over_parked().await;
        // The server keeps the schema and the multi-statements option.
        let schema = self.state.schema.take();
        let multi = self.state.multi_statements;
        self.state = initial_state(self.initial);
        self.state.schema = schema;
        self.state.multi_statements = multi;
        self.inv.clear();
        self.pins.clear_state();
        self.drop_statements();
        self.own_trackers = None;
        self.status = self.shared.pool.session_status();
        self.pending_begin = false;
        self.send_ok(seq).await
    }

    fn priority(&mut self) -> Priority {
        let cfg = &self.shared.config.load().pool;
        crate::pool::scheduler::priority(
            cfg.high_prio_mode,
            self.pins.holds_lock(),
            &mut self.tickets,
            cfg.high_prio_tickets,
        )
    }

    /// A backend held only for its diagnostics area goes back to the pool
    /// when the client stays silent for `pool.diagnostics_hold_ms`: idle
    /// clients never keep backends from others for long.
    async fn release_diagnostics_hold(&mut self) -> Result<(), End> {
        let mut only = self.pins;
        only.remove(PinReason::Diagnostics);
        // User variables stored code may have left, not yet counted because
        // the diagnostics area had to be kept: counted when the hold ends.
        let recount = self.inv.user_vars.is_empty() && self.inv.user_vars_unverified;
        if recount {
            only.remove(PinReason::UserVariable);
        }
        if !self.pins.has(PinReason::Diagnostics) || only.any() || self.client.buffered() > 0 {
            return Ok(());
        }
        let hold = Duration::from_millis(self.shared.config.load().pool.diagnostics_hold_ms);
        match tokio::time::timeout(hold, self.client.watch_peer()).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(WireError::Closed)) => Err(End::ClientGone),
            Ok(Err(e)) => Err(End::Client(e)),
            Err(_) => {
                self.pins.remove(PinReason::Diagnostics);
                if recount
                    && let Some(b) = self.backend.as_mut()
                    && crate::pool::parking::count_user_variables(b).await == Some(0)
                {
                    self.inv.user_vars_unverified = false;
                    self.sync_inventory_pins();
                }
                self.release_if_unpinned();
                Ok(())
            }
        }
    }

    /// How long the held backend may sit unused before a command the proxy
    /// answers itself pings it: half the server's idle limit, at least 1 s.
    fn keepalive_after(&self) -> Duration {
        self.wait_timeout()
            .map_or(Duration::from_secs(30), |d| d / 2)
            .max(Duration::from_secs(1))
    }

    /// How long the server would let this client stay silent (see
    /// [`idle`]).
    fn wait_timeout(&self) -> Option<Duration> {
        let globals = self
            .shared
            .templates
            .server_vars
            .as_deref()
            .map(|v| &v.idle);
        idle::limit(
            &self.state.vars,
            globals,
            self.caps.has(flag::INTERACTIVE),
            self.status & status::IN_TRANS != 0,
        )
    }

    /// The statement just run left a warning list (or an error) on the
    /// held backend: it is held for the client's next statements (see
    /// `keeps_diagnostics` and `release_diagnostics_hold`).
    fn hold_diagnostics(&mut self) {
        self.diag_since = Some(Instant::now());
        self.pin(PinReason::Diagnostics);
    }

    /// True when the session holds a backend for its diagnostics area and
    /// `sql` leaves that area as it is on the server: it only reads it, or
    /// it uses no table and the list is younger than
    /// `pool.diagnostics_hold_ms` (see `diag_since`). The hold goes on
    /// through it.
    fn keeps_diagnostics(&self, sql: &[u8]) -> bool {
        use crate::sql::DiagnosticsUse;
        if !self.pins.has(PinReason::Diagnostics) {
            return false;
        }
        let lex = crate::session_state::authority::lex_options(&self.state, self.status);
        match crate::sql::keeps_diagnostics(sql, lex) {
            DiagnosticsUse::Reads => true,
            DiagnosticsUse::Keeps => {
                let hold =
                    Duration::from_millis(self.shared.config.load().pool.diagnostics_hold_ms);
                self.diag_since.is_some_and(|t| t.elapsed() < hold)
            }
            DiagnosticsUse::Clears => false,
        }
    }

    /// Returns a pinned backend to its group when nothing pins it any more.
    fn release_if_unpinned(&mut self) {
        if !self.pins.any()
            && let Some(b) = self.backend.take()
        {
            self.let_go(b);
        }
    }

    /// Lets go of a backend the session holds nothing on: as it is when
    /// the authority says it may be shared, else parked for this session
    /// (see `crate::pool::parking`), else cleaned off the client's path.
    fn let_go(&mut self, mut b: Leased) {
        self.park(&mut b);
        execute::release_backend(&self.shared, b);
    }

    /// Tags `b` as parked for this session when its verdict allows it
    /// (see [`Leased::park`]) and remembers to ask for it back.
    fn park(&mut self, b: &mut Leased) -> bool {
        let parked = b.park(self.owner);
        self.parked |= parked;
        parked
    }

    /// The session starts over (a reset, or another login on the same
    /// connection): a backend it parked is cleaned before the client is
    /// answered, and later ones are parked under a new token, so nothing
    /// of the old session is taken back as it is by the new one.
    async fn start_over_parked(&mut self) {
        self.parked = false;
        let old = std::mem::replace(&mut self.owner, crate::pool::parking::owner_token());
        crate::pool::parking::unpark_own(&self.group, old).await;
    }

    /// The `parked` part of this session's next lease (see
    /// [`crate::pool::scheduler::Need::Lease`]); the session asks once.
    fn lease_parked(&mut self) -> Option<u64> {
        std::mem::take(&mut self.parked).then_some(self.owner)
    }

    /// True when nothing but session mode or a warnings hold pins: losing
    /// the backend loses no state the client relies on.
    fn only_session_mode(&self) -> bool {
        let mut p = self.pins;
        p.remove(PinReason::SessionMode);
        p.remove(PinReason::Diagnostics);
        !p.any()
    }
}

/// The state of a fresh session: the character set of its login collation
/// (the backend's when the id is unknown) and its multi-statements option.
fn initial_state((collation, multi): (u16, bool)) -> TrackedState {
    let mut st = TrackedState::for_collation(collation);
    if st.vars.is_empty() {
        st = TrackedState::for_collation(u16::from(crate::backend::connect::BACKEND_COLLATION));
    }
    st.multi_statements = multi;
    st
}

/// True for `ROLLBACK` (not `ROLLBACK TO SAVEPOINT`, which keeps the
/// transaction open and so never ends one).
fn is_rollback(sql: &[u8]) -> bool {
    let start = sql
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .unwrap_or(sql.len());
    let t = &sql[start..];
    t.len() >= 8 && t[..8].eq_ignore_ascii_case(b"rollback")
}
