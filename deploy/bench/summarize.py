#!/usr/bin/env python3
"""Summarise a deploy/bench/compare.sh result directory as Markdown.

    summarize.py bench-results/<timestamp>  > summary.md

Reads meta.env, <case>/results.json, <case>/bench.log + cpu-samples.csv (CPU
share of every process during every point, and from it CPU time per
statement), calibration/ and idle-*.json. Targets `myplex-oN` (the
MYPLEX_SWEEP fixed caps) are compared with the adaptive `myplex`.
Stdlib only.
"""

import json
import os
import re
import sys

HZ = os.sysconf("SC_CLK_TCK")
ORDER = ["direct", "threadpool", "haproxy", "myplex", "proxysql"]


def read_meta(d):
    meta = {}
    path = os.path.join(d, "meta.env")
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                k, _, v = line.rstrip("\n").partition("=")
                meta[k] = v
    return meta


def fmt(v, digits=1):
    if v is None:
        return "–"
    return f"{v:,.{digits}f}"


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


SWEEP_RE = re.compile(r"myplex-o(\d+)")


def sweep_n(t):
    """N of a sweep target `myplex-oN`, else None."""
    m = SWEEP_RE.fullmatch(t)
    return int(m.group(1)) if m else None


def targets_of(points):
    seen = [p["target"] for p in points]
    rest = {t for t in seen if t not in ORDER}
    sweep = sorted((t for t in rest if sweep_n(t) is not None), key=sweep_n)
    return ([t for t in ORDER if t in seen] + sweep
            + sorted(t for t in rest if sweep_n(t) is None))


# Which sampled process is a target's proxy, and which server it talks to.
def proxy_proc(t):
    if t in ("haproxy", "myplex", "proxysql") or t.startswith("myplex-"):
        return t
    return None


def server_proc(t):
    return "mariadb_b" if t == "threadpool" else "mariadb_a"


def us_per_statement(share_pct, qps):
    """% of one CPU at qps statements/s -> CPU µs per statement."""
    if share_pct is None or not qps:
        return None
    return share_pct / 100.0 / qps * 1e6


def cpu_per_statement(shares, by):
    """(target, clients) -> {proxy, server, total, total_with_bench} in µs per
    statement; total = every process the benchmark started except the bench."""
    res = {}
    for key, s in shares.items():
        p = by.get(key)
        if not p:
            continue
        t = key[0]
        ours = [k for k in s if k not in ("other", "idle", "iowait")]
        without = sum(s[k] for k in ours if k != "bench")
        pp = proxy_proc(t)
        res[key] = {
            "proxy": us_per_statement(s.get(pp), p["qps"]) if pp in s else None,
            "server": us_per_statement(s.get(server_proc(t)), p["qps"]),
            "total": us_per_statement(without, p["qps"]),
            "total_with_bench": us_per_statement(without + s.get("bench", 0.0), p["qps"]),
        }
    return res


def load_cpu(case_dir):
    path = os.path.join(case_dir, "cpu-samples.csv")
    if not os.path.exists(path):
        return None, []
    with open(path) as f:
        header = f.readline().strip().split(",")
        rows = [[float(x) for x in line.strip().split(",")] for line in f if line.strip()]
    return header, rows


def at(rows, col, t):
    """Counter `col` linearly interpolated at time t."""
    if not rows:
        return None
    if t <= rows[0][0]:
        return rows[0][col]
    for a, b in zip(rows, rows[1:]):
        if a[0] <= t <= b[0]:
            f = (t - a[0]) / (b[0] - a[0]) if b[0] > a[0] else 0
            return a[col] + f * (b[col] - a[col])
    return rows[-1][col]


# `myplex bench run`'s --stop-grace as compare.sh runs it (its default).
STOP_GRACE_S = 30.0


def point_times(case_dir):
    """(target, clients) -> epoch time the point's measured window ended: when the
    bench printed its row, less the grace its unanswered clients were given when
    the row says some were abandoned (it is printed only after that)."""
    out = {}
    path = os.path.join(case_dir, "bench.log")
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 3 and re.fullmatch(r"\d+", parts[2]) and not parts[1] == "target":
                try:
                    t = float(parts[0])
                except ValueError:
                    continue
                if "abandoned" in line:
                    t -= STOP_GRACE_S
                out[(parts[1], int(parts[2]))] = t
    return out


