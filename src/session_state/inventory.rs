//! The unshareable state a session holds on its backend connection that the
//! server does not report (or reports without detail): user variables,
//! temporary tables, named locks, table locks, handlers, text-protocol
//! prepared statements, XA, one-shot settings, variables that cannot be
//! replayed, an active role, sequence values. Kept by name so that each pin ends when its cause ends.
//!
//! Pure bookkeeping: [`super::authority`] feeds it the effects of each
//! statement that ran and turns it into pins.

use std::collections::{BTreeMap, BTreeSet};

use super::pins::{PinReason, Pins};

/// A table name as a statement wrote it: optional schema, name.
pub type TableName = (Option<Vec<u8>>, Vec<u8>);

/// What the session holds on its backend beyond replayable values.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inventory {
    /// User variables assigned a value other than a literal NULL.
    pub user_vars: BTreeSet<Vec<u8>>,
    /// Stored code left user variables the text does not name (the server
    /// counted more than `user_vars`): pinned until a count finds none.
    pub user_vars_unverified: bool,
    /// Temporary tables, by (schema at creation, name).
    pub temp_tables: BTreeSet<(Vec<u8>, Vec<u8>)>,
    /// Named locks (GET_LOCK) the server confirmed this session holds, by
    /// the bytes the server keys them with (the name converted to the
    /// connection's character set as the statement was read).
    pub locks: BTreeSet<Vec<u8>>,
    /// GET_LOCK arguments of the query that just ran, as the client wrote
    /// them (see [`crate::sql::Effect::GetLock`]): checked, and turned into
    /// [`Self::locks`], on the same backend before anything else runs
    /// there. Only valid under the settings the query ran with.
    pub pending_locks: BTreeSet<Vec<u8>>,
    /// A lock whose name is not a literal was taken: only
    /// RELEASE_ALL_LOCKS (or a reset) proves it gone.
    pub unnamed_lock: bool,
    /// LOCK TABLES in effect.
    pub table_locks: bool,
    /// FLUSH TABLES WITH READ LOCK / FOR EXPORT in effect.
    pub global_read_lock: bool,
    /// BACKUP STAGE / BACKUP LOCK in effect.
    pub backup: bool,
    /// Open HANDLER aliases (lowercase).
    pub handlers: BTreeSet<Vec<u8>>,
    /// Text-protocol prepared statement names (lowercase).
    pub text_prepared: BTreeSet<Vec<u8>>,
    /// Those whose text may change which names run code (DDL, a CALL,
    /// dynamic SQL, or a text not seen: prepared from an expression).
    pub ddl_prepared: BTreeSet<Vec<u8>>,
    /// Those whose text may take a lock that lives in the session (LOCK
    /// TABLES, FLUSH … WITH READ LOCK / FOR EXPORT, BACKUP, HANDLER), or
    /// whose text was not seen: executing one leaves state the proxy
    /// cannot see end (`unknown` from then on).
    pub lock_prepared: BTreeSet<Vec<u8>>,
    /// An XA transaction is associated with the session.
    pub xa: bool,
    /// One-shot transaction characteristics (`SET TRANSACTION` without a
    /// scope) await the next transaction. Only a statement that certainly
    /// starts or ends one ends them here (the server keeps them through
    /// `SELECT 2`, `DO`, a MyISAM read; an InnoDB read consumes them, which
    /// the text cannot tell apart): fail closed.
    pub one_shot: bool,
    /// A one-shot `insert_id` awaits the insert that uses it.
    pub insert_id_pending: bool,
    /// Its value, when the text assigned a number: the insert whose OK
    /// reports exactly it used it (an explicit id does not; without a
    /// value only `insert_id = 0` / `DEFAULT` ends it here).
    pub insert_id_forced: Option<u64>,
    /// Variables that cannot be replayed, set away from their default,
    /// with the value last reported.
    pub pinning_vars: BTreeMap<String, String>,
    /// Something changed that nothing explains (a bare state change, state
    /// created by stored code): only a reset proves it gone.
    pub unknown: bool,
    /// The client changed its session trackers.
    pub trackers: bool,
    /// FOUND_ROWS() must be read on this backend for the next statement:
    /// SQL_CALC_FOUND_ROWS ran, or a LIMIT offset made the rows the proxy
    /// counted differ from the server's value (`local::found_rows_after`).
    pub calc_found_rows: bool,
    /// SET ROLE ran, or stored code left another active role than the
    /// backend's login role: held for the session's life (COM_RESET_CONNECTION
    /// does not restore a role, so the backend is closed afterwards).
    pub role: bool,
    /// NEXTVAL ran: LASTVAL() must keep answering this session's
    /// values, as it does until the session ends or resets.
    pub sequences: bool,
}

impl Inventory {
    /// The pins this inventory implies.
    pub fn pins(&self) -> Pins {
        let mut p = Pins::default();
        let mut set = |on: bool, r: PinReason| {
            if on {
                p.add(r);
            }
        };
        set(
            !self.user_vars.is_empty() || self.user_vars_unverified,
            PinReason::UserVariable,
        );
        set(!self.temp_tables.is_empty(), PinReason::TemporaryTable);
        set(
            !self.locks.is_empty() || !self.pending_locks.is_empty() || self.unnamed_lock,
            PinReason::UserLock,
        );
        set(
            self.table_locks || self.global_read_lock || self.backup,
            PinReason::LockTables,
        );
        set(!self.handlers.is_empty(), PinReason::Handler);
        set(!self.text_prepared.is_empty(), PinReason::TextPrepare);
        set(self.xa, PinReason::Xa);
        set(self.one_shot || self.insert_id_pending, PinReason::OneShot);
        set(!self.pinning_vars.is_empty(), PinReason::SessionVariable);
        set(self.unknown, PinReason::UnknownState);
        set(self.trackers, PinReason::Trackers);
        set(self.calc_found_rows, PinReason::FoundRows);
        set(self.role, PinReason::Role);
        set(self.sequences, PinReason::Sequence);
        p
    }

    /// True when nothing is held.
    pub fn is_empty(&self) -> bool {
        !self.pins().any()
    }

    /// The pending GET_LOCK arguments cannot be checked (the check failed,
    /// or the query changed how its own text reads): whatever they took
    /// stays until RELEASE_ALL_LOCKS or a reset proves it gone.
    pub fn give_up_pending_locks(&mut self) {
        if !self.pending_locks.is_empty() {
            self.pending_locks.clear();
            self.unnamed_lock = true;
        }
    }

    /// Everything a COM_RESET_CONNECTION / COM_CHANGE_USER ends.
    pub fn clear(&mut self) {
        *self = Self::default();
    }

    /// Forgets temporary tables matching a dropped name (`schema` is the
    /// session's current one when the statement did not name one).
    pub fn drop_table(&mut self, current: &[u8], t: &TableName) {
        let schema = t.0.clone().unwrap_or_else(|| current.to_vec());
        self.temp_tables.remove(&(schema, t.1.clone()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pins_follow_contents() {
        let mut inv = Inventory::default();
        assert!(inv.is_empty());
        inv.user_vars.insert(b"x".to_vec());
        inv.temp_tables.insert((b"test".to_vec(), b"t".to_vec()));
        let p = inv.pins();
        assert!(p.has(PinReason::UserVariable) && p.has(PinReason::TemporaryTable));
        inv.user_vars.clear();
        inv.drop_table(b"test", &(None, b"t".to_vec()));
        assert!(inv.is_empty());
        inv.unnamed_lock = true;
        assert!(inv.pins().has(PinReason::UserLock));
        inv.clear();
        assert!(inv.is_empty());
    }
}
