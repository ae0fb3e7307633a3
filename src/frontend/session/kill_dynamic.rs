//! KILL hidden in text the lexer does not see as a statement: the text of
//! `PREPARE name FROM …` and `EXECUTE IMMEDIATE …`.
//!
//! A string literal is read here (its KILL is mapped or refused like a
//! typed one). Text from a variable or an expression of a top-level
//! PREPARE / EXECUTE IMMEDIATE is resolved: when the expression is a plain,
//! side-effect-free one (literals, user variables, system variables whose
//! value cannot change before the statement runs, pure string functions
//! such as CONCAT, REPLACE, SFORMAT), the server computes it once
//! (`SELECT HEX(CAST((expr) AS CHAR))`, the text in the connection
//! character set, as PREPARE converts it) and that text is planned; any
//! other top-level expression is refused. Dynamic SQL inside stored code,
//! a compound or a multi-statement (where the text exists only at run
//! time) is refused when the query holds the word KILL anywhere, strings
//! and comments included; text that is not a literal there (assembled at
//! run time: `CONCAT('KI', 'LL …')`, `CHAR(…)`, table data) is refused
//! unless `Session::allow_unplanned_kill` lets it through (stored code
//! created elsewhere is judged when it runs: `Session::stored_code_may_kill`).
//! Only statements that name PREPARE or EXECUTE IMMEDIATE pay the extra
//! round trip.
//!
//! Owns this planning and the resolution round trip; the KILL forms
//! themselves are `kill`'s.

use super::execute::unhex;
use super::kill::{self, KillPlan};
use super::{End, Session};
use crate::sql::dynamic::DynText;
use crate::sql::lexer::{Token, TokenKind};
use crate::sql::{Kind, LexOptions, Statement};

/// Functions an expression giving statement text may call: deterministic,
/// no effect on the session, no table read.
const PURE_FUNCTIONS: &[&[u8]] = &[
    b"concat",
    b"concat_ws",
    b"unhex",
    b"char",
    b"replace",
    b"lower",
    b"upper",
    b"lcase",
    b"ucase",
    b"substring",
    b"substr",
    b"left",
    b"right",
    b"trim",
    b"ltrim",
    b"rtrim",
    b"repeat",
    b"lpad",
    b"rpad",
    b"convert",
    b"cast",
    b"space",
    b"reverse",
    b"ifnull",
    b"coalesce",
    b"from_base64",
    b"sformat",
    b"conv",
    b"hex",
    b"quote",
    b"format",
    b"insert",
    b"elt",
    b"if",
    b"nullif",
    b"substring_index",
    b"length",
    b"char_length",
    b"charset",
    b"collation",
    b"database",
    b"schema",
];

/// Parts of system variable names whose value may change between the
/// server computing the text and running the statement (the clock, other
/// clients' commits, the diagnostics of the computing statement itself,
/// the backend the statement runs on): such an expression could compute
/// one text and run another.
const VOLATILE_SYSVARS: &[&str] = &[
    "time",
    "count",
    "gtid",
    "rand",
    "insert_id",
    "identity",
    "thread",
    "transaction",
    "uptime",
    "last_",
    "seq_no",
];

/// Words an expression may hold besides function names.
const PURE_WORDS: &[&[u8]] = &[b"using", b"as", b"binary", b"null"];

