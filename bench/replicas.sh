#!/usr/bin/env bash
# Replicas benchmark: the same reads and writes against
#   sqlite      one modelgated on its embedded SQLite (the baseline)
#   pg-1        one modelgated on PostgreSQL
#   pg-3        three modelgated replicas on one PostgreSQL behind HAProxy (roundrobin)
# all in one run on this machine, with the same client (wrk, its own CPU) and the same data:
#   LKG read, version read          req/s and p99 (response cache on; on PostgreSQL each
#                                   replica answers from memory while it holds a cache lease)
#   version create, alias change    req/s and p99 (writes)
# then, per configuration, the response cache's hit ratio for reads of model B while model A
# takes about 10 writes a second (per-model invalidation: goal >= 0.95).
# Ratios printed against sqlite; goal: pg-1 reads >= 0.8x sqlite's.
#
# PostgreSQL is a private server this script starts (scripts/pg-test.sh: initdb + pg_ctl on a
# Unix socket in the work directory) and removes.
#
# --rounds N runs every configuration N times, in turn, and keeps each figure's best round
# (the cache hit ratio: its worst).
#
# Pinning: the servers (and HAProxy) on --server-cpu, wrk on --client-cpu, PostgreSQL (the
# postmaster and every backend) on --pg-cpu, so the load generator and the database never
# take the servers' CPU. Defaults: 0, 1 and 2 with three CPUs or more; with two, PostgreSQL
# shares wrk's CPU (said in the first line). Per configuration and run it also prints the
# CPU time per request (utime + stime from /proc/PID/stat, over the run, divided by the
# requests wrk counted) of the replicas together, of each replica, and of PostgreSQL: what
# the design costs apart from this machine's size.
#
# Usage: bench/replicas.sh [--duration S] [--rounds N] [--connections N] [--tmp-dir DIR]
#                          [--server-cpu N] [--client-cpu N] [--pg-cpu N]
# Environment: MODELGATED, HAPROXY, WRK; THREADS (--threads of every server, default 16).
set -euo pipefail
export LC_ALL=C

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"
bench_name=replicas

duration=5
rounds=1
round=1
connections=16
threads=${THREADS:-16}
tmp_parent="$root/build/bench-tmp"
cpus=$(nproc)
server_cpu=0
client_cpu=1
pg_cpu=$((cpus >= 3 ? 2 : 1))
while [[ $# -gt 0 ]]; do
    case "$1" in
    --duration) duration=$2; shift 2 ;;
    --connections) connections=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --tmp-dir) tmp_parent=$2; shift 2 ;;
    --server-cpu) server_cpu=$2; shift 2 ;;
    --client-cpu) client_cpu=$2; shift 2 ;;
    --pg-cpu) pg_cpu=$2; shift 2 ;;
    *) echo "usage: $0 [--duration S] [--rounds N] [--connections N] [--tmp-dir DIR] [--server-cpu N] [--client-cpu N] [--pg-cpu N]" >&2; exit 2 ;;
    esac
done
for c in "$server_cpu" "$client_cpu" "$pg_cpu"; do
    [[ $c =~ ^[0-9]+$ && $c -lt $cpus ]] || { echo "replicas: CPU $c does not exist ($cpus CPUs)" >&2; exit 2; }
done
clk_tck=$(getconf CLK_TCK)

modelgated=${MODELGATED:-$root/build/modelgated}
haproxy_bin=${HAPROXY:-haproxy}
wrk_bin=${WRK:-wrk}
bench_require curl jq awk "$wrk_bin" "$haproxy_bin" taskset
[[ -x $modelgated ]] || bench_die "no $modelgated: build first (scripts/build.sh)"
mkdir -p "$tmp_parent"
bench_init replicas "$tmp_parent"
chmod 0755 "$work" # the PostgreSQL server runs as nobody when this runs as root

mg_pids=()
mg_ports=()
hap_pid=""
bench_stop_on_exit mg_pids hap_pid
pgdir="$work/pg"
trap 'bash "$root/scripts/pg-test.sh" stop "$pgdir" >/dev/null 2>&1 || true; bench_cleanup' EXIT
bash "$root/scripts/pg-test.sh" start "$pgdir" >/dev/null

