/*
 * test_analysis.c - milestone M19, live canary analysis, with real components on loopback:
 * a real Prometheus (Debian's, scrape interval 1 s, its own data directory, started and
 * stopped here), a real HAProxy routing to two small model servers (analysis_model.py: one
 * per version, exporting requests by status and a latency histogram labelled with their
 * model and version), bounded load from four client threads, and modelgated whose policy
 * queries that Prometheus.
 *
 * - a bad candidate (30 % errors, +300 ms) is rolled back within failure_limit + 1
 *   intervals of its first step; HAProxy's weights show the baseline at 100; the event
 *   analysis.failed names the metric and both values, and the audit carries it (the
 *   webhook body's "event": unit_gateways_test_webhook);
 * - good candidates behaving like the baseline succeed, twice in a row, every step only
 *   after a passed interval of its own;
 * - Prometheus killed mid-rollout: the rollout holds at its step past its bake time,
 *   records inconclusive intervals saying why, and goes on when Prometheus returns;
 * - with on_inconclusive: rollback, the same outage rolls back;
 * - the dry run answers one judged interval and records nothing; /metrics counts intervals;
 *   a hostile Prometheus (NaN, +Inf, strings, many series, errors, huge bodies) gives
 *   inconclusive metrics with readable details, never a pass or a crash;
 * - on PostgreSQL, the leader killed mid-analysis: the other replica takes over from the
 *   recorded intervals and rolls the bad candidate back all the same.
 */
#include "harness.h"
#include "sys.h"
#include "api.h"
#include "push_common.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define PROMETHEUS "/usr/bin/prometheus"
#define PYTHON "/usr/bin/python3"

static struct mg_server *srv;
static struct it_proc hap, prom, model_v[2];
static char dir[IT_PATH_MAX];
static char art[IT_DIGEST_LEN + 1];
static int stats_port, front_port, prom_port, model_port[2], hap_metrics_port;

/* ---- the components ----------------------------------------------------- */

static void prom_start(void)
{
    char cfg[IT_PATH_MAX], data[IT_PATH_MAX], log[IT_PATH_MAX], listen[64],
        cfgflag[IT_PATH_MAX + 16], dataflag[IT_PATH_MAX + 24], url[96];
    int64_t deadline = it_deadline(30000);

    it_fmt(cfg, sizeof(cfg), "%s/prometheus.yml", dir);
    it_fmt(data, sizeof(data), "%s/prom-data", dir);
    it_fmt(log, sizeof(log), "%s/prometheus.log", dir);
    it_fmt(listen, sizeof(listen), "--web.listen-address=127.0.0.1:%d", prom_port);
    it_fmt(cfgflag, sizeof(cfgflag), "--config.file=%s", cfg);
    it_fmt(dataflag, sizeof(dataflag), "--storage.tsdb.path=%s", data);
    it_proc_spawn(
        &prom, "prometheus",
        (const char *const[]){PROMETHEUS, cfgflag, dataflag, listen, "--log.level=warn", NULL},
        log);
    it_proc_wait_port(&prom, prom_port);
    it_fmt(url, sizeof(url), "http://127.0.0.1:%d/-/ready", prom_port);
    for (;;) { /* ready: the TSDB is open and queries are answered */
        CURL *c = curl_easy_init();
        long code = 0;

        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 1000L);
        if (curl_easy_perform(c) == CURLE_OK)
            curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
        curl_easy_cleanup(c);
        if (code == 200)
            break;
        if (it_now_ms() > deadline) {
            it_proc_dump_log(&prom);
            fail_msg("Prometheus is not ready");
        }
        it_pause_ms(50);
    }
}

static size_t sink(char *p, size_t size, size_t n, void *arg)
{
    char *buf = arg;
    size_t len = strlen(buf), k = size * n;

    if (len + k < 4096) {
        memcpy(buf + len, p, k);
        buf[len + k] = '\0';
    }
    return size * n;
}

/* Wait until Prometheus holds two samples or more of every series of the model (both
 * versions, both codes): a brand-new series has no increase() yet. */
static void prom_wait_series(const char *model)
{
    char url[512], q[256], body[4096];
    int64_t deadline = it_deadline(20000);
    CURL *c = curl_easy_init();
    char *esc;

    it_fmt(q, sizeof(q), "count(count_over_time(http_requests_total{model=\"%s\"}[5s]) >= 2)",
           model);
    esc = curl_easy_escape(c, q, 0);
    it_fmt(url, sizeof(url), "http://127.0.0.1:%d/api/v1/query?query=%s", prom_port, esc);
    curl_free(esc);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 2000L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, (void *)body);
    for (;;) {
        body[0] = '\0';
        if (curl_easy_perform(c) == CURLE_OK && strstr(body, ",\"4\"]") != NULL)
            break;
        if (it_now_ms() > deadline)
            fail_msg("Prometheus has no two samples of %s's series: %s", model, body);
        it_pause_ms(100);
    }
    curl_easy_cleanup(c);
}

