//! COM_STMT_EXECUTE and COM_STMT_BULK_EXECUTE parameter blocks as a client
//! sends them for a statement with any number of parameters, and the
//! rewrite the proxy forwards to the backend statement.
//!
//! Input: `num_params u16 | backend statement id u32 | payload`.
//!
//! Invariants: no panic; the type block is a slice of the payload of
//! exactly 2 bytes per parameter; "types cut off" and "parses" exclude each
//! other; the rewrite carries the backend id, keeps every other byte, and
//! inserts the remembered types exactly where a re-parse finds them.
#![no_main]

use libfuzzer_sys::fuzz_target;
use myplex::frontend::session::bulk;
use myplex::prepared::execute;
use myplex_fuzz::{Input, within};

fn execute(payload: &[u8], n: u16, backend_id: u32, remembered: &[u8]) {
    let truncated = execute::types_truncated(payload, n);
    let _ = execute::stmt_id(payload);
    let with_id = execute::with_id(payload, backend_id);
    assert_eq!(with_id.len(), payload.len());
    let Some(exec) = execute::parse(payload, n) else {
        return;
    };
    assert!(!truncated, "parsed a request whose types are cut off");
    assert_eq!(execute::stmt_id(&with_id), Some(backend_id));
    let _ = exec.wants_cursor();
    if let Some(t) = exec.types {
        assert!(within(t, payload));
        assert_eq!(t.len(), 2 * usize::from(n));
    }
    for insert in [None, Some(remembered)] {
        let out = execute::rewrite(payload, &exec, backend_id, insert);
        assert_eq!(execute::stmt_id(&out), Some(backend_id));
        let back = execute::parse(&out, n).expect("rewritten request parses");
        assert_eq!((back.flags, out[0]), (exec.flags, payload[0]));
        match (exec.types, insert) {
            (None, Some(types)) if n > 0 => {
                assert_eq!(out.len(), payload.len() + types.len());
                assert_eq!(back.types, Some(types), "inserted types not where parsed");
            }
            _ => {
                assert_eq!(out.len(), payload.len());
                assert_eq!(out[5..], payload[5..]);
                assert_eq!(back.types, exec.types);
            }
        }
    }
}

fn bulk_execute(payload: &[u8], n: u16, backend_id: u32, remembered: &[u8]) {
    let Some(b) = bulk::parse(payload, n) else {
        assert!(payload.len() < 7);
        return;
    };
    if let Some(t) = b.types {
        assert!(within(t, payload));
        assert_eq!(t.len(), 2 * usize::from(n));
    }
    let sends_types = b.flags & bulk::SEND_TYPES_TO_SERVER != 0;
    let insert = (!sends_types).then_some(remembered);
    let out = bulk::rewrite(payload, backend_id, insert);
    let back = bulk::parse(&out, n).expect("rewritten request parses");
    assert_eq!(back.stmt_id, backend_id);
    if let Some(types) = insert {
        assert_eq!(back.types, Some(types), "inserted types not where parsed");
        assert_eq!(out[7 + types.len()..], payload[7..]);
    } else {
        assert_eq!(out[5..], payload[5..]);
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    // Up to 4096 parameters keep the remembered type block small.
    let n = input.u16() % 4097;
    let backend_id = input.u32();
    let payload = input.rest();
    let remembered: Vec<u8> = (0..2 * usize::from(n)).map(|i| i as u8).collect();
    execute(payload, n, backend_id, &remembered);
    bulk_execute(payload, n, backend_id, &remembered);
});
