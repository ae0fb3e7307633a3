//! The background health checks behind [`super::servers`], every
//! `backend.health_check_interval_ms`:
//! - **One server**: an idle pooled connection is pinged (borrowed and
//!   put back where it was, its last use unchanged, so the pool's shape,
//!   order and idle timeouts stay as they were); when the ping fails, or
//!   when the pool holds no connection at all, a login of its own is made
//!   and closed at once, and a refused or timed-out connect marks the
//!   server down — so `/readyz` and queued clients learn an outage within
//!   one interval instead of at the next client's dial (an empty pool is
//!   checked by a login at most every [`LOGIN_CHECK_EVERY`], at once when
//!   the pool's maintenance just closed an idle connection found dead). Connections that
//!   are all busy or recently used mean no check that round: the clients'
//!   own statements and dials say as much.
//! - **Several servers**: one check connection per server, logged in as
//!   `backend.user` and kept open, reads `@@global.read_only`, then the
//!   server's replication (its GTID position and `SHOW REPLICA STATUS`,
//!   reported, not counted as failures when refused or slow); a refused
//!   connect is down at once, a timed-out connect, a lost connection or a
//!   failed `read_only` query counts toward `backend.health_check_failures`. These are outside
//!   the pool's budget: one connection per server, which the server's
//!   `reserved_server_connections` covers.
//!
//! What a check means for the primary is [`super::servers`]'; what a change
//! of primary means for the pool (connections closed, the globals and the
//! code catalog read again) is [`super::Pool::after_server_checks`].

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::time::Instant;

use super::Pool;
use super::servers::{Check, ReplicaStatus, Replication};
use crate::backend::{BackendConn, BackendError};

/// With no pooled connection to ping, a login check is made at most this
/// often (an idle proxy does not log in every interval).
const LOGIN_CHECK_EVERY: Duration = Duration::from_secs(5);

/// The longest a check waits for a connect or an answer.
const CHECK_TIMEOUT_MAX: Duration = Duration::from_secs(10);
/// The shortest.
const CHECK_TIMEOUT_MIN: Duration = Duration::from_secs(1);

/// Runs the checks until `shutdown`, or until the pool is gone: one task
/// per server with several (a server that does not answer delays no other
/// server's check), one for a single server.
pub async fn run(shutdown: crate::shutdown::Shutdown, pool: Weak<Pool>) {
    let n = pool.upgrade().map_or(0, |p| p.servers.len());
    if n <= 1 {
        return check_loop(shutdown, pool, None).await;
    }
    let tasks: Vec<_> = (0..n)
        .map(|i| tokio::spawn(check_loop(shutdown.clone(), pool.clone(), Some(i))))
        .collect();
    for t in tasks {
        let _ = t.await;
    }
}

/// The checks of server `server` (`None`: the single server).
async fn check_loop(
    mut shutdown: crate::shutdown::Shutdown,
    pool: Weak<Pool>,
    server: Option<usize>,
) {
    let mut conn: Option<BackendConn> = None;
    let mut dialect = Dialect::default();
    let mut last_login: Option<Instant> = None;
    loop {
        let Some(pool) = pool.upgrade() else {
            return;
        };
        let t = pool.timings();
        let interval = t.check_interval;
        let failures = t.check_failures;
        drop(t);
        if interval.is_zero() {
            conn = None;
        } else if let Some(i) = server {
            let address = pool.servers.address(i).unwrap_or_default();
            let check = check_one(&pool, &address, &mut conn, &mut dialect).await;
            let changes = pool.servers.observe(i, check, failures);
            pool.after_server_checks(changes);
        } else if let Some(check) = check_single(&pool, interval, &mut last_login).await {
            let changes = pool.servers.observe(0, check, failures);
            pool.after_server_checks(changes);
        }
        drop(pool);
        let wait = if interval.is_zero() {
            Duration::from_secs(1)
        } else {
            interval
        };
        tokio::select! {
            _ = shutdown.wait() => break,
            _ = tokio::time::sleep(wait) => {}
        }
    }
    if let Some(c) = conn {
        c.quit().await;
    }
}

/// How long one check may take: `backend.connect_timeout_ms`, within
/// [`CHECK_TIMEOUT_MIN`] and [`CHECK_TIMEOUT_MAX`] (a loaded server's slow
/// answer is not an outage).
fn check_timeout(pool: &Pool) -> Duration {
    let connect = pool
        .credentials
        .load()
        .first()
        .map_or(CHECK_TIMEOUT_MAX, |p| p.connect_timeout);
    connect.clamp(CHECK_TIMEOUT_MIN, CHECK_TIMEOUT_MAX)
}

