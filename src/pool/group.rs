//! One thread group at run time: the scheduler state behind a mutex (never
//! held across `.await`), cancel-safe waiting with a deadline, and guards
//! that give slots and backend connections back on every path — including
//! the user's count of leased backends (its `max_backend_connections`),
//! which a lease carries until its connection goes back or closes.

use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::oneshot;
use tokio::time::{Duration, Instant};

use super::scheduler::{Admission, Grant, GroupState, Limits, Need, Pooled, Priority, Snapshot};
use super::tenants::Tenant;
use crate::backend::BackendConn;

/// Connections sit in the scheduler boxed: a grant is moved a few times
/// per statement, and an unboxed connection is several hundred bytes.
type Conn = Box<BackendConn>;

impl Pooled for Conn {
    fn pool(&self) -> usize {
        self.pool
    }
    fn parked_for(&self) -> Option<u64> {
        self.parked_for
    }
    fn share_user(&self) -> Option<u32> {
        self.share_user
    }
    fn set_share_user(&mut self, user: u32) {
        self.share_user = Some(user);
    }
}

/// A thread group.
pub struct Group {
    /// Group number.
    pub id: usize,
    state: Mutex<GroupState<Conn>>,
}

/// Why waiting for a slot or backend failed.
#[derive(Debug, Clone)]
pub struct QueueTimeout {
    /// The user's name and `max_backend_connections` when its sessions
    /// held that many backends as it gave up (the user's cap, not the
    /// group, held it back).
    pub user_cap: Option<(String, usize)>,
    /// Group number.
    pub group: usize,
    /// How long it waited.
    pub waited_ms: u128,
    /// In-flight statements then.
    pub in_flight: usize,
    /// The cap.
    pub cap: usize,
    /// Requests queued then.
    pub queued: usize,
    /// Backend connections owned.
    pub owned: usize,
    /// Share of backend connections.
    pub max_owned: usize,
}

impl std::fmt::Display for QueueTimeout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some((user, cap)) = &self.user_cap {
            return write!(
                f,
                "myplex: statement of user '{user}' waited {} ms in thread group {} queue: the user holds its max_backend_connections ({cap} of {cap}); raise users.max_backend_connections or users.queue_timeout_ms of '{user}'",
                self.waited_ms, self.group
            );
        }
        write!(
            f,
            "myplex: statement waited {} ms in thread group {} queue (in-flight {}/{}, {} queued, backend connections {}/{}); raise pool.oversubscribe, pool.max_backend_connections or pool.queue_timeout_ms",
            self.waited_ms,
            self.group,
            self.in_flight,
            self.cap,
            self.queued,
            self.owned,
            self.max_owned
        )
    }
}

impl std::error::Error for QueueTimeout {}

/// An admitted request: an execution slot, plus what the lease gave.
pub struct Admitted {
    /// The slot; free it with [`SlotGuard::finish`] or by dropping.
    pub slot: SlotGuard,
    /// For a lease: an idle backend, or `None` when a new one must be opened
    /// (the group already counts it; drop the reservation on failure).
    pub backend: Option<Leased>,
    /// For a lease that must open a connection: the reservation.
    pub open: Option<OpenReservation>,
    /// Time spent queued.
    pub waited: Duration,
}

impl Group {
    /// A new group with a fixed backend share.
    pub fn new(id: usize, limits: Limits) -> Arc<Self> {
        Self::with_budget(id, limits, None)
    }

    /// A new group sharing `budget` (the elastic pool; this group's index).
    pub fn with_budget(
        id: usize,
        limits: Limits,
        budget: Option<(Arc<super::elastic::Budget>, usize)>,
    ) -> Arc<Self> {
        Arc::new(Self {
            id,
            state: Mutex::new(GroupState::with_budget(limits, budget)),
        })
    }

    fn lock(&self) -> MutexGuard<'_, GroupState<Conn>> {
        // A panic while holding the lock cannot leave the plain-data state
        // half-updated in a way worse than refusing service, so keep going.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Current view.
    pub fn snapshot(&self) -> Snapshot {
        self.lock().snapshot()
    }

    /// Idle connections that no session parked (usable as they are).
    pub fn clean_idle(&self) -> usize {
        self.lock().clean_idle()
    }

    /// Applies reloaded limits.
    pub fn set_limits(&self, limits: Limits) {
        self.lock().set_limits(limits, Instant::now());
    }

