//! The backend path of a command: waiting in the thread group's queue,
//! obtaining a backend (pinned, idle or newly dialed), replaying the session
//! state onto it, forwarding the command, relaying the reply, and returning
//! or keeping the backend afterwards.

use std::time::Duration;

use tokio::time::Instant;
use tracing::{debug, warn};

use super::{End, Session};
use crate::backend::{BackendError, InternalReply};
use crate::frontend::relay::{ClientView, Outcome, RelayError, relay};
use crate::pool::group::{Leased, SlotGuard};
use crate::pool::scheduler::Need;
use crate::protocol::command::*;
use crate::protocol::errors;
use crate::protocol::packets::{ErrPacket, status};
use crate::protocol::response::Shape;
use crate::session_state::{PinReason, SyncPlan, TrackedState, scan_statement};
use crate::wire::packet_io::Packet;

impl Session {
    /// Turns an admission's backend part into a usable connection: checks an
    /// idle one (replacing it when the server closed it) or dials.
    pub(super) async fn obtain_backend(
        &mut self,
        idle: Option<Leased>,
        open: Option<crate::pool::group::OpenReservation>,
    ) -> Result<Leased, ErrPacket> {
        let deadline = Instant::now() + self.shared.pool.queue_timeout;
        let ping_after = self.shared.pool.ping_interval;
        let open = match (idle, open) {
            (Some(mut b), _) => {
                let healthy = b.io.idle_is_healthy()
                    && (b.last_used.elapsed() < ping_after || b.ping().await.is_ok());
                if healthy {
                    return Ok(b);
                }
                debug!(backend = b.id.0, "discarding dead idle backend connection");
                let group = b.group().clone();
                drop(b);
                group.reserve_open()
            }
            (None, open) => open,
        };
        let Some(res) = open else {
            return Err(errors::backend_unavailable(
                "no room for a new backend connection",
            ));
        };
        match self.shared.pool.dial(self.pool, deadline).await {
            Ok(conn) => Ok(res.fulfil(conn)),
            Err(e) if e.is_out_of_fds() => Err(errors::out_of_resources(
                "no file descriptors for a backend connection",
            )),
            Err(e) => {
                warn!(error = %e, "backend connection failed");
                Err(errors::backend_unavailable(&e.to_string()))
            }
        }
    }

    /// Returns the backend idle unless the session stays pinned to it.
    pub(super) fn finish(&mut self, slot: SlotGuard, backend: Leased) {
        if self.pins.any() {
            self.backend = Some(backend);
            slot.finish(None);
        } else {
            slot.finish(Some(backend));
        }
    }

    /// Waits for an execution slot and a backend (the pinned one, an idle
    /// one or a new one) and brings the backend to the session's state.
    /// `None` when an error was already sent to the client.
    pub(super) async fn checkout(&mut self, seq: u8) -> Result<Option<Checkout>, End> {
        let prio = self.priority();
        let need = if self.backend.is_some() {
            Need::Slot
        } else {
            Need::Lease { pool: self.pool }
        };
        let was_pinned = need == Need::Slot && !self.only_session_mode();
        let deadline = Instant::now() + self.shared.pool.queue_timeout;
        let group = self.group.clone();
        let acquire = group.acquire(need, prio, deadline);
        tokio::pin!(acquire);
        let adm = loop {
            tokio::select! {
                // An immediate grant must not cost a read syscall on the client.
                biased;
                r = &mut acquire => break r,
                r = self.client.watch_peer() => {
                    if r.is_err() {
                        // Left while queued: dropping `acquire` leaves the queue.
                        return Err(End::ClientGone);
                    }
                }
            }
        };
        let adm = match adm {
            Ok(a) => a,
            Err(t) => {
                debug!(
                    client = self.id,
                    group = t.group,
                    waited_ms = t.waited_ms as u64,
                    "queue timeout"
                );
                self.shared.metrics.queue_timeout(self.group.id);
                self.send_err(seq, &queue_timeout_err(&t.to_string()))
                    .await?;
                return Ok(None);
            }
        };
        self.stmt_wait = Some(adm.waited);
        let mut backend = match (adm.backend, adm.open) {
            (None, None) => match self.backend.take() {
                Some(b) => b,
                None => {
                    let e = errors::backend_unavailable("pinned backend missing");
                    self.send_err(seq, &e).await?;
                    return Ok(None);
                }
            },
            (idle, open) => match self.obtain_backend(idle, open).await {
                Ok(b) => b,
                Err(e) => {
                    self.send_err(seq, &e).await?;
                    return Ok(None);
                }
            },
        };
        let slot = adm.slot;
        let mut plan = self.state.sync_plan(&backend.state);
        if plan.clear_schema {
            let params = self.shared.pool.params(backend.pool);
            let baseline =
                TrackedState::for_collation(u16::from(crate::backend::connect::BACKEND_COLLATION));
            let cleared = match &params {
                Some(p) => backend.clear_schema(p, &baseline).await,
                None => Err(BackendError::Protocol("unknown pool key".into())),
            };
            if let Err(e) = cleared {
                drop(backend);
                drop(slot);
                self.lost_backend(seq, &errors::backend_lost(&e.to_string()), was_pinned)
                    .await?;
                return Ok(None);
            }
            plan = self.state.sync_plan(&backend.state);
        }
        if !plan.is_empty() {
            let failure = match sync(&mut backend, &plan).await {
                Ok(None) => None,
                // The state could not be applied (e.g. the schema is gone):
                // the client sees the server's error; the backend is closed
                // since it may be half-changed.
                Ok(Some(e)) => Some(e),
                Err(e) => Some(errors::backend_lost(&e.to_string())),
            };
            if let Some(e) = failure {
                drop(backend);
                drop(slot);
                self.lost_backend(seq, &e, was_pinned).await?;
                return Ok(None);
            }
        }
        Ok(Some(Checkout {
            slot,
            backend,
            was_pinned,
        }))
    }

