//! The session's side of the read/write split (`crate::pool::routing`
//! decides): where the next plain COM_QUERY goes, the wait on a replica
//! for the session's last write, what the session remembers of its writes
//! (the GTID of the last, or a time until which its reads stay on the
//! primary), and leaving a replica backend it still holds (for a warning
//! list or FOUND_ROWS()) when a command must go to the primary.

use std::time::Duration;

use tokio::time::Instant;

use super::Session;
use super::execute::Checkout;
use crate::pool::routing::{self, Pick, Primary};
use crate::protocol::errors;
use crate::protocol::packets::status;
use crate::session_state::PinReason;
use crate::session_state::authority;
use crate::sql::{Analysis, Effect, FuncKind};

/// Where the current command goes when not to the primary.
#[derive(Debug, Clone)]
pub(super) struct Routed {
    /// The replica's pool key for this session's credentials and flavour.
    pub(super) key: usize,
    /// The replica's index in `backend.address`.
    pub(super) server: usize,
    /// The session's last write, to wait for on the replica first.
    pub(super) wait_for: Option<String>,
}

/// What the session knows of its own writes (read-your-writes).
#[derive(Debug, Clone, Default)]
pub(super) struct Writes {
    /// The GTID of its last commit as the primary reported it, or a
    /// position of the primary's that covers it.
    pub(super) gtid: Option<String>,
    /// It may have written without a GTID being reported (a statement that
    /// failed part-way on a non-transactional table, a server that does not
    /// report `last_gtid`) at this moment: its reads stay on the primary
    /// until a check reads the primary's position after it (which then
    /// stands for the write), or until the deadline.
    pub(super) unknown: Option<(std::time::SystemTime, Instant)>,
}

impl Writes {
    /// A write at GTID (or primary position) `g`: with the earlier ones,
    /// the highest per replication domain (each must be found applied).
    fn add(&mut self, g: String) {
        if !routing::is_gtid_list(&g) {
            // Nothing a replica could be asked to wait for (a MySQL GTID
            // set): the write is held as one of unknown GTID.
            return;
        }
        let merged = self
            .gtid
            .as_deref()
            .and_then(|old| routing::merge_gtids(old, &g));
        self.gtid = Some(merged.unwrap_or(g));
    }

    /// The session may have written, now, without its GTID being known.
    pub(super) fn unknown_since_now(&mut self, shared: &crate::frontend::Shared) {
        let cfg = shared.config.load();
        let interval = shared.pool.timings().check_interval;
        let bound = Duration::from_secs(cfg.routing.max_replication_lag_s + 1) + interval * 2;
        self.unknown = Some((std::time::SystemTime::now(), Instant::now() + bound));
    }
}

impl Session {
    /// Decides where the plain COM_QUERY `sql` goes: sets `self.route` to a
    /// replica, or leaves it `None` (the primary).
    pub(super) fn route_query(&mut self, sql: &[u8]) {
        self.route = None;
        let Some(lex) = self.split_lex() else {
            return;
        };
        // A replica backend held for its warnings or FOUND_ROWS(): a
        // statement that only reads those, or data, stays on it while the
        // replica may still take reads.
        if let Some(b) = &self.backend {
            if let Some(server) = self.shared.pool.replica_of(b.pool)
                && self.shared.pool.usable(b)
                && !self.in_server_schema(None)
                && self.in_read_set(server)
                && self.may_stay_on_replica(sql, lex)
            {
                self.route = Some(Routed {
                    key: b.pool,
                    server,
                    wait_for: None,
                });
            }
            return;
        }
        if !self.may_leave_primary() || self.in_server_schema(None) {
            return;
        }
        let analysis = self.marked_analysis(sql, lex);
        self.route_read(sql, &analysis, lex);
    }

    /// True when the session's schema (or `prepared_in`, a prepared
    /// statement's) is one of the server's own: unqualified names there
    /// read the server's state.
    fn in_server_schema(&self, prepared_in: Option<&[u8]>) -> bool {
        let own = |s: Option<&[u8]>| s.is_some_and(routing::is_server_schema);
        own(self.state.schema.as_deref()) || own(prepared_in)
    }

