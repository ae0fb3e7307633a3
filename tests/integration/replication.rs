//! Several servers under real replication (design §12): a MariaDB primary
//! and a replica replicating from it by GTID, binary log on, semi-sync
//! where a test needs that no acknowledged commit is lost. The proxy's
//! checks read each server's replication (`SHOW REPLICA STATUS`, as
//! `backend.user` with `SLAVE MONITOR` and nothing global besides), and a
//! kill -9 of the primary followed by the promotion of the replica, as an
//! orchestrator would do it, loses no commit the proxy acknowledged and
//! sends nothing to the old primary when it comes back writable.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::servers::{status, until};
use common::mariadb::{Profile, ROOT_PASSWORD};
use common::{MariaDb, Proxy};
use mysql_async::Conn;
use mysql_async::prelude::*;

/// Check interval of these tests' proxies.
pub(crate) const CHECK_MS: u64 = 200;

/// The application's account on both servers: every privilege on `test`,
/// none global (it must not bypass `read_only`).
pub(crate) const WRITER: &str = "writer";
pub(crate) const WRITER_PASSWORD: &str = "writerpw";

/// A primary and one replica replicating from it.
pub(crate) struct Rig {
    pub(crate) primary: MariaDb,
    pub(crate) replica: MariaDb,
}

