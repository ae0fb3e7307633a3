//! Real sysbench (`oltp_read_write`, text protocol) through the proxy at
//! hundreds to a thousand client threads over a handful of backend
//! connections. These are correctness tests, not benchmarks: they assert
//! zero errors (sysbench retries InnoDB deadlocks, and each retry must match
//! a deadlock the server counted) and that the backend never sees more
//! connections from the proxy than `max_backend_connections`; throughput and
//! latency are only printed (run with `--nocapture` to see them).
//!
//! The tests in this file share one MariaDB and count the backend's
//! processlist for user `app`, so they run one at a time (`SERIAL`).

mod common;

use std::io::Read;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::mariadb::{APP_PASSWORD, APP_USER, ROOT_PASSWORD};
use common::{MariaDb, Proxy};
use myplex::frontend::Shared;

/// One sysbench run at a time: they share the server and its processlist.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Backend sessions of user `app` (the proxy's backend user). The sampling
/// CLI itself logs in as root, so it is not counted.
const APP_SESSIONS_SQL: &str =
    "SELECT COUNT(*) FROM information_schema.processlist WHERE user='app'";

/// How often the processlist is sampled during a run.
const SAMPLE_EVERY: Duration = Duration::from_millis(200);

fn app_sessions(db: &MariaDb) -> usize {
    let out = db.sql(APP_SESSIONS_SQL);
    out.trim()
        .parse()
        .unwrap_or_else(|e| panic!("processlist count {out:?}: {e}"))
}

/// `TcpExtListenOverflows` of this network namespace (diagnostics only: the
/// proxy listener's backlog is 128, and a handshake the kernel drops may
/// leave a sysbench thread waiting for a greeting).
fn listen_overflows() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/net/netstat").ok()?;
    let mut lines = text.lines();
    while let (Some(keys), Some(values)) = (lines.next(), lines.next()) {
        if keys.starts_with("TcpExt:") {
            let pos = keys
                .split_whitespace()
                .position(|k| k == "ListenOverflows")?;
            return values.split_whitespace().nth(pos)?.parse().ok();
        }
    }
    None
}

/// The server's `Innodb_deadlocks` counter.
fn innodb_deadlocks(db: &MariaDb) -> u64 {
    let out = db.sql("SHOW GLOBAL STATUS LIKE 'Innodb_deadlocks'");
    out.split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("Innodb_deadlocks: {out:?}"))
}

