//! Users as the scheduler and the per-user limits see them (design §6.2):
//! one [`Tenant`] per `[[users]]` entry, plus one shared tenant that every
//! user looked up in the server (`[server_users]`) folds into — so the count
//! of tenants, of scheduler lanes and of labelled metric series is bounded
//! by the configuration, whatever names log in.
//!
//! A tenant carries its share weight, its limits (client connections,
//! leased backend connections across all groups, queue timeout) and the
//! live counts those limits are checked against, plus the figures `/status`,
//! `SHOW MYPLEX USERS` and `/metrics` report. Lock-free counts (atomics);
//! the registry is replaced in place by a reload (indexes never change, as
//! with [`crate::frontend::Users`]).

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use crate::config::Config;
use crate::metrics::window::{Summary, Window};

/// Stripes of the per-user latency windows (thread groups map onto them
/// modulo this).
const STRIPES: usize = 4;

/// Name (and metrics label) of the tenant every server user folds into.
pub const SERVER_USERS: &str = "(server users)";

/// One user as the pool sees it.
pub struct Tenant {
    /// Index of this tenant's lane in every group's queues (stable).
    pub index: u32,
    /// User name (or [`SERVER_USERS`]).
    pub name: String,
    weight: AtomicU32,
    max_clients: AtomicUsize,
    max_backends: AtomicUsize,
    queue_timeout_ms: AtomicU64,
    clients: AtomicUsize,
    leased: AtomicUsize,
    /// Requests granted, all groups (the share actually used).
    dispatched: AtomicU64,
    /// Statements completed.
    statements: AtomicU64,
    /// Queue timeouts.
    queue_timeouts: AtomicU64,
    /// Explicit transactions ended.
    transactions: AtomicU64,
    /// `transactions` at the last roll, and the count in the last period.
    tx_rolled: AtomicU64,
    tx_last_period: AtomicU64,
    /// Statement latency, last minute, one window per stripe of thread
    /// groups (a group records into its own: no lock shared across group
    /// threads per statement); read merged.
    latency: [Window; STRIPES],
    /// Queue wait, last minute, striped as `latency`.
    queue_wait: [Window; STRIPES],
    /// `dispatched` at the last [`Tenants::roll`], and the count in the
    /// last rolled period (for the share used).
    rolled: AtomicU64,
    last_period: AtomicU64,
}

/// Limits of one tenant (0 = none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TenantLimits {
    /// Share weight (at least 1).
    pub weight: u32,
    /// Client connections.
    pub max_clients: usize,
    /// Leased backend connections across all groups.
    pub max_backends: usize,
    /// Queue timeout in ms (0 = `pool.queue_timeout_ms`).
    pub queue_timeout_ms: u64,
}

impl Default for TenantLimits {
    fn default() -> Self {
        Self {
            weight: 1,
            max_clients: 0,
            max_backends: 0,
            queue_timeout_ms: 0,
        }
    }
}

impl Tenant {
    /// A tenant with `limits`.
    pub fn new(index: u32, name: &str, limits: TenantLimits) -> Arc<Self> {
        let t = Arc::new(Self {
            index,
            name: name.to_string(),
            weight: AtomicU32::new(1),
            max_clients: AtomicUsize::new(0),
            max_backends: AtomicUsize::new(0),
            queue_timeout_ms: AtomicU64::new(0),
            clients: AtomicUsize::new(0),
            leased: AtomicUsize::new(0),
            dispatched: AtomicU64::new(0),
            statements: AtomicU64::new(0),
            queue_timeouts: AtomicU64::new(0),
            transactions: AtomicU64::new(0),
            tx_rolled: AtomicU64::new(0),
            tx_last_period: AtomicU64::new(0),
            latency: std::array::from_fn(|_| Window::new()),
            queue_wait: std::array::from_fn(|_| Window::new()),
            rolled: AtomicU64::new(0),
            last_period: AtomicU64::new(0),
        });
        t.set_limits(limits);
        t
    }

