//! The server's code-bearing names (views with effects, tables with
//! triggers or a column DEFAULT with effects; see [`crate::session_state::code_names`]) as last read from
//! `information_schema`, and when that reading may be trusted.
//!
//! Owns reading the catalog and its freshness; the session-state authority
//! decides what a match means. The set is *unknown* (every statement that
//! may name a table is treated as running stored code) when:
//! - it has not been read yet, or the last good reading is older than
//!   [`STALE_AFTER_REFRESHES`] intervals (the server cannot be asked, or answers too slowly);
//! - a statement that may change it (a DDL verb with VIEW, TRIGGER or
//!   RENAME) has been sent through this proxy and the catalog was not read
//!   again after its reply: from before the statement is sent, so a client
//!   whose statement queued behind it on the server is judged by the new
//!   definitions;
//! - `pool.code_catalog_refresh_ms` is 0 (never learn: fail closed);
//! - the reading cannot see every object a client may use: clients log in
//!   to the server as other users (`[server_users]`, a `backend_user`)
//!   while `backend.user` lacks global SELECT, SHOW VIEW and TRIGGER.
//!
//! Objects created outside this proxy are learnt within one interval: that
//! window is the one case in which a statement is judged by an old set
//! (docs/compatibility.md, "Views and triggers"). The reading borrows an
//! idle connection of `backend.user`'s credential pool, or is granted the
//! next one that comes back in group 0, ahead of every queue (see
//! `reading_connection`; one opened for it is closed after it, so the
//! pool is left as it was found);
//! when none is granted within a reading's time limit it is skipped; a
//! skipped, failed or slow reading leaves the set in force until the last
//! good one is [`STALE_AFTER_REFRESHES`] intervals old, then it is unknown. Each reading asks the server's
//! statement counters first (no table opened) and reads again only the
//! part they say changed: views, triggers and sequence defaults on table
//! DDL, procedures on routine DDL; column defaults (which open every
//! table's definition) only while a sequence exists. A DDL statement's
//! reply wakes the reader, which then waits for such statements to stop
//! for 100 ms (within an interval); after a failed reading it
//! waits a whole interval. Reading `ROUTINES` opens `mysql.proc`, and a
//! server caches the definition a reading opened: a client replacing its
//! files under the server (mysqltest's sp-destruct) must not meet a
//! reading at every statement.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::ArcSwapOption;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::backend::{BackendConn, BackendError};
use crate::session_state::code_names::{self, CodeNames, ProcRow, TriggerRow, ViewRow};

/// What a reading ended with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A set is installed (read, or confirmed unchanged).
    Known,
    /// Nothing installed: a statement that may change the set is out or
    /// raced the reading, or the set cannot be complete.
    Unknown,
    /// The reading itself failed (a query refused, no connection, a
    /// timeout).
    Failed,
}

/// After a statement that may change the set is answered, the next reading
/// waits until such statements stopped for this long (within the
/// interval).
const DDL_QUIET: Duration = Duration::from_millis(100);
/// A reading older than this many intervals is not trusted.
pub const STALE_AFTER_REFRESHES: u32 = 10;
/// At most this many catalog rows are read (past it the set is unknown).
const MAX_ROWS: usize = 200_000;
/// A full reading at least every this many intervals, even when the
/// fingerprint says nothing changed (objects written as files into the
/// datadir, or restored, move no counter).
pub const FULL_READING_EVERY: u32 = 10;
/// Periodic full readings that may fail in a row (each retried at the next
/// interval) before the set is unknown: the counters confirm it meanwhile,
/// but objects that move no counter are learnt only by a full reading.
const FULL_FAILURES_TOLERATED: u32 = 3;

/// The server's counts of statements that can change the set (executed
/// anywhere: any client, stored code, prepared, replication), cheap to read
/// (no table is opened): a reading of the tables' part (views, triggers,
/// sequences and column defaults) runs only when a table counter moved,
/// of the procedures only when a routine counter moved.
const FINGERPRINT_SQL: &str = "SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS \
     WHERE VARIABLE_NAME IN ('COM_CREATE_VIEW', 'COM_DROP_VIEW', 'COM_CREATE_TRIGGER', \
     'COM_DROP_TRIGGER', 'COM_CREATE_TABLE', 'COM_ALTER_TABLE', 'COM_RENAME_TABLE', 'COM_DROP_TABLE', \
     'COM_CREATE_DB', 'COM_DROP_DB', 'COM_CREATE_SEQUENCE', 'COM_CREATE_FUNCTION', 'COM_DROP_FUNCTION', \
     'COM_GRANT', 'COM_REVOKE', 'COM_GRANT_ROLE', 'COM_REVOKE_ROLE', \
     'COM_CREATE_PROCEDURE', 'COM_DROP_PROCEDURE', 'COM_ALTER_PROCEDURE', 'COM_CREATE_PACKAGE', \
     'COM_DROP_PACKAGE', 'COM_CREATE_PACKAGE_BODY', 'COM_DROP_PACKAGE_BODY') ORDER BY VARIABLE_NAME";

