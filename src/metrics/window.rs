//! Sliding-window latency statistics for `/status`: one histogram per
//! second over the last minute, merged on demand into counts and
//! percentiles for the last 10 s and 60 s.
//!
//! Buckets are log-linear (16 per power of two), so a reported percentile
//! is within about 6% of the true value; values are microseconds.

use std::sync::Mutex;

use tokio::time::Instant;

/// Sub-buckets per power of two.
const SUB: usize = 16;
/// Powers of two covered (2^36 µs ≈ 19 h).
const POWERS: usize = 36;
const BUCKETS: usize = SUB * POWERS;
/// Seconds kept.
const SLOTS: usize = 61;

/// The bucket a value falls in.
fn bucket(us: u64) -> usize {
    if us < SUB as u64 {
        return us as usize;
    }
    let e = 63 - us.leading_zeros() as usize; // floor(log2)
    let shift = e - 4;
    let m = ((us >> shift) as usize) & (SUB - 1);
    ((e - 3) * SUB + m).min(BUCKETS - 1)
}

/// The upper bound of a bucket (what a percentile reports).
fn upper(b: usize) -> u64 {
    if b < SUB {
        return b as u64;
    }
    let e = b / SUB + 3;
    let m = (b % SUB) as u64;
    ((SUB as u64 + m + 1) << (e - 4)) - 1
}

struct Slot {
    second: u64,
    count: u64,
    max: u64,
    buckets: Vec<u32>,
}

impl Slot {
    fn empty() -> Self {
        Self {
            second: u64::MAX,
            count: 0,
            max: 0,
            buckets: Vec::new(),
        }
    }
}

/// Summary of one window.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct Summary {
    /// Events in the window.
    pub count: u64,
    /// Events per second.
    pub rate: f64,
    /// 50th percentile, milliseconds.
    pub p50_ms: f64,
    /// 95th percentile, milliseconds.
    pub p95_ms: f64,
    /// 99th percentile, milliseconds.
    pub p99_ms: f64,
    /// Largest value, milliseconds.
    pub max_ms: f64,
}

/// A minute of per-second histograms.
pub struct Window {
    start: Instant,
    slots: Mutex<Vec<Slot>>,
}

impl Default for Window {
    fn default() -> Self {
        Self::new()
    }
}

impl Window {
    /// An empty window.
    pub fn new() -> Self {
        Self {
            start: Instant::now(),
            slots: Mutex::new((0..SLOTS).map(|_| Slot::empty()).collect()),
        }
    }

    /// The window's second `now` falls in.
    fn second_of(&self, now: Instant) -> u64 {
        now.saturating_duration_since(self.start).as_secs()
    }

    /// Records one event that took `us` microseconds and ended at `now`
    /// (the caller reads the clock once for the several windows an event
    /// lands in).
    pub fn record_at(&self, now: Instant, us: u64) {
        let sec = self.second_of(now);
        let Ok(mut slots) = self.slots.lock() else {
            return;
        };
        let slot = &mut slots[(sec % SLOTS as u64) as usize];
        if slot.second != sec {
            slot.second = sec;
            slot.count = 0;
            slot.max = 0;
            slot.buckets.clear();
        }
        if slot.buckets.is_empty() {
            slot.buckets.resize(BUCKETS, 0);
        }
        slot.count += 1;
        slot.max = slot.max.max(us);
        slot.buckets[bucket(us)] += 1;
    }

    /// Summarizes the last `seconds` complete seconds plus the current one.
    pub fn summary(&self, seconds: u64) -> Summary {
        Self::summary_of(&[self], seconds)
    }

    /// Summarizes several windows as one (the proxy's figures are its
    /// groups' windows merged on demand, so a statement is recorded in one
    /// window only: its group's, which no other thread writes).
    pub fn summary_of(windows: &[&Window], seconds: u64) -> Summary {
        let mut merged = vec![0u64; BUCKETS];
        let mut count = 0;
        let mut max = 0;
        let mut elapsed: f64 = 0.0;
        for w in windows {
            let now = w.second_of(Instant::now());
            elapsed = elapsed.max(w.start.elapsed().as_secs_f64());
            let Ok(slots) = w.slots.lock() else {
                continue;
            };
            for s in slots.iter() {
                if s.second <= now && now - s.second < seconds && !s.buckets.is_empty() {
                    count += s.count;
                    max = max.max(s.max);
                    for (m, b) in merged.iter_mut().zip(&s.buckets) {
                        *m += u64::from(*b);
                    }
                }
            }
        }
        let elapsed = elapsed.clamp(1.0, seconds as f64);
        let pct = |q: f64| -> f64 {
            if count == 0 {
                return 0.0;
            }
            let rank = ((q * count as f64).ceil() as u64).max(1);
            let mut seen = 0;
            for (i, n) in merged.iter().enumerate() {
                seen += n;
                if seen >= rank {
                    return upper(i).min(max) as f64 / 1000.0;
                }
            }
            max as f64 / 1000.0
        };
        Summary {
            count,
            rate: count as f64 / elapsed,
            p50_ms: pct(0.50),
            p95_ms: pct(0.95),
            p99_ms: pct(0.99),
            max_ms: max as f64 / 1000.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn buckets_are_monotonic_and_tight() {
        let mut last = 0;
        for us in [
            0u64,
            1,
            15,
            16,
            17,
            100,
            1000,
            12_345,
            1_000_000,
            3_600_000_000,
        ] {
            let b = bucket(us);
            assert!(b >= last, "monotonic at {us}");
            last = b;
            let hi = upper(b);
            assert!(hi >= us, "upper bound covers {us}");
            assert!(
                hi as f64 <= us as f64 * 1.07 + 1.0,
                "within 7% at {us}: {hi}"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn percentiles_over_windows() {
        let w = Window::new();
        for i in 1..=100 {
            w.record_at(Instant::now(), i * 1000); // 1..100 ms
        }
        let s = w.summary(10);
        assert_eq!(s.count, 100);
        assert!((49.0..=53.5).contains(&s.p50_ms), "{s:?}");
        assert!((95.0..=101.0).contains(&s.p95_ms), "{s:?}");
        assert_eq!(s.max_ms, 100.0);
        tokio::time::advance(Duration::from_secs(20)).await;
        w.record_at(Instant::now(), 5000);
        assert_eq!(
            w.summary(10).count,
            1,
            "old seconds fall out of the 10 s window"
        );
        assert_eq!(w.summary(60).count, 101);
    }

    #[tokio::test(start_paused = true)]
    async fn windows_merge_as_one() {
        let (a, b, one) = (Window::new(), Window::new(), Window::new());
        for i in 1..=100u64 {
            let w = if i % 3 == 0 { &a } else { &b };
            w.record_at(Instant::now(), i * 1000);
            one.record_at(Instant::now(), i * 1000);
        }
        tokio::time::advance(Duration::from_secs(2)).await;
        b.record_at(Instant::now(), 250_000);
        one.record_at(Instant::now(), 250_000);
        for secs in [10, 60] {
            assert_eq!(
                Window::summary_of(&[&a, &b], secs),
                one.summary(secs),
                "over {secs} s"
            );
        }
        assert_eq!(Window::summary_of(&[&a], 10).count, 33);
        assert_eq!(Window::summary_of(&[], 10).count, 0);
    }
}
