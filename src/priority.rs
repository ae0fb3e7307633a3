//! The scheduling priority of the threads that carry client sessions
//! (`worker_priority_boost`): they run that many nice steps below the
//! process's own nice value, so that relaying a reply never waits in the
//! CPU's run queue behind the statements the proxy itself let through.
//!
//! Why: every statement costs the proxy two short wake-ups (the client's
//! request, the server's reply), and a transaction holds its backend, its
//! row locks and its pages across all of them. On a host whose CPUs are
//! busy with the server's threads (and, in a benchmark, the load
//! generator's), a woken proxy thread at the default priority waits for
//! its turn behind them: on the lab box, I/O-bound at 256 clients, 30 % of
//! the backends sat idle inside transactions waiting for the proxy to relay
//! a reply or a next statement, the server re-read pages evicted between a
//! transaction's statements, and the CPUs were a quarter idle
//! (docs/benchmarks.md). For statements the server answers, the proxy's
//! work per wake-up is small and follows the server's pace; what the proxy
//! answers alone runs first too (docs/deploy.md names that risk). Nice
//! values only order threads inside one scheduling group (a cgroup, an
//! autogroup).
//!
//! Owns the process's base value (what every boost counts from, handed to
//! a successor so that boosts never add up), applying the boost to the
//! calling thread, and reporting the outcome once. Lowering a nice value needs `CAP_SYS_NICE` or an `RLIMIT_NICE`
//! that allows it (systemd `LimitNICE=`): without either, the threads run
//! as low as the limit allows (usually as started), and the proxy says so
//! once at start.

use std::sync::OnceLock;

/// What applying the boost to one thread came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// The thread's nice value before.
    pub was: i32,
    /// The value asked for (the process's base − boost, at least −20).
    pub wanted: i32,
    /// The thread's nice value after.
    pub now: i32,
}

impl Outcome {
    /// The thread runs at the value asked for.
    pub fn full(&self) -> bool {
        self.now == self.wanted
    }
}

/// The lowest nice value the kernel allows.
const MIN_NICE: i32 = -20;

/// The environment variable through which a process hands its own nice
/// value to the successor it starts (`takeover`): the successor is started
/// from a session thread when sessions run on the shared runtime, and would
/// otherwise take that thread's boosted value as its own and boost again.
pub const BASE_ENV: &str = "MYPLEX_NICE_BASE";

/// The process's own nice value, from which every boost is counted.
static BASE: OnceLock<i32> = OnceLock::new();

/// The process's own nice value: settled by [`settle_process_base`] at
/// start, else the first caller's (a thread started before any boost).
pub fn process_base() -> i32 {
    *BASE.get_or_init(|| rustix::process::getpriority_process(None).unwrap_or(0))
}

/// Called once at start on the main thread, before any other thread: a
/// value handed over by the process that started this one ([`BASE_ENV`])
/// is taken back (raising a nice value is always allowed), and the
/// calling thread's value becomes the process's base.
pub fn settle_process_base() {
    let handed = std::env::var(BASE_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<i32>().ok())
        .filter(|v| (MIN_NICE..=19).contains(v));
    if let (Some(base), Ok(now)) = (handed, rustix::process::getpriority_process(None))
        && now < base
    {
        let _ = rustix::process::setpriority_process(None, base);
    }
    process_base();
}