    /// Replaces the limits (a reload). Counts stay.
    pub fn set_limits(&self, l: TenantLimits) {
        self.weight.store(l.weight.max(1), Ordering::Relaxed);
        self.max_clients.store(l.max_clients, Ordering::Relaxed);
        self.max_backends.store(l.max_backends, Ordering::Relaxed);
        self.queue_timeout_ms
            .store(l.queue_timeout_ms, Ordering::Relaxed);
    }

    /// The share weight (at least 1).
    pub fn weight(&self) -> u32 {
        self.weight.load(Ordering::Relaxed).max(1)
    }

    /// The limits now.
    pub fn limits(&self) -> TenantLimits {
        TenantLimits {
            weight: self.weight(),
            max_clients: self.max_clients.load(Ordering::Relaxed),
            max_backends: self.max_backends.load(Ordering::Relaxed),
            queue_timeout_ms: self.queue_timeout_ms.load(Ordering::Relaxed),
        }
    }

    /// This user's queue timeout, or `default`.
    pub fn queue_timeout(&self, default: Duration) -> Duration {
        match self.queue_timeout_ms.load(Ordering::Relaxed) {
            0 => default,
            ms => Duration::from_millis(ms),
        }
    }

    /// Counts a client in, unless the user is at `max_client_connections`
    /// (then `Err(limit)`). The guard counts it out.
    pub fn enter(self: &Arc<Self>) -> Result<ClientSlot, usize> {
        let max = self.max_clients.load(Ordering::Relaxed);
        let mut n = self.clients.load(Ordering::Relaxed);
        loop {
            if max > 0 && n >= max {
                return Err(max);
            }
            match self
                .clients
                .compare_exchange_weak(n, n + 1, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return Ok(ClientSlot(self.clone())),
                Err(now) => n = now,
            }
        }
    }

    /// Counts a client in whatever the limit (a session that changed to
    /// this user with COM_CHANGE_USER).
    pub fn enter_always(self: &Arc<Self>) -> ClientSlot {
        self.clients.fetch_add(1, Ordering::AcqRel);
        ClientSlot(self.clone())
    }

    /// Client connections now.
    pub fn clients(&self) -> usize {
        self.clients.load(Ordering::Relaxed)
    }

    /// Backend connections this user's sessions hold now.
    pub fn leased(&self) -> usize {
        self.leased.load(Ordering::Relaxed)
    }

    /// True when one more backend may be leased (a peek).
    pub fn may_lease(&self) -> bool {
        let max = self.max_backends.load(Ordering::Relaxed);
        max == 0 || self.leased.load(Ordering::Relaxed) < max
    }

    /// The user's backend cap when it holds that many now (for the queue
    /// timeout's message).
    pub fn at_backend_cap(&self) -> Option<usize> {
        let max = self.max_backends.load(Ordering::Relaxed);
        (max > 0 && self.leased.load(Ordering::Relaxed) >= max).then_some(max)
    }

    /// Counts one more leased backend unless at the cap.
    pub(crate) fn try_lease(&self) -> bool {
        let max = self.max_backends.load(Ordering::Relaxed);
        let mut n = self.leased.load(Ordering::Relaxed);
        loop {
            if max > 0 && n >= max {
                return false;
            }
            match self
                .leased
                .compare_exchange_weak(n, n + 1, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(now) => n = now,
            }
        }
    }

    /// A leased backend went back (idle or closed).
    pub(crate) fn release_lease(&self) {
        let _ = self
            .leased
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |n| n.checked_sub(1));
    }

    /// A request of this user was granted.
    pub(crate) fn dispatched(&self) {
        self.dispatched.fetch_add(1, Ordering::Relaxed);
    }

    /// A statement of this user completed in thread group `group`.
    pub fn statement(&self, group: usize, wait: Duration, total: Duration) {
        self.statements.fetch_add(1, Ordering::Relaxed);
        let now = tokio::time::Instant::now();
        let stripe = group % STRIPES;
        self.latency[stripe].record_at(now, total.as_micros() as u64);
        self.queue_wait[stripe].record_at(now, wait.as_micros() as u64);
    }

    /// Statement latency over the last `seconds`.
    pub fn latency(&self, seconds: u64) -> Summary {
        Window::summary_of(&self.latency.each_ref(), seconds)
    }

    /// Queue wait over the last `seconds`.
    pub fn queue_wait(&self, seconds: u64) -> Summary {
        Window::summary_of(&self.queue_wait.each_ref(), seconds)
    }

    /// An explicit transaction of this user ended.
    pub fn transaction(&self) {
        self.transactions.fetch_add(1, Ordering::Relaxed);
    }

    /// Statements of this user completed since start.
    pub fn statements(&self) -> u64 {
        self.statements.load(Ordering::Relaxed)
    }

    /// A request of this user timed out in a queue.
    pub fn queue_timed_out(&self) {
        self.queue_timeouts.fetch_add(1, Ordering::Relaxed);
    }
}

