/*
 * test_release_happy.c - milestone M3 over HTTP: the full promotion happy
 * path (direct set while unprotected, policy, alias_protected, gates with
 * observed/expected against the baseline, two approvals, a timed rollout
 * 10 → 50 → 100, LKG, events, history), a promotion to an alias without a
 * policy, LKG of a fresh alias, the gates dry run, policy validation and
 * canonical form, DELETE policy, the roles of every release endpoint, and
 * an audit chain that verifies at the end.
 */
#include "harness.h"
#include "sys.h"
#include "api.h"
#include "release_common.h"

#include <math.h>
#include <string.h>

#define HAPPY_POLICY                                                                               \
    "{\"thresholds\":[{\"metric\":\"auc\",\"op\":\">=\",\"baseline\":true,"                        \
    "\"max_regression\":0.005}],"                                                                  \
    "\"approvals\":{\"required\":2},"                                                              \
    "\"rollout\":{\"steps\":[10,50,100],\"bake_seconds\":1}}"

static void test_full_happy_path(void **state)
{
    struct mg_server *s = *state;
    char id[64], path[256];
    struct it_resp *r, *p;
    json_t *gates, *events, *items, *e, *lkg, *appr;
    json_int_t v1, v2, prev_gen, top_gen = 0;
    size_t i, steps = 0;
    bool saw_success = false;

    it_model_create(cx.s, cx.t.pub, "fraud");
    v1 = it_version_create(cx.s, cx.t.pub, "fraud", cx.art, rel_metrics(0.91, -1));
    v2 = it_version_create(cx.s, cx.t.pub, "fraud", cx.art, rel_metrics(0.92, -1));
    assert_int_equal(v1, 1);
    assert_int_equal(v2, 2);

    /* Unprotected: a deployer sets the alias directly; that is known good. */
    r = it_jreq(s, "PUT", "/api/v1/models/fraud/aliases/production", cx.t.dep, "{\"version\":1}");
    it_expect_status(s, r, 200);
    assert_string_equal(it_jstr(r->json, "model"), "fraud");
    assert_string_equal(it_jstr(r->json, "alias"), "production");
    assert_false(json_is_true(json_object_get(r->json, "protected")));
    assert_true(json_is_null(json_object_get(r->json, "promotion")));
    it_jint(r->json, "generation");
    rel_expect_routes(&cx, r, it_jarr(r->json, "routes"), 1, 1, 100);
    lkg = it_jobj(r->json, "last_known_good");
    assert_int_equal(it_jint(lkg, "version"), 1);
    it_expect_rfc3339(it_jstr(lkg, "since"));
    assert_int_equal(rel_lkg(&cx, "fraud", "production"), 1);

    /* The policy protects the alias. */
    r = it_jreq(s, "PUT", "/api/v1/models/fraud/policies/production", s->admin_token, HAPPY_POLICY);
    it_expect_status(s, r, 200);
    r = it_jreq(s, "PUT", "/api/v1/models/fraud/aliases/production", cx.t.dep, "{\"version\":2}");
    it_expect_error(s, r, 409, "alias_protected");
    r = it_request(s, "DELETE", "/api/v1/models/fraud/aliases/production", cx.t.dep, NULL, NULL, 0);
    it_expect_status(s, r, 409);
    r = it_alias_get(cx.s, cx.t.rd, "fraud", "production");
    assert_true(json_is_true(json_object_get(r->json, "protected")));
    rel_expect_routes(&cx, r, it_jarr(r->json, "routes"), 1, 1, 100);

    /* The promotion: gates pass against baseline v1, approvals are awaited. */
    p = it_promote(cx.s, cx.t.dep, "fraud", v2, "production", id);
    rel_expect_state(p, "awaiting_approval");
    assert_string_equal(it_jstr(p->json, "model"), "fraud");
    assert_string_equal(it_jstr(p->json, "alias"), "production");
    assert_int_equal(it_jint(p->json, "version"), 2);
    assert_int_equal(it_jint(p->json, "baseline_version"), 1);
    assert_string_equal(it_jstr(p->json, "created_by"), "dep");
    it_expect_rfc3339(it_jstr(p->json, "created_at"));
    it_expect_rfc3339(it_jstr(p->json, "updated_at"));
    it_jobj(p->json, "policy");
    assert_int_equal(json_array_size(it_jarr(p->json, "approvals")), 0);
    gates = it_jarr(p->json, "gates");
    rel_expect_gate(gates, "threshold", "auc", "passed");
    assert_true(fabs(rel_gate_observed(gates, "threshold", "auc") - 0.92) < 1e-9);
    if (!rel_gate_expects(gates, "threshold", "auc", 0.905))
        fail_msg("the auc gate should expect >= 0.905 (baseline 0.91 - 0.005): %s", p->body);
    {
        json_t *ro = it_jobj(p->json, "rollout");
        json_t *st = it_jarr(ro, "steps");

        assert_int_equal(json_array_size(st), 3);
        assert_int_equal(json_integer_value(json_array_get(st, 0)), 10);
        assert_int_equal(json_integer_value(json_array_get(st, 2)), 100);
    }
    r = it_alias_get(cx.s, cx.t.rd, "fraud", "production");
    assert_string_equal(it_jstr(r->json, "promotion"), id);
    rel_expect_routes(&cx, r, it_jarr(r->json, "routes"), 1, 1, 100);

    /* Reviewer A: still waiting for the second approval. */
    r = rel_decide(&cx, cx.t.rev_a, id, "approve", "looks good");
    it_expect_status(s, r, 200);
    rel_expect_state(r, "awaiting_approval");
    appr = it_jarr(r->json, "approvals");
    assert_int_equal(json_array_size(appr), 1);
    assert_string_equal(it_jstr(json_array_get(appr, 0), "by"), "rev-a");
    assert_string_equal(it_jstr(json_array_get(appr, 0), "decision"), "approve");
    it_expect_rfc3339(it_jstr(json_array_get(appr, 0), "at"));
    rel_expect_alias_routes(&cx, "fraud", "production", 1, 1, 100);

    /* Reviewer B: the rollout starts at 10%. */
    r = rel_decide(&cx, cx.t.rev_b, id, "approve", "ship it");
    it_expect_status(s, r, 200);
    rel_expect_state(r, "rolling_out");
    {
        json_t *ro = it_jobj(r->json, "rollout");

        /* The answer is the state the approval produced: the first step. */
        assert_int_equal(it_jint(ro, "step_index"), 0);
        assert_int_equal(it_jint(ro, "weight"), 10);
        it_expect_rfc3339(it_jstr(ro, "next_step_at"));
    }
    assert_int_equal(json_array_size(it_jarr(r->json, "approvals")), 2);
    /* The first step as history records it (the alias itself may have moved on). */
    r = it_get(s, "/api/v1/models/fraud/aliases/production/history", cx.t.rd);
    it_expect_status(s, r, 200);
    {
        bool found = false;

        json_array_foreach(it_jarr(r->json, "items"), i, e)
        {
            json_int_t pairs[] = {1, 90, 2, 10};

            if (rel_routes_match(json_object_get(e, "routes"), 2, pairs))
                found = true;
        }
        if (!found)
            fail_msg("no history entry with routes [{1,90},{2,10}]: %s", r->body);
    }

    /* The timer takes the remaining steps. */
    p = it_promotion_wait(cx.s, cx.t.rd, id, "succeeded", 20000);
    assert_int_equal(it_jint(it_jobj(p->json, "rollout"), "weight"), 100);
    assert_true(json_is_null(json_object_get(it_jobj(p->json, "rollout"), "next_step_at")));
    rel_expect_alias_routes(&cx, "fraud", "production", 1, 2, 100);
    r = it_alias_get(cx.s, cx.t.rd, "fraud", "production");
    assert_true(json_is_null(json_object_get(r->json, "promotion")));
    assert_int_equal(it_jint(it_jobj(r->json, "last_known_good"), "version"), 2);
    assert_int_equal(rel_lkg(&cx, "fraud", "production"), 2);

    /* Events: timestamps, the steps, the success. */
    events = it_jarr(p->json, "events");
    json_array_foreach(events, i, e)
    {
        const char *type = it_jstr(e, "type");

        it_expect_rfc3339(it_jstr(e, "at"));
        assert_non_null(json_object_get(e, "detail"));
        if (strstr(type, "step") != NULL)
            steps++;
        if (strcmp(type, "succeeded") == 0)
            saw_success = true;
    }
    if (steps < 2 || !saw_success)
        fail_msg("events should show the 10%% and 50%% steps and the success: %s", p->body);

    /* History newest first: 100, 50, 10 of the promotion, then the direct set. */
    r = it_get(s, "/api/v1/models/fraud/aliases/production/history", cx.t.rd);
    it_expect_status(s, r, 200);
    items = it_jarr(r->json, "items");
    if (json_array_size(items) != 4)
        fail_msg("history should have 4 generations (set, 10%%, 50%%, 100%%): %s", r->body);
    {
        static const json_int_t want[4][4] = {
            {2, 100, 0, 0}, {1, 50, 2, 50}, {1, 90, 2, 10}, {1, 100, 0, 0}};
        static const size_t nwant[4] = {1, 2, 2, 1};
        static const char *const kinds[4] = {"promoted", "step", "step", "set"};

        prev_gen = 0;
        json_array_foreach(items, i, e)
        {
            json_int_t g = it_jint(e, "generation");

            rel_expect_routes(&cx, r, it_jarr(e, "routes"), nwant[i], want[i][0], want[i][1],
                              want[i][2], want[i][3]);
            if (i > 0 && g >= prev_gen)
                fail_msg("history is not newest first: %s", r->body);
            if (i == 0)
                top_gen = g;
            prev_gen = g;
            it_expect_rfc3339(it_jstr(e, "at"));
            if (i < 3) {
                assert_string_equal(it_jstr(e, "promotion"), id);
            } else {
                assert_true(json_is_null(json_object_get(e, "promotion")));
                assert_string_equal(it_jstr(e, "by"), "dep");
            }
            if (json_object_get(e, "kind") == NULL)
                fail_msg("history entries should say their kind: %s", r->body);
            assert_string_equal(it_jstr(e, "kind"), kinds[i]);
            assert_non_null(json_object_get(e, "reason"));
        }
        /* The alias's generation is the newest history entry's. */
        p = it_alias_get(cx.s, cx.t.rd, "fraud", "production");
        assert_int_equal(it_jint(p->json, "generation"),
                         it_jint(json_array_get(items, 0), "generation"));
    }

    /* LKG in full. */
    r = it_get(s, "/api/v1/models/fraud/aliases/production/last-known-good", cx.t.rd);
    it_expect_status(s, r, 200);
    assert_string_equal(it_jstr(r->json, "model"), "fraud");
    assert_string_equal(it_jstr(r->json, "alias"), "production");
    assert_int_equal(it_jint(r->json, "version"), 2);
    assert_string_equal(it_jstr(r->json, "artifact"), cx.art);
    assert_string_equal(it_jstr(r->json, "image"), IT_IMAGE);
    assert_non_null(strstr(it_jstr(r->json, "signature_url"), "/versions/2/signature"));
    it_expect_rfc3339(it_jstr(r->json, "since"));
    assert_int_equal(it_jint(r->json, "generation"), top_gen);

    /* The model lists the alias with its routes. */
    r = it_get(s, "/api/v1/models/fraud", cx.t.rd);
    it_expect_status(s, r, 200);
    {
        json_t *aliases = it_jarr(r->json, "aliases");

        assert_int_equal(json_array_size(aliases), 1);
        assert_string_equal(it_jstr(json_array_get(aliases, 0), "alias"), "production");
        rel_expect_routes(&cx, r, it_jarr(json_array_get(aliases, 0), "routes"), 1, 2, 100);
    }

    /* List filters find it. */
    r = it_get(s, "/api/v1/promotions?state=succeeded&model=fraud&alias=production", cx.t.rd);
    it_expect_status(s, r, 200);
    items = it_jarr(r->json, "items");
    assert_int_equal(json_array_size(items), 1);
    assert_string_equal(it_jstr(json_array_get(items, 0), "id"), id);
    r = it_get(s, "/api/v1/promotions?state=rolling_out&model=fraud", cx.t.rd);
    it_expect_status(s, r, 200);
    assert_int_equal(json_array_size(it_jarr(r->json, "items")), 0);
    r = it_get(s, "/api/v1/promotions?state=bogus", cx.t.rd);
    it_expect_error(s, r, 400, "invalid_argument");
    r = it_get(s, it_fmt(path, sizeof(path), "/api/v1/promotions/%s", "prm_doesnotexist"), cx.t.rd);
    it_expect_error(s, r, 404, "not_found");
}

