/*
 * test_aliases.c - store/aliases.c (was in release.c): reading aliases (one,
 * a model's list), their history with pages, and the facts that release
 * decisions are made on. Changes are made with store_release_commit
 * (test_release.c tests the commit itself).
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

static void test_get_and_list(void **state)
{
    struct fx *fx = *state;
    char art[72], img_art[72];
    json_t *a = NULL, *list = NULL, *r, *items;

    fx_put_blob(fx, "weights", art);
    fx_put_blob(fx, "weights 2", img_art);
    fx_model(fx, "m");
    fx_version(fx, "m", json_pack("{s:s}", "artifact", art));
    fx_version(fx, "m", json_pack("{s:s, s:s}", "artifact", img_art, "image", "reg/m@sha256:ab"));
    fx_model_versions(fx, "empty", 0);
    assert_int_equal(fx_set_alias(fx, "m", "prod", 0, 1), 1);
    assert_int_equal(fx_set_alias(fx, "m", "prod", 1, 2), 2);
    assert_int_equal(fx_set_alias(fx, "m", "canary", 0, 1), 1);

    assert_int_equal(store_alias_get(fx->st, "m", "prod", &a, &fx->err), MG_OK);
    assert_string_equal(json_string_value(json_object_get(a, "model")), "m");
    assert_string_equal(json_string_value(json_object_get(a, "alias")), "prod");
    assert_int_equal(json_integer_value(json_object_get(a, "generation")), 2);
    assert_false(json_is_true(json_object_get(a, "protected")));
    assert_true(json_is_null(json_object_get(a, "promotion")));
    assert_true(json_is_null(json_object_get(a, "last_known_good"))); /* left for the caller */
    assert_true(fx_is_rfc3339_ms(json_string_value(json_object_get(a, "updated_at"))));
    /* Routes carry each version's artifact and image. */
    r = json_array_get(json_object_get(a, "routes"), 0);
    assert_int_equal(json_integer_value(json_object_get(r, "version")), 2);
    assert_string_equal(json_string_value(json_object_get(r, "artifact")), img_art);
    assert_string_equal(json_string_value(json_object_get(r, "image")), "reg/m@sha256:ab");
    /* Deliveries: the built-in runner hears every alias. */
    assert_int_equal(json_array_size(json_object_get(a, "deliveries")), 1);
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(a, "deliveries"), 0), "gateway")),
                        "runner");
    json_decref(a);

    /* A model's live aliases, by name, each as store_alias_get shows it. */
    assert_int_equal(store_alias_list(fx->st, "m", &list, &fx->err), MG_OK);
    items = json_object_get(list, "items");
    assert_int_equal(json_array_size(items), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(items, 0), "alias")),
                        "canary");
    assert_int_equal(store_alias_get(fx->st, "m", "prod", &a, &fx->err), MG_OK);
    assert_true(json_equal(json_array_get(items, 1), a));
    json_decref(a);
    json_decref(list);
    assert_int_equal(store_alias_list(fx->st, "empty", &list, &fx->err), MG_OK);
    assert_int_equal(json_array_size(json_object_get(list, "items")), 0);
    json_decref(list);

    a = NULL;
    assert_int_equal(store_alias_get(fx->st, "m", "nope", &a, &fx->err), MG_ENOTFOUND);
    assert_non_null(strstr(fx->err.message, "nope"));
    assert_int_equal(store_alias_get(fx->st, "nope", "prod", &a, &fx->err), MG_ENOTFOUND);
    assert_null(a);
    list = NULL;
    assert_int_equal(store_alias_list(fx->st, "nope", &list, &fx->err), MG_ENOTFOUND);
    assert_null(list);
}

