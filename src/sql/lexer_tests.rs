//! Tests of the lexer: token kinds and boundaries, comments, executable
//! comments, quote modes, unterminated input and unquoting.

use super::*;

fn kinds(sql: &str, opts: LexOptions) -> Vec<(TokenKind, String)> {
    Lexer::new(sql.as_bytes(), opts)
        .map(|t| {
            (
                t.kind,
                String::from_utf8_lossy(t.text(sql.as_bytes())).into_owned(),
            )
        })
        .collect()
}

fn texts(sql: &str) -> Vec<String> {
    kinds(sql, LexOptions::default())
        .into_iter()
        .map(|(_, s)| s)
        .collect()
}

fn incomplete(sql: &str, opts: LexOptions) -> bool {
    let mut l = Lexer::new(sql.as_bytes(), opts);
    l.by_ref().for_each(drop);
    l.incomplete()
}

use TokenKind::{BitString, HexString, Number, QuotedIdent, Symbol, SysVar, UserVar, Word};
const STR: TokenKind = TokenKind::String;

#[test]
fn token_kinds() {
    let o = LexOptions::default();
    let cases: &[(&str, &[(TokenKind, &str)])] = &[
        ("SELECT 1", &[(Word, "SELECT"), (Number, "1")]),
        (
            "1abc 12 1.5e3 1e 0x1F 0x1g 0b101 0X1",
            &[
                (Word, "1abc"),
                (Number, "12"),
                (Number, "1.5e3"),
                (Word, "1e"),
                (HexString, "0x1F"),
                (Word, "0x1g"),
                (BitString, "0b101"),
                (Word, "0X1"),
            ],
        ),
        ("1..10", &[(Number, "1"), (Symbol, ".."), (Number, "10")]),
        (
            "N'a' x'41' B'01' _utf8mb4'z'",
            &[
                (STR, "N'a'"),
                (HexString, "x'41'"),
                (BitString, "B'01'"),
                (Word, "_utf8mb4"),
                (STR, "'z'"),
            ],
        ),
        (
            "`a``b` \"s\" 'it''s' 'a\\'b'",
            &[
                (QuotedIdent, "`a``b`"),
                (STR, "\"s\""),
                (STR, "'it''s'"),
                (STR, "'a\\'b'"),
            ],
        ),
        (
            "@x @`q q` @'s' @\"d\" @a.b$c @",
            &[
                (UserVar, "@x"),
                (UserVar, "@`q q`"),
                (UserVar, "@'s'"),
                (UserVar, "@\"d\""),
                (UserVar, "@a.b$c"),
                (UserVar, "@"),
            ],
        ),
        (
            "@@x @@session.sql_mode @@global.`k`.v",
            &[
                (SysVar, "@@x"),
                (SysVar, "@@session.sql_mode"),
                (SysVar, "@@global.`k`.v"),
            ],
        ),
        (
            "a:=b<=>c<=d!=e->>'$' ->f",
            &[
                (Word, "a"),
                (Symbol, ":="),
                (Word, "b"),
                (Symbol, "<=>"),
                (Word, "c"),
                (Symbol, "<="),
                (Word, "d"),
                (Symbol, "!="),
                (Word, "e"),
                (Symbol, "->>"),
                (STR, "'$'"),
                (Symbol, "->"),
                (Word, "f"),
            ],
        ),
        ("\\N;", &[(Word, "\\N"), (Symbol, ";")]),
    ];
    for (sql, want) in cases {
        let got = kinds(sql, o);
        let want: Vec<_> = want.iter().map(|(k, s)| (*k, s.to_string())).collect();
        assert_eq!(got, want, "{sql}");
    }
}

