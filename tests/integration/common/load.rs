//! Helpers for load tests against the shared MariaDB: counting the proxy's
//! backend sessions in the processlist, server counters, and samplers that
//! watch the backend and the pool while a load runs.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use myplex::frontend::Shared;
use myplex::pool::scheduler::Snapshot;

use super::MariaDb;

/// Backend sessions of user `app` (the proxy's backend user). The sampling
/// CLI itself logs in as root, so it is not counted.
pub const APP_SESSIONS_SQL: &str =
    "SELECT COUNT(*) FROM information_schema.processlist WHERE user='app'";

/// How often the server is sampled during a run.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(200);

/// How many backend sessions user `app` has now.
pub fn app_sessions(db: &MariaDb) -> usize {
    let out = db.sql(APP_SESSIONS_SQL);
    out.trim()
        .parse()
        .unwrap_or_else(|e| panic!("processlist count {out:?}: {e}"))
}

/// Polls the processlist until no `app` session is left (returns how long
/// that took); panics with the processlist after `limit`.
pub fn wait_no_app_sessions(db: &MariaDb, limit: Duration) -> Duration {
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

/// `TcpExtListenOverflows` of this network namespace (diagnostics only: the
/// proxy listener's backlog is finite, and a handshake the kernel drops may
/// leave a client waiting for a greeting).
pub fn listen_overflows() -> Option<u64> {
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
pub fn innodb_deadlocks(db: &MariaDb) -> u64 {
    let out = db.sql("SHOW GLOBAL STATUS LIKE 'Innodb_deadlocks'");
    out.split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("Innodb_deadlocks: {out:?}"))
}

/// Every thread group's current view of the pool, for diagnostics.
pub fn group_snapshots(shared: &Shared) -> Vec<Snapshot> {
    shared.pool.groups.iter().map(|g| g.snapshot()).collect()
}

/// Samples the server every [`SAMPLE_EVERY`] (std thread: `MariaDb::sql`
/// blocks) and the proxy's own count of owned backend connections (tokio
/// task) until [`Samplers::finish`].
pub struct Samplers<T> {
    stop: Arc<AtomicBool>,
    server: std::thread::JoinHandle<Vec<T>>,
    owned: tokio::task::JoinHandle<usize>,
}

/// What [`Samplers`] saw.
pub struct Sampled<T> {
    /// Every server sample, in order.
    pub server: Vec<T>,
    /// Largest `owned` the proxy reported.
    pub owned_max: usize,
}

impl<T> Sampled<T> {
    /// The largest `f(sample)` over the server samples (0 if none).
    pub fn max_of(&self, f: impl Fn(&T) -> usize) -> usize {
        self.server.iter().map(f).max().unwrap_or(0)
    }
}

impl<T: Send + 'static> Samplers<T> {
    /// Starts sampling `sample(db)` and the pool of `shared`.
    pub fn start(
        db: &'static MariaDb,
        shared: Arc<Shared>,
        sample: fn(&MariaDb) -> T,
    ) -> Samplers<T> {
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

    /// Stops both samplers and returns what they saw.
    pub async fn finish(self) -> Sampled<T> {
        self.stop.store(true, Ordering::Relaxed);
        let server = tokio::task::spawn_blocking(move || self.server.join())
            .await
            .expect("join sampler")
            .expect("server sampler panicked");
        let owned_max = self.owned.await.expect("owned sampler");
        Sampled { server, owned_max }
    }
}

/// Runs `SELECT SLEEP(secs)` on `c`: whether a `KILL QUERY` interrupted it
/// (error 1317, or SLEEP returning 1), and how long it took.
pub async fn sleep_until_killed(c: &mut mysql_async::Conn, secs: u32) -> (bool, Duration) {
    use mysql_async::prelude::Queryable;
    let t0 = Instant::now();
    let r: Result<Option<u32>, _> = c.query_first(format!("SELECT SLEEP({secs})")).await;
    let killed = match r {
        Ok(v) => v == Some(1),
        Err(mysql_async::Error::Server(e)) if e.code == 1317 => true,
        Err(e) => panic!("sleep: {e}"),
    };
    (killed, t0.elapsed())
}
