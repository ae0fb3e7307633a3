//! The `myplex` binary: parse the command line, load the config, set up
//! logging, and run the proxy until SIGTERM / SIGINT (SIGHUP reloads the
//! configuration; SIGUSR2 starts the binary on disk, which takes the
//! listeners over and lets this process drain — see `myplex::takeover`).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use myplex::takeover::give::Handover;
use myplex::takeover::take::Inheritance;

#[derive(Parser)]
#[command(name = "myplex", version, about = "MySQL-protocol pooling proxy")]
struct Cli {
    /// Configuration file (TOML); the embedded default applies when omitted.
    #[arg(long, short, global = true)]
    config: Option<PathBuf>,
    /// Take the listening sockets over from the running myplex (through
    /// `takeover_socket`); it stops accepting and drains.
    #[arg(long)]
    takeover: bool,
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
    // After the config is known good: a bad one never reaches the running process.
    let inherited = if cli.takeover {
        if cfg.takeover_socket.is_empty() {
            return Err(myplex::takeover::TakeoverError::NotConfigured.into());
        }
        Some(myplex::takeover::take::connect(
            cfg.takeover_socket.as_ref(),
        )?)
    } else {
        None
    };
    // Before any thread: every boost counts from the process's own value.
    myplex::priority::settle_process_base();
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    if cfg.worker_threads > 0 {
        rt.worker_threads(cfg.worker_threads);
    }
    if cfg.runtime == myplex::config::RuntimeMode::Shared {
        // Sessions run on this runtime's threads.
        let boost = cfg.worker_priority_boost;
        rt.on_thread_start(move || myplex::priority::boost_and_report(boost));
    }
    let rt = rt.enable_all().build()?;
    rt.block_on(serve(cfg, cli.config, inherited))
}

/// The effective configuration as TOML, with every secret masked.
fn toml_like(cfg: &myplex::config::Config) -> String {
    let c = cfg.redacted();
    toml::to_string_pretty(&c).unwrap_or_else(|e| format!("# cannot render: {e}\n{c:#?}"))
}

