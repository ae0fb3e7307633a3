//! What pins a session to its backend connection, and a light scan of SQL
//! text for state the trackers do not (reliably) report.

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
}

impl PinReason {
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
        }
    }

    /// Reasons that also make the session high priority (it holds locks).
    pub fn holds_lock(self) -> bool {
        matches!(
            self,
            PinReason::Transaction | PinReason::UserLock | PinReason::LockTables
        )
    }
}

/// The set of active pin reasons (a small bit set).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pins(u16);

impl Pins {
    fn bit(r: PinReason) -> u16 {
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
    pub fn bits(self) -> u16 {
        self.0
    }
    /// Rebuilds from [`Self::bits`].
    pub fn from_bits(bits: u16) -> Self {
        Self(bits)
    }
    /// Clears everything but the session-mode pin.
    pub fn clear_state(&mut self) {
        self.0 &= Self::bit(PinReason::SessionMode);
    }
    /// The first active reason, for messages and metrics.
    pub fn primary(self) -> Option<PinReason> {
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
        ]
        .into_iter()
        .find(|r| self.has(*r))
    }
}

/// What a statement's text says about pinning.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Scan {
    /// Reasons the statement adds.
    pub adds: Pins,
    /// UNLOCK TABLES: the LOCK TABLES pin may go.
    pub unlock_tables: bool,
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len())
        .any(|w| w.eq_ignore_ascii_case(needle))
}

fn starts_with_word(sql: &[u8], word: &[u8]) -> bool {
    sql.len() >= word.len()
        && sql[..word.len()].eq_ignore_ascii_case(word)
        && sql
            .get(word.len())
            .is_none_or(|c| !c.is_ascii_alphanumeric() && *c != b'_')
}

/// True when `sql` assigns or reads a user variable (`@name`, not `@@sys`).
fn uses_user_variable(sql: &[u8]) -> bool {
    sql.iter().enumerate().any(|(i, &c)| {
        c == b'@'
            && (i == 0 || sql[i - 1] != b'@')
            && sql.get(i + 1).is_some_and(|n| {
                n.is_ascii_alphanumeric() || *n == b'_' || *n == b'`' || *n == b'\'' || *n == b'"'
            })
    })
}

/// Scans one COM_QUERY for state the trackers may not explain. Conservative:
/// a false positive only costs multiplexing for that session.
pub fn scan_statement(sql: &[u8]) -> Scan {
    let trimmed = {
        let start = sql
            .iter()
            .position(|c| !c.is_ascii_whitespace() && *c != b'(')
            .unwrap_or(sql.len());
        &sql[start..]
    };
    let mut s = Scan::default();
    if uses_user_variable(sql) {
        s.adds.add(PinReason::UserVariable);
    }
    if contains(sql, b"get_lock") {
        s.adds.add(PinReason::UserLock);
    }
    if contains(sql, b"temporary") && contains(sql, b"create") {
        s.adds.add(PinReason::TemporaryTable);
    }
    if contains(sql, b"sql_calc_found_rows") {
        s.adds.add(PinReason::FoundRows);
    }
    if starts_with_word(trimmed, b"lock") {
        s.adds.add(PinReason::LockTables);
    }
    if starts_with_word(trimmed, b"unlock") {
        s.unlock_tables = true;
    }
    if starts_with_word(trimmed, b"prepare") {
        s.adds.add(PinReason::TextPrepare);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scans() {
        assert!(
            scan_statement(b"SET @x = 1")
                .adds
                .has(PinReason::UserVariable)
        );
        assert!(
            scan_statement(b"select 1 into @v")
                .adds
                .has(PinReason::UserVariable)
        );
        assert!(!scan_statement(b"SELECT @@version").adds.any());
        assert!(
            !scan_statement(b"SELECT 'a@b'")
                .adds
                .has(PinReason::UserLock)
        );
        assert!(
            scan_statement(b"select GET_LOCK('a', 1)")
                .adds
                .has(PinReason::UserLock)
        );
        assert!(
            scan_statement(b"CREATE TEMPORARY TABLE t (a int)")
                .adds
                .has(PinReason::TemporaryTable)
        );
        assert!(
            scan_statement(b" LOCK TABLES t WRITE")
                .adds
                .has(PinReason::LockTables)
        );
        assert!(scan_statement(b"unlock tables").unlock_tables);
        assert!(!scan_statement(b"SELECT * FROM locks").adds.any());
        assert!(
            scan_statement(b"PREPARE s FROM 'select 1'")
                .adds
                .has(PinReason::TextPrepare)
        );
        assert!(!scan_statement(b"SELECT 1").adds.any());
    }

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
