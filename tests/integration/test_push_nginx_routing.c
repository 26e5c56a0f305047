/*
 * test_push_nginx_routing.c - docs/contract.md "Routing strategies" with a real nginx on loopback:
 * the site config of README ("Routing strategies": `mirror /_mg_shadow` and the shadow
 * location) in front of three upstreams (each a tiny nginx server that answers its own name
 * and logs, per request, whether it was a mirrored copy).
 *
 * - header pinning: 1000 requests with `x-tenant: acme` all reach the pinned version while
 *   1000 without follow the weights (within 5 points), and the match is exact (another case
 *   of the value is not pinned);
 * - a shadow receives a copy of every request (or of its percent) while the clients see only
 *   the primary's answers, counted at the upstreams;
 * - a header nginx has no variable for is refused at the PUT, naming the gateway;
 * - a promotion with shadow_seconds and an internal phase goes shadow → internal → 10% →
 *   100% with nginx serving each phase; one driven by the clock alone reaches success;
 * - a smoke test that fails during the shadow phase rolls the promotion back before any
 *   user request reached the candidate (its upstream only ever saw mirrored copies).
 */
#include "harness.h"
#include "sys.h"
#include "api.h"
#include "push_common.h"
#include "runner_common.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const NAMES[] = {"v1", "v2", "v3"};

static struct mg_server *srv;
static struct it_proc ngx;
static char dir[IT_PATH_MAX], conf[IT_PATH_MAX];
static char art[IT_DIGEST_LEN + 1];
static char url[64];
static int port;

/* The smoke command of the phase tests: waits for DIR/release, then passes unless DIR/verdict
 * says "fail". */
static const char GATED_SH[] =
    "while [ ! -e @DIR@/release ]; do sleep 0.02; done\n"
    "if [ \"$(cat @DIR@/verdict)\" = fail ]; then ok=false; else ok=true; fi\n"
    "printf '{\"latencies_ms\":[2],\"checks\":[{\"name\":\"shadow-diff\",\"passed\":%s,"
    "\"detail\":\"answers differ from the baseline\"}]}' \"$ok\" > \"$MODELGATE_OUTPUT\"\n";

/* Two models, "pin" and "ph", each behind the README site config; upstreams {model}_v1..3
 * answer v1..3 and log "-" for a user request, "1" for a mirrored copy. */
static void write_site(void)
{
    char text[20000], ups[8192] = "", sites[8192] = "";
    const char *user = getuid() == 0 ? "user root;\n" : "";
    size_t o = 0;

    for (int v = 1; v <= 3; v++) {
        o += (size_t)snprintf(ups + o, sizeof(ups) - o,
                              "    upstream pin_v%d { server unix:%s/v%d.sock; }\n"
                              "    upstream ph_v%d { server unix:%s/v%d.sock; }\n",
                              v, dir, v, v, dir, v);
        snprintf(sites + strlen(sites), sizeof(sites) - strlen(sites),
                 "    server { listen unix:%s/v%d.sock; access_log %s/v%d.log mg;\n"
                 "             location / { return 200 \"v%d\"; } }\n",
                 dir, v, dir, v, v);
    }
    it_fmt(text, sizeof(text),
           "daemon off;\n%s"
           "worker_processes 1;\n"
           "pid %s/nginx.pid;\n"
           "error_log %s/error.log;\n"
           "events { worker_connections 256; }\n"
           "http {\n"
           "    access_log off;\n"
           "    client_body_temp_path %s/tmp_body;\n"
           "    proxy_temp_path %s/tmp_proxy;\n"
           "    fastcgi_temp_path %s/tmp_fastcgi;\n"
           "    uwsgi_temp_path %s/tmp_uwsgi;\n"
           "    scgi_temp_path %s/tmp_scgi;\n"
           "    log_format mg \"$http_x_mg_mirror\";\n"
           "    include %s/inc/*.conf;\n"
           "%s%s"
           "    server {\n"
           "        listen 127.0.0.1:%d;\n"
           "        location /pin { mirror /_mg_shadow_pin; proxy_pass "
           "http://$modelgate_pin_production; }\n"
           "        location = /_mg_shadow_pin { internal;\n"
           "            if ($modelgate_pin_production_shadow = \"\") { return 204; }\n"
           "            proxy_set_header X-Mg-Mirror 1;\n"
           "            proxy_pass http://$modelgate_pin_production_shadow$request_uri; }\n"
           "        location /ph { mirror /_mg_shadow_ph; proxy_pass "
           "http://$modelgate_ph_production; }\n"
           "        location = /_mg_shadow_ph { internal;\n"
           "            if ($modelgate_ph_production_shadow = \"\") { return 204; }\n"
           "            proxy_set_header X-Mg-Mirror 1;\n"
           "            proxy_pass http://$modelgate_ph_production_shadow$request_uri; }\n"
           "    }\n"
           "}\n",
           user, dir, dir, dir, dir, dir, dir, dir, dir, ups, sites, port);
    it_write_file(conf, text);
}

