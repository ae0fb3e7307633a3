//! A minimal raw MySQL-protocol client over a tokio `TcpStream`, for tests
//! that need byte-level control the usual drivers do not give: login with
//! `mysql_native_password`, text queries, and the binary prepared-statement
//! commands (PREPARE, EXECUTE with explicit new-params-bound control, FETCH,
//! RESET, SEND_LONG_DATA, CLOSE), with or without `CLIENT_DEPRECATE_EOF`.
//!
//! Responses are kept close to the wire: column definitions and rows are the
//! raw packet payloads (so proxy and server answers can be compared byte for
//! byte), OK/EOF/ERR packets are parsed into their fields.

#![allow(dead_code)]

use std::io;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

/// Upper bound for any single wait on a peer.
pub const WAIT: Duration = Duration::from_secs(30);

/// Largest payload of one protocol packet.
const MAX_CHUNK: usize = 0xFF_FFFF;

// Capability bits.
pub const LONG_PASSWORD: u32 = 0x0000_0001;
pub const LONG_FLAG: u32 = 0x0000_0004;
pub const CONNECT_WITH_DB: u32 = 0x0000_0008;
pub const PROTOCOL_41: u32 = 0x0000_0200;
pub const TRANSACTIONS: u32 = 0x0000_2000;
pub const SECURE_CONNECTION: u32 = 0x0000_8000;
pub const MULTI_RESULTS: u32 = 0x0002_0000;
pub const PS_MULTI_RESULTS: u32 = 0x0004_0000;
pub const PLUGIN_AUTH: u32 = 0x0008_0000;
pub const MULTI_STATEMENTS: u32 = 0x0001_0000;
pub const SESSION_TRACK: u32 = 0x0080_0000;
pub const DEPRECATE_EOF: u32 = 0x0100_0000;

/// What the raw client asks for (DEPRECATE_EOF is added per connection).
pub const BASE_CAPS: u32 = LONG_PASSWORD
    | LONG_FLAG
    | PROTOCOL_41
    | TRANSACTIONS
    | SECURE_CONNECTION
    | MULTI_RESULTS
    | PS_MULTI_RESULTS
    | PLUGIN_AUTH;

// Commands.
pub const COM_QUERY: u8 = 0x03;
pub const COM_STMT_PREPARE: u8 = 0x16;
pub const COM_STMT_EXECUTE: u8 = 0x17;
pub const COM_STMT_SEND_LONG_DATA: u8 = 0x18;
pub const COM_STMT_CLOSE: u8 = 0x19;
pub const COM_STMT_RESET: u8 = 0x1a;
pub const COM_STMT_FETCH: u8 = 0x1c;

// Server status bits.
pub const STATUS_IN_TRANS: u16 = 0x0001;
pub const STATUS_AUTOCOMMIT: u16 = 0x0002;
pub const STATUS_MORE_RESULTS: u16 = 0x0008;
pub const STATUS_CURSOR_EXISTS: u16 = 0x0040;
pub const STATUS_LAST_ROW_SENT: u16 = 0x0080;

// Cursor flags of COM_STMT_EXECUTE.
pub const CURSOR_TYPE_NO_CURSOR: u8 = 0;
pub const CURSOR_TYPE_READ_ONLY: u8 = 1;

// Column / parameter types.
pub const TYPE_DECIMAL: u8 = 0x00;
pub const TYPE_TINY: u8 = 0x01;
pub const TYPE_SHORT: u8 = 0x02;
pub const TYPE_LONG: u8 = 0x03;
pub const TYPE_FLOAT: u8 = 0x04;
pub const TYPE_DOUBLE: u8 = 0x05;
pub const TYPE_NULL: u8 = 0x06;
pub const TYPE_TIMESTAMP: u8 = 0x07;
pub const TYPE_LONGLONG: u8 = 0x08;
pub const TYPE_INT24: u8 = 0x09;
pub const TYPE_DATE: u8 = 0x0a;
pub const TYPE_TIME: u8 = 0x0b;
pub const TYPE_DATETIME: u8 = 0x0c;
pub const TYPE_YEAR: u8 = 0x0d;
pub const TYPE_LONG_BLOB: u8 = 0xfb;
pub const TYPE_BLOB: u8 = 0xfc;
pub const TYPE_VAR_STRING: u8 = 0xfd;
pub const TYPE_STRING: u8 = 0xfe;

/// Column flag: UNSIGNED.
const UNSIGNED_FLAG: u16 = 0x0020;

// ---------------------------------------------------------------------------
// Packets
// ---------------------------------------------------------------------------

/// An ERR packet's fields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrInfo {
    pub code: u16,
    pub state: String,
    pub message: String,
}

impl ErrInfo {
    /// The message with every occurrence of `id` (as decimal) replaced by
    /// `<id>`: statement ids differ between the proxy and the server.
    pub fn normalized(&self, id: u32) -> ErrInfo {
        ErrInfo {
            code: self.code,
            state: self.state.clone(),
            message: self.message.replace(&id.to_string(), "<id>"),
        }
    }
}

/// An OK packet's fields (with either header).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OkInfo {
    pub affected_rows: u64,
    pub last_insert_id: u64,
    pub status: u16,
    pub warnings: u16,
}

