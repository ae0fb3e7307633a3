#!/usr/bin/env bash
# Install the system packages needed by the test suite and the demo
# (MariaDB server + client, sysbench, openssl, python3 with venv) on
# Debian/Ubuntu, and the Python MySQL drivers used by tests/integration/python_driver.rs
# into a virtualenv at target/pyenv (versions pinned in
# tests/python/setup_venv.py).
# Idempotent: does nothing if everything is already present.
#
# A system MariaDB started by the package's postinst is harmless (the tests and
# the demo run their own servers on free ports); where possible we prevent it
# from being started at all with a temporary policy-rc.d.
set -euo pipefail

log() { printf 'install-deps: %s\n' "$*" >&2; }
die() {
    log "ERROR: $*"
    exit 1
}
have() { command -v "$1" >/dev/null 2>&1; }

# rustup installs cargo here; non-login shells (CI) may not have it on PATH.
if [[ -f "${HOME:-/root}/.cargo/env" ]]; then
    # shellcheck source=/dev/null
    source "${HOME:-/root}/.cargo/env"
fi

have_mariadbd() { have mariadbd || [[ -x /usr/sbin/mariadbd ]]; }
have_install_db() { have mariadb-install-db || [[ -x /usr/bin/mariadb-install-db ]]; }

packages=()
if ! have_mariadbd || ! have_install_db || ! have mariadb || ! have sysbench; then
    packages+=(mariadb-server mariadb-client sysbench)
fi
if ! have openssl; then
    packages+=(openssl)
fi
# python3 -m venv needs ensurepip, which Debian ships in python3-venv.
if ! have python3 || ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
    packages+=(python3 python3-venv)
fi

if ((${#packages[@]} > 0)); then
    have apt-get || die "missing ${packages[*]} and apt-get is not available; install them manually"
    sudo=()
    if [[ $(id -u) -ne 0 ]]; then
        have sudo || die "need root (or sudo) to install: ${packages[*]}"
        sudo=(sudo)
    fi

    # Keep the package's postinst from starting a system-wide MariaDB.
    policy=/usr/sbin/policy-rc.d
    if [[ ! -e $policy ]]; then
        printf '#!/bin/sh\n# temporary, created by myplex scripts/install-deps.sh\nexit 101\n' |
            "${sudo[@]}" tee "$policy" >/dev/null
        "${sudo[@]}" chmod 755 "$policy"
        # shellcheck disable=SC2064 # expand now: sudo/policy are fixed
        trap "${sudo[*]} rm -f '$policy'" EXIT
    fi

    log "installing: ${packages[*]}"
    "${sudo[@]}" apt-get update
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y "${packages[@]}"
fi

# Verify.
have_mariadbd || die "mariadbd not found after install"
have_install_db || die "mariadb-install-db not found after install"
have mariadb || die "mariadb client not found after install"
have sysbench || die "sysbench not found after install"
have openssl || die "openssl not found after install"
have python3 || die "python3 not found after install"
have cargo || die "cargo not found on PATH (install Rust via rustup: https://rustup.rs)"

# --- Client matrix (tests/integration/client_matrix.rs) ------------------------------
# PHP mysqli (mysqlnd), Perl DBD::MariaDB, MariaDB Connector/J with a JDK,
# node + npm, and libmariadb-dev + a C compiler to build the `mariadb` Python
# package; then mysql2 (npm) and the Python drivers under target/ via
# tests/clients/setup.sh. Idempotent: installs only what is missing.
client_pkgs=()
php -r 'exit(extension_loaded("mysqli") ? 0 : 1);' >/dev/null 2>&1 || client_pkgs+=(php-cli php-mysql)
perl -MDBD::MariaDB -e 1 >/dev/null 2>&1 || client_pkgs+=(libdbd-mariadb-perl)
[[ -f /usr/share/java/mariadb-java-client.jar ]] || client_pkgs+=(libmariadb-java)
have javac || client_pkgs+=(default-jdk-headless)
have node || client_pkgs+=(nodejs)
have npm || client_pkgs+=(npm)
have mariadb_config || client_pkgs+=(libmariadb-dev)
have cc || client_pkgs+=(gcc)
have iconv || client_pkgs+=(libc-bin)
if ((${#client_pkgs[@]} > 0)); then
    have apt-get || die "missing ${client_pkgs[*]} and apt-get is not available; install them manually"
    client_sudo=()
    if [[ $(id -u) -ne 0 ]]; then
        have sudo || die "need root (or sudo) to install: ${client_pkgs[*]}"
        client_sudo=(sudo)
    fi
    log "installing (client matrix): ${client_pkgs[*]}"
    "${client_sudo[@]}" apt-get update
    "${client_sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y "${client_pkgs[@]}"
fi
client_repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$client_repo/tests/clients/setup.sh" || die "tests/clients/setup.sh failed (mysql2 from npm or the Python venv)"
# --- end client matrix -----------------------------------------------------

# Python drivers for tests/integration/python_driver.rs (quiet no-op when up to date).
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python3 "$repo/tests/python/setup_venv.py" "$repo/target/pyenv" ||
    die "could not set up the Python venv at $repo/target/pyenv"

log "ok: $(mariadb --version | head -n1)"
log "ok: $(sysbench --version | head -n1), $(cargo --version)"
log "ok: $("$repo/target/pyenv/bin/python" --version) venv at target/pyenv"

# Fuzzing (scripts/fuzz.sh, run by scripts/test.sh): a nightly toolchain
# and cargo-fuzz. Skipped when present.
if have rustup && ! cargo +nightly --version >/dev/null 2>&1; then
    log "installing the nightly toolchain (for cargo fuzz)"
    rustup toolchain install nightly --profile minimal
fi
cargo +nightly --version >/dev/null 2>&1 || die "no nightly toolchain (rustup toolchain install nightly)"
if ! cargo fuzz --version >/dev/null 2>&1; then
    log "installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi
log "ok: $(cargo fuzz --version), $(cargo +nightly --version)"

# MariaDB's own test suite for tests/integration/conformance.rs: Debian's mariadb-test
# (mariadb-test a.k.a. mysqltest, mariadb-client-test) and mariadb-test-data
# (the cases under /usr/share/mysql/mysql-test). Same version as the server.
if ! have mariadb-test || ! have mariadb-client-test || [[ ! -d /usr/share/mysql/mysql-test/main ]]; then
    have apt-get || die "missing mariadb-test and apt-get is not available; install it manually"
    sudo_mt=()
    if [[ $(id -u) -ne 0 ]]; then
        have sudo || die "need root (or sudo) to install: mariadb-test"
        sudo_mt=(sudo)
    fi
    log "installing: mariadb-test"
    "${sudo_mt[@]}" apt-get update
    "${sudo_mt[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y mariadb-test
fi
have mariadb-test || die "mariadb-test not found after install"
have mariadb-client-test || die "mariadb-client-test not found after install"
[[ -d /usr/share/mysql/mysql-test/main ]] || die "/usr/share/mysql/mysql-test/main missing after install"
log "ok: $(mariadb-test --version | head -n1)"
