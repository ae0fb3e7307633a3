//! TLS fixtures: a self-signed certificate for `localhost` made with the
//! `openssl` CLI.

use std::path::Path;
use std::process::Command;

/// Writes `cert.pem` and `key.pem` (self-signed, CN=localhost) into `dir`;
/// returns their paths.
pub fn self_signed(dir: &Path) -> (String, String) {
    std::fs::create_dir_all(dir).expect("certificate dir");
    let cert = dir.join("cert.pem");
    let key = dir.join("key.pem");
    let out = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=localhost",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("run openssl");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (cert.display().to_string(), key.display().to_string())
}
