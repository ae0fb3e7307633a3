#!/usr/bin/env python3
"""Client-matrix scenario for the Python drivers. Run by tests/client_matrix.rs
once against MariaDB directly and once through myplex; the two outputs must be
identical byte for byte.

Usage: scenario.py VARIANT
  pymysql          PyMySQL defaults: text protocol, no CLIENT_MULTI_STATEMENTS,
                   no CLIENT_FOUND_ROWS, no DEPRECATE_EOF
  pymysql_multi    PyMySQL with CLIENT_MULTI_STATEMENTS | CLIENT_FOUND_ROWS
  connector        mysql-connector-python, pure Python, its defaults (against a
                   "5.5.5-" server it picks utf8mb4_general_ci, not 255), with
                   server-side prepared statements for the prepared part
  connector_nomulti  the same without CLIENT_MULTI_STATEMENTS
  connector_cext   mysql-connector-python's C extension (libmysqlclient 9: sends
                   collation 255 utf8mb4_0900_ai_ci in the handshake); the harness
                   puts the wheel's vendored OpenSSL on LD_LIBRARY_PATH
  mariadb          the `mariadb` package (MariaDB Connector/Python on libmariadb),
                   binary protocol for the prepared part and callproc
Connection from the environment: CM_HOST CM_PORT CM_USER CM_PASSWORD CM_DB.
"""

import importlib.metadata
import os
import sys
import warnings

VARIANT = sys.argv[1] if len(sys.argv) > 1 else "pymysql"
HOST = os.environ["CM_HOST"]
PORT = int(os.environ["CM_PORT"])
USER = os.environ["CM_USER"]
PASSWORD = os.environ["CM_PASSWORD"]
DB = os.environ["CM_DB"]

# Drivers report server warnings as Python warnings too; they are printed
# from the API below instead.
warnings.simplefilter("ignore")


