//! SQL text analysis for the session-state authority: a MariaDB 10.11 /
//! MySQL 8 lexer and, for each statement of a COM_QUERY, its kind and its
//! effects on the session (user variables, temporary tables, locks,
//! prepared statements, system variables, …).
//!
//! Pure code, no I/O. Owns reading SQL text only; it must not decide what
//! pins a session or what is replayed (that is `session_state`'s job).
//!
//! ```text
//! lexer ─► reader ─────────────► statement (verbs; CALL, KILL, HANDLER, …)
//!          │ statement ends,      ├─ set (SET lists, scopes, SET STATEMENT)
//!          │ lookahead            └─ ddl (CREATE/ALTER/DROP/RENAME)
//!          ├─ blocks (routine and compound bodies: BEGIN … END nesting)
//!          └─ observe (anywhere in a statement: @x :=, INTO @x,
//!                      GET_LOCK(…), CONNECTION_ID(), …)
//! dynamic: the texts of PREPARE … FROM and EXECUTE IMMEDIATE, literal or not
//! diagnostics: does a statement keep the server's warning list
//! effects: the public result types and `analyze`
//! digest: a statement's normal form and its hash (keywords: MariaDB's list)
//! ```

mod blocks;
mod builtins;
mod ddl;
mod diagnostics;
pub mod digest;
pub mod dynamic;
pub mod effects;
mod keywords;
pub mod lexer;
mod observe;
mod reader;
pub mod scan;
mod set;
mod statement;

#[cfg(test)]
mod tests;

pub use diagnostics::{DiagnosticsUse, keeps_diagnostics};
pub use effects::{
    Analysis, Effect, Func, FuncKind, KillTarget, Kind, MAX_STATEMENTS, Scope, Statement,
    TableName, analyze, analyze_with_digest, may_change_lexing,
};
pub use keywords::is_keyword;
pub use lexer::LexOptions;

/// Appends `bytes` in upper-case hex, as the body of an `X'…'` literal.
pub fn push_hex_upper(out: &mut Vec<u8>, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789ABCDEF";
    out.reserve(2 * bytes.len());
    for &b in bytes {
        out.extend_from_slice(&[DIGITS[usize::from(b >> 4)], DIGITS[usize::from(b & 15)]]);
    }
}
