//! What drivers send right after login, answered without a backend for
//! admin sessions: the admin console must stay reachable from any driver
//! while every backend connection is busy (or the server is down), and
//! PyMySQL, mysql-connector-python, Connector/J and the mariadb CLI send
//! `SET NAMES …`, `SET autocommit …` or `SELECT @@version_comment` before
//! the first `SHOW MYPLEX …`.
//!
//! Two statement shapes, recognised exactly (anything else goes to a
//! backend as usual):
//! - `SET` lists of `NAMES cs [COLLATE c]` and session assignments of a few
//!   connection settings with literal, validated values (autocommit, the
//!   character set variables, sql_mode, time_zone, isolation, read-only,
//!   the net/wait timeouts). The change goes into the session's tracked
//!   state as the server's reply would have put it there, so it is
//!   replayed onto whichever backend later runs a statement for the
//!   session.
//! - `SELECT @@a [[AS] x], @@session.b, … [LIMIT 1]`: values from the
//!   session's tracked state, else from a snapshot of a fresh backend
//!   session's variables taken at start ([`ServerVars`]).
//!
//! Only while the session holds nothing on a backend (no transaction, no
//! pin): then its state is exactly the tracked state plus the defaults.
//! Owns recognising and evaluating these statements; it must not touch
//! backends or the pool.

mod settings;
mod snapshot;
#[cfg(test)]
mod tests;

use crate::admin::console::ColumnType;
use crate::session_state::TrackedState;
use crate::sql::lexer::{Lexer, Token, TokenKind, unquote};
use settings::setting;
use snapshot::read;
pub use snapshot::{ServerVars, VarInfo};

/// Statements longer than this are never answered here.
const MAX_LEN: usize = 2048;
/// Nor statements with more tokens.
const MAX_TOKENS: usize = 256;

/// What the session looks like to these answers.
pub struct SessionView<'a> {
    /// Its tracked state.
    pub state: &'a TrackedState,
    /// Its status flags (autocommit).
    pub status: u16,
    /// It logged in with CLIENT_INTERACTIVE (wait_timeout).
    pub interactive: bool,
    /// It logged in with CLIENT_IGNORE_SPACE (sql_mode).
    pub ignore_space: bool,
}

/// A locally answered statement.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// A SET list: the variables to record (lowercase name → value as the
    /// tracker would report it) and the new autocommit flag, if set.
    Set {
        vars: Vec<(String, String)>,
        autocommit: Option<bool>,
    },
    /// A one-row result: (column name, type, value).
    Row(Vec<(String, ColumnType, Option<String>)>),
}

/// Recognises and evaluates `sql`; `None` when it is not one of the
/// statements answered here (it then goes to a backend).
pub fn answer(
    sql: &[u8],
    opts: crate::sql::LexOptions,
    vars: &ServerVars,
    s: &SessionView<'_>,
) -> Option<Answer> {
    if sql.len() > MAX_LEN || vars.vars.is_empty() {
        return None;
    }
    let mut lx = Lexer::new(sql, opts);
    let mut toks: Vec<Token> = lx.by_ref().take(MAX_TOKENS + 1).collect();
    if lx.incomplete() || toks.len() > MAX_TOKENS || toks.iter().any(|t| t.in_exec) {
        return None;
    }
    while toks.last().is_some_and(|t| t.is_symbol(sql, b";")) {
        toks.pop();
    }
    if toks.iter().any(|t| t.is_symbol(sql, b";")) {
        return None;
    }
    let first = toks.first()?;
    let p = Parser {
        sql,
        opts,
        toks: &toks,
    };
    if first.is_word(sql, b"set") {
        p.set(vars)
    } else if first.is_word(sql, b"select") {
        p.select(vars, s)
    } else {
        None
    }
}

struct Parser<'a> {
    sql: &'a [u8],
    opts: crate::sql::LexOptions,
    toks: &'a [Token],
}

