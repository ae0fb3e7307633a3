//! Capabilities end to end against a real MariaDB: the greeting, login
//! collations, each client flavour (with and without DEPRECATE_EOF,
//! FOUND_ROWS, IGNORE_SPACE, MariaDB's extended capabilities) and protocol
//! compression, every answer compared byte for byte with a direct
//! connection making the same requests.
//!
//! The raw client here is independent of myplex's own protocol code: it
//! picks any capability bits, collation and compression, and reads whole
//! responses as lists of packet payloads.

use crate::common;

use std::io::{Read, Write};
use std::time::Duration;

use common::mariadb::{APP_PASSWORD, APP_USER, Profile};
use common::{MariaDb, Proxy};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

const WAIT: Duration = Duration::from_secs(30);

// Capability bits.
const LONG_PASSWORD: u32 = 0x0000_0001;
const FOUND_ROWS: u32 = 0x0000_0002;
const LONG_FLAG: u32 = 0x0000_0004;
const CONNECT_WITH_DB: u32 = 0x0000_0008;
const NO_SCHEMA: u32 = 0x0000_0010;
const COMPRESS: u32 = 0x0000_0020;
const IGNORE_SPACE: u32 = 0x0000_0100;
const PROTOCOL_41: u32 = 0x0000_0200;
const INTERACTIVE: u32 = 0x0000_0400;
const SSL: u32 = 0x0000_0800;
const TRANSACTIONS: u32 = 0x0000_2000;
const SECURE_CONNECTION: u32 = 0x0000_8000;
const MULTI_STATEMENTS: u32 = 0x0001_0000;
const MULTI_RESULTS: u32 = 0x0002_0000;
const PS_MULTI_RESULTS: u32 = 0x0004_0000;
const PLUGIN_AUTH: u32 = 0x0008_0000;
const SESSION_TRACK: u32 = 0x0080_0000;
const DEPRECATE_EOF: u32 = 0x0100_0000;
const QUERY_ATTRIBUTES: u32 = 0x0800_0000;

// MariaDB extended capabilities (high half, as sent in the filler).
const EXT_PROGRESS: u32 = 1;
const EXT_BULK: u32 = 4;
const EXT_TYPE_INFO: u32 = 8;
const EXT_CACHE_METADATA: u32 = 16;

const BASE: u32 = LONG_PASSWORD
    | LONG_FLAG
    | PROTOCOL_41
    | TRANSACTIONS
    | SECURE_CONNECTION
    | MULTI_STATEMENTS
    | MULTI_RESULTS
    | PS_MULTI_RESULTS
    | PLUGIN_AUTH
    | SESSION_TRACK;

const STATUS_MORE_RESULTS: u16 = 0x0008;
const STATUS_CURSOR_EXISTS: u16 = 0x0040;

// ---------------------------------------------------------------------------
// A raw client
// ---------------------------------------------------------------------------

/// The greeting's fields the tests look at.
#[derive(Debug, Clone)]
struct Greeting {
    raw: Vec<u8>,
    caps: u32,
    ext: u32,
    collation: u8,
    scramble: Vec<u8>,
}

fn parse_greeting(p: &[u8]) -> Greeting {
    assert_eq!(p.first(), Some(&10), "greeting: {p:02x?}");
    let nul = p[1..].iter().position(|&b| b == 0).expect("version") + 1;
    let mut at = nul + 1 + 4;
    let mut scramble = p[at..at + 8].to_vec();
    at += 9;
    let lo = u16::from_le_bytes([p[at], p[at + 1]]);
    let collation = p[at + 2];
    let hi = u16::from_le_bytes([p[at + 5], p[at + 6]]);
    at += 7;
    let auth_len = usize::from(p[at]);
    at += 1;
    let ext = u32::from_le_bytes([p[at + 6], p[at + 7], p[at + 8], p[at + 9]]);
    at += 10;
    let n = auth_len.saturating_sub(8).max(13) - 1;
    scramble.extend_from_slice(&p[at..at + n]);
    Greeting {
        raw: p.to_vec(),
        caps: u32::from(lo) | u32::from(hi) << 16,
        ext,
        collation,
        scramble,
    }
}

/// What the client asks for.
#[derive(Debug, Clone, Copy)]
struct Ask {
    caps: u32,
    ext: u32,
    collation: u8,
}

impl Ask {
    fn new(caps: u32) -> Self {
        Ask {
            caps,
            ext: 0,
            collation: 45,
        }
    }
    fn ext(mut self, ext: u32) -> Self {
        self.ext = ext;
        self
    }
    fn collation(mut self, c: u8) -> Self {
        self.collation = c;
        self
    }
}

/// A logged-in connection.
struct Wire {
    s: TcpStream,
    caps: u32,
    /// MariaDB extended capabilities negotiated.
    ext: u32,
    /// The OK that ended the login.
    login_ok: Vec<u8>,
    /// Plain bytes inflated from compressed frames, not yet consumed.
    plain: Vec<u8>,
    compressed: bool,
}

/// How a response is shaped.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Query,
    Execute,
    Prepare,
    FieldList,
}

async fn read_exact(s: &mut TcpStream, buf: &mut [u8]) -> std::io::Result<()> {
    match timeout(WAIT, s.read_exact(buf)).await {
        Ok(r) => r.map(|_| ()),
        Err(_) => panic!("peer sent nothing within {WAIT:?}"),
    }
}

async fn read_plain(s: &mut TcpStream) -> std::io::Result<(u8, Vec<u8>)> {
    let mut h = [0u8; 4];
    read_exact(s, &mut h).await?;
    let n = usize::from(h[0]) | usize::from(h[1]) << 8 | usize::from(h[2]) << 16;
    let mut p = vec![0u8; n];
    read_exact(s, &mut p).await?;
    Ok((h[3], p))
}

fn frame(seq: u8, payload: &[u8]) -> Vec<u8> {
    let n = payload.len();
    let mut b = vec![n as u8, (n >> 8) as u8, (n >> 16) as u8, seq];
    b.extend_from_slice(payload);
    b
}

fn native(nonce: &[u8], password: &str) -> Vec<u8> {
    mysql_common::scramble::scramble_native(nonce, password.as_bytes())
        .map(|s| s.to_vec())
        .unwrap_or_default()
}

async fn greeting_of(addr: &str) -> (TcpStream, Greeting) {
    let mut s = timeout(WAIT, TcpStream::connect(addr))
        .await
        .expect("connect in time")
        .expect("connect");
    let (_, g) = read_plain(&mut s).await.expect("greeting");
    (s, parse_greeting(&g))
}

/// Logs in; `Err((seq, payload))` is the server's refusal.
async fn login(addr: &str, ask: Ask, password: &str) -> Result<Wire, (u8, Vec<u8>)> {
    let (mut s, g) = greeting_of(addr).await;
    let mut caps = (ask.caps | CONNECT_WITH_DB) & g.caps;
    if g.caps & LONG_PASSWORD == 0 && ask.ext != 0 {
        // A MariaDB client toward a MariaDB server: bit 0 cleared, extended
        // capabilities in the filler.
        caps &= !LONG_PASSWORD;
    }
    let ext = if caps & LONG_PASSWORD == 0 {
        ask.ext & g.ext
    } else {
        0
    };
    let auth = native(&g.scramble, password);
    let mut p = Vec::new();
    p.extend_from_slice(&caps.to_le_bytes());
    p.extend_from_slice(&(16u32 << 20).to_le_bytes());
    p.push(ask.collation);
    p.extend_from_slice(&[0u8; 19]);
    p.extend_from_slice(&ext.to_le_bytes());
    p.extend_from_slice(APP_USER.as_bytes());
    p.push(0);
    p.push(auth.len() as u8);
    p.extend_from_slice(&auth);
    p.extend_from_slice(b"test\0");
    p.extend_from_slice(b"mysql_native_password\0");
    s.write_all(&frame(1, &p)).await.expect("send login");
    let login_ok = loop {
        let (seq, reply) = read_plain(&mut s).await.expect("login reply");
        match reply.first() {
            Some(0x00) => break reply,
            Some(0xFE) => {
                let nul = reply[1..].iter().position(|&b| b == 0).expect("plugin") + 1;
                let mut nonce = reply[nul + 1..].to_vec();
                if nonce.last() == Some(&0) {
                    nonce.pop();
                }
                s.write_all(&frame(seq.wrapping_add(1), &native(&nonce, password)))
                    .await
                    .expect("auth switch");
            }
            _ => return Err((seq, reply)),
        }
    };
    Ok(Wire {
        s,
        caps,
        ext,
        login_ok,
        plain: Vec::new(),
        compressed: caps & COMPRESS != 0,
    })
}