    /// True when replica `server` may take reads now.
    fn in_read_set(&self, server: usize) -> bool {
        let r = &self.shared.config.load().routing;
        self.shared
            .pool
            .servers
            .read_set(r.max_replication_lag_s, self.fresh())
            .iter()
            .any(|c| c.server == server)
    }

    /// How recent a replica's last check must be for it to take reads
    /// (without background checks nothing says a replica is current).
    fn fresh(&self) -> Duration {
        let interval = self.shared.pool.timings().check_interval;
        if interval.is_zero() {
            Duration::ZERO
        } else {
            interval * 2 + Duration::from_secs(1)
        }
    }

    /// As [`Self::route_query`], for a COM_STMT_EXECUTE of `entry` (its
    /// text decides; a cursor keeps the statement on the primary).
    pub(super) fn route_execute(&mut self, entry: &crate::prepared::StmtEntry, cursor: bool) {
        self.route = None;
        let Some(lex) = self.split_lex() else {
            return;
        };
        let prepared_in = entry.key.schema.as_deref();
        if cursor
            || self.backend.is_some()
            || !self.may_leave_primary()
            || self.in_server_schema(prepared_in)
        {
            return;
        }
        let mut analysis = entry.analysis(lex);
        // Its names resolve in the schema it was prepared in (where it is
        // prepared again on a backend that lacks it).
        let schema = prepared_in.unwrap_or_default();
        self.shared.pool.code_catalog.peek(|names| match names {
            Some(n) => {
                if entry.names_code(n) {
                    authority::mark_all_stored_code(&mut analysis);
                }
            }
            None => authority::mark_code_names(&mut analysis, &entry.key.sql, schema, None),
        });
        let analysis = analysis.into_owned();
        self.route_read(&entry.key.sql, &analysis, lex);
    }

    /// The session's lex options when the split is on and its text can be
    /// read (`None`: everything goes to the primary).
    fn split_lex(&self) -> Option<crate::sql::LexOptions> {
        let cfg = self.shared.config.load();
        (cfg.routing.read_write_split
            && self.shared.pool.servers.len() > 1
            && authority::lexable_charset(&self.state))
        .then(|| authority::lex_options(&self.state, self.status))
    }

    /// No transaction (nor a deferred BEGIN), autocommit on, nothing pinned.
    fn may_leave_primary(&self) -> bool {
        let in_trans = self.status & status::IN_TRANS != 0 || self.pending_begin;
        let autocommit = self.status & status::AUTOCOMMIT != 0;
        routing::session_may_leave(in_trans, autocommit, self.pins.any())
    }

    /// Routes the read `sql` (analysed as `analysis`) to a replica when it
    /// only reads and one may take it.
    fn route_read(&mut self, sql: &[u8], analysis: &Analysis, lex: crate::sql::LexOptions) {
        let pool = &self.shared.pool;
        if let Err(why) = routing::reads_only(sql, analysis, lex) {
            if why == Primary::Hint {
                pool.routing.kept(why);
            }
            return;
        }
        let cfg = self.shared.config.load();
        let r = &cfg.routing;
        if r.read_your_writes
            && let Some((at, until)) = self.writes.unknown
        {
            // A MariaDB position only: a MySQL GTID set (or none) cannot
            // be waited for, and the write is then held for its deadline.
            if let Some(pos) = pool
                .servers
                .primary_position_after(at)
                .filter(|p| routing::is_gtid_list(p))
            {
                self.writes.add(pos);
                self.writes.unknown = None;
            } else if Instant::now() < until {
                pool.routing.kept(Primary::Causal);
                return;
            } else {
                self.writes.unknown = None;
            }
        }
        let candidates = pool.servers.read_set(r.max_replication_lag_s, self.fresh());
        let causal = self.writes.gtid.as_deref().filter(|_| r.read_your_writes);
        match routing::pick(&candidates, causal, pool.servers.next_turn()) {
            Pick::Primary(why) => pool.routing.kept(why),
            Pick::Replica { server, wait_for } => {
                self.route = Some(Routed {
                    key: pool.replica_key(self.pool, server),
                    server,
                    wait_for,
                });
            }
        }
    }

