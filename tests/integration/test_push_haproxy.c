/*
 * test_push_haproxy.c - milestone M4 with a real HAProxy on loopback: a
 * backend of three servers (v1, v2, v3; each a tiny HAProxy frontend that
 * answers its own name) and the runtime API (stats socket, level admin) on
 * TCP and on a unix socket. A promotion with steps 10/50/100 moves the
 * weights HAProxy reports (`get weight`); a held step splits 1000 requests
 * within 5 points of its weights; rollback sends all traffic back to the
 * last-known-good version; HAProxy's own errors become the delivery's
 * last_error.
 */
#include "harness.h"
#include "sys.h"
#include "api.h"
#include "push_common.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const NAMES[] = {"v1", "v2", "v3"};

static struct mg_server *srv;
static struct it_proc hap;
static char dir[IT_PATH_MAX];
static char art[IT_DIGEST_LEN + 1];
static char front_url[64];
static int stats_port;

static void write_config(int front_port)
{
    char path[IT_PATH_MAX], cfg[8192];

    it_fmt(cfg, sizeof(cfg),
           "global\n"
           "    stats socket ipv4@127.0.0.1:%d level admin\n"
           "    stats socket %s/admin.sock level admin\n"
           "    nbthread 1\n"
           "defaults\n"
           "    mode http\n"
           "    timeout connect 2s\n"
           "    timeout client 10s\n"
           "    timeout server 10s\n"
           "frontend fe\n"
           "    bind 127.0.0.1:%d\n"
           "    default_backend be_fraud_production\n"
           "backend be_fraud_production\n"
           "    balance roundrobin\n"
           /* README "Routing strategies": header pinning through a map */
           "    http-request set-var(txn.mg_pin) req.hdr(x-tenant),regsub(^,x-tenant=),"
           "map(%s/fraud_production.map) if !{ var(txn.mg_pin) -m found }\n"
           "    use-server %%[var(txn.mg_pin)] if { var(txn.mg_pin) -m found }\n"
           "    server v1 unix@%s/v1.sock weight 1\n"
           "    server v2 unix@%s/v2.sock weight 1\n"
           "    server v3 unix@%s/v3.sock weight 1\n"
           "frontend answer_v1\n"
           "    bind unix@%s/v1.sock\n"
           "    http-request return status 200 content-type text/plain string v1\n"
           "frontend answer_v2\n"
           "    bind unix@%s/v2.sock\n"
           "    http-request return status 200 content-type text/plain string v2\n"
           "frontend answer_v3\n"
           "    bind unix@%s/v3.sock\n"
           "    http-request return status 200 content-type text/plain string v3\n",
           stats_port, dir, front_port, dir, dir, dir, dir, dir, dir, dir);
    it_write_file(it_fmt(path, sizeof(path), "%s/haproxy.cfg", dir), cfg);
    it_write_file(it_fmt(path, sizeof(path), "%s/fraud_production.map", dir), "");
}

static int setup(void **state)
{
    char cfg[IT_PATH_MAX], log[IT_PATH_MAX];
    int front_port;

    it_mkdtemp(dir, "haproxy");
    stats_port = it_free_port();
    front_port = it_free_port();
    write_config(front_port);
    it_fmt(cfg, sizeof(cfg), "%s/haproxy.cfg", dir);
    it_fmt(log, sizeof(log), "%s/haproxy.log", dir);
    it_proc_spawn(&hap, "haproxy", (const char *const[]){PC_HAPROXY, "-db", "-f", cfg, NULL}, log);
    it_proc_wait_port(&hap, stats_port);
    it_proc_wait_port(&hap, front_port);
    it_fmt(front_url, sizeof(front_url), "http://127.0.0.1:%d/", front_port);

    srv = it_server_start(PC_SERVER_ARGS);
    it_upload(srv, "haproxy test model bytes", 24, art);
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
    it_proc_stop(&hap);
    it_rmtree(dir);
    *state = NULL;
    return 0;
}

static int weight(const char *server)
{
    return pc_haproxy_weight(stats_port, "be_fraud_production", server);
}

#define expect_weights(w1, w2, w3) expect_weights_at(w1, w2, w3, __FILE__, __LINE__)

