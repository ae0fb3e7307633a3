//! Cross-client leak matrix (issue 8 §D): a catalogue of state-changing
//! statements, each run by client A through a proxy whose pool has ONE
//! backend connection, after which client B -- a fresh login with other
//! capabilities -- runs a fixed set of probes whose output must equal the
//! same probes on a fresh direct connection with B's capabilities.
//!
//! Per entry, in order:
//! 1. the entry on a direct connection with A's capabilities (reference for
//!    A's own answers), then undone and closed;
//! 2. A runs the entry through the proxy: its answers must equal direct;
//! 3. B probes: equal to direct, or ER 1317 (queue timeout) when the entry
//!    may pin (`pins: true`: A legitimately still holds the only backend).
//!    A 1317 for a `pins: false` entry is an unexpected pin; any difference
//!    is a leak;
//! 4. A's witness (if any) shows A's own state survived B's probes;
//! 5. A undoes its state: answers equal direct, then B's probes must pass
//!    without 1317 (a 1317 here is a stuck pin);
//! 6. A disconnects: B's probes must pass again.
//!
//! A: CLIENT_MULTI_STATEMENTS, DEPRECATE_EOF, SESSION_TRACK,
//! utf8mb4_general_ci. B: DEPRECATE_EOF only (the capabilities of the pool
//! key's flavour must match for B to get A's backend), latin1_swedish_ci.
//! Both log in as the same user into the same schema (same pool key).
//!
//! The catalogue is a base list × wrappers (plain, after another statement
//! in a multi-statement, after a block / line / hash comment, inside
//! `/*!40101 */`, `/*! */` and `/*M!100100 */` executable comments, inside
//! `/*!50700 */` -- which MariaDB ignores as MySQL-only --, followed by an
//! error), plus binary-protocol state (an open cursor, pending
//! SEND_LONG_DATA, a prepared statement that leaves none); the full list
//! prints with `--nocapture`. One production-shaped MariaDB (binary log on) and one
//! proxy serve the whole matrix; the proxy (and whatever backend sessions it
//! left) is replaced after an entry that failed, so one failure does not
//! spill into the next entries. The test fails with the list of failing
//! entries and how they failed.

use crate::common;

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use common::mariadb::{APP_PASSWORD, APP_USER};
use common::raw::{
    BASE_CAPS, CURSOR_TYPE_NO_CURSOR, CURSOR_TYPE_READ_ONLY, DEPRECATE_EOF, Fetched,
    MULTI_STATEMENTS, Param, RawConn, Response, SESSION_TRACK, STATUS_AUTOCOMMIT, STATUS_IN_TRANS,
    TYPE_BLOB,
};
use common::{MariaDb, Proxy};

/// The matrix's schema (A's and B's login schema).
const SCHEMA: &str = "leakdb";
/// Short, so a pinned backend shows up quickly as ER 1317 for B: the
/// matrix spends most of its time waiting it out (at 1.5 s, 330 of its
/// 363 s). Five times the diagnostics hold, so a backend held for A's
/// warnings still reaches B well within it.
const QUEUE_TIMEOUT_MS: u64 = 500;
/// Short, so a statement's warnings do not hold the backend for long.
const DIAGNOSTICS_HOLD_MS: u64 = 100;
/// The proxy's queue-timeout error.
const ER_QUERY_INTERRUPTED: u16 = 1317;
/// SERVER_STATUS_IN_TRANS_READONLY.
const STATUS_IN_TRANS_READONLY: u16 = 0x2000;
/// Status bits that describe session state (others, like NO_INDEX_USED,
/// describe the statement).
const STATUS_MASK: u16 = STATUS_IN_TRANS | STATUS_AUTOCOMMIT | STATUS_IN_TRANS_READONLY;
/// Upper bound for one entry (a hanging peer fails the entry, not the run).
const ENTRY_LIMIT: Duration = Duration::from_secs(120);

/// Client A: multi-statements, DEPRECATE_EOF, session tracking.
const A_CAPS: u32 = BASE_CAPS | MULTI_STATEMENTS | DEPRECATE_EOF | SESSION_TRACK;
/// utf8mb4_general_ci.
const A_COLLATION: u8 = 45;
/// Client B: none of A's extras but DEPRECATE_EOF, which is part of the
/// backend's flavour (pool key): clients of different flavours never share
/// a backend connection, so B must have A's to get A's backend at all.
const B_CAPS: u32 = BASE_CAPS | DEPRECATE_EOF;
/// latin1_swedish_ci.
const B_COLLATION: u8 = 8;

/// The server-side id of the connection running the statement (not
/// CONNECTION_ID(), which the proxy may answer itself): the statement finds
/// itself in the processlist by the marker it contains.
macro_rules! self_id {
    () => {
        "(SELECT ID FROM information_schema.PROCESSLIST WHERE INFO LIKE '%lm-self-marker%' LIMIT 1)"
    };
}

/// Live (unlike information_schema.INNODB_TRX, a cache refreshed at most
/// every 100 ms); summarized by [`own_transaction`].
const INNODB_STATUS: &str = "SHOW ENGINE INNODB STATUS";

/// B's probes, each one COM_QUERY, in this order on every connection (the
/// diagnostics probes come first: anything else would overwrite them).
const PROBES: &[&str] = &[
    "SHOW WARNINGS",
    "SHOW ERRORS",
    "SELECT @@warning_count, @@error_count",
    // FOUND_ROWS() in a larger expression describes the backend
    // connection's previous statement, whoever ran it: not probed
    // (ROW_COUNT(): tests/row_count.rs). LAST_INSERT_ID() is exact.
    "SELECT LAST_INSERT_ID(), @@insert_id, @@last_insert_id",
    // Every user variable the catalogue sets.
    "SELECT @lm_a, @lm_b, @lm_c, @lm_e, @lm_p, @lm_f, @lm_q",
    // The active role (privileges) and the sequence value of this session.
    "SELECT CURRENT_ROLE()",
    "SELECT LASTVAL(leakdb.lm_seq), PREVIOUS VALUE FOR leakdb.lm_seq",
    "SELECT @@autocommit, DATABASE(), @@in_transaction, @@character_set_client, \
     @@character_set_connection, @@character_set_results, @@collation_connection",
    // Every session variable the catalogue touches.
    "SELECT @@session.sql_mode, @@session.time_zone, @@session.wait_timeout, \
     @@session.max_statement_time, @@session.sql_select_limit, @@session.group_concat_max_len, \
     @@session.div_precision_increment, @@session.lc_time_names",
    "SELECT @@session.foreign_key_checks, @@session.unique_checks, @@session.sql_safe_updates, \
     @@session.auto_increment_increment, @@session.lock_wait_timeout, \
     @@session.innodb_lock_wait_timeout, @@session.default_storage_engine, @@session.sql_notes, \
     @@session.gtid_domain_id",
    "SELECT @@session.sql_log_bin, @@session.max_join_size, @@session.sql_big_selects",
    // `@@last_gtid` (server-owned: the GTID of the backend connection's
    // last commit, whoever made it) is not probed: docs/compatibility.md,
    // "@@last_gtid".
    "SELECT @@tx_isolation, @@tx_read_only",
    // A fixed @@timestamp shows as a NOW() far from the wall clock.
    "SELECT @@timestamp > 1500000000, ABS(UNIX_TIMESTAMP(NOW()) - UNIX_TIMESTAMP(SYSDATE())) < 300",
    // Locks: free or used by someone (as direct sees them), and whether
    // this very connection holds them (it never should).
    concat!(
        "SELECT IS_FREE_LOCK('lm_lock'), IS_FREE_LOCK('lm_lock2'), IS_FREE_LOCK('lm_lock_p'), ",
        "IS_FREE_LOCK('lm_lock_f'), IS_FREE_LOCK(X'6C6D5F625C'), IS_FREE_LOCK('lm_lock_d'), ",
        "IFNULL(IS_USED_LOCK('lm_lock') = ",
        self_id!(),
        ", 0), IFNULL(IS_USED_LOCK('lm_lock2') = ",
        self_id!(),
        ", 0), IFNULL(IS_USED_LOCK('lm_lock_p') = ",
        self_id!(),
        ", 0), IFNULL(IS_USED_LOCK('lm_lock_d') = ",
        self_id!(),
        ", 0)"
    ),
    "SELECT * FROM leakdb.lm_tmp",
    "SELECT * FROM leakdb.lm_tmp_p",
    "EXECUTE lm_s",
    "EXECUTE lm_sp",
    "EXECUTE lm_dl",
    "HANDLER lm_h READ FIRST",
    // Refused for a client without CLIENT_MULTI_STATEMENTS.
    "SELECT 1; SELECT 2",
    // Transaction characteristics: is the next transaction read-only, which
    // isolation does it get (a consistent read under REPEATABLE READ makes a
    // read view and no row locks; SERIALIZABLE the opposite), is an XA
    // transaction or LOCK TABLES in the way.
    "START TRANSACTION",
    "SET STATEMENT lock_wait_timeout=2 FOR SELECT COUNT(*) FROM leakdb.lm_probe",
    INNODB_STATUS,
    "SET STATEMENT lock_wait_timeout=2 FOR INSERT INTO leakdb.lm_probe (v) VALUES (1)",
    "ROLLBACK",
    // Statement texts the backend connection recorded for whoever ran them
    // (empty on a fresh connection).
    "SHOW PROFILES",
    "SELECT COUNT(*) FROM information_schema.OPTIMIZER_TRACE",
];

/// How an entry's statement is embedded in what A sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wrap {
    Plain,
    /// `SELECT 1; <stmt>`
    AfterSelect,
    /// `/* c */ <stmt>`
    BlockComment,
    /// `-- c\n<stmt>`
    LineComment,
    /// `# c\n<stmt>`
    HashComment,
    /// `/*!40101 <stmt> */` (as mysqldump writes them)
    Executable,
    /// `/*! <stmt> */`
    BareExecutable,
    /// `/*!50700 <stmt> */`: MariaDB ignores MySQL 5.7+ version comments
    /// (50700-99999), so this is a plain comment there.
    MySqlOnly,
    /// `/*M!100100 <stmt> */`
    MariaExecutable,
    /// `<stmt>; SELECT * FROM nosuch`
    ErrorAfter,
    /// `SET @@session . sql_mode = …NO_BACKSLASH_ESCAPES; SELECT 'x\'; <stmt>; -- '`:
    /// read with the mode the query started with, `<stmt>` is inside a
    /// string; the server, whose mode the spaced SET changed, runs it.
    ModeHidden,
}

