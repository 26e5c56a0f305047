/*
 * test_push.c - the pure parts of the delivery pool (server/push/push.c): name templates
 * ({model}, {alias}, {version}), the webhook allowlist (CIDR parsing, prefixes that end
 * inside a byte, IPv4-mapped IPv6, the addresses refused whatever the list says), backoff
 * with full jitter, the adapter table, and the gateway filters every kind shares.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include <cmocka.h>

#include "gateways/push.h"

static void test_expand(void **state)
{
    static const struct {
        const char *tmpl;
        int64_t version;
        const char *out; /* NULL: refused */
    } cases[] = {
        {"be_{model}_{alias}", 0, "be_fraud_production"},
        {"v{version}", 12, "v12"},
        {"{model}_v{version}", -3, "fraud_v-3"},
        {"{version}{version}", 9223372036854775807, "92233720368547758079223372036854775807"},
        {"{model}{model}", 1, "fraudfraud"},
        {"plain", 1, "plain"},
        {"", 1, ""},
        {"a}b", 1, "a}b"}, /* a lone '}' is text */
        {"{Model}", 1, NULL},
        {"{models}", 1, NULL},
        {"{owner}", 1, NULL},
        {"{}", 1, NULL},
        {"{model", 1, NULL},
        {"x{", 1, NULL},
    };
    char out[64];

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        bool ok =
            push_expand(cases[i].tmpl, "fraud", "production", cases[i].version, out, sizeof(out));

        assert_int_equal(ok, cases[i].out != NULL);
        if (ok)
            assert_string_equal(out, cases[i].out);
    }
}

static void test_expand_size(void **state)
{
    char out[20];

    (void)state;
    /* "be_fraud_production" is 19 bytes: it fits 20, not 19 */
    assert_true(push_expand("be_{model}_{alias}", "fraud", "production", 0, out, 20));
    assert_string_equal(out, "be_fraud_production");
    assert_false(push_expand("be_{model}_{alias}", "fraud", "production", 0, out, 19));
    assert_false(push_expand("{version}", "m", "a", 123456789, out, 9));
    assert_true(push_expand("{version}", "m", "a", 123456789, out, 10));
    assert_string_equal(out, "123456789");
}

static void test_allow_add(void **state)
{
    static const struct {
        const char *cidr;
        bool ok;
        int family;
        unsigned prefix;
    } cases[] = {
        {"10.0.0.0/8", true, AF_INET, 8},
        {"192.168.1.5", true, AF_INET, 32},
        {"0.0.0.0/0", true, AF_INET, 0},
        {"fd00::/8", true, AF_INET6, 8},
        {"::1", true, AF_INET6, 128},
        {"2001:db8::/128", true, AF_INET6, 128},
        {"10.0.0.0/33", false, 0, 0},
        {"fd00::/129", false, 0, 0},
        {"10.0.0.0/", false, 0, 0},
        {"10.0.0.0/-1", false, 0, 0},
        {"10.0.0.0/08", false, 0, 0},
        {"10.0.0.0/8x", false, 0, 0},
        {"/8", false, 0, 0},
        {"", false, 0, 0},
        {"example.com/8", false, 0, 0},
        {"10.0.0/8", false, 0, 0},
        {"10.0.0.0 /8", false, 0, 0},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct push_allow a = {0};
        struct mg_error err = {0};
        enum mg_code rc = push_allow_add(&a, cases[i].cidr, &err);

        if (cases[i].ok) {
            assert_int_equal(rc, MG_OK);
            assert_int_equal(a.n, 1);
            assert_int_equal(a.nets[0].family, cases[i].family);
            assert_int_equal(a.nets[0].prefix, cases[i].prefix);
        } else {
            char want[128];

            assert_int_equal(rc, MG_EINVAL);
            assert_int_equal(a.n, 0);
            assert_string_equal(err.field, "webhook-allow");
            snprintf(want, sizeof(want),
                     "--webhook-allow wants a network such as 10.0.0.0/8 or fd00::/8, not '%s'",
                     cases[i].cidr);
            assert_string_equal(err.message, want);
        }
    }
}

static void test_allow_add_cap(void **state)
{
    struct push_allow a = {0};
    struct mg_error err = {0};

    (void)state;
    for (int i = 0; i < PUSH_ALLOW_MAX; i++)
        assert_int_equal(push_allow_add(&a, "10.0.0.0/8", &err), MG_OK);
    assert_int_equal(push_allow_add(&a, "10.0.0.0/8", &err), MG_EINVAL);
    assert_int_equal(a.n, PUSH_ALLOW_MAX);
    assert_non_null(strstr(err.message, "at most 32 --webhook-allow networks"));
}

