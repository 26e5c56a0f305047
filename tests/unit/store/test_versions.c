/*
 * test_versions.c - store/versions.c: version numbering, metrics (append-only), lists with
 * filters and pages, patches and briefs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <pthread.h>
#include <sqlite3.h>

#include "base/json.h"
#include "store_fixture.h"

static void test_version_numbers(void **state)
{
    struct fx *fx = *state;
    char art[72], missing[72];
    json_t *v = NULL, *m = NULL, *req;
    size_t before;

    fx_put_blob(fx, "weights v1", art);
    fx_model(fx, "llm");
    fx_model(fx, "other");
    assert_int_equal(fx_version(fx, "llm", json_pack("{s:s}", "artifact", art)), 1);
    assert_int_equal(fx_version(fx, "llm", json_pack("{s:s}", "artifact", art)), 2);
    assert_int_equal(fx_version(fx, "llm", json_pack("{s:s}", "artifact", art)), 3);
    /* Numbering is per model. */
    assert_int_equal(fx_version(fx, "other", json_pack("{s:s}", "artifact", art)), 1);

    assert_int_equal(store_model_get(fx->st, "llm", &m, &fx->err), MG_OK);
    assert_int_equal(json_integer_value(json_object_get(m, "latest_version")), 3);
    json_decref(m);

    assert_int_equal(store_version_get(fx->st, "llm", 2, &v, &fx->err), MG_OK);
    assert_string_equal(json_string_value(json_object_get(v, "model")), "llm");
    assert_int_equal(json_integer_value(json_object_get(v, "version")), 2);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(v, "artifact"), "digest")), art);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(v, "artifact"), "size")),
                     strlen("weights v1"));
    assert_string_equal(json_string_value(json_object_get(v, "created_by")), "alice");
    assert_string_equal(json_string_value(json_object_get(v, "status")), "ready");
    assert_true(json_is_null(json_object_get(v, "signature"))); /* opened without keys */
    assert_int_equal(json_object_size(json_object_get(v, "metrics")), 0);
    assert_int_equal(json_array_size(json_object_get(v, "metrics_history")), 0);
    assert_int_equal(json_array_size(json_object_get(v, "datasets")), 0);
    json_decref(v);

    /* A missing artifact is refused, and does not use up a number. */
    before = fx_audit_count(fx);
    fx_digest("not uploaded", 12, missing);
    req = json_pack("{s:s}", "artifact", missing);
    v = NULL;
    assert_int_equal(fx_version_create(fx, "llm", req, &v), MG_EINVAL);
    assert_string_equal(fx->err.field, "artifact");
    assert_null(v);
    assert_int_equal(fx_version_create(fx, "nope", req, &v), MG_ENOTFOUND);
    json_decref(req);
    assert_int_equal(fx_audit_count(fx), before);
    assert_int_equal(fx_version(fx, "llm", json_pack("{s:s}", "artifact", art)), 4);

    assert_int_equal(store_version_get(fx->st, "llm", 99, &v, &fx->err), MG_ENOTFOUND);
    assert_int_equal(store_version_get(fx->st, "nope", 1, &v, &fx->err), MG_ENOTFOUND);
    assert_null(v);
}

/* store_version_add_metrics by "bob" of a {name: number} object (BORROWED). */
static enum mg_code add_metrics(struct fx *fx, int64_t version, const json_t *metrics, json_t **v)
{
    struct mg_metric *m = NULL;
    size_t n = 0;
    enum mg_code rc;

    if ((rc = mg_metrics_from_json(metrics, &m, &n, &fx->err)) == MG_OK)
        rc = store_version_add_metrics(fx->st, "bob", "llm", version, m, n, v, &fx->err);
    free(m);
    return rc;
}

