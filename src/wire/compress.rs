//! The compressed protocol (CLIENT_COMPRESS, zlib) as a framing layer under
//! the ordinary packets: a stream of plain packets (headers included) is cut
//! into compressed frames `compressed length u24 | compressed sequence u8 |
//! uncompressed length u24 | payload`, where an uncompressed length of 0
//! means the payload is sent as it is (payloads under [`MIN_COMPRESS`]
//! bytes, or ones zlib cannot shrink). Frame boundaries need not match
//! packet boundaries.
//!
//! The compressed sequence runs separately from the packets' own: a command
//! starts at 0 and every frame of the answer continues from the last frame
//! received (see [`Zlib::reply_seq`]).

use bytes::{Buf, BufMut, BytesMut};
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

use super::WireError;

/// Length of a compressed frame's header.
pub const FRAME_HEADER: usize = 7;
/// Payloads shorter than this go uncompressed (as MySQL and MariaDB do).
pub const MIN_COMPRESS: usize = 50;
/// Largest payload (plain or compressed) of one frame.
pub const MAX_FRAME: usize = 0xFF_FFFF;

/// Compression state of one connection.
pub struct Zlib {
    deflate: Compress,
    inflate: Decompress,
    /// Compressed bytes read from the socket, not yet decoded.
    pub raw: BytesMut,
    /// Frames encoded, waiting to be written.
    pub out: BytesMut,
    scratch: Vec<u8>,
    /// The compressed sequence id of the next frame sent.
    seq: u8,
    /// Largest frame accepted (its plain size, compressed or not): the
    /// packet limit a peer must keep to ([`Self::set_frame_limit`]).
    frame_limit: usize,
}

impl std::fmt::Debug for Zlib {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Zlib")
            .field("raw", &self.raw.len())
            .field("out", &self.out.len())
            .field("seq", &self.seq)
            .finish()
    }
}

impl Default for Zlib {
    fn default() -> Self {
        Self::new()
    }
}

fn invalid(msg: &'static str) -> WireError {
    WireError::Io(std::io::Error::new(std::io::ErrorKind::InvalidData, msg))
}

impl Zlib {
    /// Fresh state (zlib's default level, as the servers use).
    pub fn new() -> Self {
        Self {
            deflate: Compress::new(Compression::default(), true),
            inflate: Decompress::new(true),
            raw: BytesMut::new(),
            out: BytesMut::new(),
            scratch: Vec::new(),
            seq: 0,
            frame_limit: MAX_FRAME,
        }
    }

    /// Refuses frames whose plain size is above `limit` (the packet limit
    /// plus a header), as the server refuses a compressed frame that would
    /// grow its buffer past `max_allowed_packet`: checked on the frame's
    /// header, before it is buffered whole or inflated.
    pub fn set_frame_limit(&mut self, limit: usize) {
        self.frame_limit = limit.min(MAX_FRAME);
    }

    /// Server side: the next frame sent continues from the last frame
    /// received (that is how the compressed sequence works for an answer).
    /// Client side: a command starts a new sequence at 0.
    pub fn reply_seq(&self) -> u8 {
        self.seq
    }

    /// Starts a new command (the client side's compressed sequence restarts).
    pub fn new_command(&mut self) {
        self.seq = 0;
    }

