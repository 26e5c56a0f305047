#!/usr/bin/env bash
# Milestone M8, backup and restore. A populated registry (models, versions of
# a tar.gz and a single file, datasets with lineage, aliases, a policy, a
# promotion, appended metrics, tokens, audit) is backed up with
# `modelgated backup` WHILE a client keeps writing (uploads, versions, alias
# changes). The backup restores into a new directory; a second server on it
# serves every version identically, every artifact hashes to its digest,
# every signature bundle is byte-identical and verifies with stock
# `openssl dgst -sha256 -verify` (docs/design.md's recipe), the audit log verifies
# with the same head the original had at that entry, and the restored server
# keeps signing with the same key. Restoring into a non-empty directory is
# refused without touching it; a tampered or missing blob, or an edited audit
# entry, in the tar makes restore fail.
. "$(dirname "$0")/lib.sh"

W="$MG_TMP/work"
mkdir -p "$W"
R_PID=""
WRITER_PID=""
stop_all() {
    local rc=$?
    touch "$W/stop" 2>/dev/null || true
    if [ -n "$WRITER_PID" ]; then wait "$WRITER_PID" 2>/dev/null || true; fi
    # The restored server too is stopped with a checked exit and its log checked (M29).
    if [ -n "$R_PID" ] && [ -e "/proc/$R_PID" ]; then
        mg_stop_pid "$R_PID" "$W/restored.log" || rc=1
    fi
    mg_check_log "$W/restored.log" "$MG_TOKEN" || rc=1
    mg_cleanup "$rc"
}
trap stop_all EXIT

mg_start

# ---- populate -----------------------------------------------------------------
mkdir -p "$W/model/sub"
printf 'weights-%s' "$(seq 1 2000)" >"$W/model/weights.bin"
printf '{"layers": 3}\n' >"$W/model/config.json"
printf 'tokenizer' >"$W/model/sub/tok.txt"
tar -C "$W/model" -czf "$W/model.tar.gz" .
printf 'single-file-model' >"$W/single.onnx"
head -c 200000 /dev/urandom >"$W/big.bin"

mg_api POST /api/v1/models '{"name":"fraud","description":"card fraud","tags":{"team":"risk"}}' >/dev/null
mg_api POST /api/v1/models '{"name":"churn"}' >/dev/null
TGZ=$(mg_upload "$W/model.tar.gz")
ONE=$(mg_upload "$W/single.onnx")
BIG=$(mg_upload "$W/big.bin")
DS_TRAIN="sha256:$(printf 'train-data' | sha256sum | cut -d' ' -f1)"
DS_CLEAN="sha256:$(printf 'clean-data' | sha256sum | cut -d' ' -f1)"
mg_api POST /api/v1/datasets "{\"digest\":\"$DS_TRAIN\",\"name\":\"fraud-train\",\"uri\":\"s3://b/train/\"}" >/dev/null
mg_api POST /api/v1/datasets "{\"digest\":\"$DS_CLEAN\",\"name\":\"fraud-clean\",\"parents\":[\"$DS_TRAIN\"]}" >/dev/null
IMG="registry.example/serve@sha256:$(printf '%064d' 0)"
mg_api POST /api/v1/models/fraud/versions "{\"artifact\":\"$TGZ\",\"image\":\"$IMG\",\"run_id\":\"r1\",
  \"datasets\":[{\"digest\":\"$DS_CLEAN\",\"name\":\"fraud-clean\",\"role\":\"train\"}],
  \"metrics\":{\"auc\":0.93},\"params\":{\"lr\":0.01},\"tags\":{\"stage\":\"exp\"},
  \"resources\":{\"parameters\":7000000,\"precision\":\"fp16\"}}" >/dev/null
mg_api POST /api/v1/models/fraud/versions "{\"artifact\":\"$ONE\",\"image\":\"$IMG\",\"metrics\":{\"auc\":0.95}}" >/dev/null
mg_api POST /api/v1/models/churn/versions "{\"artifact\":\"$BIG\"}" >/dev/null
mg_api POST /api/v1/models/fraud/versions/1/metrics '{"metrics":{"f1":0.81}}' >/dev/null
mg_api PUT /api/v1/models/fraud/aliases/staging '{"version":1}' >/dev/null
mg_api PUT /api/v1/models/churn/aliases/staging '{"version":1}' >/dev/null
mg_api PUT /api/v1/models/fraud/policies/production \
    '{"thresholds":[{"metric":"auc","op":">=","value":0.9}],"rollout":{"steps":[100]}}' >/dev/null
