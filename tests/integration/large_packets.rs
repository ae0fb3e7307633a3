//! Large packets through the proxy: a query above the server's
//! `max_allowed_packet` gets the server's own error (1153) without the
//! proxy reading it whole; the proxy's memory (RSS of the real binary, from
//! /proc) stays well below the size of a large query or result row while it
//! passes, and returns close to where it was after; state a streamed query
//! leaves past the part the proxy read is kept (the session is pinned); the
//! same over a compressed hop.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use common::binary::Binary;
use common::mariadb::{APP_PASSWORD, APP_USER, free_port};
use common::raw::{RawConn, parse_err};
use common::{MariaDb, Proxy};
use myplex::config::{Config, UserConfig};
use mysql_async::prelude::*;
use mysql_async::{Conn, Opts};

const MIB: usize = 1024 * 1024;

/// Sends a `size`-byte COM_QUERY (the write may fail once the peer has
/// answered and closed) and returns the error code of what came back, and
/// whether the connection then still answers a ping.
async fn oversize_query(addr: &str, size: usize) -> (Option<u16>, bool) {
    let mut c = RawConn::connect(addr, APP_USER, APP_PASSWORD, Some("test"), false).await;
    let mut q = b"\x03SELECT LENGTH('".to_vec();
    q.resize(size, b'x');
    q.extend_from_slice(b"')");
    let _ = c.send_raw(0, &q).await;
    let code = c
        .try_read("reply to an oversize query")
        .await
        .and_then(|(_, p)| parse_err(&p))
        .map(|e| e.code);
    let alive = c.send_raw(0, &[0x0e]).await.is_ok() && c.try_read("ping").await.is_some();
    (code, alive)
}

/// A 40 MiB query against a server with a 16 MiB max_allowed_packet: the
/// client gets the server's 1153 from the proxy, as directly, and the
/// connection is closed afterwards in both cases.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn query_above_the_servers_limit_gets_1153() {
    let db = MariaDb::start_with_args(&["--max-allowed-packet=16M"]);
    let p = Proxy::builder(&db).start().await;
    let direct = oversize_query(&db.addr(), 40 * MIB).await;
    let proxied = oversize_query(&p.addr.to_string(), 40 * MIB).await;
    assert_eq!(proxied, (Some(1153), false), "direct gave {direct:?}");
    assert_eq!(proxied, direct);
    // Just below the limit passes.
    let mut c = Conn::from_url(p.app_url()).await.expect("login");
    let n = 15 * MIB;
    let len: Option<u64> = c
        .query_first(format!("SELECT LENGTH('{}')", "y".repeat(n)))
        .await
        .expect("15 MiB query");
    assert_eq!(len, Some(n as u64));
}

fn rss_kib(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .expect("VmRSS")
}

