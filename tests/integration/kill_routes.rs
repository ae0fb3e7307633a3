//! No route lets a client end another client's statement with a server
//! thread id (issue 16, B.8): all pooled backends of a credential pool log
//! in as one account, so a KILL that reaches the server with a raw thread
//! id would interrupt whichever client that backend serves. Each route
//! below is tried against a real victim — a statement of another client
//! running on a pooled backend, whose server thread id the attacker reads
//! from the process list — and the victim's statement must run to its end;
//! the route is refused with ER_NOT_SUPPORTED_YET (1235). Ordinary dynamic
//! SQL and stored code still work. And the route that must work does under
//! load: a client's KILL of its own target gets a backend ahead of queued
//! statements.

use crate::common;

use std::time::{Duration, Instant};

use common::mariadb::{APP_PASSWORD, APP_USER};
use common::{MariaDb, Proxy};
use myplex::config::{Config, UserConfig};
use mysql_async::prelude::*;
use mysql_async::{Conn, Error, Opts, OptsBuilder};

const MIB: usize = 1024 * 1024;

/// A second proxy user whose backends log in as `app` too: `app`'s pooled
/// backends then serve clients of two accounts, which is when a KILL with
/// a server thread id could reach another account's client (with one
/// account per credential pool it reaches only threads that account may
/// end directly as well, and what myplex cannot plan is let through).
fn shared_account(c: &mut Config) {
    c.users.push(UserConfig {
        name: "kr_tenant".into(),
        password: Some("kr_tenant_pw".into()),
        backend_user: Some(APP_USER.into()),
        backend_password: Some(APP_PASSWORD.into()),
        ..Default::default()
    });
}

