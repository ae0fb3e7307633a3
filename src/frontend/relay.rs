//! Streams one backend response to the client: chunks are copied through
//! with only the sequence byte rewritten. The backend has the client's
//! flavour (pool key), so terminators, EOF packets, progress reports and
//! extended column metadata arrive as the client expects them; only
//! session-state blocks in OK packets are filtered or stripped per the
//! client's trackers, a prepared statement whose result changed shape
//! gets METADATA_CHANGED on its metadata EOF, and a client with MariaDB's
//! cache-metadata capability gets its "metadata follows" byte and no
//! definitions it already has (see [`super::metadata_cache`]).

use bytes::BytesMut;

use crate::protocol::caps::Caps;
use crate::protocol::framing::{self, HEADER_LEN};
use crate::protocol::packets::{EOF_HEADER, ERR_HEADER, ErrPacket, OkPacket, status};
use crate::protocol::response::{Class, Shape, Tracker, end_status};
use crate::protocol::session_track::ClientTrackers;

use super::hop_status::{HopStatus, StatusRewrite};
use super::metadata_cache::{DefsHash, Metadata};
use crate::wire::packet_io::{PumpError, Sink};
use crate::wire::{PacketIo, WireError};

/// Flush to the client once this much is queued, even mid-batch.
const FLUSH_AT: usize = 64 * 1024;

/// What the response told the proxy.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Status flags of the last OK / terminator.
    pub status: Option<u16>,
    /// Session-state blocks of all OKs, concatenated (unfiltered).
    pub state: Vec<u8>,
    /// Error code when the response was (or ended with) an ERR.
    pub error: Option<u16>,
    /// Prepare-OK statement id, for COM_STMT_PREPARE.
    pub prepared: Option<u32>,
    /// Packets relayed.
    pub packets: u64,
    /// Bytes relayed to the client.
    pub bytes: u64,
    /// The reply was the intercepted error and was not relayed.
    pub intercepted: bool,
    /// Insert id of the last OK that carried one.
    pub last_insert_id: Option<u64>,
    /// The largest warning count of the response's OKs / terminators: a
    /// multi-statement whose first statement warned leaves its warnings in
    /// the server's list even when the last reports none (a table-less
    /// last statement keeps the list).
    pub warnings: u16,
    /// Rows of the last result set, when there was one.
    pub rows: Option<u64>,
    /// Rows of all result sets.
    pub rows_sent: u64,
    /// Sum of the affected-row counts of the OK packets (not of result-set
    /// terminators).
    pub affected: u64,
    /// Affected rows of the last result when it was an OK packet (`None`
    /// when it was a result set): what the server's ROW_COUNT() returns
    /// after the command (measured on MariaDB 10.11).
    pub last_affected: Option<u64>,
    /// Column count of the first result set.
    pub columns: Option<u64>,
    /// An EOF terminator reported SESSION_STATE_CHANGED: without
    /// DEPRECATE_EOF the server cannot say what changed (a function called
    /// by a SELECT set a variable), so the change is not known.
    pub state_unreported: bool,
    /// Results completed (OK packets and result-set terminators): with
    /// an error, the number of statements of a multi-statement that ran.
    pub results: u32,
    /// With [`Metadata::Cached`]: the hash of the column definitions the
    /// client has for the statement after this response.
    pub metadata: Option<u64>,
}

/// How relaying failed.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    /// The backend failed; `sent` tells whether the client already got bytes.
    #[error("backend failed mid-response: {err}")]
    Backend {
        /// The failure.
        err: WireError,
        /// Bytes of this response reached the client.
        sent: bool,
    },
    /// The backend broke the protocol.
    #[error("backend protocol violation")]
    Malformed {
        /// Bytes of this response reached the client.
        sent: bool,
    },
    /// The client went away.
    #[error("client went away: {0}")]
    Client(WireError),
}

