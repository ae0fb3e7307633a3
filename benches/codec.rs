//! The framer / forwarding hot path: writing packets, finding packet
//! boundaries, classifying a result set, copying chunks with the sequence
//! byte rewritten, a whole `relay` over loopback sockets, and the OK /
//! terminator parse-and-rewrite done for every response.

use std::hint::black_box;
use std::time::{Duration, Instant};

use bytes::{BufMut, BytesMut};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use myplex::frontend::relay::{ClientView, relay};
use myplex::protocol::caps::{Caps, flag};
use myplex::protocol::framing::{self, HEADER_LEN, MAX_CHUNK};
use myplex::protocol::lenenc::{put_lenenc_bytes, put_lenenc_int};
use myplex::protocol::packets::{OkPacket, status};
use myplex::protocol::response::{Shape, Tracker};
use myplex::protocol::session_track::{ClientTrackers, TRACK_SCHEMA, TRACK_SYSTEM_VARIABLES};
use myplex::wire::{PacketIo, Stream};

/// Rows in the synthetic result set.
const ROWS: usize = 1_000;

/// A column definition (protocol 4.1) as the server sends it.
fn column_def(name: &str, column_type: u8, length: u32) -> Vec<u8> {
    let mut b = BytesMut::new();
    for s in ["def", "test", "t", "t", name, name] {
        put_lenenc_bytes(&mut b, s.as_bytes());
    }
    put_lenenc_int(&mut b, 0x0c);
    b.put_u16_le(45); // utf8mb4_general_ci
    b.put_u32_le(length);
    b.put_u8(column_type);
    b.put_u16_le(0);
    b.put_u8(0);
    b.put_u16_le(0);
    b.to_vec()
}

/// A text-protocol row: `id`, a 32-character name, a DATETIME.
fn row(i: usize) -> Vec<u8> {
    let mut b = BytesMut::new();
    put_lenenc_bytes(&mut b, i.to_string().as_bytes());
    put_lenenc_bytes(&mut b, format!("user-{i:027}").as_bytes());
    put_lenenc_bytes(&mut b, b"2024-01-01 12:00:00");
    b.to_vec()
}

/// The 0xFE terminator (DEPRECATE_EOF), optionally with a session-state
/// block (`autocommit=ON`, schema `test`).
fn terminator(with_state: bool) -> Vec<u8> {
    let mut b = BytesMut::new();
    if with_state {
        let mut state = BytesMut::new();
        let mut sysvar = BytesMut::new();
        put_lenenc_bytes(&mut sysvar, b"autocommit");
        put_lenenc_bytes(&mut sysvar, b"ON");
        state.put_u8(TRACK_SYSTEM_VARIABLES);
        put_lenenc_bytes(&mut state, &sysvar);
        let mut schema = BytesMut::new();
        put_lenenc_bytes(&mut schema, b"test");
        state.put_u8(TRACK_SCHEMA);
        put_lenenc_bytes(&mut state, &schema);
        OkPacket {
            header: 0xFE,
            status: status::AUTOCOMMIT | status::SESSION_STATE_CHANGED,
            session_state: &state,
            ..Default::default()
        }
        .write(&mut b, true);
    } else {
        OkPacket {
            header: 0xFE,
            status: status::AUTOCOMMIT,
            ..Default::default()
        }
        .write(&mut b, true);
    }
    b.to_vec()
}

/// Payloads of a 3-column, [`ROWS`]-row result set, in order.
fn result_set() -> Vec<Vec<u8>> {
    let mut p = vec![vec![3u8]];
    p.push(column_def("id", 0x03, 11));
    p.push(column_def("name", 0xfd, 128));
    p.push(column_def("created", 0x0c, 19));
    p.extend((0..ROWS).map(row));
    p.push(terminator(false));
    p
}

/// The same result set from a connection without DEPRECATE_EOF: an EOF
/// after the definitions, an EOF terminator.
fn result_set_classic() -> Vec<Vec<u8>> {
    let mut p = result_set();
    let eof = vec![0xFE, 0, 0, 0x02, 0];
    p.insert(4, eof.clone());
    *p.last_mut().unwrap() = eof;
    p
}

/// The result set as the backend puts it on the wire (sequence ids from 1).
fn wire(packets: &[Vec<u8>]) -> BytesMut {
    let mut b = BytesMut::new();
    let mut seq = 1u8;
    for p in packets {
        seq = framing::write_packet(&mut b, seq, p);
    }
    b
}

fn write_packet(c: &mut Criterion) {
    let mut g = c.benchmark_group("framing/write_packet");
    for (name, len) in [
        ("10B", 10),
        ("1KB", 1024),
        ("64KB", 64 * 1024),
        ("16MiB+1KB", MAX_CHUNK + 1 + 1024),
    ] {
        if len > MAX_CHUNK {
            g.sample_size(10);
        }
        let payload = vec![0x5Au8; len];
        let mut out = BytesMut::with_capacity(len + 2 * HEADER_LEN);
        g.throughput(Throughput::Bytes(len as u64));
        g.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter(|| {
                out.clear();
                black_box(framing::write_packet(&mut out, 0, black_box(&payload)));
                black_box(out.len());
            })
        });
    }
    g.finish();
}

fn complete_packet_len(c: &mut Criterion) {
    let rows: Vec<Vec<u8>> = (0..ROWS).map(row).collect();
    let buf = wire(&rows);
    let mut g = c.benchmark_group("framing/complete_packet_len");
    g.throughput(Throughput::ElementsAndBytes {
        elements: ROWS as u64,
        bytes: buf.len() as u64,
    });
    g.bench_function("scan_1000_rows", |b| {
        b.iter(|| {
            let buf = black_box(&buf[..]);
            let mut off = 0;
            let mut n = 0;
            while let Some(len) = framing::complete_packet_len(&buf[off..]) {
                off += len;
                n += 1;
            }
            assert_eq!(n, ROWS);
            off
        })
    });
    g.finish();
}

