//! The elastic backend pool against a real server: with
//! `pool.max_backend_connections = 0` the proxy learns its ceiling from the
//! server's `@@max_connections` (minus the reserve), a group whose
//! statements wait (`SELECT SLEEP`) opens backends beyond its base share but
//! never beyond that ceiling (its own adaptive limit climbing, though every
//! sleep outlasts the stall threshold), and the borrowed backends close
//! again once the load is gone (a short `idle_timeout_s`). The pool's wait probe reads
//! the server's own gauges: nothing waits on an idle or CPU-bound server
//! (then no adaptive limit climbs past its base share), statements held in
//! the server without a gauge saying why make it busy, row-lock waits make
//! it wait, and the verdict shows in `/status` and `/metrics`.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::mariadb::{APP_PASSWORD, APP_USER};
use common::{MariaDb, Proxy};
use myplex::pool::server_waits::Verdict;
use mysql_async::Conn;
use mysql_async::prelude::*;

/// The server's max_connections, the reserve, and what is left for the proxy.
const MAX_CONNECTIONS: usize = 40;
const RESERVE: usize = 22;
const CEILING: usize = MAX_CONNECTIONS - RESERVE;
/// One group, `oversubscribe = 0`: base share 4 × 1 × (1 + 0).
const BASE: usize = 4;
const CLIENTS: usize = 30;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_statements_borrow_backends_up_to_the_server_ceiling_and_give_them_back() {
    let db = MariaDb::start_with_args(&["--max-connections=40"]);
    let p = Proxy::builder(&db)
        .groups(1)
        .max_backend(0)
        .oversubscribe(0)
        .with(|c| {
            c.pool.reserved_server_connections = RESERVE;
            c.pool.idle_timeout_s = 1;
            c.pool.stall_limit_ms = 100;
        })
        .start()
        .await;
    // The ceiling is read by the pool's maintenance right after start.
    let t0 = Instant::now();
    while p.shared.pool.budget.view().ceiling != CEILING {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "ceiling not learnt: {:?}",
            p.shared.pool.budget.view()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(p.shared.pool.groups[0].snapshot().max_owned, BASE);

    let stop = Arc::new(AtomicBool::new(false));
    let most = Arc::new(AtomicUsize::new(0));
    let sampler = {
        let (stop, most, shared) = (stop.clone(), most.clone(), p.shared.clone());
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let owned: usize = shared.pool.groups.iter().map(|g| g.snapshot().owned).sum();
                most.fetch_max(owned, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        let url = p.app_url();
        let stop = stop.clone();
        clients.push(tokio::spawn(async move {
            let mut c = Conn::from_url(url).await.expect("login");
            let mut n = 0u32;
            while !stop.load(Ordering::Relaxed) {
                let v: Option<u32> = c.query_first("SELECT SLEEP(0.2)").await.expect("sleep");
                assert_eq!(v, Some(0));
                n += 1;
            }
            drop(c);
            n
        }));
    }
    // Until the group's own search took its in-flight limit past the base
    // share, within 40 s. The first statements of each login are quick (the
    // driver's setup), so the first sleeps look stalled after 5 ms and the
    // pool may briefly open every backend it can before it knew what the
    // load is: that start proves nothing, so the backends are counted only
    // from the limit's climb on. Every sleep outlasts `stall_limit_ms`
    // (200 vs 100 ms), so the climb also proves that stalled statements
    // still teach the search (CI once ran 40 s at a limit of 2: 769 sleeps,
    // at most 7 backends). Alone the climb takes ~10 s.
    let t1 = Instant::now();
    let climbed = |p: &Proxy| {
        p.shared.pool.groups[0]
            .snapshot()
            .adaptive
            .is_some_and(|e| e.limit > BASE)
    };
    while !climbed(&p) {
        assert!(
            t1.elapsed() < Duration::from_secs(40),
            "the limit never climbed past the base share: {:?}",
            p.shared.pool.groups[0].snapshot()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    most.store(0, Ordering::Relaxed);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let status = p.http_get("/status").await.1;
    let metrics = p.http_get("/metrics").await.1;
    stop.store(true, Ordering::Relaxed);
    let mut done = 0;
    for c in clients {
        done += c.await.expect("client");
    }
    sampler.await.expect("sampler");
    let most = most.load(Ordering::Relaxed);
    eprintln!("{done} sleeps; at most {most} backend connections (base {BASE}, ceiling {CEILING})");
    assert!(
        most > 2 * BASE,
        "waiting statements opened backends beyond the base share: {most}"
    );
    assert!(most <= CEILING, "never above the ceiling: {most}");
    assert!(
        status.contains(&format!("\"ceiling\": {CEILING}")),
        "{status}"
    );
    assert!(
        metrics.contains(&format!("myplex_backend_ceiling {CEILING}")),
        "{metrics}"
    );

    // Afterwards the borrowed backends close (idle_timeout_s = 1).
    let t1 = Instant::now();
    loop {
        let s = p.shared.pool.groups[0].snapshot();
        if s.owned <= BASE && s.elastic == 0 {
            break;
        }
        assert!(
            t1.elapsed() < Duration::from_secs(6),
            "backends did not come back down: {s:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the pool's wait verdict is `want` (within `limit`).
async fn verdict_becomes(p: &Proxy, want: Verdict, limit: Duration) {
    let t0 = Instant::now();
    loop {
        let v = p.shared.pool.budget.view();
        if v.server_waits == want {
            return;
        }
        assert!(
            t0.elapsed() < limit,
            "the wait verdict stayed {:?} (mean {:.2}), not {want:?}",
            v.server_waits,
            v.server_waiting
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_servers_own_wait_gauges_decide_whether_a_limit_may_climb_past_its_base() {
    let db = MariaDb::start();
    let p = Proxy::builder(&db)
        .groups(1)
        .max_backend(0)
        .oversubscribe(0)
        .with(|c| c.pool.wait_probe_ms = 50)
        .start()
        .await;
    // An idle server: nothing waits.
    verdict_becomes(&p, Verdict::None, Duration::from_secs(10)).await;

    // Quick statements through the proxy (as on the lab box, each spends
    // more time in the proxy, the client and on the wire than in the
    // server, which runs about one at a time) while nothing waits: the
    // limit never goes past the base share, so nothing is borrowed.
    let stop = Arc::new(AtomicBool::new(false));
    let mut clients = Vec::new();
    for _ in 0..24 {
        let (url, stop) = (p.app_url(), stop.clone());
        clients.push(tokio::spawn(async move {
            let mut c = Conn::from_url(url).await.expect("login");
            while !stop.load(Ordering::Relaxed) {
                let v: Option<u32> = c.query_first("SELECT 1").await.expect("query");
                assert_eq!(v, Some(1));
            }
        }));
    }
    let t0 = Instant::now();
    let (mut most_cap, mut seen) = (0, 0);
    // The group applies a new verdict at its next adaptation tick (every
    // 25 ms, later on a loaded machine): a reading counts once the verdict
    // has said "nothing waits" for several ticks (a loaded machine can make
    // the probe see waits for a moment; the limit may climb then, and is
    // back at the base by the next tick after they end).
    let settle = Duration::from_millis(250);
    let mut none_since: Option<Instant> = None;
    while t0.elapsed() < Duration::from_secs(4) {
        // The verdict on both sides of the reading: the cap was read
        // under it (a verdict turning in between is not counted).
        let before = p.shared.pool.budget.view().server_waits;
        let cap = p.shared.pool.groups[0].snapshot().cap;
        let now_none =
            before == Verdict::None && p.shared.pool.budget.view().server_waits == Verdict::None;
        if !now_none {
            none_since = None;
        } else if none_since.get_or_insert_with(Instant::now).elapsed() >= settle {
            most_cap = most_cap.max(cap);
            seen += 1;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.await.expect("client");
    }
    assert!(
        seen >= 100,
        "the verdict stayed none under a load of quick statements: {seen} readings"
    );
    assert!(
        most_cap <= BASE,
        "the limit climbed to {most_cap} (base {BASE}) while the server said nothing waits"
    );

    // Statements held in the server without a gauge saying why (SLEEP, as
    // user locks or a semi-sync acknowledgement would): busy, and the
    // throughput rule decides again.
    let direct = db.url(APP_USER, APP_PASSWORD, "test");
    let mut sleepers = Vec::new();
    for _ in 0..6 {
        let url = direct.clone();
        sleepers.push(tokio::spawn(async move {
            let mut c = Conn::from_url(url).await.expect("login");
            let _: Option<u32> = c.query_first("SELECT SLEEP(4)").await.expect("sleep");
        }));
    }
    verdict_becomes(&p, Verdict::Busy, Duration::from_secs(10)).await;
    assert!(p.shared.pool.budget.may_climb());
    let metrics = p.http_get("/metrics").await.1;
    assert!(metrics.contains("myplex_server_waits 2"), "{metrics}");
    for s in sleepers {
        s.await.expect("sleeper");
    }
    verdict_becomes(&p, Verdict::None, Duration::from_secs(10)).await;

    // Row-lock waits (direct sessions, outside the proxy): it waits.
    let mut holder = Conn::from_url(direct.clone()).await.expect("login");
    holder
        .query_drop("CREATE TABLE IF NOT EXISTS wait_probe (id INT PRIMARY KEY, v INT)")
        .await
        .expect("create");
    holder
        .query_drop("REPLACE INTO wait_probe VALUES (1, 0)")
        .await
        .expect("row");
    holder.query_drop("BEGIN").await.expect("begin");
    holder
        .query_drop("SELECT v FROM wait_probe WHERE id = 1 FOR UPDATE")
        .await
        .expect("lock");
    let mut waiters = Vec::new();
    for _ in 0..3 {
        let url = direct.clone();
        waiters.push(tokio::spawn(async move {
            let mut c = Conn::from_url(url).await.expect("login");
            c.query_drop("SET SESSION innodb_lock_wait_timeout = 30")
                .await
                .expect("set");
            c.query_drop("UPDATE wait_probe SET v = v + 1 WHERE id = 1")
                .await
                .expect("update after the lock is released");
        }));
    }
    verdict_becomes(&p, Verdict::Waits, Duration::from_secs(10)).await;
    let status = p.http_get("/status").await.1;
    let metrics = p.http_get("/metrics").await.1;
    assert!(status.contains("\"server_waits\": \"waits\""), "{status}");
    assert!(metrics.contains("myplex_server_waits 1"), "{metrics}");
    assert!(p.shared.pool.budget.may_climb());

    // The locks go, and with them the waits.
    holder.query_drop("COMMIT").await.expect("commit");
    for w in waiters {
        w.await.expect("waiter");
    }
    verdict_becomes(&p, Verdict::None, Duration::from_secs(10)).await;
    assert!(!p.shared.pool.budget.may_climb());
    let metrics = p.http_get("/metrics").await.1;
    assert!(metrics.contains("myplex_server_waits 0"), "{metrics}");
}
