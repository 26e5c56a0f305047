/*
 * test_release_promotions.c - release control's promotions (control/release_promotions.c) and
 * what the workers report (control/events.c), with no HTTP and no worker: a real SQLite store
 * and recording fakes in ctl->gw and ctl->rn (ctl_fixture.h).
 *
 * The rules are those of tests/integration/test_release_happy.c, test_release_gates.c,
 * test_release_rollback.c and test_runner.c, without a daemon:
 * a failing gate rejects and leaves the alias alone (the dry run reports it and changes
 * nothing); approvals with separation of duties start the rollout; advance steps it to
 * success and the LKG; abort and rollback leave it; a failed smoke test or a failed delivery
 * rolls a rolling-out promotion back, an errored smoke test rolls nothing back; a policy that
 * requires a smoke test waits on it, and entering the shadow phase queues the candidate's
 * test through the runner's table (an empty table leaves the promotion running); the fit
 * gate asks the runner's table for its largest GPU.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_fixture.h"
#include "control/events.h"

#define HAPPY_POLICY                                                                               \
    "{\"thresholds\":[{\"metric\":\"auc\",\"op\":\">=\",\"baseline\":true,"                        \
    "\"max_regression\":0.005}],"                                                                  \
    "\"approvals\":{\"required\":2},"                                                              \
    "\"rollout\":{\"steps\":[10,50,100],\"bake_seconds\":600}}"

/* A long bake: the rollout stays where it is unless told. */
#define SLOW_POLICY "{\"rollout\":{\"steps\":[10,50,100],\"bake_seconds\":600}}"

#define SMOKE_POLICY                                                                               \
    "{\"smoke\":{\"required\":true,\"gpu\":\"none\"},"                                             \
    "\"rollout\":{\"steps\":[50,100],\"bake_seconds\":600,\"shadow_seconds\":600}}"

static const double aucs[] = {0.91, 0.92, 0.80};

/* The gate of `kind` whose name holds `part` (NULL: any) in a gate list (BORROWED), or NULL. */
static json_t *gate_find(const json_t *gates, const char *kind, const char *part)
{
    json_t *g;
    size_t i;

    json_array_foreach(gates, i, g)
    {
        const char *k = json_string_value(json_object_get(g, "kind"));
        const char *n = json_string_value(json_object_get(g, "name"));

        if (k && strcmp(k, kind) == 0 && (part == NULL || (n && strstr(n, part))))
            return g;
    }
    return NULL;
}

static const char *gate_status(const json_t *gates, const char *kind, const char *part)
{
    json_t *g = gate_find(gates, kind, part);

    if (g == NULL)
        fail_msg("no %s gate%s%s", kind, part ? " named " : "", part ? part : "");
    return json_string_value(json_object_get(g, "status"));
}

static size_t promotions_of(struct cfx *c, const char *model)
{
    struct store_page page = {100, NULL};
    json_t *l = NULL;
    size_t n;

    if (store_promotion_list(c->fx->st, NULL, model, NULL, &page, &l, &c->fx->err) != MG_OK)
        fail_msg("store_promotion_list: %s", c->fx->err.message);
    n = json_array_size(json_object_get(l, "items"));
    json_decref(l);
    return n;
}

/* The alias while a promotion holds it: routes exactly v at 100%, the promotion attached. */
static void expect_alias_held(struct cfx *c, const char *model, const char *alias, int64_t v,
                              const char *id)
{
    json_t *a = cfx_alias(c, model, alias);

    cfx_expect_routes(json_object_get(a, "routes"), 1, v, 100);
    assert_string_equal(json_string_value(json_object_get(a, "promotion")), id);
    json_decref(a);
}

/* The alias as the promotion left it: routes exactly v at 100%, no promotion attached. */
static void expect_alias_on(struct cfx *c, const char *model, const char *alias, int64_t v)
{
    json_t *a = cfx_alias(c, model, alias);

    cfx_expect_routes(json_object_get(a, "routes"), 1, v, 100);
    assert_true(json_is_null(json_object_get(a, "promotion")));
    json_decref(a);
}

