//! One logged-in backend connection and the internal exchanges the proxy
//! runs on it (its own commands whose replies are consumed, never relayed),
//! read in the terminator style the connection negotiated (its flavour).

use std::sync::atomic::{AtomicU64, Ordering};

use tokio::time::Instant;

use crate::protocol::caps::Caps;
use crate::protocol::command;
use crate::protocol::errors::RawErr;
use crate::protocol::packets::{ErrPacket, OkPacket};
use crate::protocol::response::{Class, Shape, Tracker};
use crate::session_state::{LoginDefaults, SyncPlan, TrackedState};
use crate::wire::{PacketIo, WireError};

/// Process-unique id of a backend connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BackendId(pub u64);

impl BackendId {
    /// Issues the next id.
    pub fn next() -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        Self(NEXT.fetch_add(1, Ordering::Relaxed))
    }
}

/// Why a backend operation failed.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// The socket failed or closed.
    #[error("{0}")]
    Wire(#[from] WireError),
    /// Dialing timed out.
    #[error("timed out connecting to backend")]
    Timeout,
    /// The server refused (login failure, …).
    #[error("backend error {}: {}", .0.code, .0.message)]
    Server(ErrPacket),
    /// The server sent bytes that break the protocol.
    #[error("protocol violation by backend: {0}")]
    Protocol(String),
    /// The TLS setup failed.
    #[error("tls: {0}")]
    Tls(String),
    /// Several servers and none is the primary (`crate::pool::servers`).
    #[error("{0}")]
    NoPrimary(String),
}

impl BackendError {
    /// The server's refusal when it is at a connection limit (1040
    /// `max_connections`, 1203 `max_user_connections`, 1226 the account's
    /// own `MAX_USER_CONNECTIONS`): the server is up and full, not
    /// unreachable.
    pub fn server_full(&self) -> Option<&ErrPacket> {
        match self {
            BackendError::Server(e) if crate::protocol::errors::is_connection_limit(e.code) => {
                Some(e)
            }
            _ => None,
        }
    }

    /// True when the descriptor table is full (EMFILE / ENFILE).
    pub fn is_out_of_fds(&self) -> bool {
        match self {
            BackendError::Wire(WireError::Io(e)) => {
                matches!(e.raw_os_error(), Some(24) | Some(23))
            }
            _ => false,
        }
    }
}

/// Limits the server enforces on every connection, learned from its global
/// variables at start and on each dial (a client connecting directly gets
/// the global values of the moment).
#[derive(Debug)]
pub struct ServerLimits {
    /// `max_allowed_packet` (`u64::MAX` until known).
    max_allowed_packet: AtomicU64,
    /// `max_prepared_stmt_count`, shared by all connections of the server
    /// (`u64::MAX` until known).
    max_prepared_stmt_count: AtomicU64,
}

impl Default for ServerLimits {
    fn default() -> Self {
        Self {
            max_allowed_packet: AtomicU64::new(u64::MAX),
            max_prepared_stmt_count: AtomicU64::new(u64::MAX),
        }
    }
}

impl ServerLimits {
    /// Records the server's values.
    pub fn set(&self, max_allowed_packet: u64, max_prepared_stmt_count: u64) {
        self.max_allowed_packet
            .store(max_allowed_packet, Ordering::Relaxed);
        self.max_prepared_stmt_count
            .store(max_prepared_stmt_count, Ordering::Relaxed);
    }

    /// The server's `max_allowed_packet`, when known.
    pub fn max_allowed_packet(&self) -> Option<u64> {
        let v = self.max_allowed_packet.load(Ordering::Relaxed);
        (v != u64::MAX).then_some(v)
    }

    /// The server's `max_prepared_stmt_count`, when known.
    pub fn max_prepared_stmt_count(&self) -> Option<u64> {
        let v = self.max_prepared_stmt_count.load(Ordering::Relaxed);
        (v != u64::MAX).then_some(v)
    }

    /// The largest command payload a client may send: the server refuses a
    /// packet of `max_allowed_packet` bytes or more (so does the proxy, with
    /// the smaller of its own `configured` limit and the server's).
    pub fn client_packet_max(&self, configured: usize) -> usize {
        Self::packet_max(configured, self.max_allowed_packet())
    }

    /// [`Self::client_packet_max`] for a session whose server limit is
    /// `server` (`None`: not known).
    pub fn packet_max(configured: usize, server: Option<u64>) -> usize {
        let server = server.map_or(usize::MAX, |v| usize::try_from(v).unwrap_or(usize::MAX));
        configured.min(server).saturating_sub(1)
    }

