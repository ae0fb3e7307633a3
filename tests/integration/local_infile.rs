//! LOAD DATA LOCAL INFILE relayed through the proxy with the `mariadb` CLI:
//! the file streams from the client to the backend; a client that did not
//! enable it gets the same refusal as from the server directly.

use crate::common;

use std::io::Write;
use std::process::{Command, Output};

use common::{MariaDb, Proxy, mariadb_bin};
use mysql_async::prelude::*;

fn cli(port: u16, local_infile: bool, sql: &str) -> Output {
    Command::new(mariadb_bin("mariadb"))
        .args([
            "--no-defaults",
            "--protocol=TCP",
            "--host=127.0.0.1",
            "-uapp",
            "-psecret",
            "-N",
            "-B",
            "test",
        ])
        .arg(format!("--port={port}"))
        .arg(format!("--local-infile={}", u8::from(local_infile)))
        .args(["-e", sql])
        .output()
        .expect("run mariadb")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_data_local_infile_streams_the_file() {
    let db = MariaDb::shared();
    let t = format!("test.infile_{}", std::process::id());
    db.sql(&format!(
        "DROP TABLE IF EXISTS {t}; CREATE TABLE {t} (id INT PRIMARY KEY, v INT, s TEXT)"
    ));
    let path = std::env::temp_dir().join(format!("myplex-infile-{}.csv", std::process::id()));
    {
        let mut f = std::fs::File::create(&path).expect("csv");
        // ~2.5 MB so the file spans many packets.
        for i in 0..50_000 {
            writeln!(f, "{i},{},{}", i % 7, "x".repeat(40)).expect("write");
        }
    }
    let p = Proxy::builder(db).groups(1).max_backend(2).start().await;
    let port = p.addr.port();
    let sql = format!(
        "LOAD DATA LOCAL INFILE '{}' INTO TABLE {t} FIELDS TERMINATED BY ','; SELECT COUNT(*), SUM(v) FROM {t}",
        path.display()
    );
    let out = tokio::task::spawn_blocking(move || cli(port, true, &sql))
        .await
        .expect("join");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "50000\t149997");

    // Without --local-infile the proxy refuses like the server.
    let sql = format!("LOAD DATA LOCAL INFILE '{}' INTO TABLE {t}", path.display());
    let sql2 = sql.clone();
    let via = tokio::task::spawn_blocking(move || cli(port, false, &sql))
        .await
        .expect("join");
    let direct_port = db.port;
    let direct = tokio::task::spawn_blocking(move || cli(direct_port, false, &sql2))
        .await
        .expect("join");
    assert!(!via.status.success());
    assert_eq!(
        String::from_utf8_lossy(&via.stderr),
        String::from_utf8_lossy(&direct.stderr)
    );
    // The session still works afterwards and nothing extra was loaded.
    let count = db.sql(&format!("SELECT COUNT(*) FROM {t}"));
    assert_eq!(count.trim(), "50000");
    let _ = std::fs::remove_file(&path);
}

/// One client's run of the suite/jp pattern: `SET NAMES ujis; SET
/// character_set_database = ujis;` then LOAD DATA LOCAL INFILE into a ujis
/// column. Through the proxy another client takes the backend the SETs ran
/// on in between (and reads its database character set there), so the
/// LOAD runs on another backend. Returns the warnings of the LOAD, the rows
/// and what the other client saw (`None` direct).
async fn jp_load(
    url: String,
    other_url: Option<String>,
    t: &str,
    path: &std::path::Path,
) -> (Vec<String>, Vec<String>, Option<String>) {
    let opts = mysql_async::OptsBuilder::from_opts(mysql_async::Opts::from_url(&url).expect("url"))
        .local_infile_handler(Some(mysql_async::WhiteListFsHandler::new(vec![
            path.to_path_buf(),
        ])));
    let mut a = mysql_async::Conn::new(opts).await.expect("connect");
    a.query_drop("SET NAMES ujis").await.expect("names");
    a.query_drop("SET character_set_database = ujis")
        .await
        .expect("set");
    let before: Option<u64> = a
        .query_first("SELECT @@pseudo_thread_id")
        .await
        .expect("thread");
    let mut other_saw = None;
    let mut held = None;
    if let Some(u) = other_url {
        let mut b = mysql_async::Conn::from_url(u).await.expect("other");
        b.query_drop("BEGIN").await.expect("begin");
        let row: Option<(u64, String)> = b
            .query_first("SELECT @@pseudo_thread_id, @@character_set_database")
            .await
            .expect("other reads");
        let (thread, cs) = row.expect("row");
        assert_eq!(Some(thread), before, "the other client got a's backend");
        other_saw = Some(cs);
        held = Some(b);
    }
    a.query_drop(format!(
        "LOAD DATA LOCAL INFILE '{}' INTO TABLE {t} (c)",
        path.display()
    ))
    .await
    .expect("load");
    let warnings: Vec<String> = a
        .query_map("SHOW WARNINGS", |(l, c, m): (String, u32, Vec<u8>)| {
            format!("{l} {c} {}", String::from_utf8_lossy(&m))
        })
        .await
        .expect("warnings");
    if held.is_some() {
        let after: Option<u64> = a
            .query_first("SELECT @@pseudo_thread_id")
            .await
            .expect("thread");
        assert_ne!(after, before, "the LOAD ran on another backend");
    }
    let rows: Vec<String> = a
        .query_map(
            format!("SELECT HEX(c) FROM {t} ORDER BY id"),
            |h: Option<String>| h.unwrap_or_else(|| "NULL".into()),
        )
        .await
        .expect("rows");
    if let Some(mut b) = held {
        b.query_drop("COMMIT").await.expect("commit");
    }
    (warnings, rows, other_saw)
}

/// Issue 16 E.16: the file is read with the character set the session set
/// (the backend the LOAD runs on gets it), and the backend the session set
/// it on does not hand it to the next client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_data_reads_the_file_in_the_sessions_database_charset() {
    let db = MariaDb::shared();
    let t = format!("test.jp_{}", std::process::id());
    let create = format!(
        "DROP TABLE IF EXISTS {t}; CREATE TABLE {t} (id INT AUTO_INCREMENT PRIMARY KEY, \
         c VARCHAR(10) CHARACTER SET ujis)"
    );
    let path = std::env::temp_dir().join(format!("myplex-jp-{}.txt", std::process::id()));
    // あい and 日本 in EUC-JP (ujis), one value per line.
    std::fs::write(&path, b"\xa4\xa2\xa4\xa4\n\xc6\xfc\xcb\xdc\n").expect("file");
    db.sql(&create);
    let direct_url = format!("{}?prefer_socket=false", db.url("app", "secret", "test"));
    let (dw, dr, _) = jp_load(direct_url.clone(), None, &t, &path).await;
    assert!(dw.is_empty(), "direct: {dw:?}");
    assert_eq!(dr, ["A4A2A4A4", "C6FCCBDC"]);
    let fresh: Option<String> = mysql_async::Conn::from_url(&direct_url)
        .await
        .expect("direct")
        .query_first("SELECT @@character_set_database")
        .await
        .expect("fresh");

    db.sql(&create);
    let p = Proxy::builder(db).groups(1).max_backend(2).start().await;
    let (pw, pr, other) = jp_load(p.app_url(), Some(p.app_url()), &t, &path).await;
    assert_eq!(pw, dw, "warnings of the LOAD through myplex");
    assert_eq!(pr, dr, "rows loaded through myplex");
    assert_eq!(other, fresh, "the next client of the backend");
    let _ = std::fs::remove_file(&path);
}
