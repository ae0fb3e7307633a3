//! Every metric myplex exports, one documented constant each: this file is
//! the metric catalogue. Names use the `myplex_` prefix and base units;
//! counters end in `_total`. Labels are bounded: `group` (thread group
//! number), `priority`, `kind` (command kind), `state`, `reason`, `code`
//! (MySQL error code), `source`, `direction`, `outcome`, `user` (one per
//! configured user, plus one for all server users), `quantile`.

/// Gauge: client connections open now.
pub const CLIENT_CONNECTIONS: &str = "myplex_client_connections";
/// Counter: client connections accepted.
pub const CLIENT_CONNECTIONS_TOTAL: &str = "myplex_client_connections_total";
/// Counter{reason}: client connections refused (`max_client_connections`,
/// `fd_exhausted`, `shutdown`), refused logins (`auth`), peers that left
/// (`handshake_aborted`) or stalled (`handshake_timeout`) before logging in,
/// and handshakes closed to make room for newer ones (`handshake_evicted`,
/// `frontend.max_unauthenticated[_per_address]`).
pub const CLIENT_CONNECTIONS_REJECTED_TOTAL: &str = "myplex_client_connections_rejected_total";
/// Counter: client sessions ended because the client did not read its
/// result for `frontend.client_write_timeout_ms` (statement killed, backend closed).
pub const CLIENT_WRITE_TIMEOUTS_TOTAL: &str = "myplex_client_write_timeouts_total";
/// Counter: plain `BEGIN`s answered by the proxy and sent to the server
/// with the transaction's first statement (`pool.defer_begin`).
pub const DEFERRED_BEGINS_TOTAL: &str = "myplex_deferred_begins_total";
/// Counter: statements of admin sessions answered without a backend
/// (`SET NAMES`, `SET autocommit`, `SELECT @@version_comment`, … that
/// drivers send at connect).
pub const ADMIN_LOCAL_ANSWERS_TOTAL: &str = "myplex_admin_local_answers_total";
/// Counter{source, outcome}: helper connections used to interrupt a
/// statement (KILL QUERY, a client that stopped reading): `source` is
/// `idle` (an idle pooled connection borrowed) or `opened` (a connection
/// opened within the backend budget); `outcome` is `sent`, or `failed`.
/// `source="none"` counts interrupts given up because no connection came
/// free within the deadline (the budget is never exceeded for them).
pub const KILL_HELPERS_TOTAL: &str = "myplex_kill_helpers_total";
/// Counter{direction, outcome}: client sessions handed over in an upgrade
/// (`crate::takeover::moves`): `direction` is `out` (sent to the new process)
/// or `in` (received from the old one); `outcome` is `moved`, `refused`
/// (the session went on where it was) or `lost` (the control connection
/// failed mid-way; the old process ended the session).
pub const SESSIONS_MOVED_TOTAL: &str = "myplex_sessions_moved_total";
/// Counter{group, kind}: statements (commands needing a backend) by command kind.
pub const STATEMENTS_TOTAL: &str = "myplex_statements_total";
/// Counter{group, outcome}: explicit transactions ended, `commit` or
/// `rollback`. TPS is the rate of this counter.
pub const TRANSACTIONS_TOTAL: &str = "myplex_transactions_total";
/// Counter{code, source}: errors sent to clients, by MySQL error code, from
/// the `backend` or the `proxy`.
pub const ERRORS_TOTAL: &str = "myplex_errors_total";
/// Counter{direction}: bytes relayed `to_client` and `from_client`.
pub const BYTES_TOTAL: &str = "myplex_bytes_total";
/// Histogram{group}: statement latency (queue wait + execution), seconds.
pub const STATEMENT_DURATION_SECONDS: &str = "myplex_statement_duration_seconds";
/// Histogram{group}: explicit transaction latency, first statement to end, seconds.
pub const TRANSACTION_DURATION_SECONDS: &str = "myplex_transaction_duration_seconds";
/// Histogram{group}: time spent waiting in a thread group queue, seconds.
pub const QUEUE_WAIT_SECONDS: &str = "myplex_queue_wait_seconds";
/// Gauge{group, priority}: requests waiting in the `high` / `low` queue, and
/// the proxy's own (`internal`: catalog readings, KILL helpers).
pub const QUEUE_LENGTH: &str = "myplex_queue_length";
/// Gauge{group}: statements executing on backends.
pub const IN_FLIGHT: &str = "myplex_in_flight";
/// Gauge{group}: the in-flight limit now: `1 + oversubscribe`, or the
/// adaptive limit (`pool.inflight = "adaptive"`), plus stall extras.
pub const IN_FLIGHT_LIMIT: &str = "myplex_in_flight_limit";
/// Gauge{group}: statement completions per second in the adaptive limit's
/// last measuring interval.
pub const ADAPTIVE_COMPLETIONS_PER_SECOND: &str = "myplex_adaptive_completions_per_second";
/// Gauge{group}: mean statement latency in that interval, seconds.
pub const ADAPTIVE_LATENCY_SECONDS: &str = "myplex_adaptive_latency_seconds";
/// Gauge{group}: the adaptive limit's latency baseline (lowest recent
/// interval mean), seconds.
pub const ADAPTIVE_LATENCY_BASELINE_SECONDS: &str = "myplex_adaptive_latency_baseline_seconds";
/// Gauge{group}: running statements counted as stalled (running far longer
/// than the baseline; they no longer count against the adaptive limit).
pub const STALLED_STATEMENTS: &str = "myplex_stalled_statements";
/// Counter{group}: statements that completed after being counted as stalled.
pub const STALLED_STATEMENTS_TOTAL: &str = "myplex_stalled_statements_total";
/// Counter{group}: timer ticks that found the group stalled.
pub const STALLS_TOTAL: &str = "myplex_stalls_total";
/// Counter{group}: low-priority requests moved to the high-priority queue.
pub const KICKUPS_TOTAL: &str = "myplex_kickups_total";
/// Counter{group}: queued requests admitted past the in-flight limit after
/// waiting half their queue timeout.
pub const OVERDUE_ADMISSIONS_TOTAL: &str = "myplex_overdue_admissions_total";
/// Counter{group}: requests admitted past the in-flight limit because their
/// user ran less than its share of it while others ran on the part it lent.
pub const SHARE_RECLAIMS_TOTAL: &str = "myplex_share_reclaims_total";
/// Counter{group}: idle backends of another credential pool closed to open
/// one for a waiting lease (a login on the server each).
pub const BACKEND_EVICTIONS_TOTAL: &str = "myplex_backend_evictions_total";
/// Counter{group, outcome}: parked backends (idle, holding their session's
/// leftovers) taken back by that session as they were (`taken_back`), or
/// granted to another session after their cleanup (`cleaned`).
pub const PARKED_BACKENDS_TOTAL: &str = "myplex_parked_backends_total";
/// Counter{group}: queued requests that hit `queue_timeout_ms`.
pub const QUEUE_TIMEOUTS_TOTAL: &str = "myplex_queue_timeouts_total";
/// Gauge{group, state}: backend connections `idle`, `busy` (executing) and
/// `pinned` (held by a session between statements).
pub const BACKEND_CONNECTIONS: &str = "myplex_backend_connections";
/// Gauge: backend connections the proxy may hold in all: the configured
/// `pool.max_backend_connections`, or the ceiling learnt from the server's
/// `@@max_connections` (the elastic pool's top).
pub const BACKEND_CEILING: &str = "myplex_backend_ceiling";
/// Gauge per server in `backend.address` (label `server`): 1 while
/// reachable as the health checks see it.
pub const SERVER_UP: &str = "myplex_server_up";
/// Gauge per server (labels `server`, `role`): 1 for the role it has now
/// (`primary`, `replica`, `refused`, `writable`, `down`, `unknown`).
pub const SERVER_ROLE: &str = "myplex_server_role";
/// Gauge per server (label `server`): 1 while both of its replication
/// threads run, 0 while one does not, as its last check read `SHOW REPLICA
/// STATUS`; NaN when it is not a replica, is down, or cannot be read.
pub const SERVER_REPLICATING: &str = "myplex_server_replicating";
/// Gauge per server (label `server`): its `Seconds_Behind_Master` at the
/// last check; NaN while that is NULL (a replication thread stopped: see
/// `myplex_server_replicating`) or there is no figure.
pub const SERVER_REPLICATION_LAG_SECONDS: &str = "myplex_server_replication_lag_seconds";
/// Counter per server (label `server`): reads the read/write split sent
/// to it as a replica.
pub const SERVER_READS_TOTAL: &str = "myplex_server_reads_total";
/// Gauge per server (label `server`): backend connections open to it as a
/// replica.
pub const SERVER_REPLICA_BACKENDS: &str = "myplex_server_replica_backends";
/// Counter (label `reason`): reads the split kept on the primary although
/// they could have gone to a replica: `hint` (`/* myplex:primary */`),
/// `no_replica` (none in the read set, or none could be reached),
/// `causal` (no replica had applied the session's last write in time).
pub const READS_KEPT_ON_PRIMARY_TOTAL: &str = "myplex_reads_kept_on_primary_total";
/// Counter: waits on a replica for a session's last write
/// (`MASTER_GTID_WAIT`, read-your-writes).
pub const CAUSAL_WAITS_TOTAL: &str = "myplex_causal_waits_total";
/// Counter: of those waits, the ones that ran out of time or failed.
pub const CAUSAL_WAIT_TIMEOUTS_TOTAL: &str = "myplex_causal_wait_timeouts_total";
/// Counter: microseconds spent in those waits (an integer counter).
pub const CAUSAL_WAIT_MICROSECONDS_TOTAL: &str = "myplex_causal_wait_microseconds_total";
/// Counter: changes of primary server (failover, switchover, none left).
pub const PRIMARY_CHANGES_TOTAL: &str = "myplex_primary_changes_total";
/// Counter: times a writable server other than the primary was refused
/// (never two primaries).
pub const REFUSED_WRITABLE_SERVERS_TOTAL: &str = "myplex_refused_writable_servers_total";
/// Gauge: the server's threads waiting on reads, fsyncs and row locks (the
/// mean over the wait probe's window; `pool.wait_probe_ms`).
pub const SERVER_WAITING_THREADS: &str = "myplex_server_waiting_threads";
/// Gauge: the server's wait verdict: 1 its threads wait (a limit may climb
/// past its base share), 2 busy (no gauge says why, but it holds many
/// statements: the throughput rule decides), 0 nothing waits (no limit
/// climbs past its base share on throughput alone), -1 not known (the probe
/// off, starting or failing).
pub const SERVER_WAITS: &str = "myplex_server_waits";
/// Gauge{group}: the group's guaranteed base share of backend connections.
pub const BACKEND_CONNECTIONS_BASE: &str = "myplex_backend_connections_base";
/// Gauge{group}: backend connections the group borrows from the common
/// elastic pool now (included in `myplex_backend_connections`).
pub const BACKEND_CONNECTIONS_ELASTIC: &str = "myplex_backend_connections_elastic";
/// Counter{reason}: times a session became pinned, by reason.
pub const PINS_TOTAL: &str = "myplex_pins_total";
/// Counter{action}: backend connections cleaned before another client could
/// get them: `clear_diagnostics` (a warning or error was left) or `reset`
/// (COM_RESET_CONNECTION after unshareable state).
pub const BACKEND_CLEANUPS_TOTAL: &str = "myplex_backend_cleanups_total";
/// Gauge{user}: client connections of a user. Per-user series have one
/// `user` label value per `[[users]]` entry plus `(server users)`, which
/// every user looked up in the server folds into (bounded by the
/// configuration, whatever names log in).
pub const USER_CLIENT_CONNECTIONS: &str = "myplex_user_client_connections";
/// Gauge{user}: backend connections a user's sessions hold now (what
/// `users.max_backend_connections` caps).
pub const USER_BACKEND_CONNECTIONS: &str = "myplex_user_backend_connections";
/// Gauge{user}: a user's share weight.
pub const USER_WEIGHT: &str = "myplex_user_weight";
/// Gauge{user}: the part (0–1) of all queue grants a user got in the last
/// second (compare with its weight's part of the active users' weights).
pub const USER_SHARE_USED_RATIO: &str = "myplex_user_share_used_ratio";
/// Counter{user}: statements of a user completed.
pub const USER_STATEMENTS_TOTAL: &str = "myplex_user_statements_total";
/// Counter{user}: explicit transactions of a user ended.
pub const USER_TRANSACTIONS_TOTAL: &str = "myplex_user_transactions_total";
/// Counter{user}: a user's requests that hit its queue timeout.
pub const USER_QUEUE_TIMEOUTS_TOTAL: &str = "myplex_user_queue_timeouts_total";
/// Gauge{user, quantile}: a user's statement latency (queue wait +
/// execution) over the last 10 s at quantile 0.5 / 0.95 / 0.99, seconds.
pub const USER_STATEMENT_LATENCY_SECONDS: &str = "myplex_user_statement_latency_seconds";
/// Gauge{user, quantile}: a user's queue wait over the last 10 s at
/// quantile 0.5 / 0.95 / 0.99, seconds.
pub const USER_QUEUE_WAIT_LATENCY_SECONDS: &str = "myplex_user_queue_wait_latency_seconds";
/// Gauge: entries in the query-digest table (`SHOW MYPLEX DIGESTS`).
pub const DIGESTS: &str = "myplex_digests";
/// Counter: digest-table entries evicted (least recently used) to make
/// room for new ones (`digests.max_digests`).
pub const DIGEST_EVICTIONS_TOTAL: &str = "myplex_digest_evictions_total";
/// Gauge: statements in the prepared-statement registry.
pub const PREPARED_REGISTRY_ENTRIES: &str = "myplex_prepared_registry_entries";
/// Gauge: approximate bytes held by the prepared-statement registry.
pub const PREPARED_REGISTRY_BYTES: &str = "myplex_prepared_registry_bytes";

