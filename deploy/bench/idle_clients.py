#!/usr/bin/env python3
"""Open N idle MySQL client connections and measure a process's RSS.

Stdlib only: raw TCP + the MySQL handshake with mysql_native_password. Each
connection logs in (HandshakeResponse41, optional auth switch) and then sends
nothing at all: a truly idle client. While all N are held, an optional shell
command runs (e.g. counting the backend's connections) and its output is kept.

    idle_clients.py --port 6033 --user app --password secret --db test \
        --count 10000 --pid <myplex pid> --out idle-myplex.json

The JSON result has VmRSS (KiB) of --pid before, every --step connections,
after all are held and settled, and after they are closed, plus KiB per idle
client = (rss_held - rss_before) / connected.
"""

import argparse
import hashlib
import json
import resource
import socket
import struct
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

CLIENT_LONG_PASSWORD = 0x1
CLIENT_LONG_FLAG = 0x4
CLIENT_CONNECT_WITH_DB = 0x8
CLIENT_PROTOCOL_41 = 0x200
CLIENT_TRANSACTIONS = 0x2000
CLIENT_SECURE_CONNECTION = 0x8000
CLIENT_MULTI_RESULTS = 0x20000
CLIENT_PLUGIN_AUTH = 0x80000


class LoginError(Exception):
    pass


def read_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise LoginError("connection closed by peer during login")
        buf += chunk
    return bytes(buf)


def read_packet(sock):
    header = read_exact(sock, 4)
    length = header[0] | (header[1] << 8) | (header[2] << 16)
    return header[3], read_exact(sock, length)


def write_packet(sock, seq, payload):
    sock.sendall(struct.pack("<I", len(payload))[:3] + bytes([seq & 0xFF]) + payload)


def native_scramble(password, nonce):
    if not password:
        return b""
    p1 = hashlib.sha1(password.encode()).digest()
    p2 = hashlib.sha1(p1).digest()
    p3 = hashlib.sha1(nonce + p2).digest()
    return bytes(a ^ b for a, b in zip(p1, p3))


def error_text(payload):
    code = struct.unpack_from("<H", payload, 1)[0]
    msg = payload[3:]
    if msg[:1] == b"#":
        msg = msg[6:]
    return f"error {code}: {msg.decode(errors='replace')}"


def login(host, port, user, password, db, timeout):
    sock = socket.create_connection((host, port), timeout=timeout)
    try:
        seq, greeting = read_packet(sock)
        if greeting[:1] == b"\xff":
            raise LoginError(error_text(greeting))
        if greeting[0] != 10:
            raise LoginError(f"unexpected protocol version {greeting[0]}")
        pos = greeting.index(b"\x00", 1) + 1  # server version
        pos += 4  # connection id
        nonce = greeting[pos:pos + 8]
        pos += 9  # auth data part 1 + filler
        caps = struct.unpack_from("<H", greeting, pos)[0]
        pos += 2
        plugin = b"mysql_native_password"
        if len(greeting) > pos:
            pos += 3  # charset, status
            caps |= struct.unpack_from("<H", greeting, pos)[0] << 16
            pos += 2
            auth_len = greeting[pos]
            pos += 11  # auth data length + reserved
            part2 = max(13, auth_len - 8)
            nonce += greeting[pos:pos + part2].rstrip(b"\x00")[:12]
            pos += part2
            if caps & CLIENT_PLUGIN_AUTH and pos < len(greeting):
                plugin = greeting[pos:].split(b"\x00", 1)[0]
        want = (CLIENT_LONG_PASSWORD | CLIENT_LONG_FLAG | CLIENT_PROTOCOL_41 | CLIENT_TRANSACTIONS
                | CLIENT_SECURE_CONNECTION | CLIENT_MULTI_RESULTS | CLIENT_PLUGIN_AUTH)
        if db:
            want |= CLIENT_CONNECT_WITH_DB
        flags = want & (caps | CLIENT_LONG_PASSWORD)
        auth = native_scramble(password, nonce[:20]) if plugin == b"mysql_native_password" else b""
        payload = struct.pack("<IIB", flags, 1 << 24, 33) + b"\x00" * 23
        payload += user.encode() + b"\x00" + bytes([len(auth)]) + auth
        if flags & CLIENT_CONNECT_WITH_DB:
            payload += db.encode() + b"\x00"
        if flags & CLIENT_PLUGIN_AUTH:
            payload += b"mysql_native_password\x00"
        write_packet(sock, seq + 1, payload)
        while True:
            seq, reply = read_packet(sock)
            if reply[:1] == b"\x00":
                break
            if reply[:1] == b"\xff":
                raise LoginError(error_text(reply))
            if reply[:1] == b"\xfe":  # auth switch request
                name, _, data = reply[1:].partition(b"\x00")
                if name != b"mysql_native_password":
                    raise LoginError(f"server asks for unsupported plugin {name.decode()}")
                write_packet(sock, seq + 1, native_scramble(password, data.rstrip(b"\x00")[:20]))
                continue
            raise LoginError(f"unexpected login reply 0x{reply[0]:02x}")
        sock.settimeout(None)
        return sock
    except BaseException:
        sock.close()
        raise


