//! Tests of the digest normal form: literals, lists, keywords, identifiers,
//! quote modes, and the property that literal-only differences vanish.

use super::*;

fn d(sql: &str) -> String {
    String::from_utf8(digest(sql.as_bytes(), LexOptions::default()).text).unwrap_or_default()
}

#[test]
fn literals_become_placeholders() {
    assert_eq!(
        d("select * from t where id = 1"),
        "SELECT * FROM `t` WHERE ID = ?"
    );
    assert_eq!(
        d("SELECT 'a', \"b\", 1.5e3, 0x41, x'41', b'01', 0b1, N'n', ?"),
        "SELECT ?, ..."
    );
    assert_eq!(
        d("select a from t where b = -5"),
        "SELECT `a` FROM `t` WHERE `b` = ?"
    );
    assert_eq!(d("select a - 1, (a) + 2"), "SELECT `a` - ? , ( `a` ) + ?");
    assert_eq!(
        d("select _utf8mb4'x', _binary 'y', _latin1 X'41'"),
        "SELECT ?, ..."
    );
    assert_eq!(
        d("select * from t where d > DATE '2020-01-01' and t < timestamp '2020-01-01 00:00'"),
        "SELECT * FROM `t` WHERE `d` > ? AND `t` < ?"
    );
    // `_x` is an identifier when no literal follows, and `date` a word.
    assert_eq!(d("select _x, date from t"), "SELECT `_x` , DATE FROM `t`");
}

#[test]
fn lists_collapse() {
    assert_eq!(
        d("select * from t where id in (1)"),
        "SELECT * FROM `t` WHERE ID IN (?)"
    );
    assert_eq!(
        d("SELECT * FROM t WHERE id IN (1, 2, 3)"),
        "SELECT * FROM `t` WHERE ID IN (...)"
    );
    assert_eq!(
        d("insert into t values (1,'a',2),(2,'b',3),(4,'c',5)"),
        "INSERT INTO `t` VALUES (...) /* , ... */"
    );
    assert_eq!(
        d("insert into t values (1,'a',2)"),
        "INSERT INTO `t` VALUES (...)"
    );
    assert_eq!(
        d("insert into t (id) values (5)"),
        "INSERT INTO `t` ( ID ) VALUES (?)"
    );
    assert_eq!(
        d("insert into t (id) values (5), (6)"),
        "INSERT INTO `t` ( ID ) VALUES (?) /* , ... */"
    );
    assert_eq!(
        d("insert into t values (1, null)"),
        "INSERT INTO `t` VALUES (...)"
    );
    assert_eq!(d("select a is not null"), "SELECT `a` IS NOT NULL");
    // Not every parenthesis holds values.
    assert_eq!(
        d("select count(*), concat(a, 'x') from t"),
        "SELECT COUNT ( * ) , `concat` ( `a` , ? ) FROM `t`"
    );
}

#[test]
fn identifiers_keywords_and_variables() {
    assert_eq!(
        d("select `t`.`id` from `d`.`t` as x1"),
        "SELECT `t` . `id` FROM `d` . `t` AS `x1`"
    );
    assert_eq!(d("select `a``b` from T1"), "SELECT `a``b` FROM `T1`");
    assert_eq!(
        d("select @X := 1, @@SESSION.Autocommit"),
        "SELECT @x := ? , @@session.autocommit"
    );
    let ansi = LexOptions {
        ansi_quotes: true,
        ..Default::default()
    };
    let t = digest(b"select \"a\"\"b`c\" from t", ansi).text;
    assert_eq!(t, b"SELECT `a\"b``c` FROM `t`");
    // Without ANSI_QUOTES the same text is a string.
    assert_eq!(d("select \"a\"\"b`c\" from t"), "SELECT ? FROM `t`");
}

#[test]
fn comments_whitespace_and_trailing_semicolon_vanish() {
    assert_eq!(
        d("  SELECT /* c */ 1 -- x\n FROM\tt # y\n ;"),
        "SELECT ? FROM `t`"
    );
    assert_eq!(d("select 1; select 2"), "SELECT ? ; SELECT ?");
    assert_eq!(d(""), "");
    assert_eq!(d("/* only */"), "");
}

#[test]
fn backslash_mode_decides_where_a_string_ends() {
    let sql = br"select 'a\' , d' , c";
    let normal = digest(sql, LexOptions::default()).text;
    assert_eq!(normal, b"SELECT ? , `c`");
    let nbe = LexOptions {
        no_backslash_escapes: true,
        ..Default::default()
    };
    assert_eq!(digest(sql, nbe).text, b"SELECT ? , `d` ?");
}

#[test]
fn statements_differing_in_literals_share_a_digest() {
    let groups: &[&[&str]] = &[
        &[
            "SELECT * FROM orders WHERE id = 1 AND note = 'x'",
            "select *   from orders where ID=42 and note=\"it's\" -- hi",
            "Select /* c */ * From orders Where Id = -7 And note = _utf8mb4'z'",
        ],
        &[
            "insert into t values (1,2),(3,4)",
            "INSERT INTO t VALUES (5, 6), (7, 8), (9, 10)",
            "insert into t values (1,2)",
        ],
        &[
            "select a from t where b in (1,2,3)",
            "SELECT a FROM t WHERE b IN (4, 5)",
        ],
    ];
    for g in groups {
        let first = digest(g[0].as_bytes(), LexOptions::default());
        for s in &g[1..] {
            let other = digest(s.as_bytes(), LexOptions::default());
            if g[0].starts_with("insert") && s.ends_with("(1,2)") {
                // One row is `(...)`, several rows `(...) /* , ... */`.
                assert_ne!(first.hash, other.hash);
                continue;
            }
            assert_eq!(first, other, "{} vs {s}", g[0]);
        }
    }
    // Identifiers differ.
    assert_ne!(
        digest(b"select a from t", LexOptions::default()).hash,
        digest(b"select b from t", LexOptions::default()).hash
    );
}