    /// Statements one backend connection may keep prepared: the configured
    /// cap, but never more than the server's global limit shared out over
    /// all `backends` the pool may open (at least one each).
    pub fn stmts_per_backend(&self, configured: usize, backends: usize) -> usize {
        let cap = configured.max(1);
        match self.max_prepared_stmt_count() {
            Some(limit) => {
                let share = limit / u64::try_from(backends.max(1)).unwrap_or(u64::MAX);
                cap.min(usize::try_from(share).unwrap_or(usize::MAX).max(1))
            }
            None => cap,
        }
    }
}

/// The outcome of an internal command.
#[derive(Debug)]
pub enum InternalReply {
    /// Final OK (status flags, session-state block copied out).
    Ok { status: u16, state: Vec<u8> },
    /// The server answered with an error.
    Err(ErrPacket),
}

/// A logged-in backend connection.
#[derive(Debug)]
pub struct BackendConn {
    /// Packet I/O.
    pub io: PacketIo,
    /// Our id.
    pub id: BackendId,
    /// The server's connection (thread) id.
    pub thread_id: u32,
    /// Index of the credential pool this connection belongs to.
    pub pool: usize,
    /// Session state currently applied on the server side.
    pub state: TrackedState,
    /// Last status flags seen.
    pub status: u16,
    /// When the connection was last returned idle / used.
    pub last_used: Instant,
    /// Open since.
    pub opened: Instant,
    /// Prepared statements open on this connection.
    pub stmts: crate::prepared::BackendStmts,
    /// Auth plugin and scramble of the login (COM_CHANGE_USER answers them).
    pub auth: (Vec<u8>, Vec<u8>),
    /// Capabilities negotiated with the server (profile + flavour).
    pub caps: Caps,
    /// What the session-state authority noted about this connection
    /// (reset needed, diagnostics to clear, LAST_INSERT_ID unknown).
    pub marks: crate::session_state::BackendMarks,
    /// The pool's globals generation its session values come from (login
    /// or last reset).
    pub globals_epoch: u64,
    /// The pool's primary-server generation it was dialed in
    /// (`crate::pool::servers`): a connection to a server that stopped
    /// being the primary is closed, never shared again.
    pub server_epoch: u64,
    /// Which of `backend.address`'s servers it is connected to (its
    /// index; 0 with one server): a KILL for its thread must go there.
    pub server: usize,
    /// Counts it among its server's open backends while it lives (a
    /// replica's backends, see `crate::pool::servers::Servers::backends`).
    pub counted: Option<Counted>,
    /// CURRENT_ROLE() right after login (`None` = no role): neither
    /// COM_RESET_CONNECTION nor COM_CHANGE_USER restores it (measured on
    /// MariaDB 10.11), so a connection whose role moved is closed.
    pub login_role: Option<String>,
    /// CURRENT_USER() right after login (`user@host`): the account row the
    /// server matched (`crate::pool::local_socket` holds a socket login to
    /// the account a TCP login got).
    pub account: Option<String>,
    /// The pool's default-roles generation at login.
    pub roles_epoch: u64,
    /// Idle but not clean: the owner token of the session whose leftovers
    /// (see [`crate::session_state::BackendMarks`]) it still holds. That
    /// session may take it back as it is; anyone else gets it only after
    /// the authority's cleanup (`crate::pool::parking`).
    pub parked_for: Option<u64>,
    /// The user (tenant index) whose share of its thread group's backends
    /// this connection counts in (`crate::pool::scheduler`): the user it
    /// was opened or first leased for; `None` for one the pool opened for
    /// itself and no user has taken yet.
    pub share_user: Option<u32>,
}

/// A successful COM_STMT_PREPARE reply.
#[derive(Debug)]
pub struct Prepared {
    /// The backend's statement id.
    pub id: u32,
    /// Parameter count.
    pub params: u16,
    /// Column count.
    pub columns: u16,
    /// The reply's payloads (prepare-OK and definitions), without the EOF
    /// packets a connection without DEPRECATE_EOF receives: a client without
    /// it gets EOFs carrying its own session's status.
    pub packets: Vec<Vec<u8>>,
    /// The prepare-OK's warning count: this prepare's, which the packets
    /// (shared through the registry) need not carry for another client.
    pub warnings: u16,
}

