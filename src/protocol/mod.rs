//! The MySQL client/server protocol as pure data: framing, the control packets
//! the proxy reads or writes, response boundaries, session-state tracking,
//! capabilities, command bytes and the errors myplex originates.
//!
//! Nothing here does I/O; everything is tested on captured or hand-built bytes.

pub mod caps;
pub mod collations;
pub mod command;
pub mod errors;
pub mod framing;
pub mod greeting;
pub mod lenenc;
pub mod packets;
pub mod response;
pub mod session_track;
