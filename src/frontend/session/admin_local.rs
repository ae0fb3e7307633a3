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

use std::collections::HashMap;

use crate::admin::console::ColumnType;
use crate::session_state::TrackedState;
use crate::sql::lexer::{Lexer, Token, TokenKind, unquote};

/// Statements longer than this are never answered here.
const MAX_LEN: usize = 2048;
/// Nor statements with more tokens.
const MAX_TOKENS: usize = 256;

/// A system variable as a fresh backend session saw it at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VarInfo {
    /// Session value (`None` for a global-only variable or NULL).
    pub session: Option<String>,
    /// Global value (`None` for a session-only variable or NULL).
    pub global: Option<String>,
    /// `VARIABLE_SCOPE`: GLOBAL, SESSION or SESSION ONLY.
    pub scope: String,
    /// `VARIABLE_TYPE` (BOOLEAN, BIGINT UNSIGNED, VARCHAR, ENUM, …).
    pub ty: String,
}

/// The server's variables and character sets, read once at start.
#[derive(Debug, Clone, Default)]
pub struct ServerVars {
    /// By lowercase name.
    pub vars: HashMap<String, VarInfo>,
    /// Character set → its default collation.
    pub charsets: HashMap<String, String>,
    /// Collation → its character set.
    pub collations: HashMap<String, String>,
}

impl ServerVars {
    /// Reads the snapshot over `conn` (MariaDB's
    /// `information_schema.SYSTEM_VARIABLES` and `COLLATIONS`).
    pub async fn capture(
        conn: &mut crate::backend::BackendConn,
    ) -> Result<Self, crate::backend::BackendError> {
        let mut out = Self::default();
        let rows = conn
            .query_rows(
                "SELECT LOWER(VARIABLE_NAME), SESSION_VALUE, GLOBAL_VALUE, VARIABLE_SCOPE, \
                 VARIABLE_TYPE FROM information_schema.SYSTEM_VARIABLES",
                10_000,
            )
            .await?;
        for mut r in rows {
            if r.len() != 5 {
                continue;
            }
            let ty = r.pop().flatten().unwrap_or_default();
            let scope = r.pop().flatten().unwrap_or_default();
            let global = r.pop().flatten();
            let session = r.pop().flatten();
            if let Some(Some(name)) = r.pop() {
                out.vars.insert(
                    name,
                    VarInfo {
                        session,
                        global,
                        scope,
                        ty,
                    },
                );
            }
        }
        let rows = conn
            .query_rows(
                "SELECT LOWER(COLLATION_NAME), LOWER(CHARACTER_SET_NAME), IS_DEFAULT \
                 FROM information_schema.COLLATIONS",
                10_000,
            )
            .await?;
        for r in rows {
            if let [Some(coll), Some(cs), default] = r.as_slice() {
                if default
                    .as_deref()
                    .is_some_and(|d| d.eq_ignore_ascii_case("yes"))
                {
                    out.charsets.insert(cs.clone(), coll.clone());
                }
                out.collations.insert(coll.clone(), cs.clone());
            }
        }
        Ok(out)
    }

    /// A character set name as the server resolves it (`utf8` is `utf8mb3`
    /// under the default `old_mode`).
    fn charset(&self, name: &str) -> Option<String> {
        let name = self.alias(name)?;
        self.charsets.contains_key(&name).then_some(name)
    }

    fn collation(&self, name: &str) -> Option<(String, String)> {
        let name = self.alias(name)?;
        let cs = self.collations.get(&name)?;
        Some((name, cs.clone()))
    }

    fn alias(&self, name: &str) -> Option<String> {
        let name = name.to_ascii_lowercase();
        let Some(rest) = name.strip_prefix("utf8") else {
            return Some(name);
        };
        if rest.starts_with("mb") {
            return Some(name);
        }
        // Only when the server says utf8 means utf8mb3.
        let old_mode = self.vars.get("old_mode")?.session.as_deref()?;
        old_mode
            .to_ascii_uppercase()
            .contains("UTF8_IS_UTF8MB3")
            .then(|| format!("utf8mb3{rest}"))
    }
}

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

/// Per-statement or per-connection values the server owns: never answered
/// from a snapshot.
const NOT_LOCAL: &[&str] = &[
    "error_count",
    "external_user",
    "gtid_seq_no",
    "identity",
    "in_transaction",
    "insert_id",
    "last_gtid",
    "last_insert_id",
    "pseudo_thread_id",
    "proxy_user",
    "rand_seed1",
    "rand_seed2",
    "thread_id",
    "timestamp",
    "warning_count",
    "character_set_database",
    "collation_database",
];