impl BackendConn {
    /// A response tracker in this connection's terminator style.
    pub fn tracker(&self, shape: Shape) -> Tracker {
        Tracker::with_style(shape, self.caps.deprecate_eof())
    }

    /// Sends one command (seq 0) and reads its whole reply, absorbing any
    /// session-state changes into `self.state`.
    pub async fn internal(
        &mut self,
        payload: &[u8],
        shape: Shape,
    ) -> Result<InternalReply, BackendError> {
        self.io.send_packet(0, payload).await?;
        self.read_internal_reply(shape).await
    }

    /// Reads the reply of a command already sent.
    pub async fn read_internal_reply(
        &mut self,
        shape: Shape,
    ) -> Result<InternalReply, BackendError> {
        let mut t = self.tracker(shape);
        let mut reply = None;
        let mut state = Vec::new();
        while !t.done() {
            let h = self.io.next_chunk().await?;
            let first = self.io.chunk_payload(h);
            let class = t.next(first, h.continues());
            match class {
                Class::Ok | Class::Terminator => {
                    if let Some(ok) = OkPacket::parse(first).filter(|_| first.len() != 5) {
                        self.status = ok.status;
                        self.marks.diagnostics |= ok.warnings > 0;
                        state.extend_from_slice(ok.session_state);
                    } else if let Some((status, warnings)) =
                        crate::protocol::response::end_status(first)
                    {
                        self.status = status;
                        self.marks.diagnostics |= warnings > 0;
                    }
                    if t.done() {
                        reply = Some(InternalReply::Ok {
                            status: self.status,
                            state: std::mem::take(&mut state),
                        });
                    }
                }
                Class::Err => {
                    // Whatever asked, the error is in the diagnostics area
                    // now: cleared before anyone else can read it.
                    self.marks.diagnostics = true;
                    reply = Some(InternalReply::Err(ErrPacket::parse(first).unwrap_or_else(
                        || ErrPacket::new(2027, "HY000", "malformed error packet"),
                    )));
                }
                Class::Single => {
                    reply = Some(InternalReply::Ok {
                        status: self.status,
                        state: Vec::new(),
                    })
                }
                Class::Eof if t.done() => {
                    // COM_STMT_EXECUTE that opened a cursor (classic style).
                    reply = Some(InternalReply::Ok {
                        status: t.last_status.unwrap_or(self.status),
                        state: Vec::new(),
                    })
                }
                Class::Malformed | Class::LocalInfile => {
                    return Err(BackendError::Protocol(format!(
                        "unexpected packet 0x{:02x} in internal reply",
                        first.first().copied().unwrap_or(0)
                    )));
                }
                _ => {}
            }
            // Skip continuation chunks of a large packet.
            let mut last = h;
            self.io.consume_chunk(h);
            while last.continues() {
                last = self.io.next_chunk().await?;
                self.io.consume_chunk(last);
            }
        }
        let reply = reply.ok_or_else(|| BackendError::Protocol("empty reply".into()))?;
        if let InternalReply::Ok { state, .. } = &reply {
            self.state.apply_block(state);
        }
        Ok(reply)
    }

    /// Runs SQL whose result must be OK.
    pub async fn exec(&mut self, sql: &str) -> Result<(), BackendError> {
        match self
            .internal(&com_query(sql.as_bytes()), Shape::Query)
            .await?
        {
            InternalReply::Ok { .. } => Ok(()),
            InternalReply::Err(e) => Err(BackendError::Server(e)),
        }
    }

    /// Runs a query and returns its first row's text cells (`None` = NULL).
    pub async fn query_row(
        &mut self,
        sql: impl AsRef<[u8]>,
    ) -> Result<Option<Vec<Option<String>>>, BackendError> {
        Ok(self.query_rows(sql, 1).await?.into_iter().next())
    }

    /// Runs a query and returns the text cells of its first `max` rows
    /// (`None` = NULL); the rest are read and dropped.
    pub async fn query_rows(
        &mut self,
        sql: impl AsRef<[u8]>,
        max: usize,
    ) -> Result<Vec<Vec<Option<String>>>, BackendError> {
        self.rows(&com_query(sql.as_ref()), max).await
    }

    /// Sends a COM_QUERY payload and reads its result, keeping at most `max`
    /// rows (the rest are read and dropped).
    async fn rows(
        &mut self,
        payload: &[u8],
        max: usize,
    ) -> Result<Vec<Vec<Option<String>>>, BackendError> {
        self.io.send_packet(0, payload).await?;
        self.read_rows(max).await
    }

