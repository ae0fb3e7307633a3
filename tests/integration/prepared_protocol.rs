//! Binary prepared-statement protocol through the proxy, byte by byte, with
//! a raw client (`common::raw`) for what drivers cannot express: EXECUTE
//! without re-sent parameter types on a backend that never saw them, cursor
//! FETCH, COM_STMT_RESET, SEND_LONG_DATA beyond 16 MiB, re-prepare after
//! ALTER TABLE, a backend killed between prepare and execute, and unknown or
//! malformed statement commands. Wherever the server defines the answer,
//! the same bytes are sent directly to MariaDB and the replies compared;
//! every scenario runs with and without CLIENT_DEPRECATE_EOF.

use crate::common;

use std::time::Duration;

use common::mariadb::{APP_PASSWORD, APP_USER};
use common::raw::*;
use common::{MariaDb, Proxy};
use mysql_async::prelude::Queryable;
use sha2::{Digest, Sha256};
use tokio::time::{Instant, timeout};

fn mode(deprecate: bool) -> &'static str {
    if deprecate { "deprecate_eof" } else { "eof" }
}

async fn via(p: &Proxy, deprecate: bool) -> RawConn {
    RawConn::connect(
        &p.addr.to_string(),
        APP_USER,
        APP_PASSWORD,
        Some("test"),
        deprecate,
    )
    .await
}

async fn direct(db: &MariaDb, deprecate: bool) -> RawConn {
    RawConn::connect(&db.addr(), APP_USER, APP_PASSWORD, Some("test"), deprecate).await
}

/// The backend connection a proxied client's next statement runs on.
async fn backend_id(c: &mut RawConn) -> u64 {
    let v = c.query_one("SELECT @@pseudo_thread_id").await;
    v.parse()
        .unwrap_or_else(|e| panic!("pseudo_thread_id {v:?}: {e}"))
}

/// A unique table name in `test`.
fn table(tag: &str) -> String {
    format!("test.pp_{tag}_{}", std::process::id())
}

/// (idle, owned) summed over the proxy's groups.
fn pool_counts(p: &Proxy) -> (usize, usize) {
    p.shared
        .pool
        .groups
        .iter()
        .map(|g| g.snapshot())
        .fold((0, 0), |(i, o), s| (i + s.idle, o + s.owned))
}

/// Polls the pool until `cond(idle, owned)` holds; panics after 5 s with the
/// last counts.
async fn wait_pool(p: &Proxy, what: &str, cond: impl Fn(usize, usize) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (idle, owned) = pool_counts(p);
        if cond(idle, owned) {
            return;
        }
        if Instant::now() > deadline {
            panic!("{what}: pool stuck at idle={idle} owned={owned}");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Differences between the proxy's and the server's answers, collected so
/// that one run reports all of them; `check` fails the test if there are any.
#[derive(Default)]
struct Findings(Vec<String>);

impl Findings {
    /// Responses equal field by field.
    fn same(&mut self, via: &Response, direct: &Response, what: &str) {
        let diff = response_diff(via, direct);
        if !diff.is_empty() {
            self.0.push(format!("{what}:\n    {}", diff.join("\n    ")));
        }
    }

    fn eq<T: PartialEq + std::fmt::Debug>(&mut self, via: &T, direct: &T, what: &str) {
        if via != direct {
            self.0.push(format!(
                "{what}:\n    via proxy {via:?}\n    direct    {direct:?}"
            ));
        }
    }

    /// Prepare replies equal except for the statement id.
    fn prepare(&mut self, via: &Prepared, direct: &Prepared, what: &str) {
        let strip = |p: &Prepared| Prepared { id: 0, ..p.clone() };
        if strip(via) != strip(direct) {
            let cols = |p: &Prepared| -> Vec<String> {
                p.columns.iter().map(|c| parse_column(c).name).collect()
            };
            self.0.push(format!(
                "{what}: prepare replies differ:\n    via proxy {} params, {} columns {:?}, eofs {:?}\n    direct    {} params, {} columns {:?}, eofs {:?}",
                via.num_params,
                via.num_columns,
                cols(via),
                via.eofs,
                direct.num_params,
                direct.num_columns,
                cols(direct),
                direct.eofs
            ));
        }
    }

    /// ERR packets equal, up to the statement id in the message.
    fn err(&mut self, via: &Fetched, via_id: u32, direct: &Fetched, direct_id: u32, what: &str) {
        match (via, direct) {
            (Fetched::Err(a), Fetched::Err(b)) => {
                self.eq(&a.normalized(via_id), &b.normalized(direct_id), what)
            }
            _ => self.eq(via, direct, what),
        }
    }

    #[track_caller]
    fn check(self, m: &str) {
        assert!(
            self.0.is_empty(),
            "{m}: the proxy's answers differ from the server's:\n  {}",
            self.0.join("\n  ")
        );
    }
}

/// A number out of whatever type the server chose for an expression.
fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Int(i) => Some(*i as f64),
        Value::UInt(u) => Some(*u as f64),
        Value::Double(d) => Some(*d),
        Value::Float(f) => Some(f64::from(*f)),
        Value::Bytes(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        _ => None,
    }
}

/// The single row of a result, decoded as binary.
#[track_caller]
fn single_row(r: &Response) -> Vec<Value> {
    let rows = r.clone().rows().binary_rows();
    assert_eq!(rows.len(), 1, "expected one row: {rows:?}");
    rows.into_iter().next().expect("row")
}

/// Each scenario runs as two tests, without and with CLIENT_DEPRECATE_EOF:
/// `eof::<name>` and `deprecate_eof::<name>`.
macro_rules! in_both_modes {
    ($($name:ident),* $(,)?) => {
        mod eof {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(false).await
                }
            )*
        }
        mod deprecate_eof {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(true).await
                }
            )*
        }
    };
}

