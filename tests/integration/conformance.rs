//! Conformance: MariaDB's own test suite, direct and through myplex.
//!
//! Runs the mysqltest cases listed in `tests/conformance/cases.txt` (from
//! `mysql-test/main` of Debian's `mariadb-test` package), each in plain and
//! in `--ps-protocol` mode, and the `mariadb-client-test` tests listed in
//! `tests/conformance/client_tests.txt`, twice: against MariaDB directly
//! and through myplex (transaction pooling, 2 thread groups, 8 backend
//! connections) in front of identically configured MariaDBs (each side
//! spreads the cases over a few servers, one case at a time per server,
//! reset between cases). Each mysqltest case's output is compared with its
//! `.result` file.
//!
//! Asserts (1) that enough cases pass directly (a broken harness passes
//! nothing) and (2) that everything that passes directly passes through the
//! proxy, except the differences listed in
//! `tests/conformance/known_differences.txt` /
//! `client_known_differences.txt`, each of which names the
//! `docs/compatibility.md` entry that explains why it cannot pass under
//! transaction pooling.
//!
//! `CONFORMANCE_NO_BUDGET=1` lifts the time budget (every case runs even
//! when hung cases through the proxy eat it). `CONFORMANCE_ONLY=a,b` runs
//! only the named cases / client tests (for working on one case; the
//! minimum-pass checks are then skipped). `CONFORMANCE_GENERAL_LOG=1` turns
//! on each server's general query log (`target/conformance/server-tmp<n>/
//! general.log`), to see what reached the server when a case fails.
//!
//! Per case and mode the status on both lanes goes to
//! `target/conformance/summary.txt` (and is printed); outputs, logs and
//! diffs of failures stay in `target/conformance/{direct,proxy}/`.
//!
//! The servers run with the settings mysql-test-run gives its server where
//! results depend on them (MyISAM default engine, engine-independent
//! statistics, small buffers, name resolution so that 127.0.0.1 logs in as
//! `root@localhost`), on top of the fixture's production profile (binary
//! log in ROW format).

mod lists;
mod runner;
mod suite;

use crate::common;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::mariadb::ROOT_PASSWORD;
use common::{MariaDb, Proxy};
use myplex::config::UserConfig;
use runner::{Lane, Mode, Status};
use suite::{Inversions, Suite};

/// mysqltest cases that must pass directly in each mode.
const MIN_DIRECT_CASES: usize = 150;
/// Client tests that must pass directly.
const MIN_DIRECT_CLIENT_TESTS: usize = 150;
/// Servers (lanes) per side; cases are independent, so each side spreads
/// them over its lanes. The proxied side gets more: a case that hangs
/// through the proxy holds its lane for the whole per-case limit.
const DIRECT_SHARDS: usize = 2;
const PROXY_SHARDS: usize = 4;
/// Time budgets of the two phases on each side (the sides run in
/// parallel): what is not started in time is reported as not run (and
/// fails the test). With the per-case limit (`runner::CASE_TIMEOUT`) this
/// bounds the whole test to about 4 minutes even when the proxy hangs.
const CASES_BUDGET: Duration = Duration::from_secs(130);
const CLIENT_BUDGET: Duration = Duration::from_secs(40);

/// Server options mysql-test-run sets (include/default_mysqld.cnf) that
/// the listed cases' results depend on, on top of the fixture's
/// production profile (binary log, ROW format). Name resolution (from
/// /etc/hosts) makes a client on 127.0.0.1 `root@localhost`, as the
/// results expect.
const SERVER_ARGS: &[&str] = &[
    "--skip-name-resolve=0",
    "--default-storage-engine=MyISAM",
    "--log-bin-trust-function-creators=1",
    "--key-buffer-size=1M",
    "--sort-buffer-size=256K",
    "--max-heap-table-size=1M",
    "--local-infile",
    "--use-stat-tables=preferably",
    "--histogram-type=json_hb",
    "--binlog-direct-non-transactional-updates",
    "--innodb-buffer-pool-size=64M",
];

type Results = BTreeMap<(String, Mode), Status>;

fn out_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/conformance")
}