/* Newest first, in pages that follow their tokens. */
static void test_history_pages(void **state)
{
    struct fx *fx = *state;
    struct store_page page = {.limit = 2};
    json_t *out = NULL, *items;
    char token[32];
    int64_t want = 5;

    fx_model_versions(fx, "m", 2);
    for (int64_t g = 0; g < 5; g++)
        assert_int_equal(fx_set_alias(fx, "m", "prod", g, 1 + g % 2), g + 1);

    for (int pages = 1;; pages++) {
        const json_t *next;

        assert_int_equal(store_alias_history(fx->st, "m", "prod", &page, &out, &fx->err), MG_OK);
        items = json_object_get(out, "items");
        for (size_t i = 0; i < json_array_size(items); i++, want--) {
            const json_t *h = json_array_get(items, i);

            assert_int_equal(json_integer_value(json_object_get(h, "generation")), want);
            assert_int_equal(json_integer_value(json_object_get(
                                 json_array_get(json_object_get(h, "routes"), 0), "version")),
                             1 + (want - 1) % 2);
            assert_string_equal(json_string_value(json_object_get(h, "kind")), "set");
            assert_string_equal(json_string_value(json_object_get(h, "by")), "alice");
            assert_true(fx_is_rfc3339_ms(json_string_value(json_object_get(h, "at"))));
            assert_true(json_is_null(json_object_get(h, "promotion")));
        }
        next = json_object_get(out, "next_page_token");
        if (json_is_null(next)) {
            assert_int_equal(pages, 3);
            json_decref(out);
            break;
        }
        assert_true(pages < 3);
        snprintf(token, sizeof(token), "%s", json_string_value(next));
        page.page_token = token;
        json_decref(out);
    }
    assert_int_equal(want, 0);

    out = NULL;
    page.page_token = "abc";
    assert_int_equal(store_alias_history(fx->st, "m", "prod", &page, &out, &fx->err), MG_EINVAL);
    assert_string_equal(fx->err.field, "page_token");
    page.page_token = NULL;
    assert_int_equal(store_alias_history(fx->st, "m", "nope", &page, &out, &fx->err), MG_ENOTFOUND);
    assert_null(out);
}

/* Facts: everything a release decision reads, for aliases that exist or not. */
static void test_facts(void **state)
{
    struct fx *fx = *state;
    json_t *f = NULL, *policy = json_object(), *out = NULL, *rec, *h;
    json_t *back = json_pack("[{s:i, s:i}]", "version", 1, "weight", 100);
    struct store_alias_change a;
    struct mg_routes rt;

    fx_model_versions(fx, "m", 2);

    /* Missing: exists false at generation 0, nothing else. */
    assert_int_equal(store_alias_facts(fx->st, "m", "prod", &f, &fx->err), MG_OK);
    assert_false(json_is_true(json_object_get(f, "exists")));
    assert_false(json_is_true(json_object_get(f, "deleted")));
    assert_int_equal(json_integer_value(json_object_get(f, "generation")), 0);
    assert_int_equal(json_array_size(json_object_get(f, "routes")), 0);
    assert_int_equal(json_array_size(json_object_get(f, "history")), 0);
    assert_int_equal(json_array_size(json_object_get(f, "bad")), 0);
    assert_false(json_is_true(json_object_get(f, "protected")));
    assert_true(json_is_null(json_object_get(f, "promotion")));
    json_decref(f);
    f = NULL;
    assert_int_equal(store_alias_facts(fx->st, "nope", "prod", &f, &fx->err), MG_ENOTFOUND);
    assert_null(f);

    assert_int_equal(fx_set_alias(fx, "m", "prod", 0, 1), 1);
    assert_int_equal(fx_set_alias(fx, "m", "prod", 1, 2), 2);
    memset(&a, 0, sizeof(a));
    a.model = "m";
    a.alias = "prod";
    a.expected_generation = 2;
    rt = fx_routes(back, NULL, NULL);
    a.routes = &rt;
    a.kind = "rollback";
    a.mark_bad = 2;
    assert_int_equal(store_release_commit(fx->st, "bob", &a, NULL, NULL, &fx->err), MG_OK);
    assert_int_equal(store_policy_put(fx->st, "alice", "m", "prod", policy, &out, &fx->err), MG_OK);
    json_decref(out);
    rec = json_pack("{s:s, s:s, s:s, s:i, s:n, s:s, s:{s:{s:[i]}}, s:[], s:i, s:i, s:i}", "id",
                    "prm_1", "model", "m", "alias", "prod", "version", 2, "baseline_version",
                    "state", "evaluating", "policy", "rollout", "steps", 100, "gates", "step_index",
                    -1, "weight", 0, "next_step_at_ms", 0);
    assert_int_equal(fx_promotion_create(fx, rec, "created", NULL, NULL, &out), MG_OK);
    json_decref(out);
    json_decref(rec);

    assert_int_equal(store_alias_facts(fx->st, "m", "prod", &f, &fx->err), MG_OK);
    assert_true(json_is_true(json_object_get(f, "exists")));
    assert_int_equal(json_integer_value(json_object_get(f, "generation")), 3);
    assert_true(json_equal(json_object_get(f, "routes"), back)); /* as stored, not enriched */
    assert_true(json_is_true(json_object_get(f, "protected")));
    assert_string_equal(json_string_value(json_object_get(f, "promotion")), "prm_1");
    /* The whole history, newest first. */
    assert_int_equal(json_array_size(json_object_get(f, "history")), 3);
    h = json_array_get(json_object_get(f, "history"), 0);
    assert_int_equal(json_integer_value(json_object_get(h, "generation")), 3);
    assert_string_equal(json_string_value(json_object_get(h, "kind")), "rollback");
    h = json_array_get(json_object_get(f, "history"), 2);
    assert_int_equal(json_integer_value(json_object_get(h, "generation")), 1);
    assert_int_equal(json_array_size(json_object_get(f, "bad")), 1);
    json_decref(f);
    json_decref(back);
    json_decref(policy);
}

