//! ROW_COUNT() and FOUND_ROWS() under transaction pooling. The server's
//! ROW_COUNT() is the count its connection's previous statement left, and
//! FOUND_ROWS() the rows its last SELECT found; after a statement the proxy
//! released the backend, so another client's statement may run there
//! before this client's next one. This module owns what the client's own
//! previous statement left (ROW_COUNT() tracked from what the proxy
//! relayed, as the server sets it; FOUND_ROWS() is the session's
//! `found_rows`) and what a statement that reads either needs so that it
//! never reads another client's count: run on the session's held backend,
//! the known value written in as a literal, the shared backend first set to
//! the known value, or a refusal.
//!
//! FOUND_ROWS() (measured on MariaDB 10.11): a SELECT sets it (to the rows
//! it sent, without SQL_CALC_FOUND_ROWS); INSERT, UPDATE, DO and SET leave
//! it. `SELECT 1` leaves it at 1, `SELECT 1 FROM DUAL WHERE 0` at 0: the
//! two values a backend can be set to without reading a table.
//!
//! Measured on MariaDB 10.11: after a command answered with an OK packet
//! ROW_COUNT() is that OK's affected rows (INSERT, UPDATE with and without
//! CLIENT_FOUND_ROWS, DELETE, REPLACE, ON DUPLICATE KEY UPDATE, SELECT …
//! INTO, CREATE … SELECT, DDL and SET (0), CALL (its final OK), EXECUTE,
//! COM_PING, COM_INIT_DB, COM_STMT_RESET, COM_CHANGE_USER, COM_RESET_CONNECTION);
//! after a result set or an error it is -1; COM_STMT_PREPARE, COM_STMT_CLOSE
//! and COM_STATISTICS leave it. Stored functions, triggers and views read
//! the caller's previous counts too without the text showing it: the code
//! catalog names them (`CodeNames::reads_counts`), and a statement naming
//! one is treated as stored code (its counts set on the backend first).

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
    /// The FOUND_ROWS() calls the text shows.
    pub found_rows: Vec<Range<usize>>,
    /// A later statement of a multi-statement reads FOUND_ROWS() (a call,
    /// or stored code) before any SELECT of the query has set it: it reads
    /// the previous command's count too, and no literal stands in for it.
    pub later_found_rows: bool,
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
/// previous statement's counts in a way the proxy can see.
pub fn may_read(sql: &[u8]) -> bool {
    const WORDS: [&[u8]; 4] = [b"row_count", b"found_rows", b"call", b"execute"];
    sql.iter().enumerate().any(|(i, c)| {
        matches!(c.to_ascii_lowercase(), b'r' | b'f' | b'c' | b'e')
            && WORDS.iter().any(|w| {
                sql.get(i..i + w.len())
                    .is_some_and(|s| s.eq_ignore_ascii_case(w))
            })
    })
}

/// What the first statement of `analysis` (of `sql`) reads; `None` when
/// it cannot read the previous statement's count. `code_reads`: the text
/// names code that may read the counts without showing it (a view, a
/// function, a table's trigger: see `CodeNames::reads_counts`).
pub fn reads(sql: &[u8], analysis: &Analysis, opts: LexOptions, code_reads: bool) -> Option<Reads> {
    let Some(st) = analysis.statements.first() else {
        return (analysis.incomplete || code_reads).then(|| Reads {
            calls: Vec::new(),
            found_rows: Vec::new(),
            later_found_rows: false,
            values_only: false,
            hidden: true,
        });
    };
    let calls = calls_of(st, FuncKind::RowCount);
    let found_rows = calls_of(st, FuncKind::FoundRows);
    let runs_code = |s: &crate::sql::Statement| {
        matches!(
            s.kind,
            Kind::Call | Kind::Execute | Kind::ExecuteImmediate | Kind::Compound
        )
    };
    let mut hidden = analysis.incomplete || code_reads || runs_code(st);
    // Every statement sets ROW_COUNT(), only a SELECT sets FOUND_ROWS():
    // until one does, later statements read the previous command's. A
    // visible call there needs the count set on the backend; stored code
    // there is treated as stored code first (set where a prime can).
    let mut later_found_rows = false;
    if st.kind != Kind::Select && !hidden {
        for s in &analysis.statements[1..] {
            if !calls_of(s, FuncKind::FoundRows).is_empty() {
                later_found_rows = true;
                break;
            }
            if runs_code(s) {
                hidden = true;
                break;
            }
            if s.kind == Kind::Select {
                break;
            }
        }
    }
    if calls.is_empty() && found_rows.is_empty() && !hidden && !later_found_rows {
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
        found_rows,
        later_found_rows,
        values_only,
        hidden,
    })
}