/// What the dynamic texts of a query mean for KILL. `single` is the
/// query's only statement (a complete analysis), if it has one.
pub(super) fn plan(
    sql: &[u8],
    toks: &[Token],
    single: Option<&Statement>,
    dyns: &[DynText],
    opts: LexOptions,
    allow_unplanned: bool,
) -> Option<KillPlan> {
    let alone = dyns.len() == 1;
    for d in dyns {
        let Some(text) = &d.literal else {
            let kind = single.map(|s| s.kind);
            if alone
                && matches!(kind, Some(Kind::Prepare | Kind::ExecuteImmediate))
                && let Some(expr) = expression(sql, toks, d.at)
            {
                let stand_in = match single.and_then(prepared_name) {
                    Some(name) if d.prepare => {
                        let head = sql.get(..toks[d.at].start)?.to_vec();
                        Some((name, head))
                    }
                    _ => None,
                };
                return Some(KillPlan::Resolve { expr, stand_in });
            }
            if matches!(
                single.map(|s| s.kind),
                Some(Kind::Prepare | Kind::ExecuteImmediate)
            ) {
                // A top-level statement whose text the server cannot
                // compute without effect (a stored function, a subquery).
                return Some(KillPlan::Refuse(
                    "PREPARE or EXECUTE IMMEDIATE of text from an expression with side effects through myplex",
                ));
            }
            // Stored code, a compound or multi-statement: the text exists
            // only when it runs. Refused when the query holds the word
            // KILL anywhere (strings and comments included).
            if crate::sql::scan::words(sql).has(crate::sql::scan::Found::KILL) {
                return Some(KillPlan::Refuse(
                    "dynamic SQL (PREPARE / EXECUTE IMMEDIATE of a variable or expression) with the word KILL in stored code, a compound or multi-statement through myplex",
                ));
            }
            // Text built from pieces at run time (`CONCAT('KI', 'LL …')`)
            // may still be a KILL of a server thread id: refused (fail
            // closed) where such a KILL may reach another account's client,
            // in stored code too (a procedure created now could only be
            // refused when CALLed, and one replaced after a client
            // prepared its CALL would not be).
            if !allow_unplanned {
                return Some(KillPlan::Refuse(
                    "dynamic SQL built at run time (PREPARE / EXECUTE IMMEDIATE of a variable or expression) in stored code, a compound statement or a multi-statement through myplex",
                ));
            }
            continue;
        };
        let inner = crate::sql::analyze(text, opts);
        match kill::plan(text, &inner, opts, allow_unplanned) {
            None => continue,
            Some(KillPlan::Run(k))
                if d.prepare
                    && alone
                    && single.is_some_and(|s| s.kind == Kind::Prepare)
                    && toks.get(d.at + 1).is_none_or(|n| n.is_symbol(sql, b";")) =>
            {
                let name = single.and_then(prepared_name)?;
                let lit = &toks[d.at];
                let mut out = Vec::with_capacity(sql.len());
                out.extend_from_slice(&sql[..lit.start]);
                out.extend_from_slice(b"'DO 0'");
                out.extend_from_slice(&sql[lit.end..]);
                return Some(KillPlan::Prepare {
                    name,
                    kill: k,
                    sql: out,
                });
            }
            Some(_) => {
                return Some(KillPlan::Refuse(
                    "KILL in dynamic SQL (PREPARE / EXECUTE IMMEDIATE) through myplex",
                ));
            }
        }
    }
    None
}

/// The name a PREPARE statement prepares.
fn prepared_name(s: &Statement) -> Option<Vec<u8>> {
    s.effects.iter().find_map(|e| match e {
        crate::sql::Effect::TextPrepare { name } => Some(name.clone()),
        _ => None,
    })
}

