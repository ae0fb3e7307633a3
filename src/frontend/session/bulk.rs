//! COM_STMT_BULK_EXECUTE (MariaDB, 0xFA): one prepared statement executed
//! for many rows of parameters. Routed like COM_STMT_EXECUTE: the client's
//! statement is prepared lazily on the backend it lands on, the id is
//! rewritten, and remembered parameter types are inserted for a backend
//! statement that has not seen them. The errors the server gives before it
//! looks at the statement (packet too short, capability not negotiated,
//! unknown statement) are answered here in the server's words.
//!
//! Layout: `0xFA | stmt_id u32 | flags u16 | [types 2n if flags & 0x80] |
//! rows of (indicator u8, value) per parameter`.

use super::{End, Session};
use crate::protocol::caps::mariadb;
use crate::protocol::errors;
use crate::protocol::packets::ErrPacket;
use crate::protocol::response::Shape;
use crate::wire::packet_io::Packet;

/// Bulk flag: the request carries the parameter types.
pub const SEND_TYPES_TO_SERVER: u16 = 0x80;

/// The parts of a bulk request the proxy reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bulk<'a> {
    /// Client statement id.
    pub stmt_id: u32,
    /// Bulk flags.
    pub flags: u16,
    /// The type block, when sent.
    pub types: Option<&'a [u8]>,
}

/// Parses the fixed head of a bulk request for a statement with
/// `num_params` parameters; `None` when it is shorter than the server
/// accepts (stmt id and flags).
pub fn parse(payload: &[u8], num_params: u16) -> Option<Bulk<'_>> {
    let head = payload.get(..7)?;
    let stmt_id = u32::from_le_bytes([head[1], head[2], head[3], head[4]]);
    let flags = u16::from_le_bytes([head[5], head[6]]);
    let types = if flags & SEND_TYPES_TO_SERVER != 0 {
        // A cut-off type block is left to the server to refuse.
        payload.get(7..7 + 2 * usize::from(num_params))
    } else {
        None
    };
    Some(Bulk {
        stmt_id,
        flags,
        types,
    })
}

/// The request for the backend: its statement id, and `insert_types` (with
/// the flag) when the client sent none but the backend statement needs them.
pub fn rewrite(payload: &[u8], backend_id: u32, insert_types: Option<&[u8]>) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + insert_types.map_or(0, <[u8]>::len));
    out.extend_from_slice(&payload[..7]);
    out[1..5].copy_from_slice(&backend_id.to_le_bytes());
    if let Some(t) = insert_types {
        let flags = u16::from_le_bytes([out[5], out[6]]) | SEND_TYPES_TO_SERVER;
        out[5..7].copy_from_slice(&flags.to_le_bytes());
        out.extend_from_slice(t);
    }
    out.extend_from_slice(&payload[7..]);
    out
}

fn unsupported() -> ErrPacket {
    ErrPacket::new(
        1295,
        "HY000",
        "This command is not supported in the prepared statement protocol yet",
    )
}