fn status_of(p: &[u8]) -> u16 {
    if p.len() == 5 {
        return u16::from_le_bytes([p[3], p[4]]);
    }
    let mut at = 1;
    for _ in 0..2 {
        at += match p[at] {
            0xFC => 3,
            0xFD => 4,
            0xFE => 9,
            _ => 1,
        };
    }
    u16::from_le_bytes([p[at], p[at + 1]])
}

impl Wire {
    fn deprecate_eof(&self) -> bool {
        self.caps & DEPRECATE_EOF != 0
    }

    async fn send(&mut self, payload: &[u8]) {
        // The command as packets of at most 16 MiB (plus the empty trailer
        // when the payload is an exact multiple).
        let mut inner = Vec::with_capacity(payload.len() + 8);
        let mut seq = 0u8;
        let mut rest = payload;
        loop {
            let n = rest.len().min(0xFF_FFFF);
            inner.extend_from_slice(&frame(seq, &rest[..n]));
            seq = seq.wrapping_add(1);
            rest = &rest[n..];
            if n < 0xFF_FFFF {
                break;
            }
        }
        let bytes = if self.compressed {
            // Compressed frames of at most 16 MiB each, sequence from 0,
            // compressed when long.
            let mut out = Vec::new();
            for (cseq, part) in inner.chunks(0xFF_FFFF).enumerate() {
                let (body, ulen) = if part.len() >= 50 {
                    let mut e =
                        flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
                    e.write_all(part).expect("deflate");
                    (e.finish().expect("deflate"), part.len())
                } else {
                    (part.to_vec(), 0)
                };
                out.extend_from_slice(&[
                    body.len() as u8,
                    (body.len() >> 8) as u8,
                    (body.len() >> 16) as u8,
                    cseq as u8,
                    ulen as u8,
                    (ulen >> 8) as u8,
                    (ulen >> 16) as u8,
                ]);
                out.extend_from_slice(&body);
            }
            out
        } else {
            inner
        };
        self.s.write_all(&bytes).await.expect("send");
    }

    /// Reads one compressed frame into `plain`; returns its sequence id.
    async fn read_frame(&mut self) -> u8 {
        let mut h = [0u8; 7];
        read_exact(&mut self.s, &mut h).await.expect("frame header");
        let clen = usize::from(h[0]) | usize::from(h[1]) << 8 | usize::from(h[2]) << 16;
        let ulen = usize::from(h[4]) | usize::from(h[5]) << 8 | usize::from(h[6]) << 16;
        let mut body = vec![0u8; clen];
        read_exact(&mut self.s, &mut body)
            .await
            .expect("frame body");
        if ulen == 0 {
            self.plain.extend_from_slice(&body);
        } else {
            let mut out = Vec::with_capacity(ulen);
            flate2::read::ZlibDecoder::new(&body[..])
                .read_to_end(&mut out)
                .expect("inflate");
            assert_eq!(out.len(), ulen, "frame inflates to its stated length");
            self.plain.extend_from_slice(&out);
        }
        h[3]
    }

    /// One logical packet (16 MiB chunks joined).
    async fn read(&mut self) -> Vec<u8> {
        let mut payload = Vec::new();
        loop {
            let (len, chunk) = if self.compressed {
                while self.plain.len() < 4
                    || self.plain.len()
                        < 4 + (usize::from(self.plain[0])
                            | usize::from(self.plain[1]) << 8
                            | usize::from(self.plain[2]) << 16)
                {
                    self.read_frame().await;
                }
                let n = usize::from(self.plain[0])
                    | usize::from(self.plain[1]) << 8
                    | usize::from(self.plain[2]) << 16;
                let chunk = self.plain[4..4 + n].to_vec();
                self.plain.drain(..4 + n);
                (n, chunk)
            } else {
                let (_, c) = read_plain(&mut self.s).await.expect("packet");
                (c.len(), c)
            };
            payload.extend_from_slice(&chunk);
            if len < 0xFF_FFFF {
                return payload;
            }
        }
    }

    fn is_end(&self, p: &[u8]) -> bool {
        p.first() == Some(&0xFE) && p.len() < if self.deprecate_eof() { 0xFF_FFFF } else { 9 }
    }

    /// Reads a whole response.
    async fn response(&mut self, kind: Kind) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        if kind == Kind::Prepare {
            let first = self.read().await;
            out.push(first.clone());
            if first[0] != 0 {
                return out;
            }
            let cols = u16::from_le_bytes([first[5], first[6]]);
            let params = u16::from_le_bytes([first[7], first[8]]);
            for (n, _) in [(params, 0), (cols, 1)] {
                for _ in 0..n {
                    out.push(self.read().await);
                }
                if n > 0 && !self.deprecate_eof() {
                    out.push(self.read().await);
                }
            }
            return out;
        }
        if kind == Kind::FieldList {
            loop {
                let p = self.read().await;
                let end = p[0] == 0xFF || self.is_end(&p);
                out.push(p);
                if end {
                    return out;
                }
            }
        }
        loop {
            let first = self.read().await;
            out.push(first.clone());
            match first[0] {
                0xFF if first.get(1..3) == Some(&[0xFF, 0xFF]) => continue, // progress
                0xFF => return out,
                0x00 => {
                    if status_of(&first) & STATUS_MORE_RESULTS != 0 {
                        continue;
                    }
                    return out;
                }
                0xFB => panic!("LOCAL INFILE not expected"),
                n => {
                    // Cache-metadata: a "metadata follows" byte; 0 means
                    // the definitions are left out.
                    let skipped = self.ext & EXT_CACHE_METADATA != 0 && first.get(1) == Some(&0);
                    for _ in 0..if skipped { 0 } else { n } {
                        out.push(self.read().await);
                    }
                    if !self.deprecate_eof() {
                        let eof = self.read().await;
                        let cursor = status_of(&eof) & STATUS_CURSOR_EXISTS != 0;
                        out.push(eof);
                        if kind == Kind::Execute && cursor {
                            return out;
                        }
                    }
                    let end = loop {
                        let p = self.read().await;
                        if p[0] == 0xFF {
                            out.push(p);
                            return out;
                        }
                        let end = self.is_end(&p);
                        out.push(p.clone());
                        if end {
                            break p;
                        }
                    };
                    if status_of(&end) & STATUS_MORE_RESULTS == 0 {
                        return out;
                    }
                }
            }
        }
    }

    async fn cmd(&mut self, payload: &[u8], kind: Kind) -> Vec<Vec<u8>> {
        self.send(payload).await;
        self.response(kind).await
    }

    async fn query(&mut self, sql: &str) -> Vec<Vec<u8>> {
        let mut p = vec![0x03];
        p.extend_from_slice(sql.as_bytes());
        self.cmd(&p, Kind::Query).await
    }

    /// Prepares; returns the statement id and the reply with the id zeroed.
    async fn prepare(&mut self, sql: &str) -> (u32, Vec<Vec<u8>>) {
        let mut p = vec![0x16];
        p.extend_from_slice(sql.as_bytes());
        let mut r = self.cmd(&p, Kind::Prepare).await;
        assert_eq!(
            r[0][0],
            0,
            "{sql}: prepare failed: {:?}",
            String::from_utf8_lossy(&r[0])
        );
        let id = u32::from_le_bytes([r[0][1], r[0][2], r[0][3], r[0][4]]);
        r[0][1..5].copy_from_slice(&[0; 4]);
        (id, r)
    }
}

