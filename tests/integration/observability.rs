//! Metrics, /status, health endpoints and the admin SQL console under real
//! load: counters match exactly, percentiles agree with what clients measured,
//! and the console answers while every execution slot is busy.

use crate::common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::{MariaDb, Proxy, mariadb_bin};
use myplex::config::UserConfig;
use mysql_async::Conn;
use mysql_async::prelude::*;

fn sum_metric(text: &str, name: &str, label: &str) -> f64 {
    text.lines()
        .filter(|l| {
            l.starts_with(name)
                && (l[name.len()..].starts_with('{') || l[name.len()..].starts_with(' '))
                && l.contains(label)
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counters_match_the_load_exactly() {
    let db = MariaDb::shared();
    let t = format!("test.obs_{}", std::process::id());
    db.sql(&format!(
        "DROP TABLE IF EXISTS {t}; CREATE TABLE {t} (id INT AUTO_INCREMENT PRIMARY KEY, v INT)"
    ));
    let p = Proxy::builder(db).groups(2).max_backend(4).start().await;
    let mut c = Conn::from_url(p.app_url()).await.expect("connect");
    for i in 0..20 {
        c.query_drop("BEGIN").await.expect("begin");
        c.query_drop(format!("INSERT INTO {t} (v) VALUES ({i})"))
            .await
            .expect("insert");
        c.query_drop("COMMIT").await.expect("commit");
    }
    for i in 0..10 {
        c.query_drop("START TRANSACTION").await.expect("begin");
        c.query_drop(format!("INSERT INTO {t} (v) VALUES ({i})"))
            .await
            .expect("insert");
        c.query_drop("ROLLBACK").await.expect("rollback");
    }
    let _ = c.query_drop("SELECT * FROM no_such_table").await;
    // The session records a statement just after its response (from its
    // group's worker thread): read once the last one is in.
    let (mut code, mut text) = p.http_get("/metrics").await;
    for _ in 0..50 {
        if sum_metric(&text, "myplex_statements_total", "kind=\"query\"") >= 92.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        (code, text) = p.http_get("/metrics").await;
    }
    assert_eq!(code, 200);
    assert_eq!(
        sum_metric(&text, "myplex_transactions_total", "outcome=\"commit\""),
        20.0,
        "{text}"
    );
    assert_eq!(
        sum_metric(&text, "myplex_transactions_total", "outcome=\"rollback\""),
        10.0
    );
    // mysql_async's own setup query + 90 + the failing one.
    assert_eq!(
        sum_metric(&text, "myplex_statements_total", "kind=\"query\""),
        92.0
    );
    assert_eq!(
        sum_metric(&text, "myplex_errors_total", "code=\"1146\""),
        1.0
    );
    assert_eq!(sum_metric(&text, "myplex_client_connections", ""), 1.0);
    assert_eq!(
        sum_metric(&text, "myplex_transaction_duration_seconds_count", ""),
        30.0
    );
    assert!(sum_metric(&text, "myplex_bytes_total", "direction=\"to_client\"") > 0.0);
    // Every exported name (and label) is documented in the catalogue.
    let undocumented = myplex::metrics::names::undocumented(&text);
    assert!(
        undocumented.is_empty(),
        "undocumented in the exposition: {undocumented:?}"
    );
    let (code, body) = p.http_get("/status").await;
    assert_eq!(code, 200);
    let v: serde_json::Value = serde_json::from_str(&body).expect("status is JSON");
    assert_eq!(v["last_60s"]["transaction"]["count"], 30);
    assert_eq!(v["groups"].as_array().map(Vec::len), Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn percentiles_agree_with_client_measurements() {
    let db = MariaDb::shared();
    let p = Proxy::builder(db).groups(1).max_backend(2).start().await;
    let mut c = Conn::from_url(p.app_url()).await.expect("connect");
    let mut seen = Vec::new();
    for i in 0..40u32 {
        // 20 ms and 60 ms statements: p50 near 20 ms, p95 near 60 ms.
        let sleep = if i % 2 == 0 { "0.02" } else { "0.06" };
        let t0 = Instant::now();
        c.query_drop(format!("SELECT SLEEP({sleep})"))
            .await
            .expect("sleep");
        seen.push(t0.elapsed().as_secs_f64() * 1000.0);
    }
    seen.sort_by(f64::total_cmp);
    let client_p50 = seen[19];
    let client_max = seen[39];
    // The session records a statement just after its response (from its
    // group's worker thread): read once the last one is in.
    let mut v = serde_json::Value::Null;
    for _ in 0..50 {
        let (_, body) = p.http_get("/status").await;
        v = serde_json::from_str(&body).expect("json");
        if v["last_60s"]["statement"]["count"] == 41 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let s = &v["last_60s"]["statement"];
    let p50 = s["p50_ms"].as_f64().expect("p50");
    let max = s["max_ms"].as_f64().expect("max");
    // The proxy measures less than the client (no client↔proxy hop) and
    // buckets are ~6% wide.
    assert!(
        p50 <= client_p50 * 1.07 && p50 >= client_p50 * 0.85 - 2.0,
        "proxy p50 {p50} vs client {client_p50}"
    );
    assert!(
        max <= client_max && max >= client_max * 0.85 - 2.0,
        "proxy max {max} vs client {client_max}"
    );
    assert_eq!(s["count"], 41, "40 sleeps + the setup query");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_console_works_while_every_slot_is_busy() {
    let db = MariaDb::shared();
    let p = Proxy::builder(db)
        .groups(1)
        .max_backend(1)
        .oversubscribe(0)
        .with(|c| {
            c.users.push(UserConfig {
                name: "admin".into(),
                password: Some("adminpw".into()),
                backend_user: Some("app".into()),
                backend_password: Some("secret".into()),
                admin: true,
                ..Default::default()
            })
        })
        .start()
        .await;
    let mut busy = Conn::from_url(p.app_url()).await.expect("connect");
    let sleeper = tokio::spawn(async move {
        busy.query_drop("SELECT SLEEP(3)").await.expect("sleep");
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let port = p.addr.port();
    let t0 = Instant::now();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(mariadb_bin("mariadb"))
            .args([
                "--no-defaults",
                "--protocol=TCP",
                "--host=127.0.0.1",
                "-uadmin",
                "-padminpw",
                "-t",
            ])
            .arg(format!("--port={port}"))
            .args([
                "-e",
                "SHOW MYPLEX GROUPS; SHOW MYPLEX POOLS; SHOW MYPLEX CLIENTS; SHOW MYPLEX STATS",
            ])
            .output()
            .expect("run mariadb")
    })
    .await
    .expect("join");
    let took = t0.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        took < Duration::from_secs(2),
        "console answered without waiting ({took:?})"
    );
    assert!(stdout.contains("in_flight"), "{stdout}");
    // First table: header then the row of group 0.
    let cells = |line: &str| -> Vec<String> {
        line.split('|')
            .map(|c| c.trim().to_string())
            .filter(|c| !c.is_empty())
            .collect()
    };
    let header = stdout
        .lines()
        .find(|l| l.contains("in_flight"))
        .map(cells)
        .expect("groups header");
    let row = stdout
        .lines()
        .filter(|l| l.starts_with('|'))
        .nth(1)
        .map(cells)
        .expect("group 0 row");
    let col = |name: &str| {
        header
            .iter()
            .position(|h| h == name)
            .map(|i| row[i].clone())
    };
    assert_eq!(col("in_flight").as_deref(), Some("1"), "{stdout}");
    assert_eq!(col("cap").as_deref(), Some("1"), "{stdout}");
    assert!(stdout.contains("executing"), "{stdout}");
    assert!(stdout.contains("stmt_p95_ms"), "{stdout}");
    sleeper.await.expect("join");
    // Not for ordinary users: they reach the server, which rejects the syntax.
    let mut c = Conn::from_url(p.app_url()).await.expect("connect");
    assert!(c.query_drop("SHOW MYPLEX GROUPS").await.is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_readiness() {
    let db = MariaDb::shared();
    let p = Proxy::builder(db).start().await;
    assert_eq!(p.http_get("/healthz").await.0, 200);
    assert_eq!(p.http_get("/readyz").await.0, 200);
    assert_eq!(p.http_get("/nope").await.0, 404);
    drop_and_check(p).await;
}

async fn drop_and_check(p: Proxy) {
    let admin = p.admin;
    let shared = p.shared.clone();
    drop(p); // triggers shutdown: draining
    assert!(shared.shutdown.is_triggered());
    let mut s = tokio::net::TcpStream::connect(admin)
        .await
        .expect("connect");
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    s.write_all(b"GET /readyz HTTP/1.1\r\n\r\n")
        .await
        .expect("write");
    let mut out = String::new();
    s.read_to_string(&mut out).await.expect("read");
    assert!(out.starts_with("HTTP/1.1 503"), "{out}");
}

/// The adaptive in-flight limit (the default) rises above `1 + oversubscribe`
/// when statements mostly wait (SLEEP: no server CPU), and `/status`,
/// `/metrics` show it with its inputs; `inflight = "fixed"` keeps the cap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn adaptive_limit_rises_under_a_sleep_heavy_load() {
    const CLIENTS: usize = 32;
    const RUN: Duration = Duration::from_secs(3);
    let db = MariaDb::shared();
    let p = Proxy::builder(db).groups(1).max_backend(16).start().await;
    // Every client connects (its driver's own first statements are quick
    // ones) before any sleep starts, and the limit's interval holding those
    // closes first: an interval mixing them with sleeps would have a mean
    // far under 50 ms, and the baseline is the lowest interval mean.
    let mut conns = Vec::new();
    for _ in 0..CLIENTS {
        let mut c = Conn::from_url(p.app_url()).await.expect("connect");
        c.query_drop("SELECT 1").await.expect("select");
        conns.push(c);
    }
    tokio::time::sleep(Duration::from_millis(600)).await;
    let mut tasks = Vec::new();
    for mut c in conns {
        tasks.push(tokio::spawn(async move {
            let (t0, mut n) = (Instant::now(), 0u32);
            while t0.elapsed() < RUN {
                c.query_drop("SELECT SLEEP(0.05)").await.expect("sleep");
                n += 1;
            }
            n
        }));
    }
    // The limit's path, for the failure message.
    let mut path = Vec::new();
    let t0 = Instant::now();
    while t0.elapsed() < RUN - Duration::from_millis(500) {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let (_, body) = p.http_get("/status").await;
        let v: serde_json::Value = serde_json::from_str(&body).expect("json");
        let a = &v["groups"][0]["scheduler"]["adaptive"];
        path.push(format!(
            "{}:{}:{:.0}/s:{}",
            a["limit"],
            a["phase"],
            a["completions_per_s"].as_f64().unwrap_or(0.0),
            a["stalled"]
        ));
    }
    let (_, body) = p.http_get("/status").await;
    let (_, metrics) = p.http_get("/metrics").await;
    let mut done = 0;
    for t in tasks {
        done += t.await.expect("client");
    }
    let v: serde_json::Value = serde_json::from_str(&body).expect("json");
    let s = &v["groups"][0]["scheduler"];
    assert_eq!(s["inflight_mode"], "adaptive", "{s}");
    let cap = s["cap"].as_u64().expect("cap");
    assert!(
        cap >= 8,
        "limit rose above 1 + oversubscribe = 4: {s}\npath (limit:phase:rate:stalled): {path:?}"
    );
    assert!(
        cap <= 16,
        "never above the group's backend connections: {s}"
    );
    assert_eq!(s["adaptive"]["limit"].as_u64(), Some(cap), "{s}");
    let rate = s["adaptive"]["completions_per_s"].as_f64().expect("rate");
    assert!(rate > 80.0, "more than 4 slots / 50 ms: {s}");
    let base = s["adaptive"]["baseline_ms"].as_f64().expect("baseline");
    assert!((45.0..200.0).contains(&base), "baseline near 50 ms: {s}");
    assert!(
        sum_metric(&metrics, "myplex_in_flight_limit", "group=\"0\"") >= 8.0,
        "{metrics}"
    );
    assert!(sum_metric(&metrics, "myplex_adaptive_completions_per_second", "") > 80.0);
    // A fixed cap of 4 would allow at most 4 × 3 s / 50 ms = 240 statements.
    assert!(done > 360, "{done} statements in 3 s");

    let fixed = Proxy::builder(db)
        .groups(1)
        .max_backend(16)
        .with(|c| c.pool.inflight = myplex::config::InflightMode::Fixed)
        .start()
        .await;
    let (_, body) = fixed.http_get("/status").await;
    let v: serde_json::Value = serde_json::from_str(&body).expect("json");
    let s = &v["groups"][0]["scheduler"];
    assert_eq!(
        (s["inflight_mode"].as_str(), s["cap"].as_u64()),
        (Some("fixed"), Some(4)),
        "{s}"
    );
    assert!(s["adaptive"].is_null(), "{s}");
}
