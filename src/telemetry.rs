//! Logging setup (`tracing`, text or JSON by config) and the live change of
//! the log level on a configuration reload.

use std::sync::OnceLock;

use tracing_subscriber::EnvFilter;

use crate::config::{LogConfig, LogFormat};

/// Swaps the installed subscriber's filter (set by [`init`]).
type SetFilter = Box<dyn Fn(EnvFilter) -> Result<(), String> + Send + Sync>;
static SET_FILTER: OnceLock<SetFilter> = OnceLock::new();

/// Lines the log thread may hold before new ones are dropped.
const LOG_BUFFER_LINES: usize = 64 * 1024;

/// Installs the global subscriber. `RUST_LOG` overrides `log.level` at
/// start; a reload applies the configured `log.level`.
///
/// Lines are written by a thread of their own (`myplex-log`): a session
/// never blocks on the log's file or pipe (a write to a file can stall for
/// hundreds of milliseconds while the disk is saturated, and with one
/// worker per thread group that would stall the whole group). When that
/// thread falls [`LOG_BUFFER_LINES`] behind, lines are dropped, not waited
/// for. Keep the returned guard until exit: dropping it flushes.
pub fn init(cfg: &LogConfig) -> tracing_appender::non_blocking::WorkerGuard {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(&cfg.level))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    use std::io::IsTerminal;
    let (writer, guard) = tracing_appender::non_blocking::NonBlockingBuilder::default()
        .lossy(true)
        .buffered_lines_limit(LOG_BUFFER_LINES)
        .thread_name("myplex-log")
        .finish(std::io::stderr());
    let b = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(writer);
    let _ = match cfg.format {
        LogFormat::Json => {
            let b = b.json().with_filter_reloading();
            let h = b.reload_handle();
            let _ = SET_FILTER.set(Box::new(move |f| h.reload(f).map_err(|e| e.to_string())));
            b.try_init()
        }
        LogFormat::Text => {
            let b = b.with_filter_reloading();
            let h = b.reload_handle();
            let _ = SET_FILTER.set(Box::new(move |f| h.reload(f).map_err(|e| e.to_string())));
            b.try_init()
        }
    };
    guard
}

/// Checks that `level` is a valid filter (`log.level`).
pub fn parse_level(level: &str) -> Result<EnvFilter, String> {
    EnvFilter::try_new(level).map_err(|e| format!("log.level {level:?}: {e}"))
}

/// Applies a new log filter to the running subscriber (a no-op when
/// [`init`] did not install one, as in tests that embed the proxy).
pub fn set_level(filter: EnvFilter) -> Result<(), String> {
    match SET_FILTER.get() {
        Some(set) => set(filter),
        None => Ok(()),
    }
}

/// At most `per_second` events a second pass; the rest are counted and
/// reported with the next one that passes (so a storm of slow statements
/// becomes a few log lines saying how many were left out).
#[derive(Debug)]
pub struct RateLimit {
    per_second: u64,
    /// (second, passed this second, suppressed since the last pass)
    state: std::sync::Mutex<(u64, u64, u64)>,
    start: std::time::Instant,
}

impl RateLimit {
    /// A limiter passing `per_second` events a second.
    pub fn new(per_second: u64) -> Self {
        Self {
            per_second,
            state: std::sync::Mutex::new((0, 0, 0)),
            start: std::time::Instant::now(),
        }
    }

    /// `Some(suppressed)` when this event may be logged.
    pub fn admit(&self) -> Option<u64> {
        let now = self.start.elapsed().as_secs();
        let mut st = self.state.lock().ok()?;
        if st.0 != now {
            st.0 = now;
            st.1 = 0;
        }
        if st.1 < self.per_second {
            st.1 += 1;
            let suppressed = st.2;
            st.2 = 0;
            Some(suppressed)
        } else {
            st.2 += 1;
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_limit_counts_what_it_drops() {
        let r = RateLimit::new(2);
        assert_eq!(r.admit(), Some(0));
        assert_eq!(r.admit(), Some(0));
        assert_eq!(r.admit(), None);
        assert_eq!(r.admit(), None);
        // Same second: still limited.
        assert_eq!(r.admit(), None);
    }
}