/// The counters of [`FINGERPRINT_SQL`] that only routines move.
const ROUTINE_COUNTERS: [&str; 7] = [
    "COM_CREATE_PROCEDURE",
    "COM_DROP_PROCEDURE",
    "COM_ALTER_PROCEDURE",
    "COM_CREATE_PACKAGE",
    "COM_DROP_PACKAGE",
    "COM_CREATE_PACKAGE_BODY",
    "COM_DROP_PACKAGE_BODY",
];

const VIEWS_SQL: &str =
    "SELECT TABLE_SCHEMA, TABLE_NAME, VIEW_DEFINITION FROM information_schema.VIEWS";
/// Tables with triggers, and each trigger's body (a KILL in it).
const TRIGGERS_SQL: &str = "SELECT EVENT_OBJECT_SCHEMA, EVENT_OBJECT_TABLE, ACTION_STATEMENT FROM information_schema.TRIGGERS";
/// Procedures, whose body may run DDL when called, and stored functions and
/// package bodies: any of them may run a KILL (`CodeNames::may_kill`).
const ROUTINES_SQL: &str = "SELECT ROUTINE_SCHEMA, ROUTINE_NAME, ROUTINE_DEFINITION, ROUTINE_TYPE FROM information_schema.ROUTINES WHERE ROUTINE_TYPE IN ('PROCEDURE', 'FUNCTION', 'PACKAGE BODY')";
/// Sequences: a column DEFAULT can have a session effect only by drawing a
/// sequence value (the server refuses GET_LOCK, LAST_INSERT_ID(expr) and
/// the like in a DEFAULT), so without one the defaults are not read.
/// Reading only names and types opens no table.
const SEQUENCES_SQL: &str =
    "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_TYPE = 'SEQUENCE'";
/// Columns whose DEFAULT is an expression (a call may draw a sequence
/// value). This opens every table's definition: read only while a
/// sequence exists.
const DEFAULTS_SQL: &str = "SELECT TABLE_SCHEMA, TABLE_NAME, COLUMN_DEFAULT FROM information_schema.COLUMNS WHERE COLUMN_DEFAULT LIKE '%(%'";
const PRIVILEGES_SQL: &str = "SELECT COUNT(DISTINCT PRIVILEGE_TYPE) FROM information_schema.USER_PRIVILEGES \
     WHERE PRIVILEGE_TYPE IN ('SELECT', 'SHOW VIEW', 'TRIGGER') \
     AND GRANTEE = CONCAT('''', SUBSTRING_INDEX(CURRENT_USER(), '@', 1), '''@''', \
     SUBSTRING_INDEX(CURRENT_USER(), '@', -1), '''')";

/// What the admin endpoint shows.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct CatalogStatus {
    /// `known`, `unknown` or `off`.
    pub state: &'static str,
    /// Code-bearing objects in the set (when known).
    pub objects: usize,
    /// Seconds since the last good reading.
    pub age_s: Option<f64>,
    /// Routines whose body `backend.user` cannot read (statements running
    /// them are refused unless `pool.allow_unplannable_kill`).
    pub hidden_routines: usize,
    /// Good readings so far.
    pub readings: u64,
    /// Why the set is unknown, or the last reading's error.
    pub reason: Option<String>,
}

/// The reader's own state: what its last readings saw, kept so that only
/// the part whose counters moved is read again.
#[derive(Default)]
pub struct Reader {
    /// `pool.code_catalog_refresh_ms` as of the current reading.
    interval: Duration,
    /// The tables' and the procedures' counters as of their last reading.
    tables_fingerprint: Option<Fingerprint>,
    routines_fingerprint: Option<Fingerprint>,
    /// Views, and tables with triggers or a DEFAULT with effects.
    views: Vec<ViewRow>,
    triggers: Vec<TriggerRow>,
    procs: Vec<ProcRow>,
    /// Stored functions and package bodies.
    funcs: Vec<ProcRow>,
    last_full: Option<Instant>,
    /// Periodic full readings that failed since the last good one.
    full_failures: u32,
}

impl Reader {
    /// Every part is read again now and then, whatever the counters say:
    /// objects written as files into the datadir, or restored, move none.
    fn full_due(&self) -> bool {
        self.last_full
            .is_none_or(|t| t.elapsed() >= self.interval * FULL_READING_EVERY)
    }

    /// Forgets everything read (the interval stays): the next reading
    /// reads every part.
    fn restart(&mut self) {
        *self = Reader {
            interval: self.interval,
            ..Reader::default()
        };
    }

    /// Forgets the counters the parts were read at (the parts stay until
    /// read again): the next reading cannot confirm by them.
    fn forget_fingerprints(&mut self) {
        self.tables_fingerprint = None;
        self.routines_fingerprint = None;
    }
}

type Fingerprint = Vec<Vec<Option<String>>>;

struct Writes {
    /// Bumped when a statement that may change the set is sent or answered.
    generation: u64,
    /// Such statements sent and not yet answered.
    in_flight: usize,
    last_good: Option<Instant>,
    readings: u64,
    /// Sets installed so far (each one's version).
    installs: u64,
    /// Hidden routines in the set installed last (warned about once).
    hidden_routines: usize,
    reason: Option<String>,
    /// A statement sent since the last install may have made code that
    /// reaches a KILL the last set does not show (see [`CodeCatalog::for_kill`]).
    tainted: bool,
}

