/*
 * test_aliases.c - an alias's routing strategies beyond weights against the real daemon
 * (docs/contract.md "Routing strategies"): header match rules and a shadow are part of the
 * generation.
 *
 * - PUT with match and shadow: the Alias, its history, a signed webhook delivery (received
 *   and checked the Standard Webhooks way) and ?wait all carry them; a change of the shadow
 *   alone is a new generation;
 * - every bad header name or value, unknown version and bad percent is a 400 naming the
 *   field, and nothing changes (generation, history, deliveries);
 * - last-known-good: a version that some requests bypass through a pin does not hold the
 *   whole alias; rollback moves to the last-known-good and drops the match rules and shadow
 *   of the rolled-back version only (which is the newest routed: shadow and pins count);
 *   the LKG read answers the same past its first page of history and through rollback marks;
 * - the runner tests every routed version: weighted, pinned and shadow;
 * - a policy's rollout phases are validated (400 naming the field) and stored.
 */
#include "harness.h"
#include "sys.h"
#include "api.h"
#include "push_common.h"
#include "runner_common.h"
#include "webhook_rx.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define SECRET "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

static struct mg_server *srv;
static char dir[IT_PATH_MAX];
static char art[IT_DIGEST_LEN + 1];

/* A smoke command that passes and records which version it tested. */
static const char OK_SH[] = "touch \"@DIR@/tested.$MODELGATE_MODEL.$MODELGATE_VERSION\"\n"
                            "printf '%s' '{\"latencies_ms\":[1],\"checks\":[]}' "
                            "> \"$MODELGATE_OUTPUT\"\n";

static int setup(void **state)
{
    char profile[IT_PATH_MAX + 128], nvml[IT_PATH_MAX + 64];

    it_mkdtemp(dir, "aliases");
    rc_write_script(dir, "ok.sh", OK_SH, NULL);
    rc_profile_arg(profile, sizeof(profile), dir, "ok", "");
    it_fmt(nvml, sizeof(nvml), "--nvml-library=%s/absent/libnvidia-ml.so.1", dir);
    srv = it_server_start((const char *const[]){"--push-backoff-base-ms", "50",
                                                "--push-backoff-max-ms", "400", profile, nvml,
                                                "--smoke-interval=0", NULL});
    it_upload(srv, "aliases test model bytes", 24, art);
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
    it_rmtree(dir);
    *state = NULL;
    return 0;
}

static void model_with_versions(const char *model, int n, json_t *(*extra)(void))
{
    it_model_create(srv, srv->admin_token, model);
    for (int i = 1; i <= n; i++)
        assert_int_equal(
            it_version_create(srv, srv->admin_token, model, art, extra ? extra() : NULL), i);
}

static struct it_resp *history(const char *model, const char *alias)
{
    char path[256];
    struct it_resp *r = it_get(
        srv, it_fmt(path, sizeof(path), "/api/v1/models/%s/aliases/%s/history", model, alias),
        srv->admin_token);

    it_expect_status(srv, r, 200);
    return r;
}

/* A match rule or shadow of an answer (objects with artifact and image) without those two. */
static json_t *bare(const json_t *v)
{
    json_t *c = json_deep_copy(v), *x;
    size_t i;

    if (json_is_object(c)) {
        json_object_del(c, "artifact");
        json_object_del(c, "image");
    }
    json_array_foreach(c, i, x)
    {
        json_object_del(x, "artifact");
        json_object_del(x, "image");
    }
    return c;
}

#define expect_json(got, want_text) expect_json_at(got, want_text, __FILE__, __LINE__)

static void expect_json_at(const json_t *got, const char *want_text, const char *file, int line)
{
    json_t *want = json_loads(want_text, JSON_DECODE_ANY, NULL), *b = bare(got);
    char *g = json_dumps(b, JSON_ENCODE_ANY | JSON_SORT_KEYS);

    if (want == NULL || !json_equal(b, want)) {
        print_error("got %s\nwant %s\n", g ? g : "(null)", want_text);
        _fail(file, line);
    }
    free(g);
    json_decref(want);
    json_decref(b);
}

