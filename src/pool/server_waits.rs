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
//! Unknown (not sampled yet, the probe off or failing) keeps the throughput
//! controller's behaviour, which never needed the verdict. Statements the
//! proxy itself sees stalled (`SLEEP`, a metadata lock: waits no InnoDB gauge
//! shows) still borrow by the stall rule, whatever the verdict.

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
    "Innodb_row_lock_current_waits",
];

/// The probe's statement (needs no privilege; MariaDB and MySQL alike).
pub const QUERY: &str = "SHOW GLOBAL STATUS WHERE Variable_name IN \
    ('Innodb_data_pending_reads','Innodb_data_pending_fsyncs',\
    'Innodb_os_log_pending_fsyncs','Innodb_row_lock_current_waits')";

/// Samples the verdict is taken over (2 s at the default 250 ms).
pub const WINDOW: usize = 8;
/// Mean waiting threads at or above which the server waits…
pub const OPEN_AT: f64 = 0.5;
/// …and below which, once it waited, it no longer does.
pub const CLOSE_AT: f64 = 0.2;

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
    /// Nothing waits: the server is CPU-bound (or idle), and more in flight
    /// only queues on its CPUs.
    None,
}

impl Verdict {
    /// Lowercase name for reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Unknown => "unknown",
            Self::Waits => "waits",
            Self::None => "none",
        }
    }

    /// As stored in an atomic.
    pub fn to_u8(self) -> u8 {
        match self {
            Self::Unknown => 0,
            Self::Waits => 1,
            Self::None => 2,
        }
    }

    /// From [`Verdict::to_u8`].
    pub fn from_u8(v: u8) -> Self {
        match v {
            1 => Self::Waits,
            2 => Self::None,
            _ => Self::Unknown,
        }
    }
}

/// The last [`WINDOW`] samples and the verdict they gave (with hysteresis:
/// a verdict of waits holds until the mean falls below [`CLOSE_AT`]).
#[derive(Debug, Default)]
pub struct Window {
    samples: VecDeque<f64>,
    verdict: Verdict,
}

impl Window {
    /// Adds one sample of waiting threads and returns the verdict.
    pub fn push(&mut self, waiting: f64) -> Verdict {
        if self.samples.len() == WINDOW {
            self.samples.pop_front();
        }
        self.samples.push_back(waiting.max(0.0));
        if self.samples.len() < WINDOW {
            return self.verdict;
        }
        let mean = self.mean();
        self.verdict = match self.verdict {
            Verdict::Waits if mean >= CLOSE_AT => Verdict::Waits,
            _ if mean >= OPEN_AT => Verdict::Waits,
            _ => Verdict::None,
        };
        self.verdict
    }

    /// The probe failed or stopped: nothing is known until a full window
    /// is sampled again.
    pub fn forget(&mut self) {
        self.samples.clear();
        self.verdict = Verdict::Unknown;
    }

    /// Mean waiting threads over the window (0 when empty).
    pub fn mean(&self) -> f64 {
        if self.samples.is_empty() {
            return 0.0;
        }
        self.samples.iter().sum::<f64>() / self.samples.len() as f64
    }

    /// The verdict now.
    pub fn verdict(&self) -> Verdict {
        self.verdict
    }
}