# PostgreSQL's processes now: the postmaster and its children (backends come and go with
# the replicas' connections).
pg_pids() {
    local pm
    pm=$(head -n 1 "$pgdir/data/postmaster.pid" 2>/dev/null) || return 0
    echo "$pm" $(cat /proc/"$pm"/task/*/children 2>/dev/null)
}
# Pin the postmaster; backends forked later inherit it, the ones running now are pinned too.
pin_pg() {
    local pid
    for pid in $(pg_pids); do taskset -a -c -p "$pg_cpu" "$pid" >/dev/null 2>&1 || true; done
}
pin_pg
# pg_ticks: PostgreSQL's processes, "pid:ticks ...", for bench_ticks_delta.
pg_ticks() {
    # shellcheck disable=SC2046
    bench_ticks_snapshot $(pg_pids)
}

image="registry.example/serve@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# start NAME N [--database URL]: N replicas, each its own data dir, one blob dir; sets
# base (the URL clients use) and token.
start() {
    local name=$1 n=$2 db=${3:-} i port ports=() blobs dir="$work/r$round-$1"
    blobs="$dir-blobs"
    mkdir -p -m 0700 "$blobs"
    for ((i = 1; i <= n; i++)); do
        port=$(free_port)
        ports+=("$port")
        mg_ports+=("$port")
        # Writes on PostgreSQL wait for round trips to the database (and, with replicas, for
        # the others' caches to apply them): they need threads to be concurrent in. Every
        # configuration gets the same number.
        local args=(--data-dir "$dir-$i" --listen "127.0.0.1:$port" --blobs "file:$blobs"
                    --log-format json --threads "$threads")
        [[ -n $db ]] && args+=(--database "$db")
        taskset -c "$server_cpu" "$modelgated" "${args[@]}" >>"$dir-$i.log" 2>&1 &
        mg_pids+=($!)
        bench_wait_for "modelgated $name-$i" $! curl -fs -o /dev/null "http://127.0.0.1:$port/healthz"
    done
    token=$(cat "$dir"-*/admin.token 2>/dev/null | head -n 1)
    base="http://127.0.0.1:${ports[0]}"
    if ((n > 1)); then
        local front
        front=$(free_port)
        {
            printf 'global\n    nbthread 1\ndefaults\n    mode http\n    timeout connect 2s\n'
            printf '    timeout client 30s\n    timeout server 30s\n'
            printf 'frontend fe\n    bind 127.0.0.1:%s\n    default_backend mg\n' "$front"
            printf 'backend mg\n    balance roundrobin\n    http-reuse always\n'
            for ((i = 0; i < n; i++)); do
                printf '    server r%d 127.0.0.1:%s\n' "$i" "${ports[$i]}"
            done
        } >"$dir-haproxy.cfg"
        taskset -c "$server_cpu" "$haproxy_bin" -db -f "$dir-haproxy.cfg" >>"$work/haproxy.log" 2>&1 &
        hap_pid=$!
        base="http://127.0.0.1:$front"
        bench_wait_for "HAProxy" "$hap_pid" curl -fs -o /dev/null "$base/healthz"
    fi
}

stop() {
    local pid
    for pid in "${mg_pids[@]}" $hap_pid; do
        kill -TERM "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    mg_pids=()
    mg_ports=()
    hap_pid=""
}

api() { curl -fsS -H "Authorization: Bearer $token" -H 'content-type: application/json' "$@"; }

populate() {
    local m digest
    for m in a b; do
        api -o /dev/null "$base/api/v1/models" -d "{\"name\":\"$m\"}"
        digest=$(printf 'bench model %s' "$m" | api --data-binary @- \
            -H 'content-type: application/octet-stream' "$base/api/v1/blobs" | jq -r .digest)
        api -o /dev/null "$base/api/v1/models/$m/versions" \
            -d "{\"artifact\":\"$digest\",\"image\":\"$image\"}"
        api -o /dev/null -X PUT "$base/api/v1/models/$m/aliases/prod" \
            -d '{"routes":[{"version":1,"weight":100}]}'
    done
    artifact=$digest
}

