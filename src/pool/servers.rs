//! The servers behind `backend.address` (design §12) and which one takes
//! the statements: the primary. Owns that choice — the pool dials only
//! [`Servers::primary`], and every backend connection carries the
//! [`Servers::epoch`] it was dialed in, so a connection to a server that
//! stopped being the primary is closed instead of shared again — and each
//! server's health as the background checks see it (reachable, the
//! failures in a row, `@@read_only`, the last error).
//!
//! The rules, failing closed (never two primaries):
//! - **One server** is the primary whatever its `read_only` (a proxy in
//!   front of a single replica serves it as before); its checks only say
//!   whether it is reachable.
//! - **Several**: nothing is chosen until every server has been checked
//!   once. Then the primary is the one writable server; it stays the
//!   primary while it is up and writable, and any other server that is
//!   writable meanwhile (an old primary restarted writable after a
//!   failover) is *refused*: it gets no statement, it is logged once and
//!   counted. When the primary goes down or read-only, the single other
//!   writable server becomes the primary. With none — or with more than
//!   one to pick from — there is no primary: statements wait in their
//!   queue up to `queue_timeout_ms`, then get an error naming the cause.
//!
//! No I/O here: the checks themselves run in [`super::server_checks`].

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use tokio::sync::watch;

/// How long a replica whose session defaults differ from the primary's
/// stays out of the read set before a read tries it again.
pub const UNFIT_FOR: std::time::Duration = std::time::Duration::from_secs(30);

/// What one check of one server found.
#[derive(Debug, Clone)]
pub enum Check {
    /// It answered; `read_only` is its `@@global.read_only` (`None`: not
    /// read, one server).
    Up {
        /// `@@global.read_only`.
        read_only: Option<bool>,
        /// Its replication as read (`None`: not read, one server).
        replication: Option<Replication>,
    },
    /// It answered without saying, with `error` (too many connections,
    /// access denied): reachable, nothing else learnt, no failure counted;
    /// the error is kept as the server's last one.
    Answered {
        /// The server's error.
        error: String,
    },
    /// It did not. `at_once`: the connect itself was refused or the host is
    /// unreachable: down now, without waiting for more failures.
    Failed {
        /// What went wrong.
        error: String,
        /// Down at once.
        at_once: bool,
    },
}

/// A server's replication as its last check read it (several servers).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Replication {
    /// Its GTID position: `@@gtid_current_pos` on MariaDB, `@@gtid_executed`
    /// on MySQL (`None`: neither could be read).
    pub gtid: Option<String>,
    /// Its status as a replica (`None`: it replicates from nothing, or the
    /// status could not be read: see `unreadable`).
    pub replica: Option<ReplicaStatus>,
    /// Why the replica status could not be read (`SHOW REPLICA STATUS`
    /// needs `SLAVE MONITOR` on MariaDB, `REPLICATION CLIENT` on MySQL).
    pub unreadable: Option<String>,
    /// When the GTID position was asked for: it covers every commit made
    /// before then.
    #[serde(skip)]
    pub gtid_read_at: Option<SystemTime>,
}

/// One server's `SHOW REPLICA STATUS`, the parts the proxy reports.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ReplicaStatus {
    /// The server it replicates from (`host:port`).
    pub source: String,
    /// The receiving thread: `Yes`, `No`, `Connecting`.
    pub io_running: String,
    /// The applying thread: `Yes`, `No`.
    pub sql_running: String,
    /// `Seconds_Behind_Master` (`None`: NULL, a thread stopped).
    pub lag_s: Option<u64>,
    /// The GTIDs received (`Gtid_IO_Pos`, MariaDB).
    pub received_gtid: Option<String>,
    /// The last receiving or applying error, when there is one.
    pub last_error: Option<String>,
}

impl ReplicaStatus {
    /// Both threads running.
    pub fn running(&self) -> bool {
        self.io_running.eq_ignore_ascii_case("yes") && self.sql_running.eq_ignore_ascii_case("yes")
    }

    /// Reads the columns of one `SHOW REPLICA STATUS` / `SHOW SLAVE STATUS`
    /// row, by name: MariaDB's and older MySQL's `Slave_*` / `Master_*`,
    /// MySQL 8.0.22+'s `Replica_*` / `Source_*`.
    pub fn from_columns(row: &[(String, Option<String>)]) -> Self {
        let get = |names: &[&str]| -> Option<String> {
            row.iter()
                .find(|(n, _)| names.iter().any(|w| n.eq_ignore_ascii_case(w)))
                .and_then(|(_, v)| v.clone())
                .map(|v| v.trim().to_string())
        };
        let host = get(&["Master_Host", "Source_Host"]).unwrap_or_default();
        let port = get(&["Master_Port", "Source_Port"]).unwrap_or_default();
        let last_error = [
            get(&["Last_IO_Error", "Last_IO_Error_Message"]),
            get(&["Last_SQL_Error", "Last_SQL_Error_Message"]),
        ]
        .into_iter()
        .flatten()
        .find(|e| !e.is_empty());
        ReplicaStatus {
            source: format!("{host}:{port}"),
            io_running: get(&["Slave_IO_Running", "Replica_IO_Running"]).unwrap_or_default(),
            sql_running: get(&["Slave_SQL_Running", "Replica_SQL_Running"]).unwrap_or_default(),
            lag_s: get(&["Seconds_Behind_Master", "Seconds_Behind_Source"])
                .and_then(|v| v.parse().ok()),
            received_gtid: get(&["Gtid_IO_Pos"]).filter(|g| !g.is_empty()),
            last_error,
        }
    }
}

