//! Runs one case of MariaDB's test suite against one *lane* (a server, and
//! the port a client uses to reach it: the server's own, or myplex's in
//! front of it) and puts the server back in its starting state afterwards.
//!
//! A lane owns its server: cases run one after another on it, since every
//! case works in the database `test`. Between cases the runner drops every
//! database a case created, recreates `test`, drops accounts it created and
//! sets back every global variable it changed (what mysql-test-run's
//! check-testcase would flag), always over a direct connection to the
//! server, never through the proxy.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

use super::suite::{Inversions, Suite};
use crate::common::MariaDb;
use crate::common::mariadb::{ROOT_PASSWORD, mariadb_bin};

/// Per-case wall-clock limit (the slowest listed case takes a few seconds
/// direct); a case that hangs through the proxy fails instead of stalling
/// the run.
pub const CASE_TIMEOUT: Duration = Duration::from_secs(20);

/// How a case (or client test) ended on one lane.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Status {
    Pass,
    /// With a one-line cause (first differing line, or mysqltest's error).
    Fail(String),
    /// The suite itself declared the case unsupported here (exit 62).
    Skipped(String),
    /// Not started: the lane ran out of its time budget.
    NotRun,
}

impl Status {
    pub fn word(&self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Fail(_) => "FAIL",
            Status::Skipped(_) => "skipped",
            Status::NotRun => "not-run",
        }
    }
    pub fn is_pass(&self) -> bool {
        *self == Status::Pass
    }
}

/// mysqltest's protocol mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Mode {
    Plain,
    Ps,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Plain => "plain",
            Mode::Ps => "ps",
        }
    }
}

/// A server and the port clients of this lane connect to.
pub struct Lane<'a> {
    pub db: &'a MariaDb,
    /// The server's port (direct) or the proxy's.
    port: AtomicU16,
    /// Replaces whatever is in front of the server (the proxy) with a fresh
    /// one and returns its port; used after a case hung, so that one wedged
    /// pool does not fail every later case of the lane.
    restart_front: Option<Box<dyn Fn() -> u16 + Send + Sync + 'a>>,
    /// The proxy's own view (groups, pools, clients) for hang reports.
    describe_front: Option<Box<dyn Fn() -> String + Send + Sync + 'a>>,
    /// Outputs, logs and diffs of this lane.
    pub out_dir: PathBuf,
    /// The server's state right after setup.
    baseline: Baseline,
}

/// What `reset` restores.
struct Baseline {
    globals: BTreeMap<String, String>,
    /// `'user'@'host'` → (quoted user, quoted host, quoted `Priv` JSON).
    users: BTreeMap<String, (String, String, String)>,
}

/// Global variables the server changes by itself.
fn volatile(name: &str) -> bool {
    name.starts_with("GTID_")
}

impl<'a> Lane<'a> {
    /// Prepares `db` the way mysql-test-run prepares its server (the `mtr`
    /// schema with `mtr.add_suppression`, the test time zones, `test` in
    /// latin1, `std_data` and `tmp` next to the datadir) and records the
    /// baseline for `reset`.
    pub fn new(
        db: &'a MariaDb,
        port: u16,
        restart_front: Option<Box<dyn Fn() -> u16 + Send + Sync + 'a>>,
        suite: &Suite,
        out_dir: PathBuf,
    ) -> Lane<'a> {
        std::fs::create_dir_all(&out_dir).expect("create lane output dir");
        std::fs::create_dir_all(db.base_dir.join("tmp")).expect("create MYSQL_TMP_DIR");
        std::fs::create_dir_all(db.base_dir.join("log")).expect("create log dir");
        // Cases name the suite's data files as `$MYSQLTEST_VARDIR/std_data`
        // and, relative to the datadir (two levels below the vardir under
        // mysql-test-run), as `../../std_data`: both resolve to the
        // read-only suite directory.
        let std_data = suite.root.join("std_data");
        let mut links = vec![db.base_dir.join("std_data")];
        if let Some(grandparent) = db.datadir.parent().and_then(Path::parent) {
            links.push(grandparent.join("std_data"));
        }
        for link in links {
            if std::fs::symlink_metadata(&link).is_err() {
                // Another lane may win the race for the shared one.
                let _ = std::os::unix::fs::symlink(&std_data, &link);
            }
        }
        db.sql(
            "DROP DATABASE IF EXISTS test;\n\
             CREATE DATABASE test CHARACTER SET latin1 COLLATE latin1_swedish_ci;\n\
             CREATE DATABASE IF NOT EXISTS mtr CHARACTER SET latin1;",
        );
        let tz = std::fs::read_to_string(
            suite
                .root
                .parent()
                .unwrap_or(Path::new("/usr/share/mysql"))
                .join("mysql_test_data_timezone.sql"),
        )
        .expect("mysql_test_data_timezone.sql (part of mariadb-server)");
        let out = db.cli(&["mysql"], &tz);
        assert!(
            out.status.success(),
            "loading time zones failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // mtr_warnings.sql is a mysqltest script (delimiter commands)
        // whose `--` lines are comments for the bootstrap loader.
        let script: String = std::fs::read_to_string(suite.root.join("include/mtr_warnings.sql"))
            .expect("include/mtr_warnings.sql")
            .lines()
            .filter(|l| !l.trim_start().starts_with("--"))
            .map(|l| format!("{l}\n"))
            .collect();
        let mut cmd = Command::new(&suite.mysqltest);
        cmd.args(client_args(db.port)).arg("--database=mtr");
        let out = run_with_input(cmd, script.as_bytes());
        assert!(
            out.0,
            "creating the mtr schema failed:\n{}",
            String::from_utf8_lossy(&out.1)
        );
        let baseline = Baseline {
            globals: globals(db),
            users: users(db),
        };
        Lane {
            db,
            port: AtomicU16::new(port),
            restart_front,
            describe_front: None,
            out_dir,
            baseline,
        }
    }

