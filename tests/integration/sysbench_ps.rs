//! Real sysbench `oltp_read_write` in its default prepared-statement mode
//! (server-side COM_STMT_PREPARE / EXECUTE, BEGIN and COMMIT included)
//! through the proxy: 1,000 client threads, each holding ~20 prepared
//! statements, over 16 backend connections. Asserts zero errors (sysbench
//! retries InnoDB deadlocks, and each retry must match a deadlock the server
//! counted), that the backend never sees more than 16 sessions of the proxy's
//! user, and that the server's `Prepared_stmt_count` stays within
//! 16 × `pool.prepared_per_backend` -- statements are shared per backend, not
//! one copy per client. Throughput, latency and the observed maxima are
//! printed (run with `--nocapture`).

use crate::common;

use std::time::Duration;

use common::load::{Samplers, group_snapshots, innodb_deadlocks, wait_no_app_sessions};
use common::mariadb::{APP_PASSWORD, APP_USER};
use common::sysbench::{
    assert_clean_run, oltp_args, parse_stats, prepare, run_args, sysbench_async,
};
use common::{MariaDb, Proxy};

/// One query for both samples: backend sessions of user `app` (the sampling
/// CLI logs in as root, so it is not counted) and the server's prepared
/// statements.
const SAMPLE_SQL: &str = "SELECT (SELECT COUNT(*) FROM information_schema.processlist WHERE user='app'), \
     (SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME='PREPARED_STMT_COUNT')";

/// (app sessions, Prepared_stmt_count).
fn sample(db: &MariaDb) -> (usize, usize) {
    let out = db.sql(SAMPLE_SQL);
    let mut it = out.split_whitespace().map(|v| v.parse::<usize>());
    match (it.next(), it.next()) {
        (Some(Ok(a)), Some(Ok(b))) => (a, b),
        _ => panic!("sample {out:?}"),
    }
}

fn prepared_stmt_count(db: &MariaDb) -> usize {
    sample(db).1
}

/// Samples with repeats collapsed: `(16, 320)×40, (16, 322)×3, ...`.
fn compact(samples: &[(usize, usize)]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < samples.len() {
        let n = samples[i..]
            .iter()
            .take_while(|s| **s == samples[i])
            .count();
        out.push(format!("{:?}×{n}", samples[i]));
        i += n;
    }
    out.join(", ")
}

/// sysbench's default `--db-ps-mode` (`auto`) uses server-side prepared
/// statements.
const PS_MODE: &[&str] = &[];

const SCHEMA: &str = "sb_ps_1000";
const THREADS: usize = 1000;
const TIME_S: u64 = 20;
const MAX_BACKEND: usize = 16;

/// The bar in prepared-statement mode: 1,000 sysbench threads
/// through 16 backend connections, zero errors, bounded server statements.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousand_prepared_statement_clients_through_sixteen_backends() {
    let _heavy = common::heavy();
    myplex::server::raise_fd_limit();
    let db = MariaDb::shared();

    prepare(db, SCHEMA, PS_MODE).await;

    let proxy = Proxy::builder(db)
        .groups(2)
        .max_backend(MAX_BACKEND)
        .queue_timeout_ms(60_000)
        .start()
        .await;
    let per_backend = proxy.shared.config.load().pool.prepared_per_backend;
    let stmt_cap = MAX_BACKEND * per_backend;

    // The proxy's start-up probe connection must be gone before the load.
    let probe_gone_after =
        tokio::task::spawn_blocking(move || wait_no_app_sessions(db, Duration::from_secs(10)))
            .await
            .expect("probe check");
    assert_eq!(
        proxy.backends_owned(),
        0,
        "the pool owns connections before any client"
    );
    let stmts_before = prepared_stmt_count(db);

    let deadlocks_before = innodb_deadlocks(db);
    let samplers = Samplers::start(db, proxy.shared.clone(), sample);
    let mut run = oltp_args(proxy.addr.port(), APP_USER, APP_PASSWORD, SCHEMA, PS_MODE);
    run.extend(run_args(THREADS, TIME_S));
    // --time plus thread startup (sysbench gives up after 30 s), the last
    // queued transactions, and disconnects.
    let sb = sysbench_async(run, Duration::from_secs(TIME_S + 40)).await;
    let sampled = samplers.finish().await;
    let deadlocks = innodb_deadlocks(db) - deadlocks_before;

    // Distinct statements (per pool, schema and SQL) clients prepared.
    let distinct = proxy.shared.registry.lock().expect("registry").len();
    let stats = parse_stats(&sb.stdout);
    let pl_max = sampled.max_of(|s| s.0);
    let ps_max = sampled.max_of(|s| s.1);
    let snapshot = group_snapshots(&proxy.shared);
    eprintln!(
        "[{SCHEMA}] threads={THREADS} groups=2 max_backend={MAX_BACKEND} | probe gone after {probe_gone_after:?} \
         | sysbench {:?} in {:?} | {stats:?} | innodb deadlocks={deadlocks} \
         | processlist max={pl_max} over {} samples, owned max={} \
         | Prepared_stmt_count before={stmts_before} max={ps_max} (cap {stmt_cap}; {distinct} distinct statements) \
         | groups after: {snapshot:?}",
        sb.status,
        sb.elapsed,
        sampled.server.len(),
        sampled.owned_max,
    );

    assert_clean_run(&sb, stats, deadlocks);

    assert!(
        pl_max >= 1,
        "the sampler never saw the proxy's backend sessions: {}",
        compact(&sampled.server)
    );
    assert!(
        pl_max <= MAX_BACKEND,
        "backend saw {pl_max} sessions of user app, cap is {MAX_BACKEND}: samples (app sessions, Prepared_stmt_count) {}",
        compact(&sampled.server)
    );
    assert!(
        sampled.owned_max <= MAX_BACKEND,
        "the pool owned {} backend connections, cap is {MAX_BACKEND}",
        sampled.owned_max
    );
    assert!(
        ps_max > stmts_before,
        "the sampler never saw a prepared statement on the server: {}",
        compact(&sampled.server)
    );
    assert!(
        ps_max - stmts_before <= stmt_cap,
        "the server held {ps_max} prepared statements ({stmts_before} before the run); \
         cap is {MAX_BACKEND} backends × {per_backend}: samples (app sessions, Prepared_stmt_count) {}",
        compact(&sampled.server)
    );
    // Statements are shared: a backend holds at most one server-side copy
    // of each distinct statement, however many clients prepared it — plus,
    // for an instant, the fresh copy a COM_STMT_PREPARE makes (the server
    // is always asked for the current shape) before the old one is closed:
    // one per backend at most, as each backend serves one command at a time.
    assert!(
        ps_max - stmts_before <= MAX_BACKEND * (distinct + 1),
        "the server held {ps_max} prepared statements ({stmts_before} before the run) for \
         {distinct} distinct statements on at most {MAX_BACKEND} backends: some backend holds \
         more than one copy of a statement; samples (app sessions, Prepared_stmt_count) {}",
        compact(&sampled.server)
    );

    drop(proxy);
    db.sql(&format!("DROP DATABASE IF EXISTS `{SCHEMA}`"));
}
