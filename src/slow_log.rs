//! The slow-statement log. Statements slower than `log.slow_statement_ms`
//! are logged one by one while they are few (the first
//! [`DETAILED_PER_INTERVAL`] of an interval); past that, the rest of the
//! interval is aggregated into one line per [`INTERVAL`] with the count by
//! command kind, the mean queue-wait / execution split and the worst
//! offenders. A saturated proxy thus writes a few lines a minute, never
//! hundreds a second, and the line it writes says what a reader needs.
//!
//! The window logic is pure ([`SlowLog::record`] / [`SlowLog::take_summary`]
//! take the time as an argument); [`SlowLog::note`] and
//! [`SlowLog::flush_due`] add the clock and the `tracing` output.

use std::fmt;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Length of one aggregation window.
pub const INTERVAL: Duration = Duration::from_secs(10);
/// Slow statements logged in full per window before aggregation starts.
pub const DETAILED_PER_INTERVAL: u32 = 10;
/// Offenders named in an aggregate line.
const WORST: usize = 3;

/// One statement that took longer than the threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlowStatement {
    /// Proxy client id.
    pub client: u32,
    /// Thread group.
    pub group: usize,
    /// Command kind (`metrics::KINDS`).
    pub kind: &'static str,
    /// Time spent queued for a backend / in-flight slot.
    pub queue_wait: Duration,
    /// Time from admission to the response.
    pub execution: Duration,
}

impl SlowStatement {
    fn total(&self) -> Duration {
        self.queue_wait + self.execution
    }
}

impl fmt::Display for SlowStatement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "client {} group {} {} {} ms (queue {} + execution {})",
            self.client,
            self.group,
            self.kind,
            self.total().as_millis(),
            self.queue_wait.as_millis(),
            self.execution.as_millis()
        )
    }
}

/// What [`SlowLog::record`] decided for one statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Log it in full now.
    Detailed,
    /// Counted into the window's aggregate line.
    Aggregated,
}

/// The aggregate of one window's statements past the detailed budget.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Statements aggregated.
    pub count: u64,
    /// Count per command kind, in first-seen order.
    pub by_kind: Vec<(&'static str, u64)>,
    /// Sum of queue waits.
    pub queue_wait: Duration,
    /// Sum of execution times.
    pub execution: Duration,
    /// The slowest statements (by total), slowest first.
    pub worst: Vec<SlowStatement>,
    /// How long the window lasted.
    pub window: Duration,
}

impl Summary {
    fn add(&mut self, s: SlowStatement) {
        self.count += 1;
        match self.by_kind.iter_mut().find(|(k, _)| *k == s.kind) {
            Some((_, n)) => *n += 1,
            None => self.by_kind.push((s.kind, 1)),
        }
        self.queue_wait += s.queue_wait;
        self.execution += s.execution;
        let at = self
            .worst
            .iter()
            .position(|w| w.total() < s.total())
            .unwrap_or(self.worst.len());
        if at < WORST {
            self.worst.insert(at, s);
            self.worst.truncate(WORST);
        }
    }

    /// `query:12 execute:800`.
    pub fn kinds_text(&self) -> String {
        let mut out = String::new();
        for (k, n) in &self.by_kind {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(&format!("{k}:{n}"));
        }
        out
    }

    /// The worst offenders, `; `-separated.
    pub fn worst_text(&self) -> String {
        self.worst
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    }

    fn mean_ms(&self, total: Duration) -> u64 {
        (total.as_millis() / u128::from(self.count.max(1))) as u64
    }
}

#[derive(Debug)]
struct Window {
    started: Instant,
    detailed: u32,
    aggregate: Summary,
}

/// The slow-statement log of one proxy.
#[derive(Debug)]
pub struct SlowLog {
    window: Mutex<Window>,
}

impl SlowLog {
    /// An empty log whose first window starts at `now`.
    pub fn new(now: Instant) -> Self {
        Self {
            window: Mutex::new(Window {
                started: now,
                detailed: 0,
                aggregate: Summary::default(),
            }),
        }
    }

    /// Counts `s`; the previous window's summary comes back when `now`
    /// ended it (to be logged before `s`).
    pub fn record(&self, s: SlowStatement, now: Instant) -> (Decision, Option<Summary>) {
        let Ok(mut w) = self.window.lock() else {
            return (Decision::Aggregated, None);
        };
        let ended = Self::roll(&mut w, now, false);
        let decision = if w.detailed < DETAILED_PER_INTERVAL {
            w.detailed += 1;
            Decision::Detailed
        } else {
            w.aggregate.add(s);
            Decision::Aggregated
        };
        (decision, ended)
    }

    /// The summary of the window when `now` is past its end and it
    /// aggregated anything; starts the next window.
    pub fn take_summary(&self, now: Instant) -> Option<Summary> {
        self.take(now, false)
    }

    /// The window's summary; with `force`, even before the window ends.
    fn take(&self, now: Instant, force: bool) -> Option<Summary> {
        let mut w = self.window.lock().ok()?;
        Self::roll(&mut w, now, force)
    }

