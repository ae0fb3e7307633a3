//! The one place that decides whether a session's backend connection may be
//! shared, and what must happen to it first (design §4, fail closed).
//!
//! Inputs: the statements the client sent (as the lexer understood them),
//! what the server answered (status flags, session trackers, errors,
//! warnings), and the results of small probes the session runs when the
//! text alone cannot tell. Output: the session's inventory of unshareable
//! state (hence its pins), follow-up probes, and — when the session lets go
//! of a backend — a [`Release`] verdict: share it as it is, clear its
//! diagnostics area first, or reset it (COM_RESET_CONNECTION) first.
//!
//! Every path that hands a backend back to the pool asks [`release`]; a
//! case nobody thought of must end up in "reset" or "keep", never "share".

use super::inventory::Inventory;
use super::tracked::{ApplyEffects, LoginDefaults, TrackedState};
use super::variables::{VarClass, fresh_value, records_queries};
use crate::sql::{Analysis, Effect, FuncKind, Kind, Scope, Statement};

/// Facts about one response that matter for sharing.
#[derive(Debug, Clone, Default)]
pub struct Reply {
    /// The response ended with an error.
    pub error: bool,
    /// Results completed before the error (statements that ran).
    pub results: u32,
    /// Warnings of the last result.
    pub warnings: u16,
    /// SERVER_STATUS_IN_TRANS after the response.
    pub in_trans: bool,
    /// The OK's insert id, when non-zero.
    pub insert_id: Option<u64>,
    /// The last result was rows (a result set), not an OK.
    pub rows: bool,
}

/// What the session must still do on the backend before trusting the
/// inventory (run right after the response, on the same backend).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Followup {
    /// Named locks whose ownership must be checked (IS_USED_LOCK).
    pub verify_locks: bool,
    /// Stored code ran: count the user variables it may have left.
    pub count_user_vars: bool,
    /// The connection collation changed in a way the text does not show.
    pub probe_collation: bool,
    /// It was `SET NAMES`: the collation read is the result character
    /// set's too.
    pub names_collation: bool,
    /// Replayable variables set back to DEFAULT: both the session and the
    /// backend are at the server's default now, which is represented by
    /// their absence (so two sessions at the default never differ) —
    /// except a value the backend's login derives ([`LoginDefaults`]):
    /// there DEFAULT (the global value) is not what absence stands for, so
    /// the reported value stays (see [`Followup::take_defaulted`]).
    pub defaulted: Vec<String>,
    /// Session variables whose new value the server did not report
    /// (`SET @@name = …`): read them (`SELECT @@session.name`, which
    /// keeps the diagnostics area) and apply them as if reported.
    pub probe_vars: Vec<String>,
    /// Global variables may have changed (`SET GLOBAL …`): pooled
    /// connections carry the old values as their session values.
    pub globals_changed: bool,
    /// Stored code ran: it may have left another active role (an INVOKER
    /// procedure's or dynamic SQL's SET ROLE outlives it): compare
    /// CURRENT_ROLE() with the backend's login role.
    pub probe_role: bool,
    /// SET DEFAULT ROLE: pooled connections logged in with the old
    /// default role active; none may serve another client as they are.
    pub default_role_changed: bool,
}

impl Followup {
    /// Takes the variables of [`Self::defaulted`] that are now at what a
    /// fresh login of the backend's flavour (`login`) has, to be dropped
    /// from the session's and the backend's state (absence). A variable
    /// the login derives (`sql_mode` with IGNORE_SPACE, an INTERACTIVE
    /// client's `wait_timeout`) is not: DEFAULT gave it the global value,
    /// which stays in the state as reported (or probed). Without a derived
    /// value DEFAULT is the login value: keeping it as a value would make
    /// the session differ from every fresh backend, so that each move
    /// re-sent it and each other client of the flavour set it back.
    pub fn take_defaulted(&mut self, login: LoginDefaults) -> Vec<String> {
        let mut gone = std::mem::take(&mut self.defaulted);
        gone.retain(|n| login.value_expr(n) == "DEFAULT");
        self.probe_vars.retain(|p| !gone.contains(p));
        gone
    }
}

/// Per-backend marks the authority sets; they travel with the connection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BackendMarks {
    /// Unshareable state was created on this connection since its last
    /// reset: even after the session gave it all up, reset before sharing
    /// (the bookkeeping decides when the owner is done, never whether
    /// another client may see leftovers).
    pub needs_reset: bool,
    /// The last statement left warnings or an error in the diagnostics
    /// area: clear it before another client can read it.
    pub diagnostics: bool,
    /// LAST_INSERT_ID() may have changed without the proxy knowing its
    /// value: read it before letting go.
    pub insert_id_unknown: bool,
    /// The active role may differ from the one the connection logged in
    /// with. COM_RESET_CONNECTION keeps roles (measured on 10.11), so such
    /// a connection is closed, never reset and shared.
    pub role_changed: bool,
    /// Profiling or the optimizer trace was on: the connection keeps the
    /// text of statements it ran (anyone's) through a reset, so it is
    /// closed, never shared (`variables::records_queries`).
    pub records_queries: bool,
    /// An XA statement ran: a connection reset with an XA branch prepared
    /// on it is broken for whoever comes next (MariaDB 10.11 answers 1031
    /// to every later InnoDB statement), so such a connection is closed,
    /// never reset and shared (fail closed for any XA use).
    pub ran_xa: bool,
}

/// What to do with a backend the session no longer needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// Clean or replayable: return it as it is.
    Share,
    /// Clear the diagnostics area (a statement that reads a table), then
    /// return it.
    ClearDiagnostics,
    /// COM_RESET_CONNECTION (and trackers) before anyone else gets it.
    Reset,
    /// Nothing the proxy can run makes it shareable again: close it.
    Close,
}

/// The verdict for a backend with `marks` whose session holds nothing;
/// `status` is the server's status flags of its last reply. A backend
/// whose last reply said a transaction is open is reset whatever the
/// bookkeeping says (fail closed: no client inherits a transaction).
pub fn release(marks: BackendMarks, status: u16) -> Release {
    let in_trans = status & crate::protocol::packets::status::IN_TRANS != 0;
    if marks.role_changed || marks.records_queries || marks.ran_xa {
        Release::Close
    } else if marks.needs_reset || marks.insert_id_unknown || in_trans {
        // LAST_INSERT_ID() changed and was never read back (session mode
        // skips the read): the next client must not see it.
        Release::Reset
    } else if marks.diagnostics {
        Release::ClearDiagnostics
    } else {
        Release::Share
    }
}

/// True when a statement of `analysis` changes a global variable
/// (`SET GLOBAL`, `SET @@global.`, `SET GLOBAL TRANSACTION`): what makes
/// pooled backends stale (see [`Followup::globals_changed`]).
pub fn sets_globals(analysis: &Analysis) -> bool {
    analysis.statements.iter().any(|s| {
        s.effects.iter().any(|e| {
            matches!(
                e,
                Effect::SetVariable {
                    scope: Scope::Global,
                    ..
                } | Effect::SetTransaction {
                    scope: Scope::Global
                }
            )
        })
    })
}

/// The server status flags an sql_mode value sets (`NO_BACKSLASH_ESCAPES`,
/// `ANSI_QUOTES`, which `ANSI` includes), as the server sets them.
pub fn sql_mode_status(mode: &str) -> u16 {
    use crate::protocol::packets::status as st;
    mode.split(',').fold(0, |flags, m| {
        if m.eq_ignore_ascii_case("NO_BACKSLASH_ESCAPES") {
            flags | st::NO_BACKSLASH_ESCAPES
        } else if m.eq_ignore_ascii_case("ANSI_QUOTES") || m.eq_ignore_ascii_case("ANSI") {
            flags | st::ANSI_QUOTES
        } else {
            flags
        }
    })
}

