/*
 * test_models.c - /api/v1/models: create, duplicate, get, list with ?q= and
 * pagination, patch; name rules in bodies and paths; JSON body validation
 * (types, malformed JSON, Content-Type); unknown models; the model card (readme,
 * rendered by cmark with raw HTML and unsafe links dropped) and metric directions.
 */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *admin_name(struct mg_server *s)
{
    struct it_resp *r = it_get(s, "/api/v1/whoami", s->admin_token);
    char *name;

    it_expect_status(s, r, 200);
    name = strdup(it_jstr(r->json, "name"));
    it_resp_free(s, &r);
    return name;
}

static void test_create_get_duplicate(void **state)
{
    struct mg_server *s = *state;
    char *me = admin_name(s);
    struct it_resp *r, *g;
    json_t *tags;

    r = it_jreq(s, "POST", "/api/v1/models", s->admin_token,
                "{\"name\":\"fraud\",\"description\":\"Fraud scoring\","
                "\"tags\":{\"team\":\"risk\",\"tier\":\"1\"}}");
    it_expect_status(s, r, 201);
    assert_string_equal(it_jstr(r->json, "name"), "fraud");
    assert_string_equal(it_jstr(r->json, "description"), "Fraud scoring");
    tags = it_jobj(r->json, "tags");
    assert_int_equal(json_object_size(tags), 2);
    assert_string_equal(it_jstr(tags, "team"), "risk");
    assert_string_equal(it_jstr(tags, "tier"), "1");
    it_expect_rfc3339(it_jstr(r->json, "created_at"));
    assert_string_equal(it_jstr(r->json, "created_by"), me);
    assert_non_null(json_object_get(r->json, "latest_version"));
    assert_true(json_is_null(json_object_get(r->json, "latest_version")));
    assert_int_equal(json_array_size(it_jarr(r->json, "aliases")), 0);

    g = it_get(s, "/api/v1/models/fraud", s->admin_token);
    it_expect_status(s, g, 200);
    if (!json_equal(g->json, r->json))
        fail_msg("GET differs from the create answer:\n%s\n%s", g->body, r->body);

    r = it_jreq(s, "POST", "/api/v1/models", s->admin_token,
                "{\"name\":\"fraud\",\"description\":\"again\"}");
    it_expect_error(s, r, 409, "conflict");
    g = it_get(s, "/api/v1/models/fraud", s->admin_token);
    assert_string_equal(it_jstr(g->json, "description"), "Fraud scoring");

    /* A name alone is enough. */
    r = it_jreq(s, "POST", "/api/v1/models", s->admin_token, "{\"name\":\"bare\"}");
    it_expect_status(s, r, 201);
    assert_true(json_is_object(it_jobj(r->json, "tags")));
    free(me);
}

static char *repeat(char c, size_t n)
{
    char *s = malloc(n + 1);

    assert_non_null(s);
    memset(s, c, n);
    s[n] = '\0';
    return s;
}

static void test_name_rules_in_bodies(void **state)
{
    static const char *const bad[] = {
        "../x",    "%2e%2e", "..",  ".",   "Fraud", "UPPER",       "",      "-lead",
        ".hidden", "_under", "a/b", "a b", "a\\b",  "caf\xc3\xa9", "a%2fb", "x\ny",
    };
    struct mg_server *s = *state;
    char *long200 = repeat('a', 200);
    char *len63 = repeat('b', 63);
    char *len64 = repeat('c', 64);
    struct it_resp *r;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        r = it_jreq_v(s, "POST", "/api/v1/models", s->admin_token,
                      json_pack("{ss}", "name", bad[i]));
        if (r->status != 400)
            print_error("name: '%s'\n", bad[i]);
        it_expect_error_field(s, r, 400, "invalid_argument", "name");
    }
    r = it_jreq_v(s, "POST", "/api/v1/models", s->admin_token, json_pack("{ss}", "name", long200));
    it_expect_error_field(s, r, 400, "invalid_argument", "name");
    r = it_jreq_v(s, "POST", "/api/v1/models", s->admin_token, json_pack("{ss}", "name", len64));
    it_expect_error_field(s, r, 400, "invalid_argument", "name");

    /* The edges of ^[a-z0-9][a-z0-9._-]{0,62}$ are accepted. */
    r = it_jreq_v(s, "POST", "/api/v1/models", s->admin_token, json_pack("{ss}", "name", len63));
    it_expect_status(s, r, 201);
    r = it_jreq(s, "POST", "/api/v1/models", s->admin_token, "{\"name\":\"0a.b_c-d\"}");
    it_expect_status(s, r, 201);
    r = it_jreq(s, "POST", "/api/v1/models", s->admin_token, "{\"name\":\"z\"}");
    it_expect_status(s, r, 201);
    free(long200);
    free(len63);
    free(len64);
}

