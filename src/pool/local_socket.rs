//! Which transport a credential pool's backends take when `backend.address`
//! is a loopback TCP address (`backend.local_socket = "auto"`): the
//! server's own Unix socket, once it is proven to reach the same server as
//! the same account, else TCP.
//!
//! On this box a loopback TCP hop costs the proxy and the server about
//! twice what a socket hop costs (docs/benchmarks.md), and a MySQL client
//! itself takes the socket for `localhost`. But the address the operator
//! wrote is the truth: the socket is used only when
//! - the address is `127.0.0.1`, `::1` or `localhost`, TLS toward the
//!   backend is off, and the credential is one the configuration holds
//!   (server-looked-up users keep TCP);
//! - a TCP login of the credential reads `@@socket` and `@@port`, and the
//!   port is the address's own;
//! - the server resolves names (`skip_name_resolve = OFF`, its default):
//!   then a loopback TCP client is `localhost` to it, as a socket client
//!   is, and nothing a client reads (`USER()`, the process list's host)
//!   changes; a server that skips name resolution shows `127.0.0.1` over
//!   TCP, so it keeps TCP;
//! - a login over that socket with the same credentials sees the same
//!   `@@port` and lists the TCP login's thread — its id and the TCP login's
//!   own client port — in its `PROCESSLIST` (the same server process: not
//!   another server on the host using the same path, and not a forwarder
//!   such as HAProxy, a fault injector or an SSH tunnel, whose connection to
//!   the server has its own port), and is the same account
//!   (`CURRENT_USER()`: the server matches a socket client as `localhost`,
//!   which may pick another account row);
//! - and every later login over the socket, and every change of user on a
//!   socket backend (`BackendConn::clear_schema`), is again that account
//!   (read in the login's own query, no extra round trip for a login).
//!
//! Verdicts are proven again after [`RECHECK`] (a server moved to another
//! port behind the same socket path is left within it).
//! Anything unproven keeps TCP; a socket that stops taking logins, or a
//! login that lands on another account, sends the credential back to TCP
//! until a TCP login proves the socket again. One owner: `Pool::dial_once`
//! asks [`LocalSocket::route`] what to dial and reports back.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::backend::{BackendConn, BackendError, BackendParams};
use crate::config::{Address, Config, LocalSocketMode};

/// A verdict is this old before a TCP login checks it again: a server
/// restarted on another port, or an address pointed at another server,
/// is seen within this long even while its socket keeps answering.
const RECHECK: std::time::Duration = std::time::Duration::from_secs(300);

/// A check not finished after this was dropped with its dial.
const STALE_CHECK: std::time::Duration = std::time::Duration::from_secs(60);

/// What is known of one credential pool.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verdict {
    /// A check is running since then (other dials keep TCP meanwhile; one
    /// whose dial was dropped half-way is stale after [`STALE_CHECK`]).
    Checking(std::time::Instant),
    /// Proven (then): logins over the socket are this account
    /// (`user@host`). Proven again after [`RECHECK`].
    Socket(String, std::time::Instant),
    /// Not proven (or disproven) then: TCP, checked again after [`RECHECK`].
    Tcp(std::time::Instant),
}

/// Where one dial goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// The configured TCP address; `check` asks the caller to run
    /// [`LocalSocket::check`] on the connection once it has logged in.
    Tcp { check: bool },
    /// The server's socket; the login must be `account`.
    Socket { path: String, account: String },
}

/// The decision, shared by every dial.
#[derive(Debug)]
pub struct LocalSocket {
    /// The configured port, when the address qualifies at all.
    port: Option<u16>,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// The socket `@@socket` named on the last check.
    path: Option<String>,
    /// Per credential pool.
    verdicts: HashMap<usize, Verdict>,
}

impl LocalSocket {
    /// Off unless the configuration allows it and the address is a
    /// loopback TCP address without TLS.
    pub fn new(cfg: &Config) -> Self {
        let port = match cfg.backend.local_socket {
            LocalSocketMode::Off => None,
            LocalSocketMode::Auto if cfg.backend.tls => None,
            // Several servers: each dial picks the primary's address.
            LocalSocketMode::Auto if cfg.backend.servers().len() > 1 => None,
            LocalSocketMode::Auto => loopback_port(&cfg.backend.address),
        };
        Self {
            port,
            state: Mutex::new(State::default()),
        }
    }

