//! Idle client sessions moving to the new process after a hand-over: the
//! client's socket and its session record go over the control connection
//! the hand-over used, one session at a time.
//!
//! ```text
//! old process (a session, when idle)      new process (one receiving thread)
//!   "session <len>" + client socket ───►
//!   <len> bytes: the session record ───►   rebuild the session, reserve its id
//!                     ◄────────────────   "moved"            (it serves the client now)
//!                                     or   "refused <why>"    (the old one goes on)
//! ```
//!
//! The old side closes its copy of the socket only after "moved" (never a
//! shutdown: the connection lives on in the new process). A control
//! connection that fails mid-way leaves the outcome unknown: the old side
//! then ends the session without touching the socket, and stops moving
//! others (see [`Sent::Lost`]). What the record holds is the session's
//! business (`frontend::session::moving`); this module carries bytes.

use std::io::{self, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};

use super::{LINE_TIMEOUT, fds};

/// Largest session record accepted (prepared statements' responses are
/// in it).
pub const MAX_RECORD: usize = 64 * 1024 * 1024;

/// The old process's end of the moves: the control connection once a
/// successor committed (`None` before, and after a failure).
#[derive(Debug, Default)]
pub struct Mover {
    /// One move at a time, waited for without blocking a worker thread.
    turn: tokio::sync::Mutex<()>,
    /// The control connection (blocking I/O, used off the async workers).
    slot: Arc<Mutex<Option<UnixStream>>>,
}

/// How sending a session went.
#[derive(Debug)]
pub enum Sent {
    /// The new process serves the client now.
    Moved,
    /// The new process said no (the session goes on here).
    Refused(String),
    /// No successor takes sessions (none committed, or the connection
    /// failed earlier).
    Unavailable,
    /// The control connection failed after the socket went: whether the
    /// new process serves the client is unknown.
    Lost(io::Error),
}

impl Mover {
    /// Holds the control connection locked while `f` runs, with `stream`
    /// installed for later moves: the successor's commit answer is written
    /// in `f` before any session's record.
    pub fn install_during<T>(&self, stream: &UnixStream, f: impl FnOnce() -> T) -> T {
        let mut slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        *slot = stream.try_clone().ok();
        f()
    }

    /// True once a successor takes sessions.
    pub fn available(&self) -> bool {
        self.slot.lock().map(|s| s.is_some()).unwrap_or(false)
    }

    /// Sends one session: its client socket and its record; waits for the
    /// new process's answer.
    pub async fn send(&self, socket: OwnedFd, record: Vec<u8>) -> Sent {
        let _turn = self.turn.lock().await;
        if !self.available() {
            return Sent::Unavailable;
        }
        let slot = self.slot.clone();
        let sent = tokio::task::spawn_blocking(move || {
            let mut guard = slot.lock().unwrap_or_else(|p| p.into_inner());
            let Some(stream) = guard.as_ref() else {
                return Sent::Unavailable;
            };
            let sent = send_on(stream, &socket, &record);
            if matches!(sent, Sent::Lost(_)) {
                // Later moves would meet the same broken connection.
                *guard = None;
            }
            sent
        })
        .await;
        sent.unwrap_or_else(|e| Sent::Lost(io::Error::other(e.to_string())))
    }
}

/// One session over `stream` (blocking).
fn send_on(stream: &UnixStream, socket: &OwnedFd, record: &[u8]) -> Sent {
    let exchange = || -> io::Result<String> {
        stream.set_write_timeout(Some(LINE_TIMEOUT))?;
        stream.set_read_timeout(Some(LINE_TIMEOUT))?;
        fds::send_with_fds(
            stream,
            &format!("session {}", record.len()),
            &[socket.as_fd()],
        )?;
        let mut w = stream;
        w.write_all(record)?;
        fds::read_line(stream)
    };
    match exchange() {
        Ok(line) if line == "moved" => Sent::Moved,
        Ok(line) => match line.strip_prefix("refused") {
            Some(why) => Sent::Refused(why.trim().to_string()),
            None => Sent::Lost(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("unexpected answer {line:?}"),
            )),
        },
        Err(e) => Sent::Lost(e),
    }
}

