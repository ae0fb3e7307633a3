//! Per-user limits against a real server (issue 19): a `[[users]]` entry's
//! `max_client_connections` refuses the next login with 1040 / 08004 naming
//! the user and the limit, and its `max_backend_connections` holds the
//! user's further leases in the queue — across thread groups, while other
//! users run — until they time out after the user's own `queue_timeout_ms`
//! with an error naming the user's cap, or get a backend once one of the
//! user's own goes back. Two backlogged users share one execution slot by
//! weight. And the per-user figures (`/status`, `/metrics`,
//! `SHOW MYPLEX USERS`) count each user's own clients, statements,
//! transactions and backends.

use crate::common;

use std::time::{Duration, Instant};

use common::mariadb::{OTHER_PASSWORD, OTHER_USER};
use common::{MariaDb, Proxy};
use mysql_async::prelude::*;
use mysql_async::{Conn, Error};

fn other(p: &Proxy) -> String {
    p.url(OTHER_USER, OTHER_PASSWORD, "test")
}

/// Waits (up to 5 s) until `cond` holds: a statement is counted just after
/// its reply is sent.
async fn eventually(what: &str, cond: impl Fn() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(t0.elapsed() < Duration::from_secs(5), "{what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn tenant(p: &Proxy, name: &str) -> std::sync::Arc<myplex::pool::tenants::Tenant> {
    p.shared.pool.tenants.for_user(name, true)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_at_its_client_cap_is_refused_with_1040_naming_it() {
    let db = MariaDb::shared();
    let p = Proxy::builder(db)
        .with(|c| {
            let u = c
                .users
                .iter_mut()
                .find(|u| u.name == OTHER_USER)
                .expect("other user");
            u.max_client_connections = 2;
        })
        .start()
        .await;
    let a = Conn::from_url(other(&p)).await.expect("first");
    let b = Conn::from_url(other(&p)).await.expect("second");
    match Conn::from_url(other(&p)).await {
        Err(Error::Server(e)) => {
            assert_eq!((e.code, e.state.as_str()), (1040, "08004"));
            assert!(
                e.message.contains("user 'other'")
                    && e.message.contains("max_client_connections 2"),
                "{}",
                e.message
            );
        }
        Err(e) => panic!("expected 1040, got {e}"),
        Ok(_) => panic!("a third client of 'other' must be refused"),
    }
    assert_eq!(tenant(&p, OTHER_USER).clients(), 2);
    // Another user is not affected.
    let mut app = Conn::from_url(p.app_url()).await.expect("app logs in");
    let one: Option<i64> = app.query_first("SELECT 1").await.expect("app query");
    assert_eq!(one, Some(1));
    // A client leaving makes room again.
    a.disconnect().await.expect("disconnect");
    let t0 = Instant::now();
    let c = loop {
        match Conn::from_url(other(&p)).await {
            Ok(c) => break c,
            Err(_) if t0.elapsed() < Duration::from_secs(5) => {
                tokio::time::sleep(Duration::from_millis(20)).await
            }
            Err(e) => panic!("room was not given back: {e}"),
        }
    };
    drop((b, c, app));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_at_its_backend_cap_waits_and_times_out_naming_the_cap() {
    let db = MariaDb::shared();
    let p = Proxy::builder(db)
        .groups(2)
        .max_backend(8)
        .queue_timeout_ms(30_000)
        .with(|c| {
            let u = c
                .users
                .iter_mut()
                .find(|u| u.name == OTHER_USER)
                .expect("other user");
            u.max_backend_connections = 1;
            u.queue_timeout_ms = 400;
        })
        .start()
        .await;
    // Every session logs in first (a login with a schema uses a backend).
    let mut holder = Conn::from_url(other(&p)).await.expect("holder");
    let mut others = Vec::new();
    for _ in 0..3 {
        others.push(Conn::from_url(other(&p)).await.expect("login"));
    }
    let mut waiter = others.pop().expect("three");
    // The user's first session holds a backend in a transaction.
    holder.query_drop("BEGIN").await.expect("begin");
    let _: Option<i64> = holder.query_first("SELECT 1").await.expect("in txn");
    assert_eq!(tenant(&p, OTHER_USER).leased(), 1);
    // Its second and third sessions (one lands in each thread group) wait
    // for it and time out after the user's own queue timeout.
    for mut second in others {
        let t0 = Instant::now();
        match second.query_first::<i64, _>("SELECT 2").await {
            Err(Error::Server(e)) => {
                assert_eq!(e.code, 1317, "{}", e.message);
                assert!(
                    e.message.contains("user 'other'")
                        && e.message.contains("max_backend_connections (1 of 1)"),
                    "{}",
                    e.message
                );
            }
            other => panic!("expected the user's queue timeout, got {other:?}"),
        }
        let waited = t0.elapsed();
        assert!(
            waited < Duration::from_secs(20),
            "the user's queue_timeout_ms applies, not the pool's: {waited:?}"
        );
        drop(second);
    }
    // Meanwhile another user is not held back.
    let mut app = Conn::from_url(p.app_url()).await.expect("app");
    let one: Option<i64> = app.query_first("SELECT 1").await.expect("app runs");
    assert_eq!(one, Some(1));
    // A waiter of the capped user gets a backend once the holder's goes back.
    let run = tokio::spawn(async move {
        let v: Option<i64> = waiter.query_first("SELECT 3").await.expect("runs");
        v
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    holder.query_drop("COMMIT").await.expect("commit");
    assert_eq!(run.await.expect("join"), Some(3));
    let t0 = Instant::now();
    while tenant(&p, OTHER_USER).leased() != 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "leases not counted back"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_user_figures_in_status_metrics_and_the_console() {
    let db = MariaDb::shared();
    let p = Proxy::builder(db)
        .with(|c| {
            c.users.push(myplex::config::UserConfig {
                name: "admin".into(),
                password: Some("adminpw".into()),
                backend_user: Some("app".into()),
                backend_password: Some("secret".into()),
                admin: true,
                ..Default::default()
            });
            for u in c.users.iter_mut() {
                if u.name == OTHER_USER {
                    u.weight = 3;
                    u.max_backend_connections = 2;
                }
            }
        })
        .start()
        .await;
    let mut app = Conn::from_url(p.app_url()).await.expect("app");
    let mut oth = Conn::from_url(other(&p)).await.expect("other");
    let app_before = tenant(&p, "app").statements();
    for i in 0..5 {
        let v: Option<i64> = app.query_first(format!("SELECT {i}")).await.expect("app");
        assert_eq!(v, Some(i));
    }
    app.query_drop("BEGIN").await.expect("begin");
    app.query_drop("SELECT 1").await.expect("in txn");
    app.query_drop("COMMIT").await.expect("commit");
    // The other user holds a backend in a transaction while we look.
    oth.query_drop("BEGIN").await.expect("begin");
    oth.query_drop("SELECT 1").await.expect("in txn");
    eventually("eight statements of app", || {
        tenant(&p, "app").statements() - app_before == 8
    })
    .await;

    let (code, body) = p.http_get("/status").await;
    assert_eq!(code, 200);
    let st: serde_json::Value = serde_json::from_str(&body).expect("json");
    let users = st["users"].as_array().expect("users array");
    let by = |name: &str| {
        users
            .iter()
            .find(|u| u["user"] == name)
            .unwrap_or_else(|| panic!("{name} in {users:?}"))
            .clone()
    };
    let (a, o) = (by("app"), by(OTHER_USER));
    assert_eq!(a["clients"], 1);
    assert_eq!(a["transactions"], 1);
    assert!(a["statements"].as_u64().expect("n") >= 8, "{a}");
    assert!(a["latency"]["count"].as_u64().expect("n") >= 8, "{a}");
    assert!(a["latency"]["p50_ms"].as_f64().expect("p50") > 0.0, "{a}");
    assert!(a["queue_wait"]["count"].as_u64().expect("n") >= 8, "{a}");
    assert_eq!(
        (o["weight"].as_u64(), o["backends"].as_u64()),
        (Some(3), Some(1))
    );
    assert_eq!(o["max_backends"], 2);
    assert_eq!(o["clients"], 1);
    assert_eq!(by(myplex::pool::tenants::SERVER_USERS)["clients"], 0);
    assert_eq!(
        users.len(),
        4,
        "the configured users and the server users' row"
    );

    let (code, metrics) = p.http_get("/metrics").await;
    assert_eq!(code, 200);
    for line in [
        "myplex_user_weight{user=\"other\"} 3",
        "myplex_user_backend_connections{user=\"other\"} 1",
        "myplex_user_client_connections{user=\"app\"} 1",
        "myplex_user_transactions_total{user=\"app\"} 1",
    ] {
        assert!(metrics.contains(line), "{line} missing:\n{metrics}");
    }
    assert!(
        metrics.contains("myplex_user_statement_latency_seconds{user=\"app\",quantile=\"0.95\"}"),
        "{metrics}"
    );
    assert!(
        myplex::metrics::names::undocumented(&metrics).is_empty(),
        "{:?}",
        myplex::metrics::names::undocumented(&metrics)
    );

    let mut admin = Conn::from_url(p.url("admin", "adminpw", "test"))
        .await
        .expect("admin");
    let rows: Vec<mysql_async::Row> = admin.query("SHOW MYPLEX USERS").await.expect("console");
    let row = rows
        .iter()
        .find(|r| r.get::<String, _>("user").as_deref() == Some(OTHER_USER))
        .expect("a row for other");
    assert_eq!(row.get::<String, _>("weight").as_deref(), Some("3"));
    assert_eq!(row.get::<String, _>("backends").as_deref(), Some("1"));
    assert_eq!(row.get::<String, _>("max_backends").as_deref(), Some("2"));
    oth.query_drop("ROLLBACK").await.expect("rollback");
}

/// Both users keep eight clients busy against one thread group with one
/// execution slot: the statements completed while both are backlogged
/// split by weight (3:1), where first come, first served splits them evenly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backlogged_users_share_the_slot_by_weight() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let db = MariaDb::shared();
    let p = Proxy::builder(db)
        .groups(1)
        .max_backend(4)
        .oversubscribe(0)
        .with(|c| {
            c.pool.inflight = myplex::config::InflightMode::Fixed;
            for u in c.users.iter_mut() {
                u.weight = if u.name == OTHER_USER { 1 } else { 3 };
            }
        })
        .start()
        .await;
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for url in [p.app_url(), other(&p)] {
        for _ in 0..8 {
            let mut c = Conn::from_url(url.clone()).await.expect("login");
            let stop = stop.clone();
            tasks.push(tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    c.query_drop("SELECT SLEEP(0.002)")
                        .await
                        .expect("statement");
                }
            }));
        }
    }
    let (app, oth) = (tenant(&p, "app"), tenant(&p, OTHER_USER));
    // Let every client queue up, then count 400 statements.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (a0, o0) = (app.statements(), oth.statements());
    let t0 = Instant::now();
    while app.statements() + oth.statements() - a0 - o0 < 400 {
        assert!(t0.elapsed() < Duration::from_secs(60), "too slow");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let (a, o) = (app.statements() - a0, oth.statements() - o0);
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.expect("client task");
    }
    let share = a as f64 / (a + o) as f64;
    assert!(
        (0.68..=0.82).contains(&share),
        "weight 3:1 should give app about 75% of the statements: app {a}, other {o}"
    );
}

/// COM_CHANGE_USER moves the session's client count (and its lane) to the
/// new user; the old user's count goes back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn change_user_moves_the_client_to_the_new_users_count() {
    let db = MariaDb::shared();
    let p = Proxy::builder(db).start().await;
    let mut c = Conn::from_url(p.app_url()).await.expect("app");
    assert_eq!(
        (
            tenant(&p, "app").clients(),
            tenant(&p, OTHER_USER).clients()
        ),
        (1, 0)
    );
    c.change_user(
        mysql_async::ChangeUserOpts::default()
            .with_user(Some(OTHER_USER.into()))
            .with_pass(Some(OTHER_PASSWORD.into()))
            .with_db_name(Some("test".into())),
    )
    .await
    .expect("change user");
    let before = tenant(&p, OTHER_USER).statements();
    let _: Option<i64> = c.query_first("SELECT 1").await.expect("as other");
    assert_eq!(
        (
            tenant(&p, "app").clients(),
            tenant(&p, OTHER_USER).clients()
        ),
        (0, 1)
    );
    eventually("counted as the new user's", || {
        tenant(&p, OTHER_USER).statements() == before + 1
    })
    .await;
    drop(c);
    let t0 = Instant::now();
    while tenant(&p, OTHER_USER).clients() != 0 {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "count not given back"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