/// The text of the expression starting at token `at` (up to a top-level
/// USING or the end), when it is one the server can compute without effect
/// and with the same value twice: literals, user variables, parentheses,
/// commas and [`PURE_FUNCTIONS`]; valid UTF-8.
pub(super) fn expression(sql: &[u8], toks: &[Token], at: usize) -> Option<String> {
    let mut depth = 0usize;
    let mut end = at;
    for (i, t) in toks.iter().enumerate().skip(at) {
        if t.in_exec {
            return None;
        }
        let ok = match t.kind {
            TokenKind::String
            | TokenKind::HexString
            | TokenKind::BitString
            | TokenKind::Number
            | TokenKind::UserVar => true,
            TokenKind::SysVar => {
                let name = String::from_utf8_lossy(t.text(sql)).to_ascii_lowercase();
                !VOLATILE_SYSVARS.iter().any(|v| name.contains(v))
            }
            TokenKind::Symbol if t.is_symbol(sql, b"(") => {
                depth += 1;
                true
            }
            TokenKind::Symbol if t.is_symbol(sql, b")") => {
                depth = depth.checked_sub(1)?;
                true
            }
            TokenKind::Symbol if t.is_symbol(sql, b",") => true,
            TokenKind::Symbol if t.is_symbol(sql, b";") && depth == 0 => {
                // Only trailing semicolons may follow.
                if toks[i..].iter().all(|t| t.is_symbol(sql, b";")) {
                    break;
                }
                false
            }
            TokenKind::Word if depth == 0 && t.is_word(sql, b"using") => break,
            TokenKind::Word => {
                let w = t.text(sql).to_ascii_lowercase();
                let call = toks.get(i + 1).is_some_and(|n| n.is_symbol(sql, b"("));
                let after_using = i > 0 && toks[i - 1].is_word(sql, b"using");
                if call {
                    PURE_FUNCTIONS.contains(&w.as_slice())
                } else {
                    PURE_WORDS.contains(&w.as_slice()) || w.first() == Some(&b'_') || after_using
                }
            }
            _ => false,
        };
        if !ok {
            return None;
        }
        end = i + 1;
    }
    if end == at || depth != 0 {
        return None;
    }
    let text = sql.get(toks[at].start..toks[end - 1].end)?;
    std::str::from_utf8(text).ok().map(str::to_string)
}

/// How a resolved dynamic text goes on.
pub(super) enum Resolved {
    /// No KILL in it: the statement goes to the server as the client sent it.
    Forward,
    /// The client has its answer (an error, or a refusal).
    Answered,
    /// A PREPARE of one mappable KILL: forward this PREPARE of a stand-in
    /// instead (the KILL is remembered under the name).
    StandIn(Vec<u8>),
}

/// Client character sets whose text the lexer cannot read when it holds
/// bytes >= 0x80 (see `crate::sql::lexer`).
pub(super) fn unsure_charset(state: &crate::session_state::TrackedState) -> bool {
    !crate::session_state::authority::lexable_charset(state)
        || state
            .vars
            .get("character_set_connection")
            .is_some_and(|c| crate::sql::lexer::read_otherwise(c.as_bytes()))
}

/// True when a query may hide KILL, PREPARE or EXECUTE IMMEDIATE from the
/// lexer (a character set with ASCII-range trail bytes and a byte >= 0x80,
/// or the word KILL anywhere in a query of an ORACLE-mode session: dynamic
/// SQL there is still computed and planned, and refused when its text
/// holds the word).
pub(super) fn unreadable(sql: &[u8], state: &crate::session_state::TrackedState) -> bool {
    use crate::sql::scan::{Found, words};
    (crate::session_state::authority::oracle_mode(state) && words(sql).has(Found::KILL))
        || (unsure_charset(state) && sql.iter().any(|&b| b >= 0x80))
}

