/*
 * test_versions.c - /api/v1/models/{model}/versions: the full VersionCreate
 * round trip, numbering and latest_version, estimated VRAM per precision,
 * newest-first lists with pagination and the tag/dataset/metric filters,
 * PATCH (description and tags only), metrics append (409 on a different
 * value), body validation and version numbers in paths.
 */
#include "harness.h"
#include "sys.h"
#include "api.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct fixture {
    struct mg_server *s;
    char me[128];                    /* the admin token's name */
    char art[IT_DIGEST_LEN + 1];     /* a stored blob */
    char art2[IT_DIGEST_LEN + 1];    /* another one */
    char missing[IT_DIGEST_LEN + 1]; /* a digest never uploaded */
    char d1[IT_DIGEST_LEN + 1];      /* dataset digests (not registered) */
    char d2[IT_DIGEST_LEN + 1];
};

static struct fixture fx;

static int setup(void **state)
{
    struct it_resp *r;

    memset(&fx, 0, sizeof(fx));
    fx.s = it_server_start(NULL);
    *state = fx.s;
    r = it_get(fx.s, "/api/v1/whoami", fx.s->admin_token);
    it_expect_status(fx.s, r, 200);
    snprintf(fx.me, sizeof(fx.me), "%s", it_jstr(r->json, "name"));
    it_upload(fx.s, "model bytes v1", 14, fx.art);
    it_upload(fx.s, "model bytes v2", 14, fx.art2);
    it_digest("never uploaded", 14, fx.missing);
    it_digest("dataset one", 11, fx.d1);
    it_digest("dataset two", 11, fx.d2);
    it_release(fx.s);
    return 0;
}

/* Structural equality where numbers compare by value (50 == 50.0). */
static bool equiv(const json_t *a, const json_t *b)
{
    if (json_is_number(a) && json_is_number(b))
        return json_number_value(a) == json_number_value(b);
    if (json_is_object(a) && json_is_object(b)) {
        const char *k;
        json_t *v;

        if (json_object_size(a) != json_object_size(b))
            return false;
        json_object_foreach((json_t *)a, k, v)
        {
            if (!equiv(v, json_object_get(b, k)))
                return false;
        }
        return true;
    }
    if (json_is_array(a) && json_is_array(b)) {
        if (json_array_size(a) != json_array_size(b))
            return false;
        for (size_t i = 0; i < json_array_size(a); i++)
            if (!equiv(json_array_get(a, i), json_array_get(b, i)))
                return false;
        return true;
    }
    return json_equal(a, b);
}

