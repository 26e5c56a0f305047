#!/usr/bin/env bash
# The modelgate CLI against a real modelgated: login and config, reproducible
# directory pushes, metrics and datasets, a promotion followed with --wait
# through approvals given by other tokens, lkg --format env evaluated by sh,
# rollback, pull (server key and offline key) with safe extraction, a
# tampered blob refused, offline verify, and the exit code of every failure
# class (0 ok, 1 error, 2 usage, 3 failed/rejected/rolled back, 4 timeout).
. "$(dirname "$0")/lib.sh"

CLI=${MODELGATE_CLI:-${MG_BUILD_DIR:?}/modelgate}
unset MODELGATE_URL MODELGATE_TOKEN
export XDG_CONFIG_HOME="$MG_TMP/config"
W="$MG_TMP/work"
mkdir -p "$W"
# The server's expansion cap is raised so that an artifact over the CLI's
# default cap can be stored, and pull is seen refusing it.
mg_start --max-archive-ratio 100000

# cli ARGS...: run the CLI; stdout in $OUT, stderr in $ERR, exit status in $RC.
cli() {
    RC=0
    "$CLI" "$@" >"$W/out" 2>"$W/err" || RC=$?
    OUT=$(cat "$W/out")
    ERR=$(cat "$W/err")
    cat "$W/out" "$W/err" >>"$W/all.log"
}
# as TOKEN ARGS...: the same, with MODELGATE_TOKEN overriding the config.
as() {
    local t=$1
    shift
    RC=0
    MODELGATE_TOKEN=$t "$CLI" "$@" >"$W/out" 2>"$W/err" || RC=$?
    OUT=$(cat "$W/out")
    ERR=$(cat "$W/err")
    cat "$W/out" "$W/err" >>"$W/all.log"
}
jqe() { jq -e "$@" >/dev/null; }
rc_is() { [ "$RC" -eq "$1" ] || { echo "  exit $RC, wanted $1; stderr: $ERR" >&2; return 1; }; }
no_cr() { ! grep -q $'\r' "$1"; }
err_has() { grep -qF -- "$1" "$W/err" || { echo "  stderr lacks '$1': $ERR" >&2; return 1; }; }

token() {
    mg_api POST /api/v1/tokens "{\"name\":\"$1\",\"roles\":$2}" | jq -r .token
}
PUB=$(token pub '["publisher","reader"]')
DEP=$(token dep '["deployer","reader"]')
REV1=$(token rev1 '["reviewer","reader"]')
REV2=$(token rev2 '["reviewer","reader"]')
RD=$(token rd '["reader"]')
HEX0=$(printf '%064d' 0)
IMAGE="registry.example/serve@sha256:$HEX0"

# ---- help and usage ---------------------------------------------------------------------------
cli --help
check "--help lists the commands" rc_is 0
check "--help names pull" grep -q "pull" "$W/out"
cli push --help
check "push --help explains push" grep -q "usage: modelgate push MODEL PATH" "$W/out"
cli
check "no command is a usage error (2)" rc_is 2
cli frobnicate
check "an unknown command is a usage error (2)" rc_is 2
cli versions
check "a missing argument is a usage error (2)" rc_is 2
cli versions fraud --bogus
check "an unknown option is a usage error (2)" rc_is 2
cli versions 'Bad/Name'
check "a bad model name is a usage error (2)" rc_is 2

# ---- login ------------------------------------------------------------------------------------
cli versions fraud
check "without login or env: error (1)" rc_is 1
check "... saying how to log in" err_has "modelgate login"
printf '%s\n' "$PUB" >"$W/pub.token"
cli login --url "$MG_URL/" --token-file "$W/pub.token"
check "login succeeds" rc_is 0
check "login names the token's identity" grep -q "as pub" "$W/out"
CFG="$XDG_CONFIG_HOME/modelgate/config.json"
check "config file is mode 0600" test "$(stat -c %a "$CFG")" = 600
check "config holds the URL without a trailing /" test "$(jq -r .url "$CFG")" = "$MG_URL"
printf 'not-a-token\n' >"$W/bad.token"
cli login --url "$MG_URL" --token-file "$W/bad.token"
check "login with a bad token: error (1)" rc_is 1
check "... with the server's message" err_has "HTTP 401"
check "... and the saved config is kept" test "$(jq -r .token "$CFG")" = "$PUB"
as bogus-token versions fraud
check "MODELGATE_TOKEN overrides the config" rc_is 1
check "... and the server's error reaches stderr" err_has "unauthenticated"

