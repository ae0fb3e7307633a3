//! Configuration reload without drops: clients keep running statements while
//! the configuration file is changed and reloaded (`POST /reload`, the
//! console's `RELOAD MYPLEX`, SIGHUP on the binary). Users are added and
//! removed, the backend budget grows and shrinks, the log level changes, a
//! key that needs a restart is refused with its name, and no client sees an
//! error.

use crate::common;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::mariadb::{APP_PASSWORD, APP_USER, OTHER_PASSWORD, OTHER_USER};
use common::{MariaDb, Proxy, free_port};
use myplex::config::{Config, UserConfig};
use mysql_async::prelude::*;
use mysql_async::{Conn, Opts};

const LOAD_CLIENTS: usize = 40;

fn user(name: &str, pw: &str, admin: bool) -> UserConfig {
    UserConfig {
        name: name.into(),
        password: Some(pw.into()),
        backend_user: Some(APP_USER.into()),
        backend_password: Some(APP_PASSWORD.into()),
        admin,
        ..Default::default()
    }
}

fn write_config(path: &PathBuf, cfg: &Config) {
    std::fs::write(path, toml::to_string(cfg).expect("config as TOML")).expect("write config");
}

fn temp_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("myplex-reload-{}-{name}.toml", std::process::id()))
}

async fn login(url: &str) -> Result<Conn, mysql_async::Error> {
    Conn::new(Opts::from_url(url).expect("url")).await
}

/// Clients looping over a statement and a short transaction until stopped.
struct Load {
    stop: Arc<AtomicBool>,
    done: Arc<AtomicUsize>,
    tasks: Vec<tokio::task::JoinHandle<Vec<String>>>,
}

impl Load {
    fn start(url: String) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let done = Arc::new(AtomicUsize::new(0));
        let tasks = (0..LOAD_CLIENTS)
            .map(|i| {
                let (url, stop, done) = (url.clone(), stop.clone(), done.clone());
                tokio::spawn(async move {
                    let mut errors = Vec::new();
                    let mut c = match login(&url).await {
                        Ok(c) => c,
                        Err(e) => return vec![format!("client {i}: login: {e}")],
                    };
                    while !stop.load(Ordering::Relaxed) {
                        let r: Result<(), mysql_async::Error> = async {
                            let v: Option<u64> = c.query_first(format!("SELECT {i}")).await?;
                            assert_eq!(v, Some(i as u64));
                            c.query_drop("BEGIN").await?;
                            let _: Option<u64> = c.query_first("SELECT @@autocommit").await?;
                            c.query_drop("COMMIT").await?;
                            Ok(())
                        }
                        .await;
                        match r {
                            Ok(()) => {
                                done.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(e) => errors.push(format!("client {i}: {e}")),
                        }
                    }
                    let _ = c.disconnect().await;
                    errors
                })
            })
            .collect();
        Load { stop, done, tasks }
    }

