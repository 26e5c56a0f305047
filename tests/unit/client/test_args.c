/*
 * test_args.c - the CLI's option parser (client/args.c): long options with a separate or an
 * "=" value, short options, flags, the common --json and --help, "--" and "-" as
 * positionals, repeated options in order, and every refusal with its usage message.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "capture.h"
#include "client/mgc.h"

static const struct mgc_optdef opts[] = {
    {"output", 'o', true}, {"key", 0, true}, {"wait", 0, false}, {NULL, 0, false}};
static const struct mgc_cmd cmd = {"pull", "MODEL [N] -o DIR", "help text\n", opts, 1, 2, NULL};

#define ARGS_MAX 8

/* Parse a NULL-terminated list; *err gets what went to stderr (malloc'd). */
static int parse(const char *const *list, struct mgc_args *a, char **err)
{
    char *argv[ARGS_MAX + 1];
    struct capture cap;
    int argc = 0, rc;

    while (list[argc] != NULL) {
        assert_true(argc < ARGS_MAX);
        argv[argc] = (char *)list[argc];
        argc++;
    }
    argv[argc] = NULL;
    capture_begin(&cap, stderr);
    rc = mgc_args_parse(&cmd, argc, argv, a);
    *err = capture_end(&cap);
    return rc;
}

static void test_values_and_flags(void **state)
{
    const char *argv[] = {"fraud", "-o", "dir", "--key=k.pem", "--wait", "3", NULL};
    struct mgc_args a;
    char *err;

    (void)state;
    assert_int_equal(parse(argv, &a, &err), MGC_OK);
    assert_string_equal(err, "");
    assert_int_equal(a.npos, 2);
    assert_string_equal(a.pos[0], "fraud");
    assert_string_equal(a.pos[1], "3");
    assert_int_equal(a.ngiven, 3);
    assert_string_equal(mgc_opt(&a, "output"), "dir");
    assert_string_equal(mgc_opt(&a, "key"), "k.pem");
    assert_true(mgc_flag(&a, "wait"));
    assert_string_equal(mgc_opt(&a, "wait"), ""); /* a flag's value */
    assert_false(mgc_flag(&a, "json"));
    assert_false(mgc_flag(&a, "help"));
    assert_null(mgc_opt(&a, "nonesuch"));
    mgc_args_release(&a);
    assert_null(a.pos);
    assert_int_equal(a.npos, 0);
    free(err);
}

static void test_repeated_options_keep_their_order(void **state)
{
    const char *argv[] = {"m", "--key", "a", "--key", "b", "--json", "--key=c", NULL};
    struct mgc_args a;
    char *err;

    (void)state;
    assert_int_equal(parse(argv, &a, &err), MGC_OK);
    assert_string_equal(mgc_opt(&a, "key"), "c"); /* the last one wins */
    assert_string_equal(mgc_opt_nth(&a, "key", 0), "a");
    assert_string_equal(mgc_opt_nth(&a, "key", 1), "b");
    assert_string_equal(mgc_opt_nth(&a, "key", 2), "c");
    assert_null(mgc_opt_nth(&a, "key", 3));
    assert_null(mgc_opt_nth(&a, "output", 0));
    assert_true(mgc_flag(&a, "json"));
    mgc_args_release(&a);
    free(err);
}

static void test_positionals_that_look_like_options(void **state)
{
    static const struct {
        const char *argv[ARGS_MAX];
        const char *pos0, *pos1, *output;
    } cases[] = {
        /* after "--" everything is positional */
        {{"--", "-o", "--wait", NULL}, "-o", "--wait", NULL},
        /* "-" alone is a positional (stdin) */
        {{"-", "x", NULL}, "-", "x", NULL},
        /* an option's value may start with '-' */
        {{"m", "-o", "-dir", NULL}, "m", NULL, "-dir"},
        {{"m", "--output", "--wait", NULL}, "m", NULL, "--wait"},
        /* an empty "=" value is a value */
        {{"m", "--output=", NULL}, "m", NULL, ""},
        {{"m", "--output=a=b", NULL}, "m", NULL, "a=b"},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct mgc_args a;
        char *err;

        assert_int_equal(parse(cases[i].argv, &a, &err), MGC_OK);
        assert_string_equal(err, "");
        assert_int_equal(a.npos, cases[i].pos1 ? 2 : 1);
        assert_string_equal(a.pos[0], cases[i].pos0);
        if (cases[i].pos1)
            assert_string_equal(a.pos[1], cases[i].pos1);
        if (cases[i].output)
            assert_string_equal(mgc_opt(&a, "output"), cases[i].output);
        else
            assert_int_equal(a.ngiven, 0);
        mgc_args_release(&a);
        free(err);
    }
}

static void test_help_skips_the_positional_count(void **state)
{
    static const char *const cases[][ARGS_MAX] = {
        {"--help", NULL},
        {"-h", NULL},
        {"a", "b", "c", "--help", NULL},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct mgc_args a;
        char *err;

        assert_int_equal(parse(cases[i], &a, &err), MGC_OK);
        assert_true(mgc_flag(&a, "help"));
        assert_string_equal(err, "");
        mgc_args_release(&a);
        free(err);
    }
}

static void test_refusals(void **state)
{
    static const struct {
        const char *argv[ARGS_MAX];
        const char *message;
    } cases[] = {
        {{"m", "--bogus", NULL}, "unknown option '--bogus'"},
        {{"m", "--bogus=1", NULL}, "unknown option '--bogus'"},
        {{"m", "--out", "d", NULL}, "unknown option '--out'"}, /* no prefix matching */
        {{"m", "-x", NULL}, "unknown option '-x'"},
        {{"m", "-ox", NULL}, "unknown option '-ox'"}, /* short options take no glued value */
        {{"m", "---output", "d", NULL}, "unknown option '---output'"},
        {{"m", "--wait=yes", NULL}, "option '--wait' takes no value"},
        {{"m", "--json=1", NULL}, "option '--json' takes no value"},
        {{"m", "-o", NULL}, "option '--output' needs a value"},
        {{"m", "--key", NULL}, "option '--key' needs a value"},
        {{NULL}, "missing arguments"},
        {{"--wait", NULL}, "missing arguments"},
        {{"a", "b", "c", NULL}, "too many arguments"},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct mgc_args a;
        char *err, want[256];

        assert_int_equal(parse(cases[i].argv, &a, &err), MGC_USAGE);
        snprintf(want, sizeof(want),
                 "modelgate: %s\nusage: modelgate pull MODEL [N] -o DIR\n"
                 "(see modelgate pull --help)\n",
                 cases[i].message);
        assert_string_equal(err, want);
        mgc_args_release(&a);
        free(err);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values_and_flags),
        cmocka_unit_test(test_repeated_options_keep_their_order),
        cmocka_unit_test(test_positionals_that_look_like_options),
        cmocka_unit_test(test_help_skips_the_positional_count),
        cmocka_unit_test(test_refusals),
    };

    return cmocka_run_group_tests_name("unit_client_args", tests, NULL, NULL);
}
