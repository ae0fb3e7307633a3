//! Client authentication against the configured users: stored verifiers and
//! the challenge-response checks of `mysql_native_password` and the
//! `caching_sha2_password` fast path. Pure functions; the packet exchange
//! lives in `handshake`.

use sha1::{Digest, Sha1};
use sha2::Sha256;

use crate::config::{AuthPluginName, UserConfig};

/// What the proxy stores to verify one user's password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    /// SHA1(SHA1(password)), enables mysql_native_password.
    pub native: Option<[u8; 20]>,
    /// SHA256(SHA256(password)), enables caching_sha2_password.
    pub sha2: Option<[u8; 32]>,
    /// The password is empty (the client sends an empty response).
    pub empty: bool,
}

impl Credential {
    /// Builds the verifier of a configured user.
    pub fn from_user(u: &UserConfig) -> Option<Self> {
        if let Some(pw) = &u.password {
            let s1: [u8; 20] = Sha1::digest(pw.as_bytes()).into();
            let s2: [u8; 32] = Sha256::digest(pw.as_bytes()).into();
            return Some(Self {
                native: Some(Sha1::digest(s1).into()),
                sha2: Some(Sha256::digest(s2).into()),
                empty: pw.is_empty(),
            });
        }
        if let Some(h) = &u.password_sha1 {
            return Some(Self {
                native: Some(parse_sha1_hash(h)?),
                sha2: None,
                empty: false,
            });
        }
        if let Some(h) = &u.password_sha256 {
            return Some(Self {
                native: None,
                sha2: Some(parse_sha256_hash(h)?),
                empty: false,
            });
        }
        None
    }

    /// True when this credential can verify `plugin`.
    pub fn supports(&self, plugin: AuthPluginName) -> bool {
        match plugin {
            AuthPluginName::MysqlNativePassword => self.native.is_some(),
            AuthPluginName::CachingSha2Password => self.sha2.is_some(),
        }
    }

    /// Checks a client's response to `scramble` under `plugin`.
    pub fn verify(&self, plugin: AuthPluginName, scramble: &[u8], response: &[u8]) -> bool {
        if response.is_empty() {
            return self.empty;
        }
        if self.empty {
            return false;
        }
        match plugin {
            AuthPluginName::MysqlNativePassword => self
                .native
                .is_some_and(|h2| verify_native(&h2, scramble, response)),
            AuthPluginName::CachingSha2Password => self
                .sha2
                .is_some_and(|h2| verify_sha2(&h2, scramble, response)),
        }
    }
}

fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// `response = SHA1(pw) XOR SHA1(scramble + SHA1(SHA1(pw)))`: recover
/// SHA1(pw) and check that hashing it again gives the stored value.
fn verify_native(h2: &[u8; 20], scramble: &[u8], response: &[u8]) -> bool {
    native_stage1(h2, scramble, response).is_some()
}

/// SHA1(password) recovered from a `mysql_native_password` response to
/// `scramble`, when it matches the stored SHA1(SHA1(password)) `h2`. It is
/// what a backend login as the same user needs (`crate::server_users`).
pub fn native_stage1(h2: &[u8; 20], scramble: &[u8], response: &[u8]) -> Option<[u8; 20]> {
    if response.len() != 20 {
        return None;
    }
    let mut h = Sha1::new();
    h.update(scramble);
    h.update(h2);
    let mask: [u8; 20] = h.finalize().into();
    let mut candidate = [0u8; 20];
    for i in 0..20 {
        candidate[i] = response[i] ^ mask[i];
    }
    let check: [u8; 20] = Sha1::digest(candidate).into();
    ct_eq(&check, h2).then_some(candidate)
}

/// `response = SHA256(pw) XOR SHA256(SHA256(SHA256(pw)) + scramble)`.
fn verify_sha2(h2: &[u8; 32], scramble: &[u8], response: &[u8]) -> bool {
    if response.len() != 32 {
        return false;
    }
    let mut h = Sha256::new();
    h.update(h2);
    h.update(scramble);
    let mask: [u8; 32] = h.finalize().into();
    let mut candidate = [0u8; 32];
    for i in 0..32 {
        candidate[i] = response[i] ^ mask[i];
    }
    let check: [u8; 32] = Sha256::digest(candidate).into();
    ct_eq(&check, h2)
}