# wrk METHOD PATH [BODY] -> "req/s p99_ms"; also writes $work/cpu.out: the CPU time per
# request in microseconds over the run, of the replicas together, each replica (a/b/c) and
# PostgreSQL.
run_wrk() {
    local method=$1 path=$2 body=${3:-} out pid before=() after=() pg0 pg1 reqs i
    pin_pg # backends the replicas opened since
    cat >"$work/req.lua" <<EOF
wrk.method = "$method"
wrk.body = '$body'
wrk.headers["Authorization"] = "Bearer $token"
wrk.headers["Content-Type"] = "application/json"
done = function(summary, latency, requests)
  io.write(string.format("RESULT %.1f %.3f %d\n", summary.requests / (summary.duration / 1e6),
                         latency:percentile(99) / 1000, summary.requests))
end
EOF
    for pid in "${mg_pids[@]}"; do before+=("$(bench_cpu_ticks "$pid")"); done
    pg0=$(pg_ticks)
    out=$(taskset -c "$client_cpu" "$wrk_bin" -t1 -c"$connections" -d"${duration}s" -s "$work/req.lua" \
        "$base$path" 2>/dev/null | awk '/^RESULT/ { print $2, $3, $4 }')
    for pid in "${mg_pids[@]}"; do after+=("$(bench_cpu_ticks "$pid")"); done
    pg1=$(pg_ticks)
    reqs=${out##* }
    echo "- - -" >"$work/cpu.out"
    if [[ $reqs =~ ^[0-9]+$ && $reqs -gt 0 ]]; then
        local total=0 each=""
        for ((i = 0; i < ${#mg_pids[@]}; i++)); do
            total=$((total + after[i] - before[i]))
            each+="$(awk -v t="$((after[i] - before[i]))" -v n="$reqs" -v hz="$clk_tck" 'BEGIN { printf "%.0f", t / hz * 1e6 / n }')/"
        done
        awk -v t="$total" -v p="$(bench_ticks_delta "$pg0" "$pg1")" -v n="$reqs" -v hz="$clk_tck" -v e="${each%/}" \
            'BEGIN { printf "%.0f %s %.0f\n", t / hz * 1e6 / n, e, p / hz * 1e6 / n }' >"$work/cpu.out"
    fi
    echo "${out% *}"
}

# How many replicas hold a cache lease now (PostgreSQL: reads need no round trip), of all.
leases() {
    local n=0 port
    for port in "${mg_ports[@]}"; do
        curl -fsS -H "Authorization: Bearer $token" "http://127.0.0.1:$port/metrics" 2>/dev/null |
            grep -q '^modelgate_cache_lease 1' && n=$((n + 1))
    done
    echo "$n/${#mg_ports[@]}"
}

# Cache hits and misses so far (all replicas: summed through each one's /metrics).
cache_counts() {
    local h=0 m=0 port line
    for port in "${mg_ports[@]}"; do
        line=$(curl -fsS -H "Authorization: Bearer $token" "http://127.0.0.1:$port/metrics" 2>/dev/null |
            awk '/^modelgate_response_cache_lookups_total\{result="hit"\}/ { h = $2 }
                 /^modelgate_response_cache_lookups_total\{result="miss"\}/ { m = $2 }
                 END { print h + 0, m + 0 }') || continue
        h=$((h + ${line% *}))
        m=$((m + ${line#* }))
    done
    echo "$h $m"
}

declare -A result
# keep KEY "req/s p99": the round with the most req/s is kept (a busy machine only slows).
declare -A cpu
keep() {
    local old=${result[$1]:-}
    if [[ -z $old ]] || awk -v a="${2%% *}" -v b="${old%% *}" 'BEGIN { exit !(a > b) }'; then
        result[$1]=$2
        cpu[$1]=$(cat "$work/cpu.out" 2>/dev/null || echo "- - -") # that round's CPU
    fi
}
measure() {
    local name=$1 before after writer deadline=$((SECONDS + 15))
    populate
    # PostgreSQL: once every replica holds its cache lease (a second or two after start).
    while [[ $name != sqlite && $(leases) != "${#mg_ports[@]}/${#mg_ports[@]}" ]]; do
        ((SECONDS < deadline)) || { echo "$bench_name: $name: not every replica holds a cache lease" >&2; break; }
        sleep 0.1
    done
    keep "$name,lkg" "$(run_wrk GET /api/v1/models/b/aliases/prod/last-known-good)"
    keep "$name,version" "$(run_wrk GET /api/v1/models/b/versions/1)"
    result[$name,leases]=$(leases)
    keep "$name,create" "$(run_wrk POST /api/v1/models/a/versions \
        "{\"artifact\":\"$artifact\",\"image\":\"$image\"}")"
    keep "$name,alias" "$(run_wrk PUT /api/v1/models/a/aliases/prod \
        '{"routes":[{"version":1,"weight":100}]}')"
    # Model B's reads while model A takes ~10 writes a second.
    before=$(cache_counts)
    (
        end=$((SECONDS + duration))
        while ((SECONDS < end)); do
            api -o /dev/null -X PUT "$base/api/v1/models/a/aliases/staging" \
                -d '{"routes":[{"version":1,"weight":100}]}' || true
            sleep 0.1
        done
    ) &
    writer=$!
    run_wrk GET /api/v1/models/b/versions/1 >/dev/null
    wait "$writer" || true
    after=$(cache_counts)
    result[$name,hit]=$(awk -v b="$before" -v a="$after" -v o="${result[$name,hit]:-}" 'BEGIN {
        split(b, x, " "); split(a, y, " "); h = y[1] - x[1]; m = y[2] - x[2];
        r = (h + m) > 0 ? h / (h + m) : 0; if (o != "" && o + 0 < r) r = o;
        printf "%.3f", r }') # the worst round's
}

pg_note="PostgreSQL on CPU $pg_cpu"
[[ $pg_cpu != "$client_cpu" ]] || pg_note+=" (shared with wrk: only $cpus CPUs)"
[[ $pg_cpu != "$server_cpu" ]] || pg_note+=" (shared with the servers)"
echo "$bench_name: $cpus CPUs, wrk -c$connections ${duration}s per run, $rounds round(s); servers on CPU $server_cpu ($threads threads each), wrk on CPU $client_cpu, $pg_note; load average $(cut -d' ' -f1 /proc/loadavg) at start"
for ((round = 1; round <= rounds; round++)); do
    start sqlite 1
    measure sqlite
    stop
    bash "$root/scripts/pg-test.sh" createdb "$pgdir" "pg1r$round" >/dev/null
    start pg-1 1 "$(bash "$root/scripts/pg-test.sh" url "$pgdir" "pg1r$round")"
    measure pg-1
    stop
    bash "$root/scripts/pg-test.sh" createdb "$pgdir" "pg3r$round" >/dev/null
    start pg-3 3 "$(bash "$root/scripts/pg-test.sh" url "$pgdir" "pg3r$round")"
    measure pg-3
    stop
    ((rounds == 1)) || echo "$bench_name: round $round of $rounds done; load average $(cut -d' ' -f1 /proc/loadavg)"
done

printf '\n%-8s %-16s %10s %9s %12s  %s\n' config read/write req/s p99_ms "vs sqlite" \
    "CPU us/req: servers (each) postgres"
for name in sqlite pg-1 pg-3; do
    for what in lkg version create alias; do
        read -r rps p99 <<<"${result[$name,$what]:-0 0}"
        read -r base_rps _ <<<"${result[sqlite,$what]:-1 0}"
        read -r c_all c_each c_pg <<<"${cpu[$name,$what]:-- - -}"
        [[ $name != sqlite ]] || c_pg=-
        printf '%-8s %-16s %10s %9s %11.2fx  %s (%s) %s\n' "$name" "$what" "$rps" "$p99" \
            "$(awk -v a="$rps" -v b="$base_rps" 'BEGIN { print (b > 0 ? a / b : 0) }')" \
            "$c_all" "$c_each" "$c_pg"
    done
    printf '%-8s %-16s %10s\n' "$name" "cache hit ratio" "${result[$name,hit]}"
    [[ $name == sqlite ]] || printf '%-8s %-16s %10s\n' "$name" "cache leases" "${result[$name,leases]}"
done
pg1_lkg=$(awk -v a="${result[pg-1,lkg]%% *}" -v b="${result[sqlite,lkg]%% *}" 'BEGIN { print a / b }')
awk -v r="$pg1_lkg" 'BEGIN { exit !(r >= 0.8) }' && echo "$bench_name: pg-1 LKG reads ${pg1_lkg}x sqlite (goal >= 0.8): met" ||
    echo "$bench_name: WARN pg-1 LKG reads ${pg1_lkg}x sqlite (goal >= 0.8)"
