#!/usr/bin/env bash
# IdP JWTs as bearer tokens (docs/contract.md "Identity") against a JWKS issuer made with npm jose
# (tests/identity/issuer.mjs): group mappings, whoami's identity, every refusal class
# answered 401 naming its check and never echoing the token (nor logging it), the
# publisher recorded on a version and in its signed statement (verified with openssl), and
# separation of duties by person: the same (issuer, subject) cannot approve through a
# second JWT or through a token they created.
. "$(dirname "$0")/lib.sh"

ID_DIR="${MG_SOURCE_DIR:?}/tests/identity"
if [ ! -d "$ID_DIR/node_modules/jose" ] || [ ! -d "$ID_DIR/node_modules/@sigstore/verify" ]; then
    echo "tests/identity/node_modules is missing: run scripts/install-deps.sh" >&2
    exit 1
fi
W="$MG_TMP/work"
mkdir -p "$W"
node "$ID_DIR/issuer.mjs" "$MG_TMP/issuer.port" 2>>"$MG_TMP/issuer.log" &
ISS_PID=$!
trap 'rc=$?; kill -TERM $ISS_PID 2>/dev/null || true; mg_cleanup "$rc"' EXIT
mg_wait_for 20 test -s "$MG_TMP/issuer.port" || {
    echo "the issuer did not start" >&2
    cat "$MG_TMP/issuer.log" >&2
    exit 1
}
ISS="http://127.0.0.1:$(cat "$MG_TMP/issuer.port")"
# MG_IDENTITY_DATABASE=postgresql://… runs the same checks on PostgreSQL (pg_e2e_test_identity:
# a fresh database on the suite's server).
: "${MG_IDENTITY_DATABASE:=$(mg_pg_database identity)}"
mg_start --oidc-issuer "$ISS" --oidc-client-id modelgate \
    ${MG_IDENTITY_DATABASE:+--database "$MG_IDENTITY_DATABASE"}
[ -z "${MG_IDENTITY_DATABASE-}" ] || check "the server runs on PostgreSQL" \
    test "$(mg_api GET /api/v1/cluster | jq -r .database)" = postgresql

mint() { curl -sS --fail "$ISS/mint?$1"; }
# as TOKEN METHOD PATH [BODY]: the reply body in $W/body, the status in $ST.
as() {
    local t=$1 method=$2 path=$3 body=${4-}
    if [ -n "$body" ]; then
        ST=$(curl -sS -o "$W/body" -w '%{http_code}' -X "$method" -H "Authorization: Bearer $t" \
            -H 'Content-Type: application/json' --data-binary "$body" "$MG_URL$path")
    else
        ST=$(curl -sS -o "$W/body" -w '%{http_code}' -X "$method" -H "Authorization: Bearer $t" \
            "$MG_URL$path")
    fi
}
status_is() { [ "$ST" = "$1" ] || { echo "  HTTP $ST, wanted $1: $(cat "$W/body")" >&2; return 1; }; }
body_has() { grep -qF -- "$1" "$W/body" || { echo "  body lacks '$1': $(cat "$W/body")" >&2; return 1; }; }
jqe() { jq -e "$@" "$W/body" >/dev/null; }
jqf() { jq -e "$@" >/dev/null; } # jqf FILTER... FILE

# ---- groups -------------------------------------------------------------------------------
ALICE=$(mint "sub=alice&email=alice@example.com&groups=ml-publishers,unmapped")
as "$ALICE" GET /api/v1/whoami
check "no mapped group: 403" status_is 403
check "... naming the groups seen" body_has '(ml-publishers, unmapped)'

mg_api PUT /api/v1/identity/groups/ml-publishers '{"roles":["publisher","reader"]}' >/dev/null
mg_api PUT /api/v1/identity/groups/ml-reviewers '{"roles":["reviewer","reader"]}' >/dev/null
mg_api PUT /api/v1/identity/groups/ml-admins '{"roles":["admin"]}' >/dev/null
check "groups are listed" test "$(mg_api GET /api/v1/identity/groups | jq '.items | length')" -eq 3
as "$MG_TOKEN" PUT /api/v1/identity/groups/bad '{"roles":["wizard"]}'
check "an unknown role is refused (400)" status_is 400
as "$ALICE" PUT /api/v1/identity/groups/x '{"roles":["admin"]}'
check "a publisher cannot map groups (403)" status_is 403
mg_api PUT /api/v1/identity/groups/short-lived '{"roles":["reader"]}' >/dev/null
as "$MG_TOKEN" DELETE /api/v1/identity/groups/short-lived
check "a mapping is deleted (204)" status_is 204
as "$MG_TOKEN" DELETE /api/v1/identity/groups/short-lived
check "... and a second delete is 404 naming the group" status_is 404
check "... in one sentence" body_has "group 'short-lived' has no mapping"
check "the other groups stay" test "$(mg_api GET /api/v1/identity/groups | jq '.items | length')" -eq 3

