//! The client side: login (`handshake`, `auth`, `users`), the per-client
//! command loop (`session`) and response streaming with capability
//! translation (`relay`).

pub mod auth;
pub mod handshake;
pub mod relay;
pub mod session;
pub mod users;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicUsize};
use std::sync::{Arc, Mutex};

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
}

/// What every session shares.
pub struct Shared {
    /// Effective configuration.
    pub config: Config,
    /// The backend pool.
    pub pool: Arc<Pool>,
    /// Users of the config file.
    pub users: Vec<User>,
    /// Users looked up in the server (`[server_users]`), when enabled.
    pub server_users: Option<Arc<crate::server_users::ServerUsers>>,
    /// TLS acceptor config when TLS is offered.
    pub tls: Option<Arc<rustls::ServerConfig>>,
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
    /// Rate limit of the slow-statement log.
    pub slow_log: crate::telemetry::RateLimit,
    /// Metrics of this proxy.
    pub metrics: crate::metrics::Metrics,
    /// Live sessions by proxy connection id (KILL, admin console).
    pub sessions: Mutex<HashMap<u32, session::SessionHandle>>,
    /// Prepared-statement registry.
    pub registry: Mutex<crate::prepared::Registry>,
    /// The server's `max_allowed_packet` and `max_prepared_stmt_count`.
    pub limits: crate::backend::conn::ServerLimits,
    /// Shutdown signal.
    pub shutdown: Shutdown,
}
