//! Progress of the running point on stderr. On a terminal: one line that
//! updates in place (target, clients, warm-up / measure, elapsed / total
//! seconds, current TPS, a small bar) and is cleared when the point ends.
//! Elsewhere (a log file): one plain line per second of the measured window.
//! Owns only the formatting and the terminal check; the runner says when.

use std::io::{IsTerminal, Write};

/// Which part of a point is running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Not measured.
    Warmup,
    /// The measured window.
    Measure,
}

/// One report from the runner, about once a second.
#[derive(Debug, Clone, Copy)]
pub struct Tick {
    /// Part of the point.
    pub phase: Phase,
    /// Seconds into this phase.
    pub elapsed: f64,
    /// Length of this phase, seconds.
    pub total: f64,
    /// Transactions per second since the previous tick.
    pub tps: f64,
    /// Transactions counted in the measured window so far.
    pub measured: u64,
}

const BAR: usize = 20;

/// The updating terminal line (without the leading `\r`).
pub fn bar_line(target: &str, clients: usize, t: Tick) -> String {
    let frac = if t.total > 0.0 {
        (t.elapsed / t.total).clamp(0.0, 1.0)
    } else {
        1.0
    };
    let filled = (frac * BAR as f64).round() as usize;
    let phase = match t.phase {
        Phase::Warmup => "warm-up",
        Phase::Measure => "measure",
    };
    format!(
        "{target:<12} {clients:>6} clients  {phase}  [{}{}] {:>4.0}/{:.0} s  {:>9.1} tps",
        "#".repeat(filled),
        "-".repeat(BAR - filled),
        t.elapsed,
        t.total,
        t.tps
    )
}

/// The plain line written off a terminal (measured window only, not for
/// the tick that opens it).
pub fn plain_line(target: &str, t: Tick) -> Option<String> {
    (t.phase == Phase::Measure && t.elapsed > 0.0).then(|| {
        format!(
            "  {target}: {} transactions in {:.0} s ({:.1} tps)",
            t.measured,
            t.elapsed,
            t.measured as f64 / t.elapsed.max(0.001)
        )
    })
}

/// Writes ticks to stderr in the form that suits it.
#[derive(Debug, Clone, Copy)]
pub struct Progress {
    tty: bool,
}

impl Progress {
    /// Checks whether stderr is a terminal.
    pub fn stderr() -> Self {
        Self {
            tty: std::io::stderr().is_terminal(),
        }
    }

    /// Reports one tick.
    pub fn tick(&self, target: &str, clients: usize, t: Tick) {
        let mut e = std::io::stderr().lock();
        if self.tty {
            let _ = write!(e, "\r\x1b[2K{}", bar_line(target, clients, t));
        } else if let Some(l) = plain_line(target, t) {
            let _ = writeln!(e, "{l}");
        }
        let _ = e.flush();
    }

    /// Clears the terminal line before the point's result row is printed.
    pub fn done(&self) {
        if self.tty {
            let mut e = std::io::stderr().lock();
            let _ = write!(e, "\r\x1b[2K");
            let _ = e.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tick(phase: Phase, elapsed: f64, total: f64) -> Tick {
        Tick {
            phase,
            elapsed,
            total,
            tps: 123.45,
            measured: 500,
        }
    }

    #[test]
    fn bar_shows_phase_progress_and_tps() {
        let l = bar_line("myplex", 64, tick(Phase::Warmup, 1.0, 4.0));
        assert!(l.contains("warm-up") && l.contains("64 clients"), "{l}");
        assert!(l.contains("[#####---------------]"), "{l}");
        assert!(l.contains("1/4 s") && l.contains("123.5 tps"), "{l}");
        let l = bar_line("myplex", 64, tick(Phase::Measure, 30.0, 20.0));
        assert!(
            l.contains("measure") && l.contains(&"#".repeat(BAR)),
            "clamped: {l}"
        );
        assert!(!l.contains('\n') && !l.contains('\r'));
    }

    #[test]
    fn plain_lines_only_while_measuring() {
        assert_eq!(plain_line("direct", tick(Phase::Warmup, 1.0, 5.0)), None);
        assert_eq!(plain_line("direct", tick(Phase::Measure, 0.0, 5.0)), None);
        assert_eq!(
            plain_line("direct", tick(Phase::Measure, 5.0, 10.0)).as_deref(),
            Some("  direct: 500 transactions in 5 s (100.0 tps)")
        );
    }
}