static void test_name_rules_in_paths(void **state)
{
    static const char *const bad[] = {
        "%2e%2e", "..", ".", "..%2fx", "..%2Fx", "%2e%2e%2fx", "Fraud", "%46raud", "a%20b", "-x",
    };
    struct mg_server *s = *state;
    char *long200 = repeat('a', 200);
    char path[512];
    struct it_resp *r;

    r = it_jreq(s, "POST", "/api/v1/models", s->admin_token, "{\"name\":\"x\"}");
    it_expect_status(s, r, 201);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(path, sizeof(path), "/api/v1/models/%s", bad[i]);
        r = it_get(s, path, s->admin_token);
        it_expect_error(s, r, 400, "invalid_argument");
        r = it_jreq(s, "PATCH", path, s->admin_token, "{\"description\":\"d\"}");
        it_expect_error(s, r, 400, "invalid_argument");
        snprintf(path, sizeof(path), "/api/v1/models/%s/versions", bad[i]);
        r = it_get(s, path, s->admin_token);
        it_expect_error(s, r, 400, "invalid_argument");
        it_release(s);
    }
    snprintf(path, sizeof(path), "/api/v1/models/%s", long200);
    r = it_get(s, path, s->admin_token);
    it_expect_error(s, r, 400, "invalid_argument");

    /* A literal dot-dot segment names nothing: never resolved to /api/v1/x. */
    r = it_get(s, "/api/v1/models/../x", s->admin_token);
    it_expect_error(s, r, 400, "invalid_argument");
    r = it_get(s, "/api/v1/models/../models/x", s->admin_token);
    it_expect_error(s, r, 400, "invalid_argument");
    r = it_get(s, "/api/v1/models/./x", s->admin_token);
    it_expect_error(s, r, 400, "invalid_argument");
    free(long200);
}

static void test_json_body_validation(void **state)
{
    static const struct {
        const char *body;
        const char *field;
    } bad[] = {
        {"{\"name\":5}", "name"},
        {"{\"name\":null}", "name"},
        {"{\"name\":\"t1\",\"tags\":\"team=risk\"}", "tags"},
        {"{\"name\":\"t2\",\"tags\":[\"team\"]}", "tags"},
        {"{\"name\":\"t3\",\"tags\":{\"team\":1}}", "tags"},
        {"{\"name\":\"t4\",\"description\":5}", "description"},
        {"{}", "name"},
    };
    struct mg_server *s = *state;
    struct it_resp *r;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        r = it_jreq(s, "POST", "/api/v1/models", s->admin_token, bad[i].body);
        if (r->status != 400)
            print_error("body: %s\n", bad[i].body);
        it_expect_error_field(s, r, 400, "invalid_argument", bad[i].field);
    }

    /* Not an object, or not JSON at all. */
    r = it_jreq(s, "POST", "/api/v1/models", s->admin_token, "[\"t5\"]");
    it_expect_error(s, r, 400, "invalid_argument");
    r = it_jreq(s, "POST", "/api/v1/models", s->admin_token, "{\"name\":\"t6\"");
    it_expect_error(s, r, 400, "invalid_argument");
    r = it_jreq(s, "POST", "/api/v1/models", s->admin_token, "name=t7");
    it_expect_error(s, r, 400, "invalid_argument");
    r = it_jreq(s, "POST", "/api/v1/models", s->admin_token, "");
    it_expect_error(s, r, 400, "invalid_argument");

    /* Another Content-Type: 415, whatever the body. */
    r = it_treq(s, "POST", "/api/v1/models", s->admin_token, "text/plain", "{\"name\":\"t8\"}");
    it_expect_error(s, r, 415, "unsupported_media_type");
    r = it_treq(s, "POST", "/api/v1/models", s->admin_token, "application/x-www-form-urlencoded",
                "{\"name\":\"t8\"}");
    it_expect_error(s, r, 415, "unsupported_media_type");
    r = it_get(s, "/api/v1/models/t8", s->admin_token);
    it_expect_error(s, r, 404, "not_found");

    /* application/json with a charset parameter is JSON. */
    r = it_treq(s, "POST", "/api/v1/models", s->admin_token, "application/json; charset=utf-8",
                "{\"name\":\"t9\"}");
    it_expect_status(s, r, 201);
}

