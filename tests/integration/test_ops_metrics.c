/*
 * test_ops_metrics.c - milestone M8, operability: GET /metrics is Prometheus
 * text exposition (version 0.0.4) that a scraper can parse, needs the reader
 * role, and its values move with the traffic: request counts by route, method
 * and status; a latency histogram per series; blob bytes in and out;
 * promotions by state; deliveries by gateway and state; delivery lag (which
 * grows while a webhook receiver is down and drops back to 0 once it has
 * caught up); smoke tests by state; the SQLite WAL and database sizes; and
 * the daemon's resident memory (checked against /proc).
 */
#include "harness.h"
#include "sys.h"
#include "api.h"
#include "push_common.h"
#include "webhook_rx.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <string.h>

#define SECRET "whsec-modelgate-metrics-0123456789abcdef"
#define MAX_SAMPLES 4096
#define MAX_LABELS 8

struct label {
    char key[32];
    char val[160];
};

struct sample {
    char name[96];
    struct label labels[MAX_LABELS];
    size_t nlabels;
    double value;
};

struct scrape {
    struct sample *s;
    size_t n;
};

static struct mg_server *srv;
static struct rx *rx;
static char dir[IT_PATH_MAX];
static char *reader_tok;

/* ---- parsing the exposition format ---------------------------------------- */

static bool name_char(int c, bool first)
{
    return isalpha(c) || c == '_' || c == ':' || (!first && isdigit(c));
}

/* The family a sample belongs to (histogram suffixes stripped when the base
 * name was declared a histogram). */
static void family_of(const char *name, const char types[][2][96], size_t ntypes, char *out,
                      size_t outsz)
{
    static const char *const suffixes[] = {"_bucket", "_sum", "_count"};

    snprintf(out, outsz, "%s", name);
    for (size_t i = 0; i < 3; i++) {
        size_t nl = strlen(name), sl = strlen(suffixes[i]);

        if (nl > sl && strcmp(name + nl - sl, suffixes[i]) == 0) {
            for (size_t t = 0; t < ntypes; t++) {
                if (strncmp(types[t][0], name, nl - sl) == 0 && types[t][0][nl - sl] == '\0' &&
                    strcmp(types[t][1], "histogram") == 0) {
                    snprintf(out, outsz, "%.*s", (int)(nl - sl), name);
                    return;
                }
            }
        }
    }
}

/* Parse a whole exposition; every line must be well-formed and every sample
 * must come after a # TYPE of its family. Fails with the offending line. */