/// How this client must see control packets.
#[derive(Debug, Clone)]
pub struct ClientView<'a> {
    /// Negotiated capabilities (the backend has the same flavour).
    pub caps: Caps,
    /// The client's tracker settings.
    pub trackers: &'a ClientTrackers,
    /// The session's status flags before the command.
    pub status: u16,
    /// An error code that, as the whole reply, is kept from the client.
    pub intercept: Option<u16>,
    /// Largest packet accepted from the client (LOCAL INFILE data).
    pub max_packet: usize,
    /// The backend's version string (server-specific error texts).
    pub server_version: &'a [u8],
    /// Columns a prepared statement had when prepared (EXECUTE only).
    pub expect_columns: Option<u64>,
    /// The command asked for a cursor (EXECUTE with a cursor type).
    pub cursor: bool,
    /// Leave the reply's end in the client's buffer: the session flushes it
    /// after its follow-up (a statement that may change global variables:
    /// a login that follows the reply must see the new defaults).
    pub defer_flush: bool,
    /// How column definitions reach the client (cache-metadata).
    pub metadata: Metadata,
    /// Status values the client's own hop shows (see `hop_status`).
    pub hop_status: Option<&'a std::sync::Arc<HopStatus>>,
}

/// Column definitions of a [`Metadata::Cached`] result set, held in the
/// client's buffer (not flushed) until the last one shows whether the
/// client already has them.
struct HeldDefs {
    /// Where the definitions start in the client's write buffer; the
    /// "metadata follows" byte is the one before.
    defs_at: usize,
    /// The client sequence id of the first definition.
    seq: u8,
    hash: DefsHash,
    known: Option<u64>,
}

/// Writes one translated control packet.
fn write_ok(
    out: &mut PacketIo,
    seq: &mut u8,
    ok: &OkPacket<'_>,
    view: &ClientView<'_>,
    original: &[u8],
) {
    if view.caps.session_track() {
        if ok.session_state.is_empty() {
            *seq = out.write_packet(*seq, original);
            return;
        }
        match view.trackers.filter(ok.session_state) {
            None => *seq = out.write_packet(*seq, original),
            Some(filtered) => {
                let mut b = BytesMut::with_capacity(original.len());
                OkPacket {
                    session_state: &filtered,
                    ..ok.clone()
                }
                .write(&mut b, true);
                *seq = out.write_packet(*seq, &b);
            }
        }
    } else if ok.session_state.is_empty()
        && ok.status & crate::protocol::packets::status::SESSION_STATE_CHANGED == 0
    {
        *seq = out.write_packet(*seq, original);
    } else {
        let mut b = BytesMut::with_capacity(original.len());
        ok.write(&mut b, false);
        *seq = out.write_packet(*seq, &b);
    }
}

