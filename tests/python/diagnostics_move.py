#!/usr/bin/env python3
"""Diagnostics statements must describe the client's previous statement
even when the backend that ran it is busy serving someone else.

Usage: diagnostics_move.py HOST PORT USER PASSWORD DB

Each case uses two new PyMySQL connections, A and B (autocommit on). A runs
a statement that raises warnings (or an error) and reports the server
thread it ran on (@@pseudo_thread_id); B then opens a transaction and, when
B lands on that same server thread (retried a few times; behind a pooling
proxy B usually gets the backend A just released), keeps it while A runs
the case's diagnostics statement D, so D cannot run where the diagnostics
are. Against a plain server A and B are different threads anyway; the
expected answers are the same either way.

Checks every D, prints one JSON line with the results, and exits 1 listing
all mismatches when any answer differs from what MariaDB itself gives.
"""

import json
import sys
import traceback

import pymysql
from pymysql.constants import CLIENT

ATTEMPTS = 30


def warn_sql(tag, n):
    """n warnings whose texts name `tag`, then the thread id."""
    casts = ", ".join(f"CAST('{k}{tag}' AS SIGNED)" for k in range(1, n + 1))
    return f"SELECT {casts}, @@pseudo_thread_id"


def warnings_of(tag, n):
    return tuple(
        ("Warning", 1292, f"Truncated incorrect INTEGER value: '{k}{tag}'")
        for k in range(1, n + 1)
    )


def err_sql(tag):
    return f"SELECT * FROM no_such_table_{tag}"


def error_of(tag):
    return ("Error", 1146, f"Table 'test.no_such_table_{tag}' doesn't exist")


# (name, number of warnings to raise (0: raise an error instead),
# diagnostics statements run in order, expected rows of the last one given
# the case's tag). Each case has its own tag and warning count, so stale
# diagnostics of another case (or client) cannot pass for the right ones.
CASES = [
    ("SHOW WARNINGS", 2, ["SHOW WARNINGS"], lambda t: warnings_of(t, 2)),
    ("SHOW COUNT(*) WARNINGS", 3, ["SHOW COUNT(*) WARNINGS"], lambda t: ((3,),)),
    ("SELECT @@warning_count", 4, ["SELECT @@warning_count"], lambda t: ((4,),)),
    (
        "SHOW WARNINGS LIMIT 1,1",
        5,
        ["SHOW WARNINGS LIMIT 1,1"],
        lambda t: warnings_of(t, 5)[1:2],
    ),
    ("SHOW ERRORS after warnings", 6, ["SHOW ERRORS"], lambda t: ()),
    (
        "GET DIAGNOSTICS after warnings",
        7,
        ["GET DIAGNOSTICS CONDITION 2 @m = MESSAGE_TEXT", "SELECT @m"],
        lambda t: ((warnings_of(t, 7)[1][2],),),
    ),
    ("SELECT @@error_count after an error", 0, ["SELECT @@error_count"], lambda t: ((1,),)),
    ("SHOW WARNINGS after an error", 0, ["SHOW WARNINGS"], lambda t: (error_of(t),)),
    ("SHOW ERRORS after an error", 0, ["SHOW ERRORS"], lambda t: (error_of(t),)),
]


def connect(args):
    host, port, user, password, db = args
    return pymysql.connect(
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


def thread_id(cur):
    cur.execute("SELECT @@pseudo_thread_id")
    return int(cur.fetchone()[0])


def raise_diagnostics(ca, n, tag):
    """Raises the case's n warnings (or an error when n is 0) on A; returns
    the server thread it ran on."""
    if n:
        sql = warn_sql(tag, n)
        ca.execute(sql)
        rows = ca.fetchall()
        if rows[0][:n] != tuple(range(1, n + 1)):
            raise AssertionError(f"{sql}: got {rows!r}")
        return int(rows[0][n])
    # An error: a multi-statement reports the thread, then fails there.
    sql = err_sql(tag)
    ca.execute(f"SELECT @@pseudo_thread_id; {sql}")
    tid = int(ca.fetchone()[0])
    try:
        ca.nextset()
    except pymysql.err.ProgrammingError as e:
        if e.args[0] != 1146:
            raise
    else:
        raise AssertionError(f"{sql} did not fail")
    return tid


def main():
    if len(sys.argv) != 6:
        print(f"usage: {sys.argv[0]} HOST PORT USER PASSWORD DB", file=sys.stderr)
        return 2
    args = tuple(sys.argv[1:6])
    results = []
    mismatches = []
    try:
        for i, (name, n, diag, want) in enumerate(CASES):
            tag = f"diag{i}x"
            want = want(tag)
            # Fresh connections per case: a case may leave A pinned (GET
            # DIAGNOSTICS sets a user variable).
            a, b = connect(args), connect(args)
            ca, cb = a.cursor(), b.cursor()
            held = False
            for _ in range(ATTEMPTS):
                tid = raise_diagnostics(ca, n, tag)
                cb.execute("BEGIN")
                held = thread_id(cb) == tid
                if held:
                    break
                cb.execute("COMMIT")
            if not held:
                # Re-raise so the diagnostics belong to the last statement.
                tid = raise_diagnostics(ca, n, tag)
            for sql in diag:
                ca.execute(sql)
            got = ca.fetchall()
            if held:
                cb.execute("COMMIT")
            a.close()
            b.close()
            results.append({"case": name, "backend_held_by_other": held, "rows": got})
            if got != want:
                mismatches.append(
                    f"{name}: got {got!r}, want {want!r} "
                    f"(A's statement ran on thread {tid}, "
                    f"{'held by B meanwhile' if held else 'not held by B'})"
                )
    except Exception as e:
        traceback.print_exc()
        print(f"diagnostics_move FAILED: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    if mismatches:
        print(json.dumps({"ok": False, "results": results}, default=str))
        print(
            "diagnostics_move FAILED: diagnostics differ from the server's:\n  "
            + "\n  ".join(mismatches),
            file=sys.stderr,
        )
        return 1
    print(json.dumps({"ok": True, "results": results}, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
