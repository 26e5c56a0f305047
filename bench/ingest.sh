#!/usr/bin/env bash
# Blob ingest and download benchmark for modelgated. Not part of the test suite.
#
# Everything is measured in one run, on one machine, on one filesystem, and reported as a
# ratio against what that machine can physically do, so the numbers mean the same on a
# laptop and on a server:
#   upload   / min(openssl sha256 rate, dd conv=fsync write rate)   target >= 0.75
#   download / nginx sendfile download of the same file             target >= 0.90
#
# With --blobs s3|oci (repeatable) the same bytes also go to a remote blob backend started
# here (scripts/blob-test.sh: s3rver, docker-registry), each compared in the same run with
# that server's reference client pushing and fetching the same bytes directly:
#   modelgated upload / download through s3  vs  awscli cp through nginx    target >= 0.90
#   modelgated upload / download through oci vs  curl monolithic PUT / GET
#                                                through nginx                      >= 0.90
#   modelgated upload to file:               vs  the registry's own push      >= 1.50
# The fair reference for a proxy is another proxy: nginx reverse-proxying the same server
# (request and response buffering off), with the same client; the client straight to the
# server is printed beside it for information.
# Each modelgated row and each nginx row also shows the CPU time (user + system, from
# /proc/PID/stat) that process spent per GiB moved: unlike MB/s it does not depend on what
# else the machine is running.
#
# Usage: bench/ingest.sh [--size-mib N] [--keep-going] [--tmp-dir DIR] [--blobs s3|oci]...
# See bench/README.md.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$root/bench/lib.sh"
bench_name=ingest

usage() {
    cat <<EOF
usage: $0 [--size-mib N] [--keep-going] [--tmp-dir DIR] [--blobs s3|oci]...
  --size-mib N   size of the random test file in MiB (default 1024)
  --keep-going   record a failed step as ERROR and go on instead of stopping
  --tmp-dir DIR  where the test file, the data dir and nginx live (default
                 $root/build/bench-tmp); must be on the disk you want to measure
  --blobs KIND   also measure a remote blob backend (s3 or oci, started here) against
                 its reference client (awscli, curl); repeatable
Environment: MODELGATED (default $root/build/modelgated), NGINX (default nginx).
Exit status: 0 when every step ran (a WARN is not a failure), 1 when a step failed, 2 on
bad usage.
EOF
}

