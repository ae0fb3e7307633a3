//! Buffered packet I/O over a [`Stream`]: chunk-level access for forwarding
//! (no reassembly, no copies beyond the buffers) and whole-packet reads for
//! the small control packets the proxy must understand. With protocol
//! compression on, a [`Zlib`] layer sits between the socket and the
//! buffers: reads inflate into the read buffer, flushes deflate the write
//! buffer, so everything above sees plain packets.

use std::io;

use bytes::{Buf, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::compress::Zlib;
pub use super::large::{Incoming, LargeStart, PumpError, Sink};
use super::stream::Stream;
use crate::protocol::framing::{self, ChunkHeader, HEADER_LEN};

/// Read buffers grow in steps of this size.
const READ_STEP: usize = 16 * 1024;
/// A buffer that grew past this is released once empty, so idle
/// connections stay small.
const SHRINK_ABOVE: usize = 256 * 1024;
/// Payloads at least this large are written without a copy into the
/// write buffer ([`PacketIo::send_packet`]).
const DIRECT_WRITE_ABOVE: usize = 1024 * 1024;
/// Buffer capacity an idle connection may keep.
const IDLE_KEEP: usize = 0;

/// Failures of the wire layer.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// The socket failed.
    #[error("i/o error: {0}")]
    Io(#[from] io::Error),
    /// The peer closed the connection between packets.
    #[error("connection closed by peer")]
    Closed,
    /// The peer closed the connection in the middle of a packet.
    #[error("connection closed in the middle of a packet")]
    Truncated,
    /// A logical packet exceeded the allowed size.
    #[error("packet larger than max_allowed_packet")]
    TooLarge,
    /// A packet arrived with an unexpected sequence id.
    #[error("packets out of order")]
    OutOfOrder,
    /// The peer did not take our bytes within the write timeout.
    #[error("write timed out: the peer stopped reading")]
    WriteTimeout,
}

/// A reassembled logical packet.
#[derive(Debug)]
pub struct Packet {
    /// Sequence id of the first chunk.
    pub seq: u8,
    /// Sequence id of the last chunk.
    pub last_seq: u8,
    /// The payload without headers.
    pub payload: BytesMut,
}

impl Packet {
    /// The same command with another statement text: a COM_QUERY of `sql`
    /// under this packet's sequence ids (a rewrite the proxy sends on).
    pub fn with_query(&self, sql: &[u8]) -> Packet {
        let mut payload = BytesMut::with_capacity(sql.len() + 1);
        payload.extend_from_slice(&[crate::protocol::command::COM_QUERY]);
        payload.extend_from_slice(sql);
        Packet {
            seq: self.seq,
            last_seq: self.last_seq,
            payload,
        }
    }
}

/// Packet reader/writer for one connection.
#[derive(Debug)]
pub struct PacketIo {
    /// The socket.
    pub stream: Stream,
    pub(super) rbuf: BytesMut,
    /// Bytes queued for the peer; sent by [`PacketIo::flush`].
    pub wbuf: BytesMut,
    read_step: usize,
    /// Protocol compression, once switched on.
    zlib: Option<Box<Zlib>>,
    /// Compression starts after the next flush (the login's final OK).
    compress_after_flush: bool,
    /// Largest compressed frame accepted (see [`Zlib::set_frame_limit`]).
    frame_limit: usize,
    write_timeout: Option<std::time::Duration>,
    /// The read buffer was grown past [`SHRINK_ABOVE`]: once empty it is
    /// dropped even when its remaining capacity looks small (a `BytesMut`
    /// advanced to its end reports only what is left after the cursor).
    big_read: bool,
    /// When bytes were last handed to the socket (taken before the write,
    /// so it never falls after the peer has them): the end of a
    /// statement's latency.
    sent_at: Option<tokio::time::Instant>,
}

impl PacketIo {
    /// Wraps a stream.
    pub fn new(stream: Stream) -> Self {
        Self {
            stream,
            rbuf: BytesMut::new(),
            wbuf: BytesMut::new(),
            read_step: READ_STEP,
            zlib: None,
            compress_after_flush: false,
            frame_limit: super::compress::MAX_FRAME,
            write_timeout: None,
            big_read: false,
            sent_at: None,
        }
    }

    /// When bytes were last handed to the socket, if ever: stamped before
    /// the write, so a peer receiving them sees a later time than this.
    pub fn sent_at(&self) -> Option<tokio::time::Instant> {
        self.sent_at
    }

    /// Switches protocol compression on once the next flush has gone out
    /// (the server's final login OK is the last uncompressed packet).
    pub fn compress_after_next_flush(&mut self) {
        self.compress_after_flush = true;
    }

    /// Refuses compressed frames of more than `limit` plain bytes
    /// ([`WireError::TooLarge`]) before inflating them: a peer's packet
    /// limit plus a header (a client's frames hold its commands).
    pub fn set_frame_limit(&mut self, limit: usize) {
        self.frame_limit = limit;
        if let Some(z) = self.zlib.as_mut() {
            z.set_frame_limit(limit);
        }
    }

    /// True when this hop is compressed.
    pub fn is_compressed(&self) -> bool {
        self.zlib.is_some()
    }

    /// Client side of a compressed hop: the next command starts a new
    /// compressed sequence.
    pub fn new_command(&mut self) {
        if let Some(z) = self.zlib.as_mut() {
            z.new_command();
        }
    }

    /// Fails a flush that makes no progress for `t` (a peer that stopped
    /// reading) with [`WireError::WriteTimeout`].
    pub fn set_write_timeout(&mut self, t: std::time::Duration) {
        self.write_timeout = Some(t);
    }

    /// Grows the read buffer in smaller steps (clients send small commands;
    /// thousands of them idle).
    pub fn with_read_step(mut self, step: usize) -> Self {
        self.read_step = step.max(HEADER_LEN);
        self
    }

    /// Bytes already read but not consumed (must be empty before a TLS upgrade).
    pub fn buffered(&self) -> usize {
        self.rbuf.len() + self.zlib.as_ref().map_or(0, |z| z.pending())
    }

    pub(super) async fn fill(&mut self, want: usize) -> Result<(), WireError> {
        if let Some(z) = self.zlib.as_mut() {
            // Inflate what is buffered; read more only when no whole frame is.
            loop {
                if z.decode(&mut self.rbuf)? > 0 {
                    return Ok(());
                }
                if z.raw.capacity() - z.raw.len() < 1024 {
                    z.raw.reserve(self.read_step.max(want.min(READ_STEP)));
                }
                let n = self.stream.read_buf(&mut z.raw).await?;
                if n == 0 {
                    return Err(if self.rbuf.is_empty() && z.raw.is_empty() {
                        WireError::Closed
                    } else {
                        WireError::Truncated
                    });
                }
            }
        }
        let step = self.read_step;
        if self.rbuf.capacity() - self.rbuf.len() < want.clamp(step.min(1024), step) {
            self.rbuf.reserve(want.max(step));
            self.big_read |= self.rbuf.capacity() > SHRINK_ABOVE;
        }
        let n = self.stream.read_buf(&mut self.rbuf).await?;
        if n == 0 {
            return Err(if self.rbuf.is_empty() {
                WireError::Closed
            } else {
                WireError::Truncated
            });
        }
        Ok(())
    }

    /// The header of the next chunk when it is completely buffered.
    pub fn buffered_chunk(&self) -> Option<ChunkHeader> {
        let h = framing::parse_header(&self.rbuf)?;
        (self.rbuf.len() >= HEADER_LEN + h.len).then_some(h)
    }

    /// Waits until a complete chunk is buffered and returns its header.
    pub async fn next_chunk(&mut self) -> Result<ChunkHeader, WireError> {
        loop {
            if let Some(h) = framing::parse_header(&self.rbuf) {
                let total = HEADER_LEN + h.len;
                if self.rbuf.len() >= total {
                    return Ok(h);
                }
                let missing = total - self.rbuf.len();
                self.fill(missing).await?;
            } else {
                self.fill(HEADER_LEN).await?;
            }
        }
    }

    /// Payload of the buffered chunk described by `h` (from [`Self::next_chunk`]).
    pub fn chunk_payload(&self, h: ChunkHeader) -> &[u8] {
        &self.rbuf[HEADER_LEN..HEADER_LEN + h.len]
    }

    /// The whole buffered chunk, header included.
    pub fn chunk_bytes(&self, h: ChunkHeader) -> &[u8] {
        &self.rbuf[..HEADER_LEN + h.len]
    }

    /// Everything buffered: whole chunks, then perhaps the start of one.
    pub fn buffered_bytes(&self) -> &[u8] {
        &self.rbuf
    }

    /// Drops the first `n` buffered bytes (whole chunks the caller passed
    /// on, see [`Self::buffered_bytes`]).
    pub fn consume(&mut self, n: usize) {
        self.rbuf.advance(n);
        self.shrink_read_buffer();
    }

    /// Drops the chunk described by `h` from the read buffer.
    pub fn consume_chunk(&mut self, h: ChunkHeader) {
        self.rbuf.advance(HEADER_LEN + h.len);
        self.shrink_read_buffer();
    }

    /// Drops an empty read buffer that grew large.
    pub(super) fn shrink_read_buffer(&mut self) {
        if self.rbuf.is_empty() && (self.big_read || self.rbuf.capacity() > SHRINK_ABOVE) {
            self.rbuf = BytesMut::new();
            self.big_read = false;
        }
    }

    /// Waits until a chunk header is buffered and returns it (the body may
    /// still be on its way).
    pub async fn next_header(&mut self) -> Result<ChunkHeader, WireError> {
        loop {
            if let Some(h) = framing::parse_header(&self.rbuf) {
                return Ok(h);
            }
            self.fill(HEADER_LEN).await?;
        }
    }

    /// Reads one logical packet, reassembling continuation chunks. Sizes are
    /// checked against `max_len` as soon as each header arrives, so an
    /// oversize packet is refused without waiting for (or buffering) it.
    pub async fn read_packet(&mut self, max_len: usize) -> Result<Packet, WireError> {
        self.read_packet_seq(max_len, None).await
    }

    /// Like [`Self::read_packet`], also requiring the first chunk to carry
    /// sequence id `seq` (a new command starts at 0).
    pub async fn read_packet_seq(
        &mut self,
        max_len: usize,
        seq: Option<u8>,
    ) -> Result<Packet, WireError> {
        let first = self.next_header().await?;
        if seq.is_some_and(|s| s != first.seq) {
            return Err(WireError::OutOfOrder);
        }
        if first.len > max_len {
            return Err(WireError::TooLarge);
        }
        let h = self.next_chunk().await?;
        let mut payload = BytesMut::from(self.chunk_payload(h));
        let mut last = h;
        self.consume_chunk(h);
        while last.continues() {
            let next = self.next_header().await?;
            if payload.len() + next.len > max_len {
                return Err(WireError::TooLarge);
            }
            let h = self.next_chunk().await?;
            payload.extend_from_slice(self.chunk_payload(h));
            last = h;
            self.consume_chunk(h);
        }
        Ok(Packet {
            seq: first.seq,
            last_seq: last.seq,
            payload,
        })
    }

    /// Sends what is queued, then `body` straight from where it is (through
    /// the compression layer when the hop is compressed).
    pub async fn flush_then_write(&mut self, body: &[u8]) -> Result<(), WireError> {
        self.sent_at = Some(tokio::time::Instant::now());
        if self.zlib.is_some() {
            self.wbuf.extend_from_slice(body);
            return self.flush().await;
        }
        self.flush().await?;
        write_all(&mut self.stream, body, self.write_timeout).await?;
        flush(&mut self.stream, self.write_timeout).await?;
        Ok(())
    }

    /// Queues one logical packet; returns the next sequence id.
    pub fn write_packet(&mut self, seq: u8, payload: &[u8]) -> u8 {
        framing::write_packet(&mut self.wbuf, seq, payload)
    }

    /// Makes room for `n` more bytes in the write buffer at once (a relay
    /// about to copy a batch it has already read), instead of growing it
    /// packet by packet.
    pub fn reserve_write(&mut self, n: usize) {
        self.wbuf.reserve(n);
    }

    /// Sends everything queued.
    pub async fn flush(&mut self) -> Result<(), WireError> {
        if !self.wbuf.is_empty() {
            self.sent_at = Some(tokio::time::Instant::now());
        }
        if let Some(z) = self.zlib.as_mut() {
            if !self.wbuf.is_empty() {
                z.encode(&self.wbuf)?;
                self.wbuf.clear();
                if self.wbuf.capacity() > SHRINK_ABOVE {
                    self.wbuf = BytesMut::new();
                }
                write_all(&mut self.stream, &z.out, self.write_timeout).await?;
                z.out.clear();
                if z.out.capacity() > SHRINK_ABOVE {
                    z.out = BytesMut::new();
                }
            }
            flush(&mut self.stream, self.write_timeout).await?;
            return Ok(());
        }
        if !self.wbuf.is_empty() {
            write_all(&mut self.stream, &self.wbuf, self.write_timeout).await?;
            self.wbuf.clear();
            if self.wbuf.capacity() > SHRINK_ABOVE {
                self.wbuf = BytesMut::new();
            }
        }
        flush(&mut self.stream, self.write_timeout).await?;
        if self.compress_after_flush {
            self.compress_after_flush = false;
            let mut z = Box::new(Zlib::new());
            z.set_frame_limit(self.frame_limit);
            // Bytes the peer already sent after the last plain packet are
            // compressed frames.
            z.raw = std::mem::take(&mut self.rbuf);
            self.zlib = Some(z);
        }
        Ok(())
    }

    /// Queues and sends one packet. A large payload on an uncompressed hop
    /// is written from where it is, chunk by chunk, instead of being copied
    /// into the write buffer first (a 64 MiB query would otherwise be held
    /// twice).
    pub async fn send_packet(&mut self, seq: u8, payload: &[u8]) -> Result<u8, WireError> {
        if payload.len() < DIRECT_WRITE_ABOVE || self.zlib.is_some() {
            let next = self.write_packet(seq, payload);
            self.flush().await?;
            return Ok(next);
        }
        self.flush().await?;
        self.sent_at = Some(tokio::time::Instant::now());
        let mut seq = seq;
        let mut rest = payload;
        loop {
            let n = rest.len().min(framing::MAX_CHUNK);
            let mut head = BytesMut::with_capacity(HEADER_LEN);
            framing::put_header(&mut head, n, seq);
            write_all(&mut self.stream, &head, self.write_timeout).await?;
            write_all(&mut self.stream, &rest[..n], self.write_timeout).await?;
            seq = seq.wrapping_add(1);
            rest = &rest[n..];
            if n < framing::MAX_CHUNK {
                break;
            }
        }
        flush(&mut self.stream, self.write_timeout).await?;
        Ok(seq)
    }

    /// Waits for more bytes from the peer (buffering them) and fails when
    /// the peer closes; used to notice a client leaving while it waits.
    /// Stops reading once a lot is buffered.
    pub async fn watch_peer(&mut self) -> Result<(), WireError> {
        if self.buffered() >= 1 << 20 {
            return std::future::pending().await;
        }
        let buf = match self.zlib.as_mut() {
            Some(z) => &mut z.raw,
            None => &mut self.rbuf,
        };
        let n = self.stream.read_buf(buf).await?;
        if n == 0 {
            return Err(WireError::Closed);
        }
        Ok(())
    }

    /// Non-blocking check that an idle connection is still usable: no bytes
    /// pending and not closed by the peer.
    pub fn idle_is_healthy(&self) -> bool {
        if self.buffered() != 0 {
            return false;
        }
        let mut probe = [0u8; 1];
        matches!(
            self.stream.try_read_transport(&mut probe),
            Some(Err(e)) if e.kind() == io::ErrorKind::WouldBlock
        )
    }

    /// Releases buffer memory while the connection sits idle (nothing is
    /// buffered): idle clients then cost a few hundred bytes, not tens of KiB.
    pub fn release_idle_buffers(&mut self) {
        if self.rbuf.is_empty() && self.rbuf.capacity() > IDLE_KEEP {
            self.rbuf = BytesMut::new();
            self.big_read = false;
        }
        if self.wbuf.is_empty() && self.wbuf.capacity() > IDLE_KEEP {
            self.wbuf = BytesMut::new();
        }
        if let Some(z) = self.zlib.as_mut() {
            z.release_idle();
        }
    }

    /// Drops buffers that grew past [`SHRINK_ABOVE`] (a large packet went
    /// through) once they are empty; cheap enough for every statement.
    pub fn shrink_large_buffers(&mut self) {
        self.shrink_read_buffer();
        if self.wbuf.is_empty() && self.wbuf.capacity() > SHRINK_ABOVE {
            self.wbuf = BytesMut::new();
        }
    }

    /// Takes the bytes read but not consumed (before a TLS upgrade: the
    /// start of the client's TLS handshake, when it sent it right behind
    /// its SSLRequest). Only for an uncompressed hop.
    pub fn take_buffered(&mut self) -> BytesMut {
        std::mem::take(&mut self.rbuf)
    }

    /// Takes the stream out for a TLS upgrade.
    pub fn take_stream(&mut self) -> Stream {
        std::mem::replace(&mut self.stream, Stream::Closed)
    }
}

/// Flushes the stream; with a timeout, a flush that does not finish within
/// it fails with [`WireError::WriteTimeout`]. Plain sockets flush at once;
/// TLS flushes its buffered records here, so a TLS peer that stopped
/// reading is caught by this bound (the records pending are bounded by the
/// TLS layer's buffer, so a peer that reads, however slowly, finishes).
async fn flush(stream: &mut Stream, timeout: Option<std::time::Duration>) -> Result<(), WireError> {
    match timeout {
        None => stream.flush().await?,
        Some(t) => match tokio::time::timeout(t, stream.flush()).await {
            Ok(r) => r?,
            Err(_) => return Err(WireError::WriteTimeout),
        },
    }
    Ok(())
}

/// Writes all of `buf`; with a timeout, a write that makes no progress for
/// that long fails with [`WireError::WriteTimeout`] (the timeout restarts
/// with every write that makes progress: a slow reader is fine, a stopped
/// one is not).
async fn write_all(
    stream: &mut Stream,
    buf: &[u8],
    timeout: Option<std::time::Duration>,
) -> Result<(), WireError> {
    let Some(t) = timeout else {
        stream.write_all(buf).await?;
        return Ok(());
    };
    let mut at = 0;
    while at < buf.len() {
        match tokio::time::timeout(t, stream.write(&buf[at..])).await {
            Ok(Ok(0)) => return Err(WireError::Closed),
            Ok(Ok(n)) => at += n,
            Ok(Err(e)) => return Err(e.into()),
            Err(_) => return Err(WireError::WriteTimeout),
        }
    }
    Ok(())
}
