/*
 * test_push_webhook.c - milestone M4, webhooks, against a receiver in this
 * program that verifies every delivery (webhook_rx.h): signatures and
 * timestamps, retries that honour Retry-After and converge on the newest
 * generation in order with a stable webhook-id, a receiver that was down
 * getting only the newest generation, a new gateway getting the current
 * state of the aliases its filters match, ?wait in sync and at the
 * deadline, SSRF refusals at config time, redirects not followed, and 410
 * disabling the gateway with a visible reason. M24: a gateway that asks for them also
 * hears promotion.awaiting_approval and promotion.rolled_back, signed the same way.
 */
#include "harness.h"
#include "sys.h"
#include "api.h"
#include "push_common.h"
#include "webhook_rx.h"

#include <string.h>

#include "base/util.h"

#define SECRET "whsec-modelgate-test-0123456789abcdef"

static struct mg_server *srv;
static char art[IT_DIGEST_LEN + 1];

static int setup(void **state)
{
    srv = it_server_start(PC_SERVER_ARGS);
    it_upload(srv, "webhook test model bytes", 24, art);
    it_release(srv);
    *state = srv;
    return 0;
}

static int teardown(void **state)
{
    if (srv != NULL) {
        it_server_stop(srv);
        it_server_free(&srv);
    }
    *state = NULL;
    return 0;
}

/* A model with n versions. */
static void model_with_versions(const char *model, int n)
{
    it_model_create(srv, srv->admin_token, model);
    for (int i = 1; i <= n; i++)
        assert_int_equal(it_version_create(srv, srv->admin_token, model, art, NULL), i);
}

/* Every record: signature and timestamp verified, sent to /hook/<tag>. */
static void expect_all_verified(const struct rx_rec *recs, size_t n, const char *tag)
{
    char path[128];

    it_fmt(path, sizeof(path), "/hook/%s", tag);
    for (size_t i = 0; i < n; i++) {
        if (!recs[i].sig_ok || !recs[i].ts_ok || strcmp(recs[i].path, path) != 0 || recs[i].gen < 1)
            fail_msg("delivery %zu to %s: signature %s, timestamp %lld %s, generation %lld; "
                     "id '%s', body %s",
                     i, recs[i].path, recs[i].sig_ok ? "ok" : "BAD", (long long)recs[i].ts,
                     recs[i].ts_ok ? "ok" : "SKEWED", (long long)recs[i].gen, recs[i].id,
                     recs[i].body);
    }
}

/* Records arrive in non-decreasing generation order; one id per generation. */
static void expect_ordered_ids(const struct rx_rec *recs, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        if (recs[i].gen < recs[i - 1].gen)
            fail_msg("generation %lld was delivered after generation %lld", (long long)recs[i].gen,
                     (long long)recs[i - 1].gen);
    }
    for (size_t i = 0; i < n; i++) {
        for (size_t j = i + 1; j < n; j++) {
            bool same_gen = recs[i].gen == recs[j].gen;
            bool same_id = strcmp(recs[i].id, recs[j].id) == 0;

            if (same_gen != same_id)
                fail_msg("webhook-id '%s' (generation %lld) vs '%s' (generation %lld): the id "
                         "must be stable across retries of one generation and differ between "
                         "generations",
                         recs[i].id, (long long)recs[i].gen, recs[j].id, (long long)recs[j].gen);
        }
    }
}

/* The body's routes equal the Alias's routes (version, weight, artifact,
 * image, in order). */
static void expect_routes_like_alias(const char *body, const json_t *alias)
{
    json_t *b = json_loads(body, 0, NULL);
    json_t *got = json_object_get(b, "routes"), *want = json_object_get(alias, "routes");
    static const char *const keys[] = {"version", "weight", "artifact", "image"};

    if (!json_is_array(got) || json_array_size(got) != json_array_size(want) ||
        json_array_size(got) == 0)
        fail_msg("webhook routes differ from the alias's %zu routes: %s", json_array_size(want),
                 body);
    for (size_t i = 0; i < json_array_size(got); i++) {
        for (size_t k = 0; k < 4; k++) {
            json_t *g = json_object_get(json_array_get(got, i), keys[k]);
            json_t *w = json_object_get(json_array_get(want, i), keys[k]);

            if (g == NULL || !json_equal(g, w))
                fail_msg("webhook routes[%zu].%s differs from the alias's: body %s", i, keys[k],
                         body);
        }
    }
    json_decref(b);
}

