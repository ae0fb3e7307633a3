//! Statement digests: a statement's text reduced to its shape, so that
//! statements differing only in literal values, whitespace, comments or
//! keyword case read the same, and a 64-bit hash of that shape.
//!
//! Owns the normal form only (see `docs/observability.md`, "Query
//! digests"); where digests are counted is `crate::metrics::digests`. Pure:
//! no I/O, and no allocation beyond the caller's output buffer.
//!
//! The form follows MariaDB's `performance_schema` `DIGEST_TEXT` where that
//! is cheap to match:
//! - tokens separated by one space (MariaDB also ends with one; not here);
//!   comments and whitespace dropped;
//! - keywords (MariaDB's, [`super::keywords`]) upper-cased; other words are
//!   identifiers, printed in backquotes as written (case kept); quoted
//!   identifiers keep their quoted text (`"x"` under ANSI_QUOTES becomes
//!   `` `x` ``);
//! - string, number, hex and bit literals and `?` placeholders become `?`;
//!   a value list `?, ?, ?` becomes `?, ...`, `( ? )` becomes `(?)`,
//!   `( ?, ... )` becomes `(...)` (so `IN (1, 2, 3)` reads `IN (...)`), and
//!   a list of such rows `(?) /* , ... */` or `(...) /* , ... */` (so a
//!   multi-row `VALUES` reads the same for any number of rows).
//!
//! Differences from MariaDB, on purpose:
//! - a charset introducer (`_utf8mb4'x'`) and a typed date literal
//!   (`DATE '…'`, `TIME '…'`, `TIMESTAMP '…'`) are one `?` (MariaDB:
//!   `(_charset) ?`, `DATE ?`);
//! - a unary sign goes with its number: `-5` is `?` (MariaDB: `- ?`);
//! - hex and bit literals are `?` (MariaDB prints some as `(unknown)`);
//! - user and system variable names are kept, lower-cased (MariaDB prints
//!   user variables as `@?`), and a trailing `;` is dropped;
//! - the whole text of a multi-statement query is one digest (MariaDB
//!   digests each statement).

use super::keywords::is_keyword;
use super::lexer::{LexOptions, Lexer, Token, TokenKind};

/// A statement's digest: its normal form and that form's hash.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Digest {
    /// The normal form (bytes of the statement, so not always UTF-8).
    pub text: Vec<u8>,
    /// [`hash64`] of `text`.
    pub hash: u64,
}

/// The digest of `sql` lexed under `opts`.
pub fn digest(sql: &[u8], opts: LexOptions) -> Digest {
    let mut text = Vec::with_capacity(sql.len().min(1024));
    let hash = digest_into(sql, opts, &mut text);
    Digest { text, hash }
}

/// Writes the digest text of `sql` (lexed under `opts`) into `out`
/// (cleared first) and returns its hash. With a reused `out`, allocates
/// nothing once `out` is large enough.
pub fn digest_into(sql: &[u8], opts: LexOptions, out: &mut Vec<u8>) -> u64 {
    let mut b = Builder::new(std::mem::take(out));
    for t in Lexer::new(sql, opts) {
        b.push(sql, t);
    }
    let (text, hash) = b.finish(sql);
    *out = text;
    hash
}

/// A digest built from tokens pushed one at a time, in the order the
/// lexer gives them: the analysis (`super::analyze_with_digest`) builds it
/// on the same pass over the text, so a statement is lexed once. Keeps one
/// token back (an introducer or a typed literal is known by its next
/// token).
pub struct Builder {
    n: Normalizer,
    pending: Option<Token>,
}

impl Builder {
    /// A builder writing into `out` (cleared first; its capacity is kept).
    pub fn new(mut out: Vec<u8>) -> Self {
        out.clear();
        Self {
            n: Normalizer {
                out,
                last: Stack::default(),
            },
            pending: None,
        }
    }

    /// The next token of `sql`.
    pub fn push(&mut self, sql: &[u8], t: Token) {
        if let Some(p) = self.pending.replace(t) {
            self.n.token(sql, &p, Some(&t));
        }
    }

    /// The digest text and its hash, once every token was pushed.
    pub fn finish(mut self, sql: &[u8]) -> (Vec<u8>, u64) {
        if let Some(p) = self.pending.take() {
            self.n.token(sql, &p, None);
        }
        self.n.finish();
        let hash = hash64(&self.n.out);
        (self.n.out, hash)
    }
}

