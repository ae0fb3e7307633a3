//! One measurement point: N virtual clients (async tasks, one connection
//! each, spread over a few threads with a single-threaded runtime each)
//! against one target, a warm-up, then a measured window. Latency is
//! recorded per transaction into HDR histograms kept per client and merged
//! at the end, so measuring costs no shared lock; the process's own CPU
//! time over the window is reported per transaction.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use hdrhistogram::Histogram;
use mysql_async::{Opts, OptsBuilder};
use tokio::sync::{Barrier, Semaphore, oneshot};
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::client::{Address, ClientError, Endpoint};
use super::progress::{Phase, Tick};
use super::workload::{self, Client, Tables, Workload};

/// A named endpoint.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Target {
    /// Name in reports (`direct`, `myplex`, …).
    pub name: String,
    /// `mysql://user:pw@host:port/db`.
    pub url: String,
}

impl Target {
    /// Parses `name=url`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let (name, url) = s
            .split_once('=')
            .ok_or_else(|| format!("target {s:?}: expected NAME=mysql://user:pw@host:port/db"))?;
        Opts::from_url(url).map_err(|e| format!("target {name}: {e}"))?;
        Ok(Self {
            name: name.into(),
            url: url.into(),
        })
    }

    /// Where the virtual clients log in: the URL's socket if it names one,
    /// else TCP to its host and port (no silent switch to a Unix socket).
    pub fn endpoint(&self) -> Result<Endpoint, String> {
        let o = Opts::from_url(&self.url).map_err(|e| format!("target {}: {e}", self.name))?;
        let address = match o.socket() {
            Some(path) => Address::Unix(path.into()),
            None => Address::Tcp(o.ip_or_hostname().to_string(), o.tcp_port()),
        };
        Ok(Endpoint {
            address,
            user: o.user().unwrap_or_default().to_string(),
            password: o.pass().unwrap_or_default().to_string(),
            db: o.db_name().map(str::to_string),
        })
    }

    /// The URL's `stmt_cache_size`, if it sets one: each client then keeps
    /// at most that many statements prepared (see `workload::Client`);
    /// otherwise all of them, prepared once at connect, as sysbench does.
    pub fn stmt_cache(&self) -> Option<usize> {
        self.url
            .contains("stmt_cache_size")
            .then(|| Opts::from_url(&self.url).ok())
            .flatten()
            .map(|o| o.stmt_cache_size())
    }

    /// Driver options for one-off work (prepare, cleanup): TCP always.
    pub fn opts(&self) -> Result<Opts, String> {
        let base = Opts::from_url(&self.url).map_err(|e| e.to_string())?;
        Ok(OptsBuilder::from_opts(base).prefer_socket(false).into())
    }
}

/// What one point measured.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PointResult {
    /// Target name.
    pub target: String,
    /// Virtual clients.
    pub clients: usize,
    /// Measured seconds.
    pub seconds: f64,
    /// Transactions completed in the window.
    pub transactions: u64,
    /// Transactions per second.
    pub tps: f64,
    /// Statements per second.
    pub qps: f64,
    /// Transaction latency percentiles, milliseconds.
    pub p50_ms: f64,
    /// 95th percentile.
    pub p95_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Slowest.
    pub max_ms: f64,
    /// Failed transactions by MySQL error code (0 = not a server error).
    pub errors: BTreeMap<u16, u64>,
    /// Connections re-established after an I/O error.
    pub reconnects: u64,
    /// Clients that could not connect at all.
    pub connect_failures: u64,
    /// Clients whose transaction was still unanswered `stop_grace` after
    /// the window closed: their connections were closed so that the point
    /// ends (a server that stopped answering: seen direct at 2,048
    /// I/O-bound clients).
    pub abandoned: u64,
    /// CPU time the load generator itself (this process, every thread)
    /// used in the measured window per counted transaction, µs: what the
    /// tool costs the machine it shares with what it measures.
    /// Absent when the process's CPU time cannot be read or nothing was
    /// counted.
    pub client_cpu_us_per_trx: Option<f64>,
    /// The server's purge debt at the window's start and end (see `purge`).
    pub purge_debt: super::purge::Window,
    /// Seconds waited before the point for the debt to drain.
    pub purge_wait_s: f64,
}

