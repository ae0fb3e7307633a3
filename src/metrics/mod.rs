//! Metrics: the catalogue of names (`names`), per-proxy Prometheus handles
//! created once at start (no label building on the hot path), and the
//! sliding windows `/status` reports percentiles from (`window`), and the
//! query-digest table (`digests`, with its `log_histogram`).
//!
//! Each proxy instance owns its recorder, so several proxies in one process
//! (tests) never mix their numbers.

pub mod digests;
pub mod log_histogram;
pub mod names;
pub mod window;

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use metrics::{Counter, Gauge, Histogram, Key, Label, Recorder};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle, PrometheusRecorder};

use names::*;
use window::Window;

/// Command kinds counted separately.
pub const KINDS: &[&str] = &[
    "query",
    "execute",
    "prepare",
    "fetch",
    "init_db",
    "field_list",
    "statistics",
    "other",
];

/// Index into [`KINDS`] for a command byte.
pub fn kind_index(cmd: u8) -> usize {
    use crate::protocol::command::*;
    match cmd {
        COM_QUERY => 0,
        COM_STMT_EXECUTE => 1,
        COM_STMT_PREPARE => 2,
        COM_STMT_FETCH => 3,
        COM_INIT_DB => 4,
        COM_FIELD_LIST => 5,
        COM_STATISTICS => 6,
        _ => 7,
    }
}

/// Latency buckets, seconds (100 µs … 30 s).
const BUCKETS: &[f64] = &[
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0, 30.0,
];

/// Sliding windows for one scope (overall or one group).
#[derive(Default)]
pub struct Windows {
    /// Statement latency.
    pub statements: Window,
    /// Transaction latency.
    pub transactions: Window,
    /// Queue wait.
    pub queue_wait: Window,
}

/// Per thread group handles.
pub struct GroupMetrics {
    statements: Vec<Counter>,
    commits: Counter,
    rollbacks: Counter,
    statement_seconds: Histogram,
    transaction_seconds: Histogram,
    queue_wait_seconds: Histogram,
    queue_timeouts: Counter,
    /// Gauges refreshed from scheduler snapshots on scrape.
    pub queue_high: Gauge,
    /// Low-priority queue length.
    pub queue_low: Gauge,
    /// The proxy's own requests waiting (catalog readings, KILL helpers).
    pub queue_internal: Gauge,
    /// In flight.
    pub in_flight: Gauge,
    /// In-flight limit.
    pub in_flight_limit: Gauge,
    /// The adaptive limit's inputs: completions/s, latency, baseline (s),
    /// stalled statements now, and completed after stalling.
    pub adaptive: [Gauge; 4],
    /// Statements completed after stalling.
    pub stalled_total: Counter,
    /// Stall ticks.
    pub stalls: Counter,
    /// Kickups.
    pub kickups: Counter,
    /// Admissions past the limit after half the queue timeout.
    pub overdue: Counter,
    /// Admissions past the limit for a user owed its share.
    pub share_reclaims: Counter,
    /// Idle backends closed for another credential pool's lease.
    pub evictions: Counter,
    /// Parked backends taken back by their session as they were.
    pub parked_reclaimed: Counter,
    /// Parked backends granted to another session (cleaned first).
    pub parked_unparked: Counter,
    /// Idle backends.
    pub idle: Gauge,
    /// Executing backends.
    pub busy: Gauge,
    /// Pinned backends.
    pub pinned: Gauge,
    /// Base share of backends.
    pub base: Gauge,
    /// Backends borrowed from the elastic pool.
    pub elastic: Gauge,
    /// Windows for `/status`.
    pub windows: Windows,
}

/// All metrics of one proxy.
pub struct Metrics {
    recorder: PrometheusRecorder,
    handle: PrometheusHandle,
    /// Client connections open.
    pub client_connections: Gauge,
    /// Client connections accepted.
    pub client_connections_total: Counter,
    deferred_begins: Counter,
    bytes_to_client: Counter,
    bytes_from_client: Counter,
    /// The proxy's backend ceiling.
    pub backend_ceiling: Gauge,
    /// The server's waiting threads (the wait probe's mean).
    pub server_waiting: Gauge,
    /// The server's wait verdict ([`crate::pool::server_waits::Verdict::code`]).
    pub server_waits: Gauge,
    /// Registry size.
    pub registry_entries: Gauge,
    /// Registry bytes.
    pub registry_bytes: Gauge,
    /// Digest-table entries.
    pub digests: Gauge,
    /// Digest-table evictions.
    pub digest_evictions: Counter,
    /// Per group; the proxy's `/status` windows are theirs merged.
    pub groups: Vec<GroupMetrics>,
    dynamic: Mutex<HashMap<Key, Counter>>,
    /// One-label counters with static values, by (name, value), as first
    /// used (see `static_counter`).
    static_counters: Mutex<Vec<((&'static str, &'static str), Counter)>>,
}

