/*
 * test_read_cache.c - the response cache behind GET …/versions/{n} and
 * GET …/last-known-good never answers with what was true before a write:
 * every change (tags, description, metrics, alias moves, rollback, a data
 * set's lineage, an archive) shows on the very next read, while repeated reads with nothing written
 * are served from the cache (its hit counter in /metrics moves). And one data directory serves one
 * modelgated: a second one refuses to start, saying why.
 */
#include "harness.h"
#include "sys.h"
#include "api.h"
#include "release_common.h"

#include <string.h>
#include <sys/wait.h>

/* modelgate_response_cache_lookups_total{result="hit"} now. */
static double cache_hits(void)
{
    struct it_resp *r = it_get(cx.s, "/metrics", cx.t.rd);
    const char *p;

    it_expect_status(cx.s, r, 200);
    p = strstr(r->body, "modelgate_response_cache_lookups_total{result=\"hit\"} ");
    if (p == NULL)
        fail_msg("/metrics has no cache hit counter:\n%.2000s", r->body);
    return strtod(p + strlen("modelgate_response_cache_lookups_total{result=\"hit\"} "), NULL);
}

static void test_version_changes_show_at_once(void **state)
{
    struct mg_server *s = *state;
    const char *path = "/api/v1/models/cv/versions/1";
    struct it_resp *r, *first;
    double h0;

    it_model_create(cx.s, cx.t.pub, "cv");
    it_version_create(cx.s, cx.t.pub, "cv", cx.art, rel_metrics(0.9, 40));
    first = it_get(s, path, cx.t.rd);
    it_expect_status(s, first, 200);
    h0 = cache_hits();
    for (int i = 0; i < 5; i++) {
        r = it_get(s, path, cx.t.rd);
        it_expect_status(s, r, 200);
        assert_string_equal(r->body, first->body); /* byte for byte */
        assert_string_equal(it_header(r, "Content-Type"), "application/json; charset=utf-8");
    }
    assert_true(cache_hits() >= h0 + 5);

    r = it_jreq(s, "PATCH", path, cx.t.pub, "{\"tags\":{\"stage\":\"cached?\"}}");
    it_expect_status(s, r, 200);
    r = it_get(s, path, cx.t.rd);
    it_expect_status(s, r, 200);
    assert_string_equal(it_jstr(it_jobj(r->json, "tags"), "stage"), "cached?");

    r = it_jreq(s, "PATCH", path, cx.t.pub, "{\"description\":\"second\"}");
    it_expect_status(s, r, 200);
    r = it_get(s, path, cx.t.rd);
    assert_string_equal(it_jstr(r->json, "description"), "second");

    r = it_jreq(s, "POST", "/api/v1/models/cv/versions/1/metrics", cx.t.pub,
                "{\"metrics\":{\"f1\":0.5}}");
    it_expect_status(s, r, 200);
    r = it_get(s, path, cx.t.rd);
    assert_true(it_jnum(it_jobj(r->json, "metrics"), "f1") == 0.5);

    /* Not found is answered, not remembered: the version appears when created. */
    r = it_get(s, "/api/v1/models/cv/versions/2", cx.t.rd);
    it_expect_error(s, r, 404, "not_found");
    it_version_create(cx.s, cx.t.pub, "cv", cx.art, rel_metrics(0.8, 40));
    r = it_get(s, "/api/v1/models/cv/versions/2", cx.t.rd);
    it_expect_status(s, r, 200);
    assert_int_equal(it_jint(r->json, "version"), 2);
    /* Each version is its own entry. */
    r = it_get(s, path, cx.t.rd);
    assert_int_equal(it_jint(r->json, "version"), 1);
}