/// A client counted against its user's `max_client_connections`; dropping
/// it counts the client out.
pub struct ClientSlot(Arc<Tenant>);

impl ClientSlot {
    /// The tenant.
    pub fn tenant(&self) -> &Arc<Tenant> {
        &self.0
    }
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        let _ = self
            .0
            .clients
            .fetch_update(Ordering::AcqRel, Ordering::Relaxed, |n| n.checked_sub(1));
    }
}

/// One tenant's figures at a point in time.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Figures {
    /// User name.
    pub user: String,
    /// Share weight.
    pub weight: u32,
    /// The weight's part of the weights of the users active in the last
    /// period (what the user is entitled to under contention), 0..1.
    pub share_weight: f64,
    /// The part of all grants this user got in the last period, 0..1.
    pub share_used: f64,
    /// Client connections now.
    pub clients: usize,
    /// `max_client_connections` (0 = none).
    pub max_clients: usize,
    /// Backend connections held now.
    pub backends: usize,
    /// `max_backend_connections` (0 = none).
    pub max_backends: usize,
    /// Statements completed since start.
    pub statements: u64,
    /// Queue timeouts since start.
    pub queue_timeouts: u64,
    /// Explicit transactions ended since start.
    pub transactions: u64,
    /// Explicit transactions ended in the last second.
    pub tps: u64,
    /// Statement latency, last 10 s (rate = statements per second).
    pub latency: Summary,
    /// Queue wait, last 10 s.
    pub queue_wait: Summary,
}

/// All tenants.
pub struct Tenants {
    all: RwLock<Vec<Arc<Tenant>>>,
}

/// `[[users]]` limits from the configuration.
fn limits_of(cfg: &Config) -> Vec<(String, TenantLimits)> {
    cfg.users
        .iter()
        .map(|u| {
            (
                u.name.clone(),
                TenantLimits {
                    weight: u.weight,
                    max_clients: u.max_client_connections,
                    max_backends: u.max_backend_connections,
                    queue_timeout_ms: u.queue_timeout_ms,
                },
            )
        })
        .collect()
}

fn server_limits(cfg: &Config) -> TenantLimits {
    TenantLimits {
        weight: cfg.pool.default_user_weight,
        ..TenantLimits::default()
    }
}

impl Tenants {
    /// The tenants of `cfg`: index 0 is the server users' tenant.
    pub fn new(cfg: &Config) -> Self {
        let mut all = vec![Tenant::new(0, SERVER_USERS, server_limits(cfg))];
        for (i, (name, l)) in limits_of(cfg).into_iter().enumerate() {
            all.push(Tenant::new(i as u32 + 1, &name, l));
        }
        Self {
            all: RwLock::new(all),
        }
    }

    /// Applies a reloaded configuration: same name → limits updated, new
    /// name → appended, removed name → default limits (its sessions keep
    /// going, as the user does).
    pub fn reconfigure(&self, cfg: &Config) {
        let next = limits_of(cfg);
        let mut all = self.all.write().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = all.first() {
            s.set_limits(server_limits(cfg));
        }
        for t in all.iter().skip(1) {
            let l = next
                .iter()
                .find(|(n, _)| *n == t.name)
                .map_or(TenantLimits::default(), |(_, l)| *l);
            t.set_limits(l);
        }
        for (name, l) in next {
            if !all.iter().skip(1).any(|t| t.name == name) {
                let index = all.len() as u32;
                all.push(Tenant::new(index, &name, l));
            }
        }
    }

