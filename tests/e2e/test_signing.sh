#!/usr/bin/env bash
# Signatures verify offline with stock openssl (docs/design.md "Signing"): a
# tar.gz version and a single-file version, tampering detected, and a bundle
# signed before a key rotation still verifies with the old published key.
. "$(dirname "$0")/lib.sh"

mg_start
W="$MG_TMP/work"
mkdir -p "$W/model/sub"
printf 'weights-%s' "$(seq 1 1000)" >"$W/model/weights.bin"
printf '{"layers": 3}\n' >"$W/model/config.json"
printf 'tokenizer' >"$W/model/sub/tok.txt"
tar -C "$W/model" -czf "$W/model.tar.gz" .
printf 'single-file-model' >"$W/single.onnx"

mg_api POST /api/v1/models '{"name":"fraud"}' >/dev/null
TGZ=$(mg_upload "$W/model.tar.gz")
ONE=$(mg_upload "$W/single.onnx")
mg_api POST /api/v1/models/fraud/versions "{\"artifact\":\"$TGZ\",\"metrics\":{\"auc\":0.93}}" >/dev/null
mg_api POST /api/v1/models/fraud/versions "{\"artifact\":\"$ONE\"}" >/dev/null

# verify_bundle BUNDLE PUBKEY: the docs/design.md recipe, with nothing of ours.
verify_bundle() {
    local b=$1 pub=$2 d
    d=$(mktemp -d "$MG_TMP/v.XXXXXX")
    jq -r .dsseEnvelope.payload "$b" | base64 -d >"$d/body"
    jq -r '.dsseEnvelope.signatures[0].sig' "$b" | base64 -d >"$d/sig"
    { printf 'DSSEv1 28 application/vnd.in-toto+json %d ' "$(stat -c%s "$d/body")"; cat "$d/body"; } >"$d/pae"
    openssl dgst -sha256 -verify "$pub" -signature "$d/sig" "$d/pae" >/dev/null 2>&1
}

# The public key whose hint the bundle names.
key_for() {
    local hint
    hint=$(jq -r .verificationMaterial.publicKey.hint "$1")
    curl -sS "$MG_URL/api/v1/signing-keys" | jq -r '.items[].public_key_pem' >/dev/null
    curl -sS "$MG_URL/api/v1/signing-keys" | jq -c '.items[]' | while read -r k; do
        printf '%s' "$k" | jq -j .public_key_pem >"$MG_TMP/cand.pem"
        if [ "$(sha256sum <"$MG_TMP/cand.pem" | cut -d' ' -f1)" = "$hint" ]; then
            cat "$MG_TMP/cand.pem"
        fi
    done
}

mg_api GET /api/v1/models/fraud/versions/1/signature >"$W/v1.sig"
mg_api GET /api/v1/models/fraud/versions/2/signature >"$W/v2.sig"
key_for "$W/v1.sig" >"$W/pub.pem"
check "the hint names a published key" test -s "$W/pub.pem"
check "keyid is sha256 of the DER public key" test \
    "$(openssl pkey -pubin -in "$W/pub.pem" -outform DER | sha256sum | cut -d' ' -f1)" = \
    "$(mg_api GET /api/v1/models/fraud/versions/1 | jq -r .signature.keyid)"
check "tar.gz bundle verifies with openssl" verify_bundle "$W/v1.sig" "$W/pub.pem"
check "single-file bundle verifies with openssl" verify_bundle "$W/v2.sig" "$W/pub.pem"
mg_api GET /api/v1/models/fraud/versions/1/signature >"$W/v1.again"
check "the bundle is byte-identical on every request" cmp -s "$W/v1.sig" "$W/v1.again"
check "the hint is listed with its key" test "$(curl -sS "$MG_URL/api/v1/signing-keys" |
    jq -r --arg h "$(jq -r .verificationMaterial.publicKey.hint "$W/v1.sig")" \
        '.items[] | select(.hint == $h) | .public_key_pem')" = "$(cat "$W/pub.pem")"
jq -r .dsseEnvelope.payload "$W/v1.sig" | base64 -d >"$W/v1.statement"
check "the signed statement writes metrics in their shortest text" \
    grep -q '"metrics":{"auc":0.93}' "$W/v1.statement"
check "bundle media type" test "$(jq -r .mediaType "$W/v1.sig")" = \
    "application/vnd.dev.sigstore.bundle.v0.3+json"

