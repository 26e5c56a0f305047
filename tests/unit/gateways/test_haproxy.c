/*
 * test_haproxy.c - the HAProxy gateway (server/push/haproxy.c): the configs it refuses
 * (addresses, name templates with characters HAProxy names cannot hold, a server template
 * without {version}), and deliveries to a fake runtime API on a unix socket (prompt mode):
 * the backend is read, routed servers get their weights and every other server 0 (only
 * those that differ, on one connection), the backend is read back, and HAProxy's own
 * error text becomes the delivery's error.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "gateways/push.h"

static void test_validate(void **state)
{
    static const struct {
        const char *body;
        const char *field; /* NULL: accepted */
        const char *message;
    } cases[] = {
        {"{\"kind\":\"haproxy\",\"address\":\"127.0.0.1:9999\",\"backend\":\"be_{model}_{alias}\","
         "\"server\":\"v{version}\"}",
         NULL, NULL},
        {"{\"address\":\"unix:/run/haproxy/admin.sock\",\"backend\":\"be.{model}:{alias}-x\","
         "\"server\":\"{model}_{version}\"}",
         NULL, NULL},
        {"{\"address\":\"[::1]:9999\",\"backend\":\"B\",\"server\":\"S{version}\"}", NULL, NULL},
        {"{\"address\":\"h:1\",\"backend\":\"b\",\"server\":\"v{version}\",\"weight\":1}", "weight",
         "unknown field 'weight' for an haproxy gateway"},
        {"{\"backend\":\"b\",\"server\":\"v{version}\"}", "address",
         "address is the runtime API as host:port or unix:/path/to/socket"},
        {"{\"address\":\"localhost\",\"backend\":\"b\",\"server\":\"v{version}\"}", "address",
         "host:port or unix:"},
        /* these passed as "host:port" because they hold a ':' */
        {"{\"address\":\"unix:relative.sock\",\"backend\":\"b\",\"server\":\"v{version}\"}",
         "address", "host:port or unix:"},
        {"{\"address\":\"h:http\",\"backend\":\"b\",\"server\":\"v{version}\"}", "address",
         "host:port or unix:"},
        {"{\"address\":\"h:0\",\"backend\":\"b\",\"server\":\"v{version}\"}", "address",
         "host:port or unix:"},
        {"{\"address\":\"h:65536\",\"backend\":\"b\",\"server\":\"v{version}\"}", "address",
         "host:port or unix:"},
        {"{\"address\":\":9999\",\"backend\":\"b\",\"server\":\"v{version}\"}", "address",
         "host:port or unix:"},
        {"{\"address\":\"h:65535\",\"backend\":\"b\",\"server\":\"v{version}\"}", NULL, NULL},
        {"{\"address\":\"h:1\",\"server\":\"v{version}\"}", "backend",
         "backend is a name template such as be_{model}_{alias}"},
        {"{\"address\":\"h:1\",\"backend\":\"be {model}\",\"server\":\"v{version}\"}", "backend",
         "backend is a name template"},
        {"{\"address\":\"h:1\",\"backend\":\"be/{model}\",\"server\":\"v{version}\"}", "backend",
         "backend is a name template"},
        {"{\"address\":\"h:1\",\"backend\":\"be\\n{model}\",\"server\":\"v{version}\"}", "backend",
         "backend is a name template"},
        {"{\"address\":\"h:1\",\"backend\":\"be;{model}\",\"server\":\"v{version}\"}", "backend",
         "backend is a name template"},
        {"{\"address\":\"h:1\",\"backend\":\"be_{owner}\",\"server\":\"v{version}\"}", "backend",
         "backend is a name template"},
        /* an empty backend was accepted: "set weight /v1 100" */
        {"{\"address\":\"h:1\",\"backend\":\"\",\"server\":\"v{version}\"}", "backend",
         "backend is a name template"},
        {"{\"address\":\"h:1\",\"backend\":\"b\"}", "server",
         "server is a name template with {version}, such as v{version}"},
        {"{\"address\":\"h:1\",\"backend\":\"b\",\"server\":\"{model}\"}", "server",
         "with {version}"},
        {"{\"address\":\"h:1\",\"backend\":\"b\",\"server\":\"v {version}\"}", "server",
         "with {version}"},
        {"{\"address\":\"h:1\",\"backend\":\"b\",\"server\":\"v{version\"}", "server",
         "with {version}"},
    };
    struct push_env env = {0};

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *body = json_loads(cases[i].body, 0, NULL), *config = NULL;
        struct mg_error err = {0};
        char *secret = (char *)"unset";
        enum mg_code rc;

        assert_non_null(body);
        rc = push_haproxy_validate(&env, body, &config, &secret, &err);
        assert_null(secret);
        if (cases[i].field == NULL) {
            if (rc != MG_OK)
                fail_msg("case %zu refused: %s", i, err.message);
            assert_int_equal(json_object_size(config), 3);
            for (const char *const *k = (const char *const[]){"address", "backend", "server", NULL};
                 *k; k++)
                assert_string_equal(json_string_value(json_object_get(config, *k)),
                                    json_string_value(json_object_get(body, *k)));
            json_decref(config);
        } else {
            assert_int_equal(rc, MG_EINVAL);
            assert_string_equal(err.field, cases[i].field);
            assert_non_null(strstr(err.message, cases[i].message));
        }
        json_decref(body);
    }
}