impl PointResult {
    /// All errors.
    pub fn error_count(&self) -> u64 {
        self.errors.values().sum()
    }
}

/// Settings of a run.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// Transaction type.
    pub workload: Workload,
    /// Tables.
    pub tables: Tables,
    /// Warm-up before measuring.
    pub warmup: Duration,
    /// Measured window.
    pub duration: Duration,
    /// Logins in progress at once while connecting.
    pub connect_concurrency: usize,
    /// Threads running the clients (0: [`default_threads`]).
    pub threads: usize,
    /// How long after the measured window the clients' last transactions
    /// may take before they are abandoned (see [`PointResult::abandoned`]).
    pub stop_grace: Duration,
}

struct ClientOutcome {
    hist: Histogram<u64>,
    errors: BTreeMap<u16, u64>,
    reconnects: u64,
    connected: bool,
    abandoned: bool,
}

fn new_hist() -> Histogram<u64> {
    // 1 µs .. 1 h at 3 significant digits: constant bounds that are valid.
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("constant histogram bounds are valid")
}

/// What the clients of a point share with the coordinator.
struct Shared {
    measuring: AtomicBool,
    stop: AtomicBool,
    /// Transactions counted in the measured window.
    done: AtomicU64,
    /// Every successful transaction, warm-up included (for the current TPS).
    completed: AtomicU64,
    /// The clients and the coordinator: measuring starts when all are connected.
    barrier: Barrier,
    /// Logins in progress at once.
    gate: Semaphore,
    /// Set `stop_grace` after the window: clients still waiting for an
    /// answer give up and close their connections.
    abandon: tokio::sync::watch::Sender<bool>,
}

/// How a point's clients reach their target.
#[derive(Clone)]
struct Connect {
    endpoint: Endpoint,
    cache: Option<usize>,
    s: Settings,
}

impl Connect {
    async fn client(&self) -> Result<Client, ClientError> {
        Client::connect(&self.endpoint, self.s.workload, self.s.tables, self.cache).await
    }
}

/// One virtual client: connect, wait for the others, run transactions
/// until told to stop.
async fn virtual_client(c: Connect, sh: Arc<Shared>) -> ClientOutcome {
    let s = c.s;
    let mut out = ClientOutcome {
        hist: new_hist(),
        errors: BTreeMap::new(),
        reconnects: 0,
        connected: false,
        abandoned: false,
    };
    let mut abandon = sh.abandon.subscribe();
    let client = {
        let _permit = sh.gate.acquire().await;
        tokio::time::timeout(Duration::from_secs(60), c.client()).await
    };
    let mut client = match client {
        Ok(Ok(c)) => Some(c),
        _ => None,
    };
    out.connected = client.is_some();
    sh.barrier.wait().await;
    while !sh.stop.load(Ordering::Relaxed) {
        let Some(cl) = client.as_mut() else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let connected = tokio::select! {
                r = c.client() => r.ok(),
                _ = abandon.wait_for(|a| *a) => break,
            };
            if let Some(cl) = connected {
                client = Some(cl);
                out.reconnects += 1;
            }
            continue;
        };
        let t0 = Instant::now();
        let r = tokio::select! {
            r = cl.transaction(s.workload, s.tables) => Some(r),
            _ = abandon.wait_for(|a| *a) => None,
        };
        let Some(r) = r else {
            // Still unanswered long after the window: the connection is
            // closed (dropped), nothing more is sent on it.
            out.abandoned = true;
            client = None;
            break;
        };
        let counted = sh.measuring.load(Ordering::Relaxed) && !sh.stop.load(Ordering::Relaxed);
        if r.is_ok() {
            sh.completed.fetch_add(1, Ordering::Relaxed);
        }
        match r {
            Ok(()) if counted => {
                let us = t0.elapsed().as_micros().max(1) as u64;
                let _ = out.hist.record(us);
                sh.done.fetch_add(1, Ordering::Relaxed);
            }
            Ok(()) => {}
            Err(e) => {
                let code = e.code();
                if counted {
                    *out.errors.entry(code).or_default() += 1;
                }
                if code == 0 {
                    // The connection is unusable: reconnect.
                    client = None;
                }
            }
        }
    }
    if let Some(cl) = client {
        let _ = tokio::time::timeout(Duration::from_secs(5), cl.disconnect()).await;
    }
    out
}

