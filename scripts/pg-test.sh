#!/usr/bin/env bash
# A private PostgreSQL for tests and benchmarks: initdb + pg_ctl in a directory of the
# caller's, listening only on a Unix socket inside it (no TCP port, no system service).
# PostgreSQL refuses to run as root, so as root the server runs as 'nobody'.
#
#   scripts/pg-test.sh start DIR      create (if new) and start; prints the base URL
#   scripts/pg-test.sh url DIR [DB]   the URL of database DB (default postgres)
#   scripts/pg-test.sh createdb DIR DB
#   scripts/pg-test.sh restart DIR    stop (fast) and start again, same data
#   scripts/pg-test.sh kill DIR       SIGKILL the postmaster (a crash), leave the data
#   scripts/pg-test.sh halt DIR       stop, keep DIR (a later start serves the same data)
#   scripts/pg-test.sh stop DIR       stop and remove DIR
set -euo pipefail

cmd=${1:?usage: pg-test.sh start|url|createdb|restart|kill|halt|stop DIR [DB]}
dir=${2:?a directory}
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[[ -x $bin/initdb ]] || {
    echo "pg-test.sh: PostgreSQL server binaries not found (apt-get install postgresql)" >&2
    exit 1
}
user=$(id -un)
as_user() { "$@"; }
if [[ $(id -u) -eq 0 ]]; then
    user=nobody
    as_user() { setpriv --reuid=nobody --regid=nogroup --clear-groups --reset-env -- "$@"; }
fi

url() { printf 'postgresql:///%s?host=%s&user=%s\n' "${1:-postgres}" "$dir" "$user"; }

start() {
    as_user "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w -t 60 \
        -o "-c listen_addresses='' -c unix_socket_directories='$dir' -c fsync=off \
            -c full_page_writes=off -c max_connections=300 -c shared_buffers=64MB" \
        start >/dev/null
}

case "$cmd" in
start)
    mkdir -p "$dir"
    if [[ ! -d $dir/data ]]; then
        [[ $(id -u) -eq 0 ]] && chown nobody:nogroup "$dir"
        chmod 0700 "$dir"
        as_user "$bin/initdb" -D "$dir/data" -A trust -U "$user" -E UTF8 --locale=C >/dev/null
    fi
    start
    url
    ;;
url) url "${3:-postgres}" ;;
createdb)
    "$bin/createdb" -h "$dir" -U "$user" "${3:?a database name}"
    url "$3"
    ;;
restart)
    # After a kill the postmaster is gone already: a failed stop is fine.
    as_user "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null 2>&1 || true
    start
    ;;
kill)
    # The postmaster and every backend: a backend outlives its postmaster for a while.
    pid=$(head -n 1 "$dir/data/postmaster.pid")
    pkill -9 -P "$pid" 2>/dev/null || true
    kill -9 "$pid"
    ;;
halt)
    as_user "$bin/pg_ctl" -D "$dir/data" -m fast -w stop >/dev/null
    ;;
stop)
    if [[ -f $dir/data/postmaster.pid ]]; then
        as_user "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null 2>&1 || true
    fi
    rm -rf "$dir"
    ;;
*)
    echo "pg-test.sh: unknown command $cmd" >&2
    exit 2
    ;;
esac