impl Wrap {
    fn apply(self, sql: &str) -> String {
        match self {
            Wrap::Plain => sql.to_string(),
            Wrap::AfterSelect => format!("SELECT 1; {sql}"),
            Wrap::BlockComment => format!("/* c */ {sql}"),
            Wrap::LineComment => format!("-- c\n{sql}"),
            Wrap::HashComment => format!("# c\n{sql}"),
            Wrap::Executable => format!("/*!40101 {sql} */"),
            Wrap::BareExecutable => format!("/*! {sql} */"),
            Wrap::MySqlOnly => format!("/*!50700 {sql} */"),
            Wrap::MariaExecutable => format!("/*M!100100 {sql} */"),
            Wrap::ErrorAfter => format!("{sql}; SELECT * FROM nosuch"),
            Wrap::ModeHidden => format!(
                "SET @@session . sql_mode = CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES'); \
                 SELECT 'x\\'; {sql}; -- '"
            ),
        }
    }

    fn label(self) -> &'static str {
        match self {
            Wrap::Plain => "plain",
            Wrap::AfterSelect => "multi",
            Wrap::BlockComment => "block-comment",
            Wrap::LineComment => "line-comment",
            Wrap::HashComment => "hash-comment",
            Wrap::Executable => "exec-comment",
            Wrap::BareExecutable => "bare-exec-comment",
            Wrap::MySqlOnly => "mysql-only-comment",
            Wrap::MariaExecutable => "mariadb-exec-comment",
            Wrap::ErrorAfter => "error-after",
            Wrap::ModeHidden => "mode-hidden",
        }
    }
}

use Wrap::*;

/// What A does: text statements, or binary-protocol state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `sql` as one COM_QUERY; `undo` and `witness` are text too.
    Text,
    /// COM_STMT_PREPARE `sql`, COM_STMT_EXECUTE opening a read-only cursor
    /// (rows not fetched). Witness: FETCH one row. Undo: COM_STMT_CLOSE.
    Cursor,
    /// COM_STMT_PREPARE `sql` (two parameters), SEND_LONG_DATA for the
    /// second. Witness: the EXECUTE that consumes it. Undo: COM_STMT_CLOSE.
    LongData,
    /// COM_STMT_PREPARE `sql` (one parameter), EXECUTE, CLOSE: no state.
    Binary,
}

const EVERY_WRAP: &[Wrap] = &[
    Plain,
    AfterSelect,
    BlockComment,
    LineComment,
    HashComment,
    Executable,
    BareExecutable,
    MariaExecutable,
    MySqlOnly,
    ErrorAfter,
    ModeHidden,
];
const MOST_WRAPS: &[Wrap] = &[
    Plain,
    AfterSelect,
    BlockComment,
    LineComment,
    Executable,
    ErrorAfter,
    ModeHidden,
];
const SOME_WRAPS: &[Wrap] = &[Plain, AfterSelect, ErrorAfter, ModeHidden];
const HARMLESS_WRAPS: &[Wrap] = &[Plain, AfterSelect, BlockComment, ErrorAfter];
const PLAIN: &[Wrap] = &[Plain];

/// Differences that cannot be made transparent under transaction pooling,
/// each with the `docs/compatibility.md` row that says so and what restores
/// direct behaviour: (entry name prefix, failure prefix, row). Nothing else
/// is excused; a failure of another kind in the same entry still fails.
const DOCUMENTED: &[(&str, &str, &str)] = &[
    // After a statement that may change how the server reads the rest of
    // the query (its sql_mode, its character set, text run by EXECUTE),
    // the rest is not read: the session is pinned until it resets (fail
    // closed). B is never shown A's state; A keeps its backend.
    (
        "[mode-hidden]",
        "unexpected pin",
        "a query read only in part … pinned until COM_RESET_CONNECTION",
    ),
    (
        "[mode-hidden]",
        "stuck pin",
        "a query read only in part … pinned until COM_RESET_CONNECTION",
    ),
    (
        "sql_mode",
        "unexpected pin",
        "a query read only in part … pinned until COM_RESET_CONNECTION",
    ),
    (
        "sql_mode",
        "stuck pin",
        "a query read only in part … pinned until COM_RESET_CONNECTION",
    ),
    (
        "dynamic SQL",
        "stuck pin",
        "a query read only in part … pinned until COM_RESET_CONNECTION",
    ),
    (
        "dynamic SQL",
        "unexpected pin",
        "a query read only in part … pinned until COM_RESET_CONNECTION",
    ),
    // Such a query with KILL, PREPARE or EXECUTE IMMEDIATE in its unread
    // part is refused whole.
    (
        "[mode-hidden]",
        "A's answer differs from direct:\n        via proxy ERR 1235",
        "a query read only in part … refused",
    ),
    (
        "dynamic SQL: PREPARE of GET_LOCK from a user variable, both dropped",
        "A's answer differs from direct:\n        via proxy ERR 1235",
        "a query read only in part … refused",
    ),
    (
        "dynamic SQL: EXECUTE IMMEDIATE of GET_LOCK from a user variable, dropped",
        "A's answer differs from direct:\n        via proxy ERR 1235",
        "a query read only in part … refused",
    ),
    (
        "[mode-hidden]",
        "A lost",
        "a query read only in part … refused",
    ),
    (
        "[mode-hidden]",
        "A's undo",
        "a query read only in part … refused",
    ),
    (
        "dynamic SQL: EXECUTE IMMEDIATE of a _gbk",
        "A lost",
        "SET STATEMENT … FOR a CALL or dynamic SQL",
    ),
    (
        "dynamic SQL: EXECUTE IMMEDIATE of a _gbk",
        "A's undo",
        "SET STATEMENT … FOR a CALL or dynamic SQL",
    ),
    // `SET STATEMENT … FOR` stored code or dynamic SQL: what it leaves is
    // reset with the statement (fail closed), as the session's own too.
    (
        "SET STATEMENT … FOR CALL",
        "A lost",
        "SET STATEMENT … FOR a CALL or dynamic SQL",
    ),
    (
        "SET STATEMENT … FOR CALL",
        "A's undo",
        "SET STATEMENT … FOR a CALL or dynamic SQL",
    ),
    (
        "SET STATEMENT … FOR EXECUTE",
        "A lost",
        "SET STATEMENT … FOR a CALL or dynamic SQL",
    ),
    (
        "SET STATEMENT … FOR EXECUTE",
        "A's undo",
        "SET STATEMENT … FOR a CALL or dynamic SQL",
    ),
    // The server reports a bare "state changed" for what a procedure did;
    // nothing the client does afterwards can prove it gone.
    (
        "CALL creating a temporary table",
        "stuck pin",
        "state the text does not show … pinned until COM_RESET_CONNECTION",
    ),
    (
        "CALL setting a user variable",
        "stuck pin",
        "state the text does not show … pinned until COM_RESET_CONNECTION",
    ),
    (
        "CALL preparing a statement",
        "stuck pin",
        "state the text does not show … pinned until COM_RESET_CONNECTION",
    ),
    (
        "CALL of an INVOKER procedure setting a role",
        "stuck pin",
        "state the text does not show … pinned until COM_RESET_CONNECTION",
    ),
    (
        "CALL setting a session variable",
        "stuck pin",
        "state the text does not show … pinned until COM_RESET_CONNECTION",
    ),
    (
        "stored function setting a session variable",
        "stuck pin",
        "state the text does not show … pinned until COM_RESET_CONNECTION",
    ),
    (
        "CALL setting the character set and autocommit",
        "stuck pin",
        "state the text does not show … pinned until COM_RESET_CONNECTION",
    ),
    // A trigger's `SET @v = …` is reported as a bare "state changed", as a
    // procedure's is.
    (
        "trigger setting a user variable",
        "stuck pin",
        "state the text does not show … pinned until COM_RESET_CONNECTION",
    ),
    (
        "INSERT through a plain view into a table with a trigger",
        "stuck pin",
        "state the text does not show … pinned until COM_RESET_CONNECTION",
    ),
    // The server reports the procedure's own sql_mode with a bare "state
    // changed", exactly as for a temporary table it would create.
    (
        "CALL with sql_mode inside",
        "unexpected pin",
        "state the text does not show … pinned until COM_RESET_CONNECTION",
    ),
    (
        "CALL with sql_mode inside",
        "stuck pin",
        "state the text does not show … pinned until COM_RESET_CONNECTION",
    ),
    // Invisible to the trackers and the text: the backend is reset when the
    // session lets go of it, which releases the lock.
    (
        "CALL taking GET_LOCK",
        "A lost or changed its state",
        "GET_LOCK taken inside a CALLed procedure",
    ),
    (
        "CALL taking GET_LOCK",
        "A's undo",
        "GET_LOCK taken inside a CALLed procedure",
    ),
    // A stored function's body is invisible: the backend is reset when the
    // session lets go of it, which ends what the function left (its lock,
    // its sequence value) for A too -- never handed to B.
    (
        "stored function taking GET_LOCK",
        "A lost or changed its state",
        "named locks and sequence values left by stored functions",
    ),
    (
        "stored function taking GET_LOCK",
        "A's undo",
        "named locks and sequence values left by stored functions",
    ),
    // EXECUTE of a text-prepared statement, and dynamic SQL from a
    // variable inside a multi-statement: what runs is the server's (a
    // prepared name may alias another, stored code may prepare it again),
    // so the statement is treated as stored code.
    (
        "dynamic SQL: PREPARE of GET_LOCK, EXECUTE, DEALLOCATE",
        "A lost or changed its state",
        "GET_LOCK taken inside a CALLed procedure",
    ),
    (
        "dynamic SQL: PREPARE of GET_LOCK, EXECUTE, DEALLOCATE",
        "A's undo",
        "GET_LOCK taken inside a CALLed procedure",
    ),
    (
        "dynamic SQL: PREPARE of GET_LOCK from a user variable, both dropped",
        "A lost or changed its state",
        "GET_LOCK taken inside a CALLed procedure",
    ),
    (
        "dynamic SQL: PREPARE of GET_LOCK from a user variable, both dropped",
        "A's undo",
        "GET_LOCK taken inside a CALLed procedure",
    ),
    (
        "dynamic SQL: EXECUTE IMMEDIATE of GET_LOCK from a user variable",
        "A lost or changed its state",
        "GET_LOCK taken inside a CALLed procedure",
    ),
    (
        "dynamic SQL: EXECUTE IMMEDIATE of GET_LOCK from a user variable",
        "A's undo",
        "GET_LOCK taken inside a CALLed procedure",
    ),
    (
        "stored function using a sequence",
        "A lost or changed its state",
        "named locks and sequence values left by stored functions",
    ),
    (
        "view ",
        "A lost or changed its state",
        "named locks and sequence values left by stored functions",
    ),
    (
        "view ",
        "A's undo",
        "named locks and sequence values left by stored functions",
    ),
    (
        "trigger ",
        "A lost or changed its state",
        "named locks and sequence values left by stored functions",
    ),
    (
        "trigger ",
        "A's undo",
        "named locks and sequence values left by stored functions",
    ),
    (
        "INSERT into a table whose column DEFAULT",
        "A lost or changed its state",
        "named locks and sequence values left by stored functions",
    ),
    (
        "INSERT through a plain view",
        "A lost or changed its state",
        "named locks and sequence values left by stored functions",
    ),
    (
        "INSERT through a plain view",
        "A's undo",
        "named locks and sequence values left by stored functions",
    ),
    // LASTVAL() holds until the session ends or resets: nothing A can run
    // gives it up, so the session keeps its backend.
    ("sequence ", "stuck pin", "NEXTVAL / SETVAL"),
    // ROW_COUNT() describes the previous statement of the backend
    // connection, which may have served another client since.
    (
        "",
        "A lost or changed its state (witness \"SELECT ROW_COUNT()",
        "ROW_COUNT() read in a later statement",
    ),
];