# ---- push -------------------------------------------------------------------------------------
mkdir -p "$W/model/sub/deeper" "$W/model/empty"
printf '{"layers": 3}\n' >"$W/model/config.json"
head -c 300000 /dev/urandom >"$W/model/weights.bin"
printf '#!/bin/sh\necho serve\n' >"$W/model/serve.sh"
chmod 755 "$W/model/serve.sh"
printf 'tok' >"$W/model/sub/deeper/tokenizer.txt"
LONG=$(printf 'n%.0s' $(seq 1 150))
printf 'long' >"$W/model/sub/$LONG.txt"
printf 'spaced' >"$W/model/with space.txt"

cli push fraud "$W/model"
check "push to a missing model: error (1)" rc_is 1
check "... the server's not_found" err_has "not_found"
cli push fraud "$W/model" --create-model --json
check "push --create-model succeeds" rc_is 0
D1=$(jq -r .artifact.digest "$W/out")
check "a directory is stored as a tar with every file" test \
    "$(jq -r '.artifact.media_type + " " + (.artifact.files|tostring)' "$W/out")" = "application/x-tar 6"
cli push fraud "$W/model"
check "push prints the version number" test "$OUT" = 2
check "push draws no progress bar when stderr is not a terminal" no_cr "$W/err"
check "pushing the same directory twice gives the same digest" test \
    "$(mg_api GET /api/v1/models/fraud/versions/2 | jq -r .artifact.digest)" = "$D1"
cp -r "$W/model" "$W/copy"
touch -d '2001-01-01' "$W/copy/config.json"
cli push fraud "$W/copy" --json
check "a copy with other mtimes gives the same digest" test "$(jq -r .artifact.digest "$W/out")" = "$D1"
mg_api GET /api/v1/models/fraud/versions/1/files >"$W/files.json"
check "the long name survives packing" \
    jqe --arg p "sub/$LONG.txt" '[.items[].path] | index($p) != null' "$W/files.json"

DS1="sha256:$(printf 'train' | sha256sum | cut -d' ' -f1)"
DS2="sha256:$(printf 'eval' | sha256sum | cut -d' ' -f1)"
printf '{"params":{"lr":0.001},"tags":{"team":"risk"},"source":{"repo":"https://git.example/ml"}}' >"$W/meta.json"
cli push fraud "$W/model" --metric auc=0.95 --metric p95_latency_ms=40.5 \
    --dataset "$DS1:fraud-train:train" --dataset "$DS2:fraud-eval:eval" \
    --image "$IMAGE" --run-id train-42 --source-commit 9f2c --meta "$W/meta.json"
check "push with metrics, datasets and metadata" rc_is 0
V3=$OUT
mg_api GET "/api/v1/models/fraud/versions/$V3" >"$W/v3.json"
check "metrics recorded" jqe '.metrics.auc == 0.95 and .metrics.p95_latency_ms == 40.5' "$W/v3.json"
check "datasets recorded with roles" jqe --arg a "$DS1" --arg b "$DS2" \
    '[.datasets[] | .digest + " " + .role] | sort == ([$a + " train", $b + " eval"] | sort)' "$W/v3.json"
check "image, run id, source and --meta fields recorded" jqe --arg i "$IMAGE" \
    '.image == $i and .run_id == "train-42" and .source.commit == "9f2c" and
     .source.repo == "https://git.example/ml" and .params.lr == 0.001 and .tags.team == "risk"' \
    "$W/v3.json"