/// Options of the session that change how its SQL is lexed: from the
/// sql_mode it set, or from the server's status flags (`status`, the last
/// the session saw), which also say it when the mode is a global default the
/// client never set (a global NO_BACKSLASH_ESCAPES read as off would let
/// `'C:\', GET_LOCK(…) # '` hide a lock from the lexer).
pub fn lex_options(state: &TrackedState, status: u16) -> crate::sql::LexOptions {
    use crate::protocol::packets::status as st;
    let mode = state.vars.get("sql_mode").map(String::as_str).unwrap_or("");
    let flags = status | sql_mode_status(mode);
    crate::sql::LexOptions {
        ansi_quotes: flags & st::ANSI_QUOTES != 0,
        no_backslash_escapes: flags & st::NO_BACKSLASH_ESCAPES != 0,
    }
}

/// False for client character sets whose multi-byte characters may contain
/// bytes that look like quotes or backslashes, and for `sql_mode=ORACLE`
/// (its `BEGIN … END` blocks and other grammar the reader does not follow):
/// the lexer cannot read such a session's text reliably, so every query of
/// it is treated as opaque.
pub fn lexable_charset(state: &TrackedState) -> bool {
    !state
        .vars
        .get("character_set_client")
        .is_some_and(|c| crate::sql::lexer::read_otherwise(c.as_bytes()))
        && !oracle_mode(state)
}

/// The session's sql_mode holds ORACLE.
pub fn oracle_mode(state: &TrackedState) -> bool {
    state
        .vars
        .get("sql_mode")
        .is_some_and(|m| m.split(',').any(|w| w.eq_ignore_ascii_case("ORACLE")))
}

/// What a query's `SET STATEMENT … FOR` clauses set for the statement's time
/// only: the server reports those values (and their restore, with the next
/// reply) like lasting ones, so they must not be taken as the session's;
/// every other report of the same reply is a lasting change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Temporary {
    /// No `SET STATEMENT` in the query.
    Nothing,
    /// The names the clauses set (lowercase).
    Names(Vec<Vec<u8>>),
    /// A clause was not understood, or switches a tracker off: no report
    /// can be told temporary from lasting, and some may be missing.
    Unknown,
}

impl Temporary {
    /// The clauses of `analysis`.
    pub fn of(analysis: &Analysis) -> Self {
        let mut out = Temporary::Nothing;
        for e in analysis.statements.iter().flat_map(|s| &s.effects) {
            if let Effect::SetStatement { vars } = e {
                // A clause that switches a tracker off hides what its
                // statement changes: nothing of the reply can be trusted.
                let silences = vars
                    .as_ref()
                    .is_some_and(|v| v.iter().any(|n| n.starts_with(b"session_track_")));
                out = match (out, vars) {
                    _ if silences => Temporary::Unknown,
                    (Temporary::Unknown, _) | (_, None) => Temporary::Unknown,
                    (Temporary::Nothing, Some(v)) => Temporary::Names(v.clone()),
                    (Temporary::Names(mut n), Some(v)) => {
                        n.extend(v.iter().cloned());
                        Temporary::Names(n)
                    }
                };
            }
        }
        out
    }

    /// True when a reported value of `name` is the statement's temporary
    /// one (or may be), not the session's.
    pub fn covers(&self, name: &str) -> bool {
        match self {
            Temporary::Nothing => false,
            Temporary::Names(n) => {
                let alias = alias_of(name);
                n.iter()
                    .any(|v| v.as_slice() == name.as_bytes() || Some(v.as_slice()) == alias)
            }
            Temporary::Unknown => true,
        }
    }
}

/// The other name of a variable the server knows by two (the report may
/// use either, whichever the clause named).
fn alias_of(name: &str) -> Option<&'static [u8]> {
    match name {
        "tx_isolation" => Some(b"transaction_isolation"),
        "transaction_isolation" => Some(b"tx_isolation"),
        "tx_read_only" => Some(b"transaction_read_only"),
        "transaction_read_only" => Some(b"tx_read_only"),
        "storage_engine" => Some(b"default_storage_engine"),
        "default_storage_engine" => Some(b"storage_engine"),
        _ => None,
    }
}

/// Marks the statements of `analysis` that may run a view's or a trigger's
/// code as calls of stored code ([`Effect::StoredFunction`]): those that
/// name a member of `names`, or, when the set is unknown (`None`), every
/// statement that may name a table. `schema`: the session's schema before
/// the query.
pub fn mark_code_names(
    analysis: &mut std::borrow::Cow<'_, Analysis>,
    sql: &[u8],
    schema: &[u8],
    names: Option<&super::code_names::CodeNames>,
) {
    if names.is_some_and(|n| n.is_empty()) {
        return;
    }
    // A USE earlier in the same query changes the schema the later
    // statements' names resolve in: each is matched in every schema the
    // session may be in by then (fail closed: a USE that failed counts).
    // Known: a match is a call of stored code. Unknown: a reset only.
    let effect = if names.is_some() {
        Effect::StoredFunction
    } else {
        Effect::MaybeHiddenCode
    };
    let marks = {
        let a: &Analysis = analysis;
        // Schemas USEd earlier in the query (no allocation without one).
        let mut used: Vec<&[u8]> = Vec::new();
        marked(a, |st| {
            let text = sql.get(st.span.clone()).unwrap_or(sql);
            let hit = match names {
                Some(n) => n.touches(text, schema) || used.iter().any(|s| n.touches(text, s)),
                None => super::code_names::may_name_a_table(st.kind, text),
            };
            for e in &st.effects {
                if let Effect::Use { schema } = e {
                    used.push(schema);
                }
            }
            hit
        })
    };
    mark(analysis, marks, effect);
}

/// The statements for which `runs_code` holds and that are not marked yet
/// (every statement is asked, in order).
fn marked<'a>(a: &'a Analysis, mut runs_code: impl FnMut(&'a Statement) -> bool) -> Vec<usize> {
    a.statements
        .iter()
        .enumerate()
        .filter(|(_, st)| {
            runs_code(st)
                && !st
                    .effects
                    .iter()
                    .any(|e| matches!(e, Effect::StoredFunction | Effect::MaybeHiddenCode))
        })
        .map(|(i, _)| i)
        .collect()
}

/// Marks statements `marks` as calls of stored code; copies the analysis
/// only when there is one.
fn mark(analysis: &mut std::borrow::Cow<'_, Analysis>, marks: Vec<usize>, effect: Effect) {
    if marks.is_empty() {
        return;
    }
    let a = analysis.to_mut();
    for i in marks {
        if let Some(st) = a.statements.get_mut(i) {
            st.effects.push(effect.clone());
        }
    }
}

/// Marks every statement of `analysis` as a call of stored code.
pub fn mark_all_stored_code(analysis: &mut std::borrow::Cow<'_, Analysis>) {
    let marks = marked(analysis, |_| true);
    mark(analysis, marks, Effect::StoredFunction);
}

/// Statements whose work the text does not show (stored code, dynamic SQL).
fn opaque(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::Call | Kind::Compound | Kind::ExecuteImmediate | Kind::Execute
    )
}

/// Statements that certainly start or end a transaction: what consumes
/// one-shot transaction characteristics (measured on 10.11: COMMIT and
/// ROLLBACK end them even with no transaction open).
fn ends_one_shot_characteristics(kind: Kind) -> bool {
    matches!(kind, Kind::Begin | Kind::Commit | Kind::Rollback | Kind::Xa)
}

