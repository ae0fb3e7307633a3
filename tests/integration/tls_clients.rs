//! TLS clients at the edges, with a raw TLS client: one that stops reading
//! (issue 16, item 11: the TLS layer's flush must honour
//! `frontend.client_write_timeout_ms` like a plain socket's write does, so
//! the session ends and its backend is freed), and one whose TLS hello
//! arrives together with its SSLRequest (the upgrade must not read the
//! hello as MySQL bytes and answer in plaintext).

use crate::common;

use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::Duration;

use common::mariadb::{APP_PASSWORD, APP_USER};
use common::tls::self_signed;
use common::{MariaDb, Proxy};
use mysql_async::prelude::*;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

const CLIENT_LONG_PASSWORD: u32 = 1;
const CLIENT_CONNECT_WITH_DB: u32 = 8;
const CLIENT_PROTOCOL_41: u32 = 0x200;
const CLIENT_SSL: u32 = 0x800;
const CLIENT_SECURE_CONNECTION: u32 = 0x8000;
const CLIENT_PLUGIN_AUTH: u32 = 0x8_0000;

async fn read_packet<S: AsyncRead + Unpin>(s: &mut S) -> (u8, Vec<u8>) {
    let mut h = [0u8; 4];
    s.read_exact(&mut h).await.expect("packet header");
    let len = h[0] as usize | (h[1] as usize) << 8 | (h[2] as usize) << 16;
    let mut p = vec![0u8; len];
    s.read_exact(&mut p).await.expect("packet body");
    (h[3], p)
}

async fn write_packet<S: AsyncWrite + Unpin>(s: &mut S, seq: u8, payload: &[u8]) {
    let n = payload.len();
    let mut b = vec![n as u8, (n >> 8) as u8, (n >> 16) as u8, seq];
    b.extend_from_slice(payload);
    s.write_all(&b).await.expect("write packet");
    s.flush().await.expect("flush");
}

/// The 32-byte head of a handshake response (also the whole SSLRequest).
fn head(caps: u32) -> Vec<u8> {
    let mut p = Vec::with_capacity(32);
    p.extend_from_slice(&caps.to_le_bytes());
    p.extend_from_slice(&(16u32 << 20).to_le_bytes());
    p.push(45);
    p.extend_from_slice(&[0u8; 23]);
    p
}

/// A TCP stream whose pending bytes (the SSLRequest) go out in one write
/// with the next write (the TLS hello): both arrive together.
struct Coalesce {
    tcp: TcpStream,
    pending: Vec<u8>,
}

impl AsyncRead for Coalesce {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.tcp).poll_read(cx, buf)
    }
}

