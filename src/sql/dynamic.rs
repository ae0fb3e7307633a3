//! Dynamic SQL in a text: every `PREPARE name FROM <text>` and `EXECUTE
//! IMMEDIATE <text>`, wherever it is (top level, a compound or stored
//! body), and whether its text is one plain string literal.
//!
//! Pure code over the lexer's tokens. Owns finding the texts only: what a
//! text means for KILL is `frontend::session::kill_dynamic`'s; what stored
//! code holding such texts means is `session_state::code_names`'.

use super::LexOptions;
use super::lexer::{Token, TokenKind};

/// One dynamic statement text in a query.
#[derive(Debug)]
pub struct DynText {
    /// Index of its first token.
    pub at: usize,
    /// Its value, when it is one plain string literal.
    pub literal: Option<Vec<u8>>,
    /// PREPARE (else EXECUTE IMMEDIATE).
    pub prepare: bool,
}

/// Every `PREPARE x FROM t` and `EXECUTE IMMEDIATE t` of the tokens,
/// wherever they are (stored code and compound bodies included).
pub fn texts(sql: &[u8], toks: &[Token], opts: LexOptions) -> Vec<DynText> {
    let mut out = Vec::new();
    for (i, t) in toks.iter().enumerate() {
        let (at, prepare) = if t.is_word(sql, b"prepare")
            && toks.get(i + 2).is_some_and(|f| f.is_word(sql, b"from"))
        {
            (i + 3, true)
        } else if t.is_word(sql, b"immediate") && i > 0 && toks[i - 1].is_word(sql, b"execute") {
            (i + 1, false)
        } else {
            continue;
        };
        let Some(first) = toks.get(at) else { continue };
        let ends = toks
            .get(at + 1)
            .is_none_or(|n| n.is_symbol(sql, b";") || n.is_word(sql, b"using"));
        let literal = (first.kind == TokenKind::String && !first.in_exec && ends)
            .then(|| crate::sql::lexer::unquote(sql, first, opts).into_owned());
        out.push(DynText {
            at,
            literal,
            prepare,
        });
    }
    out
}
