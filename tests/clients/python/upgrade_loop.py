"""One client session kept open while myplex is upgraded (tests/takeover.rs).

Usage: upgrade_loop.py <pymysql|pymysql_tls|connector|mariadb>, with UL_HOST,
UL_PORT, UL_USER, UL_PASSWORD, UL_DB and UL_STOP (a file: the loop ends once it
exists). Sets a session variable, prepares a statement where the driver
prepares on the server, then loops: the connection id and the variable must
stay the same, the statement must answer. A plain-TCP session must never see
an error (it moves to the new process); the TLS variant reconnects when its
session is closed at a boundary, and counts it. Prints one line:
`ok statements=N reconnects=R`, or `error: ...` (exit 1).
"""

import os
import sys
import time

variant = sys.argv[1]
env = os.environ
host, port = env["UL_HOST"], int(env["UL_PORT"])
user, password, db, stop = env["UL_USER"], env["UL_PASSWORD"], env["UL_DB"], env["UL_STOP"]


def connect():
    if variant.startswith("pymysql"):
        import pymysql

        # PyMySQL takes TLS whenever the server offers it, unless told not to.
        ssl = {"ssl": {"check_hostname": False}} if variant == "pymysql_tls" else {"ssl_disabled": True}
        c = pymysql.connect(host=host, port=port, user=user, password=password, database=db, **ssl)
        return c, c.cursor(), None
    if variant == "connector":
        import mysql.connector

        c = mysql.connector.connect(
            host=host, port=port, user=user, password=password, database=db,
            ssl_disabled=True, use_pure=True,
        )
        return c, c.cursor(), c.cursor(prepared=True)
    if variant == "mariadb":
        import mariadb

        c = mariadb.connect(host=host, port=port, user=user, password=password, database=db)
        return c, c.cursor(), c.cursor(prepared=True)
    raise SystemExit(f"error: unknown variant {variant}")


def setup():
    c, cur, prep = connect()
    cur.execute("SET SESSION sql_mode = 'ANSI_QUOTES'")
    cur.execute("SELECT CONNECTION_ID()")
    (cid,) = cur.fetchone()
    cur.execute("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
    row = cur.fetchone()
    on_tls = bool(row and row[1])
    if on_tls != (variant == "pymysql_tls"):
        print(f"error: {variant} is {'' if on_tls else 'not '}on TLS ({row})")
        sys.exit(1)
    return c, cur, prep, cid


c, cur, prep, cid = setup()
n = reconnects = 0
while not os.path.exists(stop):
    try:
        cur.execute("SELECT CONNECTION_ID(), @@sql_mode")
        got = tuple(cur.fetchone())
        if got != (cid, "ANSI_QUOTES"):
            print(f"error: session state lost: {got} after {n} statements, expected ({cid}, 'ANSI_QUOTES')")
            sys.exit(1)
        if prep is not None:
            prep.execute("SELECT ? + 1", (n,))
            (v,) = prep.fetchone()
        else:
            cur.execute("SELECT %s + 1", (n,))
            (v,) = cur.fetchone()
        if int(v) != n + 1:
            print(f"error: wrong answer {v} for {n}")
            sys.exit(1)
        n += 1
    except SystemExit:
        raise
    except Exception as e:  # noqa: BLE001 - any driver error ends a plain session's test
        if variant != "pymysql_tls":
            print(f"error: {type(e).__name__}: {e} after {n} statements")
            sys.exit(1)
        reconnects += 1
        try:
            c.close()
        except Exception:  # noqa: BLE001
            pass
        c, cur, prep, cid = setup()
    time.sleep(0.01)
print(f"ok statements={n} reconnects={reconnects}")
