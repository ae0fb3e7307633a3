//! Listener hand-over between two real myplex processes (issue 20, part 1):
//! a new process started with `--takeover` (or by `SIGUSR2`) receives the
//! listening sockets over `takeover_socket`, the old one stops accepting and
//! drains. A connect loop sees no failed attempt across hand-overs; a
//! transaction on the old process finishes there; a bad config, a failure
//! after the listeners were received, or a crash before the commit leave
//! the old process serving (and its socket files in place).

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::mariadb::{APP_PASSWORD, APP_USER};
use common::{MariaDb, free_port};
use myplex::config::{Config, UserConfig};
use mysql_async::prelude::*;
use mysql_async::{Conn, Opts};
use tokio::process::{Child, Command};
use tokio::sync::mpsc::UnboundedReceiver;

/// Connection ids a new process skips past the old one's.
const ID_MARGIN: u64 = myplex::takeover::ID_MARGIN as u64;

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("myplex-takeover-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

/// A config for `db` listening on `listen`, with the control socket in `dir`.
fn config(db: &MariaDb, listen: String, dir: &Path) -> Config {
    let mut cfg = Config {
        listen,
        admin_listen: format!("127.0.0.1:{}", free_port()),
        takeover_socket: dir.join("takeover.sock").display().to_string(),
        ..Default::default()
    };
    cfg.backend.address = db.addr();
    cfg.pool.thread_groups = 1;
    cfg.pool.max_backend_connections = 4;
    cfg.log.level = "warn".into();
    cfg.users = vec![UserConfig {
        name: APP_USER.into(),
        password: Some(APP_PASSWORD.into()),
        ..Default::default()
    }];
    cfg
}

fn write(dir: &Path, name: &str, cfg: &Config) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, toml::to_string(cfg).expect("config as TOML")).expect("write config");
    p
}

fn myplex(config: &Path, takeover: bool) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_myplex"));
    c.arg("--config").arg(config).kill_on_drop(true);
    if takeover {
        c.arg("--takeover");
    }
    c
}

/// A client that sends its first statement right after login (no settings
/// query), as a one-shot application does.
fn tcp_url(port: u16) -> String {
    format!(
        "mysql://{APP_USER}:{APP_PASSWORD}@127.0.0.1:{port}/test?prefer_socket=false&max_allowed_packet=16777216&wait_timeout=28800"
    )
}

fn socket_url(path: &Path) -> String {
    format!(
        "mysql://{APP_USER}:{APP_PASSWORD}@localhost/test?socket={}&max_allowed_packet=16777216&wait_timeout=28800",
        path.display()
    )
}

async fn login(url: &str) -> Result<Conn, mysql_async::Error> {
    Conn::new(Opts::from_url(url).expect("url")).await
}

async fn wait_serving(url: &str) {
    let t = Instant::now();
    loop {
        match login(url).await {
            Ok(c) => {
                let _ = c.disconnect().await;
                return;
            }
            Err(e) if t.elapsed() > Duration::from_secs(30) => panic!("myplex did not start: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// The proxy connection id a new connection gets.
async fn connection_id(url: &str) -> u64 {
    let mut c = login(url).await.expect("login");
    let id: u64 = c
        .query_first("SELECT CONNECTION_ID()")
        .await
        .expect("CONNECTION_ID()")
        .expect("a row");
    let _ = c.disconnect().await;
    id
}

async fn exits(child: &mut Child, within: Duration) -> ExitStatus {
    tokio::time::timeout(within, child.wait())
        .await
        .expect("process did not exit in time")
        .expect("wait")
}

fn still_running(child: &mut Child) -> bool {
    child.try_wait().expect("try_wait").is_none()
}

/// A running myplex (the test's child) and what reaches it.
struct Running {
    dir: PathBuf,
    cfg: Config,
    /// Its configuration file.
    path: PathBuf,
    /// A client URL.
    url: String,
    child: Child,
    /// Its stderr, line by line.
    log: UnboundedReceiver<String>,
}

/// Starts myplex on TCP (or on a Unix socket file in its directory) and
/// waits until it serves.
async fn start(name: &str, unix: bool) -> Running {
    let dir = temp_dir(name);
    let (listen, url) = if unix {
        let sock = dir.join("myplex.sock");
        (sock.display().to_string(), socket_url(&sock))
    } else {
        let port = free_port();
        (format!("127.0.0.1:{port}"), tcp_url(port))
    };
    let cfg = config(MariaDb::shared(), listen, &dir);
    let path = write(&dir, "myplex.toml", &cfg);
    let mut child = myplex(&path, false)
        .stderr(Stdio::piped())
        .spawn()
        .expect("start myplex");
    let log = follow(child.stderr.take().expect("stderr"));
    wait_serving(&url).await;
    Running {
        dir,
        cfg,
        path,
        url,
        child,
        log,
    }
}

/// The lines of a process's stderr, echoed to the test's own.
fn follow(stderr: tokio::process::ChildStderr) -> UnboundedReceiver<String> {
    use tokio::io::AsyncBufReadExt;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        while let Ok(Some(l)) = lines.next_line().await {
            eprintln!("{l}");
            let _ = tx.send(l);
        }
    });
    rx
}

/// Waits for a log line containing `needle`.
async fn logged(log: &mut UnboundedReceiver<String>, needle: &str) {
    let found = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(l) = log.recv().await {
            if l.contains(needle) {
                return true;
            }
        }
        false
    })
    .await;
    assert!(matches!(found, Ok(true)), "no log line with {needle:?}");
}

