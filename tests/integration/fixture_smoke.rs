//! Smoke test for the real-MariaDB test fixture in `tests/common`.

use crate::common;

use common::MariaDb;

#[test]
fn shared_server_answers_as_root() {
    let db = MariaDb::shared();
    let version = db.sql("SELECT VERSION()");
    assert!(
        version.contains("MariaDB"),
        "unexpected SELECT VERSION() output: {version:?}"
    );
    let dbs = db.sql("SHOW DATABASES LIKE 'test'");
    assert_eq!(dbs.trim(), "test");
}

#[test]
fn app_user_can_log_in_over_tcp() {
    let db = MariaDb::shared();
    let out = db.cli(
        &["-N", "-B", "--user=app", "--password=secret", "test"],
        "SELECT CURRENT_USER(), DATABASE()",
    );
    assert!(
        out.status.success(),
        "app/secret login failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "app@%\ttest");

    let plugin = db.sql("SELECT plugin FROM mysql.user WHERE user = 'app' AND host = '%'");
    assert_eq!(plugin.trim(), "mysql_native_password");
}

#[test]
fn other_user_and_wrong_password() {
    let db = MariaDb::shared();
    let ok = db.cli(
        &["-N", "-B", "--user=other", "--password=otherpw"],
        "SELECT 1",
    );
    assert!(
        ok.status.success(),
        "other/otherpw login failed: {}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let bad = db.cli(&["-N", "-B", "--user=app", "--password=wrong"], "SELECT 1");
    assert!(
        !bad.status.success(),
        "login with a wrong password succeeded"
    );
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("Access denied"),
        "unexpected error: {}",
        String::from_utf8_lossy(&bad.stderr)
    );
}

#[test]
fn private_server_is_cleaned_up_on_drop() {
    let db = MariaDb::start();
    let shared = MariaDb::shared();
    assert_ne!(db.port, shared.port);
    assert_eq!(db.sql("SELECT 1").trim(), "1");
    let base_dir = db.base_dir.clone();
    let pid = db.pid();
    assert!(base_dir.exists());
    drop(db);
    assert!(
        !base_dir.exists(),
        "{} still exists after drop",
        base_dir.display()
    );
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "mariadbd pid {pid} still running after drop"
    );
}

/// A server killed with SIGKILL is gone at once, and starts again on the
/// same datadir and port with its committed rows: what the replication
/// tests' crash of a primary relies on.
#[test]
fn a_private_server_survives_kill9_and_restart() {
    let db = MariaDb::start();
    db.sql("CREATE TABLE test.crash (id INT PRIMARY KEY); INSERT INTO test.crash VALUES (1), (2)");
    let before = db.pid();
    db.kill9();
    assert!(
        !std::path::Path::new(&format!("/proc/{before}")).exists(),
        "mariadbd pid {before} still running after kill9"
    );
    let refused = db.cli(&["--connect-timeout=2"], "SELECT 1");
    assert!(!refused.status.success(), "a killed server answered");
    db.restart();
    assert_ne!(db.pid(), before);
    assert_eq!(db.sql("SELECT COUNT(*) FROM test.crash").trim(), "2");
}

/// The default server is production-shaped: binary log on in row format, and
/// the limits a DBA leaves alone at the server's own defaults (read from
/// information_schema, not hard-coded). The fast variant differs exactly
/// where it says it does.
#[test]
fn default_server_is_production_shaped_fast_variant_is_not() {
    let db = MariaDb::shared();
    let binlog = db.sql("SELECT @@log_bin, @@binlog_format, @@server_id");
    assert_eq!(binlog.trim(), "1\tROW\t1", "binary log settings");
    let at_default = |db: &MariaDb, var: &str| -> bool {
        let out = db.sql(&format!(
            "SELECT GLOBAL_VALUE = DEFAULT_VALUE FROM information_schema.SYSTEM_VARIABLES \
             WHERE VARIABLE_NAME = '{var}'"
        ));
        out.trim() == "1"
    };
    for var in [
        "MAX_PREPARED_STMT_COUNT",
        "MAX_ALLOWED_PACKET",
        "INNODB_FLUSH_LOG_AT_TRX_COMMIT",
        "INNODB_DOUBLEWRITE",
        "INNODB_BUFFER_POOL_SIZE",
        "SYNC_BINLOG",
    ] {
        assert!(at_default(db, var), "{var} is not at the server default");
    }

    let fast = MariaDb::shared_fast();
    assert_ne!(fast.port, db.port);
    assert_eq!(
        fast.sql("SELECT @@log_bin").trim(),
        "0",
        "fast: no binary log"
    );
    assert!(
        !at_default(fast, "MAX_PREPARED_STMT_COUNT"),
        "fast: max_prepared_stmt_count raised"
    );
}