/// The new process's end: the next session sent, as (client socket,
/// record); `None` once the old process closed the connection (it exited).
pub fn receive(stream: &UnixStream) -> io::Result<Option<(OwnedFd, Vec<u8>)>> {
    stream.set_read_timeout(None)?;
    let (line, received) = match fds::recv_line(stream) {
        Ok(r) => r,
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    };
    let len = line
        .strip_prefix("session ")
        .and_then(|n| n.parse::<usize>().ok())
        .filter(|n| *n <= MAX_RECORD)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, format!("bad line {line:?}")))?;
    let mut received = received.into_iter();
    let (Some(socket), None) = (received.next(), received.next()) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "a session must come with exactly one socket",
        ));
    };
    stream.set_read_timeout(Some(LINE_TIMEOUT))?;
    let mut record = vec![0; len];
    let mut r = stream;
    r.read_exact(&mut record)?;
    Ok(Some((socket, record)))
}

/// The new process's answer to one session: `Ok` when it serves it.
pub fn answer(stream: &UnixStream, outcome: &Result<(), String>) -> io::Result<()> {
    stream.set_write_timeout(Some(LINE_TIMEOUT))?;
    match outcome {
        Ok(()) => fds::send_line(stream, "moved"),
        Err(why) => fds::send_line(stream, &format!("refused {}", why.replace('\n', " "))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_session_goes_over_with_its_socket_and_its_answer_comes_back() {
        let (old, new) = UnixStream::pair().expect("pair");
        let mover = Mover::default();
        assert!(matches!(
            mover.send(dup_of_stdin(), b"x".to_vec()).await,
            Sent::Unavailable
        ));
        mover.install_during(&old, || ());
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        let client = std::net::TcpStream::connect(addr).expect("connect");
        let (served, _) = listener.accept().expect("accept");
        let taker = std::thread::spawn(move || {
            let (fd, record) = receive(&new).expect("receive").expect("one session");
            assert_eq!(record, b"{\"v\":1}");
            let mut moved = std::net::TcpStream::from(fd);
            moved
                .write_all(b"hello")
                .expect("write on the moved socket");
            answer(&new, &Ok(())).expect("answer");
            let (fd, _) = receive(&new).expect("receive").expect("second");
            drop(fd);
            answer(&new, &Err("no such user\nx".into())).expect("answer");
            receive(&new).expect("eof")
        });
        let fd: OwnedFd = served.into();
        assert!(matches!(
            mover.send(fd, b"{\"v\":1}".to_vec()).await,
            Sent::Moved
        ));
        let mut got = [0u8; 5];
        let mut c = &client;
        c.read_exact(&mut got).expect("read");
        assert_eq!(&got, b"hello");
        match mover.send(dup_of_stdin(), b"{}".to_vec()).await {
            Sent::Refused(why) => assert_eq!(why, "no such user x"),
            other => panic!("expected a refusal, got {other:?}"),
        }
        drop(mover);
        drop(old);
        assert!(taker.join().expect("taker").is_none());
    }

    #[test]
    fn a_record_without_its_socket_or_too_large_is_refused() {
        let (a, b) = UnixStream::pair().expect("pair");
        fds::send_line(&a, "session 3").expect("send");
        assert!(receive(&b).is_err());
        let (a, b) = UnixStream::pair().expect("pair");
        let fd = dup_of_stdin();
        fds::send_with_fds(&a, &format!("session {}", MAX_RECORD + 1), &[fd.as_fd()])
            .expect("send");
        assert!(receive(&b).is_err());
    }

    fn dup_of_stdin() -> OwnedFd {
        let (a, _b) = UnixStream::pair().expect("pair");
        a.into()
    }
}
