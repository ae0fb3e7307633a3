//! Simulation tests of the adaptive limit: a server model on made-up time
//! (CPU cores shared by the running statements, disk channels for I/O waits,
//! a network hop that uses neither), closed-loop clients with no think time,
//! and an admission gate that applies the controller's limit the way
//! `GroupState` does. Deterministic: a seeded xorshift drives service times.

use super::*;

/// Simulation step, µs.
const DT_US: u64 = 100;
/// Controller timer, µs (the group's adaptive tick).
const TICK_US: u64 = 10_000;

#[derive(Clone, Copy)]
struct Server {
    cores: f64,
    disk: usize,
    /// Capacity lost per statement beyond `cores` (context switches,
    /// contention): capacity = cores / (1 + thrash × excess).
    thrash: f64,
    /// Time per statement spent on the wire, ms (no CPU, no disk).
    net_ms: f64,
}

#[derive(Clone, Copy)]
struct Workload {
    cpu_ms: f64,
    io_ms: f64,
    /// Share of statements that wait on the disk.
    io_share: f64,
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        ((self.0 >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
    fn exp(&mut self, mean: f64) -> f64 {
        -mean * self.next().ln()
    }
}

struct Job {
    ticket: u64,
    net: f64,
    io: f64,
    cpu: f64,
}

enum Gate {
    Fixed(usize),
    Adaptive(Box<Adaptive>),
}

/// A run's record, one entry per 100 ms of simulated time: completions and
/// the limit.
struct Run {
    done: Vec<u64>,
    limits: Vec<usize>,
}

impl Run {
    /// Completions per second from `from` to `to` seconds.
    fn rate(&self, from: f64, to: f64) -> f64 {
        let (a, b) = ((from * 10.0) as usize, (to * 10.0) as usize);
        self.done[a..b].iter().sum::<u64>() as f64 / (to - from)
    }
}

struct Sim {
    server: Server,
    rng: Rng,
    running: Vec<Job>,
    waiting: usize,
    next: u64,
}

impl Sim {
    fn new(server: Server, clients: usize) -> Self {
        Self {
            server,
            rng: Rng(0x9E37_79B9_7F4A_7C15),
            running: Vec::new(),
            waiting: clients,
            next: 0,
        }
    }

    fn job(&mut self, w: Workload) -> Job {
        self.next += 1;
        let io = if self.rng.next() < w.io_share {
            self.rng.exp(w.io_ms)
        } else {
            0.0
        };
        Job {
            ticket: self.next,
            net: self.server.net_ms,
            io,
            cpu: self.rng.exp(w.cpu_ms),
        }
    }

    /// Runs for `secs` with `phases` (each workload from a time on).
    fn run(&mut self, gate: &mut Gate, phases: &[(f64, Workload)], secs: f64) -> Run {
        let steps = (secs * 1e6) as u64 / DT_US;
        let dt = DT_US as f64 / 1000.0; // ms
        let mut completed = 0u64;
        let mut done = Vec::new();
        let mut limits = Vec::new();
        for step in 0..steps {
            let us = step * DT_US;
            let now = Duration::from_micros(us);
            let secs_now = us as f64 / 1e6;
            let w = phases
                .iter()
                .rev()
                .find(|(from, _)| secs_now >= *from)
                .map_or(phases[0].1, |p| p.1);
            // Admission.
            loop {
                let room = match gate {
                    Gate::Fixed(l) => self.running.len() < *l,
                    Gate::Adaptive(a) => a.busy() < a.limit(),
                };
                if self.waiting == 0 || !room {
                    break;
                }
                self.waiting -= 1;
                let j = self.job(w);
                if let Gate::Adaptive(a) = gate {
                    a.start(j.ticket, now);
                }
                self.running.push(j);
            }
            if let Gate::Adaptive(a) = gate {
                a.gate(self.waiting > 0);
            }
            // Progress: the wire first, then the disk (FIFO channels), then
            // the CPU (shared equally).
            let mut disk_free = self.server.disk;
            let on_cpu = self
                .running
                .iter()
                .filter(|j| j.net <= 0.0 && j.io <= 0.0)
                .count();
            let excess = (on_cpu as f64 - self.server.cores).max(0.0);
            let capacity = self.server.cores / (1.0 + self.server.thrash * excess);
            let share = if on_cpu > 0 {
                (capacity / on_cpu as f64).min(1.0)
            } else {
                0.0
            };
            for j in &mut self.running {
                if j.net > 0.0 {
                    j.net -= dt;
                } else if j.io > 0.0 {
                    if disk_free > 0 {
                        disk_free -= 1;
                        j.io -= dt;
                    }
                } else {
                    j.cpu -= dt * share;
                }
            }
            let mut i = 0;
            while i < self.running.len() {
                let j = &self.running[i];
                if j.net <= 0.0 && j.io <= 0.0 && j.cpu <= 0.0 {
                    let j = self.running.remove(i);
                    if let Gate::Adaptive(a) = gate {
                        a.finish(j.ticket, now);
                    }
                    self.waiting += 1;
                    completed += 1;
                } else {
                    i += 1;
                }
            }
            if us.is_multiple_of(TICK_US)
                && let Gate::Adaptive(a) = gate
            {
                a.tick(now);
            }
            if (us + DT_US).is_multiple_of(100_000) {
                done.push(std::mem::take(&mut completed));
                limits.push(match gate {
                    Gate::Fixed(l) => *l,
                    Gate::Adaptive(a) => a.limit(),
                });
            }
        }
        Run { done, limits }
    }
}

fn adaptive(max: usize) -> Gate {
    Gate::Adaptive(Box::new(Adaptive::new(
        Tuning {
            min: 1,
            max,
            initial: 4,
            stall_cap: Duration::from_millis(500),
        },
        Duration::ZERO,
    )))
}

const FIXED: &[usize] = &[1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 28, 32, 40, 48, 64];

/// The best fixed limit's rate (and that limit) for one workload.
fn best_fixed(server: Server, w: Workload, clients: usize, max: usize) -> (f64, usize) {
    FIXED
        .iter()
        .filter(|l| **l <= max)
        .map(|l| {
            let r = Sim::new(server, clients).run(&mut Gate::Fixed(*l), &[(0.0, w)], 6.0);
            (r.rate(1.0, 6.0), *l)
        })
        .fold((0.0, 0), |a, b| if b.0 > a.0 { b } else { a })
}

fn check(name: &str, server: Server, w: Workload, clients: usize, max: usize) -> Run {
    let (best, at) = best_fixed(server, w, clients, max);
    let run = Sim::new(server, clients).run(&mut adaptive(max), &[(0.0, w)], 20.0);
    let rate = run.rate(5.0, 20.0);
    let ratio = rate / best;
    eprintln!(
        "{name}: best fixed {best:.0}/s at {at}, adaptive {rate:.0}/s ({ratio:.2}), limits {:?}",
        run.limits
    );
    assert!(
        ratio >= 0.85,
        "{name}: adaptive {rate:.0}/s < 85% of the best fixed limit's {best:.0}/s (at {at})"
    );
    run
}

const CPU_SERVER: Server = Server {
    cores: 4.0,
    disk: 8,
    thrash: 0.02,
    net_ms: 0.3,
};
const CPU_BOUND: Workload = Workload {
    cpu_ms: 1.0,
    io_ms: 0.0,
    io_share: 0.0,
};
const IO_SERVER: Server = Server {
    cores: 2.0,
    disk: 24,
    thrash: 0.02,
    net_ms: 0.3,
};
const IO_BOUND: Workload = Workload {
    cpu_ms: 0.3,
    io_ms: 8.0,
    io_share: 1.0,
};

#[test]
fn cpu_bound_converges_near_the_core_count() {
    let run = check("cpu", CPU_SERVER, CPU_BOUND, 64, 64);
    let tail = &run.limits[run.limits.len() - 50..];
    assert!(
        tail.iter().all(|l| (3..=10).contains(l)),
        "cpu: limit stays near the cores: {tail:?}"
    );
}

#[test]
fn io_bound_rises_to_the_disk_parallelism() {
    let run = check("io", IO_SERVER, IO_BOUND, 128, 64);
    let tail = &run.limits[run.limits.len() - 50..];
    assert!(
        tail.iter().all(|l| *l >= 16),
        "io: limit far above 1 + oversubscribe: {tail:?}"
    );
}

#[test]
fn mixed_workload_converges() {
    let w = Workload {
        cpu_ms: 1.0,
        io_ms: 10.0,
        io_share: 0.4,
    };
    let s = Server {
        cores: 2.0,
        disk: 8,
        thrash: 0.02,
        net_ms: 0.3,
    };
    check("mixed", s, w, 64, 32);
}

#[test]
fn sudden_change_is_followed_both_ways() {
    // One server with both resources: CPU-bound statements, then ones that
    // wait on the disk, then CPU-bound again.
    let s = Server {
        cores: 2.0,
        disk: 24,
        thrash: 0.02,
        net_ms: 0.3,
    };
    let cpu = Workload {
        cpu_ms: 1.0,
        io_ms: 0.0,
        io_share: 0.0,
    };
    let (best_io, _) = best_fixed(s, IO_BOUND, 128, 64);
    let (best_cpu, _) = best_fixed(s, cpu, 128, 64);
    let run = Sim::new(s, 128).run(
        &mut adaptive(64),
        &[(0.0, cpu), (10.0, IO_BOUND), (20.0, cpu)],
        30.0,
    );
    let (cpu1, io, cpu2) = (
        run.rate(5.0, 10.0),
        run.rate(13.0, 20.0),
        run.rate(23.0, 30.0),
    );
    eprintln!(
        "switch: best fixed cpu {best_cpu:.0}/s, io {best_io:.0}/s; adaptive {cpu1:.0} → {io:.0} → {cpu2:.0}/s; limits {:?}",
        run.limits
    );
    assert!(cpu1 >= 0.85 * best_cpu, "cpu before the switch");
    // Reacts within 3 s (≤ 30 intervals) of the change to I/O…
    let rose = run.limits[100..].iter().position(|l| *l >= 16);
    assert!(rose.is_some_and(|i| i <= 30), "limit rose within 3 s");
    assert!(io >= 0.85 * best_io, "io after the switch");
    // …and comes back down after the change to CPU-bound work.
    let fell = run.limits[200..].iter().position(|l| *l <= 8);
    assert!(fell.is_some_and(|i| i <= 30), "limit fell within 3 s");
    assert!(cpu2 >= 0.85 * best_cpu, "cpu after the switch");
}

#[test]
fn sleep_like_statements_raise_the_limit_to_the_backends() {
    // SELECT SLEEP(0.05): 50 ms on the wire, no CPU, no disk.
    let s = Server {
        cores: 64.0,
        disk: 1,
        thrash: 0.0,
        net_ms: 50.0,
    };
    let w = Workload {
        cpu_ms: 0.01,
        io_ms: 0.0,
        io_share: 0.0,
    };
    let run = check("sleep", s, w, 32, 16);
    let tail = &run.limits[run.limits.len() - 100..];
    assert!(tail.iter().all(|l| *l >= 12), "{tail:?}");
}
