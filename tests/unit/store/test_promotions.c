/*
 * test_promotions.c - store/promotions.c: creating a promotion (its first
 * event, its first alias change and smoke test in the same transaction), one
 * active promotion per alias, reads with approvals and events, lists with
 * filters and pages, and what the timer asks for.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "store_fixture.h"

/* A promotion record of m/<alias> to version 2 (baseline 1) in `state`, rev 1. NEW. */
static json_t *promo_rec(const char *id, const char *model, const char *alias, const char *state)
{
    json_t *rec =
        json_pack("{s:s, s:s, s:s, s:i, s:i, s:s, s:s, s:{s:{s:[{s:i}, {s:i}]}},"
                  " s:[{s:s, s:s}], s:i, s:i, s:i}",
                  "id", id, "model", model, "alias", alias, "version", 2, "baseline_version", 1,
                  "state", state, "reason", "better auc", "policy", "rollout", "steps", "weight",
                  10, "weight", 100, "gates", "name", "auc", "status", "pending", "step_index", -1,
                  "weight", 0, "next_step_at_ms", 0);

    assert_non_null(rec);
    return rec;
}

static enum mg_code create(struct fx *fx, json_t *rec, const struct store_alias_change *a,
                           json_t **out)
{
    enum mg_code rc = fx_promotion_create(fx, rec, "created", "gates pending", a, out);

    json_decref(rec);
    return rc;
}

static void make(struct fx *fx, const char *id, const char *model, const char *alias,
                 const char *state)
{
    json_t *p = NULL;

    if (create(fx, promo_rec(id, model, alias, state), NULL, &p) != MG_OK)
        fail_msg("store_promotion_create(%s): %s", id, fx->err.message);
    json_decref(p);
}

/* Move a promotion to state through store_release_commit, on the revision it has now. */
static void move(struct fx *fx, const char *id, const char *state)
{
    struct store_promotion_change pc;
    json_t *p = NULL;

    assert_int_equal(store_promotion_get(fx->st, id, &p, &fx->err), MG_OK);
    memset(&pc, 0, sizeof(pc));
    pc.id = id;
    pc.expected_rev = json_integer_value(json_object_get(p, "_rev"));
    pc.state = state;
    pc.step_index = -1;
    json_decref(p);
    if (store_release_commit(fx->st, "alice", NULL, &pc, NULL, &fx->err) != MG_OK)
        fail_msg("store_release_commit(%s): %s", id, fx->err.message);
}

static void test_create_and_get(void **state)
{
    struct fx *fx = *state;
    json_t *p = NULL, *got = NULL, *ev, *facts = NULL;

    fx_model_versions(fx, "m", 2);
    assert_int_equal(create(fx, promo_rec("prm_1", "m", "prod", "awaiting_approval"), NULL, &p),
                     MG_OK);
    assert_string_equal(json_string_value(json_object_get(p, "id")), "prm_1");
    assert_string_equal(json_string_value(json_object_get(p, "model")), "m");
    assert_string_equal(json_string_value(json_object_get(p, "alias")), "prod");
    assert_int_equal(json_integer_value(json_object_get(p, "version")), 2);
    assert_int_equal(json_integer_value(json_object_get(p, "baseline_version")), 1);
    assert_string_equal(json_string_value(json_object_get(p, "state")), "awaiting_approval");
    assert_string_equal(json_string_value(json_object_get(p, "reason")), "better auc");
    assert_string_equal(json_string_value(json_object_get(p, "created_by")), "alice");
    assert_true(fx_is_rfc3339_ms(json_string_value(json_object_get(p, "created_at"))));
    assert_int_equal(json_integer_value(json_object_get(p, "_rev")), 1);
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(json_object_get(p, "gates"), 0), "name")),
        "auc");
    assert_int_equal(json_array_size(json_object_get(json_object_get(p, "rollout"), "steps")), 2);
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(p, "rollout"), "step_index")), -1);
    assert_true(json_is_null(json_object_get(json_object_get(p, "rollout"), "next_step_at")));
    assert_int_equal(json_array_size(json_object_get(p, "approvals")), 0);
    /* The first event is recorded with the promotion. */
    assert_int_equal(json_array_size(json_object_get(p, "events")), 1);
    ev = json_array_get(json_object_get(p, "events"), 0);
    assert_string_equal(json_string_value(json_object_get(ev, "type")), "created");
    assert_string_equal(json_string_value(json_object_get(ev, "detail")), "gates pending");
    assert_true(fx_is_rfc3339_ms(json_string_value(json_object_get(ev, "at"))));

    assert_int_equal(store_promotion_get(fx->st, "prm_1", &got, &fx->err), MG_OK);
    assert_true(json_equal(p, got));
    json_decref(got);
    json_decref(p);
    assert_int_equal(fx_audit_count_action(fx, "promotion.create"), 1);

    /* The alias knows its active promotion (though no route was set yet). */
    assert_int_equal(store_alias_facts(fx->st, "m", "prod", &facts, &fx->err), MG_OK);
    assert_string_equal(json_string_value(json_object_get(facts, "promotion")), "prm_1");
    json_decref(facts);

    got = NULL;
    assert_int_equal(store_promotion_get(fx->st, "prm_nope", &got, &fx->err), MG_ENOTFOUND);
    assert_null(got);
    assert_int_equal(create(fx, promo_rec("prm_2", "nope", "prod", "evaluating"), NULL, &got),
                     MG_ENOTFOUND);
    assert_null(got);
}

