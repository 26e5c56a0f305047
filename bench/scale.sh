#!/usr/bin/env bash
# Scale benchmark for modelgated: do reads slow down as the registry grows?
#
# Generates a big store (--models x --versions, default 10,000 x 100 = 1 M versions) and a
# small one (one model with --versions versions) through the store API with
# bench/scale_gen.c, starts modelgated on each, and measures the latency (p50, p99) of
#   GET /api/v1/models/{model}/versions/{n}
#   GET /api/v1/models/{model}/versions?limit=50
#   GET /api/v1/models/{model}/aliases/production/last-known-good
#   GET /api/v1/datasets/{digest}/versions   (lineage: the raw dataset a model's training
#                                            dataset derives from; 100 versions answer)
# Every model has the same shape, so each query returns the same bytes from both stores;
# only the size of the tables around it differs. Ratio = big / small; target <= 2.
#
# --database postgresql puts both stores on a private PostgreSQL this script starts (kept in
# --cache-dir when given, so a generated store is reused); --database postgresql://URL on
# that database, each store in a schema of its own (mg_scale_<models>x<versions>).
#
# Usage: bench/scale.sh [--models N] [--versions N] [--duration S] [--rounds N]
#                       [--database sqlite|postgresql|postgresql://URL]
#                       [--tmp-dir DIR] [--cache-dir DIR] [--server-cpu N] [--client-cpu N]
# See bench/README.md.
set -euo pipefail
export LC_ALL=C

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"
bench_name=scale

