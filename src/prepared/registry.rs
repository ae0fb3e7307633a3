//! The prepared-statement registry: one entry per (credential pool, schema,
//! session state, SQL) holding the server's prepare response, shared by
//! every client that prepares the same text in the same state (the server
//! fixes a statement's meaning when it prepares it: `sql_mode`, character
//! sets and the like decide how the text was read, so a statement prepared
//! under other settings is not the same statement). Bounded by the configured capacity and by
//! [`MAX_BYTES`]: least recently used entries leave the map first, whether
//! or not a client holds them (a client keeps its own `Arc`, so its
//! statements go on working; a later prepare of the same text makes a new
//! entry). Eviction is O(1) amortised under the registry's mutex: uses are
//! stamped into a queue (a generation queue — an entry's stale stamps are
//! skipped when they reach the front, and the queue is compacted when
//! stale stamps outnumber live entries), never a scan of the map.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Identity of a statement across backends.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct StmtKey {
    /// Credential pool (privileges differ between backend users).
    pub pool: usize,
    /// Schema the statement was prepared in (name resolution depends on it).
    pub schema: Option<Vec<u8>>,
    /// The session state it was prepared in (how the server read it).
    pub state: PrepareState,
    /// Statement text.
    pub sql: Vec<u8>,
}

/// The session state a statement was prepared in, beyond its schema: every
/// replayable session variable set away from a fresh connection's value
/// (fail closed: not only those known to change how a text is read, such as
/// `sql_mode`, `character_set_client`, `collation_connection` or
/// `system_versioning_asof`) and the result character set's collation (the
/// prepare response's column definitions are in it). A statement is shared
/// only between sessions in the same state, and prepared again on another
/// backend in this state (see `Session::prepare_entry`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct PrepareState {
    /// The session's replayable variables (`TrackedState::vars`).
    pub vars: std::collections::BTreeMap<String, String>,
    /// `TrackedState::results_collation`.
    pub results_collation: Option<String>,
    /// Set (to the session's id) while the session holds state that cannot
    /// be replayed (a variable the proxy cannot set again, a state change it
    /// could not read): such a statement is never shared with another
    /// session.
    pub private: Option<u64>,
}

impl PrepareState {
    /// The state of `session`; `private` when it holds state that cannot be
    /// replayed.
    pub fn of(session: &crate::session_state::TrackedState, private: Option<u64>) -> Self {
        Self {
            vars: session.vars.clone(),
            results_collation: session.results_collation.clone(),
            private,
        }
    }

    /// `current` with this state's variables and result collation (and
    /// `schema`, when one is given): what a backend must be brought to for
    /// the statement to be prepared as it first was.
    pub fn applied_to(
        &self,
        current: &crate::session_state::TrackedState,
        schema: Option<&Vec<u8>>,
    ) -> crate::session_state::TrackedState {
        let mut at = current.clone();
        at.vars.clone_from(&self.vars);
        at.results_collation.clone_from(&self.results_collation);
        if let Some(s) = schema {
            at.schema = Some(s.clone());
        }
        at
    }

    fn bytes(&self) -> usize {
        self.vars
            .iter()
            .map(|(k, v)| k.len() + v.len() + 48)
            .sum::<usize>()
            + self.results_collation.as_ref().map_or(0, String::len)
    }
}

/// A registered statement.
#[derive(Debug)]
pub struct StmtEntry {
    /// Process-unique id; backend connections map it to their own ids.
    pub id: u64,
    /// What it is.
    pub key: StmtKey,
    /// Parameter count.
    pub num_params: u16,
    /// Result column count.
    pub num_columns: u16,
    /// The prepare response as the server sent it (payloads, in order:
    /// prepare-OK, parameter definitions, column definitions).
    pub response: Vec<Vec<u8>>,
    /// What the text does, as the session-state authority reads it: lexed
    /// once, at the first EXECUTE, with that session's lex options.
    analysis: std::sync::OnceLock<(crate::sql::LexOptions, crate::sql::Analysis)>,
    /// The text's statement digest: computed once, at the first EXECUTE
    /// counted, with that session's lex options.
    digest: std::sync::OnceLock<(crate::sql::LexOptions, crate::sql::digest::Digest)>,
    /// What the text may do to which names run code: computed once.
    changes_code_names: std::sync::OnceLock<crate::session_state::code_names::DdlScan>,
    /// Whether the text names a code-bearing object, in the prepare
    /// schema, as of set version `v`: `v << 1 | answer` (0 = not yet).
    names_code: std::sync::atomic::AtomicU64,
    /// Whether it names code that reads the counts, kept the same way.
    reads_counts: std::sync::atomic::AtomicU64,
}

