#!/usr/bin/env python3
"""Exercise two Python MySQL drivers against a server (or myplex in front of
one) and check that everything round-trips exactly.

Usage: driver_check.py HOST PORT USER PASSWORD DB SUFFIX

SUFFIX names this run's scratch tables (pydrv_SUFFIX, pydrv_SUFFIX_ai), so
several runs can share one database concurrently.

1. mysql-connector-python, pure-Python implementation, server-side prepared
   statements (binary protocol): typed parameters, prepared SELECT with
   BETWEEN ? AND ?, execute and executemany, explicit and implicit
   (autocommit off) transactions with rollback and commit, lastrowid vs
   LAST_INSERT_ID(), duplicate-key IntegrityError (1062 / 23000), warnings
   of a prepared statement fetched by the driver.
2. PyMySQL (text protocol): the same reads, a two-result multi-statement
   with nextset(), warning count, SHOW WARNINGS and SHOW COUNT(*) WARNINGS,
   a transaction, ping.

Every run also reports the server thread ids (@@pseudo_thread_id) its
statements were seen on, so the caller can tell how backends were shared.

Prints one JSON summary line on success. On any mismatch or error prints
"driver_check FAILED: ..." plus the traceback on stderr and exits 1.
"""

import datetime
import decimal
import importlib.metadata as md
import json
import sys
import traceback
import warnings

import mysql.connector
import mysql.connector.errors
import pymysql
import pymysql.err
from pymysql.constants import CLIENT

N_ROWS = 100
COLUMNS = "id, i, s, f, d, dt, b, n"