static void test_signed_retries_converge_in_order(void **state)
{
    struct mg_server *s = *state;
    struct rx *x = rx_start(SECRET, true);
    struct rx_rec recs[64];
    struct it_resp *r;
    json_int_t g1, g3;
    json_t *d, *body;
    size_t n, ok = 0;

    model_with_versions("wh-retry", 3);
    rx_gateway_put(srv, "wh-retry", x, ",\"models\":[\"wh-retry\"]");
    /* Four 500s with Retry-After: 1, then 200. */
    rx_behave(x, 4, 1, 200, NULL);
    g1 = it_alias_set(s, s->admin_token, "wh-retry", "production", "{\"version\":1}");
    rx_wait_count(x, 2, 10000); /* generation 1 failed twice */
    it_alias_set(s, s->admin_token, "wh-retry", "production", "{\"version\":2}");
    g3 = it_alias_set(s, s->admin_token, "wh-retry", "production",
                      "{\"routes\":[{\"version\":2,\"weight\":50},{\"version\":3,\"weight\":50}]}");
    r = pc_wait_delivery(s, "wh-retry", "wh-retry", "production", g3, "in_sync", 20000);
    d = pc_gw_delivery(r->json, "wh-retry", "production");
    assert_true(json_is_null(json_object_get(d, "last_error")));
    assert_true(it_jint(d, "attempts") >= 1);
    it_expect_rfc3339(it_jstr(d, "acked_at"));
    /* Secrets are never returned. */
    assert_null(json_object_get(r->json, "secret"));
    assert_null(json_object_get(it_jobj(r->json, "config"), "secret"));
    assert_null(strstr(r->body, SECRET));
    assert_string_equal(it_jstr(r->json, "kind"), "webhook");
    assert_false(json_is_true(json_object_get(r->json, "disabled")));

    n = rx_snapshot(x, recs, 64);
    expect_all_verified(recs, n, "wh-retry");
    expect_ordered_ids(recs, n);
    assert_true(n >= 5);
    /* The first two attempts were generation 1, one Retry-After apart (the
     * backoff alone would be at most 400 ms here). */
    assert_int_equal(recs[0].gen, g1);
    assert_int_equal(recs[1].gen, g1);
    assert_int_equal(recs[0].status, 500);
    if (recs[1].at_ms - recs[0].at_ms < 900)
        fail_msg("the retry came %lld ms after a 500 with Retry-After: 1",
                 (long long)(recs[1].at_ms - recs[0].at_ms));
    for (size_t i = 0; i + 1 < n; i++) {
        if (recs[i].status == 500 && recs[i + 1].gen == recs[i].gen &&
            recs[i + 1].at_ms - recs[i].at_ms < 900)
            fail_msg("generation %lld was retried %lld ms after Retry-After: 1",
                     (long long)recs[i].gen, (long long)(recs[i + 1].at_ms - recs[i].at_ms));
    }
    /* Converged: the only acknowledged delivery is the newest generation. */
    for (size_t i = 0; i < n; i++)
        ok += recs[i].status == 200;
    assert_int_equal(ok, 1);
    assert_int_equal(recs[n - 1].status, 200);
    assert_int_equal(recs[n - 1].gen, g3);

    /* The body of the newest generation. */
    body = json_loads(recs[n - 1].body, 0, NULL);
    assert_non_null(body);
    assert_string_equal(it_jstr(body, "type"), "alias.updated");
    assert_string_equal(it_jstr(body, "model"), "wh-retry");
    assert_string_equal(it_jstr(body, "alias"), "production");
    assert_int_equal(it_jint(body, "generation"), g3);
    assert_true(json_is_null(json_object_get(body, "promotion")));
    it_expect_rfc3339(it_jstr(body, "timestamp"));
    json_decref(body);
    r = it_alias_get(s, s->admin_token, "wh-retry", "production");
    expect_routes_like_alias(recs[n - 1].body, r->json);
    d = pc_alias_delivery(r->json, "wh-retry");
    assert_non_null(d);
    assert_string_equal(it_jstr(d, "state"), "in_sync");
    assert_int_equal(it_jint(d, "generation"), g3);

    /* The receiver's check is not a rubber stamp. */
    {
        char ts[32];

        snprintf(ts, sizeof(ts), "%lld", (long long)recs[n - 1].ts);
        assert_false(rx_verify("another-secret-0123456789abcdef", recs[n - 1].id, ts,
                               recs[n - 1].body, strlen(recs[n - 1].body), "v1,AAAA"));
    }
    pc_gateway_delete(s, "wh-retry");
    rx_stop(&x);
}

static void test_down_then_up_gets_only_newest(void **state)
{
    struct mg_server *s = *state;
    struct rx *x = rx_start(SECRET, false);
    struct rx_rec recs[16];
    struct it_resp *r;
    json_int_t gen = 0;
    json_t *d;
    const char *err;
    size_t n;

    model_with_versions("wh-down", 2);
    rx_gateway_put(srv, "wh-down", x, ",\"models\":[\"wh-down\"]");
    for (int i = 0; i < 5; i++)
        gen = it_alias_set(s, s->admin_token, "wh-down", "production",
                           i % 2 ? "{\"version\":2}"
                                 : "{\"routes\":[{\"version\":1,\"weight\":80},"
                                   "{\"version\":2,\"weight\":20}]}");
    /* The newest generation failed at least once: connection refused. */
    r = pc_wait_delivery(s, "wh-down", "wh-down", "production", gen, "failing", 10000);
    d = pc_gw_delivery(r->json, "wh-down", "production");
    assert_true(it_jint(d, "attempts") >= 1);
    err = it_jstr(d, "last_error");
    assert_true(strlen(err) > 0);
    r = it_alias_get(s, s->admin_token, "wh-down", "production");
    d = pc_alias_delivery(r->json, "wh-down");
    assert_non_null(d);
    assert_string_equal(it_jstr(d, "state"), "failing");
    assert_int_equal(rx_count(x), 0);

    rx_set_up(x, true);
    pc_wait_delivery(s, "wh-down", "wh-down", "production", gen, "in_sync", 10000);
    n = rx_snapshot(x, recs, 16);
    expect_all_verified(recs, n, "wh-down");
    if (n != 1 || recs[0].gen != gen)
        fail_msg("after coming back the receiver got %zu deliveries, the first of generation "
                 "%lld; want exactly one, of the newest generation %lld",
                 n, n ? (long long)recs[0].gen : -1LL, (long long)gen);
    r = it_alias_get(s, s->admin_token, "wh-down", "production");
    expect_routes_like_alias(recs[0].body, r->json);
    pc_gateway_delete(s, "wh-down");
    rx_stop(&x);
}

