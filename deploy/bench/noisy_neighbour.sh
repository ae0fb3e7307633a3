#!/usr/bin/env bash
# Noisy neighbour (issue 19): user `batch` with BATCH_CLIENTS clients running
# sysbench oltp_read_write next to user `web` with WEB_CLIENTS clients running
# oltp_point_select, on one machine, through
#   direct   -> MariaDB itself (nothing protects web)
#   fcfs     -> myplex with both users looked up in the server ([server_users]):
#               they share one scheduler lane, i.e. first come, first served
#   equal    -> myplex, [[users]] web and batch with weight 1 each
#   web4x    -> myplex, web weight 4, batch weight 1
# Per target: web alone, batch alone, then both at once. Prints web's p95
# (alone / with batch, target: within 2x) and batch's TPS (alone / with web,
# target: >= 80% of what it gets alone minus what web uses), and writes them
# to OUT/summary.md. "What web uses" is the share of the machine web takes
# while both run, measured as web's TPS with batch over web's TPS alone (web
# alone fills the machine): batch's bar is 0.8 x its TPS alone x (1 - that).
#
# Usage: deploy/bench/noisy_neighbour.sh
# Environment (defaults in brackets):
#   BENCH_TABLES [4]  BENCH_TABLE_SIZE [100000]  BENCH_DURATION [30]
#   WEB_CLIENTS [16]  BATCH_CLIENTS [256]  TARGETS [direct,fcfs,equal,web4x]
#   MYPLEX_BIN [target/release/myplex, built when missing]
#   MYPLEX_GROUPS [CPUs]  MYPLEX_MAX_BACKEND [0 = elastic]
#   MYPLEX_POOL_EXTRA (more [pool] lines for every myplex target) []
#   BENCH_OUT [bench-results/noisy-<timestamp>]
#   WEB_NICE [0]: nice value of web's sysbench (diagnosis: a negative value
#     takes the client's own CPU wait out of web's latency; needs root)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
REPO_ROOT=$PWD
log() { printf 'noisy: %s\n' "$*" >&2; }
die() {
    printf 'noisy: ERROR: %s\n' "$*" >&2
    exit 1
}
# shellcheck source=scripts/lib/mariadb.sh
source "$REPO_ROOT/scripts/lib/mariadb.sh"

BENCH_TABLES=${BENCH_TABLES:-4}
BENCH_TABLE_SIZE=${BENCH_TABLE_SIZE:-100000}
BENCH_DURATION=${BENCH_DURATION:-30}
WEB_CLIENTS=${WEB_CLIENTS:-16}
BATCH_CLIENTS=${BATCH_CLIENTS:-256}
TARGETS=${TARGETS:-direct,fcfs,equal,web4x}
MYPLEX_GROUPS=${MYPLEX_GROUPS:-$(nproc)}
MYPLEX_MAX_BACKEND=${MYPLEX_MAX_BACKEND:-0}
OUT=${BENCH_OUT:-bench-results/noisy-$(date -u +%Y%m%dT%H%M%SZ)}
WEB_NICE=${WEB_NICE:-0}
for var in "${!MYPLEX_@}"; do export -n "${var?}"; done

have sysbench || die "sysbench not found"
if [[ -z ${MYPLEX_BIN:-} ]]; then
    MYPLEX_BIN=$REPO_ROOT/target/release/myplex
    [[ -x $MYPLEX_BIN ]] || cargo build --release --bin myplex
fi
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=$(mktemp -d)
DB_PID=""
PROXY_PID=""
cleanup() {
    [[ -n $PROXY_PID ]] && stop_pid "$PROXY_PID" myplex 10 || true
    [[ -n $DB_PID ]] && stop_pid "$DB_PID" mariadbd 60 || true
    rm -rf "$WORK"
}
trap cleanup EXIT

DB_PORT=$(pick_port 0)
mariadb_install_db "$WORK/db"
mariadb_start "$WORK/db" "$DB_PORT" DB_PID --max-connections=2000 \
    --innodb-buffer-pool-size=1G --log-bin=mariadb-bin --binlog-format=ROW --server-id=1
mariadb_setup_users "$WORK/db"
mariadb_sql "$WORK/db" "
CREATE DATABASE IF NOT EXISTS sbtest;
CREATE USER 'web'@'%' IDENTIFIED VIA mysql_native_password USING PASSWORD('webpw');
CREATE USER 'batch'@'%' IDENTIFIED VIA mysql_native_password USING PASSWORD('batchpw');
GRANT ALL PRIVILEGES ON sbtest.* TO 'web'@'%';
GRANT ALL PRIVILEGES ON sbtest.* TO 'batch'@'%';
FLUSH PRIVILEGES;"

