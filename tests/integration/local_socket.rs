//! `backend.local_socket = "auto"` (the default): with a loopback TCP
//! address the proxy reaches the server over its own Unix socket once a
//! TCP login proves the socket is the same server and the same account,
//! and stays on (or goes back to) TCP whenever that is not proven: `off`,
//! a forwarder on another port, a `localhost` account row that is another
//! account, a socket login refused or landing on another account later.
//! The server tells which transport each backend used: a socket client's
//! `PROCESSLIST.HOST` is `localhost`, a TCP one's `localhost:port` (or
//! `127.0.0.1:port` on a server that skips name resolution).
//!
//! The socket is taken only on a server that resolves names (its
//! default): there a loopback TCP client is `localhost` as a socket client
//! is, so `USER()` reads the same either way. These tests run on such a
//! server; the shared fixture (`skip-name-resolve`) keeps TCP.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::mariadb::Profile;
use common::{MariaDb, Proxy};
use myplex::config::{LocalSocketMode, UserConfig};
use mysql_async::prelude::*;

/// The `PROCESSLIST.HOST` of the backend that runs this very statement
/// (found by a marker only this statement's text holds).
async fn backend_host(c: &mut mysql_async::Conn) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    let marker = format!(
        "mpx-host-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    );
    let sql = format!(
        "SELECT HOST FROM information_schema.PROCESSLIST WHERE INFO LIKE '%{marker}%' AND COMMAND <> 'Sleep'"
    );
    let hosts: Vec<String> = c.query(sql).await.expect("processlist");
    assert_eq!(hosts.len(), 1, "exactly this statement: {hosts:?}");
    hosts[0].clone()
}

fn on_tcp(host: &str) -> bool {
    host.starts_with("127.0.0.1:") || host.starts_with("localhost:")
}

/// A server that resolves names (the server's default).
fn resolving() -> &'static MariaDb {
    MariaDb::shared_with(Profile::Production, &["--skip-name-resolve=0"])
}

async fn login(p: &Proxy, user: &str, password: &str) -> mysql_async::Conn {
    mysql_async::Conn::from_url(p.url(user, password, "test"))
        .await
        .expect("login through the proxy")
}

/// A user with all privileges from anywhere, and its proxy entry.
fn user(db: &MariaDb, name: &str, password: &str) -> UserConfig {
    db.sql(&format!(
        "DROP USER IF EXISTS {name}@'%'; DROP USER IF EXISTS {name}@localhost;\n\
         CREATE USER {name}@'%' IDENTIFIED BY '{password}'; GRANT ALL ON *.* TO {name}@'%';"
    ));
    configured(name, password)
}

/// myplex's `[[users]]` entry for an account the test created.
fn configured(name: &str, password: &str) -> UserConfig {
    UserConfig {
        name: name.into(),
        password: Some(password.into()),
        ..Default::default()
    }
}