    /// Waits for `need` at `prio` for `tenant` (its lane, weight and
    /// backend cap) until `deadline`. Cancel-safe: dropping the future
    /// removes the request or gives back what was granted.
    pub async fn acquire(
        self: &Arc<Self>,
        need: Need,
        prio: Priority,
        tenant: &Arc<Tenant>,
        deadline: Instant,
    ) -> Result<Admitted, QueueTimeout> {
        loop {
            let adm = self.acquire_once(need, prio, tenant, deadline).await?;
            if let Some(adm) = Self::unparked(adm, need, deadline).await {
                return Ok(adm);
            }
        }
    }

    /// What [`Self::acquire`] grants never carries another session's
    /// leftovers: a connection parked by the requester (`need`'s `parked`)
    /// is its own, taken as it is; one parked by anyone else is cleaned
    /// here first (see `super::parking`), within the request's `deadline`.
    /// When that cleanup fails the connection is closed and its room
    /// becomes the grant's permission to open a new one (the request keeps
    /// its turn); `None` when the group had to give that room up (see
    /// [`Leased::replace`]): the request starts over.
    async fn unparked(mut adm: Admitted, need: Need, deadline: Instant) -> Option<Admitted> {
        let own = match need {
            Need::Lease { parked, .. } => parked,
            Need::Slot | Need::Continue => None,
        };
        let Some(b) = adm.backend.as_mut() else {
            return Some(adm);
        };
        match b.parked_for {
            None => return Some(adm),
            Some(t) if Some(t) == own => {
                b.parked_for = None;
                return Some(adm);
            }
            Some(_) => {}
        }
        // A connection the server closed is not asked; a cleanup the
        // server does not answer in time costs the requester no more than
        // its queue timeout.
        if b.io.idle_is_healthy()
            && tokio::time::timeout_at(deadline, super::parking::clean(b))
                .await
                .unwrap_or(false)
        {
            return Some(adm);
        }
        tracing::debug!(
            backend = b.id.0,
            "closing a parked backend that failed cleanup"
        );
        adm.open = Some(adm.backend.take()?.replace()?);
        Some(adm)
    }

    /// One request in the queue (see [`Self::acquire`]).
    async fn acquire_once(
        self: &Arc<Self>,
        need: Need,
        prio: Priority,
        tenant: &Arc<Tenant>,
        deadline: Instant,
    ) -> Result<Admitted, QueueTimeout> {
        let start = Instant::now();
        let adm = self
            .lock()
            .request_until(need, prio, tenant, start, Some(deadline));
        let (grant, id) = match adm {
            Admission::Now(g, id) => (g, id),
            Admission::Queued(id, rx) => {
                let mut w = Waiting {
                    group: self,
                    id,
                    tenant,
                    lease: matches!(need, Need::Lease { .. }),
                    rx: Some(rx),
                };
                (w.wait(deadline, start).await?, id)
            }
        };
        // The proxy's own requests count for no user's share.
        let user = (prio != Priority::Internal).then_some(tenant.index);
        Ok(self.admitted(grant, id, tenant, user, start.elapsed()))
    }

    fn admitted(
        self: &Arc<Self>,
        grant: Grant<Conn>,
        id: u64,
        tenant: &Arc<Tenant>,
        user: Option<u32>,
        waited: Duration,
    ) -> Admitted {
        let slot = SlotGuard {
            group: Some(self.clone()),
            id,
        };
        match grant {
            Grant::Slot => Admitted {
                slot,
                backend: None,
                open: None,
                waited,
            },
            Grant::Backend(b) => Admitted {
                slot,
                backend: Some(Leased {
                    group: self.clone(),
                    conn: Some(b),
                    tenant: Some(tenant.clone()),
                }),
                open: None,
                waited,
            },
            Grant::Open => Admitted {
                slot,
                backend: None,
                open: Some(OpenReservation {
                    group: Some(self.clone()),
                    tenant: Some(tenant.clone()),
                    user,
                }),
                waited,
            },
        }
    }

    /// Timer tick (stall detection, kickup).
    pub fn tick(&self) {
        self.lock().tick(Instant::now());
    }

    /// The adaptive limit's timer (stalled statements, measuring intervals).
    pub fn adapt(&self) {
        self.lock().adapt(Instant::now());
    }

