//! A small fixed latency histogram with logarithmic buckets (four per
//! power of two of microseconds, 1 µs to about 71 min), for per-digest
//! percentiles: 124 counters, no allocation, constant-time recording.
//!
//! Owns bucket arithmetic only. A reported percentile is the midpoint of the
//! bucket holding it (at most 12.5 % from the true value), clamped to the
//! smallest and largest value recorded.

/// Buckets: values 0..8 µs exactly, then four per octave up to 2^32 µs;
/// larger values fall in the last bucket.
pub const BUCKETS: usize = 124;

/// Latency counts per bucket.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogHistogram {
    counts: [u32; BUCKETS],
}

impl Default for LogHistogram {
    fn default() -> Self {
        Self {
            counts: [0; BUCKETS],
        }
    }
}

/// The bucket of `us` microseconds.
pub fn bucket(us: u64) -> usize {
    if us < 8 {
        return us as usize;
    }
    let octave = 63 - us.leading_zeros() as usize; // >= 3
    let sub = ((us >> (octave - 2)) & 3) as usize;
    (4 * (octave - 1) + sub).min(BUCKETS - 1)
}

/// The smallest value of bucket `i`.
pub fn lower_bound(i: usize) -> u64 {
    if i < 8 {
        return i as u64;
    }
    let octave = i / 4 + 1;
    let sub = (i % 4) as u64;
    (4 + sub) << (octave - 2)
}

impl LogHistogram {
    /// Counts one value.
    pub fn record(&mut self, us: u64) {
        let c = &mut self.counts[bucket(us)];
        *c = c.saturating_add(1);
    }

    /// The value at quantile `q` (0..=1), clamped to `[min, max]`; 0 when
    /// empty.
    pub fn quantile(&self, q: f64, min: u64, max: u64) -> u64 {
        let total: u64 = self.counts.iter().map(|&c| u64::from(c)).sum();
        if total == 0 {
            return 0;
        }
        let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
        let mut seen = 0u64;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += u64::from(c);
            if seen >= rank {
                let lo = lower_bound(i);
                let hi = if i + 1 < BUCKETS {
                    lower_bound(i + 1)
                } else {
                    max.max(lo) + 1
                };
                let mid = lo + (hi - lo - 1) / 2;
                return mid.clamp(min, max.max(min));
            }
        }
        max
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_contiguous_and_monotonic() {
        for i in 0..BUCKETS - 1 {
            assert!(lower_bound(i) < lower_bound(i + 1), "bucket {i}");
            assert_eq!(bucket(lower_bound(i)), i);
            assert_eq!(bucket(lower_bound(i + 1) - 1), i);
        }
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
        assert_eq!(bucket(0), 0);
        assert_eq!(lower_bound(BUCKETS - 1), 7 << 29);
    }

    #[test]
    fn quantiles_land_within_a_bucket() {
        let mut h = LogHistogram::default();
        for us in 1..=1000u64 {
            h.record(us * 100);
        }
        for (q, want) in [(0.5, 50_000.0), (0.95, 95_000.0), (0.99, 99_000.0)] {
            let got = h.quantile(q, 100, 100_000) as f64;
            assert!((got - want).abs() / want < 0.13, "q{q}: {got} vs {want}");
        }
        assert_eq!(h.quantile(1.0, 100, 100_000), 100_000);
        assert_eq!(LogHistogram::default().quantile(0.5, 0, 0), 0);
        let mut one = LogHistogram::default();
        one.record(12_345);
        assert_eq!(one.quantile(0.99, 12_345, 12_345), 12_345);
    }
}
