//! `KILL [CONNECTION | QUERY] n` and COM_PROCESS_KILL, where `n` is the
//! proxy connection id the client was told: the target session is ended, or
//! the query it runs is killed on whichever backend thread runs it.
//!
//! Every form a client can send is mapped or refused, never passed to the
//! server (where a number is a server thread id, possibly another client's
//! backend): `KILL <expression>` is evaluated by the server and the value
//! taken as a proxy id; a prepared KILL (COM_STMT_PREPARE) becomes a local
//! statement; `PREPARE s FROM 'KILL …'` prepares a harmless statement under
//! the same name on the server (so the name's lifecycle stays the
//! server's) and `EXECUTE s` runs the mapped KILL.
//!
//! What cannot be planned is refused with ER_NOT_SUPPORTED_YET naming
//! myplex: KILL in a multi-statement, a compound statement, stored code a
//! CREATE would keep (procedure, function, trigger, event) or SET STATEMENT;
//! top-level dynamic SQL whose text is not a literal or an expression the
//! server can compute without effect, dynamic SQL in stored code, compound
//! or multi-statements whose text holds the word KILL, a CALL whose text
//! holds it, dynamic SQL built at run time in stored code, a compound
//! statement or a multi-statement (`kill_dynamic`); a statement that would run
//! stored code that may KILL (the word in its body, a procedure's dynamic
//! SQL built at run time, a body `backend.user` cannot read: learnt by the
//! catalog of stored code, [`Session::stored_code_may_kill`]); such words
//! in a query the lexer cannot read (an unterminated quote, a character set
//! with ASCII-range trail bytes and non-ASCII text); and, for queries of
//! 16 MiB or more, such words past the first 64 KiB (`large`).
//! Where a KILL with a server thread id reaches no other account's client,
//! or with `pool.allow_unplannable_kill`, the run-time forms go through.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;

use super::{End, Session};
use crate::protocol::packets::ErrPacket;
use crate::session_state::code_names;

/// Longest KILL expression planned (a prepared KILL keeps its expression
/// for the statement's life without any backend holding it; a thread id
/// needs no more).
const MAX_EXPRESSION: usize = 1024;
/// How long a KILL CONNECTION waits for its victims' sessions to end
/// before it answers.
const KILL_WAIT: Duration = Duration::from_secs(2);
/// How long a statement that may run stored code waits for a catalog of it
/// while none can be trusted (a procedure created a moment ago is read within ~100 ms).
const CATALOG_WAIT: Duration = Duration::from_secs(3);
/// The refusal of a statement that may run stored code while no catalog
/// of it can be trusted.
const CATALOG_UNKNOWN: &str = "a statement that may run stored code while myplex does not know which procedures, functions, triggers or views may KILL server threads (its catalog of stored code is unknown: /status, code_catalog)";
/// The refusal of an event whose body may change the catalog when it runs.
const EVENT_CHANGES_CODE: &str = "an event whose body may create or change views, triggers or stored routines (DDL, dynamic SQL or a CALL) through myplex";
/// The refusal of a statement whose stored code may run an unplanned KILL.
const STORED_CODE_KILL: &str = "a statement running stored code that may KILL server threads (KILL in its body, dynamic SQL built at run time, or a body myplex cannot read) through myplex";

/// A KILL the proxy carries out: connection or query of a proxy session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kill {
    /// KILL QUERY (else CONNECTION).
    pub query: bool,
    /// Whose: a proxy connection id, or every session of a user.
    pub target: Target,
}

/// What a KILL names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A proxy connection id (what CONNECTION_ID() told the client).
    Id(u64),
    /// `KILL [CONNECTION|QUERY] USER name[@host]`: that user's proxy
    /// sessions (from that host, when one is named).
    User(Vec<u8>, Option<Vec<u8>>),
    /// `KILL [CONNECTION|QUERY] expr`: the server evaluates `expr` (as the
    /// server's KILL would, as an unsigned integer); the value is a proxy id.
    Expr(String),
    /// `KILL QUERY ID n`: a server query id, carried out only when the query
    /// is a statement of a proxy session the client may kill.
    QueryId(u64),
    /// `KILL QUERY ID expr`.
    QueryIdExpr(String),
}

/// KILL statements a client prepared, carried out by the proxy when
/// executed (the server never sees them).
#[derive(Debug, Default)]
pub(super) struct PreparedKills {
    /// By client statement id (COM_STMT_PREPARE).
    by_id: HashMap<u32, PreparedKill>,
    /// By SQL statement name (`PREPARE name FROM 'KILL …'`), lowercased.
    by_name: HashMap<Vec<u8>, Kill>,
}

impl PreparedKills {
    /// True when the client prepared no KILL.
    pub(super) fn is_empty(&self) -> bool {
        self.by_id.is_empty() && self.by_name.is_empty()
    }
}

/// A KILL prepared with COM_STMT_PREPARE.
#[derive(Debug, Clone)]
struct PreparedKill {
    kill: Kill,
    /// Its `?` placeholders.
    params: usize,
    /// The parameter types the client bound last (the server keeps them
    /// for executes that send none).
    types: Option<Vec<u8>>,
    /// COM_STMT_SEND_LONG_DATA sent a value since the last execute: not
    /// read (a thread id is short), so that execute is refused.
    long_data: bool,
}

impl Kill {
    /// The expression the server computes the id from, if any.
    fn expr(&self) -> Option<&str> {
        match &self.target {
            Target::Expr(e) | Target::QueryIdExpr(e) => Some(e),
            _ => None,
        }
    }

    /// Its `?` placeholders.
    fn placeholders(&self, opts: crate::sql::lexer::LexOptions) -> usize {
        self.expr()
            .map_or(0, |e| super::kill_params::placeholders(e, opts))
    }

    /// The KILL with `args` in place of its placeholders; `None` when
    /// their number differs (the server's ER_WRONG_ARGUMENTS) or the bound
    /// expression is longer than [`MAX_EXPRESSION`].
    fn bound(&self, args: &[String], opts: crate::sql::lexer::LexOptions) -> Option<Kill> {
        let Some(e) = self.expr() else {
            return args.is_empty().then(|| self.clone());
        };
        let e = super::kill_params::bind(e, args, opts).filter(|e| e.len() <= MAX_EXPRESSION)?;
        let target = match self.target {
            Target::QueryIdExpr(_) => Target::QueryIdExpr(e),
            _ => Target::Expr(e),
        };
        Some(Kill {
            query: self.query,
            target,
        })
    }
}

