//! Tokens of MariaDB 10.11 / MySQL 8 SQL text, read straight from the bytes a
//! client sent (not necessarily UTF-8), without allocating.
//!
//! Owns the lexical rules only: where a token starts and ends, what kind it
//! is, and how a quoted name or string literal is unquoted. It knows nothing
//! about statements (see `reader` and `effects`).
//!
//! Rules, as the server's `Lex_input_stream::lex_one_token` applies them:
//! - whitespace is 0x09..=0x0D and space; `#` and `-- ` (two dashes then a
//!   whitespace or control byte, or the end) comment to the end of the line
//!   (a NUL byte also ends it); `/* … */` does not nest, the first `*/`
//!   closes it; an optimizer hint `/*+ … */` is an ordinary comment.
//! - executable comments `/*!…*/`, `/*!NNNNN…*/`, `/*M!…*/` and
//!   `/*M!NNNNNN…*/` are always lexed as code (fail closed). Their tokens
//!   carry `in_exec`, and `gated` when some server skips them: MariaDB skips
//!   `/*!NNNNN` for MySQL versions 50700..=99999 and any version above its
//!   own, MySQL skips `/*M!` and versions above its own.
//! - unquoted words are `[A-Za-z0-9_$]` and bytes >= 0x80, and may start with
//!   digits (`1abc`, `0x1g` are identifiers); `0x…`/`0b…` (lowercase prefix
//!   only) and `X'…'`/`B'…'` are hex/bit literals; `N'…'` is a string.
//! - strings in `'…'` and `"…"` end at the first quote that is not doubled
//!   and not escaped by a backslash (no backslash escapes under
//!   `NO_BACKSLASH_ESCAPES`); under `ANSI_QUOTES` `"…"` is an identifier.
//!   Backtick identifiers double their backticks and have no escapes.
//! - `@name` (name bytes `[A-Za-z0-9._$]` and >= 0x80), `` @`q` ``, `@'q'`,
//!   `@"q"` are user variables; `@@name`, `@@scope.name` system variables.
//! - an unterminated string, identifier or comment sets `incomplete`.
//!
//! Not supported: connection character sets whose multi-byte characters have
//! trail bytes in the ASCII range (big5, cp932, gbk, gb18030, sjis): there a
//! trail byte 0x5C or 0x27 is not a backslash or quote to the server, but is
//! one to this lexer. Callers must treat such sessions as opaque.

use std::borrow::Cow;

/// The sql_mode flags that change how text is tokenized.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct LexOptions {
    /// `ANSI_QUOTES`: `"…"` quotes an identifier, not a string.
    pub ansi_quotes: bool,
    /// `NO_BACKSLASH_ESCAPES`: a backslash in a string is an ordinary byte.
    pub no_backslash_escapes: bool,
}

/// What a token is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenKind {
    /// An unquoted identifier or keyword (also `\N`, the NULL shortcut).
    Word,
    /// A backtick identifier, or `"…"` under ANSI_QUOTES.
    QuotedIdent,
    /// A string literal `'…'`, `"…"` or `N'…'`.
    String,
    /// `X'…'` or `0x…`.
    HexString,
    /// `B'…'` or `0b…`.
    BitString,
    /// A decimal number.
    Number,
    /// `@name` or `@` followed by a quoted name.
    UserVar,
    /// `@@name`, `@@session.name`, … (the whole dotted chain).
    SysVar,
    /// An operator or punctuation: `:=`, `<=>`, `(`, `;`, …
    Symbol,
}

/// One token: its kind and byte range in the text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Token {
    /// Kind.
    pub kind: TokenKind,
    /// First byte.
    pub start: usize,
    /// One past the last byte.
    pub end: usize,
    /// Inside an executable comment that some server versions skip.
    pub gated: bool,
    /// Inside an executable comment (`/*!` or `/*M!`).
    pub in_exec: bool,
}

impl Token {
    /// The token's bytes.
    pub fn text<'a>(&self, sql: &'a [u8]) -> &'a [u8] {
        &sql[self.start..self.end]
    }

    /// True for the symbol `sym` (one or more bytes, e.g. `b";"`, `b":="`).
    pub fn is_symbol(&self, sql: &[u8], sym: &[u8]) -> bool {
        self.kind == TokenKind::Symbol && self.text(sql) == sym
    }

    /// True for the unquoted word `kw` (ASCII, any case).
    pub fn is_word(&self, sql: &[u8], kw: &[u8]) -> bool {
        self.kind == TokenKind::Word && self.text(sql).eq_ignore_ascii_case(kw)
    }

    /// True for the NULL literal (`NULL` or `\N`).
    pub fn is_null(&self, sql: &[u8]) -> bool {
        self.is_word(sql, b"null") || (self.kind == TokenKind::Word && self.text(sql) == b"\\N")
    }
}