PROMO=$(mg_api POST /api/v1/promotions '{"model":"fraud","version":2,"alias":"production"}' | jq -r .id)
check "the promotion succeeded" test \
    "$(mg_api GET "/api/v1/promotions/$PROMO" | jq -r .state)" = succeeded
READER=$(mg_api POST /api/v1/tokens '{"name":"backup-reader","roles":["reader"]}' | jq -r .token)

# ---- back up while a client writes ----------------------------------------------
# A write counts only when the upload, the version and the alias change all succeeded
# (M29: failed ones were counted too); failures are counted apart and reported.
writer() {
    local i=0 ok=0 failed=0 d
    while [ ! -e "$W/stop" ]; do
        i=$((i + 1))
        printf 'concurrent-%d-%s' "$i" "$RANDOM" >"$W/cw.bin"
        if d=$(mg_upload "$W/cw.bin" 2>/dev/null) &&
            mg_api POST /api/v1/models/churn/versions "{\"artifact\":\"$d\"}" >/dev/null 2>&1 &&
            mg_api PUT /api/v1/models/churn/aliases/staging "{\"version\":$(((i % 2) + 1))}" \
                >/dev/null 2>&1; then
            ok=$((ok + 1))
            echo "$ok" >"$W/writer.count.tmp" && mv "$W/writer.count.tmp" "$W/writer.count"
        else
            failed=$((failed + 1))
            echo "$failed" >"$W/writer.failed"
        fi
    done
}
writes_done() { [ -s "$W/writer.count" ] && cat "$W/writer.count" || echo 0; }
at_least_writes() { [ "$(writes_done)" -ge "$1" ]; }
audit_entries() { mg_api GET /api/v1/audit/verify | jq -r .entries; }

writer &
WRITER_PID=$!
mg_wait_for 30 at_least_writes 3 || { echo "the writer made no progress" >&2; exit 1; }
E0=$(audit_entries)
W0=$(writes_done)
BACKUP_RC=0
"$MODELGATED" backup --data-dir "$MG_DATA" --out "$W/backup.tar" >"$W/backup.json" 2>"$W/backup.err" ||
    BACKUP_RC=$?
W1=$(writes_done)
E1=$(audit_entries)
# The writer goes on after the backup too: it overlapped a live, writing server.
mg_wait_for 30 at_least_writes $((W1 + 2)) || true
touch "$W/stop"
wait "$WRITER_PID" || true
WRITER_PID=""
echo "backup: $(cat "$W/backup.json" "$W/backup.err"); writes $W0..$W1 around it, audit $E0..$E1;" \
    "failed writes: $(cat "$W/writer.failed" 2>/dev/null || echo 0)"
check "backup exits 0" test "$BACKUP_RC" -eq 0
check "writes went on around the backup" test "$(writes_done)" -gt "$W0"
check "the backup summary is JSON naming the file" \
    test "$(jq -r .file "$W/backup.json")" = "$W/backup.tar"
check "the backup holds the database, blobs and keys" sh -c \
    "tar -tf '$W/backup.tar' | grep -qx modelgate.db &&
     tar -tf '$W/backup.tar' | grep -q '^blobs/sha256/../${TGZ#sha256:}\$' &&
     tar -tf '$W/backup.tar' | grep -q '^keys/'"
check "no temp file is left beside the backup" \
    test "$(find "$W" -maxdepth 1 -name 'backup.tar?*' | wc -l)" -eq 0

# ---- restore and serve ------------------------------------------------------------
RD="$W/restored"
RESTORE_RC=0
# Relative paths, as typed in a shell: the data directory is resolved where the command runs.
(cd "$W" && "$MODELGATED" restore --data-dir restored --from backup.tar) >"$W/restore.json" \
    2>"$W/restore.err" || RESTORE_RC=$?
