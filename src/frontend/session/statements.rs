//! Prepared statements without pinning: client statement ids issued by the
//! proxy, prepare replies served from the registry, lazy prepare on the
//! backend an EXECUTE lands on, remembered parameter types re-sent to
//! backends that have not seen them, re-prepare on ER_NEED_REPREPARE.
//!
//! What a client statement keeps on the backend — an open cursor, long data
//! awaiting EXECUTE — is tracked per statement ([`Held`]): any number of
//! cursors at once, long data of one statement untouched by EXECUTEs of
//! others, and the session pinned exactly while one of them lasts. Two
//! statements of one session with the same text get separate backend
//! statements while one of them holds something. SEND_LONG_DATA never gets
//! a reply; what cannot be delivered is reported at EXECUTE, as the server
//! reports its own long-data errors.
//!
//! The server's `max_prepared_stmt_count` is shared by all its connections:
//! the per-backend cap is sized from it, least recently used statements are
//! closed before a prepare, and a prepare refused with
//! ER_MAX_PREPARED_STMT_COUNT_REACHED is retried once after closing the
//! idle ones. Server errors to a prepare are relayed byte for byte.

use std::sync::Arc;

use bytes::BytesMut;

use super::execute::Checkout;
use super::{End, Session};
use crate::backend::{BackendError, Prepared};
use crate::pool::group::Leased;
use crate::prepared::execute::{self, Execute};
use crate::prepared::{StmtEntry, StmtKey};
use crate::protocol::command::*;
use crate::protocol::errors::{self, RawErr};
use crate::protocol::packets::{ErrPacket, eof_payload, status};
use crate::protocol::response::Shape;
use crate::session_state::PinReason;
use crate::wire::packet_io::Packet;

/// The statement id that names the last statement prepared.
const LAST_STMT_ID: u32 = u32::MAX;

/// A statement a client prepared.
#[derive(Debug)]
pub(super) struct ClientStmt {
    pub(super) entry: Arc<StmtEntry>,
    /// Parameter types from the client's last bind.
    pub(super) types: Option<Arc<[u8]>>,
    /// Result columns as this client last saw them (the server flags
    /// METADATA_CHANGED once when they change).
    columns: u64,
    /// Its cursor or long data on the session's (pinned) backend.
    held: Option<Held>,
    /// Long data that could not be delivered: every EXECUTE reports it until
    /// COM_STMT_RESET, as the server does with a long-data error.
    long_data_err: Option<RawErr>,
    /// For a client with cache-metadata: the hash of the column
    /// definitions it last received for this statement
    /// ([`crate::frontend::metadata_cache`]).
    metadata: Option<u64>,
}

impl ClientStmt {
    /// True when nothing of it lives on a backend or waits to be reported:
    /// it can be rebuilt from its text alone (a session moving).
    pub(super) fn movable(&self) -> bool {
        self.held.is_none() && self.long_data_err.is_none()
    }

    /// Columns as the client last saw them, and its cache-metadata hash.
    pub(super) fn seen(&self) -> (u64, Option<u64>) {
        (self.columns, self.metadata)
    }

    /// A statement rebuilt from what a moving session carried.
    pub(super) fn restored(
        entry: Arc<StmtEntry>,
        types: Option<Arc<[u8]>>,
        (columns, metadata): (u64, Option<u64>),
    ) -> Self {
        Self {
            entry,
            types,
            columns,
            held: None,
            long_data_err: None,
            metadata,
        }
    }
}

/// A cursor or long data of one client statement on the pinned backend.
#[derive(Debug)]
struct Held {
    /// The backend statement carrying it.
    backend_id: u32,
    /// Prepared for this client statement alone (another statement of the
    /// session with the same text held the shared one); closed when the
    /// cursor and the long data are gone.
    private: bool,
    /// Parameter types the private statement last received.
    private_types: Option<Arc<[u8]>>,
    cursor: bool,
    long_data: bool,
}

/// The backend statement a command goes to.
#[derive(Debug, Clone, Copy)]
pub(super) struct Route {
    pub(super) id: u32,
    pub(super) private: bool,
    /// It is the statement's [`Held`] one.
    pub(super) held: bool,
}

fn unknown_stmt(id: u32, what: &str) -> ErrPacket {
    ErrPacket::new(
        1243,
        "HY000",
        format!("Unknown prepared statement handler ({id}) given to {what}"),
    )
}

fn malformed() -> ErrPacket {
    ErrPacket::new(1835, "HY000", "Malformed communication packet")
}

fn wrong_arguments(what: &str) -> ErrPacket {
    ErrPacket::new(1210, "HY000", format!("Incorrect arguments to {what}"))
}

fn no_cursor(id: u32) -> ErrPacket {
    ErrPacket::new(
        1421,
        "HY000",
        format!("The statement ({id}) has no open cursor"),
    )
}

