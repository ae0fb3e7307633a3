//! The adaptive in-flight limit of one thread group (`pool.inflight =
//! "adaptive"`): how many statements the group lets execute on the server at
//! once, found at run time from what the proxy can see — completions per
//! second, statement latency, and how long each running statement has been
//! running. See docs/architecture.md ("Adaptive in-flight limit") for why
//! this controller and not Vegas / Gradient2 / Envoy's gradient filter.
//!
//! Pure and clock-injected: every call takes `now` as a [`Duration`] since
//! an origin the caller picks (the scheduler uses its group's creation
//! instant), so the simulation tests drive it on made-up time. No tokio, no
//! locking, no I/O; [`super::scheduler::GroupState`] owns one per group.
//!
//! The controller, in short (a throughput hill-climber in the spirit of TCP
//! BBR, which measures the delivery rate rather than only the delay):
//! - **Intervals.** Completions are counted per interval (at least 100 ms,
//!   at least 5 × the typical latency, and at least 20 completions unless
//!   4 × that long has passed). An interval teaches something about capacity
//!   only when demand exceeded the limit for most of it ("limited").
//! - **Workload shifts.** An interval whose mean latency is 4 × away from
//!   the typical one means the statements changed (queueing from one
//!   doubling cannot do that): the search restarts with Startup, from the
//!   base share at most — except when most of what completed had stalled
//!   (a server stall: InnoDB flushing, a checkpoint; or statements that now
//!   wait longer): waits never want less concurrency, so the limit is kept,
//!   and when the latency falls back to where it was the limit from before
//!   the rise is restored (dropping to the base share after each flushing
//!   stall left a CPU idle while clients queued, I/O-bound).
//! - **Startup.** The limit doubles each limited interval while
//!   completions/s grow by ≥ 25 %; after two intervals without such growth
//!   it settles on the smallest limit tried that reached 90 % of the best
//!   rate. Above the group's base share (into the elastic pool) it doubles
//!   only right after a growing interval.
//! - **Probing.** After three cruise intervals the limit tries one step up
//!   (× 1.25) or down (× 0.8), alternating. Up is kept if the rate rose
//!   beyond noise; a rise nearly proportional to the step means the server
//!   is far from saturated and restarts Startup. Down is kept while the rate
//!   holds within noise of the cruise rate *and* the latency fell by at
//!   least half the step (Little's law: less concurrency at the same rate
//!   must show as shorter statements; a rate that "held" within noise while
//!   the latency did not fall is noise, and following it drifted the limit
//!   far below what a server waiting on its disk absorbs), and repeated;
//!   otherwise the limit goes back. So it climbs while
//!   completions/s rise and backs off when more concurrency only adds
//!   latency.
//! - **Borrowing** (a limit above the group's base share takes backends
//!   from the common elastic pool) asks for more evidence than a step below
//!   it, because on a machine whose CPUs the load generator and the proxy
//!   share with the server the rate moves 20–25 % between intervals at a
//!   fixed limit, and every step up on such noise borrowed (measured: one
//!   group's limit 16 → 464, 479 backends, 28–43 % below a hard cap of 16,
//!   CPU-bound). Probes never cross the base share by × 1.25: from it the
//!   step is a doubling. Entering the pool needs a gain of 2.5 × the rate's
//!   measured spread (25–50 %; the spread is learnt from pairs of intervals
//!   at one limit, 20 % assumed until then), every doubling and probe up
//!   within it is seen in two intervals in a row (the lower counts: the
//!   first after a raise also drains the backlog), a failed entry waits
//!   4, 8, … 64 cruise cycles before the next, and a borrowed limit
//!   restored after a stall must deliver 70 % of the rate it had before.
//!   Climbing back to a limit held in the last 10 s needs only the usual
//!   evidence (recovery after a stall stays quick).
//! - **Stalled statements** (the proxy's `thd_wait_begin`): a statement
//!   running longer than 8 × the typical latency (a moving average of the
//!   interval means that rises quickly and falls slowly; at least 5 ms, at
//!   most `stall_limit_ms`) stops counting as busy, so it no longer holds a
//!   place under the limit. Its completion still counts: when long
//!   statements are the workload rather than outliers, the typical latency
//!   rises with them and they stop looking stalled.

use std::collections::VecDeque;
use std::time::Duration;

/// Fixed knobs of the controller.
#[derive(Debug, Clone, Copy)]
pub struct Tuning {
    /// The limit never goes below this (1).
    pub min: usize,
    /// Nor above this: the group's backend ceiling (its base share plus the
    /// common elastic pool).
    pub max: usize,
    /// The group's base share: Startup doubles past it only on an interval
    /// that just grew the rate by ≥ 25 % (so a CPU-bound group, whose rate
    /// stopped growing below it, never borrows backends to probe).
    pub base: usize,
    /// Where it starts (`1 + oversubscribe`).
    pub initial: usize,
    /// A statement running this long is always stalled (`stall_limit_ms`).
    pub stall_cap: Duration,
}

/// Controller phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Doubling until the rate stops growing.
    #[default]
    Startup,
    /// Holding the limit and measuring the reference rate.
    Cruise,
    /// Trying a higher limit.
    ProbeUp,
    /// Trying a lower limit.
    ProbeDown,
}

