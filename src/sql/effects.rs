//! What each statement of a COM_QUERY does to the session: the public
//! result of the analysis ([`analyze`]) and its types.
//!
//! Owns the split of a query into statements and the vocabulary of effects.
//! It decides nothing about pinning or replay: callers (the session-state
//! authority) map effects to pins. The analysis is pure and fails closed:
//! when the text cannot be read reliably, `Analysis::incomplete` is set and
//! the caller treats the query as opaque.
//!
//! How statements are counted, as MariaDB 10.11 answers a multi-statement
//! COM_QUERY (checked against the server):
//! - a `;` outside quotes and comments ends a statement, except inside the
//!   `BEGIN … END` (and IF/CASE/LOOP/WHILE/REPEAT/FOR) blocks of a routine
//!   definition or compound statement;
//! - a segment with no tokens is `Kind::Empty`. The server answers it with
//!   OK when it holds a comment, ER_EMPTY_QUERY (1065) when the whole query
//!   is empty, and a syntax error (1064, ending the multi-statement) when it
//!   is an empty segment between statements;
//! - after the last statement, whitespace and further `;` produce no result
//!   and no statement; a trailing comment does (`SELECT 1; -- x` gives two
//!   results);
//! - a compound statement (like CALL) can send several results: one per
//!   result set of its inner statements, then an OK.
//!
//! Names: identifiers are unquoted. User variables, system variables and
//! prepared-statement names are ASCII-lowercased (the server compares them
//! case-insensitively; non-ASCII names are compared byte for byte here,
//! which can only keep a pin longer). Lock names are kept byte for byte:
//! MariaDB 10.11 keys user locks by the raw bytes of the name (an MDL key
//! hashed with the binary collation), so after `GET_LOCK('Abc',0)`,
//! `IS_USED_LOCK('abc')` is NULL and `RELEASE_LOCK('ABC')` releases
//! nothing (checked on 10.11.19; the MariaDB documentation still calls the
//! names case-insensitive). MySQL 8 was not checked. Schema, table and
//! handler names keep their case (it depends on lower_case_table_names).
//!
//! Not supported (callers must treat such sessions as opaque): connection
//! character sets with ASCII-range trail bytes (big5, cp932, gbk, gb18030,
//! sjis; see `lexer`), and sql_mode=ORACLE syntax other than packages.

use std::ops::Range;

use super::reader::Reader;
use super::statement;

pub use super::lexer::LexOptions;

/// The result of [`analyze`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Analysis {
    /// The statements, in order (at least one).
    pub statements: Vec<Statement>,
    /// Something could not be read reliably (an unterminated string,
    /// identifier or comment, a body whose blocks do not add up, a `;`
    /// inside an executable comment, a statement after one that sets
    /// sql_mode, too many statements): treat the whole query as opaque.
    pub incomplete: bool,
}

/// One statement of a query.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Statement {
    /// Its bytes in the query: from the first byte that is not whitespace
    /// (leading comments included) to before its terminating `;`, trailing
    /// whitespace excluded.
    pub span: Range<usize>,
    /// Its leading verb.
    pub kind: Kind,
    /// What it does, in text order.
    pub effects: Vec<Effect>,
    /// Some effect may not have run even if the statement succeeds: it is a
    /// compound statement (branches, loops, handlers, an error part-way), or
    /// part of it is inside an executable comment some servers skip
    /// (`/*!NNNNN` with a MySQL 5.7+ version or one above 10.0, `/*M!`).
    /// Effects that end state (a NULL assignment, RELEASE_LOCK, DROP,
    /// UNLOCK, DEALLOCATE, …) must then not be trusted.
    pub conditional: bool,
}

