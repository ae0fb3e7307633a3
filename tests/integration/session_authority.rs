//! The session-state authority end to end, against a production-shaped
//! server (binary log on): nothing one client leaves on a backend reaches
//! another, pins end when their cause ends, replay converges, and read-only
//! server variables are never replayed.
//!
//! Most cases use a proxy with ONE backend connection: a session that stays
//! pinned then shows up as a queue timeout (1317) for the other client, and
//! a backend handed over dirty shows up in the other client's probes.

use crate::common;

use std::time::Duration;

use common::raw::{RawConn, Response};
use common::{MariaDb, Proxy};
use mysql_async::Conn;
use mysql_async::prelude::*;

/// A private server of the production profile (binary log on, ROW): the
/// cases change globals and schemas, so they do not share one.
fn binlog_server() -> MariaDb {
    MariaDb::start()
}

async fn one_backend(db: &MariaDb) -> Proxy {
    Proxy::builder(db)
        .groups(1)
        .max_backend(1)
        .queue_timeout_ms(1000)
        .with(|c| c.pool.diagnostics_hold_ms = 100)
        .start()
        .await
}

async fn conn(p: &Proxy) -> Conn {
    Conn::from_url(p.app_url())
        .await
        .expect("connect via proxy")
}

async fn raw(p: &Proxy) -> RawConn {
    RawConn::connect(&p.addr.to_string(), "app", "secret", Some("test"), false).await
}

/// Error code of a statement, 0 when it succeeded.
async fn code(c: &mut Conn, sql: &str) -> u16 {
    match c.query_drop(sql).await {
        Ok(()) => 0,
        Err(mysql_async::Error::Server(e)) => e.code,
        Err(e) => panic!("{sql}: {e}"),
    }
}

