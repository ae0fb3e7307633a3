//! The dispatch rules of one thread group (design §6.1) as a pure state
//! machine: one queue of per-user lanes, each with its high-priority
//! requests ahead of its low ones, the in-flight limit (fixed `1 + oversubscribe`,
//! or found at run time by [`super::adaptive`]), stall extra slots, kickup,
//! an idle-backend stack and the count of owned backend connections: the
//! group's base share, plus backends borrowed from the common elastic pool
//! ([`super::elastic`]) while the adaptive limit lets more statements run
//! than the base holds (statements that wait stopped counting, or more in
//! flight kept raising completions); borrowed ones go back when they return
//! with nothing to do, or when another group is owed its part.
//!
//! Users share the slots by weight ([`super::fair`]): a transaction in
//! progress goes first within its user's share; a stall tick's extra slot
//! goes to the oldest high-priority request whoever's share it is (it may
//! be what the running statements wait on); a user at its backend cap
//! (`max_backend_connections`, counted across groups by
//! [`super::tenants::Tenant`]) has its leases wait while others run.
//!
//! No I/O and no locking here: [`super::group::Group`] wraps this in a mutex
//! and delivers grants through channels. Generic over the backend type so the
//! rules are tested with plain values on paused time.

use std::sync::Arc;

use tokio::sync::oneshot;
use tokio::time::{Duration, Instant};

use super::adaptive::{Adaptive, Estimate, Tuning};
use super::elastic::Budget;
use super::fair::{FairQueue, Pos};
use super::server_waits::Verdict;
use super::shares::{Holdings, Protected, Running};
use super::tenants::{Tenant, TenantLimits};

/// What a backend connection must tell the scheduler.
pub trait Pooled {
    /// Credential pool the connection belongs to.
    fn pool(&self) -> usize;
    /// The owner token of the session whose leftovers the idle connection
    /// still holds (parked, see `crate::pool::parking`); `None` when clean.
    fn parked_for(&self) -> Option<u64>;
    /// The user (tenant index) whose share of the group's backends the
    /// connection counts in ([`super::shares`]); `None` for one the pool
    /// opened for itself that no user took yet.
    fn share_user(&self) -> Option<u32> {
        None
    }
    /// Counts the connection for `user` from now on.
    fn set_share_user(&mut self, _user: u32) {}
}

/// Queue priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Priority {
    /// Sessions in a transaction or holding a lock (by `high_prio_mode`).
    High,
    /// Everything else.
    Low,
    /// The proxy's own short work that must make progress under any load
    /// (the code catalog's reading, a helper connection for a KILL): ahead
    /// of the queue and past the in-flight limit, granted as soon as what
    /// it needs can be had (a backend coming back). Never a client's
    /// statement, and not counted as the clients' progress by stall ticks.
    Internal,
}

/// A statement's priority (design §6.1, `high_prio_mode`): in
/// `transactions` mode a session holding a transaction or lock is high
/// priority while it has tickets (each admission spends one); a low-priority
/// request refills them.
pub fn priority(
    mode: crate::config::HighPrioMode,
    holds_lock: bool,
    tickets: &mut u32,
    max_tickets: u32,
) -> Priority {
    use crate::config::HighPrioMode;
    match mode {
        HighPrioMode::Statements => Priority::High,
        HighPrioMode::None => Priority::Low,
        HighPrioMode::Transactions => {
            if holds_lock && *tickets > 0 {
                *tickets -= 1;
                Priority::High
            } else {
                *tickets = max_tickets;
                Priority::Low
            }
        }
    }
}

/// What a waiter needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// A backend connection of this credential pool, and an execution slot.
    /// `parked`: the owner token of the connection this session parked
    /// (taken back first, as it is); `None` when it parked none.
    Lease { pool: usize, parked: Option<u64> },
    /// Only an execution slot (the session is pinned to its backend).
    Slot,
    /// The next statement of a transaction in progress on the session's
    /// own backend (`pool.admit_transactions_at_start`): granted at once,
    /// counted in flight like any statement, unless another user waits
    /// that is owed its share (it then waits first in its own user's lane:
    /// a transaction goes first within its user's share, not past others'). The limit admitted the
    /// transaction at its first statement; queueing the rest only holds its
    /// locks and backend longer (at 1,024 I/O-bound clients hundreds of
    /// open transactions waited in the high queue behind a limit of 16–50
    /// while their locks blocked others).
    Continue,
}

/// What a waiter gets.
#[derive(Debug)]
pub enum Grant<B> {
    /// An execution slot.
    Slot,
    /// A slot and an idle backend connection.
    Backend(B),
    /// A slot and permission to open a new backend connection (already
    /// counted as owned; report failure with `open_failed`).
    Open,
}

/// What leases could get now: a new backend, or an idle one (of their own
/// pool, or one their user may close to open its own, see
/// [`super::shares`]). Built under the group's lock for one decision.
#[derive(Debug, Default)]
struct LeaseView {
    /// One more backend may be owned (within the share, or borrowed).
    grow: bool,
    /// Some backend is idle.
    any_idle: bool,
    /// Any idle backend may be closed for any lease (the proxy's own
    /// requests, and overdue ones: the valve before a queue timeout).
    permissive: bool,
    /// Pools with an idle backend.
    pools: Vec<usize>,
    /// The users the idle backends count for (`None`: no user's).
    owners: Vec<Option<u32>>,
    /// Which of them another user may close.
    protected: Protected,
}

impl LeaseView {
    /// A lease of credential pool `pool` for user `taker` can get a backend.
    fn ok(&self, pool: usize, taker: u32) -> bool {
        self.grow
            || (self.permissive && self.any_idle)
            || self.pools.contains(&pool)
            || self
                .owners
                .iter()
                .any(|&o| self.protected.may_close(o, taker))
    }
}

/// How a request is admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Turn {
    /// In its turn: under the limit, by the share's order, or a stall's
    /// extra slot.
    Ordered,
    /// Past the limit after half its queue timeout; may close any idle
    /// backend (the valve before a queue timeout).
    Overdue,
    /// Past the limit as a place its user is owed
    /// ([`super::shares::Running::owed`]).
    TakenBack,
    /// The proxy's own request ([`Priority::Internal`]): counted for no
    /// user, may close any idle backend.
    Internal,
}

impl Turn {
    /// Progress of the clients' statements for a stall tick: not the
    /// proxy's own work, nor a place taken back past the limit (the
    /// statements holding the limit may still wait on a queued one).
    fn is_progress(self) -> bool {
        !matches!(self, Self::Internal | Self::TakenBack)
    }
}

/// Scheduler limits of one group.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// `1 + oversubscribe`: the fixed cap, or where the adaptive limit starts.
    pub cap: usize,
    /// `pool.inflight = "adaptive"`: the limit is found at run time.
    pub adaptive: bool,
    /// `stall_limit_ms`: with the adaptive limit, a statement running this
    /// long always stops counting as busy.
    pub stall_cap: Duration,
    /// This group's base share of the backend budget (guaranteed; with the
    /// adaptive limit and a common elastic pool it may borrow beyond it).
    pub max_owned: usize,
    /// `prio_kickup_ms`.
    pub kickup: Duration,
}

struct Waiter<B> {
    id: u64,
    need: Need,
    since: Instant,
    /// From when the waiter is admitted past the in-flight limit (half its
    /// queue timeout): see [`GroupState::admit_overdue`].
    overdue_at: Option<Instant>,
    tenant: Arc<Tenant>,
    tx: oneshot::Sender<Grant<B>>,
}

/// Counters exported as metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Requests granted.
    pub dispatched: u64,
    /// Timer ticks that found the group stalled.
    pub stalls: u64,
    /// Low-priority requests made high priority by age (kickup).
    pub kickups: u64,
    /// Idle connections closed to make room for another credential pool.
    pub evictions: u64,
    /// Backend connections borrowed from the common elastic pool.
    pub borrowed: u64,
    /// Borrowed connections given back: owed to another group (on return),
    /// or idle through a whole give-back window (no longer useful).
    pub given_back: u64,
    /// Backends closed by their user (a lease dropped: broken, not clean,
    /// or not safe to share) or that failed to open.
    pub closed: u64,
    /// Backends closed on return because the group owned more than its
    /// share.
    pub closed_over_share: u64,
    /// Waiters admitted past the in-flight limit after half their queue
    /// timeout.
    pub overdue: u64,
    /// Requests admitted past the in-flight limit because their user ran
    /// less than its share of it while others ran on the part it lent
    /// ([`super::shares::Running`]).
    pub share_reclaims: u64,
    /// Parked connections (idle, not clean) taken back by their own
    /// session as they were: a cleanup saved.
    pub reclaimed: u64,
    /// Parked connections granted to another session (cleaned first).
    pub unparked: u64,
}

/// A point-in-time view of the group.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Snapshot {
    /// Statements executing.
    pub in_flight: usize,
    /// The in-flight limit now (without stall extras): the fixed cap, or the
    /// adaptive limit on busy (not stalled) statements.
    pub cap: usize,
    /// The adaptive limit's inputs (`None` with `pool.inflight = "fixed"`).
    pub adaptive: Option<Estimate>,
    /// Extra slots granted by stall detection.
    pub extra: usize,
    /// High-priority requests queued.
    pub high: usize,
    /// Low-priority requests queued.
    pub low: usize,
    /// The proxy's own requests waiting ([`Priority::Internal`]: catalog
    /// readings, KILL helpers), not in `high` or `low`.
    pub internal: usize,
    /// Idle backend connections.
    pub idle: usize,
    /// Backend connections owned (idle + busy + pinned + opening).
    pub owned: usize,
    /// The group's base share of backend connections.
    pub max_owned: usize,
    /// Backend connections borrowed from the common elastic pool now
    /// (included in `owned`).
    pub elastic: usize,
    /// The most this group may own now: its base plus the whole common
    /// pool (the adaptive limit's upper bound).
    pub ceiling: usize,
    /// How long borrowed backends stay idle before they are given back
    /// now (see [`GIVE_BACK_WINDOW_MAX`]).
    pub give_back_window: Duration,
    /// Counters.
    pub counters: Counters,
}

/// How long borrowed backends must stay idle (the low-water mark of the
/// idle stack over this window) before the group gives them back, at
/// first and at least.
const GIVE_BACK_WINDOW: Duration = Duration::from_secs(1);
/// The longest give-back window. The window doubles each time the group
/// has to borrow again after giving back, and halves when a give-back is
/// followed by [`GIVE_BACK_JUDGED_AFTER`] windows without borrowing: a load whose waits come
/// and go every few seconds (I/O-bound, the server flushing) keeps its
/// backends instead of closing hundreds and opening them again (each a
/// login and a prepare of every statement it runs: measured 2,000 backend
/// logins and 83,000 prepares in 30 s at 1,024 I/O-bound clients with a
/// fixed 1 s window), while a load that stopped waiting gives them back
/// within a window or two.
const GIVE_BACK_WINDOW_MAX: Duration = Duration::from_secs(32);
/// A give-back not followed by borrowing for this many windows was right.
const GIVE_BACK_JUDGED_AFTER: u32 = 4;

/// State of one thread group.
pub struct GroupState<B> {
    limits: Limits,
    /// The shared elastic budget and this group's index in it.
    budget: Option<(Arc<Budget>, usize)>,
    adaptive: Option<Box<Adaptive>>,
    /// Time zero of the adaptive controller's clock.
    origin: Instant,
    in_flight: usize,
    extra: usize,
    owned: usize,
    idle: Vec<B>,
    /// The process handed its listeners over (`crate::takeover`): its
    /// sessions are leaving, so connections coming back are closed instead
    /// of kept idle (the new process opens its own).
    retiring: bool,
    /// The server's wait verdict at the last [`Self::adapt`]: the limit
    /// searches upwards again when it turns to waits.
    verdict: Verdict,
    /// The fewest idle connections seen since `idle_window` began: that
    /// many were not needed for a whole window (the give-back measure).
    idle_low: usize,
    /// When the current give-back window began (controller clock).
    idle_window: Duration,
    /// The give-back window's length now (see [`GIVE_BACK_WINDOW_MAX`]).
    give_back_window: Duration,
    /// When the last give-back not judged yet happened, and
    /// `counters.borrowed` as it was then (borrowing after it means the
    /// give-back was wrong).
    gave_back: Option<(Duration, u64)>,
    /// The queued requests: one lane per user, high priority first inside
    /// a lane ([`FairQueue`]).
    queue: FairQueue<Waiter<B>>,
    /// [`Priority::Internal`] requests, first come first served.
    internal: std::collections::VecDeque<Waiter<B>>,
    /// Owned backends per user ([`super::shares`]).
    holdings: Holdings,
    /// Statements running per user ([`super::shares::Running`]).
    running: Running,
    /// The user of requests made without one ([`Self::request`]).
    anyone: Arc<Tenant>,
    dispatched_since_tick: u64,
    next_id: u64,
    counters: Counters,
}

/// Result of [`GroupState::request`]. The id names the admitted statement
/// when it completes ([`GroupState::complete`]) or is undone.
pub enum Admission<B> {
    /// Granted at once.
    Now(Grant<B>, u64),
    /// Queued: wait on the receiver, cancel with the id.
    Queued(u64, oneshot::Receiver<Grant<B>>),
}

impl<B: Pooled> GroupState<B> {
    /// An empty group with a fixed backend share (no elastic pool).
    pub fn new(limits: Limits) -> Self {
        Self::with_budget(limits, None)
    }

