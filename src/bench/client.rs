//! The virtual clients' own MySQL client: log in, prepare, execute with
//! binary parameters, and read each reply to its end without decoding it
//! (the tool looks at no row, as sysbench does not). Built on the proxy's
//! packet I/O ([`crate::wire::PacketIo`]), response tracker
//! ([`crate::protocol::response::Tracker`]) and login conversation
//! ([`crate::backend::connect`]); it owns nothing else and never touches the
//! proxy's session state.
//!
//! Why not a driver: mysql_async decodes every row into values, tries each
//! packet as OK and ERR before anything else, and allocates per packet;
//! measured on `oltp_read_write`, about 4.5x sysbench's user-space
//! instructions per transaction, which on a 2-CPU machine came out of the
//! server's share (docs/benchmarks.md, "`myplex bench` against sysbench").
//! Like libmariadb (sysbench's connector) it sends parameter types with a
//! statement's first execution only and, where MariaDB offers it, asks for
//! result-set metadata only when it changed (`CACHE_METADATA`), so the
//! server does the same work for both.

use std::time::Duration;

use bytes::{BufMut, BytesMut};
use tokio::net::{TcpStream, UnixStream};

use crate::backend::BackendError;
use crate::backend::connect::{BackendParams, auth_response, authenticate};
use crate::protocol::caps::{Flavour, flag, mariadb};
use crate::protocol::command::{
    COM_INIT_DB, COM_QUERY, COM_QUIT, COM_STMT_CLOSE, COM_STMT_EXECUTE, COM_STMT_PREPARE,
};
use crate::protocol::framing::ChunkHeader;
use crate::protocol::greeting::Greeting;
use crate::protocol::lenenc::{Reader, put_lenenc_bytes};
use crate::protocol::packets::{EOF_HEADER, ERR_HEADER, ErrPacket, OK_HEADER, status};
use crate::protocol::response::{Class, Shape, Tracker, end_status};
use crate::wire::{PacketIo, Stream, WireError};

/// Where and as whom a client logs in.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// TCP host and port, or a Unix socket path.
    pub address: Address,
    /// Login user.
    pub user: String,
    /// Password (empty: none).
    pub password: String,
    /// Default schema, if any.
    pub db: Option<String>,
}

/// Transport of an [`Endpoint`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Address {
    /// Host (name or address) and port.
    Tcp(String, u16),
    /// Unix socket path.
    Unix(std::path::PathBuf),
}

/// Why a client operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server answered with an error; the connection is still usable.
    #[error("server error {}: {}", .0.code, .0.message)]
    Server(ErrPacket),
    /// The socket failed or closed.
    #[error("{0}")]
    Wire(#[from] WireError),
    /// The login failed (other than by a server error).
    #[error("login: {0}")]
    Login(String),
    /// The server sent something this client does not expect.
    #[error("protocol: {0}")]
    Protocol(String),
}

impl ClientError {
    /// The server's error code; 0 when the connection itself failed (and
    /// must be replaced).
    pub fn code(&self) -> u16 {
        match self {
            ClientError::Server(e) => e.code,
            _ => 0,
        }
    }
}

impl From<BackendError> for ClientError {
    fn from(e: BackendError) -> Self {
        match e {
            BackendError::Server(e) => ClientError::Server(e),
            BackendError::Wire(e) => ClientError::Wire(e),
            other => ClientError::Login(other.to_string()),
        }
    }
}

/// A statement prepared on one connection.
#[derive(Debug)]
pub struct Stmt {
    id: u32,
    params: u16,
    /// Parameter types go with the first execution only (the server keeps
    /// them), as libmariadb sends them.
    types_sent: bool,
}

/// A parameter value.
#[derive(Debug, Clone, Copy)]
pub enum Param<'a> {
    /// An unsigned 32-bit integer (MYSQL_TYPE_LONG, unsigned).
    Int(u32),
    /// A string (MYSQL_TYPE_STRING).
    Str(&'a [u8]),
}

const TYPE_LONG: u8 = 0x03;
const TYPE_STRING: u8 = 0xFE;
const UNSIGNED: u8 = 0x80;
/// utf8mb4_general_ci.
const COLLATION: u8 = 45;

/// Capabilities asked for (those the server offers): what a connector with
/// common defaults asks for, without MariaDB's extensions.
const WANTED: u32 = flag::LONG_PASSWORD
    | flag::LONG_FLAG
    | flag::PROTOCOL_41
    | flag::TRANSACTIONS
    | flag::SECURE_CONNECTION
    | flag::MULTI_RESULTS
    | flag::PS_MULTI_RESULTS
    | flag::PLUGIN_AUTH
    | flag::PLUGIN_AUTH_LENENC_DATA
    | flag::DEPRECATE_EOF;

