/*
 * test_runner.c - the runner's pure pieces (server/runner/runner.c): --smoke-profile
 * parsing (quotes, backslashes, the limits, each refusal's message), nearest-rank
 * percentiles, and removing a test's directory without following links out of it.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "runner/runner_int.h"

#define WORDS_MAX 5

static void test_profile_parse(void **state)
{
    static const struct {
        const char *spec, *name;
        const char *argv[WORDS_MAX + 1]; /* NULL-terminated */
    } cases[] = {
        {"onnx-cpu=python3 /opt/smoke.py {model_dir} {output}",
         "onnx-cpu",
         {"python3", "/opt/smoke.py", "{model_dir}", "{output}", NULL}},
        {"a=sh -c 'echo hi there'", "a", {"sh", "-c", "echo hi there", NULL}},
        {"a=x \"a b\"c", "a", {"x", "a bc", NULL}}, /* quotes join with what touches them */
        {"a=x '' \"\"", "a", {"x", "", "", NULL}},  /* empty quoted words are words */
        {"a=x a\\ b", "a", {"x", "a b", NULL}},     /* a backslash escapes a space */
        {"a=x \\'q\\'", "a", {"x", "'q'", NULL}},   /* and a quote */
        {"a=x \"it's\" '\"'", "a", {"x", "it's", "\"", NULL}},
        {"a=x \"a\\b\"", "a", {"x", "a\\b", NULL}}, /* no escapes inside quotes */
        {"a=  x \t  y  ", "a", {"x", "y", NULL}},
        {"a=x\\", "a", {"x\\", NULL}}, /* a trailing backslash is itself */
        {"a=x=y", "a", {"x=y", NULL}}, /* the first '=' ends the name */
        {"gpu_a100-1=run", "gpu_a100-1", {"run", NULL}},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct runner_profile p;
        struct mg_error err = {0};
        unsigned n = 0;

        if (runner_profile_parse(cases[i].spec, &p, &err) != MG_OK)
            fail_msg("'%s' refused: %s", cases[i].spec, err.message);
        assert_string_equal(p.name, cases[i].name);
        while (cases[i].argv[n] != NULL) {
            assert_true(n < p.argc);
            assert_string_equal(p.argv[n], cases[i].argv[n]);
            n++;
        }
        assert_int_equal(p.argc, n);
        assert_null(p.argv[n]); /* ready for execvp */
        runner_profile_release(&p);
        assert_int_equal(p.argc, 0);
    }
}

static void test_profile_refusals(void **state)
{
    static const struct {
        const char *spec, *message;
    } cases[] = {
        {"python3 smoke.py", "--smoke-profile wants NAME=COMMAND with NAME like onnx-cpu, not "
                             "'python3 smoke.py'"},
        {"=python3", "wants NAME=COMMAND"},
        {"Onnx=python3", "wants NAME=COMMAND"},
        {"on nx=python3", "wants NAME=COMMAND"},
        {"onnx.cpu=python3", "wants NAME=COMMAND"},
        {"-onnx=python3", "wants NAME=COMMAND"},
        {"onnx=", "--smoke-profile onnx: the command is empty, too long or has an unclosed quote"},
        {"onnx=   \t ", "--smoke-profile onnx: the command is empty"},
        {"onnx=sh -c 'echo", "--smoke-profile onnx: the command is empty, too long or has an "
                             "unclosed quote"},
        {"onnx=sh -c \"echo 'x'", "has an unclosed quote"},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct runner_profile p;
        struct mg_error err = {0};

        assert_int_equal(runner_profile_parse(cases[i].spec, &p, &err), MG_EINVAL);
        assert_string_equal(err.field, "smoke-profile");
        if (strstr(err.message, cases[i].message) == NULL)
            fail_msg("'%s': got '%s'", cases[i].spec, err.message);
        assert_int_equal(p.argc, 0); /* nothing left to free */
        assert_null(p.argv[0]);
    }
}

