//! MariaDB's own test suite as installed by Debian's `mariadb-test` package:
//! where it lives, and the one change we make to its files before running
//! them.
//!
//! The suite was written for a server whose `root` has no password
//! (`connect (con1,localhost,root,,)`); our fixture's accounts have real
//! passwords. Instead of weakening the server, the runner gives `mysqltest`
//! an *overlay directory* (`--overlay-dir`) holding copies of the case and of
//! every include file whose `connect`/`change_user` commands log in as `root`
//! with an empty password, with the password filled in. `mysqltest` echoes
//! each `connect` command into its output, so every rewritten argument list
//! is remembered and put back in the recorded output before it is compared
//! with the case's `.result` ([`Inversions::apply`]). Nothing else in a case
//! is touched.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The installed suite and the two programs that run it.
pub struct Suite {
    /// `.../mysql-test` (has `main/`, `include/`, `std_data/`).
    pub root: PathBuf,
    /// `mariadb-test` (a.k.a. `mysqltest`).
    pub mysqltest: PathBuf,
    /// `mariadb-client-test` (a.k.a. `mysql_client_test`).
    pub client_test: PathBuf,
}

impl Suite {
    /// Finds the suite; panics with a hint when the package is missing (a
    /// missing suite is a broken environment, not a skipped test).
    pub fn locate() -> Suite {
        let roots = [
            "/usr/share/mysql/mysql-test",
            "/usr/share/mariadb/mysql-test",
        ];
        let root = roots
            .iter()
            .map(PathBuf::from)
            .find(|p| p.join("main").is_dir() && p.join("include").is_dir())
            .unwrap_or_else(|| {
                panic!(
                    "MariaDB test suite not found in {roots:?}; \
                     run scripts/install-deps.sh (installs Debian's mariadb-test)"
                )
            });
        let bin = |names: &[&str]| {
            names
                .iter()
                .flat_map(|n| ["/usr/bin", "/usr/local/bin"].map(|d| Path::new(d).join(n)))
                .find(|p| p.is_file())
                .unwrap_or_else(|| {
                    panic!("{names:?} not found; run scripts/install-deps.sh (mariadb-test)")
                })
        };
        Suite {
            mysqltest: bin(&["mariadb-test", "mysqltest"]),
            client_test: bin(&["mariadb-client-test", "mysql_client_test"]),
            root,
        }
    }

    /// `main/<case>.test`.
    pub fn test_file(&self, case: &str) -> PathBuf {
        self.root.join("main").join(format!("{case}.test"))
    }

    /// `main/<case>.result`.
    pub fn result_file(&self, case: &str) -> PathBuf {
        self.root.join("main").join(format!("{case}.result"))
    }

    /// Writes the overlay directory for `cases`: each case's script, and
    /// every include file (`include/*.inc`, `main/*.inc`) that logs in as
    /// root without a password, with `password` filled in. Returns each
    /// case's inversions (its own plus those of all rewritten includes).
    pub fn build_overlay(
        &self,
        dir: &Path,
        password: &str,
        cases: &[String],
    ) -> BTreeMap<String, Inversions> {
        let _ = std::fs::remove_dir_all(dir);
        std::fs::create_dir_all(dir.join("include")).expect("create overlay dir");
        let mut includes = Inversions::default();
        for (sub, target) in [
            ("include", dir.join("include")),
            ("main", dir.to_path_buf()),
        ] {
            let entries = std::fs::read_dir(self.root.join(sub)).expect("read suite dir");
            for entry in entries.flatten() {
                let path = entry.path();
                if path.extension().and_then(|e| e.to_str()) != Some("inc") {
                    continue;
                }
                let text = std::fs::read(&path).expect("read include file");
                let (new, inv) = rewrite_root_logins(&text, password);
                if new != text {
                    std::fs::write(target.join(entry.file_name()), new)
                        .expect("write overlay include");
                    includes.extend(&inv);
                }
            }
        }
        // Under pooling the server's session count is not the client's
        // (docs/compatibility.md#server-session-counts): the wait for it
        // to drop back gives up quietly after a second instead of failing
        // the case, so the rest of each case is still compared.
        std::fs::write(
            dir.join("include/wait_until_count_sessions.inc"),
            WAIT_UNTIL_COUNT_SESSIONS,
        )
        .expect("write overlay include");
        let mut out = BTreeMap::new();
        for case in cases {
            let text = std::fs::read(self.test_file(case))
                .unwrap_or_else(|e| panic!("case {case}: cannot read its .test: {e}"));
            let (new, mut inv) = rewrite_root_logins(&text, password);
            std::fs::write(dir.join(format!("{case}.test")), new).expect("write overlay case");
            inv.extend(&includes);
            out.insert(case.clone(), inv);
        }
        out
    }
}

