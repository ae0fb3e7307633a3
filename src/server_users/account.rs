//! One server account row (`'user'@'host'`) as myplex can use it: the
//! `mysql_native_password` hash, or why the account cannot log in through
//! the proxy, and the server's lock and expiry flags. Parses a
//! `mysql.global_priv` JSON value (MariaDB 10.4+) or a `mysql.user` row.
//! Pure logic.

use crate::frontend::auth::parse_sha1_hash;

/// How the account authenticates, as far as myplex is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccountAuth {
    /// `mysql_native_password` with stored SHA1(SHA1(password)).
    Native([u8; 20]),
    /// `mysql_native_password` without a password.
    NoPassword,
    /// Anything myplex cannot verify and replay without the cleartext
    /// (another plugin, an unusable hash); carries the plugin name.
    Unsupported(String),
}

/// One `'user'@'host'` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    /// Host pattern.
    pub host: String,
    /// The anonymous account (`''@host`), which matches any name.
    pub anonymous: bool,
    /// Authentication.
    pub auth: AccountAuth,
    /// `ACCOUNT LOCK`.
    pub locked: bool,
    /// The password has expired (`PASSWORD EXPIRE`, or older than its
    /// lifetime).
    pub expired: bool,
}

/// Server facts read with the rows, needed to judge expiry.
#[derive(Debug, Clone, Copy, Default)]
pub struct ServerClock {
    /// `UNIX_TIMESTAMP()` on the server.
    pub now: i64,
    /// `@@global.default_password_lifetime` (days; 0 = never).
    pub default_lifetime_days: i64,
}

const NATIVE: &str = "mysql_native_password";

fn native_auth(plugin: &str, auth_string: &str) -> AccountAuth {
    if !(plugin.is_empty() || plugin == NATIVE) {
        return AccountAuth::Unsupported(plugin.to_string());
    }
    if auth_string.is_empty() {
        return AccountAuth::NoPassword;
    }
    match parse_sha1_hash(auth_string) {
        Some(h) => AccountAuth::Native(h),
        None => AccountAuth::Unsupported(NATIVE.into()),
    }
}

/// Parses one `mysql.global_priv` row. Roles and unparsable values give
/// `None` (no account).
pub fn from_global_priv(host: &str, priv_json: &str, clock: ServerClock) -> Option<Account> {
    let v: serde_json::Value = serde_json::from_str(priv_json).ok()?;
    if v.get("is_role").and_then(|r| r.as_bool()) == Some(true) {
        return None;
    }
    let s = |v: &serde_json::Value, k: &str| {
        v.get(k)
            .and_then(|x| x.as_str())
            .unwrap_or_default()
            .to_string()
    };
    let top_plugin = s(&v, "plugin");
    let top_auth = s(&v, "authentication_string");
    // `IDENTIFIED VIA a OR b`: the server tries the methods in order; the
    // first is the one a client's first response answers. `{}` stands for
    // the top-level method.
    let first = v
        .get("auth_or")
        .and_then(|a| a.as_array())
        .and_then(|a| a.first())
        .filter(|m| m.get("plugin").is_some());
    let auth = match first {
        Some(m) => native_auth(&s(m, "plugin"), &s(m, "authentication_string")),
        None => native_auth(&top_plugin, &top_auth),
    };
    let locked = v.get("account_locked").and_then(|x| x.as_bool()) == Some(true);
    let last_changed = v.get("password_last_changed").and_then(|x| x.as_i64());
    let lifetime = v
        .get("password_lifetime")
        .and_then(|x| x.as_i64())
        .unwrap_or(-1);
    let lifetime = if lifetime < 0 {
        clock.default_lifetime_days
    } else {
        lifetime
    };
    let expired = match last_changed {
        Some(0) => true,
        Some(t) if lifetime > 0 => clock.now > t.saturating_add(lifetime.saturating_mul(86_400)),
        _ => false,
    };
    Some(Account {
        host: host.to_string(),
        anonymous: false,
        auth,
        locked,
        expired,
    })
}

