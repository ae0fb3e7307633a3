//! End to end through the proxy with mysql_async (text protocol): login,
//! queries, errors, and the greeting mirroring the server.

use crate::common;

use common::{MariaDb, Proxy};
use mysql_async::prelude::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn select_and_version_match_direct() {
    let db = MariaDb::shared();
    let proxy = Proxy::builder(db).start().await;
    let mut c = mysql_async::Conn::from_url(proxy.app_url())
        .await
        .expect("connect via proxy");
    let one: Option<i64> = c.query_first("SELECT 1").await.expect("select 1");
    assert_eq!(one, Some(1));
    let via: Option<String> = c.query_first("SELECT VERSION()").await.expect("version");
    let mut d = mysql_async::Conn::from_url(db.url("app", "secret", "test"))
        .await
        .expect("direct");
    let direct: Option<String> = d.query_first("SELECT VERSION()").await.expect("version");
    assert_eq!(via, direct);
    assert_eq!(c.server_version(), d.server_version());
    c.disconnect().await.expect("disconnect");
    d.disconnect().await.expect("disconnect");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_password_is_access_denied() {
    let db = MariaDb::shared();
    let proxy = Proxy::builder(db).start().await;
    let err = mysql_async::Conn::from_url(proxy.url("app", "nope", "test"))
        .await
        .expect_err("must fail");
    match err {
        mysql_async::Error::Server(e) => {
            assert_eq!(e.code, 1045);
            assert_eq!(e.state, "28000");
            assert!(
                e.message
                    .starts_with("Access denied for user 'app'@'127.0.0.1'"),
                "{}",
                e.message
            );
        }
        other => panic!("unexpected error {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_and_warnings_pass_through() {
    let db = MariaDb::shared();
    let proxy = Proxy::builder(db).start().await;
    let mut c = mysql_async::Conn::from_url(proxy.app_url())
        .await
        .expect("connect");
    let err = c
        .query_drop("SELECT * FROM no_such_table")
        .await
        .expect_err("error");
    match err {
        mysql_async::Error::Server(e) => {
            assert_eq!(e.code, 1146);
            assert_eq!(e.state, "42S02");
        }
        other => panic!("unexpected {other:?}"),
    }
    c.query_drop("SELECT CAST('abc' AS SIGNED)")
        .await
        .expect("warning query");
    let w: Vec<(String, u32, String)> = c.query("SHOW WARNINGS").await.expect("show warnings");
    // SHOW WARNINGS may run on another backend: issue 3 makes this exact.
    let _ = w;
    c.disconnect().await.expect("disconnect");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_schema_fails_login() {
    let db = MariaDb::shared();
    let proxy = Proxy::builder(db).start().await;
    let err = mysql_async::Conn::from_url(proxy.url("app", "secret", "no_such_db"))
        .await
        .expect_err("must fail");
    match err {
        mysql_async::Error::Server(e) => assert_eq!(e.code, 1049, "{}", e.message),
        other => panic!("unexpected {other:?}"),
    }
}
