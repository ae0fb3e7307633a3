//! Which `'user'@'host'` row of an account applies to a client address, the
//! way the server picks it: the most specific host first (no wildcard
//! before wildcards, then the longer literal prefix), and a host pattern
//! matched as the server matches it against the client's IP address.
//!
//! Supported host forms: a literal IP, `LIKE` patterns with `%` and `_`
//! (`%`, `192.168.%`), the IPv4 netmask form `10.0.0.0/255.255.255.0`, and
//! `localhost`, which a client on a loopback address matches when the
//! server resolves names (`skip_name_resolve=OFF`), as the server then sees
//! such a client as `localhost`. Host *names* other than `localhost` are
//! not resolved: such rows never match (a documented limit). A client on
//! a Unix socket is `localhost` and has no IP, as on the server. Pure logic.

use std::net::IpAddr;

/// The client address as the server would see it.
#[derive(Debug, Clone, Copy)]
pub struct ClientHost {
    /// The client's IP (IPv4-mapped IPv6 is unwrapped); `None` for a Unix
    /// socket client, which the server knows only as `localhost`.
    pub ip: Option<IpAddr>,
    /// The server resolves names (`skip_name_resolve=OFF`), so a loopback
    /// client is `localhost`.
    pub resolves_names: bool,
}

impl ClientHost {
    /// A client at `ip`.
    pub fn new(ip: IpAddr, resolves_names: bool) -> Self {
        let ip = match ip {
            IpAddr::V6(v6) => v6
                .to_ipv4_mapped()
                .map(IpAddr::V4)
                .unwrap_or(IpAddr::V6(v6)),
            v4 => v4,
        };
        Self {
            ip: Some(ip),
            resolves_names,
        }
    }

    /// A client on the server's Unix socket: host `localhost`, no IP,
    /// whether or not the server resolves names.
    pub fn socket() -> Self {
        Self {
            ip: None,
            resolves_names: true,
        }
    }

    /// The names the server matches host patterns against.
    fn names(&self) -> Vec<String> {
        let Some(ip) = self.ip else {
            return vec!["localhost".into()];
        };
        let mut v = vec![ip.to_string()];
        if self.resolves_names && ip.is_loopback() {
            v.push("localhost".into());
        }
        v
    }
}

/// True when host pattern `pattern` admits `client`.
pub fn matches(pattern: &str, client: &ClientHost) -> bool {
    if let Some((net, mask)) = pattern.split_once('/') {
        return client.ip.is_some_and(|ip| netmask_matches(net, mask, ip));
    }
    client
        .names()
        .iter()
        .any(|name| like(pattern.as_bytes(), name.as_bytes()))
}

fn netmask_matches(net: &str, mask: &str, ip: IpAddr) -> bool {
    let (Ok(net), Ok(mask), IpAddr::V4(ip)) = (
        net.parse::<std::net::Ipv4Addr>(),
        mask.parse::<std::net::Ipv4Addr>(),
        ip,
    ) else {
        return false;
    };
    u32::from(ip) & u32::from(mask) == u32::from(net)
}

/// Case-insensitive SQL `LIKE` with `%`, `_` and `\` escapes.
fn like(pattern: &[u8], s: &[u8]) -> bool {
    match pattern.split_first() {
        None => s.is_empty(),
        Some((b'%', rest)) => (0..=s.len()).any(|i| like(rest, &s[i..])),
        Some((b'_', rest)) => !s.is_empty() && like(rest, &s[1..]),
        Some((b'\\', rest)) if !rest.is_empty() => {
            s.first().is_some_and(|c| c.eq_ignore_ascii_case(&rest[0])) && like(&rest[1..], &s[1..])
        }
        Some((c, rest)) => {
            s.first().is_some_and(|x| x.eq_ignore_ascii_case(c)) && like(rest, &s[1..])
        }
    }
}

/// Sort key: smaller is more specific (tried first). A host without
/// wildcards beats one with; among wildcard hosts the longer literal
/// prefix wins (`192.168.1.%` before `192.%` before `%`).
pub fn specificity(pattern: &str) -> (bool, std::cmp::Reverse<usize>) {
    match pattern.find(['%', '_']) {
        None => (false, std::cmp::Reverse(pattern.len())),
        Some(i) => (true, std::cmp::Reverse(i)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn local(resolve: bool) -> ClientHost {
        ClientHost::new("127.0.0.1".parse().expect("ip"), resolve)
    }

    #[test]
    fn loopback_client() {
        assert!(matches("%", &local(true)));
        assert!(matches("127.0.0.1", &local(false)));
        assert!(matches("localhost", &local(true)));
        assert!(matches("LOCALHOST", &local(true)));
        assert!(!matches("localhost", &local(false)));
        assert!(matches("127.%", &local(false)));
        assert!(!matches("10.%", &local(true)));
        assert!(matches("local%", &local(true)));
    }

    #[test]
    fn remote_client() {
        let c = ClientHost::new("10.1.2.3".parse().expect("ip"), true);
        assert!(!matches("localhost", &c));
        assert!(matches("10.1.2._", &c));
        assert!(matches("10.1.2.0/255.255.255.0", &c));
        assert!(!matches("10.1.3.0/255.255.255.0", &c));
        assert!(!matches("db.example.com", &c));
        let mapped = ClientHost::new("::ffff:10.1.2.3".parse().expect("ip"), true);
        assert!(matches("10.1.2.3", &mapped));
    }

    #[test]
    fn most_specific_first() {
        let mut hosts = vec!["%", "10.%", "localhost", "10.1.%"];
        hosts.sort_by_key(|h| specificity(h));
        assert_eq!(hosts, ["localhost", "10.1.%", "10.%", "%"]);
    }
}
