#!/usr/bin/env bash
# M18 finding 4: the CLI reported a failing version as passing. A reply it could not parse
# was dropped and the command carried on ("all gates pass", exit 0). Against a server that
# answers malformed bodies, every command exits 1 with the reason on stderr, and a gate
# report whose only word is "passed": false exits 3: never 0.
. "$(dirname "$0")/../e2e/lib.sh"

: "${MODELGATE_CLI:?MODELGATE_CLI must point at the modelgate binary (ctest sets it)}"
if ! command -v node >/dev/null 2>&1; then
    mg_skip "node is not installed"
fi
fake="$MG_TMP/fake"
mkdir -p "$fake"
echo 200 >"$fake/status"
echo '{}' >"$fake/body"
node "$(dirname "$0")/fake_server.mjs" "$fake" >"$fake/port" 2>"$fake/log" &
FAKE_PID=$!
trap 'rc=$?; kill "$FAKE_PID" 2>/dev/null; mg_cleanup "$rc"' EXIT
mg_wait_for 10 test -s "$fake/port"
export MODELGATE_URL="http://127.0.0.1:$(cat "$fake/port")" MODELGATE_TOKEN=mgt_fake
export XDG_CONFIG_HOME="$MG_TMP/cfg"

# run EXPECTED_RC DESCRIPTION BODY -- CLI ARGS...
run() {
    local want=$1 what=$2 body=$3 rc=0
    shift 4
    printf '%s' "$body" >"$fake/body"
    "$MODELGATE_CLI" "$@" >"$MG_TMP/out" 2>"$MG_TMP/err" || rc=$?
    if [ "$rc" -eq "$want" ] && { [ "$want" -ne 1 ] || [ -s "$MG_TMP/err" ]; }; then
        ok "$what: exit $rc"
    else
        not_ok "$what: exit $rc, wanted $want; stdout: $(head -c 200 "$MG_TMP/out"); stderr: $(head -c 200 "$MG_TMP/err")"
    fi
}

gates=(gates fraud 1 --alias production)
run 1 "gates: not JSON" 'all good' -- "${gates[@]}"
run 1 "gates: cut short" '{"passed":tr' -- "${gates[@]}"
run 1 "gates: no 'passed'" '{"pending":false,"gates":[]}' -- "${gates[@]}"
run 1 "gates: 'passed' not a boolean" '{"passed":"yes","pending":false,"gates":[]}' -- "${gates[@]}"
run 1 "gates: a number out of range" \
    '{"passed":true,"pending":false,"gates":[{"name":"auc","status":"passed","observed":1e999}]}' \
    -- "${gates[@]}"
run 1 "gates: an empty 200" '' -- "${gates[@]}"
run 3 "gates: passed false with no gate marked failed" '{"passed":false,"pending":false,"gates":[]}' \
    -- "${gates[@]}"
run 3 "gates: passed false, --json" '{"passed":false,"pending":false,"gates":[]}' \
    -- "${gates[@]}" --json
run 0 "gates: a real pass still passes" '{"passed":true,"pending":false,"gates":[]}' \
    -- "${gates[@]}"
check "the real pass says so" grep -q 'all gates pass' "$MG_TMP/out"

run 1 "versions: not JSON" '<html>' -- versions fraud
run 1 "versions: no list" '{"next_page_token":null}' -- versions fraud
refute "versions never claims 'no versions yet' on a bad reply" grep -q 'no versions yet' "$MG_TMP/err"

run 1 "status: unknown state" '{"id":"prm_1","state":"wat"}' -- status prm_1
run 1 "status: not JSON" 'garbage' -- status prm_1
run 1 "status --wait: unknown state" '{"id":"prm_1","state":"wat"}' -- status prm_1 --wait --timeout 5
run 1 "lkg: not JSON" 'nope' -- lkg fraud --alias production
run 1 "show: not JSON" '{"version":' -- show fraud 1

mg_summary
