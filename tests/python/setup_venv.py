#!/usr/bin/env python3
"""Create (or repair) the virtualenv that tests/python_driver.rs runs
driver_check.py with, holding the pinned MySQL drivers below.

Usage: python3 tests/python/setup_venv.py VENV_DIR

Idempotent and quiet: when VENV_DIR/bin/python already imports the pinned
versions it does nothing and prints nothing. Otherwise it creates the venv
(`python -m venv`) and runs `pip install --quiet` with the pins. A lock file
next to the venv serialises concurrent callers (install-deps.sh and a
`cargo test` that found the venv missing).

This file is the single place where the driver versions are pinned:
scripts/install-deps.sh, tests/python_driver.rs and (through
tests/clients/setup.sh) tests/client_matrix.rs call it.
"""

import fcntl
import os
import subprocess
import sys
import venv

# distribution name -> exact version. mysql-connector-python >= 9 (26.x is
# the calendar-versioned successor of 9.x) has the pure-Python protocol with
# server-side prepared statements (`cursor(prepared=True)`, `use_pure=True`).
# `mariadb` (MariaDB Connector/Python, used by tests/client_matrix.rs) is a C
# extension built against libmariadb: it needs Debian's libmariadb-dev
# (mariadb_config) and a C compiler, which scripts/install-deps.sh installs.
PINS = {
    "mysql-connector-python": "26.10.0",
    "PyMySQL": "1.2.4",
    "mariadb": "1.1.14",
}

# Run inside the venv: exits 0 only when every pin is installed at its exact
# version and the modules import.
CHECK = """
import importlib.metadata as md, sys
pins = %r
for name, want in pins.items():
    try:
        have = md.version(name)
    except md.PackageNotFoundError:
        sys.exit(f"{name} not installed")
    if have != want:
        sys.exit(f"{name} {have} installed, {want} pinned")
import mysql.connector, pymysql, mariadb  # noqa: E401,F401
""" % (PINS,)


def venv_ok(python: str) -> bool:
    if not os.access(python, os.X_OK):
        return False
    r = subprocess.run([python, "-c", CHECK], capture_output=True, text=True)
    return r.returncode == 0


def main() -> int:
    if len(sys.argv) != 2:
        print(f"usage: {sys.argv[0]} VENV_DIR", file=sys.stderr)
        return 2
    venv_dir = os.path.abspath(sys.argv[1])
    python = os.path.join(venv_dir, "bin", "python")
    if venv_ok(python):
        return 0

    os.makedirs(os.path.dirname(venv_dir), exist_ok=True)
    with open(venv_dir + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        # Another caller may have finished the job while we waited.
        if venv_ok(python):
            return 0
        print(f"setup_venv: creating {venv_dir} with {PINS}", file=sys.stderr)
        if not os.access(python, os.X_OK):
            # clear=True: a half-created directory is started afresh.
            venv.EnvBuilder(with_pip=True, clear=True).create(venv_dir)
        pins = [f"{name}=={version}" for name, version in PINS.items()]
        subprocess.run(
            [
                python,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--no-input",
                *pins,
            ],
            check=True,
        )
        r = subprocess.run([python, "-c", CHECK], capture_output=True, text=True)
        if r.returncode != 0:
            print(
                f"setup_venv: {venv_dir} still unusable after pip install: "
                f"{r.stderr.strip()}",
                file=sys.stderr,
            )
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
