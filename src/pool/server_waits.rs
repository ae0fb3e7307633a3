//! The server's own word on whether its statements wait (design §6.2: the
//! proxy's `thd_wait_begin`, told by the server): how many of its threads
//! wait on a disk read, an fsync or a row lock right now, sampled from its
//! global status a few times a second on one connection of the pool's own.
//!
//! Owns the sampling window and its verdict. The elastic budget
//! ([`super::elastic::Budget`]) keeps the verdict and the scheduler reads it
//! there: while the server reports **no** waits, no group's adaptive limit
//! climbs above its base share, so no group borrows on a rise of the
//! completion rate alone. Measured on the lab box, a CPU-bound server's rate
//! moves 20–25 % between 100 ms intervals from noise; the throughput
//! controller climbed on that noise and borrowed (one group 16 → 464 in
//! flight, 28–43 % below a hard cap of 16), and stricter single-interval
//! evidence cost the I/O-bound case 10–40 % (docs/benchmarks.md). The gauges
//! below separate the two without noise: 0.00 pending reads, fsyncs and
//! row-lock waits in every sample of a buffered run, 7–12 pending reads on
//! average in an I/O-bound one.
//!
//! Waits no gauge names (`SLEEP`, metadata and user locks, a semi-sync
//! replica's acknowledgement, a binary-log fsync) still hold statements
//! inside the server: `Threads_running` (the probe's own thread taken out)
//! counts them. So the verdict is *none* only when the gauges are quiet
//! **and** the server holds few statements (on average fewer than half the
//! groups' base shares together): through the proxy a CPU-bound server runs
//! 1–4 at a time, the proxy's in-flight statements spending their time on
//! the wire and in the CPUs' queues. A server holding more without saying
//! why is *busy*, and *busy* and *unknown* (not sampled yet, the probe off,
//! failing for longer than [`GRACE`]) keep the throughput controller's
//! behaviour, which never needed the verdict.

use std::collections::VecDeque;
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::time::Instant;

use super::Pool;
use crate::backend::BackendConn;

/// The gauges summed into "threads waiting": InnoDB reads in progress
/// (a statement's page read waits on it), data and log fsyncs in progress
/// (commits wait on them), transactions waiting for a row lock.
pub const GAUGES: [&str; 4] = [
    "Innodb_data_pending_reads",
    "Innodb_data_pending_fsyncs",
    "Innodb_os_log_pending_fsyncs",
    LOCK_GAUGE,
];

/// The gauge of row-lock waits: more statements in flight do not overlap
/// those (they queue on the same locks), unlike reads and fsyncs.
pub const LOCK_GAUGE: &str = "Innodb_row_lock_current_waits";

/// Statements executing in the server (the probe's own among them).
pub const RUNNING: &str = "Threads_running";

/// The probe's statement (needs no privilege; MariaDB and MySQL alike).
pub const QUERY: &str = "SHOW GLOBAL STATUS WHERE Variable_name IN \
    ('Innodb_data_pending_reads','Innodb_data_pending_fsyncs',\
    'Innodb_os_log_pending_fsyncs','Innodb_row_lock_current_waits','Threads_running')";

/// Samples the verdict is taken over (2 s at the default 250 ms).
pub const WINDOW: usize = 8;
/// Mean waiting threads at or above which the server waits…
pub const OPEN_AT: f64 = 0.5;
/// …and below which, once it waited, it no longer does.
pub const CLOSE_AT: f64 = 0.2;
/// The server is busy (holds statements without a gauge saying why) from
/// this share of the groups' base shares running on average, and stays
/// busy until it falls below [`BUSY_CLOSE`] of them.
pub const BUSY_OPEN: f64 = 0.5;
/// See [`BUSY_OPEN`].
pub const BUSY_CLOSE: f64 = 0.25;
/// A failing probe keeps its last verdict this long before it is unknown.
pub const GRACE: Duration = Duration::from_secs(5);

/// What the server says about waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Not known (no full window yet, or the probe is off or failing):
    /// borrowing follows the throughput controller alone.
    #[default]
    Unknown,
    /// Its threads wait on reads, fsyncs or row locks: more statements in
    /// flight can overlap those waits.
    Waits,
    /// No gauge shows a wait, but the server holds many statements (they
    /// may wait on what no gauge names, or queue for its CPUs): borrowing
    /// follows the throughput controller alone.
    Busy,
    /// Nothing waits and the server holds few statements: it is CPU-bound
    /// (or idle), and more in flight only queues on the CPUs.
    None,
}

