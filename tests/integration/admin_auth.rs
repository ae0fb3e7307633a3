//! The admin endpoint's bearer token (issue 16, item 14): with
//! `admin_token_file`, `/status`, `/digests`, `POST /reload` and `/metrics` (unless
//! `admin_metrics_public`) answer 401 without the token; the probes stay
//! open; a published endpoint without a token does not start.

use crate::common;

use std::sync::Arc;

use common::proxy::admin_request;
use common::{MariaDb, Proxy};

/// Sends `method path` with optional bearer `token`: (status code, body).
async fn request(p: &Proxy, method: &str, path: &str, token: Option<&str>) -> (u16, String) {
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    admin_request(p.admin, method, path, &auth).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_token_guards_status_reload_and_metrics() {
    let dir = std::env::temp_dir().join(format!("myplex-admin-token-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let file = dir.join("token");
    std::fs::write(&file, "t0ken-123\n").expect("write token");
    let path = file.display().to_string();
    let db = MariaDb::shared();
    let p = Proxy::builder(db)
        .with(|c| c.admin_token_file = path.clone())
        .start()
        .await;
    for (method, path) in [
        ("GET", "/status"),
        ("POST", "/reload"),
        ("GET", "/metrics"),
        ("GET", "/digests"),
        ("GET", "/digests?limit=1"),
    ] {
        let (code, body) = request(&p, method, path, None).await;
        assert_eq!(code, 401, "{method} {path} without a token: {body}");
        assert!(!body.contains("myplex_"), "{body}");
        let (code, _) = request(&p, method, path, Some("t0ken-12")).await;
        assert_eq!(code, 401, "{method} {path} with a wrong token");
    }
    let (code, body) = request(&p, "GET", "/status", Some("t0ken-123")).await;
    assert_eq!(code, 200, "{body}");
    assert!(body.starts_with('{'), "{body}");
    let (code, body) = request(&p, "GET", "/digests", Some("t0ken-123")).await;
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("\"digests\""), "{body}");
    let (code, body) = request(&p, "GET", "/metrics", Some("t0ken-123")).await;
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("myplex_"), "{body}");
    // Probes need no token.
    assert_eq!(request(&p, "GET", "/healthz", None).await.0, 200);
    assert_ne!(request(&p, "GET", "/readyz", None).await.0, 401);
    // The switch opens /metrics only.
    let mut cfg = (**p.shared.config.load()).clone();
    cfg.admin_metrics_public = true;
    p.shared.config.store(Arc::new(cfg));
    assert_eq!(request(&p, "GET", "/metrics", None).await.0, 200);
    assert_eq!(request(&p, "GET", "/status", None).await.0, 401);
    // A rotated token takes effect at once; an unreadable one fails closed.
    std::fs::write(&file, "rotated").expect("rotate");
    assert_eq!(
        request(&p, "GET", "/status", Some("t0ken-123")).await.0,
        401
    );
    assert_eq!(request(&p, "GET", "/status", Some("rotated")).await.0, 200);
    std::fs::remove_file(&file).expect("remove token");
    assert_eq!(request(&p, "GET", "/status", Some("rotated")).await.0, 503);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn published_admin_endpoint_needs_a_readable_token() {
    let base = "admin_listen = \"0.0.0.0:6034\"\n[[users]]\nname = \"a\"\npassword = \"b\"\n";
    let e = myplex::config::load_str(base).expect_err("no token: refused");
    let text = e.to_string();
    assert!(
        text.contains("admin_listen") && text.contains("admin_token_file"),
        "{text}"
    );
    // On loopback no token is needed.
    myplex::config::load_str(&base.replace("0.0.0.0", "127.0.0.1")).expect("loopback is fine");
    // A token file that does not exist stops the start.
    let cfg = myplex::config::load_str(&format!(
        "admin_token_file = \"/nonexistent/myplex-token\"\n{base}"
    ))
    .expect("valid with a token file");
    let e = myplex::admin::http::check_token_file(&cfg).expect_err("missing file");
    assert!(e.to_string().contains("/nonexistent/myplex-token"), "{e}");
    // Nor does the placeholder the shipped manifests carry.
    let shipped = concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/docker/admin_token");
    let cfg = myplex::config::load_str(&format!("admin_token_file = \"{shipped}\"\n{base}"))
        .expect("valid with a token file");
    let e = myplex::admin::http::check_token_file(&cfg).expect_err("placeholder token");
    assert!(e.to_string().contains("placeholder"), "{e}");
}
