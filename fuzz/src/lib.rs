//! Helpers shared by the fuzz targets: reading a fuzz input as the small
//! header fields and length-prefixed packets each target documents (the
//! seed generator `scripts/fuzz_corpus.py` writes the same layout), and
//! checking that a parsed field lies inside the input it came from.
//!
//! Layout words used by the targets:
//! - `u8`, `u16` (little endian), `u32` (little endian): missing bytes read
//!   as zero, so every input is valid.
//! - `packet`: `u16` prefix (bit 15: "continues in another chunk", bits
//!   0..15: length) and that many bytes (fewer when the input ends).

/// A cursor over a fuzz input.
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    data: &'a [u8],
}

impl<'a> Input<'a> {
    /// Starts at the beginning of `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Self { data }
    }

    /// The bytes not read yet.
    pub fn rest(&self) -> &'a [u8] {
        self.data
    }

    /// True when everything was read.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Takes up to `n` bytes.
    pub fn take(&mut self, n: usize) -> &'a [u8] {
        let (a, b) = self.data.split_at(n.min(self.data.len()));
        self.data = b;
        a
    }

    /// One byte (0 at the end).
    pub fn u8(&mut self) -> u8 {
        self.take(1).first().copied().unwrap_or(0)
    }

    /// A little-endian `u16` (missing bytes are 0).
    pub fn u16(&mut self) -> u16 {
        let b = self.take(2);
        u16::from(b.first().copied().unwrap_or(0)) | u16::from(b.get(1).copied().unwrap_or(0)) << 8
    }

    /// A little-endian `u32` (missing bytes are 0).
    pub fn u32(&mut self) -> u32 {
        u32::from(self.u16()) | u32::from(self.u16()) << 16
    }

    /// One `packet`: its bytes and the "continues" bit; `None` at the end.
    pub fn packet(&mut self) -> Option<(&'a [u8], bool)> {
        if self.is_empty() {
            return None;
        }
        let prefix = self.u16();
        Some((
            self.take(usize::from(prefix & 0x7FFF)),
            prefix & 0x8000 != 0,
        ))
    }
}

/// True when `part` is a sub-slice of `whole` (same memory), the check that
/// a parser returned a field of its input and read nothing beyond it.
pub fn within(part: &[u8], whole: &[u8]) -> bool {
    let (p, w) = (part.as_ptr() as usize, whole.as_ptr() as usize);
    part.is_empty() || (p >= w && p + part.len() <= w + whole.len())
}
