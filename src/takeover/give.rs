//! The running process's side of a hand-over: accepts on the control
//! socket, lends duplicates of its listening descriptors to a new process,
//! and on its "commit" runs the caller's stop action (keep socket files,
//! stop accepting, drain). One hand-over at a time; a new process that goes
//! away or times out before committing changes nothing here.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use tracing::{info, warn};

use super::{COMMIT_TIMEOUT, HELLO, LINE_TIMEOUT, fds};
use crate::frontend::Shared;
use crate::listener::Listener;
use crate::shutdown::ShutdownTrigger;
use crate::wire::Socket;

/// A listening socket lent to a successor.
#[derive(Debug)]
pub struct Lent {
    /// `mysql`, `admin` or `control`.
    pub name: &'static str,
    /// `tcp` or `unix`.
    pub kind: &'static str,
    /// A duplicate of the listening descriptor.
    pub fd: OwnedFd,
}

/// Runs once a successor committed, with the names of the listeners it
/// adopted (their socket files are its own now); returns the next free
/// connection id.
pub type OnCommit = Box<dyn Fn(&[&str]) -> u32 + Send + Sync>;

/// What this process hands over, and what it does when a successor takes it.
pub struct Handover {
    /// Descriptors lent to each successor that asks.
    pub lent: Vec<Lent>,
    /// Stops accepting and starts the drain.
    pub on_commit: OnCommit,
    /// Where idle sessions go after the commit (the control connection is
    /// installed in it).
    pub mover: Arc<super::moves::Mover>,
}

impl std::fmt::Debug for Handover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handover")
            .field("lent", &self.lent)
            .finish_non_exhaustive()
    }
}

impl Handover {
    /// What this process lends a successor, and how it stops when one commits:
    /// the socket files it adopted stay, the admin endpoint and the accept loop stop, sessions
    /// drain at their transaction boundaries.
    pub fn of_process(
        listener: &Listener,
        admin: &tokio::net::TcpListener,
        control: &Listener,
        admin_stop: ShutdownTrigger,
        trigger: &Arc<ShutdownTrigger>,
        shared: &Arc<Shared>,
    ) -> io::Result<Handover> {
        let lent = vec![
            Lent {
                name: "mysql",
                kind: listener.kind(),
                fd: listener.dup_fd()?,
            },
            Lent {
                name: "admin",
                kind: "tcp",
                fd: admin.as_fd().try_clone_to_owned()?,
            },
            Lent {
                name: "control",
                kind: control.kind(),
                fd: control.dup_fd()?,
            },
        ];
        let files: Vec<_> = [("mysql", listener.keeper()), ("control", control.keeper())]
            .into_iter()
            .filter_map(|(name, k)| Some((name, k?)))
            .collect();
        let trigger = trigger.clone();
        let shared = shared.clone();
        Ok(Handover {
            lent,
            mover: shared.mover.clone(),
            on_commit: Box::new(move |adopted| {
                // A file the successor did not adopt (its config moved the
                // socket) goes when this process's listener closes.
                for (name, f) in &files {
                    if adopted.contains(name) {
                        f.keep();
                    }
                }
                admin_stop.trigger();
                trigger.hand_over();
                // Sessions leave for the new process, which opens its own
                // backends: this one keeps none idle from now on.
                for g in &shared.pool.groups {
                    g.retire();
                }
                shared.next_id.load(Ordering::Relaxed)
            }),
        })
    }
}

/// How one control connection ended.
enum Outcome {
    Committed,
    Aborted(String),
}

/// Serves `control` until a successor commits (then returns, dropping this
/// process's control listener; its file stays if the caller kept it).
pub async fn serve(control: Listener, handover: Handover) {
    let handover = Arc::new(handover);
    loop {
        let socket = match control.accept().await {
            Ok((Socket::Unix(s), _)) => s,
            Ok(_) => continue,
            Err(e) => {
                warn!(error = %e, "takeover control accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        let stream = match socket.into_std().and_then(|s| {
            s.set_nonblocking(false)?;
            Ok(s)
        }) {
            Ok(s) => s,
            Err(e) => {
                warn!(error = %e, "takeover control connection unusable");
                continue;
            }
        };
        let h = handover.clone();
        let outcome = tokio::task::spawn_blocking(move || exchange(&stream, &h)).await;
        match outcome {
            Ok(Ok(Outcome::Committed)) => {
                info!("listeners handed over; this process stops accepting and drains");
                return;
            }
            Ok(Ok(Outcome::Aborted(reason))) => {
                warn!(reason = %reason, "takeover aborted; still serving");
            }
            Ok(Err(e)) => {
                warn!(error = %e, "takeover aborted (the new process failed or went away); still serving");
            }
            Err(e) => warn!(error = %e, "takeover task failed; still serving"),
        }
    }
}

/// One successor's conversation (blocking).
fn exchange(stream: &UnixStream, h: &Handover) -> io::Result<Outcome> {
    stream.set_read_timeout(Some(LINE_TIMEOUT))?;
    stream.set_write_timeout(Some(LINE_TIMEOUT))?;
    let hello = fds::read_line(stream)?;
    if hello != HELLO {
        let _ = fds::send_line(stream, "refused unknown protocol version");
        return Ok(Outcome::Aborted(format!("unexpected greeting {hello:?}")));
    }
    let names: Vec<String> = h
        .lent
        .iter()
        .map(|l| format!("{}={}", l.name, l.kind))
        .collect();
    let borrowed: Vec<_> = h.lent.iter().map(|l| l.fd.as_fd()).collect();
    fds::send_with_fds(stream, &format!("listeners {}", names.join(" ")), &borrowed)?;
    info!(pid = ?peer_pid(stream), "takeover: listeners lent to a new process; waiting for its commit");
    stream.set_read_timeout(Some(COMMIT_TIMEOUT))?;
    let line = fds::read_line(stream)?;
    let Some(adopted) = line
        .strip_prefix("commit")
        .filter(|r| r.is_empty() || r.starts_with(' '))
    else {
        return Ok(Outcome::Aborted(format!("expected commit, got {line:?}")));
    };
    let adopted: Vec<&str> = adopted.split_whitespace().collect();
    // Sessions start moving as soon as the drain starts: the connection is
    // theirs once the answer to the commit is written.
    h.mover.install_during(stream, || {
        let next_id = (h.on_commit)(&adopted);
        let _ = fds::send_line(
            stream,
            &format!("draining {} next-id={next_id}", std::process::id()),
        );
    });
    Ok(Outcome::Committed)
}

/// The connecting process's pid, for the log.
fn peer_pid(stream: &UnixStream) -> Option<i32> {
    rustix::net::sockopt::socket_peercred(stream)
        .ok()
        .map(|c| c.pid.as_raw_nonzero().get())
}