/* The records for /hook/<tag> about (model, alias). */
static size_t count_for(const struct rx_rec *recs, size_t n, const char *tag, const char *model,
                        const char *alias, json_int_t *gen)
{
    char path[128];
    size_t k = 0;

    it_fmt(path, sizeof(path), "/hook/%s", tag);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(recs[i].path, path) == 0 &&
            (model == NULL || strcmp(recs[i].model, model) == 0) &&
            (alias == NULL || strcmp(recs[i].alias, alias) == 0)) {
            k++;
            if (gen != NULL)
                *gen = recs[i].gen;
        }
    }
    return k;
}

static const struct rx_rec *find_rec(const struct rx_rec *recs, size_t n, const char *tag,
                                     const char *model, const char *alias)
{
    char path[128];

    it_fmt(path, sizeof(path), "/hook/%s", tag);
    for (size_t i = n; i-- > 0;) {
        if (strcmp(recs[i].path, path) == 0 && strcmp(recs[i].model, model) == 0 &&
            strcmp(recs[i].alias, alias) == 0)
            return &recs[i];
    }
    fail_msg("no delivery of %s/%s to /hook/%s", model, alias, tag);
    return NULL;
}

static void test_new_gateway_gets_current_state(void **state)
{
    struct mg_server *s = *state;
    struct rx *x = rx_start(SECRET, true);
    struct rx_rec recs[128];
    struct it_resp *r, *a;
    json_int_t ga, gs, gb, got = 0;
    size_t n;

    model_with_versions("wh-cur-a", 2);
    model_with_versions("wh-cur-b", 2);
    it_alias_set(s, s->admin_token, "wh-cur-a", "production", "{\"version\":1}");
    ga = it_alias_set(s, s->admin_token, "wh-cur-a", "production", "{\"version\":2}");
    gs = it_alias_set(s, s->admin_token, "wh-cur-a", "staging",
                      "{\"routes\":[{\"version\":1,\"weight\":30},{\"version\":2,\"weight\":70}]}");
    gb = it_alias_set(s, s->admin_token, "wh-cur-b", "production", "{\"version\":1}");

    rx_gateway_put(srv, "cur-filt", x, ",\"models\":[\"wh-cur-a\"],\"aliases\":[\"production\"]");
    rx_gateway_put(srv, "cur-models", x, ",\"models\":[\"wh-cur-a\"]");
    rx_gateway_put(srv, "cur-all", x, "");
    pc_wait_delivery(s, "cur-filt", "wh-cur-a", "production", ga, "in_sync", 10000);
    pc_wait_delivery(s, "cur-models", "wh-cur-a", "production", ga, "in_sync", 10000);
    pc_wait_delivery(s, "cur-models", "wh-cur-a", "staging", gs, "in_sync", 10000);
    pc_wait_delivery(s, "cur-all", "wh-cur-a", "production", ga, "in_sync", 10000);
    pc_wait_delivery(s, "cur-all", "wh-cur-a", "staging", gs, "in_sync", 10000);
    r = pc_wait_delivery(s, "cur-all", "wh-cur-b", "production", gb, "in_sync", 10000);
    /* Filters: the filtered gateways hold no rows for what they do not hear. */
    assert_null(pc_gw_delivery(r->json, "wh-cur-a", "canary"));
    r = pc_gateway_get(s, "cur-filt");
    assert_int_equal(json_array_size(it_jarr(r->json, "deliveries")), 1);
    r = pc_gateway_get(s, "cur-models");
    assert_int_equal(json_array_size(it_jarr(r->json, "deliveries")), 2);
    assert_null(pc_gw_delivery(r->json, "wh-cur-b", "production"));

    n = rx_snapshot(x, recs, 128);
    for (size_t i = 0; i < n; i++) {
        if (!recs[i].sig_ok || !recs[i].ts_ok)
            fail_msg("delivery %zu to %s did not verify", i, recs[i].path);
    }
    /* Exactly the current state, once, per matching alias. */
    assert_int_equal(count_for(recs, n, "cur-filt", NULL, NULL, &got), 1);
    assert_int_equal(count_for(recs, n, "cur-filt", "wh-cur-a", "production", &got), 1);
    assert_int_equal(got, ga);
    assert_int_equal(count_for(recs, n, "cur-models", NULL, NULL, NULL), 2);
    assert_int_equal(count_for(recs, n, "cur-models", "wh-cur-a", "staging", &got), 1);
    assert_int_equal(got, gs);
    assert_int_equal(count_for(recs, n, "cur-all", "wh-cur-a", "production", &got), 1);
    assert_int_equal(got, ga);
    assert_int_equal(count_for(recs, n, "cur-all", "wh-cur-a", "staging", &got), 1);
    assert_int_equal(got, gs);
    assert_int_equal(count_for(recs, n, "cur-all", "wh-cur-b", "production", &got), 1);
    assert_int_equal(got, gb);
    a = it_alias_get(s, s->admin_token, "wh-cur-a", "staging");
    expect_routes_like_alias(find_rec(recs, n, "cur-models", "wh-cur-a", "staging")->body, a->json);
    expect_routes_like_alias(find_rec(recs, n, "cur-all", "wh-cur-a", "staging")->body, a->json);
    a = it_alias_get(s, s->admin_token, "wh-cur-a", "production");
    expect_routes_like_alias(find_rec(recs, n, "cur-filt", "wh-cur-a", "production")->body,
                             a->json);
    a = it_alias_get(s, s->admin_token, "wh-cur-b", "production");
    expect_routes_like_alias(find_rec(recs, n, "cur-all", "wh-cur-b", "production")->body, a->json);

    /* A later change goes to the gateways that hear it, only. */
    gb = it_alias_set(s, s->admin_token, "wh-cur-b", "production", "{\"version\":2}");
    a = it_alias_put(s, s->admin_token, "wh-cur-b", "production", "{\"version\":1}", 10);
    gb = it_jint(a->json, "generation");
    if (!pc_all_in_sync(a->json))
        fail_msg("?wait=10 returned before every gateway acknowledged: %s", a->body);
    assert_non_null(pc_alias_delivery(a->json, "cur-all"));
    assert_null(pc_alias_delivery(a->json, "cur-filt"));
    assert_null(pc_alias_delivery(a->json, "cur-models"));
    n = rx_snapshot(x, recs, 128);
    assert_int_equal(count_for(recs, n, "cur-filt", NULL, NULL, NULL), 1);
    assert_int_equal(count_for(recs, n, "cur-models", NULL, NULL, NULL), 2);
    assert_int_equal(find_rec(recs, n, "cur-all", "wh-cur-b", "production")->gen, gb);
    for (size_t i = 0; i < n; i++) {
        if (!recs[i].sig_ok || !recs[i].ts_ok)
            fail_msg("delivery %zu to %s did not verify", i, recs[i].path);
    }

    pc_gateway_delete(s, "cur-all");
    pc_gateway_delete(s, "cur-filt");
    pc_gateway_delete(s, "cur-models");
    r = it_get(s, "/api/v1/gateways/cur-all", s->admin_token);
    it_expect_error(s, r, 404, "not_found");
    a = it_alias_get(s, s->admin_token, "wh-cur-b", "production");
    assert_null(pc_alias_delivery(a->json, "cur-all"));
    rx_stop(&x);
}