static json_t *walk(struct mg_server *s, const char *query, unsigned limit, size_t *pages)
{
    json_t *all = json_array();
    char *token = NULL;
    char path[512];

    *pages = 0;
    for (;;) {
        struct it_resp *r;
        json_t *next;
        char *enc = NULL;

        if (token != NULL)
            enc = it_urlencode(token);
        snprintf(path, sizeof(path), "/api/v1/models?limit=%u%s%s%s%s", limit, query ? "&q=" : "",
                 query ? query : "", enc ? "&page_token=" : "", enc ? enc : "");
        free(enc);
        r = it_get(s, path, s->admin_token);
        it_expect_status(s, r, 200);
        assert_true(json_array_size(it_jarr(r->json, "items")) <= limit);
        json_array_extend(all, it_jarr(r->json, "items"));
        (*pages)++;
        assert_true(*pages < 1000);
        next = json_object_get(r->json, "next_page_token");
        assert_non_null(next); /* present, string or null */
        free(token);
        token = NULL;
        if (json_is_null(next))
            break;
        assert_true(json_is_string(next));
        token = strdup(json_string_value(next));
        it_resp_free(s, &r);
    }
    return all;
}

static void test_list_filter_and_pages(void **state)
{
    static const char *const names[] = {"list-alpha", "list-beta", "list-gamma", "other-delta"};
    struct mg_server *s = *state;
    struct it_resp *r;
    json_t *all, *paged, *it;
    size_t i, pages;

    for (i = 0; i < 4; i++) {
        r = it_jreq_v(s, "POST", "/api/v1/models", s->admin_token,
                      json_pack("{ss}", "name", names[i]));
        it_expect_status(s, r, 201);
    }

    r = it_get(s, "/api/v1/models?q=list-", s->admin_token);
    it_expect_status(s, r, 200);
    assert_int_equal(json_array_size(it_jarr(r->json, "items")), 3);
    json_array_foreach(it_jarr(r->json, "items"), i, it)
    {
        assert_non_null(strstr(it_jstr(it, "name"), "list-"));
    }
    assert_true(json_is_null(json_object_get(r->json, "next_page_token")));
    r = it_get(s, "/api/v1/models?q=er-d", s->admin_token); /* a substring, not a prefix */
    it_expect_status(s, r, 200);
    assert_int_equal(json_array_size(it_jarr(r->json, "items")), 1);
    assert_string_equal(it_jstr(json_array_get(it_jarr(r->json, "items"), 0), "name"),
                        "other-delta");
    r = it_get(s, "/api/v1/models?q=no-such-thing", s->admin_token);
    it_expect_status(s, r, 200);
    assert_int_equal(json_array_size(it_jarr(r->json, "items")), 0);

    /* Walking with limit=1 (and 2) yields every model exactly once. */
    r = it_get(s, "/api/v1/models?limit=1000", s->admin_token);
    it_expect_status(s, r, 200);
    all = it_jarr(r->json, "items");
    assert_true(json_array_size(all) >= 4);
    for (unsigned limit = 1; limit <= 2; limit++) {
        paged = walk(s, NULL, limit, &pages);
        assert_int_equal(json_array_size(paged), json_array_size(all));
        assert_true(pages >= json_array_size(all) / limit);
        json_array_foreach(all, i, it)
        {
            size_t k, hits = 0;
            json_t *p;

            json_array_foreach(paged, k, p)
            {
                if (strcmp(it_jstr(p, "name"), it_jstr(it, "name")) == 0)
                    hits++;
            }
            if (hits != 1)
                fail_msg("model %s seen %zu times walking pages of %u", it_jstr(it, "name"), hits,
                         limit);
        }
        json_decref(paged);
    }
    paged = walk(s, "list-", 1, &pages);
    assert_int_equal(json_array_size(paged), 3);
    json_decref(paged);

    r = it_get(s, "/api/v1/models?limit=1", s->admin_token);
    it_expect_status(s, r, 200);
    assert_int_equal(json_array_size(it_jarr(r->json, "items")), 1);
    assert_true(json_is_string(json_object_get(r->json, "next_page_token")));
}

