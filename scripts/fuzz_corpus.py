#!/usr/bin/env python3
"""Seed corpus for the fuzz targets (fuzz/fuzz_targets/*.rs) from captured
real traffic. Run by scripts/fuzz-corpus.sh, which starts the MariaDB.

A recording TCP relay sits between real clients and the server; each
connection's bytes are kept in arrival order per direction. The streams are
then cut into packets (inflating compressed connections after the login)
and written as seeds in each target's input layout (documented at the top
of every target, helpers in fuzz/src/lib.rs):

  framing          mode u8 | max u8 | raw bytes of one direction
  compress         split u16 | raw compressed frames
  handshake        0 | client handshake response   /   1 | server greeting
  change_user      client caps u32 | COM_CHANGE_USER payload
  stmt_execute     num_params u16 | backend id u32 | COM_STMT_(BULK_)EXECUTE
  server_response  shape u8 | style u8 | packet... (u16 length prefix)
  sql              mode u8 | COM_QUERY / COM_STMT_PREPARE text

Plus statements from MariaDB's test cases for `sql`. Seeds are named by
their SHA-1 (libFuzzer's convention), so re-runs deduplicate.
"""

import argparse
import hashlib
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import threading

MAX_SEED = 4096
CLIENT_COMPRESS = 0x20
CLIENT_DEPRECATE_EOF = 0x01000000

SHAPE = {0x03: 0, 0x17: 0, 0xFA: 0, 0x16: 1, 0x04: 2, 0x1C: 3, 0x09: 4, 0x1B: 0}


class Relay:
    """Accepts clients on a local port and records each connection."""

    def __init__(self, server_port):
        self.server_port = server_port
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.conns = []
        self.lock = threading.Lock()
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            s = socket.create_connection(("127.0.0.1", self.server_port))
            log = []
            with self.lock:
                self.conns.append(log)
            for src, dst, d in ((c, s, "c"), (s, c, "s")):
                threading.Thread(target=self.pump, args=(src, dst, d, log), daemon=True).start()

    def pump(self, src, dst, direction, log):
        while True:
            try:
                b = src.recv(65536)
            except OSError:
                b = b""
            if not b:
                try:
                    dst.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                return
            with self.lock:
                log.append((direction, b))
            try:
                dst.sendall(b)
            except OSError:
                return


def packets(buf):
    """Plain packets in buf: (seq, payload), reassembling 0xFFFFFF chunks."""
    out, off, payload, first = [], 0, b"", None
    while len(buf) - off >= 4:
        n = buf[off] | buf[off + 1] << 8 | buf[off + 2] << 16
        if len(buf) - off - 4 < n:
            break
        seq = buf[off + 3]
        payload += buf[off + 4 : off + 4 + n]
        first = seq if first is None else first
        off += 4 + n
        if n < 0xFFFFFF:
            out.append((first, payload))
            payload, first = b"", None
    return out, off


class Seeds:
    def __init__(self, root):
        self.root = root
        self.count = {}

    def add(self, target, data):
        data = bytes(data[:MAX_SEED])
        d = os.path.join(self.root, target)
        os.makedirs(d, exist_ok=True)
        p = os.path.join(d, hashlib.sha1(data).hexdigest())
        if not os.path.exists(p):
            with open(p, "wb") as f:
                f.write(data)
            self.count[target] = self.count.get(target, 0) + 1


