/*
 * test_datasets.c - store/datasets.c: dataset records (identical again is fine, different is a
 * conflict), parents, and the versions that used a dataset through its descendants.
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

static enum mg_code dataset_create(struct fx *fx, json_t *req, bool *created)
{
    json_t *out = NULL;
    enum mg_code rc;
    json_t *global = json_pack("[s]", "");

    assert_non_null(req);
    mg_error_clear(&fx->err);
    rc = store_dataset_create(fx->st, "alice", global, req, &out, created, &fx->err);
    json_decref(global);
    if (rc == MG_OK) {
        assert_non_null(out);
        assert_string_equal(json_string_value(json_object_get(out, "digest")),
                            json_string_value(json_object_get(req, "digest")));
    } else {
        assert_null(out);
    }
    json_decref(out);
    json_decref(req);
    return rc;
}

static void test_dataset_create_identical_conflict(void **state)
{
    struct fx *fx = *state;
    char d1[72], d2[72], d9[72];
    bool created = false;
    json_t *d = NULL;
    size_t before;

    fx_digest("raw", 3, d1);
    fx_digest("clean", 5, d2);
    fx_digest("unregistered", 12, d9);

    assert_int_equal(dataset_create(fx,
                                    json_pack("{s:s, s:s, s:s}", "digest", d1, "name", "raw", "uri",
                                              "s3://bucket/raw"),
                                    &created),
                     MG_OK);
    assert_true(created);

    /* Identical again: fine, nothing new. */
    before = fx_audit_count(fx);
    created = true;
    assert_int_equal(dataset_create(fx,
                                    json_pack("{s:s, s:s, s:s}", "digest", d1, "name", "raw", "uri",
                                              "s3://bucket/raw"),
                                    &created),
                     MG_OK);
    assert_false(created);
    assert_int_equal(fx_audit_count(fx), before);
    /* An explicit empty parent list is the same record. */
    assert_int_equal(dataset_create(fx,
                                    json_pack("{s:s, s:s, s:s, s:[]}", "digest", d1, "name", "raw",
                                              "uri", "s3://bucket/raw", "parents"),
                                    &created),
                     MG_OK);
    assert_false(created);

    /* Different name, uri or description: conflict. */
    assert_int_equal(dataset_create(fx,
                                    json_pack("{s:s, s:s, s:s}", "digest", d1, "name", "raw2",
                                              "uri", "s3://bucket/raw"),
                                    &created),
                     MG_ECONFLICT);
    assert_string_equal(fx->err.field, "digest");
    assert_int_equal(
        dataset_create(fx, json_pack("{s:s, s:s}", "digest", d1, "name", "raw"), &created),
        MG_ECONFLICT);
    assert_int_equal(dataset_create(fx,
                                    json_pack("{s:s, s:s, s:s, s:s}", "digest", d1, "name", "raw",
                                              "uri", "s3://bucket/raw", "description", "x"),
                                    &created),
                     MG_ECONFLICT);
    assert_int_equal(fx_audit_count(fx), before);

    /* Parents must be registered; nothing is written otherwise. */
    assert_int_equal(
        dataset_create(fx,
                       json_pack("{s:s, s:s, s:[s]}", "digest", d2, "name", "clean", "parents", d9),
                       &created),
        MG_EINVAL);
    assert_string_equal(fx->err.field, "parents");
    assert_int_equal(store_dataset_get(fx->st, NULL, d2, &d, &fx->err), MG_ENOTFOUND);
    assert_null(d);

    assert_int_equal(
        dataset_create(fx,
                       json_pack("{s:s, s:s, s:[s]}", "digest", d2, "name", "clean", "parents", d1),
                       &created),
        MG_OK);
    assert_true(created);
    /* The same digest without its parent: a different record, so a conflict. */
    assert_int_equal(
        dataset_create(fx, json_pack("{s:s, s:s}", "digest", d2, "name", "clean"), &created),
        MG_ECONFLICT);

    assert_int_equal(store_dataset_get(fx->st, NULL, d1, &d, &fx->err), MG_OK);
    assert_string_equal(json_string_value(json_object_get(d, "name")), "raw");
    assert_string_equal(json_string_value(json_object_get(d, "uri")), "s3://bucket/raw");
    assert_int_equal(json_array_size(json_object_get(d, "parents")), 0);
    assert_int_equal(json_array_size(json_object_get(d, "children")), 1);
    assert_string_equal(json_string_value(json_array_get(json_object_get(d, "children"), 0)), d2);
    assert_string_equal(json_string_value(json_object_get(d, "created_by")), "alice");
    json_decref(d);
    assert_int_equal(store_dataset_get(fx->st, NULL, d2, &d, &fx->err), MG_OK);
    assert_string_equal(json_string_value(json_array_get(json_object_get(d, "parents"), 0)), d1);
    json_decref(d);
    assert_int_equal(fx_audit_count_action(fx, "dataset.create"), 2);
}