def out(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def val(v):
    if v is None:
        return "NULL"
    if isinstance(v, (bytes, bytearray)):
        return f"{type(v).__name__}:{bytes(v)!r}"
    if isinstance(v, str):
        return "str:" + ascii(v)
    return f"{type(v).__name__}:{v!r}"


def err_line(e):
    args = getattr(e, "args", ())
    errno = getattr(e, "errno", None)
    sqlstate = getattr(e, "sqlstate", None)
    msg = getattr(e, "msg", None)
    return (
        f"  error {type(e).__module__}.{type(e).__name__} errno={errno!r} "
        f"sqlstate={sqlstate!r} msg={ascii(msg)} args={ascii(args)}"
    )


class Driver:
    """What every driver adapter provides."""

    name = "?"
    # Whether the driver can decode latin1 result values (the mariadb package
    # only speaks UTF-8: it fails on them, and has crashed after that).
    decodes_latin1 = True

    def cursor(self, prepared=False):
        raise NotImplementedError

    def warnings_of(self, cur):
        return None

    def set_latin1(self):
        """Switch the connection (and the driver's encoding if it has one) to latin1."""
        raise NotImplementedError

    def set_back(self):
        raise NotImplementedError

    def call(self, cur, proc, args):
        raise NotImplementedError

    def nextset(self, cur):
        return cur.nextset()


class PyMySQL(Driver):
    def __init__(self, multi):
        import pymysql
        from pymysql.constants import CLIENT

        self.m = pymysql
        flags = CLIENT.MULTI_STATEMENTS | CLIENT.FOUND_ROWS if multi else 0
        self.conn = pymysql.connect(
            host=HOST, port=PORT, user=USER, password=PASSWORD, database=DB,
            charset="utf8mb4", client_flag=flags, autocommit=True,
        )
        self.name = "PyMySQL " + importlib.metadata.version("PyMySQL")
        out(f"server_info: {self.conn.get_server_info()}")
        out(f"server_charset: {self.conn.server_charset!r}")
        out(f"encoding: {self.conn.encoding}")

    def cursor(self, prepared=False):
        return self.conn.cursor()

    def warnings_of(self, cur):
        r = getattr(cur, "_result", None)
        return None if r is None else r.warning_count

    def set_latin1(self):
        self.conn.set_character_set("latin1")
        out(f"  encoding: {self.conn.encoding}")

    def set_back(self):
        self.conn.set_character_set("utf8mb4")

    def call(self, cur, proc, args):
        return cur.callproc(proc, args)


class Connector(Driver):
    def __init__(self, pure, multi=True):
        import mysql.connector
        from mysql.connector.constants import ClientFlag

        self.m = mysql.connector
        kwargs = dict(
            host=HOST, port=PORT, user=USER, password=PASSWORD, database=DB,
            use_pure=pure, autocommit=True, get_warnings=True, ssl_disabled=True,
        )
        if not multi:
            kwargs["client_flags"] = [-ClientFlag.MULTI_STATEMENTS]
        self.conn = mysql.connector.connect(**kwargs)
        self.name = (
            f"mysql-connector-python {importlib.metadata.version('mysql-connector-python')} "
            f"{type(self.conn).__name__}"
        )
        out(f"server_info: {self.conn.server_info}")
        out(f"server_version: {self.conn.server_version}")
        out(f"charset: {self.conn.charset} collation: {self.conn.collation}")

    def cursor(self, prepared=False):
        return self.conn.cursor(prepared=prepared)

    def warnings_of(self, cur):
        w = cur.warnings
        return f"{cur.warning_count} {w!r}"

    def set_latin1(self):
        self.conn.set_charset_collation("latin1")
        out(f"  charset: {self.conn.charset} collation: {self.conn.collation}")

    def set_back(self):
        self.conn.set_charset_collation("utf8mb4")

    def call(self, cur, proc, args):
        res = cur.callproc(proc, args)
        for i, r in enumerate(cur.stored_results()):
            out(f"  stored result {i}")
            out(f"  description {r.description!r}")
            for row in r.fetchall():
                out("  row " + " | ".join(val(v) for v in row))
        return res


class MariaDB(Driver):
    decodes_latin1 = False

    def __init__(self):
        import mariadb

        self.m = mariadb
        self.conn = mariadb.connect(
            host=HOST, port=PORT, user=USER, password=PASSWORD, database=DB,
            autocommit=True,
        )
        self.name = f"mariadb {mariadb.__version__} (libmariadb {mariadb.client_version_info})"
        out(f"server_info: {self.conn.server_info}")
        out(f"server_version: {self.conn.server_version}")
        out(f"character_set: {self.conn.character_set} collation: {self.conn.collation}")

    def cursor(self, prepared=False):
        return self.conn.cursor(binary=True, prepared=True) if prepared else self.conn.cursor()

    def warnings_of(self, cur):
        return cur.warnings

    def set_latin1(self):
        # The driver always speaks utf8mb4: the statement bytes stay UTF-8.
        c = self.conn.cursor()
        c.execute("SET NAMES latin1")
        c.close()

    def set_back(self):
        c = self.conn.cursor()
        c.execute("SET NAMES utf8mb4")
        c.close()

    def call(self, cur, proc, args):
        cur.callproc(proc, args)
        return None


def make_driver():
    if VARIANT == "pymysql":
        return PyMySQL(multi=False)
    if VARIANT == "pymysql_multi":
        return PyMySQL(multi=True)
    if VARIANT == "connector":
        return Connector(pure=True)
    if VARIANT == "connector_nomulti":
        return Connector(pure=True, multi=False)
    if VARIANT == "connector_cext":
        return Connector(pure=False)
    if VARIANT == "mariadb":
        return MariaDB()
    sys.exit(f"unknown variant {VARIANT}")


def show_cursor(drv, cur):
    """Every result set left on the cursor, with its metadata and status."""
    i = 0
    while True:
        out(f"  result {i}")
        if cur.description:
            out(f"  description {cur.description!r}")
            try:
                for row in cur.fetchall():
                    out("  row " + " | ".join(val(v) for v in row))
            except Exception as e:  # noqa: BLE001 -- e.g. latin1 bytes a driver cannot decode
                out("  fetchall" + err_line(e)[1:])
                break
        out(f"  rowcount={cur.rowcount} lastrowid={cur.lastrowid!r} warnings={drv.warnings_of(cur)!r}")
        try:
            more = drv.nextset(cur)
        except Exception as e:  # noqa: BLE001 -- every driver has its own classes
            out("  nextset" + err_line(e)[1:])
            break
        if not more:
            break
        i += 1


def q(drv, sql, params=None, prepared=False):
    out(("execute prepared: " if prepared else "execute: ") + ascii(sql)
        + ("" if params is None else f" params={params!r}"))
    cur = drv.cursor(prepared=prepared)
    try:
        if params is None:
            cur.execute(sql)
        else:
            cur.execute(sql, params)
    except Exception as e:  # noqa: BLE001
        out(err_line(e))
        try:
            cur.close()
        except Exception as e2:  # noqa: BLE001
            out("  close" + err_line(e2)[1:])
        return
    show_cursor(drv, cur)
    cur.close()


def main():
    out(f"variant: {VARIANT}")
    try:
        drv = make_driver()
    except Exception as e:  # noqa: BLE001
        out("connect" + err_line(e))
        return
    out(f"driver: {drv.name}")
    ph = "?" if VARIANT == "mariadb" else "%s"

    q(drv, "SELECT CONNECTION_ID() > 0 AS has_id")
    q(drv, "SELECT @@character_set_client, @@character_set_connection, @@character_set_results, "
           "@@collation_connection, @@autocommit, @@sql_mode")
    q(drv, "SHOW SESSION STATUS LIKE 'Compression'")

    q(drv, "DROP TABLE IF EXISTS t")
    q(drv, "CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, n INT, vl VARCHAR(20) CHARACTER SET latin1, "
           "vu VARCHAR(20) CHARACTER SET utf8mb4, d DECIMAL(10,3), dt DATETIME(6), b BLOB, j JSON)")
    q(drv, "INSERT INTO t (n, vl, vu, d, dt, b, j) VALUES (1, 'caf\u00e9', 'na\u00efve \U0001F600', 12.345, "
           "'2024-02-29 13:14:15.123456', X'00FF10', '{\"a\": [1, 2.5, \"x\"], \"b\": null}'), "
           "(NULL, NULL, NULL, NULL, NULL, NULL, NULL)")
    q(drv, "SELECT LAST_INSERT_ID()")
    q(drv, "SELECT * FROM t ORDER BY id")

    q(drv, "UPDATE t SET n = n WHERE id = 1")
    q(drv, "UPDATE t SET n = 1 WHERE id IN (1, 2)")

    q(drv, "SELECT * FROM nosuch")
    q(drv, "SELECT CAST('x' AS INT) AS c")
    q(drv, "SHOW WARNINGS")

    # Parameters: the binary protocol where the driver has it (connector,
    # mariadb), client-side interpolation otherwise (PyMySQL).
    sel = f"SELECT id, n, vl, vu, d, dt, b, j FROM t WHERE id = {ph}"
    q(drv, sel, (1,), prepared=True)
    q(drv, sel, (2,), prepared=True)
    ins = f"INSERT INTO t (n, vu, d) VALUES ({ph}, {ph}, {ph})"
    q(drv, ins, (7, "seven", "7.5"), prepared=True)
    q(drv, ins, (8, None, None), prepared=True)
    q(drv, "SELECT LAST_INSERT_ID()")

    # Transactions: through the API, then through SQL.
    drv.conn.begin() if hasattr(drv.conn, "begin") else drv.conn.start_transaction()
    out("begin")
    q(drv, "INSERT INTO t (n) VALUES (100)")
    drv.conn.commit()
    out("commit")
    q(drv, "START TRANSACTION")
    q(drv, "INSERT INTO t (n) VALUES (200)")
    q(drv, "ROLLBACK")
    q(drv, "SELECT id, n FROM t WHERE n >= 100 ORDER BY id")

    q(drv, "DROP PROCEDURE IF EXISTS p")
    q(drv, "CREATE PROCEDURE p(IN a INT, OUT b INT) BEGIN SELECT a AS first; "
           "SELECT a + 1 AS second, 'x' AS s; SET b = a * 10; END")
    q(drv, "CALL p(4, @o)")
    q(drv, "SELECT @o")
    for a in (5, 6):
        out(f"callproc: p({a}, 0)")
        cur = drv.cursor()
        try:
            res = drv.call(cur, "p", (a, 0))
            out(f"  returned {res!r}")
            show_cursor(drv, cur)
        except Exception as e:  # noqa: BLE001
            out(err_line(e))
        cur.close()

    out("set latin1")
    try:
        drv.set_latin1()
    except Exception as e:  # noqa: BLE001
        out(err_line(e))
    if drv.decodes_latin1:
        q(drv, "SELECT 'caf\u00e9' AS s, HEX('caf\u00e9') AS h, vl, HEX(vl) FROM t WHERE id = 1")
    else:
        q(drv, "SELECT HEX('caf\u00e9') AS h, HEX(vl) FROM t WHERE id = 1")
    q(drv, "SELECT @@character_set_client, @@collation_connection")
    drv.set_back()
    out("set back")

    q(drv, "SELECT 1 AS a; SELECT 2 AS b")
    q(drv, "SELECT 1 AS a; SELECT * FROM nosuch; SELECT 3 AS c")
    q(drv, "SELECT CONNECTION_ID() > 0 AS has_id")
    drv.conn.close()
    out("done")


if __name__ == "__main__":
    main()