static void test_match_and_shadow_are_the_generation(void **state)
{
    struct mg_server *s = *state;
    struct rx *x = rx_start(SECRET, true);
    struct rx_rec recs[RX_MAX_RECS];
    struct it_resp *r, *h;
    json_t *a, *m, *sh, *body = NULL;
    json_int_t gen;
    size_t n;

    model_with_versions("strat", 3, NULL);
    rx_gateway_put(s, "strat-hook", x, ",\"models\":[\"strat\"]");
    r = it_alias_put(s, s->admin_token, "strat", "production",
                     "{\"routes\":[{\"version\":1,\"weight\":100}],"
                     "\"match\":[{\"header\":\"x-tenant\",\"value\":\"acme\",\"version\":2}],"
                     "\"shadow\":{\"version\":3,\"percent\":50}}",
                     10);
    /* ?wait: the webhook acknowledged this very generation */
    if (!pc_all_in_sync(r->json))
        fail_msg("?wait=10 returned before the webhook acknowledged: %s", r->body);
    a = r->json;
    gen = it_jint(a, "generation");
    m = it_jarr(a, "match");
    sh = it_jobj(a, "shadow");
    expect_json(m, "[{\"header\":\"x-tenant\",\"value\":\"acme\",\"version\":2}]");
    expect_json(sh, "{\"version\":3,\"percent\":50}");
    /* like routes, with the artifact and image a gateway needs */
    assert_string_equal(it_jstr(json_array_get(m, 0), "artifact"), art);
    assert_string_equal(it_jstr(sh, "image"), IT_IMAGE);

    /* the signed delivery of this generation carries both, as the Alias shows them */
    n = rx_snapshot(x, recs, RX_MAX_RECS);
    for (size_t i = 0; i < n; i++) {
        if (recs[i].gen == gen && recs[i].sig_ok && strcmp(recs[i].model, "strat") == 0)
            body = json_loads(recs[i].body, 0, NULL);
    }
    if (body == NULL)
        fail_msg("no verified delivery of generation %lld among %zu", (long long)gen, n);
    assert_true(json_equal(json_object_get(body, "match"), m));
    assert_true(json_equal(json_object_get(body, "shadow"), sh));
    json_decref(body);

    /* GET says the same; history has it */
    r = it_alias_get(s, s->admin_token, "strat", "production");
    assert_true(json_equal(it_jarr(r->json, "match"), m));
    h = history("strat", "production");
    expect_json(it_jarr(json_array_get(it_jarr(h->json, "items"), 0), "match"),
                "[{\"header\":\"x-tenant\",\"value\":\"acme\",\"version\":2}]");
    expect_json(it_jobj(json_array_get(it_jarr(h->json, "items"), 0), "shadow"),
                "{\"version\":3,\"percent\":50}");

    /* the shadow alone changes: a new generation, delivered; percent left out is 100 */
    r = it_alias_put(s, s->admin_token, "strat", "production",
                     "{\"version\":1,\"match\":[{\"header\":\"x-tenant\",\"value\":\"acme\","
                     "\"version\":2}],\"shadow\":{\"version\":2}}",
                     10);
    assert_int_equal(it_jint(r->json, "generation"), gen + 1);
    if (!pc_all_in_sync(r->json))
        fail_msg("?wait=10 returned before the webhook acknowledged: %s", r->body);
    expect_json(it_jobj(r->json, "shadow"), "{\"version\":2,\"percent\":100}");

    /* neither given: neither kept */
    r = it_alias_put(s, s->admin_token, "strat", "production", "{\"version\":1}", 10);
    assert_int_equal(json_array_size(it_jarr(r->json, "match")), 0);
    assert_true(json_is_null(json_object_get(r->json, "shadow")));
    h = history("strat", "production");
    assert_int_equal(json_array_size(it_jarr(h->json, "items")), 3);
    expect_json(it_jarr(json_array_get(it_jarr(h->json, "items"), 0), "match"), "[]");
    assert_true(
        json_is_null(json_object_get(json_array_get(it_jarr(h->json, "items"), 0), "shadow")));
    expect_json(it_jobj(json_array_get(it_jarr(h->json, "items"), 1), "shadow"),
                "{\"version\":2,\"percent\":100}");
    rx_stop(&x);
    pc_gateway_delete(s, "strat-hook");
}

