#!/usr/bin/env bash
# Read-path benchmark for modelgated: the two GETs CI pipelines and deployers hit most,
#   GET /api/v1/models/{model}/aliases/{alias}/last-known-good
#   GET /api/v1/models/{model}/versions/{n}
# each against nginx serving the very same response body as a static file, in the same run,
# with the same client (wrk), the same connections and the same CPU pinning:
#   req/s ratio = modelgated / nginx   target >= 0.5
#   p99 ratio   = modelgated / nginx   target <= 2
# then the same two reads with modelgated's response cache off (every read goes to the
# database), on SQLite and, in the same rounds, on a private PostgreSQL:
#   cache-off req/s = modelgated / nginx      target >= 0.5, p99 <= 2
#   PostgreSQL / SQLite (cache off)            target >= 0.8
#
# Usage: bench/read.sh [--duration S] [--connections N] [--rounds N] [--tmp-dir DIR]
#                      [--server-cpu N] [--client-cpu N] [--server-threads N]
#                      [--pg-cpu N] [--no-postgresql] [--history N]
# See bench/README.md.
set -euo pipefail
export LC_ALL=C

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"
bench_name=read

usage() {
    cat <<EOF
usage: $0 [--duration S] [--connections N] [--rounds N] [--tmp-dir DIR]
          [--server-cpu N] [--client-cpu N] [--server-threads N]
  --duration S     seconds per wrk run (default 10)
  --connections N  concurrent keep-alive connections (default 32)
  --rounds N       measured runs per server and endpoint, alternating; best kept (default 2)
  --tmp-dir DIR    where the data dir and nginx live (default $root/build/bench-tmp)
  --server-cpu N   CPU that modelgated and nginx are pinned to (default 0)
  --client-cpu N   CPU that wrk is pinned to (default 1); it may be --server-cpu, which
                   gives PostgreSQL a CPU of its own on 2 CPUs (see --pg-cpu)
  --server-threads N  modelgated --threads N (default: modelgated's own default); nginx
                   always runs one worker
  --pg-cpu N       CPU the private PostgreSQL is pinned to (default 2; with fewer than 3
                   CPUs wrk's CPU, or the other CPU when the servers share wrk's)
  --no-postgresql  skip the cache-off reads on PostgreSQL
  --history N      set the alias N more times (between a second version and the first,
                   ending on the first) before measuring: an alias with a long history,
                   which a cache-missing LKG read must not pay for (default 0)
  --archived N     create N more versions of the model and archive them before measuring:
                   what a retention policy leaves behind, which neither a cache-missing LKG
                   read nor an alias write must pay for (default 0)
Environment: MODELGATED (default $root/build/modelgated), NGINX (default nginx), WRK
(default wrk). Exit status: 0 when every step ran (a WARN is not a failure), 1 when a step
failed, 2 on bad usage.
EOF
}

duration=10
connections=32
rounds=2
tmp_parent="$root/build/bench-tmp"
server_cpu=0
client_cpu=1
server_threads=""
pg_cpu=""
with_pg=1
history=0
archived=0
while [[ $# -gt 0 ]]; do
    case "$1" in
    --duration | --connections | --rounds | --server-cpu | --client-cpu | --server-threads | --pg-cpu | --history | --archived)
        [[ $# -ge 2 && "$2" =~ ^[0-9]+$ ]] || { usage >&2; exit 2; }
        case "$1" in
        --duration) duration=$2 ;;
        --connections) connections=$2 ;;
        --rounds) rounds=$2 ;;
        --server-cpu) server_cpu=$2 ;;
        --client-cpu) client_cpu=$2 ;;
        --server-threads) server_threads=$2 ;;
        --pg-cpu) pg_cpu=$2 ;;
        --history) history=$2 ;;
        --archived) archived=$2 ;;
        esac
        shift 2
        ;;
    --no-postgresql)
        with_pg=""
        shift
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
[[ $duration -ge 1 && $connections -ge 1 && $rounds -ge 1 ]] || { usage >&2; exit 2; }

modelgated=${MODELGATED:-$root/build/modelgated}
nginx_bin=${NGINX:-nginx}
wrk_bin=${WRK:-wrk}
ready_timeout_s=30

if ! command -v "$wrk_bin" >/dev/null 2>&1; then
    "$root/scripts/install-deps.sh" --bench >&2 || true
