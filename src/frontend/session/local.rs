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

/// The select-list text of a [`Local`] statement as the client wrote it
/// (what the server names the column): after `SELECT`, without the
/// surrounding whitespace and trailing semicolons.
fn expression_text(sql: &[u8]) -> &[u8] {
    let start = sql
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .map_or(sql.len(), |i| i + b"select".len())
        .min(sql.len());
    let rest = &sql[start..];
    let rest = &rest[rest
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .unwrap_or(rest.len())..];
    let end = rest
        .iter()
        .rposition(|c| !c.is_ascii_whitespace() && *c != b';')
        .map_or(0, |i| i + 1);
    &rest[..end]
}

/// A column definition (protocol 4.1) with its `name` field replaced;
/// `None` when `def` is malformed.
fn renamed_column(def: &[u8], name: &[u8]) -> Option<Vec<u8>> {
    let mut r = crate::protocol::lenenc::Reader::new(def);
    // catalog, schema, table, org_table precede the name.
    for _ in 0..4 {
        r.lenenc_bytes()?;
    }
    let name_at = def.len() - r.rest().len();
    r.lenenc_bytes()?;
    let after = def.len() - r.rest().len();
    let mut out = Vec::with_capacity(def.len() + name.len());
    out.extend_from_slice(&def[..name_at]);
    let mut b = BytesMut::new();
    put_lenenc_bytes(&mut b, name);
    out.extend_from_slice(&b);
    out.extend_from_slice(&def[after..]);
    Some(out)
}

/// What `FOUND_ROWS()` returns after a statement (its text) that sent
/// `rows` rows in its last result set, when the proxy can know it: the rows
/// sent, plus the rows skipped by a literal `LIMIT` offset of the outer
/// query (the server counts them). `None` when it cannot be known from
/// outside: an offset from a placeholder or variable, an offset past the
/// last row (the server then counts the rows that matched), offsets inside
/// UNION / EXCEPT / INTERSECT parts.
pub fn found_rows_after(stmt: &[u8], rows: u64, opts: crate::sql::LexOptions) -> Option<u64> {
    if !stmt.windows(5).any(|w| w.eq_ignore_ascii_case(b"limit")) {
        return Some(rows);
    }
    let toks: Vec<_> = crate::sql::lexer::Lexer::new(stmt, opts).collect();
    let word = |i: usize, w: &[u8]| toks.get(i).is_some_and(|t| t.is_word(stmt, w));
    let number = |i: usize| {
        toks.get(i)
            .filter(|t| t.kind == crate::sql::lexer::TokenKind::Number)
            .and_then(|t| std::str::from_utf8(t.text(stmt)).ok()?.parse::<u64>().ok())
    };
    let mut depth = 0u32;
    let mut set_op = false;
    let mut inner_offset = false;
    let mut outer: Option<Option<u64>> = None;
    for (i, t) in toks.iter().enumerate() {
        if t.is_symbol(stmt, b"(") {
            depth += 1;
        } else if t.is_symbol(stmt, b")") {
            depth = depth.saturating_sub(1);
        } else if word(i, b"union") || word(i, b"except") || word(i, b"intersect") {
            set_op = true;
        } else if word(i, b"limit") && !word(i + 1, b"rows") {
            let offset = if toks.get(i + 2).is_some_and(|t| t.is_symbol(stmt, b",")) {
                Some(number(i + 1))
            } else if word(i + 2, b"offset") {
                Some(number(i + 3))
            } else {
                None
            };
            if let Some(o) = offset {
                if depth == 0 {
                    outer = Some(o);
                } else {
                    inner_offset = true;
                }
            }
        }
    }
    if set_op && (inner_offset || outer.is_some()) {
        return None;
    }
    match outer {
        None => Some(rows),
        Some(Some(o)) if rows > 0 => Some(o.saturating_add(rows)),
        Some(_) => None,
    }
}

impl Session {
    /// Answers a [`Local`] statement (`sql`, as the client sent it) with a
    /// one-row result set whose column is named as the client wrote the
    /// expression. Returns false when no column template is known (the
    /// statement is then forwarded).
    pub(super) async fn answer_local(
        &mut self,
        seq: u8,
        what: Local,
        sql: &[u8],
    ) -> Result<bool, End> {
        let (def, value) = match what {
            Local::ConnectionId => (
                self.shared.templates.connection_id.clone(),
                u64::from(self.id),
            ),
            Local::FoundRows => (self.shared.templates.found_rows.clone(), self.found_rows),
        };
        let Some(def) = def.and_then(|d| renamed_column(&d, expression_text(sql))) else {
            return Ok(false);
        };
        let mut seq = seq;
        let mut b = BytesMut::with_capacity(16);
        crate::frontend::metadata_cache::put_column_count(&mut b, 1, self.caps);
        seq = self.client.write_packet(seq, &b);
        b.clear();
        let def = crate::protocol::caps::column_def_for(&def, self.caps);
        seq = self.client.write_packet(seq, &def);
        let deprecate = self.caps.deprecate_eof();
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
    fn found_rows_as_the_server_counts() {
        // Measured on MariaDB 10.11 (8 rows in fr).
        let f = |q: &str, rows| found_rows_after(q.as_bytes(), rows, Default::default());
        assert_eq!(f("select a from fr", 8), Some(8));
        assert_eq!(f("select a from fr limit 3", 3), Some(3));
        assert_eq!(f("select a from fr limit 2,3", 3), Some(5));
        assert_eq!(f("select a from fr limit 3 offset 6", 2), Some(8));
        assert_eq!(f("select a from fr order by a desc LIMIT 2, 3", 3), Some(5));
        assert_eq!(
            f("select * from (select a from fr limit 5) t limit 1", 1),
            Some(1)
        );
        assert_eq!(
            f("select * from (select a from fr limit 1, 5) t", 5),
            Some(5)
        );
        // Not knowable from outside.
        assert_eq!(f("select a from fr limit 10,3", 0), None);
        assert_eq!(f("select a from fr limit ?, 3", 3), None);
        assert_eq!(
            f(
                "(select a from fr limit 1,2) union all (select a from fr limit 1)",
                3
            ),
            None
        );
        // LIMIT ROWS EXAMINED is not a row limit; a string is not a clause.
        assert_eq!(f("select a from fr limit rows examined 5", 8), Some(8));
        assert_eq!(f("select 'limit 2,3'", 1), Some(1));
    }

    #[test]
    fn column_named_as_written() {
        assert_eq!(
            expression_text(b"  select  found_rows() ; "),
            b"found_rows()"
        );
        assert_eq!(expression_text(b"SELECT\nFOUND_ROWS( )"), b"FOUND_ROWS( )");
        // catalog "def", empty schema/table/org_table, name, org_name "", rest.
        let mut def = vec![3, b'd', b'e', b'f', 0, 0, 0, 12];
        def.extend_from_slice(b"FOUND_ROWS()");
        def.extend_from_slice(&[0, 0x0c, 0x3f, 0, 21, 0, 0, 0, 8, 0x81, 0, 0, 0, 0]);
        let r = renamed_column(&def, b"found_rows()").expect("well-formed");
        assert_eq!(r.len(), def.len());
        assert_eq!(&r[8..20], b"found_rows()");
        assert_eq!(&r[20..], &def[20..]);
        assert!(renamed_column(&[3, b'd'], b"x").is_none());
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