/* The model servers of one test: version 1 (the baseline) and version 2 (the candidate),
 * both labelled with the test's model; each is given its error rate and delay. */
static void models_start(const char *model, double err1, int delay1, double err2, int delay2)
{
    for (int i = 0; i < 2; i++) {
        char script[IT_PATH_MAX], log[IT_PATH_MAX], port[16], ver[8], err[32], delay[16];

        it_proc_stop(&model_v[i]);
        it_fmt(script, sizeof(script), "%s/tests/integration/analysis_model.py",
               getenv("MG_SOURCE_DIR"));
        it_fmt(log, sizeof(log), "%s/model_v%d.log", dir, i + 1);
        it_fmt(port, sizeof(port), "%d", model_port[i]);
        it_fmt(ver, sizeof(ver), "%d", i + 1);
        it_fmt(err, sizeof(err), "%g", i == 0 ? err1 : err2);
        it_fmt(delay, sizeof(delay), "%d", i == 0 ? delay1 : delay2);
        it_proc_spawn(&model_v[i], "model",
                      (const char *const[]){PYTHON, script, port, model, ver, err, delay, NULL},
                      log);
        it_proc_wait_port(&model_v[i], model_port[i]);
    }
    prom_wait_series(model);
}

static void write_configs(void)
{
    char path[IT_PATH_MAX], cfg[8192];
    static const char *const models[] = {"bad", "good", "outage", "incon", "lead"};

    it_fmt(cfg, sizeof(cfg),
           "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
           "scrape_configs:\n  - job_name: models\n    static_configs:\n"
           "      - targets: ['127.0.0.1:%d', '127.0.0.1:%d']\n"
           "  - job_name: haproxy\n    static_configs:\n"
           "      - targets: ['127.0.0.1:%d']\n",
           model_port[0], model_port[1], hap_metrics_port);
    it_write_file(it_fmt(path, sizeof(path), "%s/prometheus.yml", dir), cfg);

    /* One backend per test model (be_<model>_production, servers v1 and v2); the load's
     * x-model header picks it. */
    it_fmt(cfg, sizeof(cfg),
           "global\n"
           "    stats socket ipv4@127.0.0.1:%d level admin\n"
           "    nbthread 1\n"
           "defaults\n"
           "    mode http\n"
           "    timeout connect 2s\n"
           "    timeout client 10s\n"
           "    timeout server 10s\n"
           "frontend stats\n" /* README: HAProxy's built-in exporter */
           "    bind 127.0.0.1:%d\n"
           "    http-request use-service prometheus-exporter if { path /metrics }\n"
           "frontend fe\n"
           "    bind 127.0.0.1:%d\n"
           "    use_backend be_%%[req.hdr(x-model)]_production\n",
           stats_port, hap_metrics_port, front_port);
    for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++) {
        /* README "Routing strategies": the internal phase pins x-canary through a map */
        it_fmt(cfg + strlen(cfg), sizeof(cfg) - strlen(cfg),
               "backend be_%s_production\n"
               "    balance roundrobin\n"
               "    http-request set-var(txn.mg_pin) req.hdr(x-canary),regsub(^,x-canary=),"
               "map(%s/%s_production.map) if !{ var(txn.mg_pin) -m found }\n"
               "    use-server %%[var(txn.mg_pin)] if { var(txn.mg_pin) -m found }\n"
               "    server v1 127.0.0.1:%d weight 1\n"
               "    server v2 127.0.0.1:%d weight 1\n",
               models[i], dir, models[i], model_port[0], model_port[1]);
        it_write_file(it_fmt(path, sizeof(path), "%s/%s_production.map", dir, models[i]), "");
    }
    it_write_file(it_fmt(path, sizeof(path), "%s/haproxy.cfg", dir), cfg);
}

static int setup(void **state)
{
    char cfg[IT_PATH_MAX], log[IT_PATH_MAX];

    if (access(PROMETHEUS, X_OK) != 0 || access(PYTHON, X_OK) != 0 ||
        access(PC_HAPROXY, X_OK) != 0) {
        if (getenv("MG_REQUIRE_ALL") && strcmp(getenv("MG_REQUIRE_ALL"), "1") == 0)
            fail_msg("needs %s, %s and %s", PROMETHEUS, PYTHON, PC_HAPROXY);
        return -1;
    }
    it_mkdtemp(dir, "analysis");
    stats_port = it_free_port();
    front_port = it_free_port();
    prom_port = it_free_port();
    model_port[0] = it_free_port();
    model_port[1] = it_free_port();
    hap_metrics_port = it_free_port();
    write_configs();
    it_fmt(cfg, sizeof(cfg), "%s/haproxy.cfg", dir);
    it_fmt(log, sizeof(log), "%s/haproxy.log", dir);
    it_proc_spawn(&hap, "haproxy", (const char *const[]){PC_HAPROXY, "-db", "-f", cfg, NULL}, log);
    it_proc_wait_port(&hap, stats_port);
    it_proc_wait_port(&hap, front_port);
    prom_start();

    {
        char url[64];

        /* the policies of most tests name their provider; README's example uses this */
        it_fmt(url, sizeof(url), "http://127.0.0.1:%d", prom_port);
        srv = it_server_start((const char *const[]){"--push-backoff-base-ms", "50",
                                                    "--push-backoff-max-ms", "400",
                                                    "--prometheus-url", url, NULL});
    }
    it_upload(srv, "analysis test model bytes", 25, art);
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
    it_proc_stop(&model_v[0]);
    it_proc_stop(&model_v[1]);
    it_proc_stop(&prom);
    it_proc_stop(&hap);
    it_rmtree(dir);
    *state = NULL;
    return 0;
}

