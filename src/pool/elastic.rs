//! The elastic backend budget shared by all thread groups (design §6.2, the
//! proxy's `thd_wait_begin`): how many backend connections the proxy may
//! hold in all (the *ceiling*), each group's guaranteed *base* share, and
//! the *common pool* above the bases that groups borrow from while their
//! statements wait.
//!
//! - **Ceiling.** `pool.max_backend_connections` when set (a hard cap: the
//!   bases then add up to it and there is no common pool, as before).
//!   Otherwise learnt from the server: (`@@max_connections` −
//!   `pool.reserved_server_connections`) / `pool.proxies_per_server`. Until
//!   it is learnt the ceiling is the sum of the bases.
//! - **Base.** Today's share: `4 × groups × (1 + oversubscribe)` split
//!   evenly (never more than the ceiling allows). A group always gets its
//!   base, whatever the others do.
//! - **Borrowing.** Beyond its base a group takes one backend at a time from
//!   the common pool (ceiling − Σ bases) while the pool has room. The
//!   scheduler only asks when a statement may run now (the adaptive limit
//!   has room: statements that wait stopped counting, or the limit rose
//!   because completions kept rising), so a CPU-bound group never borrows.
//! - **Fairness.** Every group's *fair* part of the common pool is
//!   `common / groups`. A group is lent more than its fair part while no
//!   one else wants it; when a group below its fair part finds the pool
//!   empty it is marked *starved*, and groups above their fair part then
//!   give a backend back each time one returns idle, until the starved
//!   group has its fair part. So one group cannot keep the whole pool, and
//!   no part of it sits idle while someone could use it.
//! - **Giving back.** Borrowed backends go back to the pool when a group
//!   closes them: on return when they are no longer useful (the scheduler's
//!   rule), when idle past `idle_timeout_s`, or when the ceiling shrinks.
//!
//! - **Evidence.** Climbing above the base share on a rising completion
//!   rate alone is allowed only while the server does not say that nothing
//!   waits ([`super::server_waits`]): its verdict is kept here, read by the
//!   scheduler before it lets the adaptive limit past the base.
//!
//! Lock-free (atomics): each group's scheduler calls in under its own mutex;
//! no I/O here. Owns only the counts, not the connections.

use std::sync::atomic::{AtomicBool, AtomicI8, AtomicU64, AtomicUsize, Ordering};

use super::server_waits::Verdict;

/// Where the ceiling comes from (for reports).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// `pool.max_backend_connections` (a hard cap).
    Configured,
    /// Not learnt yet: the sum of the groups' base shares.
    Default,
    /// Learnt from the server's `@@max_connections`.
    Server,
}

impl Source {
    /// Lowercase name for reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Configured => "configured",
            Self::Default => "default",
            Self::Server => "server",
        }
    }
}

/// The shared budget.
pub struct Budget {
    ceiling: AtomicUsize,
    bases: AtomicUsize,
    source: AtomicUsize,
    /// Backends borrowed from the common pool, all groups.
    used: AtomicUsize,
    borrowed: Vec<AtomicUsize>,
    starved: Vec<AtomicBool>,
    /// The server refused a backend login as full: nothing is borrowed
    /// until [`Budget::set`] (see [`Budget::hold_at_used`]).
    held: AtomicBool,
    /// The server's wait verdict ([`Verdict::code`]) and the mean waiting
    /// threads it came from (`f64` bits).
    waits: AtomicI8,
    waiting: AtomicU64,
    /// Of them, the mean waiting for row locks (`f64` bits).
    lock_waiting: AtomicU64,
}

/// A point-in-time view of the budget.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct View {
    /// Backend connections the proxy may hold in all.
    pub ceiling: usize,
    /// Where the ceiling comes from.
    pub source: Source,
    /// Σ of the groups' base shares.
    pub bases: usize,
    /// The common pool above the bases.
    pub common: usize,
    /// Borrowed from it now, all groups.
    pub borrowed: usize,
    /// Whether the server says its threads wait (reads, fsyncs, row
    /// locks): without it no limit climbs past its base on throughput alone.
    pub server_waits: Verdict,
    /// The mean waiting threads behind that verdict.
    pub server_waiting: f64,
    /// Of them, those waiting for row locks.
    pub server_lock_waiting: f64,
    /// The server waits on its disk: each group's in-flight limit is its
    /// ceiling ([`Budget::disk_waits`]).
    pub disk_waits: bool,
}