#[test]
fn output_buffer_is_reused() {
    let mut buf = Vec::with_capacity(64);
    let h = digest_into(b"select 1", LexOptions::default(), &mut buf);
    assert_eq!(buf, b"SELECT ?");
    let cap = buf.capacity();
    let h2 = digest_into(b"select 22", LexOptions::default(), &mut buf);
    assert_eq!((h, buf.capacity()), (h2, cap));
}

#[test]
fn hash_spreads() {
    assert_ne!(hash64(b""), hash64(b"\0"));
    assert_ne!(hash64(b"abcdefgh"), hash64(b"abcdefgi"));
    assert_eq!(hash64(b"SELECT ?"), hash64(b"SELECT ?"));
}

#[test]
fn unterminated_input_still_digests() {
    assert_eq!(d("select 'abc"), "SELECT ?");
    assert_eq!(d("select (1, 2"), "SELECT ( ?, ...");
    assert_eq!(d("select ))(("), "SELECT ) ) ( (");
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[(self.next() % xs.len() as u64) as usize]
    }
}

#[test]
fn random_literals_spacing_comments_and_case_never_change_the_digest() {
    let literals = [
        "1",
        "-7",
        "3.25",
        "1e-3",
        "'x'",
        "'it''s'",
        "'a\\'b'",
        "\"q\"",
        "0x1F",
        "X'0a'",
        "b'101'",
        "N'n'",
        "_utf8mb4'z'",
        "_latin1 X'41'",
        "DATE '2020-01-01'",
        "''",
    ];
    let gaps = [" ", "  ", "\n", "\t", " /* c */ ", " /*+ hint */ "];
    let templates = [
        "select * from t where a = {} and b < {}",
        "insert into t (a, b) values ({}, {})",
        "update t set a = {} where id in ({}, 5, {})",
        "select f(a, {}) from t order by 1 limit {}",
    ];
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for tpl in templates {
        let base = digest(tpl.replace("{}", "1").as_bytes(), LexOptions::default());
        for _ in 0..200 {
            let mut sql = String::new();
            for (i, part) in tpl.split("{}").enumerate() {
                if i > 0 {
                    sql.push_str(rng.pick(&literals));
                }
                for (j, word) in part.split(' ').enumerate() {
                    if j > 0 {
                        sql.push_str(rng.pick(&gaps));
                    }
                    // Keywords in any case; identifiers as written.
                    if super::super::keywords::is_keyword(word.as_bytes())
                        && rng.next().is_multiple_of(2)
                    {
                        sql.push_str(&word.to_ascii_uppercase());
                    } else {
                        sql.push_str(word);
                    }
                }
            }
            let d = digest(sql.as_bytes(), LexOptions::default());
            assert_eq!(d, base, "{sql}");
        }
    }
}

#[test]
fn arbitrary_bytes_digest_without_panicking() {
    let alphabet = b"'\"`\\-+#/*!M(),;.?@_ \n\taAzZ019xXbBnN\x80\xff";
    let mut rng = Rng(42);
    let mut buf = Vec::new();
    for _ in 0..20_000 {
        let len = (rng.next() % 40) as usize;
        let sql: Vec<u8> = (0..len)
            .map(|_| alphabet[(rng.next() % alphabet.len() as u64) as usize])
            .collect();
        for mode in 0..4u8 {
            let opts = LexOptions {
                ansi_quotes: mode & 1 != 0,
                no_backslash_escapes: mode & 2 != 0,
            };
            let h = digest_into(&sql, opts, &mut buf);
            let d = digest(&sql, opts);
            assert_eq!((h, &buf), (d.hash, &d.text));
            assert_eq!(h, hash64(&buf));
            assert!(buf.len() <= 8 * sql.len() + 32);
        }
    }
}

/// The digest built on the analysis's pass over the text is the one the
/// digest's own lexing gives, also where the analysis stops reading early
/// (a statement that changes sql_mode, an unterminated string or comment,
/// stored-program bodies, text past a KILL) and under both quote modes.
#[test]
fn the_analysis_pass_builds_the_same_digest() {
    let queries = [
        "select * from t where id = 1",
        "SELECT c FROM sbtest1 WHERE id BETWEEN 5 AND 104 ORDER BY c",
        "insert into t (a, b) values (1, 'x'), (2, 'y'), (3, NULL);",
        "set sql_mode = 'ANSI_QUOTES'; select \"a\" from t; select 'b'",
        "select 'unterminated",
        "select 1 /* open comment",
        "create procedure p() begin declare x int default 5; select x; end",
        "begin not atomic select 1; select _utf8mb4'x'; end",
        "kill 5; select date '2020-01-01', -5, a - 1",
        "select @a := 1, @@session.sql_mode, `q``x`, x'41' from dual;;;",
        "",
        "  ;  ",
        "select \"a\"\"b\" from t where x in (1, 2, 3) and y in ((1, 2), (3, 4))",
    ];
    for q in queries {
        for opts in [
            LexOptions::default(),
            LexOptions {
                ansi_quotes: true,
                no_backslash_escapes: true,
            },
        ] {
            let alone = digest(q.as_bytes(), opts);
            let (analysis, text, hash) =
                crate::sql::analyze_with_digest(q.as_bytes(), opts, b"old text".to_vec());
            assert_eq!(analysis, crate::sql::analyze(q.as_bytes(), opts), "{q}");
            assert_eq!(
                String::from_utf8_lossy(&text),
                String::from_utf8_lossy(&alone.text),
                "{q}"
            );
            assert_eq!(hash, alone.hash, "{q}");
        }
    }
}
