/*
 * test_datasets.c - /api/v1/datasets: create (201), identical again (200),
 * different data for a known digest (409), parents and children, validation,
 * and /versions through descendants (A -> B -> C).
 */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fixture {
    char art[IT_DIGEST_LEN + 1];
    char a[IT_DIGEST_LEN + 1];
    char b[IT_DIGEST_LEN + 1];
    char c[IT_DIGEST_LEN + 1];
    char other[IT_DIGEST_LEN + 1];
};

static struct fixture fx;

static int setup(void **state)
{
    struct mg_server *s;

    it_group_setup(state);
    s = *state;
    it_upload(s, "lineage model", 13, fx.art);
    it_digest("dataset A: raw events", 21, fx.a);
    it_digest("dataset B: cleaned", 18, fx.b);
    it_digest("dataset C: features", 19, fx.c);
    it_digest("dataset unrelated", 17, fx.other);
    it_release(s);
    return 0;
}

static bool contains_digest(const json_t *arr, const char *digest)
{
    size_t i;
    json_t *v;

    json_array_foreach(arr, i, v)
    {
        if (json_is_string(v) && strcmp(json_string_value(v), digest) == 0)
            return true;
    }
    return false;
}

static void test_create_identical_conflict(void **state)
{
    struct mg_server *s = *state;
    char digest[IT_DIGEST_LEN + 1];
    char path[128];
    json_t *body;
    struct it_resp *r;

    it_digest("training data, November", 23, digest);
    body = json_pack("{ss ss ss ss}", "digest", digest, "name", "fraud-train", "uri",
                     "s3://bucket/train/", "description", "November events");
    r = it_jreq_v(s, "POST", "/api/v1/datasets", s->admin_token, json_incref(body));
    it_expect_status(s, r, 201);
    assert_string_equal(it_jstr(r->json, "digest"), digest);
    assert_string_equal(it_jstr(r->json, "name"), "fraud-train");

    snprintf(path, sizeof(path), "/api/v1/datasets/%s", digest);
    r = it_get(s, path, s->admin_token);
    it_expect_status(s, r, 200);
    assert_string_equal(it_jstr(r->json, "digest"), digest);
    assert_string_equal(it_jstr(r->json, "name"), "fraud-train");
    assert_string_equal(it_jstr(r->json, "uri"), "s3://bucket/train/");
    assert_int_equal(json_array_size(it_jarr(r->json, "parents")), 0);
    assert_int_equal(json_array_size(it_jarr(r->json, "children")), 0);
    it_expect_rfc3339(it_jstr(r->json, "created_at"));

    /* Identical: 200. */
    r = it_jreq_v(s, "POST", "/api/v1/datasets", s->admin_token, json_incref(body));
    it_expect_status(s, r, 200);
    assert_string_equal(it_jstr(r->json, "digest"), digest);

    /* Different data under the same digest: 409, and nothing changes. */
    r = it_jreq_v(s, "POST", "/api/v1/datasets", s->admin_token,
                  json_pack("{ss ss ss ss}", "digest", digest, "name", "other-name", "uri",
                            "s3://bucket/train/", "description", "November events"));
    it_expect_error(s, r, 409, "conflict");
    r = it_jreq_v(s, "POST", "/api/v1/datasets", s->admin_token,
                  json_pack("{ss ss ss ss}", "digest", digest, "name", "fraud-train", "uri",
                            "s3://bucket/elsewhere/", "description", "November events"));
    it_expect_error(s, r, 409, "conflict");
    r = it_get(s, path, s->admin_token);
    it_expect_status(s, r, 200);
    assert_string_equal(it_jstr(r->json, "name"), "fraud-train");
    assert_string_equal(it_jstr(r->json, "uri"), "s3://bucket/train/");
    json_decref(body);
}

