//! A throwaway, real MariaDB server for integration tests.
//!
//! `MariaDb::shared()` gives the tests of the calling source file (each
//! module of the integration-test binary was a test binary of its own,
//! with a server of its own) their server, started on first use; it runs
//! at least while a test that asked for it runs, and unused ones beyond
//! [`SHARED_SERVERS_KEPT`] are stopped, least recently used first.
//! `MariaDb::start()` starts a private one. Each server gets a fresh
//! datadir under `std::env::temp_dir()` and a free TCP port on 127.0.0.1.
//!
//! Configuration ([`Profile`]): by default the server looks like a
//! production primary -- binary log on (`ROW`, `server_id=1`) and every
//! other setting at the default a DBA leaves (`max_prepared_stmt_count`,
//! `max_allowed_packet`, durability, thread cache, ...). Only what this
//! machine needs is set: paths, port, bind address, no DNS, and a raised
//! connection limit (see [`MACHINE_ARGS`]). The [`Profile::Fast`] variant
//! (`MariaDb::shared_fast()`, `MariaDb::start_with(Profile::Fast, ...)`)
//! drops the binary log, relaxes durability and raises the limits, for the
//! few tests that genuinely need speed or huge limits; such a test says so
//! where it picks it.
//!
//! Lifetime: `mariadbd` is launched by a small `sh` wrapper whose stdin is a
//! pipe held by this process (`MariaDb::stdin`). The wrapper blocks in `read`;
//! when the pipe closes -- because the `MariaDb` was dropped, or because the
//! test process exited or was killed (a shared server is never dropped, but
//! the kernel closes the pipe) -- `read` returns, and the wrapper stops
//! `mariadbd` and deletes the datadir. The wrapper runs in its own process
//! group so a Ctrl-C aimed at `cargo test` does not kill it before it has
//! cleaned up.
//!
//! Accounts created on every server:
//! - `root` / `rootpw` (localhost, 127.0.0.1, ::1 and '%'),
//! - `app` / `secret` (mysql_native_password, ALL PRIVILEGES ON *.*),
//! - `other` / `otherpw` (ALL PRIVILEGES ON *.*),
//!
//! plus an empty database `test`.

#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::panic::Location;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub const ROOT_PASSWORD: &str = "rootpw";
pub const APP_USER: &str = "app";
pub const APP_PASSWORD: &str = "secret";
pub const OTHER_USER: &str = "other";
pub const OTHER_PASSWORD: &str = "otherpw";
pub const TEST_DB: &str = "test";

/// How long to wait for a freshly started server to accept connections.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How many times to retry when the server could not start (e.g. the free
/// port we picked was grabbed by someone else in the meantime).
const START_ATTEMPTS: usize = 3;

/// How a test server is configured on top of [`MACHINE_ARGS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Profile {
    /// Like a production primary (the default): binary log on, row format,
    /// a server id, everything else at the server's defaults.
    Production,
    /// No binary log, relaxed durability, raised limits
    /// (`max_prepared_stmt_count`, `max_allowed_packet`): for tests that need
    /// speed or limits beyond a stock server, never to hide a difference
    /// production would show.
    Fast,
}

impl Profile {
    /// The `mariadbd` options of this profile (appended after the machine's).
    pub fn args(self) -> &'static [&'static str] {
        match self {
            Profile::Production => &[
                // Relative to the datadir: mariadb-bin.000001, ...
                "--log-bin=mariadb-bin",
                "--binlog-format=ROW",
                "--server-id=1",
            ],
            Profile::Fast => &[
                "--skip-log-bin",
                "--max-prepared-stmt-count=200000",
                "--max-allowed-packet=64M",
                "--thread-cache-size=256",
                "--innodb-buffer-pool-size=256M",
                "--innodb-log-file-size=64M",
                "--innodb-flush-log-at-trx-commit=2",
                "--innodb-doublewrite=0",
                "--performance-schema=OFF",
            ],
        }
    }
}

