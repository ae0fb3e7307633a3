//! Protocol gaps real clients found (issue 8 §B), each checked end to end
//! against a real MariaDB and, wherever the server defines the answer,
//! against the same bytes sent on a direct connection:
//!
//! - SEND_LONG_DATA never gets a reply (unknown statement, a backend that
//!   cannot be reached: the error comes at EXECUTE); long data of one
//!   statement survives other statements' EXECUTEs and never reaches
//!   another client;
//! - the server's `max_prepared_stmt_count` (shared by all its connections)
//!   is respected: per-backend caps sized from it, retry after 1461;
//! - any number of open cursors per session, the pin lasting until the last;
//! - COM_STMT_PREPARE errors byte for byte (latin1 messages);
//! - COM_REFRESH and COM_DEBUG forwarded, privileges checked by the server;
//! - a failed COM_CHANGE_USER leaves the connection as the server does;
//! - `max_allowed_packet` as the server enforces it (ERR 1153 at the same
//!   point, the same sequence id, then the connection closes).

use crate::common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::mariadb::{APP_PASSWORD, APP_USER};
use common::raw::*;
use common::{MariaDb, Proxy};
use myplex::config::UserConfig;
use myplex::session_state::{PinReason, Pins};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::{Instant, timeout};

fn mode(deprecate: bool) -> &'static str {
    if deprecate { "deprecate_eof" } else { "eof" }
}

async fn via(p: &Proxy, deprecate: bool) -> RawConn {
    RawConn::connect(
        &p.addr.to_string(),
        APP_USER,
        APP_PASSWORD,
        Some("test"),
        deprecate,
    )
    .await
}

async fn direct(db: &MariaDb, deprecate: bool) -> RawConn {
    RawConn::connect(&db.addr(), APP_USER, APP_PASSWORD, Some("test"), deprecate).await
}

/// A unique table name in `test`.
fn table(tag: &str) -> String {
    format!("test.pg_{tag}_{}", std::process::id())
}

/// The pin reasons of the proxy session behind `c`.
/// The session's pins once it has finished with the last command: the
/// session publishes them after it has sent the response, so a read right
/// after the client got it may still see the previous command's (the
/// session runs on its group's worker thread). Two reads 20 ms apart that
/// agree are taken as settled.
fn pins(p: &Proxy, c: &RawConn) -> Pins {
    let read = || {
        let sessions = p.shared.sessions.lock().expect("sessions lock");
        let h = sessions
            .get(&c.conn_id)
            .unwrap_or_else(|| panic!("no proxy session {}", c.conn_id));
        h.pins.load(Ordering::Relaxed)
    };
    let mut last = read();
    for _ in 0..50 {
        std::thread::sleep(std::time::Duration::from_millis(20));
        let now = read();
        if now == last {
            break;
        }
        last = now;
    }
    Pins::from_bits(last)
}

#[track_caller]
fn same(via: &Response, direct: &Response, what: &str) {
    let diff = response_diff(via, direct);
    assert!(diff.is_empty(), "{what}:\n    {}", diff.join("\n    "));
}

fn text(r: &Response) -> Vec<Vec<Option<String>>> {
    match r {
        Response::Rows(rs) => rs.text_rows(),
        other => panic!("expected rows, got {}", brief(other)),
    }
}

/// The one value of a one-row binary result.
fn binary_value(r: &Response) -> Value {
    match r {
        Response::Rows(rs) => {
            let rows = rs.binary_rows();
            assert_eq!(rows.len(), 1, "{rows:?}");
            rows[0][0].clone()
        }
        other => panic!("expected one row, got {}", brief(other)),
    }
}

// ---------------------------------------------------------------------------
// SEND_LONG_DATA
// ---------------------------------------------------------------------------