/* ---- bounded load -------------------------------------------------------- */

#define LOAD_THREADS 4

static struct load {
    pthread_t t[LOAD_THREADS];
    volatile int stop;
    char model[32];
    long ok, errors; /* atomic */
} load;

/* Every tenth request carries the internal header (x-canary: 1), which the internal phase
 * pins to the candidate. */
static void *load_main(void *arg)
{
    CURL *c = curl_easy_init();
    struct curl_slist *plain = NULL, *canary = NULL;
    char url[64], hdr[64];
    FILE *null = fopen("/dev/null", "w");
    unsigned n = 0;

    (void)arg;
    it_fmt(url, sizeof(url), "http://127.0.0.1:%d/", front_port);
    it_fmt(hdr, sizeof(hdr), "x-model: %s", load.model);
    plain = curl_slist_append(NULL, hdr);
    canary = curl_slist_append(curl_slist_append(NULL, hdr), "x-canary: 1");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5000L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, fwrite);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, null);
    while (!load.stop) {
        long code = 0;

        curl_easy_setopt(c, CURLOPT_HTTPHEADER, n++ % 10 == 9 ? canary : plain);
        if (curl_easy_perform(c) == CURLE_OK)
            curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
        __atomic_add_fetch(code == 200 ? &load.ok : &load.errors, 1, __ATOMIC_RELAXED);
        it_pause_ms(20); /* at most ~50 requests/s per thread */
    }
    curl_slist_free_all(plain);
    curl_slist_free_all(canary);
    curl_easy_cleanup(c);
    fclose(null);
    return NULL;
}

static void load_start(const char *model)
{
    load.stop = 0;
    load.ok = load.errors = 0;
    snprintf(load.model, sizeof(load.model), "%s", model);
    for (int i = 0; i < LOAD_THREADS; i++)
        assert_int_equal(pthread_create(&load.t[i], NULL, load_main, NULL), 0);
}

static void load_stop(void)
{
    load.stop = 1;
    for (int i = 0; i < LOAD_THREADS; i++)
        pthread_join(load.t[i], NULL);
}

/* ---- the release side ----------------------------------------------------- */

/* The policy: steps, bake, interval, limits; error rate and p95 latency against the
 * baseline, on the models' own metrics, through Prometheus. */
static void policy_put_phases(struct mg_server *s, const char *model, const char *steps, int bake,
                              int failure_limit, int inconclusive_limit,
                              const char *on_inconclusive, int internal_s)
{
    char body[4096], internal[96] = "";

    if (internal_s > 0) /* an internal phase: x-canary: 1 pinned to the candidate */
        it_fmt(internal, sizeof(internal),
               ",\"internal\":{\"header\":\"x-canary\",\"value\":\"1\",\"seconds\":%d}",
               internal_s);
    it_fmt(body, sizeof(body),
           "{\"rollout\":{\"steps\":%s,\"bake_seconds\":%d,\"auto_advance\":true%s},"
           "\"analysis\":{\"provider\":{\"kind\":\"prometheus\",\"url\":\"http://127.0.0.1:%d\"},"
           "\"interval_seconds\":1,\"failure_limit\":%d,\"inconclusive_limit\":%d,"
           "\"on_inconclusive\":\"%s\",\"metrics\":["
           "{\"name\":\"error_rate\",\"kind\":\"ratio\","
           "\"errors\":\"sum(increase(http_requests_total{model=\\\"{{model}}\\\","
           "version=\\\"{{version}}\\\",code=~\\\"5..\\\"}[5s]))\","
           "\"total\":\"sum(increase(http_requests_total{model=\\\"{{model}}\\\","
           "version=\\\"{{version}}\\\"}[5s]))\","
           "\"max\":0.05,\"max_increase\":0.02,\"min_total\":5,\"confidence\":0.95},"
           "{\"name\":\"p95_latency_ms\",\"kind\":\"value\","
           "\"query\":\"1000 * histogram_quantile(0.95, sum by (le) "
           "(rate(http_request_duration_seconds_bucket{model=\\\"{{model}}\\\","
           "version=\\\"{{version}}\\\"}[5s])))\","
           "\"max\":200,\"max_regression_pct\":400}]}}",
           steps, bake, internal, prom_port, failure_limit, inconclusive_limit, on_inconclusive);
    it_policy_put(s, model, "production", body);
}

