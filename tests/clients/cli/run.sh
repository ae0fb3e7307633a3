#!/usr/bin/env bash
# Client-matrix scenario for the `mariadb` command-line client (libmariadb).
# Run by tests/client_matrix.rs once against MariaDB directly and once through
# myplex; the outputs must be identical apart from the query times, which the
# harness replaces.
#
# Usage: run.sh VARIANT
#   plain     --default-character-set=utf8mb4
#   compress  --compress (protocol compression) and utf8mb4
#   latin1    --default-character-set=latin1
# Connection from the environment: CM_HOST CM_PORT CM_USER CM_PASSWORD CM_DB.
#
# 1. scenario.sql on stdin with --force (continue after errors), -vvv (echo
#    each statement, print affected rows and times), --table, --show-warnings.
# 2. -e with two statements (the client splits them) and --force.
# 3. SELECT 'done'.
set -u
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
variant=${1:-plain}
case $variant in
plain) opts=(--default-character-set=utf8mb4) ;;
compress) opts=(--compress --default-character-set=utf8mb4) ;;
latin1) opts=(--default-character-set=latin1) ;;
*)
    echo "unknown variant $variant" >&2
    exit 2
    ;;
esac
cli=(mariadb --no-defaults --ssl=0 --protocol=TCP "--host=$CM_HOST" "--port=$CM_PORT"
    "--user=$CM_USER" "--password=$CM_PASSWORD" "${opts[@]}" "$CM_DB")

err=$(mktemp)
trap 'rm -f "$err"' EXIT
# stderr is unbuffered and stdout is not: print each separately.
show_stderr() {
    echo "-- stderr"
    cat "$err"
}

echo "variant: $variant"
echo "== stdin"
if [[ $variant == latin1 ]]; then
    # The statements must reach the server in the connection's charset.
    iconv -f UTF-8 -t LATIN1//TRANSLIT "$here/scenario.sql" |
        "${cli[@]}" --force -vvv --table --show-warnings 2>"$err"
else
    "${cli[@]}" --force -vvv --table --show-warnings <"$here/scenario.sql" 2>"$err"
fi
echo "exit: $?"
show_stderr
echo "== -e"
"${cli[@]}" --force -e "SELECT 1 AS a; SELECT 2 AS b; SELECT * FROM nosuch; SELECT @@collation_connection" 2>"$err"
echo "exit: $?"
show_stderr
# "done" only from the server: the harness treats a direct run without it as
# broken, so a CLI that cannot connect at all cannot pass by failing alike.
"${cli[@]}" -N -e "SELECT 'done'" 2>&1