static void test_no_policy_promotes_at_once(void **state)
{
    struct mg_server *s = *state;
    char id[64];
    struct it_resp *p, *r;
    json_int_t v1, v2;

    it_model_create(cx.s, cx.t.pub, "nopol");
    v1 = it_version_create(cx.s, cx.t.pub, "nopol", cx.art, rel_metrics(0.5, -1));
    v2 = it_version_create(cx.s, cx.t.pub, "nopol", cx.art, rel_metrics(0.4, -1));

    /* No policy: no gates, one step to 100%, at once. */
    p = it_promote(cx.s, cx.t.dep, "nopol", v1, "staging", id);
    rel_expect_state(p, "succeeded");
    assert_true(json_is_null(json_object_get(p->json, "baseline_version")));
    assert_int_equal(json_array_size(it_jarr(p->json, "gates")), 0);
    {
        json_t *st = it_jarr(it_jobj(p->json, "rollout"), "steps");

        assert_int_equal(json_array_size(st), 1);
        assert_int_equal(json_integer_value(json_array_get(st, 0)), 100);
        assert_int_equal(it_jint(it_jobj(p->json, "rollout"), "weight"), 100);
    }
    rel_expect_alias_routes(&cx, "nopol", "staging", 1, v1, 100);
    assert_int_equal(rel_lkg(&cx, "nopol", "staging"), v1);

    /* A second one replaces it in one step, with v1 as the baseline. */
    p = it_promote(cx.s, cx.t.dep, "nopol", v2, "staging", id);
    rel_expect_state(p, "succeeded");
    assert_int_equal(it_jint(p->json, "baseline_version"), v1);
    rel_expect_alias_routes(&cx, "nopol", "staging", 1, v2, 100);
    assert_int_equal(rel_lkg(&cx, "nopol", "staging"), v2);
    r = it_alias_get(cx.s, cx.t.rd, "nopol", "staging");
    assert_false(json_is_true(json_object_get(r->json, "protected")));

    /* Unknown model or version: 404. */
    r = it_promotion_post(cx.s, cx.t.dep, "nopol", 99, "staging");
    it_expect_error(s, r, 404, "not_found");
    r = it_promotion_post(cx.s, cx.t.dep, "no-such-model", 1, "staging");
    it_expect_error(s, r, 404, "not_found");
    r = it_promotion_post(cx.s, cx.t.dep, "nopol", 1, "Bad_Alias");
    it_expect_error(s, r, 400, "invalid_argument");
}