    /// Encodes `plain` (whole packets or parts of them) as frames into
    /// [`Self::out`].
    pub fn encode(&mut self, plain: &[u8]) -> Result<(), WireError> {
        for part in plain.chunks(MAX_FRAME) {
            let seq = self.seq;
            self.seq = self.seq.wrapping_add(1);
            if part.len() >= MIN_COMPRESS {
                self.scratch.clear();
                self.scratch.reserve(part.len() + part.len() / 1000 + 64);
                self.deflate.reset();
                loop {
                    let consumed = self.deflate.total_in() as usize;
                    let status = self
                        .deflate
                        .compress_vec(&part[consumed..], &mut self.scratch, FlushCompress::Finish)
                        .map_err(|_| invalid("zlib compression failed"))?;
                    if status == Status::StreamEnd {
                        break;
                    }
                    if self.scratch.len() >= part.len() {
                        // Incompressible: stop early, send it plain.
                        break;
                    }
                    self.scratch.reserve(part.len().max(64));
                }
                let done = self.deflate.total_in() as usize == part.len();
                if done && self.scratch.len() < part.len() {
                    put_u24(&mut self.out, self.scratch.len());
                    self.out.put_u8(seq);
                    put_u24(&mut self.out, part.len());
                    self.out.put_slice(&self.scratch);
                    continue;
                }
            }
            put_u24(&mut self.out, part.len());
            self.out.put_u8(seq);
            put_u24(&mut self.out, 0);
            self.out.put_slice(part);
        }
        Ok(())
    }

    /// Decodes the next complete frame in [`Self::raw`] that holds data
    /// into `plain` (skipping empty ones). Returns the number of plain bytes
    /// added (0: no complete frame buffered).
    ///
    /// One frame at a time: the reader inflates only what it needs next.
    /// Decoding every buffered frame let ~1 MiB of pipelined 16 KiB frames,
    /// each declaring 16 MiB of zeros, inflate ~1 GiB at once (issue 16,
    /// item 9); now at most one frame's worth (16 MiB) is inflated ahead of
    /// what the connection consumed.
    pub fn decode(&mut self, plain: &mut BytesMut) -> Result<usize, WireError> {
        let mut added = 0;
        while added == 0 && self.raw.len() >= FRAME_HEADER {
            let clen = u24(&self.raw[..3]);
            let seq = self.raw[3];
            let ulen = u24(&self.raw[4..7]);
            let plain_len = if ulen == 0 { clen } else { ulen };
            if plain_len > self.frame_limit {
                return Err(WireError::TooLarge);
            }
            if ulen != 0 && clen > max_deflated(ulen) {
                // More compressed bytes than any zlib stream of `ulen`
                // bytes needs: corrupt, refused before it is buffered.
                return Err(invalid("compressed packet of the wrong length"));
            }
            if self.raw.len() < FRAME_HEADER + clen {
                break;
            }
            let payload = &self.raw[FRAME_HEADER..FRAME_HEADER + clen];
            if ulen == 0 {
                plain.extend_from_slice(payload);
                added += clen;
            } else {
                // The uncompressed length bounds the output: a frame that
                // inflates to more (or less) is refused. Memory is reserved
                // for what the payload can inflate to at most, not for what
                // the header claims: a 10-byte frame announcing 16 MiB gets
                // ~10 KiB (and the "wrong length" error).
                let room = ulen.min(max_inflated(clen));
                let start = plain.len();
                plain.reserve(room);
                self.scratch.clear();
                self.scratch.reserve(room + 1);
                self.inflate.reset(true);
                let status = self
                    .inflate
                    .decompress_vec(payload, &mut self.scratch, FlushDecompress::Finish)
                    .map_err(|_| invalid("corrupt compressed packet"))?;
                if status != Status::StreamEnd || self.scratch.len() != ulen {
                    return Err(invalid("compressed packet of the wrong length"));
                }
                plain.extend_from_slice(&self.scratch);
                added += plain.len() - start;
            }
            self.raw.advance(FRAME_HEADER + clen);
            self.seq = seq.wrapping_add(1);
        }
        Ok(added)
    }

    /// Bytes held that the connection has not consumed.
    pub fn pending(&self) -> usize {
        self.raw.len()
    }

    /// Drops buffer memory while idle.
    pub fn release_idle(&mut self) {
        if self.raw.is_empty() {
            self.raw = BytesMut::new();
        }
        if self.out.is_empty() {
            self.out = BytesMut::new();
        }
        self.scratch = Vec::new();
    }
}

/// The most `clen` bytes of zlib data can inflate to: deflate's best ratio
/// is 1032:1 (a 258-byte match per 2 bits), plus slack for the header.
fn max_inflated(clen: usize) -> usize {
    clen.saturating_mul(1032).saturating_add(64)
}

