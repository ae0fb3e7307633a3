//! The query-digest table: per (user, schema, statement digest) counts,
//! errors, warnings, rows, latency (total / min / max and percentiles from a
//! [`LogHistogram`]), queue wait, first and last seen, and the thread group
//! of the last execution. What `SHOW MYPLEX DIGESTS` and `/digests` show.
//!
//! Owns the table and its bounds only; the normal form is
//! `crate::sql::digest`, and what a statement's figures are is the
//! session's business.
//!
//! Bounded: at most `max_digests` entries, split over up to 16 shards (one
//! mutex each, held for a hash lookup and a few additions). Each shard
//! evicts its least recently used entry in O(1) when full (an intrusive
//! list over a slab), so the table's order is least-recently-used per
//! shard. Recording into an existing entry allocates nothing; a new entry
//! copies the user, schema and digest text (truncated to `max_text_bytes`
//! at a character boundary). Keys are 64-bit hashes of (user, schema,
//! digest); a hit is checked against the entry's user, schema and digest
//! hash, and an entry whose key collides with a different one is replaced.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use super::log_histogram::LogHistogram;
use crate::sql::digest::{hash64, mix64};

/// Most shards a table has.
const MAX_SHARDS: usize = 16;
/// Fewest entries per shard (below this, fewer shards).
const MIN_PER_SHARD: usize = 64;
/// No entry in a slab's list.
const NONE: u32 = u32::MAX;

/// One statement execution, as the session saw it.
#[derive(Clone, Copy, Debug)]
pub struct Execution<'a> {
    /// Login name.
    pub user: &'a str,
    /// Current schema (empty: none).
    pub schema: &'a [u8],
    /// The digest's hash ([`crate::sql::digest::Digest::hash`]).
    pub digest: u64,
    /// The digest's text (copied only when the entry is new).
    pub text: &'a [u8],
    /// Thread group that ran it.
    pub group: usize,
    /// Latency the client saw (queue wait included), µs.
    pub latency_us: u64,
    /// Time spent in the thread group's queue, µs.
    pub queue_wait_us: u64,
    /// The reply was (or ended with) an error.
    pub error: bool,
    /// Warnings the reply reported.
    pub warnings: u64,
    /// Rows of the result sets relayed.
    pub rows_sent: u64,
    /// Rows the OK packets reported affected.
    pub rows_affected: u64,
    /// Unix time, seconds.
    pub now: u64,
}

/// Figures of one entry.
#[derive(Clone, Debug, Default)]
struct Stats {
    count: u64,
    errors: u64,
    warnings: u64,
    rows_sent: u64,
    rows_affected: u64,
    total_us: u64,
    min_us: u64,
    max_us: u64,
    queue_wait_us: u64,
    first_seen: u64,
    last_seen: u64,
    group: usize,
    hist: LogHistogram,
}

impl Stats {
    fn add(&mut self, e: &Execution<'_>) {
        if self.count == 0 {
            self.min_us = e.latency_us;
            self.first_seen = e.now;
        }
        self.count += 1;
        self.errors += u64::from(e.error);
        self.warnings = self.warnings.saturating_add(e.warnings);
        self.rows_sent = self.rows_sent.saturating_add(e.rows_sent);
        self.rows_affected = self.rows_affected.saturating_add(e.rows_affected);
        self.total_us = self.total_us.saturating_add(e.latency_us);
        self.min_us = self.min_us.min(e.latency_us);
        self.max_us = self.max_us.max(e.latency_us);
        self.queue_wait_us = self.queue_wait_us.saturating_add(e.queue_wait_us);
        self.last_seen = e.now;
        self.group = e.group;
        self.hist.record(e.latency_us);
    }
}

#[derive(Debug)]
struct Entry {
    key: u64,
    digest: u64,
    user: Box<str>,
    schema: Box<[u8]>,
    text: Box<[u8]>,
    stats: Stats,
    /// Towards the most recently used end.
    prev: u32,
    /// Towards the least recently used end.
    next: u32,
}

/// Keys are hashes already: the map uses them as they are.
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0 = hash64(bytes);
    }
    fn write_u64(&mut self, k: u64) {
        self.0 = k;
    }
}