/// Runs `--takeover` with `cfg` (written to `dir/name`): it must fail,
/// saying `reason` on stderr.
async fn takeover_fails(dir: &Path, name: &str, cfg: &Config, reason: &str) {
    let path = write(dir, name, cfg);
    let out = myplex(&path, true)
        .stderr(Stdio::piped())
        .output()
        .await
        .expect("run the successor");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{name} must fail: {stderr}");
    assert!(stderr.contains(reason), "{name}: {stderr}");
}

/// Clients connecting, running one SELECT and disconnecting, about 200
/// times a second in all, until stopped.
struct ConnectLoop {
    stop: Arc<AtomicBool>,
    attempts: Arc<AtomicUsize>,
    tasks: Vec<tokio::task::JoinHandle<Vec<String>>>,
}

impl ConnectLoop {
    fn start(url: String) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let attempts = Arc::new(AtomicUsize::new(0));
        let tasks = (0..4)
            .map(|_| {
                let (url, stop, attempts) = (url.clone(), stop.clone(), attempts.clone());
                tokio::spawn(async move {
                    let mut errors = Vec::new();
                    let mut tick = tokio::time::interval(Duration::from_millis(20));
                    while !stop.load(Ordering::Relaxed) {
                        tick.tick().await;
                        attempts.fetch_add(1, Ordering::Relaxed);
                        let r = async {
                            let mut c = login(&url).await?;
                            let one: Option<u32> = c.query_first("SELECT 1").await?;
                            assert_eq!(one, Some(1));
                            c.disconnect().await
                        }
                        .await;
                        if let Err(e) = r {
                            errors.push(e.to_string());
                        }
                    }
                    errors
                })
            })
            .collect();
        Self {
            stop,
            attempts,
            tasks,
        }
    }

    /// (attempts, errors).
    async fn finish(self) -> (usize, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        let mut errors = Vec::new();
        for t in self.tasks {
            errors.extend(t.await.expect("connect loop task"));
        }
        (self.attempts.load(Ordering::Relaxed), errors)
    }
}

/// Processes whose command line names `config` (the successors SIGUSR2
/// starts are not the test's children), except `but`.
fn pids_naming(config: &Path, but: &[u32]) -> Vec<u32> {
    let needle = config.as_os_str().as_encoded_bytes();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| !but.contains(pid))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.split(|&b| b == 0).any(|a| a == needle))
        })
        .collect()
}

fn signal(pid: u32, sig: &str) {
    let ok = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .expect("kill")
        .success();
    assert!(ok, "kill {sig} {pid}");
}

/// Ends the processes it names when dropped (a failed test leaves none).
struct Reaper(Vec<u32>);