/// A server's role as the proxy uses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Takes the statements.
    Primary,
    /// Up and read-only.
    Replica,
    /// Up and writable, but not the primary: refused (never two primaries).
    Refused,
    /// Up and writable while there is no primary (before every server was
    /// checked, or with more than one writable to choose from).
    Writable,
    /// Not reachable.
    Down,
    /// Not checked yet.
    Unknown,
}

impl Role {
    /// The name in `/status`, `SHOW MYPLEX SERVERS` and metrics.
    pub fn label(self) -> &'static str {
        match self {
            Role::Primary => "primary",
            Role::Replica => "replica",
            Role::Refused => "refused",
            Role::Writable => "writable",
            Role::Down => "down",
            Role::Unknown => "unknown",
        }
    }
}

/// One server as last seen.
#[derive(Debug, Clone)]
pub struct ServerView {
    /// As written in `backend.address`.
    pub address: String,
    /// Reachable (fewer failed checks in a row than the threshold, and no
    /// failed connect since the last good check).
    pub up: bool,
    /// `@@global.read_only` at the last good check.
    pub read_only: Option<bool>,
    /// Its role now.
    pub role: Role,
    /// Failed checks in a row.
    pub failures: u32,
    /// The last failure, kept after it recovers.
    pub last_error: Option<String>,
    /// When it was last checked.
    pub checked: Option<SystemTime>,
    /// Its replication at the last good check (several servers; `None`
    /// while down).
    pub replication: Option<Replication>,
    /// Refused while another server was the primary, and not seen
    /// read-only since: it may hold writes the primary never saw, so it is
    /// not promoted when the primary fails — only in an orderly switchover
    /// (the primary up and read-only).
    pub refused: bool,
    /// A GTID position a read's wait proved it had applied since its last
    /// check (see [`Servers::note_applied`]).
    pub proved_gtid: Option<String>,
    /// Why it takes no reads for now although it replicates (see
    /// [`Servers::unfit_for_reads`]), and until when.
    pub unfit: Option<(String, std::time::Instant)>,
}

struct State {
    servers: Vec<ServerView>,
    primary: Option<usize>,
    /// Since when there has been no primary (several servers only).
    no_primary_since: Option<SystemTime>,
}

/// The servers, their health and the primary.
pub struct Servers {
    state: Mutex<State>,
    /// How many servers (fixed at start).
    count: usize,
    /// Bumped whenever the primary changes (to another server or none).
    epoch: AtomicU64,
    /// The epoch, for dials waiting for a primary.
    changed: watch::Sender<u64>,
    /// Primary changes so far.
    switches: AtomicU64,
    /// Times a writable server other than the primary was refused.
    refusals: AtomicU64,
    /// Reads routed to each server as a replica.
    reads: Vec<AtomicU64>,
    /// Backends open to each server as a replica.
    backends: Vec<std::sync::Arc<std::sync::atomic::AtomicUsize>>,
    /// Turns of the round robin over the replicas.
    turn: AtomicU64,
}

/// `/status`'s `servers` part.
#[derive(Debug, serde::Serialize)]
pub struct Report {
    /// The primary's address (`null` while there is none).
    pub primary: Option<String>,
    /// Why there is none, since when (seconds ago).
    pub no_primary: Option<String>,
    /// Changes of primary so far.
    pub primary_changes: u64,
    /// Times a second writable server was refused.
    pub refused_writable: u64,
    /// Each server.
    pub servers: Vec<ServerReport>,
}

/// One server in [`Report`].
#[derive(Debug, serde::Serialize)]
pub struct ServerReport {
    /// As configured.
    pub address: String,
    /// `primary`, `replica`, `refused`, `writable`, `down`, `unknown`.
    pub role: &'static str,
    /// Reachable.
    pub up: bool,
    /// `@@read_only` at the last good check (`null`: not read).
    pub read_only: Option<bool>,
    /// Failed checks in a row.
    pub failures: u32,
    /// The last failure.
    pub last_error: Option<String>,
    /// Seconds since the last check (`null`: never checked).
    pub checked_s_ago: Option<f64>,
    /// Its replication at the last good check (`null`: not read, one
    /// server).
    pub replication: Option<Replication>,
    /// Reads routed to it as a replica (`routing.read_write_split`).
    pub reads: u64,
    /// Backends open to it as a replica now.
    pub replica_backends: usize,
    /// Why it takes no reads for now although it replicates (`null`: it
    /// may).
    pub unfit_for_reads: Option<String>,
}