/* Two reviewers approving at the same moment: one commit wins, the other is
 * retried against the promotion as it is then, so it sees the first approval
 * and the second one completes the quorum. Counted once before the retry, the
 * promotion would stay awaiting_approval for good. */
static void test_simultaneous_approvals(void **state)
{
    struct mg_server *s = *state;
    char id[64], path[256];
    struct it_spec specs[2];
    struct it_resp *out[2], *p;
    static const char body[] = "{\"decision\":\"approve\"}";

    it_model_create(cx.s, cx.t.pub, "race");
    it_alias_to(cx.s, cx.t.dep, "race", "production",
                it_version_create(cx.s, cx.t.pub, "race", cx.art, rel_metrics(0.9, -1)), 0);
    it_policy_put(cx.s, "race", "production",
                  "{\"approvals\":{\"required\":2},\"rollout\":{\"steps\":[100]}}");
    for (int round = 0; round < 8; round++) {
        json_int_t v = it_version_create(cx.s, cx.t.pub, "race", cx.art, rel_metrics(0.9, -1));

        p = it_promote(cx.s, cx.t.dep, "race", v, "production", id);
        rel_expect_state(p, "awaiting_approval");
        it_fmt(path, sizeof(path), "/api/v1/promotions/%s/approvals", id);
        specs[0] =
            (struct it_spec){"POST", path, cx.t.rev_a, "application/json", body, sizeof(body) - 1};
        specs[1] =
            (struct it_spec){"POST", path, cx.t.rev_b, "application/json", body, sizeof(body) - 1};
        it_request_parallel(s, 2, specs, out);
        it_expect_status(s, out[0], 200);
        it_expect_status(s, out[1], 200);
        p = it_promotion_wait(cx.s, cx.t.rd, id, "succeeded", it_scaled_ms(10000));
        assert_int_equal(json_array_size(it_jarr(p->json, "approvals")), 2);
        rel_expect_alias_routes(&cx, "race", "production", 1, v, 100);
        it_release(s);
    }
}

