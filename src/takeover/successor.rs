//! `SIGUSR2`: start the binary on disk (the path this process was started
//! from, so an upgraded file is the one run) with this process's arguments
//! plus `--takeover`. The successor takes the listeners over through the
//! control socket; this process only watches it and logs its failure.

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tracing::{error, info, warn};

/// Starts successors, one at a time.
#[derive(Debug, Clone)]
pub struct Successor {
    exe: PathBuf,
    args: Vec<OsString>,
    running: Arc<AtomicBool>,
}

impl Successor {
    /// The executable and arguments of this process (read at start, before
    /// the file may be replaced by an upgrade).
    pub fn from_env() -> std::io::Result<Self> {
        let exe = std::env::current_exe()?;
        let mut args: Vec<OsString> = std::env::args_os().skip(1).collect();
        if !args.iter().any(|a| a == "--takeover") {
            args.push("--takeover".into());
        }
        Ok(Self {
            exe,
            args,
            running: Default::default(),
        })
    }

    /// Starts the successor unless one is still running.
    pub fn start(&self) {
        if self.running.swap(true, Ordering::AcqRel) {
            warn!("SIGUSR2 ignored: a successor is already starting");
            return;
        }
        // Started from whatever thread handles the signal (a session
        // thread, boosted, on the shared runtime): the successor gets this
        // process's own priority back through the environment.
        let child = Command::new(&self.exe)
            .args(&self.args)
            .env(
                crate::priority::BASE_ENV,
                crate::priority::process_base().to_string(),
            )
            .stdin(Stdio::null())
            .spawn();
        let mut child = match child {
            Ok(c) => c,
            Err(e) => {
                self.running.store(false, Ordering::Release);
                error!(error = %e, exe = %self.exe.display(), "could not start the successor; still serving");
                return;
            }
        };
        info!(pid = child.id(), exe = %self.exe.display(), "successor started; it takes the listeners over");
        let running = self.running.clone();
        let pid = child.id();
        // Reaps it; a successor that took over outlives this process.
        let _ = std::thread::Builder::new()
            .name("myplex-successor".into())
            .spawn(move || {
                match child.wait() {
                    Ok(s) if s.success() => info!(pid, "successor exited"),
                    Ok(s) => {
                        error!(pid, status = %s, "successor failed (see its output); still serving")
                    }
                    Err(e) => warn!(pid, error = %e, "could not wait for the successor"),
                }
                running.store(false, Ordering::Release);
            });
    }
}
