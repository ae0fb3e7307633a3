//! Several servers behind one proxy (design §12): the statements go to the
//! one writable server, the primary; a second writable server is refused,
//! never written to (never two primaries); a switchover or a failover moves
//! new statements to the new primary within a few check intervals, while a
//! transaction on the old one ends with it and never continues elsewhere;
//! with no writable server statements wait out their queue timeout and get
//! an error naming the cause. Real servers, roles set with
//! `SET GLOBAL read_only` as an operator or orchestrator would.

use crate::common;

use std::time::{Duration, Instant};

use common::{MariaDb, Proxy};
use mysql_async::Conn;
use mysql_async::prelude::*;

/// Check interval of these tests' proxies.
const CHECK_MS: u64 = 200;

async fn proxy_for(servers: &[&MariaDb], queue_timeout_ms: u64) -> Proxy {
    let list: Vec<String> = servers.iter().map(|s| s.addr()).collect();
    Proxy::builder(servers[0])
        .queue_timeout_ms(queue_timeout_ms)
        .with(move |c| {
            // `other` reads the console.
            c.users[1].admin = true;
            c.backend.address = list.join(", ");
            c.backend.health_check_interval_ms = CHECK_MS;
            c.backend.connect_timeout_ms = 2000;
        })
        .start()
        .await
}

/// The proxy's `/status`, parsed.
pub(crate) async fn status(p: &Proxy) -> serde_json::Value {
    let (code, body) = p.http_get("/status").await;
    assert_eq!(code, 200, "{body}");
    serde_json::from_str(&body).expect("status json")
}

