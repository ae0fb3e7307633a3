//! The `mariadb` command-line client must not be able to tell the proxy
//! from the server: the same script, run once directly against MariaDB and
//! once through myplex (same user, same options, only the port differs),
//! must produce byte-identical stdout and stderr and the same exit status.
//!
//! The script covers multi-statements, a procedure returning two result
//! sets, warnings, errors (with `--force`), `USE`, character-set changes,
//! user variables, transactions, NULLs, binary data and a row larger than
//! one 16 MB wire chunk. It is run in table mode (`-t`), batch mode and
//! with `--column-type-info` (full column metadata), in transaction and
//! session pooling mode; further tests cover logins, login character sets,
//! concurrent clients and the CLI's own `SHOW WARNINGS` round trip.

use crate::common;

use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};

use common::mariadb::Profile;
use common::{MariaDb, Proxy, mariadb_bin};

/// The script's big row is larger than a stock server's 16 MiB
/// `max_allowed_packet`, so these tests state their need: a production-shaped
/// server with the limit raised (as a DBA would for such rows).
fn server() -> &'static MariaDb {
    MariaDb::shared_with(Profile::Production, &["--max-allowed-packet=64M"])
}

const USER: &str = "app";
const PASSWORD: &str = "secret";

/// Runs the `mariadb` CLI as app/secret against 127.0.0.1:`port` with
/// `input` on stdin. Everything except the port is the same for the direct
/// and the proxied run.
fn run_cli(port: u16, args: &[String], input: &[u8]) -> Output {
    let mut cmd = Command::new(mariadb_bin("mariadb"));
    cmd.arg("--no-defaults")
        .arg("--protocol=TCP")
        .arg("--host=127.0.0.1")
        .arg(format!("--port={port}"))
        .arg(format!("--user={USER}"))
        .arg(format!("--password={PASSWORD}"))
        .arg("--connect-timeout=10")
        .args(args)
        // Locale-independent client messages.
        .env("LC_ALL", "C")
        .env("LANG", "C")
        .env_remove("MYSQL_PWD")
        .env_remove("MYSQL_HOST")
        .env_remove("MYSQL_TCP_PORT")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn mariadb CLI");
    let mut stdin = child.stdin.take().expect("piped stdin");
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().expect("wait for mariadb CLI");
    let _ = writer.join();
    out
}

/// `run_cli` off the runtime's worker threads (the proxy serves on them).
async fn run_cli_async(port: u16, args: Vec<String>, input: Vec<u8>) -> Output {
    tokio::time::timeout(
        std::time::Duration::from_secs(120),
        tokio::task::spawn_blocking(move || run_cli(port, &args, &input)),
    )
    .await
    .expect("mariadb CLI did not finish within 120 s (proxy hang?)")
    .expect("CLI task panicked")
}