in_both_modes!(
    types_are_resent_to_a_backend_that_never_saw_them,
    types_are_resent_when_another_client_rebound_the_shared_statement,
    cursor_fetch_pins_until_the_last_row,
    closing_a_statement_with_an_open_cursor_unpins,
    stmt_reset_closes_the_cursor_like_the_server,
    send_long_data_beyond_16_mib,
    alter_table_between_executes_matches_direct,
    alter_table_then_a_backend_that_never_prepared_it,
    prepare_after_alter_table_reports_the_new_columns,
    backend_killed_between_prepare_and_execute,
    unknown_statement_ids_answer_like_the_server,
    truncated_execute_answers_like_the_server,
);

// ---------------------------------------------------------------------------
// Parameter types re-sent to a backend that never saw them
// ---------------------------------------------------------------------------

/// EXECUTE with types (bound=1), then EXECUTE without (bound=0) after the
/// client was moved to a backend that never executed the statement: the
/// proxy must insert the remembered types, or the server reads the values
/// without types.
async fn types_are_resent_to_a_backend_that_never_saw_them(deprecate: bool) {
    let db = MariaDb::shared();
    let m = mode(deprecate);
    let mut f = Findings::default();
    let sql = "SELECT ? + 0, CONCAT(?, 'x')";
    let first = [Param::LongLong(41), Param::str("ab")];
    let second = [Param::LongLong(-5), Param::str("cd")];
    let p = Proxy::builder(db).groups(1).max_backend(2).start().await;

    let mut d = direct(db, deprecate).await;
    let ds = d.prepare(sql).await.expect("direct prepare");
    let d1 = d.execute(ds.id, 0, &first, true).await;
    let d2 = d.execute(ds.id, 0, &second, false).await;

    let mut c = via(&p, deprecate).await;
    let cs = c.prepare(sql).await.expect("prepare via proxy");
    f.prepare(&cs, &ds, m);
    let v1 = c.execute(cs.id, 0, &first, true).await;
    f.same(&v1, &d1, &format!("{m}: first execute (bound=1)"));
    let a = backend_id(&mut c).await;

    // Pin the backend just used under another client's transaction (the
    // idle stack is LIFO: it takes the most recently returned one).
    // A client of the same flavour (capabilities), so it can get that backend.
    let mut pin = via(&p, deprecate).await;
    pin.query_ok("BEGIN").await;
    pin.query_rows("SELECT 1 FROM DUAL").await;
    let pinned = Some(backend_id(&mut pin).await);
    assert_eq!(
        pinned,
        Some(a),
        "{m}: premise: the pinning client took the backend the raw client used"
    );

    let v2 = c.execute(cs.id, 0, &second, false).await;
    let b = backend_id(&mut c).await;
    assert_ne!(a, b, "{m}: the second execute must run on another backend");
    f.same(
        &v2,
        &d2,
        &format!("{m}: execute without types on a fresh backend"),
    );
    let row = single_row(&v2);
    assert_eq!(number(&row[0]), Some(-5.0), "{m}: {row:?}");
    assert_eq!(row[1], Value::str("cdx"), "{m}: {row:?}");

    pin.query_ok("COMMIT").await;
    pin.quit().await;
    f.check(m);
}

/// Two clients share one backend statement (same SQL) with different
/// parameter types. The backend remembers the types of whoever executed
/// last, so a bound=0 EXECUTE must get the client's own types inserted.
async fn types_are_resent_when_another_client_rebound_the_shared_statement(deprecate: bool) {
    let db = MariaDb::shared();
    let m = mode(deprecate);
    let mut f = Findings::default();
    let sql = "SELECT ? + 0, CONCAT(?, 'y')";
    let x_first = [Param::LongLong(1000), Param::str("xx")];
    let x_again = [Param::LongLong(77), Param::str("zz")];
    // Types swapped: VAR_STRING then DOUBLE.
    let y_params = [Param::str("3"), Param::Double(2.5)];
    let p = Proxy::builder(db).groups(1).max_backend(1).start().await;

    let mut dx = direct(db, deprecate).await;
    let mut dy = direct(db, deprecate).await;
    let dxs = dx.prepare(sql).await.expect("direct prepare x");
    let dys = dy.prepare(sql).await.expect("direct prepare y");
    let dx1 = dx.execute(dxs.id, 0, &x_first, true).await;
    let dy1 = dy.execute(dys.id, 0, &y_params, true).await;
    let dx2 = dx.execute(dxs.id, 0, &x_again, false).await;

    let mut x = via(&p, deprecate).await;
    let mut y = via(&p, deprecate).await;
    let xs = x.prepare(sql).await.expect("prepare x");
    let ys = y.prepare(sql).await.expect("prepare y");
    let x1 = x.execute(xs.id, 0, &x_first, true).await;
    f.same(&x1, &dx1, &format!("{m}: x binds"));
    let y1 = y.execute(ys.id, 0, &y_params, true).await;
    f.same(&y1, &dy1, &format!("{m}: y binds other types"));
    let x2 = x.execute(xs.id, 0, &x_again, false).await;
    f.same(&x2, &dx2, &format!("{m}: x again without types"));
    let row = single_row(&x2);
    assert_eq!(number(&row[0]), Some(77.0), "{m}: {row:?}");
    assert_eq!(row[1], Value::str("zzy"), "{m}: {row:?}");
    let (_, owned) = pool_counts(&p);
    assert_eq!(owned, 1, "{m}: one backend served both clients");
    f.check(m);
}

// ---------------------------------------------------------------------------
// Cursors
// ---------------------------------------------------------------------------

