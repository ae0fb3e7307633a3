//! Raw TCP clients sending bad bytes to the proxy. Every case must end in a
//! MySQL ERR packet or a clean close -- never a hang -- and the proxy must
//! keep serving other clients afterwards. Where the server itself defines
//! the right answer (error codes and SQLSTATEs for bad commands, refused
//! logins), the same bytes are also sent directly to MariaDB and the
//! answers compared.

use crate::common;

use std::io;
use std::time::Duration;

use common::{MariaDb, Proxy};
use mysql_async::prelude::Queryable;
use sha1::{Digest, Sha1};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::{Instant, timeout};

/// Upper bound for any single wait on the proxy.
const WAIT: Duration = Duration::from_secs(10);

// Capability bits used by the raw client.
const LONG_PASSWORD: u32 = 0x0000_0001;
const LONG_FLAG: u32 = 0x0000_0004;
const CONNECT_WITH_DB: u32 = 0x0000_0008;
const PROTOCOL_41: u32 = 0x0000_0200;
const SSL: u32 = 0x0000_0800;
const TRANSACTIONS: u32 = 0x0000_2000;
const SECURE_CONNECTION: u32 = 0x0000_8000;
const MULTI_RESULTS: u32 = 0x0002_0000;
const PLUGIN_AUTH: u32 = 0x0008_0000;
const SERVER_STATUS_AUTOCOMMIT: u16 = 0x0002;

const CLIENT_CAPS: u32 = LONG_PASSWORD
    | LONG_FLAG
    | PROTOCOL_41
    | TRANSACTIONS
    | SECURE_CONNECTION
    | MULTI_RESULTS
    | PLUGIN_AUTH;

// ---------------------------------------------------------------------------
// Raw packet I/O
// ---------------------------------------------------------------------------

/// Reads one packet (single chunk is enough for everything here). `None`
/// when the peer closed (EOF or reset) before a complete packet arrived.
async fn read_packet(s: &mut TcpStream, what: &str) -> Option<(u8, Vec<u8>)> {
    let fut = async {
        let mut h = [0u8; 4];
        s.read_exact(&mut h).await?;
        let len = h[0] as usize | (h[1] as usize) << 8 | (h[2] as usize) << 16;
        let mut payload = vec![0u8; len];
        s.read_exact(&mut payload).await?;
        Ok::<_, io::Error>((h[3], payload))
    };
    match timeout(WAIT, fut).await {
        Ok(Ok(p)) => Some(p),
        Ok(Err(_)) => None,
        Err(_) => panic!("{what}: no packet and no close within {WAIT:?}: the proxy hangs"),
    }
}

async fn send_packet(s: &mut TcpStream, seq: u8, payload: &[u8]) {
    let mut b = Vec::with_capacity(payload.len() + 4);
    let len = payload.len();
    b.extend_from_slice(&[len as u8, (len >> 8) as u8, (len >> 16) as u8, seq]);
    b.extend_from_slice(payload);
    s.write_all(&b).await.expect("write to proxy");
}

/// A parsed ERR packet.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Err {
    seq: u8,
    code: u16,
    state: String,
    message: String,
}

fn parse_err(seq: u8, p: &[u8]) -> Option<Err> {
    if p.first() != Some(&0xFF) || p.len() < 3 {
        return None;
    }
    let code = u16::from_le_bytes([p[1], p[2]]);
    let (state, msg) = if p.get(3) == Some(&b'#') && p.len() >= 9 {
        (String::from_utf8_lossy(&p[4..9]).into_owned(), &p[9..])
    } else {
        (String::new(), &p[3..])
    };
    Some(Err {
        seq,
        code,
        state,
        message: String::from_utf8_lossy(msg).into_owned(),
    })
}

/// What a client got back.
#[derive(Debug)]
enum Reply {
    Err(Err),
    /// The connection was closed (EOF or reset) without a packet.
    Closed,
    Other(u8, Vec<u8>),
}

async fn reply(s: &mut TcpStream, what: &str) -> Reply {
    match read_packet(s, what).await {
        None => Reply::Closed,
        Some((seq, p)) => match parse_err(seq, &p) {
            Some(e) => Reply::Err(e),
            None => Reply::Other(seq, p),
        },
    }
}

/// After an ERR (or instead of one) the connection must close: EOF or
/// reset, without further packets, within `WAIT`.
async fn expect_closed(s: &mut TcpStream, what: &str) {
    let mut buf = [0u8; 256];
    match timeout(WAIT, s.read(&mut buf)).await {
        Ok(Ok(0)) | Ok(Err(_)) => {}
        Ok(Ok(n)) => panic!(
            "{what}: expected close, got {n} more bytes: {:02x?}",
            &buf[..n]
        ),
        Err(_) => panic!("{what}: connection not closed within {WAIT:?}"),
    }
}