static void test_lkg_of_fresh_alias(void **state)
{
    struct mg_server *s = *state;
    struct it_resp *r;

    it_model_create(cx.s, cx.t.pub, "fresh");
    it_version_create(cx.s, cx.t.pub, "fresh", cx.art, rel_metrics(0.9, -1));
    r = it_get(s, "/api/v1/models/fresh/aliases/production/last-known-good", cx.t.rd);
    it_expect_error(s, r, 404, "no_known_good");

    /* An alias that only ever held a step of a rollout has no LKG either. */
    it_policy_put(cx.s, "fresh", "canary",
                  "{\"rollout\":{\"steps\":[20,100],\"bake_seconds\":600}}");
    {
        char id[64], path[128];
        struct it_resp *p = it_promote(cx.s, cx.t.dep, "fresh", 1, "canary", id);

        rel_expect_state(p, "rolling_out");
        assert_int_equal(it_jint(it_jobj(p->json, "rollout"), "step_index"), 0);
        /* Nothing else to route to: the only version takes all traffic (weights sum to 100). */
        rel_expect_alias_routes(&cx, "fresh", "canary", 1, 1, 100);
        r = it_get(s, "/api/v1/models/fresh/aliases/canary/last-known-good", cx.t.rd);
        it_expect_error(s, r, 404, "no_known_good");
        r = it_alias_get(cx.s, cx.t.rd, "fresh", "canary");
        assert_true(json_is_null(json_object_get(r->json, "last_known_good")));
        r = it_jreq(s, "POST", it_fmt(path, sizeof(path), "/api/v1/promotions/%s/abort", id),
                    cx.t.dep, "{\"reason\":\"done with it\"}");
        it_expect_status(s, r, 200);
        rel_expect_state(r, "aborted");
    }
}

