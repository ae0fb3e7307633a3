#!/usr/bin/env bash
# In-place upgrades under load (issue 20's targets): one MariaDB (binary log
# on), one myplex with `takeover_socket`, sysbench `oltp_read_write` with
# CLIENTS threads for TIME seconds and, next to it, a connect loop (about
# 200 connections a second, each running `SELECT 1`); UPGRADES upgrades by
# SIGUSR2 (the running process starts the binary on disk with --takeover),
# evenly spaced. Reports sysbench's errors and reconnects, the connect
# loop's failures, how many sessions moved at each upgrade, and the TPS
# dip: sysbench's per-second TPS in the two seconds after each upgrade
# against the median of the run.
#
# Usage:
#   deploy/bench/upgrade_under_load.sh
#   CLIENTS=256 TIME=60 UPGRADES=3 PS_MODE=disable deploy/bench/upgrade_under_load.sh
#
# Environment (defaults in brackets):
#   MYPLEX      the binary                         [target/release/myplex]
#   CLIENTS     sysbench threads                   [256]
#   TIME        seconds of load                    [60]
#   UPGRADES    upgrades, spread over the run      [3]
#   TABLES/ROWS sbtest size                        [4 / 10000]
#   PS_MODE     sysbench --db-ps-mode              [auto]
#   OUT         output directory                   [bench-results/upgrade-<UTC timestamp>]
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$HERE/../.." && pwd)
log() { printf 'upgrade_under_load: %s\n' "$*" >&2; }
die() {
    log "ERROR: $*"
    exit 1
}
# shellcheck source=../../scripts/lib/mariadb.sh
source "$REPO_ROOT/scripts/lib/mariadb.sh"

MYPLEX=${MYPLEX:-$REPO_ROOT/target/release/myplex}
CLIENTS=${CLIENTS:-256}
TIME=${TIME:-60}
UPGRADES=${UPGRADES:-3}
TABLES=${TABLES:-4}
ROWS=${ROWS:-10000}
PS_MODE=${PS_MODE:-auto}
PYTHON=${PYTHON:-$REPO_ROOT/target/pyenv/bin/python}
OUT=${OUT:-$REPO_ROOT/bench-results/upgrade-$(date -u +%Y%m%dT%H%M%SZ)}
have sysbench || die "sysbench not found (scripts/install-deps.sh)"
[[ -x $MYPLEX ]] || die "$MYPLEX: build it first (cargo build --release)"
[[ -x $PYTHON ]] || die "$PYTHON: run tests/clients/setup.sh (the connect loop uses PyMySQL)"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
W=$(mktemp -d "${TMPDIR:-/tmp}/myplex-upgrade.XXXXXX")
PIDS=()
cleanup() {
    set +e
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    pkill -f -- "--config $OUT/myplex.toml" 2>/dev/null
    wait 2>/dev/null
    rm -rf "$W"
}
trap cleanup EXIT
ulimit -n "$(ulimit -Hn)"

DB_PORT=$(pick_port 0)
mariadb_install_db "$W/db"
mariadb_start "$W/db" "$DB_PORT" DB_PID \
    --max-connections=$((CLIENTS * 2 + 200)) --back-log=$((CLIENTS + 100)) \
    --max-prepared-stmt-count=1048576 --log-bin=mariadb-bin --binlog-format=ROW --server-id=1 \
    --innodb-buffer-pool-size=256M --performance-schema=OFF
PIDS+=("$DB_PID")
mariadb_setup_users "$W/db"
SB=(oltp_read_write --db-driver=mysql --mysql-host=127.0.0.1 --mysql-user=app --mysql-password=secret
    --mysql-db=test --tables="$TABLES" --table-size="$ROWS" --db-ps-mode="$PS_MODE")
sysbench "${SB[@]}" --mysql-port="$DB_PORT" --threads=4 prepare >"$W/prepare.log" 2>&1 ||
    die "sysbench prepare: $(tail -n 5 "$W/prepare.log")"

PORT=$(pick_port 0)
ADMIN=$(pick_port 0 "$PORT")
cp "$MYPLEX" "$W/myplex"
cat >"$OUT/myplex.toml" <<EOF
listen = "127.0.0.1:$PORT"
admin_listen = "127.0.0.1:$ADMIN"
takeover_socket = "$W/takeover.sock"
[backend]
address = "127.0.0.1:$DB_PORT"
user = "app"
password = "secret"
[pool]
max_client_connections = $((CLIENTS + 200))
[[users]]
name = "app"
password = "secret"
EOF
"$W/myplex" --config "$OUT/myplex.toml" </dev/null >>"$OUT/myplex.log" 2>&1 &
first=$!
wait_for_port "$PORT" "$first" myplex "$OUT/myplex.log" 30
log "myplex on $PORT (pid $first); $CLIENTS clients for ${TIME}s, $UPGRADES upgrades"