/// Parses one `mysql.user` row (MySQL 5.7+, or the MariaDB view):
/// `plugin`, `authentication_string`, `password_expired`, `account_locked`.
pub fn from_user_row(
    host: &str,
    plugin: &str,
    auth_string: &str,
    password_expired: &str,
    account_locked: &str,
) -> Account {
    Account {
        host: host.to_string(),
        anonymous: false,
        auth: native_auth(plugin, auth_string),
        locked: account_locked.eq_ignore_ascii_case("y"),
        expired: password_expired.eq_ignore_ascii_case("y"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HASH: &str = "*14E65567ABDB5135D0CFD9A70B3032C179A49EE7";

    fn clock() -> ServerClock {
        ServerClock {
            now: 1_800_000_000,
            default_lifetime_days: 0,
        }
    }

    #[test]
    fn native_account() {
        let j = format!(
            r#"{{"access":0,"version_id":101106,"plugin":"mysql_native_password","authentication_string":"{HASH}","password_last_changed":1700000000}}"#
        );
        let a = from_global_priv("%", &j, clock()).expect("account");
        assert!(matches!(a.auth, AccountAuth::Native(_)));
        assert!(!a.locked && !a.expired);
    }

    #[test]
    fn other_plugins_locked_expired_roles() {
        let a = from_global_priv(
            "%",
            r#"{"plugin":"ed25519","authentication_string":"abc"}"#,
            clock(),
        )
        .expect("account");
        assert_eq!(a.auth, AccountAuth::Unsupported("ed25519".into()));
        // root as installed: invalid native hash OR unix_socket.
        let a = from_global_priv(
            "localhost",
            r#"{"plugin":"mysql_native_password","authentication_string":"invalid","auth_or":[{},{"plugin":"unix_socket"}]}"#,
            clock(),
        )
        .expect("account");
        assert_eq!(a.auth, AccountAuth::Unsupported(NATIVE.into()));
        let a = from_global_priv(
            "%",
            &format!(
                r#"{{"auth_or":[{{"plugin":"mysql_native_password","authentication_string":"{HASH}"}},{{"plugin":"unix_socket"}}],"plugin":"unix_socket"}}"#
            ),
            clock(),
        )
        .expect("account");
        assert!(matches!(a.auth, AccountAuth::Native(_)));
        let j = format!(
            r#"{{"plugin":"mysql_native_password","authentication_string":"{HASH}","account_locked":true,"password_last_changed":0}}"#
        );
        let a = from_global_priv("%", &j, clock()).expect("account");
        assert!(a.locked && a.expired);
        assert!(from_global_priv("", r#"{"access":0,"is_role":true}"#, clock()).is_none());
        assert!(from_global_priv("%", "not json", clock()).is_none());
        let a = from_global_priv(
            "%",
            r#"{"plugin":"mysql_native_password","authentication_string":""}"#,
            clock(),
        )
        .expect("account");
        assert_eq!(a.auth, AccountAuth::NoPassword);
    }

    #[test]
    fn password_lifetime() {
        let j = |lifetime: i64| {
            format!(
                r#"{{"plugin":"mysql_native_password","authentication_string":"{HASH}","password_last_changed":1700000000,"password_lifetime":{lifetime}}}"#
            )
        };
        // 100_000_000 s is ~1157 days.
        assert!(from_global_priv("%", &j(30), clock()).expect("a").expired);
        assert!(!from_global_priv("%", &j(2000), clock()).expect("a").expired);
        assert!(!from_global_priv("%", &j(0), clock()).expect("a").expired);
        let by_default = ServerClock {
            default_lifetime_days: 30,
            ..clock()
        };
        assert!(
            from_global_priv("%", &j(-1), by_default)
                .expect("a")
                .expired
        );
    }

    #[test]
    fn mysql_user_row() {
        let a = from_user_row("%", "mysql_native_password", HASH, "N", "N");
        assert!(matches!(a.auth, AccountAuth::Native(_)));
        let a = from_user_row("%", "caching_sha2_password", "$A$005$x", "Y", "Y");
        assert!(a.locked && a.expired);
        assert!(matches!(a.auth, AccountAuth::Unsupported(_)));
    }
}
