//! Shared helpers for the integration tests (`tests/integration`, one test
//! binary; `benches/proxy_overhead.rs` includes them too).
//!
//! Not every test uses every helper, hence the `dead_code` allowances.

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

/// Held by a test that loads this whole process or the machine: thousands
/// of sockets in this process (its open-files limit, 20,000 here, is shared
/// by every test now that they run in one binary), sysbench at hundreds of
/// threads, MariaDB's own test suite on six servers. Such tests run one at
/// a time, each beside light tests only, as they did when each had its
/// binary to itself or shared it with light tests only. Take it first,
/// before the server (`MariaDb::shared()`), so that a test waiting here
/// holds none.
pub fn heavy() -> Heavy {
    let mut busy = HEAVY_BUSY.lock().unwrap_or_else(|p| p.into_inner());
    while *busy {
        busy = HEAVY_FREED.wait(busy).unwrap_or_else(|p| p.into_inner());
    }
    *busy = true;
    Heavy(())
}

static HEAVY_BUSY: std::sync::Mutex<bool> = std::sync::Mutex::new(false);
static HEAVY_FREED: std::sync::Condvar = std::sync::Condvar::new();

/// The right to run heavy (see [`heavy`]) until dropped; a test that
/// fails gives it back as it unwinds.
pub struct Heavy(());

impl Drop for Heavy {
    fn drop(&mut self) {
        *HEAVY_BUSY.lock().unwrap_or_else(|p| p.into_inner()) = false;
        HEAVY_FREED.notify_one();
    }
}
