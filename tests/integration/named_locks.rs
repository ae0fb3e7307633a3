//! Named locks (GET_LOCK) a client takes stay its own through the proxy, as
//! on its own direct connection: held while it lives, never handed to the
//! next client of the backend, never freed under it by a reset (issue 16,
//! B.6 and B.7).
//!
//! Each case runs the same two clients twice, through a proxy with ONE
//! backend connection and then directly: A takes a lock, B (same user,
//! same capabilities, hence the same pool key) looks at it, A shows it
//! still holds it and releases it. Through the proxy B may instead wait in
//! vain for the only backend (ER 1317: A keeps it while it holds the lock);
//! anything else must equal direct. Lock names are probed with hex literals
//! (the server keys user locks by the raw bytes of the name), so the probes
//! mean the same under every character set and sql_mode.

use crate::common;

use std::time::Duration;

use common::raw::{BASE_CAPS, COM_QUERY, CURSOR_TYPE_NO_CURSOR, DEPRECATE_EOF, RawConn, Response};
use common::{MariaDb, Proxy};

/// A and B: the same capabilities (one flavour, one pool key).
const CAPS: u32 = BASE_CAPS | DEPRECATE_EOF;
/// The proxy's queue-timeout error: A legitimately kept the only backend.
const ER_QUERY_INTERRUPTED: u16 = 1317;
/// A `take` with this prefix runs through the binary protocol.
const PREPARED: &[u8] = b"prepared:";
/// B's view of a lock another connection holds.
const TAKEN_BY_ANOTHER: &str = "rows [[Some(\"0\"), Some(\"0\")]]";
/// B got ER 1317 through the proxy.
const PINNED: &str = "pinned";

async fn one_backend(db: &MariaDb) -> Proxy {
    Proxy::builder(db)
        .groups(1)
        .max_backend(1)
        .queue_timeout_ms(1000)
        .with(|c| c.pool.diagnostics_hold_ms = 100)
        .start()
        .await
}

async fn login(addr: &str, collation: u8) -> RawConn {
    match RawConn::try_connect_with(addr, "app", "secret", Some("test"), CAPS, collation).await {
        Ok(c) => c,
        Err(e) => panic!("login to {addr}: {e:?}"),
    }
}

/// COM_QUERY with `sql` as raw bytes (the session's character set, not
/// necessarily UTF-8).
async fn query_bytes(c: &mut RawConn, sql: &[u8]) -> Response {
    let mut p = vec![COM_QUERY];
    p.extend_from_slice(sql);
    c.send_command(&p).await;
    c.read_response(&String::from_utf8_lossy(sql), false).await
}

/// What one response says, without the parts that differ between two
/// connections (ids, messages naming them).
fn gist(r: &Response) -> String {
    match r {
        Response::Ok(_) => "ok".into(),
        Response::Err(e) => format!("error {}", e.code),
        Response::Rows(rs) => format!("rows {:?}", rs.text_rows()),
    }
}

fn hex(name: &[u8]) -> String {
    name.iter().map(|b| format!("{b:02X}")).collect()
}

/// What A and B see in one run of a case.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    /// A's answer to the statement taking the lock.
    take: String,
    /// B's view of the lock: free?, held by B itself? (or 1317 through the
    /// proxy while A keeps the backend).
    b_view: String,
    /// A still holds the lock.
    a_holds: String,
    /// A's RELEASE_LOCK.
    release: String,
    /// B's view once A released it.
    b_after: String,
}

/// One run: A (handshake collation `collation`) runs `setup`, then `take`;
/// B probes the lock named `name` (its bytes as the server keys it).
async fn run(addr: &str, collation: u8, setup: &[&[u8]], take: &[u8], name: &[u8]) -> Seen {
    let h = hex(name);
    let view = format!(
        "SELECT IS_FREE_LOCK(X'{h}'), IFNULL(IS_USED_LOCK(X'{h}') = @@pseudo_thread_id, 0)"
    );
    let mut a = login(addr, collation).await;
    for s in setup {
        let r = query_bytes(&mut a, s).await;
        assert!(
            matches!(r, Response::Ok(_)),
            "setup {:?}: {}",
            String::from_utf8_lossy(s),
            common::raw::brief(&r)
        );
    }
    let take = if let Some(sql) = take.strip_prefix(PREPARED) {
        // The binary protocol: prepared, executed, closed.
        let sql = std::str::from_utf8(sql).expect("prepared text is UTF-8");
        let stmt = a.prepare(sql).await.expect("prepare");
        let r = gist(&a.execute(stmt.id, CURSOR_TYPE_NO_CURSOR, &[], false).await);
        a.close_stmt(stmt.id).await;
        r
    } else {
        gist(&query_bytes(&mut a, take).await)
    };
    // Past the diagnostics hold: only the lock may keep the backend now.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let mut b = login(addr, collation).await;
    let b_view = match b.query(&view).await {
        Response::Err(e) if e.code == ER_QUERY_INTERRUPTED => PINNED.to_string(),
        r => gist(&r),
    };
    let a_holds = gist(
        &a.query(&format!("SELECT IS_USED_LOCK(X'{h}') = @@pseudo_thread_id"))
            .await,
    );
    let release = gist(&a.query(&format!("SELECT RELEASE_LOCK(X'{h}')")).await);
    let b_after = gist(&b.query(&view).await);
    a.quit().await;
    b.quit().await;
    Seen {
        take,
        b_view,
        a_holds,
        release,
        b_after,
    }
}