/// One shard: a map from key to slot, a slab of entries, and the
/// recency list through them (`head` most recent).
#[derive(Debug, Default)]
struct Shard {
    map: HashMap<u64, u32, BuildHasherDefault<KeyHasher>>,
    slots: Vec<Entry>,
    head: u32,
    tail: u32,
    cap: usize,
}

impl Shard {
    fn new(cap: usize) -> Self {
        Self {
            head: NONE,
            tail: NONE,
            cap,
            ..Default::default()
        }
    }

    fn unlink(&mut self, i: u32) {
        let (prev, next) = {
            let e = &self.slots[i as usize];
            (e.prev, e.next)
        };
        match prev {
            NONE => self.head = next,
            p => self.slots[p as usize].next = next,
        }
        match next {
            NONE => self.tail = prev,
            n => self.slots[n as usize].prev = prev,
        }
    }

    fn push_front(&mut self, i: u32) {
        let old = self.head;
        {
            let e = &mut self.slots[i as usize];
            e.prev = NONE;
            e.next = old;
        }
        match old {
            NONE => self.tail = i,
            o => self.slots[o as usize].prev = i,
        }
        self.head = i;
    }

    /// Records `e` under `key`; true when an entry was evicted for it.
    fn record(&mut self, key: u64, e: &Execution<'_>, max_text: usize) -> bool {
        if self.cap == 0 {
            return false;
        }
        if let Some(&i) = self.map.get(&key) {
            let entry = &mut self.slots[i as usize];
            let same =
                entry.digest == e.digest && *entry.user == *e.user && *entry.schema == *e.schema;
            if same {
                entry.stats.add(e);
            }
            if self.head != i {
                self.unlink(i);
                self.push_front(i);
            }
            if !same {
                // A different statement with the same 64-bit key: it
                // replaces the older one in place.
                let (prev, next) = (self.slots[i as usize].prev, self.slots[i as usize].next);
                let entry = &mut self.slots[i as usize];
                *entry = new_entry(key, e, max_text);
                (entry.prev, entry.next) = (prev, next);
                entry.stats.add(e);
            }
            return false;
        }
        let mut evicted = false;
        let i = if self.slots.len() < self.cap {
            self.slots.push(new_entry(key, e, max_text));
            (self.slots.len() - 1) as u32
        } else {
            let i = self.tail;
            self.unlink(i);
            let old = self.slots[i as usize].key;
            self.map.remove(&old);
            self.slots[i as usize] = new_entry(key, e, max_text);
            evicted = true;
            i
        };
        self.slots[i as usize].stats.add(e);
        self.map.insert(key, i);
        self.push_front(i);
        evicted
    }
}

fn new_entry(key: u64, e: &Execution<'_>, max_text: usize) -> Entry {
    Entry {
        key,
        digest: e.digest,
        user: e.user.into(),
        schema: e.schema.into(),
        text: truncate(e.text, max_text).into(),
        stats: Stats::default(),
        prev: NONE,
        next: NONE,
    }
}

/// At most `max` bytes of `text`, not cutting a UTF-8 character.
fn truncate(text: &[u8], max: usize) -> &[u8] {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    // Back over continuation bytes (10xxxxxx) to the character's start.
    while end > 0 && text[end] & 0xC0 == 0x80 {
        end -= 1;
    }
    &text[..end]
}

/// The key of (user, schema, digest).
fn key_of(user: &str, schema: &[u8], digest: u64) -> u64 {
    mix64(digest ^ hash64(user.as_bytes()).rotate_left(21) ^ hash64(schema).rotate_left(42))
}

/// One entry as the surfaces show it (times in milliseconds).
#[derive(Clone, Debug, serde::Serialize)]
pub struct DigestRow {
    /// Login name.
    pub user: String,
    /// Schema (empty: none).
    pub schema: String,
    /// The digest hash, 16 hex digits.
    pub digest: String,
    /// The normal form (truncated to `digests.max_text_bytes`).
    pub digest_text: String,
    /// Executions.
    pub count: u64,
    /// Executions that ended with an error.
    pub errors: u64,
    /// Warnings reported.
    pub warnings: u64,
    /// Rows sent to clients.
    pub rows_sent: u64,
    /// Rows affected.
    pub rows_affected: u64,
    /// Sum of latencies (queue wait included).
    pub total_latency_ms: f64,
    /// Mean latency.
    pub avg_latency_ms: f64,
    /// Smallest latency.
    pub min_latency_ms: f64,
    /// Largest latency.
    pub max_latency_ms: f64,
    /// Median latency (histogram estimate).
    pub p50_ms: f64,
    /// 95th percentile.
    pub p95_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Sum of queue waits.
    pub queue_wait_ms: f64,
    /// First execution, unix seconds.
    pub first_seen: u64,
    /// Last execution, unix seconds.
    pub last_seen: u64,
    /// Thread group of the last execution.
    pub group: usize,
}

fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

impl DigestRow {
    fn of(e: &Entry) -> Self {
        let s = &e.stats;
        let q = |p| ms(s.hist.quantile(p, s.min_us, s.max_us));
        Self {
            user: e.user.to_string(),
            schema: String::from_utf8_lossy(&e.schema).into_owned(),
            digest: format!("{:016x}", e.digest),
            digest_text: String::from_utf8_lossy(&e.text).into_owned(),
            count: s.count,
            errors: s.errors,
            warnings: s.warnings,
            rows_sent: s.rows_sent,
            rows_affected: s.rows_affected,
            total_latency_ms: ms(s.total_us),
            avg_latency_ms: s.total_us as f64 / s.count.max(1) as f64 / 1000.0,
            min_latency_ms: ms(s.min_us),
            max_latency_ms: ms(s.max_us),
            p50_ms: q(0.5),
            p95_ms: q(0.95),
            p99_ms: q(0.99),
            queue_wait_ms: ms(s.queue_wait_us),
            first_seen: s.first_seen,
            last_seen: s.last_seen,
            group: s.group,
        }
    }
}

/// The digest table of one proxy.
#[derive(Debug)]
pub struct Digests {
    shards: Box<[Mutex<Shard>]>,
    max: usize,
    evictions: AtomicU64,
}

impl Digests {
    /// A table of at most `max_digests` entries.
    pub fn new(max_digests: usize) -> Self {
        let n = (max_digests / MIN_PER_SHARD).clamp(1, MAX_SHARDS);
        Self::with_shards(max_digests, n)
    }

    /// A table of at most `max_digests` entries over `shards` shards (the
    /// capacity is split as evenly as it goes).
    pub fn with_shards(max_digests: usize, shards: usize) -> Self {
        let n = shards.max(1);
        let shards = (0..n)
            .map(|i| {
                Mutex::new(Shard::new(
                    max_digests / n + usize::from(i < max_digests % n),
                ))
            })
            .collect();
        Self {
            shards,
            max: max_digests,
            evictions: AtomicU64::new(0),
        }
    }

    /// The most entries it holds.
    pub fn capacity(&self) -> usize {
        self.max
    }

    /// Counts one execution (texts longer than `max_text_bytes` are kept
    /// truncated).
    pub fn record(&self, e: &Execution<'_>, max_text_bytes: usize) {
        let key = key_of(e.user, e.schema, e.digest);
        let shard = &self.shards[((key >> 32) % self.shards.len() as u64) as usize];
        let evicted = match shard.lock() {
            Ok(mut s) => s.record(key, e, max_text_bytes),
            Err(_) => false,
        };
        if evicted {
            self.evictions.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Entries held now.
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().map_or(0, |s| s.slots.len()))
            .sum()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Entries evicted to make room since start.
    pub fn evictions(&self) -> u64 {
        self.evictions.load(Ordering::Relaxed)
    }

    /// Every entry, most recently used first within each shard.
    pub fn rows(&self) -> Vec<DigestRow> {
        let mut out = Vec::new();
        for s in self.shards.iter() {
            let Ok(s) = s.lock() else { continue };
            let mut i = s.head;
            while i != NONE {
                let e = &s.slots[i as usize];
                out.push(DigestRow::of(e));
                i = e.next;
            }
        }
        out
    }

    /// Forgets every entry (the eviction count stays).
    pub fn reset(&self) {
        for s in self.shards.iter() {
            if let Ok(mut s) = s.lock() {
                let cap = s.cap;
                *s = Shard::new(cap);
            }
        }
    }
}

#[cfg(test)]
#[path = "digests_tests.rs"]
mod tests;
