/*
 * test_push_reconcile.c - gateway reconciliation (M27): modelgate reads its gateways back
 * and repairs drift, whatever caused it. A real HAProxy (weights and a header map through
 * the runtime API) and an nginx include file; the reconciler runs every 300 ms
 * (--reconcile-interval-ms). Hand edits of HAProxy's weights and map, a hand edit of the
 * include file, and a restart of HAProxy (back to its config's weights, an empty map) are
 * each repaired; every repair is counted in /metrics and audited (gateway.drift).
 */
#include "harness.h"
#include "sys.h"
#include "api.h"
#include "push_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PERIOD_MS "300"

static struct mg_server *srv;
static struct it_proc hap;
static char dir[IT_PATH_MAX], inc[IT_PATH_MAX];
static int stats_port;

static void haproxy_start(void)
{
    char cfg[2048], path[IT_PATH_MAX], log[IT_PATH_MAX];

    it_fmt(cfg, sizeof(cfg),
           "global\n"
           "    stats socket ipv4@127.0.0.1:%d level admin\n"
           "    nbthread 1\n"
           "defaults\n"
           "    mode http\n"
           "    timeout connect 2s\n"
           "    timeout client 10s\n"
           "    timeout server 10s\n"
           "backend be_fraud_production\n"
           "    http-request set-var(txn.mg_pin) req.hdr(x-tenant),regsub(^,x-tenant=),"
           "map(%s/fraud_production.map)\n"
           "    use-server %%[var(txn.mg_pin)] if { var(txn.mg_pin) -m found }\n"
           "    server v1 127.0.0.1:9 weight 1\n"
           "    server v2 127.0.0.1:9 weight 1\n"
           "    server v3 127.0.0.1:9 weight 1\n",
           stats_port, dir);
    it_write_file(it_fmt(path, sizeof(path), "%s/haproxy.cfg", dir), cfg);
    it_fmt(log, sizeof(log), "%s/haproxy.log", dir);
    it_proc_spawn(&hap, "haproxy", (const char *const[]){PC_HAPROXY, "-db", "-f", path, NULL}, log);
    it_proc_wait_port(&hap, stats_port);
}

static int setup(void **state)
{
    char path[IT_PATH_MAX];

    it_mkdtemp(dir, "reconcile");
    stats_port = it_free_port();
    it_write_file(it_fmt(path, sizeof(path), "%s/fraud_production.map", dir), "");
    haproxy_start();
    srv = it_server_start((const char *const[]){
        "--push-backoff-base-ms", "50", "--push-backoff-max-ms", "400", "--reconcile-interval-ms",
        PERIOD_MS, "--host-name", "gw-host", NULL});
    *state = srv;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (srv != NULL) {
        it_server_stop(srv);
        it_server_free(&srv);
    }
    it_proc_stop(&hap);
    it_rmtree(dir);
    return 0;
}

static int weight(const char *server)
{
    return pc_haproxy_weight(stats_port, "be_fraud_production", server);
}

static bool map_is(const char *want)
{
    char cmd[IT_PATH_MAX + 32], *reply;
    bool ok;

    reply = pc_haproxy_cmd(stats_port,
                           it_fmt(cmd, sizeof(cmd), "show map %s/fraud_production.map\n", dir));
    ok = strstr(reply, want) != NULL;
    free(reply);
    return ok;
}

/* The state generation 1 wants: v1 at 30, v2 at 70, v3 at 0, x-tenant=acme pinned to v3;
 * the include file as delivered (want_inc). */
static bool repaired(const char *want_inc)
{
    char *now = it_read_file(inc, NULL);
    bool ok = now != NULL && strcmp(now, want_inc) == 0 && weight("v1") == 30 &&
              weight("v2") == 70 && weight("v3") == 0 && map_is("x-tenant=acme v3");

    free(now);
    return ok;
}

#define wait_repaired(what, want_inc, drift0)                                                      \
    wait_repaired_at(what, want_inc, drift0, __FILE__, __LINE__)

static void wait_repaired_at(const char *what, const char *want_inc, unsigned long long drift0,
                             const char *file, int line)
{
    int64_t deadline = it_deadline(10000);

    while (!repaired(want_inc) || it_metric(srv, "modelgate_gateway_drift_total") <= drift0) {
        if (it_now_ms() > deadline) {
            pc_dump_server_notes(srv, 10);
            print_error("after %s: HAProxy v1=%d v2=%d v3=%d, drift count %llu (was %llu)\n", what,
                        weight("v1"), weight("v2"), weight("v3"),
                        it_metric(srv, "modelgate_gateway_drift_total"), drift0);
            _fail(file, line);
        }
        it_pause_ms(20);
    }
}

