//! The new process's side of a hand-over: connects to the running
//! process's control socket, receives its listening descriptors, adopts
//! those bound where this process's configuration says (others are closed
//! and bound afresh by the caller), and commits once it is ready to accept.

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::Path;

use tracing::{info, warn};

use super::{COMMIT_TIMEOUT, HELLO, ID_MARGIN, LINE_TIMEOUT, TakeoverError, fds};
use crate::config::Address;
use crate::listener::{KeepFile, Listener};

/// Descriptors received from the running process, not yet committed.
#[derive(Debug)]
pub struct Inheritance {
    stream: UnixStream,
    /// name → (kind, descriptor).
    fds: HashMap<String, (String, OwnedFd)>,
    /// Names of the listeners adopted (told to the old process at the
    /// commit: it keeps those socket files, removes the others).
    adopted: Vec<String>,
    /// Socket files of adopted listeners, kept until the commit.
    files: Vec<KeepFile>,
}

/// What the old process said when it stopped accepting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Committed {
    /// The old process, now draining.
    pub pid: Option<u32>,
    /// Where this process's connection ids start.
    pub next_id: Option<u32>,
}

/// Connects to `path` and receives the running process's listeners.
pub fn connect(path: &Path) -> Result<Inheritance, TakeoverError> {
    let stream = UnixStream::connect(path).map_err(|source| TakeoverError::Connect {
        path: path.display().to_string(),
        source,
    })?;
    stream.set_read_timeout(Some(LINE_TIMEOUT))?;
    stream.set_write_timeout(Some(LINE_TIMEOUT))?;
    fds::send_line(&stream, HELLO)?;
    let (line, received) = fds::recv_line(&stream)?;
    if let Some(reason) = line.strip_prefix("refused ") {
        return Err(TakeoverError::Refused(reason.to_string()));
    }
    let fds = parse_listeners(&line, received)?;
    info!(listeners = %line, "takeover: received the running process's listeners");
    Ok(Inheritance {
        stream,
        fds,
        adopted: Vec::new(),
        files: Vec::new(),
    })
}

/// `listeners name=kind …` with one descriptor per name, in order.
fn parse_listeners(
    line: &str,
    received: Vec<OwnedFd>,
) -> Result<HashMap<String, (String, OwnedFd)>, TakeoverError> {
    let rest = line
        .strip_prefix("listeners")
        .ok_or_else(|| TakeoverError::Protocol(format!("expected listeners, got {line:?}")))?;
    let names: Vec<(&str, &str)> = rest
        .split_whitespace()
        .map(|t| t.split_once('=').unwrap_or((t, "")))
        .collect();
    if names.len() != received.len() {
        return Err(TakeoverError::Protocol(format!(
            "{} listeners named, {} descriptors received",
            names.len(),
            received.len()
        )));
    }
    Ok(names
        .into_iter()
        .zip(received)
        .map(|((n, k), fd)| (n.to_string(), (k.to_string(), fd)))
        .collect())
}

impl Inheritance {
    /// The inherited listener `name`, if it is of the kind and bound at the
    /// address `address` names (a listener of the same address string
    /// elsewhere, or a changed address, is closed: the caller binds anew).
    pub fn listener(&mut self, name: &str, address: &str) -> std::io::Result<Option<Listener>> {
        let Some((kind, fd)) = self.fds.remove(name) else {
            return Ok(None);
        };
        let adopted = match (kind.as_str(), Address::parse(address)) {
            ("tcp", Address::Tcp(a)) => Listener::adopt_tcp(fd, a)?,
            ("unix", Address::Unix(p)) => Listener::adopt_unix(fd, p)?,
            _ => None,
        };
        if let Some(l) = &adopted {
            self.adopted.push(name.to_string());
            self.files.extend(l.keeper());
        }
        match &adopted {
            Some(_) => info!(listener = name, address, "takeover: adopted listener"),
            None => warn!(
                listener = name,
                address,
                "takeover: configured address differs from the running process's; binding it anew"
            ),
        }
        Ok(adopted)
    }

    /// Tells the old process to stop accepting and drain. A refusal is an
    /// error; a lost answer is not (the old process may have stopped:
    /// this one must serve). With an answer comes the control connection,
    /// over which the old process's idle sessions follow
    /// ([`super::moves::receive`]).
    pub fn commit(self) -> Result<(Committed, Option<UnixStream>), TakeoverError> {
        self.stream.set_read_timeout(Some(COMMIT_TIMEOUT))?;
        fds::send_line(&self.stream, &format!("commit {}", self.adopted.join(" ")))?;
        let line = match fds::read_line(&self.stream) {
            Ok(l) => l,
            Err(e) => {
                warn!(error = %e, "takeover: no answer to commit; serving anyway");
                self.release_files();
                return Ok((
                    Committed {
                        pid: None,
                        next_id: None,
                    },
                    None,
                ));
            }
        };
        if let Some(reason) = line.strip_prefix("refused ") {
            return Err(TakeoverError::Refused(reason.to_string()));
        }
        let committed = parse_draining(&line)
            .ok_or_else(|| TakeoverError::Protocol(format!("expected draining, got {line:?}")))?;
        self.release_files();
        Ok((committed, Some(self.stream)))
    }
}

impl Inheritance {
    /// The adopted socket files are this process's from now on.
    fn release_files(&self) {
        for f in &self.files {
            f.release();
        }
    }
}

/// `draining <pid> next-id=<n>`.
fn parse_draining(line: &str) -> Option<Committed> {
    let mut words = line.strip_prefix("draining ")?.split_whitespace();
    let pid = words.next()?.parse().ok();
    let next_id = words
        .find_map(|w| w.strip_prefix("next-id="))
        .and_then(|n| n.parse::<u32>().ok())
        .map(|n| n.wrapping_add(ID_MARGIN).max(1));
    Some(Committed { pid, next_id })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draining_line() {
        assert_eq!(
            parse_draining("draining 42 next-id=7"),
            Some(Committed {
                pid: Some(42),
                next_id: Some(7 + ID_MARGIN)
            })
        );
        assert_eq!(parse_draining("refused x"), None);
    }

    #[test]
    fn listeners_must_match_descriptors() {
        assert!(parse_listeners("listeners mysql=tcp", Vec::new()).is_err());
        assert!(parse_listeners("hello", Vec::new()).is_err());
        assert!(parse_listeners("listeners", Vec::new()).is_ok_and(|m| m.is_empty()));
    }
}