    /// An empty group; with `budget` (the shared budget and this group's
    /// index) it may borrow from the common elastic pool when adaptive.
    pub fn with_budget(limits: Limits, budget: Option<(Arc<Budget>, usize)>) -> Self {
        let origin = Instant::now();
        let common = budget.as_ref().map_or(0, |(b, _)| b.common());
        let adaptive = limits.adaptive.then(|| {
            Box::new(Adaptive::new(
                Tuning {
                    min: 1,
                    max: limits.max_owned + common,
                    base: limits.max_owned,
                    initial: limits.cap,
                    stall_cap: limits.stall_cap,
                },
                Duration::ZERO,
            ))
        });
        Self {
            limits,
            budget,
            adaptive,
            origin,
            in_flight: 0,
            extra: 0,
            owned: 0,
            idle: Vec::new(),
            retiring: false,
            verdict: Verdict::Unknown,
            idle_low: 0,
            idle_window: Duration::ZERO,
            give_back_window: GIVE_BACK_WINDOW,
            gave_back: None,
            queue: FairQueue::default(),
            internal: std::collections::VecDeque::new(),
            holdings: Holdings::default(),
            running: Running::default(),
            anyone: Tenant::new(0, "", TenantLimits::default()),
            dispatched_since_tick: 0,
            next_id: 1,
            counters: Counters::default(),
        }
    }

    /// New limits (a configuration reload). A larger share or cap serves
    /// waiters at once; a smaller share closes idle connections now and
    /// busy ones as they come back.
    /// The in-flight mode (`limits.adaptive`) is not reloadable: it stays
    /// as the group started.
    pub fn set_limits(&mut self, limits: Limits, now: Instant) {
        self.limits = Limits {
            adaptive: self.limits.adaptive,
            ..limits
        };
        let ceiling = self.limit_ceiling();
        if let Some(a) = self.adaptive.as_mut() {
            a.set_bounds(ceiling, self.limits.max_owned, self.limits.stall_cap);
        }
        while self.over() && !self.idle.is_empty() {
            let b = self.idle.remove(0);
            self.shrink_of(b.share_user());
        }
        self.dispatch(now);
    }

    /// Backends borrowed from the common pool.
    fn borrowed(&self) -> usize {
        self.budget.as_ref().map_or(0, |(b, g)| b.borrowed(*g))
    }

    /// The most this group may own: its base plus the common pool.
    fn ceiling(&self) -> usize {
        self.limits.max_owned + self.budget.as_ref().map_or(0, |(b, _)| b.common())
    }

    /// The adaptive limit's upper bound: the ceiling, or the base share
    /// while the server says nothing waits ([`Budget::may_climb`]).
    fn limit_ceiling(&self) -> usize {
        match &self.budget {
            Some((b, _)) if !b.may_climb() => self.limits.max_owned.min(self.ceiling()),
            _ => self.ceiling(),
        }
    }

    /// Owns more than its base and what it borrowed (the share shrank).
    fn over(&self) -> bool {
        self.owned > self.limits.max_owned + self.borrowed()
    }

    /// True when the statements wait (the proxy's `thd_wait_begin`): the
    /// adaptive limit rose above the base because completions kept rising
    /// with more in flight, or most running statements are stalled (not an
    /// outlier or two of a CPU-bound load).
    ///
    /// And the group owns fewer than twice what may run (the limit plus the
    /// stalled statements): in transaction pooling a backend is also held
    /// by each transaction between its statements, so leases are what open
    /// transactions. Borrowing for every lease let I/O-bound groups grow to
    /// one backend per client (1,024 at 1,024 clients) while the limit let
    /// 40–80 statements run: more open transactions waiting in the queue
    /// (longer lock holds), a prepare of every statement on every new
    /// backend, and 23 % more server CPU per statement than a fixed pool of
    /// twice its in-flight cap (docs/benchmarks.md).
    fn waits(&self) -> bool {
        self.adaptive.as_ref().is_some_and(|a| {
            let waits = a.limit() > self.limits.max_owned
                || (a.stalled() > 0 && a.stalled() * 2 >= self.in_flight);
            waits && self.owned < 2 * (a.limit() + a.stalled())
        })
    }

    /// True when one more backend could be owned now (a peek).
    fn can_grow(&self) -> bool {
        self.owned < self.limits.max_owned + self.borrowed()
            || (self.waits() && self.budget.as_ref().is_some_and(|(b, g)| b.can_borrow(*g)))
    }

    /// Counts one more owned backend: within the base (or what is already
    /// borrowed), else borrowed from the common pool (adaptive only).
    fn grow(&mut self) -> bool {
        if self.owned < self.limits.max_owned + self.borrowed() {
            self.owned += 1;
            return true;
        }
        self.waits() && self.borrow()
    }

    /// Borrows one backend from the common pool and counts it owned.
    fn borrow(&mut self) -> bool {
        let borrowed = self.budget.as_ref().is_some_and(|(b, g)| b.borrow(*g));
        if borrowed {
            self.owned += 1;
            self.counters.borrowed += 1;
        }
        borrowed
    }

    /// Counts one more owned backend for an overdue waiter: borrowed from
    /// the common pool whenever it has room and no other group is owed it
    /// (the waits rule of [`Self::grow`] does not apply: the limit, not
    /// the budget, held it). Adaptive groups only, as all borrowing.
    fn borrow_overdue(&mut self) -> bool {
        self.adaptive.is_some() && self.borrow()
    }

    /// True when an overdue lease could get a backend now.
    fn overdue_lease_view(&self) -> LeaseView {
        let grow = self.can_grow()
            || (self.adaptive.is_some()
                && self.budget.as_ref().is_some_and(|(b, g)| b.can_borrow(*g)));
        // Overdue: any idle backend may be closed for it (the valve before
        // a queue timeout keeps working whatever the shares).
        self.lease_view_with(grow, None, true)
    }

    /// Admits the waiters that have waited half their queue timeout past
    /// the in-flight limit, oldest first, when what they need can be had
    /// (a backend idle, within the share, or borrowed from the common
    /// pool). The limit is a throughput choice; failing a statement with
    /// the queue timeout while the server keeps answering and the budget
    /// has room is the proxy's own doing: measured, 470 statements failed
    /// with 1317 in 40 s at 2,048 I/O-bound sysbench clients, where the
    /// same clients direct saw slow statements (p95 22 s) and no error, and
    /// sysbench aborts on the first error it was not told to ignore. The
    /// queue timeout stays for what it is for: every backend the budget
    /// allows is held, or the server does not answer.
    fn admit_overdue(&mut self, now: Instant) {
        for high in [true, false] {
            loop {
                let view = self.overdue_lease_view();
                let due = move |w: &Waiter<B>| {
                    w.overdue_at.is_some_and(|t| t <= now)
                        && Self::runnable(w.need, &w.tenant, &view)
                };
                if !self.grant_oldest(high, now, Turn::Overdue, due) {
                    break;
                }
                self.counters.overdue += 1;
            }
        }
    }

    /// Grants out of turn the oldest request of priority `high` that `pick`
    /// accepts (charged to its user as any grant). False when there is
    /// none, or it could not be admitted (it then stays queued).
    fn grant_oldest(
        &mut self,
        high: bool,
        now: Instant,
        turn: Turn,
        pick: impl Fn(&Waiter<B>) -> bool,
    ) -> bool {
        let Some((lane, light, w)) = self.queue.pop_min_first_if(high, |w| w.since, pick) else {
            return false;
        };
        match self.admit_as(w.need, w.id, &w.tenant, now, turn) {
            Some(grant) => {
                if let Err(grant) = w.tx.send(grant) {
                    self.undo_for(w.id, grant, &w.tenant);
                }
                true
            }
            None => {
                // Cannot happen (checked under the same lock); put it back
                // rather than lose it.
                let weight = w.tenant.weight();
                self.queue.push(lane, weight, high, light, w);
                false
            }
        }
    }

    /// A backend counted for `user` closed: one owned backend less.
    fn shrink_of(&mut self, user: Option<u32>) {
        self.holdings.disown(user);
        self.shrink();
    }

    /// Counts one owned backend less; borrowed room goes back first.
    fn shrink(&mut self) {
        self.owned = self.owned.saturating_sub(1);
        if let Some((b, g)) = self.budget.as_ref()
            && self.owned < self.limits.max_owned + b.borrowed(*g)
        {
            b.give_back(*g);
        }
    }

    /// True when a backend coming back should be closed at once and its
    /// room given back to the common pool: it is borrowed, and another
    /// group is owed its part or the pool shrank. Borrowed backends that
    /// merely stopped helping go back by [`Self::give_back_surplus`], a
    /// window later: closing them on return made the pool open and close
    /// dozens of backends a second while the limit moved (each new one a
    /// login, its session setup and a prepare of every statement it runs,
    /// all server CPU: measured 1,959 backend logins in 30 s, I/O-bound,
    /// 256 clients).
    fn give_back_on_return(&self) -> bool {
        let Some((b, g)) = self.budget.as_ref() else {
            return false;
        };
        if b.borrowed(*g) == 0 || self.owned <= self.limits.max_owned {
            return false;
        }
        b.should_give_back(*g)
    }

    /// Closes the borrowed backends that stayed idle through a whole
    /// window (the fewest idle seen in it: a low-water mark, so a burst
    /// that used them all keeps them) and starts the next window.
    fn give_back_surplus(&mut self, t: Duration) {
        // Judge the last give-back by what followed it: borrowing again
        // within a few windows means it was wrong (the window doubles), a
        // calm stretch that it was right (the window halves).
        if let Some((at, mark)) = self.gave_back {
            if self.counters.borrowed > mark {
                self.give_back_window = (self.give_back_window * 2).min(GIVE_BACK_WINDOW_MAX);
                self.gave_back = None;
            } else if t.saturating_sub(at) >= GIVE_BACK_JUDGED_AFTER * self.give_back_window {
                self.give_back_window = (self.give_back_window / 2).max(GIVE_BACK_WINDOW);
                self.gave_back = None;
            }
        }
        if t.saturating_sub(self.idle_window) < self.give_back_window {
            return;
        }
        let borrowed = self.borrowed();
        let above_base = self.owned.saturating_sub(self.limits.max_owned);
        let surplus = self.idle_low.min(borrowed).min(above_base);
        // The bottom of the LIFO stack: the longest idle.
        let n = surplus.min(self.idle.len());
        for b in self.idle.drain(..n).collect::<Vec<_>>() {
            self.shrink_of(b.share_user());
        }
        self.counters.given_back += n as u64;
        if n > 0 && self.gave_back.is_none() {
            self.gave_back = Some((t, self.counters.borrowed));
        }
        self.idle_window = t;
        self.idle_low = self.idle.len();
    }

    /// Idle connections that no session parked (usable as they are).
    pub fn clean_idle(&self) -> usize {
        self.idle
            .iter()
            .filter(|b| b.parked_for().is_none())
            .count()
    }