impl Phase {
    /// Lowercase name for reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Startup => "startup",
            Self::Cruise => "cruise",
            Self::ProbeUp => "probe_up",
            Self::ProbeDown => "probe_down",
        }
    }
}

/// The limit and the inputs it was derived from (for `/status`, `/metrics`
/// and `SHOW MYPLEX GROUPS`).
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Estimate {
    /// The current limit on busy (not stalled) statements.
    pub limit: usize,
    /// Completions per second in the last closed interval.
    pub completions_per_s: f64,
    /// Mean statement latency in the last closed interval, ms.
    pub latency_ms: f64,
    /// Latency baseline: the lowest interval mean of the recent ones, ms.
    pub baseline_ms: f64,
    /// Typical latency (moving average of interval means), ms.
    pub typical_ms: f64,
    /// Running statements now counted as stalled.
    pub stalled: usize,
    /// Statements that completed after being counted as stalled.
    pub stalled_total: u64,
    /// Running time after which a statement counts as stalled, ms.
    pub stall_after_ms: f64,
    /// Workload shifts seen (the search restarted).
    pub shifts: u64,
    /// Controller phase.
    pub phase: Phase,
}

struct Running {
    ticket: u64,
    start: Duration,
    stalled: bool,
}

/// Interval floor.
const INTERVAL: Duration = Duration::from_millis(100);
/// Interval = max(INTERVAL, this × baseline).
const INTERVAL_RTTS: u32 = 5;
/// Completions wanted per interval (waived after 4 × the interval).
const MIN_SAMPLES: u64 = 20;
/// Closed intervals the reported baseline is the minimum of.
const BASELINE_WINDOW: usize = 20;
/// A change of the interval mean latency by this factor is a new workload.
const SHIFT: u32 = 4;
/// A limit from before a rise of the latency is restored when the latency
/// falls back within this long (a server stall lasts seconds; after longer
/// the statements changed).
const RESTORE_WITHIN: Duration = Duration::from_secs(10);
/// A borrowed limit restored after a stall is kept when the next interval
/// reaches this share of the rate before the stall.
const RESTORE_RATE: f64 = 0.7;
/// A slowdown without stalls this many intervals after a limit was
/// restored means the restore was wrong (the statements changed).
const RESTORE_TRUST: u64 = 3;
/// Cruise intervals between probes.
const CRUISE: u32 = 3;
/// The rate's interval-to-interval spread assumed before it is measured
/// (fail closed: on the lab box it is 20–25 % at a fixed limit, with the
/// load generator and the proxy on the server's CPUs).
const DEFAULT_SPREAD: f64 = 0.2;
/// Same-limit interval pairs measured before the spread replaces the
/// default.
const SPREAD_SAMPLES: u32 = 4;
/// Cruise cycles a failed borrowing step waits before the next: this many
/// after the first failure, doubling after each further one…
const BORROW_BACKOFF_MIN: u64 = 4;
/// …up to this many.
const BORROW_BACKOFF_MAX: u64 = 64;
/// Stalled after this many baselines…
const STALL_FACTOR: u32 = 8;
/// …but never sooner than this.
const STALL_FLOOR: Duration = Duration::from_millis(5);

/// One group's adaptive limit.
pub struct Adaptive {
    t: Tuning,
    limit: usize,
    phase: Phase,
    running: Vec<Running>,
    stalled: usize,
    stalled_total: u64,
    shifts: u64,
    // The open interval.
    since: Duration,
    done: u64,
    stalled_done: u64,
    latency_sum: Duration,
    gate_checks: u64,
    gate_blocked: u64,
    // History.
    baselines: VecDeque<Duration>,
    /// Moving average of interval mean latencies: what "usual" means for
    /// the stall threshold and the interval length.
    typical: Option<Duration>,
    last_rate: f64,
    last_latency: Duration,
    // Cruise and probes.
    cruise_left: u32,
    cruise_sum: f64,
    cruise_latency: Duration,
    cruise_n: u32,
    reference: f64,
    /// Mean latency at the reference rate.
    reference_latency: Duration,
    before_probe: usize,
    next_up: bool,
    // Startup.
    best: f64,
    strikes: u32,
    tried: Vec<(usize, f64)>,
    /// The typical latency and the limit before the latest rise of the
    /// latency by `SHIFT` (a server stall or longer statements), and when.
    before_shift: Option<(Duration, usize, Duration, f64)>,
    /// After a borrowed limit was restored: the rate the next interval
    /// must reach to keep it.
    verify_restore: Option<f64>,
    /// Closed intervals with completions, and the one that last restored
    /// a limit from `before_shift`.
    intervals: u64,
    restored_at: Option<u64>,
    // Borrowing (a limit above the base share).
    /// The previous limited interval: its limit and rate.
    prev_limited: Option<(usize, f64)>,
    /// Moving mean of the relative standard deviation of the rate between
    /// two limited intervals at the same limit, and how many pairs fed it.
    spread: f64,
    spread_n: u32,
    /// The first rate of a borrowing step that passed, waiting for a
    /// second interval to confirm it.
    confirm: Option<f64>,
    /// Cruise cycles to wait after the latest failed borrowing step, and
    /// the interval before which no new one starts.
    borrow_backoff: u64,
    borrow_after: u64,
    /// The highest limit above the base share held lately, and when: a
    /// Startup climbing back to it (after a server stall) doubles on the
    /// usual evidence, as it did before borrowing needed more.
    proven: Option<(usize, Duration)>,
}