static enum mg_code decide(struct cfx *c, const char *who, const char *id, bool approve)
{
    struct store_principal p = cfx_who(who);
    json_t *out = NULL;
    enum mg_code rc =
        rel_promotion_decide(&c->ctl, &p, id, approve, approve ? "ok" : "no", &out, &c->fx->err);

    json_decref(out);
    return rc;
}

/* The dry run reports what a promotion would meet, and is a read; a failing gate rejects the
 * promotion at once and the alias is left alone; a rejected promotion is final. */
static void test_gates_block_and_dry_run(void **state)
{
    struct cfx *c = *state;
    json_t *r = NULL, *p;
    char id[64];

    cfx_model(c, "m", 3, aucs);
    cfx_alias_to(c, "m", "prod", 1);
    cfx_policy(c, "m", "prod", HAPPY_POLICY);
    cfx_calls_reset(c);

    /* v2 passes its threshold against v1 (0.92 >= 0.91 - 0.005); approvals are to come. */
    assert_int_equal(rel_gates_dry_run(&c->ctl, "m", 2, "prod", &r, &c->fx->err), MG_OK);
    assert_false(json_is_true(json_object_get(r, "passed")));
    assert_true(json_is_true(json_object_get(r, "pending")));
    assert_string_equal(gate_status(json_object_get(r, "gates"), "threshold", "auc"), "passed");
    assert_string_equal(gate_status(json_object_get(r, "gates"), "approval", NULL), "pending");
    json_decref(r);
    /* v3 fails it (0.80): not passed, not pending. */
    assert_int_equal(rel_gates_dry_run(&c->ctl, "m", 3, "prod", &r, &c->fx->err), MG_OK);
    assert_false(json_is_true(json_object_get(r, "passed")));
    assert_false(json_is_true(json_object_get(r, "pending")));
    assert_string_equal(gate_status(json_object_get(r, "gates"), "threshold", "auc"), "failed");
    assert_true(fabs(json_number_value(json_object_get(
                         gate_find(json_object_get(r, "gates"), "threshold", "auc"), "observed")) -
                     0.80) < 1e-9);
    json_decref(r);
    /* No policy on staging: nothing to pass. */
    assert_int_equal(rel_gates_dry_run(&c->ctl, "m", 3, "staging", &r, &c->fx->err), MG_OK);
    assert_true(json_is_true(json_object_get(r, "passed")));
    assert_int_equal(json_array_size(json_object_get(r, "gates")), 0);
    json_decref(r);
    /* A read: nothing changed, nobody kicked. */
    assert_int_equal(promotions_of(c, "m"), 0);
    assert_int_equal(cfx_generation(c, "m", "prod"), 1);
    assert_int_equal(c->ncalls, cfx_count(c, "rn.largest_gpu_gib"));

    /* Promoting v3: rejected at creation, the failing gate named; the alias untouched. */
    p = cfx_promote(c, "m", 3, "prod", id);
    assert_string_equal(json_string_value(json_object_get(p, "state")), "rejected");
    assert_string_equal(gate_status(json_object_get(p, "gates"), "threshold", "auc"), "failed");
    json_decref(p);
    assert_int_equal(cfx_count(c, "gw.alias_names"), 0); /* no route to commit */
    expect_alias_on(c, "m", "prod", 1);
    assert_int_equal(cfx_generation(c, "m", "prod"), 1);
    assert_int_equal(cfx_outbox_gen(c, "m", "prod"), 1);
    /* Final: no approval, no advance. */
    assert_int_equal(decide(c, "rev-a", id, true), MG_ECONFLICT);
    assert_int_equal(rel_promotion_advance(&c->ctl, "dep", id, NULL, &c->fx->err), MG_ECONFLICT);
    cfx_expect_state(c, id, "rejected");
}

/* Two approvals (never by the version's author or the promotion's creator, never twice) start
 * the rollout at 10%; advance takes 50% and 100%; the candidate is then the LKG. */