as "$ALICE" GET /api/v1/whoami
check "a mapped group signs in" status_is 200
check "whoami: roles are the group's" jqe '.roles == ["publisher","reader"]'
check "whoami: the identity" jqe --arg iss "$ISS" '.identity.issuer == $iss and
    .identity.subject == "alice" and .identity.email == "alice@example.com" and
    .identity.groups == ["ml-publishers","unmapped"]'
BOTH=$(mint "sub=carol&groups=ml-publishers,ml-reviewers")
as "$BOTH" GET /api/v1/whoami
check "roles are the union of the groups'" jqe '.roles == ["publisher","reviewer","reader"]'

# ---- every refusal class: 401 naming the check, never the token --------------------------
refusal() { # NAME QUERY CHECK
    local t
    t=$(mint "$2")
    as "$t" GET /api/v1/whoami
    check "$1: 401" status_is 401
    check "$1: names the $3 check" body_has "($3 check)"
    refute "$1: the reply does not echo the token" grep -qF -- "${t:0:40}" "$W/body"
    refute "$1: the reply does not echo its signature" grep -qF -- "${t##*.}x" "$W/body"
    printf '%s\n' "$t" >>"$W/refused.tokens"
}
refusal "alg none" "bad=none&groups=ml-admins" alg
refusal "HS256 keyed with the RSA public key" "bad=hs256-rsa-public&groups=ml-admins" alg
refusal "unpublished kid" "kid=rsa-unpublished&groups=ml-admins" kid
refusal "expired" "exp=-120&groups=ml-admins" exp
refusal "not yet valid" "nbf=120&groups=ml-admins" nbf
refusal "wrong audience" "aud=someone-else&groups=ml-admins" aud
refusal "wrong issuer" "iss=https://evil.example&groups=ml-admins" iss
refusal "tampered payload" "bad=tampered&groups=ml-admins" signature
EC=$(mint "kid=ec-1&sub=erin&groups=ml-publishers")
as "$EC" GET /api/v1/whoami
check "an ES256 token verifies" status_is 200

# ---- the publisher, on the version and in its signed statement ----------------------------
printf 'weights-%s' "$(seq 1 200)" >"$W/model.bin"
printf 'other-weights' >"$W/model2.bin"
as "$ALICE" POST /api/v1/models '{"name":"fraud"}'
check "an SSO publisher creates a model" status_is 201
D1=$(mg_upload "$W/model.bin")
D2=$(mg_upload "$W/model2.bin")
mg_api POST /api/v1/models/fraud/versions "{\"artifact\":\"$D1\",\"metrics\":{\"auc\":0.9}}" >/dev/null
as "$ALICE" POST /api/v1/models/fraud/versions "{\"artifact\":\"$D2\",\"metrics\":{\"auc\":0.95}}"
check "an SSO publisher creates a version" status_is 201
check "the version records its publisher" jqe --arg iss "$ISS" '.publisher == {"kind":"sso",
    "name":"alice@example.com","issuer":$iss,"subject":"alice"}'
check "a token's version records the token" test "$(mg_api GET /api/v1/models/fraud/versions/1 |
    jq -c .publisher)" = '{"kind":"token","name":"admin"}'
as "$ALICE" POST /api/v1/models/fraud/versions "{\"artifact\":\"$D2\",\"publisher\":{\"kind\":\"x\"}}"
check "a client cannot write publisher itself (400)" status_is 400
mg_api GET /api/v1/models/fraud/versions/2/signature >"$W/v2.sig"
jq -r .dsseEnvelope.payload "$W/v2.sig" | base64 -d >"$W/stmt.json"
check "the signed statement carries the publisher" jqf --arg iss "$ISS" \
    '[.. | objects | select(has("publisher")) | .publisher][0] | .issuer == $iss and .subject == "alice"' \
    "$W/stmt.json"
