/*
 * test_gateways.c - store/gateways.c (was push.c): gateways created and
 * replaced (each given the current state of every alias it hears), read
 * without their secret, listed, disabled and deleted; the built-in runner
 * that cannot be changed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/util.h"
#include "store_fixture.h"

static enum mg_code put(struct fx *fx, const char *name, const json_t *models,
                        const json_t *aliases, json_t **out, bool *created)
{
    json_t *config = json_pack("{s:s}", "url", "https://gw.example/v2");
    enum mg_code rc = store_gateway_put(fx->st, "alice", name, "webhook", config, "topsecret",
                                        models, aliases, out, created, &fx->err);

    json_decref(config);
    return rc;
}

/* The secret never leaves the store through a read. */
static void assert_no_secret(const json_t *v)
{
    char *text = json_dumps(v, JSON_COMPACT);

    assert_non_null(text);
    assert_null(strstr(text, "topsecret"));
    free(text);
}

static void test_put_get(void **state)
{
    struct fx *fx = *state;
    json_t *models = json_pack("[s]", "m"), *g = NULL, *got = NULL;
    bool created = false;

    assert_int_equal(put(fx, "edge", models, NULL, &g, &created), MG_OK);
    assert_true(created);
    assert_string_equal(json_string_value(json_object_get(g, "name")), "edge");
    assert_string_equal(json_string_value(json_object_get(g, "kind")), "webhook");
    assert_string_equal(json_string_value(json_object_get(json_object_get(g, "config"), "url")),
                        "https://gw.example/v2");
    assert_true(json_equal(json_object_get(g, "models"), models));
    assert_true(json_is_null(json_object_get(g, "aliases")));
    assert_false(json_is_true(json_object_get(g, "disabled")));
    assert_true(json_is_null(json_object_get(g, "disabled_reason")));
    assert_true(fx_is_rfc3339_ms(json_string_value(json_object_get(g, "created_at"))));
    assert_int_equal(json_array_size(json_object_get(g, "deliveries")), 0);
    assert_no_secret(g);
    assert_int_equal(store_gateway_get(fx->st, "edge", &got, &fx->err), MG_OK);
    assert_true(json_equal(g, got));
    json_decref(got);
    json_decref(g);

    /* Put again: replaced (models now all), not created. */
    assert_int_equal(put(fx, "edge", NULL, NULL, &g, &created), MG_OK);
    assert_false(created);
    assert_true(json_is_null(json_object_get(g, "models")));
    json_decref(g);
    assert_int_equal(fx_audit_count_action(fx, "gateway.create"), 1);
    assert_int_equal(fx_audit_count_action(fx, "gateway.update"), 1);

    got = NULL;
    assert_int_equal(store_gateway_get(fx->st, "nope", &got, &fx->err), MG_ENOTFOUND);
    assert_null(got);
    json_decref(models);
}

/* A new or changed gateway is given the current state of every live alias it hears. */
static void test_put_enqueues_current_state(void **state)
{
    struct fx *fx = *state;
    json_t *only_n = json_pack("[s]", "n"), *only_prod = json_pack("[s]", "prod"), *g = NULL, *d;
    bool created;

    fx_model_versions(fx, "m", 2);
    fx_model_versions(fx, "n", 1);
    assert_int_equal(fx_set_alias(fx, "m", "prod", 0, 1), 1);
    assert_int_equal(fx_set_alias(fx, "m", "prod", 1, 2), 2);
    assert_int_equal(fx_set_alias(fx, "m", "canary", 0, 1), 1);
    assert_int_equal(fx_set_alias(fx, "n", "prod", 0, 1), 1);

    assert_int_equal(put(fx, "edge", NULL, NULL, &g, &created), MG_OK);
    assert_int_equal(json_array_size(json_object_get(g, "deliveries")), 3);
    json_decref(g);
    d = fx_delivery(fx, "edge", "m", "prod");
    assert_int_equal(json_integer_value(json_object_get(d, "generation")), 2);
    assert_string_equal(json_string_value(json_object_get(d, "state")), "pending");
    assert_int_equal(json_integer_value(json_object_get(d, "attempts")), 0);
    json_decref(d);

    /* Filters: by model, by alias. */
    assert_int_equal(put(fx, "edge-n", only_n, NULL, &g, &created), MG_OK);
    assert_int_equal(json_array_size(json_object_get(g, "deliveries")), 1);
    json_decref(g);
    assert_null(fx_delivery(fx, "edge-n", "m", "prod"));
    d = fx_delivery(fx, "edge-n", "n", "prod");
    assert_non_null(d);
    json_decref(d);
    assert_int_equal(put(fx, "edge-prod", NULL, only_prod, &g, &created), MG_OK);
    assert_int_equal(json_array_size(json_object_get(g, "deliveries")), 2);
    json_decref(g);
    assert_null(fx_delivery(fx, "edge-prod", "m", "canary"));

    /* Narrowed on replace: rows for what it no longer hears are gone. */
    assert_int_equal(put(fx, "edge", only_n, NULL, &g, &created), MG_OK);
    assert_int_equal(json_array_size(json_object_get(g, "deliveries")), 1);
    json_decref(g);
    assert_null(fx_delivery(fx, "edge", "m", "prod"));
    json_decref(only_n);
    json_decref(only_prod);
}

