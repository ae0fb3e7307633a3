//! `[server_users]`: users looked up in the backend (PgBouncer's
//! `auth_query`). Only the keys and their defaults; the lookup itself is
//! `crate::server_users`.

use serde::{Deserialize, Serialize};

/// `[server_users]`
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct ServerUsersConfig {
    /// Look up a login name that no `[[users]]` entry has in the server's
    /// accounts (`mysql.global_priv`, or `mysql.user` before MariaDB 10.4).
    pub enabled: bool,
    /// Account that reads the account tables (needs SELECT on
    /// `mysql.global_priv` / `mysql.user`); empty = `backend.user`.
    pub lookup_user: String,
    /// Password of `lookup_user`; used as is when `lookup_user` is set,
    /// else `backend.password` is used.
    pub lookup_password: String,
    /// How long a looked-up account is trusted before it is read again.
    pub cache_ttl_s: u64,
    /// How long "no such account" (and a failed password, before the
    /// account is read again) is remembered; bounds the lookups a flood of
    /// unknown names or wrong passwords can cause.
    pub negative_ttl_s: u64,
    /// Lookups per second across all clients; logins that would need one
    /// beyond it are refused with 1045 (a cached answer is used when there
    /// is one).
    pub max_lookups_per_s: u32,
    /// Accept server accounts without a password (the server itself
    /// does; off by default so an account someone forgot to protect is not
    /// reachable through the proxy's listener).
    pub allow_no_password: bool,
}

impl Default for ServerUsersConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            lookup_user: String::new(),
            lookup_password: String::new(),
            cache_ttl_s: 60,
            negative_ttl_s: 5,
            max_lookups_per_s: 20,
            allow_no_password: false,
        }
    }
}

impl ServerUsersConfig {
    /// Validation errors, with key paths.
    pub fn errors(&self) -> Vec<String> {
        let mut errs = Vec::new();
        if self.enabled && self.max_lookups_per_s == 0 {
            errs.push("server_users.max_lookups_per_s: must be positive".into());
        }
        if self.cache_ttl_s > 86_400 {
            errs.push("server_users.cache_ttl_s: must be at most 86400".into());
        }
        errs
    }
}
