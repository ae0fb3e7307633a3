//! Why a session holds on to its backend connection: the reasons, as a
//! small set. What sets and clears them is decided in
//! [`super::authority`].

/// Why a session holds on to its backend connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PinReason {
    /// SERVER_STATUS_IN_TRANS is set.
    Transaction,
    /// `pool.mode = "session"`.
    SessionMode,
    /// User variables were set.
    UserVariable,
    /// Temporary tables exist.
    TemporaryTable,
    /// GET_LOCK / named locks held.
    UserLock,
    /// LOCK TABLES in effect.
    LockTables,
    /// Text-protocol PREPARE statements exist.
    TextPrepare,
    /// SQL_CALC_FOUND_ROWS awaits FOUND_ROWS().
    FoundRows,
    /// A server-side cursor is open (COM_STMT_FETCH pending).
    Cursor,
    /// SEND_LONG_DATA accumulated on the backend statement awaits EXECUTE.
    LongData,
    /// The last statement left warnings or an error: its diagnostics area is
    /// on this backend (held briefly, see `pool.diagnostics_hold_ms`).
    Diagnostics,
    /// The server reported a state change we cannot replay.
    UnknownState,
    /// The client changed the session trackers.
    Trackers,
    /// HANDLER tables are open.
    Handler,
    /// An XA transaction is associated with the session.
    Xa,
    /// A one-shot setting (SET TRANSACTION, insert_id) awaits its statement.
    OneShot,
    /// A session variable that cannot be replayed is set.
    SessionVariable,
    /// SET ROLE ran (or stored code changed the active role): privileges
    /// are this session's own.
    Role,
    /// NEXTVAL ran: LASTVAL() holds this session's values.
    Sequence,
}

impl PinReason {
    /// Every reason.
    pub const ALL: [PinReason; 19] = {
        use PinReason::*;
        [
            Transaction,
            SessionMode,
            UserVariable,
            TemporaryTable,
            UserLock,
            LockTables,
            TextPrepare,
            FoundRows,
            Cursor,
            LongData,
            Diagnostics,
            UnknownState,
            Trackers,
            Handler,
            Xa,
            OneShot,
            SessionVariable,
            Role,
            Sequence,
        ]
    };

    /// Stable label for metrics.
    pub fn label(self) -> &'static str {
        match self {
            PinReason::Transaction => "transaction",
            PinReason::SessionMode => "session_mode",
            PinReason::UserVariable => "user_variable",
            PinReason::TemporaryTable => "temporary_table",
            PinReason::UserLock => "user_lock",
            PinReason::LockTables => "lock_tables",
            PinReason::TextPrepare => "text_prepare",
            PinReason::FoundRows => "found_rows",
            PinReason::Cursor => "cursor",
            PinReason::LongData => "long_data",
            PinReason::Diagnostics => "diagnostics",
            PinReason::UnknownState => "unknown_state",
            PinReason::Trackers => "trackers",
            PinReason::Handler => "handler",
            PinReason::Xa => "xa",
            PinReason::OneShot => "one_shot",
            PinReason::SessionVariable => "session_variable",
            PinReason::Role => "role",
            PinReason::Sequence => "sequence",
        }
    }

    /// Reasons that also make the session high priority (it holds locks).
    pub fn holds_lock(self) -> bool {
        matches!(
            self,
            PinReason::Transaction | PinReason::UserLock | PinReason::LockTables | PinReason::Xa
        )
    }
}

const INVENTORY_MASK: u32 = {
    use PinReason::*;
    let rs = [
        UserVariable,
        TemporaryTable,
        UserLock,
        LockTables,
        TextPrepare,
        FoundRows,
        UnknownState,
        Trackers,
        Handler,
        Xa,
        OneShot,
        SessionVariable,
        Role,
        Sequence,
    ];
    let mut m = 0u32;
    let mut i = 0;
    while i < rs.len() {
        m |= 1 << (rs[i] as u32);
        i += 1;
    }
    m
};

/// The set of active pin reasons (a small bit set).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pins(u32);

impl Pins {
    fn bit(r: PinReason) -> u32 {
        1 << (r as u16)
    }
    /// Adds a reason.
    pub fn add(&mut self, r: PinReason) {
        self.0 |= Self::bit(r);
    }
    /// Removes a reason.
    pub fn remove(&mut self, r: PinReason) {
        self.0 &= !Self::bit(r);
    }
    /// True when `r` is active.
    pub fn has(self, r: PinReason) -> bool {
        self.0 & Self::bit(r) != 0
    }
    /// True when anything pins.
    pub fn any(self) -> bool {
        self.0 != 0
    }
    /// True when the session holds a lock (high priority in `transactions` mode).
    pub fn holds_lock(self) -> bool {
        self.has(PinReason::Transaction)
            || self.has(PinReason::UserLock)
            || self.has(PinReason::LockTables)
    }
    /// The raw bit set (for lock-free sharing).
    pub fn bits(self) -> u32 {
        self.0
    }
    /// Rebuilds from [`Self::bits`].
    pub fn from_bits(bits: u32) -> Self {
        Self(bits)
    }
    /// Clears everything but the session-mode pin.
    pub fn clear_state(&mut self) {
        self.0 &= Self::bit(PinReason::SessionMode);
    }
    /// Replaces the reasons that come from the session's inventory
    /// ([`super::Inventory::pins`]) with `inv`, keeping the others
    /// (transaction, session mode, cursors, long data, diagnostics).
    pub fn set_inventory(&mut self, inv: Pins) {
        self.0 = (self.0 & !INVENTORY_MASK) | (inv.0 & INVENTORY_MASK);
    }
    /// The first active reason, for messages and metrics.
    pub fn primary(self) -> Option<PinReason> {
        PinReason::ALL.into_iter().find(|r| self.has(*r))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pin_set() {
        let mut p = Pins::default();
        assert!(!p.any());
        p.add(PinReason::SessionMode);
        p.add(PinReason::UserLock);
        assert!(p.holds_lock());
        assert_eq!(p.primary(), Some(PinReason::SessionMode));
        p.clear_state();
        assert!(p.has(PinReason::SessionMode));
        assert!(!p.has(PinReason::UserLock));
    }
}