/// Statements that may use a one-shot `insert_id`.
fn may_use_insert_id(kind: Kind) -> bool {
    matches!(kind, Kind::Insert | Kind::Replace | Kind::LoadData)
}

/// Applies one query's statements and the server's answer to the
/// session's inventory and the backend's marks. `schema` is the session's
/// schema before the query; `tracker` what the trackers reported.
#[allow(clippy::too_many_arguments)]
pub fn after_query(
    inv: &mut Inventory,
    marks: &mut BackendMarks,
    schema: &[u8],
    analysis: &Analysis,
    reply: &Reply,
    tracker: &ApplyEffects,
    sql: &[u8],
    lex: crate::sql::LexOptions,
) -> Followup {
    let mut fu = Followup::default();
    let stmts = &analysis.statements;
    // The FOUND_ROWS() hold lasts for the one statement after
    // SQL_CALC_FOUND_ROWS (any statement replaces the value).
    inv.calc_found_rows = false;
    // Which statements ran: all without an error; with one, the first
    // `results` (one result per statement) — unless stored code ran, whose
    // results cannot be counted: then every statement may have run.
    let any_opaque = stmts.iter().any(is_opaque);
    let (ran_fully, failed_at) = if !reply.error {
        (stmts.len(), None)
    } else if any_opaque {
        (0, None)
    } else {
        let k = (reply.results as usize).min(stmts.len());
        (k, Some(k))
    };
    let mut explained = false;
    // A literal text run by EXECUTE IMMEDIATE that may change how literals
    // read (its own SET NAMES, stored code, unreadable text).
    let mut inner_rereads = false;
    let temporary = Temporary::of(analysis);
    if temporary == Temporary::Unknown {
        // Every report of the reply was set aside (it may be a clause's
        // temporary value): what decides how the session's next text is
        // read is asked of the server once the query is over.
        for name in ["sql_mode", "character_set_client"] {
            if !fu.probe_vars.iter().any(|v| v == name) {
                fu.probe_vars.push(name.to_string());
            }
        }
    }
    let removes_ok = !reply.error && !analysis.incomplete;
    for (i, st) in stmts.iter().enumerate() {
        // Effects that end state count only when the statement certainly
        // ran them (not in a branch, loop or skipped executable comment).
        let removes = i < ran_fully && !st.conditional;
        // The statement that failed may have run part of its work (a lock
        // taken by an earlier row of a multi-row INSERT that then hit a
        // duplicate key): what it adds counts, what it ends does not.
        let failed_here = failed_at == Some(i) && !removes;
        let opaque_st = is_opaque(st);
        let adds = removes || failed_at.is_none_or(|k| i <= k) || opaque_st;
        if !adds {
            continue;
        }
        if failed_here && !opaque_st {
            // Of the statement that failed, only what its expressions did
            // while rows were processed (a failed CREATE TEMPORARY TABLE
            // created nothing).
            let partial = Statement {
                effects: st
                    .effects
                    .iter()
                    .filter(|e| partial_effect(e))
                    .cloned()
                    .collect(),
                ..st.clone()
            };
            explained |= apply_statement(inv, marks, schema, &partial, false, sql, &mut fu);
            continue;
        }
        explained |= apply_statement(inv, marks, schema, st, removes, sql, &mut fu);
        if opaque_st {
            marks.needs_reset = true;
            marks.insert_id_unknown = true;
            fu.count_user_vars = true;
            fu.probe_role = true;
        }
        // EXECUTE IMMEDIATE with literal text: what it runs is known.
        for e in &st.effects {
            if let Effect::DynamicSql { text } = e
                && st.kind == Kind::ExecuteImmediate
            {
                let inner = crate::sql::analyze(text, lex);
                inner_rereads |= inner.incomplete || inner.statements.iter().any(rereads_literals);
                if inner.incomplete || inner.statements.iter().any(is_opaque) {
                    marks.needs_reset = true;
                    fu.count_user_vars = true;
                    fu.probe_role = true;
                    explained = false;
                    inv.unknown |= inner.incomplete;
                }
                for ist in &inner.statements {
                    explained |= apply_statement(inv, marks, schema, ist, removes, text, &mut fu);
                }
            }
        }
    }
    if analysis.incomplete {
        // The text could not be read to its end: anything may have happened.
        marks.needs_reset = true;
        explained = false;
    }
    if analysis.incomplete || inner_rereads || stmts.iter().any(rereads_literals) {
        // The lock names' text may not read now as it read in the
        // statement that took them: fail closed.
        inv.give_up_pending_locks();
    }
    // One-shot settings end only where the server certainly used them
    // (a query that also sets one keeps it: fail closed).
    if !reply.error
        && !stmts
            .iter()
            .any(|s| s.effects.iter().any(is_one_shot_effect))
    {
        if inv.one_shot && stmts.iter().any(|s| ends_one_shot_characteristics(s.kind)) {
            inv.one_shot = false;
        }
        if inv.insert_id_pending
            && inv.insert_id_forced.is_some()
            && reply.insert_id == inv.insert_id_forced
            && stmts.iter().any(|s| may_use_insert_id(s.kind))
        {
            inv.insert_id_pending = false;
            inv.insert_id_forced = None;
        }
    }
    // Variables the proxy cannot replay, as the server reported them. In
    // the reply of SET STATEMENT … FOR they are that statement's temporary
    // values (the server reports the restore with the next statement).
    // Variables the statements set themselves are decided by the text
    // (the tracker reports `timestamp=DEFAULT` as the old value, and the
    // one-shot `insert_id` as a value); the tracker speaks for the rest
    // (set by stored code).
    let set_by_text = |n: &[u8]| {
        stmts.iter().any(|s| {
            s.effects
                .iter()
                .any(|e| matches!(e, Effect::SetVariable { name, .. } if name.as_slice() == n))
        })
    };
    let set_by_text_prefix = |p: &str| {
        stmts.iter().any(|s| {
            s.effects.iter().any(
                |e| matches!(e, Effect::SetVariable { name, .. } if name.starts_with(p.as_bytes())),
            )
        })
    };
    // Profiling or the optimizer trace switched on, for the session or for
    // one statement, by the text or by stored code (reported): the
    // connection's history holds statement texts from here on.
    let records = stmts.iter().flat_map(|s| &s.effects).any(|e| match e {
        Effect::SetVariable { name, .. } => records_queries(name),
        Effect::SetStatement { vars: Some(v) } => v.iter().any(|n| records_queries(n)),
        _ => false,
    }) || tracker
        .pinning_vars
        .iter()
        .any(|(n, _)| records_queries(n.as_bytes()));
    if records {
        marks.records_queries = true;
        marks.needs_reset = true;
    }
    // A variable the clause sets for the statement's time that the
    // statement also sets itself, or a clause not understood while the
    // server reported changes: what lasts is unknown (fail closed).
    let clause_overlaps = match &temporary {
        Temporary::Names(n) => n.iter().any(|v| set_by_text(v)),
        // The server may have reported nothing (a tracker switched off).
        Temporary::Unknown => true,
        Temporary::Nothing => false,
    };
    if clause_overlaps {
        inv.unknown = true;
        marks.needs_reset = true;
    }
    for (name, value) in &tracker.pinning_vars {
        if name == "insert_id" || temporary.covers(name) {
            continue;
        }
        if fresh_value(name) == Some(value.as_str()) {
            if removes_ok {
                inv.pinning_vars.remove(name);
            }
            continue;
        }
        if set_by_text(name.as_bytes()) {
            continue;
        }
        if fresh_value(name) == Some(value.as_str()) {
            inv.pinning_vars.remove(name);
        } else {
            inv.pinning_vars.insert(name.clone(), value.clone());
            marks.needs_reset = true;
        }
    }
    // A user variable assigned NULL may have been the last one the count
    // found: count again.
    if inv.user_vars_unverified
        && stmts.iter().any(|s| {
            s.effects
                .iter()
                .any(|e| matches!(e, Effect::UserVarAssign { null: true, .. }))
        })
    {
        fu.count_user_vars = true;
    }
    if !tracker.tracker_values.is_empty() && !set_by_text_prefix("session_track_") {
        inv.trackers = true;
        marks.needs_reset = true;
    }
    if tracker.state_changed && !explained {
        inv.unknown = true;
        marks.needs_reset = true;
    }
    if tracker.charset_without_collation {
        // The character set changed and the collation was not reported.
        fu.probe_collation = true;
    }
    if reply.insert_id.is_some() || ids_unreported(analysis, reply) {
        marks.insert_id_unknown = true;
    }
    marks.diagnostics |= reply.warnings > 0 || reply.error;
    fu
}