static void test_approvals_then_advance_to_success(void **state)
{
    struct cfx *c = *state;
    json_t *p, *out = NULL;
    char id[64];

    cfx_model(c, "m", 2, aucs);
    cfx_alias_to(c, "m", "prod", 1);
    cfx_policy(c, "m", "prod", HAPPY_POLICY);
    cfx_calls_reset(c);

    p = cfx_promote(c, "m", 2, "prod", id);
    assert_string_equal(json_string_value(json_object_get(p, "state")), "awaiting_approval");
    assert_int_equal(json_integer_value(json_object_get(p, "baseline_version")), 1);
    assert_string_equal(gate_status(json_object_get(p, "gates"), "threshold", "auc"), "passed");
    assert_null(json_object_get(p, "_rev")); /* internal fields stripped */
    json_decref(p);
    /* Waiting: no route changed, so no gateway names were claimed. */
    assert_int_equal(cfx_count(c, "gw.alias_names"), 0);
    expect_alias_held(c, "m", "prod", 1, id);
    assert_int_equal(cfx_generation(c, "m", "prod"), 1);

    /* Separation of duties: the version's author (alice) and the promotion's creator. */
    assert_int_equal(decide(c, "alice", id, true), MG_ESELFAPPROVAL);
    assert_int_equal(decide(c, "dep", id, true), MG_ESELFAPPROVAL);
    assert_int_equal(decide(c, "rev-a", id, true), MG_OK);
    cfx_expect_state(c, id, "awaiting_approval");
    assert_true(cfx_has_event(c, id, "approval", "rev-a approved"));
    assert_int_equal(decide(c, "rev-a", id, true), MG_ECONFLICT);
    expect_alias_held(c, "m", "prod", 1, id);

    cfx_calls_reset(c);
    assert_int_equal(decide(c, "rev-b", id, true), MG_OK);
    cfx_expect_state(c, id, "rolling_out");
    assert_int_equal(cfx_rollout_int(c, id, "step_index"), 0);
    assert_int_equal(cfx_rollout_int(c, id, "weight"), 10);
    cfx_expect_alias_routes(c, "m", "prod", 2, 1, 90, 2, 10);
    assert_int_equal(cfx_generation(c, "m", "prod"), 2);
    assert_int_equal(cfx_outbox_gen(c, "m", "prod"), 2);
    cfx_expect_routes(cfx_last(c, "gw.alias_names")->routes, 2, 1, 90, 2, 10);
    assert_int_equal(cfx_count(c, "gw.kick"), 1);
    assert_int_equal(cfx_lkg(c, "m", "prod"), 1);

    assert_int_equal(rel_promotion_advance(&c->ctl, "dep", id, &out, &c->fx->err), MG_OK);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(out, "rollout"), "weight")),
                     50);
    json_decref(out);
    cfx_expect_alias_routes(c, "m", "prod", 2, 1, 50, 2, 50);
    assert_int_equal(rel_promotion_advance(&c->ctl, "dep", id, NULL, &c->fx->err), MG_OK);
    cfx_expect_state(c, id, "succeeded");
    expect_alias_on(c, "m", "prod", 2);
    assert_int_equal(cfx_lkg(c, "m", "prod"), 2);
    assert_int_equal(cfx_outbox_gen(c, "m", "prod"), 4);
    assert_true(cfx_has_event(c, id, "succeeded", NULL));

    /* Finished: advance is refused and changes nothing. */
    assert_int_equal(rel_promotion_advance(&c->ctl, "dep", id, NULL, &c->fx->err), MG_ECONFLICT);
    assert_int_equal(cfx_generation(c, "m", "prod"), 4);
}

/* One rejection rejects; an abort mid-rollout restores the baseline without marking the
 * candidate bad; a rollback mid-rollout ends the promotion as rolled_back and marks it bad. */