/* Check one address (IPv4, IPv6 or "unix") against an allowlist. */
static bool allowed(const struct push_allow *a, const char *addr)
{
    struct sockaddr_in sin;
    struct sockaddr_in6 sin6;
    struct sockaddr_un sun;

    memset(&sin, 0, sizeof(sin));
    memset(&sin6, 0, sizeof(sin6));
    memset(&sun, 0, sizeof(sun));
    if (inet_pton(AF_INET, addr, &sin.sin_addr) == 1) {
        sin.sin_family = AF_INET;
        return push_allow_check(a, (struct sockaddr *)&sin);
    }
    if (inet_pton(AF_INET6, addr, &sin6.sin6_addr) == 1) {
        sin6.sin6_family = AF_INET6;
        return push_allow_check(a, (struct sockaddr *)&sin6);
    }
    sun.sun_family = AF_UNIX;
    return push_allow_check(a, (struct sockaddr *)&sun);
}

static void test_allow_check(void **state)
{
    static const char *const nets[] = {"10.0.0.0/8",  "172.16.0.0/12", "192.168.1.0/24",
                                       "203.0.113.7", "fd00::/8",      "2001:db8:8000::/33"};
    static const struct {
        const char *addr;
        bool ok;
    } cases[] = {
        {"10.0.0.1", true},
        {"10.255.255.255", true},
        {"11.0.0.1", false},
        {"9.255.255.255", false},
        /* /12 ends inside the second byte: 172.16 - 172.31 */
        {"172.16.0.0", true},
        {"172.31.255.255", true},
        {"172.32.0.0", false},
        {"172.15.255.255", false},
        {"192.168.1.200", true},
        {"192.168.2.1", false},
        {"203.0.113.7", true},
        {"203.0.113.8", false},
        {"fd12:3456::1", true},
        {"fe00::1", false},
        /* /33 ends on the first bit of the fifth byte */
        {"2001:db8:8000::1", true},
        {"2001:db8:ffff::1", true},
        {"2001:db8:7fff::1", false},
        /* IPv4-mapped IPv6 is judged as the IPv4 address */
        {"::ffff:10.1.2.3", true},
        {"::ffff:11.1.2.3", false},
        {"unix", false},
    };
    struct push_allow a = {0};
    struct mg_error err;

    (void)state;
    for (size_t i = 0; i < sizeof(nets) / sizeof(nets[0]); i++)
        assert_int_equal(push_allow_add(&a, nets[i], &err), MG_OK);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (allowed(&a, cases[i].addr) != cases[i].ok)
            fail_msg("%s: expected %s", cases[i].addr, cases[i].ok ? "allowed" : "refused");
    }
}

static void test_allow_never(void **state)
{
    /* refused even when the list allows everything: metadata services, multicast, "any" */
    static const char *const never[] = {
        "169.254.169.254", "169.254.0.1", "0.0.0.0",
        "0.1.2.3",         "224.0.0.1",   "239.255.255.250",
        "255.255.255.255", "fe80::1",     "febf::1",
        "ff02::1",         "::",          "::ffff:169.254.169.254",
        "::ffff:0.0.0.0",
    };
    static const char *const fine[] = {"8.8.8.8", "127.0.0.1", "169.253.255.255", "223.1.1.1",
                                       "::1",     "fec0::1",   "2001:db8::1"};
    struct push_allow a = {0}, none = {0};
    struct mg_error err;

    (void)state;
    assert_int_equal(push_allow_add(&a, "0.0.0.0/0", &err), MG_OK);
    assert_int_equal(push_allow_add(&a, "::/0", &err), MG_OK);
    for (size_t i = 0; i < sizeof(never) / sizeof(never[0]); i++) {
        if (allowed(&a, never[i]))
            fail_msg("%s was allowed", never[i]);
    }
    for (size_t i = 0; i < sizeof(fine) / sizeof(fine[0]); i++) {
        if (!allowed(&a, fine[i]))
            fail_msg("%s was refused under 0.0.0.0/0 and ::/0", fine[i]);
        /* an empty list allows nothing */
        assert_false(allowed(&none, fine[i]));
    }
}

static void test_backoff(void **state)
{
    static const struct {
        int attempts;
        double rnd;
        int64_t ms;
    } cases[] = {
        {1, 0.5, 500},     {1, 0.999, 999},  {2, 0.5, 1000},     {3, 0.5, 2000},
        {4, 0.25, 2000},   {6, 0.5, 16000},  {7, 0.5, 30000}, /* 64 s capped at 60 s */
        {7, 0.999, 59940}, {60, 0.5, 30000}, {2000, 0.5, 30000}, {0, 0.5, 500},
        {-5, 0.5, 500},                                       /* as the first */
        {1, 0.0, 50},      {1, 0.01, 50},    {3, 0.0124, 50}, /* at least 50 ms */
    };
    struct push_options o = {0};

    (void)state;
    o.backoff_base_ms = 1000;
    o.backoff_max_ms = 60000;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int64_t got = push_backoff_ms(&o, cases[i].attempts, cases[i].rnd);

        if (got != cases[i].ms)
            fail_msg("attempts %d rnd %g: %lld ms, expected %lld", cases[i].attempts, cases[i].rnd,
                     (long long)got, (long long)cases[i].ms);
    }
}