usage() {
    cat <<EOF
usage: $0 [--models N] [--versions N] [--duration S] [--rounds N] [--tmp-dir DIR]
          [--database sqlite|postgresql|postgresql://URL] [--cache-dir DIR]
          [--server-cpu N] [--client-cpu N]
  --models N      models in the big store (default 10000)
  --versions N    versions per model, in both stores (default 100)
  --duration S    seconds per wrk run (default 5)
  --rounds N      measured runs per store and query, alternating; best kept (default 2)
  --database D    sqlite (default); postgresql: a private server this script starts (in
                  --cache-dir when given); postgresql://URL: that database, one schema
                  per store (psql creates them)
  --tmp-dir DIR   where the stores live (default $root/build/bench-tmp); generating 1 M
                  versions needs about 3 GB there
  --cache-dir DIR keep the generated stores in DIR and reuse them next time (generating
                  1 M versions takes a while); without it they are removed at exit
  --server-cpu N  CPU modelgated is pinned to (default 0)
  --client-cpu N  CPU wrk is pinned to (default 1)
Environment: MODELGATED (default $root/build/modelgated; the libraries next to it are what
scale_gen links), CC (default gcc), WRK (default wrk).
Exit status: 0 when every step ran (a WARN is not a failure), 1 when a step failed, 2 on
bad usage.
EOF
}

models=10000
versions=100
duration=5
rounds=2
tmp_parent="$root/build/bench-tmp"
cache_dir=""
database=sqlite
server_cpu=0
client_cpu=1
while [[ $# -gt 0 ]]; do
    case "$1" in
    --models | --versions | --duration | --rounds | --server-cpu | --client-cpu)
        [[ $# -ge 2 && "$2" =~ ^[0-9]+$ ]] || { usage >&2; exit 2; }
        case "$1" in
        --models) models=$2 ;;
        --versions) versions=$2 ;;
        --duration) duration=$2 ;;
        --rounds) rounds=$2 ;;
        --server-cpu) server_cpu=$2 ;;
        --client-cpu) client_cpu=$2 ;;
        esac
        shift 2
        ;;
    --tmp-dir | --cache-dir)
        [[ $# -ge 2 ]] || { usage >&2; exit 2; }
        if [[ $1 == --tmp-dir ]]; then tmp_parent=$2; else cache_dir=$2; fi
        shift 2
        ;;
    --database)
        [[ $# -ge 2 && ( $2 == sqlite || $2 == postgresql || $2 == postgresql://* ) ]] ||
            { usage >&2; exit 2; }
        database=$2
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
if [[ -n "$cache_dir" ]]; then
    mkdir -p -- "$cache_dir"
    cache_dir=$(cd "$cache_dir" && pwd) # PostgreSQL wants absolute paths
fi
[[ $models -ge 1 && $models -le 99999 && $versions -ge 2 && $duration -ge 1 && $rounds -ge 1 ]] ||
    { usage >&2; exit 2; }

modelgated=${MODELGATED:-$root/build/modelgated}
build_dir=$(cd "$(dirname "$modelgated")" && pwd)
cc=${CC:-gcc}
wrk_bin=${WRK:-wrk}
ready_timeout_s=60

if ! command -v "$wrk_bin" >/dev/null 2>&1; then
    "$root/scripts/install-deps.sh" --bench >&2 || true
fi
bench_require curl awk taskset sha256sum pkg-config "$cc" "$wrk_bin"
[[ $database == sqlite ]] || bench_require psql
[[ -x "$modelgated" ]] || { echo "scale: $modelgated is not built (run scripts/build.sh)" >&2; exit 1; }
for lib in libmg_store.a libmg_artifact.a libmg_model.a libmg_os.a libmg_base.a; do
    [[ -f "$build_dir/$lib" ]] || { echo "scale: $build_dir/$lib missing (run scripts/build.sh)" >&2; exit 1; }
done

cpus=$(nproc)
pin_server=(taskset -c "$server_cpu")
pin_client=(taskset -c "$client_cpu")
pin_note="modelgated on CPU $server_cpu, wrk on CPU $client_cpu"
if [[ $server_cpu -ge $cpus || $client_cpu -ge $cpus || $server_cpu -eq $client_cpu ]]; then
    echo "scale: cannot pin to CPUs $server_cpu and $client_cpu with $cpus CPUs; running unpinned" >&2
    pin_server=()
    pin_client=()
    pin_note="unpinned"
fi

# --- state and cleanup -------------------------------------------------------------------

declare -A server_pid=()
bench_stop_on_exit server_pid
bench_init scale "$tmp_parent"

# PostgreSQL: the server's URL (pg_url), and the URL of each store's schema (db_url NAME).
pg_url=""
pgdir=""
if [[ $database == postgresql ]]; then
    pgdir="${cache_dir:-$work}/scale-pg"
    [[ -z "$cache_dir" ]] || mkdir -p "$cache_dir"
    chmod 0755 "$work" "${cache_dir:-$work}" # the server runs as nobody when this runs as root
    pg_url=$(bash "$root/scripts/pg-test.sh" start "$pgdir") || bench_die "cannot start PostgreSQL in $pgdir"
    # Servers first, then the database they use; kept in --cache-dir, else removed.
    stop_pg() {
        local pid
        for pid in "${server_pid[@]}"; do
            kill -TERM "$pid" 2>/dev/null || true
            wait "$pid" 2>/dev/null || true
        done
        if [[ -n "$cache_dir" ]]; then
            bash "$root/scripts/pg-test.sh" halt "$pgdir" >/dev/null 2>&1 || true
        else
            bash "$root/scripts/pg-test.sh" stop "$pgdir" >/dev/null 2>&1 || true
        fi
        bench_cleanup
    }
    trap stop_pg EXIT
elif [[ $database != sqlite ]]; then
    pg_url=$database
fi
schema_of() { echo "mg_scale_${1}x${versions}"; }
db_url() {
    local sep='?'
    [[ $pg_url != *\?* ]] || sep='&'
    # Options for the store: its schema; and, for the generator, no waiting for the WAL.
    echo "${pg_url}${sep}options=-csearch_path%3D$(schema_of "$1")${2:+%20-csynchronous_commit%3Doff}"
}

# --- the generator -----------------------------------------------------------------------

gen="$work/scale_gen"
# shellcheck disable=SC2046 # pkg-config output is a list of flags
"$cc" -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -I "$root" "$root/bench/scale_gen.c" \
    -o "$gen" "$build_dir/libmg_store.a" "$build_dir/libmg_artifact.a" "$build_dir/libmg_model.a" \
    "$build_dir/libmg_os.a" "$build_dir/libmg_base.a" \
    $(pkg-config --libs sqlite3 jansson libarchive libcrypto libpq libprotobuf-c libcurl) -lpthread -lm ||
    bench_die "cannot compile bench/scale_gen.c"

declare -A gen_secs=() gen_rate=() db_mib=() model_count=()

# clone_store DIR MODELS (PostgreSQL): m00000 and the middle model through the store API
# (scale_gen), every other one a copy of m00000 (bench/scale_clone.sql), in model order so
# the measured middle model sits in the middle of every index; prints scale_gen's summary
# line for the whole.
clone_store() {
    local dir=$1 m=$2 mid=$(($2 / 2)) t0=$SECONDS a b secs
    clone_range() {
        for ((a = $1; a <= $2; a += 500)); do
            b=$((a + 499 < $2 ? a + 499 : $2))
            psql -X -q -d "$(db_url "$m" gen)" -v template=m00000 -v first="$a" -v last="$b" \
                -f "$root/bench/scale_clone.sql" >/dev/null || return 1
            echo "scale: copied m00000 to models $a..$b" >&2
        done
    }
    "$gen" --data-dir "$dir" --database "$(db_url "$m" gen)" --models 1 --from 0 \
        --versions "$versions" --quiet >/dev/null || return 1
    ((mid <= 1)) || clone_range 1 $((mid - 1)) || return 1
    "$gen" --data-dir "$dir" --database "$(db_url "$m" gen)" --models 1 --from "$mid" \
        --versions "$versions" --quiet >/dev/null || return 1
    ((mid >= m - 1)) || clone_range $((mid + 1)) $((m - 1)) || return 1
    secs=$((SECONDS - t0))
    printf '{"models":%d,"versions_per_model":%d,"versions":%d,"seconds":%d.0,"versions_per_s":%d,"copied":true}\n' \
        "$m" "$versions" $((m * versions)) "$secs" $((m * versions / (secs > 0 ? secs : 1)))
}

# make_store NAME MODELS: a data dir with MODELS x $versions versions in $dir_of[NAME].
declare -A dir_of=()
make_store() {
    local name=$1 m=$2 dir summary gen_args=()
    if [[ -n "$cache_dir" ]]; then
        mkdir -p "$cache_dir"
        dir="$cache_dir/scale-${m}x${versions}"
        [[ $database == sqlite ]] || dir="$cache_dir/scale-pg-${m}x${versions}"
    else
        dir="$work/$name"
    fi
    model_count[$name]=$m
    dir_of[$name]=$dir
    if [[ -s "$dir/scale_gen.json" ]]; then
        summary=$(cat "$dir/scale_gen.json")
        echo "scale: reusing $dir ($summary)"
    else
        rm -rf -- "$dir"
        echo "scale: generating $m x $versions versions in $dir${pg_url:+ and schema $(schema_of "$m")}"
        if [[ -n "$pg_url" ]]; then
            psql -X -q -v ON_ERROR_STOP=1 -d "$pg_url" -c "SET client_min_messages = warning" \
                -c "DROP SCHEMA IF EXISTS $(schema_of "$m") CASCADE" -c "CREATE SCHEMA $(schema_of "$m")" \
                >/dev/null || bench_die "cannot make schema $(schema_of "$m")"
            gen_args=(--database "$(db_url "$m" gen)")
        fi
        if [[ -n "$pg_url" && $m -ge 3 && -z "${SCALE_API_ONLY:-}" ]]; then
            summary=$(clone_store "$dir" "$m") || bench_die "cannot make the $name store"
        else
            summary=$("$gen" --data-dir "$dir" "${gen_args[@]}" --models "$m" --versions "$versions") ||
                bench_die "scale_gen failed for $name"
        fi
        [[ -z "$pg_url" ]] || psql -X -q -d "$(db_url "$m")" -c ANALYZE >/dev/null ||
            bench_die "cannot analyze schema $(schema_of "$m")"
        # Written last: a store interrupted half-way is never reused.
        echo "$summary" >"$dir/scale_gen.json"
    fi
    gen_secs[$name]=$(sed -n 's/.*"seconds":\([0-9.]*\).*/\1/p' <<<"$summary")
    gen_rate[$name]=$(sed -n 's/.*"versions_per_s":\([0-9.]*\).*/\1/p' <<<"$summary")
    if [[ -n "$pg_url" ]]; then
        db_mib[$name]=$(psql -X -q -t -A -d "$pg_url" -c "SELECT (coalesce(sum(pg_total_relation_size(c.oid)), 0) / 1048576)::bigint
            FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = '$(schema_of "$m")' AND c.relkind IN ('r', 'm')")
    else
        db_mib[$name]=$(du -sm "$dir" | awk '{ print $1 }')
    fi
}

load_at_start=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo "?")
make_store small 1
make_store big "$models"

# --- servers -----------------------------------------------------------------------------

declare -A base=() token=()
start_server() {
    local name=$1 dir=${dir_of[$1]} port_file="$work/$1.port" deadline db_args=()
    rm -f -- "$port_file"
    [[ -z "$pg_url" ]] || db_args=(--database "$(db_url "${model_count[$name]}")")
    # --response-cache off: the same URL asked again and again would otherwise be answered
    # from memory, which measures the cache, not how the store's queries scale.
    "${pin_server[@]}" "$modelgated" --listen 127.0.0.1:0 --data-dir "$dir" --port-file "$port_file" \
        --smoke-interval 0 --response-cache off "${db_args[@]}" >"$work/$name.log" 2>&1 &
    server_pid[$name]=$!
    deadline=$((SECONDS + ready_timeout_s))
    until [[ -s "$port_file" && -s "$dir/admin.token" ]] &&
        curl -fsS -o /dev/null --max-time 2 "http://127.0.0.1:$(tr -d '[:space:]' <"$port_file")/healthz" 2>/dev/null; do
        kill -0 "${server_pid[$name]}" 2>/dev/null || bench_die "modelgated ($name) exited during start-up"
        [[ $SECONDS -lt $deadline ]] || bench_die "modelgated ($name) not ready after ${ready_timeout_s}s"
        sleep 0.05
    done
    base[$name]="http://127.0.0.1:$(tr -d '[:space:]' <"$port_file")"
    token[$name]=$(tr -d '[:space:]' <"$dir/admin.token")
}
start_server small
start_server big

# The queried model: the middle one of the big store (neither end of any index), and the
# only one of the small store. Version: the middle one.
declare -A model=([small]=m00000 [big]=$(printf 'm%05u' $((models / 2))))
declare -A raw=([small]=$(printf 'raw-%05u' 0 | sha256sum | awk '{ print $1 }')
    [big]=$(printf 'raw-%05u' $((models / 2)) | sha256sum | awk '{ print $1 }'))
n=$((versions / 2))
queries=(version list lkg dataset)
declare -A qlabel=([version]="GET version" [list]="GET versions?limit=50" [lkg]="GET last-known-good"
    [dataset]="GET dataset->versions")
url() {
    local q=$1 s=$2
    case "$q" in
    version) echo "${base[$s]}/api/v1/models/${model[$s]}/versions/$n" ;;
    list) echo "${base[$s]}/api/v1/models/${model[$s]}/versions?limit=50" ;;
    lkg) echo "${base[$s]}/api/v1/models/${model[$s]}/aliases/production/last-known-good" ;;
    dataset) echo "${base[$s]}/api/v1/datasets/sha256:${raw[$s]}/versions" ;;
    esac
}

