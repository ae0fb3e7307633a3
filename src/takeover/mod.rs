//! Hand-over of the listening sockets to a new process (binary upgrade
//! without refusing a connection). Owns the control-socket protocol and
//! both of its sides; knows nothing of the MySQL protocol or of sessions.
//!
//! ```text
//! new process (--takeover)                old process (takeover_socket)
//!   config loaded and validated
//!   connect ───────────────────────────►  accept (one hand-over at a time)
//!   "myplex-takeover 1" ───────────────►
//!                     ◄─────────────────  "listeners mysql=tcp admin=tcp control=unix"
//!                                          + the three descriptors (SCM_RIGHTS)
//!   adopt the ones bound where its own
//!   config says; build pools, TLS …
//!   "commit mysql admin control" ──────►  keep those socket files, stop accepting
//!                     ◄─────────────────  "draining <pid> next-id=<n>"
//!   accept on the inherited sockets        drain: sessions end at their next
//!   serve the control socket               transaction boundary, then exit
//! ```
//!
//! The listening sockets never close: the same sockets live on in the new
//! process, so connection attempts queue in the kernel while neither
//! process accepts, and none is refused. Until "commit" the old process
//! keeps accepting; a new process that fails (bad config, crash, timeout)
//! leaves it serving. `give` is the old process's side, `take` the new
//! one's, `fds` the descriptor passing, `moves` the idle sessions that
//! follow over the same connection after the commit, `successor` the
//! `SIGUSR2` start of the binary on disk, `notify` systemd's `MAINPID=`.

pub mod fds;
pub mod give;
pub mod moves;
pub mod notify;
pub mod successor;
pub mod take;

use std::time::Duration;

/// The first line a new process sends.
pub const HELLO: &str = "myplex-takeover 1";
/// How long either side waits for a line, except the commit.
pub const LINE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the old process waits for the new one to commit (it connects
/// to the backend and builds its pools in between).
pub const COMMIT_TIMEOUT: Duration = Duration::from_secs(120);
/// Connection ids the new process skips past the old one's counter (ids the
/// old process may still hand out between "commit" and its accept loop
/// stopping).
pub const ID_MARGIN: u32 = 1024;

/// Why a hand-over did not happen.
#[derive(Debug, thiserror::Error)]
pub enum TakeoverError {
    /// Nothing accepts on the control socket.
    #[error(
        "no running myplex accepts a hand-over at {path} ({source}); is takeover_socket the same as the running process's?"
    )]
    Connect {
        /// The control socket.
        path: String,
        /// The connect error.
        source: std::io::Error,
    },
    /// The running process said no.
    #[error("the running myplex refused the hand-over: {0}")]
    Refused(String),
    /// An unexpected line.
    #[error("hand-over protocol error: {0}")]
    Protocol(String),
    /// The control connection failed.
    #[error("hand-over control connection: {0}")]
    Io(#[from] std::io::Error),
    /// `takeover_socket` is empty.
    #[error("--takeover needs takeover_socket in the configuration")]
    NotConfigured,
}
