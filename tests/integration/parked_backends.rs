//! Parked backends (`pool::parking`): a backend whose session let go of it
//! while it held that session's leftovers (here: code a view ran, which the
//! proxy cannot see into while the catalog is off) goes back idle tagged for
//! that session. The session takes it back as it is — as on its own server
//! connection, where its session counters, diagnostics and locks stay —
//! while any other client gets it only after the cleanup, and a session
//! that goes quiet leaves a clean backend within a few seconds.
//!
//! With `pool.code_catalog_refresh_ms = 0` every statement naming a table
//! may have run such code, so every one of them gets the cleanup verdict.

use crate::common;

use std::time::{Duration, Instant};

use common::raw::{RawConn, Response};
use common::{MariaDb, Proxy};

/// A schema with a table and a view that takes the lock named as the
/// schema when read (each test its own: the server is shared).
fn schema(db: &MariaDb, name: &str) {
    db.sql(&format!(
        "DROP DATABASE IF EXISTS {name};\n\
         CREATE DATABASE {name};\n\
         CREATE TABLE {name}.t (a INT);\n\
         INSERT INTO {name}.t VALUES (1);\n\
         CREATE VIEW {name}.v_lock AS SELECT GET_LOCK('{name}', 0) AS g;"
    ));
}

async fn proxy(db: &MariaDb, backends: usize) -> Proxy {
    Proxy::builder(db)
        .groups(1)
        .max_backend(backends)
        .queue_timeout_ms(5000)
        .with(|c| c.pool.code_catalog_refresh_ms = 0)
        .start()
        .await
}

async fn client(p: &Proxy, schema: &str) -> RawConn {
    RawConn::connect(&p.addr.to_string(), "app", "secret", Some(schema), true).await
}

async fn value(c: &mut RawConn, sql: &str) -> Option<String> {
    match c.query(sql).await {
        Response::Rows(rs) => rs
            .text_rows()
            .first()
            .and_then(|r| r.first().cloned())
            .flatten(),
        other => panic!("{sql}: expected rows, got {other:?}"),
    }
}

/// The group's counters of parked backends: (taken back by their session,
/// taken by another).
async fn parked_counts(p: &Proxy) -> (u64, u64) {
    let (code, body) = p.http_get("/status").await;
    assert_eq!(code, 200);
    let v: serde_json::Value = serde_json::from_str(&body).expect("status JSON");
    let s = &v["groups"][0]["scheduler"];
    (
        s["parked_reclaimed"].as_u64().expect("parked_reclaimed"),
        s["parked_unparked"].as_u64().expect("parked_unparked"),
    )
}

/// mysqltest's `show` case (MDEV-31721) through a proxy whose catalog is
/// unknown: every statement naming a table had its backend reset after it,
/// so `SHOW STATUS` ran on a reset (or another) backend and said 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_counters_stay_with_the_session_through_a_cleanup_verdict() {
    let db = MariaDb::shared();
    schema(db, "pk_counters");
    let p = proxy(db, 2).await;
    let mut a = client(&p, "pk_counters").await;
    a.query_ok("FLUSH STATUS").await;
    value(&mut a, "SELECT COUNT(*) FROM t").await;
    assert!(matches!(
        a.query("SELECT * FROM t LIMIT 0").await,
        Response::Rows(_)
    ));
    let rows = a.query_rows("SHOW STATUS LIKE 'Empty_queries'").await;
    assert_eq!(
        rows,
        vec![vec![Some("Empty_queries".into()), Some("1".into())]],
        "direct, the empty SELECT counts once in the session's status"
    );
    let (reclaimed, _) = parked_counts(&p).await;
    assert!(
        reclaimed >= 2,
        "the session took its parked backend back: {reclaimed}"
    );
    a.quit().await;
}