static void test_version_metrics_append_only(void **state)
{
    struct fx *fx = *state;
    char art[72];
    json_t *metrics, *v = NULL;
    size_t before;

    fx_put_blob(fx, "weights", art);
    fx_model(fx, "llm");
    fx_version(fx, "llm", json_pack("{s:s, s:{s:f}}", "artifact", art, "metrics", "acc", 0.9));

    /* The same value again: accepted, nothing new recorded. */
    before = fx_audit_count(fx);
    metrics = json_pack("{s:f}", "acc", 0.9);
    assert_int_equal(add_metrics(fx, 1, metrics, &v), MG_OK);
    assert_true(json_real_value(json_object_get(json_object_get(v, "metrics"), "acc")) == 0.9);
    assert_int_equal(json_array_size(json_object_get(v, "metrics_history")), 1);
    assert_int_equal(fx_audit_count(fx), before);
    json_decref(v);
    json_decref(metrics);

    /* A different value for an existing name: conflict, and the new name in
     * the same request is not written either. */
    metrics = json_pack("{s:f, s:f}", "f1", 0.5, "acc", 0.8);
    v = NULL;
    assert_int_equal(add_metrics(fx, 1, metrics, &v), MG_ECONFLICT);
    assert_null(v);
    assert_string_equal(fx->err.field, "metrics");
    assert_non_null(strstr(fx->err.message, "acc"));
    json_decref(metrics);
    assert_int_equal(store_version_get(fx->st, "llm", 1, &v, &fx->err), MG_OK);
    assert_null(json_object_get(json_object_get(v, "metrics"), "f1"));
    assert_true(json_real_value(json_object_get(json_object_get(v, "metrics"), "acc")) == 0.9);
    assert_int_equal(json_array_size(json_object_get(v, "metrics_history")), 1);
    json_decref(v);
    assert_int_equal(fx_audit_count(fx), before);

    /* A new name is appended, with who and when. */
    metrics = json_pack("{s:f, s:f}", "acc", 0.9, "f1", 0.5);
    assert_int_equal(add_metrics(fx, 1, metrics, &v), MG_OK);
    json_decref(metrics);
    assert_true(json_real_value(json_object_get(json_object_get(v, "metrics"), "f1")) == 0.5);
    {
        json_t *hist = json_object_get(v, "metrics_history"), *h;
        assert_int_equal(json_array_size(hist), 2);
        h = json_array_get(hist, 1);
        assert_string_equal(json_string_value(json_object_get(h, "name")), "f1");
        assert_string_equal(json_string_value(json_object_get(h, "by")), "bob");
        assert_true(fx_is_rfc3339_ms(json_string_value(json_object_get(h, "at"))));
        h = json_array_get(hist, 0);
        assert_string_equal(json_string_value(json_object_get(h, "by")), "alice");
    }
    json_decref(v);
    assert_int_equal(fx_audit_count_action(fx, "version.metrics"), 1);

    /* Unknown version. */
    metrics = json_pack("{s:f}", "x", 1.0);
    v = NULL;
    assert_int_equal(add_metrics(fx, 2, metrics, &v), MG_ENOTFOUND);
    assert_null(v);
    json_decref(metrics);
}

static void expect_versions(struct fx *fx, const struct store_version_filter *f,
                            const int64_t *want, size_t n)
{
    struct store_page page = {.limit = 50, .page_token = NULL};
    json_t *out = NULL, *items;
    size_t i;

    if (store_version_list(fx->st, "m", f, &page, &out, &fx->err) != MG_OK)
        fail_msg("store_version_list: %s", fx->err.message);
    items = json_object_get(out, "items");
    if (json_array_size(items) != n)
        fail_msg("got %zu versions, want %zu", json_array_size(items), n);
    for (i = 0; i < n; i++)
        assert_int_equal(json_integer_value(json_object_get(json_array_get(items, i), "version")),
                         want[i]);
    assert_true(json_is_null(json_object_get(out, "next_page_token")));
    json_decref(out);
}

