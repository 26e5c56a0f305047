/*
 * test_release_restart.c - milestone M3 over HTTP: a rollout survives a
 * graceful restart. The server is stopped (SIGTERM) right after the first
 * step of a timed rollout and started again on the same data directory; the
 * promotion resumes from where it was and succeeds, each step taken once.
 * Policies, protection, approvals-in-waiting and LKG survive as well, and
 * the audit chain verifies across the restarts.
 */
#include "harness.h"
#include "sys.h"
#include "api.h"
#include "release_common.h"

#include <string.h>

/* How many history entries of the alias hold exactly these routes. */
static int history_count(const char *model, const char *alias, size_t n, const json_int_t *pairs)
{
    char path[200];
    struct it_resp *r = it_get(
        cx.s, it_fmt(path, sizeof(path), "/api/v1/models/%s/aliases/%s/history", model, alias),
        cx.t.rd);
    json_t *e;
    size_t i;
    int k = 0;

    it_expect_status(cx.s, r, 200);
    json_array_foreach(it_jarr(r->json, "items"), i, e)
    {
        if (rel_routes_match(json_object_get(e, "routes"), n, pairs))
            k++;
    }
    it_resp_free(cx.s, &r);
    return k;
}

static void test_rollout_resumes_after_restart(void **state)
{
    struct mg_server *s = *state;
    char id[64];
    struct it_resp *p;
    json_int_t v1, v2;
    const char *st;

    it_model_create(cx.s, cx.t.pub, "resume");
    v1 = it_version_create(cx.s, cx.t.pub, "resume", cx.art, rel_metrics(0.9, -1));
    v2 = it_version_create(cx.s, cx.t.pub, "resume", cx.art, rel_metrics(0.91, -1));
    it_alias_to(cx.s, cx.t.dep, "resume", "production", v1, 0);
    it_policy_put(cx.s, "resume", "production",
                  "{\"thresholds\":[{\"metric\":\"auc\",\"op\":\">=\",\"baseline\":true,"
                  "\"max_regression\":0.005}],"
                  "\"rollout\":{\"steps\":[10,50,100],\"bake_seconds\":3}}");

    p = it_promote(cx.s, cx.t.dep, "resume", v2, "production", id);
    rel_expect_state(p, "rolling_out");
    assert_int_equal(it_jint(it_jobj(p->json, "rollout"), "weight"), 10);
    rel_expect_alias_routes(&cx, "resume", "production", 2, v1, 90, v2, 10);
    it_release(s);

    /* Stop right after the first step, start again on the same data. */
    it_server_restart(s);

    p = it_promotion_get(cx.s, cx.t.rd, id);
    st = rel_state(p);
    if (strcmp(st, "rolling_out") != 0 && strcmp(st, "succeeded") != 0)
        fail_msg("after the restart the promotion is %s, want rolling_out: %s", st, p->body);
    assert_true(it_jint(it_jobj(p->json, "rollout"), "step_index") <= 2);
    {
        struct it_resp *a = it_alias_get(cx.s, cx.t.rd, "resume", "production");

        assert_true(json_is_true(json_object_get(a->json, "protected")));
        if (strcmp(st, "rolling_out") == 0)
            assert_string_equal(it_jstr(a->json, "promotion"), id);
    }

    /* It resumes by itself and finishes. */
    p = it_promotion_wait(cx.s, cx.t.rd, id, "succeeded", 30000);
    assert_int_equal(it_jint(it_jobj(p->json, "rollout"), "weight"), 100);
    rel_expect_alias_routes(&cx, "resume", "production", 1, v2, 100);
    assert_int_equal(rel_lkg(&cx, "resume", "production"), v2);

    /* Each step exactly once: the restart neither repeated nor skipped one. */
    {
        const json_int_t s10[] = {v1, 90, v2, 10}, s50[] = {v1, 50, v2, 50}, s100[] = {v2, 100};

        assert_int_equal(history_count("resume", "production", 2, s10), 1);
        assert_int_equal(history_count("resume", "production", 2, s50), 1);
        assert_int_equal(history_count("resume", "production", 1, s100), 1);
    }
    {
        json_t *e;
        size_t i;
        int steps = 0, succ = 0;

        json_array_foreach(it_jarr(p->json, "events"), i, e)
        {
            const char *type = it_jstr(e, "type");

            if (strcmp(type, "step") == 0)
                steps++;
            if (strcmp(type, "succeeded") == 0)
                succ++;
        }
        if (steps != 2 || succ != 1)
            fail_msg("events should hold 2 steps and 1 success, got %d and %d: %s", steps, succ,
                     p->body);
    }
}

