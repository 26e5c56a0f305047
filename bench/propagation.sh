#!/usr/bin/env bash
# Alias change -> HAProxy weight propagation benchmark for modelgated. Not part of the test
# suite.
#
# Starts modelgated and a real HAProxy (runtime API on a loopback TCP port), registers an
# haproxy gateway, then makes N alias changes (PUT with alternating 30/70 and 70/30 routes)
# and measures, for each, the time from "the PUT returned" to "HAProxy's runtime API
# reports the new weights" (`get weight`, polled as fast as bash can, without forking).
# Prints p50 and p99 in ms; target p99 <= 50 ms (<= 20 ms with PostgreSQL replicas).
#
# With --database postgresql it runs --replicas modelgated processes on one private
# PostgreSQL (scripts/pg-test.sh) and one blob directory; with more than one, the PUTs go
# through the same HAProxy (roundrobin over the replicas), so the replica that takes a
# change is often not the one that delivers it.
#
# Usage: bench/propagation.sh [--changes N] [--database sqlite|postgresql] [--replicas N]
#                             [--tmp-dir DIR]
# See bench/README.md.
set -euo pipefail
export LC_ALL=C # EPOCHREALTIME with a '.', sort -n as expected

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"
bench_name=propagation

usage() {
    cat <<EOF
usage: $0 [--changes N] [--database sqlite|postgresql] [--replicas N] [--tmp-dir DIR]
  --changes N      alias changes to time (default 200)
  --database D     sqlite (default) or postgresql: a private PostgreSQL this script starts
  --replicas N     modelgated processes on that PostgreSQL (default 1), behind HAProxy
  --tmp-dir DIR    where the data dirs and HAProxy's config live (default $root/build/bench-tmp)
Environment: MODELGATED (default $root/build/modelgated), HAPROXY (default haproxy).
Exit status: 0 when every change was measured (a WARN is not a failure), 1 when something
failed or a change never showed up in HAProxy, 2 on bad usage.
EOF
}