/// Opens the same kind of connection directly and through the proxy.
async fn pair(db: &MariaDb, proxy: &Proxy, ask: Ask) -> (Wire, Wire) {
    let direct = login(&db.addr(), ask, APP_PASSWORD)
        .await
        .unwrap_or_else(|e| panic!("direct login {ask:?}: {e:02x?}"));
    let via = login(&proxy.addr.to_string(), ask, APP_PASSWORD)
        .await
        .unwrap_or_else(|e| panic!("proxy login {ask:?}: {e:02x?}"));
    assert_eq!(via.caps, direct.caps, "{ask:?}: negotiated capabilities");
    (direct, via)
}

fn show(r: &[Vec<u8>]) -> String {
    r.iter()
        .map(|p| {
            if p.len() > 300 {
                format!("{:02x?}…({} bytes)", &p[..300], p.len())
            } else {
                format!("{p:02x?}")
            }
        })
        .collect::<Vec<_>>()
        .join("\n    ")
}

#[track_caller]
fn same(what: &str, via: &[Vec<u8>], direct: &[Vec<u8>]) {
    assert!(
        via == direct,
        "{what}: proxy and direct differ\n  via:\n    {}\n  direct:\n    {}",
        show(via),
        show(direct)
    );
}

/// A text query's single value.
fn one_value(r: &[Vec<u8>]) -> String {
    let row = r
        .iter()
        .rev()
        .find(|p| p[0] != 0xFE && p[0] != 0xFF && p[0] != 0)
        .expect("a row");
    let n = usize::from(row[0]);
    String::from_utf8_lossy(&row[1..1 + n]).into_owned()
}

/// Once per server: by its directory, unique to it (a port may come back
/// for a later server once an unused shared one is stopped).
fn setup(db: &MariaDb) {
    static DONE: std::sync::Mutex<Vec<std::path::PathBuf>> = std::sync::Mutex::new(Vec::new());
    let mut done = DONE.lock().unwrap_or_else(|p| p.into_inner());
    if !done.contains(&db.base_dir) {
        setup_once(db);
        done.push(db.base_dir.clone());
    }
}

fn setup_once(db: &MariaDb) {
    db.sql(
        "SET GLOBAL interactive_timeout = 1234;
         CREATE TABLE IF NOT EXISTS test.caps_t (id INT PRIMARY KEY, v INT, doc JSON, u UUID, p POINT);
         INSERT IGNORE INTO test.caps_t VALUES
           (1, 10, '{\"a\": 1}', 'f5234a11-ed40-11f1-bbe4-02fc00000001', POINT(1, 2)),
           (2, 20, '[1, 2]', 'f5234a11-ed40-11f1-bbe4-02fc00000002', POINT(3, 4)),
           (3, 30, NULL, NULL, NULL);
         CREATE TABLE IF NOT EXISTS test.caps_big (a INT PRIMARY KEY, b VARCHAR(100));
         INSERT IGNORE INTO test.caps_big SELECT seq, REPEAT('x', 50) FROM test.seq_1_to_500;
         DELIMITER //
         CREATE OR REPLACE FUNCTION test.caps_setter() RETURNS INT DETERMINISTIC BEGIN SET SESSION auto_increment_increment = 7; RETURN 1; END//
         CREATE OR REPLACE PROCEDURE test.caps_multi() BEGIN SELECT 1 AS one; SELECT 'two' AS two, 2.5 AS x; END//
         CREATE OR REPLACE PROCEDURE test.caps_out(IN a INT, OUT b INT) BEGIN SET b = a * 7; END//
         DELIMITER ;",
    );
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

/// The greeting offers exactly what the server offers that myplex can
/// carry: MariaDB's capability bit 0 stays clear, the extended capabilities
/// are all there, and query attributes never appear.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn greeting_mirrors_the_server() {
    let db = MariaDb::shared();
    let proxy = Proxy::builder(db).start().await;
    let (_, direct) = greeting_of(&db.addr()).await;
    let (_, via) = greeting_of(&proxy.addr.to_string()).await;
    assert_eq!(direct.caps & LONG_PASSWORD, 0, "MariaDB leaves bit 0 clear");
    assert_eq!(
        via.caps, direct.caps,
        "capabilities: via {:#010x} direct {:#010x}",
        via.caps, direct.caps
    );
    assert_eq!(via.ext, direct.ext);
    assert_eq!(
        via.ext & (EXT_PROGRESS | EXT_BULK | EXT_TYPE_INFO | EXT_CACHE_METADATA),
        EXT_PROGRESS | EXT_BULK | EXT_TYPE_INFO | EXT_CACHE_METADATA
    );
    assert_eq!(via.caps & (QUERY_ATTRIBUTES | SSL), 0);
    assert_eq!(via.collation, direct.collation);
    // Same layout: everything but the connection id and the scramble.
    let strip = |g: &Greeting| {
        let mut r = g.raw.clone();
        let nul = r[1..].iter().position(|&b| b == 0).expect("version") + 2;
        r[nul..nul + 12].fill(0);
        let tail = r.len() - "mysql_native_password".len() - 14;
        r[tail..tail + 12].fill(0);
        r
    };
    assert_eq!(strip(&via), strip(&direct), "greeting bytes");
}

/// Login collations as the server treats them: unknown ids (MySQL 8's 255,
/// gb18030's 248) get the server's defaults, known ones their character
/// set, and a character set that cannot be a client's is refused with the
/// server's exact ERR — before the password is even looked at.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_collations_match_direct() {
    let db = MariaDb::shared();
    let proxy = Proxy::builder(db).start().await;
    for collation in [255u8, 248, 45, 33, 8, 63] {
        check_login_collation(db, &proxy, collation).await;
    }
    for (collation, password) in [
        (35u8, APP_PASSWORD),
        (54, APP_PASSWORD),
        (56, APP_PASSWORD),
        (60, APP_PASSWORD),
        (101, APP_PASSWORD),
        (35, "wrong"),
    ] {
        let ask = Ask::new(BASE | DEPRECATE_EOF).collation(collation);
        let direct = login(&db.addr(), ask, password).await.err();
        let via = login(&proxy.addr.to_string(), ask, password).await.err();
        let direct = direct.unwrap_or_else(|| panic!("direct accepted collation {collation}"));
        assert_eq!(&direct.1[..3], &[0xFF, 0xCF, 0x04], "server's 1231");
        assert_eq!(
            via,
            Some(direct),
            "collation {collation}: refusal (seq, bytes)"
        );
    }
}

/// A login collation that is not its character set's default: the server
/// then also reports it as the result character set in column metadata,
/// which only `SET NAMES cs COLLATE c` reproduces on a pooled backend (the
/// four `SET SESSION character_set_*/collation_connection` assignments give
/// the character set's default, 45 instead of 224).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_default_login_collation_matches_direct() {
    let db = MariaDb::shared();
    let proxy = Proxy::builder(db).start().await;
    for collation in [224u8, 83] {
        check_login_collation(db, &proxy, collation).await;
    }
}

async fn check_login_collation(db: &MariaDb, proxy: &Proxy, collation: u8) {
    let probe = "SELECT CONCAT_WS(',', @@character_set_client, @@character_set_connection, @@character_set_results, @@collation_connection)";
    for caps in [BASE | DEPRECATE_EOF, BASE] {
        let ask = Ask::new(caps).collation(collation);
        let (mut direct, mut via) = pair(db, proxy, ask).await;
        let d = direct.query(probe).await;
        let v = via.query(probe).await;
        same(&format!("collation {collation}"), &v, &d);
        let v2 = via.query(probe).await;
        same(&format!("collation {collation}, again"), &v2, &d);
    }
}

