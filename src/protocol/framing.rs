//! Wire framing: the 4-byte packet header (`len: u24`, `seq: u8`) and the
//! splitting of logical packets into 0xFFFFFF-byte chunks.
//!
//! Pure functions over byte slices; no I/O. A logical packet whose payload is
//! a multiple of [`MAX_CHUNK`] ends with an empty chunk, so a reader knows a
//! packet is complete at the first chunk shorter than [`MAX_CHUNK`].

use bytes::{BufMut, BytesMut};

/// Length of a chunk header.
pub const HEADER_LEN: usize = 4;
/// Largest payload a single chunk carries; a chunk of exactly this size means
/// "the logical packet continues in the next chunk".
pub const MAX_CHUNK: usize = 0xFF_FFFF;

/// Header of one wire chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkHeader {
    /// Payload bytes in this chunk.
    pub len: usize,
    /// Sequence id.
    pub seq: u8,
}

impl ChunkHeader {
    /// True when another chunk of the same logical packet follows.
    pub fn continues(&self) -> bool {
        self.len == MAX_CHUNK
    }
}

/// Parses a chunk header from the first four bytes of `buf`.
pub fn parse_header(buf: &[u8]) -> Option<ChunkHeader> {
    if buf.len() < HEADER_LEN {
        return None;
    }
    Some(ChunkHeader {
        len: buf[0] as usize | (buf[1] as usize) << 8 | (buf[2] as usize) << 16,
        seq: buf[3],
    })
}

/// Writes a chunk header.
pub fn put_header(out: &mut BytesMut, len: usize, seq: u8) {
    debug_assert!(len <= MAX_CHUNK);
    out.put_slice(&[len as u8, (len >> 8) as u8, (len >> 16) as u8, seq]);
}

/// Appends `payload` to `out` as one logical packet starting at sequence id
/// `seq`, splitting at [`MAX_CHUNK`] (with the trailing empty chunk when the
/// payload is an exact multiple). Returns the sequence id for the next packet.
pub fn write_packet(out: &mut BytesMut, mut seq: u8, payload: &[u8]) -> u8 {
    out.reserve(payload.len() + HEADER_LEN * (1 + payload.len() / MAX_CHUNK));
    let mut rest = payload;
    loop {
        let n = rest.len().min(MAX_CHUNK);
        put_header(out, n, seq);
        out.put_slice(&rest[..n]);
        seq = seq.wrapping_add(1);
        rest = &rest[n..];
        if n < MAX_CHUNK {
            return seq;
        }
    }
}

/// Length of the complete logical packet at the start of `buf` (headers
/// included), or `None` when more bytes are needed.
pub fn complete_packet_len(buf: &[u8]) -> Option<usize> {
    let mut off = 0;
    loop {
        let h = parse_header(&buf[off..])?;
        let end = off + HEADER_LEN + h.len;
        if buf.len() < end {
            return None;
        }
        off = end;
        if !h.continues() {
            return Some(off);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_roundtrip() {
        let mut b = BytesMut::new();
        put_header(&mut b, 0x01_0203, 7);
        assert_eq!(&b[..], &[0x03, 0x02, 0x01, 7]);
        assert_eq!(
            parse_header(&b),
            Some(ChunkHeader {
                len: 0x01_0203,
                seq: 7
            })
        );
        assert_eq!(parse_header(&b[..3]), None);
    }

    #[test]
    fn small_packet_is_one_chunk() {
        let mut b = BytesMut::new();
        let next = write_packet(&mut b, 0, b"\x03SELECT 1");
        assert_eq!(next, 1);
        assert_eq!(&b[..4], &[9, 0, 0, 0]);
        assert_eq!(complete_packet_len(&b), Some(13));
        assert_eq!(complete_packet_len(&b[..12]), None);
    }

    #[test]
    fn exact_multiple_gets_empty_trailer() {
        let payload = vec![0xAB; MAX_CHUNK];
        let mut b = BytesMut::new();
        let next = write_packet(&mut b, 5, &payload);
        assert_eq!(next, 7);
        assert_eq!(b.len(), MAX_CHUNK + 8);
        assert_eq!(&b[..4], &[0xFF, 0xFF, 0xFF, 5]);
        assert_eq!(&b[MAX_CHUNK + 4..], &[0, 0, 0, 6]);
        assert_eq!(complete_packet_len(&b), Some(b.len()));
        // Without the trailer the packet is not complete.
        assert_eq!(complete_packet_len(&b[..MAX_CHUNK + 4]), None);
    }

    #[test]
    fn large_packet_splits() {
        let payload = vec![1u8; MAX_CHUNK + 10];
        let mut b = BytesMut::new();
        let next = write_packet(&mut b, 255, &payload);
        assert_eq!(next, 1, "sequence ids wrap");
        assert_eq!(&b[MAX_CHUNK + 4..MAX_CHUNK + 8], &[10, 0, 0, 0]);
        assert_eq!(complete_packet_len(&b), Some(payload.len() + 8));
    }
}
