#!/usr/bin/env bash
# Instructions per statement: myplex's user-space cost, measured without the
# noise of a shared machine. Each binary runs under valgrind's callgrind with
# instrumentation off; after a warm-up (logins, prepares) it is switched on
# for a fixed sysbench load, and the instructions executed are divided by the
# server's Questions in that window. The kernel's share (sockets, wake-ups)
# is not counted: this measures what the proxy's own code costs, and its
# profile (callgrind_annotate the .out file) shows where.
#
# Usage:
#   deploy/bench/icount.sh                          # target/release/myplex
#   BINS="old=/tmp/myplex-old new=target/release/myplex" deploy/bench/icount.sh
#
# Settings: THREADS (8), EVENTS (400 transactions), WL (oltp_read_write),
# SBX (more sysbench options), CFG (lines for [pool]), OUT (/tmp/myplex-icount).
# Needs valgrind and sysbench (apt-get install valgrind sysbench).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
source "$REPO/scripts/lib/mariadb.sh"
D=${OUT:-/tmp/myplex-icount}
rm -rf "$D"
mkdir -p "$D"
P=$(pick_port 0)
AP=$(pick_port 0 "$P")
MP=$(pick_port 0 "$P" "$AP")
mariadb_install_db "$D"
mariadb_start "$D" "$P" PID --log-bin="$D/binlog" --server-id=1 --max-connections=3000 \
  --max-prepared-stmt-count=1000000
trap 'kill $PID 2>/dev/null || true' EXIT
mariadb_setup_users "$D"
mariadb_sql "$D" "CREATE DATABASE IF NOT EXISTS sbtest"
SB="sysbench ${WL:-oltp_read_write} --mysql-host=127.0.0.1 --mysql-user=app --mysql-password=secret --mysql-db=sbtest --tables=2 --table-size=10000 ${SBX:-}"
$SB --mysql-port="$P" --threads=2 prepare >/dev/null
questions() { mariadb_sql "$D" "SHOW GLOBAL STATUS LIKE 'Questions'" | awk '{print $2}'; }
for spec in ${BINS:-current=$REPO/target/release/myplex}; do
  name=${spec%%=*}
  bin=${spec#*=}
  cat > "$D/$name.toml" <<T
listen = "127.0.0.1:$MP"
admin_listen = "127.0.0.1:$AP"
[backend]
address = "127.0.0.1:$P"
user = "app"
password = "secret"
[pool]
thread_groups = 2
${CFG:-}
[[users]]
name = "app"
password = "secret"
T
  valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$D/$name.out" \
    "$bin" --config "$D/$name.toml" > "$D/$name.log" 2>&1 &
  VP=$!
  for _ in $(seq 60); do
    mariadb --no-defaults -h127.0.0.1 -P"$MP" -uapp -psecret -e 'SELECT 1' >/dev/null 2>&1 && break
    sleep 1
  done
  $SB --mysql-port="$MP" --threads="${THREADS:-8}" --events=50 --time=0 run >/dev/null
  q0=$(questions)
  callgrind_control -i on "$VP" >/dev/null
  $SB --mysql-port="$MP" --threads="${THREADS:-8}" --events="${EVENTS:-400}" --time=0 run > "$D/sb-$name.txt"
  callgrind_control -i off "$VP" >/dev/null
  q1=$(questions)
  callgrind_control -d "$VP" >/dev/null
  sleep 1
  kill "$VP"
  wait "$VP" 2>/dev/null || true
  ir=$(cat "$D/$name".out* | awk '/^(summary|totals):/ {s += $2} END {print s + 0}')
  echo "$name: statements=$((q1 - q0)) instructions=$ir per_statement=$((ir / (q1 - q0))) profile=$(ls "$D/$name".out* | tail -1)"
done