static void test_adapters(void **state)
{
    static const struct {
        const char *kind;
        bool configurable, rollback;
    } cases[] = {
        {"webhook", true, true},
        {"haproxy", true, true},
        {"nginx", true, true},
        {"runner", false, false},
    };
    const struct push_adapter *ad;

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        ad = push_adapter_of(cases[i].kind);
        assert_non_null(ad);
        assert_string_equal(ad->kind, cases[i].kind);
        assert_int_equal(ad->validate != NULL, cases[i].configurable);
        assert_non_null(ad->deliver);
        assert_int_equal(ad->rollback_on_failure, cases[i].rollback);
    }
    assert_true(push_adapter_of("webhook")->validate == push_webhook_validate);
    assert_true(push_adapter_of("nginx")->deliver == push_nginx_deliver);
    assert_null(push_adapter_of("Webhook"));
    assert_null(push_adapter_of("envoy"));
    assert_null(push_adapter_of(""));
    assert_null(push_adapter_of(NULL));
}

static void test_config_filters(void **state)
{
    static const struct {
        const char *kind;
        const char *body;
        const char *field; /* NULL: accepted */
        const char *message;
    } cases[] = {
        {"haproxy",
         "{\"address\":\"unix:/run/h.sock\",\"backend\":\"b\",\"server\":\"v{version}\","
         "\"models\":[\"fraud\",\"churn.v2\"],\"aliases\":[\"production\"]}",
         NULL, NULL},
        {"haproxy", "{\"models\":[]}", "models",
         "models must be a non-empty array of model names (or absent for all)"},
        {"haproxy", "{\"models\":\"fraud\"}", "models", "models must be a non-empty array"},
        {"haproxy", "{\"models\":[\"Fraud\"]}", "models", "models must be"},
        {"haproxy", "{\"models\":[\"fraud\",3]}", "models", "models must be"},
        {"haproxy", "{\"aliases\":[]}", "aliases",
         "aliases must be a non-empty array of alias names (or absent for all)"},
        {"haproxy", "{\"aliases\":[\"prod_1\"]}", "aliases", "aliases must be"},
        {"haproxy", "{\"aliases\":[\"1prod\"]}", "aliases", "aliases must be"},
        /* the runner is built in: it cannot be PUT */
        {"runner", "{}", "kind", "kind is webhook, haproxy or nginx"},
        {"envoy", "{}", "kind", "kind is webhook, haproxy or nginx"},
        {NULL, "{}", "kind", "kind is webhook, haproxy or nginx"},
    };
    struct push_allow allow = {0};
    struct push_env env = {&allow, NULL, NULL};

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *body = json_loads(cases[i].body, 0, NULL), *config = NULL;
        struct mg_error err = {0};
        char *secret = NULL;
        enum mg_code rc;

        assert_non_null(body);
        rc = push_config_validate(&env, cases[i].kind, body, &config, &secret, &err);
        if (cases[i].field == NULL) {
            assert_int_equal(rc, MG_OK);
            assert_non_null(config);
            json_decref(config);
        } else {
            assert_int_equal(rc, MG_EINVAL);
            assert_string_equal(err.field, cases[i].field);
            assert_non_null(strstr(err.message, cases[i].message));
        }
        free(secret);
        json_decref(body);
    }
}

static void test_config_filter_limits(void **state)
{
    json_t *body = json_pack("{s:s, s:s, s:s, s:[]}", "address", "h:1", "backend", "b", "server",
                             "v{version}", "models");
    json_t *models = json_object_get(body, "models"), *config = NULL; /* BORROWED */
    struct push_env env = {0};
    struct mg_error err = {0};
    char *secret = NULL, name[16];

    (void)state;
    for (int i = 0; i < 256; i++) {
        snprintf(name, sizeof(name), "m%d", i);
        json_array_append_new(models, json_string(name));
    }
    assert_int_equal(push_config_validate(&env, "haproxy", body, &config, &secret, &err), MG_OK);
    json_decref(config);
    json_array_append_new(models, json_string("one-more"));
    assert_int_equal(push_config_validate(&env, "haproxy", body, &config, &secret, &err),
                     MG_EINVAL);
    assert_string_equal(err.field, "models");
    json_decref(body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_expand),         cmocka_unit_test(test_expand_size),
        cmocka_unit_test(test_allow_add),      cmocka_unit_test(test_allow_add_cap),
        cmocka_unit_test(test_allow_check),    cmocka_unit_test(test_allow_never),
        cmocka_unit_test(test_backoff),        cmocka_unit_test(test_adapters),
        cmocka_unit_test(test_config_filters), cmocka_unit_test(test_config_filter_limits),
    };

    return cmocka_run_group_tests_name("unit_gateways_push", tests, NULL, NULL);
}
