/*
 * test_release.c - store/release.c: store_release_commit, the one transaction
 * that changes an alias (routes, a new generation, its history, bad marks,
 * gateway names) and/or a promotion, writes an outbox row for every gateway
 * that hears the alias, and appends the audit entry; or, refused, changes
 * nothing at all.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include <jansson.h>

#include "store_fixture.h"

/* A change of m/<alias> to routes (BORROWED), decided on generation expected. */
static struct store_alias_change change(const char *alias, int64_t expected, const json_t *routes,
                                        const char *kind)
{
    struct store_alias_change a;

    memset(&a, 0, sizeof(a));
    a.model = "m";
    a.alias = alias;
    a.expected_generation = expected;
    a.routes = fx_routes_of(routes);
    a.kind = kind;
    return a;
}

static int64_t generation_of(struct fx *fx, const char *alias)
{
    json_t *f = NULL;
    int64_t g;

    if (store_alias_facts(fx->st, "m", alias, &f, &fx->err) != MG_OK)
        fail_msg("store_alias_facts: %s", fx->err.message);
    g = json_integer_value(json_object_get(f, "generation"));
    json_decref(f);
    return g;
}

static size_t history_len(struct fx *fx, const char *alias)
{
    json_t *f = NULL;
    size_t n;

    if (store_alias_facts(fx->st, "m", alias, &f, &fx->err) != MG_OK)
        fail_msg("store_alias_facts: %s", fx->err.message);
    n = json_array_size(json_object_get(f, "history"));
    json_decref(f);
    return n;
}

static int64_t delivery_generation(struct fx *fx, const char *gateway, const char *alias)
{
    json_t *d = fx_delivery(fx, gateway, "m", alias);
    int64_t g = d ? json_integer_value(json_object_get(d, "generation")) : 0;

    json_decref(d);
    return g;
}

/* A promotion of m/<alias> to version 2 awaiting approval, rev 1. */
static void make_promotion(struct fx *fx, const char *id, const char *alias)
{
    json_t *rec =
               json_pack("{s:s, s:s, s:s, s:i, s:i, s:s, s:{s:{s:[i]}}, s:[], s:i, s:i, s:i}", "id",
                         id, "model", "m", "alias", alias, "version", 2, "baseline_version", 1,
                         "state", "awaiting_approval", "policy", "rollout", "steps", 100, "gates",
                         "step_index", -1, "weight", 0, "next_step_at_ms", 0),
           *p = NULL;

    if (fx_promotion_create(fx, rec, "created", NULL, NULL, &p) != MG_OK)
        fail_msg("store_promotion_create: %s", fx->err.message);
    json_decref(p);
    json_decref(rec);
}

static int64_t promotion_rev(struct fx *fx, const char *id)
{
    json_t *p = NULL;
    int64_t rev;

    if (store_promotion_get(fx->st, id, &p, &fx->err) != MG_OK)
        fail_msg("store_promotion_get: %s", fx->err.message);
    rev = json_integer_value(json_object_get(p, "_rev"));
    json_decref(p);
    return rev;
}

/* Routes, a new generation, history, an outbox row per gateway that hears the alias and
 * the audit entry, from one call; the next change replaces each gateway's row. */
