# lib.sh - shared helpers for the end-to-end shell tests: start a real
# modelgated on an ephemeral loopback port with a fresh data directory, call
# its API with curl, and clean everything up on exit.
#
# Usage: . "$(dirname "$0")/lib.sh"; mg_start; mg_api GET /api/v1/whoami
set -euo pipefail

: "${MODELGATED:?MODELGATED must point at the modelgated binary (ctest sets it)}"
MG_TMP=$(mktemp -d "${TMPDIR:-/tmp}/mg-e2e.XXXXXX")
MG_DATA="$MG_TMP/data"
MG_PID=""
MG_URL=""
MG_TOKEN=""
MG_PASSED=0
MG_FAILED=0

mg_cleanup() {
    if [ -n "$MG_PID" ] && kill -0 "$MG_PID" 2>/dev/null; then
        kill -TERM "$MG_PID" 2>/dev/null || true
        wait "$MG_PID" 2>/dev/null || true
    fi
    rm -rf "$MG_TMP"
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
    kill -TERM "$MG_PID"
    wait "$MG_PID" || { echo "modelgated exited with $?" >&2; return 1; }
    MG_PID=""
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