    fn roll(w: &mut Window, now: Instant, force: bool) -> Option<Summary> {
        let age = now.saturating_duration_since(w.started);
        if age < INTERVAL && !force {
            return None;
        }
        let mut done = std::mem::take(&mut w.aggregate);
        done.window = age;
        w.started = now;
        w.detailed = 0;
        (done.count > 0).then_some(done)
    }

    /// Records a slow statement and writes what is due.
    pub fn note(&self, s: SlowStatement) {
        let (decision, ended) = self.record(s, Instant::now());
        if let Some(summary) = ended {
            emit_summary(&summary);
        }
        if decision == Decision::Detailed {
            tracing::warn!(
                client = s.client,
                group = s.group,
                kind = s.kind,
                queue_wait_ms = s.queue_wait.as_millis() as u64,
                execution_ms = s.execution.as_millis() as u64,
                "slow statement"
            );
        }
    }

    /// Writes the aggregate line of a window that has ended (called by a
    /// periodic task, so the last window of a burst is not held back until
    /// the next slow statement).
    pub fn flush_due(&self) {
        self.flush(false);
    }

    /// Writes what the current window aggregated so far (at shutdown).
    pub fn flush_all(&self) {
        self.flush(true);
    }

    fn flush(&self, force: bool) {
        if let Some(summary) = self.take(Instant::now(), force) {
            emit_summary(&summary);
        }
    }
}

fn emit_summary(s: &Summary) {
    tracing::warn!(
        slow_statements = s.count,
        window_s = s.window.as_secs(),
        by_kind = %s.kinds_text(),
        mean_queue_wait_ms = s.mean_ms(s.queue_wait),
        mean_execution_ms = s.mean_ms(s.execution),
        worst = %s.worst_text(),
        "slow statements (aggregated; the first {DETAILED_PER_INTERVAL} of the window were logged one by one)"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stmt(client: u32, kind: &'static str, ms: u64) -> SlowStatement {
        SlowStatement {
            client,
            group: 0,
            kind,
            queue_wait: Duration::from_millis(ms / 2),
            execution: Duration::from_millis(ms - ms / 2),
        }
    }

    #[test]
    fn a_few_are_detailed_a_storm_becomes_one_line_per_window() {
        let t0 = Instant::now();
        let log = SlowLog::new(t0);
        let mut detailed = 0;
        // 1,000 slow statements within one window.
        for i in 0..1000u32 {
            let at = t0 + Duration::from_millis(u64::from(i) * 5);
            let kind = if i % 10 == 0 { "query" } else { "execute" };
            let (d, ended) = log.record(stmt(i, kind, 1000 + u64::from(i % 97)), at);
            assert_eq!(ended, None, "no window ends inside the first 10 s");
            detailed += u32::from(d == Decision::Detailed);
        }
        assert_eq!(detailed, DETAILED_PER_INTERVAL);
        // Nothing is due before the window ends.
        assert_eq!(log.take_summary(t0 + Duration::from_secs(9)), None);
        let s = log
            .take_summary(t0 + Duration::from_secs(10))
            .expect("the window aggregated statements");
        assert_eq!(s.count, 1000 - u64::from(DETAILED_PER_INTERVAL));
        assert_eq!(s.by_kind.iter().map(|(_, n)| n).sum::<u64>(), s.count);
        assert_eq!(s.kinds_text(), "query:99 execute:891", "first-seen order");
        assert_eq!(s.worst.len(), 3);
        assert!(s.worst.windows(2).all(|w| w[0].total() >= w[1].total()));
        assert_eq!(s.worst[0].total(), Duration::from_millis(1096));
        assert_eq!(s.window, Duration::from_secs(10));
        // The next window starts over: detailed again, nothing to report.
        let (d, _) = log.record(stmt(1, "query", 2000), t0 + Duration::from_secs(11));
        assert_eq!(d, Decision::Detailed);
        assert_eq!(log.take_summary(t0 + Duration::from_secs(30)), None);
    }

    #[test]
    fn the_statement_that_ends_a_window_hands_back_its_summary() {
        let t0 = Instant::now();
        let log = SlowLog::new(t0);
        for i in 0..=DETAILED_PER_INTERVAL {
            log.record(stmt(i, "execute", 1500), t0);
        }
        let (d, ended) = log.record(stmt(99, "execute", 1500), t0 + INTERVAL);
        assert_eq!(d, Decision::Detailed);
        let s = ended.expect("the previous window aggregated one");
        assert_eq!(s.count, 1);
        assert_eq!(
            s.worst_text(),
            "client 10 group 0 execute 1500 ms (queue 750 + execution 750)"
        );
    }

    #[test]
    fn worst_keeps_the_slowest_in_order() {
        let mut s = Summary::default();
        for ms in [1200, 5000, 1100, 3000, 4000, 1000] {
            s.add(stmt(ms as u32, "query", ms));
        }
        let totals: Vec<u128> = s.worst.iter().map(|w| w.total().as_millis()).collect();
        assert_eq!(totals, [5000, 4000, 3000]);
        assert_eq!(s.mean_ms(s.queue_wait + s.execution), 2550);
    }
}
