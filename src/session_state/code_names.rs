//! Names that run code a statement's text does not show: views whose
//! definition has effects (GET_LOCK, NEXTVAL, `@v := …`, a stored function,
//! LAST_INSERT_ID(expr), …) or names such an object, tables with
//! triggers, and tables with a column DEFAULT that has one (`NEXTVAL(s)`). A statement that names one may leave session state the server
//! never reports (a named lock, a sequence value, user variables, a role),
//! so the authority treats it as a call of stored code.
//!
//! Owns the pure part: building the set from the catalog rows the pool
//! reads ([`CodeNames::build`]) and matching statement text against it
//! ([`CodeNames::touches`]). Matching over-approximates and never misses a
//! name the set holds:
//! - text is cut into runs of ASCII `[A-Za-z0-9_$]` everywhere (inside
//!   strings, quoted identifiers and comments too: dynamic SQL in a literal
//!   and executable comments count), compared ASCII case-insensitively;
//! - a name is keyed by its longest such run (the bytes around a non-ASCII
//!   character are the same in every ASCII-compatible character set); a
//!   name with no ASCII letter or digit at all matches any text with a byte
//!   from 0x80 up;
//! - an object matches when its name's key is a run of the text and its
//!   schema is the session's schema or its schema's key is a run too (so the
//!   `sys` schema's views called `version` or `session` do not match every
//!   `SELECT @@version`).

use std::collections::HashMap;

use crate::sql::{Kind, LexOptions};

/// Longest run an object key may have; longer names use their prefix
/// (identifiers are at most 64 characters).
const MAX_KEY: usize = 256;

/// A catalog row: a view with its definition (`None` when the server did
/// not show it: treated as having effects).
#[derive(Debug, Clone)]
pub struct ViewRow {
    pub schema: String,
    pub name: String,
    pub definition: Option<String>,
}

/// A table whose writes run code: it has a trigger, or a column whose
/// DEFAULT has an effect (`NEXTVAL(s)`).
#[derive(Debug, Clone)]
pub struct TriggerRow {
    pub schema: String,
    pub table: String,
}

/// How a name is matched: its longest ASCII word run (lowercase), or
/// `None` when it has none.
fn key_of(name: &[u8]) -> Option<Vec<u8>> {
    runs(name)
        .max_by_key(|r| r.len())
        .map(|r| r.iter().take(MAX_KEY).map(u8::to_ascii_lowercase).collect())
}

fn is_word_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'$'
}

/// The maximal runs of ASCII word bytes in `text`.
fn runs(text: &[u8]) -> impl Iterator<Item = &[u8]> {
    text.split(|c| !is_word_byte(*c)).filter(|r| !r.is_empty())
}

/// A schema as matched: by key, or by any non-ASCII byte.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum SchemaKey {
    Key(Vec<u8>),
    NonAscii,
}

/// The code-bearing objects of a server, as matched against text.
#[derive(Debug, Default, Clone)]
pub struct CodeNames {
    /// Name key → the schemas (name as stored, and how matched) holding a
    /// code-bearing object whose name has that key.
    by_key: HashMap<Vec<u8>, Vec<(Vec<u8>, SchemaKey)>>,
    /// Schemas holding a code-bearing object whose name has no ASCII run.
    non_ascii: Vec<(Vec<u8>, SchemaKey)>,
    /// How many objects are in the set.
    objects: usize,
}

impl CodeNames {
    /// The set from a server's views and trigger tables. A view is in it
    /// when its definition is unknown, cannot be read, has any effect, or
    /// names a member (to a fixpoint); a table with triggers always is.
    pub fn build(views: &[ViewRow], triggers: &[TriggerRow]) -> Self {
        let mut set = CodeNames::default();
        for t in triggers {
            set.insert(&t.schema, &t.table);
        }
        let mut pending: Vec<&ViewRow> = Vec::new();
        for v in views {
            if view_has_effects(v) {
                set.insert(&v.schema, &v.name);
            } else {
                pending.push(v);
            }
        }
        // A plain view over a member (a table with triggers, a view with
        // effects) runs that code too: repeat until nothing is added.
        loop {
            let before = pending.len();
            pending.retain(|v| {
                let def = v.definition.as_deref().unwrap_or_default();
                if set.touches(def.as_bytes(), v.schema.as_bytes()) {
                    set.insert(&v.schema, &v.name);
                    false
                } else {
                    true
                }
            });
            if pending.len() == before {
                break;
            }
        }
        set
    }

