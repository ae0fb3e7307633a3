#!/usr/bin/env bash
# Run the whole test suite (unit tests + integration tests against real,
# throwaway MariaDB servers started by tests/common/mariadb.rs).
# Works on a fresh Debian/Ubuntu machine with a Rust toolchain installed.
# Extra arguments are passed to `cargo test`.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

log() { printf 'test.sh: %s\n' "$*" >&2; }

bash scripts/install-deps.sh

# rustup installs cargo here; non-login shells (CI) may not have it on PATH.
if [[ -f "${HOME:-/root}/.cargo/env" ]]; then
    # shellcheck source=/dev/null
    source "${HOME:-/root}/.cargo/env"
fi

# Load tests open thousands of sockets; raise the soft fd limit to the hard one.
hard=$(ulimit -Hn)
if [[ $hard == unlimited ]]; then
    ulimit -n 1048576 2>/dev/null || ulimit -n 65536 2>/dev/null || true
else
    ulimit -n "$hard" 2>/dev/null || true
fi
log "open files limit: $(ulimit -n)"

export RUST_BACKTRACE="${RUST_BACKTRACE:-1}"

log "running: cargo test --release $*"
cargo test --release "$@"

# A short coverage-guided fuzzing run of every parser a peer can reach
# (docs/fuzzing.md): 10 s per target for the whole suite, none when only
# some tests were asked for (an argument that is not a flag, such as a test
# name or `--test x`); FUZZ_SECONDS overrides (0 skips it).
default_fuzz=10
for arg in "$@"; do
    case $arg in
        --no-fail-fast | --quiet | -q | --nocapture) ;;
        *) default_fuzz=0 ;;
    esac
done
fuzz_seconds=${FUZZ_SECONDS:-$default_fuzz}
if ((fuzz_seconds > 0)); then
    log "running: scripts/fuzz.sh $fuzz_seconds"
    bash scripts/fuzz.sh "$fuzz_seconds"
fi