impl Verdict {
    /// Lowercase name for reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unknown => "unknown",
            Self::Waits => "waits",
            Self::Busy => "busy",
            Self::None => "none",
        }
    }

    /// Its code, as stored in the budget's atomic and exported as the
    /// `myplex_server_waits` gauge: 1 waits, 2 busy, 0 none, −1 unknown.
    pub fn code(self) -> i8 {
        match self {
            Self::Unknown => -1,
            Self::None => 0,
            Self::Waits => 1,
            Self::Busy => 2,
        }
    }

    /// From [`Verdict::code`] (anything else is unknown).
    pub fn from_code(v: i8) -> Self {
        match v {
            0 => Self::None,
            1 => Self::Waits,
            2 => Self::Busy,
            _ => Self::Unknown,
        }
    }
}

/// One reading of the server's gauges.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Sample {
    /// Threads waiting on reads, fsyncs and row locks ([`GAUGES`]).
    pub waiting: f64,
    /// Of them, those waiting for a row lock ([`LOCK_GAUGE`]).
    pub locks: f64,
    /// Statements executing besides the probe's own ([`RUNNING`] − 1).
    pub running: f64,
}

/// The last [`WINDOW`] samples and the verdict they gave (with hysteresis:
/// waits hold until the mean falls below [`CLOSE_AT`], busy until below
/// [`BUSY_CLOSE`] of the bases).
#[derive(Debug, Default)]
pub struct Window {
    samples: VecDeque<Sample>,
    verdict: Verdict,
}

impl Window {
    /// Adds one sample and returns the verdict, `bases` being the groups'
    /// base shares together (what the proxy runs without borrowing).
    pub fn push(&mut self, s: Sample, bases: usize) -> Verdict {
        if self.samples.len() == WINDOW {
            self.samples.pop_front();
        }
        self.samples.push_back(Sample {
            waiting: s.waiting.max(0.0),
            locks: s.locks.clamp(0.0, s.waiting.max(0.0)),
            running: s.running.max(0.0),
        });
        if self.samples.len() < WINDOW {
            return self.verdict;
        }
        let (waiting, running) = (self.waiting(), self.running());
        let bases = bases.max(1) as f64;
        let busy_at = if self.verdict == Verdict::Busy {
            BUSY_CLOSE
        } else {
            BUSY_OPEN
        };
        self.verdict = match self.verdict {
            Verdict::Waits if waiting >= CLOSE_AT => Verdict::Waits,
            _ if waiting >= OPEN_AT => Verdict::Waits,
            _ if running >= busy_at * bases => Verdict::Busy,
            _ => Verdict::None,
        };
        self.verdict
    }

    /// Nothing is known until a full window is sampled again.
    pub fn forget(&mut self) {
        self.samples.clear();
        self.verdict = Verdict::Unknown;
    }

    /// Mean waiting threads over the window (0 when empty).
    pub fn waiting(&self) -> f64 {
        self.average(|s| s.waiting)
    }

    /// Mean threads waiting for a row lock over the window (0 when empty).
    pub fn locks(&self) -> f64 {
        self.average(|s| s.locks)
    }

    /// Mean statements running over the window (0 when empty).
    pub fn running(&self) -> f64 {
        self.average(|s| s.running)
    }

    fn average(&self, f: impl Fn(&Sample) -> f64) -> f64 {
        if self.samples.is_empty() {
            return 0.0;
        }
        self.samples.iter().map(f).sum::<f64>() / self.samples.len() as f64
    }

    /// The verdict now.
    pub fn verdict(&self) -> Verdict {
        self.verdict
    }
}

/// The probe's rows (`Variable_name`, `Value`) as a sample; `None` when no
/// wait gauge is in the answer (a server without InnoDB: nothing to learn).
pub fn sample(rows: &[Vec<Option<String>>]) -> Option<Sample> {
    let mut seen = false;
    let mut s = Sample::default();
    for row in rows {
        let (Some(Some(name)), Some(Some(value))) = (row.first(), row.get(1)) else {
            continue;
        };
        let Ok(v) = value.trim().parse::<f64>() else {
            continue;
        };
        if name.eq_ignore_ascii_case(RUNNING) {
            s.running = (v - 1.0).max(0.0);
        } else if GAUGES.iter().any(|g| g.eq_ignore_ascii_case(name)) {
            seen = true;
            s.waiting += v.max(0.0);
            if name.eq_ignore_ascii_case(LOCK_GAUGE) {
                s.locks += v.max(0.0);
            }
        }
    }
    seen.then_some(s)
}

