//! The server's idle-client timeouts, kept by the session. A server closes
//! a connection that sends nothing for its session's `wait_timeout`
//! (`interactive_timeout` for a CLIENT_INTERACTIVE login), or, inside a
//! transaction, for `idle_transaction_timeout` when that is set
//! (`THD::get_net_wait_timeout`). Under pooling the server never sees the
//! client idle (and closing a pooled backend would not reach the client),
//! so the session ends the client connection itself, silently and with a
//! reset, as the server does: the client's next command fails to go out
//! (2006), which drivers with auto-reconnect act on.
//!
//! It also keeps the other end of that bargain: a backend the session holds
//! (pinned) that the server closes while the client is idle (KILL, the
//! server's own idle timeouts, shutdown) ends the client connection at
//! once, after relaying whatever the server said last, as a direct
//! connection would end.

use std::collections::BTreeMap;
use std::time::Duration;

use super::{End, Session};
use crate::pool::group::Leased;
use crate::wire::WireError;

/// How long the server may take to close after it spoke unprompted.
const LAST_WORDS: Duration = Duration::from_millis(200);

/// Waits until the held backend (if any) speaks or closes while its client
/// is idle; never returns when none is held. Cancel-safe (bytes read stay
/// buffered).
pub(super) async fn held_backend_stirs(held: &mut Option<Leased>) -> Result<(), WireError> {
    match held {
        Some(b) => b.io.watch_peer().await,
        None => std::future::pending().await,
    }
}

impl Session {
    /// A keepalive for the held backend: the client's COM_PING goes to it
    /// (as it would go to the server direct), and so does a COM_PING for a
    /// command the proxy answered itself when the backend sat unused long
    /// enough for the server's idle timeout to matter — so a pool's
    /// keepalive keeps a pinned backend's `wait_timeout` away. A backend
    /// that does not answer has ended: so does the session.
    pub(super) async fn keep_held_alive(&mut self) -> Result<(), End> {
        let Some(b) = self.backend.as_mut() else {
            return Ok(());
        };
        match b.ping().await {
            Ok(()) => {
                self.held_used = tokio::time::Instant::now();
                Ok(())
            }
            Err(e) => {
                tracing::debug!(error = %e, "the held backend did not answer a keepalive");
                if self.let_go_of_held_replica() {
                    return Ok(());
                }
                self.backend = None;
                Err(End::BackendEnded)
            }
        }
    }

    /// The client connection will end with a reset, not a close, as the
    /// server ends a connection idle past its timeout: the client's next
    /// write then fails (2006, which libmariadb's auto-reconnect retries),
    /// where after a plain close the write passes and the read fails (2013).
    pub(super) fn reset_on_close(&self) {
        if let Some(tcp) = self.client.stream.tcp() {
            let _ = tcp.set_zero_linger();
        }
    }

    /// The held backend stirred while the client was idle (`stirred`: what
    /// [`held_backend_stirs`] returned). A server only speaks unprompted
    /// right before it closes (1053 at shutdown, a timeout's error): its
    /// packets are relayed as they are, then the client connection is
    /// closed, so the client sees what it would have seen direct.
    pub(super) async fn held_backend_ended(&mut self, stirred: Result<(), WireError>) -> End {
        let mut ended = stirred.err();
        if let Some(mut b) = self.backend.take() {
            if ended.is_none() {
                let max = self.max_packet();
                loop {
                    match tokio::time::timeout(LAST_WORDS, b.io.read_packet(max)).await {
                        Ok(Ok(p)) => {
                            self.client.write_packet(p.seq, &p.payload);
                        }
                        Ok(Err(e)) => {
                            ended = Some(e);
                            break;
                        }
                        Err(_) => break,
                    }
                }
                let _ = self.client.flush().await;
            }
            // Dropped, not returned: the server ended that session.
            drop(b);
        }
        // A server that reset its end (its idle timeouts do) resets the
        // client's too.
        if let Some(WireError::Io(e)) = &ended
            && e.kind() == std::io::ErrorKind::ConnectionReset
        {
            self.reset_on_close();
        }
        tracing::debug!("the server closed a pinned session's backend while the client was idle");
        End::BackendEnded
    }
}

/// The server's global idle timeouts (seconds), parsed once from the
/// start-up snapshot: every command reads them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IdleGlobals {
    /// `wait_timeout`.
    pub wait: Option<u64>,
    /// `interactive_timeout`.
    pub interactive: Option<u64>,
    /// `idle_transaction_timeout`.
    pub transaction: Option<u64>,
    /// `idle_readonly_transaction_timeout` and
    /// `idle_write_transaction_timeout` are set (above 0), in that order.
    pub kind_specific: [bool; 2],
}

impl IdleGlobals {
    /// Reads them through `global` (a variable's global value by name).
    pub fn read<'a>(global: impl Fn(&str) -> Option<&'a str>) -> Self {
        let num = |n: &str| global(n).and_then(|v| v.parse::<u64>().ok());
        Self {
            wait: num("wait_timeout"),
            interactive: num("interactive_timeout"),
            transaction: num("idle_transaction_timeout"),
            kind_specific: KIND_SPECIFIC.map(|n| num(n).is_some_and(|s| s > 0)),
        }
    }
}