impl Parser<'_> {
    fn text(&self, t: &Token) -> String {
        String::from_utf8_lossy(&unquote(self.sql, t, self.opts)).into_owned()
    }

    fn word(&self, i: usize, w: &[u8]) -> bool {
        self.toks.get(i).is_some_and(|t| t.is_word(self.sql, w))
    }

    fn sym(&self, i: usize, s: &[u8]) -> bool {
        self.toks.get(i).is_some_and(|t| t.is_symbol(self.sql, s))
    }

    /// A literal value token: a string, a number or a bare word.
    fn value(&self, i: usize) -> Option<String> {
        let t = self.toks.get(i)?;
        match t.kind {
            TokenKind::String | TokenKind::Number | TokenKind::Word | TokenKind::QuotedIdent => {
                Some(self.text(t))
            }
            _ => None,
        }
    }

    fn set(&self, vars: &ServerVars) -> Option<Answer> {
        let mut out: Vec<(String, String)> = Vec::new();
        let mut autocommit = None;
        let mut i = 1;
        loop {
            if self.word(i, b"names") {
                let cs = vars.charset(&self.value(i + 1)?)?;
                i += 2;
                let coll = if self.word(i, b"collate") {
                    let (c, of) = vars.collation(&self.value(i + 1)?)?;
                    if of != cs {
                        return None;
                    }
                    i += 2;
                    c
                } else {
                    vars.charsets.get(&cs)?.clone()
                };
                for n in [
                    "character_set_client",
                    "character_set_connection",
                    "character_set_results",
                ] {
                    out.push((n.into(), cs.clone()));
                }
                out.push(("collation_connection".into(), coll));
            } else {
                let (name, next) = self.target(i)?;
                if !(self.sym(next, b"=") || self.sym(next, b":=")) {
                    return None;
                }
                let raw = self.value(next + 1)?;
                vars.vars.get(&name)?;
                let value = setting(&name, &raw, vars)?;
                if name == "autocommit" {
                    autocommit = Some(value == "ON");
                }
                match name.as_str() {
                    "character_set_connection" => {
                        out.push((
                            "collation_connection".into(),
                            vars.charsets.get(&value)?.clone(),
                        ));
                    }
                    "collation_connection" => {
                        out.push((
                            "character_set_connection".into(),
                            vars.collations.get(&value)?.clone(),
                        ));
                    }
                    _ => {}
                }
                out.push((name, value));
                i = next + 2;
            }
            match self.toks.get(i) {
                None => break,
                Some(t) if t.is_symbol(self.sql, b",") => i += 1,
                Some(_) => return None,
            }
        }
        Some(Answer::Set {
            vars: out,
            autocommit,
        })
    }

    /// `[SESSION|LOCAL] name` or `@@[session.|local.]name` at `i`: the
    /// lowercase name and the index after it. Global assignments are not
    /// answered here.
    fn target(&self, i: usize) -> Option<(String, usize)> {
        let t = self.toks.get(i)?;
        match t.kind {
            TokenKind::SysVar => {
                let name = sysvar_name(t.text(self.sql), false)?;
                Some((name, i + 1))
            }
            TokenKind::Word if self.word(i, b"session") || self.word(i, b"local") => {
                let n = self.toks.get(i + 1)?;
                (n.kind == TokenKind::Word).then(|| (self.text(n).to_ascii_lowercase(), i + 2))
            }
            TokenKind::Word
                if !self.word(i, b"global")
                    && !self.word(i, b"persist")
                    && !self.word(i, b"transaction")
                    && !self.word(i, b"character")
                    && !self.word(i, b"charset")
                    && !self.word(i, b"password")
                    && !self.word(i, b"role")
                    && !self.word(i, b"statement")
                    && !self.word(i, b"default") =>
            {
                Some((self.text(t).to_ascii_lowercase(), i + 1))
            }
            _ => None,
        }
    }

    fn select(&self, vars: &ServerVars, s: &SessionView<'_>) -> Option<Answer> {
        let mut cols = Vec::new();
        let mut i = 1;
        loop {
            let t = self.toks.get(i)?;
            if t.kind != TokenKind::SysVar {
                return None;
            }
            let text = t.text(self.sql);
            let global = text.len() > 9 && text[2..9].eq_ignore_ascii_case(b"global.");
            let name = sysvar_name(text, true)?;
            let session = !global && (text[2..].contains(&b'.'));
            let (ty, value) = read(&name, global, session, vars, s)?;
            i += 1;
            let mut col = String::from_utf8_lossy(text).into_owned();
            if self.word(i, b"as") {
                i += 1;
                col = self.alias(i)?;
                i += 1;
            } else if self.toks.get(i).is_some_and(|a| {
                matches!(
                    a.kind,
                    TokenKind::Word | TokenKind::QuotedIdent | TokenKind::String
                ) && !a.is_word(self.sql, b"limit")
            }) {
                col = self.alias(i)?;
                i += 1;
            }
            cols.push((col, ty, value));
            match self.toks.get(i) {
                None => break,
                Some(t) if t.is_symbol(self.sql, b",") => i += 1,
                Some(t) if t.is_word(self.sql, b"limit") => {
                    let n = self.toks.get(i + 1)?;
                    if n.kind != TokenKind::Number
                        || n.text(self.sql) == b"0"
                        || self.toks.len() != i + 2
                    {
                        return None;
                    }
                    break;
                }
                Some(_) => return None,
            }
        }
        Some(Answer::Row(cols))
    }

    fn alias(&self, i: usize) -> Option<String> {
        let t = self.toks.get(i)?;
        match t.kind {
            TokenKind::Word | TokenKind::QuotedIdent | TokenKind::String => Some(self.text(t)),
            _ => None,
        }
    }
}