    /// Sends the command `payload` and then the command `query` (a whole
    /// COM_QUERY payload) in one write (one wake-up of the server thread,
    /// no round trip between them); the query's first row is read by
    /// [`Self::read_row`] once the first command's answer has been read.
    /// Plain hops only: the caller checks `io.is_compressed()`.
    pub async fn send_then_query(&mut self, payload: &[u8], query: &[u8]) -> Result<u8, WireError> {
        let next = self.io.write_packet(0, payload);
        self.io.write_packet(0, query);
        self.io.flush().await?;
        Ok(next)
    }

    /// Reads the answer to a query sent by [`Self::send_then_query`]: its
    /// first row's text cells.
    pub async fn read_row(&mut self) -> Result<Option<Vec<Option<String>>>, BackendError> {
        Ok(self.read_rows(1).await?.into_iter().next())
    }

    /// Runs a query and returns its first row as (column name, text cell)
    /// pairs (`None`: no row): for `SHOW` statements whose columns differ
    /// between servers and versions, read by name.
    pub async fn query_named_row(
        &mut self,
        sql: &str,
    ) -> Result<Option<Vec<(String, Option<String>)>>, BackendError> {
        self.io.send_packet(0, &com_query(sql.as_bytes())).await?;
        let mut names = Vec::new();
        let rows = self.read_result(1, Some(&mut names)).await?;
        Ok(rows
            .into_iter()
            .next()
            .map(|row| names.into_iter().zip(row).collect()))
    }

    /// Reads a query's result, keeping at most `max` rows.
    async fn read_rows(&mut self, max: usize) -> Result<Vec<Vec<Option<String>>>, BackendError> {
        self.read_result(max, None).await
    }

    /// Reads a query's result, keeping at most `max` rows, and the columns'
    /// names into `names` when given.
    async fn read_result(
        &mut self,
        max: usize,
        mut names: Option<&mut Vec<String>>,
    ) -> Result<Vec<Vec<Option<String>>>, BackendError> {
        let mut t = self.tracker(Shape::Query);
        let mut rows = Vec::new();
        let mut err = None;
        while !t.done() {
            let pkt = self.io.read_packet(1 << 26).await?;
            match t.next(&pkt.payload, false) {
                Class::ColumnDef { .. } => {
                    if let Some(n) = names.as_deref_mut() {
                        n.push(column_name(&pkt.payload));
                    }
                }
                Class::Row if rows.len() < max => {
                    let mut r = crate::protocol::lenenc::Reader::new(&pkt.payload);
                    let mut cells = Vec::new();
                    while !r.is_empty() {
                        if r.rest().first() == Some(&0xFB) {
                            r.u8();
                            cells.push(None);
                        } else {
                            match r.lenenc_bytes() {
                                Some(b) => {
                                    cells.push(Some(String::from_utf8_lossy(b).into_owned()))
                                }
                                None => break,
                            }
                        }
                    }
                    rows.push(cells);
                }
                Class::Err => {
                    self.marks.diagnostics = true;
                    err = ErrPacket::parse(&pkt.payload);
                }
                Class::Ok | Class::Terminator | Class::Eof => {
                    if let Some((_, warnings)) = crate::protocol::response::end_status(&pkt.payload)
                    {
                        self.marks.diagnostics |= warnings > 0;
                    }
                }
                Class::Malformed => return Err(BackendError::Protocol("malformed result".into())),
                _ => {}
            }
        }
        match err {
            Some(e) => Err(BackendError::Server(e)),
            None => Ok(rows),
        }
    }

    /// COM_STMT_PREPARE; the whole reply is read and kept.
    pub async fn prepare(
        &mut self,
        sql: &[u8],
    ) -> Result<Result<Prepared, ErrPacket>, BackendError> {
        Ok(self.prepare_raw(sql).await?.map_err(|e| {
            ErrPacket::parse(e.payload())
                .unwrap_or_else(|| ErrPacket::new(2027, "HY000", "malformed error packet"))
        }))
    }