/// `include/wait_until_count_sessions.inc` for both lanes: waits up to a
/// second for `Threads_connected` to drop back to `$count_sessions` (a
/// direct server's disconnects settle), then goes on without failing.
const WAIT_UNTIL_COUNT_SESSIONS: &str = "\
# myplex conformance overlay: the session count is not transparent under
# pooling (docs/compatibility.md#server-session-counts); wait briefly, never fail.
let $wait_counter= 10;
let $wait_timeout= 0;
while ($wait_counter)
{
   let $current_sessions= query_get_value(SHOW STATUS LIKE 'Threads_connected', Value, 1);
   let $success= `SELECT $current_sessions <= $count_sessions`;
   if ($success)
   {
      let $wait_counter= 0;
   }
   if (!$success)
   {
      real_sleep 0.1;
      dec $wait_counter;
   }
}
";

/// Rewritten `connect` argument lists of one file: rewritten text →
/// original text, as `mysqltest` echoes them.
#[derive(Default, Clone, Debug)]
pub struct Inversions {
    pairs: BTreeMap<String, String>,
}

impl Inversions {
    /// Adds the pairs of another file (an include's rewrites also appear in
    /// the output of every case that sources it).
    pub fn extend(&mut self, other: &Inversions) {
        for (k, v) in &other.pairs {
            self.pairs.insert(k.clone(), v.clone());
        }
    }

    /// Puts the original argument lists back into the `connect` lines of a
    /// recorded output (bytes: results of character-set cases are not
    /// UTF-8).
    pub fn apply(&self, output: &[u8]) -> Vec<u8> {
        if self.pairs.is_empty() {
            return output.to_vec();
        }
        let mut out = Vec::with_capacity(output.len());
        for line in output.split_inclusive(|&b| b == b'\n') {
            if line.starts_with(b"connect") {
                let mut l = line.to_vec();
                // Longest first, so a shorter pair cannot match inside a
                // longer one.
                let mut pairs: Vec<_> = self.pairs.iter().collect();
                pairs.sort_by_key(|(k, _)| std::cmp::Reverse(k.len()));
                for (rewritten, original) in pairs {
                    l = replace_bytes(&l, rewritten.as_bytes(), original.as_bytes());
                }
                out.extend_from_slice(&l);
            } else {
                out.extend_from_slice(line);
            }
        }
        out
    }
}

fn replace_bytes(hay: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(hay.len());
    let mut i = 0;
    while i < hay.len() {
        if !from.is_empty() && hay[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.push(hay[i]);
            i += 1;
        }
    }
    out
}

/// Fills in `password` where a `connect` or `change_user` command of a
/// mysqltest script logs in as `root` with an empty (or absent) password.
/// Returns the new text and what to undo in the echoed output. Lines that
/// are not such commands are returned byte for byte.
pub fn rewrite_root_logins(script: &[u8], password: &str) -> (Vec<u8>, Inversions) {
    let mut out = Vec::with_capacity(script.len() + 64);
    let mut inv = Inversions::default();
    for line in script.split_inclusive(|&b| b == b'\n') {
        match std::str::from_utf8(line)
            .ok()
            .and_then(|l| rewrite_line(l, password))
        {
            Some((new_line, echoed_new, echoed_old)) => {
                out.extend_from_slice(new_line.as_bytes());
                if let Some(new) = echoed_new {
                    inv.pairs.insert(new, echoed_old);
                }
            }
            None => out.extend_from_slice(line),
        }
    }
    (out, inv)
}

