#!/usr/bin/env bash
# Prepare the repo-local parts of the client matrix (tests/client_matrix.rs)
# under target/: idempotent, and quiet when everything is already in place.
#   - node mysql2, pinned below, into target/node_modules (npm)
#   - the Python drivers venv at target/pyenv (tests/python/setup_venv.py pins
#     PyMySQL, mysql-connector-python and mariadb)
# The Java scenario is compiled by the test itself (javac at test time).
# System packages (php, perl DBD::MariaDB, Connector/J, node/npm, a JDK,
# libmariadb-dev) come from scripts/install-deps.sh, which also calls this.
#
# A part whose tool is missing is reported on stderr and skipped (exit
# status 1 at the end); the test then reports that client as missing.
set -uo pipefail

# The node driver's version: the single place it is pinned.
MYSQL2_VERSION=3.24.6

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
target=$repo/target
status=0
log() { printf 'clients/setup.sh: %s\n' "$*" >&2; }

mkdir -p "$target"

if command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1; then
    have=$(node -p "require('$target/node_modules/mysql2/package.json').version" 2>/dev/null || true)
    if [[ $have != "$MYSQL2_VERSION" ]]; then
        log "installing mysql2@$MYSQL2_VERSION into $target/node_modules"
        npm install --prefix "$target" --no-save --no-audit --no-fund --loglevel=error \
            "mysql2@$MYSQL2_VERSION" >&2 || {
            log "npm install mysql2@$MYSQL2_VERSION failed"
            status=1
        }
    fi
else
    log "node/npm not found: mysql2 not installed"
    status=1
fi

if command -v python3 >/dev/null 2>&1; then
    python3 "$repo/tests/python/setup_venv.py" "$target/pyenv" || {
        log "could not set up the Python venv at $target/pyenv"
        status=1
    }
else
    log "python3 not found: Python drivers not installed"
    status=1
fi

exit $status
