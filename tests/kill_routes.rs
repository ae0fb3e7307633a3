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

mod common;

use std::time::{Duration, Instant};

use common::{MariaDb, Proxy};
use mysql_async::prelude::*;
use mysql_async::{Conn, Error, Opts, OptsBuilder};

const MIB: usize = 1024 * 1024;

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
    let p = Proxy::builder(db).groups(1).max_backend(6).start().await;
    let mut a = conn(&p).await;
    a.query_drop("DROP PROCEDURE IF EXISTS kr_p")
        .await
        .expect("drop");
    a.query_drop("DROP PROCEDURE IF EXISTS kr_q")
        .await
        .expect("drop");

    // Each route: the statements the attacker sends (with {tid} for the
    // victim's server thread id) and the error code each must get (None:
    // any). A KILL the proxy can read is carried out with the number taken
    // as a myplex id (1094: no such session; server thread ids are larger
    // than the few myplex ids of this test); the rest is refused (1235).
    let routes: &[(&str, &[Step])] = &[
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
        // A procedure that runs its argument: created (its text holds no
        // KILL), but a CALL passing a KILL is refused.
        (
            "procedure_with_dynamic_sql",
            &[
                (
                    "CREATE PROCEDURE kr_q(q TEXT) BEGIN PREPARE s FROM q; EXECUTE s; END",
                    Some(0),
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
    // A query in sjis without those words is not affected.
    let one: Option<i64> = s
        .query_first(&b"SELECT 1 -- \x83\x5c"[..])
        .await
        .expect("sjis");
    assert_eq!(one, Some(1));
    drop(s);

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
    let v: Option<i64> = a
        .query_first(
            "BEGIN NOT ATOMIC DECLARE q TEXT DEFAULT 'SELECT 5'; \
             SET @q2 = REPLACE(q, '5', '6'); PREPARE s FROM @q2; EXECUTE s; END",
        )
        .await
        .expect("dynamic SQL in a compound statement");
    assert_eq!(v, Some(6));
    a.query_drop(
        "CREATE PROCEDURE kr_p(q TEXT) BEGIN PREPARE s FROM q; EXECUTE s; \
         DEALLOCATE PREPARE s; END",
    )
    .await
    .expect("procedure with dynamic SQL");
    let v: Option<i64> = a.query_first("CALL kr_p('SELECT 8')").await.expect("call");
    assert_eq!(v, Some(8));
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
