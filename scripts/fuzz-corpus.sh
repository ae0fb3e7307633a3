#!/usr/bin/env bash
# Regenerates the fuzz seed corpus in fuzz/corpus/ from captured real
# traffic: starts a throwaway MariaDB (scripts/lib/mariadb.sh), puts a
# recording TCP relay in front of it, runs real clients through the relay
# (the mariadb CLI plain and compressed, PyMySQL, MySQL Connector/Python,
# MariaDB Connector/Python from target/pyenv) and splits what they and the
# server said into per-target seeds (scripts/fuzz_corpus.py). SQL seeds are
# added from MariaDB's own test cases (/usr/share/mysql/mysql-test/main).
# Output is deterministic in content but not byte-identical between runs
# (scrambles and thread ids differ): commit the result when it changes.
#
#   scripts/fuzz-corpus.sh            # rewrite fuzz/corpus/
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo=$(pwd)

log() { printf 'fuzz-corpus: %s\n' "$*" >&2; }
# shellcheck source=scripts/lib/mariadb.sh
source scripts/lib/mariadb.sh

python=$repo/target/pyenv/bin/python
[[ -x $python ]] || die "no venv at target/pyenv (run scripts/install-deps.sh)"

work=$(mktemp -d /tmp/myplex-fuzz-corpus.XXXXXX)
pid=
cleanup() {
    [[ -n $pid ]] && mariadb_shutdown "$work" "$pid" || true
    rm -rf "$work"
}
trap cleanup EXIT

port=$(pick_port 0)
mariadb_install_db "$work"
mariadb_start "$work" "$port" pid
mariadb_setup_users "$work"
log "mariadb on 127.0.0.1:$port (pid $pid)"

"$python" scripts/fuzz_corpus.py --server-port "$port" --out fuzz/corpus \
    --mysql-test /usr/share/mysql/mysql-test/main
du -sh fuzz/corpus >&2