/// The catalog, shared by the sessions and its reader task.
pub struct CodeCatalog {
    /// `None` = unknown.
    names: ArcSwapOption<CodeNames>,
    /// The set installed last, kept while `names` is unknown.
    last: ArcSwapOption<CodeNames>,
    writes: Mutex<Writes>,
    wake: Notify,
    /// Notified whenever a reading installs or confirms a set.
    installed: Notify,
    /// The last reading found it cannot see everything (privileges, too
    /// many objects): no reading will make the set known soon.
    blind: std::sync::atomic::AtomicBool,
}

impl Default for CodeCatalog {
    fn default() -> Self {
        Self {
            names: ArcSwapOption::empty(),
            last: ArcSwapOption::empty(),
            writes: Mutex::new(Writes {
                generation: 0,
                in_flight: 0,
                last_good: None,
                readings: 0,
                installs: 0,
                hidden_routines: 0,
                reason: Some("not read yet".into()),
                tainted: false,
            }),
            wake: Notify::new(),
            installed: Notify::new(),
            blind: std::sync::atomic::AtomicBool::new(false),
        }
    }
}

/// Held from before a statement that may change the set is sent until its
/// reply was read; dropping it asks for a new reading.
pub struct DdlGuard {
    catalog: Arc<CodeCatalog>,
}

impl Drop for DdlGuard {
    fn drop(&mut self) {
        if let Ok(mut w) = self.catalog.writes.lock() {
            w.in_flight = w.in_flight.saturating_sub(1);
            w.generation += 1;
        }
        self.catalog.wake.notify_one();
    }
}

/// Whether the catalog reading sees what every client may use.
pub fn sees_for_all(cfg: &crate::config::Config) -> bool {
    !cfg.server_users.enabled
        && cfg.users.iter().all(|u| {
            u.backend_user
                .as_deref()
                .is_none_or(|b| b == cfg.backend.user)
        })
}

impl CodeCatalog {
    /// The set, or `None` when it is unknown.
    pub fn names(&self) -> Option<Arc<CodeNames>> {
        self.names.load_full()
    }

    /// `f` of the set (`None` when unknown), without taking a reference:
    /// for the per-statement checks.
    pub fn peek<R>(&self, f: impl FnOnce(Option<&CodeNames>) -> R) -> R {
        f(self.names.load().as_deref())
    }

    /// `f` of the set that judges what a statement may run while it is
    /// sent: the current one, or while it is unknown (after a DDL
    /// statement, until it is read again) the one installed last, as
    /// objects created elsewhere are judged until the next reading. `None`
    /// when there is none (no reading yet, or readings that cannot see
    /// everything).
    pub fn peek_settled<R>(&self, f: impl FnOnce(&CodeNames) -> R) -> Option<R> {
        match self.names.load().as_deref() {
            Some(n) => Some(f(n)),
            None if self.is_blind() => None,
            None => self.last.load().as_deref().map(f),
        }
    }

    /// The set, waiting up to `limit` for a reading to install one while
    /// it is unknown (a statement that may change it was just answered, or
    /// the first reading is under way). `None` at once when the last
    /// reading found it cannot see everything.
    pub async fn known_within(&self, limit: Duration) -> Option<Arc<CodeNames>> {
        let deadline = Instant::now() + limit;
        loop {
            let installed = self.installed.notified();
            tokio::pin!(installed);
            installed.as_mut().enable();
            if let Some(n) = self.names() {
                return Some(n);
            }
            if self.blind.load(std::sync::atomic::Ordering::Relaxed) {
                return None;
            }
            if tokio::time::timeout_at(deadline, installed).await.is_err() {
                return self.names();
            }
        }
    }

    /// Marks the set unknown until the statement about to be sent has been
    /// answered and the catalog read again, when it may change the set
    /// (`ddl`, see [`code_names::DdlScan`]). `taints`: it may also make
    /// code that reaches a KILL the last set does not show, so that set is
    /// not used for the KILL gate either until a new one is installed.
    pub fn guard_if(self: &Arc<Self>, ddl: bool, taints: bool) -> Option<DdlGuard> {
        if !ddl && !taints {
            return None;
        }
        if let Ok(mut w) = self.writes.lock() {
            w.in_flight += 1;
            w.generation += 1;
            w.tainted |= taints;
            w.reason = Some("a view or trigger may have changed through this proxy".into());
        }
        self.names.store(None);
        Some(DdlGuard {
            catalog: self.clone(),
        })
    }

    /// The primary server changed: the set is unknown (and the last one
    /// not trusted for the KILL gate) until the new server has been read.
    pub fn server_changed(&self) {
        if let Ok(mut w) = self.writes.lock() {
            w.generation += 1;
            w.tainted = true;
            w.reason = Some("the primary server changed".into());
        }
        self.names.store(None);
        self.wake.notify_one();
    }

    /// The set installed last, even while the current one is unknown.
    pub fn last(&self) -> Option<Arc<CodeNames>> {
        self.last.load_full()
    }