fn ten_rows(tag: &str) -> String {
    let t = table(tag);
    let values: Vec<String> = (1..=10).map(|i| format!("({i}, 'row{i}')")).collect();
    MariaDb::shared().sql(&format!(
        "DROP TABLE IF EXISTS {t};
         CREATE TABLE {t} (id INT PRIMARY KEY, v VARCHAR(20));
         INSERT INTO {t} VALUES {}",
        values.join(",")
    ));
    t
}

/// Fetches 3 rows at a time until LAST_ROW_SENT (at most 10 fetches).
async fn fetch_all(c: &mut RawConn, id: u32) -> Vec<Fetched> {
    let mut out = Vec::new();
    for _ in 0..10 {
        let f = c.fetch(id, 3).await;
        let done = match &f {
            Fetched::Rows { end, .. } => end.status & STATUS_LAST_ROW_SENT != 0,
            Fetched::Err(_) => true,
        };
        out.push(f);
        if done {
            return out;
        }
    }
    panic!("no LAST_ROW_SENT after 10 fetches: {out:?}");
}

async fn cursor_fetch_pins_until_the_last_row(deprecate: bool) {
    let db = MariaDb::shared();
    let m = mode(deprecate);
    let mut f = Findings::default();
    let t = ten_rows(&format!("cursor_{m}"));
    let sql = format!("SELECT id, v FROM {t} WHERE id <= ? ORDER BY id");
    let args = [Param::LongLong(100)];
    let p = Proxy::builder(db).groups(1).max_backend(2).start().await;

    // Directly.
    let mut d = direct(db, deprecate).await;
    let ds = d.prepare(&sql).await.expect("direct prepare");
    let d_exec = d.execute(ds.id, CURSOR_TYPE_READ_ONLY, &args, true).await;
    // A statement in between does not disturb the cursor.
    let d_between = d.query("SELECT 'between'").await;
    let d_fetches = fetch_all(&mut d, ds.id).await;
    let d_after = d.fetch(ds.id, 3).await;
    let d_plain = d.execute(ds.id, 0, &[Param::LongLong(2)], false).await;

    // Through the proxy.
    let mut c = via(&p, deprecate).await;
    let cs = c.prepare(&sql).await.expect("prepare");
    f.prepare(&cs, &ds, m);
    let c_exec = c.execute(cs.id, CURSOR_TYPE_READ_ONLY, &args, true).await;
    f.same(
        &c_exec,
        &d_exec,
        &format!("{m}: execute with a read-only cursor"),
    );
    let rs = c_exec.clone().rows();
    assert!(
        rs.rows.is_empty() && rs.end.status & STATUS_CURSOR_EXISTS != 0,
        "{m}: the server opened a cursor: {rs:?}"
    );
    let c_between = c.query("SELECT 'between'").await;
    f.same(
        &c_between,
        &d_between,
        &format!("{m}: a query while the cursor is open"),
    );

    // The cursor's backend is pinned: the client's statements run there,
    // and it is not idle while others work.
    let cursor_backend = backend_id(&mut c).await;
    wait_pool(&p, "cursor open", |idle, owned| owned == 1 && idle == 0).await;
    let others: Vec<_> = (0..4)
        .map(|i| {
            let url = p.app_url();
            let t = t.clone();
            tokio::spawn(async move {
                let mut o = mysql_async::Conn::from_url(url).await?;
                let sum: Option<i64> = o
                    .exec_first(format!("SELECT SUM(id) + ? FROM {t}"), (i,))
                    .await?;
                let backend: Option<u64> = o.query_first("SELECT @@pseudo_thread_id").await?;
                o.disconnect().await?;
                Ok::<_, mysql_async::Error>((sum, backend))
            })
        })
        .collect();
    let mut other_backends = Vec::new();
    for (i, h) in others.into_iter().enumerate() {
        let (sum, backend) = timeout(Duration::from_secs(20), h)
            .await
            .unwrap_or_else(|_| panic!("{m}: other client {i} blocked by the open cursor"))
            .expect("join")
            .unwrap_or_else(|e| panic!("{m}: other client {i}: {e}"));
        assert_eq!(sum, Some(55 + i as i64), "{m}");
        other_backends.extend(backend);
    }
    wait_pool(
        &p,
        "cursor open, other clients done: one backend pinned, the other idle",
        |idle, owned| (idle, owned) == (1, 2),
    )
    .await;
    assert!(
        !other_backends.contains(&cursor_backend),
        "{m}: another client ran on the cursor's backend {cursor_backend}: {other_backends:?}"
    );

    let c_fetches = fetch_all(&mut c, cs.id).await;
    f.eq(&c_fetches, &d_fetches, &format!("{m}: fetches"));
    let rows: Vec<Vec<Value>> = c_fetches
        .iter()
        .flat_map(|f| match f {
            Fetched::Rows { rows, .. } => rows.clone(),
            Fetched::Err(e) => panic!("{m}: fetch error {e:?}"),
        })
        .map(|r| decode_binary_row(&r, &rs.column_defs()))
        .collect();
    let want: Vec<Vec<Value>> = (1..=10)
        .map(|i| vec![Value::Int(i), Value::str(&format!("row{i}"))])
        .collect();
    assert_eq!(rows, want, "{m}: fetched rows");
    assert_eq!(c_fetches.len(), 4, "{m}: 3+3+3+1");

    // The last row released the pin.
    wait_pool(&p, "after the last fetch", |idle, owned| idle == owned).await;

    // A closed cursor answers like the server's.
    let c_after = c.fetch(cs.id, 3).await;
    f.err(
        &c_after,
        cs.id,
        &d_after,
        ds.id,
        &format!("{m}: fetch after the last row"),
    );
    assert!(
        matches!(&c_after, Fetched::Err(e) if e.code == 1421),
        "{m}: fetch after the last row: {c_after:?}"
    );

    // The statement still works without a cursor.
    let plain = c.execute(cs.id, 0, &[Param::LongLong(2)], false).await;
    f.same(&plain, &d_plain, &format!("{m}: execute without a cursor"));
    assert_eq!(plain.rows().rows.len(), 2, "{m}");
    f.check(m);
}