/// True when another client can get the single backend now.
async fn backend_free(p: &Proxy) -> bool {
    let mut b = raw(p).await;
    let free = match b.query("SELECT 1").await {
        Response::Rows(_) => true,
        Response::Err(e) if e.code == 1317 => false,
        other => panic!("probe: {}", common::raw::brief(&other)),
    };
    b.quit().await;
    free
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binlog_gtid_is_never_replayed() {
    let db = binlog_server();
    let p = Proxy::builder(&db).groups(1).max_backend(2).start().await;
    let mut a = conn(&p).await;
    let mut other = conn(&p).await;
    a.query_drop("CREATE TABLE gt (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
        .await
        .expect("create");
    for i in 0..20 {
        // The other client holds a backend now and then, so A moves.
        if i % 3 == 0 {
            other.query_drop("BEGIN").await.expect("begin");
            other.query_drop("SELECT 1").await.expect("hold");
        }
        a.query_drop(format!("INSERT INTO gt (v) VALUES ({i})"))
            .await
            .unwrap_or_else(|e| panic!("insert {i}: {e}"));
        if i % 3 == 0 {
            other.query_drop("COMMIT").await.expect("commit");
        }
    }
    let n: Option<u64> = a
        .query_first("SELECT COUNT(*) FROM gt")
        .await
        .expect("count");
    assert_eq!(n, Some(20));
    // A login naming a database works after commits reported GTIDs.
    let mut c = conn(&p).await;
    let one: Option<u8> = c.query_first("SELECT 1").await.expect("login + select");
    assert_eq!(one, Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn harmless_text_does_not_pin() {
    let db = binlog_server();
    let p = one_backend(&db).await;
    let mut a = conn(&p).await;
    a.query_drop("CREATE TABLE budget_lock (a INT)")
        .await
        .expect("create");
    for q in [
        "SELECT 'bob@example.com'",
        "SELECT * FROM budget_lock",
        "SELECT 'GET_LOCK(''x'', 1)'",
        "/* LOCK TABLES t WRITE */ SELECT 1",
        "SELECT 1 -- SET @x = 1",
        "SET STATEMENT max_statement_time=10 FOR SELECT 1",
        "SET SESSION sql_mode = DEFAULT",
        "INSERT INTO budget_lock VALUES (1)",
    ] {
        a.query_drop(q).await.unwrap_or_else(|e| panic!("{q}: {e}"));
        assert!(backend_free(&p).await, "`{q}` pinned the session");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pins_end_when_their_cause_ends() {
    let db = binlog_server();
    let p = one_backend(&db).await;
    let mut a = conn(&p).await;
    let cases: &[(&str, &str)] = &[
        ("SELECT GET_LOCK('L', 0)", "SELECT RELEASE_LOCK('L')"),
        (
            "/* c */ SELECT GET_LOCK('L', 0)",
            "SELECT RELEASE_ALL_LOCKS()",
        ),
        ("SET @x = 1", "SET @x = NULL"),
        ("SELECT 1 INTO @y", "SET @y := NULL"),
        (
            "CREATE TEMPORARY TABLE tt (a INT)",
            "DROP TEMPORARY TABLE tt",
        ),
        ("LOCK TABLES budget READ", "UNLOCK TABLES"),
        ("PREPARE s FROM 'SELECT 1'", "DEALLOCATE PREPARE s"),
        ("HANDLER budget OPEN", "HANDLER budget CLOSE"),
        ("SET TRANSACTION READ ONLY", "COMMIT"),
        ("SET insert_id = 5", "INSERT INTO budget_ai (v) VALUES (7)"),
        ("SET timestamp = 1", "SET timestamp = DEFAULT"),
        ("SELECT 1; SELECT GET_LOCK('M', 0)", "DO RELEASE_LOCK('M')"),
        ("XA START 'x'", "XA END 'x'; XA ROLLBACK 'x'"),
    ];
    a.query_drop("CREATE TABLE budget (a INT)")
        .await
        .expect("create");
    a.query_drop("CREATE TABLE budget_ai (id INT AUTO_INCREMENT PRIMARY KEY, v INT)")
        .await
        .expect("create");
    for (make, undo) in cases {
        a.query_drop(*make)
            .await
            .unwrap_or_else(|e| panic!("{make}: {e}"));
        assert!(!backend_free(&p).await, "`{make}` did not pin");
        a.query_drop(*undo)
            .await
            .unwrap_or_else(|e| panic!("{undo}: {e}"));
        assert!(
            backend_free(&p).await,
            "`{undo}` did not end the pin of `{make}`"
        );
    }
    // The statement that failed after taking the lock still pins.
    let _ = a
        .query_drop("SELECT GET_LOCK('N', 0); SELECT * FROM nosuch")
        .await;
    assert!(!backend_free(&p).await, "lock before an error did not pin");
    a.query_drop("DO RELEASE_LOCK('N')").await.expect("release");
    assert!(backend_free(&p).await);
    // Nothing of A is visible on the backend B now gets.
    let mut b = raw(&p).await;
    let probe = b
        .query_rows(
            "SELECT @x, @y, IS_USED_LOCK('L'), IS_USED_LOCK('M'), IS_USED_LOCK('N'), @@tx_read_only, @@insert_id",
        )
        .await;
    assert_eq!(
        probe,
        vec![vec![
            None,
            None,
            None,
            None,
            None,
            Some("0".to_string()),
            Some("0".to_string())
        ]]
    );
    assert!(matches!(b.query("SELECT * FROM tt").await, Response::Err(e) if e.code == 1146));
    assert!(matches!(b.query("EXECUTE s").await, Response::Err(e) if e.code == 1243));
    let ts: f64 = b
        .query_one("SELECT UNIX_TIMESTAMP() - @@timestamp")
        .await
        .parse()
        .expect("ts");
    assert!(ts.abs() < 60.0, "timestamp leaked: {ts}");
}

/// Logs in through the proxy as the raw client with `caps` (the pool key's
/// flavour comes from them: two clients share a backend only when their
/// flavours match).
async fn raw_with(p: &Proxy, caps: u32) -> RawConn {
    match RawConn::try_connect_with(&p.addr.to_string(), "app", "secret", Some("test"), caps, 45)
        .await
    {
        Ok(c) => c,
        Err(e) => panic!("login via proxy: {e:?}"),
    }
}

/// The server thread of the backend running `c`'s statements (not
/// CONNECTION_ID(), which the proxy answers; pseudo_thread_id is never
/// replayed). Reads no table: the diagnostics area stays as it was.
async fn backend_thread(c: &mut RawConn) -> String {
    c.query_one("SELECT @@pseudo_thread_id").await
}

/// A and B differ only in CLIENT_MULTI_STATEMENTS (not part of the pool
/// key's flavour): B gets A's very backend, proven by its thread id, and
/// still cannot stack statements.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_statements_option_never_crosses_clients() {
    use common::raw::{BASE_CAPS, DEPRECATE_EOF, MULTI_STATEMENTS};
    let db = binlog_server();
    let p = one_backend(&db).await;
    // A negotiates MULTI_STATEMENTS and uses it.
    let mut a = raw_with(&p, BASE_CAPS | DEPRECATE_EOF | MULTI_STATEMENTS).await;
    let thread_a = backend_thread(&mut a).await;
    let multi = a.query_multi("SELECT 1; SELECT 2").await;
    assert_eq!(multi.len(), 2, "multi for A");
    a.quit().await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    // B did not ask for it: a stacked query is refused, as directly.
    let mut b = raw_with(&p, BASE_CAPS | DEPRECATE_EOF).await;
    assert_eq!(
        backend_thread(&mut b).await,
        thread_a,
        "B must get A's backend for the test to mean anything"
    );
    let mut d = RawConn::try_connect_with(
        &db.addr(),
        "app",
        "secret",
        Some("test"),
        BASE_CAPS | DEPRECATE_EOF,
        45,
    )
    .await
    .expect("direct login");
    let via = b.query("SELECT 1; DROP TABLE IF EXISTS nothing_here").await;
    let direct = d.query("SELECT 1; DROP TABLE IF EXISTS nothing_here").await;
    match (via, direct) {
        (Response::Err(v), Response::Err(d)) => assert_eq!((v.code, v.state), (d.code, d.state)),
        (v, d) => panic!(
            "stacked query: proxy {} / direct {}",
            common::raw::brief(&v),
            common::raw::brief(&d)
        ),
    }
}

/// A leaves a warning and an error; B, of A's flavour, gets A's very
/// backend (proven by its thread id) with a clean diagnostics area.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diagnostics_never_cross_clients() {
    use common::raw::{BASE_CAPS, DEPRECATE_EOF};
    let db = binlog_server();
    let p = one_backend(&db).await;
    let caps = BASE_CAPS | DEPRECATE_EOF;
    let mut a = raw_with(&p, caps).await;
    let thread_a = backend_thread(&mut a).await;
    a.query("SELECT 1/0").await;
    // Read right away, A sees its own warning.
    assert_eq!(a.query_rows("SHOW WARNINGS").await.len(), 1);
    match a.query("SELECT * FROM nosuch_table").await {
        Response::Err(e) => assert_eq!(e.code, 1146),
        other => panic!("error expected: {}", common::raw::brief(&other)),
    }
    // Still A's own, as directly.
    assert_eq!(a.query_rows("SHOW ERRORS").await.len(), 1);
    a.query("SELECT * FROM nosuch_table").await;
    // The hold expires; B gets the backend and a clean diagnostics area.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let mut b = raw_with(&p, caps).await;
    assert_eq!(
        b.query_rows("SHOW WARNINGS").await,
        Vec::<Vec<Option<String>>>::new()
    );
    assert_eq!(
        b.query_rows("SHOW ERRORS").await,
        Vec::<Vec<Option<String>>>::new()
    );
    assert_eq!(b.query_one("SELECT @@warning_count").await, "0");
    assert_eq!(
        backend_thread(&mut b).await,
        thread_a,
        "B must get A's backend for the test to mean anything"
    );
    a.quit().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_default_converges() {
    let db = binlog_server();
    let p = Proxy::builder(&db).groups(1).max_backend(2).start().await;
    let mut a = conn(&p).await;
    let mut other = conn(&p).await;
    a.query_drop("SET SESSION wait_timeout = 100")
        .await
        .expect("set");
    a.query_drop("SET SESSION wait_timeout = DEFAULT")
        .await
        .expect("default");
    let sets = |db: &MariaDb| -> u64 {
        db.sql("SHOW GLOBAL STATUS LIKE 'Com_set_option'")
            .split_whitespace()
            .last()
            .and_then(|v| v.parse().ok())
            .expect("Com_set_option")
    };
    let before = sets(&db);
    for i in 0..20 {
        if i % 2 == 0 {
            other.query_drop("BEGIN").await.expect("begin");
            other.query_drop("SELECT 1").await.expect("hold");
        }
        a.query_drop("SELECT 1").await.expect("select");
        if i % 2 == 0 {
            other.query_drop("COMMIT").await.expect("commit");
        }
    }
    let after = sets(&db);
    assert!(
        after - before <= 4,
        "the plan re-sent SET on every move: {} SET statements",
        after - before
    );
    let wt: Option<u64> = a.query_first("SELECT @@wait_timeout").await.expect("wt");
    assert_eq!(wt, Some(28800));
    // sql_log_bin is never replayed (it needs SUPER and would fail inside a
    // transaction); a transaction after the default works.
    a.query_drop("BEGIN").await.expect("begin");
    a.query_drop("SELECT 1").await.expect("in txn");
    a.query_drop("COMMIT").await.expect("commit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_kill_form_is_mapped_or_refused() {
    let db = binlog_server();
    let p = Proxy::builder(&db).groups(1).max_backend(3).start().await;
    let mut a = conn(&p).await;
    for q in [
        "KILL 1; SELECT 1",
        "SELECT 1; KILL 1",
        "EXECUTE IMMEDIATE 'KILL 1'",
        // Evaluating the expression would change the session.
        "KILL @x := 1",
        "KILL GET_LOCK('l', 0)",
    ] {
        assert_eq!(code(&mut a, q).await, 1235, "{q} was not refused");
    }
    // A server thread id is never passed on: a direct connection's id that
    // no proxy session has is unknown, and that connection lives on.
    let mut direct = Conn::from_url(db.url("app", "secret", "test"))
        .await
        .expect("direct");
    let sid = direct.id();
    let live: Vec<u32> = vec![a.id()];
    if !live.contains(&sid) {
        assert_eq!(code(&mut a, &format!("KILL {sid}")).await, 1094);
        direct.query_drop("SELECT 1").await.expect("direct alive");
    }
    assert_eq!(code(&mut a, "KILL 999999").await, 1094);
    // KILL <expression>: evaluated by the server, taken as a proxy id.
    assert_eq!(
        code(&mut a, "KILL (('x' IN (SELECT 1)) MOD 44)").await,
        1094
    );
    let mut victim = conn(&p).await;
    a.query_drop(format!("SET @v = {}", victim.id()))
        .await
        .expect("set");
    assert_eq!(code(&mut a, "KILL @v").await, 0);
    assert_gone(&mut victim).await;
    // A prepared KILL (COM_STMT_PREPARE) with a proxy id.
    let mut victim = conn(&p).await;
    let st = a
        .prep(format!("KILL {}", victim.id()))
        .await
        .expect("prepare KILL");
    a.exec_drop(&st, ()).await.expect("execute KILL");
    assert_gone(&mut victim).await;
    // PREPARE … FROM 'KILL n' / EXECUTE: the proxy id again.
    let mut victim = conn(&p).await;
    a.query_drop(format!("PREPARE s FROM 'KILL {}'", victim.id()))
        .await
        .expect("PREPARE");
    a.query_drop("EXECUTE s").await.expect("EXECUTE");
    assert_gone(&mut victim).await;
    a.query_drop("DEALLOCATE PREPARE s").await.expect("dealloc");
    assert_eq!(code(&mut a, "EXECUTE s").await, 1243, "s still known");
    // KILL QUERY ID: only a statement of a proxy session the client owns.
    let mut sleeper = conn(&p).await;
    let run = tokio::spawn(async move {
        let r = sleeper.query_drop("SELECT SLEEP(30) AS via_proxy").await;
        (r, sleeper)
    });
    let qid = wait_query_id(&mut a, "SELECT SLEEP(30) AS via_proxy").await;
    let t = std::time::Instant::now();
    assert_eq!(code(&mut a, &format!("KILL QUERY ID {qid}")).await, 0);
    let (r, _sleeper) = run.await.expect("join");
    match r {
        Ok(()) | Err(mysql_async::Error::Server(_)) => {}
        Err(e) => panic!("sleeper: {e}"),
    }
    assert!(t.elapsed() < Duration::from_secs(20), "query not killed");
    // A query of a direct connection is not the proxy's to kill.
    let mut d2 = Conn::from_url(db.url("app", "secret", "test"))
        .await
        .expect("direct");
    let run = tokio::spawn(async move {
        let r = d2.query_drop("SELECT SLEEP(2) AS direct_one").await;
        (r, d2)
    });
    let qid = wait_query_id(&mut a, "SELECT SLEEP(2) AS direct_one").await;
    assert_eq!(code(&mut a, &format!("KILL QUERY ID {qid}")).await, 1235);
    let (r, _d2) = run.await.expect("join");
    r.expect("the direct query ran to its end");
    assert_eq!(code(&mut a, "KILL QUERY ID 0").await, 1957);
    // KILL USER reports the sessions it reached.
    let _v1 = conn(&p).await;
    let _v2 = conn(&p).await;
    let mut admin_like = Conn::from_url(p.app_url()).await.expect("login");
    admin_like
        .query_drop("KILL QUERY USER app@nohost")
        .await
        .expect("kill user other host");
    assert_eq!(admin_like.affected_rows(), 0, "no session from nohost");
    // The pool still serves everyone else.
    let mut c = conn(&p).await;
    c.query_drop("SELECT 1").await.expect("pool intact");
}

/// The session was ended by a KILL.
async fn assert_gone(victim: &mut Conn) {
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        victim.query_drop("SELECT 1").await.is_err(),
        "victim still alive"
    );
}

/// The server query id of the statement whose text is `info`, once running.
async fn wait_query_id(c: &mut Conn, info: &str) -> u64 {
    let q = format!("SELECT QUERY_ID FROM information_schema.PROCESSLIST WHERE INFO = '{info}'");
    for _ in 0..100 {
        if let Some(id) = c.query_first::<u64, _>(&q).await.expect("processlist") {
            return id;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{info} never ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schema_dropped_under_the_session() {
    let db = binlog_server();
    db.sql("CREATE DATABASE gone_db");
    let p = Proxy::builder(&db).groups(1).max_backend(2).start().await;
    let mut a = Conn::from_url(p.url("app", "secret", "gone_db"))
        .await
        .expect("login");
    let mut other = conn(&p).await;
    db.sql("DROP DATABASE gone_db");
    // Force A onto a backend that must be brought to its schema.
    other.query_drop("BEGIN").await.expect("begin");
    other.query_drop("SELECT 1").await.expect("hold");
    let one: Option<u8> = a
        .query_first("SELECT 1")
        .await
        .expect("session still works");
    assert_eq!(one, Some(1));
    other.query_drop("COMMIT").await.expect("commit");
    a.query_drop("USE test").await.expect("USE other works");
    let db_now: Option<String> = a.query_first("SELECT DATABASE()").await.expect("db");
    assert_eq!(db_now.as_deref(), Some("test"));
}

/// A `SET GLOBAL` run through the proxy reaches the next client as it
/// would a new direct connection: pooled backends opened before it carry
/// the old global as their session value and are reset before reuse.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_global_through_the_proxy_reaches_new_clients() {
    let db = binlog_server();
    let p = one_backend(&db).await;
    let probe = "SELECT @@div_precision_increment";
    {
        let mut a = conn(&p).await;
        let v: Option<u64> = a.query_first(probe).await.expect("probe");
        assert_eq!(v, Some(4), "server default");
        a.query_drop("SET GLOBAL div_precision_increment = 7")
            .await
            .expect("set global");
    }
    let mut direct = Conn::from_url(db.url("app", "secret", "test"))
        .await
        .expect("direct");
    let want: Option<u64> = direct.query_first(probe).await.expect("direct");
    assert_eq!(want, Some(7));
    for round in 0..2 {
        let mut b = conn(&p).await;
        let got: Option<u64> = b.query_first(probe).await.expect("probe");
        assert_eq!(got, want, "round {round}: a new client sees the old global");
        // What a client sets itself still stays with it alone.
        b.query_drop("SET SESSION div_precision_increment = 9")
            .await
            .expect("set session");
    }
    db.sql("SET GLOBAL div_precision_increment = 4");
}

/// What main/packet checks after `SET GLOBAL max_allowed_packet` (issue
/// 16 E.18), from the session that ran it (`a`, open before) and a new one
/// (`b`): the session values (copied from the globals at connect, read-only
/// in a session), and what a result larger than the new limit gives.
/// `@@max_allowed_packet`, `@@net_buffer_length`, a 2000-byte result's
/// length (NULL past the limit), a 1500-byte literal's length.
type PacketRow = (u64, u64, Option<u64>, u64);

async fn packet_globals(a: &mut Conn, b: Option<&mut Conn>) -> Vec<String> {
    let probe = "SELECT @@max_allowed_packet, @@net_buffer_length, \
                 LENGTH(REPEAT('a', 2000)), LENGTH('"
        .to_string()
        + &"b".repeat(1500)
        + "')";
    let mut seen = Vec::new();
    let row: Result<Option<PacketRow>, _> = a.query_first(&probe).await;
    seen.push(format!("a {row:?}"));
    if let Some(b) = b {
        let row: Result<Option<(u64, u64, Option<u64>)>, _> = b
            .query_first(
                "SELECT @@max_allowed_packet, @@net_buffer_length, LENGTH(REPEAT('a', 2000))",
            )
            .await;
        seen.push(format!("b {row:?}"));
    }
    seen
}

/// Issue 16 E.18 (main/packet): after `SET GLOBAL max_allowed_packet` and
/// `net_buffer_length` through the proxy, a new client sees the new values
/// as a new direct connection does, and the session that ran it keeps its
/// own (a long statement and a large result still work for it: the proxy's
/// packet limit is the one the session logged in with).
///
/// The server fixes a connection's command limit when it connects
/// (measured on 10.11: after the change, COM_RESET_CONNECTION leaves a
/// connection's limit as it was, though `@@max_allowed_packet` reads the
/// new value; a connection opened after it refuses a longer command with
/// 1153). So a long statement of a session open before works on a backend
/// opened before the change, and is refused on one opened after it (docs/
/// compatibility.md): `other` runs its statement in a transaction begun
/// before, so that the backend it lands on is certain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_global_max_allowed_packet_reaches_new_sessions_only() {
    let db = binlog_server();
    let set = "SET GLOBAL max_allowed_packet = 1024, GLOBAL net_buffer_length = 1024";
    let restore = "SET GLOBAL max_allowed_packet = DEFAULT, GLOBAL net_buffer_length = DEFAULT";
    let url = db.url("app", "secret", "test");
    let mut a = Conn::from_url(url.clone()).await.expect("direct");
    a.query_drop(set).await.expect("set global");
    let mut b = Conn::from_url(url).await.expect("direct");
    let want = packet_globals(&mut a, Some(&mut b)).await;
    drop(b);
    a.query_drop(restore).await.expect("restore");
    drop(a);

    let p = Proxy::builder(&db).groups(1).max_backend(3).start().await;
    let mut a = conn(&p).await;
    let mut other = conn(&p).await;
    other.query_drop("BEGIN").await.expect("begin");
    let _ = packet_globals(&mut other, None).await;
    a.query_drop(set).await.expect("set global");
    let mut b = conn(&p).await;
    let got = packet_globals(&mut a, Some(&mut b)).await;
    assert_eq!(got, want, "through myplex");
    // Another session open before: the proxy still takes its long
    // statements (before, it applied the new global to every session and
    // refused them itself, 1153 and the connection closed).
    let old = packet_globals(&mut other, None).await;
    assert!(
        old[0].starts_with("a Ok("),
        "another session open before: {old:?}"
    );
    other.query_drop("COMMIT").await.expect("commit");
    a.query_drop(restore).await.expect("restore");
}

/// A new session's status flags (global autocommit, the global sql_mode's
/// NO_BACKSLASH_ESCAPES and ANSI_QUOTES) are in the greeting and the login
/// OK as the server's own greeting and OK say them, also right after a
/// `SET GLOBAL` through the proxy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn greeting_status_follows_the_globals() {
    let db = binlog_server();
    let p = one_backend(&db).await;
    let via_addr = p.addr.to_string();
    let direct_addr = db.addr();
    let flags = |c: &RawConn| (c.greeting_status, c.login_status);
    let mut admin = conn(&p).await;
    // Its own setting, so that the globals below do not open transactions
    // on the one backend.
    admin
        .query_drop("SET SESSION autocommit = 1")
        .await
        .expect("autocommit");
    let mut seen = Vec::new();
    for set in [
        "SET GLOBAL autocommit = 0",
        "SET GLOBAL sql_mode = 'NO_BACKSLASH_ESCAPES,ANSI'",
        "SET GLOBAL autocommit = 1, GLOBAL sql_mode = DEFAULT",
    ] {
        admin.query_drop(set).await.expect(set);
        let via = RawConn::connect(&via_addr, "app", "secret", Some("test"), false).await;
        let direct = RawConn::connect(&direct_addr, "app", "secret", Some("test"), false).await;
        assert_eq!(flags(&via), flags(&direct), "after {set}");
        seen.push(flags(&direct));
        // The session runs with what its status says.
        let mut via = via;
        let ac = via.query_one("SELECT @@autocommit").await;
        assert_eq!(ac == "1", via.login_status & 2 != 0, "after {set}");
        via.quit().await;
        direct.quit().await;
    }
    // The three cases differ: the check above could not pass by accident.
    assert_ne!(seen[0], seen[2], "{seen:?}");
    assert_ne!(seen[1], seen[2], "{seen:?}");
    // The same through a prepared statement.
    let mut ps = RawConn::connect(&via_addr, "app", "secret", Some("test"), false).await;
    let stmt = ps
        .prepare("SET GLOBAL autocommit = 0")
        .await
        .expect("prepare");
    let r = ps.execute(stmt.id, 0, &[], false).await;
    assert!(matches!(r, Response::Ok(_)), "{}", common::raw::brief(&r));
    let via = RawConn::connect(&via_addr, "app", "secret", Some("test"), false).await;
    let direct = RawConn::connect(&direct_addr, "app", "secret", Some("test"), false).await;
    assert_eq!(flags(&via), flags(&direct), "after a prepared SET GLOBAL");
    assert_eq!(via.greeting_status & 2, 0, "autocommit off in the greeting");
    admin
        .query_drop("SET GLOBAL autocommit = 1")
        .await
        .expect("restore");
}

/// COM_CHANGE_USER ends what the old session held before it answers: a
/// user lock is free for the next client at once (the server resets the
/// session synchronously; closing the backend would free it only when the
/// server notices the closed socket).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn change_user_frees_user_locks_before_it_answers() {
    let db = binlog_server();
    let p = Proxy::builder(&db).groups(1).max_backend(3).start().await;
    let addr = p.addr.to_string();
    let mut other = conn(&p).await;
    for round in 0..10 {
        let mut a = RawConn::connect(&addr, "app", "secret", Some("test"), false).await;
        assert_eq!(a.query_one("SELECT GET_LOCK('cu_lock', 5)").await, "1");
        let (_, reply) = a.change_user("app", "secret", Some("test")).await;
        assert_eq!(
            reply.as_slice().first(),
            Some(&0x00),
            "round {round}: {reply:02x?}"
        );
        let free: Option<i64> = other
            .query_first("SELECT IS_FREE_LOCK('cu_lock')")
            .await
            .expect("is_free_lock");
        assert_eq!(
            free,
            Some(1),
            "round {round}: the old session's lock is still held"
        );
        assert_eq!(
            a.query_one("SELECT IS_USED_LOCK('cu_lock') IS NULL").await,
            "1"
        );
        a.quit().await;
    }
}

/// COM_CHANGE_USER asking for a character set that cannot be a client
/// character set gets the server's 1231 (after its one-second delay) and the
/// connection goes on as before, as on the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn change_user_to_ucs2_is_refused_as_the_server_does() {
    let db = binlog_server();
    let p = one_backend(&db).await;
    let mut got = Vec::new();
    for addr in [p.addr.to_string(), db.addr()] {
        let mut c = RawConn::connect(&addr, "app", "secret", Some("test"), false).await;
        let (_, reply) = c.change_user_with("app", "secret", Some("test"), 35).await;
        let err = common::raw::parse_err(&reply).expect("change user to ucs2 is refused");
        let after = c
            .query_rows("SELECT @@character_set_client, USER() IS NOT NULL, DATABASE()")
            .await;
        got.push((err, after));
        c.quit().await;
    }
    assert_eq!(got[0].0.code, 1231, "{:?}", got[0]);
    assert_eq!(got[0], got[1], "through the proxy, then direct");
}

/// The diagnostics area stays with the client through statements that use
/// no table, text or prepared, as on the server: `SHOW WARNINGS` after
/// `SELECT 1` still lists the earlier statement's warning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warnings_outlive_statements_that_use_no_table() {
    let db = binlog_server();
    let p = Proxy::builder(&db)
        .groups(1)
        .max_backend(2)
        .with(|c| c.pool.diagnostics_hold_ms = 2000)
        .start()
        .await;
    let mut got = Vec::new();
    for addr in [p.addr.to_string(), db.addr()] {
        let mut c = RawConn::connect(&addr, "app", "secret", Some("test"), false).await;
        let mut seen = Vec::new();
        c.query_ok("DROP TABLE IF EXISTS no_such_table_here").await;
        c.query_ok("SET @x = 1").await;
        seen.push(c.query_rows("SELECT 1 + 1").await);
        seen.push(c.query_rows("SELECT @@warning_count").await);
        let s = c.prepare("SELECT 3").await.expect("prepare");
        let r = c.execute(s.id, 0, &[], false).await;
        seen.push(r.rows().text_rows());
        c.close_stmt(s.id).await;
        seen.push(c.query_rows("SHOW WARNINGS").await);
        // A statement that reads a table clears the list.
        c.query_rows("SELECT COUNT(*) FROM information_schema.SCHEMATA")
            .await;
        seen.push(c.query_rows("SHOW WARNINGS").await);
        got.push(seen);
        c.quit().await;
    }
    assert_eq!(got[1][3].len(), 1, "direct keeps the note: {:?}", got[1]);
    assert_eq!(got[0], got[1], "through the proxy, then direct");
}

/// With NO_BACKSLASH_ESCAPES or ANSI_QUOTES as the server's global
/// sql_mode (the client never set it), the proxy reads statements as the
/// server does: `'C:\'` ends the string there, so what follows is code
/// whose state (a user variable, a lock) pins the session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn global_sql_mode_quoting_is_how_the_proxy_reads_sql() {
    let db = binlog_server();
    for (mode, leak, lock) in [
        (
            "NO_BACKSLASH_ESCAPES",
            "SELECT 'C:\\', @leak := 'A-secret' # '",
            "SELECT 'C:\\', GET_LOCK('nbe', 0) # '",
        ),
        (
            "ANSI_QUOTES",
            "SELECT 1 AS \"C:\\\", @leak := 'A-secret' # \"",
            "SELECT 1 AS \"C:\\\", GET_LOCK('nbe', 0) # \"",
        ),
    ] {
        db.sql(&format!("SET GLOBAL sql_mode = '{mode}'"));
        // Started after the change: its greeting says the new defaults.
        let p = one_backend(&db).await;
        let addr = p.addr.to_string();
        let mut a = RawConn::connect(&addr, "app", "secret", Some("test"), false).await;
        for sql in [leak, lock] {
            assert!(
                matches!(a.query(sql).await, Response::Rows(_)),
                "{mode}: {sql}"
            );
        }
        // A holds state: B waits for the one backend (1317), or, if the
        // proxy let it go, would read A's variable and take A's lock.
        let mut b = raw(&p).await;
        let seen = b.query("SELECT @leak, GET_LOCK('nbe', 0)").await;
        match &seen {
            Response::Err(e) => assert_eq!(e.code, 1317, "{mode}: {e:?}"),
            other => panic!(
                "{mode}: another client got the backend holding A's state: {}",
                common::raw::brief(other)
            ),
        }
        assert_eq!(
            a.query_one("SELECT RELEASE_LOCK('nbe')").await,
            "1",
            "{mode}"
        );
        a.quit().await;
        drop(p);
    }
    db.sql("SET GLOBAL sql_mode = DEFAULT");
}

/// A warning of an earlier statement of a multi-statement stays in the
/// server's list when the last statement uses no table: the backend is
/// held for it and cleared before anyone else gets it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warnings_of_an_earlier_statement_never_reach_another_client() {
    let db = binlog_server();
    let p = one_backend(&db).await;
    let mut a = conn(&p).await;
    a.query_drop("SELECT CAST('secret-of-A' AS SIGNED); SELECT 2")
        .await
        .expect("multi");
    let own: Vec<(String, u32, String)> = a.query("SHOW WARNINGS").await.expect("own");
    assert_eq!(own.len(), 1, "A sees its own warning, as direct: {own:?}");
    a.query_drop("DO CAST('do-secret' AS SIGNED); DO 1")
        .await
        .expect("do");
    // Past the hold (100 ms here), another client gets the backend.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let mut b = conn(&p).await;
    let rows: Vec<(String, u32, String)> = b.query("SHOW WARNINGS").await.expect("show");
    assert!(rows.is_empty(), "A's warnings reached B: {rows:?}");
}