fn key(name: &'static str, labels: &[(&'static str, String)]) -> Key {
    Key::from_parts(
        name,
        labels
            .iter()
            .map(|(k, v)| Label::new(*k, v.clone()))
            .collect::<Vec<_>>(),
    )
}

static META: metrics::Metadata<'static> =
    metrics::Metadata::new(module_path!(), metrics::Level::INFO, Some(module_path!()));

impl Metrics {
    /// Creates every handle for `groups` thread groups.
    pub fn new(groups: usize) -> Self {
        let recorder = PrometheusBuilder::new()
            .set_buckets(BUCKETS)
            .map(|b| b.build_recorder())
            .unwrap_or_else(|_| PrometheusBuilder::new().build_recorder());
        let handle = recorder.handle();
        let r = &recorder;
        let counter =
            |n: &'static str, l: &[(&'static str, String)]| r.register_counter(&key(n, l), &META);
        let gauge =
            |n: &'static str, l: &[(&'static str, String)]| r.register_gauge(&key(n, l), &META);
        let hist =
            |n: &'static str, l: &[(&'static str, String)]| r.register_histogram(&key(n, l), &META);
        for n in ALL {
            r.describe_counter((*n).into(), None, "".into());
        }
        let groups = (0..groups)
            .map(|g| {
                let gl = ("group", g.to_string());
                GroupMetrics {
                    statements: KINDS
                        .iter()
                        .map(|k| counter(STATEMENTS_TOTAL, &[gl.clone(), ("kind", (*k).into())]))
                        .collect(),
                    commits: counter(
                        TRANSACTIONS_TOTAL,
                        &[gl.clone(), ("outcome", "commit".into())],
                    ),
                    rollbacks: counter(
                        TRANSACTIONS_TOTAL,
                        &[gl.clone(), ("outcome", "rollback".into())],
                    ),
                    statement_seconds: hist(STATEMENT_DURATION_SECONDS, std::slice::from_ref(&gl)),
                    transaction_seconds: hist(
                        TRANSACTION_DURATION_SECONDS,
                        std::slice::from_ref(&gl),
                    ),
                    queue_wait_seconds: hist(QUEUE_WAIT_SECONDS, std::slice::from_ref(&gl)),
                    queue_timeouts: counter(QUEUE_TIMEOUTS_TOTAL, std::slice::from_ref(&gl)),
                    queue_high: gauge(QUEUE_LENGTH, &[gl.clone(), ("priority", "high".into())]),
                    queue_low: gauge(QUEUE_LENGTH, &[gl.clone(), ("priority", "low".into())]),
                    queue_internal: gauge(
                        QUEUE_LENGTH,
                        &[gl.clone(), ("priority", "internal".into())],
                    ),
                    in_flight: gauge(IN_FLIGHT, std::slice::from_ref(&gl)),
                    in_flight_limit: gauge(IN_FLIGHT_LIMIT, std::slice::from_ref(&gl)),
                    adaptive: [
                        ADAPTIVE_COMPLETIONS_PER_SECOND,
                        ADAPTIVE_LATENCY_SECONDS,
                        ADAPTIVE_LATENCY_BASELINE_SECONDS,
                        STALLED_STATEMENTS,
                    ]
                    .map(|n| gauge(n, std::slice::from_ref(&gl))),
                    stalled_total: counter(STALLED_STATEMENTS_TOTAL, std::slice::from_ref(&gl)),
                    stalls: counter(STALLS_TOTAL, std::slice::from_ref(&gl)),
                    kickups: counter(KICKUPS_TOTAL, std::slice::from_ref(&gl)),
                    overdue: counter(OVERDUE_ADMISSIONS_TOTAL, std::slice::from_ref(&gl)),
                    share_reclaims: counter(SHARE_RECLAIMS_TOTAL, std::slice::from_ref(&gl)),
                    evictions: counter(BACKEND_EVICTIONS_TOTAL, std::slice::from_ref(&gl)),
                    parked_reclaimed: counter(
                        PARKED_BACKENDS_TOTAL,
                        &[gl.clone(), ("outcome", "taken_back".into())],
                    ),
                    parked_unparked: counter(
                        PARKED_BACKENDS_TOTAL,
                        &[gl.clone(), ("outcome", "cleaned".into())],
                    ),
                    idle: gauge(BACKEND_CONNECTIONS, &[gl.clone(), ("state", "idle".into())]),
                    busy: gauge(BACKEND_CONNECTIONS, &[gl.clone(), ("state", "busy".into())]),
                    pinned: gauge(
                        BACKEND_CONNECTIONS,
                        &[gl.clone(), ("state", "pinned".into())],
                    ),
                    base: gauge(BACKEND_CONNECTIONS_BASE, std::slice::from_ref(&gl)),
                    elastic: gauge(BACKEND_CONNECTIONS_ELASTIC, std::slice::from_ref(&gl)),
                    windows: Windows::default(),
                }
            })
            .collect();
        Self {
            client_connections: gauge(CLIENT_CONNECTIONS, &[]),
            client_connections_total: counter(CLIENT_CONNECTIONS_TOTAL, &[]),
            deferred_begins: counter(DEFERRED_BEGINS_TOTAL, &[]),
            bytes_to_client: counter(BYTES_TOTAL, &[("direction", "to_client".into())]),
            bytes_from_client: counter(BYTES_TOTAL, &[("direction", "from_client".into())]),
            backend_ceiling: gauge(BACKEND_CEILING, &[]),
            server_waiting: gauge(SERVER_WAITING_THREADS, &[]),
            server_waits: gauge(SERVER_WAITS, &[]),
            registry_entries: gauge(PREPARED_REGISTRY_ENTRIES, &[]),
            registry_bytes: gauge(PREPARED_REGISTRY_BYTES, &[]),
            digests: gauge(DIGESTS, &[]),
            digest_evictions: counter(DIGEST_EVICTIONS_TOTAL, &[]),
            groups,
            dynamic: Mutex::new(HashMap::new()),
            static_counters: Mutex::new(Vec::new()),
            handle,
            recorder,
        }
    }

    /// Copies the per-user figures into the `user`-labelled series (at
    /// scrape time; the label values are bounded by the configured users).
    pub fn users(&self, figures: &[crate::pool::tenants::Figures]) {
        let r = &self.recorder;
        for f in figures {
            let u = ("user", f.user.clone());
            let one = std::slice::from_ref(&u);
            let gauge = |n: &'static str, v: f64| r.register_gauge(&key(n, one), &META).set(v);
            let count =
                |n: &'static str, v: u64| r.register_counter(&key(n, one), &META).absolute(v);
            gauge(USER_CLIENT_CONNECTIONS, f.clients as f64);
            gauge(USER_BACKEND_CONNECTIONS, f.backends as f64);
            gauge(USER_WEIGHT, f64::from(f.weight));
            gauge(USER_SHARE_USED_RATIO, f.share_used);
            count(USER_STATEMENTS_TOTAL, f.statements);
            count(USER_TRANSACTIONS_TOTAL, f.transactions);
            count(USER_QUEUE_TIMEOUTS_TOTAL, f.queue_timeouts);
            for (name, s) in [
                (USER_STATEMENT_LATENCY_SECONDS, &f.latency),
                (USER_QUEUE_WAIT_LATENCY_SECONDS, &f.queue_wait),
            ] {
                for (q, v) in [("0.5", s.p50_ms), ("0.95", s.p95_ms), ("0.99", s.p99_ms)] {
                    let labels = [u.clone(), ("quantile", q.to_string())];
                    r.register_gauge(&key(name, &labels), &META).set(v / 1000.0);
                }
            }
        }
    }

    /// The read/write split's counters (`crate::pool::routing`).
    pub fn routing(&self, stats: &crate::pool::RoutingStats) {
        use std::sync::atomic::Ordering::Relaxed;
        let r = &self.recorder;
        for why in [
            crate::pool::routing::Primary::Hint,
            crate::pool::routing::Primary::NoReplica,
            crate::pool::routing::Primary::Causal,
        ] {
            let labels = [("reason", why.label().to_string())];
            r.register_counter(&key(READS_KEPT_ON_PRIMARY_TOTAL, &labels), &META)
                .absolute(stats.kept[why.index()].load(Relaxed));
        }
        r.register_counter(&key(CAUSAL_WAITS_TOTAL, &[]), &META)
            .absolute(stats.causal_waits.load(Relaxed));
        r.register_counter(&key(CAUSAL_WAIT_TIMEOUTS_TOTAL, &[]), &META)
            .absolute(stats.causal_timeouts.load(Relaxed));
        r.register_counter(&key(CAUSAL_WAIT_MICROSECONDS_TOTAL, &[]), &META)
            .absolute(stats.causal_wait_us.load(Relaxed));
    }

    /// The servers' health and roles (`crate::pool::servers`).
    pub fn servers(&self, report: &crate::pool::servers::Report) {
        use crate::pool::servers::Role;
        let r = &self.recorder;
        for s in &report.servers {
            let server = ("server", s.address.clone());
            r.register_gauge(&key(SERVER_UP, std::slice::from_ref(&server)), &META)
                .set(if s.up { 1.0 } else { 0.0 });
            for role in [
                Role::Primary,
                Role::Replica,
                Role::Refused,
                Role::Writable,
                Role::Down,
                Role::Unknown,
            ] {
                let labels = [server.clone(), ("role", role.label().to_string())];
                let on = s.role == role.label();
                r.register_gauge(&key(SERVER_ROLE, &labels), &META)
                    .set(if on { 1.0 } else { 0.0 });
            }
            if report.servers.len() < 2 {
                // One server: its replication is not read.
                continue;
            }
            // Set for every server at every scrape: NaN when there is no
            // figure (not a replica, down, unreadable; the lag while the
            // server says NULL), never a reading left standing.
            let replica = s
                .replication
                .as_ref()
                .and_then(|x| x.replica.as_ref())
                .filter(|_| s.up);
            let replicating = replica.map_or(f64::NAN, |x| if x.running() { 1.0 } else { 0.0 });
            let lag = replica.and_then(|x| x.lag_s).map_or(f64::NAN, |v| v as f64);
            let labels = std::slice::from_ref(&server);
            r.register_gauge(&key(SERVER_REPLICATING, labels), &META)
                .set(replicating);
            r.register_gauge(&key(SERVER_REPLICATION_LAG_SECONDS, labels), &META)
                .set(lag);
            r.register_counter(&key(SERVER_READS_TOTAL, labels), &META)
                .absolute(s.reads);
            r.register_gauge(&key(SERVER_REPLICA_BACKENDS, labels), &META)
                .set(s.replica_backends as f64);
        }
        r.register_counter(&key(PRIMARY_CHANGES_TOTAL, &[]), &META)
            .absolute(report.primary_changes);
        r.register_counter(&key(REFUSED_WRITABLE_SERVERS_TOTAL, &[]), &META)
            .absolute(report.refused_writable);
    }

    /// A counter with one label whose value is fixed text, for events of
    /// every transaction: found in a short list of those used so far (a
    /// compare of static strings), not built and hashed as a new [`Key`].
    fn static_counter(
        &self,
        name: &'static str,
        label: &'static str,
        value: &'static str,
    ) -> Counter {
        let Ok(mut seen) = self.static_counters.lock() else {
            return Counter::noop();
        };
        if let Some((_, c)) = seen.iter().find(|(k, _)| *k == (name, value)) {
            return c.clone();
        }
        let c = self.dynamic_counter(name, &[(label, value.into())]);
        seen.push(((name, value), c.clone()));
        c
    }

    fn dynamic_counter(&self, name: &'static str, labels: &[(&'static str, String)]) -> Counter {
        let k = key(name, labels);
        let Ok(mut map) = self.dynamic.lock() else {
            return Counter::noop();
        };
        map.entry(k.clone())
            .or_insert_with(|| self.recorder.register_counter(&k, &META))
            .clone()
    }

    /// A client session ended by `frontend.client_write_timeout_ms`.
    pub fn client_write_timeout(&self) {
        self.dynamic_counter(CLIENT_WRITE_TIMEOUTS_TOTAL, &[])
            .increment(1);
    }

    /// A statement of an admin session answered without a backend.
    pub fn admin_local_answer(&self) {
        self.dynamic_counter(ADMIN_LOCAL_ANSWERS_TOTAL, &[])
            .increment(1);
    }

    /// A helper connection for an interrupt: where it came from (`idle`,
    /// `opened`, `none`) and whether the KILL was sent.
    pub fn kill_helper(&self, source: &'static str, outcome: &'static str) {
        self.dynamic_counter(
            KILL_HELPERS_TOTAL,
            &[("source", source.into()), ("outcome", outcome.into())],
        )
        .increment(1);
    }

    /// A session handed over in an upgrade (see
    /// [`names::SESSIONS_MOVED_TOTAL`]).
    pub fn session_moved(&self, direction: &'static str, outcome: &'static str) {
        self.dynamic_counter(
            SESSIONS_MOVED_TOTAL,
            &[("direction", direction.into()), ("outcome", outcome.into())],
        )
        .increment(1);
    }

    /// A refused client connection.
    pub fn rejected(&self, reason: &'static str) {
        self.dynamic_counter(
            CLIENT_CONNECTIONS_REJECTED_TOTAL,
            &[("reason", reason.into())],
        )
        .increment(1);
    }

    /// An error sent to a client.
    pub fn error(&self, code: u16, from_backend: bool) {
        let source = if from_backend { "backend" } else { "proxy" };
        self.dynamic_counter(
            ERRORS_TOTAL,
            &[("code", code.to_string()), ("source", source.into())],
        )
        .increment(1);
    }

    /// A `BEGIN` was answered by the proxy (`pool.defer_begin`).
    pub fn deferred_begin(&self) {
        self.deferred_begins.increment(1);
    }

    /// A session became pinned for `reason`.
    pub fn pinned(&self, reason: &'static str) {
        self.static_counter(PINS_TOTAL, "reason", reason)
            .increment(1);
    }

    /// A backend connection was cleaned before going back to the pool.
    pub fn backend_cleanup(&self, reset: bool) {
        let action = if reset { "reset" } else { "clear_diagnostics" };
        self.static_counter(BACKEND_CLEANUPS_TOTAL, "action", action)
            .increment(1);
    }

    /// A statement completed: queue wait and total latency.
    pub fn statement(&self, group: usize, cmd: u8, wait: Duration, total: Duration) {
        let Some(g) = self.groups.get(group) else {
            return;
        };
        g.statements[kind_index(cmd)].increment(1);
        g.statement_seconds.record(total.as_secs_f64());
        g.queue_wait_seconds.record(wait.as_secs_f64());
        let (t, w) = (total.as_micros() as u64, wait.as_micros() as u64);
        let now = tokio::time::Instant::now();
        g.windows.statements.record_at(now, t);
        g.windows.queue_wait.record_at(now, w);
    }

    /// An explicit transaction ended.
    pub fn transaction(&self, group: usize, committed: bool, took: Duration) {
        let Some(g) = self.groups.get(group) else {
            return;
        };
        if committed { &g.commits } else { &g.rollbacks }.increment(1);
        g.transaction_seconds.record(took.as_secs_f64());
        let (us, now) = (took.as_micros() as u64, tokio::time::Instant::now());
        g.windows.transactions.record_at(now, us);
    }

    /// A request hit the queue timeout.
    pub fn queue_timeout(&self, group: usize) {
        if let Some(g) = self.groups.get(group) {
            g.queue_timeouts.increment(1);
        }
    }

    /// Bytes relayed.
    pub fn bytes(&self, to_client: u64, from_client: u64) {
        self.bytes_to_client.increment(to_client);
        self.bytes_from_client.increment(from_client);
    }

    /// Prometheus text exposition.
    pub fn render(&self) -> String {
        self.handle.run_upkeep();
        self.handle.render()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_exported_name_is_in_the_catalogue() {
        let m = Metrics::new(2);
        m.error(1045, false);
        m.rejected("auth");
        m.pinned("transaction");
        m.statement(
            1,
            crate::protocol::command::COM_QUERY,
            Duration::from_millis(1),
            Duration::from_millis(3),
        );
        m.transaction(0, true, Duration::from_millis(5));
        m.bytes(10, 20);
        let text = m.render();
        let undocumented = names::undocumented(&text);
        assert!(
            undocumented.is_empty(),
            "undocumented in the exposition: {undocumented:?}"
        );
        let seen = text
            .lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .count();
        assert!(seen > 20, "{text}");
        assert!(
            text.contains("myplex_errors_total{code=\"1045\",source=\"proxy\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("myplex_statements_total{group=\"1\",kind=\"query\"} 1"),
            "{text}"
        );
    }
}
