//! The deferred `BEGIN` (`pool.defer_begin`): a plain `BEGIN` from a
//! session that holds nothing is answered by the proxy, and the server
//! receives it in the same write as the transaction's first statement.
//! A `BEGIN` may come as a query or as the execution of a prepared
//! statement whose text is a plain `BEGIN` (sysbench prepares its `BEGIN`
//! and `COMMIT`); each form's answer is learnt from that form.
//!
//! Why: through a transaction pool a `BEGIN` would lease a backend and
//! hold it across one more client round trip, and cost the server one more
//! command (a wake-up of its thread) per transaction. Deferred, the
//! backend is leased at the first statement, and the server reads `BEGIN`
//! and that statement from its socket in one go.
//!
//! Exactness: the answer is the server's own. The proxy answers a `BEGIN`
//! only after this session's last plain `BEGIN` went to the server and its
//! OK carried nothing but status flags, and only while nothing that shapes
//! that OK has changed since: the status flags before it, the session's
//! `transaction_read_only`, and the client's transaction tracker. A
//! session holding anything (a backend, a pin, a transaction) sends its
//! `BEGIN` as before. A `BEGIN` cannot fail on a clean backend but by the
//! connection's loss; if its OK is anything else the session ends, as a
//! lost connection inside a transaction does.

use bytes::BytesMut;

use tracing::warn;

use super::execute::Checkout;
use super::{End, Session};
use crate::backend::{BackendConn, InternalReply};
use crate::protocol::packets::{ok_payload, status};
use crate::protocol::response::Shape;

/// `BEGIN` as a COM_QUERY payload (what is sent ahead of the first
/// statement).
pub(super) const BEGIN: &[u8] = b"\x03BEGIN";
const _: () = assert!(BEGIN[0] == crate::protocol::command::COM_QUERY);

/// The form a plain `BEGIN` came in (each form's answer is learnt from
/// that form).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Via {
    /// COM_QUERY.
    Query = 0,
    /// COM_STMT_EXECUTE of a prepared plain `BEGIN`.
    Execute = 1,
}

/// What a plain `BEGIN` of this session answered, and under what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Learnt {
    /// The session's status flags before it.
    before: u16,
    /// The status flags of the server's OK.
    after: u16,
    /// The session's `transaction_read_only` then (it decides
    /// SERVER_STATUS_IN_TRANS_READONLY).
    read_only: Option<String>,
}

/// True for a COM_QUERY text that is exactly `BEGIN`, `BEGIN WORK` or
/// `START TRANSACTION` (any case, blanks around and between the words, one
/// trailing `;`): nothing else runs, no option, no comment.
pub(super) fn is_plain_begin(sql: &[u8]) -> bool {
    let sql = sql.trim_ascii();
    let sql = sql.strip_suffix(b";").unwrap_or(sql).trim_ascii_end();
    let mut words = sql.split(u8::is_ascii_whitespace).filter(|w| !w.is_empty());
    let (Some(a), b, None) = (words.next(), words.next(), words.next()) else {
        return false;
    };
    match b {
        None => a.eq_ignore_ascii_case(b"begin"),
        Some(b) => {
            (a.eq_ignore_ascii_case(b"begin") && b.eq_ignore_ascii_case(b"work"))
                || (a.eq_ignore_ascii_case(b"start") && b.eq_ignore_ascii_case(b"transaction"))
        }
    }
}

/// True for a COM_STMT_EXECUTE `payload` that runs `entry` as a plain
/// `BEGIN`: no parameters, no cursor, nothing after the fixed header.
pub(super) fn is_prepared_begin(entry: &crate::prepared::StmtEntry, payload: &[u8]) -> bool {
    payload.first() == Some(&crate::protocol::command::COM_STMT_EXECUTE)
        && payload.len() == 10
        && payload[5] == 0
        && entry.num_params == 0
        && entry.num_columns == 0
        && is_plain_begin(&entry.key.sql)
}

impl Session {
    /// The session's `transaction_read_only` as tracked.
    fn read_only_setting(&self) -> Option<&str> {
        self.state
            .vars
            .get("transaction_read_only")
            .or_else(|| self.state.vars.get("tx_read_only"))
            .map(String::as_str)
    }

    /// The client's own trackers would report a transaction's start.
    fn tracks_transactions(&self) -> bool {
        let t = self
            .own_trackers
            .as_deref()
            .unwrap_or(&self.shared.trackers);
        t.transaction_info || t.state_change
    }

    /// A `BEGIN` may be answered here at all (before looking at what was
    /// learnt): deferring is on, and the session holds nothing.
    pub(super) fn may_defer_begin(&self) -> bool {
        self.shared.config.load().pool.defer_begin
            && self.backend.is_none()
            && !self.pins.any()
            && self.status & status::IN_TRANS == 0
            && !self.tracks_transactions()
    }

    /// Answers a plain `BEGIN` query here when this session's last one
    /// showed what the server answers (see the module doc); true when
    /// answered.
    pub(super) async fn defer_begin(&mut self, seq: u8, sql: &[u8]) -> Result<bool, End> {
        if !is_plain_begin(sql) {
            return Ok(false);
        }
        self.answer_begin(seq, Via::Query).await
    }