/// The calls of `kind` the text of `st` shows.
fn calls_of(st: &crate::sql::Statement, kind: FuncKind) -> Vec<Range<usize>> {
    st.effects
        .iter()
        .filter_map(|e| match e {
            Effect::Function(f) if f.kind == kind => Some(f.span.clone()),
            _ => None,
        })
        .collect()
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

/// What the client's own previous statement left.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Known {
    /// ROW_COUNT() (`None`: not known).
    pub row_count: Option<i64>,
    /// FOUND_ROWS().
    pub found_rows: u64,
}

/// A statement that sets a backend's counts without reading a table (the
/// diagnostics area stays as it is).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prime {
    /// `DO 0`: ROW_COUNT() 0, FOUND_ROWS() left as it was.
    Zero,
    /// `SELECT 1`: ROW_COUNT() -1, FOUND_ROWS() 1.
    OneRow,
    /// `SELECT 1 FROM DUAL WHERE 0`: ROW_COUNT() -1, FOUND_ROWS() 0.
    NoRow,
    /// `SELECT 1` then `DO 0`: ROW_COUNT() 0, FOUND_ROWS() 1.
    ZeroOneRow,
    /// `SELECT 1 FROM DUAL WHERE 0` then `DO 0`: ROW_COUNT() 0,
    /// FOUND_ROWS() 0.
    ZeroNoRow,
}

impl Prime {
    const ALL: [Prime; 5] = [
        Prime::Zero,
        Prime::OneRow,
        Prime::NoRow,
        Prime::ZeroOneRow,
        Prime::ZeroNoRow,
    ];

    /// The statement that sets FOUND_ROWS(), if any.
    fn select(self) -> Option<&'static str> {
        match self {
            Prime::Zero => None,
            Prime::OneRow | Prime::ZeroOneRow => Some("SELECT 1"),
            Prime::NoRow | Prime::ZeroNoRow => Some("SELECT 1 FROM DUAL WHERE 0"),
        }
    }

    /// The statement that then sets ROW_COUNT() to 0, if any.
    fn zero(self) -> Option<&'static str> {
        match self {
            Prime::Zero | Prime::ZeroOneRow | Prime::ZeroNoRow => Some("DO 0"),
            Prime::OneRow | Prime::NoRow => None,
        }
    }

    /// ROW_COUNT() after it.
    fn row_count(self) -> i64 {
        match self.zero() {
            Some(_) => 0,
            None => -1,
        }
    }

    /// FOUND_ROWS() after it (`None`: the backend's, unchanged).
    fn found_rows(self) -> Option<u64> {
        match self {
            Prime::Zero => None,
            Prime::OneRow | Prime::ZeroOneRow => Some(1),
            Prime::NoRow | Prime::ZeroNoRow => Some(0),
        }
    }

    /// The first prime that leaves `row_count` and `found_rows` (each when
    /// asked for).
    fn leaving(row_count: Option<i64>, found_rows: Option<u64>) -> Option<Prime> {
        Self::ALL.into_iter().find(|p| {
            row_count.is_none_or(|v| p.row_count() == v)
                && found_rows.is_none_or(|f| p.found_rows() == Some(f))
        })
    }
}

/// What to do with a statement that reads the counts, on a backend the
/// session does not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// The text with each call replaced by the known value.
    Rewrite(Vec<u8>),
    /// Set the backend's counts first (`text`: the statement, rewritten
    /// when it had calls to replace).
    Prime { prime: Prime, text: Option<Vec<u8>> },
    /// No way to give the client's own counts.
    Refuse,
}