/* One active promotion per alias: a second is refused until the first is over. */
static void test_one_active_per_alias(void **state)
{
    struct fx *fx = *state;
    json_t *p = NULL;
    size_t audit;

    fx_model_versions(fx, "m", 2);
    make(fx, "prm_1", "m", "prod", "evaluating");
    audit = fx_audit_count(fx);

    assert_int_equal(create(fx, promo_rec("prm_2", "m", "prod", "awaiting_approval"), NULL, &p),
                     MG_EINPROGRESS);
    assert_null(p);
    assert_non_null(strstr(fx->err.message, "prod"));
    assert_int_equal(store_promotion_get(fx->st, "prm_2", &p, &fx->err), MG_ENOTFOUND);
    assert_int_equal(fx_audit_count(fx), audit);

    /* Every active state counts. */
    move(fx, "prm_1", "rolling_out");
    assert_int_equal(create(fx, promo_rec("prm_2", "m", "prod", "evaluating"), NULL, &p),
                     MG_EINPROGRESS);
    move(fx, "prm_1", "awaiting_approval");
    assert_int_equal(create(fx, promo_rec("prm_2", "m", "prod", "evaluating"), NULL, &p),
                     MG_EINPROGRESS);

    /* Another alias of the model is free. */
    make(fx, "prm_3", "m", "canary", "evaluating");

    /* Once the first is over, the alias takes a new one. */
    move(fx, "prm_1", "aborted");
    make(fx, "prm_2", "m", "prod", "evaluating");
}

/* The first alias change and the smoke test are written with the promotion, or nothing is. */
static void test_create_with_alias_change_and_smoke(void **state)
{
    struct fx *fx = *state;
    json_t *routes = json_pack("[{s:i, s:i}, {s:i, s:i}]", "version", 1, "weight", 90, "version", 2,
                               "weight", 10),
           *rec, *p = NULL, *alias = NULL, *smoke = NULL, *t;
    struct store_alias_change a;

    fx_model_versions(fx, "m", 2);
    assert_int_equal(fx_set_alias(fx, "m", "prod", 0, 1), 1);
    memset(&a, 0, sizeof(a));
    a.model = "m";
    a.alias = "prod";
    a.routes = fx_routes_of(routes);
    a.kind = "step";
    a.promotion = "prm_1";

    /* Decided on a generation that is gone: no promotion, no change, no smoke test. */
    a.expected_generation = 0;
    rec = promo_rec("prm_1", "m", "prod", "rolling_out");
    json_object_set_new(rec, "_smoke_gpu", json_string("required"));
    assert_int_equal(create(fx, rec, &a, &p), MG_ESTALE);
    assert_null(p);
    assert_int_equal(store_promotion_get(fx->st, "prm_1", &p, &fx->err), MG_ENOTFOUND);
    assert_int_equal(store_smoke_list(fx->st, "m", 2, &smoke, &fx->err), MG_OK);
    assert_int_equal(json_array_size(json_object_get(smoke, "items")), 0);
    json_decref(smoke);
    assert_int_equal(fx_audit_count_action(fx, "promotion.create"), 0);

    a.expected_generation = 1;
    rec = promo_rec("prm_1", "m", "prod", "rolling_out");
    json_object_set_new(rec, "_smoke_gpu", json_string("required"));
    assert_int_equal(create(fx, rec, &a, &p), MG_OK);
    json_decref(p);
    assert_int_equal(store_alias_get(fx->st, "m", "prod", &alias, &fx->err), MG_OK);
    assert_int_equal(json_integer_value(json_object_get(alias, "generation")), 2);
    assert_string_equal(json_string_value(json_object_get(alias, "promotion")), "prm_1");
    assert_int_equal(json_array_size(json_object_get(alias, "routes")), 2);
    json_decref(alias);
    assert_int_equal(store_smoke_list(fx->st, "m", 2, &smoke, &fx->err), MG_OK);
    assert_int_equal(json_array_size(json_object_get(smoke, "items")), 1);
    t = json_array_get(json_object_get(smoke, "items"), 0);
    assert_string_equal(json_string_value(json_object_get(t, "trigger")), "promotion");
    assert_string_equal(json_string_value(json_object_get(t, "gpu_mode")), "required");
    assert_string_equal(json_string_value(json_object_get(t, "state")), "queued");
    json_decref(smoke);
    json_decref(routes);
}