/// Polls the processlist until no `app` session is left (returns how long
/// that took); panics with the processlist after `limit`.
fn wait_no_app_sessions(db: &MariaDb, limit: Duration) -> Duration {
    let start = Instant::now();
    loop {
        if app_sessions(db) == 0 {
            return start.elapsed();
        }
        if start.elapsed() > limit {
            panic!(
                "user app still has backend sessions after {limit:?}:\n{}",
                db.sql("SELECT id, user, host, db, command, time, state, info FROM information_schema.processlist WHERE user='app'")
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Samples the backend processlist (std thread: `MariaDb::sql` blocks) and
/// the proxy's own count of owned backend connections (tokio task).
struct Samplers {
    stop: Arc<AtomicBool>,
    processlist: std::thread::JoinHandle<Vec<usize>>,
    owned: tokio::task::JoinHandle<usize>,
}

struct Sampled {
    /// Every processlist sample, in order.
    processlist: Vec<usize>,
    /// Largest `owned` the proxy reported.
    owned_max: usize,
}

impl Sampled {
    fn processlist_max(&self) -> usize {
        self.processlist.iter().copied().max().unwrap_or(0)
    }
}

impl Samplers {
    fn start(db: &'static MariaDb, shared: Arc<Shared>) -> Samplers {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let processlist = std::thread::spawn(move || {
            let mut samples = Vec::new();
            while !s.load(Ordering::Relaxed) {
                let t = Instant::now();
                samples.push(app_sessions(db));
                if let Some(rest) = SAMPLE_EVERY.checked_sub(t.elapsed()) {
                    std::thread::sleep(rest);
                }
            }
            samples
        });
        let s = stop.clone();
        let owned = tokio::spawn(async move {
            let mut max = 0;
            while !s.load(Ordering::Relaxed) {
                let owned: usize = shared.pool.groups.iter().map(|g| g.snapshot().owned).sum();
                max = max.max(owned);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            max
        });
        Samplers {
            stop,
            processlist,
            owned,
        }
    }

    async fn finish(self) -> Sampled {
        self.stop.store(true, Ordering::Relaxed);
        let processlist = tokio::task::spawn_blocking(move || self.processlist.join())
            .await
            .expect("join sampler")
            .expect("processlist sampler panicked");
        let owned_max = self.owned.await.expect("owned sampler");
        Sampled {
            processlist,
            owned_max,
        }
    }
}

/// What a sysbench process did.
struct SbRun {
    status: Option<ExitStatus>,
    timed_out: bool,
    elapsed: Duration,
    stdout: String,
    stderr: String,
}

impl SbRun {
    fn transcript(&self) -> String {
        format!(
            "exit: {:?} (timed out: {}, after {:?})\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.status, self.timed_out, self.elapsed, self.stdout, self.stderr
        )
    }

    fn succeeded(&self) -> bool {
        !self.timed_out && self.status.is_some_and(|s| s.success())
    }

    /// Lines that mention FATAL / ALERT / error (except the summary counters).
    fn complaints(&self) -> Vec<String> {
        self.stdout
            .lines()
            .chain(self.stderr.lines())
            .filter(|l| {
                let t = l.trim_start();
                let lower = t.to_ascii_lowercase();
                (lower.contains("fatal") || lower.contains("alert") || lower.contains("error"))
                    && !t.starts_with("ignored errors:")
                    && !t.starts_with("errors:")
            })
            .map(str::to_owned)
            .collect()
    }
}

/// Runs sysbench with `args`, killing it after `timeout`. Blocking.
fn sysbench(args: &[String], timeout: Duration) -> SbRun {
    let start = Instant::now();
    let mut child = Command::new("sysbench")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run sysbench (install sysbench 1.0.x): {e}"));
    let mut out = child.stdout.take().expect("piped");
    let mut err = child.stderr.take().expect("piped");
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let mut timed_out = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if start.elapsed() > timeout => {
                timed_out = true;
                let _ = child.kill();
                break child.wait().ok();
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(100)),
            Err(e) => panic!("waiting for sysbench: {e}"),
        }
    };
    SbRun {
        status,
        timed_out,
        elapsed: start.elapsed(),
        stdout: out_reader.join().unwrap_or_default(),
        stderr: err_reader.join().unwrap_or_default(),
    }
}

async fn sysbench_async(args: Vec<String>, timeout: Duration) -> SbRun {
    tokio::task::spawn_blocking(move || sysbench(&args, timeout))
        .await
        .expect("sysbench runner panicked")
}

/// The numbers of sysbench's final report.
#[derive(Debug, Default)]
struct SbStats {
    transactions: u64,
    tps: f64,
    queries: u64,
    qps: f64,
    /// The `errors:` line, if this sysbench prints one (1.0.20 does not).
    errors: Option<u64>,
    ignored_errors: u64,
    reconnects: u64,
    latency_avg_ms: f64,
    latency_p95_ms: f64,
    latency_max_ms: f64,
    /// Per-thread events: (avg, stddev) -- the fairness line.
    events_per_thread: (f64, f64),
}

/// `"    transactions:   1234   (82.20 per sec.)"` → (1234, 82.20).
fn count_and_rate(rest: &str) -> (u64, f64) {
    let mut it = rest.split_whitespace();
    let count = it.next().and_then(|v| v.parse().ok()).unwrap_or(0);
    let rate = it
        .next()
        .and_then(|v| v.trim_start_matches('(').parse().ok())
        .unwrap_or(0.0);
    (count, rate)
}

fn first_number(rest: &str) -> f64 {
    rest.split_whitespace()
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or(f64::NAN)
}

fn parse_stats(out: &str) -> Option<SbStats> {
    let mut s = SbStats::default();
    let mut saw_transactions = false;
    for line in out.lines() {
        let t = line.trim();
        let Some((key, rest)) = t.split_once(':') else {
            continue;
        };
        match key {
            "transactions" => {
                (s.transactions, s.tps) = count_and_rate(rest);
                saw_transactions = true;
            }
            "queries" => (s.queries, s.qps) = count_and_rate(rest),
            "errors" => s.errors = Some(count_and_rate(rest).0),
            "ignored errors" => s.ignored_errors = count_and_rate(rest).0,
            "reconnects" => s.reconnects = count_and_rate(rest).0,
            "avg" => s.latency_avg_ms = first_number(rest),
            "95th percentile" => s.latency_p95_ms = first_number(rest),
            "max" => s.latency_max_ms = first_number(rest),
            "events (avg/stddev)" => {
                let (avg, sd) = rest.trim().split_once('/').unwrap_or(("", ""));
                s.events_per_thread = (
                    avg.parse().unwrap_or(f64::NAN),
                    sd.parse().unwrap_or(f64::NAN),
                );
            }
            _ => {}
        }
    }
    saw_transactions.then_some(s)
}

/// sysbench `oltp_read_write` arguments shared by prepare and run.
fn oltp_args(port: u16, user: &str, password: &str, schema: &str) -> Vec<String> {
    vec![
        "oltp_read_write".into(),
        "--db-driver=mysql".into(),
        "--mysql-host=127.0.0.1".into(),
        format!("--mysql-port={port}"),
        format!("--mysql-user={user}"),
        format!("--mysql-password={password}"),
        format!("--mysql-db={schema}"),
        "--tables=2".into(),
        "--table-size=2000".into(),
        "--db-ps-mode=disable".into(),
    ]
}

struct LoadSpec {
    schema: &'static str,
    threads: usize,
    time_s: u64,
    groups: usize,
    max_backend: usize,
    queue_timeout_ms: Option<u64>,
}

/// Prepares `spec.schema` directly on the server, starts a proxy, runs
/// `oltp_read_write` through it while sampling the processlist, and asserts:
/// sysbench exited cleanly, no errors except retried InnoDB deadlocks that the
/// server confirms, no reconnects, some transactions, and never more than
/// `max_backend` backend sessions of user `app`.
async fn oltp_through_proxy(spec: LoadSpec) {
    let _serial = SERIAL.lock().await;
    myplex::server::raise_fd_limit();
    let db = MariaDb::shared();

    // Prepare directly against MariaDB, as root so `app` stays at zero.
    db.sql(&format!(
        "DROP DATABASE IF EXISTS `{0}`; CREATE DATABASE `{0}`",
        spec.schema
    ));
    let mut prepare = oltp_args(db.port, "root", ROOT_PASSWORD, spec.schema);
    prepare.push("prepare".into());
    let prep = sysbench_async(prepare, Duration::from_secs(60)).await;
    assert!(
        prep.succeeded(),
        "sysbench prepare failed:\n{}",
        prep.transcript()
    );

    // Whatever earlier tests left behind closes when their runtimes end.
    let settle = {
        let db: &'static MariaDb = db;
        tokio::task::spawn_blocking(move || wait_no_app_sessions(db, Duration::from_secs(20)))
            .await
            .expect("wait")
    };

    let mut builder = Proxy::builder(db)
        .groups(spec.groups)
        .max_backend(spec.max_backend);
    if let Some(ms) = spec.queue_timeout_ms {
        builder = builder.queue_timeout_ms(ms);
    }
    let proxy = builder.start().await;

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
    let samplers = Samplers::start(db, proxy.shared.clone());
    let mut run = oltp_args(proxy.addr.port(), APP_USER, APP_PASSWORD, spec.schema);
    run.extend([
        format!("--threads={}", spec.threads),
        format!("--time={}", spec.time_s),
        "--report-interval=0".into(),
        "--percentile=95".into(),
        // Only InnoDB deadlocks may be retried (sysbench's default also
        // ignores 1020 and 1205); anything else aborts sysbench.
        "--mysql-ignore-errors=1213".into(),
        "run".into(),
    ]);
    // --time plus thread startup (sysbench gives up after 30 s), the last
    // queued transactions, and disconnects.
    let limit = Duration::from_secs(spec.time_s + 90);
    let sb = sysbench_async(run, limit).await;
    let sampled = samplers.finish().await;
    let deadlocks = innodb_deadlocks(db) - deadlocks_before;
    let overflows = listen_overflows().zip(overflows_before).map(|(a, b)| a - b);

    let stats = parse_stats(&sb.stdout);
    let pl_max = sampled.processlist_max();
    let snapshot: Vec<_> = proxy
        .shared
        .pool
        .groups
        .iter()
        .map(|g| g.snapshot())
        .collect();
    eprintln!(
        "[{}] threads={} groups={} max_backend={} | settle={settle:?} app sessions at proxy start={at_start} (probe gone after {probe_gone_after:?}) \
         | sysbench {:?} in {:?} | {stats:?} | innodb deadlocks={deadlocks} | kernel ListenOverflows delta={overflows:?} | processlist max={pl_max} over {} samples, owned max={} | groups after: {snapshot:?}",
        spec.schema,
        spec.threads,
        spec.groups,
        spec.max_backend,
        sb.status,
        sb.elapsed,
        sampled.processlist.len(),
        sampled.owned_max,
    );

    assert!(sb.succeeded(), "sysbench run failed:\n{}", sb.transcript());
    let complaints = sb.complaints();
    assert!(
        complaints.is_empty(),
        "sysbench reported problems:\n{}\n\nfull transcript:\n{}",
        complaints.join("\n"),
        sb.transcript()
    );
    let stats = stats.unwrap_or_else(|| panic!("no sysbench report:\n{}", sb.transcript()));
    assert!(stats.transactions > 0, "no transactions:\n{}", sb.stdout);
    assert_eq!(stats.errors.unwrap_or(0), 0, "errors:\n{}", sb.stdout);
    // oltp_read_write on 2 × 2,000 rows with sysbench's default hot-spot
    // distribution (`--rand-type=special`) deadlocks now and then even
    // directly against MariaDB at 8 threads (~4/s there), and sysbench
    // retries those transactions. Each such ignored error must be one the
    // server reports as an InnoDB deadlock; the proxy adds none.
    assert_eq!(
        stats.ignored_errors, deadlocks,
        "sysbench ignored {} errors but InnoDB detected {deadlocks} deadlocks:\n{}",
        stats.ignored_errors, sb.stdout
    );
    assert_eq!(stats.reconnects, 0, "reconnects:\n{}", sb.stdout);

    assert!(
        pl_max >= 1,
        "the processlist sampler never saw the proxy's backend sessions: {:?}",
        sampled.processlist
    );
    assert!(
        pl_max <= spec.max_backend,
        "backend saw {pl_max} sessions of user app, cap is {}: samples {:?}",
        spec.max_backend,
        sampled.processlist
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
    })
    .await;
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