    /// Current view.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            in_flight: self.in_flight,
            cap: self.cap(),
            adaptive: self.adaptive.as_ref().map(|a| a.estimate()),
            extra: self.extra,
            high: self.queue.len_high(),
            low: self.queue.len_low(),
            internal: self.internal.len(),
            idle: self.idle.len(),
            owned: self.owned,
            max_owned: self.limits.max_owned,
            elastic: self.borrowed(),
            ceiling: self.ceiling(),
            give_back_window: self.give_back_window,
            counters: self.counters,
        }
    }

    fn cap(&self) -> usize {
        self.adaptive
            .as_ref()
            .map_or(self.limits.cap, |a| a.limit())
    }

    fn limit(&self) -> usize {
        self.cap() + self.extra
    }

    /// Statements counting against the limit: all of them with the fixed
    /// cap; with the adaptive limit, those not stalled.
    fn busy(&self) -> usize {
        self.adaptive.as_ref().map_or(self.in_flight, |a| a.busy())
    }

    fn has_room(&self) -> bool {
        self.busy() < self.limit()
    }

    fn clock(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.origin)
    }

    /// Tells the adaptive controller whether work waits on the limit now,
    /// and the elastic budget whether this group wants to borrow.
    fn observe(&mut self) {
        let waiting = !self.queue.is_empty();
        let room = self.has_room();
        if let Some(a) = self.adaptive.as_mut() {
            // Demand reached the limit: statements wait for it, or every
            // place under it is taken (a limit at or above the demand
            // teaches nothing unless probing below it may help).
            a.gate((waiting || self.in_flight > 0) && !room);
        }
        self.claim();
    }

    /// Tells the elastic budget whether this group wants to borrow now.
    fn claim(&self) {
        let waiting = !self.queue.is_empty();
        let room = self.has_room();
        if let Some((b, g)) = self.budget.as_ref() {
            // Wants: a lease could run under the limit but no backend can be
            // had (cheap tests first; the queue scan only when it is full).
            let wants = waiting
                && room
                && self.adaptive.is_some()
                && self.idle.is_empty()
                && !self.can_grow()
                && self.queue.any_heavy(|w| w.tenant.may_lease());
            b.want(*g, wants);
        }
    }

    /// What leases could get now ([`LeaseView`]); `asker`: a user asking
    /// now that is not queued (it counts among the active users).
    fn lease_view(&self, asker: Option<&Tenant>) -> LeaseView {
        self.lease_view_with(self.can_grow(), asker, false)
    }

    /// What the proxy's own leases could get: any idle backend.
    fn internal_lease_view(&self) -> LeaseView {
        self.lease_view_with(self.can_grow(), None, true)
    }

    fn lease_view_with(&self, grow: bool, asker: Option<&Tenant>, permissive: bool) -> LeaseView {
        let mut v = LeaseView {
            grow,
            any_idle: !self.idle.is_empty(),
            permissive,
            ..LeaseView::default()
        };
        if grow || permissive || self.idle.is_empty() {
            return v;
        }
        for b in &self.idle {
            if !v.pools.contains(&b.pool()) {
                v.pools.push(b.pool());
            }
            if !v.owners.contains(&b.share_user()) {
                v.owners.push(b.share_user());
            }
        }
        v.protected = self.protection(asker);
        v
    }

    /// Which idle backends other users' leases may close now
    /// ([`super::shares`]).
    fn protection(&self, asker: Option<&Tenant>) -> Protected {
        let (queue, running) = (&self.queue, &self.running);
        self.holdings.protection(
            Instant::now(),
            self.owned,
            queue.lanes().max(running.users()),
            |u| running.of(u) > 0 || queue.lane_queued(u),
            |u| queue.lane_weight(u),
            asker.map(|t| (t.index, t.weight())),
        )
    }

    /// The weights of the users running or queued here summed, `asker`
    /// (asking now, not queued) among them.
    fn active_weight(&self, asker: Option<&Tenant>) -> u64 {
        let q = &self.queue;
        let a = asker.map(|t| t.index);
        let users = q.lanes().max(a.map_or(0, |a| a + 1));
        self.running.active_weight(
            users,
            |u| q.lane_queued(u) || Some(u) == a,
            |u| match asker {
                Some(t) if t.index == u => t.weight(),
                _ => q.lane_weight(u),
            },
        )
    }

    /// True when `tenant` (asking now) is owed a place past the reached
    /// limit ([`super::shares::Running::owed`]).
    fn share_owed(&self, tenant: &Tenant) -> bool {
        let total = self.active_weight(Some(tenant));
        self.running
            .owed(tenant.index, tenant.weight(), self.limit(), total)
    }

    /// True when `need` of `tenant` could be granted now (ignoring the
    /// in-flight cap), given what leases could get ([`LeaseView`]).
    /// True when another user's runnable request waits and is owed its
    /// share before `tenant`'s next grant (a request that cannot run, such
    /// as a lease of a user at its cap, is owed nothing now).
    fn owed_by(&self, tenant: &Tenant) -> bool {
        if self.queue.is_empty() {
            // The common case, a transaction's statement with nothing queued.
            return false;
        }
        // What leases could get is looked at only if a lease is next.
        let view = std::cell::OnceCell::new();
        let view = || view.get_or_init(|| self.lease_view(None));
        self.queue.owes_others(tenant.index, |w| {
            Self::runnable_lazy(w.need, &w.tenant, &view)
        })
    }

    fn runnable(need: Need, tenant: &Tenant, view: &LeaseView) -> bool {
        Self::runnable_lazy(need, tenant, &|| view)
    }

    /// [`Self::runnable`] for `tenant` asking now (not queued).
    fn runnable_now(&self, need: Need, tenant: &Tenant) -> bool {
        let cell = std::cell::OnceCell::new();
        Self::runnable_lazy(need, tenant, &|| {
            cell.get_or_init(|| self.lease_view(Some(tenant)))
        })
    }

    /// [`Self::runnable`] with the view built only for a lease.
    fn runnable_lazy<'v>(need: Need, tenant: &Tenant, view: &impl Fn() -> &'v LeaseView) -> bool {
        match need {
            Need::Slot | Need::Continue => true,
            Need::Lease { pool, .. } => tenant.may_lease() && view().ok(pool, tenant.index),
        }
    }

    /// Takes what a lease needs; evicts an idle connection of another pool
    /// when the group is full. `None` when the common pool ran out since
    /// [`Self::runnable`] looked (another group borrowed the last room).
    /// `tenant`: whose lease it is (the backend counts in its share, unless
    /// it is the proxy's own); an overdue or internal `turn` may close any
    /// idle backend.
    fn take(&mut self, need: Need, tenant: &Tenant, turn: Turn) -> Option<Grant<B>> {
        let overdue = turn == Turn::Overdue;
        let user = (turn != Turn::Internal).then_some(tenant.index);
        match need {
            Need::Slot | Need::Continue => Some(Grant::Slot),
            Need::Lease { pool, parked } => {
                let pick = self.pick_idle(pool, parked);
                let anothers = pick.is_some_and(|i| {
                    let t = self.idle[i].parked_for();
                    t.is_some() && t != parked
                });
                // Only another session's parked connection is idle: a new
                // one within the share first (that session may come back
                // for it; cleaning it costs the taker round trips).
                if anothers && self.owned < self.limits.max_owned + self.borrowed() {
                    self.owned += 1;
                    self.holdings.own(user);
                    return Some(Grant::Open);
                }
                if let Some(i) = pick {
                    let mut b = self.idle.remove(i);
                    self.idle_low = self.idle_low.min(self.idle.len());
                    match b.parked_for() {
                        Some(t) if Some(t) == parked => self.counters.reclaimed += 1,
                        Some(_) => self.counters.unparked += 1,
                        None => {}
                    }
                    if let Some(u) = user
                        && b.share_user() != user
                    {
                        // One the pool opened for itself (or, on a pool two
                        // users share, the other's): it counts for the taker.
                        self.holdings.disown(b.share_user());
                        self.holdings.own(user);
                        b.set_share_user(u);
                    }
                    return Some(Grant::Backend(b));
                }
                if self.grow() || (overdue && self.borrow_overdue()) {
                    self.holdings.own(user);
                    return Some(Grant::Open);
                }
                // Full, and only other pools' connections are idle: close the
                // least recently used one this user may close (another active
                // user's within its share is not, see `super::shares`) and
                // open ours in its place.
                let victim = if user.is_none() || overdue {
                    (!self.idle.is_empty()).then_some(0)
                } else {
                    let protected = self.protection(Some(tenant));
                    self.idle
                        .iter()
                        .position(|b| protected.may_close(b.share_user(), tenant.index))
                };
                let b = self.idle.remove(victim?);
                self.idle_low = self.idle_low.min(self.idle.len());
                self.counters.evictions += 1;
                self.holdings.disown(b.share_user());
                self.holdings.own(user);
                Some(Grant::Open)
            }
        }
    }

    /// The idle connection of credential pool `pool` a lease takes: the one
    /// the session parked (`parked`), else the most recently used clean
    /// one, else the most recently used parked one of another session
    /// (taken when the share has no room for a new one: cleaning it costs
    /// round trips, less than a dial).
    fn pick_idle(&self, pool: usize, parked: Option<u64>) -> Option<usize> {
        let (mut clean, mut dirty) = (None, None);
        for (i, b) in self.idle.iter().enumerate().rev() {
            if b.pool() != pool {
                continue;
            }
            match b.parked_for() {
                Some(t) if Some(t) == parked => return Some(i),
                Some(_) => {
                    dirty.get_or_insert(i);
                }
                None if clean.is_none() => {
                    clean = Some(i);
                    if parked.is_none() {
                        break;
                    }
                }
                None => {}
            }
        }
        clean.or(dirty)
    }

    fn admit(&mut self, need: Need, id: u64, tenant: &Tenant, now: Instant) -> Option<Grant<B>> {
        self.admit_as(need, id, tenant, now, Turn::Ordered)
    }

    fn admit_as(
        &mut self,
        need: Need,
        id: u64,
        tenant: &Tenant,
        now: Instant,
        turn: Turn,
    ) -> Option<Grant<B>> {
        let lease = matches!(need, Need::Lease { .. });
        if lease && !tenant.try_lease() {
            return None;
        }
        let Some(grant) = self.take(need, tenant, turn) else {
            if lease {
                tenant.release_lease();
            }
            return None;
        };
        tenant.dispatched();
        if turn != Turn::Internal {
            self.running
                .start(id, tenant.index, turn == Turn::TakenBack);
            self.holdings.touch(tenant.index, now);
        }
        if turn == Turn::TakenBack {
            self.counters.share_reclaims += 1;
        }
        let t = self.clock(now);
        if let Some(a) = self.adaptive.as_mut() {
            a.start(id, t);
        }
        self.in_flight += 1;
        if turn.is_progress() {
            self.dispatched_since_tick += 1;
        }
        self.counters.dispatched += 1;
        Some(grant)
    }

    /// Asks for `need` at `prio` for a request without a user (one lane
    /// for all of them). See [`Self::request_for`].
    pub fn request(&mut self, need: Need, prio: Priority, now: Instant) -> Admission<B> {
        let anyone = self.anyone.clone();
        self.request_for(need, prio, &anyone, now)
    }

    /// Asks for `need` at `prio` for `tenant`. Granted at once when the
    /// queues hold nothing runnable ahead of it and there is room; else
    /// queued in the tenant's lane.
    pub fn request_for(
        &mut self,
        need: Need,
        prio: Priority,
        tenant: &Arc<Tenant>,
        now: Instant,
    ) -> Admission<B> {
        self.request_until(need, prio, tenant, now, None)
    }

    /// [`Self::request_for`] by a waiter that gives up at `deadline` (its
    /// queue timeout): once it has waited half of that it is admitted past
    /// the in-flight limit ([`Self::admit_overdue`]).
    pub fn request_until(
        &mut self,
        need: Need,
        prio: Priority,
        tenant: &Arc<Tenant>,
        now: Instant,
        deadline: Option<Instant>,
    ) -> Admission<B> {
        let id = self.next_id;
        self.next_id += 1;
        // A transaction in progress looks at neither the queues nor the
        // limit (admitting a slot cannot fail) — unless another user waits
        // and is owed its share: then it queues first in its user's lane.
        if need == Need::Continue
            && !self.owed_by(tenant)
            && let Some(grant) = self.admit(need, id, tenant, now)
        {
            self.queue.charge(tenant.index, tenant.weight());
            self.observe();
            return Admission::Now(grant, id);
        }
        if prio == Priority::Internal {
            let view = self.internal_lease_view();
            return self.request_internal(need, id, tenant, now, &view);
        }
        let high = prio == Priority::High;
        let ahead = {
            // What leases could get is looked at only if a lease waits.
            let cell = std::cell::OnceCell::new();
            let view = || cell.get_or_init(|| self.lease_view(None));
            let run = |w: &Waiter<B>| Self::runnable_lazy(w.need, &w.tenant, &view);
            // In steps of lanes, not of waiters: with thousands of clients
            // queued for a backend, a scan per request was the scheduler's
            // cost.
            self.queue.any_runnable(run)
        };
        if !ahead
            && self.has_room()
            && self.runnable_now(need, tenant)
            && let Some(grant) = self.admit(need, id, tenant, now)
        {
            self.queue.charge(tenant.index, tenant.weight());
            self.observe();
            return Admission::Now(grant, id);
        }
        // No room, but this user runs less than its share of the limit
        // while others run on the part it lent: it takes it back now.
        if !self.has_room()
            && !self.queue.lane_queued(tenant.index)
            && self.share_owed(tenant)
            && self.runnable_now(need, tenant)
            && let Some(grant) = self.admit_as(need, id, tenant, now, Turn::TakenBack)
        {
            self.queue.charge(tenant.index, tenant.weight());
            self.observe();
            return Admission::Now(grant, id);
        }
        let (tx, rx) = oneshot::channel();
        let w = Waiter {
            id,
            need,
            since: now,
            overdue_at: deadline.map(|d| now + d.saturating_duration_since(now) / 2),
            tenant: tenant.clone(),
            tx,
        };
        let light = matches!(need, Need::Slot | Need::Continue);
        let (lane, weight) = (tenant.index, tenant.weight());
        self.queue.push(lane, weight, high, light, w);
        if ahead && self.has_room() {
            // Runnable requests were queued ahead with room free (one that
            // `admit` could not take): let the share decide the order now.
            self.dispatch(now);
        }
        self.observe();
        Admission::Queued(id, rx)
    }

    /// [`Self::request_until`] at [`Priority::Internal`]: granted now when
    /// no other internal request waits and what it needs can be had
    /// (whatever the limit and the queues), else queued first come first
    /// served.
    fn request_internal(
        &mut self,
        need: Need,
        id: u64,
        tenant: &Arc<Tenant>,
        now: Instant,
        view: &LeaseView,
    ) -> Admission<B> {
        if self.internal.is_empty()
            && Self::runnable(need, tenant, view)
            && let Some(grant) = self.admit_as(need, id, tenant, now, Turn::Internal)
        {
            self.observe();
            return Admission::Now(grant, id);
        }
        let (tx, rx) = oneshot::channel();
        self.internal.push_back(Waiter {
            id,
            need,
            since: now,
            overdue_at: None,
            tenant: tenant.clone(),
            tx,
        });
        Admission::Queued(id, rx)
    }

    /// Grants queued requests while there is room: users by weighted fair
    /// share, and inside a user its high-priority requests first. Call after
    /// anything that frees a slot or a backend.
    pub fn dispatch(&mut self, now: Instant) {
        self.dispatch_internal(now);
        while self.has_room() {
            let view = self.lease_view(None);
            let run = |w: &Waiter<B>| Self::runnable(w.need, &w.tenant, &view);
            let Some((lane, pos)) = self.queue.select(run) else {
                break;
            };
            if !self.grant_queued(lane, pos, now, Turn::Ordered) {
                break;
            }
        }
        self.dispatch_reclaims(now);
    }

    /// Grants the queued request at `pos` of `lane` in `turn`. False when
    /// it could not be admitted (it stays queued).
    fn grant_queued(&mut self, lane: u32, pos: Pos, now: Instant, turn: Turn) -> bool {
        let Some((need, id, tenant)) = self
            .queue
            .get(lane, pos)
            .map(|w| (w.need, w.id, w.tenant.clone()))
        else {
            return false;
        };
        let Some(grant) = self.admit_as(need, id, &tenant, now, turn) else {
            return false;
        };
        let Some(w) = self.queue.take(lane, pos) else {
            return false;
        };
        if let Err(grant) = w.tx.send(grant) {
            // The waiter went away between queueing and now.
            self.undo_for(w.id, grant, &w.tenant);
        }
        true
    }

    /// With the limit reached, grants the queued requests of users owed
    /// their share of it ([`Self::share_owed`]), in the share's order.
    fn dispatch_reclaims(&mut self, now: Instant) {
        while !self.has_room() && !self.queue.is_empty() {
            // Every queued user is active: one sum serves every lane.
            let (total, limit) = (self.active_weight(None), self.limit());
            let owed = |lane: u32, weight: u32| self.running.owed(lane, weight, limit, total);
            // What leases could get is looked at only for an owed user.
            let cell = std::cell::OnceCell::new();
            let view = || cell.get_or_init(|| self.lease_view(None));
            let run = |w: &Waiter<B>| Self::runnable_lazy(w.need, &w.tenant, &view);
            let Some((lane, pos)) = self.queue.select_among(owed, run) else {
                break;
            };
            if !self.grant_queued(lane, pos, now, Turn::TakenBack) {
                break;
            }
        }
    }

    /// Grants [`Priority::Internal`] requests, in order, while what they
    /// need can be had: past the in-flight limit and ahead of the queues.
    fn dispatch_internal(&mut self, now: Instant) {
        while let Some(w) = self.internal.pop_front() {
            let view = self.internal_lease_view();
            let grant = if Self::runnable(w.need, &w.tenant, &view) {
                self.admit_as(w.need, w.id, &w.tenant, now, Turn::Internal)
            } else {
                None
            };
            let Some(grant) = grant else {
                self.internal.push_front(w);
                return;
            };
            if let Err(grant) = w.tx.send(grant) {
                self.undo_for(w.id, grant, &w.tenant);
            }
        }
    }

    /// Returns what grant `id` held (a waiter that vanished, or a cancelled
    /// one) for a request made without a user.
    pub fn undo(&mut self, id: u64, grant: Grant<B>) {
        let anyone = self.anyone.clone();
        self.undo_for(id, grant, &anyone);
    }

    /// Returns what grant `id` of `tenant` held: the slot, the backend, and
    /// the user's count of leased backends.
    pub fn undo_for(&mut self, id: u64, grant: Grant<B>, tenant: &Tenant) {
        if let Some(a) = self.adaptive.as_mut() {
            a.forget(id);
        }
        self.running.end(id);
        self.in_flight -= 1;
        match grant {
            Grant::Slot => {}
            Grant::Backend(b) => {
                tenant.release_lease();
                self.put_idle(b);
            }
            Grant::Open => {
                tenant.release_lease();
                self.shrink_of(Some(tenant.index));
            }
        }
    }

    /// Removes a queued waiter (it timed out or its client left). Returns
    /// false when it was no longer queued (it has been granted).
    pub fn cancel(&mut self, id: u64) -> bool {
        if let Some(i) = self.internal.iter().position(|w| w.id == id) {
            self.internal.remove(i);
            return true;
        }
        self.queue.remove_where(|w| w.id == id).is_some()
    }

    /// True when a queued lease waits only because its user holds its
    /// backend cap (another group's return may let it run).
    pub fn capped_waiting(&self) -> bool {
        self.queue
            .iter()
            .any(|w| matches!(w.need, Need::Lease { .. }) && !w.tenant.may_lease())
    }

    /// Grant `id` ends without a latency sample (a pool-internal use, not a
    /// client's statement: its timing would teach the adaptive limit a
    /// latency no client sees).
    pub fn complete_unmeasured(&mut self, id: u64, now: Instant) {
        if let Some(a) = self.adaptive.as_mut() {
            a.forget(id);
        }
        if let Some(u) = self.running.end(id) {
            self.holdings.touch(u, now);
        }
        self.end(None, now);
    }

    /// Statement `id` finished; `backend` goes back idle unless the session
    /// keeps it.
    pub fn complete(&mut self, id: u64, backend: Option<B>, now: Instant) {
        let t = self.clock(now);
        if let Some(a) = self.adaptive.as_mut() {
            a.finish(id, t);
        }
        if let Some(u) = self.running.end(id) {
            self.holdings.touch(u, now);
        }
        self.end(backend, now);
    }

    /// A grant ended (its adaptive sample already taken or forgotten): the
    /// slot frees, `backend` goes back idle, waiters may run.
    fn end(&mut self, backend: Option<B>, now: Instant) {
        self.in_flight = self.in_flight.saturating_sub(1);
        if let Some(b) = backend {
            self.put_idle(b);
        }
        self.dispatch(now);
        self.observe();
    }

    /// True once the group retired ([`Self::retire`]).
    pub fn retiring(&self) -> bool {
        self.retiring
    }

    /// From now on connections coming back are closed, and the idle ones
    /// close now (the process hands over; see `retiring`); returns how
    /// many closed.
    pub fn retire(&mut self, now: Instant) -> usize {
        self.retiring = true;
        let idle = std::mem::take(&mut self.idle);
        let n = idle.len();
        for b in idle {
            let user = b.share_user();
            drop(b);
            self.counters.closed += 1;
            self.shrink_of(user);
        }
        self.idle_low = 0;
        self.dispatch(now);
        n
    }

    /// A pinned session returns its backend outside a statement.
    pub fn return_idle(&mut self, backend: B, now: Instant) {
        self.put_idle(backend);
        self.dispatch(now);
    }

    /// A connection borrowed for a health check comes back: at the bottom
    /// of the idle stack (it was taken as the least recently used), closed
    /// only when the group must shrink anyway; a waiter may take it.
    pub fn return_checked(&mut self, backend: B, now: Instant) {
        if self.retiring || self.over() {
            self.put_idle(backend);
        } else {
            self.idle.insert(0, backend);
        }
        self.dispatch(now);
    }

    /// A connection comes back: idle, or closed (dropped) when the group
    /// owns more than its share (the share shrank on a reload) or it was
    /// borrowed and is no longer useful here.
    fn put_idle(&mut self, backend: B) {
        let user = backend.share_user();
        if self.retiring {
            self.shrink_of(user);
            self.counters.closed += 1;
            drop(backend);
        } else if self.over() {
            self.shrink_of(user);
            self.counters.closed_over_share += 1;
            drop(backend);
        } else if self.give_back_on_return() {
            self.shrink_of(user);
            self.counters.given_back += 1;
            drop(backend);
        } else {
            self.idle.push(backend);
        }
    }

    /// A dead connection was closed (`Leased::replace`): true when its room
    /// passes on to the opening of its replacement, still owned, no waiter
    /// offered it in between. A room the group must give up (its share
    /// shrank, or it is borrowed and owed to the common pool) is given up,
    /// and the replacement gets room only as any new connection would.
    /// `old`: whose share the closed connection counted in; `new`: whose
    /// its replacement counts in.
    pub fn replace_room(&mut self, old: Option<u32>, new: Option<u32>) -> bool {
        self.counters.closed += 1;
        if !self.over() && !self.give_back_on_return() {
            self.holdings.disown(old);
            self.holdings.own(new);
            return true;
        }
        self.shrink_of(old);
        let room = self.grow();
        if room {
            self.holdings.own(new);
        }
        room
    }

    /// A backend connection owned by this group, counted in `user`'s share,
    /// was closed (or failed to open).
    pub fn closed(&mut self, user: Option<u32>, now: Instant) {
        self.counters.closed += 1;
        self.shrink_of(user);
        self.dispatch(now);
    }

    /// The adaptive limit's timer (a few tens of ms): statements that ran
    /// too long stop counting as busy, a measuring interval may close and
    /// move the limit. No-op with the fixed cap.
    /// Also follows the elastic ceiling (the limit's upper bound) and
    /// retries waiters when the common pool may have room again.
    pub fn adapt(&mut self, now: Instant) {
        let t = self.clock(now);
        self.give_back_surplus(t);
        let ceiling = self.limit_ceiling();
        let (base, stall_cap) = (self.limits.max_owned, self.limits.stall_cap);
        let verdict = self
            .budget
            .as_ref()
            .map_or(Verdict::Unknown, |(b, _)| b.server_waits());
        let disk_waits = self.budget.as_ref().is_some_and(|(b, _)| b.disk_waits());
        // The server began to wait after it said nothing waits (the limit
        // was held at the base): search upwards from here. Not when the
        // verdict merely became known, unknown or busy, nor when a ceiling
        // was learnt or restored: the search was never held back then.
        let began_waiting = verdict == Verdict::Waits && self.verdict == Verdict::None;
        // It stopped waiting (known, not a failing probe).
        let ended_waiting =
            self.verdict == Verdict::Waits && matches!(verdict, Verdict::None | Verdict::Busy);
        self.verdict = verdict;
        let room = self.adaptive.as_mut().is_some_and(|a| {
            if a.max() != ceiling {
                a.set_bounds(ceiling, base, stall_cap);
            }
            if began_waiting {
                a.restart();
            }
            if ended_waiting {
                a.waits_ended();
            }
            let opened = a.set_disk_waits(disk_waits);
            a.tick(t) || opened
        });
        let waiting = !self.queue.is_empty();
        if room || (waiting && (self.budget.is_some() || self.capped_waiting())) {
            self.dispatch(now);
        }
        self.claim();
    }

    /// Counts a connection opened outside a grant (pre-warming, helper
    /// connections): within the base, or borrowed.
    pub fn try_reserve_open(&mut self) -> bool {
        self.grow()
    }

    /// Takes idle connections matching `pred` out of the group (for
    /// closing or health checks); they stay counted as owned.
    pub fn take_idle_where(&mut self, mut pred: impl FnMut(&B) -> bool) -> Vec<B> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < self.idle.len() {
            if pred(&self.idle[i]) {
                out.push(self.idle.remove(i));
                self.idle_low = self.idle_low.min(self.idle.len());
            } else {
                i += 1;
            }
        }
        out
    }

    /// Timer tick: kick up old low-priority requests, detect a stall.
    pub fn tick(&mut self, now: Instant) {
        let kickup = self.limits.kickup;
        while self
            .queue
            .kick_up_oldest_if(|w| w.since, |w| now.duration_since(w.since) >= kickup)
        {
            self.counters.kickups += 1;
        }
        let waiting = !self.queue.is_empty();
        let stalled = waiting && self.dispatched_since_tick == 0 && !self.has_room();
        if stalled {
            // Nothing moved for a whole period while work waits: the running
            // statements may be waiting on a queued one (a lock holder's
            // COMMIT). Allow one more.
            self.extra = (self.extra + 1).min(self.limits.max_owned.max(1));
            self.counters.stalls += 1;
        } else if self.dispatched_since_tick > 0 || !waiting {
            self.extra = 0;
        }
        self.dispatched_since_tick = 0;
        if stalled {
            self.grant_oldest_high(now);
        }
        self.dispatch(now);
        self.admit_overdue(now);
    }

    /// A stall tick's extra slot goes to the oldest runnable high-priority
    /// request, whoever's share it is: the running statements may be
    /// waiting on it (a lock holder's next statement), and the fair order
    /// could give the slot to one more statement that waits on the same
    /// lock. Charged to its user as any grant.
    fn grant_oldest_high(&mut self, now: Instant) {
        // Places taken back past the limit do not use up the stall's slot.
        if self.busy().saturating_sub(self.running.taken_back()) >= self.limit() {
            return;
        }
        let view = self.lease_view(None);
        self.grant_oldest(true, now, Turn::Ordered, move |w| {
            Self::runnable(w.need, &w.tenant, &view)
        });
    }

    /// Age of the oldest queued request.
    pub fn oldest_wait(&self, now: Instant) -> Option<Duration> {
        self.queue.iter().map(|w| now.duration_since(w.since)).max()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Eq)]
    struct Conn(usize, u32);
    impl Pooled for Conn {
        fn pool(&self) -> usize {
            self.0
        }
        fn parked_for(&self) -> Option<u64> {
            None
        }
    }

    fn group(cap: usize, max_owned: usize) -> GroupState<Conn> {
        GroupState::new(Limits {
            cap,
            adaptive: false,
            stall_cap: Duration::from_millis(500),
            max_owned,
            kickup: Duration::from_millis(1000),
        })
    }

    #[test]
    fn shrinking_the_share_closes_idle_now_and_busy_on_return() {
        let t = Instant::now();
        let mut g = group(4, 4);
        let lease = Need::Lease {
            pool: 0,
            parked: None,
        };
        let mut ids = Vec::new();
        for _ in 0..3 {
            match g.request(lease, Priority::High, t) {
                Admission::Now(Grant::Open, id) => ids.push(id),
                _ => panic!("expected an immediate open"),
            }
        }
        // Two come back idle, one stays busy.
        g.complete(ids[0], Some(Conn(0, 1)), t);
        g.complete(ids[1], Some(Conn(0, 2)), t);
        assert_eq!((g.snapshot().owned, g.snapshot().idle), (3, 2));
        let shrunk = |max_owned| Limits {
            cap: 4,
            adaptive: false,
            stall_cap: Duration::from_millis(500),
            max_owned,
            kickup: Duration::from_millis(1000),
        };
        g.set_limits(shrunk(1), t);
        assert_eq!((g.snapshot().owned, g.snapshot().idle), (1, 0));
        // The busy one is within the share: it stays.
        g.complete(ids[2], Some(Conn(0, 3)), t);
        assert_eq!((g.snapshot().owned, g.snapshot().idle), (1, 1));
        g.set_limits(shrunk(0), t);
        assert_eq!(g.snapshot().owned, 0);
    }

    #[tokio::test]
    async fn a_waiter_half_way_to_its_queue_timeout_is_admitted_past_the_limit() {
        let mut g = group(1, 2);
        let t = Instant::now();
        let timeout = Duration::from_secs(10);
        let lease = |g: &mut GroupState<Conn>, at: Instant| {
            g.request_until(
                LEASE,
                Priority::Low,
                &g.anyone.clone(),
                at,
                Some(at + timeout),
            )
        };
        assert!(matches!(now_grant(lease(&mut g, t)), Grant::Open));
        let (_, mut second) = queued(lease(&mut g, t));
        g.dispatched_since_tick = 1; // not a stall (tested apart)
        g.tick(t + Duration::from_millis(4_900));
        assert!(second.try_recv().is_err(), "not yet half way");
        g.dispatched_since_tick = 1; // not a stall (tested apart)
        g.tick(t + Duration::from_secs(5));
        assert!(
            matches!(second.try_recv(), Ok(Grant::Open)),
            "half way: admitted past the limit, a backend opened within the share"
        );
        let s = g.snapshot();
        assert_eq!(
            (s.in_flight, s.cap, s.owned, s.counters.overdue),
            (2, 1, 2, 1)
        );
        // The share is full and nothing is idle: a third waits for its
        // queue timeout as before (the budget, not the limit, holds it).
        let t3 = t + Duration::from_secs(6);
        let (_, mut third) = queued(lease(&mut g, t3));
        g.dispatched_since_tick = 1; // not a stall (tested apart)
        g.tick(t3 + Duration::from_secs(7));
        assert!(third.try_recv().is_err(), "no backend to be had");
        // A backend comes back: the limit is still full (two running for
        // one place), but the overdue third takes it at the next tick.
        g.complete(0, Some(Conn(0, 1)), t + Duration::from_secs(31));
        assert!(third.try_recv().is_err());
        g.dispatched_since_tick = 1; // not a stall (tested apart)
        g.tick(t + Duration::from_secs(31));
        assert!(matches!(third.try_recv(), Ok(Grant::Backend(Conn(0, 1)))));
        assert_eq!(g.snapshot().counters.overdue, 2);
    }

    #[tokio::test]
    async fn a_request_without_a_deadline_is_never_overdue() {
        let mut g = group(1, 2);
        let t = Instant::now();
        assert!(matches!(
            now_grant(g.request(LEASE, Priority::Low, t)),
            Grant::Open
        ));
        let (_, mut patient) = queued(g.request(LEASE, Priority::Low, t));
        g.dispatched_since_tick = 1; // not a stall (tested apart)
        g.tick(t + Duration::from_secs(60));
        assert!(patient.try_recv().is_err());
        assert_eq!(g.snapshot().counters.overdue, 0);
    }

    #[tokio::test]
    async fn an_overdue_lease_borrows_from_the_common_pool() {
        use super::super::elastic::Source;
        let budget = Arc::new(Budget::new(2, 4, Source::Default));
        budget.set(12, 4, Source::Server); // common pool 8
        let mut a = elastic_group(&budget, 0);
        let t = Instant::now();
        let deadline = Some(t + Duration::from_secs(10));
        let anyone = a.anyone.clone();
        for _ in 0..2 {
            assert!(matches!(
                now_grant(a.request_until(LEASE, Priority::Low, &anyone, t, deadline)),
                Grant::Open
            ));
        }
        let (_, mut third) = queued(a.request_until(LEASE, Priority::Low, &anyone, t, deadline));
        // Nothing stalls (no adaptive tick): the group does not "wait", so
        // it would not borrow; half way to the timeout it does.
        a.dispatched_since_tick = 1;
        a.tick(t + Duration::from_secs(4));
        assert!(third.try_recv().is_err());
        a.dispatched_since_tick = 1;
        a.tick(t + Duration::from_secs(5));
        assert!(matches!(third.try_recv(), Ok(Grant::Open)));
        let s = a.snapshot();
        assert_eq!((s.owned, s.elastic, s.counters.overdue), (3, 1, 1));
    }

    fn now_grant(a: Admission<Conn>) -> Grant<Conn> {
        match a {
            Admission::Now(g, _) => g,
            Admission::Queued(..) => panic!("expected an immediate grant"),
        }
    }

    fn queued(a: Admission<Conn>) -> (u64, oneshot::Receiver<Grant<Conn>>) {
        match a {
            Admission::Queued(id, rx) => (id, rx),
            Admission::Now(..) => panic!("expected to queue"),
        }
    }

    const LEASE: Need = Need::Lease {
        pool: 0,
        parked: None,
    };

    #[tokio::test(start_paused = true)]
    async fn a_transaction_in_progress_continues_past_a_full_limit() {
        let mut g = group(1, 3);
        let t = Instant::now();
        assert!(matches!(
            now_grant(g.request(LEASE, Priority::Low, t)),
            Grant::Open
        ));
        // The limit is full: a pinned session's statement waits for a slot,
        // and a new transaction for a slot and a backend.
        let (slot_id, mut slot_rx) = queued(g.request(Need::Slot, Priority::High, t));
        let (_, mut lease_rx) = queued(g.request(LEASE, Priority::Low, t));
        // A transaction in progress runs at once, counted in flight, ahead
        // of both.
        let (grant, cont_id) = match g.request(Need::Continue, Priority::High, t) {
            Admission::Now(grant, id) => (grant, id),
            Admission::Queued(..) => panic!("a transaction in progress was queued"),
        };
        assert!(matches!(grant, Grant::Slot));
        assert_eq!(g.snapshot().in_flight, 2);
        assert_eq!((g.snapshot().high, g.snapshot().low), (1, 1));
        // It holds room like any statement: one completion is not enough.
        g.complete(0, None, Instant::now());
        assert!(slot_rx.try_recv().is_err(), "granted over the limit");
        g.complete(cont_id, None, Instant::now());
        assert!(matches!(slot_rx.try_recv(), Ok(Grant::Slot)));
        g.complete(slot_id, None, Instant::now());
        assert!(matches!(lease_rx.try_recv(), Ok(Grant::Open)));
    }

    #[test]
    fn a_replaced_connection_keeps_its_room_unless_the_share_shrank() {
        let mut g = group(2, 2);
        assert!(g.try_reserve_open() && g.try_reserve_open());
        assert!(
            g.replace_room(None, None),
            "within the share: the room passes on"
        );
        let s = g.snapshot();
        assert_eq!((s.owned, s.counters.closed), (2, 1));
        // A reload shrank the share to one: the dead one's room is given up.
        let mut limits = g.limits;
        limits.max_owned = 1;
        g.set_limits(limits, Instant::now());
        assert!(
            !g.replace_room(None, None),
            "over the share: no room for a replacement"
        );
        let s = g.snapshot();
        assert_eq!((s.owned, s.counters.closed), (1, 2));
        // Back within the share, a replacement keeps its room again.
        assert!(g.replace_room(None, None));
        assert_eq!(g.snapshot().owned, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn an_internal_request_takes_the_next_backend_past_the_limit_and_the_queues() {
        let mut g = group(1, 1);
        let t = Instant::now();
        let (first, first_id) = match g.request(LEASE, Priority::Low, t) {
            Admission::Now(grant, id) => (grant, id),
            Admission::Queued(..) => panic!("queued"),
        };
        assert!(matches!(first, Grant::Open));
        // The limit is full and the only backend is out: statements queue.
        let (_, mut high_rx) = queued(g.request(LEASE, Priority::High, t));
        let (_, mut low_rx) = queued(g.request(LEASE, Priority::Low, t));
        let (internal_id, mut internal_rx) = queued(g.request(LEASE, Priority::Internal, t));
        let (gone_id, _) = queued(g.request(LEASE, Priority::Internal, t));
        let snap = g.snapshot();
        assert_eq!((snap.high, snap.low, snap.internal), (1, 1, 2));
        assert!(
            g.cancel(gone_id),
            "a queued internal request can be cancelled"
        );
        assert_eq!(g.snapshot().internal, 1);
        // A statement ending (its slot free, its backend kept) grants
        // nothing to a request that needs a backend.
        g.complete(first_id, None, t);
        assert!(internal_rx.try_recv().is_err());
        // The backend coming back goes to the internal request, ahead of
        // the queued statements; it holds the one slot past the limit.
        g.return_idle(Conn(0, 1), t);
        assert!(matches!(
            internal_rx.try_recv(),
            Ok(Grant::Backend(Conn(0, 1)))
        ));
        assert!(high_rx.try_recv().is_err() && low_rx.try_recv().is_err());
        assert_eq!(g.snapshot().in_flight, 1);
        assert_eq!(g.snapshot().internal, 0);
        // Given back, it goes on to the statements, high queue first.
        g.complete(internal_id, Some(Conn(0, 1)), t);
        assert!(matches!(high_rx.try_recv(), Ok(Grant::Backend(Conn(0, 1)))));
        assert!(low_rx.try_recv().is_err());
    }

    #[test]
    fn an_internal_grant_is_not_progress_for_a_stall_tick() {
        let mut g = group(1, 2);
        let t = Instant::now();
        assert!(matches!(
            now_grant(g.request(LEASE, Priority::Low, t)),
            Grant::Open
        ));
        g.tick(t);
        let (_, _slot_rx) = queued(g.request(Need::Slot, Priority::Low, t));
        // Past the full limit, in the room left in the share.
        assert!(matches!(
            now_grant(g.request(LEASE, Priority::Internal, t)),
            Grant::Open
        ));
        g.tick(t);
        let snap = g.snapshot();
        assert_eq!(
            (snap.extra, snap.counters.stalls),
            (1, 1),
            "nothing of the clients moved: the stall tick adds a slot"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn cap_limits_in_flight_and_opens_up_to_share() {
        let mut g = group(2, 3);
        let t = Instant::now();
        assert!(matches!(
            now_grant(g.request(LEASE, Priority::Low, t)),
            Grant::Open
        ));
        assert!(matches!(
            now_grant(g.request(LEASE, Priority::Low, t)),
            Grant::Open
        ));
        let (_, mut rx) = queued(g.request(LEASE, Priority::Low, t));
        assert_eq!(g.snapshot().in_flight, 2);
        assert_eq!(g.snapshot().owned, 2);
        // One completes and returns its backend: the queued lease gets it.
        g.complete(0, Some(Conn(0, 1)), Instant::now());
        assert!(matches!(rx.try_recv(), Ok(Grant::Backend(Conn(0, 1)))));
        assert_eq!(g.snapshot().in_flight, 2);
    }

    #[tokio::test(start_paused = true)]
    async fn high_queue_first_then_fifo_low() {
        let mut g = group(1, 10);
        let t = Instant::now();
        let _first = now_grant(g.request(Need::Slot, Priority::Low, t));
        let (_, mut l1) = queued(g.request(Need::Slot, Priority::Low, t));
        let (_, mut l2) = queued(g.request(Need::Slot, Priority::Low, t));
        let (_, mut h1) = queued(g.request(Need::Slot, Priority::High, t));
        g.complete(0, None, Instant::now());
        assert!(h1.try_recv().is_ok(), "high first");
        assert!(l1.try_recv().is_err());
        g.complete(0, None, Instant::now());
        assert!(l1.try_recv().is_ok(), "then oldest low");
        assert!(l2.try_recv().is_err());
        g.complete(0, None, Instant::now());
        assert!(l2.try_recv().is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn blocked_lease_does_not_block_slots_behind_it() {
        let mut g = group(4, 1);
        let t = Instant::now();
        let _a = now_grant(g.request(LEASE, Priority::Low, t)); // owns the only backend
        let (_, mut lease) = queued(g.request(LEASE, Priority::Low, t));
        // A pinned session's slot request runs even though a lease waits ahead.
        assert!(matches!(
            now_grant(g.request(Need::Slot, Priority::Low, t)),
            Grant::Slot
        ));
        assert!(lease.try_recv().is_err());
    }

    #[tokio::test(start_paused = true)]
    async fn kickup_moves_old_low_requests_to_high() {
        let mut g = group(1, 10);
        let t0 = Instant::now();
        let _run = now_grant(g.request(Need::Slot, Priority::Low, t0));
        let (_, mut old_low) = queued(g.request(Need::Slot, Priority::Low, t0));
        tokio::time::advance(Duration::from_millis(1500)).await;
        let t1 = Instant::now();
        let (_, mut new_high) = queued(g.request(Need::Slot, Priority::High, t1));
        g.dispatched_since_tick = 1; // not a stall
        g.tick(t1);
        assert_eq!(g.snapshot().counters.kickups, 1);
        assert_eq!(g.snapshot().high, 2);
        g.complete(0, None, Instant::now());
        // The kicked-up request is at the high tail, behind the newer high one.
        assert!(new_high.try_recv().is_ok());
        assert!(old_low.try_recv().is_err());
        g.complete(0, None, Instant::now());
        assert!(old_low.try_recv().is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn stall_grants_an_extra_slot_each_silent_tick() {
        let mut g = group(1, 10);
        let t = Instant::now();
        let _running = now_grant(g.request(Need::Slot, Priority::Low, t));
        let (_, mut commit) = queued(g.request(Need::Slot, Priority::High, t));
        let (_, mut other) = queued(g.request(Need::Slot, Priority::Low, t));
        g.tick(t); // dispatches happened since start: not a stall
        assert!(commit.try_recv().is_err());
        g.tick(t); // silent period while work waits: stalled
        assert_eq!(g.snapshot().counters.stalls, 1);
        assert!(
            commit.try_recv().is_ok(),
            "the queued COMMIT gets the extra slot"
        );
        assert!(other.try_recv().is_err());
        assert_eq!(g.snapshot().in_flight, 2);
        g.tick(t); // a dispatch happened in the last period: extra cleared
        assert_eq!(g.snapshot().extra, 0);
        assert!(other.try_recv().is_err());
        g.complete(0, None, Instant::now());
        g.complete(0, None, Instant::now());
        assert!(other.try_recv().is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn cancel_and_vanished_waiters_leak_nothing() {
        let mut g = group(1, 1);
        let t = Instant::now();
        let _a = now_grant(g.request(LEASE, Priority::Low, t));
        let (id, rx) = queued(g.request(LEASE, Priority::Low, t));
        assert!(g.cancel(id));
        assert!(!g.cancel(id));
        drop(rx);
        let (_, rx2) = queued(g.request(LEASE, Priority::Low, t));
        drop(rx2); // client vanished without cancelling
        g.complete(0, Some(Conn(0, 1)), Instant::now());
        let s = g.snapshot();
        assert_eq!(s.in_flight, 0, "grant to a vanished waiter is undone");
        assert_eq!(s.idle, 1, "and its backend is back idle");
        assert_eq!(s.low, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn full_group_evicts_other_pools_idle() {
        let mut g = group(2, 1);
        let t = Instant::now();
        assert!(g.try_reserve_open());
        g.return_idle(Conn(1, 9), Instant::now());
        assert!(matches!(
            now_grant(g.request(
                Need::Lease {
                    pool: 0,
                    parked: None
                },
                Priority::Low,
                t
            )),
            Grant::Open
        ));
        let s = g.snapshot();
        assert_eq!((s.owned, s.idle, s.counters.evictions), (1, 0, 1));
    }

    #[tokio::test(start_paused = true)]
    async fn adaptive_limit_lets_a_stalled_statement_stop_counting() {
        let mut g = GroupState::<Conn>::new(Limits {
            cap: 1,
            adaptive: true,
            stall_cap: Duration::from_millis(500),
            max_owned: 8,
            kickup: Duration::from_millis(1000),
        });
        let t0 = Instant::now();
        let Admission::Now(Grant::Slot, long) = g.request(Need::Slot, Priority::Low, t0) else {
            panic!("first statement runs at once");
        };
        let (_, mut next) = queued(g.request(Need::Slot, Priority::Low, t0));
        assert_eq!(g.snapshot().cap, 1, "starts at 1 + oversubscribe");
        g.adapt(t0 + Duration::from_millis(499));
        assert!(next.try_recv().is_err(), "still busy");
        // Past the stall threshold (no latency baseline yet: stall_limit_ms)
        // the running statement no longer holds the place.
        g.adapt(t0 + Duration::from_millis(500));
        assert!(next.try_recv().is_ok(), "the queued statement runs");
        let s = g.snapshot();
        assert_eq!(s.in_flight, 2);
        assert_eq!(s.adaptive.map(|a| a.stalled), Some(1));
        g.complete(long, None, t0 + Duration::from_secs(2));
        let a = g.snapshot().adaptive.expect("adaptive");
        assert_eq!((a.stalled, a.stalled_total), (0, 1));
        assert_eq!(g.snapshot().in_flight, 1);
    }

    #[test]
    fn tickets_bound_consecutive_high_admissions() {
        use crate::config::HighPrioMode;
        let mut t = 2;
        let mode = HighPrioMode::Transactions;
        assert_eq!(priority(mode, true, &mut t, 2), Priority::High);
        assert_eq!(priority(mode, true, &mut t, 2), Priority::High);
        assert_eq!(
            priority(mode, true, &mut t, 2),
            Priority::Low,
            "out of tickets"
        );
        assert_eq!(t, 2, "refilled in the low queue");
        assert_eq!(priority(mode, true, &mut t, 2), Priority::High);
        assert_eq!(
            priority(mode, false, &mut t, 2),
            Priority::Low,
            "no transaction"
        );
        assert_eq!(
            priority(HighPrioMode::Statements, false, &mut t, 2),
            Priority::High
        );
        assert_eq!(priority(HighPrioMode::None, true, &mut t, 2), Priority::Low);
    }

    fn elastic_group(budget: &Arc<Budget>, index: usize) -> GroupState<Conn> {
        GroupState::with_budget(
            Limits {
                cap: 2,
                adaptive: true,
                stall_cap: Duration::from_millis(100),
                max_owned: 2,
                kickup: Duration::from_millis(1000),
            },
            Some((budget.clone(), index)),
        )
    }

    #[tokio::test(start_paused = true)]
    async fn waiting_groups_borrow_and_a_starved_group_is_paid_back() {
        use super::super::elastic::Source;
        let budget = Arc::new(Budget::new(2, 4, Source::Default));
        budget.set(12, 4, Source::Server); // common pool 8, fair part 4
        let (mut a, mut b) = (elastic_group(&budget, 0), elastic_group(&budget, 1));
        let t0 = Instant::now();
        // Group a: the base (2), then nothing more while its statements run
        // quickly (a limit at the base, nothing stalled).
        let mut ids = Vec::new();
        for _ in 0..2 {
            match a.request(LEASE, Priority::Low, t0) {
                Admission::Now(Grant::Open, id) => ids.push(id),
                _ => panic!("within the base"),
            }
        }
        let (_, mut third) = queued(a.request(LEASE, Priority::Low, t0));
        assert!(
            third.try_recv().is_err(),
            "no borrowing while nothing waits"
        );
        // Its statements stall (stall_limit_ms before any sample): they wait,
        // so it borrows — the whole common pool, since nobody else wants it.
        let t1 = t0 + Duration::from_millis(100);
        a.adapt(t1);
        assert!(matches!(third.try_recv(), Ok(Grant::Open)));
        let mut rxs = Vec::new();
        for _ in 0..10 {
            if let Admission::Queued(_, rx) = a.request(LEASE, Priority::Low, t1) {
                rxs.push(rx);
            }
            a.adapt(t1 + Duration::from_millis(100));
        }
        let s = a.snapshot();
        assert_eq!((s.owned, s.elastic, s.ceiling), (10, 8, 10), "{s:?}");
        // Group b's statements wait too and find the pool empty: starved.
        let mut b_ids = Vec::new();
        for _ in 0..2 {
            if let Admission::Now(Grant::Open, id) = b.request(LEASE, Priority::Low, t1) {
                b_ids.push(id);
            }
        }
        let (_, mut b_wait) = queued(b.request(LEASE, Priority::Low, t1));
        b.adapt(t1 + Duration::from_millis(100));
        assert!(b_wait.try_recv().is_err(), "the pool is empty");
        // As a's backends come back, it closes those above its fair part.
        let t2 = t1 + Duration::from_millis(200);
        for id in ids {
            a.complete(id, Some(Conn(0, 1)), t2);
        }
        assert_eq!(a.snapshot().counters.given_back, 2);
        assert_eq!(budget.borrowed(0), 6);
        b.adapt(t2);
        assert!(matches!(b_wait.try_recv(), Ok(Grant::Open)), "b borrows");
        assert_eq!(budget.borrowed(1), 1);
    }

    #[test]
    fn the_give_back_window_grows_while_borrowing_follows_giving_back() {
        use super::super::elastic::Source;
        let budget = Arc::new(Budget::new(1, 2, Source::Default));
        budget.set(10, 2, Source::Server); // common pool 8
        let mut g = elastic_group(&budget, 0);
        // The base and `n` borrowed backends, all idle since the window began.
        let hold = |g: &mut GroupState<Conn>, n: usize| {
            while g.owned < 2 {
                g.owned += 1;
                g.idle.push(Conn(0, 1));
            }
            for _ in 0..n {
                assert!(budget.borrow(0));
                g.owned += 1;
                g.counters.borrowed += 1;
                g.idle.push(Conn(0, 1));
            }
            g.idle_low = g.idle.len();
        };
        let sec = Duration::from_secs(1);
        let ms = Duration::from_millis(1);
        let given_back = |g: &GroupState<Conn>| g.snapshot().counters.given_back;
        hold(&mut g, 4);
        g.give_back_surplus(sec);
        assert_eq!((given_back(&g), budget.borrowed(0), g.owned), (4, 0, 2));
        assert_eq!(g.give_back_window, sec, "not judged yet");
        // Borrowed again after it: it was wrong, the window doubles and
        // runs to its new length before anything goes back.
        hold(&mut g, 4);
        g.give_back_surplus(sec + 100 * ms);
        assert_eq!((g.give_back_window, given_back(&g)), (2 * sec, 4));
        g.give_back_surplus(2 * sec + 900 * ms);
        assert_eq!(given_back(&g), 4, "not a whole 2 s window yet");
        g.give_back_surplus(3 * sec);
        assert_eq!(given_back(&g), 8, "idle through the whole 2 s window");
        // Nothing borrowed for four windows after it: it was right, the
        // window halves.
        g.give_back_surplus(10 * sec);
        assert_eq!(g.give_back_window, 2 * sec, "three windows calm");
        g.give_back_surplus(11 * sec);
        assert_eq!(g.give_back_window, sec, "four windows calm");
        // Borrowing after every give-back: it grows to the cap, no further.
        for i in 0..24 {
            hold(&mut g, 4);
            let t = g.idle_window + g.give_back_window;
            g.give_back_surplus(t);
            assert!(g.give_back_window <= GIVE_BACK_WINDOW_MAX, "round {i}");
        }
        assert_eq!(g.give_back_window, GIVE_BACK_WINDOW_MAX);
    }

    #[tokio::test(start_paused = true)]
    async fn idle_stack_is_lifo() {
        let mut g = group(4, 4);
        let t = Instant::now();
        g.owned = 2;
        g.return_idle(Conn(0, 1), Instant::now());
        g.return_idle(Conn(0, 2), Instant::now());
        assert!(matches!(
            now_grant(g.request(LEASE, Priority::Low, t)),
            Grant::Backend(Conn(0, 2))
        ));
    }

    fn tenant(index: u32, weight: u32) -> Arc<Tenant> {
        Tenant::new(
            index,
            "u",
            TenantLimits {
                weight,
                ..TenantLimits::default()
            },
        )
    }

    /// Queues `per_user` slot requests for each tenant behind one running
    /// statement (cap 1), then frees the slot `grants` times: which user
    /// each grant went to, in order.
    fn contend(
        g: &mut GroupState<Conn>,
        users: &[Arc<Tenant>],
        per_user: usize,
        grants: usize,
    ) -> Vec<usize> {
        let t = Instant::now();
        let _running = now_grant(g.request(Need::Slot, Priority::Low, t));
        let mut rxs = Vec::new();
        for i in 0..per_user {
            for (u, tn) in users.iter().enumerate() {
                let (_, rx) = queued(g.request_for(Need::Slot, Priority::Low, tn, t));
                rxs.push((u, i, rx));
            }
        }
        let mut order = Vec::new();
        for _ in 0..grants {
            g.complete(0, None, t);
            let got: Vec<usize> = rxs
                .iter_mut()
                .filter_map(|(u, _, rx)| rx.try_recv().ok().map(|_| *u))
                .collect();
            assert_eq!(got.len(), 1, "one grant per freed slot");
            order.push(got[0]);
        }
        order
    }

    fn counts(order: &[usize], users: usize) -> Vec<usize> {
        let mut c = vec![0; users];
        for u in order {
            c[*u] += 1;
        }
        c
    }

    /// Completes `n` statements one at a time; after each, the user whose
    /// queued request got the freed slot (in grant order).
    fn grants_after_completions(
        g: &mut GroupState<Conn>,
        rxs: &mut [(usize, oneshot::Receiver<Grant<Conn>>)],
        n: usize,
        t: Instant,
    ) -> Vec<usize> {
        let mut order = Vec::new();
        for _ in 0..n {
            g.complete(0, None, t);
            for (u, rx) in rxs.iter_mut() {
                if rx.try_recv().is_ok() {
                    order.push(*u);
                }
            }
        }
        order
    }

    #[tokio::test(start_paused = true)]
    async fn contended_slots_are_shared_by_weight() {
        let one_one = [tenant(1, 1), tenant(2, 1)];
        let order = contend(&mut group(1, 10), &one_one, 100, 100);
        assert_eq!(counts(&order, 2), vec![50, 50]);
        // Interleaved, not in blocks: every 10 grants are split evenly.
        for w in order.chunks(10) {
            assert_eq!(counts(w, 2), vec![5, 5], "{order:?}");
        }
        let four_one = [tenant(1, 4), tenant(2, 1)];
        let order = contend(&mut group(1, 10), &four_one, 100, 100);
        assert_eq!(counts(&order, 2), vec![80, 20]);
        for w in order.chunks(10) {
            let c = counts(w, 2);
            assert!((7..=9).contains(&c[0]), "{order:?}");
        }
        let three = [tenant(1, 1), tenant(2, 2), tenant(3, 3)];
        let order = contend(&mut group(1, 10), &three, 100, 120);
        assert_eq!(counts(&order, 3), vec![20, 40, 60]);
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_users_share_is_lent_and_not_paid_back() {
        let (light, heavy) = (tenant(1, 1), tenant(2, 4));
        let mut g = group(1, 10);
        let t = Instant::now();
        let _running = now_grant(g.request(Need::Slot, Priority::Low, t));
        // Only the weight-1 user waits: it gets every slot (nothing idle).
        let mut light_rx = Vec::new();
        for _ in 0..20 {
            light_rx.push(queued(g.request_for(Need::Slot, Priority::Low, &light, t)).1);
        }
        for _ in 0..10 {
            g.complete(0, None, t);
        }
        let served = light_rx
            .iter_mut()
            .map(|rx| rx.try_recv().is_ok())
            .filter(|ok| *ok)
            .count();
        assert_eq!(served, 10, "the heavy user's share was lent");
        assert_eq!(g.snapshot().in_flight, 1);
        // The heavy user arrives: from now on 4:1, with no burst owed to the
        // light user for the time it had the group alone, nor to the heavy
        // one for the time it lent its share.
        let mut heavy_rx = Vec::new();
        for _ in 0..20 {
            heavy_rx.push(queued(g.request_for(Need::Slot, Priority::Low, &heavy, t)).1);
        }
        let mut order = Vec::new();
        for _ in 0..10 {
            g.complete(0, None, t);
            if heavy_rx.iter_mut().any(|rx| rx.try_recv().is_ok()) {
                order.push(1);
            } else if light_rx.iter_mut().any(|rx| rx.try_recv().is_ok()) {
                order.push(0);
            }
        }
        assert_eq!(counts(&order, 2), vec![2, 8], "{order:?}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_users_autocommit_statements_get_its_share_next_to_anothers_transactions() {
        // The noisy neighbour in small: `batch` (weight 1) has transactions
        // in progress queued (high) and continuing without queueing;
        // `web` (weight 4) has only autocommit statements (low). Web gets
        // four of every five grants; high priority decides only inside a
        // user.
        let (batch, web) = (tenant(1, 1), tenant(2, 4));
        let mut g = group(1, 10);
        let t = Instant::now();
        let _running = now_grant(g.request(Need::Slot, Priority::Low, t));
        let mut rxs = Vec::new();
        for _ in 0..40 {
            rxs.push((
                0,
                queued(g.request_for(Need::Slot, Priority::High, &batch, t)).1,
            ));
            rxs.push((
                1,
                queued(g.request_for(Need::Slot, Priority::Low, &web, t)).1,
            ));
        }
        let order = grants_after_completions(&mut g, &mut rxs, 40, t);
        assert_eq!(counts(&order, 2), vec![8, 32], "{order:?}");
        for w in order.chunks(10) {
            assert_eq!(counts(w, 2), vec![2, 8], "interleaved: {order:?}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_continuing_transaction_waits_when_another_user_is_owed_its_share() {
        let (batch, web) = (tenant(1, 1), tenant(2, 1));
        let mut g = group(1, 10);
        let t = Instant::now();
        let _running = now_grant(g.request(Need::Slot, Priority::Low, t));
        let (_, mut select) = queued(g.request_for(Need::Slot, Priority::Low, &web, t));
        // Even shares: batch's continuing statement goes at once, past the
        // limit, as it did before.
        assert!(matches!(
            g.request_for(Need::Continue, Priority::High, &batch, t),
            Admission::Now(Grant::Slot, _)
        ));
        // Now web is owed: batch's next one waits, web's goes first.
        let (_, mut next) = queued(g.request_for(Need::Continue, Priority::High, &batch, t));
        // Two in flight on a limit of one: the first completion frees no room.
        g.complete(0, None, t);
        assert!(select.try_recv().is_err() && next.try_recv().is_err());
        g.complete(0, None, t);
        assert!(select.try_recv().is_ok(), "web first");
        assert!(next.try_recv().is_err());
        g.complete(0, None, t);
        assert!(next.try_recv().is_ok(), "then batch's transaction");
    }

    #[tokio::test(start_paused = true)]
    async fn a_stall_gives_its_extra_slot_to_the_oldest_transaction_not_the_owed_user() {
        // The running statement waits on a lock that batch's transaction
        // holds; web (weight 100) is owed many grants. The stall's extra
        // slot goes to batch's next statement, not to one more of web's.
        let (batch, web) = (tenant(1, 1), tenant(2, 100));
        let mut g = group(1, 10);
        let t = Instant::now();
        let _blocked = now_grant(g.request_for(Need::Slot, Priority::Low, &web, t));
        let mut web_rx = Vec::new();
        for _ in 0..5 {
            web_rx.push(queued(g.request_for(Need::Slot, Priority::Low, &web, t)).1);
        }
        g.queue.charge(batch.index, batch.weight());
        let (_, mut commit) = queued(g.request_for(Need::Continue, Priority::High, &batch, t));
        g.dispatched_since_tick = 0;
        g.tick(t);
        assert_eq!(g.snapshot().counters.stalls, 1);
        assert!(commit.try_recv().is_ok(), "the lock holder's statement");
        assert!(web_rx.iter_mut().all(|rx| rx.try_recv().is_err()));
    }

    #[tokio::test(start_paused = true)]
    async fn a_transaction_of_a_user_within_its_share_goes_first() {
        let (small, big) = (tenant(1, 1), tenant(2, 100));
        let mut g = group(1, 10);
        let t = Instant::now();
        let _running = now_grant(g.request(Need::Slot, Priority::Low, t));
        let mut big_rx = Vec::new();
        for _ in 0..10 {
            big_rx.push(queued(g.request_for(Need::Slot, Priority::Low, &big, t)).1);
        }
        let (_, mut commit) = queued(g.request_for(Need::Slot, Priority::High, &small, t));
        g.complete(0, None, t);
        assert!(commit.try_recv().is_ok(), "the transaction goes first");
        assert!(big_rx.iter_mut().all(|rx| rx.try_recv().is_err()));
    }

    #[tokio::test(start_paused = true)]
    async fn high_queue_is_shared_by_weight_too() {
        let users = [tenant(1, 3), tenant(2, 1)];
        let mut g = group(1, 10);
        let t = Instant::now();
        let _running = now_grant(g.request(Need::Slot, Priority::Low, t));
        let mut rxs = Vec::new();
        for _ in 0..40 {
            for (u, tn) in users.iter().enumerate() {
                rxs.push((
                    u,
                    queued(g.request_for(Need::Slot, Priority::High, tn, t)).1,
                ));
            }
        }
        let order = grants_after_completions(&mut g, &mut rxs, 40, t);
        assert_eq!(counts(&order, 2), vec![30, 10]);
    }

    #[tokio::test(start_paused = true)]
    async fn fifo_inside_one_user() {
        let (a, b) = (tenant(1, 1), tenant(2, 1));
        let mut g = group(1, 10);
        let t = Instant::now();
        let _running = now_grant(g.request(Need::Slot, Priority::Low, t));
        let mut rxs = Vec::new();
        for i in 0..10 {
            let tn = if i % 3 == 0 { &b } else { &a };
            rxs.push((
                i,
                tn.index,
                queued(g.request_for(Need::Slot, Priority::Low, tn, t)).1,
            ));
        }
        let mut per_user: Vec<Vec<usize>> = vec![Vec::new(); 3];
        for _ in 0..10 {
            g.complete(0, None, t);
            for (i, u, rx) in rxs.iter_mut() {
                if rx.try_recv().is_ok() {
                    per_user[*u as usize].push(*i);
                }
            }
        }
        assert_eq!(per_user[1], vec![1, 2, 4, 5, 7, 8]);
        assert_eq!(per_user[2], vec![0, 3, 6, 9]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_user_at_its_backend_cap_waits_while_others_lease() {
        let capped = Tenant::new(
            1,
            "batch",
            TenantLimits {
                max_backends: 1,
                ..TenantLimits::default()
            },
        );
        let other = tenant(2, 1);
        let mut g = group(4, 4);
        let t = Instant::now();
        let Admission::Now(Grant::Open, first) = g.request_for(LEASE, Priority::Low, &capped, t)
        else {
            panic!("the first lease runs");
        };
        assert_eq!(capped.leased(), 1);
        let (_, mut second) = queued(g.request_for(LEASE, Priority::Low, &capped, t));
        // Another user's lease is not held back behind it.
        assert!(matches!(
            now_grant(g.request_for(LEASE, Priority::Low, &other, t)),
            Grant::Open
        ));
        assert!(g.capped_waiting());
        // The capped user's backend goes back: its waiter gets it.
        capped.release_lease();
        g.complete(first, Some(Conn(0, 1)), t);
        assert!(matches!(second.try_recv(), Ok(Grant::Backend(Conn(0, 1)))));
        assert_eq!(capped.leased(), 1);
        assert!(!g.capped_waiting());
    }

    #[tokio::test(start_paused = true)]
    async fn a_vanished_waiter_gives_its_users_lease_back() {
        let u = Tenant::new(
            1,
            "u",
            TenantLimits {
                max_backends: 1,
                ..TenantLimits::default()
            },
        );
        let mut g = group(1, 4);
        let t = Instant::now();
        let Admission::Now(_, first) = g.request_for(LEASE, Priority::Low, &u, t) else {
            panic!("runs");
        };
        let (_, rx) = queued(g.request_for(LEASE, Priority::Low, &u, t));
        drop(rx);
        u.release_lease();
        g.complete(first, Some(Conn(0, 1)), t);
        assert_eq!(u.leased(), 0, "the undone grant released its lease");
        assert_eq!(g.snapshot().in_flight, 0);
    }

    /// A connection that may be parked for a session's owner token.
    #[derive(Debug, PartialEq, Eq)]
    struct Tagged(u32, Option<u64>);
    impl Pooled for Tagged {
        fn pool(&self) -> usize {
            0
        }
        fn parked_for(&self) -> Option<u64> {
            self.1
        }
    }

    fn tagged_group(max_owned: usize) -> GroupState<Tagged> {
        GroupState::new(Limits {
            cap: 8,
            adaptive: false,
            stall_cap: Duration::from_millis(500),
            max_owned,
            kickup: Duration::from_millis(1000),
        })
    }

    #[test]
    fn a_lease_takes_its_own_parked_backend_then_a_clean_one_then_anothers() {
        let t = Instant::now();
        let mut g = tagged_group(4);
        let lease = |parked| Need::Lease { pool: 0, parked };
        let ids: Vec<u64> = (0..4)
            .map(|_| match g.request(lease(None), Priority::Low, t) {
                Admission::Now(Grant::Open, id) => id,
                _ => panic!("expected an immediate open"),
            })
            .collect();
        // Bottom to top: clean 1, parked for 7, clean 3, parked for 9.
        g.complete(ids[0], Some(Tagged(1, None)), t);
        g.complete(ids[1], Some(Tagged(2, Some(7))), t);
        g.complete(ids[2], Some(Tagged(3, None)), t);
        g.complete(ids[3], Some(Tagged(4, Some(9))), t);
        // Maintenance's minimum of idle connections counts the clean ones.
        assert_eq!((g.snapshot().idle, g.clean_idle()), (4, 2));
        let mut take = |parked| match g.request(lease(parked), Priority::Low, t) {
            Admission::Now(Grant::Backend(b), _) => b,
            _ => panic!("expected an idle backend"),
        };
        // Its own, from under the top.
        assert_eq!(take(Some(7)), Tagged(2, Some(7)));
        // Without one of its own (or when its own is gone): the newest
        // clean one, never another session's parked one while a clean
        // one is idle.
        assert_eq!(take(Some(5)), Tagged(3, None));
        assert_eq!(take(None), Tagged(1, None));
        // Only another's parked one is left: it is granted (the caller
        // cleans it) rather than a new connection opened.
        assert_eq!(take(None), Tagged(4, Some(9)));
        assert_eq!((g.counters.reclaimed, g.counters.unparked), (1, 1));
        assert_eq!(g.snapshot().owned, 4);
    }

    #[test]
    fn another_sessions_parked_backend_waits_while_the_share_has_room() {
        let t = Instant::now();
        let mut g = tagged_group(2);
        let lease = Need::Lease {
            pool: 0,
            parked: None,
        };
        let Admission::Now(Grant::Open, first) = g.request(lease, Priority::Low, t) else {
            panic!("expected an immediate open");
        };
        g.complete(first, Some(Tagged(1, Some(9))), t);
        // Room in the share: a new connection, the parked one stays for
        // its session.
        assert!(matches!(
            g.request(lease, Priority::Low, t),
            Admission::Now(Grant::Open, _)
        ));
        // The share is full: the parked one is granted (to be cleaned).
        assert!(matches!(
            g.request(lease, Priority::Low, t),
            Admission::Now(Grant::Backend(Tagged(1, Some(9))), _)
        ));
        assert_eq!(g.counters.unparked, 1);
    }

    /// A connection of credential pool `.0` counted for user `.1`.
    #[derive(Debug, PartialEq, Eq)]
    struct Owned(usize, Option<u32>);
    impl Pooled for Owned {
        fn pool(&self) -> usize {
            self.0
        }
        fn parked_for(&self) -> Option<u64> {
            None
        }
        fn share_user(&self) -> Option<u32> {
            self.1
        }
        fn set_share_user(&mut self, user: u32) {
            self.1 = Some(user);
        }
    }

    /// Two users with their own credential pools (pool = user index), equal
    /// weights, a group of `max_owned` backends and room for 8 statements.
    fn two_users(max_owned: usize) -> (GroupState<Owned>, Arc<Tenant>, Arc<Tenant>) {
        let g = GroupState::new(Limits {
            cap: 8,
            adaptive: false,
            stall_cap: Duration::from_millis(500),
            max_owned,
            kickup: Duration::from_millis(1000),
        });
        let web = Tenant::new(1, "web", TenantLimits::default());
        let batch = Tenant::new(2, "batch", TenantLimits::default());
        (g, web, batch)
    }

    /// A lease of `t` asked at `at` queues, and closes nobody's backend.
    fn assert_lease_waits(g: &mut GroupState<Owned>, t: &Arc<Tenant>, at: Instant) {
        let evictions = g.snapshot().counters.evictions;
        assert!(matches!(
            g.request_for(lease_of(t), Priority::Low, t, at),
            Admission::Queued(..)
        ));
        assert_eq!(g.snapshot().counters.evictions, evictions);
    }

    fn lease_of(t: &Tenant) -> Need {
        Need::Lease {
            pool: t.index as usize,
            parked: None,
        }
    }

    /// `n` leases of `t` granted at once as new backends; their ids.
    fn open_n(g: &mut GroupState<Owned>, t: &Arc<Tenant>, n: usize, at: Instant) -> Vec<u64> {
        (0..n)
            .map(|_| match g.request_for(lease_of(t), Priority::Low, t, at) {
                Admission::Now(Grant::Open, id) => id,
                _ => panic!("expected a new backend at once"),
            })
            .collect()
    }

    /// Four backends, two each; one of web's statements ended (its
    /// backend idle) and it still runs the other; batch asks for a third
    /// (giving up at `deadline`). Returns the group, web's and batch's ids,
    /// batch's waiting lease.
    #[allow(clippy::type_complexity)]
    fn web_between_statements(
        deadline: Option<Instant>,
    ) -> (
        GroupState<Owned>,
        Vec<u64>,
        Vec<u64>,
        oneshot::Receiver<Grant<Owned>>,
        Arc<Tenant>,
    ) {
        let (mut g, web, batch) = two_users(4);
        let t = Instant::now();
        let w = open_n(&mut g, &web, 2, t);
        let b = open_n(&mut g, &batch, 2, t);
        g.complete(w[0], Some(Owned(1, Some(1))), t);
        let lease = g.request_until(lease_of(&batch), Priority::Low, &batch, t, deadline);
        let (_, rx) = queued_owned(lease);
        (g, w, b, rx, web)
    }

    #[tokio::test(start_paused = true)]
    async fn an_active_users_idle_backend_within_its_share_is_not_closed_for_another() {
        // Web, active with 2 of 4 backends (its half), keeps its idle one.
        let (mut g, _w, b, mut rx, web) = web_between_statements(None);
        let t = Instant::now();
        assert_eq!(g.snapshot().counters.evictions, 0);
        // Web's own next statement takes its idle backend, no login.
        assert!(matches!(
            g.request_for(lease_of(&web), Priority::Low, &web, t),
            Admission::Now(Grant::Backend(Owned(1, Some(1))), _)
        ));
        assert!(rx.try_recv().is_err(), "batch still waits");
        // Batch's own backend comes back: its waiter takes it.
        g.complete(b[0], Some(Owned(2, Some(2))), t);
        assert!(matches!(
            rx.try_recv(),
            Ok(Grant::Backend(Owned(2, Some(2))))
        ));
        assert_eq!(g.snapshot().counters.evictions, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn an_overdue_lease_may_close_a_kept_backend() {
        // Batch's lease, kept from web's idle backend, with a queue timeout
        // of 10 s: past half of it, it may close any idle backend.
        let (mut g, _w, _b, mut rx, _web) =
            web_between_statements(Some(Instant::now() + Duration::from_secs(10)));
        // Web's other statement still runs: web stays active throughout.
        tokio::time::advance(Duration::from_secs(4)).await;
        g.tick(Instant::now());
        assert!(rx.try_recv().is_err(), "before half its timeout: kept");
        tokio::time::advance(Duration::from_secs(1)).await;
        g.tick(Instant::now());
        assert!(matches!(rx.try_recv(), Ok(Grant::Open)), "overdue: served");
        assert_eq!(g.snapshot().counters.evictions, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn the_proxys_own_leases_count_for_no_user() {
        let (mut g, web, _) = two_users(4);
        let t = Instant::now();
        let internal = |g: &mut GroupState<Owned>, pool| {
            g.request_for(
                Need::Lease { pool, parked: None },
                Priority::Internal,
                &web,
                t,
            )
        };
        assert!(matches!(
            internal(&mut g, 9),
            Admission::Now(Grant::Open, _)
        ));
        assert_eq!(g.holdings.of(1), 0, "a helper's new backend is nobody's");
        // A pre-warmed backend taken by the proxy stays nobody's.
        assert!(g.try_reserve_open());
        g.return_idle(Owned(1, None), t);
        assert!(matches!(
            internal(&mut g, 1),
            Admission::Now(Grant::Backend(Owned(1, None)), _)
        ));
        assert_eq!(g.holdings.of(1), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_users_backends_are_lent() {
        let (mut g, w, _b, mut rx, _web) = web_between_statements(None);
        let t = Instant::now();
        // Web's last statement ends: nothing of web runs or waits here.
        // For a while web may be between two statements: batch waits.
        g.complete(w[1], Some(Owned(1, Some(1))), t);
        assert!(rx.try_recv().is_err());
        tokio::time::advance(crate::pool::shares::ACTIVE_FOR / 2).await;
        g.tick(Instant::now());
        assert!(rx.try_recv().is_err());
        // Quiet since: its idle backends serve no one, batch's waiter
        // closes one at the next tick.
        tokio::time::advance(crate::pool::shares::ACTIVE_FOR / 2).await;
        g.tick(Instant::now());
        assert!(matches!(rx.try_recv(), Ok(Grant::Open)));
        let s = g.snapshot();
        assert_eq!((s.owned, s.idle, s.counters.evictions), (4, 1, 1));
    }

    #[tokio::test(start_paused = true)]
    async fn a_user_under_its_share_closes_one_of_a_user_over_it() {
        let (mut g, web, batch) = two_users(4);
        let t = Instant::now();
        let w = open_n(&mut g, &web, 1, t);
        let b = open_n(&mut g, &batch, 3, t);
        g.complete(b[0], Some(Owned(2, Some(2))), t);
        // Batch (3 of 4, over its half) has one idle; web (1 of 4, busy)
        // asks for a second: batch's idle backend is closed for it.
        assert!(matches!(
            g.request_for(lease_of(&web), Priority::Low, &web, t),
            Admission::Now(Grant::Open, _)
        ));
        assert_eq!(g.snapshot().counters.evictions, 1);
        // Now 2 and 2: web's backend back idle while web still runs one is
        // protected from batch.
        g.complete(w[0], Some(Owned(1, Some(1))), t);
        assert_lease_waits(&mut g, &batch, t);
    }

    #[tokio::test(start_paused = true)]
    async fn weights_set_how_many_backends_a_user_keeps() {
        let (mut g, _, batch) = two_users(4);
        let web = Tenant::new(
            1,
            "web",
            TenantLimits {
                weight: 3,
                ..TenantLimits::default()
            },
        );
        let t = Instant::now();
        let w = open_n(&mut g, &web, 3, t);
        let _b = open_n(&mut g, &batch, 1, t);
        // Web holds 3 of 4 (its part at 3:1), one of them idle.
        g.complete(w[0], Some(Owned(1, Some(1))), t);
        assert_lease_waits(&mut g, &batch, t);
    }

    #[tokio::test(start_paused = true)]
    async fn a_backend_the_pool_opened_counts_for_the_user_that_takes_it() {
        let (mut g, web, batch) = two_users(4);
        let t = Instant::now();
        // Pre-warmed for web's pool: no user's yet.
        assert!(g.try_reserve_open());
        g.return_idle(Owned(1, None), t);
        let w = match g.request_for(lease_of(&web), Priority::Low, &web, t) {
            Admission::Now(Grant::Backend(Owned(1, Some(1))), id) => id,
            _ => panic!("web takes the pre-warmed backend and it becomes web's"),
        };
        let _w2 = open_n(&mut g, &web, 1, t);
        let _b = open_n(&mut g, &batch, 2, t);
        // Web holds 2 of 4 (the taken one counts), one busy: its idle one
        // is within its half.
        g.complete(w, Some(Owned(1, Some(1))), t);
        assert_lease_waits(&mut g, &batch, t);
    }

    fn queued_owned(a: Admission<Owned>) -> (u64, oneshot::Receiver<Grant<Owned>>) {
        match a {
            Admission::Queued(id, rx) => (id, rx),
            Admission::Now(..) => panic!("expected to queue"),
        }
    }

    fn slot_now(g: &mut GroupState<Conn>, t: &Arc<Tenant>, at: Instant) -> Option<u64> {
        match g.request_for(Need::Slot, Priority::Low, t, at) {
            Admission::Now(Grant::Slot, id) => Some(id),
            Admission::Now(..) => panic!("a slot"),
            Admission::Queued(..) => None,
        }
    }

    /// A group with room for `cap` statements, batch (tenant 2) running
    /// that many, web (tenant 1) nothing; equal weights.
    fn batch_fills(cap: usize) -> (GroupState<Conn>, Arc<Tenant>, Arc<Tenant>, Vec<u64>) {
        let (web, batch) = (tenant(1, 1), tenant(2, 1));
        let mut g = group(cap, 10);
        let t = Instant::now();
        let b = (0..cap)
            .map(|_| slot_now(&mut g, &batch, t).expect("room"))
            .collect();
        (g, web, batch, b)
    }

    #[tokio::test(start_paused = true)]
    async fn a_user_under_its_share_takes_it_back_past_the_limit() {
        let (mut g, web, batch, b) = batch_fills(4);
        let t = Instant::now();
        // Batch took the whole limit while web ran nothing (lent). Web's
        // half comes back at once, two places past the limit, no more.
        let w1 = slot_now(&mut g, &web, t).expect("web's first place");
        let _w2 = slot_now(&mut g, &web, t).expect("web's second place");
        let (_, mut w3) = queued(g.request_for(Need::Slot, Priority::Low, &web, t));
        let (_, mut b5) = queued(g.request_for(Need::Slot, Priority::Low, &batch, t));
        let s = g.snapshot();
        assert_eq!((s.in_flight, s.counters.share_reclaims), (6, 2));
        // Batch's ends free no place while the group is at its limit.
        g.complete(b[0], None, t);
        g.complete(b[1], None, t);
        assert_eq!(g.snapshot().in_flight, 4);
        assert!(w3.try_recv().is_err() && b5.try_recv().is_err());
        // Web's end: under the limit, the share's order runs batch's (web
        // was charged for the places it took back), and web, within its
        // half again, takes the next one back.
        g.complete(w1, None, t);
        assert!(b5.try_recv().is_ok(), "batch's turn under the limit");
        assert!(w3.try_recv().is_ok(), "web's within its half");
        let s = g.snapshot();
        assert_eq!((s.in_flight, s.low, s.counters.share_reclaims), (5, 0, 3));
    }

    #[tokio::test(start_paused = true)]
    async fn weights_set_the_places_taken_back_and_alone_nothing_passes_the_limit() {
        let (web, batch) = (tenant(1, 4), tenant(2, 1));
        let mut g = group(5, 10);
        let t = Instant::now();
        for _ in 0..5 {
            slot_now(&mut g, &batch, t).unwrap();
        }
        // Web at 4:1 is owed 4 of 5 places.
        for i in 0..4 {
            assert!(slot_now(&mut g, &web, t).is_some(), "place {i}");
        }
        assert!(slot_now(&mut g, &web, t).is_none());
        assert_eq!(g.snapshot().in_flight, 9);
        // One user alone never passes its limit.
        let mut g = group(2, 10);
        let alone = tenant(1, 1);
        assert!(slot_now(&mut g, &alone, t).is_some());
        assert!(slot_now(&mut g, &alone, t).is_some());
        assert!(slot_now(&mut g, &alone, t).is_none());
        assert_eq!(g.snapshot().counters.share_reclaims, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_queued_user_with_a_later_index_gets_a_backend_of_one_over_its_share() {
        // Batch is tenant 1 and web tenant 2: web's lane index is past every
        // user that holds a backend here.
        let g0 = two_users(2).0;
        let mut g = g0;
        let batch = Tenant::new(1, "batch", TenantLimits::default());
        let web = Tenant::new(2, "web", TenantLimits::default());
        let t = Instant::now();
        let b = open_n(&mut g, &batch, 2, t);
        let (_, mut rx) = queued_owned(g.request_for(lease_of(&web), Priority::Low, &web, t));
        // Batch's backend comes back: batch holds both of 2 (over its half),
        // web holds none and waits: it closes batch's idle one.
        g.complete(b[0], Some(Owned(1, Some(1))), t);
        assert!(matches!(rx.try_recv(), Ok(Grant::Open)));
        assert_eq!(g.snapshot().counters.evictions, 1);
    }

    #[tokio::test(start_paused = true)]
    async fn places_taken_back_hide_no_stall_from_the_oldest_transaction() {
        let (mut g, web, batch, _b) = batch_fills(2);
        let t = Instant::now();
        g.tick(t);
        // Batch's running statements wait on a lock its queued COMMIT holds.
        let (_, mut commit) = queued(g.request_for(Need::Slot, Priority::High, &batch, t));
        // Web takes its place back past the limit: no progress for batch.
        assert!(slot_now(&mut g, &web, t).is_some());
        assert_eq!(g.snapshot().counters.share_reclaims, 1);
        g.tick(t + Duration::from_millis(10));
        assert!(
            commit.try_recv().is_ok(),
            "the stall's slot went to the COMMIT"
        );
        assert_eq!(g.snapshot().counters.stalls, 1);
    }
}
