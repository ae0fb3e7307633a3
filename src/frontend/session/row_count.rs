//! ROW_COUNT() under transaction pooling. The server's ROW_COUNT() is the
//! count its connection's previous statement left; after a statement the
//! proxy released the backend, so another client's statement may run there
//! before this client's next one. This module owns what the client's own
//! previous statement left (tracked from what the proxy relayed, as the
//! server sets it) and what a statement that reads it needs so that it
//! never reads another client's count: run on the session's held backend,
//! the known value written in as a literal, the shared backend first set to
//! the known value, or a refusal.
//!
//! Measured on MariaDB 10.11: after a command answered with an OK packet
//! ROW_COUNT() is that OK's affected rows (INSERT, UPDATE with and without
//! CLIENT_FOUND_ROWS, DELETE, REPLACE, ON DUPLICATE KEY UPDATE, SELECT …
//! INTO, CREATE … SELECT, DDL and SET (0), CALL (its final OK), EXECUTE,
//! COM_PING, COM_INIT_DB, COM_STMT_RESET, COM_CHANGE_USER, COM_RESET_CONNECTION);
//! after a result set or an error it is -1; COM_STMT_PREPARE, COM_STMT_CLOSE
//! and COM_STATISTICS leave it. Stored functions and triggers read the
//! caller's previous count too: they are not visible in the text (see
//! docs/compatibility.md).

use std::ops::Range;

use crate::sql::{Analysis, Effect, FuncKind, Kind, LexOptions};

/// What ROW_COUNT() returns after a relayed response, when the rule above
/// says it: `error` (the response ended with one), `last_affected` (the
/// last result's OK affected rows), `result_set` (a result set was sent).
pub fn after_response(error: bool, last_affected: Option<u64>, result_set: bool) -> Option<i64> {
    if error {
        Some(-1)
    } else if let Some(n) = last_affected {
        i64::try_from(n).ok()
    } else {
        result_set.then_some(-1)
    }
}

/// What ROW_COUNT() returns after a command `cmd` served from `before`,
/// given what its answer left (`now`, set by the paths that answered it):
/// statements and the commands measured to set it take `now`; commands
/// that leave it keep `before`; anything else is unknown.
pub fn after_command(cmd: Option<u8>, before: Option<i64>, now: Option<i64>) -> Option<i64> {
    use crate::protocol::command::*;
    match cmd {
        Some(COM_STMT_PREPARE | COM_STMT_CLOSE | COM_STMT_SEND_LONG_DATA | COM_STATISTICS) => {
            before
        }
        Some(
            COM_QUERY | COM_STMT_EXECUTE | COM_INIT_DB | COM_STMT_RESET | COM_PING
            | COM_RESET_CONNECTION | COM_CHANGE_USER,
        ) => now,
        _ => None,
    }
}

/// How the first statement of a query reads the previous statement's
/// count (later statements of a multi-statement read their predecessor's,
/// on the same backend).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reads {
    /// The ROW_COUNT() calls the text shows.
    pub calls: Vec<Range<usize>>,
    /// The calls' values go only into data (SET, INSERT, UPDATE, DELETE,
    /// REPLACE, DO, SELECT … INTO, CALL arguments), never into a result
    /// set's column definitions or a stored definition: a literal there is
    /// indistinguishable from the call.
    pub values_only: bool,
    /// Stored code or dynamic SQL runs (CALL, EXECUTE [IMMEDIATE], a
    /// compound statement), or the text could not be read to its end: its
    /// first statement may read the count without the text showing it.
    pub hidden: bool,
}

/// Cheap first look: only a text with one of these words can read the
/// previous statement's count in a way the proxy can see.
pub fn may_read(sql: &[u8]) -> bool {
    const WORDS: [&[u8]; 3] = [b"row_count", b"call", b"execute"];
    sql.iter().enumerate().any(|(i, c)| {
        matches!(c.to_ascii_lowercase(), b'r' | b'c' | b'e')
            && WORDS.iter().any(|w| {
                sql.get(i..i + w.len())
                    .is_some_and(|s| s.eq_ignore_ascii_case(w))
            })
    })
}