impl Adaptive {
    /// A controller starting at `t.initial`, in Startup.
    pub fn new(t: Tuning, now: Duration) -> Self {
        let t = Tuning {
            min: t.min.max(1),
            max: t.max.max(t.min.max(1)),
            ..t
        };
        Self {
            limit: t.initial.clamp(t.min, t.max),
            t,
            phase: Phase::Startup,
            running: Vec::new(),
            stalled: 0,
            stalled_total: 0,
            shifts: 0,
            since: now,
            done: 0,
            stalled_done: 0,
            latency_sum: Duration::ZERO,
            gate_checks: 0,
            gate_blocked: 0,
            baselines: VecDeque::new(),
            typical: None,
            last_rate: 0.0,
            last_latency: Duration::ZERO,
            cruise_left: CRUISE,
            cruise_sum: 0.0,
            cruise_latency: Duration::ZERO,
            cruise_n: 0,
            reference: 0.0,
            reference_latency: Duration::ZERO,
            before_probe: 0,
            next_up: true,
            best: 0.0,
            strikes: 0,
            tried: Vec::new(),
            before_shift: None,
            verify_restore: None,
            intervals: 0,
            restored_at: None,
            prev_limited: None,
            spread: DEFAULT_SPREAD,
            spread_n: 0,
            confirm: None,
            borrow_backoff: 0,
            borrow_after: 0,
            proven: None,
        }
    }

    /// New bounds (a configuration reload): the limit is clamped into
    /// them and the search goes on from there.
    pub fn set_bounds(&mut self, max: usize, base: usize, stall_cap: Duration) {
        self.t.max = max.max(self.t.min);
        self.t.base = base;
        self.t.stall_cap = stall_cap;
        self.limit = self.limit.clamp(self.t.min, self.t.max);
    }

    /// The limit's upper bound now.
    pub fn max(&self) -> usize {
        self.t.max
    }

    /// The limit on busy statements.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Running statements that count against the limit.
    pub fn busy(&self) -> usize {
        self.running.len() - self.stalled
    }

    /// Running statements counted as stalled.
    pub fn stalled(&self) -> usize {
        self.stalled
    }

    /// A statement was admitted.
    pub fn start(&mut self, ticket: u64, now: Duration) {
        self.running.push(Running {
            ticket,
            start: now,
            stalled: false,
        });
    }

    /// A statement finished (or its admission was undone). Unknown tickets
    /// are ignored.
    pub fn finish(&mut self, ticket: u64, now: Duration) {
        let Some(i) = self.running.iter().position(|r| r.ticket == ticket) else {
            return;
        };
        let r = self.running.swap_remove(i);
        if r.stalled {
            self.stalled -= 1;
            self.stalled_total += 1;
            self.stalled_done += 1;
        }
        self.done += 1;
        self.latency_sum += now.saturating_sub(r.start);
    }

    /// An admission was undone before the statement ran: no sample.
    pub fn forget(&mut self, ticket: u64) {
        if let Some(i) = self.running.iter().position(|r| r.ticket == ticket)
            && self.running.swap_remove(i).stalled
        {
            self.stalled -= 1;
        }
    }

    /// One observation of the admission gate: `blocked` when requests wait
    /// because busy statements reached the limit. The share of blocked
    /// observations in an interval decides whether it was limited.
    pub fn gate(&mut self, blocked: bool) {
        self.gate_checks += 1;
        self.gate_blocked += u64::from(blocked);
    }

    /// The lowest recent interval mean latency, if any interval closed.
    fn baseline(&self) -> Option<Duration> {
        self.baselines.iter().min().copied()
    }

    /// Running time after which a statement counts as stalled.
    pub fn stall_after(&self) -> Duration {
        match self.typical {
            Some(b) => (b * STALL_FACTOR).clamp(STALL_FLOOR, self.t.stall_cap.max(STALL_FLOOR)),
            None => self.t.stall_cap,
        }
    }

    fn interval(&self) -> Duration {
        let mut b = self.typical.unwrap_or(Duration::ZERO);
        // Statements quicker than usual (a stall just ended): the interval
        // follows them, so the controller sees the end within ~5 of them.
        if self.done >= MIN_SAMPLES {
            let now = self.latency_sum / u32::try_from(self.done).unwrap_or(u32::MAX);
            if now * SHIFT < b {
                b = now;
            }
        }
        (b * INTERVAL_RTTS).clamp(INTERVAL, Duration::from_secs(5))
    }

    /// Timer: marks statements that ran too long as stalled and closes the
    /// interval when due. Returns true when room may have opened (call
    /// dispatch).
    pub fn tick(&mut self, now: Duration) -> bool {
        let after = self.stall_after();
        let before = self.stalled;
        for r in &mut self.running {
            if !r.stalled && now.saturating_sub(r.start) >= after {
                r.stalled = true;
                self.stalled += 1;
            }
        }
        let old_limit = self.limit;
        let (elapsed, interval) = (now.saturating_sub(self.since), self.interval());
        if elapsed >= interval && (self.done >= MIN_SAMPLES || elapsed >= interval * 4) {
            self.close(now);
        }
        self.stalled > before || self.limit > old_limit
    }