/* The API accepts a parent listed twice; the stored parent set has it once.
 * Retrying exactly the same request must still be "identical". */
static void test_dataset_duplicate_parent_retry_is_identical(void **state)
{
    struct fx *fx = *state;
    char d1[72], d2[72];
    bool created = false;
    json_t *d = NULL;

    fx_digest("p", 1, d1);
    fx_digest("c", 1, d2);
    assert_int_equal(
        dataset_create(fx, json_pack("{s:s, s:s}", "digest", d1, "name", "p"), &created), MG_OK);
    assert_int_equal(dataset_create(fx,
                                    json_pack("{s:s, s:s, s:[s, s]}", "digest", d2, "name", "c",
                                              "parents", d1, d1),
                                    &created),
                     MG_OK);
    assert_true(created);
    assert_int_equal(store_dataset_get(fx->st, NULL, d2, &d, &fx->err), MG_OK);
    assert_int_equal(json_array_size(json_object_get(d, "parents")), 1);
    json_decref(d);
    created = true;
    assert_int_equal(dataset_create(fx,
                                    json_pack("{s:s, s:s, s:[s, s]}", "digest", d2, "name", "c",
                                              "parents", d1, d1),
                                    &created),
                     MG_OK);
    assert_false(created);
}

/* A record with parents {a, b} is not the same as a request naming [a, a]. */
static void test_dataset_duplicate_parent_is_not_another_set(void **state)
{
    struct fx *fx = *state;
    char a[72], b[72], c[72];
    bool created = false;

    fx_digest("a", 1, a);
    fx_digest("b", 1, b);
    fx_digest("c", 1, c);
    assert_int_equal(
        dataset_create(fx, json_pack("{s:s, s:s}", "digest", a, "name", "a"), &created), MG_OK);
    assert_int_equal(
        dataset_create(fx, json_pack("{s:s, s:s}", "digest", b, "name", "b"), &created), MG_OK);
    assert_int_equal(
        dataset_create(fx,
                       json_pack("{s:s, s:s, s:[s, s]}", "digest", c, "name", "c", "parents", a, b),
                       &created),
        MG_OK);
    assert_int_equal(
        dataset_create(fx,
                       json_pack("{s:s, s:s, s:[s, s]}", "digest", c, "name", "c", "parents", a, a),
                       &created),
        MG_ECONFLICT);
}

/* One item of store_dataset_versions. */
static void expect_use(const json_t *item, const char *model, int64_t version, const char *role,
                       const char *const *via, size_t nvia)
{
    const json_t *v = json_object_get(item, "via");
    size_t i;

    assert_non_null(item);
    assert_string_equal(json_string_value(json_object_get(item, "model")), model);
    assert_int_equal(json_integer_value(json_object_get(item, "version")), version);
    assert_string_equal(json_string_value(json_object_get(item, "role")), role);
    assert_true(json_is_array(v));
    if (json_array_size(v) != nvia)
        fail_msg("%s v%lld: via has %zu entries, want %zu", model, (long long)version,
                 json_array_size(v), nvia);
    for (i = 0; i < nvia; i++)
        assert_string_equal(json_string_value(json_array_get(v, i)), via[i]);
}

