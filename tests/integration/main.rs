//! The integration tests, as one test binary (`cargo test --test
//! integration`): every module here was once a test binary of its own
//! (`tests/<name>.rs`). One binary compiles `common` and mysql_async once
//! and links once, and libtest runs all tests on one pool of test threads,
//! so a long test overlaps with the others instead of leaving a thread idle.
//!
//! Run one former binary with `cargo test --test integration <module>::`,
//! one test with `cargo test --test integration <module>::<test> --
//! --exact`.
//!
//! What the modules share now that they share a process, and how:
//! - servers: `MariaDb::shared()` (and `shared_fast`, `shared_with`) is
//!   shared by the tests of the calling source file only, as it was by the
//!   tests of one binary; at most a few idle ones are kept running
//!   (`common::mariadb`);
//! - the open-files limit and the CPUs: tests that open thousands of
//!   sockets, run sysbench or MariaDB's own suite hold `common::heavy()`
//!   while they do, one at a time;
//! - what a test reads of the whole process (`/proc/self`: its threads,
//!   its descriptors) must be its own objects only, since other modules'
//!   tests and their proxies run beside it (`sysbench_load` asks its
//!   proxy's workers for their threads);
//! - temporary files and directories: named after the module as well as
//!   the process id, which all modules now share;
//! - no test sets environment variables, changes the working directory or
//!   installs a global tracing subscriber (`MYPLEX_TEST_LOG` installs one,
//!   once, for all).

mod common;

mod admin_auth;
mod admin_exhausted;
mod auth_tls;
mod bad_input;
mod bench_smoke;
mod capabilities;
mod cli_fidelity;
mod client_matrix;
mod code_catalog;
mod commands;
mod conformance;
mod deferred_begin;
mod deploy_artifacts;
mod digests;
mod elastic_pool;
mod fixture_smoke;
mod hostile_clients;
mod kill_budget;
mod kill_routes;
mod large_packets;
mod leak_matrix;
mod local_answers;
mod local_infile;
mod local_socket;
mod login_collation;
mod multiplex_scale;
mod multiplexing;
mod named_locks;
mod observability;
mod outages;
mod parked_backends;
mod prepared;
mod prepared_protocol;
mod protocol_gaps;
mod proxy_basic;
mod python_driver;
mod read_split;
mod reload;
mod replication;
mod row_count;
mod servers;
mod session_authority;
mod session_values;
mod sysbench_load;
mod sysbench_ps;
mod takeover;
mod tls_clients;
mod two_proxies;
mod unix_sockets;
mod user_limits;
mod users_from_server;
mod worker_priority;
