//! A backend's answer to a command as the relay classifies it: the response
//! tracker (where an answer ends, in both terminator styles, with or
//! without a cursor), and the control packets inside it: OK (with the
//! session-state block and the per-client tracker filter), ERR, EOF,
//! progress reports, column definitions rewritten for extended type info.
//!
//! Input: `shape u8 | style u8 | packet…` (`style` bit 0: DEPRECATE_EOF,
//! bit 1: the command asked for a cursor; see `myplex_fuzz` for `packet`).
//!
//! Invariants: no panic; once the tracker says "done", every further
//! packet is malformed; OK and ERR packets survive write-then-parse; the
//! session-track filter keeps a subset of the entries, in order, and
//! filtering its output again removes nothing.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use myplex::protocol::caps::{Caps, column_def_for, mariadb};
use myplex::protocol::errors::RawErr;
use myplex::protocol::packets::{ErrPacket, OkPacket, parse_eof, status};
use myplex::protocol::response::{Class, Shape, Tracker, end_status, is_progress};
use myplex::protocol::session_track::{self, ClientTrackers};
use myplex_fuzz::{Input, within};

const SHAPES: [Shape; 5] = [
    Shape::Query,
    Shape::Prepare,
    Shape::FieldList,
    Shape::Fetch,
    Shape::Single,
];

fn trackers() -> [ClientTrackers; 3] {
    [
        ClientTrackers::default(),
        ClientTrackers {
            schema: true,
            state_change: true,
            system_variables: None,
            transaction_info: true,
        },
        ClientTrackers {
            schema: true,
            state_change: false,
            system_variables: Some(vec!["autocommit".into(), "sql_mode".into()]),
            transaction_info: false,
        },
    ]
}

fn ok_packet(p: &[u8]) {
    let Some(ok) = OkPacket::parse(p) else {
        return;
    };
    assert!(within(ok.info, p) && within(ok.session_state, p));
    for track in [true, false] {
        let mut out = BytesMut::new();
        ok.write(&mut out, track);
        let back = OkPacket::parse(&out).expect("our OK parses");
        let kept = track && !ok.session_state.is_empty();
        let mut want = ok.clone();
        if !kept {
            want.status &= !status::SESSION_STATE_CHANGED;
            want.session_state = &[];
        }
        assert_eq!(back, want, "OK round trip (session_track {track})");
    }
    let entries: Vec<_> = session_track::entries(ok.session_state).collect();
    for e in &entries {
        assert!(within(e.data, ok.session_state));
        let _ = e.change();
    }
    for t in trackers() {
        let Some(filtered) = t.filter(ok.session_state) else {
            continue;
        };
        let kept: Vec<_> = session_track::entries(&filtered).collect();
        let mut rest = entries.iter();
        for k in &kept {
            assert!(
                rest.any(|e| e.kind == k.kind && e.data == k.data),
                "filter invented or reordered an entry"
            );
        }
        assert!(kept.len() < entries.len() || entries.is_empty());
        assert_eq!(t.filter(&filtered), None, "filter is not idempotent");
    }
}

fn err_packet(p: &[u8]) {
    let raw = RawErr::from_payload(p);
    let Some(e) = ErrPacket::parse(p) else {
        return;
    };
    if let Some(raw) = raw {
        assert_eq!(raw.code(), e.code);
    }
    let mut out = BytesMut::new();
    e.write(&mut out);
    assert_eq!(ErrPacket::parse(&out), Some(e), "ERR round trip");
}

fn packet(p: &[u8]) {
    ok_packet(p);
    err_packet(p);
    let _ = parse_eof(p);
    let _ = end_status(p);
    let _ = is_progress(p);
    let ext = Caps(u64::from(mariadb::EXTENDED_TYPE_INFO) << 32);
    match column_def_for(p, ext) {
        std::borrow::Cow::Borrowed(b) => assert_eq!(b, p),
        std::borrow::Cow::Owned(o) => assert_eq!(o.len(), p.len() + 1),
    }
    assert_eq!(column_def_for(p, Caps(0)), p);
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let shape = SHAPES[usize::from(input.u8()) % SHAPES.len()];
    let style = input.u8();
    let mut t = Tracker::with_style(shape, style & 1 != 0).expect_cursor(style & 2 != 0);
    while let Some((p, multi)) = input.packet() {
        let was_done = t.done();
        let class = t.next(p, multi);
        if was_done {
            assert_eq!(class, Class::Malformed, "a packet after the end");
        }
        if class == Class::Malformed {
            assert!(t.done(), "malformed but still expecting more");
        }
        packet(p);
    }
});