impl Session {
    /// Statements one backend connection may keep (see `ServerLimits`).
    fn stmt_cap(&self) -> usize {
        let cfg = self.shared.config.load();
        let pool = &cfg.pool;
        self.shared.limits.stmts_per_backend(
            pool.prepared_per_backend,
            pool.effective_max_backend_connections(),
        )
    }

    /// ER_MAX_PREPARED_STMT_COUNT_REACHED, as the server words it, when
    /// this session holds as many prepared statements (COM_STMT_PREPARE,
    /// prepared KILLs included) as the server's `max_prepared_stmt_count`
    /// (a limit of all its sessions together, so one session alone may
    /// reach it). Checked before anything is prepared or kept.
    pub(super) fn stmt_count_full(&self) -> Option<ErrPacket> {
        const SERVER_DEFAULT: u64 = 16_382;
        let limit = self
            .shared
            .limits
            .max_prepared_stmt_count()
            .unwrap_or(SERVER_DEFAULT);
        let held = u64::try_from(self.stmts.len() + self.prepared_kill_count()).unwrap_or(u64::MAX);
        (held >= limit).then(|| {
            ErrPacket::new(
                1461,
                "42000",
                format!(
                    "Can't create more than max_prepared_stmt_count statements (current value: {limit})"
                ),
            )
        })
    }

    /// Relays a server's error as it sent it.
    pub(super) async fn send_raw_err(&mut self, seq: u8, e: &RawErr) -> Result<(), End> {
        self.shared.metrics.error(e.code(), true);
        self.client.send_packet(seq, e.payload()).await?;
        Ok(())
    }

    /// The cursor and long-data pins follow what the statements hold.
    pub(super) fn sync_stmt_pins(&mut self) {
        let (mut cursor, mut long_data) = (false, false);
        if self.stmts_held {
            let mut any = false;
            for h in self.stmts.values().filter_map(|s| s.held.as_ref()) {
                any = true;
                cursor |= h.cursor;
                long_data |= h.long_data;
            }
            self.stmts_held = any;
        }
        for (on, r) in [
            (cursor, PinReason::Cursor),
            (long_data, PinReason::LongData),
        ] {
            if on {
                self.pin(r);
            } else {
                self.pins.remove(r);
            }
        }
    }

    /// Cursors and long data live on the pinned backend: once it is gone,
    /// so are they.
    pub(super) fn forget_stale_held(&mut self) {
        if self.backend.is_none() {
            self.forget_all_held();
        }
    }

    pub(super) fn forget_all_held(&mut self) {
        if self.stmts_held {
            for s in self.stmts.values_mut() {
                s.held = None;
            }
        }
        self.sync_stmt_pins();
    }

    /// Another client statement keeps its cursor or long data on backend
    /// statement `id`.
    fn occupied(&self, id: u32, except: u32) -> bool {
        self.stmts_held
            && self.stmts.iter().any(|(cid, s)| {
                *cid != except && s.held.as_ref().is_some_and(|h| h.backend_id == id)
            })
    }

    /// The backend failed after the client got its answer: the statements'
    /// cursors and long data are gone; state held there ends the session.
    pub(super) fn backend_broken(&mut self, co: Checkout) -> Result<(), End> {
        let held_state = co.was_pinned || !self.only_session_mode();
        drop(co);
        self.forget_all_held();
        if held_state {
            return Err(End::Fatal("backend holding session state was lost".into()));
        }
        self.pins.clear_state();
        Ok(())
    }

    /// Writes the reply to a COM_STMT_PREPARE from the registry's entry,
    /// with this client's statement id and the warning count of this
    /// prepare (`warnings`; the entry may come from another client's).
    fn write_prepare_reply(&mut self, seq: u8, entry: &StmtEntry, client_id: u32, warnings: u16) {
        let deprecate = self.caps.deprecate_eof();
        let mut seq = seq;
        let params_end = 1 + usize::from(entry.num_params);
        for (i, p) in entry.response.iter().enumerate() {
            if i == 0 {
                let mut ok = p.clone();
                if ok.len() >= 5 {
                    ok[1..5].copy_from_slice(&client_id.to_le_bytes());
                }
                if ok.len() >= 12 {
                    ok[10..12].copy_from_slice(&warnings.to_le_bytes());
                }
                seq = self.client.write_packet(seq, &ok);
            } else {
                seq = self.client.write_packet(seq, p);
            }
            let end_of_params = entry.num_params > 0 && i + 1 == params_end;
            let end_of_columns = entry.num_columns > 0 && i + 1 == entry.response.len();
            if !deprecate && (end_of_params || end_of_columns) {
                let mut b = BytesMut::with_capacity(8);
                eof_payload(&mut b, warnings, self.status);
                seq = self.client.write_packet(seq, &b);
            }
        }
    }