    /// Reserves room for a connection opened outside a request.
    pub fn reserve_open(self: &Arc<Self>) -> Option<OpenReservation> {
        self.lock().try_reserve_open().then(|| OpenReservation {
            group: Some(self.clone()),
            tenant: None,
            user: None,
        })
    }

    /// True once the group retired (the process hands over).
    pub fn retiring(&self) -> bool {
        self.lock().retiring()
    }

    /// The process handed its listeners over: idle connections (parked
    /// ones too) close now, and connections coming back close instead of
    /// waiting idle, so the old and the new process together hold about
    /// one pool's worth of backends while the old one drains.
    pub fn retire(self: &Arc<Self>) {
        let n = self.lock().retire(Instant::now());
        tracing::debug!(
            group = self.id,
            closed = n,
            "hand-over: idle backends closed"
        );
    }

    /// Takes clean idle connections matching `pred` out (they stay owned;
    /// wrap them so dropping closes them and returning puts them back). A
    /// parked connection is never among them (see `super::parking`).
    pub fn take_idle_where(
        self: &Arc<Self>,
        mut pred: impl FnMut(&BackendConn) -> bool,
    ) -> Vec<Leased> {
        self.take_where(|c| c.parked_for.is_none() && pred(c))
    }

    /// Takes parked idle connections matching `pred` out, to be cleaned
    /// (`super::parking` only).
    pub(super) fn take_parked_where(
        self: &Arc<Self>,
        mut pred: impl FnMut(&BackendConn) -> bool,
    ) -> Vec<Leased> {
        self.take_where(|c| c.parked_for.is_some() && pred(c))
    }

    fn take_where(self: &Arc<Self>, mut pred: impl FnMut(&BackendConn) -> bool) -> Vec<Leased> {
        let taken = self.lock().take_idle_where(|c| pred(c));
        taken
            .into_iter()
            .map(|b| Leased::new(self.clone(), b))
            .collect()
    }

    /// Oldest queued request's age.
    pub fn oldest_wait(&self) -> Option<Duration> {
        self.lock().oldest_wait(Instant::now())
    }
}

struct Waiting<'a> {
    group: &'a Arc<Group>,
    id: u64,
    tenant: &'a Arc<Tenant>,
    /// A lease (subject to the user's backend cap).
    lease: bool,
    rx: Option<oneshot::Receiver<Grant<Conn>>>,
}

impl Waiting<'_> {
    async fn wait(
        &mut self,
        deadline: Instant,
        start: Instant,
    ) -> Result<Grant<Conn>, QueueTimeout> {
        let Some(rx) = self.rx.as_mut() else {
            return Err(self.timeout(start));
        };
        match tokio::time::timeout_at(deadline, rx).await {
            Ok(Ok(g)) => {
                self.rx = None;
                Ok(g)
            }
            // Sender dropped (cannot happen while queued) or deadline passed.
            _ => Err(self.timeout(start)),
        }
    }

    fn timeout(&mut self, start: Instant) -> QueueTimeout {
        let mut st = self.group.lock();
        let s = st.snapshot();
        // Leave the queue; if we were granted in the meantime, give it back.
        if !st.cancel(self.id)
            && let Some(mut rx) = self.rx.take()
            && let Ok(g) = rx.try_recv()
        {
            st.undo_for(self.id, g, self.tenant);
            st.dispatch(Instant::now());
        }
        self.rx = None;
        self.tenant.queue_timed_out();
        QueueTimeout {
            user_cap: self
                .tenant
                .at_backend_cap()
                .filter(|_| self.lease)
                .map(|cap| (self.tenant.name.clone(), cap)),
            group: self.group.id,
            waited_ms: start.elapsed().as_millis(),
            in_flight: s.in_flight,
            cap: s.cap + s.extra,
            queued: s.high + s.low,
            owned: s.owned,
            max_owned: s.max_owned,
        }
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        if let Some(mut rx) = self.rx.take() {
            let mut st = self.group.lock();
            if !st.cancel(self.id)
                && let Ok(g) = rx.try_recv()
            {
                st.undo_for(self.id, g, self.tenant);
                st.dispatch(Instant::now());
            }
        }
    }
}

/// An execution slot. Dropping it frees the slot.
pub struct SlotGuard {
    group: Option<Arc<Group>>,
    /// The admission's id (the adaptive limit times the statement by it).
    id: u64,
}

impl SlotGuard {
    /// Frees the slot without a latency sample (see
    /// `GroupState::complete_unmeasured`).
    pub fn release_unmeasured(mut self) {
        if let Some(g) = self.group.take() {
            g.lock().complete_unmeasured(self.id, Instant::now());
        }
    }

