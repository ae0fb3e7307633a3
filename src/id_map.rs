//! Hash maps keyed by ids the proxy itself hands out (statement ids, entry
//! ids): looked up several times per statement, they hash with one
//! multiplication instead of SipHash. A client cannot choose the keys (the
//! proxy numbers them); by preparing and closing statements it can only pick
//! which of them stay, and the folded product spreads even those over all
//! buckets. Each map is per session or per backend, and bounded.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A map from a proxy-assigned integer id.
pub type IdMap<K, V> = HashMap<K, V, BuildHasherDefault<IdHasher>>;

/// Fibonacci hashing of one integer: the high bits, which hashbrown uses
/// for its control bytes, depend on every bit of the key.
#[derive(Debug, Default, Clone, Copy)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        // Folded: the low bits, which pick the bucket, depend on every bit
        // of the key (a plain product's low bits depend only on the key's).
        self.0 ^ (self.0 >> 32)
    }

    fn write(&mut self, bytes: &[u8]) {
        // Not used by integer keys; kept correct for any other.
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_ids_spread_over_the_high_bits() {
        let tops: std::collections::HashSet<u64> = (0u32..256)
            .map(|i| {
                let mut h = IdHasher::default();
                h.write_u32(i);
                h.finish() >> 57
            })
            .collect();
        // 7 top bits (hashbrown's tag): sequential ids use most of the 128.
        assert!(tops.len() > 100, "{}", tops.len());
    }

    #[test]
    fn ids_sharing_their_low_bits_spread_over_the_low_bits() {
        // Ids a client could keep by closing the others: multiples of 4096.
        let buckets: std::collections::HashSet<u64> = (0u32..256)
            .map(|i| {
                let mut h = IdHasher::default();
                h.write_u32(i << 12);
                h.finish() & 255
            })
            .collect();
        assert!(buckets.len() > 120, "{}", buckets.len());
    }

    #[test]
    fn works_as_a_map() {
        let mut m: IdMap<u32, u32> = IdMap::default();
        for i in 0..1000 {
            m.insert(i, i * 2);
        }
        assert!((0..1000).all(|i| m.get(&i) == Some(&(i * 2))));
        assert_eq!(m.get(&1000), None);
    }
}