curl -sS "$MG_URL/api/v1/signing-keys" | jq -j '.items[0].public_key_pem' >"$W/pub.pem"
{ printf 'DSSEv1 28 application/vnd.in-toto+json %d ' "$(stat -c%s "$W/stmt.json")"; cat "$W/stmt.json"; } >"$W/pae"
jq -r '.dsseEnvelope.signatures[0].sig' "$W/v2.sig" | base64 -d >"$W/sig"
check "... and verifies with openssl" openssl dgst -sha256 -verify "$W/pub.pem" -signature "$W/sig" \
    -out /dev/null "$W/pae"

# ---- separation of duties by person -------------------------------------------------------
mg_api PUT /api/v1/models/fraud/aliases/production '{"version":1}' >/dev/null
mg_api PUT /api/v1/models/fraud/policies/production '{
  "approvals": {"required": 2},
  "rollout": {"steps": [100], "bake_seconds": 0, "auto_advance": true}}' >/dev/null
PID=$(mg_api POST /api/v1/promotions '{"model":"fraud","version":2,"alias":"production"}' | jq -r .id)
mg_wait_for 30 bash -c "curl -sS -H 'Authorization: Bearer $MG_TOKEN' '$MG_URL/api/v1/promotions/$PID' |
    jq -e '.state == \"awaiting_approval\"' >/dev/null"
check "the promotion awaits approval" test "$(mg_api GET "/api/v1/promotions/$PID" | jq -r .state)" = awaiting_approval

# Alice again, through a second JWT with another email (another name) and the reviewer group.
ALICE2=$(mint "sub=alice&email=alice.reviews@example.com&groups=ml-reviewers")
as "$ALICE2" POST "/api/v1/promotions/$PID/approvals" '{"decision":"approve","comment":"lgtm"}'
check "the publisher cannot approve through a second JWT (403)" status_is 403
check "... as self_approval" jqe '.error.code == "self_approval"'
# Alice as an admin creates a token for herself; it is still Alice.
ALICE_ADMIN=$(mint "sub=alice&email=alice.admin@example.com&groups=ml-admins")
as "$ALICE_ADMIN" POST /api/v1/tokens '{"name":"alice-bot","roles":["reviewer","reader"]}'
check "an SSO admin creates a token" status_is 201
BOT=$(jq -r .token "$W/body")
as "$BOT" GET /api/v1/whoami
check "the token carries its creator's person" jqe --arg iss "$ISS" \
    '.identity == {"issuer":$iss,"subject":"alice"}'
as "$BOT" POST "/api/v1/promotions/$PID/approvals" '{"decision":"approve","comment":"lgtm"}'
check "the publisher cannot approve through a token she created (403)" status_is 403
check "... as self_approval" jqe '.error.code == "self_approval"'
BOB=$(mint "sub=bob&email=bob@example.com&groups=ml-reviewers")
as "$BOB" POST "/api/v1/promotions/$PID/approvals" '{"decision":"approve","comment":"lgtm"}'
check "another person approves" status_is 200
# Bob again, through a token he created as an admin: one person, one decision.
BOB_ADMIN=$(mint "sub=bob&email=bob.admin@example.com&groups=ml-admins")
as "$BOB_ADMIN" POST /api/v1/tokens '{"name":"bob-bot","roles":["reviewer","reader"]}'
BOBBOT=$(jq -r .token "$W/body")
as "$BOBBOT" POST "/api/v1/promotions/$PID/approvals" '{"decision":"approve","comment":"again"}'
check "the same person cannot approve twice through two credentials (409)" status_is 409
check "the promotion records the approver as a person" test \
    "$(mg_api GET "/api/v1/promotions/$PID" | jq -c '.approvals[0].identity')" = \
    "{\"issuer\":\"$ISS\",\"subject\":\"bob\"}"
CAROL=$(mint "sub=carol2&email=carol@example.com&groups=ml-reviewers")
as "$CAROL" POST "/api/v1/promotions/$PID/approvals" '{"decision":"approve","comment":"ok"}'
check "a second person's approval completes it" status_is 200

