//! Statement splitting, kinds, comments, quoting, sql_mode, stored and
//! compound bodies, large and random input.

use super::*;
use crate::sql::effects::Kind::*;
use crate::sql::*;

#[test]
fn kinds() {
    let cases: &[(&str, Kind)] = &[
        ("(SELECT 1) UNION (SELECT 2)", Select),
        ("((SELECT 1))", Select),
        ("/* a */ -- b\n # c\n SELECT 1", Select),
        ("START TRANSACTION READ ONLY", Begin),
        ("BEGIN", Begin),
        ("BEGIN WORK", Begin),
        ("COMMIT AND CHAIN", Commit),
        ("ROLLBACK TO SAVEPOINT a", Rollback),
        ("SAVEPOINT a", Savepoint),
        ("RELEASE SAVEPOINT a", ReleaseSavepoint),
        ("SHOW TABLES", Show),
        ("TRUNCATE TABLE t", Truncate),
        ("WITH x AS (SELECT 1) SELECT * FROM x", With),
        ("VALUES (1), (2)", Values),
        ("TABLE t", Table),
        ("REPLACE INTO t VALUES (1)", Replace),
        ("DELETE FROM t", Delete),
        ("DO SLEEP(1)", Do),
        ("GRANT ALL ON *.* TO u", Other),
        ("`select` 1", Other),
        ("LOAD INDEX INTO CACHE t", Other),
        ("CREATE VIEW v AS SELECT 1", Create),
        (
            "CREATE DEFINER=`a`@`%` SQL SECURITY INVOKER VIEW v AS SELECT 1",
            Create,
        ),
        ("ALTER VIEW v AS SELECT 1", Alter),
        ("ALTER EVENT e DISABLE", RoutineDefinition),
        (
            "CREATE DEFINER = CURRENT_USER() FUNCTION f() RETURNS INT RETURN 1",
            RoutineDefinition,
        ),
        (
            "CREATE DEFINER=root@localhost PROCEDURE p() SELECT 1",
            RoutineDefinition,
        ),
        (
            "CREATE OR REPLACE DEFINER='a'@'b' AGGREGATE FUNCTION f(x INT) RETURNS INT \
          BEGIN RETURN 1; END",
            RoutineDefinition,
        ),
        (
            "CREATE FUNCTION f RETURNS STRING SONAME 'udf.so'",
            RoutineDefinition,
        ),
    ];
    for (sql, kind) in cases {
        check(sql, D, &[*kind], &[]);
    }
    // Stored statements report nothing; explained ones report what the
    // statement would do (MariaDB runs parts of it while explaining).
    for sql in [
        "CREATE VIEW v AS SELECT GET_LOCK('a', 0), CONNECTION_ID()",
        "CREATE EVENT e ON SCHEDULE EVERY 1 DAY DO SELECT GET_LOCK('a', 0)",
    ] {
        let a = run(sql, D);
        assert!(a.statements[0].effects.is_empty(), "{sql}");
    }
    for sql in [
        "EXPLAIN SELECT RELEASE_LOCK('a')",
        "DESCRIBE SELECT @a := 1",
    ] {
        let a = run(sql, D);
        assert!(!a.statements[0].effects.is_empty(), "{sql}");
        // Only parts of it run: what would end state is not trusted.
        assert!(a.statements[0].conditional, "{sql}");
    }
    let a = run("ANALYZE SELECT RELEASE_LOCK('a')", D);
    assert_eq!(
        a.statements[0].effects,
        [Effect::ReleaseLock { name: Some(b("a")) }]
    );
}

