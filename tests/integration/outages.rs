//! Outages say what is happening: with the backend unreachable, clients get
//! an error naming the backend and since when, `/readyz` answers at once
//! from the background health state, and errors the proxy originates are
//! well-formed for real clients.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{MariaDb, Proxy, free_port, mariadb_bin};
use mysql_async::Conn;
use mysql_async::prelude::*;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// A TCP gate in front of the test server: `close` makes the backend
/// unreachable (connections refused, open ones cut), `open` brings it back
/// on the same port.
struct Gate {
    port: u16,
    target: String,
    tasks: Arc<Mutex<Vec<JoinHandle<()>>>>,
}

impl Gate {
    async fn new(target: String) -> Gate {
        let g = Gate {
            port: free_port(),
            target,
            tasks: Arc::default(),
        };
        g.open().await;
        g
    }

    fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    async fn open(&self) {
        // The closed gate's listener goes when its aborted task is dropped.
        let mut tries = 0;
        let listener = loop {
            match TcpListener::bind(self.addr()).await {
                Ok(l) => break l,
                Err(_) if tries < 50 => {
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                Err(e) => panic!("bind gate: {e}"),
            }
        };
        let target = self.target.clone();
        let tasks = self.tasks.clone();
        let accept = tokio::spawn(async move {
            while let Ok((mut c, _)) = listener.accept().await {
                let target = target.clone();
                let t = tokio::spawn(async move {
                    if let Ok(mut s) = TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut c, &mut s).await;
                    }
                });
                tasks.lock().unwrap().push(t);
            }
        });
        self.tasks.lock().unwrap().push(accept);
    }

    fn close(&self) {
        for t in self.tasks.lock().unwrap().drain(..) {
            t.abort();
        }
    }
}

/// A proxy reaching the shared server through a [`Gate`] (500 ms connect
/// timeout, then `f`), and a client that has run one statement through it.
async fn behind_a_gate(f: impl FnOnce(&mut myplex::config::Config)) -> (Gate, Proxy, Conn) {
    let db = MariaDb::shared();
    let gate = Gate::new(db.addr()).await;
    let address = gate.addr();
    let p = Proxy::builder(db)
        .with(move |c| {
            c.backend.address = address;
            c.backend.connect_timeout_ms = 500;
            f(c);
        })
        .start()
        .await;
    let mut conn = Conn::from_url(p.url("app", "secret", ""))
        .await
        .expect("connect");
    conn.query_drop("SELECT 1").await.expect("backend up");
    assert_eq!(p.http_get("/readyz").await.0, 200);
    (gate, p, conn)
}

