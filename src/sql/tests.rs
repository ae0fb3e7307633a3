//! Table-driven tests of `analyze`: statement splitting, kinds and effects.

use super::effects::Kind::*;
use super::*;

fn run(sql: &str, opts: LexOptions) -> Analysis {
    analyze(sql.as_bytes(), opts)
}

fn b(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

fn uv(name: &str, null: bool) -> Effect {
    Effect::UserVarAssign {
        name: b(name),
        null,
    }
}

fn sv(name: &str, scope: Scope, to_default: bool) -> Effect {
    Effect::SetVariable {
        name: b(name),
        scope,
        to_default,
    }
}

fn tn(schema: Option<&str>, name: &str) -> TableName {
    (schema.map(b), b(name))
}

fn get_lock(name: Option<&str>) -> Effect {
    Effect::GetLock { name: name.map(b) }
}

fn kill(query: bool, id_kind: KillTarget) -> Effect {
    Effect::Kill { query, id_kind }
}

/// Kinds of all statements and all their effects, in order.
fn check(sql: &str, opts: LexOptions, kinds: &[Kind], effects: &[Effect]) {
    let a = run(sql, opts);
    let got_kinds: Vec<Kind> = a.statements.iter().map(|s| s.kind).collect();
    assert_eq!(got_kinds, kinds, "kinds of {sql:?}");
    let got: Vec<Effect> = a
        .statements
        .iter()
        .flat_map(|s| s.effects.iter().cloned())
        .collect();
    assert_eq!(got, effects, "effects of {sql:?}");
    assert!(!a.incomplete, "{sql:?} is complete");
}

const D: LexOptions = LexOptions {
    ansi_quotes: false,
    no_backslash_escapes: false,
};

#[test]
fn examples_from_the_issue() {
    check("SELECT 'bob@example.com'", D, &[Select], &[]);
    check(
        "INSERT INTO users (mail) VALUES ('bob@example.com')",
        D,
        &[Insert],
        &[],
    );
    check("SELECT * FROM budget_lock", D, &[Select], &[]);
    check("UPDATE budget_lock SET get_lock = 1", D, &[Update], &[]);
    check(
        "/* x */ LOCK TABLES t READ",
        D,
        &[LockTables],
        &[Effect::LockTables],
    );
    check(
        "SELECT 1; LOCK TABLES t WRITE",
        D,
        &[Select, LockTables],
        &[Effect::LockTables],
    );
    check(
        "SELECT GET_LOCK('L',0); SELECT * FROM nosuch",
        D,
        &[Select, Select],
        &[get_lock(Some("L"))],
    );
}

#[test]
fn user_variable_assignments() {
    let cases: &[(&str, &[Kind], &[Effect])] = &[
        ("SET @x = 1", &[Set], &[uv("x", false)]),
        ("SET @X := 1", &[Set], &[uv("x", false)]),
        ("SET @x = NULL", &[Set], &[uv("x", true)]),
        ("SET @x := NULL", &[Set], &[uv("x", true)]),
        ("SET @x = \\N", &[Set], &[uv("x", true)]),
        ("SET @x = NULL IS NULL", &[Set], &[uv("x", false)]),
        ("SET @x = (NULL)", &[Set], &[uv("x", false)]),
        ("SET @x = NULL + 1", &[Set], &[uv("x", false)]),
        (
            "SET @a=1, @@session.b=2, c=3",
            &[Set],
            &[
                uv("a", false),
                sv("b", Scope::Session, false),
                sv("c", Scope::Default, false),
            ],
        ),
        (
            "SET @a = NULL, @b = 'x,y', @c = f(1, 2)",
            &[Set],
            &[uv("a", true), uv("b", false), uv("c", false)],
        ),
        ("SELECT @x := 5", &[Select], &[uv("x", false)]),
        ("SELECT @x := NULL", &[Select], &[uv("x", true)]),
        ("SELECT @x := NULL IS NULL", &[Select], &[uv("x", false)]),
        ("SELECT (@x := NULL), 1 FROM t", &[Select], &[uv("x", true)]),
        ("SELECT @x := NULL FROM t", &[Select], &[uv("x", true)]),
        (
            "UPDATE t SET a = (@v := a + 1)",
            &[Update],
            &[uv("v", false)],
        ),
        (
            "SELECT @`Q q` := 1, @'s' := 2, @\"d\" := 3",
            &[Select],
            &[uv("q q", false), uv("s", false), uv("d", false)],
        ),
        (
            "SELECT 1, 2 INTO @x, @Y",
            &[Select],
            &[uv("x", false), uv("y", false)],
        ),
        (
            "SELECT a FROM t INTO @x FOR UPDATE",
            &[Select],
            &[uv("x", false)],
        ),
        ("SELECT 1 INTO OUTFILE '/tmp/x'", &[Select], &[]),
        ("INSERT INTO t SELECT @x", &[Insert], &[]),
        (
            "CALL p(@x, 1, @y + 1, @z)",
            &[Call],
            &[Effect::Call, uv("x", false), uv("z", false)],
        ),
        ("CALL db.p", &[Call], &[Effect::Call]),
        (
            "CALL p((@a), f(@b), @c)",
            &[Call],
            &[Effect::Call, uv("c", false)],
        ),
        (
            "LOAD DATA INFILE 'f' INTO TABLE t PARTITION (p1) CHARACTER SET utf8 \
             (@a, col) SET col2 = @b",
            &[LoadData],
            &[uv("a", false)],
        ),
        (
            "GET DIAGNOSTICS @n = NUMBER",
            &[GetDiagnostics],
            &[uv("n", false)],
        ),
        (
            "GET CURRENT DIAGNOSTICS CONDITION 1 @m = MESSAGE_TEXT, @e = MYSQL_ERRNO",
            &[GetDiagnostics],
            &[uv("m", false), uv("e", false)],
        ),
        (
            "GET STACKED DIAGNOSTICS CONDITION @i @m = MESSAGE_TEXT",
            &[GetDiagnostics],
            &[uv("m", false)],
        ),
        // Reads are not assignments.
        ("SELECT @x", &[Select], &[]),
        ("SELECT @x = 1", &[Select], &[]),
        ("SELECT * FROM t WHERE a = @x", &[Select], &[]),
        (
            "EXECUTE s USING @x",
            &[Execute],
            &[Effect::ExecutePrepared { name: b("s") }],
        ),
        ("SELECT @@x, @@session.y", &[Select], &[]),
        ("CREATE USER 'a'@'localhost'", &[Create], &[]),
    ];
    for (sql, kinds, effects) in cases {
        check(sql, D, kinds, effects);
    }
}

#[test]
fn tables_and_locks() {
    let cases: &[(&str, &[Kind], &[Effect])] = &[
        (
            "CREATE TEMPORARY TABLE t (a int)",
            &[Create],
            &[Effect::TempTableCreate {
                schema: None,
                name: b("t"),
            }],
        ),
        (
            "CREATE OR REPLACE TEMPORARY TABLE IF NOT EXISTS `db`.`t 1` LIKE u",
            &[Create],
            &[Effect::TempTableCreate {
                schema: Some(b("db")),
                name: b("t 1"),
            }],
        ),
        (
            "CREATE TEMPORARY SEQUENCE s",
            &[Create],
            &[Effect::TempTableCreate {
                schema: None,
                name: b("s"),
            }],
        ),
        ("CREATE TABLE t (a int)", &[Create], &[]),
        (
            "DROP TEMPORARY TABLE IF EXISTS a, db.b",
            &[Drop],
            &[Effect::TableDrop {
                temporary: true,
                tables: vec![tn(None, "a"), tn(Some("db"), "b")],
            }],
        ),
        (
            "DROP TABLES t RESTRICT",
            &[Drop],
            &[Effect::TableDrop {
                temporary: false,
                tables: vec![tn(None, "t")],
            }],
        ),
        ("DROP DATABASE d", &[Drop], &[]),
        (
            "RENAME TABLE a TO b, db.c TO d",
            &[Rename],
            &[
                Effect::TableRename {
                    from: tn(None, "a"),
                    to: tn(None, "b"),
                },
                Effect::TableRename {
                    from: tn(Some("db"), "c"),
                    to: tn(None, "d"),
                },
            ],
        ),
        (
            "ALTER TABLE a ADD COLUMN x INT, RENAME TO b",
            &[Alter],
            &[Effect::TableRename {
                from: tn(None, "a"),
                to: tn(None, "b"),
            }],
        ),
        ("ALTER TABLE a RENAME COLUMN x TO y", &[Alter], &[]),
        ("ALTER TABLE a RENAME INDEX x TO y", &[Alter], &[]),
        ("UNLOCK TABLES", &[UnlockTables], &[Effect::UnlockTables]),
        ("LOCK TABLE t WRITE", &[LockTables], &[Effect::LockTables]),
        (
            "FLUSH TABLES WITH READ LOCK",
            &[Flush],
            &[Effect::FlushReadLock],
        ),
        (
            "FLUSH NO_WRITE_TO_BINLOG TABLES t1, t2 WITH READ LOCK",
            &[Flush],
            &[Effect::FlushReadLock],
        ),
        (
            "FLUSH TABLES t1 FOR EXPORT",
            &[Flush],
            &[Effect::FlushReadLock],
        ),
        ("FLUSH PRIVILEGES", &[Flush], &[]),
        (
            "BACKUP STAGE START",
            &[Backup],
            &[Effect::BackupStage { end: false }],
        ),
        (
            "BACKUP STAGE END",
            &[Backup],
            &[Effect::BackupStage { end: true }],
        ),
        (
            "BACKUP LOCK t",
            &[Backup],
            &[Effect::BackupLock { unlock: false }],
        ),
        (
            "BACKUP UNLOCK",
            &[Backup],
            &[Effect::BackupLock { unlock: true }],
        ),
        (
            "LOCK INSTANCE FOR BACKUP",
            &[Other],
            &[Effect::BackupLock { unlock: false }],
        ),
        (
            "HANDLER t OPEN",
            &[Handler],
            &[Effect::HandlerOpen { alias: b("t") }],
        ),
        (
            "HANDLER db.t OPEN AS h",
            &[Handler],
            &[Effect::HandlerOpen { alias: b("h") }],
        ),
        (
            "HANDLER t OPEN h2",
            &[Handler],
            &[Effect::HandlerOpen { alias: b("h2") }],
        ),
        (
            "HANDLER h CLOSE",
            &[Handler],
            &[Effect::HandlerClose { alias: b("h") }],
        ),
        ("HANDLER h READ FIRST", &[Handler], &[]),
    ];
    for (sql, kinds, effects) in cases {
        check(sql, D, kinds, effects);
    }
}

#[test]
fn lock_functions() {
    let cases: &[(&str, &[Effect])] = &[
        ("SELECT GET_LOCK('a', 10)", &[get_lock(Some("a"))]),
        ("SELECT get_lock ('s', 1)", &[get_lock(Some("s"))]),
        ("SELECT GET_LOCK /* c */ ('s', 1)", &[get_lock(Some("s"))]),
        ("SELECT GET_LOCK(_utf8mb4'n', 0)", &[get_lock(Some("n"))]),
        ("SELECT GET_LOCK('It''s', 0)", &[get_lock(Some("It's"))]),
        ("SELECT GET_LOCK(CONCAT('a','b'), 0)", &[get_lock(None)]),
        ("SELECT GET_LOCK(@name, 0)", &[get_lock(None)]),
        ("SELECT GET_LOCK('a' 'b', 0)", &[get_lock(None)]),
        // A quoted name followed by `(` calls the built-in (checked on MariaDB 10.11).
        ("SELECT `GET_LOCK`('q', 0)", &[get_lock(Some("q"))]),
        ("DO 1 + GET_LOCK('e', 0)", &[get_lock(Some("e"))]),
        (
            "SELECT RELEASE_LOCK('L')",
            &[Effect::ReleaseLock { name: Some(b("L")) }],
        ),
        (
            "SELECT RELEASE_LOCK(x) FROM t",
            &[Effect::ReleaseLock { name: None }],
        ),
        ("SELECT RELEASE_ALL_LOCKS()", &[Effect::ReleaseAllLocks]),
        // Names, strings and qualified calls are not the built-in.
        ("SELECT get_lock FROM t", &[]),
        ("SELECT 'GET_LOCK(1)'", &[]),
        ("SELECT `get_lock` FROM t", &[]),
        ("INSERT INTO get_lock (a) VALUES (1)", &[]),
        ("INSERT get_lock (a) VALUES (1)", &[]),
        ("CREATE TABLE release_lock (a int)", &[]),
        ("CREATE TABLE IF NOT EXISTS release_all_locks (a int)", &[]),
        ("SELECT db.get_lock('x', 0)", &[]),
        ("CALL get_lock('x', 0)", &[Effect::Call]),
        ("ALTER TABLE t ADD INDEX get_lock (a)", &[]),
    ];
    for (sql, effects) in cases {
        let a = run(sql, D);
        assert_eq!(a.statements.len(), 1, "{sql}");
        assert_eq!(a.statements[0].effects, *effects, "{sql}");
    }
}

#[test]
fn session_functions_carry_their_spans() {
    let sql = "SELECT connection_id() + 1, LAST_INSERT_ID(id + (1)), LAST_INSERT_ID (), \
               ROW_COUNT(), FOUND_ROWS() FROM t";
    let a = run(sql, D);
    let spans: Vec<(FuncKind, &str)> = a.statements[0]
        .effects
        .iter()
        .map(|e| match e {
            Effect::Function(f) => (f.kind, &sql[f.span.clone()]),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(
        spans,
        [
            (FuncKind::ConnectionId, "connection_id()"),
            (
                FuncKind::LastInsertId { args: true },
                "LAST_INSERT_ID(id + (1))"
            ),
            (FuncKind::LastInsertId { args: false }, "LAST_INSERT_ID ()"),
            (FuncKind::RowCount, "ROW_COUNT()"),
            (FuncKind::FoundRows, "FOUND_ROWS()"),
        ]
    );
    // Unclosed: the span ends at the statement's last token.
    let sql = "SELECT CONNECTION_ID(; SELECT 1";
    let a = run(sql, D);
    match &a.statements[0].effects[..] {
        [Effect::Function(f)] => assert_eq!(&sql[f.span.clone()], "CONNECTION_ID("),
        other => panic!("unexpected {other:?}"),
    }
    check(
        "SELECT SQL_CALC_FOUND_ROWS * FROM t UNION SELECT SQL_CALC_FOUND_ROWS 1",
        D,
        &[Select],
        &[Effect::CalcFoundRows],
    );
    check("SELECT connection_id FROM t", D, &[Select], &[]);
}

#[test]
fn prepared_xa_kill_use() {
    let cases: &[(&str, &[Kind], &[Effect])] = &[
        (
            "PREPARE S1 FROM 'SELECT GET_LOCK(1)'",
            &[Prepare],
            &[Effect::TextPrepare { name: b("s1") }],
        ),
        (
            "PREPARE `s 2` FROM @q",
            &[Prepare],
            &[Effect::TextPrepare { name: b("s 2") }],
        ),
        (
            "DEALLOCATE PREPARE s1",
            &[Deallocate],
            &[Effect::Deallocate { name: b("s1") }],
        ),
        (
            "DROP PREPARE S1",
            &[Deallocate],
            &[Effect::Deallocate { name: b("s1") }],
        ),
        (
            "EXECUTE s1",
            &[Execute],
            &[Effect::ExecutePrepared { name: b("s1") }],
        ),
        (
            "EXECUTE IMMEDIATE 'SET @x = 1'",
            &[ExecuteImmediate],
            &[Effect::ExecuteImmediate],
        ),
        ("XA START 'x'", &[Xa], &[Effect::Xa]),
        ("XA COMMIT 'x' ONE PHASE", &[Xa], &[Effect::Xa]),
        ("KILL 5", &[Kill], &[kill(false, KillTarget::Id(5))]),
        (
            "KILL CONNECTION 5",
            &[Kill],
            &[kill(false, KillTarget::Id(5))],
        ),
        (
            "KILL HARD QUERY 7",
            &[Kill],
            &[kill(true, KillTarget::Id(7))],
        ),
        (
            "KILL SOFT QUERY ID 9",
            &[Kill],
            &[kill(true, KillTarget::QueryId(9))],
        ),
        ("KILL USER bob", &[Kill], &[kill(false, KillTarget::User)]),
        (
            "KILL QUERY USER 'bob'@'%'",
            &[Kill],
            &[kill(true, KillTarget::User)],
        ),
        ("KILL @x", &[Kill], &[kill(false, KillTarget::Expression)]),
        (
            "KILL 5 + 1",
            &[Kill],
            &[kill(false, KillTarget::Expression)],
        ),
        ("KILL 0x10", &[Kill], &[kill(false, KillTarget::Expression)]),
        (
            "KILL 11; SELECT 1",
            &[Kill, Select],
            &[kill(false, KillTarget::Id(11))],
        ),
        ("USE `my db`", &[Use], &[Effect::Use { schema: b("my db") }]),
        ("USE Test", &[Use], &[Effect::Use { schema: b("Test") }]),
    ];
    for (sql, kinds, effects) in cases {
        check(sql, D, kinds, effects);
    }
}

#[test]
fn set_forms() {
    use Scope::*;
    let cases: &[(&str, &[Effect])] = &[
        (
            "SET SESSION sql_mode = DEFAULT, wait_timeout = 5",
            &[
                sv("sql_mode", Session, true),
                sv("wait_timeout", Session, false),
            ],
        ),
        (
            "SET GLOBAL a = 1, b = 2, SESSION c = 3, @@d = 4",
            &[
                sv("a", Global, false),
                sv("b", Global, false),
                sv("c", Session, false),
                sv("d", Default, false),
            ],
        ),
        ("SET LOCAL X = 1", &[sv("x", Session, false)]),
        ("SET @@global.x = 1", &[sv("x", Global, false)]),
        ("SET @@local.x = 1", &[sv("x", Session, false)]),
        (
            "SET @@SESSION.Autocommit = 0",
            &[sv("autocommit", Session, false)],
        ),
        ("SET @@x = DEFAULT", &[sv("x", Default, true)]),
        ("SET @@x := 1", &[sv("x", Default, false)]),
        ("SET x = DEFAULT + 1", &[sv("x", Default, false)]),
        ("SET `sql_mode` = ''", &[sv("sql_mode", Default, false)]),
        ("SET sql_log_bin = 0", &[sv("sql_log_bin", Default, false)]),
        (
            "SET insert_id = 5, timestamp = 1",
            &[
                sv("insert_id", Default, false),
                sv("timestamp", Default, false),
            ],
        ),
        (
            "SET @@global.keycache1.key_buffer_size = 1",
            &[sv("keycache1.key_buffer_size", Global, false)],
        ),
        (
            "SET keycache1.key_buffer_size = 1",
            &[sv("keycache1.key_buffer_size", Default, false)],
        ),
        ("SET PERSIST x = 1", &[sv("x", Global, false)]),
        ("SET NAMES utf8mb4 COLLATE utf8mb4_bin", &[Effect::SetNames]),
        (
            "SET NAMES 'utf8', @x = 1",
            &[Effect::SetNames, uv("x", false)],
        ),
        ("SET CHARACTER SET utf8", &[Effect::SetNames]),
        ("SET CHARSET latin1", &[Effect::SetNames]),
        ("SET PASSWORD = PASSWORD('x')", &[Effect::SetOther]),
        ("SET PASSWORD FOR u@h = 'x'", &[Effect::SetOther]),
        ("SET ROLE r", &[Effect::SetOther]),
        ("SET DEFAULT ROLE r FOR u", &[Effect::SetOther]),
        (
            "SET TRANSACTION ISOLATION LEVEL READ COMMITTED",
            &[Effect::SetTransaction { scope: Default }],
        ),
        (
            "SET SESSION TRANSACTION READ ONLY",
            &[Effect::SetTransaction { scope: Session }],
        ),
        (
            "SET GLOBAL TRANSACTION ISOLATION LEVEL SERIALIZABLE",
            &[Effect::SetTransaction { scope: Global }],
        ),
        (
            "SET @@session.transaction_isolation = 'READ-COMMITTED'",
            &[sv("transaction_isolation", Session, false)],
        ),
        (
            "SET STATEMENT max_statement_time=1 FOR SELECT @a:=1",
            &[Effect::SetStatement, uv("a", false)],
        ),
        (
            "SET STATEMENT sql_mode='', foreign_key_checks=0 FOR SET @@session.x = 1",
            &[Effect::SetStatement, sv("x", Session, false)],
        ),
        (
            "SET STATEMENT max_statement_time=(SELECT 1) FOR \
             CREATE TEMPORARY TABLE t (a int)",
            &[
                Effect::SetStatement,
                Effect::TempTableCreate {
                    schema: None,
                    name: b("t"),
                },
            ],
        ),
        ("SET 1", &[Effect::SetOther]),
    ];
    for (sql, effects) in cases {
        check(sql, D, &[Set], effects);
    }
}

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
    // Stored or explained statements report nothing.
    for sql in [
        "CREATE VIEW v AS SELECT GET_LOCK('a', 0), CONNECTION_ID()",
        "EXPLAIN SELECT RELEASE_LOCK('a')",
        "DESCRIBE SELECT @a := 1",
        "CREATE EVENT e ON SCHEDULE EVERY 1 DAY DO SELECT GET_LOCK('a', 0)",
    ] {
        let a = run(sql, D);
        assert!(a.statements[0].effects.is_empty(), "{sql}");
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
