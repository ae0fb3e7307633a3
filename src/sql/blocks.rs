//! Block structure of stored-program bodies: where a `CREATE PROCEDURE …
//! BEGIN … END` or a `BEGIN NOT ATOMIC … END` ends, and where each inner
//! statement starts, from the token stream alone.
//!
//! Owns the nesting rules only (it never looks at effects). A body nests
//! `BEGIN … END`, `IF … END IF`, `CASE … END [CASE]`, `LOOP … END LOOP`,
//! `WHILE … END WHILE`, `REPEAT … END REPEAT` and `FOR … END FOR`. Block
//! keywords count only where a statement starts (after `;`, `BEGIN`,
//! `THEN`, `ELSE`, `DO`, `LOOP`, `REPEAT`, a label, a handler's condition
//! list, or the routine header), so the `IF(`/`REPEAT(` functions and
//! columns named `begin`/`end` do not confuse it; `CASE` counts everywhere
//! (the expression form also ends with `END`). A structure that does not
//! add up (an `END` with nothing open, or input ending inside a block) is
//! reported as broken and the caller treats the text as opaque.

use super::lexer::{Token, TokenKind};

/// One open block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Block {
    Begin,
    If,
    /// `statement`: the CASE statement (its THEN/ELSE start statements);
    /// else the CASE expression.
    Case {
        statement: bool,
    },
    Loop,
    While,
    Repeat,
    For,
}

/// Which routine header precedes the body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Header {
    /// No header: a compound statement, the body starts at once.
    None,
    /// PROCEDURE/FUNCTION: the body follows the parameter list and the
    /// characteristics.
    Routine {
        params_seen: bool,
    },
    /// TRIGGER: the body follows `FOR EACH ROW [FOLLOWS|PRECEDES name]`.
    Trigger,
    TriggerOrder,
    TriggerOrderName,
    /// EVENT: the body follows `DO`.
    Event,
    /// PACKAGE [BODY] (sql_mode=ORACLE): `AS`/`IS` opens a block closed by
    /// `END`; inside it, `BEGIN` opens a block anywhere.
    Package,
}

/// Where a `DECLARE … HANDLER FOR` condition list is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Handler {
    Off,
    /// Expecting a condition value.
    Cond,
    /// After SQLSTATE: `VALUE` or the string.
    SqlState,
    /// After SQLSTATE VALUE: the string.
    SqlStateString,
    /// After NOT: FOUND.
    NotFound,
}

/// Tracks the nesting of one body.
#[derive(Debug)]
pub(super) struct Body {
    stack: Vec<Block>,
    header: Header,
    /// The next token starts a statement.
    start: bool,
    /// The previous token was a word at a statement start (maybe a label).
    label: bool,
    /// The next token is the keyword of `END IF`, `END LOOP`, …
    eat: bool,
    handler: Handler,
    begin_anywhere: bool,
    /// An END closed nothing.
    pub(super) broken: bool,
    /// Stored-program variables declared so far (lowercase), so that
    /// `SET v = …` is not taken for a system variable.
    pub(super) locals: Vec<Vec<u8>>,
}

fn word_in(sql: &[u8], t: Option<Token>, words: &[&[u8]]) -> bool {
    t.is_some_and(|t| words.iter().any(|w| t.is_word(sql, w)))
}

fn sym(sql: &[u8], t: Option<Token>, s: &[u8]) -> bool {
    t.is_some_and(|t| t.is_symbol(sql, s))
}

const END_KEYWORDS: &[&[u8]] = &[b"if", b"case", b"loop", b"while", b"repeat", b"for"];

/// Words after which a CASE expression's END cannot come (an operand must
/// come first).
const NOT_OPERAND: &[&[u8]] = &[
    b"when",
    b"then",
    b"else",
    b"case",
    b"and",
    b"or",
    b"not",
    b"xor",
    b"is",
    b"in",
    b"like",
    b"between",
    b"div",
    b"mod",
    b"regexp",
    b"rlike",
    b"select",
    b"interval",
    b"binary",
    b"collate",
    b"escape",
];

