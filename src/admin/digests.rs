//! The digest table's surfaces: `SHOW MYPLEX DIGESTS [ORDER BY <column>
//! [ASC|DESC]] [LIMIT n]` and `RESET MYPLEX DIGESTS` on the admin console,
//! and `/digests` (JSON; `?order=<column>&dir=asc|desc&limit=n`) on the
//! admin endpoint. Both read `crate::metrics::digests`; neither waits in a
//! queue.
//!
//! Owns the column set, ordering and limits of those answers only.

use crate::frontend::Shared;
use crate::metrics::digests::DigestRow;

use super::console::ResultSet;

/// Columns of `SHOW MYPLEX DIGESTS`, in order (also the names `ORDER BY`
/// and `/digests?order=` accept).
pub const COLUMNS: &[&str] = &[
    "user",
    "schema",
    "digest",
    "digest_text",
    "count",
    "errors",
    "warnings",
    "rows_sent",
    "rows_affected",
    "total_latency_ms",
    "avg_latency_ms",
    "min_latency_ms",
    "max_latency_ms",
    "p50_ms",
    "p95_ms",
    "p99_ms",
    "queue_wait_ms",
    "first_seen",
    "last_seen",
    "group",
];

/// Default order: most total time first.
const DEFAULT_ORDER: usize = 9;

/// How to list digests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listing {
    /// Index into [`COLUMNS`].
    pub order: usize,
    /// Largest first.
    pub desc: bool,
    /// At most this many rows.
    pub limit: Option<usize>,
}

impl Default for Listing {
    fn default() -> Self {
        Self {
            order: DEFAULT_ORDER,
            desc: true,
            limit: None,
        }
    }
}

/// Why a listing request was refused.
pub type Refusal = &'static str;

/// The column named `name` (any case).
fn column(name: &str) -> Result<usize, Refusal> {
    COLUMNS
        .iter()
        .position(|c| c.eq_ignore_ascii_case(name))
        .ok_or("SHOW MYPLEX DIGESTS: unknown ORDER BY column (see the column names of its result)")
}

/// Reads the words after `SHOW MYPLEX DIGESTS` (lower-cased):
/// `[order by <column> [asc|desc]] [limit <n>]`.
pub fn parse_listing(words: &[&str]) -> Result<Listing, Refusal> {
    let mut l = Listing::default();
    let mut rest = words;
    if let ["order", "by", col, tail @ ..] = rest {
        l.order = column(col)?;
        // Text columns read naturally A to Z; figures largest first.
        l.desc = l.order > 3;
        rest = tail;
        match rest {
            ["asc", tail @ ..] => {
                l.desc = false;
                rest = tail;
            }
            ["desc", tail @ ..] => {
                l.desc = true;
                rest = tail;
            }
            _ => {}
        }
    }
    if let ["limit", n, tail @ ..] = rest {
        l.limit = Some(
            n.parse()
                .map_err(|_| "SHOW MYPLEX DIGESTS: LIMIT takes a non-negative integer")?,
        );
        rest = tail;
    }
    if !rest.is_empty() {
        return Err("SHOW MYPLEX DIGESTS: expected [ORDER BY <column> [ASC|DESC]] [LIMIT n]");
    }
    Ok(l)
}

/// A cell's value, for ordering.
enum Key<'a> {
    Num(f64),
    Text(&'a str),
}

fn key(r: &DigestRow, col: usize) -> Key<'_> {
    let n = |v: u64| Key::Num(v as f64);
    match col {
        0 => Key::Text(&r.user),
        1 => Key::Text(&r.schema),
        2 => Key::Text(&r.digest),
        3 => Key::Text(&r.digest_text),
        4 => n(r.count),
        5 => n(r.errors),
        6 => n(r.warnings),
        7 => n(r.rows_sent),
        8 => n(r.rows_affected),
        9 => Key::Num(r.total_latency_ms),
        10 => Key::Num(r.avg_latency_ms),
        11 => Key::Num(r.min_latency_ms),
        12 => Key::Num(r.max_latency_ms),
        13 => Key::Num(r.p50_ms),
        14 => Key::Num(r.p95_ms),
        15 => Key::Num(r.p99_ms),
        16 => Key::Num(r.queue_wait_ms),
        17 => n(r.first_seen),
        18 => n(r.last_seen),
        _ => n(r.group as u64),
    }
}