/// The end of a column-definition block or of a row stream: an EOF packet
/// (without DEPRECATE_EOF) or a 0xFE-headed OK packet (with it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndInfo {
    pub status: u16,
    pub warnings: u16,
}

pub fn parse_err(p: &[u8]) -> Option<ErrInfo> {
    if p.first() != Some(&0xFF) || p.len() < 3 {
        return None;
    }
    let code = u16::from_le_bytes([p[1], p[2]]);
    let (state, msg) = if p.get(3) == Some(&b'#') && p.len() >= 9 {
        (String::from_utf8_lossy(&p[4..9]).into_owned(), &p[9..])
    } else {
        (String::new(), &p[3..])
    };
    Some(ErrInfo {
        code,
        state,
        message: String::from_utf8_lossy(msg).into_owned(),
    })
}

/// Parses an OK packet (header 0x00 or 0xFE).
pub fn parse_ok(p: &[u8]) -> Option<OkInfo> {
    if !matches!(p.first(), Some(0x00) | Some(0xFE)) {
        return None;
    }
    let mut at = 1;
    let affected_rows = lenenc(p, &mut at)?;
    let last_insert_id = lenenc(p, &mut at)?;
    let status = u16::from_le_bytes([*p.get(at)?, *p.get(at + 1)?]);
    let warnings = u16::from_le_bytes([*p.get(at + 2)?, *p.get(at + 3)?]);
    Some(OkInfo {
        affected_rows,
        last_insert_id,
        status,
        warnings,
    })
}

/// True for a packet that ends a row stream or column block.
pub fn is_terminator(p: &[u8]) -> bool {
    p.first() == Some(&0xFE) && p.len() < MAX_CHUNK
}

/// Reads a length-encoded integer at `*at`.
pub fn lenenc(p: &[u8], at: &mut usize) -> Option<u64> {
    let b = *p.get(*at)?;
    *at += 1;
    let n = match b {
        0..=0xFA => return Some(u64::from(b)),
        0xFC => 2,
        0xFD => 3,
        0xFE => 8,
        _ => return None,
    };
    let mut v = 0u64;
    for i in 0..n {
        v |= u64::from(*p.get(*at + i)?) << (8 * i);
    }
    *at += n;
    Some(v)
}

/// Reads a length-encoded string at `*at`.
pub fn lenenc_bytes<'a>(p: &'a [u8], at: &mut usize) -> Option<&'a [u8]> {
    let n = lenenc(p, at)? as usize;
    let s = p.get(*at..*at + n)?;
    *at += n;
    Some(s)
}

pub fn put_lenenc(out: &mut Vec<u8>, v: u64) {
    match v {
        0..=0xFA => out.push(v as u8),
        0xFB..=0xFFFF => {
            out.push(0xFC);
            out.extend_from_slice(&(v as u16).to_le_bytes());
        }
        0x1_0000..=0xFF_FFFF => {
            out.push(0xFD);
            out.extend_from_slice(&(v as u32).to_le_bytes()[..3]);
        }
        _ => {
            out.push(0xFE);
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
}

/// The fields of a column definition (Protocol::ColumnDefinition41) the
/// tests look at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnDef {
    pub schema: String,
    pub table: String,
    pub name: String,
    pub charset: u16,
    pub length: u32,
    pub column_type: u8,
    pub flags: u16,
    pub decimals: u8,
}

pub fn parse_column(p: &[u8]) -> ColumnDef {
    let mut at = 0;
    let mut s = || {
        String::from_utf8_lossy(lenenc_bytes(p, &mut at).expect("column definition string"))
            .into_owned()
    };
    let _catalog = s();
    let schema = s();
    let table = s();
    let _org_table = s();
    let name = s();
    let _org_name = s();
    let fixed = lenenc(p, &mut at).expect("fixed-length fields") as usize;
    assert!(
        fixed >= 10,
        "column definition fixed part {fixed}: {p:02x?}"
    );
    let f = &p[at..at + 10];
    ColumnDef {
        schema,
        table,
        name,
        charset: u16::from_le_bytes([f[0], f[1]]),
        length: u32::from_le_bytes([f[2], f[3], f[4], f[5]]),
        column_type: f[6],
        flags: u16::from_le_bytes([f[7], f[8]]),
        decimals: f[9],
    }
}

/// A decoded binary-protocol value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Int(i64),
    UInt(u64),
    Float(f32),
    Double(f64),
    Bytes(Vec<u8>),
    /// DATE / DATETIME / TIMESTAMP / TIME as sent (length byte stripped).
    Temporal(Vec<u8>),
}

impl Value {
    /// Convenience for string comparisons.
    pub fn str(s: &str) -> Value {
        Value::Bytes(s.as_bytes().to_vec())
    }
}

