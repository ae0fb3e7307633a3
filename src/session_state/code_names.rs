//! Names that run code a statement's text does not show: views whose
//! definition has effects (GET_LOCK, NEXTVAL, `@v := …`, a stored function,
//! LAST_INSERT_ID(expr), …) or names such an object, tables with
//! triggers, and tables with a column DEFAULT that has one (`NEXTVAL(s)`). A statement that names one may leave session state the server
//! never reports (a named lock, a sequence value, user variables, a role),
//! so the authority treats it as a call of stored code.
//!
//! The same set knows which names' code may run a KILL myplex cannot plan
//! ([`CodeNames::may_kill`]: routines, triggers and views whose code holds
//! the word KILL, builds dynamic SQL at run time or cannot be read).
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
    /// The trigger's body (`None` for a column DEFAULT's row, which can
    /// run no KILL).
    pub body: Option<String>,
}

/// How a name is matched: its longest ASCII word run (lowercase), or
/// `None` when it has none.
fn key_of(name: &[u8]) -> Option<Vec<u8>> {
    runs(name)
        .max_by_key(|r| r.len())
        .map(|r| r.iter().take(MAX_KEY).map(u8::to_ascii_lowercase).collect())
}

/// ASCII word bytes: `[A-Za-z0-9_$]`.
const WORD: [bool; 256] = {
    let mut t = [false; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        t[c] = b.is_ascii_alphanumeric() || b == b'_' || b == b'$';
        c += 1;
    }
    t
};

/// The maximal runs of ASCII word bytes in `text` (on every statement's
/// path: a table lookup per byte, no closure per byte).
fn runs(text: &[u8]) -> Runs<'_> {
    Runs { text, at: 0 }
}

struct Runs<'a> {
    text: &'a [u8],
    at: usize,
}

impl<'a> Iterator for Runs<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let t = self.text;
        let mut i = self.at;
        while i < t.len() && !WORD[usize::from(t[i])] {
            i += 1;
        }
        if i >= t.len() {
            self.at = i;
            return None;
        }
        let start = i;
        while i < t.len() && WORD[usize::from(t[i])] {
            i += 1;
        }
        self.at = i;
        t.get(start..i)
    }
}

/// A run as the server may read it: itself and, when it starts with
/// digits, what follows up to six of them (`/*!10000v*/` and `/*M!100000v*/`
/// are the name `v` to the server, one run `10000v` here).
fn variants(r: &[u8]) -> impl Iterator<Item = &[u8]> {
    let digits = r.iter().take(6).take_while(|c| c.is_ascii_digit()).count();
    std::iter::once(r).chain((1..=digits).filter_map(move |k| r.get(k..).filter(|v| !v.is_empty())))
}

/// FNV-1a: the keys are short identifiers hashed on every statement's
/// path, where SipHash's setup costs more than the key.
#[derive(Default, Clone, Copy)]
struct Fnv(u64);

impl std::hash::Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
}

type FnvMap<K, V> = HashMap<K, V, std::hash::BuildHasherDefault<Fnv>>;

/// Keys (lowercase ASCII runs) with a cheap pre-check: the lengths and
/// first bytes present reject most words of a statement before they are
/// lowercased and hashed.
#[derive(Debug, Clone)]
struct KeySet<V> {
    map: FnvMap<Vec<u8>, V>,
    /// Bit `min(len, 127)` for each key length.
    lens: u128,
    /// Bit `first byte & 0x7f` for each key.
    firsts: u128,
}

impl<V> Default for KeySet<V> {
    fn default() -> Self {
        Self {
            map: FnvMap::default(),
            lens: 0,
            firsts: 0,
        }
    }
}

impl<V: Default> KeySet<V> {
    fn entry(&mut self, key: Vec<u8>) -> &mut V {
        self.lens |= 1u128 << key.len().min(127);
        if let Some(f) = key.first() {
            self.firsts |= 1u128 << (*f & 0x7f);
        }
        self.map.entry(key).or_default()
    }
}

impl<V> KeySet<V> {
    /// The value of run `r` (any case), if it is a key.
    fn get(&self, r: &[u8], buf: &mut [u8; MAX_KEY]) -> Option<&V> {
        let n = r.len().min(MAX_KEY);
        let first = r.first()?.to_ascii_lowercase() & 0x7f;
        if self.lens & (1u128 << n.min(127)) == 0 || self.firsts & (1u128 << first) == 0 {
            return None;
        }
        for (d, s) in buf.iter_mut().zip(r) {
            *d = s.to_ascii_lowercase();
        }
        self.map.get(&buf[..n])
    }
}

/// The code-bearing objects of one schema.
#[derive(Debug, Default, Clone)]
struct SchemaObjects {
    /// Name keys.
    names: KeySet<()>,
    /// An object whose name has no ASCII run (matches any non-ASCII text).
    non_ascii: bool,
    /// Procedures that may change the set when called (DDL or dynamic SQL
    /// in their body, or a body the server did not show).
    procedures: KeySet<()>,
    /// Such a procedure's name has no ASCII run.
    procedures_non_ascii: bool,
    /// Routines, tables and views whose code may run a KILL myplex cannot
    /// plan (see [`CodeNames::may_kill`]).
    killers: KeySet<()>,
    /// Such a name has no ASCII run.
    killers_non_ascii: bool,
    /// Routines, tables and views whose code may read `ROW_COUNT()` or
    /// `FOUND_ROWS()` (see [`CodeNames::reads_counts`]).
    count_readers: KeySet<()>,
    /// Such a name has no ASCII run.
    count_readers_non_ascii: bool,
}

