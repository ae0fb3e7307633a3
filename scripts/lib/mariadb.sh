# shellcheck shell=bash
# Helpers for throwaway MariaDB servers and process handling, shared by
# scripts/demo.sh and deploy/bench/compare.sh. Source it; it defines functions
# only (and MARIADB_CLI when a client is found).
#
# The caller may define log() and die() first; defaults are provided.
#
#   have CMD                       - CMD on PATH?
#   find_bin NAME...               - first NAME on PATH or in /usr/sbin
#   port_in_use PORT               - something listens on 127.0.0.1:PORT?
#   pick_port PREFERRED [EXCL...]  - PREFERRED if free, else a random free port
#                                    below the ephemeral range (0 = random)
#   wait_for_port PORT PID NAME LOGFILE TIMEOUT
#   stop_pid PID NAME TIMEOUT      - SIGTERM, SIGKILL after TIMEOUT seconds
#   mariadb_install_db DIR         - new datadir DIR/data (log DIR/install.log)
#   mariadb_start DIR PORT PIDVAR [ARGS]
#                                  - start mariadbd on DIR/data in the background,
#                                    store its pid in the variable PIDVAR (before
#                                    waiting, so a cleanup trap can stop it) and
#                                    wait until it answers on its socket DIR/sock;
#                                    calls on_mariadb_started PID DIR first if the
#                                    caller defines it
#   mariadb_setup_users DIR        - root/rootpw, app/secret, other/otherpw (all
#                                    mysql_native_password, all privileges) and
#                                    database `test`
#   mariadb_sql DIR SQL            - run SQL as root over the socket DIR/sock
#   mariadb_shutdown DIR PID       - clean shutdown (SIGTERM, wait up to 60 s)

declare -F log >/dev/null || log() { printf '%s\n' "$*" >&2; }
declare -F die >/dev/null || die() {
    printf 'ERROR: %s\n' "$*" >&2
    exit 1
}

have() { command -v "$1" >/dev/null 2>&1; }

find_bin() {
    local name
    for name in "$@"; do
        if have "$name"; then
            command -v "$name"
            return 0
        fi
        if [[ -x /usr/sbin/$name ]]; then
            echo "/usr/sbin/$name"
            return 0
        fi
    done
    return 1
}

MARIADB_CLI=${MARIADB_CLI:-$(find_bin mariadb mysql || true)}