/* What an operator starts with: every variable the site names, pointing at v1. */
static void write_initial_include(const char *model)
{
    char path[IT_PATH_MAX], text[512];

    it_write_file(it_fmt(path, sizeof(path), "%s/inc/%s_production.conf", dir, model),
                  it_fmt(text, sizeof(text),
                         "split_clients \"${request_id}\" $modelgate_%s_production {\n"
                         "    * %s_v1;\n}\n"
                         "split_clients \"${request_id}\" $modelgate_%s_production_shadow {\n"
                         "    * \"\";\n}\n",
                         model, model, model));
}

/* User requests ("-") and mirrored copies ("1") version v's upstream has logged. */
static void logged(int v, int *user, int *mirrored)
{
    char path[IT_PATH_MAX], *text, *line, *save = NULL;

    *user = *mirrored = 0;
    text = it_read_file(it_fmt(path, sizeof(path), "%s/v%d.log", dir, v), NULL);
    for (line = text ? strtok_r(text, "\n", &save) : NULL; line; line = strtok_r(NULL, "\n", &save))
        (strcmp(line, "1") == 0 ? (*mirrored)++ : (*user)++);
    free(text);
}

static void clear_logs(void)
{
    char path[IT_PATH_MAX];

    for (int v = 1; v <= 3; v++)
        it_write_file(it_fmt(path, sizeof(path), "%s/v%d.log", dir, v), "");
}

/* Poll until version v's upstream logged `mirrored` copies (mirrors finish after the
 * answer the client got); returns its user requests. */
static int wait_mirrored(int v, int mirrored, int64_t timeout_ms)
{
    int64_t deadline = it_deadline(timeout_ms);
    int u, m;

    for (;;) {
        logged(v, &u, &m);
        if (m >= mirrored)
            return u;
        if (it_now_ms() > deadline)
            fail_msg("v%d's upstream logged %d mirrored copies, want %d", v, m, mirrored);
        it_pause_ms(10);
    }
}

/*
 * A sentinel instead of a pause before "no copy arrived" (M29): one more request (with
 * header, may be NULL) that version v's upstream logs as a user request, and a wait until
 * it is logged. nginx starts a request's mirror subrequests before it proxies the request
 * itself, and the requests before this one were answered before it was sent: a copy of
 * any of them would have reached its upstream by now.
 */
static void sentinel(const char *url, const char *header, int v)
{
    int64_t deadline = it_deadline(10000);
    int counts[3], user0, user, mirrored;

    logged(v, &user0, &mirrored);
    pc_count_h(url, header, 1, 3, NAMES, counts);
    for (;;) {
        logged(v, &user, &mirrored);
        if (user > user0)
            return;
        if (it_now_ms() > deadline)
            fail_msg("the sentinel request to %s never reached v%d's upstream", url, v);
        it_pause_ms(10);
    }
}