/// The longest a probe's answer may take (a server this slow to answer a
/// status read has nothing to say about waits that is still true).
const ANSWER_WITHIN: Duration = Duration::from_secs(2);
/// Pause after a failed dial or query, or while the probe is off.
const RETRY_AFTER: Duration = Duration::from_secs(1);

impl Pool {
    /// Starts the wait probe: with the adaptive limit it samples the
    /// server's wait gauges every `pool.wait_probe_ms` (reloadable; 0 or a
    /// hard `max_backend_connections` cap: off) on one connection of its
    /// own, outside the groups' budget (one of
    /// `pool.reserved_server_connections`), and keeps the verdict in the
    /// budget. Ends with the pool.
    pub(super) fn spawn_wait_probe(self: &Arc<Self>) {
        let pool = Arc::downgrade(self);
        tokio::spawn(probe(pool));
    }
}

/// The probe's pause after `failures` failed attempts in a row: 1 s,
/// doubling up to 30 s.
fn backoff(failures: u32) -> Duration {
    RETRY_AFTER
        .saturating_mul(1 << failures.saturating_sub(1).min(5))
        .min(Duration::from_secs(30))
}

/// Closes the probe's connection, if any.
async fn close(conn: &mut Option<BackendConn>) {
    if let Some(c) = conn.take() {
        c.quit().await;
    }
}

/// One status read on the probe's connection (dialled first when there is
/// none); `None` when it failed, and then the connection is dropped: a
/// half-read answer is never reused.
async fn read(p: &Arc<Pool>, conn: &mut Option<BackendConn>) -> Option<Vec<Vec<Option<String>>>> {
    // The primary changed: the waits to read are the new one's.
    if conn.as_ref().is_some_and(|c| !p.on_primary(c)) {
        close(conn).await;
    }
    if conn.is_none() {
        match p.dial(0, Instant::now() + ANSWER_WITHIN).await {
            Ok(c) => *conn = Some(c),
            Err(e) => {
                tracing::debug!(error = %e, "wait probe: no connection");
                return None;
            }
        }
    }
    let c = conn.as_mut()?;
    let answer = match tokio::time::timeout(ANSWER_WITHIN, c.query_rows(QUERY, 16)).await {
        Ok(Ok(rows)) => Some(rows),
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "wait probe: the status read failed");
            None
        }
        Err(_) => None,
    };
    if answer.is_none() {
        *conn = None;
    }
    answer
}

