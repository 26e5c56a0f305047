/*
 * test_models.c - store/models.c: models created, read, listed (q, pages) and patched,
 * each change with its audit entry; the teams that own a model.
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

static void test_model_create_get(void **state)
{
    struct fx *fx = *state;
    json_t *req, *m = NULL, *got = NULL, *dup = NULL, *items, *last;
    size_t before;

    req = json_pack("{s:s, s:s, s:{s:s}}", "name", "resnet", "description", "image model", "tags",
                    "team", "vision");
    assert_int_equal(store_model_create(fx->st, "alice", req, &m, &fx->err), MG_OK);
    assert_string_equal(json_string_value(json_object_get(m, "name")), "resnet");
    assert_string_equal(json_string_value(json_object_get(m, "description")), "image model");
    assert_string_equal(json_string_value(json_object_get(json_object_get(m, "tags"), "team")),
                        "vision");
    assert_string_equal(json_string_value(json_object_get(m, "created_by")), "alice");
    assert_true(fx_is_rfc3339_ms(json_string_value(json_object_get(m, "created_at"))));
    assert_true(json_is_null(json_object_get(m, "latest_version")));
    assert_int_equal(json_array_size(json_object_get(m, "aliases")), 0);

    assert_int_equal(store_model_get(fx->st, "resnet", &got, &fx->err), MG_OK);
    assert_true(json_equal(m, got));
    json_decref(got);

    /* The change and its audit record go together. */
    items = fx_audit_items(fx);
    last = json_array_get(items, json_array_size(items) - 1);
    assert_string_equal(json_string_value(json_object_get(last, "action")), "model.create");
    assert_string_equal(json_string_value(json_object_get(last, "actor")), "alice");
    assert_string_equal(json_string_value(json_object_get(last, "target")), "resnet");
    json_decref(items);

    /* A second create conflicts and records nothing. */
    before = fx_audit_count(fx);
    assert_int_equal(store_model_create(fx->st, "bob", req, &dup, &fx->err), MG_ECONFLICT);
    assert_string_equal(fx->err.field, "name");
    assert_null(dup);
    assert_int_equal(fx_audit_count(fx), before);
    json_decref(req);
    json_decref(m);

    /* Optional members default. */
    req = json_pack("{s:s}", "name", "bare");
    assert_int_equal(store_model_create(fx->st, "alice", req, &m, &fx->err), MG_OK);
    assert_string_equal(json_string_value(json_object_get(m, "description")), "");
    assert_true(json_is_object(json_object_get(m, "tags")));
    assert_int_equal(json_object_size(json_object_get(m, "tags")), 0);
    json_decref(m);
    json_decref(req);

    got = NULL;
    assert_int_equal(store_model_get(fx->st, "nope", &got, &fx->err), MG_ENOTFOUND);
    assert_null(got);
    assert_non_null(strstr(fx->err.message, "nope"));
}

static void expect_names(const json_t *list, const char *const *names, size_t n)
{
    const json_t *items = json_object_get(list, "items");
    size_t i;

    assert_int_equal(json_array_size(items), n);
    for (i = 0; i < n; i++)
        assert_string_equal(json_string_value(json_object_get(json_array_get(items, i), "name")),
                            names[i]);
}