/// `answer` for the set `names`, kept in `slot` as `version << 1 | answer`
/// so that it is computed once per installed set (a set not installed,
/// version 0, is asked each time).
fn per_set(
    slot: &std::sync::atomic::AtomicU64,
    names: &crate::session_state::code_names::CodeNames,
    answer: impl FnOnce() -> bool,
) -> bool {
    use std::sync::atomic::Ordering;
    let v = names.version();
    let cached = slot.load(Ordering::Relaxed);
    if v != 0 && cached >> 1 == v {
        return cached & 1 == 1;
    }
    let hit = answer();
    if v != 0 {
        slot.store(v << 1 | u64::from(hit), Ordering::Relaxed);
    }
    hit
}

impl StmtEntry {
    /// The analysis of the statement's text under `opts`: the cached one
    /// when the options match (the usual case), else lexed afresh.
    pub fn analysis(
        &self,
        opts: crate::sql::LexOptions,
    ) -> std::borrow::Cow<'_, crate::sql::Analysis> {
        let (cached_opts, cached) = self
            .analysis
            .get_or_init(|| (opts, crate::sql::analyze(&self.key.sql, opts)));
        if *cached_opts == opts {
            std::borrow::Cow::Borrowed(cached)
        } else {
            std::borrow::Cow::Owned(crate::sql::analyze(&self.key.sql, opts))
        }
    }

    /// What the text may do to which names run code (see
    /// [`crate::session_state::code_names::DdlScan`]).
    pub fn changes_code_names(&self) -> crate::session_state::code_names::DdlScan {
        *self
            .changes_code_names
            .get_or_init(|| crate::session_state::code_names::DdlScan::of(&self.key.sql))
    }

    /// True when the text, run in the schema it was prepared in, names a
    /// member of `names`: answered once per installed set.
    pub fn names_code(&self, names: &crate::session_state::code_names::CodeNames) -> bool {
        if names.is_empty() {
            return false;
        }
        let schema = self.key.schema.as_deref().unwrap_or_default();
        per_set(&self.names_code, names, || {
            names.touches(&self.key.sql, schema)
        })
    }

    /// True when the text, run in the schema it was prepared in, names code
    /// that may read the previous statement's counts (see
    /// `CodeNames::reads_counts`): answered once per installed set.
    pub fn reads_counts(&self, names: &crate::session_state::code_names::CodeNames) -> bool {
        let schema = self.key.schema.as_deref().unwrap_or_default();
        per_set(&self.reads_counts, names, || {
            names.reads_counts(&self.key.sql, schema)
        })
    }

    /// The statement digest (hash, text) of the text under `opts`: the
    /// cached one when the options match (the usual case), else computed
    /// into `scratch`.
    pub fn digest<'a>(
        &'a self,
        opts: crate::sql::LexOptions,
        scratch: &'a mut Vec<u8>,
    ) -> (u64, &'a [u8]) {
        let (cached_opts, cached) = self
            .digest
            .get_or_init(|| (opts, crate::sql::digest::digest(&self.key.sql, opts)));
        if *cached_opts == opts {
            (cached.hash, &cached.text)
        } else {
            let hash = crate::sql::digest::digest_into(&self.key.sql, opts, scratch);
            (hash, scratch)
        }
    }

    /// Approximate memory held.
    pub fn bytes(&self) -> usize {
        self.key.sql.len()
            + self.key.schema.as_ref().map_or(0, Vec::len)
            + self.key.state.bytes()
            + self.response.iter().map(|p| p.len() + 24).sum::<usize>()
            + 96
    }
}

/// Most bytes the registry's entries may hold (their text and prepare
/// responses): 64 MiB.
pub const MAX_BYTES: usize = 64 << 20;

