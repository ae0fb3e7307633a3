//! Prepared statements without pinning: client statement ids issued by the
//! proxy, prepare replies served from the registry, lazy prepare on the
//! backend an EXECUTE lands on, remembered parameter types re-sent to
//! backends that have not seen them, re-prepare on ER_NEED_REPREPARE, and
//! the pins cursors and long data need.

use std::sync::Arc;

use bytes::BytesMut;

use super::{End, Session};
use crate::backend::BackendError;
use crate::pool::group::Leased;
use crate::prepared::execute::{self, Execute};
use crate::prepared::{StmtEntry, StmtKey};
use crate::protocol::command::*;
use crate::protocol::errors;
use crate::protocol::packets::{ErrPacket, eof_payload, status};
use crate::protocol::response::Shape;
use crate::session_state::PinReason;
use crate::wire::packet_io::Packet;

/// ER_NEED_REPREPARE.
const ER_NEED_REPREPARE: u16 = 1615;

/// A statement a client prepared.
#[derive(Debug)]
pub(super) struct ClientStmt {
    pub(super) entry: Arc<StmtEntry>,
    /// Parameter types from the client's last bind.
    pub(super) types: Option<Arc<[u8]>>,
    /// Result columns as this client last saw them (the server flags
    /// METADATA_CHANGED once when they change).
    columns: u64,
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

impl Session {
    /// Sends a prepare reply from the registry with the client's id.
    fn write_prepare_reply(&mut self, seq: u8, entry: &StmtEntry, client_id: u32) {
        let deprecate = self.caps.deprecate_eof();
        let mut seq = seq;
        let params_end = 1 + usize::from(entry.num_params);
        for (i, p) in entry.response.iter().enumerate() {
            if i == 0 {
                let mut ok = p.clone();
                if ok.len() >= 5 {
                    ok[1..5].copy_from_slice(&client_id.to_le_bytes());
                }
                seq = self.client.write_packet(seq, &ok);
            } else {
                seq = self.client.write_packet(seq, p);
            }
            let end_of_params = entry.num_params > 0 && i + 1 == params_end;
            let end_of_columns = entry.num_columns > 0 && i + 1 == entry.response.len();
            if !deprecate && (end_of_params || end_of_columns) {
                let mut b = BytesMut::with_capacity(8);
                eof_payload(&mut b, 0, self.status);
                seq = self.client.write_packet(seq, &b);
            }
        }
    }

    fn register(&mut self, entry: Arc<StmtEntry>) -> u32 {
        self.next_stmt = self.next_stmt.wrapping_add(1).max(1);
        let id = self.next_stmt;
        let columns = u64::from(entry.num_columns);
        self.stmts.insert(
            id,
            ClientStmt {
                entry,
                types: None,
                columns,
            },
        );
        id
    }

    /// COM_STMT_PREPARE.
    pub(super) async fn stmt_prepare(&mut self, pkt: &Packet) -> Result<(), End> {
        let seq = pkt.last_seq.wrapping_add(1);
        let key = StmtKey {
            pool: self.pool,
            schema: self.state.schema.clone(),
            sql: pkt.payload[1..].to_vec(),
        };
        // Always asked of a server: only it knows the statement's current
        // shape (a table may have changed since another client prepared the
        // same text). The registry keeps one entry per shape, so backends
        // share their statements between clients.
        let Some(mut co) = self.checkout(seq).await? else {
            return Ok(());
        };
        match co.backend.prepare(&key.sql).await {
            Ok(Ok(p)) => {
                let entry = match self.shared.registry.lock() {
                    Ok(mut r) => r.upsert(key, p.params, p.columns, p.packets),
                    Err(_) => {
                        return Err(End::Fatal("statement registry poisoned".into()));
                    }
                };
                let cap = self.shared.config.pool.prepared_per_backend;
                let close = co.backend.stmts.insert(entry.id, p.id, cap);
                if close_all(&mut co.backend, &close).await.is_err() {
                    drop(co);
                    return self
                        .lost_backend(seq, &errors::backend_lost("closing statements"), false)
                        .await;
                }
                let id = self.register(entry.clone());
                self.write_prepare_reply(seq, &entry, id);
                self.finish(co.slot, co.backend);
                self.client.flush().await?;
                Ok(())
            }
            Ok(Err(e)) => {
                self.finish(co.slot, co.backend);
                self.send_err(seq, &e).await
            }
            Err(e) => {
                let held = co.was_pinned;
                drop(co);
                self.lost_backend(seq, &errors::backend_lost(&e.to_string()), held)
                    .await
            }
        }
    }

