#!/usr/bin/env bash
# "Sign in with SSO" end to end (docs/contract.md "Identity"): a real OpenID provider (npm
# oidc-provider, tests/identity/provider.mjs) and a real headless Chromium
# (tests/identity/sso_browser.mjs, playwright-core) sign a reviewer in through
# /ui/sso/login (authorization code + PKCE S256, state and nonce) and /ui/sso/callback;
# the UI session carries the roles of the user's groups and the person; the callback's
# state is single-use; an ID token with another nonce is refused; a user in no mapped group
# is refused naming the groups.
. "$(dirname "$0")/lib.sh"

ID_DIR="${MG_SOURCE_DIR:?}/tests/identity"
CHROMIUM=${MG_CHROMIUM:-/usr/bin/chromium}
if [ ! -x "$CHROMIUM" ] || [ ! -d "$ID_DIR/node_modules/oidc-provider" ] ||
    [ ! -d "$ID_DIR/node_modules/playwright-core" ]; then
    [ "${MG_REQUIRE_ALL:-0}" = 1 ] && { echo "FAIL: chromium or tests/identity/node_modules missing" >&2; exit 1; }
    echo "SKIP: chromium or tests/identity/node_modules (scripts/install-deps.sh) missing"
    exit 0
fi
W="$MG_TMP/work"
mkdir -p "$W"
# modelgated's port first: the provider must know the redirect URI.
MG_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
printf 'sso-test-secret-%s\n' "$RANDOM$RANDOM" >"$W/client.secret"
chmod 600 "$W/client.secret"
node "$ID_DIR/provider.mjs" "$MG_TMP/op.port" "http://127.0.0.1:$MG_PORT/ui/sso/callback" \
    "$(head -1 "$W/client.secret")" 2>>"$MG_TMP/op.log" &
OP_PID=$!
trap 'rc=$?; kill -TERM $OP_PID 2>/dev/null || true; mg_cleanup "$rc"' EXIT
mg_wait_for 20 test -s "$MG_TMP/op.port" || { cat "$MG_TMP/op.log" >&2; exit 1; }
OP="http://127.0.0.1:$(cat "$MG_TMP/op.port")"
# MG_IDENTITY_DATABASE=postgresql://… runs the same checks on PostgreSQL (pg_e2e_test_sso:
# a fresh database on the suite's server).
: "${MG_IDENTITY_DATABASE:=$(mg_pg_database sso)}"
mg_start --listen "127.0.0.1:$MG_PORT" --oidc-issuer "$OP" --oidc-client-id modelgate-ui \
    --oidc-client-secret-file "$W/client.secret" \
    ${MG_IDENTITY_DATABASE:+--database "$MG_IDENTITY_DATABASE"}
[ -z "${MG_IDENTITY_DATABASE-}" ] || check "the server runs on PostgreSQL" \
    test "$(mg_api GET /api/v1/cluster | jq -r .database)" = postgresql
mg_api PUT /api/v1/identity/groups/ml-reviewers '{"roles":["reviewer","reader"]}' >/dev/null

# ---- the redirect to the provider -----------------------------------------------------------
curl -sS -o /dev/null -D "$W/login.h" "$MG_URL/ui/sso/login"
LOC=$(grep -i '^location:' "$W/login.h" | tr -d '\r' | cut -d' ' -f2-)
check "/ui/sso/login answers 302" grep -q '^HTTP/1.1 302' "$W/login.h"
check "... to the provider's authorization endpoint" test "${LOC#"$OP"/auth?}" != "$LOC"
check "... with PKCE S256" grep -q 'code_challenge_method=S256' <<<"$LOC"
check "... with state and nonce" sh -c "grep -q 'state=' <<'E'
$LOC
E
grep -q 'nonce=' <<'E'
$LOC
E"
curl -sS -o /dev/null -D "$W/login2.h" "$MG_URL/ui/sso/login"
check "each sign-in gets its own state" test \
    "$(grep -io 'state=[^&]*' "$W/login.h")" != "$(grep -io 'state=[^&]*' "$W/login2.h")"
ST=$(curl -sS -o "$W/cb.json" -w '%{http_code}' "$MG_URL/ui/sso/callback?state=made-up&code=x")
check "a callback with a state never issued: 401" test "$ST" = 401

# ---- Chromium signs a reviewer in -----------------------------------------------------------
MG_CHROMIUM=$CHROMIUM node "$ID_DIR/sso_browser.mjs" "$MG_URL" rita >"$W/rita.json" 2>"$W/rita.err" ||
    { cat "$W/rita.err" >&2; }
jqf() { jq -e "$@" >/dev/null; }
check "Chromium lands back on the UI" jqf --arg u "$MG_URL/" '.landed == $u' "$W/rita.json"
check "the UI session is rita's, with her group's roles" jqf '.session.status == 200 and
    .session.body.name == "rita@example.com" and .session.body.roles == ["reviewer","reader"]' "$W/rita.json"
check "whoami through the session names the person" jqf --arg op "$OP" \
    '.whoami.body.identity == {"issuer":$op,"subject":"rita"}' "$W/rita.json"
check "the callback used twice is refused (state single-use): 401" jqf '.replay == 401' "$W/rita.json"

# A sign-in whose authorization request carries another nonce than modelgated issued: the
# provider signs an ID token with that nonce, and the callback (its state and PKCE verifier
# otherwise good) refuses it.
curl -sS -o /dev/null -D "$W/login3.h" "$MG_URL/ui/sso/login"
LOC3=$(grep -i '^location:' "$W/login3.h" | tr -d '\r' | cut -d' ' -f2-)
BAD=$(sed 's/nonce=[^&]*/nonce=not-this-sign-ins-nonce/' <<<"$LOC3")
check "the crafted request carries another nonce" test "$BAD" != "$LOC3"
MG_CHROMIUM=$CHROMIUM node "$ID_DIR/sso_browser.mjs" "$MG_URL" rita "$BAD" >"$W/nonce.json" 2>"$W/nonce.err" ||
    { cat "$W/nonce.err" >&2; }
check "a callback whose ID token has another nonce: 401" jqf '.callback.status == 401' "$W/nonce.json"
check "... naming the nonce check" jqf '.callback.body | fromjson | .error.field == "nonce"' "$W/nonce.json"
check "... and it gives no session" jqf '.session.status == 401' "$W/nonce.json"

MG_CHROMIUM=$CHROMIUM node "$ID_DIR/sso_browser.mjs" "$MG_URL" mallory >"$W/mallory.json" 2>"$W/mallory.err" || true
check "a user in no mapped group gets no session" jqf '.session.status == 401' "$W/mallory.json"
check "the audit names rita's sign-in" sh -c "curl -sS -H 'Authorization: Bearer $MG_TOKEN' \
    '$MG_URL/api/v1/audit?limit=100' | grep -q 'rita@example.com'"
mg_stop # its last request lines are written as it stops
refute "the client secret never reaches the server's log" grep -qF -- "$(head -1 "$W/client.secret")" "$MG_TMP/server.log"

mg_summary