def arrivals(log, direction):
    """Plain packets of one direction: (log index of arrival, seq, payload,
    end offset in the direction's byte stream)."""
    out, buf, done = [], b"", 0
    for i, (d, b) in enumerate(log):
        if d != direction:
            continue
        buf += b
        pk, used = packets(buf[done:])
        end = done
        for seq, payload in pk:
            end += 4 * (1 + len(payload) // 0xFFFFFF) + len(payload)
            out.append((i, seq, payload, end))
        done += used
    return out


def split_connection(log, seeds):
    """Cuts one recorded connection into seeds for every target."""
    raw = {d: b"".join(b for d2, b in log if d2 == d) for d in ("c", "s")}
    pk = {d: arrivals(log, d) for d in ("c", "s")}
    if not pk["s"] or not pk["c"]:
        return
    greeting, response = pk["s"][0][2], pk["c"][0][2]
    caps = struct.unpack_from("<I", response)[0] if len(response) >= 4 else 0
    seeds.add("handshake", b"\x01" + greeting)
    seeds.add("handshake", b"\x00" + response)
    # The login ends with the server's OK or ERR after the client's response.
    ok = next((p for p in pk["s"][1:] if p[2][:1] in (b"\x00", b"\xff")), None)
    if ok is None:
        return
    login = {"s": ok[3], "c": max(p[3] for p in pk["c"] if p[0] < ok[0])}
    style = 1 if caps & CLIENT_DEPRECATE_EOF else 0
    if caps & CLIENT_COMPRESS:
        # Frames from here on (commands are seeded from plain connections).
        for d in ("c", "s"):
            frames = raw[d][login[d] :]
            seeds.add("compress", struct.pack("<H", len(frames) // 2) + frames)
            seeds.add("framing", b"\x01\x18" + frames)
        return
    for d in ("c", "s"):
        seeds.add("framing", b"\x00\x18" + raw[d])
        seeds.add("framing", b"\x02\x0c" + raw[d][login[d] :])

    events = sorted(
        [(p[0], j, d, p[1], p[2]) for d in ("c", "s") for j, p in enumerate(pk[d]) if p[3] > login[d]]
    )
    params = {}
    cmd, answer = None, []

    def flush():
        if cmd is None or cmd[0] not in SHAPE:
            return
        cursor = 2 if cmd[0] == 0x17 and len(cmd) > 5 and cmd[5] & 1 else 0
        seed = bytes([SHAPE[cmd[0]], style | cursor])
        for p in answer:
            seed += struct.pack("<H", min(len(p), 0x7FFF)) + p[:0x7FFF]
        seeds.add("server_response", seed)
        # The same answer read in the other terminator style.
        seeds.add("server_response", bytes([seed[0], seed[1] ^ 1]) + seed[2:])
        if cmd[0] == 0x16 and answer and answer[0][:1] == b"\x00" and len(answer[0]) >= 9:
            stmt, _cols, nparams = struct.unpack_from("<IHH", answer[0], 1)
            params[stmt] = nparams

    for _i, _j, d, seq, payload in events:
        if d == "c" and seq == 0 and payload:
            flush()
            cmd, answer = payload, []
            c = payload[0]
            if c in (0x03, 0x16):
                seeds.add("sql", b"\x00" + payload[1:])
            elif c == 0x11:
                seeds.add("change_user", struct.pack("<I", caps) + payload)
            elif c in (0x17, 0xFA) and len(payload) >= 5:
                stmt = struct.unpack_from("<I", payload, 1)[0]
                seeds.add("stmt_execute", struct.pack("<HI", params.get(stmt, 0), 7) + payload)
        elif d == "s" and cmd is not None:
            answer.append(payload)
    flush()


def run_clients(port, repo):
    """Real clients through the relay: each does what applications do."""
    py = os.path.join(repo, "target", "pyenv", "bin", "python")
    script = r"""
CREATE TABLE IF NOT EXISTS t (id INT PRIMARY KEY AUTO_INCREMENT, s VARCHAR(40), d DATETIME(3),
  f DOUBLE, b BLOB, j JSON, e ENUM('a','b'), n DECIMAL(10,3));
INSERT INTO t (s, d, f, b, j, e, n) VALUES ('x', NOW(3), 1.5, 0x00ff, '{"a":1}', 'a', 3.14),
  (NULL, '2020-01-01', -1e300, '', '[]', 'b', -0.001);
SELECT * FROM t; SELECT 1, 'two', NULL, 3.0, x'4142', @@version;
SET @x := 5, @y = 'abc'; SELECT @x, @y;
SET NAMES utf8mb4; SET SESSION sql_mode = 'ANSI_QUOTES'; SELECT "t".id FROM t LIMIT 1;
SET sql_mode = DEFAULT; SET autocommit = 0; BEGIN; UPDATE t SET f = f + 1; COMMIT;
SELECT CONNECTION_ID(); SELECT SQL_CALC_FOUND_ROWS id FROM t LIMIT 1; SELECT FOUND_ROWS();
PREPARE p FROM 'SELECT ? + 1'; SET @a = 41; EXECUTE p USING @a; DEALLOCATE PREPARE p;
CREATE TEMPORARY TABLE tmp (a INT); INSERT INTO tmp VALUES (1); DROP TEMPORARY TABLE tmp;
SELECT GET_LOCK('l', 0); SELECT RELEASE_LOCK('l');
DROP PROCEDURE IF EXISTS pr; CREATE PROCEDURE pr() BEGIN SELECT 1; SELECT 2, 'x'; END;
CALL pr(); SELECT /*! 1 + */ 1; SELECT /*M!100000 2 */ 3; SHOW WARNINGS;
SELECT * FROM no_such_table; SHOW VARIABLES LIKE 'session_track%';
USE test; SELECT REPEAT('z', 3000); SELECT 1 INTO @z;
"""
    cli = shutil.which("mariadb") or shutil.which("mysql")
    base = [cli, "--no-defaults", "-h127.0.0.1", f"-P{port}", "-uapp", "-psecret", "test"]
    for extra in ([], ["--compress"], ["--skip-ssl"]):
        subprocess.run(base + extra + ["--force", "-e", script], capture_output=True)
    subprocess.run(base + ["-e", "SELECT 1"], capture_output=True, env={**os.environ, "LANG": "C"})
    subprocess.run([cli, "--no-defaults", "-h127.0.0.1", f"-P{port}", "-uapp", "-pwrong", "-e", "SELECT 1"],
                   capture_output=True)

    drivers = r"""
import sys, datetime, decimal
port = int(sys.argv[1])

def pymysql_():
    import pymysql
    c = pymysql.connect(host="127.0.0.1", port=port, user="app", password="secret", database="test")
    cur = c.cursor()
    cur.execute("SELECT id, s, d, f, b, j FROM t WHERE id > %s", (0,))
    cur.fetchall()
    cur.executemany("INSERT INTO t (s, f) VALUES (%s, %s)", [("a'b", 1.0), ("c\\d", None)])
    c.commit()
    c.ping()
    c.select_db("test")
    c.close()

def connector():
    import mysql.connector
    c = mysql.connector.connect(host="127.0.0.1", port=port, user="app", password="secret",
                                database="test", use_pure=True, ssl_disabled=True)
    cur = c.cursor(prepared=True)
    cur.execute("SELECT id, s FROM t WHERE id > ? AND s <> ?", (0, "zz"))
    cur.fetchall()
    cur.execute("INSERT INTO t (s, d, f, n) VALUES (?, ?, ?, ?)",
                ("p", datetime.datetime(2021, 5, 6, 7, 8, 9, 123000), 2.5, decimal.Decimal("1.25")))
    cur.execute("SELECT ?, ?, ?", (None, b"\x00\x01", 10**15))
    cur.fetchall()
    cur.close()
    c.cmd_statistics()
    c.cmd_change_user(username="app", password="secret", database="test")
    c.cmd_query("SELECT 1")
    c.get_rows()
    c.close()

def mariadb_():
    import mariadb
    import mariadb.constants
    c = mariadb.connect(host="127.0.0.1", port=port, user="app", password="secret", database="test")
    cur = c.cursor()
    cur.execute("SELECT id, s, d FROM t WHERE id > ?", (0,))
    cur.fetchall()
    cur.executemany("INSERT INTO t (s, f, d) VALUES (?, ?, ?)",
                    [("m1", 1.5, datetime.datetime(2022, 1, 2)), ("m2", None, None)])
    cur.close()
    cur = c.cursor(cursor_type=mariadb.constants.CURSOR.READ_ONLY, prefetch_size=2)
    cur.execute("SELECT id, s FROM t WHERE id > ?", (0,))
    cur.fetchall()
    cur.close()
    c.change_user("app", "secret", "test")
    c.reset()
    c.close()

for f in (pymysql_, connector, mariadb_):
    try:
        f()
    except Exception as e:
        print(f.__name__, "failed:", e, file=sys.stderr)
"""
    r = subprocess.run([py, "-c", drivers, str(port)], capture_output=True, text=True)
    sys.stderr.write(r.stderr)


def mysql_test_sql(root, seeds, limit=1500):
    """Statements from MariaDB's test cases (mysqltest files), favouring the
    ones that exercise the lexer: quotes, comments, variables, blocks."""
    interesting = re.compile(rb"['\"`#@\\]|/\*|--|\bBEGIN\b|\bDELIMITER\b|0x|[xXbBnN]'", re.I)
    found = []
    seen = set()
    for name in sorted(os.listdir(root)):
        if not name.endswith(".test"):
            continue
        with open(os.path.join(root, name), "rb") as f:
            text = f.read()
        delim = b";"
        stmt = b""
        for line in text.split(b"\n"):
            s = line.strip()
            if not stmt and (s.startswith(b"--") or s.startswith(b"#") or not s):
                continue
            if s.upper().startswith(b"DELIMITER "):
                delim = s[10:].strip() or b";"
                continue
            stmt += line + b"\n"
            if s.endswith(delim):
                sql = stmt.strip()[: -len(delim)].strip()
                stmt = b""
                if sql and sql not in seen and len(sql) <= MAX_SEED and interesting.search(sql):
                    seen.add(sql)
                    found.append(sql)
    step = max(1, len(found) // limit)
    for sql in found[::step][:limit]:
        seeds.add("sql", b"\x00" + sql)
    # The same texts lexed under ANSI_QUOTES / NO_BACKSLASH_ESCAPES.
    for sql in found[1::step * 10][: limit // 10]:
        seeds.add("sql", b"\x03" + sql)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--server-port", type=int, required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--mysql-test", default="/usr/share/mysql/mysql-test/main")
    a = ap.parse_args()
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

    relay = Relay(a.server_port)
    run_clients(relay.port, repo)
    import time

    time.sleep(1)
    shutil.rmtree(a.out, ignore_errors=True)
    seeds = Seeds(a.out)
    with relay.lock:
        conns = [list(c) for c in relay.conns]
    for log in conns:
        split_connection(log, seeds)
    if os.path.isdir(a.mysql_test):
        mysql_test_sql(a.mysql_test, seeds)
    for t in sorted(seeds.count):
        print(f"fuzz-corpus: {t}: {seeds.count[t]} seeds", file=sys.stderr)
    print(f"fuzz-corpus: {len(conns)} connections recorded", file=sys.stderr)


if __name__ == "__main__":
    main()