static void test_model_list_q_and_pages(void **state)
{
    struct fx *fx = *state;
    static const char *const all[] = {"alpha-1", "alpha-2", "alpha-3", "beta-1", "gamma"};
    static const char *const alpha[] = {"alpha-1", "alpha-2", "alpha-3"};
    static const char *const a_dash[] = {"alpha-1", "alpha-2", "alpha-3", "beta-1"};
    struct store_page page = {0};
    json_t *out = NULL;
    char token[64];

    /* Created out of order; listed by name. */
    fx_model(fx, "gamma");
    fx_model(fx, "alpha-2");
    fx_model(fx, "beta-1");
    fx_model(fx, "alpha-1");
    fx_model(fx, "alpha-3");

    page.limit = 10;
    assert_int_equal(store_model_list(fx->st, NULL, &page, &out, &fx->err), MG_OK);
    expect_names(out, all, 5);
    assert_true(json_is_null(json_object_get(out, "next_page_token")));
    json_decref(out);

    /* A page exactly as large as what is left has no next page. */
    page.limit = 5;
    assert_int_equal(store_model_list(fx->st, NULL, &page, &out, &fx->err), MG_OK);
    expect_names(out, all, 5);
    assert_true(json_is_null(json_object_get(out, "next_page_token")));
    json_decref(out);

    /* q is a substring of the name. */
    assert_int_equal(store_model_list(fx->st, "alpha", &page, &out, &fx->err), MG_OK);
    expect_names(out, alpha, 3);
    json_decref(out);
    assert_int_equal(store_model_list(fx->st, "a-", &page, &out, &fx->err), MG_OK);
    expect_names(out, a_dash, 4);
    json_decref(out);
    assert_int_equal(store_model_list(fx->st, "zzz", &page, &out, &fx->err), MG_OK);
    expect_names(out, NULL, 0);
    assert_true(json_is_null(json_object_get(out, "next_page_token")));
    json_decref(out);
    /* LIKE wildcards are not wildcards. */
    assert_int_equal(store_model_list(fx->st, "%", &page, &out, &fx->err), MG_OK);
    expect_names(out, NULL, 0);
    json_decref(out);

    /* Pages of 2, with q. */
    page.limit = 2;
    assert_int_equal(store_model_list(fx->st, "a-", &page, &out, &fx->err), MG_OK);
    expect_names(out, a_dash, 2);
    assert_true(json_is_string(json_object_get(out, "next_page_token")));
    snprintf(token, sizeof(token), "%s",
             json_string_value(json_object_get(out, "next_page_token")));
    json_decref(out);
    page.page_token = token;
    assert_int_equal(store_model_list(fx->st, "a-", &page, &out, &fx->err), MG_OK);
    expect_names(out, a_dash + 2, 2);
    assert_true(json_is_null(json_object_get(out, "next_page_token")));
    json_decref(out);

    /* Pages of 2 over everything: 2 + 2 + 1. */
    page.page_token = NULL;
    {
        size_t seen = 0;
        int pages = 0;
        for (;;) {
            const json_t *next;
            assert_int_equal(store_model_list(fx->st, NULL, &page, &out, &fx->err), MG_OK);
            expect_names(out, all + seen, json_array_size(json_object_get(out, "items")));
            seen += json_array_size(json_object_get(out, "items"));
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
    }
}

static void test_model_patch(void **state)
{
    struct fx *fx = *state;
    json_t *req, *patch, *m = NULL;

    req = json_pack("{s:s, s:s, s:{s:s}}", "name", "llm", "description", "old", "tags", "a", "1");
    assert_int_equal(store_model_create(fx->st, "alice", req, &m, &fx->err), MG_OK);
    json_decref(m);
    json_decref(req);

    /* Description only: the tags stay. */
    patch = json_pack("{s:s}", "description", "new");
    assert_int_equal(store_model_patch(fx->st, "bob", "llm", patch, &m, &fx->err), MG_OK);
    assert_string_equal(json_string_value(json_object_get(m, "description")), "new");
    assert_string_equal(json_string_value(json_object_get(json_object_get(m, "tags"), "a")), "1");
    assert_string_equal(json_string_value(json_object_get(m, "created_by")), "alice");
    json_decref(m);
    json_decref(patch);

    /* Tags only: replaced whole; the description stays. */
    patch = json_pack("{s:{s:s}}", "tags", "b", "2");
    assert_int_equal(store_model_patch(fx->st, "bob", "llm", patch, &m, &fx->err), MG_OK);
    assert_string_equal(json_string_value(json_object_get(m, "description")), "new");
    assert_null(json_object_get(json_object_get(m, "tags"), "a"));
    assert_string_equal(json_string_value(json_object_get(json_object_get(m, "tags"), "b")), "2");
    json_decref(m);

    /* Persisted. */
    assert_int_equal(store_model_get(fx->st, "llm", &m, &fx->err), MG_OK);
    assert_string_equal(json_string_value(json_object_get(json_object_get(m, "tags"), "b")), "2");
    json_decref(m);
    assert_int_equal(fx_audit_count_action(fx, "model.update"), 2);

    m = NULL;
    assert_int_equal(store_model_patch(fx->st, "bob", "nope", patch, &m, &fx->err), MG_ENOTFOUND);
    assert_null(m);
    assert_int_equal(fx_audit_count_action(fx, "model.update"), 2);
    json_decref(patch);
}

/* Owners: the creating token's teams at first, replaced whole by set_owners (existing teams
 * only), audited. */
static void test_model_owners(void **state)
{
    struct fx *fx = *state;
    json_t *req = json_pack("{s:s, s:[s]}", "name", "m", "owners", "vision"), *m = NULL, *t = NULL;
    json_t *two = json_pack("[s, s]", "ml", "vision"), *unknown = json_pack("[s]", "nope"),
           *none = json_array(), *owners = NULL;

    assert_int_equal(store_team_create(fx->st, "admin", "vision", &t, &fx->err), MG_OK);
    json_decref(t);
    assert_int_equal(store_team_create(fx->st, "admin", "ml", &t, &fx->err), MG_OK);
    json_decref(t);
    assert_int_equal(store_model_create(fx->st, "alice", req, &m, &fx->err), MG_OK);
    json_decref(m);
    assert_int_equal(store_model_owners(fx->st, "m", &owners, &fx->err), MG_OK);
    assert_int_equal(json_array_size(owners), 1);
    assert_string_equal(json_string_value(json_array_get(owners, 0)), "vision");
    json_decref(owners);
    fx_model(fx, "bare");
    assert_int_equal(store_model_owners(fx->st, "bare", &owners, &fx->err), MG_OK);
    assert_int_equal(json_array_size(owners), 0);
    json_decref(owners);

    assert_int_equal(store_model_set_owners(fx->st, "admin", "m", two, &m, &fx->err), MG_OK);
    assert_string_equal(json_string_value(json_object_get(m, "name")), "m");
    json_decref(m);
    assert_int_equal(store_model_owners(fx->st, "m", &owners, &fx->err), MG_OK);
    assert_true(json_equal(owners, two));
    json_decref(owners);
    assert_int_equal(fx_audit_count_action(fx, "model.owners"), 1);

    /* An unknown team: refused, owners unchanged, nothing audited. */
    m = NULL;
    assert_int_equal(store_model_set_owners(fx->st, "admin", "m", unknown, &m, &fx->err),
                     MG_EINVAL);
    assert_string_equal(fx->err.field, "teams");
    assert_null(m);
    assert_int_equal(store_model_owners(fx->st, "m", &owners, &fx->err), MG_OK);
    assert_true(json_equal(owners, two));
    json_decref(owners);
    assert_int_equal(fx_audit_count_action(fx, "model.owners"), 1);

    assert_int_equal(store_model_set_owners(fx->st, "admin", "m", none, &m, &fx->err), MG_OK);
    json_decref(m);
    assert_int_equal(store_model_owners(fx->st, "m", &owners, &fx->err), MG_OK);
    assert_int_equal(json_array_size(owners), 0);
    json_decref(owners);

    m = NULL;
    assert_int_equal(store_model_set_owners(fx->st, "admin", "nope", two, &m, &fx->err),
                     MG_ENOTFOUND);
    assert_null(m);
    owners = NULL;
    assert_int_equal(store_model_owners(fx->st, "nope", &owners, &fx->err), MG_ENOTFOUND);
    assert_null(owners);
    json_decref(req);
    json_decref(two);
    json_decref(unknown);
    json_decref(none);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, fx_setup, fx_teardown)
    const struct CMUnitTest tests[] = {
        T(test_model_create_get),
        T(test_model_list_q_and_pages),
        T(test_model_patch),
        T(test_model_owners),
    };
#undef T

    return cmocka_run_group_tests(tests, NULL, NULL);
}
