//! Per-thread-group workers (`runtime = "per_group"`): `session_threads`
//! OS threads (at most one per thread group; group `g` on thread
//! `g mod n`), each running a single-threaded tokio runtime. A client's
//! session, and so the backend connections it opens, live on its group's
//! worker: a statement's hand-offs (client socket → session → backend
//! socket → session → client socket) are wake-ups inside one thread, never
//! a cross-thread steal, the way the server's own pool gives each group
//! its own worker. Fewer threads than groups when the server shares the
//! host: one thread woken for the events of two groups does the work of
//! two wake-ups (docs/benchmarks.md, "Fewer session threads"). The
//! listener, the admin endpoint and timers stay on the main runtime.
//!
//! Each worker also measures its own run queue: every [`PROBE_EVERY`] a
//! probe task yields and records how long it waited to run again, which is
//! what a woken session waits before it reads its socket (`/status`
//! `session_threads_wait`). Under a noisy neighbour this wait, not the
//! pool's queue, was the largest part of a light user's tail
//! (docs/benchmarks.md, "Where the rest goes").

use std::future::Future;
use std::sync::Arc;

use tokio::runtime::Handle;
use tokio::sync::oneshot;
use tokio::time::{Duration, Instant};

use crate::metrics::window::{Summary, Window};

/// How often each worker's probe measures its run queue (a wake-up of a
/// few microseconds each: ~100 a second per thread).
pub const PROBE_EVERY: Duration = Duration::from_millis(10);

/// The workers; dropping stops them (their tasks are cancelled).
pub struct Workers {
    handles: Vec<Handle>,
    stops: Vec<oneshot::Sender<()>>,
    /// Each worker's run-queue waits as its probe measured them.
    waits: Vec<Arc<Window>>,
}

impl std::fmt::Debug for Workers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workers")
            .field("threads", &self.handles.len())
            .finish()
    }
}

impl Workers {
    /// Starts `n` (at least 1) worker threads named `myplex-group-<i>`,
    /// each `priority_boost` nice steps above the process (see
    /// [`crate::priority`]).
    pub fn start(n: usize, priority_boost: u8) -> std::io::Result<Self> {
        let mut w = Self {
            handles: Vec::new(),
            stops: Vec::new(),
            waits: Vec::new(),
        };
        for i in 0..n.max(1) {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let (stop, stopped) = oneshot::channel::<()>();
            let (ready, started) = std::sync::mpsc::channel();
            w.handles.push(rt.handle().clone());
            let waits = Arc::new(Window::new());
            w.waits.push(waits.clone());
            std::thread::Builder::new()
                .name(format!("myplex-group-{i}"))
                .spawn(move || {
                    crate::priority::boost_and_report(priority_boost);
                    let _ = ready.send(());
                    rt.block_on(async {
                        tokio::spawn(probe(waits));
                        let _ = stopped.await;
                    });
                })?;
            // Returns once every worker thread runs (named, in the process's
            // thread list), so the proxy is whole when `start` returns.
            let _ = started.recv();
            w.stops.push(stop);
        }
        Ok(w)
    }

    /// The worker threads.
    pub fn threads(&self) -> usize {
        self.handles.len()
    }

    /// How long a woken task waited for its worker over the last
    /// `seconds`, all workers together.
    pub fn run_queue_wait(&self, seconds: u64) -> Summary {
        let all: Vec<&Window> = self.waits.iter().map(|w| w.as_ref()).collect();
        Window::summary_of(&all, seconds)
    }

    /// Runs `task` on worker `group % len`.
    pub fn spawn<F>(&self, group: usize, task: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        self.handles[group % self.handles.len()].spawn(task);
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        // Each thread drops its runtime, cancelling its tasks. Not joined:
        // the last owner may be a task on one of these threads.
        for s in self.stops.drain(..) {
            let _ = s.send(());
        }
    }
}

/// Every [`PROBE_EVERY`], yields and records how long the worker took to
/// run this task again (the tasks woken before it ran first).
async fn probe(waits: Arc<Window>) {
    loop {
        tokio::time::sleep(PROBE_EVERY).await;
        let asked = Instant::now();
        tokio::task::yield_now().await;
        let now = Instant::now();
        waits.record_at(now, now.saturating_duration_since(asked).as_micros() as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn the_probe_measures_what_a_busy_neighbour_makes_a_woken_task_wait() {
        let w = Workers::start(1, 0).expect("workers start");
        // A task that holds the thread 3 ms at a time, yielding between:
        // the probe's yield waits behind at least one of those turns.
        w.spawn(0, async {
            for _ in 0..100 {
                std::thread::sleep(std::time::Duration::from_millis(3));
                tokio::task::yield_now().await;
            }
        });
        std::thread::sleep(std::time::Duration::from_millis(400));
        let s = w.run_queue_wait(10);
        assert!(s.count > 0, "the probe ran: {s:?}");
        assert!(s.max_ms >= 2.0, "it waited behind the busy task: {s:?}");
    }

    #[test]
    fn tasks_of_a_group_run_on_that_groups_thread() {
        let w = Workers::start(2, 0).expect("workers start");
        let (tx, rx) = mpsc::channel();
        for g in 0..4 {
            let tx = tx.clone();
            w.spawn(g, async move {
                tokio::task::yield_now().await;
                let name = std::thread::current().name().map(str::to_owned);
                let _ = tx.send((g, name));
            });
        }
        drop(tx);
        let mut seen: Vec<(usize, Option<String>)> = rx.iter().collect();
        seen.sort();
        let names: Vec<_> = seen.iter().map(|(_, n)| n.as_deref()).collect();
        assert_eq!(
            names,
            [
                Some("myplex-group-0"),
                Some("myplex-group-1"),
                Some("myplex-group-0"),
                Some("myplex-group-1")
            ]
        );
    }

    #[test]
    fn dropping_the_workers_cancels_their_tasks() {
        let w = Workers::start(1, 0).expect("workers start");
        let (tx, rx) = mpsc::channel::<()>();
        w.spawn(0, async move {
            let _keep = tx;
            std::future::pending::<()>().await;
        });
        drop(w);
        // The task (and the sender it held) is gone.
        assert!(rx.recv().is_err());
    }
}