/// Options every test server gets, whatever its [`Profile`]: what this
/// machine needs, nothing a production DBA would tune differently.
/// (`--no-defaults` and the per-server paths and port come first, see
/// `try_start`.)
pub const MACHINE_ARGS: &[&str] = &[
    "--bind-address=127.0.0.1",
    // No DNS in the sandbox; the accounts are defined by IP and '%'.
    "--skip-name-resolve",
    // Raised on purpose, unlike production: the tests of a file run in
    // parallel against one server, load tests (sysbench, multiplex_scale)
    // and their direct-connection comparisons open hundreds to thousands of
    // sessions at once, and what is under test is the proxy's own limits,
    // not the server's 151. back_log follows so bursts of connects are not
    // dropped by the listen queue.
    "--max-connections=6000",
    "--back-log=3000",
];

/// The wrapper script. Positional parameters: `$1` = directory to delete
/// afterwards, `$2` = mariadbd binary, rest = mariadbd arguments.
///
/// It prints mariadbd's pid on stdout, then reads commands from its stdin (a
/// pipe held by the test process): `kill` kills mariadbd with SIGKILL (a
/// crash, the datadir kept) and prints `killed` once it is gone; `start`
/// starts it again with the same arguments and prints the new pid. At EOF
/// it stops mariadbd (SIGTERM, SIGKILL after 60 s) and removes the
/// directory.
const WRAPPER_SCRIPT: &str = r#"
trap '' INT HUP PIPE
dir=$1
mariadbd=$2
shift 2
start() {
    "$mariadbd" "$@" </dev/null >>"$dir/mariadbd.out" 2>&1 &
    pid=$!
    echo "$pid"
}
start "$@"
while read -r cmd; do
    case $cmd in
        kill)
            [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
            pid=
            echo killed ;;
        start)
            if [ -n "$pid" ]; then echo running; else start "$@"; fi ;;
    esac
done
exec >/dev/null
[ -n "$pid" ] || { rm -rf "$dir"; exit 0; }
kill "$pid" 2>/dev/null
i=0
while kill -0 "$pid" 2>/dev/null; do
    i=$((i + 1))
    if [ "$i" -ge 600 ]; then
        kill -9 "$pid" 2>/dev/null
        break
    fi
    sleep 0.1
done
wait "$pid" 2>/dev/null
rm -rf "$dir"
"#;

/// A running MariaDB server. Dropping it stops the server and removes its
/// files (synchronously); a shared one is stopped once unused (see
/// [`SHARED_SERVERS_KEPT`]) or lives until the test process exits.
pub struct MariaDb {
    /// TCP port on 127.0.0.1.
    pub port: u16,
    /// Unix socket path.
    pub socket: PathBuf,
    /// Directory holding the datadir, socket, pid file and error log.
    pub base_dir: PathBuf,
    /// The datadir (`base_dir/data`).
    pub datadir: PathBuf,
    /// Pid of the `mariadbd` process (it changes at [`MariaDb::restart`]).
    pid: AtomicU32,
    /// Write end of the wrapper's stdin: commands (see [`WRAPPER_SCRIPT`]);
    /// closing it shuts the server down.
    stdin: Mutex<Option<ChildStdin>>,
    /// The wrapper's answers.
    stdout: Mutex<BufReader<ChildStdout>>,
    /// The `sh` wrapper process.
    wrapper: Mutex<Child>,
}

