/*
 * test_quotas.c - M26 storage quotas per team (docs/contract.md "Quotas and cost"), against the
 * real daemon:
 *   - PUT/GET /api/v1/teams/{team}/quota, and its use counted on unique bytes: the same bytes
 *     twice, and bytes shared by versions of several models of the team, count once;
 *   - an upload or a version that would take a team past its quota answers 507
 *     quota_exceeded naming the team, the quota and the use, and leaves nothing behind
 *     (no blob, no bytes in the backend, no version);
 *   - a quota lowered below the use: reads and deletes still work, new bytes are refused;
 *   - GET /api/v1/usage?by=team|model and the per-team gauges of /metrics;
 *   - webhook gateways hear a team cross 80 % and 100 % of its quota;
 *   - uploads racing past a quota (two replicas sharing PostgreSQL, or one replica on
 *     SQLite): exactly one wins.
 * The program runs again on PostgreSQL (pg_integration_test_quotas) and on the remote blob
 * backends (s3_/oci_integration_test_quotas).
 */
#include "harness.h"
#include "sys.h"
#include "webhook_rx.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct mg_server *srv;
static char *risk_pub, *ads_pub;

static char *token(const char *name, const char *teams)
{
    char body[256];
    struct it_resp *r;
    char *secret;

    snprintf(body, sizeof(body), "{\"name\":\"%s\",\"roles\":[\"publisher\"],\"teams\":%s}", name,
             teams);
    r = it_jreq(srv, "POST", "/api/v1/tokens", srv->admin_token, body);
    it_expect_status(srv, r, 201);
    secret = strdup(it_jstr(r->json, "token"));
    it_resp_free(srv, &r);
    return secret;
}

static void call(const char *method, const char *path, const char *tok, const char *body,
                 long status)
{
    struct it_resp *r = it_jreq(srv, method, path, tok, body);

    it_expect_status(srv, r, status);
    it_resp_free(srv, &r);
}

static void set_quota(const char *team, long long bytes)
{
    char path[128], body[64];

    it_fmt(path, sizeof(path), "/api/v1/teams/%s/quota", team);
    it_fmt(body, sizeof(body), "{\"storage_bytes\":%lld}", bytes);
    call("PUT", path, srv->admin_token, body, 200);
}

/* The team's use as GET .../quota answers it (and its quota, checked). */
static long long used(const char *team, long long quota)
{
    char path[128];
    struct it_resp *r;
    long long u;

    it_fmt(path, sizeof(path), "/api/v1/teams/%s/quota", team);
    r = it_get(srv, path, risk_pub);
    it_expect_status(srv, r, 200);
    assert_string_equal(it_jstr(r->json, "team"), team);
    assert_int_equal(it_jint(r->json, "storage_bytes"), quota);
    u = it_jint(r->json, "used_bytes");
    it_resp_free(srv, &r);
    return u;
}

/* n bytes of pattern seed, uploaded by tok: the status, the digest in d. */
static long upload(const char *tok, size_t n, unsigned seed, char d[IT_DIGEST_LEN + 1])
{
    char *buf = malloc(n);
    struct it_resp *r;
    long status;

    assert_non_null(buf);
    it_pattern(seed, 0, buf, n);
    it_digest(buf, n, d);
    r = it_request(srv, "POST", "/api/v1/blobs", tok, "application/octet-stream", buf, n);
    free(buf);
    status = r->status;
    if (status == 507) {
        it_expect_error(srv, r, 507, "quota_exceeded");
    } else if (status != 200) {
        it_expect_status(srv, r, 201);
        assert_string_equal(it_jstr(r->json, "digest"), d);
    }
    it_resp_free(srv, &r);
    return status;
}

/* A 507 quota_exceeded whose message names the team, its quota and its use. */
static void expect_quota_error(struct it_resp *r, const char *team, long long quota, long long use)
{
    const char *msg;
    char want[64];

    it_expect_error(srv, r, 507, "quota_exceeded");
    msg = it_jstr(it_jobj(r->json, "error"), "message");
    it_fmt(want, sizeof(want), "'%s'", team);
    assert_non_null(strstr(msg, want));
    it_fmt(want, sizeof(want), "quota of %lld bytes", quota);
    assert_non_null(strstr(msg, want));
    it_fmt(want, sizeof(want), "uses %lld", use);
    assert_non_null(strstr(msg, want));
}

