//! The SQL lexer and statement analysis (`sql::analyze`) on any text a
//! client sends in COM_QUERY or COM_STMT_PREPARE, under each sql_mode that
//! changes lexing, and what the session builds on it: KILL plans, locally
//! answered statements, CONNECTION_ID() substitution, the statement digest.
//!
//! Input: `mode u8 | SQL text` (`mode` bit 0: ANSI_QUOTES, bit 1:
//! NO_BACKSLASH_ESCAPES).
//!
//! Invariants: no panic or hang; analysis is deterministic; at least one
//! statement; statement spans and function-call spans lie inside the text,
//! in order and without overlap; tokens are in order inside the text; a
//! CONNECTION_ID() substitution leaves the rest of the text intact; the
//! digest is deterministic, the same through a reused buffer, hashed from
//! its text, and not much longer than the text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use myplex::frontend::session::{kill, local};
use myplex::sql::lexer::{Lexer, unquote};
use myplex::sql::{Effect, LexOptions, analyze};
use myplex_fuzz::Input;

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let mode = input.u8();
    let sql = input.rest();
    let opts = LexOptions {
        ansi_quotes: mode & 1 != 0,
        no_backslash_escapes: mode & 2 != 0,
    };

    let mut end = 0;
    for t in Lexer::new(sql, opts) {
        assert!(
            t.start >= end && t.start < t.end && t.end <= sql.len(),
            "token {t:?}"
        );
        end = t.end;
        let _ = unquote(sql, &t, opts);
    }

    let a = analyze(sql, opts);
    assert_eq!(a, analyze(sql, opts), "analysis is not deterministic");
    assert!(!a.statements.is_empty());
    let mut end = 0;
    for s in &a.statements {
        assert!(
            s.span.start >= end && s.span.start <= s.span.end,
            "span {:?}",
            s.span
        );
        assert!(s.span.end <= sql.len());
        end = s.span.end;
        for e in &s.effects {
            if let Effect::Function(f) = e {
                assert!(f.span.start < f.span.end && f.span.end <= sql.len());
            }
        }
    }

    let d = myplex::sql::digest::digest(sql, opts);
    let mut buf = b"left over".to_vec();
    let h = myplex::sql::digest::digest_into(sql, opts, &mut buf);
    assert_eq!((h, &buf), (d.hash, &d.text), "digest is not deterministic");
    assert_eq!(h, myplex::sql::digest::hash64(&buf));
    assert!(buf.len() <= 8 * sql.len() + 32, "digest blew up");

    let _ = kill::plan(sql, &a, opts, false);
    let _ = kill::plan(sql, &a, opts, true);
    let _ = local::found_rows_after(sql, 3, opts);
    let _ = local::classify(sql);
    // Keeping the diagnostics area never holds for text that is not read
    // reliably.
    if myplex::sql::keeps_diagnostics(sql, opts) != myplex::sql::DiagnosticsUse::Clears {
        assert!(!a.incomplete);
    }
    if let Some(out) = local::replace_connection_id(sql, 4242, opts) {
        // Every replaced call is at least `connection_id()` long (15 bytes)
        // and becomes the 4 digits of the id.
        assert!(out.len() < sql.len());
        assert_ne!(out, sql);
    }
});