/// One line: `Some((rewritten line, Some(echoed args after), echoed args
/// before))` for a rewritten `connect`, `(…, None, _)` for a rewritten
/// `change_user` (not echoed), `None` when the line stays as it is.
fn rewrite_line(line: &str, password: &str) -> Option<(String, Option<String>, String)> {
    let body_start = line.len() - line.trim_start().len();
    let mut rest = &line[body_start..];
    if let Some(r) = rest.strip_prefix("--") {
        rest = r.trim_start();
    }
    let (command, user_field) = if rest.starts_with("connect")
        && rest[7..].starts_with(|c: char| c == '(' || c.is_whitespace())
    {
        ("connect", 2)
    } else if rest.starts_with("change_user") && rest[11..].starts_with(|c: char| c.is_whitespace())
    {
        ("change_user", 0)
    } else {
        return None;
    };
    let after_cmd = &rest[command.len()..];
    let lead = after_cmd.len() - after_cmd.trim_start().len();
    let mut args_start = line.len() - after_cmd.len() + lead;
    if line[args_start..].starts_with('(') {
        args_start += 1;
    }
    // The argument list ends at `)` (parenthesised form), `;` or the end of
    // the line.
    let tail = &line[args_start..];
    let args_len = tail.find([')', ';', '\n', '\r']).unwrap_or(tail.len());
    let args = &tail[..args_len];
    let mut fields: Vec<String> = args.split(',').map(str::to_string).collect();
    let pw_field = user_field + 1;
    if fields.len() <= user_field || fields[user_field].trim() != "root" {
        return None;
    }
    if fields.len() > pw_field && !fields[pw_field].trim().is_empty() {
        return None;
    }
    if fields.len() > pw_field {
        // Keep the original spacing in front of the (empty) password.
        fields[pw_field].push_str(password);
    } else {
        fields.push(password.to_string());
    }
    let new_args = fields.join(",");
    let new_line = format!(
        "{}{}{}",
        &line[..args_start],
        new_args,
        &line[args_start + args_len..]
    );
    let echoed = (command == "connect").then(|| new_args.clone());
    Some((new_line, echoed, args.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rw(s: &str) -> (String, Inversions) {
        let (out, inv) = rewrite_root_logins(s.as_bytes(), "pw");
        (String::from_utf8(out).expect("utf8"), inv)
    }

    #[test]
    fn fills_root_password_in_every_connect_form() {
        let src = "connect (con1,localhost,root,,);\n\
                   --connect(con2, localhost,  root,,test,$MASTER_MYPORT)\n\
                   connect  con3 , localhost,root, ,test;\n\
                   --connect con4,localhost,root\n\
                   change_user root,,test;\n\
                   connect (con5,localhost,user1,,);\n\
                   connect (con6,localhost,root,secret,);\n\
                   connection con1;\n\
                   select 'connect (x,localhost,root,,)';\n";
        let (out, _) = rw(src);
        assert_eq!(
            out,
            "connect (con1,localhost,root,pw,);\n\
             --connect(con2, localhost,  root,pw,test,$MASTER_MYPORT)\n\
             connect  con3 , localhost,root, pw,test;\n\
             --connect con4,localhost,root,pw\n\
             change_user root,pw,test;\n\
             connect (con5,localhost,user1,,);\n\
             connect (con6,localhost,root,secret,);\n\
             connection con1;\n\
             select 'connect (x,localhost,root,,)';\n"
        );
    }

    #[test]
    fn inversion_restores_the_echoed_connect_lines_only() {
        let (_, inv) = rw("connect (con1,localhost,root,,);\n--connect con4,localhost,root\n");
        let recorded = b"connect  con1,localhost,root,pw,;\nselect 'con1,localhost,root,pw,';\n\
                         connect con4,localhost,root,pw;\n";
        assert_eq!(
            inv.apply(recorded),
            b"connect  con1,localhost,root,,;\nselect 'con1,localhost,root,pw,';\n\
              connect con4,localhost,root;\n"
                .to_vec()
        );
    }

    #[test]
    fn non_utf8_lines_pass_through() {
        let src = b"select '\xe4';\nconnect (c,localhost,root,,);\n";
        let (out, _) = rewrite_root_logins(src, "pw");
        assert_eq!(
            out,
            b"select '\xe4';\nconnect (c,localhost,root,pw,);\n".to_vec()
        );
    }
}