# ---- signed releases: every generation attested, chained, verifiable with openssl ----------
mg_wait_for 30 bash -c "curl -sS -H 'Authorization: Bearer $MG_TOKEN' \
    '$MG_URL/api/v1/models/fraud/aliases/production' |
    jq -e '[.routes[] | select(.version == 2 and .weight == 100)] | length == 1' >/dev/null" || {
    mg_api GET "/api/v1/promotions/$PID" >&2
    mg_api GET /api/v1/models/fraud/aliases/production >&2
}
GEN=$(mg_api GET /api/v1/models/fraud/aliases/production | jq -r .generation)
check "the promotion moved the alias (generation $GEN)" test "$GEN" -ge 2
# attest N: the bundle in $W/att.N, its statement in $W/stmt.N
attest() {
    mg_api GET "/api/v1/models/fraud/aliases/production/history/$1/attestation" >"$W/att.$1"
    jq -r .dsseEnvelope.payload "$W/att.$1" | base64 -d >"$W/stmt.$1"
}
verify_att() { # BUNDLE STATEMENT
    local d
    d=$(mktemp -d "$W/va.XXXXXX")
    { printf 'DSSEv1 28 application/vnd.in-toto+json %d ' "$(stat -c%s "$2")"; cat "$2"; } >"$d/pae"
    jq -r '.dsseEnvelope.signatures[0].sig' "$1" | base64 -d >"$d/sig"
    openssl dgst -sha256 -verify "$W/pub.pem" -signature "$d/sig" -out /dev/null "$d/pae"
}
for g in $(seq 1 "$GEN"); do
    attest "$g"
    check "generation $g: the attestation verifies with openssl" verify_att "$W/att.$g" "$W/stmt.$g"
    check "generation $g: a release statement of that generation" jqf --argjson g "$g" \
        '.predicateType == "https://modelgate.dev/release/v1" and .predicate.generation == $g
         and ._type == "https://in-toto.io/Statement/v1"' "$W/stmt.$g"
    if [ "$g" -gt 1 ]; then
        check "generation $g links to generation $((g - 1))'s statement" test \
            "$(jq -r .predicate.previous.digest "$W/stmt.$g")" = "sha256:$(sha256sum <"$W/stmt.$((g - 1))" | cut -d' ' -f1)"
    else
        check "generation 1 has no predecessor" jqf '.predicate.previous == null' "$W/stmt.1"
    fi
done
check "the last generation's subject is version 2's artifact" jqf --arg d "${D2#sha256:}" \
    '.subject == [{"name":"fraud-v2","digest":{"sha256":$d}}]' "$W/stmt.$GEN"
check "... with its publisher, the approvals with the approver's identity, the policy's digest" jqf --arg iss "$ISS" \
    '.predicate.publishers[0].publisher.subject == "alice" and
     (.predicate.approvals | map(.by) == ["bob@example.com","carol@example.com"]) and
     .predicate.approvals[0].identity == {"issuer":$iss,"subject":"bob"} and
     (.predicate.policy_digest | startswith("sha256:")) and (.predicate.gates | length > 0)' \
    "$W/stmt.$GEN"
# sigstore-js (@sigstore/verify), offline with the server's public key, agrees.
sjs() { node "$ID_DIR/verify_bundle.mjs" "$@" >/dev/null 2>>"$W/sigstore.err"; }
for g in $(seq 1 "$GEN"); do
    check "generation $g: the attestation verifies with sigstore-js" sjs "$W/att.$g" "$W/pub.pem"
done
check "a version's bundle verifies with sigstore-js too" sjs "$W/v2.sig" "$W/pub.pem"
# A changed byte anywhere in the statement fails.
sed 's/"fraud-v2"/"fraud-v3"/' "$W/stmt.$GEN" >"$W/stmt.bad"
refute "a changed subject fails" verify_att "$W/att.$GEN" "$W/stmt.bad"
sed 's/bob@example.com/eve@example.com/' "$W/stmt.$GEN" >"$W/stmt.bad"
refute "a changed approver fails" verify_att "$W/att.$GEN" "$W/stmt.bad"
sed 's/"generation":'"$GEN"'/"generation":99/' "$W/stmt.$GEN" >"$W/stmt.bad"
refute "a changed generation fails" verify_att "$W/att.$GEN" "$W/stmt.bad"
jq --arg p "$(base64 -w0 <"$W/stmt.bad")" '.dsseEnvelope.payload = $p' "$W/att.$GEN" >"$W/att.bad"
refute "sigstore-js refuses the changed statement" sjs "$W/att.bad" "$W/pub.pem"
# /v2/ lists each attestation as a referrer of the routed version's manifest.
oci() { curl -sS --fail -H "Authorization: Bearer $MG_TOKEN" \
    -H 'Accept: application/vnd.oci.image.manifest.v1+json' "$@"; }