/// The table's rows in `l`'s order and limit (ties: most executions
/// first, then by digest, so the order is stable).
pub fn listed(shared: &Shared, l: Listing) -> Vec<DigestRow> {
    let mut rows = shared.digests.rows();
    rows.sort_by(|a, b| {
        let o = match (key(a, l.order), key(b, l.order)) {
            (Key::Num(x), Key::Num(y)) => x.total_cmp(&y),
            (Key::Text(x), Key::Text(y)) => x.cmp(y),
            _ => std::cmp::Ordering::Equal,
        };
        let o = if l.desc { o.reverse() } else { o };
        o.then(b.count.cmp(&a.count))
            .then_with(|| a.digest.cmp(&b.digest))
            .then_with(|| a.user.cmp(&b.user))
            .then_with(|| a.schema.cmp(&b.schema))
    });
    if let Some(n) = l.limit {
        rows.truncate(n);
    }
    rows
}

/// `SHOW MYPLEX DIGESTS …`.
pub fn show(shared: &Shared, l: Listing) -> ResultSet {
    let f = |v: f64| format!("{v:.3}");
    ResultSet {
        columns: COLUMNS.to_vec(),
        rows: listed(shared, l)
            .into_iter()
            .map(|r| {
                vec![
                    r.user,
                    r.schema,
                    r.digest,
                    r.digest_text,
                    r.count.to_string(),
                    r.errors.to_string(),
                    r.warnings.to_string(),
                    r.rows_sent.to_string(),
                    r.rows_affected.to_string(),
                    f(r.total_latency_ms),
                    f(r.avg_latency_ms),
                    f(r.min_latency_ms),
                    f(r.max_latency_ms),
                    f(r.p50_ms),
                    f(r.p95_ms),
                    f(r.p99_ms),
                    f(r.queue_wait_ms),
                    r.first_seen.to_string(),
                    r.last_seen.to_string(),
                    r.group.to_string(),
                ]
            })
            .collect(),
    }
}

/// `RESET MYPLEX DIGESTS`: one row, the entries forgotten.
pub fn reset(shared: &Shared) -> ResultSet {
    let n = shared.digests.len();
    shared.digests.reset();
    ResultSet {
        columns: vec!["result", "digests"],
        rows: vec![vec!["reset".into(), n.to_string()]],
    }
}

/// `/digests?…`: the listing as JSON, with the table's state; `Err` for
/// a query it cannot read.
pub fn to_json(shared: &Shared, query: &[u8]) -> Result<String, Refusal> {
    let l = parse_query(query)?;
    let cfg = shared.config.load();
    let body = serde_json::json!({
        "enabled": cfg.digests.enabled,
        "max_digests": shared.digests.capacity(),
        "entries": shared.digests.len(),
        "evictions": shared.digests.evictions(),
        "digests": listed(shared, l),
    });
    Ok(serde_json::to_string_pretty(&body).unwrap_or_default())
}

/// `order=<column>&dir=asc|desc&limit=n`, every part optional.
fn parse_query(query: &[u8]) -> Result<Listing, Refusal> {
    let text = std::str::from_utf8(query).map_err(|_| "bad query string")?;
    let mut l = Listing::default();
    let mut dir = None;
    for pair in text.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        match k {
            "order" => {
                l.order = column(v).map_err(|_| "unknown order column")?;
                l.desc = l.order > 3;
            }
            "dir" if v.eq_ignore_ascii_case("asc") => dir = Some(false),
            "dir" if v.eq_ignore_ascii_case("desc") => dir = Some(true),
            "limit" => l.limit = Some(v.parse().map_err(|_| "limit takes an integer")?),
            _ => return Err("known parameters: order, dir (asc|desc), limit"),
        }
    }
    if let Some(d) = dir {
        l.desc = d;
    }
    Ok(l)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listings_parse() {
        assert_eq!(parse_listing(&[]), Ok(Listing::default()));
        assert_eq!(
            parse_listing(&["order", "by", "count", "asc", "limit", "5"]),
            Ok(Listing {
                order: 4,
                desc: false,
                limit: Some(5)
            })
        );
        assert_eq!(
            parse_listing(&["order", "by", "digest_text"]),
            Ok(Listing {
                order: 3,
                desc: false,
                limit: None
            })
        );
        assert_eq!(parse_listing(&["limit", "0"]).map(|l| l.limit), Ok(Some(0)));
        assert!(parse_listing(&["order", "by", "nope"]).is_err());
        assert!(parse_listing(&["limit", "-1"]).is_err());
        assert!(parse_listing(&["limit", "1", "extra"]).is_err());
        assert!(parse_listing(&["order", "count"]).is_err());
    }

    #[test]
    fn queries_parse() {
        assert_eq!(parse_query(b""), Ok(Listing::default()));
        assert_eq!(
            parse_query(b"order=errors&limit=2"),
            Ok(Listing {
                order: 5,
                desc: true,
                limit: Some(2)
            })
        );
        assert_eq!(
            parse_query(b"order=user&dir=desc").map(|l| l.desc),
            Ok(true)
        );
        assert!(parse_query(b"order=x").is_err());
        assert!(parse_query(b"sort=count").is_err());
    }
}