/* Nothing of a refused upload stays: no blob, no bytes, no upload leftovers. */
static void expect_nothing_kept(const char *d)
{
    char path[128];
    struct it_resp *r;

    it_fmt(path, sizeof(path), "/api/v1/blobs/%s", d);
    r = it_request(srv, "HEAD", path, srv->admin_token, NULL, NULL, 0);
    it_expect_status(srv, r, 404);
    it_resp_free(srv, &r);
    assert_false(it_blob_stored(srv, d));
    assert_int_equal(it_blob_leftovers(srv), 0);
}

static struct it_resp *version(const char *model, const char *tok, const char *artifact)
{
    char path[128], body[128];

    it_fmt(path, sizeof(path), "/api/v1/models/%s/versions", model);
    it_fmt(body, sizeof(body), "{\"artifact\":\"%s\"}", artifact);
    return it_jreq(srv, "POST", path, tok, body);
}

static int setup(void **state)
{
    srv = it_server_start(NULL);
    call("POST", "/api/v1/teams", srv->admin_token, "{\"name\":\"risk\"}", 201);
    call("POST", "/api/v1/teams", srv->admin_token, "{\"name\":\"ads\"}", 201);
    risk_pub = token("risk-pub", "[\"risk\"]");
    ads_pub = token("ads-pub", "[\"ads\"]");
    *state = srv;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    free(risk_pub);
    free(ads_pub);
    it_server_free(&srv);
    return 0;
}

/* The quota's own API: admin sets, any reader reads, clear errors. */
static void test_quota_api(void **state)
{
    struct it_resp *r;

    (void)state;
    r = it_get(srv, "/api/v1/teams/ads/quota", ads_pub);
    it_expect_status(srv, r, 200);
    assert_true(json_is_null(json_object_get(r->json, "storage_bytes")));
    assert_int_equal(it_jint(r->json, "used_bytes"), 0);
    it_resp_free(srv, &r);
    call("PUT", "/api/v1/teams/ads/quota", ads_pub, "{\"storage_bytes\":10}", 403);
    call("PUT", "/api/v1/teams/nobody/quota", srv->admin_token, "{\"storage_bytes\":10}", 404);
    call("GET", "/api/v1/teams/nobody/quota", srv->admin_token, NULL, 404);
    call("PUT", "/api/v1/teams/Bad_Name/quota", srv->admin_token, "{\"storage_bytes\":10}", 400);
    call("PUT", "/api/v1/teams/ads/quota", srv->admin_token, "{\"storage_bytes\":-1}", 400);
    call("PUT", "/api/v1/teams/ads/quota", srv->admin_token, "{\"storage_bytes\":1.5}", 400);
    call("PUT", "/api/v1/teams/ads/quota", srv->admin_token, "{}", 400);
    call("PUT", "/api/v1/teams/ads/quota", srv->admin_token, "{\"storage_bytes\":5,\"x\":1}", 400);
    call("PUT", "/api/v1/teams/ads/quota", srv->admin_token, "{\"storage_bytes\":4096}", 200);
    r = it_get(srv, "/api/v1/teams/ads/quota", ads_pub);
    it_expect_status(srv, r, 200);
    assert_int_equal(it_jint(r->json, "storage_bytes"), 4096);
    it_resp_free(srv, &r);
    /* null removes it */
    call("PUT", "/api/v1/teams/ads/quota", srv->admin_token, "{\"storage_bytes\":null}", 200);
    r = it_get(srv, "/api/v1/teams/ads/quota", ads_pub);
    assert_true(json_is_null(json_object_get(r->json, "storage_bytes")));
    it_resp_free(srv, &r);
}

/* Under the quota, the same bytes twice, over it; versions of two models sharing bytes;
 * a version over the quota; then the quota lowered below the use. */
