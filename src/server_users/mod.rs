//! Users looked up in the backend (PgBouncer's `auth_query`): when
//! `[server_users] enabled` and a login name is not in `[[users]]`, its
//! account rows are read through the lookup account from
//! `mysql.global_priv` (MariaDB 10.4+; `mysql.user` otherwise), cached with
//! a TTL, and the row for the client's address decides the login
//! (`frontend::users`). Anonymous accounts (`''@host`) are read with every
//! name and ranked as the server ranks them. Lookups are single-flight over one dedicated
//! backend connection and rate limited; absences are cached too.
//!
//! Owns: the lookup connection, the cache and the rate limit. Does not own
//! password checks (`frontend::auth`) or backend logins (`backend`).

pub mod account;
pub mod cache;
pub mod host;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use crate::backend::{self, BackendConn, BackendError, BackendParams};
use crate::config::Config;
use crate::protocol::packets::ErrPacket;
use crate::wire::Peer;
use account::{Account, ServerClock};
use cache::{Cache, Found, RateLimit};
use host::ClientHost;

/// Most account rows read for one name.
const MAX_ROWS: usize = 256;

/// ER_ACCOUNT_HAS_BEEN_LOCKED, as the server sends it.
pub fn account_locked() -> ErrPacket {
    ErrPacket::new(4151, "HY000", "Access denied, this account is locked")
}

/// ER_MUST_CHANGE_PASSWORD_LOGIN, as the server sends it to a client that
/// cannot handle expired passwords (myplex offers no sandbox mode).
pub fn password_expired() -> ErrPacket {
    ErrPacket::new(
        1862,
        "HY000",
        "Your password has expired. To log in you must change it using a client that supports expired passwords",
    )
}

/// The answer of a lookup.
#[derive(Debug, Clone)]
pub enum Lookup {
    /// The name's account rows (possibly none), fresh or cached.
    Found(Found),
    /// No cached answer and no lookup allowed now (rate limit) or the
    /// lookup failed.
    Unavailable,
}

/// The lookup connection and the address it logged in at.
#[derive(Default)]
struct LookupConn {
    conn: Option<BackendConn>,
    at: String,
}

/// The lookup service.
pub struct ServerUsers {
    params: BackendParams,
    cache: Mutex<Cache>,
    limit: Mutex<RateLimit>,
    negative_ttl: Duration,
    conn: tokio::sync::Mutex<LookupConn>,
    /// With several servers: where the primary is now (see
    /// [`ServerUsers::follow`]).
    primary: std::sync::OnceLock<Box<dyn Fn() -> Option<String> + Send + Sync>>,
    /// `mysql.global_priv` is not readable: use `mysql.user`.
    user_table: AtomicBool,
    /// Accept accounts without a password.
    pub allow_no_password: bool,
    /// Lookup queries sent to the server.
    lookups: std::sync::atomic::AtomicU64,
}

impl ServerUsers {
    /// The service of `cfg`, logging in like `base` (address, TLS) as the
    /// lookup account; `None` when `server_users` is off.
    pub fn new(cfg: &Config, base: &BackendParams) -> Option<Arc<Self>> {
        let c = &cfg.server_users;
        if !c.enabled {
            return None;
        }
        let (user, password) = if c.lookup_user.is_empty() {
            (cfg.backend.user.clone(), cfg.backend.password.clone())
        } else {
            (c.lookup_user.clone(), c.lookup_password.clone())
        };
        let negative_ttl = Duration::from_secs(c.negative_ttl_s);
        Some(Arc::new(Self {
            params: BackendParams {
                user,
                password,
                native_stage1: None,
                ..base.clone()
            },
            cache: Mutex::new(Cache::new(Duration::from_secs(c.cache_ttl_s), negative_ttl)),
            limit: Mutex::new(RateLimit::new(c.max_lookups_per_s, Instant::now())),
            negative_ttl,
            conn: Default::default(),
            primary: std::sync::OnceLock::new(),
            user_table: AtomicBool::new(false),
            allow_no_password: c.allow_no_password,
            lookups: Default::default(),
        }))
    }

    /// With several servers, lookups log in where `primary` says the
    /// primary is (`None`: none now, the configured address is used): the
    /// first listed server may be the one that is down, or a demoted
    /// primary no longer given the accounts created since. A lookup
    /// connection kept open elsewhere is left for a new one.
    pub fn follow(&self, primary: impl Fn() -> Option<String> + Send + Sync + 'static) {
        let _ = self.primary.set(Box::new(primary));
    }

