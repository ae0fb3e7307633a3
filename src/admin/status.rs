//! The `/status` JSON report: TPS, QPS and latency percentiles over the last
//! 10 s and 60 s, overall and per thread group, plus the live scheduler state
//! and the per-user figures.

use serde::Serialize;

use crate::frontend::Shared;
use crate::metrics::Windows;
use crate::metrics::window::{Summary, Window};
use crate::pool::adaptive::Estimate;

/// One time window.
#[derive(Debug, Serialize)]
pub struct Span {
    /// Transactions per second.
    pub tps: f64,
    /// Statements per second.
    pub qps: f64,
    /// Statement latency (queue wait + execution).
    pub statement: Summary,
    /// Transaction latency.
    pub transaction: Summary,
    /// Queue wait.
    pub queue_wait: Summary,
}

fn span(ws: &[&Windows], secs: u64) -> Span {
    let of = |pick: fn(&Windows) -> &Window| {
        let picked: Vec<&Window> = ws.iter().map(|w| pick(w)).collect();
        Window::summary_of(&picked, secs)
    };
    let statement = of(|w| &w.statements);
    let transaction = of(|w| &w.transactions);
    Span {
        tps: transaction.rate,
        qps: statement.rate,
        statement,
        transaction,
        queue_wait: of(|w| &w.queue_wait),
    }
}

/// Live scheduler state of a group.
#[derive(Debug, Serialize)]
pub struct Scheduler {
    in_flight: usize,
    cap: usize,
    inflight_mode: &'static str,
    /// With `pool.inflight = "adaptive"`: the limit and its inputs.
    adaptive: Option<Estimate>,
    stall_extra: usize,
    queue_high: usize,
    queue_low: usize,
    /// The proxy's own requests waiting (catalog readings, KILL helpers).
    queue_internal: usize,
    backends_owned: usize,
    /// The group's guaranteed base share.
    backends_max: usize,
    /// Borrowed from the common elastic pool now (within `backends_owned`).
    backends_elastic: usize,
    /// The most the group may own now (base + common pool).
    backends_ceiling: usize,
    backends_idle: usize,
    backends_busy: usize,
    backends_pinned: usize,
    dispatched: u64,
    stalls: u64,
    kickups: u64,
    evictions: u64,
    /// Seconds a borrowed backend stays idle before it is given back (the
    /// window grows while giving back is followed by borrowing again).
    give_back_window_s: f64,
    /// Borrowed from the common pool so far.
    borrowed: u64,
    /// Borrowed backends given back so far.
    given_back: u64,
    /// Backends closed by their user or that failed to open, so far.
    closed: u64,
    /// Backends closed on return because the share shrank, so far.
    closed_over_share: u64,
    /// Waiters admitted past the in-flight limit after half their queue
    /// timeout, so far.
    overdue: u64,
    /// Requests admitted past the limit because their user ran less than
    /// its share of it (others ran on the part it lent), so far.
    share_reclaims: u64,
    /// Parked backends taken back by their own session as they were
    /// (a cleanup saved), so far.
    parked_reclaimed: u64,
    /// Parked backends another session took (cleaned first), so far.
    parked_unparked: u64,
}

/// One group.
#[derive(Debug, Serialize)]
pub struct GroupStatus {
    group: usize,
    last_10s: Span,
    last_60s: Span,
    scheduler: Scheduler,
}

/// The whole report.
#[derive(Debug, Serialize)]
pub struct Status {
    clients: usize,
    draining: bool,
    last_10s: Span,
    last_60s: Span,
    /// The shared backend budget: ceiling, its source, bases, common pool.
    backend_budget: crate::pool::elastic::View,
    /// Whether backends go over the server's Unix socket
    /// (`backend.local_socket`).
    backend_local_socket: crate::pool::local_socket::View,
    /// The group workers sessions run on (`session_threads`); none with
    /// `runtime = "shared"`.
    session_threads: Option<usize>,
    /// The nice value the threads carrying sessions run at
    /// (`worker_priority_boost` below the process's own).
    session_threads_nice: Option<i32>,
    /// How long a woken session waited for its session thread over the
    /// last 10 s (each thread's probe, `crate::workers::PROBE_EVERY`).
    session_threads_wait: Option<crate::metrics::window::Summary>,
    /// The servers behind `backend.address`: roles, health, the primary.
    servers: crate::pool::servers::Report,
    /// The read/write split (`[routing]`).
    routing: RoutingReport,
    groups: Vec<GroupStatus>,
    prepared_registry_entries: usize,
    prepared_registry_bytes: usize,
    /// Per user (each `[[users]]` entry, and all server users as one):
    /// clients, backends, statements, TPS, latency, queue wait, share.
    users: Vec<crate::pool::tenants::Figures>,
    /// Which names run code the text does not show (views, triggers):
    /// `known` (with the object count), `unknown` (every statement that may
    /// name a table is reset after) or `off`.
    code_catalog: crate::pool::code_catalog::CatalogStatus,
}