/// Relays the response to a command already sent to `backend`.
/// `seq` is the first sequence id to use toward the client.
pub async fn relay(
    client: &mut PacketIo,
    backend: &mut PacketIo,
    shape: Shape,
    view: &ClientView<'_>,
    mut seq: u8,
) -> Result<Outcome, RelayError> {
    let mut t = Tracker::with_style(shape, view.caps.deprecate_eof()).expect_cursor(view.cursor);
    let mut out = Outcome::default();
    let mut sent = false;
    let mut refuse_infile = false;
    let mut metadata_changed = false;
    // Only for clients whose hop shows other status values: see
    // `hop_status`.
    let mut status_rewrite: Option<StatusRewrite> = None;
    let binary = view.expect_columns.is_some();
    let mut held: Option<HeldDefs> = None;
    while !t.done() {
        if backend.buffered_chunk().is_none() && !client.wbuf.is_empty() && held.is_none() {
            out.bytes += client.wbuf.len() as u64;
            client.flush().await.map_err(RelayError::Client)?;
            sent = true;
        }
        let h = match backend.buffered_chunk() {
            Some(h) => h,
            // While the server works, notice a client that hangs up, so the
            // caller can stop the statement instead of letting it run on.
            None => loop {
                tokio::select! {
                    biased;
                    r = backend.next_chunk() => {
                        break r.map_err(|err| RelayError::Backend { err, sent })?;
                    }
                    r = client.watch_peer() => {
                        // Bytes (a pipelined command) stay buffered; only a
                        // hang-up ends the wait.
                        if let Err(err) = r {
                            return Err(RelayError::Client(err));
                        }
                    }
                }
            },
        };
        if client.wbuf.is_empty() {
            // A batch starts: room for everything the backend sent so far
            // (bounded by the flush point), in one allocation.
            client.reserve_write(backend.buffered().min(FLUSH_AT + HEADER_LEN));
        }
        let first = backend.chunk_payload(h);
        let class = t.next(first, h.continues());
        out.packets += 1;
        match class {
            Class::Ok if refuse_infile => {
                let Some(ok) = OkPacket::parse(first) else {
                    return Err(RelayError::Malformed { sent });
                };
                out.status = Some(ok.status);
                let e = crate::protocol::errors::local_infile_refused(view.server_version);
                out.error = Some(e.code);
                let mut b = BytesMut::new();
                e.write(&mut b);
                seq = client.write_packet(seq, &b);
            }
            Class::Ok | Class::Terminator if first.len() == 5 => {
                // An EOF (no DEPRECATE_EOF): passed through as it is.
                let Some((st, warnings)) = end_status(first) else {
                    return Err(RelayError::Malformed { sent });
                };
                out.status = Some(st);
                out.warnings = out.warnings.max(warnings);
                out.results += 1;
                if st & status::SESSION_STATE_CHANGED != 0 {
                    out.state_unreported = true;
                }
                copy_eof(client, backend.chunk_bytes(h), &mut seq, view);
            }
            Class::Ok | Class::Terminator => {
                let Some(ok) = OkPacket::parse(first) else {
                    return Err(RelayError::Malformed { sent });
                };
                out.status = Some(ok.status);
                out.warnings = out.warnings.max(ok.warnings);
                out.results += 1;
                if class == Class::Ok {
                    out.affected = out.affected.saturating_add(ok.affected_rows);
                    out.last_affected = Some(ok.affected_rows);
                }
                if ok.header == 0 && ok.last_insert_id != 0 {
                    out.last_insert_id = Some(ok.last_insert_id);
                }
                out.state.extend_from_slice(ok.session_state);
                write_ok(client, &mut seq, &ok, view, first);
            }
            Class::Eof => {
                // The EOF after definitions (no DEPRECATE_EOF); after an
                // EXECUTE's metadata it may end the response (a cursor).
                let Some((st, warnings)) = end_status(first) else {
                    return Err(RelayError::Malformed { sent });
                };
                if t.done() {
                    out.status = Some(st);
                    out.warnings = out.warnings.max(warnings);
                }
                let start = client.wbuf.len();
                copy_eof(client, backend.chunk_bytes(h), &mut seq, view);
                if metadata_changed && st & status::METADATA_CHANGED == 0 {
                    // A prepared statement's result changed shape since the
                    // client saw it: the server flags that in this EOF.
                    let flags = (st | status::METADATA_CHANGED).to_le_bytes();
                    client.wbuf[start + HEADER_LEN + 3..start + HEADER_LEN + 5]
                        .copy_from_slice(&flags);
                    if t.done() {
                        out.status = Some(st | status::METADATA_CHANGED);
                    }
                }
                metadata_changed = false;
            }
            Class::Progress => {
                copy_chunk(client, backend.chunk_bytes(h), &mut seq);
            }
            Class::Err => {
                out.error = ErrPacket::parse(first).map(|e| e.code);
                if out.packets == 1 && out.error.is_some() && out.error == view.intercept {
                    out.intercepted = true;
                } else {
                    seq = client.write_packet(seq, first);
                }
            }
            Class::Malformed => return Err(RelayError::Malformed { sent }),
            Class::LocalInfile => {
                let h_seq = h.seq;
                let allowed = view.caps.has(crate::protocol::caps::flag::LOCAL_FILES);
                if allowed {
                    copy_chunk(client, backend.chunk_bytes(h), &mut seq);
                }
                backend.consume_chunk(h);
                if allowed {
                    out.bytes += client.wbuf.len() as u64;
                    client.flush().await.map_err(RelayError::Client)?;
                    sent = true;
                    seq = stream_file(client, backend, h_seq.wrapping_add(1), view.max_packet)
                        .await
                        .map_err(|e| match e {
                            Side::Client(e) => RelayError::Client(e),
                            Side::Backend(err) => RelayError::Backend { err, sent: true },
                        })?;
                } else {
                    // The client did not enable LOCAL INFILE: send the server an
                    // empty file and report the refusal the server would give.
                    backend
                        .send_packet(h_seq.wrapping_add(1), &[])
                        .await
                        .map_err(|err| RelayError::Backend { err, sent })?;
                    refuse_infile = true;
                }
                t.resume_after_infile();
                continue;
            }
            Class::PrepareOk { .. } => {
                out.prepared = first
                    .get(1..5)
                    .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
                copy_chunk(client, backend.chunk_bytes(h), &mut seq);
            }
            Class::ColumnDef { .. } | Class::ParamDef { .. } => {
                if let (Some(rw), Class::ColumnDef { .. }) = (status_rewrite.as_mut(), class) {
                    rw.column(first);
                }
                if let Some(hd) = held.as_mut() {
                    if h.continues() {
                        // No definition is 16 MiB long.
                        return Err(RelayError::Malformed { sent });
                    }
                    hd.hash.add(first);
                }
                copy_chunk(client, backend.chunk_bytes(h), &mut seq);
                if class == (Class::ColumnDef { last: true })
                    && let Some(hd) = held.take()
                {
                    let now = hd.hash.finish();
                    if hd.known == Some(now) {
                        // The client has these: count byte 0, no definitions.
                        client.wbuf.truncate(hd.defs_at);
                        client.wbuf[hd.defs_at - 1] = 0;
                        seq = hd.seq;
                    }
                    out.metadata = Some(now);
                }
            }
            Class::ColumnCount => {
                out.rows = Some(0);
                out.last_affected = None;
                let n = crate::protocol::lenenc::Reader::new(first).lenenc_int();
                // Only the first result set is the statement's own (a
                // compound statement's later ones have shapes of their own).
                if out.results == 0
                    && view.expect_columns.is_some()
                    && n.is_some()
                    && n != view.expect_columns
                {
                    metadata_changed = true;
                }
                out.columns = out
                    .columns
                    .or_else(|| crate::protocol::lenenc::Reader::new(first).lenenc_int());
                status_rewrite = match (n, view.hop_status) {
                    (Some(n), Some(hop)) if shape == Shape::Query => Some(StatusRewrite::new(
                        hop.clone(),
                        n,
                        view.caps.extended_type_info(),
                    )),
                    _ => None,
                };
                match view.metadata {
                    Metadata::Plain => copy_chunk(client, backend.chunk_bytes(h), &mut seq),
                    mode => {
                        if h.continues() {
                            return Err(RelayError::Malformed { sent });
                        }
                        // The count with its "metadata follows" byte (1 until
                        // the definitions show the client has them).
                        framing::put_header(&mut client.wbuf, first.len() + 1, seq);
                        client.wbuf.extend_from_slice(first);
                        client.wbuf.extend_from_slice(&[1]);
                        seq = seq.wrapping_add(1);
                        if let Metadata::Cached { seed, known } = mode
                            && out.results == 0
                            && n.is_some_and(|n| n > 0)
                        {
                            // Bytes are held unflushed: a failure now must
                            // end the session like one after bytes went out.
                            sent = true;
                            held = Some(HeldDefs {
                                defs_at: client.wbuf.len(),
                                seq,
                                hash: DefsHash::new(seed),
                                known,
                            });
                        }
                    }
                }
            }
            Class::Row => {
                if let Some(r) = out.rows.as_mut() {
                    *r += 1;
                }
                out.rows_sent += 1;
                let rewritten = match &status_rewrite {
                    Some(rw) if !h.continues() => rw.rewrite(first, binary),
                    _ => None,
                };
                match rewritten {
                    Some(row) => seq = client.write_packet(seq, &row),
                    // The first 16 MiB of a large row go out from the
                    // backend's read buffer, not through a copy.
                    None if h.continues() => {
                        framing::put_header(&mut client.wbuf, h.len, seq);
                        seq = seq.wrapping_add(1);
                        out.bytes += (client.wbuf.len() + h.len) as u64;
                        client
                            .flush_then_write(backend.chunk_payload(h))
                            .await
                            .map_err(RelayError::Client)?;
                        sent = true;
                    }
                    None => copy_chunk(client, backend.chunk_bytes(h), &mut seq),
                }
            }
            Class::Single => {
                copy_chunk(client, backend.chunk_bytes(h), &mut seq);
            }
        }
        // Continuation chunks of a large packet pass through as they
        // arrive, in pieces (no buffer holds a whole 16 MiB chunk).
        let mut last = h;
        backend.consume_chunk(h);
        while last.continues() {
            last = backend
                .next_header()
                .await
                .map_err(|err| RelayError::Backend { err, sent })?;
            backend.skip_header();
            framing::put_header(&mut client.wbuf, last.len, seq);
            seq = seq.wrapping_add(1);
            out.bytes += (HEADER_LEN + last.len) as u64;
            sent = true;
            backend
                .pass(last.len, &mut Sink::Forward(client))
                .await
                .map_err(|e| match e {
                    PumpError::Write(e) => RelayError::Client(e),
                    PumpError::Read(err) => RelayError::Backend { err, sent: true },
                    PumpError::TooLarge | PumpError::Refused => {
                        RelayError::Malformed { sent: true }
                    }
                })?;
        }
        // The bulk of a result set: the rows buffered behind this one go
        // over in one copy (each still a row by the tracker's rule: a whole
        // single-chunk packet that is no EOF, OK or ERR in disguise).
        if class == Class::Row && status_rewrite.is_none() && !last.continues() {
            let room = FLUSH_AT.saturating_sub(client.wbuf.len());
            let (n, rows) = copy_rows(&mut client.wbuf, backend.buffered_bytes(), &mut seq, room);
            if rows > 0 {
                backend.consume(n);
                out.packets += rows;
                out.rows_sent += rows;
                if let Some(r) = out.rows.as_mut() {
                    *r += rows;
                }
            }
        }
        if client.wbuf.len() >= FLUSH_AT && held.is_none() {
            out.bytes += client.wbuf.len() as u64;
            client.flush().await.map_err(RelayError::Client)?;
            sent = true;
        }
    }
    out.bytes += client.wbuf.len() as u64;
    if !view.defer_flush {
        client.flush().await.map_err(RelayError::Client)?;
    }
    Ok(out)
}

