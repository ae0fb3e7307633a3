//! Shared helpers for integration tests.
//!
//! Every test binary that needs them declares `mod common;`. Not every binary
//! uses every helper, hence the `dead_code` allowances.

#![allow(dead_code)]

pub mod binary;
pub mod mariadb;

#[allow(unused_imports)]
pub use mariadb::{MariaDb, free_port, mariadb_bin};

pub mod load;
pub mod proxy;
pub mod raw;
pub mod sysbench;
pub mod tls;

#[allow(unused_imports)]
pub use proxy::Proxy;