static void test_version_list_filters(void **state)
{
    struct fx *fx = *state;
    char art[72], d1[72], d2[72];
    struct store_version_filter f;
    static const int64_t all[] = {3, 2, 1}, prod[] = {3, 2}, v1[] = {1}, v2[] = {2}, ge[] = {3, 2},
                         le[] = {3, 1};

    fx_put_blob(fx, "weights", art);
    fx_digest("dataset one", 11, d1);
    fx_digest("dataset two", 11, d2);
    fx_model(fx, "m");
    fx_model(fx, "n");
    fx_version(fx, "m",
               json_pack("{s:s, s:{s:s}, s:[{s:s, s:s}], s:{s:f}}", "artifact", art, "tags",
                         "stage", "dev", "datasets", "digest", d1, "role", "train", "metrics",
                         "acc", 0.5));
    fx_version(fx, "m",
               json_pack("{s:s, s:{s:s}, s:[{s:s, s:s}], s:{s:f}}", "artifact", art, "tags",
                         "stage", "prod", "datasets", "digest", d2, "role", "eval", "metrics",
                         "acc", 0.9));
    fx_version(fx, "m",
               json_pack("{s:s, s:{s:s}, s:{s:f, s:f}}", "artifact", art, "tags", "stage", "prod",
                         "metrics", "acc", 0.7, "loss", 1.5));
    /* Another model's versions never show up. */
    fx_version(fx, "n",
               json_pack("{s:s, s:{s:s}, s:[{s:s, s:s}], s:{s:f}}", "artifact", art, "tags",
                         "stage", "prod", "datasets", "digest", d1, "role", "train", "metrics",
                         "acc", 0.99));

    memset(&f, 0, sizeof(f));
    expect_versions(fx, &f, all, 3);

    f.tags[0].key = "stage";
    f.tags[0].value = "prod";
    expect_versions(fx, &f, prod, 2);
    f.tags[0].value = "dev";
    expect_versions(fx, &f, v1, 1);
    f.tags[0].value = "qa";
    expect_versions(fx, &f, NULL, 0);
    f.tags[0].key = "team";
    f.tags[0].value = "prod";
    expect_versions(fx, &f, NULL, 0);

    memset(&f, 0, sizeof(f));
    f.dataset = d1;
    expect_versions(fx, &f, v1, 1);
    f.dataset = d2;
    expect_versions(fx, &f, v2, 1);

    memset(&f, 0, sizeof(f));
    f.metrics[0].name = "acc";
    f.metrics[0].value = 0.7;
    f.metrics[0].op = ">=";
    expect_versions(fx, &f, ge, 2);
    f.metrics[0].op = ">";
    expect_versions(fx, &f, v2, 1);
    f.metrics[0].op = "<=";
    expect_versions(fx, &f, le, 2);
    f.metrics[0].op = "<";
    expect_versions(fx, &f, v1, 1);
    f.metrics[0].op = "=";
    f.metrics[0].value = 0.9;
    expect_versions(fx, &f, v2, 1);
    f.metrics[0].name = "f1"; /* nobody has it */
    f.metrics[0].op = ">=";
    f.metrics[0].value = 0;
    expect_versions(fx, &f, NULL, 0);

    /* Filters combine. */
    memset(&f, 0, sizeof(f));
    f.tags[0].key = "stage";
    f.tags[0].value = "prod";
    f.metrics[0].name = "acc";
    f.metrics[0].op = "<";
    f.metrics[0].value = 0.8;
    {
        static const int64_t v3[] = {3};
        expect_versions(fx, &f, v3, 1);
    }
    f.dataset = d1;
    expect_versions(fx, &f, NULL, 0);

    /* Several filters of one kind all apply (AND), not only the first. */
    memset(&f, 0, sizeof(f));
    f.metrics[0].name = "acc";
    f.metrics[0].op = ">=";
    f.metrics[0].value = 0.7;
    expect_versions(fx, &f, ge, 2);
    f.metrics[1].name = "loss";
    f.metrics[1].op = ">";
    f.metrics[1].value = 1;
    {
        static const int64_t v3[] = {3};
        expect_versions(fx, &f, v3, 1);
    }
    f.metrics[3].name = "acc"; /* any slot */
    f.metrics[3].op = "<";
    f.metrics[3].value = 0.7;
    expect_versions(fx, &f, NULL, 0);
    memset(&f, 0, sizeof(f));
    f.tags[0].key = "stage";
    f.tags[0].value = "prod";
    f.tags[1].key = "stage";
    f.tags[1].value = "dev";
    expect_versions(fx, &f, NULL, 0);
    f.tags[1].value = "prod";
    expect_versions(fx, &f, prod, 2);

    /* Unknown model. */
    {
        struct store_page page = {.limit = 10};
        json_t *out = NULL;
        memset(&f, 0, sizeof(f));
        assert_int_equal(store_version_list(fx->st, "nope", &f, &page, &out, &fx->err),
                         MG_ENOTFOUND);
        assert_null(out);
    }
}

