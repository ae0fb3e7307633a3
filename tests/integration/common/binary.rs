//! The `myplex` binary as its own process, for tests that look at the
//! process itself (its memory, its threads): started with a configuration
//! written to a temporary file, ready once a client's login succeeds.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use myplex::config::Config;
use mysql_async::{Conn, Opts};

use super::mariadb::{APP_PASSWORD, APP_USER};

/// A running `myplex` process; killed and its configuration file removed
/// on drop.
pub struct Binary {
    child: tokio::process::Child,
    path: PathBuf,
    /// Its process id.
    pub pid: u32,
}

impl Binary {
    /// Starts the binary with `cfg` (whose `listen` must be a TCP address
    /// and whose users must include `APP_USER`) and returns it with a
    /// client logged in through it as `APP_USER`, once it serves (20 s at
    /// most).
    pub async fn start(cfg: &Config, name: &str) -> (Self, Conn) {
        let path = std::env::temp_dir().join(format!(
            "myplex-{name}-{}-{}.toml",
            std::process::id(),
            super::free_port()
        ));
        std::fs::write(&path, toml::to_string(cfg).expect("config as TOML")).expect("write config");
        let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_myplex"))
            .arg("--config")
            .arg(&path)
            .kill_on_drop(true)
            .spawn()
            .expect("start myplex");
        let pid = child.id().expect("pid");
        let bin = Self { child, path, pid };
        let url = format!(
            "mysql://{APP_USER}:{APP_PASSWORD}@{}/test?prefer_socket=false",
            cfg.listen
        );
        let t = Instant::now();
        let conn = loop {
            match Conn::new(Opts::from_url(&url).expect("url")).await {
                Ok(c) => break c,
                Err(e) if t.elapsed() > Duration::from_secs(20) => {
                    panic!("myplex did not start: {e}")
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        };
        (bin, conn)
    }

    /// Stops the process and waits for it.
    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

impl Drop for Binary {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
        let _ = std::fs::remove_file(&self.path);
    }
}