static void expect_member_equiv(const json_t *got, const json_t *want, const char *key)
{
    json_t *g = json_object_get(got, key);
    json_t *w = json_object_get(want, key);

    if (equiv(g, w))
        return;
    {
        char *gs = g ? json_dumps(g, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
        char *ws = json_dumps(w, JSON_COMPACT | JSON_ENCODE_ANY);

        print_error("member \"%s\": got %s, want %s\n", key, gs ? gs : "(absent)", ws ? ws : "?");
        free(gs);
        free(ws);
    }
    fail();
}

/* POST a version (body stolen); asserts 201 and returns the Version. */
static struct it_resp *create_version(const char *model, json_t *body)
{
    char path[256];
    struct it_resp *r;

    snprintf(path, sizeof(path), "/api/v1/models/%s/versions", model);
    r = it_jreq_v(fx.s, "POST", path, fx.s->admin_token, body);
    it_expect_status(fx.s, r, 201);
    return r;
}

static json_t *full_create_body(void)
{
    return json_pack("{ss ss ss s{ss ss} s[{ss ss ss ss}] s{sf sf} s{sf si} s{ss} s{ss si} "
                     "s{sI ss} ss}",
                     "artifact", fx.art, "image", IT_IMAGE, "run_id", "train-1234", "source",
                     "repo", "https://git.example/ml/fraud", "commit",
                     "9f2c1e0d9f2c1e0d9f2c1e0d9f2c1e0d9f2c1e0d", "datasets", "digest", fx.d1,
                     "name", "fraud-train", "uri", "s3://bucket/train/", "role", "train", "metrics",
                     "auc", 0.942, "p95_latency_ms", 41.5, "params", "lr", 0.001, "epochs", 12,
                     "tags", "team", "risk", "smoke", "profile", "onnx", "max_p95_ms", 50,
                     "resources", "parameters", (json_int_t)7000000000, "precision", "fp16",
                     "description", "first cut of the fraud model");
}

static void test_full_version_round_trip(void **state)
{
    static const char *const echoed[] = {"image",  "run_id", "source", "datasets",  "metrics",
                                         "params", "tags",   "smoke",  "resources", "description"};
    struct mg_server *s = *state;
    json_t *req = full_create_body();
    struct it_resp *r, *g;
    json_t *art, *hist, *e;
    size_t i;
    double want_vram = 7000000000.0 * 2 * 1.3 / 1073741824.0;

    it_model_create(fx.s, fx.s->admin_token, "full");
    r = create_version("full", json_incref(req));
    for (i = 0; i < sizeof(echoed) / sizeof(echoed[0]); i++)
        expect_member_equiv(r->json, req, echoed[i]);
    art = it_jobj(r->json, "artifact");
    assert_string_equal(it_jstr(art, "digest"), fx.art);
    assert_int_equal(it_jint(art, "size"), 14);
    assert_string_equal(it_jstr(art, "media_type"), "application/octet-stream");
    assert_true(json_is_null(json_object_get(art, "files")));
    assert_string_equal(it_jstr(r->json, "model"), "full");
    assert_int_equal(it_jint(r->json, "version"), 1);
    it_expect_rfc3339(it_jstr(r->json, "created_at"));
    assert_string_equal(it_jstr(r->json, "created_by"), fx.me);
    assert_string_equal(it_jstr(r->json, "status"), "ready");
    hist = it_jarr(r->json, "metrics_history");
    json_array_foreach(hist, i, e)
    {
        it_jstr(e, "name");
        it_jnum(e, "value");
        assert_string_equal(it_jstr(e, "by"), fx.me);
        it_expect_rfc3339(it_jstr(e, "at"));
    }
    if (fabs(it_jnum(r->json, "estimated_vram_gib") - want_vram) > 0.01)
        fail_msg("estimated_vram_gib %f, want %f", it_jnum(r->json, "estimated_vram_gib"),
                 want_vram);

    /* GET returns the same record. */
    g = it_get(s, "/api/v1/models/full/versions/1", s->admin_token);
    it_expect_status(s, g, 200);
    if (!equiv(g->json, r->json))
        fail_msg("GET differs from the create answer:\nGET:    %s\nPOST:   %s", g->body, r->body);

    g = it_get(s, "/api/v1/models/full", s->admin_token);
    it_expect_status(s, g, 200);
    assert_int_equal(it_jint(g->json, "latest_version"), 1);
    json_decref(req);
}

static void test_numbering_latest_and_pages(void **state)
{
    struct mg_server *s = *state;
    struct it_resp *r;
    json_t *items;
    char *token = NULL;
    int expect = 3;

    it_model_create(fx.s, fx.s->admin_token, "numbers");
    r = it_get(s, "/api/v1/models/numbers/versions", s->admin_token);
    it_expect_status(s, r, 200);
    assert_int_equal(json_array_size(it_jarr(r->json, "items")), 0);
    assert_true(json_is_null(json_object_get(r->json, "next_page_token")));

    for (int n = 1; n <= 3; n++) {
        r = create_version("numbers", json_pack("{ss}", "artifact", n == 2 ? fx.art2 : fx.art));
        assert_int_equal(it_jint(r->json, "version"), n);
        r = it_get(s, "/api/v1/models/numbers", s->admin_token);
        assert_int_equal(it_jint(r->json, "latest_version"), n);
    }
    /* Numbering is per model. */
    it_model_create(fx.s, fx.s->admin_token, "numbers-other");
    r = create_version("numbers-other", json_pack("{ss}", "artifact", fx.art));
    assert_int_equal(it_jint(r->json, "version"), 1);

    r = it_get(s, "/api/v1/models/numbers/versions", s->admin_token);
    it_expect_status(s, r, 200);
    items = it_jarr(r->json, "items");
    assert_int_equal(json_array_size(items), 3);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(it_jint(json_array_get(items, (size_t)i), "version"), 3 - i);
        assert_string_equal(it_jstr(json_array_get(items, (size_t)i), "model"), "numbers");
    }

    /* limit=1 walks 3, 2, 1 and then stops. */
    for (;;) {
        char path[512];
        char *enc = token ? it_urlencode(token) : NULL;
        json_t *next;

        snprintf(path, sizeof(path), "/api/v1/models/numbers/versions?limit=1%s%s",
                 enc ? "&page_token=" : "", enc ? enc : "");
        free(enc);
        r = it_get(s, path, s->admin_token);
        it_expect_status(s, r, 200);
        items = it_jarr(r->json, "items");
        assert_int_equal(json_array_size(items), 1);
        assert_int_equal(it_jint(json_array_get(items, 0), "version"), expect);
        expect--;
        next = json_object_get(r->json, "next_page_token");
        free(token);
        token = NULL;
        if (json_is_null(next))
            break;
        assert_true(json_is_string(next));
        assert_true(expect >= 1);
        token = strdup(json_string_value(next));
    }
    assert_int_equal(expect, 0);
}