#[test]
fn comments_and_executable_comments() {
    let cases: &[(&str, &[Kind], &[Effect], bool)] = &[
        ("/*!50700 SET @x=1 */", &[Set], &[uv("x", false)], true),
        ("/*!40101 SET @x=1 */", &[Set], &[uv("x", false)], false),
        ("/*! SET @x=1 */", &[Set], &[uv("x", false)], false),
        ("/*M!100100 SET @x=NULL */", &[Set], &[uv("x", true)], true),
        ("/*M! SET @x=1 */", &[Set], &[uv("x", false)], true),
        (
            "SELECT 1 /*!, GET_LOCK('g', 0) */",
            &[Select],
            &[get_lock(Some("g"))],
            false,
        ),
        (
            "/*!40101 SET @a=1 */; /*!99999 SET @b=NULL */",
            &[Set, Set],
            &[uv("a", false), uv("b", true)],
            true,
        ),
        ("SET @a = 1 -- x\n", &[Set], &[uv("a", false)], false),
        ("SET @a = NULL -- x", &[Set], &[uv("a", true)], false),
        // `--x` is minus minus x: the value is not NULL.
        ("SET @a = NULL --x", &[Set], &[uv("a", false)], false),
        ("SET @a = NULL#x", &[Set], &[uv("a", true)], false),
        (
            "/* ; */ SET /* @b = 1; */ @a = 1",
            &[Set],
            &[uv("a", false)],
            false,
        ),
        ("/*+ hint */ SELECT 1", &[Select], &[], false),
        (
            "/*M!100100 LOCK */ TABLES t READ",
            &[LockTables],
            &[Effect::LockTables],
            true,
        ),
    ];
    for (sql, kinds, effects, gated) in cases {
        check(sql, D, kinds, effects);
        let a = run(sql, D);
        let conditional = a.statements.iter().any(|s| s.conditional);
        assert_eq!(conditional, *gated, "conditional of {sql}");
    }
    let a = run("/*!40101 SET @a=1 */; /*!99999 SET @b=NULL */", D);
    assert!(!a.statements[0].conditional);
    assert!(a.statements[1].conditional);
}

#[test]
fn quotes_hide_everything() {
    check(
        r#"SELECT 'a;b@c GET_LOCK(''x'', 0) \';' ; SELECT "x\";GET_LOCK('y',1); @z := 1""#,
        D,
        &[Select, Select],
        &[],
    );
    check(
        "SELECT `a``b;GET_LOCK(`, 1; SELECT `@x := 1`",
        D,
        &[Select, Select],
        &[],
    );
    check("SELECT 'it''s; @x:=1' AS `x;`", D, &[Select], &[]);
    check(
        "SELECT X'41', B'01', N'@x := 1;', _latin1'@y := 1'",
        D,
        &[Select],
        &[],
    );
}

#[test]
fn sql_modes() {
    let ansi = LexOptions {
        ansi_quotes: true,
        ..D
    };
    // Under ANSI_QUOTES "…" is an identifier: no string, no split inside.
    check("SELECT \"a;b\" FROM t", ansi, &[Select], &[]);
    check(
        "SELECT \"GET_LOCK\"('a', 0)",
        ansi,
        &[Select],
        &[get_lock(Some("a"))],
    );
    check("SELECT \"GET_LOCK\"('a', 0)", D, &[Select], &[]);
    check("SET @\"Q\" = 1", ansi, &[Set], &[uv("q", false)]);
    check(
        "SELECT GET_LOCK(\"n\", 0)",
        D,
        &[Select],
        &[get_lock(Some("n"))],
    );
    check(
        "SELECT GET_LOCK(\"n\", 0)",
        ansi,
        &[Select],
        &[get_lock(None)],
    );

    let nbe = LexOptions {
        no_backslash_escapes: true,
        ..D
    };
    let sql = "SELECT 'a\\'; SET @x=1; SELECT ''";
    check(sql, nbe, &[Select, Set, Select], &[uv("x", false)]);
    // With backslash escapes the quote is escaped and the string never ends.
    let a = run(sql, D);
    assert!(a.incomplete);
    assert!(a.statements.iter().all(|s| s.effects.is_empty()));
    check(
        "SELECT GET_LOCK('a\\b', 0)",
        nbe,
        &[Select],
        &[get_lock(Some("a\\b"))],
    );
    check(
        "SELECT GET_LOCK('a\\b', 0)",
        D,
        &[Select],
        &[get_lock(Some("a\x08"))],
    );
}