static void test_bad_input_changes_nothing(void **state)
{
    static const struct {
        const char *body, *field;
    } bad[] = {
#define RULE(h, v, ver)                                                                            \
    "{\"version\":1,\"match\":[{\"header\":" h ",\"value\":" v ",\"version\":" ver "}]}"
        {RULE("\"X-Tenant\"", "\"acme\"", "2"), "match[0].header"},
        {RULE("\"x tenant\"", "\"acme\"", "2"), "match[0].header"},
        {RULE("\"x-tenant:\"", "\"acme\"", "2"), "match[0].header"},
        {RULE("\"x/tenant\"", "\"acme\"", "2"), "match[0].header"},
        {RULE("\"\"", "\"acme\"", "2"), "match[0].header"},
        {RULE("\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"", "\"acme\"",
              "2"),
         "match[0].header"},
        {RULE("7", "\"acme\"", "2"), "match[0].header"},
        {RULE("\"x-tenant\"", "\"ac me\"", "2"), "match[0].value"},
        {RULE("\"x-tenant\"", "\"ac\\\"me\"", "2"), "match[0].value"},
        {RULE("\"x-tenant\"", "\"ac\\\\me\"", "2"), "match[0].value"},
        {RULE("\"x-tenant\"", "\"ac;me\"", "2"), "match[0].value"},
        {RULE("\"x-tenant\"", "\"{acme}\"", "2"), "match[0].value"},
        {RULE("\"x-tenant\"", "\"\"", "2"), "match[0].value"},
        {RULE("\"x-tenant\"", "\"acm\\u00e9\"", "2"), "match[0].value"},
        {RULE("\"x-tenant\"", "\"a\\tb\"", "2"), "match[0].value"},
        {RULE("\"x-tenant\"",
              "\"vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv"
              "vvv"
              "vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv\"",
              "2"),
         "match[0].value"},
        {RULE("\"x-tenant\"", "\"acme\"", "9"), "match[0].version"},
        {RULE("\"x-tenant\"", "\"acme\"", "0"), "match[0].version"},
        {RULE("\"x-tenant\"", "\"acme\"", "\"2\""), "match[0].version"},
        {"{\"version\":1,\"match\":[{\"header\":\"x-tenant\",\"value\":\"a\",\"version\":2},"
         "{\"header\":\"x-tenant\",\"value\":\"b\",\"version\":7}]}",
         "match[1].version"},
        {"{\"version\":1,\"match\":[{\"header\":\"x-tenant\",\"value\":\"a\",\"version\":2},"
         "{\"header\":\"x-tenant\",\"value\":\"a\",\"version\":3}]}",
         "match[1]"},
        {"{\"version\":1,\"match\":[{\"header\":\"x-tenant\",\"value\":\"a\",\"version\":2,"
         "\"weight\":5}]}",
         "match[0]"},
        {"{\"version\":1,\"match\":{\"header\":\"x-tenant\"}}", "match"},
        {"{\"version\":1,\"shadow\":{\"version\":9}}", "shadow.version"},
        {"{\"version\":1,\"shadow\":{\"version\":2,\"percent\":0}}", "shadow.percent"},
        {"{\"version\":1,\"shadow\":{\"version\":2,\"percent\":101}}", "shadow.percent"},
        {"{\"version\":1,\"shadow\":{\"version\":2,\"percent\":\"50\"}}", "shadow.percent"},
        {"{\"version\":1,\"shadow\":{\"version\":2,\"percent\":2.5}}", "shadow.percent"},
        {"{\"version\":1,\"shadow\":{\"version\":2,\"share\":5}}", "shadow"},
        {"{\"version\":1,\"shadow\":2}", "shadow"},
        {"{\"routes\":[{\"version\":1,\"weight\":100}],\"shadow\":{\"percent\":5}}",
         "shadow.version"},
#undef RULE
    };
    struct mg_server *s = *state;
    struct it_resp *r, *before, *hist;
    json_int_t gen;
    size_t nhist;

    model_with_versions("strict", 3, NULL);
    it_alias_put(s, s->admin_token, "strict", "production",
                 "{\"version\":1,\"match\":[{\"header\":\"x-tenant\",\"value\":\"acme\","
                 "\"version\":2}],\"shadow\":{\"version\":3,\"percent\":10}}",
                 0);
    before = it_alias_get(s, s->admin_token, "strict", "production");
    gen = it_jint(before->json, "generation");
    hist = history("strict", "production");
    nhist = json_array_size(it_jarr(hist->json, "items"));
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        r = it_jreq(s, "PUT", "/api/v1/models/strict/aliases/production", s->admin_token,
                    bad[i].body);
        it_expect_error_field(s, r, 400, "invalid_argument", bad[i].field);
        if (strcmp(json_string_value(json_object_get(json_object_get(r->json, "error"), "field")),
                   bad[i].field) != 0)
            fail_msg("%s: field %s, want %s", bad[i].body, r->body, bad[i].field);
        it_resp_free(s, &r);
    }
    /* nothing changed: the same generation, routes, rules, shadow and history */
    r = it_alias_get(s, s->admin_token, "strict", "production");
    assert_int_equal(it_jint(r->json, "generation"), gen);
    assert_true(
        json_equal(json_object_get(r->json, "routes"), json_object_get(before->json, "routes")));
    assert_true(
        json_equal(json_object_get(r->json, "match"), json_object_get(before->json, "match")));
    assert_true(
        json_equal(json_object_get(r->json, "shadow"), json_object_get(before->json, "shadow")));
    hist = history("strict", "production");
    assert_int_equal(json_array_size(it_jarr(hist->json, "items")), nhist);
}