/// The value `SELECT @@[scope.]name` gives the session, with its column
/// type; `None` when it is not answered here.
fn read(
    name: &str,
    global: bool,
    session_scope: bool,
    vars: &ServerVars,
    s: &SessionView<'_>,
) -> Option<(ColumnType, Option<String>)> {
    if NOT_LOCAL.contains(&name) {
        return None;
    }
    let info = vars.vars.get(name)?;
    let scope = info.scope.to_ascii_uppercase();
    let value = if global {
        if scope == "SESSION ONLY" {
            return None;
        }
        info.global.clone()
    } else if scope == "GLOBAL" {
        if session_scope {
            return None;
        }
        info.global.clone()
    } else if name == "autocommit" {
        Some(
            if s.status & crate::protocol::packets::status::AUTOCOMMIT != 0 {
                "ON".into()
            } else {
                "OFF".into()
            },
        )
    } else if let Some(v) = s.state.vars.get(name) {
        Some(v.clone())
    } else if name == "wait_timeout" && s.interactive {
        vars.vars.get("interactive_timeout")?.session.clone()
    } else if name == "sql_mode" && s.ignore_space {
        let m = info.session.clone().unwrap_or_default();
        Some(
            if m.split(',').any(|w| w.eq_ignore_ascii_case("IGNORE_SPACE")) {
                m
            } else if m.is_empty() {
                "IGNORE_SPACE".into()
            } else {
                format!("{m},IGNORE_SPACE")
            },
        )
    } else {
        info.session.clone()
    };
    let ty = info.ty.to_ascii_uppercase();
    Some(if ty == "BOOLEAN" {
        let v = value.map(|v| {
            if v.eq_ignore_ascii_case("ON") || v == "1" {
                "1".to_string()
            } else {
                "0".to_string()
            }
        });
        (ColumnType::Integer { unsigned: false }, v)
    } else if ty.contains("INT") {
        (
            ColumnType::Integer {
                unsigned: ty.contains("UNSIGNED"),
            },
            value,
        )
    } else if ty == "DOUBLE" {
        (ColumnType::Double { decimals: 6 }, value)
    } else {
        (ColumnType::Text, value)
    })
}

/// The base sql_mode flags of MariaDB 10.11 (combination modes such as
/// ANSI or TRADITIONAL expand on the server: not answered here).
const SQL_MODES: &[&str] = &[
    "ALLOW_INVALID_DATES",
    "ANSI_QUOTES",
    "EMPTY_STRING_IS_NULL",
    "ERROR_FOR_DIVISION_BY_ZERO",
    "HIGH_NOT_PRECEDENCE",
    "IGNORE_BAD_TABLE_OPTIONS",
    "IGNORE_SPACE",
    "NO_AUTO_CREATE_USER",
    "NO_AUTO_VALUE_ON_ZERO",
    "NO_BACKSLASH_ESCAPES",
    "NO_DIR_IN_CREATE",
    "NO_ENGINE_SUBSTITUTION",
    "NO_FIELD_OPTIONS",
    "NO_KEY_OPTIONS",
    "NO_TABLE_OPTIONS",
    "NO_UNSIGNED_SUBTRACTION",
    "NO_ZERO_DATE",
    "NO_ZERO_IN_DATE",
    "ONLY_FULL_GROUP_BY",
    "PAD_CHAR_TO_FULL_LENGTH",
    "PIPES_AS_CONCAT",
    "REAL_AS_FLOAT",
    "SIMULTANEOUS_ASSIGNMENT",
    "STRICT_ALL_TABLES",
    "STRICT_TRANS_TABLES",
    "TIME_ROUND_FRACTIONAL",
];