/// The single server's check: `None` when there was nothing to check with
/// (every pooled connection busy or recently used: the clients' own
/// statements say as much).
async fn check_single(
    pool: &Arc<Pool>,
    interval: Duration,
    last_login: &mut Option<Instant>,
) -> Option<Check> {
    let limit = check_timeout(pool);
    if let Some(mut conn) = pool.idle_for_check(interval) {
        let last_used = conn.last_used;
        match tokio::time::timeout(limit, conn.ping()).await {
            Ok(Ok(())) => {
                conn.return_checked(last_used);
                return Some(Check::Up {
                    read_only: None,
                    replication: None,
                });
            }
            // Closed (dropped), and the server is asked once more below:
            // one dead connection (a KILL, wait_timeout) is not an outage.
            _ => drop(conn),
        }
    } else if !pool
        .dead_idle_seen
        .swap(false, std::sync::atomic::Ordering::Relaxed)
        && (pool.groups.iter().any(|g| g.snapshot().owned > 0)
            || last_login.is_some_and(|t| t.elapsed() < LOGIN_CHECK_EVERY))
    {
        // Nothing found dead, and the pool busy or checked lately.
        return None;
    }
    *last_login = Some(Instant::now());
    // Nothing pooled to ask (or the one asked failed): a login of its own,
    // closed at once. It feeds the health state as a dial does.
    let check = match login_check(pool, &pool.servers.address(0)?, limit).await {
        Ok(()) => Check::Up {
            read_only: None,
            replication: None,
        },
        // It answered (too many connections, credentials): reachable, as
        // the health state counts it.
        Err(BackendError::Server(e)) => Check::Answered {
            error: e.to_string(),
        },
        Err(e) => failed(&e),
    };
    Some(check)
}

/// One login of `backend.user` at `address` and a ping, closed after;
/// recorded in the health state (`/readyz`) as a dial is.
async fn login_check(pool: &Arc<Pool>, address: &str, limit: Duration) -> Result<(), BackendError> {
    let r = match pool.login_at(0, address, limit).await {
        Ok(mut c) => {
            let pinged = tokio::time::timeout(limit, c.ping()).await;
            c.quit().await;
            pinged.unwrap_or(Err(BackendError::Timeout))
        }
        Err(e) => Err(e),
    };
    pool.record_health(r.as_ref().map(|_| ()));
    r
}

/// How a server spells the replication readings, learnt on each check
/// connection (MariaDB and MySQL name the GTID position differently, and
/// servers older than MariaDB 10.5 / MySQL 8.0.22 know only `SHOW SLAVE
/// STATUS`), and whether its replica status is asked at all for now.
#[derive(Debug, Default, Clone)]
struct Dialect {
    /// The queries of [`GTID_QUERIES`] still to try: all until one
    /// answered, then that one alone, none once neither works.
    gtid: Option<std::ops::Range<usize>>,
    /// `SHOW SLAVE STATUS` instead of `SHOW REPLICA STATUS`.
    old_show: bool,
    /// The replica status is not asked before this moment, for this
    /// reason (it was refused, or got no answer): kept across connections.
    status_skipped: Option<(Instant, String)>,
}

impl Dialect {
    /// Forgets what was learnt on a connection that is gone (another
    /// server may answer at the address next time); a back-off stays.
    fn new_connection(&mut self) {
        self.gtid = None;
        self.old_show = false;
    }

    /// The replica status is not asked for [`STATUS_BACKOFF`], for `why`;
    /// returns `why`.
    fn skip_status(&mut self, why: String) -> String {
        self.status_skipped = Some((Instant::now() + STATUS_BACKOFF, why.clone()));
        why
    }
}

/// After the replica status was refused (no `SLAVE MONITOR`: the same
/// access-denied error every interval otherwise) or got no answer (it may
/// wait on the server's replication locks), it is not asked again for
/// this long.
const STATUS_BACKOFF: Duration = Duration::from_secs(30);

/// The GTID position queries, tried in order.
const GTID_QUERIES: [&str; 2] = [
    "SELECT @@global.gtid_current_pos",
    "SELECT @@global.gtid_executed",
];

/// MySQL's `ER_PARSE_ERROR` and `ER_UNKNOWN_SYSTEM_VARIABLE`.
const ER_PARSE_ERROR: u16 = 1064;
const ER_UNKNOWN_SYSTEM_VARIABLE: u16 = 1193;

/// Why a replication reading ended early.
enum ReadingError {
    /// The connection was lost: the check failed.
    Lost(String),
    /// No answer by the deadline: the server is up (it answered
    /// `@@read_only`); the reading says what could not be read, and the
    /// connection, mid-answer, goes.
    NoAnswer(Replication),
}

