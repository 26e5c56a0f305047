# lib.sh - shared helpers for the end-to-end shell tests: start a real
# modelgated on an ephemeral loopback port with a fresh data directory, call
# its API with curl, and clean everything up on exit.
#
# Usage: . "$(dirname "$0")/lib.sh"; mg_start; mg_api GET /api/v1/whoami
set -euo pipefail

# mg_skip, mg_require_all: the one reader of MG_REQUIRE_ALL for the shell tests.
. "$(dirname "${BASH_SOURCE[0]}")/../skip.sh"

: "${MODELGATED:?MODELGATED must point at the modelgated binary (ctest sets it)}"
MG_TMP=$(mktemp -d "${TMPDIR:-/tmp}/mg-e2e.XXXXXX")
MG_DATA="$MG_TMP/data"
MG_PID=""
MG_URL=""
MG_TOKEN=""
MG_PASSED=0
MG_FAILED=0

# mg_stop_pid PID LOG: SIGTERM the daemon and wait for it with a deadline (20 s, 60 s under
# MG_SANITIZE=1, MG_IT_STOP_MS when set); fails (1) unless it exited 0 in time (M29: a leak
# under LSan, a crash or a hang at shutdown fails the test).
mg_stop_pid() {
    local pid=$1 log=$2 limit_ms=${MG_IT_STOP_MS:-20000} st=0 waited=0
    [ "${MG_SANITIZE:-0}" = 1 ] && [ -z "${MG_IT_STOP_MS:-}" ] && limit_ms=60000
    kill -TERM "$pid" 2>/dev/null || true
    # A zombie still answers kill -0: read its state instead.
    while [ -e "/proc/$pid" ] && [ "$(cut -d' ' -f3 "/proc/$pid/stat" 2>/dev/null)" != Z ]; do
        if [ "$waited" -ge "$limit_ms" ]; then
            kill -KILL "$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
            echo "FAIL: modelgated (pid $pid) did not exit within ${limit_ms} ms of SIGTERM" >&2
            tail -c 4096 "$log" >&2 2>/dev/null || true
            return 1
        fi
        sleep 0.05
        waited=$((waited + 50))
    done
    wait "$pid" || st=$?
    if [ "$st" -ne 0 ]; then
        echo "FAIL: modelgated (pid $pid) exited with status $st after SIGTERM, want 0" >&2
        tail -c 4096 "$log" >&2 2>/dev/null || true
        return 1
    fi
}

# mg_check_log LOG [TOKEN]: no sanitizer report, no token and no internal error ("error:"
# lines) in a server log, except those matching the extended regex $MG_ALLOW_ERRORS.
mg_check_log() {
    local log=$1 token=${2-} bad
    [ -f "$log" ] || return 0
    if grep -nE 'runtime error:|LeakSanitizer|AddressSanitizer' "$log" >&2; then
        echo "FAIL: the server log $log has a sanitizer report (above)" >&2
        return 1
    fi
    if [ -n "$token" ] && grep -qF "$token" "$log"; then
        echo "FAIL: the server log $log holds the admin token" >&2
        return 1
    fi
    bad=$(grep -E '^error:' "$log" | grep -vE "${MG_ALLOW_ERRORS:-^\$}" || true)
    if [ -n "$bad" ]; then
        printf 'FAIL: unexpected internal errors in the server log %s:\n%s\n' "$log" "$bad" >&2
        return 1
    fi
}

# On exit: the daemon is stopped with a checked exit and its log checked; a finding turns
# the script's exit status into 1 (a skip's 77 and a failure stay what they were otherwise).
# mg_cleanup [RC]: a test's own EXIT trap passes the status it saw.
mg_cleanup() {
    local rc=${1:-$?}
    if [ -n "$MG_PID" ] && [ -e "/proc/$MG_PID" ]; then
        mg_stop_pid "$MG_PID" "$MG_TMP/server.log" || rc=1
    fi
    MG_PID=""
    mg_check_log "$MG_TMP/server.log" "$MG_TOKEN" || rc=1
    rm -rf "$MG_TMP"
    exit "$rc"
}
trap mg_cleanup EXIT

# Poll until a command succeeds or the deadline (seconds) passes.
mg_wait_for() {
    local deadline=$(($(date +%s) + $1))
    shift
    until "$@"; do
        [ "$(date +%s)" -lt "$deadline" ] || return 1
        sleep 0.05
    done
}

# mg_pg_database TAG: under a pg_e2e_* test (MG_PG_DIR: the suite's PostgreSQL, started by
# scripts/pg-test.sh), the URL of a fresh database there owned by modelgated's role; else
# nothing.
mg_pg_database() {
    [ -n "${MG_PG_DIR-}" ] || return 0
    bash "${MG_SOURCE_DIR:?}/scripts/pg-test.sh" createdb "$MG_PG_DIR" "e2e_${1}_$$"
}

# mg_start [extra modelgated flags...]
mg_start() {
    rm -f "$MG_TMP/port"
    "$MODELGATED" --data-dir "$MG_DATA" --listen 127.0.0.1:0 --port-file "$MG_TMP/port" "$@" \
        2>>"$MG_TMP/server.log" &
    MG_PID=$!
    if ! mg_wait_for 20 test -s "$MG_TMP/port"; then
        echo "modelgated did not start; log:" >&2
        cat "$MG_TMP/server.log" >&2
        exit 1
    fi
    MG_URL="http://127.0.0.1:$(cat "$MG_TMP/port")"
    MG_TOKEN=$(cat "$MG_DATA/admin.token")
}

mg_stop() {
    local pid=$MG_PID
    MG_PID=""
    mg_stop_pid "$pid" "$MG_TMP/server.log"
}

# mg_api METHOD PATH [JSON body] → body on stdout; fails on HTTP >= 400.
mg_api() {
    local method=$1 path=$2 body=${3-}
    if [ -n "$body" ]; then
        curl -sS --fail-with-body -X "$method" -H "Authorization: Bearer $MG_TOKEN" \
            -H 'Content-Type: application/json' --data-binary "$body" "$MG_URL$path"
    else
        curl -sS --fail-with-body -X "$method" -H "Authorization: Bearer $MG_TOKEN" "$MG_URL$path"
    fi
}

# mg_upload FILE → the blob digest.
mg_upload() {
    curl -sS --fail-with-body -H "Authorization: Bearer $MG_TOKEN" \
        -H 'Content-Type: application/octet-stream' --data-binary "@$1" \
        "$MG_URL/api/v1/blobs" | jq -r .digest
}

ok() {
    MG_PASSED=$((MG_PASSED + 1))
    echo "ok - $*"
}

not_ok() {
    MG_FAILED=$((MG_FAILED + 1))
    echo "not ok - $*"
}

# check DESCRIPTION COMMAND...: the command must succeed.
check() {
    local what=$1
    shift
    if "$@"; then ok "$what"; else not_ok "$what"; fi
}

# refute DESCRIPTION COMMAND...: the command must fail.
refute() {
    local what=$1
    shift
    if "$@"; then not_ok "$what"; else ok "$what"; fi
}

mg_summary() {
    echo "$MG_PASSED passed, $MG_FAILED failed"
    [ "$MG_FAILED" -eq 0 ]
}