/// Starts `n` clients on a thread of their own with a single-threaded
/// runtime; their outcomes arrive on the returned channel when they stop.
fn start_thread(
    i: usize,
    n: usize,
    c: &Connect,
    sh: &Arc<Shared>,
) -> Result<oneshot::Receiver<Vec<ClientOutcome>>, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("client runtime: {e}"))?;
    let (tx, rx) = oneshot::channel();
    let (c, sh) = (c.clone(), sh.clone());
    std::thread::Builder::new()
        .name(format!("bench-clients-{i}"))
        .spawn(move || {
            let outs = rt.block_on(async {
                let mut set = JoinSet::new();
                for _ in 0..n {
                    set.spawn(virtual_client(c.clone(), sh.clone()));
                }
                let mut outs = Vec::with_capacity(n);
                while let Some(o) = set.join_next().await {
                    outs.extend(o.ok());
                }
                outs
            });
            let _ = tx.send(outs);
        })
        .map_err(|e| format!("client thread: {e}"))?;
    Ok(rx)
}

/// CPU time this process has used so far, every thread (user + system),
/// from `/proc/self/stat` (in USER_HZ ticks, 100 a second on Linux); `None`
/// where that cannot be read. A vDSO clock would be finer, but rustix's
/// reading of the vDSO does not run under valgrind.
fn process_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    cpu_from_stat(&stat)
}

/// utime + stime of a `/proc/PID/stat` line.
fn cpu_from_stat(stat: &str) -> Option<Duration> {
    // The command name (field 2) is in parentheses and may hold spaces:
    // fields are counted after its closing one (field 3 is index 0).
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    let mut f = rest.split_whitespace().skip(11);
    let utime: u64 = f.next()?.parse().ok()?;
    let stime: u64 = f.next()?.parse().ok()?;
    Some(Duration::from_millis((utime + stime) * 10))
}

/// The threads that run the clients when `--client-threads` is 0: half the
/// CPUs (the other half is left to what is measured, on the same machine),
/// at least one, at most one per client.
pub fn default_threads(clients: usize) -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    (cpus / 2).clamp(1, clients.max(1))
}

/// Clients of thread `i` when `clients` are split over `threads`.
fn share(clients: usize, threads: usize, i: usize) -> usize {
    clients / threads + usize::from(i < clients % threads)
}