/// The plan for `reads` of `sql` given what the client's previous
/// statement left (`known`); `rewritable` is false for a prepared
/// statement's text. Only ROW_COUNT() 0 and -1 and FOUND_ROWS() 0 and 1
/// can be set on a backend cheaply: stored code then starts from
/// ROW_COUNT() 0 (never another client's count), and a visible call with
/// another value is refused unless a literal can stand in for it.
pub fn plan(sql: &[u8], reads: &Reads, known: Known, rewritable: bool) -> Plan {
    let visible = !reads.calls.is_empty() || !reads.found_rows.is_empty();
    let text = (rewritable && reads.values_only && visible)
        .then(|| rewrite(sql, reads, known))
        .flatten();
    if let Some(t) = &text
        && !reads.hidden
        && !reads.later_found_rows
    {
        return Plan::Rewrite(t.clone());
    }
    let left_calls = text.is_none() && !reads.calls.is_empty();
    let row_count = if left_calls || reads.hidden {
        match known.row_count.filter(|v| matches!(v, 0 | -1)) {
            Some(v) => Some(v),
            // Stored code with no visible call left starts from 0.
            None if !left_calls => Some(0),
            None => return Plan::Refuse,
        }
    } else {
        None
    };
    let found_rows = ((text.is_none() && !reads.found_rows.is_empty()) || reads.later_found_rows)
        .then_some(known.found_rows);
    // Stored code may read FOUND_ROWS() too: set it as well, to the
    // session's value where a prime can, else to 1 (a value of no one's:
    // never the backend's, which may be another client's).
    let prime = if reads.hidden && found_rows.is_none() {
        Prime::leaving(row_count, Some(known.found_rows)).or(Prime::leaving(row_count, Some(1)))
    } else {
        Prime::leaving(row_count, found_rows)
    };
    match prime {
        Some(prime) => Plan::Prime { prime, text },
        None => Plan::Refuse,
    }
}

/// `sql` with each call replaced by the known value; `None` when a
/// ROW_COUNT() call's value is not known or the spans are out of order or
/// bounds.
fn rewrite(sql: &[u8], reads: &Reads, known: Known) -> Option<Vec<u8>> {
    let row_count = match known.row_count {
        Some(v) if v < 0 => format!("({v})"),
        Some(v) => v.to_string(),
        None if reads.calls.is_empty() => String::new(),
        None => return None,
    };
    let found_rows = known.found_rows.to_string();
    let spans = reads
        .calls
        .iter()
        .map(|c| (c.clone(), row_count.as_bytes()))
        .chain(
            reads
                .found_rows
                .iter()
                .map(|c| (c.clone(), found_rows.as_bytes())),
        )
        .collect();
    super::local::splice_each(sql, spans)
}

/// The refusal: which statement, why, and what restores direct behaviour.
pub fn refused() -> crate::protocol::packets::ErrPacket {
    crate::protocol::packets::ErrPacket::new(
        1235,
        "42000",
        "This version of MariaDB doesn't yet support 'ROW_COUNT() or FOUND_ROWS() of a previous \
         statement through myplex transaction pooling here (the statement may run on another \
         connection): read it with SELECT ROW_COUNT() or SELECT FOUND_ROWS() alone, inside a \
         transaction, or set pool.mode = \"session\"'",
    )
}

impl super::Session {
    /// Whether `sql`, run in the session's schema, names code that may read
    /// the counts the backend's previous statement left, as the set that
    /// judges says (`CodeCatalog::peek_settled`). With no set at all (no
    /// reading yet, `pool.code_catalog_refresh_ms = 0`, or readings that
    /// cannot see everything) such code is not known: documented (setting a
    /// count on the backend before every statement naming a table would
    /// change the session's status counters and cost a round trip each).
    fn code_reads_counts(&self, sql: &[u8]) -> bool {
        let schema = self.state.schema.as_deref().unwrap_or_default();
        self.shared
            .pool
            .code_catalog
            .peek_settled(|n| n.reads_counts(sql, schema))
            .unwrap_or(false)
    }

    /// What the session's previous statement left.
    fn known_counts(&self) -> Known {
        Known {
            row_count: self.row_count,
            found_rows: self.found_rows,
        }
    }