/// What the first statement of `analysis` (of `sql`) reads; `None` when
/// it cannot read the previous statement's count.
pub fn reads(sql: &[u8], analysis: &Analysis, opts: LexOptions) -> Option<Reads> {
    let Some(st) = analysis.statements.first() else {
        return analysis.incomplete.then(|| Reads {
            calls: Vec::new(),
            values_only: false,
            hidden: true,
        });
    };
    let calls: Vec<_> = st
        .effects
        .iter()
        .filter_map(|e| match e {
            Effect::Function(f) if f.kind == FuncKind::RowCount => Some(f.span.clone()),
            _ => None,
        })
        .collect();
    let hidden = analysis.incomplete
        || matches!(
            st.kind,
            Kind::Call | Kind::Execute | Kind::ExecuteImmediate | Kind::Compound
        );
    if calls.is_empty() && !hidden {
        return None;
    }
    let text = sql.get(st.span.clone()).unwrap_or_default();
    let set_statement = st
        .effects
        .iter()
        .any(|e| matches!(e, Effect::SetStatement { .. }));
    let values_only = !set_statement
        && !analysis.incomplete
        && match st.kind {
            Kind::Set | Kind::Update | Kind::Do | Kind::Call => true,
            Kind::Insert | Kind::Replace | Kind::Delete => {
                !top_level_word(text, b"returning", opts)
            }
            Kind::Select => top_level_word(text, b"into", opts),
            _ => false,
        };
    Some(Reads {
        calls,
        values_only,
        hidden,
    })
}

/// True when `word` appears outside parentheses in `text`.
fn top_level_word(text: &[u8], word: &[u8], opts: LexOptions) -> bool {
    let mut depth = 0u32;
    for t in crate::sql::lexer::Lexer::new(text, opts) {
        if t.is_symbol(text, b"(") {
            depth += 1;
        } else if t.is_symbol(text, b")") {
            depth = depth.saturating_sub(1);
        } else if depth == 0 && t.is_word(text, word) {
            return true;
        }
    }
    false
}

/// What to do with a statement that reads the count, on a backend the
/// session does not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// The text with each call replaced by the known value.
    Rewrite(Vec<u8>),
    /// Set the backend's count to `value` first (`text`: the statement,
    /// rewritten when it had calls to replace).
    Prime { value: i64, text: Option<Vec<u8>> },
    /// No way to give the client's own count.
    Refuse,
}

/// The plan for `reads` of `sql` given the count the client's previous
/// statement left (`known`); `rewritable` is false for a prepared
/// statement's text. A value other than 0 and -1 cannot be set on a
/// backend cheaply: stored code then starts from 0 (never another
/// client's count), and a visible call with it is refused unless a literal
/// can stand in for it.
pub fn plan(sql: &[u8], reads: &Reads, known: Option<i64>, rewritable: bool) -> Plan {
    let primeable = known.filter(|v| matches!(v, 0 | -1));
    let literal = known.filter(|_| rewritable && reads.values_only && !reads.calls.is_empty());
    let text = literal.and_then(|v| rewrite(sql, &reads.calls, v));
    if reads.hidden {
        if !reads.calls.is_empty() && text.is_none() && primeable.is_none() {
            return Plan::Refuse;
        }
        return Plan::Prime {
            value: primeable.unwrap_or(0),
            text,
        };
    }
    match (text, primeable) {
        (Some(t), _) => Plan::Rewrite(t),
        (None, Some(value)) => Plan::Prime { value, text: None },
        (None, None) => Plan::Refuse,
    }
}

/// `sql` with each of `calls` replaced by `value`; `None` when the spans
/// are out of order or bounds.
fn rewrite(sql: &[u8], calls: &[Range<usize>], value: i64) -> Option<Vec<u8>> {
    let lit = if value < 0 {
        format!("({value})")
    } else {
        value.to_string()
    };
    super::local::splice(sql, calls.to_vec(), lit.as_bytes())
}

/// The statement that leaves `value` (0 or -1) as a connection's count
/// without touching its diagnostics area (no table is read).
pub fn priming_query(value: i64) -> &'static str {
    if value < 0 { "SELECT 1" } else { "DO 0" }
}

/// The refusal: which statement, why, and what restores direct behaviour.
pub fn refused() -> crate::protocol::packets::ErrPacket {
    crate::protocol::packets::ErrPacket::new(
        1235,
        "42000",
        "This version of MariaDB doesn't yet support 'ROW_COUNT() of a previous statement \
         through myplex transaction pooling here (the statement may run on another \
         connection): read it with SELECT ROW_COUNT() alone, inside a transaction, or set \
         pool.mode = \"session\"'",
    )
}

