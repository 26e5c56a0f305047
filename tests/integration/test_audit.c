/*
 * test_audit.c - the hash-chained audit log: one entry per mutation (none for
 * reads or refused calls), the chain links, ?after=, /audit/verify, and
 * tampering detected after a restart (a changed row, a deleted row), the rows
 * being edited directly in the SQLite file while the server is stopped.
 */
#include "harness.h"
#include "api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Every audit entry, oldest first, walking ?after= pages. New reference. */
static json_t *audit_all(struct mg_server *s)
{
    json_t *all = json_array();
    json_int_t after = 0;
    char path[128];

    for (int pages = 0;; pages++) {
        struct it_resp *r;
        json_t *items;

        assert_true(pages < 1000);
        snprintf(path, sizeof(path), "/api/v1/audit?after=%" JSON_INTEGER_FORMAT, after);
        r = it_get(s, path, s->admin_token);
        it_expect_status(s, r, 200);
        items = it_jarr(r->json, "items");
        if (json_array_size(items) == 0) {
            it_resp_free(s, &r);
            break;
        }
        for (size_t i = 0; i < json_array_size(items); i++) {
            json_int_t seq = it_jint(json_array_get(items, i), "seq");

            if (seq <= after)
                fail_msg("?after=%" JSON_INTEGER_FORMAT " returned seq %" JSON_INTEGER_FORMAT,
                         after, seq);
            after = seq;
        }
        json_array_extend(all, items);
        it_resp_free(s, &r);
    }
    return all;
}

static size_t audit_count(struct mg_server *s)
{
    json_t *all = audit_all(s);
    size_t n = json_array_size(all);

    json_decref(all);
    return n;
}

static json_t *verify(struct mg_server *s)
{
    struct it_resp *r = it_get(s, "/api/v1/audit/verify", s->admin_token);
    json_t *v;

    it_expect_status(s, r, 200);
    v = json_incref(r->json);
    it_resp_free(s, &r);
    return v;
}

/* A few mutations of different kinds. */
static void mutate(struct mg_server *s, const char *model)
{
    char digest[IT_DIGEST_LEN + 1];
    char path[160];
    struct it_resp *r;

    it_model_create(s, s->admin_token, model);
    it_upload(s, model, strlen(model), digest);
    snprintf(path, sizeof(path), "/api/v1/models/%s/versions", model);
    r = it_jreq_v(s, "POST", path, s->admin_token, json_pack("{ss}", "artifact", digest));
    it_expect_status(s, r, 201);
    snprintf(path, sizeof(path), "/api/v1/models/%s", model);
    r = it_jreq(s, "PATCH", path, s->admin_token, "{\"description\":\"changed\"}");
    it_expect_status(s, r, 200);
    it_release(s);
}

