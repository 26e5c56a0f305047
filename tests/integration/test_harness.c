/*
 * test_harness.c - a test of the harness itself (M29): a daemon that exits non-zero at
 * shutdown, hangs at shutdown, leaks under LeakSanitizer, logs a token it issued or logs an
 * internal error nobody expected fails the program that started it, although every cmocka
 * test of that program passed and the failure happens in the group teardown (which cmocka
 * 1.1.5 reports and then exits 0 on).
 *
 * The program runs itself as the probe (--probe MODE): a one-test cmocka program on
 * it_group_setup / it_group_teardown, exactly like the suite's programs, whose
 * MODELGATED is tests/fakes/misbehaving_modelgated.sh, a wrapper around the real daemon
 * that misbehaves at SIGTERM in one way. Each test checks the probe's exit status and the reason it
 * printed. A plain wrapper passes: the probe is not failing for some other reason.
 */
#include "harness.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sys.h"
#include "tests/skip.h"

static char dir[IT_PATH_MAX];
static char script[IT_PATH_MAX];

static int setup(void **state)
{
    const char *src = getenv("MG_SOURCE_DIR");

    (void)state;
    if (src == NULL)
        fail_msg("MG_SOURCE_DIR is not set: run under ctest");
    it_mkdtemp(dir, "harness-self");
    it_fmt(script, sizeof(script), "%s/tests/fakes/misbehaving_modelgated.sh", src);
    if (access(script, X_OK) != 0)
        fail_msg("%s: %s", script, strerror(errno));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    it_rmtree(dir);
    return 0;
}

/* Run the probe with the wrapper in `mode`; its exit status, its output in *out (malloc'd). */
static int run_probe(const char *probe, const char *mode, const char *require_all, char **out)
{
    char log[IT_PATH_MAX];
    const char *real = getenv("MODELGATED");
    int status;
    pid_t pid;

    if (real == NULL)
        fail_msg("MODELGATED is not set: run under ctest");
    it_fmt(log, sizeof(log), "%s/probe-%s.log", dir, mode);
    pid = fork();
    if (pid < 0)
        fail_msg("fork: %s", strerror(errno));
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);

        if (fd < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
            _exit(126);
        setenv("MG_WRAP_REAL", real, 1);
        setenv("MG_WRAP_MODE", mode, 1);
        setenv("MODELGATED", script, 1);
        setenv("MG_IT_STOP_MS", "1500", 1); /* the hanging daemon: a short deadline */
        if (strcmp(probe, "--probe-leak") == 0)
            setenv("FAKE_NVML_LEAK", "1", 1); /* the daemon's NVML leaks a block */
        if (require_all != NULL)
            setenv("MG_REQUIRE_ALL", require_all, 1);
        else
            unsetenv("MG_REQUIRE_ALL");
        execl("/proc/self/exe", "test_harness", probe, (char *)NULL);
        _exit(127);
    }
    if (waitpid(pid, &status, 0) != pid)
        fail_msg("waitpid: %s", strerror(errno));
    *out = it_read_file(log, NULL);
    if (*out == NULL)
        *out = strdup("");
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* The probe in `mode` must exit `want`, and its output name `reason`. */
static void expect_probe(const char *probe, const char *mode, const char *require_all, int want,
                         const char *reason)
{
    char *out = NULL;
    int got = run_probe(probe, mode, require_all, &out);

    if (got != want || (reason != NULL && strstr(out, reason) == NULL)) {
        print_error("---- probe %s (%s) output ----\n%s\n---- end ----\n", probe, mode, out);
        free(out);
        fail_msg("probe %s with a daemon that does '%s' at shutdown exited %d, want %d%s%s", probe,
                 mode, got, want, reason ? " naming: " : "", reason ? reason : "");
    }
    free(out);
}

static void test_a_well_behaved_daemon_passes(void **state)
{
    (void)state;
    expect_probe("--probe", "plain", NULL, 0, NULL);
}

static void test_exit_1_after_sigterm_fails(void **state)
{
    (void)state;
    expect_probe("--probe", "exit1", NULL, 1, "exited with status 1 after SIGTERM");
}

static void test_a_hang_at_shutdown_fails(void **state)
{
    (void)state;
    expect_probe("--probe", "hang", NULL, 1, "did not exit within its shutdown deadline");
}

static void test_a_leak_report_fails(void **state)
{
    (void)state;
    expect_probe("--probe", "leak", NULL, 1, "sanitizer report");
}

static void test_a_token_in_the_log_fails(void **state)
{
    (void)state;
    expect_probe("--probe", "token", NULL, 1, "holds the admin token");
}

static void test_an_unexpected_internal_error_fails(void **state)
{
    (void)state;
    expect_probe("--probe", "error", NULL, 1, "unexpected internal error");
}

/* A real leak, not a report written by the wrapper: the daemon loads the fake NVML with
 * FAKE_NVML_LEAK=1, and LeakSanitizer (the sanitizer build) makes its exit fail. */