/// Waits until `/status` says `what` of the servers (15 s at most).
pub(crate) async fn until(p: &Proxy, what: &str, mut ok: impl FnMut(&serde_json::Value) -> bool) {
    let t0 = Instant::now();
    loop {
        let s = status(p).await;
        if ok(&s["servers"]) {
            return;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(15),
            "never {what}: {:#}",
            s["servers"]
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn primary_is(db: &MariaDb) -> impl FnMut(&serde_json::Value) -> bool {
    let addr = db.addr();
    move |s| s["primary"].as_str() == Some(addr.as_str())
}

fn role_of(s: &serde_json::Value, db: &MariaDb) -> String {
    role_at(s, &db.addr())
}

fn role_at(s: &serde_json::Value, address: &str) -> String {
    s["servers"]
        .as_array()
        .and_then(|all| all.iter().find(|x| x["address"] == address))
        .and_then(|x| x["role"].as_str())
        .unwrap_or_default()
        .to_string()
}

async fn port_through(conn: &mut Conn) -> u16 {
    conn.query_first("SELECT @@port")
        .await
        .expect("@@port")
        .expect("a row")
}

fn set_read_only(db: &MariaDb, on: bool) {
    db.sql(&format!("SET GLOBAL read_only = {}", u8::from(on)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statements_go_to_the_one_writable_server_and_a_second_one_is_refused() {
    let (a, b) = (MariaDb::start(), MariaDb::start());
    set_read_only(&b, true);
    let p = proxy_for(&[&a, &b], 5000).await;
    until(&p, "a primary", primary_is(&a)).await;
    let mut conn = Conn::from_url(p.app_url()).await.expect("connect");
    assert_eq!(port_through(&mut conn).await, a.port);
    conn.query_drop("CREATE TABLE servers_t (v INT)")
        .await
        .expect("ddl");

    // b made writable while a still is: refused, logged, counted; nothing
    // goes there, not even a new client's statements.
    set_read_only(&b, false);
    until(&p, "b refused", |s| role_of(s, &b) == "refused").await;
    let s = status(&p).await;
    assert_eq!(s["servers"]["primary"], a.addr().as_str());
    assert!(
        s["servers"]["refused_writable"].as_u64() >= Some(1),
        "{s:#}"
    );
    let mut other = Conn::from_url(p.app_url()).await.expect("connect");
    for c in [&mut conn, &mut other] {
        assert_eq!(port_through(c).await, a.port);
        c.query_drop("INSERT INTO servers_t VALUES (1)")
            .await
            .expect("insert");
    }
    assert_eq!(a.sql("SELECT COUNT(*) FROM test.servers_t").trim(), "2");
    assert!(
        !b.sql("SHOW TABLES FROM test").contains("servers_t"),
        "nothing reached the refused server"
    );
    let (_, metrics) = p.http_get("/metrics").await;
    let refused: u64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("myplex_refused_writable_servers_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    assert!(refused >= 1, "{metrics}");
    // The console says the same.
    let mut admin = Conn::from_url(p.url("other", "otherpw", ""))
        .await
        .expect("connect");
    let rows: Vec<(String, String, u8)> = admin
        .query_map("SHOW MYPLEX SERVERS", |row: mysql_async::Row| {
            let cell = |i| row.get::<String, _>(i).unwrap_or_default();
            (cell(0), cell(1), cell(2).parse().unwrap_or(9))
        })
        .await
        .expect("console");
    assert!(rows.contains(&(a.addr(), "primary".into(), 1)), "{rows:?}");
    assert!(rows.contains(&(b.addr(), "refused".into(), 1)), "{rows:?}");

    // A session holding state on a (a named lock) across the switchover.
    let mut pinned = Conn::from_url(p.app_url()).await.expect("connect");
    let got: Option<i64> = pinned
        .query_first("SELECT GET_LOCK('servers_pin', 0)")
        .await
        .expect("lock");
    assert_eq!(got, Some(1));

    // Switchover: a made read-only, b the one writable server: new
    // statements, on the same client connections, go to b.
    set_read_only(&a, true);
    until(&p, "b primary", primary_is(&b)).await;
    // The pinned session's state lives on a: it ends, and none of its
    // statements runs on b.
    let r = pinned
        .query_drop("SELECT RELEASE_LOCK('servers_pin')")
        .await;
    assert!(r.is_err(), "a session held on the old primary went on");
    assert_eq!(role_of(&status(&p).await["servers"], &a), "replica");
    for c in [&mut conn, &mut other] {
        assert_eq!(port_through(c).await, b.port);
    }
    // And a made writable again stays refused: b keeps the writes.
    set_read_only(&a, false);
    until(&p, "a refused", |s| role_of(s, &a) == "refused").await;
    assert_eq!(port_through(&mut other).await, b.port);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_ends_the_old_primarys_transaction_and_waits_for_a_writable_server() {
    let (a, b) = (MariaDb::start(), MariaDb::start());
    set_read_only(&b, true);
    let p = proxy_for(&[&a, &b], 1500).await;
    until(&p, "a primary", primary_is(&a)).await;
    let mut held = Conn::from_url(p.app_url()).await.expect("connect");
    held.query_drop("CREATE TABLE failover_t (v INT)")
        .await
        .expect("ddl");
    held.query_drop("BEGIN").await.expect("begin");
    held.query_drop("INSERT INTO failover_t VALUES (1)")
        .await
        .expect("insert");
    let a_addr = a.addr();
    assert_eq!(port_through(&mut held).await, a.port);

    // The primary dies.
    drop(a);
    until(&p, "no primary", |s| s["primary"].is_null()).await;
    let s = status(&p).await;
    let why = s["servers"]["no_primary"].as_str().unwrap_or_default();
    assert!(why.contains("no writable server"), "{s:#}");
    let t0 = Instant::now();
    while p.http_get("/readyz").await.0 != 503 {
        assert!(t0.elapsed() < Duration::from_secs(5), "/readyz stayed 200");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // The transaction ends with its server: an error, never the rest of it
    // on another server.
    let r = held.query_drop("INSERT INTO failover_t VALUES (2)").await;
    assert!(r.is_err(), "the transaction went on after its server died");
    drop(held);

    // No writable server: a statement waits out its queue timeout and is
    // told why.
    let t0 = Instant::now();
    let e = match Conn::from_url(p.app_url()).await {
        Ok(mut c) => c.query_drop("SELECT 1").await.expect_err("no primary"),
        Err(e) => e,
    };
    let msg = e.to_string();
    assert!(
        msg.contains("no writable backend server"),
        "{msg} after {:?}",
        t0.elapsed()
    );

    // The replica is promoted: statements go there within a few checks.
    set_read_only(&b, false);
    until(&p, "b primary", primary_is(&b)).await;
    let mut conn = Conn::from_url(p.app_url()).await.expect("connect");
    assert_eq!(port_through(&mut conn).await, b.port);
    assert_eq!(p.http_get("/readyz").await.0, 200);
    let s = status(&p).await;
    assert!(s["servers"]["primary_changes"].as_u64() >= Some(2), "{s:#}");
    assert_eq!(role_at(&s["servers"], &a_addr), "down");
}

/// `[server_users]` accounts are looked up on the primary: the first
/// listed server may be a replica that never got an account created since
/// (or may be down). Failed before: the lookup logged in at the first
/// listed address and found no such account.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_users_are_looked_up_on_the_primary_not_the_first_listed_server() {
    let (a, b) = (MariaDb::start(), MariaDb::start());
    set_read_only(&a, true);
    let list = format!("{}, {}", a.addr(), b.addr());
    let p = Proxy::builder(&a)
        .with(move |c| {
            c.backend.address = list;
            c.backend.health_check_interval_ms = CHECK_MS;
            c.backend.connect_timeout_ms = 2000;
            let s = &mut c.server_users;
            s.enabled = true;
            s.lookup_user = "root".into();
            s.lookup_password = common::mariadb::ROOT_PASSWORD.into();
            c.frontend.auth_throttle_max_delay_ms = 0;
        })
        .start()
        .await;
    until(&p, "b primary", primary_is(&b)).await;
    // Only on b, as an account created after a replica was cut off.
    b.sql(
        "CREATE USER 'su_primary'@'%' IDENTIFIED BY 'supw';
         GRANT ALL ON test.* TO 'su_primary'@'%'",
    );
    let mut conn = Conn::from_url(p.url("su_primary", "supw", "test"))
        .await
        .expect("a server user of the primary logs in");
    assert_eq!(port_through(&mut conn).await, b.port);
}
