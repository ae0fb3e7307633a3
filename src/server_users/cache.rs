//! The looked-up accounts by user name with their age, and the lookup rate
//! limit. Bounded: at most `MAX_ENTRIES` names (expired ones are dropped
//! first; when every entry is fresh a new "no such user" is not stored), so
//! a flood of made-up names costs neither memory nor more than
//! `max_lookups_per_s` queries on the server. Pure logic (time is passed in).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::account::Account;

/// Most names remembered.
pub const MAX_ENTRIES: usize = 10_000;

/// What a lookup found for one name.
#[derive(Debug, Clone)]
pub struct Found {
    /// The name's account rows, most specific host first (empty = no such
    /// user).
    pub accounts: Arc<Vec<Account>>,
    /// The server resolves names (`skip_name_resolve=OFF`).
    pub resolves_names: bool,
    /// When it was read.
    pub at: Instant,
}

/// The cache.
#[derive(Debug)]
pub struct Cache {
    entries: HashMap<String, Found>,
    ttl: Duration,
    negative_ttl: Duration,
}

impl Cache {
    /// A cache trusting accounts for `ttl` and absences for `negative_ttl`.
    pub fn new(ttl: Duration, negative_ttl: Duration) -> Self {
        Self {
            entries: HashMap::new(),
            ttl,
            negative_ttl,
        }
    }

    fn fresh_for(&self, f: &Found) -> Duration {
        if f.accounts.is_empty() {
            self.negative_ttl
        } else {
            self.ttl
        }
    }

    /// The entry for `name` while it is fresh.
    pub fn fresh(&self, name: &str, now: Instant) -> Option<Found> {
        self.entries
            .get(name)
            .filter(|f| now.duration_since(f.at) < self.fresh_for(f))
            .cloned()
    }

    /// The entry for `name`, however old.
    pub fn any(&self, name: &str) -> Option<Found> {
        self.entries.get(name).cloned()
    }

    /// Stores a lookup's result.
    pub fn put(&mut self, name: &str, found: Found) {
        if self.entries.len() >= MAX_ENTRIES && !self.entries.contains_key(name) {
            let now = found.at;
            let (ttl, neg) = (self.ttl, self.negative_ttl);
            self.entries.retain(|_, f| {
                let limit = if f.accounts.is_empty() { neg } else { ttl };
                now.duration_since(f.at) < limit
            });
            if self.entries.len() >= MAX_ENTRIES && found.accounts.is_empty() {
                return;
            }
        }
        self.entries.insert(name.to_string(), found);
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// No entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// A token bucket: `rate` lookups per second, bursts up to `rate`.
#[derive(Debug)]
pub struct RateLimit {
    rate: f64,
    tokens: f64,
    last: Instant,
}

impl RateLimit {
    /// A full bucket.
    pub fn new(rate: u32, now: Instant) -> Self {
        let rate = f64::from(rate.max(1));
        Self {
            rate,
            tokens: rate,
            last: now,
        }
    }

    /// Takes a token if one is there.
    pub fn try_take(&mut self, now: Instant) -> bool {
        let dt = now.duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + dt * self.rate).min(self.rate);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server_users::account::AccountAuth;

    fn found(n: usize, at: Instant) -> Found {
        let a = Account {
            host: "%".into(),
            anonymous: false,
            auth: AccountAuth::NoPassword,
            locked: false,
            expired: false,
        };
        Found {
            accounts: Arc::new(vec![a; n]),
            resolves_names: true,
            at,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn ttl_and_negative_ttl() {
        let mut c = Cache::new(Duration::from_secs(60), Duration::from_secs(5));
        let t0 = Instant::now();
        c.put("u", found(1, t0));
        c.put("ghost", found(0, t0));
        tokio::time::advance(Duration::from_secs(6)).await;
        let t = Instant::now();
        assert!(c.fresh("u", t).is_some());
        assert!(c.fresh("ghost", t).is_none());
        assert!(c.any("ghost").is_some());
        tokio::time::advance(Duration::from_secs(60)).await;
        assert!(c.fresh("u", Instant::now()).is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn bounded_under_a_flood_of_names() {
        let mut c = Cache::new(Duration::from_secs(60), Duration::from_secs(5));
        let t = Instant::now();
        for i in 0..MAX_ENTRIES + 50 {
            c.put(&format!("ghost{i}"), found(0, t));
        }
        assert_eq!(c.len(), MAX_ENTRIES);
        // A real account still gets in; expired absences make room later.
        c.put("real", found(1, t));
        assert!(c.fresh("real", t).is_some());
        tokio::time::advance(Duration::from_secs(6)).await;
        c.put("ghost-new", found(0, Instant::now()));
        assert!(c.len() < 10);
    }

    #[tokio::test(start_paused = true)]
    async fn rate_limit() {
        let mut r = RateLimit::new(3, Instant::now());
        let t = Instant::now();
        assert!(r.try_take(t) && r.try_take(t) && r.try_take(t));
        assert!(!r.try_take(t));
        tokio::time::advance(Duration::from_millis(400)).await;
        assert!(r.try_take(Instant::now()));
        assert!(!r.try_take(Instant::now()));
    }
}