static void test_a_real_leak_under_lsan_fails(void **state)
{
    (void)state;
    if (!it_sanitized())
        it_not_applicable("LeakSanitizer runs in the sanitizer build (MG_SANITIZE=1)");
    expect_probe("--probe-nvml", "plain", NULL, 0, NULL);
    expect_probe("--probe-leak", "plain", NULL, 1, "after SIGTERM");
}

/* A main that forgets it_main_result(): the atexit net still fails it. */
static void test_a_main_without_the_verdict_still_fails(void **state)
{
    (void)state;
    expect_probe("--probe-raw", "exit1", NULL, 1, "exited with status 1 after SIGTERM");
    expect_probe("--probe-raw", "plain", NULL, 0, NULL);
}

/* A server freed inside a test (it_server_free, not a teardown) is stopped and checked. */
static void test_a_server_freed_in_a_test_is_checked(void **state)
{
    (void)state;
    expect_probe("--probe-free", "exit1", NULL, 1, "exited with status 1 after SIGTERM");
    expect_probe("--probe-free", "plain", NULL, 0, NULL);
}

/* it_skip: exit 77 (ctest's SKIP_RETURN_CODE); under MG_REQUIRE_ALL=1 a failure. */
static void test_skips_exit_77_or_fail_under_require_all(void **state)
{
    (void)state;
    expect_probe("--probe-skip", "plain", NULL, MG_SKIP_EXIT, "skipped");
    expect_probe("--probe-skip", "plain", "0", MG_SKIP_EXIT, "skipped");
    expect_probe("--probe-skip", "plain", "1", 1, "MG_REQUIRE_ALL=1 forbids skipping");
}

/* ---- the probe ---------------------------------------------------------------- */

static void probe_test(void **state)
{
    struct mg_server *s = *state;
    struct it_resp *r = it_get(s, "/api/v1/whoami", s->admin_token);

    it_expect_status(s, r, 200);
}

static void probe_free_test(void **state)
{
    struct mg_server *s = it_server_start(NULL);

    (void)state;
    it_expect_status(s, it_get(s, "/api/v1/whoami", s->admin_token), 200);
    it_server_free(&s);
}

static void probe_skip_test(void **state)
{
    (void)state;
    it_skip("a probe that skips");
}

/* The probes whose daemon loads the fake NVML (FAKE_NVML_LEAK=1 for --probe-leak). */
static int nvml_setup(void **state)
{
    char arg[IT_PATH_MAX + 32];
    const char *lib = getenv("MG_FAKE_NVML");

    if (lib == NULL)
        fail_msg("MG_FAKE_NVML is not set: run under ctest");
    it_fmt(arg, sizeof(arg), "--nvml-library=%s", lib);
    *state = it_server_start((const char *const[]){arg, NULL});
    return 0;
}

static int probe(const char *mode)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test_teardown(probe_test, it_test_teardown)};
    const struct CMUnitTest free_tests[] = {cmocka_unit_test(probe_free_test)};
    const struct CMUnitTest skip_tests[] = {cmocka_unit_test(probe_skip_test)};

    if (strcmp(mode, "--probe") == 0)
        return it_main_result(cmocka_run_group_tests(tests, it_group_setup, it_group_teardown));
    if (strcmp(mode, "--probe-nvml") == 0 || strcmp(mode, "--probe-leak") == 0)
        return it_main_result(cmocka_run_group_tests(tests, nvml_setup, it_group_teardown));
    if (strcmp(mode, "--probe-raw") == 0)
        return cmocka_run_group_tests(tests, it_group_setup, it_group_teardown);
    if (strcmp(mode, "--probe-free") == 0)
        return it_main_result(cmocka_run_group_tests(free_tests, NULL, NULL));
    if (strcmp(mode, "--probe-skip") == 0)
        return it_main_result(cmocka_run_group_tests(skip_tests, NULL, NULL));
    fprintf(stderr, "test_harness: unknown probe %s\n", mode);
    return 2;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_well_behaved_daemon_passes),
        cmocka_unit_test(test_exit_1_after_sigterm_fails),
        cmocka_unit_test(test_a_hang_at_shutdown_fails),
        cmocka_unit_test(test_a_leak_report_fails),
        cmocka_unit_test(test_a_token_in_the_log_fails),
        cmocka_unit_test(test_an_unexpected_internal_error_fails),
        cmocka_unit_test(test_a_real_leak_under_lsan_fails),
        cmocka_unit_test(test_a_main_without_the_verdict_still_fails),
        cmocka_unit_test(test_a_server_freed_in_a_test_is_checked),
        cmocka_unit_test(test_skips_exit_77_or_fail_under_require_all),
    };

    if (argc > 1)
        return probe(argv[1]);
    return it_main_result(cmocka_run_group_tests(tests, setup, teardown));
}