/* ---- a fake runtime API --------------------------------------------------------------- */

#define FAKE_SERVERS 4 /* v1 .. v3 exist in be_fraud_production; index 0 unused */

struct fake {
    char path[108];
    int lfd;
    pthread_t thread;
    int weight[FAKE_SERVERS];
    int stuck; /* a server whose weight never changes (0: none) */
    char log[4096];
};

static void fake_reply(struct fake *f, const char *cmd, char *out, size_t n)
{
    char be[128], srv[128];
    int w, v;

    snprintf(f->log + strlen(f->log), sizeof(f->log) - strlen(f->log), "%s", cmd);
    if (sscanf(cmd, "set weight %127[^/]/%127s %d", be, srv, &w) == 3) {
        if (strcmp(be, "be_fraud_production") != 0)
            snprintf(out, n, "No such backend.\n");
        else if (sscanf(srv, "v%d", &v) != 1 || v < 1 || v >= FAKE_SERVERS)
            snprintf(out, n, "No such server.\n");
        else {
            if (v != f->stuck)
                f->weight[v] = w;
            snprintf(out, n, "\n");
        }
    } else if (sscanf(cmd, "show servers state %127s", be) == 1) {
        if (strcmp(be, "be_fraud_production") != 0) {
            snprintf(out, n, "Can't find backend.\n");
            return;
        }
        n -= (size_t)snprintf(out, n,
                              "1\n# be_id be_name srv_id srv_name srv_addr "
                              "srv_op_state srv_admin_state srv_uweight srv_iweight\n");
        for (v = 1; v < FAKE_SERVERS; v++)
            n -= (size_t)snprintf(out + strlen(out), n,
                                  "3 be_fraud_production %d v%d 127.0.0.1 2 0 %d 1\n", v, v,
                                  f->weight[v]);
    } else if (sscanf(cmd, "get weight %127[^/]/v%d", be, &v) == 2 && v >= 1 && v < FAKE_SERVERS) {
        snprintf(out, n, "%d (initial 1)\n", f->weight[v]);
    } else {
        snprintf(out, n, "Unknown command.\n");
    }
}

/* HAProxy's runtime API: one command per connection (non-interactive: answer, close), or,
 * after "prompt", one command a line, each answer followed by the prompt "\n> ", until
 * "quit". Every line received goes to the log. */