static void test_wait_in_sync_and_at_deadline(void **state)
{
    struct mg_server *s = *state;
    struct rx *x = rx_start(SECRET, true);
    struct it_resp *r;
    json_t *d;
    int64_t t0, took;
    json_int_t gen;
    const char *st;

    model_with_versions("wh-wait", 2);
    rx_gateway_put(srv, "wh-wait", x, ",\"models\":[\"wh-wait\"]");

    /* Up: the answer comes once acknowledged, well before the deadline (M29: the deadline
     * and the bound scaled together for the sanitizer build, so the bound still means
     * "before the deadline"). */
    t0 = it_now_ms();
    r = it_alias_put(s, s->admin_token, "wh-wait", "production", "{\"version\":1}",
                     (int)(it_scaled_ms(5000) / 1000));
    took = it_now_ms() - t0;
    if (took > it_scaled_ms(4000))
        fail_msg("?wait=%lld with a receiver that answers at once took %lld ms",
                 (long long)(it_scaled_ms(5000) / 1000), (long long)took);
    if (!pc_all_in_sync(r->json))
        fail_msg("?wait=5 returned, but not every delivery is in sync: %s", r->body);
    d = pc_alias_delivery(r->json, "wh-wait");
    assert_non_null(d);
    it_expect_rfc3339(it_jstr(d, "acked_at"));
    assert_int_equal(rx_count(x), 1);

    /* Rollback takes ?wait too. */
    it_alias_set(s, s->admin_token, "wh-wait", "production", "{\"version\":2}");
    r = it_jreq(s, "POST", "/api/v1/models/wh-wait/aliases/production/rollback?wait=5",
                s->admin_token, "{\"reason\":\"wait test\"}");
    it_expect_status(s, r, 200);
    if (!pc_all_in_sync(r->json))
        fail_msg("rollback?wait=5 returned, but not every delivery is in sync: %s", r->body);

    /* Down: the answer comes at the deadline, showing what is not in sync. */
    rx_set_up(x, false);
    t0 = it_now_ms();
    r = it_alias_put(s, s->admin_token, "wh-wait", "production", "{\"version\":2}", 5);
    took = it_now_ms() - t0;
    gen = it_jint(r->json, "generation");
    if (took < 4900 || took > 5000 + it_scaled_ms(4000))
        fail_msg("?wait=5 with the receiver down answered after %lld ms, want about 5000",
                 (long long)took);
    d = pc_alias_delivery(r->json, "wh-wait");
    assert_non_null(d);
    assert_int_equal(it_jint(d, "generation"), gen);
    st = it_jstr(d, "state");
    if (strcmp(st, "failing") != 0 && strcmp(st, "pending") != 0)
        fail_msg("delivery to a receiver that is down is %s: %s", st, r->body);
    assert_false(pc_all_in_sync(r->json));
    d = pc_alias_delivery(r->json, "runner");
    if (d != NULL)
        assert_string_equal(it_jstr(d, "state"), "in_sync");

    /* Bad values. */
    r = it_jreq(s, "PUT", "/api/v1/models/wh-wait/aliases/production?wait=61", s->admin_token,
                "{\"version\":1}");
    it_expect_error_field(s, r, 400, "invalid_argument", "wait");
    r = it_jreq(s, "PUT", "/api/v1/models/wh-wait/aliases/production?wait=soon", s->admin_token,
                "{\"version\":1}");
    it_expect_error_field(s, r, 400, "invalid_argument", "wait");
    pc_gateway_delete(s, "wh-wait");
    rx_stop(&x);
}