/// What an emitted token was, for the reductions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Tok {
    /// `?`.
    Value,
    /// `?, ...`.
    ValueList,
    /// `(?)`.
    RowSingle,
    /// `(?) /* , ... */`.
    RowSingleList,
    /// `(...)`.
    RowMulti,
    /// `(...) /* , ... */`.
    RowMultiList,
    /// `NULL`.
    Null,
    /// `,`.
    Comma,
    /// `(`.
    Open,
    /// A `-` or `+` that may be a sign.
    Sign,
    /// Something a binary operator can follow: an identifier, a variable,
    /// `)`.
    Operand,
    /// A keyword.
    Keyword,
    /// `;`.
    Semicolon,
    /// Any other symbol.
    #[default]
    Symbol,
}

impl Tok {
    fn is_value(self) -> bool {
        matches!(self, Tok::Value | Tok::ValueList | Tok::Null)
    }

    /// After this, a `-` or `+` is binary.
    fn ends_operand(self) -> bool {
        matches!(
            self,
            Tok::Operand
                | Tok::Value
                | Tok::ValueList
                | Tok::Null
                | Tok::RowSingle
                | Tok::RowSingleList
                | Tok::RowMulti
                | Tok::RowMultiList
        )
    }
}

/// The last few emitted tokens: kind and where the token (with its leading
/// space) starts in the output.
#[derive(Default)]
struct Stack {
    items: [(Tok, usize); 8],
    len: usize,
}

impl Stack {
    fn push(&mut self, t: Tok, at: usize) {
        if self.len == self.items.len() {
            self.items.copy_within(1.., 0);
            self.len -= 1;
        }
        self.items[self.len] = (t, at);
        self.len += 1;
    }

    /// The `i`-th token from the end (0 = last).
    fn get(&self, i: usize) -> Option<Tok> {
        (i < self.len).then(|| self.items[self.len - 1 - i].0)
    }

    /// Forgets the last `k` tokens; returns where the earliest one started.
    fn pop(&mut self, k: usize) -> usize {
        let at = self.items[self.len - k].1;
        self.len -= k;
        at
    }
}

struct Normalizer {
    out: Vec<u8>,
    last: Stack,
}

/// Charset names that may introduce a literal (`_latin1'x'`).
const CHARSETS: &[&[u8]] = &[
    b"armscii8",
    b"ascii",
    b"big5",
    b"binary",
    b"cp1250",
    b"cp1251",
    b"cp1256",
    b"cp1257",
    b"cp850",
    b"cp852",
    b"cp866",
    b"cp932",
    b"dec8",
    b"eucjpms",
    b"euckr",
    b"filename",
    b"gb2312",
    b"gbk",
    b"geostd8",
    b"greek",
    b"hebrew",
    b"hp8",
    b"keybcs2",
    b"koi8r",
    b"koi8u",
    b"latin1",
    b"latin2",
    b"latin5",
    b"latin7",
    b"macce",
    b"macroman",
    b"sjis",
    b"swe7",
    b"tis620",
    b"ucs2",
    b"ujis",
    b"utf16",
    b"utf16le",
    b"utf32",
    b"utf8",
    b"utf8mb3",
    b"utf8mb4",
];

fn is_literal(kind: TokenKind) -> bool {
    matches!(
        kind,
        TokenKind::String | TokenKind::HexString | TokenKind::BitString
    )
}

/// `_charset` before a literal.
fn is_introducer(word: &[u8], next: Option<&Token>) -> bool {
    word.len() > 1
        && word[0] == b'_'
        && next.is_some_and(|n| is_literal(n.kind))
        && CHARSETS.iter().any(|c| c.eq_ignore_ascii_case(&word[1..]))
}

/// `DATE`, `TIME` or `TIMESTAMP` before a string.
fn is_typed_literal(word: &[u8], next: Option<&Token>) -> bool {
    next.is_some_and(|n| n.kind == TokenKind::String)
        && [&b"date"[..], b"time", b"timestamp"]
            .iter()
            .any(|k| k.eq_ignore_ascii_case(word))
}

impl Normalizer {
    /// Appends one token's text (after a space) and remembers it.
    fn emit(&mut self, t: Tok, text: &[u8]) {
        let at = self.start();
        self.out.extend_from_slice(text);
        self.last.push(t, at);
    }

    /// Starts a token: the separating space; returns where it began.
    fn start(&mut self) -> usize {
        let at = self.out.len();
        if at > 0 {
            self.out.push(b' ');
        }
        at
    }