echo "restore: $(cat "$W/restore.json" "$W/restore.err")"
check "restore exits 0" test "$RESTORE_RC" -eq 0
check "the restore names the absolute data directory" \
    test "$(jq -r .data_dir "$W/restore.json")" = "$RD"
check "the restore summary says the audit verifies" \
    test "$(jq -r .audit.ok "$W/restore.json")" = true
check "the restored database passes integrity_check" \
    test "$(sqlite3 "$RD/modelgate.db" 'PRAGMA integrity_check')" = ok

rm -f "$W/rport"
"$MODELGATED" --data-dir "$RD" --listen 127.0.0.1:0 --port-file "$W/rport" 2>>"$W/restored.log" &
R_PID=$!
mg_wait_for 20 test -s "$W/rport" || { cat "$W/restored.log" >&2; exit 1; }
R_URL="http://127.0.0.1:$(cat "$W/rport")"

# rapi URL_BASE METHOD PATH: body on stdout; fails on HTTP >= 400.
rapi() { curl -sS --fail-with-body -H "Authorization: Bearer $MG_TOKEN" -X "$2" "$1$3"; }
# same PATH: the JSON is identical on both servers (keys sorted).
same() {
    local a b
    a=$(rapi "$MG_URL" GET "$1" | jq -S .) || return 1
    b=$(rapi "$R_URL" GET "$1" | jq -S .) || return 1
    [ "$a" = "$b" ] || { diff <(echo "$a") <(echo "$b") | head -20 >&2; return 1; }
}
same_bytes() {
    cmp -s <(rapi "$MG_URL" GET "$1") <(rapi "$R_URL" GET "$1")
}

# The audit: the restored head is the original's hash at the same entry.
RV=$(rapi "$R_URL" GET /api/v1/audit/verify)
RN=$(jq -r .entries <<<"$RV")
RH=$(jq -r .head <<<"$RV")
OH=$(rapi "$MG_URL" GET "/api/v1/audit?after=$((RN - 1))&limit=1" | jq -r '.items[0].hash')
echo "restored audit: $RN entries (the original had $E0 before and $E1 after the backup)"
check "the restored audit verifies" test "$(jq -r .ok <<<"$RV")" = true
check "the restored audit ends between the entries before and after the backup" \
    test "$RN" -ge "$E0" -a "$RN" -le "$E1"
check "the restored head is the original's hash at entry $RN" test "$RH" = "$OH"
check "the restore summary's head is the served head" test "$(jq -r .audit.head "$W/restore.json")" = "$RH"
check "the restored audit entries are the original's" \
    cmp -s <(rapi "$R_URL" GET "/api/v1/audit?limit=1000" | jq -c '.items[]') \
    <(rapi "$MG_URL" GET "/api/v1/audit?limit=1000" | jq -c ".items[] | select(.seq <= $RN)")

# Signing keys, tokens.
keys_without_time() { rapi "$1" GET /api/v1/signing-keys | jq -S '[.items[] | del(.created_at)]'; }
check "the same signing keys (keyid, PEM, active) are published" \
    test "$(keys_without_time "$MG_URL")" = "$(keys_without_time "$R_URL")"
check "the signing keys keep their created_at" same /api/v1/signing-keys
check "a token made before the backup works on the restored server" \
    curl -sS --fail -o /dev/null -H "Authorization: Bearer $READER" "$R_URL/api/v1/whoami"

# verify_bundle BUNDLE PUBKEY: docs/design.md's recipe, with nothing of ours.
verify_bundle() {
    local b=$1 pub=$2 d
    d=$(mktemp -d "$W/v.XXXXXX")
    jq -r .dsseEnvelope.payload "$b" | base64 -d >"$d/body"
    jq -r '.dsseEnvelope.signatures[0].sig' "$b" | base64 -d >"$d/sig"
    { printf 'DSSEv1 28 application/vnd.in-toto+json %d ' "$(stat -c%s "$d/body")"; cat "$d/body"; } >"$d/pae"
    openssl dgst -sha256 -verify "$pub" -signature "$d/sig" "$d/pae" >/dev/null 2>&1
}
# key_for URL BUNDLE: the published public key whose hint the bundle names.
key_for() {
    local hint k
    hint=$(jq -r .verificationMaterial.publicKey.hint "$2")
    curl -sS "$1/api/v1/signing-keys" | jq -c '.items[]' | while read -r k; do
        printf '%s' "$k" | jq -j .public_key_pem >"$W/cand.pem"
        if [ "$(sha256sum <"$W/cand.pem" | cut -d' ' -f1)" = "$hint" ]; then cat "$W/cand.pem"; fi
    done
}