/// Threads waiting, from the probe's rows (`Variable_name`, `Value`): the
/// sum of [`GAUGES`]; `None` when none of them is in the answer (a server
/// without InnoDB: nothing to learn).
pub fn waiting(rows: &[Vec<Option<String>>]) -> Option<f64> {
    let mut seen = false;
    let mut sum = 0.0;
    for row in rows {
        let (Some(Some(name)), Some(Some(value))) = (row.first(), row.get(1)) else {
            continue;
        };
        if !GAUGES.iter().any(|g| g.eq_ignore_ascii_case(name)) {
            continue;
        }
        if let Ok(v) = value.trim().parse::<f64>() {
            seen = true;
            sum += v.max(0.0);
        }
    }
    seen.then_some(sum)
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

async fn probe(pool: Weak<Pool>) {
    let mut window = Window::default();
    let mut conn: Option<BackendConn> = None;
    let mut last = Verdict::Unknown;
    loop {
        let Some(p) = pool.upgrade() else { return };
        let cfg = p.pool_cfg.load_full();
        let pause = if cfg.wait_probe_ms == 0 || cfg.max_backend_connections > 0 {
            if let Some(c) = conn.take() {
                c.quit().await;
            }
            window.forget();
            RETRY_AFTER
        } else {
            if conn.is_none() {
                match p.dial(0, Instant::now() + ANSWER_WITHIN).await {
                    Ok(c) => conn = Some(c),
                    Err(e) => tracing::debug!(error = %e, "wait probe: no connection"),
                }
            }
            let sampled = match conn.as_mut() {
                Some(c) => tokio::time::timeout(ANSWER_WITHIN, c.query_rows(QUERY, 16))
                    .await
                    .ok()
                    .and_then(Result::ok),
                None => None,
            };
            match sampled.as_deref().map(waiting) {
                Some(Some(w)) => {
                    window.push(w);
                    Duration::from_millis(cfg.wait_probe_ms)
                }
                // No InnoDB gauges: nothing to learn (and nothing to hold
                // borrowing back on).
                Some(None) => {
                    window.forget();
                    RETRY_AFTER * 10
                }
                None => {
                    conn = None;
                    window.forget();
                    RETRY_AFTER
                }
            }
        };
        let verdict = window.verdict();
        p.budget.set_server_waits(verdict, window.mean());
        if verdict != last {
            tracing::debug!(
                verdict = verdict.as_str(),
                waiting = window.mean(),
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

    #[test]
    fn the_gauges_are_summed_and_nothing_else() {
        let rows = vec![
            row("Innodb_data_pending_reads", "7"),
            row("INNODB_ROW_LOCK_CURRENT_WAITS", "2"),
            row("Threads_running", "250"),
            row("Innodb_data_pending_fsyncs", "x"),
            vec![Some("Innodb_os_log_pending_fsyncs".into()), None],
        ];
        assert_eq!(waiting(&rows), Some(9.0));
        assert_eq!(waiting(&[row("Threads_running", "3")]), None);
        assert_eq!(waiting(&[]), None);
    }

    #[test]
    fn a_verdict_needs_a_full_window() {
        let mut w = Window::default();
        for _ in 1..WINDOW {
            assert_eq!(w.push(10.0), Verdict::Unknown);
        }
        assert_eq!(w.push(10.0), Verdict::Waits);
        w.forget();
        assert_eq!(w.verdict(), Verdict::Unknown);
        for _ in 0..WINDOW {
            w.push(0.0);
        }
        assert_eq!(w.verdict(), Verdict::None);
    }

    #[test]
    fn a_cpu_bound_server_never_waits_and_one_read_in_a_window_is_not_waiting() {
        let mut w = Window::default();
        for i in 0..100 {
            // A checkpoint's fsync now and then.
            let v = if i % 10 == 0 { 1.0 } else { 0.0 };
            assert_ne!(w.push(v), Verdict::Waits, "sample {i}");
        }
    }

    #[test]
    fn waits_hold_until_the_mean_falls_well_below_the_opening_level() {
        let mut w = Window::default();
        for _ in 0..WINDOW {
            w.push(3.0);
        }
        assert_eq!(w.verdict(), Verdict::Waits);
        // Between the two levels: still waiting.
        for _ in 0..WINDOW {
            w.push(0.3);
        }
        assert_eq!(w.verdict(), Verdict::Waits);
        for _ in 0..WINDOW {
            w.push(0.1);
        }
        assert_eq!(w.verdict(), Verdict::None);
        // And between them from below: not yet.
        for _ in 0..WINDOW {
            w.push(0.3);
        }
        assert_eq!(w.verdict(), Verdict::None);
    }
}