static void *fake_main(void *arg)
{
    struct fake *f = arg;

    for (;;) {
        char buf[8192], reply[2048], out[2100];
        size_t len = 0;
        bool prompt = false, done = false;
        int c = accept(f->lfd, NULL, NULL);

        if (c < 0)
            return NULL; /* shut down */
        while (!done) {
            char *nl;
            ssize_t r;

            while ((nl = memchr(buf, '\n', len)) != NULL && !done) {
                size_t n = (size_t)(nl - buf) + 1;
                char line[512];

                snprintf(line, sizeof(line), "%.*s", (int)n, buf);
                memmove(buf, buf + n, len - n);
                len -= n;
                if (strcmp(line, "prompt\n") == 0 && !prompt) {
                    snprintf(f->log + strlen(f->log), sizeof(f->log) - strlen(f->log), "%s", line);
                    prompt = true;
                    (void)!write(c, "\n> ", 3);
                    continue;
                }
                if (prompt && strcmp(line, "quit\n") == 0) {
                    snprintf(f->log + strlen(f->log), sizeof(f->log) - strlen(f->log), "%s", line);
                    done = true;
                    break;
                }
                fake_reply(f, line, reply, sizeof(reply));
                if (!prompt) {
                    (void)!write(c, reply, strlen(reply));
                    done = true;
                    break;
                }
                /* HAProxy writes the answer, a newline, then the prompt */
                snprintf(out, sizeof(out), "%s\n> ", strcmp(reply, "\n") == 0 ? "" : reply);
                (void)!write(c, out, strlen(out));
            }
            if (done)
                break;
            r = read(c, buf + len, sizeof(buf) - len);
            if (r <= 0)
                break;
            len += (size_t)r;
        }
        close(c);
    }
}

static void fake_start(struct fake *f)
{
    struct sockaddr_un sun;
    char dir[] = "/tmp/mg-haproxy-XXXXXX";

    memset(f, 0, sizeof(*f));
    assert_non_null(mkdtemp(dir));
    snprintf(f->path, sizeof(f->path), "%s/admin.sock", dir);
    memset(&sun, 0, sizeof(sun));
    sun.sun_family = AF_UNIX;
    memcpy(sun.sun_path, f->path, strlen(f->path) + 1);
    f->lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_true(f->lfd >= 0);
    assert_int_equal(bind(f->lfd, (struct sockaddr *)&sun, sizeof(sun)), 0);
    assert_int_equal(listen(f->lfd, 16), 0);
    for (int v = 1; v < FAKE_SERVERS; v++)
        f->weight[v] = 1;
    assert_int_equal(pthread_create(&f->thread, NULL, fake_main, f), 0);
}

static void fake_stop(struct fake *f)
{
    char *slash;

    shutdown(f->lfd, SHUT_RDWR); /* wakes accept() */
    pthread_join(f->thread, NULL);
    close(f->lfd);
    unlink(f->path);
    slash = strrchr(f->path, '/');
    *slash = '\0';
    rmdir(f->path);
}

static void deliver(struct fake *f, const char *backend, const char *routes,
                    struct push_result *res)
{
    struct store_delivery d;
    struct push_env env = {0};
    char addr[128];

    memset(&d, 0, sizeof(d));
    snprintf(d.model, sizeof(d.model), "fraud");
    snprintf(d.alias, sizeof(d.alias), "production");
    snprintf(addr, sizeof(addr), "unix:%s", f->path);
    d.config =
        json_pack("{s:s, s:s, s:s}", "address", addr, "backend", backend, "server", "v{version}");
    d.payload = json_pack("{s:o}", "routes", json_loads(routes, 0, NULL));
    assert_non_null(d.config);
    assert_non_null(d.payload);
    memset(res, 0, sizeof(*res));
    push_haproxy_deliver(&env, &d, res);
    json_decref(d.config);
    json_decref(d.payload);
}

static void test_deliver_sets_every_weight(void **state)
{
    struct push_result res;
    struct fake f;

    (void)state;
    fake_start(&f);
    f.weight[3] = 50; /* a stale server that still has traffic */
    deliver(&f, "be_{model}_{alias}",
            "[{\"version\":1,\"weight\":90},{\"version\":2,\"weight\":10}]", &res);
    if (!res.ok)
        fail_msg("delivery failed: %s", res.error);
    assert_int_equal(f.weight[1], 90);
    assert_int_equal(f.weight[2], 10);
    assert_int_equal(f.weight[3], 0);
    /* one connection reads the backend; one sets what differs and reads it back */
    assert_string_equal(f.log, "prompt\n"
                               "show servers state be_fraud_production\n"
                               "quit\n"
                               "prompt\n"
                               "set weight be_fraud_production/v1 90\n"
                               "set weight be_fraud_production/v2 10\n"
                               "set weight be_fraud_production/v3 0\n"
                               "show servers state be_fraud_production\n"
                               "quit\n");
    /* the same again: HAProxy holds it, nothing is sent */
    f.log[0] = '\0';
    deliver(&f, "be_{model}_{alias}",
            "[{\"version\":1,\"weight\":90},{\"version\":2,\"weight\":10}]", &res);
    assert_true(res.ok);
    assert_string_equal(f.log, "prompt\nshow servers state be_fraud_production\nquit\n");
    /* no routes (alias deleted): every server drained */
    f.log[0] = '\0';
    deliver(&f, "be_{model}_{alias}", "[]", &res);
    assert_true(res.ok);
    assert_int_equal(f.weight[1] + f.weight[2] + f.weight[3], 0);
    fake_stop(&f);
}