    /// Frees the slot and, in the same step, returns `backend` idle.
    pub fn finish(mut self, backend: Option<Leased>) {
        if let Some(g) = self.group.take() {
            let now = Instant::now();
            // Closed (dropped) unless the authority's verdict says share.
            let backend = backend.filter(Leased::shareable);
            let conn = backend.and_then(|mut l| l.take_conn()).map(|mut c| {
                c.last_used = now;
                c.io.shrink_large_buffers();
                c
            });
            g.lock().complete(self.id, conn, now);
        }
    }
}

impl Drop for SlotGuard {
    fn drop(&mut self) {
        if let Some(g) = self.group.take() {
            g.lock().complete(self.id, None, Instant::now());
        }
    }
}

/// Room reserved for a backend connection being opened. Dropping it (the
/// dial failed) releases the room.
pub struct OpenReservation {
    group: Option<Arc<Group>>,
    /// The user whose lease count this reservation holds.
    tenant: Option<Arc<Tenant>>,
    /// The user whose share of the group's backends the room counts in
    /// (`super::shares`); the connection opened on it carries it.
    user: Option<u32>,
}

impl OpenReservation {
    /// The dial succeeded: the connection now carries the reservation.
    pub fn fulfil(mut self, conn: BackendConn) -> Leased {
        let g = self.group.take().expect("reservation used once");
        let mut conn = conn;
        conn.share_user = self.user;
        Leased {
            group: g,
            conn: Some(Box::new(conn)),
            tenant: self.tenant.take(),
        }
    }
}

impl Drop for OpenReservation {
    fn drop(&mut self) {
        if let Some(t) = self.tenant.take() {
            t.release_lease();
        }
        if let Some(g) = self.group.take() {
            g.lock().closed(self.user, Instant::now());
        }
    }
}

/// A backend connection checked out of its group. Dropping it closes the
/// connection and frees its place; [`Leased::return_idle`] puts it back.
pub struct Leased {
    group: Arc<Group>,
    /// Boxed: a lease is moved several times per statement (checkout,
    /// exchange, release) and the connection is several hundred bytes.
    conn: Option<Box<BackendConn>>,
    /// The user whose lease count this connection holds (none for the
    /// pool's own uses: pre-warming, health checks, helpers).
    tenant: Option<Arc<Tenant>>,
}

impl Leased {
    fn new(group: Arc<Group>, conn: Conn) -> Self {
        Self {
            group,
            conn: Some(conn),
            tenant: None,
        }
    }

    /// Takes the connection out (it goes back to the group next) and gives
    /// the user's lease back first, so the user's own waiters can run.
    fn take_conn(&mut self) -> Option<Conn> {
        if let Some(t) = self.tenant.take() {
            t.release_lease();
        }
        self.conn.take()
    }

    /// Closes this (dead) connection and hands its room in the group to a
    /// reservation for a new one, for the same user, who keeps its lease.
    /// The room is never free in between: closing first and reserving
    /// after let a queued lease take the room on the way (the group
    /// dispatches whenever a connection closes), and the session that only
    /// wanted a fresh connection went to the back of the queue or failed.
    /// `None` only when the group had to give the room up (its share
    /// shrank, or the room was borrowed and is owed elsewhere) and has no
    /// other (the user's lease is given back).
    pub fn replace(mut self) -> Option<OpenReservation> {
        let tenant = self.tenant.take();
        // Taken out, the connection closes here and `Drop` frees nothing.
        let old = self.conn.take().and_then(|c| c.share_user);
        // A user's lease keeps its user's count; the pool's own use (a
        // helper closing another pool's idle connection) counts for none.
        let user = tenant.as_ref().and(old);
        if self.group.lock().replace_room(old, user) {
            return Some(OpenReservation {
                group: Some(self.group.clone()),
                tenant,
                user,
            });
        }
        if let Some(t) = tenant {
            t.release_lease();
        }
        None
    }