/// One logged-in connection.
#[derive(Debug)]
pub struct Conn {
    io: PacketIo,
    deprecate_eof: bool,
    /// MariaDB's CACHE_METADATA negotiated: every column count carries a
    /// "metadata follows" byte.
    cache_metadata: bool,
    /// Reused for every command's payload.
    out: BytesMut,
}

impl Conn {
    /// Dials and logs in.
    pub async fn connect(e: &Endpoint) -> Result<Self, ClientError> {
        let wire = |e: std::io::Error| ClientError::Wire(e.into());
        let stream = match &e.address {
            Address::Tcp(host, port) => {
                let tcp = TcpStream::connect((host.as_str(), *port))
                    .await
                    .map_err(wire)?;
                tcp.set_nodelay(true).map_err(wire)?;
                Stream::Plain(tcp)
            }
            Address::Unix(path) => Stream::Unix(UnixStream::connect(path).await.map_err(wire)?),
        };
        let mut io = PacketIo::new(stream);
        let greeting = io.read_packet(1 << 20).await?;
        if greeting.payload.first() == Some(&ERR_HEADER) {
            return Err(ClientError::Server(err_packet(&greeting.payload)));
        }
        let hs = Greeting::parse(&greeting.payload)
            .ok_or_else(|| ClientError::Login("bad greeting".into()))?;
        let offered = hs.capabilities as u32;
        if offered & (flag::PROTOCOL_41 | flag::SECURE_CONNECTION)
            != flag::PROTOCOL_41 | flag::SECURE_CONNECTION
        {
            return Err(ClientError::Login("server lacks PROTOCOL_41".into()));
        }
        let mut caps = WANTED & offered;
        if e.db.is_some() {
            caps |= flag::CONNECT_WITH_DB & offered;
        }
        // MariaDB's extensions are read from the filler when bit 0
        // (CLIENT_MYSQL) is clear; only with DEPRECATE_EOF here, so a
        // skipped metadata block never leaves an EOF behind.
        let ext = if offered & flag::MYSQL == 0 && caps & flag::DEPRECATE_EOF != 0 {
            ((hs.capabilities & mariadb::CACHE_METADATA) >> 32) as u32
        } else {
            0
        };
        if ext != 0 {
            caps &= !flag::MYSQL;
        }
        let plugin = if hs.auth_plugin.is_empty() {
            b"mysql_native_password".to_vec()
        } else {
            hs.auth_plugin.clone()
        };
        let params = BackendParams {
            address: String::new(),
            user: e.user.clone(),
            password: e.password.clone(),
            native_stage1: None,
            tls: None,
            connect_timeout: Duration::from_secs(60),
            pool: 0,
            flavour: Flavour::DEFAULT,
        };
        let auth = auth_response(&plugin, &hs.scramble, &params, false)?;
        let mut resp = BytesMut::with_capacity(128);
        resp.put_u32_le(caps);
        resp.put_u32_le(1 << 24);
        resp.put_u8(COLLATION);
        resp.put_slice(&[0u8; 19]);
        resp.put_u32_le(ext);
        resp.put_slice(e.user.as_bytes());
        resp.put_u8(0);
        if caps & flag::PLUGIN_AUTH_LENENC_DATA != 0 {
            put_lenenc_bytes(&mut resp, &auth);
        } else {
            resp.put_u8(auth.len() as u8);
            resp.put_slice(&auth);
        }
        if let Some(db) = e.db.as_ref().filter(|_| caps & flag::CONNECT_WITH_DB != 0) {
            resp.put_slice(db.as_bytes());
            resp.put_u8(0);
        }
        if caps & flag::PLUGIN_AUTH != 0 {
            resp.put_slice(&plugin);
            resp.put_u8(0);
        }
        io.send_packet(greeting.last_seq.wrapping_add(1), &resp)
            .await?;
        authenticate(&mut io, &params, plugin, hs.scramble).await?;
        let mut conn = Self {
            io,
            deprecate_eof: caps & flag::DEPRECATE_EOF != 0,
            cache_metadata: ext != 0,
            out: BytesMut::with_capacity(512),
        };
        match &e.db {
            Some(db) if caps & flag::CONNECT_WITH_DB == 0 => {
                conn.out.clear();
                conn.out.put_u8(COM_INIT_DB);
                conn.out.put_slice(db.as_bytes());
                conn.send().await?;
                conn.read_result().await?;
            }
            _ => {}
        }
        Ok(conn)
    }