/// The leading verb of a statement (after leading comments and `(`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Select,
    Insert,
    Update,
    Delete,
    Replace,
    Set,
    Call,
    Do,
    /// BEGIN [WORK], START TRANSACTION.
    Begin,
    Commit,
    /// ROLLBACK, including ROLLBACK TO SAVEPOINT.
    Rollback,
    Savepoint,
    ReleaseSavepoint,
    Use,
    Show,
    Kill,
    LockTables,
    UnlockTables,
    Flush,
    Handler,
    Prepare,
    Execute,
    ExecuteImmediate,
    /// DEALLOCATE PREPARE, DROP PREPARE.
    Deallocate,
    Xa,
    Create,
    Drop,
    Alter,
    Rename,
    Truncate,
    /// LOAD DATA, LOAD XML.
    LoadData,
    Backup,
    GetDiagnostics,
    /// A compound statement run now: `BEGIN NOT ATOMIC … END`, or a
    /// top-level IF, CASE, LOOP, WHILE, REPEAT or FOR.
    Compound,
    /// CREATE [OR REPLACE] [DEFINER=…] [AGGREGATE] PROCEDURE, FUNCTION,
    /// TRIGGER, EVENT, PACKAGE [BODY], and ALTER EVENT: the body is stored,
    /// not run, so no effects are reported.
    RoutineDefinition,
    With,
    Values,
    Table,
    Other,
    /// No tokens (only whitespace and comments).
    Empty,
}

impl Kind {
    /// Statements that run no code and name no table: transaction
    /// control, USE, DEALLOCATE PREPARE, and no statement at all.
    pub fn runs_nothing(self) -> bool {
        matches!(
            self,
            Kind::Begin
                | Kind::Commit
                | Kind::Rollback
                | Kind::Savepoint
                | Kind::ReleaseSavepoint
                | Kind::Use
                | Kind::Deallocate
                | Kind::Empty
        )
    }
}

/// A `[schema.]table` name.
pub type TableName = (Option<Vec<u8>>, Vec<u8>);

/// The scope of a system-variable assignment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scope {
    /// SESSION, LOCAL, `@@session.`, `@@local.`.
    Session,
    /// GLOBAL, PERSIST, PERSIST_ONLY, `@@global.`, `@@persist.`.
    Global,
    /// No scope given: the session value (global for global-only
    /// variables). For SET TRANSACTION: the next transaction only.
    Default,
    /// `@@name` without a scope: the session value, like `Default`, but
    /// MariaDB's session tracker does not report the change (checked on
    /// 10.11: `SET @@sql_mode = …` sends no state-change block while
    /// `SET sql_mode = …` and `SET @@session.sql_mode = …` do).
    Unscoped,
}

/// The target of a KILL.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KillTarget {
    /// `KILL [CONNECTION|QUERY] n` with a literal number.
    Id(u64),
    /// `KILL QUERY ID n` with a literal number.
    QueryId(u64),
    /// `KILL [CONNECTION|QUERY] USER name`.
    User,
    /// `KILL QUERY ID expr` with anything but a literal number.
    QueryIdExpression,
    /// Anything else (an expression, a variable, a hex literal, …).
    Expression,
}

/// A function whose value depends on the session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FuncKind {
    /// LAST_INSERT_ID(); `args` for LAST_INSERT_ID(expr), which also sets it.
    LastInsertId {
        args: bool,
    },
    RowCount,
    FoundRows,
    ConnectionId,
}

/// A call of a [`FuncKind`] function.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Func {
    /// Which function.
    pub kind: FuncKind,
    /// The call in the query, from the name to the closing parenthesis.
    pub span: Range<usize>,
}

