/*
 * test_push_nginx.c - milestone M4 with a real nginx on loopback: the
 * include file (a split_clients block) plus `nginx -t` and a reload change
 * how 1000 requests split between upstreams (each a tiny nginx server that
 * answers its own name), within 5 points; model names with '.' and '-'
 * give the variable the site config expects; a config test that fails
 * keeps the previous file byte for byte, skips the reload, and shows
 * nginx's own error in last_error, both when the site config is broken and
 * when the gateway's file template points where split_clients is not
 * allowed.
 */
#include "harness.h"
#include "sys.h"
#include "api.h"
#include "push_common.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const NAMES[] = {"v1", "v2", "v3"};

static struct mg_server *srv;
static struct it_proc ngx;
static char dir[IT_PATH_MAX];
static char art[IT_DIGEST_LEN + 1];
static char url[64], eu_url[80], health_url[80];
static char conf[IT_PATH_MAX], inc[IT_PATH_MAX], site_inc[IT_PATH_MAX];
static int port;

/* The site: upstreams fraud_v1..3 (and fraud.eu-west_v1..3) answering v1..3,
 * proxying / to $modelgate_fraud_production and /eu to
 * $modelgate_fraud_1eu_0west_production. `extra` goes into the http block. */
static void write_site(const char *extra)
{
    char text[8192];
    const char *user = getuid() == 0 ? "user root;\n" : "";

    it_fmt(text, sizeof(text),
           "daemon off;\n"
           "%s"
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
           "    include %s/inc/fraud_production.conf;\n"
           "    include %s/inc/fraud.eu-west_production.conf;\n"
           "    upstream fraud_v1 { server unix:%s/v1.sock; }\n"
           "    upstream fraud_v2 { server unix:%s/v2.sock; }\n"
           "    upstream fraud_v3 { server unix:%s/v3.sock; }\n"
           "    upstream fraud.eu-west_v1 { server unix:%s/v1.sock; }\n"
           "    upstream fraud.eu-west_v2 { server unix:%s/v2.sock; }\n"
           "    upstream fraud.eu-west_v3 { server unix:%s/v3.sock; }\n"
           "    server { listen unix:%s/v1.sock; location / { return 200 \"v1\"; } }\n"
           "    server { listen unix:%s/v2.sock; location / { return 200 \"v2\"; } }\n"
           "    server { listen unix:%s/v3.sock; location / { return 200 \"v3\"; } }\n"
           "    server {\n"
           "        listen 127.0.0.1:%d;\n"
           "        include %s/site/*.conf;\n"
           "        location / { proxy_pass http://$modelgate_fraud_production; }\n"
           "        location /eu { proxy_pass http://$modelgate_fraud_1eu_0west_production; }\n"
           "    }\n"
           "%s"
           "}\n",
           user, dir, dir, dir, dir, dir, dir, dir, dir, dir, dir, dir, dir, dir, dir, dir, dir,
           dir, dir, port, dir, extra);
    it_write_file(conf, text);
}

/* The gateway config, with the file template given. */
static const char *gateway_config(const char *file_tmpl, char *out, size_t n)
{
    return it_fmt(out, n,
                  "{\"kind\":\"nginx\",\"file\":\"%s\",\"upstream\":\"{model}_v{version}\","
                  "\"test_command\":[\"%s\",\"-t\",\"-q\",\"-p\",\"%s\",\"-c\",\"%s\","
                  "\"-e\",\"stderr\"],"
                  "\"reload_command\":[\"%s\",\"-s\",\"reload\",\"-p\",\"%s\",\"-c\",\"%s\","
                  "\"-e\",\"stderr\"],"
                  "\"models\":[\"fraud\",\"fraud.eu-west\"],\"aliases\":[\"production\"]}",
                  file_tmpl, PC_NGINX, dir, conf, PC_NGINX, dir, conf);
}

/* ---- nginx's worker processes (a reload replaces them) ---------------- */

#define MAX_PIDS 16