enum Side {
    Client(WireError),
    Backend(WireError),
}

/// Streams a LOCAL INFILE file from the client to the backend, chunk by
/// chunk, until the client's empty packet. Returns the client sequence id
/// the server's answer must carry.
async fn stream_file(
    client: &mut PacketIo,
    backend: &mut PacketIo,
    mut backend_seq: u8,
    max_packet: usize,
) -> Result<u8, Side> {
    let mut continues = false;
    let mut packet_len = 0usize;
    loop {
        let hdr = client.next_header().await.map_err(Side::Client)?;
        packet_len = if continues {
            packet_len + hdr.len
        } else {
            hdr.len
        };
        if packet_len > max_packet {
            return Err(Side::Client(WireError::TooLarge));
        }
        let h = client.next_chunk().await.map_err(Side::Client)?;
        let start = backend.wbuf.len();
        backend.wbuf.extend_from_slice(client.chunk_bytes(h));
        backend.wbuf[start + HEADER_LEN - 1] = backend_seq;
        backend_seq = backend_seq.wrapping_add(1);
        client.consume_chunk(h);
        let end_of_file = h.len == 0 && !continues;
        continues = h.continues();
        if end_of_file {
            backend.flush().await.map_err(Side::Backend)?;
            return Ok(h.seq.wrapping_add(1));
        }
        if backend.wbuf.len() >= FLUSH_AT || client.buffered_chunk().is_none() {
            backend.flush().await.map_err(Side::Backend)?;
        }
    }
}