/// What a statement does to the session.
///
/// Expression-level effects (`@x := …`, lock functions, [`Func`]) are
/// reported wherever the call appears in a statement that runs now, even
/// where the server might not evaluate it (a WHERE that matches nothing, a
/// branch of IF()): effects that end state from function calls should be
/// confirmed from the result before they are trusted. They are not reported
/// inside stored bodies (routine definitions, CREATE/ALTER VIEW) or EXPLAIN.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Effect {
    /// A user variable is assigned: `SET @x = …`, `@x := …`, `INTO @x`,
    /// a bare `@x` argument of CALL (it may be OUT/INOUT), the `@x` of a
    /// LOAD DATA column list, GET DIAGNOSTICS targets. `null` when the value
    /// is exactly the literal NULL.
    UserVarAssign { name: Vec<u8>, null: bool },
    /// CREATE [OR REPLACE] TEMPORARY TABLE|SEQUENCE [IF NOT EXISTS].
    TempTableCreate {
        schema: Option<Vec<u8>>,
        name: Vec<u8>,
    },
    /// DROP [TEMPORARY] TABLE[S]|SEQUENCE [IF EXISTS] list (a plain DROP
    /// TABLE drops a temporary table of that name first).
    TableDrop {
        temporary: bool,
        tables: Vec<TableName>,
    },
    /// RENAME TABLE a TO b (one effect per pair, in order), or
    /// ALTER TABLE a … RENAME [TO|AS] b.
    TableRename { from: TableName, to: TableName },
    /// GET_LOCK(name, …); `name` is None when the argument is not a plain
    /// string literal. `literal` is that argument as the statement wrote it
    /// (introducer, prefix, quotes and escapes included): the bytes the
    /// server keys the lock by depend on the session's character sets and
    /// sql_mode, so the held-lock check copies the client's own text rather
    /// than rebuilding it from `name`.
    GetLock {
        name: Option<Vec<u8>>,
        literal: Option<Vec<u8>>,
    },
    /// RELEASE_LOCK(name).
    ReleaseLock { name: Option<Vec<u8>> },
    /// RELEASE_ALL_LOCKS().
    ReleaseAllLocks,
    /// LOCK TABLE[S].
    LockTables,
    /// UNLOCK TABLE[S].
    UnlockTables,
    /// FLUSH TABLES … WITH READ LOCK, FLUSH TABLES t FOR EXPORT.
    FlushReadLock,
    /// BACKUP STAGE x; `end` for BACKUP STAGE END.
    BackupStage { end: bool },
    /// BACKUP LOCK t / BACKUP UNLOCK (and MySQL's LOCK/UNLOCK INSTANCE).
    BackupLock { unlock: bool },
    /// HANDLER t OPEN [[AS] alias]: the alias, or the table name.
    HandlerOpen { alias: Vec<u8> },
    /// HANDLER alias CLOSE.
    HandlerClose { alias: Vec<u8> },
    /// PREPARE name FROM … (name lowercased).
    TextPrepare { name: Vec<u8> },
    /// DEALLOCATE PREPARE name / DROP PREPARE name.
    Deallocate { name: Vec<u8> },
    /// EXECUTE name [USING …]: what it runs is not analyzed.
    ExecutePrepared { name: Vec<u8> },
    /// EXECUTE IMMEDIATE: dynamic SQL, opaque.
    ExecuteImmediate,
    /// The statement text of `PREPARE name FROM '…'` or `EXECUTE IMMEDIATE
    /// '…'` when it is a plain string literal, unquoted (emitted right after
    /// TextPrepare / ExecuteImmediate): analyze it to learn what EXECUTE
    /// will do. Absent when the text comes from a variable or expression.
    DynamicSql { text: Vec<u8> },
    /// Any XA statement.
    Xa,
    /// A system variable is assigned in a SET list. `name` is lowercase,
    /// without `@@` and scope (a structured variable keeps its dots:
    /// `keycache1.key_buffer_size`). A scope keyword applies to the
    /// assignments after it until the next one, as the server does (`SET
    /// GLOBAL a=1, b=2` sets both globally). `to_default` when the value is
    /// exactly DEFAULT.
    SetVariable {
        name: Vec<u8>,
        scope: Scope,
        to_default: bool,
    },
    /// SET NAMES … (`names`), SET CHARACTER SET …, SET CHARSET ….
    SetNames { names: bool },
    /// SET PASSWORD, or a SET list this analysis does not understand.
    SetOther,
    /// The statement may change how the server lexes what follows it (and
    /// dynamic SQL it runs itself): it sets the session's sql_mode, or its
    /// client character set to one that is not plainly one of those read
    /// alike (a variable, DEFAULT, big5, cp932, gbk, gb18030, sjis …).
    Relexes,
    /// SET ROLE r | NONE: the session's active role (privileges), which
    /// COM_RESET_CONNECTION does not restore.
    SetRole,
    /// SET DEFAULT ROLE …: the role a *new* login of that user activates.
    SetDefaultRole,
    /// NEXTVAL(s), NEXT VALUE FOR s, `s.nextval`: the
    /// session's LASTVAL(s) / PREVIOUS VALUE FOR s now hold a value.
    Sequence,
    /// A call of a function that may be stored code (or a UDF): a name
    /// that is not built in, or any `schema.name(`. What its body does
    /// (named locks, sequences, roles, variables) is not visible.
    StoredFunction,
    /// May run a view's or a trigger's code while which names do is not
    /// known (set by the session-state authority, never by the analysis):
    /// the backend is reset before it is shared, and nothing is run on it
    /// meanwhile (no probe changes what the client's next statement sees).
    MaybeHiddenCode,
    /// SET [GLOBAL|SESSION] TRANSACTION …; `Scope::Default` is one-shot.
    SetTransaction { scope: Scope },
    /// SET STATEMENT … FOR: the variables revert after the statement; the
    /// inner statement's effects are reported with it. `vars`: the names
    /// (lowercase) the clause sets for the statement's time, `None` when the
    /// clause was not understood (then no report of the reply can be told
    /// temporary from lasting).
    SetStatement { vars: Option<Vec<Vec<u8>>> },
    /// SQL_CALC_FOUND_ROWS (once per statement).
    CalcFoundRows,
    /// CALL: what the procedure does is not analyzed.
    Call,
    /// A session-dependent function call.
    Function(Func),
    /// KILL [HARD|SOFT] [CONNECTION|QUERY [ID]] target | KILL … USER name.
    Kill { query: bool, id_kind: KillTarget },
    /// USE schema.
    Use { schema: Vec<u8> },
}

