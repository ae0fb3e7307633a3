//! Tests of the digest table: figures, bounds, LRU order, truncation and
//! reset.

use super::*;

fn exec<'a>(user: &'a str, schema: &'a [u8], text: &'a [u8]) -> Execution<'a> {
    Execution {
        user,
        schema,
        digest: hash64(text),
        text,
        group: 1,
        latency_us: 1000,
        queue_wait_us: 100,
        error: false,
        warnings: 0,
        rows_sent: 0,
        rows_affected: 0,
        now: 1_700_000_000,
    }
}

fn texts(t: &Digests) -> Vec<String> {
    t.rows().into_iter().map(|r| r.digest_text).collect()
}

#[test]
fn figures_add_up_per_user_schema_and_digest() {
    let t = Digests::new(100);
    let mut e = exec("app", b"shop", b"SELECT ?");
    for (i, lat) in [300u64, 100, 200].into_iter().enumerate() {
        e.latency_us = lat;
        e.error = i == 1;
        e.warnings = 2;
        e.rows_sent = 5;
        e.rows_affected = 1;
        e.now = 1_700_000_000 + i as u64;
        e.group = i;
        t.record(&e, 1024);
    }
    t.record(&exec("other", b"shop", b"SELECT ?"), 1024);
    t.record(&exec("app", b"", b"SELECT ?"), 1024);
    let rows = t.rows();
    assert_eq!(rows.len(), 3);
    let r = rows
        .iter()
        .find(|r| r.user == "app" && r.schema == "shop")
        .cloned()
        .unwrap_or_else(|| panic!("{rows:?}"));
    assert_eq!(
        (r.count, r.errors, r.warnings, r.rows_sent, r.rows_affected),
        (3, 1, 6, 15, 3)
    );
    assert_eq!(
        (r.total_latency_ms, r.min_latency_ms, r.max_latency_ms),
        (0.6, 0.1, 0.3)
    );
    assert_eq!(r.avg_latency_ms, 0.2);
    assert_eq!(r.queue_wait_ms, 0.3);
    assert_eq!(
        (r.first_seen, r.last_seen, r.group),
        (1_700_000_000, 1_700_000_002, 2)
    );
    assert!(
        r.p50_ms >= 0.1 && r.p50_ms <= 0.3 && r.p99_ms <= 0.3,
        "{r:?}"
    );
    assert_eq!(r.digest, format!("{:016x}", hash64(b"SELECT ?")));
}

#[test]
fn least_recently_used_goes_first() {
    let t = Digests::with_shards(3, 1);
    for s in [&b"a"[..], b"b", b"c"] {
        t.record(&exec("u", b"", s), 1024);
    }
    // `a` used again: `b` is now the least recently used.
    t.record(&exec("u", b"", b"a"), 1024);
    t.record(&exec("u", b"", b"d"), 1024);
    assert_eq!(texts(&t), ["d", "a", "c"]);
    assert_eq!(t.evictions(), 1);
    t.record(&exec("u", b"", b"e"), 1024);
    assert_eq!(texts(&t), ["e", "d", "a"]);
    assert_eq!(t.evictions(), 2);
    // The evicted one starts over.
    t.record(&exec("u", b"", b"b"), 1024);
    let rows = t.rows();
    assert_eq!(rows[0].digest_text, "b");
    assert_eq!(rows[0].count, 1);
}

#[test]
fn a_flood_of_distinct_statements_stays_bounded() {
    let t = Digests::new(5000);
    let mut text = Vec::new();
    for i in 0..100_000u32 {
        text.clear();
        text.extend_from_slice(format!("SELECT `c{i}` FROM `t`").as_bytes());
        t.record(&exec("u", b"s", &text), 1024);
        if i % 10_000 == 0 {
            assert!(t.len() <= 5000);
        }
    }
    assert_eq!(t.len(), 5000);
    assert_eq!(t.evictions(), 100_000 - 5000);
    // Each shard keeps its most recent entries: the last statement is there.
    assert!(texts(&t).iter().any(|s| s == "SELECT `c99999` FROM `t`"));
}

#[test]
fn small_tables_hold_exactly_their_capacity() {
    for max in [1usize, 2, 63, 64, 65, 1000, 1025] {
        let t = Digests::new(max);
        for i in 0..(max * 3) {
            t.record(&exec("u", b"", format!("{i}").as_bytes()), 1024);
        }
        assert_eq!(t.len(), max, "max {max}");
        assert_eq!(t.evictions(), (max * 2) as u64, "max {max}");
    }
}

#[test]
fn text_is_truncated_at_a_character_boundary() {
    let t = Digests::new(10);
    let text = "SELECT `é` FROM `t`".as_bytes();
    // `é` is two bytes at 8..10: a cut at 9 backs up to 8.
    t.record(&exec("u", b"", text), 9);
    assert_eq!(texts(&t), ["SELECT `"]);
    t.record(&exec("u", b"", b"SELECT ?"), 1024);
    t.record(&exec("u", b"", b"SELECT ?, ..."), 4);
    assert_eq!(texts(&t)[0], "SELE");
}

#[test]
fn reset_forgets_entries_but_not_evictions() {
    let t = Digests::with_shards(1, 1);
    t.record(&exec("u", b"", b"a"), 1024);
    t.record(&exec("u", b"", b"b"), 1024);
    t.reset();
    assert!(t.is_empty());
    assert_eq!(t.evictions(), 1);
    t.record(&exec("u", b"", b"c"), 1024);
    assert_eq!(texts(&t), ["c"]);
}