/// Client character sets whose multi-byte characters may end in a byte
/// that looks like a quote or a backslash (big5, cp932, gbk, gb18030,
/// sjis): text in them is not read reliably by this lexer. The one list of
/// them for every caller.
pub fn read_otherwise(charset: &[u8]) -> bool {
    const CHARSETS: [&[u8]; 5] = [b"big5", b"cp932", b"gbk", b"gb18030", b"sjis"];
    CHARSETS.iter().any(|c| charset.eq_ignore_ascii_case(c))
}

/// Whitespace as the server's character maps define it.
pub fn is_space(c: u8) -> bool {
    c == b' ' || (0x09..=0x0d).contains(&c)
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'$' || c >= 0x80
}

fn is_user_var_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'.' || c == b'_' || c == b'$' || c >= 0x80
}

/// The MySQL versions whose `/*!NNNNN` comments MariaDB skips.
const MARIADB_SKIPPED: std::ops::RangeInclusive<u32> = 50700..=99999;

/// A streaming tokenizer; an `Iterator` of [`Token`]s. Cheap to copy.
#[derive(Clone, Debug)]
pub struct Lexer<'a> {
    sql: &'a [u8],
    opts: LexOptions,
    pos: usize,
    /// `Some(gated)` inside an executable comment.
    exec: Option<bool>,
    incomplete: bool,
}

impl<'a> Lexer<'a> {
    /// A lexer at the start of `sql`.
    pub fn new(sql: &'a [u8], opts: LexOptions) -> Self {
        Self {
            sql,
            opts,
            pos: 0,
            exec: None,
            incomplete: false,
        }
    }

    /// True once an unterminated string, identifier, comment or executable
    /// comment was met.
    pub fn incomplete(&self) -> bool {
        self.incomplete
    }

    fn at(&self, i: usize) -> Option<u8> {
        self.sql.get(i).copied()
    }

    /// Skips whitespace and comments, entering and leaving executable
    /// comments on the way.
    fn skip_trivia(&mut self) {
        let sql = self.sql;
        loop {
            while self.pos < sql.len() && is_space(sql[self.pos]) {
                self.pos += 1;
            }
            let Some(c) = self.at(self.pos) else { return };
            match c {
                b'#' => self.skip_line(self.pos + 1),
                b'-' if self.at(self.pos + 1) == Some(b'-')
                    && self
                        .at(self.pos + 2)
                        .is_none_or(|n| is_space(n) || n < 0x20 || n == 0x7f) =>
                {
                    self.skip_line(self.pos + 2)
                }
                b'/' if self.at(self.pos + 1) == Some(b'*') => {
                    let p = self.pos + 2;
                    if self.at(p) == Some(b'!') {
                        self.enter_exec(p + 1, false);
                    } else if self.at(p) == Some(b'M') && self.at(p + 1) == Some(b'!') {
                        self.enter_exec(p + 2, true);
                    } else {
                        match find(&sql[p..], b"*/") {
                            Some(i) => self.pos = p + i + 2,
                            None => {
                                self.incomplete = true;
                                self.pos = sql.len();
                            }
                        }
                    }
                }
                b'*' if self.exec.is_some() && self.at(self.pos + 1) == Some(b'/') => {
                    self.pos += 2;
                    self.exec = None;
                }
                _ => return,
            }
        }
    }

    /// To the end of the line; the newline (or NUL) itself is left.
    fn skip_line(&mut self, from: usize) {
        let rest = &self.sql[from..];
        self.pos = from
            + rest
                .iter()
                .position(|&c| c == b'\n' || c == 0)
                .unwrap_or(rest.len());
    }

    /// After `/*!` or `/*M!`: reads the optional version and lexes the rest
    /// as code.
    fn enter_exec(&mut self, mut p: usize, maria: bool) {
        let digits = self.sql[p..]
            .iter()
            .take(6)
            .take_while(|c| c.is_ascii_digit())
            .count();
        let mut gated = maria;
        if digits >= 5 {
            let version = self.sql[p..p + digits]
                .iter()
                .fold(0u32, |v, d| v * 10 + u32::from(d - b'0'));
            gated |= MARIADB_SKIPPED.contains(&version) || version >= 100000;
            p += digits;
        }
        // A nested `/*!` stays inside the outer one: the first `*/` ends both.
        self.exec = Some(gated || self.exec == Some(true));
        self.pos = p;
    }

