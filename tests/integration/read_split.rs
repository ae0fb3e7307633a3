//! The read/write split (`[routing] read_write_split`, design §12) against
//! real GTID replication: plain reads outside transactions go to the
//! replica, everything else to the primary; a session's reads after its
//! own write see that write (read-your-writes, `MASTER_GTID_WAIT` on the
//! replica, else the primary); a replica too far behind leaves the read
//! set and comes back; a replica dying under a read fails that read only.
//!
//! A replica is made stale on purpose by holding a table lock on it that
//! the applier needs (`blocker`): replication applies in order, so every
//! later event waits too, while the tables the tests read stay free.

use crate::common;

use std::time::{Duration, Instant};

use crate::replication::{Rig, builder_for, rig, server};
use crate::servers::{status, until};
use common::Proxy;
use common::mariadb::ROOT_PASSWORD;
use mysql_async::Conn;
use mysql_async::prelude::*;

/// A proxy with the split on, a replica taking reads while at most
/// `max_lag_s` behind.
async fn split_proxy(rig: &Rig, max_lag_s: u64) -> Proxy {
    builder_for(rig, crate::replication::WRITER, 5000)
        .with(move |c| {
            c.routing.read_write_split = true;
            c.routing.max_replication_lag_s = max_lag_s;
            c.routing.causal_wait_ms = 200;
        })
        .start()
        .await
}

/// The tables: `rs_t` read by the tests, `blocker` the applier is stopped
/// on.
fn tables(rig: &Rig) {
    rig.primary.sql(
        "CREATE TABLE test.rs_t (id INT PRIMARY KEY, v INT);
         CREATE TABLE test.blocker (id INT);",
    );
    rig.caught_up();
}

/// Reads routed to `db` as a replica so far, as `/status` says.
async fn reads_on(p: &Proxy, db: &common::MariaDb) -> u64 {
    server(&status(p).await["servers"], db)["reads"]
        .as_u64()
        .unwrap_or(0)
}

/// Waits until the replica takes reads: replicating, checked.
async fn replica_ready(p: &Proxy, rig: &Rig) {
    until(p, "the replica replicating", |s| {
        let r = &server(s, &rig.replica)["replication"]["replica"];
        s["primary"] == rig.primary.addr().as_str()
            && r["sql_running"] == "Yes"
            && r["io_running"] == "Yes"
            && r["lag_s"].as_u64().is_some()
    })
    .await;
}

/// Holds `blocker` on the replica (the applier stops at the next event on
/// it), then writes that event on the primary: from here on the replica
/// applies nothing until the returned connection unlocks or goes away.
async fn stall_replica(rig: &Rig) -> Conn {
    let mut hold = Conn::from_url(rig.replica.url("root", ROOT_PASSWORD, "test"))
        .await
        .expect("connect to the replica");
    hold.query_drop("LOCK TABLES blocker READ")
        .await
        .expect("lock on the replica");
    rig.primary.sql("INSERT INTO test.blocker VALUES (1)");
    hold
}

