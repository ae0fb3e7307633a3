//! The sysbench-compatible OLTP workload: the `sbtestN` schema (id, k, c,
//! pad; secondary index on k), data loading, and one transaction of each
//! variant with the statement mix of sysbench's `oltp_*` scripts (default
//! options: 10 point selects, range size 100, one of each range query, one
//! index and one non-index update, delete + insert; prepared statements).

use std::collections::VecDeque;

use mysql_async::Conn as DriverConn;
use mysql_async::prelude::*;
use rand::Rng;

use super::client::{ClientError, Conn, Endpoint, Param, Stmt};

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

/// Length of a `c` value: ten groups of 11 digits and the dashes between.
const C_LEN: usize = 119;
/// Length of a `pad` value: five groups.
const PAD_LEN: usize = 59;

/// Fills `out` as sysbench's `c` / `pad` templates do: groups of 11 random
/// digits joined by dashes (`out` is 12 × groups − 1 long; one draw per
/// group).
fn fill_digits(rng: &mut impl Rng, out: &mut [u8]) {
    for group in out.chunks_mut(12) {
        let mut v: u64 = rng.random_range(0..100_000_000_000);
        for d in group.iter_mut().take(11).rev() {
            *d = b'0' + (v % 10) as u8;
            v /= 10;
        }
        if let Some(dash) = group.get_mut(11) {
            *dash = b'-';
        }
    }
}

fn digits<const N: usize>(rng: &mut impl Rng) -> String {
    let mut b = [0u8; N];
    fill_digits(rng, &mut b);
    b.iter().map(|&c| char::from(c)).collect()
}

/// `c CHAR(120)`: ten groups of 11 digits.
pub fn c_value(rng: &mut impl Rng) -> String {
    digits::<C_LEN>(rng)
}

/// `pad CHAR(60)`: five groups of 11 digits.
pub fn pad_value(rng: &mut impl Rng) -> String {
    digits::<PAD_LEN>(rng)
}