    /// The tenant of a configured user `name`, else the server users' one.
    pub fn for_user(&self, name: &str, configured: bool) -> Arc<Tenant> {
        let all = self.all.read().unwrap_or_else(|p| p.into_inner());
        if configured && let Some(t) = all.iter().skip(1).find(|t| t.name == name) {
            return t.clone();
        }
        all[0].clone()
    }

    /// Every tenant, by index.
    pub fn all(&self) -> Vec<Arc<Tenant>> {
        self.all.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Closes a period of the share figures (called once a second).
    pub fn roll(&self) {
        for t in self.all() {
            let now = t.dispatched.load(Ordering::Relaxed);
            let before = t.rolled.swap(now, Ordering::Relaxed);
            t.last_period
                .store(now.saturating_sub(before), Ordering::Relaxed);
            let now = t.transactions.load(Ordering::Relaxed);
            let before = t.tx_rolled.swap(now, Ordering::Relaxed);
            t.tx_last_period
                .store(now.saturating_sub(before), Ordering::Relaxed);
        }
    }

    /// Every tenant's figures (statement windows over the last 10 s).
    pub fn figures(&self) -> Vec<Figures> {
        let all = self.all();
        let total: u64 = all
            .iter()
            .map(|t| t.last_period.load(Ordering::Relaxed))
            .sum();
        let active_weights: u64 = all
            .iter()
            .filter(|t| t.last_period.load(Ordering::Relaxed) > 0)
            .map(|t| u64::from(t.weight()))
            .sum();
        all.iter()
            .map(|t| {
                let used = t.last_period.load(Ordering::Relaxed);
                let l = t.limits();
                Figures {
                    user: t.name.clone(),
                    weight: l.weight,
                    share_weight: if used > 0 && active_weights > 0 {
                        f64::from(l.weight) / active_weights as f64
                    } else {
                        0.0
                    },
                    share_used: if total > 0 {
                        used as f64 / total as f64
                    } else {
                        0.0
                    },
                    clients: t.clients(),
                    max_clients: l.max_clients,
                    backends: t.leased(),
                    max_backends: l.max_backends,
                    statements: t.statements.load(Ordering::Relaxed),
                    queue_timeouts: t.queue_timeouts.load(Ordering::Relaxed),
                    transactions: t.transactions.load(Ordering::Relaxed),
                    tps: t.tx_last_period.load(Ordering::Relaxed),
                    latency: t.latency(10),
                    queue_wait: t.queue_wait(10),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_and_backend_caps_count_and_release() {
        let t = Tenant::new(
            1,
            "web",
            TenantLimits {
                max_clients: 2,
                max_backends: 1,
                ..TenantLimits::default()
            },
        );
        let a = t.enter().expect("first");
        let _b = t.enter().expect("second");
        assert_eq!(t.enter().err(), Some(2));
        drop(a);
        assert!(t.enter().is_ok());
        assert!(t.try_lease());
        assert!(!t.may_lease());
        assert_eq!(t.at_backend_cap(), Some(1));
        assert!(!t.try_lease());
        t.release_lease();
        assert!(t.try_lease());
    }

    #[test]
    fn server_users_fold_into_one_tenant_and_reload_keeps_indexes() {
        let mut cfg = Config::default();
        cfg.users.push(crate::config::UserConfig {
            name: "web".into(),
            weight: 4,
            ..Default::default()
        });
        let ts = Tenants::new(&cfg);
        assert_eq!(ts.for_user("web", true).index, 1);
        assert_eq!(ts.for_user("web", true).weight(), 4);
        assert_eq!(ts.for_user("alice", false).name, SERVER_USERS);
        assert_eq!(ts.for_user("bob", false).index, 0);
        cfg.users[0].weight = 2;
        cfg.users.push(crate::config::UserConfig {
            name: "batch".into(),
            ..Default::default()
        });
        ts.reconfigure(&cfg);
        assert_eq!(ts.for_user("web", true).weight(), 2);
        assert_eq!(ts.for_user("batch", true).index, 2);
        assert_eq!(ts.all().len(), 3);
    }
}