    /// True when a statement may run as it is: the session holds the
    /// backend its previous statement ran on (a transaction, a pin, session
    /// mode), so what that backend's ROW_COUNT() and FOUND_ROWS() say is
    /// the session's own.
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
        if self.row_count_held() {
            return Ok(Some(None));
        }
        let code_reads = self.code_reads_counts(sql);
        if !code_reads && !may_read(sql) {
            return Ok(Some(None));
        }
        let lex = crate::session_state::authority::lex_options(&self.state, self.status);
        let mut analysis = crate::sql::analyze(sql, lex);
        analysis.incomplete |= !crate::session_state::authority::lexable_charset(&self.state);
        let Some(r) = reads(sql, &analysis, lex, code_reads) else {
            return Ok(Some(None));
        };
        match plan(sql, &r, self.known_counts(), true) {
            Plan::Rewrite(t) => Ok(Some(Some(t))),
            Plan::Prime { prime, text } => {
                self.prime_row_count = Some(prime);
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
        if self.row_count_held() {
            return Ok(true);
        }
        // Named in the schema it was prepared in; answered once per set.
        let code_reads = self
            .shared
            .pool
            .code_catalog
            .peek_settled(|n| entry.reads_counts(n))
            .unwrap_or(false);
        if !code_reads && !may_read(sql) {
            return Ok(true);
        }
        let lex = crate::session_state::authority::lex_options(&self.state, self.status);
        let analysis = entry.analysis(lex);
        let Some(r) = reads(sql, &analysis, lex, code_reads) else {
            return Ok(true);
        };
        match plan(sql, &r, self.known_counts(), false) {
            Plan::Prime { prime, .. } => {
                self.prime_row_count = Some(prime);
                Ok(true)
            }
            Plan::Rewrite(_) | Plan::Refuse => {
                self.send_err(seq, &refused()).await?;
                Ok(false)
            }
        }
    }
}

/// Sets `backend`'s counts as `prime` leaves them.
pub async fn prime(
    backend: &mut crate::backend::BackendConn,
    prime: Prime,
) -> Result<(), crate::backend::BackendError> {
    if let Some(q) = prime.select() {
        backend.query_row(q).await?;
    }
    if let Some(q) = prime.zero() {
        backend.exec(q).await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(q: &str) -> Option<Reads> {
        let a = crate::sql::analyze(q.as_bytes(), LexOptions::default());
        reads(q.as_bytes(), &a, LexOptions::default(), false)
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
            let known = Known {
                row_count: known,
                found_rows: 5,
            };
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
                prime: Prime::Zero,
                text: None
            }
        );
        // In a result set's column a literal would change the metadata.
        assert_eq!(p("SELECT ROW_COUNT() + 1", Some(7), true), Plan::Refuse);
        assert_eq!(
            p("SELECT ROW_COUNT() + 1", Some(-1), true),
            Plan::Prime {
                prime: Prime::OneRow,
                text: None
            }
        );
        // Stored code always runs, from the client's count or from 0.
        assert_eq!(
            p("CALL p()", Some(4), true),
            Plan::Prime {
                prime: Prime::ZeroOneRow,
                text: None
            }
        );
        assert_eq!(
            p("CALL p()", None, true),
            Plan::Prime {
                prime: Prime::ZeroOneRow,
                text: None
            }
        );
        assert_eq!(
            p("CALL p()", Some(-1), true),
            Plan::Prime {
                prime: Prime::OneRow,
                text: None
            }
        );
        assert_eq!(
            p("CALL p(ROW_COUNT())", Some(4), true),
            Plan::Prime {
                prime: Prime::ZeroOneRow,
                text: Some(b"CALL p(4)".to_vec())
            }
        );
        assert_eq!(p("CALL p(ROW_COUNT())", None, true), Plan::Refuse);
        assert_eq!(p("CALL p(ROW_COUNT())", Some(4), false), Plan::Refuse);
    }