    /// [`Self::checkout`] for the current command's route, counted on the
    /// replica it reached.
    pub(super) async fn checkout_routed(
        &mut self,
        seq: u8,
    ) -> Result<Option<Checkout>, super::End> {
        let co = self.checkout(seq).await?;
        if co.is_some()
            && let Some(r) = &self.route
        {
            self.shared.pool.servers.count_read(r.server);
        }
        Ok(co)
    }

    /// The analysis of `sql` with the statements that may run a view's or
    /// a trigger's code marked as the authority marks them.
    fn marked_analysis(&self, sql: &[u8], lex: crate::sql::LexOptions) -> Analysis {
        let mut analysis = std::borrow::Cow::Owned(crate::sql::analyze(sql, lex));
        let schema = self.state.schema.as_deref().unwrap_or_default();
        self.shared.pool.code_catalog.peek(|names| {
            authority::mark_code_names(&mut analysis, sql, schema, names);
        });
        analysis.into_owned()
    }

    /// Whether `sql` may run on the replica backend the session holds:
    /// it reads the held warnings, or only data and FOUND_ROWS() /
    /// ROW_COUNT() (which the held backend answers as direct).
    fn may_stay_on_replica(&self, sql: &[u8], lex: crate::sql::LexOptions) -> bool {
        let mut analysis = self.marked_analysis(sql, lex);
        for st in &mut analysis.statements {
            st.effects.retain(|e| {
                !matches!(e, Effect::Function(f)
                    if matches!(f.kind, FuncKind::FoundRows | FuncKind::RowCount))
            });
        }
        // SHOW WARNINGS, GET DIAGNOSTICS without targets: nothing is left
        // on the replica (GET DIAGNOSTICS … @v = … would leave a variable).
        let reads_diagnostics =
            crate::sql::keeps_diagnostics(sql, lex) == crate::sql::DiagnosticsUse::Reads;
        if reads_diagnostics {
            return !analysis.incomplete
                && analysis.statements.len() == 1
                && analysis.statements.iter().all(|st| st.effects.is_empty());
        }
        routing::reads_only(sql, &analysis, lex).is_ok()
    }

    /// The held backend is a replica's and went away (or stopped
    /// answering): it held nothing of the session but a warning list or a
    /// count, which go with it; `true` when that was the case (the session
    /// goes on), `false` when the held backend is not a replica's.
    pub(super) fn let_go_of_held_replica(&mut self) -> bool {
        let replica = self
            .backend
            .as_ref()
            .is_some_and(|b| self.shared.pool.replica_of(b.pool).is_some());
        if !replica || self.holds_more_than_a_replica_may() {
            return false;
        }
        // Dropped: closed, its place in the budget freed.
        self.backend = None;
        self.drop_replica_holds();
        true
    }

    /// True when the session holds more than a replica backend may hold
    /// for it (a warning list, a FOUND_ROWS() count): a transaction or
    /// any other pin.
    fn holds_more_than_a_replica_may(&self) -> bool {
        let mut hard = self.pins;
        hard.remove(PinReason::Diagnostics);
        hard.remove(PinReason::FoundRows);
        hard.any() || self.status & status::IN_TRANS != 0
    }

    /// What a replica backend held for the session (a warning list, a
    /// FOUND_ROWS() count) went with it: the session no longer holds it.
    pub(super) fn drop_replica_holds(&mut self) {
        self.inv.calc_found_rows = false;
        self.pins.remove(PinReason::Diagnostics);
        self.sync_inventory_pins();
    }

    /// The command goes to the primary after all (`why`): whatever the
    /// session held on a replica backend (a warning list, a count) is gone
    /// with it; checks a primary backend out.
    pub(super) async fn fall_back_to_primary(
        &mut self,
        seq: u8,
        why: Primary,
    ) -> Result<Option<Checkout>, super::End> {
        self.route = None;
        self.shared.pool.routing.kept(why);
        self.drop_replica_holds();
        Box::pin(self.checkout(seq)).await
    }

