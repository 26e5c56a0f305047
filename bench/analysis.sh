#!/usr/bin/env bash
# Live canary analysis benchmark (M19). Not part of the test suite.
#
# A real Prometheus (scrape interval 1 s), a real HAProxy routing to two model servers
# (tests/integration/analysis_model.py: requests by status and a latency histogram per
# version), steady load at --rate requests/s, and modelgated whose policy judges error rate
# and p95 latency each --interval seconds with failure_limit 2.
#
# 1. Time to rollback: a bad candidate (5 % errors, +200 ms) takes the first step (10 %).
#    Measured: from the step event to HAProxy's weight of the candidate back at 0, in
#    seconds and in analysis intervals; requests the candidate served meanwhile (its own
#    counter). Goal: <= failure_limit + 1 intervals, and fewer bad requests than Flagger's
#    defaults (a check each 1 min, rollback after 5 failed ones) let through at the same
#    traffic, i.e. 10 % x rate x 5 x 60 s.
# 2. False rollbacks: --good N canaries that behave like the baseline (1 % errors each),
#    steps 50/100: every one must succeed. Goal: 0 rolled back.
#
# Usage: bench/analysis.sh [--rate R] [--interval S] [--good N] [--tmp-dir DIR]
# See bench/README.md.
set -euo pipefail
export LC_ALL=C

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"
bench_name=analysis

usage() {
    cat <<EOF
usage: $0 [--rate R] [--interval S] [--good N] [--tmp-dir DIR]
  --rate R       requests per second of load (default 100)
  --interval S   analysis interval_seconds (default 2)
  --good N       good canaries for the false-rollback count (default 20)
  --tmp-dir DIR  where the data dirs live (default $root/build/bench-tmp)
Environment: MODELGATED (default $root/build/modelgated), HAPROXY, PROMETHEUS.
EOF
}

rate=100 interval=2 good=20 tmp_parent="$root/build/bench-tmp"
while [[ $# -gt 0 ]]; do
    case $1 in
    --rate) rate=$2; shift 2 ;;
    --interval) interval=$2; shift 2 ;;
    --good) good=$2; shift 2 ;;
    --tmp-dir) tmp_parent=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
    esac
done

modelgated=${MODELGATED:-$root/build/modelgated}
haproxy_bin=${HAPROXY:-haproxy}
prometheus_bin=${PROMETHEUS:-prometheus}
bench_require curl jq python3 "$haproxy_bin" "$prometheus_bin"
[[ -x "$modelgated" ]] || { echo "$bench_name: $modelgated not built (scripts/build.sh)" >&2; exit 1; }
bench_init analysis "$tmp_parent"

