//! Capability flags: the canonical profile every backend connection
//! negotiates, and what myplex offers clients.

/// `CLIENT_*` capability bits.
pub mod flag {
    pub const LONG_PASSWORD: u32 = 0x0000_0001;
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
}

use flag::*;

/// What every backend connection negotiates (design §2).
pub const BACKEND_PROFILE: u32 = LONG_PASSWORD
    | LONG_FLAG
    | LOCAL_FILES
    | PROTOCOL_41
    | TRANSACTIONS
    | SECURE_CONNECTION
    | MULTI_RESULTS
    | PS_MULTI_RESULTS
    | PLUGIN_AUTH
    | PLUGIN_AUTH_LENENC_DATA
    | SESSION_TRACK
    | DEPRECATE_EOF;

/// What the greeting offers clients (SSL is added when TLS is configured).
/// Compression, query attributes and FOUND_ROWS are not offered: they change
/// row bytes or packet layouts and are not implemented end to end. Backends
/// always have LOCAL_FILES; for clients without it the proxy refuses a
/// LOCAL INFILE request the way the server would.
pub const CLIENT_OFFER: u32 = LONG_PASSWORD
    | LONG_FLAG
    | LOCAL_FILES
    | CONNECT_WITH_DB
    | NO_SCHEMA
    | ODBC
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
    | DEPRECATE_EOF;

/// Capabilities a session actually has: what the client asked for, limited
/// to what we offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps(pub u32);

impl Caps {
    /// Intersects the client's flags with our offer.
    pub fn negotiate(client: u32, offered: u32) -> Self {
        Self(client & offered)
    }

    /// True when `bit` is set.
    pub fn has(self, bit: u32) -> bool {
        self.0 & bit != 0
    }

    /// The client understands 0xFE-OK terminators instead of EOF packets.
    pub fn deprecate_eof(self) -> bool {
        self.has(DEPRECATE_EOF)
    }

    /// The client accepts session-state blocks in OK packets.
    pub fn session_track(self) -> bool {
        self.has(SESSION_TRACK)
    }
}