    /// Current values.
    pub fn estimate(&self) -> Estimate {
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        Estimate {
            limit: self.limit,
            completions_per_s: self.last_rate,
            latency_ms: ms(self.last_latency),
            baseline_ms: self.baseline().map_or(0.0, ms),
            typical_ms: self.typical.map_or(0.0, ms),
            stalled: self.stalled,
            stalled_total: self.stalled_total,
            stall_after_ms: ms(self.stall_after()),
            shifts: self.shifts,
            phase: self.phase,
        }
    }

    /// One probing step up: × 1.25, but never across the base share: from
    /// it, the step into the common pool is a doubling (big enough for its
    /// gain to show above the rate's noise).
    fn up(&self, l: usize) -> usize {
        let up = (l + 1).max((l as f64 * 1.25).ceil() as usize);
        let up = match l.cmp(&self.t.base) {
            std::cmp::Ordering::Less => up.min(self.t.base),
            std::cmp::Ordering::Equal => l * 2,
            std::cmp::Ordering::Greater => up,
        };
        up.min(self.t.max)
    }

    /// One probing step down: × 0.8, never across the base share from
    /// above it.
    fn down(&self, l: usize) -> usize {
        let down = (l.saturating_sub(1)).min((l as f64 * 0.8).floor() as usize);
        let floor = if l > self.t.base { self.t.base } else { 0 };
        down.max(floor).max(self.t.min)
    }

    /// The rate's relative spread between intervals at one limit: measured
    /// once a few pairs were seen (never below the counting noise of
    /// `done` completions), the default before.
    fn spread(&self, done: u64) -> f64 {
        let counting = 1.0 / (done.max(1) as f64).sqrt();
        if self.spread_n >= SPREAD_SAMPLES {
            self.spread.max(counting)
        } else {
            DEFAULT_SPREAD.max(counting)
        }
    }

    /// The gain over the rate below it that a limit above the base share
    /// must show, twice in a row, to be kept: 2.5 × the spread, at least
    /// 25 % and at most half a doubling's (the midpoint between
    /// "saturated" and "scales with concurrency"). On this machine's noise
    /// one interval gaining 25 % means nothing; every such step borrowed.
    fn borrow_gain(&self, done: u64) -> f64 {
        (2.5 * self.spread(done)).clamp(0.25, 0.5)
    }

    /// True when a step from `from` to `to` would borrow (go above the base
    /// share) and a failed borrowing step asks to wait.
    fn borrow_held_back(&self, from: usize, to: usize) -> bool {
        to > self.t.base && to > from && self.intervals < self.borrow_after
    }

    /// A borrowing step failed: the next waits twice as long as the last.
    fn borrow_failed(&mut self) {
        self.borrow_backoff =
            (self.borrow_backoff * 2).clamp(BORROW_BACKOFF_MIN, BORROW_BACKOFF_MAX);
        self.borrow_after = self.intervals + self.borrow_backoff * u64::from(CRUISE + 1);
    }

    /// A borrowing step held: no wait before the next.
    fn borrow_held(&mut self) {
        self.borrow_backoff = 0;
        self.borrow_after = 0;
    }

    /// A borrowing step's interval that `passed` is seen twice: the first
    /// is kept and `None` returned (measure another at the same limit), the
    /// second gives the lower of the two rates. A failing one counts as it
    /// is and clears the first.
    fn second_look(&mut self, passed: bool, rate: f64) -> Option<f64> {
        match (passed, self.confirm.take()) {
            (true, None) => {
                self.confirm = Some(rate);
                None
            }
            (true, Some(first)) => Some(rate.min(first)),
            (false, _) => Some(rate),
        }
    }

    /// Feeds the spread with a limited interval's `rate`.
    fn measure_spread(&mut self, rate: f64) {
        if let Some((limit, prev)) = self.prev_limited
            && limit == self.limit
            && rate + prev > 0.0
        {
            // E|X1 − X2| = 1.128 σ for two normal samples.
            let d = (rate - prev).abs() / ((rate + prev) / 2.0) / 1.128;
            self.spread = if self.spread_n == 0 {
                d
            } else {
                self.spread + (d - self.spread) / 8.0
            };
            self.spread_n = self.spread_n.saturating_add(1);
        }
        self.prev_limited = Some((self.limit, rate));
    }

    fn enter_cruise(&mut self, limit: usize) {
        self.limit = limit;
        self.phase = Phase::Cruise;
        self.confirm = None;
        self.cruise_left = CRUISE;
        self.cruise_sum = 0.0;
        self.cruise_latency = Duration::ZERO;
        self.cruise_n = 0;
    }

    fn enter_startup(&mut self, rate: f64) {
        self.phase = Phase::Startup;
        self.confirm = None;
        self.best = rate;
        self.strikes = 0;
        self.tried.clear();
        self.tried.push((self.limit, rate));
        let next = (self.limit * 2).min(self.t.max);
        self.limit = if self.borrow_held_back(self.limit, next) {
            next.min(self.t.base.max(self.limit))
        } else {
            next
        };
    }

    /// Ends Startup on the smallest limit tried that reached 90 % of the
    /// best rate.
    fn settle(&mut self) {
        let best = self.best;
        let settle = self
            .tried
            .iter()
            .filter(|(_, r)| *r >= 0.9 * best)
            .map(|(l, _)| *l)
            .min()
            .unwrap_or(self.limit);
        self.enter_cruise(settle);
    }

    /// Borrowed concurrency is not kept: the limit goes back to the base
    /// share at most.
    fn back_to_base(&mut self) {
        self.limit = self.limit.min(self.t.base).max(self.t.min);
    }