/* Children of the nginx master (its workers). */
static size_t workers(pid_t *out)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    size_t n = 0;

    if (d == NULL)
        fail_msg("opendir /proc: %s", strerror(errno));
    while ((e = readdir(d)) != NULL && n < MAX_PIDS) {
        char path[300], buf[512], *p;
        FILE *f;
        int ppid = 0;

        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        f = fopen(it_fmt(path, sizeof(path), "/proc/%s/stat", e->d_name), "re");
        if (f == NULL)
            continue;
        if (fgets(buf, sizeof(buf), f) != NULL && (p = strrchr(buf, ')')) != NULL &&
            sscanf(p + 1, " %*c %d", &ppid) == 1 && ppid == ngx.pid)
            out[n++] = (pid_t)atoi(e->d_name);
        fclose(f);
    }
    closedir(d);
    return n;
}

/* Wait until none of the workers in old[] is left and a new one runs: the
 * reload has taken effect for new connections. */
static void wait_reloaded(const pid_t *old, size_t nold)
{
    int64_t deadline = it_deadline(10000);

    for (;;) {
        pid_t now[MAX_PIDS];
        size_t n = workers(now);
        bool stale = false;

        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < nold; j++)
                stale = stale || now[i] == old[j];
        if (n > 0 && !stale)
            return;
        if (it_now_ms() > deadline) {
            it_proc_dump_log(&ngx);
            fail_msg("nginx did not replace its workers after the reload");
        }
        it_pause_ms(10);
    }
}

/* PUT the alias with ?wait and wait for the reload; returns the generation. */
static json_int_t change(struct mg_server *s, const char *model, const char *body)
{
    pid_t old[MAX_PIDS];
    size_t nold = workers(old);
    struct it_resp *r = it_alias_put(s, s->admin_token, model, "production", body, 10);
    json_int_t gen = it_jint(r->json, "generation");

    if (!pc_all_in_sync(r->json))
        fail_msg("?wait=10 returned before nginx acknowledged: %s", r->body);
    wait_reloaded(old, nold);
    it_resp_free(s, &r);
    return gen;
}

static void expect_file_has(const char *path, const char *text)
{
    char *got = it_read_file(path, NULL);

    if (got == NULL || strstr(got, text) == NULL)
        fail_msg("%s should contain:\n%s\nit holds:\n%s", path, text, got ? got : "(no file)");
    free(got);
}

/*
 * While gateway gw keeps failing, read `path` between two attempts (an
 * attempt puts the candidate in place while `nginx -t` runs, then restores
 * the old bytes): the row's attempts and next_attempt_at are the same
 * before and after the read, and the next attempt is not yet due.
 */
static char *read_between_attempts(struct mg_server *s, const char *gw, const char *path)
{
    int64_t deadline = it_deadline(15000);

    for (;;) {
        struct it_resp *a = pc_gateway_get(s, gw), *b;
        json_t *da = pc_gw_delivery(a->json, "fraud", "production"), *db;
        const char *next = json_string_value(json_object_get(da, "next_attempt_at"));
        char *text = NULL;

        if (next != NULL && strcmp(it_jstr(da, "state"), "failing") == 0 &&
            it_wall_now_ms() + 30 < it_wall_ms_of(next)) {
            text = it_read_file(path, NULL);
            b = pc_gateway_get(s, gw);
            db = pc_gw_delivery(b->json, "fraud", "production");
            if (it_jint(da, "attempts") == it_jint(db, "attempts") &&
                json_equal(json_object_get(da, "next_attempt_at"),
                           json_object_get(db, "next_attempt_at")) &&
                it_wall_now_ms() < it_wall_ms_of(next)) {
                it_resp_free(s, &a);
                it_resp_free(s, &b);
                return text;
            }
            it_resp_free(s, &b);
            free(text);
        }
        it_resp_free(s, &a);
        if (it_now_ms() > deadline)
            fail_msg("found no quiet moment between two failed deliveries of %s", gw);
        it_pause_ms(5);
    }
}

