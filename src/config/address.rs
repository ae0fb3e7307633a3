//! The two forms of a MySQL address (`listen`, `backend.address`): a TCP
//! `host:port`, or a Unix domain socket path, written as an absolute path
//! (`/run/mysqld/mysqld.sock`) or with a `unix:` prefix
//! (`unix:/run/mysqld/mysqld.sock`). Pure parsing; binding and dialing
//! live with the listener and the backend dialer.

use std::path::Path;

/// Longest socket path the kernel takes (`sun_path` is 108 bytes with its
/// terminating NUL).
pub const MAX_SOCKET_PATH: usize = 107;

/// Where to listen or connect.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Address<'a> {
    /// `host:port` (not resolved here).
    Tcp(&'a str),
    /// A Unix domain socket file.
    Unix(&'a Path),
}

impl<'a> Address<'a> {
    /// Reads `s`: a Unix socket path (absolute, optionally `unix:`-prefixed)
    /// or anything else as `host:port`. Never fails: [`Self::problem`]
    /// says what is wrong with a value.
    pub fn parse(s: &'a str) -> Self {
        match s.strip_prefix("unix:") {
            Some(path) => Address::Unix(Path::new(path)),
            None if s.starts_with('/') => Address::Unix(Path::new(s)),
            None => Address::Tcp(s),
        }
    }

    /// The socket path, for a Unix address.
    pub fn unix_path(&self) -> Option<&'a Path> {
        match self {
            Address::Unix(p) => Some(p),
            Address::Tcp(_) => None,
        }
    }

    /// True when the address is on this host for certain: a Unix socket,
    /// `localhost` or a loopback IP (a host name, or another address of
    /// this host, is not known to be).
    pub fn is_this_host(&self) -> bool {
        match self {
            Address::Unix(_) => true,
            Address::Tcp(a) => {
                let host = match a.rsplit_once(':') {
                    Some((h, _)) => h,
                    None => a,
                };
                let host = host.trim_start_matches('[').trim_end_matches(']');
                host.eq_ignore_ascii_case("localhost")
                    || host
                        .parse::<std::net::IpAddr>()
                        .is_ok_and(|ip| ip.to_canonical().is_loopback())
            }
        }
    }

    /// Why this value cannot be used, if it cannot (`tcp_check` decides
    /// for the `host:port` form).
    pub fn problem(&self, tcp_check: impl Fn(&str) -> bool) -> Option<String> {
        match self {
            Address::Tcp(a) if tcp_check(a) => None,
            Address::Tcp(_) => Some("must be host:port or a Unix socket path".into()),
            Address::Unix(p) if !p.is_absolute() => {
                Some("a Unix socket path must be absolute".into())
            }
            Address::Unix(p) if p.as_os_str().len() > MAX_SOCKET_PATH => Some(format!(
                "a Unix socket path must be at most {MAX_SOCKET_PATH} bytes"
            )),
            Address::Unix(p) if p.file_name().is_none() => {
                Some("a Unix socket path must name a file".into())
            }
            Address::Unix(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn any(_: &str) -> bool {
        true
    }

    #[test]
    fn forms() {
        assert_eq!(
            Address::parse("127.0.0.1:3306"),
            Address::Tcp("127.0.0.1:3306")
        );
        assert_eq!(
            Address::parse("/run/mysqld/mysqld.sock"),
            Address::Unix(Path::new("/run/mysqld/mysqld.sock"))
        );
        assert_eq!(
            Address::parse("unix:/tmp/m.sock"),
            Address::Unix(Path::new("/tmp/m.sock"))
        );
    }

    #[test]
    fn this_host_is_a_socket_localhost_or_loopback() {
        for a in [
            "/run/mysqld/mysqld.sock",
            "unix:/tmp/m.sock",
            "127.0.0.1:3306",
            "127.0.1.1:3306",
            "localhost:3306",
            "LocalHost:3306",
            "[::1]:3306",
            "[::ffff:127.0.0.1]:3306",
        ] {
            assert!(Address::parse(a).is_this_host(), "{a}");
        }
        for a in ["10.0.0.5:3306", "db.internal:3306", "[2001:db8::1]:3306"] {
            assert!(!Address::parse(a).is_this_host(), "{a}");
        }
    }

    #[test]
    fn bad_paths_are_named() {
        assert!(Address::parse("unix:rel.sock").problem(any).is_some());
        assert!(Address::parse("/").problem(any).is_some());
        let long = format!("/{}", "a".repeat(MAX_SOCKET_PATH));
        assert!(Address::parse(&long).problem(any).is_some());
        assert!(Address::parse("/tmp/x.sock").problem(any).is_none());
        assert!(Address::parse("nope").problem(|_| false).is_some());
    }
}
