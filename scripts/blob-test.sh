#!/usr/bin/env bash
# Blob backends for tests and benchmarks, on loopback, in a directory of the caller's (no
# system service, nothing outside DIR):
#
#   scripts/blob-test.sh start s3 DIR              an S3 server (tests/s3/server.js: s3rver, SigV4
#                                                  verified), bucket mgtest, S3RVER:S3RVER
#   scripts/blob-test.sh start oci DIR [none|basic|token]
#                                                  docker-registry (distribution 2.8) with deletes
#                                                  enabled; basic: htpasswd; token: the bearer
#                                                  flow through tests/oci/token-server.js
#   scripts/blob-test.sh url DIR [PREFIX]          a --blobs URL for this server (PREFIX: a key
#                                                  prefix / repository of its own)
#   scripts/blob-test.sh kill DIR                  SIGKILL the server (data kept)
#   scripts/blob-test.sh restart DIR               start it again on the same port and data
#   scripts/blob-test.sh gc DIR                    oci: stop the registry, run its garbage-collect,
#                                                  start it again
#   scripts/blob-test.sh stop DIR                  stop it and remove DIR
# DIR/kind, DIR/port, DIR/credentials (0600; "" when none) describe the server.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cmd=${1:?usage: blob-test.sh start|url|kill|restart|gc|stop ...}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

wait_port() { # port: until something answers there (30 s)
    local i
    for ((i = 0; i < 300; i++)); do
        if curl -s -o /dev/null "http://127.0.0.1:$1/"; then return 0; fi
        sleep 0.1
    done
    echo "blob-test.sh: nothing listens on port $1" >&2
    return 1
}

run_s3() { # dir
    local d=$1
    if [[ ! -d $root/tests/s3/node_modules/@20minutes/s3rver ]]; then
        echo "blob-test.sh: tests/s3/node_modules missing (scripts/install-deps.sh runs npm ci)" >&2
        return 1
    fi
    node "$root/tests/s3/server.js" "$d/data" "$(cat "$d/port")" >"$d/log" 2>&1 &
    echo $! >"$d/pid"
    wait_port "$(cat "$d/port")"
}

run_oci() { # dir
    local d=$1
    if [[ -f $d/token.port && ! -f $d/token.pid ]]; then
        node "$root/tests/oci/token-server.js" "$d/token.key" "$d/token.crt" \
            "$(cat "$d/token.port")" "$(cat "$d/credentials")" >"$d/token.log" 2>&1 &
        echo $! >"$d/token.pid"
        wait_port "$(cat "$d/token.port")"
    fi
    docker-registry serve "$d/config.yml" >"$d/log" 2>&1 &
    echo $! >"$d/pid"
    wait_port "$(cat "$d/port")"
}

start_oci() { # dir auth
    local d=$1 auth=${2:-none} port
    port=$(cat "$d/port")
    {
        echo "version: 0.1"
        echo "log: {level: warn, accesslog: {disabled: true}}"
        echo "storage:"
        echo "  filesystem: {rootdirectory: $d/data}"
        echo "  delete: {enabled: true}"
        echo "  maintenance: {uploadpurging: {enabled: false}}"
        echo "http: {addr: 127.0.0.1:$port, secret: modelgate-test-secret}"
    } >"$d/config.yml"
    case "$auth" in
    none) : >"$d/credentials" ;;
    basic)
        printf 'mg:test-password' >"$d/credentials"
        python3 -c 'import crypt,sys; print("mg:"+crypt.crypt("test-password", crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=16)))' \
            2>/dev/null >"$d/htpasswd"
        printf 'auth: {htpasswd: {realm: modelgate-test, path: %s/htpasswd}}\n' "$d" >>"$d/config.yml"
        ;;
    token)
        printf 'mg:test-password' >"$d/credentials"
        openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=modelgate-test-token \
            -keyout "$d/token.key" -out "$d/token.crt" 2>/dev/null
        free_port >"$d/token.port"
        printf 'auth: {token: {realm: "http://127.0.0.1:%s/token", service: modelgate-test-registry, issuer: modelgate-test, rootcertbundle: %s/token.crt}}\n' \
            "$(cat "$d/token.port")" "$d" >>"$d/config.yml"
        ;;
    *)
        echo "blob-test.sh: oci auth is none, basic or token" >&2
        return 2
        ;;
    esac
    chmod 600 "$d/credentials"
    run_oci "$d"
}

stop_pid() { # file
    if [[ -f $1 ]]; then
        kill "$(cat "$1")" 2>/dev/null || true
        for ((i = 0; i < 100; i++)); do kill -0 "$(cat "$1")" 2>/dev/null || break; sleep 0.05; done
        kill -9 "$(cat "$1")" 2>/dev/null || true
        rm -f "$1"
    fi
}

case "$cmd" in
start)
    kind=${2:?s3 or oci}
    d=${3:?a directory}
    mkdir -p "$d/data"
    d=$(cd "$d" && pwd)
    echo "$kind" >"$d/kind"
    free_port >"$d/port"
    case "$kind" in
    s3)
        printf 'S3RVER:S3RVER' >"$d/credentials"
        chmod 600 "$d/credentials"
        run_s3 "$d"
        ;;
    oci) start_oci "$d" "${4:-none}" ;;
    *)
        echo "blob-test.sh: unknown kind $kind" >&2
        exit 2
        ;;
    esac
    "$0" url "$d"
    ;;
url)
    d=${2:?a directory}
    prefix=${3:-modelgate}
    port=$(cat "$d/port")
    case "$(cat "$d/kind")" in
    s3) echo "s3://mgtest/$prefix?endpoint=http://127.0.0.1:$port&region=us-east-1&path_style=true" ;;
    oci) echo "oci://127.0.0.1:$port/mg/$prefix?insecure=true" ;;
    esac
    ;;
kill)
    d=${2:?a directory}
    kill -9 "$(cat "$d/pid")" 2>/dev/null || true
    rm -f "$d/pid"
    ;;
restart)
    d=${2:?a directory}
    stop_pid "$d/pid"
    stop_pid "$d/token.pid"
    if [[ $(cat "$d/kind") == s3 ]]; then run_s3 "$d"; else run_oci "$d"; fi
    ;;
gc)
    d=${2:?a directory}
    stop_pid "$d/pid"
    docker-registry garbage-collect "$d/config.yml" >"$d/gc.log" 2>&1
    run_oci "$d"
    ;;
stop)
    d=${2:?a directory}
    [[ -d $d ]] || exit 0
    stop_pid "$d/pid"
    stop_pid "$d/token.pid"
    rm -rf "$d"
    ;;
*)
    echo "blob-test.sh: unknown command $cmd" >&2
    exit 2
    ;;
esac