/// A schema name unique to this process and call.
fn unique_schema(tag: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "fid_{}_{}_{tag}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// The script; `schema` is created at the start and dropped at the end so
/// the direct and the proxied runs start from the same state.
fn script(schema: &str) -> Vec<u8> {
    let mut s = String::new();
    s.push_str(&format!(
        r#"DROP DATABASE IF EXISTS {schema};
CREATE DATABASE {schema};
USE {schema};
SELECT DATABASE();
CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR(20) CHARACTER SET utf8mb4, price DECIMAL(8,2), d DATE, b VARBINARY(8), n INT NULL) ENGINE=InnoDB;
INSERT INTO t VALUES (1, 'one', 1.50, '2024-01-02', 0x00ff41, NULL), (2, 'twö', 22.25, '1999-12-31', '', 7), (3, '', NULL, NULL, NULL, -1);
SELECT * FROM t ORDER BY id;
SELECT id, name FROM t WHERE id > 100;
SELECT 1; SELECT 2, 'x';
DELIMITER //
SELECT 1 AS first; SELECT 2 AS second, 'x' AS third //
SELECT CAST('abc' AS SIGNED) AS w; SHOW WARNINGS //
CREATE PROCEDURE p() BEGIN SELECT 1 AS a; SELECT 'two' AS b, NOW() IS NOT NULL AS c; END //
DELIMITER ;
CALL p();
CALL p();
SELECT 'after call';
SELECT * FROM no_such_table;
SELECT 'continues after error';
SELECT 1 +;
INSERT INTO t VALUES (1, 'dup', 0, NULL, NULL, NULL);
UPDATE t SET n = n + 1 WHERE id = 2;
SELECT n FROM t WHERE id = 2;
USE test;
SELECT DATABASE();
USE no_such_schema_{schema};
SELECT DATABASE();
USE {schema};
SELECT COUNT(*) FROM t;
SET NAMES latin1;
SELECT 'é' AS e, HEX('é') AS h, @@character_set_client, @@character_set_results, @@collation_connection;
SELECT name, HEX(name) FROM t WHERE id = 2;
SET NAMES utf8mb4 COLLATE utf8mb4_bin;
SELECT 'é' AS e, HEX('é') AS h, @@character_set_client, @@character_set_results, @@collation_connection;
SELECT name, HEX(name) FROM t WHERE id = 2;
SET @v = 42, @s = 'str';
SELECT @v, @s, @nope;
BEGIN;
INSERT INTO t VALUES (10, 'in trx', 0, NULL, NULL, NULL);
SELECT COUNT(*) FROM t;
ROLLBACK;
SELECT COUNT(*) FROM t;
SELECT @@autocommit, @@in_transaction;
SELECT NULL, '', 0, -0.0, 1e300, 0x00010203, _binary 'raw', X'C3A9', CAST(18446744073709551615 AS UNSIGNED), DATE('2020-02-29'), TIME('838:59:59'), CAST('2021-06-01 12:34:56.789' AS DATETIME(3));
SELECT CURRENT_USER(), USER();
SELECT LENGTH(REPEAT('a', 70000)), REPEAT('ab', 40000) AS medium;
SELECT REPEAT('z', 16777300) AS big;
SELECT 'after big';
SHOW CREATE TABLE t;
SHOW COLUMNS FROM t;
DROP PROCEDURE p;
DROP DATABASE {schema};
SELECT DATABASE();
CREATE TABLE after_drop (a INT);
USE test;
SELECT DATABASE();
SELECT 'done';
"#
    ));
    s.into_bytes()
}

/// A line-by-line diff of two outputs (enough to see what differs).
fn line_diff(direct: &[u8], proxied: &[u8]) -> String {
    fn clip(line: &[u8]) -> String {
        let s = String::from_utf8_lossy(line);
        if s.chars().count() > 300 {
            format!(
                "{}... ({} bytes)",
                s.chars().take(300).collect::<String>(),
                line.len()
            )
        } else {
            s.into_owned()
        }
    }
    let a: Vec<&[u8]> = direct.split(|&b| b == b'\n').collect();
    let b: Vec<&[u8]> = proxied.split(|&b| b == b'\n').collect();
    let mut out = String::new();
    let mut shown = 0;
    let (mut i, mut j) = (0, 0);
    while (i < a.len() || j < b.len()) && shown < 80 {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            i += 1;
            j += 1;
            continue;
        }
        // Try to resynchronise within a small window.
        let mut resync = None;
        'search: for d in 1..20 {
            for (di, dj) in [(d, 0), (0, d)] {
                if i + di < a.len() && j + dj < b.len() && a[i + di] == b[j + dj] {
                    resync = Some((di, dj));
                    break 'search;
                }
            }
            for k in 1..=d {
                if i + k < a.len() && j + d < b.len() && a[i + k] == b[j + d] {
                    resync = Some((k, d));
                    break 'search;
                }
                if i + d < a.len() && j + k < b.len() && a[i + d] == b[j + k] {
                    resync = Some((d, k));
                    break 'search;
                }
            }
        }
        let (di, dj) = resync.unwrap_or((1, 1));
        out.push_str(&format!(
            "@@ direct line {} / proxy line {} @@\n",
            i + 1,
            j + 1
        ));
        for line in a.iter().skip(i).take(di) {
            out.push_str(&format!("-{}\n", clip(line)));
            shown += 1;
        }
        for line in b.iter().skip(j).take(dj) {
            out.push_str(&format!("+{}\n", clip(line)));
            shown += 1;
        }
        i = (i + di).min(a.len());
        j = (j + dj).min(b.len());
    }
    if shown >= 80 {
        out.push_str("... (diff truncated)\n");
    }
    out
}