#[test]
fn sql_mode_change_makes_the_rest_opaque() {
    // After this SET the server lexes "…" as an identifier: the rest of the
    // query cannot be split reliably with the options it started with.
    for sql in [
        "SET sql_mode = 'ANSI_QUOTES'; SELECT \"a;b\"",
        "SET SESSION sql_mode = ''; SELECT 1",
        "SET @@sql_mode = DEFAULT; /* c */",
        // The server joins `@@session . name` across spaces and comments.
        "SET @@session . sql_mode='NO_BACKSLASH_ESCAPES'; SELECT 'a\\'; SET ROLE r1; -- '",
        "SET @@local /* c */ . sql_mode = ''; SELECT 1",
        "SET @@session.`sql_mode` = ''; SELECT 1",
        "SET @a = 1, @@session\n.sql_mode = ''; SELECT 1",
        // A multibyte client character set can take a quote into a
        // character.
        "SET NAMES gbk; SELECT 1",
        "SET @@session . character_set_client = sjis; SELECT 1",
        "SET character_set_client = big5; SELECT 1",
        "BEGIN NOT ATOMIC SET NAMES gbk; END; SELECT 1",
        // What a SET this reading does not understand, or text it did not
        // read, may have changed either.
        "SET @@session . = 1; SELECT 1",
        "EXECUTE s; SELECT 1",
        "EXECUTE IMMEDIATE @q; SELECT 1",
        "EXECUTE IMMEDIATE 'SET NAMES gbk'; SELECT 1",
        "PREPARE s FROM 'SET sql_mode = ''ANSI_QUOTES'''; EXECUTE s; SELECT 1",
        "PREPARE s FROM @q; EXECUTE s; SELECT 1",
        "PREPARE s FROM 'SELECT 1'; PREPARE s FROM @q; EXECUTE s; SELECT 1",
        "SET NAMES DEFAULT; SELECT 1",
        "SET character_set_client = @cs; SELECT 1",
        "SET CHARACTER SET 'sjis'; SELECT 1",
        // A local of that name may be out of scope when it is set.
        "BEGIN NOT ATOMIC BEGIN DECLARE character_set_client INT; END; \
         SET character_set_client = gbk; END; SELECT 1",
        // Dynamic SQL read with options the same statement changed first.
        "BEGIN NOT ATOMIC SET sql_mode = 'NO_BACKSLASH_ESCAPES'; \
         EXECUTE IMMEDIATE 'SELECT 1'; END",
        "SET STATEMENT sql_mode = 'NO_BACKSLASH_ESCAPES' FOR EXECUTE IMMEDIATE 'SELECT 1'",
        "SET STATEMENT sql_mode = 'NO_BACKSLASH_ESCAPES' FOR PREPARE s FROM 'SELECT 1'",
    ] {
        assert!(run(sql, D).incomplete, "{sql}");
    }
    for sql in [
        "SELECT 1; SET sql_mode = ''",
        "SET GLOBAL sql_mode = ''; SELECT 1",
        "SET STATEMENT sql_mode = '' FOR SELECT 1; SELECT 2",
        "SET sql_mode = ''; ",
        "SET @@global . sql_mode = ''; SELECT 1",
        "SET character_set_results = gbk; SELECT 1",
        "CALL p(); SELECT 1",
        // Character sets read alike change nothing for the reader (drivers
        // start sessions with such multi-statements).
        "SET NAMES utf8mb4; SET time_zone = '+00:00'",
        "SET NAMES 'latin1' COLLATE latin1_bin, @x = 1; SELECT 1",
        "SET character_set_client = utf8mb4; SELECT 1",
        "SET STATEMENT max_statement_time = 1 FOR EXECUTE IMMEDIATE 'SELECT 1'",
        "BEGIN NOT ATOMIC PREPARE s FROM 'SELECT 1'; EXECUTE s; END",
        // Dynamic SQL whose text is read here and changes nothing.
        "PREPARE s FROM 'SELECT GET_LOCK(''a'', 0)'; EXECUTE s; DEALLOCATE PREPARE s",
        "EXECUTE IMMEDIATE 'DO GET_LOCK(''a'', 0)'; SELECT * FROM nosuch",
    ] {
        assert!(!run(sql, D).incomplete, "{sql}");
    }
}

