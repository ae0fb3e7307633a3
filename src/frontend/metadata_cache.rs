//! MariaDB's cache-metadata capability, given to clients by the proxy.
//!
//! A client with it reads a "metadata follows" byte after every column
//! count, and the EXECUTE of a prepared statement leaves the column
//! definitions out when they are the ones the client last received for
//! that statement and the session's `character_set_client` has not changed
//! since (`metadata_columns_changed`, sql/protocol.cc: a checksum over what
//! goes into the definitions; prepare counts as a send; results of a stored
//! procedure and of text statements always carry them).
//!
//! Backends never ask for the capability: one backend statement serves many
//! clients, and the server's memory of what it sent is per backend
//! statement. So backends always send definitions, and the relay drops
//! those the client already has, deciding from the bytes: a hash of the
//! definitions (seeded with the client's character set) per client
//! statement stands in for the server's checksum.

use std::hash::{DefaultHasher, Hasher};

use bytes::{BufMut, BytesMut};

use crate::protocol::caps::Caps;
use crate::protocol::lenenc::put_lenenc_int;

/// How a response's column definitions reach the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Metadata {
    /// The client lacks the capability: column counts as the server sends
    /// them.
    #[default]
    Plain,
    /// A "metadata follows" byte of 1 after every column count; definitions
    /// always sent (text results, stored-procedure results).
    Always,
    /// The first result set of a prepared statement's EXECUTE: definitions
    /// sent unless their hash (seeded with `seed`) is `known`, what the
    /// client last received for the statement.
    Cached {
        /// The session's character set, folded into the hash.
        seed: u64,
        /// The hash of what the client has (`None`: nothing yet).
        known: Option<u64>,
    },
}

impl Metadata {
    /// The mode for a response to a client with `caps`: `execute` carries
    /// the statement's known hash for the EXECUTE of a [`cacheable`]
    /// statement (`None` otherwise); `seed` is only asked for then.
    pub fn for_response(
        caps: Caps,
        seed: impl FnOnce() -> u64,
        execute: Option<Option<u64>>,
    ) -> Metadata {
        match execute {
            _ if !caps.cache_metadata() => Metadata::Plain,
            Some(known) => Metadata::Cached {
                seed: seed(),
                known,
            },
            None => Metadata::Always,
        }
    }
}

/// Whether the server may leave out the definitions of a prepared
/// statement's results: a single plain statement that returns rows. Stored
/// program code (`CALL`, `BEGIN NOT ATOMIC`, `IF`, `FOR` …) always sends
/// them; anything else not recognised is treated the same (fail closed:
/// definitions sent where the server might have left them out).
pub fn cacheable(analysis: &crate::sql::Analysis) -> bool {
    use crate::sql::Kind;
    !analysis.incomplete
        && analysis.statements.len() == 1
        && analysis.statements.iter().all(|s| {
            matches!(
                s.kind,
                Kind::Select
                    | Kind::Insert
                    | Kind::Update
                    | Kind::Delete
                    | Kind::Replace
                    | Kind::Show
                    | Kind::With
                    | Kind::Values
                    | Kind::Table
            )
        })
}

/// The seed for a session whose `character_set_client` is `charset` (the
/// tracked value, or the login collation when it was never set).
pub fn seed(charset: &str, login_collation: u16) -> u64 {
    let mut h = DefaultHasher::new();
    h.write(charset.as_bytes());
    h.write_u16(login_collation);
    h.finish()
}

/// Hashes column definitions as a client receives them.
#[derive(Debug, Clone)]
pub struct DefsHash(DefaultHasher);

impl DefsHash {
    /// A hash over nothing yet, for a session with `seed`.
    pub fn new(seed: u64) -> Self {
        let mut h = DefaultHasher::new();
        h.write_u64(seed);
        Self(h)
    }

    /// Adds one column definition's payload.
    pub fn add(&mut self, def: &[u8]) {
        self.0.write_usize(def.len());
        self.0.write(def);
    }

    /// The hash so far.
    pub fn finish(&self) -> u64 {
        self.0.finish()
    }
}

/// The hash of `defs` (payloads) for a session with `seed`: what a prepare
/// reply leaves the client with.
pub fn hash_defs<'a>(seed: u64, defs: impl IntoIterator<Item = &'a [u8]>) -> u64 {
    let mut h = DefsHash::new(seed);
    for d in defs {
        h.add(d);
    }
    h.finish()
}

/// A column-count payload for a result set the proxy makes itself (`n`
/// columns, definitions sent), as a client with `caps` reads it.
pub fn put_column_count(b: &mut BytesMut, n: u64, caps: Caps) {
    put_lenenc_int(b, n);
    if caps.cache_metadata() {
        b.put_u8(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::caps::mariadb::CACHE_METADATA;

    #[test]
    fn the_mode_follows_the_capability_and_the_command() {
        let with = Caps(CACHE_METADATA);
        let without = Caps(0);
        assert_eq!(
            Metadata::for_response(without, || 1, Some(Some(2))),
            Metadata::Plain
        );
        assert_eq!(Metadata::for_response(with, || 1, None), Metadata::Always);
        assert_eq!(
            Metadata::for_response(with, || 1, Some(None)),
            Metadata::Cached {
                seed: 1,
                known: None
            }
        );
    }

    #[test]
    fn only_plain_statements_may_leave_definitions_out() {
        let opts = crate::sql::LexOptions::default();
        let ok = |sql: &str| cacheable(&crate::sql::analyze(sql.as_bytes(), opts));
        assert!(ok("SELECT a FROM t WHERE id = ?"));
        assert!(ok("/* c */ WITH x AS (SELECT 1) SELECT * FROM x"));
        assert!(ok("DELETE FROM t WHERE id = ? RETURNING id"));
        assert!(!ok("CALL p(?)"));
        assert!(!ok("BEGIN NOT ATOMIC SELECT 1 AS a; SELECT 2 AS b; END"));
        assert!(!ok("IF 1 THEN SELECT 1; END IF"));
        assert!(!ok("FOR i IN 1..2 DO SELECT i; END FOR"));
    }

    #[test]
    fn the_hash_sees_every_byte_and_the_charset() {
        let a: &[&[u8]] = &[b"\x03defcol1", b"\x03defcol2"];
        let b: &[&[u8]] = &[b"\x03defcol1", b"\x03defcol3"];
        let joined: &[&[u8]] = &[b"\x03defcol1\x03defcol2"];
        let s = seed("utf8mb4", 45);
        assert_eq!(
            hash_defs(s, a.iter().copied()),
            hash_defs(s, a.iter().copied())
        );
        assert_ne!(
            hash_defs(s, a.iter().copied()),
            hash_defs(s, b.iter().copied())
        );
        assert_ne!(
            hash_defs(s, a.iter().copied()),
            hash_defs(s, joined.iter().copied()),
            "definition boundaries count"
        );
        assert_ne!(
            hash_defs(s, a.iter().copied()),
            hash_defs(seed("latin1", 45), a.iter().copied())
        );
    }

    #[test]
    fn proxy_made_column_counts_carry_the_byte_for_caching_clients() {
        let mut b = BytesMut::new();
        put_column_count(&mut b, 3, Caps(CACHE_METADATA));
        assert_eq!(&b[..], &[3, 1]);
        b.clear();
        put_column_count(&mut b, 300, Caps(0));
        assert_eq!(&b[..], &[0xfc, 0x2c, 0x01]);
    }
}
