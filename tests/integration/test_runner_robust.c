/*
 * test_runner_robust.c - the smoke-test runner under adverse conditions,
 * each test on a server of its own (shell-script profiles in a scratch
 * directory, no NVML):
 *
 * - the command starts with descriptors 0-2 only: nothing modelgated holds
 *   or itself inherited (a log file, sockets, the database);
 * - a command that leaves a FIFO as $MODELGATE_OUTPUT does not hang the
 *   worker that reads it;
 * - SIGTERM while a test runs: the server kills the test's process group,
 *   exits promptly (not after --smoke-timeout) and does not record the
 *   interrupted test as failed; it is queued again at the next start;
 * - kill -9 while a test runs: on restart the same test runs again, and
 *   nothing of the crashed server's process group is left running;
 * - --smoke-interval re-tests routed versions.
 */
#include "harness.h"
#include "sys.h"
#include "api.h"
#include "runner_common.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static struct mg_server *srv; /* this test's server */
static char dir[IT_PATH_MAX]; /* scripts */
static char hang_mark[64];    /* the marker of hang.sh's two processes */

/* Makes its output a FIFO nobody writes to. */
static const char FIFO_SH[] = "mkfifo \"$MODELGATE_OUTPUT\"\n"
                              "echo 'made a fifo'\n";

/* Passes at once. */
static const char PASS_SH[] =
    "printf '%s' '{\"latencies_ms\":[1],\"checks\":[{\"name\":\"ok\",\"passed\":true}]}' "
    "> \"$MODELGATE_OUTPUT\"\n";

/* Start this test's server. profiles: names of DIR/<name>.sh scripts, or
 * whole --smoke-profile=... arguments. */
static void start_srv(int timeout_s, int interval_s, const char *const *profiles)
{
    char args[8][IT_PATH_MAX + 128];
    const char *argv[9];
    size_t n = 0;

    for (size_t i = 0; profiles[i] && n < 4; i++, n++) {
        if (strncmp(profiles[i], "--", 2) == 0)
            it_fmt(args[n], sizeof(args[n]), "%s", profiles[i]);
        else
            rc_profile_arg(args[n], sizeof(args[n]), dir, profiles[i], "");
    }
    it_fmt(args[n++], sizeof(args[0]), "--nvml-library=%s/absent/libnvidia-ml.so.1", dir);
    it_fmt(args[n++], sizeof(args[0]), "--smoke-timeout=%d", timeout_s);
    it_fmt(args[n++], sizeof(args[0]), "--smoke-interval=%d", interval_s);
    for (size_t i = 0; i < n; i++)
        argv[i] = args[i];
    argv[n] = NULL;
    srv = it_server_start(argv);
}

/* Open every FIFO a test left as the server's output for writing and close it, so
 * a server thread blocked reading one gets EOF and can stop. */
static void unblock_fifos(struct mg_server *s)
{
    char runner[IT_PATH_MAX];
    struct dirent *e;
    DIR *d;

    it_data_path(s, "runner", runner);
    if ((d = opendir(runner)) == NULL)
        return;
    while ((e = readdir(d)) != NULL) {
        char path[IT_PATH_MAX * 2];
        struct stat st;
        int fd;

        snprintf(path, sizeof(path), "%s/%s/output.json", runner, e->d_name);
        if (e->d_name[0] == '.' || lstat(path, &st) != 0 || !S_ISFIFO(st.st_mode))
            continue;
        if ((fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC)) >= 0)
            close(fd);
    }
    closedir(d);
}

static int setup(void **state)
{
    (void)state;
    it_mkdtemp(dir, "runner-robust");
    rc_write_script(dir, "pass.sh", PASS_SH, NULL);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    it_rmtree(dir);
    return 0;
}

/* Whatever a test left: its processes, a blocked worker, its server. */
static int test_teardown(void **state)
{
    (void)state;
    it_kill_procs(hang_mark);
    if (srv != NULL) {
        unblock_fifos(srv);
        it_server_stop(srv);
        it_server_free(&srv);
    }
    return 0;
}

/* The descriptors a command starts with: 0 from /dev/null, 1 and 2 the
 * output pipe, and nothing of the server's (database, sockets, logs). */