/// Long data the server ignores (unknown statement, too short to name a
/// parameter) gets no reply from the proxy either: the next reply the client
/// reads is its next command's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_data_is_never_answered() {
    let db = MariaDb::shared();
    let p = Proxy::builder(db).start().await;
    for deprecate in [false, true] {
        let m = mode(deprecate);
        let mut c = via(&p, deprecate).await;
        let mut d = direct(db, deprecate).await;
        for conn in [&mut c, &mut d] {
            conn.send_long_data(999, 0, b"nobody prepared this").await;
            conn.send_command(&[COM_STMT_SEND_LONG_DATA]).await;
            conn.send_command(&[COM_STMT_SEND_LONG_DATA, 1, 0]).await;
        }
        let rc = c.query("SELECT 'next'").await;
        let rd = d.query("SELECT 'next'").await;
        same(&rc, &rd, &format!("{m}: the reply after ignored long data"));
        assert_eq!(text(&rc), vec![vec![Some("next".to_string())]], "{m}");

        // A parameter the statement does not have: the server reports it at
        // EXECUTE (and nothing before).
        let sc = c.prepare("SELECT ?").await.expect("prepare via proxy");
        let sd = d.prepare("SELECT ?").await.expect("prepare direct");
        c.send_long_data(sc.id, 5, b"no such parameter").await;
        d.send_long_data(sd.id, 5, b"no such parameter").await;
        let rc = c.execute(sc.id, 0, &[Param::str("x")], true).await;
        let rd = d.execute(sd.id, 0, &[Param::str("x")], true).await;
        same(
            &rc,
            &rd,
            &format!("{m}: EXECUTE after long data for parameter 5"),
        );
        assert_eq!(rc.clone().err().code, 1210, "{m}");
        let rc = c.execute(sc.id, 0, &[Param::str("x")], true).await;
        let rd = d.execute(sd.id, 0, &[Param::str("x")], true).await;
        same(&rc, &rd, &format!("{m}: the error stays until reset"));

        // That error state stays with the client's statement; no other
        // client of the proxy inherits it on the shared backend statement.
        let mut other = via(&p, deprecate).await;
        let so = other.prepare("SELECT ?").await.expect("prepare other");
        let ro = other.execute(so.id, 0, &[Param::str("clean")], true).await;
        assert_eq!(binary_value(&ro), Value::str("clean"), "{m}");
        let rc = c.query("SELECT 'still in step'").await;
        assert_eq!(
            text(&rc),
            vec![vec![Some("still in step".to_string())]],
            "{m}"
        );
        let rc = c.reset(sc.id).await;
        let rd = d.reset(sd.id).await;
        same(&rc, &rd, &format!("{m}: reset"));
        let rc = c.execute(sc.id, 0, &[Param::str("x")], true).await;
        let rd = d.execute(sd.id, 0, &[Param::str("x")], true).await;
        same(&rc, &rd, &format!("{m}: EXECUTE after reset"));
        assert_eq!(binary_value(&rc), Value::str("x"), "{m}");
        assert!(!pins(&p, &c).has(PinReason::LongData), "{m}");
    }
}

/// Long data the proxy cannot deliver (the only backend is held by another
/// client's transaction until the queue times out) gets no reply; the
/// EXECUTE reports the error, as the server reports its own long-data
/// errors, until COM_STMT_RESET. The stream stays in step throughout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn undeliverable_long_data_is_reported_at_execute() {
    let db = MariaDb::shared();
    let p = Proxy::builder(db)
        .groups(1)
        .max_backend(1)
        .queue_timeout_ms(300)
        .start()
        .await;
    let mut x = via(&p, true).await;
    let s = x.prepare("SELECT ?").await.expect("prepare");
    let mut y = via(&p, true).await;
    y.query_ok("BEGIN").await;
    y.query_rows("SELECT 1").await;
    assert!(pins(&p, &y).has(PinReason::Transaction));

    x.send_long_data(s.id, 0, b"lost").await;
    let blob = [Param::LongData(TYPE_BLOB)];
    let e = x.execute(s.id, 0, &blob, true).await.err();
    assert_eq!(e.code, 1317, "the queue timeout of the long data: {e:?}");

    y.query_ok("COMMIT").await;
    let r = x.query("SELECT 'in step'").await;
    assert_eq!(text(&r), vec![vec![Some("in step".to_string())]]);
    let again = x.execute(s.id, 0, &blob, true).await.err();
    assert_eq!(again, e, "reported until the statement is reset");

    x.reset(s.id).await.ok();
    x.send_long_data(s.id, 0, b"found").await;
    let r = x.execute(s.id, 0, &blob, true).await;
    assert_eq!(binary_value(&r), Value::str("found"));
    assert!(!pins(&p, &x).any(), "{:?}", pins(&p, &x).primary());
}

/// Long data for one statement survives EXECUTEs of other statements of the
/// session (one with the same text among them) and never reaches another
/// client using the same statement text meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_data_survives_other_statements_and_stays_private() {
    let db = MariaDb::shared();
    let p = Proxy::builder(db).groups(1).max_backend(2).start().await;
    for deprecate in [false, true] {
        let m = mode(deprecate);
        let mut x = via(&p, deprecate).await;
        let mut d = direct(db, deprecate).await;
        let mut results = Vec::new();
        for (conn, proxied) in [(&mut x, true), (&mut d, false)] {
            let a = conn.prepare("SELECT ?").await.expect("prepare a");
            let b = conn.prepare("SELECT ? + 1").await.expect("prepare b");
            let same_text = conn.prepare("SELECT ?").await.expect("prepare same text");
            conn.send_long_data(a.id, 0, b"hello ").await;
            conn.send_long_data(a.id, 0, b"world").await;
            let rb = conn.execute(b.id, 0, &[Param::LongLong(41)], true).await;
            let rs = conn
                .execute(same_text.id, 0, &[Param::str("inline")], true)
                .await;
            if proxied {
                assert!(
                    pins(&p, conn).has(PinReason::LongData),
                    "{m}: long data of statement a outlives other EXECUTEs"
                );
                // Another client runs the same text meanwhile.
                let mut o = via(&p, deprecate).await;
                let so = o.prepare("SELECT ?").await.expect("prepare other");
                let ro = o.execute(so.id, 0, &[Param::str("other")], true).await;
                assert_eq!(binary_value(&ro), Value::str("other"), "{m}");
            }
            let ra = conn
                .execute(a.id, 0, &[Param::LongData(TYPE_BLOB)], true)
                .await;
            if proxied {
                assert!(!pins(&p, conn).has(PinReason::LongData), "{m}");
            }
            results.push((rb, rs, ra));
        }
        let (xb, xs, xa) = &results[0];
        let (db_, ds, da) = &results[1];
        same(xb, db_, &format!("{m}: EXECUTE of another statement"));
        same(
            xs,
            ds,
            &format!("{m}: EXECUTE of a statement with the same text"),
        );
        same(xa, da, &format!("{m}: EXECUTE with the long data"));
        assert_eq!(binary_value(xa), Value::str("hello world"), "{m}");
        assert_eq!(binary_value(xs), Value::str("inline"), "{m}");
    }
}

