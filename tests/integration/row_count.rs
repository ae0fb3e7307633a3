//! `ROW_COUNT()` under transaction pooling (issue 16, item 13): a client
//! reads its own previous statement's count, never another client's, even
//! when another client ran statements on the same backend in between.
//!
//! Each case runs a script of two clients, A and B (same user, same
//! capabilities), through a proxy with one backend, and the same script on
//! two direct connections; every answer is compared byte for byte. A
//! statement reading the backend thread id (not compared) proves that B ran
//! on A's backend.

use crate::common;

use common::raw::{BASE_CAPS, DEPRECATE_EOF, MULTI_STATEMENTS, RawConn, Response, response_diff};
use common::{MariaDb, Proxy};

/// CLIENT_FOUND_ROWS: UPDATE reports the rows matched.
const FOUND_ROWS: u32 = 0x0000_0002;

/// A query that returns the server thread id of the connection running it
/// (CONNECTION_ID() is the proxy's id through myplex): it finds itself in
/// the process list by a marker no other query has (the tests in this file
/// run in parallel on one server).
fn thread_query() -> String {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!(
        "SELECT ID FROM information_schema.PROCESSLIST \
         WHERE INFO LIKE '%rc-self-marker-{n}-%' LIMIT 1"
    )
}

#[derive(Clone, Copy)]
enum Op {
    /// A text query (all its results).
    Q(&'static str),
    /// COM_STMT_PREPARE, COM_STMT_EXECUTE (no parameters), COM_STMT_CLOSE.
    P(&'static str),
    /// The backend thread id: not compared.
    Thread,
}

/// A step: which client (0 = A, 1 = B) and what it runs.
type Step = (usize, Op);

async fn login(addr: &str, caps: u32) -> RawConn {
    match RawConn::try_connect_with(addr, "app", "secret", Some("test"), caps, 45).await {
        Ok(c) => c,
        Err(e) => panic!("login to {addr}: {e:?}"),
    }
}

/// Runs `steps` on two connections to `addr`: each step's responses, and
/// the thread ids the `Thread` steps read.
async fn run(addr: &str, caps: u32, steps: &[Step]) -> (Vec<Vec<Response>>, Vec<String>) {
    let mut c = [login(addr, caps).await, login(addr, caps).await];
    let mut out = Vec::new();
    let mut threads = Vec::new();
    for (who, op) in steps {
        let conn = &mut c[*who];
        match op {
            Op::Q(sql) => out.push(conn.query_multi(sql).await),
            Op::P(sql) => {
                let p = conn.prepare(sql).await.expect("prepare");
                out.push(vec![conn.execute(p.id, 0, &[], false).await]);
                conn.close_stmt(p.id).await;
            }
            Op::Thread => {
                threads.push(conn.query_one(&thread_query()).await);
                out.push(Vec::new());
            }
        }
    }
    let [a, b] = c;
    a.quit().await;
    b.quit().await;
    (out, threads)
}

fn label(op: &Op) -> String {
    match op {
        Op::Q(s) => (*s).to_string(),
        Op::P(s) => format!("prepared {s}"),
        Op::Thread => "thread".into(),
    }
}

/// Runs `steps` direct and through `proxy`; the differences, and whether
/// every `Thread` step through the proxy read the same thread.
async fn compare(proxy: &str, direct: &str, caps: u32, steps: &[Step]) -> Vec<String> {
    let (d, _) = run(direct, caps, steps).await;
    let (v, threads) = run(proxy, caps, steps).await;
    let mut failures = Vec::new();
    if threads.windows(2).any(|w| w[0] != w[1]) {
        failures.push(format!("caps {caps:#x}: not one backend: {threads:?}"));
    }
    for (i, (via, direct)) in v.iter().zip(&d).enumerate() {
        let (who, op) = &steps[i];
        if via.len() != direct.len() {
            failures.push(format!(
                "caps {caps:#x}, step {i} ({}) {}: {} results via, {} direct",
                ["A", "B"][*who],
                label(op),
                via.len(),
                direct.len()
            ));
            continue;
        }
        for (x, y) in via.iter().zip(direct) {
            let diff = response_diff(x, y);
            if !diff.is_empty() {
                failures.push(format!(
                    "caps {caps:#x}, step {i} ({}) {}: {}",
                    ["A", "B"][*who],
                    label(op),
                    diff.join("; ")
                ));
            }
        }
    }
    failures
}

/// Each test's own table `table` (three rows), a log table, and a
/// procedure whose first statement reads ROW_COUNT().
fn setup(db: &MariaDb, table: &str) {
    db.sql(&format!(
        "CREATE TABLE IF NOT EXISTS test.{table} (id INT PRIMARY KEY, v INT); \
         DELETE FROM test.{table}; \
         INSERT INTO test.{table} VALUES (1,0),(2,0),(3,0); \
         CREATE TABLE IF NOT EXISTS test.rc_log (n BIGINT); \
         CREATE PROCEDURE IF NOT EXISTS test.rc_p() SELECT ROW_COUNT() AS seen",
    ));
}

async fn proxy(db: &MariaDb) -> Proxy {
    Proxy::builder(db)
        .groups(1)
        .max_backend(1)
        .queue_timeout_ms(5000)
        .start()
        .await
}

const A: usize = 0;
const B: usize = 1;

/// B's `SELECT ROW_COUNT()` right after A's UPDATE on the same backend:
/// B's own count (0 after its login, -1 after a SELECT), never A's 3.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_another_clients_count() {
    let db = MariaDb::shared();
    setup(db, "rc_t1");
    let p = proxy(db).await;
    let steps: &[Step] = &[
        (A, Op::Thread),
        (A, Op::Q("UPDATE rc_t1 SET v = v + 1")),
        (B, Op::Q("SELECT ROW_COUNT()")),
        (A, Op::Q("UPDATE rc_t1 SET v = v + 1")),
        (B, Op::Q("SELECT ROW_COUNT() AS n")),
        (A, Op::Q("UPDATE rc_t1 SET v = v + 1")),
        (B, Op::Q("SELECT ROW_COUNT() + 1, ROW_COUNT()")),
        // (A reset of the backend, after user variables or a CALL, may
        // replace it: the thread is compared before any.)
        (B, Op::Thread),
        (A, Op::Q("UPDATE rc_t1 SET v = v + 1")),
        (B, Op::Q("SET @b = ROW_COUNT()")),
        (B, Op::Q("SELECT @b")),
        (B, Op::Q("SET @b = NULL")),
        (A, Op::Q("UPDATE rc_t1 SET v = v + 1")),
        (B, Op::Q("SELECT ROW_COUNT() INTO @b2")),
        (B, Op::Q("SELECT @b2")),
        (B, Op::Q("SET @b2 = NULL")),
        (A, Op::Q("UPDATE rc_t1 SET v = v + 1")),
        (B, Op::Q("CALL rc_p()")),
        (A, Op::Q("UPDATE rc_t1 SET v = v + 1")),
        (B, Op::Q("SELECT ROW_COUNT()")),
    ];
    let mut failures = Vec::new();
    for caps in [BASE_CAPS | DEPRECATE_EOF, BASE_CAPS] {
        failures.extend(compare(&p.addr.to_string(), &db.addr(), caps, steps).await);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A reads its own count after its own statement even when B ran
/// statements on that backend in between: the plain and aliased forms
/// byte for byte as the server sends them, with and without
/// CLIENT_FOUND_ROWS, and the forms a literal can stand in for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn own_count_after_another_client_ran() {
    let db = MariaDb::shared();
    setup(db, "rc_t2");
    let p = proxy(db).await;
    let mut steps: Vec<Step> = vec![(A, Op::Thread)];
    let befores = [
        "UPDATE rc_t2 SET v = v + 1",
        "UPDATE rc_t2 SET v = v",
        "INSERT INTO rc_t2 VALUES (1,0),(9,0) ON DUPLICATE KEY UPDATE v = v + 1",
        "DELETE FROM rc_t2 WHERE id = 9",
        "SELECT id FROM rc_t2",
        "SET @x = NULL",
        "SELECT * FROM no_such_table",
        "UPDATE rc_t2 SET v = v + 1; UPDATE rc_t2 SET v = v + 1 WHERE id = 2",
    ];
    let probes = [
        "SELECT ROW_COUNT()",
        "SELECT ROW_COUNT() AS n",
        "select row_count()  `affected rows` ;",
        "SELECT Row_Count() x",
    ];
    for before in befores {
        for probe in probes {
            steps.push((A, Op::Q(before)));
            steps.push((B, Op::Q("UPDATE rc_t2 SET v = v + 1 WHERE id = 1")));
            steps.push((A, Op::Q(probe)));
        }
        if before == befores[0] {
            // Before any user variable has the backend reset (which may
            // replace it).
            steps.push((B, Op::Thread));
        }
        steps.push((A, Op::Q(before)));
        steps.push((B, Op::Q("UPDATE rc_t2 SET v = v + 1 WHERE id = 1")));
        steps.push((A, Op::Q("SET @a = ROW_COUNT()")));
        steps.push((A, Op::Q("SELECT @a")));
        steps.push((A, Op::Q("SET @a = NULL")));
        steps.push((A, Op::Q(before)));
        steps.push((B, Op::Q("SELECT 1")));
        steps.push((
            A,
            Op::Q("INSERT INTO rc_log VALUES (ROW_COUNT()), (ROW_COUNT())"),
        ));
        steps.push((A, Op::Q("SELECT n FROM rc_log; DELETE FROM rc_log")));
    }
    let mut failures = Vec::new();
    for caps in [
        BASE_CAPS | DEPRECATE_EOF | MULTI_STATEMENTS,
        BASE_CAPS | MULTI_STATEMENTS,
        BASE_CAPS | DEPRECATE_EOF | MULTI_STATEMENTS | FOUND_ROWS,
    ] {
        failures.extend(compare(&p.addr.to_string(), &db.addr(), caps, &steps).await);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The prepared-statement form: `SELECT ROW_COUNT()` with or without an
/// alias is the client's own count byte for byte; another expression gets
/// it when the proxy can set it on the backend (after a SELECT, a SET),
/// never another client's, and a clear refusal otherwise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_reads_never_another_clients_count() {
    let db = MariaDb::shared();
    setup(db, "rc_t3");
    let p = proxy(db).await;
    let steps: &[Step] = &[
        (A, Op::Thread),
        (B, Op::Q("SELECT 1")),
        (A, Op::Q("UPDATE rc_t3 SET v = v + 1")),
        (B, Op::P("SELECT ROW_COUNT()")),
        (B, Op::Q("DO 2")),
        (A, Op::Q("UPDATE rc_t3 SET v = v + 1")),
        (B, Op::P("SELECT ROW_COUNT() + 1")),
        (A, Op::Q("UPDATE rc_t3 SET v = v + 1")),
        (B, Op::Q("UPDATE rc_t3 SET v = v + 1 WHERE id = 1")),
        (A, Op::P("SELECT ROW_COUNT()")),
        (A, Op::Q("UPDATE rc_t3 SET v = v + 1")),
        (B, Op::Q("UPDATE rc_t3 SET v = v + 1 WHERE id = 1")),
        (A, Op::P("select row_count() AS `n`")),
        (B, Op::Thread),
    ];
    let mut failures = Vec::new();
    for caps in [BASE_CAPS | DEPRECATE_EOF, BASE_CAPS] {
        failures.extend(compare(&p.addr.to_string(), &db.addr(), caps, steps).await);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    // A's count 3 in an expression, with B's statement in between: the
    // proxy cannot set it on a shared backend.
    let caps = BASE_CAPS | DEPRECATE_EOF;
    let mut a = login(&p.addr.to_string(), caps).await;
    let mut b = login(&p.addr.to_string(), caps).await;
    a.query_ok("UPDATE rc_t3 SET v = v + 1").await;
    b.query_ok("UPDATE rc_t3 SET v = v + 1 WHERE id = 1").await;
    let st = a.prepare("SELECT ROW_COUNT() + 0").await.expect("prepare");
    let e = a.execute(st.id, 0, &[], false).await.err();
    assert_eq!(e.code, 1235, "{e:?}");
    assert!(e.message.contains("pool.mode"), "{e:?}");
    // Inside a transaction the backend is the client's own: exact.
    a.query_ok("BEGIN").await;
    a.query_ok("UPDATE rc_t3 SET v = v + 1").await;
    let r = a.execute(st.id, 0, &[], false).await.rows();
    assert_eq!(r.binary_rows(), vec![vec![common::raw::Value::Int(3)]]);
    a.query_ok("COMMIT").await;
    a.quit().await;
    b.quit().await;
}

/// A routine whose first statement reads ROW_COUNT() sees the caller's
/// count when the proxy can set it on the backend, and 0 — never another
/// client's — when it cannot (docs/compatibility.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_never_reads_another_clients_count() {
    let db = MariaDb::shared();
    setup(db, "rc_t4");
    let p = proxy(db).await;
    let caps = BASE_CAPS | DEPRECATE_EOF;
    let mut a = login(&p.addr.to_string(), caps).await;
    let mut b = login(&p.addr.to_string(), caps).await;
    let seen = |r: Vec<Response>| -> String {
        let Some(Response::Rows(rs)) = r.into_iter().next() else {
            panic!("result set expected");
        };
        rs.text_rows()[0][0].clone().expect("a value")
    };
    // A's count is 3 (UPDATE); B's previous statement left -1.
    b.query("SELECT 1").await;
    a.query_ok("UPDATE rc_t4 SET v = v + 1").await;
    assert_eq!(seen(b.query_multi("CALL rc_p()").await), "-1");
    // B's count is 1 (UPDATE); A's CALL after its SELECT sees -1.
    a.query("SELECT 1").await;
    b.query_ok("UPDATE rc_t4 SET v = v + 1 WHERE id = 1").await;
    assert_eq!(seen(a.query_multi("CALL rc_p()").await), "-1");
    // A's count is 3, which cannot be set on the backend: 0, not B's 1.
    // (The CALL above had the backend reset, which may replace it: the
    // thread is compared after it.)
    assert_eq!(
        a.query_one(&thread_query()).await,
        b.query_one(&thread_query()).await,
        "one backend"
    );
    a.query_ok("UPDATE rc_t4 SET v = v + 1").await;
    b.query_ok("UPDATE rc_t4 SET v = v + 1 WHERE id = 1").await;
    assert_eq!(seen(a.query_multi("CALL rc_p()").await), "0");
    a.quit().await;
    b.quit().await;
}

/// A view or a stored function that reads ROW_COUNT() / FOUND_ROWS() does
/// so without the statement text showing it: the code catalog knows them,
/// and a statement naming one gets the session's counts set on the backend
/// first (text and prepared), byte for byte as direct where the server lets
/// them be set, and a count of no one's (0) where it does not — never the
/// other client's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn views_and_functions_never_read_another_clients_count() {
    let db = MariaDb::shared();
    setup(db, "rc_t7");
    db.sql(
        "CREATE OR REPLACE VIEW test.rc_v AS SELECT ROW_COUNT() AS rc, FOUND_ROWS() AS fr; \
         CREATE FUNCTION IF NOT EXISTS test.rc_f() RETURNS BIGINT NO SQL RETURN ROW_COUNT()",
    );
    // Started after they exist: its first catalog reading knows them.
    let p = proxy(db).await;
    let steps: &[Step] = &[
        (A, Op::Thread),
        (B, Op::Q("SELECT 1")),
        (A, Op::Q("UPDATE rc_t7 SET v = v + 1")),
        (B, Op::Q("SELECT rc, fr FROM rc_v")),
        (A, Op::Q("SELECT id FROM rc_t7")),
        (A, Op::Q("UPDATE rc_t7 SET v = v + 1")),
        (B, Op::Q("SELECT rc_f()")),
        (A, Op::Q("UPDATE rc_t7 SET v = v + 1")),
        (B, Op::P("SELECT rc_f() AS seen")),
        (A, Op::Q("UPDATE rc_t7 SET v = v + 1")),
        (B, Op::P("SELECT rc, fr FROM test.rc_v")),
        (B, Op::Thread),
    ];
    let failures = compare(
        &p.addr.to_string(),
        &db.addr(),
        BASE_CAPS | DEPRECATE_EOF,
        steps,
    )
    .await;
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // B's own count is 1 (an UPDATE), which no statement can set without
    // changing data: B reads 0, not A's 3.
    let caps = BASE_CAPS | DEPRECATE_EOF;
    let mut a = login(&p.addr.to_string(), caps).await;
    let mut b = login(&p.addr.to_string(), caps).await;
    assert_eq!(
        a.query_one(&thread_query()).await,
        b.query_one(&thread_query()).await,
        "one backend"
    );
    b.query_ok("UPDATE rc_t7 SET v = v + 1 WHERE id = 1").await;
    a.query_ok("UPDATE rc_t7 SET v = v + 1").await;
    assert_eq!(b.query_one("SELECT rc_f()").await, "0");
    b.query_ok("UPDATE rc_t7 SET v = v + 1 WHERE id = 1").await;
    a.query("SELECT * FROM rc_t7").await;
    a.query_ok("UPDATE rc_t7 SET v = v + 1").await;
    // B's FOUND_ROWS() is 1 (its last SELECT), A's 3.
    assert_eq!(b.query_one("SELECT rc FROM rc_v").await, "0");
    assert_eq!(b.query_one("SELECT fr FROM rc_v").await, "1");
    a.quit().await;
    b.quit().await;
}

/// Session mode: every statement runs on the client's own connection, as
/// direct (a routine reads the caller's 3).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_mode_is_direct() {
    let db = MariaDb::shared();
    setup(db, "rc_t5");
    let p = Proxy::builder(db).groups(1).session_mode().start().await;
    let steps: &[Step] = &[
        (A, Op::Q("UPDATE rc_t5 SET v = v + 1")),
        (B, Op::Q("UPDATE rc_t5 SET v = v + 1 WHERE id = 1")),
        (A, Op::Q("CALL rc_p()")),
        (A, Op::Q("UPDATE rc_t5 SET v = v + 1")),
        (A, Op::P("SELECT ROW_COUNT()")),
        (A, Op::Q("UPDATE rc_t5 SET v = v + 1")),
        (A, Op::Q("SELECT ROW_COUNT() + 1")),
    ];
    let failures = compare(
        &p.addr.to_string(),
        &db.addr(),
        BASE_CAPS | DEPRECATE_EOF,
        steps,
    )
    .await;
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// FOUND_ROWS() (issue 16, item 13, the class beyond `SELECT FOUND_ROWS()`
/// alone): B's read right after A's SELECT on the same backend is B's own
/// (0 after its login, what its own SELECTs found), never A's — in an
/// expression, with FROM DUAL, as a prepared statement, or feeding data;
/// a value the proxy can neither write in nor set on the backend is
/// refused (1235, naming `pool.mode`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn found_rows_never_another_clients() {
    let db = MariaDb::shared();
    setup(db, "rc_t6");
    let p = proxy(db).await;
    // (A fresh connection's FOUND_ROWS() is whatever the server thread
    // last counted, direct too: B counts rows of its own first.)
    let steps: &[Step] = &[
        (A, Op::Thread),
        (B, Op::Q("SELECT id FROM rc_t6 WHERE id = 1")),
        (A, Op::Q("SELECT id FROM rc_t6")),
        (B, Op::Q("SELECT FOUND_ROWS() + 0")),
        (B, Op::Q("SELECT id FROM rc_t6 WHERE id = 0")),
        (A, Op::Q("SELECT id FROM rc_t6")),
        (B, Op::Q("SELECT FOUND_ROWS() FROM DUAL")),
        (B, Op::Q("SELECT id FROM rc_t6 WHERE id < 3")),
        (A, Op::Q("SELECT id FROM rc_t6")),
        (B, Op::P("SELECT FOUND_ROWS()")),
        (B, Op::Thread),
        (B, Op::Q("SELECT id FROM rc_t6 WHERE id = 1")),
        (A, Op::Q("SELECT id FROM rc_t6")),
        (B, Op::Q("SELECT FOUND_ROWS() + 0, ROW_COUNT()")),
        (B, Op::Q("SELECT id FROM rc_t6 WHERE id < 3")),
        (A, Op::Q("SELECT id FROM rc_t6")),
        (B, Op::P("SELECT FOUND_ROWS() AS n")),
        (B, Op::Q("SELECT id FROM rc_t6 WHERE id < 3")),
        (A, Op::Q("SELECT id FROM rc_t6")),
        (B, Op::Q("SET @f = FOUND_ROWS()")),
        (B, Op::Q("SELECT @f")),
        (B, Op::Q("SET @f = NULL")),
        (B, Op::Q("SELECT id FROM rc_t6 WHERE id = 0")),
        (A, Op::Q("SELECT id FROM rc_t6")),
        (B, Op::P("SELECT FOUND_ROWS() + 0")),
    ];
    let mut failures = Vec::new();
    for caps in [BASE_CAPS | DEPRECATE_EOF, BASE_CAPS] {
        failures.extend(compare(&p.addr.to_string(), &db.addr(), caps, steps).await);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));

