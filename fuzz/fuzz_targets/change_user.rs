//! COM_CHANGE_USER as a logged-in client sends it, under any capability
//! flags the client negotiated, and the password check it leads to.
//!
//! Input: `client capabilities u32 | payload`.
//!
//! Invariants: no panic; every field is a slice of the payload in wire
//! order (user right after the command byte, NUL-terminated); the auth
//! length byte is honoured with CLIENT_SECURE_CONNECTION; a wrong password
//! is never accepted.
#![no_main]

use libfuzzer_sys::fuzz_target;
use myplex::config::AuthPluginName;
use myplex::frontend::auth::Credential;
use myplex::frontend::session::change_user;
use myplex::protocol::caps::flag;
use myplex_fuzz::{Input, within};

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let caps = input.u32();
    let payload = input.rest();
    let Some(req) = change_user::parse(payload, caps) else {
        return;
    };
    for field in [
        req.user,
        req.auth,
        req.schema,
        req.plugin.unwrap_or_default(),
    ] {
        assert!(within(field, payload), "field outside the payload");
    }
    assert!(!req.user.contains(&0));
    assert_eq!(&payload[1..1 + req.user.len()], req.user);
    assert_eq!(payload.get(1 + req.user.len()), Some(&0));
    if caps & flag::SECURE_CONNECTION != 0 {
        assert_eq!(usize::from(payload[2 + req.user.len()]), req.auth.len());
    }
    if caps & flag::PLUGIN_AUTH == 0 {
        assert!(req.plugin.is_none());
    }
    let cred = Credential {
        native: Some([0; 20]),
        sha2: Some([0; 32]),
        empty: false,
    };
    for plugin in [
        AuthPluginName::MysqlNativePassword,
        AuthPluginName::CachingSha2Password,
    ] {
        assert!(!cred.verify(plugin, b"abcdefghijklmnopqrst", req.auth));
    }
});