/// Decodes a binary resultset row against `columns`.
pub fn decode_binary_row(row: &[u8], columns: &[ColumnDef]) -> Vec<Value> {
    assert_eq!(row.first(), Some(&0x00), "binary row header: {row:02x?}");
    let n = columns.len();
    let bitmap_len = (n + 7 + 2) / 8;
    let bitmap = &row[1..1 + bitmap_len];
    let mut at = 1 + bitmap_len;
    let mut out = Vec::with_capacity(n);
    for (i, c) in columns.iter().enumerate() {
        let bit = i + 2;
        if bitmap[bit / 8] & (1 << (bit % 8)) != 0 {
            out.push(Value::Null);
            continue;
        }
        let unsigned = c.flags & UNSIGNED_FLAG != 0;
        let mut fixed = |len: usize| -> u64 {
            let mut v = 0u64;
            for (k, b) in row[at..at + len].iter().enumerate() {
                v |= u64::from(*b) << (8 * k);
            }
            at += len;
            v
        };
        let v = match c.column_type {
            TYPE_TINY => {
                let v = fixed(1);
                if unsigned {
                    Value::UInt(v)
                } else {
                    Value::Int(i64::from(v as u8 as i8))
                }
            }
            TYPE_SHORT | TYPE_YEAR => {
                let v = fixed(2);
                if unsigned {
                    Value::UInt(v)
                } else {
                    Value::Int(i64::from(v as u16 as i16))
                }
            }
            TYPE_LONG | TYPE_INT24 => {
                let v = fixed(4);
                if unsigned {
                    Value::UInt(v)
                } else {
                    Value::Int(i64::from(v as u32 as i32))
                }
            }
            TYPE_LONGLONG => {
                let v = fixed(8);
                if unsigned {
                    Value::UInt(v)
                } else {
                    Value::Int(v as i64)
                }
            }
            TYPE_FLOAT => Value::Float(f32::from_bits(fixed(4) as u32)),
            TYPE_DOUBLE => Value::Double(f64::from_bits(fixed(8))),
            TYPE_DATE | TYPE_DATETIME | TYPE_TIMESTAMP | TYPE_TIME => {
                let len = row[at] as usize;
                let v = row[at + 1..at + 1 + len].to_vec();
                at += 1 + len;
                Value::Temporal(v)
            }
            _ => Value::Bytes(
                lenenc_bytes(row, &mut at)
                    .expect("length-encoded value")
                    .to_vec(),
            ),
        };
        out.push(v);
    }
    assert_eq!(at, row.len(), "binary row has trailing bytes: {row:02x?}");
    out
}

/// Decodes a text-protocol row of `n` columns.
pub fn decode_text_row(row: &[u8], n: usize) -> Vec<Option<String>> {
    let mut at = 0;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        if row.get(at) == Some(&0xFB) {
            at += 1;
            out.push(None);
            continue;
        }
        let v = lenenc_bytes(row, &mut at).expect("text field");
        out.push(Some(String::from_utf8_lossy(v).into_owned()));
    }
    out
}

/// A result set as received.
#[derive(Debug, Clone, PartialEq)]
pub struct ResultSet {
    /// Raw column-definition payloads.
    pub columns: Vec<Vec<u8>>,
    /// The EOF after the column definitions (only without DEPRECATE_EOF).
    pub columns_end: Option<EndInfo>,
    /// Raw row payloads.
    pub rows: Vec<Vec<u8>>,
    /// The terminator of the rows; for a result that opened a cursor it is
    /// the packet after the column definitions (there are no rows).
    pub end: EndInfo,
}

impl ResultSet {
    pub fn column_defs(&self) -> Vec<ColumnDef> {
        self.columns.iter().map(|c| parse_column(c)).collect()
    }

    /// Rows decoded as binary-protocol rows.
    pub fn binary_rows(&self) -> Vec<Vec<Value>> {
        let defs = self.column_defs();
        self.rows
            .iter()
            .map(|r| decode_binary_row(r, &defs))
            .collect()
    }

    /// Rows decoded as text-protocol rows.
    pub fn text_rows(&self) -> Vec<Vec<Option<String>>> {
        self.rows
            .iter()
            .map(|r| decode_text_row(r, self.columns.len()))
            .collect()
    }
}

/// A command's response.
#[derive(Debug, Clone, PartialEq)]
pub enum Response {
    Ok(OkInfo),
    Err(ErrInfo),
    Rows(ResultSet),
}

impl Response {
    #[track_caller]
    pub fn ok(self) -> OkInfo {
        match self {
            Response::Ok(o) => o,
            other => panic!("expected OK, got {other:?}"),
        }
    }
    #[track_caller]
    pub fn err(self) -> ErrInfo {
        match self {
            Response::Err(e) => e,
            other => panic!("expected ERR, got {}", brief(&other)),
        }
    }
    #[track_caller]
    pub fn rows(self) -> ResultSet {
        match self {
            Response::Rows(r) => r,
            other => panic!("expected a result set, got {other:?}"),
        }
    }
}

/// A short description (result sets can be huge).
pub fn brief(r: &Response) -> String {
    match r {
        Response::Rows(rs) => format!(
            "result set ({} columns, {} rows, end {:?})",
            rs.columns.len(),
            rs.rows.len(),
            rs.end
        ),
        other => format!("{other:?}"),
    }
}

/// The answer to COM_STMT_FETCH: rows and their terminator, or ERR.
#[derive(Debug, Clone, PartialEq)]
pub enum Fetched {
    Rows { rows: Vec<Vec<u8>>, end: EndInfo },
    Err(ErrInfo),
}