static void test_reject_abort_and_rollback(void **state)
{
    struct cfx *c = *state;
    json_t *p, *out = NULL;
    char id[64];

    cfx_model(c, "m", 3, NULL);
    cfx_alias_to(c, "m", "prod", 1);
    cfx_policy(c, "m", "prod", "{\"approvals\":{\"required\":1},\"rollout\":{\"steps\":[100]}}");
    json_decref(cfx_promote(c, "m", 2, "prod", id));
    assert_int_equal(decide(c, "rev-a", id, false), MG_OK);
    cfx_expect_state(c, id, "rejected");
    expect_alias_on(c, "m", "prod", 1);

    cfx_policy(c, "m", "prod", SLOW_POLICY);
    p = cfx_promote(c, "m", 2, "prod", id);
    assert_string_equal(json_string_value(json_object_get(p, "state")), "rolling_out");
    json_decref(p);
    cfx_expect_alias_routes(c, "m", "prod", 2, 1, 90, 2, 10);
    /* A second promotion on the busy alias waits its turn. */
    {
        struct store_principal dep = cfx_who("dep");

        assert_int_equal(
            rel_promotion_create(&c->ctl, &dep, "m", 3, "prod", NULL, &out, &c->fx->err),
            MG_EINPROGRESS);
        assert_null(out);
    }
    assert_int_equal(
        rel_promotion_abort(&c->ctl, "dep", id, "error rate up on the canary", NULL, &c->fx->err),
        MG_OK);
    cfx_expect_state(c, id, "aborted");
    expect_alias_on(c, "m", "prod", 1);
    assert_true(cfx_has_event(c, id, "aborted", "error rate up on the canary"));
    assert_false(cfx_bad_for(c, "m", 2, "prod"));
    assert_int_equal(rel_promotion_abort(&c->ctl, "dep", id, "again", NULL, &c->fx->err),
                     MG_ECONFLICT);

    p = cfx_promote(c, "m", 2, "prod", id);
    json_decref(p);
    cfx_expect_state(c, id, "rolling_out");
    assert_int_equal(rel_rollback(&c->ctl, "dep", "m", "prod", "canary alerts", &out, &c->fx->err),
                     MG_OK);
    cfx_expect_routes(json_object_get(out, "routes"), 1, 1, 100);
    assert_true(json_is_null(json_object_get(out, "promotion")));
    json_decref(out);
    cfx_expect_state(c, id, "rolled_back");
    assert_true(cfx_bad_for(c, "m", 2, "prod"));
    assert_int_equal(cfx_lkg(c, "m", "prod"), 1);
    assert_int_equal(rel_promotion_advance(&c->ctl, "dep", id, NULL, &c->fx->err), MG_ECONFLICT);
}

/* A smoke test that errored (the runner's trouble) says nothing about the model; one that
 * failed rolls the rolling-out promotion of that version back, with the reason. */
static void test_smoke_finished(void **state)
{
    struct cfx *c = *state;
    struct ctl_event ev = {.kind = CTL_EV_SMOKE_FINISHED, .model = "m", .version = 2};
    char id[64];

    cfx_model(c, "m", 3, NULL);
    cfx_alias_to(c, "m", "prod", 1);
    cfx_policy(c, "m", "prod", SLOW_POLICY);
    json_decref(cfx_promote(c, "m", 2, "prod", id));
    cfx_expect_state(c, id, "rolling_out");
    cfx_calls_reset(c);

    rel_smoke_finished(&c->ctl, "m", 2, "error", "no such profile");
    rel_smoke_finished(&c->ctl, "m", 2, "passed", NULL);
    rel_smoke_finished(&c->ctl, "m", 3, "failed", "another version"); /* not the candidate */
    assert_int_equal(c->ncalls, 0); /* nothing committed, nobody kicked */
    cfx_expect_state(c, id, "rolling_out");
    cfx_expect_alias_routes(c, "m", "prod", 2, 1, 90, 2, 10);
    cfx_calls_reset(c);

    /* As the runner reports it: through the event door. */
    ev.state = "failed";
    ev.reason = "error rate 12% over 1%";
    ctl_event_post(&c->ctl, &ev);
    cfx_expect_state(c, id, "rolled_back");
    expect_alias_on(c, "m", "prod", 1);
    assert_true(cfx_has_event(c, id, "rolled_back", "smoke test of v2 failed"));
    assert_true(cfx_has_event(c, id, "rolled_back", "error rate 12% over 1%"));
    assert_int_equal(cfx_outbox_gen(c, "m", "prod"), 3);
    assert_int_equal(cfx_count(c, "gw.kick"), 1);
    assert_int_equal(cfx_lkg(c, "m", "prod"), 1);
}