async fn err_of(conn: &mut Conn, sql: &str) -> mysql_async::ServerError {
    match conn.query_drop(sql).await {
        Err(mysql_async::Error::Server(e)) => e,
        other => panic!("{sql}: expected a server error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_backend_is_named_and_readyz_answers_at_once() {
    let (gate, p, mut conn) = behind_a_gate(|c| c.pool.queue_timeout_ms = 1500).await;

    gate.close();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let t0 = Instant::now();
    let e = err_of(&mut conn, "SELECT 1").await;
    assert_eq!(e.code, 1429, "{e:?}");
    assert!(
        e.message.contains(&gate.addr()) && e.message.contains("unreachable since"),
        "{}",
        e.message
    );
    assert!(t0.elapsed() < Duration::from_secs(4), "{:?}", t0.elapsed());
    // /readyz answers from the health state: no dial, no wait.
    for _ in 0..5 {
        let t0 = Instant::now();
        let (code, body) = p.http_get("/readyz").await;
        assert_eq!(code, 503, "{body}");
        assert!(
            t0.elapsed() < Duration::from_millis(200),
            "{:?}",
            t0.elapsed()
        );
    }
    // A new client is told the same (mysql_async queries the server during
    // its login, so the error may come at connect or at the first query).
    let e = match Conn::from_url(p.url("other", "otherpw", "")).await {
        Err(mysql_async::Error::Server(e)) => e,
        Ok(mut other) => err_of(&mut other, "SELECT 2").await,
        Err(other) => panic!("connect while down: {other:?}"),
    };
    assert_eq!(e.code, 1429, "{e:?}");

    gate.open().await;
    let t0 = Instant::now();
    while p.http_get("/readyz").await.0 != 200 {
        assert!(t0.elapsed() < Duration::from_secs(5), "never ready again");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let v: Option<u32> = conn.query_first("SELECT 3").await.expect("served again");
    assert_eq!(v, Some(3));
    gate.close();
}

/// The server ends a session idle in a read-only transaction
/// (`idle_readonly_transaction_timeout`, which myplex leaves to the server:
/// it cannot tell the transaction's kind). The mariadb CLI must see what it
/// sees direct: the server resets the connection, the CLI's next write
/// fails and it reports 2006 "server has gone away" (with a plain close it
/// would report 2013; with an ERR carrying a client-range code, 2027
/// "malformed packet"). With `idle_transaction_timeout` myplex closes the
/// client itself, as the server would (tests/session_values.rs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_the_server_times_out_ends_the_client_as_direct() {
    let db = MariaDb::shared();
    let p = Proxy::builder(db).start().await;
    let batch =
        "SET SESSION idle_readonly_transaction_timeout=1; BEGIN; SELECT 1; SELECT SLEEP(0); DO 0;";
    let out = app_cli(p.addr.port(), &["--force", "-e", batch], "").await;
    // No idle time in that batch: it must simply work.
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let script = "SET SESSION idle_readonly_transaction_timeout=1;\nBEGIN;\nSELECT 1;\n\\! sleep 2.5\nSELECT 2;\n";
    let mut seen = Vec::new();
    for port in [p.addr.port(), db.port] {
        let out = app_cli(port, &[], script).await;
        seen.push(String::from_utf8_lossy(&out.stderr).to_string());
    }
    assert_eq!(seen[0], seen[1], "through myplex, then direct");
    assert!(seen[1].contains("ERROR 2006"), "{}", seen[1]);
}

/// Runs the mariadb CLI as `app` against `port` with `args`, `stdin` on its
/// standard input.
async fn app_cli(port: u16, args: &[&str], stdin: &str) -> std::process::Output {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let stdin = stdin.to_string();
    tokio::task::spawn_blocking(move || {
        use std::io::Write;
        let mut child = std::process::Command::new(mariadb_bin("mariadb"))
            .args([
                "--no-defaults",
                "--protocol=TCP",
                "--host=127.0.0.1",
                &format!("--port={port}"),
                "-uapp",
                "-psecret",
            ])
            .args(&args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("run mariadb");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(stdin.as_bytes())
            .expect("write stdin");
        child.wait_with_output().expect("wait")
    })
    .await
    .expect("join")
}

/// A backend held by an idle session (here for a user lock) that the
/// server ends (an operator's KILL on the server) ends the client
/// connection at once, with nothing said, as the server ends a direct one:
/// the client does not learn it only at its next statement, and never from
/// an error the proxy made up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_backend_killed_on_the_server_ends_the_idle_client() {
    use common::raw::RawConn;
    let db = MariaDb::shared();
    let p = Proxy::builder(db).groups(1).max_backend(2).start().await;
    let mut seen = Vec::new();
    for addr in [p.addr.to_string(), db.addr()] {
        let mut c = RawConn::connect(&addr, "app", "secret", Some("test"), false).await;
        let got = c
            .query_one("SELECT GET_LOCK('held_backend_killed', 0)")
            .await;
        assert_eq!(got, "1");
        let thread = db.sql("SELECT IS_USED_LOCK('held_backend_killed')");
        db.sql(&format!("KILL {}", thread.trim()));
        let ending = tokio::time::timeout(Duration::from_secs(5), c.ending("killed"))
            .await
            .expect("the client connection ends with its backend");
        seen.push(ending);
    }
    assert_eq!(seen[0], seen[1], "through myplex, then direct");
    assert_eq!(seen[1].said, vec![], "nothing said: {:?}", seen[1]);
    // The pool goes on without the killed backend.
    let mut c = Conn::from_url(p.app_url()).await.expect("connect");
    let v: Option<u32> = c.query_first("SELECT 7").await.expect("served");
    assert_eq!(v, Some(7));
}

/// A backend lost mid-statement: a session that held state on it (here an
/// open transaction) must not go on, and ends without a word, as a direct
/// connection ends when the server goes away (the client library reports
/// 2013 itself; an ERR from the proxy would read as the statement's error).
/// A session that held nothing gets 1158 and keeps its connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_cut_mid_statement_ends_only_sessions_holding_state() {
    use common::raw::RawConn;
    let db = MariaDb::shared();
    let gate = Gate::new(db.addr()).await;
    let p = Proxy::builder(db)
        .groups(1)
        .max_backend(4)
        .with(|c| c.backend.address = gate.addr())
        .start()
        .await;
    let addr = p.addr.to_string();
    let mut holding = RawConn::connect(&addr, "app", "secret", Some("test"), false).await;
    holding.query_ok("BEGIN").await;
    let mut free = RawConn::connect(&addr, "app", "secret", Some("test"), false).await;
    for c in [&mut holding, &mut free] {
        c.send_raw(0, b"\x03SELECT SLEEP(3)").await.expect("send");
    }
    // Both statements run on the server before the cut.
    let t0 = Instant::now();
    while db
        .sql("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO = 'SELECT SLEEP(3)'")
        .trim()
        .parse::<u32>()
        .unwrap_or(0)
        < 2
    {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "statements never ran"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    gate.close();
    let ending = tokio::time::timeout(Duration::from_secs(5), holding.ending("cut"))
        .await
        .expect("the session holding state ends");
    assert_eq!(ending.said, vec![], "no made-up error: {ending:?}");
    let (_, err) = free.try_read("cut").await.expect("an error, not a close");
    assert_eq!(err[0], 0xff, "{err:02x?}");
    assert_eq!(u16::from_le_bytes([err[1], err[2]]), 1158, "{err:02x?}");
    gate.open().await;
    let alive = free.query_one("SELECT 'still here'").await;
    assert_eq!(alive, "still here");
    gate.close();
}

/// Every backend held by sessions idle inside a transaction: the queue
/// timeout says so instead of suggesting larger pool settings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_timeout_names_transactions_holding_every_backend() {
    let db = MariaDb::shared();
    let p = Proxy::builder(db)
        .max_backend(2)
        .queue_timeout_ms(800)
        .with(|c| c.pool.thread_groups = 1)
        .start()
        .await;
    // mysql_async queries the server during its login: log in first.
    let mut waiter = Conn::from_url(p.app_url()).await.expect("connect");
    let mut holders = Vec::new();
    for _ in 0..2 {
        let mut c = Conn::from_url(p.app_url()).await.expect("connect");
        c.query_drop("BEGIN").await.expect("begin");
        c.query_drop("SELECT 1").await.expect("select");
        holders.push(c);
    }
    let e = err_of(&mut waiter, "SELECT 2").await;
    assert_eq!(e.code, 1317, "{e:?}");
    assert!(
        e.message
            .contains("held by 2 sessions inside a transaction"),
        "{}",
        e.message
    );
    for mut c in holders {
        c.query_drop("ROLLBACK").await.expect("rollback");
    }
    let v: Option<u32> = waiter.query_first("SELECT 3").await.expect("served");
    assert_eq!(v, Some(3));
}

/// A server at its connection limit is full, not down: sessions whose new
/// backend it refuses (here the account's `MAX_USER_CONNECTIONS`, 1226)
/// wait for one of the pool's own backends instead of failing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_server_makes_statements_wait_not_fail() {
    let db = MariaDb::start();
    db.sql("ALTER USER 'app'@'%' WITH MAX_USER_CONNECTIONS 3");
    let p = Proxy::builder(&db)
        .groups(1)
        .oversubscribe(7)
        .queue_timeout_ms(20_000)
        .start()
        .await;
    let mut tasks = Vec::new();
    for i in 0..8 {
        let url = p.app_url();
        tasks.push(tokio::spawn(async move {
            let mut c = Conn::from_url(url.as_str()).await.expect("login");
            c.query_drop("BEGIN").await.expect("begin");
            let v: Option<i64> = c
                .query_first(format!("SELECT {i} + SLEEP(0.3)"))
                .await
                .map_err(|e| format!("client {i}: {e}"))?;
            c.query_drop("COMMIT").await.expect("commit");
            c.disconnect().await.expect("quit");
            Ok::<_, String>(v)
        }));
    }
    let mut failed = Vec::new();
    for (i, t) in tasks.into_iter().enumerate() {
        match t.await.expect("join") {
            Ok(v) => assert_eq!(v, Some(i as i64)),
            Err(e) => failed.push(e),
        }
    }
    assert!(failed.is_empty(), "refused by a full server: {failed:?}");
}