/// A client that got a warning and then keeps sending statements that use
/// no table keeps its backend only for `pool.diagnostics_hold_ms`: others
/// get it after that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn polling_after_a_warning_does_not_keep_the_backend() {
    let db = binlog_server();
    let p = one_backend(&db).await;
    let mut a = conn(&p).await;
    a.query_drop("SELECT CAST('x' AS SIGNED)")
        .await
        .expect("warn");
    let poll = async {
        for _ in 0..60 {
            a.query_drop("SELECT NOW()").await.expect("poll");
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    };
    let other = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let mut b = conn(&p).await;
        code(&mut b, "SELECT 2").await
    };
    let ((), got) = tokio::join!(poll, other);
    assert_eq!(
        got, 0,
        "the other client waited out the queue timeout (1317)"
    );
}

/// `SET character_set_server` (DBD::MariaDB runs it at every connect) is a
/// plain setting: replayed with its coupled collation, it neither pins the
/// session nor reaches another client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn character_set_server_is_replayed_not_pinned() {
    let db = binlog_server();
    let p = one_backend(&db).await;
    let mut direct = Conn::from_url(db.url("app", "secret", "test"))
        .await
        .expect("direct");
    let mut a = conn(&p).await;
    let probe = "SELECT @@character_set_server, @@collation_server, @@character_set_database";
    for set in [
        "SET SESSION character_set_server = 'utf8mb4'",
        "SET SESSION collation_server = 'utf8mb4_unicode_ci'",
        "SET NAMES latin1",
    ] {
        for c in [&mut a, &mut direct] {
            c.query_drop(set).await.expect(set);
        }
        // Another client gets the one backend at once, with its own values.
        let mut b = conn(&p).await;
        let fresh: Option<(String, String, String)> = b.query_first(probe).await.expect("b");
        let mut d2 = Conn::from_url(db.url("app", "secret", "test"))
            .await
            .expect("direct 2");
        let want: Option<(String, String, String)> = d2.query_first(probe).await.expect("d2");
        assert_eq!(fresh, want, "after {set}: B sees a fresh session");
        drop(b);
        let got: Option<(String, String, String)> = a.query_first(probe).await.expect("a");
        let mine: Option<(String, String, String)> = direct.query_first(probe).await.expect("d");
        assert_eq!(got, mine, "after {set}: A keeps its own values");
    }
}