    /// Where a lookup logs in now.
    fn lookup_address(&self) -> String {
        self.primary
            .get()
            .and_then(|f| f())
            .unwrap_or_else(|| self.params.address.clone())
    }

    /// Lookups sent to the server so far.
    pub fn lookups(&self) -> u64 {
        self.lookups.load(Ordering::Relaxed)
    }

    fn cache(&self) -> std::sync::MutexGuard<'_, Cache> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The account rows of `name`: from the cache while fresh, else read
    /// from the server. `refresh` (after a failed password) reads again
    /// when the cached answer is older than `negative_ttl_s`.
    pub async fn accounts(&self, name: &str, refresh: bool) -> Lookup {
        if name.is_empty() {
            // An empty login name is not looked up.
            return Lookup::Found(Found {
                accounts: Arc::new(Vec::new()),
                resolves_names: true,
                at: Instant::now(),
            });
        }
        let asked = Instant::now();
        let cached = {
            let c = self.cache();
            if refresh {
                c.any(name)
                    .filter(|f| asked.duration_since(f.at) < self.negative_ttl)
            } else {
                c.fresh(name, asked)
            }
        };
        if let Some(f) = cached {
            return Lookup::Found(f);
        }
        // Single flight: one lookup at a time; a name read while we
        // waited is not read again.
        let mut lookup = self.conn.lock().await;
        if let Some(f) = self.cache().any(name).filter(|f| f.at >= asked) {
            return Lookup::Found(f);
        }
        let at = self.lookup_address();
        if lookup.at != at {
            // Opened at a server that is not the primary now.
            lookup.conn = None;
            lookup.at = at.clone();
        }
        let conn = &mut lookup.conn;
        let allowed = self
            .limit
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .try_take(Instant::now());
        if !allowed {
            tracing::debug!("server user lookup rate limited");
            return self.stale(name);
        }
        self.lookups.fetch_add(1, Ordering::Relaxed);
        let reused = conn.is_some();
        let mut result = self.read(conn, &at, name).await;
        if reused && matches!(result, Err(ref e) if !matches!(e, BackendError::Server(_))) {
            // The kept connection went away (wait_timeout, server
            // restart): once more on a fresh one.
            *conn = None;
            result = self.read(conn, &at, name).await;
        }
        match result {
            Ok(found) => {
                self.cache().put(name, found.clone());
                Lookup::Found(found)
            }
            Err(e) => {
                tracing::warn!(error = %e, "server user lookup failed");
                *conn = None;
                self.stale(name)
            }
        }
    }

    fn stale(&self, name: &str) -> Lookup {
        match self.cache().any(name) {
            Some(f) => Lookup::Found(f),
            None => Lookup::Unavailable,
        }
    }

    async fn read(
        &self,
        conn: &mut Option<BackendConn>,
        at: &str,
        name: &str,
    ) -> Result<Found, BackendError> {
        let c = match conn {
            Some(c) => c,
            None => {
                let (c, _) = backend::connect(&self.params.over(at)).await?;
                conn.insert(c)
            }
        };
        let hex: String = name.bytes().map(|b| format!("{b:02X}")).collect();
        let mut found = None;
        if !self.user_table.load(Ordering::Relaxed) {
            let sql = format!(
                "SELECT Host, Priv, @@global.default_password_lifetime, UNIX_TIMESTAMP(), @@global.skip_name_resolve, User = '' FROM mysql.global_priv WHERE User IN (X'{hex}', '')"
            );
            match c.query_rows(&sql, MAX_ROWS).await {
                Ok(rows) => found = Some(from_global_priv(&rows)),
                Err(BackendError::Server(e)) => {
                    tracing::info!(
                        code = e.code,
                        "mysql.global_priv not readable; using mysql.user"
                    );
                    self.user_table.store(true, Ordering::Relaxed);
                }
                Err(e) => return Err(e),
            }
        }
        let (accounts, resolves_names) = match found {
            Some(f) => f,
            None => {
                let sql = format!(
                    "SELECT Host, plugin, authentication_string, password_expired, account_locked, @@global.skip_name_resolve, User = '' FROM mysql.user WHERE User IN (X'{hex}', '')"
                );
                from_user_rows(&c.query_rows(&sql, MAX_ROWS).await?)
            }
        };
        let mut accounts = accounts;
        // The server's order: most specific host first, then a named
        // account before the anonymous one of the same host.
        accounts.sort_by_key(|a| (host::specificity(&a.host), a.anonymous));
        Ok(Found {
            accounts: Arc::new(accounts),
            resolves_names,
            at: Instant::now(),
        })
    }
}

