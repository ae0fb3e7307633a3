//! The client side: login (`handshake`, `auth`, `users`), the per-client
//! command loop (`session`) and response streaming with capability
//! translation (`relay`).

pub mod admission;
pub mod auth;
pub mod handshake;
pub mod hop_status;
pub mod metadata_cache;
pub mod relay;
pub mod session;
pub mod throttle;
pub mod users;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicUsize};
use std::sync::{Arc, Mutex};

use arc_swap::{ArcSwap, ArcSwapOption};
use tokio::time::Instant;

use crate::config::Config;
use crate::pool::Pool;
use crate::protocol::session_track::ClientTrackers;
use crate::shutdown::Shutdown;
use auth::Credential;

/// A configured user, ready for logins.
#[derive(Debug, Clone)]
pub struct User {
    /// Login name.
    pub name: String,
    /// Password verifier.
    pub credential: Credential,
    /// Credential pool of this user's backend connections.
    pub pool: usize,
    /// May use the admin console.
    pub admin: bool,
    /// False once a reload removed the user: new logins are refused, and
    /// sessions already logged in keep going (as with `DROP USER`).
    pub enabled: bool,
}

/// The users logins are checked against. Indexes are stable for the life of
/// the process (sessions keep theirs): a reload updates users in place,
/// disables removed ones and appends new ones.
#[derive(Debug, Clone, Default)]
pub struct Users(pub Vec<User>);

impl Users {
    /// True when clients of more than one account log in to the server as
    /// credential pool `pool`'s account (`[[users]]` entries sharing a
    /// `backend_user`): a server thread id reaching the server from one of
    /// them may name a backend that serves another account's clients.
    pub fn shares_pool(&self, pool: usize) -> bool {
        self.0.iter().filter(|u| u.pool == pool).count() > 1
    }

    /// The enabled user `name` and its index.
    pub fn find(&self, name: &str) -> Option<(usize, &User)> {
        self.0
            .iter()
            .enumerate()
            .find(|(_, u)| u.enabled && u.name == name)
    }

    /// `next` merged over these users with indexes kept: same name → same
    /// index (updated), missing → disabled, new → appended.
    pub fn merged(&self, next: Vec<User>) -> Users {
        let mut out: Vec<User> = self
            .0
            .iter()
            .map(|u| User {
                enabled: false,
                ..u.clone()
            })
            .collect();
        for u in next {
            match out.iter().position(|o| o.name == u.name) {
                Some(i) => out[i] = u,
                None => out.push(u),
            }
        }
        Users(out)
    }
}

impl std::ops::Index<usize> for Users {
    type Output = User;
    fn index(&self, i: usize) -> &User {
        &self.0[i]
    }
}

/// What every session shares.
pub struct Shared {
    /// Effective configuration (replaced as a whole by a reload; load it
    /// once per use).
    pub config: ArcSwap<Config>,
    /// The configuration file reloads read (`--config`), if any.
    pub config_path: std::sync::OnceLock<std::path::PathBuf>,
    /// The backend pool.
    pub pool: Arc<Pool>,
    /// Users of the config file (replaced by a reload).
    pub users: ArcSwap<Users>,
    /// Users looked up in the server (`[server_users]`), when enabled.
    pub server_users: Option<Arc<crate::server_users::ServerUsers>>,
    /// TLS acceptor config when TLS is offered.
    pub tls: ArcSwapOption<rustls::ServerConfig>,
    /// What a client's own trackers report (the server's defaults).
    pub trackers: ClientTrackers,
    /// Connected clients.
    pub clients: AtomicUsize,
    /// Next proxy connection id.
    pub next_id: AtomicU32,
    /// Schemas recently verified to exist (name → when).
    pub known_schemas: Mutex<HashMap<Vec<u8>, Instant>>,
    /// Column definitions for locally answered statements.
    pub templates: session::local::Templates,
    /// The slow-statement log.
    pub slow_log: crate::slow_log::SlowLog,
    /// Per-group worker threads (`runtime = "per_group"`); `None`: sessions
    /// run on the runtime that accepted them.
    pub workers: Option<crate::workers::Workers>,
    /// Metrics of this proxy.
    pub metrics: crate::metrics::Metrics,
    /// Per-digest statement figures (`[digests]`).
    pub digests: crate::metrics::digests::Digests,
    /// Live sessions by proxy connection id (KILL, admin console).
    pub sessions: Mutex<HashMap<u32, session::SessionHandle>>,
    /// Prepared-statement registry.
    pub registry: Mutex<crate::prepared::Registry>,
    /// The server's `max_allowed_packet` and `max_prepared_stmt_count`.
    pub limits: crate::backend::conn::ServerLimits,
    /// Shutdown signal.
    pub shutdown: Shutdown,
    /// Connections still logging in, and the logged-in count.
    pub admission: admission::Admission,
    /// Failed-login counts and delays.
    pub throttle: throttle::Throttle,
    /// After a hand-over: where idle sessions move (`crate::takeover::moves`).
    pub mover: Arc<crate::takeover::moves::Mover>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str, admin: bool) -> User {
        User {
            name: name.into(),
            credential: Credential::from_user(&crate::config::UserConfig {
                name: name.into(),
                password: Some("pw".into()),
                ..Default::default()
            })
            .expect("credential"),
            pool: 0,
            admin,
            enabled: true,
        }
    }

    #[test]
    fn reload_keeps_indexes_disables_removed_and_appends_new() {
        let old = Users(vec![user("a", false), user("b", false)]);
        let new = old.merged(vec![user("b", true), user("c", false)]);
        assert_eq!(new.0.len(), 3);
        assert!(new.find("a").is_none(), "removed user cannot log in");
        assert!(
            !new[0].enabled && new[0].name == "a",
            "index 0 still names a"
        );
        let (i, b) = new.find("b").expect("b");
        assert_eq!((i, b.admin), (1, true), "b updated in place");
        assert_eq!(new.find("c").map(|(i, _)| i), Some(2));
        // Re-adding a removed user re-enables its old index.
        let again = new.merged(vec![user("a", false)]);
        assert_eq!(again.find("a").map(|(i, _)| i), Some(0));
    }
}