static void test_ssrf_refused_at_config_time(void **state)
{
    static const char *const bad[] = {
        "http://169.254.169.254/latest/meta-data/",
        "http://[::ffff:169.254.169.254]/",
        "http://[::ffff:a9fe:a9fe]/hook",
        "http://2852039166/",          /* 169.254.169.254 as one number */
        "http://0251.0376.0251.0376/", /* ... in octal */
        "http://169.254.1.1:8080/hook",
        "http://[fe80::1]/hook",
        "http://[fe80::1%25eth0]/hook",
        "http://0.0.0.0:80/",
        "http://[::]/",
        "http://224.0.0.1/",
        "file:///etc/passwd",
        "gopher://127.0.0.1:70/_GET%20/",
        "ftp://127.0.0.1/hook",
        "dict://127.0.0.1:11211/stat",
        "http://user:pass@127.0.0.1/hook",
        "not a url",
        "/relative/hook",
    };
    struct mg_server *s = *state;
    struct it_resp *r;
    json_t *body;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        body = json_pack("{ss ss ss}", "kind", "webhook", "url", bad[i], "secret", SECRET);
        r = it_jreq_v(s, "PUT", "/api/v1/gateways/ssrf", s->admin_token, body);
        if (r->status != 400)
            fail_msg("webhook url %s: status %ld, want 400: %s", bad[i], r->status, r->body);
        it_expect_error_field(s, r, 400, "invalid_argument", "url");
        it_resp_free(s, &r);
    }
    r = it_get(s, "/api/v1/gateways/ssrf", s->admin_token);
    it_expect_error(s, r, 404, "not_found");

    /* Other fields. */
    r = it_jreq(s, "PUT", "/api/v1/gateways/ssrf", s->admin_token,
                "{\"kind\":\"webhook\",\"url\":\"http://127.0.0.1:9/\",\"secret\":\"short\"}");
    it_expect_error_field(s, r, 400, "invalid_argument", "secret");
    r = it_jreq(s, "PUT", "/api/v1/gateways/ssrf", s->admin_token,
                "{\"kind\":\"webhook\",\"url\":\"http://127.0.0.1:9/\",\"secret\":\"" SECRET
                "\",\"models\":[\"../etc\"]}");
    it_expect_error_field(s, r, 400, "invalid_argument", "models");
    r = it_jreq(s, "PUT", "/api/v1/gateways/ssrf", s->admin_token,
                "{\"kind\":\"carrier-pigeon\",\"url\":\"http://127.0.0.1:9/\"}");
    it_expect_error_field(s, r, 400, "invalid_argument", "kind");
    r = it_jreq(s, "PUT", "/api/v1/gateways/Bad.Name", s->admin_token,
                "{\"kind\":\"webhook\",\"url\":\"http://127.0.0.1:9/\",\"secret\":\"" SECRET "\"}");
    it_expect_error(s, r, 400, "invalid_argument");

    /* Loopback is allowed while modelgated itself listens on loopback. */
    r = it_jreq(s, "PUT", "/api/v1/gateways/ssrf", s->admin_token,
                "{\"kind\":\"webhook\",\"url\":\"http://127.0.0.1:9/hook\",\"secret\":\"" SECRET
                "\",\"models\":[\"no-such-model\"]}");
    if (r->status != 200 && r->status != 201)
        it_expect_status(s, r, 201);
    pc_gateway_delete(s, "ssrf");
}

static void test_redirects_not_followed(void **state)
{
    struct mg_server *s = *state;
    struct rx *meta = rx_start(SECRET, true);
    struct rx *hop = rx_start(SECRET, true);
    struct rx *target = rx_start(SECRET, true);
    char loc[128];
    struct it_resp *r;
    json_t *d;
    json_int_t gen;

    rx_behave(meta, 0, 0, 302, "http://169.254.169.254/latest/meta-data/iam/");
    rx_behave(hop, 0, 0, 307, rx_url(target, "target", loc, sizeof(loc)));
    model_with_versions("wh-redirect", 1);
    rx_gateway_put(srv, "redir-meta", meta, ",\"models\":[\"wh-redirect\"]");
    rx_gateway_put(srv, "redir-hop", hop, ",\"models\":[\"wh-redirect\"]");
    gen = it_alias_set(s, s->admin_token, "wh-redirect", "production", "{\"version\":1}");

    /* Several attempts each, none followed. */
    rx_wait_count(meta, 3, 10000);
    rx_wait_count(hop, 3, 10000);
    r = pc_wait_delivery(s, "redir-meta", "wh-redirect", "production", gen, "failing", 10000);
    d = pc_gw_delivery(r->json, "wh-redirect", "production");
    if (strstr(it_jstr(d, "last_error"), "302") == NULL)
        fail_msg("last_error should name the 302: %s", r->body);
    r = pc_wait_delivery(s, "redir-hop", "wh-redirect", "production", gen, "failing", 10000);
    d = pc_gw_delivery(r->json, "wh-redirect", "production");
    if (strstr(it_jstr(d, "last_error"), "307") == NULL)
        fail_msg("last_error should name the 307: %s", r->body);
    r = it_alias_get(s, s->admin_token, "wh-redirect", "production");
    assert_string_equal(it_jstr(pc_alias_delivery(r->json, "redir-meta"), "state"), "failing");
    /* The redirect target (an allowed loopback address) was never contacted. */
    assert_int_equal(rx_count(target), 0);

    pc_gateway_delete(s, "redir-meta");
    pc_gateway_delete(s, "redir-hop");
    rx_stop(&meta);
    rx_stop(&hop);
    rx_stop(&target);
}