printf '{"auc": 0.5, "p95_latency_ms": 80}' >"$W/bad-metrics.json"
cli push fraud "$W/model" --metrics "$W/bad-metrics.json"
V4=$OUT
check "push --metrics FILE.json" test "$(mg_api GET "/api/v1/models/fraud/versions/$V4" | jq .metrics.auc)" = 0.5
cli push fraud "$W/model" --metric auc=0.96
V5=$OUT
printf 'single-file-model-bytes' >"$W/single.onnx"
cli push fraud "$W/single.onnx" --metric auc=0.97
V6=$OUT
check "a single file is stored as it is" test \
    "$(mg_api GET "/api/v1/models/fraud/versions/$V6" | jq -r .artifact.digest)" = \
    "sha256:$(sha256sum <"$W/single.onnx" | cut -d' ' -f1)"

cli push fraud "$W/model" --metric auc=high
check "a non-numeric metric is a usage error (2)" rc_is 2
cli push fraud "$W/model" --metric auc=1 --metrics "$W/bad-metrics.json"
check "--metric with --metrics is a usage error (2)" rc_is 2
cli push fraud "$W/model" --dataset "$DS1:x:training"
check "a bad dataset role is a usage error (2)" rc_is 2
cli push fraud "$W/model" --image registry.example/serve:latest
check "an unpinned image is a usage error (2)" rc_is 2
ln -s /etc/passwd "$W/copy/link"
cli push fraud "$W/copy"
check "a directory with a symlink is refused (1)" rc_is 1
check "... naming the link" err_has "symbolic link"
as "$RD" push fraud "$W/model"
check "a reader cannot push (1)" rc_is 1
check "... forbidden" err_has "forbidden"

cli versions fraud
check "versions lists every version" test "$(grep -c '^[0-9]' "$W/out")" -eq 7
cli versions fraud --json
check "versions --json" test "$(jq '.items | length' "$W/out")" -eq 7
cli show fraud "$V3"
check "show prints the metrics" grep -q "auc=0.95" "$W/out"
cli show fraud "$V3" --json
check "show --json prints numbers in their shortest text" grep -q '"auc": 0.95,' "$W/out"
refute "... never in 17 digits" grep -q '0.94999999999999996' "$W/out"
cli show fraud 99
check "show of a missing version: error (1)" rc_is 1
check "... with the server's message and status" err_has "HTTP 404"

# ---- promotion through approvals ---------------------------------------------------------------
mg_api PUT /api/v1/models/fraud/aliases/production '{"version":1}' >/dev/null
mg_api PUT /api/v1/models/fraud/policies/production '{
  "thresholds": [{"metric": "auc", "op": ">=", "value": 0.9}],
  "approvals": {"required": 2},
  "rollout": {"steps": [100], "bake_seconds": 0, "auto_advance": true}}' >/dev/null

# awaiting ID-VAR: wait for a promotion awaiting approval; its id in the named variable.
awaiting() {
    local id=""
    mg_wait_for 30 bash -c "curl -sS -H 'Authorization: Bearer $MG_TOKEN' \
        '$MG_URL/api/v1/promotions?model=fraud&state=awaiting_approval' | jq -e '.items[0].id' >/dev/null" ||
        return 1
    id=$(mg_api GET '/api/v1/promotions?model=fraud&state=awaiting_approval' | jq -r '.items[0].id')
    printf -v "$1" '%s' "$id"
}
state_of() { mg_api GET "/api/v1/promotions/$1" | jq -r .state; }

cli gates fraud "$V4" --alias production
check "gates with a failing threshold exits 3" rc_is 3
check "... and shows the failed gate" grep -q "failed" "$W/out"
cli gates fraud "$V3" --alias production
check "gates with nothing failed exits 0" rc_is 0

MODELGATE_TOKEN=$DEP "$CLI" promote fraud "$V3" --alias production --wait --timeout 120 \
    >"$W/promote.out" 2>"$W/promote.err" &
