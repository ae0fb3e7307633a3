//! Errors myplex itself originates, with the MySQL codes and SQLSTATEs a
//! server would use for the same situation (design §7).

use super::packets::ErrPacket;

pub const ER_CON_COUNT_ERROR: u16 = 1040;
/// ER_TOO_MANY_USER_CONNECTIONS: the global `max_user_connections`.
pub const ER_TOO_MANY_USER_CONNECTIONS: u16 = 1203;
/// ER_USER_LIMIT_REACHED: an account's own resource limit
/// (`MAX_USER_CONNECTIONS` of `CREATE/ALTER USER`).
pub const ER_USER_LIMIT_REACHED: u16 = 1226;
pub const ER_HANDSHAKE_ERROR: u16 = 1043;
pub const ER_ACCESS_DENIED_ERROR: u16 = 1045;
pub const ER_BAD_DB_ERROR: u16 = 1049;
pub const ER_UNKNOWN_COM_ERROR: u16 = 1047;
pub const ER_NET_PACKET_TOO_LARGE: u16 = 1153;
pub const ER_NET_PACKETS_OUT_OF_ORDER: u16 = 1156;
pub const ER_NET_READ_ERROR: u16 = 1158;
pub const ER_NET_READ_INTERRUPTED: u16 = 1159;
pub const ER_NET_ERROR_ON_WRITE: u16 = 1160;
pub const ER_NET_WRITE_INTERRUPTED: u16 = 1161;
pub const ER_NOT_SUPPORTED_YET: u16 = 1235;
pub const ER_SERVER_SHUTDOWN: u16 = 1053;
pub const ER_OUT_OF_RESOURCES: u16 = 1041;
pub const ER_QUERY_INTERRUPTED: u16 = 1317;
pub const ER_NOT_ALLOWED_COMMAND: u16 = 1148;
pub const ER_LOAD_INFILE_CAPABILITY_DISABLED: u16 = 4166;
pub const ER_CLIENT_LOCAL_FILES_DISABLED: u16 = 3948;
pub const ER_MAX_PREPARED_STMT_COUNT_REACHED: u16 = 1461;
pub const ER_NEED_REPREPARE: u16 = 1615;

/// An ERR packet exactly as the server sent it. Its message is in the
/// connection's character set (latin1, sjis, …), so it is relayed as bytes,
/// never decoded and re-encoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawErr(Vec<u8>);

impl RawErr {
    /// Wraps an ERR payload; `None` when it is not one (too short, other header).
    pub fn from_payload(payload: &[u8]) -> Option<Self> {
        (payload.len() >= 3 && payload[0] == super::packets::ERR_HEADER)
            .then(|| Self(payload.to_vec()))
    }

    /// The payload of an error the proxy builds itself.
    pub fn from_packet(e: &ErrPacket) -> Self {
        let mut b = bytes::BytesMut::new();
        e.write(&mut b);
        Self(b.to_vec())
    }

    /// The error code.
    pub fn code(&self) -> u16 {
        u16::from_le_bytes([self.0[1], self.0[2]])
    }

    /// The payload to send.
    pub fn payload(&self) -> &[u8] {
        &self.0
    }
}

/// ER_UNKNOWN_COM_ERROR exactly as the server words it (no detail): what
/// MariaDB answers e.g. to a fourth COM_CHANGE_USER after three failed ones.
pub fn server_unknown_command() -> ErrPacket {
    ErrPacket::new(ER_UNKNOWN_COM_ERROR, "08S01", "Unknown command")
}

/// The error a server gives a client that did not enable LOCAL INFILE:
/// MariaDB (10.5+) and MySQL 8 phrase it differently.
pub fn local_infile_refused(server_version: &[u8]) -> ErrPacket {
    if super::caps::is_mariadb_version(server_version) {
        ErrPacket::new(
            ER_LOAD_INFILE_CAPABILITY_DISABLED,
            "HY000",
            "The used command is not allowed because the MariaDB server or client has disabled the local infile capability",
        )
    } else {
        ErrPacket::new(
            ER_CLIENT_LOCAL_FILES_DISABLED,
            "42000",
            "Loading local data is disabled; this must be enabled on both the client and server sides",
        )
    }
}

/// True for the server's refusals of a login at a connection limit
/// (1040, 1203, 1226).
pub fn is_connection_limit(code: u16) -> bool {
    matches!(
        code,
        ER_CON_COUNT_ERROR | ER_TOO_MANY_USER_CONNECTIONS | ER_USER_LIMIT_REACHED
    )
}

/// ER_CON_COUNT_ERROR as a server phrases it.
pub fn too_many_connections() -> ErrPacket {
    ErrPacket::new(ER_CON_COUNT_ERROR, "08004", "Too many connections")
}

