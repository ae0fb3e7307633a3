//! Real sysbench `oltp_read_write` in its default prepared-statement mode
//! (server-side COM_STMT_PREPARE / EXECUTE, BEGIN and COMMIT included)
//! through the proxy: 1,000 client threads, each holding ~20 prepared
//! statements, over 16 backend connections. Asserts zero errors (sysbench
//! retries InnoDB deadlocks, and each retry must match a deadlock the server
//! counted), that the backend never sees more than 16 sessions of the proxy's
//! user, and that the server's `Prepared_stmt_count` stays within
//! 16 × `pool.prepared_per_backend` -- statements are shared per backend, not
//! one copy per client. Throughput, latency and the observed maxima are
//! printed (run with `--nocapture`).
//!
//! The helpers are copied from `sysbench_load.rs` (test binaries do not
//! share code outside `tests/common`).

mod common;

use std::io::Read;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::mariadb::{APP_PASSWORD, APP_USER, ROOT_PASSWORD};
use common::{MariaDb, Proxy};
use myplex::frontend::Shared;

/// How often the server is sampled during a run.
const SAMPLE_EVERY: Duration = Duration::from_millis(200);

/// One query for both samples: backend sessions of user `app` (the sampling
/// CLI logs in as root, so it is not counted) and the server's prepared
/// statements.
const SAMPLE_SQL: &str = "SELECT (SELECT COUNT(*) FROM information_schema.processlist WHERE user='app'), \
     (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME='PREPARED_STMT_COUNT')";

/// (app sessions, Prepared_stmt_count).
fn sample(db: &MariaDb) -> (usize, usize) {
    let out = db.sql(SAMPLE_SQL);
    let mut it = out.split_whitespace().map(|v| v.parse::<usize>());
    match (it.next(), it.next()) {
        (Some(Ok(a)), Some(Ok(b))) => (a, b),
        _ => panic!("sample {out:?}"),
    }
}

fn app_sessions(db: &MariaDb) -> usize {
    sample(db).0
}