static void test_lkg_and_rollback(void **state)
{
    struct mg_server *s = *state;
    struct it_resp *r;
    char routes[64];

    model_with_versions("pins", 3, NULL);
    /* v2 holds everything: known-good */
    it_alias_put(s, s->admin_token, "pins", "production", "{\"version\":2}", 0);
    r = it_alias_get(s, s->admin_token, "pins", "production");
    assert_int_equal(it_jint(it_jobj(r->json, "last_known_good"), "version"), 2);
    /* v3 at 100%, but tenant acme pinned to v1: v3 does not hold the whole alias */
    it_alias_put(s, s->admin_token, "pins", "production",
                 "{\"version\":3,\"match\":[{\"header\":\"x-tenant\",\"value\":\"acme\","
                 "\"version\":1}]}",
                 0);
    r = it_alias_get(s, s->admin_token, "pins", "production");
    assert_int_equal(it_jint(it_jobj(r->json, "last_known_good"), "version"), 2);
    r = it_get(s, "/api/v1/models/pins/aliases/production/last-known-good", s->admin_token);
    it_expect_status(s, r, 200);
    assert_int_equal(it_jint(r->json, "version"), 2);
    /* a shadow answers nobody: v3 with a shadow of v1 does hold the alias */
    it_alias_put(s, s->admin_token, "pins", "production",
                 "{\"version\":3,\"shadow\":{\"version\":1}}", 0);
    r = it_alias_get(s, s->admin_token, "pins", "production");
    assert_int_equal(it_jint(it_jobj(r->json, "last_known_good"), "version"), 3);

    /* v1 pinned for a tenant for a while, then v2 pinned and shadowed: v2 is the newest
     * routed version. Rollback goes to the known-good v3 and drops v2's rule and shadow
     * only. */
    it_alias_put(s, s->admin_token, "pins", "production",
                 "{\"version\":3,\"match\":[{\"header\":\"x-tenant\",\"value\":\"acme\","
                 "\"version\":1}]}",
                 0);
    it_alias_put(s, s->admin_token, "pins", "production",
                 "{\"version\":3,\"match\":[{\"header\":\"x-tenant\",\"value\":\"acme\","
                 "\"version\":1},{\"header\":\"x-canary\",\"value\":\"1\",\"version\":2}],"
                 "\"shadow\":{\"version\":2,\"percent\":20}}",
                 0);
    r = it_jreq(s, "POST", "/api/v1/models/pins/aliases/production/rollback?wait=5", s->admin_token,
                "{\"reason\":\"v2 misbehaves for the canaries\"}");
    it_expect_status(s, r, 200);
    it_routes_text(it_jarr(r->json, "routes"), routes, sizeof(routes));
    assert_string_equal(routes, "v3:100");
    expect_json(it_jarr(r->json, "match"),
                "[{\"header\":\"x-tenant\",\"value\":\"acme\",\"version\":1}]");
    assert_true(json_is_null(json_object_get(r->json, "shadow")));
    r = it_get(s, "/api/v1/models/pins/versions/2", s->admin_token);
    it_expect_status(s, r, 200);
    assert_int_equal(json_array_size(it_jarr(r->json, "bad_for")), 1);
    assert_string_equal(json_string_value(json_array_get(it_jarr(r->json, "bad_for"), 0)),
                        "production");
    r = it_get(s, "/api/v1/models/pins/versions/1", s->admin_token);
    assert_int_equal(json_array_size(it_jarr(r->json, "bad_for")), 0);
    r = history("pins", "production");
    assert_string_equal(it_jstr(json_array_get(it_jarr(r->json, "items"), 0), "kind"), "rollback");
    expect_json(it_jarr(json_array_get(it_jarr(r->json, "items"), 0), "match"),
                "[{\"header\":\"x-tenant\",\"value\":\"acme\",\"version\":1}]");
}