/* Wait for nginx to run the configuration acknowledged by an answer (its workers replaced
 * after the reload), asserting the Alias (or the promotion's alias) is in sync. */
static void wait_applied(const pid_t *old, size_t nold)
{
    pc_wait_replaced(ngx.pid, old, nold, 10000);
}

static json_int_t change(const char *model, const char *body)
{
    pid_t old[PC_MAX_CHILDREN];
    size_t nold = pc_children(ngx.pid, old, PC_MAX_CHILDREN);
    struct it_resp *r = it_alias_put(srv, srv->admin_token, model, "production", body, 10);
    json_int_t gen = it_jint(r->json, "generation");

    if (!pc_all_in_sync(r->json))
        fail_msg("?wait=10 returned before nginx acknowledged: %s", r->body);
    wait_applied(old, nold);
    it_resp_free(srv, &r);
    return gen;
}

static int setup(void **state)
{
    char log[IT_PATH_MAX], path[IT_PATH_MAX], body[2048], profile[IT_PATH_MAX + 128];
    char nvml[IT_PATH_MAX + 64];
    pid_t old[PC_MAX_CHILDREN];
    size_t nold;

    it_mkdtemp(dir, "nginx-routing");
    port = it_free_port();
    it_fmt(conf, sizeof(conf), "%s/nginx.conf", dir);
    it_fmt(url, sizeof(url), "http://127.0.0.1:%d", port);
    if (mkdir(it_fmt(path, sizeof(path), "%s/inc", dir), 0755) != 0)
        fail_msg("mkdir in %s: %s", dir, strerror(errno));
    write_initial_include("pin");
    write_initial_include("ph");
    write_site();
    it_fmt(log, sizeof(log), "%s/nginx.log", dir);
    it_proc_spawn(&ngx, "nginx",
                  (const char *const[]){PC_NGINX, "-p", dir, "-c", conf, "-e", "stderr", NULL},
                  log);
    it_proc_wait_port(&ngx, port);

    rc_write_script(dir, "gated.sh", GATED_SH, NULL);
    it_write_file(it_fmt(path, sizeof(path), "%s/verdict", dir), "pass\n");
    rc_profile_arg(profile, sizeof(profile), dir, "gated", "");
    it_fmt(nvml, sizeof(nvml), "--nvml-library=%s/absent/libnvidia-ml.so.1", dir);
    srv = it_server_start((const char *const[]){"--push-backoff-base-ms", "50",
                                                "--push-backoff-max-ms", "400", profile, nvml,
                                                "--smoke-interval=0", NULL});
    it_upload(srv, "nginx routing model bytes", 25, art);
    it_model_create(srv, srv->admin_token, "pin");
    it_model_create(srv, srv->admin_token, "ph");
    for (int i = 1; i <= 3; i++) {
        it_version_create(srv, srv->admin_token, "pin", art, NULL);
        it_version_create(srv, srv->admin_token, "ph", art, rc_smoke_spec("gated", 0, 0, NULL));
    }
    it_alias_set(srv, srv->admin_token, "pin", "production", "{\"version\":1}");
    it_write_file(it_fmt(path, sizeof(path), "%s/release", dir), "go\n");
    it_alias_set(srv, srv->admin_token, "ph", "production", "{\"version\":1}");
    nold = pc_children(ngx.pid, old, PC_MAX_CHILDREN);
    pc_gateway_put(srv, "ngx",
                   it_fmt(body, sizeof(body),
                          "{\"kind\":\"nginx\",\"file\":\"%s/inc/{model}_{alias}.conf\","
                          "\"upstream\":\"{model}_v{version}\","
                          "\"test_command\":[\"%s\",\"-t\",\"-q\",\"-p\",\"%s\",\"-c\",\"%s\","
                          "\"-e\",\"stderr\"],"
                          "\"reload_command\":[\"%s\",\"-s\",\"reload\",\"-p\",\"%s\",\"-c\","
                          "\"%s\",\"-e\",\"stderr\"],\"aliases\":[\"production\"]}",
                          dir, PC_NGINX, dir, conf, PC_NGINX, dir, conf));
    pc_wait_delivery(srv, "ngx", "pin", "production", 0, "in_sync", 15000);
    pc_wait_delivery(srv, "ngx", "ph", "production", 0, "in_sync", 15000);
    wait_applied(old, nold);
    rc_runner_idle(srv, 20000);
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
    it_proc_stop(&ngx);
    it_rmtree(dir);
    *state = NULL;
    return 0;
}