fi
bench_require curl awk taskset "$wrk_bin" "$nginx_bin"
[[ -x "$modelgated" ]] || { echo "read: $modelgated is not built (run scripts/build.sh)" >&2; exit 1; }

# Pinning: the server side (modelgated, nginx) on one CPU, wrk on another, so the client
# never steals the server's cycles and both servers get exactly one CPU.
cpus=$(nproc)
pin_server=(taskset -c "$server_cpu")
pin_client=(taskset -c "$client_cpu")
pin_note="servers on CPU $server_cpu, wrk on CPU $client_cpu"
if [[ -z $pg_cpu ]]; then
    pg_cpu=$((cpus >= 3 ? 2 : client_cpu))
    [[ $cpus -lt 2 || $cpus -ge 3 || $server_cpu -ne $client_cpu ]] || pg_cpu=$((server_cpu == 0 ? 1 : 0))
fi
pin_pg_cpu=$pg_cpu
[[ $server_cpu -ne $client_cpu ]] || pin_note="servers and wrk on CPU $server_cpu"
if [[ $server_cpu -ge $cpus || $client_cpu -ge $cpus ]]; then
    echo "read: cannot pin to CPUs $server_cpu and $client_cpu with $cpus CPUs; running unpinned" >&2
    pin_server=()
    pin_client=()
    pin_note="unpinned"
    pin_pg_cpu=""
elif [[ $pg_cpu -ge $cpus ]]; then
    pin_pg_cpu=""
fi

# --- state and cleanup -------------------------------------------------------------------

server_pid=""
nginx_pid=""
pg_server_pid=""
bench_stop_on_exit server_pid nginx_pid pg_server_pid
bench_init read "$tmp_parent"
pgdir="$work/pg"

# --- modelgated with one model, one version, an alias --------------------------------------

data="$work/data"
mkdir -p -m 700 "$data" # the server refuses a data directory others can open
server_ready() {
    [[ -s "$work/port" && -s "$data/admin.token" ]] &&
        curl -fsS -o /dev/null --max-time 2 "http://127.0.0.1:$(tr -d '[:space:]' <"$work/port")/healthz" 2>/dev/null
}
# start_server [ARG...]: modelgated on $data with these extra arguments; sets base.
# The request log goes to a file, as it would to journald: writing it is part of the cost.
start_server() {
    local server_args=(--listen 127.0.0.1:0 --data-dir "$data" --port-file "$work/port" "$@")
    [[ -z "$server_threads" ]] || server_args+=(--threads "$server_threads")
    rm -f -- "$work/port"
    "${pin_server[@]}" "$modelgated" "${server_args[@]}" >>"$work/server.log" 2>&1 &
    server_pid=$!
    bench_wait_for modelgated "$server_pid" server_ready || bench_die "modelgated did not start"
    base="http://127.0.0.1:$(tr -d '[:space:]' <"$work/port")"
}
start_server
token=$(tr -d '[:space:]' <"$data/admin.token")