impl super::Session {
    /// True when a statement may run as it is: the session holds the
    /// backend its previous statement ran on (a transaction, a pin, session
    /// mode), so what that backend's ROW_COUNT() says is the session's own.
    fn row_count_held(&self) -> bool {
        self.backend.is_some() || self.pins.has(crate::session_state::PinReason::SessionMode)
    }

    /// Decides how a query (`sql`) that may read the previous statement's
    /// ROW_COUNT() runs. `Ok(None)`: refused (the client has the error);
    /// `Ok(Some(text))`: forward it, rewritten when `text` is `Some`. A
    /// count to set on the backend first is left in `prime_row_count`.
    pub(super) async fn row_count_gate(
        &mut self,
        seq: u8,
        sql: &[u8],
    ) -> Result<Option<Option<Vec<u8>>>, super::End> {
        if self.row_count_held() || !may_read(sql) {
            return Ok(Some(None));
        }
        let lex = crate::session_state::authority::lex_options(&self.state, self.status);
        let mut analysis = crate::sql::analyze(sql, lex);
        analysis.incomplete |= !crate::session_state::authority::lexable_charset(&self.state);
        let Some(r) = reads(sql, &analysis, lex) else {
            return Ok(Some(None));
        };
        match plan(sql, &r, self.row_count, true) {
            Plan::Rewrite(t) => Ok(Some(Some(t))),
            Plan::Prime { value, text } => {
                self.prime_row_count = Some(value);
                Ok(Some(text))
            }
            Plan::Refuse => {
                self.send_err(seq, &refused()).await?;
                Ok(None)
            }
        }
    }

    /// The same for a prepared statement's text, which cannot be
    /// rewritten: true when it may run (after `prime_row_count`), false
    /// when it was refused.
    pub(super) async fn row_count_gate_prepared(
        &mut self,
        seq: u8,
        entry: &crate::prepared::StmtEntry,
    ) -> Result<bool, super::End> {
        let sql = &entry.key.sql[..];
        if self.row_count_held() || !may_read(sql) {
            return Ok(true);
        }
        let lex = crate::session_state::authority::lex_options(&self.state, self.status);
        let Some(r) = reads(sql, &entry.analysis(lex), lex) else {
            return Ok(true);
        };
        match plan(sql, &r, self.row_count, false) {
            Plan::Prime { value, .. } => {
                self.prime_row_count = Some(value);
                Ok(true)
            }
            Plan::Rewrite(_) | Plan::Refuse => {
                self.send_err(seq, &refused()).await?;
                Ok(false)
            }
        }
    }
}

