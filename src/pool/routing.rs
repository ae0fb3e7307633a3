//! The read/write split (design §12, `[routing]`): the one place that
//! decides whether a statement may leave the primary for a replica, and
//! which replica. Everything here is pure; the session asks
//! [`reads_only`] about the statement, [`session_may_leave`] about itself,
//! and [`pick`] among the replicas [`super::servers::Servers::read_set`]
//! offers, then runs what was decided.
//!
//! It fails closed: anything not proven to only read, and to read nothing
//! that differs between servers other than the data, goes to the primary.
//! A statement may go to a replica only when
//! - the split is on, the session has no transaction, autocommit is on, and
//!   nothing pins it to a backend (no user variables, temporary tables,
//!   locks, prepared text, role, sequence value, diagnostics held …);
//! - it is one `SELECT` the lexer read completely, with no effect at all
//!   (no user-variable assignment, GET_LOCK, NEXTVAL, stored function or
//!   view/trigger code that is not known to be absent, LAST_INSERT_ID,
//!   ROW_COUNT, FOUND_ROWS, CONNECTION_ID, SQL_CALC_FOUND_ROWS);
//! - it has no word of a locking or writing clause (`FOR UPDATE`,
//!   `FOR SHARE`, `LOCK IN SHARE MODE`, `INTO`, `PROCEDURE`), reads no
//!   variable (`@x`, `@@x`: a replica's `@@read_only`, `@@server_id` are
//!   its own), names none of the server's own schemas
//!   (`information_schema`, `performance_schema`, `mysql`, `sys`) and calls
//!   none of the functions whose answer is the server's own state (named
//!   locks, replication positions, its version, its files);
//! - it does not carry the hint `myplex:primary` (in a comment:
//!   `/* myplex:primary */ SELECT …`; found anywhere in the text, so a
//!   string holding it also keeps the statement on the primary).
//!
//! Read-your-writes: a session that committed a write carries that write's
//! GTID (MariaDB's `last_gtid`, reported by the session tracker). A replica
//! whose applied position, as last learnt, covers it is taken as it is;
//! otherwise the read waits on the replica (`MASTER_GTID_WAIT`, at most
//! `routing.causal_wait_ms`) and goes to the primary when the wait fails.

use crate::sql::lexer::{Lexer, TokenKind};
use crate::sql::{Analysis, Kind, LexOptions};

/// Why a statement stayed on the primary (a metric label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Primary {
    /// The session holds state or a transaction, or autocommit is off.
    Session,
    /// The statement is not provably a plain read.
    Statement,
    /// `/* myplex:primary */`.
    Hint,
    /// No replica may take reads now.
    NoReplica,
    /// No replica had applied the session's last write in time.
    Causal,
}

impl Primary {
    /// Every reason, in the order of [`Primary::index`].
    pub const ALL: [Primary; 5] = [
        Primary::Session,
        Primary::Statement,
        Primary::Hint,
        Primary::NoReplica,
        Primary::Causal,
    ];

    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Primary::Session => "session",
            Primary::Statement => "statement",
            Primary::Hint => "hint",
            Primary::NoReplica => "no_replica",
            Primary::Causal => "causal",
        }
    }

    /// Position in [`Primary::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

/// The hint that keeps a statement on the primary.
pub const PRIMARY_HINT: &[u8] = b"myplex:primary";

/// Words that make a `SELECT` lock, write or run a procedure.
const CLAUSE_WORDS: [&[u8]; 5] = [b"for", b"lock", b"into", b"procedure", b"share"];

/// Schemas whose contents are the server's own (its threads, status,
/// grants as loaded, replication state).
const SERVER_SCHEMAS: [&[u8]; 4] = [
    b"information_schema",
    b"performance_schema",
    b"mysql",
    b"sys",
];