static void test_version_list_pages(void **state)
{
    struct fx *fx = *state;
    char art[72], token[32];
    struct store_version_filter f;
    struct store_page page = {.limit = 2, .page_token = NULL};
    json_t *out = NULL, *items;
    int i;

    fx_put_blob(fx, "weights", art);
    fx_model(fx, "m");
    for (i = 0; i < 3; i++)
        fx_version(fx, "m", json_pack("{s:s}", "artifact", art));
    memset(&f, 0, sizeof(f));

    assert_int_equal(store_version_list(fx->st, "m", &f, &page, &out, &fx->err), MG_OK);
    items = json_object_get(out, "items");
    assert_int_equal(json_array_size(items), 2);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(items, 0), "version")), 3);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(items, 1), "version")), 2);
    assert_true(json_is_string(json_object_get(out, "next_page_token")));
    snprintf(token, sizeof(token), "%s",
             json_string_value(json_object_get(out, "next_page_token")));
    json_decref(out);

    page.page_token = token;
    assert_int_equal(store_version_list(fx->st, "m", &f, &page, &out, &fx->err), MG_OK);
    items = json_object_get(out, "items");
    assert_int_equal(json_array_size(items), 1);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(items, 0), "version")), 1);
    assert_true(json_is_null(json_object_get(out, "next_page_token")));
    json_decref(out);

    /* Tokens the server did not issue. */
    out = NULL;
    page.page_token = "abc";
    assert_int_equal(store_version_list(fx->st, "m", &f, &page, &out, &fx->err), MG_EINVAL);
    assert_string_equal(fx->err.field, "page_token");
    page.page_token = "0";
    assert_int_equal(store_version_list(fx->st, "m", &f, &page, &out, &fx->err), MG_EINVAL);
    page.page_token = "-1";
    assert_int_equal(store_version_list(fx->st, "m", &f, &page, &out, &fx->err), MG_EINVAL);
    assert_null(out);
}

static void test_version_patch(void **state)
{
    struct fx *fx = *state;
    char art[72];
    json_t *patch, *v = NULL;

    fx_put_blob(fx, "weights", art);
    fx_model(fx, "m");
    fx_version(fx, "m",
               json_pack("{s:s, s:s, s:{s:s}}", "artifact", art, "description", "first", "tags",
                         "stage", "dev"));
    patch = json_pack("{s:{s:s}}", "tags", "stage", "prod");
    assert_int_equal(store_version_patch(fx->st, "bob", "m", 1, patch, &v, &fx->err), MG_OK);
    assert_string_equal(json_string_value(json_object_get(json_object_get(v, "tags"), "stage")),
                        "prod");
    assert_string_equal(json_string_value(json_object_get(v, "description")), "first");
    json_decref(v);
    v = NULL;
    assert_int_equal(store_version_patch(fx->st, "bob", "m", 2, patch, &v, &fx->err), MG_ENOTFOUND);
    assert_null(v);
    json_decref(patch);
    assert_int_equal(fx_audit_count_action(fx, "version.update"), 1);
}

static void test_version_brief(void **state)
{
    struct fx *fx = *state;
    char art[72];
    json_t *v = NULL;

    fx_put_blob(fx, "weights", art);
    fx_model(fx, "m");
    fx_version(fx, "m", json_pack("{s:s, s:s}", "artifact", art, "image", "reg/x@sha256:ab"));
    fx_version(fx, "m", json_pack("{s:s}", "artifact", art));
    assert_int_equal(store_version_brief(fx->st, "m", 1, &v, &fx->err), MG_OK);
    assert_string_equal(json_string_value(json_object_get(v, "artifact")), art);
    assert_string_equal(json_string_value(json_object_get(v, "image")), "reg/x@sha256:ab");
    assert_int_equal(json_object_size(v), 2);
    json_decref(v);
    v = NULL;
    assert_int_equal(store_version_brief(fx->st, "m", 2, &v, &fx->err), MG_OK);
    assert_true(json_is_null(json_object_get(v, "image")));
    json_decref(v);
    v = NULL;
    assert_int_equal(store_version_brief(fx->st, "m", 3, &v, &fx->err), MG_ENOTFOUND);
    assert_int_equal(store_version_brief(fx->st, "nope", 1, &v, &fx->err), MG_ENOTFOUND);
    assert_null(v);
}

/* What the server read (introspection) and what the trainer declared (io_schema) are kept
 * as given and come back with the version, in every read. */
