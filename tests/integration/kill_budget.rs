//! Helper connections that interrupt statements (`KILL QUERY` from a
//! client) come out of the backend budget: while many kills run at once the
//! server never sees more connections from the proxy's backend user than
//! `pool.max_backend_connections`, sampled every few milliseconds.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::mariadb::{APP_USER, ROOT_PASSWORD};
use common::{MariaDb, Proxy};
use mysql_async::Conn;
use mysql_async::prelude::*;

const CAP: usize = 8;

/// Samples the server's connections of the app user until stopped; returns
/// the highest count seen and the number of samples.
fn sample(db_url: String, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<(usize, usize)> {
    tokio::spawn(async move {
        let mut root = Conn::from_url(db_url).await.expect("root login");
        let q = format!(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = '{APP_USER}'"
        );
        let (mut max, mut n) = (0, 0);
        while !stop.load(Ordering::Relaxed) {
            let c: Option<usize> = root.query_first(&q).await.expect("sample");
            max = max.max(c.unwrap_or(0));
            n += 1;
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        (max, n)
    })
}

/// `sleepers` clients run `SELECT SLEEP(secs)`; as many others KILL QUERY
/// them all at once. Returns how many sleeps were interrupted (an error 1317
/// or SLEEP returning 1) and how long the slowest sleeper took.
async fn kill_round(p: &Proxy, sleepers: usize, secs: u32) -> (usize, Duration) {
    // Killers log in first (a login checks its schema on a backend).
    let mut killer_conns = Vec::new();
    for _ in 0..sleepers {
        killer_conns.push(Conn::from_url(p.app_url()).await.expect("killer login"));
    }
    let mut ids = Vec::new();
    let mut runs = Vec::new();
    for _ in 0..sleepers {
        let mut c = Conn::from_url(p.app_url()).await.expect("login");
        let id: u32 = c
            .query_first("SELECT CONNECTION_ID()")
            .await
            .expect("id")
            .expect("row");
        ids.push(id);
        runs.push(tokio::spawn(async move {
            common::load::sleep_until_killed(&mut c, secs).await
        }));
    }
    // Let every sleep reach the server.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut killers = Vec::new();
    for (id, mut k) in ids.into_iter().zip(killer_conns) {
        killers.push(tokio::spawn(async move {
            k.query_drop(format!("KILL QUERY {id}"))
                .await
                .expect("kill");
        }));
    }
    for k in killers {
        k.await.expect("killer");
    }
    let mut interrupted = 0;
    let mut slowest = Duration::ZERO;
    for r in runs {
        let (killed, took) = r.await.expect("sleeper");
        interrupted += usize::from(killed);
        slowest = slowest.max(took);
    }
    (interrupted, slowest)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_helpers_stay_within_the_backend_budget() {
    let db = MariaDb::shared();
    let p = Proxy::builder(db)
        .with(|c| {
            c.pool.thread_groups = 2;
            c.pool.oversubscribe = CAP / 2;
            c.pool.max_backend_connections = CAP;
            c.pool.queue_timeout_ms = 20_000;
        })
        .start()
        .await;
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = sample(db.url("root", ROOT_PASSWORD, ""), stop.clone());

    // Room for helpers: six sleepers, six kills at once; every sleep ends
    // early.
    let (interrupted, slowest) = kill_round(&p, 6, 20).await;
    assert_eq!(interrupted, 6, "every sleep interrupted");
    assert!(slowest < Duration::from_secs(10), "{slowest:?}");

    // No room: all eight backend connections sleep and eight kills come at
    // once. Helpers wait for a connection to come free (bounded) instead of
    // opening a ninth.
    let _ = kill_round(&p, CAP, 3).await;

    stop.store(true, Ordering::Relaxed);
    let (max, samples) = sampler.await.expect("sampler");
    assert!(samples > 100, "sampled often enough: {samples}");
    assert!(
        max <= CAP,
        "server saw {max} connections of {APP_USER} for a budget of {CAP}"
    );
    let m = p.http_get("/metrics").await.1;
    let helpers: usize = m
        .lines()
        .filter(|l| l.starts_with("myplex_kill_helpers_total{") && l.contains("outcome=\"sent\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as usize)
        .sum();
    assert!(helpers >= 6, "helpers counted: {m}");
}
