/*
 * test_release_gates.c - milestone M3 over HTTP: gates and approvals of a
 * promotion. Absolute thresholds that fail (rejected at once, the failing
 * gate named with observed and expected), thresholds relative to the
 * baseline (max_regression and max_regression_pct, passing and failing, and
 * "no baseline"), separation of duties (403 self_approval for the version's
 * author and the promotion's creator), deciding twice (409), a rejection
 * without a comment (400), one rejection rejects, and a second promotion on
 * a busy alias (409 promotion_in_progress, also when two race).
 */
#include "harness.h"
#include "sys.h"
#include "api.h"
#include "release_common.h"

#include <math.h>
#include <string.h>

/* A promotion that fails a gate must leave the alias as it was. */
static void expect_alias_untouched(const char *model, const char *alias, json_int_t v)
{
    struct it_resp *r = it_alias_get(cx.s, cx.t.rd, model, alias);

    rel_expect_routes(&cx, r, it_jarr(r->json, "routes"), 1, v, 100);
    assert_true(json_is_null(json_object_get(r->json, "promotion")));
    it_resp_free(cx.s, &r);
}

static void test_absolute_threshold_failure(void **state)
{
    struct mg_server *s = *state;
    char id[64], id2[64];
    struct it_resp *p, *r;
    json_t *gates, *g;
    json_int_t v1, v2;

    it_model_create(cx.s, cx.t.pub, "absm");
    v1 = it_version_create(cx.s, cx.t.pub, "absm", cx.art, rel_metrics(0.95, 40));
    v2 = it_version_create(cx.s, cx.t.pub, "absm", cx.art, rel_metrics(0.995, 60));
    it_alias_to(cx.s, cx.t.dep, "absm", "production", v1, 0);
    it_policy_put(cx.s, "absm", "production",
                  "{\"thresholds\":[{\"metric\":\"auc\",\"op\":\">=\",\"value\":0.99},"
                  "{\"metric\":\"p95_latency_ms\",\"op\":\"<=\",\"value\":50}],"
                  "\"approvals\":{\"required\":1},"
                  "\"rollout\":{\"steps\":[10,100],\"bake_seconds\":600}}");

    /* v2: auc passes, latency fails. Rejected at creation: 201 all the same. */
    p = it_promote(cx.s, cx.t.dep, "absm", v2, "production", id);
    rel_expect_state(p, "rejected");
    gates = it_jarr(p->json, "gates");
    rel_expect_gate(gates, "threshold", "auc", "passed");
    rel_expect_gate(gates, "threshold", "p95_latency_ms", "failed");
    assert_true(fabs(rel_gate_observed(gates, "threshold", "p95_latency_ms") - 60) < 1e-9);
    if (!rel_gate_expects(gates, "threshold", "p95_latency_ms", 50))
        fail_msg("the failed gate should say it expected <= 50: %s", p->body);
    assert_true(json_array_size(it_jarr(p->json, "events")) >= 1);
    expect_alias_untouched("absm", "production", v1);

    /* v1 against auc >= 0.99 fails too; observed 0.95, expected 0.99. */
    it_policy_put(cx.s, "absm", "staging",
                  "{\"thresholds\":[{\"metric\":\"auc\",\"op\":\">=\",\"value\":0.99}]}");
    p = it_promote(cx.s, cx.t.dep, "absm", v1, "staging", id2);
    rel_expect_state(p, "rejected");
    gates = it_jarr(p->json, "gates");
    rel_expect_gate(gates, "threshold", "auc", "failed");
    g = it_gate_find(gates, "threshold", "auc");
    assert_true(fabs(rel_gate_observed(gates, "threshold", "auc") - 0.95) < 1e-9);
    if (!rel_gate_expects(gates, "threshold", "auc", 0.99))
        fail_msg("the failed gate should say it expected >= 0.99: %s", p->body);
    assert_non_null(g);
    /* Nothing was routed: the alias does not exist. */
    r = it_get(s, "/api/v1/models/absm/aliases/staging/last-known-good", cx.t.rd);
    it_expect_error(s, r, 404, "no_known_good");

    /* Rejected is final: no approvals, no advance, no abort. */
    r = rel_decide(&cx, cx.t.rev_a, id, "approve", "too late");
    it_expect_error(s, r, 409, "conflict");
    {
        char path[160];

        r = it_jreq(s, "POST", it_fmt(path, sizeof(path), "/api/v1/promotions/%s/advance", id),
                    cx.t.dep, "{}");
        it_expect_status(s, r, 409);
        r = it_jreq(s, "POST", it_fmt(path, sizeof(path), "/api/v1/promotions/%s/abort", id),
                    cx.t.dep, "{\"reason\":\"x\"}");
        it_expect_status(s, r, 409);
    }

    /* A rejected promotion does not block the alias. */
    it_policy_put(cx.s, "absm", "production",
                  "{\"thresholds\":[{\"metric\":\"auc\",\"op\":\">=\",\"value\":0.99}],"
                  "\"rollout\":{\"steps\":[100]}}");
    p = it_promote(cx.s, cx.t.dep, "absm", v2, "production", id);
    rel_expect_state(p, "succeeded");
    rel_expect_alias_routes(&cx, "absm", "production", 1, v2, 100);

    /* A candidate without the metric fails the gate. */
    {
        json_int_t v3 = it_version_create(cx.s, cx.t.pub, "absm", cx.art, rel_metrics(-1, 30));

        p = it_promote(cx.s, cx.t.dep, "absm", v3, "production", id);
        rel_expect_state(p, "rejected");
        rel_expect_gate(it_jarr(p->json, "gates"), "threshold", "auc", "failed");
        rel_expect_alias_routes(&cx, "absm", "production", 1, v2, 100);
    }
}

