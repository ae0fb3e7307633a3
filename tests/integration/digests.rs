//! Query digests end to end, through myplex to a real MariaDB (with
//! performance_schema on): statements that differ only in literals share a
//! digest whose counts, errors, warnings and rows match what ran;
//! `SHOW MYPLEX DIGESTS` orders and limits, `/digests` agrees, `RESET
//! MYPLEX DIGESTS` empties the table; the digest text matches MariaDB's own
//! `DIGEST_TEXT` where the forms agree; the table stays within
//! `digests.max_digests` and counts its evictions.

use crate::common;

use std::time::Duration;

use common::mariadb::Profile;
use common::{MariaDb, Proxy};
use myplex::config::UserConfig;
use mysql_async::prelude::*;
use mysql_async::{Conn, Row};

fn server() -> &'static MariaDb {
    MariaDb::shared_with(Profile::Production, &["--performance-schema=ON"])
}

fn admin(c: &mut myplex::config::Config) {
    c.users.push(UserConfig {
        name: "admin".into(),
        password: Some("adminpw".into()),
        backend_user: Some("app".into()),
        backend_password: Some("secret".into()),
        admin: true,
        ..Default::default()
    });
}

/// `SHOW MYPLEX DIGESTS …` rows as (column → cell) maps.
async fn show(c: &mut Conn, sql: &str) -> Vec<std::collections::HashMap<String, String>> {
    let rows: Vec<Row> = c.query(sql).await.expect("show digests");
    rows.into_iter()
        .map(|r| {
            let cols: Vec<String> = r
                .columns_ref()
                .iter()
                .map(|c| c.name_str().into_owned())
                .collect();
            let cells = r.unwrap();
            cols.into_iter()
                .zip(cells)
                .map(|(k, v)| (k, mysql_async::from_value::<String>(v)))
                .collect()
        })
        .collect()
}

