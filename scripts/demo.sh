#!/usr/bin/env bash
# myplex demo: drive real sysbench OLTP traffic through the proxy and show
# that many client connections share a few backend connections.
#
# Usage:
#   scripts/demo.sh                              # throwaway local MariaDB
#   scripts/demo.sh BACKEND_HOST:PORT USER PASSWORD
#
# Without arguments a private MariaDB is started exactly like the test fixture
# (temp datadir, free port, user app/secret, database `test`) and removed on
# exit. With arguments, the given backend is used; USER/PASSWORD serve both
# as the proxy's backend credentials and as the client login.
#
# Environment:
#   DEMO_SECONDS      sysbench run time in seconds             (default 20)
#   DEMO_THREADS      sysbench client threads/connections      (default 64)
#   DEMO_DB           database used by sysbench                (default test)
#   DEMO_MAX_BACKEND  pool.max_backend_connections             (default 16)
#   DEMO_REPLICA      1: the throwaway MariaDB gets a replica (GTID
#                     replication); myplex is given both servers with the
#                     read/write split on, sysbench runs without explicit
#                     transactions (--skip_trx: its reads may go to the
#                     replica, each client reading its own writes), and the
#                     summary shows each server's role, replication and reads
#                     (as myplex routed them and as each server counted them)
#                                                              (default 0)
#   DEMO_TEST         the sysbench test                        (default oltp_read_write)
#   DEMO_PS_MODE      sysbench --db-ps-mode: disable (text queries) or auto
#                     (prepared statements)                    (default disable)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
REPO_ROOT=$PWD

DEMO_SECONDS=${DEMO_SECONDS:-20}
DEMO_THREADS=${DEMO_THREADS:-64}
DEMO_DB=${DEMO_DB:-test}
DEMO_MAX_BACKEND=${DEMO_MAX_BACKEND:-16}
DEMO_REPLICA=${DEMO_REPLICA:-0}
DEMO_TEST=${DEMO_TEST:-oltp_read_write}
DEMO_PS_MODE=${DEMO_PS_MODE:-disable}
SAMPLE_INTERVAL=2

if [[ -t 2 ]]; then
    log() { printf '\033[1mdemo:\033[0m %s\n' "$*" >&2; }
else
    log() { printf 'demo: %s\n' "$*" >&2; }
fi
die() {
    printf 'demo: ERROR: %s\n' "$*" >&2
    exit 1
}
usage() {
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//' >&2
    exit 2
}

# shellcheck source=scripts/lib/mariadb.sh
source "$REPO_ROOT/scripts/lib/mariadb.sh"

case $# in
0) BACKEND="" ;;
3) BACKEND=$1 BACKEND_USER=$2 BACKEND_PASSWORD=$3 ;;
*) usage ;;
esac

for var in DEMO_SECONDS DEMO_THREADS DEMO_MAX_BACKEND; do
    [[ ${!var} =~ ^[1-9][0-9]*$ ]] || die "$var must be a positive integer (got '${!var}')"
done

# --- cleanup ----------------------------------------------------------------

WORKDIR=$(mktemp -d "${TMPDIR:-/tmp}/myplex-demo.XXXXXX")
MARIADB_PID=""
REPLICA_PID=""
REPLICA=""
MYPLEX_PID=""
MONITOR_PID=""