/// What to do with a query that contains KILL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KillPlan {
    /// Carry it out against proxy sessions.
    Run(Kill),
    /// `PREPARE name FROM '<one KILL>'`: send `sql` instead (the same
    /// PREPARE of a statement that does nothing); `EXECUTE name` runs
    /// `kill`.
    Prepare {
        /// Statement name, lowercased.
        name: Vec<u8>,
        /// What EXECUTE carries out.
        kill: Kill,
        /// The PREPARE to forward.
        sql: Vec<u8>,
    },
    /// Refuse it: it cannot be mapped to proxy sessions (it would reach
    /// server threads that serve other clients).
    Refuse(&'static str),
    /// Answer with the error the server always gives for this form.
    Fail(ErrPacket),
    /// PREPARE / EXECUTE IMMEDIATE of text from an expression without
    /// effects: compute it on the server, then plan the text
    /// (`Session::resolve_dynamic`).
    Resolve {
        /// The expression, as the client wrote it.
        expr: String,
        /// For PREPARE: the statement name and the query up to the text
        /// (with a stand-in text appended, the PREPARE to forward when the
        /// text is one mappable KILL).
        stand_in: Option<(Vec<u8>, Vec<u8>)>,
    },
}

/// Decides what a query containing KILL statements means. `None` when the
/// query contains no KILL, typed or in dynamic SQL. Every KILL is either
/// mapped to proxy sessions or refused: a server thread id never reaches
/// the server from a client. The word KILL anywhere but as the query's one
/// KILL statement (a multi-statement, a compound statement, stored code a
/// CREATE would keep, SET STATEMENT … FOR) is refused; dynamic SQL is
/// planned by [`super::kill_dynamic`]. `allow_unplanned`
/// ([`Session::allow_unplanned_kill`]) lets dynamic SQL built at run time
/// in stored code, a compound statement or a multi-statement reach the
/// server.
pub fn plan(
    sql: &[u8],
    analysis: &crate::sql::Analysis,
    opts: crate::sql::LexOptions,
    allow_unplanned: bool,
) -> Option<KillPlan> {
    use crate::sql::Kind;
    if analysis.incomplete && !crate::sql::scan::words(sql).is_empty() {
        // The tokens are not to be trusted (an unterminated quote, a
        // statement after one that changed sql_mode, …).
        return Some(KillPlan::Refuse(
            "KILL or dynamic SQL in a query myplex cannot read completely",
        ));
    }
    let toks: Vec<_> = crate::sql::lexer::Lexer::new(sql, opts).collect();
    let kill_word = toks.iter().any(|t| t.is_word(sql, b"kill"));
    let dyns = crate::sql::dynamic::texts(sql, &toks, opts);
    let single = match analysis.statements.as_slice() {
        [s] if !analysis.incomplete => Some(s),
        _ => None,
    };
    if !kill_word && dyns.is_empty() {
        // A procedure may run its arguments as dynamic SQL: a CALL that
        // passes the word KILL (in a string) is refused like dynamic SQL in
        // stored code that holds it.
        let call = toks.iter().any(|t| t.is_word(sql, b"call"));
        return (call && crate::sql::scan::words(sql).has(crate::sql::scan::Found::KILL))
            .then_some(KillPlan::Refuse(
                "CALL with the word KILL in its arguments through myplex",
            ));
    }
    if kill_word {
        return Some(match single {
            Some(s) if s.kind == Kind::Kill => plan_kill(sql, s, opts),
            Some(_) => KillPlan::Refuse(
                "KILL inside stored code, a compound statement or SET STATEMENT through myplex",
            ),
            None => KillPlan::Refuse("KILL inside a multi-statement through myplex"),
        });
    }
    super::kill_dynamic::plan(sql, &toks, single, &dyns, opts, allow_unplanned)
}

/// The plan of a query that is one KILL statement.
fn plan_kill(sql: &[u8], kill: &crate::sql::Statement, opts: crate::sql::LexOptions) -> KillPlan {
    use crate::sql::{Effect, KillTarget};
    let effect = kill.effects.iter().find_map(|e| match e {
        Effect::Kill { query, id_kind } => Some((*query, *id_kind)),
        _ => None,
    });
    match effect {
        Some((query, KillTarget::Id(id))) => KillPlan::Run(Kill {
            query,
            target: Target::Id(id),
        }),
        Some((query, KillTarget::User)) => {
            match kill_user_name(sql.get(kill.span.clone()).unwrap_or(&[])) {
                Some((u, h)) => KillPlan::Run(Kill {
                    query,
                    target: Target::User(u, h),
                }),
                None => KillPlan::Refuse("KILL USER with this user name through myplex"),
            }
        }
        Some((query, KillTarget::QueryId(id))) => KillPlan::Run(Kill {
            query,
            target: Target::QueryId(id),
        }),
        Some((query, kind @ (KillTarget::Expression | KillTarget::QueryIdExpression))) => {
            let by_query_id = kind == KillTarget::QueryIdExpression;
            let stmt = sql.get(kill.span.clone()).unwrap_or(&[]);
            if by_query_id && query_id_user(stmt, opts) {
                // The server reads USER there as a column of no table.
                return KillPlan::Fail(ErrPacket::new(
                    1054,
                    "42S22",
                    "Unknown column 'user' in 'KILL'",
                ));
            }
            match kill_expression(stmt, by_query_id, opts) {
                Some(e) if by_query_id => KillPlan::Run(Kill {
                    query,
                    target: Target::QueryIdExpr(e),
                }),
                Some(e) => KillPlan::Run(Kill {
                    query,
                    target: Target::Expr(e),
                }),
                None => KillPlan::Refuse("KILL with this expression through myplex"),
            }
        }
        None => KillPlan::Refuse("KILL with an expression through myplex"),
    }
}

/// `KILL … QUERY ID USER name`.
fn query_id_user(stmt: &[u8], opts: crate::sql::LexOptions) -> bool {
    let toks: Vec<_> = crate::sql::lexer::Lexer::new(stmt, opts).collect();
    toks.windows(3).any(|w| {
        w[0].is_word(stmt, b"query") && w[1].is_word(stmt, b"id") && w[2].is_word(stmt, b"user")
    })
}

