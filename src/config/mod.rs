//! Configuration: the model (every key with its default), loading from the
//! embedded default, a TOML file and `MYPLEX_…` environment overrides, and
//! validation that names the offending key.

pub mod address;
mod load;
mod model;
pub mod redact;
mod server_users;

pub use address::Address;
pub use load::{ConfigError, DEFAULT_TOML, MAX_WEIGHT, load, load_str, socket_mode};
pub use model::*;
pub use server_users::ServerUsersConfig;