#[test]
fn unterminated_is_incomplete() {
    for sql in [
        "SELECT 'abc",
        "SELECT \"abc",
        "SELECT `abc",
        "SELECT 1 /* x",
        "/*! SELECT 1",
        "/*!50700 SET @x=1",
        "SET @x = 1; SELECT 'a",
        "SET @'x = 1",
        "BEGIN NOT ATOMIC SELECT 1;",
        "CREATE PROCEDURE p() BEGIN SELECT 1;",
        "BEGIN NOT ATOMIC SELECT 1; END END IF",
        "/*!40101 SELECT 1; SELECT 2 */",
    ] {
        assert!(run(sql, D).incomplete, "{sql}");
    }
    for sql in ["SELECT 'abc'", "SELECT 1 -- '", "SELECT 1 # `"] {
        assert!(!run(sql, D).incomplete, "{sql}");
    }
}

#[test]
fn routine_bodies_are_not_run() {
    check(
        "CREATE PROCEDURE p() BEGIN SET @x=1; CREATE TEMPORARY TABLE t(a int); END; SET @y = 2",
        D,
        &[RoutineDefinition, Set],
        &[uv("y", false)],
    );
    // Columns named begin/end, IF() and CASE expressions inside the body.
    check(
        "CREATE DEFINER=`u`@`%` PROCEDURE p(IN a INT, OUT b INT) \
         COMMENT 'begin' READS SQL DATA \
         lbl: BEGIN \
           DECLARE done INT DEFAULT 0; \
           DECLARE c CURSOR FOR SELECT begin, end FROM t; \
           DECLARE CONTINUE HANDLER FOR NOT FOUND SET done = 1; \
           SELECT CASE WHEN a THEN 1 ELSE 2 END INTO b; \
           IF (a > 0) THEN SET b = IF(a, 1, 2); ELSEIF a < 0 THEN SET b = 0; ELSE BEGIN END; END IF; \
           CASE a WHEN 1 THEN SELECT 1; ELSE SELECT 2; END CASE; \
           read_loop: LOOP FETCH c INTO b; IF done THEN LEAVE read_loop; END IF; END LOOP; \
           WHILE a > 0 DO SET a = a - 1; END WHILE; \
           REPEAT SET a = a + 1; UNTIL a > 3 END REPEAT; \
           FOR i IN 1..3 DO SELECT i; END FOR; \
           SELECT REPEAT('x', 3); \
         END lbl; SELECT GET_LOCK('z', 0)",
        D,
        &[RoutineDefinition, Select],
        &[get_lock(Some("z"))],
    );
    check(
        "CREATE FUNCTION f(x INT) RETURNS DECIMAL(10,2) DETERMINISTIC \
         RETURN (SELECT CASE WHEN x THEN 2 END); SET @f = 1",
        D,
        &[RoutineDefinition, Set],
        &[uv("f", false)],
    );
    check(
        "CREATE FUNCTION f() RETURNS INT RETURN IF(1, REPEAT('a', 2), 3); SET @f = 1",
        D,
        &[RoutineDefinition, Set],
        &[uv("f", false)],
    );
    check(
        "CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW \
         BEGIN IF NEW.a > 0 THEN SET NEW.b = 1; SET @in_trigger = 1; END IF; END; SET @t = 1",
        D,
        &[RoutineDefinition, Set],
        &[uv("t", false)],
    );
    check(
        "CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW FOLLOWS tr0 \
         IF NEW.a THEN SET NEW.b = 1; END IF; SET @t = 1",
        D,
        &[RoutineDefinition, Set],
        &[uv("t", false)],
    );
    check(
        "CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW SET NEW.a = 1; SET @t = 1",
        D,
        &[RoutineDefinition, Set],
        &[uv("t", false)],
    );
    check(
        "CREATE EVENT e ON SCHEDULE EVERY 1 DAY DO BEGIN INSERT INTO t VALUES (1); \
         SELECT GET_LOCK('e', 0); END; SET @e = 1",
        D,
        &[RoutineDefinition, Set],
        &[uv("e", false)],
    );
    check(
        "CREATE PACKAGE BODY pkg AS PROCEDURE p1 AS BEGIN NULL; END; \
         FUNCTION f1 RETURN INT AS BEGIN RETURN 1; END; END; SET @p = 1",
        D,
        &[RoutineDefinition, Set],
        &[uv("p", false)],
    );
    check(
        "CREATE PROCEDURE p() SELECT 1; SET @s = NULL",
        D,
        &[RoutineDefinition, Set],
        &[uv("s", true)],
    );
}

