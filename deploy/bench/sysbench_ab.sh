#!/usr/bin/env bash
# A/B with sysbench itself: one MariaDB (binary log on), sysbench 1.0
# `oltp_read_write` (server-side prepared statements, as sysbench uses by
# default) against each target in turn, targets alternating inside every
# round so that the machine's drift hits them all alike.
#
# Usage:
#   deploy/bench/sysbench_ab.sh
#   TARGETS="direct myplex:new=target/release/myplex myplex:old=/tmp/old/myplex" \
#     CLIENTS="256 1024" ROUNDS=2 deploy/bench/sysbench_ab.sh
#
# Targets: `direct`, `direct_tracked` (direct, with the session trackers
# myplex turns on for its backends set as the server's defaults for the
# point: what tracking costs the server), `haproxy` (TCP pass-through, the
# cost of one hop), and `myplex:NAME=BINARY` (a myplex with the defaults plus MYPLEX_TOML's pool
# lines). Prints, per point: TPS, p95 (ms), errors, and for a proxy its own
# CPU time per statement (µs, user+system from /proc, over the server's
# Questions in the same window); writes everything under OUT, with the
# server's global status at the start and end of each measured window.
#
# Environment (defaults in brackets):
#   TARGETS      targets, in alternation order      [direct haproxy myplex:myplex=target/release/myplex]
#   CLIENTS      client counts                      [64 256 1024]
#   ROUNDS       rounds over all targets            [2]
#   TIME         measured seconds per point         [30]
#   WARMUP       seconds before the measured window [5]
#                (a report checkpoint: the last report covers TIME seconds)
#   TABLES       sbtest tables                      [4]
#   ROWS         rows per table                     [100000]
#   CASE         buffered | durable | iobound       [buffered]
#   PS_MODE      sysbench --db-ps-mode (auto|disable) [auto]
#   MYPLEX_TOML  extra lines for myplex's [pool]    []
#   MYPLEX_TOML_<name>  extra [pool] lines for the myplex target <name> only []
#   MYPLEX_BACKEND_<name>  `unix`: that myplex target reaches the server over
#                its Unix socket (clients still reach myplex over TCP) [tcp]
#   OUT          output directory                   [bench-results/sysbench-<UTC timestamp>]
#   PERF_SYSCALLS  1: count each proxy's system calls and context switches
#                over the measured window (`perf stat`, per statement, in
#                OUT/syscalls.txt)                   []
#   PERF_RECORD  1: sample each proxy's CPU over the measured window
#                (`perf record`, OUT/<point>-perf.data); `all`: sample the
#                whole machine instead (load, proxy, server, kernel), every
#                target, direct too                  []
#   PERF_CALLGRAPH  perf record's call-graph option(s), e.g.
#                `--call-graph dwarf,16384` for user-space stacks  [-g]
#   WAIT_SAMPLES 1: sample the server's wait gauges (pending InnoDB reads and
#                fsyncs, row-lock waits, Threads_running) every 0.25 s over
#                the measured window; their means per point in OUT/waits.txt []
#   STATUS_VARS  server status counters reported per transaction, per point
#                (written to OUT/server-per-trx.txt) [Questions Com_stmt_prepare ...]
#   PURGE_MAX    before each point, wait until the server's purge debt
#                (InnoDB's history list: undo logs not purged yet) is at most
#                this, so that no target pays for the previous one's
#                deferred work; -1: do not wait                [1000]
#   PURGE_WAIT   the longest such wait, seconds                [300]
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_ROOT=$(cd "$HERE/../.." && pwd)
log() { printf 'sysbench_ab: %s\n' "$*" >&2; }
die() {
    log "ERROR: $*"
    exit 1
}
# shellcheck source=../../scripts/lib/mariadb.sh
source "$REPO_ROOT/scripts/lib/mariadb.sh"

TARGETS=${TARGETS:-direct haproxy myplex:myplex=$REPO_ROOT/target/release/myplex}
CLIENTS=${CLIENTS:-64 256 1024}
ROUNDS=${ROUNDS:-2}
TIME=${TIME:-30}
WARMUP=${WARMUP:-5}
TABLES=${TABLES:-4}
ROWS=${ROWS:-100000}
CASE=${CASE:-buffered}
PS_MODE=${PS_MODE:-auto}
MYPLEX_TOML=${MYPLEX_TOML:-}
OUT=${OUT:-$REPO_ROOT/bench-results/sysbench-$(date -u +%Y%m%dT%H%M%SZ)}
have sysbench || die "sysbench not found (scripts/install-deps.sh)"
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
W=$(mktemp -d "${TMPDIR:-/tmp}/myplex-sysbench.XXXXXX")
PIDS=()
cleanup() {
    set +e
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$W"
}
trap cleanup EXIT
ulimit -n "$(ulimit -Hn)"

