#!/usr/bin/env bash
# Reproducible single-machine comparison: myplex vs. MariaDB direct, MariaDB's
# native thread pool, HAProxy (TCP forwarding) and optionally ProxySQL, in one
# run, plus idle-client memory and a sysbench calibration point.
#
# Usage:
#   deploy/bench/compare.sh
#
# What it does (everything on 127.0.0.1, on free ports, removed on exit):
#   1. builds target/release/myplex (unless MYPLEX_BIN is set) and copies it
#      into the work directory, so concurrent rebuilds cannot swap it mid-run;
#      installs haproxy via apt if it is missing.
#   2. creates one sbtest data set (BENCH_TABLES x BENCH_TABLE_SIZE) once, with
#      `myplex bench prepare`, in a "golden" datadir that every server copies.
#   3. per case in BENCH_CASES (buffered: buffer pool 2x the data, preloaded;
#      durable: as buffered, but innodb_flush_log_at_trx_commit=1 and
#      sync_binlog=1, the production-durable pair; iobound: buffer pool =
#      data / 12, O_DIRECT), starts
#        server a: one thread per connection (MariaDB's default)
#        server b: --thread-handling=pool-of-threads --thread-pool-size=CPUs
#      and the targets
#        direct      -> a
#        threadpool  -> b
#        haproxy     -> HAProxy, mode tcp, in front of a (the cost of one hop)
#        myplex      -> myplex in front of a (pool.inflight = MYPLEX_INFLIGHT)
#        myplex-<rt> -> one more myplex with runtime MYPLEX_ALT_RUNTIME (shared
#                       or per_group; only when it is set), otherwise as myplex
#        myplex-oN   -> one more myplex per N in MYPLEX_SWEEP, each its own
#                       process, pool.inflight = "fixed", oversubscribe = N
#        proxysql    -> ProxySQL in front of a (only when PROXYSQL_BIN is set)
#      and measures all of them in ONE `myplex bench run`, so the targets
#      alternate at every client count. A sampler records the CPU time of each
#      process (and of the rest of the machine) during every point; the bench
#      reads the myplex target's /status once a second (its in-flight limit
#      per group over time, charted in report.html, limits.csv).
#   4. calibration: CALIB_CLIENTS clients, oltp_read_write, uniform ids, with
#      sysbench and with `myplex bench`, directly against one server.
#   5. idle memory: IDLE_CLIENTS idle logins to a fresh myplex (and, with
#      IDLE_DIRECT=1, to MariaDB directly); RSS before/after from /proc.
#   6. writes a summary (summary.md: TPS, latency, CPU per statement per
#      process, the issue's ratios, adaptive / best fixed cap) and prints it.
#
# Output: bench-results/<UTC timestamp>/ (or BENCH_OUT) with <case>/report.html,
# results.{csv,json}, tps.svg, p95.svg, limits.csv, bench.log, cpu-samples.csv, logs/, plus
# calibration/, idle-*.json, meta.env and summary.md.
#
# Environment (defaults in brackets):
#   BENCH_TABLES               sbtest tables                           [4]
#   BENCH_TABLE_SIZE           rows per table                          [250000]
#   BENCH_CLIENTS              client counts                           [8,64,256,1024]
#   BENCH_WARMUP               warm-up seconds per point               [5]
#   BENCH_DURATION             measured seconds per point              [10]
#   BENCH_WORKLOAD             oltp_read_write|oltp_read_only|oltp_point_select [oltp_read_write]
#   BENCH_CASES                comma list of buffered,durable,iobound  [buffered,durable,iobound]
#   BENCH_CONNECT_CONCURRENCY  logins in flight while a point connects [128]
#   BENCH_OUT                  output directory                        [bench-results/<timestamp>]
#   BENCH_SKIP                 comma list of calibration,idle to skip  []
#   IOBOUND_DIVISOR            iobound buffer pool = data / this       [12]
#   MYPLEX_BIN                 use this myplex binary, do not build    []
#   MYPLEX_GROUPS              pool.thread_groups                      [CPUs]
#   MYPLEX_OVERSUBSCRIBE       pool.oversubscribe                      [3]
#   MYPLEX_INFLIGHT            pool.inflight of the myplex target (adaptive|fixed) [adaptive]
#   MYPLEX_MAX_BACKEND         pool.max_backend_connections; 0 = myplex's default, the
#                              elastic pool (base 4 x groups x (1 + oversubscribe),
#                              borrowing up to a ceiling learnt from the server) [0]
#   MYPLEX_RUNTIME             runtime of the myplex target (per_group|shared) [per_group]
#   MYPLEX_ALT_RUNTIME         also target myplex-<it>, on this runtime       []
#   MYPLEX_SWEEP               comma list of oversubscribe values N: one more target
#                              myplex-oN each (own process, inflight fixed,
#                              max_backend_connections = max(MYPLEX_MAX_BACKEND,
#                              2 x groups x (1 + N))); e.g. 1,3,7,15,31  []
#   PROXYSQL_BIN               path of a proxysql binary; unset = no proxysql target
#   IDLE_CLIENTS               idle clients for the memory measurement [2000]
#   IDLE_DIRECT                also measure mariadbd with idle clients [1]
#   CALIB_CLIENTS              clients of the calibration point        [32]
#   CALIB_ROUNDS               sysbench/bench alternations             [2]
#   BENCH_STMT_CACHE           stmt_cache_size of the bench clients (at most N
#                              statements kept prepared, LRU); empty = every
#                              statement prepared once and kept, as sysbench []
#   BENCH_QUIET_PCT            before each case, wait while other processes keep
#                              the machine busier than this (% of all CPUs) [30]
#   BENCH_QUIET_WAIT           ... but at most this many seconds       [300]
#   TRANSPORT                  tcp|unix: how EVERY target of the comparison and the
#                              calibration is reached, and how the proxies reach
#                              their server: tcp = 127.0.0.1 ports; unix = the
#                              servers' sockets, HAProxy and myplex listening on
#                              sockets with their backend on the server's socket
#                              (sysbench --mysql-socket). The idle-memory step
#                              stays on TCP. ProxySQL is TCP only here.  [tcp]
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
REPO_ROOT=$PWD
HERE=$REPO_ROOT/deploy/bench

if [[ -t 2 ]]; then
    log() { printf '\033[1mcompare:\033[0m %s\n' "$*" >&2; }
else
    log() { printf 'compare: %s\n' "$*" >&2; }