# Same answer from both stores (apart from times and the model's name), or the
# comparison would be meaningless.
declare -A resp_bytes=()
for q in "${queries[@]}"; do
    for s in small big; do
        bytes=$(curl -sS --fail-with-body -o "$work/$q.$s.json" -w '%{size_download}' \
            -H "Authorization: Bearer ${token[$s]}" "$(url "$q" "$s")") ||
            bench_die "$(url "$q" "$s") failed: $(head -c 300 "$work/$q.$s.json")"
        resp_bytes[$q.$s]=$bytes
    done
done
grep -q '"via"' "$work/dataset.big.json" || bench_die "the dataset query found no versions"

# --- measuring ---------------------------------------------------------------------------

declare -A p50=() p99=()
to_ms() {
    awk -v v="$1" 'BEGIN {
        if (v ~ /us$/) { sub(/us$/, "", v); printf "%.3f", v / 1000 }
        else if (v ~ /ms$/) { sub(/ms$/, "", v); printf "%.3f", v }
        else if (v ~ /s$/) { sub(/s$/, "", v); printf "%.3f", v * 1000 }
        else print "-"
    }'
}
min() { awk -v a="$1" -v b="$2" 'BEGIN { print (b == "" || a + 0 < b + 0) ? a : b }'; }

# run_wrk KEY URL TOKEN SECONDS [warm]: one connection, one request at a time, so wrk
# measures latency, not throughput; keeps the lowest p50 and p99 per KEY (not for warm-ups).
run_wrk() {
    local key=$1 url=$2 tok=$3 secs=$4 warm=${5:-} out a b
    out=$("${pin_client[@]}" "$wrk_bin" -t1 -c1 -d"${secs}s" --latency \
        -H "Authorization: Bearer $tok" "$url" 2>&1) || bench_die "wrk failed on $url: $out"
    ! grep -q 'Non-2xx or 3xx' <<<"$out" || bench_die "$url: some responses were not 2xx"
    a=$(to_ms "$(awk '$1 == "50%" { print $2 }' <<<"$out")")
    b=$(to_ms "$(awk '$1 == "99%" { print $2 }' <<<"$out")")
    [[ "$a" != - && "$b" != - ]] || bench_die "cannot read wrk's output for $url: $out"
    [[ -z "$warm" ]] || return 0 # a warm-up run: not recorded
    echo "scale: $key: p50 $a ms, p99 $b ms, $(awk '/^Requests\/sec:/ { print $2 }' <<<"$out") req/s"
    p50[$key]=$(min "$a" "${p50[$key]:-}")
    p99[$key]=$(min "$b" "${p99[$key]:-}")
}

