//! One shutdown signal, passed explicitly. Sessions check it only at safe
//! points (between statements, outside a transaction), so a drain never cuts
//! a transaction in half. A drain after a hand-over of the listeners
//! (`crate::takeover`) is marked as such: clients this process accepted
//! just before it are served, not refused (no other process will).

use tokio::sync::watch;

/// A cloneable shutdown handle.
#[derive(Debug, Clone)]
pub struct Shutdown {
    rx: watch::Receiver<State>,
}

/// Where the process is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Running,
    Draining,
    /// Draining because a successor accepts on the listeners now.
    HandedOver,
}

/// The sending side, held by whoever decides to stop.
#[derive(Debug)]
pub struct ShutdownTrigger {
    tx: watch::Sender<State>,
}

/// A new trigger and its handle.
pub fn channel() -> (ShutdownTrigger, Shutdown) {
    let (tx, rx) = watch::channel(State::Running);
    (ShutdownTrigger { tx }, Shutdown { rx })
}

impl ShutdownTrigger {
    /// Signals every handle.
    pub fn trigger(&self) {
        self.tx.send_if_modified(|s| {
            let changed = *s == State::Running;
            if changed {
                *s = State::Draining;
            }
            changed
        });
    }

    /// Signals every handle: the listeners were handed to a successor.
    pub fn hand_over(&self) {
        self.tx.send_if_modified(|s| {
            let changed = *s != State::HandedOver;
            *s = State::HandedOver;
            changed
        });
    }
}

impl Shutdown {
    /// True once shutdown was triggered.
    pub fn is_triggered(&self) -> bool {
        *self.rx.borrow() != State::Running
    }

    /// True once the listeners were handed to a successor.
    pub fn handed_over(&self) -> bool {
        *self.rx.borrow() == State::HandedOver
    }

    /// Resolves when shutdown is triggered.
    pub async fn wait(&mut self) {
        while *self.rx.borrow_and_update() == State::Running {
            if self.rx.changed().await.is_err() {
                // Trigger dropped without firing: never resolves.
                std::future::pending::<()>().await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn hand_over_is_a_drain_of_its_own_kind() {
        let (t, mut s) = channel();
        assert!(!s.is_triggered() && !s.handed_over());
        t.hand_over();
        s.wait().await;
        assert!(s.is_triggered() && s.handed_over());
        // A later SIGTERM does not hide the hand-over.
        t.trigger();
        assert!(s.handed_over());
        let (t, s) = channel();
        t.trigger();
        assert!(s.is_triggered() && !s.handed_over());
    }
}