/// Copies an EOF packet. The server sets SERVER_SESSION_STATE_CHANGED on it
/// when a variable the *connection's* trackers follow changed (a function
/// called by a SELECT); backends track everything, a client by default
/// only a few variables, and an EOF does not say which changed. Unless the
/// client tracks everything too, the flag is cleared: exact whenever the
/// change was to something the client does not track (the usual case; the
/// session-state authority treats the change as unknown either way).
fn copy_eof(client: &mut PacketIo, chunk: &[u8], seq: &mut u8, view: &ClientView<'_>) {
    let start = client.wbuf.len();
    copy_chunk(client, chunk, seq);
    let t = view.trackers;
    let tracks_all = t.schema && t.state_change && t.system_variables.is_none();
    let at = start + HEADER_LEN + 4;
    if !tracks_all && chunk.len() == HEADER_LEN + 5 {
        client.wbuf[at] &= !((status::SESSION_STATE_CHANGED >> 8) as u8);
    }
}

/// Copies the run of plain rows at the start of `buf` to `wbuf` with the
/// client's sequence ids, in one copy, as long as the copied bytes stay
/// within `room`; returns the bytes taken from `buf` and the rows. A plain
/// row is a whole packet of one chunk whose first byte is neither an EOF
/// nor an ERR header (what [`Tracker::next`] answers `Row` for, without
/// changing state, while rows stream); anything else ends the run.
fn copy_rows(wbuf: &mut BytesMut, buf: &[u8], seq: &mut u8, room: usize) -> (usize, u64) {
    let mut end = 0;
    let mut rows = 0u64;
    while let Some(h) = buf.get(end..).and_then(framing::parse_header) {
        let next = end + HEADER_LEN + h.len;
        if h.continues() || next > buf.len() || next > room {
            break;
        }
        match buf.get(end + HEADER_LEN) {
            Some(&(EOF_HEADER | ERR_HEADER)) | None => break,
            Some(_) => {}
        }
        end = next;
        rows += 1;
    }
    if rows == 0 {
        return (0, 0);
    }
    let start = wbuf.len();
    wbuf.extend_from_slice(&buf[..end]);
    let mut at = start;
    while let Some(h) = framing::parse_header(&wbuf[at..]) {
        wbuf[at + HEADER_LEN - 1] = *seq;
        *seq = seq.wrapping_add(1);
        at += HEADER_LEN + h.len;
    }
    (end, rows)
}