/// Panics with a readable diff unless both runs printed the same bytes and
/// exited alike.
fn assert_same(what: &str, direct: &Output, proxied: &Output) {
    let mut problems = String::new();
    if direct.stdout != proxied.stdout {
        problems.push_str(&format!(
            "--- stdout differs ({} bytes direct, {} via proxy; - direct, + proxy) ---\n{}",
            direct.stdout.len(),
            proxied.stdout.len(),
            line_diff(&direct.stdout, &proxied.stdout)
        ));
    }
    if direct.stderr != proxied.stderr {
        problems.push_str(&format!(
            "--- stderr differs (- direct, + proxy) ---\n{}",
            line_diff(&direct.stderr, &proxied.stderr)
        ));
    }
    if direct.status.code() != proxied.status.code() {
        problems.push_str(&format!(
            "--- exit status differs: direct {:?}, proxy {:?} ---\n",
            direct.status, proxied.status
        ));
    }
    if !problems.is_empty() {
        panic!("{what}: mariadb CLI output through the proxy differs from direct\n{problems}");
    }
}

/// Runs the script directly and through `proxy` with `mode_args`, checks
/// that the direct run is sane (so a broken script cannot make the
/// comparison vacuous), and compares.
async fn compare(db: &MariaDb, proxy: &Proxy, tag: &str, mode_args: &[&str]) {
    let mut args: Vec<String> = mode_args.iter().map(|s| s.to_string()).collect();
    args.push("--force".into());
    args.push("--max-allowed-packet=64M".into());
    args.push("--default-character-set=utf8mb4".into());
    args.push("test".into());
    let schema = unique_schema(tag);
    let input = script(&schema);

    let direct = run_cli_async(db.port, args.clone(), input.clone()).await;
    let proxied = run_cli_async(proxy.addr.port(), args.clone(), input.clone()).await;

    // The direct run must have actually done the work.
    let out = String::from_utf8_lossy(&direct.stdout);
    let err = String::from_utf8_lossy(&direct.stderr);
    for needle in [
        "continues after error",
        "after call",
        "after big",
        "done",
        "twö",
        "Truncated incorrect INTEGER value: 'abc'",
    ] {
        assert!(
            out.contains(needle),
            "{tag}: direct run lacks {needle:?}; stderr:\n{err}"
        );
    }
    if mode_args.contains(&"--column-type-info") {
        for needle in [
            "Org_table:",
            "Catalog:",
            "Collation:",
            "Decimals:",
            "Flags:",
        ] {
            assert!(out.contains(needle), "{tag}: no column metadata ({needle})");
        }
    }
    assert!(
        direct.stdout.len() > 16_777_300,
        "{tag}: the big row is missing"
    );
    for needle in [
        "ERROR 1146 (42S02)",
        "ERROR 1064 (42000)",
        "ERROR 1062 (23000)",
        "ERROR 1049 (42000)",
        "ERROR 1046 (3D000)",
    ] {
        assert!(
            err.contains(needle),
            "{tag}: direct stderr lacks {needle}:\n{err}"
        );
    }
    assert_same(tag, &direct, &proxied);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn table_output_matches_direct() {
    let db = server();
    let proxy = Proxy::builder(db).start().await;
    compare(db, &proxy, "table", &["-t"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn column_type_info_matches_direct() {
    let db = server();
    let proxy = Proxy::builder(db).start().await;
    compare(db, &proxy, "coltype", &["-t", "--column-type-info"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_output_matches_direct() {
    let db = server();
    let proxy = Proxy::builder(db).start().await;
    compare(db, &proxy, "batch", &["--batch"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_mode_table_output_matches_direct() {
    let db = server();
    let proxy = Proxy::builder(db).session_mode().start().await;
    compare(db, &proxy, "sess_table", &["-t"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_mode_column_type_info_matches_direct() {
    let db = server();
    let proxy = Proxy::builder(db).session_mode().start().await;
    compare(db, &proxy, "sess_coltype", &["-t", "--column-type-info"]).await;
}

/// Login variants: plain (TLS not offered by the proxy unless configured),
/// TLS explicitly off, and TLS required (which must fail the same way as
/// against a server without TLS).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_login_variants_match_direct() {
    let db = server();
    let proxy = Proxy::builder(db).start().await;
    let query = b"SELECT 'logged in' AS status, CURRENT_USER() AS u, DATABASE() AS d;\n".to_vec();
    let cases: Vec<Vec<String>> = vec![
        vec!["-t".into(), "test".into()],
        vec!["-t".into(), "--ssl=0".into(), "test".into()],
        vec!["-t".into(), "--skip-ssl".into(), "test".into()],
        vec!["-N".into(), "-B".into(), "--database=test".into()],
        vec!["-t".into(), "--compress".into(), "test".into()],
    ];
    for args in cases {
        let direct = run_cli_async(db.port, args.clone(), query.clone()).await;
        let proxied = run_cli_async(proxy.addr.port(), args.clone(), query.clone()).await;
        assert!(
            direct.status.success(),
            "{args:?}: direct login failed: {}",
            String::from_utf8_lossy(&direct.stderr)
        );
        assert!(
            String::from_utf8_lossy(&direct.stdout).contains("logged in"),
            "{args:?}"
        );
        assert_same(&format!("login {args:?}"), &direct, &proxied);
    }
}

/// Failed logins print the same error as the server would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_login_failures_match_direct() {
    let db = server();
    let proxy = Proxy::builder(db).start().await;
    let query = b"SELECT 1;\n".to_vec();
    let cases: Vec<Vec<String>> = vec![
        // Wrong password (later --password overrides the default one).
        vec!["--password=wrong".into(), "test".into()],
        // Empty password ("using password: NO").
        vec!["--password=".into(), "test".into()],
        // Unknown schema.
        vec!["no_such_schema_cli".into()],
        // Unknown user.
        vec!["--user=nobody".into(), "--password=x".into(), "test".into()],
    ];
    for args in cases {
        let direct = run_cli_async(db.port, args.clone(), query.clone()).await;
        let proxied = run_cli_async(proxy.addr.port(), args.clone(), query.clone()).await;
        assert!(!direct.status.success(), "{args:?}: direct login succeeded");
        assert_same(&format!("failed login {args:?}"), &direct, &proxied);
    }
}

/// `--show-warnings` makes the CLI send `SHOW WARNINGS` as a separate
/// COM_QUERY right after a statement that produced warnings; the warnings
/// must still be those of the statement before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_warnings_option_matches_direct() {
    let db = server();
    let proxy = Proxy::builder(db).start().await;
    let input = b"SELECT CAST('abc' AS SIGNED);\nSELECT 1;\nSELECT CAST('1x' AS SIGNED), CAST('2y' AS SIGNED);\nDO 1/0;\nSELECT 'end';\n".to_vec();
    let args: Vec<String> = vec!["-t".into(), "--show-warnings".into(), "test".into()];
    let direct = run_cli_async(db.port, args.clone(), input.clone()).await;
    assert!(
        String::from_utf8_lossy(&direct.stdout).contains("Truncated incorrect INTEGER value: '2y'"),
        "direct run printed no warnings:\n{}",
        String::from_utf8_lossy(&direct.stdout)
    );
    let proxied = run_cli_async(proxy.addr.port(), args, input).await;
    assert_same("--show-warnings", &direct, &proxied);
}

/// A client that names no schema at login has none (`DATABASE()` is NULL,
/// unqualified table names fail with 1046), even when the pooled backend it
/// lands on was left in a schema by an earlier client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_without_schema_has_no_schema() {
    let db = server();
    // One backend, so the second client certainly reuses the first's.
    let proxy = Proxy::builder(db).groups(1).max_backend(1).start().await;
    let first = run_cli_async(
        proxy.addr.port(),
        vec!["-N".into(), "-B".into(), "test".into()],
        b"SELECT DATABASE();\n".to_vec(),
    )
    .await;
    assert_eq!(
        String::from_utf8_lossy(&first.stdout),
        "test\n",
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let input =
        b"SELECT DATABASE() AS d;\nSELECT COUNT(*) FROM t_unqualified;\nSELECT 'end';\n".to_vec();
    let args: Vec<String> = vec!["-t".into(), "--force".into()];
    let direct = run_cli_async(db.port, args.clone(), input.clone()).await;
    assert!(
        String::from_utf8_lossy(&direct.stderr).contains("ERROR 1046 (3D000)"),
        "{}",
        String::from_utf8_lossy(&direct.stderr)
    );
    let proxied = run_cli_async(proxy.addr.port(), args, input).await;
    assert_same("login without schema", &direct, &proxied);
}

/// After `DROP DATABASE` of the current schema the session has no schema,
/// also on the next statement (which, through a pool, may run on another
/// backend connection).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropping_current_schema_leaves_no_schema() {
    let db = server();
    let proxy = Proxy::builder(db).groups(1).max_backend(2).start().await;
    let schema = unique_schema("dropcur");
    let input = format!(
        "CREATE DATABASE {schema};\nUSE {schema};\nDROP DATABASE {schema};\nSELECT DATABASE() AS d;\nSELECT 1 AS one;\nSELECT DATABASE() AS d;\nCREATE TABLE x (a INT);\nSELECT 'end';\n"
    )
    .into_bytes();
    let args: Vec<String> = vec!["-t".into(), "--force".into(), "test".into()];
    let direct = run_cli_async(db.port, args.clone(), input.clone()).await;
    assert!(
        String::from_utf8_lossy(&direct.stderr).contains("ERROR 1046 (3D000)"),
        "{}",
        String::from_utf8_lossy(&direct.stderr)
    );
    let proxied = run_cli_async(proxy.addr.port(), args, input).await;
    assert_same("drop current schema", &direct, &proxied);
}

/// Several CLI sessions at once through a proxy with fewer backend
/// connections than clients: each must see exactly what it sees alone
/// against the server (no state or result leaking between clients).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_scripts_match_direct() {
    let db = server();
    let proxy = Proxy::builder(db).groups(1).max_backend(4).start().await;
    let port = proxy.addr.port();
    let mut runs = Vec::new();
    for k in 0..4 {
        let schema = unique_schema(&format!("conc{k}"));
        let input = script(&schema);
        let args: Vec<String> = vec![
            "-t".into(),
            "--force".into(),
            "--max-allowed-packet=64M".into(),
            "--default-character-set=utf8mb4".into(),
            "test".into(),
        ];
        let direct = run_cli_async(db.port, args.clone(), input.clone()).await;
        runs.push((k, direct, tokio::spawn(run_cli_async(port, args, input))));
    }
    for (k, direct, proxied) in runs {
        let proxied = proxied.await.expect("proxied CLI task");
        assert!(
            String::from_utf8_lossy(&direct.stdout).contains("done"),
            "client {k}: direct run incomplete"
        );
        assert_same(&format!("concurrent client {k}"), &direct, &proxied);
    }
}

/// `--show-warnings` with several clients at once: each client's separate
/// `SHOW WARNINGS` must report its own previous statement's warnings, not
/// those of whichever client last used the backend connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_warnings_option_concurrent_matches_direct() {
    let db = server();
    let proxy = Proxy::builder(db).groups(1).max_backend(2).start().await;
    let port = proxy.addr.port();
    let mut runs = Vec::new();
    for k in 0..8 {
        let mut input = String::new();
        for i in 0..60 {
            input.push_str(&format!(
                "SELECT CAST('c{k}_{i}' AS SIGNED) AS v;\nSELECT 'c{k}', {i};\n"
            ));
        }
        let input = input.into_bytes();
        let args: Vec<String> = vec!["-t".into(), "--show-warnings".into(), "test".into()];
        let direct = run_cli_async(db.port, args.clone(), input.clone()).await;
        assert!(
            String::from_utf8_lossy(&direct.stdout)
                .contains(&format!("Truncated incorrect INTEGER value: 'c{k}_59'")),
            "direct run printed no warnings"
        );
        runs.push((k, direct, tokio::spawn(run_cli_async(port, args, input))));
    }
    for (k, direct, proxied) in runs {
        let proxied = proxied.await.expect("proxied CLI task");
        assert_same(
            &format!("--show-warnings, concurrent client {k}"),
            &direct,
            &proxied,
        );
    }
}

/// The character set named at login (the handshake collation) must give the
/// same session character set variables and conversions as direct.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_character_sets_match_direct() {
    let db = server();
    let proxy = Proxy::builder(db).groups(1).max_backend(2).start().await;
    let query = "SELECT @@character_set_client, @@character_set_connection, @@character_set_results, @@collation_connection;\nSELECT 'é' AS e, HEX('é') AS h, CHARSET('é') AS c, COLLATION('é') AS k;\nSELECT 1;\nSELECT @@collation_connection;\n".as_bytes().to_vec();
    for cs in [
        "latin1", "utf8mb4", "utf8mb3", "utf8", "binary", "cp1250", "ascii",
    ] {
        let args: Vec<String> = vec![
            "-t".into(),
            format!("--default-character-set={cs}"),
            "test".into(),
        ];
        let direct = run_cli_async(db.port, args.clone(), query.clone()).await;
        assert!(
            direct.status.success(),
            "{cs}: {}",
            String::from_utf8_lossy(&direct.stderr)
        );
        let proxied = run_cli_async(proxy.addr.port(), args, query.clone()).await;
        assert_same(&format!("--default-character-set={cs}"), &direct, &proxied);
    }
}

/// The deterministic form of what `--show-warnings` relies on: a client's
/// `SHOW WARNINGS` / `@@warning_count` describe its own previous statement,
/// even when another client ran statements through the same (two-backend)
/// pool in between. Same sequence run directly for reference.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_warnings_is_per_client() {
    use mysql_async::prelude::Queryable;
    let db = server();
    let proxy = Proxy::builder(db).groups(1).max_backend(2).start().await;
    type Warning = (String, u32, String);
    async fn sequence(url_a: String, url_b: String) -> (Vec<Warning>, Option<u64>) {
        let mut a = mysql_async::Conn::from_url(url_a).await.expect("connect a");
        let mut b = mysql_async::Conn::from_url(url_b).await.expect("connect b");
        a.query_drop("SELECT CAST('from_a' AS SIGNED)")
            .await
            .expect("a");
        b.query_drop("SELECT CAST('from_b1' AS SIGNED), CAST('from_b2' AS SIGNED)")
            .await
            .expect("b");
        let w: Vec<Warning> = a.query("SHOW WARNINGS").await.expect("show warnings");
        b.query_drop("SELECT CAST('from_b3' AS SIGNED)")
            .await
            .expect("b");
        a.query_drop("SELECT CAST('x' AS SIGNED), CAST('y' AS SIGNED), CAST('z' AS SIGNED)")
            .await
            .expect("a");
        b.query_drop("SELECT 1").await.expect("b");
        let count: Option<u64> = a
            .query_first("SELECT @@warning_count")
            .await
            .expect("warning count");
        a.disconnect().await.expect("disconnect");
        b.disconnect().await.expect("disconnect");
        (w, count)
    }
    let direct = sequence(
        db.url("app", "secret", "test"),
        db.url("app", "secret", "test"),
    )
    .await;
    assert_eq!(
        direct.0,
        vec![(
            "Warning".to_string(),
            1292,
            "Truncated incorrect INTEGER value: 'from_a'".to_string()
        )]
    );
    let proxied = sequence(proxy.app_url(), proxy.app_url()).await;
    assert_eq!(
        proxied, direct,
        "warnings seen through the proxy (left) differ from direct (right)"
    );
}