/* The LKG a GET answers, as "vN@G" (version at generation), or the error code. */
static void lkg_text(const char *model, const char *alias, char *out, size_t cap)
{
    char path[256];
    struct it_resp *r;

    it_fmt(path, sizeof(path), "/api/v1/models/%s/aliases/%s/last-known-good", model, alias);
    r = it_get(srv, path, srv->admin_token);
    if (r->status == 200)
        it_fmt(out, cap, "v%lld@%lld", (long long)it_jint(r->json, "version"),
               (long long)it_jint(r->json, "generation"));
    else
        it_fmt(out, cap, "%ld %s", (long)r->status, it_jstr(it_jobj(r->json, "error"), "code"));
}

/* Set alias of model "deep" to v1 with tenant t<i> pinned to version pinned (such a generation
 * never holds the whole alias); returns the generation. */
static json_int_t set_pinned(const char *alias, int i, int pinned)
{
    char body[160];

    it_fmt(body, sizeof(body),
           "{\"version\":1,\"match\":[{\"header\":\"x-tenant\",\"value\":\"t%d\","
           "\"version\":%d}]}",
           i, pinned);
    return it_alias_set(srv, srv->admin_token, "deep", alias, body);
}

/* The LKG read past its first page of history and through rollback marks: on PostgreSQL the
 * newest 8 entries come in one statement with the versions they hold, and anything they do
 * not decide is read again by the walk; the answers are the walk's on both databases. */