static void test_dataset_versions_transitive(void **state)
{
    struct fx *fx = *state;
    char art[72], d1[72], d2[72], d3[72], d4[72], d5[72], d6[72];
    bool created;
    json_t *out = NULL, *items;

    fx_put_blob(fx, "weights", art);
    fx_digest("d1", 2, d1);
    fx_digest("d2", 2, d2);
    fx_digest("d3", 2, d3);
    fx_digest("d4", 2, d4);
    fx_digest("d5", 2, d5);
    fx_digest("d6", 2, d6);
    /* d1 -> d2 -> d3 -> d4, and d1 -> d4 directly (a diamond). */
    assert_int_equal(
        dataset_create(fx, json_pack("{s:s, s:s}", "digest", d1, "name", "raw"), &created), MG_OK);
    assert_int_equal(
        dataset_create(fx,
                       json_pack("{s:s, s:s, s:[s]}", "digest", d2, "name", "clean", "parents", d1),
                       &created),
        MG_OK);
    assert_int_equal(
        dataset_create(fx,
                       json_pack("{s:s, s:s, s:[s]}", "digest", d3, "name", "dedup", "parents", d2),
                       &created),
        MG_OK);
    assert_int_equal(dataset_create(fx,
                                    json_pack("{s:s, s:s, s:[s, s]}", "digest", d4, "name", "mix",
                                              "parents", d1, d3),
                                    &created),
                     MG_OK);
    /* The parent set is a set: order does not make it a different record. */
    assert_int_equal(dataset_create(fx,
                                    json_pack("{s:s, s:s, s:[s, s]}", "digest", d4, "name", "mix",
                                              "parents", d3, d1),
                                    &created),
                     MG_OK);
    assert_false(created);

    fx_model(fx, "m");
    fx_version(fx, "m",
               json_pack("{s:s, s:[{s:s, s:s}]}", "artifact", art, "datasets", "digest", d3, "role",
                         "train"));
    fx_version(fx, "m",
               json_pack("{s:s, s:[{s:s, s:s}]}", "artifact", art, "datasets", "digest", d1, "role",
                         "eval"));
    fx_version(fx, "m",
               json_pack("{s:s, s:[{s:s, s:s}]}", "artifact", art, "datasets", "digest", d4, "role",
                         "train"));
    /* d5 is used by a version but never registered. */
    fx_version(fx, "m",
               json_pack("{s:s, s:[{s:s, s:s}]}", "artifact", art, "datasets", "digest", d5, "role",
                         "train"));

    /* From d1: its direct user first, then descendants by depth, each
     * (model, version, role) once, by its shortest path. */
    assert_int_equal(store_dataset_versions(fx->st, NULL, d1, &out, &fx->err), MG_OK);
    items = json_object_get(out, "items");
    assert_int_equal(json_array_size(items), 3);
    expect_use(json_array_get(items, 0), "m", 2, "eval", NULL, 0);
    {
        const char *via_d4[] = {d4};
        const char *via_d3[] = {d2, d3};
        expect_use(json_array_get(items, 1), "m", 3, "train", via_d4, 1);
        expect_use(json_array_get(items, 2), "m", 1, "train", via_d3, 2);
    }
    json_decref(out);

    assert_int_equal(store_dataset_versions(fx->st, NULL, d3, &out, &fx->err), MG_OK);
    items = json_object_get(out, "items");
    assert_int_equal(json_array_size(items), 2);
    {
        const char *via_d4[] = {d4};
        expect_use(json_array_get(items, 0), "m", 1, "train", NULL, 0);
        expect_use(json_array_get(items, 1), "m", 3, "train", via_d4, 1);
    }
    json_decref(out);

    /* Used directly though unregistered: still answered. */
    assert_int_equal(store_dataset_versions(fx->st, NULL, d5, &out, &fx->err), MG_OK);
    items = json_object_get(out, "items");
    assert_int_equal(json_array_size(items), 1);
    expect_use(json_array_get(items, 0), "m", 4, "train", NULL, 0);
    json_decref(out);

    /* Neither registered nor used. */
    out = NULL;
    assert_int_equal(store_dataset_versions(fx->st, NULL, d6, &out, &fx->err), MG_ENOTFOUND);
    assert_null(out);
    assert_int_equal(store_dataset_get(fx->st, NULL, d6, &out, &fx->err), MG_ENOTFOUND);
    assert_null(out);
}

