//! Statements whose answer depends on the client's proxy session rather than
//! on whichever backend runs them: `SELECT CONNECTION_ID()` and
//! `SELECT FOUND_ROWS()` are answered here with column metadata captured
//! from the server, and `CONNECTION_ID()` elsewhere in a statement is
//! replaced by the proxy's connection id.

use bytes::BytesMut;

use super::{End, Session};
use crate::protocol::lenenc::put_lenenc_bytes;
use crate::protocol::packets::{EOF_HEADER, OkPacket, eof_payload};

/// Which session value a statement asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Local {
    /// `SELECT CONNECTION_ID()`.
    ConnectionId,
    /// `SELECT FOUND_ROWS()`.
    FoundRows,
}

/// Column definitions of the two locally answered statements, as the
/// server describes them (captured at start).
#[derive(Debug, Clone, Default)]
pub struct Templates {
    /// Column definition of `SELECT CONNECTION_ID()`.
    pub connection_id: Option<Vec<u8>>,
    /// Column definition of `SELECT FOUND_ROWS()`.
    pub found_rows: Option<Vec<u8>>,
    /// The server's variables and character sets, for the statements
    /// answered locally to admin sessions (see [`super::admin_local`]).
    pub server_vars: Option<std::sync::Arc<super::admin_local::ServerVars>>,
}

/// `sql` lowercased with whitespace runs collapsed to one space and
/// leading whitespace dropped, without allocating.
fn normalized(sql: &[u8]) -> impl Iterator<Item = u8> + '_ {
    let mut prev_space = true;
    sql.iter().filter_map(move |&c| {
        if c.is_ascii_whitespace() {
            let emit = !prev_space;
            prev_space = true;
            emit.then_some(b' ')
        } else {
            prev_space = false;
            Some(c.to_ascii_lowercase())
        }
    })
}

/// True when the normalized `sql` starts with `pat`; with `exact`, only
/// spaces and semicolons may follow.
fn matches(sql: &[u8], pat: &[u8], exact: bool) -> bool {
    let mut n = normalized(sql);
    if !pat.iter().all(|p| n.next() == Some(*p)) {
        return false;
    }
    !exact || n.all(|c| c == b' ' || c == b';')
}

/// The statements answered here are short: anything longer is skipped
/// without looking further.
const SHORT: usize = 64;

/// Recognizes the locally answered statements.
pub fn classify(sql: &[u8]) -> Option<Local> {
    if sql.len() > SHORT {
        return None;
    }
    if matches(sql, b"select connection_id()", true) {
        Some(Local::ConnectionId)
    } else if matches(sql, b"select found_rows()", true) {
        Some(Local::FoundRows)
    } else {
        None
    }
}

/// Statements that read the diagnostics area without clearing it.
pub fn is_diagnostic(sql: &[u8]) -> bool {
    if sql.len() > 2 * SHORT {
        return false;
    }
    [
        &b"show warnings"[..],
        b"show errors",
        b"show count(*) warnings",
        b"show count(*) errors",
        b"get diagnostics",
        b"get current diagnostics",
    ]
    .iter()
    .any(|p| matches(sql, p, false))
}

/// Replaces each `CONNECTION_ID()` call (as the lexer found them: not in
/// strings, identifiers or comments) with the proxy's id; `None` when the
/// statement does not call it, or when the call would be stored rather
/// than evaluated (views, routines, triggers, events, `CREATE TABLE …
/// SELECT`, ALTER): there a literal would change the stored definition or
/// the column type, so the server's own function is left in place.
pub fn replace_connection_id(sql: &[u8], id: u32, opts: crate::sql::LexOptions) -> Option<Vec<u8>> {
    const NEEDLE: &[u8] = b"connection_id";
    if !sql
        .windows(NEEDLE.len())
        .any(|w| w.eq_ignore_ascii_case(NEEDLE))
    {
        return None;
    }
    use crate::sql::{Effect, FuncKind, Kind};
    let analysis = crate::sql::analyze(sql, opts);
    if analysis.incomplete {
        return None;
    }
    let mut spans = Vec::new();
    for st in &analysis.statements {
        let stored = matches!(
            st.kind,
            Kind::Create | Kind::Alter | Kind::RoutineDefinition
        );
        for e in &st.effects {
            if let Effect::Function(f) = e
                && f.kind == FuncKind::ConnectionId
                && !stored
            {
                spans.push(f.span.clone());
            }
        }
    }
    if spans.is_empty() {
        return None;
    }
    spans.sort_by_key(|s| s.start);
    let lit = id.to_string();
    let mut out = Vec::with_capacity(sql.len());
    let mut at = 0;
    for s in spans {
        if s.start < at || s.end > sql.len() {
            return None;
        }
        out.extend_from_slice(&sql[at..s.start]);
        out.extend_from_slice(lit.as_bytes());
        at = s.end;
    }
    out.extend_from_slice(&sql[at..]);
    Some(out)
}