/// Built-in functions whose answer is the server's own state, not the
/// data: named locks, replication positions and waits, its version, its
/// files.
const SERVER_FUNCTIONS: [&[u8]; 14] = [
    b"is_free_lock",
    b"is_used_lock",
    b"master_pos_wait",
    b"master_gtid_wait",
    b"source_pos_wait",
    b"wait_for_executed_gtid_set",
    b"wait_until_sql_thread_after_gtids",
    b"binlog_gtid_pos",
    b"version",
    b"load_file",
    b"uuid_short",
    b"setval",
    b"lastval",
    b"nextval",
];

/// Whether the session may have a statement leave its backend's server:
/// no transaction, autocommit on, nothing pinned or parked.
pub fn session_may_leave(in_transaction: bool, autocommit: bool, pinned: bool) -> bool {
    !in_transaction && autocommit && !pinned
}

/// Whether `sql` (analysed as `analysis`, with the session-state
/// authority's marks of view and trigger code) only reads data, the same
/// on every server that has it: `Ok` or why not.
pub fn reads_only(sql: &[u8], analysis: &Analysis, lex: LexOptions) -> Result<(), Primary> {
    if contains_ignore_case(sql, PRIMARY_HINT) {
        return Err(Primary::Hint);
    }
    let [st] = analysis.statements.as_slice() else {
        return Err(Primary::Statement);
    };
    if analysis.incomplete || st.kind != Kind::Select || !st.effects.is_empty() || st.conditional {
        return Err(Primary::Statement);
    }
    let text = sql.get(st.span.clone()).ok_or(Primary::Statement)?;
    if names_server_state(text, lex) {
        return Err(Primary::Statement);
    }
    Ok(())
}

/// Whether `text` has a word of a locking or writing clause, reads a
/// variable, or names one of the server's own schemas or state functions
/// (or cannot be read completely): what a read on a replica would answer
/// otherwise than the primary (broad: a column named `version` counts too).
fn names_server_state(text: &[u8], lex: LexOptions) -> bool {
    let mut lexer = Lexer::new(text, lex);
    for t in lexer.by_ref() {
        let word = t.text(text);
        let named = |list: &[&[u8]]| list.iter().any(|w| word.eq_ignore_ascii_case(w));
        let denied = match t.kind {
            TokenKind::UserVar | TokenKind::SysVar => true,
            TokenKind::Word => {
                named(&CLAUSE_WORDS) || named(&SERVER_SCHEMAS) || named(&SERVER_FUNCTIONS)
            }
            // A quoted name is still a call of the built-in it names
            // (`` `IS_FREE_LOCK`('x') ``, `"VERSION"()` under ANSI_QUOTES).
            TokenKind::QuotedIdent => {
                let inner = word.get(1..word.len().saturating_sub(1)).unwrap_or(word);
                let quoted = |list: &[&[u8]]| list.iter().any(|w| inner.eq_ignore_ascii_case(w));
                quoted(&SERVER_SCHEMAS) || quoted(&SERVER_FUNCTIONS) || quoted(&CLAUSE_WORDS)
            }
            TokenKind::Symbol => word == b";",
            _ => false,
        };
        if denied {
            return true;
        }
    }
    lexer.incomplete()
}

/// Whether a view's definition (as the server stores it, every name
/// quoted) reads the server's own state: a call of one of its state
/// functions (a name followed by `(`) or a name in one of its own schemas
/// (a schema name followed by `.`). Narrower than the statement check: a
/// column named `version` or `lock` is a column here. Such a view is
/// counted as code (see `crate::session_state::code_names`), so that a
/// read through it never goes to a replica.
pub fn view_reads_server_state(definition: &[u8], lex: LexOptions) -> bool {
    let mut lexer = Lexer::new(definition, lex);
    let mut prev: Option<(TokenKind, &[u8])> = None;
    for t in lexer.by_ref() {
        let text = t.text(definition);
        if let Some((kind, word)) = prev {
            let inner = match kind {
                TokenKind::QuotedIdent => word.get(1..word.len().saturating_sub(1)).unwrap_or(word),
                TokenKind::Word => word,
                _ => &[][..],
            };
            let is = |list: &[&[u8]]| list.iter().any(|w| inner.eq_ignore_ascii_case(w));
            if (text == b"(" && is(&SERVER_FUNCTIONS)) || (text == b"." && is(&SERVER_SCHEMAS)) {
                return true;
            }
        }
        prev = Some((t.kind, text));
    }
    lexer.incomplete()
}