fn tracker(c: &mut Criterion) {
    let packets = result_set();
    let mut g = c.benchmark_group("response/tracker");
    g.throughput(Throughput::Elements(packets.len() as u64));
    g.bench_function("classify_1000_row_result_set", |b| {
        b.iter(|| {
            let mut t = Tracker::new(Shape::Query);
            for p in black_box(&packets) {
                black_box(t.next(p, false));
            }
            assert!(t.done());
            t.last_status
        })
    });
    g.finish();
}

/// `relay::copy_chunk` (private) inlined: chunk by chunk, append header and
/// payload to the client buffer and rewrite the sequence byte.
fn copy_chunks(c: &mut Criterion) {
    let buf = wire(&result_set());
    let mut out = BytesMut::with_capacity(buf.len());
    let mut g = c.benchmark_group("relay/copy_chunk_inline");
    g.throughput(Throughput::ElementsAndBytes {
        elements: ROWS as u64,
        bytes: buf.len() as u64,
    });
    g.bench_function("1000_row_result_set", |b| {
        b.iter(|| {
            out.clear();
            let src = black_box(&buf[..]);
            let mut off = 0;
            let mut seq = 1u8;
            while let Some(h) = framing::parse_header(&src[off..]) {
                let chunk = &src[off..off + HEADER_LEN + h.len];
                let start = out.len();
                out.extend_from_slice(chunk);
                out[start + HEADER_LEN - 1] = seq;
                seq = seq.wrapping_add(1);
                off += chunk.len();
            }
            black_box(out.len())
        })
    });
    g.finish();
}

/// A connected loopback pair.
async fn tcp_pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let (a, b) = tokio::join!(TcpStream::connect(addr), l.accept());
    let (a, b) = (a.unwrap(), b.unwrap().0);
    a.set_nodelay(true).unwrap();
    b.set_nodelay(true).unwrap();
    (a, b)
}

/// `frontend::relay::relay` end to end: a fake backend writes the 1,000-row
/// response into one socket, relay forwards it to another, a fake client
/// reads all of it.
fn relay_sockets(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let base = flag::PROTOCOL_41 | flag::TRANSACTIONS | flag::SECURE_CONNECTION;
    let trackers = ClientTrackers::default();
    let mut g = c.benchmark_group("relay/sockets");
    for (name, caps, response) in [
        // Modern client: chunks pass through untouched but for the seq byte.
        (
            "1000_rows_deprecate_eof",
            base | flag::DEPRECATE_EOF | flag::SESSION_TRACK,
            wire(&result_set()),
        ),
        // Old client, served by a backend of its flavour: the same, with
        // EOF packets.
        ("1000_rows_classic_eof", base, wire(&result_set_classic())),
    ] {
        g.throughput(Throughput::ElementsAndBytes {
            elements: ROWS as u64,
            bytes: response.len() as u64,
        });
        let view = ClientView {
            caps: Caps(u64::from(caps)),
            trackers: &trackers,
            status: status::AUTOCOMMIT,
            intercept: None,
            max_packet: 64 << 20,
            server_version: b"11.8.3-MariaDB",
            expect_columns: None,
            cursor: false,
            defer_flush: false,
            metadata: Default::default(),
            hop_status: None,
        };
        let (mut backend_peer, backend_sock, mut client, mut client_peer) = rt.block_on(async {
            let (bp, bs) = tcp_pair().await;
            let (cs, cp) = tcp_pair().await;
            (bp, bs, PacketIo::new(Stream::Plain(cs)), cp)
        });
        let mut backend = PacketIo::new(Stream::Plain(backend_sock));
        // One round to learn how many bytes the client receives.
        let expect = rt.block_on(async {
            let (w, out) = tokio::join!(
                backend_peer.write_all(&response),
                relay(&mut client, &mut backend, Shape::Query, &view, 1),
            );
            w.unwrap();
            let out = out.unwrap();
            assert_eq!(out.rows, Some(ROWS as u64));
            let n = out.bytes as usize;
            let mut sink = vec![0u8; n];
            client_peer.read_exact(&mut sink).await.unwrap();
            n
        });
        let mut sink = vec![0u8; expect];
        g.bench_function(name, |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let start = Instant::now();
                    for _ in 0..iters {
                        let (w, out, r) = tokio::join!(
                            backend_peer.write_all(&response),
                            relay(&mut client, &mut backend, Shape::Query, &view, 1),
                            client_peer.read_exact(&mut sink),
                        );
                        w.unwrap();
                        r.unwrap();
                        black_box(out.unwrap());
                    }
                    start.elapsed()
                })
            })
        });
    }
    g.finish();
}

fn ok_packet(c: &mut Criterion) {
    let mut g = c.benchmark_group("packets/ok_parse_write");
    let mut out = BytesMut::with_capacity(256);
    for (name, with_state) in [("terminator", false), ("terminator_session_state", true)] {
        let payload = terminator(with_state);
        let ok = OkPacket::parse(&payload).unwrap();
        assert_eq!(ok.session_state.is_empty(), !with_state);
        g.bench_function(name, |b| {
            b.iter(|| {
                let ok = OkPacket::parse(black_box(&payload)).unwrap();
                out.clear();
                ok.write(&mut out, true);
                black_box(out.len())
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30)
        .without_plots();
    targets = write_packet, complete_packet_len, tracker, copy_chunks, relay_sockets, ok_packet
}
criterion_main!(benches);
