//! Effects that can appear anywhere in a statement, inside any expression:
//! `@x := …`, `… INTO @a, @b`, the lock functions, the functions whose
//! value depends on the session (LAST_INSERT_ID, ROW_COUNT, FOUND_ROWS,
//! CONNECTION_ID), SQL_CALC_FOUND_ROWS, sequence functions, and calls of
//! functions that may be stored code (not built in, see [`super::builtins`]).
//!
//! Owns these token patterns only; it sees every token the reader consumes,
//! in order, with a few tokens of lookahead.

use super::effects::{Effect, Func, FuncKind};
use super::lexer::{Token, TokenKind};
use super::reader::{Reader, lower};

/// Where an `INTO` target list is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Into {
    #[default]
    Off,
    /// After INTO or a comma: a target comes next.
    Target,
    /// After a target: a comma may continue the list.
    Comma,
}

/// Per-statement pattern state.
#[derive(Debug, Default)]
pub(super) struct Observer {
    into: Into,
    calc_found_rows: bool,
    /// Function calls whose closing parenthesis is still to come: the
    /// effect's index and the depth inside the call's parentheses.
    pending: Vec<(usize, u32)>,
    /// The two tokens consumed before the reader's `prev` (newest first):
    /// enough to tell `INTO db.t(` from a call `db.f(`.
    before: [Option<Token>; 2],
    /// A sequence / stored-function effect was emitted (once per statement).
    sequence: bool,
    stored_function: bool,
}

impl Observer {
    /// An inner statement of a body ended: an INTO list cannot go on.
    pub(super) fn unit_end(&mut self) {
        self.into = Into::Off;
        self.before = [None, None];
    }

    /// The statement ended: unclosed calls end at its last token.
    pub(super) fn finish(&mut self, effects: &mut [Effect], last: Option<Token>) {
        let end = last.map_or(0, |t| t.end);
        self.before = [None, None];
        self.sequence = false;
        self.stored_function = false;
        for (i, _) in self.pending.drain(..) {
            if let Some(Effect::Function(f)) = effects.get_mut(i) {
                f.span.end = end.max(f.span.start);
            }
        }
    }
}

/// The functions looked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Known {
    GetLock,
    ReleaseLock,
    ReleaseAllLocks,
    LastInsertId,
    RowCount,
    FoundRows,
    ConnectionId,
}

fn known(name: &[u8]) -> Option<Known> {
    let is = |w: &[u8]| name.eq_ignore_ascii_case(w);
    // Dispatch on length first: most words are none of these.
    match name.len() {
        8 if is(b"get_lock") => Some(Known::GetLock),
        9 if is(b"row_count") => Some(Known::RowCount),
        10 if is(b"found_rows") => Some(Known::FoundRows),
        12 if is(b"release_lock") => Some(Known::ReleaseLock),
        13 if is(b"connection_id") => Some(Known::ConnectionId),
        14 if is(b"last_insert_id") => Some(Known::LastInsertId),
        17 if is(b"release_all_locks") => Some(Known::ReleaseAllLocks),
        _ => None,
    }
}

/// Words after which `name(` names a table, index, routine or CTE, not a
/// call of the built-in function.
const NAME_CONTEXT: &[&[u8]] = &[
    b"table",
    b"tables",
    b"into",
    b"from",
    b"join",
    b"update",
    b"insert",
    b"replace",
    b"exists",
    b"key",
    b"index",
    b"references",
    b"constraint",
    b"view",
    b"function",
    b"procedure",
    b"call",
    b"with",
    b"sequence",
    b"trigger",
    b"event",
    b"package",
    b"aggregate",
    b"handler",
    b"unique",
    b"fulltext",
    b"spatial",
    b"recursive",
    // `CHARACTER SET utf8 (@a, col)` in LOAD DATA.
    b"set",
    b"charset",
];

/// Modifiers after which, in [`MODIFIED`] statements, a table name comes.
const MODIFIERS: &[&[u8]] = &[b"ignore", b"low_priority", b"delayed", b"high_priority"];

