//! Client authentication variants and TLS toward clients: caching_sha2
//! (greeting default and auth switch), stored password hashes, and a TLS
//! upgrade checked with the `mariadb` CLI.

use crate::common;

use std::io::{Read, Write};
use std::process::Command;
use std::sync::Arc;

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

/// A proxy with a self-signed certificate for clients (`require_tls`:
/// plain logins refused), and the directory holding it (`tag` names it).
async fn tls_proxy(tag: &str, require_tls: bool) -> (Proxy, std::path::PathBuf) {
    let dir = std::env::temp_dir().join(format!("myplex-tls-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let (cert, key) = self_signed(&dir);
    let p = Proxy::builder(MariaDb::shared())
        .with(|c| {
            c.frontend.tls_cert = cert.clone();
            c.frontend.tls_key = key.clone();
            c.frontend.require_tls = require_tls;
        })
        .start()
        .await;
    (p, dir)
}

/// Runs the `mariadb` CLI against `port` (`ssl`: TLS, else plain) with
/// `sql` as its `-e` script.
fn cli(port: u16, ssl: bool, sql: &str) -> std::process::Output {
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
    cmd.args(["-e", sql]).output().expect("run mariadb")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_upgrade_with_the_cli() {
    let (p, dir) = tls_proxy("cli", true).await;
    let port = p.addr.port();
    let run = move |ssl: bool| cli(port, ssl, "status; SELECT 40 + 2");
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

/// `Ssl_cipher` and `Ssl_version` describe the client's own connection, as
/// direct: a TLS client sees the cipher and version it negotiated with
/// myplex (the backend hop here is plain, where the server reports empty
/// values), named as the server's TLS library names them; a plain client
/// of the same proxy sees empty values.
#[tokio::test]
async fn ssl_status_describes_the_clients_connection() {
    let (p, dir) = tls_proxy("status", false).await;
    let port = p.addr.port();
    // What the CLI printed (it must succeed).
    let run = move |ssl: bool| {
        let sql = "status; SHOW SESSION STATUS LIKE 'Ssl_cipher'; SHOW STATUS LIKE 'Ssl_version'";
        let out = cli(port, ssl, sql);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let status_of = |stdout: &str, name: &str| -> Option<String> {
        stdout.lines().find_map(|l| {
            let (n, v) = l.split_once('\t')?;
            (n == name).then(|| v.to_string())
        })
    };
    let stdout = tokio::task::spawn_blocking(move || run(true))
        .await
        .expect("join");
    // The client's own view: "Cipher in use is TLS_AES_256_GCM_SHA384, …".
    let negotiated = stdout
        .split("Cipher in use is ")
        .nth(1)
        .and_then(|r| r.split([',', ' ', '\n']).next())
        .unwrap_or_default()
        .to_string();
    assert!(!negotiated.is_empty(), "{stdout}");
    assert_eq!(
        status_of(&stdout, "Ssl_cipher").as_deref(),
        Some(negotiated.as_str()),
        "{stdout}"
    );
    let version = status_of(&stdout, "Ssl_version").unwrap_or_default();
    assert!(version == "TLSv1.3" || version == "TLSv1.2", "{stdout}");
    let stdout = tokio::task::spawn_blocking(move || run(false))
        .await
        .expect("join");
    assert_eq!(
        status_of(&stdout, "Ssl_cipher").as_deref(),
        Some(""),
        "{stdout}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Accepts any server certificate (the test's is self-signed, without a
/// subject alternative name); signatures are still checked.
#[derive(Debug)]
struct AnyCert(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &[rustls::pki_types::CertificateDer<'_>],
        _: &rustls::pki_types::ServerName<'_>,
        _: &[u8],
        _: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

fn read_plain_packet(s: &mut impl Read) -> std::io::Result<(u8, Vec<u8>)> {
    let mut h = [0u8; 4];
    s.read_exact(&mut h)?;
    let len = h[0] as usize | (h[1] as usize) << 8 | (h[2] as usize) << 16;
    let mut p = vec![0u8; len];
    s.read_exact(&mut p)?;
    Ok((h[3], p))
}

fn packet(seq: u8, payload: &[u8]) -> Vec<u8> {
    let n = payload.len();
    let mut b = vec![n as u8, (n >> 8) as u8, (n >> 16) as u8, seq];
    b.extend_from_slice(payload);
    b
}

/// A TLS login whose ClientHello travels in the same segment as the
/// SSLRequest (as PyMySQL's often does): the reply to the login, an OK.
fn tls_login_with_early_client_hello(port: u16) -> Result<Vec<u8>, String> {
    let mut sock = std::net::TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    sock.set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .map_err(|e| e.to_string())?;
    let (_, g) = read_plain_packet(&mut sock).map_err(|e| format!("greeting: {e}"))?;
    // Greeting: protocol, version NUL, id(4), scramble(8), filler, caps(2),
    // collation, status(2), caps(2), auth length, reserved(10), scramble.
    let nul = g[1..].iter().position(|&b| b == 0).ok_or("version")? + 1;
    let mut scramble = g[nul + 5..nul + 13].to_vec();
    let rest = nul + 13 + 1 + 2 + 1 + 2 + 2 + 1 + 10;
    scramble.extend_from_slice(&g[rest..rest + 12]);
    let caps: u32 = 0x0000_0200 | 0x0000_8000 | 0x0008_0000 | 0x0000_0800 | 0x0000_2000 | 1;
    let mut ssl = Vec::new();
    ssl.extend_from_slice(&caps.to_le_bytes());
    ssl.extend_from_slice(&(16u32 << 20).to_le_bytes());
    ssl.push(45);
    ssl.extend_from_slice(&[0u8; 23]);
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCert(provider)))
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from("localhost").map_err(|e| e.to_string())?;
    let mut conn =
        rustls::ClientConnection::new(Arc::new(config), name).map_err(|e| e.to_string())?;
    let mut first = packet(1, &ssl);
    conn.write_tls(&mut first).map_err(|e| e.to_string())?;
    // SSLRequest and ClientHello in one write.
    sock.write_all(&first).map_err(|e| e.to_string())?;
    let mut tls = rustls::StreamOwned::new(conn, sock);
    let auth = mysql_common::scramble::scramble_native(&scramble, b"secret").ok_or("scramble")?;
    let mut resp = Vec::new();
    resp.extend_from_slice(&caps.to_le_bytes());
    resp.extend_from_slice(&(16u32 << 20).to_le_bytes());
    resp.push(45);
    resp.extend_from_slice(&[0u8; 23]);
    resp.extend_from_slice(b"app\0");
    resp.push(20);
    resp.extend_from_slice(&auth);
    resp.extend_from_slice(b"mysql_native_password\0");
    tls.write_all(&packet(2, &resp))
        .map_err(|e| format!("handshake response over tls: {e}"))?;
    let (_, reply) = read_plain_packet(&mut tls).map_err(|e| format!("login reply: {e}"))?;
    Ok(reply)
}

/// Issue 16 item 14c: whatever the proxy says after an SSLRequest goes over
/// TLS. A client that sends its ClientHello right behind the SSLRequest
/// (both in the proxy's first read) used to get a plaintext "bad handshake"
/// ERR, which a TLS client reads as garbage (WRONG_VERSION_NUMBER).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_hello_right_behind_the_ssl_request_logs_in() {
    let dir = std::env::temp_dir().join(format!("myplex-tls-early-{}", std::process::id()));
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
    for attempt in 0..3 {
        let reply = tokio::task::spawn_blocking(move || tls_login_with_early_client_hello(port))
            .await
            .expect("join");
        match reply {
            Ok(r) => assert!(r.starts_with(&[0x00]), "attempt {attempt}: {r:02x?}"),
            Err(e) => panic!("attempt {attempt}: {e}"),
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