/// Expects an ERR packet or a clean close; returns the ERR if any.
async fn expect_err_or_close(s: &mut TcpStream, what: &str) -> Option<Err> {
    match reply(s, what).await {
        Reply::Err(e) => Some(e),
        Reply::Closed => None,
        Reply::Other(seq, p) => {
            panic!("{what}: expected ERR or close, got packet seq {seq}: {p:02x?}")
        }
    }
}

// ---------------------------------------------------------------------------
// Greeting and login
// ---------------------------------------------------------------------------

/// The fields of a HandshakeV10 greeting.
#[derive(Debug, Clone)]
struct Greeting {
    seq: u8,
    protocol: u8,
    version: Vec<u8>,
    conn_id: u32,
    /// auth-plugin-data part 1 (8) + part 2 (12).
    scramble: Vec<u8>,
    filler: u8,
    caps: u32,
    collation: u8,
    status: u16,
    auth_data_len: u8,
    /// MariaDB's extended capabilities (reserved bytes 6..10).
    mariadb_caps: u32,
    /// Byte after the 12-byte part 2 (must be NUL).
    part2_terminator: u8,
    plugin: Vec<u8>,
}

fn parse_greeting(seq: u8, p: &[u8]) -> Greeting {
    let mut at = 0usize;
    let mut take = |n: usize| -> Vec<u8> {
        let s = p
            .get(at..at + n)
            .unwrap_or_else(|| panic!("greeting truncated at {at} (+{n}): {p:02x?}"))
            .to_vec();
        at += n;
        s
    };
    let protocol = take(1)[0];
    let nul = p[1..]
        .iter()
        .position(|&b| b == 0)
        .expect("server version is NUL-terminated");
    let version = take(nul);
    take(1);
    let id = take(4);
    let conn_id = u32::from_le_bytes([id[0], id[1], id[2], id[3]]);
    let mut scramble = take(8);
    let filler = take(1)[0];
    let lo = take(2);
    let collation = take(1)[0];
    let st = take(2);
    let hi = take(2);
    let caps = u32::from(u16::from_le_bytes([lo[0], lo[1]]))
        | u32::from(u16::from_le_bytes([hi[0], hi[1]])) << 16;
    let auth_data_len = take(1)[0];
    let reserved = take(10);
    let mariadb_caps = u32::from_le_bytes([reserved[6], reserved[7], reserved[8], reserved[9]]);
    let part2_len = (auth_data_len as usize).saturating_sub(8).max(13);
    let part2 = take(part2_len);
    scramble.extend_from_slice(&part2[..part2_len - 1]);
    let part2_terminator = part2[part2_len - 1];
    let rest = take(p.len() - (1 + nul + 1 + 4 + 8 + 1 + 2 + 1 + 2 + 2 + 1 + 10 + part2_len));
    let plugin = match rest.iter().position(|&b| b == 0) {
        Some(n) => rest[..n].to_vec(),
        None => rest,
    };
    Greeting {
        seq,
        protocol,
        version,
        conn_id,
        scramble,
        filler,
        caps,
        collation,
        status: u16::from_le_bytes([st[0], st[1]]),
        auth_data_len,
        mariadb_caps,
        part2_terminator,
        plugin,
    }
}

async fn connect(addr: &str) -> TcpStream {
    timeout(WAIT, TcpStream::connect(addr))
        .await
        .expect("connect timed out")
        .expect("connect")
}

async fn greeting(s: &mut TcpStream) -> Greeting {
    let (seq, p) = read_packet(s, "greeting").await.expect("greeting");
    assert_ne!(
        p.first(),
        Some(&0xFF),
        "greeting is an ERR: {:?}",
        parse_err(seq, &p)
    );
    parse_greeting(seq, &p)
}

/// SHA1(pw) XOR SHA1(scramble + SHA1(SHA1(pw))).
fn native_scramble(nonce: &[u8], password: &str) -> Vec<u8> {
    if password.is_empty() {
        return Vec::new();
    }
    let h1: [u8; 20] = Sha1::digest(password.as_bytes()).into();
    let h2: [u8; 20] = Sha1::digest(h1).into();
    let mut h = Sha1::new();
    h.update(nonce);
    h.update(h2);
    let mask: [u8; 20] = h.finalize().into();
    h1.iter().zip(mask).map(|(a, b)| a ^ b).collect()
}

