//! One backend connection's prepared statements: registry id → the
//! backend's own statement id and the parameter types it last saw, with
//! least-recently-used eviction above a per-connection cap. Statements
//! holding an open cursor or long data (busy) are never evicted.

/// A statement prepared on one backend connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendStmt {
    /// The backend's statement id.
    pub id: u32,
    /// Parameter types the backend statement last received.
    pub types: Option<std::sync::Arc<[u8]>>,
    used: u64,
    /// A cursor or long data of the pinned session lives on it.
    busy: bool,
}

/// The map.
#[derive(Debug, Default)]
pub struct BackendStmts {
    map: crate::id_map::IdMap<u64, BackendStmt>,
    clock: u64,
}

impl BackendStmts {
    /// Looks up (and touches) a registry entry's backend statement.
    pub fn get_mut(&mut self, entry: u64) -> Option<&mut BackendStmt> {
        self.clock += 1;
        let clock = self.clock;
        let s = self.map.get_mut(&entry)?;
        s.used = clock;
        Some(s)
    }

    /// The backend id of a registry entry, without touching it.
    pub fn id_of(&self, entry: u64) -> Option<u32> {
        self.map.get(&entry).map(|s| s.id)
    }

    /// Marks a statement as carrying a cursor or long data (or no longer).
    pub fn set_busy(&mut self, entry: u64, busy: bool) {
        if let Some(s) = self.map.get_mut(&entry) {
            s.busy = busy;
        }
    }

    /// Records a fresh prepare; returns backend ids to close: a copy the
    /// connection already had of the same statement (two clients raced to
    /// prepare it; a busy copy stays and the fresh one is closed), and the
    /// least recently used idle ones above `cap`.
    pub fn insert(&mut self, entry: u64, id: u32, cap: usize) -> Vec<u32> {
        self.clock += 1;
        let mut close = Vec::new();
        match self.map.get_mut(&entry) {
            Some(old) if old.busy => {
                old.used = self.clock;
                if old.id != id {
                    close.push(id);
                }
            }
            _ => {
                if let Some(old) = self.map.insert(
                    entry,
                    BackendStmt {
                        id,
                        types: None,
                        used: self.clock,
                        busy: false,
                    },
                ) && old.id != id
                {
                    close.push(old.id);
                }
            }
        }
        close.extend(self.evict_above(cap.max(1), Some(entry)));
        close
    }

    /// Makes room for one more statement under `cap`: returns the backend
    /// ids of the least recently used idle statements to close.
    pub fn make_room(&mut self, cap: usize) -> Vec<u32> {
        self.evict_above(cap.max(1) - 1, None)
    }

    /// Forgets every idle statement (the server's statement limit was hit);
    /// returns their backend ids to close.
    pub fn evict_idle(&mut self) -> Vec<u32> {
        self.evict_above(0, None)
    }

    fn evict_above(&mut self, cap: usize, keep: Option<u64>) -> Vec<u32> {
        let mut close = Vec::new();
        while self.map.len() > cap {
            let Some((&k, _)) = self
                .map
                .iter()
                .filter(|(k, s)| Some(**k) != keep && !s.busy)
                .min_by_key(|(_, s)| s.used)
            else {
                break;
            };
            if let Some(s) = self.map.remove(&k) {
                close.push(s.id);
            }
        }
        close
    }

    /// Forgets a statement unless it is busy; returns its backend id.
    pub fn remove_idle(&mut self, entry: u64) -> Option<u32> {
        if self.map.get(&entry).is_some_and(|s| s.busy) {
            return None;
        }
        self.remove(entry)
    }

    /// Forgets a statement (closed or invalidated); returns its backend id.
    pub fn remove(&mut self, entry: u64) -> Option<u32> {
        self.map.remove(&entry).map(|s| s.id)
    }

    /// Statements held.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when none.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Forgets everything (after COM_RESET_CONNECTION).
    pub fn clear(&mut self) {
        self.map.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_close_above_cap() {
        let mut m = BackendStmts::default();
        assert!(m.insert(1, 101, 2).is_empty());
        assert!(m.insert(2, 102, 2).is_empty());
        m.get_mut(1);
        assert_eq!(m.insert(3, 103, 2), vec![102], "least recently used closes");
        assert_eq!(m.get_mut(1).map(|s| s.id), Some(101));
        assert!(m.get_mut(2).is_none());
        assert_eq!(m.remove(3), Some(103));
        assert_eq!(m.len(), 1);
    }

    #[test]
    fn busy_statements_are_never_evicted() {
        let mut m = BackendStmts::default();
        assert!(m.insert(1, 101, 2).is_empty());
        assert!(m.insert(2, 102, 2).is_empty());
        m.set_busy(1, true);
        assert_eq!(m.make_room(2), vec![102], "the idle one makes room");
        assert!(m.make_room(1).is_empty(), "a busy statement stays");
        assert!(m.insert(3, 103, 1).is_empty(), "over the cap while busy");
        assert_eq!(m.len(), 2);
        assert_eq!(m.insert(1, 104, 4), vec![104], "a busy copy is kept");
        assert_eq!(m.id_of(1), Some(101));
        assert_eq!(m.evict_idle(), vec![103]);
        m.set_busy(1, false);
        assert_eq!(m.evict_idle(), vec![101]);
        assert!(m.is_empty());
    }

    #[test]
    fn a_second_copy_closes_the_first() {
        let mut m = BackendStmts::default();
        assert!(m.insert(1, 101, 8).is_empty());
        assert_eq!(
            m.insert(1, 102, 8),
            vec![101],
            "no server statement is leaked"
        );
        assert_eq!(m.get_mut(1).map(|s| s.id), Some(102));
    }
}