# Every extracted file's sha256sum matches the signed resources, and ROOT is
# the sha256 of the concatenated raw digests.
jq -r .dsseEnvelope.payload "$W/v1.sig" | base64 -d >"$W/stmt.json"
mkdir -p "$W/x"
tar -C "$W/x" -xzf "$W/model.tar.gz"
files_match() {
    local name digest
    while read -r name digest; do
        [ "$(sha256sum "$W/x/$name" | cut -d' ' -f1)" = "$digest" ] || return 1
    done < <(jq -r '.predicate.resources[] | "\(.name) \(.digest)"' "$W/stmt.json")
    [ "$(jq '.predicate.resources | length' "$W/stmt.json")" -eq 3 ]
}
check "extracted files match the signed resources" files_match
root_matches() {
    local want
    want=$(jq -r '.predicate.resources[].digest' "$W/stmt.json" | tr -d '\n' | xxd -r -p | sha256sum | cut -d' ' -f1)
    [ "$want" = "$(jq -r '.subject[0].digest.sha256' "$W/stmt.json")" ]
}
check "subject digest is ROOT over the resources" root_matches
check "subject name is model-v1" test "$(jq -r '.subject[0].name' "$W/stmt.json")" = fraud-v1
check "predicate carries the version metadata" test \
    "$(jq -r '.predicate.modelgate.artifact' "$W/stmt.json")" = "$TGZ"
jq -r .dsseEnvelope.payload "$W/v2.sig" | base64 -d >"$W/stmt2.json"
check "single file is one resource named ." test \
    "$(jq -r '.predicate.resources[0].name + " " + .predicate.resources[0].digest' "$W/stmt2.json")" = \
    ". $(sha256sum "$W/single.onnx" | cut -d' ' -f1)"

# Tampering: a changed payload byte breaks the signature; a changed file
# breaks its digest.
jq --arg p "$(sed 's/fraud-v1/fraud-v9/' "$W/stmt.json" | base64 -w0)" \
    '.dsseEnvelope.payload = $p' "$W/v1.sig" >"$W/tampered.sig"
refute "a changed payload does not verify" verify_bundle "$W/tampered.sig" "$W/pub.pem"
printf 'x' >>"$W/x/config.json"
refute "a changed file no longer matches" files_match

# Rotation: old bundles still verify with the old (now inactive) key.
mg_stop
"$MODELGATED" keys rotate --data-dir "$MG_DATA" >"$W/newkey" 2>/dev/null
mg_start
mg_api POST /api/v1/models/fraud/versions "{\"artifact\":\"$ONE\"}" >/dev/null
mg_api GET /api/v1/models/fraud/versions/3/signature >"$W/v3.sig"
check "two keys are published after rotation" test \
    "$(curl -sS "$MG_URL/api/v1/signing-keys" | jq '.items | length')" -eq 2
check "the old key is inactive" test \
    "$(curl -sS "$MG_URL/api/v1/signing-keys" | jq '[.items[] | select(.active == false)] | length')" -eq 1
key_for "$W/v1.sig" >"$W/old.pem"
key_for "$W/v3.sig" >"$W/new.pem"
check "a pre-rotation bundle verifies with the old published key" verify_bundle "$W/v1.sig" "$W/old.pem"
check "a post-rotation bundle verifies with the new key" verify_bundle "$W/v3.sig" "$W/new.pem"
refute "the new key does not verify the old bundle" verify_bundle "$W/v1.sig" "$W/new.pem"
check "new versions name the new keyid" test \
    "$(mg_api GET /api/v1/models/fraud/versions/3 | jq -r .signature.keyid)" = "$(cat "$W/newkey")"

# Path order (docs/design.md "Signing"): names whose byte order and component order differ. The
# order is computed here with sort(1), '/' mapped below every other byte, and the subject
# must be the ROOT over the files' own sha256sums in that order.
mkdir -p "$W/order/sub/deep"
for f in sub/a.txt sub/deep/b sub-notes.txt sub.cfg; do printf 'content of %s' "$f" >"$W/order/$f"; done
tar -C "$W/order" -cf "$W/order.tar" sub sub-notes.txt sub.cfg
ORD=$(mg_upload "$W/order.tar")
ORDV=$(mg_api POST /api/v1/models/fraud/versions "{\"artifact\":\"$ORD\"}" | jq -r .version)
mg_api GET "/api/v1/models/fraud/versions/$ORDV/signature" >"$W/order.sig"
jq -r .dsseEnvelope.payload "$W/order.sig" | base64 -d >"$W/stmt3.json"
(cd "$W/order" && find . -type f | sed 's|^\./||') | tr '/' '\001' | LC_ALL=C sort | tr '\001' '/' \
    >"$W/order.expected"
check "resources are listed in model_signing's path order" test \
    "$(jq -r '.predicate.resources[].name' "$W/stmt3.json")" = "$(cat "$W/order.expected")"
check "path order differs from byte order here" test \
    "$(LC_ALL=C sort "$W/order.expected")" != "$(cat "$W/order.expected")"
path_root() {
    local f
    while read -r f; do sha256sum "$W/order/$f" | cut -d' ' -f1; done <"$W/order.expected" |
        tr -d '\n' | xxd -r -p | sha256sum | cut -d' ' -f1
}
check "subject is ROOT over the files in path order" test \
    "$(path_root)" = "$(jq -r '.subject[0].digest.sha256' "$W/stmt3.json")"
key_for "$W/order.sig" >"$W/order.pem"
check "the path-ordered bundle verifies with openssl" verify_bundle "$W/order.sig" "$W/order.pem"

mg_summary