    /// An interval whose mean `latency` is `SHIFT` × away from the
    /// `previous` typical one (`stalled`: most of what completed in it had
    /// stalled).
    fn on_shift(
        &mut self,
        latency: Duration,
        previous: Duration,
        stalled: bool,
        now: Duration,
        rate_before: f64,
    ) {
        self.shifts += 1;
        // Another workload: what borrowing did before says nothing now.
        self.confirm = None;
        self.verify_restore = None;
        self.prev_limited = None;
        self.borrow_held();
        if latency > previous * SHIFT {
            // Slower. Most of what completed had stalled: the server
            // stalled (a flush, a checkpoint: every statement in flight
            // finishes late) or the statements now wait far longer
            // (`SLEEP`, locks) — waits never want less concurrency, so the
            // limit is kept and the search goes upwards from it. Otherwise
            // it is more work per statement (or more admitted than the
            // server runs at once, which looks the same), or the onset of a
            // stall: borrowed concurrency is not kept.
            let restored_lately = self
                .restored_at
                .is_some_and(|at| self.intervals.saturating_sub(at) <= RESTORE_TRUST);
            if !stalled && restored_lately {
                // The limit restored an interval or two ago was too much:
                // the statements did change. Not again.
                self.before_shift = None;
            } else if self.before_shift.is_none() {
                // Remembered, to come back to when the latency does.
                self.before_shift = Some((previous, self.limit, now, rate_before));
            }
            if !stalled {
                self.back_to_base();
            }
        } else if let Some((typical, limit, at, rate)) = self.before_shift
            && latency * SHIFT >= typical
            && now.saturating_sub(at) <= RESTORE_WITHIN
        {
            // Back to the latency before the last rise: the stall ended (or
            // the old statements came back). Their limit holds (remembered
            // until the latency is back near theirs: the stall's tail may
            // take another interval to drain).
            self.restored_at = Some(self.intervals);
            let limit = limit.clamp(self.t.min, self.t.max);
            self.enter_cruise(limit);
            // A borrowed limit taken back must deliver the rate it had: the
            // same latency may be other statements (CPU-bound ones at the
            // base share can look like the disk-bound ones before, and
            // their restored limit thrashed the CPUs).
            if limit > self.t.base {
                self.verify_restore = Some(rate * RESTORE_RATE);
            }
            return;
        } else {
            // Quicker statements: borrowed concurrency is not kept (a
            // CPU-bound load after an I/O-bound one would over-admit).
            self.before_shift = None;
            self.back_to_base();
        }
        self.phase = Phase::Startup;
        self.best = 0.0;
        self.strikes = 0;
        self.tried.clear();
    }

