//! LOAD DATA LOCAL INFILE relayed through the proxy with the `mariadb` CLI:
//! the file streams from the client to the backend; a client that did not
//! enable it gets the same refusal as from the server directly.

mod common;

use std::io::Write;
use std::process::{Command, Output};

use common::{MariaDb, Proxy, mariadb_bin};

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