/// Creates and fills the tables (`prepare`).
pub async fn prepare(conn: &mut DriverConn, t: Tables) -> Result<(), mysql_async::Error> {
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
pub async fn cleanup(conn: &mut DriverConn, t: Tables) -> Result<(), mysql_async::Error> {
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
/// indices above: what [`Client::transaction`] runs and [`Client::connect`]
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

/// Statements per client: BEGIN and COMMIT, and [`statement_texts`] for
/// every table (what [`Client::connect`] prepares).
pub fn statements_per_client(w: Workload, t: Tables) -> usize {
    let trx = if w == Workload::OltpPointSelect { 0 } else { 2 };
    trx + statement_texts(w, 1).len() * t.count as usize
}

/// Statements executed by one transaction of `w` (for QPS).
pub fn statements_per_transaction(w: Workload) -> u64 {
    match w {
        Workload::OltpReadWrite => 20,
        Workload::OltpReadOnly => 16,
        Workload::OltpPointSelect => 1,
    }
}

/// Where a client keeps its prepared statements.
enum Statements {
    /// All of them, prepared at connect and kept open (sysbench's way).
    Held(Vec<Stmt>),
    /// At most `cap` open, the least recently used closed first; others are
    /// prepared again when next run (the target URL's `stmt_cache_size`:
    /// an application whose driver keeps a cache of that size; 0 prepares,
    /// runs and closes every statement).
    Cache {
        cap: usize,
        open: Vec<Option<Stmt>>,
        /// Open statements, least recently used first.
        lru: VecDeque<usize>,
    },
}

/// One virtual client: its connection and its statements, prepared at
/// connect as sysbench's `thread_init` does (BEGIN and COMMIT included), so
/// a client's first transactions run the same commands as its later ones
/// and the measured window holds no prepares.
pub struct Client {
    conn: Conn,
    /// Statement texts: BEGIN and COMMIT (not for point selects), then
    /// [`statement_texts`] of each table, `sbtest1` first.
    texts: Vec<String>,
    stmts: Statements,
    /// Where table 1's statements start in `texts`.
    first_table: usize,
    per_table: usize,
}

/// BEGIN and COMMIT in a client's `texts`.
const BEGIN: usize = 0;
const COMMIT: usize = 1;

impl Client {
    /// Connects and prepares. `cache`: the target's `stmt_cache_size`, if
    /// it sets one (see [`Statements::Cache`]).
    pub async fn connect(
        e: &Endpoint,
        w: Workload,
        t: Tables,
        cache: Option<usize>,
    ) -> Result<Self, ClientError> {
        let conn = Conn::connect(e).await?;
        let mut texts = Vec::with_capacity(statements_per_client(w, t));
        if w != Workload::OltpPointSelect {
            texts.extend(["BEGIN".to_string(), "COMMIT".to_string()]);
        }
        let first_table = texts.len();
        let per_table = statement_texts(w, 1).len();
        for n in 1..=t.count {
            texts.extend(statement_texts(w, n));
        }
        let stmts = match cache {
            None => Statements::Held(Vec::with_capacity(texts.len())),
            Some(cap) => Statements::Cache {
                cap,
                open: (0..texts.len()).map(|_| None).collect(),
                lru: VecDeque::with_capacity(cap + 1),
            },
        };
        let mut c = Self {
            conn,
            texts,
            stmts,
            first_table,
            per_table,
        };
        for i in 0..c.texts.len() {
            match &mut c.stmts {
                Statements::Held(v) => v.push(c.conn.prepare(&c.texts[i]).await?),
                // Through the cache, as a driver would prepare them.
                Statements::Cache { cap, .. } if *cap > 0 => c.open(i).await?,
                Statements::Cache { .. } => {}
            }
        }
        Ok(c)
    }

    /// Closes the connection.
    pub async fn disconnect(self) {
        self.conn.quit().await
    }

    /// Runs one transaction. On error the transaction is rolled back (best
    /// effort) and the error returned.
    pub async fn transaction(&mut self, w: Workload, t: Tables) -> Result<(), ClientError> {
        let d = Draw::new(w, t);
        if w == Workload::OltpPointSelect {
            let i = self.index(d.point.0, POINT);
            return self.run(i, &[Param::Int(d.point.1[0])]).await;
        }
        let r = self.body(w, &d).await;
        if r.is_err() {
            let _ = self.conn.query("ROLLBACK").await;
        }
        r
    }

    async fn body(&mut self, w: Workload, d: &Draw) -> Result<(), ClientError> {
        self.run(BEGIN, &[]).await?;
        let (table, ids) = &d.point;
        let i = self.index(*table, POINT);
        for id in ids {
            self.run(i, &[Param::Int(*id)]).await?;
        }
        for (k, kind) in [RANGE_C, RANGE_SUM, RANGE_ORDER, RANGE_DISTINCT]
            .into_iter()
            .enumerate()
        {
            let (table, start) = d.ranges[k];
            let i = self.index(table, kind);
            self.run(i, &[Param::Int(start), Param::Int(start + RANGE - 1)])
                .await?;
        }
        if w == Workload::OltpReadWrite {
            let (table, id) = d.update_index;
            let i = self.index(table, UPDATE_INDEX);
            self.run(i, &[Param::Int(id)]).await?;
            let (table, id, c) = &d.update_non_index;
            let i = self.index(*table, UPDATE_NON_INDEX);
            self.run(i, &[Param::Str(c), Param::Int(*id)]).await?;
            let (table, id, k, c, pad) = &d.delete_insert;
            let i = self.index(*table, DELETE);
            self.run(i, &[Param::Int(*id)]).await?;
            let i = self.index(*table, INSERT);
            let p = [
                Param::Int(*id),
                Param::Int(*k),
                Param::Str(c),
                Param::Str(pad),
            ];
            self.run(i, &p).await?;
        }
        self.run(COMMIT, &[]).await
    }

    /// Index in `texts` of statement `kind` on table `n`.
    fn index(&self, n: u32, kind: usize) -> usize {
        self.first_table + (n as usize - 1) * self.per_table + kind
    }

    /// Runs statement `i`.
    async fn run(&mut self, i: usize, params: &[Param<'_>]) -> Result<(), ClientError> {
        if let Statements::Held(v) = &mut self.stmts {
            return self.conn.execute(&mut v[i], params).await;
        }
        self.open(i).await?;
        let Statements::Cache { cap, open, .. } = &mut self.stmts else {
            return Ok(());
        };
        let Some(stmt) = open[i].as_mut() else {
            return Err(ClientError::Protocol("statement not open".into()));
        };
        let r = self.conn.execute(stmt, params).await;
        if *cap == 0
            && let Some(s) = open[i].take()
        {
            self.conn.close(s).await?;
        }
        r
    }

    /// Cache mode: makes statement `i` open and the most recently used,
    /// closing the least recently used one beyond the cache's size.
    async fn open(&mut self, i: usize) -> Result<(), ClientError> {
        let Statements::Cache { cap, open, lru } = &mut self.stmts else {
            return Ok(());
        };
        if open[i].is_some() {
            if lru.back() != Some(&i) {
                lru.retain(|&x| x != i);
                lru.push_back(i);
            }
            return Ok(());
        }
        open[i] = Some(self.conn.prepare(&self.texts[i]).await?);
        if *cap == 0 {
            return Ok(());
        }
        lru.push_back(i);
        if lru.len() > *cap
            && let Some(old) = lru.pop_front().and_then(|x| open[x].take())
        {
            self.conn.close(old).await?;
        }
        Ok(())
    }
}

/// The random choices of one transaction, drawn as sysbench's
/// `oltp_common.lua` draws them with `--rand-type=uniform`: a table per
/// statement group (the ten point selects share one; each range query,
/// update and the delete + insert pair has its own), ids in 1..=size
/// (ranges run from the id to id + 99), new `c` / `pad` strings.
struct Draw {
    point: (u32, [u32; POINT_SELECTS as usize]),
    /// Table and first id of each range query.
    ranges: [(u32, u32); 4],
    update_index: (u32, u32),
    /// Table, id, c.
    update_non_index: (u32, u32, [u8; C_LEN]),
    /// Table, id, k, c, pad.
    delete_insert: (u32, u32, u32, [u8; C_LEN], [u8; PAD_LEN]),
}

impl Draw {
    fn new(w: Workload, t: Tables) -> Self {
        let mut rng = rand::rng();
        let mut table = || rng.random_range(1..=t.count);
        let tables: [u32; 8] = std::array::from_fn(|_| table());
        let mut id = || rng.random_range(1..=t.size);
        let point = std::array::from_fn(|_| id());
        let ranges = std::array::from_fn(|i| (tables[1 + i], id()));
        let (ui, un, di, k) = (id(), id(), id(), id());
        let (mut c1, mut c2, mut pad) = ([0; C_LEN], [0; C_LEN], [0; PAD_LEN]);
        if w == Workload::OltpReadWrite {
            fill_digits(&mut rng, &mut c1);
            fill_digits(&mut rng, &mut c2);
            fill_digits(&mut rng, &mut pad);
        }
        Self {
            point: (tables[0], point),
            ranges,
            update_index: (tables[5], ui),
            update_non_index: (tables[6], un, c1),
            delete_insert: (tables[7], di, k, c2, pad),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_per_table_and_per_client() {
        let per_table = |w| statement_texts(w, 1).len();
        assert_eq!(per_table(Workload::OltpReadWrite), 9);
        assert_eq!(per_table(Workload::OltpReadOnly), 5);
        assert_eq!(per_table(Workload::OltpPointSelect), 1);
        let texts = statement_texts(Workload::OltpReadWrite, 7);
        assert!(texts.iter().all(|s| s.contains("sbtest7 ")), "{texts:?}");
        // BEGIN and COMMIT are prepared too, as sysbench prepares them.
        let t = Tables { count: 4, size: 0 };
        assert_eq!(statements_per_client(Workload::OltpReadWrite, t), 38);
        assert_eq!(statements_per_client(Workload::OltpReadOnly, t), 22);
        assert_eq!(statements_per_client(Workload::OltpPointSelect, t), 4);
    }

    #[test]
    fn c_and_pad_are_sysbench_shaped() {
        let mut rng = rand::rng();
        for _ in 0..100 {
            let c = c_value(&mut rng);
            assert_eq!(c.len(), 119, "{c}");
            let groups: Vec<&str> = c.split('-').collect();
            assert_eq!(groups.len(), 10);
            assert!(
                groups
                    .iter()
                    .all(|g| g.len() == 11 && g.bytes().all(|b| b.is_ascii_digit()))
            );
            assert_eq!(pad_value(&mut rng).len(), 59);
        }
    }

    #[test]
    fn draws_stay_in_the_tables() {
        let t = Tables { count: 3, size: 50 };
        let (mut tables, mut ids) = (Vec::new(), Vec::new());
        for _ in 0..500 {
            let d = Draw::new(Workload::OltpReadWrite, t);
            tables.extend([
                d.point.0,
                d.update_index.0,
                d.update_non_index.0,
                d.delete_insert.0,
            ]);
            tables.extend(d.ranges.iter().map(|r| r.0));
            ids.extend(d.point.1);
            ids.extend(d.ranges.iter().map(|r| r.1));
            ids.extend([
                d.update_index.1,
                d.update_non_index.1,
                d.delete_insert.1,
                d.delete_insert.2,
            ]);
            for s in [
                &d.update_non_index.2[..],
                &d.delete_insert.3,
                &d.delete_insert.4,
            ] {
                assert!(s.iter().all(|b| b.is_ascii_digit() || *b == b'-'));
            }
        }
        assert!(tables.iter().all(|n| (1..=3).contains(n)));
        assert!(ids.iter().all(|i| (1..=50).contains(i)));
        // Every table and both ends of the id range come up.
        assert!((1..=3).all(|n| tables.contains(&n)));
        assert!(ids.contains(&1) && ids.contains(&50));
        let d = Draw::new(Workload::OltpReadOnly, t);
        assert!(
            d.update_non_index.2.iter().all(|b| *b == 0),
            "no strings for reads"
        );
    }
}
