//! The `myplex` binary: parse the command line, load the config, set up
//! logging, and run the proxy until SIGTERM / SIGINT (SIGHUP reloads the
//! configuration).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "myplex", version, about = "MySQL-protocol pooling proxy")]
struct Cli {
    /// Configuration file (TOML); the embedded default applies when omitted.
    #[arg(long, short, global = true)]
    config: Option<PathBuf>,
    #[command(subcommand)]
    cmd: Option<Cmd>,
}

#[derive(Subcommand)]
enum Cmd {
    /// Validate the configuration and print the effective values.
    CheckConfig,
    /// Load-test tool: sysbench-compatible OLTP, several targets side by side.
    Bench(myplex::bench::BenchArgs),
}

fn main() -> std::process::ExitCode {
    match real_main() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("myplex: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn real_main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if let Some(Cmd::Bench(args)) = cli.cmd {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        let _ = myplex::server::raise_fd_limit();
        return rt.block_on(myplex::bench::main(args));
    }
    let cfg = myplex::config::load(cli.config.as_deref()).context("loading configuration")?;
    if let Some(Cmd::CheckConfig) = cli.cmd {
        println!("{}", toml_like(&cfg));
        eprintln!("configuration OK");
        return Ok(());
    }
    let _log = myplex::telemetry::init(&cfg.log);
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    if cfg.worker_threads > 0 {
        rt.worker_threads(cfg.worker_threads);
    }
    let rt = rt.enable_all().build()?;
    rt.block_on(serve(cfg, cli.config))
}

/// The effective configuration as TOML, with every secret masked.
fn toml_like(cfg: &myplex::config::Config) -> String {
    let c = cfg.redacted();
    toml::to_string_pretty(&c).unwrap_or_else(|e| format!("# cannot render: {e}\n{c:#?}"))
}

async fn serve(cfg: myplex::config::Config, path: Option<PathBuf>) -> anyhow::Result<()> {
    match myplex::server::raise_fd_limit() {
        Some(n) => tracing::info!(limit = n, "open-files limit raised to the hard limit"),
        None => tracing::warn!("could not read or raise the open-files limit"),
    }
    let listener = myplex::listener::Listener::bind(&cfg)
        .with_context(|| format!("binding listen address {}", cfg.listen))?;
    tracing::info!(listen = %cfg.listen, backend = %cfg.backend.address, "myplex listening");
    let (trigger, shutdown) = myplex::shutdown::channel();
    myplex::admin::http::check_token_file(&cfg).context("admin_token_file")?;
    let admin = tokio::net::TcpListener::bind(&cfg.admin_listen)
        .await
        .with_context(|| format!("binding admin_listen address {}", cfg.admin_listen))?;
    tracing::info!(admin = %cfg.admin_listen, "admin endpoint: /metrics /status /healthz /readyz");
    // Before anything slow: SIGHUP's default action would end the process.
    let mut hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .context("installing the SIGHUP handler")?;
    let shared = myplex::server::build(cfg, shutdown).await?;
    if let Some(p) = path {
        let _ = shared.config_path.set(p);
    }
    let reloading = shared.clone();
    tokio::spawn(async move {
        while hangup.recv().await.is_some() {
            // `reload` logs what changed or why it was refused.
            let _ = myplex::reload::reload(&reloading);
        }
    });
    tokio::spawn(myplex::admin::http::serve(admin, shared.clone()));
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("shutdown requested; draining sessions at transaction boundaries");
        trigger.trigger();
    });
    myplex::server::run(listener, shared, Duration::from_secs(30)).await;
    Ok(())
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut term) = signal(SignalKind::terminate()) else {
        return std::future::pending().await;
    };
    let Ok(mut int) = signal(SignalKind::interrupt()) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}