static void expect_weights_at(int w1, int w2, int w3, const char *file, int line)
{
    int g1 = weight("v1"), g2 = weight("v2"), g3 = weight("v3");

    if (g1 == w1 && g2 == w2 && g3 == w3)
        return;
    print_error("HAProxy weights v1=%d v2=%d v3=%d, want %d %d %d\n", g1, g2, g3, w1, w2, w3);
    _fail(file, line);
}

static void split(int n, int *counts)
{
    pc_count(front_url, n, 3, NAMES, counts);
}

static void test_promotion_steps_move_haproxy_weights(void **state)
{
    struct mg_server *s = *state;
    struct it_resp *r;
    int counts[3], seen[64][2], nseen = 0, step = 0;
    int64_t deadline;
    char id[64];
    static const int want[3][2] = {{90, 10}, {50, 50}, {0, 100}};

    it_model_create(s, s->admin_token, "fraud");
    for (int i = 1; i <= 3; i++)
        assert_int_equal(it_version_create(s, s->admin_token, "fraud", art, NULL), i);
    pc_gateway_put(s, "hap",
                   it_fmt((char[512]){0}, 512,
                          "{\"kind\":\"haproxy\",\"address\":\"127.0.0.1:%d\","
                          "\"backend\":\"be_{model}_{alias}\",\"server\":\"v{version}\","
                          "\"models\":[\"fraud\"],\"aliases\":[\"production\"]}",
                          stats_port));

    /* v1 takes everything; the servers not routed go to 0. */
    r = it_alias_put(s, s->admin_token, "fraud", "production", "{\"version\":1}", 5);
    if (!pc_all_in_sync(r->json))
        fail_msg("?wait=5: not in sync: %s", r->body);
    expect_weights(100, 0, 0);
    split(200, counts);
    pc_expect_split(200, 3, NAMES, counts, 100, 0, 0);
    r = pc_gateway_get(s, "hap");
    assert_string_equal(it_jstr(pc_gw_delivery(r->json, "fraud", "production"), "state"),
                        "in_sync");

    /* A promotion with a timed rollout: HAProxy follows every step. */
    r = it_jreq(s, "PUT", "/api/v1/models/fraud/policies/production", s->admin_token,
                "{\"rollout\":{\"steps\":[10,50,100],\"bake_seconds\":1,\"auto_advance\":true}}");
    it_expect_status(s, r, 200);
    r = it_jreq_v(s, "POST", "/api/v1/promotions", s->admin_token,
                  json_pack("{ss si ss ss}", "model", "fraud", "version", 2, "alias", "production",
                            "reason", "haproxy steps"));
    it_expect_status(s, r, 201);
    snprintf(id, sizeof(id), "%s", it_jstr(r->json, "id"));
    deadline = it_deadline(20000);
    while (step < 3) {
        int w1 = weight("v1"), w2 = weight("v2");

        if (weight("v3") != 0)
            fail_msg("v3 is not part of this promotion but has weight %d", weight("v3"));
        if (nseen == 0 || seen[nseen - 1][0] != w1 || seen[nseen - 1][1] != w2) {
            if (nseen < 64) {
                seen[nseen][0] = w1;
                seen[nseen][1] = w2;
                nseen++;
            }
        }
        if (w1 == want[step][0] && w2 == want[step][1])
            step++;
        if (step < 3 && it_now_ms() > deadline) {
            for (int i = 0; i < nseen; i++)
                print_error("seen v1=%d v2=%d\n", seen[i][0], seen[i][1]);
            pc_dump_server_notes(s, 12);
            fail_msg("HAProxy went through %d of the steps 90/10, 50/50, 0/100", step);
        }
        it_pause_ms(5);
    }
    deadline = it_deadline(10000);
    for (;;) {
        r = it_promotion_get(s, s->admin_token, id);
        if (strcmp(it_jstr(r->json, "state"), "succeeded") == 0)
            break;
        if (it_now_ms() > deadline)
            fail_msg("the promotion did not succeed: %s", r->body);
        it_resp_free(s, &r);
        it_pause_ms(20);
    }
    expect_weights(0, 100, 0);
    split(200, counts);
    pc_expect_split(200, 3, NAMES, counts, 0, 100, 0);
}

