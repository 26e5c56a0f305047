#!/usr/bin/env bash
# A test of lib.sh itself (M29): a daemon that exits non-zero at shutdown, hangs at
# shutdown, leaks under LeakSanitizer, logs its admin token or logs an unexpected internal
# error fails the shell test that started it, through lib.sh's EXIT trap. Each case runs a
# tiny test script against tests/fakes/misbehaving_modelgated.sh; a well-behaved daemon
# passes.
set -euo pipefail

: "${MODELGATED:?MODELGATED must point at the modelgated binary (ctest sets it)}"
here=$(cd "$(dirname "$0")" && pwd)
wrap="$here/../fakes/misbehaving_modelgated.sh"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mg-libchecks.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/probe.sh" <<PROBE
. "$here/lib.sh"
mg_start
mg_api GET /api/v1/whoami >/dev/null
PROBE

failed=0
# expect MODE STATUS TEXT: the probe exits STATUS and says TEXT.
expect() {
    local mode=$1 want=$2 text=$3 got=0
    MG_WRAP_REAL=$MODELGATED MG_WRAP_MODE=$mode MODELGATED=$wrap MG_IT_STOP_MS=1500 \
        bash "$tmp/probe.sh" >"$tmp/$mode.log" 2>&1 || got=$?
    if [ "$got" -eq "$want" ] && { [ -z "$text" ] || grep -q -- "$text" "$tmp/$mode.log"; }; then
        echo "ok - a daemon that does '$mode' at shutdown: exit $got"
    else
        echo "not ok - a daemon that does '$mode' at shutdown: exit $got, want $want naming '$text'"
        cat "$tmp/$mode.log"
        failed=1
    fi
}
expect plain 0 ''
expect exit1 1 'exited with status 1 after SIGTERM'
expect hang 1 'did not exit within'
expect leak 1 'sanitizer report'
expect token 1 'holds the admin token'
expect error 1 'unexpected internal errors'
exit "$failed"