max_clients=0
for c in $CLIENTS; do ((c > max_clients)) && max_clients=$c; done
flush=2 sync=0 extra=()
# ~250 bytes per row with its index: the buffer pool is sized from that.
data_mb=$((TABLES * ROWS / 4000 + 16))
case $CASE in
buffered) extra=(--innodb-buffer-pool-size=$((data_mb * 2 + 128))M) ;;
durable) flush=1 sync=1 extra=(--innodb-buffer-pool-size=$((data_mb * 2 + 128))M) ;;
iobound) extra=(--innodb-buffer-pool-size=$((data_mb / 12 > 24 ? data_mb / 12 : 24))M --innodb-flush-method=O_DIRECT) ;;
*) die "CASE: buffered, durable or iobound" ;;
esac

# --- the server --------------------------------------------------------------------
# Names resolved, the server's default (the fixture skips it): myplex's
# backends then take the server's socket by themselves (backend.local_socket).
DB_PORT=$(pick_port 0)
mariadb_install_db "$W/db"
mariadb_start "$W/db" "$DB_PORT" DB_PID \
    --max-connections=$((max_clients * 2 + 200)) --back-log=$((max_clients + 100)) \
    --max-prepared-stmt-count=1048576 --thread-cache-size=$((max_clients + 100)) \
    --log-bin=mariadb-bin --binlog-format=ROW --server-id=1 \
    --innodb-flush-log-at-trx-commit=$flush --sync-binlog=$sync \
    --innodb-log-file-size=512M --performance-schema=OFF --skip-name-resolve=0 "${extra[@]}"
PIDS+=("$DB_PID")
mariadb_setup_users "$W/db"
log "server on $DB_PORT ($CASE), loading $TABLES x $ROWS rows"
SB_COMMON=(--db-driver=mysql --mysql-host=127.0.0.1 --mysql-user=app --mysql-password=secret
    --mysql-db=test --tables="$TABLES" --table-size="$ROWS")
sysbench oltp_read_write "${SB_COMMON[@]}" --mysql-port="$DB_PORT" --threads=4 prepare >"$W/prepare.log" 2>&1 ||
    die "sysbench prepare: $(tail -n 5 "$W/prepare.log")"

# --- the targets --------------------------------------------------------------------
declare -A PORT=() PID=() ADMIN=()
for t in $TARGETS; do
    lf=$W/db/error.log
    case $t in
    direct | direct_tracked) PORT[$t]=$DB_PORT ;;
    haproxy)
        have haproxy || die "haproxy not installed (apt-get install haproxy)"
        PORT[$t]=$(pick_port 0)
        cat >"$W/haproxy.cfg" <<EOF
global
    maxconn $((max_clients + 1000))
defaults
    mode tcp
    timeout connect 5s
    timeout client 1h
    timeout server 1h
listen mysql
    bind 127.0.0.1:${PORT[$t]}
    maxconn $((max_clients + 1000))
    server a 127.0.0.1:$DB_PORT
