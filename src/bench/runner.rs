//! One measurement point: N virtual clients (async tasks, one connection
//! each) against one target, a warm-up, then a measured window. Latency is
//! recorded per transaction into HDR histograms kept per client and merged
//! at the end, so measuring costs no shared lock.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use hdrhistogram::Histogram;
use mysql_async::{Conn, Opts, OptsBuilder};
use tokio::sync::{Barrier, Semaphore};
use tokio::time::Instant;

use super::progress::{Phase, Tick};
use super::workload::{self, Tables, Workload};

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

    /// Connection options: TCP always (no silent switch to a unix socket),
    /// and a statement cache holding every statement of the workload (the
    /// driver's default of 32 would re-prepare constantly with 4+ tables).
    pub fn opts_for(&self, tables: u32) -> Result<Opts, String> {
        let base = Opts::from_url(&self.url).map_err(|e| e.to_string())?;
        let explicit = self.url.contains("stmt_cache_size");
        let mut b = OptsBuilder::from_opts(base).prefer_socket(false);
        if !explicit {
            b = b.stmt_cache_size(Some(9 * tables as usize + 8));
        }
        Ok(b.into())
    }

    /// Connection options for one-off work (prepare, cleanup).
    pub fn opts(&self) -> Result<Opts, String> {
        self.opts_for(1)
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
}

struct ClientOutcome {
    hist: Histogram<u64>,
    errors: BTreeMap<u16, u64>,
    reconnects: u64,
    connected: bool,
}

fn new_hist() -> Histogram<u64> {
    // 1 µs .. 1 h at 3 significant digits: constant bounds that are valid.
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("constant histogram bounds are valid")
}

/// Runs one point; `progress` is called about once a second during the
/// warm-up and the measured window, and once as the window opens.
pub async fn run_point(
    target: &Target,
    clients: usize,
    s: Settings,
    progress: impl Fn(Tick),
) -> Result<PointResult, String> {
    let opts = target.opts_for(s.tables.count)?;
    let measuring = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    // Every successful transaction, warm-up included (for the current TPS).
    let completed = Arc::new(AtomicU64::new(0));
    let barrier = Arc::new(Barrier::new(clients + 1));
    let gate = Arc::new(Semaphore::new(s.connect_concurrency.max(1)));
    let mut tasks = Vec::with_capacity(clients);
    for _ in 0..clients {
        let (opts, measuring, stop, done, completed, barrier, gate) = (
            opts.clone(),
            measuring.clone(),
            stop.clone(),
            done.clone(),
            completed.clone(),
            barrier.clone(),
            gate.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut out = ClientOutcome {
                hist: new_hist(),
                errors: BTreeMap::new(),
                reconnects: 0,
                connected: false,
            };
            let conn = {
                let _permit = gate.acquire().await;
                tokio::time::timeout(Duration::from_secs(60), async {
                    let mut c = Conn::new(opts.clone()).await?;
                    workload::prepare_statements(&mut c, s.workload, s.tables).await?;
                    Ok::<_, mysql_async::Error>(c)
                })
                .await
            };
            let mut conn = match conn {
                Ok(Ok(c)) => Some(c),
                _ => None,
            };
            out.connected = conn.is_some();
            barrier.wait().await;
            while !stop.load(Ordering::Relaxed) {
                let Some(c) = conn.as_mut() else {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    if let Ok(c) = Conn::new(opts.clone()).await {
                        conn = Some(c);
                        out.reconnects += 1;
                    }
                    continue;
                };
                let t0 = Instant::now();
                let r = workload::transaction(c, s.workload, s.tables).await;
                let counted = measuring.load(Ordering::Relaxed) && !stop.load(Ordering::Relaxed);
                if r.is_ok() {
                    completed.fetch_add(1, Ordering::Relaxed);
                }
                match r {
                    Ok(()) if counted => {
                        let us = t0.elapsed().as_micros().max(1) as u64;
                        let _ = out.hist.record(us);
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(()) => {}
                    Err(e) => {
                        let code = match &e {
                            mysql_async::Error::Server(se) => se.code,
                            _ => 0,
                        };
                        if counted {
                            *out.errors.entry(code).or_default() += 1;
                        }
                        if code == 0 {
                            // The connection is unusable: reconnect.
                            conn = None;
                        }
                    }
                }
            }
            if let Some(c) = conn {
                let _ = tokio::time::timeout(Duration::from_secs(5), c.disconnect()).await;
            }
            out
        }));
    }
    barrier.wait().await;
    let mut last = (Instant::now(), 0u64);
    let mut tick = |phase, elapsed: f64, total: Duration| {
        let (now, n) = (Instant::now(), completed.load(Ordering::Relaxed));
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
            measured: done.load(Ordering::Relaxed),
        });
    };
    let warm_end = Instant::now() + s.warmup;
    while Instant::now() < warm_end {
        tokio::time::sleep(Duration::from_secs(1).min(warm_end - Instant::now())).await;
        let left = warm_end.saturating_duration_since(Instant::now());
        tick(Phase::Warmup, (s.warmup - left).as_secs_f64(), s.warmup);
    }
    measuring.store(true, Ordering::Relaxed);
    let start = Instant::now();
    let end = start + s.duration;
    tick(Phase::Measure, 0.0, s.duration);
    while Instant::now() < end {
        tokio::time::sleep(Duration::from_secs(1).min(end - Instant::now())).await;
        tick(Phase::Measure, start.elapsed().as_secs_f64(), s.duration);
    }
    stop.store(true, Ordering::Relaxed);
    let seconds = start.elapsed().as_secs_f64();
    let mut hist = new_hist();
    let mut errors = BTreeMap::new();
    let (mut reconnects, mut connect_failures) = (0, 0);
    for t in tasks {
        let Ok(o) = t.await else { continue };
        let _ = hist.add(&o.hist);
        for (k, v) in o.errors {
            *errors.entry(k).or_default() += v;
        }
        reconnects += o.reconnects;
        connect_failures += u64::from(!o.connected);
    }
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
    })
}