/// The value a session assignment of `name` to the literal `raw` leaves,
/// as the server's tracker reports it; `None` when the variable is not
/// answered here or the server might refuse or transform the value.
fn setting(name: &str, raw: &str, vars: &ServerVars) -> Option<String> {
    let bool_value = || match raw.to_ascii_uppercase().as_str() {
        "1" | "ON" | "TRUE" => Some("ON".to_string()),
        "0" | "OFF" | "FALSE" => Some("OFF".to_string()),
        _ => None,
    };
    match name {
        "autocommit" | "transaction_read_only" | "tx_read_only" => bool_value(),
        "character_set_client" | "character_set_connection" | "character_set_results" => {
            vars.charset(raw)
        }
        "collation_connection" => vars.collation(raw).map(|(c, _)| c),
        "sql_mode" => {
            let mut modes: Vec<String> = Vec::new();
            for m in raw.split(',').map(str::trim).filter(|m| !m.is_empty()) {
                let m = m.to_ascii_uppercase();
                if !SQL_MODES.contains(&m.as_str()) {
                    return None;
                }
                if !modes.contains(&m) {
                    modes.push(m);
                }
            }
            // The server reports the flags in its own order.
            modes.sort_by_key(|m| SQL_MODE_ORDER.iter().position(|o| o == m));
            Some(modes.join(","))
        }
        "time_zone" => {
            if raw.eq_ignore_ascii_case("system") {
                return Some("SYSTEM".into());
            }
            let (sign, hm) = raw.split_at_checked(1)?;
            let (h, m) = hm.split_once(':')?;
            let (h, m): (u32, u32) = (h.parse().ok()?, m.parse().ok()?);
            let ok = match sign {
                "+" => h < 13 || (h == 13 && m == 0),
                "-" => h < 13,
                _ => false,
            };
            (ok && m < 60 && hm.len() <= 5).then(|| format!("{sign}{h:02}:{m:02}"))
        }
        "tx_isolation" | "transaction_isolation" => {
            let v = raw.to_ascii_uppercase().replace(' ', "-");
            [
                "READ-UNCOMMITTED",
                "READ-COMMITTED",
                "REPEATABLE-READ",
                "SERIALIZABLE",
            ]
            .contains(&v.as_str())
            .then_some(v)
        }
        "wait_timeout" | "interactive_timeout" | "net_read_timeout" | "net_write_timeout" => {
            let n: u64 = raw.parse().ok()?;
            (1..=31_536_000).contains(&n).then(|| n.to_string())
        }
        _ => None,
    }
}