static void policy_put(struct mg_server *s, const char *model, const char *steps, int bake,
                       int failure_limit, int inconclusive_limit, const char *on_inconclusive)
{
    policy_put_phases(s, model, steps, bake, failure_limit, inconclusive_limit, on_inconclusive, 0);
}

/* Model with versions 1 and 2, the HAProxy gateway, the alias at v1 (weights 100/0). */
static void model_setup(struct mg_server *s, const char *model)
{
    char cfg[IT_PATH_MAX + 512];
    struct it_resp *r;

    it_model_create(s, s->admin_token, model);
    assert_int_equal(it_version_create(s, s->admin_token, model, art, NULL), 1);
    assert_int_equal(it_version_create(s, s->admin_token, model, art, NULL), 2);
    pc_gateway_put(s, it_fmt((char[64]){0}, 64, "hap-%s", model),
                   it_fmt(cfg, sizeof(cfg),
                          "{\"kind\":\"haproxy\",\"address\":\"127.0.0.1:%d\","
                          "\"backend\":\"be_{model}_{alias}\",\"server\":\"v{version}\","
                          "\"map\":\"%s/{model}_{alias}.map\",\"models\":[\"%s\"]}",
                          stats_port, dir, model));
    r = it_alias_put(s, s->admin_token, model, "production", "{\"version\":1}", 5);
    if (!pc_all_in_sync(r->json))
        fail_msg("?wait=5: not in sync: %s", r->body);
    it_resp_free(s, &r);
}

static int weight(const char *model, const char *server)
{
    char be[64];

    return pc_haproxy_weight(stats_port, it_fmt(be, sizeof(be), "be_%s_production", model), server);
}

/* The promotion's intervals (oldest first), borrowed from r. */
static json_t *intervals(const struct it_resp *r)
{
    json_t *a = json_object_get(r->json, "analysis");

    if (!json_is_object(a))
        fail_msg("the promotion has no analysis: %s", r->body);
    return it_jarr(a, "intervals");
}

static size_t count_verdict(const json_t *list, const char *verdict, int step_index)
{
    size_t i, n = 0;
    json_t *it;

    json_array_foreach(list, i, it)
    {
        if (strcmp(it_jstr(it, "verdict"), verdict) == 0 &&
            (step_index < -1 || it_jint(it, "step_index") == step_index))
            n++;
    }
    return n;
}

static const json_t *event_of(const struct it_resp *r, const char *type)
{
    json_t *e;
    size_t i;

    json_array_foreach(it_jarr(r->json, "events"), i, e)
    {
        if (strcmp(it_jstr(e, "type"), type) == 0)
            return e;
    }
    return NULL;
}

/* Poll the promotion until fn(r) holds; fails with the promotion at the deadline. */
static struct it_resp *wait_for(struct mg_server *s, const char *id, bool (*fn)(struct it_resp *),
                                int64_t timeout_ms, const char *what)
{
    int64_t deadline = it_deadline(timeout_ms);

    for (;;) {
        struct it_resp *r = it_promotion_get(s, s->admin_token, id);

        if (fn(r))
            return r;
        if (it_now_ms() > deadline) {
            pc_dump_server_notes(s, 20);
            fail_msg("waited for %s: %s", what, r->body);
        }
        it_resp_free(s, &r);
        it_pause_ms(50);
    }
}

static bool is_rolled_back(struct it_resp *r)
{
    return strcmp(it_jstr(r->json, "state"), "rolled_back") == 0 ||
           strcmp(it_jstr(r->json, "state"), "succeeded") == 0;
}

static bool is_final(struct it_resp *r)
{
    return it_promotion_final(it_jstr(r->json, "state"));
}

/* ---- the tests ------------------------------------------------------------ */

