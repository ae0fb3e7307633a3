#!/usr/bin/env python3
"""Log in as a myplex admin with real Python drivers and run the console.

Usage: admin_console.py HOST PORT USER PASSWORD

Each driver connects with its defaults (PyMySQL sends SET NAMES and
SET AUTOCOMMIT = 0 after login; mysql-connector-python sends
SET NAMES ... COLLATE ... and SET @@session.autocommit = OFF), reads
@@version_comment and @@session.autocommit, and runs SHOW MYPLEX GROUPS.
Prints one JSON line with the seconds each driver took. Any error: prints
"admin_console FAILED: ..." with the traceback and exits 1.
"""

import json
import sys
import time
import traceback

import mysql.connector
import pymysql


def pymysql_run(host, port, user, password):
    c = pymysql.connect(host=host, port=port, user=user, password=password,
                        connect_timeout=30, read_timeout=30)
    cur = c.cursor()
    cur.execute("SELECT @@version_comment LIMIT 1")
    comment = cur.fetchone()[0]
    assert comment, "empty version_comment"
    cur.execute("SELECT @@session.autocommit")
    assert cur.fetchone()[0] == 0, "PyMySQL set autocommit off"
    cur.execute("SHOW MYPLEX GROUPS")
    rows = cur.fetchall()
    assert rows, "no groups"
    c.close()


def connector_run(host, port, user, password, pure):
    c = mysql.connector.connect(host=host, port=port, user=user, password=password,
                                use_pure=pure, connection_timeout=30)
    cur = c.cursor()
    cur.execute("SELECT @@version_comment LIMIT 1")
    assert cur.fetchone()[0], "empty version_comment"
    cur.execute("SHOW MYPLEX GROUPS")
    rows = cur.fetchall()
    assert rows, "no groups"
    cur.close()
    c.close()


def main():
    host, port, user, password = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    took = {}
    try:
        for name, f in [
            ("pymysql", lambda: pymysql_run(host, port, user, password)),
            ("connector_pure", lambda: connector_run(host, port, user, password, True)),
        ]:
            t0 = time.monotonic()
            f()
            took[name] = round(time.monotonic() - t0, 3)
    except Exception as e:  # noqa: BLE001 - report everything
        print(f"admin_console FAILED: {e!r} after {took}")
        traceback.print_exc()
        sys.exit(1)
    print(json.dumps({"ok": True, "seconds": took}))


if __name__ == "__main__":
    main()