    fn close(&mut self, now: Duration) {
        let elapsed = now.saturating_sub(self.since).max(Duration::from_micros(1));
        let (done, sum, stalled_done) = (self.done, self.latency_sum, self.stalled_done);
        // Limited: demand exceeded the limit for most of the interval, and
        // the limit was what held statements back (not stalled ones running
        // beside it).
        let limited = self.gate_checks > 0
            && self.gate_blocked * 2 >= self.gate_checks
            && stalled_done * 4 <= done;
        self.since = now;
        self.done = 0;
        self.stalled_done = 0;
        self.latency_sum = Duration::ZERO;
        self.gate_checks = 0;
        self.gate_blocked = 0;
        if done == 0 {
            return;
        }
        self.intervals += 1;
        let rate = done as f64 / elapsed.as_secs_f64();
        let latency = sum / u32::try_from(done).unwrap_or(u32::MAX);
        let rate_before = self.last_rate;
        self.last_rate = rate;
        self.last_latency = latency;
        // A mean latency 4 × away from the typical one in one interval is
        // not queueing (one doubling of the limit at most doubles it): the
        // statements changed. Rates before and after do not compare, so the
        // search starts over from here.
        let previous = self.typical.unwrap_or(latency);
        let shifted = latency > previous * SHIFT || latency * SHIFT < previous;
        if shifted {
            self.baselines.clear();
        }
        if self.baselines.len() == BASELINE_WINDOW {
            self.baselines.pop_front();
        }
        self.baselines.push_back(latency);
        // Slow to fall, quick to rise: a workload of long statements stops
        // looking stalled within an interval or two.
        self.typical = Some(match self.typical {
            _ if shifted => latency,
            Some(t) if latency < t => (t * 3 + latency) / 4,
            Some(t) => (t + latency) / 2,
            None => latency,
        });
        if shifted {
            self.on_shift(
                latency,
                previous,
                stalled_done * 2 >= done,
                now,
                rate_before,
            );
            return;
        }
        if let Some(floor) = self.verify_restore.take()
            && rate < floor
        {
            // The restored limit did not deliver: other statements now.
            self.before_shift = None;
            self.back_to_base();
            self.phase = Phase::Startup;
            self.confirm = None;
            self.best = 0.0;
            self.strikes = 0;
            self.tried.clear();
            return;
        }
        if self.before_shift.is_some_and(|(typical, _, at, _)| {
            latency < typical * 2 || now.saturating_sub(at) > RESTORE_WITHIN
        }) {
            self.before_shift = None;
        }
        if !limited {
            // Demand stayed below the limit: nothing learned about capacity.
            self.prev_limited = None;
            match self.phase {
                Phase::ProbeUp | Phase::ProbeDown => {
                    // Nothing learned in that direction: the next probe
                    // tries the other (always up, a limit above the demand
                    // was never checked from below again).
                    self.next_up = self.phase == Phase::ProbeDown;
                    self.enter_cruise(self.before_probe);
                }
                // Startup doubled past the demand: growth ends here. Into
                // the common pool, such an interval proved nothing (its rate
                // is the backlog of the limit below draining): borrowing
                // settles on what was confirmed.
                Phase::Startup if !self.tried.is_empty() => {
                    if self.limit <= self.t.base {
                        self.tried.push((self.limit, rate));
                        self.best = self.best.max(rate);
                    }
                    self.settle();
                }
                _ => {}
            }
            return;
        }
        // Relative noise of a rate counted from `done` completions; a
        // tolerance never exceeds half of what the step would change if the
        // rate scaled with the limit (the midpoint between "saturated" and
        // "not saturated").
        self.measure_spread(rate);
        let noise = 1.0 / (done as f64).sqrt();
        let half_step =
            |from: usize, to: usize| (to as f64 - from as f64).abs() / from.max(1) as f64 / 2.0;
        // A step from the base share into the common pool borrows
        // backends: it is kept only on a gain above the rate's measured
        // spread, seen in two intervals in a row (the lower of the two
        // counts), unless it goes back to a limit held lately. Steps within
        // the pool follow the usual rules: it was entered on evidence.
        let borrowing = self.limit > self.t.base;
        if borrowing && self.phase == Phase::Cruise {
            let highest = self.proven.map_or(0, |(l, _)| l).max(self.limit);
            self.proven = Some((highest, now));
        }
        let proven = self.proven;
        let known_limit = move |limit: usize| {
            proven.is_some_and(|(l, at)| limit <= l && now.saturating_sub(at) <= RESTORE_WITHIN)
        };
        let from = match self.phase {
            Phase::Startup => self.tried.last().map_or(0, |(l, _)| *l),
            _ => self.before_probe,
        };
        let entering = borrowing && from <= self.t.base && !known_limit(self.limit);
        match self.phase {
            Phase::Startup => {
                let threshold = if entering {
                    1.0 + self.borrow_gain(done)
                } else {
                    1.25
                };
                // Every doubling into or within the pool is seen twice: the
                // first interval after it also drains the backlog the lower
                // limit queued (a burst, not the new limit's rate).
                let confirmed = borrowing && !known_limit(self.limit);
                let Some(rate) = self.second_look(confirmed && rate >= threshold * self.best, rate)
                else {
                    return;
                };
                // A borrowing step that did not pass gained nothing proven:
                // settling must not choose it for a gain within noise.
                let proven = rate >= threshold * self.best;
                let recorded = if confirmed && !proven {
                    rate.min(self.best)
                } else {
                    rate
                };
                self.tried.push((self.limit, recorded));
                if proven {
                    self.best = rate;
                    self.strikes = 0;
                    if entering {
                        self.borrow_held();
                    }
                } else {
                    self.best = self.best.max(recorded);
                    self.strikes += 1;
                }
                let next = (self.limit * 2).min(self.t.max);
                // Doubling into the common pool needs a rate measured at
                // this limit to compare with (not the first interval of a
                // search) and no failed borrowing step asking to wait.
                let no_reference = next > self.t.base && self.tried.len() < 2 && !known_limit(next);
                if self.strikes >= 2
                    || self.limit >= self.t.max
                    || (self.strikes > 0 && next > self.t.base)
                    || no_reference
                    || self.borrow_held_back(self.limit, next)
                {
                    if entering && self.strikes > 0 {
                        self.borrow_failed();
                    }
                    self.settle();
                } else {
                    self.limit = next;
                }
            }
            Phase::Cruise => {
                self.cruise_sum += rate;
                self.cruise_latency += latency;
                self.cruise_n += 1;
                self.cruise_left = self.cruise_left.saturating_sub(1);
                if self.cruise_left > 0 {
                    return;
                }
                self.reference = self.cruise_sum / f64::from(self.cruise_n.max(1));
                self.reference_latency = self.cruise_latency / self.cruise_n.max(1);
                self.before_probe = self.limit;
                let (up, down) = (self.up(self.limit), self.down(self.limit));
                let up_ok = up > self.limit && !self.borrow_held_back(self.limit, up);
                if up_ok && (self.next_up || down == self.limit) {
                    self.limit = up;
                    self.phase = Phase::ProbeUp;
                } else {
                    self.limit = down;
                    self.phase = Phase::ProbeDown;
                }
                if self.limit == self.before_probe {
                    // Pinned between min and max: nothing to try.
                    self.enter_cruise(self.limit);
                }
            }
            Phase::ProbeUp => {
                let step = self.limit as f64 / self.before_probe.max(1) as f64;
                let tolerance = if entering {
                    self.borrow_gain(done)
                } else {
                    2.0 * noise
                };
                let keep = 1.0
                    + tolerance
                        .min(half_step(self.before_probe, self.limit))
                        .max(0.05);
                let reference = self.reference.max(f64::MIN_POSITIVE);
                let Some(rate) = self.second_look(borrowing && rate >= keep * reference, rate)
                else {
                    return;
                };
                let gain = rate / reference;
                if entering && gain >= keep {
                    self.borrow_held();
                }
                if gain >= 1.0 + 0.8 * (step - 1.0) && self.limit < self.t.max {
                    // Scaled with concurrency: far from saturation.
                    self.enter_startup(rate);
                } else if gain >= keep {
                    self.reference = rate;
                    self.reference_latency = latency;
                    self.before_probe = self.limit;
                    let up = self.up(self.limit);
                    if up == self.limit {
                        self.enter_cruise(up);
                    } else {
                        self.limit = up;
                    }
                } else {
                    if entering {
                        self.borrow_failed();
                    }
                    self.next_up = false;
                    self.enter_cruise(self.before_probe);
                }
            }
            Phase::ProbeDown => {
                let tolerance = (1.5 * noise)
                    .min(half_step(self.before_probe, self.limit))
                    .max(0.03);
                // Less concurrency at the same rate must show as a shorter
                // latency (Little's law): at least half the step's share.
                // A rate within noise whose latency did not fall is noise
                // (waits on a disk that is not saturated): going down on it
                // drifted the limit far below what the server absorbs.
                let step = self.limit as f64 / self.before_probe.max(1) as f64;
                let shorter = latency.as_secs_f64()
                    <= self.reference_latency.as_secs_f64() * (1.0 - (1.0 - step) / 2.0);
                if rate >= self.reference * (1.0 - tolerance) && shorter {
                    // Same throughput with less concurrency (or more: the
                    // higher limit thrashed): keep going down, measuring
                    // against the best rate seen.
                    self.reference = self.reference.max(rate);
                    self.reference_latency = latency;
                    self.before_probe = self.limit;
                    let down = self.down(self.limit);
                    if down == self.limit {
                        self.enter_cruise(down);
                    } else {
                        self.limit = down;
                    }
                } else {
                    self.next_up = true;
                    self.enter_cruise(self.before_probe);
                }
            }
        }
    }
}