    fn register(&mut self, entry: Arc<StmtEntry>) -> u32 {
        self.next_stmt = self.next_stmt.wrapping_add(1).max(1);
        let id = self.next_stmt;
        let columns = u64::from(entry.num_columns);
        // The prepare reply sent the definitions: the client has them.
        let metadata = (self.caps.cache_metadata() && entry.num_columns > 0).then(|| {
            let defs = entry
                .response
                .iter()
                .skip(1 + usize::from(entry.num_params));
            crate::frontend::metadata_cache::hash_defs(
                self.metadata_seed(),
                defs.map(Vec::as_slice),
            )
        });
        self.stmts.insert(
            id,
            ClientStmt {
                entry,
                types: None,
                columns,
                held: None,
                long_data_err: None,
                metadata,
            },
        );
        id
    }

    /// The client statement id of a statement command: its own, with
    /// 0xFFFFFFFF meaning the last statement prepared (as the server reads
    /// it). `None` when the packet is too short to hold one.
    pub(super) fn client_stmt_id(&self, payload: &[u8]) -> Option<u32> {
        execute::stmt_id(payload).map(|id| match (id, self.last_prepared) {
            (LAST_STMT_ID, Some(last)) => last,
            _ => id,
        })
    }

    /// COM_STMT_PREPARE.
    pub(super) async fn stmt_prepare(&mut self, pkt: &Packet) -> Result<(), End> {
        let seq = pkt.last_seq.wrapping_add(1);
        if let Some(e) = self.stmt_count_full() {
            return self.send_err(seq, &e).await;
        }
        // State the proxy cannot replay may decide how the server reads
        // the text: such a statement stays this session's own.
        let private = (self.pins.has(PinReason::SessionVariable)
            || self.pins.has(PinReason::UnknownState))
        .then_some(u64::from(self.id));
        let key = StmtKey {
            pool: self.pool,
            schema: self.state.schema.clone(),
            state: crate::prepared::PrepareState::of(&self.state, private),
            sql: pkt.payload[1..].to_vec(),
        };
        // Always asked of a server: only it knows the statement's current
        // shape (a table may have changed since another client prepared the
        // same text). The registry keeps one entry per shape, so backends
        // share their statements between clients.
        let Some(mut co) = self.checkout(seq).await? else {
            return Ok(());
        };
        // Inside a deferred transaction the prepare begins it (as direct,
        // where BEGIN ran first): the backend stays with the session, so
        // the execute that follows runs as part of a transaction in
        // progress, not as a new arrival queued behind every client.
        if self.pending_begin {
            co = self.begin_now(co).await?;
        }
        let cap = self.stmt_cap();
        match prepare_within_limit(&mut co.backend, &key.sql, cap).await {
            Ok(Ok(p)) => {
                let warnings = p.warnings;
                let entry = match self.shared.registry.lock() {
                    Ok(mut r) => r.upsert(key, p.params, p.columns, p.packets),
                    Err(_) => {
                        return Err(End::Fatal("statement registry poisoned".into()));
                    }
                };
                let close = co.backend.stmts.insert(entry.id, p.id, cap);
                if close_all(&mut co.backend, &close).await.is_err() {
                    drop(co);
                    return self
                        .lost_backend(seq, &errors::backend_lost("closing statements"), false)
                        .await;
                }
                let id = self.register(entry.clone());
                self.last_prepared = Some(id);
                self.write_prepare_reply(seq, &entry, id, warnings);
                if warnings > 0 {
                    // The prepare's warnings are the server's list now:
                    // cleared before anyone else gets the backend.
                    co.backend.marks.diagnostics = true;
                    self.hold_diagnostics();
                }
                self.finish(co.slot, co.backend);
                self.client.flush().await?;
                Ok(())
            }
            Ok(Err(e)) => {
                // The error is in the backend's diagnostics area (marked by
                // the backend itself): SHOW ERRORS answers it for this
                // client, and it is cleared before anyone else's turn.
                self.last_prepared = None;
                self.hold_diagnostics();
                self.finish(co.slot, co.backend);
                self.send_raw_err(seq, &e).await
            }
            Err(e) => {
                let held = co.was_pinned;
                drop(co);
                self.lost_backend(seq, &errors::backend_lost(&e.to_string()), held)
                    .await
            }
        }
    }

