#!/usr/bin/env bash
# The README's test command: installs dependencies, then runs the whole suite twice, on the
# normal build and on the ASan/UBSan build. Exits non-zero if either fails.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

# A failing build stops the script (set -e); say which step it was, since the compiler
# output above it can be long.
stage="installing dependencies"
report_stage() {
    local rc=$?
    if [[ $rc -ne 0 && -n "$stage" ]]; then
        echo "test.sh: FAILED while $stage" >&2
    fi
}
trap report_stage EXIT

# Each step's wall time, printed in the summary (M25: the whole run stays inside 35 minutes;
# this says where the time goes).
step_name="installing dependencies"
step_start=$SECONDS
step_times=()
step() {
    step_times+=("$(printf '%-36s %5d s' "$step_name" $((SECONDS - step_start)))")
    step_name=$1
    step_start=$SECONDS
    echo "=== $1 ==="
}

scripts/install-deps.sh
# Every dependency is installed now: a test that would skip for want of one (the Chromium
# UI suite) fails instead, so nothing drops out of CI unnoticed.
export MG_REQUIRE_ALL=1

step "formatting (clang-format, .clang-format)"
format_rc=0
git ls-files -z '*.c' '*.h' | xargs -0 clang-format --dry-run -Werror || format_rc=$?

# Tests run two at a time (CTEST_PARALLEL_LEVEL overrides): every daemon binds port 0 and
# reports its port, the other servers a test starts take a port held by a lock file
# (it_free_port), every test has its own temp directories, and the programs that restart
# a shared server are RUN_SERIAL (tests/CMakeLists.txt).
export CTEST_PARALLEL_LEVEL=${CTEST_PARALLEL_LEVEL:-2}
# One ctest run per build; remember the outcome instead of stopping at the first failure so
# the summary always tells whether the sanitizer build would also have failed.
normal_rc=0
sanitize_rc=0

step "normal build"
stage="building (normal)"
scripts/build.sh normal
stage=""
step "normal tests"
(cd build && ctest --output-on-failure) || normal_rc=$?

step "sanitizer build"
stage="building (sanitize)"
scripts/build.sh sanitize
stage=""
step "sanitizer tests"
# MG_SANITIZE=1 tells the tests they run instrumented code: slower, and with ASan's own
# memory overhead, so time and memory limits must be read accordingly.
(cd build-asan && MG_SANITIZE=1 ctest --output-on-failure) || sanitize_rc=$?

step "Release builds (gcc, clang): what a packager builds, warnings as errors"
# Optimised builds see warnings (maybe-uninitialized, clang's own) that the two builds
# above do not; they are built, not run again.
stage="building (Release, gcc)"
scripts/build.sh release-gcc
stage="building (Release, clang)"
scripts/build.sh release-clang
stage=""

step "fuzzing (libFuzzer, ${FUZZ_SECONDS:-30} s per target)"
# Bounded: each target runs FUZZ_SECONDS (default 30: CI stays well inside its time) from
# its seed corpus; run tests/fuzz/run.sh with a longer time to search deeper.
fuzz_rc=0
tests/fuzz/run.sh "${FUZZ_SECONDS:-30}" || fuzz_rc=$?

verdict() { if [[ $1 -eq 0 ]]; then echo "PASS"; else echo "FAIL (ctest exit $1)"; fi; }
step "summary"
echo "time per step:"
printf '  %s\n' "${step_times[@]}"
printf '  %-36s %5d s\n' "total" "$SECONDS"
echo "normal build:    $(verdict "$normal_rc")"
echo "sanitizer build: $(verdict "$sanitize_rc")"
echo "fuzzing:         $(verdict "$fuzz_rc")"
echo "formatting:      $([[ $format_rc -eq 0 ]] && echo PASS || echo "FAIL (run clang-format -i on the files named above)")"

if [[ $normal_rc -ne 0 || $sanitize_rc -ne 0 || $fuzz_rc -ne 0 || $format_rc -ne 0 ]]; then
    exit 1
fi
echo "all tests passed"