type Rows = [Vec<Option<String>>];

fn cell(r: &[Option<String>], i: usize) -> &str {
    r.get(i).and_then(|c| c.as_deref()).unwrap_or_default()
}

fn resolves(rows: &Rows, i: usize) -> bool {
    rows.first().is_none_or(|r| cell(r, i) != "1")
}

fn from_global_priv(rows: &Rows) -> (Vec<Account>, bool) {
    let accounts = rows
        .iter()
        .filter_map(|r| {
            let clock = ServerClock {
                default_lifetime_days: cell(r, 2).parse().unwrap_or(0),
                now: cell(r, 3).parse().unwrap_or(0),
            };
            let mut a = account::from_global_priv(cell(r, 0), cell(r, 1), clock)?;
            a.anonymous = cell(r, 5) == "1";
            Some(a)
        })
        .collect();
    (accounts, resolves(rows, 4))
}

fn from_user_rows(rows: &Rows) -> (Vec<Account>, bool) {
    let accounts = rows
        .iter()
        .map(|r| {
            let mut a =
                account::from_user_row(cell(r, 0), cell(r, 1), cell(r, 2), cell(r, 3), cell(r, 4));
            a.anonymous = cell(r, 6) == "1";
            a
        })
        .collect();
    (accounts, resolves(rows, 5))
}

/// The account row that applies to a client `peer` (rows are sorted most
/// specific first).
pub fn select(found: &Found, peer: Peer) -> Option<&Account> {
    let client = match peer {
        Peer::Tcp(addr) => ClientHost::new(addr.ip(), found.resolves_names),
        Peer::Unix => ClientHost::socket(),
    };
    found
        .accounts
        .iter()
        .find(|a| host::matches(&a.host, &client))
}

#[cfg(test)]
mod tests {
    use super::*;
    use account::AccountAuth;

    fn row(host: &str, anonymous: bool) -> Account {
        Account {
            host: host.into(),
            anonymous,
            auth: AccountAuth::NoPassword,
            locked: false,
            expired: false,
        }
    }

    fn found(mut rows: Vec<Account>, resolves_names: bool) -> Found {
        rows.sort_by_key(|a| (host::specificity(&a.host), a.anonymous));
        Found {
            accounts: Arc::new(rows),
            resolves_names,
            at: Instant::now(),
        }
    }

    fn at(ip: &str) -> Peer {
        Peer::Tcp(std::net::SocketAddr::new(ip.parse().expect("ip"), 1))
    }

    #[tokio::test]
    async fn a_socket_client_is_localhost_whatever_the_name_resolution() {
        let rows = vec![row("127.0.0.1", false), row("localhost", true)];
        for resolves in [true, false] {
            let f = found(rows.clone(), resolves);
            assert_eq!(
                select(&f, Peer::Unix).map(|a| a.host.as_str()),
                Some("localhost")
            );
        }
        // Not its loopback address: the server gives a socket client no IP.
        let f = found(vec![row("127.0.0.1", false)], true);
        assert!(select(&f, Peer::Unix).is_none());
        let f = found(vec![row("%", false)], false);
        assert!(select(&f, Peer::Unix).is_some());
    }

    #[tokio::test]
    async fn anonymous_localhost_shadows_named_percent_as_on_the_server() {
        let lo = at("127.0.0.1");
        let rows = vec![row("%", false), row("localhost", true)];
        let f = found(rows.clone(), true);
        assert_eq!(select(&f, lo).map(|a| a.anonymous), Some(true));
        let f = found(rows, false);
        assert_eq!(select(&f, lo).map(|a| a.anonymous), Some(false));
        let f = found(vec![row("%", true), row("%", false)], true);
        assert_eq!(select(&f, lo).map(|a| a.anonymous), Some(false));
        let remote = at("10.0.0.1");
        let f = found(vec![row("localhost", false)], true);
        assert!(select(&f, remote).is_none());
    }
}