static void test_bad_candidate_rolled_back(void **state)
{
    struct mg_server *s = *state;
    struct it_resp *r;
    const json_t *ev;
    json_t *list;
    char id[64];
    size_t i, failed;

    models_start("bad", 0, 0, 0.3, 300);
    model_setup(s, "bad");
    policy_put(s, "bad", "[10,50,100]", 1, 2, 30, "hold");
    load_start("bad");
    r = it_promote(s, s->admin_token, "bad", 2, "production", id);
    it_resp_free(s, &r);
    r = wait_for(s, id, is_rolled_back, 30000, "the bad candidate's rollback");
    load_stop();
    if (strcmp(it_jstr(r->json, "state"), "rolled_back") != 0)
        fail_msg("the bad candidate was not rolled back: %s", r->body);

    /* within failure_limit + 1 intervals of its first step, none of them passed */
    list = intervals(r);
    failed = count_verdict(list, "failed", -2);
    if (json_array_size(list) > 3 || failed < 2 || count_verdict(list, "passed", -2) > 0) {
        char *text = json_dumps(list, JSON_COMPACT);

        fail_msg("%zu intervals (%zu failed) before the rollback, want at most 3 with 2 "
                 "failed: %s",
                 json_array_size(list), failed, text);
    }
    assert_int_equal(it_jint(json_object_get(r->json, "analysis"), "consecutive_failures"), 2);
    /* never past the first step */
    json_array_foreach(list, i, ev) assert_int_equal(it_jint(ev, "step_index"), 0);
    ev = event_of(r, "analysis.failed");
    if (ev == NULL || strstr(it_jstr(ev, "detail"), "metric") == NULL ||
        strstr(it_jstr(ev, "detail"), "candidate") == NULL ||
        strstr(it_jstr(ev, "detail"), "baseline") == NULL)
        fail_msg("no analysis.failed event naming the metric and both values: %s", r->body);
    if (strstr(it_jstr(ev, "detail"), "error_rate") == NULL &&
        strstr(it_jstr(ev, "detail"), "p95_latency_ms") == NULL)
        fail_msg("analysis.failed names no metric: %s", it_jstr(ev, "detail"));
    it_resp_free(s, &r);

    /* HAProxy serves the baseline alone */
    {
        int64_t deadline = it_deadline(10000);

        while (weight("bad", "v1") != 100 || weight("bad", "v2") != 0) {
            if (it_now_ms() > deadline)
                fail_msg("HAProxy weights v1=%d v2=%d, want 100 and 0", weight("bad", "v1"),
                         weight("bad", "v2"));
            it_pause_ms(20);
        }
    }
    /* the CLI's status prints the last interval */
    {
        char cmd[IT_PATH_MAX * 2], out[IT_PATH_MAX], *text;

        it_fmt(out, sizeof(out), "%s/status.out", dir);
        it_fmt(cmd, sizeof(cmd),
               "MODELGATE_URL=%s MODELGATE_TOKEN=%s XDG_CONFIG_HOME=%s %s status %s >%s 2>&1",
               s->base_url, s->admin_token, dir, getenv("MODELGATE_CLI"), id, out);
        assert_int_equal(WEXITSTATUS(system(cmd)), 3); /* rolled back */
        text = it_read_file(out, NULL);
        if (strstr(text, "analysis   last interval failed") == NULL ||
            strstr(text, "2 failed, 0 inconclusive in a row") == NULL ||
            strstr(text, "error_rate") == NULL)
            fail_msg("modelgate status does not show the last interval:\n%s", text);
        free(text);
    }
    /* the audit carries the event */
    r = it_get(s, "/api/v1/audit?limit=1000", s->admin_token);
    it_expect_status(s, r, 200);
    if (strstr(r->body, "analysis.failed") == NULL)
        fail_msg("the audit has no analysis.failed entry");
    it_resp_free(s, &r);
    /* /metrics counts the failed intervals */
    r = it_get(s, "/metrics", s->admin_token);
    it_expect_status(s, r, 200);
    if (strstr(r->body, "modelgate_analysis_intervals_total{verdict=\"failed\"} 0") != NULL ||
        strstr(r->body, "modelgate_analysis_intervals_total{verdict=\"failed\"}") == NULL)
        fail_msg("/metrics does not count the failed intervals");
    it_resp_free(s, &r);
}

/* Good candidates: twice in a row, never rolled back, every step after a passed interval
 * of its own. */
static void test_good_candidates_succeed(void **state)
{
    struct mg_server *s = *state;
    struct it_resp *r;
    char id[64];

    models_start("good", 0, 0, 0, 0);
    model_setup(s, "good");
    policy_put(s, "good", "[25,50,100]", 1, 2, 30, "hold");
    load_start("good");
    for (int run = 0; run < 2; run++) {
        json_t *list, *e;
        size_t i;
        int step;

        /* run 0 promotes v2 over v1; run 1 takes v1 back over v2 (same behaviour) */
        r = it_promote(s, s->admin_token, "good", run == 0 ? 2 : 1, "production", id);
        if (run == 1 && strcmp(it_jstr(r->json, "state"), "rolling_out") != 0)
            fail_msg("second run: %s", r->body);
        it_resp_free(s, &r);
        r = wait_for(s, id, is_final, 40000, "the good candidate's promotion");
        if (strcmp(it_jstr(r->json, "state"), "succeeded") != 0) {
            load_stop();
            fail_msg("run %d: a good candidate was not promoted: %s", run, r->body);
        }
        list = intervals(r);
        assert_null(event_of(r, "analysis.failed"));
        /* each step before the last one ended after a passed interval of its own */
        for (step = 0; step < 2; step++) {
            const char *next_at = NULL, *passed_at = NULL;
            int seen = 0;

            json_array_foreach(it_jarr(r->json, "events"), i, e)
            {
                if (strcmp(it_jstr(e, "type"), "step") == 0 && seen++ == step + 1)
                    next_at = it_jstr(e, "at");
                if (strcmp(it_jstr(e, "type"), "succeeded") == 0 && step == 1)
                    next_at = it_jstr(e, "at");
            }
            json_array_foreach(list, i, e)
            {
                if (passed_at == NULL && it_jint(e, "step_index") == step &&
                    strcmp(it_jstr(e, "verdict"), "passed") == 0)
                    passed_at = it_jstr(e, "at");
            }
            if (next_at == NULL || passed_at == NULL || strcmp(passed_at, next_at) > 0)
                fail_msg("run %d: step %d ended at %s without a passed interval before it "
                         "(first passed: %s): %s",
                         run, step, next_at ? next_at : "?", passed_at ? passed_at : "none",
                         r->body);
        }
        it_resp_free(s, &r);
    }
    load_stop();
    if (load.errors > 0)
        fail_msg("%ld of the good candidates' requests failed", load.errors);
}

