//! Tracked, replayable session state and the diff that brings a backend to it.

use std::collections::BTreeMap;

use mysql_common::collations::{Collation, CollationId};

use super::variables::{VarClass, classify};
use crate::protocol::session_track::{Change, entries};

/// `max_join_size` meaning "no limit" (HA_POS_ERROR): the value that makes
/// the server set `sql_big_selects` ON.
const MAX_JOIN_SIZE_UNLIMITED: &str = "18446744073709551615";

/// The database character set and collation. The server derives them from
/// the default schema (USE, COM_INIT_DB, a reset re-selecting it) and a
/// `SET` overrides them until the schema is selected again. The state
/// holds them only while overridden; either one determines both (setting
/// the character set takes its default collation, setting the collation
/// takes its character set), so they are replayed in this order.
const DATABASE_VARS: [&str; 2] = ["character_set_database", "collation_database"];

/// Schema and changed session variables, as the server reported them.
/// Serialisable: it goes with a session that moves to a new process
/// (`frontend::session::moving`).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrackedState {
    /// Default schema (`None` = no schema selected).
    pub schema: Option<Vec<u8>>,
    /// Replayable session variables set away from a fresh connection's
    /// values, by name (lowercase), with the value text the tracker reported.
    pub vars: BTreeMap<String, String>,
    /// The multi-statements option (login capability or COM_SET_OPTION).
    pub multi_statements: bool,
    /// What `LAST_INSERT_ID()` returns (from the insert id of OK packets).
    pub last_insert_id: u64,
    /// The collation of `character_set_results` (`None`: its character
    /// set's default). A handshake and `SET NAMES x [COLLATE y]` set the
    /// result character set to the connection collation itself (result
    /// columns then carry it), `SET character_set_results` to the default,
    /// and `SET collation_connection` leaves it. No tracker reports it: it
    /// is learned from how the statement set the character sets.
    pub results_collation: Option<String>,
}

/// What applying a tracker block reported.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApplyEffects {
    /// The state-change tracker fired (something in the session changed;
    /// it does not say what).
    pub state_changed: bool,
    /// The `session_track_*` variables the client changed, with their new
    /// values.
    pub tracker_values: Vec<(String, String)>,
    /// Variables the proxy may not replay, with the value reported
    /// ([`VarClass::Pinning`]).
    pub pinning_vars: Vec<(String, String)>,
    /// The character set changed without the collation being reported
    /// (`SET NAMES x [COLLATE y]`): the exact collation must come from the
    /// statement text or the server.
    pub charset_without_collation: bool,
    /// `last_gtid` as reported (MariaDB, binary log on): the GTID of the
    /// session's last commit, for read-your-writes.
    pub last_gtid: Option<String>,
}

/// Commands that bring a backend to a session's state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncPlan {
    /// COM_INIT_DB payload (schema name) when the schema differs.
    pub init_db: Option<Vec<u8>>,
    /// One `SET SESSION …` statement for the variables that differ.
    pub set_sql: Option<String>,
    /// COM_SET_OPTION to send (true = multi-statements on).
    pub set_option: Option<bool>,
    /// The session has no schema but the backend has one: only a
    /// COM_CHANGE_USER can unselect it (done before the rest of the plan).
    pub clear_schema: bool,
}

impl SyncPlan {
    /// True when nothing needs to be sent.
    pub fn is_empty(&self) -> bool {
        self.init_db.is_none()
            && self.set_sql.is_none()
            && self.set_option.is_none()
            && !self.clear_schema
    }
}

/// What a fresh login of a backend's flavour has away from the global
/// values: the server derives these from the login capabilities, so
/// `name=DEFAULT` (the global value) does not restore them, and
/// COM_RESET_CONNECTION / COM_CHANGE_USER drop them (measured on MariaDB
/// 10.11: after either, IGNORE_SPACE is gone from `sql_mode`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoginDefaults {
    /// CLIENT_IGNORE_SPACE: `sql_mode` gains IGNORE_SPACE.
    pub ignore_space: bool,
    /// CLIENT_INTERACTIVE: `wait_timeout` is `interactive_timeout`.
    pub interactive: bool,
}

