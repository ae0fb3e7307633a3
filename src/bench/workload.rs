//! The sysbench-compatible OLTP workload: the `sbtestN` schema (id, k, c,
//! pad; secondary index on k), data loading, and one transaction of each
//! variant with the statement mix of sysbench's `oltp_*` scripts (default
//! options: 10 point selects, range size 100, one of each range query, one
//! index and one non-index update, delete + insert; prepared statements).

use mysql_async::prelude::*;
use mysql_async::{Conn, Params};
use rand::Rng;

/// Which transaction a virtual client runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Workload {
    /// `oltp_read_write`: 18 statements in BEGIN … COMMIT.
    #[value(alias = "oltp_read_write")]
    OltpReadWrite,
    /// `oltp_read_only`: the 14 reads in BEGIN … COMMIT.
    #[value(alias = "oltp_read_only")]
    OltpReadOnly,
    /// `oltp_point_select`: one point select, no transaction.
    #[value(alias = "oltp_point_select")]
    OltpPointSelect,
}

/// Table layout.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct Tables {
    /// Number of `sbtestN` tables.
    pub count: u32,
    /// Rows per table.
    pub size: u32,
}

const RANGE: u32 = 100;
const POINT_SELECTS: u32 = 10;

/// sysbench's `c` / `pad` strings: groups of digits joined by dashes.
fn digits(rng: &mut impl Rng, groups: usize) -> String {
    let mut s = String::with_capacity(groups * 12);
    for g in 0..groups {
        if g > 0 {
            s.push('-');
        }
        for _ in 0..11 {
            s.push(char::from(b'0' + rng.random_range(0..10u8)));
        }
    }
    s
}

/// `c CHAR(120)`: ten groups of 11 digits.
pub fn c_value(rng: &mut impl Rng) -> String {
    digits(rng, 10)
}

/// `pad CHAR(60)`: five groups of 11 digits.
pub fn pad_value(rng: &mut impl Rng) -> String {
    digits(rng, 5)
}

/// Creates and fills the tables (`prepare`).
pub async fn prepare(conn: &mut Conn, t: Tables) -> Result<(), mysql_async::Error> {
    for n in 1..=t.count {
        conn.query_drop(format!("DROP TABLE IF EXISTS sbtest{n}"))
            .await?;
        conn.query_drop(format!(
            "CREATE TABLE sbtest{n} (id INTEGER NOT NULL AUTO_INCREMENT, k INTEGER DEFAULT '0' NOT NULL, \
             c CHAR(120) DEFAULT '' NOT NULL, pad CHAR(60) DEFAULT '' NOT NULL, PRIMARY KEY (id)) ENGINE=InnoDB"
        ))
        .await?;
        let mut id = 1u32;
        while id <= t.size {
            let end = (id + 999).min(t.size);
            let mut sql = format!("INSERT INTO sbtest{n} (id, k, c, pad) VALUES ");
            let mut rng = rand::rng();
            for i in id..=end {
                if i > id {
                    sql.push(',');
                }
                let k = rng.random_range(1..=t.size);
                sql.push_str(&format!(
                    "({i},{k},'{}','{}')",
                    c_value(&mut rng),
                    pad_value(&mut rng)
                ));
            }
            conn.query_drop(sql).await?;
            id = end + 1;
        }
        conn.query_drop(format!("CREATE INDEX k_{n} ON sbtest{n}(k)"))
            .await?;
    }
    Ok(())
}

/// Drops the tables (`cleanup`).
pub async fn cleanup(conn: &mut Conn, t: Tables) -> Result<(), mysql_async::Error> {
    for n in 1..=t.count {
        conn.query_drop(format!("DROP TABLE IF EXISTS sbtest{n}"))
            .await?;
    }
    Ok(())
}

/// Where each statement sits in [`statement_texts`].
const POINT: usize = 0;
const RANGE_C: usize = 1;
const RANGE_SUM: usize = 2;
const RANGE_ORDER: usize = 3;
const RANGE_DISTINCT: usize = 4;
const UPDATE_INDEX: usize = 5;
const UPDATE_NON_INDEX: usize = 6;
const DELETE: usize = 7;
const INSERT: usize = 8;

/// The prepared statements of `w` on table `n`, in the order of the
/// indices above: what [`transaction`] runs and [`prepare_statements`]
/// prepares.
fn statement_texts(w: Workload, n: u32) -> Vec<String> {
    let mut v = vec![format!("SELECT c FROM sbtest{n} WHERE id=?")];
    if w == Workload::OltpPointSelect {
        return v;
    }
    v.extend([
        format!("SELECT c FROM sbtest{n} WHERE id BETWEEN ? AND ?"),
        format!("SELECT SUM(k) FROM sbtest{n} WHERE id BETWEEN ? AND ?"),
        format!("SELECT c FROM sbtest{n} WHERE id BETWEEN ? AND ? ORDER BY c"),
        format!("SELECT DISTINCT c FROM sbtest{n} WHERE id BETWEEN ? AND ? ORDER BY c"),
    ]);
    if w == Workload::OltpReadWrite {
        v.extend([
            format!("UPDATE sbtest{n} SET k=k+1 WHERE id=?"),
            format!("UPDATE sbtest{n} SET c=? WHERE id=?"),
            format!("DELETE FROM sbtest{n} WHERE id=?"),
            format!("INSERT INTO sbtest{n} (id, k, c, pad) VALUES (?, ?, ?, ?)"),
        ]);
    }
    v
}

