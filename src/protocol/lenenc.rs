//! Length-encoded integers and strings, the protocol's variable-length
//! primitives. Readers return `None` on truncated input instead of panicking.

use bytes::{BufMut, BytesMut};

/// A cursor over a byte slice that never panics on short input.
#[derive(Debug, Clone, Copy)]
pub struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    /// Starts reading at the beginning of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf }
    }

    /// Bytes not read yet.
    pub fn rest(&self) -> &'a [u8] {
        self.buf
    }

    /// True when everything was read.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Reads `n` raw bytes.
    pub fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.buf.len() < n {
            return None;
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Some(head)
    }

    /// Reads one byte.
    pub fn u8(&mut self) -> Option<u8> {
        self.bytes(1).map(|b| b[0])
    }

    /// Reads a little-endian u16.
    pub fn u16(&mut self) -> Option<u16> {
        self.bytes(2).map(|b| u16::from_le_bytes([b[0], b[1]]))
    }

    /// Reads a little-endian u32.
    pub fn u32(&mut self) -> Option<u32> {
        self.bytes(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Reads a length-encoded integer.
    pub fn lenenc_int(&mut self) -> Option<u64> {
        match self.u8()? {
            x @ 0..=0xFA => Some(u64::from(x)),
            0xFC => self.u16().map(u64::from),
            0xFD => self
                .bytes(3)
                .map(|b| u64::from(b[0]) | u64::from(b[1]) << 8 | u64::from(b[2]) << 16),
            0xFE => self.bytes(8).map(|b| {
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                u64::from_le_bytes(a)
            }),
            _ => None,
        }
    }

    /// Reads a length-encoded string.
    pub fn lenenc_bytes(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.lenenc_int()?).ok()?;
        self.bytes(n)
    }

    /// Reads a NUL-terminated string (without the NUL).
    pub fn null_str(&mut self) -> Option<&'a [u8]> {
        let pos = self.buf.iter().position(|&b| b == 0)?;
        let s = &self.buf[..pos];
        self.buf = &self.buf[pos + 1..];
        Some(s)
    }
}

/// Writes a length-encoded integer.
pub fn put_lenenc_int(out: &mut BytesMut, v: u64) {
    match v {
        0..=0xFA => out.put_u8(v as u8),
        0xFB..=0xFFFF => {
            out.put_u8(0xFC);
            out.put_u16_le(v as u16);
        }
        0x1_0000..=0xFF_FFFF => {
            out.put_u8(0xFD);
            out.put_slice(&[v as u8, (v >> 8) as u8, (v >> 16) as u8]);
        }
        _ => {
            out.put_u8(0xFE);
            out.put_u64_le(v);
        }
    }
}

/// Writes a length-encoded string.
pub fn put_lenenc_bytes(out: &mut BytesMut, s: &[u8]) {
    put_lenenc_int(out, s.len() as u64);
    out.put_slice(s);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lenenc_roundtrip() {
        for v in [
            0u64,
            250,
            251,
            0xFFFF,
            0x1_0000,
            0xFF_FFFF,
            0x100_0000,
            u64::MAX,
        ] {
            let mut b = BytesMut::new();
            put_lenenc_int(&mut b, v);
            let mut r = Reader::new(&b);
            assert_eq!(r.lenenc_int(), Some(v));
            assert!(r.is_empty());
        }
    }

    #[test]
    fn truncated_input_is_none() {
        assert_eq!(Reader::new(&[0xFC, 1]).lenenc_int(), None);
        assert_eq!(Reader::new(&[0xFB]).lenenc_int(), None);
        assert_eq!(Reader::new(&[5, b'a']).lenenc_bytes(), None);
        assert_eq!(Reader::new(b"abc").null_str(), None);
    }
}