EOF
        lf=$OUT/haproxy.log
        haproxy -db -f "$W/haproxy.cfg" </dev/null >"$lf" 2>&1 &
        PID[$t]=$!
        ;;
    myplex:*=*)
        spec=${t#myplex:}
        name=${spec%%=*}
        bin=${spec#*=}
        [[ -x $bin ]] || die "$bin: not an executable"
        cp "$bin" "$W/$name.bin"
        PORT[$t]=$(pick_port 0)
        admin=$(pick_port 0 "${PORT[$t]}")
        ADMIN[$t]=$admin
        backend_address=127.0.0.1:$DB_PORT
        v=MYPLEX_BACKEND_$name
        [[ ${!v:-tcp} == unix ]] && backend_address=$W/db/sock
        cat >"$OUT/$name.toml" <<EOF
listen = "127.0.0.1:${PORT[$t]}"
admin_listen = "127.0.0.1:$admin"
[backend]
address = "$backend_address"
user = "app"
password = "secret"
[pool]
max_client_connections = $((max_clients + 100))
$MYPLEX_TOML
$(v=MYPLEX_TOML_$name; printf '%s\n' "${!v:-}")
[[users]]
name = "app"
password = "secret"
EOF
        lf=$OUT/$name.log
        "$W/$name.bin" --config "$OUT/$name.toml" </dev/null >"$lf" 2>&1 &
        PID[$t]=$!
        ;;
    *) die "unknown target $t" ;;
    esac
    [[ -n ${PID[$t]:-} ]] && PIDS+=("${PID[$t]}")
    wait_for_port "${PORT[$t]}" "${PID[$t]:-$DB_PID}" "$t" "$lf" 30
done

# One counter out of a status file.
status_of() { awk -v n="$2" '$1 == n { print $2 }' "$1"; }
STATUS_VARS=${STATUS_VARS:-Questions Com_stmt_prepare Com_stmt_execute Com_stmt_close Com_set_option Com_select Com_begin Com_commit Connections Innodb_buffer_pool_reads Innodb_rows_read Handler_read_key Innodb_row_lock_waits Threads_created}
# The server's global status as "name value" lines.
# Bounded: a livelocked server (a STUCK point, below) may never answer.
server_status() { MARIADB_SQL_TIMEOUT=60 mariadb_sql "$W/db" "SHOW GLOBAL STATUS" >"$1" || true; }
# Per transaction: each of STATUS_VARS's deltas between two status files
# over the point's transactions (the whole run's, warm-up included).
per_trx() {
    awk -v vars="$STATUS_VARS" -v trx="$3" '
        FNR == NR { a[$1] = $2; next }
        { b[$1] = $2 }
        END {
            n = split(vars, v, " ")
            for (i = 1; i <= n; i++)
                printf " %s=%.2f", v[i], (trx > 0 ? (b[v[i]] - a[v[i]]) / trx : 0)
            print ""
        }' "$1" "$2"
}
# A myplex target's /status and /metrics at the start (0) and end (1) of the
# measured window, next to the point's sysbench output.
proxy_snapshot() {
    [[ -n ${ADMIN[$1]:-} ]] || return 0
    curl -s -m 5 "http://127.0.0.1:${ADMIN[$1]}/status" >"$2-status-$3.json" || true
    curl -s -m 5 "http://127.0.0.1:${ADMIN[$1]}/metrics" >"$2-metrics-$3.txt" || true
}
cpu_ticks() { [[ -n ${1:-} ]] && awk '{ print $14 + $15 }' "/proc/$1/stat" || echo 0; }
# Its user-space share alone.
user_ticks() { [[ -n ${1:-} ]] && awk '{ print $14 }' "/proc/$1/stat" || echo 0; }
# The machine's idle + iowait ticks, summed over its CPUs.
idle_ticks() { awk '/^cpu / { print $5 + $6 }' /proc/stat; }
# Context switches (voluntary + involuntary) over a process's live threads.
ctx_switches() {
    [[ -n ${1:-} ]] || { echo 0; return; }
    cat /proc/"$1"/task/*/status 2>/dev/null | awk '/ctxt_switches:/ { n += $2 } END { print n + 0 }'
}
# Read- and write-family system calls of a process (all its threads).
# The server's wait gauges, sampled every 0.25 s for $2 seconds into $1 (one
# "name value" line per gauge and sample).
WAIT_GAUGES="'Innodb_data_pending_reads','Innodb_data_pending_fsyncs','Innodb_os_log_pending_fsyncs','Innodb_row_lock_current_waits','Threads_running'"
sample_waits() {
    local end=$((SECONDS + $2))
    while ((SECONDS < end)); do
        MARIADB_SQL_TIMEOUT=5 mariadb_sql "$W/db" "SHOW GLOBAL STATUS WHERE Variable_name IN ($WAIT_GAUGES)" >>"$1" || true
        sleep 0.25
    done
}
# Purge debt: transactions whose undo logs the server has not purged yet. A
# server with many runnable threads starves its purge threads and defers that
# work (the debt grows through a point); the next point on the same server
# then pays it. Each point starts once the debt is drained, and reports the
# debt it left.
history_len() {
    MARIADB_SQL_TIMEOUT=10 mariadb_sql "$W/db" "SHOW GLOBAL STATUS LIKE 'Innodb_history_list_length'" |
        awk '{ print $2 }'
}
drain_purge() {
    local start=$SECONDS h
    h=$(history_len)
    while ((PURGE_MAX >= 0 && ${h:-0} > PURGE_MAX && SECONDS - start < PURGE_WAIT)); do
        sleep 1
        h=$(history_len)
    done
    echo "$((SECONDS - start)) ${h:-0}"
}
PURGE_MAX=${PURGE_MAX:-1000}
PURGE_WAIT=${PURGE_WAIT:-300}
io_syscalls() { [[ -n ${1:-} ]] && awk '/^sysc[rw]:/ { n += $2 } END { print n + 0 }' "/proc/$1/io" 2>/dev/null || echo 0; }

printf '%-8s %-6s %-24s %9s %9s %7s %10s\n' round clients target tps p95_ms errors cpu_us/stmt | tee "$OUT/summary.txt"
for ((r = 1; r <= ROUNDS; r++)); do
    for c in $CLIENTS; do
        for t in $TARGETS; do
            f="$OUT/r$r-c$c-${t%%=*}.txt"
            f=${f//:/_}
            read -r drained debt_before < <(drain_purge)
            ((drained > 0)) && log "r$r c$c $t: waited ${drained}s for the purge debt to fall to $debt_before"
            [[ $t == direct_tracked ]] && mariadb_sql "$W/db" "SET GLOBAL session_track_schema=ON, \
                session_track_state_change=ON, session_track_system_variables='*'" >/dev/null
            # A target whose server stops committing (4,096 direct clients
            # I/O-bound: the buffer pool livelocks) never lets sysbench end:
            # it is stopped 3 minutes past its time and reported STUCK. The
            # server is still busy with its statements after that: run such
            # a point last, or alone.
            timeout -s KILL $((TIME + WARMUP + 180)) \
                sysbench oltp_read_write "${SB_COMMON[@]}" --mysql-port="${PORT[$t]}" \
                --db-ps-mode="$PS_MODE" --threads="$c" --time=$((TIME + WARMUP)) --report-checkpoints="$WARMUP" \
                --rand-type=uniform --report-interval=0 --mysql-ignore-errors=1213,1205,1317 \
                run >"$f" 2>&1 &
            sb=$!
            # The counters cover the measured window (after the warm-up
            # checkpoint), as the last report does: sysbench's clock starts
            # once its threads have started.
            for ((i = 0; i < 600; i++)); do
                grep -q 'Threads started' "$f" 2>/dev/null || ! kill -0 "$sb" 2>/dev/null && break
                sleep 0.1
            done
            sleep "$WARMUP"
            server_status "$W/s0"
            proxy_snapshot "$t" "${f%.txt}" 0
            q0=$(status_of "$W/s0" Questions) c0=$(cpu_ticks "${PID[$t]:-}") d0=$(cpu_ticks "$DB_PID") i0=$(idle_ticks) t0=$(date +%s.%N)
            u0=$(user_ticks "${PID[$t]:-}") x0=$(ctx_switches "${PID[$t]:-}") y0=$(io_syscalls "${PID[$t]:-}") z0=$(ctx_switches "$DB_PID")
            rc=0 perf_pid=
            if [[ ${PERF_SYSCALLS:-} == 1 && -n ${PID[$t]:-} ]]; then
                ev=sched:sched_switch
                for sc in sendto recvfrom sendmsg recvmsg read write readv writev epoll_wait epoll_pwait \
                    epoll_ctl futex sched_yield accept4 close; do ev+=,syscalls:sys_enter_$sc; done
                perf stat -x, -e "$ev" -p "${PID[$t]}" -o "${f%.txt}-perf.csv" -- sleep "$TIME" >/dev/null 2>&1 &
                perf_pid=$!
            fi
            rec_pid=
            if [[ ${PERF_RECORD:-} == all || (${PERF_RECORD:-} == 1 && -n ${PID[$t]:-}) ]]; then
                read -ra callgraph <<<"${PERF_CALLGRAPH:--g}"
                scope=(-p "${PID[$t]:-}")
                [[ $PERF_RECORD == all ]] && scope=(-a)
                perf record -q -F 999 "${callgraph[@]}" "${scope[@]}" -o "${f%.txt}-perf.data" -- sleep "$TIME" >/dev/null 2>&1 &
                rec_pid=$!
            fi
            # The debt at the window's end (sysbench's clients gone, purge
            # catches up at once).
            (sleep "$(awk -v t="$TIME" 'BEGIN { print (t > 2 ? t - 1 : t / 2) }')" && history_len >"$W/h1") &
            hist_pid=$!
            wait_pid=
            if [[ ${WAIT_SAMPLES:-} == 1 ]]; then
                : >"${f%.txt}-waits.txt"
                sample_waits "${f%.txt}-waits.txt" "$TIME" &
                wait_pid=$!
            fi
            wait "$sb" || rc=$?
            [[ -n $wait_pid ]] && wait "$wait_pid"
            [[ -n $perf_pid ]] && wait "$perf_pid"
            [[ -n $rec_pid ]] && wait "$rec_pid"
            wait "$hist_pid" || true
            c1=$(cpu_ticks "${PID[$t]:-}") d1=$(cpu_ticks "$DB_PID") i1=$(idle_ticks) t1=$(date +%s.%N)
            u1=$(user_ticks "${PID[$t]:-}") x1=$(ctx_switches "${PID[$t]:-}") y1=$(io_syscalls "${PID[$t]:-}") z1=$(ctx_switches "$DB_PID")
            server_status "$W/s1"
            proxy_snapshot "$t" "${f%.txt}" 1
            cp "$W/s0" "${f%.txt}-server-status-0.txt"
            cp "$W/s1" "${f%.txt}-server-status-1.txt"
            [[ $t == direct_tracked ]] && mariadb_sql "$W/db" "SET GLOBAL session_track_state_change=DEFAULT, \
                session_track_system_variables=DEFAULT" >/dev/null
            q1=$(status_of "$W/s1" Questions)
            # The last report is the measured window's.
            tps=$(awk '/transactions:/ { gsub(/\(/, "", $3); v = $3 } END { print v }' "$f")
            p95=$(awk '/95th percentile:/ { v = $3 } END { print v }' "$f")
            errs=$(awk '/ignored errors:/ { v = $3 } END { print v }' "$f")
            ((rc == 137)) && tps=STUCK
            cpu=-
            if [[ -n ${PID[$t]:-} ]] && ((q1 > q0)); then
                cpu=$(awk -v t=$((c1 - c0)) -v q=$((q1 - q0)) -v hz="$(getconf CLK_TCK)" \
                    'BEGIN { printf "%.1f", t / hz * 1e6 / q }')
            fi
            printf '%-8s %-6s %-24s %9s %9s %7s %10s\n' "$r" "$c" "${t%%=*}" "${tps:-FAIL}" "${p95:--}" \
                "${errs:--}" "$cpu" | tee -a "$OUT/summary.txt"
            # The measured window's transactions (the last report's).
            all=$(awk '/transactions:/ { n = $2 } END { print n + 0 }' "$f")
            # CPU per transaction (µs) of the server and the proxy, the
            # machine's idle share, and per transaction the proxy's context
            # switches and read/write system calls and the server's context
            # switches (its threads alive at both ends), over the measured window.
            cpus=$(awk -v s=$((d1 - d0)) -v p=$((c1 - c0)) -v i=$((i1 - i0)) -v n="$all" \
                -v hz="$(getconf CLK_TCK)" -v secs="$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" -v ncpu="$(nproc)" \
                -v pu=$((u1 - u0)) -v px=$((x1 - x0)) -v py=$((y1 - y0)) -v sz=$((z1 - z0)) \
                -v h0="$(status_of "$W/s0" Innodb_history_list_length)" -v h1="$(cat "$W/h1" 2>/dev/null)" -v hd="$drained" \
                'BEGIN { if (n < 1) n = 1; printf " server_us=%.0f proxy_us=%.0f (user %.0f) idle=%.0f%% proxy_cs=%.1f proxy_rw=%.1f server_cs=%.1f purge_debt=%d->%d (%.2f/trx, drained %ds before)", s / hz * 1e6 / n, p / hz * 1e6 / n, pu / hz * 1e6 / n, 100 * i / hz / secs / ncpu, px / n, py / n, sz / n, h0, h1, (h1 - h0) / n, hd }')
            printf 'r%s c%s %s:%s%s\n' "$r" "$c" "${t%%=*}" "$cpus" "$(per_trx "$W/s0" "$W/s1" "$all")" >>"$OUT/server-per-trx.txt"
            if [[ -s ${f%.txt}-waits.txt ]]; then
                awk -v head="r$r c$c ${t%%=*}:" '
                    { sum[$1] += $2; n[$1]++; if ($2 > max[$1]) max[$1] = $2 }
                    END { line = head; for (k in sum) line = line sprintf(" %s=%.2f(max %d)", k, sum[k] / n[k], max[k]); print line " (means over " n["Threads_running"] " samples)" }' \
                    "${f%.txt}-waits.txt" >>"$OUT/waits.txt"
            fi
            if [[ -f ${f%.txt}-perf.csv ]]; then
                awk -F, -v q=$((q1 - q0)) -v head="r$r c$c ${t%%=*}:" '
                    $3 ~ /:/ && q > 0 { sub(/.*:(sys_enter_)?/, "", $3); line = line sprintf(" %s=%.2f", $3, $1 / q) }
                    END { print head line " (per statement)" }' "${f%.txt}-perf.csv" >>"$OUT/syscalls.txt"
            fi
        done
    done
done
log "results in $OUT"