    /// Prepares `sql`.
    pub async fn prepare(&mut self, sql: &str) -> Result<Stmt, ClientError> {
        self.out.clear();
        self.out.put_u8(COM_STMT_PREPARE);
        self.out.put_slice(sql.as_bytes());
        self.send().await?;
        match self.read_prepared().await? {
            Some((id, params)) => Ok(Stmt {
                id,
                params,
                types_sent: false,
            }),
            None => Err(ClientError::Protocol(
                "prepare answered without a statement".into(),
            )),
        }
    }

    /// Executes `stmt` and reads its whole reply (every result set).
    pub async fn execute(
        &mut self,
        stmt: &mut Stmt,
        params: &[Param<'_>],
    ) -> Result<(), ClientError> {
        if params.len() != usize::from(stmt.params) {
            return Err(ClientError::Protocol(format!(
                "statement takes {} parameters, {} given",
                stmt.params,
                params.len()
            )));
        }
        encode_execute(&mut self.out, stmt, params);
        self.send().await?;
        self.read_result().await
    }

    /// Closes `stmt` on the server (no reply).
    pub async fn close(&mut self, stmt: Stmt) -> Result<(), ClientError> {
        self.out.clear();
        self.out.put_u8(COM_STMT_CLOSE);
        self.out.put_u32_le(stmt.id);
        self.send().await
    }

    /// Runs a text query and reads its whole reply.
    pub async fn query(&mut self, sql: &str) -> Result<(), ClientError> {
        self.out.clear();
        self.out.put_u8(COM_QUERY);
        self.out.put_slice(sql.as_bytes());
        self.send().await?;
        self.read_result().await
    }

    /// Says goodbye (COM_QUIT) and closes.
    pub async fn quit(mut self) {
        self.out.clear();
        self.out.put_u8(COM_QUIT);
        let _ = self.send().await;
    }

    async fn send(&mut self) -> Result<(), ClientError> {
        self.io.send_packet(0, &self.out).await?;
        Ok(())
    }

    /// Reads a prepare reply: the statement id and parameter count.
    async fn read_prepared(&mut self) -> Result<Option<(u32, u16)>, ClientError> {
        let mut t = Tracker::with_style(Shape::Prepare, self.deprecate_eof);
        let (mut err, mut prepared) = (None, None);
        while !t.done() {
            let h = self.io.next_chunk().await?;
            let first = self.io.chunk_payload(h);
            match t.next(first, h.continues()) {
                Class::Err => err = Some(err_packet(first)),
                Class::PrepareOk { params, .. } => {
                    let id = first.get(1..5).and_then(|b| b.try_into().ok());
                    prepared = id.map(|b| (u32::from_le_bytes(b), params));
                }
                Class::Malformed => return Err(unexpected(first)),
                _ => {}
            }
            self.skip(h).await?;
        }
        match err {
            Some(e) => Err(ClientError::Server(e)),
            None => Ok(prepared),
        }
    }

    /// Reads the reply of a query or an execution to its end (every result
    /// set), dropping each packet as it is read; the error if it was one.
    async fn read_result(&mut self) -> Result<(), ClientError> {
        let mut step = Step::Start;
        loop {
            let h = self.io.next_chunk().await?;
            let p = self.io.chunk_payload(h);
            let multi = h.continues();
            let end = !multi && p.first() == Some(&EOF_HEADER) && p.len() < 0xFF_FFFF;
            step = match (step, p.first().copied()) {
                (Step::Start | Step::Rows, Some(ERR_HEADER)) => {
                    let e = err_packet(p);
                    self.skip(h).await?;
                    return Err(ClientError::Server(e));
                }
                (Step::Start, Some(OK_HEADER)) => after_status(p)?,
                (Step::Start, Some(EOF_HEADER)) if end => after_status(p)?,
                (Step::Start, Some(_)) => {
                    let mut r = Reader::new(p);
                    let columns = r
                        .lenenc_int()
                        .filter(|n| *n > 0)
                        .ok_or_else(|| unexpected(p))?;
                    let follows = !self.cache_metadata || r.u8() != Some(0);
                    if follows {
                        Step::Columns(columns)
                    } else {
                        Step::Rows
                    }
                }
                (Step::Columns(left), _) if left > 1 => Step::Columns(left - 1),
                (Step::Columns(_), _) if self.deprecate_eof => Step::Rows,
                (Step::Columns(_), _) => Step::ColumnsEof,
                (Step::ColumnsEof, Some(EOF_HEADER)) if p.len() < 9 => Step::Rows,
                (Step::Rows, Some(EOF_HEADER)) if end && (self.deprecate_eof || p.len() < 9) => {
                    after_status(p)?
                }
                (Step::Rows, _) => Step::Rows,
                _ => return Err(unexpected(p)),
            };
            self.skip(h).await?;
            if step == Step::Done {
                return Ok(());
            }
        }
    }

    /// Drops the chunk `h` and any continuation chunks of its packet.
    async fn skip(&mut self, h: ChunkHeader) -> Result<(), ClientError> {
        let mut last = h;
        self.io.consume_chunk(h);
        while last.continues() {
            last = self.io.next_chunk().await?;
            self.io.consume_chunk(last);
        }
        Ok(())
    }
}

/// Where [`Conn::read_result`] is in a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Expecting OK, ERR or a column count.
    Start,
    /// Column definitions left.
    Columns(u64),
    /// The EOF after the definitions (no DEPRECATE_EOF).
    ColumnsEof,
    Rows,
    Done,
}