#[test]
fn mariadb_test_suite_direct_and_through_proxy() {
    // Six servers and their mysqltest runs: the other heavy tests wait.
    let _heavy = common::heavy();
    let started = Instant::now();
    let suite = Suite::locate();
    let only = lists::only();
    let cases = lists::names("cases.txt");
    let client_tests = lists::names("client_tests.txt");
    let (cases, client_tests) = match &only {
        Some(only) => (
            cases.into_iter().filter(|c| only.contains(c)).collect(),
            client_tests
                .into_iter()
                .filter(|c| only.contains(c))
                .collect(),
        ),
        None => (cases, client_tests),
    };
    let known = lists::known_case_differences("known_differences.txt");
    let known_client = lists::known_client_differences("client_known_differences.txt");

    let root = out_root();
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).expect("create target/conformance");
    let inversions = suite.build_overlay(&root.join("overlay"), ROOT_PASSWORD, &cases);

    // The servers of both sides, started in parallel; one proxy per proxied
    // server.
    // Each server gets its own tmpdir: cases that clean up temporary files
    // must not race with another server's.
    let servers: Vec<MariaDb> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..DIRECT_SHARDS + PROXY_SHARDS)
            .map(|i| {
                let tmp = root.join(format!("server-tmp{i}"));
                std::fs::create_dir_all(&tmp).expect("create server tmpdir");
                s.spawn(move || {
                    let tmpdir = format!("--tmpdir={}", tmp.display());
                    let log = format!("--general-log-file={}", tmp.join("general.log").display());
                    let mut args = SERVER_ARGS.to_vec();
                    args.push(&tmpdir);
                    if std::env::var_os("CONFORMANCE_GENERAL_LOG").is_some() {
                        args.extend(["--general-log=1", &log]);
                    }
                    start_server(&args)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("start server"))
            .collect()
    });
    let (direct_dbs, proxied_dbs) = servers.split_at(DIRECT_SHARDS);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let start_proxy = |db: &MariaDb| -> Proxy {
        rt.block_on(
            Proxy::builder(db)
                .groups(2)
                .max_backend(8)
                .with(|cfg| {
                    cfg.users.push(UserConfig {
                        name: "root".into(),
                        password: Some(ROOT_PASSWORD.into()),
                        ..Default::default()
                    });
                    // Accounts the cases create log in as on the server:
                    // looked up through root on every login (no caching,
                    // passwordless accounts allowed, as mysqltest uses them).
                    let su = &mut cfg.server_users;
                    su.enabled = true;
                    su.lookup_user = "root".into();
                    su.lookup_password = ROOT_PASSWORD.into();
                    su.cache_ttl_s = 0;
                    su.negative_ttl_s = 0;
                    su.max_lookups_per_s = 10_000;
                    su.allow_no_password = true;
                })
                .start(),
        )
    };
    let proxies: Vec<Mutex<Option<Proxy>>> = proxied_dbs
        .iter()
        .map(|db| Mutex::new(Some(start_proxy(db))))
        .collect();
    let direct: Vec<Lane> = direct_dbs
        .iter()
        .enumerate()
        .map(|(i, db)| Lane::new(db, db.port, None, &suite, root.join(format!("direct{i}"))))
        .collect();
    let proxied: Vec<Lane> = proxied_dbs
        .iter()
        .zip(&proxies)
        .enumerate()
        .map(|(i, (db, slot))| {
            let port = slot
                .lock()
                .expect("proxy slot")
                .as_ref()
                .map(|p| p.addr.port())
                .expect("proxy started");
            let restart = move || {
                let mut slot = slot.lock().expect("proxy slot");
                drop(slot.take());
                runner::kill_all_sessions(db);
                let px = start_proxy(db);
                let port = px.addr.port();
                *slot = Some(px);
                port
            };
            let describe = move || {
                let slot = slot.lock().expect("proxy slot");
                slot.as_ref()
                    .map_or_else(String::new, |p| describe_proxy(&p.shared))
            };
            Lane::new(
                db,
                port,
                Some(Box::new(restart)),
                &suite,
                root.join(format!("proxy{i}")),
            )
            .describing(Box::new(describe))
        })
        .collect();
    let setup = started.elapsed();

    let overlay = root.join("overlay");
    let jobs = Jobs {
        suite: &suite,
        overlay: &overlay,
        known: &known,
        cases: &cases,
        inversions: &inversions,
        client_tests: &client_tests,
    };
    let (d, p) = std::thread::scope(|s| {
        let d = s.spawn(|| jobs.run(&direct));
        let p = s.spawn(|| jobs.run(&proxied));
        (
            d.join().expect("direct lanes panicked"),
            p.join().expect("proxy lanes panicked"),
        )
    });
    drop(proxied);
    drop(proxies);

    let mut problems = Vec::new();
    let mut summary = String::new();
    let _ = writeln!(
        summary,
        "# myplex conformance: MariaDB test suite ({}), direct vs through myplex \
         (transaction pooling, 2 groups, 8 backends); setup {:.0?}, total {:.0?}",
        suite.root.display(),
        setup,
        started.elapsed()
    );
    for (name, shards, side) in [("direct", DIRECT_SHARDS, &d), ("proxy", PROXY_SHARDS, &p)] {
        let _ = writeln!(
            summary,
            "# {name} ({shards} servers): mysqltest cases {:.0?}, client tests {:.0?}",
            side.cases_time, side.client_time
        );
    }
    report_cases(
        &mut summary,
        &mut problems,
        &cases,
        (&d.cases, &d.case_times),
        (&p.cases, &p.case_times),
        &known,
    );
    report_client(
        &mut summary,
        &mut problems,
        &client_tests,
        (&d.client, &d.client_times),
        (&p.client, &p.client_times),
        &known_client,
    );

    std::fs::write(root.join("summary.txt"), &summary).expect("write summary.txt");
    println!("{summary}");
    println!("(written to {})", root.join("summary.txt").display());
    assert!(
        problems.is_empty(),
        "{} conformance problem(s):\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// A phase budget, unless `CONFORMANCE_NO_BUDGET` is set (to see every
/// case's result locally while the proxy still hangs on some).
fn budget(d: Duration) -> Duration {
    if std::env::var_os("CONFORMANCE_NO_BUDGET").is_some() {
        Duration::from_secs(24 * 3600)
    } else {
        d
    }
}

/// `MariaDb::start_with_args`, retried: bootstrapping four servers at
/// once has been seen to fail transiently (a temporary file in the shared
/// /tmp vanishing under mariadb-install-db).
fn start_server(args: &[&str]) -> MariaDb {
    for attempt in 1..3 {
        match std::panic::catch_unwind(|| MariaDb::start_with_args(args)) {
            Ok(db) => return db,
            Err(_) => eprintln!("conformance: server start attempt {attempt} failed, retrying"),
        }
    }
    MariaDb::start_with_args(args)
}

/// The work of one side (direct or proxied): every case in both modes,
/// then every client test, spread over that side's lanes (each lane takes
/// the next job when it is free; a job runs wholly on one server).
struct Jobs<'a> {
    suite: &'a Suite,
    overlay: &'a Path,
    /// Listed differences and OPEN failures: expected to fail, not retried.
    known: &'a BTreeMap<(String, Mode), String>,
    cases: &'a [String],
    inversions: &'a BTreeMap<String, Inversions>,
    client_tests: &'a [String],
}

impl Jobs<'_> {
    fn run(&self, lanes: &[Lane]) -> SideRun {
        let t0 = Instant::now();
        let case_jobs: Vec<(String, Mode)> = self
            .cases
            .iter()
            .flat_map(|c| [(c.clone(), Mode::Plain), (c.clone(), Mode::Ps)])
            .collect();
        let deadline = t0 + budget(CASES_BUDGET);
        let (cases, case_times) = self.spread(lanes, &case_jobs, deadline, |lane, (case, mode)| {
            let run = || {
                lane.run_case(
                    self.suite,
                    self.overlay,
                    case,
                    *mode,
                    &self.inversions[case],
                )
            };
            let first = run();
            // Through the proxy, a case that fails once is run once more
            // (not after a hang): cases that set a global and then open a
            // connection pass or fail depending on whether a pooled backend
            // predates the change (docs/compatibility.md#set-global). A
            // deterministic failure fails both runs.
            match first {
                Status::Fail(ref why)
                    if lane.proxied()
                        && !why.contains("timed out")
                        && !self.known.contains_key(&(case.clone(), *mode)) =>
                {
                    let second = run();
                    if second.is_pass() {
                        eprintln!("conformance: {case} {} failed once through the proxy, passed on retry: {why}", mode.name());
                    }
                    second
                }
                other => other,
            }
        });
        let cases_time = t0.elapsed();
        let t1 = Instant::now();
        let deadline = t1 + budget(CLIENT_BUDGET);
        let (client, client_times) =
            self.spread(lanes, self.client_tests, deadline, |lane, test| {
                lane.run_client_test(self.suite, test)
            });
        SideRun {
            cases,
            case_times,
            client,
            client_times,
            cases_time,
            client_time: t1.elapsed(),
        }
    }

    /// Runs `jobs` on `lanes` in parallel; jobs not started before the
    /// deadline are `NotRun`.
    fn spread<J: Ord + Clone + Send + Sync>(
        &self,
        lanes: &[Lane],
        jobs: &[J],
        deadline: Instant,
        run: impl Fn(&Lane, &J) -> Status + Sync,
    ) -> (BTreeMap<J, Status>, BTreeMap<J, Duration>) {
        let next = AtomicUsize::new(0);
        let results = Mutex::new(BTreeMap::new());
        std::thread::scope(|s| {
            for lane in lanes {
                s.spawn(|| {
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(job) = jobs.get(i) else { break };
                        let t = Instant::now();
                        let (status, lane_broken) = if t > deadline {
                            (Status::NotRun, false)
                        } else {
                            // A panic here is the harness failing (e.g. the
                            // server died): record it, retire this lane, let
                            // the others finish the work.
                            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                                run(lane, job)
                            })) {
                                Ok(status) => (status, false),
                                Err(e) => {
                                    let msg = e
                                        .downcast_ref::<String>()
                                        .cloned()
                                        .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                                        .unwrap_or_default();
                                    let first = msg.lines().take(3).collect::<Vec<_>>().join(" ");
                                    (
                                        Status::Fail(format!(
                                            "harness error (lane retired): {first}"
                                        )),
                                        true,
                                    )
                                }
                            }
                        };
                        results
                            .lock()
                            .expect("results lock")
                            .insert(job.clone(), (status, t.elapsed()));
                        if lane_broken {
                            break;
                        }
                    }
                });
            }
        });
        let mut all = results.into_inner().expect("results lock");
        // Jobs no lane got to (every lane retired).
        for job in jobs {
            all.entry(job.clone())
                .or_insert((Status::NotRun, Duration::ZERO));
        }
        let times = all.iter().map(|(j, (_, d))| (j.clone(), *d)).collect();
        (all.into_iter().map(|(j, (s, _))| (j, s)).collect(), times)
    }
}