impl LoginDefaults {
    /// The variables a login capability may derive. `SET name = DEFAULT`
    /// gives them the global value, which is not a fresh login's: a session
    /// that set one back to DEFAULT keeps the reported value, never
    /// "absent" (which means the flavour's login value).
    pub const DERIVED: [&'static str; 2] = ["sql_mode", "wait_timeout"];

    /// The defaults of a connection that logged in with `caps`.
    pub fn of(caps: crate::protocol::caps::Caps) -> Self {
        use crate::protocol::caps::flag;
        Self {
            ignore_space: caps.has(flag::IGNORE_SPACE),
            interactive: caps.has(flag::INTERACTIVE),
        }
    }

    /// The value expression that gives `name` its fresh-login value.
    pub fn value_expr(self, name: &str) -> &'static str {
        match name {
            "sql_mode" if self.ignore_space => {
                "CONCAT_WS(',', NULLIF(@@global.sql_mode, ''), 'IGNORE_SPACE')"
            }
            "wait_timeout" if self.interactive => "@@global.interactive_timeout",
            _ => "DEFAULT",
        }
    }

    /// Assignments (`name=expr`) that restore the login-derived values
    /// after COM_RESET_CONNECTION or COM_CHANGE_USER.
    pub fn after_reset(self) -> Vec<String> {
        Self::DERIVED
            .into_iter()
            .map(|n| (n, self.value_expr(n)))
            .filter(|(_, e)| *e != "DEFAULT")
            .map(|(n, e)| format!("{n}={e}"))
            .collect()
    }
}

/// The four variables a handshake collation (or SET NAMES) determines, in
/// the order they must be set.
const CHARSET_VARS: [&str; 4] = [
    "character_set_client",
    "character_set_connection",
    "character_set_results",
    "collation_connection",
];

impl TrackedState {
    /// State of a connection whose handshake named `collation`; empty when
    /// the collation is unknown.
    pub fn for_collation(collation: u16) -> Self {
        let mut s = Self::default();
        let c = Collation::resolve(CollationId::from(collation));
        if c.id != CollationId::UNKNOWN_COLLATION_ID {
            for name in &CHARSET_VARS[..3] {
                s.vars.insert((*name).to_string(), c.charset.to_string());
            }
            s.vars
                .insert(CHARSET_VARS[3].to_string(), c.collation.to_string());
            s.results_collation = Some(c.collation.to_string());
        }
        s
    }

    /// Absorbs a session-state block from an OK packet. Only replayable
    /// variables become part of the state; the others are returned for the
    /// caller to decide (see [`super::authority`]).
    pub fn apply_block(&mut self, block: &[u8]) -> ApplyEffects {
        self.apply_block_with(block, |_| true)
    }

    /// [`Self::apply_block`], taking a replayable variable's reported value
    /// only when `keep(name)` (the reply of `SET STATEMENT … FOR` reports
    /// that statement's temporary values too).
    pub fn apply_block_with(&mut self, block: &[u8], keep: impl Fn(&str) -> bool) -> ApplyEffects {
        let mut fx = ApplyEffects::default();
        let (mut cs_conn, mut coll_conn, mut cs_results) = (false, false, false);
        let (mut join_size, mut big_selects) = (None, false);
        let (mut schema_changed, mut db_vars) = (false, [false; 2]);
        for e in entries(block) {
            match e.change() {
                Some(Change::Schema(s)) => {
                    self.schema = (!s.is_empty()).then(|| s.to_vec());
                    schema_changed = true;
                }
                Some(Change::SystemVariable { name, value }) => {
                    let name = String::from_utf8_lossy(name).to_ascii_lowercase();
                    let value = String::from_utf8_lossy(value).into_owned();
                    match classify(&name) {
                        VarClass::Replayable if keep(&name) => {
                            cs_conn |= name == "character_set_connection";
                            coll_conn |= name == "collation_connection";
                            cs_results |= name == "character_set_results";
                            big_selects |= name == "sql_big_selects";
                            for (seen, n) in db_vars.iter_mut().zip(DATABASE_VARS) {
                                *seen |= name == n;
                            }
                            if name == "max_join_size" {
                                join_size = Some(value.clone());
                            }
                            self.vars.insert(name, value);
                        }
                        VarClass::Replayable => {}
                        VarClass::ServerOwned if name == "last_gtid" && !value.is_empty() => {
                            fx.last_gtid = Some(value);
                        }
                        VarClass::ServerOwned => {}
                        VarClass::Trackers => fx.tracker_values.push((name, value)),
                        VarClass::Pinning => fx.pinning_vars.push((name, value)),
                    }
                }
                Some(Change::StateChanged) => fx.state_changed = true,
                _ => {}
            }
        }
        if schema_changed {
            // Selecting a schema sets the database character set and
            // collation from it (reported with it or not): derived again,
            // no longer overridden.
            for n in DATABASE_VARS {
                self.vars.remove(n);
            }
        } else if db_vars[0] != db_vars[1] {
            // One of the pair was set: it determined the other, whose
            // older value must not be replayed after it.
            let other = DATABASE_VARS[usize::from(db_vars[0])];
            self.vars.remove(other);
        }
        if cs_results {
            // The default collation, until SET NAMES tells its own
            // ([`Self::set_names_collation`]).
            self.results_collation = None;
        }
        if cs_conn && !coll_conn {
            // SET NAMES reports the character sets but not the collation it
            // set (MariaDB 10.11, with or without COLLATE). Forget the old
            // one; the caller sets the exact one when it knows it.
            self.vars.remove("collation_connection");
            fx.charset_without_collation = true;
        }
        if let (Some(size), false) = (join_size, big_selects) {
            // Setting max_join_size sets sql_big_selects too (ON exactly
            // when the size is unlimited), and the server reports only the
            // variable that was set.
            let on = size == MAX_JOIN_SIZE_UNLIMITED;
            self.vars.insert(
                "sql_big_selects".into(),
                if on { "ON" } else { "OFF" }.into(),
            );
        }
        fx
    }