    /// True when the session-state authority lets anyone take this
    /// connection as it is, or it is parked for its session (which alone
    /// may take it as it is, see `super::parking`). The idle stack admits
    /// nothing else: every way back to it ([`Self::return_idle`],
    /// [`SlotGuard::finish`]) checks, and a connection that fails the check
    /// is closed — so a path that forgot the cleanup leaks nothing, it
    /// costs a dial.
    pub fn shareable(&self) -> bool {
        use crate::session_state::authority::{Release, release};
        let ok = self.conn.as_ref().is_some_and(|c| {
            release(c.marks, c.status) == Release::Share
                || (c.parked_for.is_some() && super::parking::parkable(c))
        });
        if !ok {
            tracing::debug!("closing a backend connection returned without its cleanup");
        }
        ok
    }

    /// Tags the connection as parked for session `owner` when the
    /// authority's verdict is a cleanup it may be parked with (see
    /// `super::parking`); returns whether it did. Parked, it may go back
    /// idle as it is.
    pub fn park(&mut self, owner: u64) -> bool {
        let Some(c) = self.conn.as_deref_mut() else {
            return false;
        };
        let ok = super::parking::parkable(c);
        if ok {
            c.parked_for = Some(owner);
        }
        ok
    }

    /// Puts the connection back on the idle stack (outside a statement),
    /// if it may be shared as it is; otherwise closes it.
    pub fn return_idle(mut self) {
        if !self.shareable() {
            return;
        }
        if let Some(mut c) = self.take_conn() {
            let now = Instant::now();
            c.last_used = now;
            c.io.shrink_large_buffers();
            self.group.lock().return_idle(c, now);
        }
    }

    /// Puts a connection borrowed for a health check back where it was:
    /// at the cold end of the idle stack with its last use as it was, so
    /// that the check changes neither which connection the next session
    /// gets nor when an idle one times out.
    pub fn return_checked(mut self, last_used: Instant) {
        if !self.shareable() {
            return;
        }
        if let Some(mut c) = self.take_conn() {
            c.last_used = last_used;
            self.group.lock().return_checked(c, Instant::now());
        }
    }

    /// The group this connection belongs to.
    pub fn group(&self) -> &Arc<Group> {
        &self.group
    }
}

impl std::ops::Deref for Leased {
    type Target = BackendConn;
    fn deref(&self) -> &BackendConn {
        self.conn
            .as_deref()
            .expect("leased connection present until consumed")
    }
}

impl std::ops::DerefMut for Leased {
    fn deref_mut(&mut self) -> &mut BackendConn {
        self.conn
            .as_deref_mut()
            .expect("leased connection present until consumed")
    }
}

