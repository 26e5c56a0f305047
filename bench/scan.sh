#!/usr/bin/env bash
# bench/scan.sh - the artifact safety scan's cost (issue M20), in two parts.
#
# 1. Scan cost: a torch.save state dict of --size-mib (default 1024) written by Debian's
#    python3-torch, then bench/scan_run.c scans it (art_scan_file: the zip's central
#    directory and data.pkl read, tensor storages skipped) and hashes it with SHA-256 in the
#    same process, the file in the page cache, best of --rounds. Target: the scan at
#    >= 1 GB/s of artifact; the ratio to SHA-256 (which every upload computes anyway) says
#    what it adds to an upload.
# 2. Upload throughput with the scan against without it: the same bytes POSTed to
#    modelgated (curl, as ingest.sh does) with the scan and with MODELGATED_TEST_SCAN=skip
#    (the same binary; uploads are then not scanned and their report is "unknown"), each on
#    a fresh daemon and data directory, --upload-rounds rounds alternating which goes
#    first. Artifacts: the --size-mib checkpoint (a torch zip), and a --small-mib (default
#    256) checkpoint of random weights in a plain tar and in a tar.gz. Target: with the
#    scan >= 0.95x without, best round against best round; every round's ratio is printed.
#
# Usage: bench/scan.sh [--size-mib N] [--small-mib N] [--rounds N] [--upload-rounds N]
#                      [--only cost|upload] [--tmp-dir DIR]
# Needs: a build (scripts/build.sh), /usr/bin/python3 with python3-torch, gcc, curl, tar,
# gzip.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
. "$root/bench/lib.sh"

size_mib=1024
small_mib=256
rounds=3
upload_rounds=3
only=""
tmp_parent=${TMPDIR:-/tmp}/mg-bench
build_dir=${BUILD_DIR:-$root/build}
cc=${CC:-gcc}
while [[ $# -gt 0 ]]; do
    case "$1" in
    --size-mib) size_mib=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --small-mib) small_mib=$2; shift 2 ;;
    --upload-rounds) upload_rounds=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --tmp-dir) tmp_parent=$2; shift 2 ;;
    *) echo "usage: $0 [--size-mib N] [--small-mib N] [--rounds N] [--upload-rounds N] [--only cost|upload] [--tmp-dir DIR]" >&2; exit 2 ;;
    esac
done

modelgated=${MODELGATED:-$build_dir/modelgated}
server_pid=""
bench_stop_on_exit server_pid
bench_init scan "$tmp_parent"
bench_require "$cc" pkg-config curl tar gzip
[[ -f "$build_dir/libmg_artifact.a" ]] || bench_die "no $build_dir/libmg_artifact.a: run scripts/build.sh"
/usr/bin/python3 -c 'import torch' 2>/dev/null || bench_die "python3-torch is missing (apt-get install python3-torch)"

# shellcheck disable=SC2046 # pkg-config output is a list of flags
"$cc" -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Werror -I "$root" "$root/bench/scan_run.c" \
    -o "$work/scan_run" "$build_dir/libmg_artifact.a" "$build_dir/libmg_os.a" "$build_dir/libmg_base.a" \
    $(pkg-config --libs jansson libarchive libcrypto libprotobuf-c) -lpthread -lm ||
    bench_die "cannot compile bench/scan_run.c"

