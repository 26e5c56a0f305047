/*
 * test_runner.c - the runner's free-space rule (runner_space_check), with
 * injected free-space figures: an extraction that would not fit is refused
 * before anything is written, with a message naming the sizes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../../../../server/runner/runner.h"

#define MIB ((uint64_t)1 << 20)

static void test_fits_with_margin(void **state)
{
    struct mg_error err;

    (void)state;
    memset(&err, 0, sizeof(err));
    /* 100 MiB needs 100 + 1 + 4 MiB free. */
    assert_int_equal(runner_space_check("/w", 100 * MIB, 105 * MIB, &err), MG_OK);
    assert_int_equal(runner_space_check("/w", 0, 4 * MIB, &err), MG_OK);
}

static void test_refused_without_the_margin(void **state)
{
    struct mg_error err;

    (void)state;
    memset(&err, 0, sizeof(err));
    assert_int_equal(runner_space_check("/w", 100 * MIB, 105 * MIB - 1, &err), MG_ENOSPC);
    assert_non_null(strstr(err.message, "not enough disk space"));
    assert_non_null(strstr(err.message, "104857600 bytes"));
    assert_non_null(strstr(err.message, "/w"));
    memset(&err, 0, sizeof(err));
    assert_int_equal(runner_space_check("/w", (uint64_t)1 << 40, 500 * MIB, &err), MG_ENOSPC);
}

static void test_huge_need_does_not_overflow(void **state)
{
    struct mg_error err;

    (void)state;
    memset(&err, 0, sizeof(err));
    assert_int_equal(runner_space_check("/w", UINT64_MAX, UINT64_MAX - 1, &err), MG_ENOSPC);
    memset(&err, 0, sizeof(err));
    assert_int_equal(runner_space_check("/w", UINT64_MAX - 1, UINT64_MAX - 2, &err), MG_ENOSPC);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fits_with_margin),
        cmocka_unit_test(test_refused_without_the_margin),
        cmocka_unit_test(test_huge_need_does_not_overflow),
    };

    return cmocka_run_group_tests_name("unit_runner", tests, NULL, NULL);
}