static void test_header_pinning_and_weights(void **state)
{
    char pin_url[96];
    int counts[3];

    (void)state;
    it_fmt(pin_url, sizeof(pin_url), "%s/pin", url);
    change("pin", "{\"routes\":[{\"version\":1,\"weight\":70},{\"version\":2,\"weight\":30}],"
                  "\"match\":[{\"header\":\"x-tenant\",\"value\":\"acme\",\"version\":3},"
                  "{\"header\":\"x-canary\",\"value\":\"on\",\"version\":2}]}");
    pc_count_h(pin_url, "x-tenant: acme", 1000, 3, NAMES, counts);
    pc_expect_split(1000, 3, NAMES, counts, 0, 0, 100);
    pc_count_h(pin_url, NULL, 1000, 3, NAMES, counts);
    pc_expect_split(1000, 3, NAMES, counts, 70, 30, 0);
    /* the second rule, and an exact match only: another case or value follows the weights */
    pc_count_h(pin_url, "x-canary: on", 100, 3, NAMES, counts);
    pc_expect_split(100, 3, NAMES, counts, 0, 100, 0);
    pc_count_h(pin_url, "x-tenant: ACME", 300, 3, NAMES, counts);
    assert_int_equal(counts[2], 0);
    pc_count_h(pin_url, "x-tenant: acme2", 300, 3, NAMES, counts);
    assert_int_equal(counts[2], 0);

    /* no rules any more: the header means nothing */
    change("pin", "{\"version\":1}");
    pc_count_h(pin_url, "x-tenant: acme", 100, 3, NAMES, counts);
    pc_expect_split(100, 3, NAMES, counts, 100, 0, 0);
}

static void test_shadow_gets_copies(void **state)
{
    char pin_url[96];
    int counts[3], user, mirrored;

    (void)state;
    it_fmt(pin_url, sizeof(pin_url), "%s/pin", url);
    change("pin", "{\"version\":1,\"shadow\":{\"version\":2,\"percent\":100}}");
    clear_logs();
    pc_count(pin_url, 200, 3, NAMES, counts);
    /* the clients see only the primary's answers ... */
    pc_expect_split(200, 3, NAMES, counts, 100, 0, 0);
    /* ... while the shadow got a copy of each, and no request of its own */
    user = wait_mirrored(2, 200, 10000);
    assert_int_equal(user, 0);
    logged(1, &user, &mirrored);
    assert_int_equal(user, 200);
    assert_int_equal(mirrored, 0);
    logged(2, &user, &mirrored);
    assert_int_equal(mirrored, 200); /* a copy each, not more */

    /* a share of the requests: 30% of 1000 copied, within 5 points */
    change("pin", "{\"version\":1,\"shadow\":{\"version\":3,\"percent\":30}}");
    clear_logs();
    pc_count(pin_url, 1000, 3, NAMES, counts);
    pc_expect_split(1000, 3, NAMES, counts, 100, 0, 0);
    wait_mirrored(3, 250, 10000);
    it_pause_ms(200); /* stragglers of the last requests; a count, not a timing */
    logged(3, &user, &mirrored);
    assert_int_equal(user, 0);
    if (mirrored < 250 || mirrored > 350)
        fail_msg("the shadow got %d copies of 1000 requests, want 30%% +-5 points", mirrored);

    /* no shadow: the mirror location answers itself, nothing is copied */
    change("pin", "{\"version\":1}");
    clear_logs();
    pc_count(pin_url, 100, 3, NAMES, counts);
    logged(1, &user, &mirrored);
    assert_int_equal(user, 100);
    logged(3, &user, &mirrored);
    assert_int_equal(user + mirrored, 0);
}