/// Sets the calling thread's nice value to the process's base minus
/// `boost` (on Linux a nice value is per thread; threads it starts later
/// inherit it, and asking again from one of them changes nothing). When
/// lowering that far is refused, goes as low as `RLIMIT_NICE` allows.
/// `boost` 0 puts the thread at the process's base.
pub fn boost_this_thread(boost: u8) -> std::io::Result<Outcome> {
    let base = process_base();
    let was = rustix::process::getpriority_process(None)?;
    let wanted = (base - i32::from(boost)).max(MIN_NICE);
    if wanted != was && rustix::process::setpriority_process(None, wanted).is_err() {
        // RLIMIT_NICE's soft limit r lets an unprivileged thread go down
        // to 20 − r.
        let floor = rlimit::Resource::NICE
            .get()
            .ok()
            .map(|(soft, _)| 20 - i32::try_from(soft.min(40)).unwrap_or(40));
        if let Some(floor) = floor
            && floor < was
        {
            let _ = rustix::process::setpriority_process(None, floor.max(wanted));
        }
    }
    let now = rustix::process::getpriority_process(None)?;
    Ok(Outcome { was, wanted, now })
}

/// The nice value the first session thread of the process runs at (see
/// [`boost_and_report`]); `None` before one started or when it could not
/// be read.
static TAKEN: OnceLock<Option<i32>> = OnceLock::new();

/// The nice value the session threads run at, for `/status`.
pub fn session_threads_nice() -> Option<i32> {
    TAKEN.get().copied().flatten()
}

/// Whether this process may lower a nice value at will: `CAP_SYS_NICE` in
/// its effective set (root in a default container lacks it). Linux only;
/// `false` when it cannot be read.
pub fn may_lower_at_will() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .is_some_and(|caps| caps & (1 << 23) != 0)
}

/// [`boost_this_thread`], reporting the first outcome in the process once
/// (every session thread asks for the same boost).
pub fn boost_and_report(boost: u8) {
    let outcome = boost_this_thread(boost);
    if TAKEN.set(outcome.as_ref().ok().map(|o| o.now)).is_err() || boost == 0 {
        return;
    }
    match outcome {
        Ok(o) if o.full() => tracing::info!(
            nice = o.now,
            "session threads run at a higher priority than the process (worker_priority_boost)"
        ),
        Ok(o) => tracing::warn!(
            nice = o.now,
            wanted = o.wanted,
            "session threads could not take their priority (worker_priority_boost needs \
             CAP_SYS_NICE or a large enough RLIMIT_NICE, e.g. systemd LimitNICE=): replies may \
             wait behind the server's threads on a busy host"
        ),
        Err(e) => tracing::warn!(error = %e, "could not read or set the session threads' priority"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On a thread of its own (the change is per thread and must not leak
    /// into the test harness's other threads).
    fn on_a_thread<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        std::thread::spawn(f).join().expect("thread")
    }

    #[test]
    fn zero_leaves_the_thread_at_the_process_value() {
        let o = on_a_thread(|| boost_this_thread(0).expect("priority"));
        assert_eq!((o.was, o.wanted, o.now), (o.was, o.was, o.was));
        assert_eq!(o.now, process_base());
    }

    #[test]
    fn the_boost_lowers_this_thread_only_as_far_as_allowed() {
        let (o, after, child, again) = on_a_thread(|| {
            let o = boost_this_thread(3).expect("priority");
            let after = rustix::process::getpriority_process(None).expect("read");
            // A thread started from it inherits the value, and boosting it
            // again counts from the process's base: no second step.
            let (child, again) = std::thread::spawn(|| {
                let child = rustix::process::getpriority_process(None).expect("read");
                let again = boost_this_thread(3).expect("priority");
                (child, again)
            })
            .join()
            .expect("thread");
            (o, after, child, again)
        });
        assert_eq!(o.wanted, (process_base() - 3).max(MIN_NICE));
        assert_eq!(o.now, after, "the outcome reports the thread's value");
        assert_eq!(child, after, "threads it starts inherit it");
        assert_eq!((again.was, again.now), (after, after), "{again:?}");
        if may_lower_at_will() {
            assert!(o.full(), "{o:?}");
        } else {
            assert!(o.now <= o.was && o.now >= o.wanted, "{o:?}");
        }
        // The test harness's own thread is untouched.
        let here = rustix::process::getpriority_process(None).expect("read");
        assert_eq!(here, o.was);
    }
}