# Every version of every model on the restored server.
versions_ok=0
versions_bad=0
for m in $(rapi "$R_URL" GET "/api/v1/models?limit=1000" | jq -r '.items[].name'); do
    for v in $(rapi "$R_URL" GET "/api/v1/models/$m/versions?limit=1000" | jq -r '.items[].version'); do
        p="/api/v1/models/$m/versions/$v"
        ok=1
        same "$p" || { echo "version $m/$v differs" >&2; ok=0; }
        digest=$(rapi "$R_URL" GET "$p" | jq -r .artifact.digest)
        got="sha256:$(rapi "$R_URL" GET "$p/artifact" | sha256sum | cut -d' ' -f1)"
        [ "$got" = "$digest" ] || { echo "artifact of $m/$v hashes to $got, not $digest" >&2; ok=0; }
        same "$p/files" || { echo "files of $m/$v differ" >&2; ok=0; }
        rapi "$R_URL" GET "$p/signature" >"$W/sig.json"
        same_bytes "$p/signature" || { echo "signature bundle of $m/$v differs" >&2; ok=0; }
        key_for "$R_URL" "$W/sig.json" >"$W/pub.pem"
        if ! [ -s "$W/pub.pem" ] || ! verify_bundle "$W/sig.json" "$W/pub.pem"; then
            echo "signature of $m/$v does not verify with openssl" >&2
            ok=0
        fi
        if [ "$ok" = 1 ]; then versions_ok=$((versions_ok + 1)); else versions_bad=$((versions_bad + 1)); fi
    done
done
echo "checked $versions_ok + $versions_bad restored versions"
check "every restored version is identical, intact and verifies with openssl" \
    test "$versions_bad" -eq 0 -a "$versions_ok" -ge 3
check "every version from before the writer started is restored" \
    test "$(rapi "$R_URL" GET /api/v1/models/fraud/versions | jq '.items | length')" -eq 2 \
    -a "$(rapi "$R_URL" GET /api/v1/models/churn/versions/1 | jq -r .artifact.digest)" = "$BIG"
check "the restored churn versions are a prefix of the original's" test \
    "$(rapi "$R_URL" GET "/api/v1/models/churn/versions?limit=1000" | jq '.items | length')" -le \
    "$(rapi "$MG_URL" GET "/api/v1/models/churn/versions?limit=1000" | jq '.items | length')"
check "the tar.gz version lists its 3 files" \
    test "$(rapi "$R_URL" GET /api/v1/models/fraud/versions/1/files | jq '.items | length')" -eq 3
check "the appended metric is restored" \
    test "$(rapi "$R_URL" GET /api/v1/models/fraud/versions/1 | jq -r .metrics.f1)" = 0.81

# Datasets and lineage, aliases, policy, promotion, last-known-good.
check "dataset with its parent" same "/api/v1/datasets/$DS_CLEAN"
check "dataset lineage to versions" same "/api/v1/datasets/$DS_TRAIN/versions"
check "fraud's staging alias" same /api/v1/models/fraud/aliases/staging
check "fraud's production alias history" same /api/v1/models/fraud/aliases/production/history
check "fraud's production policy" same /api/v1/models/fraud/policies/production
check "the promotion" same "/api/v1/promotions/$PROMO"
check "fraud's last-known-good" same /api/v1/models/fraud/aliases/production/last-known-good
check "the model fraud" same /api/v1/models/fraud

# The restored server writes, and signs with the same key.
curl -sS --fail-with-body -H "Authorization: Bearer $MG_TOKEN" -H 'Content-Type: application/json' \
    -d "{\"artifact\":\"$TGZ\"}" "$R_URL/api/v1/models/fraud/versions" >"$W/v3.json"