/// The most zlib needs for `ulen` bytes (deflateBound, with room).
fn max_deflated(ulen: usize) -> usize {
    ulen.saturating_add(ulen / 1000).saturating_add(64)
}

fn u24(b: &[u8]) -> usize {
    usize::from(b[0]) | usize::from(b[1]) << 8 | usize::from(b[2]) << 16
}

fn put_u24(out: &mut BytesMut, n: usize) {
    out.put_slice(&[n as u8, (n >> 8) as u8, (n >> 16) as u8]);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `SELECT 1`'s answer from MariaDB 10.11 to a compressed client (frame
    /// sequence 1, 56 plain bytes), captured.
    const CAPTURED: &[u8] = &[
        0x34, 0x00, 0x00, 0x01, 0x38, 0x00, 0x00, 0x78, 0x9c, 0x63, 0x64, 0x60, 0x60, 0x64, 0x14,
        0x67, 0x60, 0x60, 0x62, 0x4e, 0x49, 0x4d, 0x63, 0x00, 0x72, 0x0c, 0x19, 0x78, 0xec, 0x19,
        0x18, 0x81, 0x2c, 0xe6, 0x46, 0x20, 0xc1, 0xc0, 0x0a, 0x64, 0xfc, 0x03, 0x4a, 0x03, 0x21,
        0x03, 0x0b, 0xa3, 0x21, 0x90, 0xcb, 0x0a, 0xe6, 0x02, 0x00, 0x79, 0x25, 0x04, 0x9b,
    ];

    #[test]
    fn a_frame_above_the_limit_is_refused_before_inflating() {
        let mut z = Zlib::new();
        z.set_frame_limit(1 << 20);
        // 16 bytes announcing 2 MiB: refused on the header, whatever the
        // payload (here not even zlib) and before it is all buffered.
        z.raw.extend_from_slice(&[16, 0, 0, 0, 0, 0, 0x20]);
        z.raw.extend_from_slice(&[0xAB; 8]);
        let mut plain = BytesMut::new();
        assert!(matches!(z.decode(&mut plain), Err(WireError::TooLarge)));
        assert!(plain.is_empty());
        // A plain frame the same.
        let mut z = Zlib::new();
        z.set_frame_limit(100);
        z.raw.extend_from_slice(&[101, 0, 0, 0, 0, 0, 0]);
        assert!(matches!(z.decode(&mut plain), Err(WireError::TooLarge)));
        // At the limit it passes.
        let mut w = Zlib::new();
        w.encode(&[b'a'; 100]).expect("encode");
        let mut z = Zlib::new();
        z.set_frame_limit(100);
        z.raw.extend_from_slice(&w.out);
        assert_eq!(z.decode(&mut plain).expect("at the limit"), 100);
        // A compressed length no zlib stream of that size needs.
        let mut z = Zlib::new();
        z.raw.extend_from_slice(&[0xFF, 0xFF, 0x0F, 0, 10, 0, 0]);
        assert!(z.decode(&mut plain).is_err());
    }

    #[test]
    fn decodes_a_captured_server_frame() {
        let mut z = Zlib::new();
        z.raw.extend_from_slice(CAPTURED);
        let mut plain = BytesMut::new();
        assert_eq!(z.decode(&mut plain).expect("decodes"), 56);
        assert_eq!(&plain[..5], &[1, 0, 0, 1, 1], "column count packet");
        assert_eq!(z.reply_seq(), 2, "next frame continues the sequence");
        assert!(z.raw.is_empty());
    }

    #[test]
    fn short_payloads_go_plain_long_ones_compressed() {
        let mut z = Zlib::new();
        let small = [5u8, 0, 0, 0, 3, b'S', b'E', b'L', b'1'];
        z.encode(&small).expect("encode");
        assert_eq!(&z.out[..7], &[9, 0, 0, 0, 0, 0, 0], "plain frame, seq 0");
        assert_eq!(&z.out[7..], &small);
        let big = vec![b'a'; 1000];
        z.out.clear();
        z.encode(&big).expect("encode");
        assert_eq!(z.out[3], 1, "sequence continues");
        assert_eq!(u24(&z.out[4..7]), 1000, "compressed: original length");
        assert!(u24(&z.out[..3]) < 100);
        // Round trip through a decoder.
        let mut d = Zlib::new();
        d.raw.extend_from_slice(&z.out);
        let mut plain = BytesMut::new();
        while d.decode(&mut plain).expect("decode") > 0 {}
        assert_eq!(&plain[..], &big[..]);
    }

    #[test]
    fn incompressible_data_goes_plain() {
        let mut z = Zlib::new();
        let mut x: u32 = 12345;
        let noise: Vec<u8> = (0..5000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect();
        z.encode(&noise).expect("encode");
        assert_eq!(u24(&z.out[4..7]), 0, "sent as it is");
        assert_eq!(&z.out[7..], &noise[..]);
    }

    #[test]
    fn frames_split_anywhere_and_large_data_spans_frames() {
        let data: Vec<u8> = (0..(MAX_FRAME + 5000)).map(|i| (i % 251) as u8).collect();
        let mut z = Zlib::new();
        z.encode(&data).expect("encode");
        let mut d = Zlib::new();
        let mut plain = BytesMut::new();
        // Feed in odd pieces: frames are decoded only once complete.
        for piece in z.out.chunks(7777) {
            d.raw.extend_from_slice(piece);
            while d.decode(&mut plain).expect("decode") > 0 {}
        }
        assert_eq!(plain.len(), data.len());
        assert!(plain[..] == data[..]);
        assert_eq!(d.reply_seq(), 2, "two frames");
    }

    #[test]
    fn lying_lengths_are_refused() {
        let mut z = Zlib::new();
        z.encode(&[b'x'; 200]).expect("encode");
        let mut frame = z.out.to_vec();
        frame[4] = 100; // claims 100 bytes, inflates to 200
        let mut d = Zlib::new();
        d.raw.extend_from_slice(&frame);
        assert!(d.decode(&mut BytesMut::new()).is_err());
        let mut d = Zlib::new();
        d.raw
            .extend_from_slice(&[5, 0, 0, 0, 9, 0, 0, 1, 2, 3, 4, 5]);
        assert!(d.decode(&mut BytesMut::new()).is_err(), "not zlib");
    }

    /// Found by `fuzz/compress` (malloc limit): a 12-byte frame announcing
    /// 16 MiB made the decoder reserve 32 MiB before looking at it.
    #[test]
    fn frames_are_inflated_one_at_a_time() {
        let mut e = Zlib::new();
        let data = vec![0u8; 4096];
        for _ in 0..3 {
            e.encode(&data).expect("encode");
        }
        let mut d = Zlib::new();
        d.raw.extend_from_slice(&e.out);
        let mut plain = BytesMut::new();
        assert_eq!(d.decode(&mut plain).expect("decode"), 4096);
        assert_eq!(plain.len(), 4096, "only the first frame is inflated");
        assert!(d.pending() > 0, "the others stay compressed");
        assert_eq!(d.decode(&mut plain).expect("decode"), 4096);
        assert_eq!(d.decode(&mut plain).expect("decode"), 4096);
        assert_eq!(d.decode(&mut plain).expect("decode"), 0);
        assert_eq!(plain.len(), 3 * 4096);
    }

    #[test]
    fn a_header_claim_does_not_reserve_memory() {
        let mut d = Zlib::new();
        d.raw
            .extend_from_slice(&[5, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0x78, 0x9c, 3, 0, 0]);
        let mut plain = BytesMut::new();
        assert!(d.decode(&mut plain).is_err(), "cannot inflate to 16 MiB");
        assert!(
            plain.capacity() < 64 * 1024,
            "reserved {}",
            plain.capacity()
        );
        assert!(
            d.scratch.capacity() < 64 * 1024,
            "reserved {}",
            d.scratch.capacity()
        );
    }
}