MD=$(oci -o /dev/null -D - "$MG_URL/v2/fraud/manifests/v2" | tr -d '\r' |
    awk -F': ' 'tolower($1) == "docker-content-digest" {print $2}')
oci "$MG_URL/v2/fraud/referrers/$MD" >"$W/referrers.json"
check "the version's referrers list its release attestation" jqf --arg g "$GEN" \
    '[.manifests[] | select(.annotations["dev.modelgate.alias"] == "production" and
      .annotations["dev.modelgate.generation"] == $g)] | length == 1' "$W/referrers.json"
RD=$(jq -r --arg g "$GEN" '.manifests[] | select(.annotations["dev.modelgate.generation"] == $g)
    | .digest' "$W/referrers.json")
oci "$MG_URL/v2/fraud/manifests/$RD" >"$W/refman.json"
check "the referrer manifest's digest is its bytes'" test "sha256:$(sha256sum <"$W/refman.json" | cut -d' ' -f1)" = "$RD"
check "... and its subject is the version's manifest" jqf --arg d "$MD" '.subject.digest == $d' "$W/refman.json"
oci "$MG_URL/v2/fraud/blobs/$(jq -r '.layers[0].digest' "$W/refman.json")" >"$W/refblob.json"
check "its layer is the attestation bundle, byte for byte" cmp -s "$W/refblob.json" "$W/att.$GEN"
as "$MG_TOKEN" GET "/api/v1/models/fraud/aliases/production/history/999/attestation"
check "a generation that does not exist: 404" status_is 404

# ---- trusted publishing: a CI token exchanged for a short-lived scoped token --------------
tp='{"issuer":"'$ISS'","audience":"modelgate-ci",
  "claims":{"repository":"acme/fraud","ref":"refs/heads/main"},
  "roles":["publisher"],"models":["fraud","fraud-*"],"aliases":["staging"],"ttl_seconds":120}'
as "$MG_TOKEN" PUT /api/v1/trusted-publishers/fraud-ci "$tp"
check "an admin adds a trusted publisher" status_is 200
as "$MG_TOKEN" PUT /api/v1/trusted-publishers/bad "$(jq -c '.ttl_seconds = 30' <<<"$tp")"
check "ttl_seconds under 60 is refused (400)" status_is 400
as "$MG_TOKEN" PUT /api/v1/trusted-publishers/bad "$(jq -c '.claims = {}' <<<"$tp")"
check "a publisher without claim rules is refused (400)" status_is 400
as "$MG_TOKEN" PUT /api/v1/trusted-publishers/bad "$(jq -c '.roles = ["admin"]' <<<"$tp")"
check "a publisher granting admin is refused (400)" status_is 400
check "trusted publishers are listed" test \
    "$(mg_api GET /api/v1/trusted-publishers | jq -r '[.items[].name] | join(",")')" = fraud-ci

CIQ="aud=modelgate-ci&sub=repo:acme/fraud:ref:refs/heads/main&c.repository=acme/fraud&c.ref=refs/heads/main"
exchange() { # JWT: the reply in $W/body, the status in $ST
    ST=$(curl -sS -o "$W/body" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
        --data-binary "{\"grant_type\":\"urn:ietf:params:oauth:grant-type:token-exchange\",
          \"subject_token\":\"$1\",
          \"subject_token_type\":\"urn:ietf:params:oauth:token-type:id_token\"}" \
        "$MG_URL/api/v1/tokens/exchange")
}
CI=$(mint "$CIQ&jti=run-1")
exchange "$CI"
check "a matching CI token is exchanged" status_is 200
check "... for a short-lived bearer access token" jqe '.token_type == "Bearer" and .expires_in == 120
    and .issued_token_type == "urn:ietf:params:oauth:token-type:access_token"'