/// The statements every flavour runs; results compared byte for byte.
async fn script(direct: &mut Wire, via: &mut Wire, label: &str) {
    let queries = [
        "SELECT 1 AS a, 'x' AS b, NULL AS c, 2.50 AS d",
        "SELECT id, v, doc, u, p FROM caps_t ORDER BY id",
        "UPDATE caps_t SET v = v WHERE id = 1",
        "UPDATE caps_t SET v = v + 0 WHERE id <= 2",
        "INSERT INTO caps_t (id, v) VALUES (1, 10) ON DUPLICATE KEY UPDATE v = 10",
        "SELECT @@sql_mode, @@wait_timeout",
        "SELECT nosuchdb.caps_t.id FROM caps_t WHERE id = 1",
        "SELECT COUNT (*) FROM caps_t",
        "SELECT CONCAT ('a', 'b')",
        "CALL caps_multi()",
        "SELECT 1 AS m1; SELECT 'x' AS m2, 3 AS m3",
        "SELECT JSON_OBJECT('k', id) AS j FROM caps_t WHERE id = 2",
        "SHOW STATUS LIKE 'Compression'",
        "SELECT * FROM caps_t WHERE id = 99",
        "SELECT no_such_column FROM caps_t",
    ];
    for sql in queries {
        let d = direct.query(sql).await;
        let v = via.query(sql).await;
        same(&format!("{label}: {sql}"), &v, &d);
    }
    // COM_FIELD_LIST.
    let d = direct.cmd(b"\x04caps_t\0", Kind::FieldList).await;
    let v = via.cmd(b"\x04caps_t\0", Kind::FieldList).await;
    same(&format!("{label}: COM_FIELD_LIST"), &v, &d);

    // Prepared statements: prepare replies, EXECUTE, a cursor, FETCH.
    let sql = "SELECT id, doc, u FROM caps_t WHERE id > ?";
    let (did, d) = direct.prepare(sql).await;
    let (vid, v) = via.prepare(sql).await;
    same(&format!("{label}: PREPARE {sql}"), &v, &d);
    let exec = |id: u32, flags: u8| {
        let mut p = vec![0x17];
        p.extend_from_slice(&id.to_le_bytes());
        p.push(flags);
        p.extend_from_slice(&1u32.to_le_bytes());
        p.extend_from_slice(&[0x00, 0x01, 0x08, 0x00]);
        p.extend_from_slice(&0i64.to_le_bytes());
        p
    };
    let d = direct.cmd(&exec(did, 0), Kind::Execute).await;
    let v = via.cmd(&exec(vid, 0), Kind::Execute).await;
    same(&format!("{label}: EXECUTE"), &v, &d);
    let d = direct.cmd(&exec(did, 1), Kind::Execute).await;
    let v = via.cmd(&exec(vid, 1), Kind::Execute).await;
    same(&format!("{label}: EXECUTE with cursor"), &v, &d);
    let fetch = |id: u32| {
        let mut p = vec![0x1C];
        p.extend_from_slice(&id.to_le_bytes());
        p.extend_from_slice(&2u32.to_le_bytes());
        p
    };
    for round in 0..2 {
        let d = direct.cmd(&fetch(did), Kind::FieldList).await;
        let v = via.cmd(&fetch(vid), Kind::FieldList).await;
        same(&format!("{label}: FETCH {round}"), &v, &d);
    }
    // CALL with an OUT parameter through COM_STMT_EXECUTE: the EOF after
    // the OUT-parameter metadata carries the server's own status.
    let sql = "CALL caps_out(?, ?)";
    let (did, d) = direct.prepare(sql).await;
    let (vid, v) = via.prepare(sql).await;
    same(&format!("{label}: PREPARE {sql}"), &v, &d);
    let call = |id: u32| {
        let mut p = vec![0x17];
        p.extend_from_slice(&id.to_le_bytes());
        p.push(0);
        p.extend_from_slice(&1u32.to_le_bytes());
        p.push(0x02); // second parameter NULL
        p.push(1);
        p.extend_from_slice(&[0x03, 0x00, 0x03, 0x00]);
        p.extend_from_slice(&6i32.to_le_bytes());
        p
    };
    let d = direct.cmd(&call(did), Kind::Execute).await;
    let v = via.cmd(&call(vid), Kind::Execute).await;
    same(&format!("{label}: EXECUTE {sql}"), &v, &d);
    if direct.caps & (DEPRECATE_EOF | PS_MULTI_RESULTS) == PS_MULTI_RESULTS {
        assert!(
            d.iter().any(|p| p[..] == [0xFE, 0, 0, 0x0A, 0x10]),
            "the server's EOF after OUT-parameter metadata: {}",
            show(&d)
        );
    }
    // A result set the proxy answers itself: the column count as the
    // server frames it (the value differs: the proxy's connection id).
    let d = direct.query("SELECT CONNECTION_ID()").await;
    let v = via.query("SELECT CONNECTION_ID()").await;
    assert_eq!(
        v[0], d[0],
        "{label}: column count of SELECT CONNECTION_ID()"
    );
    // The same EXECUTE again and again: with cache-metadata the server
    // leaves out the definitions the client has, sends them again after
    // the character set changed, then leaves them out again.
    let sql = "SELECT id, u FROM caps_t WHERE id > ?";
    let (did, d) = direct.prepare(sql).await;
    let (vid, v) = via.prepare(sql).await;
    same(&format!("{label}: PREPARE {sql}"), &v, &d);
    for step in [
        "first",
        "again",
        "SET NAMES latin1",
        "after",
        "after, again",
    ] {
        if step.starts_with("SET") {
            // Its OK's tracker entries may come in another order
            // (docs/compatibility.md#tracker-order): only both succeed.
            let d = direct.query(step).await;
            let v = via.query(step).await;
            assert_eq!((v[0][0], d[0][0]), (0, 0), "{label}: {step}");
            continue;
        }
        let d = direct.cmd(&exec(did, 0), Kind::Execute).await;
        let v = via.cmd(&exec(vid, 0), Kind::Execute).await;
        same(&format!("{label}: EXECUTE {sql} ({step})"), &v, &d);
        if direct.ext & EXT_CACHE_METADATA != 0 && step.contains("again") {
            assert_eq!(d[0][1], 0, "{label}: the server left the definitions out");
        }
    }
    // Stored-program code prepared as one statement: its results always
    // carry their definitions (libmariadb crashed reading a 2-column result
    // with the 1-column definitions of the previous one).
    let sql = "BEGIN NOT ATOMIC SELECT 1 AS a, 2 AS b; SELECT 'xyz' AS c; END";
    let (did, d) = direct.prepare(sql).await;
    let (vid, v) = via.prepare(sql).await;
    same(&format!("{label}: PREPARE {sql}"), &v, &d);
    let bare = |id: u32| {
        let mut p = vec![0x17];
        p.extend_from_slice(&id.to_le_bytes());
        p.push(0);
        p.extend_from_slice(&1u32.to_le_bytes());
        p
    };
    for round in 0..2 {
        let d = direct.cmd(&bare(did), Kind::Execute).await;
        let v = via.cmd(&bare(vid), Kind::Execute).await;
        same(&format!("{label}: EXECUTE {sql} ({round})"), &v, &d);
    }
    // A prepared SELECT ROW_COUNT() the proxy answers itself: framed as
    // the server frames it (with cache-metadata, the definitions left out
    // once the client has them).
    let sql = "SELECT ROW_COUNT() AS n";
    let (did, d) = direct.prepare(sql).await;
    let (vid, v) = via.prepare(sql).await;
    same(&format!("{label}: PREPARE {sql}"), &v, &d);
    for round in 0..2 {
        let d = direct.cmd(&bare(did), Kind::Execute).await;
        let v = via.cmd(&bare(vid), Kind::Execute).await;
        same(&format!("{label}: EXECUTE {sql} ({round})"), &v, &d);
    }
}