/// Sets `backend`'s ROW_COUNT() to `value` (0 or -1, see [`priming_query`]).
pub async fn prime(
    backend: &mut crate::backend::BackendConn,
    value: i64,
) -> Result<(), crate::backend::BackendError> {
    if value < 0 {
        backend.query_row(priming_query(value)).await.map(|_| ())
    } else {
        backend.exec(priming_query(value)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(q: &str) -> Option<Reads> {
        let a = crate::sql::analyze(q.as_bytes(), LexOptions::default());
        reads(q.as_bytes(), &a, LexOptions::default())
    }

    #[test]
    fn after_response_as_the_server_sets_it() {
        assert_eq!(after_response(false, Some(5), true), Some(5));
        assert_eq!(after_response(false, Some(0), false), Some(0));
        assert_eq!(after_response(false, None, true), Some(-1));
        assert_eq!(after_response(true, Some(3), false), Some(-1));
        assert_eq!(after_response(false, None, false), None);
    }

    #[test]
    fn commands() {
        use crate::protocol::command::*;
        assert_eq!(after_command(Some(COM_QUERY), Some(3), Some(-1)), Some(-1));
        assert_eq!(after_command(Some(COM_QUERY), Some(3), None), None);
        assert_eq!(
            after_command(Some(COM_STMT_PREPARE), Some(3), Some(-1)),
            Some(3)
        );
        assert_eq!(after_command(Some(COM_STMT_CLOSE), Some(3), None), Some(3));
        assert_eq!(after_command(Some(COM_FIELD_LIST), Some(3), Some(0)), None);
        assert_eq!(after_command(None, Some(3), Some(-1)), None);
    }

    #[test]
    fn prefilter() {
        assert!(may_read(b"select Row_Count()"));
        assert!(may_read(b"CALL p()"));
        assert!(may_read(b"execute immediate concat('a')"));
        assert!(!may_read(b"UPDATE t SET a = 1"));
        assert!(!may_read(b"SELECT rowcount"));
    }

    #[test]
    fn classifies_readers() {
        assert_eq!(r("UPDATE t SET a = 1"), None);
        assert_eq!(r("SELECT 1; SELECT ROW_COUNT()"), None);
        assert_eq!(r("CREATE PROCEDURE p() SELECT ROW_COUNT()"), None);
        assert_eq!(r("SELECT 'ROW_COUNT()'"), None);
        let v = |q: &str| r(q).map(|x| (x.calls.len(), x.values_only, x.hidden));
        assert_eq!(v("SELECT ROW_COUNT()"), Some((1, false, false)));
        assert_eq!(
            v("SELECT ROW_COUNT() + 1, row_count()"),
            Some((2, false, false))
        );
        assert_eq!(v("SET @x = ROW_COUNT()"), Some((1, true, false)));
        assert_eq!(v("SELECT ROW_COUNT() INTO @x"), Some((1, true, false)));
        assert_eq!(
            v("SELECT (SELECT ROW_COUNT() INTO @y) AS x"),
            Some((1, false, false))
        );
        assert_eq!(
            v("INSERT INTO t VALUES (ROW_COUNT()); SELECT 1"),
            Some((1, true, false))
        );
        assert_eq!(
            v("INSERT INTO t VALUES (ROW_COUNT()) RETURNING a"),
            Some((1, false, false))
        );
        assert_eq!(
            v("DELETE FROM t WHERE a < ROW_COUNT()"),
            Some((1, true, false))
        );
        assert_eq!(
            v("CREATE TABLE c AS SELECT ROW_COUNT() AS n"),
            Some((1, false, false))
        );
        assert_eq!(v("CALL p()"), Some((0, true, true)));
        assert_eq!(v("call p(ROW_COUNT())"), Some((1, true, true)));
        assert_eq!(v("EXECUTE IMMEDIATE 'SELECT 1'"), Some((0, false, true)));
        assert_eq!(
            v("SET STATEMENT max_statement_time=1 FOR SELECT ROW_COUNT()"),
            Some((1, false, false))
        );
    }

    #[test]
    fn plans() {
        let p = |q: &str, known, rewritable| {
            let reads = r(q).expect("reads");
            plan(q.as_bytes(), &reads, known, rewritable)
        };
        let rw = |s: &str| Plan::Rewrite(s.as_bytes().to_vec());
        assert_eq!(p("SET @x = ROW_COUNT()", Some(5), true), rw("SET @x = 5"));
        assert_eq!(
            p(
                "INSERT INTO t VALUES (ROW_COUNT(), row_count ( ))",
                Some(-1),
                true
            ),
            rw("INSERT INTO t VALUES ((-1), (-1))")
        );
        assert_eq!(p("SET @x = ROW_COUNT()", None, true), Plan::Refuse);
        // A prepared statement's text cannot be rewritten.
        assert_eq!(p("SET @x = ROW_COUNT()", Some(5), false), Plan::Refuse);
        assert_eq!(
            p("SET @x = ROW_COUNT()", Some(0), false),
            Plan::Prime {
                value: 0,
                text: None
            }
        );
        // In a result set's column a literal would change the metadata.
        assert_eq!(p("SELECT ROW_COUNT() + 1", Some(7), true), Plan::Refuse);
        assert_eq!(
            p("SELECT ROW_COUNT() + 1", Some(-1), true),
            Plan::Prime {
                value: -1,
                text: None
            }
        );
        // Stored code always runs, from the client's count or from 0.
        assert_eq!(
            p("CALL p()", Some(4), true),
            Plan::Prime {
                value: 0,
                text: None
            }
        );
        assert_eq!(
            p("CALL p()", None, true),
            Plan::Prime {
                value: 0,
                text: None
            }
        );
        assert_eq!(
            p("CALL p()", Some(-1), true),
            Plan::Prime {
                value: -1,
                text: None
            }
        );
        assert_eq!(
            p("CALL p(ROW_COUNT())", Some(4), true),
            Plan::Prime {
                value: 0,
                text: Some(b"CALL p(4)".to_vec())
            }
        );
        assert_eq!(p("CALL p(ROW_COUNT())", None, true), Plan::Refuse);
        assert_eq!(p("CALL p(ROW_COUNT())", Some(4), false), Plan::Refuse);
    }
}