    /// Prepares a registry entry on `backend` in the state it was first
    /// prepared in (its schema, for names; its session variables, for how
    /// the server reads the text: the session may have changed either
    /// since), then brings the backend back to the session's state.
    /// `Ok(Err(e))` is the server refusing (the backend is in the session's
    /// state again); a backend that could not be brought back is an `Err`
    /// (it is closed: what it holds is not known).
    async fn prepare_entry(
        &mut self,
        backend: &mut Leased,
        entry: &StmtEntry,
    ) -> Result<Result<Prepared, RawErr>, BackendError> {
        let at = entry
            .key
            .state
            .applied_to(&backend.state, entry.key.schema.as_ref());
        if at == backend.state {
            return prepare_within_limit(backend, &entry.key.sql, self.stmt_cap()).await;
        }
        // The schema first, on its own: a schema dropped since is the
        // server's error, with nothing changed.
        if at.schema != backend.state.schema
            && let Some(db) = &at.schema
        {
            let mut p = vec![COM_INIT_DB];
            p.extend_from_slice(db);
            if let crate::backend::InternalReply::Err(e) =
                backend.internal(&p, Shape::Query).await?
            {
                return Ok(Err(RawErr::from_packet(&e)));
            }
            backend.state.schema = at.schema.clone();
        }
        // Then the variables, in one SET (refused as a whole or applied).
        let plan = backend.plan_toward(&at);
        let prepared = match super::sync(backend, &plan).await? {
            Some(e) => Err(RawErr::from_packet(&e)),
            None => {
                backend.state.adopt(&at);
                prepare_within_limit(backend, &entry.key.sql, self.stmt_cap()).await?
            }
        };
        // Back to the session's state. A session without a schema keeps the
        // statement's for now (only a change of user, which drops every
        // statement, leaves one): recorded as such, the next checkout
        // clears it.
        let mut back = self.state.clone();
        if back.schema.is_none() {
            back.schema.clone_from(&backend.state.schema);
        }
        let plan = backend.plan_toward(&back);
        if let Some(e) = super::sync(backend, &plan).await? {
            return Err(BackendError::Protocol(format!(
                "could not restore the session's state after preparing a statement in its own: {}",
                e.message
            )));
        }
        backend.state.adopt(&back);
        Ok(prepared)
    }

    /// Makes sure the checked-out backend has `entry` prepared (shared by
    /// every client); returns its id. `Ok(Err(e))` is the server refusing.
    async fn ensure_prepared(
        &mut self,
        backend: &mut Leased,
        entry: &StmtEntry,
    ) -> Result<Result<u32, RawErr>, BackendError> {
        if let Some(s) = backend.stmts.get_mut(entry.id) {
            return Ok(Ok(s.id));
        }
        let p = match self.prepare_entry(backend, entry).await? {
            Ok(p) => p,
            Err(e) => return Ok(Err(e)),
        };
        let close = backend.stmts.insert(entry.id, p.id, self.stmt_cap());
        close_all(backend, &close).await?;
        Ok(Ok(backend.stmts.id_of(entry.id).unwrap_or(p.id)))
    }

    /// The backend statement a command of `client_id` goes to: the one
    /// holding its cursor or long data; otherwise the shared one, unless
    /// another statement of this session (same text) holds that: then one
    /// of its own.
    pub(super) async fn route(
        &mut self,
        backend: &mut Leased,
        client_id: u32,
        entry: &StmtEntry,
    ) -> Result<Result<Route, RawErr>, BackendError> {
        if let Some(cs) = self.stmts.get_mut(&client_id)
            && let Some(h) = &cs.held
        {
            if h.private || backend.stmts.id_of(entry.id) == Some(h.backend_id) {
                return Ok(Ok(Route {
                    id: h.backend_id,
                    private: h.private,
                    held: true,
                }));
            }
            // The backend lost it (reset): so is what it held.
            cs.held = None;
        }
        let shared = match self.ensure_prepared(backend, entry).await? {
            Ok(id) => id,
            Err(e) => return Ok(Err(e)),
        };
        if !self.occupied(shared, client_id) {
            return Ok(Ok(Route {
                id: shared,
                private: false,
                held: false,
            }));
        }
        Ok(self.prepare_entry(backend, entry).await?.map(|p| Route {
            id: p.id,
            private: true,
            held: false,
        }))
    }