static void test_patch(void **state)
{
    struct mg_server *s = *state;
    struct it_resp *r;

    r = it_jreq(s, "POST", "/api/v1/models", s->admin_token,
                "{\"name\":\"patchy\",\"description\":\"old\",\"tags\":{\"team\":\"risk\"}}");
    it_expect_status(s, r, 201);

    r = it_jreq(s, "PATCH", "/api/v1/models/patchy", s->admin_token,
                "{\"description\":\"new words\"}");
    it_expect_status(s, r, 200);
    assert_string_equal(it_jstr(r->json, "name"), "patchy");
    assert_string_equal(it_jstr(r->json, "description"), "new words");
    r = it_jreq(s, "PATCH", "/api/v1/models/patchy", s->admin_token,
                "{\"tags\":{\"team\":\"ads\",\"owner\":\"kim\"}}");
    it_expect_status(s, r, 200);
    assert_string_equal(it_jstr(it_jobj(r->json, "tags"), "team"), "ads");
    assert_string_equal(it_jstr(it_jobj(r->json, "tags"), "owner"), "kim");
    assert_string_equal(it_jstr(r->json, "description"), "new words");

    r = it_get(s, "/api/v1/models/patchy", s->admin_token);
    it_expect_status(s, r, 200);
    assert_string_equal(it_jstr(r->json, "description"), "new words");
    assert_string_equal(it_jstr(it_jobj(r->json, "tags"), "team"), "ads");

    r = it_jreq(s, "PATCH", "/api/v1/models/patchy", s->admin_token, "{\"tags\":\"x\"}");
    it_expect_error_field(s, r, 400, "invalid_argument", "tags");
    r = it_jreq(s, "PATCH", "/api/v1/models/patchy", s->admin_token, "{\"description\":7}");
    it_expect_error_field(s, r, 400, "invalid_argument", "description");
    r = it_jreq(s, "PATCH", "/api/v1/models/patchy", s->admin_token, "{\"description\":");
    it_expect_error(s, r, 400, "invalid_argument");
    r = it_treq(s, "PATCH", "/api/v1/models/patchy", s->admin_token, "text/plain",
                "{\"description\":\"d\"}");
    it_expect_error(s, r, 415, "unsupported_media_type");
    r = it_jreq(s, "PATCH", "/api/v1/models/no-such-model", s->admin_token,
                "{\"description\":\"d\"}");
    it_expect_error(s, r, 404, "not_found");

    r = it_get(s, "/api/v1/models/patchy", s->admin_token);
    assert_string_equal(it_jstr(r->json, "description"), "new words");
}

static void test_unknown_model(void **state)
{
    struct mg_server *s = *state;
    char digest[IT_DIGEST_LEN + 1];
    char body[160];
    struct it_resp *r;

    r = it_get(s, "/api/v1/models/no-such-model", s->admin_token);
    it_expect_error(s, r, 404, "not_found");
    r = it_get(s, "/api/v1/models/no-such-model/versions", s->admin_token);
    it_expect_error(s, r, 404, "not_found");
    r = it_get(s, "/api/v1/models/no-such-model/versions/1", s->admin_token);
    it_expect_error(s, r, 404, "not_found");
    it_upload(s, "unknown model artifact", 22, digest);
    snprintf(body, sizeof(body), "{\"artifact\":\"%s\"}", digest);
    r = it_jreq(s, "POST", "/api/v1/models/no-such-model/versions", s->admin_token, body);
    it_expect_error(s, r, 404, "not_found");
}

static void test_parallel_creates_of_one_name(void **state)
{
    struct mg_server *s = *state;
    enum { N = 8 };
    static const char body[] = "{\"name\":\"racy\"}";
    struct it_spec specs[N];
    struct it_resp *out[N];
    int created = 0;

    for (int i = 0; i < N; i++)
        specs[i] = (struct it_spec){"POST", "/api/v1/models", s->admin_token, "application/json",
                                    body,   strlen(body)};
    it_request_parallel(s, N, specs, out);
    for (int i = 0; i < N; i++) {
        if (out[i]->status == 201)
            created++;
        else
            it_expect_error(s, out[i], 409, "conflict");
    }
    assert_int_equal(created, 1);
}

/* How deep a rendered node tree goes (the document is 1, a leaf counts too). */
static int doc_depth(const json_t *n)
{
    const json_t *c = json_object_get(n, "c"), *k;
    size_t i;
    int best = 0;

    json_array_foreach(c, i, k)
    {
        int d = doc_depth(k);

        best = d > best ? d : best;
    }
    return best + 1;
}

