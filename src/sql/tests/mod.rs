//! Table-driven tests of `analyze`: statement splitting, kinds and effects.

mod effects;
mod structure;

use super::*;

pub(super) fn run(sql: &str, opts: LexOptions) -> Analysis {
    analyze(sql.as_bytes(), opts)
}

pub(super) fn b(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

pub(super) fn uv(name: &str, null: bool) -> Effect {
    Effect::UserVarAssign {
        name: b(name),
        null,
    }
}

pub(super) fn sv(name: &str, scope: Scope, to_default: bool) -> Effect {
    Effect::SetVariable {
        name: b(name),
        scope,
        to_default,
    }
}

pub(super) fn tn(schema: Option<&str>, name: &str) -> TableName {
    (schema.map(b), b(name))
}

/// A GET_LOCK effect as [`check`] compares it (without the literal's text,
/// which `lock_literals` checks).
pub(super) fn get_lock(name: Option<&str>) -> Effect {
    Effect::GetLock {
        name: name.map(b),
        literal: None,
    }
}

/// `e` without the parts [`check`] does not compare.
pub(super) fn comparable(e: Effect) -> Effect {
    match e {
        Effect::GetLock { name, .. } => Effect::GetLock {
            name,
            literal: None,
        },
        e => e,
    }
}

pub(super) fn kill(query: bool, id_kind: KillTarget) -> Effect {
    Effect::Kill { query, id_kind }
}

/// Kinds of all statements and all their effects, in order.
pub(super) fn check(sql: &str, opts: LexOptions, kinds: &[Kind], effects: &[Effect]) {
    let a = run(sql, opts);
    let got_kinds: Vec<Kind> = a.statements.iter().map(|s| s.kind).collect();
    assert_eq!(got_kinds, kinds, "kinds of {sql:?}");
    let got: Vec<Effect> = a
        .statements
        .iter()
        .flat_map(|s| s.effects.iter().cloned())
        .map(comparable)
        .collect();
    assert_eq!(got, effects, "effects of {sql:?}");
    assert!(!a.incomplete, "{sql:?} is complete");
}

pub(super) const D: LexOptions = LexOptions {
    ansi_quotes: false,
    no_backslash_escapes: false,
};
