# skip.sh - sourced by the shell tests (M29): the one reader of MG_REQUIRE_ALL there, the
# counterpart of tests/skip.h. mg_skip REASON skips the test (exit 77, ctest's
# SKIP_RETURN_CODE, so ctest lists it as skipped), or fails it under MG_REQUIRE_ALL=1
# (scripts/test.sh: every dependency is installed, so nothing may drop out unnoticed).

mg_require_all() { [ "${MG_REQUIRE_ALL:-0}" = 1 ]; }

mg_skip() {
    if mg_require_all; then
        echo "FAIL: $*, and MG_REQUIRE_ALL=1 forbids skipping" >&2
        exit 1
    fi
    echo "SKIP: $*" >&2
    exit 77
}
