//! The checked-in lists that drive the conformance run: which cases and
//! client tests run, and which differences from a direct connection are
//! known (each explained by an entry of `docs/compatibility.md`).
//!
//! Formats (`#` starts a comment, blank lines ignored):
//! - `cases.txt`: one mysqltest case of `mysql-test/main` per line.
//! - `client_tests.txt`: one `mariadb-client-test` test name per line.
//! - `known_differences.txt`: `case mode reason…`, mode `plain`, `ps` or
//!   `*` (both).
//! - `client_known_differences.txt`: `test reason…`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::runner::Mode;

/// `tests/conformance/<name>`.
pub fn list_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/conformance")
        .join(name)
}

/// Non-comment, non-blank lines, trimmed, with their line numbers.
fn lines(name: &str) -> Vec<(usize, String)> {
    let text = std::fs::read_to_string(list_path(name))
        .unwrap_or_else(|e| panic!("cannot read tests/conformance/{name}: {e}"));
    text.lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.split('#').next().unwrap_or("").trim().to_string()))
        .filter(|(_, l)| !l.is_empty())
        .collect()
}

/// The names in `CONFORMANCE_ONLY` (comma-separated), if set: a developer
/// filter for working on single cases.
pub fn only() -> Option<std::collections::BTreeSet<String>> {
    let v = std::env::var("CONFORMANCE_ONLY").ok()?;
    Some(
        v.split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect(),
    )
}

/// A plain list of names (cases or client tests); panics on duplicates.
pub fn names(name: &str) -> Vec<String> {
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for (no, l) in lines(name) {
        assert!(
            !l.contains(char::is_whitespace),
            "tests/conformance/{name}:{no}: one name per line, got {l:?}"
        );
        assert!(
            seen.insert(l.clone()),
            "tests/conformance/{name}:{no}: duplicate {l}"
        );
        out.push(l);
    }
    out
}

/// A known difference's reason must point at the compatibility doc — or,
/// for a failure that is a proxy bug not fixed yet, start with `OPEN:` and
/// say what fails (those lines are the to-do list; they must go, not grow).
fn check_reason(name: &str, no: usize, reason: &str) {
    assert!(
        reason.contains("compatibility.md") || reason.trim_start().starts_with("OPEN:"),
        "tests/conformance/{name}:{no}: the reason must name a docs/compatibility.md entry \
         (or start with OPEN: for a known bug), got {reason:?}"
    );
}

/// `known_differences.txt`: (case, mode) → reason.
pub fn known_case_differences(name: &str) -> BTreeMap<(String, Mode), String> {
    let mut out = BTreeMap::new();
    for (no, l) in lines(name) {
        // Columns may be aligned with any amount of whitespace.
        let (case, rest) = l.split_once(char::is_whitespace).unwrap_or((&l, ""));
        let rest = rest.trim_start();
        let (mode, reason) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
        let case = case.to_string();
        let reason = reason.trim().to_string();
        check_reason(name, no, &reason);
        let modes: &[Mode] = match mode {
            "plain" => &[Mode::Plain],
            "ps" => &[Mode::Ps],
            "*" => &[Mode::Plain, Mode::Ps],
            other => {
                panic!("tests/conformance/{name}:{no}: mode must be plain, ps or *, got {other:?}")
            }
        };
        for &m in modes {
            assert!(
                out.insert((case.clone(), m), reason.clone()).is_none(),
                "tests/conformance/{name}:{no}: {case} {} listed twice",
                m.name()
            );
        }
    }
    out
}

/// `client_known_differences.txt`: test → reason.
pub fn known_client_differences(name: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (no, l) in lines(name) {
        let (test, reason) = l.split_once(char::is_whitespace).unwrap_or((&l, ""));
        check_reason(name, no, reason);
        assert!(
            out.insert(test.to_string(), reason.trim().to_string())
                .is_none(),
            "tests/conformance/{name}:{no}: {test} listed twice"
        );
    }
    out
}
