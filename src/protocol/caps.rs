//! Capability flags: what myplex can carry, what the greeting offers (the
//! backend's own offer limited to that), and the *flavour* of a session —
//! the capabilities that change row bytes or statement semantics, which a
//! backend connection must share with the client it serves (part of the
//! pool key, see `pool::keys`).
//!
//! Capabilities are 64 bits wide as in MariaDB: the low 32 bits are the
//! `CLIENT_*` flags of the handshake, the high 32 bits MariaDB's extended
//! capabilities (sent in the greeting's and the handshake response's filler
//! when the server leaves bit 0, `CLIENT_MYSQL`, clear).

/// `CLIENT_*` capability bits (low 32 bits).
pub mod flag {
    pub const LONG_PASSWORD: u32 = 0x0000_0001;
    /// Bit 0 under its MariaDB name: set by MySQL servers and clients; a
    /// MariaDB server leaves it clear and a MariaDB client then clears it
    /// too and sends its extended capabilities.
    pub const MYSQL: u32 = LONG_PASSWORD;
    pub const FOUND_ROWS: u32 = 0x0000_0002;
    pub const LONG_FLAG: u32 = 0x0000_0004;
    pub const CONNECT_WITH_DB: u32 = 0x0000_0008;
    pub const NO_SCHEMA: u32 = 0x0000_0010;
    pub const COMPRESS: u32 = 0x0000_0020;
    pub const ODBC: u32 = 0x0000_0040;
    pub const LOCAL_FILES: u32 = 0x0000_0080;
    pub const IGNORE_SPACE: u32 = 0x0000_0100;
    pub const PROTOCOL_41: u32 = 0x0000_0200;
    pub const INTERACTIVE: u32 = 0x0000_0400;
    pub const SSL: u32 = 0x0000_0800;
    pub const IGNORE_SIGPIPE: u32 = 0x0000_1000;
    pub const TRANSACTIONS: u32 = 0x0000_2000;
    pub const RESERVED: u32 = 0x0000_4000;
    pub const SECURE_CONNECTION: u32 = 0x0000_8000;
    pub const MULTI_STATEMENTS: u32 = 0x0001_0000;
    pub const MULTI_RESULTS: u32 = 0x0002_0000;
    pub const PS_MULTI_RESULTS: u32 = 0x0004_0000;
    pub const PLUGIN_AUTH: u32 = 0x0008_0000;
    pub const CONNECT_ATTRS: u32 = 0x0010_0000;
    pub const PLUGIN_AUTH_LENENC_DATA: u32 = 0x0020_0000;
    pub const CAN_HANDLE_EXPIRED_PASSWORDS: u32 = 0x0040_0000;
    pub const SESSION_TRACK: u32 = 0x0080_0000;
    pub const DEPRECATE_EOF: u32 = 0x0100_0000;
    pub const QUERY_ATTRIBUTES: u32 = 0x0800_0000;
    /// A client-side flag servers echo in their greeting; no protocol effect.
    pub const REMEMBER_OPTIONS: u32 = 0x8000_0000;
}

/// MariaDB's extended capabilities, as bits of the 64-bit capability word.
pub mod mariadb {
    /// Progress packets (ERR with code 0xFFFF) during long statements.
    pub const PROGRESS: u64 = 1 << 32;
    /// COM_MULTI (deprecated by MariaDB, never offered by 10.11).
    pub const COM_MULTI: u64 = 1 << 33;
    /// COM_STMT_BULK_EXECUTE (0xFA).
    pub const STMT_BULK_OPERATIONS: u64 = 1 << 34;
    /// Extended type information in column definitions (`json`, `uuid`…).
    pub const EXTENDED_TYPE_INFO: u64 = 1 << 35;
    /// Result-set metadata skipped when unchanged: every column count
    /// carries a "metadata follows" byte, and an EXECUTE whose columns are
    /// those the client last received sends none. Backends never ask for
    /// it (their statements are shared); the proxy gives it to the client
    /// (see `frontend::metadata_cache`).
    pub const CACHE_METADATA: u64 = 1 << 36;
}

use flag::*;

/// The part of a backend connection's capabilities that is the same for
/// every connection (design §2); the flavour is added per pool key.
pub const BACKEND_PROFILE: u32 = LONG_PASSWORD
    | LONG_FLAG
    | LOCAL_FILES
    | PROTOCOL_41
    | TRANSACTIONS
    | SECURE_CONNECTION
    | PLUGIN_AUTH
    | PLUGIN_AUTH_LENENC_DATA
    | SESSION_TRACK;

