#!/usr/bin/env bash
# What a procedure-heavy load costs through myplex: the checks after a
# statement that runs stored code the proxy cannot see into (issue 16 A.3:
# user variables counted, the role read, the backend reset before another
# client gets it) against the same load direct, next to a load of plain
# statements doing the same work (its ratio is the hop's own price).
#
# One MariaDB (binary log on), one myplex on its defaults; mariadb-slap runs
# each query QUERIES times over CONCURRENCY connections, ROUNDS rounds,
# targets alternating. Prints queries per second per target and query, and
# the myplex / direct ratios.
#
# Usage: deploy/bench/procedure_load.sh   (BIN, CONCURRENCY, QUERIES, ROUNDS, OUT)
set -euo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
source "$REPO/scripts/lib/mariadb.sh"
BIN=${BIN:-$REPO/target/release/myplex}
D=${OUT:-/tmp/myplex-procedure-load}
rm -rf "$D"
mkdir -p "$D"
P=$(pick_port 0)
AP=$(pick_port 0 "$P")
MP=$(pick_port 0 "$P" "$AP")
mariadb_install_db "$D"
mariadb_start "$D" "$P" PID --log-bin="$D/binlog" --server-id=1 --max-connections=1000
trap 'kill $PID ${MPID:-} 2>/dev/null || true' EXIT
mariadb_setup_users "$D"
mariadb_sql "$D" "CREATE DATABASE IF NOT EXISTS pl;
USE pl;
CREATE TABLE pl.t (id INT PRIMARY KEY, v INT) ENGINE=InnoDB;
INSERT INTO pl.t SELECT seq, 0 FROM seq_1_to_1000;
GRANT ALL ON pl.* TO app;
DELIMITER //
CREATE PROCEDURE pl.touch(n INT) BEGIN SELECT v FROM pl.t WHERE id = n; UPDATE pl.t SET v = v + 1 WHERE id = n; END//
DELIMITER ;"
cat > "$D/myplex.toml" <<T
listen = "127.0.0.1:$MP"
admin_listen = "127.0.0.1:$AP"
[backend]
address = "127.0.0.1:$P"
user = "app"
password = "secret"
[[users]]
name = "app"
password = "secret"
T
"$BIN" --config "$D/myplex.toml" > "$D/myplex.log" 2>&1 &
MPID=$!
wait_for_port "$MP" "$MPID" myplex "$D/myplex.log" 30
sleep 2 # the first catalog reading
declare -A QUERY=(
  [call]="CALL pl.touch(FLOOR(1 + RAND() * 1000))"
  [plain]="SELECT v FROM pl.t WHERE id = 7; UPDATE pl.t SET v = v + 1 WHERE id = 7"
)
run() { # port query -> queries per second
  local out
  out=$(mariadb-slap --no-defaults -h127.0.0.1 -P"$1" -uapp -psecret --create-schema=pl \
    --concurrency="${CONCURRENCY:-16}" --number-of-queries="${QUERIES:-20000}" \
    --iterations=1 --query="$2" --delimiter=';' 2>&1)
  awk -v n="${QUERIES:-20000}" '/Average number of seconds to run all queries/ {printf "%.0f", n / $9}' <<<"$out"
}
echo "query target round qps" > "$D/results.txt"
for r in $(seq "${ROUNDS:-2}"); do
  for q in call plain; do
    for t in direct myplex; do
      port=$P
      [[ $t == myplex ]] && port=$MP
      echo "$q $t $r $(run "$port" "${QUERY[$q]}")" | tee -a "$D/results.txt"
    done
  done
done
awk 'NR > 1 {s[$1" "$2] += $4; n[$1" "$2]++}
  END {for (q in s) printf "%s mean qps %.0f\n", q, s[q] / n[q]}' "$D/results.txt" | sort
