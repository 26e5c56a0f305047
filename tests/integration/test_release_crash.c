/*
 * test_release_crash.c - M15 defect: a promotion's smoke test was queued after the
 * promotion's transaction committed, its error discarded; a crash between the two left a
 * candidate whose smoke gate waited for a test nobody ran. Now the test is queued in the
 * promotion's own transaction. The server is made to die (MODELGATED_TEST_CRASH_AT) right
 * after that commit; after a restart the candidate is tested and the promotion goes on.
 */
#include "harness.h"
#include "sys.h"
#include "api.h"
#include "runner_common.h"

#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[IT_PATH_MAX];

static const char PASS_SH[] =
    "printf '%s' '{\"latencies_ms\":[1],\"checks\":[{\"name\":\"ok\",\"passed\":true}]}' "
    "> \"$MODELGATE_OUTPUT\"\n";

static void test_smoke_survives_a_crash_after_the_commit(void **state)
{
    char profile[IT_PATH_MAX + 128], art[IT_DIGEST_LEN + 1];
    struct mg_server *s;
    struct it_resp *r;
    json_t *list, *t;
    json_int_t v;
    bool found;
    size_t i;
    const char *id;

    (void)state;
    it_mkdtemp(dir, "release-crash");
    rc_write_script(dir, "pass.sh", PASS_SH, NULL);
    rc_profile_arg(profile, sizeof(profile), dir, "pass", "");
    setenv("MODELGATED_TEST_CRASH_AT", "promotion-created", 1);
    s = it_server_start((const char *const[]){profile, "--smoke-interval", "0", NULL});
    unsetenv("MODELGATED_TEST_CRASH_AT");
    r = it_upload(s, "crash candidate", 15, art);
    it_resp_free(s, &r);
    it_model_create(s, s->admin_token, "fraud");
    v = it_version_create(s, s->admin_token, "fraud", art, rc_smoke_spec("pass", 0, 0, NULL));
    it_policy_put(s, "fraud", "production",
                  "{\"smoke\":{\"required\":true,\"gpu\":\"none\"},\"rollout\":{\"steps\":[100],"
                  "\"bake_seconds\":0,\"auto_advance\":true}}");

    /* the server dies right after the promotion commits: no reply comes (a raw socket: the
     * harness's client takes a lost connection for a failure) */
    {
        char req[1024], body[160], buf[256];
        int fd = it_connect(s->port);
        ssize_t got;

        snprintf(body, sizeof(body),
                 "{\"model\":\"fraud\",\"version\":%lld,\"alias\":\"production\"}", (long long)v);
        snprintf(req, sizeof(req),
                 "POST /api/v1/promotions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
                 "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                 s->admin_token, strlen(body), body);
        assert_int_equal(send(fd, req, strlen(req), MSG_NOSIGNAL), (ssize_t)strlen(req));
        got = recv(fd, buf, sizeof(buf), 0); /* blocks until the process is gone */
        assert_true(got <= 0);
        close(fd);
    }
    {
        int status = 0;

        waitpid(s->pid, &status, 0);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 86);
        s->pid = 0;
    }

    /* after a restart the candidate is tested, and the promotion finishes */
    it_server_restart(s);
    r = it_get(s, "/api/v1/promotions?model=fraud", s->admin_token);
    it_expect_status(s, r, 200);
    list = it_jarr(r->json, "items");
    assert_int_equal(json_array_size(list), 1);
    id = it_jstr(json_array_get(list, 0), "id");
    {
        char pid[32];
        struct it_resp *done;

        snprintf(pid, sizeof(pid), "%s", id);
        it_resp_free(s, &r);
        /* the promotion succeeds only once its candidate's smoke test passed */
        done = it_promotion_wait(s, s->admin_token, pid, "succeeded", 30000);
        it_resp_free(s, &done);
        r = rc_smoke_list(s, "fraud", v);
        found = false;
        json_array_foreach(it_jarr(r->json, "items"), i, t)
        {
            const char *trig = json_string_value(json_object_get(t, "trigger"));

            if (trig && strcmp(trig, "promotion") == 0 &&
                strcmp(it_jstr(t, "state"), "passed") == 0)
                found = true;
        }
        if (!found)
            fail_msg("no passed promotion-triggered smoke test: %s", r->body);
        it_resp_free(s, &r);
    }
    it_server_free(&s);
    it_rmtree(dir);
}

/* M15 defect: approvals and events were read with "while (step == ROW)" and no error, so a
 * failing read gave a promotion with its approvals silently missing. The read is made to
 * fail (the table renamed away under a stopped server): the answer is an error. */
static void test_a_failing_approvals_read_is_an_error(void **state)
{
    struct mg_server *s = it_server_start(NULL);
    char art[IT_DIGEST_LEN + 1], path[128], id[64];
    struct it_resp *r;
    json_int_t v;

    (void)state;
    r = it_upload(s, "approvals read", 14, art);
    it_resp_free(s, &r);
    it_model_create(s, s->admin_token, "fraud");
    v = it_version_create(s, s->admin_token, "fraud", art, rc_smoke_spec(NULL, 0, 0, NULL));
    it_policy_put(s, "fraud", "production", "{\"approvals\":{\"required\":2}}");
    r = it_promote(s, s->admin_token, "fraud", v, "production", id);
    it_resp_free(s, &r);
    snprintf(path, sizeof(path), "/api/v1/promotions/%s", id);
    r = it_get(s, path, s->admin_token);
    it_expect_status(s, r, 200);
    it_resp_free(s, &r);
    it_server_stop(s);
    it_sql_exec(s, "ALTER TABLE promotion_approvals RENAME TO promotion_approvals_gone");
    it_server_restart(s);
    r = it_get(s, path, s->admin_token);
    it_expect_error(s, r, 500, "internal");
    it_resp_free(s, &r);
    r = it_get(s, "/api/v1/promotions?model=fraud", s->admin_token);
    it_expect_error(s, r, 500, "internal");
    it_resp_free(s, &r);
    it_server_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_smoke_survives_a_crash_after_the_commit),
        cmocka_unit_test(test_a_failing_approvals_read_is_an_error),
    };

    return it_main_result(cmocka_run_group_tests(tests, NULL, NULL));
}