/// Everything myplex can carry between a client and a backend of the same
/// flavour. SSL and COMPRESS are per hop (the proxy terminates both).
/// Query attributes are not carried (MariaDB has none; see
/// `docs/compatibility.md`). Backends always have LOCAL_FILES; for clients
/// without it the proxy refuses a LOCAL INFILE request the way the server
/// would.
pub const CARRY: u32 = LONG_PASSWORD
    | FOUND_ROWS
    | LONG_FLAG
    | CONNECT_WITH_DB
    | NO_SCHEMA
    | COMPRESS
    | ODBC
    | LOCAL_FILES
    | IGNORE_SPACE
    | PROTOCOL_41
    | INTERACTIVE
    | IGNORE_SIGPIPE
    | TRANSACTIONS
    | RESERVED
    | SECURE_CONNECTION
    | MULTI_STATEMENTS
    | MULTI_RESULTS
    | PS_MULTI_RESULTS
    | PLUGIN_AUTH
    | CONNECT_ATTRS
    | PLUGIN_AUTH_LENENC_DATA
    | CAN_HANDLE_EXPIRED_PASSWORDS
    | SESSION_TRACK
    | DEPRECATE_EOF
    | REMEMBER_OPTIONS;

/// MariaDB extended capabilities myplex can carry (cache-metadata is the
/// proxy's own toward the client, not part of any flavour).
pub const CARRY_EXT: u64 = mariadb::PROGRESS
    | mariadb::STMT_BULK_OPERATIONS
    | mariadb::EXTENDED_TYPE_INFO
    | mariadb::CACHE_METADATA;

/// What the greeting offers when the backend has not been reached yet (its
/// greeting is unknown): the MySQL-style profile myplex always could serve.
pub const CLIENT_OFFER: u32 = CARRY & !(FOUND_ROWS | COMPRESS | REMEMBER_OPTIONS);

/// Capabilities that decide a backend connection's flavour: they change row
/// bytes, packet layouts or statement semantics and cannot be translated.
/// Measured on MariaDB 10.11: FOUND_ROWS (affected rows), IGNORE_SPACE
/// (parser, `sql_mode`), NO_SCHEMA (`db.table.column` accepted with any
/// db), INTERACTIVE (`wait_timeout` = `interactive_timeout` at login),
/// MULTI_RESULTS (without it CALL of a procedure returning rows fails with
/// 1312), PS_MULTI_RESULTS (without it EXECUTE of a CALL sends no
/// OUT-parameter result set), DEPRECATE_EOF (terminators), and MariaDB's
/// progress reports, bulk execution and extended type information.
pub const FLAVOUR_MASK: u64 = FOUND_ROWS as u64
    | IGNORE_SPACE as u64
    | NO_SCHEMA as u64
    | INTERACTIVE as u64
    | MULTI_RESULTS as u64
    | PS_MULTI_RESULTS as u64
    | DEPRECATE_EOF as u64
    | mariadb::PROGRESS
    | mariadb::STMT_BULK_OPERATIONS
    | mariadb::EXTENDED_TYPE_INFO;

/// What the greeting offers: the backend's own offer (`server`, 64 bits with
/// the extended capabilities) limited to what myplex can carry, with SSL
/// following the proxy's own TLS setting. `server == 0` (backend never
/// reached) falls back to [`CLIENT_OFFER`].
pub fn greeting_offer(server: u64, tls: bool) -> u64 {
    let mut offer = if server == 0 {
        u64::from(CLIENT_OFFER)
    } else {
        server & (u64::from(CARRY) | CARRY_EXT)
    };
    // Extended capabilities only exist for MariaDB clients, which only send
    // them to a server that leaves bit 0 clear.
    if offer & u64::from(MYSQL) != 0 {
        offer &= 0xFFFF_FFFF;
    }
    if tls {
        offer |= u64::from(SSL);
    } else {
        offer &= !u64::from(SSL);
    }
    offer
}

/// Capabilities a session actually has: what the client asked for, limited
/// to what we offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Caps(pub u64);

impl Caps {
    /// Intersects the client's flags with our offer. `client` holds the
    /// extended capabilities in its high half (only read from clients that
    /// cleared bit 0).
    pub fn negotiate(client: u64, offered: u64) -> Self {
        Self(client & offered)
    }

    /// True when `bit` (a [`flag`] or a [`mariadb`] bit) is set.
    pub fn has(self, bit: impl Into<u64>) -> bool {
        self.0 & bit.into() != 0
    }