/// Each flavour through the proxy answers like the server: classic EOFs,
/// DEPRECATE_EOF, FOUND_ROWS (affected rows), IGNORE_SPACE (sql_mode and
/// parsing), MariaDB's extended type information and cache-metadata
/// (column definitions left out of an EXECUTE when the client has them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flavours_match_direct() {
    let db = MariaDb::shared();
    setup(db);
    // One backend per group: flavours must not share connections, and
    // they cannot by accident.
    let proxy = Proxy::builder(db).groups(1).max_backend(2).start().await;
    let variants = [
        ("classic", Ask::new(BASE)),
        ("deprecate_eof", Ask::new(BASE | DEPRECATE_EOF)),
        ("found_rows", Ask::new(BASE | FOUND_ROWS)),
        (
            "found_rows+eof",
            Ask::new(BASE | FOUND_ROWS | DEPRECATE_EOF),
        ),
        (
            "ignore_space",
            Ask::new(BASE | IGNORE_SPACE | DEPRECATE_EOF),
        ),
        ("no_schema", Ask::new(BASE | NO_SCHEMA | DEPRECATE_EOF)),
        ("interactive", Ask::new(BASE | INTERACTIVE)),
        (
            "no_ps_multi_results",
            Ask::new((BASE | DEPRECATE_EOF) & !PS_MULTI_RESULTS),
        ),
        (
            "no_multi_results",
            Ask::new(BASE & !(MULTI_RESULTS | PS_MULTI_RESULTS | MULTI_STATEMENTS)),
        ),
        (
            "mariadb",
            Ask::new(BASE).ext(EXT_PROGRESS | EXT_BULK | EXT_TYPE_INFO),
        ),
        (
            "mariadb+eof",
            Ask::new(BASE | DEPRECATE_EOF).ext(EXT_TYPE_INFO | EXT_PROGRESS),
        ),
        (
            "mariadb+cache_metadata",
            Ask::new(BASE).ext(EXT_TYPE_INFO | EXT_CACHE_METADATA),
        ),
        (
            "mariadb+cache_metadata+eof",
            Ask::new(BASE | DEPRECATE_EOF).ext(EXT_CACHE_METADATA),
        ),
    ];
    for round in 0..2 {
        for (label, ask) in variants {
            let (mut direct, mut via) = pair(db, &proxy, ask).await;
            script(&mut direct, &mut via, &format!("{label} (round {round})")).await;
        }
    }
    // The affected-rows difference is real (the test would notice a shared
    // backend of the wrong flavour).
    let (mut direct, mut via) = pair(db, &proxy, Ask::new(BASE | FOUND_ROWS)).await;
    let (_, mut plain) = pair(db, &proxy, Ask::new(BASE)).await;
    for _ in 0..3 {
        let f = via.query("UPDATE caps_t SET v = v WHERE id = 1").await;
        let p = plain.query("UPDATE caps_t SET v = v WHERE id = 1").await;
        assert_eq!(f[0][1], 1, "FOUND_ROWS client: 1 row matched");
        assert_eq!(p[0][1], 0, "plain client: 0 rows changed");
    }
    let d = direct.query("UPDATE caps_t SET v = v WHERE id = 1").await;
    assert_eq!(d[0][1], 1);
}

/// Progress reports (ERR 0xFFFF) reach clients that asked for them and do
/// not end the response; others get none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_reports_are_relayed() {
    let db = MariaDb::shared();
    setup(db);
    let proxy = Proxy::builder(db).groups(1).max_backend(2).start().await;
    for ask in [
        Ask::new(BASE | DEPRECATE_EOF).ext(EXT_PROGRESS),
        Ask::new(BASE).ext(EXT_PROGRESS),
        Ask::new(BASE | DEPRECATE_EOF),
    ] {
        let (mut direct, mut via) = pair(db, &proxy, ask).await;
        let sql = "ALTER TABLE caps_big FORCE, ALGORITHM=COPY";
        let d = direct.query(sql).await;
        let v = via.query(sql).await;
        let progress = |r: &[Vec<u8>]| r.iter().filter(|p| p[..3] == [0xFF; 3]).count();
        if ask.ext & EXT_PROGRESS != 0 {
            assert!(
                progress(&d) > 0,
                "the server reports progress: {}",
                show(&d)
            );
        }
        assert_eq!(progress(&v), progress(&d), "{}", show(&v));
        same(&format!("{ask:?}: ALTER"), &v, &d);
        let after = via.query("SELECT COUNT(*) FROM caps_big").await;
        assert_eq!(one_value(&after), "500");
    }
}

/// COM_STMT_BULK_EXECUTE: many rows in one request, with and without the
/// types, routed to whichever backend the statement lands on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_execute_matches_direct() {
    let db = MariaDb::shared();
    let proxy = Proxy::builder(db).groups(1).max_backend(2).start().await;
    for ask in [
        Ask::new(BASE).ext(EXT_BULK),
        Ask::new(BASE | DEPRECATE_EOF).ext(EXT_BULK | EXT_TYPE_INFO),
        Ask::new(BASE | DEPRECATE_EOF),
    ] {
        let (mut direct, mut via) = pair(db, &proxy, ask).await;
        for w in [&mut direct, &mut via] {
            let r = w
                .query("CREATE TEMPORARY TABLE caps_b (a INT, s VARCHAR(10))")
                .await;
            assert_eq!(r[0][0], 0);
        }
        let sql = "INSERT INTO caps_b VALUES (?, ?)";
        let (did, d) = direct.prepare(sql).await;
        let (vid, v) = via.prepare(sql).await;
        same("bulk PREPARE", &v, &d);
        let bulk = |id: u32, types: bool, base: i32| {
            let mut p = vec![0xFA];
            p.extend_from_slice(&id.to_le_bytes());
            p.extend_from_slice(&(if types { 0x80u16 } else { 0 }).to_le_bytes());
            if types {
                p.extend_from_slice(&[0x03, 0x00, 0xFD, 0x00]);
            }
            for i in 0..3 {
                p.push(0);
                p.extend_from_slice(&(base + i).to_le_bytes());
                if i == 1 {
                    p.push(1); // NULL
                } else {
                    p.push(0);
                    p.extend_from_slice(b"\x02hi");
                }
            }
            p
        };
        for (what, types, base) in [("with types", true, 1), ("without types", false, 10)] {
            let d = direct.cmd(&bulk(did, types, base), Kind::Query).await;
            let v = via.cmd(&bulk(vid, types, base), Kind::Query).await;
            same(&format!("{ask:?}: bulk {what}"), &v, &d);
        }
        // Unknown statement, short packet.
        for payload in [bulk(4242, true, 1), vec![0xFA, 1, 0]] {
            let d = direct.cmd(&payload, Kind::Query).await;
            let v = via.cmd(&payload, Kind::Query).await;
            same(&format!("{ask:?}: bulk error"), &v, &d);
        }
        let q = "SELECT a, s FROM caps_b ORDER BY a";
        let d = direct.query(q).await;
        let v = via.query(q).await;
        same(&format!("{ask:?}: rows"), &v, &d);
        if ask.ext & EXT_BULK != 0 {
            let eofs = if direct.deprecate_eof() { 1 } else { 2 };
            assert_eq!(d.len(), 1 + 2 + 6 + eofs, "six rows inserted: {}", show(&d));
        }
    }
}