    /// Environment mysql-test-run gives mysqltest (the part the listed
    /// cases use), pointing at this lane's port.
    fn env(&self, suite: &Suite) -> Vec<(String, String)> {
        let base = &self.db.base_dir;
        let charsets = "/usr/share/mysql/charsets";
        vec![
            ("MYSQL_TEST_DIR".into(), suite.root.display().to_string()),
            ("MYSQLTEST_VARDIR".into(), base.display().to_string()),
            (
                "MYSQL_TMP_DIR".into(),
                base.join("tmp").display().to_string(),
            ),
            ("MASTER_MYPORT".into(), self.port().to_string()),
            ("MASTER_MYSOCK".into(), self.db.socket.display().to_string()),
            ("MYSQL_CHARSETSDIR".into(), charsets.into()),
            ("MYSQL_SHAREDIR".into(), "/usr/share/mysql/english".into()),
            (
                "MYSQL".into(),
                format!(
                    "{} --no-defaults --protocol=tcp --host=127.0.0.1 --port={} --user=root \
                     --password={ROOT_PASSWORD} --skip-ssl --default-character-set=latin1",
                    mariadb_bin("mariadb").display(),
                    self.port()
                ),
            ),
            ("LC_ALL".into(), "C".into()),
            ("LANG".into(), "C".into()),
        ]
    }