static void test_commit_writes_everything(void **state)
{
    struct fx *fx = *state;
    json_t *only_x = json_pack("[s]", "x"), *out = NULL, *got = NULL, *r, *hist = NULL;
    json_t *routes = json_pack("[{s:i, s:i}]", "version", 1, "weight", 100);
    struct store_alias_change a;
    struct store_page page = {.limit = 10};
    char art[72];
    uint64_t e0;

    fx_model_versions(fx, "m", 2);
    fx_digest("weights", 7, art);
    fx_gateway(fx, "edge", NULL, NULL);
    fx_gateway(fx, "edge-x", only_x, NULL); /* hears model x only */
    e0 = fx_epoch(fx, "m");

    a = change("prod", 0, routes, "set");
    a.reason = "first rollout";
    assert_int_equal(store_release_commit(fx->st, "bob", &a, NULL, &out, &fx->err), MG_OK);
    assert_true(fx_epoch(fx, "m") != e0);
    assert_string_equal(json_string_value(json_object_get(out, "model")), "m");
    assert_string_equal(json_string_value(json_object_get(out, "alias")), "prod");
    assert_int_equal(json_integer_value(json_object_get(out, "generation")), 1);
    assert_false(json_is_true(json_object_get(out, "protected")));
    assert_true(json_is_null(json_object_get(out, "promotion")));
    assert_int_equal(json_array_size(json_object_get(out, "routes")), 1);
    r = json_array_get(json_object_get(out, "routes"), 0);
    assert_int_equal(json_integer_value(json_object_get(r, "version")), 1);
    assert_int_equal(json_integer_value(json_object_get(r, "weight")), 100);
    assert_string_equal(json_string_value(json_object_get(r, "artifact")), art);
    assert_true(json_is_null(json_object_get(r, "image")));
    /* What was returned is what is stored. */
    assert_int_equal(store_alias_get(fx->st, "m", "prod", &got, &fx->err), MG_OK);
    assert_true(json_equal(json_object_get(got, "routes"), json_object_get(out, "routes")));
    assert_int_equal(json_integer_value(json_object_get(got, "generation")), 1);
    json_decref(got);
    json_decref(out);

    /* One outbox row per gateway that hears m/prod: edge and the built-in runner. */
    assert_int_equal(delivery_generation(fx, "edge", "prod"), 1);
    assert_int_equal(delivery_generation(fx, "runner", "prod"), 1);
    assert_null(fx_delivery(fx, "edge-x", "m", "prod"));
    got = fx_delivery(fx, "edge", "m", "prod");
    assert_string_equal(json_string_value(json_object_get(got, "state")), "pending");
    json_decref(got);

    assert_int_equal(store_alias_history(fx->st, "m", "prod", &page, &hist, &fx->err), MG_OK);
    assert_int_equal(json_array_size(json_object_get(hist, "items")), 1);
    r = json_array_get(json_object_get(hist, "items"), 0);
    assert_int_equal(json_integer_value(json_object_get(r, "generation")), 1);
    assert_string_equal(json_string_value(json_object_get(r, "kind")), "set");
    assert_string_equal(json_string_value(json_object_get(r, "reason")), "first rollout");
    assert_string_equal(json_string_value(json_object_get(r, "by")), "bob");
    json_decref(hist);
    assert_int_equal(fx_audit_count_action(fx, "alias.update"), 1);

    /* The next generation replaces each gateway's row: desired state, not a queue. */
    json_decref(routes);
    routes = json_pack("[{s:i, s:i}, {s:i, s:i}]", "version", 1, "weight", 90, "version", 2,
                       "weight", 10);
    a = change("prod", 1, routes, "step");
    assert_int_equal(store_release_commit(fx->st, "bob", &a, NULL, &out, &fx->err), MG_OK);
    assert_int_equal(json_integer_value(json_object_get(out, "generation")), 2);
    assert_int_equal(json_array_size(json_object_get(out, "routes")), 2);
    json_decref(out);
    assert_int_equal(delivery_generation(fx, "edge", "prod"), 2);
    assert_int_equal(delivery_generation(fx, "runner", "prod"), 2);
    assert_int_equal(history_len(fx, "prod"), 2);
    assert_int_equal(fx_audit_count_action(fx, "alias.update"), 2);

    json_decref(routes);
    json_decref(only_x);
}

/* A decision made on an older generation is refused, and nothing of it is written. */
static void test_commit_stale_generation(void **state)
{
    struct fx *fx = *state;
    json_t *routes = json_pack("[{s:i, s:i}]", "version", 2, "weight", 100), *out = NULL;
    struct store_alias_change a;
    size_t audit;
    uint64_t e0;

    fx_model_versions(fx, "m", 2);
    fx_gateway(fx, "edge", NULL, NULL);
    assert_int_equal(fx_set_alias(fx, "m", "prod", 0, 1), 1);
    audit = fx_audit_count(fx);
    e0 = fx_epoch(fx, "m");

    /* 0: decided before the alias existed; 2: a generation that never was. */
    a = change("prod", 0, routes, "set");
    assert_int_equal(store_release_commit(fx->st, "bob", &a, NULL, &out, &fx->err), MG_ESTALE);
    assert_null(out);
    assert_non_null(strstr(fx->err.message, "prod"));
    a.expected_generation = 2;
    assert_int_equal(store_release_commit(fx->st, "bob", &a, NULL, &out, &fx->err), MG_ESTALE);
    assert_null(out);

    assert_int_equal(generation_of(fx, "prod"), 1);
    assert_int_equal(history_len(fx, "prod"), 1);
    assert_int_equal(delivery_generation(fx, "edge", "prod"), 1);
    assert_int_equal(fx_audit_count(fx), audit);
    assert_int_equal(fx_epoch(fx, "m"), e0);

    /* A new alias is decided on generation 0. */
    a = change("canary", 1, routes, "set");
    assert_int_equal(store_release_commit(fx->st, "bob", &a, NULL, NULL, &fx->err), MG_ESTALE);
    a.expected_generation = 0;
    assert_int_equal(store_release_commit(fx->st, "bob", &a, NULL, NULL, &fx->err), MG_OK);
    assert_int_equal(generation_of(fx, "canary"), 1);
    json_decref(routes);
}

