//! 2,000 concurrent mysql_async clients (one `Conn` each, no client pool)
//! through a proxy with 8 backend connections: every client logs in, runs a
//! few statements and a short transaction, and holds its connection until
//! all 2,000 are connected. The backend must never see more than 8 sessions
//! of the proxy's backend user, and every client must succeed.

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::load::{
    Samplers, app_sessions, group_snapshots, listen_overflows, wait_no_app_sessions,
};
use common::mariadb::{APP_PASSWORD, APP_USER};
use common::{MariaDb, Proxy};
use mysql_async::prelude::*;
use mysql_async::{Conn, Opts, OptsBuilder, TxOpts};
use tokio::sync::{Barrier, Semaphore};

const CLIENTS: usize = 2_000;
const MAX_BACKEND: usize = 8;
const SCHEMA: &str = "mux_scale";
/// Logins in progress at once: all of them. The proxy listens with a 4096
/// backlog (`listen_backlog`); with the usual 128, a storm of 2,000 logins
/// overflowed the accept queue and ~400 clients hung waiting for a greeting.
const CONNECT_CONCURRENCY: usize = CLIENTS;
/// One login must not take longer than this.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// Bound on the whole client phase.
const OVERALL: Duration = Duration::from_secs(90);

/// Progress of each client, for the failure message.
const STAGE_NAMES: [&str; 7] = [
    "connecting",
    "connected (in SELECTs)",
    "in transaction",
    "committing",
    "waiting at barrier",
    "failed (at barrier)",
    "done",
];
const STAGE_FAILED: usize = 5;
const STAGE_DONE: usize = 6;

/// One client's life up to the barrier: login, statements, a transaction.
/// Returns the open connection.
async fn client_work(
    i: usize,
    opts: Opts,
    stage: &AtomicUsize,
    connecting: &Semaphore,
) -> Result<Conn, String> {
    let step = |what: &'static str| move |e: mysql_async::Error| format!("client {i}: {what}: {e}");
    let permit = connecting.acquire().await.expect("semaphore open");
    let mut c = tokio::time::timeout(CONNECT_TIMEOUT, Conn::new(opts))
        .await
        .map_err(|_| {
            format!(
                "client {i}: no login within {CONNECT_TIMEOUT:?} (a connection the kernel \
                 dropped from a full listen queue waits for the greeting forever)"
            )
        })?
        .map_err(step("connect"))?;
    drop(permit);
    stage.store(1, Ordering::Relaxed);
    c.query_drop("SELECT 1").await.map_err(step("SELECT 1"))?;
    let one: Option<i64> = c.query_first("SELECT 1").await.map_err(step("SELECT 1"))?;
    if one != Some(1) {
        return Err(format!("client {i}: SELECT 1 returned {one:?}"));
    }
    let slept: Option<i64> = c
        .query_first("SELECT SLEEP(0.01)")
        .await
        .map_err(step("SELECT SLEEP"))?;
    if slept != Some(0) {
        return Err(format!("client {i}: SELECT SLEEP(0.01) returned {slept:?}"));
    }
    stage.store(2, Ordering::Relaxed);
    {
        let mut tx = c
            .start_transaction(TxOpts::default())
            .await
            .map_err(step("START TRANSACTION"))?;
        tx.query_drop(format!("INSERT INTO scratch (client, n) VALUES ({i}, 0)"))
            .await
            .map_err(step("INSERT"))?;
        // LAST_INSERT_ID() is per backend session: right only if the whole
        // transaction stays on one backend connection.
        let id: Option<u64> = tx
            .query_first("SELECT LAST_INSERT_ID()")
            .await
            .map_err(step("LAST_INSERT_ID"))?;
        let id = id.ok_or_else(|| format!("client {i}: no LAST_INSERT_ID"))?;
        tx.query_drop(format!("UPDATE scratch SET n = n + 1 WHERE id = {id}"))
            .await
            .map_err(step("UPDATE"))?;
        let row: Option<(u64, u64)> = tx
            .query_first(format!("SELECT client, n FROM scratch WHERE id = {id}"))
            .await
            .map_err(step("SELECT row"))?;
        if row != Some((i as u64, 1)) {
            return Err(format!(
                "client {i}: row {id} reads {row:?} inside its transaction, expected ({i}, 1)"
            ));
        }
        stage.store(3, Ordering::Relaxed);
        tx.commit().await.map_err(step("COMMIT"))?;
    }
    stage.store(4, Ordering::Relaxed);
    Ok(c)
}