/// True for a schema whose contents are the server's own (a session whose
/// current schema is one of them reads them by unqualified names).
pub fn is_server_schema(schema: &[u8]) -> bool {
    SERVER_SCHEMAS
        .iter()
        .any(|w| schema.eq_ignore_ascii_case(w))
}

/// The GTID positions `a` and `b` merged: per replication domain, the
/// higher sequence number (what a session that made both writes must find
/// applied). `None` when either is not a MariaDB GTID list.
pub fn merge_gtids(a: &str, b: &str) -> Option<String> {
    let mut all: Vec<(u32, u32, u64)> = Vec::new();
    for g in a.split(',').chain(b.split(',')).map(str::trim) {
        if g.is_empty() {
            continue;
        }
        let mut it = g.split('-');
        let domain: u32 = it.next()?.parse().ok()?;
        let server: u32 = it.next()?.parse().ok()?;
        let seq: u64 = it.next()?.parse().ok()?;
        if it.next().is_some() {
            return None;
        }
        match all.iter_mut().find(|(d, _, _)| *d == domain) {
            Some(e) if e.2 < seq => *e = (domain, server, seq),
            Some(_) => {}
            None => all.push((domain, server, seq)),
        }
    }
    all.sort_unstable();
    if all.is_empty() {
        return None;
    }
    Some(
        all.iter()
            .map(|(d, s, n)| format!("{d}-{s}-{n}"))
            .collect::<Vec<_>>()
            .join(","),
    )
}

fn contains_ignore_case(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len())
        .any(|w| w.eq_ignore_ascii_case(needle))
}

/// A replica that may take reads now, with its applied GTID position as
/// last learnt (`None`: not known).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Its index in `backend.address`.
    pub server: usize,
    /// `@@gtid_current_pos` at its last check, or a position a wait proved.
    pub applied: Vec<String>,
}

/// Where a read goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pick {
    /// Replica `server`; `wait_for`: the GTID to wait for on it first.
    Replica {
        /// Its index in `backend.address`.
        server: usize,
        /// The session's last write, not known applied there.
        wait_for: Option<String>,
    },
    /// The primary, and why.
    Primary(Primary),
}

/// The replica for a read among `candidates` (in order from `turn`, so
/// that reads spread over them), given the GTID of the session's last
/// write (`causal`, when read-your-writes is on): the first that has
/// applied it, else the first to wait on.
pub fn pick(candidates: &[Candidate], causal: Option<&str>, turn: usize) -> Pick {
    if candidates.is_empty() {
        return Pick::Primary(Primary::NoReplica);
    }
    let n = candidates.len();
    let order = (0..n).map(|k| &candidates[(turn + k) % n]);
    let Some(gtid) = causal else {
        let c = &candidates[turn % n];
        return Pick::Replica {
            server: c.server,
            wait_for: None,
        };
    };
    for c in order {
        if c.applied.iter().any(|p| gtid_covers(p, gtid)) {
            return Pick::Replica {
                server: c.server,
                wait_for: None,
            };
        }
    }
    if parse_gtids(gtid).is_none() {
        // Not a MariaDB GTID: nothing to wait for it with.
        return Pick::Primary(Primary::Causal);
    }
    Pick::Replica {
        server: candidates[turn % n].server,
        wait_for: Some(gtid.to_string()),
    }
}