    // B's own 2 in an expression, with A's SELECT in between: the proxy
    // cannot set 2 on a shared backend, and never answers A's 3.
    let caps = BASE_CAPS | DEPRECATE_EOF;
    let addr = p.addr.to_string();
    let mut a = login(&addr, caps).await;
    let mut b = login(&addr, caps).await;
    b.query_multi("SELECT id FROM rc_t6 WHERE id < 3").await;
    a.query_multi("SELECT id FROM rc_t6").await;
    let mut r = b.query_multi("SELECT FOUND_ROWS() + 0").await;
    assert_eq!(r.len(), 1, "{r:?}");
    let e = r.remove(0).err();
    assert_eq!(e.code, 1235, "{e:?}");
    assert!(e.message.contains("pool.mode"), "{e:?}");
    // Inside a transaction the backend is the client's own: exact.
    b.query_ok("BEGIN").await;
    b.query_multi("SELECT id FROM rc_t6 WHERE id < 3").await;
    let r = b.query_one("SELECT FOUND_ROWS() + 0").await;
    assert_eq!(r, "2");
    b.query_ok("COMMIT").await;
    a.quit().await;
    b.quit().await;

    // A later statement of a multi-statement reads the previous command's
    // count too, until a SELECT of the query sets it.
    let caps = BASE_CAPS | DEPRECATE_EOF | MULTI_STATEMENTS;
    let mut a = login(&addr, caps).await;
    let mut b = login(&addr, caps).await;
    b.query_multi("SELECT id FROM rc_t6 WHERE id = 1").await;
    a.query_multi("SELECT id FROM rc_t6").await;
    let r = b.query_multi("DO 0; SELECT FOUND_ROWS()").await;
    match r.last() {
        Some(Response::Rows(rows)) => {
            assert_eq!(rows.text_rows(), vec![vec![Some("1".to_string())]]);
        }
        other => panic!("{other:?}"),
    }
    b.query_multi("SELECT id FROM rc_t6 WHERE id < 3").await;
    a.query_multi("SELECT id FROM rc_t6").await;
    let mut r = b.query_multi("DO 0; SELECT FOUND_ROWS()").await;
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!(r.remove(0).err().code, 1235);
    a.quit().await;
    b.quit().await;
}