    /// From an opening quote at `self.pos` past the closing one.
    fn quoted(&mut self, q: u8, escapes: bool) {
        let sql = self.sql;
        let escapes = escapes && !self.opts.no_backslash_escapes;
        let mut i = self.pos + 1;
        while i < sql.len() {
            let c = sql[i];
            if c == b'\\' && escapes {
                i += 2;
            } else if c == q {
                if sql.get(i + 1) == Some(&q) {
                    i += 2;
                } else {
                    self.pos = i + 1;
                    return;
                }
            } else {
                i += 1;
            }
        }
        self.incomplete = true;
        self.pos = sql.len();
    }

    /// `'…'` of an X'…' or B'…' literal: no escapes, no doubling.
    fn raw_quoted(&mut self) {
        match self.sql[self.pos + 1..].iter().position(|&c| c == b'\'') {
            Some(i) => self.pos += i + 2,
            None => {
                self.incomplete = true;
                self.pos = self.sql.len();
            }
        }
    }

    fn ident_run(&mut self) {
        while self.at(self.pos).is_some_and(is_ident) {
            self.pos += 1;
        }
    }

    fn digits(&mut self) {
        while self.at(self.pos).is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
        }
    }

    /// A token starting with a digit: a number, a 0x/0b literal, or an
    /// identifier such as `1abc`.
    fn number_or_word(&mut self) -> TokenKind {
        let start = self.pos;
        if self.sql[start] == b'0' {
            let (prefix, kind): (u8, TokenKind) = match self.at(start + 1) {
                Some(b'x') => (b'x', TokenKind::HexString),
                Some(b'b') => (b'b', TokenKind::BitString),
                _ => (0, TokenKind::Number),
            };
            if prefix != 0 {
                let mut i = start + 2;
                while self.at(i).is_some_and(|c| {
                    if prefix == b'x' {
                        c.is_ascii_hexdigit()
                    } else {
                        c == b'0' || c == b'1'
                    }
                }) {
                    i += 1;
                }
                if i > start + 2 && !self.at(i).is_some_and(is_ident) {
                    self.pos = i;
                    return kind;
                }
                self.ident_run();
                return TokenKind::Word;
            }
        }
        self.digits();
        match self.at(self.pos) {
            Some(b'.') if self.at(self.pos + 1) != Some(b'.') => {
                self.pos += 1;
                self.digits();
                self.exponent();
                TokenKind::Number
            }
            Some(b'e' | b'E') => {
                let n = self.at(self.pos + 1);
                let signed = matches!(n, Some(b'+' | b'-'))
                    && self.at(self.pos + 2).is_some_and(|c| c.is_ascii_digit());
                if n.is_some_and(|c| c.is_ascii_digit()) || signed {
                    self.exponent();
                    TokenKind::Number
                } else {
                    self.ident_run();
                    TokenKind::Word
                }
            }
            Some(c) if is_ident(c) => {
                self.ident_run();
                TokenKind::Word
            }
            _ => TokenKind::Number,
        }
    }

    /// An optional `e[+-]digits` exponent.
    fn exponent(&mut self) {
        if matches!(self.at(self.pos), Some(b'e' | b'E')) {
            let mut i = self.pos + 1;
            if matches!(self.at(i), Some(b'+' | b'-')) {
                i += 1;
            }
            if self.at(i).is_some_and(|c| c.is_ascii_digit()) {
                self.pos = i;
                self.digits();
            }
        }
    }

    /// `@…` at `self.pos`.
    fn variable(&mut self) -> TokenKind {
        if self.at(self.pos + 1) == Some(b'@') {
            self.pos += 2;
            loop {
                if self.at(self.pos) == Some(b'`') {
                    self.quoted(b'`', false);
                } else {
                    self.ident_run();
                }
                let dotted = self.at(self.pos) == Some(b'.')
                    && self
                        .at(self.pos + 1)
                        .is_some_and(|c| is_ident(c) || c == b'`');
                if !dotted {
                    return TokenKind::SysVar;
                }
                self.pos += 1;
            }
        }
        self.pos += 1;
        match self.at(self.pos) {
            Some(b'\'') => self.quoted(b'\'', true),
            Some(b'"') => self.quoted(b'"', !self.opts.ansi_quotes),
            Some(b'`') => self.quoted(b'`', false),
            _ => {
                while self.at(self.pos).is_some_and(is_user_var_char) {
                    self.pos += 1;
                }
            }
        }
        TokenKind::UserVar
    }

    fn symbol(&mut self) {
        const LONG: [&[u8]; 13] = [
            b"<=>", b"->>", b":=", b"<=", b">=", b"<>", b"!=", b"<<", b">>", b"&&", b"||", b"->",
            b"..",
        ];
        let rest = &self.sql[self.pos..];
        let len = LONG
            .iter()
            .find(|op| rest.starts_with(op))
            .map_or(1, |op| op.len());
        self.pos += len;
    }
}