    /// Whether the socket may be used at all.
    pub fn enabled(&self) -> bool {
        self.port.is_some()
    }

    /// Where a dial of credential pool `credential` (logging in with `p`)
    /// goes now.
    pub fn route(&self, credential: usize, p: &BackendParams) -> Route {
        if self.port.is_none() || !eligible(p) {
            return Route::Tcp { check: false };
        }
        let mut s = self.lock();
        let path = s.path.clone();
        let now = std::time::Instant::now();
        match (s.verdicts.get(&credential).cloned(), path) {
            (Some(Verdict::Socket(account, at)), Some(path)) => {
                if at.elapsed() >= RECHECK {
                    // This dial proves it again; the others keep the socket.
                    s.verdicts.insert(credential, Verdict::Socket(account, now));
                    return Route::Tcp { check: true };
                }
                Route::Socket { path, account }
            }
            (Some(Verdict::Checking(since)), _) if since.elapsed() < STALE_CHECK => {
                Route::Tcp { check: false }
            }
            (Some(Verdict::Tcp(at)), _) if at.elapsed() < RECHECK => Route::Tcp { check: false },
            _ => {
                s.verdicts.insert(credential, Verdict::Checking(now));
                Route::Tcp { check: true }
            }
        }
    }

    /// After a TCP login that [`Route::Tcp`] asked to check: reads the
    /// server's socket on `tcp`, logs in over it with `p`'s credentials and
    /// decides; every problem means TCP. Bounded by `p.connect_timeout`.
    /// An error means `tcp` itself broke (or was left mid-reply): the
    /// caller drops it.
    pub async fn check(
        &self,
        credential: usize,
        tcp: &mut BackendConn,
        p: &BackendParams,
    ) -> Result<(), BackendError> {
        let now = std::time::Instant::now();
        let (verdict, broken) = match self.prove(tcp, p).await {
            Ok((path, account)) => {
                tracing::info!(
                    socket = %path,
                    account = %account,
                    address = %p.address,
                    "backend connections go over the server's Unix socket (same server, same account as the TCP address; backend.local_socket = \"off\" keeps TCP)"
                );
                self.lock().path = Some(path);
                (Verdict::Socket(account, now), None)
            }
            Err(Unproven { why, broken }) => {
                tracing::info!(address = %p.address, user = %p.user, reason = %why, "backend connections stay on TCP");
                (Verdict::Tcp(now), broken)
            }
        };
        self.lock().verdicts.insert(credential, verdict);
        broken.map_or(Ok(()), Err)
    }

    /// The socket failed for `credential` (it did not take the connection
    /// or the login, or the login landed on another account): it goes back
    /// to TCP and is checked again at its next TCP login.
    pub fn failed(&self, credential: usize, error: &str) {
        let mut s = self.lock();
        if matches!(s.verdicts.get(&credential), Some(Verdict::Socket(..))) {
            tracing::warn!(
                error,
                "the server's Unix socket failed; back to TCP for this login"
            );
            s.verdicts.remove(&credential);
        }
    }

    /// The TCP login a check was to run on failed: checked at the next one.
    pub fn failed_check(&self, credential: usize) {
        let mut s = self.lock();
        if matches!(s.verdicts.get(&credential), Some(Verdict::Checking(_))) {
            s.verdicts.remove(&credential);
        }
    }