/// A successful COM_STMT_PREPARE.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    pub id: u32,
    pub num_columns: u16,
    pub num_params: u16,
    pub warnings: u16,
    /// Raw parameter-definition payloads.
    pub params: Vec<Vec<u8>>,
    /// Raw column-definition payloads.
    pub columns: Vec<Vec<u8>>,
    /// EOF packets after the parameter and column blocks (without
    /// DEPRECATE_EOF).
    pub eofs: Vec<EndInfo>,
}

/// An EXECUTE parameter.
#[derive(Debug, Clone, PartialEq)]
pub enum Param {
    Null,
    /// MYSQL_TYPE_LONGLONG.
    LongLong(i64),
    /// MYSQL_TYPE_LONG.
    Long(i32),
    /// MYSQL_TYPE_DOUBLE.
    Double(f64),
    /// MYSQL_TYPE_VAR_STRING.
    Str(Vec<u8>),
    /// A parameter whose value was sent with SEND_LONG_DATA: the type is
    /// bound, no value is sent in the EXECUTE.
    LongData(u8),
}

impl Param {
    pub fn str(s: &str) -> Param {
        Param::Str(s.as_bytes().to_vec())
    }

    fn type_bytes(&self) -> [u8; 2] {
        let t = match self {
            Param::Null => TYPE_NULL,
            Param::LongLong(_) => TYPE_LONGLONG,
            Param::Long(_) => TYPE_LONG,
            Param::Double(_) => TYPE_DOUBLE,
            Param::Str(_) => TYPE_VAR_STRING,
            Param::LongData(t) => *t,
        };
        [t, 0]
    }

    fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Param::Null | Param::LongData(_) => {}
            Param::LongLong(v) => out.extend_from_slice(&v.to_le_bytes()),
            Param::Long(v) => out.extend_from_slice(&v.to_le_bytes()),
            Param::Double(v) => out.extend_from_slice(&v.to_le_bytes()),
            Param::Str(s) => {
                put_lenenc(out, s.len() as u64);
                out.extend_from_slice(s);
            }
        }
    }
}

/// A COM_STMT_EXECUTE payload: `bound` controls the new-params-bound flag
/// (and whether the type block is sent).
pub fn execute_payload(id: u32, flags: u8, params: &[Param], bound: bool) -> Vec<u8> {
    let mut p = vec![COM_STMT_EXECUTE];
    p.extend_from_slice(&id.to_le_bytes());
    p.push(flags);
    p.extend_from_slice(&1u32.to_le_bytes());
    if params.is_empty() {
        return p;
    }
    let mut bitmap = vec![0u8; params.len().div_ceil(8)];
    for (i, param) in params.iter().enumerate() {
        if *param == Param::Null {
            bitmap[i / 8] |= 1 << (i % 8);
        }
    }
    p.extend_from_slice(&bitmap);
    p.push(u8::from(bound));
    if bound {
        for param in params {
            p.extend_from_slice(&param.type_bytes());
        }
    }
    for param in params {
        param.encode(&mut p);
    }
    p
}

// ---------------------------------------------------------------------------
// The connection
// ---------------------------------------------------------------------------

/// A logged-in raw connection.
pub struct RawConn {
    stream: TcpStream,
    /// What was negotiated (client request ∩ server offer).
    pub caps: u32,
    /// The connection id from the greeting.
    pub conn_id: u32,
    /// The server version from the greeting.
    pub version: String,
    /// The greeting's scramble (COM_CHANGE_USER answers it).
    pub scramble: Vec<u8>,
    /// The greeting's status flags.
    pub greeting_status: u16,
    /// The status flags of the OK that ended the login.
    pub login_status: u16,
}

async fn read_exact(s: &mut TcpStream, buf: &mut [u8], what: &str) -> io::Result<()> {
    match timeout(WAIT, s.read_exact(buf)).await {
        Ok(r) => r.map(|_| ()),
        Err(_) => panic!("{what}: nothing within {WAIT:?}: the peer hangs"),
    }
}

/// How a peer ended a connection ([`RawConn::ending`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ending {
    /// The packets it sent first, with their sequence ids.
    pub said: Vec<(u8, Vec<u8>)>,
    /// It reset the connection (a plain close otherwise).
    pub reset: bool,
}

/// Reads one logical packet (joining 16 MiB chunks); `Err` on close.
async fn read_packet(s: &mut TcpStream, what: &str) -> io::Result<(u8, Vec<u8>)> {
    let mut payload = Vec::new();
    loop {
        let mut h = [0u8; 4];
        read_exact(s, &mut h, what).await?;
        let len = h[0] as usize | (h[1] as usize) << 8 | (h[2] as usize) << 16;
        let start = payload.len();
        payload.resize(start + len, 0);
        read_exact(s, &mut payload[start..], what).await?;
        if len < MAX_CHUNK {
            return Ok((h[3], payload));
        }
    }
}

/// Writes one logical packet (split into 16 MiB chunks); returns the next
/// sequence id.
async fn write_packet(s: &mut TcpStream, mut seq: u8, payload: &[u8]) -> io::Result<u8> {
    let mut rest = payload;
    loop {
        let n = rest.len().min(MAX_CHUNK);
        let mut b = Vec::with_capacity(n + 4);
        b.extend_from_slice(&[n as u8, (n >> 8) as u8, (n >> 16) as u8, seq]);
        b.extend_from_slice(&rest[..n]);
        s.write_all(&b).await?;
        seq = seq.wrapping_add(1);
        rest = &rest[n..];
        if n < MAX_CHUNK {
            return Ok(seq);
        }
    }
}

