#!/usr/bin/env bash
# M18 finding 13 and the DNS-rebinding note:
# - a data directory made beforehand (a volume, a plain mkdir) that other users can read is
#   refused at start with one clear line, unless --allow-shared-dir;
# - whatever the umask, the database, its WAL and shm, the admin token, keys and blobs are
#   0600 (directories 0700), and a database left 0644 by an older version is tightened;
# - the UI's origin check: a Host that is a DNS name (rebinding) is refused without
#   --public-url; with --public-url only that origin signs in.
. "$(dirname "$0")/../e2e/lib.sh"

mode_of() { stat -c '%a' "$1"; }

# --- a pre-made, world-readable data directory -------------------------------------------
umask 022
mkdir -p "$MG_DATA"
chmod 755 "$MG_DATA"
set +e
"$MODELGATED" --data-dir "$MG_DATA" --listen 127.0.0.1:0 --port-file "$MG_TMP/port" \
    >"$MG_TMP/refused.out" 2>&1
rc=$?
set -e
check "a 0755 data directory is refused" test "$rc" -ne 0
check "the refusal says why and what to do" grep -q 'open to other users (mode 0755).*--allow-shared-dir' \
    "$MG_TMP/refused.out"
check "the refusal is one line" test "$(wc -l <"$MG_TMP/refused.out")" -eq 1
check "nothing was created in it" test -z "$(ls -A "$MG_DATA")"

# --- allowed, under umask 022: every file 0600 anyway --------------------------------------
mg_start --allow-shared-dir
mg_api PUT /api/v1/gateways/hook \
    '{"kind":"webhook","url":"http://127.0.0.1:9/h","secret":"a-webhook-secret-of-enough-bytes"}' \
    >/dev/null
printf 'bytes' >"$MG_TMP/b"
mg_upload "$MG_TMP/b" >/dev/null
for f in modelgate.db modelgate.db-wal modelgate.db-shm admin.token; do
    check "$f is 0600 under umask 022" test "$(mode_of "$MG_DATA/$f")" = 600
done
bad=$(find "$MG_DATA" -type f ! -perm 600 -printf '%p %m\n')
check "every file in the data directory is 0600 ($bad)" test -z "$bad"
bad=$(find "$MG_DATA" -mindepth 1 -type d ! -perm 700 -printf '%p %m\n')
check "every directory below it is 0700 ($bad)" test -z "$bad"
mg_stop

# --- an older version's 0644 database is tightened at start --------------------------------
chmod 644 "$MG_DATA/modelgate.db" "$MG_DATA/admin.token"
chmod 700 "$MG_DATA"
mg_start
check "a 0644 database is 0600 after start" test "$(mode_of "$MG_DATA/modelgate.db")" = 600
check "a 0644 admin token is 0600 after start" test "$(mode_of "$MG_DATA/admin.token")" = 600
check "a 0700 data directory needs no flag" kill -0 "$MG_PID"

# --- origins -------------------------------------------------------------------------------
port=${MG_URL##*:}
sign_in() { # HOST ORIGIN -> status
    curl -s -o /dev/null -w '%{http_code}' -H "Host: $1" -H "Origin: $2" \
        -H 'Content-Type: application/json' -d "{\"token\":\"$MG_TOKEN\"}" "$MG_URL/ui/session"
}
check "same origin on 127.0.0.1 signs in" test "$(sign_in "127.0.0.1:$port" "http://127.0.0.1:$port")" = 200
check "same origin on localhost signs in" test "$(sign_in "localhost:$port" "http://localhost:$port")" = 200
check "a rebound DNS name is refused" test \
    "$(sign_in "evil.example:$port" "http://evil.example:$port")" = 403
check "another origin is refused" test "$(sign_in "127.0.0.1:$port" "http://evil.example")" = 403
mg_stop
mg_start --public-url https://modelgate.example/
check "--public-url: that origin signs in" test \
    "$(sign_in "modelgate.example" "https://modelgate.example")" = 200
check "--public-url: the Host header no longer decides" test \
    "$(sign_in "127.0.0.1:$port" "http://127.0.0.1:${MG_URL##*:}")" = 403
check "--public-url: a rebound name is refused" test \
    "$(sign_in "evil.example" "https://evil.example")" = 403
set +e
"$MODELGATED" --data-dir "$MG_TMP/other" --public-url 'ftp://x' >"$MG_TMP/bad.out" 2>&1
rc=$?
set -e
check "a --public-url that is not an origin is refused" test "$rc" -ne 0

mg_summary