static void test_version_introspection_kept(void **state)
{
    struct fx *fx = *state;
    char digest[72];
    json_t *req, *v = NULL;
    int64_t n;

    fx_put_blob(fx, "weights", digest);
    fx_model(fx, "m");
    req = json_pack("{s:s, s:{s:s, s:I, s:[{s:s, s:s, s:[s, i]}]}, s:{s:[], s:[{s:s, s:s}]}}",
                    "artifact", digest, "introspection", "format", "onnx", "parameters",
                    (json_int_t)42, "inputs", "name", "x", "dtype", "F32", "shape", "n", 3,
                    "io_schema", "inputs", "outputs", "name", "y", "dtype", "I64");
    n = fx_version(fx, "m", req);
    assert_int_equal(store_version_get(fx->st, "m", n, &v, &fx->err), MG_OK);
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(v, "introspection"), "parameters")), 42);
    assert_string_equal(
        json_string_value(json_object_get(
            json_array_get(json_object_get(json_object_get(v, "io_schema"), "outputs"), 0),
            "dtype")),
        "I64");
    json_decref(v);
    /* Without them, neither member appears. */
    n = fx_version(fx, "m", json_pack("{s:s}", "artifact", digest));
    assert_int_equal(store_version_get(fx->st, "m", n, &v, &fx->err), MG_OK);
    assert_null(json_object_get(v, "introspection"));
    assert_null(json_object_get(v, "io_schema"));
    json_decref(v);
}

/* The reply text (store_version_get_text) is what mg_json_text makes of store_version_get's
 * value, byte for byte, for a version with every kind of member: stored documents with reals
 * shortened, datasets with and without a name, metrics in the order they came, the
 * documents the decorations read. A missing version is an error with nothing kept. */
static void test_version_text(void **state)
{
    struct fx *fx = *state;
    struct store_version_text vt;
    char art[72], d1[72], d2[72], *want;
    json_t *v = NULL, *metrics;

    fx_put_blob(fx, "weights", art);
    fx_digest("dataset one", 11, d1);
    fx_digest("dataset two", 11, d2);
    fx_model(fx, "llm");
    fx_version(fx, "llm",
               json_pack("{s:s, s:s, s:s, s:{s:s, s:s}, s:{s:f, s:I}, s:{s:s}, s:{s:I, s:s}, "
                         "s:[{s:s, s:s, s:s}, {s:s, s:s, s:s, s:s}], s:{s:f}, s:s}",
                         "artifact", art, "image", "registry.example/serve@sha256:ab", "run_id",
                         "train-1", "source", "repo", "https://git.example/x", "commit", "9f2c",
                         "params", "lr", 0.1, "epochs", (json_int_t)12, "tags", "team", "risk",
                         "resources", "parameters", (json_int_t)7000000000, "precision", "fp16",
                         "datasets", "digest", d1, "role", "train", "uri", "s3://b/t/", "digest",
                         d2, "role", "eval", "name", "holdout", "uri", "s3://b/e/", "metrics",
                         "auc", 0.942, "description", "tab\there \"quoted\""));
    metrics = json_pack("{s:f}", "p95_latency_ms", 41.5);
    assert_int_equal(add_metrics(fx, 1, metrics, &v), MG_OK);
    json_decref(metrics);
    json_decref(v);

    assert_int_equal(store_version_get(fx->st, "llm", 1, &v, &fx->err), MG_OK);
    want = mg_json_text(v, NULL);
    assert_non_null(want);
    assert_int_equal(store_version_get_text(fx->st, "llm", 1, &vt, &fx->err), MG_OK);
    assert_string_equal(vt.text, want);
    assert_int_equal(vt.len, strlen(want));
    assert_non_null(strstr(vt.text, "\"params\":{\"epochs\":12,\"lr\":0.1}"));
    assert_non_null(strstr(vt.text, "\"metrics\":{\"auc\":0.942,\"p95_latency_ms\":41.5}"));
    assert_non_null(strstr(vt.text, "\"role\":\"train\",\"uri\":\"s3://b/t/\"},{"));
    assert_non_null(strstr(vt.text, "\"withdrawn_datasets\":[]}"));
    {
        json_t *res = json_loads(vt.resources, 0, NULL); /* the stored text, parsed by the caller */

        assert_int_equal(json_integer_value(json_object_get(res, "parameters")), 7000000000);
        json_decref(res);
    }
    assert_null(vt.introspection);
    store_version_text_clear(&vt);
    assert_null(vt.text);
    free(want);
    json_decref(v);

    assert_int_equal(store_version_get_text(fx->st, "llm", 2, &vt, &fx->err), MG_ENOTFOUND);
    assert_null(vt.text);
    assert_null(vt.resources);
    assert_int_equal(store_version_get_text(fx->st, "nope", 1, &vt, &fx->err), MG_ENOTFOUND);
    assert_null(vt.text);
}