/// Reads row 1 on `c` (which every server has: the answer is 1 wherever
/// it is read) until one is the replica's (more than `before` there), 30 s
/// at most.
async fn reads_again(p: &Proxy, rig: &Rig, c: &mut Conn, before: u64) {
    let t0 = Instant::now();
    loop {
        assert_eq!(count(c, "SELECT COUNT(*) FROM rs_t WHERE id = 1").await, 1);
        if reads_on(p, &rig.replica).await > before {
            return;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the replica never took reads again: {:#}",
            status(p).await
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn count(c: &mut Conn, sql: &str) -> i64 {
    c.query_first::<i64, _>(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .unwrap_or(-1)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_go_to_the_replica_writes_and_locking_reads_to_the_primary() {
    let rig = rig(false, "SLAVE MONITOR");
    tables(&rig);
    let p = split_proxy(&rig, 3600).await;
    replica_ready(&p, &rig).await;
    let hold = stall_replica(&rig).await;
    // Written on the primary behind the proxy's back: the replica cannot
    // have it, so whoever sees it read the primary.
    rig.primary.sql("INSERT INTO test.rs_t VALUES (1, 1)");
    let on_replica = reads_on(&p, &rig.replica).await;

    let mut c = Conn::from_url(p.app_url()).await.expect("connect");
    let q = "SELECT COUNT(*) FROM rs_t WHERE id = 1";
    assert_eq!(count(&mut c, q).await, 0, "a plain read is the replica's");
    assert_eq!(
        reads_on(&p, &rig.replica).await,
        on_replica + 1,
        "counted on the replica"
    );
    let prepared: Option<i64> = c
        .exec_first("SELECT COUNT(*) FROM rs_t WHERE id = ?", (1,))
        .await
        .expect("prepared read");
    assert_eq!(prepared, Some(0), "a prepared read is the replica's too");
    for primary in [
        "/* myplex:primary */ SELECT COUNT(*) FROM rs_t WHERE id = 1",
        "SELECT COUNT(*) FROM rs_t WHERE id = 1 FOR UPDATE",
        "SELECT COUNT(*) FROM rs_t WHERE id = 1 LOCK IN SHARE MODE",
        "SELECT COUNT(*) FROM rs_t WHERE id = 1 AND @@server_id > 0",
    ] {
        assert_eq!(count(&mut c, primary).await, 1, "{primary}");
    }
    // Inside a transaction everything is the primary's, reads included.
    c.query_drop("START TRANSACTION").await.expect("begin");
    assert_eq!(count(&mut c, q).await, 1, "a read in a transaction");
    c.query_drop("COMMIT").await.expect("commit");
    // Autocommit off: every statement may open one.
    c.query_drop("SET autocommit = 0")
        .await
        .expect("autocommit off");
    assert_eq!(count(&mut c, q).await, 1, "a read with autocommit off");
    c.query_drop("ROLLBACK; SET autocommit = 1")
        .await
        .expect("autocommit on");
    // A user variable pins the session: its reads stay on its backend.
    c.query_drop("SET @pin = 1").await.expect("set");
    assert_eq!(count(&mut c, q).await, 1, "a pinned session's read");
    c.query_drop("SET @pin = NULL").await.expect("unset");

    // A read that leaves a warning list holds the replica's backend for
    // SHOW WARNINGS, as direct; the write after it goes to the primary.
    let mut w = Conn::from_url(p.app_url()).await.expect("connect");
    let before_warning = reads_on(&p, &rig.replica).await;
    let r: Option<Option<i64>> = w
        .query_first("SELECT 1 / 0")
        .await
        .expect("read with a warning");
    assert_eq!(r, Some(None), "NULL, with a warning");
    assert_eq!(reads_on(&p, &rig.replica).await, before_warning + 1);
    let warnings: Vec<(String, u32, String)> = w.query("SHOW WARNINGS").await.expect("warnings");
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(
        warnings[0].1, 1365,
        "division by 0, read where it was raised"
    );
    w.query_drop("INSERT INTO rs_t VALUES (2, 2)")
        .await
        .expect("the write after it goes to the primary");
    assert_eq!(
        rig.primary
            .sql("SELECT COUNT(*) FROM test.rs_t WHERE id = 2")
            .trim(),
        "1"
    );

    // Read-your-writes: this session's write is not on the stalled
    // replica, so its read goes to the primary after the bounded wait;
    // another session, which wrote nothing, still reads the replica.
    c.query_drop("INSERT INTO rs_t VALUES (3, 3)")
        .await
        .expect("insert");
    let waits_before = status(&p).await;
    let t0 = Instant::now();
    assert_eq!(
        count(&mut c, "SELECT COUNT(*) FROM rs_t WHERE id = 3").await,
        1,
        "a session reads its own write"
    );
    let took = t0.elapsed();
    let s = status(&p).await;
    let n = |s: &serde_json::Value, k: &str| s["routing"][k].as_u64().unwrap_or(0);
    assert_eq!(
        n(&s, "causal_wait_timeouts"),
        n(&waits_before, "causal_wait_timeouts") + 1,
        "{s:#}"
    );
    assert!(
        took >= Duration::from_millis(200),
        "the wait is routing.causal_wait_ms: {took:?}"
    );
    assert!(
        s["routing"]["kept_on_primary"]["causal"].as_u64() >= Some(1),
        "{s:#}"
    );
    let mut other = Conn::from_url(p.app_url()).await.expect("connect");
    assert_eq!(
        count(&mut other, "SELECT COUNT(*) FROM rs_t WHERE id = 3").await,
        0,
        "another session's reads are not held back by this one's write"
    );

    // The replica catches up: the wait succeeds and the read is the
    // replica's, with the write in it.
    drop(hold);
    rig.caught_up();
    let before = reads_on(&p, &rig.replica).await;
    c.query_drop("INSERT INTO rs_t VALUES (4, 4)")
        .await
        .expect("insert");
    let mut seen = false;
    for _ in 0..20 {
        assert_eq!(
            count(&mut c, "SELECT COUNT(*) FROM rs_t WHERE id = 4").await,
            1,
            "a session reads its own write"
        );
        if reads_on(&p, &rig.replica).await > before {
            seen = true;
            break;
        }
    }
    assert!(
        seen,
        "no read after the write was the replica's: {:#}",
        status(&p).await
    );
    let (_, metrics) = p.http_get("/metrics").await;
    for name in [
        "myplex_server_reads_total{",
        "myplex_reads_kept_on_primary_total{reason=\"causal\"}",
        "myplex_causal_waits_total",
        "myplex_server_replica_backends{",
    ] {
        assert!(metrics.contains(name), "{name} missing");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_too_far_behind_leaves_the_read_set_and_comes_back() {
    let rig = rig(false, "SLAVE MONITOR");
    tables(&rig);
    let p = split_proxy(&rig, 1).await;
    replica_ready(&p, &rig).await;
    let hold = stall_replica(&rig).await;
    rig.primary.sql("INSERT INTO test.rs_t VALUES (1, 1)");
    until(&p, "the replica more than 1 s behind", |s| {
        server(s, &rig.replica)["replication"]["replica"]["lag_s"].as_u64() >= Some(2)
    })
    .await;
    let before = reads_on(&p, &rig.replica).await;
    let mut c = Conn::from_url(p.app_url()).await.expect("connect");
    let q = "SELECT COUNT(*) FROM rs_t WHERE id = 1";
    assert_eq!(count(&mut c, q).await, 1, "read on the primary");
    assert_eq!(reads_on(&p, &rig.replica).await, before);
    let s = status(&p).await;
    assert!(
        s["routing"]["kept_on_primary"]["no_replica"].as_u64() >= Some(1),
        "{s:#}"
    );
    // Caught up: reads go to it again.
    drop(hold);
    rig.caught_up();
    until(&p, "the replica caught up", |s| {
        server(s, &rig.replica)["replication"]["replica"]["lag_s"].as_u64() == Some(0)
    })
    .await;
    reads_again(&p, &rig, &mut c, before).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_dying_under_a_read_fails_that_read_only() {
    let rig = rig(false, "SLAVE MONITOR");
    tables(&rig);
    rig.primary.sql("INSERT INTO test.rs_t VALUES (1, 1)");
    rig.caught_up();
    let p = split_proxy(&rig, 3600).await;
    replica_ready(&p, &rig).await;
    let mut c = Conn::from_url(p.app_url()).await.expect("connect");
    let before = reads_on(&p, &rig.replica).await;
    let slow = tokio::spawn(async move {
        let r = c
            .query_first::<(i64, i64), _>("SELECT SLEEP(5), COUNT(*) FROM rs_t")
            .await;
        (c, r)
    });
    // The read is on the replica, then the replica dies.
    let t0 = Instant::now();
    while reads_on(&p, &rig.replica).await == before {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the read never reached the replica"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    rig.replica.kill9();
    let (mut c, r) = slow.await.expect("join");
    let e = r.expect_err("the read on the dead replica fails");
    assert!(e.to_string().contains("lost connection"), "{e}");
    // The session goes on; its reads are the primary's now.
    assert_eq!(
        count(&mut c, "SELECT COUNT(*) FROM rs_t WHERE id = 1").await,
        1
    );
    let mut fresh = Conn::from_url(p.app_url()).await.expect("connect");
    assert_eq!(
        count(&mut fresh, "SELECT COUNT(*) FROM rs_t WHERE id = 1").await,
        1
    );
    let (code, _) = p.http_get("/readyz").await;
    assert_eq!(code, 200, "a replica's death is not the proxy's");
    // It comes back: it takes reads again.
    let before = reads_on(&p, &rig.replica).await;
    rig.replica.restart();
    reads_again(&p, &rig, &mut fresh, before).await;
}

/// Many sessions write a row each and read it back at once, while the
/// replica applies concurrently: none ever misses its own write, and some
/// reads are the replica's (the wait, not the primary, served them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_session_misses_its_own_write() {
    let rig = rig(false, "SLAVE MONITOR");
    tables(&rig);
    let p = split_proxy(&rig, 3600).await;
    replica_ready(&p, &rig).await;
    let before = reads_on(&p, &rig.replica).await;
    let mut tasks = Vec::new();
    for t in 0..8i64 {
        let url = p.app_url();
        tasks.push(tokio::spawn(async move {
            let mut c = Conn::from_url(url).await.expect("connect");
            let mut stale = 0;
            for i in 0..60i64 {
                let id = 1000 + t * 1000 + i;
                c.exec_drop("INSERT INTO rs_t VALUES (?, ?)", (id, i))
                    .await
                    .expect("insert");
                let v: Option<i64> = c
                    .exec_first("SELECT v FROM rs_t WHERE id = ?", (id,))
                    .await
                    .expect("read back");
                if v != Some(i) {
                    stale += 1;
                }
                let text: Option<i64> = c
                    .query_first(format!("SELECT v FROM rs_t WHERE id = {id}"))
                    .await
                    .expect("read back as text");
                if text != Some(i) {
                    stale += 1;
                }
            }
            stale
        }));
    }
    let mut stale = 0;
    for t in tasks {
        stale += t.await.expect("join");
    }
    assert_eq!(stale, 0, "reads that missed the session's own write");
    let s = status(&p).await;
    assert!(
        reads_on(&p, &rig.replica).await > before,
        "no read was the replica's: {s:#}"
    );
    assert!(s["routing"]["causal_waits"].as_u64() >= Some(1), "{s:#}");
}

/// A write that fails part-way on a non-transactional table keeps what it
/// wrote, and no GTID is reported with the error: the session's reads stay
/// on the primary until a check has read the primary's position after the
/// write, which then stands for it (waited for on the replica as a GTID).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_that_fails_part_way_is_read_back() {
    let rig = rig(false, "SLAVE MONITOR");
    tables(&rig);
    rig.primary
        .sql("CREATE TABLE test.rs_my (id INT PRIMARY KEY) ENGINE = MyISAM");
    rig.caught_up();
    let p = split_proxy(&rig, 3600).await;
    replica_ready(&p, &rig).await;
    let hold = stall_replica(&rig).await;
    let mut c = Conn::from_url(p.app_url()).await.expect("connect");
    let e = c
        .query_drop("INSERT INTO rs_my VALUES (1), (1)")
        .await
        .expect_err("the second row is a duplicate");
    assert!(e.to_string().contains("1062"), "{e}");
    // The error's diagnostics area holds the primary's backend for one
    // more statement: one that names a table ends the hold.
    count(&mut c, "SELECT COUNT(*) FROM rs_t").await;
    let q = "SELECT COUNT(*) FROM rs_my";
    assert_eq!(
        count(&mut c, q).await,
        1,
        "the row that was written is read back"
    );
    let mut other = Conn::from_url(p.app_url()).await.expect("connect");
    assert_eq!(
        count(&mut other, q).await,
        0,
        "another session reads the replica"
    );
    drop(hold);
    rig.caught_up();
    let before = reads_on(&p, &rig.replica).await;
    let t0 = Instant::now();
    loop {
        assert_eq!(count(&mut c, q).await, 1);
        if reads_on(&p, &rig.replica).await > before {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the session's reads never went back to the replica: {:#}",
            status(&p).await
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What a replica lacks or holds otherwise never reaches the session: a
/// schema it does not have yet (the read goes to the primary, and the
/// session keeps its schema), the server's own schemas and functions
/// (never read there), a warning list read into variables (the session
/// goes on), and a replica whose session defaults differ from the
/// primary's (kept out of the reads).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_replica_lacks_or_holds_otherwise_stays_on_the_primary() {
    let rig = rig(false, "SLAVE MONITOR");
    tables(&rig);
    let p = split_proxy(&rig, 3600).await;
    replica_ready(&p, &rig).await;
    let hold = stall_replica(&rig).await;

    // A schema created (by someone else) after the replica stalled.
    rig.primary.sql(
        "CREATE DATABASE rs_new; CREATE TABLE rs_new.t (a INT);
         GRANT ALL ON rs_new.* TO 'writer'@'%'",
    );
    let mut c = Conn::from_url(p.app_url()).await.expect("connect");
    c.query_drop("USE rs_new").await.expect("use");
    let db: Option<String> = c.query_first("SELECT DATABASE()").await.expect("read");
    assert_eq!(db.as_deref(), Some("rs_new"), "read on the primary instead");
    assert_eq!(count(&mut c, "SELECT COUNT(*) FROM t").await, 0);
    c.query_drop("INSERT INTO t VALUES (1)")
        .await
        .expect("the session still has its schema");
    let s = status(&p).await;
    assert!(
        s["routing"]["kept_on_primary"]["no_replica"].as_u64() >= Some(1),
        "{s:#}"
    );

    // The server's own state is read on the primary only.
    let before = reads_on(&p, &rig.replica).await;
    let mut i = Conn::from_url(p.app_url()).await.expect("connect");
    i.query_drop("USE information_schema").await.expect("use");
    let ro: Option<String> = i
        .query_first(
            "SELECT VARIABLE_VALUE FROM GLOBAL_VARIABLES WHERE VARIABLE_NAME = 'READ_ONLY'",
        )
        .await
        .expect("read");
    assert_eq!(ro.as_deref(), Some("OFF"), "the primary's read_only");
    let v: Option<i64> = i
        .query_first("SELECT `IS_FREE_LOCK`('rs') + 0")
        .await
        .expect("read");
    assert_eq!(v, Some(1));
    assert_eq!(
        reads_on(&p, &rig.replica).await,
        before,
        "none on the replica"
    );

    // A warning read into variables: that statement leaves the replica (a
    // variable set there would tie the session to it), so the primary, which
    // has no such condition, answers; the session goes on.
    let mut w = Conn::from_url(p.app_url()).await.expect("connect");
    let _: Option<Option<i64>> = w.query_first("SELECT 1 / 0").await.expect("read");
    assert_eq!(reads_on(&p, &rig.replica).await, before + 1);
    let got = w
        .query_drop("GET DIAGNOSTICS CONDITION 1 @m = MESSAGE_TEXT")
        .await;
    got.expect("answered by the primary");
    let warns: Vec<(String, u32, String)> = w.query("SHOW WARNINGS").await.expect("warnings");
    assert_eq!(warns.len(), 1, "{warns:?}");
    assert_eq!(warns[0].1, 1758, "no condition 1 there (compatibility.md)");
    let m: Option<Option<String>> = w.query_first("SELECT @m").await.expect("read @m");
    assert_eq!(m, Some(None));
    w.query_drop("INSERT INTO rs_t VALUES (50, 50)")
        .await
        .expect("the session goes on, on the primary");
    drop(hold);
    rig.caught_up();

    // Session defaults that differ: the replica takes no reads.
    rig.replica.sql("SET GLOBAL div_precision_increment = 9");
    let p2 = split_proxy(&rig, 3600).await;
    replica_ready(&p2, &rig).await;
    let mut d = Conn::from_url(p2.app_url()).await.expect("connect");
    let third: Option<String> = d.query_first("SELECT 1 / 3").await.expect("read");
    assert_eq!(third.as_deref(), Some("0.3333"), "the primary's precision");
    let s = status(&p2).await;
    let why = server(&s["servers"], &rig.replica)["unfit_for_reads"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(why.contains("session defaults"), "{s:#}");
    assert_eq!(reads_on(&p2, &rig.replica).await, 0);
}

/// A replica backend held only for a count (FOUND_ROWS() after a read past
/// the last row) that the replica closes while the client is idle costs
/// the count, not the session; a prepared read of a table the replica
/// does not have yet runs on the primary instead of failing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_replica_going_away_or_lacking_a_table_costs_no_session() {
    let rig = rig(false, "SLAVE MONITOR");
    tables(&rig);
    let p = split_proxy(&rig, 3600).await;
    replica_ready(&p, &rig).await;
    let mut c = Conn::from_url(p.app_url()).await.expect("connect");
    let before = reads_on(&p, &rig.replica).await;
    let rows: Vec<i64> = c
        .query("SELECT id FROM rs_t ORDER BY id LIMIT 1000000, 5")
        .await
        .expect("read past the last row");
    assert!(rows.is_empty());
    assert_eq!(reads_on(&p, &rig.replica).await, before + 1);
    // The replica ends that backend (as a restart or its wait_timeout would).
    let mut root = Conn::from_url(rig.replica.url("root", ROOT_PASSWORD, "test"))
        .await
        .expect("connect to the replica");
    let threads: Vec<u64> = root
        .query("SELECT ID FROM information_schema.PROCESSLIST WHERE USER = 'writer' AND COMMAND = 'Sleep'")
        .await
        .expect("processlist");
    assert!(!threads.is_empty(), "the held backend is on the replica");
    for t in threads {
        let _ = root.query_drop(format!("KILL {t}")).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let one: Option<i64> = c
        .query_first("SELECT 1")
        .await
        .expect("the session goes on");
    assert_eq!(one, Some(1));

    // A table created while the replica is stalled, prepared on the
    // primary by this client: executed there, not failed on the replica.
    let hold = stall_replica(&rig).await;
    rig.primary.sql("CREATE TABLE test.rs_late (id INT)");
    let mut other = Conn::from_url(p.app_url()).await.expect("connect");
    let got: Vec<i64> = other
        .exec("SELECT id FROM rs_late WHERE id = ?", (1,))
        .await
        .expect("runs on the primary");
    assert!(got.is_empty());
    drop(hold);
}