/// Reads server `conn`'s replication by `deadline`: its GTID position and
/// its status as a replica. A refusal of either is reported in the
/// reading, not fatal: the server answered, and `@@read_only` alone
/// decides its role.
async fn read_replication(
    conn: &mut BackendConn,
    dialect: &mut Dialect,
    deadline: Instant,
) -> Result<Replication, ReadingError> {
    let mut out = Replication::default();
    let no_answer = |mut out: Replication, what: &str, dialect: &mut Dialect| {
        out.unreadable =
            Some(dialect.skip_status(format!("{what}: no answer within the check's time")));
        ReadingError::NoAnswer(out)
    };
    // The GTID position.
    let mut found = 0..0;
    for i in dialect.gtid.clone().unwrap_or(0..GTID_QUERIES.len()) {
        let q = GTID_QUERIES[i];
        out.gtid_read_at = Some(std::time::SystemTime::now());
        let Ok(answer) = tokio::time::timeout_at(deadline, conn.query_row(q)).await else {
            return Err(no_answer(out, q, dialect));
        };
        match answer {
            Ok(row) => out.gtid = row.and_then(|r| r.into_iter().next().flatten()),
            Err(BackendError::Server(e)) if e.code == ER_UNKNOWN_SYSTEM_VARIABLE => continue,
            Err(BackendError::Server(_)) => {}
            Err(e) => return Err(ReadingError::Lost(e.to_string())),
        }
        found = i..i + 1;
        break;
    }
    dialect.gtid = Some(found);
    // The status as a replica, unless backing off.
    if let Some((until, why)) = &dialect.status_skipped {
        if Instant::now() < *until {
            out.unreadable = Some(why.clone());
            return Ok(out);
        }
        dialect.status_skipped = None;
    }
    loop {
        let q = if dialect.old_show {
            "SHOW SLAVE STATUS"
        } else {
            "SHOW REPLICA STATUS"
        };
        let Ok(answer) = tokio::time::timeout_at(deadline, conn.query_named_row(q)).await else {
            return Err(no_answer(out, q, dialect));
        };
        match answer {
            Ok(row) => {
                out.replica = row.map(|r| ReplicaStatus::from_columns(&r));
                break;
            }
            Err(BackendError::Server(e)) if e.code == ER_PARSE_ERROR && !dialect.old_show => {
                dialect.old_show = true;
            }
            Err(BackendError::Server(e)) => {
                out.unreadable = Some(dialect.skip_status(format!("{q}: {e}")));
                break;
            }
            Err(e) => return Err(ReadingError::Lost(e.to_string())),
        }
    }
    Ok(out)
}

/// A check of one of several servers on its own connection.
async fn check_one(
    pool: &Pool,
    address: &str,
    conn: &mut Option<BackendConn>,
    dialect: &mut Dialect,
) -> Check {
    let limit = check_timeout(pool);
    let c = match conn {
        Some(c) => c,
        None => match pool.login_at(0, address, limit).await {
            Ok(c) => {
                dialect.new_connection();
                conn.insert(c)
            }
            Err(BackendError::Server(e)) => {
                return Check::Answered {
                    error: e.to_string(),
                };
            }
            Err(e) => return failed(&e),
        },
    };
    // One deadline for the check's queries.
    let deadline = Instant::now() + limit;
    let read = tokio::time::timeout_at(deadline, c.query_row("SELECT @@global.read_only")).await;
    let value = match read {
        Ok(Ok(row)) => row.and_then(|r| r.into_iter().next().flatten()),
        Ok(Err(BackendError::Server(e))) => {
            return Check::Answered {
                error: e.to_string(),
            };
        }
        Ok(Err(e)) => {
            *conn = None;
            return failed_query(e.to_string());
        }
        Err(_) => {
            *conn = None;
            return failed_query(format!("no answer within {} ms", limit.as_millis()));
        }
    };
    let read_only = match value.as_deref().map(str::trim) {
        Some("0") | Some("OFF") => false,
        Some("1") | Some("ON") => true,
        other => {
            *conn = None;
            return failed_query(format!("unexpected @@read_only: {other:?}"));
        }
    };
    let replication = match read_replication(c, dialect, deadline).await {
        Ok(r) => r,
        // Up, with what could not be read said; the connection was left
        // mid-answer.
        Err(ReadingError::NoAnswer(r)) => {
            *conn = None;
            r
        }
        Err(ReadingError::Lost(e)) => {
            *conn = None;
            return failed_query(e);
        }
    };
    Check::Up {
        read_only: Some(read_only),
        replication: Some(replication),
    }
}

/// A failed query on an established connection: counts toward the
/// threshold.
fn failed_query(error: String) -> Check {
    Check::Failed {
        error,
        at_once: false,
    }
}

/// A failed connect: refused, or no route to the host — down at once; a
/// timeout (a loaded server may be slow to greet) counts toward the
/// threshold like a failed query.
fn failed(e: &BackendError) -> Check {
    Check::Failed {
        error: e.to_string(),
        at_once: refused(e),
    }
}

/// A connect the server's host turned away: nothing listens there.
pub(super) fn refused(e: &BackendError) -> bool {
    use std::io::ErrorKind;
    match e {
        BackendError::Wire(crate::wire::WireError::Io(io)) => matches!(
            io.kind(),
            ErrorKind::ConnectionRefused
                | ErrorKind::HostUnreachable
                | ErrorKind::NetworkUnreachable
                // A Unix socket whose server is gone.
                | ErrorKind::NotFound
        ),
        _ => false,
    }
}