/// MariaDB GTIDs `domain-server-sequence`, separated by commas (a
/// position lists one per domain); `None` when any is not one, or there
/// is none (an empty position: nothing to wait for, nothing proved).
fn parse_gtids(s: &str) -> Option<Vec<(u32, u64)>> {
    let all: Vec<(u32, u64)> = s
        .split(',')
        .map(str::trim)
        .filter(|g| !g.is_empty())
        .map(|g| {
            let mut it = g.split('-');
            let domain = it.next()?.parse().ok()?;
            let _server: u32 = it.next()?.parse().ok()?;
            let seq = it.next()?.parse().ok()?;
            it.next().is_none().then_some((domain, seq))
        })
        .collect::<Option<_>>()?;
    (!all.is_empty()).then_some(all)
}

/// True for a MariaDB GTID list a replica can be asked to wait for.
pub fn is_gtid_list(s: &str) -> bool {
    parse_gtids(s).is_some()
}

/// True when a server at GTID position `position` has applied every GTID
/// of `wanted` (per replication domain, its sequence number is at least
/// the wanted one). Anything unreadable covers nothing.
pub fn gtid_covers(position: &str, wanted: &str) -> bool {
    let (Some(pos), Some(want)) = (parse_gtids(position), parse_gtids(wanted)) else {
        return false;
    };
    want.iter()
        .all(|(d, n)| pos.iter().any(|(pd, pn)| pd == d && pn >= n))
}