/* Approvals (with the decider's teams) and events come back with the promotion, in order;
 * one decision per approver. */
static void test_approvals_and_events(void **state)
{
    struct fx *fx = *state;
    struct store_promotion_change pc;
    json_t *p = NULL, *appr, *ev;

    fx_model_versions(fx, "m", 2);
    make(fx, "prm_1", "m", "prod", "awaiting_approval");

    memset(&pc, 0, sizeof(pc));
    pc.id = "prm_1";
    pc.expected_rev = 1;
    pc.state = "awaiting_approval";
    pc.step_index = -1;
    pc.event_type = "approval";
    pc.event_detail = "rita approved";
    pc.approval_by = "rita";
    pc.approval_decision = "approve";
    pc.approval_comment = "lgtm";
    pc.approval_teams = "[\"ml\"]";
    assert_int_equal(store_release_commit(fx->st, "rita", NULL, &pc, NULL, &fx->err), MG_OK);

    /* The same approver again: refused, and the state change with it is not kept. */
    pc.expected_rev = 2;
    pc.state = "rolling_out";
    pc.approval_decision = "reject";
    assert_int_equal(store_release_commit(fx->st, "rita", NULL, &pc, NULL, &fx->err), MG_ECONFLICT);
    assert_non_null(strstr(fx->err.message, "rita"));

    pc.approval_by = "sam";
    pc.approval_decision = "approve";
    pc.approval_comment = NULL;
    pc.approval_teams = NULL;
    pc.event_detail = "sam approved";
    assert_int_equal(store_release_commit(fx->st, "sam", NULL, &pc, NULL, &fx->err), MG_OK);

    assert_int_equal(store_promotion_get(fx->st, "prm_1", &p, &fx->err), MG_OK);
    assert_int_equal(json_integer_value(json_object_get(p, "_rev")), 3);
    assert_string_equal(json_string_value(json_object_get(p, "state")), "rolling_out");
    appr = json_object_get(p, "approvals");
    assert_int_equal(json_array_size(appr), 2);
    {
        json_t *r = json_array_get(appr, 0), *s = json_array_get(appr, 1);

        /* Ordered by time, then name: rita decided first. */
        assert_string_equal(json_string_value(json_object_get(r, "by")), "rita");
        assert_string_equal(json_string_value(json_object_get(r, "decision")), "approve");
        assert_string_equal(json_string_value(json_object_get(r, "comment")), "lgtm");
        assert_string_equal(json_string_value(json_array_get(json_object_get(r, "teams"), 0)),
                            "ml");
        assert_true(fx_is_rfc3339_ms(json_string_value(json_object_get(r, "at"))));
        assert_string_equal(json_string_value(json_object_get(s, "by")), "sam");
        assert_true(json_is_null(json_object_get(s, "comment")));
        assert_int_equal(json_array_size(json_object_get(s, "teams")), 0);
    }
    ev = json_object_get(p, "events");
    assert_int_equal(json_array_size(ev), 3);
    assert_string_equal(json_string_value(json_object_get(json_array_get(ev, 0), "type")),
                        "created");
    assert_string_equal(json_string_value(json_object_get(json_array_get(ev, 1), "detail")),
                        "rita approved");
    assert_string_equal(json_string_value(json_object_get(json_array_get(ev, 2), "detail")),
                        "sam approved");
    json_decref(p);
    assert_int_equal(fx_audit_count_action(fx, "promotion.decide"), 2);
}