for q in "${queries[@]}"; do
    for s in small big; do
        run_wrk "$q.$s" "$(url "$q" "$s")" "${token[$s]}" 1 warm
    done
    for ((round = 1; round <= rounds; round++)); do
        for s in small big; do
            run_wrk "$q.$s" "$(url "$q" "$s")" "${token[$s]}" "$duration"
        done
    done
done
big_rss_kib=$(awk '/^VmHWM:/ { print $2 }' "/proc/${server_pid[big]}/status" 2>/dev/null || true)

# --- table -------------------------------------------------------------------------------

total=$((models * versions))
print_row() { printf '%-48s %10s %7s %7s  %s\n' "$@"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0) ? a / b : 0 }'; }
verdict() { awk -v r="$1" 'BEGIN { print (r <= 2) ? "PASS" : "WARN" }'; }

echo
echo "modelgate scale benchmark: $models models x $versions versions = $total vs $versions versions, ${database%%://*}, wrk 1 connection, ${duration}s x $rounds rounds (best kept), $pin_note, $cpus CPUs, load average $load_at_start at start"
print_row metric value ratio target result
print_row "generate $total versions, s" "${gen_secs[big]:-?}" - - -
print_row "generate rate, versions/s" "${gen_rate[big]:-?}" - - -
print_row "store size $total versions, MiB" "${db_mib[big]}" - - -
for q in "${queries[@]}"; do
    for stat in p50 p99; do
        if [[ $stat == p50 ]]; then small=${p50[$q.small]} big=${p50[$q.big]}; else small=${p99[$q.small]} big=${p99[$q.big]}; fi
        r=$(ratio "$big" "$small")
        print_row "${qlabel[$q]} $stat ms, $versions versions" "$small" - - -
        print_row "${qlabel[$q]} $stat ms, $total versions" "$big" "$r" "<=2" "$(verdict "$r")"
    done
done
echo "response bytes (small/big): $(for q in "${queries[@]}"; do printf '%s %s/%s  ' "$q" "${resp_bytes[$q.small]}" "${resp_bytes[$q.big]}"; done)"
[[ -z "$big_rss_kib" ]] || echo "modelgated peak RSS on the big store: $((big_rss_kib / 1024)) MiB"