changes=200
database=sqlite
replicas=1
tmp_parent="$root/build/bench-tmp"
while [[ $# -gt 0 ]]; do
    case "$1" in
    --changes)
        [[ $# -ge 2 && "$2" =~ ^[1-9][0-9]*$ ]] || { usage >&2; exit 2; }
        changes=$2
        shift 2
        ;;
    --database)
        [[ $# -ge 2 && ( "$2" == sqlite || "$2" == postgresql ) ]] || { usage >&2; exit 2; }
        database=$2
        shift 2
        ;;
    --replicas)
        [[ $# -ge 2 && "$2" =~ ^[1-9]$ ]] || { usage >&2; exit 2; }
        replicas=$2
        shift 2
        ;;
    --tmp-dir)
        [[ $# -ge 2 ]] || { usage >&2; exit 2; }
        tmp_parent=$2
        shift 2
        ;;
    -h | --help)
        usage
        exit 0
        ;;
    *)
        usage >&2
        exit 2
        ;;
    esac
done
[[ $database == postgresql || $replicas -eq 1 ]] ||
    { echo "propagation: several replicas need --database postgresql" >&2; exit 2; }

modelgated=${MODELGATED:-$root/build/modelgated}
haproxy_bin=${HAPROXY:-haproxy}
ready_timeout_s=30
apply_timeout_us=5000000 # a change not visible after 5 s counts as lost
target_p99_ms=50
[[ $database == sqlite ]] || target_p99_ms=20

[[ -n "${EPOCHREALTIME:-}" ]] || { echo "propagation: needs bash >= 5 (EPOCHREALTIME)" >&2; exit 1; }
bench_require curl awk sort "$haproxy_bin"
[[ -x "$modelgated" ]] || { echo "propagation: $modelgated is not built (run scripts/build.sh)" >&2; exit 1; }

# --- state and cleanup -------------------------------------------------------------------

server_pids=()
haproxy_pid=""
bench_stop_on_exit server_pids haproxy_pid
bench_init propagation "$tmp_parent"
pgdir=""
if [[ $database == postgresql ]]; then
    chmod 0755 "$work" # the PostgreSQL server runs as nobody when this runs as root
    pgdir="$work/pg"
    # Servers first (bench_cleanup), then their database.
    trap 'bench_cleanup_pg' EXIT
fi
bench_cleanup_pg() {
    local pid
    for pid in "${server_pids[@]}" $haproxy_pid; do
        kill -TERM "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    bash "$root/scripts/pg-test.sh" stop "$pgdir" >/dev/null 2>&1 || true
    bench_cleanup
}

# --- HAProxy -----------------------------------------------------------------------------

hap_port=""

# One runtime API command over TCP, without forking: the first line of the answer in
# REPLY_LINE. Returns non-zero when HAProxy cannot be reached.
hap() {
    local fd
    REPLY_LINE=""
    { exec {fd}<>"/dev/tcp/127.0.0.1/$hap_port"; } 2>/dev/null || return 1
    printf '%s\n' "$1" >&"$fd"
    IFS= read -r -t 2 REPLY_LINE <&"$fd" || true
    exec {fd}>&-
    return 0
}

# The weight of server $1 of the benchmark backend, in REPLY_LINE's first word.
weight() {
    hap "get weight be_bench_production/$1" || return 1
    REPLY_LINE=${REPLY_LINE%% *}
}

# A free loopback TCP port (nobody answers there now).
free_port() {
    local port
    while :; do
        port=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || { echo "$port"; return; }
    done
}

# HAProxy with the benchmark backend (runtime API on hap_port) and, with several replicas,
# the front the PUTs go through (front_port, roundrobin over server_ports).
front_port=""
start_haproxy() {
    local port deadline i
    for _ in 1 2 3 4 5; do
        port=$(free_port)
        {
            cat <<EOF
global
    stats socket ipv4@127.0.0.1:$port level admin
    nbthread 1
defaults
    mode http
    timeout connect 1s
    timeout client 5s
    timeout server 5s
frontend fe
    bind unix@$work/fe.sock
    default_backend be_bench_production
backend be_bench_production
    balance roundrobin
    server v1 unix@$work/v1.sock weight 1
    server v2 unix@$work/v2.sock weight 1
EOF
            if ((replicas > 1)); then
                front_port=$(free_port)
                printf 'frontend api\n    bind 127.0.0.1:%s\n    default_backend replicas\n' "$front_port"
                printf 'backend replicas\n    balance roundrobin\n'
                for ((i = 0; i < replicas; i++)); do
                    printf '    server r%d 127.0.0.1:%s\n' "$i" "${server_ports[$i]}"
                done
            fi
        } >"$work/haproxy.cfg"
        "$haproxy_bin" -db -f "$work/haproxy.cfg" >>"$work/haproxy.log" 2>&1 &
        haproxy_pid=$!
        hap_port=$port
        deadline=$((SECONDS + ready_timeout_s))
        while ((SECONDS < deadline)); do
            if ! kill -0 "$haproxy_pid" 2>/dev/null; then
                wait "$haproxy_pid" 2>/dev/null || true
                haproxy_pid=""
                break # port taken after all, or a config problem: try again
            fi
            if hap "show info" && [[ -n "$REPLY_LINE" ]]; then
                return 0
            fi
            sleep 0.02
        done
        [[ -z "$haproxy_pid" ]] || bench_die "HAProxy does not answer on 127.0.0.1:$port"
    done
    bench_die "could not start HAProxy (see $work/haproxy.log)"
}

# --- modelgated --------------------------------------------------------------------------

base=""
token=""
server_ports=()

# start_server I [ARGS...]: replica I (data dir data-I), its port into server_ports[I].
start_server() {
    local i=$1 dir="$work/data-$1" deadline=$((SECONDS + ready_timeout_s))
    shift
    mkdir -p -m 700 "$dir"
    "$modelgated" --listen 127.0.0.1:0 --data-dir "$dir" --port-file "$work/port-$i" "$@" \
        >>"$work/server-$i.log" 2>&1 &
    server_pids+=($!)
    until [[ -s "$work/port-$i" ]]; do
        kill -0 "${server_pids[$i]}" 2>/dev/null || bench_die "modelgated $i exited during start-up"
        ((SECONDS < deadline)) || bench_die "modelgated $i wrote no port file"
        sleep 0.05
    done
    server_ports[$i]=$(cat "$work/port-$i")
    until curl -fsS -o /dev/null "http://127.0.0.1:${server_ports[$i]}/healthz" 2>/dev/null; do
        ((SECONDS < deadline)) || bench_die "modelgated $i does not answer /healthz"
        sleep 0.05
    done
}

start_servers() {
    local args=() i url
    if [[ $database == postgresql ]]; then
        bash "$root/scripts/pg-test.sh" start "$pgdir" >/dev/null || bench_die "cannot start PostgreSQL"
        url=$(bash "$root/scripts/pg-test.sh" createdb "$pgdir" bench) || bench_die "cannot create the database"
        mkdir -p -m 700 "$work/blobs"
        args=(--database "$url" --blobs "file:$work/blobs")
    fi
    for ((i = 0; i < replicas; i++)); do
        start_server "$i" "${args[@]}"
        # The first one made the admin token; the others share the database's.
        [[ -s "$work/data-0/admin.token" ]] || bench_die "modelgated wrote no admin token"
    done
    token=$(cat "$work/data-0/admin.token")
    base="http://127.0.0.1:${server_ports[0]}"
}

# api METHOD PATH [JSON]: the body on stdout; fails unless 2xx.
api() {
    local args=(-sS --fail-with-body -X "$1" -H "Authorization: Bearer $token")
    if [[ $# -ge 3 ]]; then
        args+=(-H "Content-Type: application/json" --data-binary "$3")
    fi
    curl "${args[@]}" "$base$2"
}

# --- run ---------------------------------------------------------------------------------

load_at_start=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo "?")
cpus=$(nproc 2>/dev/null || echo "?")
hap_version=$("$haproxy_bin" -v 2>/dev/null | awk 'NR == 1 { print $3 }')

start_servers
start_haproxy
((replicas == 1)) || base="http://127.0.0.1:$front_port"

digest=$(printf 'propagation benchmark model' |
    curl -sS --fail-with-body -X POST -H "Authorization: Bearer $token" \
        -H "Content-Type: application/octet-stream" --data-binary @- "$base/api/v1/blobs" |
    sed -n 's/.*"digest":"\(sha256:[0-9a-f]*\)".*/\1/p')
[[ -n "$digest" ]] || bench_die "blob upload failed"
api POST /api/v1/models '{"name":"bench"}' >/dev/null || bench_die "cannot create the model"
for _ in 1 2; do
    api POST /api/v1/models/bench/versions "{\"artifact\":\"$digest\"}" >/dev/null ||
        bench_die "cannot create a version"
done
api PUT /api/v1/gateways/hap "{\"kind\":\"haproxy\",\"address\":\"127.0.0.1:$hap_port\",\"backend\":\"be_{model}_{alias}\",\"server\":\"v{version}\",\"models\":[\"bench\"]}" >/dev/null ||
    bench_die "cannot register the haproxy gateway"
api PUT "/api/v1/models/bench/aliases/production?wait=10" \
    '{"routes":[{"version":1,"weight":50},{"version":2,"weight":50}]}' >/dev/null ||
    bench_die "cannot set the alias"
if ! weight v1 || [[ "$REPLY_LINE" != 50 ]]; then
    bench_die "HAProxy does not show the first change (v1 weight '$REPLY_LINE')"
fi

samples="$work/samples"
: >"$samples"
lost=0
for ((i = 1; i <= changes; i++)); do
    if ((i % 2)); then w1=30 w2=70; else w1=70 w2=30; fi
    code=$(curl -sS -o /dev/null -w '%{http_code}' -X PUT -H "Authorization: Bearer $token" \
        -H "Content-Type: application/json" \
        --data-binary "{\"routes\":[{\"version\":1,\"weight\":$w1},{\"version\":2,\"weight\":$w2}]}" \
        "$base/api/v1/models/bench/aliases/production") || bench_die "PUT alias failed"
    t0=${EPOCHREALTIME/./}
    [[ "$code" == 200 ]] || bench_die "PUT alias answered $code"
    # Both servers show the new weights (v2 is set last).
    while :; do
        t1=${EPOCHREALTIME/./}
        if weight v2 && [[ "$REPLY_LINE" == "$w2" ]] && weight v1 && [[ "$REPLY_LINE" == "$w1" ]]; then
            t1=${EPOCHREALTIME/./}
            echo $((t1 - t0)) >>"$samples"
            break
        fi
        if ((t1 - t0 > apply_timeout_us)); then
            echo "propagation: change $i (v1=$w1 v2=$w2) not visible in HAProxy after 5 s" >&2
            lost=$((lost + 1))
            break
        fi
    done
done

read -r n p50 p99 max < <(sort -n "$samples" | awk '
    { v[NR] = $1 }
    END {
        if (NR == 0) { print 0, "-", "-", "-"; exit }
        i50 = int(NR * 0.50 + 0.999999); i99 = int(NR * 0.99 + 0.999999)
        printf "%d %.2f %.2f %.2f\n", NR, v[i50] / 1000, v[i99] / 1000, v[NR] / 1000
    }')
verdict=$(awk -v p="$p99" -v t="$target_p99_ms" -v lost="$lost" \
    'BEGIN { if (p == "-" || lost > 0) print "ERROR"; else print (p <= t) ? "PASS" : "WARN" }')

config=$database
((replicas == 1)) || config="$database, $replicas replicas behind HAProxy"
echo "modelgate propagation benchmark: $changes alias changes, $config, HAProxy $hap_version, $cpus CPUs, load average $load_at_start at start"
printf '%-40s %9s %7s  %s\n' metric ms target result
printf '%-40s %9s %7s  %s\n' "alias change -> HAProxy weight, p50" "$p50" "-" "-"
printf '%-40s %9s %7s  %s\n' "alias change -> HAProxy weight, p99" "$p99" "<=$target_p99_ms" "$verdict"
printf '%-40s %9s %7s  %s\n' "alias change -> HAProxy weight, max" "$max" "-" "-"
echo "measured $n of $changes changes; $lost never showed up"
[[ "$lost" -eq 0 && "$n" -eq "$changes" ]] || exit 1
