//! Views and triggers run code the statement text does not show (issue 16):
//! the proxy learns which names do from the server's catalog and treats a
//! statement naming one as a call of stored code (its backend is reset
//! before another client gets it). These tests cover how the catalog is
//! learnt: objects created directly on the server (read again every
//! `pool.code_catalog_refresh_ms`), objects created through the proxy
//! (unknown from before the DDL is sent until read again, whatever the
//! interval), the setting that never learns (every statement naming a
//! table is reset after), and a `backend.user` that cannot see every
//! object (the same). The leak matrix covers each kind of object.
//!
//! Each case: client A runs a statement through a view or a trigger that
//! takes a named lock, then leaves; client B, on the proxy's only backend
//! connection, must find the lock free (as a fresh direct connection does).

use crate::common;

use std::time::{Duration, Instant};

use common::mariadb::ROOT_PASSWORD;
use common::raw::{RawConn, Response};
use common::{MariaDb, Proxy};

async fn one_backend(db: &MariaDb, refresh_ms: u64) -> Proxy {
    Proxy::builder(db)
        .groups(1)
        .max_backend(1)
        .queue_timeout_ms(5000)
        .with(|c| c.pool.code_catalog_refresh_ms = refresh_ms)
        .start()
        .await
}

fn rows(r: &Response) -> Vec<Vec<Option<String>>> {
    match r {
        Response::Rows(rs) => rs.text_rows(),
        other => panic!("expected rows, got {other:?}"),
    }
}

/// The single value of a one-row, one-column answer.
async fn value(c: &mut RawConn, sql: &str) -> Option<String> {
    let r = c.query(sql).await;
    rows(&r)
        .first()
        .and_then(|row| row.first().cloned())
        .flatten()
}

async fn client(p: &Proxy, schema: &str) -> RawConn {
    RawConn::connect(&p.addr.to_string(), "app", "secret", Some(schema), true).await
}

/// A runs `sql` (which takes lock `lock` in code it does not name) and
/// leaves; B must then find the lock free.
async fn lock_does_not_reach_the_next_client(p: &Proxy, schema: &str, sql: &str, lock: &str) {
    let mut a = client(p, schema).await;
    let r = a.query(sql).await;
    assert!(!matches!(r, Response::Err(_)), "A's {sql}: {r:?}");
    let held = value(
        &mut a,
        &format!("SELECT IS_USED_LOCK('{lock}') IS NOT NULL"),
    )
    .await;
    // A's own lock is held until its statement or transaction ends (the
    // backend is reset then): either answer is A's own state.
    assert!(held.is_some());
    a.quit().await;
    let mut b = client(p, schema).await;
    assert_eq!(
        value(&mut b, &format!("SELECT IS_FREE_LOCK('{lock}')"))
            .await
            .as_deref(),
        Some("1"),
        "B, on A's backend connection, found the lock {lock} that A's {sql:?} took"
    );
    b.quit().await;
}

/// A fresh schema `schema` with a view `v_lock` taking lock `<schema>_v`,
/// then `more` (run as root, directly on the server).
fn schema_with_lock_view(db: &MariaDb, schema: &str, more: &str) {
    db.sql(&format!(
        "DROP DATABASE IF EXISTS {schema};\n\
         CREATE DATABASE {schema};\n\
         CREATE VIEW {schema}.v_lock AS SELECT GET_LOCK('{schema}_v', 0) AS g;\n{more}"
    ));
}

/// The admin endpoint's `code_catalog` section.
async fn catalog(p: &Proxy) -> serde_json::Value {
    let (code, body) = p.http_get("/status").await;
    assert_eq!(code, 200);
    let v: serde_json::Value = serde_json::from_str(&body).expect("status JSON");
    v["code_catalog"].clone()
}