async fn serve(
    cfg: myplex::config::Config,
    path: Option<PathBuf>,
    mut inherited: Option<Inheritance>,
) -> anyhow::Result<()> {
    use myplex::listener::Listener;
    use tokio::signal::unix::{SignalKind, signal};
    match myplex::server::raise_fd_limit() {
        Some(n) => tracing::info!(limit = n, "open-files limit raised to the hard limit"),
        None => tracing::warn!("could not read or raise the open-files limit"),
    }
    let successor = myplex::takeover::successor::Successor::from_env();
    let listener = match adopt(&mut inherited, "mysql", &cfg.listen)? {
        Some(l) => {
            l.set_backlog(cfg.listen_backlog)
                .context("listen_backlog on the inherited listener")?;
            l
        }
        None => Listener::bind(&cfg)
            .with_context(|| format!("binding listen address {}", cfg.listen))?,
    };
    tracing::info!(listen = %cfg.listen, backend = %cfg.backend.address, "myplex listening");
    let (trigger, shutdown) = myplex::shutdown::channel();
    let trigger = Arc::new(trigger);
    myplex::admin::http::check_token_file(&cfg).context("admin_token_file")?;
    let admin = match adopt(&mut inherited, "admin", &cfg.admin_listen)? {
        Some(Listener::Tcp(l)) => l,
        _ => tokio::net::TcpListener::bind(&cfg.admin_listen)
            .await
            .with_context(|| format!("binding admin_listen address {}", cfg.admin_listen))?,
    };
    tracing::info!(admin = %cfg.admin_listen, "admin endpoint: /metrics /status /healthz /readyz");
    let control = adopt(&mut inherited, "control", &cfg.takeover_socket)?;
    // Before anything slow: SIGHUP's and SIGUSR2's default action would end the process.
    let mut hangup = signal(SignalKind::hangup()).context("installing the SIGHUP handler")?;
    let mut usr2 = signal(SignalKind::user_defined2()).context("installing the SIGUSR2 handler")?;
    let takeover_socket = cfg.takeover_socket.clone();
    let shared = myplex::server::build(cfg, shutdown).await?;
    if let Some(p) = path {
        let _ = shared.config_path.set(p);
    }
    let took_over = inherited.is_some();
    if let Some(i) = inherited {
        let (done, control) = tokio::task::spawn_blocking(move || i.commit()).await??;
        tracing::info!(old_pid = ?done.pid, "takeover: the old process stops accepting and drains");
        if let Some(n) = done.next_id {
            shared.next_id.store(n, Ordering::Relaxed);
        }
        // Its idle sessions follow over the control connection.
        if let Some(stream) = control {
            let shared = shared.clone();
            let rt = tokio::runtime::Handle::current();
            std::thread::Builder::new()
                .name("myplex-moves".into())
                .spawn(move || myplex::server::receive_moved_sessions(stream, shared, rt))
                .context("starting the thread that receives moved sessions")?;
        }
    }
    let (admin_stop_trigger, admin_stop) = myplex::shutdown::channel();
    let handover = (|| -> anyhow::Result<_> {
        let Some(c) = control.map_or_else(|| bind_control(&takeover_socket), |c| Ok(Some(c)))?
        else {
            return Ok(None);
        };
        let h = Handover::of_process(&listener, &admin, &c, admin_stop_trigger, &trigger, &shared)
            .context("preparing the takeover socket")?;
        Ok(Some((c, h)))
    })();
    match handover {
        Ok(Some((c, h))) => drop(tokio::spawn(myplex::takeover::give::serve(c, h))),
        Ok(None) => {}
        // After a hand-over the old process is draining: serve regardless.
        Err(e) if took_over => {
            tracing::error!(error = %format!("{e:#}"), "no takeover socket: this process cannot be upgraded in place")
        }
        Err(e) => return Err(e),
    }
    let reloading = shared.clone();
    tokio::spawn(async move {
        while hangup.recv().await.is_some() {
            // `reload` logs what changed or why it was refused.
            let _ = myplex::reload::reload(&reloading);
        }
    });
    tokio::spawn(async move {
        while usr2.recv().await.is_some() {
            match (&successor, takeover_socket.is_empty()) {
                (_, true) => tracing::warn!("SIGUSR2 ignored: takeover_socket is not set"),
                (Err(e), _) => {
                    tracing::warn!(error = %e, "SIGUSR2 ignored: this binary's path is unknown")
                }
                (Ok(s), false) => s.start(),
            }
        }
    });
    tokio::spawn(myplex::admin::http::serve_until(
        admin,
        shared.clone(),
        admin_stop,
    ));
    let stopping = trigger.clone();
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("shutdown requested; draining sessions at transaction boundaries");
        stopping.trigger();
    });
    myplex::takeover::notify::ready();
    myplex::server::run(listener, shared, Duration::from_secs(30)).await;
    Ok(())
}

/// Binds `takeover_socket` (mode 0600); `None` when it is not set.
fn bind_control(path: &str) -> anyhow::Result<Option<myplex::listener::Listener>> {
    if path.is_empty() {
        return Ok(None);
    }
    let file = myplex::listener::FileSettings {
        mode: Some(0o600),
        ..Default::default()
    };
    myplex::listener::bind_unix(path.as_ref(), 16, file)
        .map(Some)
        .with_context(|| format!("binding takeover_socket {path}"))
}

/// The listener `name` received from the running process, if bound at `address`.
fn adopt(
    inherited: &mut Option<Inheritance>,
    name: &str,
    address: &str,
) -> anyhow::Result<Option<myplex::listener::Listener>> {
    match inherited {
        Some(i) if !address.is_empty() => i
            .listener(name, address)
            .with_context(|| format!("adopting the inherited {name} listener")),
        _ => Ok(None),
    }
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
