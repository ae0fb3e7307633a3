//! Socket I/O for both sides of the proxy: a TCP-or-Unix-socket stream
//! (TLS over either), the
//! compressed-protocol layer, and a packet reader/writer with one read
//! buffer and one write buffer per connection. Knows framing, nothing about
//! commands or sessions.

pub mod compress;
pub mod large;
pub mod packet_io;
pub mod stream;

pub use packet_io::{PacketIo, WireError};
pub use stream::{Peer, Socket, Stream};
