//! Password-guessing throttle: failed logins are counted per (client
//! address, user name) and per user name, and every login attempt for a key
//! with more than
//! `auth_throttle_free_failures` recent failures waits a growing delay
//! (100 ms doubling, up to `auth_throttle_max_delay_ms`) *before* its
//! outcome is revealed — success too, or an attacker could stop waiting
//! once no OK came at once. Memory is bounded: each map holds at most
//! [`CAPACITY`] keys, dropping the least recently failed; counts are
//! forgotten [`FORGET`] after the last failure. A successful login clears
//! its user's count and its (address, user) count — never another user's:
//! an attacker with one valid account cannot reset the count of the account
//! it guesses.
//!
//! Not per address alone: one misconfigured client on an application host
//! would slow every account's logins from that host (issue 16, 14b).
//!
//! Owns the rate-limited "login failed" log line (no secrets: user name
//! shortened, address, count, delay).

use std::collections::HashMap;
use std::hash::Hash;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;
use tracing::warn;

/// Keys kept per map.
pub const CAPACITY: usize = 10_000;
/// A key's failures are forgotten this long after its last failure.
pub const FORGET: Duration = Duration::from_secs(600);
/// The first delay; each further failure doubles it.
const BASE_DELAY: Duration = Duration::from_millis(100);

/// Throttle settings.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// Failures allowed before delays start.
    pub free_failures: u32,
    /// The longest delay; zero disables the throttle.
    pub max_delay: Duration,
}

struct Counts<K> {
    map: HashMap<K, (u32, Instant)>,
}

impl<K: Hash + Eq + Clone> Counts<K> {
    fn new() -> Self {
        Self {
            map: HashMap::new(),
        }
    }

    fn get(&self, k: &K, now: Instant) -> u32 {
        match self.map.get(k) {
            Some((n, at)) if now.duration_since(*at) < FORGET => *n,
            _ => 0,
        }
    }

    fn fail(&mut self, k: &K, now: Instant) -> u32 {
        let n = self.get(k, now).saturating_add(1);
        if self.map.len() >= CAPACITY && !self.map.contains_key(k) {
            self.shrink(now);
        }
        self.map.insert(k.clone(), (n, now));
        n
    }

    /// Drops forgotten keys, then (if still full) the older half.
    fn shrink(&mut self, now: Instant) {
        self.map
            .retain(|_, (_, at)| now.duration_since(*at) < FORGET);
        if self.map.len() >= CAPACITY {
            let mut ats: Vec<Instant> = self.map.values().map(|(_, at)| *at).collect();
            ats.sort_unstable();
            let cut = ats[ats.len() / 2];
            self.map.retain(|_, (_, at)| *at > cut);
        }
    }
}

/// Failed-login counts and the delay they impose.
pub struct Throttle {
    settings: Settings,
    by_pair: Mutex<Counts<(IpAddr, String)>>,
    by_user: Mutex<Counts<String>>,
    log: crate::telemetry::RateLimit,
}

/// User names are peer-chosen: keys and logs keep at most this many bytes.
const NAME_LIMIT: usize = 64;

fn short(user: &str) -> String {
    let mut end = user.len().min(NAME_LIMIT);
    while !user.is_char_boundary(end) {
        end -= 1;
    }
    user[..end].to_string()
}

impl Throttle {
    /// A throttle with these settings.
    pub fn new(settings: Settings) -> Self {
        Self {
            settings,
            by_pair: Mutex::new(Counts::new()),
            by_user: Mutex::new(Counts::new()),
            log: crate::telemetry::RateLimit::new(5),
        }
    }

    fn delay_for(&self, failures: u32) -> Duration {
        if self.settings.max_delay.is_zero() || failures <= self.settings.free_failures {
            return Duration::ZERO;
        }
        let steps = (failures - self.settings.free_failures - 1).min(16);
        (BASE_DELAY * (1u32 << steps)).min(self.settings.max_delay)
    }

    /// The delay a login attempt from `ip` as `user` waits before its
    /// outcome is sent.
    pub fn delay(&self, ip: IpAddr, user: &str) -> Duration {
        let now = Instant::now();
        let user = short(user);
        let u = self.by_user.lock().map(|c| c.get(&user, now)).unwrap_or(0);
        let a = self
            .by_pair
            .lock()
            .map(|c| c.get(&(ip, user), now))
            .unwrap_or(0);
        self.delay_for(a.max(u))
    }