/// The view's lock is the session's own until it ends, as direct; the
/// next client, on the only backend, gets it cleaned (the lock free) even
/// while the session that parked it is still connected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_client_gets_a_parked_backend_only_after_its_cleanup() {
    let db = MariaDb::shared();
    schema(db, "pk_other");
    let p = proxy(db, 1).await;
    let mut a = client(&p, "pk_other").await;
    let a_thread = value(&mut a, "SELECT CONNECTION_ID()").await;
    assert_eq!(
        value(&mut a, "SELECT g FROM v_lock").await.as_deref(),
        Some("1")
    );
    // Direct, A still holds its lock; through the proxy too (its backend
    // was parked for it and taken back as it was).
    assert_eq!(
        value(&mut a, "SELECT IS_USED_LOCK('pk_other') IS NOT NULL")
            .await
            .as_deref(),
        Some("1"),
        "A's own lock, on A's backend (A is {a_thread:?})"
    );
    let mut b = client(&p, "pk_other").await;
    assert_eq!(
        value(&mut b, "SELECT IS_FREE_LOCK('pk_other')")
            .await
            .as_deref(),
        Some("1"),
        "B got A's parked backend without its cleanup: A's lock reached B"
    );
    assert_eq!(
        value(&mut b, "SELECT @@session.sql_mode = @@global.sql_mode")
            .await
            .as_deref(),
        Some("1")
    );
    let (_, unparked) = parked_counts(&p).await;
    assert!(
        unparked >= 1,
        "B's lease took the parked backend: {unparked}"
    );
    b.quit().await;
    a.quit().await;
}

/// A session that goes quiet does not keep its leftovers on an idle
/// backend: within `PARK_HOLD` and a maintenance tick the backend is
/// cleaned (the lock its view took is free for a client of the server).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_session_leaves_a_clean_backend() {
    let db = MariaDb::shared();
    schema(db, "pk_quiet");
    let p = proxy(db, 1).await;
    let mut a = client(&p, "pk_quiet").await;
    assert_eq!(
        value(&mut a, "SELECT g FROM v_lock").await.as_deref(),
        Some("1")
    );
    let mut direct = RawConn::connect(&db.addr(), "app", "secret", None, true).await;
    assert_eq!(
        value(&mut direct, "SELECT IS_FREE_LOCK('pk_quiet')")
            .await
            .as_deref(),
        Some("0"),
        "parked right after the statement: the lock is still A's"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let free = value(&mut direct, "SELECT IS_FREE_LOCK('pk_quiet')").await;
        if free.as_deref() == Some("1") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the parked backend was never cleaned"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // A goes on, on a clean backend (its lock went with the cleanup).
    assert_eq!(
        value(&mut a, "SELECT IS_USED_LOCK('pk_quiet') IS NULL")
            .await
            .as_deref(),
        Some("1")
    );
    a.quit().await;
}

/// COM_RESET_CONNECTION starts the session over: what it parked before is
/// not taken back as it is (direct, the reset frees the lock).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_session_does_not_take_back_what_it_parked() {
    let db = MariaDb::shared();
    schema(db, "pk_reset");
    // Two backends: the statement after the reset may run on the other
    // one, so the parked backend must be clean before the reset's OK.
    let p = proxy(db, 2).await;
    let mut a = client(&p, "pk_reset").await;
    assert_eq!(
        value(&mut a, "SELECT g FROM v_lock").await.as_deref(),
        Some("1")
    );
    a.send_command(&[0x1f]).await;
    assert!(matches!(
        a.read_response("reset", false).await,
        Response::Ok(_)
    ));
    assert_eq!(
        value(&mut a, "SELECT IS_FREE_LOCK('pk_reset')")
            .await
            .as_deref(),
        Some("1"),
        "after COM_RESET_CONNECTION the session took back its parked backend as it was"
    );
    a.quit().await;
}