static void expect_ids(struct fx *fx, const char *state, const char *model, const char *alias,
                       const char *const *ids, size_t n)
{
    struct store_page page = {.limit = 100};
    json_t *out = NULL, *items;

    if (store_promotion_list(fx->st, state, model, alias, &page, &out, &fx->err) != MG_OK)
        fail_msg("store_promotion_list: %s", fx->err.message);
    items = json_object_get(out, "items");
    if (json_array_size(items) != n)
        fail_msg("%zu promotions, want %zu", json_array_size(items), n);
    for (size_t i = 0; i < n; i++)
        assert_string_equal(json_string_value(json_object_get(json_array_get(items, i), "id")),
                            ids[i]);
    assert_true(json_is_null(json_object_get(out, "next_page_token")));
    json_decref(out);
}

/* Newest first; state, model and alias filters combine; pages follow their tokens. */
static void test_list_filters_and_pages(void **state)
{
    static const char *const all[] = {"prm_5", "prm_4", "prm_3", "prm_2", "prm_1"};
    static const char *const of_m[] = {"prm_5", "prm_3", "prm_2", "prm_1"};
    static const char *const m_prod[] = {"prm_5", "prm_1"};
    static const char *const aborted[] = {"prm_2", "prm_1"};
    static const char *const n_prod[] = {"prm_4"};
    struct fx *fx = *state;
    struct store_page page = {.limit = 2};
    json_t *out = NULL, *items;
    char token[64];
    size_t seen = 0;
    int pages = 0;

    fx_model_versions(fx, "m", 2);
    fx_model_versions(fx, "n", 2);
    /* Created in id order: the list's tie-break (same millisecond) is the id. */
    make(fx, "prm_1", "m", "prod", "evaluating");
    move(fx, "prm_1", "aborted");
    make(fx, "prm_2", "m", "canary", "evaluating");
    move(fx, "prm_2", "aborted");
    make(fx, "prm_3", "m", "canary", "awaiting_approval");
    make(fx, "prm_4", "n", "prod", "evaluating");
    make(fx, "prm_5", "m", "prod", "evaluating");

    expect_ids(fx, NULL, NULL, NULL, all, 5);
    expect_ids(fx, NULL, "m", NULL, of_m, 4);
    expect_ids(fx, NULL, "m", "prod", m_prod, 2);
    expect_ids(fx, "aborted", NULL, NULL, aborted, 2);
    expect_ids(fx, "evaluating", NULL, "prod", (const char *const[]){"prm_5", "prm_4"}, 2);
    expect_ids(fx, NULL, "n", "prod", n_prod, 1);
    expect_ids(fx, "rolling_out", NULL, NULL, NULL, 0);
    expect_ids(fx, NULL, "nope", NULL, NULL, 0);

    /* Pages of 2 over everything: 2 + 2 + 1, each page continuing the last. */
    for (;;) {
        const json_t *next;

        assert_int_equal(store_promotion_list(fx->st, NULL, NULL, NULL, &page, &out, &fx->err),
                         MG_OK);
        items = json_object_get(out, "items");
        assert_true(json_array_size(items) >= 1 && json_array_size(items) <= 2);
        for (size_t i = 0; i < json_array_size(items); i++) {
            const json_t *p = json_array_get(items, i);

            assert_string_equal(json_string_value(json_object_get(p, "id")), all[seen++]);
            /* Internal members stay inside the store's callers. */
            assert_null(json_object_get(p, "_rev"));
            assert_null(json_object_get(p, "_next_step_at_ms"));
        }
        pages++;
        next = json_object_get(out, "next_page_token");
        if (json_is_null(next)) {
            json_decref(out);
            break;
        }
        snprintf(token, sizeof(token), "%s", json_string_value(next));
        page.page_token = token;
        json_decref(out);
        assert_true(pages < 10);
    }
    assert_int_equal(seen, 5);
    assert_int_equal(pages, 3);

    /* A filtered list pages too. */
    page.page_token = NULL;
    page.limit = 1;
    assert_int_equal(store_promotion_list(fx->st, NULL, "m", "prod", &page, &out, &fx->err), MG_OK);
    assert_string_equal(json_string_value(json_object_get(out, "next_page_token")), "prm_5");
    json_decref(out);
    page.page_token = "prm_5";
    assert_int_equal(store_promotion_list(fx->st, NULL, "m", "prod", &page, &out, &fx->err), MG_OK);
    items = json_object_get(out, "items");
    assert_int_equal(json_array_size(items), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(items, 0), "id")),
                        "prm_1");
    assert_true(json_is_null(json_object_get(out, "next_page_token")));
    json_decref(out);
}