/// Prepares every statement of `w` on every table into the connection's
/// statement cache, as sysbench's `thread_init` does: a client's first
/// transactions then run the same commands as its later ones, and the
/// measured window holds no prepares.
pub async fn prepare_statements(
    conn: &mut Conn,
    w: Workload,
    t: Tables,
) -> Result<(), mysql_async::Error> {
    for n in 1..=t.count {
        for sql in statement_texts(w, n) {
            conn.prep(sql).await?;
        }
    }
    Ok(())
}

/// Statements executed by one transaction of `w` (for QPS).
pub fn statements_per_transaction(w: Workload) -> u64 {
    match w {
        Workload::OltpReadWrite => 20,
        Workload::OltpReadOnly => 16,
        Workload::OltpPointSelect => 1,
    }
}

/// Runs one transaction. On error the transaction is rolled back (best
/// effort) and the error returned.
pub async fn transaction(
    conn: &mut Conn,
    w: Workload,
    t: Tables,
) -> Result<(), mysql_async::Error> {
    let (table, ids) = {
        let mut rng = rand::rng();
        let table = rng.random_range(1..=t.count);
        let max_start = t.size.saturating_sub(RANGE).max(1);
        let ids: Vec<u32> = (0..POINT_SELECTS + 8)
            .map(|i| {
                if (POINT_SELECTS..POINT_SELECTS + 4).contains(&i) {
                    rng.random_range(1..=max_start)
                } else {
                    rng.random_range(1..=t.size)
                }
            })
            .collect();
        (table, ids)
    };
    if w == Workload::OltpPointSelect {
        let sql = statement_texts(w, table);
        let _: Option<String> = conn.exec_first(&sql[POINT], (ids[0],)).await?;
        return Ok(());
    }
    let r = body(conn, w, t, table, &ids).await;
    if r.is_err() {
        let _ = conn.query_drop("ROLLBACK").await;
    }
    r
}

async fn body(
    conn: &mut Conn,
    w: Workload,
    t: Tables,
    table: u32,
    ids: &[u32],
) -> Result<(), mysql_async::Error> {
    conn.query_drop("BEGIN").await?;
    let sql = statement_texts(w, table);
    for id in &ids[..POINT_SELECTS as usize] {
        let _: Option<String> = conn.exec_first(&sql[POINT], (*id,)).await?;
    }
    let r = |i: usize| (ids[i], ids[i] + RANGE - 1);
    let _: Vec<String> = conn.exec(&sql[RANGE_C], r(10)).await?;
    let _: Option<Option<i64>> = conn.exec_first(&sql[RANGE_SUM], r(11)).await?;
    let _: Vec<String> = conn.exec(&sql[RANGE_ORDER], r(12)).await?;
    let _: Vec<String> = conn.exec(&sql[RANGE_DISTINCT], r(13)).await?;
    if w == Workload::OltpReadWrite {
        let (c, c2, pad, k) = {
            let mut rng = rand::rng();
            (
                c_value(&mut rng),
                c_value(&mut rng),
                pad_value(&mut rng),
                rng.random_range(1..=t.size),
            )
        };
        conn.exec_drop(&sql[UPDATE_INDEX], (ids[14],)).await?;
        conn.exec_drop(&sql[UPDATE_NON_INDEX], (c, ids[15])).await?;
        let del = ids[16];
        conn.exec_drop(&sql[DELETE], (del,)).await?;
        conn.exec_drop(
            &sql[INSERT],
            Params::Positional(vec![del.into(), k.into(), c2.into(), pad.into()]),
        )
        .await?;
    }
    conn.query_drop("COMMIT").await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_statement_fits_the_bench_clients_statement_cache() {
        // runner::Target::opts_for sizes the cache 9 x tables + 8.
        let per_table = |w| statement_texts(w, 1).len();
        assert_eq!(per_table(Workload::OltpReadWrite), 9);
        assert_eq!(per_table(Workload::OltpReadOnly), 5);
        assert_eq!(per_table(Workload::OltpPointSelect), 1);
        let texts = statement_texts(Workload::OltpReadWrite, 7);
        assert!(texts.iter().all(|s| s.contains("sbtest7 ")), "{texts:?}");
    }
}