    /// Answers a `BEGIN` (already known to be plain, in the form `via`)
    /// with what this session's last one in that form got, when nothing
    /// that shapes the answer changed since; true when answered.
    pub(super) async fn answer_begin(&mut self, seq: u8, via: Via) -> Result<bool, End> {
        if !self.may_defer_begin() {
            return Ok(false);
        }
        let Some(l) = self.begin_learnt[via as usize].as_ref() else {
            return Ok(false);
        };
        if l.before != self.status || l.read_only.as_deref() != self.read_only_setting() {
            return Ok(false);
        }
        let after = l.after;
        self.client.send_packet(seq, &answer(after)).await?;
        self.status = after & !status::TRANSIENT;
        self.pending_begin = true;
        self.txn_started = Some(self.cmd_started);
        self.stmt_wait = Some(std::time::Duration::ZERO);
        // The server's OK to BEGIN leaves ROW_COUNT() at 0.
        self.row_count_now = Some(0);
        self.shared.metrics.deferred_begin();
        Ok(true)
    }

    /// Sends a deferred `BEGIN` on its own and reads its answer (before a
    /// command that cannot share its write: a streamed one, a prepare, or
    /// on a compressed hop). When it fails the backend is abandoned (it may
    /// hold half a transaction) and the session ends.
    pub(super) async fn begin_now(&mut self, mut co: Checkout) -> Result<Checkout, End> {
        self.pending_begin = false;
        co.was_pinned = true;
        let sent = match co.backend.io.send_packet(0, BEGIN).await {
            Ok(_) => read_begin_reply(&mut co.backend).await,
            Err(e) => Err(End::Fatal(format!("deferred BEGIN: {e}"))),
        };
        if let Err(e) = sent {
            super::execute::abandon_backend(&self.shared, co);
            return Err(e);
        }
        self.pin(crate::session_state::PinReason::Transaction);
        Ok(co)
    }

    /// After a plain `BEGIN` (in the form `via`) went to the server from a
    /// session that could have deferred it: remembers the answer when it
    /// was just an OK.
    pub(super) fn learn_begin(
        &mut self,
        via: Via,
        before: u16,
        out: &crate::frontend::relay::Outcome,
    ) {
        let plain_ok = out.error.is_none()
            && out.results == 1
            && out.warnings == 0
            && out.affected == 0
            && out.last_insert_id.is_none()
            && out.columns.is_none()
            && out.state.is_empty()
            && !out.state_unreported;
        self.begin_learnt[via as usize] = match out.status {
            Some(after) if plain_ok && after & status::SESSION_STATE_CHANGED == 0 => Some(Learnt {
                before,
                after,
                read_only: self.read_only_setting().map(str::to_owned),
            }),
            _ => None,
        };
    }
}

/// Reads the server's answer to a deferred `BEGIN` sent ahead of a
/// command; anything but an OK ends the session.
pub(super) async fn read_begin_reply(backend: &mut BackendConn) -> Result<(), End> {
    match backend.read_internal_reply(Shape::Query).await {
        Ok(InternalReply::Ok { .. }) => Ok(()),
        Ok(InternalReply::Err(e)) => {
            warn!(
                code = e.code,
                "deferred begin failed on the server; session ended"
            );
            Err(End::Fatal(format!("deferred BEGIN failed: {}", e.message)))
        }
        Err(e) => Err(End::Fatal(format!("deferred BEGIN: {e}"))),
    }
}

/// The OK a deferred `BEGIN` gets: no rows, no insert id, no warnings, no
/// info, no session state; the flags the server's OK had.
fn answer(after: u16) -> BytesMut {
    let mut b = BytesMut::new();
    ok_payload(&mut b, 0, after, 0);
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_begins() {
        for q in [
            "BEGIN",
            "begin",
            " Begin ; ",
            "BEGIN WORK",
            "begin\twork;",
            "START TRANSACTION",
            "start  transaction ;",
        ] {
            assert!(is_plain_begin(q.as_bytes()), "{q}");
        }
        for q in [
            "BEGIN;;",
            "BEGIN NOT ATOMIC SELECT 1; END",
            "START TRANSACTION READ ONLY",
            "START TRANSACTION WITH CONSISTENT SNAPSHOT",
            "START TRANSACTION READ WRITE",
            "/* c */ BEGIN",
            "BEGIN /*!50000 WORK */",
            "BEGIN WORK WORK",
            "BEGINWORK",
            "START",
            "TRANSACTION",
            "COMMIT",
            "",
        ] {
            assert!(!is_plain_begin(q.as_bytes()), "{q}");
        }
    }

    #[test]
    fn the_answer_is_an_ok_with_the_learnt_flags() {
        assert_eq!(&answer(0x0003)[..], &[0, 0, 0, 3, 0, 0, 0]);
        assert_eq!(&answer(0x2203)[..], &[0, 0, 0, 3, 0x22, 0, 0]);
    }
}