impl Session {
    /// Computes a dynamic statement text on the server and plans it (see
    /// the module doc).
    pub(super) async fn resolve_dynamic(
        &mut self,
        seq: u8,
        expr: &str,
        stand_in: Option<(Vec<u8>, Vec<u8>)>,
    ) -> Result<Resolved, End> {
        let q = format!("SELECT HEX(CAST(({expr}) AS CHAR))");
        let Some(cell) = self.ask_backend(seq, &q).await? else {
            return Ok(Resolved::Answered);
        };
        // NULL: the server refuses the statement itself.
        let Some(hex) = cell else {
            return Ok(Resolved::Forward);
        };
        let refuse = |what| KillPlan::Refuse(what);
        let plan = match unhex(&hex) {
            None => Some(refuse("dynamic SQL whose text myplex cannot read")),
            Some(text) if unreadable(&text, &self.state) => {
                (!crate::sql::scan::words(&text).is_empty()).then_some(refuse(
                    "KILL or dynamic SQL in text of a character set myplex cannot read (big5, cp932, gbk, gb18030, sjis)",
                ))
            }
            Some(text) => {
                let opts = crate::session_state::authority::lex_options(&self.state, self.status);
                let allow = self.allow_unplanned_kill();
                match kill::plan(&text, &crate::sql::analyze(&text, opts), opts, allow) {
                    None => self.stored_code_may_kill(&text).await.map(refuse),
                    plan => plan,
                }
            }
        };
        match (plan, stand_in) {
            (None, _) => Ok(Resolved::Forward),
            (Some(KillPlan::Run(k)), Some((name, mut head))) => {
                self.remember_sql_kill(name, k);
                head.extend_from_slice(b"'DO 0'");
                Ok(Resolved::StandIn(head))
            }
            (Some(KillPlan::Refuse(what)), _) => {
                self.send_err(seq, &kill::refused(what)).await?;
                Ok(Resolved::Answered)
            }
            (Some(_), _) => {
                let what = "KILL in dynamic SQL (PREPARE / EXECUTE IMMEDIATE) through myplex";
                self.send_err(seq, &kill::refused(what)).await?;
                Ok(Resolved::Answered)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::dynamic::texts;

    fn expr_of(q: &str) -> Option<String> {
        let sql = q.as_bytes();
        let toks: Vec<_> = crate::sql::lexer::Lexer::new(sql, LexOptions::default()).collect();
        let d = texts(sql, &toks, LexOptions::default());
        assert_eq!(d.len(), 1, "{q}");
        assert!(d[0].literal.is_none(), "{q}");
        expression(sql, &toks, d[0].at)
    }

    #[test]
    fn pure_expressions_only() {
        assert_eq!(expr_of("PREPARE s FROM @q").as_deref(), Some("@q"));
        assert_eq!(
            expr_of("PREPARE s FROM CONCAT('KI', @x, 0x4c);").as_deref(),
            Some("CONCAT('KI', @x, 0x4c)")
        );
        assert_eq!(
            expr_of("EXECUTE IMMEDIATE @q USING @a, @b").as_deref(),
            Some("@q")
        );
        assert_eq!(
            expr_of("PREPARE s FROM _utf16 'x'").as_deref(),
            Some("_utf16 'x'")
        );
        assert_eq!(
            expr_of("PREPARE s FROM CONVERT(@q USING latin1)").as_deref(),
            Some("CONVERT(@q USING latin1)")
        );
        assert_eq!(
            expr_of("PREPARE s FROM 'KI' 'LL 1'").as_deref(),
            Some("'KI' 'LL 1'")
        );
        assert_eq!(
            expr_of("EXECUTE IMMEDIATE SFORMAT('SELECT {}', @@session.collation_connection)")
                .as_deref(),
            Some("SFORMAT('SELECT {}', @@session.collation_connection)")
        );
        for q in [
            "PREPARE s FROM IF(RAND() > 0.5, 'KILL 1', 'DO 1')",
            "PREPARE s FROM CONV(@@warning_count, 10, 36)",
            "PREPARE s FROM ELT(@@gtid_current_pos, 'DO 1')",
            "PREPARE s FROM (SELECT q FROM t)",
            "PREPARE s FROM @q := 'KILL 1'",
            "PREPARE s FROM f(@q)",
            "PREPARE s FROM @@timestamp",
            "PREPARE s FROM /*! @q */",
            "PREPARE s FROM col",
        ] {
            assert_eq!(expr_of(q), None, "{q}");
        }
    }

    #[test]
    fn hex_round_trip() {
        assert_eq!(unhex("4B494C4C"), Some(b"KILL".to_vec()));
        assert_eq!(unhex("4B4"), None);
        assert_eq!(unhex("ZZ"), None);
    }
}
