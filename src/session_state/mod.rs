//! Session state a client expects to survive being moved between backend
//! connections, and the one authority that decides whether a backend may be
//! shared: what the state is (schema, replayable variables, unshareable
//! inventory), how it is learned (session trackers, the SQL lexer, probes),
//! how it is replayed onto a leased backend, and what pins a session.

pub mod authority;
pub mod code_names;
mod inventory;
mod pins;
mod tracked;
pub mod variables;

pub use authority::{BackendMarks, Followup, Release, Reply};
pub use inventory::Inventory;
pub use pins::{PinReason, Pins};
pub use tracked::{ApplyEffects, LoginDefaults, SyncPlan, TrackedState};