/// The name in an `@@…` token, without a scope; `None` for a structured
/// (dotted) name or, unless `allow_global`, a global one.
fn sysvar_name(text: &[u8], allow_global: bool) -> Option<String> {
    let rest = String::from_utf8_lossy(text.get(2..)?).to_ascii_lowercase();
    let (scope, name) = match rest.split_once('.') {
        Some((scope, name)) => (Some(scope.to_string()), name.to_string()),
        None => (None, rest),
    };
    match scope.as_deref() {
        None | Some("session" | "local") => {}
        Some("global") if allow_global => {}
        _ => return None,
    }
    (!name.is_empty()
        && !name.contains('.')
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
    .then_some(name)
}

impl super::Session {
    /// For an admin session holding nothing on a backend, answers `sql`
    /// when it is one of the statements recognised here. Returns false
    /// when it is not (the caller forwards it).
    pub(super) async fn answer_admin_local(
        &mut self,
        seq: u8,
        sql: &[u8],
    ) -> Result<bool, super::End> {
        use crate::protocol::caps::flag;
        use crate::protocol::packets::status;
        if !self.user.admin
            || self.backend.is_some()
            || self.status & status::IN_TRANS != 0
            || !self.only_session_mode()
        {
            return Ok(false);
        }
        let Some(vars) = self.shared.templates.server_vars.clone() else {
            return Ok(false);
        };
        let view = SessionView {
            state: &self.state,
            status: self.status,
            interactive: self.caps.has(flag::INTERACTIVE),
            ignore_space: self.caps.has(flag::IGNORE_SPACE),
        };
        let opts = crate::session_state::authority::lex_options(&self.state, self.status);
        let Some(a) = answer(sql, opts, &vars, &view) else {
            return Ok(false);
        };
        match a {
            Answer::Set { vars, autocommit } => {
                // SET NAMES sets the result character set and the
                // connection collation together: results then carry it.
                let names = vars.iter().any(|(n, _)| n == "character_set_results")
                    && vars.iter().any(|(n, _)| n == "collation_connection");
                for (n, v) in vars {
                    if n == "collation_connection" && names {
                        self.state.set_names_collation(&v);
                    } else if n == "collation_connection" {
                        self.state.set_collation(&v);
                    } else {
                        if n == "character_set_results" && !names {
                            self.state.results_collation = None;
                        }
                        self.state.vars.insert(n, v);
                    }
                }
                match autocommit {
                    Some(true) => self.status |= status::AUTOCOMMIT,
                    Some(false) => self.status &= !status::AUTOCOMMIT,
                    None => {}
                }
                self.send_ok(seq).await?;
            }
            Answer::Row(cols) => {
                let defs: Vec<_> = cols
                    .iter()
                    .map(|(n, t, _)| crate::admin::console::column_def_typed(n, *t))
                    .collect();
                let row = cols
                    .iter()
                    .map(|(_, _, v)| v.as_deref().map(str::as_bytes))
                    .collect();
                crate::admin::console::write_rows(
                    &mut self.client,
                    seq,
                    &defs,
                    [row],
                    self.caps,
                    self.status,
                );
                self.client.flush().await?;
                self.found_rows = 1;
                self.row_count_now = Some(-1);
            }
        }
        self.shared.metrics.admin_local_answer();
        Ok(true)
    }
}
