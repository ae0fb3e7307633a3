//! Purge debt between points. InnoDB purges a committed transaction's undo
//! log in the background; a server with many runnable threads starves its
//! purge threads, and the debt (`Innodb_history_list_length`: transactions
//! not purged yet) grows through a point. That is work deferred, not saved:
//! the next point on the same server pays it (its reads and CPU). So a run
//! waits, bounded, until the debt is drained before each point, and each
//! point reports the debt at its window's start and end: a target that
//! finishes a window owing more did less of its own work inside it.

use std::time::Duration;

use mysql_async::prelude::Queryable;
use tokio::time::Instant;

use super::limits::PointPhase;
use super::runner::Target;

const QUERY: &str = "SHOW GLOBAL STATUS LIKE 'Innodb_history_list_length'";

/// One reading may take this long (a server busy with a point's clients
/// answers slowly; a stuck one not at all).
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The server's purge debt, read through `t` on a connection of its own
/// (`None`: no InnoDB, or the reading failed).
pub async fn debt(t: &Target) -> Option<u64> {
    let opts = t.opts().ok()?;
    let read = async {
        let mut conn = mysql_async::Conn::new(opts).await.ok()?;
        let row: Option<(String, String)> = conn.query_first(QUERY).await.ok()?;
        let _ = conn.disconnect().await;
        row.and_then(|(_, v)| parse(&v))
    };
    tokio::time::timeout(READ_TIMEOUT, read)
        .await
        .ok()
        .flatten()
}

fn parse(value: &str) -> Option<u64> {
    value.trim().parse().ok()
}

/// The wait before a point: how long it took, and the debt it ended at.
#[derive(Debug, Clone, Copy)]
pub struct Drained {
    /// Time spent waiting.
    pub waited: Duration,
    /// The last reading.
    pub debt: Option<u64>,
}

/// Waits, up to `limit`, until the debt read through `t` is at most `max`;
/// a reading that fails ends the wait (nothing to wait for).
pub async fn drain(t: &Target, max: u64, limit: Duration) -> Drained {
    let start = Instant::now();
    loop {
        let debt = debt(t).await;
        let waited = start.elapsed();
        if !must_wait(debt, max, waited, limit) {
            return Drained { waited, debt };
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

fn must_wait(debt: Option<u64>, max: u64, waited: Duration, limit: Duration) -> bool {
    debt.is_some_and(|d| d > max) && waited < limit
}

/// The debt at a point's window start (once `phase` says it measures) and
/// near its end (a second before `duration` is up, while the clients still
/// run: once they leave, purge catches up at once).
pub async fn window(t: Target, phase: std::sync::Arc<PointPhase>, duration: Duration) -> Window {
    while !phase.is_measuring() {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let opened = Instant::now();
    let start = debt(&t).await;
    let end_at = opened
        + duration
            .saturating_sub(Duration::from_secs(1))
            .max(duration / 2);
    tokio::time::sleep_until(end_at).await;
    Window {
        start,
        end: debt(&t).await,
    }
}

/// Purge debt at a measured window's edges.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct Window {
    /// At the start.
    pub start: Option<u64>,
    /// Near the end.
    pub end: Option<u64>,
}

impl Window {
    /// Debt added per transaction measured (negative: the point paid some
    /// of what it found).
    pub fn per_transaction(&self, transactions: u64) -> Option<f64> {
        let (a, b) = (self.start?, self.end?);
        (transactions > 0).then(|| (b as f64 - a as f64) / transactions as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_value_is_a_count() {
        assert_eq!(parse("13054"), Some(13054));
        assert_eq!(parse(" 7\n"), Some(7));
        assert_eq!(parse(""), None);
        assert_eq!(parse("-1"), None);
    }

    #[test]
    fn a_point_waits_only_for_a_debt_it_can_read_above_the_bound_and_in_time() {
        let (s, limit) = (Duration::from_secs(1), Duration::from_secs(300));
        assert!(must_wait(Some(5000), 1000, s, limit));
        assert!(!must_wait(Some(1000), 1000, s, limit));
        assert!(!must_wait(None, 1000, s, limit));
        assert!(!must_wait(Some(5000), 1000, limit, limit));
        assert!(!must_wait(Some(5000), 1000, s, Duration::ZERO));
    }

    #[test]
    fn debt_per_transaction_needs_both_edges_and_transactions() {
        let w = Window {
            start: Some(1000),
            end: Some(13000),
        };
        assert_eq!(w.per_transaction(6000), Some(2.0));
        let paid = Window {
            start: Some(8000),
            end: Some(2000),
        };
        assert_eq!(paid.per_transaction(3000), Some(-2.0));
        assert_eq!(w.per_transaction(0), None);
        assert_eq!(Window::default().per_transaction(10), None);
    }
}
