//! Users looked up in the server (`[server_users]`): an account created at
//! run time logs in through myplex with its own privileges, wrong
//! passwords, other plugins, locked and expired accounts are refused as the
//! server refuses them, a dropped account stops working after the cache
//! TTL, a changed password is picked up, COM_CHANGE_USER reaches server
//! accounts, and a flood of unknown names costs a bounded number of
//! lookups. Real server, real clients (RawConn and the mariadb CLI).

use crate::common;

use std::process::Command;
use std::time::Duration;

use common::mariadb::ROOT_PASSWORD;
use common::raw::{ErrInfo, RawConn};
use common::{MariaDb, Proxy, mariadb_bin};

/// A proxy looking users up through root, with short cache times.
async fn proxy(db: &MariaDb, allow_no_password: bool) -> Proxy {
    proxy_ttl(db, 1, allow_no_password).await
}

async fn proxy_ttl(db: &MariaDb, ttl: u64, allow_no_password: bool) -> Proxy {
    Proxy::builder(db)
        .with(|c| {
            let s = &mut c.server_users;
            s.enabled = true;
            s.lookup_user = "root".into();
            s.lookup_password = ROOT_PASSWORD.into();
            s.cache_ttl_s = ttl;
            s.negative_ttl_s = 1;
            s.max_lookups_per_s = 5;
            s.allow_no_password = allow_no_password;
            // These tests count lookups and refusals; the login throttle
            // (tests/hostile_clients.rs) would stretch them past the TTLs.
            c.frontend.auth_throttle_max_delay_ms = 0;
        })
        .start()
        .await
}

async fn login(addr: &str, user: &str, pw: &str) -> Result<RawConn, ErrInfo> {
    RawConn::try_connect(addr, user, pw, None, true).await
}

