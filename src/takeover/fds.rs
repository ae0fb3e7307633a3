//! Descriptors over a Unix stream socket: one text line (ending in `\n`)
//! carrying `SCM_RIGHTS`, and plain lines. Blocking I/O on a std
//! `UnixStream` (the exchange is short and runs off the async workers).
//! Knows nothing of what the descriptors are.

use std::io::{self, IoSlice, IoSliceMut, Read, Write};
use std::mem::MaybeUninit;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;

use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};

/// Most descriptors one line carries.
pub const MAX_FDS: usize = 4;
/// Longest line accepted.
const MAX_LINE: usize = 4096;

/// Sends `line` (a `\n` is appended) with `fds` attached to its first byte.
pub fn send_with_fds(stream: &UnixStream, line: &str, fds: &[BorrowedFd<'_>]) -> io::Result<()> {
    if fds.len() > MAX_FDS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "too many descriptors",
        ));
    }
    let text = format!("{line}\n");
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(io::Error::other("ancillary buffer too small"));
    }
    let bytes = text.as_bytes();
    let sent = rustix::net::sendmsg(
        stream,
        &[IoSlice::new(bytes)],
        &mut control,
        SendFlags::NOSIGNAL,
    )?;
    // The descriptors went with the first byte; the rest is plain data.
    let mut w = stream;
    w.write_all(&bytes[sent..])
}

/// Sends `line` (a `\n` is appended) without descriptors.
pub fn send_line(stream: &UnixStream, line: &str) -> io::Result<()> {
    send_with_fds(stream, line, &[])
}

/// Reads one line and every descriptor that arrived with it (close-on-exec).
/// A peer that closes first is `UnexpectedEof`; a line longer than 4 KiB,
/// not UTF-8, or with truncated descriptors is `InvalidData`.
pub fn recv_line(stream: &UnixStream) -> io::Result<(String, Vec<OwnedFd>)> {
    let mut line = Vec::new();
    let mut fds = Vec::new();
    // One byte at a time: nothing past the newline is consumed, so the
    // next line (and its descriptors) stays in the socket.
    loop {
        let mut byte = [0u8; 1];
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let got = rustix::net::recvmsg(
            stream,
            &mut [IoSliceMut::new(&mut byte)],
            &mut control,
            RecvFlags::CMSG_CLOEXEC,
        )?;
        for msg in control.drain() {
            if let RecvAncillaryMessage::ScmRights(received) = msg {
                fds.extend(received);
            }
        }
        if got.flags.contains(ReturnFlags::CTRUNC) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "descriptors truncated",
            ));
        }
        if got.bytes == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "peer closed the control connection",
            ));
        }
        if byte[0] == b'\n' {
            break;
        }
        line.push(byte[0]);
        if line.len() > MAX_LINE {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "line too long"));
        }
    }
    let line = String::from_utf8(line)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "line is not UTF-8"))?;
    Ok((line, fds))
}

/// Reads one line, refusing descriptors (they are closed).
pub fn read_line(stream: &UnixStream) -> io::Result<String> {
    let (line, _fds) = recv_line(stream)?;
    Ok(line)
}

/// Drains and ignores what is left (used before closing).
pub fn discard(mut stream: &UnixStream) {
    let mut buf = [0u8; 256];
    while matches!(stream.read(&mut buf), Ok(n) if n > 0) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn a_line_carries_descriptors_that_stay_usable() {
        let (a, b) = UnixStream::pair().expect("pair");
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr");
        send_with_fds(&a, "listeners mysql=tcp", &[l.as_fd()]).expect("send");
        send_line(&a, "second").expect("send");
        let (line, fds) = recv_line(&b).expect("recv");
        assert_eq!(line, "listeners mysql=tcp");
        assert_eq!(fds.len(), 1);
        drop(l);
        let got = std::net::TcpListener::from(fds.into_iter().next().expect("fd"));
        assert_eq!(got.local_addr().expect("addr"), addr);
        // Still listening after the sender's descriptor closed.
        let _c = std::net::TcpStream::connect(addr).expect("connect");
        assert!(got.accept().is_ok());
        assert_eq!(read_line(&b).expect("second"), "second");
    }

    #[test]
    fn eof_before_a_line_is_an_error() {
        let (a, b) = UnixStream::pair().expect("pair");
        let mut w = &a;
        w.write_all(b"partial").expect("write");
        drop(a);
        let e = recv_line(&b).expect_err("eof");
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
    }
}