BG=$!
PID3=""
awaiting PID3 || true
check "the promotion waits for approval" test -n "$PID3"
as "$DEP" approve "$PID3" --comment "I started it"
check "a token without the reviewer role cannot approve (1)" rc_is 1
as "$REV1" approve "$PID3" --comment "metrics look right"
check "first approval" rc_is 0
as "$REV1" approve "$PID3"
check "approving twice: error (1)" rc_is 1
as "$REV2" approve "$PID3" --comment "ok"
check "second approval" rc_is 0
BGRC=0
wait "$BG" || BGRC=$?
check "promote --wait exits 0 once it succeeded" test "$BGRC" -eq 0
check "promote prints the promotion id" test "$(cat "$W/promote.out")" = "$PID3"
check "promote --wait reported progress on stderr" grep -q "promotion $PID3: succeeded" "$W/promote.err"
cat "$W/promote.out" "$W/promote.err" >>"$W/all.log"
as "$RD" status "$PID3"
check "status of a succeeded promotion exits 0" rc_is 0
check "status shows the state" grep -q "succeeded" "$W/out"

cli lkg fraud --alias production --format version
check "lkg --format version" test "$OUT" = "$V3"
cli lkg fraud --alias production --format env
printf '%s\n' "$OUT" >"$W/lkg.env"
check "lkg --format env evaluates in sh" sh -c '
    eval "$(cat "$1")"
    [ "$MODEL_VERSION" = "$2" ] && [ "$MODEL_ARTIFACT" = "$3" ] && [ "$MODEL_IMAGE" = "$4" ]' \
    sh "$W/lkg.env" "$V3" "$D1" "$IMAGE"
cli lkg fraud --alias production --json
check "lkg --json" test "$(jq .version "$W/out")" = "$V3"
cli lkg fraud --alias production --format yaml
check "lkg with an unknown format is a usage error (2)" rc_is 2
cli lkg fraud --alias staging
check "lkg of an alias without one: error (1)" rc_is 1
check "... no_known_good" err_has "no_known_good"

# ---- failure classes: rejected by a gate, by a reviewer, timed out, aborted -------------------
as "$DEP" promote fraud "$V4" --alias production --wait --timeout 60
check "a promotion failing a gate exits 3" rc_is 3
check "... naming the gate" err_has "gate"

MODELGATE_TOKEN=$DEP "$CLI" promote fraud "$V5" --alias production --wait --timeout 120 \
    >"$W/promote.out" 2>"$W/promote.err" &
BG=$!
PID5=""
awaiting PID5 || true
check "the promotion to reject awaits approval" test -n "$PID5"
as "$REV1" reject "$PID5"
check "reject without --comment is a usage error (2)" rc_is 2
check "... saying a comment is needed" err_has "comment"
as "$REV1" reject "$PID5" --comment "p95 looks off"
check "reject" rc_is 0
BGRC=0
wait "$BG" || BGRC=$?
check "promote --wait exits 3 when a reviewer rejects" test "$BGRC" -eq 3
check "... and says why" grep -q "p95 looks off" "$W/promote.err"
as "$RD" status "$PID5"
check "status of a rejected promotion exits 3" rc_is 3

as "$DEP" promote fraud "$V5" --alias production --wait --timeout 2
check "promote --wait past its timeout exits 4" rc_is 4
check "... saying it timed out" err_has "timed out"
PIDT=""
awaiting PIDT || true
check "the promotion left waiting awaits approval" test -n "$PIDT"
as "$DEP" status "$PIDT" --wait --timeout 1
check "status --wait past its timeout exits 4" rc_is 4
as "$DEP" abort "$PIDT" --reason "changed my mind"
check "abort" rc_is 0
as "$RD" status "$PIDT" --json
check "status of an aborted promotion exits 3" rc_is 3
check "status --json" test "$(jq -r .state "$W/out")" = aborted
as "$DEP" status nope!
check "a malformed promotion id is a usage error (2)" rc_is 2
# An unknown id is the server's 404 at once, not a lost server to retry.
SECONDS_BEFORE=$SECONDS
as "$DEP" status prm_doesnotexist --wait --timeout 60
check "status of an unknown promotion exits 1" rc_is 1
check "... with the server's message" err_has "does not exist (HTTP 404"
refute "... without blaming the connection" err_has "cannot reach"
check "... and without retrying (--wait)" test $((SECONDS - SECONDS_BEFORE)) -lt 5