// ---------------------------------------------------------------------------
// Cursors
// ---------------------------------------------------------------------------

fn ten_rows(tag: &str) -> String {
    let t = table(tag);
    let values: Vec<String> = (1..=10).map(|i| format!("({i}, 'row{i}')")).collect();
    MariaDb::shared().sql(&format!(
        "DROP TABLE IF EXISTS {t};
         CREATE TABLE {t} (id INT PRIMARY KEY, v VARCHAR(20));
         INSERT INTO {t} VALUES {}",
        values.join(",")
    ));
    t
}

fn exhausted(f: &Fetched) -> bool {
    match f {
        Fetched::Rows { end, .. } => end.status & STATUS_LAST_ROW_SENT != 0,
        Fetched::Err(_) => true,
    }
}

/// Three cursors open at once (two of them on statements with the same
/// text), fetched interleaved: every answer equals the server's, the
/// session stays pinned while any cursor is open and is released with the
/// last one. Then: closing one of two cursors keeps the pin, resetting the
/// other ends it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interleaved_cursors_match_direct() {
    let db = MariaDb::shared();
    let p = Proxy::builder(db).start().await;
    for deprecate in [false, true] {
        let m = mode(deprecate);
        let t = ten_rows(&format!("cursors_{m}"));
        let up = format!("SELECT id, v FROM {t} WHERE id > ? ORDER BY id");
        let down = format!("SELECT v, id FROM {t} WHERE id > ? ORDER BY id DESC");
        let mut x = via(&p, deprecate).await;
        let mut d = direct(db, deprecate).await;
        let mut ids = Vec::new();
        for conn in [&mut x, &mut d] {
            let a = conn.prepare(&up).await.expect("prepare a");
            let b = conn.prepare(&down).await.expect("prepare b");
            let a2 = conn.prepare(&up).await.expect("prepare a2");
            ids.push([a.id, b.id, a2.id]);
        }
        let args = [[0i64], [2], [5]];
        for (i, arg) in args.iter().enumerate() {
            let params = [Param::LongLong(arg[0])];
            let rx = x
                .execute(ids[0][i], CURSOR_TYPE_READ_ONLY, &params, true)
                .await;
            let rd = d
                .execute(ids[1][i], CURSOR_TYPE_READ_ONLY, &params, true)
                .await;
            same(&rx, &rd, &format!("{m}: cursor {i} opened"));
            assert!(pins(&p, &x).has(PinReason::Cursor), "{m}");
        }
        let mut open = [true; 3];
        let mut rounds = 0;
        while open.iter().any(|o| *o) {
            rounds += 1;
            assert!(rounds < 20, "{m}: cursors never ended");
            for i in 0..3 {
                if !open[i] {
                    continue;
                }
                let n = 2 + i as u32;
                let fx = x.fetch(ids[0][i], n).await;
                let fd = d.fetch(ids[1][i], n).await;
                assert_eq!(fx, fd, "{m}: fetch {n} rows of cursor {i}, round {rounds}");
                open[i] = !exhausted(&fx);
                let still = open.iter().any(|o| *o);
                assert_eq!(
                    pins(&p, &x).has(PinReason::Cursor),
                    still,
                    "{m}: pinned exactly while a cursor is open (round {rounds})"
                );
            }
        }
        assert!(!pins(&p, &x).any(), "{m}: {:?}", pins(&p, &x).primary());

        // Close one of two open cursors, reset the other.
        for (conn, s) in [(&mut x, ids[0]), (&mut d, ids[1])] {
            for id in [s[0], s[1]] {
                let r = conn
                    .execute(id, CURSOR_TYPE_READ_ONLY, &[Param::LongLong(0)], true)
                    .await;
                assert!(matches!(r, Response::Rows(_)), "{m}: {}", brief(&r));
            }
            conn.close_stmt(s[0]).await;
        }
        assert!(pins(&p, &x).has(PinReason::Cursor), "{m}: one cursor left");
        let fx = x.fetch(ids[0][1], 3).await;
        let fd = d.fetch(ids[1][1], 3).await;
        assert_eq!(fx, fd, "{m}: fetch from the cursor left open");
        let rx = x.reset(ids[0][1]).await;
        let rd = d.reset(ids[1][1]).await;
        same(&rx, &rd, &format!("{m}: reset"));
        assert!(!pins(&p, &x).any(), "{m}: {:?}", pins(&p, &x).primary());
        let fx = x.fetch(ids[0][1], 3).await;
        let fd = d.fetch(ids[1][1], 3).await;
        match (&fx, &fd) {
            (Fetched::Err(ex), Fetched::Err(ed)) => assert_eq!(
                ex.normalized(ids[0][1]),
                ed.normalized(ids[1][1]),
                "{m}: fetch after reset"
            ),
            _ => panic!("{m}: fetch after reset: via {fx:?}, direct {fd:?}"),
        }
    }
}