#[test]
fn compound_statements_run_now() {
    let sql = "BEGIN NOT ATOMIC \
                 DECLARE v, w INT DEFAULT 1; \
                 DECLARE CONTINUE HANDLER FOR SQLSTATE VALUE '42S02', SQLEXCEPTION SET @err = 1; \
                 SET v = 2, @k = v; \
                 SET SESSION v = 1; \
                 CREATE TEMPORARY TABLE tt (a int); \
                 IF @k THEN SELECT GET_LOCK('c', 0); ELSE SET @e := NULL; END IF; \
               END; SELECT 1";
    check(
        sql,
        D,
        &[Compound, Select],
        &[
            uv("err", false),
            uv("k", false),
            sv("v", Scope::Session, false),
            Effect::TempTableCreate {
                schema: None,
                name: b("tt"),
            },
            get_lock(Some("c")),
            uv("e", true),
        ],
    );
    let a = run(sql, D);
    assert!(a.statements[0].conditional);
    assert!(!a.statements[1].conditional);
    let cases: &[(&str, &[Effect])] = &[
        ("IF 1 THEN SET @i = 5; END IF", &[uv("i", false)]),
        ("IF (SELECT 1) THEN SET @i = 5; END IF", &[uv("i", false)]),
        (
            "CASE WHEN 1 THEN SET @c = 1; ELSE SET @c = 2; END CASE",
            &[uv("c", false), uv("c", false)],
        ),
        (
            "WHILE @w IS NULL DO SET @w = 1; END WHILE",
            &[uv("w", false)],
        ),
        (
            "REPEAT SET @r = 1; UNTIL RELEASE_LOCK('x') END REPEAT",
            &[uv("r", false), Effect::ReleaseLock { name: Some(b("x")) }],
        ),
        (
            "FOR i IN 1..3 DO SET @f = i; SET i = 2; END FOR",
            &[uv("f", false)],
        ),
        ("LOOP SET @l = 1; END LOOP", &[uv("l", false)]),
        (
            "BEGIN NOT ATOMIC SELECT CASE WHEN 1 THEN 2 END INTO @x; END",
            &[uv("x", false)],
        ),
    ];
    for (sql, effects) in cases {
        check(sql, D, &[Compound], effects);
        assert!(run(sql, D).statements[0].conditional, "{sql}");
    }
}