api() {
    local args=(-sS --fail-with-body -X "$1" -H "Authorization: Bearer $token")
    [[ $# -lt 3 ]] || args+=(-H "Content-Type: application/json" --data-binary "$3")
    curl "${args[@]}" "$base$2"
}

# populate: on the server at $base (as $token), a version as a training job registers it:
# artifact, pinned image, dataset, metrics, tags, resources; so the JSON has the size and
# shape of a real one.
populate() {
    local digest hex
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
}
populate
# team_token: on the server at $base, team "risk" owns model fraud; prints a reader token of
# that team. A team-scoped token is what a tenant's CI and services hold (docs/contract.md
# "Teams"): each read of a model then also reads the model's owners to authorise it.
team_token() {
    api POST /api/v1/teams '{"name":"risk"}' >/dev/null || bench_die "cannot create the team"
    api PUT /api/v1/models/fraud/owners '{"teams":["risk"]}' >/dev/null || bench_die "cannot set the owners"
    api POST /api/v1/tokens '{"name":"bench-team","roles":["reader"],"teams":["risk"]}' |
        sed -n 's/.*"token":"\([^"]*\)".*/\1/p'
}
# --history N: a second version, then the alias moved N times between the two, ending on the
# first (its LKG is then the newest entry of a long history).
add_history() {
    local artifact i
    [[ $history -gt 0 ]] || return 0
    artifact=$(api GET /api/v1/models/fraud/versions/1 | sed -n 's/.*"artifact":{"digest":"\(sha256:[0-9a-f]*\)".*/\1/p')
    api POST /api/v1/models/fraud/versions "{\"artifact\":\"$artifact\"}" >/dev/null || bench_die "cannot create version 2"
    local n=$((history < 100 ? history / 2 : 50)) t0 t1 t2=0 t3
    t0=$(date +%s%N)
    for ((i = history; i >= 1; i--)); do
        [[ $i -eq $((history - n)) ]] && t1=$(date +%s%N)
        [[ $i -eq $n ]] && t2=$(date +%s%N)
        api PUT /api/v1/models/fraud/aliases/production "{\"version\":$((1 + (i + 1) % 2))}" >/dev/null ||
            bench_die "cannot set the alias"
    done
    t3=$(date +%s%N)
    # An alias write decides on the alias's history (its LKG, the version a rollback goes to):
    # the same write, one curl each, on a young alias and after the long history.
    if [[ $n -gt 0 ]]; then
        put_ms_young=$(awk -v a="$t0" -v b="$t1" -v n="$n" 'BEGIN { printf "%.2f", (b - a) / n / 1e6 }')
        put_ms_old=$(awk -v a="$t2" -v b="$t3" -v n="$n" 'BEGIN { printf "%.2f", (b - a) / n / 1e6 }')
        put_note="alias PUT (curl, one at a time) on ${db_label:-SQLite}: first $n of the history ${put_ms_young} ms each, last $n ${put_ms_old} ms each"
        echo "read: $put_note"
        echo "$put_note" >>"$work/put_notes"
    fi
}
# --archived N: N more versions of the model, each archived (never the LKG, never routed).
add_archived() {
    local artifact i v t0 t1 n=50
    [[ $archived -gt 0 ]] || return 0
    artifact=$(api GET /api/v1/models/fraud/versions/1 | sed -n 's/.*"artifact":{"digest":"\(sha256:[0-9a-f]*\)".*/\1/p')
    for ((i = 0; i < archived; i++)); do
        v=$(api POST /api/v1/models/fraud/versions "{\"artifact\":\"$artifact\"}" | sed -n 's/.*"version":\([0-9]*\).*/\1/p') ||
            bench_die "cannot create a version to archive"
        api POST "/api/v1/models/fraud/versions/$v/archive" >/dev/null || bench_die "cannot archive version $v"
    done
    # With a history (so version 2 exists): the same alias writes as add_history times, now.
    [[ $history -gt 0 ]] || return 0
    t0=$(date +%s%N)
    for ((i = n; i >= 1; i--)); do
        api PUT /api/v1/models/fraud/aliases/production "{\"version\":$((1 + (i + 1) % 2))}" >/dev/null ||
            bench_die "cannot set the alias"
    done
    t1=$(date +%s%N)
    put_note="alias PUT (curl, one at a time) on ${db_label:-SQLite} after $archived versions were archived: $(awk -v a="$t0" -v b="$t1" -v n="$n" 'BEGIN { printf "%.2f", (b - a) / n / 1e6 }') ms each"
    echo "read: $put_note"
    echo "$put_note" >>"$work/put_notes"
}
add_history
add_archived
team=$(team_token)
[[ -n $team ]] || bench_die "cannot create the team's token"

lkg_path=/api/v1/models/fraud/aliases/production/last-known-good
version_path=/api/v1/models/fraud/versions/1

# --- nginx serving the same bodies ---------------------------------------------------------

ngx="$work/nginx"
mkdir -p "$ngx/html" "$ngx/tmp"
# The exact bytes modelgated answers, saved as the files nginx serves.
api GET "$lkg_path" >"$ngx/html/lkg.json" || bench_die "GET last-known-good failed"
api GET "$version_path" >"$ngx/html/version.json" || bench_die "GET version failed"
declare -A body_bytes=([lkg]=$(stat -c %s "$ngx/html/lkg.json") [version]=$(stat -c %s "$ngx/html/version.json"))

ngx_user=""
[[ $(id -u) -ne 0 ]] || ngx_user="user root;"
write_nginx_conf() {
    cat >"$ngx/nginx.conf" <<CONF
$ngx_user
worker_processes 1;
daemon off;
pid $ngx/nginx.pid;
error_log $ngx/error.log;
events { worker_connections 1024; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    default_type application/json;
    client_body_temp_path $ngx/tmp/body;
    proxy_temp_path $ngx/tmp/proxy;
    fastcgi_temp_path $ngx/tmp/fastcgi;
    uwsgi_temp_path $ngx/tmp/uwsgi;
    scgi_temp_path $ngx/tmp/scgi;
    server {
        listen 127.0.0.1:$1;
        root $ngx/html;
    }
}
CONF
}
nginx_ready() {
    curl -fsS -o /dev/null --max-time 2 "http://127.0.0.1:$ngx_port/lkg.json" 2>/dev/null
}
ngx_port=""
for attempt in 1 2 3 4 5 6 7 8 9 10; do
    try_port=$((20000 + RANDOM % 40000))
    write_nginx_conf "$try_port"
    "${pin_server[@]}" "$nginx_bin" -p "$ngx" -c "$ngx/nginx.conf" -e "$ngx/error.log" >>"$ngx/stdout.log" 2>&1 &
    nginx_pid=$!
    ngx_port=$try_port
    if bench_wait_for nginx "$nginx_pid" nginx_ready 2>/dev/null; then
        break
    fi
    kill -TERM "$nginx_pid" 2>/dev/null || true
    wait "$nginx_pid" 2>/dev/null || true
    nginx_pid=""
    ngx_port=""
    echo "read: nginx could not use port $try_port (attempt $attempt)" >&2
done
[[ -n "$ngx_port" ]] || bench_die "nginx did not start"
ngx_base="http://127.0.0.1:$ngx_port"

# --- measuring ---------------------------------------------------------------------------

declare -A rps=() p99=() # key: <endpoint>_<server>

# to_ms VALUE: wrk's "812.00us", "1.20ms" or "1.01s" in milliseconds.
to_ms() {
    awk -v v="$1" 'BEGIN {
        if (v ~ /us$/) { sub(/us$/, "", v); printf "%.3f", v / 1000 }
        else if (v ~ /ms$/) { sub(/ms$/, "", v); printf "%.3f", v }
        else if (v ~ /s$/) { sub(/s$/, "", v); printf "%.3f", v * 1000 }
        else print "-"
    }'
}

declare -A cpu_us=() pgcpu_us=() # key: the least CPU µs per request over the rounds
clk_tck=$(getconf CLK_TCK)
# us_per_req TICKS REQUESTS
us_per_req() { awk -v t="$1" -v n="$2" -v hz="$clk_tck" 'BEGIN { printf "%.1f", t / hz * 1e6 / n }'; }

# run_wrk KEY URL SECONDS [warm]: one wrk run; keeps the best req/s (and that run's p99) per
# KEY, unless it is a warm-up run; with cpu_of (PIDs: the server measured) the least CPU time
# per request over the runs (utime + stime over the run / requests), and with count_pg set
# PostgreSQL's (its postmaster and backends).
# Both servers get the same request, Authorization header included.
run_wrk() {
    local key=$1 url=$2 secs=$3 warm=${4:-} out r p non2xx n t0 t1 g0 g1 c
    # shellcheck disable=SC2086
    t0=$(bench_cpu_ticks ${cpu_of:-})
    # shellcheck disable=SC2046
    [[ -z ${count_pg:-} ]] || g0=$(bench_ticks_snapshot $(pg_pids))
    out=$("${pin_client[@]}" "$wrk_bin" -t1 -c"$connections" -d"${secs}s" --latency \
        -H "Authorization: Bearer ${wrk_token:-$token}" "$url" 2>&1) || bench_die "wrk failed on $url: $out"
    # shellcheck disable=SC2086
    t1=$(bench_cpu_ticks ${cpu_of:-})
    # shellcheck disable=SC2046
    [[ -z ${count_pg:-} ]] || g1=$(bench_ticks_snapshot $(pg_pids))
    n=$(awk '/ requests in / { print $1; exit }' <<<"$out")
    non2xx=$(awk '/Non-2xx or 3xx responses:/ { print $NF }' <<<"$out")
    [[ -z "$non2xx" ]] || bench_die "$url: $non2xx responses were not 2xx"
    r=$(awk '/^Requests\/sec:/ { printf "%.1f", $2 }' <<<"$out")
    p=$(to_ms "$(awk '$1 == "99%" { print $2 }' <<<"$out")")
    [[ -n "$r" && "$p" != - ]] || bench_die "cannot read wrk's output for $url: $out"
    [[ -z "$warm" ]] || return 0 # a warm-up run: not recorded
    echo "read: $key round: $r req/s, p99 $p ms"
    if [[ -n $t0 && -n $t1 && $n =~ ^[0-9]+$ && $n -gt 0 ]]; then
        c=$(us_per_req "$((t1 - t0))" "$n")
        if [[ -z ${cpu_us[$key]:-} ]] || awk -v a="$c" -v b="${cpu_us[$key]}" 'BEGIN { exit !(a < b) }'; then
            cpu_us[$key]=$c
        fi
        if [[ -n ${count_pg:-} ]]; then
            c=$(us_per_req "$(bench_ticks_delta "$g0" "$g1")" "$n")
            if [[ -z ${pgcpu_us[$key]:-} ]] || awk -v a="$c" -v b="${pgcpu_us[$key]}" 'BEGIN { exit !(a < b) }'; then
                pgcpu_us[$key]=$c
            fi
        fi
    fi
    if [[ -z "${rps[$key]:-}" ]] || awk -v a="$r" -v b="${rps[$key]}" 'BEGIN { exit !(a > b) }'; then
        rps[$key]=$r
        p99[$key]=$p
    fi
}

load_at_start=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo "?")
for ep in lkg version; do
    if [[ $ep == lkg ]]; then mg_url="$base$lkg_path"; else mg_url="$base$version_path"; fi
    ng_url="$ngx_base/$ep.json"
    run_wrk "${ep}_nginx" "$ng_url" 1 warm
    run_wrk "${ep}_mg" "$mg_url" 1 warm
    # Alternating spreads any drift of a shared machine over both sides.
    for ((round = 1; round <= rounds; round++)); do
        run_wrk "${ep}_nginx" "$ng_url" "$duration"
        cpu_of=$server_pid run_wrk "${ep}_mg" "$mg_url" "$duration"
        cpu_of=$server_pid wrk_token=$team run_wrk "${ep}_mgteamc" "$mg_url" "$duration"
    done