static void test_fds_not_inherited(void **state)
{
    struct mg_server *s;
    char art[IT_DIGEST_LEN + 1], id[64], bad[2048] = "";
    size_t nbad = 0, k = 0, seen_fds = 0;
    const char *tail, *line;
    json_t *t;

    (void)state;
    /* No shell: ls lists the descriptors it was started with. */
    start_srv(10, 0, (const char *const[]){"--smoke-profile=fds=/bin/ls -l /proc/self/fd", NULL});
    s = srv;
    it_upload(s, "descriptor model", 16, art);
    it_model_create(s, s->admin_token, "fds");
    it_version_create(s, s->admin_token, "fds", art, rc_smoke_spec("fds", 0, 0, NULL));
    rc_smoke_post(s, s->admin_token, "fds", 1, NULL, id);
    t = rc_smoke_wait(s, "fds", 1, id, 15000);
    /* ls writes no output file: failed, but the listing is in the tail. */
    assert_string_equal(it_jstr(t, "state"), "failed");
    rc_expect_contains(rc_reason(t), "no output file");
    tail = it_jstr(t, "log_tail");
    for (line = tail; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        const char *arrow = strstr(line, " -> "), *eol = strchr(line, '\n');
        const char *num;
        int fd;

        if (arrow == NULL || (eol && arrow > eol))
            continue;
        for (num = arrow; num > line && num[-1] != ' '; num--)
            ;
        fd = atoi(num);
        seen_fds++;
        if ((fd == 0 && strncmp(arrow + 4, "/dev/null", 9) == 0) ||
            ((fd == 1 || fd == 2) && strncmp(arrow + 4, "pipe:", 5) == 0) ||
            strncmp(arrow + 4, "/proc/", 6) == 0) /* ls's own directory handle */
            continue;
        nbad++;
        k += (size_t)snprintf(bad + k, k < sizeof(bad) ? sizeof(bad) - k : 0, " [%.*s]",
                              (int)(eol ? eol - num : (long)strlen(num)), num);
    }
    if (seen_fds < 3)
        fail_msg("no descriptor listing in the log tail: %s", tail);
    if (nbad > 0)
        fail_msg("the smoke command inherited %zu descriptor(s) beyond 0-2:%s", nbad, bad);
}

/* A command that leaves a FIFO as its output must not hang a worker. */
static void test_output_fifo(void **state)
{
    char art[IT_DIGEST_LEN + 1], id[64];
    int64_t deadline;
    json_t *t;

    (void)state;
    rc_write_script(dir, "fifo.sh", FIFO_SH, NULL);
    start_srv(5, 0, (const char *const[]){"fifo", NULL});
    it_upload(srv, "fifo model", 10, art);
    it_model_create(srv, srv->admin_token, "fifo");
    it_version_create(srv, srv->admin_token, "fifo", art, rc_smoke_spec("fifo", 0, 0, NULL));
    rc_smoke_post(srv, srv->admin_token, "fifo", 1, NULL, id);
    deadline = it_deadline(10000);
    for (;;) {
        struct it_resp *r = rc_smoke_list(srv, "fifo", 1);

        t = rc_smoke_find(r->json, id);
        if (t != NULL && rc_smoke_final(it_jstr(t, "state")))
            break;
        if (it_now_ms() > deadline)
            fail_msg("the test is still '%s' 10 s after its command exited: a FIFO as "
                     "$MODELGATE_OUTPUT blocks the runner's worker in reading it",
                     it_jstr(t, "state"));
        it_resp_free(srv, &r);
        it_pause_ms(50);
    }
    assert_string_equal(it_jstr(t, "state"), "failed");
    rc_expect_contains(it_jstr(t, "log_tail"), "made a fifo");
}

/* SIGTERM while a test runs: the server kills the test's process group and
 * exits promptly instead of waiting out the smoke timeout (60 s here). */
static void test_shutdown_while_running(void **state)
{
    char art[IT_DIGEST_LEN + 1], id[64];
    struct it_resp *r;
    json_t *t;
    int64_t t0, waited;
    int status = 0;
    bool exited = false;
    pid_t pid;

    (void)state;
    it_marker(hang_mark, sizeof(hang_mark), "mg-hang");
    rc_write_script(dir, "hang.sh", RC_HANG_SH, hang_mark);
    start_srv(60, 0, (const char *const[]){"hang", NULL});
    it_upload(srv, "hanging model", 13, art);
    it_model_create(srv, srv->admin_token, "hang");
    it_version_create(srv, srv->admin_token, "hang", art, rc_smoke_spec("hang", 0, 0, NULL));
    rc_smoke_post(srv, srv->admin_token, "hang", 1, NULL, id);
    rc_smoke_wait_state(srv, "hang", 1, "running", 10000);
    it_wait_procs(hang_mark, 2);

    pid = srv->pid;
    t0 = it_now_ms();
    if (kill(pid, SIGTERM) != 0)
        fail_msg("kill: %s", strerror(errno));
    while (it_now_ms() - t0 < 10000) {
        if (waitpid(pid, &status, WNOHANG) == pid) {
            exited = true;
            break;
        }
        it_pause_ms(20);
    }
    waited = it_now_ms() - t0;
    if (!exited) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    }
    srv->pid = 0;
    if (!exited) {
        it_server_dump_log(srv, 2000);
        fail_msg("modelgated did not exit within %lld ms of SIGTERM while a smoke test ran "
                 "(the runner waits for the command, up to --smoke-timeout)",
                 (long long)waited);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail_msg("modelgated exited with status 0x%x after SIGTERM", status);
    it_expect_no_procs(hang_mark, 3000);

    /* Shutdown is not a verdict on the version: the test was not recorded
     * as failed (which would roll back a rolling-out candidate); it is
     * queued again at the next start. */
    it_server_restart(srv);
    r = rc_smoke_list(srv, "hang", 1);
    assert_int_equal(json_array_size(it_jarr(r->json, "items")), 1);
    t = rc_smoke_find(r->json, id);
    assert_non_null(t);
    if (rc_smoke_final(it_jstr(t, "state")))
        fail_msg("shutdown recorded the interrupted test as %s: %s", it_jstr(t, "state"),
                 json_string_value(json_object_get(t, "reason")));
}