size_mib=1024
keep_going=0
backends=()
tmp_parent="$root/build/bench-tmp"
while [[ $# -gt 0 ]]; do
    case "$1" in
    --size-mib)
        [[ $# -ge 2 && "$2" =~ ^[1-9][0-9]*$ ]] || { usage >&2; exit 2; }
        size_mib=$2
        shift 2
        ;;
    --keep-going)
        keep_going=1
        shift
        ;;
    --blobs)
        [[ $# -ge 2 && ( "$2" == s3 || "$2" == oci ) ]] || { usage >&2; exit 2; }
        backends+=("$2")
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

modelgated=${MODELGATED:-$root/build/modelgated}
nginx_bin=${NGINX:-nginx}
size_bytes=$((size_mib * 1024 * 1024))
ready_timeout_s=30

bench_require openssl dd curl awk timeout pgrep "$nginx_bin"
[[ -x "$modelgated" ]] || { echo "ingest: $modelgated is not built (run scripts/build.sh)" >&2; exit 1; }

# --- state and cleanup -------------------------------------------------------------------

server_pid=""
nginx_pid=""
bench_stop_on_exit server_pid nginx_pid
bench_init ingest "$tmp_parent"

# Three copies can exist at once: the test file, the dd copy (removed right after), and the
# upload's temp file before it is renamed into the blob store.
avail_kib=$(df -Pk -- "$work" | awk 'NR == 2 { print $4 }')
need_kib=$((size_mib * 1024 * 3 + 64 * 1024))
if [[ "$avail_kib" -lt "$need_kib" ]]; then
    echo "ingest: $work has $((avail_kib / 1024)) MiB free, needs about $((need_kib / 1024)) MiB" >&2
    exit 1
fi

# --- results table -----------------------------------------------------------------------

load_at_start=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo "?")
declare -A rate=()  # metric -> MB/s, or ERROR / skipped
declare -A cpu=()   # metric -> CPU seconds per GiB of the server that moved the bytes
clk_tck=$(getconf CLK_TCK 2>/dev/null || echo 100)
errors=0

now() { date +%s.%N; }

# MB/s with MB = 10^6 bytes, like dd and curl print.
mb_per_s() {
    awk -v b="$1" -v t0="$2" -v t1="$3" 'BEGIN { d = t1 - t0; if (d <= 0) d = 1e-9; printf "%.1f", b / d / 1e6 }'
}

is_number() { [[ "${1:-}" =~ ^[0-9]+(\.[0-9]+)?$ ]]; }

print_row() {
    printf '%-30s %10s %7s %7s  %-6s %s\n' "$1" "$2" "$3" "$4" "$5" "${6:-}"
}

# nginx_worker MASTER_PID: the pid of its (one) worker process, which moves the bytes.
nginx_worker() {
    pgrep -P "$1" 2>/dev/null | head -n 1
}

# cpu_per_gib METRIC TICKS0 TICKS1 BYTES: record the CPU seconds per GiB in cpu[METRIC].
cpu_per_gib() {
    [[ -n "$2" && -n "$3" ]] || return 0
    cpu[$1]=$(awk -v t="$(($3 - $2))" -v hz="$clk_tck" -v b="$4" 'BEGIN { printf "%.2f", t / hz / (b / 1073741824) }')
}

# ratio_row LABEL METRIC DENOMINATOR TARGET: METRIC's rate against DENOMINATOR.
ratio_row() {
    local label=$1 metric=$2 den=$3 target=$4 num ratio verdict
    num=${rate[$metric]:-}
    ratio="-"
    if is_number "$num" && is_number "$den"; then
        ratio=$(awk -v n="$num" -v d="$den" 'BEGIN { printf "%.2f", (d > 0) ? n / d : 0 }')
        verdict=$(awk -v r="$ratio" -v t="$target" 'BEGIN { print (r >= t) ? "PASS" : "WARN" }')
    elif [[ -z "$num" || "$num" == skipped ]]; then
        verdict="SKIP"
    else
        verdict="ERROR"
    fi
    print_row "$label" "${num:-skipped}" "$ratio" ">=$target" "$verdict" "${cpu[$metric]:-}"
}

print_table() {
    local floor=""
    if is_number "${rate[sha256]:-}" && is_number "${rate[disk_write]:-}"; then
        floor=$(awk -v a="${rate[sha256]}" -v b="${rate[disk_write]}" 'BEGIN { print (a < b) ? a : b }')
    fi
    echo
    # The load average at the start tells whether something else shared the CPUs.
    echo "modelgate ingest benchmark: ${size_mib} MiB file on $(df -P -- "$work" | awk 'NR == 2 { print $1 }'), $(nproc) CPUs, load average $load_at_start at start"
    print_row metric MB/s ratio target result "CPU s/GiB"
    # upload is compared with the slower of hashing and durable writing, the two things an
    # upload must do; download with nginx sendfile of the same bytes.
    print_row "sha256 (openssl dgst)" "${rate[sha256]:-skipped}" - - -
    print_row "disk write (dd fsync)" "${rate[disk_write]:-skipped}" - - -
    ratio_row "upload modelgated" upload "$floor" 0.75
    print_row "download nginx (sendfile)" "${rate[download_nginx]:-skipped}" - - - "${cpu[download_nginx]:-}"
    ratio_row "download modelgated" download "${rate[download_nginx]:-}" 0.90
    for kind in "${backends[@]}"; do
        print_row "upload $kind direct (${ref_client[$kind]})" "${rate[up_ref_$kind]:-skipped}" - - -
        print_row "upload $kind via nginx proxy" "${rate[up_ngx_$kind]:-skipped}" - - - "${cpu[up_ngx_$kind]:-}"
        ratio_row "upload modelgated -> $kind" "up_$kind" "${rate[up_ngx_$kind]:-}" 0.90
        print_row "download $kind direct" "${rate[down_ref_$kind]:-skipped}" - - -
        print_row "download $kind via nginx proxy" "${rate[down_ngx_$kind]:-skipped}" - - - "${cpu[down_ngx_$kind]:-}"
        ratio_row "download modelgated <- $kind" "down_$kind" "${rate[down_ngx_$kind]:-}" 0.90
        if [[ $kind == oci ]]; then
            ratio_row "upload modelgated -> file" upload "${rate[up_ref_oci]:-}" 1.50
            echo "  (the last row: modelgated writing file: against the registry's own push)"
        fi
    done
    if [[ -n "${server_peak_rss_kib:-}" ]]; then
        echo "modelgated peak RSS after upload and downloads: $((server_peak_rss_kib / 1024)) MiB"
    fi
}

# A step that cannot produce its number: record it, and stop unless --keep-going.
step_error() {
    local metric=$1
    shift
    echo "ingest: $metric: $*" >&2
    rate[$metric]=ERROR
    errors=$((errors + 1))
    if [[ $keep_going -eq 0 ]]; then
        print_table
        exit 1
    fi
}

# --- 1. the test file --------------------------------------------------------------------

file="$work/random.bin"
echo "ingest: writing ${size_mib} MiB of random bytes to $file"
# Random, so neither the disk, a compressing filesystem nor modelgated's archive detection
# gets an easy ride. head on /dev/urandom handles any size; openssl rand caps at INT_MAX.
head -c "$size_bytes" /dev/urandom >"$file"
# ... but a first byte of 0: one that looks like a pickle opcode (about 1 file in 12) makes
# modelgated keep a local copy of an upload to a remote backend for its scan at commit, a
# different and slower path than the one measured, chosen by chance.
printf '\0' | dd of="$file" bs=1 conv=notrunc status=none
# Warm the page cache for every reader alike: each step below then reads the file from
# memory, so it is the hashing, writing or serving that is measured, not the first read.
cat -- "$file" >/dev/null

# --- 2. sha256 rate ----------------------------------------------------------------------

t0=$(now)
expected_hex=$(openssl dgst -sha256 -r -- "$file" | awk '{ print $1 }')
t1=$(now)
rate[sha256]=$(mb_per_s "$size_bytes" "$t0" "$t1")
echo "ingest: sha256 ${rate[sha256]} MB/s"

# --- 3. fsync'd disk write rate ----------------------------------------------------------

copy="$work/dd.out"
t0=$(now)
if dd if="$file" of="$copy" bs=1M conv=fsync status=none; then
    t1=$(now)
    rate[disk_write]=$(mb_per_s "$size_bytes" "$t0" "$t1")
    echo "ingest: disk write ${rate[disk_write]} MB/s"
else
    step_error disk_write "dd failed"
fi
rm -f -- "$copy"

# --- 4. modelgated upload ----------------------------------------------------------------

data_dir="$work/data"
port_file="$work/modelgated.port"
server_log="$work/modelgated.log"
mkdir -p -m 700 -- "$data_dir" # the server refuses a data directory others can open

port_ready() {
    [[ -s "$port_file" && -s "$data_dir/admin.token" ]] || return 1
    [[ "$(<"$port_file")" =~ ^[[:space:]]*[0-9]+[[:space:]]*$ ]] || return 1
    curl -fsS -o /dev/null --max-time 2 "http://127.0.0.1:$(tr -d '[:space:]' <"$port_file")/healthz" 2>/dev/null
}

server_args=(--listen 127.0.0.1:0 --port-file "$port_file" --data-dir "$data_dir")
# The default blob size cap may be below the benchmark size; raise it when the flag exists.
# timeout: a binary that ignored --help would otherwise start serving and never return.
if timeout 5 "$modelgated" --help 2>&1 | grep -q -- '--max-blob-bytes'; then
    server_args+=(--max-blob-bytes "$((size_bytes * 2))")
fi
"$modelgated" "${server_args[@]}" >"$server_log" 2>&1 &
server_pid=$!

digest=""
if ! bench_wait_for modelgated "$server_pid" port_ready; then
    tail -n 20 -- "$server_log" >&2 || true
    step_error upload "modelgated did not start"
else
    port=$(tr -d '[:space:]' <"$port_file")
    token=$(tr -d '[:space:]' <"$data_dir/admin.token")
    base="http://127.0.0.1:$port"
    echo "ingest: modelgated listening on $base"

    # -T streams the file from disk (curl never holds it in memory) and sends its length;
    # -X POST turns the default PUT into the API's POST. curl's time_total runs until the
    # response arrives, i.e. after the server has hashed, fsynced and renamed the blob.
    t0_cpu=$(bench_cpu_ticks "$server_pid")
    out=$(curl -sS -T "$file" -X POST -o "$work/upload.json" -w '%{http_code} %{time_total}' \
        -H "Authorization: Bearer $token" -H 'Content-Type: application/octet-stream' \
        "$base/api/v1/blobs") || out="curl-error 0"
    cpu_per_gib upload "$t0_cpu" "$(bench_cpu_ticks "$server_pid")" "$size_bytes"
    read -r code secs <<<"$out"
    if [[ "$code" != 201 && "$code" != 200 ]]; then
        tail -n 5 -- "$server_log" >&2 || true
        step_error upload "POST /api/v1/blobs returned $code: $(head -c 500 "$work/upload.json" 2>/dev/null || true)"
    elif ! grep -q "sha256:$expected_hex" "$work/upload.json"; then
        step_error upload "server digest differs from openssl's sha256:$expected_hex: $(head -c 500 "$work/upload.json")"
    else
        digest="sha256:$expected_hex"
        rate[upload]=$(mb_per_s "$size_bytes" 0 "$secs")
        echo "ingest: upload ${rate[upload]} MB/s"
    fi
fi

if [[ -n "$digest" ]]; then
    rate[download]=""
else
    rate[download]=skipped
fi

# --- 5. nginx serving the same bytes -----------------------------------------------------

# nginx from a throw-away prefix: its own pid, logs and temp dirs, so it needs no root and
# never touches the system nginx. The workers read the test file through sendfile(2).
ngx="$work/nginx"
mkdir -p -- "$ngx/html" "$ngx/tmp"
ln -- "$file" "$ngx/html/random.bin" 2>/dev/null || cp -- "$file" "$ngx/html/random.bin"
# As root, nginx would drop its workers to 'nobody', who may not be able to walk into the
# repository (e.g. under /root); the workers keep our user instead. Non-root ignores 'user'.
ngx_user=""
if [[ $(id -u) -eq 0 ]]; then
    ngx_user="user root;"
fi

write_nginx_conf() {
    cat >"$ngx/nginx.conf" <<CONF
$ngx_user
worker_processes 1;
daemon off;
pid $ngx/nginx.pid;
error_log $ngx/error.log;
events { worker_connections 64; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    default_type application/octet-stream;
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
    local len
    len=$(curl -fsS -I --max-time 2 "http://127.0.0.1:$ngx_port/random.bin" 2>/dev/null |
        awk 'tolower($1) == "content-length:" { print $2 + 0 }') || return 1
    [[ "$len" == "$size_bytes" ]]
}

# nginx cannot report an ephemeral port, so try random high ports until one binds; on a
# taken port nginx exits after its bind retries, which bench_wait_for notices.
ngx_port=""
for attempt in 1 2 3 4 5 6 7 8 9 10; do
    try_port=$((20000 + RANDOM % 40000))
    write_nginx_conf "$try_port"
    "$nginx_bin" -p "$ngx" -c "$ngx/nginx.conf" -e "$ngx/error.log" >>"$ngx/stdout.log" 2>&1 &
    nginx_pid=$!
    ngx_port=$try_port
    if bench_wait_for nginx "$nginx_pid" nginx_ready 2>/dev/null; then
        break
    fi
    kill -TERM "$nginx_pid" 2>/dev/null || true
    wait "$nginx_pid" 2>/dev/null || true
    nginx_pid=""
    ngx_port=""
    echo "ingest: nginx could not use port $try_port (attempt $attempt)" >&2
done
if [[ -z "$ngx_port" ]]; then
    tail -n 5 -- "$ngx/error.log" >&2 2>/dev/null || true
    step_error download_nginx "nginx did not start"
else
    echo "ingest: nginx listening on 127.0.0.1:$ngx_port"
    rate[download_nginx]=""
fi

# --- 6. downloads: modelgated vs nginx, interleaved --------------------------------------

# download_once METRIC ROUND URL [CURL ARGS...]: one GET to /dev/null, keeping the best rate
# in rate[METRIC]. Timed by curl itself, so curl's start-up does not count against small
# --size-mib runs. The CPU time of the process cpu_pid[METRIC] names (modelgated, the nginx
# worker) adds up over the rounds into cpu[METRIC], per GiB.
declare -A cpu_pid=() cpu_ticks_sum=() cpu_bytes_sum=()
download_once() {
    local metric=$1 round=$2 url=$3 out code got secs r pid=${cpu_pid[$1]:-} t0 t1
    shift 3
    t0=$(bench_cpu_ticks "$pid")
    out=$(curl -sS -o /dev/null -w '%{http_code} %{size_download} %{time_total}' "$@" "$url") ||
        out="curl-error 0 0"
    t1=$(bench_cpu_ticks "$pid")
    read -r code got secs <<<"$out"
    if [[ "$code" != 200 || "$got" != "$size_bytes" ]]; then
        step_error "$metric" "GET $url round $round: status $code, $got of $size_bytes bytes"
        return 0
    fi
    if [[ -n $t0 && -n $t1 ]]; then
        cpu_ticks_sum[$metric]=$((${cpu_ticks_sum[$metric]:-0} + t1 - t0))
        cpu_bytes_sum[$metric]=$((${cpu_bytes_sum[$metric]:-0} + size_bytes))
        cpu_per_gib "$metric" 0 "${cpu_ticks_sum[$metric]}" "${cpu_bytes_sum[$metric]}"
    fi
    r=$(mb_per_s "$size_bytes" 0 "$secs")
    echo "ingest: $metric round $round: $r MB/s"
    if [[ -z "${rate[$metric]}" ]] || awk -v a="$r" -v b="${rate[$metric]}" 'BEGIN { exit !(a > b) }'; then
        rate[$metric]=$r
    fi
}

# Three rounds, each one download from each server, best kept: alternating spreads any
# drift of a shared VM (a noisy neighbour, CPU boost) over both sides instead of one, and
# the best run drops cold caches and TCP warm-up that say nothing about the server.
cpu_pid[download]=$server_pid
if [[ -n "$nginx_pid" ]]; then
    cpu_pid[download_nginx]=$(nginx_worker "$nginx_pid")
fi
for round in 1 2 3; do
    if [[ "${rate[download]}" != skipped && "${rate[download]}" != ERROR ]]; then
        download_once download "$round" "$base/api/v1/blobs/$digest" -H "Authorization: Bearer $token"
    fi
    if [[ -n "$ngx_port" && "${rate[download_nginx]:-}" != ERROR ]]; then
        download_once download_nginx "$round" "http://127.0.0.1:$ngx_port/random.bin"
    fi
done

if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
    server_peak_rss_kib=$(awk '/^VmHWM:/ { print $2 }' "/proc/$server_pid/status" 2>/dev/null || true)
fi

# --- 7. remote blob backends: modelgated against each server's reference client --------

declare -A ref_client=([s3]="awscli cp" [oci]="curl PUT")
blob_dirs=()
cleanup_blob_servers() {
    local d
    for d in "${blob_dirs[@]}"; do bash "$root/scripts/blob-test.sh" stop "$d" >/dev/null 2>&1 || true; done
}
trap 'cleanup_blob_servers; bench_cleanup' EXIT

# timed CMD...: seconds the command took (its output discarded); empty on failure.
timed() {
    local t0 t1
    t0=$(now)
    "$@" >/dev/null 2>&1 || return 1
    t1=$(now)
    awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }'
}

# nginx reverse-proxying 127.0.0.1:$2 on a free port (sets proxy_port): the reference for
# modelgated, itself a proxy in front of that server. Request bodies streamed (no request
# buffering, 256 KiB reads), responses through 4 MiB of memory buffers and never a temp file
# (with buffering off nginx relays a page at a time: 0.4x of this), keep-alive to the
# upstream, Host passed through so the registry's upload Location and S3's SigV4 signature
# see the client's host.
proxy_pids=()
bench_stop_on_exit proxy_pids
start_proxy() {
    local kind=$1 upstream=$2 pdir="$work/nginx-proxy-$1" try attempt
    proxy_port=""
    mkdir -p -- "$pdir/tmp"
    for attempt in 1 2 3 4 5 6 7 8 9 10; do
        try=$((20000 + RANDOM % 40000))
        cat >"$pdir/nginx.conf" <<CONF
$ngx_user
worker_processes 1;
daemon off;
pid $pdir/nginx.pid;
error_log $pdir/error.log;
events { worker_connections 64; }
http {
    access_log off;
    client_body_temp_path $pdir/tmp/body;
    proxy_temp_path $pdir/tmp/proxy;
    fastcgi_temp_path $pdir/tmp/fastcgi;
    uwsgi_temp_path $pdir/tmp/uwsgi;
    scgi_temp_path $pdir/tmp/scgi;
    upstream backend { server 127.0.0.1:$upstream; keepalive 8; }
    server {
        listen 127.0.0.1:$try;
        client_max_body_size 0;
        location / {
            proxy_pass http://backend;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Host \$http_host;
            proxy_request_buffering off;
            client_body_buffer_size 256k;
            proxy_buffering on;
            proxy_buffer_size 256k;
            proxy_buffers 16 256k;
            proxy_busy_buffers_size 512k;
            proxy_max_temp_file_size 0;
            proxy_read_timeout 600s;
            proxy_send_timeout 600s;
        }
    }
}
CONF
        "$nginx_bin" -p "$pdir" -c "$pdir/nginx.conf" -e "$pdir/error.log" >>"$pdir/stdout.log" 2>&1 &
        proxy_pids+=($!)
        proxy_ready() { curl -sS -o /dev/null --max-time 2 "http://127.0.0.1:$try/" 2>/dev/null; }
        if bench_wait_for "nginx proxy for $kind" "$!" proxy_ready 2>/dev/null; then
            proxy_port=$try
            echo "ingest: nginx proxying $kind on 127.0.0.1:$proxy_port"
            return 0
        fi
        echo "ingest: nginx proxy could not use port $try (attempt $attempt)" >&2
    done
    return 1
}

# keep_best METRIC MB/S: the higher of the two.
keep_best() {
    if [[ -z "${rate[$1]:-}" ]] || awk -v a="$2" -v b="${rate[$1]}" 'BEGIN { exit !(a > b) }'; then
        rate[$1]=$2
    fi
}

# ref_push KIND PORT NAME [PID]: the reference client's upload and download of the file
# through 127.0.0.1:PORT (the server itself, or the nginx in front of it), as up_NAME /
# down_NAME; with PID (the nginx worker), its CPU time per GiB too.
ref_push() {
    local kind=$1 port=$2 name=$3 pid=${4:-} secs reg loc round t0 rounds=0
    if [[ $kind == s3 ]]; then
        export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_DEFAULT_REGION=us-east-1
        aws_e=(aws --endpoint-url "http://127.0.0.1:$port")
        t0=$(bench_cpu_ticks "$pid")
        if secs=$(timed "${aws_e[@]}" s3 cp "$file" "s3://mgtest/$name/random.bin"); then
            rate[up_${name}_s3]=$(mb_per_s "$size_bytes" 0 "$secs")
            cpu_per_gib "up_${name}_s3" "$t0" "$(bench_cpu_ticks "$pid")" "$size_bytes"
        else
            step_error "up_${name}_s3" "aws s3 cp through 127.0.0.1:$port failed"
        fi
        t0=$(bench_cpu_ticks "$pid")
        for round in 1 2 3; do # best of three, as modelgated's downloads
            if secs=$(timed sh -c "$(printf '%q ' "${aws_e[@]}") s3 cp s3://mgtest/$name/random.bin - >/dev/null"); then
                keep_best "down_${name}_s3" "$(mb_per_s "$size_bytes" 0 "$secs")"
                rounds=$((rounds + 1))
            else
                step_error "down_${name}_s3" "aws s3 cp (download) through 127.0.0.1:$port failed"
                break
            fi
        done
    else
        reg="http://127.0.0.1:$port/v2/mg/$name"
        loc=$(curl -sS -D - -o /dev/null -X POST "$reg/blobs/uploads/" | awk 'tolower($1) == "location:" { print $2 }' | tr -d '\r')
        [[ $loc == /* ]] && loc="http://127.0.0.1:$port$loc"
        t0=$(bench_cpu_ticks "$pid")
        if [[ -n $loc ]] && secs=$(timed curl -sS -f -T "$file" -H "Content-Type: application/octet-stream" "$loc&digest=sha256:$expected_hex"); then
            rate[up_${name}_oci]=$(mb_per_s "$size_bytes" 0 "$secs")
            cpu_per_gib "up_${name}_oci" "$t0" "$(bench_cpu_ticks "$pid")" "$size_bytes"
        else
            step_error "up_${name}_oci" "the registry's monolithic PUT through 127.0.0.1:$port failed"
        fi
        t0=$(bench_cpu_ticks "$pid")
        for round in 1 2 3; do
            if secs=$(timed curl -sS -f -o /dev/null "$reg/blobs/sha256:$expected_hex"); then
                keep_best "down_${name}_oci" "$(mb_per_s "$size_bytes" 0 "$secs")"
                rounds=$((rounds + 1))
            else
                step_error "down_${name}_oci" "the registry GET through 127.0.0.1:$port failed"
                break
            fi
        done
    fi
    if [[ $rounds -gt 0 ]]; then
        cpu_per_gib "down_${name}_$kind" "$t0" "$(bench_cpu_ticks "$pid")" "$((size_bytes * rounds))"
    fi
}

for kind in "${backends[@]}"; do
    bdir="$work/$kind-server"
    blob_dirs+=("$bdir")
    if ! url=$(bash "$root/scripts/blob-test.sh" start "$kind" "$bdir" | tail -n 1); then
        step_error "up_$kind" "scripts/blob-test.sh start $kind failed"
        continue
    fi
    bport=$(cat "$bdir/port")
    # the reference client, straight to the server (for information), then through nginx
    # (the reference for modelgated, a proxy too)
    ref_push "$kind" "$bport" ref
    if start_proxy "$kind" "$bport"; then
        ref_push "$kind" "$proxy_port" ngx "$(nginx_worker "${proxy_pids[-1]}")"
    else
        step_error "up_ngx_$kind" "nginx did not start as a proxy for $kind"
    fi
    # modelgated on that backend: same bytes, same client (curl), digest declared
    bdata="$work/data-$kind"
    mkdir -p -m 700 -- "$bdata"
    bport_file="$work/modelgated-$kind.port"
    creds=()
    [[ -s "$bdir/credentials" ]] && creds=(--blobs-credentials "$bdir/credentials")
    "$modelgated" --listen 127.0.0.1:0 --port-file "$bport_file" --data-dir "$bdata" \
        --max-blob-bytes "$((size_bytes * 2))" --blobs "$url" "${creds[@]}" >"$work/modelgated-$kind.log" 2>&1 &
    bpid=$!
    bready() { [[ -s "$bport_file" && -s "$bdata/admin.token" ]]; }
    if ! bench_wait_for "modelgated on $kind" "$bpid" bready; then
        step_error "up_$kind" "modelgated on $kind did not start"
        continue
    fi
    bbase="http://127.0.0.1:$(tr -d '[:space:]' <"$bport_file")"
    btoken=$(tr -d '[:space:]' <"$bdata/admin.token")
    t0_cpu=$(bench_cpu_ticks "$bpid")
    out=$(curl -sS -T "$file" -X POST -o "$work/upload-$kind.json" -w '%{http_code} %{time_total}' \
        -H "Authorization: Bearer $btoken" -H "X-Content-Digest: sha256:$expected_hex" \
        "$bbase/api/v1/blobs") || out="curl-error 0"
    cpu_per_gib "up_$kind" "$t0_cpu" "$(bench_cpu_ticks "$bpid")" "$size_bytes"
    read -r code secs <<<"$out"
    if [[ "$code" == 201 || "$code" == 200 ]]; then
        rate[up_$kind]=$(mb_per_s "$size_bytes" 0 "$secs")
        echo "ingest: upload through $kind ${rate[up_$kind]} MB/s"
        rate[down_$kind]=""
        cpu_pid[down_$kind]=$bpid
        for round in 1 2 3; do
            download_once "down_$kind" "$round" "$bbase/api/v1/blobs/sha256:$expected_hex" -H "Authorization: Bearer $btoken"
        done
    else
        step_error "up_$kind" "POST through $kind returned $code: $(head -c 300 "$work/upload-$kind.json")"
    fi
    rss=$(awk '/^VmHWM:/ { print $2 }' "/proc/$bpid/status" 2>/dev/null || true)
    [[ -n $rss ]] && echo "ingest: modelgated on $kind peak RSS $((rss / 1024)) MiB"
    kill -TERM "$bpid" 2>/dev/null || true
    wait "$bpid" 2>/dev/null || true
done

print_table
if [[ $errors -gt 0 ]]; then
    exit 1
fi