impl MariaDb {
    /// The production-shaped server shared by the tests of the calling
    /// source file (a module of the integration-test binary, once a test
    /// binary of its own), started on first use. It runs at least until
    /// the calling test ends (see [`SHARED_SERVERS_KEPT`] for when an
    /// unused one is stopped): the reference is for that test to use.
    #[track_caller]
    pub fn shared() -> &'static MariaDb {
        shared_server(Location::caller().file(), Profile::Production, &[])
    }

    /// A [`Profile::Fast`] server shared by the tests of the calling source
    /// file that need it, started on first use (a different server from
    /// `shared()`).
    #[track_caller]
    pub fn shared_fast() -> &'static MariaDb {
        shared_server(Location::caller().file(), Profile::Fast, &[])
    }

    /// A server of `profile` with `extra_args`, shared by the tests of the
    /// calling source file that ask for the same combination, started on
    /// first use. For tests with a stated need beyond the defaults, e.g.
    /// `MariaDb::shared_with(Profile::Production, &["--max-allowed-packet=64M"])`
    /// for rows larger than the default 16 MiB packet limit.
    #[track_caller]
    pub fn shared_with(profile: Profile, extra_args: &[&str]) -> &'static MariaDb {
        shared_server(Location::caller().file(), profile, extra_args)
    }

    /// Start a new private production-shaped server (stopped when the value
    /// is dropped).
    pub fn start() -> MariaDb {
        MariaDb::start_with(Profile::Production, &[])
    }

    /// Like `start()`, with extra `mariadbd` options appended to the
    /// production profile (later options override earlier ones), e.g.
    /// `&["--max-connections=20"]`.
    pub fn start_with_args(extra_args: &[&str]) -> MariaDb {
        MariaDb::start_with(Profile::Production, extra_args)
    }

    /// Start a private server of `profile`, with `extra_args` appended (a
    /// test states its special needs here, e.g.
    /// `&["--max-prepared-stmt-count=100000"]`).
    pub fn start_with(profile: Profile, extra_args: &[&str]) -> MariaDb {
        let args: Vec<&str> = profile
            .args()
            .iter()
            .chain(extra_args.iter())
            .copied()
            .collect();
        let mut last_error = String::new();
        for attempt in 1..=START_ATTEMPTS {
            match MariaDb::try_start(&args) {
                Ok(db) => return db,
                Err(StartError::Retryable(msg)) if attempt < START_ATTEMPTS => {
                    eprintln!("mariadb fixture: attempt {attempt} failed, retrying:\n{msg}");
                    last_error = msg;
                }
                Err(StartError::Retryable(msg)) | Err(StartError::Fatal(msg)) => {
                    last_error = msg;
                    break;
                }
            }
        }
        panic!("mariadb fixture: could not start MariaDB:\n{last_error}");
    }

    fn try_start(extra_args: &[&str]) -> Result<MariaDb, StartError> {
        let base_dir = unique_temp_dir();
        std::fs::create_dir_all(&base_dir)
            .map_err(|e| StartError::Fatal(format!("cannot create {}: {e}", base_dir.display())))?;
        let datadir = base_dir.join("data");
        let socket = base_dir.join("sock");
        // A private tmpdir: temporary-table files are named after the pid,
        // and test processes in other PID namespaces may share /tmp (seen:
        // mariadb-install-db failing on another bootstrap's
        // `#sql-temptable-<pid>-1-3`).
        let tmpdir = base_dir.join("tmp");
        std::fs::create_dir_all(&tmpdir)
            .map_err(|e| StartError::Fatal(format!("cannot create {}: {e}", tmpdir.display())))?;
        let as_root = running_as_root();

        // 1. Initialise the datadir.
        let mut install = Command::new(mariadb_bin("mariadb-install-db"));
        install
            .arg("--no-defaults")
            .arg(format!("--datadir={}", datadir.display()))
            .arg(format!("--tmpdir={}", tmpdir.display()))
            .arg("--auth-root-authentication-method=normal")
            .arg("--skip-test-db")
            .arg("--skip-name-resolve");
        if as_root {
            install.arg("--user=root");
        }
        let out = install
            .stdin(Stdio::null())
            .output()
            .map_err(|e| StartError::Fatal(format!("cannot run mariadb-install-db: {e}")))?;
        if !out.status.success() {
            let _ = std::fs::remove_dir_all(&base_dir);
            return Err(StartError::Fatal(format!(
                "mariadb-install-db failed ({}):\n--- stdout ---\n{}\n--- stderr ---\n{}",
                out.status,
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )));
        }

        // 2. Launch mariadbd through the wrapper.
        let port = server_port();
        let mut args: Vec<String> = vec![
            // Must come first.
            "--no-defaults".into(),
            format!("--datadir={}", datadir.display()),
            format!("--socket={}", socket.display()),
            format!("--pid-file={}", base_dir.join("mariadbd.pid").display()),
            format!("--log-error={}", base_dir.join("error.log").display()),
            format!("--tmpdir={}", tmpdir.display()),
            format!("--port={port}"),
        ];
        args.extend(MACHINE_ARGS.iter().map(|s| s.to_string()));
        if as_root {
            args.push("--user=root".into());
        }
        // The profile's options, then the caller's.
        args.extend(extra_args.iter().map(|s| s.to_string()));

        let mut wrapper = Command::new("sh")
            .arg("-c")
            .arg(WRAPPER_SCRIPT)
            .arg("myplex-mariadb-wrapper")
            .arg(&base_dir)
            .arg(mariadb_bin("mariadbd"))
            .args(&args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(|e| StartError::Fatal(format!("cannot spawn sh wrapper: {e}")))?;
        let stdin = wrapper.stdin.take().expect("wrapper stdin is piped");
        let stdout = wrapper.stdout.take().expect("wrapper stdout is piped");
        let mut stdout = BufReader::new(stdout);
        let mut pid_line = String::new();
        let read = stdout.read_line(&mut pid_line);
        let pid = match read.ok().and_then(|_| pid_line.trim().parse::<u32>().ok()) {
            Some(pid) => pid,
            None => {
                drop(stdin);
                let _ = wrapper.wait();
                let _ = std::fs::remove_dir_all(&base_dir);
                return Err(StartError::Fatal(format!(
                    "wrapper did not report mariadbd's pid (got {pid_line:?})"
                )));
            }
        };

        // From here on, dropping `db` shuts everything down and cleans up.
        let db = MariaDb {
            port,
            socket,
            base_dir,
            datadir,
            pid: AtomicU32::new(pid),
            stdin: Mutex::new(Some(stdin)),
            stdout: Mutex::new(stdout),
            wrapper: Mutex::new(wrapper),
        };

        // 3. Wait until it answers on the unix socket.
        db.wait_ready()?;

        // 4. Accounts and schema (as password-less root over the socket).
        let setup = db.socket_cli(&[], &setup_sql());
        if !setup.status.success() {
            return Err(StartError::Fatal(format!(
                "account setup failed:\n{}\n--- error log ---\n{}",
                String::from_utf8_lossy(&setup.stderr),
                db.error_log()
            )));
        }

        // 5. Sanity check over TCP with the new root password.
        let check = db.cli(&["-N", "-B"], "SELECT 1");
        if !check.status.success() || String::from_utf8_lossy(&check.stdout).trim() != "1" {
            return Err(StartError::Fatal(format!(
                "TCP login as root failed on port {}:\n{}\n--- error log ---\n{}",
                db.port,
                String::from_utf8_lossy(&check.stderr),
                db.error_log()
            )));
        }
        Ok(db)
    }

    fn wait_ready(&self) -> Result<(), StartError> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if !process_alive(self.pid()) {
                let log = self.error_log();
                let msg = format!(
                    "mariadbd (pid {}, port {}) exited during startup\n--- error log ---\n{log}\n--- stdout/stderr ---\n{}",
                    self.pid(),
                    self.port,
                    std::fs::read_to_string(self.base_dir.join("mariadbd.out")).unwrap_or_default()
                );
                let port_clash = [
                    "Address already in use",
                    "Bind on TCP/IP",
                    "Do you already have another",
                ]
                .iter()
                .any(|needle| log.contains(needle));
                return Err(if port_clash {
                    StartError::Retryable(msg)
                } else {
                    StartError::Fatal(msg)
                });
            }
            if self.socket.exists() {
                let out = self.socket_cli(&["--connect-timeout=2"], "SELECT 1");
                if out.status.success() {
                    return Ok(());
                }
            }
            if Instant::now() >= deadline {
                return Err(StartError::Fatal(format!(
                    "mariadbd (pid {}, port {}) not ready after {:?}\n--- error log ---\n{}",
                    self.pid(),
                    self.port,
                    READY_TIMEOUT,
                    self.error_log()
                )));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Pid of the `mariadbd` process now.
    pub fn pid(&self) -> u32 {
        self.pid.load(Ordering::Relaxed)
    }

    /// Sends the wrapper `cmd` and returns its one-line answer (one
    /// command at a time: the answer read is this command's).
    fn command(&self, cmd: &str) -> String {
        let mut stdout = lock(&self.stdout);
        {
            let mut stdin = lock(&self.stdin);
            let stdin = stdin.as_mut().expect("server not stopped");
            writeln!(stdin, "{cmd}").expect("wrapper command");
            stdin.flush().expect("wrapper command");
        }
        let mut line = String::new();
        stdout.read_line(&mut line).expect("wrapper answer");
        line.trim().to_string()
    }

    /// Stops `mariadbd` with SIGSTOP — from outside, a server that stopped
    /// answering (connections accepted, nothing read or sent) — until the
    /// returned guard is dropped, which continues it (SIGCONT) whatever the
    /// test does meanwhile.
    pub fn pause(&self) -> Paused<'_> {
        self.signal("-STOP");
        Paused(self)
    }

    /// Sends `signal` (`-STOP`, `-CONT`) to `mariadbd`.
    fn signal(&self, signal: &str) {
        let pid = self.pid().to_string();
        let ok = Command::new("kill")
            .args([signal, &pid])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill {signal} {pid}");
    }

    /// Kills `mariadbd` with SIGKILL — a crash: nothing flushed, nothing
    /// said to its clients — and returns once it is gone. The datadir
    /// stays for [`MariaDb::restart`].
    pub fn kill9(&self) {
        assert_eq!(self.command("kill"), "killed");
    }

    /// Starts `mariadbd` again on the same datadir, port and options (after
    /// [`MariaDb::kill9`]) and returns once it answers.
    pub fn restart(&self) {
        let pid = self.command("start");
        let pid: u32 = pid
            .parse()
            .unwrap_or_else(|_| panic!("restart: the wrapper said {pid:?} (still running?)"));
        self.pid.store(pid, Ordering::Relaxed);
        // Set up already: root has its password now.
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if !process_alive(pid) {
                panic!(
                    "mariadbd (pid {pid}, port {}) exited during its restart\n--- error log ---\n{}",
                    self.port,
                    self.error_log()
                );
            }
            if self
                .cli(&["--connect-timeout=2"], "SELECT 1")
                .status
                .success()
            {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "mariadbd (pid {pid}, port {}) not ready after its restart\n--- error log ---\n{}",
                self.port,
                self.error_log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `127.0.0.1:<port>`.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `mysql://user:password@127.0.0.1:port/db`.
    pub fn url(&self, user: &str, password: &str, db: &str) -> String {
        format!("mysql://{user}:{password}@127.0.0.1:{}/{db}", self.port)
    }

    /// Contents of the server's error log (empty if unreadable).
    pub fn error_log(&self) -> String {
        std::fs::read_to_string(self.base_dir.join("error.log")).unwrap_or_default()
    }

    /// Run the `mariadb` CLI as root over TCP (127.0.0.1:port) with
    /// `stdin_sql` on stdin. `args` are appended after the defaults, so they
    /// can override them (e.g. `&["-uapp", "-psecret", "test"]`).
    pub fn cli(&self, args: &[&str], stdin_sql: &str) -> Output {
        let mut cmd = Command::new(mariadb_bin("mariadb"));
        cmd.arg("--no-defaults")
            .arg("--protocol=TCP")
            .arg("--host=127.0.0.1")
            .arg(format!("--port={}", self.port))
            .arg("--user=root")
            .arg(format!("--password={ROOT_PASSWORD}"))
            .args(args);
        run_with_stdin(cmd, stdin_sql)
    }

    /// Run `sql` as root (`-N -B`); panics with stderr on failure and
    /// returns stdout (tab-separated rows, one per line).
    pub fn sql(&self, sql: &str) -> String {
        let out = self.cli(&["-N", "-B"], sql);
        if !out.status.success() {
            panic!(
                "SQL failed ({}) on port {}: {sql}\n--- stderr ---\n{}",
                out.status,
                self.port,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        String::from_utf8(out.stdout).expect("mariadb CLI output is not UTF-8")
    }

    /// Run the `mariadb` CLI as password-less root over the unix socket
    /// (only valid before the setup SQL has set the root password).
    fn socket_cli(&self, args: &[&str], stdin_sql: &str) -> Output {
        let mut cmd = Command::new(mariadb_bin("mariadb"));
        cmd.arg("--no-defaults")
            .arg("--protocol=SOCKET")
            .arg(format!("--socket={}", self.socket.display()))
            .arg("--user=root")
            .args(args);
        run_with_stdin(cmd, stdin_sql)
    }
}

impl MariaDb {
    /// Stops the server and removes its files, and returns once they are
    /// gone: what dropping does, here for a shared server, which is never
    /// dropped. A second call does nothing.
    fn stop(&self) {
        // Closing the pipe makes the wrapper stop mariadbd and delete the
        // datadir; wait for it so the next test starts from a clean slate.
        drop(lock(&self.stdin).take());
        let _ = lock(&self.wrapper).wait();
    }

    /// Kills `mariadbd` (SIGKILL), then [`MariaDb::stop`]: for an unused
    /// shared server, whose data nobody wants. A clean shutdown would
    /// flush its pages and binary log, taking CPU and I/O from the tests
    /// that run meanwhile, only for the files to be deleted.
    fn discard(&self) {
        let _ = Command::new("kill")
            .args(["-KILL", &self.pid().to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        self.stop();
    }
}

/// A server stopped by [`MariaDb::pause`]; dropping it continues it.
pub struct Paused<'a>(&'a MariaDb);

impl Drop for Paused<'_> {
    fn drop(&mut self) {
        self.0.signal("-CONT");
    }
}

impl Drop for MariaDb {
    fn drop(&mut self) {
        self.stop();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// How many shared servers stay running when no running test uses them:
/// past this, the one unused longest is stopped (a later test of its file
/// gets a fresh one). Each is a `mariadbd` of ~150-300 MB RSS and a
/// ~150 MB datadir, and 43 files use one; libtest starts tests in name
/// order, so one file's tests mostly run together and a few servers cover
/// the files whose tests are running or just ran.
pub const SHARED_SERVERS_KEPT: usize = 6;

/// A shared server: the source file whose tests share it, and its
/// configuration.
type SharedKey = (&'static str, Profile, Vec<String>);

/// A shared server: filled by its first user (the others wait for it),
/// still empty after a failed start, so that the next user tries anew.
/// Never freed, like the server once stopped (a few hundred bytes each):
/// what a test was given stays valid memory.
type Slot = &'static OnceLock<MariaDb>;

struct SharedEntry {
    server: Slot,
    /// Threads (running tests) that asked for it and have not ended.
    users: usize,
    /// When it was last asked for or given back (`SharedServers::clock`).
    last_used: u64,
}

#[derive(Default)]
struct SharedServers {
    servers: HashMap<SharedKey, SharedEntry>,
    clock: u64,
}

impl SharedServers {
    fn lock() -> std::sync::MutexGuard<'static, SharedServers> {
        static SHARED: OnceLock<Mutex<SharedServers>> = OnceLock::new();
        SHARED
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Takes out the unused servers beyond [`SHARED_SERVERS_KEPT`], least
    /// recently used first, and hands them to [`stopper`].
    fn trim(&mut self) {
        while self.servers.len() > SHARED_SERVERS_KEPT {
            let Some(key) = self
                .servers
                .iter()
                .filter(|(_, e)| e.users == 0)
                .min_by_key(|(_, e)| e.last_used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some(entry) = self.servers.remove(&key) {
                let _ = stopper().send(entry.server);
            }
        }
    }
}

/// Where unused shared servers go to be stopped: a thread of its own
/// stops them one by one (no test waits for that). Started by the first
/// `shared_server` call, not from a thread's exit (`Uses`), where starting
/// a thread is not safe.
fn stopper() -> &'static std::sync::mpsc::Sender<Slot> {
    static STOPPER: OnceLock<std::sync::mpsc::Sender<Slot>> = OnceLock::new();
    STOPPER.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel::<Slot>();
        std::thread::Builder::new()
            .name("shared-mariadb-stopper".into())
            .spawn(move || {
                for server in rx {
                    // Empty when its start failed: nothing to stop.
                    if let Some(db) = server.get() {
                        db.discard();
                    }
                }
            })
            .expect("start the shared servers' stopper thread");
        tx
    })
}

/// The shared servers the current thread asked for; given back when the
/// thread ends. libtest runs each test on a thread of its own, so a server
/// stays up for as long as a test that asked for it runs, whatever the
/// test did with the reference (helpers, temporaries, proxies and child
/// processes in front of it).
struct Uses(Vec<SharedKey>);

impl Drop for Uses {
    fn drop(&mut self) {
        let mut shared = SharedServers::lock();
        shared.clock += 1;
        let now = shared.clock;
        for key in &self.0 {
            if let Some(entry) = shared.servers.get_mut(key) {
                entry.users -= 1;
                entry.last_used = now;
            }
        }
        shared.trim();
    }
}

thread_local! {
    static USES: std::cell::RefCell<Uses> = const { std::cell::RefCell::new(Uses(Vec::new())) };
}

/// `MariaDb::shared*`: the server of `file` with `profile` and
/// `extra_args`, started if there is none.
fn shared_server(file: &'static str, profile: Profile, extra_args: &[&str]) -> &'static MariaDb {
    let key: SharedKey = (
        file,
        profile,
        extra_args.iter().map(|s| s.to_string()).collect(),
    );
    stopper();
    let server = USES.with(|uses| {
        let mut uses = uses.borrow_mut();
        let mut shared = SharedServers::lock();
        shared.clock += 1;
        let now = shared.clock;
        let entry = shared
            .servers
            .entry(key.clone())
            .or_insert_with(|| SharedEntry {
                server: Box::leak(Box::new(OnceLock::new())),
                users: 0,
                last_used: now,
            });
        entry.last_used = now;
        if !uses.0.contains(&key) {
            entry.users += 1;
            uses.0.push(key);
        }
        let server = entry.server;
        shared.trim();
        server
    });
    // Outside the lock: a start takes seconds, and other files' tests go
    // on meanwhile (this file's wait here for the same server).
    server.get_or_init(|| MariaDb::start_with(profile, extra_args))
}

enum StartError {
    /// Worth another attempt with a new port and datadir.
    Retryable(String),
    Fatal(String),
}

fn setup_sql() -> String {
    let mut sql = String::from(
        "DELETE FROM mysql.global_priv WHERE User = '';\n\
         FLUSH PRIVILEGES;\n",
    );
    for host in ["localhost", "127.0.0.1", "::1", "%"] {
        sql.push_str(&format!(
            "CREATE USER IF NOT EXISTS 'root'@'{host}';\n\
             ALTER USER 'root'@'{host}' IDENTIFIED VIA mysql_native_password USING PASSWORD('{ROOT_PASSWORD}');\n\
             GRANT ALL PRIVILEGES ON *.* TO 'root'@'{host}' WITH GRANT OPTION;\n"
        ));
    }
    sql.push_str(&format!(
        "CREATE USER '{APP_USER}'@'%' IDENTIFIED VIA mysql_native_password USING PASSWORD('{APP_PASSWORD}');\n\
         GRANT ALL PRIVILEGES ON *.* TO '{APP_USER}'@'%';\n\
         CREATE USER '{OTHER_USER}'@'%' IDENTIFIED BY '{OTHER_PASSWORD}';\n\
         GRANT ALL PRIVILEGES ON *.* TO '{OTHER_USER}'@'%';\n\
         CREATE DATABASE IF NOT EXISTS `{TEST_DB}`;\n\
         FLUSH PRIVILEGES;\n"
    ));
    sql
}

/// Spawn `cmd` with `input` on stdin (written from a separate thread so large
/// inputs and outputs cannot deadlock) and collect its output.
fn run_with_stdin(mut cmd: Command, input: &str) -> Output {
    let program = format!("{:?}", cmd.get_program());
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot spawn {program}: {e}"));
    let mut stdin = child.stdin.take().expect("child stdin is piped");
    let input = input.to_owned();
    let writer = std::thread::spawn(move || {
        // The CLI may exit early (e.g. login failure); ignore EPIPE.
        let _ = stdin.write_all(input.as_bytes());
    });
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("waiting for {program} failed: {e}"));
    let _ = writer.join();
    out
}

/// A TCP port on 127.0.0.1 that was free a moment ago.
/// A free TCP port on 127.0.0.1 for a server, below the kernel's range of
/// ephemeral ports: a server killed and restarted (`MariaDb::restart`)
/// takes the same port again, and an ephemeral one may have become some
/// other connection's source port meanwhile.
fn server_port() -> u16 {
    // Below the default ip_local_port_range (32768–60999), above the
    // well-known and most registered services' ports.
    const LOW: u16 = 20000;
    const HIGH: u16 = 32000;
    for _ in 0..200 {
        let port = rand::random_range(LOW..HIGH);
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    free_port()
}

/// A TCP port on 127.0.0.1 that was free a moment ago (an ephemeral one).
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0 to find a free port");
    listener
        .local_addr()
        .expect("local_addr of the probe listener")
        .port()
}

/// Locate a MariaDB binary (`mariadbd`, `mariadb`, `mariadb-install-db`, ...)
/// in `PATH`, then in the usual sbin/bin directories (Debian keeps `mariadbd`
/// in /usr/sbin, which is not in a normal user's `PATH`). Falls back to the
/// legacy MySQL-compatible names. Panics with a hint if nothing is found.
pub fn mariadb_bin(name: &str) -> PathBuf {
    let legacy = match name {
        "mariadbd" => Some("mysqld"),
        "mariadb" => Some("mysql"),
        "mariadb-install-db" => Some("mysql_install_db"),
        "mariadb-admin" => Some("mysqladmin"),
        _ => None,
    };
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    for extra in [
        "/usr/sbin",
        "/usr/bin",
        "/usr/local/sbin",
        "/usr/local/bin",
        "/usr/local/mysql/bin",
        "/sbin",
        "/bin",
    ] {
        dirs.push(PathBuf::from(extra));
    }
    for candidate in std::iter::once(name).chain(legacy) {
        for dir in &dirs {
            let path = dir.join(candidate);
            if is_executable(&path) {
                return path;
            }
        }
    }
    panic!(
        "MariaDB binary `{name}` not found in PATH or /usr/sbin, /usr/bin, /usr/local/...; \
         run scripts/install-deps.sh (installs mariadb-server and mariadb-client)"
    );
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path)
        .map(|m| m.is_file() && m.mode() & 0o111 != 0)
        .unwrap_or(false)
}

fn running_as_root() -> bool {
    // /proc/self is owned by the effective uid of the process.
    std::fs::metadata("/proc/self")
        .map(|m| m.uid() == 0)
        .unwrap_or(false)
}

/// True while `pid` exists and is not a zombie.
fn process_alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // Format: "pid (comm) STATE ..."; comm may contain spaces/parens.
    match stat
        .rfind(')')
        .and_then(|i| stat[i + 1..].split_whitespace().next())
    {
        Some(state) => state != "Z" && state != "X",
        None => false,
    }
}

/// A fresh directory name under the temp dir. Unix socket paths are limited
/// to ~107 bytes, so fall back to /tmp if the temp dir path is long.
fn unique_temp_dir() -> PathBuf {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let name = format!(
        "myplex-mariadb-{}-{}-{nanos:x}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    );
    let tmp = std::env::temp_dir();
    // name + "/sock" must fit comfortably in sun_path (108 bytes incl. NUL).
    let base = if tmp.as_os_str().len() + name.len() + 8 < 100 {
        tmp
    } else {
        PathBuf::from("/tmp")
    };
    base.join(name)
}