    /// Sends `payload` as a command on the checked-out backend and relays the
    /// reply; applies status flags, tracked state and transaction pins.
    /// `None` when the backend failed (the client was told, or the session
    /// ends when it held state there). With `intercept`, a reply that is just
    /// that error is not relayed (the caller retries).
    pub(super) async fn exchange(
        &mut self,
        mut co: Checkout,
        payload: &[u8],
        seq: u8,
        shape: Shape,
        intercept: Option<u16>,
    ) -> Result<Option<(Checkout, Outcome)>, End> {
        self.handle
            .backend_thread
            .store(co.backend.thread_id, std::sync::atomic::Ordering::Relaxed);
        let sent = co.backend.io.send_packet(0, payload).await;
        if let Err(e) = sent {
            self.handle
                .backend_thread
                .store(0, std::sync::atomic::Ordering::Relaxed);
            let was_pinned = co.was_pinned;
            drop(co);
            let e = errors::backend_lost(&e.to_string());
            self.lost_backend(seq, &e, was_pinned).await?;
            return Ok(None);
        }
        let server = self.shared.pool.server_info();
        let view = ClientView {
            server_version: &server.version,
            caps: self.caps,
            trackers: &self.shared.trackers,
            status: self.status,
            intercept,
            max_packet: self.shared.config.frontend.max_allowed_packet,
            expect_columns: self.expect_columns.take(),
        };
        let result = relay(&mut self.client, &mut co.backend.io, shape, &view, seq).await;
        self.handle
            .backend_thread
            .store(0, std::sync::atomic::Ordering::Relaxed);
        match result {
            Ok(out) => {
                self.shared.metrics.bytes(out.bytes, 0);
                if let Some(code) = out.error {
                    self.shared.metrics.error(code, true);
                }
                if let Some(st) = out.status {
                    // Per-statement flags (cursor, last row, metadata) are not
                    // the session's: the next command starts without them.
                    self.status = st & !status::TRANSIENT;
                    co.backend.status = st;
                    if st & status::IN_TRANS != 0 {
                        if !self.pins.has(PinReason::Transaction) {
                            // From the start of the statement that opened
                            // it, queue wait included, as the client sees it.
                            self.txn_started = Some(self.cmd_started);
                        }
                        self.pin(PinReason::Transaction);
                    } else {
                        if let Some(t0) = self.txn_started.take() {
                            self.shared.metrics.transaction(
                                self.group.id,
                                !self.last_is_rollback,
                                t0.elapsed(),
                            );
                        }
                        self.pins.remove(PinReason::Transaction);
                    }
                }
                let fx = self.state.apply_block(&out.state);
                co.backend.state.apply_block(&out.state);
                if let Some(id) = out.last_insert_id {
                    self.state.last_insert_id = id;
                    co.backend.state.last_insert_id = id;
                }
                if let Some(rows) = out.rows {
                    self.found_rows = rows;
                }
                if fx.unexplained {
                    self.pin(PinReason::UnknownState);
                }
                if fx.trackers_touched {
                    self.pin(PinReason::Trackers);
                }
                // The diagnostics area (SHOW WARNINGS / ERRORS, @@warning_count,
                // GET DIAGNOSTICS) lives on the backend that ran the statement:
                // hold it for the client's next statement (see serve()).
                let keeps = self.diagnostic_stmt && self.pins.has(PinReason::Diagnostics);
                if out.warnings > 0 || out.error.is_some() || keeps {
                    self.pin(PinReason::Diagnostics);
                } else {
                    self.pins.remove(PinReason::Diagnostics);
                }
                Ok(Some((co, out)))
            }
            Err(RelayError::Client(e)) => {
                // The backend may be mid-response or mid-transaction: close it,
                // and stop what it runs (closing alone lets a long statement
                // run to its end).
                let thread = co.backend.thread_id;
                let pool = co.backend.pool;
                drop(co);
                let shared = self.shared.clone();
                tokio::spawn(async move {
                    let deadline = Instant::now() + Duration::from_secs(5);
                    if let Ok(mut c) = shared.pool.dial(pool, deadline).await {
                        let _ = c.exec(&format!("KILL {thread}")).await;
                    }
                });
                Err(End::Client(e))
            }
            Err(RelayError::Backend { sent, .. }) | Err(RelayError::Malformed { sent }) => {
                let was_pinned = co.was_pinned;
                drop(co);
                if sent {
                    return Err(End::Fatal("backend failed mid-response".into()));
                }
                let held = was_pinned || self.pins.holds_lock();
                self.lost_backend(
                    seq,
                    &errors::backend_lost("backend connection failed"),
                    held,
                )
                .await?;
                Ok(None)
            }
        }
    }