/// `SELECT FOUND_ROWS()` after selects with and without LIMIT offsets gives
/// what the server gives directly (the proxy counts offsets as the server
/// does, or holds the backend when it cannot know), and the column is named
/// as written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn found_rows_matches_direct_after_limit_offsets() {
    let db = binlog_server();
    let p = Proxy::builder(&db).groups(1).max_backend(2).start().await;
    db.sql(
        "CREATE TABLE test.fr (a INT); INSERT INTO test.fr VALUES (1),(2),(3),(4),(5),(6),(7),(8)",
    );
    let mut direct = Conn::from_url(db.url("app", "secret", "test"))
        .await
        .expect("direct");
    let mut via = conn(&p).await;
    for q in [
        "SELECT a FROM fr",
        "SELECT a FROM fr LIMIT 3",
        "SELECT a FROM fr LIMIT 2,3",
        "SELECT a FROM fr LIMIT 3 OFFSET 6",
        "SELECT a FROM fr LIMIT 10,3",
        "SELECT a FROM fr WHERE a > 100 LIMIT 1,1",
        "(SELECT a FROM fr LIMIT 1,2) UNION ALL (SELECT a FROM fr LIMIT 1)",
        "SELECT DISTINCT a FROM fr LIMIT 2,2",
    ] {
        for c in [&mut direct, &mut via] {
            c.query_drop(q).await.expect(q);
        }
        let mut got = Vec::new();
        for c in [&mut direct, &mut via] {
            let r = c
                .query_iter("select  found_rows()")
                .await
                .expect("found_rows");
            let name = r.columns_ref()[0].name_str().into_owned();
            let rows: Vec<u64> = r.collect_and_drop().await.expect("rows");
            got.push((name, rows));
        }
        assert_eq!(got[1], got[0], "after {q}");
    }
}

