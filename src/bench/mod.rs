//! `myplex bench`: a sysbench-compatible OLTP load generator that compares
//! named targets (direct, pooled, …) side by side. Virtual clients are async
//! tasks speaking the protocol themselves (`client`), so thousands run from
//! one process at about sysbench's CPU per transaction; a sweep of client
//! counts runs the targets alternately; results go to a console table, CSV,
//! JSON and a self-contained HTML report. With `--myplex-status NAME=URL`
//! the report also holds that proxy's in-flight limit over time (see
//! `limits`).

pub mod client;
pub mod limits;
pub mod progress;
pub mod purge;
pub mod report;
pub mod runner;
pub mod workload;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::{Args, Subcommand};
use mysql_async::Conn;

use limits::{PointPhase, StatusSource};
use progress::{Phase, Progress};
use report::Report;
use runner::{Settings, Target};
use workload::{Tables, Workload};

/// `myplex bench …`.
#[derive(Debug, Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    cmd: BenchCmd,
}

#[derive(Debug, Subcommand)]
enum BenchCmd {
    /// Create and fill the sbtestN tables (through the first target).
    Prepare(Common),
    /// Run the workload against every target for every client count.
    Run(RunArgs),
    /// Drop the sbtestN tables.
    Cleanup(Common),
}

#[derive(Debug, Args, Clone)]
struct Common {
    /// NAME=mysql://user:password@host:port/db (repeat for several targets).
    #[arg(long = "target", required = true)]
    targets: Vec<String>,
    /// Number of sbtestN tables.
    #[arg(long, default_value_t = 4)]
    tables: u32,
    /// Rows per table.
    #[arg(long, default_value_t = 10_000)]
    table_size: u32,
}

#[derive(Debug, Args)]
struct RunArgs {
    #[command(flatten)]
    common: Common,
    /// Transaction type.
    #[arg(long, value_enum, default_value_t = Workload::OltpReadWrite)]
    workload: Workload,
    /// Client counts to sweep, comma separated.
    #[arg(long, default_value = "8,64,256")]
    clients: String,
    /// Warm-up seconds per point (not measured).
    #[arg(long, default_value_t = 5)]
    warmup: u64,
    /// Measured seconds per point.
    #[arg(long, default_value_t = 20)]
    duration: u64,
    /// Logins in progress at once while a point connects its clients.
    #[arg(long, default_value_t = 256)]
    connect_concurrency: usize,
    /// Seconds the clients' last transactions may take after a point's
    /// window before they are abandoned (their connections closed, counted
    /// as `abandoned`), so that a point on a server that stopped answering
    /// ends.
    #[arg(long, default_value_t = 30)]
    stop_grace: u64,
    /// Threads that run the virtual clients, each a single-threaded async
    /// runtime with its share of them; 0 = half the CPUs (at least one).
    #[arg(long, default_value_t = 0)]
    client_threads: usize,
    /// Directory for results.csv, results.json, report.html, tps.svg, p95.svg.
    #[arg(long, default_value = "bench-results")]
    out: PathBuf,
    /// Free-form machine description for the report.
    #[arg(long)]
    machine: Option<String>,
    /// NAME=http://host:port/status: while target NAME runs, read this myplex
    /// admin /status once a second and chart each group's in-flight limit
    /// (limits.csv, results.json, report.html). Repeatable.
    #[arg(long = "myplex-status")]
    myplex_status: Vec<String>,
    /// Before each point, wait until the server's purge debt (InnoDB's
    /// history list: committed transactions not purged yet) is at most
    /// this, so that no target pays for the work the previous one deferred.
    #[arg(long, default_value_t = 1000)]
    purge_max: u64,
    /// The longest wait for that, seconds; 0 = do not wait (the debt is
    /// still reported per point).
    #[arg(long, default_value_t = 300)]
    purge_wait: u64,
}

fn tables(c: &Common) -> Tables {
    Tables {
        count: c.tables.max(1),
        size: c.table_size.max(200),
    }
}

fn targets(c: &Common) -> anyhow::Result<Vec<Target>> {
    c.targets
        .iter()
        .map(|t| Target::parse(t).map_err(anyhow::Error::msg))
        .collect()
}

async fn connect(t: &Target) -> anyhow::Result<Conn> {
    let opts = t.opts().map_err(anyhow::Error::msg)?;
    Ok(Conn::new(opts).await?)
}

/// Runs the bench command.
pub async fn main(args: BenchArgs) -> anyhow::Result<()> {
    match args.cmd {
        BenchCmd::Prepare(c) => {
            let t = targets(&c)?;
            let mut conn = connect(&t[0]).await?;
            eprintln!(
                "preparing {} tables × {} rows via {}",
                c.tables, c.table_size, t[0].name
            );
            workload::prepare(&mut conn, tables(&c)).await?;
            conn.disconnect().await?;
            Ok(())
        }
        BenchCmd::Cleanup(c) => {
            let t = targets(&c)?;
            let mut conn = connect(&t[0]).await?;
            workload::cleanup(&mut conn, tables(&c)).await?;
            conn.disconnect().await?;
            Ok(())
        }
        BenchCmd::Run(r) => run(r).await,
    }
}