CIT=$(jq -r .access_token "$W/body")
CIF=$(mint "$CIQ&jti=run-form")
ST=$(curl -sS -o "$W/body" -w '%{http_code}' -X POST \
    --data-urlencode grant_type=urn:ietf:params:oauth:grant-type:token-exchange \
    --data-urlencode "subject_token=$CIF" \
    --data-urlencode subject_token_type=urn:ietf:params:oauth:token-type:jwt \
    "$MG_URL/api/v1/tokens/exchange")
check "the exchange takes a form body too (RFC 8693)" status_is 200
ST=$(curl -sS -o "$W/body" -w '%{http_code}' -X POST -d 'grant_type=a&grant_type=b' \
    "$MG_URL/api/v1/tokens/exchange")
check "a form naming a field twice is refused (400)" status_is 400
exchange "$CI"
check "a replayed jti is refused (400)" status_is 400
check "... as invalid_grant naming jti" jqe '.error.code == "invalid_grant" and .error.field == "jti"'
ci_refusal() { # NAME QUERY FIELD
    local t
    t=$(mint "$2")
    exchange "$t"
    check "exchange, $1: 400 invalid_grant" jqe '.error.code == "invalid_grant"'
    check "exchange, $1: names the $3 check" jqe --arg f "$3" '.error.field == $f'
    refute "exchange, $1: does not echo the token" grep -qF -- "${t:0:40}" "$W/body"
    printf '%s\n' "$t" >>"$W/refused.tokens"
}
ci_refusal "claim mismatch" "${CIQ/refs\/heads\/main&/refs/heads/dev&}&c.ref=refs/heads/dev&jti=run-2" claims.ref
ci_refusal "wrong audience" "aud=modelgate&sub=x&c.repository=acme/fraud&c.ref=refs/heads/main&jti=run-3" aud
ci_refusal "expired" "$CIQ&exp=-120&jti=run-4" exp
ci_refusal "alg none" "$CIQ&bad=none&jti=run-5" alg
ci_refusal "no jti" "$CIQ" jti
ci_refusal "unknown issuer" "$CIQ&iss=https://ci.evil.example&jti=run-6" iss

as "$CIT" GET /api/v1/whoami
check "the exchanged token: the publisher's roles" jqe '.roles == ["publisher"] and .aliases == ["staging"]'
as "$CIT" POST /api/v1/models/fraud/versions "{\"artifact\":\"$D1\"}"
check "CI publishes a version of its model" status_is 201
check "... recorded as a trusted publisher with the rule claims" jqe --arg iss "$ISS" \
    '.publisher == {"kind":"trusted","name":"fraud-ci","issuer":$iss,
      "subject":"repo:acme/fraud:ref:refs/heads/main",
      "claims":{"repository":"acme/fraud","ref":"refs/heads/main"}}'
as "$CIT" POST /api/v1/models '{"name":"other"}'
check "CI cannot create a model outside its patterns (403)" status_is 403
as "$CIT" POST /api/v1/models '{"name":"fraud-v2"}'
check "CI creates a model its pattern names" status_is 201
as "$CIT" GET /api/v1/tokens
check "the exchanged token is not an admin (403)" status_is 403

# The CLI exchanges MODELGATE_OIDC_TOKEN by itself.
CLI=${MODELGATE_CLI:-${MG_BUILD_DIR:?}/modelgate}
CI2=$(mint "$CIQ&jti=run-7")
check "the CLI exchanges MODELGATE_OIDC_TOKEN" env -u MODELGATE_TOKEN MODELGATE_URL="$MG_URL" \
    MODELGATE_OIDC_TOKEN="$CI2" XDG_CONFIG_HOME="$W/none" "$CLI" versions fraud >"$W/cli.out" 2>"$W/cli.err"
check "... and lists the versions" grep -q fraud "$W/cli.out"
env -u MODELGATE_TOKEN MODELGATE_URL="$MG_URL" MODELGATE_OIDC_TOKEN="$CI2" \
    XDG_CONFIG_HOME="$W/none" "$CLI" versions fraud >"$W/cli.out" 2>"$W/cli.err" || true
check "... a second use of the same CI token is refused as a replay" grep -q "jti" "$W/cli.err"
refute "... and the CLI does not print it" grep -qF -- "${CI2##*.}" "$W/cli.err" "$W/cli.out"
printf '%s\n' "$CI" "$CI2" "$CIT" "$CIF" >>"$W/refused.tokens"