/// A client on a compressed connection: same answers as direct, the
/// `Compression` status shows ON, large results cross frame boundaries.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compressed_raw_client_matches_direct() {
    // Statements and rows beyond 16 MiB (more than one compressed frame).
    let db = MariaDb::shared_with(Profile::Production, &["--max-allowed-packet=64M"]);
    setup(db);
    let proxy = Proxy::builder(db).start().await;
    for ask in [
        Ask::new(BASE | COMPRESS | DEPRECATE_EOF),
        Ask::new(BASE | COMPRESS),
    ] {
        let (mut direct, mut via) = pair(db, &proxy, ask).await;
        assert!(via.compressed);
        for sql in [
            "SHOW STATUS LIKE 'Compression'",
            "SHOW GLOBAL STATUS LIKE 'compression'",
            "SELECT * FROM information_schema.SESSION_STATUS WHERE VARIABLE_NAME = 'COMPRESSION'",
            "SELECT VARIABLE_VALUE, VARIABLE_NAME FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'COMPRESSION'",
            "SELECT 1",
            "SELECT id, v, doc FROM caps_t ORDER BY id",
            "SELECT REPEAT('abc', 100000) AS r",
            "SELECT a, b FROM caps_big ORDER BY a",
        ] {
            let d = direct.query(sql).await;
            let v = via.query(sql).await;
            same(&format!("{ask:?} {sql}"), &v, &d);
        }
        let d = direct.query("SHOW STATUS LIKE 'Compression'").await;
        assert!(
            d.iter().any(|p| p.ends_with(b"\x02ON")),
            "direct compressed connection: {}",
            show(&d)
        );
        // A statement larger than one compressed frame (16 MiB) in both
        // directions: 17 MiB of text in, the same out.
        let big = format!("SELECT LENGTH('{}') AS n", "y".repeat(17 << 20));
        let v = via.query(&big).await;
        assert_eq!(one_value(&v), (17 << 20).to_string());
        let v = via.query("SELECT REPEAT('z', 17 * 1024 * 1024) AS r").await;
        assert!(
            v.iter().any(|p| p.len() > 17 << 20),
            "the 17 MiB row arrived"
        );
    }
}

/// The `mariadb` CLI with `--compress` prints what it prints direct.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_cli_compress_matches_direct() {
    let db = MariaDb::shared();
    setup(db);
    let proxy = Proxy::builder(db).start().await;
    let input = b"SHOW STATUS LIKE 'Compression';\nSELECT * FROM information_schema.session_status WHERE variable_name = 'COMPRESSION';\nSELECT id, v, doc FROM caps_t ORDER BY id;\nSELECT LENGTH(REPEAT('q', 2000000)) AS n, MD5(REPEAT('q', 2000000)) AS m;\nCALL caps_multi();\nSELECT a FROM caps_big WHERE a > 490;\n";
    let run = |port: u16| {
        let input = input.to_vec();
        tokio::task::spawn_blocking(move || {
            let mut cmd = std::process::Command::new(common::mariadb_bin("mariadb"));
            cmd.args([
                "--no-defaults",
                "--protocol=TCP",
                "--host=127.0.0.1",
                &format!("--port={port}"),
                &format!("--user={APP_USER}"),
                &format!("--password={APP_PASSWORD}"),
                "--compress",
                "-t",
                "test",
            ])
            .env("LC_ALL", "C")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
            let mut child = cmd.spawn().expect("mariadb CLI");
            let mut stdin = child.stdin.take().expect("stdin");
            stdin.write_all(&input).expect("write");
            drop(stdin);
            child.wait_with_output().expect("wait")
        })
    };
    let direct = timeout(Duration::from_secs(120), run(db.port))
        .await
        .expect("direct in time")
        .expect("join");
    let via = timeout(Duration::from_secs(120), run(proxy.addr.port()))
        .await
        .expect("proxy in time (hang?)")
        .expect("join");
    let d = String::from_utf8_lossy(&direct.stdout);
    assert!(
        direct.status.success(),
        "{}",
        String::from_utf8_lossy(&direct.stderr)
    );
    assert!(d.contains("| Compression   | ON    |"), "{d}");
    assert_eq!(
        String::from_utf8_lossy(&via.stdout),
        d,
        "stderr via: {}",
        String::from_utf8_lossy(&via.stderr)
    );
    assert_eq!(via.stderr, direct.stderr);
}

/// mysql_async with its `compression` option gets the results it gets
/// direct.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_async_compression_matches_direct() {
    use mysql_async::prelude::*;
    let db = MariaDb::shared();
    setup(db);
    let proxy = Proxy::builder(db).start().await;
    let open = |url: String| async move {
        let opts =
            mysql_async::OptsBuilder::from_opts(mysql_async::Opts::from_url(&url).expect("url"))
                .compression(Some(mysql_async::Compression::default()))
                .prefer_socket(false);
        mysql_async::Conn::new(opts).await.expect("connect")
    };
    let mut direct = open(db.url(APP_USER, APP_PASSWORD, "test")).await;
    let mut via = open(proxy.app_url()).await;
    type Row3 = (i32, Option<i32>, Option<String>);
    for conn in [&mut direct, &mut via] {
        conn.query_drop("CREATE TEMPORARY TABLE caps_z (id INT PRIMARY KEY, s LONGTEXT)")
            .await
            .expect("create");
    }
    let big = "w".repeat(3 << 20);
    let mut results = Vec::new();
    for conn in [&mut direct, &mut via] {
        let status: Vec<(String, String)> = conn
            .query("SHOW STATUS LIKE 'Compression'")
            .await
            .expect("status");
        let rows: Vec<Row3> = conn
            .query("SELECT id, v, JSON_UNQUOTE(JSON_EXTRACT(doc, '$.a')) FROM caps_t ORDER BY id")
            .await
            .expect("rows");
        let prepared: Vec<Row3> = conn
            .exec(
                "SELECT id, v, CAST(doc AS CHAR) FROM caps_t WHERE id >= ? ORDER BY id",
                (2,),
            )
            .await
            .expect("prepared");
        conn.exec_drop("INSERT INTO caps_z VALUES (?, ?)", (1, big.as_str()))
            .await
            .expect("insert big");
        let back: Option<(usize, String)> = conn
            .query_first("SELECT LENGTH(s), MD5(s) FROM caps_z WHERE id = 1")
            .await
            .expect("read back");
        let echo: Option<String> = conn
            .exec_first("SELECT s FROM caps_z WHERE id = ?", (1,))
            .await
            .expect("echo");
        assert_eq!(echo.as_deref().map(str::len), Some(big.len()));
        results.push((status, rows, prepared, back));
    }
    assert_eq!(
        results[0].0,
        vec![("Compression".to_string(), "ON".to_string())]
    );
    assert_eq!(results[1], results[0]);
    direct.disconnect().await.expect("bye");
    via.disconnect().await.expect("bye");
}

/// What a login of an IGNORE_SPACE + INTERACTIVE client derives.
const LOGIN_VALUES: &str = "SELECT CONCAT(@@sql_mode, ' ', @@wait_timeout)";

/// A one-backend proxy, the IGNORE_SPACE + INTERACTIVE flavour, a direct
/// and a proxied client of it, and [`LOGIN_VALUES`] as the direct one reads
/// them.
async fn login_values_pair() -> (Proxy, Ask, Wire, Wire, Vec<Vec<u8>>) {
    let db = MariaDb::shared();
    let proxy = Proxy::builder(db).groups(1).max_backend(1).start().await;
    setup(db);
    let ask = Ask::new(BASE | IGNORE_SPACE | INTERACTIVE | DEPRECATE_EOF);
    let (mut direct, a) = pair(db, &proxy, ask).await;
    let want = direct.query(LOGIN_VALUES).await;
    assert!(one_value(&want).contains("IGNORE_SPACE"), "{}", show(&want));
    (proxy, ask, direct, a, want)
}

