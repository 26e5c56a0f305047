#!/usr/bin/env bash
# M18 finding 1: a caching nginx in front of modelgated. Blob and artifact bytes need a
# token; with "Cache-Control: public" nginx's proxy_cache kept them and served the next
# caller without a token. Now: the token holder gets the bytes (twice), a request without
# a token gets 401 from modelgated itself, and nginx's cache says it never stored them.
. "$(dirname "$0")/../e2e/lib.sh"

NGINX=/usr/sbin/nginx
if [ ! -x "$NGINX" ]; then
    mg_skip "nginx is not installed"
fi

mg_start
mg_api POST /api/v1/models '{"name":"fraud"}' >/dev/null
printf 'private weights %s' "$(seq 1 200)" >"$MG_TMP/w.bin"
D=$(mg_upload "$MG_TMP/w.bin")
mg_api POST /api/v1/models/fraud/versions "{\"artifact\":\"$D\"}" >/dev/null

# nginx cannot be told to pick a free port: try random ones until it starts.
ng="$MG_TMP/nginx"
mkdir -p "$ng/cache" "$ng/logs" "$ng/tmp"
start_nginx() {
    local port=$1
    cat >"$ng/nginx.conf" <<CONF
daemon off;
# the cache lives in this test's 0700 temp directory: workers run as whoever started nginx
# (ignored, with a notice, when that is not root)
user $(id -un);
worker_processes 1;
error_log $ng/logs/error.log;
pid $ng/nginx.pid;
events { worker_connections 64; }
http {
    access_log $ng/logs/access.log;
    proxy_cache_path $ng/cache keys_zone=mg:1m;
    proxy_temp_path $ng/tmp/proxy;
    client_body_temp_path $ng/tmp/body;
    fastcgi_temp_path $ng/tmp/fastcgi;
    uwsgi_temp_path $ng/tmp/uwsgi;
    scgi_temp_path $ng/tmp/scgi;
    add_header X-Cache-Status \$upstream_cache_status always;
    server {
        listen 127.0.0.1:$port;
        location / {
            proxy_pass $MG_URL;
            proxy_cache mg;
            proxy_cache_valid 200 206 10m;
            proxy_cache_key \$request_uri;
        }
    }
}
CONF
    "$NGINX" -p "$ng" -c "$ng/nginx.conf" 2>>"$ng/logs/stderr.log" &
    NGINX_PID=$!
    mg_wait_for 5 curl -sf -o /dev/null "http://127.0.0.1:$port/healthz"
}
NGINX_PID=""
for try in 1 2 3 4 5 6 7 8; do
    PORT=$((20000 + (RANDOM % 20000)))
    if start_nginx "$PORT"; then break; fi
    kill "$NGINX_PID" 2>/dev/null || true
    wait "$NGINX_PID" 2>/dev/null || true
    NGINX_PID=""
done
[ -n "$NGINX_PID" ] || { echo "nginx did not start:"; cat "$ng/logs/"*; exit 1; }
trap 'rc=$?; kill "$NGINX_PID" 2>/dev/null; wait "$NGINX_PID" 2>/dev/null; mg_cleanup "$rc"' EXIT
PX="http://127.0.0.1:$PORT"

for path in "/api/v1/blobs/$D" /api/v1/models/fraud/versions/1/artifact; do
    code=$(curl -s -o "$MG_TMP/got" -D "$MG_TMP/h1" -w '%{http_code}' \
        -H "Authorization: Bearer $MG_TOKEN" "$PX$path")
    check "$path through the cache with the token: 200" test "$code" = 200
    check "$path: the bytes are the blob's" cmp -s "$MG_TMP/got" "$MG_TMP/w.bin"
    check "$path: Cache-Control is private" grep -qi '^Cache-Control: private' "$MG_TMP/h1"
    refute "$path: never public" grep -qi '^Cache-Control:.*public' "$MG_TMP/h1"
    code=$(curl -s -o /dev/null -D "$MG_TMP/h2" -w '%{http_code}' \
        -H "Authorization: Bearer $MG_TOKEN" "$PX$path")
    check "$path: the token holder again: 200" test "$code" = 200
    refute "$path: nginx did not store it (no HIT)" grep -qi '^X-Cache-Status: HIT' "$MG_TMP/h2"
    code=$(curl -s -o "$MG_TMP/anon" -w '%{http_code}' "$PX$path")
    check "$path without a token through the cache: 401" test "$code" = 401
    refute "$path: no private byte reaches the anonymous caller" grep -q 'private weights' \
        "$MG_TMP/anon"
done

mg_summary
