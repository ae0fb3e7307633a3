//! Backend connections: dialing, TLS, login with both auth plugins, session
//! trackers, and the internal request/response helpers the pool and the
//! session use (ping, reset, state sync). The forwarding of client commands
//! happens in `frontend::relay`; this module never sees a client.

pub mod conn;
pub mod connect;
pub mod tls;

pub use conn::{BackendConn, BackendError, BackendId, InternalReply, Prepared};
pub use connect::{BackendParams, ServerInfo, connect};