impl Servers {
    /// The report for `/status` and `SHOW MYPLEX SERVERS`.
    pub fn report(&self) -> Report {
        let (primary_changes, refused_writable) = self.counters();
        let reads = self.reads();
        let backends = self.replica_backends();
        Report {
            primary: self.primary().map(|(_, a)| a),
            no_primary: self.no_primary().map(|(since, why)| {
                let ago = since.elapsed().unwrap_or_default().as_secs_f64();
                format!("{why} (for {ago:.1} s)")
            }),
            primary_changes,
            refused_writable,
            servers: self
                .views()
                .into_iter()
                .zip(reads.into_iter().zip(backends))
                .map(|(s, (reads, replica_backends))| ServerReport {
                    reads,
                    replica_backends,
                    unfit_for_reads: s
                        .unfit
                        .as_ref()
                        .filter(|(_, until)| *until > std::time::Instant::now())
                        .map(|(why, _)| why.clone()),
                    role: s.role.label(),
                    up: s.up,
                    read_only: s.read_only,
                    failures: s.failures,
                    checked_s_ago: s
                        .checked
                        .map(|t| t.elapsed().unwrap_or_default().as_secs_f64()),
                    last_error: s.last_error,
                    replication: s.replication,
                    address: s.address,
                })
                .collect(),
        }
    }
}

/// What an observation changed, for the caller to act on.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Changes {
    /// The primary changed: from, to (addresses).
    pub primary: Option<(Option<String>, Option<String>)>,
    /// A server became refused (writable, not the primary).
    pub refused: Option<String>,
}

/// The primary for `seen` (up, read_only) when it was `current`.
fn choose(current: Option<usize>, seen: &[ServerView]) -> Option<usize> {
    if seen.len() == 1 {
        return Some(0);
    }
    let writable = |s: &ServerView| s.up && s.read_only == Some(false);
    if let Some(p) = current
        && seen.get(p).is_some_and(writable)
    {
        return Some(p);
    }
    // An orderly switchover: the primary is up and made itself read-only,
    // so a server refused meanwhile cannot have diverged from it since.
    let switchover = current
        .and_then(|p| seen.get(p))
        .is_some_and(|s| s.up && s.read_only == Some(true));
    let eligible = |s: &ServerView| writable(s) && (!s.refused || switchover);
    // Nothing is chosen while a reachable server's read_only is unknown
    // (not checked yet, or it answers without letting it be read): it may
    // be writable too, and whichever is read first must not win by that.
    if seen
        .iter()
        .any(|s| s.checked.is_none() || (s.up && s.read_only.is_none()))
    {
        return None;
    }
    if seen.iter().filter(|s| writable(s)).count() > 1 {
        // Two writable servers and no primary to keep: never guess.
        return None;
    }
    seen.iter().position(eligible)
}

fn role_of(i: usize, primary: Option<usize>, s: &ServerView) -> Role {
    if primary == Some(i) {
        Role::Primary
    } else if !s.up {
        Role::Down
    } else {
        match s.read_only {
            None => Role::Unknown,
            Some(true) => Role::Replica,
            Some(false) if primary.is_some() => Role::Refused,
            Some(false) => Role::Writable,
        }
    }
}

impl Servers {
    /// The servers at `addresses` (at least one), none checked yet.
    pub fn new(addresses: &[&str]) -> Self {
        let servers: Vec<ServerView> = addresses
            .iter()
            .map(|a| ServerView {
                address: a.to_string(),
                up: true,
                read_only: None,
                role: Role::Unknown,
                failures: 0,
                last_error: None,
                checked: None,
                replication: None,
                refused: false,
                proved_gtid: None,
                unfit: None,
            })
            .collect();
        let primary = (servers.len() == 1).then_some(0);
        let mut state = State {
            servers,
            primary,
            no_primary_since: primary.is_none().then(SystemTime::now),
        };
        Self::assign_roles(&mut state);
        Self {
            count: addresses.len(),
            state: Mutex::new(state),
            epoch: AtomicU64::new(0),
            changed: watch::channel(0).0,
            switches: AtomicU64::new(0),
            refusals: AtomicU64::new(0),
            reads: addresses.iter().map(|_| AtomicU64::new(0)).collect(),
            backends: addresses.iter().map(|_| Default::default()).collect(),
            turn: AtomicU64::new(0),
        }
    }