impl RawConn {
    /// Connects and logs in with mysql_native_password. Panics on failure.
    pub async fn connect(
        addr: &str,
        user: &str,
        password: &str,
        db: Option<&str>,
        deprecate_eof: bool,
    ) -> RawConn {
        match RawConn::try_connect(addr, user, password, db, deprecate_eof).await {
            Ok(c) => c,
            Err(e) => panic!("login to {addr} as {user}: {e:?}"),
        }
    }

    /// Like `connect`, returning the server's ERR instead of panicking.
    pub async fn try_connect(
        addr: &str,
        user: &str,
        password: &str,
        db: Option<&str>,
        deprecate_eof: bool,
    ) -> Result<RawConn, ErrInfo> {
        let mut wanted = BASE_CAPS;
        if deprecate_eof {
            wanted |= DEPRECATE_EOF;
        }
        let c = RawConn::try_connect_with(addr, user, password, db, wanted, 45).await?;
        assert_eq!(
            c.caps & DEPRECATE_EOF != 0,
            deprecate_eof,
            "server does not offer the requested DEPRECATE_EOF setting"
        );
        Ok(c)
    }

    /// Logs in asking for capabilities `wanted` (CONNECT_WITH_DB is added
    /// when `db` is given; the result is `wanted` ∩ the server's offer) and
    /// handshake collation `collation` (e.g. 8 = latin1_swedish_ci,
    /// 45 = utf8mb4_general_ci). Returns the server's ERR on failure.
    pub async fn try_connect_with(
        addr: &str,
        user: &str,
        password: &str,
        db: Option<&str>,
        wanted: u32,
        collation: u8,
    ) -> Result<RawConn, ErrInfo> {
        let stream = timeout(WAIT, TcpStream::connect(addr))
            .await
            .expect("connect timed out")
            .unwrap_or_else(|e| panic!("connect {addr}: {e}"));
        RawConn::login(stream, user, password, db, wanted, collation).await
    }

    /// Like `try_connect` (no DEPRECATE_EOF), from source address `from`
    /// (any 127.x.y.z works on Linux loopback).
    pub async fn try_connect_from(
        from: std::net::IpAddr,
        addr: &str,
        user: &str,
        password: &str,
    ) -> Result<RawConn, ErrInfo> {
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket
            .bind(std::net::SocketAddr::new(from, 0))
            .unwrap_or_else(|e| panic!("bind {from}: {e}"));
        let to: std::net::SocketAddr = addr.parse().expect("address");
        let stream = timeout(WAIT, socket.connect(to))
            .await
            .expect("connect timed out")
            .unwrap_or_else(|e| panic!("connect {addr}: {e}"));
        RawConn::login(stream, user, password, None, BASE_CAPS, 45).await
    }

    /// Logs in on a connected socket.
    async fn login(
        mut stream: TcpStream,
        user: &str,
        password: &str,
        db: Option<&str>,
        wanted: u32,
        collation: u8,
    ) -> Result<RawConn, ErrInfo> {
        let (_, g) = read_packet(&mut stream, "greeting")
            .await
            .expect("greeting");
        if let Some(e) = parse_err(&g) {
            return Err(e);
        }
        let greeting = parse_greeting(&g);
        let mut wanted = wanted;
        if db.is_some() {
            wanted |= CONNECT_WITH_DB;
        }
        let caps = wanted & greeting.caps;
        let auth = native(&greeting.scramble, password);
        let mut p = Vec::new();
        p.extend_from_slice(&caps.to_le_bytes());
        p.extend_from_slice(&(16u32 << 20).to_le_bytes());
        p.push(collation);
        p.extend_from_slice(&[0u8; 23]);
        p.extend_from_slice(user.as_bytes());
        p.push(0);
        p.push(auth.len() as u8);
        p.extend_from_slice(&auth);
        if let Some(db) = db {
            p.extend_from_slice(db.as_bytes());
            p.push(0);
        }
        p.extend_from_slice(b"mysql_native_password\0");
        write_packet(&mut stream, 1, &p)
            .await
            .expect("send handshake response");
        let login_status = loop {
            let (s, reply) = read_packet(&mut stream, "login reply")
                .await
                .expect("login reply");
            match reply.first() {
                Some(0x00) => break parse_ok(&reply).expect("login OK").status,
                Some(0xFF) => return Err(parse_err(&reply).expect("ERR")),
                Some(0xFE) => {
                    // Auth switch: plugin name NUL, then the new nonce.
                    let nul = reply[1..]
                        .iter()
                        .position(|&b| b == 0)
                        .expect("auth switch plugin name");
                    let plugin = &reply[1..1 + nul];
                    assert_eq!(plugin, b"mysql_native_password", "auth switch");
                    let mut nonce = reply[2 + nul..].to_vec();
                    if nonce.last() == Some(&0) {
                        nonce.pop();
                    }
                    write_packet(&mut stream, s.wrapping_add(1), &native(&nonce, password))
                        .await
                        .expect("auth switch response");
                }
                _ => panic!("unexpected login reply: {reply:02x?}"),
            }
        };
        Ok(RawConn {
            stream,
            caps,
            conn_id: greeting.conn_id,
            version: greeting.version,
            scramble: greeting.scramble,
            greeting_status: greeting.status,
            login_status,
        })
    }