    #[test]
    fn found_rows_plans() {
        let p = |q: &str, row_count, found_rows, rewritable| {
            let reads = r(q).expect("reads");
            let known = Known {
                row_count,
                found_rows,
            };
            plan(q.as_bytes(), &reads, known, rewritable)
        };
        let rw = |s: &str| Plan::Rewrite(s.as_bytes().to_vec());
        assert_eq!(r("SELECT 'FOUND_ROWS()'"), None);
        assert!(may_read(b"SELECT Found_Rows() + 1"));
        // Where values only feed data: the literal.
        assert_eq!(p("SET @x = FOUND_ROWS()", None, 7, true), rw("SET @x = 7"));
        assert_eq!(
            p(
                "INSERT INTO t VALUES (ROW_COUNT(), FOUND_ROWS())",
                Some(2),
                7,
                true
            ),
            rw("INSERT INTO t VALUES (2, 7)")
        );
        // In a result set's column: set on the backend when it can be.
        let prime = |prime| Plan::Prime { prime, text: None };
        assert_eq!(
            p("SELECT FOUND_ROWS() + 1", None, 1, true),
            prime(Prime::OneRow)
        );
        assert_eq!(
            p("SELECT FOUND_ROWS() + 1", None, 0, true),
            prime(Prime::NoRow)
        );
        assert_eq!(p("SELECT FOUND_ROWS() + 1", None, 7, true), Plan::Refuse);
        assert_eq!(
            p("SELECT ROW_COUNT(), FOUND_ROWS()", Some(-1), 1, true),
            prime(Prime::OneRow)
        );
        // Two statements set both (a SELECT, then DO 0).
        assert_eq!(
            p("SELECT ROW_COUNT(), FOUND_ROWS()", Some(0), 1, true),
            prime(Prime::ZeroOneRow)
        );
        assert_eq!(
            p("SELECT ROW_COUNT(), FOUND_ROWS()", Some(0), 2, true),
            Plan::Refuse
        );
        // A prepared statement: never rewritten.
        assert_eq!(p("SET @x = FOUND_ROWS()", None, 7, false), Plan::Refuse);
        assert_eq!(
            p("SET @x = FOUND_ROWS()", None, 0, false),
            prime(Prime::NoRow)
        );
        // A later statement reads the previous command's count until a
        // SELECT of the query sets it.
        assert_eq!(r("SELECT 1; SELECT FOUND_ROWS()"), None);
        assert_eq!(r("DO 0; SELECT 1; SELECT FOUND_ROWS()"), None);
        assert_eq!(p("DO 0; SELECT FOUND_ROWS()", None, 3, true), Plan::Refuse);
        assert_eq!(
            p("DO 0; SELECT FOUND_ROWS()", None, 1, true),
            prime(Prime::OneRow)
        );
        assert_eq!(
            p("SET @a = FOUND_ROWS(); SELECT FOUND_ROWS()", None, 0, true),
            Plan::Prime {
                prime: Prime::NoRow,
                text: Some(b"SET @a = 0; SELECT FOUND_ROWS()".to_vec())
            }
        );
        // Stored code later in the query: set where a prime can, never
        // refused for it.
        // (FOUND_ROWS() 4 cannot be set: 1, no one's, rather than the
        // backend's, which may be another client's.)
        assert_eq!(
            p("UPDATE t SET a = 1; CALL p()", Some(0), 4, true),
            prime(Prime::ZeroOneRow)
        );
        assert_eq!(
            p("UPDATE t SET a = 1; CALL p()", Some(-1), 0, true),
            prime(Prime::NoRow)
        );
        // Stored code: FOUND_ROWS() set too where a prime can.
        assert_eq!(p("CALL p()", Some(-1), 0, true), prime(Prime::NoRow));
        assert_eq!(p("CALL p()", Some(-1), 9, true), prime(Prime::OneRow));
        assert_eq!(p("CALL p()", Some(0), 0, true), prime(Prime::ZeroNoRow));
        assert_eq!(p("CALL p()", Some(0), 1, true), prime(Prime::ZeroOneRow));
        assert_eq!(p("CALL p()", Some(0), 7, true), prime(Prime::ZeroOneRow));
    }

    #[test]
    fn code_the_text_does_not_show_reads_the_sessions_counts() {
        let a = crate::sql::analyze(b"SELECT rc FROM v", LexOptions::default());
        assert_eq!(
            reads(b"SELECT rc FROM v", &a, LexOptions::default(), false),
            None
        );
        let r = reads(b"SELECT rc FROM v", &a, LexOptions::default(), true).expect("reads");
        assert!(r.hidden && r.calls.is_empty());
        let known = |row_count, found_rows| Known {
            row_count,
            found_rows,
        };
        let plan_of = |k| match plan(b"SELECT rc FROM v", &r, k, true) {
            Plan::Prime { prime, text: None } => prime,
            other => panic!("{other:?}"),
        };
        assert_eq!(plan_of(known(Some(-1), 1)), Prime::OneRow);
        assert_eq!(plan_of(known(Some(-1), 0)), Prime::NoRow);
        assert_eq!(plan_of(known(Some(0), 1)), Prime::ZeroOneRow);
        // A count no statement can set: 0 and 1, never the backend's.
        assert_eq!(plan_of(known(Some(3), 57)), Prime::ZeroOneRow);
        assert_eq!(plan_of(known(None, 0)), Prime::ZeroNoRow);
    }
}