/* A policy protects an alias from direct changes; the promotion path (not requiring it
 * unprotected) still changes it. */
static void test_commit_protected_alias(void **state)
{
    struct fx *fx = *state;
    json_t *routes = json_pack("[{s:i, s:i}]", "version", 2, "weight", 100), *out = NULL;
    json_t *policy = json_pack("{s:{s:[{s:i}]}}", "rollout", "steps", "weight", 100);
    struct store_alias_change a;
    size_t audit;

    fx_model_versions(fx, "m", 2);
    assert_int_equal(fx_set_alias(fx, "m", "prod", 0, 1), 1);
    assert_int_equal(store_policy_put(fx->st, "alice", "m", "prod", policy, &out, &fx->err), MG_OK);
    json_decref(out);
    out = NULL;
    audit = fx_audit_count(fx);

    a = change("prod", 1, routes, "set");
    a.require_unprotected = true;
    assert_int_equal(store_release_commit(fx->st, "bob", &a, NULL, &out, &fx->err), MG_EPROTECTED);
    assert_null(out);
    assert_non_null(strstr(fx->err.message, "protected"));
    assert_int_equal(generation_of(fx, "prod"), 1);
    assert_int_equal(delivery_generation(fx, "runner", "prod"), 1);
    assert_int_equal(fx_audit_count(fx), audit);

    /* Protection is per alias: another alias of the model is not protected. */
    a = change("canary", 0, routes, "set");
    a.require_unprotected = true;
    assert_int_equal(store_release_commit(fx->st, "bob", &a, NULL, NULL, &fx->err), MG_OK);

    a = change("prod", 1, routes, "promoted");
    assert_int_equal(store_release_commit(fx->st, "bob", &a, NULL, &out, &fx->err), MG_OK);
    assert_int_equal(json_integer_value(json_object_get(out, "generation")), 2);
    assert_true(json_is_true(json_object_get(out, "protected")));
    json_decref(out);
    json_decref(policy);
    json_decref(routes);
}

/* A route to a version the model does not have is refused before anything is written. */
static void test_commit_unknown_version(void **state)
{
    struct fx *fx = *state;
    json_t *routes = json_pack("[{s:i, s:i}, {s:i, s:i}]", "version", 1, "weight", 50, "version", 9,
                               "weight", 50),
           *facts = NULL;
    struct store_alias_change a;

    fx_model_versions(fx, "m", 2);
    a = change("prod", 0, routes, "set");
    assert_int_equal(store_release_commit(fx->st, "bob", &a, NULL, NULL, &fx->err), MG_EINVAL);
    assert_string_equal(fx->err.field, "routes");
    assert_int_equal(store_alias_facts(fx->st, "m", "prod", &facts, &fx->err), MG_OK);
    assert_false(json_is_true(json_object_get(facts, "exists")));
    assert_int_equal(json_integer_value(json_object_get(facts, "generation")), 0);
    json_decref(facts);
    assert_null(fx_delivery(fx, "runner", "m", "prod"));

    a.model = "nope";
    assert_int_equal(store_release_commit(fx->st, "bob", &a, NULL, NULL, &fx->err), MG_ENOTFOUND);
    json_decref(routes);
}