    pub fn deprecate_eof(&self) -> bool {
        self.caps & DEPRECATE_EOF != 0
    }

    /// Sends a command packet (sequence 0).
    pub async fn send_command(&mut self, payload: &[u8]) {
        write_packet(&mut self.stream, 0, payload)
            .await
            .expect("write command");
    }

    /// Sends a packet with an explicit sequence id; `Err` when the peer has
    /// gone.
    pub async fn send_raw(&mut self, seq: u8, payload: &[u8]) -> io::Result<()> {
        write_packet(&mut self.stream, seq, payload)
            .await
            .map(|_| ())
    }

    /// Reads one packet; panics when the peer closes.
    pub async fn read(&mut self, what: &str) -> Vec<u8> {
        match read_packet(&mut self.stream, what).await {
            Ok((_, p)) => p,
            Err(e) => panic!("{what}: connection closed: {e}"),
        }
    }

    /// Reads one packet with its sequence id; `None` when the peer closed.
    pub async fn try_read(&mut self, what: &str) -> Option<(u8, Vec<u8>)> {
        read_packet(&mut self.stream, what).await.ok()
    }

    /// How the peer ends the connection: what it sends before it goes, and
    /// whether it goes with a close or a reset.
    pub async fn ending(&mut self, what: &str) -> Ending {
        let mut said = Vec::new();
        loop {
            match read_packet(&mut self.stream, what).await {
                Ok(p) => said.push(p),
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {
                    return Ending { said, reset: true };
                }
                Err(_) => return Ending { said, reset: false },
            }
        }
    }

    fn end_info(&self, p: &[u8]) -> EndInfo {
        assert!(is_terminator(p), "expected EOF/OK terminator: {p:02x?}");
        if self.deprecate_eof() {
            let ok = parse_ok(p).unwrap_or_else(|| panic!("0xFE OK packet: {p:02x?}"));
            EndInfo {
                status: ok.status,
                warnings: ok.warnings,
            }
        } else {
            assert_eq!(p.len(), 5, "EOF packet: {p:02x?}");
            EndInfo {
                warnings: u16::from_le_bytes([p[1], p[2]]),
                status: u16::from_le_bytes([p[3], p[4]]),
            }
        }
    }

    /// Reads a complete response (OK, ERR or one result set). `binary`: the
    /// response to COM_STMT_EXECUTE, where an EOF with CURSOR_EXISTS after
    /// the column definitions means a cursor was opened (no rows follow).
    pub async fn read_response(&mut self, what: &str, binary: bool) -> Response {
        let first = self.read(what).await;
        match first.first() {
            Some(0x00) => {
                return Response::Ok(parse_ok(&first).expect("OK packet"));
            }
            Some(0xFF) => return Response::Err(parse_err(&first).expect("ERR packet")),
            Some(0xFB) => panic!("{what}: LOCAL INFILE request not expected"),
            _ => {}
        }
        let mut at = 0;
        let n = lenenc(&first, &mut at).expect("column count") as usize;
        let mut columns = Vec::with_capacity(n);
        for _ in 0..n {
            columns.push(self.read(what).await);
        }
        let mut columns_end = None;
        if !self.deprecate_eof() {
            let eof = self.read(what).await;
            let end = self.end_info(&eof);
            if binary && end.status & STATUS_CURSOR_EXISTS != 0 {
                return Response::Rows(ResultSet {
                    columns,
                    columns_end: None,
                    rows: Vec::new(),
                    end,
                });
            }
            columns_end = Some(end);
        }
        let mut rows = Vec::new();
        loop {
            let p = self.read(what).await;
            if p.first() == Some(&0xFF) {
                return Response::Err(parse_err(&p).expect("ERR packet"));
            }
            if is_terminator(&p) {
                let end = self.end_info(&p);
                return Response::Rows(ResultSet {
                    columns,
                    columns_end,
                    rows,
                    end,
                });
            }
            rows.push(p);
        }
    }

    /// COM_QUERY (text protocol, single result).
    pub async fn query(&mut self, sql: &str) -> Response {
        let mut p = vec![COM_QUERY];
        p.extend_from_slice(sql.as_bytes());
        self.send_command(&p).await;
        self.read_response(sql, false).await
    }

    /// COM_QUERY whose single-packet reply (an OK or ERR) comes back as
    /// the raw payload, or `None` when the connection closed.
    pub async fn query_reply(&mut self, sql: &str) -> Option<Vec<u8>> {
        let mut p = vec![COM_QUERY];
        p.extend_from_slice(sql.as_bytes());
        self.command_reply(&p, sql).await.map(|(_, b)| b)
    }