/* A second writer on the database file: WRITES transactions, each setting version 1's
 * description to "gen N" and adding its metric "mN" together. */
#define WRITES 300

struct gen_writer {
    char path[256];
    int64_t vid;
    int done;
};

static void *gen_writer_main(void *arg)
{
    struct gen_writer *g = arg;
    sqlite3 *db = NULL;
    char sql[512];

    assert_int_equal(sqlite3_open_v2(g->path, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    sqlite3_busy_timeout(db, 10000);
    for (int i = 1; i <= WRITES; i++) {
        snprintf(sql, sizeof(sql),
                 "BEGIN IMMEDIATE; UPDATE versions SET description = 'gen %d' WHERE id = %lld; "
                 "INSERT INTO version_metrics (version_id, name, value, by, at) VALUES "
                 "(%lld, 'm%d', %d, 'w', '2026-11-28T00:00:00.000Z'); COMMIT;",
                 i, (long long)g->vid, (long long)g->vid, i, i);
        if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK)
            fail_msg("write %d: %s", i, sqlite3_errmsg(db));
    }
    sqlite3_close(db);
    __atomic_store_n(&g->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* On SQLite the Version is several statements outside BEGIN (the row, then its datasets and
 * metrics while the row's statement is active): each read sees one snapshot. A write that
 * changes the row and adds a metric at once is seen whole or not at all by every read made
 * while such writes land. */
static void test_version_text_one_snapshot(void **state)
{
    struct fx *fx = *state;
    struct gen_writer g = {.vid = 0};
    struct store_version_text vt;
    pthread_t t;
    int reads = 0, between = 0;
    char bad[256] = "";

    fx_model_versions(fx, "snap", 1);
    fx_path(fx, "modelgate.db", g.path, sizeof(g.path));
    g.vid = fx_db_int(fx, "SELECT v.id FROM versions v JOIN models m ON m.id = v.model_id "
                          "WHERE m.name = 'snap' AND v.version = 1");
    assert_true(g.vid > 0);
    assert_int_equal(pthread_create(&t, NULL, gen_writer_main, &g), 0);
    while (!__atomic_load_n(&g.done, __ATOMIC_ACQUIRE) || reads == 0) {
        json_t *v, *metrics;
        const char *d;
        int gen = 0;

        assert_int_equal(store_version_get_text(fx->st, "snap", 1, &vt, &fx->err), MG_OK);
        v = json_loads(vt.text, 0, NULL);
        assert_non_null(v);
        d = json_string_value(json_object_get(v, "description"));
        assert_non_null(d);
        if (strncmp(d, "gen ", 4) == 0)
            gen = atoi(d + 4);
        metrics = json_object_get(v, "metrics");
        if ((int)json_object_size(metrics) != gen ||
            (gen > 0 && json_object_get(metrics, "m1") == NULL)) {
            /* Failed once the writer is joined: it still uses the directory. */
            snprintf(bad, sizeof(bad), "read %d: the row says '%s' but there are %zu metrics",
                     reads, d, json_object_size(metrics));
            json_decref(v);
            store_version_text_clear(&vt);
            break;
        }
        if (gen > 0 && gen < WRITES)
            between++;
        json_decref(v);
        store_version_text_clear(&vt);
        reads++;
    }
    pthread_join(t, NULL);
    if (bad[0] != '\0')
        fail_msg("%s", bad);
    /* The reads overlapped the writes (else they proved nothing). */
    if (between == 0)
        fail_msg("none of %d reads landed while the writes ran", reads);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, fx_setup, fx_teardown)
    const struct CMUnitTest tests[] = {
        T(test_version_numbers),
        T(test_version_metrics_append_only),
        T(test_version_list_filters),
        T(test_version_list_pages),
        T(test_version_patch),
        T(test_version_brief),
        T(test_version_introspection_kept),
        T(test_version_text),
        T(test_version_text_one_snapshot),
    };
#undef T

    return cmocka_run_group_tests(tests, NULL, NULL);
}