    /// Runs one mysqltest case (its rewritten copy in `overlay`) and
    /// compares the recorded output with the case's `.result`.
    pub fn run_case(
        &self,
        suite: &Suite,
        overlay: &Path,
        case: &str,
        mode: Mode,
        inversions: &Inversions,
    ) -> Status {
        let tag = format!("{case}.{}", mode.name());
        let recorded = self.out_dir.join(format!("{tag}.out"));
        let _ = std::fs::remove_file(&recorded);
        let log_path = self.out_dir.join(format!("{tag}.log"));
        let log = std::fs::File::create(&log_path).expect("create case log");
        let mut cmd = Command::new(&suite.mysqltest);
        cmd.args(client_args(self.port()))
            .arg("--silent")
            .arg("--database=test")
            .arg(format!("--basedir={}/", suite.root.display()))
            .arg(format!(
                "--suite-dir={}/",
                suite.root.join("main").display()
            ))
            .arg(format!("--overlay-dir={}/", overlay.display()))
            .arg(format!(
                "--tmpdir={}",
                self.db.base_dir.join("tmp").display()
            ))
            .arg(format!("--logdir={}", self.out_dir.display()))
            // <case>.progress: the line reached, for cases that time out.
            .arg("--mark-progress")
            .arg("--character-sets-dir=/usr/share/mysql/charsets")
            .arg("--max-connect-retries=2")
            .arg(format!(
                "--test-file={}",
                overlay.join(format!("{case}.test")).display()
            ))
            .arg("--record")
            .arg(format!("--result-file={}", recorded.display()))
            .envs(self.env(suite))
            // Like mysql-test-run: some cases name files relative to
            // mysql-test/.
            .current_dir(&suite.root)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("dup log"))
            .stderr(log);
        if mode == Mode::Ps {
            cmd.arg("--ps-protocol");
        }
        let progress = self.out_dir.join(format!("{case}.progress"));
        let _ = std::fs::remove_file(&progress);
        let hang = self.out_dir.join(format!("{tag}.hang"));
        let _ = std::fs::remove_file(&hang);
        let status = match run_with_timeout_then(cmd, CASE_TIMEOUT, || {
            self.write_hang_report(&hang, &progress)
        }) {
            Err(e) => Status::Fail(format!(
                "{e}{}{}; state at the timeout: {}",
                last_line(&progress),
                self.after_hang(),
                hang.display()
            )),
            Ok(62) => Status::Skipped(skip_reason(&log_path)),
            Ok(0) => {
                let got = std::fs::read(&recorded).unwrap_or_default();
                let got = inversions.apply(&got);
                let want = std::fs::read(suite.result_file(case)).expect("read .result");
                if got == want {
                    Status::Pass
                } else {
                    let reject = self.out_dir.join(format!("{tag}.reject"));
                    std::fs::write(&reject, &got).expect("write reject");
                    write_diff(
                        &suite.result_file(case),
                        &reject,
                        &self.out_dir.join(format!("{tag}.diff")),
                    );
                    Status::Fail(first_difference(&want, &got))
                }
            }
            Ok(code) => Status::Fail(mysqltest_error(&log_path, code)),
        };
        if status.is_pass() {
            let _ = std::fs::remove_file(&recorded);
            let _ = std::fs::remove_file(&log_path);
        }
        let _ = std::fs::remove_file(&progress);
        // mysqltest's own log in --logdir.
        let _ = std::fs::remove_file(self.out_dir.join(format!("{case}.log")));
        self.reset();
        status
    }

    /// Runs one `mariadb-client-test` test through this lane.
    pub fn run_client_test(&self, suite: &Suite, name: &str) -> Status {
        let log_path = self.out_dir.join(format!("client.{name}.log"));
        let log = std::fs::File::create(&log_path).expect("create client test log");
        let mut cmd = Command::new(&suite.client_test);
        cmd.arg("--no-defaults")
            .arg("--host=127.0.0.1")
            .arg(format!("--port={}", self.port()))
            .arg("--user=root")
            .arg(format!("--password={ROOT_PASSWORD}"))
            .arg("--testcase")
            .arg(format!("--vardir={}", self.db.base_dir.display()))
            .arg("--silent")
            .arg(name)
            .env("LC_ALL", "C")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("dup log"))
            .stderr(log);
        let status = match run_with_timeout(cmd, CASE_TIMEOUT) {
            Err(e) => Status::Fail(format!("{e}{}", self.after_hang())),
            Ok(0) => Status::Pass,
            Ok(code) => Status::Fail(client_test_error(&log_path, code)),
        };
        if status.is_pass() {
            let _ = std::fs::remove_file(&log_path);
        }
        self.reset();
        status
    }

    /// Adds the proxy's view to hang reports.
    pub fn describing(mut self, describe: Box<dyn Fn() -> String + Send + Sync + 'a>) -> Self {
        self.describe_front = Some(describe);
        self
    }

    /// True for a lane whose clients go through a proxy.
    pub fn proxied(&self) -> bool {
        self.restart_front.is_some()
    }

    /// The port clients of this lane connect to now.
    pub fn port(&self) -> u16 {
        self.port.load(Ordering::Relaxed)
    }

    /// After a case hung: a fresh proxy for the next case (noted in the
    /// failure), nothing for a direct lane.
    /// What was going on when a case hung: the line reached, the server's
    /// processlist and, through a proxy, its groups, pools and clients.
    fn write_hang_report(&self, path: &Path, progress: &Path) {
        let mut text = format!("reached:{}\n\nserver processlist:\n", last_line(progress));
        text.push_str(&sql_retry(
            self.db,
            "SELECT id, user, db, command, time, state, LEFT(info, 120) \
             FROM information_schema.processlist ORDER BY id",
        ));
        if let Some(describe) = &self.describe_front {
            text.push_str("\nproxy:\n");
            text.push_str(&describe());
        }
        let _ = std::fs::write(path, text);
    }

    fn after_hang(&self) -> &'static str {
        match &self.restart_front {
            Some(restart) => {
                self.port.store(restart(), Ordering::Relaxed);
                "; proxy restarted for the next case"
            }
            None => "",
        }
    }

    /// Puts the server back into its baseline state (direct connection):
    /// one query to see what changed, one batch to undo it if anything did.
    pub fn reset(&self) {
        // Connections a case left behind can hold locks (through the
        // proxy: backends still working for a client that is gone); they
        // must not stall the run. Ended here, and logged.
        self.kill_leftovers();
        let state = sql_retry(
            self.db,
            "SET SESSION lock_wait_timeout = 10; SELECT 's', s.schema_name, CONCAT(s.default_collation_name, ':', \
               (SELECT COUNT(*) FROM information_schema.tables t WHERE t.table_schema = s.schema_name) \
             + (SELECT COUNT(*) FROM information_schema.routines r WHERE r.routine_schema = s.schema_name) \
             + (SELECT COUNT(*) FROM information_schema.events e WHERE e.event_schema = s.schema_name)) \
             FROM information_schema.schemata s WHERE s.schema_name NOT IN \
             ('mysql','information_schema','performance_schema','sys','mtr') \
             UNION ALL SELECT 'u', CONCAT(QUOTE(user), '@', QUOTE(host)), Priv FROM mysql.global_priv \
             UNION ALL SELECT 'g', variable_name, variable_value FROM information_schema.global_variables",
        );
        let mut schemas = BTreeMap::new();
        let mut users = BTreeMap::new();
        let mut globals = BTreeMap::new();
        for line in state.lines() {
            let mut f = line.splitn(3, '\t');
            let (kind, name, value) = (f.next(), f.next().unwrap_or(""), f.next().unwrap_or(""));
            match kind {
                Some("s") => {
                    schemas.insert(name.to_string(), value.to_string());
                }
                Some("u") => {
                    users.insert(name.to_string(), value.to_string());
                }
                Some("g") => {
                    globals.insert(name.to_string(), value.to_string());
                }
                _ => {}
            }
        }
        let mut sql = String::new();
        let clean_test = schemas.len() == 1
            && schemas.get("test").map(String::as_str) == Some("latin1_swedish_ci:0");
        if !clean_test {
            for s in schemas.keys() {
                sql.push_str(&format!("DROP DATABASE `{}`;\n", s.replace('`', "``")));
            }
            sql.push_str("CREATE DATABASE test CHARACTER SET latin1 COLLATE latin1_swedish_ci;\n");
        }
        let mut flush = false;
        for u in users
            .keys()
            .filter(|u| !self.baseline.users.contains_key(*u))
        {
            sql.push_str(&format!("DROP USER {u};\n"));
        }
        // An account of the baseline changed (password, privileges) or
        // dropped: put its row back.
        for (u, (user, host, priv_json)) in &self.baseline.users {
            if users.get(u).map(|p| sql_value_str(p)) != Some(priv_json.clone()) {
                sql.push_str(&format!(
                    "REPLACE INTO mysql.global_priv (Host, User, Priv) VALUES ({host}, {user}, {priv_json});\n"
                ));
                flush = true;
            }
        }
        if flush {
            sql.push_str("FLUSH PRIVILEGES;\n");
        }
        let mut globals_changed = false;
        for (name, value) in &self.baseline.globals {
            if volatile(name) || globals.get(name) == Some(value) {
                continue;
            }
            globals_changed = true;
            sql.push_str(&format!("SET GLOBAL {name} = {};\n", sql_value(value)));
        }

        if sql.is_empty() {
            return;
        }
        // Best effort per statement (`--force`): a variable that cannot be
        // set back is logged, not fatal to the run.
        let sql = format!("SET SESSION lock_wait_timeout = 10;\n{sql}");
        let out = self.db.cli(&["-N", "-B", "--force"], &sql);
        if !out.status.success() {
            self.log_reset(&String::from_utf8_lossy(&out.stderr));
        }
        // Pooled backend connections opened while the case had a global
        // changed keep it as their session default (docs/compatibility.md,
        // "SET GLOBAL x"): the next case gets a fresh proxy, as it gets a
        // fresh server session with mysql-test-run.
        if globals_changed && let Some(restart) = &self.restart_front {
            self.port.store(restart(), Ordering::Relaxed);
        }
    }

    /// Ends server sessions still running a statement after the case's
    /// client is gone (not the proxy's idle pooled backends: those are
    /// `Sleep`, and closing them would be the harness interfering).
    fn kill_leftovers(&self) {
        let ids = sql_retry(
            self.db,
            "SELECT id, command, state, LEFT(info, 80) FROM information_schema.processlist \
             WHERE id <> CONNECTION_ID() AND command NOT IN ('Sleep', 'Daemon', 'Binlog Dump') \
             AND user <> 'system user' AND user <> 'event_scheduler'",
        );
        let mut kills = String::new();
        for line in ids.lines().filter(|l| !l.is_empty()) {
            let id = line.split('\t').next().unwrap_or("");
            if id.chars().all(|c| c.is_ascii_digit()) && !id.is_empty() {
                kills.push_str(&format!("KILL {id};\n"));
                self.log_reset(&format!("killed leftover server session: {line}"));
            }
        }
        if !kills.is_empty() {
            let _ = self.db.cli(&["-N", "-B", "--force"], &kills);
        }
    }

    fn log_reset(&self, msg: &str) {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.out_dir.join("reset-errors.log"))
            .expect("open reset log");
        let _ = writeln!(f, "{msg}");
    }
}

