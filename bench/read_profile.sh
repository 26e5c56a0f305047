#!/usr/bin/env bash
# Read profile: CPU instructions per request of the reads bench/read.sh measures, with the
# response cache off (every read goes to the database), counted by valgrind's callgrind.
# Instruction counts do not depend on what else runs on the machine, so this is the figure
# to compare between builds on a busy machine; wall-clock ratios are bench/read.sh's.
#
# It starts modelgated under callgrind (one HTTP thread, --response-cache off) on the data
# read.sh creates, zeroes the counters, sends --requests keep-alive GETs of one endpoint from
# one connection, dumps the counters and prints total instructions / requests. The dump
# (callgrind.out.*) is kept in --out-dir for callgrind_annotate.
#
# Usage: bench/read_profile.sh [--requests N] [--database sqlite|postgresql] [--out-dir DIR]
#                              [--endpoint lkg|version|both] [--response-cache off|on]
# Environment: MODELGATED (default build/modelgated), VALGRIND (default valgrind).
set -euo pipefail
export LC_ALL=C

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"
bench_name=read_profile

requests=2000
database=sqlite
out_dir=""
endpoint=both
cache=off
tmp_parent="$root/build/bench-tmp"
while [[ $# -gt 0 ]]; do
    case "$1" in
    --requests) requests=$2; shift 2 ;;
    --database) database=$2; shift 2 ;;
    --out-dir) out_dir=$2; shift 2 ;;
    --endpoint) endpoint=$2; shift 2 ;;
    --response-cache) cache=$2; shift 2 ;;
    --tmp-dir) tmp_parent=$2; shift 2 ;;
    *) echo "usage: $0 [--requests N] [--database sqlite|postgresql] [--out-dir DIR] [--endpoint lkg|version|both]" >&2; exit 2 ;;
    esac
done
[[ $requests =~ ^[0-9]+$ && $requests -ge 1 ]] || { echo "$bench_name: --requests N" >&2; exit 2; }
[[ $database == sqlite || $database == postgresql ]] || { echo "$bench_name: --database sqlite|postgresql" >&2; exit 2; }

modelgated=${MODELGATED:-$root/build/modelgated}
valgrind_bin=${VALGRIND:-valgrind}
ready_timeout_s=120 # valgrind starts slowly
bench_require curl python3 "$valgrind_bin" callgrind_control
[[ -x $modelgated ]] || { echo "$bench_name: $modelgated is not built (run scripts/build.sh)" >&2; exit 1; }

server_pid=""
bench_stop_on_exit server_pid
bench_init read_profile "$tmp_parent"
[[ -n $out_dir ]] || out_dir=$work
mkdir -p "$out_dir"
out_dir=$(cd "$out_dir" && pwd)

db_args=()
if [[ $database == postgresql ]]; then
    chmod 0755 "$work"
    pgdir="$work/pg"
    trap 'bash "$root/scripts/pg-test.sh" stop "$pgdir" >/dev/null 2>&1 || true; bench_cleanup' EXIT
    bash "$root/scripts/pg-test.sh" start "$pgdir" >/dev/null
    bash "$root/scripts/pg-test.sh" createdb "$pgdir" prof >/dev/null
    db_args=(--database "$(bash "$root/scripts/pg-test.sh" url "$pgdir" prof)")
fi

data="$work/data"
mkdir -p -m 700 "$data"
server_ready() {
    [[ -s "$work/port" && -s "$data/admin.token" ]] &&
        curl -fsS -o /dev/null --max-time 5 "http://127.0.0.1:$(tr -d '[:space:]' <"$work/port")/healthz" 2>/dev/null
}
"$valgrind_bin" --tool=callgrind --callgrind-out-file="$out_dir/callgrind.out.%p" \
    "$modelgated" --listen 127.0.0.1:0 --data-dir "$data" --port-file "$work/port" \
    --threads 1 --response-cache "$cache" "${db_args[@]}" >>"$work/server.log" 2>&1 &
