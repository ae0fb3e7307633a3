//! The client login: greeting (mirroring the backend's version, collation
//! and capabilities as far as myplex can carry them, random scramble,
//! proxy-issued connection id), optional TLS upgrade, handshake response
//! (with MariaDB's extended capabilities), the server's rule for the login
//! collation, authentication with auth switch, and the final OK or
//! ER_ACCESS_DENIED_ERROR. The client's flavour picks its pool key.

use bytes::BytesMut;
use mysql_common::constants::CapabilityFlags;
use mysql_common::io::ParseBuf;
use mysql_common::packets::HandshakeResponse;
use mysql_common::proto::MyDeserialize;
use rand::Rng;

use super::Shared;
use crate::config::AuthPluginName;
use crate::protocol::caps::{self, Caps, flag};
use crate::protocol::errors;
use crate::protocol::greeting::{Greeting, response_ext_caps};
use crate::protocol::packets::ErrPacket;
use crate::wire::packet_io::Packet;
use crate::wire::{PacketIo, Peer, Stream, WireError};

/// Read-buffer growth step for client connections.
pub const CLIENT_READ_STEP: usize = 2048;

/// A logged-in client.
pub struct Login {
    /// The client's socket.
    pub io: PacketIo,
    /// The logged-in user.
    pub user: std::sync::Arc<super::User>,
    /// Negotiated capabilities.
    pub caps: Caps,
    /// The session's collation: the one the client asked for, or the
    /// server's default when the server does not know it.
    pub collation: u16,
    /// Pool key: the user's credential pool with the client's flavour.
    pub pool: usize,
    /// Schema named at login.
    pub schema: Option<Vec<u8>>,
    /// Sequence id for the login's final OK (or ERR), sent by the session
    /// once the login schema is known to exist.
    pub ok_seq: u8,
    /// The scramble of the greeting (COM_CHANGE_USER answers it too).
    pub nonce: [u8; 20],
}