    /// Records the exact connection collation (from `SET NAMES … COLLATE`
    /// or the server).
    pub fn set_collation(&mut self, collation: &str) {
        self.vars
            .insert(CHARSET_VARS[3].to_string(), collation.to_ascii_lowercase());
    }

    /// Takes `other`'s connection and result collations (a backend that ran
    /// the session's statements has the session's; the trackers report
    /// neither exactly).
    pub fn take_collations_from(&mut self, other: &TrackedState) {
        let theirs = other.vars.get(CHARSET_VARS[3]);
        // Nearly always the same already: no allocation then.
        if self.vars.get(CHARSET_VARS[3]) != theirs {
            match theirs {
                Some(c) => self.set_collation(c),
                None => {
                    self.vars.remove(CHARSET_VARS[3]);
                }
            }
        }
        if self.results_collation != other.results_collation {
            self.results_collation.clone_from(&other.results_collation);
        }
    }

    /// Records the collation a `SET NAMES` set (read from the server after
    /// it): the connection's, and the result character set's too.
    pub fn set_names_collation(&mut self, collation: &str) {
        self.set_collation(collation);
        self.results_collation = Some(collation.to_ascii_lowercase());
    }

    /// What to send to a backend in state `backend` (logged in with
    /// `login`'s flavour) to bring it to `self`. Variables the backend has
    /// but the session lacks go back to the flavour's fresh-login value
    /// (DEFAULT, or what the login capabilities derive). After the plan
    /// succeeds the backend's state is `self` (see [`Self::adopt`]): a value
    /// reset is sent once, not again.
    pub fn sync_plan(&self, backend: &TrackedState, login: LoginDefaults) -> SyncPlan {
        let mut plan = SyncPlan::default();
        // The common case (a held backend, or one last used by a session
        // like this one): one pass of comparisons instead of a lookup per
        // variable class.
        if self == backend {
            return plan;
        }
        if self.schema != backend.schema {
            match &self.schema {
                Some(s) => plan.init_db = Some(s.clone()),
                None => plan.clear_schema = true,
            }
        }
        if self.multi_statements != backend.multi_statements {
            plan.set_option = Some(self.multi_statements);
        }
        let charset_differs = CHARSET_VARS
            .iter()
            .any(|n| self.vars.get(*n) != backend.vars.get(*n))
            || self.results_collation != backend.results_collation;
        let mut assigns: Vec<String> = Vec::new();
        let mut names = None;
        if charset_differs {
            let get = |i: usize| self.vars.get(CHARSET_VARS[i]);
            match (&self.results_collation, get(2)) {
                // Only SET NAMES … COLLATE gives the result character set a
                // collation (result columns carry it, as after a handshake
                // that named it); the client and connection follow.
                (Some(rc), Some(rs)) if is_collation_of(rc, rs) => {
                    names = Some(format!("NAMES {} COLLATE {}", quote(rs), quote(rc)));
                    if let Some(cl) = get(0)
                        && cl != rs
                    {
                        assigns.push(assign(CHARSET_VARS[0], cl));
                    }
                    match (get(3), get(1)) {
                        (Some(coll), _) if coll != rc => {
                            assigns.push(assign(CHARSET_VARS[3], coll))
                        }
                        (None, Some(co)) if co != rs => assigns.push(assign(CHARSET_VARS[1], co)),
                        _ => {}
                    }
                }
                // By name: each character set with its default collation,
                // then the connection's own.
                _ => {
                    for n in CHARSET_VARS {
                        if let Some(v) = self.vars.get(n) {
                            assigns.push(assign(n, v));
                        }
                    }
                }
            }
        }
        let own_rule = |n: &str| CHARSET_VARS.contains(&n) || DATABASE_VARS.contains(&n);
        for (n, v) in &self.vars {
            if own_rule(n) {
                continue;
            }
            if backend.vars.get(n) != Some(v) {
                assigns.push(assign(n, v));
            }
        }
        for n in backend.vars.keys() {
            if !self.vars.contains_key(n) && !own_rule(n) {
                assigns.push(format!("{n}={}", login.value_expr(n)));
            }
        }
        self.plan_database_vars(backend, &mut plan, &mut assigns);
        if self.last_insert_id != backend.last_insert_id {
            assigns.push(format!("last_insert_id={}", self.last_insert_id));
        }
        plan.set_sql = match (names, assigns.is_empty()) {
            (Some(n), true) => Some(format!("SET {n}")),
            (Some(n), false) => Some(format!("SET {n}, SESSION {}", assigns.join(", "))),
            (None, false) => Some(format!("SET SESSION {}", assigns.join(", "))),
            (None, true) => None,
        };
        plan
    }