    /// [`Self::route`] for a command on `co`, then the session's counts set
    /// on the backend (`prime`: after the route, since a lazy prepare in
    /// the statement's own state runs COM_INIT_DB / SET, which set
    /// ROW_COUNT()). When either fails the client is told (the server's
    /// refusal, or a lost backend) and `None` comes back.
    pub(super) async fn route_or_fail(
        &mut self,
        mut co: Checkout,
        client_id: u32,
        entry: &StmtEntry,
        seq: u8,
        prime: Option<super::row_count::Prime>,
    ) -> Result<Option<(Checkout, Route)>, End> {
        let routed = match self.route(&mut co.backend, client_id, entry).await {
            Ok(Ok(r)) => match prime {
                Some(p) => super::row_count::prime(&mut co.backend, p)
                    .await
                    .map(|()| Ok(r)),
                None => Ok(Ok(r)),
            },
            other => other,
        };
        let replica = self.shared.pool.replica_of(co.backend.pool).is_some();
        match routed {
            Ok(Ok(r)) => Ok(Some((co, r))),
            // A replica that cannot prepare it (a table, a column or a
            // schema it has not replicated yet, grants it lacks, a
            // failure): closed, and the primary runs the statement.
            _ if replica => {
                drop(co);
                let Some(primary) = self
                    .fall_back_to_primary(seq, crate::pool::routing::Primary::NoReplica)
                    .await?
                else {
                    return Ok(None);
                };
                Box::pin(self.route_or_fail(primary, client_id, entry, seq, prime)).await
            }
            Ok(Err(e)) => {
                self.sync_stmt_pins();
                self.finish(co.slot, co.backend);
                self.send_raw_err(seq, &e).await?;
                Ok(None)
            }
            Err(e) => {
                let held = co.was_pinned;
                drop(co);
                self.forget_all_held();
                self.lost_backend(seq, &errors::backend_lost(&e.to_string()), held)
                    .await?;
                Ok(None)
            }
        }
    }

    /// COM_STMT_EXECUTE (on a replica when the read/write split routes
    /// it there: see `route`).
    pub(super) async fn stmt_execute(&mut self, pkt: &Packet) -> Result<(), End> {
        let r = self.stmt_execute_routed(pkt).await;
        self.route = None;
        r
    }