/// What one side produced.
struct SideRun {
    cases: Results,
    case_times: BTreeMap<(String, Mode), Duration>,
    client: BTreeMap<String, Status>,
    client_times: BTreeMap<String, Duration>,
    cases_time: Duration,
    client_time: Duration,
}

/// Status column text.
fn cell(s: &Status) -> String {
    s.word().to_string()
}

/// A short signature of a failure cause, to group failures in the
/// summary: the server error (name and code) if there is one, else the
/// kind of mismatch.
fn signature(cause: &str) -> String {
    // An error name, not "…_CHARACTER_SET_…" inside the query text.
    let er = cause.match_indices("ER_").map(|(i, _)| i).find(|&i| {
        i == 0 || !cause[..i].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
    });
    if let Some(i) = er {
        let name: String = cause[i..]
            .chars()
            .take_while(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || *c == '_')
            .collect();
        // "…: 'message'" or "…): message" follows the name.
        let msg = cause[i + name.len()..]
            .trim_start_matches(|c: char| {
                c == ' ' || c == '(' || c.is_ascii_digit() || c == ')' || c == ':'
            })
            .trim_start_matches('\'');
        let msg: String = msg.chars().take(60).collect();
        return format!("{name}: {msg}");
    }
    for needle in [
        "Timeout in ",
        "timed out",
        "Could not open connection",
        "connection failed",
        "Lost connection",
        "Access denied",
    ] {
        if let Some(i) = cause.find(needle) {
            return cause[i..].chars().take(70).collect();
        }
    }
    if cause.starts_with("line ") {
        return "result differs from .result".into();
    }
    cause.chars().take(70).collect()
}