    fn token(&mut self, sql: &[u8], t: &Token, next: Option<&Token>) {
        let text = t.text(sql);
        match t.kind {
            TokenKind::Number | TokenKind::String | TokenKind::HexString | TokenKind::BitString => {
                self.value(false)
            }
            TokenKind::Word if t.is_null(sql) => self.value(true),
            TokenKind::Word if is_introducer(text, next) || is_typed_literal(text, next) => {}
            TokenKind::Word if is_keyword(text) => {
                let at = self.start();
                self.out.extend(text.iter().map(|c| c.to_ascii_uppercase()));
                self.last.push(Tok::Keyword, at);
            }
            TokenKind::Word => {
                let at = self.start();
                self.out.push(b'`');
                self.out.extend_from_slice(text);
                self.out.push(b'`');
                self.last.push(Tok::Operand, at);
            }
            TokenKind::QuotedIdent => {
                let at = self.start();
                if text.first() == Some(&b'`') {
                    self.out.extend_from_slice(text);
                } else {
                    self.ansi_ident(text);
                }
                self.last.push(Tok::Operand, at);
            }
            TokenKind::UserVar | TokenKind::SysVar => {
                let at = self.start();
                self.out.extend(text.iter().map(|c| c.to_ascii_lowercase()));
                self.last.push(Tok::Operand, at);
            }
            TokenKind::Symbol => match text {
                b"?" => self.value(false),
                b"," => self.emit(Tok::Comma, text),
                b"(" => self.emit(Tok::Open, text),
                b")" => self.close(),
                b";" => self.emit(Tok::Semicolon, text),
                b"-" | b"+" => self.emit(Tok::Sign, text),
                _ => self.emit(Tok::Symbol, text),
            },
        }
    }

    /// `"a""b"` (an identifier under ANSI_QUOTES) as `` `a"b` ``.
    fn ansi_ident(&mut self, text: &[u8]) {
        let body = text.get(1..text.len().saturating_sub(1)).unwrap_or(&[]);
        self.out.push(b'`');
        let mut i = 0;
        while i < body.len() {
            let c = body[i];
            if c == b'"' && body.get(i + 1) == Some(&b'"') {
                i += 1;
            }
            if c == b'`' {
                self.out.push(b'`');
            }
            self.out.push(c);
            i += 1;
        }
        self.out.push(b'`');
    }

    /// A literal value (or NULL).
    fn value(&mut self, null: bool) {
        // A sign before a number, where no operand precedes it, is part of
        // the value.
        if !null
            && self.last.get(0) == Some(Tok::Sign)
            && !self.last.get(1).is_some_and(Tok::ends_operand)
        {
            let at = self.last.pop(1);
            self.out.truncate(at);
        }
        if self.last.get(0) == Some(Tok::Comma) && self.last.get(1).is_some_and(Tok::is_value) {
            let at = self.last.pop(2);
            self.out.truncate(at);
            self.emit(Tok::ValueList, b"?, ...");
        } else if null {
            self.emit(Tok::Null, b"NULL");
        } else {
            self.emit(Tok::Value, b"?");
        }
    }

    /// `)`: a row of values, or a list of rows, collapses.
    fn close(&mut self) {
        let row = match (self.last.get(0), self.last.get(1)) {
            (Some(Tok::Value), Some(Tok::Open)) => Some(Tok::RowSingle),
            (Some(Tok::ValueList), Some(Tok::Open)) => Some(Tok::RowMulti),
            _ => None,
        };
        let Some(row) = row else {
            return self.emit(Tok::Operand, b")");
        };
        let at = self.last.pop(2);
        self.out.truncate(at);
        let list = if row == Tok::RowSingle {
            Tok::RowSingleList
        } else {
            Tok::RowMultiList
        };
        let follows_row = self.last.get(0) == Some(Tok::Comma)
            && self.last.get(1).is_some_and(|t| t == row || t == list);
        if follows_row {
            let at = self.last.pop(2);
            self.out.truncate(at);
            let text: &[u8] = if row == Tok::RowSingle {
                b"(?) /* , ... */"
            } else {
                b"(...) /* , ... */"
            };
            self.emit(list, text);
        } else {
            let text: &[u8] = if row == Tok::RowSingle {
                b"(?)"
            } else {
                b"(...)"
            };
            self.emit(row, text);
        }
    }

    /// Drops trailing `;`.
    fn finish(&mut self) {
        while self.last.get(0) == Some(Tok::Semicolon) {
            let at = self.last.pop(1);
            self.out.truncate(at);
        }
    }
}

/// A fast 64-bit hash (not cryptographic; the same for the same bytes in
/// every process).
pub fn hash64(bytes: &[u8]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h = (bytes.len() as u64).wrapping_mul(K);
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        h = (h.rotate_left(5) ^ u64::from_le_bytes(w)).wrapping_mul(K);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut w = [0u8; 8];
        w[..rest.len()].copy_from_slice(rest);
        h = (h.rotate_left(5) ^ u64::from_le_bytes(w)).wrapping_mul(K);
    }
    mix64(h)
}

/// A 64-bit finalizer (MurmurHash3's): every input bit affects every
/// output bit.
pub fn mix64(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

#[cfg(test)]
#[path = "digest_tests.rs"]
mod tests;
