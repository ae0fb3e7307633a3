//! A socket that is plain TCP, a plain Unix domain socket, or TLS over
//! either (either side of the handshake), and the peer it reaches: an IP
//! address, or a local process over a Unix socket (`localhost`, as the
//! server names socket clients). One enum, no dynamic dispatch per packet.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpStream, UnixStream};

/// A client or backend socket.
#[derive(Debug)]
pub enum Stream {
    /// Plain TCP.
    Plain(TcpStream),
    /// Plain Unix domain socket.
    Unix(UnixStream),
    /// TLS where we are the server (client side of the proxy).
    ServerTls(Box<tokio_rustls::server::TlsStream<Socket>>),
    /// TLS where we are the client (backend side of the proxy).
    ClientTls(Box<tokio_rustls::client::TlsStream<Socket>>),
    /// Placeholder while the stream is being upgraded.
    Closed,
}

/// The transport under TLS.
#[derive(Debug)]
pub enum Socket {
    /// TCP.
    Tcp(TcpStream),
    /// Unix domain socket.
    Unix(UnixStream),
}

/// Who is at the other end of a client connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    /// A TCP client.
    Tcp(SocketAddr),
    /// A local process on a Unix socket: `localhost` to the server.
    Unix,
}

impl Peer {
    /// The client's IP address; `None` for a socket client, which the
    /// server knows by the name `localhost` only.
    pub fn ip(&self) -> Option<IpAddr> {
        match self {
            Peer::Tcp(a) => Some(a.ip()),
            Peer::Unix => None,
        }
    }

    /// The address that keys per-address limits (unauthenticated
    /// connections, the login throttle): socket clients are on this host,
    /// so they share the loopback address's.
    pub fn address_key(&self) -> IpAddr {
        self.ip().unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST))
    }
}

impl std::fmt::Display for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Peer::Tcp(a) => a.fmt(f),
            Peer::Unix => f.write_str("localhost (unix socket)"),
        }
    }
}

impl Socket {
    fn tcp(&self) -> Option<&TcpStream> {
        match self {
            Socket::Tcp(s) => Some(s),
            Socket::Unix(_) => None,
        }
    }

    /// Non-blocking read of up to `buf.len()` bytes.
    fn try_read(&self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Socket::Tcp(s) => s.try_read(buf),
            Socket::Unix(s) => s.try_read(buf),
        }
    }
}

impl Stream {
    /// The underlying TCP socket (`None` on a Unix socket).
    pub fn tcp(&self) -> Option<&TcpStream> {
        match self {
            Stream::Plain(s) => Some(s),
            Stream::ServerTls(s) => s.get_ref().0.tcp(),
            Stream::ClientTls(s) => s.get_ref().0.tcp(),
            Stream::Unix(_) | Stream::Closed => None,
        }
    }

    /// Who is at the other end (`None` once closed, or when the socket
    /// cannot say).
    pub fn peer(&self) -> Option<Peer> {
        let socket = match self {
            Stream::Plain(s) => return s.peer_addr().ok().map(Peer::Tcp),
            Stream::Unix(_) => return Some(Peer::Unix),
            Stream::ServerTls(s) => s.get_ref().0,
            Stream::ClientTls(s) => s.get_ref().0,
            Stream::Closed => return None,
        };
        match socket {
            Socket::Tcp(s) => s.peer_addr().ok().map(Peer::Tcp),
            Socket::Unix(_) => Some(Peer::Unix),
        }
    }

    /// The cipher suite and protocol version of a TLS session where we
    /// are the server; `None` otherwise.
    pub fn server_tls_session(&self) -> Option<(rustls::CipherSuite, rustls::ProtocolVersion)> {
        let Stream::ServerTls(s) = self else {
            return None;
        };
        let conn = s.get_ref().1;
        Some((
            conn.negotiated_cipher_suite()?.suite(),
            conn.protocol_version()?,
        ))
    }

    /// True when TLS is active.
    pub fn is_tls(&self) -> bool {
        matches!(self, Stream::ServerTls(_) | Stream::ClientTls(_))
    }

    /// True on a Unix domain socket (plain or TLS).
    pub fn is_unix(&self) -> bool {
        match self {
            Stream::Unix(_) => true,
            Stream::ServerTls(s) => matches!(s.get_ref().0, Socket::Unix(_)),
            Stream::ClientTls(s) => matches!(s.get_ref().0, Socket::Unix(_)),
            Stream::Plain(_) | Stream::Closed => false,
        }
    }

    /// The plain transport, for a TLS upgrade (`None` when already TLS or
    /// closed).
    pub fn into_socket(self) -> Option<Socket> {
        match self {
            Stream::Plain(s) => Some(Socket::Tcp(s)),
            Stream::Unix(s) => Some(Socket::Unix(s)),
            _ => None,
        }
    }

    /// Non-blocking read from the transport itself (under any TLS layer):
    /// what an idle connection's health probe uses. `None` once closed.
    pub fn try_read_transport(&self, buf: &mut [u8]) -> Option<io::Result<usize>> {
        Some(match self {
            Stream::Plain(s) => s.try_read(buf),
            Stream::Unix(s) => s.try_read(buf),
            Stream::ServerTls(s) => s.get_ref().0.try_read(buf),
            Stream::ClientTls(s) => s.get_ref().0.try_read(buf),
            Stream::Closed => return None,
        })
    }
}

impl From<Socket> for Stream {
    fn from(s: Socket) -> Self {
        match s {
            Socket::Tcp(s) => Stream::Plain(s),
            Socket::Unix(s) => Stream::Unix(s),
        }
    }
}

fn closed() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, "stream closed")
}

impl AsyncRead for Socket {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Socket::Tcp(s) => Pin::new(s).poll_read(cx, buf),
            Socket::Unix(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Socket {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Socket::Tcp(s) => Pin::new(s).poll_write(cx, buf),
            Socket::Unix(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Socket::Tcp(s) => Pin::new(s).poll_flush(cx),
            Socket::Unix(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Socket::Tcp(s) => Pin::new(s).poll_shutdown(cx),
            Socket::Unix(s) => Pin::new(s).poll_shutdown(cx),
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Unix(s) => Pin::new(s).poll_read(cx, buf),
            Stream::ServerTls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
            Stream::ClientTls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
            Stream::Closed => Poll::Ready(Err(closed())),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Unix(s) => Pin::new(s).poll_write(cx, buf),
            Stream::ServerTls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
            Stream::ClientTls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
            Stream::Closed => Poll::Ready(Err(closed())),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Unix(s) => Pin::new(s).poll_flush(cx),
            Stream::ServerTls(s) => Pin::new(s.as_mut()).poll_flush(cx),
            Stream::ClientTls(s) => Pin::new(s.as_mut()).poll_flush(cx),
            Stream::Closed => Poll::Ready(Err(closed())),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Unix(s) => Pin::new(s).poll_shutdown(cx),
            Stream::ServerTls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
            Stream::ClientTls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
            Stream::Closed => Poll::Ready(Ok(())),
        }
    }
}