// ---------------------------------------------------------------------------
// max_prepared_stmt_count
// ---------------------------------------------------------------------------

/// The server's global `Prepared_stmt_count`.
fn prepared_stmt_count(db: &MariaDb) -> usize {
    let out = db.sql(
        "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS \
         WHERE VARIABLE_NAME = 'PREPARED_STMT_COUNT'",
    );
    out.trim()
        .parse()
        .unwrap_or_else(|e| panic!("Prepared_stmt_count {out:?}: {e}"))
}

/// Under a server limit of 10 statements, prepare+close pairs work through
/// the proxy as they do directly, from one client and from several clients
/// on several backends at once: the proxy keeps at most its share of the
/// limit per backend.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepare_close_pairs_within_the_servers_statement_limit() {
    let db = MariaDb::start_with_args(&["--max-prepared-stmt-count=10"]);
    let p = Proxy::builder(&db).start().await;
    assert_eq!(p.shared.limits.max_prepared_stmt_count(), Some(10));
    let mut c = via(&p, true).await;
    let mut d = direct(&db, true).await;
    for i in 0..25 {
        for (conn, path) in [(&mut c, "via proxy"), (&mut d, "direct")] {
            let s = conn
                .prepare(&format!("SELECT {i} AS n"))
                .await
                .unwrap_or_else(|e| panic!("prepare #{} {path}: {e:?}", i + 1));
            let r = conn.execute(s.id, 0, &[], true).await;
            assert_eq!(text_or_binary_int(&r), i, "{path}");
            conn.close_stmt(s.id).await;
        }
    }

    // Four clients, each pinned to a backend of its own by a transaction.
    let mut clients = Vec::new();
    for _ in 0..4 {
        let mut k = via(&p, true).await;
        k.query_ok("BEGIN").await;
        clients.push(k);
    }
    for round in 0..5 {
        for (n, k) in clients.iter_mut().enumerate() {
            let s = k
                .prepare(&format!("SELECT {n} + {round} AS n"))
                .await
                .unwrap_or_else(|e| panic!("client {n}, round {round}: {e:?}"));
            k.close_stmt(s.id).await;
        }
    }
    for k in clients.iter_mut() {
        k.query_ok("COMMIT").await;
    }
    assert!(p.backends_owned() >= 4, "{} backends", p.backends_owned());
    // Room is left for direct clients.
    let held = prepared_stmt_count(&db);
    let mut e = direct(&db, true).await;
    for i in 0..(10 - held) {
        e.prepare(&format!("SELECT {i} + 1000"))
            .await
            .unwrap_or_else(|err| panic!("direct prepare with {held} held by the proxy: {err:?}"));
    }
}

fn text_or_binary_int(r: &Response) -> i64 {
    match binary_value(r) {
        Value::Int(v) => v,
        Value::UInt(v) => v as i64,
        other => panic!("not an integer: {other:?}"),
    }
}