/// The compatibility-doc row that excuses `failure` of entry `name`.
fn documented(name: &str, failure: &str) -> Option<&'static str> {
    DOCUMENTED
        .iter()
        .find(|(entry, prefix, _)| {
            // `[wrap]` excuses that wrap of every entry.
            let named = if entry.starts_with('[') {
                name.ends_with(entry)
            } else {
                name.starts_with(entry)
            };
            named && failure.starts_with(prefix)
        })
        .map(|(_, _, why)| *why)
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

/// One catalogue line.
struct Base {
    name: &'static str,
    /// The statement (for `PLAIN`-only lines it may be a multi-statement).
    sql: &'static str,
    /// True when A may legitimately keep the backend while the state exists
    /// (B then gets 1317 instead of probing). False: the statement must not
    /// pin (harmless, or replayable state).
    pins: bool,
    /// What A runs to end the state (each one COM_QUERY).
    undo: &'static [&'static str],
    /// A query whose answer shows A's own state (compared with direct).
    witness: Option<&'static str>,
    wraps: &'static [Wrap],
    kind: Kind,
}

const fn pin(
    name: &'static str,
    sql: &'static str,
    undo: &'static [&'static str],
    witness: Option<&'static str>,
    wraps: &'static [Wrap],
) -> Base {
    Base {
        name,
        sql,
        pins: true,
        undo,
        witness,
        wraps,
        kind: Kind::Text,
    }
}

const fn free(
    name: &'static str,
    sql: &'static str,
    undo: &'static [&'static str],
    witness: Option<&'static str>,
    wraps: &'static [Wrap],
) -> Base {
    Base {
        name,
        sql,
        pins: false,
        undo,
        witness,
        wraps,
        kind: Kind::Text,
    }
}

const OWN_LOCK: &str = concat!("SELECT IS_USED_LOCK('lm_lock') = ", self_id!());
const OWN_LOCKS: &str = concat!(
    "SELECT IS_USED_LOCK('lm_lock') = ",
    self_id!(),
    ", IS_USED_LOCK('lm_lock2') = ",
    self_id!()
);
const OWN_PROC_LOCK: &str = concat!("SELECT IS_USED_LOCK('lm_lock_p') = ", self_id!());
const OWN_FUNC_LOCK: &str = concat!("SELECT IS_USED_LOCK('lm_lock_f') = ", self_id!());
/// The lock dynamic SQL (PREPARE / EXECUTE IMMEDIATE) takes.
const OWN_DYN_LOCK: &str = concat!("SELECT IS_USED_LOCK('lm_lock_d') = ", self_id!());
/// `lm_b\` (with its backslash), in hex: the same name under any sql_mode.
const OWN_BACKSLASH_LOCK: &str = concat!("SELECT IS_USED_LOCK(X'6C6D5F625C') = ", self_id!());
const ONE_SHOT_UNDO: &[&str] = &["START TRANSACTION", "COMMIT"];

