//! Scale-out: two myplex instances in front of one MariaDB, each with its
//! per-replica share of the server's connection budget
//! (`pool.max_backend_connections`), under concurrent load through both.
//! Sampled from the server side, the backend sessions of the proxies' user
//! never exceed the sum of the two budgets, and every client succeeds.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::load::{SAMPLE_EVERY, app_sessions};
use common::{MariaDb, Proxy};
use mysql_async::prelude::*;
use mysql_async::{Conn, Opts, TxOpts};

/// Per-replica budgets: replica A and replica B.
const BUDGET_A: usize = 6;
const BUDGET_B: usize = 4;
/// Clients per proxy and rounds per client (a SELECT and a 3-statement
/// transaction each: 600 statements per client).
const CLIENTS_PER_PROXY: usize = 50;
const ROUNDS: usize = 150;
const OVERALL: Duration = Duration::from_secs(120);

async fn client(url: String, i: usize) -> Result<(), String> {
    let opts = Opts::from_url(&url).map_err(|e| e.to_string())?;
    let mut c = Conn::new(opts)
        .await
        .map_err(|e| format!("client {i}: login: {e}"))?;
    for r in 0..ROUNDS {
        // A plain statement and a short transaction (3 statements + commit).
        let v: Option<u64> = c
            .query_first(format!("SELECT {r} + {i}"))
            .await
            .map_err(|e| format!("client {i}: select: {e}"))?;
        if v != Some((r + i) as u64) {
            return Err(format!("client {i}: wrong result {v:?}"));
        }
        let mut tx = c
            .start_transaction(TxOpts::default())
            .await
            .map_err(|e| format!("client {i}: begin: {e}"))?;
        tx.exec_drop(
            "INSERT INTO scale_out.hits (client, n) VALUES (?, 1) ON DUPLICATE KEY UPDATE n = n + 1",
            (i,),
        )
        .await
        .map_err(|e| format!("client {i}: insert: {e}"))?;
        let _: Option<u64> = tx
            .exec_first("SELECT n FROM scale_out.hits WHERE client = ?", (i,))
            .await
            .map_err(|e| format!("client {i}: read back: {e}"))?;
        tx.commit()
            .await
            .map_err(|e| format!("client {i}: commit: {e}"))?;
    }
    c.disconnect().await.map_err(|e| e.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_replicas_share_one_server_budget() {
    // A private server whose max_connections is the combined budget plus a
    // reserve for the sampling CLI and root: any overshoot would also show
    // up as "Too many connections" errors at the clients.
    // (Stopped when the test ends: the binary runs every other test too.)
    let db = Arc::new(MariaDb::start_with_args(&["--max-connections=16"]));
    db.sql(
        "CREATE DATABASE scale_out; CREATE TABLE scale_out.hits (client INT PRIMARY KEY, n INT NOT NULL); GRANT ALL ON scale_out.* TO 'app'@'%'",
    );
    let a = Proxy::builder(&db)
        .groups(2)
        .max_backend(BUDGET_A)
        .start()
        .await;
    let b = Proxy::builder(&db)
        .groups(2)
        .max_backend(BUDGET_B)
        .start()
        .await;

    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let sampled = db.clone();
    let sampler = std::thread::spawn(move || {
        let mut samples = Vec::new();
        while !s.load(Ordering::Relaxed) {
            samples.push(app_sessions(&sampled));
            std::thread::sleep(SAMPLE_EVERY / 2);
        }
        samples
    });

    let start = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..2 * CLIENTS_PER_PROXY {
        let url = if i % 2 == 0 { a.app_url() } else { b.app_url() };
        tasks.push(tokio::spawn(client(url, i)));
    }
    let mut errors = Vec::new();
    for t in tasks {
        match tokio::time::timeout(OVERALL, t).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(e))) => errors.push(e),
            Ok(Err(e)) => errors.push(format!("task: {e}")),
            Err(_) => errors.push("client timed out".into()),
        }
    }
    let took = start.elapsed();
    // One more sample after the load, with both pools at their size.
    std::thread::sleep(SAMPLE_EVERY);
    stop.store(true, Ordering::Relaxed);
    let samples = tokio::task::spawn_blocking(move || sampler.join())
        .await
        .expect("join")
        .expect("sampler");
    let max = samples.iter().copied().max().unwrap_or(0);
    eprintln!(
        "two proxies: {} clients x {ROUNDS} rounds in {took:?}; {} server samples, max app sessions {max} (budget {} + {})",
        2 * CLIENTS_PER_PROXY,
        samples.len(),
        BUDGET_A,
        BUDGET_B
    );
    assert!(
        errors.is_empty(),
        "{} client errors: {:?}",
        errors.len(),
        &errors[..errors.len().min(5)]
    );
    assert!(samples.len() >= 3, "the server was sampled during the load");
    assert!(
        max <= BUDGET_A + BUDGET_B,
        "backend sessions {max} exceed the combined budget {}",
        BUDGET_A + BUDGET_B
    );
    assert!(
        max > BUDGET_A.max(BUDGET_B),
        "both replicas held backends at once (max {max})"
    );
    assert!(a.backends_owned() <= BUDGET_A && b.backends_owned() <= BUDGET_B);
    let total: u64 = db
        .sql("SELECT SUM(n) FROM scale_out.hits")
        .trim()
        .parse()
        .expect("sum");
    assert_eq!(
        total as usize,
        2 * CLIENTS_PER_PROXY * ROUNDS,
        "every transaction committed"
    );
}