/// What a [`MODIFIERS`] word may follow when a table name comes next (a
/// statement's verb, or another modifier).
const MODIFIED: &[&[u8]] = &[
    b"insert",
    b"replace",
    b"update",
    b"delete",
    b"quick",
    b"ignore",
    b"low_priority",
    b"delayed",
    b"high_priority",
];

/// Words that continue an expression after NULL (so `@x := NULL IS NULL`
/// does not assign NULL).
const OPERATOR_WORDS: &[&[u8]] = &[
    b"is", b"and", b"or", b"xor", b"not", b"between", b"like", b"in", b"regexp", b"rlike", b"div",
    b"mod", b"collate", b"sounds", b"member", b"escape",
];

impl Reader<'_> {
    /// Looks at one consumed token (`depth` is the parenthesis depth before
    /// it).
    pub(super) fn observe_token(&mut self, t: Token, depth: u32) {
        let sql = self.sql;
        if t.is_symbol(sql, b")")
            && let Some(&(i, d)) = self.observer.pending.last()
            && d == depth
        {
            self.observer.pending.pop();
            if let Some(Effect::Function(f)) = self.effects.get_mut(i) {
                f.span.end = t.end;
            }
        }
        let was = self.observer.into;
        self.observer.into = match (was, t.kind) {
            (Into::Target, TokenKind::UserVar) => {
                let name = lower(self.value(&t).into_owned());
                self.emit(Effect::UserVarAssign { name, null: false });
                Into::Comma
            }
            (Into::Target, TokenKind::Word | TokenKind::QuotedIdent) => Into::Comma,
            (Into::Comma, TokenKind::Symbol) if t.is_symbol(sql, b",") => Into::Target,
            _ if t.is_word(sql, b"into") => Into::Target,
            _ => Into::Off,
        };
        match t.kind {
            TokenKind::UserVar if self.peek_symbol(0, b":=") => {
                let null = self.value_is_null(1);
                let name = lower(self.value(&t).into_owned());
                self.emit(Effect::UserVarAssign { name, null });
            }
            TokenKind::Word | TokenKind::QuotedIdent => {
                if t.kind == TokenKind::Word
                    && t.text(sql).len() == 19
                    && t.is_word(sql, b"sql_calc_found_rows")
                    && !self.observer.calc_found_rows
                {
                    self.observer.calc_found_rows = true;
                    self.emit(Effect::CalcFoundRows);
                }
                let f = if t.kind == TokenKind::Word {
                    known(t.text(sql))
                } else {
                    known(&self.value(&t))
                };
                if let Some(f) = f
                    && self.peek_symbol(0, b"(")
                    && !self.name_context()
                {
                    self.call(f, t, depth);
                } else if f.is_none() {
                    self.routine_or_sequence(t);
                }
            }
            _ => {}
        }
        self.observer.before = [self.prev, self.observer.before[0]];
    }

    /// Sequence functions that draw a value (`NEXTVAL(s)`, `NEXT VALUE FOR
    /// s`, Oracle mode's `s.nextval`: `SETVAL(s, …)` sets the sequence, not
    /// the session's `LASTVAL(s)`, checked on 10.11) and calls of functions
    /// that may be stored code: `name(` not built in, or `schema.name(`.
    fn routine_or_sequence(&mut self, t: Token) {
        let sql = self.sql;
        let word = t.kind == TokenKind::Word;
        let sequence = (word
            && t.is_word(sql, b"nextval")
            && self.peek_symbol(0, b"(")
            && !self.name_context())
            || (word
                && t.is_word(sql, b"next")
                && self.peek_word(0, b"value")
                && self.peek_word(1, b"for"))
            || (word
                && t.is_word(sql, b"nextval")
                && self.prev.is_some_and(|p| p.is_symbol(sql, b".")));
        if sequence {
            if !self.observer.sequence {
                self.observer.sequence = true;
                self.emit(Effect::Sequence);
            }
            return;
        }
        if self.observer.stored_function || !self.peek_symbol(0, b"(") {
            return;
        }
        let qualified = self.prev.is_some_and(|p| p.is_symbol(sql, b"."));
        let call = if qualified {
            // `db.f(` is a call unless `db.t` names a table (`INTO db.t(`).
            let [schema, before] = self.observer.before;
            schema.is_some_and(|s| matches!(s.kind, TokenKind::Word | TokenKind::QuotedIdent))
                && !before.is_some_and(|b| {
                    b.is_symbol(sql, b".") || NAME_CONTEXT.iter().any(|w| b.is_word(sql, w))
                })
        } else {
            let name = if word {
                std::borrow::Cow::Borrowed(t.text(sql))
            } else {
                self.value(&t)
            };
            !self.name_context() && !super::builtins::is_builtin(&name)
        };
        if call {
            self.observer.stored_function = true;
            self.emit(Effect::StoredFunction);
        }
    }

    /// True when the previous token makes `word(` a name, not a call.
    fn name_context(&self) -> bool {
        let sql = self.sql;
        self.prev.is_some_and(|p| {
            p.is_symbol(sql, b".")
                || NAME_CONTEXT.iter().any(|w| p.is_word(sql, w))
                // `INSERT IGNORE t(…)`, `REPLACE LOW_PRIORITY t(…)`: after a
                // modifier of a statement that names its table next; after
                // `SELECT HIGH_PRIORITY` an expression follows.
                || (MODIFIERS.iter().any(|w| p.is_word(sql, w))
                    && self.observer.before[0].is_some_and(|b| {
                        MODIFIED.iter().any(|w| b.is_word(sql, w))
                    }))
        })
    }

    /// A call of `f`; its `(` is next.
    fn call(&mut self, f: Known, t: Token, depth: u32) {
        let kind = match f {
            Known::GetLock => {
                let (name, literal) = self.lock_name(b",").unzip();
                return self.emit(Effect::GetLock { name, literal });
            }
            Known::ReleaseLock => {
                let name = self.lock_name(b")").map(|(name, _)| name);
                return self.emit(Effect::ReleaseLock { name });
            }
            Known::ReleaseAllLocks => return self.emit(Effect::ReleaseAllLocks),
            Known::LastInsertId => FuncKind::LastInsertId {
                args: !self.peek_symbol(1, b")"),
            },
            Known::RowCount => FuncKind::RowCount,
            Known::FoundRows => FuncKind::FoundRows,
            Known::ConnectionId => FuncKind::ConnectionId,
        };
        self.observer.pending.push((self.effects.len(), depth + 1));
        self.emit(Effect::Function(Func {
            kind,
            span: t.start..t.end,
        }));
    }

    /// The lock name when the first argument (after the `(` that is next)
    /// is a plain string literal, optionally with a charset introducer,
    /// followed by `end`: its value as read here, and the argument's text
    /// as written (introducer and quotes included), which means to the
    /// server what it meant in the statement as long as the session's
    /// character sets and sql_mode stay as they were.
    fn lock_name(&mut self, end: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
        let sql = self.sql;
        let mut k = 1;
        let first = self.peek(k)?;
        if first.kind == TokenKind::Word && first.text(sql).first() == Some(&b'_') {
            k += 1;
        }
        let lit = self.peek(k)?;
        if lit.kind != TokenKind::String || !self.peek_symbol(k + 1, end) {
            return None;
        }
        let written = sql.get(first.start..lit.end)?.to_vec();
        Some((self.value(&lit).into_owned(), written))
    }

    /// True when the value starting `k` tokens ahead is exactly NULL.
    pub(super) fn value_is_null(&mut self, k: usize) -> bool {
        let sql = self.sql;
        if !self.peek(k).is_some_and(|t| t.is_null(sql)) {
            return false;
        }
        match self.peek(k + 1) {
            None => true,
            Some(n) if n.kind == TokenKind::Symbol => {
                n.is_symbol(sql, b",") || n.is_symbol(sql, b")")
            }
            Some(n) if n.kind == TokenKind::Word => {
                !OPERATOR_WORDS.iter().any(|w| n.is_word(sql, w))
            }
            Some(_) => false,
        }
    }
}
