//! Each effect, and the look-alikes that must not produce it.

use super::*;
use crate::sql::effects::Kind::*;
use crate::sql::*;

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

/// MariaDB runs a derived table and a constant subquery while it explains
/// a statement: EXPLAIN's effects are those of the statement it explains.
#[test]
fn explain_is_read_as_if_the_statement_ran() {
    for verb in [
        "EXPLAIN",
        "DESC",
        "DESCRIBE",
        "EXPLAIN FORMAT=JSON",
        "EXPLAIN EXTENDED",
    ] {
        check(
            &format!("{verb} SELECT * FROM (SELECT GET_LOCK('xl', 0) g, @xv := 5 u) d"),
            D,
            &[Other],
            &[get_lock(Some("xl")), uv("xv", false)],
        );
        check(
            &format!("{verb} SELECT (SELECT f_lock())"),
            D,
            &[Other],
            &[Effect::StoredFunction],
        );
    }
    check(
        "EXPLAIN SELECT * FROM (SELECT NEXTVAL(s1) n) d",
        D,
        &[Other],
        &[Effect::Sequence],
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
            &[
                uv("a", true),
                uv("b", false),
                uv("c", false),
                Effect::StoredFunction,
            ],
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
            &[Effect::Call, Effect::StoredFunction, uv("c", false)],
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

/// The held-lock check copies GET_LOCK's argument as the client wrote it.
#[test]
fn lock_literals() {
    let nbe = LexOptions {
        no_backslash_escapes: true,
        ..D
    };
    for (sql, opts, literal) in [
        ("SELECT GET_LOCK('a', 10)", D, Some("'a'")),
        ("SELECT GET_LOCK(_latin1'n', 0)", D, Some("_latin1'n'")),
        (
            "SELECT GET_LOCK(_latin1 /* c */ 'n', 0)",
            D,
            Some("_latin1 /* c */ 'n'"),
        ),
        ("SELECT GET_LOCK(N'n', 0)", D, Some("N'n'")),
        ("SELECT GET_LOCK('It''s', 0)", D, Some("'It''s'")),
        (r"SELECT GET_LOCK('a\\b\'c', 0)", D, Some(r"'a\\b\'c'")),
        (r"SELECT GET_LOCK('a\b', 0)", nbe, Some(r"'a\b'")),
        ("SELECT GET_LOCK(\"q\", 0)", D, Some("\"q\"")),
        ("SELECT GET_LOCK(CONCAT('a','b'), 0)", D, None),
    ] {
        let a = run(sql, opts);
        let got: Vec<_> = a
            .statements
            .iter()
            .flat_map(|s| s.effects.iter())
            .filter_map(|e| match e {
                Effect::GetLock { literal, .. } => Some(literal.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(got, vec![literal.map(b)], "{sql}");
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
        // SELECT's own modifier is followed by an expression, not a name.
        (
            "SELECT HIGH_PRIORITY GET_LOCK('h', 0)",
            &[get_lock(Some("h"))],
        ),
        (
            "SELECT HIGH_PRIORITY SQL_NO_CACHE GET_LOCK('h2', 0)",
            &[get_lock(Some("h2"))],
        ),
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
        ("INSERT IGNORE get_lock(a) VALUES (1)", &[]),
        ("INSERT LOW_PRIORITY IGNORE get_lock(a) VALUES (1)", &[]),
        ("REPLACE DELAYED get_lock(a) VALUES (1)", &[]),
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
        let got: Vec<Effect> = a.statements[0]
            .effects
            .iter()
            .cloned()
            .map(super::comparable)
            .collect();
        assert_eq!(got, *effects, "{sql}");
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
            "PREPARE S1 FROM 'SELECT GET_LOCK(''a'', 0)'",
            &[Prepare],
            &[
                Effect::TextPrepare { name: b("s1") },
                Effect::DynamicSql {
                    text: b("SELECT GET_LOCK('a', 0)"),
                },
            ],
        ),
        (
            "PREPARE k FROM _utf8mb4 'KILL 5'",
            &[Prepare],
            &[
                Effect::TextPrepare { name: b("k") },
                Effect::DynamicSql { text: b("KILL 5") },
            ],
        ),
        // The server converts the text from the introducer's character set
        // first: gbk, sjis, utf16 … may read it otherwise (opaque).
        (
            "PREPARE k FROM _gbk 'KILL 5'",
            &[Prepare],
            &[Effect::TextPrepare { name: b("k") }],
        ),
        (
            "EXECUTE IMMEDIATE _utf16 'SELECT 1'",
            &[ExecuteImmediate],
            &[Effect::ExecuteImmediate],
        ),
        (
            "PREPARE k FROM CONCAT('KILL ', 5)",
            &[Prepare],
            &[Effect::TextPrepare { name: b("k") }],
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
            "EXECUTE IMMEDIATE 'SET @x = ?' USING 1",
            &[ExecuteImmediate],
            &[
                Effect::ExecuteImmediate,
                Effect::DynamicSql {
                    text: b("SET @x = ?"),
                },
            ],
        ),
        (
            "EXECUTE IMMEDIATE @q",
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
            "KILL QUERY ID @id",
            &[Kill],
            &[kill(true, KillTarget::QueryIdExpression)],
        ),
        (
            "KILL QUERY ID USER 'foo'",
            &[Kill],
            &[kill(true, KillTarget::QueryIdExpression)],
        ),
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
                Effect::Relexes,
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
                sv("d", Unscoped, false),
            ],
        ),
        // Checked on MariaDB 10.11: `@@b` is the session's, `c` is global again.
        (
            "SET GLOBAL a = 1, @@b = 2, c = 3",
            &[
                sv("a", Global, false),
                sv("b", Unscoped, false),
                sv("c", Global, false),
            ],
        ),
        ("SET LOCAL X = 1", &[sv("x", Session, false)]),
        ("SET @@global.x = 1", &[sv("x", Global, false)]),
        ("SET @@local.x = 1", &[sv("x", Session, false)]),
        (
            "SET @@SESSION.Autocommit = 0",
            &[sv("autocommit", Session, false)],
        ),
        ("SET @@x = DEFAULT", &[sv("x", Unscoped, true)]),
        ("SET @@x := 1", &[sv("x", Unscoped, false)]),
        ("SET x = DEFAULT + 1", &[sv("x", Default, false)]),
        (
            "SET `sql_mode` = ''",
            &[Effect::Relexes, sv("sql_mode", Default, false)],
        ),
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
        (
            "SET NAMES utf8mb4 COLLATE utf8mb4_bin",
            &[Effect::SetNames { names: true }],
        ),
        (
            "SET NAMES gbk",
            &[Effect::SetNames { names: true }, Effect::Relexes],
        ),
        (
            "SET @@session . character_set_client = sjis",
            &[Effect::Relexes, sv("character_set_client", Session, false)],
        ),
        (
            "SET NAMES 'utf8', @x = 1",
            &[Effect::SetNames { names: true }, uv("x", false)],
        ),
        (
            "SET CHARACTER SET utf8",
            &[Effect::SetNames { names: false }],
        ),
        ("SET CHARSET latin1", &[Effect::SetNames { names: false }]),
        (
            "SET @@session . sql_mode = '', @@GLOBAL /* c */ .max_connections = 5",
            &[
                Effect::Relexes,
                sv("sql_mode", Session, false),
                sv("max_connections", Global, false),
            ],
        ),
        (
            "SET @@local.`sql_mode` = DEFAULT",
            &[Effect::Relexes, sv("sql_mode", Session, true)],
        ),
        ("SET PASSWORD = PASSWORD('x')", &[Effect::SetOther]),
        ("SET PASSWORD FOR u@h = 'x'", &[Effect::SetOther]),
        ("SET ROLE r", &[Effect::SetRole]),
        ("SET ROLE NONE", &[Effect::SetRole]),
        ("SET DEFAULT ROLE r FOR u", &[Effect::SetDefaultRole]),
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
            &[
                Effect::SetStatement {
                    vars: Some(vec![b("max_statement_time")]),
                },
                uv("a", false),
            ],
        ),
        (
            "SET STATEMENT sql_mode='', foreign_key_checks=0 FOR SET @@session.x = 1",
            &[
                Effect::SetStatement {
                    vars: Some(vec![b("sql_mode"), b("foreign_key_checks")]),
                },
                sv("x", Session, false),
            ],
        ),
        (
            "SET STATEMENT max_statement_time=(SELECT 1) FOR \
             CREATE TEMPORARY TABLE t (a int)",
            &[
                Effect::SetStatement {
                    vars: Some(vec![b("max_statement_time")]),
                },
                Effect::TempTableCreate {
                    schema: None,
                    name: b("t"),
                },
            ],
        ),
        (
            "SET STATEMENT @@session.sql_mode = CONCAT(@@sql_mode, ',ANSI'), `time_zone`='+01:00' \
             FOR SELECT 1",
            &[Effect::SetStatement {
                vars: Some(vec![b("sql_mode"), b("time_zone")]),
            }],
        ),
        (
            "SET STATEMENT @@global.sql_mode = '' FOR SELECT 1",
            &[Effect::SetStatement { vars: None }],
        ),
        (
            "SET STATEMENT 1 FOR SELECT 1",
            &[Effect::SetStatement { vars: None }],
        ),
        ("SET 1", &[Effect::SetOther]),
    ];
    for (sql, effects) in cases {
        check(sql, D, &[Set], effects);
    }
}

#[test]
fn global_assignments_are_seen() {
    let global = |sql: &str| crate::session_state::authority::sets_globals(&run(sql, D));
    for sql in [
        "SET GLOBAL autocommit = 0",
        "set global sql_mode='ANSI'",
        "SET @@global.max_connections = 10",
        "SET @@GLOBAL.wait_timeout = 5, SESSION x = 1",
        "SET PERSIST max_connections = 10",
        "SET GLOBAL TRANSACTION ISOLATION LEVEL READ COMMITTED",
        "/* maintenance */ SeT gLoBaL x = 1",
        "SELECT 1; SET GLOBAL x = 1",
    ] {
        assert!(global(sql), "analyze: {sql}");
    }
    for sql in [
        "SELECT 1",
        "SET SESSION autocommit = 0",
        "SET @@session.sql_mode = ''",
        "UPDATE t SET a = 1",
    ] {
        assert!(!global(sql), "analyze: {sql}");
    }
}