/// A Protocol::HandshakeResponse41.
fn handshake_response(caps: u32, user: &str, auth: &[u8], db: Option<&str>) -> Vec<u8> {
    let caps = if db.is_some() {
        caps | CONNECT_WITH_DB
    } else {
        caps
    };
    let mut p = Vec::new();
    p.extend_from_slice(&caps.to_le_bytes());
    p.extend_from_slice(&(16u32 << 20).to_le_bytes());
    p.push(45); // utf8mb4_general_ci
    p.extend_from_slice(&[0u8; 23]);
    p.extend_from_slice(user.as_bytes());
    p.push(0);
    p.push(auth.len() as u8);
    p.extend_from_slice(auth);
    if let Some(db) = db {
        p.extend_from_slice(db.as_bytes());
        p.push(0);
    }
    p.extend_from_slice(b"mysql_native_password\0");
    p
}

/// Logs in with raw bytes; returns the socket and the login's final reply.
async fn raw_login(addr: &str, user: &str, password: &str, db: Option<&str>) -> (TcpStream, Reply) {
    let mut s = connect(addr).await;
    let g = greeting(&mut s).await;
    let auth = native_scramble(&g.scramble, password);
    send_packet(&mut s, 1, &handshake_response(CLIENT_CAPS, user, &auth, db)).await;
    let r = reply(&mut s, "login reply").await;
    (s, r)
}

/// Logs in as app/secret and checks the OK.
async fn login_ok(addr: &str) -> TcpStream {
    let (s, r) = raw_login(addr, "app", "secret", Some("test")).await;
    match r {
        Reply::Other(2, p) if p.first() == Some(&0x00) => s,
        other => panic!("login to {addr} failed: {other:?}"),
    }
}