    /// Makes sure the checked-out backend has `entry` prepared; returns its id.
    /// `Ok(Err(e))` is the server refusing the prepare there.
    pub(super) async fn ensure_prepared(
        &mut self,
        backend: &mut Leased,
        entry: &StmtEntry,
    ) -> Result<Result<u32, ErrPacket>, BackendError> {
        if let Some(s) = backend.stmts.get_mut(entry.id) {
            return Ok(Ok(s.id));
        }
        // The statement must resolve names in the schema it was prepared in.
        let switch = entry.key.schema.is_some() && entry.key.schema != backend.state.schema;
        if let (true, Some(db)) = (switch, &entry.key.schema) {
            let mut p = vec![COM_INIT_DB];
            p.extend_from_slice(db);
            if let crate::backend::InternalReply::Err(e) =
                backend.internal(&p, Shape::Query).await?
            {
                return Ok(Err(e));
            }
        }
        let prepared = backend.prepare(&entry.key.sql).await?;
        if switch {
            let plan = self.state.sync_plan(&backend.state);
            if let Some(e) = super::sync(backend, &plan).await? {
                return Ok(Err(e));
            }
        }
        let p = match prepared {
            Ok(p) => p,
            Err(e) => return Ok(Err(e)),
        };
        let cap = self.shared.config.pool.prepared_per_backend;
        let close = backend.stmts.insert(entry.id, p.id, cap);
        close_all(backend, &close).await?;
        Ok(Ok(p.id))
    }