    /// The set the KILL gate judges by: the current one, or while it is
    /// unknown the one installed last, unless a statement sent since may
    /// have made code that reaches a KILL that set does not show (a name of
    /// such code, the word KILL or dynamic SQL in a definition: see
    /// `Session::guard_catalog`) or the reading cannot see everything.
    /// Through this proxy no other statement can make such code (a body
    /// holding KILL is refused, and so is dynamic SQL built at run time
    /// where a KILL could reach another account's client), so the set
    /// read last still names all of it: only code created elsewhere since
    /// is missing, as it is from any set until the next reading. `None`
    /// when there is no such set: wait for a reading.
    pub fn for_kill(&self) -> Option<Arc<CodeNames>> {
        if let Some(n) = self.names() {
            return Some(n);
        }
        if self.is_blind() {
            return None;
        }
        let tainted = self.writes.lock().map_or(true, |w| w.tainted);
        if tainted { None } else { self.last() }
    }

    /// The last reading found it cannot see every object clients may use.
    pub fn is_blind(&self) -> bool {
        self.blind.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// For the admin endpoint.
    pub fn status(&self, refresh: Duration) -> CatalogStatus {
        let w = self.writes.lock().ok();
        let age_s = w
            .as_ref()
            .and_then(|w| w.last_good)
            .map(|t| t.elapsed().as_secs_f64());
        let reason = w.as_ref().and_then(|w| w.reason.clone());
        let readings = w.as_ref().map_or(0, |w| w.readings);
        match self.names() {
            _ if refresh.is_zero() => CatalogStatus {
                state: "off",
                objects: 0,
                hidden_routines: 0,
                age_s,
                readings,
                reason: Some("pool.code_catalog_refresh_ms = 0".into()),
            },
            Some(n) => CatalogStatus {
                state: "known",
                objects: n.len(),
                hidden_routines: n.hidden_routines(),
                age_s,
                readings,
                reason,
            },
            None => CatalogStatus {
                state: "unknown",
                objects: 0,
                hidden_routines: 0,
                age_s,
                readings,
                reason,
            },
        }
    }

    fn forget(&self, reason: String) {
        if let Ok(mut w) = self.writes.lock() {
            // Not read for too long: the set read last may miss code made
            // since, so the KILL gate waits for a reading too.
            w.tainted = true;
            if w.reason.as_deref() != Some(reason.as_str()) {
                tracing::warn!(%reason, "view and trigger catalog unknown: statements that may name a table are treated as running stored code");
            }
            w.reason = Some(reason);
        }
        self.names.store(None);
    }

    /// Installs a reading begun at `generation` (`None`: the installed set
    /// is confirmed unchanged), unless a statement that may change the set
    /// was sent (or answered) since or is still out. The set's age counts
    /// from `read_at`, when the reading began (what it read may be that
    /// old).
    fn install_read_at(&self, generation: u64, names: Option<CodeNames>, read_at: Instant) -> bool {
        let Ok(mut w) = self.writes.lock() else {
            return false;
        };
        if w.generation != generation || w.in_flight > 0 {
            return false;
        }
        match names {
            Some(names) => {
                if w.reason.is_some() && w.last_good.is_some() {
                    tracing::info!(objects = names.len(), "view and trigger catalog read");
                }
                w.installs += 1;
                let hidden = names.hidden_routines();
                if hidden > 0 && w.hidden_routines != hidden {
                    tracing::warn!(
                        hidden,
                        "backend.user cannot read the body of some routines: statements running them are refused (grant it SELECT ON mysql.proc, or set pool.allow_unplannable_kill)"
                    );
                }
                w.hidden_routines = hidden;
                w.tainted = false;
                let names = Arc::new(names.with_version(w.installs));
                self.last.store(Some(names.clone()));
                self.names.store(Some(names));
            }
            None if self.names.load().is_none() => return false,
            None => {}
        }
        w.last_good = Some(w.last_good.map_or(read_at, |t| t.max(read_at)));
        w.readings += 1;
        w.reason = None;
        drop(w);
        self.blind
            .store(false, std::sync::atomic::Ordering::Relaxed);
        self.installed.notify_waiters();
        true
    }

    fn generation(&self) -> (u64, usize) {
        self.writes
            .lock()
            .map(|w| (w.generation, w.in_flight))
            .unwrap_or((u64::MAX, 1))
    }

    /// How much longer the installed set may be trusted without a new
    /// good reading (it is stale `window` after the last one); zero when
    /// none is installed or it is stale already.
    fn trusted_for(&self, window: Duration) -> Duration {
        if self.names().is_none() {
            return Duration::ZERO;
        }
        self.writes
            .lock()
            .ok()
            .and_then(|w| w.last_good)
            .map_or(Duration::ZERO, |t| window.saturating_sub(t.elapsed()))
    }

    /// Reads the catalog once on `c`: `Ok(Ok(None))` when the counters are
    /// the last reading's (nothing changed), `Ok(Err(why))` when the
    /// reading cannot be trusted to be complete. `may_confirm`: unchanged
    /// counters may confirm the installed set (else the tables' part is
    /// read again). `full`: every part is read whatever the counters say
    /// (objects written as files into the datadir, or restored, move no
    /// counter: see [`Reader::full_due`]).
    async fn read(
        &self,
        c: &mut BackendConn,
        reader: &mut Reader,
        needs_global: bool,
        may_confirm: bool,
        full: bool,
    ) -> Result<Result<Option<CodeNames>, String>, BackendError> {
        if needs_global {
            let n = c
                .query_row(PRIVILEGES_SQL)
                .await?
                .and_then(|r| r.into_iter().next().flatten())
                .and_then(|v| v.parse::<u32>().ok())
                .unwrap_or(0);
            if n < 3 {
                return Ok(Err(
                    "clients log in as other server users and backend.user lacks global SELECT, SHOW VIEW and TRIGGER (it cannot see every view and trigger)".into(),
                ));
            }
        }
        let counters = c.query_rows(FINGERPRINT_SQL, 64).await?;
        // A stored function's counters move the tables' part (a view may
        // name one); its body is read with the procedures (when a routine
        // counter moved, and in the periodic full reading).
        let (routines_fp, tables_fp): (Fingerprint, Fingerprint) =
            counters.into_iter().partition(|r| {
                r.first()
                    .and_then(|n| n.as_deref())
                    .is_some_and(|n| ROUTINE_COUNTERS.iter().any(|c| n.eq_ignore_ascii_case(c)))
            });
        // A DDL statement through this proxy (a view, a trigger, a table
        // with a sequence default) cannot change a procedure without moving
        // a routine counter: the procedures are read again only when one
        // moved, or in the periodic full reading. Reading them opens
        // `mysql.proc`, which a client may be replacing on disk (a
        // migration, mysqltest's sp-destruct): the server then caches
        // whatever definition that reading opened, so it is opened as
        // seldom as the set allows.
        let read_tables =
            full || !may_confirm || reader.tables_fingerprint.as_ref() != Some(&tables_fp);
        let read_routines = full || reader.routines_fingerprint.as_ref() != Some(&routines_fp);
        if !read_tables && !read_routines {
            return Ok(Ok(None));
        }
        let too_many = |rows: &Fingerprint| rows.len() > MAX_ROWS;
        let cell = |r: &[Option<String>], i: usize| r.get(i).cloned().flatten();
        // (schema, name, definition) rows: views and procedures.
        let defined = |rows: &[Vec<Option<String>>]| -> Vec<ViewRow> {
            rows.iter()
                .map(|r| ViewRow {
                    schema: cell(r, 0).unwrap_or_default(),
                    name: cell(r, 1).unwrap_or_default(),
                    definition: cell(r, 2),
                })
                .collect()
        };
        let row = |r: &[Option<String>], body: Option<String>| TriggerRow {
            schema: cell(r, 0).unwrap_or_default(),
            table: cell(r, 1).unwrap_or_default(),
            body,
        };
        let tables = if read_tables {
            let views = c.query_rows(VIEWS_SQL, MAX_ROWS + 1).await?;
            let triggers = c.query_rows(TRIGGERS_SQL, MAX_ROWS + 1).await?;
            let sequences = c
                .query_row(SEQUENCES_SQL)
                .await?
                .and_then(|r| r.into_iter().next().flatten())
                .and_then(|v| v.parse::<u64>().ok());
            let defaults = match sequences {
                Some(0) => Vec::new(),
                _ => c.query_rows(DEFAULTS_SQL, MAX_ROWS + 1).await?,
            };
            if [&views, &triggers, &defaults].into_iter().any(too_many) {
                return Ok(Err(format!("more than {MAX_ROWS} views or triggers")));
            }
            let triggers: Vec<TriggerRow> = triggers
                .iter()
                .map(|r| row(r, Some(cell(r, 2).unwrap_or_default())))
                .chain(
                    defaults
                        .iter()
                        .filter(|r| code_names::default_has_effects(cell(r, 2).as_deref()))
                        .map(|r| row(r, None)),
                )
                .collect();
            Some((defined(&views), triggers))
        } else {
            None
        };
        let procs = if read_routines {
            let routines = c.query_rows(ROUTINES_SQL, MAX_ROWS + 1).await?;
            if too_many(&routines) {
                return Ok(Err(format!("more than {MAX_ROWS} procedures")));
            }
            let (procs, funcs): (Vec<_>, Vec<_>) = routines
                .into_iter()
                // A package body's procedures are CALLed by its name.
                .partition(|r| cell(r, 3).as_deref() != Some("FUNCTION"));
            Some((defined(&procs), defined(&funcs)))
        } else {
            None
        };
        // Every part read: kept together with the counters it was read at.
        if let Some((views, triggers)) = tables {
            reader.views = views;
            reader.triggers = triggers;
            reader.tables_fingerprint = Some(tables_fp);
        }
        if let Some((procs, funcs)) = procs {
            reader.procs = procs;
            reader.funcs = funcs;
            reader.routines_fingerprint = Some(routines_fp);
        }
        if full {
            reader.last_full = Some(Instant::now());
            reader.full_failures = 0;
        }
        Ok(Ok(Some(CodeNames::build_full(
            &reader.views,
            &reader.triggers,
            &reader.procs,
            &reader.funcs,
        ))))
    }

    /// One reading, installed when nothing changed meanwhile; the backend
    /// account's default role is asked on the same connection after it
    /// ([`super::Pool::check_default_role_on`]).
    pub async fn refresh(
        &self,
        pool: &Arc<super::Pool>,
        reader: &mut Reader,
        needs_global: bool,
        interval: Duration,
        limit: Duration,
    ) -> Outcome {
        // A reading that raced a DDL statement is read again at once.
        for _ in 0..3 {
            let (generation, in_flight) = self.generation();
            if in_flight > 0 {
                return Outcome::Unknown;
            }
            // An unchanged fingerprint confirms the set only while one is
            // installed (a DDL statement through the proxy made it unknown).
            let may_confirm = self.names().is_some();
            reader.interval = interval;
            // A connection of the pool's budget (the server sees no more
            // than the budget). One opened for the reading is closed after
            // it: the pool is left as the reading found it.
            let deadline = tokio::time::Instant::now() + limit;
            let Some(mut helper) = pool.reading_connection(deadline).await else {
                self.note_error("no backend connection came free for the reading".into());
                return Outcome::Failed;
            };
            // A slow reading (a loaded server answers every query late)
            // leaves the installed set in force, as a skipped one does,
            // until it is stale (see `run`); past `limit` it is given up
            // (its connection closed). Forgetting the set after one slow
            // interval made every statement look like stored code, and the
            // resets that followed loaded the server more, so that the next
            // reading was slow too (22 s unknown in a minute at 2,048
            // I/O-bound clients). The periodic full reading is not part of
            // it while a set is installed: the counters alone confirm that
            // set (below).
            let full_due = reader.full_due();
            let started = Instant::now();
            let read = tokio::time::timeout(
                limit,
                self.read(
                    &mut helper.conn,
                    reader,
                    needs_global,
                    may_confirm,
                    full_due && !may_confirm,
                ),
            )
            .await;
            // Confirmed by the counters, and the full reading is due: it
            // runs within `limit`, the confirmed set in force meanwhile; one
            // that fails is tried again at the next interval, and
            // [`FULL_FAILURES_TOLERATED`] in a row make the set unknown.
            if full_due
                && matches!(read, Ok(Ok(Ok(None))))
                && self.install_read_at(generation, None, started)
            {
                let (generation, _) = self.generation();
                let full_started = Instant::now();
                let full = self.read(&mut helper.conn, reader, false, true, true);
                match tokio::time::timeout(limit, full).await {
                    Ok(Ok(Ok(names))) => {
                        let kept = check_roles(pool, &mut helper.conn, limit).await;
                        helper.give_back(kept);
                        if !self.install_read_at(generation, names, full_started) {
                            // Raced a DDL statement: unknown until the
                            // reading it asked for.
                            reader.forget_fingerprints();
                            return Outcome::Unknown;
                        }
                    }
                    Ok(Ok(Err(incomplete))) => {
                        helper.give_back(true);
                        reader.restart();
                        self.blind.store(true, std::sync::atomic::Ordering::Relaxed);
                        self.forget(incomplete);
                        return Outcome::Unknown;
                    }
                    failed => {
                        helper.give_back(false);
                        let why = match failed {
                            Ok(Err(e)) => e.to_string(),
                            _ => "the full catalog reading timed out".into(),
                        };
                        // Tried again at the next interval; past a few in a
                        // row the set cannot vouch for objects that move no
                        // counter: unknown, read afresh.
                        reader.full_failures += 1;
                        if reader.full_failures >= FULL_FAILURES_TOLERATED {
                            reader.restart();
                            self.forget(format!("the full catalog reading failed: {why}"));
                            return Outcome::Failed;
                        }
                        self.note_error(why);
                    }
                }
                return Outcome::Known;
            }
            let kept =
                matches!(read, Ok(Ok(_))) && check_roles(pool, &mut helper.conn, limit).await;
            helper.give_back(kept);
            match read {
                Ok(Ok(Ok(Some(names)))) => {
                    if self.install_read_at(generation, Some(names), started) {
                        return Outcome::Known;
                    }
                    // Raced a DDL statement: what was read is not kept, and
                    // neither are the counters it was read at (the next
                    // reading reads every part again).
                    reader.forget_fingerprints();
                }
                Ok(Ok(Ok(None))) => {
                    if self.install_read_at(generation, None, started) {
                        return Outcome::Known;
                    }
                }
                Ok(Ok(Err(incomplete))) => {
                    reader.restart();
                    self.blind.store(true, std::sync::atomic::Ordering::Relaxed);
                    self.forget(incomplete);
                    return Outcome::Unknown;
                }
                Ok(Err(e)) => {
                    *reader = Reader::default();
                    self.note_error(e.to_string());
                    return Outcome::Failed;
                }
                Err(_) => {
                    *reader = Reader::default();
                    self.note_error("the catalog reading timed out".into());
                    return Outcome::Failed;
                }
            }
        }
        Outcome::Unknown
    }

    /// Waits for the next reading: an interval, or less when a statement
    /// that may change the set is answered — then until such statements
    /// have stopped for [`DDL_QUIET`] (a migration's hundreds of DDL
    /// statements cost a few readings, not one each; the set stays unknown
    /// meanwhile, which fails closed), within the interval. After a
    /// reading that failed (the server refused a query, no connection, a
    /// timeout) the whole interval: a failing reading is not repeated on
    /// every DDL statement.
    async fn next_reading(&self, interval: Duration, failed: bool) {
        let until = Instant::now() + interval;
        if failed {
            tokio::time::sleep_until(until).await;
            return;
        }
        if tokio::time::timeout_at(until, self.wake.notified())
            .await
            .is_err()
        {
            return;
        }
        loop {
            let quiet = (Instant::now() + DDL_QUIET).min(until);
            if tokio::time::timeout_at(quiet, self.wake.notified())
                .await
                .is_err()
            {
                return;
            }
        }
    }

    /// Runs `fut` (a reading, or the wait for the next one) while watching
    /// the set's age: the one place a set goes stale. While no reading
    /// succeeds (none can get a connection, the server refuses or fails
    /// them, or answers late) the set read last stays in force until it
    /// is [`STALE_AFTER_REFRESHES`] intervals old (counted from the start
    /// of the reading that vouched for it), then it is unknown until a
    /// reading succeeds.
    async fn watched<T>(&self, interval: Duration, fut: impl Future<Output = T>) -> T {
        let window = interval * STALE_AFTER_REFRESHES;
        tokio::pin!(fut);
        loop {
            let watching = self.names().is_some() && !interval.is_zero();
            let trusted = self.trusted_for(window);
            tokio::select! {
                out = &mut fut => return out,
                _ = tokio::time::sleep(trusted), if watching => {
                    // A reading may have vouched for it meanwhile, or a
                    // DDL statement made it unknown (with its own reason).
                    if self.names().is_some() && self.trusted_for(window).is_zero() {
                        self.forget(format!(
                            "no catalog reading succeeded for {STALE_AFTER_REFRESHES} intervals (the server cannot be reached, refuses the reading or answers too slowly)"
                        ));
                    }
                }
            }
        }
    }

    fn note_error(&self, e: String) {
        tracing::debug!(error = %e, "could not read the view and trigger catalog");
        if let Ok(mut w) = self.writes.lock()
            && w.last_good.is_some()
        {
            w.reason = Some(e);
        }
    }

    /// The reader: reads at every interval (read from the configuration
    /// each time) and whenever a statement that may change the set was
    /// answered; forgets the set when it could not be read for
    /// [`STALE_AFTER_REFRESHES`] intervals. `current` gives the
    /// configuration and the pool; the task ends when it gives `None` (the
    /// proxy is gone) or at `shutdown`, a reading under way abandoned (its
    /// connection closed). `reader`: the one of the first reading, if one
    /// was made.
    pub async fn run(
        self: Arc<Self>,
        mut reader: Reader,
        mut shutdown: crate::shutdown::Shutdown,
        current: impl Fn() -> Option<(Arc<crate::config::Config>, Arc<super::Pool>)>,
    ) {
        let mut first = self.names().is_none();
        let mut last = Outcome::Known;
        loop {
            if shutdown.is_triggered() {
                return;
            }
            let Some((cfg, pool)) = current() else {
                return;
            };
            let refresh = Duration::from_millis(cfg.pool.code_catalog_refresh_ms);
            if !first {
                let wait = if refresh.is_zero() {
                    Duration::from_secs(1)
                } else {
                    refresh
                };
                tokio::select! {
                    _ = shutdown.wait() => return,
                    _ = self.watched(refresh, self.next_reading(wait, last == Outcome::Failed)) => {}
                }
            }
            first = false;
            if refresh.is_zero() {
                reader = Reader::default();
                self.forget("pool.code_catalog_refresh_ms = 0".into());
                continue;
            }
            let limit = Duration::from_millis(cfg.backend.connect_timeout_ms)
                .max(Duration::from_secs(2))
                .max(refresh * 2);
            tokio::select! {
                _ = shutdown.wait() => return,
                o = self.watched(
                    refresh,
                    self.refresh(&pool, &mut reader, !sees_for_all(&cfg), refresh, limit),
                ) => last = o,
            }
            drop(pool);
        }
    }
}

/// Asks the default role on the reading's connection within `limit`;
/// false when it did not answer in time (the connection is then closed,
/// not given back mid-reply).
async fn check_roles(pool: &super::Pool, c: &mut BackendConn, limit: Duration) -> bool {
    tokio::time::timeout(limit, pool.check_default_role_on(c))
        .await
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    impl CodeCatalog {
        fn install(&self, generation: u64, names: Option<CodeNames>) -> bool {
            self.install_read_at(generation, names, Instant::now())
        }
    }

    fn names() -> CodeNames {
        CodeNames::build(
            &[],
            &[TriggerRow {
                schema: "app".into(),
                table: "t".into(),
                body: None,
            }],
        )
    }

    #[test]
    fn a_reading_that_raced_a_ddl_statement_is_not_installed() {
        let c = Arc::new(CodeCatalog::default());
        let (g, _) = c.generation();
        assert!(c.install(g, Some(names())));
        assert!(c.names().is_some());
        // A reading begun before a DDL statement was sent.
        let (g, _) = c.generation();
        let guard = c.guard_if(
            code_names::may_change_code_names(b"CREATE VIEW v AS SELECT 1"),
            false,
        );
        assert!(guard.is_some());
        assert!(c.names().is_none(), "unknown from before the DDL is sent");
        assert!(!c.install(g, Some(names())));
        // Begun while the DDL statement is out: not installed either.
        let (g, in_flight) = c.generation();
        assert_eq!(in_flight, 1);
        assert!(!c.install(g, Some(names())));
        drop(guard);
        assert!(
            !c.install(g, Some(names())),
            "the reply bumps the generation"
        );
        let (g, _) = c.generation();
        assert!(c.install(g, Some(names())));
        assert_eq!(c.names().map(|n| n.len()), Some(1));
    }

    /// Ends a DDL statement (sent and answered) `at` after the start.
    fn ddl_answered_at(c: &Arc<CodeCatalog>, at: Duration) -> tokio::task::JoinHandle<()> {
        let c = c.clone();
        tokio::spawn(async move {
            tokio::time::sleep(at).await;
            drop(c.guard_if(true, false));
        })
    }

    #[tokio::test(start_paused = true)]
    async fn a_ddl_burst_is_read_once_it_stops() {
        let c = Arc::new(CodeCatalog::default());
        let interval = Duration::from_secs(1);
        // Nothing happens: the interval.
        let t = Instant::now();
        c.next_reading(interval, false).await;
        assert_eq!(t.elapsed(), interval);
        // One DDL statement at 200 ms: read DDL_QUIET after its reply.
        let t = Instant::now();
        let ddl = ddl_answered_at(&c, Duration::from_millis(200));
        c.next_reading(interval, false).await;
        ddl.await.unwrap();
        assert_eq!(t.elapsed(), Duration::from_millis(200) + DDL_QUIET);
        // A burst every 50 ms from 100 to 400 ms: after the last one.
        let t = Instant::now();
        let burst: Vec<_> = (0..7)
            .map(|i| ddl_answered_at(&c, Duration::from_millis(100 + 50 * i)))
            .collect();
        c.next_reading(interval, false).await;
        for b in burst {
            b.await.unwrap();
        }
        assert_eq!(t.elapsed(), Duration::from_millis(400) + DDL_QUIET);
        // A burst that never stops: still read within the interval.
        let t = Instant::now();
        let endless: Vec<_> = (0..40)
            .map(|i| ddl_answered_at(&c, Duration::from_millis(20 + 30 * i)))
            .collect();
        c.next_reading(interval, false).await;
        assert_eq!(t.elapsed(), interval);
        for b in endless {
            b.await.unwrap();
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_reading_is_not_repeated_on_every_ddl_statement() {
        let c = Arc::new(CodeCatalog::default());
        let interval = Duration::from_secs(1);
        let t = Instant::now();
        let ddl = ddl_answered_at(&c, Duration::from_millis(10));
        c.next_reading(interval, true).await;
        ddl.await.unwrap();
        assert_eq!(t.elapsed(), interval);
    }

    #[test]
    fn an_unchanged_fingerprint_confirms_only_an_installed_set() {
        let c = Arc::new(CodeCatalog::default());
        let (g, _) = c.generation();
        assert!(!c.install(g, None), "nothing to confirm yet");
        assert!(c.install(g, Some(names())));
        assert!(c.install(g, None));
        assert_eq!(c.status(Duration::from_secs(1)).readings, 2);
        drop(c.guard_if(code_names::may_change_code_names(b"DROP VIEW v"), false));
        let (g, _) = c.generation();
        assert!(
            !c.install(g, None),
            "unknown after DDL: a full reading is due"
        );
    }

    #[test]
    fn statements_that_change_nothing_keep_the_set() {
        let c = Arc::new(CodeCatalog::default());
        let (g, _) = c.generation();
        assert!(c.install(g, Some(names())));
        assert!(
            c.guard_if(
                code_names::may_change_code_names(b"CREATE TEMPORARY TABLE x (a INT)"),
                false,
            )
            .is_none()
        );
        assert!(
            c.guard_if(code_names::may_change_code_names(b"SELECT * FROM t"), false)
                .is_none()
        );
        assert!(c.names().is_some());
    }

    #[test]
    fn the_kill_gate_keeps_the_last_set_unless_a_statement_tainted_it() {
        let c = Arc::new(CodeCatalog::default());
        assert!(c.for_kill().is_none(), "never read");
        let (g, _) = c.generation();
        assert!(c.install(g, Some(names())));
        // A DDL statement that cannot make code reaching a KILL: the set
        // is unknown, the last one still judges KILLs.
        let guard = c.guard_if(true, false);
        assert!(c.names().is_none());
        assert_eq!(c.for_kill().map(|n| n.len()), Some(1));
        drop(guard);
        // One that may: no set for the KILL gate until the next install,
        // also after its reply.
        let guard = c.guard_if(true, true);
        assert!(c.for_kill().is_none(), "tainted while out");
        drop(guard);
        assert!(c.for_kill().is_none(), "tainted until read again");
        let (g, _) = c.generation();
        assert!(c.install(g, Some(names())));
        assert!(c.for_kill().is_some(), "a new reading clears it");
        // A reading that cannot see everything: none either.
        drop(c.guard_if(true, false));
        c.blind.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(c.for_kill().is_none(), "blind");
    }
}