/// Reading the warning and error counts keeps the diagnostics area for a
/// following SHOW WARNINGS, as on the server (MyISAM's rollback warning).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reading_the_counts_keeps_the_warnings() {
    let db = binlog_server();
    let p = Proxy::builder(&db).groups(1).max_backend(2).start().await;
    let mut a = conn(&p).await;
    a.query_drop("CREATE TABLE rb (n INT PRIMARY KEY) ENGINE=MyISAM")
        .await
        .expect("create");
    a.query_drop("BEGIN").await.expect("begin");
    a.query_drop("INSERT INTO rb VALUES (4)")
        .await
        .expect("insert");
    a.query_drop("ROLLBACK").await.expect("rollback");
    let w: Option<u64> = a.query_first("SELECT @@warning_count").await.expect("w");
    assert_eq!(w, Some(1));
    let e: Option<u64> = a.query_first("SELECT @@error_count").await.expect("e");
    assert_eq!(e, Some(0));
    let rows: Vec<(String, u32, String)> = a.query("SHOW WARNINGS").await.expect("show");
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].1, 1196);
}

/// A client's own `session_track_*` settings decide which session-state
/// entries its OKs carry (the backend keeps myplex's trackers), in
/// transaction and in session mode: the raw OK bytes equal direct ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clients_own_tracker_settings_shape_its_oks() {
    use common::raw::{BASE_CAPS, DEPRECATE_EOF, SESSION_TRACK};
    let db = binlog_server();
    for mode in [
        myplex::config::PoolMode::Transaction,
        myplex::config::PoolMode::Session,
    ] {
        let p = Proxy::builder(&db)
            .groups(1)
            .max_backend(2)
            .with(move |c| c.pool.mode = mode)
            .start()
            .await;
        let mut got = Vec::new();
        for addr in [p.addr.to_string(), db.addr()] {
            let caps = BASE_CAPS | DEPRECATE_EOF | SESSION_TRACK;
            let mut c = RawConn::try_connect_with(&addr, "app", "secret", Some("test"), caps, 45)
                .await
                .expect("login");
            let mut oks = Vec::new();
            for sql in [
                "SET SESSION session_track_state_change = ON",
                "SET @tracked = 1",
                "SET SESSION session_track_system_variables = 'time_zone'",
                "SET SESSION time_zone = '+01:00', sql_mode = 'ANSI'",
                "SET SESSION session_track_state_change = OFF",
                "SET @tracked = 2",
            ] {
                oks.push(c.query_reply(sql).await);
            }
            got.push(oks);
            c.quit().await;
        }
        assert_eq!(got[0], got[1], "{mode:?}: through the proxy, then direct");
    }
}