/* The promotion change and the alias change commit together or not at all. */
static void test_commit_promotion_and_alias_atomic(void **state)
{
    struct fx *fx = *state;
    json_t *good = json_pack("[{s:i, s:i}, {s:i, s:i}]", "version", 1, "weight", 90, "version", 2,
                             "weight", 10),
           *bad = json_pack("[{s:i, s:i}]", "version", 7, "weight", 100), *out = NULL, *p = NULL;
    struct store_alias_change a;
    struct store_promotion_change pc;
    size_t audit;

    fx_model_versions(fx, "m", 2);
    assert_int_equal(fx_set_alias(fx, "m", "prod", 0, 1), 1);
    make_promotion(fx, "prm_1", "prod");
    audit = fx_audit_count(fx);

    memset(&pc, 0, sizeof(pc));
    pc.id = "prm_1";
    pc.expected_rev = 1;
    pc.state = "rolling_out";
    pc.step_index = 0;
    pc.weight = 10;
    pc.event_type = "step";
    pc.event_detail = "10%";

    /* The alias half fails: the promotion half is rolled back with it. */
    a = change("prod", 1, bad, "step");
    a.promotion = "prm_1";
    assert_int_equal(store_release_commit(fx->st, "bob", &a, &pc, &out, &fx->err), MG_EINVAL);
    assert_null(out);
    assert_int_equal(promotion_rev(fx, "prm_1"), 1);
    assert_int_equal(generation_of(fx, "prod"), 1);
    assert_int_equal(fx_audit_count(fx), audit);

    /* Both halves good: both land, with the promotion named on the alias and its payload. */
    a.routes = fx_routes_of(good);
    assert_int_equal(store_release_commit(fx->st, "bob", &a, &pc, &out, &fx->err), MG_OK);
    assert_int_equal(json_integer_value(json_object_get(out, "generation")), 2);
    assert_string_equal(json_string_value(json_object_get(out, "promotion")), "prm_1");
    json_decref(out);
    assert_int_equal(store_promotion_get(fx->st, "prm_1", &p, &fx->err), MG_OK);
    assert_int_equal(json_integer_value(json_object_get(p, "_rev")), 2);
    assert_string_equal(json_string_value(json_object_get(p, "state")), "rolling_out");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(p, "rollout"), "weight")),
                     10);
    assert_int_equal(json_array_size(json_object_get(p, "events")), 2);
    json_decref(p);
    assert_int_equal(fx_audit_count(fx), audit + 2); /* promotion.update, alias.update */
    assert_int_equal(fx_audit_count_action(fx, "promotion.update"), 1);

    /* The revision it was decided on is gone: refused, nothing written. */
    a.expected_generation = 2;
    assert_int_equal(store_release_commit(fx->st, "bob", &a, &pc, NULL, &fx->err), MG_ESTALE);
    assert_int_equal(promotion_rev(fx, "prm_1"), 2);
    assert_int_equal(generation_of(fx, "prod"), 2);
    json_decref(good);
    json_decref(bad);
}

/* Delete: a new generation with no routes, the alias gone from reads, the gateways told. */
static void test_commit_delete(void **state)
{
    struct fx *fx = *state;
    json_t *none = json_array(), *out = NULL, *list = NULL, *d, *facts = NULL;
    struct store_alias_change a;

    fx_model_versions(fx, "m", 1);
    fx_gateway(fx, "edge", NULL, NULL);
    assert_int_equal(fx_set_alias(fx, "m", "prod", 0, 1), 1);
    assert_int_equal(fx_set_alias(fx, "m", "canary", 0, 1), 1);

    a = change("prod", 1, none, "delete");
    assert_int_equal(store_release_commit(fx->st, "bob", &a, NULL, &out, &fx->err), MG_OK);
    assert_null(out); /* nothing to show of a deleted alias */
    assert_int_equal(store_alias_get(fx->st, "m", "prod", &out, &fx->err), MG_ENOTFOUND);
    assert_null(out);
    assert_int_equal(store_alias_list(fx->st, "m", &list, &fx->err), MG_OK);
    assert_int_equal(json_array_size(json_object_get(list, "items")), 1);
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(list, "items"), 0), "alias")),
                        "canary");
    json_decref(list);
    assert_int_equal(store_alias_facts(fx->st, "m", "prod", &facts, &fx->err), MG_OK);
    assert_true(json_is_true(json_object_get(facts, "deleted")));
    assert_false(json_is_true(json_object_get(facts, "exists")));
    assert_int_equal(json_integer_value(json_object_get(facts, "generation")), 2);
    json_decref(facts);

    d = fx_delivery(fx, "edge", "m", "prod");
    assert_int_equal(json_integer_value(json_object_get(d, "generation")), 2);
    assert_string_equal(json_string_value(json_object_get(d, "state")), "pending");
    json_decref(d);
    assert_int_equal(fx_audit_count_action(fx, "alias.delete"), 1);

    /* Set again, decided on the deleted generation. */
    assert_int_equal(fx_set_alias(fx, "m", "prod", 2, 1), 3);
    json_decref(none);
}

