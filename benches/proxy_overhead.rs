//! What myplex adds to a round trip: one client running `SELECT 1` three
//! ways in one run — straight to MariaDB, through a bare TCP forwarder (the
//! cost of an extra hop alone), and through myplex. After the criterion
//! measurements, an interleaved pass records every single round trip and
//! prints p50/p90/p99 per path and myplex's added p50 latency.

#[path = "../tests/integration/common/mod.rs"]
mod common;

use std::hint::black_box;
use std::net::SocketAddr;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group};
use hdrhistogram::Histogram;
use mysql_async::prelude::Queryable;
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Runtime;

use common::mariadb::{APP_PASSWORD, APP_USER, TEST_DB};
use common::{MariaDb, Proxy};

/// Round trips per path in the percentile pass.
const SAMPLES: usize = 3_000;

/// A trivial forwarder: every accepted connection is copied both ways to
/// `upstream`.
async fn tcp_pipe(upstream: SocketAddr) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut client, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let Ok(mut server) = TcpStream::connect(upstream).await else {
                    return;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
            });
        }
    });
    addr
}

fn url_for(addr: SocketAddr) -> String {
    format!("mysql://{APP_USER}:{APP_PASSWORD}@{addr}/{TEST_DB}?prefer_socket=false")
}

async fn select_1(conn: &mut mysql_async::Conn) {
    let v: Option<i64> = conn.query_first("SELECT 1").await.unwrap();
    assert_eq!(v, Some(1));
}

struct Paths {
    /// Serves the proxy and the pipe, like a separate process would.
    server_rt: Runtime,
    /// Drives the client.
    client_rt: Runtime,
    proxy: Proxy,
    conns: Vec<(&'static str, mysql_async::Conn)>,
}

fn setup() -> Paths {
    let db = MariaDb::shared();
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let client_rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let direct: SocketAddr = db.addr().parse().unwrap();
    let (proxy, pipe) =
        server_rt.block_on(async { (Proxy::builder(db).start().await, tcp_pipe(direct).await) });
    let urls = [
        ("direct", url_for(direct)),
        ("tcp_pipe", url_for(pipe)),
        ("myplex", proxy.url(APP_USER, APP_PASSWORD, TEST_DB)),
    ];
    let conns = client_rt.block_on(async {
        let mut conns = Vec::new();
        for (name, url) in urls {
            let opts = mysql_async::Opts::from_url(&url).unwrap();
            let mut conn = mysql_async::Conn::new(opts).await.unwrap();
            for _ in 0..200 {
                select_1(&mut conn).await;
            }
            conns.push((name, conn));
        }
        conns
    });
    assert!(
        proxy.backends_owned() > 0,
        "the myplex path must reach MariaDB through the proxy"
    );
    Paths {
        server_rt,
        client_rt,
        proxy,
        conns,
    }
}

fn select_1_three_ways(c: &mut Criterion) {
    let mut paths = setup();
    let mut g = c.benchmark_group("select_1");
    g.throughput(Throughput::Elements(1));
    for (name, conn) in &mut paths.conns {
        g.bench_function(*name, |b| {
            b.iter_custom(|iters| {
                paths.client_rt.block_on(async {
                    let start = std::time::Instant::now();
                    for _ in 0..iters {
                        select_1(conn).await;
                    }
                    start.elapsed()
                })
            })
        });
    }
    g.finish();

    percentiles(&mut paths);

    let Paths {
        server_rt,
        client_rt,
        proxy,
        conns,
    } = paths;
    client_rt.block_on(async {
        for (_, conn) in conns {
            let _ = conn.disconnect().await;
        }
    });
    drop(proxy);
    server_rt.shutdown_timeout(Duration::from_secs(2));
}

/// Every round trip timed on its own, the three paths interleaved so drift
/// on the machine hits them alike.
fn percentiles(paths: &mut Paths) {
    let mut hists: Vec<Histogram<u64>> = (0..paths.conns.len())
        .map(|_| Histogram::new(3).unwrap())
        .collect();
    paths.client_rt.block_on(async {
        for _ in 0..SAMPLES {
            for ((_, conn), h) in paths.conns.iter_mut().zip(hists.iter_mut()) {
                let start = std::time::Instant::now();
                select_1(conn).await;
                h.record(start.elapsed().as_nanos() as u64).unwrap();
            }
        }
    });
    let us = |ns: u64| ns as f64 / 1000.0;
    println!("\nselect_1 round trips, {SAMPLES} per path, interleaved:");
    println!(
        "{:<10} {:>9} {:>9} {:>9}",
        "path", "p50 µs", "p90 µs", "p99 µs"
    );
    for ((name, _), h) in paths.conns.iter().zip(&hists) {
        println!(
            "{:<10} {:>9.1} {:>9.1} {:>9.1}",
            name,
            us(h.value_at_quantile(0.5)),
            us(h.value_at_quantile(0.9)),
            us(h.value_at_quantile(0.99)),
        );
    }
    let p50 = |i: usize| us(hists[i].value_at_quantile(0.5));
    println!(
        "added p50 over direct: tcp_pipe {:+.1} µs, myplex {:+.1} µs (target: myplex ≤ +40 µs)\n",
        p50(1) - p50(0),
        p50(2) - p50(0),
    );
    black_box(&hists);
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4))
        .sample_size(40)
        .without_plots();
    targets = select_1_three_ways
}

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