impl Session {
    /// Answers a [`Local`] statement with a one-row result set. Returns false
    /// when no column template is known (the statement is then forwarded).
    pub(super) async fn answer_local(&mut self, seq: u8, what: Local) -> Result<bool, End> {
        let (def, value) = match what {
            Local::ConnectionId => (
                self.shared.templates.connection_id.clone(),
                u64::from(self.id),
            ),
            Local::FoundRows => (self.shared.templates.found_rows.clone(), self.found_rows),
        };
        let Some(def) = def else { return Ok(false) };
        let mut seq = seq;
        seq = self.client.write_packet(seq, &[1]);
        let def = crate::protocol::caps::column_def_for(&def, self.caps);
        seq = self.client.write_packet(seq, &def);
        let deprecate = self.caps.deprecate_eof();
        let mut b = BytesMut::with_capacity(16);
        if !deprecate {
            eof_payload(&mut b, 0, self.status);
            seq = self.client.write_packet(seq, &b);
            b.clear();
        }
        put_lenenc_bytes(&mut b, value.to_string().as_bytes());
        seq = self.client.write_packet(seq, &b);
        b.clear();
        if deprecate {
            OkPacket {
                header: EOF_HEADER,
                status: self.status,
                ..Default::default()
            }
            .write(&mut b, false);
        } else {
            eof_payload(&mut b, 0, self.status);
        }
        self.client.write_packet(seq, &b);
        self.client.flush().await?;
        // Like any one-row SELECT, this one sets FOUND_ROWS() to 1.
        self.found_rows = 1;
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies() {
        assert_eq!(
            classify(b"SELECT CONNECTION_ID()"),
            Some(Local::ConnectionId)
        );
        assert_eq!(
            classify(b"  select\n found_rows() ; "),
            Some(Local::FoundRows)
        );
        assert_eq!(classify(b"SELECT CONNECTION_ID() AS id"), None);
    }

    #[test]
    fn diagnostic_statements() {
        assert!(is_diagnostic(b"SHOW WARNINGS LIMIT 1,1"));
        assert!(is_diagnostic(b"show  count(*)  errors"));
        assert!(is_diagnostic(b"GET DIAGNOSTICS @n = NUMBER"));
        assert!(!is_diagnostic(b"SELECT 1"));
    }

    #[test]
    fn replaces_calls_only() {
        let o = crate::sql::LexOptions::default();
        assert_eq!(
            replace_connection_id(
                b"SELECT connection_id() AS id, 'CONNECTION_ID()' /* CONNECTION_ID() */",
                42,
                o
            )
            .as_deref(),
            Some(&b"SELECT 42 AS id, 'CONNECTION_ID()' /* CONNECTION_ID() */"[..])
        );
        assert_eq!(
            replace_connection_id(b"SELECT my_connection_id()", 1, o),
            None
        );
        assert_eq!(replace_connection_id(b"SELECT 1", 1, o), None);
        // Stored, not evaluated: the server's function stays.
        for q in [
            "CREATE VIEW v AS SELECT CONNECTION_ID() AS c",
            "CREATE TABLE t2 AS SELECT CONNECTION_ID() AS c",
            "CREATE PROCEDURE p() SELECT CONNECTION_ID()",
            "CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW SET NEW.c = CONNECTION_ID()",
        ] {
            assert_eq!(replace_connection_id(q.as_bytes(), 1, o), None, "{q}");
        }
    }
}