/// Words that begin a single-statement routine body.
const SIMPLE_BODY: &[&[u8]] = &[
    b"return", b"select", b"set", b"insert", b"update", b"delete", b"replace", b"call", b"do",
    b"with", b"values",
];

impl Body {
    /// The body of a compound statement: its first token opens the block.
    pub(super) fn compound() -> Self {
        Self::new(Header::None)
    }

    /// The body of a routine definition with this header.
    pub(super) fn routine(header: Header) -> Self {
        Self::new(header)
    }

    fn new(header: Header) -> Self {
        Self {
            stack: Vec::new(),
            header,
            start: header == Header::None,
            label: false,
            eat: false,
            handler: Handler::Off,
            begin_anywhere: false,
            broken: false,
            locals: Vec::new(),
        }
    }

    /// True when no block is open (a `;` now ends the whole statement).
    pub(super) fn top_level(&self) -> bool {
        self.stack.is_empty()
    }

    /// A `;` was consumed inside a block: a statement starts next.
    pub(super) fn semicolon(&mut self) {
        self.start = true;
        self.label = false;
        self.eat = false;
        self.handler = Handler::Off;
    }

    /// Consumes `t` (not a `;`). `depth` is the parenthesis depth before
    /// `t`, `next` and `after` the two tokens after it. Returns true when a
    /// new inner statement starts after `t`.
    pub(super) fn track(
        &mut self,
        sql: &[u8],
        t: Token,
        prev: Option<Token>,
        depth: u32,
        next: Option<Token>,
        after: Option<Token>,
    ) -> bool {
        let mut at_start = std::mem::take(&mut self.start);
        let label = std::mem::take(&mut self.label);
        if std::mem::take(&mut self.eat) {
            return false;
        }
        if self.handler != Handler::Off {
            return self.handler_condition(sql, t, next);
        }
        match self.header {
            Header::None => {}
            Header::Routine { params_seen } => {
                if depth == 1 && t.is_symbol(sql, b")") {
                    self.header = Header::Routine { params_seen: true };
                }
                if depth > 0 || !params_seen || t.kind != TokenKind::Word {
                    return false;
                }
                if t.is_word(sql, b"case") {
                    self.stack.push(Block::Case { statement: false });
                    return false;
                }
                if word_in(sql, Some(t), SIMPLE_BODY) {
                    self.header = Header::None;
                    return false;
                }
                let opens = word_in(sql, Some(t), &[b"begin", b"loop", b"while", b"for"])
                    || (word_in(sql, Some(t), &[b"if", b"repeat"])
                        && !sym(sql, next, b"(")
                        && !word_in(sql, next, &[b"exists", b"not"]))
                    || sym(sql, next, b":");
                if !opens {
                    return false;
                }
                self.header = Header::None;
                at_start = true;
            }
            Header::Trigger => {
                if t.is_word(sql, b"row") && word_in(sql, prev, &[b"each"]) {
                    self.header = Header::TriggerOrder;
                    self.start = true;
                    return true;
                }
                return false;
            }
            Header::TriggerOrder => {
                if word_in(sql, Some(t), &[b"follows", b"precedes"]) {
                    self.header = Header::TriggerOrderName;
                    return false;
                }
                self.header = Header::None;
                at_start = true;
            }
            Header::TriggerOrderName => {
                self.header = Header::None;
                self.start = true;
                return true;
            }
            Header::Event => {
                if depth == 0 && t.is_word(sql, b"do") {
                    self.header = Header::None;
                    self.start = true;
                    return true;
                }
                return false;
            }
            Header::Package => {
                if depth == 0 && word_in(sql, Some(t), &[b"as", b"is"]) {
                    self.header = Header::None;
                    self.stack.push(Block::Begin);
                    self.begin_anywhere = true;
                    self.start = true;
                    return true;
                }
                return false;
            }
        }
        self.body_token(sql, t, prev, depth, next, after, at_start, label)
    }