    /// The database character set and collation ([`DATABASE_VARS`]), after
    /// the plan's schema: selecting a schema (COM_INIT_DB runs before the
    /// `SET`) derives them again, so an override is set after it; a backend
    /// overridden where the session is not selects its schema again, or
    /// takes the global value when neither has a schema (what a connection
    /// without one starts with).
    fn plan_database_vars(
        &self,
        backend: &TrackedState,
        plan: &mut SyncPlan,
        assigns: &mut Vec<String>,
    ) {
        let mine = DATABASE_VARS.map(|n| self.vars.get(n));
        let theirs = if plan.init_db.is_some() {
            [None, None]
        } else {
            DATABASE_VARS.map(|n| backend.vars.get(n))
        };
        if mine == theirs {
            return;
        }
        if mine == [None, None] {
            match &self.schema {
                Some(s) => plan.init_db = Some(s.clone()),
                None => assigns.push(format!("{}=DEFAULT", DATABASE_VARS[1])),
            }
            return;
        }
        for (n, v) in DATABASE_VARS.iter().zip(mine) {
            if let Some(v) = v {
                assigns.push(assign(n, v));
            }
        }
    }

    /// The backend reached `target` by a successful sync plan: take its
    /// replayed parts as they are (not the tracker's echo, which reports a
    /// DEFAULT as a concrete value and would make the plan never converge).
    pub fn adopt(&mut self, target: &TrackedState) {
        self.vars.clone_from(&target.vars);
        self.results_collation.clone_from(&target.results_collation);
        self.last_insert_id = target.last_insert_id;
        self.multi_statements = target.multi_statements;
        self.schema.clone_from(&target.schema);
    }
}

/// `collation` belongs to character set `charset` (`utf8mb4_unicode_ci`
/// of `utf8mb4`).
fn is_collation_of(collation: &str, charset: &str) -> bool {
    collation.len() > charset.len()
        && collation.starts_with(charset)
        && collation.as_bytes()[charset.len()] == b'_'
}

/// `name=value`, quoting text values and passing numbers bare.
fn assign(name: &str, value: &str) -> String {
    let numeric = !value.is_empty()
        && value
            .bytes()
            .enumerate()
            .all(|(i, b)| b.is_ascii_digit() || b == b'.' || (i == 0 && b == b'-'));
    if numeric {
        return format!("{name}={value}");
    }
    if name == "character_set_results" && (value.is_empty() || value == "NULL") {
        return format!("{name}=NULL");
    }
    // The introducer keeps the value's bytes (UTF-8 here) from being read
    // in `character_set_connection`: under ucs2, utf16 or utf32 a plain
    // literal is converted and `time_zone='+03:00'` or
    // `default_storage_engine='MyISAM'` are refused (1298, 1286).
    format!("{name}=_utf8mb4{}", quote(value))
}