/// Statements that may generate AUTO_INCREMENT values, which move the
/// session's `LAST_INSERT_ID()` (`CREATE TABLE … SELECT` inserts rows too).
fn may_generate_ids(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::Insert | Kind::Replace | Kind::LoadData | Kind::Create
    )
}

/// Whether the query may have moved `LAST_INSERT_ID()` without an OK that
/// says so. The server keeps the first id a statement generated even when
/// the statement then fails (a multi-row INSERT whose second row is a
/// duplicate), after `INSERT … RETURNING` (its rows end with an EOF, no
/// id) and after `LOAD DATA` (its OK reports 0): only a single INSERT or
/// REPLACE answered by an OK has its insert id speak for it (0 there means
/// nothing was generated). Anything else that may generate ids is read
/// back before the backend is shared.
fn ids_unreported(analysis: &Analysis, reply: &Reply) -> bool {
    let stmts = &analysis.statements;
    if !stmts.iter().any(|s| may_generate_ids(s.kind)) {
        return false;
    }
    let reported = stmts.len() == 1
        && matches!(stmts[0].kind, Kind::Insert | Kind::Replace)
        && !reply.error
        && !reply.rows
        && !analysis.incomplete;
    !reported
}

/// Applies a value read with `SELECT @@session.name` after an assignment
/// the tracker did not report, to the session and the backend that ran it,
/// as a tracker report would have been applied. `None` is SQL NULL.
pub fn apply_probed(
    inv: &mut Inventory,
    marks: &mut BackendMarks,
    states: [&mut TrackedState; 2],
    name: &str,
    value: Option<&str>,
) {
    match super::variables::classify(name) {
        VarClass::Replayable => {
            let v = value.unwrap_or("NULL");
            for s in states {
                if name == "collation_connection" {
                    s.set_collation(v);
                } else {
                    s.vars.insert(name.to_string(), v.to_string());
                }
            }
        }
        VarClass::Pinning => {
            let fresh = fresh_value(name).is_some_and(|f| same_value(f, value.unwrap_or("")));
            if fresh {
                inv.pinning_vars.remove(name);
            } else {
                inv.pinning_vars
                    .insert(name.to_string(), value.unwrap_or("NULL").to_string());
                marks.needs_reset = true;
            }
        }
        // The text decides these (session_track_* by SetVariable).
        VarClass::Trackers | VarClass::ServerOwned => {}
    }
}

/// Tracker text and `SELECT @@` values of the same setting compare equal
/// (`ON` is 1, `OFF` is 0).
fn same_value(a: &str, b: &str) -> bool {
    let norm = |v: &str| match v.to_ascii_uppercase().as_str() {
        "ON" | "1" => "1".to_string(),
        "OFF" | "0" => "0".to_string(),
        other => other.to_string(),
    };
    norm(a) == norm(b)
}

/// Statements whose work the text does not show: stored code, prepared
/// statements, dynamic SQL that is not a literal.
fn is_opaque(s: &Statement) -> bool {
    match s.kind {
        Kind::ExecuteImmediate => !s
            .effects
            .iter()
            .any(|e| matches!(e, Effect::DynamicSql { .. })),
        k if opaque(k) => true,
        // Stored code or dynamic SQL run by a statement of another kind
        // (`SET STATEMENT … FOR CALL p()`, `… FOR EXECUTE …`): as opaque as
        // when it stands alone.
        Kind::Set
            if s.effects
                .iter()
                .any(|e| matches!(e, Effect::SetStatement { .. })) =>
        {
            s.effects.iter().any(|e| {
                matches!(
                    e,
                    Effect::StoredFunction
                        | Effect::ExecutePrepared { .. }
                        | Effect::ExecuteImmediate
                )
            })
        }
        _ => s
            .effects
            .iter()
            .any(|e| matches!(e, Effect::ExecutePrepared { .. } | Effect::ExecuteImmediate)),
    }
}

/// Statements after which the session may read a string literal into
/// other bytes than before (character sets, sql_mode, or anything stored
/// code or an unread SET list may have changed).
fn rereads_literals(s: &Statement) -> bool {
    is_opaque(s)
        || s.effects.iter().any(|e| match e {
            Effect::SetNames { .. } | Effect::SetStatement { .. } | Effect::SetOther => true,
            Effect::SetVariable { name, .. } => {
                name.starts_with(b"character_set_")
                    || name.starts_with(b"collation_")
                    || name.as_slice() == b"sql_mode"
                    || name.as_slice() == b"names"
            }
            _ => false,
        })
}

/// Effects a statement that fails may already have had: those of its
/// expressions, evaluated row by row before the error.
fn partial_effect(e: &Effect) -> bool {
    matches!(
        e,
        Effect::GetLock { .. }
            | Effect::UserVarAssign { .. }
            | Effect::Sequence
            | Effect::StoredFunction
            | Effect::MaybeHiddenCode
            | Effect::Function(_)
    )
}

/// The number `name` is assigned in `text` (`name = 42`), when the text
/// says it plainly (one assignment of `name`, a decimal literal).
fn assigned_number(text: Option<&[u8]>, name: &str) -> Option<u64> {
    let t: Vec<u8> = text?.iter().map(u8::to_ascii_lowercase).collect();
    let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_' || c == b'$';
    let skip_ws = |mut i: usize| {
        while t.get(i).is_some_and(u8::is_ascii_whitespace) {
            i += 1;
        }
        i
    };
    let mut found = None;
    let mut from = 0;
    while let Some(at) = t[from..]
        .windows(name.len())
        .position(|w| w == name.as_bytes())
        .map(|p| p + from)
    {
        from = at + name.len();
        if (at > 0 && word(t[at - 1])) || t.get(from).is_some_and(|&c| word(c)) {
            continue;
        }
        let mut i = skip_ws(from);
        if t.get(i) == Some(&b':') {
            i += 1;
        }
        if t.get(i) != Some(&b'=') {
            continue;
        }
        i = skip_ws(i + 1);
        let start = i;
        while t.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        let end = skip_ws(i);
        let plain = i > start && t.get(end).is_none_or(|c| matches!(c, b',' | b';'));
        let n = std::str::from_utf8(&t[start..i])
            .ok()
            .and_then(|d| d.parse::<u64>().ok());
        match (found, n, plain) {
            (None, Some(n), true) => found = Some(n),
            _ => return None,
        }
    }
    found
}

/// True when `text` (a statement prepared from a literal) may take a
/// lock that lives in the session: any mention of LOCK TABLE(S), FLUSH,
/// BACKUP or HANDLER (fail closed: words in a string or a comment count
/// too; named locks, GET_LOCK, are followed by their own checks).
fn may_take_session_lock(text: &[u8]) -> bool {
    let squeezed: Vec<u8> = text
        .iter()
        .filter(|c| !c.is_ascii_whitespace())
        .map(u8::to_ascii_uppercase)
        .collect();
    [&b"LOCKTABLE"[..], b"FLUSH", b"BACKUP", b"HANDLER"]
        .iter()
        .any(|w| squeezed.windows(w.len()).any(|x| x == *w))
}