impl Budget {
    /// A budget for `groups` groups whose bases add up to `bases`, with no
    /// common pool until [`Budget::set`] gives it a larger ceiling.
    pub fn new(groups: usize, bases: usize, source: Source) -> Self {
        Self {
            ceiling: AtomicUsize::new(bases),
            bases: AtomicUsize::new(bases),
            source: AtomicUsize::new(source as usize),
            used: AtomicUsize::new(0),
            borrowed: (0..groups).map(|_| AtomicUsize::new(0)).collect(),
            starved: (0..groups).map(|_| AtomicBool::new(false)).collect(),
            held: AtomicBool::new(false),
            waits: AtomicI8::new(Verdict::Unknown.code()),
            waiting: AtomicU64::new(0),
            lock_waiting: AtomicU64::new(0),
        }
    }

    /// The server's latest wait verdict, the mean waiting threads behind
    /// it and, of them, those waiting for row locks.
    pub fn set_server_waits(&self, verdict: Verdict, waiting: f64, locks: f64) {
        self.waiting.store(waiting.to_bits(), Ordering::Release);
        self.lock_waiting.store(locks.to_bits(), Ordering::Release);
        self.waits.store(verdict.code(), Ordering::Release);
    }

    /// The server waits, and on its disk more than on row locks (reads and
    /// fsyncs in progress): the thread pool's rule applies, a waiting
    /// thread does not count and another starts, so each group's in-flight
    /// limit is its ceiling. Row-lock waiters queue on the same locks
    /// however many run: there the throughput search decides.
    pub fn disk_waits(&self) -> bool {
        let waiting = f64::from_bits(self.waiting.load(Ordering::Acquire));
        let locks = f64::from_bits(self.lock_waiting.load(Ordering::Acquire));
        self.server_waits() == Verdict::Waits && waiting - locks > locks
    }

    /// The server's latest wait verdict.
    pub fn server_waits(&self) -> Verdict {
        Verdict::from_code(self.waits.load(Ordering::Acquire))
    }

    /// True unless the server said nothing waits: an adaptive limit may
    /// climb past its group's base share (and so borrow) on throughput.
    pub fn may_climb(&self) -> bool {
        self.server_waits() != Verdict::None
    }

    /// New ceiling and bases (learnt from the server, or a reload). Groups
    /// holding more than the new common pool give back as backends return.
    pub fn set(&self, ceiling: usize, bases: usize, source: Source) {
        self.held.store(false, Ordering::Release);
        self.bases.store(bases, Ordering::Release);
        self.ceiling.store(ceiling.max(bases), Ordering::Release);
        self.source.store(source as usize, Ordering::Release);
    }

    /// Stops the common pool where it is now (the server refused a
    /// backend login as full): nothing more is borrowed until
    /// [`Budget::set`] gives a ceiling again.
    pub fn hold_at_used(&self) {
        self.held.store(true, Ordering::Release);
        let bases = self.bases.load(Ordering::Acquire);
        let used = self.used.load(Ordering::Acquire);
        self.ceiling.store(bases + used, Ordering::Release);
    }

    /// Current values.
    pub fn view(&self) -> View {
        let ceiling = self.ceiling.load(Ordering::Acquire);
        let bases = self.bases.load(Ordering::Acquire);
        View {
            ceiling,
            source: match self.source.load(Ordering::Acquire) {
                0 => Source::Configured,
                1 => Source::Default,
                _ => Source::Server,
            },
            bases,
            common: ceiling.saturating_sub(bases),
            borrowed: self.used.load(Ordering::Acquire),
            server_waits: self.server_waits(),
            server_waiting: f64::from_bits(self.waiting.load(Ordering::Acquire)),
            server_lock_waiting: f64::from_bits(self.lock_waiting.load(Ordering::Acquire)),
            disk_waits: self.disk_waits(),
        }
    }

    /// The common pool's size.
    pub fn common(&self) -> usize {
        self.ceiling
            .load(Ordering::Acquire)
            .saturating_sub(self.bases.load(Ordering::Acquire))
    }

    fn fair(&self) -> usize {
        self.common().div_ceil(self.borrowed.len().max(1))
    }

    /// Backends group `g` borrows now.
    pub fn borrowed(&self, g: usize) -> usize {
        self.borrowed
            .get(g)
            .map_or(0, |b| b.load(Ordering::Acquire))
    }

    /// True when group `g` could borrow one now (a peek; the common pool may
    /// still run out before [`Budget::borrow`]).
    pub fn can_borrow(&self, g: usize) -> bool {
        g < self.borrowed.len()
            && !self.held.load(Ordering::Acquire)
            && self.used.load(Ordering::Acquire) < self.common()
            && !self.owed_elsewhere(g)
    }

    /// Another group is starved while `g` holds its fair part or more: room
    /// freed in the pool is theirs.
    fn owed_elsewhere(&self, g: usize) -> bool {
        self.borrowed(g) >= self.fair()
            && self
                .starved
                .iter()
                .enumerate()
                .any(|(i, s)| i != g && s.load(Ordering::Acquire))
    }

