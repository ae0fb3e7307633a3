//! The backend's health as the proxy last saw it: up, or unreachable since
//! a moment with the last dial error. Fed by every dial (a refused or
//! timed-out connect marks it down; any successful login marks it up) and,
//! while down, by a background probe, so `/readyz` and queued clients learn
//! it at once instead of dialing (or waiting out `queue_timeout_ms`)
//! themselves. A server that answers with an error (1040, bad credentials)
//! is reachable: only connection failures count.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use tokio::sync::watch;
use tokio::time::Instant;

use super::Pool;
use crate::backend::BackendError;
use crate::protocol::packets::ErrPacket;

/// How often the probe dials while the backend is down.
pub const PROBE_INTERVAL: Duration = Duration::from_millis(500);

/// ER_CONNECT_TO_FOREIGN_DATA_SOURCE: what MariaDB itself answers when the
/// server a FEDERATED / CONNECT table lives on cannot be reached — the same
/// situation (the server the client talks to is up, the data behind it is
/// not). SQLSTATE HY000 keeps drivers from discarding their healthy
/// connection to the proxy; 2003 / 2013 are client-library codes a server
/// must not send (libmariadb reports them as 2027 "malformed packet").
pub const ER_CONNECT_TO_FOREIGN_DATA_SOURCE: u16 = 1429;

/// An outage.
#[derive(Debug, Clone)]
pub struct Down {
    /// Wall-clock start (for the message).
    pub since_wall: SystemTime,
    /// Monotonic start (for the duration).
    pub since: Instant,
    /// The last dial error, or why no server may take statements.
    pub error: String,
    /// The server the failed dial went to (with several servers, the
    /// primary then; empty for no primary).
    pub server: String,
    /// Several servers and none of them the primary (see
    /// [`super::servers`]): reachable maybe, but none takes writes.
    pub no_primary: bool,
}

/// Backend health, shared by the pool, sessions and the admin endpoint.
pub struct Health {
    address: String,
    tx: watch::Sender<Option<Down>>,
    probing: Mutex<bool>,
}

impl Health {
    /// Up, for the backend at `address`.
    pub fn new(address: String) -> Self {
        Self {
            address,
            tx: watch::channel(None).0,
            probing: Mutex::new(false),
        }
    }

    /// The backend address it watches.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// The current outage, if any.
    pub fn down(&self) -> Option<Down> {
        self.tx.borrow().clone()
    }

    /// Records a dial outcome at the watched address. Returns true when
    /// this made it go down.
    pub fn record(&self, r: Result<(), &BackendError>) -> bool {
        self.record_at(r, &self.address)
    }

    /// Records the outcome of a dial to `server`. Returns true when this
    /// made it go down. A "no primary" state is the server checks' to set
    /// and clear ([`Health::set_no_primary`]): a dial neither clears nor
    /// rewrites it (one that logged in was started before the primary was
    /// lost, and says nothing about there being one now).
    pub fn record_at(&self, r: Result<(), &BackendError>, server: &str) -> bool {
        match r {
            Ok(()) => {
                self.tx.send_if_modified(|d| {
                    if d.as_ref().is_some_and(|d| !d.no_primary) {
                        *d = None;
                        true
                    } else {
                        false
                    }
                });
                false
            }
            Err(e) if e.is_out_of_fds() => false,
            Err(e @ (BackendError::Wire(_) | BackendError::Timeout)) => {
                let error = e.to_string();
                self.tx.send_if_modified(|d| match d {
                    Some(d) if d.no_primary => false,
                    Some(d) => {
                        d.error = error;
                        d.server = server.to_string();
                        false
                    }
                    None => {
                        *d = Some(Down {
                            since_wall: SystemTime::now(),
                            since: Instant::now(),
                            error,
                            server: server.to_string(),
                            no_primary: false,
                        });
                        true
                    }
                })
            }
            // The server answered (1040, credentials, TLS, protocol): reachable.
            Err(_) => false,
        }
    }

    /// Several servers and no primary among them since `since`, for
    /// `why` (see [`super::servers::Servers::no_primary`]); `None`: there
    /// is one again. Leaves an outage learnt from dials alone.
    pub fn set_no_primary(&self, state: Option<(SystemTime, String)>) {
        self.tx.send_if_modified(|d| match (state, d.as_mut()) {
            (Some((since_wall, why)), Some(cur)) if cur.no_primary => {
                let changed = cur.error != why;
                cur.error = why;
                cur.since_wall = since_wall;
                changed
            }
            (Some((since_wall, why)), _) => {
                let ago = since_wall.elapsed().unwrap_or_default();
                *d = Some(Down {
                    since_wall,
                    since: Instant::now().checked_sub(ago).unwrap_or_else(Instant::now),
                    error: why,
                    server: String::new(),
                    no_primary: true,
                });
                true
            }
            (None, Some(cur)) if cur.no_primary => {
                *d = None;
                true
            }
            (None, _) => false,
        });
    }