/// State that may pin (issue 8 §A, design §4): user variables, locks, temp
/// tables, text PREPARE, XA, transactions, one-shot settings, state created
/// inside CALL, ...
const PINNING: &[Base] = &[
    pin(
        "user variable",
        "SET @lm_a = 'bob@example.com'",
        &["SET @lm_a = NULL"],
        Some("SELECT @lm_a"),
        EVERY_WRAP,
    ),
    pin(
        "user variable by SELECT :=",
        "SELECT @lm_b := 5",
        &["SET @lm_b = NULL"],
        Some("SELECT @lm_b"),
        PLAIN,
    ),
    pin(
        "user variable by := in a derived table EXPLAIN materialises",
        "EXPLAIN SELECT * FROM (SELECT @lm_b := 5 v) d",
        &["SET @lm_b = NULL"],
        Some("SELECT @lm_b"),
        PLAIN,
    ),
    pin(
        "user variable by SELECT INTO",
        "SELECT 7 INTO @lm_c",
        &["SET @lm_c = NULL"],
        Some("SELECT @lm_c"),
        SOME_WRAPS,
    ),
    pin(
        "user variable by EXECUTE IMMEDIATE",
        "EXECUTE IMMEDIATE 'SET @lm_e = 1'",
        &["SET @lm_e = NULL"],
        Some("SELECT @lm_e"),
        PLAIN,
    ),
    pin(
        "user and system variable in one SET",
        "SET @lm_a = 1, @@session.wait_timeout = 77",
        &["SET @lm_a = NULL, @@session.wait_timeout = DEFAULT"],
        Some("SELECT @lm_a, @@wait_timeout"),
        PLAIN,
    ),
    pin(
        "GET_LOCK",
        "SELECT GET_LOCK('lm_lock', 0)",
        &["SELECT RELEASE_LOCK('lm_lock')"],
        Some(OWN_LOCK),
        EVERY_WRAP,
    ),
    // MariaDB runs a derived table (and a constant subquery) while it
    // explains a statement: the lock is taken, the sequence moved, the
    // variable set, as if the statement ran.
    pin(
        "EXPLAIN of a derived table taking GET_LOCK",
        "EXPLAIN SELECT * FROM (SELECT GET_LOCK('lm_lock', 0) g) d",
        &["SELECT RELEASE_LOCK('lm_lock')"],
        Some(OWN_LOCK),
        PLAIN,
    ),
    pin(
        "DESC of a derived table taking GET_LOCK",
        "DESC SELECT * FROM (SELECT GET_LOCK('lm_lock', 0) g) d",
        &["SELECT RELEASE_LOCK('lm_lock')"],
        Some(OWN_LOCK),
        PLAIN,
    ),
    pin(
        "sequence NEXTVAL in a derived table EXPLAIN FORMAT=JSON materialises",
        "EXPLAIN FORMAT=JSON SELECT * FROM (SELECT NEXTVAL(lm_seq) n) d",
        &[],
        Some("SELECT LASTVAL(lm_seq) > 0"),
        PLAIN,
    ),
    pin(
        "get_lock lowercase",
        "select get_lock('lm_lock', 0)",
        &["select release_lock('lm_lock')"],
        Some(OWN_LOCK),
        PLAIN,
    ),
    pin(
        "DO GET_LOCK x2, RELEASE_ALL_LOCKS",
        "DO GET_LOCK('lm_lock', 0), GET_LOCK('lm_lock2', 0)",
        &["DO RELEASE_ALL_LOCKS()"],
        Some(OWN_LOCKS),
        PLAIN,
    ),
    pin(
        "LOCK TABLES READ",
        "LOCK TABLES lm_t READ",
        &["UNLOCK TABLES"],
        Some("SELECT COUNT(*) FROM lm_ai"),
        MOST_WRAPS,
    ),
    pin(
        "LOCK TABLE WRITE",
        "LOCK TABLE lm_t WRITE",
        &["UNLOCK TABLES"],
        Some("SELECT COUNT(*) FROM lm_ai"),
        PLAIN,
    ),
    pin(
        "FLUSH TABLES WITH READ LOCK",
        "FLUSH TABLES WITH READ LOCK",
        &["UNLOCK TABLES"],
        None,
        &[Plain, BlockComment],
    ),
    pin(
        "BACKUP STAGE",
        "BACKUP STAGE START",
        &["BACKUP STAGE END"],
        None,
        PLAIN,
    ),
    pin(
        "temporary table",
        "CREATE TEMPORARY TABLE lm_tmp (i INT)",
        &["DROP TEMPORARY TABLE lm_tmp"],
        Some("SELECT COUNT(*) FROM lm_tmp"),
        MOST_WRAPS,
    ),
    pin(
        "temporary table AS SELECT, plain DROP",
        "CREATE TEMPORARY TABLE lm_tmp AS SELECT 1 AS i",
        &["DROP TABLE lm_tmp"],
        Some("SELECT COUNT(*) FROM lm_tmp"),
        PLAIN,
    ),
    pin(
        "text PREPARE",
        "PREPARE lm_s FROM 'SELECT 1'",
        &["DEALLOCATE PREPARE lm_s"],
        Some("EXECUTE lm_s"),
        SOME_WRAPS,
    ),
    pin(
        "text PREPARE, DROP PREPARE",
        "PREPARE lm_s FROM 'SELECT 2'",
        &["DROP PREPARE lm_s"],
        Some("EXECUTE lm_s"),
        PLAIN,
    ),
    pin(
        "HANDLER OPEN",
        "HANDLER lm_t OPEN AS lm_h",
        &["HANDLER lm_h CLOSE"],
        Some("HANDLER lm_h READ FIRST"),
        PLAIN,
    ),
    pin(
        "XA START",
        "XA START 'lm_xa'",
        &["XA END 'lm_xa'", "XA ROLLBACK 'lm_xa'"],
        Some("SELECT @@in_transaction"),
        &[Plain, AfterSelect],
    ),
    pin(
        "XA BEGIN",
        "XA BEGIN 'lm_xa'",
        &["XA END 'lm_xa'", "XA ROLLBACK 'lm_xa'"],
        None,
        PLAIN,
    ),
    pin(
        "START TRANSACTION",
        "START TRANSACTION",
        &["COMMIT"],
        Some("SELECT @@in_transaction"),
        PLAIN,
    ),
    pin(
        "BEGIN; INSERT",
        "BEGIN; INSERT INTO lm_t (id, v) VALUES (5, 5)",
        &["ROLLBACK"],
        Some("SELECT @@in_transaction, COUNT(*) FROM lm_t WHERE id = 5"),
        PLAIN,
    ),
    pin(
        "autocommit=0; INSERT",
        "SET autocommit = 0; INSERT INTO lm_t (id, v) VALUES (6, 6)",
        &["COMMIT", "SET autocommit = 1"],
        Some("SELECT @@autocommit, @@in_transaction"),
        PLAIN,
    ),
    pin(
        "START TRANSACTION READ ONLY",
        "START TRANSACTION READ ONLY",
        &["COMMIT"],
        None,
        PLAIN,
    ),
    pin(
        "SET TRANSACTION ISOLATION (one-shot)",
        "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE",
        ONE_SHOT_UNDO,
        None,
        &[Plain, ErrorAfter],
    ),
    pin(
        "SET TRANSACTION READ ONLY (one-shot)",
        "SET TRANSACTION READ ONLY",
        ONE_SHOT_UNDO,
        None,
        PLAIN,
    ),
    pin(
        "SET insert_id",
        "SET insert_id = 777",
        &["SET insert_id = 0"],
        Some("SELECT @@insert_id"),
        PLAIN,
    ),
    pin(
        "SET timestamp",
        "SET timestamp = 1000000000",
        &["SET timestamp = DEFAULT"],
        Some("SELECT @@timestamp, NOW()"),
        PLAIN,
    ),
    pin(
        "SET last_insert_id",
        "SET last_insert_id = 5",
        &["SET last_insert_id = 0"],
        Some("SELECT LAST_INSERT_ID()"),
        PLAIN,
    ),
    pin(
        "SELECT LAST_INSERT_ID(expr)",
        "SELECT LAST_INSERT_ID(77)",
        &["SELECT LAST_INSERT_ID(0)"],
        Some("SELECT LAST_INSERT_ID()"),
        PLAIN,
    ),
    pin(
        "sql_log_bin off",
        "SET sql_log_bin = 0",
        &["SET sql_log_bin = 1"],
        Some("SELECT @@sql_log_bin"),
        PLAIN,
    ),
    pin(
        "SQL_CALC_FOUND_ROWS",
        "SELECT SQL_CALC_FOUND_ROWS * FROM lm_t ORDER BY id LIMIT 1",
        &[],
        Some("SELECT FOUND_ROWS()"),
        &[Plain, ErrorAfter],
    ),
    pin(
        "session trackers changed",
        "SET SESSION session_track_system_variables = ''",
        &["SET SESSION session_track_system_variables = DEFAULT"],
        Some("SELECT @@session.session_track_system_variables"),
        PLAIN,
    ),
    pin(
        "CALL creating a temporary table",
        "CALL lm_proc_tmp()",
        &["DROP TEMPORARY TABLE lm_tmp_p"],
        Some("SELECT COUNT(*) FROM lm_tmp_p"),
        SOME_WRAPS,
    ),
    pin(
        "CALL setting a user variable",
        "CALL lm_proc_var()",
        &["SET @lm_p = NULL"],
        Some("SELECT @lm_p"),
        SOME_WRAPS,
    ),
    pin(
        "CALL taking GET_LOCK",
        "CALL lm_proc_lock()",
        &["SELECT RELEASE_LOCK('lm_lock_p')"],
        Some(OWN_PROC_LOCK),
        SOME_WRAPS,
    ),
    pin(
        "SET ROLE",
        "SET ROLE lm_role",
        &["SET ROLE NONE"],
        Some("SELECT CURRENT_ROLE()"),
        MOST_WRAPS,
    ),
    // MariaDB has no `SET ROLE DEFAULT` (MySQL 8 syntax): a syntax error,
    // which leaves the role A set just before. Ending the role's hold on
    // the word DEFAULT would hand lm_role to B.
    pin(
        "SET ROLE lm_role, then SET ROLE DEFAULT (a syntax error)",
        "SET ROLE lm_role; SET ROLE DEFAULT",
        &["SET ROLE NONE"],
        Some("SELECT CURRENT_ROLE()"),
        PLAIN,
    ),
    pin(
        "CALL of an INVOKER procedure setting a role",
        "CALL lm_proc_role()",
        &["SET ROLE NONE"],
        Some("SELECT CURRENT_ROLE()"),
        SOME_WRAPS,
    ),
    pin(
        "sequence NEXTVAL",
        "SELECT NEXTVAL(lm_seq) > 0",
        &[],
        Some("SELECT LASTVAL(lm_seq) > 0"),
        SOME_WRAPS,
    ),
    pin(
        "sequence NEXT VALUE FOR",
        "SELECT NEXT VALUE FOR lm_seq > 0",
        &[],
        Some("SELECT PREVIOUS VALUE FOR lm_seq > 0"),
        PLAIN,
    ),
    pin(
        "stored function taking GET_LOCK",
        "SELECT lm_func_lock()",
        &["SELECT RELEASE_LOCK('lm_lock_f')"],
        Some(OWN_FUNC_LOCK),
        SOME_WRAPS,
    ),
    pin(
        "stored function setting a user variable",
        "SELECT lm_func_var()",
        &["SET @lm_f = NULL"],
        Some("SELECT @lm_f"),
        SOME_WRAPS,
    ),
    pin(
        "stored function using a sequence",
        "SELECT lm_func_seq() > 0",
        &[],
        Some("SELECT LASTVAL(lm_seq) > 0"),
        PLAIN,
    ),
    // Views and triggers run code the statement does not name: the proxy
    // learns which names do from information_schema (issue 16).
    pin(
        "view taking GET_LOCK",
        "SELECT g FROM lm_v_lock",
        &["SELECT RELEASE_LOCK('lm_lock_f')"],
        Some(OWN_FUNC_LOCK),
        SOME_WRAPS,
    ),
    pin(
        "view calling a function that sets a user variable",
        "SELECT x FROM lm_v_fn",
        &["SET @lm_f = NULL"],
        Some("SELECT @lm_f"),
        SOME_WRAPS,
    ),
    pin(
        "view using a sequence",
        "SELECT n > 0 FROM lm_v_seq",
        &[],
        Some("SELECT LASTVAL(lm_seq) > 0"),
        PLAIN,
    ),
    pin(
        "view over a view taking GET_LOCK",
        "SELECT g FROM leakdb.lm_v_lock2",
        &["SELECT RELEASE_LOCK('lm_lock_f')"],
        Some(OWN_FUNC_LOCK),
        PLAIN,
    ),
    pin(
        "trigger setting a user variable and taking GET_LOCK",
        "INSERT INTO lm_trig VALUES (1)",
        &["SELECT RELEASE_LOCK('lm_lock_f')", "SET @lm_f = NULL"],
        Some("SELECT @lm_f"),
        SOME_WRAPS,
    ),
    pin(
        "trigger taking GET_LOCK",
        "INSERT INTO lm_trig2 VALUES (1)",
        &["SELECT RELEASE_LOCK('lm_lock_f')"],
        Some(OWN_FUNC_LOCK),
        SOME_WRAPS,
    ),
    pin(
        "INSERT into a table whose column DEFAULT is NEXTVAL",
        "INSERT INTO lm_defseq (v) VALUES (1)",
        &[],
        Some("SELECT LASTVAL(lm_seq) > 0"),
        PLAIN,
    ),
    pin(
        "INSERT through a plain view into a table with a trigger",
        "INSERT INTO lm_v_over VALUES (2)",
        &["SELECT RELEASE_LOCK('lm_lock_f')", "SET @lm_f = NULL"],
        Some("SELECT @lm_f"),
        PLAIN,
    ),
    // The name has a backslash, which NO_BACKSLASH_ESCAPES keeps: the
    // held-lock check must read the name as the server does (issue 16 B.7).
    pin(
        "GET_LOCK named with a backslash under NO_BACKSLASH_ESCAPES",
        "SET sql_mode = 'NO_BACKSLASH_ESCAPES'; SELECT GET_LOCK('lm_b\\', 0)",
        &["DO RELEASE_ALL_LOCKS()", "SET sql_mode = DEFAULT"],
        Some(OWN_BACKSLASH_LOCK),
        PLAIN,
    ),
    pin(
        "failing statement taking GET_LOCK",
        "INSERT INTO lm_uk (id) VALUES (GET_LOCK('lm_lock', 0)), (1)",
        &["SELECT RELEASE_LOCK('lm_lock')"],
        Some(OWN_LOCK),
        PLAIN,
    ),
    // Dynamic SQL taking a named lock: the text that takes it is a string
    // (or a variable's value), not the statement's own. Where the prepared
    // statement or the variable is gone at the end of the query, the lock
    // is the only state left.
    pin(
        "dynamic SQL: PREPARE of GET_LOCK, EXECUTE",
        "PREPARE lm_dl FROM 'SELECT GET_LOCK(''lm_lock_d'', 0)'; EXECUTE lm_dl",
        &[
            "SELECT RELEASE_LOCK('lm_lock_d')",
            "DEALLOCATE PREPARE lm_dl",
        ],
        Some(OWN_DYN_LOCK),
        PLAIN,
    ),
    pin(
        "dynamic SQL: PREPARE of GET_LOCK, EXECUTE, DEALLOCATE",
        "PREPARE lm_dl FROM 'SELECT GET_LOCK(''lm_lock_d'', 0)'; EXECUTE lm_dl; \
         DEALLOCATE PREPARE lm_dl",
        &["SELECT RELEASE_LOCK('lm_lock_d')"],
        Some(OWN_DYN_LOCK),
        PLAIN,
    ),
    pin(
        "SET STATEMENT … FOR CALL taking GET_LOCK",
        "SET STATEMENT max_statement_time = 0 FOR CALL lm_proc_lock()",
        &["SELECT RELEASE_LOCK('lm_lock_p')"],
        Some(OWN_PROC_LOCK),
        PLAIN,
    ),
    pin(
        "SET STATEMENT … FOR EXECUTE IMMEDIATE of GET_LOCK",
        "SET STATEMENT max_statement_time = 0 FOR EXECUTE IMMEDIATE 'DO GET_LOCK(''lm_lock_d'', 0)'",
        &["SELECT RELEASE_LOCK('lm_lock_d')"],
        Some(OWN_DYN_LOCK),
        PLAIN,
    ),
    // The server converts the text from gbk before reading it: 0x81 0x5C
    // is one character there, so the quote after it ends the string and
    // GET_LOCK runs; read as the bytes are, it is inside a string.
    pin(
        "dynamic SQL: EXECUTE IMMEDIATE of a _gbk hex literal hiding GET_LOCK",
        "EXECUTE IMMEDIATE _gbk X'53454C454354202781\
         5C272C204745545F4C4F434B28276C6D5F6C6F636B5F64272C203029202D2D2027'",
        &["SELECT RELEASE_LOCK('lm_lock_d')"],
        Some(OWN_DYN_LOCK),
        PLAIN,
    ),
    pin(
        "dynamic SQL: EXECUTE IMMEDIATE of GET_LOCK",
        "EXECUTE IMMEDIATE 'DO GET_LOCK(''lm_lock_d'', 0)'",
        &["SELECT RELEASE_LOCK('lm_lock_d')"],
        Some(OWN_DYN_LOCK),
        SOME_WRAPS,
    ),
    pin(
        "dynamic SQL: PREPARE of GET_LOCK from a user variable",
        "SET @lm_q = 'DO GET_LOCK(''lm_lock_d'', 0)'; PREPARE lm_dl FROM @lm_q; EXECUTE lm_dl",
        &[
            "SELECT RELEASE_LOCK('lm_lock_d')",
            "DEALLOCATE PREPARE lm_dl",
            "SET @lm_q = NULL",
        ],
        Some(OWN_DYN_LOCK),
        PLAIN,
    ),
    pin(
        "dynamic SQL: PREPARE of GET_LOCK from a user variable, both dropped",
        "SET @lm_q = 'DO GET_LOCK(''lm_lock_d'', 0)'; PREPARE lm_dl FROM @lm_q; EXECUTE lm_dl; \
         DEALLOCATE PREPARE lm_dl; SET @lm_q = NULL",
        &["SELECT RELEASE_LOCK('lm_lock_d')"],
        Some(OWN_DYN_LOCK),
        PLAIN,
    ),
    pin(
        "dynamic SQL: EXECUTE IMMEDIATE of GET_LOCK from a user variable, dropped",
        "SET @lm_q = 'DO GET_LOCK(''lm_lock_d'', 0)'; EXECUTE IMMEDIATE @lm_q; SET @lm_q = NULL",
        &["SELECT RELEASE_LOCK('lm_lock_d')"],
        Some(OWN_DYN_LOCK),
        PLAIN,
    ),
    Base {
        name: "failed prepare (binary protocol)",
        sql: "SELECT lm_nosuchcol_secret FROM lm_t",
        pins: false,
        undo: &[],
        witness: None,
        wraps: PLAIN,
        kind: Kind::Binary,
    },
    pin(
        "CALL preparing a statement",
        "CALL lm_proc_prep()",
        &["DEALLOCATE PREPARE lm_sp"],
        Some("EXECUTE lm_sp"),
        PLAIN,
    ),
    pin(
        "CALL starting a transaction",
        "CALL lm_proc_tx()",
        &["COMMIT"],
        Some("SELECT @@in_transaction"),
        PLAIN,
    ),
    pin(
        "CALL setting a session variable",
        "CALL lm_proc_wait()",
        &["SET SESSION wait_timeout = DEFAULT"],
        Some("SELECT @@wait_timeout"),
        PLAIN,
    ),
    pin(
        "stored function setting a session variable",
        "SELECT lm_func_tz()",
        &["SET SESSION time_zone = DEFAULT"],
        Some("SELECT @@session.time_zone"),
        PLAIN,
    ),
    pin(
        "CALL setting the character set and autocommit",
        "CALL lm_proc_names()",
        &[
            "SET NAMES utf8mb4 COLLATE utf8mb4_general_ci",
            "SET SESSION autocommit = 1",
        ],
        Some("SELECT @@character_set_client, @@autocommit"),
        PLAIN,
    ),
    Base {
        name: "open cursor (binary protocol)",
        sql: "SELECT id, v FROM lm_t WHERE id <= 3 ORDER BY id, v",
        pins: true,
        undo: &[],
        witness: None,
        wraps: PLAIN,
        kind: Kind::Cursor,
    },
    Base {
        name: "pending SEND_LONG_DATA",
        sql: "INSERT INTO lm_blob (id, b) VALUES (?, ?)",
        pins: true,
        undo: &[],
        witness: None,
        wraps: PLAIN,
        kind: Kind::LongData,
    },
];

