//! The backend pool: thread groups with priority queues (the Percona /
//! MariaDB thread-pool model), the credential pools backend connections
//! belong to, dialing with retry, and the per-group timer and maintenance.

pub mod group;
pub mod scheduler;

use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::time::Instant;

use crate::backend::{self, BackendConn, BackendError, BackendParams, ServerInfo};
use crate::config::{Config, PoolMode};
use group::Group;
use scheduler::Limits;

/// All thread groups and what is needed to open backend connections.
pub struct Pool {
    /// The thread groups.
    pub groups: Vec<Arc<Group>>,
    /// Login parameters per credential pool; users looked up in the server
    /// add theirs at run time (`register`).
    params: RwLock<Vec<Arc<BackendParams>>>,
    /// The backend's greeting facts (refreshed on every successful dial).
    pub server: RwLock<Arc<ServerInfo>>,
    /// Pool mode.
    pub mode: PoolMode,
    /// `queue_timeout_ms`.
    pub queue_timeout: Duration,
    /// `idle_timeout_s`.
    pub idle_timeout: Duration,
    /// `backend.ping_interval_s`.
    pub ping_interval: Duration,
    /// `min_idle_per_group`.
    pub min_idle: usize,
    /// `stall_limit_ms`.
    pub stall_limit: Duration,
}

impl Pool {
    /// Builds the groups from the config; `params` are the credential pools.
    pub fn new(cfg: &Config, params: Vec<BackendParams>, server: ServerInfo) -> Arc<Self> {
        let n = cfg.pool.effective_groups();
        let total = cfg.pool.effective_max_backend_connections();
        let groups = (0..n)
            .map(|i| {
                // Split evenly; the first `total % n` groups get one more.
                let share = total / n + usize::from(i < total % n);
                Group::new(
                    i,
                    Limits {
                        cap: 1 + cfg.pool.oversubscribe,
                        max_owned: share.max(1),
                        kickup: Duration::from_millis(cfg.pool.prio_kickup_ms),
                    },
                )
            })
            .collect();
        Arc::new(Self {
            groups,
            params: RwLock::new(params.into_iter().map(Arc::new).collect()),
            server: RwLock::new(Arc::new(server)),
            mode: cfg.pool.mode,
            queue_timeout: Duration::from_millis(cfg.pool.queue_timeout_ms),
            idle_timeout: Duration::from_secs(cfg.pool.idle_timeout_s),
            ping_interval: Duration::from_secs(cfg.backend.ping_interval_s),
            min_idle: cfg.pool.min_idle_per_group,
            stall_limit: Duration::from_millis(cfg.pool.stall_limit_ms),
        })
    }

    /// The group a client id belongs to.
    pub fn group_for(&self, client_id: u32) -> &Arc<Group> {
        &self.groups[client_id as usize % self.groups.len()]
    }

    /// The greeting facts to mirror.
    pub fn server_info(&self) -> Arc<ServerInfo> {
        self.server
            .read()
            .map(|s| s.clone())
            .unwrap_or_else(|p| p.into_inner().clone())
    }

    /// Login parameters of credential pool `pool`.
    pub fn params(&self, pool: usize) -> Option<Arc<BackendParams>> {
        let v = self.params.read().unwrap_or_else(|p| p.into_inner());
        v.get(pool).cloned()
    }

    /// The backend users of all credential pools.
    pub fn backend_users(&self) -> Vec<String> {
        let v = self.params.read().unwrap_or_else(|p| p.into_inner());
        v.iter().map(|p| p.user.clone()).collect()
    }

    /// The credential pool logging in as `user` with SHA1(password)
    /// `stage1` (or no password), added on first use; address, TLS and
    /// timeouts are pool 0's.
    pub fn register(&self, user: &str, stage1: Option<[u8; 20]>) -> usize {
        let mut v = self.params.write().unwrap_or_else(|p| p.into_inner());
        let same = |p: &Arc<BackendParams>| {
            p.user == user
                && p.native_stage1 == stage1
                && (stage1.is_some() || p.password.is_empty())
        };
        if let Some(i) = v.iter().position(same) {
            return i;
        }
        let Some(base) = v.first().cloned() else {
            return 0;
        };
        let pool = v.len();
        v.push(Arc::new(BackendParams {
            user: user.to_string(),
            password: String::new(),
            native_stage1: stage1,
            pool,
            ..(*base).clone()
        }));
        pool
    }

    /// Dials a backend of credential pool `pool`, retrying with backoff
    /// until `deadline`.
    pub async fn dial(&self, pool: usize, deadline: Instant) -> Result<BackendConn, BackendError> {
        let Some(p) = self.params(pool) else {
            return Err(BackendError::Protocol(format!("no credential pool {pool}")));
        };
        let mut delay = Duration::from_millis(20);
        loop {
            match backend::connect(&p).await {
                Ok((conn, info)) => {
                    let changed = self.server.read().map(|s| **s != info).unwrap_or(false);
                    if changed && let Ok(mut s) = self.server.write() {
                        *s = Arc::new(info);
                    }
                    return Ok(conn);
                }
                // Wrong credentials or a refusal won't improve with retries.
                Err(e @ BackendError::Server(_)) => return Err(e),
                Err(e) if e.is_out_of_fds() => return Err(e),
                Err(e) => {
                    if Instant::now() + delay >= deadline {
                        return Err(e);
                    }
                    tracing::warn!(error = %e, retry_in_ms = delay.as_millis() as u64, "backend dial failed");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(1));
                }
            }
        }
    }

    /// Runs the per-group timers and idle maintenance until the process ends.
    pub fn spawn_maintenance(self: &Arc<Self>) {
        for g in &self.groups {
            let g = g.clone();
            let period = self.stall_limit;
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(period);
                tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    tick.tick().await;
                    g.tick();
                }
            });
        }
        let pool = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tick.tick().await;
                pool.maintain().await;
            }
        });
    }

    /// Closes idle connections past `idle_timeout` (above the minimum) and
    /// ones the server closed; keeps `min_idle` connections per group open.
    async fn maintain(&self) {
        for g in &self.groups {
            let now = Instant::now();
            let snap = g.snapshot();
            let mut keep = snap.idle.saturating_sub(0);
            let min = self.min_idle;
            // Dropping a Leased closes it and frees its place.
            let expired = g.take_idle_where(|c| {
                let dead = !c.io.idle_is_healthy();
                let old = now.duration_since(c.last_used) >= self.idle_timeout && keep > min;
                if dead || old {
                    keep -= 1;
                    true
                } else {
                    false
                }
            });
            if !expired.is_empty() {
                tracing::debug!(
                    group = g.id,
                    closed = expired.len(),
                    "closed idle backend connections"
                );
            }
            drop(expired);
            let idle = g.snapshot().idle;
            for _ in idle..min {
                let Some(res) = g.reserve_open() else { break };
                let deadline = Instant::now() + Duration::from_secs(5);
                match self.dial(0, deadline).await {
                    Ok(c) => res.fulfil(c).return_idle(),
                    Err(e) => {
                        tracing::warn!(error = %e, "could not pre-open backend connection");
                        break;
                    }
                }
            }
        }
    }
}