/// Holds a backend: a client inside a transaction that has run a statement.
async fn holding(p: &Proxy, name: &str, password: &str) -> (mysql_async::Conn, String) {
    let mut c = login(p, name, password).await;
    c.query_drop("BEGIN").await.expect("begin");
    let host = backend_host(&mut c).await;
    (c, host)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loopback_address_takes_the_servers_socket_and_off_keeps_tcp() {
    let db = resolving();
    let u = user(db, "ls_a", "pa");
    let p = Proxy::builder(db)
        .with(|c| c.users.push(u.clone()))
        .start()
        .await;
    // The first backend is the TCP login that proves the socket; the next
    // one (the first is held by a transaction) goes over the socket.
    let (mut first, first_host) = holding(&p, "ls_a", "pa").await;
    assert!(on_tcp(&first_host), "{first_host}");
    let (mut second, second_host) = holding(&p, "ls_a", "pa").await;
    assert_eq!(second_host, "localhost");
    let who: Option<String> = second
        .query_first("SELECT CURRENT_USER()")
        .await
        .expect("who");
    assert_eq!(who.as_deref(), Some("ls_a@%"));
    let view = p.shared.pool.local_socket.view();
    assert_eq!(
        view.socket.as_deref(),
        Some(db.socket.to_str().expect("utf-8"))
    );
    let (_, status) = p.http_get("/status").await;
    assert!(status.contains("\"backend_local_socket\""), "{status}");
    assert!(
        status.contains(&db.socket.display().to_string()),
        "{status}"
    );
    for c in [&mut first, &mut second] {
        c.query_drop("COMMIT").await.expect("commit");
    }

    let off = Proxy::builder(db)
        .with(|c| {
            c.users.push(u);
            c.backend.local_socket = LocalSocketMode::Off;
        })
        .start()
        .await;
    let (_a, a) = holding(&off, "ls_a", "pa").await;
    let (_b, b) = holding(&off, "ls_a", "pa").await;
    assert!(on_tcp(&a) && on_tcp(&b), "{a} {b}");
    assert_eq!(off.shared.pool.local_socket.view().credentials_on_socket, 0);
}

/// Copies bytes both ways between each connection accepted on `at` and
/// 127.0.0.1:`to`; counts the connections it forwarded.
async fn forwarder(at: &str, to: u16) -> (u16, Arc<AtomicUsize>) {
    let l = tokio::net::TcpListener::bind(at).await.expect("bind");
    let port = l.local_addr().expect("addr").port();
    let n = Arc::new(AtomicUsize::new(0));
    let count = n.clone();
    tokio::spawn(async move {
        while let Ok((mut a, _)) = l.accept().await {
            count.fetch_add(1, Ordering::Relaxed);
            tokio::spawn(async move {
                if let Ok(mut b) = tokio::net::TcpStream::connect(("127.0.0.1", to)).await {
                    let _ = tokio::io::copy_bidirectional(&mut a, &mut b).await;
                }
            });
        }
    });
    (port, n)
}

/// Three backends of `name` held at once (the first checks the socket,
/// the next two would take it if proven): all must be on TCP.
async fn three_on_tcp(p: &Proxy, name: &str, password: &str) {
    let (_a, a) = holding(p, name, password).await;
    let (_b, b) = holding(p, name, password).await;
    let (_c, c) = holding(p, name, password).await;
    assert!(on_tcp(&a) && on_tcp(&b) && on_tcp(&c), "{a} {b} {c}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarder_on_another_port_is_never_bypassed() {
    let db = resolving();
    let u = user(db, "ls_f", "pf");
    let (port, forwarded) = forwarder("127.0.0.1:0", db.port).await;
    let p = Proxy::builder(db)
        .with(|c| {
            c.users.push(u);
            c.backend.address = format!("127.0.0.1:{port}");
        })
        .start()
        .await;
    three_on_tcp(&p, "ls_f", "pf").await;
    assert_eq!(p.shared.pool.local_socket.view().credentials_on_socket, 0);
    // Every backend went through the forwarder (and the start's probe).
    assert!(forwarded.load(Ordering::Relaxed) >= 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_account_row_only_tcp_matches_keeps_tcp() {
    let db = resolving();
    db.sql(
        "DROP USER IF EXISTS ls_b@'%'; DROP USER IF EXISTS ls_b@'127.0.0.1';\n\
         CREATE USER ls_b@'127.0.0.1' IDENTIFIED BY 'pb'; GRANT ALL ON *.* TO ls_b@'127.0.0.1';\n\
         CREATE USER ls_b@'%' IDENTIFIED BY 'pb';",
    );
    // Same name and password, no privileges: a socket login (no address)
    // would be the `%` account, not the `127.0.0.1` one TCP logins get.
    let u = configured("ls_b", "pb");
    let p = Proxy::builder(db).with(|c| c.users.push(u)).start().await;
    let (mut a, ha) = holding(&p, "ls_b", "pb").await;
    let (mut b, hb) = holding(&p, "ls_b", "pb").await;
    assert!(on_tcp(&ha) && on_tcp(&hb), "{ha} {hb}");
    for c in [&mut a, &mut b] {
        let who: Option<String> = c.query_first("SELECT CURRENT_USER()").await.expect("who");
        assert_eq!(who.as_deref(), Some("ls_b@127.0.0.1"));
        c.query_drop("CREATE TABLE IF NOT EXISTS test.ls_b_t (i INT)")
            .await
            .expect("the 127.0.0.1 account may create");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_skips_name_resolution_keeps_tcp() {
    // There a TCP client from 127.0.0.1 reads USER() as ...@127.0.0.1 and a
    // socket client as ...@localhost: a client would see the difference.
    let db = MariaDb::shared();
    let u = user(db, "ls_s", "ps");
    let p = Proxy::builder(db).with(|c| c.users.push(u)).start().await;
    let (mut a, ha) = holding(&p, "ls_s", "ps").await;
    let (_b, hb) = holding(&p, "ls_s", "ps").await;
    assert!(
        ha.starts_with("127.0.0.1:") && hb.starts_with("127.0.0.1:"),
        "{ha} {hb}"
    );
    let who: Option<String> = a.query_first("SELECT USER()").await.expect("user");
    assert_eq!(who.as_deref(), Some("ls_s@127.0.0.1"));
    assert_eq!(p.shared.pool.local_socket.view().credentials_on_socket, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socket_login_that_changes_account_goes_back_to_tcp() {
    let db = resolving();
    let u = user(db, "ls_c", "pc");
    let p = Proxy::builder(db).with(|c| c.users.push(u)).start().await;
    let (_a, ha) = holding(&p, "ls_c", "pc").await;
    let (_b, hb) = holding(&p, "ls_c", "pc").await;
    assert!(on_tcp(&ha), "{ha}");
    assert_eq!(hb, "localhost");
    // A DBA adds a localhost row with the same password and fewer
    // privileges: the next socket login is another account than the one
    // proven. It goes back to a TCP login, which (names resolved) is that
    // new account too, as a direct client's is: proven again, the socket
    // is taken again with it.
    db.sql(
        "CREATE USER ls_c@localhost IDENTIFIED BY 'pc'; GRANT SELECT ON test.* TO ls_c@localhost;",
    );
    let (mut c, hc) = holding(&p, "ls_c", "pc").await;
    assert!(on_tcp(&hc), "{hc}");
    let who: Option<String> = c.query_first("SELECT CURRENT_USER()").await.expect("who");
    assert_eq!(who.as_deref(), Some("ls_c@localhost"));
    let (mut d, hd) = holding(&p, "ls_c", "pc").await;
    assert_eq!(hd, "localhost");
    let who: Option<String> = d.query_first("SELECT CURRENT_USER()").await.expect("who");
    assert_eq!(who.as_deref(), Some("ls_c@localhost"));
    db.sql("DROP USER ls_c@localhost;");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vanished_socket_sends_backends_back_to_tcp() {
    // A private server: its socket file is moved away and back.
    let db = MariaDb::start_with(Profile::Production, &["--skip-name-resolve=0"]);
    let u = user(&db, "ls_v", "pv");
    let p = Proxy::builder(&db).with(|c| c.users.push(u)).start().await;
    let (_a, ha) = holding(&p, "ls_v", "pv").await;
    let (_b, hb) = holding(&p, "ls_v", "pv").await;
    assert!(on_tcp(&ha), "{ha}");
    assert_eq!(hb, "localhost");
    let away = db.socket.with_extension("away");
    std::fs::rename(&db.socket, &away).expect("move the socket away");
    let (mut c, hc) = holding(&p, "ls_v", "pv").await;
    assert!(on_tcp(&hc), "{hc}");
    c.query_drop("SELECT 1")
        .await
        .expect("no error reaches the client");
    std::fs::rename(&away, &db.socket).expect("put it back");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarder_on_the_servers_port_number_is_never_bypassed() {
    // The server listens on 127.0.0.1 only; a forwarder on the same port
    // number of another loopback address passes the port check. The
    // server's thread for the proxy's TCP login is the forwarder's
    // connection, with the forwarder's client port: the proof fails.
    let db = resolving();
    let u = user(db, "ls_g", "pg");
    let (port, forwarded) = forwarder(&format!("127.0.0.2:{}", db.port), db.port).await;
    assert_eq!(port, db.port);
    let p = Proxy::builder(db)
        .with(|c| {
            c.users.push(u);
            c.backend.address = format!("127.0.0.2:{port}");
        })
        .start()
        .await;
    three_on_tcp(&p, "ls_g", "pg").await;
    assert!(forwarded.load(Ordering::Relaxed) >= 3);
}