# The connect loop: 4 threads, one connect + SELECT 1 + close every 20 ms each.
cat >"$W/connect_loop.py" <<'EOF'
import sys, threading, time, pymysql
port, stop_after = int(sys.argv[1]), float(sys.argv[2])
ok = [0]; failed = []
lock = threading.Lock()
def run():
    end = time.time() + stop_after
    while time.time() < end:
        t = time.time()
        try:
            c = pymysql.connect(host="127.0.0.1", port=port, user="app", password="secret",
                                database="test", ssl_disabled=True, connect_timeout=10)
            with c.cursor() as cur:
                cur.execute("SELECT 1")
                cur.fetchall()
            c.close()
            with lock:
                ok[0] += 1
        except Exception as e:  # noqa: BLE001
            with lock:
                failed.append(f"{time.time():.3f} {e}")
        time.sleep(max(0.0, 0.02 - (time.time() - t)))
ts = [threading.Thread(target=run) for _ in range(4)]
[t.start() for t in ts]
[t.join() for t in ts]
print(f"connect loop: {ok[0]} connections, {len(failed)} failed")
for f in failed[:20]:
    print("  " + f)
EOF
"$PYTHON" "$W/connect_loop.py" "$PORT" "$TIME" >"$OUT/connect_loop.txt" 2>&1 &
loop=$!
PIDS+=("$loop")
sysbench "${SB[@]}" --mysql-port="$PORT" --threads="$CLIENTS" --time="$TIME" --report-interval=1 \
    --percentile=95 --mysql-ignore-errors=1213 run >"$OUT/sysbench.txt" 2>&1 &
sb=$!
PIDS+=("$sb")
start=$(date +%s.%N)

# The upgrades, evenly spaced; each waits for the running process to exit.
current=$first
step=$((TIME / (UPGRADES + 1)))
: >"$OUT/upgrades.txt"
for i in $(seq 1 "$UPGRADES"); do
    sleep "$step"
    at=$(awk -v s="$start" -v n="$(date +%s.%N)" 'BEGIN { printf "%.1f", n - s }')
    kill -USR2 "$current"
    t0=$(date +%s.%N)
    while kill -0 "$current" 2>/dev/null; do sleep 0.05; done
    took=$(awk -v s="$t0" -v n="$(date +%s.%N)" 'BEGIN { printf "%.2f", n - s }')
    next=$(pgrep -f -- "--config $OUT/myplex.toml" | grep -vx "$current" | head -n 1 || true)
    [[ -n $next ]] || die "upgrade $i: no successor running (see $OUT/myplex.log)"
    moved=$(curl -s "http://127.0.0.1:$ADMIN/metrics" |
        awk '/^myplex_sessions_moved_total\{direction="in",outcome="moved"\}/ { print $2 }')
    echo "upgrade $i at ${at}s: pid $current -> $next, old process gone after ${took}s, ${moved:-0} sessions moved in" |
        tee -a "$OUT/upgrades.txt" >&2
    current=$next
done
wait "$sb" || true
wait "$loop" || true

# Per-second TPS around each upgrade against the run's median.
"$PYTHON" - "$OUT/sysbench.txt" "$OUT/upgrades.txt" >"$OUT/summary.txt" <<'EOF'
import re, statistics, sys
sb = open(sys.argv[1]).read()
tps = {int(m.group(1)): float(m.group(2)) for m in re.finditer(r"\[ (\d+)s \].*?tps: ([\d.]+)", sb)}
med = statistics.median(tps.values()) if tps else 0
def grab(pat):
    m = re.search(pat, sb)
    return m.group(1) if m else "?"
fields = {
    "transactions": grab(r"transactions:\s+(\d+)"),
    "TPS": grab(r"transactions:.*?\(([\d.]+) per sec"),
    "errors": grab(r"\n\s+errors:\s+(\d+)"),
    "ignored errors": grab(r"ignored errors:\s+(\d+)"),
    "reconnects": grab(r"reconnects:\s+(\d+)"),
    "p95 ms": grab(r"95th percentile:\s+([\d.]+)"),
    "max ms": grab(r"max:\s+([\d.]+)"),
}
print("sysbench: " + ", ".join(f"{k} {v}" for k, v in fields.items()))
print(f"median TPS per second: {med:.0f}")
for line in open(sys.argv[2]):
    m = re.search(r"at ([\d.]+)s", line)
    if not m:
        continue
    s = int(float(m.group(1)))
    window = [tps[k] for k in range(s + 1, s + 3) if k in tps]
    low = min(window) if window else float("nan")
    print(f"{line.strip()}; TPS in the 2 s after: {low:.0f} ({low / med if med else 0:.2f} x median)")
EOF
cat "$OUT/connect_loop.txt" >>"$OUT/summary.txt"
cat "$OUT/summary.txt"
log "results in $OUT"