#[test]
fn dumps_and_mixed_queries() {
    // mysqldump's trigger form: every part in executable comments.
    check(
        "/*!50003 CREATE*/ /*!50017 DEFINER=`root`@`localhost`*/ /*!50003 TRIGGER trg \
         BEFORE INSERT ON t FOR EACH ROW BEGIN SET NEW.b = 1; END */; SELECT 7",
        D,
        &[RoutineDefinition, Select],
        &[],
    );
    // mariadb-dump's header.
    let a = run(
        "/*M!100616 SET @OLD_NOTE_VERBOSITY=@@NOTE_VERBOSITY, NOTE_VERBOSITY=0 */",
        D,
    );
    assert_eq!(
        a.statements[0].effects,
        [
            uv("old_note_verbosity", false),
            sv("note_verbosity", Scope::Default, false)
        ]
    );
    assert!(a.statements[0].conditional);
    check(
        "SELECT 1; BEGIN NOT ATOMIC SET @a=1; SELECT 5; END; SELECT @a",
        D,
        &[Select, Compound, Select],
        &[uv("a", false)],
    );
    check(
        "CREATE PROCEDURE p1() BEGIN SELECT begin, end FROM (SELECT 1 AS begin, 2 AS end) x; \
         SELECT CASE WHEN 1 THEN 2 END; END; CALL p1(); SELECT 9",
        D,
        &[RoutineDefinition, Call, Select],
        &[Effect::Call],
    );
    check(
        "BEGIN NOT ATOMIC DECLARE no_table CONDITION FOR SQLSTATE '42S02'; \
         DECLARE c CURSOR FOR SELECT a FROM t; DECLARE x INT; SET x = 1, no_table = 2; END",
        D,
        &[Compound],
        &[sv("no_table", Scope::Default, false)],
    );
}

#[test]
fn multi_statements() {
    let sql = "SELECT 1; SET @a=1; DO RELEASE_LOCK('x'); USE db; KILL 5";
    check(
        sql,
        D,
        &[Select, Set, Do, Use, Kill],
        &[
            uv("a", false),
            Effect::ReleaseLock { name: Some(b("x")) },
            Effect::Use { schema: b("db") },
            kill(false, KillTarget::Id(5)),
        ],
    );
    let sql = "  SELECT 1 ;\n/* c */ SET @a=1;  \t";
    let a = run(sql, D);
    let spans: Vec<&str> = a.statements.iter().map(|s| &sql[s.span.clone()]).collect();
    assert_eq!(spans, ["SELECT 1", "/* c */ SET @a=1"]);

    // How the server counts results (checked on MariaDB 10.11).
    let counts: &[(&str, &[Kind])] = &[
        ("", &[Empty]),
        ("   ", &[Empty]),
        (";", &[Empty]),
        ("/* c */", &[Empty]),
        ("SELECT 1;", &[Select]),
        ("SELECT 1; ", &[Select]),
        ("SELECT 1;;", &[Select]),
        ("SELECT 1; ; ;", &[Select]),
        ("SELECT 1; /* c */", &[Select, Empty]),
        ("SELECT 1; -- c", &[Select, Empty]),
        ("SELECT 1;--", &[Select, Empty]),
        ("SELECT 1; # c\n", &[Select, Empty]),
        ("SELECT 1; /* c */ ; ;", &[Select, Empty]),
        ("SELECT 1;; SELECT 2", &[Select, Empty, Select]),
        ("; SELECT 1", &[Empty, Select]),
        ("SELECT 1; -- x\nSELECT 2", &[Select, Select]),
    ];
    for (sql, kinds) in counts {
        check(sql, D, kinds, &[]);
    }
}

#[test]
fn deep_nesting_is_bounded() {
    let nested = "SET STATEMENT a=1 FOR ".repeat(200_000) + "SELECT 1";
    let a = run(&nested, D);
    assert!(a.incomplete);
    assert_eq!(a.statements.len(), 1);
    let cases = "BEGIN NOT ATOMIC SELECT ".to_string()
        + &"CASE WHEN 1 THEN ".repeat(100_000)
        + "1"
        + &" END".repeat(100_000)
        + "; END";
    let a = run(&cases, D);
    assert!(!a.incomplete);
    assert_eq!(a.statements[0].kind, Compound);
    let parens = "SELECT ".to_string() + &"(".repeat(100_000) + &")".repeat(100_000);
    assert!(!run(&parens, D).incomplete);
}