def rss_kib(pid):
    if not pid:
        return None
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--user", required=True)
    ap.add_argument("--password", default="")
    ap.add_argument("--db", default="")
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--concurrency", type=int, default=16, help="logins in flight at once")
    ap.add_argument("--pid", type=int, help="process whose VmRSS is measured")
    ap.add_argument("--label", default="", help="name of the measured process in the output")
    ap.add_argument("--step", type=int, default=1000, help="sample RSS every STEP connections")
    ap.add_argument("--settle", type=float, default=3.0, help="seconds to wait before the held sample")
    ap.add_argument("--while-holding", help="shell command to run while all clients are held")
    ap.add_argument("--timeout", type=float, default=30.0)
    ap.add_argument("--out", required=True, help="JSON result file")
    a = ap.parse_args()

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if a.count + 64 > hard:
        sys.exit(f"idle_clients: --count {a.count} needs more file descriptors than the hard limit {hard}")

    result = {"label": a.label, "count": a.count, "pid": a.pid}
    time.sleep(0.5)
    result["rss_before_kib"] = rss_kib(a.pid)
    socks, errors, samples = [], {}, []
    lock = threading.Lock()

    def one(_):
        try:
            s = login(a.host, a.port, a.user, a.password, a.db, a.timeout)
        except (OSError, LoginError) as e:
            with lock:
                key = str(e)
                errors[key] = errors.get(key, 0) + 1
            return
        with lock:
            socks.append(s)
            n = len(socks)
        if a.step and n % a.step == 0:
            samples.append([n, rss_kib(a.pid)])

    t0 = time.monotonic()
    with ThreadPoolExecutor(max_workers=max(1, a.concurrency)) as pool:
        list(pool.map(one, range(a.count)))
    result["login_seconds"] = round(time.monotonic() - t0, 2)
    result["connected"] = len(socks)
    result["failed"] = sum(errors.values())
    result["errors"] = errors
    time.sleep(a.settle)
    # Every held connection must still be open (the peer did not drop it).
    dropped = 0
    for s in socks:
        s.setblocking(False)
        try:
            if s.recv(1, socket.MSG_PEEK) == b"":
                dropped += 1
        except BlockingIOError:
            pass
        except OSError:
            dropped += 1
    result["dropped_while_held"] = dropped
    result["rss_held_kib"] = rss_kib(a.pid)
    result["rss_samples_kib"] = sorted(samples)
    if a.while_holding:
        p = subprocess.run(a.while_holding, shell=True, capture_output=True, text=True)
        result["while_holding_output"] = (p.stdout + p.stderr).strip()
    for s in socks:
        s.close()
    time.sleep(a.settle)
    result["rss_after_close_kib"] = rss_kib(a.pid)
    if result["rss_before_kib"] is not None and socks:
        result["kib_per_client"] = round(
            (result["rss_held_kib"] - result["rss_before_kib"]) / len(socks), 2)
    with open(a.out, "w") as f:
        json.dump(result, f, indent=2)
    print(json.dumps(result))
    if not socks:
        sys.exit("idle_clients: no connection could log in: " + "; ".join(errors))


if __name__ == "__main__":
    main()