/// Statements that must never pin: harmless text that looks like state to a
/// substring search, and session variables that are replayable.
const HARMLESS: &[Base] = &[
    free(
        "string with @",
        "SELECT 'bob@example.com'",
        &[],
        None,
        HARMLESS_WRAPS,
    ),
    free(
        "table named budget_lock",
        "SELECT * FROM budget_lock ORDER BY id",
        &[],
        None,
        HARMLESS_WRAPS,
    ),
    free(
        "GET_LOCK inside a string",
        "SELECT 'GET_LOCK(''x'',1)'",
        &[],
        None,
        HARMLESS_WRAPS,
    ),
    free(
        "column named get_lock, '@' in a string",
        "SELECT get_lock, note FROM budget_lock WHERE note = '@lm_a'",
        &[],
        None,
        PLAIN,
    ),
    free(
        "comment mentioning LOCK TABLES",
        "SELECT 1 /* LOCK TABLES lm_t READ */",
        &[],
        None,
        PLAIN,
    ),
    free(
        "line comment mentioning LOCK TABLES",
        "-- LOCK TABLES lm_t WRITE\nSELECT 2",
        &[],
        None,
        PLAIN,
    ),
    free(
        "state words in strings and identifiers",
        "SELECT \"PREPARE lm_s FROM 'x'\", 'CREATE TEMPORARY TABLE t', 'SET @x = 1' AS `GET_LOCK`",
        &[],
        None,
        PLAIN,
    ),
    free(
        "RELEASE_LOCK of a lock nobody holds",
        "SELECT RELEASE_LOCK('lm_never')",
        &[],
        None,
        PLAIN,
    ),
    free(
        "IS_FREE_LOCK",
        "SELECT IS_FREE_LOCK('lm_lock')",
        &[],
        None,
        PLAIN,
    ),
    free(
        "warning",
        "SELECT CAST('x' AS SIGNED)",
        &[],
        None,
        SOME_WRAPS,
    ),
    free(
        "SET STATEMENT max_statement_time",
        "SET STATEMENT max_statement_time=10 FOR SELECT 1",
        &[],
        Some("SELECT @@max_statement_time"),
        SOME_WRAPS,
    ),
    free(
        "SET STATEMENT sql_mode",
        "SET STATEMENT sql_mode='ANSI_QUOTES' FOR SELECT 1",
        &[],
        Some("SELECT @@sql_mode"),
        PLAIN,
    ),
    // The connection records statement texts from here on (and keeps them
    // through COM_RESET_CONNECTION): never shared again.
    pin(
        "profiling on",
        "SET SESSION profiling = 1",
        &["SET SESSION profiling = 0"],
        Some("SELECT @@profiling"),
        SOME_WRAPS,
    ),
    pin(
        "optimizer trace on",
        "SET SESSION optimizer_trace = 'enabled=on'; SELECT COUNT(*) FROM lm_t WHERE v = 777",
        &["SET SESSION optimizer_trace = 'enabled=off'"],
        Some("SELECT @@optimizer_trace"),
        PLAIN,
    ),
    free(
        "profiling for one statement",
        "SET STATEMENT profiling = 1 FOR SELECT 'lm-profiled'",
        &[],
        None,
        PLAIN,
    ),
    // What the statement after FOR sets lasts: the server reports it in the
    // same reply as the clause's temporary values.
    free(
        "SET STATEMENT … FOR SET time_zone",
        "SET STATEMENT max_statement_time=10 FOR SET SESSION time_zone = '+02:00'",
        &["SET SESSION time_zone = DEFAULT"],
        Some("SELECT @@time_zone"),
        SOME_WRAPS,
    ),
    free(
        "SET STATEMENT … FOR SET sql_mode NO_BACKSLASH_ESCAPES",
        "SET STATEMENT max_statement_time=10 FOR SET SESSION sql_mode = 'NO_BACKSLASH_ESCAPES'",
        &["SET SESSION sql_mode = DEFAULT"],
        Some("SELECT @@sql_mode"),
        PLAIN,
    ),
    free(
        "SET STATEMENT … FOR SET autocommit",
        "SET STATEMENT max_statement_time=10 FOR SET autocommit = 0",
        &["SET autocommit = 1"],
        Some("SELECT @@autocommit"),
        PLAIN,
    ),
    free(
        "SET STATEMENT … FOR, then SET in the same query",
        "SET STATEMENT max_statement_time=5 FOR SELECT 1; SET SESSION wait_timeout = 66",
        &["SET SESSION wait_timeout = DEFAULT"],
        Some("SELECT @@wait_timeout"),
        PLAIN,
    ),
    free(
        "sql_mode = DEFAULT, then a transaction",
        "SET SESSION sql_mode = DEFAULT",
        &[
            "START TRANSACTION",
            "INSERT INTO lm_t (id, v) VALUES (12, 1)",
            "COMMIT",
        ],
        Some("SELECT @@sql_mode"),
        SOME_WRAPS,
    ),
    free(
        "sql_mode set",
        "SET SESSION sql_mode = 'ANSI_QUOTES'",
        &["SET SESSION sql_mode = DEFAULT"],
        Some("SELECT @@sql_mode"),
        SOME_WRAPS,
    ),
    free(
        "sql_log_bin = DEFAULT, then a transaction",
        "SET sql_log_bin = DEFAULT",
        &[
            "START TRANSACTION",
            "INSERT INTO lm_t (id, v) VALUES (11, 1)",
            "COMMIT",
        ],
        Some("SELECT @@sql_log_bin"),
        PLAIN,
    ),
    free(
        "INSERT with the binary log on",
        "INSERT INTO lm_t (id, v) VALUES (10, 1)",
        &[],
        Some("SELECT LAST_INSERT_ID()"),
        HARMLESS_WRAPS,
    ),
    free(
        "INSERT with AUTO_INCREMENT",
        "INSERT INTO lm_ai (v) VALUES (1)",
        &[],
        Some("SELECT LAST_INSERT_ID() = (SELECT MAX(id) FROM lm_ai)"),
        SOME_WRAPS,
    ),
    // The server keeps the id of a row the statement then rolled back, and
    // the failing statement's reply is an error: no OK says an id moved.
    free(
        "multi-row INSERT failing after a generated id",
        "INSERT INTO lm_ai (v) VALUES (1), ('not a number')",
        &[],
        Some("SELECT LAST_INSERT_ID() > (SELECT COALESCE(MAX(id), 0) FROM lm_ai)"),
        PLAIN,
    ),
    // Rows instead of an OK: the EOF that ends them carries no id.
    free(
        "INSERT ... RETURNING with AUTO_INCREMENT",
        "INSERT INTO lm_ai (v) VALUES (2) RETURNING v",
        &[],
        Some("SELECT LAST_INSERT_ID() = (SELECT MAX(id) FROM lm_ai)"),
        PLAIN,
    ),
    free(
        "UPDATE",
        "UPDATE lm_t SET v = v + 1 WHERE id = 1",
        &[],
        Some("SELECT ROW_COUNT()"),
        PLAIN,
    ),
    free(
        "SET NAMES latin1",
        "SET NAMES latin1",
        &["SET NAMES utf8mb4"],
        Some("SELECT @@character_set_client, @@collation_connection, @@character_set_results"),
        SOME_WRAPS,
    ),
    free(
        "SET NAMES with an exact collation",
        "SET NAMES utf8mb4 COLLATE utf8mb4_unicode_ci",
        &["SET NAMES utf8mb4"],
        Some("SELECT @@collation_connection"),
        SOME_WRAPS,
    ),
    free(
        "SET CHARACTER SET",
        "SET CHARACTER SET cp1251",
        &["SET NAMES utf8mb4"],
        Some("SELECT @@character_set_client, @@character_set_results, @@collation_connection"),
        PLAIN,
    ),
    free(
        "character_set_results = NULL",
        "SET character_set_results = NULL",
        &["SET character_set_results = utf8mb4"],
        Some("SELECT @@character_set_results"),
        PLAIN,
    ),
    free(
        "wait_timeout",
        "SET SESSION wait_timeout = 100",
        &["SET SESSION wait_timeout = DEFAULT"],
        Some("SELECT @@wait_timeout"),
        SOME_WRAPS,
    ),
    free(
        "SET LOCAL lock_wait_timeout",
        "SET LOCAL lock_wait_timeout = 7",
        &["SET LOCAL lock_wait_timeout = DEFAULT"],
        Some("SELECT @@lock_wait_timeout"),
        PLAIN,
    ),
    free(
        "time_zone",
        "SET time_zone = '+05:00'",
        &["SET time_zone = DEFAULT"],
        Some("SELECT @@time_zone"),
        SOME_WRAPS,
    ),
    // `SET @@name = …` (no scope): MariaDB's tracker does not report it.
    free(
        "@@sql_mode set (unreported form)",
        "SET @@sql_mode = 'ANSI_QUOTES'",
        &["SET @@sql_mode = DEFAULT"],
        Some("SELECT @@sql_mode"),
        SOME_WRAPS,
    ),
    free(
        "@@autocommit off (unreported form)",
        "SET @@autocommit = 0",
        &["SET @@autocommit = 1"],
        Some("SELECT @@autocommit"),
        SOME_WRAPS,
    ),
    free(
        "@@max_join_size (changes sql_big_selects, unreported)",
        "SET @@max_join_size = 5",
        &["SET @@max_join_size = DEFAULT"],
        Some("SELECT @@max_join_size, @@sql_big_selects"),
        SOME_WRAPS,
    ),
    free(
        "max_join_size (changes sql_big_selects, reports only itself)",
        "SET max_join_size = 5",
        &["SET max_join_size = DEFAULT"],
        Some("SELECT @@max_join_size, @@sql_big_selects"),
        SOME_WRAPS,
    ),
    pin(
        "@@sql_log_bin off (unreported form)",
        "SET @@sql_log_bin = 0",
        &["SET @@sql_log_bin = 1"],
        Some("SELECT @@sql_log_bin"),
        SOME_WRAPS,
    ),
    free(
        "autocommit off",
        "SET autocommit = 0",
        &["SET autocommit = 1"],
        Some("SELECT @@autocommit"),
        SOME_WRAPS,
    ),
    free(
        "session isolation level",
        "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
        &["SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ"],
        Some("SELECT @@tx_isolation"),
        SOME_WRAPS,
    ),
    free(
        "session read only",
        "SET SESSION TRANSACTION READ ONLY",
        &["SET SESSION TRANSACTION READ WRITE"],
        Some("SELECT @@tx_read_only"),
        PLAIN,
    ),
    free(
        "USE another schema",
        "USE lm_other",
        &["USE leakdb"],
        Some("SELECT DATABASE()"),
        SOME_WRAPS,
    ),
    free(
        "own schema dropped",
        "CREATE DATABASE lm_gone; USE lm_gone; DROP DATABASE lm_gone",
        &["USE lm_other", "USE leakdb"],
        Some("SELECT DATABASE()"),
        PLAIN,
    ),
    free(
        "sql_select_limit",
        "SET @@session.sql_select_limit = 2",
        &["SET @@session.sql_select_limit = DEFAULT"],
        Some("SELECT @@sql_select_limit"),
        PLAIN,
    ),
    free(
        "foreign_key_checks",
        "SET foreign_key_checks = 0",
        &["SET foreign_key_checks = DEFAULT"],
        Some("SELECT @@foreign_key_checks"),
        PLAIN,
    ),
    free(
        "unique_checks",
        "SET unique_checks = 0",
        &["SET unique_checks = DEFAULT"],
        Some("SELECT @@unique_checks"),
        PLAIN,
    ),
    free(
        "group_concat_max_len",
        "SET group_concat_max_len = 5",
        &["SET group_concat_max_len = DEFAULT"],
        Some("SELECT @@group_concat_max_len"),
        PLAIN,
    ),
    free(
        "lc_time_names",
        "SET lc_time_names = 'de_DE'",
        &["SET lc_time_names = DEFAULT"],
        Some("SELECT @@lc_time_names"),
        PLAIN,
    ),
    free(
        "div_precision_increment",
        "SET div_precision_increment = 9",
        &["SET div_precision_increment = DEFAULT"],
        Some("SELECT @@div_precision_increment"),
        PLAIN,
    ),
    free(
        "max_statement_time",
        "SET max_statement_time = 5",
        &["SET max_statement_time = DEFAULT"],
        Some("SELECT @@max_statement_time"),
        PLAIN,
    ),
    free(
        "sql_safe_updates",
        "SET sql_safe_updates = 1",
        &["SET sql_safe_updates = DEFAULT"],
        Some("SELECT @@sql_safe_updates"),
        PLAIN,
    ),
    free(
        "auto_increment_increment",
        "SET auto_increment_increment = 5",
        &["SET auto_increment_increment = DEFAULT"],
        Some("SELECT @@auto_increment_increment"),
        PLAIN,
    ),
    free(
        "innodb_lock_wait_timeout",
        "SET innodb_lock_wait_timeout = 7",
        &["SET innodb_lock_wait_timeout = DEFAULT"],
        Some("SELECT @@innodb_lock_wait_timeout"),
        PLAIN,
    ),
    free(
        "default_storage_engine",
        "SET default_storage_engine = MyISAM",
        &["SET default_storage_engine = DEFAULT"],
        Some("SELECT @@default_storage_engine"),
        PLAIN,
    ),
    free(
        "sql_notes",
        "SET sql_notes = 0",
        &["SET sql_notes = DEFAULT"],
        Some("SELECT @@sql_notes"),
        PLAIN,
    ),
    // A replication setting that needs privileges: not on the replay
    // whitelist, so it pins until set back (fail closed).
    pin(
        "gtid_domain_id",
        "SET gtid_domain_id = 5",
        &["SET gtid_domain_id = DEFAULT"],
        Some("SELECT @@gtid_domain_id"),
        PLAIN,
    ),
    // The account's default role is server state, not the session's: A's
    // own active role stays (direct, a session keeps the role it logged in
    // with), while every login after it -- B's direct one included -- gets
    // lm_role, so B through the proxy must not get a backend logged in
    // before. The undo sets it back, which the next logins follow again.
    free(
        "SET DEFAULT ROLE",
        "SET DEFAULT ROLE lm_role",
        &["SET DEFAULT ROLE NONE"],
        Some("SELECT CURRENT_ROLE()"),
        MOST_WRAPS,
    ),
    free(
        "SET DEFAULT ROLE FOR the account",
        "SET DEFAULT ROLE lm_role FOR 'app'@'%'",
        &["SET DEFAULT ROLE NONE FOR 'app'@'%'"],
        Some("SELECT CURRENT_ROLE()"),
        PLAIN,
    ),
    // SETVAL moves the sequence (shared by every session) and, on MariaDB
    // 10.11, leaves LASTVAL() / PREVIOUS VALUE FOR as they were (NULL for a
    // fresh session): no session state. COALESCE: SETVAL is NULL (and
    // changes nothing) once a NEXTVAL has taken the sequence past 1000, so
    // A's answer does not depend on what ran before.
    free(
        "SETVAL",
        "SELECT COALESCE(SETVAL(lm_seq, 1000), 1000)",
        &[],
        Some("SELECT LASTVAL(lm_seq), PREVIOUS VALUE FOR lm_seq"),
        SOME_WRAPS,
    ),
    free(
        "CALL without state",
        "CALL lm_proc_noop()",
        &[],
        None,
        SOME_WRAPS,
    ),
    free(
        "CALL with sql_mode inside (restored at its end)",
        "CALL lm_proc_mode()",
        &[],
        Some("SELECT @@sql_mode"),
        PLAIN,
    ),
    free(
        "CALL with an INSERT (binary log)",
        "CALL lm_proc_insert()",
        &[],
        None,
        PLAIN,
    ),
    Base {
        name: "prepared statement executed and closed (binary protocol)",
        sql: "SELECT ? + 1",
        pins: false,
        undo: &[],
        witness: None,
        wraps: PLAIN,
        kind: Kind::Binary,
    },
];