/// A backend the proxy reset (COM_RESET_CONNECTION drops the IGNORE_SPACE
/// flag the server put into `sql_mode` at login, and INTERACTIVE's
/// `wait_timeout`) is brought back to a fresh connection of its flavour
/// before another client gets it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignore_space_survives_backend_reset() {
    let (proxy, ask, mut direct, mut a, want) = login_values_pair().await;
    let probe = LOGIN_VALUES;
    assert!(one_value(&want).ends_with(" 1234"), "{}", show(&want));
    // Pin A's backend (a temporary table), then reset: the proxy resets
    // that backend and returns it to the pool.
    assert_eq!(
        a.query("CREATE TEMPORARY TABLE caps_r (i INT)").await[0][0],
        0
    );
    let r = a.cmd(&[0x1F], Kind::Query).await;
    assert_eq!(r[0][0], 0, "reset: {}", show(&r));
    drop(a);
    let b = login(&proxy.addr.to_string(), ask, APP_PASSWORD).await;
    let mut b = b.unwrap_or_else(|e| panic!("login: {e:02x?}"));
    let got = b.query(probe).await;
    same(
        "sql_mode and wait_timeout of a fresh IGNORE_SPACE, INTERACTIVE client",
        &got,
        &want,
    );
    let got = b
        .query("SELECT COUNT (*) FROM information_schema.SCHEMATA WHERE 0")
        .await;
    let exp = direct
        .query("SELECT COUNT (*) FROM information_schema.SCHEMATA WHERE 0")
        .await;
    same("IGNORE_SPACE parsing", &got, &exp);
}

/// A session that changed `sql_mode` and `wait_timeout` on a pooled
/// backend of an IGNORE_SPACE + INTERACTIVE flavour leaves; the next client
/// of that flavour gets the values a fresh login has (IGNORE_SPACE added,
/// `wait_timeout` from `interactive_timeout`), not the global ones that
/// `SET … = DEFAULT` would give. Found with Connector/J, whose login
/// `sql_mode = concat(@@sql_mode, …)` then kept the loss for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_derived_values_survive_sync_to_default() {
    let (proxy, ask, _direct, mut a, want) = login_values_pair().await;
    let probe = LOGIN_VALUES;
    let r = a
        .query("SET SESSION sql_mode = 'ANSI_QUOTES', wait_timeout = 77")
        .await;
    assert_eq!(r[0][0], 0, "set: {}", show(&r));
    drop(a);
    for round in 0..2 {
        let b = login(&proxy.addr.to_string(), ask, APP_PASSWORD).await;
        let mut b = b.unwrap_or_else(|e| panic!("login: {e:02x?}"));
        let got = b.query(probe).await;
        same(
            &format!("round {round}: sql_mode and wait_timeout of a fresh client"),
            &got,
            &want,
        );
        // The value the client derives from the login one is what it would
        // be directly, and stays with the next client's fresh values.
        let r = b
            .query("SET sql_mode = CONCAT(@@sql_mode, ',NO_ZERO_DATE')")
            .await;
        assert_eq!(r[0][0], 0, "derive: {}", show(&r));
        let got = b.query("SELECT @@sql_mode").await;
        assert!(one_value(&got).contains("IGNORE_SPACE"), "{}", show(&got));
    }
}

/// Without DEPRECATE_EOF the server cannot report what a statement that
/// returns rows changed in the session (a function called by a SELECT sets
/// a variable): its EOF only carries SERVER_SESSION_STATE_CHANGED. That
/// state must stay with its client, never reach the next one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn classic_eof_state_change_does_not_leak() {
    let db = MariaDb::shared();
    setup(db);
    let proxy = Proxy::builder(db)
        .groups(1)
        .max_backend(1)
        .queue_timeout_ms(1500)
        .start()
        .await;
    let ask = Ask::new(BASE);
    let (mut direct, mut a) = pair(db, &proxy, ask).await;
    let d = direct.query("SELECT caps_setter() AS s").await;
    let v = a.query("SELECT caps_setter() AS s").await;
    // The backend (tracking every variable) flags the change on the EOF;
    // this client's default trackers do not follow auto_increment_increment,
    // so direct has no flag and neither must the proxy's answer.
    same("SELECT of a function that sets a variable", &v, &d);
    let probe = "SELECT @@auto_increment_increment";
    let d = direct.query(probe).await;
    let v = a.query(probe).await;
    same("A keeps its change", &v, &d);
    assert_eq!(one_value(&v), "7");
    // B, same flavour, on the only backend once A lets go of it (or a
    // queue timeout while A holds it): never A's value.
    let fresh = login(&db.addr(), ask, APP_PASSWORD)
        .await
        .expect("direct login")
        .query(probe)
        .await;
    let mut b = login(&proxy.addr.to_string(), ask, APP_PASSWORD)
        .await
        .expect("login through the proxy");
    let got = b.query(probe).await;
    if got[0][0] == 0xFF {
        assert_eq!(&got[0][1..3], &1317u16.to_le_bytes(), "{}", show(&got));
    } else {
        same("B sees a fresh session's value", &got, &fresh);
    }
    drop(a);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let got = b.query(probe).await;
    same("B after A left", &got, &fresh);
}

/// The result character set's collation is part of the session: a
/// handshake naming utf8mb4_unicode_ci and `SET NAMES utf8mb4 COLLATE
/// utf8mb4_unicode_ci` give result columns that collation (224), while
/// `SET NAMES utf8mb4` followed by `SET collation_connection =
/// utf8mb4_unicode_ci` (DBD::MariaDB's connect) leaves them utf8mb4's
/// default (45) — the same variables, reported the same way. Three such
/// sessions take turns on one backend; each must see its own columns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn result_collation_is_kept_apart_per_session() {
    let db = MariaDb::shared();
    setup(db);
    let proxy = Proxy::builder(db).groups(1).max_backend(1).start().await;
    let mut sessions = Vec::new();
    for (label, collation, setup) in [
        ("login 224", 224u8, &[][..]),
        (
            "SET NAMES, then collation_connection",
            45,
            &[
                "SET NAMES utf8mb4",
                "SET collation_connection = utf8mb4_unicode_ci",
            ][..],
        ),
        (
            "SET NAMES … COLLATE",
            45,
            &["SET NAMES utf8mb4 COLLATE utf8mb4_unicode_ci"][..],
        ),
    ] {
        let (mut direct, mut via) = pair(
            db,
            &proxy,
            Ask::new(BASE | DEPRECATE_EOF).collation(collation),
        )
        .await;
        for sql in setup {
            assert_eq!(direct.query(sql).await[0][0], 0, "{label}: {sql}");
            assert_eq!(via.query(sql).await[0][0], 0, "{label}: {sql}");
        }
        sessions.push((label, direct, via));
    }
    for round in 0..3 {
        for (label, direct, via) in sessions.iter_mut() {
            let sql = "SELECT 'x' AS s, @@collation_connection AS c, id FROM caps_t WHERE id = 1";
            let d = direct.query(sql).await;
            let v = via.query(sql).await;
            same(&format!("{label} (round {round})"), &v, &d);
        }
    }
}

/// The OK ending a login that named a schema reports it in a session-state
/// block (SESSION_STATE_CHANGED set), as the server's does, for clients
/// that track session state; the others get a plain OK.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_ok_matches_direct() {
    let db = MariaDb::shared();
    let proxy = Proxy::builder(db).start().await;
    for ask in [
        Ask::new(BASE),
        Ask::new(BASE | DEPRECATE_EOF),
        Ask::new(BASE & !SESSION_TRACK),
        Ask::new(BASE | DEPRECATE_EOF).collation(8),
    ] {
        let (direct, via) = pair(db, &proxy, ask).await;
        same(
            &format!("{ask:?}: login OK"),
            std::slice::from_ref(&via.login_ok),
            std::slice::from_ref(&direct.login_ok),
        );
    }
}