static void test_profile_limits(void **state)
{
    char spec[8192], name[80];
    struct runner_profile p;
    struct mg_error err = {0};
    size_t n;

    (void)state;
    /* 64 words fit, 65 do not */
    n = (size_t)snprintf(spec, sizeof(spec), "p=");
    for (int i = 0; i < RUNNER_ARGV_MAX; i++)
        n += (size_t)snprintf(spec + n, sizeof(spec) - n, "w%d ", i);
    assert_int_equal(runner_profile_parse(spec, &p, &err), MG_OK);
    assert_int_equal(p.argc, RUNNER_ARGV_MAX);
    assert_string_equal(p.argv[63], "w63");
    runner_profile_release(&p);
    snprintf(spec + n, sizeof(spec) - n, "one-more");
    assert_int_equal(runner_profile_parse(spec, &p, &err), MG_EINVAL);
    assert_int_equal(p.argc, 0);
    /* a word of 4096 bytes fits, 4097 does not */
    memcpy(spec, "p=", 2);
    memset(spec + 2, 'x', 4096);
    spec[2 + 4096] = '\0';
    assert_int_equal(runner_profile_parse(spec, &p, &err), MG_OK);
    assert_int_equal(strlen(p.argv[0]), 4096);
    runner_profile_release(&p);
    spec[2 + 4096] = 'x';
    spec[2 + 4097] = '\0';
    assert_int_equal(runner_profile_parse(spec, &p, &err), MG_EINVAL);
    /* a name of 63 characters fits the struct, 64 do not */
    memset(name, 'n', 63);
    snprintf(name + 63, sizeof(name) - 63, "=run");
    assert_int_equal(runner_profile_parse(name, &p, &err), MG_OK);
    assert_int_equal(strlen(p.name), 63);
    runner_profile_release(&p);
    memset(name, 'n', 64);
    snprintf(name + 64, sizeof(name) - 64, "=run");
    assert_int_equal(runner_profile_parse(name, &p, &err), MG_EINVAL);
}

static void test_percentile(void **state)
{
    static const struct {
        size_t n;
        double p, want;
    } cases[] = {
        {10, 50, 5},
        {10, 90, 9},
        {10, 95, 10},
        {10, 99, 10},
        {10, 100, 10},
        {10, 10, 1},
        {10, 11, 2},
        {10, 1, 1},
        {10, 0.001, 1},
        {1, 50, 1},
        {1, 100, 1},
        {2, 50, 1},
        {2, 51, 2},
        {100, 95, 95},
        {100, 50, 50},
        /* p / 100 * n would be 7.000000000000001 here, and rank 8 */
        {100, 7, 7},
        {100, 14, 14},
        {100, 28, 28},
        {1000, 99.9, 999},
        {0, 50, 0}, /* no samples */
    };
    double v[1000];

    (void)state;
    for (size_t i = 0; i < 1000; i++)
        v[i] = (double)(i + 1);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        double got = runner_percentile(v, cases[i].n, cases[i].p);

        if (got != cases[i].want)
            fail_msg("p%g of %zu: %g, expected %g", cases[i].p, cases[i].n, got, cases[i].want);
    }
}

static void test_rm_tree_stays_inside(void **state)
{
    char root[64], path[256], outside[128];
    struct stat st;
    int fd;

    (void)state;
    snprintf(root, sizeof(root), "/tmp/mg-runner-rm-XXXXXX");
    assert_non_null(mkdtemp(root));
    snprintf(outside, sizeof(outside), "%s-outside", root);
    assert_int_equal(mkdir(outside, 0700), 0);
    snprintf(path, sizeof(path), "%s/keep", outside);
    fd = open(path, O_WRONLY | O_CREAT, 0600);
    assert_true(fd >= 0);
    close(fd);
    /* the test's directory: nested files (one read-only), and links out of it */
    snprintf(path, sizeof(path), "%s/a", root);
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(path, sizeof(path), "%s/a/b", root);
    assert_int_equal(mkdir(path, 0700), 0);
    snprintf(path, sizeof(path), "%s/a/b/ro", root);
    fd = open(path, O_WRONLY | O_CREAT, 0400);
    assert_true(fd >= 0);
    close(fd);
    snprintf(path, sizeof(path), "%s/a/dirlink", root);
    assert_int_equal(symlink(outside, path), 0);
    snprintf(path, sizeof(path), "%s/filelink", root);
    snprintf(outside + strlen(outside), sizeof(outside) - strlen(outside), "/keep");
    assert_int_equal(symlink(outside, path), 0);
    runner_rm_tree(root);
    assert_int_equal(stat(root, &st), -1);
    /* what the links pointed at is still there */
    assert_int_equal(stat(outside, &st), 0);
    unlink(outside);
    *strrchr(outside, '/') = '\0';
    assert_int_equal(rmdir(outside), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_profile_parse),        cmocka_unit_test(test_profile_refusals),
        cmocka_unit_test(test_profile_limits),       cmocka_unit_test(test_percentile),
        cmocka_unit_test(test_rm_tree_stays_inside),
    };

    return cmocka_run_group_tests_name("unit_runner", tests, NULL, NULL);
}