impl Drop for Reaper {
    fn drop(&mut self) {
        for pid in &self.0 {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}

/// Two hand-overs in a row (`--takeover`, then `SIGUSR2`) under a connect
/// loop: no attempt fails, each old process exits after its drain, and
/// the new process's connection ids follow the old one's.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn connect_loop_sees_no_failure_across_two_takeovers() {
    let Running {
        path,
        url,
        child: mut first,
        ..
    } = start("loop", false).await;
    let id_before = connection_id(&url).await;
    let load = ConnectLoop::start(url.clone());
    tokio::time::sleep(Duration::from_millis(500)).await;

    let mut second = myplex(&path, true).spawn().expect("start successor");
    let second_pid = second.id().expect("pid");
    let status = exits(&mut first, Duration::from_secs(30)).await;
    assert!(status.success(), "old process after hand-over: {status}");
    assert!(still_running(&mut second), "the successor serves");
    let id_after = connection_id(&url).await;
    assert!(
        id_after >= id_before + ID_MARGIN,
        "ids of the new process ({id_after}) follow the old one's ({id_before})"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;

    // SIGUSR2: the successor starts the binary on disk with --takeover.
    signal(second_pid, "-USR2");
    let status = exits(&mut second, Duration::from_secs(30)).await;
    assert!(status.success(), "second process after SIGUSR2: {status}");
    let third = pids_naming(&path, &[second_pid]);
    let _reaper = Reaper(third.clone());
    assert_eq!(third.len(), 1, "one successor started by SIGUSR2");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (attempts, errors) = load.finish().await;
    assert!(attempts > 100, "the loop ran ({attempts} attempts)");
    assert!(
        errors.is_empty(),
        "{} of {attempts} attempts failed: {:?}",
        errors.len(),
        &errors[..errors.len().min(5)]
    );
    assert!(connection_id(&url).await >= id_after + ID_MARGIN);
    signal(third[0], "-TERM");
}

/// A client inside a transaction on the old process finishes it there;
/// new clients meanwhile reach the new process; the old one exits once the
/// transaction ended. On TCP both clients then move to the new process
/// (one logged in without a statement yet moves at once, the other at its
/// transaction's end) and go on without noticing; on a Unix socket (which
/// does not move) each is closed at its boundary, as a drain closes it.
async fn transaction_finishes_on_the_old_process(unix: bool) {
    let Running {
        cfg,
        path,
        url,
        child: mut old,
        ..
    } = start(if unix { "txn-unix" } else { "txn" }, unix).await;
    let table = format!("takeover_txn_{}_{unix}", std::process::id());
    let mut t = login(&url).await.expect("login");
    t.query_drop(format!(
        "CREATE OR REPLACE TABLE {table} (id INT PRIMARY KEY)"
    ))
    .await
    .expect("create");
    let old_id: u64 = t
        .query_first("SELECT CONNECTION_ID()")
        .await
        .expect("id")
        .expect("row");
    t.query_drop("BEGIN").await.expect("begin");
    t.query_drop(format!("INSERT INTO {table} VALUES (1)"))
        .await
        .expect("insert 1");

    // Logged in, no statement yet: a client accepted right before the
    // hand-over.
    let mut fresh = login(&url).await.expect("login");

    let mut new = myplex(&path, true).spawn().expect("start successor");
    // The hand-over is committed once new clients get the new process's ids.
    let t0 = Instant::now();
    while connection_id(&url).await < old_id + ID_MARGIN {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the new process never took over"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        still_running(&mut old),
        "the old process waits for the transaction"
    );
    let id: Option<u64> = fresh
        .query_first("SELECT CONNECTION_ID()")
        .await
        .expect("the first statement of a client accepted before the hand-over is served");
    assert!(
        id.is_some_and(|id| id < old_id + ID_MARGIN),
        "with the id it logged in with"
    );
    let again = fresh.query_drop("SELECT 1").await;
    assert_eq!(
        again.is_ok(),
        !unix,
        "moved on TCP, closed on a socket: {again:?}"
    );
    t.query_drop(format!("INSERT INTO {table} VALUES (2)"))
        .await
        .expect("insert 2 inside the transaction on the old process");
    t.query_drop("COMMIT").await.expect("commit");
    let after: Result<Option<u64>, _> = t.query_first("SELECT CONNECTION_ID()").await;
    if unix {
        assert!(after.is_err(), "closed at the transaction boundary");
    } else {
        assert_eq!(
            after.expect("moved at the boundary"),
            Some(old_id),
            "same connection id"
        );
    }
    let status = exits(&mut old, Duration::from_secs(30)).await;
    assert!(status.success(), "old process: {status}");
    let mut c = login(&url).await.expect("login to the new process");
    let n: Option<u64> = c
        .query_first(format!("SELECT COUNT(*) FROM {table}"))
        .await
        .expect("count");
    assert_eq!(n, Some(2), "the transaction committed whole");
    if !unix {
        // Both sessions are the new process's now, still usable.
        let n: Option<u64> = t
            .query_first(format!("SELECT COUNT(*) FROM {table}"))
            .await
            .expect("the moved session after the old process exited");
        assert_eq!(n, Some(2));
        fresh
            .query_drop("SELECT 1")
            .await
            .expect("the other moved session");
        assert_eq!(moved_in(&cfg).await, 2, "two sessions moved in");
    }
    c.query_drop(format!("DROP TABLE {table}"))
        .await
        .expect("drop");
    let _ = c.disconnect().await;
    assert!(still_running(&mut new));
    let _ = new.start_kill();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn transaction_finishes_on_the_old_process_then_moves() {
    transaction_finishes_on_the_old_process(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn transaction_finishes_on_the_old_process_then_closes_on_a_socket() {
    transaction_finishes_on_the_old_process(true).await;
}

/// `myplex_sessions_moved_total{direction="in",outcome="moved"}` of the
/// process serving `cfg`'s admin endpoint.
async fn moved_in(cfg: &Config) -> u64 {
    metric(
        cfg,
        "myplex_sessions_moved_total{direction=\"in\",outcome=\"moved\"}",
    )
    .await
}

/// A counter from the admin endpoint's `/metrics` (0 when absent).
async fn metric(cfg: &Config, series: &str) -> u64 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(&cfg.admin_listen)
        .await
        .expect("admin connect");
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .expect("admin write");
    let mut out = String::new();
    s.read_to_string(&mut out).await.expect("admin read");
    out.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse::<f64>().ok())
        .map_or(0, |v| v as u64)
}

/// A new process with a bad configuration (or without takeover_socket)
/// exits non-zero with the reason, before it contacts the running one,
/// which keeps serving and can still be taken over.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_config_leaves_the_old_process_serving() {
    let Running {
        dir,
        cfg,
        path,
        url,
        child: mut old,
        ..
    } = start("bad", false).await;
    let load = ConnectLoop::start(url.clone());

    let mut bad = cfg.clone();
    bad.pool.thread_groups = 5000;
    takeover_fails(&dir, "bad.toml", &bad, "pool.thread_groups").await;
    let mut off = cfg.clone();
    off.takeover_socket.clear();
    takeover_fails(&dir, "off.toml", &off, "takeover_socket").await;

    assert!(still_running(&mut old), "the old process keeps serving");
    let (attempts, errors) = load.finish().await;
    assert!(attempts > 0 && errors.is_empty(), "{errors:?}");

    let mut new = myplex(&path, true).spawn().expect("good successor");
    let status = exits(&mut old, Duration::from_secs(30)).await;
    assert!(status.success(), "{status}");
    wait_serving(&url).await;
    assert!(still_running(&mut new));
    let _ = new.start_kill();
}

/// On a Unix socket: a successor that fails after it received the
/// listeners (its admin port is taken) exits non-zero, and one killed
/// while it builds its pools (backend slow to answer) changes nothing: the
/// old process keeps accepting on its socket file, which stays. A good
/// successor then takes over, the file survives the old process's exit
/// and goes with the new one's.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn failed_or_crashed_successor_leaves_the_old_process_accepting() {
    let Running {
        dir,
        cfg,
        path,
        url,
        child: mut old,
        ..
    } = start("crash", true).await;
    let sock = dir.join("myplex.sock");
    let load = ConnectLoop::start(url.clone());

    // Fails after adopting the socket: its admin address is taken.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let mut failing = cfg.clone();
    failing.admin_listen = taken.local_addr().expect("addr").to_string();
    takeover_fails(&dir, "failing.toml", &failing, "admin_listen").await;
    assert!(sock.exists(), "the failed successor left the socket file");
    assert!(Path::new(&cfg.takeover_socket).exists());

    // Crashes after adopting the socket, while dialing a backend that
    // accepts and never answers.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let mut slow = cfg.clone();
    slow.backend.address = silent.local_addr().expect("addr").to_string();
    slow.backend.connect_timeout_ms = 60_000;
    let slow_path = write(&dir, "slow.toml", &slow);
    let mut crashing = myplex(&slow_path, true).spawn().expect("start successor");
    let (_dialed, _) = tokio::time::timeout(Duration::from_secs(30), silent.accept())
        .await
        .expect("the successor dials its backend")
        .expect("accept");
    crashing.start_kill().expect("SIGKILL");
    let _ = crashing.wait().await;

    assert!(still_running(&mut old), "the old process keeps serving");
    assert!(sock.exists());
    wait_serving(&url).await;
    let (attempts, errors) = load.finish().await;
    assert!(attempts > 0);
    assert!(errors.is_empty(), "{errors:?}");

    let mut new = myplex(&path, true).spawn().expect("good successor");
    let status = exits(&mut old, Duration::from_secs(30)).await;
    assert!(status.success(), "{status}");
    assert!(sock.exists(), "the old process keeps the handed-over file");
    wait_serving(&url).await;
    signal(new.id().expect("pid"), "-TERM");
    let status = exits(&mut new, Duration::from_secs(30)).await;
    assert!(status.success(), "{status}");
    assert!(!sock.exists(), "the last process removes its socket file");
}

/// SIGUSR2 with a configuration file turned bad: the successor fails, the
/// running process says so and keeps serving; once the file is fixed, the
/// next SIGUSR2 upgrades.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigusr2_with_a_bad_config_keeps_serving_then_upgrades() {
    let Running {
        cfg,
        path,
        url,
        child: mut old,
        mut log,
        ..
    } = start("usr2", false).await;
    let pid = old.id().expect("pid");
    let load = ConnectLoop::start(url.clone());
    let mut bad = cfg.clone();
    bad.pool.stall_limit_ms = 0;
    std::fs::write(&path, toml::to_string(&bad).expect("toml")).expect("write");
    signal(pid, "-USR2");
    logged(&mut log, "successor failed").await;
    assert!(still_running(&mut old), "the old process keeps serving");
    wait_serving(&url).await;