static void test_held_step_split_and_rollback(void **state)
{
    struct mg_server *s = *state;
    struct it_resp *r;
    int counts[3];
    int64_t stepped;
    char id[64];

    r = it_jreq(s, "PUT", "/api/v1/models/fraud/policies/production", s->admin_token,
                "{\"rollout\":{\"steps\":[10,50,100],\"bake_seconds\":1,\"auto_advance\":false}}");
    it_expect_status(s, r, 200);

    /* Step 1 (10%): held until advanced. */
    r = it_jreq_v(s, "POST", "/api/v1/promotions?wait=5", s->admin_token,
                  json_pack("{ss si ss ss}", "model", "fraud", "version", 3, "alias", "production",
                            "reason", "haproxy split"));
    it_expect_status(s, r, 201);
    stepped = it_now_ms();
    snprintf(id, sizeof(id), "%s", it_jstr(r->json, "id"));
    assert_string_equal(it_jstr(r->json, "state"), "rolling_out");
    assert_int_equal(it_jint(it_jobj(r->json, "rollout"), "weight"), 10);
    r = it_alias_get(s, s->admin_token, "fraud", "production");
    if (!pc_all_in_sync(r->json))
        fail_msg("promotions?wait=5 returned before the gateways acknowledged: %s", r->body);
    expect_weights(0, 90, 10);
    split(1000, counts);
    pc_expect_split(1000, 3, NAMES, counts, 0, 90, 10);

    /* auto_advance false: the step holds past its bake time. */
    while (it_now_ms() < stepped + 1500)
        it_pause_ms(50);
    r = it_promotion_get(s, s->admin_token, id);
    assert_string_equal(it_jstr(r->json, "state"), "rolling_out");
    assert_int_equal(it_jint(it_jobj(r->json, "rollout"), "step_index"), 0);
    expect_weights(0, 90, 10);

    /* Step 2 (50%) on request. */
    r = it_request(s, "POST",
                   it_fmt((char[128]){0}, 128, "/api/v1/promotions/%s/advance?wait=5", id),
                   s->admin_token, NULL, NULL, 0);
    it_expect_status(s, r, 200);
    assert_int_equal(it_jint(it_jobj(r->json, "rollout"), "weight"), 50);
    expect_weights(0, 50, 50);
    /* HAProxy's weighted round robin keeps each server's position across a
     * weight change, so right after 90/10 -> 50/50 the server that gained
     * weight is picked more often for a while (about 440/560 over the first
     * 1000 requests, then exactly 500/500). 2000 requests measure the step,
     * not that transient. */
    split(2000, counts);
    pc_expect_split(2000, 3, NAMES, counts, 0, 50, 50);

    /* Rollback: everything back on the last-known-good version, v2. */
    r = it_jreq(s, "POST", "/api/v1/models/fraud/aliases/production/rollback?wait=5",
                s->admin_token, "{\"reason\":\"the canary misbehaves\"}");
    it_expect_status(s, r, 200);
    if (!pc_all_in_sync(r->json))
        fail_msg("rollback?wait=5 returned before the gateways acknowledged: %s", r->body);
    assert_int_equal(json_array_size(it_jarr(r->json, "routes")), 1);
    assert_int_equal(it_jint(json_array_get(it_jarr(r->json, "routes"), 0), "version"), 2);
    expect_weights(0, 100, 0);
    split(1000, counts);
    pc_expect_split(1000, 3, NAMES, counts, 0, 100, 0);
    r = it_promotion_get(s, s->admin_token, id);
    assert_string_equal(it_jstr(r->json, "state"), "rolled_back");
}

/* Wait until the gateway's staging delivery fails with text in last_error. */
static void expect_failing_with(struct mg_server *s, const char *gw, const char *text)
{
    struct it_resp *r = pc_wait_delivery(s, gw, "fraud", "staging", 0, "failing", 10000);
    const char *err = it_jstr(pc_gw_delivery(r->json, "fraud", "staging"), "last_error");

    if (strstr(err, text) == NULL)
        fail_msg("gateway %s: last_error '%s' should contain '%s'", gw, err, text);
}