/// Direct clients hold all of the server's statements: the proxy relays
/// the server's refusal. Then they hold half: the proxy's one backend (cap
/// 10, the whole limit) caches the statements its client closed until the
/// server refuses the next prepare with 1461; the proxy closes its idle
/// statements and retries, and its client never sees the refusal a direct
/// client would not get.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepare_refused_for_the_statement_limit_is_retried() {
    let db = MariaDb::start_with_args(&["--max-prepared-stmt-count=10"]);
    let p = Proxy::builder(&db).groups(1).max_backend(1).start().await;
    let mut hog = direct(&db, true).await;
    let mut held = Vec::new();
    for i in 0..10 {
        let s = hog
            .prepare(&format!("SELECT {i} AS held"))
            .await
            .expect("direct prepare");
        held.push(s.id);
    }
    let mut c = via(&p, true).await;
    let mut d = direct(&db, true).await;
    let ec = c.prepare("SELECT 'one too many'").await;
    let ed = d.prepare("SELECT 'one too many'").await;
    match (ec, ed) {
        (Err(ec), Err(ed)) => {
            assert_eq!(ec, ed);
            assert_eq!(ec.code, 1461);
        }
        (ec, ed) => panic!("server full: via {ec:?}, direct {ed:?}"),
    }
    for id in &held[..5] {
        hog.close_stmt(*id).await;
    }
    // COM_STMT_CLOSE has no reply: a query makes sure they are done.
    assert_eq!(hog.query_one("SELECT 'closed'").await, "closed");
    // Directly, eight prepare+close pairs work with five slots taken…
    for i in 0..8 {
        let s = d
            .prepare(&format!("SELECT {i} + 100 AS n"))
            .await
            .unwrap_or_else(|e| panic!("prepare #{} direct: {e:?}", i + 1));
        d.close_stmt(s.id).await;
    }
    // … and through the proxy, whose backend fills the other five slots
    // with the statements its client closed.
    for i in 0..8 {
        let s = c
            .prepare(&format!("SELECT {i} + 100 AS n"))
            .await
            .unwrap_or_else(|e| panic!("prepare #{} via proxy: {e:?}", i + 1));
        let r = c.execute(s.id, 0, &[], true).await;
        assert_eq!(text_or_binary_int(&r), i + 100);
        c.close_stmt(s.id).await;
    }
    assert!(prepared_stmt_count(&db) <= 10);
}

// ---------------------------------------------------------------------------
// Prepare errors byte for byte
// ---------------------------------------------------------------------------

/// A prepare refused on a latin1 connection: the server's message is
/// latin1 (`à` is one byte 0xE0); the proxy relays the very same bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepare_errors_are_relayed_byte_for_byte() {
    let db = MariaDb::shared();
    let p = Proxy::builder(db).start().await;
    for (names, table) in [
        ("latin1", b"SELECT * FROM t\xe0ble_gaps".to_vec()),
        ("utf8mb4", "SELECT * FROM tàble_gaps".as_bytes().to_vec()),
    ] {
        let mut c = via(&p, true).await;
        let mut d = direct(db, true).await;
        let mut replies = Vec::new();
        for conn in [&mut c, &mut d] {
            conn.query_ok(&format!("SET NAMES {names}")).await;
            let mut payload = vec![COM_STMT_PREPARE];
            payload.extend_from_slice(&table);
            replies.push(conn.command_reply(&payload, "prepare").await);
        }
        let (pc, dc) = (&replies[0], &replies[1]);
        assert_eq!(
            pc,
            dc,
            "{names}: via proxy {:?}, direct {:?}",
            pc.as_ref()
                .map(|r| String::from_utf8_lossy(&r.1).into_owned()),
            dc.as_ref()
                .map(|r| String::from_utf8_lossy(&r.1).into_owned())
        );
        let (_, bytes) = dc.as_ref().expect("the server answered");
        assert_eq!(bytes.first(), Some(&0xFF), "{names}");
        if names == "latin1" {
            assert!(
                bytes.windows(5).any(|w| w == b"t\xe0ble"),
                "the server's message is latin1: {bytes:02x?}"
            );
        }
        // The connection goes on.
        assert_eq!(c.query_one("SELECT 'ok'").await, "ok");
    }
}

// ---------------------------------------------------------------------------
// COM_REFRESH, COM_DEBUG
// ---------------------------------------------------------------------------

const COM_REFRESH: u8 = 0x07;
const COM_DEBUG: u8 = 0x0D;
const REFRESH_HOSTS: u8 = 0x08;
const REFRESH_STATUS: u8 = 0x10;