fn is_one_shot_effect(e: &Effect) -> bool {
    match e {
        Effect::SetTransaction { scope } => *scope == Scope::Default,
        Effect::SetVariable {
            name, to_default, ..
        } => name.as_slice() == b"insert_id" && !to_default,
        _ => false,
    }
}

/// Applies one statement; returns true when it explains a bare state
/// change reported by the server. `removes`: the statement certainly ran,
/// so effects that end state count too.
fn apply_statement(
    inv: &mut Inventory,
    marks: &mut BackendMarks,
    schema: &[u8],
    st: &Statement,
    removes: bool,
    sql: &[u8],
    fu: &mut Followup,
) -> bool {
    let mut explained = false;
    for e in &st.effects {
        match e {
            Effect::UserVarAssign { name, null } => {
                explained = true;
                marks.needs_reset = true;
                if !*null {
                    inv.user_vars.insert(name.clone());
                } else if removes {
                    inv.user_vars.remove(name);
                }
            }
            Effect::TempTableCreate { schema: s, name } => {
                explained = true;
                marks.needs_reset = true;
                let s = s.clone().unwrap_or_else(|| schema.to_vec());
                inv.temp_tables.insert((s, name.clone()));
            }
            Effect::TableDrop { tables, .. } => {
                explained = true;
                if removes {
                    for t in tables {
                        inv.drop_table(schema, t);
                    }
                }
            }
            Effect::TableRename { from, to } => {
                explained = true;
                let key = (
                    from.0.clone().unwrap_or_else(|| schema.to_vec()),
                    from.1.clone(),
                );
                if inv.temp_tables.contains(&key) {
                    // Add the new name at once; forget the old one only when
                    // the rename certainly ran.
                    let s = to.0.clone().unwrap_or_else(|| schema.to_vec());
                    inv.temp_tables.insert((s, to.1.clone()));
                    if removes {
                        inv.temp_tables.remove(&key);
                    }
                }
            }
            Effect::GetLock { literal, .. } => {
                marks.needs_reset = true;
                fu.verify_locks = true;
                match literal {
                    // Checked with the client's own text right after the
                    // query (`after_query` gives it up when the query
                    // changed how that text reads).
                    Some(l) => {
                        inv.pending_locks.insert(l.clone());
                    }
                    None => inv.unnamed_lock = true,
                }
            }
            Effect::ReleaseLock { .. } => fu.verify_locks = true,
            Effect::ReleaseAllLocks if removes => {
                inv.locks.clear();
                inv.unnamed_lock = false;
            }
            Effect::LockTables => {
                marks.needs_reset = true;
                inv.table_locks = true;
            }
            Effect::UnlockTables if removes => {
                inv.table_locks = false;
                inv.global_read_lock = false;
            }
            Effect::FlushReadLock => {
                marks.needs_reset = true;
                inv.global_read_lock = true;
            }
            Effect::BackupStage { end } => {
                marks.needs_reset = true;
                if !*end {
                    inv.backup = true;
                } else if removes {
                    inv.backup = false;
                }
            }
            Effect::BackupLock { unlock } => {
                marks.needs_reset = true;
                if !*unlock {
                    inv.backup = true;
                } else if removes {
                    inv.backup = false;
                }
            }
            Effect::HandlerOpen { alias } => {
                marks.needs_reset = true;
                inv.handlers.insert(alias.to_ascii_lowercase());
            }
            Effect::HandlerClose { alias } if removes => {
                inv.handlers.remove(&alias.to_ascii_lowercase());
            }
            Effect::TextPrepare { name } => {
                explained = true;
                marks.needs_reset = true;
                let name = name.to_ascii_lowercase();
                let text = st.effects.iter().find_map(|e| match e {
                    Effect::DynamicSql { text } => Some(text),
                    _ => None,
                });
                let scan = text.map(|t| super::code_names::DdlScan::of(t));
                if scan.is_none_or(|s| s.ddl || s.call || s.execute) {
                    inv.ddl_prepared.insert(name.clone());
                } else {
                    inv.ddl_prepared.remove(&name);
                }
                if text.is_none_or(|t| may_take_session_lock(t)) {
                    inv.lock_prepared.insert(name.clone());
                } else {
                    inv.lock_prepared.remove(&name);
                }
                inv.text_prepared.insert(name);
            }
            Effect::Deallocate { name } => {
                explained = true;
                if removes {
                    inv.text_prepared.remove(&name.to_ascii_lowercase());
                    inv.ddl_prepared.remove(&name.to_ascii_lowercase());
                    inv.lock_prepared.remove(&name.to_ascii_lowercase());
                }
            }
            Effect::ExecutePrepared { name }
                if inv.lock_prepared.contains(&name.to_ascii_lowercase()) =>
            {
                // A table, global-read, backup lock or open handler taken
                // there would end silently at the next reset: the session
                // keeps its backend (fail closed).
                inv.unknown = true;
                marks.needs_reset = true;
            }
            Effect::ExecuteImmediate
                if !st
                    .effects
                    .iter()
                    .any(|e| matches!(e, Effect::DynamicSql { .. })) =>
            {
                // Text computed at run time: the same (and the lock forms
                // are refused in stored code but not here).
                inv.unknown = true;
                marks.needs_reset = true;
            }
            Effect::Xa => {
                marks.needs_reset = true;
                marks.ran_xa = true;
                match xa_verb(sql, st) {
                    XaVerb::Start => inv.xa = true,
                    XaVerb::End if removes => inv.xa = false,
                    _ => {}
                }
            }
            Effect::SetTransaction { scope } => {
                // The server reports the session's characteristics
                // (tx_isolation, tx_read_only) with a state change.
                explained = true;
                if *scope == Scope::Default {
                    inv.one_shot = true;
                    marks.needs_reset = true;
                }
                fu.globals_changed |= *scope == Scope::Global;
            }
            Effect::SetVariable {
                name,
                scope,
                to_default,
            } => {
                explained = true;
                if *scope == Scope::Global {
                    fu.globals_changed = true;
                    continue;
                }
                let n = String::from_utf8_lossy(name).into_owned();
                if *scope == Scope::Unscoped {
                    // The tracker stays silent on `@@name`: ask the server
                    // (DEFAULT is absence, except for what a login may
                    // derive: [`Followup::take_defaulted`] drops the probe
                    // where the backend's login derives nothing).
                    if !*to_default || LoginDefaults::DERIVED.contains(&n.as_str()) {
                        fu.probe_vars.push(n.clone());
                    }
                    fu.probe_vars
                        .extend(super::variables::coupled(&n).iter().map(|c| c.to_string()));
                }
                if n.starts_with("session_track_") {
                    // The backend stops reporting what the proxy needs; set
                    // back to DEFAULT, the reset on release restores them.
                    marks.needs_reset = true;
                    if *to_default && removes {
                        inv.trackers = false;
                    } else if !*to_default {
                        inv.trackers = true;
                    }
                    continue;
                }
                if n == "last_insert_id" || n == "identity" {
                    marks.insert_id_unknown = true;
                    continue;
                }
                if *to_default
                    && removes
                    && !n.starts_with("character_set_")
                    && !n.starts_with("collation_")
                    && super::variables::classify(&n) == super::variables::VarClass::Replayable
                {
                    fu.defaulted.push(n.clone());
                }
                if n == "insert_id" {
                    // `insert_id = 0` (or DEFAULT) cancels the pending value.
                    let text = sql.get(st.span.clone());
                    let cancels = *to_default || assigned_number(text, &n) == Some(0);
                    if cancels && removes {
                        inv.insert_id_pending = false;
                        inv.insert_id_forced = None;
                    } else if !cancels {
                        inv.insert_id_pending = true;
                        inv.insert_id_forced = assigned_number(text, &n);
                    }
                    marks.needs_reset = true;
                    continue;
                }
                if super::variables::classify(&n) == super::variables::VarClass::Pinning {
                    marks.needs_reset = true;
                    if *to_default && removes {
                        inv.pinning_vars.remove(&n);
                    } else if !*to_default {
                        // The tracker reports the value; keep the name even
                        // if it does not (fail closed).
                        inv.pinning_vars.entry(n).or_default();
                    }
                }
            }
            Effect::SetNames { names } => {
                // The server reports the character sets, not the collation
                // (with or without COLLATE): ask it.
                explained = true;
                fu.probe_collation = true;
                fu.names_collation |= *names;
            }
            Effect::CalcFoundRows => {
                marks.needs_reset = true;
                inv.calc_found_rows = true;
            }
            Effect::Use { .. } | Effect::SetOther | Effect::SetStatement { .. } => explained = true,
            Effect::SetRole => {
                // Privileges are the session's own from here on; no reset
                // restores the login role, so the backend is closed after.
                // Until the probe after it says otherwise (SET ROLE NONE, or
                // the login's own default role, ends the pin).
                explained = true;
                inv.role = true;
                marks.role_changed = true;
                fu.probe_role = true;
            }
            Effect::SetDefaultRole => {
                explained = true;
                fu.default_role_changed = true;
            }
            Effect::Sequence => {
                inv.sequences = true;
                marks.needs_reset = true;
            }
            Effect::MaybeHiddenCode => marks.needs_reset = true,
            Effect::StoredFunction => {
                // Its body is not visible: it may take named locks, use
                // sequences or set variables. Reset before sharing; count
                // the variables and check the role now.
                marks.needs_reset = true;
                fu.count_user_vars = true;
                fu.probe_role = true;
            }
            Effect::Function(f) if f.kind == FuncKind::LastInsertId { args: true } => {
                marks.insert_id_unknown = true
            }
            _ => {}
        }
    }
    explained
}