/// `value` as a single-quoted SQL string.
fn quote(value: &str) -> String {
    let mut q = String::with_capacity(value.len() + 2);
    q.push('\'');
    for c in value.chars() {
        match c {
            '\'' => q.push_str("''"),
            '\\' => q.push_str("\\\\"),
            _ => q.push(c),
        }
    }
    q.push('\'');
    q
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::lenenc::put_lenenc_bytes;
    use bytes::{BufMut, BytesMut};

    fn sysvar(b: &mut BytesMut, name: &str, value: &str) {
        let mut d = BytesMut::new();
        put_lenenc_bytes(&mut d, name.as_bytes());
        put_lenenc_bytes(&mut d, value.as_bytes());
        b.put_u8(0);
        put_lenenc_bytes(b, &d);
    }

    #[test]
    fn an_equal_backend_needs_nothing() {
        let mut s = TrackedState::for_collation(8);
        s.schema = Some(b"app".to_vec());
        s.vars.insert("sql_mode".into(), "ANSI".into());
        s.vars
            .insert("collation_database".into(), "latin1_bin".into());
        s.last_insert_id = 7;
        s.results_collation = Some("latin1_bin".into());
        assert!(s.sync_plan(&s.clone(), LoginDefaults::default()).is_empty());
        let mut b = s.clone();
        b.last_insert_id = 8;
        assert_eq!(
            s.sync_plan(&b, LoginDefaults::default()).set_sql.as_deref(),
            Some("SET SESSION last_insert_id=7")
        );
    }

    #[test]
    fn collation_maps_to_charset_vars() {
        let s = TrackedState::for_collation(45);
        assert_eq!(s.vars["character_set_client"], "utf8mb4");
        assert_eq!(s.vars["collation_connection"], "utf8mb4_general_ci");
        let l1 = TrackedState::for_collation(8);
        let plan = l1.sync_plan(&s, LoginDefaults::default());
        assert_eq!(
            plan.set_sql.as_deref(),
            Some("SET NAMES 'latin1' COLLATE 'latin1_swedish_ci'")
        );
    }

    #[test]
    fn max_join_size_carries_sql_big_selects() {
        let mut s = TrackedState::default();
        let mut b = BytesMut::new();
        sysvar(&mut b, "sql_big_selects", "ON");
        s.apply_block_with(&b, |_| true);
        let mut b = BytesMut::new();
        sysvar(&mut b, "max_join_size", "8");
        s.apply_block_with(&b, |_| true);
        assert_eq!(s.vars["sql_big_selects"], "OFF");
        let mut b = BytesMut::new();
        sysvar(&mut b, "max_join_size", MAX_JOIN_SIZE_UNLIMITED);
        s.apply_block_with(&b, |_| true);
        assert_eq!(s.vars["sql_big_selects"], "ON");
        // Both in one statement: the reported value stands.
        let mut b = BytesMut::new();
        sysvar(&mut b, "max_join_size", "8");
        sysvar(&mut b, "sql_big_selects", "ON");
        s.apply_block_with(&b, |_| true);
        assert_eq!(s.vars["sql_big_selects"], "ON");
        // Replayed in an order that reproduces it.
        let plan = s.sync_plan(&TrackedState::default(), LoginDefaults::default());
        let sql = plan.set_sql.unwrap_or_default();
        let (j, b) = (sql.find("max_join_size"), sql.find("sql_big_selects"));
        assert!(j.is_some() && j < b, "{sql}");
    }

    #[test]
    fn applies_tracker_block_and_plans_sync() {
        let base = TrackedState::for_collation(45);
        let mut s = base.clone();
        let mut b = BytesMut::new();
        sysvar(&mut b, "sql_mode", "ANSI_QUOTES");
        sysvar(&mut b, "wait_timeout", "100");
        sysvar(&mut b, "character_set_database", "latin1");
        b.put_u8(1);
        put_lenenc_bytes(&mut b, b"\x04test");
        b.put_u8(2);
        put_lenenc_bytes(&mut b, b"\x011");
        let fx = s.apply_block(&b);
        assert!(fx.state_changed);
        assert_eq!(s.schema.as_deref(), Some(&b"test"[..]));
        assert!(!s.vars.contains_key("character_set_database"));
        let plan = s.sync_plan(&base, LoginDefaults::default());
        assert_eq!(plan.init_db.as_deref(), Some(&b"test"[..]));
        assert_eq!(
            plan.set_sql.as_deref(),
            Some("SET SESSION sql_mode=_utf8mb4'ANSI_QUOTES', wait_timeout=100")
        );
        // The reverse direction restores defaults.
        let back = base.sync_plan(&s, LoginDefaults::default());
        assert_eq!(
            back.set_sql.as_deref(),
            Some("SET SESSION sql_mode=DEFAULT, wait_timeout=DEFAULT")
        );
        assert!(s.sync_plan(&s, LoginDefaults::default()).is_empty());
    }

    #[test]
    fn set_names_without_collation_forgets_old_collation() {
        // What MariaDB 10.11 reports for `SET NAMES latin1`.
        let base = TrackedState::for_collation(45);
        let mut s = base.clone();
        let mut b = BytesMut::new();
        sysvar(&mut b, "character_set_connection", "latin1");
        sysvar(&mut b, "character_set_client", "latin1");
        sysvar(&mut b, "character_set_results", "latin1");
        s.apply_block(&b);
        assert!(!s.vars.contains_key("collation_connection"));
        assert_eq!(
            s.sync_plan(&base, LoginDefaults::default())
                .set_sql
                .as_deref(),
            Some(
                "SET SESSION character_set_client=_utf8mb4'latin1', character_set_connection=_utf8mb4'latin1', \
                 character_set_results=_utf8mb4'latin1'"
            )
        );
    }

    #[test]
    fn bare_state_change_is_unexplained() {
        let mut s = TrackedState::default();
        let mut b = BytesMut::new();
        b.put_u8(2);
        put_lenenc_bytes(&mut b, b"\x011");
        assert!(s.apply_block(&b).state_changed);
    }

    #[test]
    fn server_owned_variables_are_never_replayed() {
        // With the binary log on, every commit reports last_gtid.
        let base = TrackedState::for_collation(45);
        let mut s = base.clone();
        let mut b = BytesMut::new();
        sysvar(&mut b, "last_gtid", "0-1-3");
        sysvar(&mut b, "warning_count", "1");
        let fx = s.apply_block(&b);
        assert!(fx.pinning_vars.is_empty());
        assert_eq!(
            fx.last_gtid.as_deref(),
            Some("0-1-3"),
            "kept for read-your-writes"
        );
        assert_eq!(s, base);
        assert!(s.sync_plan(&base, LoginDefaults::default()).is_empty());
    }

    #[test]
    fn unreplayable_variables_are_reported_not_kept() {
        let mut s = TrackedState::for_collation(45);
        let mut b = BytesMut::new();
        sysvar(&mut b, "sql_log_bin", "OFF");
        sysvar(&mut b, "timestamp", "1.000000");
        sysvar(&mut b, "session_track_schema", "OFF");
        let fx = s.apply_block(&b);
        assert_eq!(
            fx.pinning_vars,
            vec![
                ("sql_log_bin".to_string(), "OFF".to_string()),
                ("timestamp".to_string(), "1.000000".to_string())
            ]
        );
        assert!(!fx.tracker_values.is_empty());
        assert!(!s.vars.contains_key("sql_log_bin"));
    }

    #[test]
    fn reset_restores_what_the_login_capabilities_derived() {
        // A backend of an IGNORE_SPACE + INTERACTIVE flavour changed by an
        // earlier client: DEFAULT would give the global values, which lack
        // what the login added.
        let session = TrackedState::for_collation(45);
        let mut backend = session.clone();
        backend.vars.insert("sql_mode".into(), "ANSI".into());
        backend.vars.insert("wait_timeout".into(), "5".into());
        let login = LoginDefaults {
            ignore_space: true,
            interactive: true,
        };
        assert_eq!(
            session.sync_plan(&backend, login).set_sql.as_deref(),
            Some(
                "SET SESSION sql_mode=CONCAT_WS(',', NULLIF(@@global.sql_mode, ''), \
                 'IGNORE_SPACE'), wait_timeout=@@global.interactive_timeout"
            )
        );
        assert_eq!(
            login.after_reset(),
            [
                "sql_mode=CONCAT_WS(',', NULLIF(@@global.sql_mode, ''), 'IGNORE_SPACE')",
                "wait_timeout=@@global.interactive_timeout"
            ]
        );
        assert!(LoginDefaults::default().after_reset().is_empty());
    }

    #[test]
    fn default_converges_after_one_sync() {
        // A backend changed by an earlier client; the session never set it.
        let session = TrackedState::for_collation(45);
        let mut backend = session.clone();
        backend
            .vars
            .insert("wait_timeout".to_string(), "100".to_string());
        let plan = session.sync_plan(&backend, LoginDefaults::default());
        assert_eq!(
            plan.set_sql.as_deref(),
            Some("SET SESSION wait_timeout=DEFAULT")
        );
        // The server echoes the default as a concrete value …
        let mut b = BytesMut::new();
        sysvar(&mut b, "wait_timeout", "28800");
        backend.apply_block(&b);
        // … but after the sync the backend is taken to be the session's.
        backend.adopt(&session);
        assert!(
            session
                .sync_plan(&backend, LoginDefaults::default())
                .is_empty()
        );
    }

    #[test]
    fn exact_collation_survives_set_names() {
        let base = TrackedState::for_collation(45);
        let mut s = TrackedState::for_collation(224);
        assert_eq!(s.vars["collation_connection"], "utf8mb4_unicode_ci");
        // `SET NAMES utf8mb4 COLLATE utf8mb4_unicode_ci`: no collation reported.
        let mut b = BytesMut::new();
        sysvar(&mut b, "character_set_connection", "utf8mb4");
        sysvar(&mut b, "character_set_client", "utf8mb4");
        sysvar(&mut b, "character_set_results", "utf8mb4");
        assert!(s.apply_block(&b).charset_without_collation);
        s.set_names_collation("utf8mb4_unicode_ci");
        let plan = s.sync_plan(&base, LoginDefaults::default());
        assert_eq!(
            plan.set_sql.as_deref(),
            Some("SET NAMES 'utf8mb4' COLLATE 'utf8mb4_unicode_ci'")
        );
        // Other variables follow in the same statement.
        s.vars.insert("sql_mode".into(), "ANSI".into());
        assert_eq!(
            s.sync_plan(&base, LoginDefaults::default())
                .set_sql
                .as_deref(),
            Some(
                "SET NAMES 'utf8mb4' COLLATE 'utf8mb4_unicode_ci', SESSION sql_mode=_utf8mb4'ANSI'"
            )
        );
        // `SET character_set_results = latin1`: its default collation.
        let mut b = BytesMut::new();
        sysvar(&mut b, "character_set_results", "latin1");
        s.apply_block(&b);
        assert_eq!(s.results_collation, None);
        assert_eq!(
            s.sync_plan(&base, LoginDefaults::default())
                .set_sql
                .as_deref(),
            Some(
                "SET SESSION character_set_client=_utf8mb4'utf8mb4', character_set_connection=_utf8mb4'utf8mb4', \
                 character_set_results=_utf8mb4'latin1', collation_connection=_utf8mb4'utf8mb4_unicode_ci', \
                 sql_mode=_utf8mb4'ANSI'"
            )
        );
    }

    /// DBD::MariaDB's connect: `SET NAMES utf8mb4`, then `SET
    /// collation_connection = utf8mb4_unicode_ci`. The result character set
    /// keeps utf8mb4's default collation (result columns carry 45), unlike
    /// a session whose handshake named utf8mb4_unicode_ci (224): the two
    /// report the same variables but are not the same state.
    #[test]
    fn a_collation_set_after_set_names_leaves_the_results_alone() {
        let base = TrackedState::for_collation(8);
        let mut s = TrackedState::for_collation(8);
        let mut b = BytesMut::new();
        sysvar(&mut b, "character_set_connection", "utf8mb4");
        sysvar(&mut b, "character_set_client", "utf8mb4");
        sysvar(&mut b, "character_set_results", "utf8mb4");
        s.apply_block(&b);
        s.set_names_collation("utf8mb4_general_ci");
        let mut b = BytesMut::new();
        sysvar(&mut b, "collation_connection", "utf8mb4_unicode_ci");
        sysvar(&mut b, "character_set_connection", "utf8mb4");
        assert!(!s.apply_block(&b).charset_without_collation);
        assert_eq!(s.results_collation.as_deref(), Some("utf8mb4_general_ci"));
        assert_eq!(
            s.sync_plan(&base, LoginDefaults::default())
                .set_sql
                .as_deref(),
            Some(
                "SET NAMES 'utf8mb4' COLLATE 'utf8mb4_general_ci', \
                 SESSION collation_connection=_utf8mb4'utf8mb4_unicode_ci'"
            )
        );
        let login_224 = TrackedState::for_collation(224);
        assert_eq!(login_224.vars, s.vars, "the same variables");
        assert!(
            !s.sync_plan(&login_224, LoginDefaults::default()).is_empty(),
            "a backend of the 224 login must be brought to this session"
        );
        assert!(!login_224.sync_plan(&s, LoginDefaults::default()).is_empty());
    }

    /// `SET character_set_database = ujis` (suite/jp before LOAD DATA)
    /// follows the session to any backend, after its schema; USE derives
    /// the pair from the schema again.
    #[test]
    fn database_charset_is_replayed_after_the_schema() {
        let base = TrackedState::for_collation(45);
        let mut s = base.clone();
        let mut b = BytesMut::new();
        b.put_u8(1);
        put_lenenc_bytes(&mut b, b"\x04test");
        sysvar(&mut b, "character_set_database", "latin1");
        sysvar(&mut b, "collation_database", "latin1_swedish_ci");
        s.apply_block(&b);
        assert!(!s.vars.contains_key("character_set_database"), "derived");
        let mut b = BytesMut::new();
        sysvar(&mut b, "character_set_database", "ujis");
        s.apply_block(&b);
        assert_eq!(s.vars["character_set_database"], "ujis");
        // A backend on another schema: the schema first, then the override.
        let plan = s.sync_plan(&base, LoginDefaults::default());
        assert_eq!(plan.init_db.as_deref(), Some(&b"test"[..]));
        assert_eq!(
            plan.set_sql.as_deref(),
            Some("SET SESSION character_set_database=_utf8mb4'ujis'")
        );
        // A backend on the same schema with the same override: nothing.
        let mut same = s.clone();
        assert!(s.sync_plan(&same, LoginDefaults::default()).is_empty());
        // The same override on a backend whose schema differs: selecting
        // the schema drops it, so it is set again.
        same.schema = Some(b"other".to_vec());
        let plan = s.sync_plan(&same, LoginDefaults::default());
        assert_eq!(
            plan.set_sql.as_deref(),
            Some("SET SESSION character_set_database=_utf8mb4'ujis'")
        );
        // Setting the collation replaces the character set's override.
        let mut b = BytesMut::new();
        sysvar(&mut b, "collation_database", "sjis_bin");
        s.apply_block(&b);
        assert!(!s.vars.contains_key("character_set_database"));
        assert_eq!(s.vars["collation_database"], "sjis_bin");
        // A session without the override on a backend that has it: its
        // schema is selected again (or the global value, without one).
        let mut plain = s.clone();
        plain.vars.remove("collation_database");
        let plan = plain.sync_plan(&s, LoginDefaults::default());
        assert_eq!(plan.init_db.as_deref(), Some(&b"test"[..]));
        assert_eq!(plan.set_sql, None);
        let (mut plain, mut over) = (plain, s.clone());
        plain.schema = None;
        over.schema = None;
        assert_eq!(
            plain
                .sync_plan(&over, LoginDefaults::default())
                .set_sql
                .as_deref(),
            Some("SET SESSION collation_database=DEFAULT")
        );
        // USE ends the override.
        let mut b = BytesMut::new();
        b.put_u8(1);
        put_lenenc_bytes(&mut b, b"\x05other");
        s.apply_block(&b);
        assert!(!s.vars.contains_key("collation_database"));
    }

    #[test]
    fn quoting() {
        assert_eq!(assign("a", "it's"), "a=_utf8mb4'it''s'");
        assert_eq!(assign("a", "-5"), "a=-5");
        assert_eq!(assign("a", ""), "a=_utf8mb4''");
        assert_eq!(assign("time_zone", "+01:00"), "time_zone=_utf8mb4'+01:00'");
    }
}