    /// COM_QUERY read to the end of a multi-result answer: every response
    /// while the server flags more results (an ERR ends it).
    pub async fn query_multi(&mut self, sql: &str) -> Vec<Response> {
        let mut p = vec![COM_QUERY];
        p.extend_from_slice(sql.as_bytes());
        self.send_command(&p).await;
        let mut out = Vec::new();
        loop {
            let r = self.read_response(sql, false).await;
            let more = match &r {
                Response::Ok(ok) => ok.status & STATUS_MORE_RESULTS != 0,
                Response::Rows(rs) => rs.end.status & STATUS_MORE_RESULTS != 0,
                Response::Err(_) => false,
            };
            out.push(r);
            if !more {
                return out;
            }
        }
    }

    /// COM_QUERY expecting a result; returns the text rows.
    pub async fn query_rows(&mut self, sql: &str) -> Vec<Vec<Option<String>>> {
        match self.query(sql).await {
            Response::Rows(rs) => rs.text_rows(),
            other => panic!("{sql}: expected rows, got {other:?}"),
        }
    }

    /// COM_QUERY expecting OK.
    pub async fn query_ok(&mut self, sql: &str) -> OkInfo {
        match self.query(sql).await {
            Response::Ok(ok) => ok,
            other => panic!("{sql}: expected OK, got {}", brief(&other)),
        }
    }

    /// The single value of a one-row, one-column text result.
    pub async fn query_one(&mut self, sql: &str) -> String {
        let rows = self.query_rows(sql).await;
        assert_eq!(rows.len(), 1, "{sql}: {rows:?}");
        rows[0][0].clone().unwrap_or_else(|| panic!("{sql}: NULL"))
    }

    /// COM_STMT_PREPARE.
    pub async fn prepare(&mut self, sql: &str) -> Result<Prepared, ErrInfo> {
        let mut p = vec![COM_STMT_PREPARE];
        p.extend_from_slice(sql.as_bytes());
        self.send_command(&p).await;
        let first = self.read(sql).await;
        if let Some(e) = parse_err(&first) {
            return Err(e);
        }
        assert!(
            first.first() == Some(&0x00) && first.len() >= 12,
            "prepare OK: {first:02x?}"
        );
        let id = u32::from_le_bytes([first[1], first[2], first[3], first[4]]);
        let num_columns = u16::from_le_bytes([first[5], first[6]]);
        let num_params = u16::from_le_bytes([first[7], first[8]]);
        let warnings = u16::from_le_bytes([first[10], first[11]]);
        let mut out = Prepared {
            id,
            num_columns,
            num_params,
            warnings,
            params: Vec::new(),
            columns: Vec::new(),
            eofs: Vec::new(),
        };
        for _ in 0..num_params {
            out.params.push(self.read(sql).await);
        }
        if num_params > 0 && !self.deprecate_eof() {
            let eof = self.read(sql).await;
            out.eofs.push(self.end_info(&eof));
        }
        for _ in 0..num_columns {
            out.columns.push(self.read(sql).await);
        }
        if num_columns > 0 && !self.deprecate_eof() {
            let eof = self.read(sql).await;
            out.eofs.push(self.end_info(&eof));
        }
        Ok(out)
    }

    /// COM_STMT_EXECUTE built by `execute_payload`.
    pub async fn execute(&mut self, id: u32, flags: u8, params: &[Param], bound: bool) -> Response {
        self.execute_raw(&execute_payload(id, flags, params, bound))
            .await
    }

    /// COM_STMT_EXECUTE with an arbitrary payload.
    pub async fn execute_raw(&mut self, payload: &[u8]) -> Response {
        self.send_command(payload).await;
        self.read_response("execute", true).await
    }

    /// COM_STMT_FETCH.
    pub async fn fetch(&mut self, id: u32, num_rows: u32) -> Fetched {
        let mut p = vec![COM_STMT_FETCH];
        p.extend_from_slice(&id.to_le_bytes());
        p.extend_from_slice(&num_rows.to_le_bytes());
        self.send_command(&p).await;
        let mut rows = Vec::new();
        loop {
            let p = self.read("fetch").await;
            if let Some(e) = parse_err(&p) {
                assert!(rows.is_empty(), "ERR after {} fetched rows", rows.len());
                return Fetched::Err(e);
            }
            if is_terminator(&p) {
                let end = self.end_info(&p);
                return Fetched::Rows { rows, end };
            }
            rows.push(p);
        }
    }

    /// COM_STMT_RESET.
    pub async fn reset(&mut self, id: u32) -> Response {
        let mut p = vec![COM_STMT_RESET];
        p.extend_from_slice(&id.to_le_bytes());
        self.send_command(&p).await;
        self.read_response("reset", false).await
    }

    /// COM_STMT_SEND_LONG_DATA (no reply).
    pub async fn send_long_data(&mut self, id: u32, param: u16, data: &[u8]) {
        let mut p = Vec::with_capacity(7 + data.len());
        p.push(COM_STMT_SEND_LONG_DATA);
        p.extend_from_slice(&id.to_le_bytes());
        p.extend_from_slice(&param.to_le_bytes());
        p.extend_from_slice(data);
        self.send_command(&p).await;
    }

    /// COM_STMT_CLOSE (no reply).
    pub async fn close_stmt(&mut self, id: u32) {
        let mut p = vec![COM_STMT_CLOSE];
        p.extend_from_slice(&id.to_le_bytes());
        self.send_command(&p).await;
    }

