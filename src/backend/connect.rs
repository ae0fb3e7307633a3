//! Dial (TCP or the server's Unix socket) and log in to the backend:
//! greeting, optional TLS, handshake response
//! with the canonical capability profile plus the connection's flavour (the
//! capabilities it shares with the clients it serves, MariaDB's extended
//! ones included), `mysql_native_password` and `caching_sha2_password` (fast
//! path, full auth over TLS or with the server's RSA key), auth switch, then
//! the session trackers.

use std::sync::Arc;
use std::time::Duration;

use bytes::{BufMut, BytesMut};
use tokio::net::{TcpStream, UnixStream};
use tokio::time::{Instant, timeout};

use super::conn::{BackendConn, BackendError, BackendId};
use crate::config::Address;
use crate::protocol::caps::{Caps, Flavour, flag};
use crate::protocol::collations::Collations;
use crate::protocol::greeting::Greeting;
use crate::protocol::lenenc::put_lenenc_bytes;
use crate::protocol::packets::status;
use crate::protocol::packets::{ERR_HEADER, ErrPacket, OK_HEADER};
use crate::session_state::TrackedState;
use crate::wire::{PacketIo, Stream};

/// Switched on after login on every backend connection (design §4).
pub const TRACKERS_SQL: &str = "SET SESSION session_track_schema=ON, session_track_state_change=ON, session_track_system_variables='*'";

/// Collation of backend connections' handshakes (utf8mb4_general_ci).
pub const BACKEND_COLLATION: u8 = 45;

/// How to reach and log in to the backend.
#[derive(Clone)]
pub struct BackendParams {
    /// `host:port`, or the server's Unix socket path ([`Address`]).
    pub address: String,
    /// Login user.
    pub user: String,
    /// Login password.
    pub password: String,
    /// SHA1(password) instead of the password, for users looked up in the
    /// server (`crate::server_users`): enough for `mysql_native_password`
    /// and nothing else.
    pub native_stage1: Option<[u8; 20]>,
    /// TLS toward the server, if configured.
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// Dial + login timeout.
    pub connect_timeout: Duration,
    /// Pool key (credential pool and flavour) of the connections dialed
    /// with these parameters.
    pub pool: usize,
    /// Capabilities that must match the clients served (pool key).
    pub flavour: Flavour,
}

impl BackendParams {
    /// The same login at another address (the server's own socket).
    pub fn over(&self, address: &str) -> BackendParams {
        BackendParams {
            address: address.to_string(),
            ..self.clone()
        }
    }
}

impl std::fmt::Debug for BackendParams {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackendParams")
            .field("address", &self.address)
            .field("user", &self.user)
            .field("native_stage1", &self.native_stage1.is_some())
            .field("tls", &self.tls.is_some())
            .field("flavour", &self.flavour.label())
            .finish()
    }
}

/// What the server told us about itself in its greeting.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ServerInfo {
    /// Version string, mirrored in our greeting.
    pub version: Vec<u8>,
    /// Default collation id, mirrored in our greeting.
    pub collation: u8,
    /// Capabilities the server offered (MariaDB's extended ones in the high
    /// half).
    pub capabilities: u64,
    /// The server's collations, once learned (see [`learn_collations`]).
    pub collations: Option<Arc<Collations>>,
    /// The greeting's status flags that describe a new session's defaults
    /// (see [`status::SESSION_DEFAULTS`]): global autocommit and the
    /// global sql_mode's NO_BACKSLASH_ESCAPES / ANSI_QUOTES.
    pub session_status: u16,
}

impl ServerInfo {
    /// A MariaDB server (it reports `last_gtid`, phrases some errors its
    /// own way).
    pub fn is_mariadb(&self) -> bool {
        crate::protocol::caps::is_mariadb_version(&self.version)
    }

    /// True when `other` describes the same server greeting (the learned
    /// collations aside).
    pub fn same_greeting(&self, other: &ServerInfo) -> bool {
        self.version == other.version
            && self.collation == other.collation
            && self.capabilities == other.capabilities
    }
}