static void test_drift_is_repaired(void **state)
{
    struct mg_server *s = *state;
    char art[IT_DIGEST_LEN + 1], body[1024], cmd[IT_PATH_MAX + 64], *want_inc;
    unsigned long long drift;
    struct it_resp *r;
    json_t *audit;
    size_t drifts = 0, i;

    it_fmt(inc, sizeof(inc), "%s/fraud_production.conf", dir);
    it_upload(s, "reconcile test model bytes", 26, art);
    it_model_create(s, s->admin_token, "fraud");
    for (int v = 1; v <= 3; v++)
        assert_int_equal(it_version_create(s, s->admin_token, "fraud", art, NULL), v);
    pc_gateway_put(s, "hap",
                   it_fmt(body, sizeof(body),
                          "{\"kind\":\"haproxy\",\"address\":\"127.0.0.1:%d\","
                          "\"backend\":\"be_{model}_{alias}\",\"server\":\"v{version}\","
                          "\"map\":\"%s/{model}_{alias}.map\",\"models\":[\"fraud\"],"
                          "\"host\":\"gw-host\"}",
                          stats_port, dir));
    pc_gateway_put(s, "ngx",
                   it_fmt(body, sizeof(body),
                          "{\"kind\":\"nginx\",\"file\":\"%s/{model}_{alias}.conf\","
                          "\"upstream\":\"{model}_v{version}\",\"test_command\":[\"/bin/true\"],"
                          "\"reload_command\":[\"/bin/true\"],\"models\":[\"fraud\"],"
                          "\"host\":\"gw-host\"}",
                          dir));
    r = it_alias_put(s, s->admin_token, "fraud", "production",
                     "{\"routes\":[{\"version\":1,\"weight\":30},{\"version\":2,\"weight\":70}],"
                     "\"match\":[{\"header\":\"x-tenant\",\"value\":\"acme\",\"version\":3}]}",
                     5);
    if (!pc_all_in_sync(r->json))
        fail_msg("?wait=5: not in sync: %s", r->body);
    want_inc = it_read_file(inc, NULL);
    assert_non_null(want_inc);
    assert_true(repaired(want_inc));
    drift = it_metric(s, "modelgate_gateway_drift_total");

    /* 1. Hand edits of HAProxy's weights and map. */
    free(pc_haproxy_cmd(stats_port, "set weight be_fraud_production/v3 50\n"));
    free(pc_haproxy_cmd(stats_port, "set weight be_fraud_production/v1 1\n"));
    free(pc_haproxy_cmd(stats_port,
                        it_fmt(cmd, sizeof(cmd), "clear map %s/fraud_production.map\n", dir)));
    assert_false(repaired(want_inc));
    wait_repaired("hand edits of HAProxy", want_inc, drift);
    print_message("HAProxy's weights and map restored after a hand edit\n");

    /* 2. A hand edit of the include file. */
    drift = it_metric(s, "modelgate_gateway_drift_total");
    it_write_file(inc, "# edited by hand\n");
    wait_repaired("a hand edit of the include file", want_inc, drift);
    print_message("the nginx include file restored after a hand edit\n");

    /* 3. HAProxy restarted: its config's weights (1, 1, 1) and an empty map. */
    drift = it_metric(s, "modelgate_gateway_drift_total");
    it_proc_stop(&hap);
    haproxy_start();
    assert_false(repaired(want_inc));
    wait_repaired("a restart of HAProxy", want_inc, drift);
    print_message("HAProxy's state restored after a restart\n");

    /* Each repair is audited, and the deliveries end in sync again. */
    r = it_get(s, "/api/v1/audit?limit=1000", s->admin_token);
    it_expect_status(s, r, 200);
    audit = it_jarr(r->json, "items");
    for (i = 0; i < json_array_size(audit); i++)
        drifts += strcmp(it_jstr(json_array_get(audit, i), "action"), "gateway.drift") == 0;
    if (drifts < 3)
        fail_msg("%zu gateway.drift audit entries, want one per repair (3 or more)", drifts);
    r = pc_wait_delivery(s, "hap", "fraud", "production", 0, "in_sync", 10000);
    r = pc_wait_delivery(s, "ngx", "fraud", "production", 0, "in_sync", 10000);
    free(want_inc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_drift_is_repaired, it_test_teardown),
    };

    return it_main_result(cmocka_run_group_tests(tests, setup, teardown));
}