#[test]
fn large_statements_stay_linear() {
    let mut sql = String::from("INSERT INTO t (a, b) VALUES ");
    for i in 0..200_000 {
        if i > 0 {
            sql.push(',');
        }
        sql.push_str(&format!("({i}, 'v;{i}@x')"));
    }
    let a = run(&sql, D);
    assert_eq!(a.statements.len(), 1);
    assert!(a.statements[0].effects.is_empty());
    assert!(!a.incomplete);

    let many = "SELECT 1;".repeat(MAX_STATEMENTS + 10);
    let a = run(&many, D);
    assert_eq!(a.statements.len(), MAX_STATEMENTS);
    assert!(a.incomplete);

    let semis = ";".repeat(100_000);
    assert_eq!(run(&semis, D).statements.len(), 1);
}

/// xorshift64*: a tiny deterministic generator.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn random_input_never_panics_and_spans_hold() {
    const PIECES: &[&[u8]] = &[
        b"'",
        b"\"",
        b"`",
        b"/*",
        b"*/",
        b"/*!",
        b"/*M!",
        b"50700",
        b"--",
        b"-- ",
        b"#",
        b"\n",
        b";",
        b"@",
        b"@@",
        b"(",
        b")",
        b",",
        b".",
        b"=",
        b":=",
        b"\\",
        b" ",
        b"\t",
        b"\0",
        b"\xff",
        b"x",
        b"N",
        b"0x",
        b"1",
        b"SELECT",
        b"SET",
        b"BEGIN",
        b"NOT",
        b"ATOMIC",
        b"END",
        b"IF",
        b"THEN",
        b"ELSE",
        b"CASE",
        b"WHEN",
        b"LOOP",
        b"REPEAT",
        b"UNTIL",
        b"WHILE",
        b"DO",
        b"FOR",
        b"CREATE",
        b"PROCEDURE",
        b"TRIGGER",
        b"EVENT",
        b"FUNCTION",
        b"TEMPORARY",
        b"TABLE",
        b"DROP",
        b"GET_LOCK",
        b"RELEASE_LOCK",
        b"CONNECTION_ID",
        b"LAST_INSERT_ID",
        b"INTO",
        b"NULL",
        b"KILL",
        b"QUERY",
        b"ID",
        b"CALL",
        b"HANDLER",
        b"OPEN",
        b"DECLARE",
        b"STATEMENT",
        b"GLOBAL",
        b"RENAME",
        b"TO",
        b"LOAD",
        b"DATA",
        b"DIAGNOSTICS",
        b"EACH",
        b"ROW",
        b"PACKAGE",
        b"AS",
    ];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for round in 0..20_000 {
        let mut sql = Vec::new();
        let pieces = rng.below(40);
        for _ in 0..pieces {
            if rng.below(4) == 0 {
                sql.push(rng.next() as u8);
            } else {
                sql.extend_from_slice(PIECES[rng.below(PIECES.len())]);
            }
            if rng.below(3) == 0 {
                sql.push(b' ');
            }
        }
        let opts = LexOptions {
            ansi_quotes: round % 3 == 0,
            no_backslash_escapes: round % 5 == 0,
        };
        let a = analyze(&sql, opts);
        assert!(
            !a.statements.is_empty(),
            "{:?}",
            String::from_utf8_lossy(&sql)
        );
        let mut last = 0;
        for s in &a.statements {
            assert!(s.span.start <= s.span.end, "{sql:?}");
            assert!(s.span.end <= sql.len(), "{sql:?}");
            assert!(s.span.start >= last, "{sql:?}");
            last = s.span.end;
            for e in &s.effects {
                if let Effect::Function(f) = e {
                    assert!(
                        s.span.start <= f.span.start
                            && f.span.start <= f.span.end
                            && f.span.end <= s.span.end,
                        "{sql:?}"
                    );
                }
            }
        }
    }
}