/// Schema, tables and procedures the catalogue uses (run as root).
const SETUP_SQL: &str = "
DROP DATABASE IF EXISTS leakdb;
DROP DATABASE IF EXISTS lm_other;
DROP DATABASE IF EXISTS lm_gone;
CREATE DATABASE leakdb;
CREATE DATABASE lm_other;
CREATE TABLE leakdb.lm_t (id INT, v INT) ENGINE=InnoDB;
INSERT INTO leakdb.lm_t VALUES (1, 1), (2, 2), (3, 3);
CREATE TABLE leakdb.lm_ai (id INT AUTO_INCREMENT PRIMARY KEY, v INT) ENGINE=InnoDB;
CREATE TABLE leakdb.lm_probe (id INT AUTO_INCREMENT PRIMARY KEY, v INT) ENGINE=InnoDB;
CREATE TABLE leakdb.lm_blob (id INT, b BLOB) ENGINE=InnoDB;
CREATE TABLE leakdb.budget_lock (id INT PRIMARY KEY, get_lock INT, note VARCHAR(40)) ENGINE=InnoDB;
INSERT INTO leakdb.budget_lock VALUES (1, 10, '@lm_a'), (2, 20, 'LOCK TABLES');
CREATE PROCEDURE leakdb.lm_proc_tmp() CREATE TEMPORARY TABLE leakdb.lm_tmp_p (i INT);
CREATE PROCEDURE leakdb.lm_proc_var() SET @lm_p = 1;
CREATE PROCEDURE leakdb.lm_proc_lock() DO GET_LOCK('lm_lock_p', 0);
CREATE PROCEDURE leakdb.lm_proc_prep() PREPARE lm_sp FROM 'SELECT 1';
CREATE PROCEDURE leakdb.lm_proc_tx() START TRANSACTION;
CREATE PROCEDURE leakdb.lm_proc_wait() SET SESSION wait_timeout = 99;
CREATE PROCEDURE leakdb.lm_proc_mode() SET SESSION sql_mode = 'ANSI';
CREATE PROCEDURE leakdb.lm_proc_noop() SELECT 1;
CREATE PROCEDURE leakdb.lm_proc_insert() INSERT INTO leakdb.lm_t (id, v) VALUES (9, 9);
CREATE TABLE leakdb.lm_uk (id INT PRIMARY KEY) ENGINE=InnoDB;
INSERT INTO leakdb.lm_uk VALUES (1);
CREATE SEQUENCE leakdb.lm_seq;
CREATE FUNCTION leakdb.lm_func_lock() RETURNS INT NO SQL RETURN GET_LOCK('lm_lock_f', 0);
CREATE FUNCTION leakdb.lm_func_var() RETURNS INT NO SQL RETURN (@lm_f := 1);
CREATE FUNCTION leakdb.lm_func_seq() RETURNS INT NO SQL RETURN NEXTVAL(leakdb.lm_seq);
CREATE VIEW leakdb.lm_v_lock AS SELECT GET_LOCK('lm_lock_f', 0) AS g;
CREATE VIEW leakdb.lm_v_lock2 AS SELECT g FROM leakdb.lm_v_lock;
CREATE VIEW leakdb.lm_v_fn AS SELECT leakdb.lm_func_var() AS x;
CREATE VIEW leakdb.lm_v_seq AS SELECT NEXTVAL(leakdb.lm_seq) AS n;
CREATE TABLE leakdb.lm_trig (id INT) ENGINE=InnoDB;
CREATE TRIGGER leakdb.lm_trg BEFORE INSERT ON leakdb.lm_trig FOR EACH ROW SET @lm_f = GET_LOCK('lm_lock_f', 0) + NEW.id;
CREATE VIEW leakdb.lm_v_over AS SELECT id FROM leakdb.lm_trig;
CREATE TABLE leakdb.lm_trig2 (id INT) ENGINE=InnoDB;
CREATE TRIGGER leakdb.lm_trg2 AFTER INSERT ON leakdb.lm_trig2 FOR EACH ROW DO GET_LOCK('lm_lock_f', 0);
CREATE TABLE leakdb.lm_defseq (id INT DEFAULT NEXTVAL(leakdb.lm_seq), v INT) ENGINE=InnoDB;
CREATE PROCEDURE leakdb.lm_proc_role() SQL SECURITY INVOKER SET ROLE lm_role;
DROP ROLE IF EXISTS lm_role;
CREATE ROLE lm_role;
GRANT SELECT ON leakdb.lm_t TO lm_role;
GRANT lm_role TO 'app'@'%';
DELIMITER //
CREATE FUNCTION leakdb.lm_func_tz() RETURNS INT NO SQL BEGIN SET SESSION time_zone = '+06:00'; RETURN 1; END//
CREATE PROCEDURE leakdb.lm_proc_names() BEGIN SET NAMES latin1; SET SESSION autocommit = 0; END//
DELIMITER ;
";

