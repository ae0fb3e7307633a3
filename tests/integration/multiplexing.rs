//! Multiplexing proofs against the real server: transaction isolation,
//! pins for unshareable state, session state replayed when a client moves
//! between backend connections, cleanup after a client vanishes
//! mid-transaction, and the queue timeout.

use crate::common;

use std::time::Duration;

use common::{MariaDb, Proxy};
use mysql_async::prelude::*;
use mysql_async::{Conn, Error};

async fn conn(p: &Proxy) -> Conn {
    Conn::from_url(p.app_url())
        .await
        .expect("connect via proxy")
}

fn scratch(db: &MariaDb, table: &str) -> String {
    let name = format!("test.{table}_{}", std::process::id());
    db.sql(&format!(
        "DROP TABLE IF EXISTS {name}; CREATE TABLE {name} (id INT PRIMARY KEY, v INT) ENGINE=InnoDB; INSERT INTO {name} VALUES (1, 0)"
    ));
    name
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions_stay_isolated_and_rollback_is_honoured() {
    let db = MariaDb::shared();
    let t = scratch(db, "iso");
    let p = Proxy::builder(db).groups(1).max_backend(3).start().await;
    let mut a = conn(&p).await;
    let mut b = conn(&p).await;
    a.query_drop("BEGIN").await.expect("begin");
    a.query_drop(format!("INSERT INTO {t} VALUES (2, 2)"))
        .await
        .expect("insert");
    let seen: Option<i64> = b
        .query_first(format!("SELECT COUNT(*) FROM {t}"))
        .await
        .expect("count");
    assert_eq!(seen, Some(1), "uncommitted row is invisible to others");
    let own: Option<i64> = a
        .query_first(format!("SELECT COUNT(*) FROM {t}"))
        .await
        .expect("count");
    assert_eq!(
        own,
        Some(2),
        "a transaction sees its own row (same backend)"
    );
    a.query_drop("ROLLBACK").await.expect("rollback");
    let after: Option<i64> = b
        .query_first(format!("SELECT COUNT(*) FROM {t}"))
        .await
        .expect("count");
    assert_eq!(after, Some(1), "rollback honoured");
    a.query_drop("BEGIN").await.expect("begin");
    a.query_drop(format!("INSERT INTO {t} VALUES (3, 3)"))
        .await
        .expect("insert");
    a.query_drop("COMMIT").await.expect("commit");
    let committed: Option<i64> = b
        .query_first(format!("SELECT COUNT(*) FROM {t}"))
        .await
        .expect("count");
    assert_eq!(committed, Some(2));
}

/// Pins A's current backend under B's open transaction, so A's next
/// statement must run on another backend connection.
async fn move_away(b: &mut Conn) {
    b.query_drop("BEGIN").await.expect("begin");
    b.query_drop("SELECT 1 FROM DUAL").await.expect("select");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_variables_survive_moving_between_backends() {
    let db = MariaDb::shared();
    let p = Proxy::builder(db).groups(1).max_backend(3).start().await;
    let mut a = conn(&p).await;
    let mut b = conn(&p).await;
    a.query_drop("SET SESSION sql_mode='ANSI_QUOTES,NO_ZERO_DATE', time_zone='+05:30'")
        .await
        .expect("set");
    a.query_drop("SET NAMES latin1").await.expect("set names");
    let before: Option<u32> = a
        .query_first("SELECT @@pseudo_thread_id")
        .await
        .expect("id");
    move_away(&mut b).await;
    let after: Option<u32> = a
        .query_first("SELECT @@pseudo_thread_id")
        .await
        .expect("id");
    assert_ne!(before, after, "the test must really move the client");
    let row: Option<(String, String, String, String)> = a
        .query_first("SELECT @@session.sql_mode, @@session.time_zone, @@session.character_set_client, @@session.collation_connection")
        .await
        .expect("read back");
    assert_eq!(
        row,
        Some((
            "ANSI_QUOTES,NO_ZERO_DATE".to_string(),
            "+05:30".to_string(),
            "latin1".to_string(),
            "latin1_swedish_ci".to_string()
        ))
    );
    b.query_drop("COMMIT").await.expect("commit");
    // And B, which now runs on A's old backend, does not inherit A's state.
    let bmode: Option<String> = b
        .query_first("SELECT @@session.time_zone")
        .await
        .expect("tz");
    assert_ne!(bmode.as_deref(), Some("+05:30"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schema_follows_the_client() {
    let db = MariaDb::shared();
    db.sql("CREATE DATABASE IF NOT EXISTS other_schema");
    let p = Proxy::builder(db).groups(1).max_backend(3).start().await;
    let mut a = conn(&p).await;
    let mut b = conn(&p).await;
    a.query_drop("USE other_schema").await.expect("use");
    move_away(&mut b).await;
    let s: Option<String> = a.query_first("SELECT DATABASE()").await.expect("db");
    assert_eq!(s.as_deref(), Some("other_schema"));
    b.query_drop("COMMIT").await.expect("commit");
    let s: Option<String> = b.query_first("SELECT DATABASE()").await.expect("db");
    assert_eq!(s.as_deref(), Some("test"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn user_variables_temp_tables_and_locks_pin() {
    let db = MariaDb::shared();
    let p = Proxy::builder(db).groups(1).max_backend(4).start().await;
    let mut a = conn(&p).await;
    let mut b = conn(&p).await;
    let mut c = conn(&p).await;
    a.query_drop("SET @x = 42").await.expect("set @x");
    a.query_drop("CREATE TEMPORARY TABLE tmp_pin (a INT)")
        .await
        .expect("temp");
    a.query_drop("INSERT INTO tmp_pin VALUES (7)")
        .await
        .expect("insert");
    let got: Option<i64> = a
        .query_first("SELECT GET_LOCK('myplex_test_lock', 5)")
        .await
        .expect("lock");
    assert_eq!(got, Some(1));
    for _ in 0..5 {
        move_away(&mut b).await;
        let _: Vec<i64> = c.query("SELECT 1").await.expect("other traffic");
        let x: Option<i64> = a.query_first("SELECT @x").await.expect("@x");
        assert_eq!(x, Some(42), "user variable kept");
        let v: Option<i64> = a
            .query_first("SELECT a FROM tmp_pin")
            .await
            .expect("temp table");
        assert_eq!(v, Some(7), "temporary table kept");
        b.query_drop("COMMIT").await.expect("commit");
    }
    let other: Option<i64> = c
        .query_first("SELECT GET_LOCK('myplex_test_lock', 0)")
        .await
        .expect("lock");
    assert_eq!(other, Some(0), "the lock is still held by A's backend");
    let released: Option<i64> = a
        .query_first("SELECT RELEASE_LOCK('myplex_test_lock')")
        .await
        .expect("release");
    assert_eq!(released, Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_killed_mid_transaction_leaves_no_lock_behind() {
    let db = MariaDb::shared();
    let t = scratch(db, "killed");
    let p = Proxy::builder(db).groups(1).max_backend(2).start().await;
    let mut a = conn(&p).await;
    a.query_drop("BEGIN").await.expect("begin");
    a.query_drop(format!("UPDATE {t} SET v = 99 WHERE id = 1"))
        .await
        .expect("update");
    // Vanish without COMMIT, ROLLBACK or COM_QUIT.
    drop(a);
    let mut b = conn(&p).await;
    b.query_drop("SET SESSION innodb_lock_wait_timeout = 10")
        .await
        .expect("set");
    b.query_drop(format!("UPDATE {t} SET v = 1 WHERE id = 1"))
        .await
        .expect("the row lock was released");
    let v: Option<i64> = b
        .query_first(format!("SELECT v FROM {t} WHERE id = 1"))
        .await
        .expect("v");
    assert_eq!(
        v,
        Some(1),
        "the abandoned update was rolled back, ours applied"
    );
    let mut open = String::new();
    for _ in 0..50 {
        open = db.sql("SELECT COUNT(*) FROM information_schema.innodb_trx");
        if open.trim() == "0" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(open.trim(), "0", "no transaction left open on the server");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_timeout_is_a_clear_error_and_the_pool_recovers() {
    let db = MariaDb::shared();
    let p = Proxy::builder(db)
        .groups(1)
        .max_backend(1)
        .oversubscribe(0)
        .queue_timeout_ms(400)
        .start()
        .await;
    let mut a = conn(&p).await;
    let mut b = conn(&p).await;
    a.query_drop("BEGIN").await.expect("begin");
    a.query_drop("SELECT 1 FROM DUAL")
        .await
        .expect("pins the only backend");
    match b.query_drop("SELECT 2").await {
        Err(Error::Server(e)) => {
            assert_eq!(e.code, 1317);
            assert!(e.message.contains("waited"), "{}", e.message);
            assert!(e.message.contains("queue_timeout_ms"), "{}", e.message);
        }
        other => panic!("expected a queue timeout, got {other:?}"),
    }
    a.query_drop("COMMIT").await.expect("commit");
    let v: Option<i64> = b.query_first("SELECT 3").await.expect("works again");
    assert_eq!(v, Some(3));
    assert_eq!(p.backends_owned(), 1);
}

/// The in-flight limit holds a statement back, not the backend budget: half
/// way to its queue timeout it runs past the limit on a free backend
/// instead of failing with 1317 while the server keeps answering.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_limit_alone_never_times_a_statement_out() {
    let db = MariaDb::shared();
    let p = Proxy::builder(db)
        .groups(1)
        .max_backend(3)
        .oversubscribe(0)
        .queue_timeout_ms(1_000)
        .with(|c| {
            c.pool.inflight = myplex::config::InflightMode::Fixed;
            c.pool.stall_limit_ms = 200;
        })
        .start()
        .await;
    let (mut a, mut b, mut c) = (conn(&p).await, conn(&p).await, conn(&p).await);
    // C's transaction keeps statements moving (a transaction in progress
    // runs past the limit), so no stall tick adds a slot.
    c.query_drop("BEGIN").await.expect("begin");
    c.query_drop("SELECT 1").await.expect("pins a backend");
    let stop = std::time::Instant::now() + Duration::from_millis(1_800);
    let busy = tokio::spawn(async move {
        while std::time::Instant::now() < stop {
            c.query_drop("SELECT 1").await.expect("in the transaction");
        }
        c.query_drop("COMMIT").await.expect("commit");
    });
    // A holds the only place under the limit for 3 s.
    let slow = tokio::spawn(async move {
        let v: Option<i64> = a.query_first("SELECT SLEEP(3)").await.expect("sleep");
        v
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = std::time::Instant::now();
    let v: Option<i64> = b
        .query_first("SELECT 2")
        .await
        .expect("admitted past the limit, not timed out");
    assert_eq!(v, Some(2));
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(450) && waited < Duration::from_millis(1_000),
        "waited {waited:?}: queued under the limit, then admitted half way to its timeout"
    );
    busy.await.expect("join");
    assert_eq!(slow.await.expect("join"), Some(0));
    let (_, status) = p.http_get("/status").await;
    let v: serde_json::Value = serde_json::from_str(&status).expect("json");
    let overdue = v["groups"][0]["scheduler"]["overdue"].as_u64();
    assert_eq!(overdue, Some(1), "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_clients_share_few_backends() {
    let db = MariaDb::shared();
    let p = Proxy::builder(db).groups(2).max_backend(4).start().await;
    let mut conns = Vec::new();
    for _ in 0..50 {
        conns.push(conn(&p).await);
    }
    let mut tasks = Vec::new();
    for mut c in conns {
        tasks.push(tokio::spawn(async move {
            for i in 0..20 {
                let v: Option<i64> = c.query_first(format!("SELECT {i}")).await.expect("select");
                assert_eq!(v, Some(i));
            }
            c
        }));
    }
    for t in tasks {
        t.await.expect("task");
    }
    assert!(p.backends_owned() <= 4, "owned {}", p.backends_owned());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_hangs_up_mid_query_has_its_query_killed() {
    let db = MariaDb::shared();
    let p = Proxy::builder(db).groups(1).max_backend(2).start().await;
    let mut a = conn(&p).await;
    let marker = format!("abandoned_{}", std::process::id());
    let sql = format!("SELECT SLEEP(30) AS {marker}");
    let running = |db: &MariaDb, marker: &str| {
        db.sql(&format!(
            "SELECT COUNT(*) FROM information_schema.processlist WHERE info LIKE '%{marker}%' AND info NOT LIKE '%processlist%'"
        ))
        .trim()
        .to_string()
    };
    let q = tokio::spawn(async move {
        let _ = a.query_drop(sql).await;
    });
    let mut seen = false;
    for _ in 0..50 {
        if running(db, &marker) == "1" {
            seen = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(seen, "the query reached the server");
    // Hang up: abort the task owning the connection (its socket closes).
    q.abort();
    let _ = q.await;
    let mut gone = false;
    for _ in 0..100 {
        if running(db, &marker) == "0" {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(gone, "the abandoned statement was stopped on the server");
}