static void test_estimated_vram_per_precision(void **state)
{
    static const struct {
        const char *precision;
        double bytes;
    } cases[] = {{"fp32", 4}, {"fp16", 2}, {"bf16", 2}, {"int8", 1}, {"int4", 0.5}};
    struct mg_server *s = *state;
    struct it_resp *r;
    json_t *v;

    it_model_create(fx.s, fx.s->admin_token, "vram");
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_int_t params = 1500000000;
        double want = (double)params * cases[i].bytes * 1.3 / 1073741824.0;
        double got;

        r = create_version("vram",
                           json_pack("{ss s{sI ss}}", "artifact", fx.art, "resources", "parameters",
                                     params, "precision", cases[i].precision));
        got = it_jnum(r->json, "estimated_vram_gib");
        if (fabs(got - want) > 0.01)
            fail_msg("%s: estimated_vram_gib %f, want %f", cases[i].precision, got, want);
    }
    /* Without resources there is no estimate. */
    r = create_version("vram", json_pack("{ss}", "artifact", fx.art));
    v = json_object_get(r->json, "estimated_vram_gib");
    assert_true(v == NULL || json_is_null(v));
    (void)s;
}

/* The version numbers of a list answer, newest first, as "3,2,1". */
static void list_versions(const char *query, char *out, size_t cap)
{
    char path[512];
    struct it_resp *r;
    json_t *it;
    size_t i, o = 0;

    snprintf(path, sizeof(path), "/api/v1/models/filters/versions?%s", query);
    r = it_get(fx.s, path, fx.s->admin_token);
    it_expect_status(fx.s, r, 200);
    out[0] = '\0';
    json_array_foreach(it_jarr(r->json, "items"), i, it)
    {
        o += (size_t)snprintf(out + o, cap - o, "%s%" JSON_INTEGER_FORMAT, i ? "," : "",
                              it_jint(it, "version"));
        assert_true(o < cap);
    }
}

