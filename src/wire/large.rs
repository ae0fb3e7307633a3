//! Packets of 16 MiB or more without holding them whole: a command's
//! first bytes are read ([`PacketIo::read_command`]), the rest is moved to
//! another connection, a buffer or nowhere in pieces of at most [`PIECE`]
//! bytes ([`PacketIo::pump_large`]), and a chunk body can be passed on the
//! same way ([`PacketIo::pass`]). Sizes are checked against the limit as
//! each header arrives, as for whole packets.

use bytes::{Buf, BytesMut};

use super::packet_io::{Packet, PacketIo, WireError};
use crate::protocol::framing::{self, HEADER_LEN};

/// What [`PacketIo::read_command`] read: a whole packet, or the start of
/// one of 16 MiB or more (the rest is still on the socket).
#[derive(Debug)]
pub enum Incoming {
    /// A complete logical packet.
    Whole(Packet),
    /// The start of a multi-chunk packet.
    Large(LargeStart),
}

/// The start of a packet of 16 MiB or more: its first bytes and where
/// reading stands. Forward, collect or discard the rest with
/// [`PacketIo::pump_large`].
#[derive(Debug)]
pub struct LargeStart {
    /// Sequence id of the first chunk.
    pub seq: u8,
    /// The first bytes of the payload.
    pub prefix: BytesMut,
    /// Bytes of the current chunk not read yet.
    left: usize,
    /// Sequence id of the last chunk header read.
    last_seq: u8,
    /// Payload bytes announced by the headers read so far.
    total: usize,
    /// Another chunk follows the current one.
    more: bool,
}

impl LargeStart {
    /// Queues the first chunk's header and the prefix on `to` (the rest of
    /// the chunk follows with [`PacketIo::pump_large`]).
    pub fn write_start(&self, to: &mut PacketIo) {
        framing::put_header(&mut to.wbuf, framing::MAX_CHUNK, self.seq);
        to.wbuf.extend_from_slice(&self.prefix);
    }
}