    async fn stmt_execute_routed(&mut self, pkt: &Packet) -> Result<(), End> {
        let seq = pkt.last_seq.wrapping_add(1);
        self.forget_stale_held();
        // The server's checks, in its order: the fixed header first.
        let client_id = match self.client_stmt_id(&pkt.payload) {
            Some(id) if pkt.payload.len() >= 10 => id,
            _ => return self.send_err(seq, &malformed()).await,
        };
        let Some(cs) = self.stmts.get_mut(&client_id) else {
            return self
                .send_err(seq, &unknown_stmt(client_id, "mysqld_stmt_execute"))
                .await;
        };
        let entry = cs.entry.clone();
        let exec: Execute<'_> = match execute::parse(&pkt.payload, entry.num_params) {
            Some(e) => e,
            // A cut-off type block is a malformed packet; a missing null
            // bitmap or bound flag, wrong arguments (as the server says).
            None if execute::types_truncated(&pkt.payload, entry.num_params) => {
                return self.send_err(seq, &malformed()).await;
            }
            None => {
                return self
                    .send_err(seq, &wrong_arguments("mysqld_stmt_execute"))
                    .await;
            }
        };
        if let Some(e) = cs.long_data_err.clone() {
            return self.send_raw_err(seq, &e).await;
        }
        // Drivers often re-send the same types with every EXECUTE: keep
        // the shared copy unless they changed.
        if let Some(t) = exec.types
            && cs.types.as_deref() != Some(t)
        {
            cs.types = Some(Arc::from(t));
        }
        let types = cs.types.clone();
        let seen_columns = cs.columns;
        let seen_metadata = cs.metadata;
        let held = cs.held.is_some();
        // A prepared plain BEGIN is deferred as the query form is.
        if !held
            && super::begin::is_prepared_begin(&entry, &pkt.payload)
            && self.answer_begin(seq, super::begin::Via::Execute).await?
        {
            return Ok(());
        }
        // A prepared `SELECT ROW_COUNT()`, `SELECT FOUND_ROWS()` or
        // `SELECT CONNECTION_ID()`: the client's own, as the text form (see
        // `local`; a pinned session's FOUND_ROWS() is its backend's, as
        // there).
        let count = super::local::classify(&entry.key.sql)
            .map(|q| q.what)
            .filter(|&w| w != super::local::Local::FoundRows || !self.pins.any());
        if entry.num_params == 0
            && !exec.wants_cursor()
            && !held
            && let Some(what) = count
            && let Some(def) = entry.response.get(1)
            && let Some(metadata) = self
                .answer_count_binary(seq, what, def, seen_metadata)
                .await?
        {
            if let Some(cs) = self.stmts.get_mut(&client_id) {
                cs.columns = 1;
                cs.metadata = metadata.or(cs.metadata);
            }
            return Ok(());
        }
        if !self.row_count_gate_prepared(seq, &entry).await? {
            return Ok(());
        }
        // The session's counts are set on the backend once the statement
        // is routed (a lazy prepare in the statement's own state runs
        // COM_INIT_DB / SET, which set ROW_COUNT()), and again on a retry
        // after ER_NEED_REPREPARE (the refused EXECUTE left -1).
        let prime = self.prime_row_count.take();
        self.route_execute(&entry, exec.wants_cursor());
        let Some(mut co) = self.checkout_routed(seq).await? else {
            return Ok(());
        };
        for attempt in 0..2 {
            let Some((next, route)) = self
                .route_or_fail(co, client_id, &entry, seq, prime)
                .await?
            else {
                return Ok(());
            };
            co = next;
            let held_types = self
                .stmts
                .get(&client_id)
                .and_then(|s| s.held.as_ref())
                .and_then(|h| h.private_types.clone());
            let seen = if route.private {
                route.held && held_types.as_deref() == types.as_deref()
            } else {
                co.backend
                    .stmts
                    .get_mut(entry.id)
                    .is_some_and(|s| s.types.as_deref() == types.as_deref())
            };
            let insert = match (&exec.types, &types) {
                (None, Some(t)) if !seen => Some(&t[..]),
                _ => None,
            };
            let payload = execute::rewrite(&pkt.payload, &exec, route.id, insert);
            let bound = exec.types.is_some() || insert.is_some();
            if !seen
                && bound
                && !route.private
                && let Some(s) = co.backend.stmts.get_mut(entry.id)
            {
                s.types = types.clone();
            }
            let intercept = (attempt == 0).then_some(errors::ER_NEED_REPREPARE);
            self.expect_columns = (seen_columns > 0).then_some(seen_columns);
            self.expect_metadata = Some(seen_metadata);
            self.executing = Some(entry.clone());
            self.diagnostic_stmt = self.keeps_diagnostics(&entry.key.sql);
            self.expect_cursor = exec.wants_cursor();
            let Some((next, out)) = self
                .exchange(co, &payload, seq, Shape::Query, intercept)
                .await?
            else {
                self.forget_all_held();
                return Ok(());
            };
            co = next;
            if out.intercepted {
                // The server wants a fresh prepare: close ours and retry once.
                let stale = if route.private {
                    Some(route.id)
                } else {
                    co.backend.stmts.remove(entry.id)
                };
                if let Some(id) = stale {
                    let _ = co.backend.close_stmt(id).await;
                }
                if let Some(cs) = self.stmts.get_mut(&client_id) {
                    cs.held = None;
                }
                continue;
            }
            // The table changed under the statement: later PREPAREs must get
            // fresh metadata from the server, not the registry's copy.
            let changed = out
                .status
                .is_some_and(|s| s & status::METADATA_CHANGED != 0)
                || out
                    .columns
                    .is_some_and(|c| c != u64::from(entry.num_columns));
            if changed && let Ok(mut r) = self.shared.registry.lock() {
                r.forget(&entry);
            }
            let cursor = exec.wants_cursor()
                && out.error.is_none()
                && out.status.is_some_and(|s| s & status::CURSOR_EXISTS != 0);
            let prior = match self.stmts.get_mut(&client_id) {
                Some(cs) => {
                    if let Some(n) = out.columns {
                        cs.columns = n;
                    }
                    if out.metadata.is_some() {
                        cs.metadata = out.metadata;
                    }
                    cs.held.take()
                }
                None => None,
            };
            // EXECUTE consumes the long data and replaces the cursor.
            let had_long_data = prior.as_ref().is_some_and(|h| h.long_data);
            let mut h = prior.unwrap_or(Held {
                backend_id: route.id,
                private: route.private,
                private_types: None,
                cursor: false,
                long_data: false,
            });
            if route.private && bound {
                h.private_types = types.clone();
            }
            // Long data the server refused (a parameter the statement lacks,
            // a value above max_allowed_packet) leaves the statement in an
            // error state every EXECUTE reports until COM_STMT_RESET: it
            // stays with this client.
            let refused = had_long_data && out.error.is_some_and(long_data_state_error);
            h.long_data = refused;
            h.cursor = cursor;
            if cursor || refused {
                if !h.private {
                    co.backend.stmts.set_busy(entry.id, true);
                }
                if let Some(cs) = self.stmts.get_mut(&client_id) {
                    cs.held = Some(h);
                    self.stmts_held = true;
                }
            } else {
                // Any other failure after long data: reset the statement
                // before anyone else uses it, in case.
                let reset = had_long_data && out.error.is_some();
                if release_held(&mut co.backend, &entry, h, reset)
                    .await
                    .is_err()
                {
                    return self.backend_broken(co);
                }
            }
            self.sync_stmt_pins();
            self.finish(co.slot, co.backend);
            return Ok(());
        }
        self.sync_stmt_pins();
        self.finish(co.slot, co.backend);
        Ok(())
    }

    /// COM_STMT_SEND_LONG_DATA: never answered. The data goes to the
    /// statement's backend statement, which it keeps (and pins) until
    /// EXECUTE, RESET or CLOSE; what cannot be delivered is reported by the
    /// next EXECUTE.
    pub(super) async fn stmt_send_long_data(&mut self, pkt: &Packet) -> Result<(), End> {
        let seq = pkt.last_seq.wrapping_add(1);
        self.forget_stale_held();
        let Some(client_id) = self.client_stmt_id(&pkt.payload) else {
            return Ok(());
        };
        let Some(cs) = self.stmts.get(&client_id) else {
            return Ok(());
        };
        if cs.long_data_err.is_some() {
            // Part of the value is already lost: the rest is dropped too.
            return Ok(());
        }
        let entry = cs.entry.clone();
        self.swallowed = Some(None);
        let co = self.checkout(seq).await;
        let kept = self.swallowed.take().flatten();
        let Some(mut co) = co? else {
            let e = kept.unwrap_or_else(|| errors::backend_unavailable("long data not delivered"));
            self.defer_long_data_err(client_id, RawErr::from_packet(&e));
            return Ok(());
        };
        let route = match self.route(&mut co.backend, client_id, &entry).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => {
                self.defer_long_data_err(client_id, e);
                self.sync_stmt_pins();
                self.finish(co.slot, co.backend);
                return Ok(());
            }
            Err(e) => {
                let lost = errors::backend_lost(&e.to_string());
                self.defer_long_data_err(client_id, RawErr::from_packet(&lost));
                return self.backend_broken(co);
            }
        };
        let payload = execute::with_id(&pkt.payload, route.id);
        if let Err(e) = co.backend.io.send_packet(0, &payload).await {
            let lost = errors::backend_lost(&e.to_string());
            self.defer_long_data_err(client_id, RawErr::from_packet(&lost));
            return self.backend_broken(co);
        }
        if let Some(cs) = self.stmts.get_mut(&client_id) {
            match cs.held.as_mut() {
                Some(h) => h.long_data = true,
                None => {
                    self.stmts_held = true;
                    cs.held = Some(Held {
                        backend_id: route.id,
                        private: route.private,
                        private_types: None,
                        cursor: false,
                        long_data: true,
                    })
                }
            }
        }
        if !route.private {
            co.backend.stmts.set_busy(entry.id, true);
        }
        self.sync_stmt_pins();
        self.finish(co.slot, co.backend);
        Ok(())
    }

    fn defer_long_data_err(&mut self, client_id: u32, e: RawErr) {
        if let Some(cs) = self.stmts.get_mut(&client_id) {
            cs.long_data_err.get_or_insert(e);
        }
    }

    /// COM_STMT_FETCH: only with an open cursor on the pinned backend.
    pub(super) async fn stmt_fetch(&mut self, pkt: &Packet) -> Result<(), End> {
        let seq = pkt.last_seq.wrapping_add(1);
        self.forget_stale_held();
        let client_id = self.client_stmt_id(&pkt.payload).unwrap_or(0);
        let Some(cs) = self.stmts.get(&client_id) else {
            return self
                .send_err(seq, &unknown_stmt(client_id, "mysqld_stmt_fetch"))
                .await;
        };
        let entry = cs.entry.clone();
        let Some(backend_id) = cs.held.as_ref().filter(|h| h.cursor).map(|h| h.backend_id) else {
            return self.send_err(seq, &no_cursor(client_id)).await;
        };
        let Some(co) = self.checkout(seq).await? else {
            return Ok(());
        };
        let payload = execute::with_id(&pkt.payload, backend_id);
        let Some((mut co, out)) = self.exchange(co, &payload, seq, Shape::Fetch, None).await?
        else {
            self.forget_all_held();
            return Ok(());
        };
        let open = out
            .status
            .is_some_and(|s| s & status::CURSOR_EXISTS != 0 && s & status::LAST_ROW_SENT == 0);
        if !open || out.error.is_some() {
            // The cursor is closed; the statement may still hold long data.
            let done = self.stmts.get_mut(&client_id).and_then(|cs| {
                let h = cs.held.as_mut()?;
                h.cursor = false;
                if h.long_data { None } else { cs.held.take() }
            });
            if let Some(h) = done
                && release_held(&mut co.backend, &entry, h, false)
                    .await
                    .is_err()
            {
                return self.backend_broken(co);
            }
        }
        self.sync_stmt_pins();
        self.finish(co.slot, co.backend);
        Ok(())
    }

    /// COM_STMT_RESET: forwarded to the backend statement holding the
    /// statement's cursor or long data; otherwise nothing is pending on any
    /// backend and the answer is OK.
    pub(super) async fn stmt_reset(&mut self, pkt: &Packet) -> Result<(), End> {
        let seq = pkt.last_seq.wrapping_add(1);
        self.forget_stale_held();
        let client_id = self.client_stmt_id(&pkt.payload).unwrap_or(0);
        let Some(cs) = self.stmts.get_mut(&client_id) else {
            return self
                .send_err(seq, &unknown_stmt(client_id, "mysqld_stmt_reset"))
                .await;
        };
        cs.long_data_err = None;
        let entry = cs.entry.clone();
        let Some(backend_id) = cs.held.as_ref().map(|h| h.backend_id) else {
            return self.send_ok(seq).await;
        };
        let Some(co) = self.checkout(seq).await? else {
            return Ok(());
        };
        let payload = execute::with_id(&pkt.payload, backend_id);
        let Some((mut co, _)) = self.exchange(co, &payload, seq, Shape::Query, None).await? else {
            self.forget_all_held();
            return Ok(());
        };
        let held = self.stmts.get_mut(&client_id).and_then(|cs| cs.held.take());
        if let Some(h) = held
            && release_held(&mut co.backend, &entry, h, false)
                .await
                .is_err()
        {
            return self.backend_broken(co);
        }
        self.sync_stmt_pins();
        self.finish(co.slot, co.backend);
        Ok(())
    }

    /// COM_STMT_CLOSE: no reply. What the statement held on the pinned
    /// backend ends; the backend statement stays cached for other clients
    /// unless nobody else holds it (then its place in the server's
    /// statement limit is freed at once).
    pub(super) async fn stmt_close(&mut self, pkt: &Packet) -> Result<(), End> {
        self.forget_stale_held();
        let Some(client_id) = self.client_stmt_id(&pkt.payload) else {
            return Ok(());
        };
        if self.last_prepared == Some(client_id) {
            self.last_prepared = None;
        }
        let Some(ClientStmt { entry, held, .. }) = self.stmts.remove(&client_id) else {
            return Ok(());
        };
        let mut broken = false;
        if let Some(b) = self.backend.as_mut() {
            if let Some(h) = held {
                let reset = h.cursor || h.long_data;
                broken |= release_held(b, &entry, h, reset).await.is_err();
            }
            // Held by the registry and this statement only.
            if !broken
                && Arc::strong_count(&entry) <= 2
                && let Some(id) = b.stmts.remove_idle(entry.id)
            {
                broken |= b.close_stmt(id).await.is_err();
            }
        }
        if broken {
            self.backend = None;
            self.forget_all_held();
        }
        self.sync_stmt_pins();
        self.release_if_unpinned();
        drop(entry);
        if let Ok(mut r) = self.shared.registry.lock() {
            r.trim();
        }
        Ok(())
    }

    /// Forgets all client statements (reset, change user: the backend
    /// holding their cursors and long data is reset or closed).
    pub(super) fn drop_statements(&mut self) {
        self.stmts.clear();
        self.forget_prepared_kills();
        self.pins.remove(PinReason::Cursor);
        self.pins.remove(PinReason::LongData);
        if let Ok(mut r) = self.shared.registry.lock() {
            r.trim();
        }
    }
}