check "a new version on the restored server is number 3" test "$(jq -r .version "$W/v3.json")" = 3
check "it is signed with the restored key" test "$(jq -r .signature.keyid "$W/v3.json")" = \
    "$(rapi "$MG_URL" GET /api/v1/models/fraud/versions/1 | jq -r .signature.keyid)"
rapi "$R_URL" GET /api/v1/models/fraud/versions/3/signature >"$W/v3.sig"
key_for "$R_URL" "$W/v3.sig" >"$W/pub3.pem"
check "and its bundle verifies with openssl" verify_bundle "$W/v3.sig" "$W/pub3.pem"
check "the restored audit still verifies after a write" \
    test "$(rapi "$R_URL" GET /api/v1/audit/verify | jq -r .ok)" = true

# ---- refusals ----------------------------------------------------------------------
# restore_fails NAME TAR DIR PATTERN: non-zero exit with a message matching PATTERN.
restore_fails() {
    local name=$1 tar=$2 dir=$3 pattern=$4 rc=0
    "$MODELGATED" restore --data-dir "$dir" --from "$tar" >"$W/$name.out" 2>"$W/$name.err" || rc=$?
    echo "restore ($name): exit $rc: $(cat "$W/$name.out" "$W/$name.err")"
    [ "$rc" -ne 0 ] && grep -Eqi "$pattern" "$W/$name.err"
}

mkdir -p "$W/nonempty"
echo precious >"$W/nonempty/keep.txt"
check "restore into a non-empty directory is refused" \
    restore_fails nonempty "$W/backup.tar" "$W/nonempty" "not empty"
check "and leaves that directory as it was" test \
    "$(ls -A "$W/nonempty")" = keep.txt -a "$(cat "$W/nonempty/keep.txt")" = precious
check "restore over the running restored server's directory is refused" \
    restore_fails live "$W/backup.tar" "$RD" "not empty"

# Repack the backup's files (same names, same order) after changing them.
mkdir -p "$W/x"
tar -C "$W/x" -xf "$W/backup.tar"
repack() { (cd "$W/x" && tar -cf "$1" modelgate.db blobs keys); }
repack "$W/repacked.tar"
check "the unchanged repacked backup restores (the control)" \
    sh -c "'$MODELGATED' restore --data-dir '$W/r-control' --from '$W/repacked.tar' >/dev/null 2>&1"

TGZ_FILE="$W/x/blobs/sha256/$(cut -c8-9 <<<"$TGZ")/${TGZ#sha256:}"
cp "$TGZ_FILE" "$W/tgz.orig"
printf '\x00' | dd of="$TGZ_FILE" bs=1 seek=100 conv=notrunc status=none
repack "$W/tampered.tar"
check "a tampered blob makes restore fail" \
    restore_fails tampered "$W/tampered.tar" "$W/r-tampered" "damaged|${TGZ#sha256:}"
# A refused restore must not leave a data directory a server would start on
# and serve the damaged blob from.
check "the failed restore leaves no data behind" \
    test ! -e "$W/r-tampered/modelgate.db" -a ! -e "$W/r-tampered/blobs/sha256"
cp "$W/tgz.orig" "$TGZ_FILE"

rm "$TGZ_FILE"
repack "$W/missing.tar"
check "a missing blob makes restore fail" \
    restore_fails missing "$W/missing.tar" "$W/r-missing" "missing|${TGZ#sha256:}"
cp "$W/tgz.orig" "$TGZ_FILE"

# sqlite3 (the CLI) is a test dependency (scripts/install-deps.sh): no silent skip.
cp "$W/x/modelgate.db" "$W/db.orig"
check "the audit entry can be edited" \
    sqlite3 "$W/x/modelgate.db" "UPDATE audit SET actor = 'mallory' WHERE seq = 2"
repack "$W/audit.tar"
check "an edited audit entry makes restore fail" \
    restore_fails audit "$W/audit.tar" "$W/r-audit" "audit"
cp "$W/db.orig" "$W/x/modelgate.db"

mg_summary