    std::fs::write(&path, toml::to_string(&cfg).expect("toml")).expect("write");
    signal(pid, "-USR2");
    let status = exits(&mut old, Duration::from_secs(30)).await;
    assert!(status.success(), "{status}");
    let successor = pids_naming(&path, &[pid]);
    let _reaper = Reaper(successor.clone());
    assert_eq!(successor.len(), 1, "one successor serves");
    let (attempts, errors) = load.finish().await;
    assert!(attempts > 0);
    assert!(errors.is_empty(), "{errors:?}");
    signal(successor[0], "-TERM");
}

/// A successor whose configuration moved the Unix socket binds the new
/// path; the old process removes its own file when it stops (nobody
/// listens there any more), instead of leaving it behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_moved_socket_path_leaves_no_stale_file() {
    let Running {
        dir,
        cfg,
        url,
        child: mut old,
        ..
    } = start("moved", true).await;
    let old_sock = dir.join("myplex.sock");
    let new_sock = dir.join("moved.sock");
    let mut moved = cfg.clone();
    moved.listen = new_sock.display().to_string();
    let moved_path = write(&dir, "moved.toml", &moved);
    let mut new = myplex(&moved_path, true).spawn().expect("successor");
    let status = exits(&mut old, Duration::from_secs(30)).await;
    assert!(status.success(), "{status}");
    assert!(!old_sock.exists(), "the old socket file is gone");
    assert!(login(&url).await.is_err());
    wait_serving(&socket_url(&new_sock)).await;
    assert!(still_running(&mut new));
    let _ = new.start_kill();
}