/// Upper bound on the statements of one query; past it the analysis stops
/// and reports `incomplete`.
pub const MAX_STATEMENTS: usize = 1 << 16;

/// Splits `sql` into statements and reports what each does. Pure, linear in
/// the length of `sql`; allocates only the statement list and the effects
/// it finds.
pub fn analyze(sql: &[u8], opts: LexOptions) -> Analysis {
    read_statements(&mut Reader::new(sql, opts))
}

/// [`analyze`], and the text's digest (`super::digest`) built on the same
/// pass over the text: written into `out` (cleared first, handed back with
/// its hash), the same digest `digest::digest_into` gives.
pub fn analyze_with_digest(sql: &[u8], opts: LexOptions, out: Vec<u8>) -> (Analysis, Vec<u8>, u64) {
    let mut r = Reader::new(sql, opts);
    r.build_digest(out);
    let analysis = read_statements(&mut r);
    let (text, hash) = r.finish_digest().unwrap_or_default();
    (analysis, text, hash)
}

/// The statements of the text `r` reads.
fn read_statements(r: &mut Reader<'_>) -> Analysis {
    let sql = r.sql;
    let mut statements = Vec::new();
    let mut incomplete = false;
    // Everything from here on is whitespace and `;`.
    let trailing = sql.len()
        - sql
            .iter()
            .rev()
            .take_while(|&&c| c == b';' || super::lexer::is_space(c))
            .count();
    let mut segment = 0;
    // A statement changed sql_mode: later statements may be lexed
    // differently by the server (ANSI_QUOTES, NO_BACKSLASH_ESCAPES).
    let mut mode_changed = false;
    // Names prepared from a literal earlier in the query, and whether
    // their text may change how the rest is read.
    let mut prepared: Vec<(Vec<u8>, bool)> = Vec::new();
    loop {
        if mode_changed {
            incomplete = true;
        }
        let first = statements.is_empty();
        if statements.len() >= MAX_STATEMENTS {
            incomplete = true;
            break;
        }
        let next = r.peek_raw();
        let empty_end = match next {
            None => sql.len(),
            Some(t) if t.is_symbol(sql, b";") => t.start,
            Some(_) => {
                r.begin_statement();
                let kind = statement::top(r);
                r.drain_statement();
                let end = r.terminator.unwrap_or(sql.len());
                let mut span = trim(sql, segment, end);
                // An unterminated last token keeps its trailing whitespace.
                span.end = span.end.max(r.prev.map_or(0, |t| t.end));
                statements.push(Statement {
                    span,
                    kind,
                    effects: std::mem::take(&mut r.effects),
                    conditional: r.conditional,
                });
                incomplete |= r.incomplete;
                incomplete |= statements.last().is_some_and(rereads_own_dynamic_sql);
                if let Some(st) = statements.last() {
                    mode_changed = changes_lexing_here(st, &prepared, r.opts);
                    note_prepared(st, &mut prepared, r.opts);
                }
                match r.terminator {
                    Some(t) => {
                        segment = t + 1;
                        if segment >= trailing {
                            break;
                        }
                        continue;
                    }
                    None => break,
                }
            }
        };
        // A segment without tokens.
        let span = trim(sql, segment, empty_end);
        let comment = !span.is_empty();
        let at_end = empty_end >= trailing;
        if first || comment || !at_end {
            statements.push(Statement {
                span,
                kind: Kind::Empty,
                effects: Vec::new(),
                conditional: false,
            });
        }
        if next.is_none() || at_end {
            break;
        }
        r.skip_raw();
        segment = empty_end + 1;
    }
    incomplete |= r.lexer_incomplete();
    Analysis {
        statements,
        incomplete,
    }
}