impl AsyncWrite for Coalesce {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        if this.pending.is_empty() {
            return Pin::new(&mut this.tcp).poll_write(cx, buf);
        }
        this.pending.extend_from_slice(buf);
        while !this.pending.is_empty() {
            match Pin::new(&mut this.tcp).poll_write(cx, &this.pending) {
                Poll::Ready(Ok(n)) => drop(this.pending.drain(..n)),
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                // The rest goes out at the next flush.
                Poll::Pending => break,
            }
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        while !this.pending.is_empty() {
            match Pin::new(&mut this.tcp).poll_write(cx, &this.pending) {
                Poll::Ready(Ok(n)) => drop(this.pending.drain(..n)),
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        Pin::new(&mut this.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}

/// Logs in over TLS (any certificate accepted) with mysql_native_password;
/// with `together`, the SSLRequest and the TLS hello go out in one write.
async fn tls_login(
    addr: std::net::SocketAddr,
    together: bool,
) -> tokio_rustls::client::TlsStream<Coalesce> {
    let mut tcp = TcpStream::connect(addr).await.expect("connect");
    let (_, greeting) = read_packet(&mut tcp).await;
    let g = myplex::protocol::greeting::Greeting::parse(&greeting).expect("greeting");
    assert!(g.capabilities & u64::from(CLIENT_SSL) != 0, "TLS offered");
    let caps = CLIENT_LONG_PASSWORD
        | CLIENT_CONNECT_WITH_DB
        | CLIENT_PROTOCOL_41
        | CLIENT_SSL
        | CLIENT_SECURE_CONNECTION
        | CLIENT_PLUGIN_AUTH;
    let mut ssl_request = vec![32, 0, 0, 1];
    ssl_request.extend_from_slice(&head(caps));
    if !together {
        tcp.write_all(&ssl_request).await.expect("SSLRequest");
        ssl_request.clear();
    }
    let tcp = Coalesce {
        tcp,
        pending: ssl_request,
    };
    let config = myplex::backend::tls::client_config("").expect("tls config");
    let name = rustls::pki_types::ServerName::try_from("localhost").expect("name");
    let mut tls = tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .expect("TLS handshake");
    let auth = mysql_common::scramble::scramble_native(&g.scramble, APP_PASSWORD.as_bytes())
        .expect("scramble");
    let mut p = head(caps);
    p.extend_from_slice(APP_USER.as_bytes());
    p.push(0);
    p.push(auth.len() as u8);
    p.extend_from_slice(&auth);
    p.extend_from_slice(b"test\0mysql_native_password\0");
    write_packet(&mut tls, 2, &p).await;
    let (_, ok) = read_packet(&mut tls).await;
    assert_eq!(<[u8]>::first(&ok), Some(&0x00), "login OK: {ok:02x?}");
    tls
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_client_that_stops_reading_is_cut_off_and_frees_its_backend() {
    let db = MariaDb::shared();
    let dir = std::env::temp_dir().join(format!("mpx-tls-wt-{}", std::process::id()));
    let (cert, key) = self_signed(&dir);
    // One backend: the stuck client's is the only one another client can get.
    let p = Proxy::builder(db)
        .max_backend(1)
        .oversubscribe(0)
        .queue_timeout_ms(20_000)
        .with(|c| {
            c.pool.thread_groups = 1;
            c.frontend.client_write_timeout_ms = 500;
            c.frontend.tls_cert = cert.clone();
            c.frontend.tls_key = key.clone();
        })
        .start()
        .await;
    let mut stuck = tls_login(p.addr, false).await;
    // Pipelined statements whose results each fit in the TLS layer's
    // buffer: once the socket is full, each write is taken by the TLS
    // layer and the wait happens in its flush (a single large result would
    // block in a write instead, which the timeout already covered).
    let mut q = vec![0x03];
    q.extend_from_slice(b"SELECT REPEAT('x', 30000)");
    let n = q.len();
    let mut batch = Vec::new();
    for _ in 0..2000 {
        batch.extend_from_slice(&[n as u8, (n >> 8) as u8, (n >> 16) as u8, 0]);
        batch.extend_from_slice(&q);
    }
    stuck.write_all(&batch).await.expect("pipelined statements");
    stuck.flush().await.expect("flush");
    // The client never reads: its session must end within the write
    // timeout (bounded wait: 20 s), and its backend serve another client.
    let mut ended = false;
    for _ in 0..200 {
        if p.shared.clients.load(Ordering::Relaxed) == 0 {
            ended = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(ended, "the stuck TLS session ended");
    let mut other = mysql_async::Conn::from_url(p.app_url())
        .await
        .expect("connect");
    let v: Option<u32> = other
        .query_first("SELECT 7")
        .await
        .expect("served: the stuck TLS client's backend was freed");
    assert_eq!(v, Some(7));
    let (_, metrics) = p.http_get("/metrics").await;
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("myplex_client_write_timeouts_total") && l.ends_with(" 1")),
        "{metrics}"
    );
    drop(stuck);
    other.disconnect().await.expect("disconnect");
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_hello_sent_with_the_ssl_request_upgrades() {
    let db = MariaDb::shared();
    let dir = std::env::temp_dir().join(format!("mpx-tls-hello-{}", std::process::id()));
    let (cert, key) = self_signed(&dir);
    let p = Proxy::builder(db)
        .with(|c| {
            c.frontend.tls_cert = cert.clone();
            c.frontend.tls_key = key.clone();
        })
        .start()
        .await;
    for _ in 0..3 {
        let mut c = tls_login(p.addr, true).await;
        let mut q = vec![0x03];
        q.extend_from_slice(b"SELECT 1");
        write_packet(&mut c, 0, &q).await;
        let (_, columns) = read_packet(&mut c).await;
        assert_eq!(columns, [1], "one column");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