# ---- rolled back during rollout, then rollback ------------------------------------------------
mg_api PUT /api/v1/models/fraud/policies/production '{
  "thresholds": [{"metric": "auc", "op": ">=", "value": 0.9}],
  "approvals": {"required": 2},
  "rollout": {"steps": [50, 100], "bake_seconds": 300, "auto_advance": true}}' >/dev/null
MODELGATE_TOKEN=$DEP "$CLI" promote fraud "$V5" --alias production --wait --timeout 120 \
    >"$W/promote.out" 2>"$W/promote.err" &
BG=$!
PIDR=""
awaiting PIDR || true
check "the promotion to roll back awaits approval" test -n "$PIDR"
as "$REV1" approve "$PIDR"
as "$REV2" approve "$PIDR"
check "the promotion rolls out" mg_wait_for 30 bash -c "[ \"\$(curl -sS -H 'Authorization: Bearer $MG_TOKEN' \
    '$MG_URL/api/v1/promotions/$PIDR' | jq -r .state)\" = rolling_out ]"
as "$DEP" rollback fraud --alias production
check "rollback without --reason is a usage error (2)" rc_is 2
as "$DEP" rollback fraud --alias production --reason "p95 regression" --wait 5
check "rollback during the rollout" rc_is 0
check "... back to the baseline" grep -q "rolled back to v$V3" "$W/out"
BGRC=0
wait "$BG" || BGRC=$?
check "promote --wait exits 3 when the promotion was rolled back" test "$BGRC" -eq 3
check "the promotion is rolled_back" test "$(state_of "$PIDR")" = rolled_back
check "the candidate is marked bad for the alias" test \
    "$(mg_api GET "/api/v1/models/fraud/versions/$V5" | jq -r '.bad_for | index("production") != null')" = true
as "$DEP" rollback fraud --alias production --reason "back to v1" --json
check "rollback again moves to the previous known-good" test \
    "$(jq '.routes[0].version' "$W/out")" = 1
cli lkg fraud --alias production --format version
check "lkg follows the rollback" test "$OUT" = 1
as "$DEP" rollback fraud --alias staging --reason "nothing there"
check "rollback with nowhere to go: error (1)" rc_is 1

# ---- pull and verify --------------------------------------------------------------------------
cli pull fraud "$V3" -o "$W/out3"
check "pull verifies and extracts" rc_is 0
check "the pulled tree equals the pushed one" diff -r "$W/model" "$W/out3"
check "the executable bit survives" test -x "$W/out3/serve.sh"
check "files are not executable otherwise" test ! -x "$W/out3/config.json"
check "no staging directory is left behind" bash -c "! ls -A '$W' | grep -q pull-"
cli pull fraud @production -o "$W/outp" --json
check "pull @alias resolves the routed version" test "$(jq .version "$W/out")" = 1
cli pull fraud "$V6" -o "$W/out6"
check "a single-file artifact lands as DIR/artifact" cmp "$W/single.onnx" "$W/out6/artifact"
cli pull fraud "$V6" -o "$W/new/parents/out6"
check "pull creates the missing parents of DIR" cmp "$W/single.onnx" "$W/new/parents/out6/artifact"
cli pull fraud "$V3" -o "$W/out3"
check "pull again into a directory holding that version, verified, succeeds (0)" rc_is 0
check "... saying nothing was downloaded" grep -q "already holds fraud v$V3, verified" "$W/out"
check "... and leaving it as it was" diff -r "$W/model" "$W/out3"
cli pull fraud "$V6" -o "$W/out6" --json
check "... a single-file artifact too" jqe '.unchanged == true' "$W/out"
cli pull fraud "$V6" -o "$W/out3"
check "pull into a directory holding another version: error (1)" rc_is 1
check "... saying why" err_has "does not hold fraud v$V6"
check "... and leaving it as it was" diff -r "$W/model" "$W/out3"
cli pull fraud "$V3"
check "pull without -o is a usage error (2)" rc_is 2

curl -sS "$MG_URL/api/v1/signing-keys" | jq -j '.items[0].public_key_pem' >"$W/pub.pem"
MODELGATE_URL="$MG_URL" cli pull fraud "$V3" -o "$W/outk" --key "$W/pub.pem"
check "pull --key with the server's key" rc_is 0
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 2>/dev/null |
    openssl pkey -pubout >"$W/other.pem"