static void test_quota_counts_unique_bytes(void **state)
{
    char a[IT_DIGEST_LEN + 1], b[IT_DIGEST_LEN + 1], c[IT_DIGEST_LEN + 1];
    char g[IT_DIGEST_LEN + 1], e[IT_DIGEST_LEN + 1], path[160];
    struct it_resp *r;

    (void)state;
    set_quota("risk", 1000);
    assert_int_equal(used("risk", 1000), 0);
    assert_int_equal(upload(risk_pub, 400, 1, a), 201);
    assert_int_equal(used("risk", 1000), 400);
    /* the same bytes again: nothing new */
    assert_int_equal(upload(risk_pub, 400, 1, a), 200);
    assert_int_equal(used("risk", 1000), 400);
    assert_int_equal(upload(risk_pub, 500, 2, b), 201);
    assert_int_equal(used("risk", 1000), 900);
    /* over it: 507 naming team, quota and use; nothing kept */
    {
        char *buf = malloc(200);

        it_pattern(3, 0, buf, 200);
        it_digest(buf, 200, c);
        r = it_request(srv, "POST", "/api/v1/blobs", risk_pub, "application/octet-stream", buf,
                       200);
        free(buf);
        expect_quota_error(r, "risk", 1000, 900);
        it_resp_free(srv, &r);
    }
    expect_nothing_kept(c);
    /* the same with its digest declared (a backend may then write under that name at once) */
    {
        char *buf = malloc(200), hdr[IT_DIGEST_LEN + 32];
        const char *headers[] = {hdr, NULL};

        it_pattern(3, 0, buf, 200);
        it_fmt(hdr, sizeof(hdr), "X-Content-Digest: %s", c);
        r = it_request_h(srv, "POST", "/api/v1/blobs", risk_pub, "application/octet-stream", buf,
                         200, headers);
        free(buf);
        expect_quota_error(r, "risk", 1000, 900);
        it_resp_free(srv, &r);
    }
    expect_nothing_kept(c);
    assert_int_equal(used("risk", 1000), 900);
    /* another team's quota is its own: ads has none */
    assert_int_equal(upload(ads_pub, 200, 3, c), 201);
    assert_int_equal(used("risk", 1000), 900);

    /* two models of risk citing the same bytes: counted once */
    call("POST", "/api/v1/models", risk_pub, "{\"name\":\"q-one\"}", 201);
    call("POST", "/api/v1/models", risk_pub, "{\"name\":\"q-two\"}", 201);
    r = version("q-one", risk_pub, a);
    it_expect_status(srv, r, 201);
    it_resp_free(srv, &r);
    r = version("q-two", risk_pub, a);
    it_expect_status(srv, r, 201);
    it_resp_free(srv, &r);
    r = version("q-two", risk_pub, b);
    it_expect_status(srv, r, 201);
    it_resp_free(srv, &r);
    assert_int_equal(used("risk", 1000), 900);

    /* a version citing bytes risk does not keep yet (a global upload): over the quota, no
     * version is made (the next one is still number 3) */
    assert_int_equal(upload(srv->admin_token, 300, 4, g), 201);
    assert_int_equal(used("risk", 1000), 900);
    r = version("q-two", srv->admin_token, g);
    expect_quota_error(r, "risk", 1000, 900);
    it_resp_free(srv, &r);
    call("GET", "/api/v1/models/q-two/versions/3", srv->admin_token, NULL, 404);
    assert_int_equal(used("risk", 1000), 900);
    set_quota("risk", 1200);
    r = version("q-two", srv->admin_token, g);
    it_expect_status(srv, r, 201);
    assert_int_equal(it_jint(r->json, "version"), 3);
    it_resp_free(srv, &r);
    assert_int_equal(used("risk", 1200), 1200);

    /* lowered below the use: reads and deletes work, new bytes are refused */
    set_quota("risk", 100);
    assert_int_equal(used("risk", 100), 1200);
    it_fmt(path, sizeof(path), "/api/v1/blobs/%s", a);
    call("GET", path, risk_pub, NULL, 200);
    call("GET", "/api/v1/models/q-one/versions/1", risk_pub, NULL, 200);
    assert_int_equal(upload(risk_pub, 50, 5, e), 507);
    expect_nothing_kept(e);
    /* bytes it keeps already add nothing: sent again, or cited again */
    assert_int_equal(upload(risk_pub, 400, 1, a), 200);
    r = version("q-one", risk_pub, b);
    it_expect_status(srv, r, 201);
    it_resp_free(srv, &r);
    call("DELETE", "/api/v1/models/q-one/versions/2", srv->admin_token,
         "{\"reason\":\"over quota\"}", 200);
    assert_true(used("risk", 100) <= 1200);
    set_quota("risk", 1000000);
    assert_int_equal(upload(risk_pub, 50, 5, e), 201);
}