fi
die() {
    printf 'compare: ERROR: %s\n' "$*" >&2
    exit 1
}

# shellcheck source=scripts/lib/mariadb.sh
source "$REPO_ROOT/scripts/lib/mariadb.sh"

CPUS=$(nproc)
BENCH_TABLES=${BENCH_TABLES:-4}
BENCH_TABLE_SIZE=${BENCH_TABLE_SIZE:-250000}
BENCH_CLIENTS=${BENCH_CLIENTS:-8,64,256,1024}
BENCH_WARMUP=${BENCH_WARMUP:-5}
BENCH_DURATION=${BENCH_DURATION:-10}
BENCH_WORKLOAD=${BENCH_WORKLOAD:-oltp_read_write}
BENCH_CASES=${BENCH_CASES:-buffered,durable,iobound}
BENCH_CONNECT_CONCURRENCY=${BENCH_CONNECT_CONCURRENCY:-128}
BENCH_SKIP=${BENCH_SKIP:-}
IOBOUND_DIVISOR=${IOBOUND_DIVISOR:-12}
MYPLEX_GROUPS=${MYPLEX_GROUPS:-$CPUS}
MYPLEX_OVERSUBSCRIBE=${MYPLEX_OVERSUBSCRIBE:-3}
MYPLEX_MAX_BACKEND=${MYPLEX_MAX_BACKEND:-0}
# The groups' base shares (myplex's default budget without borrowing): the
# floor of the sweep targets and ProxySQL's backend budget.
BASE_BACKEND=$((4 * MYPLEX_GROUPS * (1 + MYPLEX_OVERSUBSCRIBE)))
MYPLEX_INFLIGHT=${MYPLEX_INFLIGHT:-adaptive}
MYPLEX_SWEEP=${MYPLEX_SWEEP:-}
MYPLEX_RUNTIME=${MYPLEX_RUNTIME:-per_group}
MYPLEX_ALT_RUNTIME=${MYPLEX_ALT_RUNTIME:-}
PROXYSQL_BIN=${PROXYSQL_BIN:-}
IDLE_CLIENTS=${IDLE_CLIENTS:-2000}
IDLE_DIRECT=${IDLE_DIRECT:-1}
CALIB_CLIENTS=${CALIB_CLIENTS:-32}
CALIB_ROUNDS=${CALIB_ROUNDS:-2}
BENCH_QUIET_PCT=${BENCH_QUIET_PCT:-30}
BENCH_STMT_CACHE=${BENCH_STMT_CACHE:-}
BENCH_QUIET_WAIT=${BENCH_QUIET_WAIT:-300}
TRANSPORT=${TRANSPORT:-tcp}

# myplex reads MYPLEX_<KEY> / MYPLEX_<SECTION>__<KEY> from its environment as
# configuration (MYPLEX_BIN would be rejected as the unknown key `bin`): keep
# every MYPLEX_* variable out of the environment of the processes we start, so
# the generated config file is the whole configuration.
for var in "${!MYPLEX_@}"; do
    case $var in
    MYPLEX_BIN | MYPLEX_GROUPS | MYPLEX_OVERSUBSCRIBE | MYPLEX_MAX_BACKEND | MYPLEX_INFLIGHT | MYPLEX_SWEEP | MYPLEX_RUNTIME | MYPLEX_ALT_RUNTIME) ;;
    *) log "ignoring $var from the environment (the benchmark's myplex config is generated)" ;;
    esac
    export -n "${var?}"
done

for var in BENCH_TABLES BENCH_TABLE_SIZE BENCH_WARMUP BENCH_DURATION BENCH_CONNECT_CONCURRENCY \
    IOBOUND_DIVISOR MYPLEX_GROUPS IDLE_CLIENTS CALIB_CLIENTS CALIB_ROUNDS; do
    [[ ${!var} =~ ^[1-9][0-9]*$ ]] || die "$var must be a positive integer (got '${!var}')"
done
for var in MYPLEX_OVERSUBSCRIBE MYPLEX_MAX_BACKEND BENCH_QUIET_PCT BENCH_QUIET_WAIT; do
    [[ ${!var} =~ ^[0-9]+$ ]] || die "$var must be a non-negative integer (got '${!var}')"