cli pull fraud "$V3" -o "$W/outo" --key "$W/other.pem"
check "pull --key with another key refuses (1)" rc_is 1
check "... as a signature failure" err_has "signature verification failed"
check "... and creates nothing" test ! -e "$W/outo"

mg_api GET "/api/v1/models/fraud/versions/$V3/signature" >"$W/v3.sig"
cli verify "$W/v3.sig" --key "$W/pub.pem" "$W/out3"
check "verify offline against the pulled directory" rc_is 0
mg_api GET "/api/v1/models/fraud/versions/$V3/artifact" >"$W/v3.tar"
cli verify "$W/v3.sig" --key "$W/pub.pem" "$W/v3.tar"
check "verify offline against the archive" rc_is 0
mg_api GET "/api/v1/models/fraud/versions/$V6/signature" >"$W/v6.sig"
cli verify "$W/v6.sig" --key "$W/pub.pem" "$W/single.onnx"
check "verify offline against a single file" rc_is 0
printf 'x' >>"$W/out3/config.json"
cli verify "$W/v3.sig" --key "$W/pub.pem" "$W/out3"
check "verify refuses a changed file (1)" rc_is 1
check "... naming it" err_has "config.json"
cp "$W/single.onnx" "$W/out3/config.json"
: >"$W/out3/extra.bin"
cli verify "$W/v3.sig" --key "$W/pub.pem" "$W/out3"
check "verify refuses an added file (1)" rc_is 1
cli verify "$W/v3.sig" --key "$W/other.pem" "$W/v3.tar"
check "verify refuses another key (1)" rc_is 1
cli verify "$W/v3.sig" "$W/v3.tar"
check "verify without --key is a usage error (2)" rc_is 2

# Tampering with the stored blob: same size, other bytes.
mkdir -p "$W/tamper"
printf 'tamper me' >"$W/tamper/file.txt"
cli push fraud "$W/tamper" --json
VT=$(jq .version "$W/out")
DT=$(jq -r .artifact.digest "$W/out")
BLOB="$MG_DATA/blobs/sha256/${DT:7:2}/${DT:7}"
check "the blob is where docs/design.md says" test -f "$BLOB"
chmod u+w "$BLOB"
python3 - "$BLOB" <<'EOF'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
i = b.find(b"tamper me")
b[i:i + 9] = b"TAMPERED!"
open(p, "wb").write(bytes(b))
EOF
cli pull fraud "$VT" -o "$W/outt"
check "pull of a tampered blob refuses (1)" rc_is 1
check "... as a digest mismatch" err_has "does not match its digest"
check "... and creates nothing" test ! -e "$W/outt"
check "... and leaves no staging directory" bash -c "! ls -A '$W' | grep -q pull-"

# An artifact expanding 1000:1 (64 MiB of zeros in a 64 KiB tar.gz): the
# server above takes it, pull's default cap (200:1) refuses it unwritten.
python3 - "$W/bomb.tar.gz" <<'EOF'
import io, sys, tarfile
class Zeros(io.RawIOBase):
    def __init__(self, n): self.left = n
    def readable(self): return True
    def readinto(self, b):
        n = min(len(b), self.left)
        b[:n] = bytes(n)
        self.left -= n
        return n
with tarfile.open(sys.argv[1], "w:gz") as t:
    i = tarfile.TarInfo("zeros.bin")
    i.size = 64 << 20
    t.addfile(i, io.BufferedReader(Zeros(i.size)))