static void test_header_nginx_cannot_read(void **state)
{
    struct mg_server *s = *state;
    struct it_resp *r, *before = it_alias_get(s, s->admin_token, "pin", "production");

    r = it_jreq(s, "PUT", "/api/v1/models/pin/aliases/production", s->admin_token,
                "{\"version\":1,\"match\":[{\"header\":\"x_tenant\",\"value\":\"acme\","
                "\"version\":2}]}");
    it_expect_error_field(s, r, 400, "invalid_argument", "match[0].header");
    if (strstr(r->body, "'ngx'") == NULL)
        fail_msg("the refusal should name the gateway: %s", r->body);
    r = it_alias_get(s, s->admin_token, "pin", "production");
    assert_int_equal(it_jint(r->json, "generation"), it_jint(before->json, "generation"));
}

/* ---- promotions through the phases -------------------------------------------------- */

static const char *rollout_phase(const struct it_resp *r)
{
    return json_string_value(json_object_get(it_jobj(r->json, "rollout"), "phase"));
}

static void release_smoke(bool release, const char *verdict)
{
    char path[IT_PATH_MAX];

    it_write_file(it_fmt(path, sizeof(path), "%s/verdict", dir), verdict);
    if (release)
        it_write_file(it_fmt(path, sizeof(path), "%s/release", dir), "go\n");
    else
        unlink(it_fmt(path, sizeof(path), "%s/release", dir));
}

/* POST .../advance?wait=10, retried while the candidate's smoke test still runs (409). */
static struct it_resp *advance(struct mg_server *s, const char *id)
{
    char path[128];
    int64_t deadline = it_deadline(20000);

    for (;;) {
        pid_t old[PC_MAX_CHILDREN];
        size_t nold = pc_children(ngx.pid, old, PC_MAX_CHILDREN);
        struct it_resp *r = it_request(
            s, "POST", it_fmt(path, sizeof(path), "/api/v1/promotions/%s/advance?wait=10", id),
            s->admin_token, NULL, NULL, 0);

        if (r->status == 200) {
            wait_applied(old, nold);
            return r;
        }
        it_expect_error(s, r, 409, "conflict");
        if (it_now_ms() > deadline)
            fail_msg("advance still refused: %s", r->body);
        it_resp_free(s, &r);
        it_pause_ms(50);
    }
}