/// Which kind of member a match looks for.
#[derive(Clone, Copy)]
enum Member {
    Objects,
    Procedures,
    Killers,
    CountReaders,
}

impl SchemaObjects {
    fn of(&self, k: Member) -> (&KeySet<()>, bool) {
        match k {
            Member::Objects => (&self.names, self.non_ascii),
            Member::Procedures => (&self.procedures, self.procedures_non_ascii),
            Member::Killers => (&self.killers, self.killers_non_ascii),
            Member::CountReaders => (&self.count_readers, self.count_readers_non_ascii),
        }
    }
}

/// A stored procedure and its body (`None` when the server did not show
/// it): the same shape as a view's row.
pub type ProcRow = ViewRow;

/// A stored body that may run a KILL myplex cannot plan: a KILL statement
/// in it (the word as code, executable comments included), a dynamic text
/// literal holding the word, or, in a procedure (functions and triggers
/// cannot run dynamic SQL), a PREPARE or EXECUTE IMMEDIATE whose text is
/// not one string literal, or such words the lexer cannot place. The body
/// is read under each quoting mode it may have been created with (a
/// backslash may or may not escape a quote; `"…"` may be a string or a
/// name, `ANSI_QUOTES`): any reading that finds one counts. The word in a
/// plain string or comment (`SELECT 'no kill'`) does not.
fn body_may_kill(def: &str, procedure: bool) -> bool {
    let sql = def.as_bytes();
    if crate::sql::scan::words(sql).is_empty() {
        return false;
    }
    let modes = [(false, false), (false, true), (true, false), (true, true)];
    modes
        .into_iter()
        .any(|(ansi_quotes, no_backslash_escapes)| {
            let opts = LexOptions {
                ansi_quotes,
                no_backslash_escapes,
            };
            let toks: Vec<_> = crate::sql::lexer::Lexer::new(sql, opts).collect();
            if toks.iter().any(|t| t.is_word(sql, b"kill")) {
                return true;
            }
            let dyns = crate::sql::dynamic::texts(sql, &toks, opts);
            let literal_kill = |d: &crate::sql::dynamic::DynText| {
                d.literal
                    .as_deref()
                    .is_some_and(|l| crate::sql::scan::words(l).has(crate::sql::scan::Found::KILL))
            };
            if dyns.iter().any(literal_kill) {
                return true;
            }
            if !procedure {
                return false;
            }
            // Every PREPARE (but DEALLOCATE / DROP PREPARE) and EXECUTE
            // IMMEDIATE must be one the dynamic-text scan placed.
            let after = |i: usize, w: &[u8]| i > 0 && toks[i - 1].is_word(sql, w);
            let seen = (0..toks.len())
                .filter(|&i| {
                    (toks[i].is_word(sql, b"prepare")
                        && !after(i, b"deallocate")
                        && !after(i, b"drop"))
                        || (toks[i].is_word(sql, b"immediate") && after(i, b"execute"))
                })
                .count();
            dyns.iter().any(|d| d.literal.is_none()) || seen > dyns.len()
        })
}

/// A procedure body that may change which names run code: DDL, dynamic
/// SQL, a nested CALL, or a body not shown.
fn procedure_may_change(def: Option<&str>) -> bool {
    let Some(def) = def.filter(|d| !d.trim().is_empty()) else {
        return true;
    };
    may_change_code_names(def.as_bytes())
        || runs(def.as_bytes()).any(|r| {
            [&b"prepare"[..], b"execute", b"call", b"immediate"]
                .iter()
                .any(|w| r.eq_ignore_ascii_case(w))
        })
}

/// The code-bearing objects of a server, as matched against text.
#[derive(Debug, Default, Clone)]
pub struct CodeNames {
    /// Per schema (its name ASCII-lowercased).
    schemas: FnvMap<Vec<u8>, SchemaObjects>,
    /// Schema name key → the schemas (lowercased) with that key.
    schema_keys: KeySet<Vec<Vec<u8>>>,
    /// Schemas (lowercased) whose name has no ASCII run.
    non_ascii_schemas: Vec<Vec<u8>>,
    /// How many objects are in the set.
    objects: usize,
    /// How many procedures that may change it.
    procedures: usize,
    /// How many names whose code may run an unplanned KILL.
    killers: usize,
    /// How many names whose code may read the previous statement's counts.
    count_readers: usize,
    /// Routines whose body the server did not show (counted among the
    /// killers: nothing proves they run no KILL).
    hidden_routines: usize,
    /// Which installed set this is (0 until installed), so that an answer
    /// cached for a prepared statement is known to be current.
    version: u64,
}

impl CodeNames {
    /// The set from a server's views and trigger tables. A view is in it
    /// when its definition is unknown, cannot be read, has any effect, or
    /// names a member (to a fixpoint); a table with triggers always is.
    pub fn build(views: &[ViewRow], triggers: &[TriggerRow]) -> Self {
        Self::build_with(views, triggers, &[])
    }