def cpu_shares(case_dir, duration, cpus):
    """(target, clients) -> {process: % of one CPU, ..., 'other': .., 'idle': ..}."""
    header, rows = load_cpu(case_dir)
    if not header or len(rows) < 2:
        return {}
    times = point_times(case_dir)
    procs = header[4:]
    res = {}
    for key, t_end in times.items():
        # The row is printed once all clients have stopped; the measured window
        # ended a little earlier. Approximate it as [end - 0.5 - duration, end - 0.5].
        t1 = t_end - 0.5
        t0 = t1 - duration
        dt = t1 - t0
        shares = {}
        busy = (at(rows, 1, t1) - at(rows, 1, t0))
        total = (at(rows, 2, t1) - at(rows, 2, t0))
        iowait = (at(rows, 3, t1) - at(rows, 3, t0))
        ours = 0.0
        for i, p in enumerate(procs):
            j = at(rows, 4 + i, t1) - at(rows, 4 + i, t0)
            shares[p] = 100.0 * j / HZ / dt
            ours += shares[p]
        machine_busy = 100.0 * cpus * busy / total if total else 0.0
        shares["other"] = max(0.0, machine_busy - ours)
        shares["idle"] = 100.0 * cpus - machine_busy
        shares["iowait"] = 100.0 * cpus * iowait / total if total else 0.0
        res[key] = shares
    return res


def get_tps(by, t, c):
    p = by.get((t, c))
    return p["tps"] if p else None