fn lenenc(p: &[u8], at: &mut usize) -> Option<u64> {
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

/// Result of a text-protocol command.
#[derive(Debug, PartialEq, Eq)]
enum QueryResult {
    Ok,
    Err(u16, String),
    Rows(Vec<Vec<Option<String>>>),
}

/// Reads one text-protocol response (no DEPRECATE_EOF, single result set).
async fn read_result(s: &mut TcpStream, what: &str) -> QueryResult {
    let Some((_, first)) = read_packet(s, what).await else {
        panic!("{what}: connection closed instead of a result");
    };
    match first.first() {
        Some(0x00) => return QueryResult::Ok,
        Some(0xFF) => {
            let e = parse_err(0, &first).expect("err");
            return QueryResult::Err(e.code, e.state);
        }
        _ => {}
    }
    let mut at = 0;
    let cols = lenenc(&first, &mut at).expect("column count");
    for _ in 0..cols {
        read_packet(s, what).await.expect("column definition");
    }
    let (_, eof) = read_packet(s, what).await.expect("EOF after columns");
    assert_eq!(
        eof.first(),
        Some(&0xFE),
        "{what}: expected EOF, got {eof:02x?}"
    );
    let mut rows = Vec::new();
    loop {
        let (_, p) = read_packet(s, what).await.expect("row or EOF");
        if p.first() == Some(&0xFE) && p.len() < 9 {
            break;
        }
        if p.first() == Some(&0xFF) {
            let e = parse_err(0, &p).expect("err");
            return QueryResult::Err(e.code, e.state);
        }
        let mut at = 0;
        let mut row = Vec::new();
        for _ in 0..cols {
            if p.get(at) == Some(&0xFB) {
                at += 1;
                row.push(None);
                continue;
            }
            let n = lenenc(&p, &mut at).expect("field length") as usize;
            row.push(Some(String::from_utf8_lossy(&p[at..at + n]).into_owned()));
            at += n;
        }
        rows.push(row);
    }
    QueryResult::Rows(rows)
}

async fn query(s: &mut TcpStream, sql: &str) -> QueryResult {
    let mut p = vec![0x03];
    p.extend_from_slice(sql.as_bytes());
    send_packet(s, 0, &p).await;
    read_result(s, sql).await
}

fn rows(v: &[&[&str]]) -> QueryResult {
    QueryResult::Rows(
        v.iter()
            .map(|r| r.iter().map(|c| Some(c.to_string())).collect())
            .collect(),
    )
}

/// The proxy still serves a normal client: login with mysql_async and
/// `SELECT 1` within `WAIT`.
async fn assert_serving(proxy: &Proxy, after: &str) {
    let url = proxy.app_url();
    let r = timeout(WAIT, async move {
        let mut c = mysql_async::Conn::from_url(url).await?;
        let one: Option<i64> = c.query_first("SELECT 1").await?;
        c.disconnect().await?;
        Ok::<_, mysql_async::Error>(one)
    })
    .await;
    match r {
        Ok(Ok(Some(1))) => {}
        Ok(other) => panic!("after {after}: proxy no longer serves: {other:?}"),
        Err(_) => panic!("after {after}: a normal client got no answer within {WAIT:?}"),
    }
}

/// A small deterministic byte generator (xorshift).
fn noise(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn greeting_is_well_formed_and_mirrors_the_server() {
    let db = MariaDb::shared();
    let proxy = Proxy::builder(db).start().await;
    let addr = proxy.addr.to_string();

    let mut d = connect(&db.addr()).await;
    let direct = greeting(&mut d).await;
    let mut a = connect(&addr).await;
    let g = greeting(&mut a).await;
    let mut b = connect(&addr).await;
    let g2 = greeting(&mut b).await;

    assert_eq!(g.seq, 0);
    assert_eq!(g.protocol, 10);
    assert_eq!(
        String::from_utf8_lossy(&g.version),
        String::from_utf8_lossy(&direct.version),
        "server version string must mirror the server's"
    );
    assert_eq!(g.filler, 0);
    assert_eq!(g.scramble.len(), 20);
    assert!(
        g.scramble.iter().all(|&c| c != 0),
        "scramble must not contain NUL: {:02x?}",
        g.scramble
    );
    assert_eq!(
        g.part2_terminator, 0,
        "auth-plugin-data part 2 is NUL-terminated"
    );
    assert_eq!(g.auth_data_len, 21);
    for (bit, name) in [
        (PROTOCOL_41, "PROTOCOL_41"),
        (SECURE_CONNECTION, "SECURE_CONNECTION"),
        (PLUGIN_AUTH, "PLUGIN_AUTH"),
        (CONNECT_WITH_DB, "CONNECT_WITH_DB"),
        (TRANSACTIONS, "TRANSACTIONS"),
        (MULTI_RESULTS, "MULTI_RESULTS"),
    ] {
        assert!(
            g.caps & bit != 0,
            "greeting lacks {name}: caps {:#010x}",
            g.caps
        );
    }
    assert_eq!(
        g.caps & SSL,
        0,
        "TLS is not configured, SSL must not be offered"
    );
    assert_eq!(
        g.collation, direct.collation,
        "collation mirrors the server's"
    );
    assert!(
        g.status & SERVER_STATUS_AUTOCOMMIT != 0,
        "status {:#06x}",
        g.status
    );
    assert_eq!(g.plugin, b"mysql_native_password");
    assert_ne!(g.conn_id, g2.conn_id, "connection ids are unique");
    assert_ne!(g.scramble, g2.scramble, "scrambles are random");
    // Extended MariaDB capabilities are only meaningful without CLIENT_MYSQL
    // (bit 0); the proxy offers LONG_PASSWORD, so they must be ignored.
    let _ = g.mariadb_caps;

    // Walking away after the greeting must not disturb anything.
    drop(a);
    drop(b);
    drop(d);
    assert_serving(&proxy, "clients leaving after the greeting").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_instead_of_handshake_response() {
    let db = MariaDb::shared();
    let proxy = Proxy::builder(db).start().await;
    let addr = proxy.addr.to_string();

    // All zeros: no CLIENT_PROTOCOL_41, nothing usable: 1043 Bad handshake.
    let mut s = connect(&addr).await;
    greeting(&mut s).await;
    send_packet(&mut s, 1, &[0u8; 40]).await;
    let e = expect_err_or_close(&mut s, "zeros").await;
    if let Some(e) = e {
        assert_eq!((e.code, e.state.as_str()), (1043, "08S01"), "{e:?}");
        assert_eq!(e.seq, 2, "ERR must follow the client's seq 1");
        expect_closed(&mut s, "after bad handshake ERR").await;
    }
    assert_serving(&proxy, "zeroed handshake response").await;

    // Random bytes of assorted lengths, with and without PROTOCOL_41 set.
    for (i, len) in [1usize, 3, 4, 17, 32, 33, 64, 300, 5000]
        .into_iter()
        .enumerate()
    {
        for force41 in [false, true] {
            let mut junk = noise(0x9E37_79B9 + i as u64, len);
            if force41 && junk.len() >= 2 {
                junk[1] |= 0x02;
                junk[0] &= !0x08; // no CONNECT_WITH_DB/SSL games: just junk
            }
            let mut s = connect(&addr).await;
            greeting(&mut s).await;
            send_packet(&mut s, 1, &junk).await;
            let what = format!("junk len {len} force41 {force41}");
            if let Some(e) = expect_err_or_close(&mut s, &what).await {
                assert!(
                    [1043, 1045].contains(&e.code),
                    "{what}: unexpected error {e:?}"
                );
                expect_closed(&mut s, &what).await;
            }
        }
    }
    assert_serving(&proxy, "random handshake responses").await;

    // Not even a packet header: 3 bytes, then close.
    let mut s = connect(&addr).await;
    greeting(&mut s).await;
    s.write_all(&[0xAB, 0xCD, 0xEF]).await.expect("write");
    s.shutdown().await.expect("shutdown");
    expect_err_or_close(&mut s, "3 stray bytes").await;
    assert_serving(&proxy, "3 stray bytes").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncated_handshake_response() {
    let db = MariaDb::shared();
    let proxy = Proxy::builder(db).start().await;
    let addr = proxy.addr.to_string();

    for cut in [1usize, 4, 5, 20, 36, 40, 60] {
        let mut s = connect(&addr).await;
        let g = greeting(&mut s).await;
        let auth = native_scramble(&g.scramble, "secret");
        let full = handshake_response(CLIENT_CAPS, "app", &auth, Some("test"));
        let mut wire = vec![full.len() as u8, (full.len() >> 8) as u8, 0, 1];
        wire.extend_from_slice(&full);
        let cut = cut.min(wire.len() - 1);
        s.write_all(&wire[..cut]).await.expect("write");
        s.shutdown().await.expect("shutdown write side");
        let what = format!("handshake response cut at {cut} of {}", wire.len());
        if let Some(e) = expect_err_or_close(&mut s, &what).await {
            // A server may report the read error; it must not log us in.
            assert_ne!(e.code, 0, "{what}: {e:?}");
        }
    }
    assert_serving(&proxy, "truncated handshake responses").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_logins_are_dropped_after_the_handshake_timeout() {
    let db = MariaDb::shared();
    let proxy = Proxy::builder(db)
        .with(|c| c.frontend.handshake_timeout_ms = 500)
        .start()
        .await;
    let addr = proxy.addr.to_string();

    // Silent after the greeting.
    let mut silent = connect(&addr).await;
    greeting(&mut silent).await;
    // Half a packet, then silence (socket left open).
    let mut half = connect(&addr).await;
    let g = greeting(&mut half).await;
    let auth = native_scramble(&g.scramble, "secret");
    let full = handshake_response(CLIENT_CAPS, "app", &auth, None);
    let mut wire = vec![full.len() as u8, 0, 0, 1];
    wire.extend_from_slice(&full[..10]);
    half.write_all(&wire).await.expect("write");

    let started = Instant::now();
    expect_err_or_close(&mut silent, "silent client").await;
    expect_err_or_close(&mut half, "half-sent handshake").await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "stalled logins closed only after {:?} (handshake_timeout_ms = 500)",
        started.elapsed()
    );
    assert_serving(&proxy, "stalled logins").await;
}

/// Bytes that are not a MySQL handshake response at all (an HTTP request:
/// its first bytes read as a 5.5 MB packet with sequence id 0x20). MariaDB
/// answers at once with ERR 1156 "Got packets out of order"; the proxy must
/// also answer or close promptly, not sit on the socket until its handshake
/// timeout (set long here so the timer cannot be what closes it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn non_mysql_bytes_are_refused_promptly() {
    let db = MariaDb::shared();
    let proxy = Proxy::builder(db)
        .with(|c| c.frontend.handshake_timeout_ms = 60_000)
        .start()
        .await;
    let request = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";

    let mut d = connect(&db.addr()).await;
    greeting(&mut d).await;
    d.write_all(request).await.expect("write");
    let de = expect_err_or_close(&mut d, "HTTP request, direct").await;

    let mut s = connect(&proxy.addr.to_string()).await;
    greeting(&mut s).await;
    s.write_all(request).await.expect("write");
    let pe = expect_err_or_close(&mut s, "HTTP request via proxy").await;
    if let (Some(pe), Some(de)) = (&pe, &de) {
        assert_eq!(
            (pe.code, &pe.state),
            (de.code, &de.state),
            "HTTP request: proxy {pe:?}, server {de:?}"
        );
    }
    assert_serving(&proxy, "HTTP request").await;
}

/// Login packets whose header announces 16 MB. The proxy accepts at most
/// 64 KB during the login.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handshake_header_claiming_16mb() {
    let db = MariaDb::shared();
    let proxy = Proxy::builder(db)
        .with(|c| c.frontend.handshake_timeout_ms = 3_000)
        .start()
        .await;
    let addr = proxy.addr.to_string();

    // Header claims 0xFFFFFF bytes, a few bytes follow, then close: the
    // proxy must notice the close at once (not wait for its timer).
    let mut s = connect(&addr).await;
    greeting(&mut s).await;
    s.write_all(&[0xFF, 0xFF, 0xFF, 1, 0x85, 0xA6, 0x0F, 0x00])
        .await
        .expect("write");
    s.shutdown().await.expect("shutdown");
    let started = Instant::now();
    expect_err_or_close(&mut s, "16 MB header then close").await;
    assert!(
        started.elapsed() < Duration::from_millis(2_500),
        "close noticed only after {:?}",
        started.elapsed()
    );
    assert_serving(&proxy, "16 MB header then close").await;

    // Same, but the client keeps the socket open. (MariaDB itself waits
    // for its connect_timeout here, so the handshake timer closing it is
    // acceptable; hanging on is not.)
    let mut s = connect(&addr).await;
    greeting(&mut s).await;
    s.write_all(&[0xFF, 0xFF, 0xFF, 1, 0x85, 0xA6, 0x0F, 0x00])
        .await
        .expect("write");
    expect_err_or_close(&mut s, "16 MB header, socket open").await;
    assert_serving(&proxy, "16 MB header, socket open").await;

    // 1 MB of a 16 MB packet actually sent, then close.
    let mut s = connect(&addr).await;
    greeting(&mut s).await;
    let mut wire = vec![0xFF, 0xFF, 0xFF, 1];
    wire.extend_from_slice(&noise(7, 1 << 20));
    // The proxy may close while we write; that is fine.
    let _ = timeout(WAIT, s.write_all(&wire)).await;
    let _ = s.shutdown().await;
    expect_err_or_close(&mut s, "1 MB of a 16 MB login packet").await;
    assert_serving(&proxy, "1 MB of a 16 MB login packet").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ssl_request_without_tls_configured() {
    let db = MariaDb::shared();
    let proxy = Proxy::builder(db).start().await;
    let addr = proxy.addr.to_string();
    let mut s = connect(&addr).await;
    greeting(&mut s).await;
    // A 32-byte SSLRequest although SSL was not offered.
    let mut p = Vec::new();
    p.extend_from_slice(&(CLIENT_CAPS | SSL).to_le_bytes());
    p.extend_from_slice(&(16u32 << 20).to_le_bytes());
    p.push(45);
    p.extend_from_slice(&[0u8; 23]);
    send_packet(&mut s, 1, &p).await;
    // A TLS ClientHello-ish blob right behind it.
    let _ = s
        .write_all(&[0x16, 0x03, 0x01, 0x00, 0x05, 1, 2, 3, 4, 5])
        .await;
    let e = expect_err_or_close(&mut s, "SSLRequest without TLS").await;
    if let Some(e) = e {
        assert_ne!(e.code, 0);
        expect_closed(&mut s, "after SSLRequest refusal").await;
    }
    assert_serving(&proxy, "SSLRequest without TLS").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_logins_match_the_server() {
    let db = MariaDb::shared();
    let proxy = Proxy::builder(db).start().await;
    let addr = proxy.addr.to_string();
    let direct_addr = db.addr();

    for (user, password) in [
        ("app", "wrong"),
        ("app", ""),
        ("nobody", "x"),
        ("nobody", ""),
    ] {
        let what = format!("login {user}/{password:?}");
        let (mut ps, pr) = raw_login(&addr, user, password, Some("test")).await;
        let (_ds, dr) = raw_login(&direct_addr, user, password, Some("test")).await;
        let Reply::Err(pe) = pr else {
            panic!("{what}: proxy did not refuse: {pr:?}")
        };
        let Reply::Err(de) = dr else {
            panic!("{what}: server did not refuse: {dr:?}")
        };
        assert_eq!(pe.code, 1045, "{what}: {pe:?}");
        assert_eq!(pe.state, "28000", "{what}: {pe:?}");
        assert_eq!(
            (pe.seq, pe.code, &pe.state, &pe.message),
            (de.seq, de.code, &de.state, &de.message),
            "{what}: proxy's refusal differs from the server's"
        );
        expect_closed(&mut ps, &what).await;
    }
    assert_serving(&proxy, "refused logins").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_commands_after_login() {
    let db = MariaDb::shared();
    let proxy = Proxy::builder(db).start().await;
    let addr = proxy.addr.to_string();
    let direct_addr = db.addr();

    // Command bytes no server serves to a client session. The server's
    // code and SQLSTATE are the reference; the connection stays usable.
    for cmd in [0x00u8, 0x0B, 0x20, 0x7F, 0xEE, 0xFF] {
        let what = format!("command {cmd:#04x}");
        let mut p = login_ok(&addr).await;
        let mut d = login_ok(&direct_addr).await;
        send_packet(&mut p, 0, &[cmd, 1, 2, 3]).await;
        send_packet(&mut d, 0, &[cmd, 1, 2, 3]).await;
        let pr = reply(&mut p, &what).await;
        let dr = reply(&mut d, &what).await;
        match (&pr, &dr) {
            (Reply::Err(pe), Reply::Err(de)) => {
                assert_eq!(
                    (pe.seq, pe.code, &pe.state),
                    (de.seq, de.code, &de.state),
                    "{what}: proxy {pe:?} vs server {de:?}"
                );
                if cmd == 0xEE {
                    assert_eq!(pe.code, 1047, "{what}");
                }
                assert_eq!(query(&mut p, "SELECT 1").await, rows(&[&["1"]]), "{what}");
                assert_eq!(query(&mut d, "SELECT 1").await, rows(&[&["1"]]), "{what}");
            }
            (Reply::Closed, Reply::Closed) => {}
            _ => panic!("{what}: proxy {pr:?} vs server {dr:?}"),
        }
    }
    assert_serving(&proxy, "unknown commands").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_packet_as_command() {
    let db = MariaDb::shared();
    let proxy = Proxy::builder(db).start().await;
    let addr = proxy.addr.to_string();
    let direct_addr = db.addr();

    let mut p = login_ok(&addr).await;
    let mut d = login_ok(&direct_addr).await;
    send_packet(&mut p, 0, &[]).await;
    send_packet(&mut d, 0, &[]).await;
    let pr = reply(&mut p, "empty packet via proxy").await;
    let dr = reply(&mut d, "empty packet direct").await;
    match (&pr, &dr) {
        (Reply::Err(pe), Reply::Err(de)) => {
            assert_eq!(
                (pe.seq, pe.code, &pe.state),
                (de.seq, de.code, &de.state),
                "empty packet: proxy {pe:?} vs server {de:?}"
            );
            assert_eq!(query(&mut p, "SELECT 2").await, rows(&[&["2"]]));
        }
        (Reply::Err(pe), Reply::Closed) => {
            // The server hangs up; an ERR from the proxy is also fine as
            // long as the connection then works or closes.
            match timeout(WAIT, query(&mut p, "SELECT 2")).await {
                Ok(r) => assert_eq!(r, rows(&[&["2"]]), "after {pe:?}"),
                Err(_) => panic!("hang after empty packet"),
            }
        }
        (Reply::Closed, _) => {}
        _ => panic!("empty packet: proxy {pr:?} vs server {dr:?}"),
    }
    assert_serving(&proxy, "empty packet").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversize_command_packet() {
    let db = MariaDb::shared();
    let proxy = Proxy::builder(db)
        .with(|c| c.frontend.max_allowed_packet = 4096)
        .start()
        .await;
    let addr = proxy.addr.to_string();

    // Below the limit: served.
    let mut s = login_ok(&addr).await;
    let pad = "x".repeat(4000);
    assert_eq!(
        query(&mut s, &format!("SELECT LENGTH('{pad}')")).await,
        rows(&[&["4000"]])
    );

    // 10 KB: ERR 1153 then close.
    let big = format!("SELECT LENGTH('{}')", "y".repeat(10 * 1024));
    let mut p = vec![0x03];
    p.extend_from_slice(big.as_bytes());
    send_packet(&mut s, 0, &p).await;
    match reply(&mut s, "10 KB COM_QUERY").await {
        Reply::Err(e) => {
            assert_eq!((e.code, e.state.as_str()), (1153, "08S01"), "{e:?}");
            assert_eq!(e.seq, 1, "{e:?}");
        }
        other => {
            panic!("10 KB packet with max_allowed_packet 4096: expected ERR 1153, got {other:?}")
        }
    }
    expect_closed(&mut s, "after ERR 1153").await;
    assert_serving(&proxy, "oversize packet").await;

    // Header announcing 16 MB after login, then nothing more. MariaDB with
    // max_allowed_packet = 4096 answers ERR 1153 (seq 1) right after the
    // header; the proxy must not wait for 16 MB that will never come (there
    // is no timeout on a logged-in client's reads).
    let mut s = login_ok(&addr).await;
    s.write_all(&[0xFF, 0xFF, 0xFF, 0, 0x03])
        .await
        .expect("write");
    match reply(&mut s, "16 MB header after login").await {
        Reply::Err(e) => assert_eq!(e.code, 1153, "{e:?}"),
        Reply::Closed => {}
        other => panic!("16 MB header after login: {other:?}"),
    }
    assert_serving(&proxy, "16 MB header after login").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncated_command_then_close() {
    let db = MariaDb::shared();
    let proxy = Proxy::builder(db).start().await;
    let addr = proxy.addr.to_string();
    let mut s = login_ok(&addr).await;
    // Header says 100 bytes, 10 arrive, then the client closes its side.
    s.write_all(&[
        100, 0, 0, 0, 0x03, b'S', b'E', b'L', b'E', b'C', b'T', b' ', b'1', b' ',
    ])
    .await
    .expect("write");
    s.shutdown().await.expect("shutdown");
    expect_err_or_close(&mut s, "truncated command").await;
    assert_serving(&proxy, "truncated command").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quit_and_pipelined_commands() {
    let db = MariaDb::shared();
    let proxy = Proxy::builder(db).start().await;
    let addr = proxy.addr.to_string();
    let direct_addr = db.addr();

    // COM_QUIT: the connection closes without a reply.
    let mut s = login_ok(&addr).await;
    send_packet(&mut s, 0, &[0x01]).await;
    expect_closed(&mut s, "COM_QUIT").await;

    // Several commands in one write are answered in order, as by the server.
    for a in [addr.as_str(), direct_addr.as_str()] {
        let mut s = login_ok(a).await;
        let mut wire = Vec::new();
        for sql in [
            "SELECT 1",
            "SELECT 'two'",
            "SELECT * FROM no_such_tbl",
            "SELECT 3",
        ] {
            let mut p = vec![0x03];
            p.extend_from_slice(sql.as_bytes());
            wire.extend_from_slice(&[p.len() as u8, 0, 0, 0]);
            wire.extend_from_slice(&p);
        }
        wire.extend_from_slice(&[1, 0, 0, 0, 0x0E]); // COM_PING
        s.write_all(&wire).await.expect("write");
        assert_eq!(read_result(&mut s, a).await, rows(&[&["1"]]), "{a}");
        assert_eq!(read_result(&mut s, a).await, rows(&[&["two"]]), "{a}");
        assert_eq!(
            read_result(&mut s, a).await,
            QueryResult::Err(1146, "42S02".into()),
            "{a}"
        );
        assert_eq!(read_result(&mut s, a).await, rows(&[&["3"]]), "{a}");
        assert_eq!(read_result(&mut s, a).await, QueryResult::Ok, "{a}");
    }
    assert_serving(&proxy, "pipelined commands").await;
}

/// Clients that start a slow query and vanish: others keep being served,
/// and backend connections stay bounded (no leak, no pile-up on the
/// server).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abandoned_slow_queries_do_not_leak_backends() {
    // A private server, so its processlist shows only this proxy.
    let db = tokio::task::block_in_place(MariaDb::start);
    let max_backend = 4;
    let proxy = Proxy::builder(&db)
        .groups(2)
        .max_backend(max_backend)
        .start()
        .await;
    let addr = proxy.addr.to_string();

    let mut peak = 0;
    for round in 0..3 {
        // 10 clients: send SELECT SLEEP(2) and close at once.
        for _ in 0..10 {
            let mut s = login_ok(&addr).await;
            let mut p = vec![0x03];
            p.extend_from_slice(b"SELECT SLEEP(2)");
            send_packet(&mut s, 0, &p).await;
            drop(s);
        }
        // Meanwhile a normal client is served (within WAIT, queueing
        // behind the sleeps is allowed).
        let started = Instant::now();
        assert_serving(&proxy, &format!("abandoned slow queries, round {round}")).await;
        let served_after = started.elapsed();
        // Watch the pool for a while.
        let until = Instant::now() + Duration::from_secs(3);
        while Instant::now() < until {
            peak = peak.max(proxy.backends_owned());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(
            peak <= max_backend,
            "round {round}: proxy owns {peak} backend connections, cap is {max_backend}"
        );
        eprintln!(
            "round {round}: normal client served after {served_after:?}, peak backends {peak}"
        );
    }

    // Once the sleeps are over, the server must not be left with more
    // connections than the pool may own.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let n: usize = tokio::task::block_in_place(|| {
            db.sql("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = 'app'")
        })
        .trim()
        .parse()
        .expect("count");
        if n <= max_backend {
            break;
        }
        if Instant::now() > deadline {
            let list = tokio::task::block_in_place(|| {
                db.sql("SELECT ID, COMMAND, TIME, STATE, INFO FROM information_schema.PROCESSLIST WHERE USER = 'app'")
            });
            panic!("server still has {n} app connections (cap {max_backend}):\n{list}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(proxy.backends_owned() <= max_backend);
    assert_serving(&proxy, "abandoned slow queries, final").await;
}