EOF
cli push fraud "$W/bomb.tar.gz" --json
check "the server with a raised cap stores the 1000:1 artifact" rc_is 0
VB=$(jq .version "$W/out")
cli pull fraud "$VB" -o "$W/outb"
check "pull of an artifact over the expansion cap refuses (1)" rc_is 1
check "... naming the cap" err_has "expands more than 200:1"
check "... and how far it got" err_has "expanded 0 bytes"
check "... and creates nothing" test ! -e "$W/outb"
check "... and leaves no staging directory" bash -c "! ls -A '$W' | grep -q pull-"
cli pull fraud "$VB" -o "$W/outb" --max-archive-ratio 2000
check "pull --max-archive-ratio 2000 takes it" rc_is 0
check "... all of it" test "$(stat -c %s "$W/outb/zeros.bin")" -eq $((64 << 20))
mg_api GET "/api/v1/models/fraud/versions/$VB/signature" >"$W/vb.sig"
cli verify "$W/vb.sig" --key "$W/pub.pem" "$W/bomb.tar.gz"
check "verify of the over-cap archive refuses (1)" rc_is 1
check "... naming the cap" err_has "expands more than 200:1"
cli verify "$W/vb.sig" --key "$W/pub.pem" "$W/bomb.tar.gz" --max-archive-ratio 2000
check "verify --max-archive-ratio 2000 takes it" rc_is 0
rm -rf "$W/outb"

# ---- models, promotions, alias set, token create -----------------------------------------------
cli models
check "models lists fraud with its alias routes" grep -q "^fraud .*production:v" "$W/out"
cli models --q rau --json
check "models --q filters by name" jqe '[.items[].name] == ["fraud"]' "$W/out"
cli promotions --state succeeded
check "promotions --state lists the succeeded promotion" grep -q "^$PID3 .*succeeded" "$W/out"
check "... and nothing else" test "$(grep -vc -e '^ID ' -e ' succeeded ' "$W/out")" -eq 0
cli promotions --state rejected --model fraud --json
check "promotions --json with filters" jqe '(.items | length) >= 1 and all(.items[]; .state == "rejected")' "$W/out"
cli promotions --model 'Bad/Name'
check "promotions with a bad model name is a usage error (2)" rc_is 2

as "$MG_TOKEN" token create ci-staging --role deployer --role reader --alias staging
check "token create (admin) succeeds" rc_is 0
CI=$OUT
check "... printing the secret alone" bash -c "[[ \$1 =~ ^mgt_[A-Za-z0-9_-]+\$ ]]" _ "$CI"
check "... which works, with the roles and alias asked for" jqe \
    '.name == "ci-staging" and (.roles | sort) == ["deployer", "reader"] and .aliases == ["staging"]' \
    <(curl -sS -H "Authorization: Bearer $CI" "$MG_URL/api/v1/whoami")
cli token create nope --role reader
check "token create by a non-admin: error (1)" rc_is 1
check "... forbidden" err_has "forbidden"
cli token create nope
check "token create without --role is a usage error (2)" rc_is 2
cli token revoke nope
check "an unknown token action is a usage error (2)" rc_is 2

as "$CI" alias set fraud staging 1=90,2=10
check "alias set with weighted routes" rc_is 0
check "... prints them" grep -q "fraud/staging routes v1=90,v2=10" "$W/out"
check "... and the server has them" test \
    "$(mg_api GET /api/v1/models/fraud/aliases/staging | jq -c '[.routes[] | [.version, .weight]]')" = '[[1,90],[2,10]]'
as "$CI" alias set fraud staging 2 --json
check "alias set to one version" jqe '[.routes[] | [.version, .weight]] == [[2, 100]]' "$W/out"
as "$CI" alias set fraud staging 1=50,2=40
check "weights not summing to 100: the server's error (1)" rc_is 1
check "... its message" err_has "100"
as "$CI" alias set fraud production 2
check "an alias outside the token's scope: error (1)" rc_is 1
as "$DEP" alias set fraud production 2
check "an alias a policy protects: error (1)" rc_is 1
check "... saying to promote" err_has "alias_protected"
cli alias get fraud staging 2
check "an unknown alias action is a usage error (2)" rc_is 2
cli alias set fraud staging 1=x
check "a malformed route is a usage error (2)" rc_is 2

# ---- secrets ----------------------------------------------------------------------------------
for t in "$PUB" "$DEP" "$REV1" "$REV2" "$RD" "$MG_TOKEN"; do
    refute "no token secret is ever printed (${t:0:4}...)" grep -qF -- "$t" "$W/all.log"
done

mg_summary