/// A statement of a route and the error code it must get (None: any).
type Step = (&'static str, Option<u16>);

async fn conn(p: &Proxy) -> Conn {
    let opts = OptsBuilder::from_opts(Opts::from_url(&p.app_url()).expect("url"))
        .max_allowed_packet(Some(64 * MIB));
    Conn::new(opts).await.expect("connect via proxy")
}

/// Error code of a query (0 = it succeeded).
async fn code(c: &mut Conn, q: impl AsQuery) -> u16 {
    match c.query_drop(q).await {
        Ok(()) => 0,
        Err(Error::Server(e)) => e.code,
        Err(e) => panic!("not a server error: {e}"),
    }
}

/// Starts `SELECT SLEEP(3) AS <tag>` on a fresh client, waits until it runs
/// and returns its server thread id and the running statement.
async fn victim(
    p: &Proxy,
    watcher: &mut Conn,
    tag: &str,
) -> (u64, tokio::task::JoinHandle<Result<Option<i64>, Error>>) {
    let mut v = conn(p).await;
    let q = format!("SELECT SLEEP(3) AS {tag}");
    let run = {
        let q = q.clone();
        tokio::spawn(async move { v.query_first::<i64, _>(q).await })
    };
    let find = format!("SELECT ID FROM information_schema.PROCESSLIST WHERE INFO = '{q}'");
    for _ in 0..200 {
        if let Some(id) = watcher.query_first::<u64, _>(&find).await.expect("plist") {
            return (id, run);
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    panic!("{q} never ran");
}

/// The victim's statement ran to its end: SLEEP gives 0 (1 or error 1317
/// when it was interrupted).
async fn ran_to_its_end(route: &str, run: tokio::task::JoinHandle<Result<Option<i64>, Error>>) {
    let r = run.await.expect("join");
    assert!(
        matches!(r, Ok(Some(0))),
        "{route}: the other client's statement was interrupted ({r:?})"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_route_kills_another_clients_backend_thread() {
    let db = MariaDb::shared_fast();
    // Server thread ids above every myplex id this test hands out (one
    // per connection), so that a KILL read as a myplex id names no session.
    for _ in 0..100 {
        let c = Conn::from_url(db.url(APP_USER, APP_PASSWORD, "test"))
            .await
            .expect("direct");
        c.disconnect().await.expect("disconnect");
    }
    let p = Proxy::builder(db)
        .groups(1)
        .max_backend(6)
        .with(shared_account)
        .start()
        .await;
    let mut a = conn(&p).await;
    a.query_drop("DROP PROCEDURE IF EXISTS kr_p")
        .await
        .expect("drop");
    for q in [
        "DROP PROCEDURE IF EXISTS kr_v",
        "DROP PROCEDURE IF EXISTS kr_q",
        "DROP PROCEDURE IF EXISTS kr_b",
        "DROP PROCEDURE IF EXISTS kr_l",
    ] {
        a.query_drop(q).await.expect("drop");
    }

    // Each route: the statements the attacker sends (with {tid} for the
    // victim's server thread id) and the error code each must get (None:
    // any). A KILL the proxy can read is carried out with the number taken
    // as a myplex id (1094: no such session; server thread ids are larger
    // than the few myplex ids of this test); the rest is refused (1235).
    let routes: &[(&str, &[Step])] = &[
        // A version comment's digits glued to the word.
        (
            "version_comment_kill",
            &[("/*!50000KILL*/ QUERY {tid}", None)],
        ),
        (
            "mariadb_comment_kill",
            &[("/*M!100000KILL*/ QUERY {tid}", None)],
        ),
        // A float's exponent glued to the word: the server reads `1146e0`.
        (
            "exponent_kill",
            &[(
                "BEGIN NOT ATOMIC DECLARE EXIT HANDLER FOR 1146e0KILL {tid}; \
                 SELECT * FROM mysql.no_such_table; END",
                None,
            )],
        ),
        (
            "version_comment_prepare",
            &[
                ("SET @s = CONCAT('KI', 'LL QUERY ', {tid})", Some(0)),
                ("/*!50000PREPARE*/ s FROM @s", None),
                ("EXECUTE s", None),
            ],
        ),
        (
            "version_comment_procedure",
            &[
                ("CREATE PROCEDURE kr_v(x INT) /*!50000KILL*/ QUERY x", None),
                ("CALL kr_v({tid})", None),
            ],
        ),
        (
            "prepare_from_variable",
            &[
                ("SET @q = 'KILL QUERY {tid}'", Some(0)),
                ("PREPARE s FROM @q", Some(0)),
                ("EXECUTE s", Some(1094)),
            ],
        ),
        (
            "execute_immediate_variable",
            &[
                ("SET @q = 'KILL QUERY {tid}'", Some(0)),
                ("EXECUTE IMMEDIATE @q", Some(1235)),
            ],
        ),
        (
            "prepare_from_expression",
            &[
                ("PREPARE s FROM CONCAT('KILL QUERY ', {tid})", Some(0)),
                ("EXECUTE s", Some(1094)),
            ],
        ),
        (
            "prepare_from_adjacent_literals",
            &[
                ("PREPARE s FROM 'KILL QUERY ' '{tid}'", Some(0)),
                ("EXECUTE s", Some(1094)),
            ],
        ),
        (
            "prepare_from_side_effects",
            &[
                (
                    "PREPARE s FROM IF(RAND() < 2, 'KILL QUERY {tid}', 'DO 0')",
                    Some(1235),
                ),
                ("EXECUTE s", None),
            ],
        ),
        (
            "procedure_body",
            &[
                ("CREATE PROCEDURE kr_p() KILL QUERY {tid}", Some(1235)),
                ("CALL kr_p()", None),
            ],
        ),
        // A procedure that runs its argument: not created for an account
        // that serves other users' clients; a CALL passing a KILL is
        // refused whatever the procedure.
        (
            "procedure_with_dynamic_sql",
            &[
                (
                    "CREATE PROCEDURE kr_q(q TEXT) BEGIN PREPARE s FROM q; EXECUTE s; END",
                    Some(1235),
                ),
                ("CALL kr_q('KILL QUERY {tid}')", Some(1235)),
            ],
        ),
        (
            "compound_with_dynamic_sql",
            &[(
                "BEGIN NOT ATOMIC DECLARE q TEXT DEFAULT 'KILL QUERY {tid}'; \
                 PREPARE s FROM q; EXECUTE s; END",
                Some(1235),
            )],
        ),
        (
            "execute_immediate_system_variable",
            &[(
                "EXECUTE IMMEDIATE CONCAT(SFORMAT('KILL QUERY {}', {tid}), \
                 REPEAT(' ', @@auto_increment_increment))",
                Some(1235),
            )],
        ),
        (
            "compound_statement",
            &[("BEGIN NOT ATOMIC KILL QUERY {tid}; END", Some(1235))],
        ),
        // Text assembled at run time from pieces that do not spell KILL:
        // refused in stored code (see the next test for procedures created
        // on the server), compound statements, multi-statements and
        // events, a version comment hiding what is created included.
        (
            "procedure_building_kill_at_run_time",
            &[(
                "CREATE PROCEDURE kr_b(n BIGINT) BEGIN \
                 SET @s = CONCAT('KI', 'LL QUERY ', n); PREPARE s FROM @s; EXECUTE s; END",
                Some(1235),
            )],
        ),
        (
            "event_hidden_behind_a_version_comment",
            &[(
                "CREATE /*!50700 PROCEDURE */ EVENT kr_e2 ON SCHEDULE AT CURRENT_TIMESTAMP \
                 DO EXECUTE IMMEDIATE CONCAT('KI', 'LL QUERY ', {tid})",
                Some(1235),
            )],
        ),
        (
            "multi_statement_built_at_run_time",
            &[(
                "SET @q = CONCAT('KI', 'LL QUERY ', {tid}); PREPARE s FROM @q; EXECUTE s",
                Some(1235),
            )],
        ),
        (
            "compound_built_at_run_time",
            &[(
                "BEGIN NOT ATOMIC DECLARE q TEXT DEFAULT CONCAT('KI', 'LL QUERY ', {tid}); \
                 PREPARE s FROM q; EXECUTE s; END",
                Some(1235),
            )],
        ),
        (
            "event_built_at_run_time",
            &[(
                "CREATE EVENT kr_e ON SCHEDULE AT CURRENT_TIMESTAMP \
                 DO EXECUTE IMMEDIATE CONCAT('KI', 'LL QUERY ', {tid})",
                Some(1235),
            )],
        ),
    ];
    for (i, (route, steps)) in routes.iter().enumerate() {
        let (tid, run) = victim(&p, &mut a, &format!("v{i}")).await;
        for (q, want) in *steps {
            let q = q.replace("{tid}", &tid.to_string());
            let c = code(&mut a, q.as_str()).await;
            if let Some(want) = want {
                assert_eq!(c, *want, "{route}: {q}");
            }
        }
        ran_to_its_end(route, run).await;
    }

    // sjis: 0x83 0x5C is one character to the server, a backslash that
    // escapes the quote to a naive lexer, which then reads the KILL as part
    // of a string.
    let (tid, run) = victim(&p, &mut a, "v_sjis").await;
    let mut s = conn(&p).await;
    s.query_drop("SET NAMES sjis").await.expect("sjis");
    let mut q = b"SELECT '\x83\x5c'; KILL QUERY ".to_vec();
    q.extend_from_slice(tid.to_string().as_bytes());
    q.extend_from_slice(b"; -- '");
    assert_eq!(code(&mut s, q.as_slice()).await, 1235, "sjis route");
    ran_to_its_end("sjis", run).await;
    // latin1: 0xA0 is a space to the server, not part of a name.
    let (tid, run) = victim(&p, &mut a, "v_latin1").await;
    let mut l = conn(&p).await;
    l.query_drop("SET NAMES latin1").await.expect("latin1");
    let mut q = b"\xa0KILL QUERY ".to_vec();
    q.extend_from_slice(tid.to_string().as_bytes());
    let _ = code(&mut l, q.as_slice()).await;
    ran_to_its_end("latin1 0xA0", run).await;
    drop(l);
    // A query in sjis without those words is not affected.
    let one: Option<i64> = s
        .query_first(&b"SELECT 1 -- \x83\x5c"[..])
        .await
        .expect("sjis");
    assert_eq!(one, Some(1));
    drop(s);

    // A change of sql_mode is seen however it is spelt (the server joins
    // `@@session . sql_mode` across spaces and comments): after it the
    // server takes the backslash as a plain byte, closes the string early
    // and runs the KILL a reading with the old mode finds inside it.
    let hidden = |set: &str| {
        format!(
            "{set} = CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES'); \
             SELECT 'a\\'; KILL QUERY {{tid}}; -- '"
        )
    };
    // And so is what may change it, or the client character set, for the
    // rest of the query or for the dynamic SQL of the same statement: the
    // KILL is then refused, not read as the session's settings would read
    // it (a myplex id: 1094).
    let changes = [
        hidden("SET @@session . sql_mode"),
        hidden("SET @@local /* c */ . sql_mode"),
        hidden("SET @@session.`sql_mode`"),
        hidden("SET @a = 1, @@session\n.sql_mode"),
        "BEGIN NOT ATOMIC BEGIN DECLARE character_set_client INT; END; \
         SET character_set_client = gbk; END; SET NAMES utf8mb4; KILL QUERY {tid}"
            .to_string(),
        // The dynamic text is read by the server with the mode set just
        // before it: `'a\'` ends there and the KILL runs.
        "BEGIN NOT ATOMIC SET sql_mode = 'NO_BACKSLASH_ESCAPES'; \
         EXECUTE IMMEDIATE 'BEGIN NOT ATOMIC SELECT ''a\\''; KILL QUERY {tid}; SELECT 1 -- ''\n; END'; END"
            .to_string(),
        "SET STATEMENT sql_mode = 'NO_BACKSLASH_ESCAPES' FOR EXECUTE IMMEDIATE \
         'BEGIN NOT ATOMIC SELECT ''a\\''; KILL QUERY {tid}; SELECT 1 -- ''\n; END'"
            .to_string(),
    ];
    for (i, q) in changes.iter().enumerate() {
        let (tid, run) = victim(&p, &mut a, &format!("v_mode{i}")).await;
        let mut m = conn(&p).await;
        let q = q.replace("{tid}", &tid.to_string());
        assert_eq!(code(&mut m, q.as_str()).await, 1235, "{q}");
        ran_to_its_end(&q, run).await;
    }
    // Under sql_mode=ORACLE (`BEGIN … END` blocks the reader does not
    // follow) no KILL is planned from the text.
    let (tid, run) = victim(&p, &mut a, "v_oracle").await;
    let mut o = conn(&p).await;
    o.query_drop("SET sql_mode = ORACLE").await.expect("oracle");
    let q = format!("KILL QUERY {tid}");
    assert_eq!(code(&mut o, q.as_str()).await, 1235, "oracle");
    ran_to_its_end("oracle", run).await;
    drop(o);

    // The tail of a query of 16 MiB or more: only its first 64 KiB are
    // planned before it is forwarded.
    let (tid, run) = victim(&p, &mut a, "v_large").await;
    let mut l = conn(&p).await;
    let mut q = String::from("SELECT 1 /*");
    q.push_str(&"x".repeat(17 * MIB));
    q.push_str(&format!("*/; KILL QUERY {tid}"));
    assert_eq!(code(&mut l, q.as_str()).await, 1235, "large tail");
    ran_to_its_end("large tail", run).await;
    // A large query with the word only inside a string goes through.
    let mut q = String::from("SELECT LENGTH('");
    q.push_str(&"y".repeat(17 * MIB));
    q.push_str("; KILL QUERY 1') AS n");
    let n: Option<u64> = l.query_first(q.as_str()).await.expect("large query");
    assert_eq!(n, Some(17 * MIB as u64 + 14));
    drop(l);

    // Ordinary dynamic SQL and stored code still work.
    a.query_drop("SET @q = 'SELECT 41 + 1'").await.expect("set");
    a.query_drop("PREPARE s FROM @q")
        .await
        .expect("prepare from @q");
    let v: Option<i64> = a.query_first("EXECUTE s").await.expect("execute");
    assert_eq!(v, Some(42));
    let v: Option<i64> = a
        .query_first("EXECUTE IMMEDIATE CONCAT('SELECT ', 7)")
        .await
        .expect("execute immediate");
    assert_eq!(v, Some(7));
    a.query_drop("CREATE PROCEDURE kr_p() SELECT 'no kill here'")
        .await
        .expect("create procedure");
    a.query_drop("CALL kr_p()").await.expect("call");
    a.query_drop("DROP PROCEDURE kr_p").await.expect("drop");
    // As MariaDB's own tests run it: text from system variables and pure
    // functions at top level, dynamic SQL in compound statements and in
    // procedures (the text exists only at run time).
    let v: Option<String> = a
        .query_first("EXECUTE IMMEDIATE SFORMAT('SELECT ''{}''', @@collation_connection)")
        .await
        .expect("sformat of a system variable");
    let direct: Option<String> = a
        .query_first("SELECT @@collation_connection")
        .await
        .expect("collation");
    assert_eq!(v, direct);
    let v: Option<i64> = a
        .query_first("EXECUTE IMMEDIATE REPLACE('SELECT X', 'X', @@auto_increment_increment)")
        .await
        .expect("replace with a system variable");
    assert_eq!(v, Some(1));
    // Dynamic text in a compound statement or a procedure whose text is
    // a literal: read as any literal.
    let v: Option<i64> = a
        .query_first("BEGIN NOT ATOMIC PREPARE s FROM 'SELECT 5'; EXECUTE s; END")
        .await
        .expect("literal dynamic SQL in a compound statement");
    assert_eq!(v, Some(5));
    a.query_drop(
        "CREATE PROCEDURE kr_l() BEGIN PREPARE s FROM 'SELECT 9'; EXECUTE s; \
         DEALLOCATE PREPARE s; EXECUTE IMMEDIATE 'DO 1'; END",
    )
    .await
    .expect("procedure with literal dynamic SQL");
    let v: Option<i64> = a.query_first("CALL kr_l()").await.expect("call");
    assert_eq!(v, Some(9));
    // Text built at run time, harmless or not, is refused by default...
    const BUILT_COMPOUND: &str = "BEGIN NOT ATOMIC DECLARE q TEXT DEFAULT 'SELECT 5'; \
         SET @q2 = REPLACE(q, '5', '6'); PREPARE s FROM @q2; EXECUTE s; END";
    assert_eq!(code(&mut a, BUILT_COMPOUND).await, 1235);
    const DYNAMIC_PROCEDURE: &str = "CREATE OR REPLACE PROCEDURE kr_p(q TEXT) BEGIN \
         PREPARE s FROM q; EXECUTE s; DEALLOCATE PREPARE s; END";
    assert_eq!(code(&mut a, DYNAMIC_PROCEDURE).await, 1235);
    // ... and runs where the operator allows it, or where the account
    // serves only its own clients.
    let allowed = |c: &mut Config| {
        shared_account(c);
        c.pool.allow_unplannable_kill = true;
    };
    let unshared = |_: &mut Config| {};
    for (how, cfg) in [
        ("allowed", &allowed as &dyn Fn(&mut Config)),
        ("one account", &unshared),
    ] {
        let open = Proxy::builder(MariaDb::shared_fast())
            .groups(1)
            .max_backend(2)
            .with(cfg)
            .start()
            .await;
        let mut o = conn(&open).await;
        o.query_drop(DYNAMIC_PROCEDURE)
            .await
            .unwrap_or_else(|e| panic!("{how}: procedure with dynamic SQL: {e}"));
        let v: Option<i64> = o
            .query_first(BUILT_COMPOUND)
            .await
            .unwrap_or_else(|e| panic!("{how}: dynamic SQL built in a compound statement: {e}"));
        assert_eq!(v, Some(6), "{how}");
        let v: Option<i64> = o
            .query_first("CALL kr_p('SELECT 8')")
            .await
            .unwrap_or_else(|e| panic!("{how}: CALL: {e}"));
        assert_eq!(v, Some(8), "{how}");
        drop(o);
        drop(open);
    }
    a.query_drop("DROP PROCEDURE kr_p").await.expect("drop");
    // A KILL in a variable with a myplex id is carried out as typed.
    let mut target = conn(&p).await;
    a.query_drop(format!("SET @k = 'KILL {}'", target.id()))
        .await
        .expect("set");
    a.query_drop("PREPARE k FROM @k")
        .await
        .expect("prepare KILL from @k");
    a.query_drop("EXECUTE k").await.expect("execute KILL");
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(target.query_drop("SELECT 1").await.is_err(), "target alive");
}

/// Stored code created directly on the server (not through myplex, which
/// refuses a CREATE whose body holds KILL) that may KILL: a procedure, a
/// function, a trigger, and a view over such a function. Once the catalog
/// has read them, every statement that would run them is refused, and
/// the victim's statement runs to its end; code without KILL still runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_code_from_the_server_that_may_kill_is_refused() {
    // A server of its own: while such code exists anywhere on a server,
    // some statements of every shared account are refused (a query of
    // 16 MiB or more, non-ASCII text in sjis), which the other tests here
    // would meet.
    let server = MariaDb::start();
    let db = &server;
    let p = Proxy::builder(db)
        .groups(1)
        .max_backend(6)
        .with(|c| {
            shared_account(c);
            c.pool.code_catalog_refresh_ms = 200;
        })
        .start()
        .await;
    let since = p.catalog_readings();
    db.sql(
        "DROP DATABASE IF EXISTS krs;\n\
         CREATE DATABASE krs;\n\
         CREATE TABLE krs.t (id BIGINT) ENGINE=InnoDB;\n\
         CREATE TABLE krs.plain (id BIGINT) ENGINE=InnoDB;\n\
         CREATE PROCEDURE krs.p(n BIGINT) KILL QUERY n;\n\
         CREATE PROCEDURE krs.ke(n BIGINT) KILL QUERY n;\n\
         DELIMITER //\n\
         CREATE PROCEDURE krs.dynp(n BIGINT) BEGIN SET @s = CONCAT('KI', 'LL QUERY ', n); \
         PREPARE s FROM @s; EXECUTE s; END//\n\
         CREATE FUNCTION krs.f(n BIGINT) RETURNS INT DETERMINISTIC BEGIN KILL QUERY n; RETURN 1; END//\n\
         CREATE FUNCTION krs.g(n BIGINT) RETURNS INT DETERMINISTIC RETURN krs.f(n) + 1//\n\
         DELIMITER ;\n\
         CREATE TRIGGER krs.trg BEFORE INSERT ON krs.t FOR EACH ROW KILL QUERY NEW.id;\n\
         CREATE VIEW krs.v AS SELECT krs.g(0) AS x;\n\
         CREATE FUNCTION krs.ok(n BIGINT) RETURNS INT DETERMINISTIC RETURN n + 1;\n\
         CREATE PROCEDURE krs.okp() SELECT 'fine';\n",
    );
    p.catalog_learnt_since(since, Duration::from_secs(10)).await;
    let mut a = conn(&p).await;
    a.query_drop("USE krs").await.expect("use");
    let routes = [
        "CALL dynp({tid})",
        "EXECUTE IMMEDIATE 'CALL dynp({tid})'",
        "BEGIN NOT ATOMIC CALL dynp({tid}); END",
        "CREATE EVENT kr_ev ON SCHEDULE AT CURRENT_TIMESTAMP + INTERVAL 1 HOUR DO CALL dynp({tid})",
        "CALL p({tid})",
        "CALL krs.p({tid})",
        "SELECT f({tid})",
        "SELECT krs.g({tid})",
        "INSERT INTO t VALUES ({tid})",
        "SELECT * FROM v",
        "DO f({tid})",
        // The server finds routines accent-insensitively.
        "CALL kè({tid})",
        "SHOW VARIABLES WHERE Variable_name = 'x' OR f({tid}) = 2",
    ];
    for (i, q) in routes.iter().enumerate() {
        let (tid, run) = victim(&p, &mut a, &format!("s{i}")).await;
        let q = q.replace("{tid}", &tid.to_string());
        assert_eq!(code(&mut a, q.as_str()).await, 1235, "{q}");
        ran_to_its_end(q.as_str(), run).await;
    }
    // A text computed by the server, and the binary protocol.
    a.query_drop("SET @c = CONCAT('CALL dy', 'np(1)')")
        .await
        .expect("set");
    assert_eq!(code(&mut a, "PREPARE c FROM @c").await, 1235);
    match a.prep("CALL dynp(?)").await {
        Err(Error::Server(e)) => assert_eq!(e.code, 1235, "prepared CALL: {e:?}"),
        other => panic!("prepared CALL of a procedure that may KILL: {other:?}"),
    }
    // From another schema, the names qualified.
    a.query_drop("USE test").await.expect("use");
    assert_eq!(code(&mut a, "SELECT krs.f(1)").await, 1235);
    // Code that cannot KILL runs as direct.
    let v: Option<i64> = a.query_first("SELECT krs.ok(41)").await.expect("ok()");
    assert_eq!(v, Some(42));
    let v: Option<String> = a.query_first("CALL krs.okp()").await.expect("okp()");
    assert_eq!(v.as_deref(), Some("fine"));
    a.query_drop("INSERT INTO krs.plain VALUES (1)")
        .await
        .expect("plain insert");
    drop(a);
}

/// While the catalog is unknown because a DDL statement is out (here one
/// waiting on a metadata lock), a shared account's statements are judged
/// by the set read last: they are not held back (no lock-out), and a
/// function that may KILL is still refused. When the statement that is
/// out may itself make code reaching a KILL (a view over such a function,
/// by a user with a backend account of its own), that set no longer
/// judges: a shared account's statement that may run stored code waits
/// for a new reading and is refused without one, while one that runs none
/// goes on; once the DDL is answered and read, all go on as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn while_a_ddl_statement_is_out_the_last_catalog_judges_unless_it_may_make_killers() {
    use common::mariadb::{OTHER_PASSWORD, OTHER_USER, ROOT_PASSWORD};
    let server = MariaDb::start();
    let db = &server;
    let p = Proxy::builder(db)
        .groups(1)
        .max_backend(6)
        .queue_timeout_ms(20_000)
        .with(|c| {
            // `other` (in the fixture) logs in as its own account.
            shared_account(c);
            c.pool.code_catalog_refresh_ms = 200;
        })
        .start()
        .await;
    let since = p.catalog_readings();
    db.sql(
        "CREATE DATABASE krw;\n\
         CREATE TABLE krw.plain (id BIGINT) ENGINE=InnoDB;\n\
         DELIMITER //\n\
         CREATE FUNCTION krw.f(n BIGINT) RETURNS INT DETERMINISTIC BEGIN KILL QUERY n; RETURN 1; END//\n\
         DELIMITER ;\n\
         CREATE VIEW krw.v AS SELECT 1 AS x;\n\
         CREATE VIEW krw.vk AS SELECT 2 AS x;\n\
         CREATE PROCEDURE krw.noop() SELECT 1;\n",
    );
    // (A procedure's DDL makes the reading read the routines at once.)
    p.catalog_learnt_since(since, Duration::from_secs(10)).await;
    let mut root = Conn::from_url(db.url("root", ROOT_PASSWORD, "krw"))
        .await
        .expect("root");
    let mut a = conn(&p).await;
    a.query_drop("USE krw").await.expect("use");
    assert_eq!(code(&mut a, "SELECT f(0)").await, 1235, "a KILL function");
    // An ordinary DDL statement waits on a lock root holds.
    root.query_drop("BEGIN").await.expect("begin");
    root.query_drop("SELECT * FROM krw.v")
        .await
        .expect("lock v");
    let mut b = conn(&p).await;
    let ddl = tokio::spawn(async move {
        b.query_drop("CREATE OR REPLACE VIEW krw.v AS SELECT 3 AS x")
            .await
            .map(|_| b)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!ddl.is_finished(), "the view's DDL waits on root's lock");
    let t = Instant::now();
    assert_eq!(code(&mut a, "SELECT * FROM plain").await, 0, "held back");
    assert_eq!(code(&mut a, "SELECT DATABASE()").await, 0, "held back");
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert_eq!(code(&mut a, "SELECT f(0)").await, 1235, "a KILL function");
    root.query_drop("COMMIT").await.expect("commit");
    drop(ddl.await.expect("join").expect("CREATE VIEW"));
    // A view over the KILL function, by a user whose backends are its own
    // (allowed for it), while root holds the view's lock.
    root.query_drop("BEGIN").await.expect("begin");
    root.query_drop("SELECT * FROM krw.vk")
        .await
        .expect("lock vk");
    let mut o = Conn::from_url(p.url(OTHER_USER, OTHER_PASSWORD, "krw"))
        .await
        .expect("other");
    let ddl = tokio::spawn(async move {
        o.query_drop("CREATE OR REPLACE VIEW krw.vk AS SELECT krw.f(0) AS x")
            .await
            .map(|_| o)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!ddl.is_finished(), "the view's DDL waits on root's lock");
    assert_eq!(code(&mut a, "SELECT 1").await, 0, "runs no stored code");
    let t = Instant::now();
    assert_eq!(
        code(&mut a, "SELECT * FROM vk").await,
        1235,
        "judged by a set that does not know the new view"
    );
    assert!(
        t.elapsed() >= Duration::from_secs(2),
        "did not wait: {:?}",
        t.elapsed()
    );
    root.query_drop("COMMIT").await.expect("commit");
    drop(ddl.await.expect("join").expect("CREATE VIEW over f"));
    // Read again: the view is known to reach the KILL, plain tables run.
    let since = p.catalog_readings();
    p.catalog_learnt_since(since, Duration::from_secs(10)).await;
    assert_eq!(code(&mut a, "SELECT * FROM vk").await, 1235, "known now");
    assert_eq!(code(&mut a, "SELECT * FROM plain").await, 0);
    drop(a);
}

/// Under load a KILL gets the next backend that comes back, ahead of the
/// queued statements: two backends, one running the sleep to be killed,
/// the other handed from one short transaction to the next by clients
/// that keep leases queued. A helper that looked for an idle connection
/// never found one (each returning backend went to a queued lease at once)
/// and the KILL waited out its deadline while the sleep ran on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_gets_the_next_backend_ahead_of_queued_leases() {
    let db = MariaDb::shared();
    let p = Proxy::builder(db)
        .groups(1)
        .max_backend(2)
        .with(|c| {
            c.pool.inflight = myplex::config::InflightMode::Fixed;
            c.pool.oversubscribe = 1;
            c.pool.queue_timeout_ms = 60_000;
        })
        .start()
        .await;
    let mut killer = Conn::from_url(p.app_url()).await.expect("killer login");
    let mut sleeper = Conn::from_url(p.app_url()).await.expect("sleeper login");
    let id: u32 = sleeper
        .query_first("SELECT CONNECTION_ID()")
        .await
        .expect("id")
        .expect("row");
    let sleep =
        tokio::spawn(async move { common::load::sleep_until_killed(&mut sleeper, 30).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Eight clients keep the other backend busy with short transactions,
    // so that leases always wait for it.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut load = Vec::new();
    for _ in 0..8 {
        let mut c = Conn::from_url(p.app_url()).await.expect("login");
        let stop = stop.clone();
        load.push(tokio::spawn(async move {
            let mut n = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                c.query_drop("BEGIN").await.expect("begin");
                c.query_drop("DO SLEEP(0.02)").await.expect("sleep");
                c.query_drop("COMMIT").await.expect("commit");
                n += 1;
            }
            n
        }));
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let t0 = Instant::now();
    killer
        .query_drop(format!("KILL QUERY {id}"))
        .await
        .expect("kill");
    let answered = t0.elapsed();
    let (killed, took) = sleep.await.expect("sleeper");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut transactions = 0;
    for l in load {
        transactions += l.await.expect("load");
    }
    assert!(transactions > 10, "the load ran: {transactions}");
    assert!(killed, "the sleep was interrupted");
    assert!(
        took < Duration::from_secs(10) && answered < Duration::from_secs(5),
        "the KILL waited for a backend: answered after {answered:?}, the sleep took {took:?}"
    );
}
