//! Pool keys: backend connections are shared only between clients of the
//! same credential pool, the same flavour (the capabilities that change
//! row bytes or semantics, [`Flavour`]) *and* the same target: the primary
//! (whichever server it is now) or one replica, by its index in
//! `backend.address` (reads routed by [`super::routing`]). A key is a small
//! integer so the scheduler, the prepared-statement registry and session
//! handles carry it cheaply; this registry maps it to (credential pool,
//! flavour, target).
//!
//! Keys are registered lazily, on the first login of a client with a new
//! flavour or the first read routed to a replica, and never removed. The
//! registry is bounded by construction: flavours are combinations of the
//! bits of [`crate::protocol::caps::FLAVOUR_MASK`], so there are at most
//! `credential pools × 2^bits × (servers + 1)` keys. Key `i` for
//! `i < credential pools` is credential pool `i` with [`Flavour::DEFAULT`]
//! on the primary.

use std::sync::RwLock;

use crate::protocol::caps::{FLAVOUR_MASK, Flavour};

/// The key registry.
#[derive(Debug)]
pub struct Keys {
    keys: RwLock<Vec<Entry>>,
}

/// One key: credential pool, flavour, and the replica it dials (`None`:
/// the primary).
type Entry = (usize, Flavour, Option<usize>);

/// Most flavours one credential pool can have.
pub const MAX_FLAVOURS: usize = 1 << FLAVOUR_MASK.count_ones();

impl Keys {
    /// A registry for `credentials` credential pools, each with its default
    /// flavour registered as the key of the same number.
    pub fn new(credentials: usize) -> Self {
        Self {
            keys: RwLock::new(
                (0..credentials)
                    .map(|c| (c, Flavour::DEFAULT, None))
                    .collect(),
            ),
        }
    }

    /// The key of (credential, flavour) on the primary, registering it
    /// when new.
    pub fn key(&self, credential: usize, flavour: Flavour) -> usize {
        self.key_at(credential, flavour, None)
    }

    /// The key of (credential, flavour) on `target` (`None`: the primary,
    /// `Some(i)`: server `i` as a replica), registering it when new.
    pub fn key_at(&self, credential: usize, flavour: Flavour, target: Option<usize>) -> usize {
        let flavour = Flavour(flavour.0 & FLAVOUR_MASK);
        let want = (credential, flavour, target);
        let find = |v: &Vec<Entry>| v.iter().position(|k| *k == want);
        if let Some(i) = self.keys.read().ok().and_then(|v| find(&v)) {
            return i;
        }
        let mut v = self.keys.write().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = find(&v) {
            return i;
        }
        v.push(want);
        tracing::debug!(
            key = v.len() - 1,
            credential,
            flavour = %flavour.label(),
            replica = ?target,
            "new backend pool key"
        );
        v.len() - 1
    }

    /// Credential pool and flavour of `key`.
    pub fn get(&self, key: usize) -> Option<(usize, Flavour)> {
        self.entry(key).map(|(c, f, _)| (c, f))
    }

    /// The replica `key` dials (`None`: the primary, or no such key).
    pub fn target(&self, key: usize) -> Option<usize> {
        self.entry(key).and_then(|(_, _, t)| t)
    }

    fn entry(&self, key: usize) -> Option<Entry> {
        let v = self.keys.read().unwrap_or_else(|p| p.into_inner());
        v.get(key).copied()
    }

    /// Keys registered.
    pub fn len(&self) -> usize {
        self.keys.read().map_or(0, |v| v.len())
    }

    /// True when no key exists (no credential pools).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::caps::flag;

    #[test]
    fn keys_are_stable_lazy_and_bounded() {
        let k = Keys::new(2);
        assert_eq!(k.key(0, Flavour::DEFAULT), 0);
        assert_eq!(k.key(1, Flavour::DEFAULT), 1);
        let classic = Flavour(0);
        let a = k.key(0, classic);
        assert_eq!(a, 2, "registered on first use");
        assert_eq!(k.key(0, classic), a, "and found again");
        assert_eq!(k.get(a), Some((0, classic)));
        let found_rows = Flavour(u64::from(flag::FOUND_ROWS));
        assert_ne!(k.key(1, found_rows), k.key(0, found_rows));
        // Bits outside the mask do not make new keys.
        assert_eq!(k.key(0, Flavour(classic.0 | u64::from(flag::COMPRESS))), a);
        // Every combination of flavour bits, twice, for both pools.
        let bits: Vec<u64> = (0..64)
            .map(|i| 1u64 << i)
            .filter(|b| FLAVOUR_MASK & b != 0)
            .collect();
        for _ in 0..2 {
            for subset in 0..(1usize << bits.len()) {
                let f = bits
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| subset & (1 << i) != 0)
                    .fold(0, |acc, (_, b)| acc | b);
                k.key(0, Flavour(f));
                k.key(1, Flavour(f));
            }
        }
        assert_eq!(k.len(), 2 * MAX_FLAVOURS);
        assert_eq!(k.get(10_000), None);
        // A replica target is its own key, with the same credential and
        // flavour; the primary's keys say no target.
        let r = k.key_at(0, classic, Some(1));
        assert!(r >= 2 * MAX_FLAVOURS);
        assert_eq!(k.get(r), Some((0, classic)));
        assert_eq!((k.target(r), k.target(a)), (Some(1), None));
        assert_eq!(k.key_at(0, classic, Some(1)), r);
        assert_ne!(k.key_at(0, classic, Some(2)), r);
        assert_eq!(k.key_at(0, classic, None), a);
    }
}