/// One generated matrix entry.
#[derive(Debug, Clone)]
struct Entry {
    name: String,
    sql: String,
    pins: bool,
    undo: &'static [&'static str],
    witness: Option<&'static str>,
    kind: Kind,
}

fn catalogue() -> Vec<Entry> {
    let mut out = Vec::new();
    for b in PINNING.iter().chain(HARMLESS) {
        for w in b.wraps {
            out.push(Entry {
                name: format!("{} [{}]", b.name, w.label()),
                sql: w.apply(b.sql),
                pins: b.pins,
                undo: b.undo,
                witness: b.witness,
                kind: b.kind,
            });
        }
    }
    out
}

/// What a response says about session state, without what legitimately
/// differs between two runs (insert ids, statement-only status bits).
fn summarize(rs: &[Response]) -> String {
    let mut s = String::new();
    for (i, r) in rs.iter().enumerate() {
        if i > 0 {
            s.push_str(" | ");
        }
        match r {
            Response::Ok(ok) => {
                let _ = write!(
                    s,
                    "OK affected={} warnings={} status={:#06x}",
                    ok.affected_rows,
                    ok.warnings,
                    ok.status & STATUS_MASK
                );
            }
            Response::Err(e) => {
                let _ = write!(s, "ERR {} ({}) {}", e.code, e.state, e.message);
            }
            Response::Rows(rows) => {
                let _ = write!(
                    s,
                    "ROWS {:?} warnings={} status={:#06x}",
                    rows.text_rows(),
                    rows.end.warnings,
                    rows.end.status & STATUS_MASK
                );
            }
        }
    }
    s
}

/// From SHOW ENGINE INNODB STATUS: the lock counts and read view of the
/// transaction that runs the SHOW (the caller's own), nothing else.
fn own_transaction(rs: &[Response]) -> String {
    let [Response::Rows(rows)] = rs else {
        return summarize(rs);
    };
    let text = rows
        .text_rows()
        .first()
        .and_then(|r| r.get(2).cloned().flatten())
        .unwrap_or_default();
    let Some(block) = text
        .split("---TRANSACTION")
        .find(|b| b.lines().any(|l| l.trim() == INNODB_STATUS))
    else {
        return "no transaction of this session in SHOW ENGINE INNODB STATUS".into();
    };
    // "2 lock struct(s), heap size 1128, 3 row lock(s)"
    let counts: Vec<&str> = block
        .lines()
        .find(|l| l.contains("lock struct(s)"))
        .map(|l| {
            l.split(", ")
                .filter(|part| part.ends_with("lock struct(s)") || part.ends_with("row lock(s)"))
                .collect()
        })
        .unwrap_or_default();
    let read_view = block.contains("Trx read view");
    format!(
        "own transaction: {}; read view: {read_view}",
        counts.join(", ")
    )
}

fn is_queue_timeout(rs: &[Response]) -> Option<String> {
    rs.iter().find_map(|r| match r {
        Response::Err(e) if e.code == ER_QUERY_INTERRUPTED => Some(e.message.clone()),
        _ => None,
    })
}

async fn login(addr: &str, caps: u32, collation: u8) -> Result<RawConn, String> {
    RawConn::try_connect_with(addr, APP_USER, APP_PASSWORD, Some(SCHEMA), caps, collation)
        .await
        .map_err(|e| format!("ERR {} ({}) {}", e.code, e.state, e.message))
}

/// Every probe on one connection (stops at the first 1317).
async fn run_probes(c: &mut RawConn) -> Result<Vec<String>, (String, String)> {
    let mut out = Vec::with_capacity(PROBES.len());
    for p in PROBES {
        let rs = c.query_multi(p).await;
        if let Some(msg) = is_queue_timeout(&rs) {
            return Err((p.to_string(), msg));
        }
        out.push(if *p == INNODB_STATUS {
            own_transaction(&rs)
        } else {
            summarize(&rs)
        });
    }
    Ok(out)
}

/// B's view through the proxy against a fresh direct connection's.
#[derive(Debug)]
enum Seen {
    Same,
    /// ER 1317 at `at` (the login or a probe).
    Pinned {
        at: String,
        message: String,
    },
    /// (probe, via proxy, direct)
    Differs(Vec<(String, String, String)>),
    Broken(String),
}

async fn probe_phase(proxy: &str, direct: &str) -> Seen {
    let mut b = match login(proxy, B_CAPS, B_COLLATION).await {
        Ok(c) => c,
        Err(e) if e.starts_with(&format!("ERR {ER_QUERY_INTERRUPTED} ")) => {
            return Seen::Pinned {
                at: "login".into(),
                message: e,
            };
        }
        Err(e) => return Seen::Broken(format!("B's login through the proxy: {e}")),
    };
    let via = run_probes(&mut b).await;
    b.quit().await;
    let via = match via {
        Ok(v) => v,
        Err((at, message)) => return Seen::Pinned { at, message },
    };
    let mut d = match login(direct, B_CAPS, B_COLLATION).await {
        Ok(c) => c,
        Err(e) => return Seen::Broken(format!("direct login: {e}")),
    };
    let reference = run_probes(&mut d).await;
    d.quit().await;
    let reference = match reference {
        Ok(r) => r,
        Err((at, message)) => return Seen::Broken(format!("direct got 1317 at {at}: {message}")),
    };
    let diffs: Vec<_> = PROBES
        .iter()
        .zip(via.into_iter().zip(reference))
        .filter(|(_, (v, d))| v != d)
        .map(|(p, (v, d))| (p.to_string(), v, d))
        .collect();
    if diffs.is_empty() {
        Seen::Same
    } else {
        Seen::Differs(diffs)
    }
}

/// A's answers to a list of statements.
async fn run_all(c: &mut RawConn, stmts: &[&str]) -> Vec<String> {
    let mut out = Vec::with_capacity(stmts.len());
    for s in stmts {
        out.push(summarize(&c.query_multi(s).await));
    }
    out
}

fn summarize_fetch(f: &Fetched) -> String {
    match f {
        Fetched::Rows { rows, end } => format!(
            "FETCH rows={rows:02x?} status={:#06x}",
            end.status & STATUS_MASK
        ),
        Fetched::Err(e) => format!("FETCH ERR {} ({}) {}", e.code, e.state, e.message),
    }
}

/// A's statement: its answer, and the statement id for binary kinds.
async fn do_statement(c: &mut RawConn, e: &Entry) -> (String, Option<u32>) {
    if e.kind == Kind::Text {
        return (summarize(&c.query_multi(&e.sql).await), None);
    }
    let p = match c.prepare(&e.sql).await {
        Ok(p) => p,
        Err(err) => return (format!("PREPARE ERR {} {}", err.code, err.message), None),
    };
    let prepared = format!("PREPARE params={} columns={}", p.num_params, p.num_columns);
    match e.kind {
        Kind::Cursor => {
            let r = c.execute(p.id, CURSOR_TYPE_READ_ONLY, &[], false).await;
            (format!("{prepared} | {}", summarize(&[r])), Some(p.id))
        }
        Kind::LongData => {
            c.send_long_data(p.id, 1, b"long data for lm_blob").await;
            (prepared, Some(p.id))
        }
        Kind::Binary | Kind::Text => {
            let r = c
                .execute(p.id, CURSOR_TYPE_NO_CURSOR, &[Param::Long(41)], true)
                .await;
            c.close_stmt(p.id).await;
            (format!("{prepared} | {}", summarize(&[r])), None)
        }
    }
}