/// Starts a primary and a replica (GTID, `MASTER_USE_GTID = slave_pos`),
/// semi-synchronous (`AFTER_SYNC`: a commit is acknowledged only once the
/// replica has the transaction) when `semi_sync`. The accounts made on the
/// primary reach the replica by replication: `writer` (see [`WRITER`]),
/// and `monitor_grants` granted to it on `*.*` when not empty.
pub(crate) fn rig(semi_sync: bool, monitor_grants: &str) -> Rig {
    let primary_args = ["--server-id=1"];
    let mut replica_args = vec!["--server-id=2", "--read-only=1"];
    if semi_sync {
        // The primary's side is switched on once the replica is connected
        // (below): on from its start, its own setup's first write would
        // wait out the timeout for a replica not there yet.
        replica_args.push("--rpl-semi-sync-slave-enabled=ON");
    }
    let primary = MariaDb::start_with(Profile::Production, &primary_args);
    let replica = MariaDb::start_with(Profile::Production, &replica_args);
    primary.sql(
        "CREATE USER 'repl'@'%' IDENTIFIED BY 'replpw';
         GRANT REPLICATION SLAVE ON *.* TO 'repl'@'%'",
    );
    // Both servers were set up alike on their own (accounts, schema `test`):
    // the replica starts from the primary's position now, its own binary log
    // emptied so that it holds nothing the primary did not write.
    let pos = primary.sql("SELECT @@global.gtid_binlog_pos");
    replica.sql(&format!(
        "RESET MASTER;
         SET GLOBAL gtid_slave_pos = '{}';
         CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = {},
           MASTER_USER = 'repl', MASTER_PASSWORD = 'replpw',
           MASTER_USE_GTID = slave_pos, MASTER_CONNECT_RETRY = 1;
         START SLAVE",
        pos.trim(),
        primary.port
    ));
    let mut grants = format!(
        "CREATE USER '{WRITER}'@'%' IDENTIFIED BY '{WRITER_PASSWORD}';
         GRANT ALL ON test.* TO '{WRITER}'@'%';"
    );
    if !monitor_grants.is_empty() {
        grants.push_str(&format!("GRANT {monitor_grants} ON *.* TO '{WRITER}'@'%';"));
    }
    primary.sql(&grants);
    let rig = Rig { primary, replica };
    rig.caught_up();
    if semi_sync {
        rig.primary.sql(
            "SET GLOBAL rpl_semi_sync_master_wait_point = AFTER_SYNC;
             SET GLOBAL rpl_semi_sync_master_timeout = 60000;
             SET GLOBAL rpl_semi_sync_master_enabled = ON",
        );
        // The replica's receiving thread registers as semi-synchronous
        // when it connects: restart it so it does with the primary's side on.
        rig.replica
            .sql("STOP SLAVE IO_THREAD; START SLAVE IO_THREAD");
        let t0 = Instant::now();
        while semi_sync_status(&rig.primary, "RPL_SEMI_SYNC_MASTER_CLIENTS") < 1 {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "the replica never connected as semi-synchronous"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        rig.primary
            .sql("CREATE TABLE test.semi_sync_probe (id INT)");
        assert!(
            semi_sync_status(&rig.primary, "RPL_SEMI_SYNC_MASTER_YES_TX") >= 1,
            "a write was not acknowledged by the replica"
        );
    }
    rig
}

/// A semi-sync status counter of `db` (0 when absent).
fn semi_sync_status(db: &MariaDb, name: &str) -> u64 {
    db.sql(&format!(
        "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = '{name}'"
    ))
    .trim()
    .parse()
    .unwrap_or(0)
}

/// Statements `db` executed of the kinds a writer sends (prepared
/// executes, inserts, transaction ends), as its status counters say.
fn writes_seen(db: &MariaDb) -> u64 {
    db.sql(
        "SELECT SUM(VARIABLE_VALUE) FROM information_schema.GLOBAL_STATUS \
         WHERE VARIABLE_NAME IN ('COM_STMT_EXECUTE', 'COM_INSERT', 'COM_BEGIN', 'COM_COMMIT')",
    )
    .trim()
    .parse()
    .unwrap_or(0)
}

impl Rig {
    /// Waits until the replica has applied everything the primary wrote.
    pub(crate) fn caught_up(&self) {
        let pos = self.primary.sql("SELECT @@global.gtid_binlog_pos");
        let waited = self
            .replica
            .sql(&format!("SELECT MASTER_GTID_WAIT('{}', 30)", pos.trim()));
        assert_eq!(
            waited.trim(),
            "0",
            "the replica never caught up: {}",
            self.replica.sql("SHOW SLAVE STATUS")
        );
    }
}

/// What an orchestrator does to promote the replica once the primary is
/// gone: apply everything it received (`Gtid_IO_Pos`), stop replicating,
/// become writable.
async fn promote(replica: &MariaDb) {
    let mut c = Conn::from_url(replica.url("root", ROOT_PASSWORD, "test"))
        .await
        .expect("connect to the replica");
    let status: mysql_async::Row = c
        .query_first("SHOW SLAVE STATUS")
        .await
        .expect("replica status")
        .expect("a replica");
    let received: String = status.get("Gtid_IO_Pos").expect("Gtid_IO_Pos");
    let waited: Option<i64> = c
        .query_first(format!("SELECT MASTER_GTID_WAIT('{received}', 30)"))
        .await
        .expect("wait for the relay log");
    assert_eq!(waited, Some(0), "relay log not applied up to {received}");
    c.query_drop("STOP SLAVE; RESET SLAVE ALL; SET GLOBAL read_only = 0")
        .await
        .expect("promote");
}

async fn proxy_for(rig: &Rig, backend_user: &str, queue_timeout_ms: u64) -> Proxy {
    builder_for(rig, backend_user, queue_timeout_ms)
        .start()
        .await
}

/// A proxy in front of both servers (the primary listed first), logging in
/// as `writer` (and checking as `backend_user`), checking every
/// [`CHECK_MS`]; `users[1]` (`other`) is an admin.
pub(crate) fn builder_for(
    rig: &Rig,
    backend_user: &str,
    queue_timeout_ms: u64,
) -> common::proxy::ProxyBuilder {
    let list = format!("{}, {}", rig.primary.addr(), rig.replica.addr());
    let backend_user = backend_user.to_string();
    Proxy::builder(&rig.primary)
        .queue_timeout_ms(queue_timeout_ms)
        .with(move |c| {
            c.users[1].admin = true;
            for u in &mut c.users {
                u.backend_user = Some(WRITER.into());
                u.backend_password = Some(WRITER_PASSWORD.into());
            }
            c.backend.user = backend_user;
            c.backend.password = WRITER_PASSWORD.into();
            c.backend.address = list;
            c.backend.health_check_interval_ms = CHECK_MS;
            c.backend.connect_timeout_ms = 2000;
        })
}

/// The entry for `db` in `/status`'s `servers` part.
pub(crate) fn server<'a>(servers: &'a serde_json::Value, db: &MariaDb) -> &'a serde_json::Value {
    let addr = db.addr();
    servers["servers"]
        .as_array()
        .and_then(|all| all.iter().find(|x| x["address"] == addr.as_str()))
        .unwrap_or(&serde_json::Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_servers_replication_is_read_and_shown() {
    let rig = rig(false, "SLAVE MONITOR");
    rig.primary
        .sql("CREATE TABLE test.repl_t (id INT PRIMARY KEY, v INT)");
    let p = proxy_for(&rig, WRITER, 5000).await;
    let (primary, replica) = (&rig.primary, &rig.replica);
    until(&p, "the replica replicating", |s| {
        server(s, replica)["replication"]["replica"]["io_running"] == "Yes"
            && server(s, replica)["replication"]["replica"]["sql_running"] == "Yes"
    })
    .await;
    let s = status(&p).await;
    assert_eq!(s["servers"]["primary"], primary.addr().as_str(), "{s:#}");
    assert_eq!(server(&s["servers"], replica)["role"], "replica");
    let r = &server(&s["servers"], replica)["replication"]["replica"];
    assert_eq!(r["source"], primary.addr().as_str(), "{r:#}");
    assert!(r["lag_s"].as_u64().is_some(), "{r:#}");
    assert!(
        server(&s["servers"], primary)["replication"]["replica"].is_null(),
        "the primary replicates from nothing: {s:#}"
    );

    // A write through the proxy reaches the primary, then the replica: the
    // GTID positions the checks read meet.
    let mut conn = Conn::from_url(p.app_url()).await.expect("connect");
    conn.query_drop("INSERT INTO repl_t VALUES (1, 1)")
        .await
        .expect("insert");
    let written = primary.sql("SELECT @@global.gtid_current_pos");
    let written = written.trim().to_string();
    until(&p, "the replica at the primary's position", |s| {
        server(s, primary)["replication"]["gtid"] == written.as_str()
            && server(s, replica)["replication"]["gtid"] == written.as_str()
    })
    .await;

    // The applier stopped: shown as stopped, with no lag figure, in
    // /status, the console and the metrics; the role stays.
    replica.sql("STOP SLAVE SQL_THREAD");
    until(&p, "the applier stopped", |s| {
        server(s, replica)["replication"]["replica"]["sql_running"] == "No"
    })
    .await;
    let s = status(&p).await;
    assert!(server(&s["servers"], replica)["replication"]["replica"]["lag_s"].is_null());
    assert_eq!(server(&s["servers"], replica)["role"], "replica");
    let mut admin = Conn::from_url(p.url("other", "otherpw", ""))
        .await
        .expect("connect");
    let rows: Vec<mysql_async::Row> = admin.query("SHOW MYPLEX SERVERS").await.expect("console");
    let text = |row: &mysql_async::Row, name: &str| -> String {
        let i = row
            .columns_ref()
            .iter()
            .position(|c| c.name_str() == name)
            .unwrap_or_else(|| panic!("no column {name}"));
        row.get::<Option<String>, _>(i)
            .flatten()
            .unwrap_or_default()
    };
    let replica_row = rows
        .iter()
        .find(|r| text(r, "server") == replica.addr())
        .expect("the replica's row");
    assert!(
        text(replica_row, "replication").starts_with("stopped from"),
        "{}",
        text(replica_row, "replication")
    );
    assert_eq!(text(replica_row, "lag_s"), "");
    let primary_row = rows
        .iter()
        .find(|r| text(r, "server") == primary.addr())
        .expect("the primary's row");
    assert_eq!(text(primary_row, "replication"), "none");
    assert_eq!(text(primary_row, "gtid"), written);
    let (_, metrics) = p.http_get("/metrics").await;
    let replicating = format!(
        "myplex_server_replicating{{server=\"{}\"}} 0",
        replica.addr()
    );
    assert!(metrics.contains(&replicating), "{metrics}");

    // Started again: running, a lag figure again.
    replica.sql("START SLAVE SQL_THREAD");
    until(&p, "the applier running", |s| {
        let r = &server(s, replica)["replication"]["replica"];
        r["sql_running"] == "Yes" && r["lag_s"].as_u64().is_some()
    })
    .await;
    let (_, metrics) = p.http_get("/metrics").await;
    let replicating = format!(
        "myplex_server_replicating{{server=\"{}\"}} 1",
        replica.addr()
    );
    assert!(metrics.contains(&replicating), "{metrics}");
}

/// Without `SLAVE MONITOR` the replication cannot be read: said so, and the
/// roles, which `@@read_only` decides, are as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replication_unreadable_without_the_privilege_is_reported_not_fatal() {
    let rig = rig(false, "");
    let p = proxy_for(&rig, WRITER, 5000).await;
    until(&p, "a primary", |s| {
        s["primary"] == rig.primary.addr().as_str()
    })
    .await;
    until(&p, "the replica checked", |s| {
        server(s, &rig.replica)["role"] == "replica"
    })
    .await;
    let s = status(&p).await;
    let why = server(&s["servers"], &rig.replica)["replication"]["unreadable"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        why.contains("SHOW REPLICA STATUS") && why.contains("1227"),
        "{s:#}"
    );
    let mut conn = Conn::from_url(p.app_url()).await.expect("connect");
    let port: Option<u16> = conn.query_first("SELECT @@port").await.expect("port");
    assert_eq!(port, Some(rig.primary.port));
}