/// The background checks learn an outage of the only server without a
/// client asking (before them, `/readyz` stayed 200 through a 4.5 s outage:
/// health was learnt from failed dials only): an idle pooled connection is
/// pinged every interval, a failed ping is followed by a dial, and a
/// refused dial marks the server down; it comes back when it answers again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_outage_of_the_only_server_shows_in_readyz_without_a_client() {
    let (gate, p, mut conn) = behind_a_gate(|c| c.backend.health_check_interval_ms = 200).await;
    // The pooled connection is idle past the checks' quiet time (2 s).
    tokio::time::sleep(Duration::from_millis(2500)).await;

    gate.close();
    let t0 = Instant::now();
    while p.http_get("/readyz").await.0 != 503 {
        assert!(
            t0.elapsed() < Duration::from_secs(3),
            "the outage never showed in /readyz"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // `/status` says the same once the check's round ends.
    loop {
        let (_, status) = p.http_get("/status").await;
        let s: serde_json::Value = serde_json::from_str(&status).expect("json");
        if s["servers"]["servers"][0]["up"] == false {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(3), "{status}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    gate.open().await;
    let t0 = Instant::now();
    while p.http_get("/readyz").await.0 != 200 {
        assert!(t0.elapsed() < Duration::from_secs(5), "never ready again");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let v: Option<u32> = conn.query_first("SELECT 2").await.expect("served again");
    assert_eq!(v, Some(2));
    gate.close();
}