    /// COM_STMT_PREPARE, with a refusal kept as the server's bytes (its
    /// message is in the connection's character set).
    pub async fn prepare_raw(
        &mut self,
        sql: &[u8],
    ) -> Result<Result<Prepared, RawErr>, BackendError> {
        let mut p = Vec::with_capacity(sql.len() + 1);
        p.push(command::COM_STMT_PREPARE);
        p.extend_from_slice(sql);
        self.io.send_packet(0, &p).await?;
        let mut t = self.tracker(Shape::Prepare);
        let mut packets = Vec::new();
        let mut head = None;
        while !t.done() {
            let pkt = self.io.read_packet(1 << 24).await?;
            match t.next(&pkt.payload, false) {
                Class::Eof | Class::Progress => continue,
                Class::Err => {
                    self.marks.diagnostics = true;
                    return match RawErr::from_payload(&pkt.payload) {
                        Some(e) => Ok(Err(e)),
                        None => Err(BackendError::Protocol("malformed error packet".into())),
                    };
                }
                Class::PrepareOk { params, columns } => {
                    let id = crate::prepared::execute::stmt_id(&pkt.payload).unwrap_or(0);
                    // [00][id:4][columns:2][params:2][filler][warnings:2]
                    let warnings = pkt
                        .payload
                        .get(10..12)
                        .map_or(0, |w| u16::from_le_bytes([w[0], w[1]]));
                    self.marks.diagnostics |= warnings > 0;
                    head = Some((id, params, columns, warnings));
                }
                Class::Malformed => {
                    return Err(BackendError::Protocol("malformed prepare reply".into()));
                }
                _ => {}
            }
            packets.push(pkt.payload.to_vec());
        }
        let (id, params, columns, warnings) =
            head.ok_or_else(|| BackendError::Protocol("prepare reply without OK".into()))?;
        Ok(Ok(Prepared {
            id,
            params,
            columns,
            packets,
            warnings,
        }))
    }

    /// COM_STMT_RESET of a backend statement, its reply consumed: closes
    /// its cursor and drops long data and a long-data error state.
    pub async fn reset_stmt(&mut self, id: u32) -> Result<InternalReply, BackendError> {
        let mut p = vec![command::COM_STMT_RESET];
        p.extend_from_slice(&id.to_le_bytes());
        self.internal(&p, Shape::Query).await
    }

    /// Reads the server's global `max_allowed_packet` and
    /// `max_prepared_stmt_count` into `limits`.
    pub async fn learn_limits(&mut self, limits: &ServerLimits) -> Result<(), BackendError> {
        let row = self
            .query_row("SELECT @@global.max_allowed_packet, @@global.max_prepared_stmt_count")
            .await?
            .unwrap_or_default();
        let num = |i: usize| {
            row.get(i)
                .cloned()
                .flatten()
                .and_then(|v| v.trim().parse::<u64>().ok())
        };
        if let (Some(packet), Some(stmts)) = (num(0), num(1)) {
            limits.set(packet, stmts);
        }
        Ok(())
    }

    /// COM_STMT_CLOSE (no reply).
    pub async fn close_stmt(&mut self, id: u32) -> Result<(), BackendError> {
        let mut p = vec![command::COM_STMT_CLOSE];
        p.extend_from_slice(&id.to_le_bytes());
        self.io.send_packet(0, &p).await?;
        Ok(())
    }

    /// The first column definition of a query's result (for templates).
    pub async fn column_def(&mut self, sql: &str) -> Result<Option<Vec<u8>>, BackendError> {
        self.io.send_packet(0, &com_query(sql.as_bytes())).await?;
        let mut t = self.tracker(Shape::Query);
        let mut def = None;
        while !t.done() {
            let pkt = self.io.read_packet(1 << 24).await?;
            match t.next(&pkt.payload, false) {
                Class::ColumnDef { .. } if def.is_none() => def = Some(pkt.payload.to_vec()),
                Class::Malformed => return Err(BackendError::Protocol("malformed result".into())),
                _ => {}
            }
        }
        Ok(def)
    }

    /// Says goodbye (COM_QUIT) and closes: the server counts no aborted
    /// connection. Errors are moot: the connection is gone either way.
    pub async fn quit(mut self) {
        let _ = self.io.send_packet(0, &[command::COM_QUIT]).await;
    }

    /// COM_PING.
    pub async fn ping(&mut self) -> Result<(), BackendError> {
        match self.internal(&[command::COM_PING], Shape::Query).await? {
            InternalReply::Ok { .. } => Ok(()),
            InternalReply::Err(e) => Err(BackendError::Server(e)),
        }
    }