/* A gateway that cannot apply a step rolls a rolling-out promotion back; a finished one is
 * left alone. */
static void test_delivery_failed(void **state)
{
    struct cfx *c = *state;
    struct ctl_event ev = {.kind = CTL_EV_DELIVERY_FAILED, .gateway = "edge", .error = "HTTP 500"};
    char id[64], done[64];

    cfx_model(c, "m", 3, NULL);
    cfx_alias_to(c, "m", "prod", 1);
    cfx_policy(c, "m", "prod", "{\"rollout\":{\"steps\":[100]}}");
    json_decref(cfx_promote(c, "m", 2, "prod", done));
    cfx_expect_state(c, done, "succeeded");
    rel_delivery_failed(&c->ctl, done, "edge", "HTTP 500");
    cfx_expect_state(c, done, "succeeded");
    expect_alias_on(c, "m", "prod", 2);

    cfx_policy(c, "m", "prod", SLOW_POLICY);
    json_decref(cfx_promote(c, "m", 3, "prod", id));
    cfx_expect_alias_routes(c, "m", "prod", 2, 2, 90, 3, 10);
    ev.promotion = id;
    ctl_event_post(&c->ctl, &ev);
    cfx_expect_state(c, id, "rolled_back");
    expect_alias_on(c, "m", "prod", 2);
    assert_true(cfx_has_event(c, id, "rolled_back", "gateway edge cannot apply the step"));
    assert_true(cfx_has_event(c, id, "rolled_back", "HTTP 500"));
    /* Unknown promotion: nothing happens. */
    rel_delivery_failed(&c->ctl, "prm_0000000000000000", "edge", "HTTP 500");
}

/* A policy requiring a smoke test: the promotion waits (evaluating) on the test queued with
 * it; once it passed, the clock starts the rollout in the shadow phase, which queues the
 * candidate's test again through the runner's table and ends only once that one passed; its
 * failure rolls the shadow phase back. A gateway that cannot mirror refuses the promotion. */