/// One writer: rows with its own ids, autocommit or each in a transaction,
/// until `stop`; reconnects after any error. Returns each acknowledged id
/// with when it was acknowledged.
async fn writer(
    url: String,
    first_id: u64,
    explicit: bool,
    stop: Arc<AtomicBool>,
) -> Vec<(u64, Instant)> {
    let mut acked = Vec::new();
    let mut conn: Option<Conn> = None;
    let mut id = first_id;
    while !stop.load(Ordering::Relaxed) {
        let c = match conn.as_mut() {
            Some(c) => c,
            None => match Conn::from_url(url.as_str()).await {
                Ok(c) => conn.insert(c),
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
            },
        };
        id += 1;
        let r = if explicit {
            async {
                c.query_drop("BEGIN").await?;
                c.exec_drop("INSERT INTO acks (id) VALUES (?)", (id,))
                    .await?;
                c.query_drop("COMMIT").await
            }
            .await
        } else {
            c.exec_drop("INSERT INTO acks (id) VALUES (?)", (id,)).await
        };
        match r {
            Ok(()) => acked.push((id, Instant::now())),
            Err(_) => {
                conn = None;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    acked
}

/// A primary (semi-synchronous when `semi_sync`) and its replica with
/// table `test.acks`, and a proxy in front of both that sees them so.
async fn writes_rig(semi_sync: bool) -> (Rig, Proxy) {
    let rig = rig(semi_sync, "SLAVE MONITOR");
    rig.primary
        .sql("CREATE TABLE test.acks (id BIGINT PRIMARY KEY)");
    rig.caught_up();
    let p = proxy_for(&rig, WRITER, 3000).await;
    let (old, new) = (&rig.primary, &rig.replica);
    until(&p, "a primary and its replica", |s| {
        s["primary"] == old.addr().as_str()
            && server(s, new)["replication"]["replica"]["io_running"] == "Yes"
    })
    .await;
    (rig, p)
}

/// Four writers through the proxy (two autocommit, two in transactions).
struct Writes {
    stop: Arc<AtomicBool>,
    writers: Vec<tokio::task::JoinHandle<Vec<(u64, Instant)>>>,
}

impl Writes {
    /// Starts them, and returns once `primary` holds 100 of their rows.
    async fn start(p: &Proxy, primary: &MariaDb) -> Writes {
        let stop = Arc::new(AtomicBool::new(false));
        let writers = (0..4u64)
            .map(|w| {
                tokio::spawn(writer(
                    p.app_url(),
                    (w + 1) * 1_000_000_000,
                    w % 2 == 1,
                    stop.clone(),
                ))
            })
            .collect();
        let t0 = Instant::now();
        while primary
            .sql("SELECT COUNT(*) FROM test.acks")
            .trim()
            .parse::<u64>()
            .unwrap_or(0)
            < 100
        {
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "no writes went through"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Writes { stop, writers }
    }

    /// Stops them: each acknowledged id, with when.
    async fn stop(self) -> Vec<(u64, Instant)> {
        self.stop.store(true, Ordering::Relaxed);
        let mut acked = Vec::new();
        for w in self.writers {
            acked.extend(w.await.expect("writer"));
        }
        acked
    }
}

/// After a `what` that made `new` the primary at `promoted`: writes
/// resumed (the pause is printed for `deploy/bench/failover.sh`), and every
/// acknowledged commit is on `new`.
fn resumed_and_none_lost(what: &str, acked: &[(u64, Instant)], promoted: Instant, new: &MariaDb) {
    let resumed = acked
        .iter()
        .filter(|(_, t)| *t > promoted)
        .map(|(_, t)| t.duration_since(promoted))
        .min()
        .unwrap_or_else(|| panic!("no write acknowledged after the {what}"));
    eprintln!(
        "replication: {what}: {} commits acknowledged; writes resumed {resumed:?} after the promotion",
        acked.len()
    );
    assert!(
        resumed < Duration::from_secs(10),
        "resumed after {resumed:?}"
    );
    let on_new = ids_on(new);
    let lost: Vec<u64> = acked
        .iter()
        .map(|(id, _)| *id)
        .filter(|id| !on_new.contains(id))
        .collect();
    assert!(
        lost.is_empty(),
        "{} acknowledged commits lost: {:?}",
        lost.len(),
        &lost[..lost.len().min(10)]
    );
}

fn ids_on(db: &MariaDb) -> std::collections::BTreeSet<u64> {
    db.sql("SELECT id FROM test.acks")
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}

/// Crash of a semi-sync primary mid-write, promotion of its replica by the
/// test (as an orchestrator): writes resume through the same proxy, every
/// commit the proxy acknowledged is on the new primary, and the old primary,
/// restarted writable, is refused and gets nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill9_of_a_semi_sync_primary_loses_no_acknowledged_commit() {
    let (rig, p) = writes_rig(true).await;
    let (old, new) = (&rig.primary, &rig.replica);
    // Some writes, then the crash.
    let writes = Writes::start(&p, old).await;
    // Semi-sync in force when it dies: every commit so far waited for the
    // replica, none went without it.
    assert_eq!(
        semi_sync_status(old, "RPL_SEMI_SYNC_MASTER_NO_TX"),
        0,
        "a commit went without the replica's acknowledgement"
    );
    assert!(semi_sync_status(old, "RPL_SEMI_SYNC_MASTER_YES_TX") >= 100);
    old.kill9();
    until(&p, "the old primary down", |s| s["primary"].is_null()).await;
    promote(new).await;
    let promoted = Instant::now();
    until(&p, "the new primary", |s| {
        s["primary"] == new.addr().as_str()
    })
    .await;
    // Writes go on for a while on the new primary.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let acked = writes.stop().await;
    resumed_and_none_lost("failover", &acked, promoted, new);

    // The old primary comes back writable: refused, and no write reaches it.
    old.restart();
    until(&p, "the old primary refused", |s| {
        server(s, old)["role"] == "refused"
    })
    .await;
    let before = ids_on(old);
    let mut conn = Conn::from_url(p.app_url()).await.expect("connect");
    for id in 1..=20u64 {
        conn.exec_drop("INSERT INTO acks (id) VALUES (?)", (id,))
            .await
            .expect("insert after the restart");
    }
    let port: Option<u16> = conn.query_first("SELECT @@port").await.expect("port");
    assert_eq!(port, Some(new.port));
    // It is writable: a write sent there would have been stored.
    assert_eq!(ids_on(old), before, "a write reached the old primary");
}

/// A planned switchover as an orchestrator runs it: the primary made
/// read-only, the replica caught up and made writable. Writes resume on the
/// new primary through the same proxy, none acknowledged is missing there,
/// and no write reaches the old primary after it was made read-only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_planned_switchover_moves_the_writes_and_loses_none() {
    let (rig, p) = writes_rig(false).await;
    let (old, new) = (&rig.primary, &rig.replica);
    let writes = Writes::start(&p, old).await;
    // The switchover.
    old.sql("SET GLOBAL read_only = 1");
    let frozen = ids_on(old);
    rig.caught_up();
    new.sql("STOP SLAVE; RESET SLAVE ALL; SET GLOBAL read_only = 0");
    let promoted = Instant::now();
    until(&p, "the new primary", |s| {
        s["primary"] == new.addr().as_str()
    })
    .await;
    // From here no writer's statement may reach the old primary (it would
    // refuse a write, read-only, so its counters are what tells).
    tokio::time::sleep(Duration::from_millis(100)).await;
    let on_old = writes_seen(old);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let acked = writes.stop().await;
    assert_eq!(
        writes_seen(old),
        on_old,
        "writers' statements reached the old primary after the switchover"
    );
    resumed_and_none_lost("switchover", &acked, promoted, new);
    assert_eq!(
        ids_on(old),
        frozen,
        "a write reached the old primary after read_only"
    );
    assert_eq!(server(&status(&p).await["servers"], old)["role"], "replica");
}