/* Every node of type t, in document order, appended to out. */
static void doc_find(const json_t *n, const char *t, json_t *out)
{
    const json_t *k;
    size_t i;

    if (strcmp(json_string_value(json_object_get(n, "t")), t) == 0)
        json_array_append(out, (json_t *)n);
    json_array_foreach(json_object_get(n, "c"), i, k) doc_find(k, t, out);
}

static void test_readme_and_directions(void **state)
{
    static const char card[] =
        "# Fraud scorer\n\nScores *card-not-present* payments. See "
        "[the runbook](https://wiki.example/fraud \"Runbook\") or "
        "[mail us](mailto:risk@example.com).\n\n"
        "<script>alert('block')</script>\n\n"
        "Inline <img src=x onerror=alert(1)> html and <b onmouseover=alert(2)>bold</b>.\n\n"
        "[click](javascript:alert(3)) [data](data:text/html;base64,PHNjcmlwdD4=) "
        "[JS upper](JaVaScRiPt:alert(4)) ![pixel](data:image/png;base64,AAAA) "
        "![chart](https://img.example/c.png)\n\n"
        "- one\n- two\n\n```python\nprint('<b>')\n```\n";
    struct mg_server *s = *state;
    struct it_resp *r;
    json_t *body, *doc, *found;
    char *big, *dump;

    body = json_pack("{s:s, s:s, s:{s:s, s:s}}", "name", "carded", "readme", card,
                     "metric_directions", "auc", "higher", "p95_ms", "lower");
    r = it_jreq_v(s, "POST", "/api/v1/models", s->admin_token, body);
    it_expect_status(s, r, 201);
    assert_string_equal(it_jstr(r->json, "readme"), card);
    assert_string_equal(it_jstr(it_jobj(r->json, "metric_directions"), "auc"), "higher");
    assert_string_equal(it_jstr(it_jobj(r->json, "metric_directions"), "p95_ms"), "lower");

    /* Lists carry the directions but not the (large) readme. */
    r = it_get(s, "/api/v1/models?q=carded", s->admin_token);
    it_expect_status(s, r, 200);
    assert_int_equal(json_array_size(it_jarr(r->json, "items")), 1);
    assert_null(json_object_get(json_array_get(it_jarr(r->json, "items"), 0), "readme"));
    assert_string_equal(
        it_jstr(it_jobj(json_array_get(it_jarr(r->json, "items"), 0), "metric_directions"), "auc"),
        "higher");

    r = it_get(s, "/api/v1/models/carded/readme", s->admin_token);
    it_expect_status(s, r, 200);
    assert_string_equal(it_jstr(r->json, "markdown"), card);
    doc = it_jobj(r->json, "doc");
    assert_string_equal(it_jstr(doc, "t"), "document");
    dump = json_dumps(doc, JSON_COMPACT);
    assert_non_null(dump);
    /* Raw HTML and every unsafe URL are gone; their text stays where it was text. */
    assert_null(strstr(dump, "<script"));
    assert_null(strstr(dump, "onerror"));
    assert_null(strstr(dump, "onmouseover"));
    assert_null(strstr(dump, "alert('block')"));
    assert_null(strstr(dump, "javascript:"));
    assert_null(strstr(dump, "JaVaScRiPt:"));
    assert_null(strstr(dump, "data:"));
    assert_non_null(strstr(dump, "print('<b>')")); /* code is text */
    free(dump);
    found = json_array();
    doc_find(doc, "link", found);
    assert_int_equal(json_array_size(found), 3);
    assert_string_equal(it_jstr(json_array_get(found, 0), "href"), "https://wiki.example/fraud");
    assert_string_equal(it_jstr(json_array_get(found, 0), "title"), "Runbook");
    assert_string_equal(it_jstr(json_array_get(found, 1), "href"), "mailto:risk@example.com");
    assert_string_equal(it_jstr(json_array_get(found, 2), "href"), "https://img.example/c.png");
    assert_true(json_is_true(json_object_get(json_array_get(found, 2), "image")));
    json_array_clear(found);
    doc_find(doc, "span", found); /* click, data, JS upper, pixel: their text, no link */
    assert_int_equal(json_array_size(found), 4);
    json_array_clear(found);
    doc_find(doc, "heading", found);
    assert_int_equal(json_array_size(found), 1);
    assert_int_equal(it_jint(json_array_get(found, 0), "level"), 1);
    json_array_clear(found);
    doc_find(doc, "code_block", found);
    assert_int_equal(json_array_size(found), 1);
    assert_string_equal(it_jstr(json_array_get(found, 0), "info"), "python");
    json_decref(found);

    /* At most 64 KiB: the cap itself passes, a byte more is refused and changes nothing. */
    big = repeat('x', 65536);
    r = it_jreq_v(s, "PATCH", "/api/v1/models/carded", s->admin_token,
                  json_pack("{s:s}", "readme", big));
    it_expect_status(s, r, 200);
    assert_int_equal(strlen(it_jstr(r->json, "readme")), 65536);
    free(big);
    big = repeat('y', 65537);
    r = it_jreq_v(s, "PATCH", "/api/v1/models/carded", s->admin_token,
                  json_pack("{s:s}", "readme", big));
    it_expect_error_field(s, r, 400, "invalid_argument", "readme");
    assert_non_null(strstr(r->body, "64 KiB"));
    free(big);
    r = it_jreq_v(s, "POST", "/api/v1/models", s->admin_token,
                  json_pack("{s:s, s:s}", "name", "carded-2", "readme", "a\001b"));
    it_expect_error_field(s, r, 400, "invalid_argument", "readme");
    r = it_jreq(s, "PATCH", "/api/v1/models/carded", s->admin_token, "{\"readme\":7}");
    it_expect_error_field(s, r, 400, "invalid_argument", "readme");
    r = it_jreq(s, "PATCH", "/api/v1/models/carded", s->admin_token,
                "{\"metric_directions\":{\"auc\":\"up\"}}");
    it_expect_error_field(s, r, 400, "invalid_argument", "metric_directions");
    r = it_jreq(s, "PATCH", "/api/v1/models/carded", s->admin_token,
                "{\"metric_directions\":{\"a b\":\"higher\"}}");
    it_expect_error_field(s, r, 400, "invalid_argument", "metric_directions");
    r = it_jreq(s, "PATCH", "/api/v1/models/carded", s->admin_token,
                "{\"metric_directions\":[\"auc\"]}");
    it_expect_error_field(s, r, 400, "invalid_argument", "metric_directions");
    r = it_get(s, "/api/v1/models/carded", s->admin_token);
    assert_int_equal(strlen(it_jstr(r->json, "readme")), 65536);
    assert_int_equal(json_object_size(it_jobj(r->json, "metric_directions")), 2);

    /* PATCH replaces the directions; an empty readme renders as an empty document. */
    r = it_jreq(s, "PATCH", "/api/v1/models/carded", s->admin_token,
                "{\"readme\":\"\",\"metric_directions\":{\"loss\":\"lower\"}}");
    it_expect_status(s, r, 200);
    assert_int_equal(json_object_size(it_jobj(r->json, "metric_directions")), 1);
    r = it_get(s, "/api/v1/models/carded/readme", s->admin_token);
    it_expect_status(s, r, 200);
    assert_int_equal(json_array_size(it_jarr(it_jobj(r->json, "doc"), "c")), 0);

    /* Thousands of nested quotes and emphasis render, flattened to a bounded depth. */
    big = repeat('>', 60000);
    big[59998] = ' ';
    big[59999] = 'x';
    r = it_jreq_v(s, "PATCH", "/api/v1/models/carded", s->admin_token,
                  json_pack("{s:s}", "readme", big));
    it_expect_status(s, r, 200);
    free(big);
    r = it_get(s, "/api/v1/models/carded/readme", s->admin_token);
    it_expect_status(s, r, 200);
    assert_true(doc_depth(it_jobj(r->json, "doc")) <= 24 + 1); /* containers, then a leaf */
    assert_non_null(strstr(r->body, "\"x\""));
    r = it_get(s, "/api/v1/models/no-such-model/readme", s->admin_token);
    it_expect_error(s, r, 404, "not_found");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_create_get_duplicate, it_test_teardown),
        cmocka_unit_test_teardown(test_name_rules_in_bodies, it_test_teardown),
        cmocka_unit_test_teardown(test_name_rules_in_paths, it_test_teardown),
        cmocka_unit_test_teardown(test_json_body_validation, it_test_teardown),
        cmocka_unit_test_teardown(test_list_filter_and_pages, it_test_teardown),
        cmocka_unit_test_teardown(test_patch, it_test_teardown),
        cmocka_unit_test_teardown(test_unknown_model, it_test_teardown),
        cmocka_unit_test_teardown(test_parallel_creates_of_one_name, it_test_teardown),
        cmocka_unit_test_teardown(test_readme_and_directions, it_test_teardown),
    };

    return cmocka_run_group_tests_name("integration_models", tests, it_group_setup,
                                       it_group_teardown);
}
