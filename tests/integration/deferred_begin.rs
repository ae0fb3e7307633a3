//! `pool.defer_begin`: a plain `BEGIN` from a session holding nothing is
//! answered by the proxy and reaches the server with the transaction's
//! first statement. The client sees the server's own bytes (compared with
//! a direct connection, statement by statement), the transaction is the
//! same transaction (atomic, rolled back, committed), and the only backend
//! is free for other clients between the `BEGIN` and the first statement.

use crate::common;

use common::raw::{
    BASE_CAPS, DEPRECATE_EOF, RawConn, Response, SESSION_TRACK, STATUS_IN_TRANS, parse_err,
    parse_ok, response_diff,
};
use common::{MariaDb, Proxy};

async fn login(addr: &str, caps: u32) -> RawConn {
    match RawConn::try_connect_with(addr, "app", "secret", Some("test"), caps, 45).await {
        Ok(c) => c,
        Err(e) => panic!("login to {addr}: {e:?}"),
    }
}

/// Statements answered with one packet (OK or ERR): compared byte for byte.
const SCRIPT: &[&str] = &[
    "BEGIN",
    "INSERT INTO db_t VALUES (1)",
    "COMMIT",
    // From here on a BEGIN may be deferred.
    "BEGIN",
    "INSERT INTO db_t VALUES (2)",
    "ROLLBACK",
    "begin work ;",
    "COMMIT",
    "START TRANSACTION",
    "SELECT @@in_transaction",
    "ROLLBACK",
    "INSERT INTO db_t VALUES (7), (8)",
    "BEGIN",
    "SELECT ROW_COUNT()",
    "ROLLBACK",
    "SET SESSION transaction_read_only = 1",
    "BEGIN",
    "SELECT @@in_transaction",
    "COMMIT",
    "BEGIN",
    "INSERT INTO db_t VALUES (3)",
    "ROLLBACK",
    "SET SESSION transaction_read_only = 0",
    "BEGIN",
    "INSERT INTO db_t VALUES (4)",
    "COMMIT",
    "SET autocommit = 0",
    "BEGIN",
    "INSERT INTO db_t VALUES (5)",
    "COMMIT",
    "BEGIN",
    "COMMIT",
    "SET autocommit = 1",
    "BEGIN",
    "BEGIN",
    "SELECT COUNT(*) FROM db_t",
    "COMMIT",
    // (A result set's classic EOF misses one flag in this mode: see
    // docs/compatibility.md, the client's own trackers.)
    "SET SESSION session_track_transaction_info = CHARACTERISTICS",
    "BEGIN",
    "DO 1",
    "COMMIT",
    "SET SESSION session_track_transaction_info = OFF",
    "BEGIN",
    "SELECT 1",
    "COMMIT",
];

/// Runs the script on one connection; each answer's raw first packet (an
/// OK / ERR) or its parsed result set.
type Answers = Vec<(String, Response, Option<Vec<u8>>)>;

async fn run_script(addr: &str, caps: u32) -> (Answers, Vec<Vec<Option<String>>>) {
    let mut c = login(addr, caps).await;
    c.query_ok("DELETE FROM db_t").await;
    let mut out = Vec::new();
    for sql in SCRIPT {
        if sql.starts_with("SELECT") {
            out.push((sql.to_string(), c.query(sql).await, None));
        } else {
            let raw = c.query_reply(sql).await;
            let r = match raw.as_deref() {
                Some(p @ [0xff, ..]) => Response::Err(parse_err(p).expect("an error")),
                Some(p) => Response::Ok(parse_ok(p).expect("an OK")),
                None => panic!("{sql}: connection closed"),
            };
            out.push((sql.to_string(), r, raw));
        }
    }
    let rows = c.query_rows("SELECT a FROM db_t ORDER BY a").await;
    c.quit().await;
    (out, rows)
}