static void test_validation(void **state)
{
    static const struct {
        const char *body;
        const char *field;
    } bad[] = {
        {"{\"digest\":\"sha256:ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789\","
         "\"name\":\"d\"}",
         "digest"},
        {"{\"digest\":\"../x\",\"name\":\"d\"}", "digest"},
        {"{\"digest\":\"%2e%2e\",\"name\":\"d\"}", "digest"},
        {"{\"digest\":\"sha256:xyz\",\"name\":\"d\"}", "digest"},
        {"{\"digest\":\"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\","
         "\"name\":\"d\"}",
         "digest"},
        {"{\"digest\":5,\"name\":\"d\"}", "digest"},
        {"{\"name\":\"d\"}", "digest"},
        {"{\"digest\":\"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\","
         "\"name\":5}",
         "name"},
        {"{\"digest\":\"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\","
         "\"name\":\"d\",\"parents\":\"x\"}",
         "parents"},
        {"{\"digest\":\"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\","
         "\"name\":\"d\",\"parents\":[\"sha256:nothex\"]}",
         "parents"},
        {"{\"digest\":\"sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\","
         "\"name\":\"d\",\"uri\":5}",
         "uri"},
    };
    static const char *const bad_paths[] = {
        "/api/v1/datasets/sha256:XYZ",
        "/api/v1/datasets/..",
        "/api/v1/datasets/%2e%2e",
        "/api/v1/datasets/..%2f..%2fadmin.token",
        ("/api/v1/datasets/sha256:"
         "ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789"),
        "/api/v1/datasets/sha256:xyz/versions",
        "/api/v1/datasets/%2e%2e/versions",
    };
    struct mg_server *s = *state;
    char digest[IT_DIGEST_LEN + 1];
    char unknown[IT_DIGEST_LEN + 1];
    char path[128];
    struct it_resp *r;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        r = it_jreq(s, "POST", "/api/v1/datasets", s->admin_token, bad[i].body);
        if (r->status != 400)
            print_error("body: %s\n", bad[i].body);
        it_expect_error_field(s, r, 400, "invalid_argument", bad[i].field);
    }
    for (size_t i = 0; i < sizeof(bad_paths) / sizeof(bad_paths[0]); i++) {
        r = it_get(s, bad_paths[i], s->admin_token);
        it_expect_error(s, r, 400, "invalid_argument");
    }

    /* A parent must be a registered dataset; the refused child is not created. */
    it_digest("child of nothing", 16, digest);
    it_digest("never registered", 16, unknown);
    r = it_jreq_v(
        s, "POST", "/api/v1/datasets", s->admin_token,
        json_pack("{ss ss s[s]}", "digest", digest, "name", "orphan", "parents", unknown));
    assert_true(r->status >= 400 && r->status < 500);
    it_expect_error(s, r, r->status, r->status == 404 ? "not_found" : "invalid_argument");
    snprintf(path, sizeof(path), "/api/v1/datasets/%s", digest);
    r = it_get(s, path, s->admin_token);
    it_expect_error(s, r, 404, "not_found");
    snprintf(path, sizeof(path), "/api/v1/datasets/%s/versions", unknown);
    r = it_get(s, path, s->admin_token);
    it_expect_error(s, r, 404, "not_found");

    r = it_treq(s, "POST", "/api/v1/datasets", s->admin_token, "text/plain", "{}");
    it_expect_error(s, r, 415, "unsupported_media_type");
    r = it_jreq(s, "POST", "/api/v1/datasets", s->admin_token, "{\"digest\":");
    it_expect_error(s, r, 400, "invalid_argument");
}

/* Find the item for (model, version) in a /versions answer. */
static const json_t *find_use(const json_t *items, const char *model, json_int_t version)
{
    size_t i;
    json_t *it;

    json_array_foreach(items, i, it)
    {
        if (strcmp(it_jstr(it, "model"), model) == 0 && it_jint(it, "version") == version)
            return it;
    }
    return NULL;
}

static json_t *uses_of(struct mg_server *s, const char *digest)
{
    char path[160];
    struct it_resp *r;
    json_t *items;

    snprintf(path, sizeof(path), "/api/v1/datasets/%s/versions", digest);
    r = it_get(s, path, s->admin_token);
    it_expect_status(s, r, 200);
    items = json_incref(it_jarr(r->json, "items"));
    it_resp_free(s, &r);
    return items;
}