static bool at_step_1(struct it_resp *r)
{
    return it_promotion_final(it_jstr(r->json, "state")) ||
           it_jint(json_object_get(r->json, "rollout"), "step_index") >= 1;
}

static bool three_inconclusive_at_step_1(struct it_resp *r)
{
    return it_promotion_final(it_jstr(r->json, "state")) ||
           count_verdict(intervals(r), "inconclusive", 1) >= 3;
}

/* Prometheus killed mid-rollout: the rollout holds, then resumes. */
static void test_prometheus_outage_holds_then_resumes(void **state)
{
    struct mg_server *s = *state;
    struct it_resp *r;
    json_t *list, *it;
    char id[64];
    size_t i;
    bool said_why = false;

    models_start("outage", 0, 0, 0, 0);
    model_setup(s, "outage");
    policy_put_phases(s, "outage", "[25,50,100]", 1, 2, 30, "hold", 1);
    load_start("outage");
    r = it_promote(s, s->admin_token, "outage", 2, "production", id);
    it_resp_free(s, &r);
    r = wait_for(s, id, at_step_1, 30000, "step 2 of 3");
    /* the internal phase came first, judged on the pinned requests' metrics */
    {
        bool passed_internal = false;

        json_array_foreach(intervals(r), i, it) passed_internal =
            passed_internal || (strcmp(it_jstr(it, "phase"), "internal") == 0 &&
                                strcmp(it_jstr(it, "verdict"), "passed") == 0);
        if (!passed_internal || event_of(r, "internal") == NULL)
            fail_msg("no passed interval in the internal phase: %s", r->body);
    }
    it_resp_free(s, &r);
    it_proc_stop(&prom); /* mid-rollout */
    r = wait_for(s, id, three_inconclusive_at_step_1, 30000, "3 inconclusive intervals");
    /* held at its step although the bake time (1 s) is long past */
    assert_string_equal(it_jstr(r->json, "state"), "rolling_out");
    assert_int_equal(it_jint(json_object_get(r->json, "rollout"), "step_index"), 1);
    assert_int_equal(weight("outage", "v2"), 50);
    list = intervals(r);
    json_array_foreach(list, i, it)
    {
        json_t *m;
        size_t k;

        json_array_foreach(it_jarr(it, "metrics"), k, m) said_why =
            said_why || strstr(it_jstr(m, "detail"), "cannot reach Prometheus") != NULL;
    }
    if (!said_why)
        fail_msg("no inconclusive interval says Prometheus cannot be reached: %s", r->body);
    it_resp_free(s, &r);

    prom_start(); /* it comes back: the rollout goes on */
    r = wait_for(s, id, is_final, 40000, "the promotion after the outage");
    load_stop();
    if (strcmp(it_jstr(r->json, "state"), "succeeded") != 0)
        fail_msg("after the outage: %s", r->body);
    it_resp_free(s, &r);
}

/* on_inconclusive: rollback: the same outage rolls back. */
static void test_outage_with_on_inconclusive_rollback(void **state)
{
    struct mg_server *s = *state;
    struct it_resp *r;
    char id[64];

    models_start("incon", 0, 0, 0, 0);
    model_setup(s, "incon");
    policy_put_phases(s, "incon", "[25,100]", 1, 2, 3, "rollback", 30);
    it_proc_stop(&prom);
    load_start("incon");
    r = it_promote(s, s->admin_token, "incon", 2, "production", id);
    it_resp_free(s, &r);
    r = wait_for(s, id, is_final, 30000, "the rollback after 3 inconclusive intervals");
    load_stop();
    if (strcmp(it_jstr(r->json, "state"), "rolled_back") != 0 ||
        event_of(r, "analysis.inconclusive") == NULL)
        fail_msg("want rolled_back with analysis.inconclusive: %s", r->body);
    assert_int_equal(count_verdict(intervals(r), "passed", -2), 0);
    {
        json_t *it;
        size_t i;

        /* judged and rolled back in the internal phase, before any weighted step */
        json_array_foreach(intervals(r), i, it)
            assert_string_equal(it_jstr(it, "phase"), "internal");
    }
    it_resp_free(s, &r);
    assert_int_equal(weight("incon", "v1"), 100);
    {
        struct it_resp *a = it_alias_get(s, s->admin_token, "incon", "production");

        if (json_array_size(it_jarr(a->json, "match")) != 0)
            fail_msg("the internal phase's pin outlived the rollback: %s", a->body);
        it_resp_free(s, &a);
    }
    prom_start();
}