    /// Sends a command and reads the one packet that answers it, with its
    /// sequence id; `None` when the peer closed instead.
    pub async fn command_reply(&mut self, payload: &[u8], what: &str) -> Option<(u8, Vec<u8>)> {
        self.send_command(payload).await;
        self.try_read(what).await
    }

    /// COM_CHANGE_USER with mysql_native_password, answering an auth switch
    /// request; returns the final reply (OK or ERR) with its sequence id.
    pub async fn change_user(
        &mut self,
        user: &str,
        password: &str,
        db: Option<&str>,
    ) -> (u8, Vec<u8>) {
        self.change_user_with(user, password, db, 45).await
    }

    /// [`Self::change_user`] asking for login collation `collation`.
    pub async fn change_user_with(
        &mut self,
        user: &str,
        password: &str,
        db: Option<&str>,
        collation: u16,
    ) -> (u8, Vec<u8>) {
        let auth = native(&self.scramble, password);
        let mut p = vec![0x11];
        p.extend_from_slice(user.as_bytes());
        p.push(0);
        p.push(auth.len() as u8);
        p.extend_from_slice(&auth);
        p.extend_from_slice(db.unwrap_or("").as_bytes());
        p.push(0);
        p.extend_from_slice(&collation.to_le_bytes());
        p.extend_from_slice(b"mysql_native_password\0");
        self.send_command(&p).await;
        loop {
            let (seq, reply) = self
                .try_read("change user reply")
                .await
                .expect("connection closed during COM_CHANGE_USER");
            if reply.first() != Some(&0xFE) || reply.len() < 2 {
                return (seq, reply);
            }
            let nul = reply[1..]
                .iter()
                .position(|&b| b == 0)
                .expect("auth switch plugin name");
            let mut nonce = reply[2 + nul..].to_vec();
            if nonce.last() == Some(&0) {
                nonce.pop();
            }
            self.send_raw(seq.wrapping_add(1), &native(&nonce, password))
                .await
                .expect("auth switch response");
        }
    }

    /// The socket, for tests that drive it themselves.
    pub fn into_stream(self) -> TcpStream {
        self.stream
    }

    /// Sends COM_QUIT and drops the connection.
    pub async fn quit(mut self) {
        let _ = write_packet(&mut self.stream, 0, &[0x01]).await;
    }
}

struct Greeting {
    conn_id: u32,
    version: String,
    scramble: Vec<u8>,
    caps: u32,
    status: u16,
}

fn parse_greeting(p: &[u8]) -> Greeting {
    assert_eq!(p.first(), Some(&10), "protocol version: {p:02x?}");
    let nul = p[1..]
        .iter()
        .position(|&b| b == 0)
        .expect("server version is NUL-terminated");
    let version = String::from_utf8_lossy(&p[1..1 + nul]).into_owned();
    let mut at = 2 + nul;
    let conn_id = u32::from_le_bytes([p[at], p[at + 1], p[at + 2], p[at + 3]]);
    at += 4;
    let mut scramble = p[at..at + 8].to_vec();
    at += 9; // part 1 + filler
    let lo = u16::from_le_bytes([p[at], p[at + 1]]);
    at += 2;
    at += 1; // collation
    let status = u16::from_le_bytes([p[at], p[at + 1]]);
    at += 2;
    let hi = u16::from_le_bytes([p[at], p[at + 1]]);
    at += 2;
    let auth_len = p[at] as usize;
    at += 1;
    at += 10; // reserved
    let part2 = auth_len.saturating_sub(8).max(13);
    scramble.extend_from_slice(&p[at..at + part2 - 1]);
    Greeting {
        conn_id,
        version,
        scramble,
        caps: u32::from(lo) | u32::from(hi) << 16,
        status,
    }
}

fn native(nonce: &[u8], password: &str) -> Vec<u8> {
    mysql_common::scramble::scramble_native(nonce, password.as_bytes())
        .map(|s| s.to_vec())
        .unwrap_or_default()
}

/// Where two responses differ, field by field (empty when identical).
pub fn response_diff(via: &Response, direct: &Response) -> Vec<String> {
    let mut out = Vec::new();
    match (via, direct) {
        (Response::Rows(a), Response::Rows(b)) => {
            if a.columns != b.columns {
                let names = |r: &ResultSet| -> Vec<String> {
                    r.column_defs().into_iter().map(|c| c.name).collect()
                };
                out.push(format!(
                    "column definitions: via {} {:?}, direct {} {:?}; bytes via {:02x?} direct {:02x?}",
                    a.columns.len(),
                    names(a),
                    b.columns.len(),
                    names(b),
                    a.columns,
                    b.columns
                ));
            }
            if a.rows != b.rows {
                out.push(format!("rows: via {:02x?}, direct {:02x?}", a.rows, b.rows));
            }
            if a.columns_end != b.columns_end {
                out.push(format!(
                    "EOF after column definitions: via {:?}, direct {:?}",
                    a.columns_end, b.columns_end
                ));
            }
            if a.end != b.end {
                out.push(format!(
                    "end of result: via {:?}, direct {:?}",
                    a.end, b.end
                ));
            }
        }
        (a, b) if a != b => out.push(format!("via {}, direct {}", brief(a), brief(b))),
        _ => {}
    }
    out
}