/// An idle TCP session moves to the new process with its state, through a
/// `--takeover` and then a `SIGUSR2` upgrade: the same connection id,
/// session variables, schema, last insert id, found rows, and a statement
/// it prepared (executed again under its old id, prepared lazily by the new
/// process); the old processes exit at once (nothing waits to drain).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_idle_session_moves_with_its_state() {
    let Running {
        cfg,
        path,
        url,
        child: mut first,
        ..
    } = start("state", false).await;
    let table = format!("takeover_state_{}", std::process::id());
    let mut c = login(&url).await.expect("login");
    c.query_drop(format!(
        "CREATE OR REPLACE TABLE {table} (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(10))"
    ))
    .await
    .expect("create");
    c.query_drop(
        "SET SESSION sql_mode = 'ANSI_QUOTES', time_zone = '+05:00', group_concat_max_len = 777",
    )
    .await
    .expect("set");
    c.query_drop(format!(
        "INSERT INTO {table} (v) VALUES ('a'), ('b'), ('c')"
    ))
    .await
    .expect("insert");
    let stmt = c
        .prep(format!("SELECT v FROM {table} WHERE id = ?"))
        .await
        .expect("prepare");
    let v: Option<String> = c.exec_first(&stmt, (1,)).await.expect("execute");
    assert_eq!(v.as_deref(), Some("a"));
    let expected = state(&mut c).await;
    assert_eq!(expected.4, 1, "LAST_INSERT_ID() of a three-row insert");
    // FOUND_ROWS() is the last result set's row count: 3 here.
    let rows: Vec<u32> = c
        .query(format!("SELECT id FROM {table}"))
        .await
        .expect("select");
    assert_eq!(rows.len(), 3);

    let mut second = myplex(&path, true).spawn().expect("start successor");
    let second_pid = second.id().expect("pid");
    let status = exits(&mut first, Duration::from_secs(10)).await;
    assert!(status.success(), "old process: {status}");
    let found: Option<u64> = c
        .query_first("SELECT FOUND_ROWS()")
        .await
        .expect("found rows");
    assert_eq!(found, Some(3), "FOUND_ROWS() after the move");
    assert_eq!(
        state(&mut c).await,
        expected,
        "state after the first upgrade"
    );
    let v: Option<String> = c
        .exec_first(&stmt, (2,))
        .await
        .expect("execute after the move");
    assert_eq!(v.as_deref(), Some("b"));
    assert_eq!(moved_in(&cfg).await, 1);

    signal(second_pid, "-USR2");
    let status = exits(&mut second, Duration::from_secs(10)).await;
    assert!(status.success(), "second process after SIGUSR2: {status}");
    let third = pids_naming(&path, &[second_pid]);
    let _reaper = Reaper(third.clone());
    assert_eq!(third.len(), 1, "one successor started by SIGUSR2");
    assert_eq!(
        state(&mut c).await,
        expected,
        "state after the second upgrade"
    );
    let v: Option<String> = c
        .exec_first(&stmt, (3,))
        .await
        .expect("execute after two moves");
    assert_eq!(v.as_deref(), Some("c"));
    c.query_drop(format!("DROP TABLE {table}"))
        .await
        .expect("drop");
    let _ = c.disconnect().await;
    signal(third[0], "-TERM");
}

