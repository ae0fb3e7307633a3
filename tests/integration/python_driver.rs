//! Drivers of another language through the proxy: `tests/python/driver_check.py`
//! runs mysql-connector-python (pure Python, server-side prepared statements,
//! transactions, lastrowid, IntegrityError) and PyMySQL (text protocol,
//! multi-statements, warnings, ping), and checks every value round-trips.
//!
//! The script runs once directly against MariaDB (so a failure through the
//! proxy is the proxy's, not the script's) and then as four concurrent
//! processes through a proxy with only two backend connections.
//!
//! A second test, `diagnostics_follow_the_client`, checks with PyMySQL that
//! the diagnostics statements (SHOW WARNINGS, SHOW COUNT(*) WARNINGS,
//! @@warning_count, SHOW ERRORS, GET DIAGNOSTICS, ...) answer for the
//! client's own previous statement after its backend went to another client.
//!
//! The drivers live in a virtualenv at `target/pyenv`, pinned and created by
//! `tests/python/setup_venv.py` (which `scripts/install-deps.sh` also runs);
//! when the venv is missing or stale this test creates it rather than skip.

use crate::common;

use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::mariadb::{APP_PASSWORD, APP_USER, TEST_DB};
use common::{MariaDb, Proxy};

/// One driver_check.py run (it takes about a second when healthy).
const RUN_TIMEOUT: Duration = Duration::from_secs(120);
/// Creating the venv downloads the drivers from the package index.
const SETUP_TIMEOUT: Duration = Duration::from_secs(300);
/// Concurrent Python processes through the proxy.
const CLIENTS: usize = 4;
/// Backend connections the proxy may open; fewer than `CLIENTS`.
const BACKENDS: usize = 2;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn script(name: &str) -> PathBuf {
    repo().join("tests/python").join(name)
}