    /// Returns the connection to "no schema selected" — which only a
    /// COM_CHANGE_USER can do — then switches the trackers on again.
    pub async fn clear_schema(
        &mut self,
        p: &crate::backend::BackendParams,
        baseline: &TrackedState,
    ) -> Result<(), BackendError> {
        let (plugin, nonce) = self.auth.clone();
        let auth =
            crate::backend::connect::auth_response(&plugin, &nonce, p, self.io.stream.is_tls())?;
        let mut req = Vec::with_capacity(64 + p.user.len());
        req.push(command::COM_CHANGE_USER);
        req.extend_from_slice(p.user.as_bytes());
        req.push(0);
        req.push(u8::try_from(auth.len()).unwrap_or(0));
        req.extend_from_slice(&auth);
        req.push(0); // no schema
        req.extend_from_slice(&u16::from(crate::backend::connect::BACKEND_COLLATION).to_le_bytes());
        req.extend_from_slice(&plugin);
        req.push(0);
        self.io.send_packet(0, &req).await?;
        self.auth = crate::backend::connect::authenticate(&mut self.io, p, plugin, nonce).await?;
        // The server keeps the multi-statements option across a change of
        // user; everything else is a fresh session's.
        let multi = self.state.multi_statements;
        self.stmts.clear();
        self.state = baseline.clone();
        self.exec(&self.after_reset_sql()).await?;
        // Over a socket the server matches the account again as
        // `localhost`: it must still be the one the connection was proven
        // to be (`crate::pool::local_socket`), or the connection goes.
        if self.io.stream.is_unix()
            && let Some(account) = self.account.clone()
        {
            let now = self.query_row("SELECT CURRENT_USER()").await?;
            let now = now.and_then(|r| r.into_iter().next().flatten());
            if now.as_deref() != Some(account.as_str()) {
                return Err(BackendError::Protocol(format!(
                    "a change of user over the socket logged in as {now:?}, not {account}"
                )));
            }
        }
        self.state = baseline.clone();
        self.state.multi_statements = multi;
        self.marks = crate::session_state::BackendMarks {
            role_changed: self.marks.role_changed,
            records_queries: self.marks.records_queries,
            ..Default::default()
        };
        Ok(())
    }

    /// A connection whose active role may have moved, or that recorded
    /// statement texts (profiling, optimizer trace), cannot be brought back
    /// by a reset or a change of user (both keep the role and the history).
    fn refuse_if_unresettable(&self) -> Result<(), BackendError> {
        if self.marks.role_changed {
            return Err(BackendError::Protocol(
                "the active role changed; the connection cannot be reused".into(),
            ));
        }
        if self.marks.ran_xa {
            return Err(BackendError::Protocol(
                "an XA transaction ran; the connection cannot be reused".into(),
            ));
        }
        if self.marks.records_queries {
            return Err(BackendError::Protocol(
                "profiling or the optimizer trace recorded statements; \
                 the connection cannot be reused"
                    .into(),
            ));
        }
        Ok(())
    }

    /// What brings a connection back to a fresh one of its flavour after
    /// COM_RESET_CONNECTION or COM_CHANGE_USER: the trackers, and what the
    /// server derives from the capabilities at login but drops on a reset
    /// or change of user ([`LoginDefaults::after_reset`]).
    fn after_reset_sql(&self) -> String {
        // COM_RESET_CONNECTION keeps LAST_INSERT_ID() (issue 16 B.5: a
        // session-mode client's id reached the next client through a reset
        // backend); the variable sets what the function returns.
        let mut set = String::from("SET SESSION last_insert_id = 0, ");
        for a in self.login_defaults().after_reset() {
            set.push_str(&a);
            set.push_str(", ");
        }
        crate::backend::connect::TRACKERS_SQL.replacen("SET SESSION ", &set, 1)
    }

    /// What a fresh login of this connection's flavour has away from the
    /// global values.
    pub fn login_defaults(&self) -> LoginDefaults {
        LoginDefaults::of(self.caps)
    }

    /// What to send to this connection to bring it to `target`.
    pub fn plan_toward(&self, target: &TrackedState) -> SyncPlan {
        target.sync_plan(&self.state, self.login_defaults())
    }