static void test_relative_max_regression(void **state)
{
    struct mg_server *s = *state;
    char id[64];
    struct it_resp *p;
    json_t *gates;
    json_int_t v1, v2, v3;

    it_model_create(cx.s, cx.t.pub, "relm");
    v1 = it_version_create(cx.s, cx.t.pub, "relm", cx.art, rel_metrics(0.92, -1));
    v2 = it_version_create(cx.s, cx.t.pub, "relm", cx.art,
                           rel_metrics(0.90, -1)); /* 0.90 < 0.92 - 0.005 */
    v3 = it_version_create(cx.s, cx.t.pub, "relm", cx.art,
                           rel_metrics(0.916, -1)); /* 0.916 >= 0.915 */
    it_alias_to(cx.s, cx.t.dep, "relm", "production", v1, 0);
    it_policy_put(cx.s, "relm", "production",
                  "{\"thresholds\":[{\"metric\":\"auc\",\"op\":\">=\",\"baseline\":true,"
                  "\"max_regression\":0.005}],\"rollout\":{\"steps\":[100]}}");

    p = it_promote(cx.s, cx.t.dep, "relm", v2, "production", id);
    rel_expect_state(p, "rejected");
    assert_int_equal(it_jint(p->json, "baseline_version"), v1);
    gates = it_jarr(p->json, "gates");
    rel_expect_gate(gates, "threshold", "auc", "failed");
    assert_true(fabs(rel_gate_observed(gates, "threshold", "auc") - 0.90) < 1e-9);
    if (!rel_gate_expects(gates, "threshold", "auc", 0.915))
        fail_msg("the gate should expect >= 0.915 (0.92 - 0.005): %s", p->body);
    expect_alias_untouched("relm", "production", v1);

    /* Within the allowed regression: passes, and with no approvals or steps it is done. */
    p = it_promote(cx.s, cx.t.dep, "relm", v3, "production", id);
    rel_expect_state(p, "succeeded");
    assert_int_equal(it_jint(p->json, "baseline_version"), v1);
    rel_expect_gate(it_jarr(p->json, "gates"), "threshold", "auc", "passed");
    rel_expect_alias_routes(&cx, "relm", "production", 1, v3, 100);
    assert_int_equal(rel_lkg(&cx, "relm", "production"), v3);

    /* The dry run of v2 now compares with v3 (0.916 - 0.005 = 0.911): still failing. */
    p = it_get(s, "/api/v1/models/relm/versions/2/gates?alias=production", cx.t.rd);
    it_expect_status(s, p, 200);
    rel_expect_gate(it_jarr(p->json, "gates"), "threshold", "auc", "failed");
    if (!rel_gate_expects(it_jarr(p->json, "gates"), "threshold", "auc", 0.911))
        fail_msg("the dry run should use the new baseline v3 (expect >= 0.911): %s", p->body);
}