fn hex<const N: usize>(s: &str) -> Option<[u8; N]> {
    if s.len() != N * 2 || !s.is_ascii() {
        return None;
    }
    let mut out = [0u8; N];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

/// Parses `*` + 40 hex digits (the `mysql.user` form).
pub fn parse_sha1_hash(s: &str) -> Option<[u8; 20]> {
    hex(s.strip_prefix('*')?)
}

/// Parses 64 hex digits.
pub fn parse_sha256_hash(s: &str) -> Option<[u8; 32]> {
    hex(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(pw: &str) -> UserConfig {
        UserConfig {
            name: "u".into(),
            password: Some(pw.into()),
            ..Default::default()
        }
    }

    #[test]
    fn native_matches_mysql_common_scramble() {
        let nonce = b"abcdefghijklmnopqrst";
        let resp = mysql_common::scramble::scramble_native(nonce, b"secret").expect("scramble");
        let c = Credential::from_user(&user("secret")).expect("cred");
        assert!(c.verify(AuthPluginName::MysqlNativePassword, nonce, &resp));
        let h2 = c.native.expect("native");
        let s1: [u8; 20] = Sha1::digest(b"secret").into();
        assert_eq!(native_stage1(&h2, nonce, &resp), Some(s1));
        let wrong = mysql_common::scramble::scramble_native(nonce, b"nope").expect("scramble");
        assert!(!c.verify(AuthPluginName::MysqlNativePassword, nonce, &wrong));
        assert!(!c.verify(AuthPluginName::MysqlNativePassword, nonce, &[]));
        assert!(!c.verify(AuthPluginName::MysqlNativePassword, nonce, &resp[..5]));
    }

    #[test]
    fn sha2_matches_mysql_common_scramble() {
        let nonce = b"abcdefghijklmnopqrst";
        let resp = mysql_common::scramble::scramble_sha256(nonce, b"secret").expect("scramble");
        let c = Credential::from_user(&user("secret")).expect("cred");
        assert!(c.verify(AuthPluginName::CachingSha2Password, nonce, &resp));
        let other = mysql_common::scramble::scramble_sha256(b"tsrqponmlkjihgfedcba", b"secret")
            .expect("scramble");
        assert!(!c.verify(AuthPluginName::CachingSha2Password, nonce, &other));
    }

    #[test]
    fn stored_sha1_hash_as_in_mysql_user() {
        // SELECT PASSWORD('secret') on MariaDB.
        let u = UserConfig {
            name: "u".into(),
            password_sha1: Some("*14E65567ABDB5135D0CFD9A70B3032C179A49EE7".into()),
            ..Default::default()
        };
        let c = Credential::from_user(&u).expect("cred");
        let nonce = b"01234567890123456789";
        let resp = mysql_common::scramble::scramble_native(nonce, b"secret").expect("scramble");
        assert!(c.verify(AuthPluginName::MysqlNativePassword, nonce, &resp));
        assert!(!c.supports(AuthPluginName::CachingSha2Password));
    }

    #[test]
    fn empty_password() {
        let c = Credential::from_user(&user("")).expect("cred");
        assert!(c.verify(AuthPluginName::MysqlNativePassword, b"x", &[]));
        assert!(!Credential::from_user(&user("a")).expect("cred").verify(
            AuthPluginName::MysqlNativePassword,
            b"x",
            &[]
        ));
    }

    #[test]
    fn hash_parsing() {
        assert!(parse_sha1_hash("14E65567ABDB5135D0CFD9A70B3032C179A49EE7").is_none());
        assert!(parse_sha1_hash("*14E65567ABDB5135D0CFD9A70B3032C179A49EE7").is_some());
        assert!(parse_sha256_hash(&"ab".repeat(32)).is_some());
        assert!(parse_sha256_hash("zz").is_none());
    }
}
