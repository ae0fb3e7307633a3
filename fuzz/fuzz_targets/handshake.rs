//! The login's parsers: a client's handshake response (what a client sends
//! before it is authenticated) with the capability negotiation and the
//! password checks that follow, and a server's greeting (what a backend,
//! or anything listening at its address, sends first).
//!
//! Input: `which u8 | payload`. Even `which`: handshake response; odd:
//! server greeting.
//!
//! Invariants: no panic; the fields read are no longer than the input;
//! negotiated capabilities are within what was offered; a wrong password
//! is never accepted; a greeting that parses writes back to one that
//! parses to the same fields.
#![no_main]

use libfuzzer_sys::fuzz_target;
use myplex::config::AuthPluginName;
use myplex::frontend::auth::{self, Credential};
use myplex::frontend::handshake;
use myplex::protocol::caps::{self, Caps};
use myplex::protocol::greeting::Greeting;
use myplex_fuzz::Input;

/// A credential for a password the fuzzer cannot produce a scramble for
/// (its stage-2 hashes are all zero bytes: no SHA1/SHA256 preimage).
fn credential() -> Credential {
    Credential {
        native: Some([0; 20]),
        sha2: Some([0; 32]),
        empty: false,
    }
}

const NONCE: [u8; 20] = *b"abcdefghijklmnopqrst";

fn client_response(payload: &[u8]) {
    let Some(r) = handshake::parse_response(payload) else {
        return;
    };
    assert!(r.auth.len() <= payload.len());
    assert!(r.schema.as_ref().is_none_or(|s| s.len() <= payload.len()));
    assert!(r.plugin.as_ref().is_none_or(|p| p.len() <= payload.len()));
    assert!(
        r.user.len() <= 3 * payload.len(),
        "lossy UTF-8 grows at most 3x"
    );
    for (server, tls) in [(u64::MAX, true), (caps::flag::PROTOCOL_41.into(), false)] {
        let offer = caps::greeting_offer(server, tls);
        let c = Caps::negotiate(r.caps, offer);
        assert_eq!(c.0 & !offer, 0, "negotiated a capability not offered");
        let flavour = c.flavour();
        let _ = flavour.label();
        let _ = flavour.backend_caps(server);
    }
    let cred = credential();
    for plugin in [
        AuthPluginName::MysqlNativePassword,
        AuthPluginName::CachingSha2Password,
    ] {
        assert!(
            !cred.verify(plugin, &NONCE, &r.auth),
            "wrong password accepted"
        );
    }
    let _ = auth::native_stage1(&[0; 20], &NONCE, &r.auth);
}

fn server_greeting(payload: &[u8]) {
    let Some(g) = Greeting::parse(payload) else {
        return;
    };
    assert!(g.version.len() + g.scramble.len() + g.auth_plugin.len() <= payload.len());
    let _ = caps::greeting_offer(g.capabilities, true);
    // The writer's layout for what it is given: a 20-byte scramble and
    // NUL-free strings, with the capabilities that carry them.
    let canonical = g.scramble.len() == 20
        && !g.scramble.contains(&0)
        && !g.version.contains(&0)
        && !g.auth_plugin.contains(&0)
        && g.capabilities & u64::from(caps::flag::SECURE_CONNECTION) != 0
        && g.capabilities & u64::from(caps::flag::PLUGIN_AUTH) != 0;
    if canonical {
        let mut out = bytes::BytesMut::new();
        g.write(&mut out);
        let mut back = Greeting::parse(&out).expect("our greeting parses");
        if g.capabilities & u64::from(caps::flag::MYSQL) != 0 {
            // Extended capabilities travel only toward MariaDB clients.
            back.capabilities |= g.capabilities & !0xFFFF_FFFF;
        }
        assert_eq!(back, g, "greeting round trip");
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    if input.u8() % 2 == 0 {
        client_response(input.rest());
    } else {
        server_greeting(input.rest());
    }
});
