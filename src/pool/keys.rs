//! Pool keys: backend connections are shared only between clients of the
//! same credential pool *and* the same flavour (the capabilities that change
//! row bytes or semantics, [`Flavour`]). A key is a small integer so the
//! scheduler, the prepared-statement registry and session handles carry it
//! cheaply; this registry maps it to (credential pool, flavour).
//!
//! Keys are registered lazily, on the first login of a client with a new
//! flavour, and never removed. The registry is bounded by construction:
//! flavours are combinations of the bits of [`crate::protocol::caps::FLAVOUR_MASK`],
//! so there are at most `credential pools × 2^bits` keys. Key `i` for
//! `i < credential pools` is credential pool `i` with [`Flavour::DEFAULT`].

use std::sync::RwLock;

use crate::protocol::caps::{FLAVOUR_MASK, Flavour};

/// The key registry.
#[derive(Debug)]
pub struct Keys {
    keys: RwLock<Vec<(usize, Flavour)>>,
}

/// Most flavours one credential pool can have.
pub const MAX_FLAVOURS: usize = 1 << FLAVOUR_MASK.count_ones();

impl Keys {
    /// A registry for `credentials` credential pools, each with its default
    /// flavour registered as the key of the same number.
    pub fn new(credentials: usize) -> Self {
        Self {
            keys: RwLock::new((0..credentials).map(|c| (c, Flavour::DEFAULT)).collect()),
        }
    }

    /// The key of (credential, flavour), registering it when new.
    pub fn key(&self, credential: usize, flavour: Flavour) -> usize {
        let flavour = Flavour(flavour.0 & FLAVOUR_MASK);
        let find = |v: &Vec<(usize, Flavour)>| v.iter().position(|k| *k == (credential, flavour));
        if let Some(i) = self.keys.read().ok().and_then(|v| find(&v)) {
            return i;
        }
        let mut v = self.keys.write().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = find(&v) {
            return i;
        }
        v.push((credential, flavour));
        tracing::debug!(
            key = v.len() - 1,
            credential,
            flavour = %flavour.label(),
            "new backend pool key"
        );
        v.len() - 1
    }

    /// Credential pool and flavour of `key`.
    pub fn get(&self, key: usize) -> Option<(usize, Flavour)> {
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
    }
}
