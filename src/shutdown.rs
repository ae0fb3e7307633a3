//! One shutdown signal, passed explicitly. Sessions check it only at safe
//! points (between statements, outside a transaction), so a drain never cuts
//! a transaction in half.

use tokio::sync::watch;

/// A cloneable shutdown handle.
#[derive(Debug, Clone)]
pub struct Shutdown {
    rx: watch::Receiver<bool>,
}

/// The sending side, held by whoever decides to stop.
#[derive(Debug)]
pub struct ShutdownTrigger {
    tx: watch::Sender<bool>,
}

/// A new trigger and its handle.
pub fn channel() -> (ShutdownTrigger, Shutdown) {
    let (tx, rx) = watch::channel(false);
    (ShutdownTrigger { tx }, Shutdown { rx })
}

impl ShutdownTrigger {
    /// Signals every handle.
    pub fn trigger(&self) {
        let _ = self.tx.send(true);
    }
}

impl Shutdown {
    /// True once shutdown was triggered.
    pub fn is_triggered(&self) -> bool {
        *self.rx.borrow()
    }

    /// Resolves when shutdown is triggered.
    pub async fn wait(&mut self) {
        while !*self.rx.borrow_and_update() {
            if self.rx.changed().await.is_err() {
                // Trigger dropped without firing: never resolves.
                std::future::pending::<()>().await;
            }
        }
    }
}