/// Closing a statement with an open cursor unpins the backend, and the
/// session goes on like a direct one.
async fn closing_a_statement_with_an_open_cursor_unpins(deprecate: bool) {
    let db = MariaDb::shared();
    let m = mode(deprecate);
    let mut f = Findings::default();
    let t = ten_rows(&format!("cursor_close_{m}"));
    let sql = format!("SELECT id, v FROM {t} ORDER BY id");
    let p = Proxy::builder(db).groups(1).max_backend(2).start().await;

    let mut d = direct(db, deprecate).await;
    let ds = d.prepare(&sql).await.expect("direct prepare");
    let d_exec = d.execute(ds.id, CURSOR_TYPE_READ_ONLY, &[], false).await;
    let d_fetch = d.fetch(ds.id, 3).await;
    d.close_stmt(ds.id).await;
    let d_query = d.query("SELECT 'alive'").await;

    let mut c = via(&p, deprecate).await;
    let cs = c.prepare(&sql).await.expect("prepare");
    let c_exec = c.execute(cs.id, CURSOR_TYPE_READ_ONLY, &[], false).await;
    f.same(&c_exec, &d_exec, &format!("{m}: execute with a cursor"));
    let c_fetch = c.fetch(cs.id, 3).await;
    f.eq(&c_fetch, &d_fetch, &format!("{m}: partial fetch"));
    wait_pool(&p, "cursor open", |idle, owned| owned == 1 && idle == 0).await;
    c.close_stmt(cs.id).await;
    wait_pool(&p, "after close", |idle, owned| owned >= 1 && idle == owned).await;
    // COM_STMT_CLOSE has no reply: the next answer is the query's.
    let c_query = c.query("SELECT 'alive'").await;
    f.same(
        &c_query,
        &d_query,
        &format!("{m}: first query after closing the statement"),
    );
    let again = c.prepare(&sql).await.expect("prepare again");
    let r = c.execute(again.id, 0, &[], false).await;
    assert_eq!(r.rows().rows.len(), 10, "{m}");
    f.check(m);
}

async fn stmt_reset_closes_the_cursor_like_the_server(deprecate: bool) {
    let db = MariaDb::shared();
    let m = mode(deprecate);
    let mut f = Findings::default();
    let t = ten_rows(&format!("reset_{m}"));
    let sql = format!("SELECT id, v FROM {t} WHERE id > ? ORDER BY id");
    let args = [Param::LongLong(0)];
    let p = Proxy::builder(db).groups(1).max_backend(2).start().await;

    let mut d = direct(db, deprecate).await;
    let ds = d.prepare(&sql).await.expect("direct prepare");
    let d_exec = d.execute(ds.id, CURSOR_TYPE_READ_ONLY, &args, true).await;
    let d_fetch = d.fetch(ds.id, 3).await;
    let d_reset = d.reset(ds.id).await;
    let d_after = d.fetch(ds.id, 3).await;
    let d_query = d.query("SELECT 'after reset'").await;
    let d_reexec = d.execute(ds.id, 0, &args, false).await;
    let d_idle_reset = d.reset(ds.id).await;

    let mut c = via(&p, deprecate).await;
    let cs = c.prepare(&sql).await.expect("prepare");
    let c_exec = c.execute(cs.id, CURSOR_TYPE_READ_ONLY, &args, true).await;
    f.same(&c_exec, &d_exec, &format!("{m}: execute with a cursor"));
    let c_fetch = c.fetch(cs.id, 3).await;
    f.eq(&c_fetch, &d_fetch, &format!("{m}: partial fetch"));
    wait_pool(&p, "cursor open", |idle, owned| owned == 1 && idle == 0).await;
    let c_reset = c.reset(cs.id).await;
    f.same(&c_reset, &d_reset, &format!("{m}: COM_STMT_RESET reply"));
    assert!(matches!(c_reset, Response::Ok(_)), "{m}: {c_reset:?}");
    let c_after = c.fetch(cs.id, 3).await;
    f.err(
        &c_after,
        cs.id,
        &d_after,
        ds.id,
        &format!("{m}: fetch after reset"),
    );
    assert!(
        matches!(&c_after, Fetched::Err(e) if e.code == 1421),
        "{m}: fetch after reset: {c_after:?}"
    );
    wait_pool(&p, "after reset", |idle, owned| owned >= 1 && idle == owned).await;
    let c_query = c.query("SELECT 'after reset'").await;
    f.same(&c_query, &d_query, &format!("{m}: query after reset"));
    // Reset keeps the statement (and its bound types).
    let c_reexec = c.execute(cs.id, 0, &args, false).await;
    f.same(&c_reexec, &d_reexec, &format!("{m}: execute after reset"));
    assert_eq!(c_reexec.rows().rows.len(), 10, "{m}");
    // RESET with nothing pending is OK as well.
    let c_idle_reset = c.reset(cs.id).await;
    f.same(&c_idle_reset, &d_idle_reset, &format!("{m}: idle reset"));
    f.check(m);
}

// ---------------------------------------------------------------------------
// Long data
// ---------------------------------------------------------------------------