/// Waits until the catalog is known and was read at least `n` times more
/// than `since` (a reading that began before a change may not show it).
async fn read_again(p: &Proxy, since: u64, n: u64, within: Duration) -> serde_json::Value {
    let deadline = Instant::now() + within;
    loop {
        let c = catalog(p).await;
        if c["state"] == "known" && c["readings"].as_u64().unwrap_or(0) >= since + n {
            return c;
        }
        assert!(Instant::now() < deadline, "catalog not read again: {c}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn readings(p: &Proxy) -> u64 {
    catalog(p).await["readings"].as_u64().unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_created_on_the_server_are_learnt_within_an_interval() {
    let db = MariaDb::shared();
    let p = one_backend(db, 200).await;
    let since = readings(&p).await;
    schema_with_lock_view(
        db,
        "cc_out",
        "CREATE TABLE cc_out.t (id INT) ENGINE=InnoDB;\n\
         CREATE TRIGGER cc_out.trg AFTER INSERT ON cc_out.t FOR EACH ROW DO GET_LOCK('cc_out_t', 0);\n",
    );
    read_again(&p, since, 2, Duration::from_secs(5)).await;
    lock_does_not_reach_the_next_client(&p, "cc_out", "SELECT g FROM v_lock", "cc_out_v").await;
    lock_does_not_reach_the_next_client(&p, "cc_out", "INSERT INTO t VALUES (1)", "cc_out_t").await;
    // Named from another schema: still a match.
    lock_does_not_reach_the_next_client(&p, "test", "SELECT g FROM cc_out.v_lock", "cc_out_v")
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_created_through_the_proxy_count_at_once() {
    let db = MariaDb::shared();
    db.sql("DROP DATABASE IF EXISTS cc_in;\nCREATE DATABASE cc_in;\n");
    // An interval far longer than the test: only the DDL path can learn.
    let p = one_backend(db, 600_000).await;
    read_again(&p, 0, 1, Duration::from_secs(5)).await;
    let mut a = client(&p, "cc_in").await;
    let r = a
        .query("CREATE VIEW v_lock AS SELECT GET_LOCK('cc_in_v', 0) AS g")
        .await;
    assert!(matches!(r, Response::Ok(_)), "{r:?}");
    // The very next statement, before any reading could have finished.
    let r = a.query("SELECT g FROM v_lock").await;
    assert_eq!(rows(&r), vec![vec![Some("1".to_string())]]);
    a.quit().await;
    let mut b = client(&p, "cc_in").await;
    assert_eq!(
        value(&mut b, "SELECT IS_FREE_LOCK('cc_in_v')")
            .await
            .as_deref(),
        Some("1")
    );
    b.quit().await;
    // The DDL's reply wakes the reader: the trigger is known long before
    // the interval.
    let mut a = client(&p, "cc_in").await;
    let r = a.query("CREATE TABLE t (id INT)").await;
    assert!(matches!(r, Response::Ok(_)), "{r:?}");
    let r = a
        .query("CREATE TRIGGER trg AFTER INSERT ON t FOR EACH ROW DO GET_LOCK('cc_in_t', 0)")
        .await;
    assert!(matches!(r, Response::Ok(_)), "{r:?}");
    a.quit().await;
    // Unknown from before the CREATE TRIGGER was sent: known again only
    // by a reading begun after its reply.
    read_again(&p, 0, 1, Duration::from_secs(5)).await;
    lock_does_not_reach_the_next_client(&p, "cc_in", "INSERT INTO t VALUES (1)", "cc_in_t").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_learning_resets_after_every_statement_naming_a_table() {
    let db = MariaDb::shared();
    schema_with_lock_view(db, "cc_off", "");
    let p = one_backend(db, 0).await;
    assert_eq!(catalog(&p).await["state"], "off");
    lock_does_not_reach_the_next_client(&p, "cc_off", "SELECT g FROM v_lock", "cc_off_v").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_user_that_cannot_see_every_object_learns_nothing() {
    let db = MariaDb::shared();
    schema_with_lock_view(
        db,
        "cc_lim",
        "DROP USER IF EXISTS cc_backend;\n\
         CREATE USER cc_backend IDENTIFIED BY 'cc_pw';\n\
         GRANT SELECT ON test.* TO cc_backend;\n",
    );
    // Clients log in as their own server accounts (`app` sees cc_lim, the
    // proxy's own user does not): the catalog cannot be trusted.
    let p = Proxy::builder(db)
        .groups(1)
        .max_backend(1)
        .queue_timeout_ms(5000)
        .with(|c| {
            c.backend.user = "cc_backend".into();
            c.backend.password = "cc_pw".into();
            c.users.clear();
            c.server_users.enabled = true;
            c.server_users.lookup_user = "root".into();
            c.server_users.lookup_password = ROOT_PASSWORD.into();
        })
        .start()
        .await;
    let c = catalog(&p).await;
    assert_eq!(c["state"], "unknown", "{c}");
    assert!(
        c["reason"].as_str().unwrap_or_default().contains("TRIGGER"),
        "{c}"
    );
    lock_does_not_reach_the_next_client(&p, "cc_lim", "SELECT g FROM v_lock", "cc_lim_v").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn found_rows_survives_the_checks_after_stored_code() {
    let db = MariaDb::shared();
    schema_with_lock_view(
        db,
        "cc_fr",
        "CREATE TABLE cc_fr.t (id INT) ENGINE=InnoDB;\n\
         INSERT INTO cc_fr.t VALUES (1), (2), (3), (4), (5);\n\
         CREATE TRIGGER cc_fr.trg AFTER INSERT ON cc_fr.t FOR EACH ROW DO 0;\n\
         CREATE TABLE cc_fr.plain (id INT) ENGINE=InnoDB;\n\
         INSERT INTO cc_fr.plain VALUES (1), (2), (3);\n",
    );
    // Learnt (a table with a trigger counts as code when named), and never
    // learnt (every statement naming a table counts).
    for refresh in [1000, 0] {
        let p = one_backend(db, refresh).await;
        for (table, total) in [("t", "5"), ("plain", "3")] {
            let mut a = client(&p, "cc_fr").await;
            let r = a
                .query(&format!(
                    "SELECT SQL_CALC_FOUND_ROWS id FROM {table} LIMIT 1"
                ))
                .await;
            assert_eq!(rows(&r).len(), 1);
            assert_eq!(
                value(&mut a, "SELECT FOUND_ROWS()").await.as_deref(),
                Some(total),
                "FOUND_ROWS() after SQL_CALC_FOUND_ROWS on {table} (refresh {refresh})"
            );
            a.quit().await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_created_by_dynamic_sql_or_a_procedure_count_at_once() {
    let db = MariaDb::shared();
    schema_with_lock_view(
        db,
        "cc_dyn",
        "CREATE PROCEDURE cc_dyn.mkv() CREATE VIEW cc_dyn.vp AS SELECT GET_LOCK('cc_dyn_p', 0) AS g;\n\
         CREATE PROCEDURE cc_dyn.noop() SELECT 1;\n",
    );
    // Only the guards can learn within the test: the interval is long.
    let p = one_backend(db, 600_000).await;
    read_again(&p, 0, 1, Duration::from_secs(5)).await;
    // A CALL of a procedure that runs no DDL leaves the catalog known.
    let mut a = client(&p, "cc_dyn").await;
    let r = a.query("CALL noop()").await;
    assert!(!matches!(r, Response::Err(_)), "{r:?}");
    a.quit().await;
    assert_eq!(catalog(&p).await["state"], "known");
    for (create, lock) in [
        ("CALL mkv()", "cc_dyn_p"),
        (
            "EXECUTE IMMEDIATE CONCAT('CREATE VI', 'EW vi AS SELECT GET_LOCK(''cc_dyn_i'', 0) AS g')",
            "cc_dyn_i",
        ),
    ] {
        let mut a1 = client(&p, "cc_dyn").await;
        let r = a1.query(create).await;
        assert!(!matches!(r, Response::Err(_)), "{create}: {r:?}");
        a1.quit().await;
        let view = if lock == "cc_dyn_p" { "vp" } else { "vi" };
        lock_does_not_reach_the_next_client(&p, "cc_dyn", &format!("SELECT g FROM {view}"), lock)
            .await;
    }
    // PREPARE … FROM an expression, EXECUTE later in the session.
    let mut a1 = client(&p, "cc_dyn").await;
    for q in [
        "SET @q = CONCAT('CREATE VI', 'EW vx AS SELECT GET_LOCK(''cc_dyn_x'', 0) AS g')",
        "PREPARE s FROM @q",
        "DO SLEEP(0.2)",
        "EXECUTE s",
        "DEALLOCATE PREPARE s",
    ] {
        let r = a1.query(q).await;
        assert!(!matches!(r, Response::Err(_)), "{q}: {r:?}");
    }
    a1.quit().await;
    lock_does_not_reach_the_next_client(&p, "cc_dyn", "SELECT g FROM vx", "cc_dyn_x").await;
}

/// A server that answers late (here: stopped) leaves the set read last in
/// force, as one that cannot be reached does, until the last good reading
/// is 10 intervals old; then the set is unknown until a reading succeeds.
/// Forgetting it after one slow interval made every statement naming a
/// table look like stored code on a loaded server, and the resets that
/// followed loaded it more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_answering_late_keeps_the_set_until_it_is_stale() {
    // Its own server: the test stops it.
    let db = MariaDb::start();
    // 200 ms intervals: stale 2 s after the last good reading. Backends
    // to spare: while the server is stopped a reading waits in its query
    // on an idle one, or dials one whose handshake never comes (the code
    // before this test forgot the set after one interval in the first
    // case, and never in the second).
    let p = Proxy::builder(&db)
        .groups(1)
        .max_backend(4)
        .with(|c| c.pool.code_catalog_refresh_ms = 200)
        .start()
        .await;
    read_again(&p, readings(&p).await, 2, Duration::from_secs(10)).await;

    // 1 s stopped (5 intervals; a reading is out and unanswered): known.
    let resume = db.pause();
    let t0 = Instant::now();
    let mut seen = Vec::new();
    while t0.elapsed() < Duration::from_secs(1) {
        tokio::time::sleep(Duration::from_millis(50)).await;
        seen.push(catalog(&p).await);
    }
    drop(resume);
    assert!(
        seen.iter().all(|c| c["state"] == "known"),
        "the set was forgotten while the server answered late: {seen:?}"
    );
    read_again(&p, readings(&p).await, 1, Duration::from_secs(10)).await;

    // Stopped past 10 intervals: unknown, then known once it answers.
    let resume = db.pause();
    let t0 = Instant::now();
    let went = loop {
        let c = catalog(&p).await;
        if c["state"] == "unknown" {
            break t0.elapsed();
        }
        assert!(t0.elapsed() < Duration::from_secs(6), "never unknown: {c}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(
        went >= Duration::from_millis(1500),
        "unknown after {went:?}, before the set was 10 intervals old"
    );
    drop(resume);
    read_again(&p, readings(&p).await, 1, Duration::from_secs(10)).await;
}

/// An event runs its body later, where no statement through the proxy
/// marks the catalog stale: one whose body may change the catalog (DDL of
/// a view, trigger or routine, dynamic SQL, a CALL of any procedure, which
/// may be replaced by one running DDL before the event runs) would let a
/// client make a view that takes a lock and use it before the next
/// reading. A statement that may define such an event — directly, in
/// dynamic SQL, under SET STATEMENT, in a routine that creates it — is
/// refused for every account; an event running DML is created as direct.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_whose_body_may_change_the_catalog_is_refused() {
    let db = MariaDb::shared();
    db.sql(
        "DROP DATABASE IF EXISTS cc_ev;\n\
         CREATE DATABASE cc_ev;\n\
         CREATE TABLE cc_ev.t (id INT) ENGINE=InnoDB;\n\
         CREATE PROCEDURE cc_ev.mkv() CREATE VIEW cc_ev.vp AS SELECT GET_LOCK('cc_ev_p', 0) AS g;\n\
         CREATE PROCEDURE cc_ev.noop() SELECT 1;\n",
    );
    let p = one_backend(db, 600_000).await;
    read_again(&p, 0, 1, Duration::from_secs(5)).await;
    let mut a = client(&p, "cc_ev").await;
    const AT: &str = "ON SCHEDULE AT CURRENT_TIMESTAMP + INTERVAL 1 HOUR";
    let mut refused = Vec::new();
    for body in [
        "CREATE VIEW ve AS SELECT GET_LOCK('cc_ev_v', 0) AS g",
        "CREATE TRIGGER tr AFTER INSERT ON t FOR EACH ROW DO GET_LOCK('cc_ev_t', 0)",
        "CALL mkv()",
        "CALL noop()",
        "EXECUTE IMMEDIATE CONCAT('CREATE VI', 'EW vi AS SELECT 1')",
        "BEGIN PREPARE s FROM @q; EXECUTE s; END",
        "CREATE FUNCTION f() RETURNS INT RETURN GET_LOCK('cc_ev_f', 0)",
    ] {
        refused.push(format!("CREATE EVENT e_bad {AT} DO {body}"));
    }
    const VIEW_EVENT: &str = "CREATE EVENT e_bad ON SCHEDULE AT CURRENT_TIMESTAMP + INTERVAL 1 HOUR \
         DO CREATE VIEW ve AS SELECT GET_LOCK(''cc_ev_v'', 0) AS g";
    refused.extend([
        format!("EXECUTE IMMEDIATE '{VIEW_EVENT}'"),
        format!("PREPARE s FROM '{VIEW_EVENT}'"),
        format!(
            "SET STATEMENT max_statement_time = 0 FOR {}",
            VIEW_EVENT.replace("''", "'")
        ),
        format!("/*!50000 {} */", VIEW_EVENT.replace("''", "'")),
        format!("CREATE PROCEDURE mk_ev() {}", VIEW_EVENT.replace("''", "'")),
        format!("BEGIN NOT ATOMIC {}; END", VIEW_EVENT.replace("''", "'")),
    ]);
    for sql in &refused {
        match a.query(sql).await {
            Response::Err(e) => assert_eq!(e.code, 1235, "{sql}: {e:?}"),
            other => panic!("{sql}: created ({other:?})"),
        }
    }
    let sql = format!("CREATE EVENT e_dml {AT} DO INSERT INTO t VALUES (1)");
    let r = a.query(&sql).await;
    assert!(!matches!(r, Response::Err(_)), "{sql}: {r:?}");
    // Altering an event to such a body is the same; its schedule is not.
    match a.query("ALTER EVENT e_dml DO CALL mkv()").await {
        Response::Err(e) => assert_eq!(e.code, 1235, "ALTER EVENT: {e:?}"),
        other => panic!("ALTER EVENT to a DDL body: {other:?}"),
    }
    let r = a
        .query("ALTER EVENT e_dml ON SCHEDULE AT CURRENT_TIMESTAMP + INTERVAL 2 HOUR")
        .await;
    assert!(
        !matches!(r, Response::Err(_)),
        "ALTER EVENT's schedule: {r:?}"
    );
    let r = a.query("ALTER EVENT e_dml RENAME TO e_dml2").await;
    assert!(
        !matches!(r, Response::Err(_)),
        "ALTER EVENT … RENAME: {r:?}"
    );
    let n = value(
        &mut a,
        "SELECT COUNT(*) FROM information_schema.EVENTS WHERE EVENT_SCHEMA = 'cc_ev'",
    )
    .await;
    assert_eq!(n.as_deref(), Some("1"), "only the harmless event exists");
    let n = value(
        &mut a,
        "SELECT COUNT(*) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = 'cc_ev'",
    )
    .await;
    assert_eq!(n.as_deref(), Some("2"), "no procedure creating the event");
    a.quit().await;
}