/// Learns the server's collations on a logged-in connection.
pub async fn learn_collations(conn: &mut BackendConn) -> Result<Collations, BackendError> {
    let rows = conn
        .query_rows(crate::protocol::collations::COLLATIONS_SQL, usize::MAX)
        .await?;
    Ok(Collations::from_rows(rows.into_iter().filter_map(|r| {
        let mut it = r.into_iter();
        let id = it.next()??.parse().ok()?;
        let name = it.next()??;
        let charset = it.next()??;
        Some((id, name, charset))
    })))
}

/// Opens and logs in one backend connection.
pub async fn connect(p: &BackendParams) -> Result<(BackendConn, ServerInfo), BackendError> {
    match timeout(p.connect_timeout, connect_inner(p)).await {
        Ok(r) => r,
        Err(_) => Err(BackendError::Timeout),
    }
}

async fn connect_inner(p: &BackendParams) -> Result<(BackendConn, ServerInfo), BackendError> {
    let address = Address::parse(&p.address);
    let mut io = PacketIo::new(dial(&address).await?);
    let greeting = io.read_packet(1 << 20).await?;
    if greeting.payload.first() == Some(&ERR_HEADER) {
        return Err(server_err(&greeting.payload));
    }
    let hs = Greeting::parse(&greeting.payload)
        .ok_or_else(|| BackendError::Protocol("bad greeting".into()))?;
    let server_caps = hs.capabilities;
    let info = ServerInfo {
        version: hs.version.clone(),
        collation: hs.collation,
        capabilities: server_caps,
        collations: None,
        session_status: hs.status & status::SESSION_DEFAULTS,
    };
    let thread_id = hs.connection_id;
    let nonce = hs.scramble.clone();
    let plugin = if hs.auth_plugin.is_empty() {
        b"mysql_native_password".to_vec()
    } else {
        hs.auth_plugin.clone()
    };
    for need in [flag::PROTOCOL_41, flag::SECURE_CONNECTION] {
        if server_caps & u64::from(need) == 0 {
            return Err(BackendError::Protocol("server lacks PROTOCOL_41".into()));
        }
    }
    let mut caps = p.flavour.backend_caps(server_caps).ok_or_else(|| {
        BackendError::Protocol(format!(
            "backend does not offer the capabilities of flavour {}",
            p.flavour.label()
        ))
    })?;
    let mut seq = greeting.last_seq.wrapping_add(1);

    if let Some(tls) = &p.tls {
        if server_caps & u64::from(flag::SSL) == 0 {
            return Err(BackendError::Tls("backend does not offer TLS".into()));
        }
        caps |= u64::from(flag::SSL);
        let mut req = BytesMut::with_capacity(32);
        put_response_head(&mut req, caps);
        seq = io.send_packet(seq, &req).await?;
        let Some(socket) = io.take_stream().into_socket() else {
            return Err(BackendError::Tls("stream already upgraded".into()));
        };
        // The certificate names the host; a socket's server is this host.
        let host = match address {
            Address::Tcp(a) => a.rsplit_once(':').map(|(h, _)| h).unwrap_or("localhost"),
            Address::Unix(_) => "localhost",
        };
        let name = rustls::pki_types::ServerName::try_from(host.to_string())
            .map_err(|e| BackendError::Tls(e.to_string()))?;
        let tls_stream = tokio_rustls::TlsConnector::from(tls.clone())
            .connect(name, socket)
            .await
            .map_err(|e| BackendError::Tls(e.to_string()))?;
        io = PacketIo::new(Stream::ClientTls(Box::new(tls_stream)));
    }

    let auth = auth_response(&plugin, &nonce, p, io.stream.is_tls())?;
    let mut resp = BytesMut::with_capacity(128);
    put_response_head(&mut resp, caps);
    resp.put_slice(p.user.as_bytes());
    resp.put_u8(0);
    put_lenenc_bytes(&mut resp, &auth);
    resp.put_slice(&plugin);
    resp.put_u8(0);
    io.send_packet(seq, &resp).await?;

    let (plugin, nonce) = authenticate(&mut io, p, plugin, nonce).await?;

    let now = Instant::now();
    let mut conn = BackendConn {
        io,
        id: BackendId::next(),
        thread_id,
        pool: p.pool,
        state: TrackedState::default(),
        status: 0,
        last_used: now,
        opened: now,
        stmts: Default::default(),
        auth: (plugin, nonce),
        caps: Caps(caps & !u64::from(flag::SSL)),
        marks: Default::default(),
        globals_epoch: 0,
        server_epoch: 0,
        server: 0,
        counted: None,
        login_role: None,
        account: None,
        roles_epoch: 0,
        parked_for: None,
        share_user: None,
    };
    conn.exec(TRACKERS_SQL).await?;
    // The role a login of this account activates (its default role): what
    // stored code must leave in place for the connection to be shared; and
    // the account the server matched.
    let mut who = conn
        .query_row("SELECT CURRENT_ROLE(), CURRENT_USER()")
        .await?
        .unwrap_or_default()
        .into_iter();
    conn.login_role = who.next().flatten();
    conn.account = who.next().flatten();
    conn.state = TrackedState::for_collation(u16::from(BACKEND_COLLATION));
    Ok((conn, info))
}