/// The read-only and read-write variants of the idle transaction timeout.
const KIND_SPECIFIC: [&str; 2] = [
    "idle_readonly_transaction_timeout",
    "idle_write_transaction_timeout",
];

/// How long the server would let this client stay silent: `vars` are the
/// session's variables set away from their defaults, `interactive` the
/// login's CLIENT_INTERACTIVE, `in_trans` an open transaction. `None` when
/// nothing says (no value could be read).
pub fn limit(
    vars: &BTreeMap<String, String>,
    globals: Option<&IdleGlobals>,
    interactive: bool,
    in_trans: bool,
) -> Option<Duration> {
    // Every command asks, and sessions rarely set any of these: names
    // that could be one of them start with 'i' or 'w'.
    let any_set = vars
        .keys()
        .any(|k| matches!(k.as_bytes().first(), Some(b'i' | b'w')));
    let session = |name: &str| {
        if !any_set {
            return None;
        }
        vars.get(name).map(|v| v.parse::<u64>().ok())
    };
    if in_trans {
        // The read-only and read-write variants need to know which kind the
        // transaction is; with either set, the server's own timeout on the
        // pinned backend applies and the proxy keeps to wait_timeout.
        let specific = KIND_SPECIFIC
            .iter()
            .enumerate()
            .any(|(i, n)| match session(n) {
                Some(v) => v.is_some_and(|s| s > 0),
                None => globals.is_some_and(|g| g.kind_specific[i]),
            });
        let trx = match session("idle_transaction_timeout") {
            Some(v) => v,
            None => globals.and_then(|g| g.transaction),
        };
        if let Some(s) = trx.filter(|&s| s > 0 && !specific) {
            return Some(Duration::from_secs(s));
        }
    }
    let secs = match session("wait_timeout") {
        Some(v) => v?,
        None if interactive => match session("interactive_timeout") {
            Some(v) => v?,
            None => globals?.interactive?,
        },
        None => globals?.wait?,
    };
    Some(Duration::from_secs(secs.max(1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SERVER_VARS: &[(&str, &str)] = &[
        ("wait_timeout", "28800"),
        ("interactive_timeout", "600"),
        ("idle_transaction_timeout", "0"),
        ("idle_readonly_transaction_timeout", "0"),
        ("idle_write_transaction_timeout", "0"),
    ];

    fn globals(v: &[(&'static str, &'static str)]) -> IdleGlobals {
        IdleGlobals::read(|name| v.iter().find(|(n, _)| *n == name).map(|(_, v)| *v))
    }

    fn vars(v: &[(&str, &str)]) -> BTreeMap<String, String> {
        v.iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_session_value_then_the_login_default() {
        let s = |secs| Some(Duration::from_secs(secs));
        assert_eq!(
            limit(&vars(&[]), Some(&globals(SERVER_VARS)), false, false),
            s(28800)
        );
        assert_eq!(
            limit(&vars(&[]), Some(&globals(SERVER_VARS)), true, false),
            s(600)
        );
        assert_eq!(
            limit(
                &vars(&[("wait_timeout", "5")]),
                Some(&globals(SERVER_VARS)),
                true,
                false
            ),
            s(5)
        );
        // Unknown globals: nothing to enforce.
        assert_eq!(limit(&vars(&[]), None, false, false), None);
        assert_eq!(
            limit(&vars(&[("wait_timeout", "7")]), None, false, true),
            s(7)
        );
    }

    #[test]
    fn an_idle_transaction_has_its_own_timeout() {
        let s = |secs| Some(Duration::from_secs(secs));
        let v = vars(&[("idle_transaction_timeout", "3"), ("wait_timeout", "50")]);
        assert_eq!(limit(&v, Some(&globals(SERVER_VARS)), false, true), s(3));
        assert_eq!(limit(&v, Some(&globals(SERVER_VARS)), false, false), s(50));
        // A read-only/read-write variant set: the kind is unknown here.
        let v = vars(&[
            ("idle_transaction_timeout", "3"),
            ("idle_write_transaction_timeout", "2"),
            ("wait_timeout", "50"),
        ]);
        assert_eq!(limit(&v, Some(&globals(SERVER_VARS)), false, true), s(50));
        // The same from the server's globals.
        let g = globals(&[
            ("wait_timeout", "40"),
            ("idle_transaction_timeout", "3"),
            ("idle_readonly_transaction_timeout", "9"),
        ]);
        assert_eq!(limit(&vars(&[]), Some(&g), false, true), s(40));
        let g = globals(&[("wait_timeout", "40"), ("idle_transaction_timeout", "3")]);
        assert_eq!(limit(&vars(&[]), Some(&g), false, true), s(3));
        // A session that turned the variant off again.
        let v = vars(&[("idle_readonly_transaction_timeout", "0")]);
        let g = globals(&[
            ("wait_timeout", "40"),
            ("idle_transaction_timeout", "3"),
            ("idle_readonly_transaction_timeout", "9"),
        ]);
        assert_eq!(limit(&v, Some(&g), false, true), s(3));
    }
}