fn prepared_stmt_count(db: &MariaDb) -> usize {
    sample(db).1
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

/// Samples the server (std thread: `MariaDb::sql` blocks) and the proxy's
/// own count of owned backend connections (tokio task).
struct Samplers {
    stop: Arc<AtomicBool>,
    server: std::thread::JoinHandle<Vec<(usize, usize)>>,
    owned: tokio::task::JoinHandle<usize>,
}

struct Sampled {
    /// Every (app sessions, Prepared_stmt_count) sample, in order.
    server: Vec<(usize, usize)>,
    /// Largest `owned` the proxy reported.
    owned_max: usize,
}

/// Samples with repeats collapsed: `(16, 320)×40, (16, 322)×3, ...`.
fn compact(samples: &[(usize, usize)]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < samples.len() {
        let n = samples[i..]
            .iter()
            .take_while(|s| **s == samples[i])
            .count();
        out.push(format!("{:?}×{n}", samples[i]));
        i += n;
    }
    out.join(", ")
}

impl Sampled {
    fn processlist_max(&self) -> usize {
        self.server.iter().map(|s| s.0).max().unwrap_or(0)
    }
    fn prepared_max(&self) -> usize {
        self.server.iter().map(|s| s.1).max().unwrap_or(0)
    }
}

impl Samplers {
    fn start(db: &'static MariaDb, shared: Arc<Shared>) -> Samplers {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let server = std::thread::spawn(move || {
            let mut samples = Vec::new();
            while !s.load(Ordering::Relaxed) {
                let t = Instant::now();
                samples.push(sample(db));
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
            server,
            owned,
        }
    }

    async fn finish(self) -> Sampled {
        self.stop.store(true, Ordering::Relaxed);
        let server = tokio::task::spawn_blocking(move || self.server.join())
            .await
            .expect("join sampler")
            .expect("server sampler panicked");
        let owned_max = self.owned.await.expect("owned sampler");
        Sampled { server, owned_max }
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

/// sysbench `oltp_read_write` arguments shared by prepare and run. No
/// `--db-ps-mode`: the default (`auto`) uses server-side prepared statements.
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
    ]
}

const SCHEMA: &str = "sb_ps_1000";
const THREADS: usize = 1000;
const TIME_S: u64 = 20;
const MAX_BACKEND: usize = 16;

/// The bar in prepared-statement mode: 1,000 sysbench threads
/// through 16 backend connections, zero errors, bounded server statements.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousand_prepared_statement_clients_through_sixteen_backends() {
    myplex::server::raise_fd_limit();
    let db = MariaDb::shared();

    // Prepare directly against MariaDB, as root so `app` stays at zero.
    db.sql(&format!(
        "DROP DATABASE IF EXISTS `{SCHEMA}`; CREATE DATABASE `{SCHEMA}`"
    ));
    let mut prepare = oltp_args(db.port, "root", ROOT_PASSWORD, SCHEMA);
    prepare.push("prepare".into());
    let prep = sysbench_async(prepare, Duration::from_secs(60)).await;
    assert!(
        prep.succeeded(),
        "sysbench prepare failed:\n{}",
        prep.transcript()
    );

    let proxy = Proxy::builder(db)
        .groups(2)
        .max_backend(MAX_BACKEND)
        .queue_timeout_ms(60_000)
        .start()
        .await;
    let per_backend = proxy.shared.config.pool.prepared_per_backend;
    let stmt_cap = MAX_BACKEND * per_backend;

    // The proxy's start-up probe connection must be gone before the load.
    let probe_gone_after =
        tokio::task::spawn_blocking(move || wait_no_app_sessions(db, Duration::from_secs(10)))
            .await
            .expect("probe check");
    assert_eq!(
        proxy.backends_owned(),
        0,
        "the pool owns connections before any client"
    );
    let stmts_before = prepared_stmt_count(db);

    let deadlocks_before = innodb_deadlocks(db);
    let samplers = Samplers::start(db, proxy.shared.clone());
    let mut run = oltp_args(proxy.addr.port(), APP_USER, APP_PASSWORD, SCHEMA);
    run.extend([
        format!("--threads={THREADS}"),
        format!("--time={TIME_S}"),
        "--report-interval=0".into(),
        "--percentile=95".into(),
        // Only InnoDB deadlocks may be retried (sysbench's default also
        // ignores 1020 and 1205); anything else aborts sysbench.
        "--mysql-ignore-errors=1213".into(),
        "run".into(),
    ]);
    // --time plus thread startup (sysbench gives up after 30 s), the last
    // queued transactions, and disconnects.
    let sb = sysbench_async(run, Duration::from_secs(TIME_S + 40)).await;
    let sampled = samplers.finish().await;
    let deadlocks = innodb_deadlocks(db) - deadlocks_before;

    // Distinct statements (per pool, schema and SQL) clients prepared.
    let distinct = proxy.shared.registry.lock().expect("registry").len();
    let stats = parse_stats(&sb.stdout);
    let pl_max = sampled.processlist_max();
    let ps_max = sampled.prepared_max();
    let snapshot: Vec<_> = proxy
        .shared
        .pool
        .groups
        .iter()
        .map(|g| g.snapshot())
        .collect();
    eprintln!(
        "[{SCHEMA}] threads={THREADS} groups=2 max_backend={MAX_BACKEND} | probe gone after {probe_gone_after:?} \
         | sysbench {:?} in {:?} | {stats:?} | innodb deadlocks={deadlocks} \
         | processlist max={pl_max} over {} samples, owned max={} \
         | Prepared_stmt_count before={stmts_before} max={ps_max} (cap {stmt_cap}; {distinct} distinct statements) \
         | groups after: {snapshot:?}",
        sb.status,
        sb.elapsed,
        sampled.server.len(),
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
    assert_eq!(
        stats.ignored_errors, deadlocks,
        "sysbench ignored {} errors but InnoDB detected {deadlocks} deadlocks:\n{}",
        stats.ignored_errors, sb.stdout
    );
    assert_eq!(stats.reconnects, 0, "reconnects:\n{}", sb.stdout);

    assert!(
        pl_max >= 1,
        "the sampler never saw the proxy's backend sessions: {}",
        compact(&sampled.server)
    );
    assert!(
        pl_max <= MAX_BACKEND,
        "backend saw {pl_max} sessions of user app, cap is {MAX_BACKEND}: samples (app sessions, Prepared_stmt_count) {}",
        compact(&sampled.server)
    );
    assert!(
        sampled.owned_max <= MAX_BACKEND,
        "the pool owned {} backend connections, cap is {MAX_BACKEND}",
        sampled.owned_max
    );
    assert!(
        ps_max > stmts_before,
        "the sampler never saw a prepared statement on the server: {}",
        compact(&sampled.server)
    );
    assert!(
        ps_max - stmts_before <= stmt_cap,
        "the server held {ps_max} prepared statements ({stmts_before} before the run); \
         cap is {MAX_BACKEND} backends × {per_backend}: samples (app sessions, Prepared_stmt_count) {}",
        compact(&sampled.server)
    );
    // Statements are shared: a backend holds at most one server-side copy
    // of each distinct statement, however many clients prepared it.
    assert!(
        ps_max - stmts_before <= MAX_BACKEND * distinct,
        "the server held {ps_max} prepared statements ({stmts_before} before the run) for \
         {distinct} distinct statements on at most {MAX_BACKEND} backends: some backend holds \
         more than one copy of a statement; samples (app sessions, Prepared_stmt_count) {}",
        compact(&sampled.server)
    );

    drop(proxy);
    db.sql(&format!("DROP DATABASE IF EXISTS `{SCHEMA}`"));
}
