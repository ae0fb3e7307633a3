//! Queries of 16 MiB or more, forwarded as they arrive: only the first
//! [`PREFIX`] bytes are kept (for the statement's kind), the rest passes
//! from the client's socket to the backend's in pieces of a few hundred
//! KiB, so a 100 MiB `INSERT` never sits in the proxy's memory. The
//! analysis of such a query is incomplete by construction, so the session
//! is pinned to its backend as holding unknown state (until it disconnects
//! or resets with COM_RESET_CONNECTION / COM_CHANGE_USER), and the backend
//! is reset before anyone else gets it. A size past the server's `max_allowed_packet` gets the
//! server's 1153 when the chunk that crosses it arrives, as directly.
//!
//! KILL must never reach the server with a server thread id: the prefix
//! is planned like any query (anything it says about KILL refuses the
//! query), and the rest is scanned as it passes ([`TailGuard`]): the words
//! KILL, PREPARE or IMMEDIATE outside strings and comments (anywhere, in a
//! character set the lexer cannot read) stop the forwarding before the
//! packet is complete on the backend, which is then closed, so the server
//! never runs it; the client gets ER_NOT_SUPPORTED_YET.
//!
//! Owns the large-query path of the command loop; reading and forwarding
//! the bytes is [`crate::wire::packet_io`]'s.

use tokio::time::Instant;

use super::{End, Session, kill};
use crate::protocol::command::COM_QUERY;
use crate::protocol::errors;
use crate::protocol::response::Shape;
use crate::sql::scan::{Mode, WordScan};
use crate::wire::WireError;
use crate::wire::large::Guard;
use crate::wire::packet_io::{LargeStart, PumpError, Sink};

/// Scans a large query's text as it is forwarded (see the module doc).
struct TailGuard(WordScan);

impl Guard for TailGuard {
    fn allow(&mut self, piece: &[u8], last: bool) -> bool {
        self.0.feed(piece);
        let found = if last {
            self.0.finish()
        } else {
            self.0.found()
        };
        found.is_empty()
    }
}

/// How much of a large query is read before it is forwarded.
pub const PREFIX: usize = 64 * 1024;

impl Session {
    /// Runs a COM_QUERY of 16 MiB or more whose first bytes are in `l`.
    pub(super) async fn large_query(&mut self, mut l: LargeStart, max: usize) -> Result<(), End> {
        let started = Instant::now();
        self.cmd_started = started;
        self.stmt_wait = None;
        self.last_is_rollback = false;
        self.diagnostic_stmt = false;
        // A KILL must never reach the server with a server thread id.
        let allow = || self.allow_unplanned_kill();
        let refused = match kill::plan_for(&l.prefix[1..], &self.state, self.status, allow) {
            Some(_) => Some("KILL in a statement of 16 MiB or more"),
            None => self.stored_code_may_kill(&l.prefix[1..]).await,
        };
        if let Some(what) = refused {
            let last = self.drain(&mut l, max).await?;
            return self
                .send_err(last.wrapping_add(1), &kill::refused(what))
                .await;
        }
        // Errors of the wait are sent once the client has sent everything
        // (its reply's sequence id follows its last chunk).
        self.swallowed = Some(None);
        let co = self.checkout(0).await;
        let kept = self.swallowed.take().flatten();
        let mut co = match co? {
            Some(co) => co,
            None => {
                let last = self.drain(&mut l, max).await?;
                if let Some(e) = kept {
                    self.send_err(last.wrapping_add(1), &e).await?;
                }
                return Ok(());
            }
        };
        if self.pending_begin {
            co = self.begin_now(co).await?;
        }
        let mode = if super::kill_dynamic::unsure_charset(&self.state) {
            Mode::Words
        } else {
            Mode::Quotes(crate::session_state::authority::lex_options(
                &self.state,
                self.status,
            ))
        };
        let mut guard = TailGuard(WordScan::new(mode));
        guard.0.feed(&l.prefix[1..]);
        l.write_start(&mut co.backend.io);
        let pumped = self
            .client
            .pump_large(&mut l, max, Sink::Guarded(&mut co.backend.io, &mut guard))
            .await;
        let last = match pumped {
            Ok(last) => last,
            Err(PumpError::Refused) => {
                // The backend holds part of the packet: closing it means
                // the server never runs the query.
                let was_pinned = co.was_pinned;
                drop(co);
                let last = self.drain(&mut l, max).await?;
                let e = kill::refused(
                    "KILL, PREPARE or EXECUTE IMMEDIATE past the first 64 KiB of a statement of 16 MiB or more",
                );
                self.send_err(last.wrapping_add(1), &e).await?;
                if was_pinned {
                    return Err(End::Fatal(
                        "backend holding session state was closed".into(),
                    ));
                }
                self.pins.clear_state();
                return Ok(());
            }
            Err(PumpError::Write(e)) => {
                let was_pinned = co.was_pinned;
                drop(co);
                let last = self.drain(&mut l, max).await?;
                let e = errors::backend_lost(&e.to_string());
                return self
                    .lost_backend(last.wrapping_add(1), &e, was_pinned)
                    .await;
            }
            Err(e) => {
                // The backend holds half a packet: it is closed.
                drop(co);
                return Err(self.pump_failed(e).await);
            }
        };
        self.streamed = true;
        let prefix = std::mem::take(&mut l.prefix);
        let seq = last.wrapping_add(1);
        if let Some((co, _)) = self.exchange(co, &prefix, seq, Shape::Query, None).await? {
            // The text past the prefix was never read: whatever it left on
            // the session (user variables, temporary tables, locks) is
            // unknown, so the session stays on this backend (fail closed).
            self.inv.unknown = true;
            self.sync_inventory_pins();
            self.finish(co.slot, co.backend);
        }
        self.handle
            .pins
            .store(self.pins.bits(), std::sync::atomic::Ordering::Relaxed);
        if let Some(wait) = self.stmt_wait {
            let total = self.answered_in(started);
            self.shared
                .metrics
                .statement(self.group.id, COM_QUERY, wait, total);
            self.user_slot
                .tenant()
                .statement(self.group.id, wait, total);
        }
        Ok(())
    }

    /// Reads and drops the rest of a large packet; returns the sequence id
    /// of its last chunk.
    async fn drain(&mut self, l: &mut LargeStart, max: usize) -> Result<u8, End> {
        match self.client.pump_large(l, max, Sink::Discard).await {
            Ok(last) => Ok(last),
            Err(e) => Err(self.pump_failed(e).await),
        }
    }

    /// The session's end after a failed read of a large packet (1153 sent
    /// first when it grew past the limit).
    async fn pump_failed(&mut self, e: PumpError) -> End {
        match e {
            PumpError::TooLarge | PumpError::Refused => self.read_failed(WireError::TooLarge).await,
            PumpError::Read(e) | PumpError::Write(e) => self.read_failed(e).await,
        }
    }
}
