//! COM_STMT_EXECUTE and friends at the byte level: reading the statement id
//! and parameter-type block, and rewriting the id (and inserting remembered
//! types) for the backend statement the request is routed to.
//!
//! Layout (no QUERY_ATTRIBUTES, which myplex does not offer):
//! `0x17 | stmt_id u32 | flags u8 | iterations u32 | [null_bitmap ((n+7)/8) |
//! new_params_bound u8 | [types 2n] | values]`, the bracket only when n > 0.

/// Cursor flag: open a read-only cursor.
pub const CURSOR_TYPE_READ_ONLY: u8 = 0x01;

/// What the proxy reads out of an execute request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Execute<'a> {
    /// Client statement id.
    pub stmt_id: u32,
    /// Cursor flags.
    pub flags: u8,
    /// The type block when the client (re)bound parameters.
    pub types: Option<&'a [u8]>,
    /// Offset of the new-params-bound byte (when n > 0).
    bound_at: Option<usize>,
}

impl Execute<'_> {
    /// A read-only cursor was requested.
    pub fn wants_cursor(&self) -> bool {
        self.flags & CURSOR_TYPE_READ_ONLY != 0
    }
}

/// Reads the statement id of any COM_STMT_* request (bytes 1..5).
pub fn stmt_id(payload: &[u8]) -> Option<u32> {
    payload
        .get(1..5)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// Parses an execute request for a statement with `num_params` parameters.
pub fn parse(payload: &[u8], num_params: u16) -> Option<Execute<'_>> {
    let stmt_id = stmt_id(payload)?;
    let flags = *payload.get(5)?;
    payload.get(6..10)?;
    if num_params == 0 {
        return Some(Execute {
            stmt_id,
            flags,
            types: None,
            bound_at: None,
        });
    }
    let n = usize::from(num_params);
    let bound_at = 10 + n.div_ceil(8);
    let bound = *payload.get(bound_at)?;
    let types = if bound == 1 {
        Some(payload.get(bound_at + 1..bound_at + 1 + 2 * n)?)
    } else {
        None
    };
    Some(Execute {
        stmt_id,
        flags,
        types,
        bound_at: Some(bound_at),
    })
}

/// True when the request claims new parameter types but the type block is
/// cut off (the server calls that a malformed packet).
pub fn types_truncated(payload: &[u8], num_params: u16) -> bool {
    if num_params == 0 {
        return false;
    }
    let n = usize::from(num_params);
    let bound_at = 10 + n.div_ceil(8);
    payload.get(bound_at) == Some(&1) && payload.len() < bound_at + 1 + 2 * n
}

/// Builds the request for the backend: `backend_id` in place of the client
/// id, and `insert_types` added (with the bound flag set) when the client
/// did not send types but the backend statement has not seen these.
pub fn rewrite(
    payload: &[u8],
    exec: &Execute<'_>,
    backend_id: u32,
    insert_types: Option<&[u8]>,
) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + insert_types.map_or(0, <[u8]>::len));
    match (exec.bound_at, insert_types) {
        (Some(at), Some(types)) if exec.types.is_none() => {
            out.extend_from_slice(&payload[..at]);
            out.push(1);
            out.extend_from_slice(types);
            out.extend_from_slice(&payload[at + 1..]);
        }
        _ => out.extend_from_slice(payload),
    }
    out[1..5].copy_from_slice(&backend_id.to_le_bytes());
    out
}

/// Replaces the statement id of a COM_STMT_{FETCH,RESET,CLOSE,SEND_LONG_DATA}.
pub fn with_id(payload: &[u8], backend_id: u32) -> Vec<u8> {
    let mut out = payload.to_vec();
    if out.len() >= 5 {
        out[1..5].copy_from_slice(&backend_id.to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    // EXECUTE of a 2-parameter statement, id 7, bound with LONG + VAR_STRING:
    // 17 | 07000000 | 00 | 01000000 | bitmap 00 | bound 01 | 0800 fd00 | values
    const BOUND: &[u8] = &[
        0x17, 7, 0, 0, 0, 0, 1, 0, 0, 0, 0x00, 0x01, 0x08, 0x00, 0xfd, 0x00, 1, 0, 0, 0, 0, 0, 0,
        0, 2, b'h', b'i',
    ];

    #[test]
    fn parses_bound_types() {
        let e = parse(BOUND, 2).expect("parse");
        assert_eq!(e.stmt_id, 7);
        assert_eq!(e.types, Some(&[0x08, 0x00, 0xfd, 0x00][..]));
        assert!(!e.wants_cursor());
        let out = rewrite(BOUND, &e, 0x0102_0304, Some(&[1, 2, 3, 4]));
        assert_eq!(&out[1..5], &[4, 3, 2, 1]);
        assert_eq!(&out[5..], &BOUND[5..], "types already present are kept");
    }

    #[test]
    fn inserts_remembered_types() {
        let mut unbound = BOUND[..12].to_vec();
        unbound[11] = 0;
        unbound.extend_from_slice(&BOUND[16..]);
        let e = parse(&unbound, 2).expect("parse");
        assert_eq!(e.types, None);
        let out = rewrite(&unbound, &e, 9, Some(&[0x08, 0x00, 0xfd, 0x00]));
        let mut want = BOUND.to_vec();
        want[1..5].copy_from_slice(&9u32.to_le_bytes());
        assert_eq!(out, want);
    }

    #[test]
    fn no_params_and_truncation() {
        let p = [0x17, 1, 0, 0, 0, 1, 1, 0, 0, 0];
        let e = parse(&p, 0).expect("parse");
        assert!(e.wants_cursor());
        assert_eq!(rewrite(&p, &e, 5, None)[1..5], [5, 0, 0, 0]);
        assert_eq!(parse(&p[..7], 0), None);
        assert_eq!(parse(&p, 3), None, "missing bitmap");
        assert_eq!(parse(&BOUND[..13], 2), None, "truncated types");
    }
}