#[cfg(test)]
#[path = "adaptive_sim.rs"]
mod sim;

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn tuning(initial: usize, max: usize) -> Tuning {
        Tuning {
            min: 1,
            max,
            base: max,
            initial,
            stall_cap: ms(500),
        }
    }

    #[test]
    fn long_running_statements_stop_counting_as_busy() {
        let mut a = Adaptive::new(tuning(4, 16), ms(0));
        // Teach it a 2 ms service time: one interval of quick statements.
        let mut t = 0;
        for i in 0..100 {
            a.start(i, ms(t));
            t += 2;
            a.finish(i, ms(t));
        }
        a.tick(ms(t));
        assert_eq!(a.estimate().baseline_ms, 2.0);
        assert_eq!(a.estimate().typical_ms, 2.0);
        assert_eq!(a.stall_after(), ms(16), "8 × the typical latency");
        // Three statements start; two of them run long.
        a.start(1000, ms(t));
        a.start(1001, ms(t));
        a.start(1002, ms(t + 10));
        assert_eq!(a.busy(), 3);
        assert!(!a.tick(ms(t + 15)), "nothing has run 16 ms yet");
        assert_eq!(a.busy(), 3);
        assert!(a.tick(ms(t + 16)), "room opened");
        assert_eq!((a.busy(), a.stalled()), (1, 2));
        // The third one crosses its own threshold later.
        a.tick(ms(t + 26));
        assert_eq!((a.busy(), a.stalled()), (0, 3));
        // A stalled statement's completion still counts as one.
        a.finish(1000, ms(t + 900));
        let e = a.estimate();
        assert_eq!((e.stalled, e.stalled_total), (2, 1));
        assert_eq!(a.done, 1);
        // Unknown and repeated tickets are ignored.
        a.finish(1000, ms(t + 901));
        a.finish(77, ms(t + 901));
        assert_eq!(a.running.len(), 2);
    }

    #[test]
    fn a_workload_of_long_statements_stops_looking_stalled() {
        let mut a = Adaptive::new(tuning(16, 16), ms(0));
        let mut t = 0;
        let mut id = 0;
        // Quick statements first (a login's setup queries)…
        for _ in 0..20 {
            id += 1;
            a.start(id, ms(t));
            t += 3;
            a.finish(id, ms(t));
        }
        t = 100;
        a.tick(ms(t));
        assert_eq!(a.stall_after(), ms(24));
        // …then 16 clients running 50 ms statements back to back.
        let mut stalled_per_round = Vec::new();
        for _ in 0..6 {
            let first = id + 1;
            for _ in 0..16 {
                id += 1;
                a.start(id, ms(t));
            }
            let before = a.estimate().stalled_total;
            for step in 1..=5 {
                a.tick(ms(t + step * 10));
            }
            t += 50;
            for i in first..=id {
                a.finish(i, ms(t));
            }
            a.tick(ms(t));
            stalled_per_round.push(a.estimate().stalled_total - before);
        }
        assert_eq!(stalled_per_round[0], 16, "at first they look stalled");
        assert_eq!(
            stalled_per_round[2..],
            [0, 0, 0, 0],
            "then the typical latency follows: {stalled_per_round:?}"
        );
        assert!(a.stall_after() >= ms(200), "{:?}", a.stall_after());
    }

    #[test]
    fn before_any_sample_the_stall_cap_applies() {
        let mut a = Adaptive::new(tuning(4, 16), ms(0));
        a.start(1, ms(0));
        a.tick(ms(499));
        assert_eq!(a.stalled(), 0);
        a.tick(ms(500));
        assert_eq!(a.stalled(), 1);
    }

    #[test]
    fn bounds_hold() {
        let a = Adaptive::new(tuning(40, 16), ms(0));
        assert_eq!(a.limit(), 16, "never above the group's backends");
        let a = Adaptive::new(tuning(0, 0), ms(0));
        assert_eq!(a.limit(), 1, "never below one");
        assert_eq!(a.down(1), 1);
        assert_eq!(a.up(1), 1);
        let a = Adaptive::new(tuning(4, 64), ms(0));
        assert_eq!((a.up(4), a.down(4)), (5, 3));
        assert_eq!((a.up(20), a.down(20)), (25, 16));
    }

    #[test]
    fn unlimited_intervals_do_not_move_the_limit() {
        let mut a = Adaptive::new(tuning(4, 64), ms(0));
        let mut t = 0;
        for round in 0..20u64 {
            for i in 0..20 {
                a.start(round * 100 + i, ms(t));
                a.gate(false);
                t += 5;
                a.finish(round * 100 + i, ms(t));
            }
            a.tick(ms(t));
        }
        assert_eq!(a.limit(), 4, "demand below the limit teaches nothing");
        assert!(a.estimate().completions_per_s > 150.0);
    }

    /// One limited interval of `len_ms` in which `n` statements of
    /// `lat_ms` each complete (demand above the limit throughout).
    fn limited(a: &mut Adaptive, t: &mut u64, ticket: &mut u64, n: u64, lat_ms: u64, len_ms: u64) {
        let start = *t;
        for i in 0..n {
            let s = start + i * (len_ms - lat_ms) / n;
            *ticket += 1;
            a.start(*ticket, ms(s));
            a.gate(true);
            a.finish(*ticket, ms(s + lat_ms));
        }
        *t = start + len_ms;
        a.tick(ms(*t));
    }

    /// A controller with base share 16 and room to borrow up to 256,
    /// starting at its base.
    fn with_room_to_borrow() -> Adaptive {
        Adaptive::new(
            Tuning {
                initial: 16,
                base: 16,
                ..tuning(16, 256)
            },
            ms(0),
        )
    }

    /// [`with_room_to_borrow`] cruising at its base on a steady rate, then
    /// driven to its first probe up (a doubling into the common pool).
    fn at_borrowing_probe() -> (Adaptive, u64, u64) {
        let mut a = with_room_to_borrow();
        let (mut t, mut ticket) = (0, 0);
        while a.limit() != 32 {
            limited(&mut a, &mut t, &mut ticket, 400, 4, 200);
            assert!(t < 10_000, "no probe up: {:?}", a.estimate());
        }
        assert_eq!(a.estimate().phase, Phase::ProbeUp);
        (a, t, ticket)
    }

    #[test]
    fn from_the_base_share_the_probe_up_is_a_doubling() {
        let a = with_room_to_borrow();
        assert_eq!((a.up(12), a.up(14), a.up(16), a.up(32)), (15, 16, 32, 40));
        assert_eq!((a.down(40), a.down(18), a.down(16)), (32, 16, 12));
    }

    #[test]
    fn one_lucky_interval_does_not_borrow() {
        let (mut a, mut t, mut ticket) = at_borrowing_probe();
        // +60 % for one interval (noise on a shared machine), then as before.
        limited(&mut a, &mut t, &mut ticket, 640, 4, 200);
        assert_eq!(a.limit(), 32, "waits for a second interval");
        limited(&mut a, &mut t, &mut ticket, 400, 4, 200);
        assert_eq!(a.limit(), 16, "not confirmed: back to the base share");
        // The failed step backs off: the next probes go down, not up.
        let mut most = 0;
        for _ in 0..12 {
            limited(&mut a, &mut t, &mut ticket, 400, 4, 200);
            most = most.max(a.limit());
        }
        assert!(most <= 16, "borrowed again at once: {most}");
    }

    #[test]
    fn a_gain_seen_twice_borrows() {
        let (mut a, mut t, mut ticket) = at_borrowing_probe();
        limited(&mut a, &mut t, &mut ticket, 640, 4, 200);
        limited(&mut a, &mut t, &mut ticket, 640, 4, 200);
        assert!(
            a.limit() > 32,
            "kept and probing further: {:?}",
            a.estimate()
        );
    }

    #[test]
    fn the_spread_raises_the_gain_a_borrowing_step_needs() {
        let (mut a, mut t, mut ticket) = at_borrowing_probe();
        assert!(
            (a.borrow_gain(400) - 0.5).abs() < 1e-9,
            "before the spread is measured: the most, 50 %"
        );
        for _ in 0..4 {
            a.enter_cruise(16);
            limited(&mut a, &mut t, &mut ticket, 400, 4, 200);
        }
        assert!(
            (a.borrow_gain(400) - 0.25).abs() < 1e-9,
            "a steady rate: 25 %"
        );
        // Rates swinging ±20 % between intervals at one limit.
        a.enter_cruise(16);
        for i in 0..24 {
            let n = if i % 2 == 0 { 480 } else { 320 };
            limited(&mut a, &mut t, &mut ticket, n, 4, 200);
            a.enter_cruise(16);
        }
        let gain = a.borrow_gain(400);
        assert!(gain > 0.4, "{gain} (spread {})", a.spread(400));
    }
}