/// The step after an OK or terminator: another result set, or the end.
fn after_status(p: &[u8]) -> Result<Step, ClientError> {
    let (st, _) = end_status(p).ok_or_else(|| unexpected(p))?;
    Ok(if st & status::MORE_RESULTS_EXISTS != 0 {
        Step::Start
    } else {
        Step::Done
    })
}

fn unexpected(p: &[u8]) -> ClientError {
    ClientError::Protocol(format!(
        "unexpected packet 0x{:02x} ({} bytes)",
        p.first().copied().unwrap_or(0),
        p.len()
    ))
}

fn err_packet(payload: &[u8]) -> ErrPacket {
    ErrPacket::parse(payload)
        .unwrap_or_else(|| ErrPacket::new(2027, "HY000", "malformed error packet"))
}

/// COM_STMT_EXECUTE of `stmt` with `params` (no cursor, one iteration, no
/// NULLs), types only on the statement's first execution.
fn encode_execute(out: &mut BytesMut, stmt: &mut Stmt, params: &[Param<'_>]) {
    out.clear();
    out.put_u8(COM_STMT_EXECUTE);
    out.put_u32_le(stmt.id);
    out.put_u8(0);
    out.put_u32_le(1);
    if params.is_empty() {
        return;
    }
    out.put_bytes(0, params.len().div_ceil(8));
    out.put_u8(u8::from(!stmt.types_sent));
    if !stmt.types_sent {
        for p in params {
            match p {
                Param::Int(_) => out.put_slice(&[TYPE_LONG, UNSIGNED]),
                Param::Str(_) => out.put_slice(&[TYPE_STRING, 0]),
            }
        }
        stmt.types_sent = true;
    }
    for p in params {
        match p {
            Param::Int(v) => out.put_u32_le(*v),
            Param::Str(s) => put_lenenc_bytes(out, s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn execute_sends_types_with_the_first_execution_only() {
        let mut s = Stmt {
            id: 7,
            params: 2,
            types_sent: false,
        };
        let mut out = BytesMut::new();
        encode_execute(&mut out, &mut s, &[Param::Str(b"ab"), Param::Int(258)]);
        assert_eq!(
            &out[..],
            &[
                0x17, 7, 0, 0, 0, // command, statement id
                0, 1, 0, 0, 0, // no cursor, one iteration
                0, 1, // NULL bitmap, types follow
                0xFE, 0, 0x03, 0x80, // STRING, unsigned LONG
                2, b'a', b'b', 2, 1, 0, 0, // values
            ][..]
        );
        encode_execute(&mut out, &mut s, &[Param::Str(b"c"), Param::Int(1)]);
        assert_eq!(
            &out[..],
            &[0x17, 7, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, b'c', 1, 0, 0, 0][..]
        );
    }

    #[test]
    fn execute_without_parameters_is_the_bare_command() {
        let mut s = Stmt {
            id: 1,
            params: 0,
            types_sent: false,
        };
        let mut out = BytesMut::new();
        encode_execute(&mut out, &mut s, &[]);
        assert_eq!(&out[..], &[0x17, 1, 0, 0, 0, 0, 1, 0, 0, 0][..]);
    }

    #[test]
    fn only_server_errors_keep_the_connection() {
        let e = ClientError::Server(ErrPacket::new(1213, "40001", "deadlock"));
        assert_eq!(e.code(), 1213);
        assert_eq!(ClientError::Wire(WireError::Closed).code(), 0);
        let from: ClientError = BackendError::Server(ErrPacket::new(1045, "28000", "no")).into();
        assert_eq!(from.code(), 1045);
    }
}