static void test_lkg_deep_history(void **state)
{
    struct mg_server *s = *state;
    char lkg[64];
    struct it_resp *r;

    model_with_versions("deep", 3, NULL);
    assert_int_equal(it_alias_set(s, s->admin_token, "deep", "production", "{\"version\":3}"), 1);
    assert_int_equal(it_alias_set(s, s->admin_token, "deep", "production", "{\"version\":2}"), 2);
    lkg_text("deep", "production", lkg, sizeof(lkg));
    assert_string_equal(lkg, "v2@2");
    /* Rolled back from v2: v2 is marked bad since generation 2, so v3 (generation 1) is the
     * LKG; the rollback entry itself never is. */
    r = it_jreq(s, "POST", "/api/v1/models/deep/aliases/production/rollback?wait=5", s->admin_token,
                "{\"reason\":\"v2 misbehaves\"}");
    it_expect_status(s, r, 200);
    lkg_text("deep", "production", lkg, sizeof(lkg));
    assert_string_equal(lkg, "v3@1");
    /* Ten generations of v1 with a tenant pinned to v2 (none holds the whole alias): the LKG
     * is 13 entries back, past the first page. */
    for (int i = 0; i < 10; i++)
        assert_int_equal(set_pinned("production", i, 2), 4 + i);
    lkg_text("deep", "production", lkg, sizeof(lkg));
    assert_string_equal(lkg, "v3@1");
    /* v2 set again after its mark holds again. */
    assert_int_equal(it_alias_set(s, s->admin_token, "deep", "production", "{\"version\":2}"), 14);
    lkg_text("deep", "production", lkg, sizeof(lkg));
    assert_string_equal(lkg, "v2@14");

    /* No entry holds: with a short history and with one past the first page. */
    for (int i = 0; i < 10; i++) {
        assert_int_equal(set_pinned("canary", i, 3), 1 + i);
        lkg_text("deep", "canary", lkg, sizeof(lkg));
        assert_string_equal(lkg, "404 no_known_good");
    }
    lkg_text("deep", "absent", lkg, sizeof(lkg));
    assert_string_equal(lkg, "404 no_known_good");
    lkg_text("absent", "production", lkg, sizeof(lkg));
    assert_string_equal(lkg, "404 not_found");
}

/* Policy rollout phases: validated with a 400 naming the field, stored canonically. */
static void test_policy_rollout_phases(void **state)
{
    static const struct {
        const char *rollout, *field;
    } bad[] = {
        {"{\"shadow_seconds\":-1}", "rollout.shadow_seconds"},
        {"{\"shadow_seconds\":\"600\"}", "rollout.shadow_seconds"},
        {"{\"internal\":{\"header\":\"X-Canary\",\"value\":\"1\",\"seconds\":60}}",
         "rollout.internal.header"},
        {"{\"internal\":{\"header\":\"x-canary\",\"value\":\"a b\",\"seconds\":60}}",
         "rollout.internal.value"},
        {"{\"internal\":{\"header\":\"x-canary\",\"value\":\"1\"}}", "rollout.internal.seconds"},
        {"{\"internal\":{\"header\":\"x-canary\",\"value\":\"1\",\"seconds\":60,"
         "\"percent\":5}}",
         "rollout.internal"},
    };
    struct mg_server *s = *state;
    struct it_resp *r;
    char body[256];
    json_t *ro;

    it_model_create(s, s->admin_token, "phased");
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        r = it_jreq(s, "PUT", "/api/v1/models/phased/policies/production", s->admin_token,
                    it_fmt(body, sizeof(body), "{\"rollout\":%s}", bad[i].rollout));
        it_expect_error_field(s, r, 400, "invalid_argument", bad[i].field);
        it_resp_free(s, &r);
    }
    r = it_get(s, "/api/v1/models/phased/policies/production", s->admin_token);
    it_expect_error(s, r, 404, "not_found");
    r = it_jreq(s, "PUT", "/api/v1/models/phased/policies/production", s->admin_token,
                "{\"rollout\":{\"shadow_seconds\":600,\"internal\":{\"header\":\"x-canary\","
                "\"value\":\"1\",\"seconds\":300},\"steps\":[10,50,100]}}");
    it_expect_status(s, r, 200);
    ro = it_jobj(r->json, "rollout");
    assert_int_equal(it_jint(ro, "shadow_seconds"), 600);
    expect_json(it_jobj(ro, "internal"),
                "{\"header\":\"x-canary\",\"value\":\"1\",\"seconds\":300}");
}