/// Samples `pid`'s RSS every millisecond while `run` goes; returns the peak.
async fn peak_during<F: std::future::Future<Output = ()>>(pid: u32, run: F) -> u64 {
    let stop = Arc::new(AtomicBool::new(false));
    let peak = Arc::new(AtomicU64::new(rss_kib(pid)));
    let sampler = {
        let (stop, peak) = (stop.clone(), peak.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                peak.fetch_max(rss_kib(pid), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    };
    run.await;
    stop.store(true, Ordering::Relaxed);
    sampler.join().expect("sampler");
    peak.load(Ordering::Relaxed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_query_and_row_keep_proxy_memory_bounded() {
    let db = MariaDb::start_with_args(&["--max-allowed-packet=256M"]);
    let port = free_port();
    let mut cfg = Config {
        listen: format!("127.0.0.1:{port}"),
        admin_listen: format!("127.0.0.1:{}", free_port()),
        ..Default::default()
    };
    cfg.backend.address = db.addr();
    cfg.pool.thread_groups = 1;
    cfg.pool.max_backend_connections = 2;
    cfg.frontend.max_allowed_packet = 256 * MIB;
    cfg.users = vec![UserConfig {
        name: APP_USER.into(),
        password: Some(APP_PASSWORD.into()),
        backend_user: Some(APP_USER.into()),
        backend_password: Some(APP_PASSWORD.into()),
        ..Default::default()
    }];
    let (bin, mut c) = Binary::start(&cfg, "large").await;
    let pid = bin.pid;
    // Warm up: every buffer and the backend connection exist.
    for _ in 0..3 {
        let _: Option<u64> = c
            .query_first(format!("SELECT LENGTH('{}')", "w".repeat(64 * 1024)))
            .await
            .expect("warm-up");
    }
    let base = rss_kib(pid);
    let size = 64 * MIB;
    let q = format!("SELECT LENGTH('{}')", "q".repeat(size));
    let peak_query = peak_during(pid, async {
        let n: Option<u64> = c.query_first(&q).await.expect("64 MiB query");
        assert_eq!(n, Some(size as u64));
    })
    .await;
    drop(q);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after_query = rss_kib(pid);
    let peak_row = peak_during(pid, async {
        let row: Option<Vec<u8>> = c
            .query_first(format!("SELECT REPEAT('r', {size})"))
            .await
            .expect("64 MiB row");
        assert_eq!(row.map(|r| r.len()), Some(size));
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after_row = rss_kib(pid);
    eprintln!(
        "proxy RSS KiB: base {base}, peak during 64 MiB query {peak_query} (+{}), after {after_query} (+{}); peak during 64 MiB row {peak_row} (+{}), after {after_row} (+{})",
        peak_query.saturating_sub(base),
        after_query.saturating_sub(base),
        peak_row.saturating_sub(base),
        after_row.saturating_sub(base)
    );
    let size_kib = (size / 1024) as u64;
    assert!(
        peak_query.saturating_sub(base) < size_kib / 2,
        "query: RSS grew {} KiB for a {size_kib} KiB query",
        peak_query - base
    );
    assert!(
        peak_row.saturating_sub(base) < size_kib / 2,
        "row: RSS grew {} KiB for a {size_kib} KiB row",
        peak_row - base
    );
    for (what, after) in [("query", after_query), ("row", after_row)] {
        assert!(
            after.saturating_sub(base) < 8 * 1024,
            "{what}: RSS stayed {} KiB above the baseline",
            after - base
        );
    }
    drop(c);
    bin.stop().await;
}

/// A streamed query's text is only partly read by the proxy: state it
/// leaves past the first 64 KiB (a user variable here) must pin the
/// session (fail closed), so the client reads it back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_set_past_the_prefix_of_a_large_query_is_kept() {
    let db = MariaDb::start_with_args(&["--max-allowed-packet=64M"]);
    let p = Proxy::builder(&db)
        .with(|c| {
            c.pool.thread_groups = 1;
            c.pool.max_backend_connections = 2;
        })
        .start()
        .await;
    let opts = mysql_async::OptsBuilder::from_opts(Opts::from_url(&p.app_url()).expect("url"))
        .max_allowed_packet(Some(64 * MIB));
    let mut a = Conn::new(opts).await.expect("login");
    let n = 20 * MIB;
    a.query_drop(format!("SELECT LENGTH('{}') INTO @v", "z".repeat(n)))
        .await
        .expect("large query");
    // The session publishes its pins just after its response (from its
    // group's worker thread): give it a moment.
    let mut pinned = false;
    for _ in 0..50 {
        pinned = p
            .shared
            .sessions
            .lock()
            .expect("sessions")
            .values()
            .any(|h| h.pins.load(Ordering::Relaxed) != 0);
        if pinned {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert!(pinned, "the session must stay on its backend");
    // Another client keeps the other backend busy meanwhile.
    let mut b = Conn::from_url(p.app_url()).await.expect("login b");
    for _ in 0..5 {
        b.query_drop("SELECT 1").await.expect("b");
        let v: Option<u64> = a.query_first("SELECT @v").await.expect("read back");
        assert_eq!(v, Some(n as u64));
    }
    drop(a);
    // The same sizes over a compressed client hop.
    let opts = mysql_async::OptsBuilder::from_opts(
        Opts::from_url(&format!("{}&compression=fast", p.app_url())).expect("url"),
    )
    .max_allowed_packet(Some(64 * MIB));
    let mut z = Conn::new(opts).await.expect("compressed login");
    let len: Option<u64> = z
        .query_first(format!("SELECT LENGTH('{}')", "c".repeat(n)))
        .await
        .expect("large query, compressed");
    assert_eq!(len, Some(n as u64));
    let row: Option<Vec<u8>> = z
        .query_first(format!("SELECT REPEAT('d', {n})"))
        .await
        .expect("large row, compressed");
    assert_eq!(row.map(|r| r.len()), Some(n));
    let one: Option<u8> = z.query_first("SELECT 1").await.expect("after");
    assert_eq!(one, Some(1));
}
