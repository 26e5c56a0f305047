/*
 * test_errors.c - the CLI's messages and command-line checks (client/errors.c): the
 * "modelgate: " prefix and the usage lines, whole-number parsing with its range, and the
 * model, alias and promotion-id checks that keep bad names out of URL paths.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "capture.h"
#include "client/mgc.h"

static const struct mgc_cmd cmd = {"gates", "MODEL N --alias A", "", NULL, 2, 2, NULL};
static const struct mgc c = {.cmd = &cmd};

static void test_fail_and_usage(void **state)
{
    struct capture cap;
    char *out;
    int rc;

    (void)state;
    capture_begin(&cap, stderr);
    rc = mgc_fail("cannot open '%s': %s", "x", "No such file");
    out = capture_end(&cap);
    assert_int_equal(rc, MGC_ERR);
    assert_string_equal(out, "modelgate: cannot open 'x': No such file\n");
    free(out);

    capture_begin(&cap, stderr);
    rc = mgc_usage(&c, "missing %s", "arguments");
    out = capture_end(&cap);
    assert_int_equal(rc, MGC_USAGE);
    assert_string_equal(out, "modelgate: missing arguments\n"
                             "usage: modelgate gates MODEL N --alias A\n"
                             "(see modelgate gates --help)\n");
    free(out);

    /* no command yet: point at the overview */
    capture_begin(&cap, stderr);
    rc = mgc_usage(NULL, "bad");
    out = capture_end(&cap);
    assert_int_equal(rc, MGC_USAGE);
    assert_string_equal(out, "modelgate: bad\nsee modelgate --help\n");
    free(out);
}

static void test_parse_int(void **state)
{
    static const struct {
        const char *s;
        bool ok;
        int64_t want;
    } cases[] = {
        {"1", true, 1},
        {"10", true, 10},
        {"0", false, 0},
        {"11", false, 0},
        {"-1", false, 0},
        {"abc", false, 0},
        {"5x", false, 0},
        {"", false, 0},
        {" 5", false, 0},
        {"+5", false, 0},
        {"05", false, 0},
        {"5.0", false, 0},
        {"99999999999999999999", false, 0},
        {NULL, false, 0},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct capture cap;
        int64_t v = -42;
        char *err, want[200];
        bool ok;

        capture_begin(&cap, stderr);
        ok = mgc_parse_int(&c, "the version", cases[i].s, 1, 10, &v);
        err = capture_end(&cap);
        assert_int_equal(ok, cases[i].ok);
        if (ok) {
            assert_int_equal(v, cases[i].want);
            assert_string_equal(err, "");
        } else {
            assert_int_equal(v, -42); /* untouched */
            snprintf(want, sizeof(want),
                     "modelgate: the version must be a whole number from 1 to 10, not '%s'\n",
                     cases[i].s ? cases[i].s : "");
            assert_true(strncmp(err, want, strlen(want)) == 0);
            assert_non_null(strstr(err, "usage: modelgate gates"));
        }
        free(err);
    }
}

/* Run one name check with stderr captured; *err receives it (malloc'd). */
static bool check(bool (*fn)(const struct mgc *, const char *), const char *name, char **err)
{
    struct capture cap;
    bool ok;

    capture_begin(&cap, stderr);
    ok = fn(&c, name);
    *err = capture_end(&cap);
    return ok;
}

static void test_model_names(void **state)
{
    static const struct {
        const char *name;
        bool ok;
    } cases[] = {
        {"fraud", true},
        {"0", true},
        {"a.b-c_d9", true},
        {"abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0", true}, /* 63 */
        {"abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz01", false},
        {"", false},
        {"Fraud", false},
        {"-fraud", false},
        {".fraud", false},
        {"fraud/x", false},
        {"fraud x", false},
        {"..", false},
        {"fr%61ud", false},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *err, want[200];

        assert_int_equal(check(mgc_check_model, cases[i].name, &err), cases[i].ok);
        if (cases[i].ok) {
            assert_string_equal(err, "");
        } else {
            snprintf(want, sizeof(want),
                     "modelgate: '%s' is not a model name (^[a-z0-9][a-z0-9._-]{0,62}$)\n",
                     cases[i].name);
            assert_true(strncmp(err, want, strlen(want)) == 0);
        }
        free(err);
    }
}

static void test_alias_names(void **state)
{
    static const struct {
        const char *name;
        bool ok;
    } cases[] = {
        {"production", true},
        {"a", true},
        {"eu-west-2", true},
        {"abcdefghijklmnopqrstuvwxyz012345", true}, /* 32 */
        {"abcdefghijklmnopqrstuvwxyz0123456", false},
        {"", false},
        {"1prod", false},
        {"-prod", false},
        {"prod_1", false},
        {"prod.1", false},
        {"Prod", false},
        {"prod?x=1", false},
    };
    char *err, want[200];

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_int_equal(check(mgc_check_alias, cases[i].name, &err), cases[i].ok);
        if (cases[i].ok) {
            assert_string_equal(err, "");
        } else {
            snprintf(want, sizeof(want),
                     "modelgate: '%s' is not an alias name (^[a-z][a-z0-9-]{0,31}$)\n",
                     cases[i].name);
            assert_true(strncmp(err, want, strlen(want)) == 0);
        }
        free(err);
    }
    /* --alias not given at all */
    assert_false(check(mgc_check_alias, NULL, &err));
    assert_true(strncmp(err, "modelgate: give the alias with --alias NAME\n", 44) == 0);
    free(err);
}

static void test_promotion_ids(void **state)
{
    static const struct {
        const char *id;
        bool ok;
    } cases[] = {
        {"p_01HZX3", true},
        {"A-b_9", true},
        {"0123456789012345678901234567890123456789012345678901234567890123", true}, /* 64 */
        {"01234567890123456789012345678901234567890123456789012345678901234", false},
        {"", false},
        {"../x", false},
        {"p/1", false},
        {"p 1", false},
        {"p.1", false},
        {"p%2e", false},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *err, want[200];

        assert_int_equal(check(mgc_check_promotion_id, cases[i].id, &err), cases[i].ok);
        if (cases[i].ok) {
            assert_string_equal(err, "");
        } else {
            snprintf(want, sizeof(want), "modelgate: '%s' is not a promotion id\n", cases[i].id);
            assert_true(strncmp(err, want, strlen(want)) == 0);
        }
        free(err);
    }
}

static int64_t mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void test_sleep(void **state)
{
    int64_t t0;

    (void)state;
    t0 = mono_ms();
    mgc_sleep_ms(1100); /* seconds and milliseconds both count */
    assert_true(mono_ms() - t0 >= 1100);
    t0 = mono_ms();
    mgc_sleep_ms(0);
    assert_true(mono_ms() - t0 < 100);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fail_and_usage), cmocka_unit_test(test_parse_int),
        cmocka_unit_test(test_model_names),    cmocka_unit_test(test_alias_names),
        cmocka_unit_test(test_promotion_ids),  cmocka_unit_test(test_sleep),
    };

    return cmocka_run_group_tests_name("unit_client_errors", tests, NULL, NULL);
}