free_port() {
    local port
    while :; do
        port=$((20000 + (RANDOM * 32768 + RANDOM) % 40000))
        (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null || { echo "$port"; return; }
    done
}

stats_port=$(free_port) front_port=$(free_port) prom_port=$(free_port)
m1_port=$(free_port) m2_port=$(free_port)
bg_pids=()
bench_stop_on_exit bg_pids

hap() { # one runtime API command; its first line in REPLY_LINE
    local fd
    REPLY_LINE=""
    { exec {fd}<>"/dev/tcp/127.0.0.1/$stats_port"; } 2>/dev/null || return 1
    printf '%s\n' "$1" >&"$fd"
    IFS= read -r -t 2 REPLY_LINE <&"$fd" || true
    exec {fd}>&-
}

models=(bad)
for ((i = 0; i < good; i++)); do models+=("good$i"); done

{
    cat <<EOF
global
    stats socket ipv4@127.0.0.1:$stats_port level admin
    nbthread 2
defaults
    mode http
    timeout connect 2s
    timeout client 10s
    timeout server 10s
frontend fe
    bind 127.0.0.1:$front_port
    use_backend be_%[req.hdr(x-model)]_production
EOF
    for m in "${models[@]}"; do
        printf 'backend be_%s_production\n    balance roundrobin\n' "$m"
        printf '    server v1 127.0.0.1:%s weight 1\n    server v2 127.0.0.1:%s weight 1\n' \
            "$m1_port" "$m2_port"
    done
} >"$work/haproxy.cfg"
"$haproxy_bin" -db -f "$work/haproxy.cfg" >>"$work/haproxy.log" 2>&1 &
bg_pids+=($!)
bench_wait_for HAProxy "${bg_pids[-1]}" hap "show info"

cat >"$work/prometheus.yml" <<EOF
global: {scrape_interval: 1s, evaluation_interval: 1s}
scrape_configs:
  - job_name: models
    static_configs: [{targets: ['127.0.0.1:$m1_port', '127.0.0.1:$m2_port']}]
EOF
"$prometheus_bin" --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/prom" \
    --web.listen-address="127.0.0.1:$prom_port" --log.level=warn >>"$work/prometheus.log" 2>&1 &
bg_pids+=($!)
bench_wait_for Prometheus "${bg_pids[-1]}" curl -fs -o /dev/null "http://127.0.0.1:$prom_port/-/ready"

mkdir -p "$work/data"
chmod 700 "$work/data"
"$modelgated" --listen 127.0.0.1:0 --port-file "$work/port" --data-dir "$work/data" \
    --prometheus-url "http://127.0.0.1:$prom_port" --push-backoff-base-ms 50 >>"$work/modelgated.log" 2>&1 &
bg_pids+=($!)
bench_wait_for modelgated "${bg_pids[-1]}" test -s "$work/data/admin.token"
bench_wait_for modelgated "${bg_pids[-1]}" test -s "$work/port"
MG="http://127.0.0.1:$(cat "$work/port")"
auth="Authorization: Bearer $(cat "$work/data/admin.token")"
api() { # METHOD PATH [BODY]
    curl -fsS -X "$1" -H "$auth" -H 'Content-Type: application/json' "$MG$2" ${3:+-d "$3"}
}
art=$(printf 'bench model bytes' | curl -fsS -X POST -H "$auth" --data-binary @- "$MG/api/v1/blobs" | jq -r .digest)

# model servers: (re)start both with the model label and behaviour given
model_pids=()
bench_stop_on_exit model_pids
models_start() { # MODEL ERR1 DELAY1 ERR2 DELAY2
    local p
    for p in "${model_pids[@]}"; do
        if kill "$p" 2>/dev/null; then wait "$p" 2>/dev/null || true; fi
    done
    model_pids=()
    python3 "$root/tests/integration/analysis_model.py" "$m1_port" "$1" 1 "$2" "$3" >>"$work/model.log" 2>&1 &
    model_pids+=($!)
    python3 "$root/tests/integration/analysis_model.py" "$m2_port" "$1" 2 "$4" "$5" >>"$work/model.log" 2>&1 &
    model_pids+=($!)
    bench_wait_for model "${model_pids[0]}" curl -fs -o /dev/null "http://127.0.0.1:$m1_port/metrics"
    bench_wait_for model "${model_pids[1]}" curl -fs -o /dev/null "http://127.0.0.1:$m2_port/metrics"
    # both series scraped twice: increase() has something to say from the first interval
    local q="count(count_over_time(http_requests_total{model=\"$1\"}[5s]) >= 2)"
    bench_wait_for Prometheus "${bg_pids[1]}" bash -c \
        "curl -fsS --data-urlencode 'query=$q' http://127.0.0.1:$prom_port/api/v1/query | grep -q '\"4\"\\]'"
}

load_pid=""
bench_stop_on_exit load_pid
load_start() { # MODEL: steady load at $rate req/s through HAProxy
    python3 - "$front_port" "$1" "$rate" >>"$work/load.log" 2>&1 <<'EOF' &
import sys, threading, time, http.client
port, model, rate = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
threads = 8
def run():
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    gap, nxt = threads / rate, time.monotonic()
    while True:
        nxt += gap
        try:
            c.request("GET", "/", headers={"x-model": model}); c.getresponse().read()
        except Exception:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        time.sleep(max(0.0, nxt - time.monotonic()))
for _ in range(threads):
    threading.Thread(target=run, daemon=True).start()
time.sleep(3600)
EOF
    load_pid=$!
}
load_stop() { [[ -z "$load_pid" ]] || { kill "$load_pid" 2>/dev/null; wait "$load_pid" 2>/dev/null || true; load_pid=""; }; }

policy() { # MODEL STEPS
    api PUT "/api/v1/models/$1/policies/production" "{
      \"rollout\":{\"steps\":$2,\"bake_seconds\":$interval,\"auto_advance\":true},
      \"analysis\":{\"interval_seconds\":$interval,\"failure_limit\":2,\"inconclusive_limit\":30,
        \"metrics\":[
        {\"name\":\"error_rate\",\"kind\":\"ratio\",
         \"errors\":\"sum(increase(http_requests_total{model=\\\"{{model}}\\\",version=\\\"{{version}}\\\",code=~\\\"5..\\\"}[10s]))\",
         \"total\":\"sum(increase(http_requests_total{model=\\\"{{model}}\\\",version=\\\"{{version}}\\\"}[10s]))\",
         \"max\":0.03,\"max_increase\":0.02,\"min_total\":20,\"confidence\":0.95},
        {\"name\":\"p95_latency_ms\",\"kind\":\"value\",
         \"query\":\"1000 * histogram_quantile(0.95, sum by (le) (rate(http_request_duration_seconds_bucket{model=\\\"{{model}}\\\",version=\\\"{{version}}\\\"}[10s])))\",
         \"max\":150,\"max_regression_pct\":300}]}}" >/dev/null
}

setup_model() { # MODEL
    api POST /api/v1/models "{\"name\":\"$1\"}" >/dev/null
    api POST "/api/v1/models/$1/versions" "{\"artifact\":\"$art\"}" >/dev/null
    api POST "/api/v1/models/$1/versions" "{\"artifact\":\"$art\"}" >/dev/null
    api PUT "/api/v1/gateways/hap-$1" "{\"kind\":\"haproxy\",\"address\":\"127.0.0.1:$stats_port\",
      \"backend\":\"be_{model}_{alias}\",\"server\":\"v{version}\",\"models\":[\"$1\"]}" >/dev/null
    api PUT "/api/v1/models/$1/aliases/production?wait=10" '{"version":1}' >/dev/null
}

wait_final() { # ID -> the final promotion JSON on stdout
    local p deadline=$((SECONDS + 300))
    while ((SECONDS < deadline)); do
        p=$(api GET "/api/v1/promotions/$1")
        case $(jq -r .state <<<"$p") in
        succeeded | rolled_back | aborted | rejected) printf '%s' "$p"; return 0 ;;
        esac
        sleep 0.1
    done
    bench_die "promotion $1 did not finish"
}

now_s() { printf '%s' "$EPOCHREALTIME"; }

# ---- 1. time to rollback ------------------------------------------------------------------
models_start bad 0.01 0 0.05 200
setup_model bad
policy bad '[10,50,100]'
load_start bad
sleep 3 # steady state
id=$(api POST /api/v1/promotions '{"model":"bad","version":2,"alias":"production"}' | jq -r .id)
# the candidate is at 10 % once HAProxy says so; it is back at 0 when HAProxy says so
while hap "get weight be_bad_production/v2" && [[ ${REPLY_LINE%% *} != 10 ]]; do sleep 0.005; done
t_on=$(now_s)
c_on=$(curl -fsS "http://127.0.0.1:$m2_port/metrics" | awk '/^http_requests_total/ {n += $2} END {print n + 0}')
while hap "get weight be_bad_production/v2" && [[ ${REPLY_LINE%% *} != 0 ]]; do sleep 0.005; done
t_off=$(now_s)
c_off=$(curl -fsS "http://127.0.0.1:$m2_port/metrics" | awk '/^http_requests_total/ {n += $2} END {print n + 0}')
load_stop
p=$(wait_final "$id")
state=$(jq -r .state <<<"$p")
nint=$(jq '[.analysis.intervals[] | select(.phase == "steps")] | length' <<<"$p")
secs=$(awk -v a="$t_on" -v b="$t_off" 'BEGIN {printf "%.1f", b - a}')
served=$((c_off - c_on))
flagger=$(awk -v r="$rate" 'BEGIN {printf "%d", 0.10 * r * 5 * 60}')
why=$(jq -r '[.events[] | select(.type == "analysis.failed")][0].detail // "-"' <<<"$p")

# ---- 2. false rollbacks -------------------------------------------------------------------
false_rb=0
for ((i = 0; i < good; i++)); do
    m=good$i
    models_start "$m" 0.01 0 0.01 0
    setup_model "$m"
    policy "$m" '[50,100]'
    load_start "$m"
    sleep 2
    gid=$(api POST /api/v1/promotions "{\"model\":\"$m\",\"version\":2,\"alias\":\"production\"}" | jq -r .id)
    gp=$(wait_final "$gid")
    load_stop
    [[ $(jq -r .state <<<"$gp") == succeeded ]] || false_rb=$((false_rb + 1))
    printf '%s: good canary %d of %d: %s\n' "$bench_name" $((i + 1)) "$good" "$(jq -r .state <<<"$gp")" >&2
done

echo
echo "modelgate live canary analysis: $(nproc) CPUs, load ${rate} req/s, interval ${interval}s, failure_limit 2"
printf '%-44s %12s %10s %8s\n' metric value goal result
res() { if [[ $1 == 1 ]]; then echo PASS; else echo FAIL; fi; }
printf '%-44s %12s %10s %8s\n' "bad candidate outcome" "$state" rolled_back "$(res "$([[ $state == rolled_back ]] && echo 1)")"
printf '%-44s %12s %10s %8s\n' "first step -> weight 0 (intervals)" "$nint" "<= 3" "$(res "$((nint <= 3))")"
printf '%-44s %12s %10s %8s\n' "first step -> weight 0 (seconds)" "$secs" "-" "-"
printf '%-44s %12s %10s %8s\n' "requests the bad candidate served" "$served" "< $flagger" "$(res "$((served < flagger))")"
printf '%-44s %12s %10s %8s\n' "false rollbacks of $good good canaries" "$false_rb" 0 "$(res "$((false_rb == 0))")"
echo "why: $why"