#[test]
fn comments() {
    let cases: &[(&str, &[&str])] = &[
        ("SELECT 1 -- x\n, 2", &["SELECT", "1", ",", "2"]),
        ("SELECT 1 --x", &["SELECT", "1", "-", "-", "x"]),
        ("SELECT 1 --", &["SELECT", "1"]),
        ("SELECT 1 --\tx", &["SELECT", "1"]),
        ("SELECT 1 # c ; d\n;", &["SELECT", "1", ";"]),
        ("SELECT /* ; */ 1", &["SELECT", "1"]),
        ("/* a /* b */ c */", &["c", "*", "/"]),
        ("/*+ NO_INDEX(t) */ SELECT", &["SELECT"]),
        ("/*! SET @x=1 */", &["SET", "@x", "=", "1"]),
        ("/*!50700 SET @x=1 */", &["SET", "@x", "=", "1"]),
        ("/*M!100100 SET @x=1*/", &["SET", "@x", "=", "1"]),
        ("/*!1234 a */", &["1234", "a"]),
        ("/*! a /* c */ b */ d", &["a", "b", "d"]),
        ("a */ b", &["a", "*", "/", "b"]),
        ("'*/' /*! '*/' */", &["'*/'", "'*/'"]),
        ("# only", &[]),
        ("x#y", &["x"]),
    ];
    for (sql, want) in cases {
        assert_eq!(texts(sql), *want, "{sql}");
    }
}

#[test]
fn gating() {
    let gates = |sql: &str| -> Vec<(bool, bool)> {
        Lexer::new(sql.as_bytes(), LexOptions::default())
            .map(|t| (t.in_exec, t.gated))
            .collect()
    };
    assert_eq!(gates("/*! a */ b"), [(true, false), (false, false)]);
    assert_eq!(gates("/*!40101 a */"), [(true, false)]);
    assert_eq!(gates("/*!50700 a */"), [(true, true)]);
    assert_eq!(gates("/*!99999 a */"), [(true, true)]);
    assert_eq!(gates("/*!100100 a */"), [(true, true)]);
    assert_eq!(gates("/*M! a */"), [(true, true)]);
    assert_eq!(gates("/*M!100100 a */"), [(true, true)]);
}

#[test]
fn quote_modes() {
    let ansi = LexOptions {
        ansi_quotes: true,
        ..Default::default()
    };
    assert_eq!(
        kinds("\"a\"\"b\" 'c'", ansi),
        [(QuotedIdent, "\"a\"\"b\"".into()), (STR, "'c'".into())]
    );
    let nbe = LexOptions {
        no_backslash_escapes: true,
        ..Default::default()
    };
    // Without escapes the backslash does not protect the quote.
    assert_eq!(
        kinds("'a\\' b", nbe),
        [(STR, "'a\\'".into()), (Word, "b".into())]
    );
    assert!(incomplete("'a\\' b", LexOptions::default()));
    assert!(!incomplete("'a\\' b'", LexOptions::default()));
}

#[test]
fn unterminated() {
    let o = LexOptions::default();
    for sql in [
        "'abc",
        "\"abc",
        "`abc",
        "/* abc",
        "/*! SELECT 1",
        "x'41",
        "@'a",
        "'a\\",
        "/*!50700 SELECT 1 -- */",
    ] {
        assert!(incomplete(sql, o), "{sql}");
    }
    for sql in ["'a'", "/* a */", "/*! a */", "-- '", "# `"] {
        assert!(!incomplete(sql, o), "{sql}");
    }
}

#[test]
fn unquoting() {
    let o = LexOptions::default();
    let nbe = LexOptions {
        no_backslash_escapes: true,
        ..Default::default()
    };
    let ansi = LexOptions {
        ansi_quotes: true,
        ..Default::default()
    };
    let cases: &[(&str, LexOptions, &[u8])] = &[
        ("`a``b`", o, b"a`b"),
        ("'it''s'", o, b"it's"),
        ("'a\\nb\\'c\\\\d\\%'", o, b"a\nb'c\\d\\%"),
        ("'a\\nb'", nbe, b"a\\nb"),
        ("\"x\"\"y\"", ansi, b"x\"y"),
        ("\"x\\\"y\"", o, b"x\"y"),
        ("N'n'", o, b"n"),
        ("@'q\\'q'", o, b"q'q"),
        ("@`b``b`", o, b"b`b"),
        ("@Abc", o, b"Abc"),
        ("plain", o, b"plain"),
    ];
    for (sql, opts, want) in cases {
        let t = Lexer::new(sql.as_bytes(), *opts).next().unwrap();
        assert_eq!(&*unquote(sql.as_bytes(), &t, *opts), *want, "{sql}");
    }
}
