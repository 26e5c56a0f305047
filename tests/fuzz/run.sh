#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/build.sh) and runs each for a bounded time,
# then prints one line per target: executions, executions per second, corpus growth and
# whether it crashed. CI runs it with the default 60 seconds per target.
#
# Usage: tests/fuzz/run.sh [SECONDS] [TARGET...]
#   SECONDS  time per target (default 60)
#   TARGET   route, version_body, policy, gateway, archive, safetensors, gguf, onnx,
#            weights_archive, jwt, markdown, prom, pickle, jinja (default: all)
# Environment: FUZZ_FLAGS adds libFuzzer flags (e.g. "-detect_leaks=0" or "-jobs=2"),
#   FUZZ_NO_INSTALL=1 skips scripts/install-deps.sh --fuzz, FUZZ_NO_BUILD=1 the build.
#
# The seed corpus in tests/fuzz/corpus/<target>/ is only read; what a run discovers goes
# to build-fuzz/corpus/<target>/ (kept between runs, so later runs start further), crash
# inputs to build-fuzz/artifacts/<target>/, logs to build-fuzz/logs/<target>.log.
# Exit status: 0 when no target crashed, 1 when one did (or a build failed), 2 bad usage.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
here="$root/tests/fuzz"
out="$root/build-fuzz"

secs=60
if [[ $# -gt 0 && "$1" =~ ^[0-9]+$ ]]; then
    secs=$1
    shift
fi
all=(route version_body policy gateway archive safetensors gguf onnx weights_archive jwt markdown prom pickle jinja)
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=("${all[@]}")
for t in "${targets[@]}"; do
    [[ -f "$here/fuzz_$t.c" ]] || { echo "usage: $0 [SECONDS] [${all[*]}]" >&2; exit 2; }
done

if [[ "${FUZZ_NO_INSTALL:-0}" != 1 ]]; then
    "$root/scripts/install-deps.sh" --fuzz
fi
if [[ "${FUZZ_NO_BUILD:-0}" != 1 ]]; then
    "$here/build.sh"
fi

# Scratch files (the archive target writes and extracts every input) go to memory when
# /dev/shm is there: on a virtual disk, creating and removing files costs 5x the parsing.
scratch_parent=/dev/shm
[[ -d /dev/shm && -w /dev/shm ]] || scratch_parent="$out"
scratch=$(mktemp -d "$scratch_parent/mg-fuzz.XXXXXX")
trap 'rm -rf -- "$scratch"' EXIT

dict_for() {
    case "$1" in
    route | archive | safetensors | gguf | onnx | weights_archive | pickle | jinja)
        echo "$here/$1.dict"
        ;;
    *) echo "$here/json.dict" ;;
    esac
}

# stat NAME LOG: a -print_final_stats=1 figure, or "-".
stat() {
    awk -v k="stat::$1:" '$1 == k { v = $2 } END { print (v == "") ? "-" : v }' "$2"
}

mkdir -p "$out/logs"
crashed=0
rows=()
for t in "${targets[@]}"; do
    bin="$out/fuzz_$t"
    log="$out/logs/$t.log"
    corpus="$out/corpus/$t"
    artifacts="$out/artifacts/$t"
    mkdir -p "$corpus" "$artifacts"
    echo "fuzz: $t for ${secs}s (log: $log)"
    # The first corpus directory is where libFuzzer writes new inputs; the seeds stay clean.
    # -rss_limit_mb: ASan's quarantine alone takes 256 MiB; 2 GiB is libFuzzer's default.
    # -timeout: one input taking 10 s is a hang worth reporting.
    set +e
    # shellcheck disable=SC2086 # FUZZ_FLAGS is a list of flags
    TMPDIR=$scratch UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1} \
        "$bin" -max_total_time="$secs" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
        -dict="$(dict_for "$t")" -artifact_prefix="$artifacts/" ${FUZZ_FLAGS:-} \
        "$corpus" "$here/corpus/$t" >"$log" 2>&1
    rc=$?
    set -e
    execs=$(stat number_of_executed_units "$log")
    if [[ "$execs" == - ]]; then
        # Stopped by a crash before the final stats: the last status line has the count.
        execs=$(awk '/^#[0-9]+/ { n = substr($1, 2) } END { print (n == "") ? "-" : n }' "$log")
    fi
    rate=$(stat average_exec_per_sec "$log")
    added=$(stat new_units_added "$log")
    cov=$(awk '/(DONE|INITED) +cov:/ { for (i = 1; i <= NF; i++) if ($i == "cov:") c = $(i + 1) } END { print (c == "") ? "-" : c }' "$log")
    finding="none"
    if [[ $rc -ne 0 ]]; then
        crashed=1
        # The sanitizer's one-line summary, or our invariant message, names the bug.
        finding=$(grep -m1 -E '^SUMMARY: |invariant .* broken|ERROR: libFuzzer' "$log" || echo "exit $rc")
        art=$(grep -m1 -o 'Test unit written to [^ ]*' "$log" | awk '{ print $NF }' || true)
        if [[ -n "$art" ]]; then
            # Replay the input with full malloc stacks (too slow while fuzzing): jansson and
            # libarchive have no frame pointers, so a leak's fast stack stops inside them.
            TMPDIR=$scratch ASAN_OPTIONS=fast_unwind_on_malloc=0 "$bin" "$art" >"$log.replay" 2>&1 || true
            where=$(grep -m1 -oE ' in [A-Za-z_0-9]+ [^ ]*/(base|os|model|gates|artifact|identity|store|control|gateways|runner|http|api|daemon)/[^ ]*' "$log.replay" || true)
            finding="$finding; at${where# in}; input: $art"
        fi
    fi
    rows+=("$(printf '%-13s %12s %9s %7s %6s  %s' "$t" "$execs" "$rate" "$added" "$cov" "$finding")")
done

echo
echo "modelgate fuzzing: ${secs}s per target, $(nproc) CPUs, $("$(command -v "${CC:-clang}")" --version | head -n1)"
printf '%-13s %12s %9s %7s %6s  %s\n' target execs "execs/s" "new" "cov" finding
printf '%s\n' "${rows[@]}"
exit $crashed
