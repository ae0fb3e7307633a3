//! Real sysbench (`oltp_read_write`, text protocol) through the proxy at
//! hundreds to a thousand client threads over a handful of backend
//! connections. These are correctness tests, not benchmarks: they assert
//! zero errors (sysbench retries InnoDB deadlocks, and each retry must match
//! a deadlock the server counted) and that the backend never sees more
//! connections from the proxy than `max_backend_connections`; throughput and
//! latency are only printed (run with `--nocapture` to see them).
//!
//! The tests in this file share one MariaDB and count the backend's
//! processlist for user `app`, so they run one at a time: each holds
//! `common::heavy()`, as every test does that loads the whole process.

use crate::common;

use std::time::Duration;

use common::load::{
    Samplers, app_sessions, group_snapshots, innodb_deadlocks, listen_overflows,
    wait_no_app_sessions,
};
use common::mariadb::{APP_PASSWORD, APP_USER};
use common::sysbench::{
    assert_clean_run, oltp_args, parse_stats, prepare, run_args, sysbench_async,
};
use common::{MariaDb, Proxy};

/// Text protocol: no server-side prepared statements.
const TEXT_PROTOCOL: &[&str] = &["--db-ps-mode=disable"];

struct LoadSpec {
    schema: &'static str,
    threads: usize,
    time_s: u64,
    groups: usize,
    max_backend: usize,
    queue_timeout_ms: Option<u64>,
    runtime: myplex::config::RuntimeMode,
}

/// Prepares `spec.schema` directly on the server, starts a proxy, runs
/// `oltp_read_write` through it while sampling the processlist, and asserts:
/// sysbench exited cleanly, no errors except retried InnoDB deadlocks that the
/// server confirms, no reconnects, some transactions, and never more than
/// `max_backend` backend sessions of user `app`.
async fn oltp_through_proxy(spec: LoadSpec) {
    // One sysbench run at a time: they share the server and its
    // processlist (and a thousand sockets is heavy).
    let _heavy = common::heavy();
    myplex::server::raise_fd_limit();
    let db = MariaDb::shared();

    prepare(db, spec.schema, TEXT_PROTOCOL).await;

    // Whatever earlier tests left behind closes when their runtimes end.
    let settle = {
        let db: &'static MariaDb = db;
        tokio::task::spawn_blocking(move || wait_no_app_sessions(db, Duration::from_secs(20)))
            .await
            .expect("wait")
    };

    let mut builder = Proxy::builder(db)
        .groups(spec.groups)
        .max_backend(spec.max_backend)
        .with(|c| c.runtime = spec.runtime);
    if let Some(ms) = spec.queue_timeout_ms {
        builder = builder.queue_timeout_ms(ms);
    }
    let proxy = builder.start().await;
    if spec.runtime == myplex::config::RuntimeMode::PerGroup {
        let want = proxy.shared.config.load().effective_session_threads();
        assert!(
            want >= 1 && group_worker_threads(&proxy, spec.groups).await >= want,
            "runtime per_group: expected {want} group worker threads for {} groups",
            spec.groups
        );
    }

    // The proxy dials one probe connection at start (version, trackers) and
    // closes it; it must be gone before the load so it cannot add to the cap.
    let (at_start, probe_gone_after) = tokio::task::spawn_blocking(move || {
        let at_start = app_sessions(db);
        (at_start, wait_no_app_sessions(db, Duration::from_secs(10)))
    })
    .await
    .expect("probe check");
    assert_eq!(
        proxy.backends_owned(),
        0,
        "the pool owns connections before any client"
    );

    let deadlocks_before = innodb_deadlocks(db);
    let overflows_before = listen_overflows();
    let samplers = Samplers::start(db, proxy.shared.clone(), app_sessions);
    let mut run = oltp_args(
        proxy.addr.port(),
        APP_USER,
        APP_PASSWORD,
        spec.schema,
        TEXT_PROTOCOL,
    );
    run.extend(run_args(spec.threads, spec.time_s));
    // --time plus thread startup (sysbench gives up after 30 s), the last
    // queued transactions, and disconnects.
    let limit = Duration::from_secs(spec.time_s + 90);
    let sb = sysbench_async(run, limit).await;
    let sampled = samplers.finish().await;
    let deadlocks = innodb_deadlocks(db) - deadlocks_before;
    let overflows = listen_overflows().zip(overflows_before).map(|(a, b)| a - b);

    let stats = parse_stats(&sb.stdout);
    let pl_max = sampled.max_of(|&n| n);
    let snapshot = group_snapshots(&proxy.shared);
    eprintln!(
        "[{}] threads={} groups={} max_backend={} | settle={settle:?} app sessions at proxy start={at_start} (probe gone after {probe_gone_after:?}) \
         | sysbench {:?} in {:?} | {stats:?} | innodb deadlocks={deadlocks} | kernel ListenOverflows delta={overflows:?} | processlist max={pl_max} over {} samples, owned max={} | groups after: {snapshot:?}",
        spec.schema,
        spec.threads,
        spec.groups,
        spec.max_backend,
        sb.status,
        sb.elapsed,
        sampled.server.len(),
        sampled.owned_max,
    );

    assert_clean_run(&sb, stats, deadlocks);

    assert!(
        pl_max >= 1,
        "the processlist sampler never saw the proxy's backend sessions: {:?}",
        sampled.server
    );
    assert!(
        pl_max <= spec.max_backend,
        "backend saw {pl_max} sessions of user app, cap is {}: samples {:?}",
        spec.max_backend,
        sampled.server
    );
    assert!(
        sampled.owned_max <= spec.max_backend,
        "the pool owned {} backend connections, cap is {}",
        sampled.owned_max,
        spec.max_backend
    );

    drop(proxy);
    db.sql(&format!("DROP DATABASE IF EXISTS `{}`", spec.schema));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oltp_read_write_512_threads_zero_errors() {
    oltp_through_proxy(LoadSpec {
        schema: "sb_rw_512",
        threads: 512,
        time_s: 15,
        groups: 2,
        max_backend: 16,
        queue_timeout_ms: None,
        runtime: Default::default(),
    })
    .await;
}

/// The bar: 1,000 sysbench threads (transactions of 18 statements)
/// through 8 backend connections with zero errors; waiting is bounded only
/// by the queue timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousand_clients_through_eight_backends() {
    oltp_through_proxy(LoadSpec {
        schema: "sb_rw_1000",
        threads: 1000,
        time_s: 20,
        groups: 2,
        max_backend: 8,
        queue_timeout_ms: Some(60_000),
        runtime: Default::default(),
    })
    .await;
}

