//! Admission of connections that have not logged in yet: a global bound and
//! a per-address bound on connections still in the handshake, separate from
//! `pool.max_client_connections` (which counts logged-in clients only).
//!
//! When a bound is reached the *oldest* pending handshake (of that address,
//! or overall) is closed to make room, rather than the newcomer refused: a
//! real client finishes its login in milliseconds, so a storm of
//! connections that never send a byte evicts only itself and can never lock
//! out a real login. Owns no sockets: an evicted connection is told through
//! a oneshot channel and its task closes it.
//!
//! Also owns the count of logged-in clients and the admin reserve above
//! `max_client_connections`.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::oneshot;

/// Logged-in admin users may exceed `max_client_connections` by this many
/// connections (like MariaDB's `extra_max_connections`), so an operator can
/// always get into the console during a client storm.
pub const ADMIN_RESERVE: usize = 10;

/// Bounds of pending handshakes.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// Pending handshakes overall.
    pub total: usize,
    /// Pending handshakes from one address.
    pub per_address: usize,
}

#[derive(Default)]
struct Pending {
    /// Ticket → (address, eviction signal), oldest first.
    by_ticket: BTreeMap<u64, (IpAddr, oneshot::Sender<()>)>,
    /// Tickets per address, oldest first.
    by_addr: HashMap<IpAddr, VecDeque<u64>>,
    next: u64,
}

impl Pending {
    fn remove(&mut self, ticket: u64) -> Option<(IpAddr, oneshot::Sender<()>)> {
        let (ip, tx) = self.by_ticket.remove(&ticket)?;
        if let Some(q) = self.by_addr.get_mut(&ip) {
            q.retain(|t| *t != ticket);
            if q.is_empty() {
                self.by_addr.remove(&ip);
            }
        }
        Some((ip, tx))
    }

    fn evict(&mut self, ticket: u64) {
        if let Some((_, tx)) = self.remove(ticket) {
            let _ = tx.send(());
        }
    }
}

/// Connection admission state shared by the accept loop and sessions.
pub struct Admission {
    bounds: Bounds,
    pending: Mutex<Pending>,
    logged_in: AtomicUsize,
    evicted: AtomicUsize,
}

/// A pending handshake's place; leaving (drop) frees it.
pub struct PendingGuard<'a> {
    admission: &'a Admission,
    ticket: u64,
    /// Fires when this handshake was evicted to make room.
    pub evicted: oneshot::Receiver<()>,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        if let Ok(mut p) = self.admission.pending.lock() {
            p.remove(self.ticket);
        }
    }
}

/// A logged-in client's place in the count; leaving (drop) frees it.
pub struct LoggedInGuard<'a>(&'a Admission);

impl Drop for LoggedInGuard<'_> {
    fn drop(&mut self) {
        self.0.logged_in.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Admission {
    /// Admission with these bounds on pending handshakes.
    pub fn new(bounds: Bounds) -> Self {
        Self {
            bounds,
            pending: Mutex::new(Pending::default()),
            logged_in: AtomicUsize::new(0),
            evicted: AtomicUsize::new(0),
        }
    }

    /// Clients logged in now.
    pub fn logged_in(&self) -> usize {
        self.logged_in.load(Ordering::Relaxed)
    }

    /// Pending handshakes now.
    pub fn pending(&self) -> usize {
        self.pending.lock().map(|p| p.by_ticket.len()).unwrap_or(0)
    }

    /// Pending handshakes closed to make room, since start.
    pub fn evicted(&self) -> usize {
        self.evicted.load(Ordering::Relaxed)
    }

    /// Registers a new handshake from `ip`, evicting the oldest pending one
    /// of that address (then overall) when a bound is reached.
    pub fn enter(&self, ip: IpAddr) -> PendingGuard<'_> {
        let (tx, rx) = oneshot::channel();
        let mut evicted = 0;
        let ticket = match self.pending.lock() {
            Ok(mut p) => {
                let same_addr = p.by_addr.get(&ip).map_or(0, VecDeque::len);
                if same_addr >= self.bounds.per_address.max(1)
                    && let Some(oldest) = p.by_addr.get(&ip).and_then(|q| q.front().copied())
                {
                    p.evict(oldest);
                    evicted += 1;
                }
                while p.by_ticket.len() >= self.bounds.total.max(1) {
                    let Some(oldest) = p.by_ticket.keys().next().copied() else {
                        break;
                    };
                    p.evict(oldest);
                    evicted += 1;
                }
                let t = p.next;
                p.next += 1;
                p.by_ticket.insert(t, (ip, tx));
                p.by_addr.entry(ip).or_default().push_back(t);
                t
            }
            // A poisoned lock: admit without tracking.
            Err(_) => u64::MAX,
        };
        self.evicted.fetch_add(evicted, Ordering::Relaxed);
        PendingGuard {
            admission: self,
            ticket,
            evicted: rx,
        }
    }

    /// Counts a client that finished its login; `None` (and not counted)
    /// when that would exceed `max` (`max + ADMIN_RESERVE` for an admin).
    pub fn log_in(&self, max: usize, admin: bool) -> Option<LoggedInGuard<'_>> {
        let limit = if admin { max + ADMIN_RESERVE } else { max };
        let n = self.logged_in.fetch_add(1, Ordering::Relaxed) + 1;
        let guard = LoggedInGuard(self);
        (n <= limit).then_some(guard)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([127, 0, 0, last])
    }

    #[test]
    fn per_address_bound_evicts_that_address_oldest() {
        let a = Admission::new(Bounds {
            total: 100,
            per_address: 2,
        });
        let mut g1 = a.enter(ip(1));
        let other = a.enter(ip(2));
        let mut g2 = a.enter(ip(1));
        let g3 = a.enter(ip(1));
        assert!(g1.evicted.try_recv().is_ok(), "oldest of the address goes");
        assert!(g2.evicted.try_recv().is_err());
        assert_eq!(a.pending(), 3);
        assert_eq!(a.evicted(), 1);
        drop((other, g3));
        assert_eq!(a.pending(), 1);
    }

    #[test]
    fn total_bound_evicts_oldest_overall() {
        let a = Admission::new(Bounds {
            total: 2,
            per_address: 10,
        });
        let mut g1 = a.enter(ip(1));
        let mut g2 = a.enter(ip(2));
        let _g3 = a.enter(ip(3));
        assert!(g1.evicted.try_recv().is_ok());
        assert!(g2.evicted.try_recv().is_err());
        assert_eq!(a.pending(), 2);
    }

    #[test]
    fn logged_in_bound_leaves_room_for_admins() {
        let a = Admission::new(Bounds {
            total: 1,
            per_address: 1,
        });
        let g = a.log_in(1, false);
        assert!(g.is_some());
        assert!(a.log_in(1, false).is_none());
        assert_eq!(a.logged_in(), 1, "a refused login is not counted");
        let admin = a.log_in(1, true);
        assert!(admin.is_some());
        drop((g, admin));
        assert_eq!(a.logged_in(), 0);
    }
}