static void test_relative_max_regression_pct(void **state)
{
    char id[64];
    struct it_resp *p;
    json_t *gates;
    json_int_t v1, v_bad, v_ok;

    (void)state;
    it_model_create(cx.s, cx.t.pub, "pctm");
    v1 = it_version_create(cx.s, cx.t.pub, "pctm", cx.art, rel_metrics(0.9, 40));
    v_bad = it_version_create(cx.s, cx.t.pub, "pctm", cx.art,
                              rel_metrics(0.9, 45)); /* > 40 * 1.10 = 44 */
    v_ok = it_version_create(cx.s, cx.t.pub, "pctm", cx.art, rel_metrics(0.9, 43.5)); /* <= 44 */
    it_alias_to(cx.s, cx.t.dep, "pctm", "production", v1, 0);
    it_policy_put(cx.s, "pctm", "production",
                  "{\"thresholds\":[{\"metric\":\"p95_latency_ms\",\"op\":\"<=\","
                  "\"baseline\":true,\"max_regression_pct\":10}],"
                  "\"rollout\":{\"steps\":[100]}}");

    p = it_promote(cx.s, cx.t.dep, "pctm", v_bad, "production", id);
    rel_expect_state(p, "rejected");
    gates = it_jarr(p->json, "gates");
    rel_expect_gate(gates, "threshold", "p95_latency_ms", "failed");
    assert_true(fabs(rel_gate_observed(gates, "threshold", "p95_latency_ms") - 45) < 1e-9);
    if (!rel_gate_expects(gates, "threshold", "p95_latency_ms", 44))
        fail_msg("the gate should expect <= 44 (40 + 10%%): %s", p->body);
    expect_alias_untouched("pctm", "production", v1);

    p = it_promote(cx.s, cx.t.dep, "pctm", v_ok, "production", id);
    rel_expect_state(p, "succeeded");
    rel_expect_gate(it_jarr(p->json, "gates"), "threshold", "p95_latency_ms", "passed");
    assert_true(fabs(rel_gate_observed(it_jarr(p->json, "gates"), "threshold", "p95_latency_ms") -
                     43.5) < 1e-9);
    rel_expect_alias_routes(&cx, "pctm", "production", 1, v_ok, 100);

    /* ">=" with a percentage: candidate >= baseline * (1 - pct/100). */
    {
        json_int_t w1, w_bad, w_ok;

        it_model_create(cx.s, cx.t.pub, "pctge");
        w1 = it_version_create(cx.s, cx.t.pub, "pctge", cx.art, rel_metrics(0.80, -1));
        w_bad = it_version_create(cx.s, cx.t.pub, "pctge", cx.art,
                                  rel_metrics(0.75, -1)); /* < 0.80 * 0.95 = 0.76 */
        w_ok = it_version_create(cx.s, cx.t.pub, "pctge", cx.art, rel_metrics(0.77, -1));
        it_alias_to(cx.s, cx.t.dep, "pctge", "production", w1, 0);
        it_policy_put(cx.s, "pctge", "production",
                      "{\"thresholds\":[{\"metric\":\"auc\",\"op\":\">=\",\"baseline\":true,"
                      "\"max_regression_pct\":5}],\"rollout\":{\"steps\":[100]}}");
        p = it_promote(cx.s, cx.t.dep, "pctge", w_bad, "production", id);
        rel_expect_state(p, "rejected");
        rel_expect_gate(it_jarr(p->json, "gates"), "threshold", "auc", "failed");
        p = it_promote(cx.s, cx.t.dep, "pctge", w_ok, "production", id);
        rel_expect_state(p, "succeeded");
        rel_expect_gate(it_jarr(p->json, "gates"), "threshold", "auc", "passed");
    }
}

