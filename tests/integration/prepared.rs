//! Binary prepared statements multiplexed across backend connections:
//! results equal a direct connection, statements follow clients to other
//! backends (lazy prepare), cursors pin until exhausted, long data, and the
//! server's prepared-statement count stays bounded.

use crate::common;

use common::{MariaDb, Proxy};
use mysql_async::prelude::*;
use mysql_async::{Conn, Row, Value};

async fn conn(p: &Proxy) -> Conn {
    Conn::from_url(p.app_url())
        .await
        .expect("connect via proxy")
}

fn setup(db: &MariaDb, tag: &str) -> String {
    let t = format!("test.ps_{tag}_{}", std::process::id());
    db.sql(&format!(
        "DROP TABLE IF EXISTS {t};
         CREATE TABLE {t} (id INT PRIMARY KEY, d DECIMAL(20,6), dt DATETIME(6), j JSON,
           b MEDIUMBLOB, s VARCHAR(50) CHARACTER SET utf8mb4, f DOUBLE, u BIGINT UNSIGNED, n INT NULL,
           tm TIME(3), e ENUM('a','b'), bit BIT(5));
         INSERT INTO {t} VALUES
           (1, 12345.678901, '2024-02-29 13:14:15.123456', '{{\"k\": [1, 2]}}', x'00ff10', 'héllo', 1.5, 18446744073709551615, NULL, '-12:00:01.5', 'b', b'10101'),
           (2, -0.000001, '1999-12-31 23:59:59.999999', '[]', REPEAT('x', 70000), '', -2.25e10, 0, 7, '00:00:00', 'a', b'0')"
    ));
    t
}

