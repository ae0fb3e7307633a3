//! A deliberately small HTTP/1.1 server for the admin endpoint: one GET per
//! connection (or `POST /reload`), no keep-alive, bounded request size and time.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::frontend::Shared;

/// Serves until the process ends.
pub async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let Ok((sock, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let _ = tokio::time::timeout(Duration::from_secs(10), handle(sock, &shared)).await;
        });
    }
}

async fn handle(mut sock: TcpStream, shared: &Shared) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = sock.read(&mut chunk).await?;
        if n == 0 || buf.len() > 8192 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let line = buf.split(|&b| b == b'\r').next().unwrap_or_default();
    let mut parts = line.split(|&b| b == b' ');
    let method = parts.next().unwrap_or_default();
    let path = parts.next().unwrap_or_default();
    let path = path.split(|&b| b == b'?').next().unwrap_or_default();
    let (code, ctype, body) = if method == b"POST" && path == b"/reload" {
        match crate::reload::reload(shared) {
            Ok(r) => (200, "text/plain", format!("{r}\n")),
            Err(e @ crate::reload::ReloadError::Refused(_)) => {
                (409, "text/plain", format!("{e}\n"))
            }
            Err(e) => (400, "text/plain", format!("{e}\n")),
        }
    } else if method != b"GET" {
        (405, "text/plain", "method not allowed\n".to_string())
    } else {
        route(path, shared).await
    };
    let reason = match code {
        200 => "OK",
        404 => "Not Found",
        405 => "Method Not Allowed",
        400 => "Bad Request",
        409 => "Conflict",
        _ => "Service Unavailable",
    };
    let head = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    sock.write_all(head.as_bytes()).await?;
    sock.write_all(body.as_bytes()).await?;
    sock.shutdown().await
}

async fn route(path: &[u8], shared: &Shared) -> (u16, &'static str, String) {
    match path {
        b"/metrics" => {
            super::refresh_gauges(shared);
            (200, "text/plain; version=0.0.4", shared.metrics.render())
        }
        b"/status" => (200, "application/json", super::status::to_json(shared)),
        b"/healthz" => (200, "text/plain", "ok\n".into()),
        b"/readyz" => {
            if shared.shutdown.is_triggered() {
                (503, "text/plain", "draining\n".into())
            } else if backend_usable(shared).await {
                (200, "text/plain", "ready\n".into())
            } else {
                (503, "text/plain", "no usable backend connection\n".into())
            }
        }
        _ => (404, "text/plain", "not found\n".into()),
    }
}

/// The backend is usable as the background health state says: answered at
/// once, never by dialing per request.
async fn backend_usable(shared: &Shared) -> bool {
    shared.pool.health.down().is_none()
}