class Mismatch(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Mismatch(what)


def expect_eq(got, want, what):
    if got != want:
        raise Mismatch(f"{what}: got {got!r}, want {want!r}")


def make_row(k):
    """Row k (1-based): one value of each parameter type."""
    sign = -1 if k % 2 else 1
    i = sign * (k * 1_000_000_007 + (2**62 if k == 1 else 0))
    s = f"héllo wörld ✓ 日本語 🐍 «{k}» 'quote' \\back"
    f = sign * (k * 0.1 + 1e-9 * k)  # not exactly representable in decimal
    d = decimal.Decimal(f"{sign * k * 1234567}.{k:06d}")
    dt = datetime.datetime(2024, 2, 29, 13, 14, 15, 123456) + datetime.timedelta(
        days=k, seconds=k, microseconds=k * 7
    )
    b = bytes([k % 256, 0, 255, 10, 13, 39, 92, 0x22]) + bytes(range(k % 17))
    n = None if k % 3 == 0 else k
    return (k, i, s, f, d, dt, b, n)


def normalise(row):
    """Driver result row -> comparable tuple (bytearray -> bytes)."""
    return tuple(bytes(v) if isinstance(v, (bytes, bytearray)) else v for v in row)


def compare_rows(got_rows, first, last, what):
    want = [make_row(k) for k in range(first, last + 1)]
    expect_eq(len(got_rows), len(want), f"{what}: row count")
    for got, exp in zip(got_rows, want):
        got = normalise(got)
        if got != exp:
            raise Mismatch(f"{what}: row {exp[0]}: got {got!r}, want {exp!r}")
        # Decimal equality is numeric; also check the scale came back.
        expect_eq(str(got[4]), str(exp[4]), f"{what}: row {exp[0]} decimal text")
        # And the Python types (e.g. str, not bytes, for the utf8mb4 column).
        types = tuple(type(v) for v in got)
        expect_eq(types, tuple(type(v) for v in exp), f"{what}: row {exp[0]} types")


# Thread ids of the server connections this run's statements ran on
# (@@pseudo_thread_id is the backend's own id even behind the proxy).
BACKEND_IDS = set()


def note_backend(cur):
    cur.execute("SELECT @@pseudo_thread_id")
    (tid,) = cur.fetchone()
    BACKEND_IDS.add(int(tid))


def count_rows(cur, table, where="1"):
    cur.execute(f"SELECT COUNT(*) FROM {table} WHERE {where}")
    (n,) = cur.fetchone()
    return n


# --------------------------------------------------------------------------
# mysql-connector-python: server-side prepared statements
# --------------------------------------------------------------------------


def connector_connect(args, **extra):
    host, port, user, password, db = args
    conn = mysql.connector.connect(
        host=host,
        port=int(port),
        user=user,
        password=password,
        database=db,
        use_pure=True,
        ssl_disabled=True,
        charset="utf8mb4",
        collation="utf8mb4_unicode_ci",
        connection_timeout=30,
        **extra,
    )
    check(
        type(conn).__module__ == "mysql.connector.connection",
        f"expected the pure-Python connection class, got {type(conn)!r}",
    )
    return conn


def connector_part(args, table, ai):
    out = {}
    conn = connector_connect(args, autocommit=True)
    out["server_version"] = conn.server_info
    text = conn.cursor()
    text.execute(f"DROP TABLE IF EXISTS {table}, {ai}")
    text.execute(
        f"CREATE TABLE {table} (id INT PRIMARY KEY, i BIGINT, "
        "s VARCHAR(200) CHARACTER SET utf8mb4, f DOUBLE, d DECIMAL(30,6), "
        "dt DATETIME(6), b VARBINARY(64), n INT NULL) ENGINE=InnoDB"
    )
    text.execute(
        f"CREATE TABLE {ai} (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(40)) "
        "ENGINE=InnoDB AUTO_INCREMENT=1000"
    )

    ps = conn.cursor(prepared=True)
    insert = f"INSERT INTO {table} ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
    # Rows 1..50 one execute each (the statement is prepared once and
    # re-executed), 51..100 with executemany.
    for k in range(1, 51):
        ps.execute(insert, make_row(k))
        expect_eq(ps.rowcount, 1, f"prepared insert row {k} rowcount")
        if k % 10 == 0:
            note_backend(text)
    ps.executemany(insert, [make_row(k) for k in range(51, N_ROWS + 1)])
    expect_eq(ps.rowcount, 50, "prepared executemany rowcount")
    out["inserted"] = N_ROWS

    select = f"SELECT {COLUMNS} FROM {table} WHERE id BETWEEN ? AND ? ORDER BY id"
    ps.execute(select, (1, N_ROWS))
    compare_rows(ps.fetchall(), 1, N_ROWS, "prepared select all")
    ps.execute(select, (40, 60))
    compare_rows(ps.fetchall(), 40, 60, "prepared select 40..60")
    ps.execute(select, (N_ROWS + 1, N_ROWS + 5))
    expect_eq(ps.fetchall(), [], "prepared select of no rows")
    # NULL and non-NULL parameters through one statement.
    ps.execute(f"SELECT COUNT(*) FROM {table} WHERE n <=> ?", (None,))
    expect_eq(ps.fetchone()[0], N_ROWS // 3, "prepared NULL-safe compare")
    # Same statement, other parameter types (str for an int column).
    ps.execute(select, ("10", "12"))
    compare_rows(ps.fetchall(), 10, 12, "prepared select with str params")
    out["prepared_selects"] = 5
    note_backend(text)

    # Text-protocol reads on the same connection agree.
    text.execute(f"SELECT {COLUMNS} FROM {table} WHERE id BETWEEN 1 AND {N_ROWS} ORDER BY id")
    compare_rows(text.fetchall(), 1, N_ROWS, "connector text select")

    # Explicit transaction: rollback, then commit.
    conn.start_transaction()
    ps.execute(insert, make_row(1001))
    ps.execute(f"SELECT COUNT(*) FROM {table} WHERE id = ?", (1001,))
    expect_eq(ps.fetchone()[0], 1, "row visible inside its transaction")
    check(conn.in_transaction, "in_transaction after START TRANSACTION + insert")
    conn.rollback()
    check(not conn.in_transaction, "in_transaction after rollback")
    expect_eq(count_rows(text, table, "id = 1001"), 0, "row 1001 after rollback")
    conn.start_transaction()
    ps.execute(insert, make_row(1002))
    conn.commit()
    expect_eq(count_rows(text, table, "id = 1002"), 1, "row 1002 after commit")

    # Implicit transaction (autocommit off, the DB-API default).
    conn.autocommit = False
    ps.execute(insert, make_row(1003))
    conn.rollback()
    expect_eq(count_rows(text, table, "id = 1003"), 0, "row 1003 after rollback")
    ps.execute(insert, make_row(1004))
    ps.execute(insert, make_row(1005))
    conn.commit()
    conn.autocommit = True
    expect_eq(
        count_rows(text, table, "id BETWEEN 1001 AND 1005"), 3, "rows 1001..1005 after commits"
    )
    out["transactions"] = "rollback+commit, explicit and autocommit=0"

    # lastrowid vs LAST_INSERT_ID(), prepared and text.
    ids = []
    ps_ai = conn.cursor(prepared=True)
    for v in ("a", "b", "c"):
        ps_ai.execute(f"INSERT INTO {ai} (v) VALUES (?)", (v,))
        lastrowid = ps_ai.lastrowid
        ps_ai.execute("SELECT LAST_INSERT_ID()")
        (lid,) = ps_ai.fetchone()
        expect_eq(lastrowid, lid, f"prepared lastrowid vs LAST_INSERT_ID() for {v!r}")
        text.execute("SELECT LAST_INSERT_ID()")
        expect_eq(text.fetchone()[0], lid, f"text LAST_INSERT_ID() after prepared insert {v!r}")
        ids.append(lid)
    check(ids[0] >= 1000 and ids == list(range(ids[0], ids[0] + 3)), f"auto-increment ids {ids}")
    text.execute(f"INSERT INTO {ai} (v) VALUES ('text')")
    lastrowid = text.lastrowid
    text.execute("SELECT LAST_INSERT_ID()")
    expect_eq(text.fetchone()[0], lastrowid, "text lastrowid vs LAST_INSERT_ID()")
    out["lastrowid"] = ids + [lastrowid]

    # executemany with the text cursor (rewritten to one multi-row INSERT).
    text.executemany(
        f"INSERT INTO {ai} (v) VALUES (%s)", [(f"many{j}",) for j in range(10)]
    )
    expect_eq(text.rowcount, 10, "text executemany rowcount")
    ps_ai.execute(f"UPDATE {ai} SET v = CONCAT(v, '!') WHERE v LIKE ?", ("many%",))
    expect_eq(ps_ai.rowcount, 10, "prepared UPDATE rowcount")
    expect_eq(count_rows(text, ai), 14, "rows in the auto-increment table")

    # Duplicate key: IntegrityError 1062 / 23000, prepared and text, and the
    # connection stays usable.
    for label, cur, sql in (
        ("prepared", ps, insert),
        ("text", text, insert.replace("?", "%s")),
    ):
        try:
            cur.execute(sql, make_row(7))
        except mysql.connector.errors.IntegrityError as e:
            expect_eq(e.errno, 1062, f"{label} duplicate key errno")
            expect_eq(e.sqlstate, "23000", f"{label} duplicate key sqlstate")
            check("Duplicate entry" in e.msg, f"{label} duplicate key message: {e.msg!r}")
        else:
            raise Mismatch(f"{label} duplicate insert did not raise IntegrityError")
    ps.execute(select, (7, 7))
    compare_rows(ps.fetchall(), 7, 7, "prepared select after errors")
    out["duplicate_key"] = {"errno": 1062, "sqlstate": "23000"}
    note_backend(text)

    # Warnings of a prepared statement, fetched by the driver itself
    # (get_warnings: it sends SHOW WARNINGS after the result).
    conn.get_warnings = True
    wcur = conn.cursor(prepared=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        wcur.execute("SELECT CAST(? AS SIGNED), CAST(? AS SIGNED)", ("12abc", "7x"))
        expect_eq(wcur.fetchall(), [(12, 7)], "prepared CAST result")
    expect_eq(wcur.warning_count, 2, "prepared CAST warning_count")
    expect_eq(
        [tuple(w) for w in wcur.warnings or []],
        [
            ("Warning", 1292, "Truncated incorrect INTEGER value: '12abc'"),
            ("Warning", 1292, "Truncated incorrect INTEGER value: '7x'"),
        ],
        "prepared CAST warnings fetched by the driver",
    )
    conn.get_warnings = False
    wcur.close()
    out["prepared_warnings"] = 2

    ps.close()
    ps_ai.close()
    text.close()
    conn.close()
    return out


# --------------------------------------------------------------------------
# PyMySQL: text protocol
# --------------------------------------------------------------------------


def pymysql_part(args, table, ai):
    host, port, user, password, db = args
    out = {}
    conn = pymysql.connect(
        host=host,
        port=int(port),
        user=user,
        password=password,
        database=db,
        charset="utf8mb4",
        autocommit=True,
        client_flag=CLIENT.MULTI_STATEMENTS,
        connect_timeout=30,
    )
    cur = conn.cursor()

    # The same reads, values interpolated client-side.
    select = f"SELECT {COLUMNS} FROM {table} WHERE id BETWEEN %s AND %s ORDER BY id"
    expect_eq(cur.execute(select, (1, N_ROWS)), N_ROWS, "pymysql select all rowcount")
    compare_rows(cur.fetchall(), 1, N_ROWS, "pymysql select all")
    cur.execute(select, (40, 60))
    compare_rows(cur.fetchall(), 40, 60, "pymysql select 40..60")
    # The connector's transactions are seen from another connection.
    cur.execute(f"SELECT id FROM {table} WHERE id > 1000 ORDER BY id")
    expect_eq([r[0] for r in cur.fetchall()], [1002, 1004, 1005], "committed rows")

    # Multi-statement: two result sets.
    cur.execute(f"SELECT COUNT(*) FROM {table} WHERE id <= %s; SELECT s, b FROM {table} WHERE id = 7", (N_ROWS,))
    expect_eq(cur.fetchall(), ((N_ROWS,),), "multi-statement first result")
    check(cur.nextset(), "multi-statement: nextset() found no second result")
    want = make_row(7)
    expect_eq(cur.fetchall(), ((want[2], want[6]),), "multi-statement second result")
    check(not cur.nextset(), "multi-statement: a third result set")
    # The connection is in a clean state afterwards.
    cur.execute("SELECT 1")
    expect_eq(cur.fetchall(), ((1,),), "SELECT 1 after multi-statement")
    out["multi_statement_results"] = 2
    note_backend(cur)

    # Warnings: CAST of a half-numeric string warns 1292.
    cur.execute("SELECT CAST('12abc' AS SIGNED), CAST('7x' AS SIGNED)")
    expect_eq(cur.fetchall(), ((12, 7),), "CAST result")
    expect_eq(cur._result.warning_count, 2, "warning_count of the CAST statement")
    cur.execute("SHOW WARNINGS")
    shown = cur.fetchall()
    expect_eq(len(shown), 2, f"SHOW WARNINGS rows {shown!r}")
    expect_eq([w[1] for w in shown], [1292, 1292], f"warning codes {shown!r}")
    check("12abc" in shown[0][2], f"first warning text {shown[0]!r}")
    cur.execute("SHOW COUNT(*) WARNINGS")
    expect_eq(cur.fetchall(), ((2,),), "SHOW COUNT(*) WARNINGS")
    out["warnings"] = [list(w) for w in shown]

    # Duplicate key through PyMySQL.
    try:
        cur.execute(f"INSERT INTO {table} (id) VALUES (7)")
    except pymysql.err.IntegrityError as e:
        expect_eq(e.args[0], 1062, "pymysql duplicate key errno")
    else:
        raise Mismatch("pymysql duplicate insert did not raise IntegrityError")

    # A PyMySQL transaction (autocommit off): rollback and commit.
    conn.autocommit(False)
    cur.execute(f"INSERT INTO {ai} (v) VALUES ('pymysql-rollback')")
    conn.rollback()
    cur.execute(f"INSERT INTO {ai} (v) VALUES ('pymysql-commit')")
    lastrowid = cur.lastrowid
    conn.commit()
    conn.autocommit(True)
    cur.execute(f"SELECT id, v FROM {ai} WHERE v LIKE 'pymysql%%'")
    expect_eq(cur.fetchall(), ((lastrowid, "pymysql-commit"),), "pymysql transaction rows")

    # COM_PING, without the silent reconnect.
    conn.ping(reconnect=False)
    cur.execute("SELECT 2")
    expect_eq(cur.fetchall(), ((2,),), "SELECT after ping")
    out["ping"] = True
    note_backend(cur)

    cur.execute(f"DROP TABLE {table}, {ai}")
    cur.close()
    conn.close()
    return out


def main():
    if len(sys.argv) != 7:
        print(f"usage: {sys.argv[0]} HOST PORT USER PASSWORD DB SUFFIX", file=sys.stderr)
        return 2
    args = tuple(sys.argv[1:6])
    suffix = sys.argv[6]
    check(suffix.isidentifier() or suffix.isalnum(), f"bad suffix {suffix!r}")
    table = f"pydrv_{suffix}"
    ai = f"pydrv_{suffix}_ai"
    summary = {
        "suffix": suffix,
        "mysql_connector": {"version": md.version("mysql-connector-python")},
        "pymysql": {"version": md.version("PyMySQL")},
    }
    try:
        summary["mysql_connector"].update(connector_part(args, table, ai))
        summary["pymysql"].update(pymysql_part(args, table, ai))
    except Exception as e:
        traceback.print_exc()
        detail = ""
        if isinstance(e, mysql.connector.errors.Error):
            detail = f" (errno {e.errno}, sqlstate {e.sqlstate})"
        elif isinstance(e, pymysql.err.MySQLError) and e.args:
            detail = f" (errno {e.args[0]})"
        print(
            f"driver_check FAILED [{suffix}]: {type(e).__name__}: {e}{detail}",
            file=sys.stderr,
        )
        return 1
    summary["backend_ids"] = sorted(BACKEND_IDS)
    summary["ok"] = True
    print(json.dumps(summary, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