/// Forwarded and answered as the server answers: EOF/OK for a user with
/// the privileges, the server's error for one without; COM_REFRESH ends an
/// open transaction (implicit commit) and with it the pin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refresh_and_debug_are_forwarded() {
    let db = MariaDb::shared();
    db.sql(
        "CREATE USER IF NOT EXISTS 'plain'@'%' IDENTIFIED BY 'plainpw';
         GRANT SELECT ON test.* TO 'plain'@'%'",
    );
    let p = Proxy::builder(db)
        .with(|c| {
            c.users.push(UserConfig {
                name: "plain".into(),
                password: Some("plainpw".into()),
                ..Default::default()
            })
        })
        .start()
        .await;
    let t = table("refresh");
    db.sql(&format!(
        "DROP TABLE IF EXISTS {t}; CREATE TABLE {t} (a INT) ENGINE=InnoDB"
    ));
    for deprecate in [false, true] {
        let m = mode(deprecate);
        let mut c = via(&p, deprecate).await;
        let mut d = direct(db, deprecate).await;
        for cmd in [
            vec![COM_REFRESH, REFRESH_STATUS],
            vec![COM_REFRESH, REFRESH_HOSTS],
            vec![COM_DEBUG],
        ] {
            let rc = c.command_reply(&cmd, "command").await;
            let rd = d.command_reply(&cmd, "command").await;
            assert_eq!(rc, rd, "{m}: {cmd:02x?}");
            let (_, reply) = rc.expect("an answer");
            assert_ne!(reply.first(), Some(&0xFF), "{m}: {cmd:02x?}: {reply:02x?}");
        }

        for conn in [&mut c, &mut d] {
            conn.query_ok("BEGIN").await;
            conn.query_ok(&format!("INSERT INTO {t} VALUES (1)")).await;
        }
        assert!(pins(&p, &c).has(PinReason::Transaction), "{m}");
        let cmd = [COM_REFRESH, REFRESH_STATUS];
        let rc = c.command_reply(&cmd, "refresh in a transaction").await;
        let rd = d.command_reply(&cmd, "refresh in a transaction").await;
        assert_eq!(rc, rd, "{m}: refresh in a transaction");
        let ok = parse_ok(&rc.expect("an answer").1).expect("OK");
        assert_eq!(ok.status & STATUS_IN_TRANS, 0, "{m}: implicit commit");
        assert!(!pins(&p, &c).has(PinReason::Transaction), "{m}");
        assert_eq!(c.query_ok("ROLLBACK").await.status & STATUS_IN_TRANS, 0);

        // Without the privileges: the server's refusal, and on it goes.
        let mut pc =
            RawConn::connect(&p.addr.to_string(), "plain", "plainpw", None, deprecate).await;
        let mut pd = RawConn::connect(&db.addr(), "plain", "plainpw", None, deprecate).await;
        for cmd in [vec![COM_REFRESH, REFRESH_STATUS], vec![COM_DEBUG]] {
            let rc = pc.command_reply(&cmd, "unprivileged").await;
            let rd = pd.command_reply(&cmd, "unprivileged").await;
            assert_eq!(rc, rd, "{m}: {cmd:02x?} unprivileged");
            let (_, reply) = rc.expect("an answer");
            assert_eq!(parse_err(&reply).map(|e| e.code), Some(1227), "{m}");
        }
        assert_eq!(pc.query_one("SELECT 'usable'").await, "usable");
    }
    let n = db.sql(&format!("SELECT COUNT(*) FROM {t}"));
    assert_eq!(n.trim(), "4", "each implicit commit kept its row");
}

// ---------------------------------------------------------------------------
// COM_CHANGE_USER
// ---------------------------------------------------------------------------

/// A change of user with the wrong password: the server resets the session
/// (transaction, variables, temporary tables, the character set back to its
/// default) but keeps the user and the schema, answers after a second, and
/// refuses a fourth attempt with "Unknown command". The proxy does the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_change_user_leaves_the_connection_as_the_server_does() {
    let db = MariaDb::shared();
    let p = Proxy::builder(db).start().await;
    let t = table("change_user");
    db.sql(&format!(
        "DROP TABLE IF EXISTS {t}; CREATE TABLE {t} (a INT) ENGINE=InnoDB"
    ));
    let mut c = via(&p, true).await;
    let mut d = direct(db, true).await;
    for conn in [&mut c, &mut d] {
        for q in [
            "SET NAMES utf8mb4 COLLATE utf8mb4_unicode_ci".to_string(),
            "SET @x = 1".to_string(),
            "SET SESSION sql_mode = 'ANSI'".to_string(),
            "CREATE TEMPORARY TABLE tmp_cu (a INT)".to_string(),
            "BEGIN".to_string(),
            format!("INSERT INTO {t} VALUES (1)"),
            "USE mysql".to_string(),
        ] {
            conn.query_ok(&q).await;
        }
    }
    let probe = format!(
        "SELECT CURRENT_USER(), DATABASE(), @x, @@sql_mode, @@character_set_client, \
         @@collation_connection, @@autocommit, @@in_transaction, (SELECT COUNT(*) FROM {t})"
    );
    assert_eq!(c.query_rows(&probe).await, d.query_rows(&probe).await);

    async fn attempt(conn: &mut RawConn, password: &str) -> (ErrInfo, Duration) {
        let t0 = Instant::now();
        let (_, reply) = conn.change_user(APP_USER, password, Some("test")).await;
        let e = parse_err(&reply).unwrap_or_else(|| panic!("not refused: {reply:02x?}"));
        (e, t0.elapsed())
    }
    for n in 1..=5 {
        let password = if n == 5 { APP_PASSWORD } else { "wrong" };
        let ((ec, took), (ed, _)) =
            tokio::join!(attempt(&mut c, password), attempt(&mut d, password));
        assert_eq!(ec, ed, "attempt {n}");
        let want = if n <= 3 { 1045 } else { 1047 };
        assert_eq!(ec.code, want, "attempt {n}: {ec:?}");
        assert!(
            took >= Duration::from_millis(900),
            "attempt {n}: the server answers a failure after a second, the proxy after {took:?}"
        );
        let (pc, pd) = (c.query_rows(&probe).await, d.query_rows(&probe).await);
        assert_eq!(pc, pd, "after attempt {n}");
        assert_eq!(pc[0][1].as_deref(), Some("mysql"), "schema kept");
        assert_eq!(
            pc[0][4].as_deref(),
            Some("latin1"),
            "character set: the server's default (the session set utf8mb4)"
        );
        assert_eq!(pc[0][2], None, "user variable gone");
        let (tc, td) = (
            c.query("SELECT * FROM tmp_cu").await,
            d.query("SELECT * FROM tmp_cu").await,
        );
        same(&tc, &td, &format!("temporary table after attempt {n}"));
    }
    assert_eq!(c.query_one("SELECT 'usable'").await, "usable");
    let left = pins(&p, &c);
    for r in [PinReason::Transaction, PinReason::TemporaryTable] {
        assert!(!left.has(r), "{r:?} outlived the reset");
    }
}