/// The expression of `KILL [HARD|SOFT] [CONNECTION|QUERY [ID]] expr`, when the
/// server can be asked its value without anything else happening: valid
/// UTF-8, no executable comments, and no effect on the session (no
/// assignment, lock or other state change when evaluated).
fn kill_expression(stmt: &[u8], query_id: bool, opts: crate::sql::LexOptions) -> Option<String> {
    use crate::sql::lexer::{Lexer, TokenKind};
    use crate::sql::{Effect, FuncKind};
    let toks: Vec<_> = Lexer::new(stmt, opts).collect();
    if toks.iter().any(|t| t.in_exec) {
        return None;
    }
    let mut i = 0;
    let word = |i: usize, w: &[u8]| toks.get(i).is_some_and(|t| t.is_word(stmt, w));
    if !word(i, b"kill") {
        return None;
    }
    i += 1;
    if word(i, b"hard") || word(i, b"soft") {
        i += 1;
    }
    if word(i, b"connection") || word(i, b"query") {
        i += 1;
    }
    if query_id && word(i, b"id") {
        i += 1;
    }
    let mut last = toks.len();
    while last > i && toks[last - 1].is_symbol(stmt, b";") {
        last -= 1;
    }
    if last <= i || toks[i].kind == TokenKind::Symbol && toks[i].is_symbol(stmt, b";") {
        return None;
    }
    let expr = std::str::from_utf8(&stmt[toks[i].start..toks[last - 1].end]).ok()?;
    if expr.len() > MAX_EXPRESSION {
        return None;
    }
    let probe = format!("SELECT ({expr})");
    let a = crate::sql::analyze(probe.as_bytes(), opts);
    let pure = !a.incomplete
        && a.statements.len() == 1
        && a.statements.iter().flat_map(|s| &s.effects).all(|e| {
            // CONNECTION_ID() is replaced by the proxy id before asking.
            matches!(e, Effect::Function(f) if f.kind == FuncKind::ConnectionId)
        });
    pure.then(|| expr.to_string())
}

/// [`plan`] for a query's text, lexed with the session's options. Cheap
/// for the common case: text without the words KILL, PREPARE or IMMEDIATE
/// (anywhere, strings included) is not lexed. In a character set the lexer
/// cannot read (big5, cp932, gbk, gb18030, sjis) such a query with a byte
/// of 0x80 or more is refused, and so is a query with the word KILL under
/// sql_mode=ORACLE.
pub fn plan_for(
    sql: &[u8],
    state: &crate::session_state::TrackedState,
    status: u16,
    allow_unplanned: impl FnOnce() -> bool,
) -> Option<KillPlan> {
    if crate::sql::scan::words(sql).is_empty() {
        return None;
    }
    if super::kill_dynamic::unreadable(sql, state) {
        return Some(KillPlan::Refuse(
            "KILL, PREPARE or EXECUTE IMMEDIATE in text myplex cannot read (non-ASCII text in big5, cp932, gbk, gb18030 or sjis, or KILL under sql_mode=ORACLE)",
        ));
    }
    if crate::sql::scan::glued_to_high_byte(sql) {
        return Some(KillPlan::Refuse(
            "KILL, PREPARE or IMMEDIATE next to a byte from 0x80 up (a space or symbol in some character sets)",
        ));
    }
    let opts = crate::session_state::authority::lex_options(state, status);
    plan(
        sql,
        &crate::sql::analyze(sql, opts),
        opts,
        allow_unplanned(),
    )
}

/// True when a routine definition (CREATE … / ALTER EVENT) may define an
/// event, whose body the server runs later on its own: the first of
/// PROCEDURE, FUNCTION, TRIGGER, EVENT, PACKAGE among its words is EVENT,
/// or one of them is in a version comment the server may skip
/// (`CREATE /*!50700 PROCEDURE */ EVENT …`).
fn defines_event(sql: &[u8], toks: &[crate::sql::lexer::Token]) -> bool {
    const WHAT: [&[u8]; 5] = [b"procedure", b"function", b"trigger", b"event", b"package"];
    let what = |t: &&crate::sql::lexer::Token| WHAT.iter().any(|w| t.is_word(sql, w));
    toks.iter().filter(|t| t.gated).any(|t| what(&t))
        || toks
            .iter()
            .find(what)
            .is_some_and(|t| t.is_word(sql, b"event"))
}

/// The account of `KILL … USER name[@host]` (quotes removed; no host
/// means any).
fn kill_user_name(stmt: &[u8]) -> Option<(Vec<u8>, Option<Vec<u8>>)> {
    let text = std::str::from_utf8(stmt).ok()?;
    let lower = text.to_ascii_lowercase();
    let at = lower
        .match_indices("user")
        .map(|(i, _)| i)
        .filter(|&i| {
            let before = lower[..i].chars().last();
            let after = lower[i + 4..].chars().next();
            before.is_some_and(char::is_whitespace) && after.is_some_and(char::is_whitespace)
        })
        .last()?;
    let rest = text[at + 4..].trim().trim_end_matches(';').trim();
    let (name, rest) = account_part(rest)?;
    let host = match rest.strip_prefix('@') {
        Some(h) => Some(account_part(h.trim_start())?.0),
        None => None,
    };
    (!name.is_empty()).then(|| {
        (
            name.as_bytes().to_vec(),
            host.map(|h| h.as_bytes().to_vec()),
        )
    })
}

/// One part of an account name (quoted or bare) and what follows it.
fn account_part(s: &str) -> Option<(&str, &str)> {
    match s.chars().next()? {
        q @ ('\'' | '"' | '`') => {
            let end = s[1..].find(q)?;
            Some((&s[1..1 + end], &s[2 + end..]))
        }
        _ => {
            let end = s.find(['@', ' ', ';']).unwrap_or(s.len());
            Some((&s[..end], &s[end..]))
        }
    }
}

/// Whether a client at `ip` is `host` as the server names client hosts
/// (loopback clients are `localhost`; others by address, names are not
/// resolved).
fn host_matches(host: &[u8], ip: Option<std::net::IpAddr>) -> bool {
    let Some(ip) = ip else { return false };
    let host = String::from_utf8_lossy(host).to_ascii_lowercase();
    host == "%" || (ip.is_loopback() && host == "localhost") || host == ip.to_string()
}

/// ER_NOT_SUPPORTED_YET with the server's wording.
pub fn refused(what: &str) -> ErrPacket {
    ErrPacket::new(
        1235,
        "42000",
        format!("This version of MariaDB doesn't yet support '{what}'"),
    )
}

fn unknown_thread(id: u64) -> ErrPacket {
    ErrPacket::new(1094, "HY000", format!("Unknown thread id: {id}"))
}

impl Session {
    /// True when a KILL myplex cannot plan may run for this session: its
    /// backends' account serves no other account's clients (a server
    /// thread id then reaches only threads this account may end directly
    /// too), or `pool.allow_unplannable_kill` is on.
    pub(super) fn allow_unplanned_kill(&self) -> bool {
        if self.shared.config.load().pool.allow_unplannable_kill {
            return true;
        }
        // Shared: another `[[users]]` entry (removed ones included, whose
        // sessions may still run) logs in with the same credentials, or
        // another credential pool (a server user, other credentials) logs
        // in as the same account.
        let credential = self.user.pool;
        !self.shared.users.load().shares_pool(credential)
            && !self.shared.pool.shares_account(credential)
    }