static void test_relative_without_baseline(void **state)
{
    char id[64];
    struct it_resp *p;
    json_t *g;
    json_int_t v1, v2;

    (void)state;
    it_model_create(cx.s, cx.t.pub, "nobase");
    v1 = it_version_create(cx.s, cx.t.pub, "nobase", cx.art, rel_metrics(0.5, -1));
    v2 = it_version_create(cx.s, cx.t.pub, "nobase", cx.art,
                           rel_metrics(0.9, -1)); /* has auc; the baseline will not */
    it_policy_put(cx.s, "nobase", "production",
                  "{\"thresholds\":[{\"metric\":\"auc\",\"op\":\">=\",\"baseline\":true,"
                  "\"max_regression\":0}],\"rollout\":{\"steps\":[100]}}");

    /* No LKG: the relative gate passes with detail "no baseline". */
    p = it_promote(cx.s, cx.t.dep, "nobase", v1, "production", id);
    rel_expect_state(p, "succeeded");
    assert_true(json_is_null(json_object_get(p->json, "baseline_version")));
    rel_expect_gate(it_jarr(p->json, "gates"), "threshold", "auc", "passed");
    g = it_gate_find(it_jarr(p->json, "gates"), "threshold", "auc");
    if (!json_is_string(json_object_get(g, "detail")) ||
        strstr(json_string_value(json_object_get(g, "detail")), "no baseline") == NULL)
        fail_msg("a relative gate without a baseline should say \"no baseline\": %s", p->body);

    /* Baseline v1 has auc 0.5; v2 has 0.9: passes against it. */
    p = it_promote(cx.s, cx.t.dep, "nobase", v2, "production", id);
    rel_expect_state(p, "succeeded");
    assert_int_equal(it_jint(p->json, "baseline_version"), v1);
}

static void test_separation_of_duties(void **state)
{
    struct mg_server *s = *state;
    char id[64];
    struct it_resp *p, *r;
    json_t *appr, *a;
    json_int_t v1, v2;
    size_t i;

    it_model_create(cx.s, cx.t.pubrev, "sod");
    v1 = it_version_create(cx.s, cx.t.pubrev, "sod", cx.art, rel_metrics(0.9, -1));
    v2 = it_version_create(cx.s, cx.t.pubrev, "sod", cx.art, rel_metrics(0.9, -1));
    it_alias_to(cx.s, cx.t.dep, "sod", "production", v1, 0);
    it_policy_put(cx.s, "sod", "production",
                  "{\"approvals\":{\"required\":2},"
                  "\"rollout\":{\"steps\":[10,100],\"bake_seconds\":600}}");

    p = it_promotion_post(cx.s, cx.t.deprev, "sod", v2, "production");
    it_expect_status(s, p, 201);
    rel_expect_state(p, "awaiting_approval");
    snprintf(id, sizeof(id), "%s", it_jstr(p->json, "id"));
    assert_string_equal(it_jstr(p->json, "created_by"), "deprev");

    /* The version's author and the promotion's creator cannot decide. */
    r = rel_decide(&cx, cx.t.pubrev, id, "approve", "my own work");
    it_expect_error(s, r, 403, "self_approval");
    r = rel_decide(&cx, cx.t.deprev, id, "approve", "my own promotion");
    it_expect_error(s, r, 403, "self_approval");
    r = rel_decide(&cx, cx.t.pubrev, id, "reject", "even rejecting");
    it_expect_error(s, r, 403, "self_approval");
    r = it_promotion_get(cx.s, cx.t.rd, id);
    rel_expect_state(r, "awaiting_approval");
    assert_int_equal(json_array_size(it_jarr(r->json, "approvals")), 0);

    /* A bad decision and a rejection without a comment: 400, nothing recorded. */
    r = rel_decide(&cx, cx.t.rev_b, id, "maybe", "hmm");
    it_expect_error_field(s, r, 400, "invalid_argument", "decision");
    r = rel_decide(&cx, cx.t.rev_b, id, "reject", NULL);
    it_expect_error(s, r, 400, "invalid_argument");
    r = rel_decide(&cx, cx.t.rev_b, id, "reject", "");
    it_expect_error(s, r, 400, "invalid_argument");

    /* Reviewer A approves once; a second decision by A is 409 either way. */
    r = rel_decide(&cx, cx.t.rev_a, id, "approve", NULL);
    it_expect_status(s, r, 200);
    rel_expect_state(r, "awaiting_approval");
    r = rel_decide(&cx, cx.t.rev_a, id, "approve", "again");
    it_expect_error(s, r, 409, "conflict");
    r = rel_decide(&cx, cx.t.rev_a, id, "reject", "changed my mind");
    it_expect_error(s, r, 409, "conflict");
    r = it_promotion_get(cx.s, cx.t.rd, id);
    assert_int_equal(json_array_size(it_jarr(r->json, "approvals")), 1);

    /* One rejection rejects, even with an approval on record. */
    r = rel_decide(&cx, cx.t.rev_b, id, "reject", "latency regressed on the canary");
    it_expect_status(s, r, 200);
    rel_expect_state(r, "rejected");
    appr = it_jarr(r->json, "approvals");
    assert_int_equal(json_array_size(appr), 2);
    json_array_foreach(appr, i, a)
    {
        const char *by = it_jstr(a, "by");

        it_expect_rfc3339(it_jstr(a, "at"));
        if (strcmp(by, "rev-b") == 0) {
            assert_string_equal(it_jstr(a, "decision"), "reject");
            assert_string_equal(it_jstr(a, "comment"), "latency regressed on the canary");
        } else {
            assert_string_equal(by, "rev-a");
            assert_string_equal(it_jstr(a, "decision"), "approve");
        }
    }
    rel_expect_gate(it_jarr(r->json, "gates"), "approval", NULL, "failed");
    expect_alias_untouched("sod", "production", v1);

    /* Decisions on a decided promotion: 409. */
    r = rel_decide(&cx, cx.t.rev_c, id, "approve", "late");
    it_expect_error(s, r, 409, "conflict");

    /* Unknown promotion: 404. */
    r = rel_decide(&cx, cx.t.rev_c, "prm_0000000000000000", "approve", "?");
    it_expect_error(s, r, 404, "not_found");
}