/// Builds the report.
pub fn status(shared: &Shared) -> Status {
    let m = &shared.metrics;
    let all: Vec<&Windows> = m.groups.iter().map(|g| &g.windows).collect();
    let groups = shared
        .pool
        .groups
        .iter()
        .zip(&m.groups)
        .map(|(g, gm)| {
            let s = g.snapshot();
            let (idle, busy, pinned) = super::backend_states(&s);
            GroupStatus {
                group: g.id,
                last_10s: span(&[&gm.windows], 10),
                last_60s: span(&[&gm.windows], 60),
                scheduler: Scheduler {
                    in_flight: s.in_flight,
                    cap: s.cap,
                    inflight_mode: if s.adaptive.is_some() {
                        "adaptive"
                    } else {
                        "fixed"
                    },
                    adaptive: s.adaptive,
                    stall_extra: s.extra,
                    queue_high: s.high,
                    queue_low: s.low,
                    queue_internal: s.internal,
                    backends_owned: s.owned,
                    backends_max: s.max_owned,
                    backends_elastic: s.elastic,
                    backends_ceiling: s.ceiling,
                    backends_idle: idle,
                    backends_busy: busy,
                    backends_pinned: pinned,
                    dispatched: s.counters.dispatched,
                    stalls: s.counters.stalls,
                    kickups: s.counters.kickups,
                    evictions: s.counters.evictions,
                    give_back_window_s: s.give_back_window.as_secs_f64(),
                    borrowed: s.counters.borrowed,
                    given_back: s.counters.given_back,
                    closed: s.counters.closed,
                    closed_over_share: s.counters.closed_over_share,
                    overdue: s.counters.overdue,
                    share_reclaims: s.counters.share_reclaims,
                    parked_reclaimed: s.counters.reclaimed,
                    parked_unparked: s.counters.unparked,
                },
            }
        })
        .collect();
    let (entries, bytes) = shared
        .registry
        .lock()
        .map(|r| (r.len(), r.bytes()))
        .unwrap_or_default();
    Status {
        clients: shared.clients.load(std::sync::atomic::Ordering::Relaxed),
        draining: shared.shutdown.is_triggered(),
        last_10s: span(&all, 10),
        last_60s: span(&all, 60),
        backend_budget: shared.pool.budget.view(),
        backend_local_socket: shared.pool.local_socket.view(),
        session_threads: shared.workers.as_ref().map(|w| w.threads()),
        session_threads_nice: crate::priority::session_threads_nice(),
        session_threads_wait: shared.workers.as_ref().map(|w| w.run_queue_wait(10)),
        servers: shared.pool.servers.report(),
        routing: RoutingReport::of(shared),
        groups,
        prepared_registry_entries: entries,
        prepared_registry_bytes: bytes,
        users: shared.pool.tenants.figures(),
        code_catalog: shared
            .pool
            .code_catalog
            .status(std::time::Duration::from_millis(
                shared.config.load().pool.code_catalog_refresh_ms,
            )),
    }
}

/// The report as pretty JSON.
pub fn to_json(shared: &Shared) -> String {
    serde_json::to_string_pretty(&status(shared))
        .unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
}

/// `/status`'s `routing` part.
#[derive(Debug, serde::Serialize)]
struct RoutingReport {
    /// `routing.read_write_split`.
    read_write_split: bool,
    /// `routing.read_your_writes`.
    read_your_writes: bool,
    /// Reads kept on the primary that could have gone to a replica, by
    /// reason (`hint`, `no_replica`, `causal`).
    kept_on_primary: std::collections::BTreeMap<&'static str, u64>,
    /// Waits on a replica for a session's last write.
    causal_waits: u64,
    /// Of those, the ones that ran out of time or failed.
    causal_wait_timeouts: u64,
    /// Mean time of a wait, milliseconds (`null`: none yet).
    causal_wait_mean_ms: Option<f64>,
}

impl RoutingReport {
    fn of(shared: &Shared) -> Self {
        use crate::pool::routing::Primary;
        use std::sync::atomic::Ordering::Relaxed;
        let cfg = shared.config.load();
        let st = &shared.pool.routing;
        let waits = st.causal_waits.load(Relaxed);
        let us = st.causal_wait_us.load(Relaxed);
        Self {
            read_write_split: cfg.routing.read_write_split,
            read_your_writes: cfg.routing.read_your_writes,
            kept_on_primary: [Primary::Hint, Primary::NoReplica, Primary::Causal]
                .into_iter()
                .map(|w| (w.label(), st.kept[w.index()].load(Relaxed)))
                .collect(),
            causal_waits: waits,
            causal_wait_timeouts: st.causal_timeouts.load(Relaxed),
            causal_wait_mean_ms: (waits > 0).then(|| us as f64 / waits as f64 / 1000.0),
        }
    }
}