port_in_use() { (: <"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# Listening ports are picked outside the kernel's ephemeral range: a port in
# it may be the local end of some outgoing connection at any moment, and then
# bind() fails with "Address already in use" although nothing listens there.
_ephemeral_range() {
    local lo hi
    read -r lo hi </proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || { lo=32768 hi=60999; }
    echo "$lo $hi"
}

# pick_port PREFERRED [EXCLUDED...]: PREFERRED if free and outside the
# ephemeral range, else a random free one below it (0 = random).
pick_port() {
    local preferred=$1 port excluded _ elo ehi lo hi
    shift
    read -r elo ehi <<<"$(_ephemeral_range)"
    if ((elo > 12000)); then
        lo=10000 hi=$((elo - 1))
    else # unusual kernel setting: fall back to the old range
        lo=20000 hi=60999
    fi
    port=$preferred
    if ((port < 1024 || (port >= elo && port <= ehi && elo > 12000))); then
        port=0
    fi
    for _ in {1..200}; do
        for excluded in "$@"; do
            [[ $port == "$excluded" ]] && port=0
        done
        if ((port != 0)) && ! port_in_use "$port"; then
            echo "$port"
            return 0
        fi
        port=$((lo + RANDOM % (hi - lo + 1)))
    done
    die "could not find a free TCP port"
}

# wait_for_port PORT PID NAME LOGFILE TIMEOUT_SECONDS
wait_for_port() {
    local port=$1 pid=$2 name=$3 logfile=$4 timeout=$5 i
    for ((i = 0; i < timeout * 10; i++)); do
        if ! kill -0 "$pid" 2>/dev/null; then
            cat "$logfile" >&2 || true
            die "$name exited during startup (log above)"
        fi
        port_in_use "$port" && return 0
        sleep 0.1
    done
    cat "$logfile" >&2 || true
    die "$name is not accepting connections on 127.0.0.1:$port after ${timeout}s (log above)"
}

# stop_pid PID NAME TIMEOUT_SECONDS: SIGTERM, then SIGKILL after the timeout.
stop_pid() {
    local pid=$1 name=$2 timeout=$3 i
    [[ -n $pid ]] || return 0
    if kill -0 "$pid" 2>/dev/null; then
        log "stopping $name (pid $pid)"
        kill -TERM "$pid" 2>/dev/null || true
        for ((i = 0; i < timeout * 10; i++)); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        if kill -0 "$pid" 2>/dev/null; then
            log "$name did not stop within ${timeout}s, killing it"
            kill -KILL "$pid" 2>/dev/null || true
        fi
    fi
    wait "$pid" 2>/dev/null || true
}

_mariadb_user_args() {
    if [[ $(id -u) -eq 0 ]]; then
        echo --user=root
    fi
}

# mariadb_install_db DIR: a fresh datadir in DIR/data.
mariadb_install_db() {
    local dir=$1 install_db
    install_db=$(find_bin mariadb-install-db mysql_install_db) || die "mariadb-install-db not found"
    mkdir -p "$dir"
    # shellcheck disable=SC2046 # the optional --user=root is one word or none
    if ! "$install_db" --no-defaults --datadir="$dir/data" \
        --auth-root-authentication-method=normal --skip-test-db --skip-name-resolve \
        $(_mariadb_user_args) >"$dir/install.log" 2>&1; then
        cat "$dir/install.log" >&2
        die "mariadb-install-db failed (output above)"
    fi
}

# mariadb_start DIR PORT PIDVAR [MARIADBD_ARGS...]: start mariadbd on
# DIR/data, listening on 127.0.0.1:PORT and DIR/sock; stores the pid in the
# variable named PIDVAR and returns once the server answers on its socket.
mariadb_start() {
    local _m_dir=$1 _m_port=$2 _m_pidvar=$3 _m_bin _m_i _m_pid
    shift 3
    _m_bin=$(find_bin mariadbd mysqld) || die "mariadbd not found"
    [[ -n $MARIADB_CLI ]] || die "mariadb client not found"
    # shellcheck disable=SC2046
    "$_m_bin" --no-defaults \
        --datadir="$_m_dir/data" \
        --socket="$_m_dir/sock" \
        --pid-file="$_m_dir/mariadbd.pid" \
        --log-error="$_m_dir/error.log" \
        --port="$_m_port" \
        --bind-address=127.0.0.1 \
        --skip-name-resolve \
        $(_mariadb_user_args) \
        "$@" \
        </dev/null >"$_m_dir/mariadbd.out" 2>&1 &
    _m_pid=$!
    printf -v "$_m_pidvar" '%s' "$_m_pid"
    if declare -F on_mariadb_started >/dev/null; then
        on_mariadb_started "$_m_pid" "$_m_dir"
    fi

    for ((_m_i = 0; ; _m_i++)); do
        if ! kill -0 "$_m_pid" 2>/dev/null; then
            cat "$_m_dir/error.log" "$_m_dir/mariadbd.out" >&2 || true
            die "mariadbd exited during startup (error log above)"
        fi
        if "$MARIADB_CLI" --no-defaults --protocol=SOCKET --socket="$_m_dir/sock" -uroot \
            --connect-timeout=2 -e 'SELECT 1' >/dev/null 2>&1 ||
            MYSQL_PWD=rootpw "$MARIADB_CLI" --no-defaults --protocol=SOCKET --socket="$_m_dir/sock" \
                -uroot --connect-timeout=2 -e 'SELECT 1' >/dev/null 2>&1; then
            break
        fi
        if ((_m_i >= 1200)); then
            cat "$_m_dir/error.log" >&2 || true
            die "mariadbd not ready after 120s (error log above)"
        fi
        sleep 0.1
    done
}

# mariadb_sql DIR SQL: run SQL as root over the server's socket (given up after
# MARIADB_SQL_TIMEOUT seconds when that is set).
mariadb_sql() {
    # shellcheck disable=SC2086 # MARIADB_SQL_TIMEOUT: seconds, optional
    MYSQL_PWD=rootpw ${MARIADB_SQL_TIMEOUT:+timeout $MARIADB_SQL_TIMEOUT} "$MARIADB_CLI" --no-defaults --protocol=SOCKET --socket="$1/sock" -uroot \
        --connect-timeout=5 -N -B -e "$2"
}

# mariadb_setup_users DIR: users and database of the test fixture. Run once,
# right after mariadb_install_db + mariadb_start (root has no password yet).
mariadb_setup_users() {
    "$MARIADB_CLI" --no-defaults --protocol=SOCKET --socket="$1/sock" -uroot <<'SQL' ||
DELETE FROM mysql.global_priv WHERE User = '';
FLUSH PRIVILEGES;
CREATE USER IF NOT EXISTS 'root'@'localhost';
ALTER USER 'root'@'localhost' IDENTIFIED VIA mysql_native_password USING PASSWORD('rootpw');
CREATE USER IF NOT EXISTS 'root'@'127.0.0.1';
ALTER USER 'root'@'127.0.0.1' IDENTIFIED VIA mysql_native_password USING PASSWORD('rootpw');
GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
CREATE USER IF NOT EXISTS 'root'@'%';
ALTER USER 'root'@'%' IDENTIFIED VIA mysql_native_password USING PASSWORD('rootpw');
GRANT ALL PRIVILEGES ON *.* TO 'root'@'%' WITH GRANT OPTION;
CREATE USER 'app'@'%' IDENTIFIED VIA mysql_native_password USING PASSWORD('secret');
GRANT ALL PRIVILEGES ON *.* TO 'app'@'%';
CREATE USER 'other'@'%' IDENTIFIED BY 'otherpw';
GRANT ALL PRIVILEGES ON *.* TO 'other'@'%';
CREATE DATABASE IF NOT EXISTS `test`;
FLUSH PRIVILEGES;
SQL
        die "creating users/database on the throwaway MariaDB failed"
}

# mariadb_shutdown DIR PID: clean shutdown (so the datadir can be copied).
mariadb_shutdown() {
    stop_pid "$2" "MariaDB ($1)" 60
}