/// A change of user naming a schema that does not exist fails as the
/// server fails it (1049, counted as a failed attempt, the previous user
/// and schema kept), and a successful change does not forget earlier
/// failures: bad, unknown schema, good, bad → a good fifth attempt is
/// refused (1047: three failures).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn change_user_to_a_missing_schema_and_the_failure_count() {
    let db = MariaDb::shared();
    let p = Proxy::builder(db).start().await;
    let mut got = Vec::new();
    for mut c in [via(&p, true).await, direct(db, true).await] {
        c.query_ok("USE mysql").await;
        let mut seen = Vec::new();
        for (password, schema) in [
            ("wrong", "test"),
            (APP_PASSWORD, "no_such_schema_cu"),
            (APP_PASSWORD, "test"),
            ("wrong", "test"),
            (APP_PASSWORD, "test"),
        ] {
            let (_, reply) = c.change_user(APP_USER, password, Some(schema)).await;
            let outcome = parse_err(&reply).map(|e| e.code).unwrap_or(0);
            let after = c.query_rows("SELECT CURRENT_USER(), DATABASE()").await;
            seen.push((outcome, after));
        }
        got.push(seen);
    }
    assert_eq!(got[0], got[1], "through the proxy, then direct");
    let codes: Vec<u16> = got[1].iter().map(|(c, _)| *c).collect();
    assert_eq!(codes, [1045, 1049, 0, 1045, 1047], "direct: {:?}", got[1]);
}

// ---------------------------------------------------------------------------
// max_allowed_packet
// ---------------------------------------------------------------------------

/// A COM_QUERY payload of exactly `size` bytes.
fn query_of_size(size: usize) -> Vec<u8> {
    let mut p = b"\x03SELECT LENGTH('".to_vec();
    let pad = size - p.len() - 2;
    p.resize(p.len() + pad, b'x');
    p.extend_from_slice(b"')");
    assert_eq!(p.len(), size);
    p
}

async fn read_one(r: &mut tokio::net::tcp::OwnedReadHalf) -> Option<(u8, Vec<u8>)> {
    let mut h = [0u8; 4];
    r.read_exact(&mut h).await.ok()?;
    let len = h[0] as usize | (h[1] as usize) << 8 | (h[2] as usize) << 16;
    let mut payload = vec![0u8; len];
    r.read_exact(&mut payload).await.ok()?;
    Some((h[3], payload))
}

/// Sends a command of `size` bytes while reading: the first reply (with its
/// sequence id) and whether the connection then closes.
async fn oversize(addr: &str, size: usize) -> (Option<(u8, Vec<u8>)>, bool) {
    let c = RawConn::connect(addr, APP_USER, APP_PASSWORD, Some("test"), true).await;
    let (mut r, mut w) = c.into_stream().into_split();
    let payload = query_of_size(size);
    let writer = tokio::spawn(async move {
        let mut rest = &payload[..];
        let mut seq = 0u8;
        loop {
            let n = rest.len().min(0xFF_FFFF);
            let mut b = Vec::with_capacity(n + 4);
            b.extend_from_slice(&[n as u8, (n >> 8) as u8, (n >> 16) as u8, seq]);
            b.extend_from_slice(&rest[..n]);
            if w.write_all(&b).await.is_err() {
                return;
            }
            seq = seq.wrapping_add(1);
            rest = &rest[n..];
            if n < 0xFF_FFFF {
                break;
            }
        }
        // Keep the write half open until the peer decides.
        tokio::time::sleep(Duration::from_secs(30)).await;
        drop(w);
    });
    let reply = timeout(WAIT, read_one(&mut r))
        .await
        .unwrap_or_else(|_| panic!("{addr}: no reply to a {size}-byte command"));
    let closed = match timeout(Duration::from_secs(10), read_one(&mut r)).await {
        Ok(None) => true,
        Ok(Some(p)) => panic!("{addr}: a second packet after the reply: {p:02x?}"),
        Err(_) => false,
    };
    writer.abort();
    (reply, closed)
}