/// All names, for the catalogue check.
pub const ALL: &[&str] = &[
    CLIENT_CONNECTIONS,
    CLIENT_CONNECTIONS_TOTAL,
    CLIENT_CONNECTIONS_REJECTED_TOTAL,
    CLIENT_WRITE_TIMEOUTS_TOTAL,
    DEFERRED_BEGINS_TOTAL,
    ADMIN_LOCAL_ANSWERS_TOTAL,
    KILL_HELPERS_TOTAL,
    SESSIONS_MOVED_TOTAL,
    STATEMENTS_TOTAL,
    TRANSACTIONS_TOTAL,
    ERRORS_TOTAL,
    BYTES_TOTAL,
    STATEMENT_DURATION_SECONDS,
    TRANSACTION_DURATION_SECONDS,
    QUEUE_WAIT_SECONDS,
    QUEUE_LENGTH,
    IN_FLIGHT,
    IN_FLIGHT_LIMIT,
    ADAPTIVE_COMPLETIONS_PER_SECOND,
    ADAPTIVE_LATENCY_SECONDS,
    ADAPTIVE_LATENCY_BASELINE_SECONDS,
    STALLED_STATEMENTS,
    STALLED_STATEMENTS_TOTAL,
    STALLS_TOTAL,
    KICKUPS_TOTAL,
    OVERDUE_ADMISSIONS_TOTAL,
    SHARE_RECLAIMS_TOTAL,
    BACKEND_EVICTIONS_TOTAL,
    PARKED_BACKENDS_TOTAL,
    QUEUE_TIMEOUTS_TOTAL,
    BACKEND_CONNECTIONS,
    BACKEND_CEILING,
    SERVER_UP,
    SERVER_ROLE,
    SERVER_REPLICATING,
    SERVER_REPLICATION_LAG_SECONDS,
    SERVER_READS_TOTAL,
    SERVER_REPLICA_BACKENDS,
    READS_KEPT_ON_PRIMARY_TOTAL,
    CAUSAL_WAITS_TOTAL,
    CAUSAL_WAIT_TIMEOUTS_TOTAL,
    CAUSAL_WAIT_MICROSECONDS_TOTAL,
    PRIMARY_CHANGES_TOTAL,
    REFUSED_WRITABLE_SERVERS_TOTAL,
    SERVER_WAITING_THREADS,
    SERVER_WAITS,
    BACKEND_CONNECTIONS_BASE,
    BACKEND_CONNECTIONS_ELASTIC,
    PINS_TOTAL,
    BACKEND_CLEANUPS_TOTAL,
    PREPARED_REGISTRY_ENTRIES,
    PREPARED_REGISTRY_BYTES,
    USER_CLIENT_CONNECTIONS,
    USER_BACKEND_CONNECTIONS,
    USER_WEIGHT,
    USER_SHARE_USED_RATIO,
    USER_STATEMENTS_TOTAL,
    USER_TRANSACTIONS_TOTAL,
    USER_QUEUE_TIMEOUTS_TOTAL,
    USER_STATEMENT_LATENCY_SECONDS,
    USER_QUEUE_WAIT_LATENCY_SECONDS,
    DIGESTS,
    DIGEST_EVICTIONS_TOTAL,
];

