//! SQL text analysis for the session-state authority: a MariaDB 10.11 /
//! MySQL 8 lexer and, for each statement of a COM_QUERY, its kind and its
//! effects on the session (user variables, temporary tables, locks,
//! prepared statements, system variables, …).
//!
//! Pure code, no I/O. Owns reading SQL text only; it must not decide what
//! pins a session or what is replayed (that is `session_state`'s job).
//!
//! ```text
//! lexer ─► reader (statement boundaries, lookahead) ─► statement (verbs,
//!          └─ blocks (routine / compound bodies)        SET/DROP/KILL/… lists)
//!                                                    └► observe (expression
//!                                                       patterns: @x :=, GET_LOCK(…), …)
//! effects: the public result, `analyze`
//! ```

mod blocks;
pub mod effects;
pub mod lexer;
mod observe;
mod reader;
mod statement;

#[cfg(test)]
mod tests;

pub use effects::{
    Analysis, Effect, Func, FuncKind, KillTarget, Kind, MAX_STATEMENTS, Scope, Statement,
    TableName, analyze,
};
pub use lexer::LexOptions;