    fn insert(&mut self, schema: &str, name: &str) {
        let schema_key = match key_of(schema.as_bytes()) {
            Some(k) => SchemaKey::Key(k),
            None => SchemaKey::NonAscii,
        };
        let entry = (schema.as_bytes().to_vec(), schema_key);
        match key_of(name.as_bytes()) {
            Some(k) => self.by_key.entry(k).or_default().push(entry),
            None => self.non_ascii.push(entry),
        }
        self.objects += 1;
    }

    /// No code-bearing object at all: nothing to match.
    pub fn is_empty(&self) -> bool {
        self.objects == 0
    }

    /// How many objects the set holds.
    pub fn len(&self) -> usize {
        self.objects
    }

    /// True when `text`, run with `schema` as the session's schema, may
    /// name a code-bearing object.
    pub fn touches(&self, text: &[u8], schema: &[u8]) -> bool {
        if self.is_empty() {
            return false;
        }
        let non_ascii_text = text.iter().any(|c| *c >= 0x80);
        let mut schemas: Vec<&(Vec<u8>, SchemaKey)> = Vec::new();
        if non_ascii_text {
            schemas.extend(self.non_ascii.iter());
        }
        let mut buf = [0u8; MAX_KEY];
        for r in runs(text) {
            let n = r.len().min(MAX_KEY);
            for (d, s) in buf.iter_mut().zip(r) {
                *d = s.to_ascii_lowercase();
            }
            if let Some(hits) = self.by_key.get(&buf[..n]) {
                schemas.extend(hits.iter());
            }
        }
        schemas.iter().any(|(name, key)| {
            name.eq_ignore_ascii_case(schema)
                || match key {
                    SchemaKey::NonAscii => non_ascii_text,
                    SchemaKey::Key(k) => runs(text).any(|r| r.eq_ignore_ascii_case(k)),
                }
        })
    }
}

/// A view whose definition shows (or may hide) an effect on the session.
fn view_has_effects(v: &ViewRow) -> bool {
    let Some(def) = v.definition.as_deref().filter(|d| !d.trim().is_empty()) else {
        return true;
    };
    let a = crate::sql::analyze(def.as_bytes(), LexOptions::default());
    a.incomplete || a.statements.iter().any(|s| !s.effects.is_empty())
}

/// A column DEFAULT expression (as `information_schema.COLUMNS` shows it)
/// that has an effect on the session, or that cannot be read.
pub fn default_has_effects(default: Option<&str>) -> bool {
    let Some(d) = default else { return false };
    let a = crate::sql::analyze(format!("SELECT {d}").as_bytes(), LexOptions::default());
    a.incomplete || a.statements.len() != 1 || a.statements.iter().any(|s| !s.effects.is_empty())
}

/// Statements that can read or write a table, and so run a view's or a
/// trigger's code, when nothing is known about which names do: every kind
/// but those that never name a table, and SET / DO / SHOW / other verbs
/// only when a subquery may be in them.
pub fn may_name_a_table(kind: Kind, text: &[u8]) -> bool {
    match kind {
        Kind::Begin
        | Kind::Commit
        | Kind::Rollback
        | Kind::Savepoint
        | Kind::ReleaseSavepoint
        | Kind::Use
        | Kind::Empty
        | Kind::Xa
        | Kind::Deallocate
        | Kind::Prepare
        | Kind::UnlockTables
        | Kind::Kill
        | Kind::RoutineDefinition => false,
        Kind::Set | Kind::Do | Kind::Show | Kind::Other | Kind::GetDiagnostics => {
            runs(text).any(|r| {
                [&b"select"[..], b"values", b"table", b"from"]
                    .iter()
                    .any(|w| r.eq_ignore_ascii_case(w))
            })
        }
        _ => true,
    }
}