def case_section(d, case, meta, out):
    cdir = os.path.join(d, case)
    path = os.path.join(cdir, "results.json")
    if not os.path.exists(path):
        out.append(f"## Case `{case}`: no results\n")
        return {}
    with open(path) as f:
        rep = json.load(f)
    pts = rep["points"]
    tg = targets_of(pts)
    clients = sorted({p["clients"] for p in pts})
    by = {(p["target"], p["clients"]): p for p in pts}
    servers = ""
    sp = os.path.join(cdir, "servers.txt")
    if os.path.exists(sp):
        with open(sp) as f:
            servers = f.read().strip()
    out.append(f"## Case `{case}` — {rep['workload']}, {rep['tables']}, "
               f"{rep['warmup_s']} s warm-up + {rep['duration_s']} s per point\n")
    if servers:
        out.append("Server settings:\n\n```\n" + servers + "\n```\n")

    def table(title, field, digits):
        out.append(f"**{title}**\n")
        out.append("| clients | " + " | ".join(tg) + " |")
        out.append("|---:|" + "---:|" * len(tg))
        for c in clients:
            cells = [fmt(by[(t, c)][field], digits) if (t, c) in by else "–" for t in tg]
            out.append(f"| {c} | " + " | ".join(cells) + " |")
        out.append("")

    table("TPS (transactions/s)", "tps", 1)
    table("p95 latency (ms)", "p95_ms", 2)
    table("p50 latency (ms)", "p50_ms", 2)

    errs = [p for p in pts if p["errors"] or p["reconnects"] or p["connect_failures"]
            or p.get("abandoned", 0)]
    if errs:
        out.append("**Errors / reconnects / failed connects / clients abandoned unanswered "
                   "30 s after the window**\n")
        out.append("| target | clients | errors (count x code) | reconnects | connect failures | abandoned |")
        out.append("|---|---:|---|---:|---:|---:|")
        for p in errs:
            e = " ".join(f"{n}x{c}" for c, n in p["errors"].items()) or "0"
            out.append(f"| {p['target']} | {p['clients']} | {e} | {p['reconnects']} | "
                       f"{p['connect_failures']} | {p.get('abandoned', 0)} |")
        out.append("")
    else:
        out.append("No errors, reconnects or failed connects at any point.\n")

    cpus = int(meta.get("cpus", "1"))
    shares = cpu_shares(cdir, rep["duration_s"], cpus)
    if shares:
        procs = [k for k in next(iter(shares.values())).keys()]
        out.append(f"**CPU during each measured window** (% of one CPU; the machine has {cpus}, "
                   f"so {100 * cpus}% in total; `other` = every process not started by the "
                   f"benchmark, `iowait` is part of `idle`)\n")
        out.append("| target | clients | " + " | ".join(procs) + " |")
        out.append("|---|---:|" + "---:|" * len(procs))
        for c in clients:
            for t in tg:
                s = shares.get((t, c))
                if s:
                    out.append(f"| {t} | {c} | " + " | ".join(f"{s[p]:.0f}" for p in procs) + " |")
        out.append("")

    cps = cpu_per_statement(shares, by)
    if cps:
        out.append("**CPU per statement (µs)** (CPU time of the process during the measured "
                   "window / statements completed in it; `proxy` = the target's own proxy "
                   "process, `server` = the MariaDB it talks to, `total` = every process the "
                   "benchmark started, without and with the load generator)\n")
        out.append("| target | clients | proxy | server | total (bench excluded) | total (bench included) |")
        out.append("|---|---:|---:|---:|---:|---:|")
        for c in clients:
            for t in tg:
                v = cps.get((t, c))
                if v:
                    out.append(f"| {t} | {c} | {fmt(v['proxy'])} | {fmt(v['server'])} | "
                               f"{fmt(v['total'])} | {fmt(v['total_with_bench'])} |")
        out.append("")

    sweep = [t for t in tg if sweep_n(t) is not None]
    best_fixed = {}
    if sweep and "myplex" in tg:
        out.append("**Adaptive vs. fixed caps** (`myplex` = pool.inflight "
                   f"{meta.get('myplex_inflight') or 'adaptive'}; `myplex-oN` = inflight fixed, "
                   "oversubscribe N, each its own process)\n")
        out.append("| clients | myplex TPS | best fixed | its TPS | adaptive / best fixed | "
                   + " | ".join(f"{t} TPS" for t in sweep) + " |")
        out.append("|---:|---:|---|---:|---:|" + "---:|" * len(sweep))
        for c in clients:
            cand = [(by[(t, c)]["tps"], t) for t in sweep if (t, c) in by]
            if not cand:
                continue
            bt, bn = max(cand)
            best_fixed[c] = (bn, bt)
            out.append(f"| {c} | {fmt(get_tps(by, 'myplex', c))} | {bn} | {fmt(bt)} | "
                       f"{fmt(ratio(get_tps(by, 'myplex', c), bt), 2)} | "
                       + " | ".join(fmt(get_tps(by, t, c)) for t in sweep) + " |")
        out.append("")

    hi, lo = max(clients), min(clients)

    def get(t, c, f):
        p = by.get((t, c))
        return p[f] if p else None

    r = {"case": case, "hi": hi, "lo": lo}
    out.append("**Ratios against the targets of issue 9** (same run, targets alternating)\n")
    out.append("| ratio | value | issue target | met? |")
    out.append("|---|---:|---|---|")

    def row(name, v, target, ok):
        met = "–" if v is None else ("yes" if ok(v) else "**no**")
        out.append(f"| {name} | {fmt(v, 2)} | {target} | {met} |")

    def check(key, name, v, target, ok):
        r[key] = v
        row(name, v, target, ok)

    ge1, le1 = (lambda v: v >= 1.0), (lambda v: v <= 1.0)
    for c in clients:
        tps_direct = ratio(get("myplex", c, "tps"), get("direct", c, "tps"))
        if c >= 64:  # the 64, 256 and 1,024 clients
            check(f"myplex_vs_threadpool_tps_{c}", f"myplex TPS / threadpool TPS @ {c}",
                  ratio(get("myplex", c, "tps"), get("threadpool", c, "tps")), "≥ 1.0", ge1)
            check(f"myplex_vs_direct_tps_{c}", f"myplex TPS / direct TPS @ {c}", tps_direct, "≥ 1.0", ge1)
            check(f"myplex_vs_threadpool_p95_{c}", f"myplex p95 / threadpool p95 @ {c}",
                  ratio(get("myplex", c, "p95_ms"), get("threadpool", c, "p95_ms")), "≤ 1.0", le1)
        else:
            check(f"myplex_vs_direct_tps_{c}", f"myplex TPS / direct TPS @ {c}", tps_direct,
                  "≥ 0.9 (every point)", lambda v: v >= 0.9)
    check(f"myplex_vs_haproxy_tps_{lo}", f"myplex TPS / haproxy TPS @ {lo}",
          ratio(get("myplex", lo, "tps"), get("haproxy", lo, "tps")), "≥ 1.0", ge1)
    for c in clients:
        m, h = cps.get(("myplex", c)), cps.get(("haproxy", c))
        if m and h:
            v = ratio(m["proxy"], h["proxy"])
            r[f"proxy_cpu_per_statement_myplex_vs_haproxy_{c}"] = v
            row(f"proxy CPU per statement: myplex / HAProxy @ {c} "
                f"({fmt(m['proxy'])} / {fmt(h['proxy'])} µs)", v, "≤ 1.0", lambda v: v <= 1.0)
    for c, (bn, bt) in best_fixed.items():
        v = ratio(get_tps(by, "myplex", c), bt)
        r[f"adaptive_vs_best_fixed_{c}"] = v
        row(f"myplex TPS / best fixed cap TPS ({bn}) @ {c}", v, "≥ 0.9", lambda v: v >= 0.9)
    out.append("")
    return r