/* The dry run: one judged interval, nothing recorded. */
static void test_dry_run(void **state)
{
    struct mg_server *s = *state;
    struct it_resp *r;

    models_start("good", 0, 0, 0, 0);
    load_start("good");
    it_pause_ms(3000); /* a few scrapes with traffic */
    r = it_jreq(s, "POST", "/api/v1/models/good/policies/production/analysis/dry-run",
                s->admin_token, "{\"version\":2}");
    load_stop();
    it_expect_status(s, r, 200);
    if (json_array_size(it_jarr(r->json, "metrics")) != 2 ||
        json_object_get(r->json, "verdict") == NULL)
        fail_msg("dry run: %s", r->body);
    it_resp_free(s, &r);
    /* README's worked example: HAProxy's own exporter, the versions named by the gateway's
     * {{haproxy.backend}} and {{haproxy.server}}: the baseline (v1 serves all) has numbers */
    it_policy_put(
        s, "good", "production",
        "{\"analysis\":{\"interval_seconds\":5,\"metrics\":["
        "{\"name\":\"error_rate\",\"kind\":\"ratio\","
        "\"errors\":\"sum(increase(haproxy_server_http_responses_total{proxy=\\\"{{haproxy.backend}"
        "}"
        "\\\",server=\\\"{{haproxy.server}}\\\",code=\\\"5xx\\\"}[{{interval}}]))\","
        "\"total\":\"sum(increase(haproxy_server_http_responses_total{proxy=\\\"{{haproxy.backend}}"
        "\\\",server=\\\"{{haproxy.server}}\\\"}[{{interval}}]))\","
        "\"max\":0.02,\"max_increase\":0.005,\"min_total\":50},"
        "{\"name\":\"avg_response_ms\",\"kind\":\"value\","
        "\"query\":\"1000 * max(haproxy_server_response_time_average_seconds{proxy=\\\""
        "{{haproxy.backend}}\\\",server=\\\"{{haproxy.server}}\\\"})\","
        "\"max\":500,\"max_regression_pct\":25}]}}");
    load_start("good");
    it_pause_ms(6000); /* the exporter scraped with traffic over a whole window */
    r = it_jreq(s, "POST", "/api/v1/models/good/policies/production/analysis/dry-run",
                s->admin_token, "{\"version\":2}");
    load_stop();
    it_expect_status(s, r, 200);
    {
        json_t *m = json_array_get(it_jarr(r->json, "metrics"), 0);

        if (!json_is_number(json_object_get(m, "baseline")) ||
            !json_is_number(
                json_object_get(json_array_get(it_jarr(r->json, "metrics"), 1), "baseline")))
            fail_msg("HAProxy's exporter gave no baseline numbers: %s", r->body);
    }
    it_resp_free(s, &r);
    /* A hostile Prometheus: NaN, +Inf, a string, two series, an error, a 2 MiB body each
     * make their metric inconclusive with a readable detail; never a pass, never a crash. */
    {
        static const struct {
            const char *name, *says;
        } hostile[] = {
            {"nan", "NaN"},           {"inf", "+Inf, not a finite number"},
            {"str", "gave a string"}, {"many", "gave 2 series"},
            {"bad", "parse error"},   {"huge", "over 1048576 bytes"},
        };
        struct it_proc fake;
        char script[IT_PATH_MAX], log[IT_PATH_MAX], port[16], body[2048];
        int fport = it_free_port();
        size_t k;

        it_fmt(script, sizeof(script), "%s/tests/integration/analysis_hostile.py",
               getenv("MG_SOURCE_DIR"));
        it_fmt(log, sizeof(log), "%s/hostile.log", dir);
        it_fmt(port, sizeof(port), "%d", fport);
        it_proc_spawn(&fake, "hostile", (const char *const[]){PYTHON, script, port, NULL}, log);
        it_proc_wait_port(&fake, fport);
        it_fmt(body, sizeof(body),
               "{\"analysis\":{\"provider\":{\"kind\":\"prometheus\",\"url\":"
               "\"http://127.0.0.1:%d\"},\"metrics\":[",
               fport);
        for (k = 0; k < sizeof(hostile) / sizeof(hostile[0]); k++)
            it_fmt(body + strlen(body), sizeof(body) - strlen(body),
                   "%s{\"name\":\"%s\",\"kind\":\"value\",\"query\":\"%s{v=\\\"{{version}}"
                   "\\\"}\",\"max\":1}",
                   k ? "," : "", hostile[k].name, hostile[k].name);
        strcat(body, "]}}");
        it_policy_put(s, "good", "production", body);
        r = it_jreq(s, "POST", "/api/v1/models/good/policies/production/analysis/dry-run",
                    s->admin_token, "{\"version\":2}");
        it_proc_stop(&fake);
        it_expect_status(s, r, 200);
        assert_string_equal(it_jstr(r->json, "verdict"), "inconclusive");
        for (k = 0; k < sizeof(hostile) / sizeof(hostile[0]); k++) {
            json_t *m = json_array_get(it_jarr(r->json, "metrics"), k);

            if (strcmp(it_jstr(m, "verdict"), "inconclusive") != 0 ||
                strstr(it_jstr(m, "detail"), hostile[k].says) == NULL)
                fail_msg("hostile answer '%s': want inconclusive saying '%s': %s", hostile[k].name,
                         hostile[k].says, r->body);
        }
        it_resp_free(s, &r);
    }
    /* a policy without analysis: 400 naming the field */
    it_model_create(s, s->admin_token, "plain");
    assert_int_equal(it_version_create(s, s->admin_token, "plain", art, NULL), 1);
    it_policy_put(s, "plain", "production", "{}");
    r = it_jreq(s, "POST", "/api/v1/models/plain/policies/production/analysis/dry-run",
                s->admin_token, "{\"version\":1}");
    it_expect_status(s, r, 400);
    assert_string_equal(it_jstr(json_object_get(r->json, "error"), "field"), "analysis");
    it_resp_free(s, &r);
    /* an unknown placeholder is refused at the PUT, naming it */
    r = it_jreq(s, "PUT", "/api/v1/models/plain/policies/production", s->admin_token,
                "{\"analysis\":{\"metrics\":[{\"name\":\"x\",\"kind\":\"value\","
                "\"query\":\"up{v=\\\"{{versoin}}\\\"}\",\"max\":1}]}}");
    it_expect_status(s, r, 400);
    if (strstr(r->body, "{{versoin}}") == NULL)
        fail_msg("the 400 does not name the placeholder: %s", r->body);
    it_resp_free(s, &r);
}

