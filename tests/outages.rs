//! Outages say what is happening: with the backend unreachable, clients get
//! an error naming the backend and since when, `/readyz` answers at once
//! from the background health state, and errors the proxy originates are
//! well-formed for real clients.

mod common;

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
        let listener = TcpListener::bind(self.addr()).await.expect("bind gate");
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

async fn err_of(conn: &mut Conn, sql: &str) -> mysql_async::ServerError {
    match conn.query_drop(sql).await {
        Err(mysql_async::Error::Server(e)) => e,
        other => panic!("{sql}: expected a server error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_backend_is_named_and_readyz_answers_at_once() {
    let db = MariaDb::shared();
    let gate = Gate::new(db.addr()).await;
    let p = Proxy::builder(db)
        .queue_timeout_ms(1500)
        .with(|c| {
            c.backend.address = gate.addr();
            c.backend.connect_timeout_ms = 500;
        })
        .start()
        .await;
    let mut conn = Conn::from_url(p.url("app", "secret", ""))
        .await
        .expect("connect");
    conn.query_drop("SELECT 1").await.expect("backend up");
    assert_eq!(p.http_get("/readyz").await.0, 200);

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
/// it cannot tell the transaction's kind); the mariadb CLI must get a
/// well-formed error from the proxy (a client-range code such as 2013 in an
/// ERR is reported by libmariadb as 2027 "malformed packet"). With
/// `idle_transaction_timeout` myplex closes the client itself, as the server
/// would (tests/session_values.rs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_backend_error_is_well_formed_for_the_mariadb_cli() {
    let db = MariaDb::shared();
    let p = Proxy::builder(db).start().await;
    let port = p.addr.port().to_string();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(mariadb_bin("mariadb"))
            .args([
                "--no-defaults",
                "--protocol=TCP",
                "--host=127.0.0.1",
                &format!("--port={port}"),
                "-uapp",
                "-psecret",
                "--force",
                "-e",
                "SET SESSION idle_readonly_transaction_timeout=1; BEGIN; SELECT 1; SELECT SLEEP(0); DO 0;",
            ])
            .output()
            .expect("run mariadb")
    })
    .await
    .expect("join");
    let text = String::from_utf8_lossy(&out.stderr).to_string();
    // No idle time in that batch: it must simply work.
    assert!(out.status.success(), "{text}");
    let script = "SET SESSION idle_readonly_transaction_timeout=1;\nBEGIN;\nSELECT 1;\n\\! sleep 2.5\nSELECT 2;\n";
    let port = p.addr.port().to_string();
    let out = tokio::task::spawn_blocking(move || {
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
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("run mariadb");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(script.as_bytes())
            .expect("write script");
        child.wait_with_output().expect("wait")
    })
    .await
    .expect("join");
    let text = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!text.contains("2027"), "malformed packet: {text}");
    assert!(text.contains("ERROR 1158 (08S01)"), "{text}");
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
