//! The backend path of a command: waiting in the thread group's queue,
//! obtaining a backend (pinned, idle or newly dialed), replaying the session
//! state onto it, forwarding the command, relaying the reply, and returning
//! or keeping the backend afterwards.

use std::time::Duration;

use tokio::time::Instant;
use tracing::{debug, warn};

use super::{End, Session};
use crate::backend::{BackendConn, BackendError, InternalReply};
use crate::frontend::relay::{ClientView, Outcome, RelayError, relay};
use crate::pool::group::{Leased, SlotGuard};
use crate::pool::parking;
use crate::pool::routing::Primary;
use crate::pool::scheduler::Need;
use crate::protocol::command::*;
use crate::protocol::errors;
use crate::protocol::packets::{ErrPacket, status};
use crate::protocol::response::Shape;
use crate::session_state::authority::{self, Release, Reply};
use crate::session_state::{PinReason, SyncPlan, TrackedState};
use crate::sql::{Analysis, Effect, Kind, Statement};
use crate::wire::packet_io::Packet;

impl Session {
    /// Turns an admission's backend part into a usable connection: checks an
    /// idle one (replacing it when the server closed it) or dials.
    pub(super) async fn obtain_backend(
        &mut self,
        idle: Option<Leased>,
        open: Option<crate::pool::group::OpenReservation>,
    ) -> Result<Leased, ErrPacket> {
        // The common case, without a future of its own: an idle backend
        // used recently, opened under today's globals and roles.
        let idle = match idle {
            Some(b) if self.idle_ready(&b) => return Ok(b),
            idle => idle,
        };
        Box::pin(self.check_or_dial(idle, open)).await
    }

    /// An idle backend that needs no ping, no reset and no new role.
    fn idle_ready(&self, b: &Leased) -> bool {
        b.io.idle_is_healthy()
            && b.last_used.elapsed() < self.shared.pool.ping_interval()
            && b.globals_epoch == self.shared.pool.globals_epoch()
            && b.roles_epoch == self.shared.pool.roles_epoch()
            && self.shared.pool.usable(b)
            && !b.marks.role_changed
    }

    /// The rest of [`Self::obtain_backend`]: pings, resets or replaces an
    /// idle backend, or dials a new one.
    async fn check_or_dial(
        &mut self,
        idle: Option<Leased>,
        open: Option<crate::pool::group::OpenReservation>,
    ) -> Result<Leased, ErrPacket> {
        let deadline = Instant::now() + self.shared.pool.queue_timeout();
        let ping_after = self.shared.pool.ping_interval();
        let open = match (idle, open) {
            // Dialed to a server that is no longer the primary: closed.
            (Some(b), _) if !self.shared.pool.usable(&b) => b.replace(),
            (Some(mut b), _) => {
                let healthy = b.io.idle_is_healthy()
                    && (b.last_used.elapsed() < ping_after || b.ping().await.is_ok());
                let epoch = self.shared.pool.globals_epoch();
                if b.roles_epoch != self.shared.pool.roles_epoch() {
                    // Logged in with a default role that changed since.
                    b.marks.role_changed = true;
                }
                if healthy && b.globals_epoch == epoch && !b.marks.role_changed {
                    return Ok(b);
                }
                // Opened (or last reset) before a SET GLOBAL: its session
                // values are the old globals. A reset re-reads them.
                if healthy && b.reset(&parking::baseline()).await.is_ok() {
                    b.globals_epoch = epoch;
                    return Ok(b);
                }
                debug!(backend = b.id.0, "discarding dead idle backend connection");
                b.replace()
            }
            (None, open) => open,
        };
        let Some(res) = open else {
            return Err(errors::backend_unavailable(
                "no room for a new backend connection",
            ));
        };
        match self.shared.pool.dial(self.lease_key(), deadline).await {
            Ok(mut conn) => {
                // A direct client gets the global limits of the moment
                // (the primary's: a replica's may differ).
                if self.shared.pool.replica_of(conn.pool).is_none() {
                    let _ = conn.learn_limits(&self.shared.limits).await;
                }
                Ok(res.fulfil(conn))
            }
            Err(e) if e.is_out_of_fds() => Err(errors::out_of_resources(
                "no file descriptors for a backend connection",
            )),
            // Full, not down: the pool stops growing and the caller waits
            // for one of its own backends (`checkout`); the server's own
            // refusal if none comes.
            // A full replica is not the pool's ceiling (`Pool::dial_replica`
            // keeps it out of reads for a while): this read goes to the
            // primary (`checkout`).
            Err(e) if e.server_full().is_some() && self.route.is_some() => Err(e
                .server_full()
                .cloned()
                .unwrap_or_else(errors::too_many_connections)),
            Err(e) if e.server_full().is_some() => {
                self.shared.pool.server_full();
                Err(e
                    .server_full()
                    .cloned()
                    .unwrap_or_else(errors::too_many_connections))
            }
            Err(e) => {
                warn!(client.id = self.id, error = %e, "backend connection failed");
                Err(match self.shared.pool.health.down() {
                    Some(d) => self.shared.pool.health.unreachable_err(&d),
                    None => errors::backend_unavailable(&e.to_string()),
                })
            }
        }
    }

    /// This user's queue timeout (`users.queue_timeout_ms`, else the pool's).
    pub(super) fn queue_timeout(&self) -> Duration {
        self.user_slot
            .tenant()
            .queue_timeout(self.shared.pool.queue_timeout())
    }

    /// Returns the backend (through the authority's release gate) unless
    /// the session stays pinned to it.
    pub(super) fn finish(&mut self, slot: SlotGuard, backend: Leased) {
        if self.pins.any() {
            self.backend = Some(backend);
            slot.finish(None);
        } else if authority::release(backend.marks, backend.status) == Release::Share {
            slot.finish(Some(backend));
        } else {
            let mut backend = backend;
            if self.park(&mut backend) {
                // Back idle in the same step; its cleanup waits for
                // another taker (see `crate::pool::parking`).
                slot.finish(Some(backend));
            } else {
                slot.finish(None);
                release_backend(&self.shared, backend);
            }
        }
    }

    /// Waits in the group's queue for `need`; the client leaving ends the
    /// wait (and the session). Its own function so that the waiting
    /// future is gone once admitted (not carried through the statement).
    async fn admit(
        &mut self,
        need: Need,
        prio: crate::pool::scheduler::Priority,
        deadline: Instant,
    ) -> Result<Result<crate::pool::group::Admitted, crate::pool::group::QueueTimeout>, End> {
        let group = self.group.clone();
        let tenant = self.user_slot.tenant().clone();
        let acquire = group.acquire(need, prio, &tenant, deadline);
        tokio::pin!(acquire);
        loop {
            tokio::select! {
                // An immediate grant must not cost a read syscall on the client.
                biased;
                r = &mut acquire => return Ok(r),
                r = self.client.watch_peer() => {
                    if r.is_err() {
                        // Left while queued: dropping `acquire` leaves the queue.
                        return Err(End::ClientGone);
                    }
                }
            }
        }
    }

