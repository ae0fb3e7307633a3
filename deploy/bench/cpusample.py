#!/usr/bin/env python3
"""Sample cumulative CPU time of named processes and of the whole machine.

    cpusample.py --out cpu-samples.csv [--interval 0.5] NAME=PID ...

Writes one CSV line per interval: wall-clock time (epoch seconds), the
machine's busy and total jiffies from /proc/stat, and each process's
utime+stime (jiffies, all threads) from /proc/PID/stat. Runs until SIGTERM
or SIGINT. summarize.py turns the counters into CPU shares per bench point.
"""

import argparse
import os
import signal
import sys
import time

stop = False


def on_signal(*_):
    global stop
    stop = True


def machine():
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    total = sum(fields[:8])  # user..steal (guest time is already in user)
    return total - idle, total, fields[4] if len(fields) > 4 else 0


def proc_jiffies(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            data = f.read()
    except OSError:
        return None
    rest = data.rsplit(")", 1)[1].split()
    return int(rest[11]) + int(rest[12])  # utime, stime (fields 14, 15)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--interval", type=float, default=0.5)
    ap.add_argument("procs", nargs="+", help="NAME=PID")
    a = ap.parse_args()
    procs = []
    for p in a.procs:
        name, _, pid = p.partition("=")
        if pid:
            procs.append((name, int(pid)))
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    last = {name: 0 for name, _ in procs}
    with open(a.out, "w") as out:
        out.write("time,busy,total,iowait," + ",".join(n for n, _ in procs) + "\n")
        while not stop:
            busy, total, iowait = machine()
            vals = []
            for name, pid in procs:
                j = proc_jiffies(pid)
                if j is not None:
                    last[name] = j
                vals.append(str(last[name]))
            out.write(f"{time.time():.3f},{busy},{total},{iowait}," + ",".join(vals) + "\n")
            out.flush()
            time.sleep(a.interval)
    return 0


if __name__ == "__main__":
    sys.exit(main())
