//! The admin console stays reachable from real drivers while every backend
//! connection is held by a session inside a transaction: what drivers send
//! right after login (`SET NAMES`, `SET autocommit`, `SELECT
//! @@version_comment`) is answered without a backend for admin sessions,
//! and is replayed onto a backend once the session runs a real statement.

use crate::common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{MariaDb, Proxy};
use myplex::config::UserConfig;
use mysql_async::Conn;
use mysql_async::prelude::*;

fn admin_user() -> UserConfig {
    UserConfig {
        name: "admin".into(),
        password: Some("adminpw".into()),
        backend_user: Some("app".into()),
        backend_password: Some("secret".into()),
        admin: true,
        ..Default::default()
    }
}

/// A proxy with two backend connections, both held by open transactions.
async fn exhausted(db: &MariaDb) -> (Proxy, Vec<Conn>) {
    let p = Proxy::builder(db)
        .with(|c| {
            c.pool.thread_groups = 1;
            c.pool.max_backend_connections = 2;
            c.pool.queue_timeout_ms = 3000;
            c.users.push(admin_user());
        })
        .start()
        .await;
    let mut holders = Vec::new();
    for _ in 0..2 {
        let mut c = Conn::from_url(p.app_url()).await.expect("holder login");
        c.query_drop("BEGIN").await.expect("begin");
        c.query_drop("SELECT 1")
            .await
            .expect("select in transaction");
        holders.push(c);
    }
    // The pool really is exhausted: an app login (its schema is checked on
    // a backend) waits and times out.
    let e = match Conn::from_url(p.app_url()).await {
        Ok(mut app) => app
            .query_drop("SELECT 1")
            .await
            .expect_err("no backend free"),
        Err(e) => e,
    };
    assert!(e.to_string().contains("inside a transaction"), "{e}");
    (p, holders)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_console_from_python_drivers_while_pool_is_exhausted() {
    let db = MariaDb::shared();
    let (p, holders) = exhausted(db).await;
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let venv = repo.join("target/pyenv");
    let setup = tokio::process::Command::new("python3")
        .arg(repo.join("tests/python/setup_venv.py"))
        .arg(&venv)
        .output()
        .await
        .expect("run setup_venv.py");
    assert!(setup.status.success(), "venv: {setup:?}");
    let t0 = Instant::now();
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(venv.join("bin/python"))
            .arg(repo.join("tests/python/admin_console.py"))
            .args(["127.0.0.1", &p.addr.port().to_string(), "admin", "adminpw"])
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .output(),
    )
    .await
    .expect("admin_console.py finished")
    .expect("run admin_console.py");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("\"ok\": true"),
        "admin_console.py: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Both drivers, each well under the 3 s queue timeout it would have
    // waited for (and failed with) before.
    assert!(t0.elapsed() < Duration::from_secs(6), "{:?}", t0.elapsed());
    for d in ["pymysql", "connector_pure"] {
        let key = format!("\"{d}\": ");
        let at = stdout.find(&key).expect("driver timing") + key.len();
        let secs: f64 = stdout[at..]
            .split([',', '}'])
            .next()
            .and_then(|s| s.trim().parse().ok())
            .expect("seconds");
        assert!(secs < 1.5, "{d} took {secs} s: {stdout}");
    }
    drop(holders);
}

/// Settings answered locally while exhausted reach the backend that runs
/// the session's first real statement.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn locally_answered_settings_are_replayed() {
    let db = MariaDb::shared();
    let (p, holders) = exhausted(db).await;
    let mut admin = Conn::from_url(p.url("admin", "adminpw", ""))
        .await
        .expect("admin login");
    let t0 = Instant::now();
    admin
        .query_drop("SET NAMES latin1")
        .await
        .expect("set names");
    admin
        .query_drop("SET SESSION autocommit = 0, @@session.sql_mode = 'ANSI_QUOTES'")
        .await
        .expect("set list");
    let (ac, cs): (u8, String) = admin
        .query_first("SELECT @@session.autocommit, @@character_set_client")
        .await
        .expect("select")
        .expect("row");
    assert_eq!((ac, cs.as_str()), (0, "latin1"));
    let rows: Vec<mysql_async::Row> = admin.query("SHOW MYPLEX POOLS").await.expect("console");
    assert!(!rows.is_empty());
    assert!(t0.elapsed() < Duration::from_secs(1), "{:?}", t0.elapsed());
    // Not answered locally: waits for a backend like any statement.
    let e = admin
        .query_drop("SELECT @@character_set_client FROM DUAL")
        .await
        .expect_err("pool exhausted");
    assert!(e.to_string().contains("queue timeout"), "{e}");
    drop(holders);
    let (ac, cs, mode): (u8, String, String) = admin
        .query_first("SELECT @@autocommit, @@character_set_client, @@sql_mode FROM DUAL")
        .await
        .expect("select on a backend")
        .expect("row");
    assert_eq!(
        (ac, cs.as_str(), mode.as_str()),
        (0, "latin1", "ANSI_QUOTES")
    );
    let m = p.http_get("/metrics").await.1;
    assert!(m.contains("myplex_admin_local_answers_total"), "{m}");
    admin.disconnect().await.expect("disconnect");
}