/// The order the server lists sql_mode flags in (its bit order).
const SQL_MODE_ORDER: &[&str] = &[
    "REAL_AS_FLOAT",
    "PIPES_AS_CONCAT",
    "ANSI_QUOTES",
    "IGNORE_SPACE",
    "IGNORE_BAD_TABLE_OPTIONS",
    "ONLY_FULL_GROUP_BY",
    "NO_UNSIGNED_SUBTRACTION",
    "NO_DIR_IN_CREATE",
    "NO_KEY_OPTIONS",
    "NO_TABLE_OPTIONS",
    "NO_FIELD_OPTIONS",
    "NO_AUTO_VALUE_ON_ZERO",
    "NO_BACKSLASH_ESCAPES",
    "STRICT_TRANS_TABLES",
    "STRICT_ALL_TABLES",
    "NO_ZERO_IN_DATE",
    "NO_ZERO_DATE",
    "ALLOW_INVALID_DATES",
    "ERROR_FOR_DIVISION_BY_ZERO",
    "NO_AUTO_CREATE_USER",
    "HIGH_NOT_PRECEDENCE",
    "NO_ENGINE_SUBSTITUTION",
    "PAD_CHAR_TO_FULL_LENGTH",
    "EMPTY_STRING_IS_NULL",
    "SIMULTANEOUS_ASSIGNMENT",
    "TIME_ROUND_FRACTIONAL",
];

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
        let opts = crate::session_state::authority::lex_options(&self.state);
        let Some(a) = answer(sql, opts, &vars, &view) else {
            return Ok(false);
        };
        match a {
            Answer::Set { vars, autocommit } => {
                for (n, v) in vars {
                    if n == "collation_connection" {
                        self.state.set_collation(&v);
                    } else {
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
            }
        }
        self.shared.metrics.admin_local_answer();
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> ServerVars {
        let mut v = ServerVars::default();
        let mut add = |n: &str, s: Option<&str>, g: Option<&str>, scope: &str, ty: &str| {
            v.vars.insert(
                n.into(),
                VarInfo {
                    session: s.map(Into::into),
                    global: g.map(Into::into),
                    scope: scope.into(),
                    ty: ty.into(),
                },
            );
        };
        add("autocommit", Some("ON"), Some("ON"), "SESSION", "BOOLEAN");
        add(
            "version_comment",
            None,
            Some("MariaDB Server"),
            "GLOBAL",
            "VARCHAR",
        );
        add(
            "max_allowed_packet",
            Some("16777216"),
            Some("16777216"),
            "SESSION",
            "BIGINT UNSIGNED",
        );
        add(
            "sql_mode",
            Some("STRICT_TRANS_TABLES"),
            Some("STRICT_TRANS_TABLES"),
            "SESSION",
            "SET",
        );
        add(
            "old_mode",
            Some("UTF8_IS_UTF8MB3"),
            Some("UTF8_IS_UTF8MB3"),
            "SESSION",
            "SET",
        );
        add(
            "warning_count",
            Some("0"),
            None,
            "SESSION ONLY",
            "BIGINT UNSIGNED",
        );
        for n in [
            "character_set_client",
            "character_set_connection",
            "character_set_results",
            "collation_connection",
            "time_zone",
            "tx_isolation",
        ] {
            add(n, Some("x"), Some("x"), "SESSION", "VARCHAR");
        }
        for (c, cs, d) in [
            ("utf8mb4_general_ci", "utf8mb4", true),
            ("utf8mb4_unicode_ci", "utf8mb4", false),
            ("utf8mb3_general_ci", "utf8mb3", true),
            ("latin1_swedish_ci", "latin1", true),
        ] {
            if d {
                v.charsets.insert(cs.into(), c.into());
            }
            v.collations.insert(c.into(), cs.into());
        }
        v
    }

    fn run(sql: &str) -> Option<Answer> {
        let st = TrackedState::for_collation(45);
        let s = SessionView {
            state: &st,
            status: crate::protocol::packets::status::AUTOCOMMIT,
            interactive: false,
            ignore_space: false,
        };
        answer(sql.as_bytes(), Default::default(), &vars(), &s)
    }

    fn set_vars(sql: &str) -> Vec<(String, String)> {
        match run(sql) {
            Some(Answer::Set { vars, .. }) => vars,
            other => panic!("{sql}: {other:?}"),
        }
    }

    #[test]
    fn driver_connect_sets() {
        // PyMySQL
        let v = set_vars("SET NAMES utf8mb4");
        assert!(v.contains(&("collation_connection".into(), "utf8mb4_general_ci".into())));
        assert!(v.contains(&("character_set_results".into(), "utf8mb4".into())));
        assert_eq!(
            run("SET AUTOCOMMIT = 0"),
            Some(Answer::Set {
                vars: vec![("autocommit".into(), "OFF".into())],
                autocommit: Some(false)
            })
        );
        // mysql-connector-python
        let v = set_vars("SET NAMES 'utf8mb4' COLLATE 'utf8mb4_unicode_ci'");
        assert!(v.contains(&("collation_connection".into(), "utf8mb4_unicode_ci".into())));
        assert!(matches!(
            run("SET @@session.autocommit = OFF"),
            Some(Answer::Set {
                autocommit: Some(false),
                ..
            })
        ));
        assert_eq!(
            set_vars("SET NAMES utf8"),
            set_vars("SET NAMES utf8mb3 COLLATE utf8mb3_general_ci")
        );
        assert_eq!(
            set_vars("set sql_mode='strict_trans_tables,ansi_quotes'"),
            vec![("sql_mode".into(), "ANSI_QUOTES,STRICT_TRANS_TABLES".into())]
        );
        assert_eq!(
            set_vars("SET time_zone = '+0:00', SESSION tx_isolation='read committed';"),
            vec![
                ("time_zone".into(), "+00:00".into()),
                ("tx_isolation".into(), "READ-COMMITTED".into())
            ]
        );
    }

    #[test]
    fn anything_else_goes_to_the_server() {
        for q in [
            "SET NAMES bogus",
            "SET NAMES utf8mb4 COLLATE latin1_swedish_ci",
            "SET GLOBAL autocommit=0",
            "SET autocommit=2",
            "SET autocommit=@x",
            "SET sql_mode=CONCAT(@@sql_mode, ',ANSI')",
            "SET sql_mode='TRADITIONAL'",
            "SET time_zone='Europe/Paris'",
            "SET @a=1",
            "SET unknown_var=1",
            "SET NAMES utf8mb4; DROP TABLE t",
            "SET /*!NAMES*/ utf8mb4",
            "SET PASSWORD = 'x'",
            "SELECT @@version_comment FROM dual",
            "SELECT @@last_insert_id",
            "SELECT @@session.version_comment",
            "SELECT @@global.warning_count",
            "SELECT @@autocommit + 1",
            "SELECT 1",
            "SELECT @@a.b.c",
        ] {
            assert_eq!(run(q), None, "{q}");
        }
    }

    #[test]
    fn selects_of_variables() {
        let Some(Answer::Row(cols)) = run("select @@version_comment limit 1") else {
            panic!()
        };
        assert_eq!(
            cols,
            vec![(
                "@@version_comment".into(),
                ColumnType::Text,
                Some("MariaDB Server".into())
            )]
        );
        let Some(Answer::Row(cols)) = run(
            "SELECT @@session.autocommit, @@max_allowed_packet AS m, @@character_set_client cs",
        ) else {
            panic!()
        };
        assert_eq!(cols[0].0, "@@session.autocommit");
        assert_eq!(cols[0].2.as_deref(), Some("1"));
        assert_eq!(cols[1].0, "m");
        assert_eq!(cols[1].1, ColumnType::Integer { unsigned: true });
        assert_eq!(
            cols[2],
            ("cs".into(), ColumnType::Text, Some("utf8mb4".into()))
        );
    }
}
