//! The compressed protocol's frame reader (`wire::compress::Zlib`), fed a
//! peer's compressed byte stream in two arbitrary pieces, and its writer.
//!
//! Input: `split u16 | frame limit u16 | compressed stream`.
//!
//! Invariants: no panic or hang; decoding the stream in two pieces gives
//! the same plain bytes and the same verdict as decoding it at once; what
//! is left undecoded is less than one whole frame; output never exceeds
//! what the frame headers announce; no frame announcing more plain bytes
//! than the frame limit is decoded (the stream fails there);
//! encode-then-decode gives back the input exactly, for any input.
#![no_main]

use std::cell::RefCell;

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use myplex::wire::compress::{FRAME_HEADER, Zlib};
use myplex_fuzz::Input;

fn u24(b: &[u8]) -> usize {
    usize::from(b[0]) | usize::from(b[1]) << 8 | usize::from(b[2]) << 16
}

thread_local! {
    /// Zlib state is large (deflate tables); one per use, reused across
    /// inputs as a connection reuses its own (each frame resets it).
    static STATE: RefCell<[Zlib; 3]> = RefCell::new([Zlib::new(), Zlib::new(), Zlib::new()]);
}

/// Decodes `parts` fed one after another; plain bytes, whether it failed,
/// bytes left undecoded.
fn decode(z: &mut Zlib, parts: &[&[u8]], limit: usize) -> (BytesMut, bool, usize) {
    z.raw.clear();
    z.set_frame_limit(limit);
    let mut plain = BytesMut::new();
    for part in parts {
        z.raw.extend_from_slice(part);
        // One frame per call: the reader asks again until nothing whole
        // is left.
        loop {
            let before = plain.len();
            match z.decode(&mut plain) {
                Ok(0) => break,
                Ok(n) => assert_eq!(n, plain.len() - before, "reported length"),
                Err(_) => return (plain, true, z.pending()),
            }
        }
    }
    (plain, false, z.pending())
}

fuzz_target!(|data: &[u8]| {
    STATE.with_borrow_mut(|[a, b, w]| check(data, a, b, w));
});

fn check(data: &[u8], a: &mut Zlib, b: &mut Zlib, w: &mut Zlib) {
    let mut input = Input::new(data);
    let split = usize::from(input.u16());
    let limit = usize::from(input.u16());
    let stream = input.rest();
    let at = if stream.is_empty() {
        0
    } else {
        split % (stream.len() + 1)
    };

    let (whole, whole_err, pending) = decode(a, &[stream], limit);
    let (parts, parts_err, _) = decode(b, &[&stream[..at], &stream[at..]], limit);
    assert_eq!(whole_err, parts_err, "verdict depends on how bytes arrive");
    assert_eq!(whole, parts, "plain bytes depend on how bytes arrive");

    // Bounded by the frame headers: each frame yields its announced length
    // (or its raw length when sent uncompressed).
    let mut announced = 0;
    let mut off = 0;
    while stream.len() - off >= FRAME_HEADER {
        let (clen, ulen) = (u24(&stream[off..]), u24(&stream[off + 4..]));
        if stream.len() - off - FRAME_HEADER < clen {
            break;
        }
        let plain = if ulen == 0 { clen } else { ulen };
        if plain > limit {
            assert!(whole_err, "a frame above the limit was accepted");
            break;
        }
        announced += plain;
        off += FRAME_HEADER + clen;
    }
    assert!(whole.len() <= announced, "more plain bytes than announced");
    if !whole_err {
        assert_eq!(whole.len(), announced);
        assert_eq!(pending, stream.len() - off, "whole frames left undecoded");
    }

    // The writer: any bytes survive a round trip, in sequence.
    w.out.clear();
    w.encode(stream).expect("encode");
    w.encode(&stream[..at]).expect("encode");
    let frames = w.out.split().freeze();
    let (back, err, left) = decode(a, &[&frames], usize::MAX);
    assert!(!err, "our own frames do not decode");
    assert_eq!(left, 0);
    assert_eq!(&back[..stream.len()], stream);
    assert_eq!(&back[stream.len()..], &stream[..at]);
}