#[derive(Debug, PartialEq, Eq)]
enum XaVerb {
    Start,
    End,
    Other,
}

/// XA START/BEGIN associates a transaction; XA COMMIT/ROLLBACK ends it.
fn xa_verb(sql: &[u8], st: &Statement) -> XaVerb {
    let text = sql.get(st.span.clone()).unwrap_or(&[]);
    let mut words = text
        .split(|c| !c.is_ascii_alphanumeric() && *c != b'_')
        .filter(|w| !w.is_empty());
    while let Some(w) = words.next() {
        if w.eq_ignore_ascii_case(b"xa") {
            return match words.next() {
                Some(v) if v.eq_ignore_ascii_case(b"start") || v.eq_ignore_ascii_case(b"begin") => {
                    XaVerb::Start
                }
                Some(v)
                    if v.eq_ignore_ascii_case(b"commit") || v.eq_ignore_ascii_case(b"rollback") =>
                {
                    XaVerb::End
                }
                _ => XaVerb::Other,
            };
        }
    }
    XaVerb::Other
}

#[cfg(test)]
mod tests {
    use crate::protocol::packets::status;

    #[test]
    fn a_use_earlier_in_the_query_moves_where_names_are_matched() {
        use crate::session_state::code_names::{CodeNames, ViewRow};
        let names = CodeNames::build(
            &[ViewRow {
                schema: "s2".into(),
                name: "v_lk".into(),
                definition: Some("select get_lock('l',0) AS `g`".into()),
            }],
            &[],
        );
        let sql = b"SELECT * FROM v_lk; USE s2; SELECT * FROM v_lk";
        let marked = |names: Option<&CodeNames>| -> Vec<bool> {
            let mut a = std::borrow::Cow::Owned(crate::sql::analyze(sql, Default::default()));
            super::mark_code_names(&mut a, sql, b"test", names);
            a.statements
                .iter()
                .map(|s| s.effects.contains(&crate::sql::Effect::StoredFunction))
                .collect()
        };
        assert_eq!(marked(Some(&names)), [false, false, true]);
        // Unknown set: every statement that may name a table (a reset only).
        let mut a = std::borrow::Cow::Owned(crate::sql::analyze(sql, Default::default()));
        super::mark_code_names(&mut a, sql, b"test", None);
        let reset_only: Vec<bool> = a
            .statements
            .iter()
            .map(|s| s.effects.contains(&crate::sql::Effect::MaybeHiddenCode))
            .collect();
        assert_eq!(reset_only, [true, false, true]);
    }

    #[test]
    fn a_backend_in_a_transaction_is_never_shared_as_it_is() {
        let clean = BackendMarks::default();
        assert_eq!(release(clean, status::AUTOCOMMIT), Release::Share);
        assert_eq!(
            release(clean, status::AUTOCOMMIT | status::IN_TRANS),
            Release::Reset
        );
        let roles = BackendMarks {
            role_changed: true,
            ..clean
        };
        assert_eq!(release(roles, status::IN_TRANS), Release::Close);
    }

    use super::*;
    use crate::session_state::PinReason;
    use crate::sql::{LexOptions, analyze};

    struct Run {
        inv: Inventory,
        marks: BackendMarks,
    }

    impl Run {
        fn new() -> Self {
            Self {
                inv: Inventory::default(),
                marks: BackendMarks::default(),
            }
        }

        fn query(&mut self, sql: &str, reply: Reply, tracker: ApplyEffects) -> Followup {
            let a = analyze(sql.as_bytes(), LexOptions::default());
            after_query(
                &mut self.inv,
                &mut self.marks,
                b"test",
                &a,
                &reply,
                &tracker,
                sql.as_bytes(),
                LexOptions::default(),
            )
        }

        /// `sql` answered by an OK reporting insert id `id`.
        fn inserted(&mut self, sql: &str, id: u64) -> Followup {
            let reply = Reply {
                insert_id: Some(id),
                ..Default::default()
            };
            self.query(sql, reply, ApplyEffects::default())
        }

        fn ok(&mut self, sql: &str) -> Followup {
            self.query(sql, Reply::default(), ApplyEffects::default())
        }

        fn changed(&mut self, sql: &str) -> Followup {
            let fx = ApplyEffects {
                state_changed: true,
                ..Default::default()
            };
            self.query(sql, Reply::default(), fx)
        }
    }

    #[test]
    fn harmless_text_holds_nothing() {
        let mut r = Run::new();
        for q in [
            "SELECT 'bob@example.com'",
            "SELECT * FROM budget_lock",
            "SELECT 'GET_LOCK(1)' -- SET @x = 1",
            "/* LOCK TABLES t WRITE */ SELECT 1",
            "SELECT @x",
            "INSERT INTO t VALUES (1)",
        ] {
            r.ok(q);
            assert!(r.inv.is_empty(), "{q}: {:?}", r.inv);
            assert_eq!(release(r.marks, 0), Release::Share, "{q}");
        }
    }

    #[test]
    fn an_insert_id_never_read_back_is_reset_before_sharing() {
        // Session mode skips the read-back: the value must not reach the
        // next client of the backend.
        let mut r = Run::new();
        let reply = Reply {
            insert_id: Some(1),
            ..Default::default()
        };
        r.query(
            "INSERT INTO t VALUES (NULL)",
            reply,
            ApplyEffects::default(),
        );
        assert!(r.marks.insert_id_unknown);
        assert_eq!(release(r.marks, 0), Release::Reset);
        // Once read back (and replayed per session) it may be shared.
        r.marks.insert_id_unknown = false;
        assert_eq!(release(r.marks, 0), Release::Share);
    }