static void test_gates_dry_run(void **state)
{
    struct mg_server *s = *state;
    struct it_resp *r;
    json_t *gates;

    it_model_create(cx.s, cx.t.pub, "dry");
    it_version_create(cx.s, cx.t.pub, "dry", cx.art, rel_metrics(0.91, -1));
    it_version_create(cx.s, cx.t.pub, "dry", cx.art, rel_metrics(0.92, -1));
    it_version_create(cx.s, cx.t.pub, "dry", cx.art, rel_metrics(0.80, -1));
    it_alias_to(cx.s, cx.t.dep, "dry", "production", 1, 0);
    it_policy_put(cx.s, "dry", "production", HAPPY_POLICY);

    /* v2 passes its threshold; the approvals are still to come. */
    r = it_get(s, "/api/v1/models/dry/versions/2/gates?alias=production", cx.t.rd);
    it_expect_status(s, r, 200);
    assert_false(json_is_true(json_object_get(r->json, "passed")));
    assert_true(json_is_true(json_object_get(r->json, "pending")));
    gates = it_jarr(r->json, "gates");
    rel_expect_gate(gates, "threshold", "auc", "passed");
    rel_expect_gate(gates, "approval", NULL, "pending");
    assert_true(fabs(rel_gate_observed(gates, "threshold", "auc") - 0.92) < 1e-9);

    /* v3 fails it: not passed, not pending. */
    r = it_get(s, "/api/v1/models/dry/versions/3/gates?alias=production", cx.t.rd);
    it_expect_status(s, r, 200);
    assert_false(json_is_true(json_object_get(r->json, "passed")));
    assert_false(json_is_true(json_object_get(r->json, "pending")));
    rel_expect_gate(it_jarr(r->json, "gates"), "threshold", "auc", "failed");

    /* Nothing changed: a dry run is a read. */
    rel_expect_alias_routes(&cx, "dry", "production", 1, 1, 100);
    r = it_get(s, "/api/v1/promotions?model=dry", cx.t.rd);
    it_expect_status(s, r, 200);
    assert_int_equal(json_array_size(it_jarr(r->json, "items")), 0);

    /* No policy on the alias: nothing to pass. */
    r = it_get(s, "/api/v1/models/dry/versions/3/gates?alias=staging", cx.t.rd);
    it_expect_status(s, r, 200);
    assert_true(json_is_true(json_object_get(r->json, "passed")));
    assert_false(json_is_true(json_object_get(r->json, "pending")));
    assert_int_equal(json_array_size(it_jarr(r->json, "gates")), 0);

    /* Arguments. */
    r = it_get(s, "/api/v1/models/dry/versions/2/gates", cx.t.rd);
    it_expect_error(s, r, 400, "invalid_argument");
    r = it_get(s, "/api/v1/models/dry/versions/2/gates?alias=", cx.t.rd);
    it_expect_error(s, r, 400, "invalid_argument");
    r = it_get(s, "/api/v1/models/dry/versions/2/gates?alias=Not_An_Alias", cx.t.rd);
    it_expect_error(s, r, 400, "invalid_argument");
    r = it_get(s, "/api/v1/models/dry/versions/9/gates?alias=production", cx.t.rd);
    it_expect_error(s, r, 404, "not_found");
    r = it_get(s, "/api/v1/models/dry/versions/2/gates?alias=production", NULL);
    it_expect_error(s, r, 401, "unauthenticated");
    /* every role includes reader */
    r = it_get(s, "/api/v1/models/dry/versions/2/gates?alias=production", cx.t.noread);
    it_expect_status(s, r, 200);
}

