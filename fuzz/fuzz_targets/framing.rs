//! Packet framing as the proxy reads it from a socket: `PacketIo` over a
//! real loopback TCP connection (plain, or with protocol compression
//! switched on as after a compressed login), fed the bytes of a peer.
//!
//! Input: `mode u8 | max u8 | bytes the peer sends`. `mode` bit 0:
//! compressed hop; bit 1: every read requires sequence id 0 (a new
//! command). The packet size limit is `1 << (max % 25)`.
//!
//! Invariants: no panic or hang; every packet is within the limit; on a
//! plain hop the packets and the final error equal a straightforward
//! model of the framing rules (headers, 0xFFFFFF continuation, size limit
//! checked at each header, closed vs truncated); `complete_packet_len`
//! and `write_packet` agree with the same model.
#![no_main]

use std::sync::OnceLock;

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use myplex::protocol::framing::{self, HEADER_LEN, MAX_CHUNK};
use myplex::wire::{PacketIo, Stream, WireError};
use myplex_fuzz::Input;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Runtime;

struct Loopback {
    rt: Runtime,
    listener: TcpListener,
}

fn loopback() -> &'static Loopback {
    static L: OnceLock<Loopback> = OnceLock::new();
    L.get_or_init(|| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .build()
            .expect("runtime");
        let listener = rt
            .block_on(TcpListener::bind("127.0.0.1:0"))
            .expect("bind loopback");
        Loopback { rt, listener }
    })
}

#[derive(Debug, PartialEq, Eq)]
enum End {
    Closed,
    Truncated,
    TooLarge,
    OutOfOrder,
    Other(String),
}

type Read = (Vec<(u8, u8, Vec<u8>)>, End);

fn end_of(e: WireError) -> End {
    match e {
        WireError::Closed => End::Closed,
        WireError::Truncated => End::Truncated,
        WireError::TooLarge => End::TooLarge,
        WireError::OutOfOrder => End::OutOfOrder,
        e => End::Other(e.to_string()),
    }
}

/// The framing rules, written out plainly.
fn model(data: &[u8], max: usize, seq0: bool) -> Read {
    let mut packets = Vec::new();
    let mut off = 0;
    loop {
        let header = |off: usize| -> Result<framing::ChunkHeader, End> {
            match data.len() - off {
                0 => Err(End::Closed),
                1..HEADER_LEN => Err(End::Truncated),
                _ => Ok(framing::parse_header(&data[off..]).expect("4 bytes")),
            }
        };
        let first = match header(off) {
            Ok(h) => h,
            Err(e) => return (packets, e),
        };
        if seq0 && first.seq != 0 {
            return (packets, End::OutOfOrder);
        }
        if first.len > max {
            return (packets, End::TooLarge);
        }
        let mut h = first;
        let mut payload = Vec::new();
        loop {
            let end = off + HEADER_LEN + h.len;
            if data.len() < end {
                return (packets, End::Truncated);
            }
            payload.extend_from_slice(&data[off + HEADER_LEN..end]);
            off = end;
            if !h.continues() {
                break;
            }
            h = match header(off) {
                Ok(n) => n,
                Err(e) => return (packets, e),
            };
            if payload.len() + h.len > max {
                return (packets, End::TooLarge);
            }
        }
        packets.push((first.seq, h.seq, payload));
    }
}

async fn read_all(data: &[u8], max: usize, seq0: bool, compressed: bool) -> Read {
    let l = loopback();
    let addr = l.listener.local_addr().expect("addr");
    let (client, accepted) = tokio::join!(TcpStream::connect(addr), l.listener.accept());
    let mut client = client.expect("connect");
    let (server, _) = accepted.expect("accept");
    // Reset instead of TIME_WAIT: thousands of connections a second.
    let _ = client.set_zero_linger();
    let _ = server.set_zero_linger();
    let mut io = PacketIo::new(Stream::Plain(server));
    if compressed {
        io.compress_after_next_flush();
        io.flush().await.expect("empty flush");
    }
    let writer = async {
        let _ = client.write_all(data).await;
        let _ = client.shutdown().await;
        client
    };
    let reader = async {
        let mut packets = Vec::new();
        loop {
            match io.read_packet_seq(max, seq0.then_some(0)).await {
                Ok(p) => {
                    assert!(p.payload.len() <= max, "packet above the limit");
                    packets.push((p.seq, p.last_seq, p.payload.to_vec()));
                }
                Err(e) => return (packets, end_of(e)),
            }
        }
    };
    let (_client, read) = tokio::join!(writer, reader);
    read
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let mode = input.u8();
    let max = 1usize << (input.u8() % 25);
    let stream = input.rest();
    let (compressed, seq0) = (mode & 1 != 0, mode & 2 != 0);

    let got = loopback()
        .rt
        .block_on(read_all(stream, max, seq0, compressed));
    if compressed {
        let plain: usize = got.0.iter().map(|p| p.2.len()).sum();
        // Deflate expands at most ~1032:1.
        assert!(
            plain <= 1100 * stream.len() + 64,
            "inflated beyond deflate's ratio"
        );
        return;
    }
    let want = model(stream, max, seq0);
    assert_eq!(got, want, "PacketIo disagrees with the framing model");

    // complete_packet_len: the first logical packet's extent.
    let (unlimited, _) = model(stream, usize::MAX, false);
    match framing::complete_packet_len(stream) {
        Some(n) => {
            assert!(n <= stream.len());
            assert!(!unlimited.is_empty(), "complete packet the model lacks");
            let plen = unlimited[0].2.len();
            assert_eq!(n, plen + HEADER_LEN * (1 + plen / MAX_CHUNK));
        }
        None => assert!(
            unlimited.is_empty(),
            "model found a packet complete_packet_len missed"
        ),
    }

    // write_packet then read back: the same payload, one packet.
    let mut out = BytesMut::new();
    let next = framing::write_packet(&mut out, mode, stream);
    assert_eq!(framing::complete_packet_len(&out), Some(out.len()));
    let (back, end) = model(&out, usize::MAX, false);
    assert_eq!(end, End::Closed);
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].2, stream);
    assert_eq!(back[0].1.wrapping_add(1), next);
});
