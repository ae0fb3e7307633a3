//! The client listener: TCP (`ip:port`) or a Unix socket file. Owns the
//! socket file's life: a stale file left by a dead process is replaced, a
//! live one (another process accepts on it) is refused, the configured mode
//! and owner are applied before the socket accepts anyone, and the file is
//! removed when the listener is dropped (clean shutdown) if it is still
//! ours (or kept: handed over to a successor, see `crate::takeover`). Also
//! lends its descriptor for a hand-over, adopts an inherited one, and moves
//! accepted sockets between runtimes (per-group workers).
//! Knows nothing of the MySQL protocol.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::net::{TcpListener, UnixListener, UnixSocket};
use tracing::{info, warn};

use crate::config::{Address, Config, socket_mode};
use crate::wire::{Peer, Socket};

/// Where clients connect.
#[derive(Debug)]
pub enum Listener {
    /// `ip:port`.
    Tcp(TcpListener),
    /// A Unix socket file, removed when this is dropped.
    Unix(UnixListener, SocketFile),
}

impl From<TcpListener> for Listener {
    fn from(l: TcpListener) -> Self {
        Listener::Tcp(l)
    }
}

/// Mode and owner of a listening socket file (`None`: as created).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FileSettings {
    /// Permission bits.
    pub mode: Option<u32>,
    /// Owner uid.
    pub uid: Option<u32>,
    /// Group gid.
    pub gid: Option<u32>,
}

impl FileSettings {
    /// The `listen_socket_*` keys, with user and group names resolved.
    pub fn from_config(cfg: &Config) -> io::Result<Self> {
        let invalid = |m: String| io::Error::new(io::ErrorKind::InvalidInput, m);
        let mode = match cfg.listen_socket_mode.as_str() {
            "" => None,
            m => Some(socket_mode(m).ok_or_else(|| {
                invalid(format!("listen_socket_mode {m:?} is not an octal mode"))
            })?),
        };
        let uid = id_of(&cfg.listen_socket_owner, "/etc/passwd")
            .map_err(|e| invalid(format!("listen_socket_owner: {e}")))?;
        let gid = id_of(&cfg.listen_socket_group, "/etc/group")
            .map_err(|e| invalid(format!("listen_socket_group: {e}")))?;
        Ok(Self { mode, uid, gid })
    }
}

/// A numeric id, or a name looked up in `db` (`/etc/passwd` or
/// `/etc/group`: `name:x:id:…`). Empty: `None`.
fn id_of(v: &str, db: &str) -> Result<Option<u32>, String> {
    if v.is_empty() {
        return Ok(None);
    }
    if let Ok(id) = v.parse::<u32>() {
        return Ok(Some(id));
    }
    let text = std::fs::read_to_string(db).map_err(|e| format!("reading {db}: {e}"))?;
    text.lines()
        .filter_map(|l| {
            let mut f = l.split(':');
            let name = f.next()?;
            let id = f.nth(1)?.parse::<u32>().ok()?;
            (name == v).then_some(id)
        })
        .next()
        .map(Some)
        .ok_or_else(|| format!("{v:?} is not in {db} (a numeric id works too)"))
}

/// The socket file of a Unix listener: removed on drop while it is still
/// the file this process bound (not one a later process put there), unless
/// it was handed over ([`KeepFile`]).
#[derive(Debug)]
pub struct SocketFile {
    path: PathBuf,
    /// (device, inode) right after bind.
    id: Option<(u64, u64)>,
    /// Set once the socket lives on in another process.
    keep: Arc<AtomicBool>,
}

/// Tells a [`SocketFile`] to leave its file in place when dropped: the
/// listening socket was handed to a successor process that accepts on it.
#[derive(Debug, Clone)]
pub struct KeepFile(Arc<AtomicBool>);

impl KeepFile {
    /// From now on the file is not removed.
    pub fn keep(&self) {
        self.0.store(true, Ordering::Release);
    }

    /// The file is this process's again: removed on drop.
    pub fn release(&self) {
        self.0.store(false, Ordering::Release);
    }
}

