//! The rest of the command set through the proxy: KILL [QUERY|CONNECTION]
//! by proxy connection id, COM_CHANGE_USER with re-authentication,
//! COM_RESET_CONNECTION, COM_STATISTICS and COM_PING via mariadb-admin.

use crate::common;

use std::process::Command;
use std::time::{Duration, Instant};

use common::mariadb::{OTHER_PASSWORD, OTHER_USER};
use common::{MariaDb, Proxy, mariadb_bin};
use mysql_async::prelude::*;
use mysql_async::{ChangeUserOpts, Conn, Error};

async fn conn(p: &Proxy) -> Conn {
    Conn::from_url(p.app_url())
        .await
        .expect("connect via proxy")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_query_interrupts_the_right_backend_thread() {
    let db = MariaDb::shared();
    let p = Proxy::builder(db).groups(1).max_backend(3).start().await;
    let mut victim = conn(&p).await;
    let mut killer = conn(&p).await;
    let victim_id = victim.id();
    let sleeper = tokio::spawn(async move {
        let started = Instant::now();
        let r: Result<Option<i64>, Error> = victim.query_first("SELECT SLEEP(20)").await;
        (r, started.elapsed(), victim)
    });
    tokio::time::sleep(Duration::from_millis(500)).await;
    killer
        .query_drop(format!("KILL QUERY {victim_id}"))
        .await
        .expect("kill query");
    let (r, took, mut victim) = sleeper.await.expect("join");
    assert!(
        took < Duration::from_secs(10),
        "query was interrupted ({took:?})"
    );
    // MariaDB answers an interrupted SLEEP with 1 (or error 1317).
    match r {
        Ok(v) => assert_eq!(v, Some(1)),
        Err(Error::Server(e)) => assert_eq!(e.code, 1317),
        Err(e) => panic!("unexpected {e:?}"),
    }
    let alive: Option<i64> = victim
        .query_first("SELECT 5")
        .await
        .expect("victim still connected");
    assert_eq!(alive, Some(5));
    match killer.query_drop("KILL 999999").await {
        Err(Error::Server(e)) => assert_eq!(e.code, 1094),
        other => panic!("expected unknown thread, got {other:?}"),
    }
}

/// A KILL QUERY ends the statement the target runs when it comes, never the
/// target's next one: the victim starts its next statement the moment the
/// killed one answers, many times over (a KILL sent late, by query id or by
/// thread, would end that next statement, as MariaDB's `main.kill` once saw
/// through the proxy).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_query_never_reaches_the_next_statement() {
    let db = MariaDb::shared();
    let p = Proxy::builder(db).groups(1).max_backend(4).start().await;
    let mut root = Conn::from_url(db.url("root", common::mariadb::ROOT_PASSWORD, "test"))
        .await
        .expect("direct root");
    let mut killer = conn(&p).await;
    let mut victim = conn(&p).await;
    let victim_id = victim.id();
    // A marker no other test's statement carries.
    let marker = format!("SELECT SLEEP(30) AS kill_round_{victim_id}");
    for round in 0..25 {
        let sql = marker.clone();
        let run = tokio::spawn(async move {
            let first: Result<Option<i64>, Error> = victim.query_first(&sql).await;
            let next: Result<Option<i64>, Error> = victim.query_first("SELECT SLEEP(0.05)").await;
            (first, next, victim)
        });
        // The sleep is running on the server before the KILL is sent.
        let seen =
            format!("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO = '{marker}'");
        let deadline = Instant::now() + Duration::from_secs(10);
        while root.query_first::<i64, _>(&seen).await.expect("poll") != Some(1) {
            assert!(Instant::now() < deadline, "round {round}: sleep never ran");
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        killer
            .query_drop(format!("KILL QUERY {victim_id}"))
            .await
            .expect("kill query");
        let (first, next, v) = run.await.expect("join");
        victim = v;
        match first {
            Ok(v) => assert_eq!(v, Some(1), "round {round}: the sleep was interrupted"),
            Err(Error::Server(e)) => assert_eq!(e.code, 1317, "round {round}"),
            Err(e) => panic!("round {round}: unexpected {e:?}"),
        }
        assert_eq!(
            next.expect("the next statement runs"),
            Some(0),
            "round {round}: the statement after the killed one ran to its end"
        );
    }
}

/// Panics with `what` when proxy session `id` still runs.
fn assert_session_ended(p: &Proxy, id: u32, what: &str) {
    assert!(
        !p.shared
            .sessions
            .lock()
            .expect("sessions")
            .contains_key(&id),
        "{what}"
    );
}

/// Error code of a query (0 = it succeeded).
async fn code(c: &mut Conn, q: &str) -> u16 {
    match c.query_drop(q).await {
        Ok(()) => 0,
        Err(Error::Server(e)) => e.code,
        Err(e) => panic!("{q}: not a server error: {e}"),
    }
}

/// A prepared KILL with a `?` takes the value bound to it, as direct: a
/// text `EXECUTE … USING` (a variable, a string) and the binary protocol
/// (the parameter described as the server describes it); a wrong number
/// of values is the server's 1210 through myplex and direct alike.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prepared_kill_takes_the_value_bound_to_its_placeholder() {
    let db = MariaDb::shared();
    let p = Proxy::builder(db).groups(1).max_backend(4).start().await;
    let mut killer = conn(&p).await;
    let mut direct = Conn::from_url(db.url("app", "secret", "test"))
        .await
        .expect("direct");
    for c in [&mut killer, &mut direct] {
        c.query_drop("PREPARE k FROM 'KILL ?'")
            .await
            .expect("prepare");
        assert_eq!(code(c, "EXECUTE k").await, 1210, "no value");
        assert_eq!(code(c, "EXECUTE k USING 1, 2").await, 1210, "two values");
        let st = c.prep("KILL ?").await.expect("binary prepare");
        assert_eq!(st.num_params(), 1);
        assert_eq!(st.num_columns(), 0);
    }
    // KILL CONNECTION through a variable.
    let victim = conn(&p).await;
    killer
        .query_drop(format!("SET @v = {}", victim.id()))
        .await
        .expect("set");
    killer
        .query_drop("EXECUTE k USING @v")
        .await
        .expect("EXECUTE k USING @v");
    assert_session_ended(&p, victim.id(), "EXECUTE k USING @v left the victim");
    // KILL QUERY with the id as a string.
    let mut victim = conn(&p).await;
    let vid = victim.id();
    let sleeper = tokio::spawn(async move {
        let r: Result<Option<i64>, Error> = victim.query_first("SELECT SLEEP(20)").await;
        r
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    killer
        .query_drop("PREPARE q FROM 'KILL QUERY ?'")
        .await
        .expect("prepare");
    killer
        .query_drop(format!("EXECUTE q USING '{vid}'"))
        .await
        .expect("EXECUTE q USING a string");
    let r = tokio::time::timeout(Duration::from_secs(10), sleeper)
        .await
        .expect("the victim's SLEEP was not interrupted")
        .expect("join");
    assert!(matches!(r, Ok(Some(1)) | Err(_)), "interrupted: {r:?}");
    // The binary protocol, executed twice (the second time with the types
    // the driver sends again or not).
    for _ in 0..2 {
        let victim = conn(&p).await;
        let id = victim.id();
        killer
            .exec_drop("KILL ?", (id,))
            .await
            .expect("binary KILL ?");
        assert_session_ended(&p, id, "binary KILL ? left the victim");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_connection_ends_the_target_session() {
    let db = MariaDb::shared();
    let p = Proxy::builder(db).groups(1).max_backend(3).start().await;
    let mut victim = conn(&p).await;
    let mut killer = conn(&p).await;
    killer
        .query_drop(format!("KILL CONNECTION {}", victim.id()))
        .await
        .expect("kill connection");
    // As the server shuts the victim's socket before it answers the KILL,
    // the victim's session has ended when the killer is answered (its next
    // command finds the connection gone: a driver with auto-reconnect
    // reconnects instead of failing on a half-killed session).
    let id = victim.id();
    assert_session_ended(
        &p,
        id,
        "the killed session still runs when KILL is answered",
    );
    assert!(
        victim.query_drop("SELECT 1").await.is_err(),
        "killed session is gone"
    );
    // So too for a victim inside a statement: its statement is ended and
    // its session with it before the killer is answered.
    let mut victim = conn(&p).await;
    let id = victim.id();
    let running = tokio::spawn(async move { victim.query_drop("SELECT SLEEP(5)").await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let t = std::time::Instant::now();
    killer
        .query_drop(format!("KILL CONNECTION {id}"))
        .await
        .expect("kill connection");
    assert_session_ended(
        &p,
        id,
        "the killed session was still in its statement when KILL was answered",
    );
    assert!(
        t.elapsed() < Duration::from_secs(3),
        "KILL took {:?}",
        t.elapsed()
    );
    assert!(
        running.await.expect("victim task").is_err(),
        "the victim's statement ended with its connection"
    );
    // Only the owner, an admin, or an account the server lets kill other
    // accounts' threads may kill: `other` has ALL PRIVILEGES on the server
    // (CONNECTION ADMIN included) and logs in as itself.
    let mut other = Conn::from_url(p.url(OTHER_USER, OTHER_PASSWORD, "test"))
        .await
        .expect("other");
    let mut victim = conn(&p).await;
    other
        .query_drop(format!("KILL {}", victim.id()))
        .await
        .expect("a privileged account kills another's session");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(victim.query_drop("SELECT 1").await.is_err(), "victim gone");
    // An account without the privilege gets the server's refusal, and so
    // does a proxy user mapped to a privileged service account (it never
    // gets that account's privileges for KILL).
    db.sql(
        "CREATE USER IF NOT EXISTS 'kill_limited'@'%' IDENTIFIED BY 'lpw'; \
         GRANT SELECT ON test.* TO 'kill_limited'@'%'",
    );
    let p2 = Proxy::builder(db)
        .groups(1)
        .max_backend(3)
        .with(|cfg| {
            cfg.users.push(myplex::config::UserConfig {
                name: "kill_limited".into(),
                password: Some("lpw".into()),
                ..Default::default()
            });
            cfg.users.push(myplex::config::UserConfig {
                name: "mapped".into(),
                password: Some("mpw".into()),
                backend_user: Some(OTHER_USER.into()),
                backend_password: Some(OTHER_PASSWORD.into()),
                ..Default::default()
            });
        })
        .start()
        .await;
    let mut victim = conn(&p2).await;
    for (user, pw) in [("kill_limited", "lpw"), ("mapped", "mpw")] {
        let mut c = Conn::from_url(p2.url(user, pw, "test"))
            .await
            .unwrap_or_else(|e| panic!("{user}: {e}"));
        match c.query_drop(format!("KILL {}", victim.id())).await {
            Err(Error::Server(e)) => assert_eq!(e.code, 1095, "{user}"),
            r => panic!("{user}: expected not-owner error, got {r:?}"),
        }
    }
    victim.query_drop("SELECT 1").await.expect("victim alive");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn change_user_reauthenticates_and_resets() {
    let db = MariaDb::shared();
    let p = Proxy::builder(db).groups(1).max_backend(3).start().await;
    let mut c = conn(&p).await;
    c.query_drop("SET @v = 1").await.expect("set");
    c.query_drop("BEGIN").await.expect("begin");
    c.change_user(
        ChangeUserOpts::default()
            .with_user(Some(OTHER_USER.into()))
            .with_pass(Some(OTHER_PASSWORD.into()))
            .with_db_name(Some("test".into())),
    )
    .await
    .expect("change user");
    let who: Option<String> = c.query_first("SELECT CURRENT_USER()").await.expect("who");
    assert_eq!(
        who.as_deref(),
        Some("other@%"),
        "backend connections now log in as the new user"
    );
    let v: Option<Option<i64>> = c.query_first("SELECT @v").await.expect("@v");
    assert_eq!(v, Some(None), "session state is reset");
    let bad = c
        .change_user(
            ChangeUserOpts::default()
                .with_user(Some("app".into()))
                .with_pass(Some("wrong".into())),
        )
        .await;
    assert!(
        matches!(bad, Err(Error::Server(ref e)) if e.code == 1045),
        "{bad:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_connection_clears_state_and_unpins() {
    let db = MariaDb::shared();
    let p = Proxy::builder(db).groups(1).max_backend(2).start().await;
    let mut c = conn(&p).await;
    c.query_drop("SET @v = 1").await.expect("set");
    c.query_drop("SET SESSION time_zone = '+03:00'")
        .await
        .expect("tz");
    c.reset().await.expect("reset");
    let row: Option<(Option<i64>, String)> = c
        .query_first("SELECT @v, @@session.time_zone")
        .await
        .expect("row");
    assert_eq!(row, Some((None, "SYSTEM".to_string())));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statistics_and_ping_via_mariadb_admin() {
    let db = MariaDb::shared();
    let p = Proxy::builder(db).start().await;
    let port = p.addr.port();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(mariadb_bin("mariadb-admin"))
            .args([
                "--no-defaults",
                "--protocol=TCP",
                "--host=127.0.0.1",
                "-uapp",
                "-psecret",
            ])
            .arg(format!("--port={port}"))
            .args(["ping", "status"])
            .output()
            .expect("run mariadb-admin")
    })
    .await
    .expect("join");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("mysqld is alive"), "{stdout}");
    assert!(stdout.contains("Uptime:"), "{stdout}");
}

/// Statements of the spin loop running on the server, as a direct
/// connection sees them.
const SPINNING: &str = "SELECT COUNT(*) FROM information_schema.PROCESSLIST \
                        WHERE INFO LIKE '%424242%' AND ID <> CONNECTION_ID()";

/// A statement that never ends by itself: a stored-program loop whose
/// sub-statements change query ids.
const SPIN: &str = "BEGIN NOT ATOMIC LOOP DO SLEEP(0.01) + 424242; END LOOP; END";

/// Waits (up to 5 s) until `want` spin statements run on the server.
async fn spinning(direct: &mut Conn, want: u64) -> bool {
    for _ in 0..100 {
        let n: Option<u64> = direct.query_first(SPINNING).await.expect("processlist");
        if n == Some(want) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// KILL CONNECTION of a session in the middle of a stored-program loop
/// (killing "the current query" by id misses it) ends the session and the
/// loop on the server. (KILL QUERY does not stop this loop directly either:
/// the interrupted SLEEP returns 1 and the loop goes on.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_stops_a_running_loop() {
    let db = MariaDb::shared();
    let p = Proxy::builder(db).groups(1).max_backend(3).start().await;
    let mut direct = Conn::from_url(db.url("root", common::mariadb::ROOT_PASSWORD, "test"))
        .await
        .expect("direct");
    let mut killer = conn(&p).await;
    {
        let mut victim = conn(&p).await;
        let id = victim.id();
        let run = tokio::spawn(async move {
            let r = victim.query_drop(SPIN).await;
            (r, victim)
        });
        assert!(spinning(&mut direct, 1).await, "the loop never started");
        let kill = "KILL CONNECTION";
        killer
            .query_drop(format!("{kill} {id}"))
            .await
            .expect("kill");
        let (r, mut victim) = tokio::time::timeout(Duration::from_secs(10), run)
            .await
            .unwrap_or_else(|_| panic!("{kill}: the statement goes on"))
            .expect("join");
        assert!(r.is_err(), "the loop cannot end by itself");
        assert!(
            spinning(&mut direct, 0).await,
            "{kill}: the loop still runs"
        );
        assert!(
            victim.query_drop("SELECT 1").await.is_err(),
            "session ended"
        );
    }
    killer.query_drop("SELECT 1").await.expect("pool intact");
}

/// COM_PROCESS_INFO (`mysql_list_processes()`) is answered by the server:
/// the same result set shape as direct (the rows are the server's threads).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn process_info_is_forwarded() {
    use common::raw::{RawConn, Response};
    let db = MariaDb::shared();
    let p = Proxy::builder(db).start().await;
    let mut shapes = Vec::new();
    for addr in [p.addr.to_string(), db.addr()] {
        let mut c = RawConn::connect(&addr, "app", "secret", Some("test"), false).await;
        c.send_command(&[0x0A]).await;
        let r = c.read_response("COM_PROCESS_INFO", false).await;
        let Response::Rows(rs) = r else {
            panic!("{addr}: expected the process list");
        };
        let names: Vec<String> = rs.column_defs().into_iter().map(|d| d.name).collect();
        assert!(!rs.rows.is_empty(), "{addr}: at least its own thread");
        shapes.push(names);
        assert_eq!(c.query_one("SELECT 'usable'").await, "usable");
        c.quit().await;
    }
    assert_eq!(shapes[0], shapes[1], "through the proxy, then direct");
}

/// The OK of a COM_CHANGE_USER is the server's: one that names a schema
/// reports it in a session-state block (status SESSION_STATE_CHANGED) to a
/// client that tracks it, as at login; one without a schema is plain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn change_user_ok_reports_the_schema_as_direct() {
    use common::raw::{BASE_CAPS, DEPRECATE_EOF, RawConn, SESSION_TRACK};
    let db = MariaDb::shared();
    let p = Proxy::builder(db).start().await;
    for schema in [Some("test"), None] {
        let mut replies = Vec::new();
        for addr in [p.addr.to_string(), db.addr()] {
            let caps = BASE_CAPS | DEPRECATE_EOF | SESSION_TRACK;
            let mut c = RawConn::try_connect_with(&addr, "app", "secret", Some("test"), caps, 45)
                .await
                .expect("login");
            let (_, reply) = c.change_user(OTHER_USER, OTHER_PASSWORD, schema).await;
            assert!(
                matches!(reply.as_slice(), [0, ..]),
                "{addr} {schema:?}: {reply:?}"
            );
            replies.push(reply);
            c.quit().await;
        }
        assert_eq!(replies[0], replies[1], "{schema:?}: proxy vs direct");
    }
}