static json_t *smoke_ok(void)
{
    return rc_smoke_spec("ok", 0, 0, NULL);
}

/* Every routed version is tested: weighted, pinned and shadow. */
static void test_runner_tests_every_routed_version(void **state)
{
    struct mg_server *s = *state;
    char path[IT_PATH_MAX];

    model_with_versions("tested", 4, smoke_ok);
    it_alias_put(s, s->admin_token, "tested", "production",
                 "{\"routes\":[{\"version\":1,\"weight\":100},{\"version\":4,\"weight\":0}],"
                 "\"match\":[{\"header\":\"x-tenant\",\"value\":\"acme\",\"version\":2}],"
                 "\"shadow\":{\"version\":3,\"percent\":5}}",
                 0);
    rc_alias_in_sync(s, "tested", "production");
    rc_runner_idle(s, 20000);
    for (int v = 1; v <= 3; v++) {
        struct it_resp *r = rc_smoke_list(s, "tested", v);
        json_t *t = json_array_get(it_jarr(r->json, "items"), 0);

        if (t == NULL)
            fail_msg("v%d is routed but was not smoke-tested", v);
        assert_string_equal(it_jstr(t, "trigger"), "route");
        assert_string_equal(it_jstr(t, "state"), "passed");
        assert_true(it_exists(it_fmt(path, sizeof(path), "%s/tested.tested.%d", dir, v)));
    }
    /* a route at weight 0 is not routed */
    assert_int_equal(json_array_size(it_jarr(rc_smoke_list(s, "tested", 4)->json, "items")), 0);
}

/* A request on a socket of its own, answered later (raw_reply): the harness waits for
 * every answer it asks for. */
static int raw_send(struct mg_server *s, const char *method, const char *path, const char *body)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    char req[2048];
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    size_t n;

    a.sin_port = htons((uint16_t)s->port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0)
        fail_msg("connect: %s", strerror(errno));
    it_fmt(req, sizeof(req),
           "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n"
           "Content-Type: application/json\r\nContent-Length: %zu\r\nConnection: close\r\n"
           "\r\n%s",
           method, path, s->admin_token, strlen(body), body);
    n = strlen(req);
    if (send(fd, req, n, MSG_NOSIGNAL) != (ssize_t)n)
        fail_msg("send: %s", strerror(errno));
    return fd;
}

/* The JSON body of the answer on fd (NEW), which is closed. */
static json_t *raw_reply(int fd)
{
    char buf[65536];
    size_t len = 0;
    ssize_t r;
    const char *body;
    json_t *j;

    while (len < sizeof(buf) - 1 && (r = recv(fd, buf + len, sizeof(buf) - 1 - len, 0)) > 0)
        len += (size_t)r;
    close(fd);
    buf[len] = '\0';
    body = strstr(buf, "\r\n\r\n");
    if (strncmp(buf, "HTTP/1.1 200", 12) != 0 || body == NULL)
        fail_msg("the waiting write was answered: %.300s", buf);
    if ((j = json_loads(body + 4, 0, NULL)) == NULL)
        fail_msg("not JSON: %.300s", body + 4);
    return j;
}

/* Writes (M27): each 200 describes the write it answers (its routes and the generation it
 * committed), never a newer write another client made meanwhile: a ?wait write that waits
 * for a gateway that never answers, and another write while it waits; then many writes at
 * once. */
