//! A deliberately small HTTP/1.1 server for the admin endpoint: one GET per
//! connection (or `POST /reload`), no keep-alive, bounded request size and time.
//!
//! Owns the endpoint's access rule: with `admin_token_file` set, `/status`,
//! `POST /reload` and (unless `admin_metrics_public`) `/metrics` need
//! `Authorization: Bearer <token>` (compared in constant time; 401
//! otherwise, 503 when the token file cannot be read: fail closed);
//! `/healthz` and `/readyz` stay open for probes. Without a token file the
//! endpoint is open, which the configuration allows on loopback only.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::frontend::Shared;
use crate::shutdown::Shutdown;

/// Serves until the process ends.
pub async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    // Never triggered: serves until the process ends.
    let (_never, stop) = crate::shutdown::channel();
    serve_until(listener, shared, stop).await
}

/// Like [`serve`], but stops accepting (and closes this process's
/// descriptor of the listener) once `stop` fires: after a hand-over the
/// successor answers on the same socket.
pub async fn serve_until(listener: TcpListener, shared: Arc<Shared>, mut stop: Shutdown) {
    loop {
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = stop.wait() => return,
        };
        let Ok((sock, _)) = accepted else {
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
    let target = parts.next().unwrap_or_default();
    let mut target = target.splitn(2, |&b| b == b'?');
    let path = target.next().unwrap_or_default();
    let query = target.next().unwrap_or_default();
    let (code, ctype, body) = if let Some(refused) = check_access(path, &buf, shared) {
        refused
    } else if method == b"POST" && path == b"/reload" {
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
        route(path, query, shared).await
    };
    let reason = match code {
        200 => "OK",
        401 => "Unauthorized",
        404 => "Not Found",
        405 => "Method Not Allowed",
        400 => "Bad Request",
        409 => "Conflict",
        _ => "Service Unavailable",
    };
    let challenge = if code == 401 {
        "WWW-Authenticate: Bearer realm=\"myplex\"\r\n"
    } else {
        ""
    };
    let head = format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: {ctype}\r\n{challenge}Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    sock.write_all(head.as_bytes()).await?;
    sock.write_all(body.as_bytes()).await?;
    sock.shutdown().await
}

async fn route(path: &[u8], query: &[u8], shared: &Shared) -> (u16, &'static str, String) {
    match path {
        b"/metrics" => {
            super::refresh_gauges(shared);
            (200, "text/plain; version=0.0.4", shared.metrics.render())
        }
        b"/status" => (200, "application/json", super::status::to_json(shared)),
        b"/digests" => match super::digests::to_json(shared, query) {
            Ok(json) => (200, "application/json", json),
            Err(why) => (400, "text/plain", format!("{why}\n")),
        },
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

/// Paths answered without a token (probes).
const OPEN_PATHS: &[&[u8]] = &[b"/healthz", b"/readyz"];

/// The refusal for a request that may not see `path`, or `None` when it
/// may (see the module doc).
fn check_access(
    path: &[u8],
    request: &[u8],
    shared: &Shared,
) -> Option<(u16, &'static str, String)> {
    let cfg = shared.config.load();
    if cfg.admin_token_file.trim().is_empty()
        || OPEN_PATHS.contains(&path)
        || (path == b"/metrics" && cfg.admin_metrics_public)
    {
        return None;
    }
    let token = match read_token(&cfg.admin_token_file) {
        Ok(t) => t,
        Err(e) => {
            tracing::warn!(file = %cfg.admin_token_file, error = %e, "admin token unreadable");
            return Some((503, "text/plain", "admin token unavailable\n".into()));
        }
    };
    match bearer(request) {
        Some(given) if token_matches(given, token.as_bytes()) => None,
        _ => Some((401, "text/plain", "unauthorized\n".into())),
    }
}

/// Why the admin token cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The file cannot be read.
    #[error("cannot read {0}: {1}")]
    Read(String, std::io::Error),
    /// The file holds no token.
    #[error("{0} holds no token")]
    Empty(String),
    /// The file still holds the placeholder the shipped manifests carry.
    #[error(
        "{0} holds the shipped placeholder, not a token: write a secret one (openssl rand -hex 32 > {0})"
    )]
    Placeholder(String),
}

/// How the shipped manifests' placeholder tokens begin
/// (deploy/docker/admin_token, deploy/kubernetes/secret.yaml): a proxy
/// started with one would let anyone who read the repository in.
const PLACEHOLDER: &str = "replace-me";

/// The token in `path` (surrounding whitespace, a trailing newline
/// included, is not part of it).
pub fn read_token(path: &str) -> Result<String, TokenError> {
    let text = std::fs::read_to_string(path).map_err(|e| TokenError::Read(path.into(), e))?;
    let t = text.trim();
    if t.is_empty() {
        return Err(TokenError::Empty(path.into()));
    }
    if t.starts_with(PLACEHOLDER) {
        return Err(TokenError::Placeholder(path.into()));
    }
    Ok(t.to_string())
}

/// Checks at start that a configured token file is usable, so a typo is
/// found then rather than at the first 503.
pub fn check_token_file(cfg: &crate::config::Config) -> Result<(), TokenError> {
    if cfg.admin_token_file.trim().is_empty() {
        return Ok(());
    }
    read_token(&cfg.admin_token_file).map(|_| ())
}

/// The credentials of an `Authorization: Bearer …` header of `request`.
fn bearer(request: &[u8]) -> Option<&[u8]> {
    request.split(|&b| b == b'\n').skip(1).find_map(|line| {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let colon = line.iter().position(|&b| b == b':')?;
        let (name, value) = line.split_at(colon);
        if !name.eq_ignore_ascii_case(b"authorization") {
            return None;
        }
        let value = value[1..].trim_ascii();
        let scheme = value.get(..7)?;
        scheme
            .eq_ignore_ascii_case(b"bearer ")
            .then(|| value[7..].trim_ascii())
    })
}

/// Constant-time comparison: both sides are hashed first, so neither the
/// content nor the length of the token leaks through timing.
fn token_matches(given: &[u8], token: &[u8]) -> bool {
    use sha2::{Digest, Sha256};
    let a: [u8; 32] = Sha256::digest(given).into();
    let b: [u8; 32] = Sha256::digest(token).into();
    a.iter().zip(&b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_header_is_found_case_insensitively() {
        let r = b"GET /status HTTP/1.1\r\nHost: x\r\nauthorization: bearer  s3cret \r\n\r\n";
        assert_eq!(bearer(r), Some(&b"s3cret"[..]));
        assert_eq!(
            bearer(b"GET / HTTP/1.1\r\nAuthorization: Basic eA==\r\n\r\n"),
            None
        );
        assert_eq!(bearer(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"), None);
        assert_eq!(bearer(b"GET / HTTP/1.1\r\nAuthorization:\r\n\r\n"), None);
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(token_matches(b"abc", b"abc"));
        assert!(!token_matches(b"ab", b"abc"));
        assert!(!token_matches(b"abd", b"abc"));
        assert!(!token_matches(b"", b"abc"));
    }
}