static void test_list_and_configs(void **state)
{
    struct fx *fx = *state;
    json_t *aliases = json_pack("[s]", "prod"), *out = NULL, *items, *c;

    fx_gateway(fx, "zeta", NULL, aliases);
    fx_gateway(fx, "alpha", NULL, NULL);
    assert_int_equal(store_gateway_list(fx->st, &out, &fx->err), MG_OK);
    items = json_object_get(out, "items");
    assert_int_equal(json_array_size(items), 3); /* with the built-in runner */
    assert_string_equal(json_string_value(json_object_get(json_array_get(items, 0), "name")),
                        "alpha");
    assert_string_equal(json_string_value(json_object_get(json_array_get(items, 1), "name")),
                        "runner");
    assert_string_equal(json_string_value(json_object_get(json_array_get(items, 2), "name")),
                        "zeta");
    assert_true(json_is_null(json_object_get(out, "next_page_token")));
    json_decref(out);

    assert_int_equal(store_gateway_configs(fx->st, &out, &fx->err), MG_OK);
    assert_int_equal(json_array_size(out), 3);
    c = json_array_get(out, 2);
    assert_string_equal(json_string_value(json_object_get(c, "name")), "zeta");
    assert_string_equal(json_string_value(json_object_get(c, "kind")), "webhook");
    assert_true(json_equal(json_object_get(c, "aliases"), aliases));
    assert_false(json_is_true(json_object_get(c, "disabled")));
    assert_null(json_object_get(c, "deliveries"));
    assert_null(json_object_get(c, "secret"));
    json_decref(out);
    json_decref(aliases);
}

/* The built-in runner can be neither replaced nor deleted. */
static void test_runner_is_built_in(void **state)
{
    struct fx *fx = *state;
    json_t *g = NULL;
    bool created = true;
    size_t audit = fx_audit_count(fx);

    assert_int_equal(put(fx, "runner", NULL, NULL, &g, &created), MG_ECONFLICT);
    assert_string_equal(fx->err.field, "name");
    assert_null(g);
    assert_int_equal(store_gateway_delete(fx->st, "alice", "runner", &fx->err), MG_ECONFLICT);
    assert_int_equal(store_gateway_get(fx->st, "runner", &g, &fx->err), MG_OK);
    assert_string_equal(json_string_value(json_object_get(g, "kind")), "runner");
    json_decref(g);
    assert_int_equal(fx_audit_count(fx), audit);
}

/* Deleting a gateway takes its outbox rows; later changes are not queued for it. */
static void test_delete(void **state)
{
    struct fx *fx = *state;
    json_t *g = NULL;
    bool created;

    fx_model_versions(fx, "m", 1);
    assert_int_equal(fx_set_alias(fx, "m", "prod", 0, 1), 1);
    fx_gateway(fx, "edge", NULL, NULL);
    assert_int_equal(store_gateway_delete(fx->st, "alice", "edge", &fx->err), MG_OK);
    assert_int_equal(store_gateway_get(fx->st, "edge", &g, &fx->err), MG_ENOTFOUND);
    assert_int_equal(store_gateway_delete(fx->st, "alice", "edge", &fx->err), MG_ENOTFOUND);
    assert_int_equal(fx_audit_count_action(fx, "gateway.delete"), 1);
    assert_int_equal(fx_set_alias(fx, "m", "prod", 1, 1), 2);

    /* Created again under the same name: only the current state, no leftovers. */
    assert_int_equal(put(fx, "edge", NULL, NULL, &g, &created), MG_OK);
    assert_true(created);
    assert_int_equal(json_array_size(json_object_get(g, "deliveries")), 1);
    assert_int_equal(json_integer_value(json_object_get(
                         json_array_get(json_object_get(g, "deliveries"), 0), "generation")),
                     2);
    json_decref(g);
}

/* Disabled: shown with its reason, skipped by claims; a put enables it again. */
static void test_disable(void **state)
{
    struct fx *fx = *state;
    struct store_delivery d;
    json_t *g = NULL;
    bool found = true, created;
    int64_t next = -1;

    fx_model_versions(fx, "m", 1);
    assert_int_equal(store_gateway_disable(fx->st, "runner", "not under test", &fx->err), MG_OK);
    fx_gateway(fx, "edge", NULL, NULL);
    assert_int_equal(fx_set_alias(fx, "m", "prod", 0, 1), 1);
    assert_int_equal(store_gateway_disable(fx->st, "edge", "410 Gone", &fx->err), MG_OK);
    assert_int_equal(store_gateway_get(fx->st, "edge", &g, &fx->err), MG_OK);
    assert_true(json_is_true(json_object_get(g, "disabled")));
    assert_string_equal(json_string_value(json_object_get(g, "disabled_reason")), "410 Gone");
    json_decref(g);
    assert_int_equal(fx_audit_count_action(fx, "gateway.disable"), 2);

    assert_int_equal(store_outbox_claim(fx->st, mg_now_ms(), 1000, &d, &found, &fx->err), MG_OK);
    assert_false(found);
    assert_int_equal(store_outbox_next_due(fx->st, &next, &fx->err), MG_OK);
    assert_int_equal(next, 0);

    assert_int_equal(put(fx, "edge", NULL, NULL, &g, &created), MG_OK);
    assert_false(json_is_true(json_object_get(g, "disabled")));
    assert_true(json_is_null(json_object_get(g, "disabled_reason")));
    json_decref(g);
    assert_int_equal(store_outbox_claim(fx->st, mg_now_ms(), 1000, &d, &found, &fx->err), MG_OK);
    assert_true(found);
    assert_string_equal(d.gateway, "edge");
    store_delivery_release(&d);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, fx_setup, fx_teardown)
    const struct CMUnitTest tests[] = {
        T(test_put_get),          T(test_put_enqueues_current_state),
        T(test_list_and_configs), T(test_runner_is_built_in),
        T(test_delete),           T(test_disable),
    };
#undef T

    return cmocka_run_group_tests(tests, NULL, NULL);
}