static void test_lkg_changes_show_at_once(void **state)
{
    struct mg_server *s = *state;
    const char *path = "/api/v1/models/cl/aliases/production/last-known-good";
    struct it_resp *r;
    double h0;

    it_model_create(cx.s, cx.t.pub, "cl");
    it_version_create(cx.s, cx.t.pub, "cl", cx.art, rel_metrics(0.9, 40));
    it_version_create(cx.s, cx.t.pub, "cl", cx.art, rel_metrics(0.91, 40));
    r = it_get(s, path, cx.t.rd);
    it_expect_error(s, r, 404, "no_known_good");

    it_alias_to(cx.s, cx.t.dep, "cl", "production", 1, 0);
    r = it_get(s, path, cx.t.rd);
    it_expect_status(s, r, 200);
    assert_int_equal(it_jint(r->json, "version"), 1);
    /* The alias change is still being delivered (the runner's gateway acks it,
     * a write): reads are served from the cache once nothing more is written. */
    {
        int64_t deadline = it_deadline(10000);
        bool hit = false;

        while (!hit && it_now_ms() < deadline) {
            h0 = cache_hits();
            for (int i = 0; i < 3; i++)
                assert_int_equal(rel_lkg(&cx, "cl", "production"), 1);
            hit = cache_hits() >= h0 + 3;
        }
        if (!hit)
            fail_msg("repeated last-known-good reads were never answered from the cache");
    }

    it_alias_to(cx.s, cx.t.dep, "cl", "production", 2, 0);
    assert_int_equal(rel_lkg(&cx, "cl", "production"), 2);
    /* Another alias of the same model is another entry. */
    r = it_get(s, "/api/v1/models/cl/aliases/staging/last-known-good", cx.t.rd);
    it_expect_status_not(r, 200, 0);

    r = it_jreq(s, "POST", "/api/v1/models/cl/aliases/production/rollback", cx.t.dep,
                "{\"reason\":\"v2 pages on-call\"}");
    it_expect_status_not(r, 400, 404);
    assert_true(r->status == 200 || r->status == 202);
    assert_int_equal(rel_lkg(&cx, "cl", "production"), 1);
}

/* Writes whose audit names no model still change a version's cached answer, and show on
 * the next read: a data set registered with a withdrawn parent (the version, trained on
 * it, now shows the withdrawn ancestor), then an archive. Each write names the models it
 * changed (store_audit_append, users_bump), not its audit action. */
static void test_lineage_changes_show_at_once(void **state)
{
    struct mg_server *s = *state;
    const char *path = "/api/v1/models/cw/versions/1";
    char raw[IT_DIGEST_LEN + 1], train[IT_DIGEST_LEN + 1], url[160], body[320];
    struct it_resp *r, *first;
    double h0;

    it_digest("cache: raw events", 17, raw);
    it_digest("cache: training set", 19, train);
    it_model_create(cx.s, cx.t.pub, "cw");
    it_version_create(cx.s, cx.t.pub, "cw", cx.art,
                      json_pack("{s:[{s:s, s:s}]}", "datasets", "digest", train, "role", "train"));
    /* The parent is registered and withdrawn while nothing the version cites derives from it. */
    r = it_jreq(s, "POST", "/api/v1/datasets", cx.t.pub,
                it_fmt(body, sizeof(body), "{\"digest\":\"%s\",\"name\":\"raw\"}", raw));
    it_expect_status(s, r, 201);
    r = it_jreq(s, "POST", it_fmt(url, sizeof(url), "/api/v1/datasets/%s/withdraw", raw),
                s->admin_token, "{\"reason\":\"personal data found\"}");
    it_expect_status(s, r, 200);
    first = it_get(s, path, cx.t.rd);
    it_expect_status(s, first, 200);
    assert_int_equal(json_array_size(it_jarr(first->json, "withdrawn_datasets")), 0);
    h0 = cache_hits();
    r = it_get(s, path, cx.t.rd);
    assert_string_equal(r->body, first->body);
    assert_true(cache_hits() >= h0 + 1); /* the answer is held */

    /* The training set's record names the withdrawn parent: the next read shows it. */
    r = it_jreq(s, "POST", "/api/v1/datasets", cx.t.pub,
                it_fmt(body, sizeof(body),
                       "{\"digest\":\"%s\",\"name\":\"train\",\"parents\":[\"%s\"]}", train, raw));
    it_expect_status(s, r, 201);
    r = it_get(s, path, cx.t.rd);
    it_expect_status(s, r, 200);
    assert_int_equal(json_array_size(it_jarr(r->json, "withdrawn_datasets")), 1);
    assert_string_equal(
        json_string_value(json_array_get(it_jarr(r->json, "withdrawn_datasets"), 0)), raw);

    /* A change of status (audited as version.archive) shows too. */
    r = it_get(s, path, cx.t.rd);
    assert_string_equal(it_jstr(r->json, "status"), "ready");
    r = it_jreq(s, "POST", "/api/v1/models/cw/versions/1/archive", cx.t.pub, NULL);
    it_expect_status(s, r, 200);
    r = it_get(s, path, cx.t.rd);
    it_expect_status(s, r, 200);
    assert_string_equal(it_jstr(r->json, "status"), "archived");
}

/* Many readers while the version changes: after the write's 200, no read
 * that starts later sees the old tags. */