/// A client's KILL QUERY needs a helper connection: with the budget full
/// and the only idle backend parked for another session, the kill still
/// gets through. (The helper cleans the parked backend at once; in a quiet
/// test the sweep would also free it within 1–2 s, so this test does not
/// tell the two apart — under steady load a parked backend never ages
/// into the sweep, which is why the helper does it.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_gets_a_helper_when_only_a_parked_backend_is_idle() {
    let db = MariaDb::shared();
    schema(db, "pk_kill");
    let p = proxy(db, 2).await;
    let mut a = client(&p, "pk_kill").await;
    assert_eq!(
        value(&mut a, "SELECT g FROM v_lock").await.as_deref(),
        Some("1")
    );
    let mut sleeper = client(&p, "pk_kill").await;
    let id = value(&mut sleeper, "SELECT CONNECTION_ID()")
        .await
        .expect("id");
    let running = tokio::spawn(async move {
        let started = Instant::now();
        let r = sleeper.query("SELECT SLEEP(20)").await;
        (r, started.elapsed())
    });
    // The sleeper holds the second backend once its statement runs.
    let mut root = RawConn::connect(&db.addr(), "app", "secret", None, true).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while value(
        &mut root,
        "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO = 'SELECT SLEEP(20)'",
    )
    .await
    .as_deref()
        != Some("1")
    {
        assert!(Instant::now() < deadline, "the sleeper never ran");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A connected (its parked backend is the only idle one) and issues the
    // kill itself: its own statement cannot take its backend first, since
    // the proxy runs KILL over a helper.
    let r = a.query(&format!("KILL QUERY {id}")).await;
    assert!(matches!(r, Response::Ok(_)), "KILL QUERY: {r:?}");
    let (r, took) = running.await.expect("sleeper task");
    assert!(
        took < Duration::from_secs(15),
        "the sleep was not interrupted ({took:?}): {r:?}"
    );
    a.quit().await;
}

/// An error leaves the backend marked (its diagnostics area must be
/// cleaned before another client gets it). The session's later statements
/// that read a table clear the server's area, and the `LAST_INSERT_ID()`
/// read after a transaction that inserted asks `@@warning_count` with it:
/// an empty area takes the mark away, so the session's backend is not
/// parked at every transaction end for the rest of its life (before this,
/// one deadlock did that for good: a sysbench run at 2 × 1,000 rows parked
/// 27–46 % of its transactions after 8–11 errors).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_error_does_not_park_the_sessions_backend_for_good() {
    let db = MariaDb::shared();
    db.sql(
        "DROP DATABASE IF EXISTS pk_error;\n\
         CREATE DATABASE pk_error;\n\
         CREATE TABLE pk_error.u (id INT PRIMARY KEY AUTO_INCREMENT, v INT);\n\
         INSERT INTO pk_error.u VALUES (1, 1);",
    );
    // The catalog is read: statements naming a table are shareable.
    let p = Proxy::builder(db)
        .groups(1)
        .max_backend(2)
        .queue_timeout_ms(5000)
        .start()
        .await;
    let mut a = client(&p, "pk_error").await;
    match a.query("INSERT INTO u VALUES (1, 1)").await {
        Response::Err(e) => assert_eq!(e.code, 1062, "{e:?}"),
        other => panic!("expected a duplicate key, got {other:?}"),
    }
    // The client's own error stays readable, as direct.
    let rows = a.query_rows("SHOW ERRORS").await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    let (before, _) = parked_counts(&p).await;
    for id in 2..7 {
        a.query_ok("BEGIN").await;
        a.query_ok(&format!("INSERT INTO u VALUES ({id}, {id})"))
            .await;
        a.query_ok("COMMIT").await;
    }
    let (after, _) = parked_counts(&p).await;
    assert_eq!(
        after - before,
        0,
        "the session took back a backend it parked after a transaction with nothing to clean"
    );
    assert_eq!(
        value(&mut a, "SELECT COUNT(*) FROM u").await.as_deref(),
        Some("6")
    );
    a.quit().await;
}