    /// The `CLIENT_*` half.
    pub fn base(self) -> u32 {
        (self.0 & 0xFFFF_FFFF) as u32
    }

    /// MariaDB's extended half.
    pub fn ext(self) -> u32 {
        (self.0 >> 32) as u32
    }

    /// The client understands 0xFE-OK terminators instead of EOF packets.
    pub fn deprecate_eof(self) -> bool {
        self.has(DEPRECATE_EOF)
    }

    /// The client accepts session-state blocks in OK packets.
    pub fn session_track(self) -> bool {
        self.has(SESSION_TRACK)
    }

    /// Column definitions carry MariaDB's extended type information.
    pub fn extended_type_info(self) -> bool {
        self.has(mariadb::EXTENDED_TYPE_INFO)
    }

    /// Column counts carry a "metadata follows" byte and an EXECUTE may
    /// leave out column definitions the client already has.
    pub fn cache_metadata(self) -> bool {
        self.has(mariadb::CACHE_METADATA)
    }

    /// The flavour a backend connection serving this client must have.
    pub fn flavour(self) -> Flavour {
        Flavour(self.0 & FLAVOUR_MASK)
    }
}

/// The flavour of a backend connection: the [`FLAVOUR_MASK`] part of its
/// capabilities. Clients are only served by backends of their own flavour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Flavour(pub u64);

impl Flavour {
    /// The flavour of a client with the common driver defaults
    /// (DEPRECATE_EOF, MULTI_RESULTS, PS_MULTI_RESULTS, no extensions): what
    /// the proxy's own and pre-opened connections use.
    pub const DEFAULT: Flavour =
        Flavour(DEPRECATE_EOF as u64 | MULTI_RESULTS as u64 | PS_MULTI_RESULTS as u64);

    /// The capabilities a backend connection of this flavour asks for, given
    /// the server's offer. `None` when the server lacks a flavour bit (a
    /// client could not have negotiated it through our greeting then, unless
    /// the backend changed under us).
    pub fn backend_caps(self, server: u64) -> Option<u64> {
        let want = u64::from(BACKEND_PROFILE) | self.0;
        if server & self.0 != self.0 {
            return None;
        }
        let mut caps = want & server;
        if server & u64::from(MYSQL) != 0 {
            // A MySQL server: no extended capabilities, bit 0 as usual.
            caps &= 0xFFFF_FFFF;
        } else {
            // A MariaDB server reads extended capabilities only from a
            // client that clears bit 0.
            caps &= !u64::from(MYSQL);
        }
        Some(caps)
    }

    /// Responses use 0xFE-OK terminators.
    pub fn deprecate_eof(self) -> bool {
        self.0 & u64::from(DEPRECATE_EOF) != 0
    }

    /// A short label for logs and the admin console (`eof`, `found_rows`, …).
    pub fn label(self) -> String {
        let names = [
            (u64::from(DEPRECATE_EOF), "deprecate_eof"),
            (u64::from(MULTI_RESULTS), "multi_results"),
            (u64::from(PS_MULTI_RESULTS), "ps_multi_results"),
            (u64::from(FOUND_ROWS), "found_rows"),
            (u64::from(IGNORE_SPACE), "ignore_space"),
            (u64::from(NO_SCHEMA), "no_schema"),
            (u64::from(INTERACTIVE), "interactive"),
            (mariadb::PROGRESS, "progress"),
            (mariadb::STMT_BULK_OPERATIONS, "bulk"),
            (mariadb::EXTENDED_TYPE_INFO, "extended_types"),
        ];
        let parts: Vec<&str> = names
            .iter()
            .filter(|(b, _)| self.0 & b != 0)
            .map(|(_, n)| *n)
            .collect();
        if parts.is_empty() {
            "classic".into()
        } else {
            parts.join("+")
        }
    }
}

/// A column definition the proxy made or captured without extended type
/// information, as a client with [`mariadb::EXTENDED_TYPE_INFO`] must see
/// it: with an (empty) extended-metadata string after the column's original
/// name, as MariaDB sends for ordinary columns. Unchanged for other clients
/// or when the definition cannot be parsed.
pub fn column_def_for(def: &[u8], caps: Caps) -> std::borrow::Cow<'_, [u8]> {
    use std::borrow::Cow;
    if !caps.extended_type_info() {
        return Cow::Borrowed(def);
    }
    let mut r = super::lenenc::Reader::new(def);
    for _ in 0..6 {
        if r.lenenc_bytes().is_none() {
            return Cow::Borrowed(def);
        }
    }
    let at = def.len() - r.rest().len();
    let mut out = Vec::with_capacity(def.len() + 1);
    out.extend_from_slice(&def[..at]);
    out.push(0);
    out.extend_from_slice(&def[at..]);
    Cow::Owned(out)
}