/// What the state test compares: connection id, sql_mode, time_zone,
/// group_concat_max_len, LAST_INSERT_ID(), DATABASE().
async fn state(c: &mut Conn) -> (u64, String, String, u64, u64, String) {
    c.query_first("SELECT CONNECTION_ID(), @@sql_mode, @@time_zone, @@group_concat_max_len, LAST_INSERT_ID(), DATABASE()")
        .await
        .expect("state")
        .expect("row")
}

/// sysbench `oltp_read_write` keeps running through three upgrades in a row
/// (`--takeover`, then `SIGUSR2` twice): 0 errors, 0 reconnects. Its
/// sessions move between transactions.
async fn sysbench_across_three_upgrades(ps_mode: &'static [&'static str], schema: &str) {
    use common::load::innodb_deadlocks;
    use common::sysbench::{
        assert_clean_run, oltp_args, parse_stats, prepare, run_args, sysbench_async,
    };
    myplex::server::raise_fd_limit();
    let db = MariaDb::shared();
    prepare(db, schema, ps_mode).await;
    let Running {
        cfg,
        path,
        child: first,
        ..
    } = start(schema, false).await;
    let port: u16 = cfg
        .listen
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("port");
    let deadlocks_before = innodb_deadlocks(db);
    let mut run = oltp_args(port, APP_USER, APP_PASSWORD, schema, ps_mode);
    run.extend(run_args(16, 24));
    let load = tokio::spawn(sysbench_async(run, Duration::from_secs(70)));
    tokio::time::sleep(Duration::from_secs(5)).await;

    let (last, _reaper) = upgrade_three_times(first, &path, &cfg, Duration::from_secs(4)).await;
    let sb = load.await.expect("sysbench task");
    let deadlocks = innodb_deadlocks(db) - deadlocks_before;
    let stats = assert_clean_run(&sb, parse_stats(&sb.stdout), deadlocks);
    eprintln!(
        "[{schema}] {stats:?}, the last upgrade moved {} sessions in",
        moved_in(&cfg).await
    );
    signal(last, "-TERM");
}