/* Giving a model an owner makes the owner keep what its versions cite: not past its quota. */
static void test_new_owner_within_quota(void **state)
{
    char d[IT_DIGEST_LEN + 1];
    struct it_resp *r;

    (void)state;
    call("POST", "/api/v1/teams", srv->admin_token, "{\"name\":\"heir\"}", 201);
    set_quota("heir", 100);
    assert_int_equal(upload(srv->admin_token, 300, 140, d), 201);
    call("POST", "/api/v1/models", srv->admin_token, "{\"name\":\"orphan\"}", 201);
    r = version("orphan", srv->admin_token, d);
    it_expect_status(srv, r, 201);
    it_resp_free(srv, &r);
    r = it_jreq(srv, "PUT", "/api/v1/models/orphan/owners", srv->admin_token,
                "{\"teams\":[\"heir\"]}");
    expect_quota_error(r, "heir", 100, 0);
    it_resp_free(srv, &r);
    r = it_get(srv, "/api/v1/models/orphan", srv->admin_token);
    it_expect_status(srv, r, 200);
    assert_int_equal(json_array_size(it_jarr(r->json, "owners")), 0); /* unchanged */
    it_resp_free(srv, &r);
    set_quota("heir", 1000);
    call("PUT", "/api/v1/models/orphan/owners", srv->admin_token, "{\"teams\":[\"heir\"]}", 200);
    {
        r = it_get(srv, "/api/v1/teams/heir/quota", srv->admin_token);
        assert_int_equal(it_jint(r->json, "used_bytes"), 300);
        it_resp_free(srv, &r);
    }
}

/* An item of GET /api/v1/usage?by=... whose key is name (fails when absent). NEW ref. */
static json_t *usage_item(const char *by, const char *tok, const char *key, const char *name)
{
    char path[64];
    struct it_resp *r;
    json_t *item, *found = NULL;
    size_t i;

    it_fmt(path, sizeof(path), "/api/v1/usage?by=%s", by);
    r = it_get(srv, path, tok);
    it_expect_status(srv, r, 200);
    assert_string_equal(it_jstr(r->json, "by"), by);
    json_array_foreach(it_jarr(r->json, "items"), i, item)
    {
        if (strcmp(it_jstr(item, key), name) == 0)
            found = json_incref(item);
    }
    it_resp_free(srv, &r);
    if (found == NULL)
        fail_msg("no %s '%s' in GET %s", key, name, path);
    return found;
}

/* GET /api/v1/usage by team and by model, and the per-team gauges of /metrics, agree with
 * what the quota counts. */
static void test_usage_and_metrics(void **state)
{
    char a[IT_DIGEST_LEN + 1], line[128];
    struct it_resp *r;
    json_t *u;
    long long use;

    (void)state;
    call("POST", "/api/v1/teams", srv->admin_token, "{\"name\":\"meter\"}", 201);
    {
        char *tok = token("meter-pub", "[\"meter\"]");

        set_quota("meter", 5000);
        assert_int_equal(upload(tok, 700, 90, a), 201);
        call("POST", "/api/v1/models", tok, "{\"name\":\"meter-m\"}", 201);
        r = version("meter-m", tok, a);
        it_expect_status(srv, r, 201);
        it_resp_free(srv, &r);
        r = version("meter-m", tok, a);
        it_expect_status(srv, r, 201);
        it_resp_free(srv, &r);
        free(tok);
    }
    u = usage_item("team", srv->admin_token, "team", "meter");
    assert_int_equal(it_jint(u, "storage_bytes"), 700);
    assert_int_equal(it_jint(u, "quota_bytes"), 5000);
    assert_int_equal(it_jint(u, "versions"), 2);
    assert_true(json_is_number(json_object_get(u, "smoke_seconds")));
    json_decref(u);
    u = usage_item("model", srv->admin_token, "model", "meter-m");
    assert_int_equal(it_jint(u, "storage_bytes"), 700);
    assert_int_equal(it_jint(u, "versions"), 2);
    assert_string_equal(json_string_value(json_array_get(it_jarr(u, "owners"), 0)), "meter");
    json_decref(u);
    /* by=team is the default; anything else is a clear 400 */
    r = it_get(srv, "/api/v1/usage", srv->admin_token);
    it_expect_status(srv, r, 200);
    assert_string_equal(it_jstr(r->json, "by"), "team");
    it_resp_free(srv, &r);
    r = it_get(srv, "/api/v1/usage?by=region", srv->admin_token);
    it_expect_error_field(srv, r, 400, "invalid_argument", "by");
    it_resp_free(srv, &r);
    /* the gauges */
    use = used("meter", 5000);
    r = it_get(srv, "/metrics", srv->admin_token);
    it_expect_status(srv, r, 200);
    it_fmt(line, sizeof(line), "\nmodelgate_team_storage_bytes{team=\"meter\"} %lld\n", use);
    assert_non_null(strstr(r->body, line));
    it_fmt(line, sizeof(line), "\nmodelgate_team_quota_bytes{team=\"meter\"} 5000\n");
    assert_non_null(strstr(r->body, line));
    it_resp_free(srv, &r);
}