impl SocketFile {
    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file at `path` as it is now, of a listener inherited from a
    /// predecessor: kept (not removed) until [`KeepFile::release`] says
    /// this process owns it — a successor that fails before taking over
    /// must not remove the running process's file.
    pub fn adopt(path: &Path) -> Self {
        let id = std::fs::symlink_metadata(path)
            .ok()
            .map(|m| (m.dev(), m.ino()));
        Self {
            path: path.to_path_buf(),
            id,
            keep: Arc::new(AtomicBool::new(true)),
        }
    }

    /// A handle that keeps the file when this is dropped.
    pub fn keeper(&self) -> KeepFile {
        KeepFile(self.keep.clone())
    }
}

impl Drop for SocketFile {
    fn drop(&mut self) {
        if self.keep.load(Ordering::Acquire) {
            return;
        }
        let ours = std::fs::symlink_metadata(&self.path)
            .ok()
            .is_some_and(|m| Some((m.dev(), m.ino())) == self.id);
        if ours && std::fs::remove_file(&self.path).is_ok() {
            info!(path = %self.path.display(), "socket file removed");
        }
    }
}

impl Listener {
    /// Binds `cfg.listen` with `cfg.listen_backlog` and, for a socket, the
    /// `listen_socket_*` settings.
    pub fn bind(cfg: &Config) -> io::Result<Self> {
        match Address::parse(&cfg.listen) {
            Address::Tcp(a) => crate::server::bind(a, cfg.listen_backlog).map(Listener::Tcp),
            Address::Unix(path) => {
                bind_unix(path, cfg.listen_backlog, FileSettings::from_config(cfg)?)
            }
        }
    }

    /// Accepts the next client.
    pub async fn accept(&self) -> io::Result<(Socket, Peer)> {
        match self {
            Listener::Tcp(l) => {
                let (s, a) = l.accept().await?;
                Ok((Socket::Tcp(s), Peer::Tcp(a)))
            }
            Listener::Unix(l, _) => {
                let (s, _) = l.accept().await?;
                Ok((Socket::Unix(s), Peer::Unix))
            }
        }
    }

    /// The TCP address bound (`None` for a socket).
    pub fn local_addr(&self) -> Option<std::net::SocketAddr> {
        match self {
            Listener::Tcp(l) => l.local_addr().ok(),
            Listener::Unix(..) => None,
        }
    }

    /// A second descriptor of the listening socket (to hand to a
    /// successor: the socket stays open while either process holds it).
    pub fn dup_fd(&self) -> io::Result<OwnedFd> {
        match self {
            Listener::Tcp(l) => l.as_fd().try_clone_to_owned(),
            Listener::Unix(l, _) => l.as_fd().try_clone_to_owned(),
        }
    }

    /// Sets the accept queue length of a listening socket (an inherited one
    /// keeps its predecessor's until then; Linux applies a repeated
    /// `listen` to the live queue, connections in it stay).
    pub fn set_backlog(&self, backlog: u32) -> io::Result<()> {
        let backlog = i32::try_from(backlog).unwrap_or(i32::MAX);
        match self {
            Listener::Tcp(l) => rustix::net::listen(l, backlog)?,
            Listener::Unix(l, _) => rustix::net::listen(l, backlog)?,
        }
        Ok(())
    }

    /// `tcp` or `unix`.
    pub fn kind(&self) -> &'static str {
        match self {
            Listener::Tcp(_) => "tcp",
            Listener::Unix(..) => "unix",
        }
    }

    /// For a socket file: the handle that keeps it when this is dropped.
    pub fn keeper(&self) -> Option<KeepFile> {
        match self {
            Listener::Tcp(_) => None,
            Listener::Unix(_, f) => Some(f.keeper()),
        }
    }

    /// An inherited listening TCP socket, if it is bound to `addr`
    /// (registered on the current runtime).
    pub fn adopt_tcp(fd: OwnedFd, addr: &str) -> io::Result<Option<Self>> {
        let l = std::net::TcpListener::from(fd);
        let want: std::net::SocketAddr = addr
            .parse()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{addr}: {e}")))?;
        if l.local_addr()? != want {
            return Ok(None);
        }
        l.set_nonblocking(true)?;
        Ok(Some(Listener::Tcp(TcpListener::from_std(l)?)))
    }

    /// An inherited listening Unix socket, if it is bound to `path`
    /// (registered on the current runtime; its file is kept until the
    /// keeper is released, see [`SocketFile::adopt`]).
    pub fn adopt_unix(fd: OwnedFd, path: &Path) -> io::Result<Option<Self>> {
        let l = std::os::unix::net::UnixListener::from(fd);
        if l.local_addr()?.as_pathname() != Some(path) {
            return Ok(None);
        }
        l.set_nonblocking(true)?;
        Ok(Some(Listener::Unix(
            UnixListener::from_std(l)?,
            SocketFile::adopt(path),
        )))
    }
}

