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

use std::future::Future;

use tokio::runtime::Handle;
use tokio::sync::oneshot;

/// The workers; dropping stops them (their tasks are cancelled).
pub struct Workers {
    handles: Vec<Handle>,
    stops: Vec<oneshot::Sender<()>>,
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
        };
        for i in 0..n.max(1) {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let (stop, stopped) = oneshot::channel::<()>();
            let (ready, started) = std::sync::mpsc::channel();
            w.handles.push(rt.handle().clone());
            std::thread::Builder::new()
                .name(format!("myplex-group-{i}"))
                .spawn(move || {
                    crate::priority::boost_and_report(priority_boost);
                    let _ = ready.send(());
                    rt.block_on(async {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

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