    /// Runs one command on a backend and streams the answer back.
    pub(super) async fn forward(&mut self, pkt: &Packet, shape: Shape) -> Result<(), End> {
        let seq = pkt.last_seq.wrapping_add(1);
        let scan = if pkt.payload[0] == COM_QUERY {
            scan_statement(&pkt.payload[1..])
        } else {
            Default::default()
        };
        let Some(co) = self.checkout(seq).await? else {
            return Ok(());
        };
        let Some((co, out)) = self.exchange(co, &pkt.payload, seq, shape, None).await? else {
            return Ok(());
        };
        if out.error.is_none() {
            for r in [
                PinReason::UserVariable,
                PinReason::TemporaryTable,
                PinReason::UserLock,
                PinReason::LockTables,
                PinReason::TextPrepare,
                PinReason::FoundRows,
            ] {
                if scan.adds.has(r) {
                    self.pin(r);
                }
            }
            if scan.unlock_tables {
                self.pins.remove(PinReason::LockTables);
            }
        }
        self.finish(co.slot, co.backend);
        Ok(())
    }

    /// Reports a lost backend. When it held session state (an open
    /// transaction, variables, temporary tables), that state is gone and the
    /// client must not go on as if it were not: the connection is closed
    /// after the error, as a server crash would.
    pub(super) async fn lost_backend(
        &mut self,
        seq: u8,
        e: &ErrPacket,
        held_state: bool,
    ) -> Result<(), End> {
        self.send_err(seq, e).await?;
        if held_state {
            return Err(End::Fatal("backend holding session state was lost".into()));
        }
        self.pins.clear_state();
        Ok(())
    }
}

/// A slot and a backend ready for a command.
pub(super) struct Checkout {
    pub(super) slot: SlotGuard,
    pub(super) backend: Leased,
    /// The backend was the session's pinned one (losing it loses state).
    pub(super) was_pinned: bool,
}

/// Sends the sync commands pipelined (one round trip) and reads the replies.
/// `Ok(Some(err))` is the server refusing one of them.
pub(super) async fn sync(
    backend: &mut Leased,
    plan: &SyncPlan,
) -> Result<Option<ErrPacket>, BackendError> {
    let mut n = 0;
    if let Some(db) = &plan.init_db {
        let mut p = Vec::with_capacity(db.len() + 1);
        p.push(COM_INIT_DB);
        p.extend_from_slice(db);
        backend.io.write_packet(0, &p);
        n += 1;
    }
    if let Some(on) = plan.set_option {
        backend
            .io
            .write_packet(0, &[COM_SET_OPTION, if on { 0 } else { 1 }, 0]);
        n += 1;
    }
    if let Some(sql) = &plan.set_sql {
        let mut p = Vec::with_capacity(sql.len() + 1);
        p.push(COM_QUERY);
        p.extend_from_slice(sql.as_bytes());
        backend.io.write_packet(0, &p);
        n += 1;
    }
    backend.io.flush().await?;
    let mut first_err = None;
    let mut set_ok = false;
    for i in 0..n {
        let reply = backend.read_internal_reply(Shape::Query).await?;
        let is_option = plan.set_option.is_some() && i == usize::from(plan.init_db.is_some());
        match reply {
            InternalReply::Ok { .. } => {
                if is_option && let Some(on) = plan.set_option {
                    backend.state.multi_statements = on;
                }
                set_ok = i + 1 == n && plan.set_sql.is_some();
            }
            InternalReply::Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    if set_ok && let Some(id) = plan.last_insert_id {
        backend.state.last_insert_id = id;
    }
    Ok(first_err)
}

pub(super) fn queue_timeout_err(msg: &str) -> ErrPacket {
    ErrPacket::new(errors::ER_QUERY_INTERRUPTED, "70100", msg)
}