    #[test]
    fn ids_no_ok_speaks_for_are_read_back() {
        let unknown_after = |q: &str, reply: Reply| {
            let mut r = Run::new();
            r.query(q, reply, ApplyEffects::default());
            r.marks.insert_id_unknown
        };
        let ok = Reply::default;
        // A single INSERT or REPLACE answered by an OK without an id
        // generated none.
        assert!(!unknown_after("INSERT INTO t VALUES (1)", ok()));
        assert!(!unknown_after("REPLACE INTO t (a) VALUES (1)", ok()));
        assert!(!unknown_after("UPDATE t SET a = 1", ok()));
        // A failed multi-row INSERT keeps the id of the row it rolled back.
        let failed = Reply {
            error: true,
            ..Default::default()
        };
        assert!(unknown_after(
            "INSERT INTO t (v) VALUES (1), ('x')",
            failed.clone()
        ));
        assert!(!unknown_after("UPDATE t SET v = 'x'", failed));
        // RETURNING's rows end with an EOF, no id.
        let rows = Reply {
            rows: true,
            ..Default::default()
        };
        assert!(unknown_after(
            "INSERT INTO t (v) VALUES (1) RETURNING id",
            rows
        ));
        // LOAD DATA's OK says 0; CREATE TABLE ... SELECT inserts rows; in a
        // multi-statement the last OK speaks for its own statement only.
        assert!(unknown_after(
            "LOAD DATA INFILE '/tmp/x' INTO TABLE t",
            ok()
        ));
        assert!(unknown_after("CREATE TABLE t2 SELECT 1 AS a", ok()));
        assert!(unknown_after("INSERT INTO t (v) VALUES (1); DO 1", ok()));
    }

    #[test]
    fn user_variables_pin_until_all_null() {
        let mut r = Run::new();
        r.changed("SET @a = 1, @b := 2");
        assert!(r.inv.pins().has(PinReason::UserVariable));
        r.changed("SET @a = NULL");
        assert!(r.inv.pins().has(PinReason::UserVariable));
        r.changed("SET @b = NULL");
        assert!(r.inv.is_empty());
        // Whatever the session did, the backend is reset before reuse.
        assert_eq!(release(r.marks, 0), Release::Reset);
    }

    #[test]
    fn statements_after_an_error_did_not_run() {
        let mut r = Run::new();
        let err = |results| Reply {
            error: true,
            results,
            ..Default::default()
        };
        r.query(
            "SELECT * FROM nosuch; SELECT GET_LOCK('L', 0)",
            err(0),
            ApplyEffects::default(),
        );
        assert!(r.inv.is_empty());
        let fu = r.query(
            "SELECT GET_LOCK('L', 0); SELECT * FROM nosuch",
            err(1),
            ApplyEffects::default(),
        );
        assert!(r.inv.pins().has(PinReason::UserLock));
        assert!(fu.verify_locks);
        // A release that failed half way proves nothing.
        r.query(
            "DO RELEASE_ALL_LOCKS(); SELECT * FROM nosuch",
            err(0),
            ApplyEffects::default(),
        );
        assert!(r.inv.pins().has(PinReason::UserLock));
    }

    #[test]
    fn lock_names_are_checked_with_the_clients_text() {
        let mut r = Run::new();
        let fu = r.query(
            "SELECT GET_LOCK(_latin1'caf\u{e9}', 0)",
            Reply::default(),
            ApplyEffects::default(),
        );
        assert!(fu.verify_locks);
        assert_eq!(
            r.inv.pending_locks.iter().collect::<Vec<_>>(),
            [&"_latin1'caf\u{e9}'".as_bytes().to_vec()]
        );
        assert!(!r.inv.unnamed_lock);
        // The same query changes how its text reads: the name cannot be
        // checked with it any more, the lock stays until a reset.
        for q in [
            "SELECT GET_LOCK('a', 0); SET NAMES utf8mb4",
            "SELECT GET_LOCK('a', 0); SET sql_mode = 'NO_BACKSLASH_ESCAPES'",
            "SET STATEMENT character_set_client = latin1 FOR SELECT GET_LOCK('a', 0)",
            "SELECT GET_LOCK('a', 0); CALL p()",
        ] {
            let mut r = Run::new();
            r.query(q, Reply::default(), ApplyEffects::default());
            assert!(r.inv.pending_locks.is_empty(), "{q}");
            assert!(r.inv.unnamed_lock, "{q}");
            assert!(r.inv.pins().has(PinReason::UserLock), "{q}");
        }
    }

    #[test]
    fn unexplained_state_change_is_unknown() {
        let mut r = Run::new();
        r.changed("CALL make_temp_table()");
        assert!(r.inv.pins().has(PinReason::UnknownState));
        assert_eq!(release(r.marks, 0), Release::Reset);
        let mut r = Run::new();
        r.changed("CREATE TEMPORARY TABLE t (a INT)");
        assert!(!r.inv.pins().has(PinReason::UnknownState));
        r.changed("DROP TEMPORARY TABLE IF EXISTS t");
        assert!(r.inv.is_empty());
    }

    #[test]
    fn set_statement_values_are_not_lasting() {
        let mut r = Run::new();
        let fx = ApplyEffects {
            pinning_vars: vec![("sql_log_bin".into(), "OFF".into())],
            ..Default::default()
        };
        r.query(
            "SET STATEMENT sql_log_bin=0 FOR SELECT 1",
            Reply::default(),
            fx,
        );
        assert!(r.inv.is_empty());
        // The restore the server reports with the next statement.
        let fx = ApplyEffects {
            pinning_vars: vec![("sql_log_bin".into(), "ON".into())],
            ..Default::default()
        };
        r.query("SELECT 2", Reply::default(), fx);
        assert!(r.inv.is_empty());
    }

    #[test]
    fn what_set_statement_runs_lasts_and_is_learnt() {
        // The clause's own variable is temporary; a pinning variable the
        // inner statement sets is the session's from here on.
        let mut r = Run::new();
        let fx = ApplyEffects {
            pinning_vars: vec![
                ("max_statement_time".into(), "10.000000".into()),
                ("sql_log_bin".into(), "OFF".into()),
            ],
            state_changed: true,
            ..Default::default()
        };
        r.query(
            "SET STATEMENT max_statement_time=10 FOR SET SESSION sql_log_bin=0",
            Reply::default(),
            fx,
        );
        assert!(r.inv.pinning_vars.contains_key("sql_log_bin"));
        assert!(!r.inv.pinning_vars.contains_key("max_statement_time"));
        assert!(r.marks.needs_reset);
        // The same in a multi-statement, the lasting SET in its own statement.
        let mut r = Run::new();
        let fx = ApplyEffects {
            pinning_vars: vec![("sql_log_bin".into(), "OFF".into())],
            state_changed: true,
            ..Default::default()
        };
        r.query(
            "SET STATEMENT max_statement_time=5 FOR SELECT 1; SET sql_log_bin=0",
            Reply::default(),
            fx,
        );
        assert!(r.inv.pinning_vars.contains_key("sql_log_bin"));
    }