static void test_gone_disables_the_gateway(void **state)
{
    struct mg_server *s = *state;
    struct rx *x = rx_start(SECRET, true);
    struct it_resp *r;
    int64_t deadline = it_deadline(10000);
    json_int_t gen;
    const char *reason;

    rx_behave(x, 0, 0, 410, NULL);
    model_with_versions("wh-gone", 2);
    rx_gateway_put(srv, "wh-gone", x, ",\"models\":[\"wh-gone\"]");
    it_alias_set(s, s->admin_token, "wh-gone", "production", "{\"version\":1}");
    for (;;) {
        r = pc_gateway_get(s, "wh-gone");
        if (json_is_true(json_object_get(r->json, "disabled")))
            break;
        if (it_now_ms() > deadline)
            fail_msg("the gateway answered 410 but is not disabled: %s", r->body);
        it_resp_free(s, &r);
        it_pause_ms(20);
    }
    reason = it_jstr(r->json, "disabled_reason");
    if (strstr(reason, "410") == NULL)
        fail_msg("disabled_reason should say the gateway answered 410: %s", reason);
    assert_int_equal(rx_count(x), 1);
    r = it_get(s, "/api/v1/gateways", s->admin_token);
    it_expect_status(s, r, 200);
    {
        json_t *g;
        size_t i;
        bool found = false;

        json_array_foreach(it_jarr(r->json, "items"), i, g)
        {
            if (strcmp(it_jstr(g, "name"), "wh-gone") == 0) {
                found = true;
                assert_true(json_is_true(json_object_get(g, "disabled")));
            }
        }
        assert_true(found);
    }

    /* A disabled gateway hears nothing more; ?wait gives up at its deadline. */
    rx_behave(x, 0, 0, 200, NULL);
    r = it_alias_put(s, s->admin_token, "wh-gone", "production", "{\"version\":2}", 1);
    gen = it_jint(r->json, "generation");
    assert_false(pc_all_in_sync(r->json));
    assert_int_equal(rx_count(x), 1);

    /* Configuring it again enables it, and it gets the current state. */
    rx_gateway_put(srv, "wh-gone", x, ",\"models\":[\"wh-gone\"]");
    r = pc_wait_delivery(s, "wh-gone", "wh-gone", "production", gen, "in_sync", 10000);
    assert_false(json_is_true(json_object_get(r->json, "disabled")));
    assert_true(json_is_null(json_object_get(r->json, "disabled_reason")));
    assert_int_equal(rx_count(x), 2);
    pc_gateway_delete(s, "wh-gone");
    rx_stop(&x);
}

/* Standard Webhooks secrets (M14): a whsec_ secret's key is its decoded base64, so the
 * official library (npm standardwebhooks, consulted on every delivery by the receiver)
 * verifies deliveries, retries included. */
static void test_whsec_secret_verifies_with_the_library(void **state)
{
    static const char whsec[] = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"; /* 27 bytes */
    struct mg_server *s = *state;
    struct rx *x = rx_start(whsec, true);
    struct rx_rec recs[32];
    struct it_resp *r;
    json_int_t g;
    size_t n;

    model_with_versions("wh-std", 2);
    rx_gateway_put(s, "wh-std", x, ",\"models\":[\"wh-std\"]");
    rx_behave(x, 2, 0, 200, NULL); /* two 500s: the retries are verified too */
    g = it_alias_set(s, s->admin_token, "wh-std", "production", "{\"version\":2}");
    r = pc_wait_delivery(s, "wh-std", "wh-std", "production", g, "in_sync", 20000);
    it_resp_free(s, &r);
    n = rx_snapshot(x, recs, 32);
    assert_true(n >= 3);
    expect_all_verified(recs, n, "wh-std");
    for (size_t i = 0; i < n; i++)
        assert_true(recs[i].lib_ok);
    /* the raw string as the key (the old behaviour) no longer matches */
    {
        char ts[32];

        snprintf(ts, sizeof(ts), "%lld", (long long)recs[n - 1].ts);
        assert_false(rx_verify("raw:whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", recs[n - 1].id, ts,
                               recs[n - 1].body, strlen(recs[n - 1].body), "v1,AAAA"));
    }
    pc_gateway_delete(s, "wh-std");
    rx_stop(&x);
}