fn machine_description() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .next()
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map_or("? GiB".into(), |kb| {
            format!("{:.0} GiB", kb as f64 / 1048576.0)
        });
    format!("{cpus} CPUs ({model}), {mem} RAM")
}

async fn run(r: RunArgs) -> anyhow::Result<()> {
    let targets = targets(&r.common)?;
    let sweep: Vec<usize> = r
        .clients
        .split(',')
        .map(|c| c.trim().parse::<usize>())
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow::anyhow!("--clients: {e}"))?;
    if sweep.is_empty() || sweep.contains(&0) {
        anyhow::bail!("--clients: give positive client counts, e.g. 8,64,512");
    }
    let sources: Vec<StatusSource> = r
        .myplex_status
        .iter()
        .map(|s| StatusSource::parse(s).map_err(anyhow::Error::msg))
        .collect::<anyhow::Result<_>>()?;
    if let Some(s) = sources
        .iter()
        .find(|s| !targets.iter().any(|t| t.name == s.target))
    {
        anyhow::bail!("--myplex-status: no --target named {:?}", s.target);
    }
    let s = Settings {
        workload: r.workload,
        tables: tables(&r.common),
        warmup: Duration::from_secs(r.warmup),
        duration: Duration::from_secs(r.duration.max(1)),
        connect_concurrency: r.connect_concurrency,
        threads: r.client_threads,
        stop_grace: Duration::from_secs(r.stop_grace),
    };
    let workload_name = serde_json::to_value(r.workload)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default();
    let mut report = Report {
        workload: workload_name,
        tables: format!("{} tables × {} rows", s.tables.count, s.tables.size),
        warmup_s: r.warmup,
        duration_s: r.duration,
        machine: r.machine.clone().unwrap_or_else(machine_description),
        started: format!("{:?}", std::time::SystemTime::now()),
        points: Vec::new(),
        limits: Vec::new(),
    };
    let origin = tokio::time::Instant::now();
    let samples = Arc::new(Mutex::new(Vec::new()));
    let failures = Arc::new(AtomicU64::new(0));
    let bar = Progress::stderr();
    std::fs::create_dir_all(&r.out)?;
    println!("{}", report::table_header());
    for clients in &sweep {
        // Alternate the order per point so neither target always runs first.
        let order: Vec<&Target> = if (report.points.len() / targets.len().max(1)).is_multiple_of(2)
        {
            targets.iter().collect()
        } else {
            targets.iter().rev().collect()
        };
        for t in order {
            let drained = purge::drain(t, r.purge_max, Duration::from_secs(r.purge_wait)).await;
            if drained.waited >= Duration::from_secs(1) {
                eprintln!(
                    "{} at {clients} clients: waited {:.0} s for the purge debt to fall to {}",
                    t.name,
                    drained.waited.as_secs_f64(),
                    drained.debt.map_or_else(|| "?".into(), |d| d.to_string())
                );
            }
            let phase = Arc::new(PointPhase::default());
            let debt = tokio::spawn(purge::window(t.clone(), phase.clone(), s.duration));
            let samplers: Vec<_> = sources
                .iter()
                .filter(|src| src.target == t.name)
                .map(|src| {
                    tokio::spawn(limits::sample(
                        src.clone(),
                        *clients,
                        origin,
                        phase.clone(),
                        samples.clone(),
                        failures.clone(),
                    ))
                })
                .collect();
            let (name, c) = (t.name.as_str(), *clients);
            let p = runner::run_point(t, c, s, |tick| {
                if tick.phase == Phase::Measure {
                    phase.measuring();
                }
                bar.tick(name, c, tick);
            })
            .await;
            samplers.iter().for_each(|h| h.abort());
            bar.done();
            let mut p = p.map_err(anyhow::Error::msg)?;
            p.purge_wait_s = drained.waited.as_secs_f64();
            // Its last reading was due a second before the window closed.
            p.purge_debt = match tokio::time::timeout(Duration::from_secs(15), debt).await {
                Ok(Ok(w)) => w,
                _ => purge::Window::default(),
            };
            println!("{}", report::table_row(&p));
            report.points.push(p);
            if let Ok(l) = samples.lock() {
                report.limits.clone_from(&l);
            }
            // Write as we go so an interrupted sweep still leaves results.
            write_outputs(&r.out, &report)?;
        }
    }
    let failed = failures.load(Ordering::Relaxed);
    if failed > 0 {
        eprintln!("--myplex-status: {failed} reads of /status failed (missing from the chart)");
    }
    eprintln!("results: {}", r.out.display());
    Ok(())
}

fn write_outputs(dir: &std::path::Path, r: &Report) -> std::io::Result<()> {
    std::fs::write(dir.join("results.csv"), report::csv(r))?;
    std::fs::write(dir.join("results.json"), report::json(r))?;
    std::fs::write(dir.join("report.html"), report::html(r))?;
    std::fs::write(dir.join("tps.svg"), report::tps_svg(r))?;
    std::fs::write(dir.join("p95.svg"), report::p95_svg(r))?;
    if !r.limits.is_empty() {
        std::fs::write(dir.join("limits.csv"), limits::csv(&r.limits))?;
    }
    Ok(())
}
