//! Operator surfaces: the HTTP endpoint (`/metrics`, `/status`, `/digests`,
//! `/healthz`, `/readyz`), the JSON status report, the digest listings, and
//! the `SHOW MYPLEX …` SQL console for admin users. All of them read scheduler snapshots and metrics; none
//! waits in a thread-group queue, so they work while the pool is saturated.

pub mod console;
pub mod digests;
pub mod http;
pub mod status;

use crate::frontend::Shared;

/// Copies scheduler snapshots and registry sizes into the gauges.
pub fn refresh_gauges(shared: &Shared) {
    for (g, m) in shared.pool.groups.iter().zip(&shared.metrics.groups) {
        let s = g.snapshot();
        m.queue_high.set(s.high as f64);
        m.queue_low.set(s.low as f64);
        m.queue_internal.set(s.internal as f64);
        m.in_flight.set(s.in_flight as f64);
        m.in_flight_limit.set((s.cap + s.extra) as f64);
        if let Some(a) = s.adaptive {
            let [rate, latency, baseline, stalled] = &m.adaptive;
            rate.set(a.completions_per_s);
            latency.set(a.latency_ms / 1000.0);
            baseline.set(a.baseline_ms / 1000.0);
            stalled.set(a.stalled as f64);
            m.stalled_total.absolute(a.stalled_total);
        }
        m.stalls.absolute(s.counters.stalls);
        m.kickups.absolute(s.counters.kickups);
        m.overdue.absolute(s.counters.overdue);
        m.share_reclaims.absolute(s.counters.share_reclaims);
        m.evictions.absolute(s.counters.evictions);
        m.parked_reclaimed.absolute(s.counters.reclaimed);
        m.parked_unparked.absolute(s.counters.unparked);
        let (idle, busy, pinned) = backend_states(&s);
        m.idle.set(idle as f64);
        m.busy.set(busy as f64);
        m.pinned.set(pinned as f64);
        m.base.set(s.max_owned as f64);
        m.elastic.set(s.elastic as f64);
    }
    let budget = shared.pool.budget.view();
    let m = &shared.metrics;
    m.backend_ceiling.set(budget.ceiling as f64);
    m.server_waiting.set(budget.server_waiting);
    m.server_waits.set(f64::from(budget.server_waits.code()));
    shared.metrics.digests.set(shared.digests.len() as f64);
    shared
        .metrics
        .digest_evictions
        .absolute(shared.digests.evictions());
    if let Ok(r) = shared.registry.lock() {
        shared.metrics.registry_entries.set(r.len() as f64);
        shared.metrics.registry_bytes.set(r.bytes() as f64);
    }
    shared.metrics.users(&shared.pool.tenants.figures());
    shared.metrics.servers(&shared.pool.servers.report());
    shared.metrics.routing(&shared.pool.routing);
}

/// Idle, busy (executing) and pinned (held between statements) backend
/// connections of a group.
pub fn backend_states(s: &crate::pool::scheduler::Snapshot) -> (usize, usize, usize) {
    let held = s.owned.saturating_sub(s.idle);
    let busy = s.in_flight.min(held);
    (s.idle, busy, held - busy)
}