static void test_each_write_answers_its_own_generation(void **state)
{
    enum { N = 8, ROUNDS = 3 };
    struct mg_server *s = *state;
    struct it_spec specs[N];
    struct it_resp *out[N];
    char bodies[N][32], gw[256];
    bool gens[N * ROUNDS + 4] = {false};
    const char *path = "/api/v1/models/race/aliases/production";
    json_int_t first, second;
    json_t *j;
    int fd;

    model_with_versions("race", N, NULL);
    it_fmt(gw, sizeof(gw),
           "{\"kind\":\"haproxy\",\"address\":\"127.0.0.1:%d\",\"backend\":\"b\","
           "\"server\":\"v{version}\",\"models\":[\"race\"],\"host\":\"nowhere\"}",
           it_free_port());
    it_expect_status(s, it_jreq(s, "PUT", "/api/v1/gateways/race-down", s->admin_token, gw), 201);
    fd = raw_send(s, "PUT", "/api/v1/models/race/aliases/production?wait=3", "{\"version\":1}");
    for (int64_t deadline = it_deadline(5000);;) { /* until the waiting write committed */
        struct it_resp *r = it_get(s, path, s->admin_token);
        if (r->status == 200)
            break;
        if (it_now_ms() > deadline)
            fail_msg("the ?wait write did not commit");
        it_resp_free(s, &r);
        it_pause_ms(5);
    }
    second = it_alias_set(s, s->admin_token, "race", "production", "{\"version\":2}");
    j = raw_reply(fd);
    first = json_integer_value(json_object_get(j, "generation"));
    if (first != second - 1 ||
        json_integer_value(
            json_object_get(json_array_get(json_object_get(j, "routes"), 0), "version")) != 1)
        fail_msg("PUT {\"version\":1}?wait=3 answered generation %lld (the newer write made "
                 "%lld): another client's write",
                 (long long)first, (long long)second);
    json_decref(j);
    it_expect_status(
        s, it_request(s, "DELETE", "/api/v1/gateways/race-down", s->admin_token, NULL, NULL, 0),
        204);
    gens[first] = gens[second] = true;

    for (int round = 0; round < ROUNDS; round++) {
        for (int i = 0; i < N; i++) {
            it_fmt(bodies[i], sizeof(bodies[i]), "{\"version\":%d}", i + 1);
            specs[i] = (struct it_spec){
                "PUT", path, s->admin_token, "application/json", bodies[i], strlen(bodies[i])};
        }
        it_request_parallel(s, N, specs, out);
        for (int i = 0; i < N; i++) {
            json_int_t g, v;

            it_expect_status(s, out[i], 200);
            g = it_jint(out[i]->json, "generation");
            v = it_jint(json_array_get(it_jarr(out[i]->json, "routes"), 0), "version");
            if (v != i + 1)
                fail_msg("PUT {\"version\":%d} answered routes of v%lld (generation %lld): "
                         "another client's write",
                         i + 1, (long long)v, (long long)g);
            if (g < 1 || g >= (json_int_t)(sizeof(gens) / sizeof(gens[0])) || gens[g])
                fail_msg("generation %lld answered twice or out of range", (long long)g);
            gens[g] = true;
        }
        it_release(s);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_match_and_shadow_are_the_generation, it_test_teardown),
        cmocka_unit_test_teardown(test_bad_input_changes_nothing, it_test_teardown),
        cmocka_unit_test_teardown(test_lkg_and_rollback, it_test_teardown),
        cmocka_unit_test_teardown(test_lkg_deep_history, it_test_teardown),
        cmocka_unit_test_teardown(test_runner_tests_every_routed_version, it_test_teardown),
        cmocka_unit_test_teardown(test_policy_rollout_phases, it_test_teardown),
        cmocka_unit_test_teardown(test_each_write_answers_its_own_generation, it_test_teardown),
    };

    return it_main_result(cmocka_run_group_tests(tests, setup, teardown));
}