/* kill -9 while a test runs: on restart the test is queued again and runs
 * once more, and nothing of the crashed server's command is left running
 * (it would otherwise run with no timeout at all). */
static void test_crash_requeues(void **state)
{
    char art[IT_DIGEST_LEN + 1], id[64];
    pid_t before[8], after[8];
    size_t n_before, n_after;
    int64_t deadline;
    struct it_resp *r;
    json_t *t;
    int status;

    (void)state;
    it_marker(hang_mark, sizeof(hang_mark), "mg-hang");
    rc_write_script(dir, "hang.sh", RC_HANG_SH, hang_mark);
    start_srv(2, 0, (const char *const[]){"hang", NULL});
    it_upload(srv, "hanging model", 13, art);
    it_model_create(srv, srv->admin_token, "hang");
    it_version_create(srv, srv->admin_token, "hang", art, rc_smoke_spec("hang", 0, 0, NULL));
    rc_smoke_post(srv, srv->admin_token, "hang", 1, NULL, id);
    rc_smoke_wait_state(srv, "hang", 1, "running", 10000);
    it_wait_procs(hang_mark, 2);
    n_before = it_procs_with_arg(hang_mark, before, 8);

    kill(srv->pid, SIGKILL);
    waitpid(srv->pid, &status, 0);
    srv->pid = 0;
    it_server_restart(srv);

    /* The same test ran again (and timed out again): one test, not two. */
    t = rc_smoke_wait(srv, "hang", 1, id, 20000);
    assert_string_equal(it_jstr(t, "state"), "failed");
    rc_expect_contains(rc_reason(t), "timed out");
    r = rc_smoke_list(srv, "hang", 1);
    assert_int_equal(json_array_size(it_jarr(r->json, "items")), 1);

    /* Neither run's processes remain. */
    deadline = it_deadline(3000);
    while ((n_after = it_procs_with_arg(hang_mark, after, 8)) > 0 && it_now_ms() < deadline)
        it_pause_ms(20);
    if (n_after > 0) {
        bool from_crash = false;
        for (size_t i = 0; i < n_after && i < 8; i++)
            for (size_t j = 0; j < n_before && j < 8; j++)
                from_crash = from_crash || after[i] == before[j];
        fail_msg("%zu process(es) of the smoke command still run after the restart (pid %d)%s",
                 n_after, (int)after[0],
                 from_crash ? ": the crashed server's process group was never killed" : "");
    }
}

/* --smoke-interval: routed versions are tested again on their own. */
static void test_periodic_retest(void **state)
{
    char art[IT_DIGEST_LEN + 1];
    int64_t deadline;

    (void)state;
    start_srv(10, 1, (const char *const[]){"pass", NULL});
    it_upload(srv, "periodic model", 14, art);
    it_model_create(srv, srv->admin_token, "periodic");
    it_version_create(srv, srv->admin_token, "periodic", art, rc_smoke_spec("pass", 0, 0, NULL));
    it_alias_to(srv, srv->admin_token, "periodic", "production", 1, 10);
    deadline = it_deadline(10000);
    for (;;) {
        struct it_resp *r = rc_smoke_list(srv, "periodic", 1);
        json_t *t;
        size_t i, periodic = 0, route = 0;

        json_array_foreach(it_jarr(r->json, "items"), i, t)
        {
            periodic += strcmp(it_jstr(t, "trigger"), "periodic") == 0 &&
                        strcmp(it_jstr(t, "state"), "passed") == 0;
            route += strcmp(it_jstr(t, "trigger"), "route") == 0;
        }
        if (periodic >= 2 && route == 1)
            break;
        if (it_now_ms() > deadline)
            fail_msg("want a route test and two passed periodic ones: %s", r->body);
        it_resp_free(srv, &r);
        it_pause_ms(50);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_fds_not_inherited, test_teardown),
        cmocka_unit_test_teardown(test_periodic_retest, test_teardown),
        cmocka_unit_test_teardown(test_output_fifo, test_teardown),
        cmocka_unit_test_teardown(test_shutdown_while_running, test_teardown),
        cmocka_unit_test_teardown(test_crash_requeues, test_teardown),
    };

    return it_main_result(cmocka_run_group_tests(tests, setup, teardown));
}
