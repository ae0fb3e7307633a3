//! `FOUND_ROWS()` and `CONNECTION_ID()` read in a later statement, with or
//! without an alias, answer what the client's own connection would answer
//! directly -- value and column metadata, byte for byte -- even when
//! another client ran statements on the same backend in between (issue 16,
//! item 13).
//!
//! Each case: client V runs a statement, client W (same user, same
//! capabilities) runs another on the only backend, then V asks; the same
//! with two direct connections. Through the proxy W may be kept waiting
//! (V holds the backend after SQL_CALC_FOUND_ROWS): its answer is not
//! compared.

use crate::common;

use common::raw::{BASE_CAPS, DEPRECATE_EOF, RawConn, Response, response_diff};
use common::{MariaDb, Proxy};

async fn login(addr: &str, caps: u32) -> RawConn {
    match RawConn::try_connect_with(addr, "app", "secret", Some("test"), caps, 45).await {
        Ok(c) => c,
        Err(e) => panic!("login to {addr}: {e:?}"),
    }
}

/// V runs `before`, W runs `between`, V runs `probe`: V's answer.
async fn run(addr: &str, caps: u32, before: &str, between: &str, probe: &str) -> Response {
    let mut v = login(addr, caps).await;
    let mut w = login(addr, caps).await;
    v.query(before).await;
    w.query(between).await;
    let r = v.query(probe).await;
    v.quit().await;
    w.quit().await;
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn found_rows_with_an_alias_is_the_clients_own() {
    let db = MariaDb::shared();
    db.sql(
        "CREATE TABLE IF NOT EXISTS test.la_fr (a INT); \
         DELETE FROM test.la_fr; \
         INSERT INTO test.la_fr VALUES (1),(2),(3),(4),(5),(6),(7),(8)",
    );
    let p = Proxy::builder(db)
        .groups(1)
        .max_backend(1)
        .queue_timeout_ms(1000)
        .start()
        .await;
    let via_addr = p.addr.to_string();
    let direct_addr = db.addr();
    let befores = [
        "SELECT a FROM la_fr",
        "SELECT a FROM la_fr LIMIT 2,3",
        "SELECT SQL_CALC_FOUND_ROWS a FROM la_fr LIMIT 2",
    ];
    let probes = [
        "SELECT FOUND_ROWS()",
        "SELECT FOUND_ROWS() AS x",
        "select found_rows()  as\tTotal ;",
        "SELECT FOUND_ROWS() n",
        "SELECT FOUND_ROWS() AS `my col`",
        "SELECT FOUND_ROWS() AS 'q'",
        "SELECT Found_Rows()\"dq\"",
    ];
    let mut failures = Vec::new();
    for caps in [BASE_CAPS | DEPRECATE_EOF, BASE_CAPS] {
        for before in befores {
            for probe in probes {
                let between = "SELECT a FROM la_fr LIMIT 1";
                let direct = run(&direct_addr, caps, before, between, probe).await;
                let via = run(&via_addr, caps, before, between, probe).await;
                let diff = response_diff(&via, &direct);
                if !diff.is_empty() {
                    failures.push(format!(
                        "caps {caps:#x}, after {before:?}, {probe:?}: {}",
                        diff.join("; ")
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `CONNECTION_ID()` with an alias: the proxy's id, with the metadata the
/// server gives the function (not that of a literal).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_id_with_an_alias_has_the_servers_metadata() {
    let db = MariaDb::shared();
    let p = Proxy::builder(db).groups(1).max_backend(1).start().await;
    let caps = BASE_CAPS | DEPRECATE_EOF;
    let mut via = login(&p.addr.to_string(), caps).await;
    let mut direct = login(&db.addr(), caps).await;
    let plain = via.query_one("SELECT CONNECTION_ID()").await;
    for probe in [
        "SELECT CONNECTION_ID() AS id",
        "SELECT connection_id() `Id`",
    ] {
        let (Response::Rows(v), Response::Rows(d)) =
            (via.query(probe).await, direct.query(probe).await)
        else {
            panic!("{probe}: result sets expected");
        };
        assert_eq!(v.columns, d.columns, "{probe}: column metadata");
        assert_eq!(v.text_rows(), vec![vec![Some(plain.clone())]], "{probe}");
    }
    via.quit().await;
    direct.quit().await;
}

/// A prepared `SELECT CONNECTION_ID()` gives the proxy's id (the one the
/// text form and `KILL` use), never a backend thread id, with the column
/// and row encoding the server gives that statement.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_connection_id_is_the_proxys() {
    let db = MariaDb::shared();
    let p = Proxy::builder(db).groups(1).max_backend(1).start().await;
    let caps = BASE_CAPS | DEPRECATE_EOF;
    let mut via = login(&p.addr.to_string(), caps).await;
    let mut direct = login(&db.addr(), caps).await;
    let plain = via.query_one("SELECT CONNECTION_ID()").await;
    let thread = via
        .query_one("SELECT ID FROM information_schema.PROCESSLIST WHERE INFO LIKE '%cid-marker%'")
        .await;
    assert_ne!(plain, thread, "the test needs ids that differ");
    for q in ["SELECT CONNECTION_ID()", "SELECT connection_id() AS id"] {
        let sv = via.prepare(q).await.expect("prepare via");
        let sd = direct.prepare(q).await.expect("prepare direct");
        let (Response::Rows(v), Response::Rows(d)) = (
            via.execute(sv.id, 0, &[], false).await,
            direct.execute(sd.id, 0, &[], false).await,
        ) else {
            panic!("{q}: result sets expected");
        };
        assert_eq!(v.columns, d.columns, "{q}: column metadata");
        assert_eq!(v.rows[0].len(), d.rows[0].len(), "{q}: row encoding");
        let id: u64 = plain.parse().expect("id");
        assert_eq!(
            v.binary_rows(),
            vec![vec![common::raw::Value::UInt(id)]],
            "{q}"
        );
        via.close_stmt(sv.id).await;
        direct.close_stmt(sd.id).await;
    }
    via.quit().await;
    direct.quit().await;
}
