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
use std::sync::atomic::{AtomicBool, Ordering};
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
    /// The control connection (blocking I/O, used off the async workers:
    /// only a blocking thread ever locks it for long).
    slot: Arc<Mutex<Option<UnixStream>>>,
    /// A successor takes sessions: the control connection is installed and
    /// has not failed (read without the lock, from async code).
    open: Arc<AtomicBool>,
    /// The new process's side: sessions may still arrive from the old
    /// process (its drain waits for them, see [`Mover::receiving`]).
    receiving: AtomicBool,
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
        self.open.store(slot.is_some(), Ordering::Release);
        f()
    }

    /// True once a successor takes sessions (and its connection has not
    /// failed).
    pub fn available(&self) -> bool {
        self.open.load(Ordering::Acquire)
    }

    /// Waits for this session's turn to move (one at a time); `None` when
    /// `interrupt` comes first (the client spoke: it is served first, and
    /// tries again at its next boundary).
    pub async fn turn(
        &self,
        interrupt: impl std::future::Future<Output = ()>,
    ) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        tokio::select! {
            // A free turn is taken even when the client already spoke: its
            // command waits in the socket, which the new process reads.
            biased;
            t = self.turn.lock() => Some(t),
            _ = interrupt => None,
        }
    }

    /// Sends one session (its turn held): its client socket and its
    /// record; waits for the new process's answer.
    pub async fn send(&self, socket: OwnedFd, record: Vec<u8>) -> Sent {
        if !self.available() {
            return Sent::Unavailable;
        }
        let (slot, open) = (self.slot.clone(), self.open.clone());
        let sent = tokio::task::spawn_blocking(move || {
            let mut guard = slot.lock().unwrap_or_else(|p| p.into_inner());
            let Some(stream) = guard.as_ref() else {
                return Sent::Unavailable;
            };
            let sent = send_on(stream, &socket, &record);
            if matches!(sent, Sent::Lost(_) | Sent::Unavailable) {
                // Later moves would meet the same broken connection.
                *guard = None;
                open.store(false, Ordering::Release);
            }
            sent
        })
        .await;
        sent.unwrap_or_else(|e| Sent::Lost(io::Error::other(e.to_string())))
    }

    /// The new process's side: sessions may arrive (`true`) or no longer
    /// can (the old process is gone).
    pub fn set_receiving(&self, on: bool) {
        self.receiving.store(on, Ordering::Release);
    }

    /// True while the old process may still send sessions here: this
    /// process does not exit meanwhile, even when its own sessions are
    /// gone (a second upgrade right after the first).
    pub fn receiving(&self) -> bool {
        self.receiving.load(Ordering::Acquire)
    }
}

/// One session over `stream` (blocking).
fn send_on(stream: &UnixStream, socket: &OwnedFd, record: &[u8]) -> Sent {
    let timeouts = stream
        .set_write_timeout(Some(LINE_TIMEOUT))
        .and_then(|()| stream.set_read_timeout(Some(LINE_TIMEOUT)));
    // Until the line with the socket is out, the session never left: it
    // stays here (and no later session tries this connection).
    if timeouts.is_err()
        || fds::send_with_fds(
            stream,
            &format!("session {}", record.len()),
            &[socket.as_fd()],
        )
        .is_err()
    {
        return Sent::Unavailable;
    }
    let exchange = || -> io::Result<String> {
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
/// record; empty when it was larger than [`MAX_RECORD`]); `None` once the
/// old process closed the connection (it exited).
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
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, format!("bad line {line:?}")))?;
    let mut received = received.into_iter();
    let (Some(socket), None) = (received.next(), received.next()) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "a session must come with exactly one socket",
        ));
    };
    stream.set_read_timeout(Some(LINE_TIMEOUT))?;
    let mut r = stream;
    if len > MAX_RECORD {
        // Read past it (the connection stays in step); the caller refuses
        // an empty record.
        io::copy(&mut (&mut r).take(len as u64), &mut io::sink())?;
        return Ok(Some((socket, Vec::new())));
    }
    let mut record = vec![0; len];
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
        let big = MAX_RECORD + 1;
        let writer = std::thread::spawn(move || {
            fds::send_with_fds(&a, &format!("session {big}"), &[fd.as_fd()]).expect("send");
            let mut w = &a;
            w.write_all(&vec![b'x'; big]).expect("record");
            fds::send_with_fds(&a, "session 2", &[fd.as_fd()]).expect("send");
            w.write_all(b"{}").expect("record");
            a
        });
        let (_, record) = receive(&b).expect("read past").expect("one");
        assert!(record.is_empty(), "an oversized record is skipped");
        let (_, record) = receive(&b).expect("the next one").expect("two");
        assert_eq!(record, b"{}", "the connection stays in step");
        drop(writer.join());
    }

    fn dup_of_stdin() -> OwnedFd {
        let (a, _b) = UnixStream::pair().expect("pair");
        a.into()
    }
}