static int setup(void **state)
{
    char log[IT_PATH_MAX], path[IT_PATH_MAX], body[2048], tmpl[IT_PATH_MAX];
    pid_t old[MAX_PIDS];
    size_t nold;

    it_mkdtemp(dir, "nginx");
    port = it_free_port();
    it_fmt(conf, sizeof(conf), "%s/nginx.conf", dir);
    it_fmt(inc, sizeof(inc), "%s/inc/fraud_production.conf", dir);
    it_fmt(site_inc, sizeof(site_inc), "%s/site/fraud_production.conf", dir);
    it_fmt(url, sizeof(url), "http://127.0.0.1:%d/", port);
    it_fmt(eu_url, sizeof(eu_url), "http://127.0.0.1:%d/eu", port);
    it_fmt(health_url, sizeof(health_url), "http://127.0.0.1:%d/healthz", port);
    if (mkdir(it_fmt(path, sizeof(path), "%s/inc", dir), 0755) != 0 ||
        mkdir(it_fmt(path, sizeof(path), "%s/site", dir), 0755) != 0)
        fail_msg("mkdir in %s: %s", dir, strerror(errno));
    /* What an operator starts with, before modelgate manages the files. */
    it_write_file(inc, "split_clients \"${request_id}\" $modelgate_fraud_production {\n"
                       "    * fraud_v3;\n}\n");
    it_write_file(it_fmt(path, sizeof(path), "%s/inc/fraud.eu-west_production.conf", dir),
                  "split_clients \"${request_id}\" $modelgate_fraud_1eu_0west_production {\n"
                  "    * fraud.eu-west_v3;\n}\n");
    it_write_file(site_inc, "location = /healthz { return 200 \"ok\"; }\n");
    write_site("");
    it_fmt(log, sizeof(log), "%s/nginx.log", dir);
    it_proc_spawn(&ngx, "nginx",
                  (const char *const[]){PC_NGINX, "-p", dir, "-c", conf, "-e", "stderr", NULL},
                  log);
    it_proc_wait_port(&ngx, port);

    srv = it_server_start(PC_SERVER_ARGS);
    it_upload(srv, "nginx test model bytes", 22, art);
    it_model_create(srv, srv->admin_token, "fraud");
    it_model_create(srv, srv->admin_token, "fraud.eu-west");
    for (int i = 1; i <= 3; i++) {
        it_version_create(srv, srv->admin_token, "fraud", art, NULL);
        it_version_create(srv, srv->admin_token, "fraud.eu-west", art, NULL);
    }
    it_alias_set(srv, srv->admin_token, "fraud", "production", "{\"version\":1}");
    /* A new gateway gets the current state at once: v1 everywhere. */
    nold = workers(old);
    pc_gateway_put(srv, "ngx",
                   gateway_config(it_fmt(tmpl, sizeof(tmpl), "%s/inc/{model}_{alias}.conf", dir),
                                  body, sizeof(body)));
    pc_wait_delivery(srv, "ngx", "fraud", "production", 0, "in_sync", 15000);
    wait_reloaded(old, nold);
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

static void test_include_and_reload_change_the_split(void **state)
{
    struct mg_server *s = *state;
    int counts[3];
    char want[256];
    json_int_t gen;

    /* The state the gateway got when it was created. */
    expect_file_has(inc, "split_clients \"${request_id}\" $modelgate_fraud_production {\n"
                         "    * fraud_v1;\n}\n");
    pc_count(url, 100, 3, NAMES, counts);
    pc_expect_split(100, 3, NAMES, counts, 100, 0, 0);

    gen = change(s, "fraud",
                 "{\"routes\":[{\"version\":1,\"weight\":10},{\"version\":2,\"weight\":90}]}");
    expect_file_has(inc, it_fmt(want, sizeof(want),
                                "# Managed by modelgate: model fraud, alias production, "
                                "generation %lld. Do not edit.\n",
                                (long long)gen));
    expect_file_has(inc, "split_clients \"${request_id}\" $modelgate_fraud_production {\n"
                         "    10% fraud_v1;\n    * fraud_v2;\n}\n");
    pc_count(url, 1000, 3, NAMES, counts);
    pc_expect_split(1000, 3, NAMES, counts, 10, 90, 0);

    change(s, "fraud",
           "{\"routes\":[{\"version\":1,\"weight\":10},{\"version\":2,\"weight\":15},"
           "{\"version\":3,\"weight\":75}]}");
    expect_file_has(inc, "    10% fraud_v1;\n    15% fraud_v2;\n    * fraud_v3;\n}\n");
    pc_count(url, 1000, 3, NAMES, counts);
    pc_expect_split(1000, 3, NAMES, counts, 10, 15, 75);

    /* A model name with '.' and '-': the variable the site config names. */
    pc_count(eu_url, 50, 3, NAMES, counts);
    pc_expect_split(50, 3, NAMES, counts, 0, 0, 100);
    change(s, "fraud.eu-west", "{\"version\":2}");
    expect_file_has(it_fmt(want, sizeof(want), "%s/inc/fraud.eu-west_production.conf", dir),
                    "split_clients \"${request_id}\" $modelgate_fraud_1eu_0west_production {\n"
                    "    * fraud.eu-west_v2;\n}\n");
    pc_count(eu_url, 100, 3, NAMES, counts);
    pc_expect_split(100, 3, NAMES, counts, 0, 100, 0);
}

static void test_failed_config_test_keeps_the_old_file(void **state)
{
    struct mg_server *s = *state;
    pid_t before[MAX_PIDS], after[MAX_PIDS];
    size_t nbefore, nafter, len0 = 0;
    char *old = it_read_file(inc, &len0), *now, tmp[IT_PATH_MAX];
    struct it_resp *r;
    json_t *d;
    const char *err;
    json_int_t gen;
    int counts[3];

    assert_non_null(old);
    /* Someone breaks the site config; every candidate include now fails. */
    write_site("    bogus_directive on;\n");
    nbefore = workers(before);
    gen =
        it_alias_set(s, s->admin_token, "fraud", "production",
                     "{\"routes\":[{\"version\":1,\"weight\":90},{\"version\":2,\"weight\":10}]}");
    r = pc_wait_delivery(s, "ngx", "fraud", "production", gen, "failing", 15000);
    d = pc_gw_delivery(r->json, "fraud", "production");
    err = it_jstr(d, "last_error");
    if (strstr(err, "config test failed") == NULL || strstr(err, "[emerg]") == NULL ||
        strstr(err, "bogus_directive") == NULL)
        fail_msg("last_error should carry nginx's own complaint: %s", err);
    r = it_alias_get(s, s->admin_token, "fraud", "production");
    assert_string_equal(it_jstr(pc_alias_delivery(r->json, "ngx"), "state"), "failing");

    /* The previous include, byte for byte; no temporary left; no reload. */
    now = read_between_attempts(s, "ngx", inc);
    if (now == NULL || strlen(now) != len0 || memcmp(now, old, len0) != 0)
        fail_msg("the include file changed although nginx -t failed:\nbefore:\n%s\nafter:\n%s", old,
                 now ? now : "(gone)");
    free(now);
    assert_false(access(it_fmt(tmp, sizeof(tmp), "%s.modelgate-tmp", inc), F_OK) == 0);
    nafter = workers(after);
    assert_int_equal(nafter, nbefore);
    for (size_t i = 0; i < nafter; i++)
        assert_int_equal(after[i], before[i]);
    /* nginx still serves the last good split (10/15/75). */
    pc_count(url, 1000, 3, NAMES, counts);
    pc_expect_split(1000, 3, NAMES, counts, 10, 15, 75);

    /* The site is repaired: the retries converge on the newest generation. */
    write_site("");
    pc_wait_delivery(s, "ngx", "fraud", "production", gen, "in_sync", 15000);
    wait_reloaded(before, nbefore);
    expect_file_has(inc, "    90% fraud_v1;\n    * fraud_v2;\n}\n");
    pc_count(url, 1000, 3, NAMES, counts);
    pc_expect_split(1000, 3, NAMES, counts, 90, 10, 0);
    free(old);
}

static void test_broken_file_template_keeps_the_old_file(void **state)
{
    struct mg_server *s = *state;
    size_t len0 = 0;
    char *old = it_read_file(site_inc, &len0), *now, tmpl[IT_PATH_MAX], body[2048];
    static const char *const ok[] = {"ok"};
    struct it_resp *r;
    const char *err;
    int counts[1];

    /* A second gateway whose file template points into the server block,
     * where split_clients is not allowed: nginx -t refuses every candidate. */
    assert_non_null(old);
    pc_gateway_put(s, "ngx-bad",
                   gateway_config(it_fmt(tmpl, sizeof(tmpl), "%s/site/{model}_{alias}.conf", dir),
                                  body, sizeof(body)));
    r = pc_wait_delivery(s, "ngx-bad", "fraud", "production", 0, "failing", 15000);
    err = it_jstr(pc_gw_delivery(r->json, "fraud", "production"), "last_error");
    if (strstr(err, "split_clients") == NULL || strstr(err, "not allowed here") == NULL)
        fail_msg("last_error should carry nginx's own complaint: %s", err);
    now = read_between_attempts(s, "ngx-bad", site_inc);
    if (now == NULL || strlen(now) != len0 || memcmp(now, old, len0) != 0)
        fail_msg("%s changed although nginx -t failed:\nbefore:\n%s\nafter:\n%s", site_inc, old,
                 now ? now : "(gone)");
    free(now);
    pc_count(health_url, 20, 1, ok, counts);
    assert_int_equal(counts[0], 20);
    /* The good gateway is still in sync. */
    r = pc_gateway_get(s, "ngx");
    assert_string_equal(it_jstr(pc_gw_delivery(r->json, "fraud", "production"), "state"),
                        "in_sync");
    pc_gateway_delete(s, "ngx-bad");
    free(old);
}

/* Poll / until every answer is `want` (each of 20 in a row), or fail. */
static bool serves_within(const char *want, int64_t timeout_ms)
{
    int64_t deadline = it_deadline(timeout_ms);
    const char *const names[] = {want, want[1] == '1' ? "v2" : "v1", "v3"};
    int counts[3];

    for (;;) {
        pc_count(url, 20, 3, names, counts);
        if (counts[0] == 20)
            return true;
        if (it_now_ms() > deadline)
            return false;
        it_pause_ms(10);
    }
}

/*
 * Deliveries to one nginx run concurrently (one worker per row). While
 * another gateway of the same nginx keeps failing, its rejected candidate
 * sits in the config for the length of its `nginx -t`; a reload issued
 * then makes nginx's master refuse the whole config and keep the old one,
 * yet `nginx -s reload` exits 0. Every change must be acknowledged in_sync
 * (M29: an unacknowledged one used to be passed over, so a run where none was
 * acknowledged passed too) and then be what nginx serves.
 */
static void test_acked_changes_are_served_beside_a_failing_gateway(void **state)
{
    static const char *const noisy[] = {"canary", "shadow", "beta", "gamma", "delta", "eps"};
    struct mg_server *s = *state;
    char tmpl[IT_PATH_MAX], body[2048], aliases[256] = "";
    size_t o = 0;
    int missed = 0, acked = 0;

    for (size_t i = 0; i < sizeof(noisy) / sizeof(noisy[0]); i++) {
        o += (size_t)snprintf(aliases + o, sizeof(aliases) - o, "%s\"%s\"", i ? "," : "", noisy[i]);
        it_alias_set(s, s->admin_token, "fraud", noisy[i], "{\"version\":3}");
    }
    gateway_config(it_fmt(tmpl, sizeof(tmpl), "%s/site/{model}_{alias}.conf", dir), body,
                   sizeof(body));
    /* Same command and file shape, other aliases, a file that cannot load. */
    {
        char *p = strstr(body, "\"aliases\":[\"production\"]");
        char fixed[2304];

        assert_non_null(p);
        *p = '\0';
        pc_gateway_put(s, "ngx-noisy",
                       it_fmt(fixed, sizeof(fixed), "%s\"aliases\":[%s]}", body, aliases));
    }
    pc_wait_delivery(s, "ngx-noisy", "fraud", "canary", 0, "failing", 15000);

    for (int i = 0; i < 30 && missed == 0; i++) {
        const char *v = i % 2 ? "v1" : "v2";
        struct it_resp *r = it_alias_put(s, s->admin_token, "fraud", "production",
                                         i % 2 ? "{\"version\":1}" : "{\"version\":2}", 20);

        if (!pc_all_in_sync(r->json)) {
            char *dump = json_dumps(r->json, JSON_COMPACT);

            print_error("change %d was not acknowledged in_sync within 20 s: %s\n", i + 1,
                        dump ? dump : r->body);
            free(dump);
            fail_msg("change %d of 30 to production was not acknowledged (after %d were)", i + 1,
                     acked);
        }
        acked++;
        if (!serves_within(v, 3000)) {
            print_error("change %d: the delivery to nginx is in_sync at generation %lld, but "
                        "nginx still serves the previous version 3 s later\n",
                        i + 1, (long long)it_jint(r->json, "generation"));
            {
                char path[IT_PATH_MAX];
                char *log = it_read_file(it_fmt(path, sizeof(path), "%s/error.log", dir), NULL);
                size_t n = log ? strlen(log) : 0;

                print_error("nginx's error log ends:\n%s\n",
                            log ? log + (n > 1500 ? n - 1500 : 0) : "");
                free(log);
            }
            missed++;
        }
        it_resp_free(s, &r);
    }
    pc_gateway_delete(s, "ngx-noisy");
    assert_int_equal(missed, 0);
    assert_int_equal(acked, 30);
}

static void test_nginx_config_validation(void **state)
{
    static const char *const bad[][2] = {
        {"{\"kind\":\"nginx\",\"file\":\"relative/{model}.conf\",\"upstream\":\"u{version}\"}",
         "file"},
        {"{\"kind\":\"nginx\",\"file\":\"/etc/nginx/../x/{model}.conf\","
         "\"upstream\":\"u{version}\"}",
         "file"},
        {"{\"kind\":\"nginx\",\"file\":\"/tmp/{model}.conf\",\"upstream\":\"u\"}", "upstream"},
        {"{\"kind\":\"nginx\",\"file\":\"/tmp/{model}.conf\",\"upstream\":\"u{version}; }\"}",
         "upstream"},
        {"{\"kind\":\"nginx\",\"file\":\"/tmp/{model}.conf\",\"upstream\":\"$u{version}\"}",
         "upstream"},
        {"{\"kind\":\"nginx\",\"file\":\"/tmp/{model}.conf\",\"upstream\":\"u{version}\","
         "\"test_command\":\"nginx -t\"}",
         "test_command"},
        {"{\"kind\":\"nginx\",\"file\":\"/tmp/{model}.conf\",\"upstream\":\"u{version}\","
         "\"reload_command\":[]}",
         "reload_command"},
        {"{\"kind\":\"nginx\",\"file\":\"/tmp/{nope}.conf\",\"upstream\":\"u{version}\"}", "file"},
        {"{\"kind\":\"nginx\",\"file\":\"/tmp/{model}.conf\",\"upstream\":\"u{version}\","
         "\"host\":\"a b\"}",
         "host"},
    };
    struct mg_server *s = *state;
    struct it_resp *r;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        r = it_jreq(s, "PUT", "/api/v1/gateways/ngx-invalid", s->admin_token, bad[i][0]);
        it_expect_error_field(s, r, 400, "invalid_argument", bad[i][1]);
        it_resp_free(s, &r);
    }
    /* Replicas on one PostgreSQL database: an nginx gateway needs the host whose replica
     * writes its file; without one it is refused, naming "host". */
    r = it_jreq(s, "PUT", "/api/v1/gateways/ngx-invalid", s->admin_token,
                "{\"kind\":\"nginx\",\"file\":\"/tmp/{model}.conf\",\"upstream\":\"u{version}\"}");
    if (it_on_postgres()) {
        it_expect_error_field(s, r, 400, "invalid_argument", "host");
    } else {
        it_expect_status(s, r, 201);
        it_resp_free(s, &r);
        r = it_request(s, "DELETE", "/api/v1/gateways/ngx-invalid", s->admin_token, NULL, NULL, 0);
        it_expect_status(s, r, 204);
    }
    it_resp_free(s, &r);
    r = it_get(s, "/api/v1/gateways/ngx-invalid", s->admin_token);
    it_expect_error(s, r, 404, "not_found");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_include_and_reload_change_the_split, it_test_teardown),
        cmocka_unit_test_teardown(test_failed_config_test_keeps_the_old_file, it_test_teardown),
        cmocka_unit_test_teardown(test_broken_file_template_keeps_the_old_file, it_test_teardown),
        cmocka_unit_test_teardown(test_nginx_config_validation, it_test_teardown),
        cmocka_unit_test_teardown(test_acked_changes_are_served_beside_a_failing_gateway,
                                  it_test_teardown),
    };

    if (access(PC_NGINX, X_OK) != 0) {
        print_error("%s is missing: install the Debian package nginx-light\n", PC_NGINX);
        return 1;
    }
    return it_main_result(cmocka_run_group_tests(tests, setup, teardown));
}