    fn assign_roles(st: &mut State) {
        let primary = st.primary;
        for (i, s) in st.servers.iter_mut().enumerate() {
            s.role = role_of(i, primary, s);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How many servers there are.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Never empty; for clippy's `len_without_is_empty`.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The primary-server generation (bumped at every change of primary).
    pub fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// True when a connection dialed in primary epoch `epoch` is still on
    /// the primary: the one test of whether a backend may be used or
    /// shared again after a change of primary.
    pub fn is_current(&self, epoch: u64) -> bool {
        epoch == self.epoch()
    }

    /// The primary's address with the epoch it holds in, or `None` when
    /// there is none.
    pub fn primary(&self) -> Option<(u64, String)> {
        self.primary_at().map(|(e, _, a)| (e, a))
    }

    /// As [`Servers::primary`], with the primary's index.
    pub fn primary_at(&self) -> Option<(u64, usize, String)> {
        let st = self.lock();
        let p = st.primary?;
        Some((self.epoch(), p, st.servers[p].address.clone()))
    }

    /// The address of server `i`.
    pub fn address(&self, i: usize) -> Option<String> {
        self.lock().servers.get(i).map(|s| s.address.clone())
    }

    /// True when server `i` serves reads as a replica at all: up and
    /// read-only, not the primary (its lag is [`Servers::read_set`]'s
    /// business). A backend dialed to it as a replica is used and shared
    /// only while this holds.
    pub fn serves_reads(&self, i: usize) -> bool {
        self.lock()
            .servers
            .get(i)
            .is_some_and(|s| s.up && s.role == Role::Replica)
    }

    /// The replicas that may take reads now (several servers): up,
    /// read-only, checked within `fresh`, both replication threads running
    /// and at most `max_lag_s` behind, with their applied positions as last
    /// learnt. Fails closed: a replica whose status could not be read is
    /// not in the set.
    pub fn read_set(
        &self,
        max_lag_s: u64,
        fresh: std::time::Duration,
    ) -> Vec<super::routing::Candidate> {
        if self.count < 2 {
            return Vec::new();
        }
        let st = self.lock();
        st.servers
            .iter()
            .enumerate()
            .filter(|(_, s)| {
                s.unfit
                    .as_ref()
                    .is_none_or(|(_, until)| *until <= std::time::Instant::now())
                    && s.up
                    && s.role == Role::Replica
                    && s.checked
                        .and_then(|t| t.elapsed().ok())
                        .is_some_and(|age| age <= fresh)
            })
            .filter_map(|(i, s)| {
                let r = s.replication.as_ref()?;
                let status = r.replica.as_ref()?;
                let lagging = status.lag_s.is_none_or(|l| l > max_lag_s);
                if !status.running() || lagging || r.unreadable.is_some() {
                    return None;
                }
                let applied = r.gtid.iter().chain(&s.proved_gtid).cloned().collect();
                Some(super::routing::Candidate { server: i, applied })
            })
            .collect()
    }

    /// The primary's GTID position as a check asked for it after `after`
    /// (it covers every commit the primary made before `after`); `None`
    /// when no such reading exists yet.
    pub fn primary_position_after(&self, after: SystemTime) -> Option<String> {
        let st = self.lock();
        let r = st.servers.get(st.primary?)?.replication.as_ref()?;
        r.gtid_read_at
            .is_some_and(|t| t > after)
            .then(|| r.gtid.clone())
            .flatten()
    }

    /// Replica `i` would answer reads otherwise than the primary (its
    /// session defaults differ, `why`): out of the read set for
    /// [`UNFIT_FOR`], then tried again; logged once per spell.
    pub fn unfit_for_reads(&self, i: usize, why: &str) {
        let mut st = self.lock();
        if let Some(s) = st.servers.get_mut(i) {
            let spell_over = s
                .unfit
                .as_ref()
                .is_none_or(|(_, until)| *until <= std::time::Instant::now());
            if spell_over {
                tracing::warn!(server = %s.address, reason = why, "replica kept out of reads");
            }
            s.unfit = Some((why.to_string(), std::time::Instant::now() + UNFIT_FOR));
        }
    }

    /// The next turn of the round robin over replicas.
    pub fn next_turn(&self) -> usize {
        self.turn.fetch_add(1, Ordering::Relaxed) as usize
    }

    /// A wait on replica `i` proved it has applied `gtid`.
    pub fn note_applied(&self, i: usize, gtid: &str) {
        if let Some(s) = self.lock().servers.get_mut(i) {
            // Every domain proved so far stays proved.
            let merged = match s.proved_gtid.as_deref() {
                Some(p) => super::routing::merge_gtids(p, gtid),
                None => super::routing::is_gtid_list(gtid).then(|| gtid.to_string()),
            };
            if merged.is_some() {
                s.proved_gtid = merged;
            }
        }
    }

    /// A read went to replica `i`.
    pub fn count_read(&self, i: usize) {
        if let Some(r) = self.reads.get(i) {
            r.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts a backend dialed to server `i` as a replica while it lives.
    pub fn count_backend(&self, i: usize) -> Option<crate::backend::conn::Counted> {
        self.backends.get(i).map(crate::backend::conn::Counted::new)
    }

    /// Backends open to each server as a replica now.
    pub fn replica_backends(&self) -> Vec<usize> {
        self.backends
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect()
    }

    /// Reads routed to each server as a replica so far.
    pub fn reads(&self) -> Vec<u64> {
        self.reads
            .iter()
            .map(|r| r.load(Ordering::Relaxed))
            .collect()
    }

    /// Resolves when the primary may have changed since `epoch`.
    pub async fn changed_since(&self, epoch: u64) {
        let mut rx = self.changed.subscribe();
        let _ = rx.wait_for(|e| *e != epoch).await;
    }

    /// Every server as last seen.
    pub fn views(&self) -> Vec<ServerView> {
        self.lock().servers.clone()
    }

    /// Primary changes so far, and refusals of a second writable server.
    pub fn counters(&self) -> (u64, u64) {
        (
            self.switches.load(Ordering::Relaxed),
            self.refusals.load(Ordering::Relaxed),
        )
    }

    /// Why there is no primary (`None` when there is one): since when, and
    /// each server's state.
    pub fn no_primary(&self) -> Option<(SystemTime, String)> {
        let st = self.lock();
        if st.primary.is_some() {
            return None;
        }
        let since = st.no_primary_since.unwrap_or_else(SystemTime::now);
        let each: Vec<String> = st
            .servers
            .iter()
            .map(|s| {
                let what = match (s.up, s.read_only) {
                    (false, _) => format!(
                        "down ({})",
                        s.last_error.as_deref().unwrap_or("not reachable")
                    ),
                    (true, None) => match (&s.checked, &s.last_error) {
                        (Some(_), Some(e)) => format!("answers but cannot be read ({e})"),
                        _ => "not checked yet".into(),
                    },
                    (true, Some(true)) => "read-only".into(),
                    (true, Some(false)) => "writable".into(),
                };
                format!("{} {what}", s.address)
            })
            .collect();
        let writable = st
            .servers
            .iter()
            .filter(|s| s.up && s.read_only == Some(false))
            .count();
        let unchecked = st.servers.iter().any(|s| s.checked.is_none());
        let refused = st
            .servers
            .iter()
            .any(|s| s.refused && s.up && s.read_only == Some(false));
        let why = if writable > 1 {
            "more than one writable server, none chosen"
        } else if unchecked {
            "not every server checked yet"
        } else if refused {
            "no writable server but one refused earlier (it may hold writes the last primary never saw: make it read-only, then writable again, to take it)"
        } else {
            "no writable server"
        };
        Some((since, format!("{why}: {}", each.join(", "))))
    }

    /// A failed dial to the primary of `epoch`: recorded as a check of
    /// server `i` when that epoch is still current (a dial that started
    /// before a change says nothing about the new primary).
    pub fn observe_at(&self, i: usize, epoch: u64, check: Check) -> Changes {
        if self.epoch() != epoch {
            return Changes::default();
        }
        self.observe(i, check, 1)
    }

    /// Records what a check of server `i` found (`failures_needed` failed
    /// checks in a row make it down) and chooses the primary again.
    pub fn observe(&self, i: usize, check: Check, failures_needed: u32) -> Changes {
        let mut st = self.lock();
        let Some(s) = st.servers.get_mut(i) else {
            return Changes::default();
        };
        s.checked = Some(SystemTime::now());
        match check {
            Check::Up {
                read_only,
                replication,
            } => {
                if !s.up {
                    tracing::info!(server = %s.address, "backend server reachable again");
                }
                s.up = true;
                s.failures = 0;
                if read_only.is_some() {
                    s.read_only = read_only;
                }
                if replication.is_some() {
                    s.replication = replication;
                    s.proved_gtid = None;
                }
                if read_only == Some(true) {
                    s.refused = false;
                }
            }
            Check::Answered { error } => {
                if !s.up {
                    tracing::info!(server = %s.address, "backend server reachable again");
                }
                s.up = true;
                s.last_error = Some(error);
            }
            Check::Failed { error, at_once } => {
                s.failures = s.failures.saturating_add(1);
                if s.up && (at_once || s.failures >= failures_needed.max(1)) {
                    tracing::warn!(server = %s.address, error = %error, "backend server down");
                    s.up = false;
                    // What it said of its replication is not its state now.
                    s.replication = None;
                    s.proved_gtid = None;
                }
                s.last_error = Some(error);
            }
        }
        let before = st.primary;
        let next = choose(before, &st.servers);
        let mut changes = Changes::default();
        if next != before {
            st.primary = next;
            st.no_primary_since = match next {
                Some(_) => None,
                None => Some(SystemTime::now()),
            };
            let name = |p: Option<usize>| p.map(|p| st.servers[p].address.clone());
            changes.primary = Some((name(before), name(next)));
            let epoch = self.epoch.fetch_add(1, Ordering::AcqRel) + 1;
            self.switches.fetch_add(1, Ordering::Relaxed);
            self.changed.send_replace(epoch);
        }
        let roles_before: Vec<Role> = st.servers.iter().map(|s| s.role).collect();
        Self::assign_roles(&mut st);
        for (s, was) in st.servers.iter_mut().zip(roles_before) {
            if s.role == Role::Refused {
                s.refused = true;
                if was != Role::Refused {
                    self.refusals.fetch_add(1, Ordering::Relaxed);
                    changes.refused = Some(s.address.clone());
                }
            }
        }
        changes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn up(read_only: bool) -> Check {
        Check::Up {
            read_only: Some(read_only),
            replication: None,
        }
    }

    fn refused() -> Check {
        Check::Failed {
            error: "connection refused".into(),
            at_once: true,
        }
    }

    fn lost() -> Check {
        Check::Failed {
            error: "lost".into(),
            at_once: false,
        }
    }

    fn primary(s: &Servers) -> Option<String> {
        s.primary().map(|(_, a)| a)
    }

    #[test]
    fn one_server_is_the_primary_whatever_it_says() {
        let s = Servers::new(&["a:1"]);
        assert_eq!(primary(&s).as_deref(), Some("a:1"));
        s.observe(0, up(true), 3);
        s.observe(0, refused(), 3);
        assert_eq!(primary(&s).as_deref(), Some("a:1"), "down, still the one");
        assert!(!s.views()[0].up);
        assert_eq!(s.epoch(), 0);
        assert!(s.no_primary().is_none());
    }

    #[test]
    fn nothing_is_chosen_before_every_server_was_checked() {
        let s = Servers::new(&["a:1", "b:1"]);
        assert_eq!(primary(&s), None);
        s.observe(0, up(false), 3);
        assert_eq!(primary(&s), None, "b not checked yet");
        let why = s.no_primary().expect("none").1;
        assert!(why.contains("b:1 not checked yet"), "{why}");
        let c = s.observe(1, up(true), 3);
        assert_eq!(c.primary, Some((None, Some("a:1".into()))));
        assert_eq!(primary(&s).as_deref(), Some("a:1"));
        assert_eq!(s.views()[1].role, Role::Replica);
    }

    #[test]
    fn two_writable_at_the_start_choose_none() {
        let s = Servers::new(&["a:1", "b:1"]);
        s.observe(0, up(false), 3);
        s.observe(1, up(false), 3);
        assert_eq!(primary(&s), None);
        let why = s.no_primary().expect("none").1;
        assert!(why.contains("more than one writable"), "{why}");
        assert_eq!(s.views()[0].role, Role::Writable);
        assert_eq!(s.counters(), (0, 0), "nothing refused while none is chosen");
        // One of them goes read-only: the other is the only candidate.
        s.observe(1, up(true), 3);
        assert_eq!(primary(&s).as_deref(), Some("a:1"));
    }

    #[test]
    fn failover_to_the_one_writable_server_and_the_old_primary_is_refused() {
        let s = Servers::new(&["a:1", "b:1", "c:1"]);
        s.observe(0, up(false), 3);
        s.observe(1, up(true), 3);
        s.observe(2, up(true), 3);
        let e0 = s.epoch();
        // The primary dies: no primary until a replica is promoted.
        s.observe(0, refused(), 3);
        assert_eq!(primary(&s), None);
        assert!(s.epoch() > e0);
        let why = s.no_primary().expect("none").1;
        assert!(
            why.contains("no writable server") && why.contains("a:1 down (connection refused)"),
            "{why}"
        );
        let c = s.observe(2, up(false), 3);
        assert_eq!(c.primary, Some((None, Some("c:1".into()))));
        // The old primary comes back writable: refused, once.
        let c = s.observe(0, up(false), 3);
        assert_eq!(c.refused.as_deref(), Some("a:1"));
        assert_eq!(primary(&s).as_deref(), Some("c:1"));
        assert_eq!(s.views()[0].role, Role::Refused);
        let c = s.observe(0, up(false), 3);
        assert_eq!(c, Changes::default(), "refused once, not at every check");
        assert_eq!(s.counters(), (3, 1), "a, none, c; a refused");
        // And a second promoted replica does not take over either.
        s.observe(1, up(false), 3);
        assert_eq!(primary(&s).as_deref(), Some("c:1"));
    }

    #[test]
    fn a_refused_server_is_not_promoted_when_the_primary_fails() {
        let s = Servers::new(&["a:1", "b:1"]);
        s.observe(0, up(false), 3);
        s.observe(1, up(true), 3);
        s.observe(1, up(false), 3);
        assert_eq!(s.views()[1].role, Role::Refused);
        // The primary dies: b may hold writes a never saw.
        s.observe(0, refused(), 3);
        assert_eq!(primary(&s), None);
        let why = s.no_primary().expect("none").1;
        assert!(why.contains("refused earlier"), "{why}");
        // Seen read-only once, it is a replica again, then a candidate.
        s.observe(1, up(true), 3);
        assert_eq!(primary(&s), None);
        s.observe(1, up(false), 3);
        assert_eq!(primary(&s).as_deref(), Some("b:1"));
    }

    #[test]
    fn an_answer_without_a_reading_keeps_the_server_up() {
        let s = Servers::new(&["a:1", "b:1"]);
        s.observe(0, up(false), 3);
        s.observe(1, up(true), 3);
        for _ in 0..5 {
            s.observe(
                0,
                Check::Answered {
                    error: "Too many connections".into(),
                },
                3,
            );
        }
        assert_eq!(primary(&s).as_deref(), Some("a:1"));
        assert_eq!(
            s.views()[0].last_error.as_deref(),
            Some("Too many connections")
        );
        // A server that answers but never lets its read_only be read.
        let s = Servers::new(&["a:1", "b:1"]);
        s.observe(
            0,
            Check::Answered {
                error: "Access denied".into(),
            },
            3,
        );
        s.observe(1, up(false), 3);
        let why = s.no_primary().expect("none: a unread").1;
        assert!(
            why.contains("a:1 answers but cannot be read (Access denied)"),
            "{why}"
        );
    }

    #[test]
    fn a_read_only_primary_hands_over_to_the_one_writable_server() {
        let s = Servers::new(&["a:1", "b:1"]);
        s.observe(0, up(false), 3);
        s.observe(1, up(true), 3);
        // Switchover: b promoted while a still writable: refused ...
        s.observe(1, up(false), 3);
        assert_eq!(primary(&s).as_deref(), Some("a:1"));
        // ... until a is made read-only.
        s.observe(0, up(true), 3);
        assert_eq!(primary(&s).as_deref(), Some("b:1"));
        assert_eq!(s.views()[0].role, Role::Replica);
    }

    #[test]
    fn failed_checks_count_up_to_the_threshold_unless_the_connect_failed() {
        let s = Servers::new(&["a:1", "b:1"]);
        s.observe(0, up(false), 3);
        s.observe(1, up(true), 3);
        s.observe(0, lost(), 3);
        s.observe(0, lost(), 3);
        assert_eq!(primary(&s).as_deref(), Some("a:1"), "two of three");
        s.observe(0, up(false), 3);
        s.observe(0, lost(), 3);
        s.observe(0, lost(), 3);
        assert_eq!(primary(&s).as_deref(), Some("a:1"), "the count restarted");
        s.observe(0, lost(), 3);
        assert_eq!(primary(&s), None, "three in a row");
        assert_eq!(s.views()[0].role, Role::Down);
        assert_eq!(s.views()[0].last_error.as_deref(), Some("lost"));
    }

    #[tokio::test]
    async fn a_dial_waiting_for_a_primary_wakes_when_one_is_chosen() {
        let s = std::sync::Arc::new(Servers::new(&["a:1", "b:1"]));
        let epoch = s.epoch();
        let waiter = {
            let s = s.clone();
            tokio::spawn(async move { s.changed_since(epoch).await })
        };
        s.observe(0, up(true), 3);
        s.observe(1, up(false), 3);
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .expect("woken")
            .expect("joined");
    }

    fn cols(pairs: &[(&str, Option<&str>)]) -> Vec<(String, Option<String>)> {
        pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.map(str::to_string)))
            .collect()
    }

    #[test]
    fn replica_status_read_by_name_in_both_spellings() {
        let mariadb = ReplicaStatus::from_columns(&cols(&[
            ("Slave_IO_State", Some("Waiting for master to send event")),
            ("Master_Host", Some("127.0.0.1")),
            ("Master_Port", Some("3307")),
            ("Slave_IO_Running", Some("Yes")),
            ("Slave_SQL_Running", Some("No")),
            ("Last_IO_Error", Some("")),
            (
                "Last_SQL_Error",
                Some("Duplicate entry '1' for key 'PRIMARY'"),
            ),
            ("Seconds_Behind_Master", None),
            ("Gtid_IO_Pos", Some("0-1-42")),
        ]));
        assert_eq!(mariadb.source, "127.0.0.1:3307");
        assert!(!mariadb.running());
        assert_eq!(mariadb.lag_s, None, "NULL: a thread stopped");
        assert_eq!(mariadb.received_gtid.as_deref(), Some("0-1-42"));
        assert_eq!(
            mariadb.last_error.as_deref(),
            Some("Duplicate entry '1' for key 'PRIMARY'"),
            "the first non-empty error"
        );
        let mysql = ReplicaStatus::from_columns(&cols(&[
            ("Source_Host", Some("db1")),
            ("Source_Port", Some("3306")),
            ("Replica_IO_Running", Some("Yes")),
            ("Replica_SQL_Running", Some("Yes")),
            ("Seconds_Behind_Source", Some("7")),
            ("Last_IO_Error", Some("")),
            ("Last_SQL_Error", Some("")),
        ]));
        assert_eq!(mysql.source, "db1:3306");
        assert!(mysql.running());
        assert_eq!(mysql.lag_s, Some(7));
        assert_eq!(mysql.last_error, None);
        assert_eq!(mysql.received_gtid, None);
    }

    #[test]
    fn a_check_without_replication_keeps_the_last_reading() {
        let s = Servers::new(&["a:1", "b:2"]);
        let seen = Replication {
            gtid: Some("0-1-5".into()),
            ..Default::default()
        };
        s.observe(
            0,
            Check::Up {
                read_only: Some(false),
                replication: Some(seen.clone()),
            },
            3,
        );
        s.observe(0, up(false), 3);
        assert_eq!(s.views()[0].replication.as_ref(), Some(&seen));
    }

    fn replicating(gtid: &str, lag_s: Option<u64>, sql: &str) -> Check {
        Check::Up {
            read_only: Some(true),
            replication: Some(Replication {
                gtid: Some(gtid.into()),
                replica: Some(ReplicaStatus {
                    io_running: "Yes".into(),
                    sql_running: sql.into(),
                    lag_s,
                    ..Default::default()
                }),
                unreadable: None,
                gtid_read_at: Some(SystemTime::now()),
            }),
        }
    }

    #[test]
    fn the_read_set_is_replicas_replicating_within_the_lag() {
        let fresh = std::time::Duration::from_secs(5);
        let s = Servers::new(&["a:1", "b:2", "c:3"]);
        assert!(s.read_set(10, fresh).is_empty(), "nothing checked");
        s.observe(0, up(false), 3);
        s.observe(1, replicating("0-1-5", Some(0), "Yes"), 3);
        s.observe(2, replicating("0-1-4", Some(30), "Yes"), 3);
        let set = s.read_set(10, fresh);
        assert_eq!(set.len(), 1, "{set:?}");
        assert_eq!(set[0].server, 1);
        assert_eq!(set[0].applied, vec!["0-1-5".to_string()]);
        assert_eq!(s.read_set(60, fresh).len(), 2, "c within a larger lag");
        assert!(
            s.read_set(10, std::time::Duration::ZERO).is_empty(),
            "stale checks"
        );
        // The applier stopped (no lag figure): out.
        s.observe(1, replicating("0-1-5", None, "No"), 3);
        assert!(s.read_set(10, fresh).is_empty());
        // Status unreadable: out, whatever else is known.
        s.observe(
            1,
            Check::Up {
                read_only: Some(true),
                replication: Some(Replication {
                    unreadable: Some("1227".into()),
                    ..Default::default()
                }),
            },
            3,
        );
        assert!(s.read_set(10, fresh).is_empty());
        // Back, then down: out; the primary is never in it.
        s.observe(1, replicating("0-1-6", Some(1), "Yes"), 3);
        assert_eq!(s.read_set(10, fresh).len(), 1);
        assert!(s.serves_reads(1) && !s.serves_reads(0));
        s.observe(1, refused(), 3);
        assert!(s.read_set(10, fresh).is_empty());
        assert!(!s.serves_reads(1));
        // One server: no read set at all.
        let one = Servers::new(&["a:1"]);
        one.observe(0, replicating("0-1-1", Some(0), "Yes"), 3);
        assert!(one.read_set(10, fresh).is_empty());
    }

    #[test]
    fn a_proved_position_counts_until_the_next_reading() {
        let fresh = std::time::Duration::from_secs(5);
        let s = Servers::new(&["a:1", "b:2"]);
        s.observe(0, up(false), 3);
        s.observe(1, replicating("0-1-5", Some(0), "Yes"), 3);
        s.note_applied(1, "0-1-9");
        s.note_applied(1, "0-1-7");
        let set = s.read_set(10, fresh);
        assert_eq!(
            set[0].applied,
            vec!["0-1-5".to_string(), "0-1-9".to_string()]
        );
        s.observe(1, replicating("0-1-10", Some(0), "Yes"), 3);
        assert_eq!(s.read_set(10, fresh)[0].applied, vec!["0-1-10".to_string()]);
    }

    #[test]
    fn the_primarys_position_stands_for_writes_made_before_it_was_read() {
        let s = Servers::new(&["a:1", "b:2"]);
        let before = SystemTime::now() - std::time::Duration::from_secs(1);
        let primary = |gtid: &str| Check::Up {
            read_only: Some(false),
            replication: Some(Replication {
                gtid: Some(gtid.into()),
                gtid_read_at: Some(SystemTime::now()),
                ..Default::default()
            }),
        };
        s.observe(0, primary("0-1-5"), 3);
        assert_eq!(s.primary_position_after(before), None, "no primary yet");
        s.observe(1, replicating("0-1-5", Some(0), "Yes"), 3);
        assert_eq!(s.primary_position_after(before).as_deref(), Some("0-1-5"));
        let later = SystemTime::now() + std::time::Duration::from_secs(60);
        assert_eq!(s.primary_position_after(later), None, "read before it");
    }
}