/* Run one call and assert it added exactly `added` audit entries. */
#define EXPECT_AUDIT_GROWTH(s, added, call)                                                        \
    do {                                                                                           \
        size_t before_ = audit_count(s);                                                           \
        call;                                                                                      \
        size_t after_ = audit_count(s);                                                            \
        if (after_ != before_ + (added))                                                           \
            fail_msg("%s: %zu audit entries added, want %d", #call, after_ - before_, (added));    \
    } while (0)

static void test_one_entry_per_mutation(void **state)
{
    struct mg_server *s = *state;
    char digest[IT_DIGEST_LEN + 1];
    char ds[IT_DIGEST_LEN + 1];
    char body[256];
    char tid[64];
    char path[128];
    char *pub;
    struct it_resp *r = NULL;

    it_digest("audit dataset", 13, ds);
    EXPECT_AUDIT_GROWTH(s, 1, pub = it_token_create(s, "pub-audit", "publisher,reader", tid));
    EXPECT_AUDIT_GROWTH(s, 1, it_upload(s, "audit blob", 10, digest));
    EXPECT_AUDIT_GROWTH(s, 1,
                        r = it_jreq(s, "POST", "/api/v1/models", pub, "{\"name\":\"aud-model\"}"));
    it_expect_status(s, r, 201);
    EXPECT_AUDIT_GROWTH(
        s, 1, r = it_jreq(s, "PATCH", "/api/v1/models/aud-model", pub, "{\"description\":\"d\"}"));
    it_expect_status(s, r, 200);
    snprintf(body, sizeof(body), "{\"artifact\":\"%s\"}", digest);
    EXPECT_AUDIT_GROWTH(s, 1,
                        r = it_jreq(s, "POST", "/api/v1/models/aud-model/versions", pub, body));
    it_expect_status(s, r, 201);
    EXPECT_AUDIT_GROWTH(s, 1,
                        r = it_jreq(s, "PATCH", "/api/v1/models/aud-model/versions/1", pub,
                                    "{\"description\":\"d\"}"));
    it_expect_status(s, r, 200);
    EXPECT_AUDIT_GROWTH(s, 1,
                        r = it_jreq(s, "POST", "/api/v1/models/aud-model/versions/1/metrics", pub,
                                    "{\"metrics\":{\"auc\":0.9}}"));
    it_expect_status(s, r, 200);
    snprintf(body, sizeof(body), "{\"digest\":\"%s\",\"name\":\"aud-ds\"}", ds);
    EXPECT_AUDIT_GROWTH(s, 1, r = it_jreq(s, "POST", "/api/v1/datasets", pub, body));
    it_expect_status(s, r, 201);

    /* Reads and refused calls leave no entry. */
    EXPECT_AUDIT_GROWTH(s, 0, r = it_get(s, "/api/v1/models/aud-model", pub));
    EXPECT_AUDIT_GROWTH(s, 0,
                        r = it_jreq(s, "POST", "/api/v1/models", pub, "{\"name\":\"aud-model\"}"));
    it_expect_error(s, r, 409, "conflict");
    EXPECT_AUDIT_GROWTH(s, 0, r = it_jreq(s, "POST", "/api/v1/models", pub, "{\"name\":\"Bad\"}"));
    it_expect_error(s, r, 400, "invalid_argument");
    EXPECT_AUDIT_GROWTH(s, 0,
                        r = it_jreq(s, "POST", "/api/v1/models/aud-model/versions/1/metrics", pub,
                                    "{\"metrics\":{\"auc\":0.1}}"));
    it_expect_error(s, r, 409, "conflict");

    /* The last entry names who did what to which model. */
    {
        json_t *all = audit_all(s);
        json_t *last;
        bool found = false;
        size_t i;

        json_array_foreach(all, i, last)
        {
            if (strcmp(it_jstr(last, "actor"), "pub-audit") == 0 &&
                strstr(it_jstr(last, "target"), "aud-model") != NULL)
                found = true;
        }
        assert_true(found);
        json_decref(all);
    }

    snprintf(path, sizeof(path), "/api/v1/tokens/%s", tid);
    EXPECT_AUDIT_GROWTH(s, 1, r = it_request(s, "DELETE", path, s->admin_token, NULL, NULL, 0));
    it_expect_status(s, r, 204);
    free(pub);
}

static void test_entries_are_chained(void **state)
{
    struct mg_server *s = *state;
    json_t *all, *e, *v;
    json_t *prev = NULL;
    size_t i;
    char path[128];
    struct it_resp *r;

    mutate(s, "chain-model");
    all = audit_all(s);
    assert_true(json_array_size(all) >= 4);
    json_array_foreach(all, i, e)
    {
        it_expect_rfc3339(it_jstr(e, "at"));
        assert_true(strlen(it_jstr(e, "actor")) > 0);
        assert_true(strlen(it_jstr(e, "action")) > 0);
        assert_non_null(json_object_get(e, "target"));
        assert_non_null(json_object_get(e, "detail"));
        assert_true(strlen(it_jstr(e, "hash")) >= 64);
        if (prev != NULL) {
            assert_int_equal(it_jint(e, "seq"), it_jint(prev, "seq") + 1);
            assert_string_equal(it_jstr(e, "prev_hash"), it_jstr(prev, "hash"));
            assert_string_not_equal(it_jstr(e, "hash"), it_jstr(prev, "hash"));
        } else {
            assert_non_null(json_object_get(e, "prev_hash"));
        }
        prev = e;
    }

    /* ?after= returns the entries after that seq, oldest first. */
    snprintf(path, sizeof(path), "/api/v1/audit?after=%" JSON_INTEGER_FORMAT,
             it_jint(json_array_get(all, 1), "seq"));
    r = it_get(s, path, s->admin_token);
    it_expect_status(s, r, 200);
    assert_int_equal(it_jint(json_array_get(it_jarr(r->json, "items"), 0), "seq"),
                     it_jint(json_array_get(all, 2), "seq"));

    v = verify(s);
    assert_true(json_is_true(json_object_get(v, "ok")));
    assert_int_equal(it_jint(v, "entries"), json_array_size(all));
    assert_string_equal(it_jstr(v, "head"),
                        it_jstr(json_array_get(all, json_array_size(all) - 1), "hash"));
    json_decref(v);
    json_decref(all);
}

static void test_changed_row_is_detected(void **state)
{
    struct mg_server *s = *state; /* a server of its own */
    json_t *v;

    mutate(s, "tamper-model");
    v = verify(s);
    assert_true(json_is_true(json_object_get(v, "ok")));
    json_decref(v);

    it_server_stop(s);
    assert_int_equal(
        it_sql_exec(s, "UPDATE audit SET detail = '{\"tampered\":true}' WHERE seq = 2"), 1);
    it_server_restart(s);

    v = verify(s);
    if (!json_is_false(json_object_get(v, "ok")) ||
        json_integer_value(json_object_get(v, "first_bad_seq")) != 2) {
        char *d = json_dumps(v, JSON_COMPACT);

        fail_msg("after changing seq 2: verify says %s, want ok:false, first_bad_seq:2", d);
    }
    json_decref(v);
}

static void test_deleted_row_is_detected(void **state)
{
    struct mg_server *s = *state; /* a server of its own */
    json_t *v;

    mutate(s, "delete-model");
    v = verify(s);
    assert_true(json_is_true(json_object_get(v, "ok"))); /* intact before the delete */
    json_decref(v);
    it_server_stop(s);
    assert_int_equal(it_sql_exec(s, "DELETE FROM audit WHERE seq = 3"), 1);
    it_server_restart(s);

    v = verify(s);
    /* The gap is named where it is: seq 3 is the first entry not as chained. */
    if (!json_is_false(json_object_get(v, "ok")) ||
        json_integer_value(json_object_get(v, "first_bad_seq")) != 3) {
        char *d = json_dumps(v, JSON_COMPACT);

        fail_msg("after deleting seq 3: verify says %s, want ok:false, first_bad_seq:3", d);
    }
    json_decref(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_one_entry_per_mutation, it_test_teardown),
        cmocka_unit_test_teardown(test_entries_are_chained, it_test_teardown),
        cmocka_unit_test_setup_teardown(test_changed_row_is_detected, it_group_setup,
                                        it_group_teardown),
        cmocka_unit_test_setup_teardown(test_deleted_row_is_detected, it_group_setup,
                                        it_group_teardown),
    };

    return it_main_result(
        cmocka_run_group_tests_name("integration_audit", tests, it_group_setup, it_group_teardown));
}
