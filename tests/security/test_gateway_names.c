/*
 * test_gateway_names.c - M18 finding 0 (High): names a gateway derives from (model, alias)
 * are one-to-one. The nginx include mapped every character outside [a-z0-9] to '_', so
 * fraud-x/production, fraud.x/production and fraud/x-production all defined
 * $modelgate_fraud_x_production and the include read last won: an unprotected alias of an
 * attacker's model took a protected alias's traffic. Now each gets its own variable, and real
 * requests through a real nginx reach each alias's own upstream. A template that would still
 * make two aliases share a name is refused with 409 naming the holder, nothing changed.
 */
#include "tests/integration/harness.h"
#include "tests/integration/sys.h"
#include "tests/integration/api.h"
#include "tests/integration/push_common.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static struct mg_server *srv;
static struct it_proc ngx;
static char dir[IT_PATH_MAX], conf[IT_PATH_MAX];
static int port;

/* (model, alias, the variable it must get, the location that proxies to it) */
static const struct {
    const char *model, *alias, *var, *loc;
} cases[] = {
    {"fraud-x", "production", "modelgate_fraud_0x_production", "/a"},
    {"fraud.x", "production", "modelgate_fraud_1x_production", "/b"},
    {"fraud", "x-production", "modelgate_fraud_x_0production", "/c"},
    {"fraud_x", "production", "modelgate_fraud_2x_production", "/d"},
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

static void write_conf(void)
{
    char text[16384], part[2048];
    size_t o = 0;
    const char *user = getuid() == 0 ? "user root;\n" : "";

    o += (size_t)snprintf(text + o, sizeof(text) - o,
                          "daemon off;\n%sworker_processes 1;\npid %s/nginx.pid;\n"
                          "error_log %s/error.log;\nevents { worker_connections 64; }\n"
                          "http {\n    access_log off;\n"
                          "    client_body_temp_path %s/tb;\n    proxy_temp_path %s/tp;\n"
                          "    fastcgi_temp_path %s/tf;\n    uwsgi_temp_path %s/tu;\n"
                          "    scgi_temp_path %s/ts;\n    include %s/inc/*.conf;\n",
                          user, dir, dir, dir, dir, dir, dir, dir, dir);
    for (size_t i = 0; i < NCASES; i++) {
        /* each model's v1 upstream answers with the model's name */
        snprintf(part, sizeof(part),
                 "    upstream %s_v1 { server unix:%s/u%zu.sock; }\n"
                 "    server { listen unix:%s/u%zu.sock; location / { return 200 \"%s\"; } }\n",
                 cases[i].model, dir, i, dir, i, cases[i].model);
        o += (size_t)snprintf(text + o, sizeof(text) - o, "%s", part);
    }
    o += (size_t)snprintf(text + o, sizeof(text) - o,
                          "    server {\n        listen 127.0.0.1:%d;\n", port);
    for (size_t i = 0; i < NCASES; i++)
        o += (size_t)snprintf(text + o, sizeof(text) - o,
                              "        location %s { proxy_pass http://$%s; }\n", cases[i].loc,
                              cases[i].var);
    snprintf(text + o, sizeof(text) - o, "    }\n}\n");
    it_write_file(conf, text);
}

static int setup(void **state)
{
    char path[IT_PATH_MAX], log[IT_PATH_MAX], body[2048], art[IT_DIGEST_LEN + 1];
    struct it_resp *r;

    if (access(PC_NGINX, X_OK) != 0) {
        print_error("%s is missing: install the Debian package nginx-light\n", PC_NGINX);
        return it_require_all() ? -1 : 0;
    }
    it_mkdtemp(dir, "gwnames");
    port = it_free_port();
    it_fmt(conf, sizeof(conf), "%s/nginx.conf", dir);
    if (mkdir(it_fmt(path, sizeof(path), "%s/inc", dir), 0755) != 0)
        fail_msg("mkdir: %s", strerror(errno));
    /* what the operator starts with: each variable defined, pointing nowhere useful */
    for (size_t i = 0; i < NCASES; i++) {
        char text[256];

        it_fmt(path, sizeof(path), "%s/inc/%s_%s.conf", dir, cases[i].model, cases[i].alias);
        it_write_file(path, it_fmt(text, sizeof(text),
                                   "split_clients \"${request_id}\" $%s {\n    * %s_v1;\n}\n",
                                   cases[i].var, cases[0].model));
    }
    write_conf();
    it_fmt(log, sizeof(log), "%s/nginx.log", dir);
    it_proc_spawn(&ngx, "nginx",
                  (const char *const[]){PC_NGINX, "-p", dir, "-c", conf, "-e", "stderr", NULL},
                  log);
    it_proc_wait_port(&ngx, port);

    srv = it_server_start(PC_SERVER_ARGS);
    r = it_upload(srv, "gateway names", 13, art);
    it_resp_free(srv, &r);
    for (size_t i = 0; i < NCASES; i++) {
        r = it_jreq_v(srv, "POST", "/api/v1/models", srv->admin_token,
                      json_pack("{ss}", "name", cases[i].model));
        it_resp_free(srv, &r);
        it_version_create(srv, srv->admin_token, cases[i].model, art, NULL);
    }
    pc_gateway_put(
        srv, "ngx",
        it_fmt(body, sizeof(body),
               "{\"kind\":\"nginx\",\"file\":\"%s/inc/{model}_{alias}.conf\","
               "\"upstream\":\"{model}_v{version}\","
               "\"test_command\":[\"%s\",\"-t\",\"-q\",\"-p\",\"%s\",\"-c\",\"%s\",\"-e\","
               "\"stderr\"],"
               "\"reload_command\":[\"%s\",\"-s\",\"reload\",\"-p\",\"%s\",\"-c\",\"%s\",\"-e\","
               "\"stderr\"]}",
               dir, PC_NGINX, dir, conf, PC_NGINX, dir, conf));
    *state = srv;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (srv == NULL)
        return 0;
    it_server_free(&srv);
    it_proc_stop(&ngx);
    it_rmtree(dir);
    return 0;
}

/* GET loc through nginx; the body (malloc'd). */
static char *through_nginx(const char *loc)
{
    char cmd[IT_PATH_MAX + 128], path[IT_PATH_MAX];
    size_t len;

    it_fmt(path, sizeof(path), "%s/out.txt", dir);
    snprintf(cmd, sizeof(cmd), "curl -s -o '%s' http://127.0.0.1:%d%s", path, port, loc);
    if (system(cmd) != 0)
        fail_msg("curl %s failed", loc);
    return it_read_file(path, &len);
}

static void test_each_alias_reaches_its_own_upstream(void **state)
{
    struct it_resp *r;

    (void)state;
    if (srv == NULL)
        it_skip("nginx is missing");
    for (size_t i = 0; i < NCASES; i++) {
        char path[256];

        snprintf(path, sizeof(path), "/api/v1/models/%s/aliases/%s?wait=20", cases[i].model,
                 cases[i].alias);
        r = it_jreq(srv, "PUT", path, srv->admin_token, "{\"version\":1}");
        it_expect_status(srv, r, 200);
        if (!pc_all_in_sync(r->json))
            fail_msg("%s/%s not applied by nginx: %s", cases[i].model, cases[i].alias, r->body);
        /* the alias shows its names on each gateway */
        {
            json_t *gn = json_object_get(json_object_get(r->json, "gateway_names"), "ngx");
            char want[128];

            snprintf(want, sizeof(want), "\"%s\"", cases[i].var);
            if (!json_is_array(gn) || strstr(r->body, want) == NULL)
                fail_msg("%s/%s: gateway_names lacks %s: %s", cases[i].model, cases[i].alias,
                         cases[i].var, r->body);
        }
        it_resp_free(srv, &r);
    }
    for (size_t i = 0; i < NCASES; i++) {
        char file[IT_PATH_MAX], *text = NULL, *got;
        size_t len;

        /* the include defines this alias's own variable... */
        text = it_read_file(
            it_fmt(file, sizeof(file), "%s/inc/%s_%s.conf", dir, cases[i].model, cases[i].alias),
            &len);
        if (strstr(text, cases[i].var) == NULL)
            fail_msg("%s defines no $%s:\n%s", file, cases[i].var, text);
        free(text);
        /* ...and real traffic for it reaches its own model */
        for (int k = 0; k < 5; k++) {
            got = through_nginx(cases[i].loc);
            if (strcmp(got, cases[i].model) != 0)
                fail_msg("GET %s (for %s/%s) reached '%s'", cases[i].loc, cases[i].model,
                         cases[i].alias, got);
            free(got);
        }
    }
}

/* A template that maps two aliases onto one name: the second is refused, naming the first. */
static void test_template_collision_refused(void **state)
{
    struct it_resp *r;
    char body[512];

    (void)state;
    if (srv == NULL)
        it_skip("nginx is missing");
    it_model_create(srv, srv->admin_token, "ab");
    it_model_create(srv, srv->admin_token, "a");
    {
        char a2[IT_DIGEST_LEN + 1];

        r = it_upload(srv, "collide", 7, a2);
        it_resp_free(srv, &r);
        it_version_create(srv, srv->admin_token, "ab", a2, NULL);
        it_version_create(srv, srv->admin_token, "a", a2, NULL);
    }
    /* nothing listens there: deliveries fail, but names are claimed when the alias changes */
    pc_gateway_put(srv, "hap-tmpl",
                   it_fmt(body, sizeof(body),
                          "{\"kind\":\"haproxy\",\"address\":\"127.0.0.1:%d\","
                          "\"backend\":\"be_{model}{alias}\",\"server\":\"v{version}\","
                          "\"models\":[\"ab\",\"a\"]}",
                          it_free_port()));
    r = it_jreq(srv, "PUT", "/api/v1/models/ab/aliases/c", srv->admin_token, "{\"version\":1}");
    it_expect_status(srv, r, 200);
    it_resp_free(srv, &r);
    r = it_jreq(srv, "PUT", "/api/v1/models/a/aliases/bc", srv->admin_token, "{\"version\":1}");
    it_expect_error(srv, r, 409, "conflict");
    if (strstr(r->body, "be_abc") == NULL || strstr(r->body, "'ab'") == NULL ||
        strstr(r->body, "'c'") == NULL)
        fail_msg("the 409 does not name the name and its holder: %s", r->body);
    it_resp_free(srv, &r);
    r = it_get(srv, "/api/v1/models/a/aliases/bc", srv->admin_token);
    it_expect_error(srv, r, 404, "not_found"); /* nothing changed */
    it_resp_free(srv, &r);
    /* the holder itself may change its alias again */
    r = it_jreq(srv, "PUT", "/api/v1/models/ab/aliases/c", srv->admin_token, "{\"version\":1}");
    it_expect_status(srv, r, 200);
    it_resp_free(srv, &r);
    pc_gateway_delete(srv, "hap-tmpl");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_alias_reaches_its_own_upstream),
        cmocka_unit_test(test_template_collision_refused),
    };

    return it_main_result(cmocka_run_group_tests(tests, setup, teardown));
}
