#!/usr/bin/env bash
# Builds the cargo-fuzz targets in fuzz/ (nightly) and runs each for a
# bounded time, one after another, starting from the committed seed corpus
# (fuzz/corpus/<target>, read only) plus what earlier runs found
# (fuzz/corpus-run/<target>, not committed). A target stops at its first
# crash, hang (an input running over 10 s) or out-of-memory (see
# docs/fuzzing.md), keeping the input under fuzz/artifacts/<target>/; the
# others still run, and the script then exits non-zero.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET]     default 20
#   FUZZ_TARGETS="sql framing" scripts/fuzz.sh 300
#
# Prints total execs, exec/s and corpus size per target.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

log() { printf 'fuzz.sh: %s\n' "$*" >&2; }
die() {
    log "ERROR: $*"
    exit 1
}

if [[ -f "${HOME:-/root}/.cargo/env" ]]; then
    # shellcheck source=/dev/null
    source "${HOME:-/root}/.cargo/env"
fi

seconds=${1:-20}
[[ $seconds =~ ^[0-9]+$ && $seconds -gt 0 ]] || die "SECONDS_PER_TARGET must be a positive integer"
cargo +nightly --version >/dev/null 2>&1 || die "no nightly toolchain (rustup toolchain install nightly)"
cargo fuzz --version >/dev/null 2>&1 || die "cargo-fuzz missing (scripts/install-deps.sh installs it)"

cd fuzz
started=$SECONDS
log "building fuzz targets (nightly, release with overflow checks and debug assertions, address sanitizer)"
cargo +nightly fuzz build -O -a
built=$((SECONDS - started))
log "built in ${built}s"

read -r -a targets <<<"${FUZZ_TARGETS:-$(cargo +nightly fuzz list | tr '\n' ' ')}"

# Largest single allocation an input may cause: the compressed-frame
# decoder must not reserve more than the bytes sent can inflate to (4 KiB
# inputs, deflate's 1032:1), the others stay far below 64 MiB.
malloc_limit() {
    case $1 in
        compress) echo 16 ;;
        *) echo 64 ;;
    esac
}

printf '%-16s %12s %10s %8s %s\n' target execs exec/s corpus result >&2
rows=()
failed=()
for t in "${targets[@]}"; do
    mkdir -p "corpus-run/$t" "corpus/$t" "artifacts/$t"
    out="artifacts/$t/last-run.log"
    rc=0
    cargo +nightly fuzz run -O -a "$t" "corpus-run/$t" "corpus/$t" -- \
        -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
        -malloc_limit_mb="$(malloc_limit "$t")" -print_final_stats=1 \
        -artifact_prefix="artifacts/$t/" >"$out" 2>&1 || rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out" | tail -n1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$out" | tail -n1)
    corpus=$(find "corpus-run/$t" "corpus/$t" -type f | wc -l)
    result=ok
    if ((rc != 0)); then
        result="FAILED (rc $rc, log fuzz/$out)"
        failed+=("$t")
        grep -E 'panicked|ERROR: libFuzzer|SUMMARY|Test unit written|deadly signal|timeout' "$out" | head -n 20 >&2 || true
    fi
    row=$(printf '%-16s %12s %10s %8s %s' "$t" "${execs:-?}" "${rate:-?}" "$corpus" "$result")
    rows+=("$row")
    printf '%s\n' "$row" >&2
done

log "summary (${seconds}s per target, build ${built}s, total $((SECONDS - started))s):"
printf '%s\n' "${rows[@]}"
if ((${#failed[@]} > 0)); then
    die "fuzzing found problems in: ${failed[*]} (inputs under fuzz/artifacts/)"
fi