/* Cached version answers show withdrawn ancestors: a record that joins a digest's lineage
 * (it has parents) moves the epoch of each model whose versions use the digest or what
 * derives from it, and only theirs; one without parents, nothing. Neither write is audited
 * under a model's name. */
static void test_dataset_lineage_moves_epochs(void **state)
{
    struct fx *fx = *state;
    char art[72], raw[72], clean[72], feat[72], lone[72];
    uint64_t m0, o0;
    bool created;

    fx_put_blob(fx, "weights", art);
    fx_digest("raw", 3, raw);
    fx_digest("clean", 5, clean);
    fx_digest("features", 8, feat);
    fx_digest("lone", 4, lone);
    fx_model(fx, "m");
    fx_model(fx, "other");
    /* m trained on features, which will derive from clean; other on lone data */
    fx_version(fx, "m",
               json_pack("{s:s, s:[{s:s, s:s}]}", "artifact", art, "datasets", "digest", feat,
                         "role", "train"));
    fx_version(fx, "other",
               json_pack("{s:s, s:[{s:s, s:s}]}", "artifact", art, "datasets", "digest", lone,
                         "role", "train"));
    m0 = fx_epoch(fx, "m");
    o0 = fx_epoch(fx, "other");
    assert_int_equal(
        dataset_create(fx, json_pack("{s:s, s:s}", "digest", raw, "name", "raw"), &created), MG_OK);
    assert_int_equal(
        dataset_create(fx, json_pack("{s:s, s:s}", "digest", lone, "name", "lone"), &created),
        MG_OK);
    assert_int_equal(fx_epoch(fx, "m"), m0);
    assert_int_equal(fx_epoch(fx, "other"), o0);

    /* features <- clean: m's version now derives from clean (directly used: features). */
    assert_int_equal(dataset_create(fx,
                                    json_pack("{s:s, s:s, s:[s]}", "digest", feat, "name", "f",
                                              "parents", clean),
                                    &created),
                     MG_EINVAL);             /* clean is not registered yet */
    assert_int_equal(fx_epoch(fx, "m"), m0); /* rolled back: nothing moved */
    assert_int_equal(
        dataset_create(fx,
                       json_pack("{s:s, s:s, s:[s]}", "digest", clean, "name", "c", "parents", raw),
                       &created),
        MG_OK);
    assert_int_equal(fx_epoch(fx, "m"), m0); /* nothing m uses derives from clean yet */
    assert_int_equal(dataset_create(fx,
                                    json_pack("{s:s, s:s, s:[s]}", "digest", feat, "name", "f",
                                              "parents", clean),
                                    &created),
                     MG_OK);
    assert_true(fx_epoch(fx, "m") != m0);
    assert_int_equal(fx_epoch(fx, "other"), o0);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, fx_setup, fx_teardown)
    const struct CMUnitTest tests[] = {
        T(test_dataset_create_identical_conflict),
        T(test_dataset_duplicate_parent_retry_is_identical),
        T(test_dataset_duplicate_parent_is_not_another_set),
        T(test_dataset_versions_transitive),
        T(test_dataset_lineage_moves_epochs),
    };
#undef T

    return cmocka_run_group_tests(tests, NULL, NULL);
}