/// ER_CON_COUNT_ERROR for a user at its own `max_client_connections`.
pub fn user_too_many_connections(user: &str, limit: usize) -> ErrPacket {
    ErrPacket::new(
        ER_CON_COUNT_ERROR,
        "08004",
        format!("Too many connections: user '{user}' is at its max_client_connections {limit}"),
    )
}

/// ER_ACCESS_DENIED_ERROR as a server phrases it.
pub fn access_denied(user: &str, host: &str, using_password: bool) -> ErrPacket {
    ErrPacket::new(
        ER_ACCESS_DENIED_ERROR,
        "28000",
        format!(
            "Access denied for user '{user}'@'{host}' (using password: {})",
            if using_password { "YES" } else { "NO" }
        ),
    )
}

/// ER_UNKNOWN_COM_ERROR for a command the proxy does not serve.
pub fn unknown_command(cmd: u8) -> ErrPacket {
    ErrPacket::new(
        ER_UNKNOWN_COM_ERROR,
        "08S01",
        format!("Unknown command (myplex does not serve command 0x{cmd:02x})"),
    )
}

/// ER_NET_PACKET_TOO_LARGE as a server phrases it.
pub fn packet_too_large() -> ErrPacket {
    ErrPacket::new(
        ER_NET_PACKET_TOO_LARGE,
        "08S01",
        "Got a packet bigger than 'max_allowed_packet' bytes",
    )
}

/// ER_NET_PACKETS_OUT_OF_ORDER as a server phrases it.
pub fn out_of_order() -> ErrPacket {
    ErrPacket::new(
        ER_NET_PACKETS_OUT_OF_ORDER,
        "08S01",
        "Got packets out of order",
    )
}

/// The handshake could not be completed.
pub fn bad_handshake() -> ErrPacket {
    ErrPacket::new(ER_HANDSHAKE_ERROR, "08S01", "Bad handshake")
}

/// The backend connection failed while serving this client. A server-side
/// code: 2013 (CR_SERVER_LOST) is a client library's own code, and
/// libmariadb reports an ERR carrying a client-range code as 2027
/// "malformed packet".
pub fn backend_lost(detail: &str) -> ErrPacket {
    ErrPacket::new(
        ER_NET_READ_ERROR,
        "08S01",
        format!("myplex: lost connection to backend during query ({detail})"),
    )
}

/// No backend connection could be opened.
pub fn backend_unavailable(detail: &str) -> ErrPacket {
    ErrPacket::new(
        ER_NET_READ_ERROR,
        "08S01",
        format!(
            "myplex: cannot reach backend server ({detail}); check backend.address and that the server is up"
        ),
    )
}

/// The proxy ran out of file descriptors or memory for this request.
pub fn out_of_resources(detail: &str) -> ErrPacket {
    ErrPacket::new(
        ER_OUT_OF_RESOURCES,
        "HY000",
        format!(
            "myplex: out of resources ({detail}); raise the open-files limit or lower pool.max_client_connections"
        ),
    )
}

/// The proxy is shutting down.
pub fn shutting_down() -> ErrPacket {
    ErrPacket::new(
        ER_SERVER_SHUTDOWN,
        "08S01",
        "myplex: proxy is shutting down",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_error_keeps_the_bytes() {
        // "Table 'test.t\xe0ble' doesn't exist" in latin1: not valid UTF-8.
        let mut p = vec![0xFF, 0x7A, 0x04, b'#'];
        p.extend_from_slice(b"42S02Table 'test.t\xe0ble' doesn't exist");
        let e = RawErr::from_payload(&p).expect("an ERR payload");
        assert_eq!(e.code(), 1146);
        assert_eq!(e.payload(), &p[..]);
        assert!(RawErr::from_payload(&[0xFF, 1]).is_none());
        assert!(RawErr::from_payload(&[0x00, 1, 2]).is_none());
        let own = RawErr::from_packet(&packet_too_large());
        assert_eq!(own.code(), ER_NET_PACKET_TOO_LARGE);
        assert_eq!(&own.payload()[3..9], b"#08S01");
    }

    #[test]
    fn proxy_errors_use_server_codes() {
        // Client-library codes (2000-2999) in an ERR from a server are
        // reported by libmariadb as 2027 "malformed packet".
        for e in [
            backend_lost("x"),
            backend_unavailable("x"),
            too_many_connections(),
            bad_handshake(),
            out_of_order(),
            packet_too_large(),
            shutting_down(),
            out_of_resources("x"),
            unknown_command(0x99),
            access_denied("u", "h", true),
        ] {
            assert!(!(2000..3000).contains(&e.code), "{e}");
            let raw = RawErr::from_packet(&e);
            assert_eq!(raw.payload()[3], b'#', "{e}");
        }
    }
}