static void test_deliver_errors(void **state)
{
    static const struct {
        const char *backend, *routes;
        int stuck;
        const char *error;
        bool sent; /* any set weight went out */
    } cases[] = {
        /* HAProxy has no such server or backend: nothing is sent */
        {"be_{model}_{alias}", "[{\"version\":9,\"weight\":100}]", 0,
         "set weight be_fraud_production/v9: No such server. (HAProxy's backend has no server "
         "of that name; nothing was sent)",
         false},
        {"other_{alias}", "[{\"version\":1,\"weight\":100}]", 0,
         "show servers state other_production: No such backend (Can't find backend.)", false},
        /* set weight said nothing, but the weight did not change */
        {"be_{model}_{alias}", "[{\"version\":1,\"weight\":70},{\"version\":2,\"weight\":30}]", 2,
         "after the change HAProxy reports be_fraud_production/v2 at weight 1, not 30", true},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct push_result res;
        struct fake f;

        fake_start(&f);
        f.stuck = cases[i].stuck;
        deliver(&f, cases[i].backend, cases[i].routes, &res);
        fake_stop(&f);
        assert_false(res.ok);
        assert_string_equal(res.error, cases[i].error);
        assert_int_equal(strstr(f.log, "set weight") != NULL, cases[i].sent);
    }
}

static void test_deliver_unreachable(void **state)
{
    struct push_result res = {0};
    struct store_delivery d;
    struct push_env env = {0};

    (void)state;
    memset(&d, 0, sizeof(d));
    snprintf(d.model, sizeof(d.model), "fraud");
    snprintf(d.alias, sizeof(d.alias), "production");
    d.payload = json_pack("{s:[{s:i, s:i}]}", "routes", "version", 1, "weight", 100);
    d.config = json_pack("{s:s, s:s, s:s}", "address", "unix:/nonexistent/admin.sock", "backend",
                         "b", "server", "v{version}");
    push_haproxy_deliver(&env, &d, &res);
    assert_false(res.ok);
    assert_string_equal(res.error,
                        "show servers state b: cannot connect to unix:/nonexistent/admin.sock: "
                        "No such file or directory");
    json_decref(d.config);
    /* host names are not resolved: the runtime API address is numeric */
    memset(&res, 0, sizeof(res));
    d.config = json_pack("{s:s, s:s, s:s}", "address", "haproxy.internal:9999", "backend", "b",
                         "server", "v{version}");
    push_haproxy_deliver(&env, &d, &res);
    assert_false(res.ok);
    assert_string_equal(res.error, "show servers state b: runtime API address must be numeric: "
                                   "haproxy.internal:9999");
    json_decref(d.config);
    /* a config without a server template */
    memset(&res, 0, sizeof(res));
    d.config = json_pack("{s:s, s:s}", "address", "127.0.0.1:1", "backend", "b");
    push_haproxy_deliver(&env, &d, &res);
    assert_false(res.ok);
    assert_string_equal(res.error, "gateway misconfigured");
    json_decref(d.config);
    json_decref(d.payload);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_validate),
        cmocka_unit_test(test_deliver_sets_every_weight),
        cmocka_unit_test(test_deliver_errors),
        cmocka_unit_test(test_deliver_unreachable),
    };

    return cmocka_run_group_tests_name("unit_gateways_haproxy", tests, NULL, NULL);
}
