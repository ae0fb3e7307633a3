//! Reads the tokens of one statement at a time, with a small lookahead, and
//! knows where the statement (and, in a stored-program body, each inner
//! statement) ends.
//!
//! Owns statement boundaries: a `;` outside quotes and comments ends a
//! statement, except inside the blocks of a routine or compound body (see
//! `blocks`). It feeds every consumed token to the expression-level effect
//! patterns (`observe`) so that structured parsers in `statement` need not
//! care about them. Work is linear in the input: each token is lexed once
//! and looked at a bounded number of times; nothing is allocated per token.

use std::borrow::Cow;

use super::blocks::Body;
use super::digest::Builder as DigestBuilder;
use super::effects::Effect;
use super::lexer::{LexOptions, Lexer, Token, TokenKind, unquote};
use super::observe::Observer;

/// How far a parser may look ahead.
pub(super) const LOOKAHEAD: usize = 8;

const NO_TOKEN: Token = Token {
    kind: TokenKind::Symbol,
    start: 0,
    end: 0,
    gated: false,
    in_exec: false,
};

/// A lexer with a fixed-size lookahead ring; each token it lexes also goes
/// to the digest, when one is being built (the text is lexed once).
struct Cursor<'a> {
    sql: &'a [u8],
    lexer: Lexer<'a>,
    ring: [Token; LOOKAHEAD],
    head: usize,
    len: usize,
    digest: Option<DigestBuilder>,
}

impl<'a> Cursor<'a> {
    fn new(sql: &'a [u8], opts: LexOptions) -> Self {
        Self {
            sql,
            lexer: Lexer::new(sql, opts),
            ring: [NO_TOKEN; LOOKAHEAD],
            head: 0,
            len: 0,
            digest: None,
        }
    }

    /// The `k`-th token ahead (`k < LOOKAHEAD`).
    fn peek(&mut self, k: usize) -> Option<Token> {
        if k >= LOOKAHEAD {
            debug_assert!(false, "lookahead {k} is too far");
            return None;
        }
        while self.len <= k {
            let t = self.lexer.next()?;
            if let Some(d) = &mut self.digest {
                d.push(self.sql, t);
            }
            self.ring[(self.head + self.len) % LOOKAHEAD] = t;
            self.len += 1;
        }
        Some(self.ring[(self.head + k) % LOOKAHEAD])
    }

    fn bump(&mut self) {
        if self.len > 0 {
            self.head = (self.head + 1) % LOOKAHEAD;
            self.len -= 1;
        }
    }
}

/// Statement-by-statement access to the tokens of one query.
pub(super) struct Reader<'a> {
    pub(super) sql: &'a [u8],
    pub(super) opts: LexOptions,
    cur: Cursor<'a>,
    /// The current (inner) statement has no more tokens.
    unit_done: bool,
    /// The current top-level statement has no more tokens.
    stmt_done: bool,
    /// Block tracking, inside a routine or compound body.
    pub(super) body: Option<Body>,
    /// The last consumed token of this statement.
    pub(super) prev: Option<Token>,
    /// Parenthesis depth in this statement.
    pub(super) depth: u32,
    /// Expression-level patterns are looked for (not in bodies that are
    /// only stored, nor in EXPLAIN).
    pub(super) observe: bool,
    pub(super) observer: Observer,
    pub(super) effects: Vec<Effect>,
    /// Some effect may not have run (see `Statement::conditional`).
    pub(super) conditional: bool,
    /// The text cannot be analyzed reliably.
    pub(super) incomplete: bool,
    /// Where the current statement's `;` is, once consumed.
    pub(super) terminator: Option<usize>,
}

impl<'a> Reader<'a> {
    pub(super) fn new(sql: &'a [u8], opts: LexOptions) -> Self {
        Self {
            sql,
            opts,
            cur: Cursor::new(sql, opts),
            unit_done: false,
            stmt_done: false,
            body: None,
            prev: None,
            depth: 0,
            observe: true,
            observer: Observer::default(),
            effects: Vec::new(),
            conditional: false,
            incomplete: false,
            terminator: None,
        }
    }