/* Uploads racing past the quota, each on its own connection (on PostgreSQL each to its own
 * replica of one database): both fit alone, not together; exactly one wins and the loser
 * leaves nothing behind. */
struct racer {
    struct mg_server *s;
    const char *tok;
    char *body;
    struct it_resp *r;
};

#define RACE_BYTES (4u << 20)

static void *race(void *arg)
{
    struct racer *x = arg;

    x->r = it_request(x->s, "POST", "/api/v1/blobs", x->tok, "application/octet-stream", x->body,
                      RACE_BYTES);
    return NULL;
}

static void test_racing_uploads_one_wins(void **state)
{
    struct mg_server *other = NULL;
    struct racer x[2];
    char d[2][IT_DIGEST_LEN + 1];
    pthread_t th[2];
    char *tok;
    int i, wins = 0, refused = 0;
    struct it_resp *r;

    (void)state;
    call("POST", "/api/v1/teams", srv->admin_token, "{\"name\":\"race\"}", 201);
    tok = token("race-pub", "[\"race\"]");
    set_quota("race", RACE_BYTES + RACE_BYTES / 2);
    for (i = 0; i < 2; i++) {
        x[i] = (struct racer){.s = srv, .tok = tok, .body = malloc(RACE_BYTES)};
        assert_non_null(x[i].body);
        it_pattern(70u + (unsigned)i, 0, x[i].body, RACE_BYTES);
        it_digest(x[i].body, RACE_BYTES, d[i]);
    }
    if (it_on_postgres()) {
        /* two replicas, one upload each, at once */
        other = it_server_join(srv, NULL);
        x[1].s = other;
        for (i = 0; i < 2; i++)
            assert_int_equal(pthread_create(&th[i], NULL, race, &x[i]), 0);
        for (i = 0; i < 2; i++)
            assert_int_equal(pthread_join(th[i], NULL), 0);
    } else {
        struct it_spec specs[2];
        struct it_resp *out[2];

        for (i = 0; i < 2; i++)
            specs[i] = (struct it_spec){"POST",    "/api/v1/blobs", tok, "application/octet-stream",
                                        x[i].body, RACE_BYTES};
        it_request_parallel(srv, 2, specs, out);
        for (i = 0; i < 2; i++)
            x[i].r = out[i];
    }
    for (i = 0; i < 2; i++) {
        if (x[i].r->status == 201) {
            wins++;
            assert_true(it_blob_stored(x[i].s, d[i])); /* a file: backend is per replica */
        } else {
            expect_quota_error(x[i].r, "race", RACE_BYTES + RACE_BYTES / 2, RACE_BYTES);
            assert_false(it_blob_stored(x[i].s, d[i]));
            refused++;
        }
        it_resp_free(x[i].s, &x[i].r);
        free(x[i].body);
    }
    assert_int_equal(wins, 1);
    assert_int_equal(refused, 1);
    for (i = 0; i < 2; i++) {
        r = it_get(srv, "/api/v1/teams/race/quota", tok);
        it_expect_status(srv, r, 200);
        assert_int_equal(it_jint(r->json, "used_bytes"), RACE_BYTES);
        it_resp_free(srv, &r);
    }
    assert_int_equal(it_blob_leftovers(srv), 0);
    if (other)
        assert_int_equal(it_blob_leftovers(other), 0);
    if (other)
        it_server_free(&other);
    free(tok);
}