    /// Refuses (with the reason) a statement text that may run stored code
    /// whose KILL myplex cannot plan: a CALLed procedure, a function, a
    /// table's trigger or a view holding the word KILL, dynamic SQL built
    /// at run time, or a body `backend.user` cannot read (see
    /// `CodeNames::may_kill`); such a KILL takes server thread ids, which
    /// may name backends serving other accounts' clients. While the
    /// catalog is unknown the set read last judges, unless a statement
    /// sent since may have made code reaching a KILL it does not show
    /// (`CodeCatalog::for_kill`: an ordinary DDL statement waiting on a
    /// lock does not stop shared accounts); without such a set a statement
    /// that may run stored code ([`code_names::may_run_unknown_code`])
    /// waits for a reading (up to [`CATALOG_WAIT`]) and is refused without
    /// one, at once where none will come (`code_catalog_refresh_ms = 0`, a
    /// reading that cannot see everything). Only where
    /// [`Self::allow_unplanned_kill`] is false. For
    /// every account, a statement that may define an event whose body may
    /// change the catalog when it runs (later, where no statement through
    /// the proxy marks the catalog stale, so that a view or trigger it made
    /// would be judged by the old set: its locks, variables or KILL unseen)
    /// is refused: see [`Self::may_define_such_event`].
    pub(super) async fn stored_code_may_kill(&self, sql: &[u8]) -> Option<&'static str> {
        let schema = self.state.schema.as_deref().unwrap_or_default();
        let catalog = &self.shared.pool.code_catalog;
        // In a character set whose trail bytes look like ASCII, a name's
        // run may not be where the matcher looks: any non-ASCII text is a
        // hit while some code may kill.
        let unreadable = || super::kill_dynamic::unreadable(sql, &self.state);
        // The server compares routine names accent- and case-insensitively
        // (`kè` is `ke`), the matcher by their ASCII runs: a name with
        // non-ASCII bytes may be one of them.
        let non_ascii_name = || {
            let opts = crate::session_state::authority::lex_options(&self.state, self.status);
            crate::sql::lexer::Lexer::new(sql, opts).any(|t| {
                matches!(
                    t.kind,
                    crate::sql::lexer::TokenKind::Word | crate::sql::lexer::TokenKind::QuotedIdent
                ) && t.text(sql).iter().any(|b| *b >= 0x80)
            })
        };
        let hit = |n: &code_names::CodeNames| {
            n.may_kill(sql, schema)
                || (n.may_reach_killers(sql, schema) && (unreadable() || non_ascii_name()))
        };
        let scan = code_names::DdlScan::of(sql);
        if scan.event_may_change() && self.may_define_such_event(sql) {
            return Some(EVENT_CHANGES_CODE);
        }
        if let Some(hit) = catalog.peek(|n| n.map(hit)) {
            return (hit && !self.allow_unplanned_kill() && self.may_run_code(sql))
                .then_some(STORED_CODE_KILL);
        }
        if self.allow_unplanned_kill() {
            return None;
        }
        if let Some(n) = catalog.for_kill() {
            return (hit(&n) && self.may_run_code(sql)).then_some(STORED_CODE_KILL);
        }
        // No set to judge by: fail closed for what may run code.
        if !scan.call && !self.may_run_unknown_code(sql) {
            return None;
        }
        let never_read = self.shared.config.load().pool.code_catalog_refresh_ms == 0;
        let names = if never_read || catalog.is_blind() {
            None
        } else {
            catalog.known_within(CATALOG_WAIT).await
        };
        match names {
            Some(n) => (hit(&n) && self.may_run_code(sql)).then_some(STORED_CODE_KILL),
            None => Some(CATALOG_UNKNOWN),
        }
    }

    /// False when every statement of `sql` is one that names stored code
    /// without running it (DROP, CREATE of a routine, SHOW, USE, the end of
    /// a transaction …), read completely: dropping or showing a procedure
    /// that may KILL is not refused. Asked only of a text that names one.
    fn may_run_code(&self, sql: &[u8]) -> bool {
        use crate::sql::Kind;
        let opts = crate::session_state::authority::lex_options(&self.state, self.status);
        let a = crate::sql::analyze(sql, opts);
        let event = |s: &crate::sql::Statement| {
            let text = sql.get(s.span.clone()).unwrap_or(sql);
            let toks: Vec<_> = crate::sql::lexer::Lexer::new(text, opts).collect();
            defines_event(text, &toks)
        };
        a.incomplete
            || a.statements.iter().any(|s| {
                let text = sql.get(s.span.clone()).unwrap_or(sql);
                (s.kind == Kind::RoutineDefinition && event(s))
                    // `SHOW … WHERE f(…)` runs a function.
                    || (s.kind == Kind::Show && text.contains(&b'('))
                    || !(s.kind.runs_nothing()
                        || matches!(s.kind, Kind::Drop | Kind::RoutineDefinition | Kind::Show))
            })
    }

    /// Whether some statement of `sql` may run stored code while nothing
    /// is known about which names do (a text not read completely may).
    fn may_run_unknown_code(&self, sql: &[u8]) -> bool {
        let opts = crate::session_state::authority::lex_options(&self.state, self.status);
        let a = crate::sql::analyze(sql, opts);
        a.incomplete
            || a.statements.iter().any(|s| {
                let text = sql.get(s.span.clone()).unwrap_or(sql);
                code_names::may_run_unknown_code(s.kind, text)
            })
    }

    /// Whether `sql`, whose words name an event and a change of the code
    /// catalog (`DdlScan::event_may_change`), may define such an event,
    /// now or later: true unless it is read completely and every
    /// statement is plain DML, DDL of tables or views, or a statement that
    /// runs nothing (fail closed: a routine's definition — which may create
    /// the event when called —, dynamic SQL, `SET STATEMENT … FOR`, a
    /// compound statement, a `CALL` all count).
    fn may_define_such_event(&self, sql: &[u8]) -> bool {
        use crate::sql::Kind;
        let opts = crate::session_state::authority::lex_options(&self.state, self.status);
        let a = crate::sql::analyze(sql, opts);
        let plain_set = |s: &crate::sql::Statement| {
            let text = sql.get(s.span.clone()).unwrap_or(sql);
            !crate::sql::lexer::Lexer::new(text, opts).any(|t| t.is_word(text, b"for"))
        };
        a.incomplete
            || a.statements.iter().any(|s| match s.kind {
                Kind::Set => !plain_set(s),
                Kind::Select
                | Kind::Insert
                | Kind::Update
                | Kind::Delete
                | Kind::Replace
                | Kind::Create
                | Kind::Drop
                | Kind::Rename
                | Kind::Truncate
                | Kind::Show
                | Kind::Do => false,
                k => !k.runs_nothing(),
            })
    }

    /// COM_STMT_PREPARE of a KILL: a statement of the proxy's own, with no
    /// columns and one parameter per `?`, described as the server
    /// describes them.
    pub(super) async fn prepare_kill(&mut self, seq: u8, k: Kill) -> Result<(), End> {
        if let Some(e) = self.stmt_count_full() {
            return self.send_err(seq, &e).await;
        }
        let opts = crate::session_state::authority::lex_options(&self.state, self.status);
        let params = k.placeholders(opts);
        let Ok(n) = u16::try_from(params) else {
            return self
                .send_err(seq, &refused("a KILL with that many parameters"))
                .await;
        };
        self.next_stmt = self.next_stmt.wrapping_add(1).max(1);
        let id = self.next_stmt;
        self.kills.by_id.insert(
            id,
            PreparedKill {
                kill: k,
                params,
                types: None,
                long_data: false,
            },
        );
        self.last_prepared = Some(id);
        let mut ok = Vec::with_capacity(12);
        ok.push(0);
        ok.extend_from_slice(&id.to_le_bytes());
        ok.extend_from_slice(&[0, 0]);
        ok.extend_from_slice(&n.to_le_bytes());
        ok.extend_from_slice(&[0, 0, 0]);
        self.client.send_packet(seq, &ok).await?;
        if params > 0 {
            // The server's definition of a KILL's parameter: name `?`,
            // binary, type NULL.
            const PARAM: &[u8] =
                b"\x03def\x00\x00\x00\x01?\x00\x0c\x3f\x00\x00\x00\x00\x00\x06\x80\x00\x00\x00\x00";
            let mut seq = seq;
            for _ in 0..params {
                seq = seq.wrapping_add(1);
                self.client.send_packet(seq, PARAM).await?;
            }
            if !self.caps.deprecate_eof() {
                let mut eof = bytes::BytesMut::with_capacity(5);
                crate::protocol::packets::eof_payload(&mut eof, 0, self.status);
                self.client.send_packet(seq.wrapping_add(1), &eof).await?;
            }
        }
        Ok(())
    }

    /// A statement command naming a prepared KILL: carried out here.
    /// `None` when the statement is not one (the caller goes on).
    pub(super) async fn prepared_kill_command(
        &mut self,
        cmd: u8,
        id: Option<u32>,
        seq: u8,
        payload: &[u8],
    ) -> Result<Option<bool>, End> {
        use crate::protocol::command::*;
        let Some((id, p)) = id.and_then(|i| Some((i, self.kills.by_id.get(&i)?.clone()))) else {
            return Ok(None);
        };
        match cmd {
            COM_STMT_EXECUTE | COM_STMT_BULK_EXECUTE => {
                if let Some(held) = self.kills.by_id.get_mut(&id) {
                    held.long_data = false;
                }
                let k = if p.params == 0 {
                    Some(p.kill)
                } else if cmd == COM_STMT_EXECUTE && !p.long_data {
                    match super::kill_params::binary_args(payload, p.params, p.types.as_deref()) {
                        Ok((args, types)) => {
                            if let Some(held) = self.kills.by_id.get_mut(&id) {
                                held.types = Some(types);
                            }
                            let opts = crate::session_state::authority::lex_options(
                                &self.state,
                                self.status,
                            );
                            p.kill.bound(&args, opts)
                        }
                        Err(_) => None,
                    }
                } else {
                    None
                };
                let Some(k) = k else {
                    let e = ErrPacket::new(1210, "HY000", super::kill_params::WRONG_ARGUMENTS_STMT);
                    self.send_err(seq, &e).await?;
                    return Ok(Some(false));
                };
                return Box::pin(self.kill(seq, k)).await.map(Some);
            }
            COM_STMT_CLOSE => {
                self.kills.by_id.remove(&id);
            }
            COM_STMT_RESET => self.send_ok(seq).await?,
            COM_STMT_FETCH => {
                let e = ErrPacket::new(
                    1421,
                    "HY000",
                    format!("The statement ({id}) has no open cursor"),
                );
                self.send_err(seq, &e).await?;
            }
            // SEND_LONG_DATA never gets a reply; the next execute refuses
            // what it sent.
            COM_STMT_SEND_LONG_DATA => {
                if let Some(held) = self.kills.by_id.get_mut(&id) {
                    held.long_data = true;
                }
            }
            _ => {}
        }
        Ok(Some(false))
    }

    /// A text query while SQL-prepared KILLs exist: `EXECUTE name` of one
    /// runs it here; PREPARE / DEALLOCATE of the name forget it (the server
    /// replaces or drops its stand-in the same way). `None` = go on.
    pub(super) async fn sql_prepared_kill(
        &mut self,
        seq: u8,
        sql: &[u8],
    ) -> Result<Option<bool>, End> {
        use crate::sql::Effect;
        if self.kills.by_name.is_empty() {
            return Ok(None);
        }
        let opts = crate::session_state::authority::lex_options(&self.state, self.status);
        let a = crate::sql::analyze(sql, opts);
        if let [stmt] = a.statements.as_slice() {
            let named = stmt.effects.iter().find_map(|e| match e {
                Effect::ExecutePrepared { name } => self.kills.by_name.get(name).cloned(),
                _ => None,
            });
            if let Some(k) = named {
                // `EXECUTE s USING …`: the values take the placeholders'
                // places (only values that change nothing in the session).
                let text = sql.get(stmt.span.clone()).unwrap_or(sql);
                let toks: Vec<_> = crate::sql::lexer::Lexer::new(text, opts).collect();
                let args =
                    super::kill_params::using_args(text, &toks, super::kill_dynamic::expression);
                let Some(args) = args else {
                    let e = refused(
                        "a KILL's USING value that is not a literal, a variable or a function without effects, through myplex",
                    );
                    self.send_err(seq, &e).await?;
                    return Ok(Some(false));
                };
                let Some(k) = k.bound(&args, opts) else {
                    let e =
                        ErrPacket::new(1210, "HY000", super::kill_params::WRONG_ARGUMENTS_EXECUTE);
                    self.send_err(seq, &e).await?;
                    return Ok(Some(false));
                };
                return Box::pin(self.kill(seq, k)).await.map(Some);
            }
        }
        for e in a.statements.iter().flat_map(|s| &s.effects) {
            if let Effect::TextPrepare { name } | Effect::Deallocate { name } = e {
                self.kills.by_name.remove(name);
            }
        }
        Ok(None)
    }

    /// `PREPARE name FROM 'KILL …'`: remembered under its name; the server
    /// prepares the stand-in (`sql`).
    pub(super) fn remember_sql_kill(&mut self, name: Vec<u8>, k: Kill) {
        self.kills.by_name.insert(name, k);
    }

    /// Prepared KILLs held (COM_STMT_PREPARE).
    pub(super) fn prepared_kill_count(&self) -> usize {
        self.kills.by_id.len()
    }

    /// Forgets every prepared KILL (COM_RESET_CONNECTION, change of user).
    pub(super) fn forget_prepared_kills(&mut self) {
        self.kills = PreparedKills::default();
    }

    /// Runs a KILL for this client.
    pub(super) async fn kill(&mut self, seq: u8, k: Kill) -> Result<bool, End> {
        // A proxy id, or the user whose sessions are meant.
        // KILL USER reports how many sessions it reached.
        let by_user = matches!(k.target, Target::User(..));
        let (id, user) = match &k.target {
            Target::QueryId(q) => return self.kill_query_id(seq, *q).await,
            Target::QueryIdExpr(e) => {
                return match self.kill_id_of(seq, e).await? {
                    Some(q) => self.kill_query_id(seq, q).await,
                    None => Ok(false),
                };
            }
            Target::Id(id) => (Some(*id), None),
            Target::Expr(e) => match self.kill_id_of(seq, e).await? {
                Some(id) => (Some(id), None),
                None => return Ok(false),
            },
            Target::User(u, h) => (None, Some((u.clone(), h.clone()))),
        };
        let targets: Vec<(u32, super::SessionHandle)> = match (id, user) {
            (Some(id), _) => {
                let t = u32::try_from(id)
                    .ok()
                    .and_then(|i| Some((i, self.shared.sessions.lock().ok()?.get(&i).cloned()?)));
                match t {
                    Some(t) => vec![t],
                    None => {
                        self.send_err(seq, &unknown_thread(id)).await?;
                        return Ok(false);
                    }
                }
            }
            (None, u) => {
                let (name, host) = u.unwrap_or_default();
                let name = String::from_utf8_lossy(&name).into_owned();
                let mut v: Vec<_> = self
                    .shared
                    .sessions
                    .lock()
                    .map(|m| {
                        m.iter()
                            .filter(|(_, h)| h.user.lock().is_ok_and(|n| *n == name))
                            .filter(|(_, h)| host.as_deref().is_none_or(|a| host_matches(a, h.ip)))
                            .map(|(i, h)| (*i, h.clone()))
                            .collect()
                    })
                    .unwrap_or_default();
                v.sort_by_key(|(i, _)| *i);
                v
            }
        };
        let me = self.user.name.clone();
        let others = targets
            .iter()
            .any(|(_, t)| t.user.lock().map(|u| *u != me).unwrap_or(true));
        let admin = self.user.admin
            || (others
                && match self.server_grants_kill(seq).await? {
                    Some(granted) => granted,
                    None => return Ok(false),
                });
        let mut kill_self = false;
        let reached = targets.len() as u64;
        let mut ids = Vec::with_capacity(targets.len());
        for (id, target) in targets {
            let owner = target.user.lock().map(|u| u.clone()).unwrap_or_default();
            if owner != me && !admin {
                let e = ErrPacket::new(1095, "HY000", format!("You are not owner of thread {id}"));
                self.send_err(seq, &e).await?;
                return Ok(false);
            }
            if !k.query && id == self.id {
                kill_self = true;
                continue;
            }
            if id != self.id {
                // The target ends the statement it runs now, and only
                // that one, itself: it sends a thread KILL QUERY while it
                // waits for that statement's answer and goes on only once
                // the KILL is done (the server forgets a KILL QUERY that
                // finds the thread idle). A query-id KILL from here would
                // race with the statement's end: the server's thread keeps
                // the old query id until its next command has started, and
                // such a KILL was seen to end that next statement.
                let stmt = target.statement.load(Ordering::Acquire);
                target.kill_query.store(stmt, Ordering::Release);
                target.interrupt.notify_waiters();
            }
            if !k.query {
                target.killed.store(true, Ordering::Relaxed);
                target.wake.notify_one();
                ids.push(id);
            }
        }
        if !k.query {
            // The server shuts a killed connection's socket before it
            // answers the KILL: the victim's next command finds the
            // connection gone (a driver with auto-reconnect reconnects).
            // Here the victim's session ends itself; the answer waits for
            // that (bounded: a victim inside a statement ends once the
            // statement's KILL QUERY is done).
            let deadline = Instant::now() + KILL_WAIT;
            while Instant::now() < deadline
                && self
                    .shared
                    .sessions
                    .lock()
                    .is_ok_and(|m| ids.iter().any(|id| m.contains_key(id)))
            {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
        if kill_self {
            let e = ErrPacket::new(1927, "70100", "Connection was killed");
            self.send_err(seq, &e).await?;
            return Err(End::Killed);
        }
        let mut b = bytes::BytesMut::new();
        let affected = if by_user { reached } else { 0 };
        crate::protocol::packets::ok_payload(&mut b, affected, self.status, 0);
        self.client.send_packet(seq, &b).await?;
        Ok(false)
    }

    /// Whether this client may end other users' sessions, as the server lets
    /// an account with CONNECTION ADMIN (or SUPER) end other accounts'
    /// threads: only when the client's backend connections log in as its
    /// own account (a user mapped to a shared service account never gets
    /// that account's privileges this way), and the server confirms the
    /// privilege for that account on one of them. Anything unclear is no.
    /// `None` when an error was sent to the client.
    async fn server_grants_kill(&mut self, seq: u8) -> Result<Option<bool>, End> {
        let own_account = self
            .shared
            .pool
            .params(self.pool)
            .is_some_and(|p| p.user == self.user.name);
        if !own_account {
            return Ok(Some(false));
        }
        let q = "SELECT COUNT(*) FROM information_schema.USER_PRIVILEGES \
                 WHERE PRIVILEGE_TYPE IN ('SUPER', 'CONNECTION ADMIN') AND GRANTEE = \
                 CONCAT('''', SUBSTRING_INDEX(CURRENT_USER(), '@', 1), '''@''', \
                 SUBSTRING_INDEX(CURRENT_USER(), '@', -1), '''')";
        let n = self.ask_backend(seq, q).await?;
        Ok(n.map(|n| n.is_some_and(|n| n != "0")))
    }

    /// `KILL QUERY ID q`: the server's query ids are unique for its life, so
    /// killing one can never reach a later statement; what must be checked
    /// is whose it is. The query must be the statement of a proxy session
    /// (found by the backend thread running it) that this client may kill;
    /// a query of anything else on the server is refused.
    async fn kill_query_id(&mut self, seq: u8, qid: u64) -> Result<bool, End> {
        if self.shared.pool.servers.len() > 1 {
            // A thread id names a thread of one server; across a change of
            // primary the same id may be another client's elsewhere.
            let e = refused(
                "KILL QUERY ID with several backend servers (use KILL QUERY with the connection id)",
            );
            self.send_err(seq, &e).await?;
            return Ok(false);
        }
        let q = format!("SELECT ID FROM information_schema.PROCESSLIST WHERE QUERY_ID = {qid}");
        let Some(cell) = self.ask_backend(seq, &q).await? else {
            return Ok(false);
        };
        let mut thread = cell.and_then(|c| c.parse::<u32>().ok());
        if thread.is_none() && qid != 0 {
            // Not visible to this client's account: ask as the accounts of
            // the sessions running statements now (each sees its own threads).
            thread = self.query_thread_elsewhere(qid).await;
        }
        let Some(thread) = thread.filter(|_| qid != 0) else {
            let e = ErrPacket::new(1957, "HY000", format!("Unknown query id: {qid}"));
            self.send_err(seq, &e).await?;
            return Ok(false);
        };
        let owner = self.shared.sessions.lock().ok().and_then(|m| {
            m.values()
                .find(|h| h.backend_thread.load(Ordering::Acquire) == thread)
                .and_then(|h| h.user.lock().ok().map(|u| u.clone()))
        });
        let denied = match owner {
            None => Some(refused(
                "KILL QUERY ID of a statement no myplex session runs (kill server threads with a direct connection)",
            )),
            // Another user's query: the server's privilege may allow it.
            Some(o) if o != self.user.name && !self.user.admin => {
                match self.server_grants_kill(seq).await? {
                    Some(true) => None,
                    Some(false) => Some(ErrPacket::new(
                        1979,
                        "HY000",
                        format!("You are not owner of query {qid}"),
                    )),
                    None => return Ok(false),
                }
            }
            Some(_) => None,
        };
        if let Some(e) = denied {
            self.send_err(seq, &e).await?;
        } else if self
            .ask_backend(seq, &format!("KILL QUERY ID {qid}"))
            .await?
            .is_some()
        {
            self.send_ok(seq).await?;
        }
        Ok(false)
    }

    /// The backend thread running query `qid`, asked through the credential
    /// pools (other than this session's) of sessions running a statement;
    /// at most a few pools are asked.
    async fn query_thread_elsewhere(&self, qid: u64) -> Option<u32> {
        const MAX_POOLS: usize = 8;
        let mut pools: Vec<usize> = self
            .shared
            .sessions
            .lock()
            .ok()?
            .values()
            .filter(|h| h.backend_thread.load(Ordering::Acquire) != 0)
            .map(|h| h.pool.load(Ordering::Relaxed))
            .filter(|p| *p != self.pool)
            .collect();
        pools.sort_unstable();
        pools.dedup();
        let q = format!("SELECT ID FROM information_schema.PROCESSLIST WHERE QUERY_ID = {qid}");
        for pool in pools.into_iter().take(MAX_POOLS) {
            let deadline = Instant::now() + Duration::from_secs(5);
            let Some(mut h) = self.shared.pool.helper(pool, deadline).await else {
                continue;
            };
            let row = h.conn.query_row(&q).await;
            h.finish(row.is_ok());
            if let Ok(Some(row)) = row
                && let Some(t) = row
                    .into_iter()
                    .next()
                    .flatten()
                    .and_then(|c| c.parse::<u32>().ok())
            {
                return Some(t);
            }
        }
        None
    }

    /// Runs a statement of the proxy's own for a KILL on a backend in the
    /// session's state and returns the first cell of its first row (`None`
    /// inside for no row or NULL). `None` when an error was sent to the
    /// client instead: the server's, relayed, or a lost backend.
    pub(super) async fn ask_backend(
        &mut self,
        seq: u8,
        sql: &str,
    ) -> Result<Option<Option<String>>, End> {
        let Some(mut co) = self.checkout(seq).await? else {
            return Ok(None);
        };
        match co.backend.query_row(sql).await {
            Ok(row) => {
                self.finish(co.slot, co.backend);
                Ok(Some(row.and_then(|r| r.into_iter().next().flatten())))
            }
            Err(crate::backend::BackendError::Server(e)) => {
                self.finish(co.slot, co.backend);
                self.send_err(seq, &e).await?;
                Ok(None)
            }
            Err(e) => {
                let held = co.was_pinned;
                drop(co);
                let e = crate::protocol::errors::backend_lost(&e.to_string());
                self.lost_backend(seq, &e, held).await?;
                Ok(None)
            }
        }
    }

    /// The value of a KILL's expression, as the server computes a thread id
    /// from it (an unsigned integer; NULL is 0), asked of a backend in the
    /// session's state (user variables), with CONNECTION_ID() meaning the
    /// proxy id. `None` when an error was sent to the client.
    async fn kill_id_of(&mut self, seq: u8, expr: &str) -> Result<Option<u64>, End> {
        let q = format!("SELECT CAST(({expr}) AS UNSIGNED)");
        let opts = crate::session_state::authority::lex_options(&self.state, self.status);
        let q = match super::local::replace_connection_id(q.as_bytes(), self.id, opts) {
            Some(r) => String::from_utf8(r).unwrap_or(q),
            None => q,
        };
        let cell = self.ask_backend(seq, &q).await?;
        Ok(cell.map(|c| c.and_then(|c| c.parse().ok()).unwrap_or(0)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_every_kill_form() {
        let opts = crate::sql::LexOptions::default();
        let plan_with = |q: &str, allow: bool| {
            plan(
                q.as_bytes(),
                &crate::sql::analyze(q.as_bytes(), opts),
                opts,
                allow,
            )
        };
        let plan_of = |q: &str| plan_with(q, false);
        assert_eq!(
            plan_of("KILL 12"),
            Some(KillPlan::Run(Kill {
                query: false,
                target: Target::Id(12)
            }))
        );
        assert_eq!(
            plan_of("kill query 7;"),
            Some(KillPlan::Run(Kill {
                query: true,
                target: Target::Id(7)
            }))
        );
        assert_eq!(
            plan_of("/* c */ KILL HARD CONNECTION 3"),
            Some(KillPlan::Run(Kill {
                query: false,
                target: Target::Id(3)
            }))
        );
        assert_eq!(
            plan_of("KILL USER app"),
            Some(KillPlan::Run(Kill {
                query: false,
                target: Target::User(b"app".to_vec(), None)
            }))
        );
        assert_eq!(
            plan_of("KILL QUERY ID 3"),
            Some(KillPlan::Run(Kill {
                query: true,
                target: Target::QueryId(3)
            }))
        );
        assert_eq!(
            plan_of("KILL QUERY ID @id"),
            Some(KillPlan::Run(Kill {
                query: true,
                target: Target::QueryIdExpr("@id".into())
            }))
        );
        assert_eq!(
            plan_of("kill  (('x' IN ( SELECT 1)) MOD 44);"),
            Some(KillPlan::Run(Kill {
                query: false,
                target: Target::Expr("(('x' IN ( SELECT 1)) MOD 44)".into())
            }))
        );
        assert_eq!(
            plan_of("KILL CONNECTION_ID()"),
            Some(KillPlan::Run(Kill {
                query: false,
                target: Target::Expr("CONNECTION_ID()".into())
            }))
        );
        // Evaluating these would change the session: refused.
        assert_eq!(
            plan_of("kill query id user 'foo'"),
            Some(KillPlan::Fail(ErrPacket::new(
                1054,
                "42S22",
                "Unknown column 'user' in 'KILL'"
            )))
        );
        assert!(matches!(plan_of("KILL @x := 5"), Some(KillPlan::Refuse(_))));
        assert!(matches!(
            plan_of("KILL GET_LOCK('l', 0)"),
            Some(KillPlan::Refuse(_))
        ));
        assert!(matches!(
            plan_of("KILL /*! 5 + */ 1"),
            Some(KillPlan::Refuse(_))
        ));
        let huge = format!("KILL {}1", "0 + ".repeat(MAX_EXPRESSION));
        assert!(
            matches!(plan_of(&huge), Some(KillPlan::Refuse(_))),
            "kept per prepare"
        );
        // A text PREPARE of a KILL prepares a stand-in under the name.
        assert_eq!(
            plan_of("PREPARE s FROM ' KILL 0 '"),
            Some(KillPlan::Prepare {
                name: b"s".to_vec(),
                kill: Kill {
                    query: false,
                    target: Target::Id(0)
                },
                sql: b"PREPARE s FROM 'DO 0'".to_vec(),
            })
        );
        assert!(matches!(
            plan_of("KILL 11; SELECT 1"),
            Some(KillPlan::Refuse(_))
        ));
        assert!(matches!(
            plan_of("SELECT 1; KILL 11"),
            Some(KillPlan::Refuse(_))
        ));
        assert!(matches!(
            plan_of("PREPARE s FROM 'KILL 5'; SELECT 1"),
            Some(KillPlan::Refuse(_))
        ));
        assert!(matches!(
            plan_of("EXECUTE IMMEDIATE 'kill 5'"),
            Some(KillPlan::Refuse(_))
        ));
        // Stored code, compound statements, SET STATEMENT: refused.
        for q in [
            "CREATE PROCEDURE p() KILL 5",
            "CREATE DEFINER=CURRENT_USER EVENT e ON SCHEDULE EVERY 1 SECOND DO KILL 5",
            "CREATE PROCEDURE p(q TEXT) BEGIN PREPARE s FROM q; EXECUTE s; END -- kill",
            "CREATE PROCEDURE p() EXECUTE IMMEDIATE CONCAT('KILL ', 5)",
            "BEGIN NOT ATOMIC SET @q = 'Kill 5'; PREPARE s FROM @q; EXECUTE s; END",
            "BEGIN NOT ATOMIC KILL 5; END",
            "IF 1 THEN KILL 5; END IF",
            "SET STATEMENT max_statement_time=0 FOR KILL 5",
            "SET @q = 'KILL 5'; PREPARE s FROM @q; SELECT 1",
            "PREPARE s FROM f(@q)",
            "EXECUTE IMMEDIATE (SELECT q FROM t)",
            "CALL p('KILL 5')",
            "SELECT 1; CALL p(CONCAT('kill ', 5))",
            "BEGIN NOT ATOMIC CALL p('KILL 5'); END",
            "PREPARE s FROM 'PREPARE t FROM @q'",
            "PREPARE s FROM 'EXECUTE IMMEDIATE ''KILL 5'''",
            // sql_mode changes mid-query: the rest cannot be read.
            "SET sql_mode = 'ANSI_QUOTES'; SELECT \"a\\\"; KILL 5; -- \"",
            "SELECT 'unterminated KILL 5",
        ] {
            assert!(matches!(plan_of(q), Some(KillPlan::Refuse(_))), "{q}");
        }
        // Text from a plain expression is computed, then planned.
        assert_eq!(
            plan_of("PREPARE s FROM @q"),
            Some(KillPlan::Resolve {
                expr: "@q".into(),
                stand_in: Some((b"s".to_vec(), b"PREPARE s FROM ".to_vec())),
            })
        );
        assert_eq!(
            plan_of("EXECUTE IMMEDIATE _latin1 X'4B' USING @a"),
            Some(KillPlan::Resolve {
                expr: "_latin1 X'4B'".into(),
                stand_in: None,
            })
        );
        // System variables and pure functions are computed too.
        assert!(matches!(
            plan_of("EXECUTE IMMEDIATE SFORMAT('SELECT {}', @@collation_connection)"),
            Some(KillPlan::Resolve { .. })
        ));
        // Not a variable that may change between computing and running.
        assert!(matches!(
            plan_of("EXECUTE IMMEDIATE ELT(RIGHT(@@timestamp, 1), 'DO 1', 'KILL 5')"),
            Some(KillPlan::Refuse(_))
        ));
        assert_eq!(plan_of("CALL p('SELECT 1')"), None);
        // Text built at run time, in stored code (a procedure's CALL could
        // be prepared before it is replaced), compound statements,
        // multi-statements and events: refused where such a KILL may
        // reach another account's client, else left to the server.
        for q in [
            "CREATE PROCEDURE p(q TEXT) BEGIN PREPARE s FROM q; EXECUTE s; END",
            "CREATE DEFINER = CURRENT_USER PROCEDURE p() EXECUTE IMMEDIATE CONCAT('KI', 'LL 5')",
            "BEGIN NOT ATOMIC DECLARE q TEXT DEFAULT CONCAT('KI', 'LL 5'); PREPARE s FROM q; END",
            "SET @q = CONCAT('KI', 'LL 5'); PREPARE s FROM @q; EXECUTE s",
            "SELECT 1; EXECUTE IMMEDIATE @q",
            "CREATE EVENT e ON SCHEDULE AT NOW() DO EXECUTE IMMEDIATE CONCAT('KI', 'LL 5')",
            "ALTER EVENT e DO BEGIN PREPARE s FROM @q; EXECUTE s; END",
        ] {
            assert!(matches!(plan_of(q), Some(KillPlan::Refuse(_))), "{q}");
            assert_eq!(plan_with(q, true), None, "{q}");
        }
        // Literal dynamic text there is read as any literal.
        assert_eq!(
            plan_of("BEGIN NOT ATOMIC PREPARE s FROM 'SELECT 1'; EXECUTE s; END"),
            None
        );
        // Literals without KILL, and stored code without it, are left alone.
        assert_eq!(plan_of("PREPARE s FROM 'SELECT 1'"), None);
        assert_eq!(plan_of("EXECUTE IMMEDIATE 'SELECT ?' USING 1"), None);
        assert_eq!(
            plan_of("CREATE PROCEDURE p() BEGIN PREPARE s FROM 'SELECT 1'; EXECUTE s; END"),
            None
        );
        assert_eq!(plan_of("SELECT 'KILL 5'"), None);
        assert_eq!(plan_of("SELECT * FROM killers"), None);
    }
}