    /// COM_RESET_CONNECTION, then the trackers again (the reset restores
    /// session variables to their global values).
    pub async fn reset(&mut self, baseline: &TrackedState) -> Result<(), BackendError> {
        self.refuse_if_unresettable()?;
        match self
            .internal(&[command::COM_RESET_CONNECTION], Shape::Query)
            .await?
        {
            InternalReply::Ok { .. } => {}
            InternalReply::Err(e) => return Err(BackendError::Server(e)),
        }
        // The reset keeps the current schema and the multi-statements
        // option; everything else is back to a fresh connection's.
        let schema = self.state.schema.take();
        let multi = self.state.multi_statements;
        self.state = baseline.clone();
        self.stmts.clear();
        self.exec(&self.after_reset_sql()).await?;
        // The reset keeps the schema but takes the database character set
        // and collation from the globals (`character_set_database` reads
        // the server's default, not the schema's): selecting the schema
        // again reads them from it, as a new connection naming it would.
        if let Some(db) = &schema {
            let mut p = vec![command::COM_INIT_DB];
            p.extend_from_slice(db);
            if let InternalReply::Err(e) = self.internal(&p, Shape::Query).await? {
                return Err(BackendError::Server(e));
            }
        }
        self.state = baseline.clone();
        self.state.schema = schema;
        self.state.multi_statements = multi;
        self.marks = Default::default();
        Ok(())
    }
}

/// A COM_QUERY payload for `sql`.
fn com_query(sql: &[u8]) -> Vec<u8> {
    let mut p = Vec::with_capacity(sql.len() + 1);
    p.push(command::COM_QUERY);
    p.extend_from_slice(sql);
    p
}

/// The name of the column a protocol 4.1 column definition describes (as
/// the query named it: `name`, not `org_name`); empty when malformed.
fn column_name(def: &[u8]) -> String {
    let mut r = crate::protocol::lenenc::Reader::new(def);
    // catalog, schema, table, org_table, then name.
    for _ in 0..4 {
        if r.lenenc_bytes().is_none() {
            return String::new();
        }
    }
    r.lenenc_bytes()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .unwrap_or_default()
}

/// A connection over `stream` that never logged in: for the pool's own
/// accounting tests (nothing is sent on it unless a test does).
#[cfg(test)]
pub(crate) fn unlogged(stream: crate::wire::stream::Stream, pool: usize) -> BackendConn {
    let now = Instant::now();
    BackendConn {
        io: PacketIo::new(stream),
        id: BackendId::next(),
        thread_id: 0,
        pool,
        state: TrackedState::default(),
        status: 0,
        last_used: now,
        opened: now,
        stmts: Default::default(),
        auth: (Vec::new(), Vec::new()),
        caps: Caps::default(),
        marks: Default::default(),
        globals_epoch: 0,
        server_epoch: 0,
        server: 0,
        counted: None,
        login_role: None,
        account: None,
        roles_epoch: 0,
        parked_for: None,
        share_user: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn column_name_is_the_fifth_string() {
        // catalog "def", schema "", table "t", org_table "", name "Seconds_Behind_Master", org_name "x", rest.
        let mut def = vec![3];
        def.extend_from_slice(b"def");
        def.extend_from_slice(&[0, 1, b't', 0]);
        def.push(21);
        def.extend_from_slice(b"Seconds_Behind_Master");
        def.extend_from_slice(&[1, b'x', 0x0c, 0x3f, 0]);
        assert_eq!(column_name(&def), "Seconds_Behind_Master");
        assert_eq!(column_name(&def[..5]), "", "truncated");
    }

    #[test]
    fn limits_until_known_and_after() {
        let l = ServerLimits::default();
        assert_eq!(l.client_packet_max(64 << 20), (64 << 20) - 1);
        assert_eq!(l.stmts_per_backend(256, 8), 256);
        l.set(16 << 20, 10);
        assert_eq!(l.client_packet_max(64 << 20), (16 << 20) - 1);
        assert_eq!(
            l.client_packet_max(4096),
            4095,
            "a smaller configured limit wins"
        );
        assert_eq!(l.stmts_per_backend(256, 8), 1);
        assert_eq!(l.stmts_per_backend(256, 2), 5);
        assert_eq!(l.stmts_per_backend(3, 2), 3);
        l.set(16 << 20, 0);
        assert_eq!(l.stmts_per_backend(256, 8), 1, "never zero");
    }
}

/// Membership in a count of open connections: one while it lives.
#[derive(Debug)]
pub struct Counted(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl Counted {
    /// Counts one more in `count` until dropped.
    pub fn new(count: &std::sync::Arc<std::sync::atomic::AtomicUsize>) -> Self {
        count.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Self(count.clone())
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}
