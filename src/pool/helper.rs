//! Helper connections: a backend connection used briefly outside any
//! client statement, to interrupt one (`KILL QUERY ID` for a client's
//! `KILL QUERY`, `KILL` for a client that stopped reading its result).
//! They come out of the same per-group budget as every other backend
//! connection, so the server never sees more than
//! `pool.max_backend_connections` from the proxy:
//!
//! 1. an idle pooled connection of the same credential pool is borrowed
//!    (and returned idle afterwards when it stayed clean);
//! 2. else a connection is opened in room reserved in a group (and kept in
//!    the pool afterwards, like any other);
//! 3. else an idle connection of another credential pool is closed to make
//!    room (as a lease does when its group is full);
//! 4. else it takes the next connection that comes back, ahead of every
//!    queued statement (a lease at `Priority::Internal` in group 0; when
//!    it polled for an idle one instead, a loaded pool handed every
//!    returning backend to a waiting lease first and the KILL waited out
//!    its deadline); past the deadline the interrupt is given up and
//!    counted.
//!
//! Owns choosing and returning helper connections; what is sent on them is
//! the caller's.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::Pool;
use super::group::Leased;
use super::scheduler::{Need, Priority};
use crate::backend::BackendConn;

/// An idle backend used by a session more recently than this is left to
/// it: a client between two statements gets its own backend back (and its
/// session status with it) instead of one opened because a background
/// reading took its own.
const WARM: Duration = Duration::from_secs(2);

/// Where a helper connection came from (the metric's `source` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// An idle pooled connection, borrowed.
    Idle,
    /// Opened within the budget for this use.
    Opened,
}

impl Source {
    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Source::Idle => "idle",
            Source::Opened => "opened",
        }
    }
}

/// A helper connection; give it back with [`Helper::finish`].
pub struct Helper {
    /// The connection (counted in its group's budget while held).
    pub conn: Leased,
    /// Where it came from.
    pub source: Source,
}

impl Helper {
    /// Returns the connection to the pool when `clean` (its commands
    /// succeeded: no error or warning left in its diagnostics area), else
    /// closes it.
    pub fn finish(self, clean: bool) {
        if clean && self.conn.io.idle_is_healthy() {
            self.conn.return_idle();
        }
    }

    /// As [`Helper::finish`] for a borrowed connection; one opened for
    /// this use is closed (the pool is left as the helper found it).
    pub fn give_back(self, clean: bool) {
        if self.source == Source::Idle {
            self.finish(clean);
        }
    }
}

impl Pool {
    /// One idle connection for which `pick` holds, taken out of the first
    /// group that has one (it stays owned: dropping it closes it).
    fn take_one_idle(&self, pick: impl FnMut(&BackendConn) -> bool) -> Option<Leased> {
        self.take_one(false, pick)
    }

    /// As [`Self::take_one_idle`], among parked connections (see
    /// `super::parking`): to be cleaned or closed, never used as they are.
    fn take_one_parked(&self, pick: impl FnMut(&BackendConn) -> bool) -> Option<Leased> {
        self.take_one(true, pick)
    }

    fn take_one(&self, parked: bool, mut pick: impl FnMut(&BackendConn) -> bool) -> Option<Leased> {
        self.groups.iter().find_map(|g| {
            let mut found = false;
            let mut once = |c: &BackendConn| {
                // Never one to a server that stopped being the primary.
                let this = !found && self.on_primary(c) && pick(c);
                found |= this;
                this
            };
            let taken = if parked {
                g.take_parked_where(&mut once)
            } else {
                g.take_idle_where(&mut once)
            };
            taken.into_iter().next()
        })
    }

    /// An idle connection that no session used in the last [`WARM`] nor
    /// `quiet`, of credential pool 0 when `backend_user`, for a background
    /// use.
    pub(super) fn take_one_idle_cold(&self, quiet: Duration, backend_user: bool) -> Option<Leased> {
        let of_backend_user = |key: usize| self.keys.get(key).is_some_and(|(c, _)| c == 0);
        let cold = quiet.max(WARM);
        self.take_one_idle(|c| {
            (!backend_user || of_backend_user(c.pool))
                && c.io.idle_is_healthy()
                && c.last_used.elapsed() >= cold
        })
    }

    /// A connection logged in as `backend.user` (credential pool 0) for a
    /// background reading that must make progress under any load (the code
    /// catalog), without changing the pool's shape:
    /// 1. an idle connection of credential pool 0, of any flavour (the
    ///    capabilities do not change what a SELECT reads), that no session
    ///    used in the last [`WARM`] (the least recently used), borrowed;
    /// 2. else one of its own within the budget, closed after the reading;
    /// 3. else a lease of the most recent flavour of that credential pool
    ///    (the one its clients use; key 0 when none) asked for in group 0
    ///    at [`Priority::Internal`]: ahead of every queued statement and
    ///    past the in-flight limit, so that under full load it gets the
    ///    next connection that comes back instead of closing one (a lease
    ///    of the same key never evicts). In the client's high-priority
    ///    queue it waited behind the limit: at 2,048 I/O-bound clients no
    ///    reading got a connection within 5 s for 40 s in a row. Its
    ///    execution slot is freed at once, without a latency sample: the
    ///    reading is not a client's statement.
    ///
    /// `None` when nothing was granted before `deadline`.
    pub async fn reading_connection(self: &Arc<Self>, deadline: Instant) -> Option<Helper> {
        let of_backend_user = |key: usize| self.keys.get(key).is_some_and(|(c, _)| c == 0);
        if let Some(conn) = self.take_one_idle_cold(WARM, true) {
            return Some(Helper {
                conn,
                source: Source::Idle,
            });
        }
        let key = (0..self.keys.len())
            .rev()
            .find(|k| of_backend_user(*k))
            .unwrap_or(0);
        if let Some(res) = self.groups.iter().find_map(|g| g.reserve_open()) {
            // Dropping the reservation on failure frees the room.
            if let Ok(conn) = self.dial(key, deadline).await {
                return Some(Helper {
                    conn: res.fulfil(conn),
                    source: Source::Opened,
                });
            }
        }
        self.internal_lease(key, deadline).await
    }