done
[[ -z $BENCH_STMT_CACHE || $BENCH_STMT_CACHE =~ ^[0-9]+$ ]] || die "BENCH_STMT_CACHE must be empty or an integer"
[[ $BENCH_CLIENTS =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] ||
    die "BENCH_CLIENTS must be a comma list of positive integers (got '$BENCH_CLIENTS')"
[[ -z $MYPLEX_SWEEP || $MYPLEX_SWEEP =~ ^(0|[1-9][0-9]*)(,(0|[1-9][0-9]*))*$ ]] ||
    die "MYPLEX_SWEEP must be empty or a comma list of oversubscribe values (got '$MYPLEX_SWEEP')"
[[ $MYPLEX_RUNTIME == shared || $MYPLEX_RUNTIME == per_group ]] ||
    die "MYPLEX_RUNTIME must be shared or per_group (got '$MYPLEX_RUNTIME')"
[[ -z $MYPLEX_ALT_RUNTIME || $MYPLEX_ALT_RUNTIME == shared || $MYPLEX_ALT_RUNTIME == per_group ]] ||
    die "MYPLEX_ALT_RUNTIME must be empty, shared or per_group (got '$MYPLEX_ALT_RUNTIME')"
[[ $TRANSPORT == tcp || $TRANSPORT == unix ]] || die "TRANSPORT must be tcp or unix (got '$TRANSPORT')"
[[ $TRANSPORT == tcp || -z $PROXYSQL_BIN ]] ||
    die "TRANSPORT=unix: the ProxySQL target is TCP only here; unset PROXYSQL_BIN"
ALT_BACKENDS=0
[[ -n $MYPLEX_ALT_RUNTIME ]] && ALT_BACKENDS=$MYPLEX_MAX_BACKEND
((ALT_BACKENDS == 0)) && [[ -n $MYPLEX_ALT_RUNTIME ]] && ALT_BACKENDS=BORROW_ALL
[[ $MYPLEX_INFLIGHT == adaptive || $MYPLEX_INFLIGHT == fixed ]] ||
    die "MYPLEX_INFLIGHT must be adaptive or fixed (got '$MYPLEX_INFLIGHT')"
BENCH_WORKLOAD=${BENCH_WORKLOAD//-/_}
case $BENCH_WORKLOAD in
oltp_read_write | oltp_read_only | oltp_point_select) ;;
*) die "BENCH_WORKLOAD must be oltp_read_write, oltp_read_only or oltp_point_select" ;;
esac
# clap spells the values with dashes (oltp-read-write).
BENCH_WORKLOAD_ARG=${BENCH_WORKLOAD//_/-}
IFS=, read -r -a CASES <<<"$BENCH_CASES"
for c in "${CASES[@]}"; do
    [[ $c == buffered || $c == durable || $c == iobound ]] ||
        die "BENCH_CASES: unknown case '$c' (buffered, durable, iobound)"
done
skipped() { [[ ,$BENCH_SKIP, == *,$1,* ]]; }

MAX_CLIENTS=0
IFS=, read -r -a _counts <<<"$BENCH_CLIENTS"
for n in "${_counts[@]}"; do ((n > MAX_CLIENTS)) && MAX_CLIENTS=$n; done

# The oversubscribe sweep: N -> backend budget of target myplex-oN. Enough
# backends that the fixed cap of every group can be reached, never fewer than
# the adaptive target has.
SWEEP=()
declare -A SWEEP_BACKENDS=()
SWEEP_BACKENDS_TOTAL=0
if [[ -n $MYPLEX_SWEEP ]]; then
    IFS=, read -r -a SWEEP <<<"$MYPLEX_SWEEP"
    for n in "${SWEEP[@]}"; do
        [[ -z ${SWEEP_BACKENDS[$n]:-} ]] || die "MYPLEX_SWEEP: $n given twice"
        b=$((2 * MYPLEX_GROUPS * (1 + n)))
        ((b < BASE_BACKEND)) && b=$BASE_BACKEND
        ((b < MYPLEX_MAX_BACKEND)) && b=$MYPLEX_MAX_BACKEND
        SWEEP_BACKENDS[$n]=$b
        SWEEP_BACKENDS_TOTAL=$((SWEEP_BACKENDS_TOTAL + b))
    done
fi
# Server a carries every proxy's backends besides the direct target's clients.
[[ $ALT_BACKENDS == BORROW_ALL ]] && ALT_BACKENDS=$MAX_CLIENTS
# An elastic myplex (MYPLEX_MAX_BACKEND=0) may hold up to one backend per
# client, and its idle ones outlive its point (idle_timeout_s) while the next
# target's clients log in: the server gets room for both, and the myplex
# targets a reserve (pool.reserved_server_connections) that leaves the other
# targets theirs, as an operator reserves room for a server's other clients.
ELASTIC_BACKENDS=0
((MYPLEX_MAX_BACKEND == 0)) && ELASTIC_BACKENDS=$MAX_CLIENTS
SERVER_MAX_CONN=$((MAX_CLIENTS + 100 + SWEEP_BACKENDS_TOTAL + ALT_BACKENDS + ELASTIC_BACKENDS))
MYPLEX_RESERVED=$((SERVER_MAX_CONN - MAX_CLIENTS))

# --- file descriptors ------------------------------------------------------------

hard=$(ulimit -Hn)
if [[ $hard == unlimited ]]; then
    ulimit -n 1048576 2>/dev/null || ulimit -n 65536 2>/dev/null || true
else
    ulimit -n "$hard" 2>/dev/null || true
fi
NOFILE=$(ulimit -n)
if ((MAX_CLIENTS + 256 > NOFILE)); then
    die "BENCH_CLIENTS max $MAX_CLIENTS needs more file descriptors than the limit $NOFILE"
fi
if ((IDLE_CLIENTS > 10000)); then
    log "IDLE_CLIENTS=$IDLE_CLIENTS capped at 10000"
    IDLE_CLIENTS=10000
fi
if ((IDLE_CLIENTS + 512 > NOFILE)); then
    IDLE_CLIENTS=$((NOFILE - 512))
    log "fd limit $NOFILE: IDLE_CLIENTS lowered to $IDLE_CLIENTS"
fi

# --- processes and cleanup -------------------------------------------------------

WORKDIR=$(mktemp -d "${TMPDIR:-/tmp}/myplex-compare.XXXXXX")
declare -A RUNNING=() # pid -> name, everything we started and have not stopped yet

track() { RUNNING[$1]=$2; }
# Called by mariadb_start as soon as mariadbd is launched.
on_mariadb_started() { track "$1" "mariadb ${2#"$WORKDIR"/}"; }
stop_tracked() {
    local pid=$1 timeout=${2:-15}
    [[ -n $pid && -n ${RUNNING[$pid]:-} ]] || return 0
    stop_pid "$pid" "${RUNNING[$pid]}" "$timeout"
    unset "RUNNING[$pid]"
}

cleanup() {
    local status=$? pid
    trap - EXIT INT TERM HUP
    set +e
    # Load generators and proxies first, servers last.
    for pid in "${!RUNNING[@]}"; do
        [[ ${RUNNING[$pid]} == mariadb* ]] || stop_tracked "$pid" 15
    done
    for pid in "${!RUNNING[@]}"; do
        stop_tracked "$pid" 60
    done
    rm -rf "$WORKDIR"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# --- prerequisites --------------------------------------------------------------

bash "$REPO_ROOT/scripts/install-deps.sh"
if [[ -f "${HOME:-/root}/.cargo/env" ]]; then
    # shellcheck source=/dev/null
    source "${HOME:-/root}/.cargo/env"
fi
MARIADB_CLI=$(find_bin mariadb mysql) || die "mariadb client not found"
have sysbench || die "sysbench not found; run scripts/install-deps.sh"
have python3 || die "python3 not found"

HAPROXY_BIN=$(find_bin haproxy || true)
if [[ -z $HAPROXY_BIN ]]; then
    have apt-get || die "haproxy is missing and apt-get is not available; install haproxy"
    sudo=()
    if [[ $(id -u) -ne 0 ]]; then
        have sudo || die "need root (or sudo) to install haproxy"
        sudo=(sudo)
    fi
    log "installing haproxy (apt)"
    # Keep the package's postinst from starting a system-wide haproxy.
    policy=/usr/sbin/policy-rc.d
    made_policy=""
    if [[ ! -e $policy ]]; then
        printf '#!/bin/sh\n# temporary, created by myplex deploy/bench/compare.sh\nexit 101\n' |
            "${sudo[@]}" tee "$policy" >/dev/null
        "${sudo[@]}" chmod 755 "$policy"
        made_policy=1
    fi
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y haproxy ||
        { "${sudo[@]}" apt-get update && "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y haproxy; } ||
        install_failed=1
    [[ -n $made_policy ]] && "${sudo[@]}" rm -f "$policy"
    [[ -z ${install_failed:-} ]] || die "apt-get install haproxy failed"
    HAPROXY_BIN=$(find_bin haproxy) || die "haproxy not found after install"
fi

if [[ -n $PROXYSQL_BIN ]]; then
    [[ -x $PROXYSQL_BIN ]] || die "PROXYSQL_BIN=$PROXYSQL_BIN is not an executable"
fi

if [[ -z ${MYPLEX_BIN:-} ]]; then
    have cargo || die "cargo not found on PATH (install Rust via https://rustup.rs)"
    log "building myplex (cargo build --release)"
    cargo build --release
    MYPLEX_BIN=$REPO_ROOT/target/release/myplex
fi
[[ -x $MYPLEX_BIN ]] || die "$MYPLEX_BIN not found or not executable"
# A private copy: others may rebuild target/release/myplex while this runs.
cp "$MYPLEX_BIN" "$WORKDIR/myplex"
MYPLEX=$WORKDIR/myplex

mkdir -p "${BENCH_OUT:=bench-results/$(date -u +%Y%m%dT%H%M%SZ)}"
OUT=$(cd "$BENCH_OUT" && pwd)
log "results: $OUT"

# machine_busy_pct SECONDS: CPU use of the whole machine (% of all CPUs) over
# SECONDS. Called only while nothing of ours runs, so it is foreign load.
machine_busy_pct() {
    local a b
    a=$(head -n1 /proc/stat)
    sleep "$1"
    b=$(head -n1 /proc/stat)
    awk -v a="$a" -v b="$b" 'BEGIN {
        n = split(a, x); split(b, y); busy = 0; total = 0
        for (i = 2; i <= 9 && i <= n; i++) { d = y[i] - x[i]; total += d; if (i != 5 && i != 6) busy += d }
        printf "%d\n", (total > 0 ? 100 * busy / total : 0) }'
}

# wait_for_quiet LABEL: wait (up to BENCH_QUIET_WAIT s) until other processes
# use less than BENCH_QUIET_PCT % of the machine; record what we saw.
wait_for_quiet() {
    local label=$1 busy waited=0
    busy=$(machine_busy_pct 3)
    while ((busy > BENCH_QUIET_PCT && waited < BENCH_QUIET_WAIT)); do
        log "machine is ${busy}% busy with other work (threshold ${BENCH_QUIET_PCT}%); waiting" \
            "($waited/${BENCH_QUIET_WAIT}s)"
        sleep 12
        waited=$((waited + 15))
        busy=$(machine_busy_pct 3)
    done
    if ((busy > BENCH_QUIET_PCT)); then
        log "WARNING: still ${busy}% busy with other work; measuring anyway (results will be noisy)"
    fi
    meta "foreign_busy_pct_before_$label" "$busy"
    meta "waited_s_before_$label" "$waited"
}

# --- metadata --------------------------------------------------------------------

MACHINE="$CPUS CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo) RAM, $(uname -sr)"
{
    echo "machine=$MACHINE"
    echo "cpus=$CPUS"
    echo "started=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "load_at_start=$(cat /proc/loadavg)"
    echo "git_rev=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
    echo "git_dirty_files=$(git status --porcelain 2>/dev/null | wc -l)"
    echo "myplex_sha256=$(sha256sum "$MYPLEX" | cut -d' ' -f1)"
    echo "mariadb=$("$(find_bin mariadbd mysqld)" --version | sed 's/^.*Ver //')"
    echo "haproxy=$("$HAPROXY_BIN" -v | head -n1)"
    echo "sysbench=$(sysbench --version)"
    echo "proxysql=${PROXYSQL_BIN:+$("$PROXYSQL_BIN" --version 2>&1 | head -n1)}"
    echo "tables=$BENCH_TABLES"
    echo "table_size=$BENCH_TABLE_SIZE"
    echo "clients=$BENCH_CLIENTS"
    echo "warmup=$BENCH_WARMUP"
    echo "duration=$BENCH_DURATION"
    echo "workload=$BENCH_WORKLOAD"
    echo "cases=$BENCH_CASES"
    echo "transport=$TRANSPORT"
    echo "myplex_groups=$MYPLEX_GROUPS"
    echo "myplex_oversubscribe=$MYPLEX_OVERSUBSCRIBE"
    echo "myplex_max_backend=$MYPLEX_MAX_BACKEND"
    echo "myplex_inflight=$MYPLEX_INFLIGHT"
    echo "myplex_sweep=$MYPLEX_SWEEP"
    echo "myplex_runtime=$MYPLEX_RUNTIME"
    echo "myplex_alt_runtime=$MYPLEX_ALT_RUNTIME"
    echo "myplex_sweep_backends=$(for n in "${SWEEP[@]}"; do printf '%s:%s ' "$n" "${SWEEP_BACKENDS[$n]}"; done)"
    echo "nofile=$NOFILE"
    echo "stmt_cache=$BENCH_STMT_CACHE"
} >"$OUT/meta.env"
meta() { echo "$1=$2" >>"$OUT/meta.env"; }

# Target URL. stmt_cache_size: without it each `myplex bench` client prepares
# every statement once and keeps it, as sysbench does; BENCH_STMT_CACHE sets
# it, the same for all targets (at most N kept prepared, LRU).
# The argument is an endpoint (see `endpoint`): a port, or a socket path.
url() {
    local u sep="?"
    if [[ $1 == /* ]]; then
        u="mysql://app:secret@localhost/test?socket=$1"
        sep="&"
    else
        u="mysql://app:secret@127.0.0.1:$1/test"
    fi
    if [[ -n $BENCH_STMT_CACHE ]]; then
        u+="${sep}stmt_cache_size=$BENCH_STMT_CACHE"
    fi
    echo "$u"
}

# endpoint PORT SOCKET: how a target is reached under TRANSPORT.
endpoint() {
    if [[ $TRANSPORT == unix ]]; then echo "$2"; else echo "$1"; fi
}

# wait_for_endpoint ENDPOINT PID NAME LOG TIMEOUT: a port or a socket file.
wait_for_endpoint() {
    local ep=$1 pid=$2 name=$3 logfile=$4 timeout=$5 i
    if [[ $ep != /* ]]; then
        wait_for_port "$@"
        return
    fi
    for ((i = 0; i < timeout * 10; i++)); do
        if ! kill -0 "$pid" 2>/dev/null; then
            cat "$logfile" >&2 || true
            die "$name exited during startup (log above)"
        fi
        [[ -S $ep ]] && return 0
        sleep 0.1
    done
    cat "$logfile" >&2 || true
    die "$name is not listening on $ep after ${timeout}s (log above)"
}

# mysql_address ENDPOINT: the form a proxy's config takes.
mysql_address() {
    if [[ $1 == /* ]]; then echo "$1"; else echo "127.0.0.1:$1"; fi
}

# --- servers ---------------------------------------------------------------------

# server_common_args MAX_CONN [FLUSH_LOG_AT_TRX_COMMIT SYNC_BINLOG]: arguments
# every server gets (same for a and b); durability defaults to 2 / 0.
server_common_args() {
    local max_conn=$1 flush=${2:-2} sync_binlog=${3:-0}
    echo --max-connections="$max_conn" \
        --back-log="$max_conn" \
        --max-prepared-stmt-count=1048576 \
        --max-allowed-packet=64M \
        --log-bin=mariadb-bin \
        --binlog-format=ROW \
        --server-id=1 \
        --innodb-flush-log-at-trx-commit="$flush" \
        --sync-binlog="$sync_binlog" \
        --performance-schema=OFF \
        --skip-name-resolve=0
}

# start_server NAME DIR PORT_VAR PID_VAR [ARGS...]: a server on a copy of the
# golden datadir.
start_server() {
    local _s_name=$1 _s_dir=$2 _s_port_var=$3 _s_pid_var=$4 _s_port
    shift 4
    mkdir -p "$_s_dir"
    cp -a "$WORKDIR/golden/data" "$_s_dir/data"
    _s_port=$(pick_port 0)
    log "starting MariaDB '$_s_name' on 127.0.0.1:$_s_port"
    printf -v "$_s_port_var" '%s' "$_s_port"
    mariadb_start "$_s_dir" "$_s_port" "$_s_pid_var" "$@"
}

prepare_golden() {
    local dir=$WORKDIR/golden port pid
    log "creating the data set: $BENCH_TABLES tables x $BENCH_TABLE_SIZE rows"
    mariadb_install_db "$dir"
    port=$(pick_port 0)
    # shellcheck disable=SC2046
    mariadb_start "$dir" "$port" pid $(server_common_args 200) --innodb-buffer-pool-size=1G
    mariadb_setup_users "$dir"
    local t0=$SECONDS
    "$MYPLEX" bench prepare --target "direct=$(url "$port")" \
        --tables "$BENCH_TABLES" --table-size "$BENCH_TABLE_SIZE" 2>&1 | sed 's/^/  /' >&2
    log "data loaded in $((SECONDS - t0)) s"
    stop_tracked "$pid" 120
    DATA_BYTES=$(stat -c %s "$dir"/data/test/sbtest*.ibd | awk '{ s += $1 } END { print s }')
    log "data size: $((DATA_BYTES / 1048576)) MiB (sbtest*.ibd)"
    meta data_bytes "$DATA_BYTES"
    meta prepare_seconds "$((SECONDS - t0))"
}

# --- helpers for a case ----------------------------------------------------------

start_haproxy() {
    local backend_ep=$1 dir=$2 bind
    HAPROXY_PORT=$(pick_port 0)
    HAPROXY_EP=$(endpoint "$HAPROXY_PORT" "$dir/haproxy.sock")
    bind=127.0.0.1:$HAPROXY_PORT
    [[ $HAPROXY_EP == /* ]] && bind="$HAPROXY_EP mode 666"
    local maxconn=$((MAX_CLIENTS + 1000))
    cat >"$dir/haproxy.cfg" <<EOF
# Pure TCP forwarding: the cost of one extra hop, nothing else.
global
    maxconn $maxconn
    nbthread $CPUS

defaults
    mode tcp
    timeout connect 5s
    timeout client 1h
    timeout server 1h

listen mysql
    bind $bind
    maxconn $maxconn
    server a $(mysql_address "$backend_ep")
EOF
    log "starting haproxy on $(mysql_address "$HAPROXY_EP") -> $(mysql_address "$backend_ep")"
    "$HAPROXY_BIN" -db -f "$dir/haproxy.cfg" </dev/null >"$dir/haproxy.log" 2>&1 &
    HAPROXY_PID=$!
    track "$HAPROXY_PID" haproxy
    wait_for_endpoint "$HAPROXY_EP" "$HAPROXY_PID" haproxy "$dir/haproxy.log" 30
}

# start_myplex BACKEND_ENDPOINT DIR MAX_CLIENTS [NAME OVERSUBSCRIBE INFLIGHT MAX_BACKEND RUNTIME]:
# a myplex with config DIR/NAME.toml and log DIR/NAME.log (NAME: myplex);
# sets MYPLEX_PORT, MYPLEX_EP (port or socket, per TRANSPORT), MYPLEX_ADMIN_PORT
# and MYPLEX_PID.
start_myplex() {
    local backend_ep=$1 dir=$2 max_clients=$3 name=${4:-myplex} over=${5:-$MYPLEX_OVERSUBSCRIBE}
    local inflight=${6:-$MYPLEX_INFLIGHT} max_backend=${7:-$MYPLEX_MAX_BACKEND}
    local runtime=${8:-$MYPLEX_RUNTIME}
    MYPLEX_PORT=$(pick_port 0)
    MYPLEX_ADMIN_PORT=$(pick_port 0 "$MYPLEX_PORT")
    MYPLEX_EP=$(endpoint "$MYPLEX_PORT" "$dir/$name.sock")
    cat >"$dir/$name.toml" <<EOF
listen = "$(mysql_address "$MYPLEX_EP")"
admin_listen = "127.0.0.1:$MYPLEX_ADMIN_PORT"
listen_backlog = 4096
runtime = "$runtime"

[backend]
address = "$(mysql_address "$backend_ep")"
user = "app"
password = "secret"

[pool]
mode = "transaction"
# thread_groups = CPUs, oversubscribe 3 (the thread-pool defaults), and
# max_backend_connections = 0: myplex's default elastic budget (a base of
# 4 x groups x (1 + oversubscribe), borrowing while statements wait up to
# @@max_connections - reserved_server_connections; the reserve leaves the
# other targets of this comparison their connections).
# (Sweep targets myplex-oN: inflight fixed, oversubscribe N, more backends.)
thread_groups = $MYPLEX_GROUPS
oversubscribe = $over
inflight = "$inflight"
max_backend_connections = $max_backend
reserved_server_connections = $MYPLEX_RESERVED
max_client_connections = $((max_clients + 100))

[[users]]
name = "app"
password = "secret"
EOF
    log "starting $name on $(mysql_address "$MYPLEX_EP") -> $(mysql_address "$backend_ep")" \
        "(groups $MYPLEX_GROUPS, inflight $inflight, oversubscribe $over, backends $max_backend, runtime $runtime)"
    "$MYPLEX" --config "$dir/$name.toml" </dev/null >"$dir/$name.log" 2>&1 &
    MYPLEX_PID=$!
    track "$MYPLEX_PID" "$name"
    wait_for_endpoint "$MYPLEX_EP" "$MYPLEX_PID" "$name" "$dir/$name.log" 30
    local via=(--protocol=TCP -h127.0.0.1 -P"$MYPLEX_PORT")
    [[ $MYPLEX_EP == /* ]] && via=(--protocol=SOCKET --socket="$MYPLEX_EP")
    MYSQL_PWD=secret "$MARIADB_CLI" --no-defaults "${via[@]}" \
        -uapp --connect-timeout=5 -N -B -e 'SELECT 1' test >/dev/null ||
        die "a query through $name failed (log: $(tail -n 20 "$dir/$name.log"))"
}

start_proxysql() {
    local backend_port=$1 dir=$2
    PROXYSQL_PORT=$(pick_port 0)
    local admin_port
    admin_port=$(pick_port 0 "$PROXYSQL_PORT")
    mkdir -p "$dir/proxysql"
    cat >"$dir/proxysql.cnf" <<EOF
datadir="$dir/proxysql"
admin_variables=
{
    admin_credentials="admin:admin"
    mysql_ifaces="127.0.0.1:$admin_port"
}
mysql_variables=
{
    threads=$CPUS
    max_connections=$((MAX_CLIENTS + 100))
    interfaces="127.0.0.1:$PROXYSQL_PORT"
    monitor_enabled=false
    default_schema="test"
}
EOF
    log "starting proxysql on 127.0.0.1:$PROXYSQL_PORT -> $backend_port (admin $admin_port)"
    "$PROXYSQL_BIN" -f --initial -c "$dir/proxysql.cnf" -D "$dir/proxysql" \
        </dev/null >"$dir/proxysql.log" 2>&1 &
    PROXYSQL_PID=$!
    track "$PROXYSQL_PID" proxysql
    wait_for_port "$admin_port" "$PROXYSQL_PID" proxysql "$dir/proxysql.log" 30
    # Same backend budget as myplex.
    MYSQL_PWD="admin" "$MARIADB_CLI" --no-defaults --protocol=TCP -h127.0.0.1 -P"$admin_port" \
        -uadmin --connect-timeout=5 <<EOF || die "configuring proxysql via its admin interface failed"
DELETE FROM mysql_servers;
INSERT INTO mysql_servers (hostgroup_id, hostname, port, max_connections)
    VALUES (0, '127.0.0.1', $backend_port, $((MYPLEX_MAX_BACKEND > 0 ? MYPLEX_MAX_BACKEND : BASE_BACKEND)));
DELETE FROM mysql_users;
INSERT INTO mysql_users (username, password, default_hostgroup, default_schema)
    VALUES ('app', 'secret', 0, 'test');
LOAD MYSQL SERVERS TO RUNTIME;
LOAD MYSQL USERS TO RUNTIME;
EOF
    wait_for_port "$PROXYSQL_PORT" "$PROXYSQL_PID" proxysql "$dir/proxysql.log" 30
    MYSQL_PWD=secret "$MARIADB_CLI" --no-defaults --protocol=TCP -h127.0.0.1 -P"$PROXYSQL_PORT" \
        -uapp --connect-timeout=5 -N -B -e 'SELECT 1' test >/dev/null ||
        die "a query through proxysql failed (log: $(tail -n 20 "$dir/proxysql.log"))"
}

# Read every page of the data once (buffered case).
preload() {
    local dir=$1 n sql=""
    for ((n = 1; n <= BENCH_TABLES; n++)); do
        sql+="SELECT COUNT(*) FROM test.sbtest$n FORCE INDEX (PRIMARY) WHERE LENGTH(c) > 0;"
        sql+="SELECT SUM(k) FROM test.sbtest$n FORCE INDEX (k_$n);"
    done
    mariadb_sql "$dir" "$sql" >/dev/null
}

# server_vars DIR: the settings that matter, for the record.
server_vars() {
    mariadb_sql "$1" "SELECT CONCAT(variable_name, '=', variable_value) FROM information_schema.global_variables
        WHERE variable_name IN ('THREAD_HANDLING', 'THREAD_POOL_SIZE', 'INNODB_BUFFER_POOL_SIZE',
        'INNODB_FLUSH_METHOD', 'MAX_CONNECTIONS', 'BACK_LOG', 'MAX_PREPARED_STMT_COUNT',
        'INNODB_FLUSH_LOG_AT_TRX_COMMIT', 'SYNC_BINLOG', 'LOG_BIN', 'THREAD_CACHE_SIZE') ORDER BY 1" | paste -sd' '
}

# The process substitution below inherits the bench's redirected stderr, so
# keep a handle on the real one for the console copy.
exec {CONSOLE_FD}>&2
# stamp FILE: write each input line to FILE with a timestamp (to match CPU
# samples to bench points) and, as is, to stderr.
stamp() {
    local line
    while IFS= read -r line; do
        printf '%s %s\n' "$(date +%s.%N)" "$line" >>"$1"
        printf '%s\n' "$line" >&"$CONSOLE_FD"
    done
}

# --- one case --------------------------------------------------------------------

run_case() {
    local case=$1 dir=$WORKDIR/$1 out=$OUT/$1 bp
    mkdir -p "$dir" "$out/logs"
    log "=== case $case ==="
    wait_for_quiet "$case"
    meta "load_before_$case" "$(cat /proc/loadavg)"
    local extra=() flush=2 sync_binlog=0
    if [[ $case == buffered || $case == durable ]]; then
        bp=$((DATA_BYTES * 2 / 1048576))
        ((bp < 256)) && bp=256
        extra=(--innodb-buffer-pool-size="${bp}M")
        if [[ $case == durable ]]; then
            flush=1 sync_binlog=1
        fi
    else
        bp=$((DATA_BYTES / IOBOUND_DIVISOR / 1048576))
        ((bp < 8)) && bp=8
        extra=(--innodb-buffer-pool-size="${bp}M" --innodb-flush-method=O_DIRECT)
    fi
    local common
    read -r -a common <<<"$(server_common_args "$SERVER_MAX_CONN" "$flush" "$sync_binlog")"
    local a_port a_pid b_port b_pid
    start_server "$case-a (one thread per connection)" "$dir/a" a_port a_pid "${common[@]}" "${extra[@]}"
    start_server "$case-b (pool-of-threads)" "$dir/b" b_port b_pid "${common[@]}" "${extra[@]}" \
        --thread-handling=pool-of-threads --thread-pool-size="$CPUS"
    {
        echo "a: $(server_vars "$dir/a")"
        echo "b: $(server_vars "$dir/b")"
    } >"$out/servers.txt"
    if [[ $case == buffered || $case == durable ]]; then
        log "preloading the buffer pools"
        preload "$dir/a"
        preload "$dir/b"
    fi

    # Every target on the same transport (TRANSPORT), proxies included.
    local a_ep b_ep
    a_ep=$(endpoint "$a_port" "$dir/a/sock")
    b_ep=$(endpoint "$b_port" "$dir/b/sock")
    start_haproxy "$a_ep" "$dir"
    start_myplex "$a_ep" "$dir" "$MAX_CLIENTS"
    local targets=(
        --target "direct=$(url "$a_ep")"
        --target "threadpool=$(url "$b_ep")"
        --target "haproxy=$(url "$HAPROXY_EP")"
        --target "myplex=$(url "$MYPLEX_EP")"
    )
    local procs=(bench=0 "mariadb_a=$a_pid" "mariadb_b=$b_pid" "haproxy=$HAPROXY_PID" "myplex=$MYPLEX_PID")
    local main_pid=$MYPLEX_PID main_admin=$MYPLEX_ADMIN_PORT n extra_names=() extra_pids=() extra_admin=()
    local status=(--myplex-status "myplex=http://127.0.0.1:$main_admin/status")
    if [[ -n $MYPLEX_ALT_RUNTIME ]]; then
        local alt=myplex-${MYPLEX_ALT_RUNTIME/per_group/pg}
        start_myplex "$a_ep" "$dir" "$MAX_CLIENTS" "$alt" "" "" "" "$MYPLEX_ALT_RUNTIME"
        extra_names+=("$alt")
        status+=(--myplex-status "$alt=http://127.0.0.1:$MYPLEX_ADMIN_PORT/status")
        targets+=(--target "$alt=$(url "$MYPLEX_EP")")
        procs+=("$alt=$MYPLEX_PID")
        extra_pids+=("$MYPLEX_PID")
        extra_admin+=("$MYPLEX_ADMIN_PORT")
    fi
    for n in "${SWEEP[@]}"; do
        start_myplex "$a_ep" "$dir" "$MAX_CLIENTS" "myplex-o$n" "$n" fixed "${SWEEP_BACKENDS[$n]}"
        targets+=(--target "myplex-o$n=$(url "$MYPLEX_EP")")
        procs+=("myplex-o$n=$MYPLEX_PID")
        extra_names+=("myplex-o$n")
        extra_pids+=("$MYPLEX_PID")
        extra_admin+=("$MYPLEX_ADMIN_PORT")
    done
    PROXYSQL_PID=""
    if [[ -n $PROXYSQL_BIN ]]; then
        start_proxysql "$a_port" "$dir"
        targets+=(--target "proxysql=$(url "$PROXYSQL_PORT")")
        procs+=("proxysql=$PROXYSQL_PID")
    fi

    log "myplex bench run: $BENCH_WORKLOAD, clients $BENCH_CLIENTS, ${BENCH_WARMUP}s warm-up +" \
        "${BENCH_DURATION}s per point, targets: $(printf '%s ' "${targets[@]}" | grep -o '[a-z0-9-]*=mysql' | sed 's/=mysql//' | paste -sd' ')"
    "$MYPLEX" bench run "${targets[@]}" \
        --tables "$BENCH_TABLES" --table-size "$BENCH_TABLE_SIZE" \
        --workload "$BENCH_WORKLOAD_ARG" --clients "$BENCH_CLIENTS" \
        --warmup "$BENCH_WARMUP" --duration "$BENCH_DURATION" \
        --connect-concurrency "$BENCH_CONNECT_CONCURRENCY" \
        "${status[@]}" \
        --machine "$MACHINE; case $case" --out "$out" \
        2>"$out/bench.err" > >(stamp "$out/bench.log") &
    local bench_pid=$!
    track "$bench_pid" "myplex bench"
    procs[0]="bench=$bench_pid"
    python3 "$HERE/cpusample.py" --out "$out/cpu-samples.csv" "${procs[@]}" &
    local sampler_pid=$!
    track "$sampler_pid" "cpu sampler"
    local bench_status=0
    wait "$bench_pid" || bench_status=$?
    unset "RUNNING[$bench_pid]"
    stop_tracked "$sampler_pid" 5
    sleep 0.2 # let the stamp/tee pipeline drain
    meta "load_after_$case" "$(cat /proc/loadavg)"

    # Proxy state after the run, for the record.
    curl -fsS --max-time 5 "http://127.0.0.1:$main_admin/metrics" >"$out/logs/myplex-metrics.txt" 2>/dev/null || true
    curl -fsS --max-time 5 "http://127.0.0.1:$main_admin/status" >"$out/logs/myplex-status.json" 2>/dev/null || true
    local alive=yes i
    for i in "${!extra_pids[@]}"; do
        curl -fsS --max-time 5 "http://127.0.0.1:${extra_admin[$i]}/status" \
            >"$out/logs/${extra_names[$i]}-status.json" 2>/dev/null || true
        kill -0 "${extra_pids[$i]}" 2>/dev/null || alive="no (${extra_names[$i]})"
        stop_tracked "${extra_pids[$i]}" 15
        cp "$dir/${extra_names[$i]}.log" "$dir/${extra_names[$i]}.toml" "$out/logs/"
    done
    kill -0 "$main_pid" 2>/dev/null || alive=no
    meta "myplex_alive_after_$case" "$alive"

    stop_tracked "$main_pid" 15
    stop_tracked "$HAPROXY_PID" 15
    [[ -n $PROXYSQL_PID ]] && stop_tracked "$PROXYSQL_PID" 15
    stop_tracked "$a_pid" 60
    stop_tracked "$b_pid" 60
    cp "$dir/myplex.log" "$dir/myplex.toml" "$dir/haproxy.cfg" "$dir/haproxy.log" "$out/logs/"
    cp "$dir/a/error.log" "$out/logs/mariadb-a.err"
    cp "$dir/b/error.log" "$out/logs/mariadb-b.err"
    [[ -n $PROXYSQL_BIN ]] && cp "$dir/proxysql.log" "$dir/proxysql.cnf" "$out/logs/" 2>/dev/null
    rm -rf "$dir"
    ((bench_status == 0)) || die "myplex bench run failed in case $case (status $bench_status; see $out/bench.err)"
    [[ $alive == yes ]] || die "myplex died during case $case: $alive (see $out/logs/)"
    return 0
}

# --- calibration: sysbench vs myplex bench -------------------------------------------

# calib_wait CLIENT_PID SERVER_PID CSV: sample both processes' CPU until the
# client exits; returns the client's exit status.
calib_wait() {
    local client=$1 server=$2 csv=$3 status=0 sampler
    track "$client" "calibration client"
    python3 "$HERE/cpusample.py" --out "$csv" "client=$client" "mariadbd=$server" &
    sampler=$!
    track "$sampler" "cpu sampler"
    wait "$client" || status=$?
    unset "RUNNING[$client]"
    stop_tracked "$sampler" 5
    return "$status"
}

run_calibration() {
    local dir=$WORKDIR/calib out=$OUT/calibration port pid round
    mkdir -p "$dir" "$out"
    log "=== calibration: $CALIB_CLIENTS clients, oltp_read_write, uniform ids, direct ==="
    wait_for_quiet calibration
    local common bp=$((DATA_BYTES * 2 / 1048576))
    ((bp < 256)) && bp=256
    read -r -a common <<<"$(server_common_args $((CALIB_CLIENTS + 100)))"
    start_server "calibration (one thread per connection)" "$dir/a" port pid "${common[@]}" \
        --innodb-buffer-pool-size="${bp}M"
    preload "$dir/a"
    local ep sb_conn=(--mysql-host=127.0.0.1 --mysql-port="$port")
    ep=$(endpoint "$port" "$dir/a/sock")
    [[ $ep == /* ]] && sb_conn=(--mysql-socket="$ep")
    for ((round = 1; round <= CALIB_ROUNDS; round++)); do
        log "calibration round $round: sysbench (${BENCH_WARMUP}s + ${BENCH_DURATION}s, 1 s reports)"
        # sysbench 1.0 has no --warmup-time: run warm-up + window with 1 s reports
        # and take the window's intervals (summarize.py).
        sysbench oltp_read_write --db-driver=mysql "${sb_conn[@]}" \
            --mysql-user=app --mysql-password=secret --mysql-db=test \
            --tables="$BENCH_TABLES" --table-size="$BENCH_TABLE_SIZE" --rand-type=uniform \
            --threads="$CALIB_CLIENTS" --time=$((BENCH_WARMUP + BENCH_DURATION)) \
            --report-interval=1 --percentile=95 run >"$out/sysbench-$round.log" 2>&1 &
        calib_wait $! "$pid" "$out/cpu-sysbench-$round.csv" || die "sysbench failed (see $out/sysbench-$round.log)"
        log "calibration round $round: myplex bench"
        "$MYPLEX" bench run --target "direct=$(url "$ep")" \
            --tables "$BENCH_TABLES" --table-size "$BENCH_TABLE_SIZE" \
            --workload oltp-read-write --clients "$CALIB_CLIENTS" \
            --warmup "$BENCH_WARMUP" --duration "$BENCH_DURATION" \
            --machine "$MACHINE; calibration" --out "$out/bench-$round" \
            >"$out/bench-$round.log" 2>"$out/bench-$round.err" &
        calib_wait $! "$pid" "$out/cpu-bench-$round.csv" || die "myplex bench failed (see $out/bench-$round.err)"
    done
    stop_tracked "$pid" 60
    rm -rf "$dir"
}

# --- idle clients: RSS per idle connection --------------------------------------------

run_idle() {
    local dir=$WORKDIR/idle port pid
    mkdir -p "$dir"
    log "=== idle clients: $IDLE_CLIENTS ==="
    wait_for_quiet idle
    local common
    read -r -a common <<<"$(server_common_args $((IDLE_CLIENTS + 200)))"
    start_server "idle (one thread per connection)" "$dir/a" port pid "${common[@]}" \
        --innodb-buffer-pool-size=256M
    # idle_clients.py speaks TCP: this step stays on TCP whatever TRANSPORT.
    TRANSPORT=tcp start_myplex "$port" "$dir" "$IDLE_CLIENTS"
    local count_backend="MYSQL_PWD=rootpw '$MARIADB_CLI' --no-defaults --protocol=SOCKET --socket='$dir/a/sock' -uroot -N -B -e \"SELECT COUNT(*) FROM information_schema.processlist WHERE user = 'app'\""
    log "holding $IDLE_CLIENTS idle clients on myplex (pid $MYPLEX_PID)"
    python3 "$HERE/idle_clients.py" --port "$MYPLEX_PORT" --user app --password secret --db test \
        --count "$IDLE_CLIENTS" --pid "$MYPLEX_PID" --label myplex \
        --while-holding "$count_backend" --out "$OUT/idle-myplex.json" >/dev/null ||
        die "idle clients against myplex failed"
    cp "$dir/myplex.log" "$OUT/idle-myplex.log"
    stop_tracked "$MYPLEX_PID" 15
    if [[ $IDLE_DIRECT == 1 ]]; then
        log "holding $IDLE_CLIENTS idle clients on mariadbd directly (pid $pid)"
        python3 "$HERE/idle_clients.py" --port "$port" --user app --password secret --db test \
            --count "$IDLE_CLIENTS" --pid "$pid" --label "mariadbd (one thread per connection)" \
            --while-holding "$count_backend" --out "$OUT/idle-direct.json" >/dev/null ||
            log "WARNING: idle clients against mariadbd failed"
    fi
    stop_tracked "$pid" 60
    rm -rf "$dir"
}

# --- main ------------------------------------------------------------------------------

T0=$SECONDS
prepare_golden
for c in "${CASES[@]}"; do
    run_case "$c"
done
skipped calibration || run_calibration
skipped idle || run_idle
meta finished "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
meta total_seconds "$((SECONDS - T0))"
meta load_at_end "$(cat /proc/loadavg)"

python3 "$HERE/summarize.py" "$OUT" | tee "$OUT/summary.md"
log "done in $((SECONDS - T0)) s; results in $OUT"
