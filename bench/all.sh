#!/usr/bin/env bash
# Runs every benchmark in bench/ one after the other and prints one table of all their
# figures: ingest.sh, propagation.sh, read.sh, scale.sh.
#
# Usage: bench/all.sh [--full] [--only NAME[,NAME...]] [--tmp-dir DIR] [--cache-dir DIR]
#   default  quicker settings: 256 MiB ingest file, scale.sh with 1,000 models x 100
#            versions (100,000 versions)
#   --full   the figures of the issue: 1 GiB ingest file, 10,000 x 100 = 1 M versions
# Each script's own output (progress and its table) goes to build/bench-logs/<name>.log.
# Exit status: 0 when every benchmark ran (WARN included), 1 when one failed, 2 bad usage.
set -euo pipefail
export LC_ALL=C

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

usage() {
    cat <<EOF
usage: $0 [--full] [--only NAME[,NAME...]] [--tmp-dir DIR] [--cache-dir DIR]
  --full           1 GiB ingest, 1 M versions for scale.sh (default: 256 MiB, 100,000)
  --only NAMES     a comma-separated subset of: ingest,propagation,read,scale
  --tmp-dir DIR    passed to every script (the disk being measured)
  --cache-dir DIR  passed to scale.sh: keep generated stores for the next run
Environment: MODELGATED and the other variables each script reads are passed through.
EOF
}

full=0
only="ingest,propagation,read,scale"
common=()
scale_extra=()
while [[ $# -gt 0 ]]; do
    case "$1" in
    --full)
        full=1
        shift
        ;;
    --only)
        [[ $# -ge 2 ]] || { usage >&2; exit 2; }
        only=$2
        shift 2
        ;;
    --tmp-dir)
        [[ $# -ge 2 ]] || { usage >&2; exit 2; }
        common+=(--tmp-dir "$2")
        shift 2
        ;;
    --cache-dir)
        [[ $# -ge 2 ]] || { usage >&2; exit 2; }
        scale_extra+=(--cache-dir "$2")
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

declare -A args=()
if [[ $full -eq 1 ]]; then
    args[ingest]="--size-mib 1024"
    args[scale]="--models 10000"
else
    args[ingest]="--size-mib 256"
    args[scale]="--models 1000"
fi
args[propagation]=""
args[read]=""

IFS=, read -r -a names <<<"$only"
for name in "${names[@]}"; do
    [[ -f "$root/bench/$name.sh" && -n "${args[$name]+set}" ]] || { usage >&2; exit 2; }
done

logs="$root/build/bench-logs"
mkdir -p "$logs"

# table_rows NAME LOG: the rows of a script's final table as
# "name<TAB>metric<TAB>value<TAB>ratio<TAB>target<TAB>result". The rows follow the line that
# starts with "metric"; fields are read from the right because labels contain spaces.
# propagation.sh has no ratio column; ingest.sh's values are MB/s, propagation.sh's ms.
table_rows() {
    awk -v name="$1" '
        /^metric[ \t]/ { in_table = 1; next }
        in_table && NF == 0 { in_table = 0 }
        in_table && $NF ~ /^(PASS|WARN|ERROR|SKIP|-)$/ {
            result = $NF; target = $(NF - 1)
            if (name == "propagation") { ratio = "-"; value = $(NF - 2); last = NF - 3; unit = " ms" }
            else { ratio = $(NF - 2); value = $(NF - 3); last = NF - 4; unit = (name == "ingest") ? " MB/s" : "" }
            label = $1
            for (i = 2; i <= last; i++) label = label " " $i
            printf "%s\t%s%s\t%s\t%s\t%s\t%s\n", name, label, unit, value, ratio, target, result
        }' "$2"
}

failed=()
rows=""
load_at_start=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo "?")
for name in "${names[@]}"; do
    log="$logs/$name.log"
    # shellcheck disable=SC2206 # args[] holds a list of flags
    cmd=("$root/bench/$name.sh" ${args[$name]} "${common[@]}")
    [[ $name != scale ]] || cmd+=("${scale_extra[@]}")
    echo "all: ${cmd[*]}  (log: $log)"
    start=$SECONDS
    if "${cmd[@]}" >"$log" 2>&1; then
        echo "all: $name done in $((SECONDS - start)) s"
    else
        echo "all: $name FAILED after $((SECONDS - start)) s; last lines of $log:" >&2
        tail -n 15 "$log" >&2
        failed+=("$name")
    fi
    rows+=$(table_rows "$name" "$log")$'\n'
done

echo
echo "modelgate benchmarks: $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs, load average $load_at_start at start, $([[ $full -eq 1 ]] && echo full || echo quick) settings"
printf '%-12s %-48s %10s %7s %7s  %s\n' bench metric value ratio target result
while IFS=$'\t' read -r b m v r t res; do
    [[ -n "$b" ]] || continue
    printf '%-12s %-48s %10s %7s %7s  %s\n' "$b" "$m" "$v" "$r" "$t" "$res"
done <<<"$rows"
if [[ ${#failed[@]} -gt 0 ]]; then
    echo "failed: ${failed[*]} (see $logs/)"
    exit 1
fi