static void test_runtime_api_errors_surface(void **state)
{
    struct mg_server *s = *state;
    struct it_resp *r;
    char body[512];

    /* The unix-socket runtime API, a server template HAProxy does not know. */
    pc_gateway_put(s, "hap-unix",
                   it_fmt(body, sizeof(body),
                          "{\"kind\":\"haproxy\",\"address\":\"unix:%s/admin.sock\","
                          "\"backend\":\"be_{model}_production\",\"server\":\"srv{version}\","
                          "\"models\":[\"fraud\"],\"aliases\":[\"staging\"]}",
                          dir));
    /* A backend HAProxy does not have. */
    pc_gateway_put(s, "hap-nobackend",
                   it_fmt(body, sizeof(body),
                          "{\"kind\":\"haproxy\",\"address\":\"127.0.0.1:%d\","
                          "\"backend\":\"be_{model}_{alias}\",\"server\":\"v{version}\","
                          "\"models\":[\"fraud\"],\"aliases\":[\"staging\"]}",
                          stats_port));
    /* Nothing listening. */
    pc_gateway_put(s, "hap-closed",
                   it_fmt(body, sizeof(body),
                          "{\"kind\":\"haproxy\",\"address\":\"127.0.0.1:%d\","
                          "\"backend\":\"be_{model}_{alias}\",\"server\":\"v{version}\","
                          "\"models\":[\"fraud\"],\"aliases\":[\"staging\"]}",
                          it_free_port()));
    it_alias_set(s, s->admin_token, "fraud", "staging", "{\"version\":1}");
    expect_failing_with(s, "hap-unix", "No such server");
    expect_failing_with(s, "hap-nobackend", "No such backend");
    expect_failing_with(s, "hap-closed", "connect");
    r = it_alias_get(s, s->admin_token, "fraud", "staging");
    assert_string_equal(it_jstr(pc_alias_delivery(r->json, "hap-unix"), "state"), "failing");
    /* Production is untouched by them. */
    expect_weights(0, 100, 0);

    /* Config validation. */
    r = it_jreq(s, "PUT", "/api/v1/gateways/hap-bad", s->admin_token,
                "{\"kind\":\"haproxy\",\"address\":\"nowhere\",\"backend\":\"b\","
                "\"server\":\"v{version}\"}");
    it_expect_error_field(s, r, 400, "invalid_argument", "address");
    r = it_jreq(s, "PUT", "/api/v1/gateways/hap-bad", s->admin_token,
                "{\"kind\":\"haproxy\",\"address\":\"127.0.0.1:1\",\"backend\":\"b\","
                "\"server\":\"v1\"}");
    it_expect_error_field(s, r, 400, "invalid_argument", "server");
    r = it_jreq(s, "PUT", "/api/v1/gateways/hap-bad", s->admin_token,
                "{\"kind\":\"haproxy\",\"address\":\"127.0.0.1:1\",\"backend\":\"b\\nshow info\","
                "\"server\":\"v{version}\"}");
    it_expect_error_field(s, r, 400, "invalid_argument", "backend");
    r = it_jreq(s, "PUT", "/api/v1/gateways/hap-bad", s->admin_token,
                "{\"kind\":\"haproxy\",\"address\":\"127.0.0.1:1\",\"backend\":\"be_{owner}\","
                "\"server\":\"v{version}\"}");
    it_expect_error_field(s, r, 400, "invalid_argument", "backend");

    pc_gateway_delete(s, "hap-unix");
    pc_gateway_delete(s, "hap-nobackend");
    pc_gateway_delete(s, "hap-closed");
}

/* M18 finding 9: a server name template that does not fit (a 63-character model twice) sent
 * uninitialised bytes to HAProxy. Now the delivery fails with a readable error and nothing is
 * sent: HAProxy's weights stay as they were. */
