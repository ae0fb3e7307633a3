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

/// Replaces `CONNECTION_ID()` (any case, outside quotes and comments) with
/// `id`; `None` when the statement does not mention it.
pub fn replace_connection_id(sql: &[u8], id: u32) -> Option<Vec<u8>> {
    const NEEDLE: &[u8] = b"connection_id()";
    if !sql
        .windows(NEEDLE.len())
        .any(|w| w.eq_ignore_ascii_case(NEEDLE))
    {
        return None;
    }
    let lit = id.to_string();
    let mut out = Vec::with_capacity(sql.len());
    let mut i = 0;
    let mut quote: Option<u8> = None;
    let mut replaced = false;
    while i < sql.len() {
        let c = sql[i];
        if let Some(q) = quote {
            out.push(c);
            if c == b'\\' && q != b'`' && i + 1 < sql.len() {
                out.push(sql[i + 1]);
                i += 2;
                continue;
            }
            if c == q {
                quote = None;
            }
            i += 1;
            continue;
        }
        if matches!(c, b'\'' | b'"' | b'`') {
            quote = Some(c);
            out.push(c);
            i += 1;
            continue;
        }
        let word_start = i == 0 || !(sql[i - 1].is_ascii_alphanumeric() || sql[i - 1] == b'_');
        if word_start
            && sql.len() - i >= NEEDLE.len()
            && sql[i..i + NEEDLE.len()].eq_ignore_ascii_case(NEEDLE)
        {
            out.extend_from_slice(lit.as_bytes());
            i += NEEDLE.len();
            replaced = true;
            continue;
        }
        out.push(c);
        i += 1;
    }
    replaced.then_some(out)
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
    fn replaces_outside_quotes() {
        assert_eq!(
            replace_connection_id(b"SELECT connection_id() AS id, 'CONNECTION_ID()'", 42)
                .as_deref(),
            Some(&b"SELECT 42 AS id, 'CONNECTION_ID()'"[..])
        );
        assert_eq!(replace_connection_id(b"SELECT my_connection_id()", 1), None);
        assert_eq!(replace_connection_id(b"SELECT 1", 1), None);
    }
}