def sysbench_window(path, warmup):
    """Mean TPS over the intervals after the warm-up; whole-run p95 and errors."""
    tps, p95s = [], []
    total_p95 = None
    ignored = 0
    with open(path) as f:
        for line in f:
            m = re.match(r"\[ (\d+)s \] thds: \d+ tps: ([\d.]+) .*lat \(ms,95%\): ([\d.]+) err/s: ([\d.]+)", line)
            if m and int(m.group(1)) > warmup:
                tps.append(float(m.group(2)))
                p95s.append(float(m.group(3)))
            m = re.match(r"\s+95th percentile:\s+([\d.]+)", line)
            if m:
                total_p95 = float(m.group(1))
            m = re.match(r"\s+ignored errors:\s+(\d+)", line)
            if m:
                ignored = int(m.group(1))
    if not tps:
        return None
    p95s.sort()
    return {
        "tps": sum(tps) / len(tps),
        "p95_run": total_p95,
        "p95_median_interval": p95s[len(p95s) // 2],
        "ignored_errors": ignored,
    }


def mean_cpu(path, skip_s):
    """Mean CPU (% of one CPU) per process over a sampler file, after skip_s."""
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        header = f.readline().strip().split(",")
        rows = [[float(x) for x in line.strip().split(",")] for line in f if line.strip()]
    if len(rows) < 2:
        return {}
    t0 = rows[0][0] + skip_s
    rows = [r for r in rows if r[0] >= t0] or rows
    # The client's counter stops when it exits; use the last sample that moved.
    a, b = rows[0], rows[-1]
    dt = b[0] - a[0]
    if dt <= 0:
        return {}
    res = {h: 100.0 * (b[i] - a[i]) / HZ / dt for i, h in enumerate(header) if i >= 4}
    res["machine"] = 100.0 * int(os.cpu_count() or 1) * (b[1] - a[1]) / (b[2] - a[2]) if b[2] > a[2] else 0
    return res


def calibration_section(d, meta, out):
    cdir = os.path.join(d, "calibration")
    if not os.path.isdir(cdir):
        return None
    warmup = int(meta.get("warmup", "5"))
    rounds = []
    n = 1
    while os.path.exists(os.path.join(cdir, f"sysbench-{n}.log")):
        sb = sysbench_window(os.path.join(cdir, f"sysbench-{n}.log"), warmup)
        bj = os.path.join(cdir, f"bench-{n}", "results.json")
        bp = None
        if os.path.exists(bj):
            with open(bj) as f:
                bp = json.load(f)["points"][0]
        cs = mean_cpu(os.path.join(cdir, f"cpu-sysbench-{n}.csv"), warmup)
        cb = mean_cpu(os.path.join(cdir, f"cpu-bench-{n}.csv"), warmup)
        rounds.append((n, sb, bp, cs, cb))
        n += 1
    if not rounds:
        return None
    out.append("## Calibration: sysbench vs `myplex bench`, same server, same data\n")
    out.append("oltp_read_write, uniform ids (`sysbench --rand-type=uniform`), direct to one MariaDB "
               "(one thread per connection, buffer pool holds the data). sysbench 1.0 has no warm-up "
               "option: its TPS is the mean of the 1 s reports after the warm-up; its p95 covers the "
               "whole run (and is bucketed by sysbench's histogram). CPU: % of one CPU after the "
               "warm-up; client µs/trx: the load generator's own CPU per transaction (sysbench's from "
               "its CPU % and TPS, `myplex bench`'s as it reports it); `myplex bench` ran with "
               f"stmt_cache_size={meta.get('stmt_cache') or 'unset (every statement held)'}.\n")
    out.append("| round | sysbench TPS | myplex bench TPS | bench / sysbench | sysbench p95 ms | myplex bench p95 ms | sysbench ignored errors | bench errors | CPU % sysbench / its mariadbd | CPU % bench / its mariadbd | client µs/trx sysbench / bench |")
    out.append("|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|")
    sb_all, b_all = [], []
    cpu = lambda c: f"{c['client']:.0f} / {c['mariadbd']:.0f}" if c else "–"
    for n, sb, bp, cs, cb in rounds:
        st = sb["tps"] if sb else None
        bt = bp["tps"] if bp else None
        if st:
            sb_all.append(st)
        if bt:
            b_all.append(bt)
        berr = sum(bp["errors"].values()) if bp else None
        sb_us = cs["client"] * 1e4 / st if cs and st else None
        b_us = bp.get("client_cpu_us_per_trx") if bp else None
        out.append(f"| {n} | {fmt(st)} | {fmt(bt)} | {fmt(ratio(bt, st), 3)} | "
                   f"{fmt(sb['p95_run'] if sb else None, 2)} | {fmt(bp['p95_ms'] if bp else None, 2)} | "
                   f"{sb['ignored_errors'] if sb else '–'} | {berr if berr is not None else '–'} | "
                   f"{cpu(cs)} | {cpu(cb)} | {fmt(sb_us)} / {fmt(b_us)} |")
    mean = lambda xs: sum(xs) / len(xs) if xs else None
    r = ratio(mean(b_all), mean(sb_all))
    out.append(f"| mean | {fmt(mean(sb_all))} | {fmt(mean(b_all))} | {fmt(r, 3)} | | | | | | | |")
    out.append("")
    if r is not None:
        out.append(f"`myplex bench` / sysbench TPS = {r:.3f} "
                   f"({'within' if abs(r - 1) <= 0.10 else '**outside**'} the ±10 % target).\n")
    return r


def idle_section(d, out):
    res = {}
    for label in ("myplex", "direct"):
        p = os.path.join(d, f"idle-{label}.json")
        if os.path.exists(p):
            with open(p) as f:
                res[label] = json.load(f)
    if not res:
        return None
    out.append("## Memory per idle client\n")
    out.append("| process | idle clients held | failed | RSS before (KiB) | RSS held (KiB) | KiB per idle client | RSS after close (KiB) | backend connections of user app while held | login time (s) |")
    out.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for label, r in res.items():
        out.append(f"| {r.get('label') or label} | {r['connected']} | {r['failed']} | "
                   f"{r['rss_before_kib']} | {r['rss_held_kib']} | {fmt(r.get('kib_per_client'), 2)} | "
                   f"{r['rss_after_close_kib']} | {r.get('while_holding_output', '–')} | {r['login_seconds']} |")
    out.append("")
    m = res.get("myplex")
    if m and m.get("rss_samples_kib"):
        out.append("myplex RSS while connecting: " + ", ".join(
            f"{n}: {kib / 1024:.1f} MiB" for n, kib in m["rss_samples_kib"] if kib is not None) + "\n")
    for label, r in res.items():
        if r.get("errors"):
            out.append(f"{label} login errors: " + "; ".join(f"{n}x {e}" for e, n in r["errors"].items()) + "\n")
    return m.get("kib_per_client") if m else None


def main():
    d = sys.argv[1]
    meta = read_meta(d)
    out = []
    out.append(f"# myplex comparison — {meta.get('started', '?')}\n")
    out.append(f"- machine: {meta.get('machine', '?')}")
    out.append(f"- load average at start: {meta.get('load_at_start', '?')}; at end: {meta.get('load_at_end', '?')}")
    out.append(f"- myplex: git {meta.get('git_rev', '?')} ({meta.get('git_dirty_files', '?')} uncommitted files in the tree), "
               f"binary sha256 {meta.get('myplex_sha256', '?')[:16]}…")
    out.append(f"- MariaDB {meta.get('mariadb', '?')}; {meta.get('haproxy', '?')}; sysbench {meta.get('sysbench', '?')}"
               + (f"; {meta['proxysql']}" if meta.get("proxysql") else "; ProxySQL not measured (PROXYSQL_BIN unset)"))
    db = meta.get("data_bytes")
    out.append(f"- data: {meta.get('tables', '?')} tables × {meta.get('table_size', '?')} rows"
               + (f" = {int(db) / 1048576:.0f} MiB of .ibd files" if db else "")
               + f", workload {meta.get('workload', '?')}, clients {meta.get('clients', '?')}")
    out.append(f"- myplex pool: thread_groups {meta.get('myplex_groups')}, inflight {meta.get('myplex_inflight') or 'adaptive'}, "
               f"oversubscribe {meta.get('myplex_oversubscribe')}, max_backend_connections {meta.get('myplex_max_backend')}")
    if meta.get("myplex_sweep"):
        out.append(f"- fixed-cap sweep (targets myplex-oN, inflight fixed; N:max_backend_connections): "
                   f"{meta.get('myplex_sweep_backends', '').strip()}")
    if meta.get("total_seconds"):
        out.append(f"- total run time: {meta['total_seconds']} s")
    out.append("")
    ratios = []
    for case in meta.get("cases", "").split(","):
        if case:
            ratios.append(case_section(d, case, meta, out))
    calibration_section(d, meta, out)
    idle_section(d, out)
    print("\n".join(out))


if __name__ == "__main__":
    main()