/// True when the server may lex the statements after `s` otherwise than
/// they were read here: `s` assigns the session's sql_mode (ANSI_QUOTES,
/// NO_BACKSLASH_ESCAPES …) or client character set (a multibyte one can
/// take a backslash or a quote into a character), sets something this
/// analysis did not understand, or runs text it did not read (EXECUTE of a
/// prepared statement, EXECUTE IMMEDIATE). Fail closed: the rest of the
/// query is then incomplete (stored routines restore both settings when
/// they return, so a CALL does not count).
pub fn may_change_lexing(s: &Statement) -> bool {
    s.effects.iter().any(|e| {
        matches!(
            e,
            Effect::Relexes
                | Effect::SetOther
                | Effect::ExecutePrepared { .. }
                | Effect::ExecuteImmediate
        )
    })
}

/// [`may_change_lexing`], knowing the texts of the query: EXECUTE
/// IMMEDIATE of a literal, and EXECUTE of a name prepared from a literal
/// earlier in the same query, change it only when their text may.
fn changes_lexing_here(s: &Statement, prepared: &[(Vec<u8>, bool)], opts: LexOptions) -> bool {
    let literal = s.effects.iter().find_map(|e| match e {
        Effect::DynamicSql { text } => Some(text),
        _ => None,
    });
    s.effects.iter().any(|e| match e {
        Effect::Relexes | Effect::SetOther => true,
        Effect::ExecuteImmediate => literal.is_none_or(|t| text_changes_lexing(t, opts)),
        Effect::ExecutePrepared { name } => prepared
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .is_none_or(|(_, changes)| *changes),
        _ => false,
    })
}

/// Remembers what `s` prepares (PREPARE name FROM …): from a literal, its
/// text's verdict; from anything else, that it may change the reading.
fn note_prepared(s: &Statement, prepared: &mut Vec<(Vec<u8>, bool)>, opts: LexOptions) {
    for (i, e) in s.effects.iter().enumerate() {
        if let Effect::TextPrepare { name } = e {
            let changes = match s.effects.get(i + 1) {
                Some(Effect::DynamicSql { text }) => text_changes_lexing(text, opts),
                _ => true,
            };
            prepared.push((name.clone(), changes));
        }
    }
}

/// True when dynamic SQL `text` may change how the server reads what
/// follows it (or cannot be read).
fn text_changes_lexing(text: &[u8], opts: LexOptions) -> bool {
    let a = analyze(text, opts);
    a.incomplete || a.statements.iter().any(may_change_lexing)
}

/// True when `s` runs dynamic SQL whose text the server may read with
/// other options than the session's: it changes them itself first (a
/// compound statement's SET, `SET STATEMENT sql_mode = … FOR PREPARE …`).
fn rereads_own_dynamic_sql(s: &Statement) -> bool {
    let dynamic = s.effects.iter().any(|e| {
        matches!(
            e,
            Effect::DynamicSql { .. } | Effect::ExecuteImmediate | Effect::TextPrepare { .. }
        )
    });
    dynamic
        && s.effects.iter().any(|e| match e {
            Effect::Relexes | Effect::SetOther => true,
            Effect::SetStatement { vars: None } => true,
            Effect::SetStatement { vars: Some(v) } => v.iter().any(|n| super::set::relexing(n)),
            _ => false,
        })
}

/// `from..to` without leading and trailing whitespace.
fn trim(sql: &[u8], from: usize, to: usize) -> Range<usize> {
    let s = &sql[from..to];
    let lead = s.iter().take_while(|&&c| super::lexer::is_space(c)).count();
    let tail = s[lead..]
        .iter()
        .rev()
        .take_while(|&&c| super::lexer::is_space(c))
        .count();
    from + lead..to - tail
}