/// A backend reset before it is shared (here: after a temporary table was
/// dropped) keeps its schema, but the server then reports the *global*
/// character set as `character_set_database`; the next client naming that
/// schema must see the schema's, as a new direct connection does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_backend_reports_the_schemas_character_set() {
    let db = binlog_server();
    db.sql("CREATE DATABASE csdb CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci");
    let p = one_backend(&db).await;
    let probe = "SELECT @@character_set_database, @@collation_database, DATABASE()";
    let via = p.url("app", "secret", "csdb");
    let mut direct = Conn::from_url(db.url("app", "secret", "csdb"))
        .await
        .expect("direct");
    let want: Option<(String, String, String)> = direct.query_first(probe).await.expect("d");
    assert_eq!(
        want.as_ref().map(|w| w.0.as_str()),
        Some("utf8mb4"),
        "the schema's character set, not the server's"
    );
    for round in 0..3 {
        let mut a = Conn::from_url(via.clone()).await.expect("a");
        a.query_drop("CREATE TEMPORARY TABLE tt (x INT)")
            .await
            .expect("create");
        a.query_drop("DROP TEMPORARY TABLE tt").await.expect("drop");
        drop(a);
        let mut b = Conn::from_url(via.clone()).await.expect("b");
        let got: Option<(String, String, String)> = b.query_first(probe).await.expect("b");
        assert_eq!(got, want, "round {round}");
    }
}

/// With autocommit off, a statement that fails may still have started a
/// transaction (InnoDB registers it, and the duplicate-key check's lock,
/// before the statement fails), and the ERR says nothing of it. The
/// session keeps its backend: when it leaves at once, the transaction and
/// its lock go with the backend (no other client inherits them — found
/// with DBD::MariaDB's rt75353-innodb-lock-timeout.t); when it stays idle
/// past the diagnostics hold, it still reads `@@in_transaction` as direct.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_statement_with_autocommit_off_keeps_its_transaction() {
    let db = MariaDb::shared();
    db.sql(
        "CREATE TABLE IF NOT EXISTS test.ac0_err (id INT PRIMARY KEY) ENGINE=InnoDB;
         INSERT IGNORE INTO test.ac0_err VALUES (1)",
    );
    let p = Proxy::builder(db).groups(1).max_backend(2).start().await;
    let mut seen = Vec::new();
    for addr in [p.addr.to_string(), db.addr()] {
        let failed = || async {
            let mut c = RawConn::connect(&addr, "app", "secret", Some("test"), false).await;
            c.query_ok("SET autocommit = 0").await;
            let e = c.query("INSERT INTO ac0_err VALUES (1)").await.err();
            assert_eq!(e.code, 1062, "{e:?}");
            c
        };
        failed().await.quit().await;
        // The lock left with the session: a direct writer does not wait.
        let out = db.cli(
            &["-N", "-B", "test"],
            "SET SESSION innodb_lock_wait_timeout = 2; DELETE FROM ac0_err WHERE id = 1; INSERT INTO ac0_err VALUES (1);",
        );
        assert!(
            out.status.success(),
            "{addr}: the failed statement's lock outlived its session: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut c = failed().await;
        tokio::time::sleep(Duration::from_millis(1500)).await;
        seen.push(c.query_one("SELECT @@in_transaction").await);
        c.query_ok("ROLLBACK").await;
        c.quit().await;
    }
    assert_eq!(seen[0], seen[1], "through myplex, then direct");
    assert_eq!(seen[1], "1");
}

