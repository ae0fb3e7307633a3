//! Running real sysbench (`oltp_read_write`) against the proxy or the
//! server: building its arguments, running it with a timeout, parsing its
//! final report, and the checks every load test makes on a run.

use std::io::Read;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use super::MariaDb;
use super::mariadb::ROOT_PASSWORD;

/// What a sysbench process did.
pub struct SbRun {
    pub status: Option<ExitStatus>,
    pub timed_out: bool,
    pub elapsed: Duration,
    pub stdout: String,
    pub stderr: String,
}

impl SbRun {
    pub fn transcript(&self) -> String {
        format!(
            "exit: {:?} (timed out: {}, after {:?})\n--- stdout ---\n{}\n--- stderr ---\n{}",
            self.status, self.timed_out, self.elapsed, self.stdout, self.stderr
        )
    }

    pub fn succeeded(&self) -> bool {
        !self.timed_out && self.status.is_some_and(|s| s.success())
    }

    /// Lines that mention FATAL / ALERT / error (except the summary counters).
    pub fn complaints(&self) -> Vec<String> {
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
pub fn sysbench(args: &[String], timeout: Duration) -> SbRun {
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

/// [`sysbench`] on a blocking thread.
pub async fn sysbench_async(args: Vec<String>, timeout: Duration) -> SbRun {
    tokio::task::spawn_blocking(move || sysbench(&args, timeout))
        .await
        .expect("sysbench runner panicked")
}

/// The numbers of sysbench's final report.
#[derive(Debug, Default)]
pub struct SbStats {
    pub transactions: u64,
    pub tps: f64,
    pub queries: u64,
    pub qps: f64,
    /// The `errors:` line, if this sysbench prints one (1.0.20 does not).
    pub errors: Option<u64>,
    pub ignored_errors: u64,
    pub reconnects: u64,
    pub latency_avg_ms: f64,
    pub latency_p95_ms: f64,
    pub latency_max_ms: f64,
    /// Per-thread events: (avg, stddev) -- the fairness line.
    pub events_per_thread: (f64, f64),
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

/// Parses sysbench's final report; `None` without a `transactions:` line.
pub fn parse_stats(out: &str) -> Option<SbStats> {
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

/// sysbench `oltp_read_write` arguments shared by prepare and run (2 tables
/// of 2,000 rows), followed by `extra` (e.g. `--db-ps-mode=disable`).
pub fn oltp_args(
    port: u16,
    user: &str,
    password: &str,
    schema: &str,
    extra: &[&str],
) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "oltp_read_write".into(),
        "--db-driver=mysql".into(),
        "--mysql-host=127.0.0.1".into(),
        format!("--mysql-port={port}"),
        format!("--mysql-user={user}"),
        format!("--mysql-password={password}"),
        format!("--mysql-db={schema}"),
        "--tables=2".into(),
        "--table-size=2000".into(),
    ];
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    args
}

/// The options of a timed `run` after [`oltp_args`], ending with `run`.
pub fn run_args(threads: usize, time_s: u64) -> [String; 6] {
    [
        format!("--threads={threads}"),
        format!("--time={time_s}"),
        "--report-interval=0".into(),
        "--percentile=95".into(),
        // Only InnoDB deadlocks may be retried (sysbench's default also
        // ignores 1020 and 1205); anything else aborts sysbench.
        "--mysql-ignore-errors=1213".into(),
        "run".into(),
    ]
}

/// Recreates `schema` and runs sysbench `prepare` into it directly against
/// MariaDB, as root so user `app` stays at zero sessions. `extra` as for
/// [`oltp_args`].
pub async fn prepare(db: &MariaDb, schema: &str, extra: &[&str]) {
    db.sql(&format!(
        "DROP DATABASE IF EXISTS `{schema}`; CREATE DATABASE `{schema}`"
    ));
    let mut prepare = oltp_args(db.port, "root", ROOT_PASSWORD, schema, extra);
    prepare.push("prepare".into());
    let prep = sysbench_async(prepare, Duration::from_secs(60)).await;
    assert!(
        prep.succeeded(),
        "sysbench prepare failed:\n{}",
        prep.transcript()
    );
}

/// Asserts that a run went cleanly: sysbench exited successfully, printed no
/// complaints, reported some transactions, no errors and no reconnects, and
/// every error it ignored (and retried) is one of the `deadlocks` InnoDB
/// counted during the run. Returns the report.
pub fn assert_clean_run(sb: &SbRun, stats: Option<SbStats>, deadlocks: u64) -> SbStats {
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
    stats
}
