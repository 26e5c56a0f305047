/*
 * test_push_haproxy_large.c - an HAProxy backend of 4,000 servers (M27): `show servers
 * state` answers over 256 KiB there, and a change sets nearly every server's weight. The
 * delivery reads the backend line by line and sends its commands on one connection, so
 * the alias's routes reach HAProxy: the routed servers at their weights, all others at 0.
 */
#include "harness.h"
#include "sys.h"
#include "api.h"
#include "push_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NSERVERS 4000

static struct mg_server *srv;
static struct it_proc hap;
static char dir[IT_PATH_MAX];
static int stats_port;

static int setup(void **state)
{
    size_t cap = 512 + (size_t)NSERVERS * 64, len;
    char *cfg = malloc(cap), path[IT_PATH_MAX], log[IT_PATH_MAX];

    assert_non_null(cfg);
    it_mkdtemp(dir, "hapbig");
    stats_port = it_free_port();
    len = (size_t)snprintf(cfg, cap,
                           "global\n"
                           "    stats socket ipv4@127.0.0.1:%d level admin\n"
                           "    nbthread 1\n"
                           "defaults\n"
                           "    mode http\n"
                           "    timeout connect 2s\n"
                           "    timeout client 10s\n"
                           "    timeout server 10s\n"
                           "backend be_big_production\n",
                           stats_port);
    for (int i = 1; i <= NSERVERS; i++)
        len += (size_t)snprintf(cfg + len, cap - len, "    server v%d 127.0.0.1:9 weight 1\n", i);
    it_write_file(it_fmt(path, sizeof(path), "%s/haproxy.cfg", dir), cfg);
    free(cfg);
    it_fmt(log, sizeof(log), "%s/haproxy.log", dir);
    it_proc_spawn(&hap, "haproxy", (const char *const[]){PC_HAPROXY, "-db", "-f", path, NULL}, log);
    it_proc_wait_port(&hap, stats_port);
    srv = it_server_start(PC_SERVER_ARGS);
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

static int weight(int v)
{
    char name[16];

    return pc_haproxy_weight(stats_port, "be_big_production", it_fmt(name, sizeof(name), "v%d", v));
}

static void test_a_backend_of_4000_servers_is_updated(void **state)
{
    struct mg_server *s = *state;
    char art[IT_DIGEST_LEN + 1], body[512], *reply;
    struct it_resp *r;
    size_t zero = 0;
    const char *p;

    it_upload(s, "big backend model bytes", 23, art);
    it_model_create(s, s->admin_token, "big");
    for (int v = 1; v <= 2; v++)
        assert_int_equal(it_version_create(s, s->admin_token, "big", art, NULL), v);
    pc_gateway_put(s, "hap",
                   it_fmt(body, sizeof(body),
                          "{\"kind\":\"haproxy\",\"address\":\"127.0.0.1:%d\","
                          "\"backend\":\"be_{model}_{alias}\",\"server\":\"v{version}\","
                          "\"models\":[\"big\"]}",
                          stats_port));
    r = it_alias_put(s, s->admin_token, "big", "production",
                     "{\"routes\":[{\"version\":1,\"weight\":40},{\"version\":2,\"weight\":60}]}",
                     20);
    if (!pc_all_in_sync(r->json)) {
        pc_dump_server_notes(s, 5);
        fail_msg("?wait=20: not in sync: %s", r->body);
    }
    assert_int_equal(weight(1), 40);
    assert_int_equal(weight(2), 60);
    /* every other server at 0, as HAProxy lists them */
    reply = pc_haproxy_cmd(stats_port, "show servers state be_big_production\n");
    assert_true(strlen(reply) > 256 * 1024);
    for (p = reply; (p = strchr(p, '\n')) != NULL; p++) {
        char name[32];
        int w;

        if (sscanf(p + 1, "%*s %*s %*s %31s %*s %*s %*s %d", name, &w) != 2)
            continue;
        if (strcmp(name, "v1") == 0 || strcmp(name, "v2") == 0)
            continue;
        if (w != 0)
            fail_msg("server %s has weight %d, want 0", name, w);
        zero++;
    }
    free(reply);
    assert_int_equal(zero, NSERVERS - 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_backend_of_4000_servers_is_updated),
    };

    return it_main_result(cmocka_run_group_tests(tests, setup, teardown));
}