static void test_template_that_does_not_fit(void **state)
{
    struct mg_server *s = *state;
    static const char longm[] = "m23456789012345678901234567890123456789012345678901234567890123";
    char body[512];
    struct it_resp *r;
    const char *err;
    int before[3];

    for (int v = 1; v <= 3; v++) {
        char name[8];

        snprintf(name, sizeof(name), "v%d", v);
        before[v - 1] = pc_haproxy_weight(stats_port, "be_fraud_production", name);
    }
    it_model_create(s, s->admin_token, longm);
    it_version_create(s, s->admin_token, longm, art, NULL);
    pc_gateway_put(s, "hap-long",
                   it_fmt(body, sizeof(body),
                          "{\"kind\":\"haproxy\",\"address\":\"127.0.0.1:%d\","
                          "\"backend\":\"be_fraud_production\","
                          "\"server\":\"{model}_{model}_v{version}\",\"models\":[\"%s\"]}",
                          stats_port, longm));
    it_alias_set(s, s->admin_token, longm, "production", "{\"version\":1}");
    r = pc_wait_delivery(s, "hap-long", longm, "production", 0, "failing", 10000);
    err = it_jstr(pc_gw_delivery(r->json, longm, "production"), "last_error");
    if (strstr(err, "server template gives a name too long") == NULL ||
        strstr(err, "nothing was sent") == NULL)
        fail_msg("last_error '%s' is not the readable refusal", err);
    for (const char *p = err; *p; p++)
        if ((unsigned char)*p < 0x20 || (unsigned char)*p >= 0x7f)
            fail_msg("last_error holds byte 0x%02x", (unsigned char)*p);
    for (int v = 1; v <= 3; v++) {
        char name[8];

        snprintf(name, sizeof(name), "v%d", v);
        assert_int_equal(pc_haproxy_weight(stats_port, "be_fraud_production", name), before[v - 1]);
    }
    pc_gateway_delete(s, "hap-long");
}

/* HAProxy's own pid as `show info` reports it (a reload would start another process). */
static long haproxy_pid(void)
{
    char *info = pc_haproxy_cmd(stats_port, "show info\n"), *p = strstr(info, "\nPid: ");
    long pid = p ? strtol(p + 6, NULL, 10) : -1;

    free(info);
    return pid;
}