# ---- separation of duties by person: a promotion's creator ---------------------------------
# Dave creates a promotion through a token he created, then tries to approve it through an
# IdP JWT (another name, the same person).
mg_api POST /api/v1/models '{"name":"loans"}' >/dev/null
mg_api POST /api/v1/models/loans/versions "{\"artifact\":\"$D1\"}" >/dev/null
mg_api POST /api/v1/models/loans/versions "{\"artifact\":\"$D2\"}" >/dev/null
mg_api PUT /api/v1/models/loans/aliases/staging '{"version":1}' >/dev/null
mg_api PUT /api/v1/models/loans/policies/staging '{
  "approvals": {"required": 1},
  "rollout": {"steps": [100], "bake_seconds": 0, "auto_advance": true}}' >/dev/null
DAVE_ADMIN=$(mint "sub=dave&email=dave.admin@example.com&groups=ml-admins")
as "$DAVE_ADMIN" POST /api/v1/tokens '{"name":"dave-deploy","roles":["deployer","reader"]}'
check "an SSO admin creates a deployer token" status_is 201
DAVEBOT=$(jq -r .token "$W/body")
as "$DAVEBOT" POST /api/v1/promotions '{"model":"loans","version":2,"alias":"staging"}'
check "Dave's token creates a promotion" status_is 201
LPID=$(jq -r .id "$W/body")
refute "... its creator's person is not shown" jqe 'has("_creator")'
mg_wait_for 30 bash -c "curl -sS -H 'Authorization: Bearer $MG_TOKEN' '$MG_URL/api/v1/promotions/$LPID' |
    jq -e '.state == \"awaiting_approval\"' >/dev/null"
DAVE=$(mint "sub=dave&email=dave@example.com&groups=ml-reviewers")
as "$DAVE" POST "/api/v1/promotions/$LPID/approvals" '{"decision":"approve","comment":"lgtm"}'
check "the promotion's creator cannot approve it through a JWT (403)" status_is 403
check "... as self_approval naming the creator" jqe '.error.code == "self_approval" and
    (.error.message | contains("created this promotion"))'
check "... and it records no approval" test \
    "$(mg_api GET "/api/v1/promotions/$LPID" | jq '.approvals | length')" -eq 0
FRANK=$(mint "sub=frank&email=frank@example.com&groups=ml-reviewers")
as "$FRANK" POST "/api/v1/promotions/$LPID/approvals" '{"decision":"approve","comment":"ok"}'
check "another person approves it" status_is 200

# ---- attestations survive backup and restore (SQLite: the backup is the data directory) ----
if [ -z "${MG_IDENTITY_DATABASE-}" ]; then
    "$MODELGATED" backup --data-dir "$MG_DATA" --out "$W/backup.tar" >"$W/backup.json" 2>&1
    "$MODELGATED" restore --data-dir "$W/restored" --from "$W/backup.tar" >"$W/restore.json" 2>&1
    "$MODELGATED" --data-dir "$W/restored" --listen 127.0.0.1:0 --port-file "$W/rport" \
        2>>"$W/restored.log" &
    R_PID=$!
    trap 'rc=$?; kill -TERM $ISS_PID $R_PID 2>/dev/null || true; mg_cleanup "$rc"' EXIT
    mg_wait_for 20 test -s "$W/rport" || { cat "$W/restored.log" >&2; exit 1; }
    R_URL="http://127.0.0.1:$(cat "$W/rport")"
    for g in $(seq 1 "$GEN"); do
        curl -sS --fail -H "Authorization: Bearer $MG_TOKEN" \
            "$R_URL/api/v1/models/fraud/aliases/production/history/$g/attestation" >"$W/ratt.$g"
        check "generation $g's attestation is byte-identical after backup and restore" \
            cmp -s "$W/att.$g" "$W/ratt.$g"
    done
    kill -TERM "$R_PID"
    wait "$R_PID" || true
fi

# ---- nothing logged a token ---------------------------------------------------------------
# Stopped first: request lines are written in batches, the last one when the server stops.
mg_stop
for t in $ALICE $ALICE2 $BOB $BOT $BOBBOT $CAROL $(cat "$W/refused.tokens"); do
    for f in "${t##*.}" "${t%%.*}"; do [ -z "$f" ] || printf '%s\n' "$f" >>"$W/fragments"; done
done
refute "no token (nor its header or signature) reaches the server's log" \
    grep -qF -f "$W/fragments" "$MG_TMP/server.log"

mg_summary