/// Failures through the proxy (of direct passes, not known), grouped by
/// signature, largest group first.
fn grouped_failures(items: &[(String, String)]) -> String {
    let mut groups: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for (what, cause) in items {
        groups.entry(signature(cause)).or_default().push(what);
    }
    let mut groups: Vec<_> = groups.into_iter().collect();
    groups.sort_by_key(|(_, v)| std::cmp::Reverse(v.len()));
    let mut out = String::new();
    for (sig, whats) in groups {
        let shown: Vec<&str> = whats.iter().take(12).copied().collect();
        let more = if whats.len() > shown.len() {
            format!(" … +{}", whats.len() - shown.len())
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "{:>4}  {sig}\n      {}{more}",
            whats.len(),
            shown.join(", ")
        );
    }
    out
}

fn cause(s: &Status) -> Option<&str> {
    match s {
        Status::Fail(c) | Status::Skipped(c) => Some(c),
        _ => None,
    }
}

fn report_cases(
    out: &mut String,
    problems: &mut Vec<String>,
    cases: &[String],
    (direct, d_times): (&Results, &BTreeMap<(String, Mode), Duration>),
    (proxied, p_times): (&Results, &BTreeMap<(String, Mode), Duration>),
    known: &BTreeMap<(String, Mode), String>,
) {
    for (case, mode) in known.keys() {
        if !cases.contains(case) && lists::only().is_none() {
            problems.push(format!(
                "known_differences.txt names {case} {}, which is not in cases.txt",
                mode.name()
            ));
        }
    }
    let _ = writeln!(
        out,
        "\n## mysqltest cases ({} listed, each plain and --ps-protocol)\n",
        cases.len()
    );
    for mode in [Mode::Plain, Mode::Ps] {
        let count = |r: &Results, f: fn(&Status) -> bool| {
            cases
                .iter()
                .filter(|c| f(&r[&((*c).clone(), mode)]))
                .count()
        };
        let d_pass = count(direct, Status::is_pass);
        let both = cases
            .iter()
            .filter(|c| {
                let k = ((*c).clone(), mode);
                direct[&k].is_pass() && proxied[&k].is_pass()
            })
            .count();
        let known_n = cases
            .iter()
            .filter(|c| {
                let k = ((*c).clone(), mode);
                direct[&k].is_pass() && !proxied[&k].is_pass() && known.contains_key(&k)
            })
            .count();
        let _ = writeln!(
            out,
            "mode {:<5}: direct pass {d_pass}, fail {}, skipped {}, not run {} | \
             through proxy: {both} of the {d_pass} direct passes pass, {known_n} known differences, \
             {} unexplained failures",
            mode.name(),
            count(direct, |s| matches!(s, Status::Fail(_))),
            count(direct, |s| matches!(s, Status::Skipped(_))),
            count(direct, |s| *s == Status::NotRun),
            d_pass - both - known_n,
        );
        if d_pass < MIN_DIRECT_CASES && lists::only().is_none() {
            problems.push(format!(
                "only {d_pass} cases pass directly in {} mode (need {MIN_DIRECT_CASES}): harness or environment broken",
                mode.name()
            ));
        }
    }
    let mut table = String::new();
    let mut failures = Vec::new();
    let _ = writeln!(
        table,
        "\n{:<36} {:<5} {:<8} {:<8} {:>6} {:>6} note",
        "case", "mode", "direct", "proxy", "d-sec", "p-sec"
    );
    for case in cases {
        for mode in [Mode::Plain, Mode::Ps] {
            let k = (case.clone(), mode);
            let (d, p) = (&direct[&k], &proxied[&k]);
            let note = if !d.is_pass() {
                format!("direct: {}", cause(d).unwrap_or("not run"))
            } else if p.is_pass() {
                match known.get(&k) {
                    Some(_) => "known difference, but passes".to_string(),
                    None => String::new(),
                }
            } else if let Some(reason) = known.get(&k) {
                format!("known: {reason}")
            } else {
                let c = cause(p).unwrap_or("not run (budget)");
                problems.push(format!(
                    "{case} {}: passes direct, through proxy {}: {c}",
                    mode.name(),
                    p.word()
                ));
                failures.push((format!("{case}/{}", mode.name()), c.to_string()));
                format!("proxy: {c}")
            };
            let _ = writeln!(
                table,
                "{:<36} {:<5} {:<8} {:<8} {:>6.2} {:>6.2} {note}",
                case,
                mode.name(),
                cell(d),
                cell(p),
                d_times[&k].as_secs_f64(),
                p_times[&k].as_secs_f64()
            );
        }
    }
    let _ = writeln!(
        out,
        "\nfailures through the proxy, grouped by cause:\n{}",
        grouped_failures(&failures)
    );
    out.push_str(&table);
}