static void test_list_filters(void **state)
{
    static const struct {
        const char *query;
        const char *want;
    } cases[] = {
        {"tag=team:risk", "2,1"},
        {"tag=stage:beta", "2"},
        {"tag=team:nobody", ""},
        {"tag=nokey:risk", ""},
        {"dataset={d1}", "3,1"},
        {"dataset={d2}", "2"},
        {"metric=auc%3E%3D0.9", "3,2"},
        {"metric=auc%3E0.9", "3"},
        {"metric=auc%3C0.9", "1"},
        {"metric=auc%3C%3D0.9", "2,1"},
        {"metric=auc%3D0.9", "2"},
        {"metric=latency_ms%3C%3D40", "3"},
        {"metric=nothing%3E%3D0", ""},
        {"tag=team:risk&metric=auc%3E%3D0.9", "2"},
        {"limit=2", "4,3"},
    };
    static const char *const bad[] = {
        "tag=nocolon",      "metric=auc~0.9",     "metric=auc%3E%3Dhigh",
        "metric=%3E%3D0.9", "dataset=sha256:xyz", "dataset=..%2f..",
    };
    struct mg_server *s = *state;
    char got[64];
    char query[256];

    it_model_create(fx.s, fx.s->admin_token, "filters");
    create_version("filters", json_pack("{ss s{ss} s{sf} s[{ss ss ss}]}", "artifact", fx.art,
                                        "tags", "team", "risk", "metrics", "auc", 0.85, "datasets",
                                        "digest", fx.d1, "name", "d1", "role", "train"));
    create_version("filters",
                   json_pack("{ss s{ss ss} s{sf} s[{ss ss ss}]}", "artifact", fx.art, "tags",
                             "team", "risk", "stage", "beta", "metrics", "auc", 0.9, "datasets",
                             "digest", fx.d2, "name", "d2", "role", "eval"));
    create_version("filters",
                   json_pack("{ss s{ss} s{sf sf} s[{ss ss ss}]}", "artifact", fx.art2, "tags",
                             "team", "ads", "metrics", "auc", 0.95, "latency_ms", 35.0, "datasets",
                             "digest", fx.d1, "name", "d1", "role", "validation"));
    create_version("filters", json_pack("{ss}", "artifact", fx.art));

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *q = cases[i].query;

        if (strcmp(q, "dataset={d1}") == 0 || strcmp(q, "dataset={d2}") == 0) {
            snprintf(query, sizeof(query), "dataset=%s", q[10] == '1' ? fx.d1 : fx.d2);
            q = query;
        }
        list_versions(q, got, sizeof(got));
        if (strcmp(got, cases[i].want) != 0)
            fail_msg("?%s: versions [%s], want [%s]", q, got, cases[i].want);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char path[256];
        struct it_resp *r;

        snprintf(path, sizeof(path), "/api/v1/models/filters/versions?%s", bad[i]);
        r = it_get(s, path, s->admin_token);
        it_expect_error(s, r, 400, "invalid_argument");
    }
}