    /// Resolves once the backend is down (at once if it is).
    pub async fn wait_down(&self) {
        let mut rx = self.tx.subscribe();
        let _ = rx.wait_for(Option::is_some).await;
    }

    /// The error for a client while the backend is down.
    pub fn unreachable_err(&self, d: &Down) -> ErrPacket {
        let secs = d
            .since_wall
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|t| t.as_secs())
            .unwrap_or(0);
        let (h, m, s) = ((secs / 3600) % 24, (secs / 60) % 60, secs % 60);
        if d.no_primary {
            return ErrPacket::new(
                ER_CONNECT_TO_FOREIGN_DATA_SOURCE,
                "HY000",
                format!(
                    "myplex: no writable backend server since {h:02}:{m:02}:{s:02} UTC ({:.1} s): {}",
                    d.since.elapsed().as_secs_f64(),
                    d.error
                ),
            );
        }
        ErrPacket::new(
            ER_CONNECT_TO_FOREIGN_DATA_SOURCE,
            "HY000",
            format!(
                "myplex: backend server {} unreachable since {h:02}:{m:02}:{s:02} UTC ({:.1} s): {}",
                d.server,
                d.since.elapsed().as_secs_f64(),
                d.error
            ),
        )
    }
}

impl Pool {
    /// Starts the probe loop when the backend went down (one at a time):
    /// it dials every [`PROBE_INTERVAL`] until a login succeeds.
    pub fn start_health_probe(self: &Arc<Self>) {
        {
            let Ok(mut p) = self.health.probing.lock() else {
                return;
            };
            if *p {
                return;
            }
            *p = true;
        }
        let pool = self.clone();
        tokio::spawn(async move {
            while pool.health.down().is_some() {
                tokio::time::sleep(PROBE_INTERVAL).await;
                let deadline = Instant::now() + PROBE_INTERVAL;
                // A successful dial records the recovery. Room is reserved
                // in the budget when there is any, and the connection then
                // joins the pool; without room (every place held by
                // sessions whose connections died with the server) the
                // probe connection is closed at once.
                let room = pool.groups.iter().find_map(|g| g.reserve_open());
                if let (Ok(c), Some(room)) = (pool.dial(0, deadline).await, room) {
                    room.fulfil(c).return_idle();
                }
            }
            if let Ok(mut p) = pool.health.probing.lock() {
                *p = false;
            }
            tracing::info!(address = %pool.health.address, "backend reachable again");
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn connect_failures_mark_down_server_errors_do_not() {
        let h = Health::new("db:3306".into());
        assert!(h.down().is_none());
        let refused = BackendError::Wire(crate::wire::WireError::Io(std::io::Error::from(
            std::io::ErrorKind::ConnectionRefused,
        )));
        assert!(h.record(Err(&refused)));
        assert!(!h.record(Err(&refused)), "already down");
        let d = h.down().expect("down");
        let e = h.unreachable_err(&d);
        assert_eq!(e.code, 1429);
        assert!(
            e.message.contains("db:3306") && e.message.contains("since"),
            "{e}"
        );
        h.wait_down().await;
        h.record(Ok(()));
        assert!(h.down().is_none());
    }

    #[test]
    fn a_dial_neither_clears_nor_rewrites_no_primary() {
        let h = Health::new("a:1, b:2".into());
        h.set_no_primary(Some((
            SystemTime::now(),
            "no writable server: a:1 read-only".into(),
        )));
        h.record(Ok(()));
        let d = h.down().expect("still no primary after a dial logged in");
        assert!(d.no_primary);
        let refused = BackendError::Wire(crate::wire::WireError::Io(std::io::Error::from(
            std::io::ErrorKind::ConnectionRefused,
        )));
        assert!(!h.record_at(Err(&refused), "a:1"));
        let d = h.down().expect("down");
        assert!(
            d.no_primary && d.error.contains("no writable server"),
            "{d:?}"
        );
        h.set_no_primary(None);
        assert!(h.down().is_none());
        // A failed dial names the server it went to, not the list.
        assert!(h.record_at(Err(&refused), "b:2"));
        let e = h.unreachable_err(&h.down().expect("down"));
        assert!(e.message.contains("backend server b:2 unreachable"), "{e}");
    }
}