/// Binds a Unix socket at `path`: replaces a stale file, refuses a live
/// one or a file that is not a socket, applies `file` before listening
/// (nobody can connect with the wrong permissions in between).
pub fn bind_unix(path: &Path, backlog: u32, file: FileSettings) -> io::Result<Listener> {
    clear_stale(path)?;
    let socket = UnixSocket::new_stream()?;
    socket
        .bind(path)
        .map_err(|e| io::Error::new(e.kind(), format!("binding {}: {e}", path.display())))?;
    let mut guard = SocketFile {
        path: path.to_path_buf(),
        id: None,
        keep: Default::default(),
    };
    let meta = std::fs::symlink_metadata(path)?;
    guard.id = Some((meta.dev(), meta.ino()));
    if let Some(mode) = file.mode {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("listen_socket_mode on {}: {e}", path.display()),
            )
        })?;
    }
    if file.uid.is_some() || file.gid.is_some() {
        std::os::unix::fs::lchown(path, file.uid, file.gid).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "listen_socket_owner / listen_socket_group on {}: {e}",
                    path.display()
                ),
            )
        })?;
    }
    let listener = socket.listen(backlog)?;
    Ok(Listener::Unix(listener, guard))
}

/// Removes a socket file no process listens on; refuses a live socket and
/// anything that is not a socket.
fn clear_stale(path: &Path) -> io::Result<()> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(io::Error::new(e.kind(), format!("{}: {e}", path.display()))),
    };
    if !meta.file_type().is_socket() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!(
                "{} exists and is not a socket; not replacing it",
                path.display()
            ),
        ));
    }
    match std::os::unix::net::UnixStream::connect(path) {
        Ok(_) => Err(io::Error::new(
            io::ErrorKind::AddrInUse,
            format!(
                "another process is listening on {}; not replacing its socket",
                path.display()
            ),
        )),
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
            warn!(path = %path.display(), "replacing a stale socket file (no process listens on it)");
            std::fs::remove_file(path)
        }
        Err(e) => Err(io::Error::new(
            e.kind(),
            format!("checking the existing socket {}: {e}", path.display()),
        )),
    }
}

/// An accepted socket detached from its runtime, to be registered on
/// another one (a thread group's worker).
#[derive(Debug)]
pub enum Detached {
    /// TCP.
    Tcp(std::net::TcpStream),
    /// Unix socket.
    Unix(std::os::unix::net::UnixStream),
}

impl Detached {
    /// Detaches `s` from the current runtime.
    pub fn from_socket(s: Socket) -> io::Result<Self> {
        Ok(match s {
            Socket::Tcp(s) => Detached::Tcp(s.into_std()?),
            Socket::Unix(s) => Detached::Unix(s.into_std()?),
        })
    }

    /// Registers the socket on the current runtime.
    pub fn attach(self) -> io::Result<Socket> {
        Ok(match self {
            Detached::Tcp(s) => Socket::Tcp(tokio::net::TcpStream::from_std(s)?),
            Detached::Unix(s) => Socket::Unix(tokio::net::UnixStream::from_std(s)?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_by_number_or_name() {
        assert_eq!(id_of("", "/etc/passwd"), Ok(None));
        assert_eq!(id_of("1234", "/etc/passwd"), Ok(Some(1234)));
        assert_eq!(id_of("root", "/etc/passwd"), Ok(Some(0)));
        assert_eq!(id_of("root", "/etc/group"), Ok(Some(0)));
        assert!(id_of("no-such-user-here", "/etc/passwd").is_err());
    }
}