/// When the proxy's idea of the server's `max_allowed_packet` is above
/// what a backend connection enforces (a `SET GLOBAL` made on the server
/// directly), the server's 1153 reaches the client and ends its session, as
/// it ends a direct connection, instead of leaving the session on a backend
/// the server closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_refusing_a_packet_ends_the_session() {
    let db = MariaDb::start_with_args(&["--max-allowed-packet=16M"]);
    let p = Proxy::builder(&db).start().await;
    let stmts = p.shared.limits.max_prepared_stmt_count().unwrap_or(16382);
    p.shared.limits.set(64 << 20, stmts);
    for round in 0..3 {
        let (reply, closed) = oversize(&p.addr.to_string(), 16 << 20).await;
        let (_, err) = reply.unwrap_or_else(|| panic!("round {round}: no reply"));
        assert_eq!(parse_err(&err).map(|e| e.code), Some(1153), "round {round}");
        assert!(closed, "round {round}: the session outlived its backend");
    }
}

/// With the server's `max_allowed_packet` at 16 MiB and the proxy's own
/// limit at 64 MiB: a command just below 16 MiB is served; one of 16 MiB
/// and one of 40 MiB get the server's ERR 1153 with its sequence id, and
/// the connection closes, exactly as directly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_allowed_packet_as_the_server_enforces_it() {
    let db = MariaDb::start_with_args(&["--max-allowed-packet=16M"]);
    let p = Proxy::builder(&db).start().await;
    assert_eq!(p.shared.limits.max_allowed_packet(), Some(16 << 20));
    assert_eq!(p.shared.config.load().frontend.max_allowed_packet, 64 << 20);
    let proxy_addr = p.addr.to_string();

    let largest = (16 << 20) - 1;
    let mut results = Vec::new();
    for addr in [proxy_addr.as_str(), db.addr().as_str()] {
        let mut c = RawConn::connect(addr, APP_USER, APP_PASSWORD, Some("test"), true).await;
        c.send_command(&query_of_size(largest)).await;
        results.push(c.read_response("largest query", false).await);
    }
    same(
        &results[0],
        &results[1],
        "a command of max_allowed_packet - 1 bytes",
    );
    assert!(matches!(results[0], Response::Rows(_)));

    for size in [16 << 20, 40 << 20] {
        let pr = oversize(&proxy_addr, size).await;
        let dr = oversize(&db.addr(), size).await;
        assert_eq!(
            pr.0,
            dr.0,
            "{size}-byte command: via proxy {:?}, direct {:?}",
            pr.0.as_ref()
                .map(|r| String::from_utf8_lossy(&r.1).into_owned()),
            dr.0.as_ref()
                .map(|r| String::from_utf8_lossy(&r.1).into_owned())
        );
        let (_, err) = dr.0.as_ref().expect("the server answered");
        assert_eq!(parse_err(err).map(|e| e.code), Some(1153), "{size}");
        assert_eq!(pr.1, dr.1, "{size}: connection closed afterwards");
        assert!(dr.1, "{size}: the server closes the connection");
    }
    // Long data above the server's limit, in packets below it: the server
    // refuses it at EXECUTE, and at every EXECUTE until COM_STMT_RESET.
    let mut c = via(&p, true).await;
    let mut d = direct(&db, true).await;
    let chunk = vec![b'y'; 9 << 20];
    let blob = [Param::LongData(TYPE_BLOB)];
    let mut answers = Vec::new();
    for conn in [&mut c, &mut d] {
        let s = conn.prepare("SELECT LENGTH(?)").await.expect("prepare");
        conn.send_long_data(s.id, 0, &chunk).await;
        conn.send_long_data(s.id, 0, &chunk).await;
        let first = conn.execute(s.id, 0, &blob, true).await;
        let second = conn.execute(s.id, 0, &blob, true).await;
        let reset = conn.reset(s.id).await;
        conn.send_long_data(s.id, 0, b"small").await;
        let after = conn.execute(s.id, 0, &blob, true).await;
        answers.push([first, second, reset, after]);
    }
    for (i, what) in ["EXECUTE", "EXECUTE again", "RESET", "EXECUTE after RESET"]
        .iter()
        .enumerate()
    {
        same(
            &answers[0][i],
            &answers[1][i],
            &format!("18 MiB of long data: {what}"),
        );
    }
    assert_eq!(answers[1][0].clone().err().code, 1105);
    assert!(!pins(&p, &c).any(), "{:?}", pins(&p, &c).primary());

    // The proxy goes on serving.
    assert_eq!(c.query_one("SELECT 'served'").await, "served");
}