    /// The socket in use (for `/status`) and how many credential pools use it.
    pub fn view(&self) -> View {
        let s = self.lock();
        let on_socket = s
            .verdicts
            .values()
            .filter(|v| matches!(v, Verdict::Socket(..)))
            .count();
        View {
            mode: if self.enabled() { "auto" } else { "off" },
            socket: s.path.clone().filter(|_| on_socket > 0),
            credentials_on_socket: on_socket,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The proof (module doc): the socket's path and the account.
    async fn prove(
        &self,
        tcp: &mut BackendConn,
        p: &BackendParams,
    ) -> Result<(String, String), Unproven> {
        let port = self.port.ok_or_else(|| Unproven::from("off"))?;
        let Some(account) = tcp.account.clone() else {
            return Err("CURRENT_USER() unread on the TCP login".into());
        };
        let Some(local_port) = tcp
            .io
            .stream
            .tcp()
            .and_then(|t| t.local_addr().ok())
            .map(|a| a.port())
        else {
            return Err("the TCP login's own port is unknown".into());
        };
        let bound = p.connect_timeout;
        let read = tokio::time::timeout(
            bound,
            tcp.query_row("SELECT @@socket, @@port, @@skip_name_resolve"),
        )
        .await;
        let row = match read {
            Ok(Ok(Some(row))) => row,
            Ok(Ok(None)) => return Err("no @@socket row".into()),
            // An error reply leaves the connection as it was.
            Ok(Err(e @ BackendError::Server(_))) => {
                return Err(format!("reading @@socket: {e}").into());
            }
            // The connection broke, or is left mid-reply.
            Ok(Err(e)) => {
                return Err(Unproven {
                    why: format!("reading @@socket: {e}"),
                    broken: Some(e),
                });
            }
            Err(_) => {
                return Err(Unproven {
                    why: "reading @@socket timed out".into(),
                    broken: Some(BackendError::Timeout),
                });
            }
        };
        let (Some(Some(path)), Some(Some(tcp_port))) = (row.first(), row.get(1)) else {
            return Err("the server has no socket".into());
        };
        // With names resolved (the server's default) a loopback TCP client
        // is `localhost`, as a socket client is: USER() and the process
        // list read the same either way. Skipping them, TCP shows
        // `127.0.0.1` and the socket `localhost`: a client would see it.
        if row.get(2).and_then(Option::as_deref) != Some("0") {
            return Err(
                "the server skips name resolution: over its socket USER() would read localhost, not 127.0.0.1"
                    .into(),
            );
        }
        if tcp_port.parse::<u16>().ok() != Some(port) {
            return Err(format!(
                "the server listens on port {tcp_port}, the address names {port}: something forwards in between"
            )
            .into());
        }
        if Address::parse(path).problem(|_| false).is_some() || !path.starts_with('/') {
            return Err(format!("socket path {path:?} is not usable").into());
        }
        let (mut sock, _) = crate::backend::connect(&p.over(path))
            .await
            .map_err(|e| Unproven::from(format!("login over {path}: {e}")))?;
        // The TCP login's thread, by id and by its client port (another
        // server's thread may have the same small id; a forwarder's
        // connection has another port).
        let sql = format!(
            "SELECT @@port, (SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = {} AND HOST LIKE '%:{local_port}')",
            tcp.thread_id
        );
        let seen = tokio::time::timeout(bound, sock.query_row(&sql)).await;
        let sock_account = sock.account.clone();
        sock.quit().await;
        let seen = match seen {
            Ok(r) => r.map_err(|e| Unproven::from(format!("checking over {path}: {e}")))?,
            Err(_) => return Err(format!("checking over {path} timed out").into()),
        }
        .ok_or_else(|| Unproven::from("no row"))?;
        if seen.first().cloned().flatten().as_deref() != Some(tcp_port.as_str()) {
            return Err(format!("{path} is another server (port {:?})", seen.first()).into());
        }
        if seen.get(1).cloned().flatten().as_deref() != Some("1") {
            return Err(format!(
                "{path} is another server (the TCP login's thread is not listed there)"
            )
            .into());
        }
        if sock_account.as_deref() != Some(account.as_str()) {
            return Err(format!(
                "over {path} the login is {sock_account:?}, over TCP {account}: another account row matches localhost"
            )
            .into());
        }
        Ok((path.clone(), account))
    }
}

/// Why the socket was not proven, and whether the TCP connection broke.
struct Unproven {
    why: String,
    broken: Option<BackendError>,
}

impl From<String> for Unproven {
    fn from(why: String) -> Self {
        Self { why, broken: None }
    }
}

impl From<&str> for Unproven {
    fn from(why: &str) -> Self {
        why.to_string().into()
    }
}

/// `/status`'s view.
#[derive(Debug, Clone, serde::Serialize)]
pub struct View {
    /// `auto` (the address qualifies) or `off`.
    pub mode: &'static str,
    /// The socket backends are dialed over, if any credential uses it.
    pub socket: Option<String>,
    /// Credential pools proven on the socket.
    pub credentials_on_socket: usize,
}

/// Credentials the configuration holds (a password, no looked-up hash):
/// server-looked-up users keep TCP.
fn eligible(p: &BackendParams) -> bool {
    p.native_stage1.is_none() && !p.password.is_empty()
}

/// The port of a loopback `host:port` (`127.0.0.1`, `[::1]`, `localhost`).
fn loopback_port(address: &str) -> Option<u16> {
    let Address::Tcp(a) = Address::parse(address) else {
        return None;
    };
    let (host, port) = a.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    loopback.then(|| port.parse().ok()).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(password: &str, stage1: Option<[u8; 20]>) -> BackendParams {
        BackendParams {
            address: "127.0.0.1:3306".into(),
            user: "app".into(),
            password: password.into(),
            native_stage1: stage1,
            tls: None,
            connect_timeout: std::time::Duration::from_secs(1),
            pool: 0,
            flavour: crate::protocol::caps::Flavour::DEFAULT,
        }
    }

    fn with(address: &str, mode: LocalSocketMode, tls: bool) -> LocalSocket {
        let mut cfg = Config::default();
        cfg.backend.address = address.into();
        cfg.backend.local_socket = mode;
        cfg.backend.tls = tls;
        LocalSocket::new(&cfg)
    }

    #[test]
    fn only_loopback_tcp_without_tls_qualifies() {
        for a in [
            "127.0.0.1:3306",
            "localhost:3306",
            "[::1]:3306",
            "127.0.0.2:1",
        ] {
            assert!(with(a, LocalSocketMode::Auto, false).enabled(), "{a}");
        }
        for a in [
            "10.0.0.1:3306",
            "db.example:3306",
            "/run/mysqld/mysqld.sock",
            "127.0.0.1",
        ] {
            assert!(!with(a, LocalSocketMode::Auto, false).enabled(), "{a}");
        }
        assert!(!with("127.0.0.1:3306", LocalSocketMode::Off, false).enabled());
        assert!(!with("127.0.0.1:3306", LocalSocketMode::Auto, true).enabled());
    }

    #[test]
    fn one_check_at_a_time_then_the_verdict_holds() {
        let l = with("127.0.0.1:3306", LocalSocketMode::Auto, false);
        let p = params("secret", None);
        assert_eq!(l.route(0, &p), Route::Tcp { check: true });
        // While it runs, other dials keep TCP and do not check again.
        assert_eq!(l.route(0, &p), Route::Tcp { check: false });
        l.lock().path = Some("/s".into());
        l.lock().verdicts.insert(
            0,
            Verdict::Socket("app@%".into(), std::time::Instant::now()),
        );
        let on = Route::Socket {
            path: "/s".into(),
            account: "app@%".into(),
        };
        assert_eq!(l.route(0, &p), on);
        assert_eq!(l.view().credentials_on_socket, 1);
        // Another credential is checked on its own.
        assert_eq!(l.route(1, &p), Route::Tcp { check: true });
        // A failure sends it back to TCP, to be checked again.
        l.failed(0, "gone");
        assert_eq!(l.route(0, &p), Route::Tcp { check: true });
        l.lock()
            .verdicts
            .insert(0, Verdict::Tcp(std::time::Instant::now()));
        assert_eq!(l.route(0, &p), Route::Tcp { check: false });
        // Old verdicts are checked again: one dial checks, the others keep
        // the socket meanwhile.
        let old = std::time::Instant::now() - RECHECK;
        l.lock().verdicts.insert(0, Verdict::Tcp(old));
        assert_eq!(l.route(0, &p), Route::Tcp { check: true });
        l.lock()
            .verdicts
            .insert(0, Verdict::Socket("app@%".into(), old));
        assert_eq!(l.route(0, &p), Route::Tcp { check: true });
        assert_eq!(l.route(0, &p), on);
    }

    #[test]
    fn looked_up_users_and_passwordless_logins_keep_tcp() {
        let l = with("127.0.0.1:3306", LocalSocketMode::Auto, false);
        assert_eq!(l.route(0, &params("", None)), Route::Tcp { check: false });
        assert_eq!(
            l.route(0, &params("", Some([1; 20]))),
            Route::Tcp { check: false }
        );
    }
}