static void test_promotion_phases(void **state)
{
    struct mg_server *s = *state;
    char ph_url[96], id[64];
    struct it_resp *r;
    pid_t old[PC_MAX_CHILDREN];
    size_t nold;
    int counts[3], user, mirrored;
    json_t *events, *e;
    const char *want[] = {"shadow", "internal", "step", "succeeded"};
    size_t i, k = 0;

    it_fmt(ph_url, sizeof(ph_url), "%s/ph", url);
    it_policy_put(s, "ph", "production",
                  "{\"rollout\":{\"shadow_seconds\":3600,\"internal\":{\"header\":\"x-canary\","
                  "\"value\":\"1\",\"seconds\":3600},\"steps\":[10,100],\"bake_seconds\":3600,"
                  "\"auto_advance\":false}}");
    release_smoke(false, "pass\n");
    clear_logs();

    /* shadow: v1 answers everyone, v2 gets a copy of each request */
    nold = pc_children(ngx.pid, old, PC_MAX_CHILDREN);
    r = it_jreq_v(s, "POST", "/api/v1/promotions?wait=10", s->admin_token,
                  json_pack("{ss si ss}", "model", "ph", "version", 2, "alias", "production"));
    it_expect_status(s, r, 201);
    snprintf(id, sizeof(id), "%s", it_jstr(r->json, "id"));
    assert_string_equal(it_jstr(r->json, "state"), "rolling_out");
    assert_string_equal(rollout_phase(r), "shadow");
    wait_applied(old, nold);
    r = it_alias_get(s, s->admin_token, "ph", "production");
    assert_int_equal(it_jint(it_jobj(r->json, "shadow"), "version"), 2);
    pc_count(ph_url, 200, 3, NAMES, counts);
    pc_expect_split(200, 3, NAMES, counts, 100, 0, 0);
    assert_int_equal(wait_mirrored(2, 200, 10000), 0);
    /* the shadow phase holds while the candidate's smoke test runs */
    r = it_request(s, "POST", it_fmt((char[128]){0}, 128, "/api/v1/promotions/%s/advance", id),
                   s->admin_token, NULL, NULL, 0);
    it_expect_error(s, r, 409, "conflict");
    release_smoke(true, "pass\n");

    /* internal: only requests with the header reach v2 */
    r = advance(s, id);
    assert_string_equal(rollout_phase(r), "internal");
    clear_logs();
    pc_count_h(ph_url, "x-canary: 1", 200, 3, NAMES, counts);
    pc_expect_split(200, 3, NAMES, counts, 0, 100, 0);
    pc_count(ph_url, 500, 3, NAMES, counts);
    pc_expect_split(500, 3, NAMES, counts, 100, 0, 0);
    sentinel(ph_url, "x-canary: 1", 2);
    logged(2, &user, &mirrored);
    assert_int_equal(mirrored, 0); /* no copies any more */

    /* steps: 10%, then 100% */
    r = advance(s, id);
    assert_string_equal(rollout_phase(r), "steps");
    assert_int_equal(it_jint(it_jobj(r->json, "rollout"), "weight"), 10);
    pc_count(ph_url, 1000, 3, NAMES, counts);
    pc_expect_split(1000, 3, NAMES, counts, 90, 10, 0);
    r = advance(s, id);
    assert_string_equal(it_jstr(r->json, "state"), "succeeded");
    assert_string_equal(rollout_phase(r), "steps");
    pc_count_h(ph_url, "x-canary: 1", 100, 3, NAMES, counts);
    pc_expect_split(100, 3, NAMES, counts, 0, 100, 0);
    r = it_alias_get(s, s->admin_token, "ph", "production");
    assert_int_equal(it_jint(it_jobj(r->json, "last_known_good"), "version"), 2);
    assert_int_equal(json_array_size(it_jarr(r->json, "match")), 0);
    assert_true(json_is_null(json_object_get(r->json, "shadow")));

    /* the events tell the phases in order */
    r = it_promotion_get(s, s->admin_token, id);
    events = it_jarr(r->json, "events");
    json_array_foreach(events, i, e)
    {
        if (k < 4 && strcmp(it_jstr(e, "type"), want[k]) == 0)
            k++;
    }
    if (k != 4)
        fail_msg("events should go shadow, internal, step, succeeded: %s", r->body);
}

/* A failed smoke test during the shadow phase rolls back before any user request reached the
 * candidate: its upstream saw copies only. */