/// Errors the server keeps reporting for a statement whose long data it
/// refused (ER_WRONG_ARGUMENTS for a parameter it lacks, ER_UNKNOWN_ERROR
/// for a value above `max_allowed_packet`).
fn long_data_state_error(code: u16) -> bool {
    matches!(code, 1210 | 1105)
}

/// Ends what a statement held on `backend`: a private statement is closed;
/// a shared one may be evicted again, reset first when `reset` (a cursor,
/// long data or a long-data error must not reach another client).
async fn release_held(
    backend: &mut Leased,
    entry: &StmtEntry,
    h: Held,
    reset: bool,
) -> Result<(), BackendError> {
    if h.private {
        return backend.close_stmt(h.backend_id).await;
    }
    backend.stmts.set_busy(entry.id, false);
    if reset && backend.stmts.id_of(entry.id) == Some(h.backend_id) {
        // OK, or an error when the server no longer has it: either way done.
        backend.reset_stmt(h.backend_id).await?;
    }
    Ok(())
}

/// Prepares `sql` on `backend` within the server's statement limit: idle
/// statements are closed, least recently used first, to stay under `cap`;
/// when the server still refuses with ER_MAX_PREPARED_STMT_COUNT_REACHED
/// (other connections use the rest of its global limit), every idle one is
/// closed and the prepare retried once.
async fn prepare_within_limit(
    backend: &mut Leased,
    sql: &[u8],
    cap: usize,
) -> Result<Result<Prepared, RawErr>, BackendError> {
    let evict = backend.stmts.make_room(cap);
    close_all(backend, &evict).await?;
    match backend.prepare_raw(sql).await? {
        Err(e) if e.code() == errors::ER_MAX_PREPARED_STMT_COUNT_REACHED => {
            let idle = backend.stmts.evict_idle();
            if idle.is_empty() {
                return Ok(Err(e));
            }
            close_all(backend, &idle).await?;
            backend.prepare_raw(sql).await
        }
        r => Ok(r),
    }
}

async fn close_all(backend: &mut Leased, ids: &[u32]) -> Result<(), BackendError> {
    for id in ids {
        backend.close_stmt(*id).await?;
    }
    Ok(())
}