# 64 MiB float32 tensors (and one for the rest): a large model's layout, written by torch.save.
/usr/bin/python3 - "$work/model.pt" "$size_mib" <<'PY' || bench_die "torch.save failed"
import collections, sys, torch
path, mib = sys.argv[1], int(sys.argv[2])
sd = collections.OrderedDict()
left = mib << 20
i = 0
while left > 0:
    n = min(left, 64 << 20)
    sd['layers.%d.weight' % i] = torch.zeros(n // 4, dtype=torch.float32)
    left -= n
    i += 1
torch.save(sd, path)
PY

status=0
if [[ "$only" != upload ]]; then
    echo "scan: $(du -h "$work/model.pt" | cut -f1) checkpoint, best of $rounds"
    "$work/scan_run" "$work/model.pt" "$rounds" | tee "$work/result"
    rate=$(sed -n 's/.*scan_MBps=\([0-9]*\).*/\1/p' "$work/result")
    if [[ -n "$rate" && "$rate" -ge 1000 ]]; then
        echo "scan: PASS (>= 1000 MB/s)"
    else
        echo "scan: FAIL (< 1000 MB/s)"
        status=1
    fi
fi
[[ "$only" != cost ]] || exit "$status"

# ---- 2. uploads with and without the scan ----------------------------------------------

[[ -x "$modelgated" ]] || bench_die "no $modelgated: run scripts/build.sh"
# Random weights: gzip cannot collapse them (zeros would pass the 200:1 ratio cap).
/usr/bin/python3 - "$work/small.pt" "$small_mib" <<'PY' || bench_die "torch.save failed"
import collections, sys, torch
path, mib = sys.argv[1], int(sys.argv[2])
torch.manual_seed(0)
sd = collections.OrderedDict()
left = mib << 20
i = 0
while left > 0:
    n = min(left, 64 << 20)
    sd['layers.%d.weight' % i] = torch.rand(n // 4, dtype=torch.float32)
    left -= n
    i += 1
torch.save(sd, path)
PY
tar -C "$work" -cf "$work/small.tar" small.pt
gzip -6 -c "$work/small.tar" >"$work/small.tar.gz"
artifacts=(model.pt small.tar small.tar.gz)
declare -A label=([model.pt]="torch zip ${size_mib} MiB" [small.tar]="tar (${small_mib} MiB ckpt)"
    [small.tar.gz]="tar.gz (${small_mib} MiB ckpt)")
declare -A up=()  # "artifact mode round" -> MB/s
declare -A cpu=() # "artifact mode round" -> modelgated's CPU seconds for the upload
hz=$(getconf CLK_TCK)
# utime + stime of a process, in clock ticks
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

port_file="$work/modelgated.port"
# upload_round MODE ROUND: a fresh daemon and data directory, each artifact POSTed once.
upload_round() {
    local mode=$1 round=$2 data="$work/data" a out code secs verdict want=clean t0
    rm -rf -- "$data" "$port_file"
    mkdir -m 700 -- "$data"
    local env=()
    if [[ $mode == off ]]; then
        env=(MODELGATED_TEST_SCAN=skip)
        want=unknown
    fi
    env "${env[@]}" "$modelgated" --listen 127.0.0.1:0 --port-file "$port_file" --data-dir "$data" \
        --max-blob-bytes $(((size_mib + small_mib) * 2 * 1048576)) >"$work/modelgated.log" 2>&1 &
    server_pid=$!
    ready() { [[ -s "$port_file" && -s "$data/admin.token" ]]; }
    bench_wait_for modelgated "$server_pid" ready || bench_die "modelgated did not start"
    local base token
    base="http://127.0.0.1:$(tr -d '[:space:]' <"$port_file")"
    token=$(tr -d '[:space:]' <"$data/admin.token")
    for a in "${artifacts[@]}"; do
        cat -- "$work/$a" >/dev/null # the page cache, for every upload alike
        t0=$(cpu_ticks "$server_pid")
        out=$(curl -sS -T "$work/$a" -X POST -o "$work/upload.json" -w '%{http_code} %{time_total}' \
            -H "Authorization: Bearer $token" "$base/api/v1/blobs") || out="curl-error 0"
        read -r code secs <<<"$out"
        verdict=$(sed -n 's/.*"verdict" *: *"\([a-z]*\)".*/\1/p' "$work/upload.json")
        [[ "$code" == 201 ]] || bench_die "upload of $a ($mode) returned $code: $(head -c 300 "$work/upload.json")"
        [[ "$verdict" == "$want" ]] || bench_die "upload of $a ($mode): verdict '$verdict', expected $want"
        cpu["$a $mode $round"]=$(awk -v a="$t0" -v b="$(cpu_ticks "$server_pid")" -v hz="$hz" 'BEGIN { printf "%.2f", (b - a) / hz }')
        up["$a $mode $round"]=$(awk -v b="$(stat -c %s "$work/$a")" -v t="$secs" 'BEGIN { printf "%.1f", b / t / 1e6 }')
        echo "scan: round $round, $a, scan $mode: ${up["$a $mode $round"]} MB/s, modelgated CPU ${cpu["$a $mode $round"]} s"
    done
    kill -TERM "$server_pid"
    wait "$server_pid" || true
    server_pid=""
    rm -rf -- "$data"
}

load_at_start=$(cut -d' ' -f1 /proc/loadavg)
for ((r = 1; r <= upload_rounds; r++)); do
    if ((r % 2)); then upload_round on "$r"; upload_round off "$r"; else upload_round off "$r"; upload_round on "$r"; fi
done

# median of numbers on stdin
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo
echo "modelgate upload with/without the scan: $upload_rounds rounds, $(nproc) CPUs, load average $load_at_start at start, $(cut -d' ' -f1 /proc/loadavg) at end"
echo "wall: best round with the scan / best round without (target >= 0.95), and the median and range of"
echo "the rounds' own ratios; cpu: modelgated's CPU seconds per upload, median, without / with"
printf '%-24s %9s %9s %5s %6s %-10s %7s %7s %5s  %s\n' artifact "scan MB/s" "off MB/s" ratio median range "cpu on" "cpu off" ratio result
for a in "${artifacts[@]}"; do
    best_on=0 best_off=0 ratios=""
    for ((r = 1; r <= upload_rounds; r++)); do
        on=${up["$a on $r"]} off=${up["$a off $r"]}
        best_on=$(awk -v a="$on" -v b="$best_on" 'BEGIN { print (a > b) ? a : b }')
        best_off=$(awk -v a="$off" -v b="$best_off" 'BEGIN { print (a > b) ? a : b }')
        ratios+="$(awk -v a="$on" -v b="$off" 'BEGIN { printf "%.2f", a / b }') "
    done
    ratio=$(awk -v a="$best_on" -v b="$best_off" 'BEGIN { printf "%.2f", a / b }')
    med=$(echo "$ratios" | tr ' ' '\n' | sed '/^$/d' | median)
    spread=$(echo "$ratios" | tr ' ' '\n' | sed '/^$/d' | sort -n | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%s-%s", lo, hi }')
    cpu_on=$(for ((r = 1; r <= upload_rounds; r++)); do echo "${cpu["$a on $r"]}"; done | median)
    cpu_off=$(for ((r = 1; r <= upload_rounds; r++)); do echo "${cpu["$a off $r"]}"; done | median)
    cratio=$(awk -v a="$cpu_on" -v b="$cpu_off" 'BEGIN { printf "%.2f", (a > 0) ? b / a : 0 }')
    result=$(awk -v r="$ratio" 'BEGIN { print (r >= 0.95) ? "PASS" : "WARN" }')
    printf '%-24s %9s %9s %5s %6.2f %-10s %7.2f %7.2f %5s  %s\n' "${label[$a]}" "$best_on" "$best_off" "$ratio" "$med" "$spread" "$cpu_on" "$cpu_off" "$cratio" "$result"
    echo "  rounds: $ratios"
done
exit "$status"