/// A's witness: its own state is still there.
async fn do_witness(c: &mut RawConn, e: &Entry, stmt: Option<u32>) -> Vec<String> {
    match (e.kind, stmt) {
        (Kind::Text, _) => match e.witness {
            Some(w) => run_all(c, &[w]).await,
            None => Vec::new(),
        },
        (Kind::Cursor, Some(id)) => vec![summarize_fetch(&c.fetch(id, 1).await)],
        (Kind::LongData, Some(id)) => {
            let r = c
                .execute(
                    id,
                    CURSOR_TYPE_NO_CURSOR,
                    &[Param::Long(1), Param::LongData(TYPE_BLOB)],
                    true,
                )
                .await;
            vec![summarize(&[r])]
        }
        _ => Vec::new(),
    }
}

/// A undoes its state.
async fn do_undo(c: &mut RawConn, e: &Entry, stmt: Option<u32>) -> Vec<String> {
    if let Some(id) = stmt {
        c.close_stmt(id).await;
    }
    let mut out = run_all(c, e.undo).await;
    if e.kind != Kind::Text {
        // COM_STMT_CLOSE has no answer: this one shows the session is fine.
        out.extend(run_all(c, &["SELECT 1"]).await);
    }
    out
}

fn describe_diffs(diffs: &[(String, String, String)]) -> String {
    diffs
        .iter()
        .map(|(p, v, d)| {
            format!("\n      probe `{p}`:\n        via proxy {v}\n        direct    {d}")
        })
        .collect()
}

/// Runs one entry; returns its failures (empty: passed) and whether B saw
/// a legitimate pin in phase 1.
async fn run_entry(e: Entry, proxy: String, direct: String) -> (Vec<String>, bool) {
    let mut failures = Vec::new();
    let mut pinned = false;

    // Reference: A's answers on a direct connection.
    let mut da = match login(&direct, A_CAPS, A_COLLATION).await {
        Ok(c) => c,
        Err(err) => return (vec![format!("broken: direct login as A: {err}")], false),
    };
    let (stmt_direct, id_direct) = do_statement(&mut da, &e).await;
    let witness_direct = do_witness(&mut da, &e, id_direct).await;
    let undo_direct = do_undo(&mut da, &e, id_direct).await;
    da.quit().await;

    // A through the proxy.
    let mut a = match login(&proxy, A_CAPS, A_COLLATION).await {
        Ok(c) => c,
        Err(err) => {
            return (
                vec![format!("broken: A's login through the proxy: {err}")],
                false,
            );
        }
    };
    let (stmt_via, id_via) = do_statement(&mut a, &e).await;
    if stmt_via != stmt_direct {
        failures.push(format!(
            "A's answer differs from direct:\n        via proxy {stmt_via}\n        direct    {stmt_direct}"
        ));
    }

    // Phase 1: A holds its state.
    match probe_phase(&proxy, &direct).await {
        Seen::Same => {}
        Seen::Pinned { at, message } => {
            if e.pins {
                pinned = true;
            } else {
                failures.push(format!(
                    "unexpected pin: B got 1317 at `{at}` though the statement must not pin: {message}"
                ));
            }
        }
        Seen::Differs(d) => failures.push(format!(
            "leak while A holds its state:{}",
            describe_diffs(&d)
        )),
        Seen::Broken(m) => failures.push(format!("broken (phase 1): {m}")),
    }

    // A's own state survived B's probes.
    let witness_via = do_witness(&mut a, &e, id_via).await;
    if witness_via != witness_direct {
        failures.push(format!(
            "A lost or changed its state (witness {:?}):\n        via proxy {witness_via:?}\n        direct    {witness_direct:?}",
            e.witness.unwrap_or("binary protocol")
        ));
    }

    // Phase 2: A undid its state.
    let undo_via = do_undo(&mut a, &e, id_via).await;
    if undo_via != undo_direct {
        failures.push(format!(
            "A's undo {:?} differs from direct:\n        via proxy {undo_via:?}\n        direct    {undo_direct:?}",
            e.undo
        ));
    }
    match probe_phase(&proxy, &direct).await {
        Seen::Same => {}
        Seen::Pinned { at, message } => failures.push(format!(
            "stuck pin: B got 1317 at `{at}` after A's undo {:?}: {message}",
            e.undo
        )),
        Seen::Differs(d) => failures.push(format!("leak after A's undo:{}", describe_diffs(&d))),
        Seen::Broken(m) => failures.push(format!("broken (phase 2): {m}")),
    }

    // Phase 3: A is gone.
    a.quit().await;
    match probe_phase(&proxy, &direct).await {
        Seen::Same => {}
        Seen::Pinned { at, message } => failures.push(format!(
            "pool wedged: B got 1317 at `{at}` after A disconnected: {message}"
        )),
        Seen::Differs(d) => {
            failures.push(format!("leak after A disconnected:{}", describe_diffs(&d)))
        }
        Seen::Broken(m) => failures.push(format!("broken (phase 3): {m}")),
    }
    (failures, pinned)
}

async fn start_proxy(db: &MariaDb) -> Proxy {
    Proxy::builder(db)
        .groups(1)
        .max_backend(1)
        .queue_timeout_ms(QUEUE_TIMEOUT_MS)
        .with(|c| c.pool.diagnostics_hold_ms = DIAGNOSTICS_HOLD_MS)
        .start()
        .await
}

/// Drops `proxy` and makes sure none of its backend sessions survive (they
/// may hold locks or open transactions a failed entry left behind), nor a
/// default role a failed `SET DEFAULT ROLE` entry left on the account.
async fn replace_proxy(db: &'static MariaDb, proxy: Proxy) -> Proxy {
    drop(proxy);
    tokio::task::spawn_blocking(move || {
        db.sql(&format!("SET DEFAULT ROLE NONE FOR '{APP_USER}'@'%'"));
        let deadline = Instant::now() + Duration::from_secs(3);
        loop {
            let ids = db.sql(
                "SELECT GROUP_CONCAT(ID) FROM information_schema.PROCESSLIST WHERE USER = 'app'",
            );
            let ids = ids.trim();
            if ids.is_empty() || ids == "NULL" {
                return;
            }
            if Instant::now() >= deadline {
                for id in ids.split(',') {
                    // It may be gone by now: the CLI's error does not matter.
                    let _ = db.cli(&["-N", "-B"], &format!("KILL {id}"));
                }
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    })
    .await
    .expect("clean-up task");
    start_proxy(db).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cross_client_leak_matrix() {
    let db = MariaDb::shared();
    db.sql(SETUP_SQL);
    let direct = db.addr();
    let entries = catalogue();
    assert!(entries.len() >= 80, "the catalogue has {}", entries.len());
    // For development: LEAK_MATRIX_ONLY=<part of an entry name> runs those.
    let entries: Vec<Entry> = match std::env::var("LEAK_MATRIX_ONLY") {
        Ok(only) => entries
            .into_iter()
            .filter(|e| e.name.contains(&only))
            .collect(),
        Err(_) => entries,
    };
    let pinning = entries.iter().filter(|e| e.pins).count();
    eprintln!(
        "leak matrix: {} entries ({pinning} may pin, {} must not)",
        entries.len(),
        entries.len() - pinning
    );

    // The probes are deterministic: two fresh direct connections agree.
    let mut d1 = login(&direct, B_CAPS, B_COLLATION).await.expect("direct");
    let mut d2 = login(&direct, B_CAPS, B_COLLATION).await.expect("direct");
    let p1 = run_probes(&mut d1).await.expect("probes");
    let p2 = run_probes(&mut d2).await.expect("probes");
    d1.quit().await;
    d2.quit().await;
    assert_eq!(p1, p2, "probes differ between two fresh direct connections");

    let mut proxy = start_proxy(db).await;
    let mut report: Vec<String> = Vec::new();

    // Baseline: B through an untouched pool looks like a direct connection.
    match probe_phase(&proxy.addr.to_string(), &direct).await {
        Seen::Same => {}
        other => report.push(format!("baseline (no A at all): {other:?}")),
    }

    let started = Instant::now();
    let mut pinned_ok = 0;
    for e in entries.iter().cloned() {
        let name = e.name.clone();
        let sql = e.sql.clone();
        let t0 = Instant::now();
        let task = tokio::spawn(run_entry(e, proxy.addr.to_string(), direct.clone()));
        let abort = task.abort_handle();
        let (failures, pinned) = match tokio::time::timeout(ENTRY_LIMIT, task).await {
            Ok(Ok(r)) => r,
            Ok(Err(join)) => (vec![format!("broken: the entry panicked: {join}")], false),
            Err(_) => {
                abort.abort();
                (vec![format!("broken: no end after {ENTRY_LIMIT:?}")], false)
            }
        };
        pinned_ok += usize::from(pinned);
        let (known, failures): (Vec<String>, Vec<String>) = failures
            .into_iter()
            .partition(|f| documented(&name, f).is_some());
        for f in &known {
            let why = documented(&name, f).unwrap_or_default();
            eprintln!(
                "    documented difference ({why}): {name}: {}",
                first_line(f)
            );
        }
        eprintln!(
            "  {} {name} ({:.1}s){}",
            if failures.is_empty() { "ok  " } else { "FAIL" },
            t0.elapsed().as_secs_f32(),
            if pinned { " [pinned while held]" } else { "" }
        );
        if !failures.is_empty() {
            let mut msg = format!("{name}\n    sql: {sql:?}");
            for f in &failures {
                let _ = write!(msg, "\n    - {f}");
            }
            eprintln!("    {}", msg.replace('\n', "\n    "));
            report.push(msg);
            proxy = replace_proxy(db, proxy).await;
        }
    }
    eprintln!(
        "leak matrix: {} entries in {:.0}s, {pinned_ok} pinned while A held state, {} failed",
        entries.len(),
        started.elapsed().as_secs_f32(),
        report.len()
    );
    assert!(
        report.is_empty(),
        "{} of {} leak-matrix entries failed:\n\n{}",
        report.len(),
        entries.len(),
        report.join("\n\n")
    );
}