cleanup() {
    local status=$?
    trap - EXIT INT TERM HUP
    set +e
    if [[ -n $MONITOR_PID ]]; then
        touch "$WORKDIR/monitor.stop"
        wait "$MONITOR_PID" 2>/dev/null
    fi
    stop_pid "$MYPLEX_PID" myplex 10
    stop_pid "$REPLICA_PID" "MariaDB replica" 60
    stop_pid "$MARIADB_PID" "MariaDB" 60
    rm -rf "$WORKDIR"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# --- helpers ----------------------------------------------------------------

# TOML basic string.
toml_str() {
    local s=$1
    s=${s//\\/\\\\}
    s=${s//\"/\\\"}
    printf '"%s"' "$s"
}

# backend_sql SQL: run SQL directly against the backend (not through myplex).
backend_sql() {
    MYSQL_PWD=$BACKEND_ADMIN_PASSWORD "$MARIADB_CLI" --no-defaults --protocol=TCP \
        --host="$BACKEND_HOST" --port="$BACKEND_PORT" --user="$BACKEND_ADMIN_USER" \
        --connect-timeout=5 -N -B -e "$1"
}

# --- prerequisites ----------------------------------------------------------

if [[ -z $BACKEND ]]; then
    bash scripts/install-deps.sh
fi
if [[ -f "${HOME:-/root}/.cargo/env" ]]; then
    # shellcheck source=/dev/null
    source "${HOME:-/root}/.cargo/env"
fi
have cargo || die "cargo not found on PATH (install Rust via https://rustup.rs)"
have sysbench || die "sysbench not found; run scripts/install-deps.sh"
MARIADB_CLI=$(find_bin mariadb mysql) || die "mariadb client not found; run scripts/install-deps.sh"

# --- backend ----------------------------------------------------------------

start_local_mariadb() {
    local dir=$WORKDIR/mariadb
    log "initialising a throwaway MariaDB in $dir/data"
    mariadb_install_db "$dir"

    BACKEND_PORT=$(pick_port 0)
    log "starting mariadbd on 127.0.0.1:$BACKEND_PORT"
    mariadb_start "$dir" "$BACKEND_PORT" MARIADB_PID \
        --max-connections=6000 \
        --back-log=3000 \
        --max-prepared-stmt-count=200000 \
        --max-allowed-packet=64M \
        --thread-cache-size=256 \
        --innodb-buffer-pool-size=256M \
        --innodb-log-file-size=64M \
        --innodb-flush-log-at-trx-commit=2 \
        --innodb-doublewrite=0 \
        --performance-schema=OFF \
        --log-bin=mariadb-bin \
        --binlog-format=ROW \
        --server-id=1
    mariadb_setup_users "$dir"

    BACKEND_HOST=127.0.0.1
    BACKEND="$BACKEND_HOST:$BACKEND_PORT"
    BACKEND_USER=app
    BACKEND_PASSWORD=secret
    # The monitor uses root so it sees every backend connection.
    BACKEND_ADMIN_USER=root
    BACKEND_ADMIN_PASSWORD=rootpw
}

# A second throwaway MariaDB replicating from the first (GTID), read-only.
start_local_replica() {
    local dir=$WORKDIR/replica
    log "initialising a replica in $dir/data"
    mariadb_install_db "$dir"
    REPLICA_PORT=$(pick_port 0 "$BACKEND_PORT")
    log "starting the replica on 127.0.0.1:$REPLICA_PORT"
    mariadb_start "$dir" "$REPLICA_PORT" REPLICA_PID \
        --max-connections=1000 \
        --innodb-buffer-pool-size=256M \
        --innodb-flush-log-at-trx-commit=2 \
        --performance-schema=OFF \
        --log-bin=mariadb-bin \
        --binlog-format=ROW \
        --server-id=2 \
        --read-only=1
    mariadb_setup_users "$dir"
    mariadb_sql "$WORKDIR/mariadb" "CREATE USER 'repl'@'%' IDENTIFIED BY 'replpw';
        GRANT REPLICATION SLAVE ON *.* TO 'repl'@'%'"
    local pos
    pos=$(mariadb_sql "$WORKDIR/mariadb" 'SELECT @@global.gtid_binlog_pos')
    # Both were set up alike on their own: the replica starts from the
    # primary's position now.
    mariadb_sql "$dir" "RESET MASTER;
        SET GLOBAL gtid_slave_pos = '$pos';
        CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = $BACKEND_PORT,
          MASTER_USER = 'repl', MASTER_PASSWORD = 'replpw',
          MASTER_USE_GTID = slave_pos, MASTER_CONNECT_RETRY = 1;
        START SLAVE"
    REPLICA="127.0.0.1:$REPLICA_PORT"
}

if [[ -z $BACKEND ]]; then
    start_local_mariadb
    if [[ $DEMO_REPLICA == 1 ]]; then
        start_local_replica
    fi
else
    [[ $DEMO_REPLICA == 1 ]] && die "DEMO_REPLICA needs the throwaway MariaDB (no arguments)"
    [[ $BACKEND == *:* ]] || die "backend must be HOST:PORT (got '$BACKEND')"
    BACKEND_HOST=${BACKEND%:*}
    BACKEND_HOST=${BACKEND_HOST#[}
    BACKEND_HOST=${BACKEND_HOST%]}
    BACKEND_PORT=${BACKEND##*:}
    [[ $BACKEND_PORT =~ ^[0-9]+$ ]] || die "bad port in '$BACKEND'"
    BACKEND_ADMIN_USER=$BACKEND_USER
    BACKEND_ADMIN_PASSWORD=$BACKEND_PASSWORD
    backend_sql 'SELECT 1' >/dev/null ||
        die "cannot connect to $BACKEND as $BACKEND_USER (see error above)"
    backend_sql "CREATE DATABASE IF NOT EXISTS \`$DEMO_DB\`" >/dev/null ||
        log "warning: could not create database '$DEMO_DB' (continuing; it may already exist)"
fi
log "backend: $BACKEND (user $BACKEND_USER), MariaDB $(backend_sql 'SELECT VERSION()')"

# --- myplex -----------------------------------------------------------------

log "building myplex (cargo build --release)"
cargo build --release
MYPLEX_BIN=$REPO_ROOT/target/release/myplex
[[ -x $MYPLEX_BIN ]] || die "$MYPLEX_BIN not found after build"

LISTEN_PORT=$(pick_port 6033)
ADMIN_PORT=$(pick_port 6034 "$LISTEN_PORT")
CONFIG=$WORKDIR/myplex.toml
cat >"$CONFIG" <<EOF
listen = "127.0.0.1:$LISTEN_PORT"
admin_listen = "127.0.0.1:$ADMIN_PORT"

[backend]
address = $(toml_str "$BACKEND${REPLICA:+, $REPLICA}")
user = $(toml_str "$BACKEND_USER")
password = $(toml_str "$BACKEND_PASSWORD")

[pool]
mode = "transaction"
thread_groups = 2
oversubscribe = 3
max_backend_connections = $DEMO_MAX_BACKEND

[[users]]
name = $(toml_str "$BACKEND_USER")
password = $(toml_str "$BACKEND_PASSWORD")
EOF
if [[ -n $REPLICA ]]; then
    printf '\n[routing]\nread_write_split = true\n' >>"$CONFIG"
fi

log "starting myplex on 127.0.0.1:$LISTEN_PORT (admin 127.0.0.1:$ADMIN_PORT)"
"$MYPLEX_BIN" --config "$CONFIG" </dev/null >"$WORKDIR/myplex.log" 2>&1 &
MYPLEX_PID=$!
wait_for_port "$LISTEN_PORT" "$MYPLEX_PID" myplex "$WORKDIR/myplex.log" 30

if ! MYSQL_PWD=$BACKEND_PASSWORD "$MARIADB_CLI" --no-defaults --protocol=TCP \
    --host=127.0.0.1 --port="$LISTEN_PORT" --user="$BACKEND_USER" --connect-timeout=5 \
    -N -B -e 'SELECT 1' "$DEMO_DB" >/dev/null; then
    tail -n 50 "$WORKDIR/myplex.log" >&2 || true
    die "a simple query through myplex failed (myplex log above)"
fi
log "query through myplex ok"

# --- traffic ----------------------------------------------------------------

SYSBENCH=(
    sysbench "$DEMO_TEST"
    --db-driver=mysql
    --mysql-host=127.0.0.1
    --mysql-port="$LISTEN_PORT"
    --mysql-user="$BACKEND_USER"
    --mysql-password="$BACKEND_PASSWORD"
    --mysql-db="$DEMO_DB"
    --tables=4
    --table-size=10000
    --db-ps-mode="$DEMO_PS_MODE"
)
# With a replica: no explicit transactions, so that reads may leave the
# primary (two clients may then delete and insert the same row id: sysbench
# counts that duplicate as an ignored error instead of stopping).
if [[ -n $REPLICA ]]; then
    SYSBENCH+=(--skip_trx=on --mysql-ignore-errors=1062)
fi

log "sysbench cleanup + prepare through myplex (4 tables x 10000 rows)"
"${SYSBENCH[@]}" cleanup >"$WORKDIR/sysbench-cleanup.log" 2>&1 || true
if ! "${SYSBENCH[@]}" --threads=4 prepare >"$WORKDIR/sysbench-prepare.log" 2>&1; then
    cat "$WORKDIR/sysbench-prepare.log" >&2
    tail -n 50 "$WORKDIR/myplex.log" >&2 || true
    die "sysbench prepare failed (output and myplex log above)"
fi

quoted_user=${BACKEND_USER//\'/\'\'}
PROCESSLIST_SQL="SELECT COUNT(*) FROM information_schema.processlist WHERE user = '$quoted_user' AND id <> CONNECTION_ID()"

# Sample the backend's connection count for the client user while sysbench runs.
monitor() {
    local n
    while [[ ! -e $WORKDIR/monitor.stop ]]; do
        if n=$(backend_sql "$PROCESSLIST_SQL" 2>/dev/null) && [[ $n =~ ^[0-9]+$ ]]; then
            echo "$n" >>"$WORKDIR/processlist.samples"
            printf '    [backend processlist] %s connection(s) from user %s\n' "$n" "$BACKEND_USER" >&2
        fi
        sleep "$SAMPLE_INTERVAL"
    done
}

log "sysbench run: $DEMO_THREADS client threads for ${DEMO_SECONDS}s through myplex" \
    "(max_backend_connections = $DEMO_MAX_BACKEND)"
# Statements each server ran (its own counters): reads, writes and
# prepared executes, before and after the run.
SERVER_COUNTS_SQL="SELECT SUM(VARIABLE_VALUE) FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME IN ('COM_SELECT', 'COM_STMT_EXECUTE', 'COM_INSERT', 'COM_UPDATE', 'COM_DELETE')"
server_counts() {
    local primary replica=0
    primary=$(backend_sql "$SERVER_COUNTS_SQL" 2>/dev/null || echo 0)
    if [[ -n $REPLICA ]]; then
        replica=$(mariadb_sql "$WORKDIR/replica" "$SERVER_COUNTS_SQL" 2>/dev/null || echo 0)
    fi
    echo "$primary $replica"
}
read -r COUNT_PRIMARY0 COUNT_REPLICA0 < <(server_counts)
monitor &
MONITOR_PID=$!
run_status=0
"${SYSBENCH[@]}" --threads="$DEMO_THREADS" --time="$DEMO_SECONDS" --report-interval=5 run \
    2>&1 | tee "$WORKDIR/sysbench-run.log" || run_status=$?
touch "$WORKDIR/monitor.stop"
wait "$MONITOR_PID" 2>/dev/null || true
MONITOR_PID=""
read -r COUNT_PRIMARY1 COUNT_REPLICA1 < <(server_counts)

# --- summary ----------------------------------------------------------------

# myplex's own view, from the admin endpoint right after the run (bash's
# /dev/tcp: no curl needed).
admin_get() {
    local body
    exec 3<>"/dev/tcp/127.0.0.1/$ADMIN_PORT" || return 1
    printf 'GET %s HTTP/1.0\r\nHost: demo\r\n\r\n' "$1" >&3
    body=$(cat <&3)
    exec 3<&-
    printf '%s\n' "${body#*$'\r\n\r\n'}"
}
admin_get /status >"$WORKDIR/status.json" 2>/dev/null || true

# Prints the /status figures over its last 10 s window: TPS, QPS, statement
# and transaction p50/p95/p99 (ms). Rates are the window's counts over the
# part of it sysbench ran (a run shorter than 10 s also shows some of the
# prepare phase in the percentiles).
status_lines() {
    python3 - "$1" "$DEMO_SECONDS" <<'PY' 2>/dev/null || echo "  (no /status figures: python3 missing or /status unreadable)"
import json, sys
s = json.load(open(sys.argv[1]))["last_10s"]
secs = min(float(sys.argv[2]), 10.0)
pct = lambda h: "p50 %.2f  p95 %.2f  p99 %.2f" % (h["p50_ms"], h["p95_ms"], h["p99_ms"])
print("  myplex TPS / QPS        : %.1f / %.1f   (last %.0f s of the run)" % (
    s["transaction"]["count"] / secs, s["statement"]["count"] / secs, secs))
print("  myplex statement ms     : " + pct(s["statement"]))
print("  myplex transaction ms   : " + pct(s["transaction"]))
print("  myplex queue wait ms    : " + pct(s["queue_wait"]))
PY
}

stat_line() { grep -m1 -E "^[[:space:]]*$1" "$WORKDIR/sysbench-run.log" | sed -E 's/^[[:space:]]+//; s/[[:space:]]+/ /g' || true; }

samples_max="n/a" samples_avg="n/a" samples_n=0
if [[ -s $WORKDIR/processlist.samples ]]; then
    read -r samples_n samples_max samples_avg < <(awk '
        { n++; s += $1; if ($1 > m) m = $1 }
        END { printf "%d %d %.1f\n", n, m, s / n }' "$WORKDIR/processlist.samples")
fi

myplex_alive=yes
kill -0 "$MYPLEX_PID" 2>/dev/null || myplex_alive="NO (crashed; see log below)"

echo
echo "==================== myplex demo summary ===================="
printf '  backend                 : %s\n' "$BACKEND"
printf '  client connections      : %s (sysbench threads)\n' "$DEMO_THREADS"
printf '  max_backend_connections : %s\n' "$DEMO_MAX_BACKEND"
printf '  backend connections seen: max %s, avg %s over %s samples (user %s)\n' \
    "$samples_max" "$samples_avg" "$samples_n" "$BACKEND_USER"
printf '  %s\n' "$(stat_line 'ignored errors:')" "$(stat_line 'reconnects:')"
echo "  ---- myplex's own view (admin /status) next to sysbench's ----"
status_lines "$WORKDIR/status.json"
printf '  sysbench                : %s\n' "$(stat_line 'transactions:')" "$(stat_line 'queries:')" \
    "latency per transaction: $(stat_line '95th percentile:')"
if [[ -n ${REPLICA:-} ]]; then
    echo "  ---- the servers as myplex sees them (admin /status) ----"
    python3 - "$WORKDIR/status.json" <<'PY' 2>/dev/null || echo "  (no /status servers)"
import json, sys
for s in json.load(open(sys.argv[1]))["servers"]["servers"]:
    r = s.get("replication") or {}
    x = r.get("replica")
    how = ("replicating from %s, io %s, sql %s, lag %s s" % (
        x["source"], x["io_running"], x["sql_running"], x["lag_s"]) if x
        else r.get("unreadable") or "not a replica")
    print("  %-22s: %-8s gtid %-12s %s; reads routed here %d" % (
        s["address"], s["role"], r.get("gtid"), how, s.get("reads", 0)))
r = json.load(open(sys.argv[1]))["routing"]
print("  read-your-writes        : %d waits on the replica, %d ran out; reads kept on the primary: %s" % (
    r["causal_waits"], r["causal_wait_timeouts"],
    ", ".join("%s %d" % kv for kv in r["kept_on_primary"].items())))
PY
    on_primary=$((COUNT_PRIMARY1 - COUNT_PRIMARY0))
    on_replica=$((COUNT_REPLICA1 - COUNT_REPLICA0))
    printf '  statements by the servers: primary %d, replica %d (replica share %s %%)\n' \
        "$on_primary" "$on_replica" \
        "$(awk -v p="$on_primary" -v r="$on_replica" 'BEGIN { if (p + r > 0) printf "%.1f", 100 * r / (p + r); else print "n/a" }')"
fi
printf '  myplex still running    : %s\n' "$myplex_alive"
echo "=============================================================="

if [[ $myplex_alive != yes ]]; then
    tail -n 50 "$WORKDIR/myplex.log" >&2 || true
    exit 1
fi
if ((run_status != 0)); then
    tail -n 50 "$WORKDIR/myplex.log" >&2 || true
    die "sysbench run failed with status $run_status (myplex log above)"
fi
log "done"