/* A rollback marks the version bad for the alias, at the generation of the change. */
static void test_commit_mark_bad(void **state)
{
    struct fx *fx = *state;
    json_t *routes = json_pack("[{s:i, s:i}]", "version", 1, "weight", 100), *facts = NULL, *b;
    struct store_alias_change a;

    fx_model_versions(fx, "m", 2);
    assert_int_equal(fx_set_alias(fx, "m", "prod", 0, 1), 1);
    assert_int_equal(fx_set_alias(fx, "m", "prod", 1, 2), 2);
    a = change("prod", 2, routes, "rollback");
    a.mark_bad = 2;
    a.reason = "error rate";
    assert_int_equal(store_release_commit(fx->st, "bob", &a, NULL, NULL, &fx->err), MG_OK);
    assert_int_equal(store_alias_facts(fx->st, "m", "prod", &facts, &fx->err), MG_OK);
    assert_int_equal(json_array_size(json_object_get(facts, "bad")), 1);
    b = json_array_get(json_object_get(facts, "bad"), 0);
    assert_int_equal(json_integer_value(json_object_get(b, "version")), 2);
    assert_int_equal(json_integer_value(json_object_get(b, "generation")), 3);
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(facts, "history"), 0), "kind")),
                        "rollback");
    json_decref(facts);
    json_decref(routes);
}

/* A gateway object name belongs to one alias (or, scope "model", to one model): another
 * alias claiming it is refused and changes nothing. */
static void test_commit_gateway_names(void **state)
{
    struct fx *fx = *state;
    json_t *routes = json_pack("[{s:i, s:i}]", "version", 1, "weight", 100), *facts = NULL;
    json_t *alias_name =
        json_pack("[{s:s, s:s, s:s}]", "gateway", "edge", "name", "m-backend", "scope", "alias");
    json_t *model_name =
        json_pack("[{s:s, s:s, s:s}]", "gateway", "edge", "name", "m-all", "scope", "model");
    struct store_alias_change a;
    char art[72];

    fx_model_versions(fx, "m", 1);
    fx_digest("weights", 7, art);
    fx_model(fx, "n");
    assert_int_equal(fx_version(fx, "n", json_pack("{s:s}", "artifact", art)), 1);

    a = change("prod", 0, routes, "set");
    a.names = alias_name;
    assert_int_equal(store_release_commit(fx->st, "bob", &a, NULL, NULL, &fx->err), MG_OK);
    /* The alias that holds a name may use it again. */
    a.expected_generation = 1;
    assert_int_equal(store_release_commit(fx->st, "bob", &a, NULL, NULL, &fx->err), MG_OK);

    a = change("canary", 0, routes, "set");
    a.names = alias_name;
    assert_int_equal(store_release_commit(fx->st, "bob", &a, NULL, NULL, &fx->err), MG_ECONFLICT);
    assert_string_equal(fx->err.field, "alias");
    assert_non_null(strstr(fx->err.message, "m-backend"));
    assert_non_null(strstr(fx->err.message, "'prod'"));
    assert_int_equal(store_alias_facts(fx->st, "m", "canary", &facts, &fx->err), MG_OK);
    assert_false(json_is_true(json_object_get(facts, "exists")));
    json_decref(facts);
    assert_null(fx_delivery(fx, "runner", "m", "canary"));

    /* A model-scoped name is shared by the model's aliases, and by no other model. */
    a = change("prod", 2, routes, "set");
    a.names = model_name;
    assert_int_equal(store_release_commit(fx->st, "bob", &a, NULL, NULL, &fx->err), MG_OK);
    a = change("canary", 0, routes, "set");
    a.names = model_name;
    assert_int_equal(store_release_commit(fx->st, "bob", &a, NULL, NULL, &fx->err), MG_OK);
    a = change("prod", 0, routes, "set");
    a.model = "n";
    a.names = model_name;
    assert_int_equal(store_release_commit(fx->st, "bob", &a, NULL, NULL, &fx->err), MG_ECONFLICT);
    assert_non_null(strstr(fx->err.message, "model 'm'"));
    assert_int_equal(store_alias_facts(fx->st, "n", "prod", &facts, &fx->err), MG_OK);
    assert_false(json_is_true(json_object_get(facts, "exists")));
    json_decref(facts);

    json_decref(routes);
    json_decref(alias_name);
    json_decref(model_name);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, fx_setup, fx_teardown)
    const struct CMUnitTest tests[] = {
        T(test_commit_writes_everything),
        T(test_commit_stale_generation),
        T(test_commit_protected_alias),
        T(test_commit_unknown_version),
        T(test_commit_promotion_and_alias_atomic),
        T(test_commit_delete),
        T(test_commit_mark_bad),
        T(test_commit_gateway_names),
    };
#undef T

    return cmocka_run_group_tests(tests, NULL, NULL);
}