/// Opens the transport: TCP (no Nagle delay) or the server's Unix socket.
async fn dial(address: &Address<'_>) -> Result<Stream, BackendError> {
    let wire = |e: std::io::Error| BackendError::Wire(e.into());
    match address {
        Address::Tcp(a) => {
            let tcp = TcpStream::connect(a).await.map_err(wire)?;
            tcp.set_nodelay(true).map_err(wire)?;
            Ok(Stream::Plain(tcp))
        }
        Address::Unix(path) => Ok(Stream::Unix(UnixStream::connect(path).await.map_err(wire)?)),
    }
}

/// The fixed 32-byte head of a handshake response: capabilities, maximum
/// packet size, collation, filler with the extended capabilities at its end
/// (MariaDB reads them when bit 0 is clear).
fn put_response_head(out: &mut BytesMut, caps: u64) {
    out.put_u32_le(caps as u32);
    out.put_u32_le(1 << 24);
    out.put_u8(BACKEND_COLLATION);
    out.put_slice(&[0u8; 19]);
    if caps & u64::from(flag::MYSQL) == 0 {
        out.put_u32_le((caps >> 32) as u32);
    } else {
        out.put_u32_le(0);
    }
}

fn server_err(payload: &[u8]) -> BackendError {
    BackendError::Server(
        ErrPacket::parse(payload)
            .unwrap_or_else(|| ErrPacket::new(2027, "HY000", "malformed error packet")),
    )
}

pub(crate) fn auth_response(
    plugin: &[u8],
    nonce: &[u8],
    p: &BackendParams,
    tls: bool,
) -> Result<Vec<u8>, BackendError> {
    if let Some(stage1) = &p.native_stage1 {
        return native_from_stage1(plugin, nonce, stage1);
    }
    let password = p.password.as_str();
    if password.is_empty() {
        return Ok(Vec::new());
    }
    let pw = password.as_bytes();
    Ok(match plugin {
        b"mysql_native_password" => mysql_common::scramble::scramble_native(nonce, pw)
            .map(|x| x.to_vec())
            .unwrap_or_default(),
        b"caching_sha2_password" => mysql_common::scramble::scramble_sha256(nonce, pw)
            .map(|x| x.to_vec())
            .unwrap_or_default(),
        b"mysql_clear_password" if tls => {
            let mut v = pw.to_vec();
            v.push(0);
            v
        }
        other => {
            return Err(BackendError::Protocol(format!(
                "backend asks for unsupported auth plugin {}",
                String::from_utf8_lossy(other)
            )));
        }
    })
}

