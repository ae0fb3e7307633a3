//! Unix domain sockets on both sides of the proxy (issue 17): a client on
//! the proxy's socket with the backend on the server's socket, the mixed
//! cases, the `mariadb` CLI and PyMySQL on the socket, the socket file's
//! life (stale file replaced, live one and non-socket refused, mode and
//! group applied, removed at shutdown), reload, server users seen as
//! `localhost`, and TLS on a socket handled as the server handles it.

use crate::common;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::mariadb::{APP_PASSWORD, APP_USER, ROOT_PASSWORD};
use common::tls::self_signed;
use common::{MariaDb, Proxy, mariadb_bin};
use myplex::config::Config;
use mysql_async::prelude::*;

/// A fresh short directory (socket paths are limited to 107 bytes).
fn temp_dir() -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let d = std::env::temp_dir().join(format!(
        "mpx-unix-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

async fn query_row(url: String, sql: &'static str) -> Vec<Option<String>> {
    let mut c = mysql_async::Conn::from_url(url).await.expect("login");
    let row: mysql_async::Row = c.query_first(sql).await.expect("query").expect("a row");
    let out = (0..row.len())
        .map(|i| row.get::<Option<String>, _>(i).flatten())
        .collect();
    c.disconnect().await.expect("disconnect");
    out
}

/// The server through its own socket, as a socket client sees it direct.
fn direct_socket_url(db: &MariaDb) -> String {
    format!(
        "mysql://{APP_USER}:{APP_PASSWORD}@localhost/test?socket={}",
        db.socket.display()
    )
}

/// The `mariadb` CLI on `socket` (blocking; run it off the runtime).
fn cli_on_socket(socket: &Path, user: &str, password: &str, extra: &[&str], sql: &str) -> Output {
    Command::new(mariadb_bin("mariadb"))
        .args(["--no-defaults", "--protocol=SOCKET", "--connect-timeout=10"])
        .arg(format!("--socket={}", socket.display()))
        .arg(format!("--user={user}"))
        .arg(format!("--password={password}"))
        .args(extra)
        .args(["-N", "-B", "-e", sql])
        .output()
        .expect("run mariadb")
}

async fn cli(socket: &Path, user: &str, password: &str, extra: &[&str], sql: &str) -> Output {
    let (socket, user, password, sql) = (
        socket.to_path_buf(),
        user.to_string(),
        password.to_string(),
        sql.to_string(),
    );
    let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    tokio::task::spawn_blocking(move || {
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        cli_on_socket(&socket, &user, &password, &extra, &sql)
    })
    .await
    .expect("join")
}

fn text(o: &Output) -> String {
    format!(
        "status {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socket_client_through_the_servers_socket_sees_what_direct_sees() {
    let db = MariaDb::shared();
    let dir = temp_dir();
    let sock = dir.join("myplex.sock");
    let p = Proxy::builder(db)
        .listen_unix(&sock)
        .backend_socket(db)
        .start()
        .await;
    let sql = "SELECT USER(), CURRENT_USER(), @@hostname, @@socket, DATABASE(), 40 + 2";
    let proxied = query_row(p.socket_url(APP_USER, APP_PASSWORD, "test"), sql).await;
    let direct = query_row(direct_socket_url(db), sql).await;
    assert_eq!(proxied, direct, "socket client via proxy vs direct socket");
    assert_eq!(proxied[0].as_deref(), Some("app@localhost"));
    // The backend pool works over the socket: /readyz and several sessions.
    let (code, body) = p.http_get("/readyz").await;
    assert_eq!(code, 200, "{body}");
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let url = p.socket_url(APP_USER, APP_PASSWORD, "test");
        tasks.push(tokio::spawn(async move {
            query_row(url, "SELECT CONNECTION_ID() > 0").await
        }));
    }
    for t in tasks {
        assert_eq!(t.await.expect("task"), vec![Some("1".to_string())]);
    }
    // The mariadb CLI on the proxy's socket, as on the server's.
    let out = cli(&sock, APP_USER, APP_PASSWORD, &["test"], "SELECT 40 + 2").await;
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "42");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_transports() {
    let db = MariaDb::shared();
    // TCP client, backend on the server's socket.
    let p = Proxy::builder(db).backend_socket(db).start().await;
    let row = query_row(p.app_url(), "SELECT USER(), 1 + 1").await;
    assert_eq!(row, vec![Some("app@localhost".into()), Some("2".into())]);
    drop(p);
    // Socket client, backend on TCP.
    let dir = temp_dir();
    let sock = dir.join("s");
    let p = Proxy::builder(db).listen_unix(&sock).start().await;
    let row = query_row(
        p.socket_url(APP_USER, APP_PASSWORD, "test"),
        "SELECT USER(), 1 + 1",
    )
    .await;
    assert_eq!(row, vec![Some("app@127.0.0.1".into()), Some("2".into())]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pymysql_on_the_socket() {
    let db = MariaDb::shared();
    let dir = temp_dir();
    let sock = dir.join("py.sock");
    let p = Proxy::builder(db)
        .listen_unix(&sock)
        .backend_socket(db)
        .start()
        .await;
    let script = "import sys, pymysql\n\
c = pymysql.connect(unix_socket=sys.argv[1], user='app', password='secret', database='test')\n\
cur = c.cursor()\n\
cur.execute('SELECT USER(), 6 * 7')\n\
print('%s %s' % cur.fetchone())\n\
c.close()\n";
    let sock_arg = sock.display().to_string();
    // PyMySQL lives in the test venv (scripts/install-deps.sh creates it;
    // tests/python_driver.rs pins it), not in the system's python3.
    let venv = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/pyenv/bin/python");
    let python = if venv.exists() {
        venv
    } else {
        std::path::PathBuf::from("python3")
    };
    let out = tokio::task::spawn_blocking(move || {
        Command::new(python)
            .args(["-c", script, &sock_arg])
            .output()
            .expect("run python3")
    })
    .await
    .expect("join");
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "app@localhost 42"
    );
    drop(p);
    let _ = std::fs::remove_dir_all(&dir);
}

fn socket_config(db: &MariaDb, sock: &Path) -> Config {
    let mut c = Config {
        listen: sock.display().to_string(),
        ..Default::default()
    };
    c.backend.address = db.addr();
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socket_file_lifecycle() {
    let db = MariaDb::shared();
    let dir = temp_dir();
    let sock = dir.join("life.sock");
    // A stale file: bound by a listener that is gone.
    drop(std::os::unix::net::UnixListener::bind(&sock).expect("stale socket"));
    assert!(sock.exists(), "the stale file stays behind");
    // The process's own group, as a name resolution-free numeric gid.
    let probe = dir.join("probe");
    std::fs::write(&probe, b"").expect("probe file");
    let gid = std::fs::metadata(&probe).expect("probe").gid();
    let p = Proxy::builder(db)
        .listen_unix(&sock)
        .with(|c| {
            c.listen_socket_mode = "0600".into();
            c.listen_socket_group = gid.to_string();
        })
        .start()
        .await;
    let meta = std::fs::metadata(&sock).expect("socket file");
    assert_eq!(meta.permissions().mode() & 0o777, 0o600, "mode applied");
    assert_eq!(meta.gid(), gid, "group applied");
    let row = query_row(p.socket_url(APP_USER, APP_PASSWORD, "test"), "SELECT 1").await;
    assert_eq!(row, vec![Some("1".into())]);

    // A live socket is refused, and left alone.
    let err = myplex::listener::Listener::bind(&socket_config(db, &sock)).expect_err("live");
    assert!(
        err.to_string().contains("another process is listening"),
        "{err}"
    );
    let row = query_row(p.socket_url(APP_USER, APP_PASSWORD, "test"), "SELECT 2").await;
    assert_eq!(
        row,
        vec![Some("2".into())],
        "the running proxy still serves"
    );

    // A file that is not a socket is refused, and left alone.
    let plain = dir.join("plain");
    std::fs::write(&plain, b"data").expect("plain file");
    let err = myplex::listener::Listener::bind(&socket_config(db, &plain)).expect_err("plain");
    assert!(err.to_string().contains("is not a socket"), "{err}");
    assert_eq!(std::fs::read(&plain).expect("kept"), b"data");

    // Removed at clean shutdown.
    drop(p);
    for _ in 0..200 {
        if !sock.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!sock.exists(), "socket file removed at shutdown");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn socket_settings_are_validated() {
    let bad = "listen = \"/tmp/x.sock\"\nlisten_socket_mode = \"rw\"\nlisten_socket_owner = \"no-such-user-xyz\"\n[[users]]\nname = \"a\"\npassword = \"b\"\n";
    let err = myplex::config::load_str(bad).expect_err("bad mode");
    assert!(err.to_string().contains("listen_socket_mode"), "{err}");
    let unknown_owner = "listen = \"/tmp/x.sock\"\nlisten_socket_owner = \"no-such-user-xyz\"\n[[users]]\nname = \"a\"\npassword = \"b\"\n";
    let cfg = myplex::config::load_str(unknown_owner).expect("loads");
    let err = myplex::listener::FileSettings::from_config(&cfg).expect_err("unknown owner");
    assert!(err.to_string().contains("listen_socket_owner"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_on_a_socket_proxy() {
    let db = MariaDb::shared();
    let dir = temp_dir();
    let sock = dir.join("reload.sock");
    let p = Proxy::builder(db)
        .listen_unix(&sock)
        .backend_socket(db)
        .max_backend(4)
        .start()
        .await;
    let path = dir.join("myplex.toml");
    let _ = p.shared.config_path.set(path.clone());
    let mut cfg: Config = (**p.shared.config.load()).clone();
    let write = |cfg: &Config| {
        std::fs::write(&path, toml::to_string(cfg).expect("toml")).expect("write config")
    };
    write(&cfg);
    let r = myplex::reload::reload(&p.shared).expect("unchanged file reloads");
    assert!(r.changed.is_empty(), "{r}");
    cfg.pool.max_backend_connections = 6;
    write(&cfg);
    let r = myplex::reload::reload(&p.shared).expect("reload");
    assert_eq!(r.changed, vec!["pool.max_backend_connections".to_string()]);
    cfg.listen_socket_mode = "0666".into();
    write(&cfg);
    let err = myplex::reload::reload(&p.shared).expect_err("needs a restart");
    assert!(err.to_string().contains("listen_socket_mode"), "{err}");
    let row = query_row(p.socket_url(APP_USER, APP_PASSWORD, "test"), "SELECT 3").await;
    assert_eq!(row, vec![Some("3".into())]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_users_on_the_socket_are_localhost() {
    // The server (skip-name-resolve) knows a socket client as `localhost`
    // only: a `localhost` account logs in on the socket and not over TCP
    // from 127.0.0.1; a `127.0.0.1` account the other way round.
    let db = MariaDb::shared();
    db.sql(
        "DROP USER IF EXISTS su_lh@localhost; DROP USER IF EXISTS su_ip@'127.0.0.1';\n\
         CREATE USER su_lh@localhost IDENTIFIED BY 'pw_lh'; GRANT SELECT ON test.* TO su_lh@localhost;\n\
         CREATE USER su_ip@'127.0.0.1' IDENTIFIED BY 'pw_ip'; GRANT SELECT ON test.* TO su_ip@'127.0.0.1';",
    );
    let dir = temp_dir();
    let sock = dir.join("su.sock");
    let server_users = |c: &mut Config| {
        c.server_users.enabled = true;
        c.server_users.lookup_user = "root".into();
        c.server_users.lookup_password = ROOT_PASSWORD.into();
    };
    // The proxy on the database host: sockets on both sides (its backend
    // logins are the server's `localhost` too).
    let on_socket = Proxy::builder(db)
        .listen_unix(&sock)
        .backend_socket(db)
        .with(server_users)
        .start()
        .await;
    let on_tcp = Proxy::builder(db).with(server_users).start().await;
    for (user, pw) in [("su_lh", "pw_lh"), ("su_ip", "pw_ip")] {
        let direct_sock = cli(&db.socket, user, pw, &[], "SELECT 1").await;
        let proxied_sock = cli(&sock, user, pw, &[], "SELECT 1").await;
        assert_eq!(
            direct_sock.status.success(),
            proxied_sock.status.success(),
            "{user} on the socket: direct\n{}\nproxied\n{}",
            text(&direct_sock),
            text(&proxied_sock)
        );
        if !direct_sock.status.success() {
            let e = String::from_utf8_lossy(&proxied_sock.stderr);
            assert!(e.contains("'localhost'"), "{e}");
        }
        let direct_tcp = mysql_async::Conn::from_url(db.url(user, pw, "test")).await;
        let proxied_tcp = mysql_async::Conn::from_url(on_tcp.url(user, pw, "test")).await;
        assert_eq!(
            direct_tcp.is_ok(),
            proxied_tcp.is_ok(),
            "{user} over TCP: {direct_tcp:?} / {proxied_tcp:?}"
        );
    }
    assert!(
        cli(&db.socket, "su_lh", "pw_lh", &[], "SELECT 1")
            .await
            .status
            .success(),
        "the localhost account logs in on the server's socket"
    );
    drop((on_socket, on_tcp));
    db.sql("DROP USER su_lh@localhost; DROP USER su_ip@'127.0.0.1';");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `status` of the CLI: TLS in use, and whether the login went through.
async fn tls_probe(socket: &Path, ssl: bool) -> (bool, bool, String) {
    let flags: &[&str] = if ssl {
        &["--ssl", "--ssl-verify-server-cert=0"]
    } else {
        &["--ssl=0"]
    };
    let out = cli(socket, APP_USER, APP_PASSWORD, flags, "status").await;
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let cipher = stdout
        .lines()
        .any(|l| l.starts_with("SSL:") && l.contains("Cipher in use"));
    (out.status.success(), cipher, text(&out))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_on_a_socket_as_the_server_does() {
    // The server offers TLS on its socket and accepts the upgrade there;
    // with require_secure_transport a plain socket client is accepted (the
    // socket is a secure transport). The proxy with require_tls must do
    // the same on its socket.
    let dir = temp_dir();
    let (cert, key) = self_signed(&dir.join("certs"));
    let server = MariaDb::start_with_args(&[
        &format!("--ssl-cert={cert}"),
        &format!("--ssl-key={key}"),
        "--require-secure-transport=ON",
    ]);
    let sock = dir.join("tls.sock");
    let p = Proxy::builder(&server)
        .listen_unix(&sock)
        .backend_socket(&server)
        .with(|c| {
            c.frontend.tls_cert = cert.clone();
            c.frontend.tls_key = key.clone();
            c.frontend.require_tls = true;
        })
        .start()
        .await;
    for ssl in [true, false] {
        let (direct_ok, direct_tls, direct) = tls_probe(&server.socket, ssl).await;
        let (proxied_ok, proxied_tls, proxied) = tls_probe(&sock, ssl).await;
        assert!(direct_ok, "{direct}");
        assert_eq!(
            (proxied_ok, proxied_tls),
            (direct_ok, direct_tls),
            "ssl={ssl}: direct\n{direct}\nproxied\n{proxied}"
        );
        assert_eq!(proxied_tls, ssl, "{proxied}");
    }
    drop(p);
    drop(server);
    let _ = std::fs::remove_dir_all(&dir);
}
