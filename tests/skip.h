/*
 * skip.h - the one reader of MG_REQUIRE_ALL for the C tests (M29). scripts/test.sh sets
 * MG_REQUIRE_ALL=1 once every dependency is installed: then a test that would skip for
 * want of a tool, a library or a privilege fails instead, so nothing drops out of CI
 * unnoticed. The shell tests read it through tests/skip.sh.
 *
 * A skipped test program exits MG_SKIP_EXIT; ctest registers it as SKIP_RETURN_CODE.
 */
#ifndef MG_TESTS_SKIP_H
#define MG_TESTS_SKIP_H

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define MG_SKIP_EXIT 77

/* Is MG_REQUIRE_ALL=1 (exactly "1"; unset, empty or "0" mean no)? */
static inline bool mg_require_all(void)
{
    const char *v = getenv("MG_REQUIRE_ALL");

    return v != NULL && strcmp(v, "1") == 0;
}

#endif