/// Runs one point; `progress` is called about once a second during the
/// warm-up and the measured window, and once as the window opens.
///
/// The clients run on `s.threads` threads (each a single-threaded runtime:
/// a client's reply wakes the thread that waits for it, with no work
/// stealing or cross-thread wake-ups); this task only keeps time.
pub async fn run_point(
    target: &Target,
    clients: usize,
    s: Settings,
    progress: impl Fn(Tick),
) -> Result<PointResult, String> {
    let c = Connect {
        endpoint: target.endpoint()?,
        cache: target.stmt_cache(),
        s,
    };
    let sh = Arc::new(Shared {
        measuring: AtomicBool::new(false),
        stop: AtomicBool::new(false),
        done: AtomicU64::new(0),
        completed: AtomicU64::new(0),
        barrier: Barrier::new(clients + 1),
        gate: Semaphore::new(s.connect_concurrency.max(1)),
        abandon: tokio::sync::watch::channel(false).0,
    });
    let threads = if s.threads == 0 {
        default_threads(clients)
    } else {
        s.threads.min(clients.max(1))
    };
    let mut shards = Vec::with_capacity(threads);
    for i in 0..threads {
        shards.push(start_thread(i, share(clients, threads, i), &c, &sh)?);
    }
    sh.barrier.wait().await;
    let mut last = (Instant::now(), 0u64);
    let mut tick = |phase, elapsed: f64, total: Duration| {
        let (now, n) = (Instant::now(), sh.completed.load(Ordering::Relaxed));
        let dt = now.duration_since(last.0).as_secs_f64();
        let tps = if dt > 0.0 {
            (n - last.1) as f64 / dt
        } else {
            0.0
        };
        last = (now, n);
        progress(Tick {
            phase,
            elapsed,
            total: total.as_secs_f64(),
            tps,
            measured: sh.done.load(Ordering::Relaxed),
        });
    };
    let warm_end = Instant::now() + s.warmup;
    while Instant::now() < warm_end {
        tokio::time::sleep(Duration::from_secs(1).min(warm_end - Instant::now())).await;
        let left = warm_end.saturating_duration_since(Instant::now());
        tick(Phase::Warmup, (s.warmup - left).as_secs_f64(), s.warmup);
    }
    let cpu0 = process_cpu();
    sh.measuring.store(true, Ordering::Relaxed);
    let start = Instant::now();
    let end = start + s.duration;
    tick(Phase::Measure, 0.0, s.duration);
    while Instant::now() < end {
        tokio::time::sleep(Duration::from_secs(1).min(end - Instant::now())).await;
        tick(Phase::Measure, start.elapsed().as_secs_f64(), s.duration);
    }
    sh.stop.store(true, Ordering::Relaxed);
    let cpu = process_cpu().zip(cpu0).map(|(b, a)| b.saturating_sub(a));
    let seconds = start.elapsed().as_secs_f64();
    // Each client ends with its current transaction; one that has no
    // answer by the grace's end is abandoned, so that the point ends.
    let abandon_after = {
        let sh = sh.clone();
        tokio::spawn(async move {
            tokio::time::sleep(s.stop_grace).await;
            sh.abandon.send_replace(true);
        })
    };
    let mut hist = new_hist();
    let mut errors = BTreeMap::new();
    let (mut reconnects, mut connect_failures, mut abandoned) = (0, 0, 0);
    for shard in shards {
        let Ok(outs) = shard.await else { continue };
        for o in outs {
            let _ = hist.add(&o.hist);
            for (k, v) in o.errors {
                *errors.entry(k).or_default() += v;
            }
            reconnects += o.reconnects;
            connect_failures += u64::from(!o.connected);
            abandoned += u64::from(o.abandoned);
        }
    }
    abandon_after.abort();
    let transactions = hist.len();
    let ms = |q: f64| hist.value_at_quantile(q) as f64 / 1000.0;
    Ok(PointResult {
        target: target.name.clone(),
        clients,
        seconds,
        transactions,
        tps: transactions as f64 / seconds,
        qps: (transactions * workload::statements_per_transaction(s.workload)) as f64 / seconds,
        p50_ms: ms(0.50),
        p95_ms: ms(0.95),
        p99_ms: ms(0.99),
        max_ms: hist.max() as f64 / 1000.0,
        errors,
        reconnects,
        connect_failures,
        abandoned,
        client_cpu_us_per_trx: cpu_per_transaction(cpu, transactions),
        purge_debt: super::purge::Window::default(),
        purge_wait_s: 0.0,
    })
}

/// The load generator's CPU per counted transaction, µs (`None` without
/// any, or when the CPU time could not be read).
fn cpu_per_transaction(cpu: Option<Duration>, transactions: u64) -> Option<f64> {
    let cpu = cpu?;
    (transactions > 0).then(|| cpu.as_secs_f64() * 1e6 / transactions as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_is_read_from_proc_stat() {
        // A command name with spaces and parentheses of its own.
        let line = "4242 (my (odd) name) S 1 4242 4242 0 -1 4194560 3068 0 0 0 \
                    1234 567 0 0 20 0 5 0 123 456789 1234 18446744073709551615";
        assert_eq!(cpu_from_stat(line), Some(Duration::from_millis(18_010)));
        assert_eq!(cpu_from_stat("4242 (x) S 1 2"), None);
        assert!(
            process_cpu().is_some(),
            "this process's own stat is readable"
        );
    }

    #[test]
    fn cpu_per_transaction_needs_transactions_and_a_reading() {
        let cpu = Some(Duration::from_millis(500));
        assert_eq!(cpu_per_transaction(cpu, 1000), Some(500.0));
        assert_eq!(cpu_per_transaction(cpu, 0), None);
        assert_eq!(cpu_per_transaction(None, 1000), None);
    }

    #[test]
    fn clients_are_split_over_threads() {
        assert_eq!(default_threads(1), 1);
        assert!(default_threads(10_000) >= 1);
        let split = |clients, threads| -> Vec<usize> {
            (0..threads).map(|i| share(clients, threads, i)).collect()
        };
        assert_eq!(split(8, 3), vec![3, 3, 2]);
        assert_eq!(split(8, 3).iter().sum::<usize>(), 8);
    }
}