static void test_patch_description_and_tags_only(void **state)
{
    static const char *const refused[] = {
        "{\"run_id\":\"other\"}",
        "{\"metrics\":{\"auc\":1.0}}",
        "{\"image\":\"" IT_IMAGE "\"}",
        "{\"datasets\":[]}",
        "{\"resources\":{\"parameters\":1,\"precision\":\"fp32\"}}",
        "{\"version\":7}",
        "{\"created_by\":\"mallory\"}",
        "{\"description\":\"sneaky\",\"run_id\":\"other\"}",
        "{\"description\":5}",
        "{\"tags\":\"x\"}",
        "{\"tags\":{\"team\":5}}",
    };
    struct mg_server *s = *state;
    const char *path = "/api/v1/models/patchv/versions/1";
    struct it_resp *r, *before;
    char body[256];

    it_model_create(fx.s, fx.s->admin_token, "patchv");
    create_version("patchv",
                   json_pack("{ss ss ss s{ss} s{sf}}", "artifact", fx.art, "run_id", "run-1",
                             "description", "d1", "tags", "team", "risk", "metrics", "auc", 0.9));

    r = it_jreq(s, "PATCH", path, s->admin_token, "{\"description\":\"d2\"}");
    it_expect_status(s, r, 200);
    assert_string_equal(it_jstr(r->json, "description"), "d2");
    assert_string_equal(it_jstr(it_jobj(r->json, "tags"), "team"), "risk");
    r = it_jreq(s, "PATCH", path, s->admin_token, "{\"tags\":{\"team\":\"ads\",\"x\":\"y\"}}");
    it_expect_status(s, r, 200);
    assert_string_equal(it_jstr(it_jobj(r->json, "tags"), "team"), "ads");
    assert_string_equal(it_jstr(it_jobj(r->json, "tags"), "x"), "y");
    assert_string_equal(it_jstr(r->json, "description"), "d2");

    before = it_get(s, path, s->admin_token);
    it_expect_status(s, before, 200);
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        r = it_jreq(s, "PATCH", path, s->admin_token, refused[i]);
        if (r->status != 400)
            print_error("PATCH body: %s\n", refused[i]);
        it_expect_error(s, r, 400, "invalid_argument");
    }
    snprintf(body, sizeof(body), "{\"artifact\":\"%s\"}", fx.art2);
    r = it_jreq(s, "PATCH", path, s->admin_token, body);
    /* The refusal names the field and says why (versions are immutable). */
    it_expect_error_field(s, r, 400, "invalid_argument", "artifact");
    assert_non_null(strstr(it_jstr(it_jobj(r->json, "error"), "message"), "immutable"));
    r = it_treq(s, "PATCH", path, s->admin_token, "text/plain", "{\"description\":\"t\"}");
    it_expect_error(s, r, 415, "unsupported_media_type");

    /* Nothing of the refused patches landed. */
    r = it_get(s, path, s->admin_token);
    it_expect_status(s, r, 200);
    if (!equiv(r->json, before->json))
        fail_msg("a refused PATCH changed the version:\nbefore: %s\nafter:  %s", before->body,
                 r->body);
    assert_string_equal(it_jstr(r->json, "run_id"), "run-1");

    r = it_jreq(s, "PATCH", "/api/v1/models/patchv/versions/9", s->admin_token,
                "{\"description\":\"d\"}");
    it_expect_error(s, r, 404, "not_found");
}

static const json_t *history_entry(const json_t *version, const char *name)
{
    const json_t *found = NULL;
    size_t i;
    json_t *e;

    json_array_foreach(it_jarr(version, "metrics_history"), i, e)
    {
        if (strcmp(it_jstr(e, "name"), name) == 0)
            found = e;
    }
    return found;
}