    /// Waits until `n` more rounds completed (the load makes progress).
    async fn progress(&self, n: usize) {
        let start = self.done.load(Ordering::Relaxed);
        let t = Instant::now();
        while self.done.load(Ordering::Relaxed) < start + n {
            assert!(t.elapsed() < Duration::from_secs(20), "load stalled");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn finish(self) -> (usize, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        let mut errors = Vec::new();
        for t in self.tasks {
            errors.extend(t.await.expect("load task"));
        }
        (self.done.load(Ordering::Relaxed), errors)
    }
}

async fn post_reload(p: &Proxy) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(p.admin)
        .await
        .expect("admin");
    s.write_all(b"POST /reload HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
        .await
        .expect("write");
    let mut out = String::new();
    s.read_to_string(&mut out).await.expect("read");
    let code = out.get(9..12).and_then(|c| c.parse().ok()).unwrap_or(0);
    (
        code,
        out.split_once("\r\n\r\n")
            .map(|(_, b)| b.to_string())
            .unwrap_or_default(),
    )
}

async fn console_reload(p: &Proxy) -> (String, String) {
    let mut c = login(&p.url("boss", "bosspw", "test"))
        .await
        .expect("admin login");
    let row: Option<(String, String)> =
        c.query_first("RELOAD MYPLEX").await.expect("RELOAD MYPLEX");
    let _ = c.disconnect().await;
    row.expect("a result row")
}

async fn backends_max(p: &Proxy) -> u64 {
    let (code, body) = p.http_get("/status").await;
    assert_eq!(code, 200);
    let v: serde_json::Value = serde_json::from_str(&body).expect("status JSON");
    v["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .map(|g| {
            g["scheduler"]["backends_max"]
                .as_u64()
                .expect("backends_max")
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reload_under_load_changes_users_pool_and_log_level_without_errors() {
    let db = MariaDb::shared();
    let p = Proxy::builder(db)
        .groups(2)
        .max_backend(4)
        .with(|c| c.users.push(user("boss", "bosspw", true)))
        .start()
        .await;
    let path = temp_path("inproc");
    let _ = p.shared.config_path.set(path.clone());
    let mut cfg: Config = (**p.shared.config.load()).clone();
    write_config(&path, &cfg);
    // The unchanged file reloads cleanly.
    let (code, body) = post_reload(&p).await;
    assert_eq!(
        (code, body.trim()),
        (200, "configuration reloaded: no key changed")
    );

    let load = Load::start(p.app_url());
    load.progress(200).await;
    assert!(
        login(&p.url(OTHER_USER, OTHER_PASSWORD, "test"))
            .await
            .is_ok()
    );
    assert!(login(&p.url("carol", "carolpw", "test")).await.is_err());

    // 1. POST /reload: carol added, other removed, budget 4 → 6, log level.
    cfg.users.retain(|u| u.name != OTHER_USER);
    cfg.users.push(user("carol", "carolpw", false));
    cfg.pool.max_backend_connections = 6;
    cfg.log.level = "info,myplex=debug".into();
    write_config(&path, &cfg);
    let (code, body) = post_reload(&p).await;
    assert_eq!(code, 200, "{body}");
    for key in ["users", "pool.max_backend_connections", "log.level"] {
        assert!(body.contains(key), "reload names {key}: {body}");
    }
    load.progress(200).await;
    let mut carol = login(&p.url("carol", "carolpw", "test"))
        .await
        .expect("new user logs in");
    let one: Option<u8> = carol
        .query_first("SELECT 1")
        .await
        .expect("carol runs statements");
    assert_eq!(one, Some(1));
    match login(&p.url(OTHER_USER, OTHER_PASSWORD, "test")).await {
        Err(mysql_async::Error::Server(e)) => assert_eq!(e.code, 1045, "{e}"),
        other => panic!("removed user must get 1045, got {:?}", other.map(|_| ())),
    }
    assert_eq!(backends_max(&p).await, 6, "/status shows the new budget");
    assert_eq!(p.shared.config.load().log.level, "info,myplex=debug");

    // 2. RELOAD MYPLEX with a key that needs a restart: refused, by name,
    //    and nothing else in the file is applied.
    let mut bad = cfg.clone();
    bad.listen = "127.0.0.1:1".into();
    bad.pool.max_backend_connections = 8;
    write_config(&path, &bad);
    let (result, detail) = console_reload(&p).await;
    assert_eq!(result, "refused", "{detail}");
    assert!(
        detail.contains("listen cannot change without a restart"),
        "{detail}"
    );
    assert_eq!(backends_max(&p).await, 6, "refused reload changed nothing");
    load.progress(200).await;

    // 3. An invalid file: the error names the key; the old config stays.
    std::fs::write(&path, "[pool]\nqueue_timeout_ms = 0\n").expect("write");
    let (code, body) = post_reload(&p).await;
    assert_eq!(code, 400, "{body}");
    assert!(body.contains("pool.queue_timeout_ms"), "{body}");

    // 4. Shrink the budget 6 → 2 under load: idle connections above the new
    //    share close, clients keep going.
    cfg.pool.max_backend_connections = 2;
    write_config(&path, &cfg);
    let (result, detail) = console_reload(&p).await;
    assert_eq!(result, "reloaded", "{detail}");
    load.progress(200).await;
    let t = Instant::now();
    while p.backends_owned() > 2 {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "owned {} above the reloaded budget 2",
            p.backends_owned()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    load.progress(200).await;
    let one: Option<u8> = carol
        .query_first("SELECT 1")
        .await
        .expect("carol still works");
    assert_eq!(one, Some(1));

    let (rounds, errors) = load.finish().await;
    let _ = std::fs::remove_file(&path);
    eprintln!(
        "reload under load: {rounds} rounds by {LOAD_CLIENTS} clients, {} errors",
        errors.len()
    );
    assert!(
        errors.is_empty(),
        "client errors: {:?}",
        &errors[..errors.len().min(5)]
    );
}

/// The binary: SIGHUP reloads (it used to end the process).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_the_running_binary() {
    let db = MariaDb::shared();
    let (port, admin) = (free_port(), free_port());
    let mut cfg = Config {
        listen: format!("127.0.0.1:{port}"),
        admin_listen: format!("127.0.0.1:{admin}"),
        ..Default::default()
    };
    cfg.backend.address = db.addr();
    cfg.pool.thread_groups = 1;
    cfg.pool.max_backend_connections = 2;
    cfg.users = vec![user(APP_USER, APP_PASSWORD, false)];
    let path = temp_path("sighup");
    write_config(&path, &cfg);
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_myplex"))
        .arg("--config")
        .arg(&path)
        .kill_on_drop(true)
        .spawn()
        .expect("start myplex");
    let pid = child.id().expect("pid").to_string();
    let url =
        |u: &str, pw: &str| format!("mysql://{u}:{pw}@127.0.0.1:{port}/test?prefer_socket=false");
    let t = Instant::now();
    let mut app = loop {
        match login(&url(APP_USER, APP_PASSWORD)).await {
            Ok(c) => break c,
            Err(e) if t.elapsed() > Duration::from_secs(20) => panic!("myplex did not start: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    };
    assert!(login(&url("dave", "davepw")).await.is_err());
    cfg.users.push(user("dave", "davepw", false));
    write_config(&path, &cfg);
    let hup = || {
        std::process::Command::new("kill")
            .args(["-HUP", &pid])
            .status()
    };
    assert!(hup().expect("kill -HUP").success());
    let t = Instant::now();
    let mut dave = loop {
        match login(&url("dave", "davepw")).await {
            Ok(c) => break c,
            Err(e) if t.elapsed() > Duration::from_secs(10) => panic!("dave after SIGHUP: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    };
    assert!(
        child.try_wait().expect("try_wait").is_none(),
        "SIGHUP must not end myplex"
    );
    // A refused change (listen) leaves the process serving on the old port.
    cfg.listen = format!("127.0.0.1:{}", free_port());
    write_config(&path, &cfg);
    assert!(hup().expect("kill -HUP").success());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(child.try_wait().expect("try_wait").is_none());
    for c in [&mut app, &mut dave] {
        let one: Option<u8> = c
            .query_first("SELECT 1")
            .await
            .expect("session survives reloads");
        assert_eq!(one, Some(1));
    }
    let _ = child.start_kill();
    let _ = child.wait().await;
    let _ = std::fs::remove_file(&path);
}
