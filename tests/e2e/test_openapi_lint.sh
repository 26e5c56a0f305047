#!/usr/bin/env bash
# M14: the OpenAPI document the server serves (GET /openapi.json) lints clean under
# redocly's recommended rules (redocly.yaml at the repository root says which rule is off
# and why): no error and no warning.
. "$(dirname "$0")/lib.sh"

root=${MG_SOURCE_DIR:?MG_SOURCE_DIR must point at the source tree (ctest sets it)}
redocly="$root/tests/ui/node_modules/.bin/redocly"
if ! command -v node >/dev/null 2>&1 || [ ! -x "$redocly" ]; then
    mg_skip "node or @redocly/cli is missing (scripts/install-deps.sh installs both)"
fi

mg_start
curl -sS -o "$MG_TMP/openapi.json" "$MG_URL/openapi.json"
check "the served document is the checked-in one" cmp -s "$MG_TMP/openapi.json" "$root/schema/openapi.json"
export REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true NO_UPDATE_NOTIFIER=1
rc=0
(cd "$MG_TMP" && "$redocly" lint openapi.json --config "$root/redocly.yaml" --format=stylish) \
    >"$MG_TMP/lint.out" 2>&1 || rc=$?
grep -vE '║|╔|╚' "$MG_TMP/lint.out" | grep -v '^\s*$' | tail -15
check "redocly lint passes" test "$rc" -eq 0
refute "redocly reports no error" grep -Eq '[1-9][0-9]* errors?' "$MG_TMP/lint.out"
refute "redocly reports no warning" grep -Eq '[1-9][0-9]* warnings?' "$MG_TMP/lint.out"

mg_summary