    /// True once the lexer met an unterminated construct.
    pub(super) fn lexer_incomplete(&self) -> bool {
        self.cur.lexer.incomplete()
    }

    /// Builds the text's digest on this pass, into `out` (see
    /// [`Self::finish_digest`]).
    pub(super) fn build_digest(&mut self, out: Vec<u8>) {
        self.cur.digest = Some(DigestBuilder::new(out));
    }

    /// The digest text and hash, the tokens the analysis did not read
    /// included; `None` unless [`Self::build_digest`] was called.
    pub(super) fn finish_digest(&mut self) -> Option<(Vec<u8>, u64)> {
        let mut d = self.cur.digest.take()?;
        for t in self.cur.lexer.by_ref() {
            d.push(self.sql, t);
        }
        Some(d.finish(self.sql))
    }

    /// The next raw token, whatever statement it belongs to.
    pub(super) fn peek_raw(&mut self) -> Option<Token> {
        self.cur.peek(0)
    }

    /// Consumes a raw `;` between statements.
    pub(super) fn skip_raw(&mut self) {
        self.cur.bump();
    }

    /// Resets the per-statement state before reading a statement.
    pub(super) fn begin_statement(&mut self) {
        self.unit_done = false;
        self.stmt_done = false;
        self.body = None;
        self.prev = None;
        self.depth = 0;
        self.observe = true;
        self.observer = Observer::default();
        self.conditional = false;
        self.terminator = None;
    }

    /// The `k`-th token ahead in the current statement (None past its `;`).
    pub(super) fn peek(&mut self, k: usize) -> Option<Token> {
        if self.unit_done {
            return None;
        }
        for i in 0..=k {
            let t = self.cur.peek(i)?;
            if t.is_symbol(self.sql, b";") {
                return None;
            }
        }
        self.cur.peek(k)
    }

    /// True when the `k`-th token ahead is the word `kw`.
    pub(super) fn peek_word(&mut self, k: usize, kw: &[u8]) -> bool {
        let sql = self.sql;
        self.peek(k).is_some_and(|t| t.is_word(sql, kw))
    }

    /// True when the `k`-th token ahead is one of `kws`.
    pub(super) fn peek_any(&mut self, k: usize, kws: &[&[u8]]) -> bool {
        let sql = self.sql;
        self.peek(k)
            .is_some_and(|t| kws.iter().any(|kw| t.is_word(sql, kw)))
    }

    /// True when the `k`-th token ahead is the symbol `s`.
    pub(super) fn peek_symbol(&mut self, k: usize, s: &[u8]) -> bool {
        let sql = self.sql;
        self.peek(k).is_some_and(|t| t.is_symbol(sql, s))
    }

    /// Consumes the word `kw` if it comes next.
    pub(super) fn eat_word(&mut self, kw: &[u8]) -> bool {
        let hit = self.peek_word(0, kw);
        if hit {
            self.next();
        }
        hit
    }

    /// Consumes the symbol `s` if it comes next.
    pub(super) fn eat_symbol(&mut self, s: &[u8]) -> bool {
        let hit = self.peek_symbol(0, s);
        if hit {
            self.next();
        }
        hit
    }

    /// True when the current top-level statement has no more tokens.
    pub(super) fn stmt_done(&self) -> bool {
        self.stmt_done
    }

    /// Moves on to the next inner statement of a body.
    pub(super) fn next_unit(&mut self) {
        if !self.stmt_done {
            self.unit_done = false;
        }
    }

    /// Consumes the rest of the current inner statement.
    pub(super) fn drain_unit(&mut self) {
        while self.next().is_some() {}
    }

    /// Consumes the rest of the current top-level statement.
    pub(super) fn drain_statement(&mut self) {
        loop {
            self.drain_unit();
            if self.stmt_done {
                return;
            }
            self.next_unit();
        }
    }