static void test_smoke_required_queues_through_runner(void **state)
{
    struct cfx *c = *state;
    const struct cfx_call *k;
    json_t *p, *out = NULL, *a;
    char id[64], st[16];
    struct store_principal dep = cfx_who("dep");

    cfx_model(c, "m", 2, NULL);
    cfx_alias_to(c, "m", "prod", 1);
    cfx_policy(c, "m", "prod", SMOKE_POLICY);

    /* The shadow phase needs every gateway to mirror: one that cannot refuses it up front. */
    c->refuse_check = "lb-haproxy";
    assert_int_equal(rel_promotion_create(&c->ctl, &dep, "m", 2, "prod", NULL, &out, &c->fx->err),
                     MG_EINVAL);
    assert_string_equal(c->fx->err.field, "alias");
    assert_non_null(strstr(c->fx->err.message, "lb-haproxy"));
    assert_non_null(strstr(c->fx->err.message, "shadow"));
    assert_int_equal(promotions_of(c, "m"), 0);
    assert_string_equal(cfx_smoke_state(c, "m", 2, st), "");
    c->refuse_check = NULL;
    cfx_calls_reset(c);

    p = cfx_promote(c, "m", 2, "prod", id);
    assert_string_equal(json_string_value(json_object_get(p, "state")), "evaluating");
    assert_string_equal(gate_status(json_object_get(p, "gates"), "smoke", NULL), "pending");
    json_decref(p);
    k = cfx_last(c, "gw.alias_check");
    assert_non_null(k);
    assert_int_equal(json_integer_value(json_object_get(k->shadow, "version")), 2);
    /* Queued in the promotion's own transaction; the runner is only woken. */
    assert_string_equal(cfx_smoke_state(c, "m", 2, st), "queued");
    assert_int_equal(cfx_count(c, "rn.kick"), 1);
    assert_int_equal(cfx_count(c, "rn.enqueue"), 0);
    expect_alias_held(c, "m", "prod", 1, id);

    /* Still queued: the clock looks and waits. */
    rel_tick(&c->ctl, store_clock_ms(c->fx->st));
    cfx_expect_state(c, id, "evaluating");

    /* Passed: the clock starts the shadow phase, which queues the candidate's test again. */
    cfx_smoke_finish(c, "m", 2, "passed", NULL);
    rel_smoke_finished(&c->ctl, "m", 2, "passed", NULL);
    cfx_expect_state(c, id, "evaluating"); /* the report alone moves nothing */
    rel_tick(&c->ctl, store_clock_ms(c->fx->st));
    cfx_expect_state(c, id, "rolling_out");
    p = cfx_promotion(c, id);
    assert_string_equal(json_string_value(json_object_get(json_object_get(p, "rollout"), "phase")),
                        "shadow");
    json_decref(p);
    a = cfx_alias(c, "m", "prod");
    cfx_expect_routes(json_object_get(a, "routes"), 1, 1, 100);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(a, "shadow"), "version")),
                     2);
    json_decref(a);
    assert_int_equal(cfx_count(c, "rn.enqueue"), 1);
    k = cfx_last(c, "rn.enqueue");
    assert_string_equal(k->model, "m");
    assert_int_equal(k->version, 2);
    assert_string_equal(k->trigger, "promotion");
    assert_string_equal(k->gpu_mode, "none");
    assert_int_equal(k->leader_epoch, store_leader_epoch(c->fx->st)); /* the clock's */
    assert_string_equal(cfx_smoke_state(c, "m", 2, st), "queued");

    /* The shadow phase ends only once that test passed. */
    assert_int_equal(rel_promotion_advance(&c->ctl, "dep", id, NULL, &c->fx->err), MG_ECONFLICT);
    assert_non_null(strstr(c->fx->err.message, "smoke test"));
    /* It failed: rolled back during the shadow phase; the mirror is gone. */
    cfx_smoke_finish(c, "m", 2, "failed", "exit 1");
    rel_smoke_finished(&c->ctl, "m", 2, "failed", "exit 1");
    cfx_expect_state(c, id, "rolled_back");
    assert_true(cfx_has_event(c, id, "rolled_back", "shadow phase"));
    a = cfx_alias(c, "m", "prod");
    cfx_expect_routes(json_object_get(a, "routes"), 1, 1, 100);
    assert_true(json_is_null(json_object_get(a, "shadow")));
    json_decref(a);
}

/* The same with no runner linked in: entering the shadow phase cannot queue (MG_EUNAVAIL,
 * dropped), and the promotion goes on: nothing pending, advance takes the first step. */
static void test_smoke_required_without_runner(void **state)
{
    struct cfx *c = *state;
    char id[64], st[16];

    cfx_model(c, "m", 2, NULL);
    cfx_alias_to(c, "m", "prod", 1);
    cfx_policy(c, "m", "prod", SMOKE_POLICY);
    cfx_unregister(c);
    cfx_calls_reset(c);

    json_decref(cfx_promote(c, "m", 2, "prod", id));
    cfx_expect_state(c, id, "evaluating");
    cfx_smoke_finish(c, "m", 2, "passed", NULL);
    rel_tick(&c->ctl, store_clock_ms(c->fx->st));
    cfx_expect_state(c, id, "rolling_out");
    assert_string_equal(cfx_smoke_state(c, "m", 2, st), "passed"); /* nothing queued again */
    assert_int_equal(rel_promotion_advance(&c->ctl, "dep", id, NULL, &c->fx->err), MG_OK);
    assert_int_equal(cfx_rollout_int(c, id, "weight"), 50);
    cfx_expect_alias_routes(c, "m", "prod", 2, 1, 50, 2, 50);
    assert_int_equal(c->ncalls, 0);
}

