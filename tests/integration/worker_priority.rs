//! The binary's session threads run `worker_priority_boost` nice steps above
//! the process (per-group workers, or the shared runtime's threads), its
//! other threads as started, and `0` leaves every thread alone. Read from
//! `/proc/<pid>/task/*/stat` of a real myplex process serving a client.

use crate::common;

use common::binary::Binary;
use common::mariadb::{APP_PASSWORD, APP_USER};
use common::proxy::admin_get;
use common::{MariaDb, free_port};
use myplex::config::{Config, RuntimeMode, UserConfig};
use mysql_async::prelude::*;

/// The nice value in a `/proc/.../stat` line.
fn nice_in(stat: &str) -> i32 {
    // After "(comm) ": the state is field 3, the nice value field 19.
    let rest = &stat[stat.rfind(')').expect("stat") + 2..];
    rest.split(' ')
        .nth(19 - 3)
        .and_then(|f| f.parse().ok())
        .expect("nice field")
}

/// Each thread of `pid`: (thread id, name, nice value).
fn threads(pid: u32) -> Vec<(u32, String, i32)> {
    let mut out = Vec::new();
    for t in std::fs::read_dir(format!("/proc/{pid}/task")).expect("task dir") {
        let dir = t.expect("task").path();
        let tid = dir
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.parse().ok())
            .expect("thread id");
        let (Ok(comm), Ok(stat)) = (
            std::fs::read_to_string(dir.join("comm")),
            std::fs::read_to_string(dir.join("stat")),
        ) else {
            continue; // the thread ended meanwhile
        };
        out.push((tid, comm.trim().to_string(), nice_in(&stat)));
    }
    out
}

/// Starts the binary with `runtime`, `boost` and `session_threads` (two
/// thread groups), serves one client on each group, and returns its
/// threads while those clients are connected.
async fn serving_threads(
    db: &MariaDb,
    runtime: RuntimeMode,
    boost: u8,
    session_threads: usize,
) -> (u32, Vec<(u32, String, i32)>) {
    let port = free_port();
    let mut cfg = Config {
        listen: format!("127.0.0.1:{port}"),
        admin_listen: format!("127.0.0.1:{}", free_port()),
        runtime,
        session_threads,
        worker_priority_boost: boost,
        ..Default::default()
    };
    cfg.backend.address = db.addr();
    cfg.pool.thread_groups = 2;
    cfg.users = vec![UserConfig {
        name: APP_USER.into(),
        password: Some(APP_PASSWORD.into()),
        ..Default::default()
    }];
    let (bin, mut c) = Binary::start(&cfg, "priority").await;
    let pid = bin.pid;
    // Clients go to the groups in turn: the second is on the other group.
    let mut c2 = mysql_async::Conn::new(c.opts().clone())
        .await
        .expect("second client");
    for c in [&mut c, &mut c2] {
        let one: Option<i64> = c
            .query_first("SELECT 1")
            .await
            .expect("select through myplex");
        assert_eq!(one, Some(1));
    }
    let seen = threads(pid);
    // `/status` says what the session threads took.
    let status = admin_get(cfg.admin_listen.as_str(), "/status").await.1;
    let v: serde_json::Value = serde_json::from_str(&status).expect("status JSON");
    let sessions_on = match runtime {
        RuntimeMode::PerGroup => GROUP_WORKER,
        RuntimeMode::Shared => TOKIO_WORKER,
    };
    let expected = seen.iter().find(|(_, n, _)| n.starts_with(sessions_on));
    assert_eq!(
        v["session_threads_nice"].as_i64(),
        expected.map(|t| i64::from(t.2)),
        "{seen:?}"
    );
    if runtime == RuntimeMode::PerGroup {
        let carrying = group_workers(&seen);
        assert_eq!(
            v["session_threads"].as_u64(),
            Some(carrying as u64),
            "{seen:?}"
        );
        assert_eq!(carrying, cfg.effective_session_threads(), "{seen:?}");
    } else {
        assert!(v["session_threads"].is_null(), "{status}");
    }
    c.disconnect().await.expect("disconnect");
    c2.disconnect().await.expect("disconnect");
    bin.stop().await;
    (pid, seen)
}

/// How tokio names its runtime's threads.
const TOKIO_WORKER: &str = "tokio-rt-worker";

/// How the group workers are named.
const GROUP_WORKER: &str = "myplex-group-";

/// The group workers among `threads`.
fn group_workers(threads: &[(u32, String, i32)]) -> usize {
    threads
        .iter()
        .filter(|(_, n, _)| n.starts_with(GROUP_WORKER))
        .count()
}

/// The nice value a thread of a process started from here gets asked for.
fn wanted(base: i32, boost: u8) -> i32 {
    (base - i32::from(boost)).max(-20)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_threads_run_at_the_boosted_priority_and_only_they() {
    if !myplex::priority::may_lower_at_will() {
        eprintln!("skipped: lowering a nice value needs CAP_SYS_NICE here");
        return;
    }
    let db = MariaDb::shared();
    // The value the binary starts with: this thread's (inherited).
    let base = nice_in(&std::fs::read_to_string("/proc/thread-self/stat").expect("own stat"));

    let (pid, per_group) = serving_threads(db, RuntimeMode::PerGroup, 7, 2).await;
    let groups: Vec<_> = per_group
        .iter()
        .filter(|(_, n, _)| n.starts_with(GROUP_WORKER))
        .collect();
    assert_eq!(groups.len(), 2, "{per_group:?}");
    for (_, name, nice) in &groups {
        assert_eq!(*nice, wanted(base, 7), "{name}: {per_group:?}");
    }
    // The rest (the main thread, the listener's and admin's runtime) keep
    // the process's value.
    let rest: Vec<_> = per_group
        .iter()
        .filter(|(_, n, _)| !n.starts_with(GROUP_WORKER))
        .collect();
    assert!(rest.iter().any(|(tid, _, _)| *tid == pid), "{per_group:?}");
    assert!(rest.iter().all(|(_, _, n)| *n == base), "{per_group:?}");

    let (pid, shared) = serving_threads(db, RuntimeMode::Shared, 7, 0).await;
    let (workers, rest): (Vec<_>, Vec<_>) = shared
        .iter()
        .partition(|(_, n, _)| n.starts_with(TOKIO_WORKER));
    assert!(!workers.is_empty(), "{shared:?}");
    for (_, name, nice) in &workers {
        assert_eq!(*nice, wanted(base, 7), "{name}: {shared:?}");
    }
    let main = rest.iter().find(|(tid, _, _)| *tid == pid);
    assert_eq!(main.map(|m| m.2), Some(base), "{shared:?}");

    let (_, off) = serving_threads(db, RuntimeMode::PerGroup, 0, 2).await;
    assert!(off.iter().all(|(_, _, n)| *n == base), "{off:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thread_groups_share_the_session_threads() {
    // Two groups, a client on each. Beside the server (a loopback
    // address) the default is half the CPUs, at least one: on two CPUs
    // both groups' sessions run on one thread and both are served.
    let db = MariaDb::shared();
    let (_, auto) = serving_threads(db, RuntimeMode::PerGroup, 0, 0).await;
    let carrying = group_workers(&auto);
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    assert_eq!(carrying, (cpus / 2).clamp(1, 2), "{auto:?}");
    // Set: one, or one per group.
    for n in [1, 2] {
        let (_, set) = serving_threads(db, RuntimeMode::PerGroup, 0, n).await;
        assert_eq!(group_workers(&set), n, "{set:?}");
    }
}