    /// The pool key a lease of the current command takes.
    pub(super) fn lease_key(&self) -> usize {
        self.route.as_ref().map_or(self.pool, |r| r.key)
    }

    /// Before a command that must not run on the replica backend the
    /// session holds: lets that backend go. It can hold only a warning
    /// list or a FOUND_ROWS() count there (nothing else is routed to a
    /// replica); those go, as a statement on another server would clear
    /// them. Anything else held there ends the session (fail closed: the
    /// state is on a server that must not take the command). `false` when
    /// the session ended.
    pub(super) async fn leave_replica_backend(&mut self, seq: u8) -> Result<bool, super::End> {
        let Some(b) = &self.backend else {
            return Ok(true);
        };
        if self.shared.pool.replica_of(b.pool).is_none()
            || (self.route.as_ref().is_some_and(|r| r.key == b.pool) && self.shared.pool.usable(b))
        {
            return Ok(true);
        }
        if self.holds_more_than_a_replica_may() {
            tracing::warn!(client = self.id, pins = ?self.pins, "session state on a replica backend: the session ends");
            self.backend = None;
            let e = errors::backend_lost("session state was left on a replica");
            self.lost_backend(seq, &e, true).await?;
            return Ok(false);
        }
        self.drop_replica_holds();
        self.release_if_unpinned();
        Ok(true)
    }

    /// Waits on the replica backend of `co` for the session's last write
    /// (`gtid`), at most `routing.causal_wait_ms`: `Some(true)` when the
    /// replica has applied it (then known for later reads), `Some(false)`
    /// when not in time, `None` when the backend failed.
    pub(super) async fn wait_for_write(
        &mut self,
        backend: &mut crate::pool::group::Leased,
        server: usize,
        gtid: &str,
    ) -> Option<bool> {
        let pool = &self.shared.pool;
        let ms = self.shared.config.load().routing.causal_wait_ms;
        let sql = routing::wait_statement(gtid, ms)?;
        let started = Instant::now();
        // The server's own wait ends it; a replica that stops answering
        // does not hold the slot longer than a second past it.
        let limit = Duration::from_millis(ms) + Duration::from_secs(1);
        let answer = match tokio::time::timeout(limit, backend.query_row(&sql)).await {
            Ok(answer) => answer,
            Err(_) => {
                pool.routing.waited(started.elapsed(), false);
                return None;
            }
        };
        let applied = matches!(
            &answer,
            Ok(Some(row)) if row.first().and_then(|v| v.as_deref()) == Some("0")
        );
        pool.routing.waited(started.elapsed(), applied);
        match answer {
            Ok(_) if applied => {
                pool.servers.note_applied(server, gtid);
                Some(true)
            }
            Ok(_) | Err(crate::backend::BackendError::Server(_)) => Some(false),
            Err(e) => {
                tracing::debug!(client = self.id, error = %e, "wait on a replica failed");
                None
            }
        }
    }

    /// After a command on the primary: what it taught of the session's
    /// writes. `gtid`: the `last_gtid` its reply reported; `failed`: it
    /// ended in an error; `may_write`: whether it is not a plain read
    /// (asked only when it matters).
    pub(super) fn note_primary_reply(
        &mut self,
        gtid: Option<String>,
        failed: bool,
        may_write: impl FnOnce() -> bool,
    ) {
        if let Some(g) = gtid {
            self.writes.add(g);
            return;
        }
        let cfg = self.shared.config.load();
        if !cfg.routing.read_write_split || self.shared.pool.servers.len() < 2 {
            return;
        }
        // A write whose GTID is not known: a failure part-way (a
        // non-transactional table keeps what it changed), or a server
        // that does not report `last_gtid`. The primary's position read by
        // a check after now covers it; failing that, a replica in the read
        // set is at most `max_replication_lag_s` behind as of its last
        // check, so past that (and two checks' age) it has the write.
        let reports = || self.shared.pool.server_info().is_mariadb();
        if (failed || !reports()) && may_write() {
            self.writes.unknown_since_now(&self.shared);
        }
    }
}
