//! Session state a client expects to survive being moved between backend
//! connections: what it is (schema, changed session variables), how it is
//! learned (session-tracker blocks of OK packets), how it is replayed onto a
//! leased backend, and what pins a session to one backend.

mod pins;
mod tracked;

pub use pins::{PinReason, Pins, scan_statement};
pub use tracked::{ApplyEffects, SyncPlan, TrackedState};