server_pid=$!
bench_wait_for modelgated "$server_pid" server_ready || bench_die "modelgated did not start"
port=$(tr -d '[:space:]' <"$work/port")
base="http://127.0.0.1:$port"
token=$(tr -d '[:space:]' <"$data/admin.token")

api() {
    local args=(-sS --fail-with-body -X "$1" -H "Authorization: Bearer $token")
    [[ $# -lt 3 ]] || args+=(-H "Content-Type: application/json" --data-binary "$3")
    curl "${args[@]}" "$base$2"
}
# The same data as bench/read.sh: a version with every field a training job sends.
digest=$(head -c 4096 /dev/urandom | curl -sS --fail-with-body -X POST -H "Authorization: Bearer $token" \
    -H "Content-Type: application/octet-stream" --data-binary @- "$base/api/v1/blobs" |
    sed -n 's/.*"digest":"\(sha256:[0-9a-f]*\)".*/\1/p')
[[ -n "$digest" ]] || bench_die "blob upload failed"
hex=${digest#sha256:}
api POST /api/v1/models '{"name":"fraud","description":"read benchmark"}' >/dev/null || bench_die "cannot create the model"
api POST /api/v1/datasets "{\"digest\":\"$digest\",\"name\":\"fraud-train\",\"uri\":\"s3://bucket/train/\"}" >/dev/null ||
    bench_die "cannot create the dataset"
api POST /api/v1/models/fraud/versions "{\"artifact\":\"$digest\",\"image\":\"registry.example/serve@sha256:$hex\",
  \"run_id\":\"train-1234\",\"source\":{\"repo\":\"https://git.example/ml/fraud\",\"commit\":\"9f2c1e0d\"},
  \"datasets\":[{\"digest\":\"$digest\",\"name\":\"fraud-train\",\"uri\":\"s3://bucket/train/\",\"role\":\"train\"}],
  \"metrics\":{\"auc\":0.942,\"p95_latency_ms\":41.5},\"params\":{\"lr\":0.001,\"epochs\":12},
  \"tags\":{\"team\":\"risk\"},\"resources\":{\"parameters\":7000000000,\"precision\":\"fp16\"}}" >/dev/null ||
    bench_die "cannot create the version"
api PUT /api/v1/models/fraud/aliases/production '{"version":1}' >/dev/null || bench_die "cannot set the alias"

# GETs on one keep-alive connection; every answer must be a 200.
load() {
    python3 - "$port" "$token" "$1" "$2" <<'PY'
import http.client, sys
port, token, path, n = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
for _ in range(n):
    c.request("GET", path, headers={"Authorization": "Bearer " + token})
    r = c.getresponse()
    r.read()
    if r.status != 200:
        sys.exit("GET %s: %d" % (path, r.status))
PY
}

declare -A paths=([lkg]=/api/v1/models/fraud/aliases/production/last-known-good
                  [version]=/api/v1/models/fraud/versions/1)
eps=(lkg version)
[[ $endpoint == both ]] || eps=("$endpoint")
printf '%s: %s, %d requests per endpoint, one connection, one HTTP thread, response cache %s\n' \
    "$bench_name" "$database" "$requests" "$cache"
for ep in "${eps[@]}"; do
    load "${paths[$ep]}" 50 || bench_die "warm-up of $ep failed" # statements prepared, caches warm
    callgrind_control -z "$server_pid" >/dev/null 2>&1
    load "${paths[$ep]}" "$requests" || bench_die "GET $ep failed"
    callgrind_control -d "$ep" "$server_pid" >/dev/null 2>&1
    # The dump just written: the newest file of this pid with the part's name.
    dump=$(ls -t "$out_dir"/callgrind.out."$server_pid".* 2>/dev/null | head -n 1)
    [[ -n $dump ]] || bench_die "no callgrind dump for $ep"
    mv "$dump" "$out_dir/callgrind.$database.$cache.$ep"
    total=$(awk '/^summary:/ { print $2 }' "$out_dir/callgrind.$database.$cache.$ep")
    printf '%-8s %12d instructions per request   (%s)\n' "$ep" "$((total / requests))" \
        "$out_dir/callgrind.$database.$cache.$ep"
done