/// Upgrades the running myplex (`first`, serving `cfg` from `path`) three
/// times, `between` apart: `--takeover`, then `SIGUSR2` twice. Each old
/// process must exit within 15 s and each new one must have taken
/// sessions in. Returns the last process's pid (and a reaper for the
/// processes the test did not start itself).
async fn upgrade_three_times(
    mut first: Child,
    path: &Path,
    cfg: &Config,
    between: Duration,
) -> (u32, Reaper) {
    let mut second = myplex(path, true).spawn().expect("start successor");
    let mut pids = vec![second.id().expect("pid")];
    let status = exits(&mut first, Duration::from_secs(15)).await;
    assert!(status.success(), "first process: {status}");
    let mut reaper = Reaper(Vec::new());
    assert!(
        moved_in(cfg).await > 0,
        "sessions moved to the second process"
    );
    for upgrade in 2..=3 {
        tokio::time::sleep(between).await;
        let old = *pids.last().expect("pid");
        signal(old, "-USR2");
        let t0 = Instant::now();
        while Path::new(&format!("/proc/{old}")).exists()
            && !std::fs::read_to_string(format!("/proc/{old}/stat"))
                .is_ok_and(|s| s.contains(") Z "))
        {
            assert!(
                t0.elapsed() < Duration::from_secs(15),
                "process {upgrade} did not hand over and exit"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let next = pids_naming(path, &pids);
        assert_eq!(
            next.len(),
            1,
            "one successor for upgrade {upgrade}: {next:?}"
        );
        reaper.0.push(next[0]);
        pids.push(next[0]);
        assert!(
            moved_in(cfg).await > 0,
            "sessions moved in upgrade {upgrade}"
        );
    }
    let _ = exits(&mut second, Duration::from_secs(1)).await;
    (*pids.last().expect("pid"), reaper)
}

/// Both protocols, one after the other: the deadlock count the clean-run
/// check compares with is the server's, shared by whatever runs at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sysbench_runs_through_three_upgrades_in_both_protocols() {
    sysbench_across_three_upgrades(&[], "sb_takeover_ps").await;
    sysbench_across_three_upgrades(&["--db-ps-mode=disable"], "sb_takeover_text").await;
}

/// Debian's Connector/J jar (package libmariadb-java).
const CONNECTOR_J: &str = "/usr/share/java/mariadb-java-client.jar";

/// A client of each driver family in the matrix keeps one session open
/// through three upgrades (tests/clients/*/upgrade_loop.*): a session
/// variable, the connection id and a server-side prepared statement stay
/// as they were, with no error and no reconnect on plain TCP; a TLS client
/// (whose session cannot move) is closed at a boundary and reconnects
/// cleanly. Runtimes come from scripts/install-deps.sh and
/// tests/clients/setup.sh (run here); a missing one fails the test unless
/// `MYPLEX_CLIENT_MATRIX_SKIP_MISSING=1`.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn drivers_run_through_three_upgrades() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let target = repo.join("target");
    let scripts = repo.join("tests/clients");
    let setup = std::process::Command::new("bash")
        .arg(scripts.join("setup.sh"))
        .status()
        .expect("tests/clients/setup.sh");
    let skip_missing = std::env::var("MYPLEX_CLIENT_MATRIX_SKIP_MISSING").is_ok_and(|v| v == "1");
    assert!(
        setup.success() || skip_missing,
        "tests/clients/setup.sh failed"
    );
    let classes = target.join("client-matrix/upgrade-java");
    std::fs::create_dir_all(&classes).expect("classes dir");
    let javac = std::process::Command::new("javac")
        .arg("-d")
        .arg(&classes)
        .args(["-cp", CONNECTOR_J])
        .arg(scripts.join("java/UpgradeLoop.java"))
        .status();
    let java_ok = javac.is_ok_and(|s| s.success());
    assert!(java_ok || skip_missing, "javac UpgradeLoop.java failed");

    let dir = temp_dir("drivers");
    let port = free_port();
    let mut cfg = config(MariaDb::shared(), format!("127.0.0.1:{port}"), &dir);
    let (cert, key) = common::tls::self_signed(&dir);
    cfg.frontend.tls_cert = cert;
    cfg.frontend.tls_key = key;
    let path = write(&dir, "myplex.toml", &cfg);
    let first = myplex(&path, false).spawn().expect("start myplex");
    wait_serving(&tcp_url(port)).await;

    let python = target.join("pyenv/bin/python");
    let stop = dir.join("stop");
    let mut clients: Vec<(String, std::process::Command)> = Vec::new();
    let mut add = |name: String, program: &Path, args: &[&str]| {
        let mut c = std::process::Command::new(program);
        c.args(args)
            .env("UL_HOST", "127.0.0.1")
            .env("UL_PORT", port.to_string())
            .env("UL_USER", APP_USER)
            .env("UL_PASSWORD", APP_PASSWORD)
            .env("UL_DB", "test")
            .env("UL_STOP", &stop)
            .env("NODE_PATH", target.join("node_modules"))
            .stdout(Stdio::piped());
        clients.push((name, c));
    };
    let py = |v: &str| {
        [
            scripts.join("python/upgrade_loop.py").display().to_string(),
            v.to_string(),
        ]
    };
    for v in ["pymysql", "connector", "mariadb", "pymysql_tls"] {
        let [script, variant] = py(v);
        add(format!("python-{v}"), &python, &[&script, &variant]);
    }
    let php = scripts.join("php/upgrade_loop.php").display().to_string();
    add("php-mysqli".into(), Path::new("php"), &[&php]);
    let perl = scripts.join("perl/upgrade_loop.pl").display().to_string();
    add("perl-dbd-mariadb".into(), Path::new("perl"), &[&perl]);
    let node = scripts.join("node/upgrade_loop.js").display().to_string();
    add("node-mysql2".into(), Path::new("node"), &[&node]);
    let cp = format!("{}:{CONNECTOR_J}", classes.display());
    add(
        "java-connector-j".into(),
        Path::new("java"),
        &["-cp", &cp, "UpgradeLoop"],
    );

    let mut running = Vec::new();
    for (name, mut c) in clients {
        match c.spawn() {
            Ok(child) => running.push((name, child)),
            Err(e) if skip_missing => eprintln!("{name}: not run ({e})"),
            Err(e) => panic!("{name}: {e}"),
        }
    }
    // Every client connected and running (Java starts slowest).
    tokio::time::sleep(Duration::from_secs(4)).await;
    let (last, _reaper) = upgrade_three_times(first, &path, &cfg, Duration::from_secs(2)).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    std::fs::write(&stop, b"").expect("stop file");
    let mut failures = Vec::new();
    for (name, child) in running {
        let out = tokio::task::spawn_blocking(move || child.wait_with_output())
            .await
            .expect("join")
            .expect("client output");
        let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
        eprintln!("{name}: {text}");
        let counts = text.strip_prefix("ok ").map(|rest| {
            let get = |k: &str| {
                rest.split_whitespace()
                    .find_map(|w| w.strip_prefix(k)?.parse::<u64>().ok())
                    .unwrap_or(0)
            };
            (get("statements="), get("reconnects="))
        });
        let tls = name.ends_with("_tls");
        let fine = match counts {
            Some((n, r)) if tls => n > 20 && (1..=3).contains(&r),
            Some((n, r)) => n > 20 && r == 0,
            None => skip_missing && text.contains("No module named"),
        };
        if !fine {
            failures.push(format!("{name}: {text} ({})", out.status));
        }
    }
    signal(last, "-TERM");
    assert!(
        failures.is_empty(),
        "clients across three upgrades:\n{}",
        failures.join("\n")
    );
}