fn rows_as_values(rows: Vec<Row>) -> Vec<Vec<Value>> {
    rows.into_iter().map(|r| r.unwrap()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_results_equal_direct() {
    let db = MariaDb::shared();
    let t = setup(db, "types");
    let p = Proxy::builder(db).groups(1).max_backend(2).start().await;
    let mut via = conn(&p).await;
    let mut direct = Conn::from_url(format!(
        "{}?prefer_socket=false",
        db.url("app", "secret", "test")
    ))
    .await
    .expect("direct");
    let q = format!("SELECT * FROM {t} WHERE id >= ? ORDER BY id");
    let a: Vec<Row> = via.exec(&q, (0,)).await.expect("exec via proxy");
    let b: Vec<Row> = direct.exec(&q, (0,)).await.expect("exec direct");
    // Column metadata as the client saw it.
    let meta = |r: &Row| {
        r.columns_ref()
            .iter()
            .map(|c| {
                (
                    c.name_str().into_owned(),
                    c.column_type(),
                    c.character_set(),
                    c.column_length(),
                    c.decimals(),
                    c.flags(),
                    c.org_table_str().into_owned(),
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(meta(&a[0]), meta(&b[0]));
    assert_eq!(rows_as_values(a), rows_as_values(b));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statements_follow_clients_across_backends() {
    let db = MariaDb::shared();
    let t = setup(db, "follow");
    let p = Proxy::builder(db).groups(1).max_backend(3).start().await;
    let mut a = conn(&p).await;
    let mut b = conn(&p).await;
    let stmt = a
        .prep(format!("SELECT s, ? + 1 FROM {t} WHERE id = ?"))
        .await
        .expect("prepare");
    let first: Option<(String, i64)> = a.exec_first(&stmt, (41, 1)).await.expect("exec");
    assert_eq!(first, Some(("héllo".to_string(), 42)));
    // Pin A's backend under B's transaction: A's next execute lands on
    // another backend, which must prepare the statement lazily.
    b.query_drop("BEGIN").await.expect("begin");
    b.query_drop("SELECT 1 FROM DUAL").await.expect("pin");
    for i in 0..5 {
        let r: Option<(String, i64)> = a.exec_first(&stmt, (i, 2)).await.expect("exec moved");
        assert_eq!(r, Some((String::new(), i + 1)));
    }
    b.query_drop("COMMIT").await.expect("commit");
    // The same SQL from another client is served from the registry.
    let again: Option<(String, i64)> = b
        .exec_first(format!("SELECT s, ? + 1 FROM {t} WHERE id = ?"), (1, 1))
        .await
        .expect("exec b");
    assert_eq!(again, Some(("héllo".to_string(), 2)));
    a.close(stmt).await.expect("close");
    // Errors from prepare come through.
    let err = a
        .prep("SELECT * FROM no_such_table_here")
        .await
        .expect_err("prepare error");
    assert!(
        matches!(err, mysql_async::Error::Server(ref e) if e.code == 1146),
        "{err:?}"
    );
}

/// The server reads a prepared text once, at prepare, under the preparing
/// session's `sql_mode` and character sets. A client whose settings differ
/// must not run a statement another client prepared (as `'a' || ?` is a
/// concatenation under PIPES_AS_CONCAT and a logical OR otherwise), and a
/// statement moved to a backend that lost it is read again as it was first
/// read, whatever the session's settings are now.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statement_is_read_as_it_was_prepared_whoever_shares_its_text() {
    let db = MariaDb::shared();
    let p = Proxy::builder(db).groups(1).max_backend(1).start().await;
    let mut direct = Conn::from_url(format!(
        "{}?prefer_socket=false",
        db.url("app", "secret", "test")
    ))
    .await
    .expect("direct");
    let q = "SELECT CAST(('a' || ?) AS CHAR(10)) AS r";
    // Direct: a session's statement keeps the reading of its prepare.
    let sd = direct.prep(q).await.expect("prepare direct");
    let v: Option<String> = direct.exec_first(&sd, ("x",)).await.expect("exec");
    assert_eq!(v.as_deref(), Some("0"), "a logical OR by default");
    // Through one backend: B prepares first, A (PIPES_AS_CONCAT) the same text.
    let mut a = conn(&p).await;
    let mut b = conn(&p).await;
    let sb = b.prep(q).await.expect("prepare b");
    let v: Option<String> = b.exec_first(&sb, ("x",)).await.expect("exec b");
    assert_eq!(v.as_deref(), Some("0"));
    a.query_drop("SET SESSION sql_mode = 'PIPES_AS_CONCAT'")
        .await
        .expect("sql_mode");
    let sa = a.prep(q).await.expect("prepare a");
    let v: Option<String> = a.exec_first(&sa, ("x",)).await.expect("exec a");
    assert_eq!(v.as_deref(), Some("ax"), "A's text is a concatenation");
    let v: Option<String> = b.exec_first(&sb, ("y",)).await.expect("exec b again");
    assert_eq!(
        v.as_deref(),
        Some("0"),
        "B's statement must not run as A's session read the same text"
    );
    // A goes back to the default mode: its statement stays a concatenation
    // (as direct), also once it must be prepared again on a new backend.
    a.query_drop("SET SESSION sql_mode = DEFAULT")
        .await
        .expect("sql_mode back");
    // B leaves a user variable and goes: the only backend is closed (or
    // reset), so A's next execute prepares its statement again.
    b.query_drop("SET @left_behind = 1")
        .await
        .expect("user var");
    drop(sb);
    b.disconnect().await.expect("disconnect b");
    let v: Option<String> = a.exec_first(&sa, ("z",)).await.expect("exec a again");
    assert_eq!(v.as_deref(), Some("az"), "prepared again as first read");
    let prepares: Option<(String, u64)> = a
        .query_first("SHOW SESSION STATUS LIKE 'Com_stmt_prepare'")
        .await
        .expect("prepares");
    assert_eq!(
        prepares.map(|p| p.1),
        Some(1),
        "the execute above ran on a backend that prepared it afresh"
    );
    // And the session's own mode is back for its plain statements.
    let plain: Option<i64> = a.query_first("SELECT 'a' || 'x'").await.expect("plain");
    assert_eq!(plain, Some(0), "the session's sql_mode is its own again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_statements_do_not_pin() {
    let db = MariaDb::shared();
    let p = Proxy::builder(db).groups(1).max_backend(2).start().await;
    let mut clients = Vec::new();
    for _ in 0..20 {
        let mut c = conn(&p).await;
        let s = c.prep("SELECT ? * 2").await.expect("prepare");
        clients.push((c, s));
    }
    // 20 clients each holding a prepared statement share 2 backends.
    for round in 0..3i64 {
        for (c, s) in clients.iter_mut() {
            let v: Option<i64> = c.exec_first(&*s, (round,)).await.expect("exec");
            assert_eq!(v, Some(round * 2));
        }
    }
    assert!(p.backends_owned() <= 2);
    let count = db.sql("SHOW GLOBAL STATUS LIKE 'Prepared_stmt_count'");
    let n: usize = count
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or(usize::MAX);
    assert!(
        n < 20,
        "server-side statements are shared, not one per client: {n}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions_with_prepared_statements() {
    let db = MariaDb::shared();
    let t = format!("test.ps_tx_{}", std::process::id());
    db.sql(&format!(
        "DROP TABLE IF EXISTS {t}; CREATE TABLE {t} (id INT PRIMARY KEY, v INT)"
    ));
    let p = Proxy::builder(db).groups(1).max_backend(2).start().await;
    let mut a = conn(&p).await;
    let mut b = conn(&p).await;
    let ins = a
        .prep(format!("INSERT INTO {t} VALUES (?, ?)"))
        .await
        .expect("prep");
    a.query_drop("BEGIN").await.expect("begin");
    a.exec_drop(&ins, (1, 10)).await.expect("insert");
    a.exec_drop(&ins, (2, 20)).await.expect("insert");
    let seen: Option<i64> = b
        .exec_first(format!("SELECT COUNT(*) FROM {t}"), ())
        .await
        .expect("count");
    assert_eq!(seen, Some(0));
    a.query_drop("ROLLBACK").await.expect("rollback");
    a.exec_drop(&ins, (3, 30)).await.expect("autocommit insert");
    assert_eq!(a.last_insert_id(), None);
    let seen: Option<i64> = b
        .exec_first(format!("SELECT COUNT(*) FROM {t}"), ())
        .await
        .expect("count");
    assert_eq!(seen, Some(1));
}

/// Prepares `sql` on `c`; the server error code (0 = prepared).
async fn prepare_code(c: &mut Conn, sql: &str) -> (u16, String) {
    match c.prep(sql).await {
        Ok(_) => (0, String::new()),
        Err(mysql_async::Error::Server(e)) => (e.code, e.message),
        Err(e) => panic!("not a server error: {e}"),
    }
}

/// One session cannot hold more prepared statements than the server's
/// `max_prepared_stmt_count`: the next COM_STMT_PREPARE gets the server's
/// own 1461, as direct — also when the proxy could have served it from its
/// registry or kept it without a backend (a prepared KILL), and although
/// the proxy closes idle statements on its backends. Closing one makes
/// room again (issue 16, item 10).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_session_statement_cap_is_the_servers() {
    let db = MariaDb::start_with_args(&["--max-prepared-stmt-count=4"]);
    let p = Proxy::builder(&db).groups(1).max_backend(2).start().await;
    let direct = Conn::from_url(db.url("app", "secret", "test"))
        .await
        .expect("direct");
    // One at a time: the server's count is of all its connections.
    for mut c in [direct, conn(&p).await] {
        let c = &mut c;
        // Statements are kept by the client library: hold them.
        let mut held = Vec::new();
        for i in 0..4 {
            held.push(
                c.prep(format!("SELECT {i} + ?"))
                    .await
                    .expect("under the cap"),
            );
        }
        let (code, message) = prepare_code(c, "SELECT 99 + ?").await;
        assert_eq!(code, 1461, "{message}");
        assert_eq!(
            message,
            "Can't create more than max_prepared_stmt_count statements (current value: 4)"
        );
        c.close(held.pop().expect("one")).await.expect("close");
        assert_eq!(prepare_code(c, "SELECT 99 + ?").await.0, 0, "room again");
        drop(held);
        c.reset().await.expect("reset closes every statement");
    }
    // A prepared KILL counts, as the server counts it.
    let mut k = conn(&p).await;
    let mut held = Vec::new();
    for i in 0..3 {
        held.push(k.prep(format!("SELECT {i} + ?")).await.expect("prepare"));
    }
    held.push(
        k.prep(format!("KILL {}", k.id() + 1000))
            .await
            .expect("prepare KILL"),
    );
    assert_eq!(prepare_code(&mut k, "KILL 1").await.0, 1461);
    assert_eq!(prepare_code(&mut k, "SELECT 98 + ?").await.0, 1461);
}