static void test_waiting_promotion_survives_restart(void **state)
{
    struct mg_server *s = *state;
    char id[64];
    struct it_resp *p, *r, *pol_before, *pol_after;
    json_int_t v1, v2;

    it_model_create(cx.s, cx.t.pub, "wait");
    v1 = it_version_create(cx.s, cx.t.pub, "wait", cx.art, rel_metrics(0.9, -1));
    v2 = it_version_create(cx.s, cx.t.pub, "wait", cx.art, rel_metrics(0.9, -1));
    it_alias_to(cx.s, cx.t.dep, "wait", "production", v1, 0);
    it_policy_put(cx.s, "wait", "production",
                  "{\"approvals\":{\"required\":2},\"rollout\":{\"steps\":[100]}}");
    p = it_promote(cx.s, cx.t.dep, "wait", v2, "production", id);
    rel_expect_state(p, "awaiting_approval");
    r = rel_decide(&cx, cx.t.rev_a, id, "approve", "one");
    it_expect_status(s, r, 200);
    pol_before = it_get(s, "/api/v1/models/wait/policies/production", cx.t.rd);
    it_expect_status(s, pol_before, 200);

    it_server_restart(s);

    pol_after = it_get(s, "/api/v1/models/wait/policies/production", cx.t.rd);
    it_expect_status(s, pol_after, 200);
    if (!json_equal(pol_before->json, pol_after->json))
        fail_msg("the policy changed across the restart:\nbefore: %s\nafter: %s", pol_before->body,
                 pol_after->body);
    r = it_jreq(s, "PUT", "/api/v1/models/wait/aliases/production", cx.t.dep, "{\"version\":2}");
    it_expect_error(s, r, 409, "alias_protected");
    p = it_promotion_get(cx.s, cx.t.rd, id);
    rel_expect_state(p, "awaiting_approval");
    assert_int_equal(json_array_size(it_jarr(p->json, "approvals")), 1);
    r = rel_decide(&cx, cx.t.rev_a, id, "approve", "again");
    it_expect_error(s, r, 409, "conflict");
    r = it_promotion_post(cx.s, cx.t.dep, "wait", v2, "production");
    it_expect_error(s, r, 409, "promotion_in_progress");
    r = rel_decide(&cx, cx.t.rev_b, id, "approve", "two");
    it_expect_status(s, r, 200);
    rel_expect_state(r, "succeeded");
    rel_expect_alias_routes(&cx, "wait", "production", 1, v2, 100);
    assert_int_equal(rel_lkg(&cx, "wait", "production"), v2);
}

static void test_audit_verifies_after_restarts(void **state)
{
    struct mg_server *s = *state;

    rel_expect_audit_ok(s);
    it_server_restart(s);
    rel_expect_audit_ok(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_rollout_resumes_after_restart, it_test_teardown),
        cmocka_unit_test_teardown(test_waiting_promotion_survives_restart, it_test_teardown),
        cmocka_unit_test_teardown(test_audit_verifies_after_restarts, it_test_teardown),
    };

    return it_main_result(cmocka_run_group_tests_name("integration_release_restart", tests,
                                                      rel_group_setup, rel_group_teardown));
}
