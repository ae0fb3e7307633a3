//! Values a client reads about its own session must be right even when its
//! statements run on different backend connections: CONNECTION_ID(),
//! LAST_INSERT_ID(), FOUND_ROWS(), SHOW WARNINGS — each compared with what
//! a direct connection returns.

use crate::common;

use common::{MariaDb, Proxy};
use mysql_async::Conn;
use mysql_async::prelude::*;

async fn conn(p: &Proxy) -> Conn {
    Conn::from_url(p.app_url())
        .await
        .expect("connect via proxy")
}

async fn direct(db: &MariaDb) -> Conn {
    Conn::from_url(format!(
        "{}?prefer_socket=false",
        db.url("app", "secret", "test")
    ))
    .await
    .expect("direct")
}

/// Pins the backend the last statement of another client ran on.
async fn occupy(b: &mut Conn) {
    b.query_drop("BEGIN").await.expect("begin");
    b.query_drop("SELECT 1 FROM DUAL").await.expect("pin");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_id_is_the_proxy_id() {
    let db = MariaDb::shared();
    let p = Proxy::builder(db).groups(1).max_backend(2).start().await;
    let mut a = conn(&p).await;
    let told = a.id();
    let id: Option<u32> = a.query_first("SELECT CONNECTION_ID()").await.expect("id");
    assert_eq!(id, Some(told));
    let aliased: Option<u32> = a
        .query_first("SELECT CONNECTION_ID() AS me")
        .await
        .expect("id");
    assert_eq!(aliased, Some(told));
    let lit: Option<String> = a
        .query_first("SELECT 'CONNECTION_ID()'")
        .await
        .expect("literal");
    assert_eq!(lit.as_deref(), Some("CONNECTION_ID()"));
    // Column metadata equals the server's own.
    let mut d = direct(db).await;
    let via = a
        .query_iter("SELECT CONNECTION_ID()")
        .await
        .expect("q")
        .columns()
        .expect("cols");
    let dir = d
        .query_iter("SELECT CONNECTION_ID()")
        .await
        .expect("q")
        .columns()
        .expect("cols");
    let describe = |c: &mysql_async::Column| {
        (
            c.name_str().into_owned(),
            c.column_type(),
            c.column_length(),
            c.flags(),
            c.character_set(),
        )
    };
    assert_eq!(describe(&via[0]), describe(&dir[0]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn last_insert_id_survives_a_move() {
    let db = MariaDb::shared();
    let t = format!("test.lii_{}", std::process::id());
    db.sql(&format!("DROP TABLE IF EXISTS {t}; CREATE TABLE {t} (id INT AUTO_INCREMENT PRIMARY KEY, v INT) AUTO_INCREMENT=100"));
    let p = Proxy::builder(db).groups(1).max_backend(3).start().await;
    let mut a = conn(&p).await;
    let mut b = conn(&p).await;
    a.query_drop(format!("INSERT INTO {t} (v) VALUES (1)"))
        .await
        .expect("insert");
    assert_eq!(a.last_insert_id(), Some(100));
    occupy(&mut b).await;
    let id: Option<u64> = a.query_first("SELECT LAST_INSERT_ID()").await.expect("lii");
    assert_eq!(id, Some(100));
    b.query_drop("COMMIT").await.expect("commit");
    // Another client's LAST_INSERT_ID is its own.
    let other: Option<u64> = b.query_first("SELECT LAST_INSERT_ID()").await.expect("lii");
    assert_eq!(other, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn found_rows_after_select() {
    let db = MariaDb::shared();
    let t = format!("test.fr_{}", std::process::id());
    db.sql(&format!("DROP TABLE IF EXISTS {t}; CREATE TABLE {t} (id INT PRIMARY KEY); INSERT INTO {t} VALUES (1),(2),(3),(4),(5)"));
    let p = Proxy::builder(db).groups(1).max_backend(3).start().await;
    let mut a = conn(&p).await;
    let mut b = conn(&p).await;
    let mut d = direct(db).await;
    for c in [&mut a, &mut d] {
        let _: Vec<i64> = c
            .query(format!("SELECT id FROM {t} WHERE id > 1 LIMIT 3"))
            .await
            .expect("select");
    }
    occupy(&mut b).await;
    let via: Option<u64> = a
        .query_first("SELECT FOUND_ROWS()")
        .await
        .expect("found rows");
    let dir: Option<u64> = d
        .query_first("SELECT FOUND_ROWS()")
        .await
        .expect("found rows");
    assert_eq!(via, dir);
    assert_eq!(via, Some(3));
    // SQL_CALC_FOUND_ROWS pins, so the server's own count is used.
    let _: Vec<i64> = a
        .query(format!("SELECT SQL_CALC_FOUND_ROWS id FROM {t} LIMIT 1"))
        .await
        .expect("calc");
    let calc: Option<u64> = a
        .query_first("SELECT FOUND_ROWS()")
        .await
        .expect("found rows");
    assert_eq!(calc, Some(5));
    b.query_drop("COMMIT").await.expect("commit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_warnings_sees_the_previous_statement() {
    let db = MariaDb::shared();
    let p = Proxy::builder(db).groups(1).max_backend(3).start().await;
    let mut a = conn(&p).await;
    let mut b = conn(&p).await;
    let mut d = direct(db).await;
    let mut seen = Vec::new();
    for c in [&mut a, &mut d] {
        c.query_drop("SELECT CAST('abc' AS SIGNED), CAST('1x' AS SIGNED)")
            .await
            .expect("warn");
        seen.push(c.get_warnings());
    }
    // Other traffic in between must not steal the backend holding them.
    let _: Vec<i64> = b.query("SELECT 1").await.expect("other");
    let via: Vec<(String, u32, String)> = a.query("SHOW WARNINGS").await.expect("show");
    let dir: Vec<(String, u32, String)> = d.query("SHOW WARNINGS").await.expect("show");
    assert_eq!(seen[0], seen[1]);
    assert_eq!(via.len(), 2);
    assert_eq!(via, dir);
    // SHOW WARNINGS is a diagnostic statement: the count stays, as direct.
    let via: Option<u64> = a
        .query_first("SELECT @@warning_count")
        .await
        .expect("count");
    let dir: Option<u64> = d
        .query_first("SELECT @@warning_count")
        .await
        .expect("count");
    assert_eq!(via, dir);
}

/// The server closes a connection that stays silent past its session's
/// `wait_timeout`, or past `idle_transaction_timeout` inside a
/// transaction (which is then rolled back); through myplex the client's
/// connection is closed the same way, silently, while a client within its
/// timeouts keeps its connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_clients_are_closed_after_their_wait_timeout() {
    use common::raw::RawConn;
    use std::time::Duration;
    let db = MariaDb::shared();
    db.sql("CREATE TABLE IF NOT EXISTS test.idle_t (a INT) ENGINE=InnoDB; DELETE FROM test.idle_t");
    let p = Proxy::builder(db).groups(1).max_backend(2).start().await;
    let mut got = Vec::new();
    for addr in [p.addr.to_string(), db.addr()] {
        let login = || RawConn::connect(&addr, "app", "secret", Some("test"), false);
        let mut quiet = login().await;
        quiet.query_ok("SET SESSION wait_timeout = 1").await;
        let mut in_trx = login().await;
        in_trx
            .query_ok("SET SESSION idle_transaction_timeout = 1")
            .await;
        in_trx.query_ok("BEGIN").await;
        in_trx.query_ok("INSERT INTO idle_t VALUES (1)").await;
        let mut patient = login().await;
        patient
            .query_ok("SET SESSION idle_transaction_timeout = 1")
            .await;
        tokio::time::sleep(Duration::from_millis(2500)).await;
        // Ended without a word, with a reset (the client's next write
        // fails: 2006, which auto-reconnect acts on).
        let quiet_closed = tokio::time::timeout(Duration::from_secs(5), quiet.ending("closed"))
            .await
            .expect("the connection is closed, not left hanging");
        let trx_closed = tokio::time::timeout(Duration::from_secs(5), in_trx.ending("closed"))
            .await
            .expect("the connection is closed, not left hanging");
        // Outside a transaction only wait_timeout counts (28800 here).
        let alive = patient.query_one("SELECT 'still here'").await;
        let rows = patient.query_one("SELECT COUNT(*) FROM idle_t").await;
        got.push((quiet_closed, trx_closed, alive, rows));
    }
    assert_eq!(got[0], got[1], "through the proxy, then direct");
    assert_eq!(
        got[1],
        (
            common::raw::Ending {
                said: vec![],
                reset: true
            },
            common::raw::Ending {
                said: vec![],
                reset: true
            },
            "still here".to_string(),
            "0".to_string()
        )
    );
}

/// A pool's keepalive (COM_PING, answered by myplex) keeps a pinned
/// session's backend alive past the server's `wait_timeout`, as each ping
/// restarts the server's idle clock direct: the transaction survives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pings_keep_a_pinned_backend_alive() {
    use common::raw::RawConn;
    use std::time::Duration;
    let db = MariaDb::shared();
    let p = Proxy::builder(db).groups(1).max_backend(2).start().await;
    let mut got = Vec::new();
    for addr in [p.addr.to_string(), db.addr()] {
        let mut c = RawConn::connect(&addr, "app", "secret", Some("test"), false).await;
        c.query_ok("SET SESSION wait_timeout = 2").await;
        c.query_ok("BEGIN").await;
        for _ in 0..8 {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let reply = c.command_reply(&[0x0e], "ping").await;
            assert_eq!(reply.map(|(_, p)| p[0]), Some(0), "{addr}: ping answered");
        }
        got.push(c.query_one("SELECT @@in_transaction").await);
        c.query_ok("ROLLBACK").await;
    }
    assert_eq!(got[0], got[1], "through the proxy, then direct");
    assert_eq!(got[1], "1");
}

/// Everything the session variables that change how the server reads or
/// writes data decide, in one string.
const DATA_VARS: &str = "SELECT CONCAT_WS('|', @@character_set_database, \
    @@collation_database, @@lc_time_names, @@time_zone, @@sql_mode, \
    @@div_precision_increment, @@character_set_filesystem, @@default_week_format, \
    DATE_FORMAT('2024-03-01', '%W %M'), 1/3, WEEK('2024-01-07'), 'a' || 'b')";

const SET_DATA_VARS: &str = "SET collation_database = 'sjis_bin', lc_time_names = 'de_DE', \
    time_zone = '+05:00', sql_mode = 'PIPES_AS_CONCAT', div_precision_increment = 8, \
    character_set_filesystem = 'latin1', default_week_format = 3";

async fn read_data_vars(c: &mut Conn) -> (String, u64) {
    let v: Option<String> = c.query_first(DATA_VARS).await.expect("read");
    let t: Option<u64> = c
        .query_first("SELECT @@pseudo_thread_id")
        .await
        .expect("thread");
    (v.expect("row"), t.expect("thread"))
}

/// Issue 16 E.16, the class: session variables that change how data is read
/// or written (the database character set `LOAD DATA` reads files in, the
/// time zone, sql_mode, …) follow the session onto another backend, a USE
/// derives the database character set from the schema again, and the
/// backend the session set them on gives the next client fresh values —
/// each compared with direct connections.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_variables_follow_the_session() {
    let db = MariaDb::shared();
    let mut d = direct(db).await;
    let (fresh, _) = read_data_vars(&mut d).await;
    d.query_drop(SET_DATA_VARS).await.expect("set");
    let (set, _) = read_data_vars(&mut d).await;
    d.query_drop("USE test").await.expect("use");
    let (used, _) = read_data_vars(&mut d).await;
    assert_ne!(set, fresh);
    assert_ne!(used, set, "USE derives the database character set");

    let p = Proxy::builder(db).groups(1).max_backend(2).start().await;
    let mut a = conn(&p).await;
    let mut b = conn(&p).await;
    a.query_drop(SET_DATA_VARS).await.expect("set");
    let (_, t1) = read_data_vars(&mut a).await;
    // b takes the backend a just left, a moves to another one.
    occupy(&mut b).await;
    let (b_sees, tb) = read_data_vars(&mut b).await;
    assert_eq!(tb, t1, "b got a's backend");
    assert_eq!(b_sees, fresh, "a's settings reached the next client");
    let (a_sees, t2) = read_data_vars(&mut a).await;
    assert_ne!(t2, t1, "a moved");
    assert_eq!(a_sees, set, "a's settings after the move");
    b.query_drop("COMMIT").await.expect("commit");

    // USE on one backend, then a move to another one. A new client takes
    // a's backend (b's own, left after its COMMIT, may be parked for b and
    // would be b's first choice: see `pool::parking`).
    a.query_drop("USE test").await.expect("use");
    let (_, t3) = read_data_vars(&mut a).await;
    let mut c = conn(&p).await;
    occupy(&mut c).await;
    let (_, tc) = read_data_vars(&mut c).await;
    assert_eq!(tc, t3, "c got a's backend");
    let (a_sees, t4) = read_data_vars(&mut a).await;
    assert_ne!(t4, t3, "a moved");
    assert_eq!(a_sees, used, "after USE and a move");
    c.query_drop("COMMIT").await.expect("commit");
}