/// Runs a case through the proxy and directly; they must agree (B may be
/// kept waiting through the proxy instead of seeing A's lock).
async fn case(collation: u8, setup: &[&[u8]], take: &[u8], name: &[u8]) {
    let db = MariaDb::shared();
    db.sql("CREATE TABLE IF NOT EXISTS test.nl_uk (id INT PRIMARY KEY)");
    db.sql("INSERT IGNORE INTO test.nl_uk VALUES (1)");
    let direct = run(&db.addr(), collation, setup, take, name).await;
    let p = one_backend(db).await;
    let mut via = run(&p.addr.to_string(), collation, setup, take, name).await;
    assert_eq!(
        direct.b_view, TAKEN_BY_ANOTHER,
        "direct: B sees A's lock taken, not its own"
    );
    assert_eq!(direct.a_holds, "rows [[Some(\"1\")]]", "direct: A holds it");
    // Kept waiting for the backend A holds: as good as seeing A's lock.
    if via.b_view == PINNED {
        via.b_view = TAKEN_BY_ANOTHER.to_string();
    }
    assert_eq!(via, direct, "through myplex (left) and direct (right)");
}

/// B.6: the statement that takes the lock then fails (a duplicate key on a
/// later row): the lock stays taken, and the statement's own effects still
/// count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_statement_keeps_the_lock_it_took() {
    case(
        45,
        &[],
        b"INSERT INTO nl_uk (id) VALUES (GET_LOCK('nl_fail', 0)), (1)",
        b"nl_fail",
    )
    .await;
}

/// B.6 through the binary protocol: the executed statement fails after
/// taking the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_execute_keeps_the_lock_it_took() {
    case(
        45,
        &[],
        b"prepared:INSERT INTO nl_uk (id) VALUES (GET_LOCK('nl_fail_ps', 0)), (1)",
        b"nl_fail_ps",
    )
    .await;
}

/// B.7: a latin1 session's lock name is latin1 bytes (`é` is 0xE9), not
/// UTF-8: the held-lock check must ask for those very bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_latin1_lock_name_is_checked_as_the_server_keys_it() {
    case(8, &[], b"SELECT GET_LOCK('nl_caf\xe9', 10)", b"nl_caf\xe9").await;
}

/// B.7: under NO_BACKSLASH_ESCAPES, `'a\b'` names three bytes, backslash
/// included: the held-lock check must not read it as an escape.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backslash_lock_name_under_no_backslash_escapes() {
    case(
        45,
        &[b"SET sql_mode = 'NO_BACKSLASH_ESCAPES'"],
        b"SELECT GET_LOCK('nl_a\\b', 10)",
        b"nl_a\\b",
    )
    .await;
}

/// B.7: with escapes on, `'a\\b'` names `a\b` (one backslash), and a
/// quote doubled in the literal is one quote.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_escaped_lock_name_is_checked_as_the_server_reads_it() {
    case(
        45,
        &[],
        b"SELECT GET_LOCK('nl_b\\\\c''d', 10)",
        b"nl_b\\c'd",
    )
    .await;
}

/// B.7: the connection converts the literal from the client's character
/// set: a latin1 client on a utf8mb4 connection names the lock with the
/// UTF-8 bytes of `é`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_converted_lock_name_is_checked_as_the_server_keys_it() {
    case(
        8,
        &[b"SET character_set_connection = utf8mb4"],
        b"SELECT GET_LOCK('nl_conv\xe9', 10)",
        "nl_conv\u{e9}".as_bytes(),
    )
    .await;
}
