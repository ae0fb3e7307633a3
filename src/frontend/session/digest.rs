//! Counting a finished statement in the digest table
//! (`crate::metrics::digests`): which text it had (a COM_QUERY's own, a
//! prepared statement's prepare text), under which lex options, and the
//! figures its reply showed (rows, affected rows, warnings, error), as the
//! relay saw them — no row is decoded for it.
//!
//! Owns that bookkeeping only. Statements of 16 MiB or more (streamed to
//! the backend as they arrive, see `large`) are not counted.

use std::time::Duration;

use super::Session;
use crate::frontend::relay::Outcome;
use crate::metrics::digests::Execution;
use crate::protocol::command::{COM_QUERY, COM_STMT_BULK_EXECUTE, COM_STMT_EXECUTE};
use crate::sql::LexOptions;

/// A session's digest scratch buffer is given back above this capacity
/// (an idle session holds little).
const KEEP_BUFFER: usize = 4096;

/// What the reply of the current command showed.
#[derive(Clone, Debug, Default)]
pub(super) struct Figures {
    /// The session's schema when the command started (empty: none).
    schema: Vec<u8>,
    error: bool,
    warnings: u16,
    rows_sent: u64,
    affected: u64,
}

impl Figures {
    /// The figures of a relayed reply to a command that started in
    /// `schema`.
    pub(super) fn of(out: &Outcome, schema: Vec<u8>) -> Self {
        Self {
            schema,
            error: out.error.is_some(),
            warnings: out.warnings,
            rows_sent: out.rows_sent,
            affected: out.affected,
        }
    }
}

/// True for the commands counted per digest.
pub(super) fn counted(cmd: Option<u8>) -> bool {
    matches!(
        cmd,
        Some(COM_QUERY | COM_STMT_EXECUTE | COM_STMT_BULK_EXECUTE)
    )
}

impl Session {
    /// Counts the command just answered (`payload`, lexed under `lex` as
    /// it was before the command ran) in the digest table.
    pub(super) fn record_digest(
        &mut self,
        payload: &[u8],
        lex: LexOptions,
        wait: Duration,
        total: Duration,
        max_text_bytes: usize,
    ) {
        let Some(figures) = self.stmt_figures.take() else {
            return;
        };
        let mut scratch = std::mem::take(&mut self.digest_buf);
        let entry = match payload.first() {
            Some(&(COM_STMT_EXECUTE | COM_STMT_BULK_EXECUTE)) => self
                .client_stmt_id(payload)
                .and_then(|id| self.stmts.get(&id))
                .map(|s| s.entry.clone()),
            _ => None,
        };
        let (digest, text) = match (&entry, payload.first()) {
            (Some(e), _) => e.digest(lex, &mut scratch),
            (None, Some(&COM_QUERY)) => {
                // Built with the query's analysis when it ran; otherwise
                // (answered without a backend) lexed now.
                let hash = match self.query_digest.take() {
                    Some(hash) => hash,
                    None => crate::sql::digest::digest_into(&payload[1..], lex, &mut scratch),
                };
                (hash, &scratch[..])
            }
            _ => {
                self.digest_buf = scratch;
                return;
            }
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        self.shared.digests.record(
            &Execution {
                user: &self.user.name,
                schema: &figures.schema,
                digest,
                text,
                group: self.group.id,
                latency_us: total.as_micros() as u64,
                queue_wait_us: wait.as_micros() as u64,
                error: figures.error,
                warnings: u64::from(figures.warnings),
                rows_sent: figures.rows_sent,
                rows_affected: figures.affected,
                now,
            },
            max_text_bytes,
        );
        if scratch.capacity() > KEEP_BUFFER {
            scratch = Vec::new();
        }
        self.digest_buf = scratch;
    }
}