static void test_policy_validation_and_canonical_form(void **state)
{
    struct mg_server *s = *state;
    const char *P = "/api/v1/models/pol/policies/production";
    struct it_resp *r, *g;
    json_t *canon, *ro;

    it_model_create(cx.s, cx.t.pub, "pol");
    it_version_create(cx.s, cx.t.pub, "pol", cx.art, rel_metrics(0.9, 40));
    it_version_create(cx.s, cx.t.pub, "pol", cx.art, rel_metrics(0.9, 40));

    /* Invalid policies: 400 naming the field. */
    r = it_jreq(s, "PUT", P, s->admin_token, "{\"rollout\":{\"steps\":[10,50]}}");
    it_expect_error_field(s, r, 400, "invalid_argument", "steps");
    r = it_jreq(s, "PUT", P, s->admin_token, "{\"rollout\":{\"steps\":[50,10,100]}}");
    it_expect_error_field(s, r, 400, "invalid_argument", "steps");
    r = it_jreq(s, "PUT", P, s->admin_token, "{\"rollout\":{\"steps\":[]}}");
    it_expect_error_field(s, r, 400, "invalid_argument", "steps");
    r = it_jreq(s, "PUT", P, s->admin_token,
                "{\"thresholds\":[{\"metric\":\"auc\",\"op\":\"~=\",\"value\":0.9}]}");
    it_expect_error_field(s, r, 400, "invalid_argument", "thresholds");
    r = it_jreq(s, "PUT", P, s->admin_token,
                "{\"thresholds\":[{\"metric\":\"auc\",\"op\":\">=\"}]}");
    it_expect_error_field(s, r, 400, "invalid_argument", "thresholds");
    r = it_jreq(s, "PUT", P, s->admin_token, "{\"approvals\":{\"required\":-1}}");
    it_expect_error_field(s, r, 400, "invalid_argument", "approvals");
    r = it_jreq(s, "PUT", P, s->admin_token, "{\"no_such_field\":true}");
    it_expect_error(s, r, 400, "invalid_argument");
    r = it_jreq(s, "PUT", P, s->admin_token, "[1,2]");
    it_expect_error(s, r, 400, "invalid_argument");
    r = it_treq(s, "PUT", P, s->admin_token, "text/plain", "{}");
    it_expect_error(s, r, 415, "unsupported_media_type");
    r = it_jreq(s, "PUT", "/api/v1/models/pol/policies/Bad_Alias", s->admin_token, "{}");
    it_expect_error(s, r, 400, "invalid_argument");
    r = it_jreq(s, "PUT", "/api/v1/models/no-such-model/policies/production", s->admin_token, "{}");
    it_expect_error(s, r, 404, "not_found");

    /* None of these protected the alias. */
    r = it_get(s, P, cx.t.rd);
    it_expect_error(s, r, 404, "not_found");
    it_alias_to(cx.s, cx.t.dep, "pol", "production", 1, 0);

    /* A partial policy comes back in canonical form: every field present. */
    r = it_jreq(s, "PUT", P, s->admin_token,
                "{\"thresholds\":[{\"metric\":\"auc\",\"op\":\">=\",\"value\":0.8},"
                "{\"metric\":\"p95_latency_ms\",\"op\":\"<=\",\"baseline\":true,"
                "\"max_regression_pct\":10}],"
                "\"approvals\":{\"required\":1},"
                "\"rollout\":{\"steps\":[25,100]}}");
    it_expect_status(s, r, 200);
    g = it_get(s, P, cx.t.rd);
    it_expect_status(s, g, 200);
    canon = g->json;
    if (!json_equal(canon, r->json))
        fail_msg("GET policy differs from the PUT answer:\nGET: %s\nPUT: %s", g->body, r->body);
    {
        json_t *th = it_jarr(canon, "thresholds"), *t0, *t1;

        assert_int_equal(json_array_size(th), 2);
        t0 = json_array_get(th, 0);
        t1 = json_array_get(th, 1);
        assert_string_equal(it_jstr(t0, "metric"), "auc");
        assert_string_equal(it_jstr(t0, "op"), ">=");
        assert_true(fabs(it_jnum(t0, "value") - 0.8) < 1e-12);
        assert_string_equal(it_jstr(t1, "metric"), "p95_latency_ms");
        assert_string_equal(it_jstr(t1, "op"), "<=");
        assert_true(json_is_true(json_object_get(t1, "baseline")));
        assert_true(fabs(it_jnum(t1, "max_regression_pct") - 10) < 1e-12);
    }
    assert_int_equal(it_jint(it_jobj(canon, "approvals"), "required"), 1);
    assert_true(json_is_boolean(json_object_get(canon, "require_signature")));
    assert_false(json_is_true(json_object_get(canon, "require_signature")));
    assert_true(json_is_boolean(json_object_get(canon, "require_pinned_image")));
    assert_true(json_is_boolean(json_object_get(canon, "require_registered_datasets")));
    assert_true(json_is_boolean(json_object_get(it_jobj(canon, "smoke"), "required")));
    it_jstr(it_jobj(canon, "smoke"), "gpu");
    ro = it_jobj(canon, "rollout");
    assert_int_equal(json_array_size(it_jarr(ro, "steps")), 2);
    assert_int_equal(json_integer_value(json_array_get(it_jarr(ro, "steps"), 0)), 25);
    it_jint(ro, "bake_seconds");
    assert_true(json_is_boolean(json_object_get(ro, "auto_advance")));

    /* PUT of the canonical form is idempotent. */
    {
        char *text = json_dumps(canon, JSON_COMPACT);

        r = it_jreq(s, "PUT", P, s->admin_token, text);
        free(text);
        it_expect_status(s, r, 200);
        if (!json_equal(r->json, canon))
            fail_msg("PUT of the canonical form changed it:\nbefore: %s\nafter: %s", g->body,
                     r->body);
    }

    /* Protected now. */
    r = it_jreq(s, "PUT", "/api/v1/models/pol/aliases/production", cx.t.dep, "{\"version\":2}");
    it_expect_error(s, r, 409, "alias_protected");
    r = it_alias_get(cx.s, cx.t.rd, "pol", "production");
    assert_true(json_is_true(json_object_get(r->json, "protected")));

    /* DELETE: 204, the alias is unprotected and moves directly again. */
    r = it_request(s, "DELETE", P, s->admin_token, NULL, NULL, 0);
    it_expect_status(s, r, 204);
    r = it_get(s, P, cx.t.rd);
    it_expect_error(s, r, 404, "not_found");
    r = it_alias_get(cx.s, cx.t.rd, "pol", "production");
    assert_false(json_is_true(json_object_get(r->json, "protected")));
    r = it_jreq(s, "PUT", "/api/v1/models/pol/aliases/production", cx.t.dep, "{\"version\":2}");
    it_expect_status(s, r, 200);
    rel_expect_routes(&cx, r, it_jarr(r->json, "routes"), 1, 2, 100);
    r = it_request(s, "DELETE", P, s->admin_token, NULL, NULL, 0);
    it_expect_error(s, r, 404, "not_found");
}