async fn probe(pool: Weak<Pool>) {
    let mut window = Window::default();
    let mut conn: Option<BackendConn> = None;
    let mut last = Verdict::Unknown;
    let mut last_ok = Instant::now();
    let mut failures = 0u32;
    loop {
        let Some(p) = pool.upgrade() else { return };
        if p.groups.iter().any(|g| g.retiring()) {
            // The process hands over: the successor probes for itself.
            close(&mut conn).await;
            p.budget.set_server_waits(Verdict::Unknown, 0.0, 0.0);
            return;
        }
        let cfg = p.pool_cfg.load_full();
        let pause = if cfg.wait_probe_ms == 0 || cfg.max_backend_connections > 0 {
            close(&mut conn).await;
            window.forget();
            RETRY_AFTER
        } else {
            match read(&p, &mut conn).await.as_deref().map(sample) {
                Some(Some(s)) => {
                    if failures >= 3 {
                        tracing::info!("wait probe: reading the server's wait gauges again");
                    }
                    failures = 0;
                    last_ok = Instant::now();
                    window.push(s, p.budget.view().bases);
                    Duration::from_millis(cfg.wait_probe_ms)
                }
                // No InnoDB gauges: nothing to learn (and nothing to hold
                // borrowing back on).
                Some(None) => {
                    window.forget();
                    RETRY_AFTER * 10
                }
                // The last verdict holds for a while (a server too busy to
                // answer within 2 s is not news).
                None => {
                    failures += 1;
                    if failures == 3 {
                        tracing::warn!(
                            "wait probe: cannot read the server's wait gauges (retrying; borrowing follows the completion rate alone meanwhile)"
                        );
                    }
                    if last_ok.elapsed() >= GRACE {
                        window.forget();
                    }
                    backoff(failures)
                }
            }
        };
        let verdict = window.verdict();
        p.budget
            .set_server_waits(verdict, window.waiting(), window.locks());
        if verdict != last {
            tracing::debug!(
                verdict = verdict.as_str(),
                waiting = window.waiting(),
                running = window.running(),
                "the server's wait verdict changed"
            );
            last = verdict;
        }
        drop(p);
        tokio::time::sleep(pause).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(n: &str, v: &str) -> Vec<Option<String>> {
        vec![Some(n.into()), Some(v.into())]
    }

    fn waits(waiting: f64) -> Sample {
        Sample {
            waiting,
            ..Sample::default()
        }
    }

    const BASES: usize = 32;

    /// A whole window of one sample; the verdict it leaves.
    fn fill(w: &mut Window, s: Sample) -> Verdict {
        for _ in 0..WINDOW {
            w.push(s, BASES);
        }
        w.verdict()
    }

    #[test]
    fn the_gauges_are_summed_and_the_probe_is_not_counted_running() {
        let rows = vec![
            row("Innodb_data_pending_reads", "7"),
            row("INNODB_ROW_LOCK_CURRENT_WAITS", "2"),
            row("Threads_running", "250"),
            row("Innodb_data_pending_fsyncs", "x"),
            vec![Some("Innodb_os_log_pending_fsyncs".into()), None],
            row("Threads_connected", "900"),
        ];
        assert_eq!(
            sample(&rows),
            Some(Sample {
                waiting: 9.0,
                locks: 2.0,
                running: 249.0
            })
        );
        assert_eq!(sample(&[row("Threads_running", "3")]), None);
        assert_eq!(sample(&[]), None);
        let idle = sample(&[
            row("Threads_running", "1"),
            row("Innodb_data_pending_reads", "0"),
        ]);
        assert_eq!(idle, Some(Sample::default()));
    }

    #[test]
    fn a_verdict_needs_a_full_window() {
        let mut w = Window::default();
        for _ in 1..WINDOW {
            assert_eq!(w.push(waits(10.0), BASES), Verdict::Unknown);
        }
        assert_eq!(w.push(waits(10.0), BASES), Verdict::Waits);
        w.forget();
        assert_eq!(w.verdict(), Verdict::Unknown);
        assert_eq!(fill(&mut w, waits(0.0)), Verdict::None);
    }

    #[test]
    fn a_cpu_bound_server_never_waits_and_one_read_in_a_window_is_not_waiting() {
        let mut w = Window::default();
        for i in 0..100 {
            // A checkpoint's fsync now and then; a few statements running.
            let s = Sample {
                waiting: if i % 10 == 0 { 1.0 } else { 0.0 },
                running: (i % 4) as f64,
                ..Sample::default()
            };
            let v = w.push(s, BASES);
            assert!(i < WINDOW - 1 || v == Verdict::None, "sample {i}: {v:?}");
        }
    }

    #[test]
    fn many_statements_held_without_a_gauge_make_the_server_busy() {
        // SLEEP, user locks, semi-sync acknowledgements: nothing in the
        // gauges, but the server holds half the bases' worth or more.
        let mut w = Window::default();
        let held = |running: f64| Sample {
            running,
            ..Sample::default()
        };
        assert_eq!(fill(&mut w, held(16.0)), Verdict::Busy);
        // Between the two levels: still busy.
        assert_eq!(fill(&mut w, held(10.0)), Verdict::Busy);
        assert_eq!(fill(&mut w, held(7.0)), Verdict::None);
        assert_eq!(
            fill(&mut w, held(10.0)),
            Verdict::None,
            "not yet from below"
        );
        // Gauges that say why win over busy.
        let explained = Sample {
            waiting: 2.0,
            running: 40.0,
            ..Sample::default()
        };
        assert_eq!(fill(&mut w, explained), Verdict::Waits);
    }

    #[test]
    fn waits_hold_until_the_mean_falls_well_below_the_opening_level() {
        let mut w = Window::default();
        assert_eq!(fill(&mut w, waits(3.0)), Verdict::Waits);
        // Between the two levels: still waiting.
        assert_eq!(fill(&mut w, waits(0.3)), Verdict::Waits);
        assert_eq!(fill(&mut w, waits(0.1)), Verdict::None);
        assert_eq!(fill(&mut w, waits(0.3)), Verdict::None);
    }

    #[test]
    fn a_failing_probe_backs_off_to_half_a_minute() {
        assert_eq!(backoff(1), Duration::from_secs(1));
        assert_eq!(backoff(2), Duration::from_secs(2));
        assert_eq!(backoff(5), Duration::from_secs(16));
        assert_eq!(backoff(6), Duration::from_secs(30));
        assert_eq!(backoff(100), Duration::from_secs(30));
    }
}