/// Session mode skips the LAST_INSERT_ID() read-back (the backend is the
/// session's for life): the value must still not reach the next client of
/// the backend (issue 16, B.5). Proven on the same backend thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_mode_last_insert_id_never_reaches_the_next_client() {
    let db = MariaDb::shared();
    let p = Proxy::builder(db)
        .groups(1)
        .max_backend(1)
        .session_mode()
        .start()
        .await;
    let t = "sa_sm_lid";
    db.sql(&format!(
        "CREATE TABLE IF NOT EXISTS test.{t} (id INT AUTO_INCREMENT PRIMARY KEY, v INT)"
    ));
    let mut a = conn(&p).await;
    let thread_a: Option<u64> = a
        .query_first("SELECT @@pseudo_thread_id")
        .await
        .expect("id");
    a.query_drop(format!("INSERT INTO {t} (v) VALUES (1)"))
        .await
        .expect("insert");
    let id_a: Option<u64> = a.query_first("SELECT LAST_INSERT_ID()").await.expect("lid");
    assert!(id_a.unwrap_or(0) > 0, "A's insert id: {id_a:?}");
    a.disconnect().await.expect("disconnect");
    let mut b = conn(&p).await;
    let thread_b: Option<u64> = b
        .query_first("SELECT @@pseudo_thread_id")
        .await
        .expect("id");
    assert_eq!(
        thread_a, thread_b,
        "B must get A's backend for the test to mean anything"
    );
    let id_b: Option<u64> = b.query_first("SELECT LAST_INSERT_ID()").await.expect("lid");
    assert_eq!(id_b, Some(0), "B sees A's LAST_INSERT_ID()");
}

/// In session mode the backend is the client's alone, so myplex asks the
/// server nothing after a `CALL` (its checks are `SELECT`s that would show
/// in the client's own session counters and move the row number the
/// server's next warning reports): `Com_select` moves as it does direct.
#[tokio::test]
async fn session_mode_runs_no_check_after_call() {
    let db = MariaDb::shared();
    let p = Proxy::builder(db)
        .groups(1)
        .max_backend(1)
        .session_mode()
        .start()
        .await;
    let mut direct = Conn::from_url(db.url("app", "secret", "test"))
        .await
        .expect("direct");
    direct
        .query_drop("CREATE PROCEDURE IF NOT EXISTS test.sa_sm_quiet() SET @sa_sm = 1")
        .await
        .expect("create procedure");
    async fn selects_during_call(c: &mut Conn) -> i64 {
        let read = "SELECT VARIABLE_VALUE FROM information_schema.SESSION_STATUS \
                    WHERE VARIABLE_NAME = 'COM_SELECT'";
        let before: Option<i64> = c.query_first(read).await.expect("before");
        c.query_drop("CALL test.sa_sm_quiet()").await.expect("call");
        let after: Option<i64> = c.query_first(read).await.expect("after");
        after.unwrap_or(0) - before.unwrap_or(0)
    }
    let want = selects_during_call(&mut direct).await;
    let mut c = conn(&p).await;
    assert_eq!(selects_during_call(&mut c).await, want);
}

/// The session's active role.
async fn role(c: &mut Conn) -> Option<String> {
    c.query_first::<Option<String>, _>("SELECT CURRENT_ROLE()")
        .await
        .expect("CURRENT_ROLE()")
        .flatten()
}

/// The role a session has active after a change of its account's default
/// role made outside the proxy (here an administrator's `SET DEFAULT ROLE
/// … FOR`, directly on the server): direct, a session keeps the role it
/// logged in with, and a login after the change gets the new default. The
/// proxy learnt the default from its own `SET DEFAULT ROLE` and from its
/// backends' logins only, so after the administrator's change a new client
/// was served by a backend logged in with the old default role and had its
/// privileges. The pool now notices the change (a new backend's login
/// role, or the account's default read with each code catalog reading,
/// differing from what it knew) and starts a new roles epoch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_default_role_changed_outside_the_proxy_reaches_no_later_client() {
    let db = binlog_server();
    db.sql(
        "CREATE ROLE sa_r1;\n\
         GRANT SELECT ON mysql.* TO sa_r1;\n\
         GRANT sa_r1 TO 'app'@'%';",
    );
    let p = Proxy::builder(&db)
        .groups(1)
        .max_backend(2)
        .queue_timeout_ms(5000)
        .start()
        .await;
    let mut a = conn(&p).await;
    a.query_drop("SET DEFAULT ROLE sa_r1")
        .await
        .expect("SET DEFAULT ROLE");
    assert_eq!(
        role(&mut a).await,
        None,
        "A keeps the role it logged in with"
    );
    // D logs in after A's change: it has the new default, as direct, and
    // leaves a backend logged in with it idle.
    let mut d = conn(&p).await;
    assert_eq!(role(&mut d).await.as_deref(), Some("sa_r1"));
    // The administrator takes the default away, on the server itself.
    db.sql("SET DEFAULT ROLE NONE FOR 'app'@'%'");
    // A client logging in from now on gets no role, as direct, once the
    // pool noticed (within a few maintenance ticks).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let mut c = conn(&p).await;
        let now = role(&mut c).await;
        c.disconnect().await.expect("disconnect");
        if now.is_none() {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "10 s after the default role was taken away on the server, a new client still got {now:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Those logged in before keep theirs.
    assert_eq!(role(&mut d).await.as_deref(), Some("sa_r1"), "D's own role");
    assert_eq!(role(&mut a).await, None, "A's own role");
    d.disconnect().await.expect("disconnect");
    a.disconnect().await.expect("disconnect");
}