/* Does replica s lead now (its own entry in /api/v1/cluster says so)? */
static bool leads(struct mg_server *s)
{
    struct it_resp *r = it_get(s, "/api/v1/cluster", s->admin_token);
    bool yes;

    it_expect_status(s, r, 200);
    yes = json_is_true(json_object_get(r->json, "leader"));
    it_resp_free(s, &r);
    return yes;
}

static bool one_failed(struct it_resp *r)
{
    return it_promotion_final(it_jstr(r->json, "state")) ||
           count_verdict(intervals(r), "failed", -2) >= 1;
}

/* PostgreSQL: the leader killed mid-analysis; another replica goes on from the recorded
 * intervals and the outcome is the same: the bad candidate rolled back. */
static void test_leader_killed_mid_analysis(void **state)
{
    struct mg_server *s = *state, *s2;
    struct it_resp *r;
    char url[64], id[64];
    int64_t deadline;

    if (!it_on_postgres())
        it_not_applicable("a leader handover needs replicas on PostgreSQL (pg_integration_)");
    it_fmt(url, sizeof(url), "http://127.0.0.1:%d", prom_port);
    /* the first server has led alone so far, and keeps the leadership when s2 joins */
    s2 = it_server_join(s, (const char *const[]){"--push-backoff-base-ms", "50",
                                                 "--push-backoff-max-ms", "400", "--prometheus-url",
                                                 url, NULL});
    assert_true(leads(s));
    models_start("lead", 0, 0, 0.3, 300);
    model_setup(s2, "lead");
    policy_put(s2, "lead", "[10,100]", 1, 3, 60, "hold");
    load_start("lead");
    r = it_promote(s2, s2->admin_token, "lead", 2, "production", id);
    it_resp_free(s2, &r);
    r = wait_for(s2, id, one_failed, 30000, "a first failed interval");
    assert_string_equal(it_jstr(r->json, "state"), "rolling_out");
    it_resp_free(s2, &r);
    it_server_kill9(s); /* the leader, mid-analysis */
    deadline = it_deadline(30000);
    while (!leads(s2)) {
        if (it_now_ms() > deadline)
            fail_msg("the other replica never took the leadership");
        it_pause_ms(100);
    }
    r = wait_for(s2, id, is_final, 40000, "the rollback by the new leader");
    load_stop();
    if (strcmp(it_jstr(r->json, "state"), "rolled_back") != 0 ||
        event_of(r, "analysis.failed") == NULL || count_verdict(intervals(r), "failed", -2) < 3 ||
        count_verdict(intervals(r), "passed", -2) > 0)
        fail_msg("after the leader died: %s", r->body);
    it_resp_free(s2, &r);
    deadline = it_deadline(10000);
    while (weight("lead", "v1") != 100 || weight("lead", "v2") != 0) {
        if (it_now_ms() > deadline)
            fail_msg("HAProxy weights v1=%d v2=%d, want 100 and 0", weight("lead", "v1"),
                     weight("lead", "v2"));
        it_pause_ms(20);
    }
    it_server_stop(s2);
    it_server_free(&s2);
    it_server_restart(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_candidate_rolled_back),
        cmocka_unit_test(test_good_candidates_succeed),
        cmocka_unit_test(test_prometheus_outage_holds_then_resumes),
        cmocka_unit_test(test_outage_with_on_inconclusive_rollback),
        cmocka_unit_test(test_dry_run),
        cmocka_unit_test(test_leader_killed_mid_analysis),
    };

    curl_global_init(CURL_GLOBAL_DEFAULT);
    return it_main_result(cmocka_run_group_tests(tests, setup, teardown));
}
