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
use super::tracked::{ApplyEffects, TrackedState};
use super::variables::fresh_value;
use crate::sql::{Analysis, Effect, Kind, Scope, Statement};

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
    /// The OK carried a non-zero insert id.
    pub insert_id: bool,
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
}

/// The verdict for a backend with `marks` whose session holds nothing.
pub fn release(marks: BackendMarks) -> Release {
    if marks.needs_reset {
        Release::Reset
    } else if marks.diagnostics {
        Release::ClearDiagnostics
    } else {
        Release::Share
    }
}

/// Options of the session that change how its SQL is lexed.
pub fn lex_options(state: &TrackedState) -> crate::sql::LexOptions {
    let mode = state.vars.get("sql_mode").map(String::as_str).unwrap_or("");
    let has = |flag: &str| {
        mode.split(',')
            .any(|m| m.eq_ignore_ascii_case(flag) || (flag == "ANSI_QUOTES" && m == "ANSI"))
    };
    crate::sql::LexOptions {
        ansi_quotes: has("ANSI_QUOTES"),
        no_backslash_escapes: has("NO_BACKSLASH_ESCAPES"),
    }
}

/// Statements whose work the text does not show (stored code, dynamic SQL).
fn opaque(kind: Kind) -> bool {
    matches!(
        kind,
        Kind::Call | Kind::Compound | Kind::ExecuteImmediate | Kind::Execute
    )
}

/// Statements that consume a one-shot setting (SET TRANSACTION, insert_id).
fn consumes_one_shot(kind: Kind) -> bool {
    !matches!(kind, Kind::Set | Kind::Show | Kind::Empty | Kind::Use)
}

/// Applies one query's statements and the server's answer to the
/// session's inventory and the backend's marks. `schema` is the session's
/// schema before the query; `tracker` what the trackers reported.
pub fn after_query(
    inv: &mut Inventory,
    marks: &mut BackendMarks,
    state: &mut TrackedState,
    schema: &[u8],
    analysis: &Analysis,
    reply: &Reply,
    tracker: &ApplyEffects,
    sql: &[u8],
) -> Followup {
    let mut fu = Followup::default();
    let stmts = &analysis.statements;
    // The FOUND_ROWS() hold lasts for the one statement after
    // SQL_CALC_FOUND_ROWS (any statement replaces the value).
    inv.calc_found_rows = false;
    // Which statements ran: all without an error; with one, the first
    // `results` (one result per statement) — unless stored code ran, whose
    // results cannot be counted: then every statement may have run.
    let any_opaque = stmts.iter().any(|s| opaque(s.kind));
    let (ran_fully, failed_at) = if !reply.error {
        (stmts.len(), None)
    } else if any_opaque {
        (0, None)
    } else {
        let k = (reply.results as usize).min(stmts.len());
        (k, Some(k))
    };
    let mut explained = false;
    let mut set_statement = false;
    for (i, st) in stmts.iter().enumerate() {
        let removes = i < ran_fully;
        let adds = removes || failed_at.is_none() || opaque(st.kind);
        if !adds {
            continue;
        }
        explained |= apply_statement(inv, marks, state, schema, st, removes, sql, &mut fu);
        set_statement |= st.effects.iter().any(|e| matches!(e, Effect::SetStatement));
        if opaque(st.kind) {
            marks.needs_reset = true;
            marks.insert_id_unknown = true;
            fu.count_user_vars = true;
        }
    }
    if analysis.incomplete {
        // The text could not be read to its end: anything may have happened.
        marks.needs_reset = true;
        explained = false;
    }
    // One-shot settings are consumed by the next statement that uses them.
    if inv.one_shot
        && !reply.error
        && stmts.iter().any(|s| consumes_one_shot(s.kind))
        && !stmts
            .iter()
            .any(|s| s.effects.iter().any(is_one_shot_effect))
    {
        inv.one_shot = false;
    }
    // Variables the proxy cannot replay, as the server reported them. In
    // the reply of SET STATEMENT … FOR they are that statement's temporary
    // values (the server reports the restore with the next statement).
    if !set_statement {
        for (name, value) in &tracker.pinning_vars {
            if fresh_value(name) == Some(value.as_str()) {
                inv.pinning_vars.remove(name);
            } else {
                inv.pinning_vars.insert(name.clone(), value.clone());
                marks.needs_reset = true;
            }
        }
    }
    if tracker.trackers_touched {
        inv.trackers = true;
        marks.needs_reset = true;
    }
    if tracker.state_changed && !explained {
        inv.unknown = true;
        marks.needs_reset = true;
    }
    if tracker.charset_without_collation {
        // SET NAMES x [COLLATE y] is read from the text; any other way of
        // changing the character set asks the server for the collation.
        fu.probe_collation = !stmts.iter().any(|s| {
            s.effects
                .iter()
                .any(|e| matches!(e, Effect::SetNames { .. }))
        });
    }
    if reply.insert_id {
        marks.insert_id_unknown = true;
    }
    marks.diagnostics |= reply.warnings > 0 || reply.error;
    fu
}