/// Copies one chunk (header included) with the client's sequence id.
fn copy_chunk(client: &mut PacketIo, chunk: &[u8], seq: &mut u8) {
    let start = client.wbuf.len();
    client.wbuf.extend_from_slice(chunk);
    client.wbuf[start + HEADER_LEN - 1] = *seq;
    *seq = seq.wrapping_add(1);
    debug_assert!(framing::parse_header(chunk).is_some());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(seq: u8, payload: &[u8]) -> Vec<u8> {
        let mut b = BytesMut::new();
        framing::write_packet(&mut b, seq, payload);
        b.to_vec()
    }

    #[test]
    fn a_run_of_rows_is_copied_whole_with_the_clients_sequence_ids() {
        let mut buf = Vec::new();
        buf.extend(packet(7, b"\x01a"));
        buf.extend(packet(8, b"\xfb"));
        buf.extend(packet(9, b"\x03abc"));
        let rows_end = buf.len();
        buf.extend(packet(10, b"\xfe\x00\x00\x02\x00"));
        let mut wbuf = BytesMut::from(&b"xy"[..]);
        let mut seq = 3;
        let (n, rows) = copy_rows(&mut wbuf, &buf, &mut seq, 1 << 16);
        assert_eq!((n, rows), (rows_end, 3), "the EOF ends the run");
        assert_eq!(seq, 6);
        let mut expect = b"xy".to_vec();
        expect.extend(packet(3, b"\x01a"));
        expect.extend(packet(4, b"\xfb"));
        expect.extend(packet(5, b"\x03abc"));
        assert_eq!(&wbuf[..], &expect[..]);
    }

    #[test]
    fn a_run_stops_at_an_error_a_partial_packet_a_continued_chunk_and_the_room() {
        let row = packet(1, b"\x01a");
        let err = packet(2, b"\xff\x15\x04#HY000x");
        let mut seq = 0;
        let mut w = BytesMut::new();
        let mut buf = row.clone();
        buf.extend(&err);
        assert_eq!(copy_rows(&mut w, &buf, &mut seq, 1 << 16), (row.len(), 1));
        // A packet not wholly buffered, and one that continues.
        let mut w = BytesMut::new();
        let mut buf = row.clone();
        buf.extend(&row[..row.len() - 1]);
        assert_eq!(copy_rows(&mut w, &buf, &mut seq, 1 << 16), (row.len(), 1));
        let mut big = vec![0xff, 0xff, 0xff, 0];
        big.push(1);
        assert_eq!(
            copy_rows(&mut BytesMut::new(), &big, &mut seq, 1 << 16),
            (0, 0)
        );
        // Room for one row only; none at all copies nothing.
        let mut buf = row.clone();
        buf.extend(&row);
        assert_eq!(
            copy_rows(&mut BytesMut::new(), &buf, &mut seq, row.len() + 1),
            (row.len(), 1)
        );
        let before = seq;
        assert_eq!(copy_rows(&mut BytesMut::new(), &buf, &mut seq, 0), (0, 0));
        assert_eq!(seq, before, "nothing copied, no sequence id spent");
        assert_eq!(
            copy_rows(&mut BytesMut::new(), &[], &mut seq, 1 << 16),
            (0, 0)
        );
    }
}