/// True when `text` may create, change or remove a view or a trigger, or
/// rename a table (a DDL verb with VIEW, TRIGGER or RENAME anywhere in it,
/// strings included): the catalog is stale from before it is sent until
/// it is read again after.
pub fn may_change_code_names(text: &[u8]) -> bool {
    let mut verb = false;
    let mut object = false;
    for r in runs(text) {
        let is = |w: &[u8]| r.eq_ignore_ascii_case(w);
        verb |= is(b"create") || is(b"alter") || is(b"drop") || is(b"rename");
        object |= is(b"view") || is(b"trigger") || is(b"rename");
        if verb && object {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(schema: &str, name: &str, def: &str) -> ViewRow {
        ViewRow {
            schema: schema.into(),
            name: name.into(),
            definition: Some(def.into()),
        }
    }

    fn trig(schema: &str, table: &str) -> TriggerRow {
        TriggerRow {
            schema: schema.into(),
            table: table.into(),
        }
    }

    #[test]
    fn views_with_effects_and_trigger_tables_are_members_plain_views_are_not() {
        let names = CodeNames::build(
            &[
                view("app", "v_lock", "select get_lock('L',0) AS `g`"),
                view("app", "v_seq", "select nextval(`app`.`s`) AS `n`"),
                view("app", "v_var", "select (@v := 1) AS `x`"),
                view("app", "v_fn", "select `app`.`f`() AS `x`"),
                view("app", "v_lii", "select last_insert_id(5) AS `x`"),
                view(
                    "app",
                    "v_plain",
                    "select `app`.`t`.`a` AS `a` from `app`.`t`",
                ),
            ],
            &[trig("app", "audited")],
        );
        for hit in [
            "SELECT * FROM v_lock",
            "select g from `V_LOCK`",
            "SELECT * FROM app.v_seq",
            "select * from v_var",
            "SELECT x FROM v_fn",
            "SELECT x FROM v_lii",
            "INSERT INTO audited VALUES (1)",
            "EXECUTE IMMEDIATE 'UPDATE audited SET a = 1'",
            "/*!40101 DELETE FROM audited */",
        ] {
            assert!(names.touches(hit.as_bytes(), b"app"), "{hit}");
        }
        for miss in [
            "SELECT * FROM v_plain",
            "SELECT * FROM t",
            "SELECT v_lockx FROM t",
            "SELECT 1",
        ] {
            assert!(!names.touches(miss.as_bytes(), b"app"), "{miss}");
        }
        assert_eq!(names.len(), 6);
    }

    #[test]
    fn a_plain_view_over_a_member_is_a_member_to_a_fixpoint() {
        let names = CodeNames::build(
            &[
                view("app", "v3", "select `a` from `app`.`v2`"),
                view("app", "v2", "select `a` from `app`.`v1`"),
                view("app", "v1", "select `a` from `app`.`audited`"),
                view("app", "v0", "select `a` from `app`.`plain`"),
            ],
            &[trig("app", "audited")],
        );
        assert!(names.touches(b"SELECT * FROM v3", b"app"));
        assert!(!names.touches(b"SELECT * FROM v0", b"app"));
    }

    #[test]
    fn an_unreadable_definition_is_treated_as_having_effects() {
        let hidden = ViewRow {
            schema: "app".into(),
            name: "secret".into(),
            definition: None,
        };
        let unterminated = view("app", "broken", "select 'x");
        let names = CodeNames::build(&[hidden, unterminated], &[]);
        assert!(names.touches(b"SELECT * FROM secret", b"app"));
        assert!(names.touches(b"SELECT * FROM broken", b"app"));
    }

    #[test]
    fn another_schema_matches_only_when_named() {
        let names = CodeNames::build(
            &[view("sys", "version", "select `sys`.`f`() AS `v`")],
            &[trig("other", "session")],
        );
        assert!(!names.touches(b"SELECT @@version", b"app"));
        assert!(!names.touches(b"SET SESSION wait_timeout = 5", b"app"));
        assert!(names.touches(b"SELECT * FROM sys.version", b"app"));
        assert!(names.touches(b"SELECT * FROM `SYS`.`version`", b"app"));
        assert!(names.touches(b"SELECT * FROM version", b"sys"));
        assert!(names.touches(b"USE other; INSERT INTO session VALUES (1)", b"app"));
    }

    #[test]
    fn non_ascii_names_match_by_their_ascii_part_or_any_non_ascii_byte() {
        let names = CodeNames::build(
            &[view("app", "café_view", "select get_lock('x',0) AS `g`")],
            &[trig("app", "таблица")],
        );
        // The longest ASCII run of the name, in any ASCII-compatible set.
        assert!(names.touches("SELECT * FROM café_view".as_bytes(), b"app"));
        assert!(names.touches(b"SELECT * FROM caf\xe9_view", b"app"));
        // No ASCII run: any non-ASCII byte.
        assert!(names.touches("INSERT INTO `таблица` VALUES (1)".as_bytes(), b"app"));
        assert!(names.touches(b"INSERT INTO `\xd4\xc1` VALUES (1)", b"app"));
        assert!(!names.touches(b"INSERT INTO t VALUES (1)", b"app"));
    }

    #[test]
    fn column_defaults_with_effects() {
        assert!(default_has_effects(Some("nextval(`test`.`s2`)")));
        assert!(!default_has_effects(Some("current_timestamp()")));
        assert!(!default_has_effects(Some("(1 + 2)")));
        assert!(!default_has_effects(None));
    }

    #[test]
    fn an_empty_set_matches_nothing() {
        let names = CodeNames::build(&[view("app", "v", "select `a` from `t`")], &[]);
        assert!(names.is_empty());
        assert!(!names.touches(b"SELECT * FROM v", b"app"));
    }

    #[test]
    fn statements_that_cannot_name_a_table() {
        assert!(!may_name_a_table(Kind::Begin, b"BEGIN"));
        assert!(!may_name_a_table(Kind::Commit, b"COMMIT"));
        assert!(!may_name_a_table(Kind::Set, b"SET autocommit = 1"));
        assert!(may_name_a_table(Kind::Set, b"SET @a = (SELECT x FROM v)"));
        assert!(may_name_a_table(Kind::Do, b"DO (SELECT 1 FROM v)"));
        assert!(may_name_a_table(Kind::Select, b"SELECT 1"));
        assert!(may_name_a_table(Kind::Insert, b"INSERT INTO t VALUES (1)"));
        assert!(may_name_a_table(Kind::Call, b"CALL p()"));
    }

    #[test]
    fn ddl_that_may_change_the_names() {
        for yes in [
            "CREATE VIEW v AS SELECT 1",
            "create or replace view v as select 1",
            "CREATE DEFINER=`a`@`%` TRIGGER t BEFORE INSERT ON x FOR EACH ROW SET @v = 1",
            "DROP TRIGGER t",
            "ALTER VIEW v AS SELECT 2",
            "RENAME TABLE a TO b",
            "ALTER TABLE a RENAME TO b",
            "EXECUTE IMMEDIATE 'CREATE VIEW v AS SELECT 1'",
        ] {
            assert!(may_change_code_names(yes.as_bytes()), "{yes}");
        }
        for no in [
            "CREATE TEMPORARY TABLE t (a INT)",
            "SELECT view FROM t",
            "INSERT INTO trigger_log VALUES (1)",
            "DROP TABLE t",
        ] {
            assert!(!may_change_code_names(no.as_bytes()), "{no}");
        }
    }
}