# sysbench USER PASSWORD PORT WORKLOAD THREADS SECONDS [run|prepare] > report
sb() {
    local nice=0
    [[ $1 == web ]] && nice=$WEB_NICE
    nice -n "$nice" sysbench "$4" --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$3" \
        --mysql-user="$1" --mysql-password="$2" --mysql-db=sbtest \
        --tables="$BENCH_TABLES" --table-size="$BENCH_TABLE_SIZE" \
        --threads="$5" --time="$6" --percentile=95 --report-interval=0 \
        --mysql-ignore-errors=1213,1020,1205 "${7:-run}"
}
p95() { awk '/95th percentile:/ { print $3 }' "$1"; }
tps() { awk -F'[(]' '/transactions:/ { split($2, a, " "); print a[1] }' "$1"; }

log "preparing sbtest ($BENCH_TABLES x $BENCH_TABLE_SIZE)"
sb root rootpw "$DB_PORT" oltp_read_write 8 0 prepare >"$OUT/prepare.log"

# myplex_config NAME PORT ADMIN_PORT: the config of target NAME.
myplex_config() {
    cat <<EOF
listen = "127.0.0.1:$2"
admin_listen = "127.0.0.1:$3"
[log]
level = "warn"
[backend]
address = "127.0.0.1:$DB_PORT"
user = "root"
password = "rootpw"
[pool]
thread_groups = $MYPLEX_GROUPS
max_backend_connections = $MYPLEX_MAX_BACKEND
max_client_connections = 4000
${MYPLEX_POOL_EXTRA:-}
EOF
    case $1 in
    fcfs)
        printf '[server_users]\nenabled = true\n'
        ;;
    equal | web4x)
        local w=1
        [[ $1 == web4x ]] && w=4
        printf '[[users]]\nname = "web"\npassword = "webpw"\nweight = %s\n' "$w"
        printf '[[users]]\nname = "batch"\npassword = "batchpw"\nweight = 1\n'
        ;;
    esac
}

printf '| target | web p95 alone ms | web p95 with batch ms | ratio (target <= 2) | web TPS alone | web TPS with batch | batch TPS alone | batch TPS with web | batch bar | batch met |\n|---|---|---|---|---|---|---|---|---|---|\n' >"$OUT/summary.md"
IFS=, read -r -a targets <<<"$TARGETS"
for t in "${targets[@]}"; do
    port=$DB_PORT
    if [[ $t != direct ]]; then
        port=$(pick_port 0 "$DB_PORT")
        admin=$(pick_port 0 "$DB_PORT" "$port")
        myplex_config "$t" "$port" "$admin" >"$OUT/$t.toml"
        "$MYPLEX_BIN" --config "$OUT/$t.toml" >"$OUT/$t.myplex.log" 2>&1 &
        PROXY_PID=$!
        wait_for_port "$port" "$PROXY_PID" myplex "$OUT/$t.myplex.log" 30
    fi
    log "$t: web alone"
    sb web webpw "$port" oltp_point_select "$WEB_CLIENTS" "$BENCH_DURATION" >"$OUT/$t.web-alone.log"
    log "$t: batch alone"
    sb batch batchpw "$port" oltp_read_write "$BATCH_CLIENTS" "$BENCH_DURATION" >"$OUT/$t.batch-alone.log"
    log "$t: both"
    sb batch batchpw "$port" oltp_read_write "$BATCH_CLIENTS" "$BENCH_DURATION" >"$OUT/$t.batch-both.log" &
    bpid=$!
    sleep 2
    sb web webpw "$port" oltp_point_select "$WEB_CLIENTS" "$((BENCH_DURATION - 4))" >"$OUT/$t.web-both.log"
    wait "$bpid"
    if [[ -n $PROXY_PID ]]; then
        [[ $t == direct ]] || curl -fsS "http://127.0.0.1:$admin/status" >"$OUT/$t.status.json" || true
        stop_pid "$PROXY_PID" myplex 10
        PROXY_PID=""
    fi
    wa=$(p95 "$OUT/$t.web-alone.log")
    wb=$(p95 "$OUT/$t.web-both.log")
    ratio=$(awk -v a="$wa" -v b="$wb" 'BEGIN { if (a > 0) printf "%.2f", b / a; else print "n/a" }')
    wta=$(tps "$OUT/$t.web-alone.log") wtb=$(tps "$OUT/$t.web-both.log")
    bta=$(tps "$OUT/$t.batch-alone.log") btb=$(tps "$OUT/$t.batch-both.log")
    bar=$(awk -v wa="$wta" -v wb="$wtb" -v ba="$bta" 'BEGIN { if (wa > 0) printf "%.1f", 0.8 * ba * (1 - wb / wa); else print "n/a" }')
    met=$(awk -v b="$btb" -v bar="$bar" 'BEGIN { print (bar != "n/a" && b >= bar) ? "yes" : "no" }')
    printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$t" "$wa" "$wb" "$ratio" \
        "$wta" "$wtb" "$bta" "$btb" "$bar" "$met" >>"$OUT/summary.md"
done
cat "$OUT/summary.md"