fn describe(out: &Output) -> String {
    format!(
        "status: {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs `cmd` to completion on a blocking thread, killing it after
/// `timeout`; a timeout panics with what the process printed so far.
async fn run(mut cmd: Command, what: &str, timeout: Duration) -> Output {
    let what = what.to_string();
    tokio::task::spawn_blocking(move || {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{what}: cannot run {cmd:?}: {e}"));
        let drain = |mut pipe: Box<dyn Read + Send>| {
            std::thread::spawn(move || {
                let mut buf = Vec::new();
                let _ = pipe.read_to_end(&mut buf);
                buf
            })
        };
        let stdout = drain(Box::new(child.stdout.take().expect("piped stdout")));
        let stderr = drain(Box::new(child.stderr.take().expect("piped stderr")));
        let deadline = Instant::now() + timeout;
        let (status, timed_out) = loop {
            match child.try_wait() {
                Ok(Some(status)) => break (status, false),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Ok(None) => {
                    let _ = child.kill();
                    break (child.wait().expect("wait after kill"), true);
                }
                Err(e) => panic!("{what}: wait failed: {e}"),
            }
        };
        let out = Output {
            status,
            stdout: stdout.join().expect("stdout reader"),
            stderr: stderr.join().expect("stderr reader"),
        };
        assert!(
            !timed_out,
            "{what}: still running after {timeout:?}, killed:\n{}",
            describe(&out)
        );
        out
    })
    .await
    .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
}

/// The venv's python, after making sure the venv holds the pinned drivers
/// (a no-op taking a fraction of a second when it already does).
async fn venv_python() -> PathBuf {
    let venv = repo().join("target/pyenv");
    let mut cmd = Command::new("python3");
    cmd.arg(repo().join("tests/python/setup_venv.py"))
        .arg(&venv);
    let out = run(cmd, "setup_venv.py", SETUP_TIMEOUT).await;
    assert!(
        out.status.success(),
        "creating the Python venv at {} failed (needs python3 with venv and pip, and the \
         package index):\n{}",
        venv.display(),
        describe(&out)
    );
    let said = String::from_utf8_lossy(&out.stderr);
    if !said.trim().is_empty() {
        eprintln!("{}", said.trim_end());
    }
    let python = venv.join("bin/python");
    assert!(python.exists(), "{} missing after setup", python.display());
    python
}

/// Runs `tests/python/<name>` with the app user's credentials for `addr`
/// (`host:port`) and `extra` arguments; panics with everything the script
/// printed unless it exits 0 with a JSON line saying `"ok": true`. Returns
/// its stdout.
async fn python_check(python: &Path, name: &str, addr: &str, extra: &[&str]) -> String {
    let (host, port) = addr.rsplit_once(':').expect("host:port");
    let mut cmd = Command::new(python);
    cmd.arg(script(name))
        .args([host, port, APP_USER, APP_PASSWORD, TEST_DB])
        .args(extra)
        .env("PYTHONUNBUFFERED", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1");
    let what = format!("{name} {} against {addr}", extra.join(" "));
    let out = run(cmd, &what, RUN_TIMEOUT).await;
    assert!(out.status.success(), "{what} failed:\n{}", describe(&out));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        stdout.contains("\"ok\": true"),
        "{what}: no success summary:\n{}",
        describe(&out)
    );
    stdout
}

/// driver_check.py with scratch tables named after `suffix`.
async fn driver_check(python: &Path, addr: &str, suffix: &str) -> String {
    let summary = python_check(python, "driver_check.py", addr, &[suffix]).await;
    assert!(
        summary.contains(&format!("\"suffix\": \"{suffix}\"")),
        "driver_check.py {suffix}: summary of another run? {summary}"
    );
    summary
}

/// The `backend_ids` list of a driver_check.py summary: the server thread
/// ids (`@@pseudo_thread_id`) its statements were seen running on.
fn backend_ids(summary: &str) -> BTreeSet<u64> {
    let key = "\"backend_ids\": [";
    let start = summary
        .find(key)
        .unwrap_or_else(|| panic!("no backend_ids in {summary}"))
        + key.len();
    let len = summary[start..].find(']').expect("backend_ids list ends");
    summary[start..start + len]
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.trim().parse().expect("backend id"))
        .collect()
}

/// Server-wide counters of binary-protocol commands, to prove the prepared
/// statements really were server-side ones.
fn stmt_counters(db: &MariaDb) -> (u64, u64) {
    let out = db
        .sql("SHOW GLOBAL STATUS WHERE Variable_name IN ('Com_stmt_prepare', 'Com_stmt_execute')");
    let mut prepare = None;
    let mut execute = None;
    for line in out.lines() {
        let mut cols = line.split('\t');
        let (name, value) = (cols.next(), cols.next().and_then(|v| v.parse().ok()));
        match name {
            Some(n) if n.eq_ignore_ascii_case("Com_stmt_prepare") => prepare = value,
            Some(n) if n.eq_ignore_ascii_case("Com_stmt_execute") => execute = value,
            _ => {}
        }
    }
    (
        prepare.unwrap_or_else(|| panic!("no Com_stmt_prepare in {out:?}")),
        execute.unwrap_or_else(|| panic!("no Com_stmt_execute in {out:?}")),
    )
}

fn panic_message(e: tokio::task::JoinError) -> String {
    if !e.is_panic() {
        return e.to_string();
    }
    let payload = e.into_panic();
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "panicked".into())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_drivers_through_proxy() {
    let python = venv_python().await;
    let db = MariaDb::shared();
    let tag = std::process::id();

    // 1. Directly against MariaDB: the script itself is right.
    let before = stmt_counters(db);
    let summary = driver_check(&python, &db.addr(), &format!("direct_{tag}")).await;
    println!("direct: {summary}");
    assert!(
        !backend_ids(&summary).is_empty(),
        "direct run saw no thread id"
    );
    let after = stmt_counters(db);
    // 100 inserts and 6 selects at least, all server-side.
    assert!(
        after.0 > before.0 && after.1 >= before.1 + 106,
        "direct run did not use server-side prepared statements: \
         (Com_stmt_prepare, Com_stmt_execute) {before:?} -> {after:?}"
    );

    // 2. Four concurrent processes through a proxy with two backends.
    let p = Proxy::builder(db)
        .groups(1)
        .max_backend(BACKENDS)
        .start()
        .await;
    let addr = p.addr.to_string();
    let before = stmt_counters(db);

    // Watch how many backend connections the proxy owns while they run.
    let max_owned = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let shared = p.shared.clone();
    let watcher = {
        let (max_owned, done) = (max_owned.clone(), done.clone());
        tokio::spawn(async move {
            while !done.load(Ordering::Relaxed) {
                let owned: usize = shared.pool.groups.iter().map(|g| g.snapshot().owned).sum();
                max_owned.fetch_max(owned, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
    };

    let runs: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let (python, addr) = (python.clone(), addr.clone());
            let suffix = format!("proxy{i}_{tag}");
            tokio::spawn(async move { driver_check(&python, &addr, &suffix).await })
        })
        .collect();
    let mut failures = Vec::new();
    let mut seen = BTreeSet::new();
    for (i, run) in runs.into_iter().enumerate() {
        match run.await {
            Ok(summary) => {
                println!("proxy client {i}: {summary}");
                let ids = backend_ids(&summary);
                assert!(!ids.is_empty(), "proxy client {i} saw no backend thread id");
                seen.extend(ids);
            }
            Err(e) => failures.push(format!("proxy client {i}: {}", panic_message(e))),
        }
    }
    done.store(true, Ordering::Relaxed);
    watcher.await.expect("watcher");
    assert!(
        failures.is_empty(),
        "{} of {CLIENTS} Python clients failed through the proxy:\n{}",
        failures.len(),
        failures.join("\n\n")
    );

    // Four processes' statements ran on at most two server connections, so
    // (pigeonhole) some backend connection served more than one process.
    assert!(
        seen.len() <= BACKENDS,
        "{CLIENTS} clients ran on backend threads {seen:?}, more than the {BACKENDS} allowed"
    );

    let after = stmt_counters(db);
    assert!(
        after.0 > before.0 && after.1 >= before.1 + (CLIENTS as u64) * 106,
        "proxied runs did not reach the server as prepared statements: \
         (Com_stmt_prepare, Com_stmt_execute) {before:?} -> {after:?}"
    );
    let max_owned = max_owned.load(Ordering::Relaxed);
    assert!(
        (1..=BACKENDS).contains(&max_owned) && p.backends_owned() <= BACKENDS,
        "the proxy owned {max_owned} backend connections at most (now {}), limit {BACKENDS}",
        p.backends_owned()
    );
}

/// SHOW WARNINGS / SHOW ERRORS / SHOW COUNT(*) ... / @@warning_count /
/// @@error_count / GET DIAGNOSTICS after a statement describe that
/// statement, also when the backend that ran it is busy with another
/// client by then (the script arranges exactly that, see its docstring).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn diagnostics_follow_the_client() {
    let python = venv_python().await;
    let db = MariaDb::shared();
    println!(
        "direct: {}",
        python_check(&python, "diagnostics_move.py", &db.addr(), &[]).await
    );
    let p = Proxy::builder(db)
        .groups(1)
        .max_backend(BACKENDS)
        .start()
        .await;
    println!(
        "proxy: {}",
        python_check(&python, "diagnostics_move.py", &p.addr.to_string(), &[]).await
    );
}
