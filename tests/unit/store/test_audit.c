/*
 * test_audit.c - store/audit.c: the hash-chained audit log: listing, pages, and verification
 * that finds an edited, deleted or truncated entry (edited under the API with sqlite3).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include <jansson.h>

#include "store_fixture.h"

#define ZERO_HASH "0000000000000000000000000000000000000000000000000000000000000000"

/* A few mutations so that the log has several entries. */
static void some_history(struct fx *fx)
{
    char secret[STORE_TOKEN_SECRET_LEN + 1];
    bool created;
    json_t *patch = json_pack("{s:s}", "description", "d"), *out = NULL;

    assert_int_equal(store_token_bootstrap(fx->st, secret, &created, &fx->err), MG_OK);
    fx_model(fx, "a");
    fx_model(fx, "b");
    assert_int_equal(store_model_patch(fx->st, "carol", "a", patch, &out, &fx->err), MG_OK);
    json_decref(out);
    json_decref(patch);
}

static json_t *verify(struct fx *fx)
{
    json_t *out = NULL;

    if (store_audit_verify(fx->st, &out, &fx->err) != MG_OK)
        fail_msg("store_audit_verify: %s", fx->err.message);
    assert_non_null(out);
    return out;
}

static void test_audit_empty(void **state)
{
    struct fx *fx = *state;
    json_t *v = verify(fx);

    assert_true(json_is_true(json_object_get(v, "ok")));
    assert_int_equal(json_integer_value(json_object_get(v, "entries")), 0);
    assert_string_equal(json_string_value(json_object_get(v, "head")), ZERO_HASH);
    assert_null(json_object_get(v, "first_bad_seq"));
    json_decref(v);
}

static void test_audit_list_and_verify_ok(void **state)
{
    struct fx *fx = *state;
    json_t *out = NULL, *items, *v;
    size_t i, n;
    const char *prev = ZERO_HASH;

    some_history(fx);
    items = fx_audit_items(fx);
    n = json_array_size(items);
    assert_int_equal(n, 4);
    for (i = 0; i < n; i++) {
        json_t *e = json_array_get(items, i);
        assert_int_equal(json_integer_value(json_object_get(e, "seq")), (json_int_t)i + 1);
        assert_string_equal(json_string_value(json_object_get(e, "prev_hash")), prev);
        assert_int_equal(strlen(json_string_value(json_object_get(e, "hash"))), 64);
        assert_true(fx_is_rfc3339_ms(json_string_value(json_object_get(e, "at"))));
        assert_true(json_is_object(json_object_get(e, "detail")));
        prev = json_string_value(json_object_get(e, "hash"));
    }
    assert_string_equal(json_string_value(json_object_get(json_array_get(items, 0), "action")),
                        "token.create");
    assert_string_equal(json_string_value(json_object_get(json_array_get(items, 3), "actor")),
                        "carol");

    v = verify(fx);
    assert_true(json_is_true(json_object_get(v, "ok")));
    assert_int_equal(json_integer_value(json_object_get(v, "entries")), 4);
    assert_string_equal(json_string_value(json_object_get(v, "head")), prev);
    assert_null(json_object_get(v, "first_bad_seq"));
    json_decref(v);

    /* Pages: after=0 limit 3, then the rest. */
    assert_int_equal(store_audit_list(fx->st, 0, 3, &out, &fx->err), MG_OK);
    assert_int_equal(json_array_size(json_object_get(out, "items")), 3);
    assert_string_equal(json_string_value(json_object_get(out, "next_page_token")), "3");
    json_decref(out);
    assert_int_equal(store_audit_list(fx->st, 3, 3, &out, &fx->err), MG_OK);
    assert_int_equal(json_array_size(json_object_get(out, "items")), 1);
    assert_int_equal(json_integer_value(
                         json_object_get(json_array_get(json_object_get(out, "items"), 0), "seq")),
                     4);
    assert_true(json_is_null(json_object_get(out, "next_page_token")));
    json_decref(out);
    assert_int_equal(store_audit_list(fx->st, 0, 4, &out, &fx->err), MG_OK);
    assert_true(json_is_null(json_object_get(out, "next_page_token")));
    json_decref(out);
    json_decref(items);

    /* Still intact after a restart. */
    fx_reopen(fx);
    v = verify(fx);
    assert_true(json_is_true(json_object_get(v, "ok")));
    json_decref(v);
}

static void test_audit_tamper_detected(void **state)
{
    struct fx *fx = *state;
    json_t *v;

    some_history(fx);
    store_close(&fx->st);
    fx_db_exec(fx, "UPDATE audit SET actor='mallory' WHERE seq=2");
    fx_reopen(fx);
    v = verify(fx);
    assert_true(json_is_false(json_object_get(v, "ok")));
    assert_int_equal(json_integer_value(json_object_get(v, "first_bad_seq")), 2);
    json_decref(v);
}

static void test_audit_tamper_detail_detected(void **state)
{
    struct fx *fx = *state;
    json_t *v;

    some_history(fx);
    store_close(&fx->st);
    fx_db_exec(fx, "UPDATE audit SET detail='{\"name\":\"x\"}' WHERE seq=3");
    fx_reopen(fx);
    v = verify(fx);
    assert_true(json_is_false(json_object_get(v, "ok")));
    assert_int_equal(json_integer_value(json_object_get(v, "first_bad_seq")), 3);
    json_decref(v);
}

static void test_audit_middle_deletion_detected(void **state)
{
    struct fx *fx = *state;
    json_t *v;

    some_history(fx);
    store_close(&fx->st);
    fx_db_exec(fx, "DELETE FROM audit WHERE seq=2");
    fx_reopen(fx);
    v = verify(fx);
    assert_true(json_is_false(json_object_get(v, "ok")));
    assert_int_equal(json_integer_value(json_object_get(v, "first_bad_seq")), 2);
    json_decref(v);
}

static void test_audit_truncation_detected(void **state)
{
    struct fx *fx = *state;
    json_t *v;

    some_history(fx);
    store_close(&fx->st);
    fx_db_exec(fx, "DELETE FROM audit WHERE seq=(SELECT max(seq) FROM audit)");
    fx_reopen(fx);
    v = verify(fx);
    assert_true(json_is_false(json_object_get(v, "ok")));
    assert_int_equal(json_integer_value(json_object_get(v, "entries")), 3);
    assert_int_equal(json_integer_value(json_object_get(v, "first_bad_seq")), 4);
    json_decref(v);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, fx_setup, fx_teardown)
    const struct CMUnitTest tests[] = {
        T(test_audit_empty),
        T(test_audit_list_and_verify_ok),
        T(test_audit_tamper_detected),
        T(test_audit_tamper_detail_detected),
        T(test_audit_middle_deletion_detected),
        T(test_audit_truncation_detected),
    };
#undef T

    return cmocka_run_group_tests(tests, NULL, NULL);
}