/// `SET @@autocommit = 0` run by a procedure is reported by no session
/// tracker (the unscoped form never is); the status flag of the CALL's
/// reply says it. The session's next statement, on whichever backend, runs
/// with autocommit off, as direct: a ROLLBACK undoes its insert. Before,
/// the session went on in autocommit on the next backend and the
/// ROLLBACK undid nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn autocommit_set_by_a_procedure_follows_the_session() {
    let db = binlog_server();
    db.sql(
        "CREATE TABLE test.ac_t (a INT) ENGINE=InnoDB;\n\
         CREATE PROCEDURE test.ac_off() SET @@autocommit = 0;",
    );
    let p = one_backend(&db).await;
    let mut a = conn(&p).await;
    a.query_drop("CALL ac_off()").await.expect("CALL");
    // Another client takes the only backend in between.
    let mut b = conn(&p).await;
    b.query_drop("SELECT 1").await.expect("B");
    b.disconnect().await.expect("disconnect");
    let ac: Option<u8> = a
        .query_first("SELECT @@autocommit")
        .await
        .expect("autocommit");
    assert_eq!(
        ac,
        Some(0),
        "A's autocommit after its procedure turned it off"
    );
    a.query_drop("INSERT INTO ac_t VALUES (1)")
        .await
        .expect("insert");
    a.query_drop("ROLLBACK").await.expect("rollback");
    let n: Option<u64> = a
        .query_first("SELECT COUNT(*) FROM ac_t")
        .await
        .expect("count");
    assert_eq!(n, Some(0), "A's ROLLBACK undid its insert, as direct");
    a.query_drop("SET autocommit = 1").await.expect("back on");
    a.disconnect().await.expect("disconnect");
}

/// A client that resets its connection (COM_RESET_CONNECTION) with an XA
/// branch prepared: MariaDB leaves that connection broken (1031 for every
/// later InnoDB statement). Direct, only that client's own connection is;
/// through the pool the backend must not reach the next client: a
/// connection that ran XA is closed, never reset and shared.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_reset_after_xa_prepare_reaches_no_other_client() {
    let db = MariaDb::shared();
    let p = one_backend(db).await;
    let table = format!("xa_reset_{}", std::process::id());
    let mut setup = conn(&p).await;
    setup
        .query_drop(format!(
            "CREATE OR REPLACE TABLE {table} (id INT AUTO_INCREMENT PRIMARY KEY, v INT) ENGINE=InnoDB"
        ))
        .await
        .expect("create");
    drop(setup);
    let xid = format!("'xa_{}'", std::process::id());
    let mut a = conn(&p).await;
    for sql in [
        format!("XA START {xid}"),
        format!("INSERT INTO {table} (v) VALUES (1)"),
        format!("XA END {xid}"),
        format!("XA PREPARE {xid}"),
    ] {
        a.query_drop(&sql).await.expect(&sql);
    }
    a.reset().await.expect("COM_RESET_CONNECTION");
    let mut b = conn(&p).await;
    let n: Option<u64> = b
        .query_first(format!("SELECT COUNT(*) FROM {table}"))
        .await
        .expect("the next client reads an InnoDB table");
    assert_eq!(n, Some(0), "the prepared branch's row is not committed");
    // The branch was detached when its connection closed: any connection
    // ends it.
    b.query_drop(format!("XA ROLLBACK {xid}"))
        .await
        .expect("XA ROLLBACK of the detached branch");
    let n: Option<u64> = a
        .query_first(format!("SELECT COUNT(*) FROM {table}"))
        .await
        .expect("the reset client goes on");
    assert_eq!(n, Some(0));
    b.query_drop(format!("DROP TABLE {table}"))
        .await
        .expect("drop");
}

/// One-shot settings stay until the server certainly used them: the
/// characteristics of `SET TRANSACTION` survive statements that start no
/// transaction (a client read-only transaction must not turn writable, an
/// isolation level must not drop, because the proxy guessed it was used),
/// and a one-shot `insert_id` survives statements that insert no generated
/// id — also when set through dynamic SQL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_shot_settings_last_until_the_server_uses_them() {
    let db = MariaDb::shared();
    let p = one_backend(db).await;
    let table = format!("one_shot_{}", std::process::id());
    let mut a = conn(&p).await;
    a.query_drop(format!(
        "CREATE OR REPLACE TABLE {table} (id INT AUTO_INCREMENT PRIMARY KEY, v INT) ENGINE=InnoDB"
    ))
    .await
    .expect("create");
    for set in [
        "SET TRANSACTION READ ONLY",
        "EXECUTE IMMEDIATE 'SET TRANSACTION READ ONLY'",
    ] {
        a.query_drop(set).await.expect(set);
        for between in ["SELECT 2", "DO 1", "SELECT @@tx_read_only"] {
            a.query_drop(between).await.expect(between);
            assert!(!backend_free(&p).await, "{set}: released after {between}");
        }
        let code = code(&mut a, &format!("INSERT INTO {table} (v) VALUES (1)")).await;
        assert_eq!(
            code, 1792,
            "{set}: the insert ran in a read-only transaction, as direct"
        );
        a.query_drop("COMMIT").await.expect("commit");
        assert!(
            backend_free(&p).await,
            "{set}: COMMIT ended the characteristics"
        );
    }
    a.query_drop("SET insert_id = 9100").await.expect("set");
    for between in [
        "SELECT 2".to_string(),
        format!("UPDATE {table} SET v = 2"),
        format!("INSERT INTO {table} (id, v) VALUES (5, 1)"),
    ] {
        a.query_drop(&between).await.expect(&between);
        assert!(
            !backend_free(&p).await,
            "insert_id released after {between}"
        );
    }
    a.query_drop(format!("INSERT INTO {table} (v) VALUES (3)"))
        .await
        .expect("insert");
    let id: Option<u64> = a.query_first("SELECT LAST_INSERT_ID()").await.expect("id");
    assert_eq!(id, Some(9100), "the forced id, as direct");
    assert!(backend_free(&p).await, "the insert used insert_id");
    a.query_drop(format!("DROP TABLE {table}"))
        .await
        .expect("drop");
}

/// Locks that live in the session, taken through dynamic SQL whose text the
/// proxy reads only as a name or an expression (a statement prepared from
/// a literal and executed, EXECUTE IMMEDIATE of computed text), hold as
/// direct: the session keeps its backend (the probe: the next reset
/// dropped them, and the client's later statements ran as if unlocked).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_locks_taken_through_dynamic_sql_hold() {
    let db = MariaDb::shared();
    let p = one_backend(db).await;
    let (m, other) = (
        format!("dyn_lock_m_{}", std::process::id()),
        format!("dyn_lock_o_{}", std::process::id()),
    );
    let mut a = conn(&p).await;
    for t in [&m, &other] {
        a.query_drop(format!("CREATE OR REPLACE TABLE {t} (a INT)"))
            .await
            .expect("create");
    }
    let ways = [
        format!("PREPARE s FROM 'LOCK TABLES {m} READ'; EXECUTE s; DEALLOCATE PREPARE s"),
        format!("EXECUTE IMMEDIATE CONCAT('LOCK TABLES ', '{m} READ')"),
    ];
    for way in &ways {
        for sql in way.split("; ") {
            a.query_drop(sql).await.expect(sql);
        }
        assert!(
            !backend_free(&p).await,
            "{way}: the lock's backend was released"
        );
        // Under LOCK TABLES a table not locked is refused, as direct.
        let c = code(&mut a, &format!("INSERT INTO {other} VALUES (1)")).await;
        assert_eq!(c, 1100, "{way}: the session's tables are still locked");
        a.query_drop("UNLOCK TABLES").await.expect("unlock");
        a.reset().await.expect("COM_RESET_CONNECTION");
        assert!(backend_free(&p).await, "the reset ends it");
    }
    for t in [&m, &other] {
        a.query_drop(format!("DROP TABLE {t}")).await.expect("drop");
    }
}