/* A smoke test that failed before the rollout began rejects the waiting promotion at the
 * next look of the clock. */
static void test_smoke_failed_while_evaluating_rejects(void **state)
{
    struct cfx *c = *state;
    char id[64];

    cfx_model(c, "m", 2, NULL);
    cfx_alias_to(c, "m", "prod", 1);
    cfx_policy(c, "m", "prod", SMOKE_POLICY);
    json_decref(cfx_promote(c, "m", 2, "prod", id));
    cfx_smoke_finish(c, "m", 2, "failed", "exit 3");
    rel_smoke_finished(&c->ctl, "m", 2, "failed", "exit 3");
    cfx_expect_state(c, id, "evaluating"); /* only a rolling-out promotion rolls back */
    rel_tick(&c->ctl, store_clock_ms(c->fx->st));
    cfx_expect_state(c, id, "rejected");
    expect_alias_on(c, "m", "prod", 1);
}

/* The fit gate asks the runner's table for the largest GPU: a 7B fp16 model (about 17 GiB)
 * fits 24 GiB, not 8 GiB, and with no runner (none reported) it fails. */
static void test_fit_gate_asks_the_runner(void **state)
{
    struct cfx *c = *state;
    json_t *r = NULL, *req;
    char art[72];
    static const struct {
        double gib;
        bool unregister;
        const char *want;
    } cases[] = {{24, false, "passed"}, {8, false, "failed"}, {-1, true, "failed"}};

    fx_put_blob(c->fx, "weights", art);
    fx_model(c->fx, "m");
    req = json_pack("{s:s, s:{s:I, s:s}}", "artifact", art, "resources", "parameters",
                    (json_int_t)7000000000LL, "precision", "fp16");
    assert_int_equal(fx_version(c->fx, "m", req), 1);
    cfx_policy(c, "m", "prod", "{\"smoke\":{\"required\":false,\"gpu\":\"required\"}}");
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        c->largest_gpu_gib = cases[i].gib;
        if (cases[i].unregister)
            cfx_unregister(c);
        cfx_calls_reset(c);
        assert_int_equal(rel_gates_dry_run(&c->ctl, "m", 1, "prod", &r, &c->fx->err), MG_OK);
        assert_string_equal(gate_status(json_object_get(r, "gates"), "fit", NULL), cases[i].want);
        assert_int_equal(cfx_count(c, "rn.largest_gpu_gib"), cases[i].unregister ? 0 : 1);
        json_decref(r);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_gates_block_and_dry_run, cfx_setup, cfx_teardown),
        cmocka_unit_test_setup_teardown(test_approvals_then_advance_to_success, cfx_setup,
                                        cfx_teardown),
        cmocka_unit_test_setup_teardown(test_reject_abort_and_rollback, cfx_setup, cfx_teardown),
        cmocka_unit_test_setup_teardown(test_smoke_finished, cfx_setup, cfx_teardown),
        cmocka_unit_test_setup_teardown(test_delivery_failed, cfx_setup, cfx_teardown),
        cmocka_unit_test_setup_teardown(test_smoke_required_queues_through_runner, cfx_setup,
                                        cfx_teardown),
        cmocka_unit_test_setup_teardown(test_smoke_required_without_runner, cfx_setup,
                                        cfx_teardown),
        cmocka_unit_test_setup_teardown(test_smoke_failed_while_evaluating_rejects, cfx_setup,
                                        cfx_teardown),
        cmocka_unit_test_setup_teardown(test_fit_gate_asks_the_runner, cfx_setup, cfx_teardown),
    };

    return cmocka_run_group_tests_name("unit_control_release_promotions", tests, NULL, NULL);
}