/// Label names in use.
pub const LABELS: &[&str] = &[
    "group",
    "priority",
    "kind",
    "state",
    "reason",
    "code",
    "source",
    "direction",
    "outcome",
    "user",
    "quantile",
    "server",
    "role",
];

/// What a Prometheus text exposition exports that this catalogue does not
/// document: one entry per sample line whose metric name is not in [`ALL`]
/// (`metric <name>`), and per label not in [`LABELS`] (`label <label> on
/// <name>`), in order of appearance, without repeats. Histogram series
/// (`<name>_bucket`, `_sum`, `_count`) count as `<name>`, and their `le`
/// label is allowed. Comment and blank lines are skipped. Empty when
/// everything exported is documented.
pub fn undocumented(exposition: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut note = |what: String| {
        if !out.contains(&what) {
            out.push(what);
        }
    };
    for line in exposition
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let name = line.split(['{', ' ']).next().unwrap_or_default();
        let base = name
            .trim_end_matches("_bucket")
            .trim_end_matches("_sum")
            .trim_end_matches("_count");
        if !ALL.contains(&name) && !ALL.contains(&base) {
            note(format!("metric {name}"));
        }
        if let Some(labels) = line
            .split_once('{')
            .map(|(_, l)| l.split('}').next().unwrap_or_default())
        {
            for pair in labels.split(',').filter(|p| !p.is_empty()) {
                let label = pair.split('=').next().unwrap_or_default();
                if !LABELS.contains(&label) && label != "le" {
                    note(format!("label {label} on {name}"));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn undocumented_finds_unknown_names_and_labels() {
        let text = "# TYPE myplex_queue_wait_seconds histogram\n\
                    myplex_queue_wait_seconds_bucket{group=\"0\",le=\"0.1\"} 1\n\
                    myplex_queue_wait_seconds_sum{group=\"0\"} 0.05\n\
                    myplex_queue_wait_seconds_count{group=\"0\"} 1\n\
                    myplex_mystery_total 3\n\
                    myplex_stalls_total{group=\"0\",colour=\"red\"} 1\n\
                    myplex_stalls_total{group=\"1\",colour=\"red\"} 2\n\n";
        assert_eq!(
            undocumented(text),
            [
                "metric myplex_mystery_total",
                "label colour on myplex_stalls_total"
            ]
        );
        assert!(undocumented("myplex_in_flight{group=\"0\"} 2\n").is_empty());
    }
}