/// `mysql_native_password`'s response from SHA1(password):
/// `SHA1(pw) XOR SHA1(nonce + SHA1(SHA1(pw)))`.
fn native_from_stage1(
    plugin: &[u8],
    nonce: &[u8],
    stage1: &[u8; 20],
) -> Result<Vec<u8>, BackendError> {
    use sha1::{Digest, Sha1};
    if plugin != b"mysql_native_password" {
        return Err(BackendError::Protocol(format!(
            "backend asks for auth plugin {} for a user looked up in the server; only mysql_native_password works without the cleartext",
            String::from_utf8_lossy(plugin)
        )));
    }
    let stage2: [u8; 20] = Sha1::digest(stage1).into();
    let mut h = Sha1::new();
    h.update(nonce);
    h.update(stage2);
    let mask: [u8; 20] = h.finalize().into();
    Ok(stage1.iter().zip(mask).map(|(a, b)| a ^ b).collect())
}

/// Runs the server's side of the auth conversation to its OK or ERR.
pub(crate) async fn authenticate(
    io: &mut PacketIo,
    p: &BackendParams,
    mut plugin: Vec<u8>,
    mut nonce: Vec<u8>,
) -> Result<(Vec<u8>, Vec<u8>), BackendError> {
    for _ in 0..8 {
        let pkt = io.read_packet(1 << 20).await?;
        let seq = pkt.last_seq.wrapping_add(1);
        match pkt.payload.first().copied() {
            Some(OK_HEADER) => return Ok((plugin, nonce)),
            Some(ERR_HEADER) => return Err(server_err(&pkt.payload)),
            Some(0xFE) => {
                // Auth switch: plugin name NUL, then the new nonce.
                let body = &pkt.payload[1..];
                let end = body.iter().position(|&b| b == 0).unwrap_or(body.len());
                plugin = body[..end].to_vec();
                nonce = body.get(end + 1..).unwrap_or_default().to_vec();
                if nonce.last() == Some(&0) {
                    nonce.pop();
                }
                let resp = auth_response(&plugin, &nonce, p, io.stream.is_tls())?;
                io.send_packet(seq, &resp).await?;
            }
            Some(0x01) if plugin == b"caching_sha2_password" => {
                match pkt.payload.get(1).copied() {
                    Some(0x03) => {} // fast auth succeeded; the OK follows
                    Some(0x04) if p.native_stage1.is_some() => {
                        return Err(BackendError::Protocol(
                            "caching_sha2 full authentication needs the cleartext password".into(),
                        ));
                    }
                    Some(0x04) => {
                        let mut pw = p.password.as_bytes().to_vec();
                        pw.push(0);
                        if io.stream.is_tls() {
                            io.send_packet(seq, &pw).await?;
                        } else {
                            // Ask for the server's RSA public key.
                            io.send_packet(seq, &[0x02]).await?;
                            let key = io.read_packet(1 << 20).await?;
                            if key.payload.first() != Some(&0x01) {
                                return Err(server_err(&key.payload));
                            }
                            for (i, b) in pw.iter_mut().enumerate() {
                                *b ^= nonce[i % nonce.len().max(1)];
                            }
                            let pem = key.payload[1..].to_vec();
                            let enc = std::panic::catch_unwind(|| {
                                mysql_common::crypto::encrypt(&pw, &pem)
                            })
                            .map_err(|_| {
                                BackendError::Protocol(
                                    "unusable RSA public key from backend".into(),
                                )
                            })?;
                            io.send_packet(key.last_seq.wrapping_add(1), &enc).await?;
                        }
                    }
                    _ => {
                        return Err(BackendError::Protocol(
                            "unexpected caching_sha2 auth step".into(),
                        ));
                    }
                }
            }
            _ => {
                return Err(BackendError::Protocol(
                    "unexpected packet during authentication".into(),
                ));
            }
        }
    }
    Err(BackendError::Protocol(
        "authentication did not finish".into(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha1::{Digest, Sha1};

    #[test]
    fn stage1_response_is_the_native_scramble() {
        let nonce = b"abcdefghijklmnopqrst";
        let stage1: [u8; 20] = Sha1::digest(b"secret").into();
        let from_stage1 =
            native_from_stage1(b"mysql_native_password", nonce, &stage1).expect("native");
        let direct = mysql_common::scramble::scramble_native(nonce, b"secret").expect("scramble");
        assert_eq!(from_stage1, direct.to_vec());
        assert!(native_from_stage1(b"caching_sha2_password", nonce, &stage1).is_err());
    }
}