/* `show map` of the gateway's map: the entries, one "key value" per line. */
static void map_entries(char *out, size_t n)
{
    char cmd[IT_PATH_MAX + 32], *reply, *line, *save = NULL;
    size_t o = 0;

    reply = pc_haproxy_cmd(stats_port,
                           it_fmt(cmd, sizeof(cmd), "show map %s/fraud_production.map\n", dir));
    out[0] = '\0';
    for (line = strtok_r(reply, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        const char *sp = strchr(line, ' ');

        if (sp != NULL) /* "<ref> <key> <value>" */
            o += (size_t)snprintf(out + o, n - o, "%s%s", o ? "\n" : "", sp + 1);
    }
    free(reply);
}

/*
 * docs/contract.md "Routing strategies": header pinning through a map the runtime API changes, with
 * no reload (HAProxy's pid stays, the map file on disk stays empty); an alias with a shadow that
 * HAProxy serves is refused at the PUT, naming the gateway, and nothing changes; so are a
 * promotion whose rollout has a shadow phase, and a gateway without a map that would hear an
 * alias with match rules.
 */
static void test_header_pinning_through_the_runtime_api(void **state)
{
    struct mg_server *s = *state;
    struct it_resp *r;
    char body[1024], entries[512], path[IT_PATH_MAX], *disk;
    long pid = haproxy_pid();
    json_int_t gen;
    int counts[3];

    assert_int_equal(pid, hap.pid);
    r = it_request(s, "DELETE", "/api/v1/models/fraud/policies/production", s->admin_token, NULL,
                   NULL, 0);
    it_expect_status(s, r, 204);
    pc_gateway_put(s, "hap",
                   it_fmt(body, sizeof(body),
                          "{\"kind\":\"haproxy\",\"address\":\"127.0.0.1:%d\","
                          "\"backend\":\"be_{model}_{alias}\",\"server\":\"v{version}\","
                          "\"map\":\"%s/{model}_{alias}.map\",\"models\":[\"fraud\"],"
                          "\"aliases\":[\"production\"]}",
                          stats_port, dir));
    r = it_alias_put(s, s->admin_token, "fraud", "production",
                     "{\"version\":2,\"match\":[{\"header\":\"x-tenant\",\"value\":\"acme\","
                     "\"version\":3}]}",
                     5);
    if (!pc_all_in_sync(r->json))
        fail_msg("?wait=5: not in sync: %s", r->body);
    gen = it_jint(r->json, "generation");
    map_entries(entries, sizeof(entries));
    assert_string_equal(entries, "x-tenant=acme v3");
    /* v3 takes no weighted traffic, yet serves every pinned request */
    expect_weights(0, 100, 0);
    pc_count_h(front_url, "x-tenant: acme", 200, 3, NAMES, counts);
    pc_expect_split(200, 3, NAMES, counts, 0, 0, 100);
    split(200, counts);
    pc_expect_split(200, 3, NAMES, counts, 0, 100, 0);
    pc_count_h(front_url, "x-tenant: acme2", 100, 3, NAMES, counts);
    pc_expect_split(100, 3, NAMES, counts, 0, 100, 0);
    /* applied through the runtime API: no reload, nothing written to the map file */
    assert_int_equal(haproxy_pid(), pid);
    disk = it_read_file(it_fmt(path, sizeof(path), "%s/fraud_production.map", dir), NULL);
    assert_string_equal(disk, "");
    free(disk);

    /* a shadow HAProxy cannot copy requests to: refused naming the gateway, nothing changes */
    r = it_jreq(s, "PUT", "/api/v1/models/fraud/aliases/production", s->admin_token,
                "{\"version\":2,\"shadow\":{\"version\":3,\"percent\":100}}");
    it_expect_error_field(s, r, 400, "invalid_argument", "shadow");
    if (strstr(r->body, "'hap'") == NULL)
        fail_msg("the refusal should name the gateway: %s", r->body);
    r = it_alias_get(s, s->admin_token, "fraud", "production");
    assert_int_equal(it_jint(r->json, "generation"), gen);
    assert_true(json_is_null(json_object_get(r->json, "shadow")));
    assert_int_equal(json_array_size(it_jarr(r->json, "match")), 1);
    map_entries(entries, sizeof(entries));
    assert_string_equal(entries, "x-tenant=acme v3");
    expect_weights(0, 100, 0);

    /* a promotion whose rollout would begin with a shadow phase: refused the same way */
    it_policy_put(s, "fraud", "production", "{\"rollout\":{\"shadow_seconds\":60}}");
    r = it_promotion_post(s, s->admin_token, "fraud", 1, "production");
    it_expect_error(s, r, 400, "invalid_argument");
    if (strstr(r->body, "'hap'") == NULL || strstr(r->body, "shadow") == NULL)
        fail_msg("the refusal should name the gateway and the phase: %s", r->body);
    r = it_request(s, "DELETE", "/api/v1/models/fraud/policies/production", s->admin_token, NULL,
                   NULL, 0);
    it_expect_status(s, r, 204);

    /* a gateway without a map that would hear the pinned alias: refused, naming it */
    r = it_jreq(s, "PUT", "/api/v1/gateways/hap-nomap", s->admin_token,
                it_fmt(body, sizeof(body),
                       "{\"kind\":\"haproxy\",\"address\":\"127.0.0.1:%d\","
                       "\"backend\":\"be_{model}_{alias}\",\"server\":\"v{version}\","
                       "\"models\":[\"fraud\"]}",
                       stats_port));
    it_expect_error_field(s, r, 400, "invalid_argument", "aliases");
    r = it_get(s, "/api/v1/gateways/hap-nomap", s->admin_token);
    it_expect_error(s, r, 404, "not_found");

    /* no rules: the map is emptied, the header means nothing */
    r = it_alias_put(s, s->admin_token, "fraud", "production", "{\"version\":2}", 5);
    if (!pc_all_in_sync(r->json))
        fail_msg("?wait=5: not in sync: %s", r->body);
    map_entries(entries, sizeof(entries));
    assert_string_equal(entries, "");
    pc_count_h(front_url, "x-tenant: acme", 100, 3, NAMES, counts);
    pc_expect_split(100, 3, NAMES, counts, 0, 100, 0);
    assert_int_equal(haproxy_pid(), pid);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_promotion_steps_move_haproxy_weights, it_test_teardown),
        cmocka_unit_test_teardown(test_held_step_split_and_rollback, it_test_teardown),
        cmocka_unit_test_teardown(test_runtime_api_errors_surface, it_test_teardown),
        cmocka_unit_test_teardown(test_template_that_does_not_fit, it_test_teardown),
        cmocka_unit_test_teardown(test_header_pinning_through_the_runtime_api, it_test_teardown),
    };

    if (access(PC_HAPROXY, X_OK) != 0) {
        print_error("%s is missing: install the Debian package haproxy\n", PC_HAPROXY);
        return 1;
    }
    return it_main_result(cmocka_run_group_tests(tests, setup, teardown));
}
