/*
 * test_policies.c - store/policies.c (was in release.c): an alias's policy
 * stored, read, replaced and deleted, each audited; a policy is what makes
 * an alias protected.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include <jansson.h>

#include "store_fixture.h"

static void test_put_get_delete(void **state)
{
    struct fx *fx = *state;
    json_t *p1 = json_pack("{s:{s:[{s:i, s:i}, {s:i}]}, s:[{s:s, s:s, s:f}]}", "rollout", "steps",
                           "weight", 10, "bake_seconds", 600, "weight", 100, "gates", "metric",
                           "auc", "op", ">=", "value", 0.9),
           *p2 = json_pack("{s:{s:[{s:i}]}}", "rollout", "steps", "weight", 100), *out = NULL,
           *got = NULL;

    fx_model_versions(fx, "m", 1);
    assert_int_equal(store_policy_get(fx->st, "m", "prod", &got, &fx->err), MG_ENOTFOUND);
    assert_null(got);

    assert_int_equal(store_policy_put(fx->st, "alice", "m", "prod", p1, &out, &fx->err), MG_OK);
    assert_true(json_equal(out, p1));
    assert_true(out != p1); /* a copy the caller owns */
    json_decref(out);
    assert_int_equal(store_policy_get(fx->st, "m", "prod", &got, &fx->err), MG_OK);
    assert_true(json_equal(got, p1));
    json_decref(got);

    /* Per alias: another alias of the model has none. */
    assert_int_equal(store_policy_get(fx->st, "m", "canary", &got, &fx->err), MG_ENOTFOUND);

    /* Put again: replaced whole. */
    assert_int_equal(store_policy_put(fx->st, "bob", "m", "prod", p2, &out, &fx->err), MG_OK);
    json_decref(out);
    assert_int_equal(store_policy_get(fx->st, "m", "prod", &got, &fx->err), MG_OK);
    assert_true(json_equal(got, p2));
    assert_null(json_object_get(got, "gates"));
    json_decref(got);
    assert_int_equal(fx_audit_count_action(fx, "policy.put"), 2);

    assert_int_equal(store_policy_delete(fx->st, "bob", "m", "prod", &fx->err), MG_OK);
    got = NULL;
    assert_int_equal(store_policy_get(fx->st, "m", "prod", &got, &fx->err), MG_ENOTFOUND);
    assert_null(got);
    assert_int_equal(store_policy_delete(fx->st, "bob", "m", "prod", &fx->err), MG_ENOTFOUND);
    assert_int_equal(fx_audit_count_action(fx, "policy.delete"), 1);

    out = NULL;
    assert_int_equal(store_policy_put(fx->st, "alice", "nope", "prod", p1, &out, &fx->err),
                     MG_ENOTFOUND);
    assert_null(out);
    assert_int_equal(store_policy_get(fx->st, "nope", "prod", &got, &fx->err), MG_ENOTFOUND);
    assert_int_equal(store_policy_delete(fx->st, "bob", "nope", "prod", &fx->err), MG_ENOTFOUND);
    assert_int_equal(fx_audit_count_action(fx, "policy.put"), 2);
    json_decref(p1);
    json_decref(p2);
}

/* A policy protects its alias from direct changes for as long as it exists. */
static void test_policy_protects_alias(void **state)
{
    struct fx *fx = *state;
    json_t *policy = json_object(), *out = NULL, *a = NULL;
    json_t *routes = json_pack("[{s:i, s:i}]", "version", 1, "weight", 100);
    struct store_alias_change c;

    fx_model_versions(fx, "m", 1);
    assert_int_equal(fx_set_alias(fx, "m", "prod", 0, 1), 1);
    assert_int_equal(store_policy_put(fx->st, "alice", "m", "prod", policy, &out, &fx->err), MG_OK);
    json_decref(out);
    assert_int_equal(store_alias_get(fx->st, "m", "prod", &a, &fx->err), MG_OK);
    assert_true(json_is_true(json_object_get(a, "protected")));
    json_decref(a);

    memset(&c, 0, sizeof(c));
    c.model = "m";
    c.alias = "prod";
    c.expected_generation = 1;
    c.routes = fx_routes_of(routes);
    c.kind = "set";
    c.require_unprotected = true;
    assert_int_equal(store_release_commit(fx->st, "bob", &c, NULL, NULL, &fx->err), MG_EPROTECTED);

    assert_int_equal(store_policy_delete(fx->st, "alice", "m", "prod", &fx->err), MG_OK);
    assert_int_equal(store_alias_get(fx->st, "m", "prod", &a, &fx->err), MG_OK);
    assert_false(json_is_true(json_object_get(a, "protected")));
    json_decref(a);
    assert_int_equal(store_release_commit(fx->st, "bob", &c, NULL, NULL, &fx->err), MG_OK);
    json_decref(routes);
    json_decref(policy);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, fx_setup, fx_teardown)
    const struct CMUnitTest tests[] = {
        T(test_put_get_delete),
        T(test_policy_protects_alias),
    };
#undef T

    return cmocka_run_group_tests(tests, NULL, NULL);
}