impl Drop for Leased {
    fn drop(&mut self) {
        if let Some(c) = self.take_conn() {
            let user = c.share_user;
            drop(c);
            self.group.lock().closed(user, Instant::now());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::tenants::TenantLimits;

    fn user() -> Arc<Tenant> {
        Tenant::new(1, "u", TenantLimits::default())
    }

    fn group(cap: usize) -> Arc<Group> {
        Group::new(
            0,
            Limits {
                cap,
                adaptive: false,
                stall_cap: Duration::from_millis(500),
                max_owned: 4,
                kickup: Duration::from_secs(1),
            },
        )
    }

    #[tokio::test(start_paused = true)]
    async fn queue_timeout_reports_and_leaves_the_queue() {
        let g = group(1);
        let deadline = Instant::now() + Duration::from_millis(500);
        let running = g
            .acquire(Need::Slot, Priority::Low, &user(), deadline)
            .await
            .expect("first");
        let err = match g
            .acquire(Need::Slot, Priority::Low, &user(), deadline)
            .await
        {
            Err(e) => e,
            Ok(_) => panic!("must time out while the slot is taken"),
        };
        assert_eq!(err.waited_ms, 500, "paused time: exactly the deadline");
        assert_eq!((err.in_flight, err.cap, err.queued), (1, 1, 1));
        assert!(err.to_string().contains("raise pool.oversubscribe"));
        let s = g.snapshot();
        assert_eq!(
            (s.low, s.in_flight),
            (0, 1),
            "the timed-out waiter left the queue"
        );
        running.slot.finish(None);
        assert_eq!(g.snapshot().in_flight, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn dropped_waiter_is_cancel_safe() {
        let g = group(1);
        let far = Instant::now() + Duration::from_secs(60);
        let running = g
            .acquire(Need::Slot, Priority::Low, &user(), far)
            .await
            .expect("first");
        let g2 = g.clone();
        let waiter = tokio::spawn(async move {
            g2.acquire(Need::Slot, Priority::High, &user(), far)
                .await
                .is_ok()
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(g.snapshot().high, 1);
        waiter.abort();
        let _ = waiter.await;
        assert_eq!(g.snapshot().high, 0, "an aborted waiter leaves the queue");
        // A grant racing with the drop is given back, not leaked.
        let g3 = g.clone();
        let racer = tokio::spawn(async move {
            g3.acquire(Need::Slot, Priority::Low, &user(), far)
                .await
                .map(|a| a.waited)
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        running.slot.finish(None);
        let waited = racer
            .await
            .expect("join")
            .expect("granted after the slot freed");
        assert_eq!(waited, Duration::from_millis(10));
        assert_eq!(
            g.snapshot().in_flight,
            0,
            "the racer's slot guard was dropped"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn open_reservation_and_lease_release_their_place() {
        let g = group(4);
        let far = Instant::now() + Duration::from_secs(1);
        let a = g
            .acquire(
                Need::Lease {
                    pool: 0,
                    parked: None,
                },
                Priority::Low,
                &user(),
                far,
            )
            .await
            .expect("lease");
        assert!(
            a.open.is_some(),
            "no idle connection: permission to open one"
        );
        assert_eq!(g.snapshot().owned, 1);
        drop(a.open);
        assert_eq!(g.snapshot().owned, 0, "a failed dial frees the place");
        drop(a.slot);
        assert_eq!(g.snapshot().in_flight, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_replaced_connection_keeps_its_room_from_queued_leases() {
        let g = Group::new(
            0,
            Limits {
                cap: 2,
                adaptive: false,
                stall_cap: Duration::from_millis(500),
                max_owned: 1,
                kickup: Duration::from_secs(1),
            },
        );
        let far = Instant::now() + Duration::from_secs(60);
        let lease = Need::Lease {
            pool: 0,
            parked: None,
        };
        let first = g
            .acquire(lease, Priority::Low, &user(), far)
            .await
            .expect("first lease");
        let (sock, _peer) = tokio::net::UnixStream::pair().expect("socket pair");
        let conn = crate::backend::conn::unlogged(crate::wire::stream::Stream::Unix(sock), 0);
        let leased = first.open.expect("room to open one").fulfil(conn);
        // A second lease waits: the group's only backend is out.
        let g2 = g.clone();
        let waiter = tokio::spawn(async move {
            g2.acquire(lease, Priority::Low, &user(), far)
                .await
                .map(|a| a.open.is_some())
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(g.snapshot().low, 1);
        let closed = g.snapshot().counters.closed;
        // The connection is found dead: its room goes to its replacement,
        // never to the queue on the way.
        let replacement = leased.replace().expect("the room is kept");
        let s = g.snapshot();
        assert_eq!(
            (s.owned, s.low, s.counters.closed),
            (1, 1, closed + 1),
            "still owned, the waiter still queued, the dead one counted closed"
        );
        // The replacement's dial fails: now the room is the waiter's.
        drop(replacement);
        assert!(
            waiter.await.expect("join").expect("granted"),
            "the waiter may open a connection"
        );
        drop(first.slot);
        assert_eq!(g.snapshot().in_flight, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_lease_held_back_by_its_users_cap_times_out_naming_it() {
        let g = group(4);
        let capped = Tenant::new(
            1,
            "batch",
            TenantLimits {
                max_backends: 1,
                ..TenantLimits::default()
            },
        );
        let deadline = Instant::now() + Duration::from_millis(300);
        let lease = Need::Lease {
            pool: 0,
            parked: None,
        };
        let first = g
            .acquire(lease, Priority::Low, &capped, deadline)
            .await
            .expect("first lease");
        let err = match g.acquire(lease, Priority::Low, &capped, deadline).await {
            Err(e) => e,
            Ok(_) => panic!("the user's cap holds the second lease back"),
        };
        assert_eq!(err.user_cap, Some(("batch".to_string(), 1)));
        assert!(
            err.to_string()
                .contains("user 'batch' waited 300 ms in thread group 0 queue: the user holds its max_backend_connections (1 of 1)"),
            "{err}"
        );
        // Another user's lease runs meanwhile; dropping the first lease's
        // reservation gives the user's count back.
        let other = g
            .acquire(
                lease,
                Priority::Low,
                &user(),
                deadline + Duration::from_secs(1),
            )
            .await
            .expect("another user runs");
        drop(first);
        assert_eq!(capped.leased(), 0);
        drop(other);
        assert_eq!(g.snapshot().in_flight, 0);
    }
}