    /// As [`Self::build`], with the procedures whose call may change the
    /// set.
    pub fn build_with(views: &[ViewRow], triggers: &[TriggerRow], procs: &[ProcRow]) -> Self {
        Self::build_full(views, triggers, procs, &[])
    }

    /// As [`Self::build_with`], with the stored functions and package
    /// bodies (`funcs`), for the names whose code may run a KILL.
    pub fn build_full(
        views: &[ViewRow],
        triggers: &[TriggerRow],
        procs: &[ProcRow],
        funcs: &[ProcRow],
    ) -> Self {
        let mut set = CodeNames::default();
        set.add_killers(views, triggers, procs, funcs);
        set.add_count_readers(views, triggers, procs, funcs);
        for p in procs {
            if procedure_may_change(p.definition.as_deref()) {
                set.insert_as(&p.schema, &p.name, Member::Procedures);
            }
        }
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

    fn schema(&mut self, schema: &str) -> &mut SchemaObjects {
        let lower = schema.as_bytes().to_ascii_lowercase();
        if !self.schemas.contains_key(&lower) {
            match key_of(schema.as_bytes()) {
                Some(k) => self.schema_keys.entry(k).push(lower.clone()),
                None => self.non_ascii_schemas.push(lower.clone()),
            }
        }
        self.schemas.entry(lower).or_default()
    }

    fn insert(&mut self, schema: &str, name: &str) {
        self.insert_as(schema, name, Member::Objects);
    }

    fn insert_as(&mut self, schema: &str, name: &str, kind: Member) {
        let o = self.schema(schema);
        let (keys, non_ascii) = match kind {
            Member::Objects => (&mut o.names, &mut o.non_ascii),
            Member::Procedures => (&mut o.procedures, &mut o.procedures_non_ascii),
            Member::Killers => (&mut o.killers, &mut o.killers_non_ascii),
            Member::CountReaders => (&mut o.count_readers, &mut o.count_readers_non_ascii),
        };
        match key_of(name.as_bytes()) {
            Some(k) => *keys.entry(k) = (),
            None => *non_ascii = true,
        }
        match kind {
            Member::Objects => self.objects += 1,
            Member::Procedures => self.procedures += 1,
            Member::Killers => self.killers += 1,
            Member::CountReaders => self.count_readers += 1,
        }
    }

    /// The names whose code may run a KILL that myplex cannot plan (a
    /// server thread id reaching the server): a routine whose body holds
    /// the word KILL, a procedure running dynamic SQL from anything but a
    /// string literal (its text exists only at run time), a body the
    /// server did not show; a table whose trigger holds KILL; and, to a
    /// fixpoint, a routine, trigger or view naming any of these.
    fn add_killers(
        &mut self,
        views: &[ViewRow],
        triggers: &[TriggerRow],
        procs: &[ProcRow],
        funcs: &[ProcRow],
    ) {
        // (schema, name, code) still to decide.
        let mut pending: Vec<(&str, &str, &str)> = Vec::new();
        let routines = procs
            .iter()
            .map(|p| (p, true))
            .chain(funcs.iter().map(|f| (f, false)));
        for (r, procedure) in routines {
            match r.definition.as_deref().filter(|d| !d.trim().is_empty()) {
                None => {
                    self.hidden_routines += 1;
                    self.insert_as(&r.schema, &r.name, Member::Killers);
                }
                Some(def) if body_may_kill(def, procedure) => {
                    self.insert_as(&r.schema, &r.name, Member::Killers);
                }
                Some(def) => pending.push((&r.schema, &r.name, def)),
            }
        }
        for t in triggers {
            let Some(body) = t.body.as_deref() else {
                continue;
            };
            if body_may_kill(body, false) {
                self.insert_as(&t.schema, &t.table, Member::Killers);
            } else {
                pending.push((&t.schema, &t.table, body));
            }
        }
        for v in views {
            // An unreadable view definition is already a code-bearing
            // object; it runs a KILL only through a function it names.
            if let Some(def) = v.definition.as_deref() {
                pending.push((&v.schema, &v.name, def));
            }
        }
        self.add_to_fixpoint(pending, Member::Killers);
    }

    /// Adds each pending (schema, name, code) whose code names a member of
    /// `kind`, again and again until a pass adds nothing.
    fn add_to_fixpoint(&mut self, mut pending: Vec<(&str, &str, &str)>, kind: Member) {
        loop {
            let before = pending.len();
            pending.retain(|(schema, name, code)| {
                if self.names_member(code.as_bytes(), schema.as_bytes(), kind) {
                    self.insert_as(schema, name, kind);
                    false
                } else {
                    true
                }
            });
            if pending.len() == before {
                break;
            }
        }
    }

    /// Whether `text`, run in `schema`, names a member of `kind` (none
    /// at all: answered without reading the text).
    fn names_member(&self, text: &[u8], schema: &[u8], kind: Member) -> bool {
        self.count(kind) > 0 && self.find(text, schema, kind)
    }

    fn count(&self, kind: Member) -> usize {
        match kind {
            Member::Objects => self.objects,
            Member::Procedures => self.procedures,
            Member::Killers => self.killers,
            Member::CountReaders => self.count_readers,
        }
    }

    /// The names whose code may read the counts the previous statement of
    /// the connection left (`ROW_COUNT()`, `FOUND_ROWS()`: under pooling,
    /// possibly another client's): a view, routine or trigger whose code
    /// holds either name (as a word anywhere, strings included: fail
    /// closed), a routine whose body the server did not show, and, to a
    /// fixpoint, a routine, trigger or view naming any of these.
    fn add_count_readers(
        &mut self,
        views: &[ViewRow],
        triggers: &[TriggerRow],
        procs: &[ProcRow],
        funcs: &[ProcRow],
    ) {
        let mut pending: Vec<(&str, &str, &str)> = Vec::new();
        let routines = procs.iter().chain(funcs);
        for r in routines {
            match r.definition.as_deref().filter(|d| !d.trim().is_empty()) {
                None => self.insert_as(&r.schema, &r.name, Member::CountReaders),
                Some(def) if names_counts(def) => {
                    self.insert_as(&r.schema, &r.name, Member::CountReaders)
                }
                Some(def) => pending.push((&r.schema, &r.name, def)),
            }
        }
        for t in triggers {
            match t.body.as_deref() {
                Some(body) if names_counts(body) => {
                    self.insert_as(&t.schema, &t.table, Member::CountReaders)
                }
                Some(body) => pending.push((&t.schema, &t.table, body)),
                None => {}
            }
        }
        for v in views {
            match v.definition.as_deref().filter(|d| !d.trim().is_empty()) {
                None => self.insert_as(&v.schema, &v.name, Member::CountReaders),
                Some(def) if names_counts(def) => {
                    self.insert_as(&v.schema, &v.name, Member::CountReaders)
                }
                Some(def) => pending.push((&v.schema, &v.name, def)),
            }
        }
        self.add_to_fixpoint(pending, Member::CountReaders);
    }

    /// True when `text`, run with `schema` as the session's schema, may run
    /// code (a view, a function, a table's trigger, a CALLed procedure)
    /// that reads `ROW_COUNT()` or `FOUND_ROWS()`: the counts the
    /// connection's previous statement left, which the text does not show.
    pub fn reads_counts(&self, text: &[u8], schema: &[u8]) -> bool {
        self.names_member(text, schema, Member::CountReaders)
    }

    /// True when `text`, run with `schema` as the session's schema, may
    /// run stored code (a CALLed procedure, a function, a table's trigger,
    /// a view) that may run a KILL myplex cannot plan: with server thread
    /// ids, which may name other clients' pooled backends.
    pub fn may_kill(&self, text: &[u8], schema: &[u8]) -> bool {
        self.names_member(text, schema, Member::Killers)
    }

    /// True when `text`, run in `schema`, may reach a name whose code may
    /// run an unplanned KILL although the matcher cannot read its names
    /// (a character set whose trail bytes look like ASCII): `schema` has
    /// one, or the text may name another schema and one has any.
    pub fn may_reach_killers(&self, text: &[u8], schema: &[u8]) -> bool {
        if self.killers == 0 {
            return false;
        }
        let here = self
            .schema_objects(schema)
            .is_some_and(|o| !o.killers.map.is_empty() || o.killers_non_ascii);
        here || text.iter().any(|c| *c == b'.' || *c == b';')
    }

    /// How many routines' bodies the server did not show to the reading
    /// (each counted as one that may run a KILL).
    pub fn hidden_routines(&self) -> usize {
        self.hidden_routines
    }

    /// True when `text` (a CALL), run with `schema` as the session's
    /// schema, may call a procedure that changes the set.
    pub fn calls_ddl(&self, text: &[u8], schema: &[u8]) -> bool {
        self.names_member(text, schema, Member::Procedures)
    }

    /// No code-bearing object at all: nothing to match.
    pub fn is_empty(&self) -> bool {
        self.objects == 0
    }

    /// How many objects the set holds.
    pub fn len(&self) -> usize {
        self.objects
    }

    /// Which installed set this is (see [`Self::with_version`]).
    pub fn version(&self) -> u64 {
        self.version
    }

    /// The set as installed the `version`-th time (from 1).
    pub fn with_version(mut self, version: u64) -> Self {
        self.version = version;
        self
    }

    /// True when `text`, run with `schema` as the session's schema, may
    /// name a code-bearing object: one of the session's schema named in
    /// the text, or one of a schema the text names.
    pub fn touches(&self, text: &[u8], schema: &[u8]) -> bool {
        !self.is_empty() && self.find(text, schema, Member::Objects)
    }

    /// The objects of `schema` (any letter case), looked up with the name
    /// lowercased on the stack, no allocation (a schema name is at most 64
    /// characters, 256 bytes).
    fn schema_objects(&self, schema: &[u8]) -> Option<&SchemaObjects> {
        let mut lower = [0u8; MAX_KEY];
        let n = schema.len().min(MAX_KEY);
        for (d, c) in lower.iter_mut().zip(schema) {
            *d = c.to_ascii_lowercase();
        }
        self.schemas.get(&lower[..n])
    }

    fn find(&self, text: &[u8], schema: &[u8], kind: Member) -> bool {
        let mut buf = [0u8; MAX_KEY];
        let current = self.schema_objects(schema).map(|c| c.of(kind));
        // Another schema's object is named qualified (`s.v`, `s` . `v`) or
        // after a USE in the same text: a single statement without a dot
        // can only name the session's schema's objects.
        if current.is_none() && !text.iter().any(|c| *c == b'.' || *c == b';') {
            return false;
        }
        let non_ascii_text = text.iter().any(|c| *c >= 0x80);
        if non_ascii_text && current.is_some_and(|(_, n)| n) {
            return true;
        }
        // One pass: the session's schema's names, and which other schemas
        // the text names.
        let mut named: Vec<&Vec<u8>> = Vec::new();
        for run in runs(text) {
            for r in variants(run) {
                if current.is_some_and(|(c, _)| c.get(r, &mut buf).is_some()) {
                    return true;
                }
                if let Some(s) = self.schema_keys.get(r, &mut buf) {
                    named.extend(s);
                }
            }
        }
        if non_ascii_text {
            named.extend(&self.non_ascii_schemas);
        }
        named.into_iter().any(|s| {
            self.schemas.get(s).is_some_and(|o| {
                let (keys, non_ascii) = o.of(kind);
                (non_ascii_text && non_ascii)
                    || runs(text)
                        .flat_map(variants)
                        .any(|r| keys.get(r, &mut buf).is_some())
            })
        })
    }
}

/// Code that holds `ROW_COUNT` or `FOUND_ROWS` anywhere (any case; in a
/// string or comment too, or as part of a longer name: fail closed).
fn names_counts(code: &str) -> bool {
    let b = code.as_bytes();
    [&b"row_count"[..], &b"found_rows"[..]]
        .iter()
        .any(|w| b.windows(w.len()).any(|x| x.eq_ignore_ascii_case(w)))
}

/// A view whose definition shows (or may hide) an effect on the session.
fn view_has_effects(v: &ViewRow) -> bool {
    let Some(def) = v.definition.as_deref().filter(|d| !d.trim().is_empty()) else {
        return true;
    };
    let a = crate::sql::analyze(def.as_bytes(), LexOptions::default());
    // A view over the server's own state (its threads, named locks,
    // version) answers otherwise on each server: counted as code, so that
    // a read through it is never sent to a replica.
    a.incomplete
        || a.statements.iter().any(|s| !s.effects.is_empty())
        || crate::pool::routing::view_reads_server_state(def.as_bytes(), LexOptions::default())
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
        k if k.runs_nothing() => false,
        Kind::Xa | Kind::Prepare | Kind::UnlockTables | Kind::Kill | Kind::RoutineDefinition => {
            false
        }
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

/// Whether a statement may run stored code when nothing is known about
/// which names do (for the KILL gate, while no catalog can be trusted).
/// Read coarsely, failing closed: any parenthesis may be a function call,
/// and the letters FROM, TABLE, VALUES, SELECT, FOR, CALL or EXECUTE
/// anywhere in a SET, SELECT or DO (words run together with a number or a
/// version comment's digits included) may name a table, a view or a
/// procedure; statements that end or begin transactions, USE and the like
/// run none, SHOW only through a parenthesis, every other kind may.
pub fn may_run_unknown_code(kind: Kind, text: &[u8]) -> bool {
    let paren = text.contains(&b'(');
    let has = |w: &[u8]| text.windows(w.len()).any(|x| x.eq_ignore_ascii_case(w));
    match kind {
        k if k.runs_nothing() => false,
        Kind::UnlockTables | Kind::Xa => false,
        Kind::Show => paren,
        Kind::Select | Kind::Set | Kind::Do => {
            paren
                || [
                    &b"from"[..],
                    b"table",
                    b"values",
                    b"for",
                    b"call",
                    b"execute",
                ]
                .iter()
                .any(|w| has(w))
                || (kind != Kind::Select && has(b"select"))
        }
        _ => true,
    }
}

/// One statement (no `;` anywhere) that starts, after whitespace, with a
/// verb that never runs DDL (stored functions and triggers cannot either):
/// the common statement is dismissed without a scan.
fn plainly_not_ddl(text: &[u8]) -> bool {
    let start = text
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .unwrap_or(text.len());
    let Some(first) = runs(&text[start..]).next() else {
        return false;
    };
    // The first word must start the text (no comment or parenthesis first).
    if !text[start..].starts_with(first) || text.contains(&b';') {
        return false;
    }
    // Not SET (`SET STATEMENT … FOR CREATE VIEW …`) nor BEGIN (a compound
    // statement's body).
    const PLAIN: [&[u8]; 5] = [b"select", b"insert", b"update", b"delete", b"replace"];
    PLAIN.iter().any(|w| first.eq_ignore_ascii_case(w))
}

/// What a text about to be sent may do to the set.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DdlScan {
    /// DDL that may change it (see [`may_change_code_names`]).
    pub ddl: bool,
    /// A CALL: changes it when the procedure may (see
    /// [`CodeNames::calls_ddl`]).
    pub call: bool,
    /// An EXECUTE of a text-prepared statement: changes it when the
    /// session prepared one that may.
    pub execute: bool,
    /// CREATE or ALTER with PROCEDURE, FUNCTION or PACKAGE: a new body
    /// that may KILL (see [`CodeNames::may_kill`]), which a CALL must not
    /// run before the catalog has read it, where that is checked.
    pub routine: bool,
    /// CREATE or ALTER with EVENT: an event's body runs later, where no
    /// statement through the proxy marks the set stale.
    pub event: bool,
    /// PREPARE or IMMEDIATE: dynamic SQL, whose text may change the set.
    pub dynamic: bool,
    /// Like `ddl`, without counting RENAME (an event's own rename).
    event_ddl: bool,
}

impl DdlScan {
    /// Whether the text's words name an event (CREATE or ALTER … EVENT)
    /// and a change of the set its body may make when it runs: DDL that
    /// changes it, a routine definition, dynamic SQL, or a CALL (of any
    /// procedure: one that runs no DDL now may be replaced by one that does
    /// before the event runs).
    pub fn event_may_change(&self) -> bool {
        self.event && (self.event_ddl || self.routine || self.execute || self.dynamic || self.call)
    }
}

impl DdlScan {
    /// Scans `text`.
    pub fn of(text: &[u8]) -> Self {
        if plainly_not_ddl(text) {
            return Self::default();
        }
        let mut scan = DdlScan {
            ddl: may_change_code_names(text),
            ..Self::default()
        };
        let mut creates = false;
        let mut routine = false;
        let mut event = false;
        for r in runs(text).flat_map(variants) {
            let is = |w: &[u8]| r.eq_ignore_ascii_case(w);
            scan.call |= is(b"call");
            scan.execute |= is(b"execute");
            creates |= is(b"create") || is(b"alter");
            routine |= is(b"procedure") || is(b"function") || is(b"package");
            event |= is(b"event");
            scan.dynamic |= is(b"prepare") || is(b"immediate");
        }
        scan.routine = creates && routine;
        scan.event = creates && event;
        scan.event_ddl = scan.event && changes_code_names(text, false);
        scan
    }
}

/// True when `text` may create, change or remove a view or a trigger,
/// rename a table (a DDL verb with VIEW, TRIGGER or RENAME anywhere in it,
/// strings included), or give a table a sequence default: the catalog is
/// stale from before it is sent until it is read again after.
pub fn may_change_code_names(text: &[u8]) -> bool {
    changes_code_names(text, true)
}

/// [`may_change_code_names`], with `RENAME` counting as a verb and an
/// object or not (`ALTER EVENT e RENAME TO f` renames no table).
fn changes_code_names(text: &[u8], rename_counts: bool) -> bool {
    if plainly_not_ddl(text) {
        return false;
    }
    let mut verb = false;
    let mut object = false;
    // CREATE / ALTER TABLE may give a column a DEFAULT that draws a
    // sequence value (`LIKE` copies one); a temporary table pins its
    // session, so only tables beyond the temporary ones count.
    let mut creates = false;
    let mut tables = 0usize;
    let mut temporaries = 0usize;
    for r in runs(text).flat_map(variants) {
        let is = |w: &[u8]| r.eq_ignore_ascii_case(w);
        match r.len() {
            4 => {
                verb |= is(b"drop");
                object |= is(b"view");
            }
            5 => {
                let alter = is(b"alter");
                verb |= alter;
                creates |= alter;
                tables += usize::from(is(b"table"));
            }
            6 => {
                let create = is(b"create");
                verb |= create;
                creates |= create;
                let rename = rename_counts && is(b"rename");
                verb |= rename;
                object |= rename;
            }
            7 => object |= is(b"trigger"),
            9 => {
                temporaries += usize::from(is(b"temporary"));
                // EXECUTE IMMEDIATE of an expression: the text is not seen.
                if is(b"immediate") {
                    return true;
                }
            }
            _ => continue,
        }
        if verb && object {
            return true;
        }
    }
    // Only when a sequence default may come with it (NEXTVAL, NEXT VALUE
    // FOR, or LIKE, which copies the source's defaults).
    creates
        && tables > temporaries
        && runs(text).flat_map(variants).any(|r| {
            [&b"nextval"[..], b"next", b"like", b"setval"]
                .iter()
                .any(|w| r.eq_ignore_ascii_case(w))
        })
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
            body: Some("SET @x = NEW.id".into()),
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
        for hit in [
            "SELECT * FROM /*!10000v_lock*/",
            "SELECT * FROM /*M!100000v_lock*/",
            "INSERT INTO /*!10000audited*/ VALUES (1)",
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
    fn procedures_that_may_change_the_set_are_known_by_name() {
        let proc = |name: &str, def: Option<&str>| ProcRow {
            schema: "app".into(),
            name: name.into(),
            definition: def.map(str::to_string),
        };
        let names = CodeNames::build_with(
            &[],
            &[],
            &[
                proc("mkv", Some("CREATE VIEW v AS SELECT 1")),
                proc("dyn", Some("BEGIN PREPARE s FROM @q; EXECUTE s; END")),
                proc("nested", Some("CALL other()")),
                proc("hidden", None),
                proc("plain", Some("BEGIN SELECT 1; UPDATE t SET a = 1; END")),
            ],
        );
        for hit in [
            "CALL mkv()",
            "call DYN()",
            "CALL app.nested",
            "CALL hidden()",
        ] {
            assert!(names.calls_ddl(hit.as_bytes(), b"app"), "{hit}");
        }
        assert!(!names.calls_ddl(b"CALL plain()", b"app"));
        assert!(!names.calls_ddl(b"CALL mkv()", b"other"));
        assert!(names.calls_ddl(b"CALL app.mkv()", b"other"));
        // Procedures are not objects a statement's text runs.
        assert!(!names.touches(b"SELECT * FROM mkv", b"app"));
    }

    #[test]
    fn code_that_may_read_the_previous_statements_counts_is_known_by_name() {
        let row = |name: &str, def: Option<&str>| ProcRow {
            schema: "app".into(),
            name: name.into(),
            definition: def.map(str::to_string),
        };
        let procs = [
            row("p_rc", Some("BEGIN SELECT ROW_COUNT(); END")),
            row("p_plain", Some("BEGIN SELECT 1; END")),
            row("p_hidden", None),
        ];
        let funcs = [
            row("f_fr", Some("RETURN found_rows()")),
            row("f_calls", Some("RETURN f_fr() + 1")),
            row("f_pure", Some("RETURN 1")),
        ];
        let triggers = [
            TriggerRow {
                schema: "app".into(),
                table: "t_rc".into(),
                body: Some("SET @n = ROW_COUNT()".into()),
            },
            trig("app", "t_plain"),
        ];
        let views = [
            view("app", "v_counts", "select row_count() AS `rc`"),
            view("app", "v_over", "select `x` from `app`.`v_counts`"),
            view("app", "v_fn", "select `app`.`f_calls`() AS `x`"),
            view("app", "v_plain", "select 1 AS `x`"),
        ];
        let set = CodeNames::build_full(&views, &triggers, &procs, &funcs);
        let reads = |q: &str| set.reads_counts(q.as_bytes(), b"app");
        for q in [
            "SELECT rc FROM v_counts",
            "SELECT * FROM V_OVER",
            "SELECT x FROM v_fn",
            "SELECT f_fr()",
            "DO f_calls()",
            "CALL p_rc()",
            "CALL p_hidden()",
            "INSERT INTO t_rc VALUES (1)",
        ] {
            assert!(reads(q), "{q}");
        }
        for q in [
            "SELECT x FROM v_plain",
            "SELECT f_pure()",
            "CALL p_plain()",
            "INSERT INTO t_plain VALUES (1)",
            "SELECT 1",
        ] {
            assert!(!reads(q), "{q}");
        }
        // Another schema's reader is named qualified.
        assert!(set.reads_counts(b"SELECT * FROM app.v_counts", b"other"));
        assert!(!set.reads_counts(b"SELECT * FROM v_counts", b"other"));
        let none = CodeNames::build_full(&[view("app", "v", "select 1")], &[], &[], &[]);
        assert!(!none.reads_counts(b"SELECT * FROM v", b"app"));
    }

    #[test]
    fn code_that_may_run_an_unplanned_kill_is_known_by_name() {
        let row = |name: &str, def: Option<&str>| ProcRow {
            schema: "app".into(),
            name: name.into(),
            definition: def.map(str::to_string),
        };
        let procs = [
            row(
                "built",
                Some("BEGIN SET @s = CONCAT('KI', 'LL ', n); PREPARE s FROM @s; EXECUTE s; END"),
            ),
            row("imm", Some("EXECUTE IMMEDIATE v")),
            row("literal_kill", Some("KILL QUERY 5")),
            row("hidden", None),
            row("calls_built", Some("BEGIN CALL built(1); END")),
            row(
                "literal_dyn",
                Some(
                    "BEGIN PREPARE s FROM 'SELECT 1'; EXECUTE s; DEALLOCATE PREPARE s; EXECUTE IMMEDIATE 'DO 1'; END",
                ),
            ),
            row("plain", Some("BEGIN SELECT 'no kill here'; END -- kill")),
            row("literal_kill_text", Some("PREPARE s FROM 'KILL 5'")),
            row("escaped", Some("SELECT 'a\\' KILL 5 -- '")),
            row("ansi", Some("BEGIN PREPARE s FROM \"q\"; EXECUTE s; END")),
            row("uses_killer_fn", Some("SELECT app.kf(1)")),
        ];
        let funcs = [
            row("kf", Some("BEGIN KILL tid; RETURN 1; END")),
            row("calls_kf", Some("RETURN kf(2) + 1")),
            row("pure", Some("RETURN 1")),
        ];
        let triggers = [
            TriggerRow {
                schema: "app".into(),
                table: "t_kill".into(),
                body: Some("BEGIN KILL NEW.id; END".into()),
            },
            TriggerRow {
                schema: "app".into(),
                table: "t_fn".into(),
                body: Some("SET @x = calls_kf(NEW.id)".into()),
            },
            trig("app", "t_plain"),
        ];
        let views = [
            view("app", "v_kill", "select `app`.`kf`(1) AS `x`"),
            view("app", "v_plain", "select 1 AS `x`"),
        ];
        let names = CodeNames::build_full(&views, &triggers, &procs, &funcs);
        for hit in [
            "CALL built(5)",
            "call IMM('x')",
            "CALL literal_kill()",
            "CALL literal_kill_text()",
            "CALL escaped()",
            "CALL ansi()",
            "CALL hidden()",
            "CALL calls_built()",
            "CALL uses_killer_fn()",
            "SELECT kf(5)",
            "SELECT calls_kf(5)",
            "INSERT INTO t_kill VALUES (5)",
            "INSERT INTO t_fn VALUES (5)",
            "SELECT * FROM v_kill",
            "SELECT 1; CALL other.x(); CALL app.built(1)",
        ] {
            assert!(names.may_kill(hit.as_bytes(), b"app"), "{hit}");
        }
        for miss in [
            "CALL literal_dyn()",
            "CALL plain()",
            "SELECT pure()",
            "INSERT INTO t_plain VALUES (1)",
            "SELECT * FROM v_plain",
            "CALL built(5)",
        ] {
            let schema: &[u8] = if miss == "CALL built(5)" {
                b"other"
            } else {
                b"app"
            };
            assert!(!names.may_kill(miss.as_bytes(), schema), "{miss}");
        }
        assert_eq!(names.hidden_routines(), 1);
        // Nothing that may kill: nothing matches, at no cost.
        let clean = CodeNames::build_full(&views[1..], &triggers[2..], &procs[5..7], &funcs[2..]);
        assert!(!clean.may_kill(b"CALL plain()", b"app"));
        assert!(!clean.may_kill(b"CALL literal_dyn()", b"app"));
        assert_eq!(clean.killers, 0);
    }

    #[test]
    fn what_a_text_may_do_to_the_set_before_it_is_sent() {
        assert_eq!(DdlScan::of(b"SELECT * FROM t"), DdlScan::default());
        assert!(DdlScan::of(b"CALL p()").call);
        assert!(DdlScan::of(b"CREATE PROCEDURE p() SELECT 1").routine);
        assert!(DdlScan::of(b"create or replace function f() returns int return 1").routine);
        assert!(!DdlScan::of(b"DROP PROCEDURE p").routine);
        assert!(!DdlScan::of(b"CREATE TABLE function_log (a INT)").routine);
        assert!(DdlScan::of(b"EXECUTE s").execute);
        assert!(DdlScan::of(b"EXECUTE IMMEDIATE @q").ddl);
        assert!(DdlScan::of(b"SELECT 1; CALL p()").call);
        assert!(
            !DdlScan::of(b"SELECT call FROM t").call,
            "one SELECT calls nothing"
        );
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
            "SET STATEMENT max_statement_time = 1 FOR CREATE VIEW v AS SELECT 1",
            "SELECT 1; CREATE VIEW v AS SELECT 1",
            "select 1;create trigger t before insert on x for each row set @a = 1",
            "/*!40101 CREATE VIEW v AS SELECT 1 */",
            "CREATE /*!10000VIEW*/ v AS SELECT 1",
            "CREATE TABLE t2 LIKE t1",
            "CREATE TABLE t (id INT DEFAULT NEXTVAL(s))",
            "ALTER TABLE t MODIFY id INT DEFAULT NEXTVAL(s)",
            "CREATE TEMPORARY TABLE x (a INT); CREATE TABLE y LIKE t",
            "  (SELECT 1); DROP VIEW v",
        ] {
            assert!(may_change_code_names(yes.as_bytes()), "{yes}");
        }
        for no in [
            "CREATE TEMPORARY TABLE t (a INT)",
            "CREATE TEMPORARY TABLE t LIKE u",
            "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))",
            "ALTER TABLE t ADD COLUMN w INT",
            "SELECT view FROM t",
            "INSERT INTO trigger_log VALUES (1)",
            "DROP TABLE t",
            "SELECT 'CREATE VIEW' FROM t",
            "  insert into t values ('drop view')",
            "SELECT function FROM procedures",
            "CREATE PROCEDURE p() SELECT 1",
        ] {
            assert!(!may_change_code_names(no.as_bytes()), "{no}");
        }
    }

    #[test]
    fn what_may_run_code_when_nothing_is_known() {
        let runs = |sql: &str| {
            let a = crate::sql::analyze(sql.as_bytes(), LexOptions::default());
            a.incomplete
                || a.statements
                    .iter()
                    .any(|s| may_run_unknown_code(s.kind, &sql.as_bytes()[s.span.clone()]))
        };
        for none in [
            "SELECT 1",
            "SELECT @x",
            "SELECT @@version_comment LIMIT 1",
            "SET NAMES utf8mb4",
            "SET autocommit = 0",
            "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
            "BEGIN",
            "COMMIT",
            "USE test",
            "SHOW VARIABLES LIKE 'x'",
            "SHOW TABLES",
        ] {
            assert!(!runs(none), "{none}");
        }
        for some in [
            "SELECT f()",
            "SELECT DATABASE()",
            "SELECT x FROM v",
            "SELECT x /*!50000FROM v*/",
            "SELECT x,1e0FROM v",
            "SET STATEMENT max_statement_time = 0 FOR CALL p",
            "SET STATEMENT max_statement_time = 0 FOR UPDATE t SET c = 1",
            "SET @x = (SELECT 1)",
            "ANALYZE UPDATE t SET c = 1",
            "INSERT INTO t VALUES (1)",
            "CALL p",
            "EXECUTE s",
            "DO f(1)",
            "SHOW STATUS WHERE f(1)",
            "HANDLER t READ FIRST",
        ] {
            assert!(runs(some), "{some}");
        }
    }
}