static void parse(const char *body, struct scrape *out)
{
    static char types[256][2][96];
    size_t ntypes = 0, lineno = 0;
    char *copy = strdup(body), *save = NULL, *line;

    if (copy == NULL)
        fail_msg("out of memory");
    out->s = calloc(MAX_SAMPLES, sizeof(*out->s));
    out->n = 0;
    if (out->s == NULL)
        fail_msg("out of memory");
    if (body[0] != '\0' && body[strlen(body) - 1] != '\n')
        fail_msg("the exposition does not end with a newline");
    for (line = strtok_r(copy, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
        struct sample *x;
        char *p = line, *end;

        lineno++;
        if (strncmp(line, "# TYPE ", 7) == 0) {
            char name[96], type[32];

            if (sscanf(line + 7, "%95s %31s", name, type) != 2 ||
                (strcmp(type, "counter") != 0 && strcmp(type, "gauge") != 0 &&
                 strcmp(type, "histogram") != 0 && strcmp(type, "summary") != 0 &&
                 strcmp(type, "untyped") != 0))
                fail_msg("line %zu: malformed # TYPE: '%s'", lineno, line);
            for (size_t t = 0; t < ntypes; t++)
                if (strcmp(types[t][0], name) == 0)
                    fail_msg("line %zu: a second # TYPE for %s", lineno, name);
            if (ntypes == 256)
                fail_msg("more than 256 metric families");
            snprintf(types[ntypes][0], 96, "%s", name);
            snprintf(types[ntypes][1], 96, "%s", type);
            ntypes++;
            continue;
        }
        if (line[0] == '#') {
            if (strncmp(line, "# HELP ", 7) != 0)
                fail_msg("line %zu: a comment that is neither # HELP nor # TYPE: '%s'", lineno,
                         line);
            continue;
        }
        if (out->n == MAX_SAMPLES)
            fail_msg("more than %d samples", MAX_SAMPLES);
        x = &out->s[out->n];
        memset(x, 0, sizeof(*x));
        if (!name_char((unsigned char)*p, true))
            fail_msg("line %zu: a sample must start with a metric name: '%s'", lineno, line);
        while (name_char((unsigned char)*p, false))
            p++;
        if ((size_t)(p - line) >= sizeof(x->name))
            fail_msg("line %zu: metric name too long", lineno);
        memcpy(x->name, line, (size_t)(p - line));
        if (*p == '{') {
            p++;
            while (*p != '}') {
                struct label *l;
                char *k = p;
                size_t o = 0;

                if (x->nlabels == MAX_LABELS)
                    fail_msg("line %zu: more than %d labels", lineno, MAX_LABELS);
                l = &x->labels[x->nlabels++];
                while (name_char((unsigned char)*p, p == k))
                    p++;
                if (p == k || (size_t)(p - k) >= sizeof(l->key) || p[0] != '=' || p[1] != '"')
                    fail_msg("line %zu: malformed label at '%s'", lineno, k);
                memcpy(l->key, k, (size_t)(p - k));
                p += 2;
                while (*p != '"') {
                    if (*p == '\0' || *p == '\n')
                        fail_msg("line %zu: unterminated label value", lineno);
                    if (*p == '\\') {
                        p++;
                        if (*p != '\\' && *p != '"' && *p != 'n')
                            fail_msg("line %zu: bad escape in a label value", lineno);
                    }
                    if (o + 1 < sizeof(l->val))
                        l->val[o++] = *p;
                    p++;
                }
                p++;
                if (*p == ',')
                    p++;
                else if (*p != '}')
                    fail_msg("line %zu: expected ',' or '}' after a label: '%s'", lineno, line);
            }
            p++;
        }
        if (*p != ' ')
            fail_msg("line %zu: no space before the value: '%s'", lineno, line);
        p++;
        errno = 0;
        x->value = strtod(p, &end);
        if (end == p || errno == ERANGE || (*end != '\0' && *end != ' '))
            fail_msg("line %zu: the value is not a float: '%s'", lineno, line);
        {
            char fam[96];
            bool declared = false;

            family_of(x->name, (const char(*)[2][96])types, ntypes, fam, sizeof(fam));
            for (size_t t = 0; t < ntypes && !declared; t++)
                declared = strcmp(types[t][0], fam) == 0;
            if (!declared)
                fail_msg("line %zu: sample of %s before (or without) its # TYPE", lineno, fam);
        }
        out->n++;
    }
    free(copy);
}

static const char *label_of(const struct sample *x, const char *key)
{
    for (size_t i = 0; i < x->nlabels; i++)
        if (strcmp(x->labels[i].key, key) == 0)
            return x->labels[i].val;
    return NULL;
}

/* Does the sample carry every "key=value" of want (NULL-terminated)? */
static bool matches(const struct sample *x, const char *name, const char *const *want)
{
    if (strcmp(x->name, name) != 0)
        return false;
    for (size_t i = 0; want != NULL && want[i] != NULL; i++) {
        const char *eq = strchr(want[i], '=');
        char key[32];
        const char *v;

        snprintf(key, sizeof(key), "%.*s", (int)(eq - want[i]), want[i]);
        v = label_of(x, key);
        if (v == NULL || strcmp(v, eq + 1) != 0)
            return false;
    }
    return true;
}

/* Sum over the matching series; NAN when none matches. */
static double msum(const struct scrape *sc, const char *name, const char *const *want)
{
    double sum = 0;
    bool any = false;

    for (size_t i = 0; i < sc->n; i++) {
        if (matches(&sc->s[i], name, want)) {
            sum += sc->s[i].value;
            any = true;
        }
    }
    return any ? sum : NAN;
}

/* Like msum, with a missing series read as 0 (a counter before its first
 * increment). */
static double mzero(const struct scrape *sc, const char *name, const char *const *want)
{
    double v = msum(sc, name, want);

    return isnan(v) ? 0 : v;
}

#define L(...) ((const char *const[]){__VA_ARGS__, NULL})
#define NOL ((const char *const *)NULL)

static void scrape_free(struct scrape *sc)
{
    free(sc->s);
    sc->s = NULL;
    sc->n = 0;
}

static struct scrape scrape(void)
{
    struct it_resp *r = it_get(srv, "/metrics", reader_tok);
    const char *ct;
    struct scrape sc;

    it_expect_status(srv, r, 200);
    ct = it_header(r, "Content-Type");
    if (ct == NULL || strncmp(ct, "text/plain", 10) != 0 || strstr(ct, "version=0.0.4") == NULL)
        fail_msg("GET /metrics: Content-Type '%s', want text/plain; version=0.0.4",
                 ct ? ct : "(none)");
    parse(r->body, &sc);
    it_resp_free(srv, &r);
    return sc;
}

/* Fail with the relevant lines of the scrape. */
static void show_family(const struct scrape *sc, const char *name)
{
    for (size_t i = 0; i < sc->n; i++) {
        if (strncmp(sc->s[i].name, name, strlen(name)) == 0) {
            char lbl[512] = "";
            size_t o = 0;

            for (size_t k = 0; k < sc->s[i].nlabels && o < sizeof(lbl); k++)
                o += (size_t)snprintf(lbl + o, sizeof(lbl) - o, "%s%s=\"%s\"", k ? "," : "",
                                      sc->s[i].labels[k].key, sc->s[i].labels[k].val);
            print_error("  %s{%s} %g\n", sc->s[i].name, lbl, sc->s[i].value);
        }
    }
}

#define expect_at_least(sc, what, got, want)                                                       \
    do {                                                                                           \
        double g_ = (got), w_ = (want);                                                            \
        if (isnan(g_) || g_ < w_) {                                                                \
            print_error("%s: %g, want at least %g; the scrape has:\n", what, g_, w_);              \
            show_family(sc, "modelgate_");                                                         \
            fail();                                                                                \
        }                                                                                          \
    } while (0)

/* ---- setup ------------------------------------------------------------------ */

static int setup(void **state)
{
    char script[IT_PATH_MAX], prof[IT_PATH_MAX + 96];
    const char *args[8];

    it_mkdtemp(dir, "ops-metrics");
    it_fmt(script, sizeof(script), "%s/ok.sh", dir);
    it_write_file(script, "#!/bin/sh\n"
                          "printf '{\"latencies_ms\":[1.5,2.5,3.5],\"checks\":[{\"name\":\"loads\","
                          "\"passed\":true,\"detail\":\"fine\"}]}' > \"$2\"\n");
    it_fmt(prof, sizeof(prof), "--smoke-profile=ok=/bin/sh %s {model_dir} {output}", script);
    args[0] = "--push-backoff-base-ms";
    args[1] = "50";
    args[2] = "--push-backoff-max-ms";
    args[3] = "200";
    args[4] = prof;
    args[5] = NULL;
    srv = it_server_start(args);
    reader_tok = it_token_create(srv, "metrics-reader", "reader", NULL);
    rx = rx_start(SECRET, true);
    *state = srv;
    return 0;
}

static int teardown(void **state)
{
    if (srv != NULL) {
        it_server_stop(srv);
        it_server_free(&srv);
    }
    rx_stop(&rx);
    free(reader_tok);
    it_rmtree(dir);
    *state = NULL;
    return 0;
}

/* ---- tests ------------------------------------------------------------------ */

static void test_metrics_needs_the_reader_role(void **state)
{
    struct mg_server *s = *state;
    char *deployer = it_token_create(s, "metrics-deployer", "deployer", NULL);
    struct it_resp *r;

    r = it_get(s, "/metrics", NULL);
    it_expect_error(s, r, 401, "unauthenticated");
    /* every role includes reader */
    r = it_get(s, "/metrics", deployer);
    it_expect_status(s, r, 200);
    r = it_get(s, "/metrics", reader_tok);
    it_expect_status(s, r, 200);
    r = it_get(s, "/metrics", s->admin_token);
    it_expect_status(s, r, 200);
    free(deployer);
}

/* Wait until the smoke test of model/version reaches passed. */
static void wait_smoke_passed(const char *model, int version)
{
    int64_t deadline = it_deadline(20000);
    char path[256];

    it_fmt(path, sizeof(path), "/api/v1/models/%s/versions/%d/smoke-tests", model, version);
    for (;;) {
        struct it_resp *r = it_get(srv, path, srv->admin_token);
        json_t *items;
        const char *st;

        it_expect_status(srv, r, 200);
        items = it_jarr(r->json, "items");
        st = json_string_value(json_object_get(json_array_get(items, 0), "state"));
        if (st != NULL && strcmp(st, "passed") == 0) {
            it_resp_free(srv, &r);
            return;
        }
        if (st != NULL && (strcmp(st, "failed") == 0 || strcmp(st, "error") == 0))
            fail_msg("the smoke test ended %s: %s", st, r->body);
        if (it_now_ms() > deadline)
            fail_msg("the smoke test did not pass within the deadline: %s", r->body);
        it_resp_free(srv, &r);
        it_pause_ms(20);
    }
}

static void test_values_move_with_traffic(void **state)
{
    struct mg_server *s = *state;
    struct scrape a, b;
    struct it_resp *r;
    char digest[IT_DIGEST_LEN + 1], path[256];
    const size_t big = 300000;
    uint8_t *bytes = malloc(big);
    json_int_t gen;

    assert_non_null(bytes);
    a = scrape();

    /* Requests of several routes and statuses. */
    for (int i = 0; i < 3; i++) {
        r = it_get(s, "/healthz", NULL);
        it_expect_status(s, r, 200);
    }
    for (int i = 0; i < 2; i++) {
        r = it_get(s, "/api/v1/models/no-such-model", s->admin_token);
        it_expect_error(s, r, 404, "not_found");
    }
    r = it_get(s, "/no/such/endpoint", s->admin_token);
    it_expect_status(s, r, 404);

    /* Blob bytes in and out: an upload, a full GET, an artifact GET, a range. */
    it_pattern(77, 0, bytes, big);
    it_upload(s, bytes, big, digest);
    r = it_get(s, it_fmt(path, sizeof(path), "/api/v1/blobs/%s", digest), s->admin_token);
    it_expect_status(s, r, 200);
    assert_int_equal(r->len, big);
    r = it_request_h(s, "GET", path, s->admin_token, NULL, NULL, 0,
                     (const char *const[]){"Range: bytes=0-999", NULL});
    it_expect_status(s, r, 206);
    assert_int_equal(r->len, 1000);

    /* A model, two versions (one with the smoke profile), an alias pushed to
     * a webhook gateway, and a promotion that succeeds at once (no policy). */
    it_model_create(s, s->admin_token, "metrics-m");
    r = it_jreq_v(s, "POST", "/api/v1/models/metrics-m/versions", s->admin_token,
                  json_pack("{ss ss s{ss}}", "artifact", digest, "image", IT_IMAGE, "smoke",
                            "profile", "ok"));
    it_expect_status(s, r, 201);
    it_version_create(s, s->admin_token, "metrics-m", digest, NULL);
    r = it_get(s, "/api/v1/models/metrics-m/versions/1/artifact", s->admin_token);
    it_expect_status(s, r, 200);
    assert_int_equal(r->len, big);

    rx_gateway_put(s, "hook", rx, ",\"models\":[\"metrics-m\"]");
    gen = it_alias_set(s, s->admin_token, "metrics-m", "staging", "{\"version\":1}");
    it_release(s);
    pc_wait_delivery(s, "hook", "metrics-m", "staging", gen, "in_sync", 10000);
    r = it_jreq(s, "POST", "/api/v1/promotions", s->admin_token,
                "{\"model\":\"metrics-m\",\"version\":2,\"alias\":\"production\"}");
    it_expect_status(s, r, 201);
    if (strcmp(it_jstr(r->json, "state"), "succeeded") != 0)
        fail_msg("a promotion without a policy should succeed at once: %s", r->body);

    /* A smoke test that passes. */
    r = it_jreq(s, "POST", "/api/v1/models/metrics-m/versions/1/smoke-tests", s->admin_token, NULL);
    it_expect_status(s, r, 202);
    it_release(s);
    wait_smoke_passed("metrics-m", 1);
    pc_wait_delivery(s, "hook", "metrics-m", "production", 0, "in_sync", 10000);
    it_release(s);

    b = scrape();

    /* Request counters, by route, method and status; never backwards. */
    expect_at_least(&b, "GET /healthz 200 count grew by 3",
                    mzero(&b, "modelgate_http_requests_total",
                          L("route=/healthz", "method=GET", "status=200")) -
                        mzero(&a, "modelgate_http_requests_total",
                              L("route=/healthz", "method=GET", "status=200")),
                    3);
    expect_at_least(&b, "GET /api/v1/models/{model} 404 count",
                    mzero(&b, "modelgate_http_requests_total",
                          L("route=/api/v1/models/{model}", "method=GET", "status=404")),
                    2);
    expect_at_least(&b, "an unmatched path's 404 count",
                    mzero(&b, "modelgate_http_requests_total", L("route=unmatched", "status=404")),
                    1);
    expect_at_least(&b, "POST /api/v1/blobs 201 count",
                    mzero(&b, "modelgate_http_requests_total",
                          L("route=/api/v1/blobs", "method=POST", "status=201")),
                    1);
    expect_at_least(&b, "GET /api/v1/blobs/{digest} 206 count",
                    mzero(&b, "modelgate_http_requests_total",
                          L("route=/api/v1/blobs/{digest}", "method=GET", "status=206")),
                    1);
    expect_at_least(&b, "GET /metrics 200 count (the earlier scrape)",
                    mzero(&b, "modelgate_http_requests_total", L("route=/metrics", "status=200")),
                    1);
    for (size_t i = 0; i < a.n; i++) {
        if (strcmp(a.s[i].name, "modelgate_http_requests_total") != 0)
            continue;
        for (size_t j = 0; j < b.n; j++) {
            if (strcmp(b.s[j].name, a.s[i].name) == 0 &&
                strcmp(label_of(&a.s[i], "route"), label_of(&b.s[j], "route")) == 0 &&
                strcmp(label_of(&a.s[i], "method"), label_of(&b.s[j], "method")) == 0 &&
                strcmp(label_of(&a.s[i], "status"), label_of(&b.s[j], "status")) == 0 &&
                b.s[j].value < a.s[i].value)
                fail_msg("counter %s{route=%s} went backwards: %g then %g", a.s[i].name,
                         label_of(&a.s[i], "route"), a.s[i].value, b.s[j].value);
        }
    }

    /* The latency histogram: every request series has buckets that never
     * decrease, a +Inf bucket and a _count equal to the request count, and a
     * non-negative _sum. */
    {
        size_t series = 0;

        for (size_t i = 0; i < b.n; i++) {
            const struct sample *x = &b.s[i];
            const char *route = label_of(x, "route"), *method = label_of(x, "method"),
                       *status = label_of(x, "status");
            char rl[200], ml[32], sl[32];
            const char *const want[] = {rl, ml, sl, NULL};
            double prev_le = -1, prev = -1, inf = NAN, count, sum;
            size_t nb = 0;

            if (strcmp(x->name, "modelgate_http_requests_total") != 0)
                continue;
            if (route == NULL || method == NULL || status == NULL)
                fail_msg("a request counter without route, method and status labels");
            it_fmt(rl, sizeof(rl), "route=%s", route);
            it_fmt(ml, sizeof(ml), "method=%s", method);
            it_fmt(sl, sizeof(sl), "status=%s", status);
            for (size_t j = 0; j < b.n; j++) {
                const char *le;
                double lev;

                if (!matches(&b.s[j], "modelgate_http_request_duration_seconds_bucket", want))
                    continue;
                le = label_of(&b.s[j], "le");
                if (le == NULL)
                    fail_msg("a histogram bucket without le for %s", route);
                lev = strcmp(le, "+Inf") == 0 ? INFINITY : strtod(le, NULL);
                if (lev <= prev_le || b.s[j].value < prev)
                    fail_msg("histogram buckets of %s %s %s are not increasing at le=%s", method,
                             route, status, le);
                prev_le = lev;
                prev = b.s[j].value;
                if (isinf(lev))
                    inf = b.s[j].value;
                nb++;
            }
            count = msum(&b, "modelgate_http_request_duration_seconds_count", want);
            sum = msum(&b, "modelgate_http_request_duration_seconds_sum", want);
            if (nb < 2 || isnan(inf) || isnan(count) || isnan(sum))
                fail_msg("%s %s %s: the histogram lacks buckets, +Inf, _count or _sum", method,
                         route, status);
            if (inf != count || count != x->value || sum < 0)
                fail_msg("%s %s %s: +Inf bucket %g, _count %g, requests %g, _sum %g", method, route,
                         status, inf, count, x->value, sum);
            series++;
        }
        if (series < 6)
            fail_msg("only %zu request series after traffic on many routes", series);
    }

    /* Blob bytes. */
    expect_at_least(&b, "blob bytes in grew by the upload",
                    mzero(&b, "modelgate_blob_bytes_in_total", NOL) -
                        mzero(&a, "modelgate_blob_bytes_in_total", NOL),
                    (double)big);
    expect_at_least(&b, "blob bytes out grew by two full reads and a range",
                    mzero(&b, "modelgate_blob_bytes_out_total", NOL) -
                        mzero(&a, "modelgate_blob_bytes_out_total", NOL),
                    2.0 * (double)big + 1000);

    /* Promotions, deliveries, smoke tests. */
    expect_at_least(&b, "succeeded promotions",
                    mzero(&b, "modelgate_promotions", L("state=succeeded")) -
                        mzero(&a, "modelgate_promotions", L("state=succeeded")),
                    1);
    expect_at_least(&b, "in_sync deliveries of the hook gateway",
                    mzero(&b, "modelgate_deliveries", L("gateway=hook", "state=in_sync")), 2);
    expect_at_least(&b, "delivery lag of the hook gateway (present)",
                    msum(&b, "modelgate_delivery_lag_seconds", L("gateway=hook")), 0);
    if (msum(&b, "modelgate_delivery_lag_seconds", L("gateway=hook")) != 0)
        fail_msg("delivery lag of an in-sync gateway is %g, want 0",
                 msum(&b, "modelgate_delivery_lag_seconds", L("gateway=hook")));
    expect_at_least(&b, "passed smoke tests",
                    mzero(&b, "modelgate_smoke_tests", L("state=passed")) -
                        mzero(&a, "modelgate_smoke_tests", L("state=passed")),
                    1);

    /* Storage and memory gauges. */
    if (!it_on_postgres()) {
        expect_at_least(&b, "SQLite WAL bytes", msum(&b, "modelgate_sqlite_wal_bytes", NOL), 1);
        expect_at_least(&b, "SQLite database bytes", msum(&b, "modelgate_sqlite_db_bytes", NOL),
                        4096);
    }
    {
        double rss = msum(&b, "modelgate_process_resident_memory_bytes", NOL);
        char p[64], line[256];
        long kib = -1;
        FILE *f;

        it_fmt(p, sizeof(p), "/proc/%d/status", (int)s->pid);
        f = fopen(p, "re");
        assert_non_null(f);
        while (fgets(line, sizeof(line), f) != NULL)
            if (strncmp(line, "VmRSS:", 6) == 0)
                kib = strtol(line + 6, NULL, 10);
        fclose(f);
        if (isnan(rss) || kib <= 0 || rss < 0.5 * (double)kib * 1024 ||
            rss > 2.0 * (double)kib * 1024)
            fail_msg("resident memory metric %g bytes, but /proc says VmRSS %ld KiB", rss, kib);
    }
    scrape_free(&a);
    scrape_free(&b);
    free(bytes);
}

/* Lag grows while the receiver is down and returns to 0 once it catches up;
 * the deliveries gauge shows the row leaving and re-entering in_sync. */
static void test_delivery_lag_moves(void **state)
{
    struct mg_server *s = *state;
    struct scrape sc;
    json_int_t gen;
    int64_t deadline;
    double lag = NAN, first = NAN;

    rx_set_up(rx, false);
    gen = it_alias_set(s, s->admin_token, "metrics-m", "staging", "{\"version\":2}");
    it_release(s);
    pc_wait_delivery(s, "hook", "metrics-m", "staging", gen, "failing", 10000);
    it_release(s);
    sc = scrape();
    if (mzero(&sc, "modelgate_deliveries", L("gateway=hook", "state=failing")) +
            mzero(&sc, "modelgate_deliveries", L("gateway=hook", "state=pending")) <
        1) {
        show_family(&sc, "modelgate_deliveries");
        fail_msg("no failing or pending delivery counted for the hook gateway while it is down");
    }
    first = msum(&sc, "modelgate_delivery_lag_seconds", L("gateway=hook"));
    scrape_free(&sc);
    /* The lag is an age: watch it grow past a second. */
    deadline = it_deadline(10000);
    for (;;) {
        sc = scrape();
        lag = msum(&sc, "modelgate_delivery_lag_seconds", L("gateway=hook"));
        scrape_free(&sc);
        if (!isnan(lag) && lag >= 1.0 && lag > first)
            break;
        if (it_now_ms() > deadline)
            fail_msg("delivery lag of a gateway that is down stayed at %g (first %g)", lag, first);
        it_pause_ms(100);
    }
    rx_set_up(rx, true);
    pc_wait_delivery(s, "hook", "metrics-m", "staging", gen, "in_sync", 10000);
    it_release(s);
    sc = scrape();
    lag = msum(&sc, "modelgate_delivery_lag_seconds", L("gateway=hook"));
    if (lag != 0) {
        show_family(&sc, "modelgate_deliver");
        fail_msg("delivery lag after the gateway caught up is %g, want 0", lag);
    }
    if (mzero(&sc, "modelgate_deliveries", L("gateway=hook", "state=failing")) != 0)
        fail_msg("a failing delivery is still counted after the gateway caught up");
    scrape_free(&sc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_metrics_needs_the_reader_role, it_test_teardown),
        cmocka_unit_test_teardown(test_values_move_with_traffic, it_test_teardown),
        cmocka_unit_test_teardown(test_delivery_lag_moves, it_test_teardown),
    };

    return it_main_result(cmocka_run_group_tests(tests, setup, teardown));
}