fn is_one_shot_effect(e: &Effect) -> bool {
    match e {
        Effect::SetTransaction { scope } => *scope == Scope::Default,
        Effect::SetVariable { name, .. } => name.as_slice() == b"insert_id",
        _ => false,
    }
}

/// Applies one statement; returns true when it explains a bare state
/// change reported by the server. `removes`: the statement certainly ran,
/// so effects that end state count too.
#[allow(clippy::too_many_arguments)]
fn apply_statement(
    inv: &mut Inventory,
    marks: &mut BackendMarks,
    state: &mut TrackedState,
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
            Effect::TableRename { pairs } => {
                explained = true;
                if removes {
                    for (from, to) in pairs {
                        let key = (
                            from.0.clone().unwrap_or_else(|| schema.to_vec()),
                            from.1.clone(),
                        );
                        if inv.temp_tables.remove(&key) {
                            let s = to.0.clone().unwrap_or_else(|| schema.to_vec());
                            inv.temp_tables.insert((s, to.1.clone()));
                        }
                    }
                }
            }
            Effect::GetLock { name } => {
                marks.needs_reset = true;
                fu.verify_locks = true;
                match name {
                    Some(n) => {
                        inv.locks.insert(n.clone());
                    }
                    None => inv.unnamed_lock = true,
                }
            }
            Effect::ReleaseLock { .. } => fu.verify_locks = true,
            Effect::ReleaseAllLocks => {
                if removes {
                    inv.locks.clear();
                    inv.unnamed_lock = false;
                }
            }
            Effect::LockTables => {
                marks.needs_reset = true;
                inv.table_locks = true;
            }
            Effect::UnlockTables => {
                if removes {
                    inv.table_locks = false;
                    inv.global_read_lock = false;
                }
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
            Effect::HandlerClose { alias } => {
                if removes {
                    inv.handlers.remove(&alias.to_ascii_lowercase());
                }
            }
            Effect::TextPrepare { name } => {
                explained = true;
                marks.needs_reset = true;
                inv.text_prepared.insert(name.to_ascii_lowercase());
            }
            Effect::Deallocate { name } => {
                explained = true;
                if removes {
                    inv.text_prepared.remove(&name.to_ascii_lowercase());
                }
            }
            Effect::Xa => {
                marks.needs_reset = true;
                match xa_verb(sql, st) {
                    XaVerb::Start => inv.xa = true,
                    XaVerb::End if removes => inv.xa = false,
                    _ => {}
                }
            }
            Effect::SetTransaction { scope } => {
                if *scope == Scope::Default {
                    inv.one_shot = true;
                    marks.needs_reset = true;
                }
            }
            Effect::SetVariable {
                name,
                scope,
                to_default,
            } => {
                explained = true;
                if *scope == Scope::Global {
                    continue;
                }
                let n = String::from_utf8_lossy(name).into_owned();
                if n == "insert_id" {
                    inv.one_shot = true;
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
            Effect::SetNames { collation } => {
                explained = true;
                if removes {
                    match collation {
                        Some(c) => state.set_collation(&String::from_utf8_lossy(c)),
                        None => {}
                    }
                }
            }
            Effect::CalcFoundRows => {
                marks.needs_reset = true;
                inv.calc_found_rows = true;
            }
            Effect::Use { .. } | Effect::SetOther | Effect::SetStatement => explained = true,
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