/// The row of `text` (and user `app`).
fn row<'a>(
    rows: &'a [std::collections::HashMap<String, String>],
    text: &str,
) -> &'a std::collections::HashMap<String, String> {
    rows.iter()
        .find(|r| r["digest_text"] == text && r["user"] == "app")
        .unwrap_or_else(|| panic!("no digest {text:?} in {rows:#?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn digests_count_what_ran_and_match_mariadb() {
    let db = server();
    let t = format!("dg_{}", std::process::id());
    db.sql(&format!(
        "DROP TABLE IF EXISTS test.{t}; CREATE TABLE test.{t} (id INT PRIMARY KEY, v VARCHAR(20))"
    ));
    db.sql("TRUNCATE performance_schema.events_statements_summary_by_digest");
    let p = Proxy::builder(db).groups(2).with(admin).start().await;
    let mut c = Conn::from_url(p.app_url()).await.expect("connect");
    let mut sample = Vec::new();
    // One digest each, whatever the literals, spacing, comments and case.
    for (i, v) in ["a", "b", "c"].iter().enumerate() {
        let sql = match i {
            0 => format!("INSERT INTO {t} VALUES ({i}, '{v}')"),
            1 => format!("insert into {t} values({i},\"{v}\") -- two"),
            _ => format!("INSERT /* three */ INTO {t}\n VALUES ( {i} , _utf8mb4'{v}' )"),
        };
        c.query_drop(&sql).await.expect("insert");
        sample.push(sql);
    }
    c.query_drop(format!("INSERT INTO {t} VALUES (3, 'd'), (4, 'e')"))
        .await
        .expect("insert two");
    sample.push(format!("INSERT INTO {t} VALUES (3, 'd'), (4, 'e')"));
    for ids in ["0, 1", "1,2,3"] {
        let sql = format!("SELECT * FROM {t} WHERE id IN ({ids})");
        let _: Vec<Row> = c.query(&sql).await.expect("select in");
        sample.push(sql);
    }
    for id in [1, 2] {
        let sql = format!("UPDATE {t} SET v = 'x{id}' WHERE id = {id} LIMIT 1");
        c.query_drop(&sql).await.expect("update");
        sample.push(sql);
    }
    for n in [1, 2] {
        let _ = c
            .query_drop(format!("SELECT * FROM no_such_table_{t} WHERE a = {n}"))
            .await
            .expect_err("no such table");
    }
    for s in ["'abc'", "'1x'"] {
        let _: Vec<Row> = c
            .query(format!("SELECT CAST({s} AS SIGNED)"))
            .await
            .expect("cast");
    }
    // A prepared statement counts under its prepare text.
    for id in [0, 4] {
        let _: Vec<Row> = c
            .exec(format!("SELECT v, id FROM {t} WHERE id = ?"), (id,))
            .await
            .expect("execute");
    }
    drop(c);

    let mut a = Conn::from_url(p.url("admin", "adminpw", ""))
        .await
        .expect("admin connect");
    let insert_one = format!("INSERT INTO `{t}` VALUES (...)");
    let prepared = format!("SELECT `v` , ID FROM `{t}` WHERE ID = ?");
    // The session counts a statement just after its reply: wait for the
    // last one.
    let mut rows = Vec::new();
    for _ in 0..100 {
        rows = show(&mut a, "SHOW MYPLEX DIGESTS").await;
        if rows
            .iter()
            .any(|r| r["digest_text"] == prepared && r["count"] == "2")
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let r = row(&rows, &insert_one);
    assert_eq!(
        (&r["count"][..], &r["rows_affected"][..], &r["errors"][..]),
        ("3", "3", "0")
    );
    assert_eq!((&r["schema"][..], &r["rows_sent"][..]), ("test", "0"));
    let r = row(
        &rows,
        &format!("INSERT INTO `{t}` VALUES (...) /* , ... */"),
    );
    assert_eq!((&r["count"][..], &r["rows_affected"][..]), ("1", "2"));
    let r = row(&rows, &format!("SELECT * FROM `{t}` WHERE ID IN (...)"));
    assert_eq!((&r["count"][..], &r["rows_sent"][..]), ("2", "5"));
    let r = row(
        &rows,
        &format!("UPDATE `{t}` SET `v` = ? WHERE ID = ? LIMIT ?"),
    );
    assert_eq!((&r["count"][..], &r["rows_affected"][..]), ("2", "2"));
    let failing = format!("SELECT * FROM `no_such_table_{t}` WHERE `a` = ?");
    let r = row(&rows, &failing);
    assert_eq!((&r["count"][..], &r["errors"][..]), ("2", "2"));
    let r = row(&rows, "SELECT CAST ( ? AS SIGNED )");
    assert_eq!(
        (&r["count"][..], &r["warnings"][..], &r["rows_sent"][..]),
        ("2", "2", "2")
    );
    let r = row(&rows, &prepared);
    assert_eq!((&r["count"][..], &r["rows_sent"][..]), ("2", "2"));
    for r in &rows {
        let f = |k: &str| r[k].parse::<f64>().unwrap_or(-1.0);
        assert!(
            f("min_latency_ms") <= f("p50_ms") && f("p50_ms") <= f("max_latency_ms"),
            "{r:?}"
        );
        assert!(
            f("p99_ms") <= f("max_latency_ms") && f("total_latency_ms") > 0.0,
            "{r:?}"
        );
        assert!(
            f("last_seen") >= f("first_seen") && f("first_seen") > 1.6e9,
            "{r:?}"
        );
    }

    // ORDER BY and LIMIT.
    let top = show(&mut a, "SHOW MYPLEX DIGESTS ORDER BY count DESC LIMIT 1").await;
    assert_eq!(top.len(), 1);
    assert_eq!(top[0]["digest_text"], insert_one, "{top:?}");
    let by_errors = show(&mut a, "show myplex digests order by ERRORS").await;
    assert_eq!(by_errors[0]["digest_text"], failing);
    let asc = show(&mut a, "SHOW MYPLEX DIGESTS ORDER BY rows_affected ASC").await;
    assert_eq!(asc.len(), rows.len());
    let last = asc.last().map(|r| r["digest_text"].clone());
    assert_eq!(last.as_deref(), Some(&insert_one[..]), "{asc:?}");
    let err = a
        .query_drop("SHOW MYPLEX DIGESTS ORDER BY nothing")
        .await
        .expect_err("unknown column");
    assert!(err.to_string().contains("1064"), "{err}");

    // /digests agrees.
    let (code, body) = p.http_get("/digests?order=errors&limit=2").await;
    assert_eq!(code, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("json");
    assert_eq!(v["entries"].as_u64(), Some(rows.len() as u64));
    assert_eq!(v["digests"].as_array().map(Vec::len), Some(2));
    assert_eq!(v["digests"][0]["digest_text"], failing);
    assert_eq!(v["digests"][0]["errors"], 2);
    assert_eq!(v["digests"][0]["user"], "app");
    let (code, _) = p.http_get("/digests?order=nothing").await;
    assert_eq!(code, 400);
    let (_, metrics) = p.http_get("/metrics").await;
    assert!(
        metrics.contains(&format!("myplex_digests {}", rows.len())),
        "{metrics}"
    );

    // MariaDB's own digests read the same where the forms agree.
    let theirs = db.sql(
        "SELECT DIGEST_TEXT FROM performance_schema.events_statements_summary_by_digest \
         WHERE SCHEMA_NAME = 'test'",
    );
    let theirs: Vec<&str> = theirs.lines().map(str::trim_end).collect();
    for sql in &sample {
        let ours = myplex::sql::digest::digest(sql.as_bytes(), Default::default()).text;
        let ours = String::from_utf8(ours).expect("utf8");
        if sql.contains("_utf8mb4") {
            // A charset introducer: `(_charset) ?` there, `?` here.
            continue;
        }
        assert!(
            theirs.contains(&ours.as_str()),
            "{ours:?} not among MariaDB's digests: {theirs:#?}"
        );
    }

    // RESET empties the table.
    let reset = show(&mut a, "RESET MYPLEX DIGESTS").await;
    assert_eq!(reset[0]["digests"], rows.len().to_string());
    assert!(show(&mut a, "SHOW MYPLEX DIGESTS").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_table_stays_bounded_and_can_be_turned_off() {
    let db = server();
    let p = Proxy::builder(db)
        .groups(1)
        .with(|c| {
            c.digests.max_digests = 2;
            c.digests.max_text_bytes = 16;
        })
        .start()
        .await;
    let mut c = Conn::from_url(p.app_url()).await.expect("connect");
    for i in 0..6 {
        let _: Vec<Row> = c
            .query(format!("SELECT {i} AS column_{i}"))
            .await
            .expect("select");
    }
    let mut metrics = String::new();
    for _ in 0..100 {
        (_, metrics) = p.http_get("/metrics").await;
        if metrics.contains("myplex_digest_evictions_total 5") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The setup query and six distinct selects in a table of two.
    assert!(metrics.contains("myplex_digests 2"), "{metrics}");
    assert!(
        metrics.contains("myplex_digest_evictions_total 5"),
        "{metrics}"
    );
    let (_, body) = p.http_get("/digests").await;
    let v: serde_json::Value = serde_json::from_str(&body).expect("json");
    let texts: Vec<&str> = v["digests"]
        .as_array()
        .map(|a| a.iter().filter_map(|d| d["digest_text"].as_str()).collect())
        .unwrap_or_default();
    assert!(
        texts.contains(&"SELECT ? AS `col"),
        "truncated to 16 bytes: {texts:?}"
    );

    // Off: nothing more is counted.
    let mut cfg = myplex::config::Config::clone(&p.shared.config.load());
    cfg.digests.enabled = false;
    p.shared.config.store(std::sync::Arc::new(cfg));
    p.shared.digests.reset();
    let _: Vec<Row> = c.query("SELECT 42").await.expect("select");
    c.query_drop("DO 1").await.expect("do");
    assert!(p.shared.digests.is_empty());
}
