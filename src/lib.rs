//! myplex — a MySQL-protocol pooling proxy.
//!
//! Clients speak the MySQL protocol to myplex; myplex multiplexes them onto a
//! small, fixed set of backend connections organised as thread groups with
//! transaction-aware priority queues (the Percona / MariaDB thread-pool model).
//!
//! ```text
//! server ─ accept ─► frontend::handshake ─► frontend::session (command loop)
//!                                              │ needs a backend
//!                                              ▼
//!                       pool::group (thread group: high/low queues, in-flight cap,
//!                                    stall timer, kickup) ─► backend lease
//!                                              │ session_state: sync, pins
//!                                              ▼
//!                       frontend::relay: forward the response byte for byte,
//!                       translating only control packets (protocol::*)
//! ```
//!
//! Layers: `protocol` is pure (framing, control packets, response boundaries,
//! session tracking); `wire` does socket I/O; `backend` logs in to the server;
//! `pool` schedules; `session_state` knows what a client's session is and
//! what pins it; `frontend` serves clients; `listener` binds the client socket (TCP or
//! a Unix socket file); `server` accepts them;
//! `reload` swaps in a changed configuration while clients stay connected;
//! `takeover` hands the listening sockets to a new process (upgrade).
//! `server_users` looks login names up in the backend when configured.

pub mod admin;
pub mod backend;
pub mod bench;
pub mod config;
pub mod frontend;
pub mod id_map;
pub mod listener;
pub mod metrics;
pub mod pool;
pub mod prepared;
pub mod priority;
pub mod protocol;
pub mod reload;
pub mod server;
pub mod server_users;
pub mod session_state;
pub mod shutdown;
pub mod slow_log;
pub mod sql;
pub mod takeover;
pub mod telemetry;
pub mod wire;
pub mod workers;
