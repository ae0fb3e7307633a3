//! A socket that is either plain TCP or TLS (either side of the handshake).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// A client or backend socket.
#[derive(Debug)]
pub enum Stream {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS where we are the server (client side of the proxy).
    ServerTls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
    /// TLS where we are the client (backend side of the proxy).
    ClientTls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
    /// Placeholder while the stream is being upgraded.
    Closed,
}

impl Stream {
    /// The underlying TCP socket.
    pub fn tcp(&self) -> Option<&TcpStream> {
        match self {
            Stream::Plain(s) => Some(s),
            Stream::ServerTls(s) => Some(s.get_ref().0),
            Stream::ClientTls(s) => Some(s.get_ref().0),
            Stream::Closed => None,
        }
    }

    /// True when TLS is active.
    pub fn is_tls(&self) -> bool {
        matches!(self, Stream::ServerTls(_) | Stream::ClientTls(_))
    }
}

fn closed() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, "stream closed")
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
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
            Stream::ServerTls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
            Stream::ClientTls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
            Stream::Closed => Poll::Ready(Err(closed())),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::ServerTls(s) => Pin::new(s.as_mut()).poll_flush(cx),
            Stream::ClientTls(s) => Pin::new(s.as_mut()).poll_flush(cx),
            Stream::Closed => Poll::Ready(Err(closed())),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::ServerTls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
            Stream::ClientTls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
            Stream::Closed => Poll::Ready(Ok(())),
        }
    }
}
