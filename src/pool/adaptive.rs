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
//! - **The server waits on its disk** (its gauges: reads and fsyncs in
//!   progress, more of them than row-lock waits): the thread pool's rule,
//!   a thread waiting on a read does not count and another starts. The
//!   limit is the group's ceiling and the search pauses, resuming (its
//!   reference measured afresh) when the verdict ends. On the lab server,
//!   I/O-bound, the search followed the disk's noise instead: a latency
//!   shift about once a second took the limit back to the base share, the
//!   CPUs 29–58 % idle at 0.26–0.63 × direct; at the ceiling 0.72–0.77 ×
//!   direct (docs/benchmarks.md).
//! - **Stalled statements** (the proxy's `thd_wait_begin`): a statement
//!   running longer than 8 × the typical latency (a moving average of the
//!   interval means that rises quickly and falls slowly; at least 5 ms, at
//!   most `stall_limit_ms`) stops counting as busy, so it no longer holds a
//!   place under the limit. Its completion still counts: when long
//!   statements are the workload rather than outliers, the typical latency
//!   rises with them and they stop looking stalled — or, longer than
//!   `stall_limit_ms`, they all stall, a busy place frees once per
//!   threshold and the rate still follows the limit: such intervals teach
//!   the search as any other (stalls that are outliers do not, nor the
//!   first intervals after the latency rose, which may be a server stall).

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
    /// The server waits on its disk: the limit is the ceiling.
    pub disk_waits: bool,
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
/// A slowdown without stalls this many intervals after a limit was
/// restored means the restore was wrong (the statements changed).
const RESTORE_TRUST: u64 = 3;
/// Closed intervals after a rise of the latency by `SHIFT` before
/// statements at or past the stall threshold count as the workload (and
/// teach the search) rather than a stall.
const LONG_SETTLED: u64 = 3;
/// Cruise intervals between probes.
const CRUISE: u32 = 3;
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
    before_shift: Option<(Duration, usize, Duration)>,
    /// Closed intervals with completions, and the one that last restored
    /// a limit from `before_shift`.
    intervals: u64,
    restored_at: Option<u64>,
    /// The closed interval in which the latency last rose by `SHIFT`.
    risen_at: Option<u64>,
    /// The server waits on its disk (see the module doc).
    disk_waits: bool,
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
            intervals: 0,
            restored_at: None,
            risen_at: None,
            disk_waits: false,
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

    /// Starts a search upwards from the current limit (its upper bound
    /// just rose: the server began to wait): Startup, doubling while the
    /// rate grows.
    pub fn restart(&mut self) {
        if self.limit < self.t.max {
            let rate = self.last_rate;
            self.enter_startup(rate);
        }
    }

    /// The server stopped waiting (its wait gauges fell quiet): what was
    /// learnt while it waited — a limit above the base share, one to
    /// restore when a stall ends — no longer holds. The limit goes back to
    /// the base at most and cruises there; the search goes on from it.
    pub fn waits_ended(&mut self) {
        self.before_shift = None;
        if self.limit > self.t.base {
            self.enter_cruise(self.t.base);
        }
    }

    /// Whether the server waits on its disk (see the module doc); true
    /// when that raised the limit (call dispatch).
    pub fn set_disk_waits(&mut self, waits: bool) -> bool {
        let (before, was) = (self.limit(), self.disk_waits);
        self.disk_waits = waits;
        if was && !waits {
            // The search resumes where it paused; rates from before the
            // pause do not compare.
            self.enter_cruise(self.limit);
        }
        self.limit() > before
    }

    /// The limit's upper bound now.
    pub fn max(&self) -> usize {
        self.t.max
    }

    /// The limit on busy statements: the search's, or the ceiling while
    /// the server waits on its disk.
    pub fn limit(&self) -> usize {
        if self.disk_waits {
            self.t.max
        } else {
            self.limit
        }
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
        let old_limit = self.limit();
        let (elapsed, interval) = (now.saturating_sub(self.since), self.interval());
        if elapsed >= interval && (self.done >= MIN_SAMPLES || elapsed >= interval * 4) {
            self.close(now);
        }
        self.stalled > before || self.limit() > old_limit
    }

    /// Current values.
    pub fn estimate(&self) -> Estimate {
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        Estimate {
            limit: self.limit(),
            disk_waits: self.disk_waits,
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

    fn up(&self, l: usize) -> usize {
        (l + 1)
            .max((l as f64 * 1.25).ceil() as usize)
            .min(self.t.max)
    }

    fn down(&self, l: usize) -> usize {
        (l.saturating_sub(1))
            .min((l as f64 * 0.8).floor() as usize)
            .max(self.t.min)
    }

    fn enter_cruise(&mut self, limit: usize) {
        // Bounds may have moved since `limit` was tried (a reload, the
        // server's wait verdict).
        self.limit = limit.clamp(self.t.min, self.t.max);
        self.phase = Phase::Cruise;
        self.cruise_left = CRUISE;
        self.cruise_sum = 0.0;
        self.cruise_latency = Duration::ZERO;
        self.cruise_n = 0;
    }

    fn enter_startup(&mut self, rate: f64) {
        self.phase = Phase::Startup;
        self.best = rate;
        self.strikes = 0;
        self.tried.clear();
        self.tried.push((self.limit, rate));
        self.limit = (self.limit * 2).min(self.t.max);
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
    fn on_shift(&mut self, latency: Duration, previous: Duration, stalled: bool, now: Duration) {
        self.shifts += 1;
        if latency > previous * SHIFT {
            self.risen_at = Some(self.intervals);
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
                self.before_shift = Some((previous, self.limit, now));
            }
            if !stalled {
                self.back_to_base();
            }
        } else if let Some((typical, limit, at)) = self.before_shift
            && latency * SHIFT >= typical
            && now.saturating_sub(at) <= RESTORE_WITHIN
        {
            // Back to the latency before the last rise: the stall ended (or
            // the old statements came back). Their limit holds (remembered
            // until the latency is back near theirs: the stall's tail may
            // take another interval to drain).
            self.restored_at = Some(self.intervals);
            self.enter_cruise(limit.clamp(self.t.min, self.t.max));
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
        // beside it) — unless the statements themselves are longer than the
        // stall threshold (`stall_limit_ms` below their typical latency):
        // then every one of them stalls, a busy place frees once per
        // threshold, and the rate follows the limit, so it still teaches.
        // Left out, a load of long waits (`SLEEP`, lock waits no gauge
        // names) stayed at limit / threshold completions per second for
        // good: 2 places, 100 ms, 20 of the 150 sleeps a second asked for.
        // Not in the first intervals after the latency rose: that may be a
        // server stall (every statement in flight finishes late), and a
        // stall's rate says nothing about capacity — counted, the restarted
        // search read it as growth and borrowed while the server stalled.
        let long_statements = self.typical.is_some_and(|t| t >= self.stall_after())
            && self
                .risen_at
                .is_none_or(|at| self.intervals.saturating_sub(at) >= LONG_SETTLED);
        let limited = self.gate_checks > 0
            && self.gate_blocked * 2 >= self.gate_checks
            && (long_statements || stalled_done * 4 <= done);
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
        if self.disk_waits {
            // The ceiling in force: the search pauses (the typical latency
            // still follows).
            return;
        }
        if shifted {
            self.on_shift(latency, previous, stalled_done * 2 >= done, now);
            return;
        }
        if self.before_shift.is_some_and(|(typical, _, at)| {
            latency < typical * 2 || now.saturating_sub(at) > RESTORE_WITHIN
        }) {
            self.before_shift = None;
        }
        if !limited {
            // Demand stayed below the limit: nothing learned about capacity.
            match self.phase {
                Phase::ProbeUp | Phase::ProbeDown => self.enter_cruise(self.before_probe),
                // Startup doubled past the demand: growth ends here.
                Phase::Startup if !self.tried.is_empty() => {
                    self.tried.push((self.limit, rate));
                    self.best = self.best.max(rate);
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
        let noise = 1.0 / (done as f64).sqrt();
        let half_step =
            |from: usize, to: usize| (to as f64 - from as f64).abs() / from.max(1) as f64 / 2.0;
        match self.phase {
            Phase::Startup => {
                self.tried.push((self.limit, rate));
                if rate >= 1.25 * self.best {
                    self.best = rate;
                    self.strikes = 0;
                } else {
                    self.best = self.best.max(rate);
                    self.strikes += 1;
                }
                let next = (self.limit * 2).min(self.t.max);
                if self.strikes >= 2
                    || self.limit >= self.t.max
                    || (self.strikes > 0 && next > self.t.base)
                {
                    self.settle();
                } else {
                    self.limit = (self.limit * 2).min(self.t.max);
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
                if (self.next_up && up > self.limit) || down == self.limit {
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
                let gain = rate / self.reference.max(f64::MIN_POSITIVE);
                if gain >= 1.0 + 0.8 * (step - 1.0) && self.limit < self.t.max {
                    // Scaled with concurrency: far from saturation.
                    self.enter_startup(rate);
                } else if gain
                    >= 1.0
                        + (2.0 * noise)
                            .min(half_step(self.before_probe, self.limit))
                            .max(0.05)
                {
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

    /// Closed-loop clients driving a controller: each sends its next
    /// statement as soon as the last one ended, admitted as the limit
    /// allows.
    struct Clients {
        /// (ticket, end ms) of the statements in flight.
        running: Vec<(u64, u64)>,
        waiting: usize,
        next: u64,
    }

    impl Clients {
        fn new(n: usize) -> Self {
            Self {
                running: Vec::new(),
                waiting: n,
                next: 0,
            }
        }

        /// Runs from `from` to `to` ms in steps of `step`, each statement
        /// taking `latency(running)` ms (`running`: statements in flight
        /// when it starts); returns the highest limit seen and the
        /// statements completed.
        fn run(
            &mut self,
            a: &mut Adaptive,
            (from, to, step): (u64, u64, usize),
            latency: impl Fn(usize) -> u64,
        ) -> (usize, usize) {
            let (mut most, mut done) = (a.limit(), 0);
            for now in (from..to).step_by(step) {
                let before = self.running.len();
                self.running.retain(|&(ticket, end)| {
                    let over = end <= now;
                    if over {
                        a.finish(ticket, ms(now));
                    }
                    !over
                });
                let ended = before - self.running.len();
                done += ended;
                self.waiting += ended;
                a.tick(ms(now));
                while self.waiting > 0 && a.busy() < a.limit() {
                    self.next += 1;
                    a.start(self.next, ms(now));
                    let took = latency(self.running.len() + 1);
                    self.running.push((self.next, now + took));
                    self.waiting -= 1;
                }
                a.gate(self.waiting > 0);
                most = most.max(a.limit());
            }
            (most, done)
        }
    }

    #[test]
    fn waits_longer_than_the_stall_cap_still_raise_the_limit() {
        // 30 clients each waiting 200 ms a statement (`SELECT SLEEP(0.2)`,
        // a lock wait no gauge names) with `stall_limit_ms = 100`: every
        // statement stalls before it ends, a busy place frees every 100
        // ms, so the rate follows the limit and the search must climb on
        // it. It stayed at the limit it started with (20 a second of 150).
        let t = Tuning {
            min: 1,
            max: 18,
            base: 4,
            initial: 2,
            stall_cap: ms(100),
        };
        let mut a = Adaptive::new(t, ms(0));
        let mut clients = Clients::new(30);
        clients.run(&mut a, (0, 10_000, 5), |_| 200);
        let (_, done) = clients.run(&mut a, (10_000, 20_000, 5), |_| 200);
        assert!(a.limit() >= 16, "{:?}", a.estimate());
        // The last 10 s: near the 150 a second 30 sleeping clients ask for
        // (at most 18 places × 2 in flight each: all 30).
        assert!(done >= 1_300, "{done} in 10 s, {:?}", a.estimate());
    }

    #[test]
    fn a_stall_past_the_stall_cap_does_not_raise_the_limit() {
        // 2 ms statements, then for 2 s every statement takes 150 ms (a
        // server stall, past `stall_limit_ms` = 100). The
        // stall's intervals must not read as the limit's doing: counted as
        // long statements, the search restarted by the shift took its first
        // stalled interval for growth and doubled (4 → 8 here; past the
        // base share it borrows).
        let t = Tuning {
            min: 1,
            max: 64,
            base: 8,
            initial: 8,
            stall_cap: ms(100),
        };
        let mut a = Adaptive::new(t, ms(0));
        let mut clients = Clients::new(40);
        // Four cores: past four in flight, each statement takes longer.
        let cpu = |n: usize| 2 * (n as u64).div_ceil(4);
        clients.run(&mut a, (0, 3_000, 1), cpu);
        let before = a.limit();
        assert!(
            before <= 8,
            "CPU-bound, within the base: {:?}",
            a.estimate()
        );
        let (during, _) = clients.run(&mut a, (3_000, 5_000, 1), |_| 150);
        assert!(
            during <= before,
            "the stall raised the limit to {during} (before {before}): {:?}",
            a.estimate()
        );
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
}
