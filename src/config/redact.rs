//! Keeping secrets out of output: the effective configuration with every
//! password, password hash and backend password masked (`check-config`),
//! and load errors with the echoed source line and quoted values hidden
//! (a TOML syntax error on a password line would print the password).

use super::model::Config;

/// What a masked secret prints as.
pub const MASK: &str = "********";

fn mask(s: &mut String) {
    if !s.is_empty() {
        *s = MASK.into();
    }
}

impl Config {
    /// A copy with every secret masked.
    pub fn redacted(&self) -> Config {
        let mut c = self.clone();
        mask(&mut c.backend.password);
        mask(&mut c.server_users.lookup_password);
        for u in &mut c.users {
            for s in [
                &mut u.password,
                &mut u.password_sha1,
                &mut u.password_sha256,
                &mut u.backend_password,
            ]
            .into_iter()
            .flatten()
            {
                mask(s);
            }
        }
        c
    }
}

/// A load error's text without the source lines a parser echoes
/// (`12 | password = "…`) and with quoted values replaced by [`MASK`].
pub fn error_text(raw: &str) -> String {
    let mut out = Vec::new();
    for line in raw.lines() {
        let t = line.trim_start();
        let echoed = t
            .split_once('|')
            .is_some_and(|(n, rest)| n.trim().parse::<u32>().is_ok() && !rest.trim().is_empty());
        if echoed {
            out.push(format!(
                "{} | (source line hidden: it may hold a secret)",
                t.split('|').next().unwrap_or("").trim()
            ));
        } else {
            out.push(mask_quoted(line));
        }
    }
    out.join("\n")
}

/// Replaces `"…"` literals (values, as serde and TOML quote them) with the
/// mask; `` `…` `` (key and field names) stay, so an unknown key is named.
fn mask_quoted(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut open: Option<char> = None;
    for c in line.chars() {
        match open {
            Some(q) if c == q => {
                out.push_str(MASK);
                out.push(c);
                open = None;
            }
            Some(_) => {}
            None if c == '"' => {
                out.push(c);
                open = Some(c);
            }
            None => out.push(c),
        }
    }
    if open.is_some() {
        out.push_str(MASK);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_lines_and_values_are_hidden() {
        let raw = "TOML parse error at line 3, column 12\n  |\n3 | password = \"hunter2\n  |            ^\ninvalid basic string\n";
        let t = error_text(raw);
        assert!(!t.contains("hunter2"), "{t}");
        assert!(t.contains("line 3, column 12"), "{t}");
        let t = error_text(
            "invalid type: string \"hunter2\", expected a boolean for key `users.admin`",
        );
        assert!(!t.contains("hunter2"), "{t}");
        assert!(t.contains("`users.admin`"), "key names stay: {t}");
    }

    #[test]
    fn every_secret_is_masked() {
        let c = Config {
            users: vec![crate::config::UserConfig {
                name: "u".into(),
                password_sha1: Some("*ABCDEF".into()),
                password_sha256: Some("abc123".into()),
                password: Some("pw".into()),
                backend_password: Some("bpw".into()),
                ..Default::default()
            }],
            ..Default::default()
        };
        let text = format!("{:?}", c.redacted());
        for secret in ["*ABCDEF", "abc123", "\"pw\"", "bpw", "\"secret\""] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
    }
}