    /// A connection of credential pool `key` leased in group 0 at
    /// [`Priority::Internal`]: the next one that comes back, ahead of
    /// every queued statement (a full pool under load hands every
    /// returning backend to a waiting lease at once, so looking for an idle
    /// one finds none). Its execution slot is freed at once, without a
    /// latency sample: the proxy's own use is not a client's statement.
    async fn internal_lease(self: &Arc<Self>, key: usize, deadline: Instant) -> Option<Helper> {
        let group = self.groups.first()?.clone();
        let tenant = self.tenants.for_user("", false);
        let adm = group
            .acquire(
                Need::Lease {
                    pool: key,
                    parked: None,
                },
                Priority::Internal,
                &tenant,
                deadline,
            )
            .await
            .ok()?;
        adm.slot.release_unmeasured();
        match (adm.backend, adm.open) {
            (Some(conn), _) => Some(Helper {
                conn,
                source: Source::Idle,
            }),
            (None, Some(res)) => Some(Helper {
                conn: res.fulfil(self.dial(key, deadline).await.ok()?),
                source: Source::Opened,
            }),
            (None, None) => None,
        }
    }

    /// Runs `sql` (a KILL) as credential pool key `key` on the server a
    /// connection of primary epoch `epoch` to server `server` runs on: a
    /// helper connection while that is still the primary, else a login of
    /// its own to that server, closed after (a KILL is not a write, and on
    /// any other server the same thread id is someone else's). Returns the
    /// helper's source label and whether the server took it.
    pub async fn kill_on(
        self: &Arc<Self>,
        server: usize,
        epoch: u64,
        key: usize,
        sql: &str,
        deadline: Instant,
    ) -> (&'static str, bool) {
        if self.servers.is_current(epoch) {
            return match self.helper(key, deadline).await {
                Some(mut h) => {
                    let sent = h.conn.exec(sql).await.is_ok();
                    let label = h.source.label();
                    h.finish(sent);
                    (label, sent)
                }
                None => ("none", false),
            };
        }
        let Some(address) = self.servers.address(server) else {
            return ("none", false);
        };
        let limit = deadline.saturating_duration_since(Instant::now());
        match self.login_at(key, &address, limit).await {
            Ok(mut c) => {
                let sent = c.exec(sql).await.is_ok();
                c.quit().await;
                ("direct", sent)
            }
            Err(_) => ("direct", false),
        }
    }

    /// A connection of credential pool key `key` for a short internal use,
    /// within the backend budget; `None` when none came free before
    /// `deadline` or the server could not be reached.
    pub async fn helper(self: &Arc<Self>, key: usize, deadline: Instant) -> Option<Helper> {
        if let Some(conn) = self.take_one_idle(|c| c.pool == key && c.io.idle_is_healthy()) {
            return Some(Helper {
                conn,
                source: Source::Idle,
            });
        }
        if let Some(res) = self.groups.iter().find_map(|g| g.reserve_open()) {
            return self.dial_helper(res, key, deadline).await;
        }
        // Full, and a session parked one of this pool: clean it. One that
        // fails is closed and its room is the new connection's (handed on,
        // never offered to the queue on the way: see `Leased::replace`).
        if let Some(mut conn) = self.take_one_parked(|c| c.pool == key) {
            if conn.io.idle_is_healthy()
                && tokio::time::timeout_at(deadline, super::parking::clean(&mut conn))
                    .await
                    .unwrap_or(false)
            {
                return Some(Helper {
                    conn,
                    source: Source::Idle,
                });
            }
            if let Some(res) = conn.replace() {
                return self.dial_helper(res, key, deadline).await;
            }
        }
        // Full, and only other pools' connections are idle: close one (as a
        // lease would) and open ours in its room. Closing first and asking
        // for room after let a queued lease take it, and the next call
        // evicted again (a warm backend closed per turn, each replaced by
        // a login and its prepares: seen ~100 a second under load).
        if let Some(conn) = self
            .take_one_idle(|c| c.pool != key)
            .or_else(|| self.take_one_parked(|c| c.pool != key))
            && let Some(res) = conn.replace()
        {
            return self.dial_helper(res, key, deadline).await;
        }
        // Every backend is out: the next one that comes back.
        self.internal_lease(key, deadline).await
    }

    /// Dials a connection of pool key `key` into the room `res` holds
    /// (dropping the reservation on failure frees the room).
    async fn dial_helper(
        self: &Arc<Self>,
        res: super::group::OpenReservation,
        key: usize,
        deadline: Instant,
    ) -> Option<Helper> {
        let conn = self.dial(key, deadline).await.ok()?;
        Some(Helper {
            conn: res.fulfil(conn),
            source: Source::Opened,
        })
    }
}