/// Deterministic, incompressible-looking bytes.
fn noise(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed | 1;
    let mut out = Vec::with_capacity(n + 8);
    while out.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(n);
    out
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Sends `data` for parameter 1 in `chunks`, then EXECUTEs the INSERT.
async fn insert_long(
    c: &mut RawConn,
    sql: &str,
    id: i32,
    data: &[u8],
    chunks: &[usize],
) -> Response {
    let s = c.prepare(sql).await.expect("prepare insert");
    assert_eq!(s.num_params, 2);
    let mut at = 0;
    for n in chunks {
        c.send_long_data(s.id, 1, &data[at..at + n]).await;
        at += n;
    }
    assert_eq!(at, data.len(), "chunks cover the data");
    let r = c
        .execute(
            s.id,
            0,
            &[Param::Long(id), Param::LongData(TYPE_LONG_BLOB)],
            true,
        )
        .await;
    c.close_stmt(s.id).await;
    r
}

async fn send_long_data_beyond_16_mib(deprecate: bool) {
    // More than a stock server's 16 MiB max_allowed_packet (the server's
    // limit for long data too): this test states its need.
    let db = MariaDb::shared_with(
        common::mariadb::Profile::Production,
        &["--max-allowed-packet=64M"],
    );
    let m = mode(deprecate);
    let mut f = Findings::default();
    let t = table(&format!("longdata_{m}"));
    db.sql(&format!(
        "DROP TABLE IF EXISTS {t}; CREATE TABLE {t} (id INT PRIMARY KEY, b LONGBLOB)"
    ));
    let sql = format!("INSERT INTO {t} (id, b) VALUES (?, ?)");
    // 7 + 7 + 3 MiB + 4,321 bytes: > 16 MiB in total, each packet < 16 MiB.
    let chunks = [7 << 20, 7 << 20, (3 << 20) + 4321];
    let total: usize = chunks.iter().sum();
    let data = noise(0x5eed, total);
    let sha = hex(&Sha256::digest(&data));
    let p = Proxy::builder(db).groups(1).max_backend(2).start().await;
    let (via_id, direct_id) = (1, 2);

    let mut d = direct(db, deprecate).await;
    let d_ok = insert_long(&mut d, &sql, direct_id, &data, &chunks).await;
    let mut c = via(&p, deprecate).await;
    let c_ok = insert_long(&mut c, &sql, via_id, &data, &chunks).await;
    f.same(&c_ok, &d_ok, &format!("{m}: EXECUTE after long data"));
    assert_eq!(c_ok.clone().ok().affected_rows, 1, "{m}: {c_ok:?}");
    wait_pool(&p, "after execute", |idle, owned| {
        owned >= 1 && idle == owned
    })
    .await;

    let rows = d
        .query_rows(&format!(
            "SELECT id, LENGTH(b), MD5(b), SHA2(b, 256) FROM {t} ORDER BY id"
        ))
        .await;
    assert_eq!(rows.len(), 2, "{m}: {rows:?}");
    let (pv, dv) = (&rows[0], &rows[1]);
    assert_eq!(
        pv[1].as_deref(),
        Some(total.to_string().as_str()),
        "{m}: length via proxy"
    );
    assert_eq!(pv[1], dv[1], "{m}: LENGTH");
    assert_eq!(pv[2], dv[2], "{m}: MD5 via proxy vs direct");
    assert_eq!(
        pv[3].as_deref(),
        Some(sha.as_str()),
        "{m}: SHA2 of what arrived"
    );
    // The session is still usable.
    assert_eq!(c.query_one("SELECT 'ok'").await, "ok", "{m}");
    f.check(m);
}

// ---------------------------------------------------------------------------
// Re-prepare after ALTER TABLE
// ---------------------------------------------------------------------------

fn two_rows(tag: &str) -> String {
    let t = table(tag);
    MariaDb::shared().sql(&format!(
        "DROP TABLE IF EXISTS {t};
         CREATE TABLE {t} (id INT PRIMARY KEY, v VARCHAR(10));
         INSERT INTO {t} VALUES (1, 'a'), (2, 'b')"
    ));
    t
}

async fn alter_table_between_executes_matches_direct(deprecate: bool) {
    let db = MariaDb::shared();
    let m = mode(deprecate);
    let mut f = Findings::default();
    let t = two_rows(&format!("alter_{m}"));
    let sql = format!("SELECT * FROM {t} WHERE id = ?");
    let p = Proxy::builder(db).groups(1).max_backend(1).start().await;
    let one = [Param::LongLong(1)];
    let two = [Param::LongLong(2)];

    let mut d = direct(db, deprecate).await;
    let mut c = via(&p, deprecate).await;
    let ds = d.prepare(&sql).await.expect("direct prepare");
    let cs = c.prepare(&sql).await.expect("prepare");
    f.prepare(&cs, &ds, m);
    let (cr, dr) = (
        c.execute(cs.id, 0, &one, true).await,
        d.execute(ds.id, 0, &one, true).await,
    );
    f.same(&cr, &dr, &format!("{m}: before ALTER"));

    db.sql(&format!("ALTER TABLE {t} ADD COLUMN z INT DEFAULT 7"));

    let dr = d.execute(ds.id, 0, &two, false).await;
    let cr = c.execute(cs.id, 0, &two, false).await;
    assert_eq!(
        single_row(&cr),
        vec![Value::Int(2), Value::str("b"), Value::Int(7)],
        "{m}"
    );
    f.same(&cr, &dr, &format!("{m}: after ALTER (server re-prepares)"));
    let (cr, dr) = (
        c.execute(cs.id, 0, &one, true).await,
        d.execute(ds.id, 0, &one, true).await,
    );
    f.same(&cr, &dr, &format!("{m}: again after ALTER"));
    f.check(m);
}

/// SERVER_STATUS_METADATA_CHANGED.
const METADATA_CHANGED: u16 = 0x0400;

/// `r` with the status `bits` cleared.
fn without_status(r: &Response, bits: u16) -> Response {
    let mut r = r.clone();
    match &mut r {
        Response::Rows(rs) => {
            rs.end.status &= !bits;
            if let Some(e) = rs.columns_end.as_mut() {
                e.status &= !bits;
            }
        }
        Response::Ok(ok) => ok.status &= !bits,
        Response::Err(_) => {}
    }
    r
}

/// Prepared (and executed) on backend A before the ALTER, then run on
/// backend B, which prepares it for the first time after the ALTER, then
/// back on A, whose copy predates the ALTER.
///
/// SERVER_STATUS_METADATA_CHANGED is masked here: each backend's copy of the
/// statement notices the ALTER at its own first execution (B never does, A
/// does one execute later than a direct connection), so with several
/// backends the bit cannot follow one connection's history. Columns, rows
/// and every other status bit must match.
async fn alter_table_then_a_backend_that_never_prepared_it(deprecate: bool) {
    let db = MariaDb::shared();
    let m = mode(deprecate);
    let mut f = Findings::default();
    let t = two_rows(&format!("alter_move_{m}"));
    let sql = format!("SELECT * FROM {t} WHERE id = ?");
    let p = Proxy::builder(db).groups(1).max_backend(2).start().await;
    let one = [Param::LongLong(1)];
    let two = [Param::LongLong(2)];

    let mut d = direct(db, deprecate).await;
    let mut c = via(&p, deprecate).await;
    let ds = d.prepare(&sql).await.expect("direct prepare");
    let cs = c.prepare(&sql).await.expect("prepare");
    let (cr, dr) = (
        c.execute(cs.id, 0, &one, true).await,
        d.execute(ds.id, 0, &one, true).await,
    );
    f.same(&cr, &dr, &format!("{m}: before ALTER"));
    let a = backend_id(&mut c).await;
    // A client of the same flavour (capabilities), so it can get that backend.
    let mut pin = via(&p, deprecate).await;
    pin.query_ok("BEGIN").await;
    pin.query_rows("SELECT 1 FROM DUAL").await;
    let pinned = Some(backend_id(&mut pin).await);
    assert_eq!(pinned, Some(a), "{m}: premise: backend A is pinned");

    db.sql(&format!("ALTER TABLE {t} ADD COLUMN z INT DEFAULT 7"));

    let dr = d.execute(ds.id, 0, &two, false).await;
    let cr = c.execute(cs.id, 0, &two, false).await;
    let b = backend_id(&mut c).await;
    assert_ne!(a, b, "{m}: the execute ran on another backend");
    assert_eq!(
        single_row(&cr),
        vec![Value::Int(2), Value::str("b"), Value::Int(7)],
        "{m}"
    );
    f.same(
        &without_status(&cr, METADATA_CHANGED),
        &without_status(&dr, METADATA_CHANGED),
        &format!("{m}: on a backend that first prepared it after the ALTER"),
    );

    pin.query_ok("COMMIT").await;
    drop(pin);
    // A is now the most recently returned backend.
    let dr = d.execute(ds.id, 0, &one, false).await;
    let cr = c.execute(cs.id, 0, &one, false).await;
    assert_eq!(backend_id(&mut c).await, a, "{m}: back on backend A");
    assert_eq!(
        single_row(&cr),
        vec![Value::Int(1), Value::str("a"), Value::Int(7)],
        "{m}"
    );
    f.same(
        &without_status(&cr, METADATA_CHANGED),
        &without_status(&dr, METADATA_CHANGED),
        &format!("{m}: back on the backend that prepared it before the ALTER"),
    );
    f.check(m);
}

/// A client preparing after the ALTER gets the statement's current shape,
/// as from the server (the registry must not hand out the old reply).
async fn prepare_after_alter_table_reports_the_new_columns(deprecate: bool) {
    let db = MariaDb::shared();
    let m = mode(deprecate);
    let mut f = Findings::default();
    let t = two_rows(&format!("alter_prep_{m}"));
    let sql = format!("SELECT * FROM {t} WHERE id = ?");
    let p = Proxy::builder(db).groups(1).max_backend(1).start().await;
    let mut holder = via(&p, deprecate).await;
    let hs = holder.prepare(&sql).await.expect("prepare");
    assert_eq!(hs.num_columns, 2, "{m}");

    db.sql(&format!("ALTER TABLE {t} ADD COLUMN z INT DEFAULT 7"));

    let mut d = direct(db, deprecate).await;
    let ds = d.prepare(&sql).await.expect("direct prepare after ALTER");
    assert_eq!(ds.num_columns, 3, "{m}: the server sees the new column");
    let mut c = via(&p, deprecate).await;
    let cs = c.prepare(&sql).await.expect("prepare after ALTER");
    f.prepare(&cs, &ds, &format!("{m}: prepare after ALTER"));
    // The statement the holder prepared earlier still executes.
    let r = holder.execute(hs.id, 0, &[Param::LongLong(1)], true).await;
    assert_eq!(
        single_row(&r),
        vec![Value::Int(1), Value::str("a"), Value::Int(7)],
        "{m}"
    );
    f.check(m);
}

// ---------------------------------------------------------------------------
// Backend killed between prepare and execute
// ---------------------------------------------------------------------------

async fn backend_killed_between_prepare_and_execute(deprecate: bool) {
    let db = MariaDb::shared();
    let m = mode(deprecate);
    let mut f = Findings::default();
    let sql = "SELECT ? * 2, CONCAT('k', ?)";
    let p = Proxy::builder(db).groups(1).max_backend(1).start().await;

    let mut d = direct(db, deprecate).await;
    let ds = d.prepare(sql).await.expect("direct prepare");
    let d1 = d
        .execute(ds.id, 0, &[Param::LongLong(21), Param::str("a")], true)
        .await;
    let d2 = d
        .execute(ds.id, 0, &[Param::LongLong(50), Param::str("b")], false)
        .await;

    let mut c = via(&p, deprecate).await;
    let cs = c.prepare(sql).await.expect("prepare");
    let c1 = c
        .execute(cs.id, 0, &[Param::LongLong(21), Param::str("a")], true)
        .await;
    f.same(&c1, &d1, &format!("{m}: first execute"));
    // With max_backend(1) this is the proxy's only backend connection.
    let victim = backend_id(&mut c).await;
    let seen = db.sql(&format!(
        "SELECT COUNT(*) FROM information_schema.processlist WHERE id = {victim} AND user = 'app'"
    ));
    assert_eq!(seen.trim(), "1", "{m}: backend {victim} is an app session");

    db.sql(&format!("KILL {victim}"));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while db
        .sql(&format!(
            "SELECT COUNT(*) FROM information_schema.processlist WHERE id = {victim}"
        ))
        .trim()
        != "0"
    {
        assert!(
            std::time::Instant::now() < deadline,
            "{m}: backend {victim} survived KILL"
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    // Without types: the new backend needs the prepare and the types.
    let c2 = c
        .execute(cs.id, 0, &[Param::LongLong(50), Param::str("b")], false)
        .await;
    f.same(
        &c2,
        &d2,
        &format!("{m}: execute after the backend was killed"),
    );
    let row = single_row(&c2);
    assert_eq!(number(&row[0]), Some(100.0), "{m}: {row:?}");
    assert_eq!(row[1], Value::str("kb"), "{m}");
    let now = backend_id(&mut c).await;
    assert_ne!(now, victim, "{m}: a new backend connection");
    assert_eq!(p.backends_owned(), 1, "{m}");
    f.check(m);
}

// ---------------------------------------------------------------------------
// Unknown and malformed statement commands
// ---------------------------------------------------------------------------

async fn unknown_statement_ids_answer_like_the_server(deprecate: bool) {
    let db = MariaDb::shared();
    let m = mode(deprecate);
    let mut f = Findings::default();
    let bogus = 987_654u32;
    let p = Proxy::builder(db).groups(1).max_backend(1).start().await;
    let mut d = direct(db, deprecate).await;
    let mut c = via(&p, deprecate).await;

    let de = d.execute(bogus, 0, &[], false).await;
    let ce = c.execute(bogus, 0, &[], false).await;
    f.same(&ce, &de, &format!("{m}: EXECUTE of an unknown id"));
    assert_eq!(ce.err().code, 1243, "{m}");

    // With parameter bytes after the header, as a driver would send.
    let payload = execute_payload(bogus, 0, &[Param::LongLong(1)], true);
    let (cr, dr) = (c.execute_raw(&payload).await, d.execute_raw(&payload).await);
    f.same(
        &cr,
        &dr,
        &format!("{m}: EXECUTE of an unknown id with parameters"),
    );

    let (cf, df) = (c.fetch(bogus, 1).await, d.fetch(bogus, 1).await);
    f.eq(&cf, &df, &format!("{m}: FETCH of an unknown id"));
    assert!(
        matches!(&cf, Fetched::Err(e) if e.code == 1243),
        "{m}: {cf:?}"
    );

    let (cr, dr) = (c.reset(bogus).await, d.reset(bogus).await);
    f.same(&cr, &dr, &format!("{m}: RESET of an unknown id"));

    // CLOSE and SEND_LONG_DATA have no reply, even for unknown ids.
    c.close_stmt(bogus).await;
    c.send_long_data(bogus, 0, b"abc").await;
    d.close_stmt(bogus).await;
    d.send_long_data(bogus, 0, b"abc").await;
    let (cr, dr) = (
        c.query("SELECT 'sync'").await,
        d.query("SELECT 'sync'").await,
    );
    f.same(&cr, &dr, &format!("{m}: query after CLOSE/LONG_DATA"));
    f.check(m);
}

/// Every truncation of a well-formed EXECUTE (header, null bitmap,
/// new-params-bound byte, type block, values), with and without the type
/// block: the proxy answers exactly like the server (the server refuses most
/// with 1835 or 1210 and, being lenient about short values, accepts a few),
/// and the connection stays usable after each.
async fn truncated_execute_answers_like_the_server(deprecate: bool) {
    let db = MariaDb::shared();
    let m = mode(deprecate);
    let mut f = Findings::default();
    let sql = "SELECT ? + 0, CONCAT(?, 'x')";
    let params = [Param::LongLong(7), Param::str("abc")];
    let p = Proxy::builder(db).groups(1).max_backend(1).start().await;
    let mut d = direct(db, deprecate).await;
    let mut c = via(&p, deprecate).await;
    let ds = d.prepare(sql).await.expect("direct prepare");
    let cs = c.prepare(sql).await.expect("prepare");
    // Bind once so both know the types (as after a normal execute).
    let good_d = d.execute(ds.id, 0, &params, true).await;
    let good_c = c.execute(cs.id, 0, &params, true).await;
    f.same(&good_c, &good_d, &format!("{m}: well-formed execute"));

    let mut refused_1210 = 0;
    for bound in [true, false] {
        let full_d = execute_payload(ds.id, 0, &params, bound);
        let full_c = execute_payload(cs.id, 0, &params, bound);
        for cut in 1..full_d.len() {
            let what = format!("bound={bound}, {cut} of {} bytes", full_d.len());
            let dr = d.execute_raw(&full_d[..cut]).await;
            let cr = c.execute_raw(&full_c[..cut]).await;
            let same = match (&cr, &dr) {
                (Response::Err(a), Response::Err(b)) => a.normalized(cs.id) == b.normalized(ds.id),
                (a, b) => response_diff(a, b).is_empty(),
            };
            if !same {
                f.0.push(format!(
                    "{what} ({:02x?}): via proxy {}, direct {}",
                    &full_c[..cut],
                    brief(&cr),
                    brief(&dr)
                ));
            }
            if matches!(&cr, Response::Err(e) if e.code == 1210) {
                refused_1210 += 1;
            }
            // Still usable, and the statement still works.
            let after = c.query("SELECT 'after'").await;
            assert_eq!(
                after.clone().rows().text_rows(),
                vec![vec![Some("after".to_string())]],
                "{m}: {what}: query afterwards"
            );
            let again = c.execute(cs.id, 0, &params, true).await;
            f.same(&again, &good_d, &format!("{m}: {what}: execute afterwards"));
            let again = d.execute(ds.id, 0, &params, true).await;
            assert_eq!(again, good_d, "{m}: {what}: direct execute afterwards");
        }
    }
    assert!(refused_1210 > 0, "{m}: no truncation was refused with 1210");
    f.check(m);
}

// ---------------------------------------------------------------------------
// Server-side statements per backend
// ---------------------------------------------------------------------------

/// The server's global `Prepared_stmt_count`.
fn prepared_stmt_count(db: &MariaDb) -> usize {
    let out = db.sql(
        "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS \
         WHERE VARIABLE_NAME = 'PREPARED_STMT_COUNT'",
    );
    out.trim()
        .parse()
        .unwrap_or_else(|e| panic!("Prepared_stmt_count {out:?}: {e}"))
}

/// Two clients prepare the same new SQL at about the same time: the first
/// misses the registry and queues for the (only) backend, which the second
/// holds in a transaction and prepares the statement on. When the first gets
/// the backend, its prepare must not leave a second, untracked server-side
/// copy behind: a backend never holds more than `prepared_per_backend`
/// statements. (Private server: the global `Prepared_stmt_count` must not
/// see other tests.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_first_prepares_leave_no_untracked_server_statements() {
    let db = MariaDb::start();
    let p = Proxy::builder(&db)
        .groups(1)
        .max_backend(1)
        .queue_timeout_ms(30_000)
        .with(|c| c.pool.prepared_per_backend = 1)
        .start()
        .await;
    let sql = "SELECT ? + 1";
    let mut first = via(&p, true).await;
    let mut second = via(&p, true).await;
    second.query_ok("BEGIN").await;
    second.query_rows("SELECT 1 FROM DUAL").await;

    // The first client's PREPARE misses the registry and waits for the
    // backend the second client holds.
    let mut prepare = vec![COM_STMT_PREPARE];
    prepare.extend_from_slice(sql.as_bytes());
    first.send_command(&prepare).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    while p.shared.pool.groups[0].snapshot().low + p.shared.pool.groups[0].snapshot().high == 0 {
        assert!(Instant::now() < deadline, "the first PREPARE never queued");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let s2 = second
        .prepare(sql)
        .await
        .expect("prepare on the held backend");
    assert_eq!(prepared_stmt_count(&db), 1, "one statement on the server");
    second.query_ok("COMMIT").await;

    // Now the first PREPARE runs on the same backend.
    let ok = first.read("prepare reply").await;
    assert_eq!(ok.first(), Some(&0x00), "prepare OK: {ok:02x?}");
    let s1 = u32::from_le_bytes([ok[1], ok[2], ok[3], ok[4]]);
    first.read("parameter definition").await;
    first.read("column definition").await;
    let after_race = prepared_stmt_count(&db);

    // Both clients' statements work.
    for (c, id) in [(&mut first, s1), (&mut second, s2.id)] {
        let r = c.execute(id, 0, &[Param::LongLong(41)], true).await;
        assert_eq!(number(&single_row(&r)[0]), Some(42.0));
    }
    // A different statement evicts the cached one (cap 1).
    let other = first.prepare("SELECT ? * 3").await.expect("prepare other");
    let r = first
        .execute(other.id, 0, &[Param::LongLong(5)], true)
        .await;
    assert_eq!(number(&single_row(&r)[0]), Some(15.0));
    let after_evict = prepared_stmt_count(&db);
    assert_eq!(p.backends_owned(), 1);
    assert!(
        after_race <= 1 && after_evict <= 1,
        "one backend with prepared_per_backend = 1 holds {after_race} server statements after \
         the racing prepares and {after_evict} after evicting the first statement \
         (Prepared_stmt_count); the extra ones are untracked and never closed"
    );
}

/// A COM_STMT_PREPARE that warns reports its warning count in the
/// prepare-OK and its EOFs, and SHOW WARNINGS then lists the warning, as
/// on the server, also when the statement's text was prepared before by
/// another client (the proxy's registry entry is shared).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepare_warnings_are_reported() {
    let db = MariaDb::shared();
    let p = Proxy::builder(db).groups(1).max_backend(4).start().await;
    for deprecate in [false, true] {
        let mut got = Vec::new();
        for mut c in [via(&p, deprecate).await, direct(db, deprecate).await] {
            let mut seen = Vec::new();
            for _ in 0..2 {
                let s = c.prepare("SELECT 1 AS ' '").await.expect("prepare");
                let shown = c.query_rows("SHOW WARNINGS").await;
                seen.push((s.warnings, s.eofs.clone(), shown));
                c.close_stmt(s.id).await;
            }
            got.push(seen);
        }
        assert_eq!(
            got[0],
            got[1],
            "{}: through the proxy, then direct",
            mode(deprecate)
        );
        assert!(
            got[1][0].0 > 0,
            "the statement warns directly: {:?}",
            got[1]
        );
    }
}