/* No secret given: the server makes a whsec_ secret and shows it once, in the PUT's reply. */
static void test_generated_secret_shown_once(void **state)
{
    struct mg_server *s = *state;
    struct rx *x = NULL;
    struct rx_rec recs[8];
    char url[128], body[512], secret[128];
    struct it_resp *r;
    json_int_t g;
    size_t n;

    model_with_versions("wh-gen", 1);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/hook/wh-gen", it_free_port());
    r = it_jreq(s, "PUT", "/api/v1/gateways/wh-gen", s->admin_token,
                it_fmt(body, sizeof(body),
                       "{\"kind\":\"webhook\",\"url\":\"%s\",\"models\":[\"wh-gen\"]}", url));
    it_expect_status(s, r, 201);
    snprintf(secret, sizeof(secret), "%s", it_jstr(r->json, "secret"));
    it_resp_free(s, &r);
    assert_int_equal(strncmp(secret, "whsec_", 6), 0);
    {
        size_t dl = 0;
        uint8_t *d = mg_base64_decode(secret + 6, strlen(secret + 6), &dl);

        assert_non_null(d);
        assert_int_equal(dl, 32);
        free(d);
    }
    r = it_get(s, "/api/v1/gateways/wh-gen", s->admin_token);
    it_expect_status(s, r, 200);
    assert_null(json_object_get(r->json, "secret"));
    assert_null(strstr(r->body, secret + 6));
    it_resp_free(s, &r);
    r = it_get(s, "/api/v1/gateways", s->admin_token);
    assert_null(strstr(r->body, secret + 6));
    it_resp_free(s, &r);

    /* a receiver configured with it verifies with the library */
    x = rx_start(secret, true);
    rx_gateway_put(s, "wh-gen", x, ",\"models\":[\"wh-gen\"]");
    g = it_alias_set(s, s->admin_token, "wh-gen", "production", "{\"version\":1}");
    r = pc_wait_delivery(s, "wh-gen", "wh-gen", "production", g, "in_sync", 20000);
    it_resp_free(s, &r);
    n = rx_snapshot(x, recs, 8);
    assert_true(n >= 1);
    expect_all_verified(recs, n, "wh-gen");
    pc_gateway_delete(s, "wh-gen");
    rx_stop(&x);
}

/* A whsec_ secret that is not base64 of 24-64 bytes: 400 naming secret, nothing stored. */
static void test_bad_whsec_refused(void **state)
{
    static const char *const bad[] = {
        "whsec_not*base64*at*all*ABCDEFGHIJKL",
        "whsec_c2hvcnQ=", /* 5 bytes */
        "whsec_" /* 72 bytes: too long */ "QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFB"
        "QUFBQUFBQUFBQUFBQUFBQUFB"
        "QUFBQUFBQUFBQUFBQUFB",
        "whsec_",
        "short-raw-secret",
    };
    struct mg_server *s = *state;
    char body[512];
    struct it_resp *r;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        r = it_jreq(s, "PUT", "/api/v1/gateways/wh-bad", s->admin_token,
                    it_fmt(body, sizeof(body),
                           "{\"kind\":\"webhook\",\"url\":\"http://127.0.0.1:9/h\","
                           "\"secret\":\"%s\"}",
                           bad[i]));
        it_expect_error_field(s, r, 400, "invalid_argument", "secret");
        it_resp_free(s, &r);
    }
    r = it_get(s, "/api/v1/gateways/wh-bad", s->admin_token);
    it_expect_error(s, r, 404, "not_found");
    it_resp_free(s, &r);
}

/* The first record whose body has "type" `type`, or NULL. */
static const struct rx_rec *find_type(const struct rx_rec *recs, size_t n, const char *type)
{
    for (size_t i = 0; i < n; i++) {
        json_t *b = json_loads(recs[i].body, 0, NULL);
        bool same = b && json_is_string(json_object_get(b, "type")) &&
                    strcmp(json_string_value(json_object_get(b, "type")), type) == 0;

        json_decref(b);
        if (same)
            return &recs[i];
    }
    return NULL;
}

/* Wait until x has a delivery of type `type`; its body parsed (caller frees). */
static json_t *wait_event(struct rx *x, const char *type, struct rx_rec *recs, size_t max)
{
    int64_t end = it_deadline(20000);

    for (;;) {
        size_t n = rx_snapshot(x, recs, max);
        const struct rx_rec *r = find_type(recs, n, type);

        if (r != NULL) {
            if (!r->sig_ok || !r->lib_ok || !r->ts_ok)
                fail_msg("%s delivery not verified: %s", type, r->body);
            return json_loads(r->body, 0, NULL);
        }
        if (it_now_ms() > end)
            fail_msg("no %s delivery within the deadline (%zu deliveries)", type, n);
        it_pause_ms(50);
    }
}