static void test_roles(void **state)
{
    struct mg_server *s = *state;
    const char *P = "/api/v1/models/roles/policies/production";
    const char *pol = "{\"approvals\":{\"required\":1},"
                      "\"rollout\":{\"steps\":[50,100],\"bake_seconds\":600}}";
    char id[64], path[256];
    struct it_resp *r;
    const char *const not_admin[] = {cx.t.pub, cx.t.dep, cx.t.rev_a, cx.t.rd, cx.t.noread};
    const char *const not_deployer[] = {cx.t.pub, cx.t.rev_a, cx.t.rd};
    const char *const not_reviewer[] = {cx.t.pub, cx.t.dep, cx.t.rd};
    const char *const readers[] = {cx.t.rd, cx.t.pub, cx.t.dep, cx.t.rev_a, s->admin_token};
    size_t i;

    it_model_create(cx.s, cx.t.pub, "roles");
    it_version_create(cx.s, cx.t.pub, "roles", cx.art, rel_metrics(0.9, -1));
    it_version_create(cx.s, cx.t.pub, "roles", cx.art, rel_metrics(0.9, -1));
    it_alias_to(cx.s, cx.t.dep, "roles", "production", 1, 0);

    /* Policies: PUT and DELETE need admin. */
    for (i = 0; i < sizeof(not_admin) / sizeof(not_admin[0]); i++) {
        r = it_jreq(s, "PUT", P, not_admin[i], pol);
        it_expect_error(s, r, 403, "forbidden");
    }
    r = it_jreq(s, "PUT", P, NULL, pol);
    it_expect_error(s, r, 401, "unauthenticated");
    r = it_jreq(s, "PUT", P, "not-a-token", pol);
    it_expect_error(s, r, 401, "unauthenticated");
    it_policy_put(cx.s, "roles", "production", pol);
    for (i = 0; i < sizeof(not_admin) / sizeof(not_admin[0]); i++) {
        r = it_request(s, "DELETE", P, not_admin[i], NULL, NULL, 0);
        it_expect_error(s, r, 403, "forbidden");
    }

    /* Promotions: POST needs deployer. */
    for (i = 0; i < sizeof(not_deployer) / sizeof(not_deployer[0]); i++) {
        r = it_promotion_post(cx.s, not_deployer[i], "roles", 2, "production");
        it_expect_error(s, r, 403, "forbidden");
    }
    r = it_promotion_post(cx.s, NULL, "roles", 2, "production");
    it_expect_error(s, r, 401, "unauthenticated");
    r = it_promote(cx.s, cx.t.dep, "roles", 2, "production", id);
    rel_expect_state(r, "awaiting_approval");

    /* Approvals need reviewer. */
    for (i = 0; i < sizeof(not_reviewer) / sizeof(not_reviewer[0]); i++) {
        r = rel_decide(&cx, not_reviewer[i], id, "approve", "me too");
        it_expect_error(s, r, 403, "forbidden");
    }
    r = rel_decide(&cx, NULL, id, "approve", "me too");
    it_expect_error(s, r, 401, "unauthenticated");
    r = it_promotion_get(cx.s, cx.t.rd, id);
    rel_expect_state(r, "awaiting_approval");
    assert_int_equal(json_array_size(it_jarr(r->json, "approvals")), 0);
    r = rel_decide(&cx, cx.t.rev_a, id, "approve", "fine");
    it_expect_status(s, r, 200);
    rel_expect_state(r, "rolling_out");

    /* Advance, abort and rollback need deployer. */
    for (i = 0; i < sizeof(not_deployer) / sizeof(not_deployer[0]); i++) {
        r = it_jreq(s, "POST", it_fmt(path, sizeof(path), "/api/v1/promotions/%s/advance", id),
                    not_deployer[i], "{}");
        it_expect_error(s, r, 403, "forbidden");
        r = it_jreq(s, "POST", it_fmt(path, sizeof(path), "/api/v1/promotions/%s/abort", id),
                    not_deployer[i], "{\"reason\":\"no\"}");
        it_expect_error(s, r, 403, "forbidden");
        r = it_jreq(s, "POST", "/api/v1/models/roles/aliases/production/rollback", not_deployer[i],
                    "{\"reason\":\"no\"}");
        it_expect_error(s, r, 403, "forbidden");
        r = it_jreq(s, "PUT", "/api/v1/models/roles/aliases/staging", not_deployer[i],
                    "{\"version\":1}");
        it_expect_error(s, r, 403, "forbidden");
    }
    r = it_promotion_get(cx.s, cx.t.rd, id);
    rel_expect_state(r, "rolling_out");
    rel_expect_alias_routes(&cx, "roles", "production", 2, 1, 50, 2, 50);

    /* GETs need a token with any role (every role includes reader), without one 401. */
    {
        char gp[6][160];
        const char *gets[6];

        gets[0] = it_fmt(gp[0], sizeof(gp[0]), "/api/v1/promotions/%s", id);
        gets[1] = "/api/v1/promotions?model=roles";
        gets[2] = P;
        gets[3] = "/api/v1/models/roles/aliases/production";
        gets[4] = "/api/v1/models/roles/aliases/production/history";
        gets[5] = "/api/v1/models/roles/aliases/production/last-known-good";
        for (size_t k = 0; k < 6; k++) {
            for (i = 0; i < sizeof(readers) / sizeof(readers[0]); i++) {
                r = it_get(s, gets[k], readers[i]);
                it_expect_status(s, r, 200);
            }
            r = it_get(s, gets[k], cx.t.noread);
            it_expect_status(s, r, 200);
            r = it_get(s, gets[k], NULL);
            it_expect_error(s, r, 401, "unauthenticated");
        }
        r = it_get(s, "/api/v1/models/roles/aliases", cx.t.rd);
        it_expect_status(s, r, 200);
        assert_int_equal(json_array_size(it_jarr(r->json, "items")), 1);
    }

    /* The deployer finishes it. */
    r = it_jreq(s, "POST", it_fmt(path, sizeof(path), "/api/v1/promotions/%s/advance", id),
                cx.t.dep, "{}");
    it_expect_status(s, r, 200);
    rel_expect_state(r, "succeeded");
    rel_expect_alias_routes(&cx, "roles", "production", 1, 2, 100);
}