async fn deferred(p: &Proxy) -> u64 {
    let m = p.http_get("/metrics").await.1;
    m.lines()
        .find(|l| l.starts_with("myplex_deferred_begins_total"))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0) as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deferred_begin_answers_what_the_server_answers() {
    let db = MariaDb::shared();
    db.sql("CREATE TABLE IF NOT EXISTS test.db_t (a INT PRIMARY KEY) ENGINE=InnoDB");
    let p = Proxy::builder(db).groups(1).max_backend(2).start().await;
    let via_addr = p.addr.to_string();
    let direct_addr = db.addr();
    let mut failures = Vec::new();
    for caps in [
        BASE_CAPS | DEPRECATE_EOF | SESSION_TRACK,
        BASE_CAPS | SESSION_TRACK,
        BASE_CAPS,
    ] {
        let before = deferred(&p).await;
        let (direct, direct_rows) = run_script(&direct_addr, caps).await;
        let (via, via_rows) = run_script(&via_addr, caps).await;
        assert_eq!(
            via_rows, direct_rows,
            "caps {caps:#x}: the table afterwards"
        );
        for ((sql, d, draw), (_, v, vraw)) in direct.iter().zip(&via) {
            let mut diff = response_diff(v, d);
            if draw != vraw {
                diff.push(format!("bytes via {vraw:02x?}, direct {draw:02x?}"));
            }
            if !diff.is_empty() {
                failures.push(format!("caps {caps:#x}, {sql:?}: {}", diff.join("; ")));
            }
        }
        // Deferred, not sent: the BEGINs that follow a forwarded one under
        // the same flags and settings, with the client's transaction
        // tracker off (the second, `begin work`, `START TRANSACTION`, the
        // one under autocommit = 0, the one after the tracker is off
        // again). A read-only BEGIN is not learnt here: the proxy's own
        // trackers on the backend report it as a state change.
        let n = deferred(&p).await - before;
        assert!(n >= 5, "caps {caps:#x}: only {n} BEGINs deferred");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A proxy with one backend and two clients A and B; A has run
/// `BEGIN; COMMIT` (which teaches the proxy its answer) and then `BEGIN`,
/// whose OK is returned.
async fn begin_beside_another(
    db: &MariaDb,
    defer: bool,
    queue_ms: u64,
) -> (Proxy, RawConn, RawConn, common::raw::OkInfo) {
    let p = Proxy::builder(db)
        .groups(1)
        .max_backend(1)
        .queue_timeout_ms(queue_ms)
        .with(|c| {
            c.pool.defer_begin = defer;
            c.pool.diagnostics_hold_ms = 100;
        })
        .start()
        .await;
    let addr = p.addr.to_string();
    let caps = BASE_CAPS | DEPRECATE_EOF;
    let mut a = login(&addr, caps).await;
    let b = login(&addr, caps).await;
    a.query_ok("BEGIN").await;
    a.query_ok("COMMIT").await;
    let ok = a.query_ok("BEGIN").await;
    (p, a, b, ok)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_only_backend_serves_others_between_begin_and_the_first_statement() {
    let db = MariaDb::shared();
    db.sql("CREATE TABLE IF NOT EXISTS test.db_free (a INT PRIMARY KEY) ENGINE=InnoDB");
    db.sql("DELETE FROM test.db_free");
    let (p, mut a, mut b, ok) = begin_beside_another(db, true, 2000).await;
    assert_ne!(
        ok.status & STATUS_IN_TRANS,
        0,
        "BEGIN answered in a transaction"
    );
    // A holds no backend: B's statements run on the only one at once
    // (before, B waited for A's transaction to end and timed out).
    assert_eq!(b.query_one("SELECT 1").await, "1");
    b.query_ok("INSERT INTO db_free VALUES (10)").await;
    // A's transaction starts with its first statement, on that backend.
    a.query_ok("INSERT INTO db_free VALUES (1)").await;
    assert_eq!(a.query_one("SELECT @@in_transaction").await, "1");
    // B waits for the backend now (A's transaction holds it): not asked.
    a.query_ok("ROLLBACK").await;
    assert_eq!(
        b.query_rows("SELECT a FROM db_free ORDER BY a").await,
        vec![vec![Some("10".to_string())]],
        "A's rolled-back row is not there"
    );
    a.query_ok("BEGIN").await;
    a.query_ok("INSERT INTO db_free VALUES (2)").await;
    a.query_ok("INSERT INTO db_free VALUES (3)").await;
    a.query_ok("COMMIT").await;
    assert_eq!(
        b.query_rows("SELECT a FROM db_free ORDER BY a").await,
        vec![
            vec![Some("2".to_string())],
            vec![Some("3".to_string())],
            vec![Some("10".to_string())]
        ]
    );
    assert!(deferred(&p).await >= 2);
    a.quit().await;
    b.quit().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_defer_begin_off_the_begin_holds_the_backend() {
    let db = MariaDb::shared();
    let (p, mut a, mut b, _) = begin_beside_another(db, false, 500).await;
    // A's transaction holds the only backend: B waits out its queue time.
    match b.query("SELECT 1").await {
        Response::Err(e) => assert_eq!(e.code, 1317, "{e:?}"),
        other => panic!("B ran while A held the backend: {other:?}"),
    }
    a.query_ok("COMMIT").await;
    assert_eq!(b.query_one("SELECT 1").await, "1");
    assert_eq!(deferred(&p).await, 0);
    a.quit().await;
    b.quit().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_first_statement_keeps_the_transaction_with_its_client() {
    let db = MariaDb::shared();
    db.sql("CREATE TABLE IF NOT EXISTS test.db_err (a INT PRIMARY KEY) ENGINE=InnoDB");
    db.sql("DELETE FROM test.db_err");
    db.sql("INSERT INTO test.db_err VALUES (1)");
    let (p, mut a, mut b, _) = begin_beside_another(db, true, 1500).await;
    // The deferred BEGIN runs, then its first statement fails: an ERR
    // carries no status flags, yet the transaction is open.
    match a.query("INSERT INTO db_err VALUES (1)").await {
        Response::Err(e) => assert_eq!(e.code, 1062, "{e:?}"),
        other => panic!("duplicate key accepted: {other:?}"),
    }
    // Past the diagnostics hold, A's backend still holds A's transaction:
    // B waits for it (and times out) instead of running inside it, and A's
    // transaction is not rolled back under it.
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    match b.query("SELECT @@in_transaction").await {
        Response::Err(e) => assert_eq!(e.code, 1317, "{e:?}"),
        other => panic!("B ran on A's backend: {other:?}"),
    }
    assert_eq!(a.query_one("SELECT @@in_transaction").await, "1");
    a.query_ok("INSERT INTO db_err VALUES (2)").await;
    assert_eq!(a.query_one("SELECT COUNT(*) FROM db_err").await, "2");
    a.query_ok("ROLLBACK").await;
    assert_eq!(b.query_one("SELECT COUNT(*) FROM db_err").await, "1");
    assert!(deferred(&p).await >= 1);
    a.quit().await;
    b.quit().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prepare_in_a_deferred_transaction_begins_it() {
    let db = MariaDb::shared();
    db.sql("CREATE TABLE IF NOT EXISTS test.db_prep (a INT PRIMARY KEY) ENGINE=InnoDB");
    db.sql("DELETE FROM test.db_prep");
    let (p, mut a, mut b, _) = begin_beside_another(db, true, 800).await;
    // The prepare is the transaction's first command: BEGIN goes to the
    // server with it and the backend stays with A, so the execute that
    // follows is part of a transaction in progress (not a new arrival
    // queued behind other clients' statements). B waits meanwhile.
    let ins = a
        .prepare("INSERT INTO db_prep VALUES (?)")
        .await
        .expect("prepare");
    match b.query("SELECT 1").await {
        Response::Err(e) => assert_eq!(e.code, 1317, "{e:?}"),
        other => panic!("B ran while A's transaction held the backend: {other:?}"),
    }
    let r = a
        .execute(ins.id, 0, &[common::raw::Param::Long(5)], true)
        .await;
    assert!(matches!(r, Response::Ok(_)), "{}", common::raw::brief(&r));
    assert_eq!(a.query_one("SELECT @@in_transaction").await, "1");
    a.query_ok("ROLLBACK").await;
    assert_eq!(
        b.query_one("SELECT COUNT(*) FROM db_prep").await,
        "0",
        "the insert was rolled back with A's transaction"
    );
    // A failing prepare still leaves the transaction open with A.
    a.query_ok("BEGIN").await;
    assert!(a.prepare("SELECT nosuchcol FROM db_prep").await.is_err());
    let r = a
        .execute(ins.id, 0, &[common::raw::Param::Long(6)], true)
        .await;
    assert!(matches!(r, Response::Ok(_)), "{}", common::raw::brief(&r));
    a.query_ok("COMMIT").await;
    assert_eq!(b.query_one("SELECT COUNT(*) FROM db_prep").await, "1");
    assert!(deferred(&p).await >= 2);
    a.quit().await;
    b.quit().await;
}

/// A prepared `BEGIN` / `COMMIT` / `ROLLBACK` cycle (sysbench prepares
/// them): each raw answer to the prepared `BEGIN`, and the table after.
async fn prepared_begin_cycle(addr: &str, caps: u32) -> (Vec<Vec<u8>>, Vec<Vec<Option<String>>>) {
    let mut c = login(addr, caps).await;
    c.query_ok("DELETE FROM db_pt").await;
    let begin = c.prepare("BEGIN").await.expect("prepare BEGIN").id;
    let commit = c.prepare("COMMIT").await.expect("prepare COMMIT").id;
    let other_begin = c.prepare(" begin ").await.expect("prepare begin").id;
    let rollback_stmt = c.prepare("ROLLBACK").await.expect("prepare ROLLBACK").id;
    let mut answers = Vec::new();
    for i in 0..4 {
        let b = if i == 2 { other_begin } else { begin };
        c.send_command(&common::raw::execute_payload(b, 0, &[], false))
            .await;
        answers.push(c.read("prepared BEGIN").await);
        c.query_ok(&format!("INSERT INTO db_pt VALUES ({i})")).await;
        assert_eq!(c.query_one("SELECT @@in_transaction").await, "1");
        let end = if i == 1 { rollback_stmt } else { commit };
        let r = c.execute(end, 0, &[], false).await;
        assert!(matches!(r, Response::Ok(_)), "{}", common::raw::brief(&r));
    }
    let rows = c.query_rows("SELECT a FROM db_pt ORDER BY a").await;
    c.quit().await;
    (answers, rows)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prepared_begin_is_deferred_with_the_servers_answer() {
    let db = MariaDb::shared();
    db.sql("CREATE TABLE IF NOT EXISTS test.db_pt (a INT PRIMARY KEY) ENGINE=InnoDB");
    let p = Proxy::builder(db).groups(1).max_backend(2).start().await;
    for caps in [BASE_CAPS | DEPRECATE_EOF | SESSION_TRACK, BASE_CAPS] {
        let before = deferred(&p).await;
        let (direct, direct_rows) = prepared_begin_cycle(&db.addr(), caps).await;
        let (via, via_rows) = prepared_begin_cycle(&p.addr.to_string(), caps).await;
        assert_eq!(via, direct, "caps {caps:#x}: the prepared BEGIN's answers");
        assert_eq!(
            via_rows, direct_rows,
            "caps {caps:#x}: the table afterwards"
        );
        assert_eq!(
            direct_rows,
            vec![
                vec![Some("0".to_string())],
                vec![Some("2".to_string())],
                vec![Some("3".to_string())]
            ],
            "the rolled-back insert is gone"
        );
        // The first prepared BEGIN went to the server; the other three
        // (one of them another statement of the same plain text) were
        // answered here.
        let n = deferred(&p).await - before;
        assert_eq!(n, 3, "caps {caps:#x}: prepared BEGINs deferred");
    }
}