/// The same load with every session and its backends on its thread
/// group's own single-threaded worker (`runtime = "per_group"`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oltp_read_write_on_per_group_workers() {
    oltp_through_proxy(LoadSpec {
        schema: "sb_rw_workers",
        threads: 256,
        time_s: 10,
        groups: 2,
        max_backend: 16,
        queue_timeout_ms: None,
        runtime: myplex::config::RuntimeMode::PerGroup,
    })
    .await;
}

/// The threads of this process, named as group workers, that carry this
/// proxy's `groups` thread groups: each group's worker reports the thread
/// it runs on. (Other tests' proxies run in this process too, with their
/// own workers.)
async fn group_worker_threads(proxy: &Proxy, groups: usize) -> usize {
    let workers = proxy
        .shared
        .workers
        .as_ref()
        .expect("runtime per_group: the proxy has group workers");
    let mut threads = std::collections::BTreeSet::new();
    for group in 0..groups {
        let (tx, rx) = tokio::sync::oneshot::channel();
        workers.spawn(group, async move {
            // "<pid>/task/<tid>"
            let _ = tx.send(std::fs::read_link("/proc/thread-self"));
        });
        let link = rx.await.expect("group worker runs").expect("thread-self");
        let tid = link.file_name().expect("thread id").to_owned();
        threads.insert(tid);
    }
    threads
        .iter()
        .filter(|tid| {
            std::fs::read_to_string(
                std::path::Path::new("/proc/self/task")
                    .join(tid)
                    .join("comm"),
            )
            .is_ok_and(|c| c.starts_with("myplex-group-"))
        })
        .count()
}

#[test]
fn parses_sysbench_report() {
    let out = "\
SQL statistics:
    queries performed:
        read:                            140
        write:                           40
        other:                           20
        total:                           200
    transactions:                        10     (0.66 per sec.)
    queries:                             200    (13.20 per sec.)
    ignored errors:                      1      (0.07 per sec.)
    reconnects:                          0      (0.00 per sec.)

Latency (ms):
         min:                                    1.10
         avg:                                   12.50
         max:                                   99.00
         95th percentile:                       30.26
         sum:                                  125.00

Threads fairness:
    events (avg/stddev):           21.5170/0.50
    execution time (avg/stddev):   20.5800/0.34
";
    let s = parse_stats(out).expect("parsed");
    assert_eq!(s.transactions, 10);
    assert!((s.tps - 0.66).abs() < 1e-9);
    assert_eq!(s.queries, 200);
    assert_eq!(s.ignored_errors, 1);
    assert_eq!(s.errors, None);
    assert_eq!(s.reconnects, 0);
    assert!((s.latency_p95_ms - 30.26).abs() < 1e-9);
    assert!((s.latency_max_ms - 99.0).abs() < 1e-9);
    assert_eq!(s.events_per_thread, (21.517, 0.5));
    assert!(parse_stats("FATAL: nothing").is_none());
}