impl Session {
    /// COM_STMT_BULK_EXECUTE.
    pub(super) async fn stmt_bulk_execute(&mut self, pkt: &Packet) -> Result<(), End> {
        let seq = pkt.last_seq.wrapping_add(1);
        self.forget_stale_held();
        if pkt.payload.len() < 7 {
            return self.send_err(seq, &malformed()).await;
        }
        if !self.caps.has(mariadb::STMT_BULK_OPERATIONS) {
            return self.send_err(seq, &unsupported()).await;
        }
        let Some(client_id) = self.client_stmt_id(&pkt.payload) else {
            return self.send_err(seq, &malformed()).await;
        };
        let Some(cs) = self.stmts.get_mut(&client_id) else {
            let e = ErrPacket::new(
                1243,
                "HY000",
                format!(
                    "Unknown prepared statement handler ({client_id}) given to mysqld_stmt_execute"
                ),
            );
            return self.send_err(seq, &e).await;
        };
        let entry = cs.entry.clone();
        let Some(bulk) = parse(&pkt.payload, entry.num_params) else {
            return self.send_err(seq, &malformed()).await;
        };
        if let Some(t) = bulk.types
            && cs.types.as_deref() != Some(t)
        {
            cs.types = Some(std::sync::Arc::from(t));
        }
        let types = cs.types.clone();
        if !self.row_count_gate_prepared(seq, &entry).await? {
            return Ok(());
        }
        // Set once the statement is routed, as for COM_STMT_EXECUTE.
        let prime = self.prime_row_count.take();
        let Some(mut co) = self.checkout(seq).await? else {
            return Ok(());
        };
        for attempt in 0..2 {
            let Some((next, route)) = self
                .route_or_fail(co, client_id, &entry, seq, prime)
                .await?
            else {
                return Ok(());
            };
            co = next;
            // The shared backend statement remembers the types it was sent;
            // a statement of this client's own gets them again (always valid).
            let seen = !route.private
                && co
                    .backend
                    .stmts
                    .get_mut(entry.id)
                    .is_some_and(|s| s.types.as_deref() == types.as_deref());
            let insert = match (&bulk.types, &types) {
                (None, Some(t)) if !seen => Some(&t[..]),
                _ => None,
            };
            let payload = rewrite(&pkt.payload, route.id, insert);
            if !seen
                && !route.private
                && (bulk.types.is_some() || insert.is_some())
                && let Some(s) = co.backend.stmts.get_mut(entry.id)
            {
                s.types = types.clone();
            }
            // A statement holding a cursor or long data is not re-prepared
            // behind the client's back: the server's answer goes through.
            let intercept = (attempt == 0 && !route.held).then_some(errors::ER_NEED_REPREPARE);
            self.executing = Some(entry.clone());
            let Some((next, out)) = self
                .exchange(co, &payload, seq, Shape::Query, intercept)
                .await?
            else {
                self.forget_all_held();
                return Ok(());
            };
            co = next;
            let fresh_private = route.private && !route.held;
            if out.intercepted {
                let stale = if route.private {
                    Some(route.id)
                } else {
                    co.backend.stmts.remove(entry.id)
                };
                if let Some(id) = stale
                    && co.backend.close_stmt(id).await.is_err()
                {
                    return self.backend_broken(co);
                }
                continue;
            }
            // A statement prepared for this request alone (another of the
            // session's statements holds the shared one) is closed again.
            if fresh_private && co.backend.close_stmt(route.id).await.is_err() {
                return self.backend_broken(co);
            }
            self.sync_stmt_pins();
            self.finish(co.slot, co.backend);
            return Ok(());
        }
        self.sync_stmt_pins();
        self.finish(co.slot, co.backend);
        Ok(())
    }
}

fn malformed() -> ErrPacket {
    ErrPacket::new(1835, "HY000", "Malformed communication packet")
}

#[cfg(test)]
mod tests {
    use super::*;

    // Two rows for `INSERT INTO b VALUES (?, ?)` (INT, VARCHAR), with types:
    // fa | 01000000 | 8000 | 0300 fd00 | 00 01000000 00 02 'hi' | 00 02000000 01
    const WITH_TYPES: &[u8] = &[
        0xfa, 1, 0, 0, 0, 0x80, 0, 3, 0, 0xfd, 0, 0, 1, 0, 0, 0, 0, 2, b'h', b'i', 0, 2, 0, 0, 0, 1,
    ];

    #[test]
    fn parses_and_rewrites_the_id() {
        let b = parse(WITH_TYPES, 2).expect("bulk");
        assert_eq!(b.stmt_id, 1);
        assert_eq!(b.types, Some(&[3, 0, 0xfd, 0][..]));
        let out = rewrite(WITH_TYPES, 9, None);
        assert_eq!(&out[1..5], &9u32.to_le_bytes());
        assert_eq!(&out[5..], &WITH_TYPES[5..]);
        assert_eq!(parse(&WITH_TYPES[..6], 2), None);
    }

    #[test]
    fn inserts_remembered_types() {
        let mut no_types = WITH_TYPES[..7].to_vec();
        no_types[5] = 0;
        no_types.extend_from_slice(&WITH_TYPES[11..]);
        let b = parse(&no_types, 2).expect("bulk");
        assert_eq!(b.types, None);
        let out = rewrite(&no_types, 1, Some(&[3, 0, 0xfd, 0]));
        assert_eq!(out, WITH_TYPES, "same as the request that carried types");
    }
}