static void test_lineage(void **state)
{
    struct mg_server *s = *state;
    char path[160];
    struct it_resp *r;
    json_t *items;
    const json_t *use;

    r = it_jreq_v(s, "POST", "/api/v1/datasets", s->admin_token,
                  json_pack("{ss ss ss}", "digest", fx.a, "name", "raw", "uri", "s3://b/raw/"));
    it_expect_status(s, r, 201);
    r = it_jreq_v(s, "POST", "/api/v1/datasets", s->admin_token,
                  json_pack("{ss ss s[s]}", "digest", fx.b, "name", "clean", "parents", fx.a));
    it_expect_status(s, r, 201);
    r = it_jreq_v(s, "POST", "/api/v1/datasets", s->admin_token,
                  json_pack("{ss ss s[s]}", "digest", fx.c, "name", "features", "parents", fx.b));
    it_expect_status(s, r, 201);

    snprintf(path, sizeof(path), "/api/v1/datasets/%s", fx.a);
    r = it_get(s, path, s->admin_token);
    it_expect_status(s, r, 200);
    assert_int_equal(json_array_size(it_jarr(r->json, "parents")), 0);
    assert_int_equal(json_array_size(it_jarr(r->json, "children")), 1);
    assert_true(contains_digest(it_jarr(r->json, "children"), fx.b));
    snprintf(path, sizeof(path), "/api/v1/datasets/%s", fx.b);
    r = it_get(s, path, s->admin_token);
    it_expect_status(s, r, 200);
    assert_int_equal(json_array_size(it_jarr(r->json, "parents")), 1);
    assert_true(contains_digest(it_jarr(r->json, "parents"), fx.a));
    assert_int_equal(json_array_size(it_jarr(r->json, "children")), 1);
    assert_true(contains_digest(it_jarr(r->json, "children"), fx.c));
    snprintf(path, sizeof(path), "/api/v1/datasets/%s", fx.c);
    r = it_get(s, path, s->admin_token);
    it_expect_status(s, r, 200);
    assert_true(contains_digest(it_jarr(r->json, "parents"), fx.b));
    assert_int_equal(json_array_size(it_jarr(r->json, "children")), 0);

    /* v1 trained on C, v2 evaluated on A, v3 validated on B; another model on other data. */
    r = it_jreq(s, "POST", "/api/v1/models", s->admin_token, "{\"name\":\"lineage\"}");
    it_expect_status(s, r, 201);
    r = it_jreq(s, "POST", "/api/v1/models", s->admin_token, "{\"name\":\"lineage-other\"}");
    it_expect_status(s, r, 201);
    r = it_jreq_v(s, "POST", "/api/v1/models/lineage/versions", s->admin_token,
                  json_pack("{ss s[{ss ss ss}]}", "artifact", fx.art, "datasets", "digest", fx.c,
                            "name", "features", "role", "train"));
    it_expect_status(s, r, 201);
    r = it_jreq_v(s, "POST", "/api/v1/models/lineage/versions", s->admin_token,
                  json_pack("{ss s[{ss ss ss}]}", "artifact", fx.art, "datasets", "digest", fx.a,
                            "name", "raw", "role", "eval"));
    it_expect_status(s, r, 201);
    r = it_jreq_v(s, "POST", "/api/v1/models/lineage/versions", s->admin_token,
                  json_pack("{ss s[{ss ss ss}]}", "artifact", fx.art, "datasets", "digest", fx.b,
                            "name", "clean", "role", "validation"));
    it_expect_status(s, r, 201);
    r = it_jreq_v(s, "POST", "/api/v1/models/lineage-other/versions", s->admin_token,
                  json_pack("{ss s[{ss ss ss}]}", "artifact", fx.art, "datasets", "digest",
                            fx.other, "name", "unrelated", "role", "test"));
    it_expect_status(s, r, 201);

    /* From A: all three lineage versions; C's user through B and C. */
    items = uses_of(s, fx.a);
    assert_int_equal(json_array_size(items), 3);
    assert_null(find_use(items, "lineage-other", 1));
    use = find_use(items, "lineage", 1);
    assert_non_null(use);
    assert_string_equal(it_jstr(use, "role"), "train");
    assert_true(json_array_size(it_jarr(use, "via")) > 0);
    assert_true(contains_digest(it_jarr(use, "via"), fx.c));
    assert_false(contains_digest(it_jarr(use, "via"), fx.a));
    use = find_use(items, "lineage", 2);
    assert_non_null(use);
    assert_string_equal(it_jstr(use, "role"), "eval");
    assert_int_equal(json_array_size(it_jarr(use, "via")), 0);
    use = find_use(items, "lineage", 3);
    assert_non_null(use);
    assert_string_equal(it_jstr(use, "role"), "validation");
    assert_true(contains_digest(it_jarr(use, "via"), fx.b));
    json_decref(items);

    /* From B: v1 through C, v3 directly; not v2 (it used the parent). */
    items = uses_of(s, fx.b);
    assert_int_equal(json_array_size(items), 2);
    use = find_use(items, "lineage", 1);
    assert_non_null(use);
    assert_true(contains_digest(it_jarr(use, "via"), fx.c));
    use = find_use(items, "lineage", 3);
    assert_non_null(use);
    assert_int_equal(json_array_size(it_jarr(use, "via")), 0);
    assert_null(find_use(items, "lineage", 2));
    json_decref(items);

    /* From C: only v1, directly. */
    items = uses_of(s, fx.c);
    assert_int_equal(json_array_size(items), 1);
    use = find_use(items, "lineage", 1);
    assert_non_null(use);
    assert_int_equal(json_array_size(it_jarr(use, "via")), 0);
    json_decref(items);

    /* The ?dataset= filter on versions is direct use only. */
    snprintf(path, sizeof(path), "/api/v1/models/lineage/versions?dataset=%s", fx.a);
    r = it_get(s, path, s->admin_token);
    it_expect_status(s, r, 200);
    assert_int_equal(json_array_size(it_jarr(r->json, "items")), 1);
    assert_int_equal(it_jint(json_array_get(it_jarr(r->json, "items"), 0), "version"), 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_create_identical_conflict, it_test_teardown),
        cmocka_unit_test_teardown(test_validation, it_test_teardown),
        cmocka_unit_test_teardown(test_lineage, it_test_teardown),
    };

    return it_main_result(
        cmocka_run_group_tests_name("integration_datasets", tests, setup, it_group_teardown));
}