/// Why a login failed.
#[derive(Debug, thiserror::Error)]
pub enum HandshakeError {
    /// Socket trouble.
    #[error("{0}")]
    Wire(#[from] WireError),
    /// The client was refused (the ERR was sent).
    #[error("login refused: {0}")]
    Refused(String),
}

/// A fresh 20-byte printable scramble.
pub fn scramble() -> [u8; 20] {
    let mut rng = rand::rng();
    let mut s = [0u8; 20];
    for b in &mut s {
        *b = rng.random_range(33..=126);
    }
    s
}

async fn refuse(io: &mut PacketIo, seq: u8, e: ErrPacket) -> HandshakeError {
    let mut b = BytesMut::new();
    e.write(&mut b);
    let _ = io.send_packet(seq, &b).await;
    HandshakeError::Refused(e.message)
}

/// Hands TLS bytes the client sent before the upgrade to the TLS session.
fn feed_tls(conn: &mut rustls::ServerConnection, mut early: &[u8]) -> Result<(), String> {
    while !early.is_empty() {
        let n = conn.read_tls(&mut early).map_err(|e| e.to_string())?;
        conn.process_new_packets().map_err(|e| e.to_string())?;
        if n == 0 {
            break;
        }
    }
    Ok(())
}

/// Runs the login on a fresh client socket.
pub async fn login(
    shared: &Shared,
    mut io: PacketIo,
    conn_id: u32,
    peer: Peer,
) -> Result<Login, HandshakeError> {
    let server = shared.pool.server_info();
    let nonce = scramble();
    // One view of the reloadable settings for the whole login.
    let tls_config = shared.tls.load_full();
    let config = shared.config.load_full();
    let offer = caps::greeting_offer(server.capabilities, tls_config.is_some());
    let greeting_plugin = config.frontend.default_auth_plugin;
    let hs = Greeting {
        version: server.version.clone(),
        connection_id: conn_id,
        scramble: nonce.to_vec(),
        capabilities: offer,
        collation: server.collation,
        status: shared.pool.session_status(),
        auth_plugin: greeting_plugin.as_str().as_bytes().to_vec(),
    };
    let mut buf = BytesMut::with_capacity(96);
    hs.write(&mut buf);
    io.send_packet(0, &buf).await?;

    let max = 1 << 16;
    let mut pkt = read_first_login_packet(&mut io, max).await?;
    let client_caps = pkt
        .payload
        .get(..4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .unwrap_or(0);
    if client_caps & flag::SSL != 0 && pkt.payload.len() == 32 {
        // From here on the client expects TLS: whatever the proxy says goes
        // over TLS, or it closes without a word (a plaintext ERR would
        // reach a TLS client as garbage, WRONG_VERSION_NUMBER).
        let Some(tls) = tls_config else {
            return Err(HandshakeError::Refused(
                "tls requested but not offered".into(),
            ));
        };
        // TLS over a Unix socket too: the server offers and accepts it on
        // its socket as on TCP.
        let Some(socket) = io.take_stream().into_socket() else {
            return Err(HandshakeError::Refused("stream already upgraded".into()));
        };
        // A client may send its TLS ClientHello right behind the
        // SSLRequest, so it can already sit in the read buffer: it is the
        // start of the TLS handshake and goes into it (whose transcript
        // authenticates it), never read as plaintext.
        let early = io.take_buffered();
        let mut early_error = None;
        let acceptor = tokio_rustls::TlsAcceptor::from(tls);
        let accepted = acceptor
            .accept_with(socket, |conn| {
                if let Err(e) = feed_tls(conn, &early) {
                    early_error = Some(e);
                }
            })
            .await;
        if let Some(e) = early_error {
            return Err(HandshakeError::Refused(format!(
                "tls handshake failed: {e}"
            )));
        }
        let tls_stream =
            accepted.map_err(|e| HandshakeError::Refused(format!("tls handshake failed: {e}")))?;
        io =
            PacketIo::new(Stream::ServerTls(Box::new(tls_stream))).with_read_step(CLIENT_READ_STEP);
        pkt = read_login_packet(&mut io, max, 2).await?;
    }
    let mut seq = pkt.last_seq.wrapping_add(1);
    // A Unix socket is a secure transport, as the server's
    // require_secure_transport counts it.
    if config.frontend.require_tls && !io.stream.is_tls() && !io.stream.is_unix() {
        let e = ErrPacket::new(
            errors::ER_ACCESS_DENIED_ERROR,
            "28000",
            "myplex: connections must use TLS (frontend.require_tls)",
        );
        return Err(refuse(&mut io, seq, e).await);
    }
    let Some(resp) = parse_response(&pkt.payload) else {
        return Err(refuse(&mut io, seq, errors::bad_handshake()).await);
    };
    let caps = Caps::negotiate(resp.caps, offer);
    // The server checks the login collation before anything else.
    let requested = resp.collation;
    let collation = match &server.collations {
        Some(table) => match table.login(requested, u16::from(server.collation)) {
            Ok(c) => c.id(),
            Err(e) => return Err(refuse(&mut io, seq, e).await),
        },
        // Not learned yet (backend unreachable so far): the same rule
        // from what every MariaDB knows.
        None => match crate::protocol::collations::login_unlearned(
            requested,
            u16::from(server.collation),
        ) {
            Ok(c) => c.id(),
            Err(e) => return Err(refuse(&mut io, seq, e).await),
        },
    };
    let Response {
        user: user_name,
        schema,
        plugin,
        auth: response,
        ..
    } = resp;
    let client_plugin = match plugin {
        Some(p) if caps.has(flag::PLUGIN_AUTH) => p,
        _ => b"mysql_native_password".to_vec(),
    };

    // Password-guessing throttle: wait before any outcome is revealed.
    tokio::time::sleep(shared.throttle.delay(peer.address_key(), &user_name)).await;
    let attempt = super::users::Attempt {
        name: &user_name,
        peer: Some(peer),
        client_plugin: &client_plugin,
        challenged: greeting_plugin,
        nonce: &nonce,
        response,
    };
    let user = match super::users::authenticate_user(shared, &mut io, &mut seq, attempt).await? {
        Ok(u) => u,
        Err(e) => {
            shared.throttle.failed(peer.address_key(), &user_name);
            return Err(refuse(&mut io, seq, e).await);
        }
    };
    shared.throttle.succeeded(peer.address_key(), &user_name);
    let pool = shared.pool.key(user.pool, caps.flavour());
    if caps.has(flag::COMPRESS) {
        // The final OK (sent by the session) is the last plain packet.
        io.compress_after_next_flush();
    }
    Ok(Login {
        io,
        user,
        caps,
        collation,
        pool,
        schema,
        ok_seq: seq,
        nonce,
    })
}

/// The fields of a client's handshake response that the login uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// Client capabilities, MariaDB's extended ones in the high half.
    pub caps: u64,
    /// The collation the client asked for.
    pub collation: u16,
    /// Login name (lossy UTF-8).
    pub user: String,
    /// Schema named at login, when not empty.
    pub schema: Option<Vec<u8>>,
    /// Auth plugin the client named (used only with CLIENT_PLUGIN_AUTH).
    pub plugin: Option<Vec<u8>>,
    /// The client's auth response.
    pub auth: Vec<u8>,
}

/// Parses a handshake response; `None` (a bad handshake) when it does not
/// parse or is not protocol 4.1. Pure: bytes a peer sent, nothing else.
pub fn parse_response(payload: &[u8]) -> Option<Response> {
    let resp = HandshakeResponse::deserialize((), &mut ParseBuf(payload)).ok()?;
    if !resp
        .capabilities()
        .contains(CapabilityFlags::CLIENT_PROTOCOL_41)
    {
        return None;
    }
    Some(Response {
        caps: u64::from(resp.capabilities().bits()) | response_ext_caps(payload),
        collation: u16::from(resp.collation()),
        user: String::from_utf8_lossy(resp.user()).into_owned(),
        schema: resp.db_name().filter(|d| !d.is_empty()).map(<[u8]>::to_vec),
        plugin: resp.auth_plugin().map(|p| p.as_bytes().to_vec()),
        auth: resp.scramble_buf().to_vec(),
    })
}

/// Checks a client's auth response for `user`, switching plugins when the
/// client used one the stored credential cannot verify (or one other than
/// the challenge was issued for). On success with caching_sha2 the
/// fast-auth-success packet is sent; the caller sends the final OK (at
/// `seq`) or the access-denied error.
pub(crate) async fn authenticate(
    io: &mut PacketIo,
    seq: &mut u8,
    user: &super::User,
    client_plugin: &[u8],
    challenged: AuthPluginName,
    nonce: &[u8; 20],
    mut response: Vec<u8>,
) -> Result<AuthOutcome, HandshakeError> {
    let client_plugin = match client_plugin {
        b"mysql_native_password" => Some(AuthPluginName::MysqlNativePassword),
        b"caching_sha2_password" => Some(AuthPluginName::CachingSha2Password),
        _ => None,
    };
    let mut plugin = match client_plugin {
        Some(p) if p == challenged && user.credential.supports(p) => p,
        Some(p) if user.credential.supports(p) => switch(io, seq, p, nonce, &mut response).await?,
        _ => {
            let p = if user.credential.supports(challenged) {
                challenged
            } else if user
                .credential
                .supports(AuthPluginName::MysqlNativePassword)
            {
                AuthPluginName::MysqlNativePassword
            } else {
                AuthPluginName::CachingSha2Password
            };
            switch(io, seq, p, nonce, &mut response).await?
        }
    };
    if !user.credential.supports(plugin) {
        plugin = AuthPluginName::MysqlNativePassword;
    }
    let used_password = !response.is_empty();
    if !user.credential.verify(plugin, nonce, &response) {
        return Ok(AuthOutcome {
            ok: false,
            used_password,
            response,
        });
    }
    if plugin == AuthPluginName::CachingSha2Password && used_password {
        // fast_auth_success; the OK follows.
        *seq = io.send_packet(*seq, &[0x01, 0x03]).await?;
    }
    Ok(AuthOutcome {
        ok: true,
        used_password,
        response,
    })
}

/// The result of [`authenticate`].
#[derive(Debug, Clone)]
pub(crate) struct AuthOutcome {
    /// The password matched.
    pub ok: bool,
    /// The client sent a non-empty response ("using password: YES").
    pub used_password: bool,
    /// The client's final response.
    pub response: Vec<u8>,
}

/// Reads the client's first login packet byte-exactly: nothing past it is
/// read, because after an SSLRequest a client sends its TLS hello at once
/// (libmariadb, PyMySQL, rustls clients) and those bytes belong to the TLS
/// layer. Reading them into the packet buffer made the upgrade fail (the
/// client was answered in plaintext) whenever both arrived together.
/// Refuses as [`read_login_packet`] does.
async fn read_first_login_packet(io: &mut PacketIo, max: usize) -> Result<Packet, HandshakeError> {
    let mut head = [0u8; crate::protocol::framing::HEADER_LEN];
    read_exact(io, &mut head).await?;
    let len = usize::from(head[0]) | usize::from(head[1]) << 8 | usize::from(head[2]) << 16;
    if head[3] != 1 {
        return Err(refuse(io, 1, errors::out_of_order()).await);
    }
    // Also refuses a first chunk of 16 MiB - 1 (a continued packet).
    if len > max {
        return Err(refuse(io, 1, errors::bad_handshake()).await);
    }
    let mut payload = BytesMut::zeroed(len);
    read_exact(io, &mut payload).await?;
    Ok(Packet {
        seq: 1,
        last_seq: 1,
        payload,
    })
}

/// Fills `buf` from the socket itself (the packet buffer is empty before
/// the first login packet).
async fn read_exact(io: &mut PacketIo, buf: &mut [u8]) -> Result<(), WireError> {
    use tokio::io::AsyncReadExt;
    match io.stream.read_exact(buf).await {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Err(WireError::Truncated),
        Err(e) => Err(e.into()),
    }
}

/// Reads a login packet, refusing at once (as the server does) one with the
/// wrong sequence id or above the login size limit.
async fn read_login_packet(
    io: &mut PacketIo,
    max: usize,
    seq: u8,
) -> Result<Packet, HandshakeError> {
    match io.read_packet_seq(max, Some(seq)).await {
        Ok(p) => Ok(p),
        Err(WireError::OutOfOrder) => Err(refuse(io, seq, errors::out_of_order()).await),
        Err(WireError::TooLarge) => Err(refuse(io, seq, errors::bad_handshake()).await),
        Err(e) => Err(e.into()),
    }
}

/// Sends an auth switch to `plugin` with our nonce and reads the response.
pub(crate) async fn switch(
    io: &mut PacketIo,
    seq: &mut u8,
    plugin: AuthPluginName,
    nonce: &[u8; 20],
    response: &mut Vec<u8>,
) -> Result<AuthPluginName, HandshakeError> {
    let mut p = Vec::with_capacity(64);
    p.push(0xFE);
    p.extend_from_slice(plugin.as_str().as_bytes());
    p.push(0);
    p.extend_from_slice(nonce);
    p.push(0);
    io.send_packet(*seq, &p).await?;
    let r = io.read_packet(1 << 16).await?;
    *seq = r.last_seq.wrapping_add(1);
    *response = r.payload.to_vec();
    Ok(plugin)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// PyMySQL 1.2.4's handshake response to MariaDB 10.11 (user `app`,
    /// schema `test`, utf8mb4_general_ci, connect attributes), captured by
    /// scripts/fuzz_corpus.py.
    const PYMYSQL: &[u8] = &[
        0x0d, 0xa2, 0x3a, 0x00, 0xff, 0xff, 0xff, 0x00, 0x2d, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x61, 0x70, 0x70, 0x00, 0x14, 0xb9, 0x33, 0x21, 0x38, 0x4b, 0x8a, 0xbf, 0xfb,
        0xbc, 0x39, 0xd9, 0x8e, 0xc4, 0x9e, 0x81, 0xe1, 0x6f, 0xb8, 0xb9, 0x5e, 0x74, 0x65, 0x73,
        0x74, 0x00, 0x6d, 0x79, 0x73, 0x71, 0x6c, 0x5f, 0x6e, 0x61, 0x74, 0x69, 0x76, 0x65, 0x5f,
        0x70, 0x61, 0x73, 0x73, 0x77, 0x6f, 0x72, 0x64, 0x00, 0x36, 0x0c, 0x5f, 0x63, 0x6c, 0x69,
        0x65, 0x6e, 0x74, 0x5f, 0x6e, 0x61, 0x6d, 0x65, 0x07, 0x70, 0x79, 0x6d, 0x79, 0x73, 0x71,
        0x6c, 0x0f, 0x5f, 0x63, 0x6c, 0x69, 0x65, 0x6e, 0x74, 0x5f, 0x76, 0x65, 0x72, 0x73, 0x69,
        0x6f, 0x6e, 0x05, 0x31, 0x2e, 0x32, 0x2e, 0x34, 0x04, 0x5f, 0x70, 0x69, 0x64, 0x05, 0x33,
        0x30, 0x37, 0x34, 0x35,
    ];

    #[test]
    fn parses_a_captured_response() {
        let r = parse_response(PYMYSQL).expect("parses");
        assert_eq!(r.user, "app");
        assert_eq!(r.schema.as_deref(), Some(&b"test"[..]));
        assert_eq!(r.plugin.as_deref(), Some(&b"mysql_native_password"[..]));
        assert_eq!(r.collation, 45);
        assert_eq!(r.auth.len(), 20);
        assert_eq!(r.caps & 0xFFFF_FFFF, 0x003a_a20d);
        assert_eq!(
            r.caps >> 32,
            0,
            "MySQL-style client: no extended capabilities"
        );
    }

    #[test]
    fn refuses_pre_4_1_and_cut_off_responses() {
        let mut old = PYMYSQL.to_vec();
        old[1] &= !((flag::PROTOCOL_41 >> 8) as u8);
        assert_eq!(parse_response(&old), None);
        assert_eq!(parse_response(&PYMYSQL[..40]), None);
        assert_eq!(parse_response(&[]), None);
    }
}