/// Connector/J 2.7's statement after login (the `java-*` clients of the
/// client matrix): it derives the session's `sql_mode` from the backend's.
const CONNECTOR_J_LOGIN: &str = "set autocommit=1, \
    session_track_system_variables='auto_increment_increment', \
    sql_mode = concat(@@sql_mode,',STRICT_TRANS_TABLES')";

/// What the client-matrix clients without IGNORE_SPACE do to a backend's
/// session before they leave (or while they share one).
const OTHER_CLIENT: &[&str] = &[
    "SET SESSION sql_mode = 'ANSI_QUOTES'",
    "SET SESSION sql_mode = DEFAULT",
    "CREATE TEMPORARY TABLE caps_tmp (i INT)",
    "SET NAMES latin1",
    "SELECT 1",
];

/// Issue 16 D.15 (client matrix `java-rewrite`, about 1 run in 3): clients
/// with and without CLIENT_IGNORE_SPACE alternate over a pool of 2
/// backends; every IGNORE_SPACE client runs Connector/J's login statement,
/// then reads `@@sql_mode`: always what the same client gets directly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignore_space_clients_alternating_with_others_keep_their_sql_mode() {
    let db = MariaDb::shared();
    let proxy = Proxy::builder(db).groups(1).max_backend(2).start().await;
    let java = Ask::new(BASE | FOUND_ROWS | IGNORE_SPACE | DEPRECATE_EOF);
    let other = Ask::new(BASE | DEPRECATE_EOF);
    let mut direct = login(&db.addr(), java, APP_PASSWORD)
        .await
        .unwrap_or_else(|e| panic!("direct login: {e:02x?}"));
    direct.query(CONNECTOR_J_LOGIN).await;
    let want = one_value(&direct.query("SELECT @@sql_mode").await);
    assert!(want.contains("IGNORE_SPACE"), "{want}");
    let addr = proxy.addr.to_string();
    for round in 0..12 {
        let j = {
            let addr = addr.clone();
            tokio::spawn(async move {
                let mut c = login(&addr, java, APP_PASSWORD)
                    .await
                    .unwrap_or_else(|e| panic!("login: {e:02x?}"));
                let r = c.query(CONNECTOR_J_LOGIN).await;
                assert_eq!(r[0][0], 0, "{}", show(&r));
                one_value(&c.query("SELECT @@sql_mode").await)
            })
        };
        let o = {
            let addr = addr.clone();
            tokio::spawn(async move {
                let mut c = login(&addr, other, APP_PASSWORD)
                    .await
                    .unwrap_or_else(|e| panic!("login: {e:02x?}"));
                for sql in OTHER_CLIENT.iter().skip(round % OTHER_CLIENT.len()) {
                    c.query(sql).await;
                }
            })
        };
        let got = j.await.expect("java-like client");
        o.await.expect("other client");
        assert_eq!(
            got, want,
            "round {round}: sql_mode of an IGNORE_SPACE client"
        );
        // And one alone, after the others left.
        let mut c = login(&addr, java, APP_PASSWORD)
            .await
            .unwrap_or_else(|e| panic!("login: {e:02x?}"));
        c.query(CONNECTOR_J_LOGIN).await;
        let got = one_value(&c.query("SELECT @@sql_mode").await);
        assert_eq!(got, want, "round {round}: an IGNORE_SPACE client alone");
    }
}

/// `SET sql_mode = DEFAULT` (and `wait_timeout`) on a backend of an
/// IGNORE_SPACE + INTERACTIVE flavour gives the *global* values, without
/// what the login derived: the session keeps those (as directly), and the
/// backend must not go to the next client of the flavour as if it were
/// fresh — Connector/J's `sql_mode = concat(@@sql_mode, …)` would then
/// lose IGNORE_SPACE for good (issue 16 D.15).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_to_default_keeps_the_global_values_with_their_session() {
    let (proxy, ask, mut direct, mut a, want) = login_values_pair().await;
    let set = "SET SESSION sql_mode = DEFAULT, @@wait_timeout = DEFAULT";
    let r = direct.query(set).await;
    assert_eq!(r[0][0], 0, "direct: {}", show(&r));
    let direct_after = direct.query(LOGIN_VALUES).await;
    assert!(!one_value(&direct_after).contains("IGNORE_SPACE"));
    let r = a.query(set).await;
    assert_eq!(r[0][0], 0, "set: {}", show(&r));
    let got = a.query(LOGIN_VALUES).await;
    same("the session after SET … = DEFAULT", &got, &direct_after);
    drop(a);
    for round in 0..2 {
        let mut b = login(&proxy.addr.to_string(), ask, APP_PASSWORD)
            .await
            .unwrap_or_else(|e| panic!("login: {e:02x?}"));
        let got = b.query(LOGIN_VALUES).await;
        same(
            &format!("round {round}: the next client of the backend"),
            &got,
            &want,
        );
    }
}

/// The first packet a compressed connection gets back, or `None` when it
/// is closed without one.
async fn first_compressed_reply(s: &mut TcpStream) -> Option<Vec<u8>> {
    let mut h = [0u8; 7];
    timeout(WAIT, s.read_exact(&mut h)).await.ok()?.ok()?;
    let clen = usize::from(h[0]) | usize::from(h[1]) << 8 | usize::from(h[2]) << 16;
    let ulen = usize::from(h[4]) | usize::from(h[5]) << 8 | usize::from(h[6]) << 16;
    let mut body = vec![0u8; clen];
    timeout(WAIT, s.read_exact(&mut body)).await.ok()?.ok()?;
    let plain = if ulen == 0 {
        body
    } else {
        let mut out = Vec::new();
        flate2::read::ZlibDecoder::new(&body[..])
            .read_to_end(&mut out)
            .ok()?;
        out
    };
    plain.get(4..).map(<[u8]>::to_vec)
}

/// A compressed frame announcing more plain bytes than the packet limit
/// (the server's `max_allowed_packet`) is refused on its header with 1153,
/// as the server refuses it, before the proxy inflates it: here 2 KiB of
/// zlib standing for a `SELECT 1` followed by 2 MiB of zero bytes, which
/// inflated would be read as a stream of empty commands (issue 16, item 9).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compressed_frame_above_the_packet_limit_is_refused() {
    let db = MariaDb::start_with_args(&["--max-allowed-packet=1M"]);
    let proxy = Proxy::builder(&db).start().await;
    let mut plain = vec![9, 0, 0, 0, 3];
    plain.extend_from_slice(b"SELECT 1");
    plain.resize(2 << 20, 0);
    let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(&plain).expect("deflate");
    let body = e.finish().expect("deflate");
    let mut frame = vec![
        body.len() as u8,
        (body.len() >> 8) as u8,
        (body.len() >> 16) as u8,
        0,
        plain.len() as u8,
        (plain.len() >> 8) as u8,
        (plain.len() >> 16) as u8,
    ];
    frame.extend_from_slice(&body);
    let mut codes = Vec::new();
    for addr in [db.addr(), proxy.addr.to_string()] {
        let mut w = login(
            &addr,
            Ask::new(BASE | COMPRESS | DEPRECATE_EOF),
            APP_PASSWORD,
        )
        .await
        .unwrap_or_else(|e| panic!("login: {e:02x?}"));
        assert!(w.compressed);
        w.s.write_all(&frame).await.expect("send");
        let reply = first_compressed_reply(&mut w.s).await;
        eprintln!(
            "DEBUG {addr}: {:02x?}",
            reply.as_ref().map(|r| &r[..r.len().min(40)])
        );
        codes.push(
            reply
                .filter(|p| p.first() == Some(&0xFF) && p.len() >= 3)
                .map(|p| u16::from_le_bytes([p[1], p[2]])),
        );
    }
    assert_eq!(
        codes[1],
        Some(1153),
        "through the proxy (direct: {:?})",
        codes[0]
    );
}
