#!/usr/bin/env bash
# A private PostgreSQL for tests and benchmarks: initdb + pg_ctl in a directory of the
# caller's, listening only on a Unix socket inside it (no TCP port, no system service).
# PostgreSQL refuses to run as root, so as root the server runs as 'nobody'.
#
# modelgated connects as the role 'modelgate', an ordinary one (not a superuser, cannot
# create databases or roles) that owns its database, as a DBA would hand it out. Members of
# the role 'mg_password' (none at first; tests add theirs) must give a password
# (scram-sha-256); every other role is trusted on the socket.
#
#   scripts/pg-test.sh start DIR      create (if new) and start; prints the superuser's URL
#   scripts/pg-test.sh url DIR [DB]   the URL of database DB (default postgres) as 'modelgate'
#   scripts/pg-test.sh createdb DIR DB  create DB owned by 'modelgate'; prints its URL
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

role=modelgate
url() { printf 'postgresql:///%s?host=%s&user=%s\n' "${1:-postgres}" "$dir" "${2:-$role}"; }

# The roles above, once per cluster.
roles() {
    "$bin/psql" -X -q -h "$dir" -U "$user" -d postgres -v ON_ERROR_STOP=1 >/dev/null <<SQL
SELECT 'CREATE ROLE $role LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE'
 WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '$role') \\gexec
SELECT 'CREATE ROLE mg_password NOLOGIN'
 WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'mg_password') \\gexec
SQL
}

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
        printf 'local all +mg_password scram-sha-256\nlocal all all trust\n' |
            as_user tee "$dir/data/pg_hba.conf" >/dev/null
    fi
    start
    roles
    url postgres "$user"
    ;;
url) url "${3:-postgres}" ;;
createdb)
    "$bin/createdb" -h "$dir" -U "$user" -O "$role" "${3:?a database name}"
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