static void test_audit_verifies(void **state)
{
    struct mg_server *s = *state;
    struct it_resp *r;
    json_t *items, *e;
    size_t i;
    bool saw_policy = false, saw_promotion = false;

    rel_expect_audit_ok(s);
    r = it_get(s, "/api/v1/audit?limit=1000", s->admin_token);
    it_expect_status(s, r, 200);
    items = it_jarr(r->json, "items");
    json_array_foreach(items, i, e)
    {
        const char *a = json_string_value(json_object_get(e, "action"));

        if (a != NULL && strstr(a, "polic") != NULL)
            saw_policy = true;
        if (a != NULL && strstr(a, "promotion") != NULL)
            saw_promotion = true;
    }
    if (!saw_policy || !saw_promotion)
        fail_msg("the audit log should record policy and promotion changes (found policy: %d, "
                 "promotion: %d)",
                 saw_policy, saw_promotion);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_full_happy_path, it_test_teardown),
        cmocka_unit_test_teardown(test_no_policy_promotes_at_once, it_test_teardown),
        cmocka_unit_test_teardown(test_simultaneous_approvals, it_test_teardown),
        cmocka_unit_test_teardown(test_lkg_of_fresh_alias, it_test_teardown),
        cmocka_unit_test_teardown(test_gates_dry_run, it_test_teardown),
        cmocka_unit_test_teardown(test_policy_validation_and_canonical_form, it_test_teardown),
        cmocka_unit_test_teardown(test_roles, it_test_teardown),
        cmocka_unit_test_teardown(test_audit_verifies, it_test_teardown),
    };

    return it_main_result(cmocka_run_group_tests_name("integration_release_happy", tests,
                                                      rel_group_setup, rel_group_teardown));
}