done
server_rss_kib=$(awk '/^VmHWM:/ { print $2 }' "/proc/$server_pid/status" 2>/dev/null || true)

# The same reads with the response cache off: what every read costs when writes keep
# emptying the cache (a busy registry), or on a replica that just started. Same data
# directory, restarted; and a second modelgated on a private PostgreSQL with the same data,
# measured in the same rounds, alternating with SQLite.
kill -TERM "$server_pid" 2>/dev/null || true
wait "$server_pid" 2>/dev/null || true
server_pid=""
start_server --response-cache off
sqlite_base=$base

pg_note=""
pg_pids() {
    local pm
    pm=$(head -n 1 "$pgdir/data/postmaster.pid" 2>/dev/null) || return 0
    echo "$pm"
    cat /proc/"$pm"/task/*/children 2>/dev/null || true
}
# The postmaster and the backends running now (modelgated's pool) onto --pg-cpu.
pin_pg() {
    local pid
    [[ -n $pin_pg_cpu ]] || return 0
    for pid in $(pg_pids); do taskset -a -c -p "$pin_pg_cpu" "$pid" >/dev/null 2>&1 || true; done
}
pg_base="" pg_token=""
if [[ -n $with_pg ]]; then
    trap 'bash "$root/scripts/pg-test.sh" stop "$pgdir" >/dev/null 2>&1 || true; bench_cleanup' EXIT
    chmod 0755 "$work" # PostgreSQL runs as nobody under root; the data dirs stay 0700
    if ! bash "$root/scripts/pg-test.sh" start "$pgdir" >"$work/pg-start.log" 2>&1 ||
        ! pg_url=$(bash "$root/scripts/pg-test.sh" createdb "$pgdir" readbench 2>>"$work/pg-start.log"); then
        pg_note="PostgreSQL: not measured ($(tail -n 1 "$work/pg-start.log"))"
    else
        pin_pg
        pgdata="$work/pgdata"
        mkdir -m 700 "$pgdata"
        pg_ready() {
            [[ -s "$work/pgport" && -s "$pgdata/admin.token" ]] &&
                curl -fsS -o /dev/null --max-time 2 "http://127.0.0.1:$(tr -d '[:space:]' <"$work/pgport")/healthz" 2>/dev/null
        }
        pg_args=(--listen 127.0.0.1:0 --data-dir "$pgdata" --port-file "$work/pgport" --database "$pg_url"
            --response-cache off)
        [[ -z "$server_threads" ]] || pg_args+=(--threads "$server_threads")
        "${pin_server[@]}" "$modelgated" "${pg_args[@]}" >>"$work/server-pg.log" 2>&1 &
        pg_server_pid=$!
        bench_wait_for "modelgated on PostgreSQL" "$pg_server_pid" pg_ready || bench_die "modelgated on PostgreSQL did not start"
        pg_base="http://127.0.0.1:$(tr -d '[:space:]' <"$work/pgport")"
        pg_token=$(tr -d '[:space:]' <"$pgdata/admin.token")
        (base=$pg_base token=$pg_token populate && base=$pg_base token=$pg_token db_label=PostgreSQL add_history && base=$pg_base token=$pg_token db_label=PostgreSQL add_archived) || bench_die "cannot create the data on PostgreSQL"
        pg_team=$(base=$pg_base token=$pg_token team_token)
        [[ -n $pg_team ]] || bench_die "cannot create the team's token on PostgreSQL"
        pg_note="PostgreSQL on CPU ${pin_pg_cpu:-any}"
        [[ $pin_pg_cpu != "$client_cpu" ]] || pg_note+=" (shared with wrk: only $cpus CPUs)"
    fi
fi
for ep in lkg version; do
    if [[ $ep == lkg ]]; then path=$lkg_path; else path=$version_path; fi
    run_wrk "${ep}_mgnc" "$sqlite_base$path" 1 warm
    [[ -z $pg_base ]] || { wrk_token=$pg_token run_wrk "${ep}_pgnc" "$pg_base$path" 1 warm; pin_pg; }
    for ((round = 1; round <= rounds; round++)); do
        # the reference, in the same rounds
        cpu_of=$(pgrep -P "$nginx_pid" | tr '\n' ' ') run_wrk "${ep}_nginxnc" "$ngx_base/$ep.json" "$duration"
        cpu_of=$server_pid run_wrk "${ep}_mgnc" "$sqlite_base$path" "$duration"
        [[ -z $pg_base ]] ||
            cpu_of=$pg_server_pid count_pg=1 wrk_token=$pg_token run_wrk "${ep}_pgnc" "$pg_base$path" "$duration"
        # the same reads with a team's token
        cpu_of=$server_pid wrk_token=$team run_wrk "${ep}_mgteam" "$sqlite_base$path" "$duration"
        [[ -z $pg_base ]] ||
            cpu_of=$pg_server_pid count_pg=1 wrk_token=$pg_team run_wrk "${ep}_pgteam" "$pg_base$path" "$duration"
    done
done

# --- table -------------------------------------------------------------------------------

print_row() { printf '%-36s %10s %7s %7s  %s\n' "$@"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0) ? a / b : 0 }'; }
verdict() { awk -v r="$1" -v op="$2" -v t="$3" 'BEGIN { ok = (op == ">=") ? r >= t : r <= t; print ok ? "PASS" : "WARN" }'; }

echo
echo "modelgate read benchmark: wrk $connections connections, ${duration}s x $rounds rounds (best kept), alias history $((history + 1)) entries, $archived archived versions, $pin_note, modelgated threads: ${server_threads:-default}, $cpus CPUs, load average $load_at_start at start"
print_row metric value ratio target result
for ep in lkg version; do
    if [[ $ep == lkg ]]; then label="LKG"; else label="version"; fi
    rr=$(ratio "${rps[${ep}_mg]}" "${rps[${ep}_nginx]}")
    pr=$(ratio "${p99[${ep}_mg]}" "${p99[${ep}_nginx]}")
    print_row "$label nginx static req/s (${body_bytes[$ep]} B)" "${rps[${ep}_nginx]}" - - -
    print_row "$label modelgated req/s" "${rps[${ep}_mg]}" "$rr" ">=0.5" "$(verdict "$rr" ">=" 0.5)"
    print_row "$label nginx static p99 ms" "${p99[${ep}_nginx]}" - - -
    print_row "$label modelgated p99 ms" "${p99[${ep}_mg]}" "$pr" "<=2" "$(verdict "$pr" "<=" 2)"
    rr=$(ratio "${rps[${ep}_mgteamc]}" "${rps[${ep}_nginx]}")
    print_row "$label modelgated, team token req/s" "${rps[${ep}_mgteamc]}" "$rr" ">=0.5" "$(verdict "$rr" ">=" 0.5)"
done
for ep in lkg version; do
    if [[ $ep == lkg ]]; then label="LKG"; else label="version"; fi
    rr=$(ratio "${rps[${ep}_mgnc]}" "${rps[${ep}_nginxnc]}")
    pr=$(ratio "${p99[${ep}_mgnc]}" "${p99[${ep}_nginxnc]}")
    print_row "$label nginx static req/s (again)" "${rps[${ep}_nginxnc]}" - - -
    print_row "$label nginx static p99 ms (again)" "${p99[${ep}_nginxnc]}" - - -
    print_row "$label cache off req/s" "${rps[${ep}_mgnc]}" "$rr" ">=0.5" "$(verdict "$rr" ">=" 0.5)"
    print_row "$label cache off p99 ms" "${p99[${ep}_mgnc]}" "$pr" "<=2" "$(verdict "$pr" "<=" 2)"
done
if [[ -n $pg_base ]]; then
    for ep in lkg version; do
        if [[ $ep == lkg ]]; then label="LKG"; else label="version"; fi
        rr=$(ratio "${rps[${ep}_pgnc]}" "${rps[${ep}_mgnc]}")
        print_row "$label cache off PostgreSQL req/s" "${rps[${ep}_pgnc]}" "$rr" ">=0.8" "$(verdict "$rr" ">=" 0.8)"
        print_row "$label cache off PostgreSQL p99 ms" "${p99[${ep}_pgnc]}" \
            "$(ratio "${p99[${ep}_pgnc]}" "${p99[${ep}_mgnc]}")" - -
    done
fi
# A team's token: the same goals, against the same references.
for ep in lkg version; do
    if [[ $ep == lkg ]]; then label="LKG"; else label="version"; fi
    rr=$(ratio "${rps[${ep}_mgteam]}" "${rps[${ep}_nginxnc]}")
    print_row "$label cache off, team token req/s" "${rps[${ep}_mgteam]}" "$rr" ">=0.5" "$(verdict "$rr" ">=" 0.5)"
    [[ -z $pg_base ]] && continue
    rr=$(ratio "${rps[${ep}_pgteam]}" "${rps[${ep}_mgteam]}")
    print_row "$label cache off, team, PostgreSQL" "${rps[${ep}_pgteam]}" "$rr" ">=0.8" "$(verdict "$rr" ">=" 0.8)"
done
[[ -z $pg_note ]] || echo "$pg_note; PostgreSQL ratios are to SQLite's cache-off figures"
# What each read costs the servers, apart from how this machine shares its CPUs among them.
for ep in lkg version; do
    echo "$ep cached, CPU µs per request (least of the rounds): modelgated ${cpu_us[${ep}_mg]:--}, with a team's token ${cpu_us[${ep}_mgteamc]:--}"
    line="$ep cache off, CPU µs per request (least of the rounds): nginx ${cpu_us[${ep}_nginxnc]:--}, modelgated on SQLite ${cpu_us[${ep}_mgnc]:--}"
    [[ -z $pg_base ]] || line+=", modelgated on PostgreSQL ${cpu_us[${ep}_pgnc]:--} + PostgreSQL ${pgcpu_us[${ep}_pgnc]:--}"
    echo "$line"
    line="$ep cache off with a team's token: modelgated on SQLite ${cpu_us[${ep}_mgteam]:--}"
    [[ -z $pg_base ]] || line+=", modelgated on PostgreSQL ${cpu_us[${ep}_pgteam]:--} + PostgreSQL ${pgcpu_us[${ep}_pgteam]:--}"
    echo "$line"
done
[[ ! -s $work/put_notes ]] || cat "$work/put_notes"
[[ -z "$server_rss_kib" ]] || echo "modelgated peak RSS: $((server_rss_kib / 1024)) MiB"