impl Iterator for Lexer<'_> {
    type Item = Token;

    fn next(&mut self) -> Option<Token> {
        self.skip_trivia();
        let start = self.pos;
        let Some(c) = self.at(start) else {
            if self.exec.take().is_some() {
                self.incomplete = true;
            }
            return None;
        };
        let next = self.at(start + 1);
        let kind = match c {
            b'\'' => {
                self.quoted(b'\'', true);
                TokenKind::String
            }
            b'"' if self.opts.ansi_quotes => {
                self.quoted(b'"', false);
                TokenKind::QuotedIdent
            }
            b'"' => {
                self.quoted(b'"', true);
                TokenKind::String
            }
            b'`' => {
                self.quoted(b'`', false);
                TokenKind::QuotedIdent
            }
            b'@' => self.variable(),
            b'0'..=b'9' => self.number_or_word(),
            b'N' | b'n' if next == Some(b'\'') => {
                self.pos += 1;
                self.quoted(b'\'', true);
                TokenKind::String
            }
            b'X' | b'x' if next == Some(b'\'') => {
                self.pos += 1;
                self.raw_quoted();
                TokenKind::HexString
            }
            b'B' | b'b' if next == Some(b'\'') => {
                self.pos += 1;
                self.raw_quoted();
                TokenKind::BitString
            }
            b'\\' if next == Some(b'N') => {
                self.pos += 2;
                TokenKind::Word
            }
            c if is_ident(c) => {
                self.ident_run();
                TokenKind::Word
            }
            _ => {
                self.symbol();
                TokenKind::Symbol
            }
        };
        Some(Token {
            kind,
            start,
            end: self.pos,
            gated: self.exec == Some(true),
            in_exec: self.exec.is_some(),
        })
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The value of a quoted name or string literal: quotes stripped, doubled
/// quotes and (for strings, unless `NO_BACKSLASH_ESCAPES`) backslash escapes
/// resolved as the server does. Unquoted words come back as they are; a
/// user variable loses its `@`. Borrows unless something had to be resolved.
pub fn unquote<'a>(sql: &'a [u8], t: &Token, opts: LexOptions) -> Cow<'a, [u8]> {
    let mut text = t.text(sql);
    let prefixed = t.kind == TokenKind::UserVar
        || (t.kind == TokenKind::String && matches!(text.first(), Some(b'N' | b'n')));
    if prefixed {
        text = &text[1..];
    }
    let Some(&q) = text.first() else {
        return Cow::Borrowed(text);
    };
    if !matches!(q, b'\'' | b'"' | b'`') {
        return Cow::Borrowed(text);
    }
    let escapes = q != b'`' && !(q == b'"' && opts.ansi_quotes) && !opts.no_backslash_escapes;
    let body = &text[1..];
    let body = body.strip_suffix(&[q]).unwrap_or(body);
    if !(body.contains(&q) || (escapes && body.contains(&b'\\'))) {
        return Cow::Borrowed(body);
    }
    let mut out = Vec::with_capacity(body.len());
    let mut i = 0;
    while i < body.len() {
        let c = body[i];
        if c == b'\\' && escapes && i + 1 < body.len() {
            let e = body[i + 1];
            match e {
                b'n' => out.push(b'\n'),
                b't' => out.push(b'\t'),
                b'r' => out.push(b'\r'),
                b'b' => out.push(0x08),
                b'0' => out.push(0),
                b'Z' => out.push(0x1a),
                b'%' | b'_' => out.extend_from_slice(&[b'\\', e]),
                _ => out.push(e),
            }
            i += 2;
        } else if c == q && body.get(i + 1) == Some(&q) {
            out.push(q);
            i += 2;
        } else {
            out.push(c);
            i += 1;
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
#[path = "lexer_tests.rs"]
mod tests;