    /// Consumes tokens up to (not including) a `,` at the current
    /// parenthesis depth, or to the end of the inner statement.
    pub(super) fn skip_to_comma(&mut self) {
        let base = self.depth;
        while !(self.depth == base && self.peek_symbol(0, b",")) {
            if self.next().is_none() {
                return;
            }
        }
    }

    /// Starts block tracking for a routine or compound body.
    pub(super) fn enter_body(&mut self, body: Body) {
        self.body = Some(body);
    }

    /// Stored-program variables declared so far in this body.
    pub(super) fn is_local(&self, name: &[u8]) -> bool {
        self.body
            .as_ref()
            .is_some_and(|b| b.locals.iter().any(|l| l.as_slice() == name))
    }

    /// The next token of the current inner statement.
    pub(super) fn next(&mut self) -> Option<Token> {
        if self.unit_done {
            return None;
        }
        let Some(t) = self.cur.peek(0) else {
            self.unit_done = true;
            self.stmt_done = true;
            if self.body.as_ref().is_some_and(|b| !b.top_level()) {
                self.incomplete = true;
            }
            self.observer.finish(&mut self.effects, self.prev);
            return None;
        };
        self.cur.bump();
        if t.is_symbol(self.sql, b";") {
            self.unit_done = true;
            match &mut self.body {
                Some(b) if !b.top_level() => {
                    // An inner statement ends, whatever it left open.
                    b.semicolon();
                    self.depth = 0;
                    self.observer.unit_end();
                    self.prev = Some(t);
                }
                _ => {
                    self.stmt_done = true;
                    self.terminator = Some(t.start);
                    // A `;` inside `/*! … */` ends the statement in the middle
                    // of the comment: the server rejects the text.
                    if t.in_exec {
                        self.incomplete = true;
                    }
                    self.observer.finish(&mut self.effects, self.prev);
                }
            }
            return None;
        }
        self.consume(t);
        Some(t)
    }

    fn consume(&mut self, t: Token) {
        if t.gated {
            self.conditional = true;
        }
        let depth = self.depth;
        if t.is_symbol(self.sql, b"(") {
            self.depth += 1;
        } else if t.is_symbol(self.sql, b")") {
            self.depth = self.depth.saturating_sub(1);
        }
        if let Some(body) = &mut self.body {
            let next = self.cur.peek(0);
            let after = self.cur.peek(1);
            if body.track(self.sql, t, self.prev, depth, next, after) {
                self.unit_done = true;
            }
            if body.broken {
                self.incomplete = true;
            }
        }
        if self.observe {
            self.observe_token(t, depth);
        }
        self.prev = Some(t);
    }

    /// The unquoted value of a name or string token.
    pub(super) fn value(&self, t: &Token) -> Cow<'a, [u8]> {
        unquote(self.sql, t, self.opts)
    }

    /// A name token (word or quoted identifier) as owned bytes.
    pub(super) fn name(&self, t: &Token) -> Option<Vec<u8>> {
        matches!(t.kind, TokenKind::Word | TokenKind::QuotedIdent)
            .then(|| self.value(t).into_owned())
    }

    /// Consumes `[schema.]name`.
    pub(super) fn table_name(&mut self) -> Option<(Option<Vec<u8>>, Vec<u8>)> {
        let first = self.peek(0)?;
        let first = self.name(&first)?;
        self.next();
        if self.peek_symbol(0, b".")
            && let Some(second) = self.peek(1).and_then(|t| self.name(&t))
        {
            self.next();
            self.next();
            return Some((Some(first), second));
        }
        Some((None, first))
    }

    /// Emits an effect.
    pub(super) fn emit(&mut self, e: Effect) {
        self.effects.push(e);
    }
}

/// ASCII-lowercases a name (user variables, system variables and prepared
/// statement names are case-insensitive).
pub(super) fn lower(mut name: Vec<u8>) -> Vec<u8> {
    name.make_ascii_lowercase();
    name
}