static void test_promotion_events(void **state)
{
    struct mg_server *s = *state;
    struct rx *x = rx_start(SECRET, true), *y = rx_start(SECRET, true);
    struct rx_rec recs[64];
    struct it_resp *r;
    char id[64], path[160];
    char *rev = it_token_create(s, "wh-reviewer", "reviewer", NULL);
    json_t *ev;
    json_int_t g;
    size_t n;

    model_with_versions("wh-promo", 2);
    /* Only event types it knows. */
    r = it_jreq(s, "PUT", "/api/v1/gateways/wh-bad-events", s->admin_token,
                "{\"kind\":\"webhook\",\"url\":\"http://127.0.0.1:9/h\",\"secret\":\"" SECRET
                "\",\"events\":[\"promotion.exploded\"]}");
    it_expect_error_field(s, r, 400, "invalid_argument", "events");
    it_resp_free(s, &r);
    rx_gateway_put(s, "wh-chat", x,
                   ",\"models\":[\"wh-promo\"],\"events\":[\"promotion.awaiting_approval\","
                   "\"promotion.rolled_back\"]");
    rx_gateway_put(s, "wh-plain", y, ",\"models\":[\"wh-promo\"]");
    g = it_alias_set(s, s->admin_token, "wh-promo", "production", "{\"version\":1}");
    r = pc_wait_delivery(s, "wh-chat", "wh-promo", "production", g, "in_sync", 20000);
    it_resp_free(s, &r);
    it_policy_put(s, "wh-promo", "production",
                  "{\"approvals\":{\"required\":1},"
                  "\"rollout\":{\"steps\":[50,100],\"bake_seconds\":3600}}");
    r = it_promote(s, s->admin_token, "wh-promo", 2, "production", id);
    it_resp_free(s, &r);
    r = it_promotion_wait(s, s->admin_token, id, "awaiting_approval", 20000);
    it_resp_free(s, &r);

    ev = wait_event(x, "promotion.awaiting_approval", recs, 64);
    assert_string_equal(it_jstr(ev, "promotion"), id);
    assert_string_equal(it_jstr(ev, "model"), "wh-promo");
    assert_string_equal(it_jstr(ev, "alias"), "production");
    assert_string_equal(it_jstr(ev, "state"), "awaiting_approval");
    assert_int_equal(it_jint(ev, "version"), 2);
    assert_int_equal(it_jint(ev, "baseline_version"), 1);
    it_expect_rfc3339(it_jstr(ev, "timestamp"));
    json_decref(ev);

    /* Approved, rolling out, then rolled back by hand. */
    r = it_jreq(s, "POST", it_fmt(path, sizeof(path), "/api/v1/promotions/%s/approvals", id), rev,
                "{\"decision\":\"approve\"}");
    it_expect_status(s, r, 200);
    it_resp_free(s, &r);
    r = it_promotion_wait(s, s->admin_token, id, "rolling_out", 20000);
    it_resp_free(s, &r);
    r = it_jreq(s, "POST", "/api/v1/models/wh-promo/aliases/production/rollback", s->admin_token,
                "{\"reason\":\"the pager went off\"}");
    it_expect_status(s, r, 200);
    g = it_jint(r->json, "generation");
    it_resp_free(s, &r);
    ev = wait_event(x, "promotion.rolled_back", recs, 64);
    assert_string_equal(it_jstr(ev, "promotion"), id);
    assert_string_equal(it_jstr(ev, "state"), "rolled_back");
    assert_string_equal(it_jstr(ev, "detail"), "the pager went off");
    assert_true(strlen(it_jstr(ev, "by")) > 0); /* the admin token's name: who rolled back */
    json_decref(ev);

    /* A gateway that did not ask hears only alias.updated, through the rollback too. */
    r = pc_wait_delivery(s, "wh-plain", "wh-promo", "production", g, "in_sync", 20000);
    it_resp_free(s, &r);
    n = rx_snapshot(y, recs, 64);
    assert_true(n >= 1);
    assert_null(find_type(recs, n, "promotion.awaiting_approval"));
    assert_null(find_type(recs, n, "promotion.rolled_back"));
    /* A delivered event leaves no row behind: the gateway lists only the alias. */
    r = pc_gateway_get(s, "wh-chat");
    {
        json_t *d, *list = it_jarr(r->json, "deliveries");
        size_t i;

        json_array_foreach(list, i, d)
        {
            const char *a = json_string_value(json_object_get(d, "alias"));

            if (a && a[0] == '!')
                fail_msg("an event row stayed after delivery: %s", r->body);
        }
    }
    it_resp_free(s, &r);
    pc_gateway_delete(s, "wh-chat");
    pc_gateway_delete(s, "wh-plain");
    free(rev);
    rx_stop(&x);
    rx_stop(&y);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whsec_secret_verifies_with_the_library),
        cmocka_unit_test(test_generated_secret_shown_once),
        cmocka_unit_test(test_bad_whsec_refused),
        cmocka_unit_test_teardown(test_signed_retries_converge_in_order, it_test_teardown),
        cmocka_unit_test_teardown(test_down_then_up_gets_only_newest, it_test_teardown),
        cmocka_unit_test_teardown(test_new_gateway_gets_current_state, it_test_teardown),
        cmocka_unit_test_teardown(test_wait_in_sync_and_at_deadline, it_test_teardown),
        cmocka_unit_test_teardown(test_ssrf_refused_at_config_time, it_test_teardown),
        cmocka_unit_test_teardown(test_redirects_not_followed, it_test_teardown),
        cmocka_unit_test_teardown(test_gone_disables_the_gateway, it_test_teardown),
        cmocka_unit_test_teardown(test_promotion_events, it_test_teardown),
    };

    return it_main_result(cmocka_run_group_tests(tests, setup, teardown));
}