/// The statement that waits on a replica for `gtid` at most `timeout_ms`
/// (MariaDB): answers 0 when applied, -1 when the time ran out; `None`
/// when `gtid` is not a GTID list (nothing is sent then).
pub fn wait_statement(gtid: &str, timeout_ms: u64) -> Option<String> {
    parse_gtids(gtid)?;
    Some(format!(
        "SELECT MASTER_GTID_WAIT('{gtid}', {}.{:03})",
        timeout_ms / 1000,
        timeout_ms % 1000
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(sql: &str) -> Result<(), Primary> {
        let a = crate::sql::analyze(sql.as_bytes(), LexOptions::default());
        reads_only(sql.as_bytes(), &a, LexOptions::default())
    }

    #[test]
    fn plain_reads_may_leave_the_primary() {
        for sql in [
            "SELECT 1",
            "SELECT c FROM sbtest1 WHERE id = 5",
            "select sum(k) from t where id between 1 and 100",
            "SELECT DISTINCT c FROM t WHERE id BETWEEN 1 AND 10 ORDER BY c",
            "/* app */ SELECT a FROM t JOIN u ON t.id = u.id",
            "SELECT 'for update' FROM t",
            "SELECT `format` FROM t",
            "(SELECT a FROM t) UNION (SELECT b FROM u)",
        ] {
            assert_eq!(check(sql), Ok(()), "{sql}");
        }
    }

    #[test]
    fn anything_else_stays_on_the_primary() {
        for sql in [
            "SELECT * FROM t FOR UPDATE",
            "SELECT * FROM t WHERE id = 1 LOCK IN SHARE MODE",
            "SELECT * FROM t FOR SHARE",
            "SELECT * FROM t /*!50000 FOR UPDATE */",
            "SELECT a INTO @x FROM t",
            "SELECT a FROM t INTO OUTFILE '/tmp/x'",
            "SELECT @x",
            "SELECT @@read_only",
            "SELECT @@server_id, a FROM t",
            "SELECT GET_LOCK('a', 0)",
            "SELECT IS_USED_LOCK('a')",
            "SELECT IS_FREE_LOCK('a')",
            "SELECT NEXTVAL(s)",
            "SELECT NEXT VALUE FOR s",
            "SELECT LASTVAL(s)",
            "SELECT my_function(a) FROM t",
            "SELECT db.f()",
            "SELECT LAST_INSERT_ID()",
            "SELECT ROW_COUNT()",
            "SELECT FOUND_ROWS()",
            "SELECT CONNECTION_ID()",
            "SELECT SQL_CALC_FOUND_ROWS * FROM t LIMIT 1",
            "SELECT VERSION()",
            "SELECT * FROM information_schema.PROCESSLIST",
            "SELECT * FROM `performance_schema`.threads",
            "SELECT user FROM mysql.user",
            "SELECT MASTER_GTID_WAIT('0-1-1', 1)",
            "SELECT LOAD_FILE('/etc/passwd')",
            "SELECT 1; SELECT 2",
            "INSERT INTO t VALUES (1)",
            "UPDATE t SET a = 1",
            "SHOW PROCESSLIST",
            "DO 1",
            "SET @x = 1",
            "CALL p()",
            "WITH x AS (SELECT 1) SELECT * FROM x",
            "SELECT 'unterminated",
            "SELECT `IS_FREE_LOCK`('x')",
            "SELECT `version`()",
            "SELECT `LOAD_FILE`('/etc/hostname')",
            "SELECT a FROM t `for` UPDATE",
        ] {
            assert_eq!(check(sql), Err(Primary::Statement), "{sql}");
        }
        // Under ANSI_QUOTES a double-quoted name is one too.
        let ansi = LexOptions {
            ansi_quotes: true,
            ..Default::default()
        };
        let sql = b"SELECT \"VERSION\"()";
        let a = crate::sql::analyze(sql, ansi);
        assert_eq!(reads_only(sql, &a, ansi), Err(Primary::Statement));
        let sql = b"SELECT \"a\" FROM t";
        let a = crate::sql::analyze(sql, ansi);
        assert_eq!(reads_only(sql, &a, ansi), Ok(()), "a plain column");
        assert_eq!(
            check("/* myplex:primary */ SELECT 1"),
            Err(Primary::Hint),
            "the hint"
        );
        assert_eq!(check("SELECT 1 /* MyPlex:Primary */"), Err(Primary::Hint));
    }

    #[test]
    fn view_and_trigger_code_keeps_a_read_on_the_primary() {
        // The authority marks statements that may run stored code (a view
        // calling a function) when the catalog is unknown: fail closed.
        let sql = b"SELECT a FROM v";
        let mut a = std::borrow::Cow::Owned(crate::sql::analyze(sql, LexOptions::default()));
        crate::session_state::authority::mark_code_names(&mut a, sql, b"test", None);
        assert_eq!(
            reads_only(sql, &a, LexOptions::default()),
            Err(Primary::Statement)
        );
    }

    #[test]
    fn only_an_idle_autocommit_session_may_leave() {
        assert!(session_may_leave(false, true, false));
        assert!(!session_may_leave(true, true, false));
        assert!(!session_may_leave(false, false, false));
        assert!(!session_may_leave(false, true, true));
    }

    #[test]
    fn gtid_positions_cover_per_domain() {
        assert!(gtid_covers("0-1-10", "0-1-10"));
        assert!(gtid_covers("0-1-11", "0-1-10"));
        assert!(!gtid_covers("0-1-9", "0-1-10"));
        // The server id does not order GTIDs within a domain.
        assert!(gtid_covers("0-2-12", "0-1-10"));
        assert!(gtid_covers("0-1-5,1-1-20", "1-3-20"));
        assert!(!gtid_covers("0-1-50", "1-1-1"), "another domain");
        assert!(gtid_covers("0-1-5, 1-1-20", "0-1-5,1-1-19"));
        assert!(!gtid_covers("0-1-5,1-1-20", "0-1-5,1-1-21"));
        // Unreadable (MySQL's UUID sets, empty, garbage) covers nothing.
        assert!(!gtid_covers(
            "3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5",
            "0-1-1"
        ));
        assert!(!gtid_covers("0-1-5", ""));
        assert!(!gtid_covers("", "0-1-1"));
        assert!(!gtid_covers("0-1-x", "0-1-1"));
        assert!(!gtid_covers("0-1-5-6", "0-1-1"));
    }

    #[test]
    fn picks_spread_and_honour_the_sessions_last_write() {
        let c = |server, applied: &[&str]| Candidate {
            server,
            applied: applied.iter().map(|s| s.to_string()).collect(),
        };
        assert_eq!(pick(&[], None, 0), Pick::Primary(Primary::NoReplica));
        let two = [c(1, &["0-1-10"]), c(2, &["0-1-20"])];
        let at = |server, wait_for: Option<&str>| Pick::Replica {
            server,
            wait_for: wait_for.map(String::from),
        };
        assert_eq!(pick(&two, None, 0), at(1, None));
        assert_eq!(pick(&two, None, 1), at(2, None));
        assert_eq!(pick(&two, None, 2), at(1, None));
        // Only server 2 has the write: taken whatever the turn.
        assert_eq!(pick(&two, Some("0-1-15"), 0), at(2, None));
        // Neither has it: wait on the one whose turn it is.
        assert_eq!(pick(&two, Some("0-1-25"), 1), at(2, Some("0-1-25")));
        // A position proved by an earlier wait counts.
        let proved = [c(1, &["0-1-10", "0-1-25"])];
        assert_eq!(pick(&proved, Some("0-1-25"), 0), at(1, None));
        // A GTID that cannot be waited for: the primary.
        assert_eq!(
            pick(&two, Some("3E11FA47-71CA-11E1-9E33-C80AA9429562:7"), 0),
            Pick::Primary(Primary::Causal)
        );
    }

    #[test]
    fn views_over_the_servers_state_are_told_from_plain_ones() {
        let reads = |d: &str| view_reads_server_state(d.as_bytes(), LexOptions::default());
        assert!(!reads(
            "select `t`.`id` AS `id`,`t`.`version` AS `version`,`t`.`lock` AS `lock` from `test`.`t`"
        ));
        assert!(reads("select is_free_lock('cron') AS `f`"));
        assert!(reads("select `IS_USED_LOCK`('x') AS `u`"));
        assert!(reads(
            "select `information_schema`.`PROCESSLIST`.`ID` AS `ID` from `information_schema`.`PROCESSLIST`"
        ));
        assert!(reads("select version() AS `v`"));
        assert!(!reads("select `mysql` AS `m` from `t`"));
    }

    #[test]
    fn positions_merge_per_domain() {
        assert_eq!(merge_gtids("0-1-5", "0-1-7").as_deref(), Some("0-1-7"));
        assert_eq!(merge_gtids("0-1-9", "0-2-7").as_deref(), Some("0-1-9"));
        assert_eq!(
            merge_gtids("1-1-3,0-1-5", "0-1-4").as_deref(),
            Some("0-1-5,1-1-3")
        );
        assert_eq!(merge_gtids("", "2-1-1").as_deref(), Some("2-1-1"));
        assert_eq!(merge_gtids("", ""), None);
        assert_eq!(merge_gtids("0-1-5", "uuid:1-5"), None);
        assert!(is_server_schema(b"INFORMATION_SCHEMA") && !is_server_schema(b"shop"));
    }

    #[test]
    fn the_wait_statement_quotes_only_a_gtid_list() {
        assert_eq!(
            wait_statement("0-1-25,1-2-3", 100).as_deref(),
            Some("SELECT MASTER_GTID_WAIT('0-1-25,1-2-3', 0.100)")
        );
        assert_eq!(
            wait_statement("0-1-2", 2500).as_deref(),
            Some("SELECT MASTER_GTID_WAIT('0-1-2', 2.500)")
        );
        assert_eq!(wait_statement("0-1-2'); DROP TABLE t; --", 100), None);
        assert_eq!(wait_statement("", 100), None, "nothing to wait for");
        assert!(!is_gtid_list("") && !is_gtid_list("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5"));
    }
}