/// `db.sql(sql)`, retried twice: a transient server error (e.g. while
/// information_schema opens a table a case just dropped) must not end the
/// run; a dead server still panics, with its message.
fn sql_retry(db: &MariaDb, sql: &str) -> String {
    for _ in 0..2 {
        let out = db.cli(&["-N", "-B"], sql);
        if out.status.success() {
            return String::from_utf8_lossy(&out.stdout).into_owned();
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    db.sql(sql)
}

/// Connection options shared by every mysqltest invocation.
fn client_args(port: u16) -> Vec<String> {
    vec![
        "--no-defaults".into(),
        "--protocol=tcp".into(),
        "--host=127.0.0.1".into(),
        format!("--port={port}"),
        "--user=root".into(),
        format!("--password={ROOT_PASSWORD}"),
        "--skip-ssl".into(),
    ]
}

fn globals(db: &MariaDb) -> BTreeMap<String, String> {
    db.sql("SELECT variable_name, variable_value FROM information_schema.global_variables")
        .lines()
        .filter_map(|l| l.split_once('\t'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn users(db: &MariaDb) -> BTreeMap<String, (String, String, String)> {
    db.sql(
        "SELECT CONCAT(QUOTE(user), '@', QUOTE(host)), QUOTE(user), QUOTE(host), Priv \
         FROM mysql.global_priv",
    )
    .lines()
    .filter_map(|l| {
        let f: Vec<&str> = l.splitn(4, '\t').collect();
        (f.len() == 4).then(|| {
            (
                f[0].to_string(),
                (f[1].to_string(), f[2].to_string(), sql_value_str(f[3])),
            )
        })
    })
    .collect()
}

/// A string as a quoted SQL literal.
fn sql_value_str(v: &str) -> String {
    format!("'{}'", v.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// A global variable's value as SQL (`-N -B` output escapes `\`, tabs and
/// newlines, which global variable values do not contain in practice).
fn sql_value(v: &str) -> String {
    let numeric = !v.is_empty()
        && v.trim_start_matches('-')
            .chars()
            .all(|c| c.is_ascii_digit() || c == '.')
        && v.chars().filter(|&c| c == '.').count() <= 1
        && v.trim_start_matches('-')
            .starts_with(|c: char| c.is_ascii_digit());
    if numeric {
        v.to_string()
    } else if v == "NULL" {
        "NULL".to_string()
    } else {
        sql_value_str(v)
    }
}

/// Spawns `cmd`, kills it after `limit`; its exit code, or why there is
/// none.
fn run_with_timeout(cmd: Command, limit: Duration) -> Result<i32, String> {
    run_with_timeout_then(cmd, limit, || {})
}

/// [`run_with_timeout`], calling `at_timeout` before the kill (while the
/// hung clients are still connected).
fn run_with_timeout_then(
    mut cmd: Command,
    limit: Duration,
    at_timeout: impl FnOnce(),
) -> Result<i32, String> {
    let mut child: Child = cmd
        .spawn()
        .map_err(|e| format!("cannot spawn {:?}: {e}", cmd.get_program()))?;
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(st)) => return Ok(st.code().unwrap_or(-1)),
            Ok(None) if start.elapsed() > limit => {
                at_timeout();
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("timed out after {}s", limit.as_secs()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => return Err(format!("wait failed: {e}")),
        }
    }
}

/// Runs `cmd` with `input` on stdin: (success, stdout+stderr).
fn run_with_input(mut cmd: Command, input: &[u8]) -> (bool, Vec<u8>) {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn mysqltest");
    let mut stdin = child.stdin.take().expect("piped stdin");
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().expect("wait for mysqltest");
    let _ = writer.join();
    let mut text = out.stdout;
    text.extend_from_slice(&out.stderr);
    (out.status.success(), text)
}

/// The last entry of a `--mark-progress` file, to see where a case hung.
fn last_line(progress: &Path) -> String {
    std::fs::read_to_string(progress)
        .ok()
        .and_then(|t| {
            // "elapsed-ms<TAB>line<TAB>file" (the last one may be cut
            // short by the kill).
            t.lines().rev().find_map(|l| {
                let f: Vec<&str> = l.split('\t').collect();
                let file = f.get(2)?.rsplit('/').next()?;
                (file.ends_with(".test") || file.ends_with(".inc"))
                    .then(|| format!(" (at line {} of {file})", f[1]))
            })
        })
        .unwrap_or_default()
}

/// Ends every session on `db` but the caller's: what a hung case left
/// behind (the killed mysqltest's, or a replaced proxy's backends).
pub fn kill_all_sessions(db: &MariaDb) {
    let ids = sql_retry(
        db,
        "SELECT id FROM information_schema.processlist WHERE id <> CONNECTION_ID() \
         AND command NOT IN ('Daemon', 'Binlog Dump') \
         AND user NOT IN ('system user', 'event_scheduler')",
    );
    let kills: String = ids
        .lines()
        .filter(|id| !id.is_empty() && id.chars().all(|c| c.is_ascii_digit()))
        .map(|id| format!("KILL {id};\n"))
        .collect();
    if !kills.is_empty() {
        let _ = db.cli(&["-N", "-B", "--force"], &kills);
    }
}

fn skip_reason(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .find_map(|l| l.strip_prefix("reason: "))
        .or_else(|| text.lines().find(|l| !l.trim().is_empty()))
        .unwrap_or("skipped")
        .trim()
        .to_string()
}

/// mysqltest's own message ("At line N: query '…' failed: …", which may
/// span lines when the query does), on one line, shortened.
fn mysqltest_error(log: &Path, code: i32) -> String {
    let text = String::from_utf8_lossy(&std::fs::read(log).unwrap_or_default()).into_owned();
    let from = text
        .find("At line")
        .or_else(|| text.find("mysqltest:"))
        .unwrap_or(0);
    let msg = text[from..]
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    format!("exit {code}: {}", shorten(&msg, 240))
}

/// The client test's last messages (its banner lines start with `#`).
fn client_test_error(log: &Path, code: i32) -> String {
    let text = String::from_utf8_lossy(&std::fs::read(log).unwrap_or_default()).into_owned();
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.contains(" of (1/1): "))
        .collect();
    let line = lines[lines.len().saturating_sub(3)..].join(" ");
    format!("exit {code}: {}", shorten(&line, 240))
}

/// "line N: -expected / +got" for the first differing line.
fn first_difference(want: &[u8], got: &[u8]) -> String {
    let w: Vec<&[u8]> = want.split(|&b| b == b'\n').collect();
    let g: Vec<&[u8]> = got.split(|&b| b == b'\n').collect();
    for i in 0..w.len().max(g.len()) {
        let (a, b) = (w.get(i), g.get(i));
        if a != b {
            let show = |l: Option<&&[u8]>| match l {
                Some(l) => shorten(&String::from_utf8_lossy(l), 110),
                None => "<end>".to_string(),
            };
            return format!("line {}: -{} / +{}", i + 1, show(a), show(b));
        }
    }
    "outputs differ".to_string()
}

fn shorten(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max).collect();
        t.push('…');
        t
    }
}

/// `diff -u want got > path` for a human (best effort).
fn write_diff(want: &Path, got: &Path, path: &Path) {
    if let Ok(out) = Command::new("diff").arg("-u").arg(want).arg(got).output() {
        let _ = std::fs::write(path, out.stdout);
    }
}