static void test_self_approval_by_publisher_of_version(void **state)
{
    struct mg_server *s = *state;
    char id[64];
    struct it_resp *r;
    json_int_t v1, v2;

    /* The same with the plain deployer as creator: only the author is refused. */
    it_model_create(cx.s, cx.t.pub, "sod2");
    v1 = it_version_create(cx.s, cx.t.pub, "sod2", cx.art, rel_metrics(0.9, -1));
    v2 = it_version_create(cx.s, cx.t.pubrev, "sod2", cx.art, rel_metrics(0.9, -1));
    it_alias_to(cx.s, cx.t.dep, "sod2", "production", v1, 0);
    it_policy_put(cx.s, "sod2", "production",
                  "{\"approvals\":{\"required\":1},"
                  "\"rollout\":{\"steps\":[100]}}");
    r = it_promote(cx.s, cx.t.dep, "sod2", v2, "production", id);
    rel_expect_state(r, "awaiting_approval");
    r = rel_decide(&cx, cx.t.pubrev, id, "approve", "mine");
    it_expect_error(s, r, 403, "self_approval");
    /* The admin is a reviewer too, but authored neither. */
    r = rel_decide(&cx, s->admin_token, id, "approve", "admin says yes");
    it_expect_status(s, r, 200);
    rel_expect_state(r, "succeeded");
    rel_expect_alias_routes(&cx, "sod2", "production", 1, v2, 100);
}