static void test_smoke_failure_during_shadow(void **state)
{
    struct mg_server *s = *state;
    char ph_url[96], id[64];
    struct it_resp *r;
    pid_t old[PC_MAX_CHILDREN];
    size_t nold;
    int counts[3], user, mirrored;
    json_t *ev = NULL, *e;
    size_t i;

    it_fmt(ph_url, sizeof(ph_url), "%s/ph", url);
    release_smoke(false, "fail\n");
    clear_logs();
    nold = pc_children(ngx.pid, old, PC_MAX_CHILDREN);
    r = it_jreq_v(s, "POST", "/api/v1/promotions?wait=10", s->admin_token,
                  json_pack("{ss si ss}", "model", "ph", "version", 3, "alias", "production"));
    it_expect_status(s, r, 201);
    snprintf(id, sizeof(id), "%s", it_jstr(r->json, "id"));
    assert_string_equal(rollout_phase(r), "shadow");
    wait_applied(old, nold);
    /* users keep coming during the shadow phase */
    pc_count(ph_url, 100, 3, NAMES, counts);
    pc_expect_split(100, 3, NAMES, counts, 0, 100, 0);
    assert_int_equal(wait_mirrored(3, 100, 10000), 0);

    /* the candidate's test fails: rolled back, during the shadow phase */
    nold = pc_children(ngx.pid, old, PC_MAX_CHILDREN);
    release_smoke(true, "fail\n");
    r = it_promotion_wait(s, s->admin_token, id, "rolled_back", 20000);
    assert_string_equal(rollout_phase(r), "shadow");
    json_array_foreach(it_jarr(r->json, "events"), i, e)
    {
        if (strcmp(it_jstr(e, "type"), "rolled_back") == 0)
            ev = e;
    }
    assert_non_null(ev);
    rc_expect_contains(it_jstr(ev, "detail"), "during the shadow phase");
    rc_expect_contains(it_jstr(ev, "detail"), "shadow-diff");
    rc_alias_in_sync(s, "ph", "production");
    wait_applied(old, nold);
    r = it_alias_get(s, s->admin_token, "ph", "production");
    assert_true(json_is_null(json_object_get(r->json, "shadow")));
    pc_count(ph_url, 100, 3, NAMES, counts);
    pc_expect_split(100, 3, NAMES, counts, 0, 100, 0);
    sentinel(ph_url, NULL, 2);
    logged(3, &user, &mirrored);
    assert_int_equal(user, 0); /* no user request ever reached v3 */
    assert_true(mirrored >= 100 && mirrored <= 100 + 100);
}

/* With auto_advance the clock alone moves the phases, once the smoke test passed. */
static void test_phases_on_the_clock(void **state)
{
    struct mg_server *s = *state;
    char id[64];
    struct it_resp *r;
    const char *want[] = {"shadow", "internal", "succeeded"};
    json_t *e;
    size_t i, k = 0;

    release_smoke(true, "pass\n");
    it_policy_put(s, "ph", "production",
                  "{\"rollout\":{\"shadow_seconds\":1,\"internal\":{\"header\":\"x-canary\","
                  "\"value\":\"1\",\"seconds\":1},\"steps\":[100],\"auto_advance\":true}}");
    r = it_promote(s, s->admin_token, "ph", 3, "production", id);
    assert_string_equal(rollout_phase(r), "shadow");
    r = it_promotion_wait(s, s->admin_token, id, "succeeded", 20000);
    json_array_foreach(it_jarr(r->json, "events"), i, e)
    {
        if (k < 3 && strcmp(it_jstr(e, "type"), want[k]) == 0)
            k++;
    }
    if (k != 3)
        fail_msg("events should go shadow, internal, succeeded: %s", r->body);
    r = it_alias_get(s, s->admin_token, "ph", "production");
    assert_int_equal(it_jint(it_jobj(r->json, "last_known_good"), "version"), 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_header_pinning_and_weights, it_test_teardown),
        cmocka_unit_test_teardown(test_shadow_gets_copies, it_test_teardown),
        cmocka_unit_test_teardown(test_header_nginx_cannot_read, it_test_teardown),
        cmocka_unit_test_teardown(test_promotion_phases, it_test_teardown),
        cmocka_unit_test_teardown(test_smoke_failure_during_shadow, it_test_teardown),
        cmocka_unit_test_teardown(test_phases_on_the_clock, it_test_teardown),
    };

    if (access(PC_NGINX, X_OK) != 0) {
        print_error("%s is missing: install the Debian package nginx-light\n", PC_NGINX);
        return 1;
    }
    return it_main_result(cmocka_run_group_tests(tests, setup, teardown));
}