/* docs/contract.md "Routing strategies": match rules and the shadow are stored with the generation
 * (alias, history, facts, the outbox payload), every version they name must exist, and a
 * version is "routed" by a weight above 0, a match rule or the shadow. */
static void test_strategies_and_routed(void **state)
{
    struct fx *fx = *state;
    json_t *routes = json_pack("[{s:i, s:i}, {s:i, s:i}]", "version", 1, "weight", 100, "version",
                               5, "weight", 0);
    json_t *match =
        json_pack("[{s:s, s:s, s:i}]", "header", "x-tenant", "value", "acme", "version", 2);
    json_t *shadow = json_pack("{s:i, s:i}", "version", 3, "percent", 40);
    json_t *bad_match =
        json_pack("[{s:s, s:s, s:i}]", "header", "x-tenant", "value", "b", "version", 9);
    json_t *bad_shadow = json_pack("{s:i, s:i}", "version", 9, "percent", 40);
    json_t *a = NULL, *f = NULL, *h = NULL, *list = NULL, *d;
    struct store_alias_change c;
    struct mg_routes rt;
    struct store_page page = {.limit = 10};

    fx_model_versions(fx, "m", 5);
    fx_model_versions(fx, "other", 3);
    memset(&c, 0, sizeof(c));
    c.model = "m";
    c.alias = "prod";
    rt = fx_routes(routes, bad_match, NULL);
    c.routes = &rt;
    c.kind = "set";
    /* unknown versions: refused naming the field, nothing written */
    assert_int_equal(store_release_commit(fx->st, "alice", &c, NULL, NULL, &fx->err), MG_EINVAL);
    assert_string_equal(fx->err.field, "match[0].version");
    rt = fx_routes(routes, match, bad_shadow);
    assert_int_equal(store_release_commit(fx->st, "alice", &c, NULL, NULL, &fx->err), MG_EINVAL);
    assert_string_equal(fx->err.field, "shadow.version");
    assert_int_equal(store_alias_get(fx->st, "m", "prod", &a, &fx->err), MG_ENOTFOUND);

    rt = fx_routes(routes, match, shadow);
    assert_int_equal(store_release_commit(fx->st, "alice", &c, NULL, NULL, &fx->err), MG_OK);
    assert_int_equal(store_alias_get(fx->st, "m", "prod", &a, &fx->err), MG_OK);
    assert_int_equal(json_integer_value(json_object_get(
                         json_array_get(json_object_get(a, "match"), 0), "version")),
                     2);
    assert_non_null(json_object_get(json_array_get(json_object_get(a, "match"), 0), "artifact"));
    assert_int_equal(json_integer_value(json_object_get(json_object_get(a, "shadow"), "percent")),
                     40);
    assert_non_null(json_object_get(json_object_get(a, "shadow"), "artifact"));
    json_decref(a);
    assert_int_equal(store_alias_facts(fx->st, "m", "prod", &f, &fx->err), MG_OK);
    assert_true(json_equal(json_object_get(f, "match"), match));
    assert_true(json_equal(json_object_get(f, "shadow"), shadow));
    assert_true(json_equal(
        json_object_get(json_array_get(json_object_get(f, "history"), 0), "match"), match));
    json_decref(f);
    assert_int_equal(store_alias_history(fx->st, "m", "prod", &page, &h, &fx->err), MG_OK);
    assert_true(json_equal(
        json_object_get(json_array_get(json_object_get(h, "items"), 0), "shadow"), shadow));
    json_decref(h);
    /* what the gateways are told: the whole generation, enriched like the routes */
    {
        struct store_delivery del;
        bool found = false;

        memset(&del, 0, sizeof(del));
        assert_int_equal(
            store_outbox_claim(fx->st, store_clock_ms(fx->st), 60000, &del, &found, &fx->err),
            MG_OK);
        assert_true(found);
        d = json_object_get(del.payload, "match");
        assert_int_equal(json_array_size(d), 1);
        assert_non_null(json_object_get(json_array_get(d, 0), "artifact"));
        assert_int_equal(
            json_integer_value(json_object_get(json_object_get(del.payload, "shadow"), "version")),
            3);
        store_delivery_release(&del);
    }

    /* routed: weight > 0 (v1), a match rule (v2), the shadow (v3); not v4, not v5 at 0 */
    for (int v = 1; v <= 5; v++) {
        json_t *names = NULL;

        assert_int_equal(store_version_routed(fx->st, "m", v, &names, &fx->err), MG_OK);
        assert_int_equal(json_array_size(names), v <= 3 ? 1 : 0);
        if (v <= 3)
            assert_string_equal(json_string_value(json_array_get(names, 0)), "prod");
        json_decref(names);
    }
    assert_int_equal(store_version_routed(fx->st, "nope", 1, &list, &fx->err), MG_ENOTFOUND);
    assert_int_equal(fx_set_alias(fx, "other", "prod", 0, 3), 1);
    assert_int_equal(store_routed_versions(fx->st, &list, &fx->err), MG_OK);
    assert_int_equal(json_array_size(list), 4); /* m 1, 2, 3 and other 3, sorted */
    assert_int_equal(json_integer_value(json_object_get(json_array_get(list, 2), "version")), 3);
    assert_string_equal(json_string_value(json_object_get(json_array_get(list, 3), "model")),
                        "other");
    json_decref(list);
    assert_int_equal(store_alias_strategies(fx->st, &list, &fx->err), MG_OK);
    assert_int_equal(json_array_size(list), 1);
    assert_true(json_equal(json_object_get(json_array_get(list, 0), "shadow"), shadow));
    json_decref(list);

    /* the pure helpers agree */
    assert_true(store_generation_routes(routes, match, shadow, 2));
    assert_true(store_generation_routes(routes, NULL, shadow, 3));
    assert_false(store_generation_routes(routes, match, NULL, 3));
    assert_false(store_generation_routes(routes, match, shadow, 5));
    list = store_generation_versions(routes, match, shadow);
    assert_int_equal(json_array_size(list), 3);
    json_decref(list);

    /* a change without them clears them */
    c.expected_generation = 1;
    rt = fx_routes(routes, NULL, NULL);
    assert_int_equal(store_release_commit(fx->st, "alice", &c, NULL, NULL, &fx->err), MG_OK);
    assert_int_equal(store_alias_get(fx->st, "m", "prod", &a, &fx->err), MG_OK);
    assert_int_equal(json_array_size(json_object_get(a, "match")), 0);
    assert_true(json_is_null(json_object_get(a, "shadow")));
    json_decref(a);
    assert_int_equal(store_version_routed(fx->st, "m", 3, &list, &fx->err), MG_OK);
    assert_int_equal(json_array_size(list), 0);
    json_decref(list);
    json_decref(routes);
    json_decref(match);
    json_decref(shadow);
    json_decref(bad_match);
    json_decref(bad_shadow);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, fx_setup, fx_teardown)
    const struct CMUnitTest tests[] = {
        T(test_get_and_list),
        T(test_history_pages),
        T(test_facts),
        T(test_strategies_and_routed),
    };
#undef T

    return cmocka_run_group_tests(tests, NULL, NULL);
}
