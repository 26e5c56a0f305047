#!/usr/bin/env bash
# A refused body (over --max-json-bytes, wrong type, no token) is drained up to a bound,
# then answered, then the connection is closed (M14). Before, the reply went out while the
# client was still writing, and Node's clients lost it to EPIPE (http 7 of 40, fetch on a
# reused connection 9 of 30). Node's own http and fetch clients send the bodies here; curl
# checks the framing of the reply.
. "$(dirname "$0")/lib.sh"

if ! command -v node >/dev/null 2>&1; then
    mg_skip "node is not installed"
fi

mg_start --max-json-bytes 64K
here=$(dirname "$0")

# 3 MB bodies against a 64 KiB cap, 40 rounds with each client: every reply is a 413.
check "Node http and fetch receive every 413" \
    node "$here/oversize_body.mjs" "$MG_URL" "$MG_TOKEN" 3000000 40

# The reply to a refused body says the connection closes, and it does.
head -c 300000 /dev/zero | tr '\0' 'a' >"$MG_TMP/big.json"
curl -sS -o /dev/null -D "$MG_TMP/h413" -H 'Expect:' -H "Authorization: Bearer $MG_TOKEN" \
    -H 'Content-Type: application/json' --data-binary "@$MG_TMP/big.json" \
    "$MG_URL/api/v1/models" || true
check "over the cap: 413" grep -q '^HTTP/1.1 413' "$MG_TMP/h413"
check "over the cap: Connection: close" grep -qi '^Connection: close' "$MG_TMP/h413"

# Refused for another reason before the body is read: drained and answered the same way.
curl -sS -o "$MG_TMP/b415" -D "$MG_TMP/h415" -H 'Expect:' -H "Authorization: Bearer $MG_TOKEN" \
    -H 'Content-Type: text/plain' --data-binary '{"name":"m"}' "$MG_URL/api/v1/models" || true
check "wrong type: 415" grep -q '^HTTP/1.1 415' "$MG_TMP/h415"
check "wrong type: the error body arrives" test "$(jq -r .error.code "$MG_TMP/b415")" = \
    unsupported_media_type
curl -sS -o "$MG_TMP/b401" -D "$MG_TMP/h401" -H 'Expect:' -H 'Content-Type: application/json' \
    --data-binary "@$MG_TMP/big.json" "$MG_URL/api/v1/models" || true
check "no token: 401 after the body" grep -q '^HTTP/1.1 401' "$MG_TMP/h401"

# A well-formed request on the same server still works and keeps its connection.
curl -sS -o /dev/null -D "$MG_TMP/h201" -H "Authorization: Bearer $MG_TOKEN" \
    -H 'Content-Type: application/json' -d '{"name":"fine"}' "$MG_URL/api/v1/models"
check "a normal create: 201" grep -q '^HTTP/1.1 201' "$MG_TMP/h201"
refute "a normal create keeps the connection" grep -qi '^Connection: close' "$MG_TMP/h201"

mg_summary