    #[test]
    fn a_connection_that_recorded_statements_is_closed() {
        for sql in [
            "SET SESSION profiling = 1",
            "SET @@optimizer_trace = 'enabled=on'",
            "SET STATEMENT profiling = 1 FOR SELECT 1",
        ] {
            let mut r = Run::new();
            r.ok(sql);
            assert!(r.marks.records_queries, "{sql}");
            assert_eq!(release(r.marks, 0), Release::Close, "{sql}");
        }
        // Switched on by stored code: reported by the server.
        let mut r = Run::new();
        let fx = ApplyEffects {
            pinning_vars: vec![("profiling".into(), "ON".into())],
            state_changed: true,
            ..Default::default()
        };
        r.query("CALL p()", Reply::default(), fx);
        assert_eq!(release(r.marks, 0), Release::Close);
        // Other variables do not close.
        let mut r = Run::new();
        r.ok("SET SESSION profiling_history_size = 5");
        assert!(!r.marks.records_queries);
    }

    #[test]
    fn set_statement_that_cannot_be_told_apart_holds_the_backend() {
        // The clause sets what the statement sets: what lasts is unknown.
        let mut r = Run::new();
        r.changed("SET STATEMENT sql_mode='' FOR SET SESSION sql_mode='ANSI'");
        assert!(r.inv.pins().has(PinReason::UnknownState));
        assert!(r.marks.needs_reset);
        // A clause not understood, with a change reported.
        let mut r = Run::new();
        r.changed("SET STATEMENT @@global.wait_timeout=1 FOR SELECT 1");
        assert!(r.inv.pins().has(PinReason::UnknownState));
        // A clause that silences the trackers: nothing reported, still held.
        let mut r = Run::new();
        r.ok("SET STATEMENT session_track_system_variables='' FOR \
             SET SESSION sql_mode='NO_BACKSLASH_ESCAPES'");
        assert!(r.inv.pins().has(PinReason::UnknownState));
        assert!(r.marks.needs_reset);
        // A clause naming a variable by its alias covers the other name.
        let t = Temporary::Names(vec![b"transaction_isolation".to_vec()]);
        assert!(t.covers("tx_isolation") && t.covers("transaction_isolation"));
        assert!(!t.covers("tx_read_only"));
        // Understood, nothing but its own variable reported, holds nothing:
        // `set_statement_values_are_not_lasting`.
    }

    #[test]
    fn one_shot_settings_end_where_the_server_certainly_used_them() {
        let mut r = Run::new();
        r.ok("SET TRANSACTION READ ONLY");
        assert!(r.inv.pins().has(PinReason::OneShot));
        r.ok("SET SESSION sql_mode = ''");
        assert!(r.inv.pins().has(PinReason::OneShot));
        // The server keeps the characteristics through these (measured).
        for sql in [
            "SELECT 1",
            "DO 1",
            "SELECT * FROM myisam_t",
            "EXECUTE IMMEDIATE 'SELECT 2'",
        ] {
            r.ok(sql);
            assert!(r.inv.pins().has(PinReason::OneShot), "{sql}");
        }
        r.ok("COMMIT");
        assert!(r.inv.is_empty());
        r.ok("SET SESSION TRANSACTION READ ONLY");
        assert!(r.inv.is_empty());
        r.ok("EXECUTE IMMEDIATE 'SET TRANSACTION ISOLATION LEVEL SERIALIZABLE'");
        assert!(r.inv.pins().has(PinReason::OneShot), "set by dynamic SQL");
        r.ok("START TRANSACTION");
        assert!(!r.inv.one_shot, "the transaction took them");

        let mut r = Run::new();
        r.ok("SET insert_id = 9100");
        for sql in [
            "SELECT 1",
            "UPDATE t SET v = 1",
            "INSERT INTO t (id, v) VALUES (5, 1)",
        ] {
            r.ok(sql);
            assert!(r.inv.pins().has(PinReason::OneShot), "{sql}");
        }
        // An explicit id reports itself, not the forced one.
        r.inserted("INSERT INTO t (id, v) VALUES (77, 1)", 77);
        assert!(r.inv.pins().has(PinReason::OneShot));
        r.inserted("INSERT INTO t (v) VALUES (1)", 9100);
        assert!(r.inv.is_empty(), "the insert used it");
        r.ok("SET insert_id = @x");
        r.inserted("INSERT INTO t (v) VALUES (1)", 9100);
        assert!(r.inv.pins().has(PinReason::OneShot), "value unknown: kept");
        r.ok("SET insert_id = DEFAULT");
        assert!(r.inv.is_empty());
    }

    #[test]
    fn an_assigned_number_is_read_only_when_plain() {
        let n = |t: &str| assigned_number(Some(t.as_bytes()), "insert_id");
        assert_eq!(n("SET insert_id = 9100"), Some(9100));
        assert_eq!(n("SET @@session.insert_id=7, sql_mode=''"), Some(7));
        assert_eq!(n("SET insert_id = @x"), None);
        assert_eq!(n("SET insert_id = 1+1"), None);
        assert_eq!(n("SET my_insert_id = 5"), None);
        assert_eq!(n("SET insert_id = 1, insert_id = 2"), None);
    }

    #[test]
    fn diagnostics_and_unclear_text_are_never_shared_as_is() {
        let mut r = Run::new();
        r.query(
            "SELECT 1/0",
            Reply {
                warnings: 1,
                ..Default::default()
            },
            ApplyEffects::default(),
        );
        assert_eq!(release(r.marks, 0), Release::ClearDiagnostics);
        // A later clean statement does not clear the server's area.
        r.ok("SELECT 1");
        assert_eq!(release(r.marks, 0), Release::ClearDiagnostics);
        let mut r = Run::new();
        r.ok("SELECT 'unterminated");
        assert_eq!(release(r.marks, 0), Release::Reset);
    }

    #[test]
    fn xa_and_locks_follow_their_verbs() {
        let mut r = Run::new();
        r.ok("XA START 'x'");
        assert!(r.inv.pins().has(PinReason::Xa));
        r.ok("XA END 'x'");
        assert!(r.inv.pins().has(PinReason::Xa));
        r.ok("XA ROLLBACK 'x'");
        assert!(r.inv.is_empty());
        r.ok("LOCK TABLES t READ");
        r.ok("UNLOCK TABLES");
        assert!(r.inv.is_empty());
        r.ok("HANDLER t OPEN AS h");
        r.ok("HANDLER h CLOSE");
        assert!(r.inv.is_empty());
    }

    /// `SET x = DEFAULT` of a login-derived variable is absence where the
    /// backend's flavour derives nothing (a value would differ from every
    /// fresh backend and be re-sent on each move), and the reported value
    /// where it does (DEFAULT is the global value, not the login's).
    #[test]
    fn derived_default_is_absence_only_without_the_capability() {
        let sql = "SET SESSION wait_timeout = DEFAULT, sql_mode = DEFAULT, \
                   @@wait_timeout = DEFAULT, max_join_size = DEFAULT";
        let fu = Run::new().changed(sql);
        let plain = LoginDefaults::default();
        let mut f = fu.clone();
        let mut gone = f.take_defaulted(plain);
        gone.sort();
        gone.dedup();
        assert_eq!(gone, ["max_join_size", "sql_mode", "wait_timeout"]);
        assert!(!f.probe_vars.contains(&"wait_timeout".to_string()));
        let interactive = LoginDefaults {
            interactive: true,
            ..Default::default()
        };
        let mut f = fu.clone();
        let mut gone = f.take_defaulted(interactive);
        gone.sort();
        gone.dedup();
        assert_eq!(gone, ["max_join_size", "sql_mode"]);
        assert!(f.probe_vars.contains(&"wait_timeout".to_string()));
        let ignore_space = LoginDefaults {
            ignore_space: true,
            ..Default::default()
        };
        let mut f = fu;
        let mut gone = f.take_defaulted(ignore_space);
        gone.sort();
        gone.dedup();
        assert_eq!(gone, ["max_join_size", "wait_timeout"]);
    }
}