    /// COM_STMT_EXECUTE.
    pub(super) async fn stmt_execute(&mut self, pkt: &Packet) -> Result<(), End> {
        let seq = pkt.last_seq.wrapping_add(1);
        // The server's checks, in its order: the fixed header first.
        let client_id = match execute::stmt_id(&pkt.payload) {
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
        // Drivers often re-send the same types with every EXECUTE: keep
        // the shared copy unless they changed.
        if let Some(t) = exec.types
            && cs.types.as_deref() != Some(t)
        {
            cs.types = Some(Arc::from(t));
        }
        let types = cs.types.clone();
        let seen_columns = cs.columns;
        let Some(mut co) = self.checkout(seq).await? else {
            return Ok(());
        };
        for attempt in 0..2 {
            let backend_id = match self.ensure_prepared(&mut co.backend, &entry).await {
                Ok(Ok(id)) => id,
                Ok(Err(e)) => {
                    self.finish(co.slot, co.backend);
                    return self.send_err(seq, &e).await;
                }
                Err(e) => {
                    let held = co.was_pinned;
                    drop(co);
                    return self
                        .lost_backend(seq, &errors::backend_lost(&e.to_string()), held)
                        .await;
                }
            };
            let seen = co
                .backend
                .stmts
                .get_mut(entry.id)
                .is_some_and(|s| s.types.as_deref() == types.as_deref());
            let insert = match (&exec.types, &types) {
                (None, Some(t)) if !seen => Some(&t[..]),
                _ => None,
            };
            let payload = execute::rewrite(&pkt.payload, &exec, backend_id, insert);
            if !seen
                && (exec.types.is_some() || insert.is_some())
                && let Some(s) = co.backend.stmts.get_mut(entry.id)
            {
                s.types = types.clone();
            }
            let intercept = (attempt == 0).then_some(ER_NEED_REPREPARE);
            self.expect_columns = (seen_columns > 0).then_some(seen_columns);
            let Some((next, out)) = self
                .exchange(co, &payload, seq, Shape::Query, intercept)
                .await?
            else {
                return Ok(());
            };
            co = next;
            if out.intercepted {
                // The server wants a fresh prepare: close ours and retry once.
                if let Some(id) = co.backend.stmts.remove(entry.id) {
                    let _ = co.backend.close_stmt(id).await;
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
            if let (Some(n), Some(cs)) = (out.columns, self.stmts.get_mut(&client_id)) {
                cs.columns = n;
            }
            self.pins.remove(PinReason::LongData);
            if exec.wants_cursor() && out.status.is_some_and(|s| s & status::CURSOR_EXISTS != 0) {
                self.pin(PinReason::Cursor);
                self.cursor_stmt = Some(client_id);
            }
            self.finish(co.slot, co.backend);
            return Ok(());
        }
        self.finish(co.slot, co.backend);
        Ok(())
    }

    /// COM_STMT_SEND_LONG_DATA: no reply; pins until EXECUTE.
    pub(super) async fn stmt_send_long_data(&mut self, pkt: &Packet) -> Result<(), End> {
        let seq = pkt.last_seq.wrapping_add(1);
        let Some(client_id) = execute::stmt_id(&pkt.payload) else {
            return Ok(());
        };
        let Some(entry) = self.stmts.get(&client_id).map(|s| s.entry.clone()) else {
            return Ok(());
        };
        let Some(mut co) = self.checkout(seq).await? else {
            return Ok(());
        };
        let backend_id = match self.ensure_prepared(&mut co.backend, &entry).await {
            Ok(Ok(id)) => id,
            Ok(Err(_)) => {
                self.finish(co.slot, co.backend);
                return Ok(());
            }
            Err(_) => {
                let held = co.was_pinned;
                drop(co);
                if held {
                    return Err(End::Fatal("backend lost during long data".into()));
                }
                return Ok(());
            }
        };
        let payload = execute::with_id(&pkt.payload, backend_id);
        if co.backend.io.send_packet(0, &payload).await.is_err() {
            drop(co);
            return Err(End::Fatal("backend lost during long data".into()));
        }
        self.pin(PinReason::LongData);
        self.finish(co.slot, co.backend);
        Ok(())
    }

    /// COM_STMT_FETCH: only with an open cursor on the pinned backend.
    pub(super) async fn stmt_fetch(&mut self, pkt: &Packet) -> Result<(), End> {
        let seq = pkt.last_seq.wrapping_add(1);
        let client_id = execute::stmt_id(&pkt.payload).unwrap_or(0);
        let Some(entry) = self.stmts.get(&client_id).map(|s| s.entry.clone()) else {
            return self
                .send_err(seq, &unknown_stmt(client_id, "mysqld_stmt_fetch"))
                .await;
        };
        if self.cursor_stmt != Some(client_id) || self.backend.is_none() {
            let e = ErrPacket::new(
                1421,
                "HY000",
                format!("The statement ({client_id}) has no open cursor"),
            );
            return self.send_err(seq, &e).await;
        }
        let Some(mut co) = self.checkout(seq).await? else {
            return Ok(());
        };
        let Some(backend_id) = co.backend.stmts.get_mut(entry.id).map(|s| s.id) else {
            self.finish(co.slot, co.backend);
            return self
                .send_err(seq, &unknown_stmt(client_id, "mysqld_stmt_fetch"))
                .await;
        };
        let payload = execute::with_id(&pkt.payload, backend_id);
        let Some((co, out)) = self.exchange(co, &payload, seq, Shape::Fetch, None).await? else {
            return Ok(());
        };
        let open = out
            .status
            .is_some_and(|s| s & status::CURSOR_EXISTS != 0 && s & status::LAST_ROW_SENT == 0);
        if !open || out.error.is_some() {
            self.pins.remove(PinReason::Cursor);
            self.cursor_stmt = None;
        }
        self.finish(co.slot, co.backend);
        Ok(())
    }

    /// COM_STMT_RESET: forwarded when a cursor or long data lives on the
    /// pinned backend; otherwise nothing is pending and the answer is OK.
    pub(super) async fn stmt_reset(&mut self, pkt: &Packet) -> Result<(), End> {
        let seq = pkt.last_seq.wrapping_add(1);
        let client_id = execute::stmt_id(&pkt.payload).unwrap_or(0);
        let Some(entry) = self.stmts.get(&client_id).map(|s| s.entry.clone()) else {
            return self
                .send_err(seq, &unknown_stmt(client_id, "mysqld_stmt_reset"))
                .await;
        };
        let pending = self.pins.has(PinReason::LongData) || self.cursor_stmt == Some(client_id);
        if !pending || self.backend.is_none() {
            return self.send_ok(seq).await;
        }
        let Some(mut co) = self.checkout(seq).await? else {
            return Ok(());
        };
        let Some(backend_id) = co.backend.stmts.get_mut(entry.id).map(|s| s.id) else {
            self.finish(co.slot, co.backend);
            return self.send_ok(seq).await;
        };
        let payload = execute::with_id(&pkt.payload, backend_id);
        let Some((co, _)) = self.exchange(co, &payload, seq, Shape::Query, None).await? else {
            return Ok(());
        };
        self.pins.remove(PinReason::LongData);
        if self.cursor_stmt == Some(client_id) {
            self.cursor_stmt = None;
            self.pins.remove(PinReason::Cursor);
        }
        self.finish(co.slot, co.backend);
        Ok(())
    }

    /// COM_STMT_CLOSE: no reply. The backend statement stays cached for other
    /// clients; an open cursor on it is closed.
    pub(super) async fn stmt_close(&mut self, pkt: &Packet) -> Result<(), End> {
        let Some(client_id) = execute::stmt_id(&pkt.payload) else {
            return Ok(());
        };
        let Some(cs) = self.stmts.remove(&client_id) else {
            return Ok(());
        };
        if self.cursor_stmt == Some(client_id) {
            self.cursor_stmt = None;
            self.pins.remove(PinReason::Cursor);
            if let Some(b) = self.backend.as_mut()
                && let Some(id) = b.stmts.get_mut(cs.entry.id).map(|s| s.id)
            {
                let payload = execute::with_id(&[COM_STMT_RESET, 0, 0, 0, 0], id);
                if b.internal(&payload, Shape::Query).await.is_err() {
                    self.backend = None;
                }
            }
            self.release_if_unpinned();
        }
        drop(cs);
        if let Ok(mut r) = self.shared.registry.lock() {
            r.trim();
        }
        Ok(())
    }

    /// Forgets all client statements (reset, change user).
    pub(super) fn drop_statements(&mut self) {
        self.stmts.clear();
        self.cursor_stmt = None;
        self.pins.remove(PinReason::Cursor);
        self.pins.remove(PinReason::LongData);
        if let Ok(mut r) = self.shared.registry.lock() {
            r.trim();
        }
    }
}

async fn close_all(backend: &mut Leased, ids: &[u32]) -> Result<(), BackendError> {
    for id in ids {
        backend.close_stmt(*id).await?;
    }
    Ok(())
}
