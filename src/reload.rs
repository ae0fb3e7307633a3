//! Live configuration reload (SIGHUP, the console's `RELOAD MYPLEX`,
//! `POST /reload` on the admin endpoint). Owns which keys may change while
//! clients are connected: it reads the configuration again, refuses a change
//! to a key that needs a restart (naming the key; the running configuration
//! stays in force), builds everything that can fail (users, TLS
//! certificates, log filter) before swapping anything, then swaps users, pool
//! limits and timings, TLS certificates, the log level and the configuration
//! snapshot every reader loads per use. Connected sessions are not touched:
//! they pick up new values at their next statement or login.
//!
//! A new configuration section is reloadable by default (readers load
//! `Shared::config` per use); add its key to [`FIXED`] when it is read once
//! at start.

use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::config::{Config, ConfigError};
use crate::frontend::Shared;
use crate::server::{backend_params, load_server_tls, users_and_pools};

/// Keys read once at start: changing them needs a restart.
pub const FIXED: &[&str] = &[
    "listen",
    "listen_socket_mode",
    "listen_socket_owner",
    "listen_socket_group",
    "admin_listen",
    "listen_backlog",
    "takeover_socket",
    "worker_threads",
    "runtime",
    "session_threads",
    "worker_priority_boost",
    "log.format",
    "backend.address",
    "backend.tls",
    "backend.tls_ca",
    "backend.local_socket",
    "pool.mode",
    "pool.thread_groups",
    "pool.prepared_registry_size",
    "pool.inflight",
    "frontend.max_unauthenticated",
    "frontend.max_unauthenticated_per_address",
    "frontend.auth_throttle_free_failures",
    "frontend.auth_throttle_max_delay_ms",
    "server_users.enabled",
    "server_users.lookup_user",
    "server_users.lookup_password",
    "server_users.cache_ttl_s",
    "server_users.negative_ttl_s",
    "server_users.max_lookups_per_s",
    "server_users.allow_no_password",
    "digests.max_digests",
];

/// Why a reload did not happen (the running configuration stays in force).
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The file or environment could not be loaded or is invalid.
    #[error("reload failed: {0}")]
    Load(#[from] ConfigError),
    /// Keys that cannot change while running were changed.
    #[error("reload refused: {}", .0.join("; "))]
    Refused(Vec<String>),
    /// A value could not be put to use (a certificate file, a user).
    #[error("reload failed: {0}")]
    Setup(String),
}

/// What a reload changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reloaded {
    /// Keys whose value changed (`section.key`; `users` as a whole).
    pub changed: Vec<String>,
}

impl std::fmt::Display for Reloaded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.changed.is_empty() {
            write!(f, "configuration reloaded: no key changed")
        } else {
            write!(f, "configuration reloaded: {}", self.changed.join(", "))
        }
    }
}

/// One reload at a time.
static RELOADING: Mutex<()> = Mutex::new(());

/// Reads the configuration again (the `--config` file, then the
/// environment) and applies it.
pub fn reload(shared: &Shared) -> Result<Reloaded, ReloadError> {
    let next = crate::config::load(shared.config_path.get().map(|p| p.as_path()))?;
    apply(shared, next)
}

/// Applies `next` if no [`FIXED`] key differs from the running
/// configuration; else changes nothing.
pub fn apply(shared: &Shared, next: Config) -> Result<Reloaded, ReloadError> {
    let _one = RELOADING.lock().unwrap_or_else(|p| p.into_inner());
    let cur = shared.config.load_full();
    let diff = changed_keys(&cur, &next);
    let refused: Vec<String> = diff
        .iter()
        .filter(|(k, _, _)| FIXED.contains(&k.as_str()))
        .map(|(k, old, new)| {
            format!("{k} cannot change without a restart (running {old}, new {new})")
        })
        .collect();
    if !refused.is_empty() {
        tracing::warn!(refused = ?refused, "configuration reload refused");
        return Err(ReloadError::Refused(refused));
    }
    // Everything that can fail, before anything is swapped.
    let setup = |e: crate::server::StartError| ReloadError::Setup(e.to_string());
    let tls = load_server_tls(&next).map_err(setup)?;
    let params = shared.pool.credentials.load_full();
    let logins = params
        .iter()
        .map(|p| (p.user.clone(), p.password.clone()))
        .collect();
    let backend_tls = params.first().and_then(|p| p.tls.clone());
    let (users, logins) = users_and_pools(&next, logins).map_err(setup)?;
    let filter = crate::telemetry::parse_level(&next.log.level).map_err(ReloadError::Setup)?;
    // Swap.
    shared
        .pool
        .reconfigure(&next, backend_params(&next, logins, backend_tls));
    shared
        .users
        .store(Arc::new(shared.users.load().merged(users)));
    shared.tls.store(tls);
    if cur.log.level != next.log.level
        && let Err(e) = crate::telemetry::set_level(filter)
    {
        tracing::warn!(error = %e, "could not change the log level");
    }
    shared.config.store(Arc::new(next));
    let changed: Vec<String> = diff.into_iter().map(|(k, _, _)| k).collect();
    tracing::info!(changed = ?changed, "configuration reloaded");
    Ok(Reloaded { changed })
}

/// Keys whose values differ, with both values (rendered; `users` and
/// passwords are not shown).
fn changed_keys(cur: &Config, next: &Config) -> Vec<(String, String, String)> {
    let (Ok(a), Ok(b)) = (serde_json::to_value(cur), serde_json::to_value(next)) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    diff("", &a, &b, &mut out);
    out
}

fn diff(prefix: &str, a: &Value, b: &Value, out: &mut Vec<(String, String, String)>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                let (va, vb) = (
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                );
                diff(&key, va, vb, out);
            }
        }
        _ if a != b => {
            let secret = prefix == "users" || prefix.ends_with("password");
            let show = |v: &Value| {
                if secret {
                    "…".to_string()
                } else {
                    v.to_string()
                }
            };
            out.push((prefix.to_string(), show(a), show(b)));
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_names_changed_keys_and_hides_secrets() {
        let a = Config::default();
        let mut b = a.clone();
        b.pool.max_backend_connections = 7;
        b.listen = "0.0.0.0:1".into();
        b.backend.password = "new".into();
        let d = changed_keys(&a, &b);
        let keys: Vec<&str> = d.iter().map(|(k, _, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            ["backend.password", "listen", "pool.max_backend_connections"]
        );
        assert_eq!(d[0].2, "…", "password value not shown");
        assert_eq!(d[1].2, "\"0.0.0.0:1\"");
    }

    #[test]
    fn fixed_keys_exist_in_the_model() {
        let v = serde_json::to_value(Config::default()).expect("json");
        for k in FIXED {
            let mut cur = &v;
            for part in k.split('.') {
                cur = cur.get(part).unwrap_or_else(|| panic!("{k} is not a key"));
            }
        }
    }
}