/// True for a MariaDB server's version string (MySQL's has no such word).
pub fn is_mariadb_version(version: &[u8]) -> bool {
    version.windows(7).any(|w| w == b"MariaDB")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The greeting of MariaDB 10.11.19 (`--no-defaults`, no TLS): bit 0
    /// clear, extended capabilities 0x1d.
    const MARIADB_1011: u64 = 0x81ff_f7fe | (0x1d << 32);

    #[test]
    fn offer_mirrors_mariadb() {
        let offer = greeting_offer(MARIADB_1011, false);
        assert_eq!(offer & u64::from(MYSQL), 0, "bit 0 stays clear for MariaDB");
        assert_eq!(
            offer >> 32,
            (mariadb::PROGRESS
                | mariadb::STMT_BULK_OPERATIONS
                | mariadb::EXTENDED_TYPE_INFO
                | mariadb::CACHE_METADATA)
                >> 32,
            "every extended capability of 10.11 is offered"
        );
        assert_eq!(
            offer & 0xFFFF_FFFF,
            0x81ff_f7fe,
            "every low bit the server sets is carried"
        );
        assert_ne!(greeting_offer(MARIADB_1011, true) & u64::from(SSL), 0);
    }

    #[test]
    fn offer_never_adds_what_the_server_lacks() {
        // A MySQL 8 server: bit 0 set, query attributes offered.
        let mysql = u64::from(0xdfff_ffffu32);
        let offer = greeting_offer(mysql, false);
        assert_eq!(offer & u64::from(QUERY_ATTRIBUTES), 0);
        assert_eq!(offer >> 32, 0, "no extended capabilities for MySQL");
        assert_ne!(offer & u64::from(MYSQL), 0);
        // Nothing the server lacks.
        assert_eq!(offer & !mysql, 0);
        // Unknown server: the fixed profile.
        assert_eq!(greeting_offer(0, false), u64::from(CLIENT_OFFER));
    }

    #[test]
    fn extended_column_definition() {
        // `SELECT CONNECTION_ID()` from MariaDB 10.11, without and with
        // extended type information.
        let plain = b"\x03def\x00\x00\x00\x0fconnection_id()\x00\x0c?\x00\n\x00\x00\x00\x03\xa1\x00\x00\x00\x00";
        let ext = b"\x03def\x00\x00\x00\x0fconnection_id()\x00\x00\x0c?\x00\n\x00\x00\x00\x03\xa1\x00\x00\x00\x00";
        let caps = Caps(mariadb::EXTENDED_TYPE_INFO);
        assert_eq!(&column_def_for(plain, caps)[..], &ext[..]);
        assert_eq!(&column_def_for(plain, Caps(0))[..], &plain[..]);
        assert_eq!(&column_def_for(b"\x03de", caps)[..], b"\x03de");
    }

    #[test]
    fn flavour_and_backend_caps() {
        let client = Caps(
            u64::from(
                BACKEND_PROFILE
                    | FOUND_ROWS
                    | MULTI_STATEMENTS
                    | MULTI_RESULTS
                    | PS_MULTI_RESULTS
                    | CONNECT_ATTRS,
            ) | mariadb::EXTENDED_TYPE_INFO,
        );
        let f = client.flavour();
        assert_eq!(
            f.0,
            u64::from(FOUND_ROWS | MULTI_RESULTS | PS_MULTI_RESULTS) | mariadb::EXTENDED_TYPE_INFO,
            "only semantic bits"
        );
        assert!(!f.deprecate_eof());
        let caps = f.backend_caps(MARIADB_1011).expect("server has them");
        assert_eq!(caps & u64::from(MYSQL), 0, "MariaDB: bit 0 cleared");
        assert_ne!(caps & mariadb::EXTENDED_TYPE_INFO, 0);
        assert_eq!(caps & u64::from(DEPRECATE_EOF), 0);
        assert_eq!(
            f.label(),
            "multi_results+ps_multi_results+found_rows+extended_types"
        );
        // A flavour the server cannot give.
        let mysql = u64::from(0xdfff_ffffu32);
        assert_eq!(f.backend_caps(mysql), None);
        let plain = Flavour::DEFAULT.backend_caps(mysql).expect("plain");
        assert_ne!(plain & u64::from(LONG_PASSWORD), 0);
        assert_ne!(plain & u64::from(DEPRECATE_EOF), 0);
    }
}