static void test_metrics_append(void **state)
{
    struct mg_server *s = *state;
    const char *path = "/api/v1/models/metrics/versions/1/metrics";
    struct it_resp *r;
    size_t h0;
    const json_t *e;

    it_model_create(fx.s, fx.s->admin_token, "metrics");
    r = create_version("metrics",
                       json_pack("{ss s{sf}}", "artifact", fx.art, "metrics", "auc", 0.9));
    h0 = json_array_size(it_jarr(r->json, "metrics_history"));

    r = it_jreq(s, "POST", path, s->admin_token, "{\"metrics\":{\"f1\":0.8}}");
    it_expect_status(s, r, 200);
    assert_int_equal(it_jint(r->json, "version"), 1);
    assert_true(it_jnum(it_jobj(r->json, "metrics"), "auc") == 0.9);
    assert_true(it_jnum(it_jobj(r->json, "metrics"), "f1") == 0.8);
    assert_int_equal(json_array_size(it_jarr(r->json, "metrics_history")), h0 + 1);
    e = history_entry(r->json, "f1");
    assert_non_null(e);
    assert_true(it_jnum(e, "value") == 0.8);
    assert_string_equal(it_jstr(e, "by"), fx.me);
    it_expect_rfc3339(it_jstr(e, "at"));

    /* The same value again is fine; a different one is a conflict. */
    r = it_jreq(s, "POST", path, s->admin_token, "{\"metrics\":{\"f1\":0.8}}");
    it_expect_status(s, r, 200);
    assert_true(it_jnum(it_jobj(r->json, "metrics"), "f1") == 0.8);
    r = it_jreq(s, "POST", path, s->admin_token, "{\"metrics\":{\"f1\":0.81}}");
    it_expect_error(s, r, 409, "conflict");
    r = it_jreq(s, "POST", path, s->admin_token, "{\"metrics\":{\"auc\":0.95}}");
    it_expect_error(s, r, 409, "conflict");
    /* A conflicting batch writes nothing, not even its new names. */
    r = it_jreq(s, "POST", path, s->admin_token, "{\"metrics\":{\"recall\":0.7,\"f1\":0.5}}");
    it_expect_error(s, r, 409, "conflict");

    r = it_get(s, "/api/v1/models/metrics/versions/1", s->admin_token);
    it_expect_status(s, r, 200);
    assert_true(it_jnum(it_jobj(r->json, "metrics"), "f1") == 0.8);
    assert_true(it_jnum(it_jobj(r->json, "metrics"), "auc") == 0.9);
    assert_null(json_object_get(it_jobj(r->json, "metrics"), "recall"));
    assert_null(history_entry(r->json, "recall"));

    /* A second new metric grows the history again. */
    r = it_jreq(s, "POST", path, s->admin_token, "{\"metrics\":{\"recall\":0.7}}");
    it_expect_status(s, r, 200);
    assert_true(json_array_size(it_jarr(r->json, "metrics_history")) >= h0 + 2);

    r = it_jreq(s, "POST", path, s->admin_token, "{\"metrics\":{\"x\":\"high\"}}");
    it_expect_error_field(s, r, 400, "invalid_argument", "metrics");
    r = it_jreq(s, "POST", path, s->admin_token, "{\"metrics\":{\"x\":null}}");
    it_expect_error_field(s, r, 400, "invalid_argument", "metrics");
    r = it_jreq(s, "POST", path, s->admin_token, "{\"metrics\":[0.5]}");
    it_expect_error_field(s, r, 400, "invalid_argument", "metrics");
    r = it_jreq(s, "POST", path, s->admin_token, "{\"metrics\":");
    it_expect_error(s, r, 400, "invalid_argument");
    r = it_treq(s, "POST", path, s->admin_token, "text/plain", "{\"metrics\":{\"y\":1}}");
    it_expect_error(s, r, 415, "unsupported_media_type");
    r = it_jreq(s, "POST", "/api/v1/models/metrics/versions/2/metrics", s->admin_token,
                "{\"metrics\":{\"y\":1}}");
    it_expect_error(s, r, 404, "not_found");
}