static void test_reads_racing_a_write(void **state)
{
    struct mg_server *s = *state;
    const char *path = "/api/v1/models/cr/versions/1";
    struct it_spec specs[16];
    struct it_resp *out[16], *r;
    char body[64];

    it_model_create(cx.s, cx.t.pub, "cr");
    it_version_create(cx.s, cx.t.pub, "cr", cx.art, rel_metrics(0.9, 40));
    for (size_t i = 0; i < 16; i++)
        specs[i] = (struct it_spec){"GET", path, cx.t.rd, NULL, NULL, 0};
    for (int round = 0; round < 20; round++) {
        it_request_parallel(s, 16, specs, out); /* fill the cache from many threads */
        for (size_t i = 0; i < 16; i++)
            it_expect_status(s, out[i], 200);
        snprintf(body, sizeof(body), "{\"tags\":{\"round\":\"%d\"}}", round);
        r = it_jreq(s, "PATCH", path, cx.t.pub, body);
        it_expect_status(s, r, 200);
        it_request_parallel(s, 16, specs, out);
        for (size_t i = 0; i < 16; i++) {
            char want[16];

            it_expect_status(s, out[i], 200);
            snprintf(want, sizeof(want), "%d", round);
            assert_string_equal(it_jstr(it_jobj(out[i]->json, "tags"), "round"), want);
        }
        it_release(s);
    }
}

/* --response-cache off: the same answers, none of them from memory. */
static void test_cache_off(void **state)
{
    static const char *const args[] = {"--response-cache", "off", NULL};
    struct mg_server *s = it_server_start(args);
    struct it_resp *r, *first;
    char art[IT_DIGEST_LEN + 1], body[256];
    const char *p;

    (void)state;
    r = it_jreq(s, "POST", "/api/v1/models", s->admin_token, "{\"name\":\"off\"}");
    it_expect_status(s, r, 201);
    it_upload(s, "off bytes", 9, art);
    snprintf(body, sizeof(body), "{\"artifact\":\"%s\",\"tags\":{\"t\":\"1\"}}", art);
    r = it_jreq(s, "POST", "/api/v1/models/off/versions", s->admin_token, body);
    it_expect_status(s, r, 201);
    first = it_get(s, "/api/v1/models/off/versions/1", s->admin_token);
    it_expect_status(s, first, 200);
    for (int i = 0; i < 3; i++) {
        r = it_get(s, "/api/v1/models/off/versions/1", s->admin_token);
        assert_string_equal(r->body, first->body);
    }
    r = it_jreq(s, "PATCH", "/api/v1/models/off/versions/1", s->admin_token,
                "{\"tags\":{\"t\":\"2\"}}");
    it_expect_status(s, r, 200);
    r = it_get(s, "/api/v1/models/off/versions/1", s->admin_token);
    assert_string_equal(it_jstr(it_jobj(r->json, "tags"), "t"), "2");
    r = it_get(s, "/metrics", s->admin_token);
    p = strstr(r->body, "modelgate_response_cache_lookups_total{result=\"hit\"} ");
    assert_non_null(p);
    assert_true(
        strtod(p + strlen("modelgate_response_cache_lookups_total{result=\"hit\"} "), NULL) == 0);
    it_server_free(&s);
}

static void test_second_server_on_the_same_data_dir_refuses(void **state)
{
    struct mg_server *s = *state;
    const char *bin = getenv("MODELGATED");
    char cmd[IT_PATH_MAX * 2 + 128], out[4096];
    size_t n;
    FILE *p;
    int status;

    assert_non_null(bin);
    snprintf(cmd, sizeof(cmd), "'%s' --listen 127.0.0.1:0 --data-dir '%s' 2>&1", bin, s->data_dir);
    p = popen(cmd, "r");
    assert_non_null(p);
    n = fread(out, 1, sizeof(out) - 1, p);
    out[n] = '\0';
    status = pclose(p);
    assert_true(WIFEXITED(status));
    assert_int_not_equal(WEXITSTATUS(status), 0);
    if (strstr(out, "in use by another modelgated process") == NULL)
        fail_msg("the second server should say the data directory is in use:\n%s", out);
    /* The first one is unharmed. */
    assert_int_equal(rel_lkg(&cx, "cl", "production"), 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_version_changes_show_at_once, it_test_teardown),
        cmocka_unit_test_teardown(test_lkg_changes_show_at_once, it_test_teardown),
        cmocka_unit_test_teardown(test_lineage_changes_show_at_once, it_test_teardown),
        cmocka_unit_test_teardown(test_reads_racing_a_write, it_test_teardown),
        cmocka_unit_test_teardown(test_cache_off, it_test_teardown),
        cmocka_unit_test_teardown(test_second_server_on_the_same_data_dir_refuses,
                                  it_test_teardown),
    };

    return it_main_result(cmocka_run_group_tests(tests, rel_group_setup, rel_group_teardown));
}