    #[allow(clippy::too_many_arguments)]
    fn body_token(
        &mut self,
        sql: &[u8],
        t: Token,
        prev: Option<Token>,
        depth: u32,
        next: Option<Token>,
        after: Option<Token>,
        at_start: bool,
        label: bool,
    ) -> bool {
        if t.kind == TokenKind::Symbol {
            if label && t.is_symbol(sql, b":") {
                self.start = true;
                return true;
            }
            return false;
        }
        if t.kind != TokenKind::Word {
            return false;
        }
        let top = self.stack.last().copied();
        let w = |kw: &[u8]| t.is_word(sql, kw);
        if w(b"case") {
            self.stack.push(Block::Case {
                statement: at_start,
            });
            return false;
        }
        if w(b"end") {
            let closes = word_in(sql, next, END_KEYWORDS)
                || at_start
                || (top == Some(Block::Case { statement: false }) && operand(sql, prev));
            if closes {
                if self.stack.pop().is_none() {
                    self.broken = true;
                }
                self.eat = word_in(sql, next, END_KEYWORDS);
            }
            return false;
        }
        if depth > 0 {
            return false;
        }
        if w(b"begin") && (at_start || self.begin_anywhere) {
            self.stack.push(Block::Begin);
            if word_in(sql, next, &[b"not"]) && word_in(sql, after, &[b"atomic"]) {
                return false;
            }
            self.start = true;
            return true;
        }
        if w(b"atomic") && word_in(sql, prev, &[b"not"]) {
            self.start = true;
            return true;
        }
        if at_start {
            let block = if w(b"if") {
                Some(Block::If)
            } else if w(b"loop") {
                Some(Block::Loop)
            } else if w(b"while") {
                Some(Block::While)
            } else if w(b"repeat") {
                Some(Block::Repeat)
            } else if w(b"for") {
                Some(Block::For)
            } else {
                None
            };
            if let Some(b) = block {
                self.stack.push(b);
                if matches!(b, Block::Loop | Block::Repeat) {
                    self.start = true;
                    return true;
                }
                return false;
            }
            self.label = true;
        }
        if w(b"do") && !at_start && matches!(top, Some(Block::While | Block::For)) {
            self.start = true;
            return true;
        }
        if (w(b"then") || w(b"else"))
            && matches!(top, Some(Block::If | Block::Case { statement: true }))
        {
            self.start = true;
            return true;
        }
        if w(b"for") && word_in(sql, prev, &[b"handler"]) {
            self.handler = Handler::Cond;
        }
        false
    }

    /// One token of a `DECLARE … HANDLER FOR` condition list; the handler's
    /// statement starts after the last condition.
    fn handler_condition(&mut self, sql: &[u8], t: Token, next: Option<Token>) -> bool {
        self.handler = match self.handler {
            Handler::Cond if t.is_symbol(sql, b",") => return false,
            Handler::Cond if t.is_word(sql, b"sqlstate") => Handler::SqlState,
            Handler::Cond if t.is_word(sql, b"not") => Handler::NotFound,
            Handler::SqlState if t.is_word(sql, b"value") => Handler::SqlStateString,
            _ => Handler::Off,
        };
        if self.handler != Handler::Off {
            return false;
        }
        if sym(sql, next, b",") {
            self.handler = Handler::Cond;
            return false;
        }
        self.start = true;
        true
    }
}

/// True when `prev` can end an operand (so an END after it closes a CASE
/// expression).
fn operand(sql: &[u8], prev: Option<Token>) -> bool {
    let Some(p) = prev else { return false };
    match p.kind {
        TokenKind::Symbol => p.is_symbol(sql, b")"),
        TokenKind::Word => !word_in(sql, prev, NOT_OPERAND),
        _ => true,
    }
}