/// After the barrier: one more statement, then a clean QUIT.
async fn client_finish(i: usize, mut c: Conn) -> Result<(), String> {
    let id: Option<u64> = c
        .query_first(format!("SELECT id FROM scratch WHERE client = {i}"))
        .await
        .map_err(|e| format!("client {i}: SELECT after barrier: {e}"))?;
    if id.is_none() {
        return Err(format!("client {i}: its committed row is not visible"));
    }
    c.disconnect()
        .await
        .map_err(|e| format!("client {i}: disconnect: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_thousand_clients_share_eight_backends() {
    let _heavy = common::heavy();
    myplex::server::raise_fd_limit();
    let db = MariaDb::shared();
    db.sql(&format!(
        "DROP DATABASE IF EXISTS `{SCHEMA}`; CREATE DATABASE `{SCHEMA}`; \
         CREATE TABLE `{SCHEMA}`.scratch (id BIGINT AUTO_INCREMENT PRIMARY KEY, \
         client BIGINT NOT NULL, n BIGINT NOT NULL, KEY (client)) ENGINE=InnoDB"
    ));

    let proxy = Proxy::builder(db)
        .groups(2)
        .max_backend(MAX_BACKEND)
        .queue_timeout_ms(60_000)
        .start()
        .await;
    // The start-up probe connection is closed before clients arrive.
    let probe_gone =
        tokio::task::spawn_blocking(move || wait_no_app_sessions(db, Duration::from_secs(10)))
            .await
            .expect("probe check");

    // Samplers: the backend's processlist and the pool's own count of owned
    // connections.
    let samplers = Samplers::start(db, proxy.shared.clone(), app_sessions);

    let opts: Opts = OptsBuilder::from_opts(
        Opts::from_url(&proxy.url(APP_USER, APP_PASSWORD, SCHEMA)).expect("url"),
    )
    // Never silently reconnect over MariaDB's unix socket (bypassing us).
    .prefer_socket(false)
    .into();
    let barrier = Arc::new(Barrier::new(CLIENTS));
    let connecting = Arc::new(Semaphore::new(CONNECT_CONCURRENCY));
    let overflows_before = listen_overflows();
    let stages: Arc<Vec<AtomicUsize>> =
        Arc::new((0..CLIENTS).map(|_| AtomicUsize::new(0)).collect());
    let clients_at_barrier = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(CLIENTS);
    for i in 0..CLIENTS {
        let opts = opts.clone();
        let barrier = barrier.clone();
        let at_barrier = clients_at_barrier.clone();
        let shared = proxy.shared.clone();
        let stages = stages.clone();
        let connecting = connecting.clone();
        tasks.push(tokio::spawn(async move {
            let stage = &stages[i];
            // Failures still reach the barrier so the others are released.
            let work = client_work(i, opts, stage, &connecting).await;
            if work.is_err() {
                stage.store(STAGE_FAILED, Ordering::Relaxed);
            }
            // Sampled on arrival, before anyone is released: once the last
            // client arrives every client is connected, while after the
            // barrier the first ones may already be disconnecting.
            at_barrier.fetch_max(shared.clients.load(Ordering::Relaxed), Ordering::Relaxed);
            barrier.wait().await;
            match work {
                Ok(c) => {
                    let r = client_finish(i, c).await;
                    stage.store(STAGE_DONE, Ordering::Relaxed);
                    r
                }
                Err(e) => Err(e),
            }
        }));
    }
    let all = async {
        let mut errors = Vec::new();
        for t in tasks {
            match t.await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => errors.push(e),
                Err(e) => errors.push(format!("client task panicked: {e}")),
            }
        }
        errors
    };
    let outcome = tokio::time::timeout(OVERALL, all).await;
    let elapsed = started.elapsed();
    let overflows = listen_overflows().zip(overflows_before).map(|(a, b)| a - b);

    let sampled = samplers.finish().await;
    let pl_max = sampled.max_of(|&n| n);
    let (samples, owned_max) = (sampled.server, sampled.owned_max);
    let snapshot = group_snapshots(&proxy.shared);
    eprintln!(
        "[multiplex_scale] {CLIENTS} clients in {elapsed:?} | probe gone after {probe_gone:?} | \
         proxy clients at barrier={} | kernel ListenOverflows delta={overflows:?} | processlist max={pl_max} over {} samples | owned max={owned_max} | \
         groups after: {snapshot:?}",
        clients_at_barrier.load(Ordering::Relaxed),
        samples.len()
    );

    let errors = outcome.unwrap_or_else(|_| {
        let mut hist = [0usize; STAGE_NAMES.len()];
        for s in stages.iter() {
            hist[s.load(Ordering::Relaxed)] += 1;
        }
        let hist: Vec<String> = STAGE_NAMES
            .iter()
            .zip(hist)
            .map(|(name, n)| format!("{name}: {n}"))
            .collect();
        panic!(
            "the {CLIENTS} clients did not finish within {OVERALL:?}; clients by last stage reached: {}; \
             proxy sessions now: {}; kernel ListenOverflows delta (whole host) {overflows:?}; processlist samples {samples:?}; groups {snapshot:?}",
            hist.join(", "),
            proxy.shared.clients.load(Ordering::Relaxed),
        )
    });
    assert!(
        errors.is_empty(),
        "{} of {CLIENTS} clients failed; first ones:\n{}",
        errors.len(),
        errors
            .iter()
            .take(20)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert_eq!(
        clients_at_barrier.load(Ordering::Relaxed),
        CLIENTS,
        "the proxy did not hold all clients at once"
    );
    assert!(
        pl_max >= 1,
        "the processlist sampler never saw a backend session: {samples:?}"
    );
    assert!(
        pl_max <= MAX_BACKEND,
        "backend saw {pl_max} sessions of user app, cap is {MAX_BACKEND}: {samples:?}"
    );
    assert!(
        owned_max <= MAX_BACKEND,
        "the pool owned {owned_max} backend connections, cap is {MAX_BACKEND}"
    );

    let totals = db.sql(&format!(
        "SELECT COUNT(*), SUM(n), COUNT(DISTINCT client) FROM `{SCHEMA}`.scratch"
    ));
    assert_eq!(
        totals.split_whitespace().collect::<Vec<_>>(),
        [
            CLIENTS.to_string(),
            CLIENTS.to_string(),
            CLIENTS.to_string()
        ],
        "committed rows (count, sum(n), distinct clients)"
    );

    drop(proxy);
    db.sql(&format!("DROP DATABASE IF EXISTS `{SCHEMA}`"));
}
