//! The server's variables and character sets as a fresh backend session
//! sees them, read once at start, and the value `SELECT @@name` gives an
//! admin session from them and its tracked state.

use std::collections::HashMap;

use super::SessionView;
use crate::admin::console::ColumnType;

/// A system variable as a fresh backend session saw it at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VarInfo {
    /// Session value (`None` for a global-only variable or NULL).
    pub session: Option<String>,
    /// Global value (`None` for a session-only variable or NULL).
    pub global: Option<String>,
    /// `VARIABLE_SCOPE`: GLOBAL, SESSION or SESSION ONLY.
    pub scope: String,
    /// `VARIABLE_TYPE` (BOOLEAN, BIGINT UNSIGNED, VARCHAR, ENUM, …).
    pub ty: String,
}

/// The server's variables and character sets, read once at start.
#[derive(Debug, Clone, Default)]
pub struct ServerVars {
    /// By lowercase name.
    pub vars: HashMap<String, VarInfo>,
    /// Character set → its default collation.
    pub charsets: HashMap<String, String>,
    /// Collation → its character set.
    pub collations: HashMap<String, String>,
    /// The idle timeouts among `vars`, parsed (read on every command).
    pub idle: crate::frontend::session::idle::IdleGlobals,
}

impl ServerVars {
    /// Reads the snapshot over `conn` (MariaDB's
    /// `information_schema.SYSTEM_VARIABLES` and `COLLATIONS`).
    pub async fn capture(
        conn: &mut crate::backend::BackendConn,
    ) -> Result<Self, crate::backend::BackendError> {
        let mut out = Self::default();
        let rows = conn
            .query_rows(
                "SELECT LOWER(VARIABLE_NAME), SESSION_VALUE, GLOBAL_VALUE, VARIABLE_SCOPE, \
                 VARIABLE_TYPE FROM information_schema.SYSTEM_VARIABLES",
                10_000,
            )
            .await?;
        for mut r in rows {
            if r.len() != 5 {
                continue;
            }
            let ty = r.pop().flatten().unwrap_or_default();
            let scope = r.pop().flatten().unwrap_or_default();
            let global = r.pop().flatten();
            let session = r.pop().flatten();
            if let Some(Some(name)) = r.pop() {
                out.vars.insert(
                    name,
                    VarInfo {
                        session,
                        global,
                        scope,
                        ty,
                    },
                );
            }
        }
        let rows = conn
            .query_rows(
                "SELECT LOWER(COLLATION_NAME), LOWER(CHARACTER_SET_NAME), IS_DEFAULT \
                 FROM information_schema.COLLATIONS",
                10_000,
            )
            .await?;
        for r in rows {
            if let [Some(coll), Some(cs), default] = r.as_slice() {
                if default
                    .as_deref()
                    .is_some_and(|d| d.eq_ignore_ascii_case("yes"))
                {
                    out.charsets.insert(cs.clone(), coll.clone());
                }
                out.collations.insert(coll.clone(), cs.clone());
            }
        }
        out.idle = crate::frontend::session::idle::IdleGlobals::read(|n| {
            out.vars.get(n).and_then(|v| v.global.as_deref())
        });
        Ok(out)
    }

    /// A character set name as the server resolves it (`utf8` is `utf8mb3`
    /// under the default `old_mode`).
    pub(super) fn charset(&self, name: &str) -> Option<String> {
        let name = self.alias(name)?;
        self.charsets.contains_key(&name).then_some(name)
    }

    pub(super) fn collation(&self, name: &str) -> Option<(String, String)> {
        let name = self.alias(name)?;
        let cs = self.collations.get(&name)?;
        Some((name, cs.clone()))
    }

    fn alias(&self, name: &str) -> Option<String> {
        let name = name.to_ascii_lowercase();
        let Some(rest) = name.strip_prefix("utf8") else {
            return Some(name);
        };
        if rest.starts_with("mb") {
            return Some(name);
        }
        // Only when the server says utf8 means utf8mb3.
        let old_mode = self.vars.get("old_mode")?.session.as_deref()?;
        old_mode
            .to_ascii_uppercase()
            .contains("UTF8_IS_UTF8MB3")
            .then(|| format!("utf8mb3{rest}"))
    }
}

/// Per-statement or per-connection values the server owns: never answered
/// from a snapshot.
const NOT_LOCAL: &[&str] = &[
    "error_count",
    "external_user",
    "gtid_seq_no",
    "identity",
    "in_transaction",
    "insert_id",
    "last_gtid",
    "last_insert_id",
    "pseudo_thread_id",
    "proxy_user",
    "rand_seed1",
    "rand_seed2",
    "thread_id",
    "timestamp",
    "warning_count",
    "character_set_database",
    "collation_database",
];

/// The value `SELECT @@[scope.]name` gives the session, with its column
/// type; `None` when it is not answered here.
pub(super) fn read(
    name: &str,
    global: bool,
    session_scope: bool,
    vars: &ServerVars,
    s: &SessionView<'_>,
) -> Option<(ColumnType, Option<String>)> {
    if NOT_LOCAL.contains(&name) {
        return None;
    }
    let info = vars.vars.get(name)?;
    let scope = info.scope.to_ascii_uppercase();
    let value = if global {
        if scope == "SESSION ONLY" {
            return None;
        }
        info.global.clone()
    } else if scope == "GLOBAL" {
        if session_scope {
            return None;
        }
        info.global.clone()
    } else if name == "autocommit" {
        Some(
            if s.status & crate::protocol::packets::status::AUTOCOMMIT != 0 {
                "ON".into()
            } else {
                "OFF".into()
            },
        )
    } else if let Some(v) = s.state.vars.get(name) {
        Some(v.clone())
    } else if name == "wait_timeout" && s.interactive {
        vars.vars.get("interactive_timeout")?.session.clone()
    } else if name == "sql_mode" && s.ignore_space {
        let m = info.session.clone().unwrap_or_default();
        Some(
            if m.split(',').any(|w| w.eq_ignore_ascii_case("IGNORE_SPACE")) {
                m
            } else if m.is_empty() {
                "IGNORE_SPACE".into()
            } else {
                format!("{m},IGNORE_SPACE")
            },
        )
    } else {
        info.session.clone()
    };
    let ty = info.ty.to_ascii_uppercase();
    Some(if ty == "BOOLEAN" {
        let v = value.map(|v| {
            if v.eq_ignore_ascii_case("ON") || v == "1" {
                "1".to_string()
            } else {
                "0".to_string()
            }
        });
        (ColumnType::Integer { unsigned: false }, v)
    } else if ty.contains("INT") {
        (
            ColumnType::Integer {
                unsigned: ty.contains("UNSIGNED"),
            },
            value,
        )
    } else if ty == "DOUBLE" {
        (ColumnType::Double { decimals: 6 }, value)
    } else {
        (ColumnType::Text, value)
    })
}