static void test_create_validation(void **state)
{
    static const struct {
        const char *body; /* %s: a stored artifact digest */
        const char *field;
    } cases[] = {
        {"{\"artifact\":5}", "artifact"},
        {"{\"artifact\":\"sha256:abc\"}", "artifact"},
        {"{}", "artifact"},
        {"{\"artifact\":\"%s\",\"metrics\":{\"auc\":\"high\"}}", "metrics"},
        {"{\"artifact\":\"%s\",\"metrics\":[1]}", "metrics"},
        {"{\"artifact\":\"%s\",\"datasets\":[{\"digest\":\""
         "sha256:" IT_HEX64 "\",\"name\":\"d\",\"role\":\"training\"}]}",
         "role"},
        {"{\"artifact\":\"%s\",\"datasets\":[{\"digest\":\"sha256:nothex\",\"name\":\"d\","
         "\"role\":\"train\"}]}",
         "datasets"},
        {"{\"artifact\":\"%s\",\"datasets\":{\"digest\":\"x\"}}", "datasets"},
        {"{\"artifact\":\"%s\",\"resources\":{\"parameters\":1000,\"precision\":\"fp8\"}}",
         "precision"},
        {"{\"artifact\":\"%s\",\"resources\":{\"parameters\":\"7B\",\"precision\":\"fp16\"}}",
         "parameters"},
        {"{\"artifact\":\"%s\",\"image\":\"registry.example/serve:latest\"}", "image"},
        {"{\"artifact\":\"%s\",\"image\":\"registry.example/serve@sha256:abc\"}", "image"},
        {"{\"artifact\":\"%s\",\"image\":\"@sha256:" IT_HEX64 "\"}", "image"},
        {"{\"artifact\":\"%s\",\"image\":7}", "image"},
        {"{\"artifact\":\"%s\",\"tags\":[\"a\"]}", "tags"},
        {"{\"artifact\":\"%s\",\"params\":\"lr=1\"}", "params"},
        {"{\"artifact\":\"%s\",\"source\":\"git\"}", "source"},
        {"{\"artifact\":\"%s\",\"run_id\":5}", "run_id"},
        {"{\"artifact\":\"%s\",\"description\":false}", "description"},
        {"{\"artifact\":\"%s\",\"smoke\":\"onnx\"}", "smoke"},
    };
    struct mg_server *s = *state;
    char body[512];
    struct it_resp *r;

    it_model_create(fx.s, fx.s->admin_token, "valid");
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(body, sizeof(body), cases[i].body, fx.art);
        r = it_jreq(s, "POST", "/api/v1/models/valid/versions", s->admin_token, body);
        if (r->status != 400)
            print_error("body: %s\n", body);
        it_expect_error_field(s, r, 400, "invalid_argument", cases[i].field);
    }
    /* The artifact must be a stored blob. */
    snprintf(body, sizeof(body), "{\"artifact\":\"%s\"}", fx.missing);
    r = it_jreq(s, "POST", "/api/v1/models/valid/versions", s->admin_token, body);
    it_expect_error_field(s, r, 400, "invalid_argument", "artifact");

    snprintf(body, sizeof(body), "{\"artifact\":\"%s\"}", fx.art);
    r = it_treq(s, "POST", "/api/v1/models/valid/versions", s->admin_token, "text/plain", body);
    it_expect_error(s, r, 415, "unsupported_media_type");
    r = it_jreq(s, "POST", "/api/v1/models/valid/versions", s->admin_token, "{\"artifact\":");
    it_expect_error(s, r, 400, "invalid_argument");

    /* Refused creates used no version number. */
    r = it_get(s, "/api/v1/models/valid", s->admin_token);
    assert_true(json_is_null(json_object_get(r->json, "latest_version")));
    r = create_version("valid", json_pack("{ss ss}", "artifact", fx.art, "image",
                                          "registry.example/serve:1.2@sha256:" IT_HEX64));
    assert_int_equal(it_jint(r->json, "version"), 1);
}

static void test_version_numbers_in_paths(void **state)
{
    static const char *const bad[] = {"abc", "0",      "-1", "1.5",
                                      "1e3", "%2e%2e", "..", "99999999999999999999999"};
    static const char *const tails[] = {"", "/metrics", "/artifact", "/files"};
    struct mg_server *s = *state;
    char path[256];
    struct it_resp *r;

    it_model_create(fx.s, fx.s->admin_token, "paths");
    create_version("paths", json_pack("{ss}", "artifact", fx.art));
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *enc = it_urlencode(bad[i]);

        if (strcmp(bad[i], "%2e%2e") == 0) { /* already encoded */
            free(enc);
            enc = strdup(bad[i]);
        }
        snprintf(path, sizeof(path), "/api/v1/models/paths/versions/%s", enc);
        free(enc);
        r = it_get(s, path, s->admin_token);
        if (r->status != 400)
            print_error("version: '%s'\n", bad[i]);
        it_expect_error(s, r, 400, "invalid_argument");
        r = it_jreq(s, "PATCH", path, s->admin_token, "{\"description\":\"d\"}");
        it_expect_error(s, r, 400, "invalid_argument");
        it_release(s);
    }
    for (size_t i = 0; i < sizeof(tails) / sizeof(tails[0]); i++) {
        snprintf(path, sizeof(path), "/api/v1/models/paths/versions/2%s", tails[i]);
        if (strcmp(tails[i], "/metrics") == 0)
            r = it_jreq(s, "POST", path, s->admin_token, "{\"metrics\":{\"a\":1}}");
        else
            r = it_get(s, path, s->admin_token);
        it_expect_error(s, r, 404, "not_found");
    }
}