/// A session finishing a transaction on the first process follows two
/// upgrades made in quick succession: the second process, already handing
/// over to a third, stays up while the first may still send it sessions,
/// and passes the session on.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_transaction_on_the_oldest_process_follows_two_quick_upgrades() {
    let Running {
        cfg,
        path,
        url,
        child: mut first,
        ..
    } = start("two-quick", false).await;
    let mut t = login(&url).await.expect("login");
    let id: Option<u64> = t.query_first("SELECT CONNECTION_ID()").await.expect("id");
    t.query_drop("BEGIN").await.expect("begin");
    t.query_drop("SELECT 1").await.expect("in the transaction");
    let mut idle = Vec::new();
    for _ in 0..5 {
        let mut c = login(&url).await.expect("login");
        c.query_drop("SELECT 1").await.expect("select");
        idle.push(c);
    }
    let mut second = myplex(&path, true).spawn().expect("second");
    let t0 = Instant::now();
    while moved_in(&cfg).await < 5 {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "idle sessions moved to the second process"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut third = myplex(&path, true).spawn().expect("third");
    // The third process has taken over once new clients get its ids, and
    // the second one has passed its five on once the third counts them.
    let t0 = Instant::now();
    while connection_id(&url).await < id.expect("id") + 2 * ID_MARGIN || moved_in(&cfg).await < 5 {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the third process took over"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        still_running(&mut first),
        "the first process waits for the transaction"
    );
    assert!(
        still_running(&mut second),
        "the second process waits for the first"
    );
    t.query_drop("COMMIT")
        .await
        .expect("commit on the first process");
    let after: Option<u64> = t
        .query_first("SELECT CONNECTION_ID()")
        .await
        .expect("the session went on after its transaction");
    assert_eq!(after, id);
    let gone = tokio::time::timeout(Duration::from_secs(10), first.wait()).await;
    assert!(
        gone.is_ok(),
        "the first process exits once its session moved"
    );
    let gone = tokio::time::timeout(Duration::from_secs(10), second.wait()).await;
    assert!(
        gone.is_ok(),
        "the second process exits once the first is gone"
    );
    for c in &mut idle {
        c.query_drop("SELECT 1")
            .await
            .expect("a moved idle session");
    }
    t.query_drop("SELECT 1")
        .await
        .expect("served by the third process");
    assert!(still_running(&mut third));
    let _ = third.start_kill();
}

/// The old process keeps no idle backends once it handed over: the two
/// processes together hold about one pool's worth of backend connections
/// while the old one drains (here it waits for one transaction).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_old_process_closes_its_idle_backends_at_the_hand_over() {
    let db = MariaDb::shared();
    let schema = format!("takeover_backends_{}", std::process::id());
    db.sql(&format!("CREATE DATABASE IF NOT EXISTS {schema}"));
    let Running {
        cfg,
        path,
        child: mut old,
        ..
    } = start("backends", false).await;
    let port: u16 = cfg
        .listen
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("port");
    let url = tcp_url(port).replace("/test?", &format!("/{schema}?"));
    let backends = || {
        db.sql(&format!(
            "SELECT COUNT(*) FROM information_schema.processlist WHERE db = '{schema}'"
        ))
        .trim()
        .parse::<usize>()
        .expect("count")
    };
    // Four clients at once: the old process's pool opens its four backends.
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(login(&url).await.expect("login"));
    }
    async fn sleep_together(clients: Vec<Conn>) -> Vec<Conn> {
        let tasks: Vec<_> = clients
            .into_iter()
            .map(|mut c| {
                tokio::spawn(async move {
                    c.query_drop("SELECT SLEEP(0.3)").await.expect("sleep");
                    c
                })
            })
            .collect();
        let mut back = Vec::new();
        for t in tasks {
            back.push(t.await.expect("client task"));
        }
        back
    }
    let clients = sleep_together(clients).await;
    let mut t = login(&url).await.expect("login");
    t.query_drop("BEGIN").await.expect("begin");
    t.query_drop("SELECT 1").await.expect("in the transaction");
    let before = backends();
    assert!(before >= 4, "the old process's pool: {before}");

    let mut new = myplex(&path, true).spawn().expect("successor");
    let t0 = Instant::now();
    while moved_in(&cfg).await < 4 {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the idle clients moved"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _clients = sleep_together(clients).await;
    assert!(
        still_running(&mut old),
        "the old process waits for the transaction"
    );
    let during = backends();
    assert!(
        during <= cfg.pool.max_backend_connections + 1,
        "{during} backends while the old process drains ({before} before; a pool is {})",
        cfg.pool.max_backend_connections
    );
    t.query_drop("COMMIT").await.expect("commit");
    assert!(exits(&mut old, Duration::from_secs(10)).await.success());
    let _ = new.start_kill();
    db.sql(&format!("DROP DATABASE {schema}"));
}