fn report_client(
    out: &mut String,
    problems: &mut Vec<String>,
    tests: &[String],
    (direct, d_times): (&BTreeMap<String, Status>, &BTreeMap<String, Duration>),
    (proxied, p_times): (&BTreeMap<String, Status>, &BTreeMap<String, Duration>),
    known: &BTreeMap<String, String>,
) {
    for t in known.keys() {
        if !tests.contains(t) && lists::only().is_none() {
            problems.push(format!(
                "client_known_differences.txt names {t}, which is not in client_tests.txt"
            ));
        }
    }
    let d_pass = tests.iter().filter(|t| direct[*t].is_pass()).count();
    let both = tests
        .iter()
        .filter(|t| direct[*t].is_pass() && proxied[*t].is_pass())
        .count();
    let known_n = tests
        .iter()
        .filter(|t| direct[*t].is_pass() && !proxied[*t].is_pass() && known.contains_key(*t))
        .count();
    let _ = writeln!(
        out,
        "\n## mariadb-client-test ({} listed)\n\ndirect pass {d_pass}, not passing {} | through proxy: \
         {both} of the {d_pass} direct passes pass, {known_n} known differences, {} unexplained failures\n",
        tests.len(),
        tests.len() - d_pass,
        d_pass - both - known_n
    );
    if d_pass < MIN_DIRECT_CLIENT_TESTS && lists::only().is_none() {
        problems.push(format!(
            "only {d_pass} client tests pass directly (need {MIN_DIRECT_CLIENT_TESTS}): harness or environment broken"
        ));
    }
    let mut table = String::new();
    let mut failures = Vec::new();
    let _ = writeln!(
        table,
        "{:<36} {:<8} {:<8} {:>6} {:>6} note",
        "client test", "direct", "proxy", "d-sec", "p-sec"
    );
    for t in tests {
        let (d, p) = (&direct[t], &proxied[t]);
        let note = if !d.is_pass() {
            format!("direct: {}", cause(d).unwrap_or("not run"))
        } else if p.is_pass() {
            if known.contains_key(t) {
                "known difference, but passes".into()
            } else {
                String::new()
            }
        } else if let Some(reason) = known.get(t) {
            format!("known: {reason}")
        } else {
            let c = cause(p).unwrap_or("not run (budget)");
            problems.push(format!(
                "client test {t}: passes direct, through proxy {}: {c}",
                p.word()
            ));
            failures.push((t.clone(), c.to_string()));
            format!("proxy: {c}")
        };
        let _ = writeln!(
            table,
            "{:<36} {:<8} {:<8} {:>6.2} {:>6.2} {note}",
            t,
            cell(d),
            cell(p),
            d_times[t].as_secs_f64(),
            p_times[t].as_secs_f64()
        );
    }
    let _ = writeln!(
        out,
        "failures through the proxy, grouped by cause:\n{}",
        grouped_failures(&failures)
    );
    out.push_str(&table);
}

/// `SHOW MYPLEX GROUPS / POOLS / CLIENTS` as text, for hang reports.
fn describe_proxy(shared: &myplex::frontend::Shared) -> String {
    use myplex::admin::console::{Command, run};
    let mut out = String::new();
    for (name, cmd) in [
        ("groups", Command::Groups),
        ("pools", Command::Pools),
        ("clients", Command::Clients),
    ] {
        let rs = run(cmd, shared);
        out.push_str(&format!("{name}: {}\n", rs.columns.join("\t")));
        for row in rs.rows {
            out.push_str(&format!("  {}\n", row.join("\t")));
        }
    }
    out
}