static void test_parallel_creates_get_distinct_numbers(void **state)
{
    struct mg_server *s = *state;
    enum { N = 12 };
    struct it_spec specs[N];
    struct it_resp *out[N];
    bool seen[N + 1] = {false};
    char body[128];
    struct it_resp *r;

    it_model_create(fx.s, fx.s->admin_token, "parallel");
    snprintf(body, sizeof(body), "{\"artifact\":\"%s\"}", fx.art);
    for (int i = 0; i < N; i++)
        specs[i] = (struct it_spec){"POST",         "/api/v1/models/parallel/versions",
                                    s->admin_token, "application/json",
                                    body,           strlen(body)};
    it_request_parallel(s, N, specs, out);
    for (int i = 0; i < N; i++) {
        json_int_t v;

        it_expect_status(s, out[i], 201);
        v = it_jint(out[i]->json, "version");
        if (v < 1 || v > N || seen[v])
            fail_msg("concurrent creates: version %" JSON_INTEGER_FORMAT " twice or out of 1..%d",
                     v, N);
        seen[v] = true;
    }
    r = it_get(s, "/api/v1/models/parallel", s->admin_token);
    assert_int_equal(it_jint(r->json, "latest_version"), N);
}

/* A refusal that quotes what was sent, cut mid-character (a 2-byte 'Ǿ' across the 64-byte
 * cut of a metric name), is still a 400 with a valid UTF-8 message, never a 500 (the
 * fuzzer's find). */
static void test_refusal_quoting_a_cut_character(void **state)
{
    struct mg_server *s = *state;
    char art[IT_DIGEST_LEN + 1], body[600];
    struct it_resp *r;
    const char *msg;

    it_model_create(s, s->admin_token, "cutmsg");
    r = it_upload(s, "cut message bytes", 17, art);
    it_resp_free(s, &r);
    it_fmt(body, sizeof(body),
           "{\"artifact\":\"%s\",\"image\":\"%s\",\"metrics\":{\"%s\\u01fe more\":1}}", art,
           IT_IMAGE, "a234567890123456789012345678901234567890123456789012345678901`3");
    r = it_jreq(s, "POST", "/api/v1/models/cutmsg/versions", s->admin_token, body);
    it_expect_error_field(s, r, 400, "invalid_argument", "metrics");
    msg = json_string_value(json_object_get(json_object_get(r->json, "error"), "message"));
    assert_non_null(msg);
    assert_non_null(strstr(msg, "a234567890"));
    it_resp_free(s, &r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_full_version_round_trip, it_test_teardown),
        cmocka_unit_test_teardown(test_refusal_quoting_a_cut_character, it_test_teardown),
        cmocka_unit_test_teardown(test_numbering_latest_and_pages, it_test_teardown),
        cmocka_unit_test_teardown(test_estimated_vram_per_precision, it_test_teardown),
        cmocka_unit_test_teardown(test_list_filters, it_test_teardown),
        cmocka_unit_test_teardown(test_patch_description_and_tags_only, it_test_teardown),
        cmocka_unit_test_teardown(test_metrics_append, it_test_teardown),
        cmocka_unit_test_teardown(test_create_validation, it_test_teardown),
        cmocka_unit_test_teardown(test_version_numbers_in_paths, it_test_teardown),
        cmocka_unit_test_teardown(test_parallel_creates_get_distinct_numbers, it_test_teardown),
    };

    return it_main_result(
        cmocka_run_group_tests_name("integration_versions", tests, setup, it_group_teardown));
}