    /// Waits for an execution slot and a backend (the pinned one, an idle
    /// one or a new one) and brings the backend to the session's state.
    /// `None` when an error was already sent to the client.
    pub(super) async fn checkout(&mut self, seq: u8) -> Result<Option<Checkout>, End> {
        if !self.leave_replica_backend(seq).await? {
            return Ok(None);
        }
        let prio = self.priority();
        let was_pinned = self.backend.is_some() && !self.only_session_mode();
        let mut need = if self.backend.is_none() {
            Need::Lease {
                pool: self.lease_key(),
                // A read routed to a replica takes none the session parked.
                parked: if self.route.is_some() {
                    None
                } else {
                    self.lease_parked()
                },
            }
        } else if was_pinned
            && prio == crate::pool::scheduler::Priority::High
            && self.pins.holds_lock()
            && self.shared.config.load().pool.admit_transactions_at_start
        {
            Need::Continue
        } else {
            Need::Slot
        };
        let started = Instant::now();
        let deadline = started + self.queue_timeout();
        let mut full = FullBackoff::new();
        let (slot, mut backend) = loop {
            let adm = match self.admit(need, prio, deadline).await? {
                Ok(a) => a,
                Err(t) => {
                    debug!(
                        client = self.id,
                        group = t.group,
                        waited_ms = t.waited_ms as u64,
                        "queue timeout"
                    );
                    self.shared.metrics.queue_timeout(self.group.id);
                    let e = match self.shared.pool.health.down() {
                        Some(d) => self.shared.pool.health.unreachable_err(&d),
                        // The user's own cap held it back: say so first.
                        None if t.user_cap.is_some() => queue_timeout_err(&t.to_string()),
                        None => match self.transaction_holders(t.owned, t.waited_ms) {
                            Some(why) => queue_timeout_err(&why),
                            None => queue_timeout_err(&t.to_string()),
                        },
                    };
                    self.send_err(seq, &e).await?;
                    return Ok(None);
                }
            };
            self.stmt_wait = Some(started.elapsed());
            match (adm.backend, adm.open) {
                (None, None) => match self.backend.take() {
                    // Held on a server that stopped being the primary: the
                    // session's state lives there and goes nowhere else; it
                    // ends as a lost backend holding state does.
                    Some(b) if !self.shared.pool.usable(&b) => {
                        let replica = self.shared.pool.replica_of(b.pool).is_some();
                        drop(b);
                        drop(adm.slot);
                        if replica {
                            // Only a warning list or a count was held there
                            // (`leave_replica_backend`): gone with it.
                            return self.fall_back_to_primary(seq, Primary::NoReplica).await;
                        }
                        let e = errors::backend_lost("the primary server changed");
                        self.lost_backend(seq, &e, true).await?;
                        return Ok(None);
                    }
                    Some(b) => break (adm.slot, b),
                    None => {
                        let e = errors::backend_unavailable("pinned backend missing");
                        self.send_err(seq, &e).await?;
                        return Ok(None);
                    }
                },
                (idle, open) => match self.obtain_backend(idle, open).await {
                    Ok(b) => break (adm.slot, b),
                    // No backend on the replica a read was routed to: the
                    // primary takes it.
                    Err(_) if self.route.is_some() && self.backend.is_none() => {
                        drop(adm.slot);
                        self.route = None;
                        self.shared.pool.routing.kept(Primary::NoReplica);
                        need = Need::Lease {
                            pool: self.pool,
                            parked: self.lease_parked(),
                        };
                    }
                    // The server refused a new backend as full: wait for one of
                    // the pool's own (the pool stopped growing), backing off,
                    // within the queue timeout; a direct client would have
                    // been refused at its login, this one is already in.
                    Err(e) if full.may_wait(&e, deadline) => {
                        drop(adm.slot);
                        full.wait().await;
                    }
                    Err(e) => {
                        self.send_err(seq, &e).await?;
                        return Ok(None);
                    }
                },
            }
        };
        let replica = self.shared.pool.replica_of(backend.pool).is_some();
        // Read-your-writes: the replica applies the session's last write
        // before anything of the session (its schema, its settings) reaches
        // it, or the read goes to the primary.
        if let Some((server, gtid)) = self
            .route
            .as_mut()
            .and_then(|r| Some((r.server, r.wait_for.take()?)))
        {
            let waited = self.wait_for_write(&mut backend, server, &gtid).await;
            if waited != Some(true) {
                drop(slot);
                if waited.is_some() {
                    release_backend(&self.shared, backend);
                }
                return self.fall_back_to_primary(seq, Primary::Causal).await;
            }
        }
        // Three rounds at most: a schema dropped by someone else is learned in
        // the first (the session then goes on without one, as it would on
        // the server), the second applies the rest.
        for _ in 0..3 {
            let plan = self.sync_plan_for(&backend);
            if plan.clear_schema {
                let params = self.shared.pool.params(backend.pool);
                let cleared = match &params {
                    Some(p) => backend.clear_schema(p, &parking::baseline()).await,
                    None => Err(BackendError::Protocol("unknown pool key".into())),
                };
                if let Err(e) = cleared {
                    drop(backend);
                    drop(slot);
                    if replica {
                        return self.fall_back_to_primary(seq, Primary::NoReplica).await;
                    }
                    self.lost_backend(seq, &errors::backend_lost(&e.to_string()), was_pinned)
                        .await?;
                    return Ok(None);
                }
                continue;
            }
            if plan.is_empty() {
                break;
            }
            let synced = sync(&mut backend, &plan).await;
            if replica && !matches!(synced, Ok(None)) {
                // A replica that cannot take the session's state (a schema
                // or a setting it lacks, a failure) teaches nothing about
                // the session: the primary takes the command.
                drop(backend);
                drop(slot);
                return self.fall_back_to_primary(seq, Primary::NoReplica).await;
            }
            let failure = match synced {
                Ok(None) => None,
                Ok(Some(e)) if e.code == errors::ER_BAD_DB_ERROR && plan.init_db.is_some() => {
                    // The schema is gone. Direct, the session keeps working
                    // (unqualified names fail) and USE other succeeds.
                    self.schema_gone = true;
                    continue;
                }
                // The state could not be applied: the client sees the
                // server's error; the backend is closed since it may be
                // half-changed.
                Ok(Some(e)) => Some((e, true)),
                Err(e) => Some((errors::backend_lost(&e.to_string()), false)),
            };
            if let Some((e, server_said)) = failure {
                drop(backend);
                drop(slot);
                if server_said && was_pinned {
                    self.send_err(seq, &e).await?;
                    return Err(End::Fatal("session state could not be applied".into()));
                }
                self.lost_backend(seq, &e, was_pinned).await?;
                return Ok(None);
            }
            backend.state.adopt(&self.state);
            if self.schema_gone {
                backend.state.schema = None;
            }
            break;
        }
        if let Err(e) = self.restore_login_role(&mut backend, was_pinned).await {
            drop(backend);
            drop(slot);
            if replica {
                return self.fall_back_to_primary(seq, Primary::NoReplica).await;
            }
            self.lost_backend(seq, &errors::backend_lost(&e.to_string()), was_pinned)
                .await?;
            return Ok(None);
        }
        // The statement reads ROW_COUNT() on a backend another client may
        // have used: the session's count first (see `row_count`).
        if let Some(v) = self.prime_row_count.take()
            && let Err(e) = super::row_count::prime(&mut backend, v).await
        {
            drop(backend);
            drop(slot);
            if replica {
                self.prime_row_count = Some(v);
                return self.fall_back_to_primary(seq, Primary::NoReplica).await;
            }
            self.lost_backend(seq, &errors::backend_lost(&e.to_string()), was_pinned)
                .await?;
            return Ok(None);
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
        let statement = 1 + self
            .handle
            .statement
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        // A thread of a replica is not the primary's thread of that number
        // (KILL QUERY ID looks threads up on the primary): not published.
        let thread = match self.shared.pool.replica_of(co.backend.pool) {
            None => co.backend.thread_id,
            Some(_) => 0,
        };
        self.handle
            .backend_thread
            .store(thread, std::sync::atomic::Ordering::Release);
        // Lexed with the session's sql_mode as it was before the statement.
        let lex = authority::lex_options(&self.state, self.status);
        let lexable = authority::lexable_charset(&self.state);
        // A prepared statement's effects are those of its text.
        let executing = self.executing.take().filter(|_| {
            matches!(
                payload.first(),
                Some(&(COM_STMT_EXECUTE | COM_STMT_BULK_EXECUTE))
            )
        });
        let streamed = std::mem::take(&mut self.streamed);
        // A deferred BEGIN goes ahead of the command, in the same write on
        // a plain hop (a streamed command had it sent before, see `large`).
        let began = std::mem::take(&mut self.pending_begin);
        let status_before = self.status;
        // The backend's own flags ahead of the statement (see `learn_autocommit`).
        let backend_status_before = co.backend.status;
        let learn_begin = if co.was_pinned || !self.may_defer_begin() {
            None
        } else if payload.first() == Some(&COM_QUERY) && super::begin::is_plain_begin(&payload[1..])
        {
            Some(super::begin::Via::Query)
        } else if executing
            .as_ref()
            .is_some_and(|e| super::begin::is_prepared_begin(e, payload))
        {
            Some(super::begin::Via::Execute)
        } else {
            None
        };
        // On a plain hop the BEGIN rides in the command's write and its OK
        // is read once the command is sent; a compressed hop has it sent
        // on its own first.
        let begin_queued = began && !streamed && !co.backend.io.is_compressed();
        if began {
            // Losing this backend now loses the client's transaction.
            co.was_pinned = true;
            if begin_queued {
                co.backend.io.write_packet(0, super::begin::BEGIN);
            } else if !streamed {
                co = self.begin_now(co).await?;
            }
        }
        // A transaction that changed LAST_INSERT_ID() ends: the value is
        // read before the backend goes back (see `follow_up`). The query
        // rides in the same write as the COMMIT / ROLLBACK, so the backend
        // is not held for one more round trip after every such transaction.
        let read_insert_id_ahead = !streamed
            && co.backend.marks.insert_id_unknown
            && !self.pins.has(PinReason::SessionMode)
            && !co.backend.io.is_compressed()
            && ends_transaction_plainly(payload);
        // A statement that may create or change a view or trigger: the
        // catalog of such names is unknown from now until it is read again
        // after the reply (see `code_catalog`).
        let _catalog_guard = self.guard_catalog(executing.as_deref(), payload);
        let sent = if streamed {
            Ok(0)
        } else if read_insert_id_ahead {
            co.backend
                .send_then_query(payload, READ_LAST_INSERT_ID)
                .await
        } else {
            co.backend.io.send_packet(0, payload).await
        };
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
        if begin_queued && let Err(e) = super::begin::read_begin_reply(&mut co.backend).await {
            // The command was sent behind it and ran outside a transaction:
            // the session ends, as a lost connection inside one does.
            abandon_backend(&self.shared, co);
            return Err(e);
        }
        if began {
            // The transaction is open on this backend from here on, whatever
            // the command's reply (an ERR carries no status to say so).
            self.pin(PinReason::Transaction);
        }
        let mut analysis = match &executing {
            Some(e) => e.analysis(lex),
            None => std::borrow::Cow::Owned(self.command_analysis(payload, lex)),
        };
        // A statement that changes globals: its reply reaches the client
        // only once the new defaults are known (see `follow_up`).
        let defer_flush = authority::sets_globals(&analysis);
        // Only a plain statement's results may leave out definitions:
        // those of stored-program code (CALL, BEGIN NOT ATOMIC, IF, FOR …)
        // always carry them (the server's `thd->spcont`).
        let execute = self.expect_metadata.take().filter(|_| {
            self.caps.cache_metadata() && crate::frontend::metadata_cache::cacheable(&analysis)
        });
        let metadata = crate::frontend::metadata_cache::Metadata::for_response(
            self.caps,
            || self.metadata_seed(),
            execute,
        );
        let server = self.shared.pool.server_info();
        let view = ClientView {
            server_version: &server.version,
            caps: self.caps,
            trackers: self
                .own_trackers
                .as_deref()
                .unwrap_or(&self.shared.trackers),
            status: self.status,
            intercept,
            max_packet: self.shared.config.load().frontend.max_allowed_packet,
            expect_columns: self.expect_columns.take(),
            cursor: std::mem::take(&mut self.expect_cursor),
            defer_flush,
            metadata,
            hop_status: self.hop_status.as_ref(),
        };
        // A KILL CONNECTION of this session (the only thing that wakes it)
        // ends the statement too: a long one, or a stored-program loop whose
        // sub-statements change query ids, would otherwise run on.
        let (wake, interrupt) = (&self.handle.wake, &self.handle.interrupt);
        let kill_query = &self.handle.kill_query;
        let thread = co.backend.thread_id;
        let at = (co.backend.server, co.backend.server_epoch, co.backend.pool);
        let mut kill_sent = None;
        let relayed = {
            let relaying = relay(&mut self.client, &mut co.backend.io, shape, &view, seq);
            tokio::pin!(relaying);
            // Armed before the check below: a KILL QUERY between the two is
            // not lost.
            let interrupted = interrupt.notified();
            tokio::pin!(interrupted);
            interrupted.as_mut().enable();
            // KILL QUERY of this statement: the thread still runs this
            // session's statement (leased), so a thread KILL QUERY is
            // exact; the server's error then ends the response.
            let meant = || kill_query.load(std::sync::atomic::Ordering::Acquire) == statement;
            if meant() {
                kill_sent = Some(kill_query_of(&self.shared, at, thread));
            }
            loop {
                tokio::select! {
                    r = &mut relaying => break Some(r),
                    _ = wake.notified() => break None,
                    _ = &mut interrupted, if kill_sent.is_none() => {
                        if meant() {
                            kill_sent = Some(kill_query_of(&self.shared, at, thread));
                        } else {
                            interrupted.set(interrupt.notified());
                            interrupted.as_mut().enable();
                        }
                    }
                }
            }
        };
        // The KILL must have reached the server before this session sends
        // its next statement on the same thread: a late one would kill
        // that statement instead (the server forgets a KILL QUERY that
        // finds the thread idle when its next command starts).
        if let Some(sent) = kill_sent {
            let _ = sent.await;
        }
        self.handle
            .backend_thread
            .store(0, std::sync::atomic::Ordering::Relaxed);
        let Some(result) = relayed else {
            // Still leased to this session: its thread runs nothing of
            // anyone else's, so killing it is exact.
            abandon_backend(&self.shared, co);
            return Err(End::Killed);
        };
        match result {
            Ok(out) => {
                let insert_id_read = if read_insert_id_ahead {
                    let read = co.backend.read_row().await;
                    if let Ok(Some(row)) = &read {
                        note_warning_count(&mut co.backend.marks, row);
                    }
                    Some(read)
                } else {
                    None
                };
                self.shared.metrics.bytes(out.bytes, 0);
                if let Some(code) = out.error {
                    self.shared.metrics.error(code, true);
                }
                if out.error == Some(errors::ER_NET_PACKET_TOO_LARGE) {
                    // The server closes a connection after a packet past
                    // its max_allowed_packet: so does the session, once the
                    // client has the error, as it would directly.
                    self.client.flush().await.map_err(End::Client)?;
                    drop(co);
                    return Err(End::Fatal(
                        "the server closed its connection after a packet past max_allowed_packet"
                            .into(),
                    ));
                }
                if let Some(st) = out.status {
                    // Per-statement flags (cursor, last row, metadata) are not
                    // the session's: the next command starts without them.
                    self.status = st & !status::TRANSIENT;
                    co.backend.status = st;
                    if st & status::IN_TRANS != 0 {
                        if !self.pins.has(PinReason::Transaction) && !began {
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
                            self.user_slot.tenant().transaction();
                        }
                        self.pins.remove(PinReason::Transaction);
                    }
                } else if out.error.is_some() && self.status & status::AUTOCOMMIT == 0 {
                    // An error with autocommit off: the statement may have
                    // started a transaction (InnoDB registers one, with its
                    // locks, before the statement fails), and an ERR carries
                    // no status to say so. Fail closed: the backend stays
                    // with the session until a reply's status tells.
                    self.pin(PinReason::Transaction);
                }
                if !lexable || streamed {
                    // Only a prefix of a streamed query was read: what the
                    // rest did is unknown (fail closed).
                    analysis.to_mut().incomplete = true;
                }
                let temporary = authority::Temporary::of(&analysis);
                let schema_before = self.state.schema.clone().unwrap_or_default();
                let mut fx = self
                    .state
                    .apply_block_with(&out.state, |name| !temporary.covers(name));
                let last_gtid = fx.last_gtid.take();
                // The client's own tracker settings decide what its OKs
                // report from now on (the backend keeps myplex's).
                for (name, value) in &fx.tracker_values {
                    self.own_trackers
                        .get_or_insert_with(|| Box::new(self.shared.trackers.clone()))
                        .set(name, value);
                }
                // Without DEPRECATE_EOF a result set's EOF can only flag a
                // change (SERVER_SESSION_STATE_CHANGED), not say what it was.
                fx.state_changed |= out.state_unreported;
                if self.state.schema.as_deref().unwrap_or_default() != &schema_before[..] {
                    self.schema_gone = false;
                }
                co.backend
                    .state
                    .apply_block_with(&out.state, |name| !temporary.covers(name));
                if let Some(st) = out.status {
                    self.learn_autocommit(&mut co.backend.state, backend_status_before, st);
                }
                if !analysis.incomplete
                    && analysis.statements.len() > 1
                    && !analysis
                        .statements
                        .iter()
                        .any(crate::sql::may_change_lexing)
                    && (authority::lex_options(&self.state, self.status) != lex
                        || !authority::lexable_charset(&self.state))
                {
                    // The server says the query changed how it lexes (its
                    // sql_mode or client character set) where the reading
                    // saw no such change: the statements after it were not
                    // read as the server read them (fail closed).
                    analysis.to_mut().incomplete = true;
                }
                if analysis.incomplete
                    && lexable
                    && !streamed
                    && payload.first() == Some(&COM_QUERY)
                    && let Some(a) = relex_after_mode_change(
                        &payload[1..],
                        out.results,
                        &analysis,
                        lex,
                        authority::lex_options(&self.state, self.status),
                    )
                {
                    analysis = std::borrow::Cow::Owned(a);
                }
                if !out.intercepted {
                    self.row_count_now = super::row_count::after_response(
                        out.error.is_some(),
                        out.last_affected,
                        out.columns.is_some(),
                    );
                }
                let reply = Reply {
                    error: out.error.is_some(),
                    results: out.results,
                    warnings: out.warnings,
                    in_trans: self.status & status::IN_TRANS != 0,
                    insert_id: out.last_insert_id,
                    rows: out.columns.is_some(),
                };
                let sql = match (&executing, payload.first()) {
                    (Some(e), _) => &e.key.sql[..],
                    (None, Some(&COM_QUERY)) => &payload[1..],
                    _ => &[][..],
                };
                if self.shared.pool.replica_of(co.backend.pool).is_none() {
                    let a: &Analysis = &analysis;
                    // A reply ending in a classic EOF carries no session
                    // state: a write's GTID is not in it (RETURNING, a
                    // stored function that writes).
                    let unreported = out.error.is_some() || out.state_unreported;
                    self.note_primary_reply(last_gtid, unreported, || {
                        crate::pool::routing::reads_only(sql, a, lex).is_err()
                    });
                }
                // FOUND_ROWS() is answered from the rows counted here when
                // that is what the server would say; otherwise the backend
                // is held for the next statement, which then asks it.
                let mut found_rows_held = false;
                if let Some(rows) = out.rows {
                    let last = analysis
                        .statements
                        .last()
                        .and_then(|st| sql.get(st.span.clone()))
                        .unwrap_or(sql);
                    match super::local::found_rows_after(last, rows, lex) {
                        Some(n) => self.found_rows = n,
                        None => {
                            self.found_rows = rows;
                            found_rows_held = true;
                        }
                    }
                }
                // Views and triggers run code the text does not show (the
                // set is looked at in place: no reference count taken).
                self.shared
                    .pool
                    .code_catalog
                    .peek(|names| match (&executing, names) {
                        // A prepared statement's names resolve in the schema
                        // it was prepared in (where a backend that lacks it
                        // prepares it again), whatever the session's is now;
                        // its answer is kept per installed set.
                        (Some(e), Some(n)) => {
                            if e.names_code(n) {
                                authority::mark_all_stored_code(&mut analysis);
                            }
                        }
                        (Some(e), None) => {
                            let prepared_in = e.key.schema.as_deref().unwrap_or_default();
                            authority::mark_code_names(&mut analysis, sql, prepared_in, None)
                        }
                        (None, names) => {
                            authority::mark_code_names(&mut analysis, sql, &schema_before, names)
                        }
                    });
                let mut fu = authority::after_query(
                    &mut self.inv,
                    &mut co.backend.marks,
                    &schema_before,
                    &analysis,
                    &reply,
                    &fx,
                    sql,
                    lex,
                );
                for n in &fu.take_defaulted(co.backend.login_defaults()) {
                    self.state.vars.remove(n);
                    co.backend.state.vars.remove(n);
                }
                // The backend ran the same statements: same collation (both
                // were brought to the same state before the statement, so
                // only a reply that reported changes can part them).
                if !out.state.is_empty() {
                    co.backend.state.take_collations_from(&self.state);
                }
                self.inv.calc_found_rows |= found_rows_held;
                self.follow_up(&mut co.backend, fu, &out, insert_id_read)
                    .await;
                if defer_flush {
                    self.client.flush().await.map_err(End::Client)?;
                }
                self.sync_inventory_pins();
                // The diagnostics area (SHOW WARNINGS / ERRORS, @@warning_count,
                // GET DIAGNOSTICS) lives on the backend that ran the statement:
                // hold it for the client's next statement (see serve()).
                if out.warnings > 0 || out.error.is_some() {
                    self.hold_diagnostics();
                } else if self.diagnostic_stmt {
                    self.pin(PinReason::Diagnostics);
                } else {
                    self.pins.remove(PinReason::Diagnostics);
                }
                if let Some(via) = learn_begin {
                    self.learn_begin(via, status_before, &out);
                }
                self.stmt_figures = Some(super::digest::Figures::of(&out, schema_before));
                Ok(Some((co, out)))
            }
            Err(RelayError::Client(e)) => {
                // The backend may be mid-response or mid-transaction: close it,
                // and stop what it runs (closing alone lets a long statement
                // run to its end).
                if matches!(e, crate::wire::WireError::WriteTimeout) {
                    tracing::info!(
                        client.id = self.id,
                        "client stopped reading its result; statement killed"
                    );
                    self.shared.metrics.client_write_timeout();
                }
                abandon_backend(&self.shared, co);
                Err(End::Client(e))
            }
            Err(RelayError::Backend { sent, .. }) | Err(RelayError::Malformed { sent }) => {
                let mut was_pinned = co.was_pinned;
                if self.shared.pool.replica_of(co.backend.pool).is_none() {
                    // It may have committed before the connection went:
                    // its GTID never came (read-your-writes).
                    self.note_primary_reply(None, true, || true);
                } else {
                    // A replica holds nothing of the session but a warning
                    // list or a count: gone with it, the session goes on.
                    was_pinned = false;
                    self.drop_replica_holds();
                }
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
        let r = self.forward_routed(pkt, shape, seq).await;
        self.route = None;
        r
    }

    async fn forward_routed(&mut self, pkt: &Packet, shape: Shape, seq: u8) -> Result<(), End> {
        let Some(co) = self.checkout_routed(seq).await? else {
            return Ok(());
        };
        let Some((co, _out)) = self.exchange(co, &pkt.payload, seq, shape, None).await? else {
            return Ok(());
        };
        self.finish(co.slot, co.backend);
        Ok(())
    }

    /// The sync plan toward the session's state; without the schema when it
    /// was dropped under the session.
    fn sync_plan_for(&self, backend: &BackendConn) -> SyncPlan {
        let mut plan = backend.plan_toward(&self.state);
        if self.schema_gone {
            plan.init_db = None;
            plan.clear_schema = backend.state.schema.is_some();
        }
        plan
    }

    /// A session that logged in before a SET DEFAULT ROLE keeps the role
    /// it logged in with, as direct (the change is for new logins): a
    /// backend that logged in since with another role gets the session's
    /// (`SET ROLE`) and is marked so that no one else gets it (closed when
    /// the session lets it go; not held: holding one backend per older
    /// session could take the whole pool). Left as it is when no backend
    /// of the session's epoch is on record, when the role's name is not
    /// ASCII (it would be sent in the session's character set), or when
    /// the server refuses the role (dropped or revoked since: direct, the
    /// session would keep it; the backend's is the closest).
    async fn restore_login_role(
        &mut self,
        backend: &mut Leased,
        was_pinned: bool,
    ) -> Result<(), BackendError> {
        if was_pinned || self.inv.role || backend.roles_epoch == self.login_roles_epoch {
            return Ok(());
        }
        let Some(role) = self
            .shared
            .pool
            .login_role_at(self.pool, self.login_roles_epoch)
            .filter(|r| *r != backend.login_role)
            .filter(|r| r.as_deref().is_none_or(|n| n.is_ascii()))
        else {
            return Ok(());
        };
        let q = match &role {
            Some(r) => format!("SET ROLE `{}`", r.replace('`', "``")),
            None => "SET ROLE NONE".to_string(),
        };
        match backend.exec(&q).await {
            Ok(()) => backend.marks.role_changed = true,
            Err(BackendError::Server(e)) => {
                warn!(client.id = self.id, error = %e.message, "could not give the session its login role back");
            }
            Err(e) => return Err(e),
        }
        Ok(())
    }

    /// What a count of the backend session's user variables (`None`: not
    /// answered) says of those the session is known to hold.
    fn note_user_var_count(&mut self, n: Option<usize>) {
        match n {
            Some(0) => {
                self.inv.user_vars.clear();
                self.inv.user_vars_unverified = false;
            }
            Some(n) => self.inv.user_vars_unverified = n > self.inv.user_vars.len(),
            None => self.inv.user_vars_unverified = true,
        }
    }

    /// Recomputes the pins that follow from the inventory, counting new ones.
    pub(super) fn sync_inventory_pins(&mut self) {
        let inv = self.inv.pins();
        let before = self.pins;
        self.pins.set_inventory(inv);
        if self.pins.bits() & !before.bits() == 0 {
            return;
        }
        for r in PinReason::ALL {
            if self.pins.has(r) && !before.has(r) {
                self.shared.metrics.pinned(r.label());
            }
        }
    }

    /// Holds the catalog of code-bearing names unknown while a statement
    /// that may change it runs (see `code_catalog`): DDL in its text, a
    /// CALL of a procedure that may run DDL, or an EXECUTE while the
    /// session holds a text-prepared statement that may.
    fn guard_catalog(
        &self,
        executing: Option<&crate::prepared::StmtEntry>,
        payload: &[u8],
    ) -> Option<crate::pool::code_catalog::DdlGuard> {
        use crate::session_state::code_names::DdlScan;
        let (scan, text, prepared_in) = match (executing, payload.first()) {
            (Some(e), _) => (
                e.changes_code_names(),
                &e.key.sql[..],
                e.key.schema.as_deref(),
            ),
            (None, Some(&COM_QUERY)) => (DdlScan::of(&payload[1..]), &payload[1..], None),
            _ => return None,
        };
        let catalog = &self.shared.pool.code_catalog;
        let calls_ddl = || {
            let schema = self.state.schema.as_deref().unwrap_or_default();
            catalog.names().is_none_or(|n| {
                n.calls_ddl(text, schema) || prepared_in.is_some_and(|p| n.calls_ddl(text, p))
            })
        };
        // A routine created where unplanned KILLs are refused: its CALL
        // waits for the catalog to have read its body.
        let new_routine = || scan.routine && !self.allow_unplanned_kill();
        // Text prepared earlier with PREPARE … FROM is not read here.
        let taints = (scan.execute && !self.inv.ddl_prepared.is_empty())
            || ((scan.ddl || scan.routine || scan.call)
                && self.may_make_killer_code(text, prepared_in));
        catalog.guard_if(
            scan.ddl
                || (scan.call && calls_ddl())
                || (scan.execute && !self.inv.ddl_prepared.is_empty())
                || new_routine(),
            taints,
        )
    }

    /// Whether a statement that may define or change code (DDL, a routine,
    /// a CALL, an EXECUTE) may make code that reaches a KILL the catalog's
    /// last set does not show: it names code that may KILL (per that set;
    /// any, when none was read), or holds the word KILL or dynamic SQL.
    /// Such a statement keeps the KILL gate
    /// from judging by that set until the catalog is read again.
    fn may_make_killer_code(&self, text: &[u8], prepared_in: Option<&[u8]>) -> bool {
        use crate::sql::scan::{Found, Mode, WordScan};
        // Outside strings and comments (executable comments are code),
        // where the lexer reads the text; anywhere otherwise.
        let unreadable = super::kill_dynamic::unreadable(text, &self.state)
            || !crate::session_state::authority::lexable_charset(&self.state);
        let mode = if unreadable {
            Mode::Words
        } else {
            Mode::Quotes(crate::session_state::authority::lex_options(
                &self.state,
                self.status,
            ))
        };
        let mut scan = WordScan::new(mode);
        scan.feed(text);
        let w = scan.finish();
        if w.has(Found::KILL) || w.has(Found::PREPARE) || w.has(Found::IMMEDIATE) {
            return true;
        }
        let schema = self.state.schema.as_deref().unwrap_or_default();
        self.shared.pool.code_catalog.last().is_none_or(|n| {
            n.may_kill(text, schema)
                || prepared_in.is_some_and(|p| n.may_kill(text, p))
                || (n.may_reach_killers(text, schema) && (unreadable || !text.is_ascii()))
        })
    }

    /// Runs the probes the authority asked for, on the backend that just
    /// answered, and reads LAST_INSERT_ID() before the backend is let go.
    /// A failed probe leaves the inventory as it was (fail closed).
    async fn follow_up(
        &mut self,
        backend: &mut Leased,
        mut fu: authority::Followup,
        out: &crate::frontend::relay::Outcome,
        mut insert_id_read: Option<Result<Option<Vec<Option<String>>>, BackendError>>,
    ) {
        // The next statement reads FOUND_ROWS() on this backend: a probe
        // (a SELECT) now would replace it. Put the probes off, holding the
        // backend as if they had found something.
        let keep_found_rows = self.inv.calc_found_rows;
        if keep_found_rows {
            if std::mem::take(&mut fu.probe_role) {
                self.probe_role_later = true;
                self.inv.role = true;
                backend.marks.role_changed = true;
            }
            if std::mem::take(&mut fu.count_user_vars) {
                self.inv.user_vars_unverified = true;
            }
        } else {
            fu.probe_role |= std::mem::take(&mut self.probe_role_later);
        }
        if fu.globals_changed {
            let pool = &self.shared.pool;
            pool.globals_changed();
            // What a new session starts with now (the next login's greeting
            // says it, as the server's would).
            let epoch = pool.globals_epoch();
            if let Ok(Some(row)) = backend
                .query_row("SELECT @@global.autocommit, @@global.sql_mode")
                .await
            {
                pool.learn_session_status(epoch, new_session_status(&row));
            }
            // And the limits a new connection gets (max_allowed_packet).
            if let Err(e) = backend.learn_limits(&self.shared.limits).await {
                debug!(error = %e, "could not read the server's limits after SET GLOBAL");
            }
        }
        if fu.default_role_changed {
            let pool = &self.shared.pool;
            pool.default_roles_changed();
            let epoch = pool.roles_epoch();
            // The role a new login of this account gets now (IS_DEFAULT is
            // about the current user only; no row: none). Not asked while
            // the next statement reads FOUND_ROWS() here; a name that is
            // not ASCII (read in the session's character set) is not kept.
            if !keep_found_rows
                && let Ok(row) = backend.query_row(crate::pool::DEFAULT_ROLE_SQL).await
            {
                let role = row.and_then(|r| r.into_iter().next().flatten());
                if role.as_deref().is_none_or(|n| n.is_ascii()) {
                    pool.note_login_role(self.pool, epoch, &role);
                }
            }
        }
        // The user variables were counted with the role (below).
        let mut counted = false;
        if fu.probe_role && self.pins.has(PinReason::SessionMode) {
            // The backend is this session's for life: the role it may have
            // is the session's own, as direct. Not asked (the SELECT would
            // change what the server's next statement reports, e.g. the
            // row number of its warnings): the connection is closed at the
            // end instead of reset and shared.
            self.inv.role = true;
            backend.marks.role_changed = true;
        } else if fu.probe_role {
            // The active role, read from the server: SET ROLE (or stored
            // code: an INVOKER procedure's SET ROLE outlives it) may leave
            // another role than the backend's login role, or set it back.
            // Equal to the login role, the backend is as a fresh login left
            // it; anything else, or no answer, holds it for the session's
            // life, as does a login role that a SET DEFAULT ROLE made stale.
            // CURRENT_ROLE() reads no table: the diagnostics area stays.
            // When the user variables are to be counted now and
            // LAST_INSERT_ID() read (after stored code, all three), they
            // ride in the same query: one round trip instead of three.
            let count_now = !keep_found_rows
                && (fu.count_user_vars || self.inv.user_vars_unverified)
                && out.warnings == 0
                && out.error.is_none();
            let id_now = insert_id_read.is_none()
                && backend.marks.insert_id_unknown
                && self.status & status::IN_TRANS == 0;
            let mut q = String::from("SELECT CURRENT_ROLE()");
            if count_now {
                q.push_str(", ");
                q.push_str(parking::USER_VARIABLES_COUNT);
            }
            if id_now {
                q.push_str(", LAST_INSERT_ID()");
            }
            let row = backend.query_row(&q).await;
            let cell = |i: usize| match &row {
                Ok(Some(r)) => Ok(r.get(i).cloned().flatten()),
                Ok(None) => Ok(None),
                Err(_) => Err(()),
            };
            if count_now {
                counted = true;
                let n = cell(1).ok().flatten().and_then(|c| c.parse::<usize>().ok());
                if n.is_some() {
                    // The count read a table: the diagnostics area is gone.
                    backend.marks.diagnostics = false;
                }
                self.note_user_var_count(n);
            }
            if id_now {
                let i = 1 + usize::from(count_now);
                insert_id_read = Some(match cell(i) {
                    Ok(v) => Ok(Some(vec![v])),
                    Err(()) => Err(BackendError::Protocol("the follow-up query failed".into())),
                });
            }
            let now = cell(0);
            let same = matches!(&now, Ok(role) if *role == backend.login_role)
                && backend.roles_epoch == self.shared.pool.roles_epoch();
            self.inv.role = !same;
            backend.marks.role_changed = !same;
            if same {
                // The session's role is what a login gets now: no older
                // login role to give it back.
                self.login_roles_epoch = backend.roles_epoch;
            }
        }
        if fu.verify_locks {
            self.verify_locks(backend).await;
        }
        // Never carried to a later query, whose settings may read the
        // literals otherwise.
        self.inv.give_up_pending_locks();
        if !counted && !keep_found_rows && (fu.count_user_vars || self.inv.user_vars_unverified) {
            // Stored code may set user variables the text does not show.
            // The count reads a table, which clears the diagnostics area:
            // with warnings or an error to keep, count after a later
            // statement and stay pinned meanwhile.
            if self.pins.has(PinReason::SessionMode) {
                // The backend is this session's for life: nobody else can
                // see what stored code left, and the count (a SELECT) would
                // change what the server's next statement sees (the row
                // number of its warnings). It is reset before it is shared.
                backend.marks.needs_reset = true;
            } else if out.warnings > 0 || out.error.is_some() {
                self.inv.user_vars_unverified = true;
            } else {
                let n = parking::count_user_variables(backend).await;
                self.note_user_var_count(n);
            }
        }
        if !fu.probe_vars.is_empty() {
            self.probe_vars(backend, fu.probe_vars).await;
        }
        if fu.probe_collation
            && let Ok(Some(row)) = backend.query_row("SELECT @@collation_connection").await
            && let Some(Some(c)) = row.first()
        {
            let set = if fu.names_collation {
                TrackedState::set_names_collation
            } else {
                TrackedState::set_collation
            };
            set(&mut self.state, c);
            set(&mut backend.state, c);
        }
        // LAST_INSERT_ID() is replayed exactly: when a statement may have
        // changed it (the OK's insert id is not the same thing: an explicit
        // id is reported there too), read it before the backend goes back.
        self.sync_inventory_pins();
        // Outside a transaction the session may move after this statement
        // (inside one, the read happens after the statement that ends it).
        let read = match insert_id_read {
            // Read with the statement that ended the transaction.
            Some(read) => Some(read),
            None if backend.marks.insert_id_unknown
                && self.status & status::IN_TRANS == 0
                && !self.pins.has(PinReason::SessionMode) =>
            {
                let read = backend.query_row(&READ_LAST_INSERT_ID[1..]).await;
                if let Ok(Some(row)) = &read {
                    note_warning_count(&mut backend.marks, row);
                }
                Some(read)
            }
            None => None,
        };
        if let Some(read) = read {
            if let Ok(Some(row)) = read
                && let Some(id) = row
                    .first()
                    .and_then(|c| c.as_deref())
                    .and_then(|c| c.parse::<u64>().ok())
            {
                self.state.last_insert_id = id;
                backend.state.last_insert_id = id;
                backend.marks.insert_id_unknown = false;
            } else {
                // Unknown value: never share this connection as it is.
                backend.marks.needs_reset = true;
            }
        }
    }

    /// The AUTOCOMMIT status flag of a reply is the server's word on the
    /// session's autocommit: when it changed on the backend during the
    /// statement (`before`: the backend's own status ahead of it) and no
    /// tracker reported the new value (`SET @@autocommit = 0` run by a
    /// procedure or dynamic SQL — the unscoped form is reported by none),
    /// the change is recorded in the session's state and the backend's as
    /// if it had been, so that the session's next backend gets it too.
    /// Before this, such a session went on in autocommit on the next
    /// backend: its later ROLLBACK undid nothing. (Compared on the same
    /// connection: a server whose `init_connect` sets autocommit gives
    /// every fresh backend that value, which is not a change.)
    fn learn_autocommit(&mut self, backend: &mut TrackedState, before: u16, st: u16) {
        if (st ^ before) & status::AUTOCOMMIT == 0 {
            return;
        }
        let on = st & status::AUTOCOMMIT != 0;
        let tracked =
            self.state.vars.get("autocommit").map(|v| {
                v.eq_ignore_ascii_case("on") || v == "1" || v.eq_ignore_ascii_case("true")
            });
        if tracked != Some(on) {
            let value = if on { "ON" } else { "OFF" };
            self.state.vars.insert("autocommit".into(), value.into());
            backend.vars.insert("autocommit".into(), value.into());
        }
    }

    /// Asks the server which of the session's named locks this backend
    /// holds: the confirmed ones by their bytes (a hex literal, read the
    /// same under any setting), the ones the query just took by the
    /// client's own text of the name, which this backend reads as the
    /// statement did (same character sets and sql_mode, see
    /// `authority::after_query`); for those the server also says which
    /// bytes it keys them by. Never a name rebuilt from text by the proxy:
    /// the server converts the literal from the client's character set,
    /// and its escapes depend on sql_mode. A check that fails leaves the
    /// confirmed locks as they were and the new ones unnamed (fail closed).
    async fn verify_locks(&mut self, backend: &mut Leased) {
        if self.inv.locks.is_empty() && self.inv.pending_locks.is_empty() {
            return;
        }
        let held: Vec<Vec<u8>> = self.inv.locks.iter().cloned().collect();
        let pending: Vec<Vec<u8>> = self.inv.pending_locks.iter().cloned().collect();
        let q = lock_check_query(&held, &pending);
        let Ok(Some(row)) = backend.query_row(&q).await else {
            return;
        };
        if row.len() != held.len() + 2 * pending.len() {
            return;
        }
        let (confirmed, taken) = row.split_at(held.len());
        for (n, cell) in held.iter().zip(confirmed) {
            if cell.as_deref() != Some("1") {
                self.inv.locks.remove(n);
            }
        }
        for pair in taken.chunks(2) {
            match (pair[0].as_deref(), pair[1].as_deref().and_then(unhex)) {
                (Some("1"), Some(bytes)) => {
                    self.inv.locks.insert(bytes);
                }
                (Some("1"), None) => self.inv.unnamed_lock = true,
                // Not taken (a timeout, an error before the call), or
                // released by the same query.
                _ => {}
            }
        }
        self.inv.pending_locks.clear();
    }

    /// Reads session variables the server changed without reporting them
    /// and applies them through the authority. Reading `@@` values touches
    /// no table, so the diagnostics area stays as the statement left it.
    /// A value that cannot be read leaves the state unknown (pinned, reset
    /// before sharing).
    async fn probe_vars(&mut self, backend: &mut Leased, mut names: Vec<String>) {
        names.sort();
        names.dedup();
        let plain =
            |n: &String| !n.is_empty() && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        let row = if names.iter().all(plain) {
            let cols: Vec<String> = names.iter().map(|n| format!("@@session.{n}")).collect();
            backend
                .query_row(&format!("SELECT {}", cols.join(", ")))
                .await
                .ok()
                .flatten()
        } else {
            None
        };
        match row {
            Some(row) if row.len() == names.len() => {
                let b = &mut **backend;
                for (n, v) in names.iter().zip(&row) {
                    authority::apply_probed(
                        &mut self.inv,
                        &mut b.marks,
                        [&mut self.state, &mut b.state],
                        n,
                        v.as_deref(),
                    );
                }
            }
            _ => {
                self.inv.unknown = true;
                backend.marks.needs_reset = true;
            }
        }
    }

    /// When every backend connection of this group is held by a session
    /// inside a transaction, the queue timeout says so (raising pool
    /// settings would not help: those transactions must end).
    fn transaction_holders(&self, owned: usize, waited_ms: u128) -> Option<String> {
        use crate::session_state::{PinReason, Pins};
        let groups = self.shared.pool.groups.len().max(1) as u32;
        let mine = self.group.id as u32;
        let holders = self
            .shared
            .sessions
            .lock()
            .ok()?
            .iter()
            .filter(|(id, h)| {
                **id % groups == mine
                    && Pins::from_bits(h.pins.load(std::sync::atomic::Ordering::Relaxed))
                        .has(PinReason::Transaction)
            })
            .count();
        (owned > 0 && holders >= owned).then(|| {
            format!(
                "myplex: queue timeout: waited {waited_ms} ms (pool.queue_timeout_ms) while all {owned} backend connections of thread group {mine} are held by {holders} sessions inside a transaction; those transactions must end (COMMIT / ROLLBACK), or set the server's idle_transaction_timeout to end idle ones"
            )
        })
    }

    /// Reports a lost backend. When it held session state (an open
    /// transaction, variables, temporary tables), that state is gone and the
    /// client must not go on as if it were not: its connection ends without
    /// a word, as a direct one ends when the server goes away (the client
    /// library reports 2013 itself and its auto-reconnect can act; an ERR
    /// from the proxy would look like a statement error). A session that
    /// held nothing gets the error and goes on.
    pub(super) async fn lost_backend(
        &mut self,
        seq: u8,
        e: &ErrPacket,
        held_state: bool,
    ) -> Result<(), End> {
        if held_state {
            tracing::debug!(error = %e.message, "backend holding session state lost");
            return Err(End::Fatal("backend holding session state was lost".into()));
        }
        self.send_err(seq, e).await?;
        self.pins.clear_state();
        Ok(())
    }
}

/// Gives up a backend mid-response while it is still leased (so its thread
/// runs this session's statement and no one else's): the statement is
/// ended by killing the thread over a helper connection (within the
/// backend budget, see `crate::pool::helper`); the backend itself keeps its
/// place in the budget until then — the server still counts its thread
/// while the statement runs — and is closed after.
pub(super) fn abandon_backend(shared: &std::sync::Arc<crate::frontend::Shared>, co: Checkout) {
    let Checkout { slot, backend, .. } = co;
    drop(slot);
    let shared = shared.clone();
    tokio::spawn(async move {
        let thread = backend.thread_id;
        let at = (backend.server, backend.server_epoch, backend.pool);
        send_kill(&shared, at, &format!("KILL {thread}")).await;
        drop(backend);
    });
}

/// KILL QUERY of backend thread `thread` of pool key `pool`, sent beside
/// the running statement (the caller keeps reading its response) and
/// finished when the server has taken it. Only for a thread whose
/// connection the caller leases, and the caller awaits it before it uses
/// that thread again.
fn kill_query_of(
    shared: &std::sync::Arc<crate::frontend::Shared>,
    at: KillAt,
    thread: u32,
) -> tokio::task::JoinHandle<()> {
    let shared = shared.clone();
    tokio::spawn(async move {
        send_kill(&shared, at, &format!("KILL QUERY {thread}")).await;
    })
}

/// Where a backend thread runs: its server, the primary epoch its
/// connection was dialed in, its pool key.
type KillAt = (usize, u64, usize);

/// Sends a KILL for a thread of the backend at `at` over a helper
/// connection to the same server (see `Pool::kill_on`), counted in the
/// metrics; waits up to 5 s for one.
async fn send_kill(shared: &std::sync::Arc<crate::frontend::Shared>, at: KillAt, sql: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    let (server, epoch, pool) = at;
    let (source, sent) = shared
        .pool
        .kill_on(server, epoch, pool, sql, deadline)
        .await;
    shared
        .metrics
        .kill_helper(source, if sent { "sent" } else { "failed" });
    if source == "none" {
        warn!(%sql, "no backend connection free to kill a statement within 5 s");
    }
}

/// Lets go of a backend the session no longer needs, as the authority says:
/// as it is (clean, or parked for its session: see
/// `crate::pool::parking`), closed, or cleaned first — off the client's
/// path; a backend that fails the cleanup is closed.
pub(super) fn release_backend(shared: &std::sync::Arc<crate::frontend::Shared>, mut b: Leased) {
    if !shared.pool.usable(&b) {
        debug!(
            backend = b.id.0,
            "closing backend connection to a server that is no longer the primary"
        );
        return;
    }
    let verdict = authority::release(b.marks, b.status);
    match verdict {
        _ if b.parked_for.is_some() => return b.return_idle(),
        Release::Share => return b.return_idle(),
        Release::Close => {
            debug!(
                backend = b.id.0,
                "closing backend connection whose role changed"
            );
            return;
        }
        Release::ClearDiagnostics | Release::Reset => {}
    }
    let shared = shared.clone();
    tokio::spawn(async move {
        if parking::clean(&mut b).await {
            shared.metrics.backend_cleanup(verdict == Release::Reset);
            b.return_idle();
        } else {
            debug!(
                backend = b.id.0,
                "closing backend connection that failed cleanup"
            );
        }
    });
}

/// First wait after the server refused a new backend as full (doubling up
/// to [`SERVER_FULL_RETRY_MAX`]).
const SERVER_FULL_RETRY: Duration = Duration::from_millis(20);
const SERVER_FULL_RETRY_MAX: Duration = Duration::from_millis(500);

/// The back-off of a session whose new backend the server refused as full
/// (`check_or_dial` passes the refusal on): it waits for one of the pool's
/// own backends, within its queue timeout.
pub(super) struct FullBackoff(Duration);

impl FullBackoff {
    pub(super) fn new() -> Self {
        Self(SERVER_FULL_RETRY)
    }

    /// True when `e` is such a refusal and another wait fits before
    /// `deadline`.
    pub(super) fn may_wait(&self, e: &ErrPacket, deadline: Instant) -> bool {
        errors::is_connection_limit(e.code) && Instant::now() + self.0 < deadline
    }

    /// Sleeps the current step and doubles it (up to the maximum).
    pub(super) async fn wait(&mut self) {
        tokio::time::sleep(self.0).await;
        self.0 = (self.0 * 2).min(SERVER_FULL_RETRY_MAX);
    }
}

/// Applies the `@@warning_count` of a [`READ_LAST_INSERT_ID`] row (its
/// second cell: errors, warnings and notes in the diagnostics area, which
/// a query of no table leaves as it is) to the backend's mark, as soon as
/// it is read (what runs after it may mark the area again): an empty area
/// needs no cleanup before anyone else gets the backend — the mark an
/// error or a warning left would otherwise stay through every later
/// statement of the session (they clear the server's area, not the mark)
/// and park the backend at every transaction end; a non-empty one needs
/// it, whatever the bookkeeping thought.
fn note_warning_count(marks: &mut authority::BackendMarks, row: &[Option<String>]) {
    if let Some(n) = row
        .get(1)
        .and_then(|c| c.as_deref())
        .and_then(|c| c.parse::<u64>().ok())
    {
        marks.diagnostics = n > 0;
    }
}

/// `SELECT LAST_INSERT_ID(), @@warning_count` as a COM_QUERY payload,
/// written as is behind the statement that ends a transaction (no
/// allocation per transaction); its text alone when asked after one.
const READ_LAST_INSERT_ID: &[u8] = b"\x03SELECT LAST_INSERT_ID(), @@warning_count";
const _: () = assert!(READ_LAST_INSERT_ID[0] == COM_QUERY);

/// True for a COM_QUERY that is exactly `COMMIT` or `ROLLBACK` (any case,
/// surrounding blanks, one trailing `;`): a statement that ends the
/// transaction and runs nothing else, so a query sent right behind it sees
/// the session as the transaction left it.
fn ends_transaction_plainly(payload: &[u8]) -> bool {
    let Some((&COM_QUERY, sql)) = payload.split_first() else {
        return false;
    };
    let sql = sql.trim_ascii();
    let sql = sql.strip_suffix(b";").unwrap_or(sql).trim_ascii_end();
    sql.eq_ignore_ascii_case(b"commit") || sql.eq_ignore_ascii_case(b"rollback")
}

/// `s` as a single-quoted SQL string literal.
/// The held-lock check: for each confirmed lock (by its bytes) whether
/// this connection holds it; for each lock argument the query just ran
/// (the client's text, copied byte for byte) whether this connection holds
/// it, and the bytes the server keys it by, in hex.
fn lock_check_query(held: &[Vec<u8>], pending: &[Vec<u8>]) -> Vec<u8> {
    let mut q = b"SELECT ".to_vec();
    let mut first = true;
    let mut sep = |q: &mut Vec<u8>| {
        if !std::mem::take(&mut first) {
            q.extend_from_slice(b", ");
        }
    };
    for n in held {
        sep(&mut q);
        q.extend_from_slice(b"IS_USED_LOCK(X'");
        crate::sql::push_hex_upper(&mut q, n);
        q.extend_from_slice(b"')=CONNECTION_ID()");
    }
    for lit in pending {
        sep(&mut q);
        q.extend_from_slice(b"IS_USED_LOCK(");
        q.extend_from_slice(lit);
        q.extend_from_slice(b")=CONNECTION_ID(), HEX(");
        q.extend_from_slice(lit);
        q.push(b')');
    }
    q
}

/// Bytes of a hex string as HEX() writes it; `None` when it is not one.
pub(super) fn unhex(s: &str) -> Option<Vec<u8>> {
    let s = s.as_bytes();
    if !s.len().is_multiple_of(2) {
        return None;
    }
    s.chunks(2)
        .map(|p| {
            let d = |c: u8| (c as char).to_digit(16);
            Some((d(p[0])? * 16 + d(p[1])?) as u8)
        })
        .collect()
}

/// A query that changed sql_mode and then went on: the lexer stops trusting
/// the rest (the server lexes it with the new mode). The session now knows
/// the new mode, so the statements after the change are lexed again with
/// it. `None` when that does not give a complete reading, or one with
/// another number of statements than the `results` the server sent (a
/// later change of the mode read the text otherwise: several changes).
fn relex_after_mode_change(
    sql: &[u8],
    results: u32,
    analysis: &Analysis,
    before: crate::sql::LexOptions,
    after: crate::sql::LexOptions,
) -> Option<Analysis> {
    let k = analysis.statements.iter().position(|s| {
        s.effects.iter().any(|e| {
            matches!(e, Effect::SetVariable { name, scope, .. }
                if name.as_slice() == b"sql_mode" && *scope != crate::sql::Scope::Global)
        })
    })?;
    let rest_start = analysis.statements.get(k + 1)?.span.start;
    let head = crate::sql::analyze(sql.get(..analysis.statements[k].span.end)?, before);
    let rest = crate::sql::analyze(sql.get(rest_start..)?, after);
    let ran = |a: &Analysis| {
        a.statements
            .iter()
            .filter(|s| s.kind != Kind::Empty)
            .count()
    };
    if head.incomplete || rest.incomplete || ran(&head) + ran(&rest) != results as usize {
        return None;
    }
    let mut statements = head.statements;
    statements.extend(rest.statements.into_iter().map(|mut s| {
        s.span = s.span.start + rest_start..s.span.end + rest_start;
        s
    }));
    Some(Analysis {
        statements,
        incomplete: false,
    })
}

impl Session {
    /// [`command_analysis`]; a query whose digest is counted gets it on the
    /// same pass over its text (see `digest::record_digest`).
    fn command_analysis(&mut self, payload: &[u8], lex: crate::sql::LexOptions) -> Analysis {
        match payload.split_first() {
            Some((&COM_QUERY, sql))
                if std::mem::take(&mut self.digest_pass) && self.digest_lex == Some(lex) =>
            {
                let buf = std::mem::take(&mut self.digest_buf);
                let (analysis, text, hash) = crate::sql::analyze_with_digest(sql, lex, buf);
                self.digest_buf = text;
                self.query_digest = Some(hash);
                analysis
            }
            _ => command_analysis(payload, &lex),
        }
    }
}

/// What the command's text does, for the authority. Queries are lexed;
/// COM_INIT_DB is a schema change; other commands have no text effects
/// (a state change they cause stays unexplained: fail closed).
fn command_analysis(payload: &[u8], opts: &crate::sql::LexOptions) -> Analysis {
    match payload.first() {
        Some(&COM_QUERY) => crate::sql::analyze(&payload[1..], *opts),
        Some(&COM_INIT_DB) => Analysis {
            statements: vec![Statement {
                span: 0..0,
                kind: Kind::Use,
                effects: vec![Effect::Use {
                    schema: payload[1..].to_vec(),
                }],
                conditional: false,
            }],
            incomplete: false,
        },
        _ => Analysis {
            statements: Vec::new(),
            incomplete: false,
        },
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
    for i in 0..n {
        let reply = backend.read_internal_reply(Shape::Query).await?;
        let is_option = plan.set_option.is_some() && i == usize::from(plan.init_db.is_some());
        match reply {
            InternalReply::Ok { .. } => {
                if is_option && let Some(on) = plan.set_option {
                    backend.state.multi_statements = on;
                }
            }
            InternalReply::Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    Ok(first_err)
}

pub(super) fn queue_timeout_err(msg: &str) -> ErrPacket {
    ErrPacket::new(errors::ER_QUERY_INTERRUPTED, "70100", msg)
}

/// The status flags of a new server session from `@@global.autocommit` and
/// `@@global.sql_mode` (the server's `THD::init`).
fn new_session_status(row: &[Option<String>]) -> u16 {
    let mut flags = 0;
    if row.first().and_then(|v| v.as_deref()) == Some("1") {
        flags |= status::AUTOCOMMIT;
    }
    let mode = row.get(1).and_then(|v| v.as_deref()).unwrap_or("");
    flags | authority::sql_mode_status(mode)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_bare_commit_or_rollback_ends_a_transaction_plainly() {
        let q = |sql: &str| [&[COM_QUERY][..], sql.as_bytes()].concat();
        for yes in ["COMMIT", "commit", " Rollback ;", "\nCOMMIT;\n"] {
            assert!(ends_transaction_plainly(&q(yes)), "{yes:?}");
        }
        for no in [
            "COMMIT AND CHAIN",
            "ROLLBACK TO SAVEPOINT a",
            "COMMIT; SELECT 1",
            "/* c */ COMMIT",
            "COMMIT;;",
            "SELECT 1",
            "",
        ] {
            assert!(!ends_transaction_plainly(&q(no)), "{no:?}");
        }
        assert!(!ends_transaction_plainly(&[3]));
        assert!(!ends_transaction_plainly(&[]));
        assert!(!ends_transaction_plainly(b"\x17COMMIT"));
    }

    fn row(autocommit: &str, mode: &str) -> Vec<Option<String>> {
        vec![Some(autocommit.into()), Some(mode.into())]
    }

    #[test]
    fn new_session_status_follows_the_globals() {
        assert_eq!(
            new_session_status(&row("1", "STRICT_TRANS_TABLES")),
            status::AUTOCOMMIT
        );
        assert_eq!(new_session_status(&row("0", "")), 0);
        // ANSI expands to ANSI_QUOTES in the stored value; a mode whose
        // name only contains the word does not count.
        assert_eq!(
            new_session_status(&row(
                "0",
                "REAL_AS_FLOAT,PIPES_AS_CONCAT,ANSI_QUOTES,IGNORE_SPACE,ANSI"
            )),
            status::ANSI_QUOTES
        );
        assert_eq!(
            new_session_status(&row("1", "NO_BACKSLASH_ESCAPES_X,NO_BACKSLASH_ESCAPES")),
            status::AUTOCOMMIT | status::NO_BACKSLASH_ESCAPES
        );
        assert_eq!(new_session_status(&[None, None]), 0);
    }

    #[test]
    fn lock_check_copies_the_clients_bytes() {
        let q = lock_check_query(&[b"caf\xe9".to_vec()], &[b"_latin1'a\\b'".to_vec()]);
        assert_eq!(
            q,
            b"SELECT IS_USED_LOCK(X'636166E9')=CONNECTION_ID(), \
              IS_USED_LOCK(_latin1'a\\b')=CONNECTION_ID(), HEX(_latin1'a\\b')"
                .to_vec()
        );
        assert_eq!(unhex("636166E9"), Some(b"caf\xe9".to_vec()));
        assert_eq!(unhex(""), Some(Vec::new()));
        assert_eq!(unhex("6"), None);
        assert_eq!(unhex("6G"), None);
    }
}