    /// Takes one backend's room from the common pool for group `g`.
    pub fn borrow(&self, g: usize) -> bool {
        let Some(mine) = self.borrowed.get(g) else {
            return false;
        };
        if self.owed_elsewhere(g) || self.held.load(Ordering::Acquire) {
            return false;
        }
        let common = self.common();
        let ok = self
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
                (u < common).then_some(u + 1)
            })
            .is_ok();
        if ok {
            mine.fetch_add(1, Ordering::AcqRel);
        }
        ok
    }

    /// Group `g` closed a borrowed backend.
    pub fn give_back(&self, g: usize) {
        let Some(mine) = self.borrowed.get(g) else {
            return;
        };
        if mine
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |b| b.checked_sub(1))
            .is_ok()
        {
            let _ = self
                .used
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| u.checked_sub(1));
        }
    }

    /// Group `g` wants to borrow (`true`) or not: it is starved when it
    /// wants while the pool is empty and it holds less than its fair part.
    pub fn want(&self, g: usize, wants: bool) {
        if let Some(s) = self.starved.get(g) {
            let starved = wants && !self.can_borrow(g) && self.borrowed(g) < self.fair();
            if s.load(Ordering::Relaxed) != starved {
                s.store(starved, Ordering::Release);
            }
        }
    }

    /// True when group `g` should give a borrowed backend back now rather
    /// than keep it idle: the pool shrank below what is borrowed, or another
    /// group is starved while `g` holds more than its fair part.
    pub fn should_give_back(&self, g: usize) -> bool {
        let mine = self.borrowed(g);
        if mine == 0 {
            return false;
        }
        if self.used.load(Ordering::Acquire) > self.common() {
            return true;
        }
        mine > self.fair() && self.owed_elsewhere(g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_server_holds_the_common_pool_where_it_is() {
        let b = Budget::new(2, 8, Source::Default);
        b.set(40, 8, Source::Server); // common pool 32
        assert!(b.borrow(0) && b.borrow(0) && b.borrow(1));
        b.hold_at_used();
        assert_eq!(b.view().ceiling, 11, "the bases and the 3 borrowed");
        assert!(!b.can_borrow(0) && !b.can_borrow(1));
        b.give_back(0);
        assert!(
            !b.can_borrow(1) && !b.borrow(1),
            "room given back stays held"
        );
        b.set(40, 8, Source::Server);
        assert_eq!(b.view().common, 32, "lifted by the next budget");
        assert!(b.can_borrow(1));
    }

    #[test]
    fn borrowing_stops_at_the_common_pool() {
        let b = Budget::new(2, 8, Source::Default);
        assert!(!b.borrow(0), "no common pool before a ceiling is set");
        b.set(12, 8, Source::Server);
        assert_eq!(b.common(), 4);
        for _ in 0..4 {
            assert!(b.borrow(0));
        }
        assert!(!b.can_borrow(1));
        assert!(!b.borrow(1), "the pool is empty");
        assert_eq!(b.view().borrowed, 4);
        b.give_back(0);
        assert!(b.borrow(1));
        assert_eq!((b.borrowed(0), b.borrowed(1)), (3, 1));
        b.give_back(7); // unknown group: ignored
        b.give_back(1);
        b.give_back(1); // nothing borrowed: ignored
        assert_eq!(b.view().borrowed, 3);
    }

    #[test]
    fn a_starved_group_reclaims_its_fair_part() {
        let b = Budget::new(2, 8, Source::Default);
        b.set(16, 8, Source::Server); // common 8, fair 4 each
        for _ in 0..8 {
            assert!(b.borrow(0), "lent the whole pool while no one else wants");
        }
        assert!(!b.should_give_back(0), "nobody else wants it");
        b.want(1, true);
        assert!(b.should_give_back(0), "group 1 is starved");
        for _ in 0..4 {
            b.give_back(0);
            b.want(1, true);
            assert!(b.borrow(1));
            b.want(1, true);
        }
        assert!(
            !b.should_give_back(0),
            "back at its fair part: {}",
            b.borrowed(0)
        );
        assert_eq!((b.borrowed(0), b.borrowed(1)), (4, 4));
    }

    #[test]
    fn a_shrunk_ceiling_takes_borrowed_backends_back() {
        let b = Budget::new(1, 4, Source::Default);
        b.set(10, 4, Source::Server);
        for _ in 0..6 {
            assert!(b.borrow(0));
        }
        b.set(8, 4, Source::Server);
        assert!(b.should_give_back(0));
        b.give_back(0);
        b.give_back(0);
        assert!(!b.should_give_back(0));
        assert_eq!(
            b.view(),
            View {
                ceiling: 8,
                source: Source::Server,
                bases: 4,
                common: 4,
                borrowed: 4,
                server_waits: Verdict::Unknown,
                server_waiting: 0.0,
                server_lock_waiting: 0.0,
                disk_waits: false,
            }
        );
    }
}