static void test_promotion_in_progress(void **state)
{
    struct mg_server *s = *state;
    char id[64], path[160];
    struct it_resp *p, *r;
    json_int_t v1, v2, v3;

    it_model_create(cx.s, cx.t.pub, "busy");
    v1 = it_version_create(cx.s, cx.t.pub, "busy", cx.art, rel_metrics(0.9, -1));
    v2 = it_version_create(cx.s, cx.t.pub, "busy", cx.art, rel_metrics(0.9, -1));
    v3 = it_version_create(cx.s, cx.t.pub, "busy", cx.art, rel_metrics(0.9, -1));
    it_alias_to(cx.s, cx.t.dep, "busy", "production", v1, 0);
    it_policy_put(cx.s, "busy", "production",
                  "{\"approvals\":{\"required\":1},"
                  "\"rollout\":{\"steps\":[10,100],\"bake_seconds\":600}}");

    /* Awaiting approval blocks the alias. */
    p = it_promote(cx.s, cx.t.dep, "busy", v2, "production", id);
    rel_expect_state(p, "awaiting_approval");
    r = it_promotion_post(cx.s, cx.t.dep, "busy", v3, "production");
    it_expect_error(s, r, 409, "promotion_in_progress");
    r = it_promotion_post(cx.s, cx.t.dep, "busy", v2, "production");
    it_expect_error(s, r, 409, "promotion_in_progress");

    /* So does rolling out. */
    r = rel_decide(&cx, cx.t.rev_a, id, "approve", "ok");
    it_expect_status(s, r, 200);
    rel_expect_state(r, "rolling_out");
    r = it_promotion_post(cx.s, cx.t.dep, "busy", v3, "production");
    it_expect_error(s, r, 409, "promotion_in_progress");
    r = it_get(s, "/api/v1/promotions?model=busy", cx.t.rd);
    it_expect_status(s, r, 200);
    assert_int_equal(json_array_size(it_jarr(r->json, "items")), 1);

    /* Another alias of the same model is independent. */
    p = it_promotion_post(cx.s, cx.t.dep, "busy", v3, "staging");
    it_expect_status(s, p, 201);
    rel_expect_state(p, "succeeded");

    /* Once it is over, the alias is free again. */
    r = it_jreq(s, "POST", it_fmt(path, sizeof(path), "/api/v1/promotions/%s/abort", id), cx.t.dep,
                "{\"reason\":\"make room\"}");
    it_expect_status(s, r, 200);
    rel_expect_state(r, "aborted");
    p = it_promote(cx.s, cx.t.dep, "busy", v3, "production", id);
    rel_expect_state(p, "awaiting_approval");
}

static void test_concurrent_promotions_one_wins(void **state)
{
    enum { N = 6 };
    struct mg_server *s = *state;
    struct it_spec specs[N];
    struct it_resp *out[N], *r;
    char bodies[N][160];
    int created = 0, busy = 0;

    it_model_create(cx.s, cx.t.pub, "race");
    it_version_create(cx.s, cx.t.pub, "race", cx.art, rel_metrics(0.9, -1));
    for (int i = 0; i < N; i++)
        it_version_create(cx.s, cx.t.pub, "race", cx.art, rel_metrics(0.9, -1));
    it_alias_to(cx.s, cx.t.dep, "race", "production", 1, 0);
    it_policy_put(cx.s, "race", "production",
                  "{\"approvals\":{\"required\":1},\"rollout\":{\"steps\":[100]}}");
    for (int i = 0; i < N; i++) {
        snprintf(bodies[i], sizeof(bodies[i]),
                 "{\"model\":\"race\",\"version\":%d,\"alias\":\"production\"}", i + 2);
        specs[i] = (struct it_spec){"POST",    "/api/v1/promotions", cx.t.dep, "application/json",
                                    bodies[i], strlen(bodies[i])};
    }
    it_request_parallel(s, N, specs, out);
    for (int i = 0; i < N; i++) {
        if (out[i]->status == 201) {
            created++;
            rel_expect_state(out[i], "awaiting_approval");
        } else {
            it_expect_error(s, out[i], 409, "promotion_in_progress");
            busy++;
        }
    }
    if (created != 1)
        fail_msg("%d of %d concurrent promotions on one alias were created, want exactly 1",
                 created, N);
    assert_int_equal(busy, N - 1);
    r = it_get(s, "/api/v1/promotions?model=race&alias=production", cx.t.rd);
    it_expect_status(s, r, 200);
    assert_int_equal(json_array_size(it_jarr(r->json, "items")), 1);
}

static void test_audit_verifies(void **state)
{
    rel_expect_audit_ok(*state);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_absolute_threshold_failure, it_test_teardown),
        cmocka_unit_test_teardown(test_relative_max_regression, it_test_teardown),
        cmocka_unit_test_teardown(test_relative_max_regression_pct, it_test_teardown),
        cmocka_unit_test_teardown(test_relative_without_baseline, it_test_teardown),
        cmocka_unit_test_teardown(test_separation_of_duties, it_test_teardown),
        cmocka_unit_test_teardown(test_self_approval_by_publisher_of_version, it_test_teardown),
        cmocka_unit_test_teardown(test_promotion_in_progress, it_test_teardown),
        cmocka_unit_test_teardown(test_concurrent_promotions_one_wins, it_test_teardown),
        cmocka_unit_test_teardown(test_audit_verifies, it_test_teardown),
    };

    return it_main_result(cmocka_run_group_tests_name("integration_release_gates", tests,
                                                      rel_group_setup, rel_group_teardown));
}