/* The newest delivery to x whose body is about team: its parsed body (NEW), or NULL. */
static json_t *alert_of(struct rx *x, const char *team, size_t *n_about)
{
    static struct rx_rec recs[RX_MAX_RECS];
    size_t n = rx_snapshot(x, recs, RX_MAX_RECS), i;
    json_t *last = NULL;

    *n_about = 0;
    for (i = 0; i < n; i++) {
        json_t *b = json_loads(recs[i].body, 0, NULL);

        if (b != NULL && json_is_string(json_object_get(b, "team")) &&
            strcmp(json_string_value(json_object_get(b, "team")), team) == 0) {
            assert_true(recs[i].sig_ok);
            (*n_about)++;
            json_decref(last);
            last = b;
        } else {
            json_decref(b);
        }
    }
    return last;
}

/* The outbox rows (deliveries) of gateway `name` about team's quota ("!quota"). */
static size_t quota_rows(const char *name, const char *team)
{
    char path[128];
    struct it_resp *r;
    json_t *d;
    size_t i, n = 0;

    it_fmt(path, sizeof(path), "/api/v1/gateways/%s", name);
    r = it_get(srv, path, srv->admin_token);
    it_expect_status(srv, r, 200);
    json_array_foreach(it_jarr(r->json, "deliveries"), i, d)
    {
        if (strcmp(it_jstr(d, "model"), team) == 0 && strcmp(it_jstr(d, "alias"), "!quota") == 0)
            n++;
    }
    it_resp_free(srv, &r);
    return n;
}

/* A webhook gateway that lists quota.threshold in its "events" hears a team cross 80 % and
 * then 100 % of its quota, once each; one that does not hears nothing of it. */
static void test_webhook_on_thresholds(void **state)
{
    struct rx *x = rx_start("whsec-modelgate-test-0123456789abcdef", true);
    /* Down: a delivery to it would stay in its outbox, where quota_rows() sees it. */
    struct rx *q = rx_start("whsec-modelgate-test-0123456789abcdef", false);
    char d[IT_DIGEST_LEN + 1], *tok;
    json_t *b;
    size_t about;

    (void)state;
    rx_gateway_put(srv, "quota-hook", x, ",\"events\":[\"quota.threshold\"]");
    rx_gateway_put(srv, "quiet-hook", q, "");
    call("POST", "/api/v1/teams", srv->admin_token, "{\"name\":\"alert\"}", 201);
    tok = token("alert-pub", "[\"alert\"]");
    set_quota("alert", 1000);
    assert_int_equal(upload(tok, 500, 120, d), 201); /* 50 %: nothing to say */
    assert_int_equal(upload(tok, 300, 121, d), 201); /* 80 % */
    rx_wait_count(x, 1, 20000);
    b = alert_of(x, "alert", &about);
    assert_non_null(b);
    assert_int_equal(about, 1);
    assert_string_equal(it_jstr(b, "type"), "quota.threshold");
    assert_int_equal(it_jint(b, "percent"), 80);
    assert_int_equal(it_jint(b, "storage_bytes"), 1000);
    assert_int_equal(it_jint(b, "used_bytes"), 800);
    json_decref(b);
    assert_int_equal(upload(tok, 100, 122, d), 201); /* 90 %: said already */
    assert_int_equal(upload(tok, 100, 123, d), 201); /* 100 % */
    rx_wait_count(x, 2, 20000);
    b = alert_of(x, "alert", &about);
    assert_int_equal(about, 2);
    assert_int_equal(it_jint(b, "percent"), 100);
    assert_int_equal(it_jint(b, "used_bytes"), 1000);
    json_decref(b);
    assert_int_equal(upload(tok, 1, 124, d), 507);
    /* A row for it would have been written with quota-hook's and kept (it is down). */
    assert_int_equal(quota_rows("quiet-hook", "alert"), 0);
    assert_int_equal(rx_count(q), 0);
    call("DELETE", "/api/v1/gateways/quota-hook", srv->admin_token, NULL, 204);
    call("DELETE", "/api/v1/gateways/quiet-hook", srv->admin_token, NULL, 204);
    rx_stop(&x);
    rx_stop(&q);
    free(tok);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_quota_api, it_test_teardown),
        cmocka_unit_test_teardown(test_quota_counts_unique_bytes, it_test_teardown),
        cmocka_unit_test_teardown(test_new_owner_within_quota, it_test_teardown),
        cmocka_unit_test_teardown(test_usage_and_metrics, it_test_teardown),
        cmocka_unit_test_teardown(test_racing_uploads_one_wins, it_test_teardown),
        cmocka_unit_test_teardown(test_webhook_on_thresholds, it_test_teardown),
    };

    return it_main_result(cmocka_run_group_tests(tests, setup, teardown));
}
