//! Client authentication variants and TLS toward clients: caching_sha2
//! (greeting default and auth switch), stored password hashes, and a TLS
//! upgrade checked with the `mariadb` CLI.

mod common;

use std::process::Command;

use common::tls::self_signed;
use common::{MariaDb, Proxy, mariadb_bin};
use myplex::config::{AuthPluginName, UserConfig};
use mysql_async::prelude::*;

fn user(name: &str, f: impl FnOnce(&mut UserConfig)) -> UserConfig {
    let mut u = UserConfig {
        name: name.into(),
        backend_user: Some("app".into()),
        backend_password: Some("secret".into()),
        ..Default::default()
    };
    f(&mut u);
    u
}

async fn select_one(url: String) -> Result<Option<i64>, mysql_async::Error> {
    let mut c = mysql_async::Conn::from_url(url).await?;
    let v = c.query_first("SELECT 1").await?;
    c.disconnect().await?;
    Ok(v)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caching_sha2_fast_path_and_hashes() {
    let db = MariaDb::shared();
    let p = Proxy::builder(db)
        .with(|c| {
            c.frontend.default_auth_plugin = AuthPluginName::CachingSha2Password;
            c.users.push(user("nativehash", |u| {
                // PASSWORD('secret')
                u.password_sha1 = Some("*14E65567ABDB5135D0CFD9A70B3032C179A49EE7".into())
            }));
        })
        .start()
        .await;
    // Cleartext-configured user with the caching_sha2 greeting.
    assert_eq!(
        select_one(p.app_url()).await.expect("caching_sha2 login"),
        Some(1)
    );
    // A user stored as a native hash gets switched to mysql_native_password.
    assert_eq!(
        select_one(p.url("nativehash", "secret", "test"))
            .await
            .expect("switch to native"),
        Some(1)
    );
    let bad = select_one(p.url("nativehash", "wrong", "test")).await;
    assert!(
        matches!(bad, Err(mysql_async::Error::Server(ref e)) if e.code == 1045),
        "{bad:?}"
    );
    let bad = select_one(p.url("app", "wrong", "test")).await;
    assert!(
        matches!(bad, Err(mysql_async::Error::Server(ref e)) if e.code == 1045),
        "{bad:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sha256_hash_user_logs_in() {
    use sha2::{Digest, Sha256};
    let h2 = Sha256::digest(Sha256::digest(b"s3cret"));
    let hex: String = h2.iter().map(|b| format!("{b:02x}")).collect();
    let db = MariaDb::shared();
    let p = Proxy::builder(db)
        .with(|c| {
            c.users
                .push(user("sha2user", |u| u.password_sha256 = Some(hex)));
        })
        .start()
        .await;
    // Native greeting; the stored credential needs caching_sha2: auth switch.
    assert_eq!(
        select_one(p.url("sha2user", "s3cret", "test"))
            .await
            .expect("sha2 via switch"),
        Some(1)
    );
    let bad = select_one(p.url("sha2user", "nope", "test")).await;
    assert!(
        matches!(bad, Err(mysql_async::Error::Server(ref e)) if e.code == 1045),
        "{bad:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_upgrade_with_the_cli() {
    let dir = std::env::temp_dir().join(format!("myplex-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let (cert, key) = self_signed(&dir);
    let db = MariaDb::shared();
    let p = Proxy::builder(db)
        .with(|c| {
            c.frontend.tls_cert = cert.clone();
            c.frontend.tls_key = key.clone();
            c.frontend.require_tls = true;
        })
        .start()
        .await;
    let port = p.addr.port();
    let run = move |ssl: bool| {
        let mut cmd = Command::new(mariadb_bin("mariadb"));
        cmd.args([
            "--no-defaults",
            "--protocol=TCP",
            "--host=127.0.0.1",
            "-uapp",
            "-psecret",
            "test",
        ])
        .arg(format!("--port={port}"));
        if ssl {
            cmd.args(["--ssl", "--ssl-verify-server-cert=0"]);
        } else {
            cmd.arg("--ssl=0");
        }
        cmd.args(["-e", "status; SELECT 40 + 2"])
            .output()
            .expect("run mariadb")
    };
    let out = tokio::task::spawn_blocking(move || run(true))
        .await
        .expect("join");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("Cipher in use"), "{stdout}");
    assert!(stdout.contains("42"), "{stdout}");
    let out = tokio::task::spawn_blocking(move || run(false))
        .await
        .expect("join");
    assert!(!out.status.success(), "plain connection must be refused");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("TLS"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