/// The same login's error through the proxy and directly.
async fn same_refusal(p: &Proxy, db: &MariaDb, user: &str, pw: &str) -> ErrInfo {
    let via = login(&p.addr.to_string(), user, pw)
        .await
        .err()
        .unwrap_or_else(|| panic!("{user} logged in through the proxy"));
    let direct = login(&db.addr(), user, pw)
        .await
        .err()
        .unwrap_or_else(|| panic!("{user} logged in directly"));
    assert_eq!(
        (via.code, &via.state, &via.message),
        (direct.code, &direct.state, &direct.message)
    );
    via
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn created_user_logs_in_with_its_own_privileges() {
    let db = MariaDb::shared();
    db.sql(
        "DROP USER IF EXISTS su_a; CREATE USER su_a@'%' IDENTIFIED BY 'pw_a';\n\
         CREATE TABLE IF NOT EXISTS test.su_open (x INT); CREATE TABLE IF NOT EXISTS test.su_closed (x INT);\n\
         GRANT SELECT ON test.su_open TO su_a;",
    );
    let p = proxy(db, false).await;
    let addr = p.addr.to_string();
    let mut c = login(&addr, "su_a", "pw_a").await.expect("su_a logs in");
    assert_eq!(c.query_one("SELECT CURRENT_USER()").await, "su_a@%");
    c.query("SELECT * FROM test.su_open").await.rows();
    let denied = c.query("SELECT * FROM test.su_closed").await.err();
    let mut d = login(&db.addr(), "su_a", "pw_a").await.expect("direct");
    let direct = d.query("SELECT * FROM test.su_closed").await.err();
    assert_eq!(denied.code, 1142, "{denied:?}");
    assert_eq!(denied.message, direct.message);

    // The mariadb CLI, which speaks its own handshake.
    let out = Command::new(mariadb_bin("mariadb"))
        .args(["--no-defaults", "--protocol=TCP", "--host=127.0.0.1"])
        .arg(format!("--port={}", p.addr.port()))
        .args(["--user=su_a", "--password=pw_a", "-N", "-B", "-e"])
        .arg("SELECT CURRENT_USER(); SELECT COUNT(*) FROM test.su_open")
        .output()
        .expect("run mariadb");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "su_a@%\n0\n");

    let e = same_refusal(&p, db, "su_a", "wrong").await;
    assert_eq!(e.code, 1045);
    // (The server answers an unknown name with 1698; myplex, as for names
    // missing from its config, with 1045.)
    let e = login(&addr, "su_nobody", "pw")
        .await
        .err()
        .expect("unknown");
    assert_eq!(e.code, 1045);
    // The user's own credential pool: the backend session is su_a's.
    assert!(p.shared.pool.backend_users().iter().any(|u| u == "su_a"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_rows_match_as_the_server_matches_them() {
    let db = MariaDb::shared();
    // The fixture's server skips name resolution: a client on 127.0.0.1
    // is '127.0.0.1', never 'localhost'; the literal row beats '%'.
    db.sql(
        "DROP USER IF EXISTS su_h@'%'; DROP USER IF EXISTS su_h@'127.0.0.1'; DROP USER IF EXISTS su_l@localhost;\n\
         CREATE USER su_h@'%' IDENTIFIED BY 'any'; CREATE USER su_h@'127.0.0.1' IDENTIFIED BY 'loop';\n\
         CREATE USER su_l@localhost IDENTIFIED BY 'pw';",
    );
    let p = proxy(db, false).await;
    let addr = p.addr.to_string();
    let mut c = login(&addr, "su_h", "loop").await.expect("literal row");
    assert_eq!(c.query_one("SELECT CURRENT_USER()").await, "su_h@127.0.0.1");
    same_refusal(&p, db, "su_h", "any").await;
    same_refusal(&p, db, "su_l", "pw").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_user_stops_and_new_password_is_picked_up() {
    let db = MariaDb::shared();
    db.sql("DROP USER IF EXISTS su_d; CREATE USER su_d@'%' IDENTIFIED BY 'one';");
    let p = proxy_ttl(db, 3, false).await;
    let addr = p.addr.to_string();
    login(&addr, "su_d", "one").await.expect("first login");
    db.sql("ALTER USER su_d@'%' IDENTIFIED BY 'two';");
    // Still cached (TTL 3 s), but after the negative TTL (1 s) a failed
    // password reads the account again.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let mut c = login(&addr, "su_d", "two").await.expect("new password");
    assert_eq!(c.query_one("SELECT CURRENT_USER()").await, "su_d@%");
    assert_eq!(
        login(&addr, "su_d", "one").await.err().map(|e| e.code),
        Some(1045)
    );
    db.sql("DROP USER su_d@'%';");
    // Cached for the TTL, then read again and gone.
    tokio::time::sleep(Duration::from_millis(3100)).await;
    let e = login(&addr, "su_d", "two")
        .await
        .err()
        .expect("dropped user refused");
    assert_eq!(e.code, 1045, "{e:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn change_user_to_a_server_account() {
    let db = MariaDb::shared();
    db.sql("DROP USER IF EXISTS su_c; CREATE USER su_c@'%' IDENTIFIED BY 'pw_c';");
    let p = proxy(db, false).await;
    let addr = p.addr.to_string();
    let mut c = login(&addr, "app", "secret").await.expect("app");
    let (_, reply) = c.change_user("su_c", "pw_c", None).await;
    assert_eq!(reply.first(), Some(&0x00), "change user: {reply:02x?}");
    assert_eq!(c.query_one("SELECT CURRENT_USER()").await, "su_c@%");
    let (_, reply) = c.change_user("su_c", "wrong", None).await;
    let e = common::raw::parse_err(&reply).expect("ERR");
    assert_eq!(e.code, 1045, "{e:?}");
    // The failed attempt keeps the user, as on the server.
    assert_eq!(c.query_one("SELECT CURRENT_USER()").await, "su_c@%");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accounts_myplex_cannot_serve_are_refused_like_the_server() {
    let db = MariaDb::shared();
    db.sql(
        "DROP USER IF EXISTS su_sock, su_lock, su_exp, su_nopw;\n\
         CREATE USER su_sock@'%' IDENTIFIED VIA unix_socket;\n\
         CREATE USER su_lock@'%' IDENTIFIED BY 'pw' ACCOUNT LOCK;\n\
         CREATE USER su_exp@'%' IDENTIFIED BY 'pw' PASSWORD EXPIRE;\n\
         CREATE USER su_nopw@'%';",
    );
    let p = proxy(db, false).await;
    let addr = p.addr.to_string();
    let e = login(&addr, "su_sock", "pw")
        .await
        .err()
        .expect("unix_socket");
    assert_eq!(e.code, 1045, "{e:?}");
    assert_eq!(
        e.message,
        "Access denied for user 'su_sock'@'127.0.0.1' (using password: YES)"
    );
    assert_eq!(same_refusal(&p, db, "su_lock", "pw").await.code, 4151);
    // A wrong password on a locked account is a plain 1045, as direct.
    assert_eq!(same_refusal(&p, db, "su_lock", "bad").await.code, 1045);
    // The server would log su_exp in to its sandbox mode
    // (disconnect_on_expired_password=OFF); myplex refuses as the server
    // does with it ON.
    let e = login(&addr, "su_exp", "pw").await.err().expect("expired");
    assert_eq!(e.code, 1862, "{e:?}");
    assert!(e.message.starts_with("Your password has expired"), "{e:?}");
    // No password: refused unless allowed.
    let e = login(&addr, "su_nopw", "")
        .await
        .err()
        .expect("no password");
    assert_eq!(e.code, 1045, "{e:?}");
    let open = proxy(db, true).await;
    let mut c = login(&open.addr.to_string(), "su_nopw", "")
        .await
        .expect("allowed without password");
    assert_eq!(c.query_one("SELECT CURRENT_USER()").await, "su_nopw@%");
    let e = login(&open.addr.to_string(), "su_nopw", "x").await.err();
    assert_eq!(e.map(|e| e.code), Some(1045));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_names_cost_a_bounded_number_of_lookups() {
    let db = MariaDb::shared();
    let p = proxy(db, false).await;
    let addr = p.addr.to_string();
    let su = p.shared.server_users.clone().expect("server users on");
    let started = std::time::Instant::now();
    for _ in 0..30 {
        let e = login(&addr, "su_ghost", "pw").await.err().expect("refused");
        assert_eq!(e.code, 1045);
    }
    // One name: one lookup (then cached as absent), maybe one more when
    // the negative TTL ran out.
    assert!(su.lookups() <= 2, "lookups: {}", su.lookups());
    let before = su.lookups();
    for i in 0..60 {
        let e = login(&addr, &format!("su_flood{i}"), "pw")
            .await
            .err()
            .expect("refused");
        assert_eq!(e.code, 1045);
    }
    let secs = started.elapsed().as_secs_f64();
    let bound = 5 + (secs * 5.0).ceil() as u64;
    let used = su.lookups() - before;
    assert!(
        used <= bound,
        "{used} lookups in {secs:.1} s (bound {bound})"
    );
    assert!(used >= 3, "the limit let nothing through: {used}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caching_sha2_greeting_switches_server_users_to_native() {
    use mysql_async::prelude::*;
    let db = MariaDb::shared();
    db.sql(
        "DROP USER IF EXISTS su_m; CREATE USER su_m@'%' IDENTIFIED BY 'pw_m';\n\
         GRANT SELECT ON test.* TO su_m;",
    );
    let p = Proxy::builder(db)
        .with(|c| {
            c.frontend.default_auth_plugin = myplex::config::AuthPluginName::CachingSha2Password;
            c.server_users.enabled = true;
            c.server_users.lookup_user = "root".into();
            c.server_users.lookup_password = ROOT_PASSWORD.into();
        })
        .start()
        .await;
    let mut c = mysql_async::Conn::from_url(p.url("su_m", "pw_m", "test"))
        .await
        .expect("su_m logs in after the switch");
    let who: Option<String> = c.query_first("SELECT CURRENT_USER()").await.expect("query");
    assert_eq!(who.as_deref(), Some("su_m@%"));
    c.disconnect().await.expect("disconnect");
    let bad = mysql_async::Conn::from_url(p.url("su_m", "nope", "test")).await;
    assert!(
        matches!(bad, Err(mysql_async::Error::Server(ref e)) if e.code == 1045),
        "{bad:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lookup_survives_the_server_closing_its_connection() {
    let db = MariaDb::shared();
    db.sql(
        "DROP USER IF EXISTS su_lookup, su_r1, su_r2;\n\
         CREATE USER su_lookup@'%' IDENTIFIED BY 'lk'; GRANT SELECT ON mysql.global_priv TO su_lookup;\n\
         CREATE USER su_r1@'%' IDENTIFIED BY 'r1'; CREATE USER su_r2@'%' IDENTIFIED BY 'r2';",
    );
    let p = Proxy::builder(db)
        .with(|c| {
            c.server_users.enabled = true;
            c.server_users.lookup_user = "su_lookup".into();
            c.server_users.lookup_password = "lk".into();
        })
        .start()
        .await;
    let addr = p.addr.to_string();
    login(&addr, "su_r1", "r1").await.expect("first lookup");
    let ids = db.sql("SELECT ID FROM information_schema.PROCESSLIST WHERE USER = 'su_lookup'");
    assert_eq!(ids.lines().count(), 1, "one lookup connection: {ids:?}");
    db.sql(&format!("KILL {}", ids.trim()));
    let mut c = login(&addr, "su_r2", "r2")
        .await
        .expect("lookup on a fresh connection");
    assert_eq!(c.query_one("SELECT CURRENT_USER()").await, "su_r2@%");
}
