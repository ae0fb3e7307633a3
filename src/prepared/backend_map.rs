//! One backend connection's prepared statements: registry id → the
//! backend's own statement id and the parameter types it last saw, with
//! least-recently-used eviction above a per-connection cap.

use std::collections::HashMap;

/// A statement prepared on one backend connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendStmt {
    /// The backend's statement id.
    pub id: u32,
    /// Parameter types the backend statement last received.
    pub types: Option<std::sync::Arc<[u8]>>,
    used: u64,
}

/// The map.
#[derive(Debug, Default)]
pub struct BackendStmts {
    map: HashMap<u64, BackendStmt>,
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

    /// Records a fresh prepare; returns backend ids to close: a copy the
    /// connection already had of the same statement (two clients raced to
    /// prepare it), and the least recently used above `cap`.
    pub fn insert(&mut self, entry: u64, id: u32, cap: usize) -> Vec<u32> {
        self.clock += 1;
        let mut close = Vec::new();
        if let Some(old) = self.map.insert(
            entry,
            BackendStmt {
                id,
                types: None,
                used: self.clock,
            },
        ) && old.id != id
        {
            close.push(old.id);
        }
        while self.map.len() > cap.max(1) {
            let Some((&k, _)) = self
                .map
                .iter()
                .filter(|(k, _)| **k != entry)
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