    /// Records a failed login (and logs it, rate-limited).
    pub fn failed(&self, ip: IpAddr, user: &str) {
        let now = Instant::now();
        let user = short(user);
        let a = self
            .by_pair
            .lock()
            .map(|mut c| c.fail(&(ip, user.clone()), now))
            .unwrap_or(0);
        let u = self
            .by_user
            .lock()
            .map(|mut c| c.fail(&user, now))
            .unwrap_or(0);
        if let Some(suppressed) = self.log.admit() {
            warn!(
                user = ?user,
                address = %ip,
                pair_failures = a,
                user_failures = u,
                next_delay_ms = self.delay_for(a.max(u)).as_millis() as u64,
                suppressed,
                "login failed"
            );
        }
    }

    /// Records a successful login from `ip` as `user`: clears the user's
    /// count and that (address, user) count.
    pub fn succeeded(&self, ip: IpAddr, user: &str) {
        let user = short(user);
        if let Ok(mut c) = self.by_pair.lock() {
            c.map.remove(&(ip, user.clone()));
        }
        if let Ok(mut c) = self.by_user.lock() {
            c.map.remove(&user);
        }
    }

    /// Keys held ((address, user) pairs, users).
    pub fn len(&self) -> (usize, usize) {
        (
            self.by_pair.lock().map(|c| c.map.len()).unwrap_or(0),
            self.by_user.lock().map(|c| c.map.len()).unwrap_or(0),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t() -> Throttle {
        Throttle::new(Settings {
            free_failures: 2,
            max_delay: Duration::from_millis(1000),
        })
    }

    #[tokio::test(start_paused = true)]
    async fn delay_grows_then_caps() {
        let t = t();
        let ip = IpAddr::from([10, 0, 0, 1]);
        let mut seen = Vec::new();
        for _ in 0..7 {
            seen.push(t.delay(ip, "u").as_millis());
            t.failed(ip, "u");
        }
        assert_eq!(seen, [0, 0, 0, 100, 200, 400, 800]);
        t.failed(ip, "u");
        assert_eq!(t.delay(ip, "u").as_millis(), 1000);
        // Another user from the same address is not throttled; the user
        // is, from another address too; an unrelated pair is not.
        assert_eq!(t.delay(ip, "v").as_millis(), 0);
        assert_eq!(t.delay(IpAddr::from([10, 0, 0, 2]), "u").as_millis(), 1000);
        assert_eq!(t.delay(IpAddr::from([10, 0, 0, 2]), "v").as_millis(), 0);
        // Another user's success clears nothing of u's.
        t.succeeded(ip, "v");
        assert_eq!(t.delay(ip, "u").as_millis(), 1000);
        // u's success clears the user and the pair.
        t.succeeded(IpAddr::from([10, 0, 0, 2]), "u");
        assert_eq!(t.delay(IpAddr::from([10, 0, 0, 2]), "u").as_millis(), 0);
        assert_eq!(t.delay(ip, "u").as_millis(), 1000);
        tokio::time::advance(FORGET).await;
        assert_eq!(t.delay(ip, "u").as_millis(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn memory_is_bounded() {
        let t = t();
        for i in 0..(CAPACITY as u32 * 3) {
            let ip = IpAddr::from(i.to_be_bytes());
            t.failed(ip, &format!("user{i}"));
            tokio::time::advance(Duration::from_millis(1)).await;
        }
        let (a, u) = t.len();
        assert!(a <= CAPACITY && u <= CAPACITY, "{a} {u}");
    }

    #[test]
    fn long_names_are_shortened_on_a_char_boundary() {
        let name = "é".repeat(100);
        assert!(short(&name).len() <= NAME_LIMIT);
        assert!(short(&name).chars().all(|c| c == 'é'));
    }

    #[test]
    fn zero_max_delay_disables() {
        let t = Throttle::new(Settings {
            free_failures: 0,
            max_delay: Duration::ZERO,
        });
        let ip = IpAddr::from([10, 0, 0, 1]);
        for _ in 0..10 {
            t.failed(ip, "u");
        }
        assert_eq!(t.delay(ip, "u"), Duration::ZERO);
    }
}