/// Where the rest of a large packet goes.
pub enum Sink<'a> {
    /// Written to another connection as it arrives (headers included).
    Forward(&'a mut PacketIo),
    /// Appended to a payload (headers stripped).
    Collect(&'a mut BytesMut),
    /// Read and dropped.
    Discard,
    /// Like `Forward`, each piece first shown to the guard: a piece it
    /// refuses is not written and the pump stops with
    /// [`PumpError::Refused`] (the other side then holds part of a packet
    /// and must be closed, so the packet is never complete there).
    Guarded(&'a mut PacketIo, &'a mut (dyn Guard + Send)),
}

/// Looks at a large packet's pieces before they are forwarded.
pub trait Guard {
    /// Whether `piece` may go on; `last` for the packet's last piece.
    fn allow(&mut self, piece: &[u8], last: bool) -> bool;
}

/// Why pumping a large packet stopped.
#[derive(Debug, thiserror::Error)]
pub enum PumpError {
    /// Reading from the sending side failed.
    #[error("reading: {0}")]
    Read(WireError),
    /// Writing to the forwarding side failed.
    #[error("forwarding: {0}")]
    Write(WireError),
    /// The packet grew past the limit; the crossing chunk's header stays
    /// unread.
    #[error("packet larger than max_allowed_packet")]
    TooLarge,
    /// The guard of a [`Sink::Guarded`] refused a piece; the rest of the
    /// current chunk stays unread.
    #[error("refused by the guard")]
    Refused,
}

/// Large packets pass through in pieces of at most this size.
pub const PIECE: usize = 256 * 1024;

impl PacketIo {
    /// Reads a command: a whole packet, or, for one of 16 MiB or more, its
    /// first `prefix` bytes only (see [`LargeStart`]). The first chunk must
    /// carry sequence id `seq` when given; sizes are checked against
    /// `max_len` as in [`Self::read_packet_seq`].
    pub async fn read_command(
        &mut self,
        max_len: usize,
        seq: Option<u8>,
        prefix: usize,
    ) -> Result<Incoming, WireError> {
        let first = self.next_header().await?;
        if seq.is_some_and(|s| s != first.seq) {
            return Err(WireError::OutOfOrder);
        }
        if first.len > max_len {
            return Err(WireError::TooLarge);
        }
        if !first.continues() {
            return self
                .read_packet_seq(max_len, seq)
                .await
                .map(Incoming::Whole);
        }
        self.rbuf.advance(HEADER_LEN);
        let want = prefix.min(first.len);
        let mut p = BytesMut::with_capacity(want);
        while p.len() < want {
            if self.rbuf.is_empty() {
                self.fill(want - p.len()).await?;
            }
            let k = (want - p.len()).min(self.rbuf.len());
            p.extend_from_slice(&self.rbuf[..k]);
            self.rbuf.advance(k);
        }
        Ok(Incoming::Large(LargeStart {
            seq: first.seq,
            prefix: p,
            left: first.len - want,
            last_seq: first.seq,
            total: first.len,
            more: true,
        }))
    }

    /// Moves the rest of a large packet to `sink` in pieces of at most
    /// [`PIECE`] bytes (no buffer ever holds a whole chunk); returns the
    /// sequence id of its last chunk.
    pub async fn pump_large(
        &mut self,
        l: &mut LargeStart,
        max_len: usize,
        mut sink: Sink<'_>,
    ) -> Result<u8, PumpError> {
        loop {
            let mut n = std::mem::take(&mut l.left);
            let passed = self.pass_piece(&mut n, &mut sink, !l.more).await;
            // What was not passed stays to be read (or drained).
            l.left = n;
            passed?;
            if !l.more {
                if let Sink::Forward(to) | Sink::Guarded(to, _) = &mut sink {
                    to.flush().await.map_err(PumpError::Write)?;
                }
                self.shrink_read_buffer();
                return Ok(l.last_seq);
            }
            let h = self.next_header().await.map_err(PumpError::Read)?;
            if h.seq != l.last_seq.wrapping_add(1) {
                return Err(PumpError::Read(WireError::OutOfOrder));
            }
            if l.total + h.len > max_len {
                return Err(PumpError::TooLarge);
            }
            self.rbuf.advance(HEADER_LEN);
            if let Sink::Forward(to) | Sink::Guarded(to, _) = &mut sink {
                framing::put_header(&mut to.wbuf, h.len, h.seq);
            }
            l.left = h.len;
            l.total += h.len;
            l.last_seq = h.seq;
            l.more = h.continues();
        }
    }

    /// Moves the next `n` bytes (a chunk body whose header was read) to
    /// `sink`, in pieces of at most [`PIECE`] bytes.
    pub async fn pass(&mut self, mut n: usize, sink: &mut Sink<'_>) -> Result<(), PumpError> {
        self.pass_piece(&mut n, sink, true).await
    }

    /// [`Self::pass`], counting `n` down as bytes go; `last` when these are
    /// the packet's last bytes.
    async fn pass_piece(
        &mut self,
        n: &mut usize,
        sink: &mut Sink<'_>,
        last: bool,
    ) -> Result<(), PumpError> {
        if *n == 0
            && last
            && let Sink::Guarded(_, guard) = sink
            && !guard.allow(&[], true)
        {
            return Err(PumpError::Refused);
        }
        while *n > 0 {
            if self.rbuf.is_empty() {
                self.fill((*n).min(PIECE)).await.map_err(PumpError::Read)?;
            }
            let k = (*n).min(self.rbuf.len());
            let forward_to = match sink {
                Sink::Guarded(to, guard) => {
                    if !guard.allow(&self.rbuf[..k], last && k == *n) {
                        return Err(PumpError::Refused);
                    }
                    Some(to)
                }
                Sink::Forward(to) => Some(to),
                Sink::Collect(out) => {
                    out.extend_from_slice(&self.rbuf[..k]);
                    None
                }
                Sink::Discard => None,
            };
            if let Some(to) = forward_to {
                to.wbuf.extend_from_slice(&self.rbuf[..k]);
                if to.wbuf.len() >= PIECE {
                    to.flush().await.map_err(PumpError::Write)?;
                }
            }
            self.rbuf.advance(k);
            *n -= k;
        }
        Ok(())
    }

    /// Drops the buffered chunk header (from [`Self::next_header`]) so the
    /// body can be moved with [`Self::pass`].
    pub fn skip_header(&mut self) {
        self.rbuf.advance(HEADER_LEN.min(self.rbuf.len()));
    }

    /// Reads the rest of a large packet into one [`Packet`] (for commands
    /// that are not forwarded as they arrive).
    pub async fn complete_large(
        &mut self,
        mut l: LargeStart,
        max_len: usize,
    ) -> Result<Packet, WireError> {
        let mut payload = std::mem::take(&mut l.prefix);
        let last = self
            .pump_large(&mut l, max_len, Sink::Collect(&mut payload))
            .await
            .map_err(|e| match e {
                PumpError::Read(e) | PumpError::Write(e) => e,
                PumpError::TooLarge | PumpError::Refused => WireError::TooLarge,
            })?;
        Ok(Packet {
            seq: l.seq,
            last_seq: last,
            payload,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Stream;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::{TcpListener, TcpStream};

    /// A connected pair of loopback sockets.
    async fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let a = TcpStream::connect(l.local_addr().expect("addr"))
            .await
            .expect("connect");
        let (b, _) = l.accept().await.expect("accept");
        (a, b)
    }

    fn framed(payload: &[u8]) -> Vec<u8> {
        let mut b = BytesMut::new();
        framing::write_packet(&mut b, 0, payload);
        b.to_vec()
    }

    fn payload(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i % 251) as u8).collect()
    }

    #[tokio::test]
    async fn large_packets_are_forwarded_in_pieces_and_exactly() {
        let (mut client, proxy_in) = pair().await;
        let (proxy_out, mut server) = pair().await;
        let p = payload(2 * framing::MAX_CHUNK + 1000);
        let wire = framed(&p);
        let expect = wire.clone();
        let writer = tokio::spawn(async move { client.write_all(&wire).await });
        let reader = tokio::spawn(async move {
            let mut got = vec![0u8; expect.len()];
            server.read_exact(&mut got).await.map(|_| got == expect)
        });
        let mut rx = PacketIo::new(Stream::Plain(proxy_in)).with_read_step(4096);
        let mut tx = PacketIo::new(Stream::Plain(proxy_out));
        let Incoming::Large(mut l) = rx
            .read_command(64 << 20, Some(0), 1000)
            .await
            .expect("read")
        else {
            panic!("a multi-chunk packet is large")
        };
        assert_eq!(&l.prefix[..], &p[..1000]);
        l.write_start(&mut tx);
        let last = rx
            .pump_large(&mut l, 64 << 20, Sink::Forward(&mut tx))
            .await
            .expect("pump");
        assert_eq!(last, 2, "three chunks");
        assert!(rx.rbuf.capacity() <= 2 * PIECE, "{}", rx.rbuf.capacity());
        assert!(tx.wbuf.capacity() <= 2 * PIECE, "{}", tx.wbuf.capacity());
        writer.await.expect("join").expect("write");
        assert!(reader.await.expect("join").expect("read"), "bytes differ");
    }

    #[tokio::test]
    async fn a_large_packet_past_the_limit_stops_at_the_crossing_header() {
        let (mut client, proxy_in) = pair().await;
        let p = payload(framing::MAX_CHUNK + 10);
        let wire = framed(&p);
        let writer = tokio::spawn(async move { client.write_all(&wire).await });
        let mut rx = PacketIo::new(Stream::Plain(proxy_in));
        let Incoming::Large(mut l) = rx
            .read_command(framing::MAX_CHUNK + 5, Some(0), 100)
            .await
            .expect("read")
        else {
            panic!("large")
        };
        let r = rx
            .pump_large(&mut l, framing::MAX_CHUNK + 5, Sink::Discard)
            .await;
        assert!(matches!(r, Err(PumpError::TooLarge)), "{r:?}");
        // The crossing chunk's header is still there (its seq answers).
        assert_eq!(rx.next_header().await.expect("header").seq, 1);
        writer.await.expect("join").expect("write");
        // A small packet is read whole.
        let (mut c2, in2) = pair().await;
        c2.write_all(&framed(b"\x03SELECT 1")).await.expect("write");
        let mut rx = PacketIo::new(Stream::Plain(in2));
        match rx.read_command(1 << 20, Some(0), 100).await.expect("read") {
            Incoming::Whole(p) => assert_eq!(&p.payload[..], b"\x03SELECT 1"),
            Incoming::Large(_) => panic!("small packet is whole"),
        }
    }
}