/// The registry.
#[derive(Debug)]
pub struct Registry {
    /// Entries by key, with the stamp of their last use.
    map: HashMap<StmtKey, (Arc<StmtEntry>, u64)>,
    /// Uses, oldest first: an item is live when its stamp is still its
    /// entry's last use.
    order: VecDeque<(Arc<StmtEntry>, u64)>,
    clock: u64,
    capacity: usize,
    max_bytes: usize,
    bytes: usize,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl Registry {
    /// An empty registry keeping at most `capacity` entries and
    /// [`MAX_BYTES`].
    pub fn new(capacity: usize) -> Self {
        Self::with_budget(capacity, MAX_BYTES)
    }

    /// An empty registry keeping at most `capacity` entries and `max_bytes`.
    pub fn with_budget(capacity: usize, max_bytes: usize) -> Self {
        Self {
            map: HashMap::new(),
            order: VecDeque::new(),
            clock: 0,
            capacity,
            max_bytes,
            bytes: 0,
        }
    }

    /// Marks the entry of `key` as used now and returns it: one map lookup,
    /// its new stamp at the back of the queue. Every entry of the map has
    /// exactly one live stamp in the queue.
    fn touch(&mut self, key: &StmtKey) -> Option<Arc<StmtEntry>> {
        if self.order.len() > 2 * self.map.len() + 64 {
            // Mostly stale stamps: keep the live ones (amortised O(1) per
            // use, as the queue at least halves).
            let map = &self.map;
            self.order.retain(|(e, at)| live(map, e, *at));
        }
        let (e, used) = self.map.get_mut(key)?;
        self.clock += 1;
        *used = self.clock;
        let e = e.clone();
        self.order.push_back((e.clone(), self.clock));
        Some(e)
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Approximate memory held by entries.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Looks a statement up.
    pub fn get(&mut self, key: &StmtKey) -> Option<Arc<StmtEntry>> {
        self.touch(key)
    }

    /// Registers a statement's prepare response (or returns the existing
    /// entry when another client registered it first).
    pub fn insert(
        &mut self,
        key: StmtKey,
        num_params: u16,
        num_columns: u16,
        response: Vec<Vec<u8>>,
    ) -> Arc<StmtEntry> {
        if let Some(e) = self.get(&key) {
            return e;
        }
        let e = Arc::new(StmtEntry {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            key: key.clone(),
            num_params,
            num_columns,
            response,
            analysis: std::sync::OnceLock::new(),
            changes_code_names: std::sync::OnceLock::new(),
            names_code: std::sync::atomic::AtomicU64::new(0),
            reads_counts: std::sync::atomic::AtomicU64::new(0),
            digest: std::sync::OnceLock::new(),
        });
        self.bytes += e.bytes();
        self.map.insert(key, (e.clone(), 0));
        self.touch(&e.key);
        self.evict();
        e
    }

    /// Drops least recently used entries while above the capacity or the
    /// byte budget: O(1) per entry dropped or stale stamp skipped.
    fn evict(&mut self) {
        while self.map.len() > self.capacity || self.bytes > self.max_bytes {
            let Some((e, at)) = self.order.pop_front() else {
                break;
            };
            if live(&self.map, &e, at)
                && let Some((gone, _)) = self.map.remove(&e.key)
            {
                self.bytes -= gone.bytes();
            }
        }
    }

    /// Registers a fresh prepare reply: the existing entry when the server
    /// described the statement the same way (statement id aside), otherwise
    /// a new entry replacing the stale one.
    pub fn upsert(
        &mut self,
        key: StmtKey,
        num_params: u16,
        num_columns: u16,
        response: Vec<Vec<u8>>,
    ) -> Arc<StmtEntry> {
        if self
            .map
            .get(&key)
            .is_some_and(|(e, _)| same_reply(&e.response, &response))
            && let Some(e) = self.touch(&key)
        {
            return e;
        }
        if let Some((old, _)) = self.map.remove(&key) {
            self.bytes -= old.bytes();
        }
        self.insert(key, num_params, num_columns, response)
    }

    /// Drops `entry` (its metadata went stale) so the next prepare of the
    /// same text asks the server; clients holding it keep their copy.
    pub fn forget(&mut self, entry: &StmtEntry) {
        if self
            .map
            .get(&entry.key)
            .is_some_and(|(e, _)| e.id == entry.id)
            && let Some((e, _)) = self.map.remove(&entry.key)
        {
            self.bytes -= e.bytes();
        }
    }

    /// Runs eviction again (after clients released entries).
    pub fn trim(&mut self) {
        self.evict();
    }
}

/// The stamp `at` of `e` is its last use, and `e` is still the map's entry.
fn live(map: &HashMap<StmtKey, (Arc<StmtEntry>, u64)>, e: &Arc<StmtEntry>, at: u64) -> bool {
    map.get(&e.key)
        .is_some_and(|(cur, used)| *used == at && Arc::ptr_eq(cur, e))
}

/// Two prepare replies describe the same statement: equal except for the
/// statement id (bytes 1..5 of the prepare-OK).
fn same_reply(a: &[Vec<u8>], b: &[Vec<u8>]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).enumerate().all(|(i, (x, y))| {
            if i == 0 && x.len() == y.len() && x.len() >= 5 {
                x[0] == y[0] && x[5..] == y[5..]
            } else {
                x == y
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(sql: &str) -> StmtKey {
        StmtKey {
            pool: 0,
            schema: Some(b"test".to_vec()),
            state: PrepareState::default(),
            sql: sql.as_bytes().to_vec(),
        }
    }

    #[test]
    fn same_text_shares_one_entry() {
        let mut r = Registry::new(10);
        let a = r.insert(key("SELECT ?"), 1, 1, vec![vec![0; 12]]);
        let b = r.insert(key("SELECT ?"), 1, 1, vec![vec![0; 12]]);
        assert_eq!(a.id, b.id);
        assert_eq!(r.len(), 1);
        let mut other_schema = key("SELECT ?");
        other_schema.schema = None;
        let c = r.insert(other_schema, 1, 1, vec![]);
        assert_ne!(a.id, c.id);
    }

    #[test]
    fn a_text_prepared_in_another_session_state_is_another_statement() {
        let mut r = Registry::new(10);
        let a = r.insert(key("SELECT ?"), 1, 1, vec![vec![0; 12]]);
        let mut ansi = key("SELECT ?");
        ansi.state
            .vars
            .insert("sql_mode".into(), "ANSI_QUOTES".into());
        let b = r.insert(ansi.clone(), 1, 1, vec![vec![0; 12]]);
        assert_ne!(a.id, b.id, "sql_mode decides how the text was read");
        assert_eq!(r.insert(ansi.clone(), 1, 1, vec![vec![0; 12]]).id, b.id);
        let mut private = ansi;
        private.state.private = Some(7);
        assert_ne!(r.insert(private, 1, 1, vec![vec![0; 12]]).id, b.id);
        let mut latin1 = key("SELECT ?");
        latin1.state.results_collation = Some("latin1_swedish_ci".into());
        assert_ne!(r.insert(latin1, 1, 1, vec![vec![0; 12]]).id, a.id);
    }

    #[test]
    fn evicts_least_recently_used_held_or_not() {
        let mut r = Registry::new(2);
        let held = r.insert(key("a"), 0, 0, vec![]);
        drop(r.insert(key("b"), 0, 0, vec![]));
        assert!(r.get(&key("a")).is_some());
        drop(r.insert(key("c"), 0, 0, vec![]));
        assert_eq!(r.len(), 2);
        assert!(r.get(&key("b")).is_none(), "LRU entry went");
        // A held entry leaves the map too; its holder keeps its copy.
        drop(r.insert(key("d"), 0, 0, vec![]));
        drop(r.insert(key("e"), 0, 0, vec![]));
        assert_eq!(r.len(), 2);
        assert!(r.get(&key("a")).is_none(), "held entries are bounded too");
        assert_eq!(held.key, key("a"));
        let again = r.insert(key("a"), 0, 0, vec![]);
        assert_ne!(again.id, held.id, "a new entry for the text");
        assert!(r.bytes() > 0);
    }

    #[test]
    fn byte_budget_and_stale_stamps_stay_bounded() {
        let mut r = Registry::with_budget(1000, 10 * 1024);
        for i in 0..100 {
            let sql = format!("{i:01000}");
            drop(r.insert(key(&sql), 0, 0, vec![vec![0; 100]]));
        }
        assert!(r.bytes() <= 10 * 1024, "{}", r.bytes());
        assert!(r.len() < 10);
        // Many uses of the same entries: the queue is compacted.
        let mut r = Registry::new(4);
        for i in 0..4 {
            drop(r.insert(key(&i.to_string()), 0, 0, vec![]));
        }
        for n in 0..10_000 {
            assert!(r.get(&key(&(n % 4).to_string())).is_some());
        }
        assert!(r.order.len() <= 2 * r.len() + 65, "{}", r.order.len());
        assert_eq!(r.len(), 4);
    }

    #[test]
    fn upsert_keeps_same_shape_and_replaces_changed_one() {
        let mut r = Registry::new(10);
        let ok = |id: u8, cols: u8| vec![vec![0, id, 0, 0, 0, cols, 0, 1, 0, 0, 0, 0]];
        let a = r.upsert(key("q"), 1, 2, ok(1, 2));
        let b = r.upsert(key("q"), 1, 2, ok(9, 2));
        assert_eq!(a.id, b.id, "another backend's id, same statement");
        let c = r.upsert(key("q"), 1, 3, ok(9, 3));
        assert_ne!(a.id, c.id, "a changed shape is a new entry");
        assert_eq!(r.len(), 1);
    }

    #[test]
    fn forget_only_the_same_entry() {
        let mut r = Registry::new(10);
        let old = r.insert(key("a"), 0, 1, vec![]);
        r.forget(&old);
        assert!(r.get(&key("a")).is_none());
        let new = r.insert(key("a"), 0, 2, vec![]);
        r.forget(&old);
        assert_eq!(
            r.get(&key("a")).map(|e| e.id),
            Some(new.id),
            "a newer entry stays"
        );
    }
}