/* The timer's question: rolling-out steps due by now, all evaluating ones, the next step. */
static void test_pending(void **state)
{
    struct fx *fx = *state;
    json_t *rec, *p = NULL, *out = NULL;
    const int64_t now = 4000000000000; /* a fixed "now", in 2096 */

    fx_model_versions(fx, "m", 2);
    fx_model_versions(fx, "n", 2);
    fx_model_versions(fx, "o", 2);
    rec = promo_rec("prm_due", "m", "prod", "rolling_out");
    json_object_set_new(rec, "next_step_at_ms", json_integer(now - 1));
    assert_int_equal(create(fx, rec, NULL, &p), MG_OK);
    assert_true(fx_is_rfc3339_ms(
        json_string_value(json_object_get(json_object_get(p, "rollout"), "next_step_at"))));
    assert_int_equal(json_integer_value(json_object_get(p, "_next_step_at_ms")), now - 1);
    json_decref(p);
    rec = promo_rec("prm_later", "n", "prod", "rolling_out");
    json_object_set_new(rec, "next_step_at_ms", json_integer(now + 5000));
    assert_int_equal(create(fx, rec, NULL, &p), MG_OK);
    json_decref(p);
    make(fx, "prm_eval", "o", "prod", "evaluating");
    make(fx, "prm_wait", "o", "canary", "awaiting_approval");

    assert_int_equal(store_promotion_pending(fx->st, now, &out, &fx->err), MG_OK);
    assert_int_equal(json_array_size(json_object_get(out, "due")), 1);
    assert_string_equal(json_string_value(json_array_get(json_object_get(out, "due"), 0)),
                        "prm_due");
    assert_int_equal(json_array_size(json_object_get(out, "evaluating")), 1);
    assert_string_equal(json_string_value(json_array_get(json_object_get(out, "evaluating"), 0)),
                        "prm_eval");
    assert_int_equal(json_integer_value(json_object_get(out, "next_at_ms")), now + 5000);
    json_decref(out);

    /* Later, both steps are due and nothing waits beyond them. */
    assert_int_equal(store_promotion_pending(fx->st, now + 5000, &out, &fx->err), MG_OK);
    assert_int_equal(json_array_size(json_object_get(out, "due")), 2);
    assert_int_equal(json_integer_value(json_object_get(out, "next_at_ms")), 0);
    json_decref(out);
}

/*
 * A promotion whose policy has no rollout.steps reads with an empty list in their
 * place; the sanitizer build checks that the list is not leaked (it was: packed with
 * "O", which took a second reference).
 */
static void test_policy_without_steps(void **state)
{
    struct fx *fx = *state;
    json_t *rec, *p = NULL;

    fx_model_versions(fx, "m", 2);
    rec = promo_rec("prm_1", "m", "prod", "evaluating");
    json_object_set_new(rec, "policy", json_object());
    assert_int_equal(create(fx, rec, NULL, &p), MG_OK);
    assert_true(json_is_array(json_object_get(json_object_get(p, "rollout"), "steps")));
    assert_int_equal(json_array_size(json_object_get(json_object_get(p, "rollout"), "steps")), 0);
    json_decref(p);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, fx_setup, fx_teardown)
    const struct CMUnitTest tests[] = {
        T(test_create_and_get),
        T(test_one_active_per_alias),
        T(test_create_with_alias_change_and_smoke),
        T(test_approvals_and_events),
        T(test_list_filters_and_pages),
        T(test_pending),
        T(test_policy_without_steps),
    };
#undef T

    return cmocka_run_group_tests(tests, NULL, NULL);
}
