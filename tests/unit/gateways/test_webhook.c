/*
 * test_webhook.c - the webhook gateway (server/push/webhook.c): the HMAC key of a secret
 * (Standard Webhooks "whsec_<base64>" decoded, 24 to 64 bytes; any other secret as it is),
 * the "v1,<base64 HMAC-SHA256>" signature of "id.timestamp.body" against vectors computed
 * outside this code, the checks a webhook config must pass (SSRF guard included), and the
 * body a receiver gets.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/util.h"
#include "gateways/push_int.h"

/* "whsec_" and the base64 of n bytes 0, 1, 2, ... (malloc'd). */
static char *whsec_of(size_t n)
{
    uint8_t raw[128];
    char *b64, *s;

    assert_true(n <= sizeof(raw));
    for (size_t i = 0; i < n; i++)
        raw[i] = (uint8_t)i;
    b64 = mg_base64_encode(raw, n);
    assert_non_null(b64);
    s = malloc(strlen(b64) + 7);
    assert_non_null(s);
    snprintf(s, strlen(b64) + 7, "whsec_%s", b64);
    free(b64);
    return s;
}

static void test_key_of_whsec_secrets(void **state)
{
    static const struct {
        size_t n;
        bool ok;
    } cases[] = {{0, false}, {1, false}, {23, false}, {24, true},
                 {32, true}, {64, true}, {65, false}, {100, false}};
    uint8_t key[512];
    size_t keylen;

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *secret = whsec_of(cases[i].n);

        keylen = 999;
        assert_int_equal(push_webhook_key(secret, key, &keylen), cases[i].ok);
        if (cases[i].ok) {
            assert_int_equal(keylen, cases[i].n);
            for (size_t k = 0; k < keylen; k++)
                assert_int_equal(key[k], k);
        } else {
            assert_int_equal(keylen, 0);
        }
        free(secret);
    }
    /* the Standard Webhooks test secret: 24 bytes */
    assert_true(push_webhook_key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", key, &keylen));
    assert_int_equal(keylen, 24);
    assert_memory_equal(key,
                        "\x31\xf2\x90\xf6\xbf\x06\x29\x8a\xab\x4f\x08\xd4\x3c\x3f\x08\x2c\xf6"
                        "\x48\xa3\x62\xda\x2d\xa4\xb0",
                        24);
}

static void test_key_refuses_bad_base64(void **state)
{
    static const char *const bad[] = {
        "whsec_",
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS",   /* not a multiple of 4 */
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLa!w",  /* not the alphabet */
        "whsec_MfKQ9r8GKYqrTwjU PD8ILPZIo2LaLaSw", /* a space */
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n",
        "whsec_MfKQ9r8G_YqrTwjUPD8ILPZIo2LaLaSw", /* base64url is not standard base64 */
    };
    uint8_t key[512];
    size_t keylen;

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        keylen = 999;
        assert_false(push_webhook_key(bad[i], key, &keylen));
        assert_int_equal(keylen, 0);
    }
}

static void test_key_of_raw_secrets(void **state)
{
    char secret[514];
    uint8_t key[512];
    size_t keylen;

    (void)state;
    assert_true(push_webhook_key("0123456789abcdef01234567", key, &keylen));
    assert_int_equal(keylen, 24);
    assert_memory_equal(key, "0123456789abcdef01234567", 24);
    /* "whsec" without the underscore is a raw secret */
    assert_true(push_webhook_key("whsecMfKQ9r8GKYqrTwjUPD8ILPZIo2", key, &keylen));
    assert_int_equal(keylen, 31);
    memset(secret, 'k', 512);
    secret[512] = '\0';
    assert_true(push_webhook_key(secret, key, &keylen));
    assert_int_equal(keylen, 512);
    secret[512] = 'k';
    secret[513] = '\0';
    assert_false(push_webhook_key(secret, key, &keylen));
    assert_int_equal(keylen, 0);
}

static void test_signature_vectors(void **state)
{
    static const struct {
        const char *secret, *id, *ts, *body, *sig;
    } cases[] = {
        /*
         * The Standard Webhooks specification's own example. Recomputed with
         *   key=$(printf MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw | base64 -d | xxd -p -c 100)
         *   printf '%s' 'msg_p5jXN8AQM9LWM0D4loKWxJek.1614265330.{"test": 2432232314}' |
         *     openssl dgst -sha256 -mac HMAC -macopt hexkey:$key -binary | base64
         */
        {"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek", "1614265330",
         "{\"test\": 2432232314}", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="},
        /*
         * A raw secret is its own key:
         *   printf '%s' 'mg_hook_fraud_production_7.1700000000.{"type":"alias.updated"}' |
         *     openssl dgst -sha256 -hmac '0123456789abcdef01234567' -binary | base64
         */
        {"0123456789abcdef01234567", "mg_hook_fraud_production_7", "1700000000",
         "{\"type\":\"alias.updated\"}", "v1,rDeI6nrmUx9iU4YmGhTlcyyjUH5ITc6SATs36lGL1UQ="},
    };
    char sig[64];

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_true(
            push_webhook_sign(cases[i].secret, cases[i].id, cases[i].ts, cases[i].body, sig));
        assert_string_equal(sig, cases[i].sig);
    }
    /* every part is signed: another timestamp, id or body gives another signature */
    assert_true(push_webhook_sign(cases[0].secret, cases[0].id, "1614265331", cases[0].body, sig));
    assert_string_not_equal(sig, cases[0].sig);
    assert_true(push_webhook_sign(cases[0].secret, "msg_x", cases[0].ts, cases[0].body, sig));
    assert_string_not_equal(sig, cases[0].sig);
    assert_true(push_webhook_sign(cases[0].secret, cases[0].id, cases[0].ts, "{}", sig));
    assert_string_not_equal(sig, cases[0].sig);
    /* a whsec_ secret that decodes to no valid key signs nothing */
    assert_false(push_webhook_sign("whsec_AAAA", "id", "1", "{}", sig));
}

static void test_validate(void **state)
{
    static const struct {
        const char *body;
        const char *field; /* NULL: accepted */
        const char *message;
    } cases[] = {
        {"{\"kind\":\"webhook\",\"url\":\"https://hooks.example/mg\"}", NULL, NULL},
        {"{\"url\":\"http://10.1.2.3:8080/hook\",\"secret\":\"0123456789abcdef01234567\"}", NULL,
         NULL},
        {"{\"url\":\"http://[::ffff:10.0.0.1]/\"}", NULL, NULL}, /* judged as IPv4 */
        {"{\"url\":\"https://h/\",\"secret\":\"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\"}", NULL,
         NULL},
        {"{\"url\":\"https://h/\",\"headers\":{}}", "headers",
         "unknown field 'headers' for a webhook gateway"},
        {"{\"secret\":\"0123456789abcdef01234567\"}", "url", "a webhook needs 'url'"},
        {"{\"url\":5}", "url", "a webhook needs 'url'"},
        {"{\"url\":\"not a url\"}", "url", "url is not a valid absolute http(s) URL"},
        {"{\"url\":\"/relative\"}", "url", "not a valid absolute"},
        {"{\"url\":\"ftp://h/x\"}", "url", "webhook URLs must be http or https, not ftp"},
        {"{\"url\":\"https://user:pw@h/\"}", "url", "put no credentials in the URL"},
        {"{\"url\":\"http://169.254.169.254/latest/meta-data\"}", "url",
         "webhooks may not go to 169.254.169.254 (not in the allowed networks"},
        {"{\"url\":\"http://11.0.0.1/\"}", "url", "may not go to 11.0.0.1"},
        {"{\"url\":\"http://[fe80::1]/\"}", "url", "may not go to [fe80::1]"},
        {"{\"url\":\"http://[::ffff:169.254.169.254]/\"}", "url", "may not go to"},
        {"{\"url\":\"https://h/\",\"secret\":\"0123456789abcdef0123456\"}", "secret",
         "a webhook needs a 'secret': a Standard Webhooks 'whsec_...' secret, or 24 to 512"},
        {"{\"url\":\"https://h/\",\"secret\":\"whsec_AAAA\"}", "secret",
         "a whsec_ secret is 'whsec_' and the standard base64 of 24 to 64 random bytes"},
        {"{\"url\":\"https://h/\",\"secret\":5}", "secret", "'secret' is a string"},
        {"{\"url\":\"https://h/\",\"secret\":\"0123456789ab\\u0000cdef01234567\"}", "secret",
         "'secret' is a string"},
    };
    struct push_allow allow = {0};
    struct push_env env = {&allow, NULL, NULL};
    struct mg_error err;

    (void)state;
    /* IP-literal hosts are checked now (names when the socket opens) */
    assert_int_equal(push_allow_add(&allow, "10.0.0.0/8", &err), MG_OK);
    assert_int_equal(push_allow_add(&allow, "::/0", &err), MG_OK);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *body = json_loads(cases[i].body, JSON_ALLOW_NUL, NULL), *config = NULL;
        char *secret = NULL;
        enum mg_code rc;

        assert_non_null(body);
        memset(&err, 0, sizeof(err));
        rc = push_webhook_validate(&env, body, &config, &secret, &err);
        if (cases[i].field == NULL) {
            const char *given = json_string_value(json_object_get(body, "secret"));

            assert_int_equal(rc, MG_OK);
            /* the stored config never holds the secret */
            assert_int_equal(json_object_size(config), 1);
            assert_string_equal(json_string_value(json_object_get(config, "url")),
                                json_string_value(json_object_get(body, "url")));
            assert_non_null(secret);
            if (given)
                assert_string_equal(secret, given);
            json_decref(config);
            free(secret);
        } else {
            assert_int_equal(rc, MG_EINVAL);
            assert_string_equal(err.field, cases[i].field);
            assert_non_null(strstr(err.message, cases[i].message));
        }
        json_decref(body);
    }
}

static void test_validate_makes_a_secret(void **state)
{
    json_t *body = json_pack("{s:s}", "url", "https://hooks.example/mg"), *config = NULL;
    struct push_allow allow = {0};
    struct push_env env = {&allow, NULL, NULL};
    struct mg_error err = {0};
    char *a = NULL, *b = NULL;
    uint8_t key[512];
    size_t keylen;

    (void)state;
    assert_int_equal(push_webhook_validate(&env, body, &config, &a, &err), MG_OK);
    json_decref(config);
    assert_int_equal(push_webhook_validate(&env, body, &config, &b, &err), MG_OK);
    json_decref(config);
    /* "whsec_" + base64 of 32 random bytes, different each time */
    assert_int_equal(strncmp(a, "whsec_", 6), 0);
    assert_int_equal(strlen(a), 6 + 44);
    assert_true(push_webhook_key(a, key, &keylen));
    assert_int_equal(keylen, 32);
    assert_string_not_equal(a, b);
    free(a);
    free(b);
    json_decref(body);
}

static void test_body(void **state)
{
    struct store_delivery d;
    json_t *got, *routes;
    char *text;

    (void)state;
    memset(&d, 0, sizeof(d));
    snprintf(d.model, sizeof(d.model), "fraud");
    snprintf(d.alias, sizeof(d.alias), "production");
    d.generation = 7;
    routes = json_pack("[{s:i, s:i}, {s:i, s:i}]", "version", 3, "weight", 90, "version", 4,
                       "weight", 10);
    d.payload = json_pack("{s:O}", "routes", routes);
    text = push_webhook_body(&d, 1700000000123);
    assert_non_null(text);
    got = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
    assert_non_null(got);
    assert_int_equal(json_object_size(got), 9);
    assert_string_equal(json_string_value(json_object_get(got, "type")), "alias.updated");
    assert_string_equal(json_string_value(json_object_get(got, "model")), "fraud");
    assert_string_equal(json_string_value(json_object_get(got, "alias")), "production");
    assert_int_equal(json_integer_value(json_object_get(got, "generation")), 7);
    assert_true(json_equal(json_object_get(got, "routes"), routes));
    assert_true(json_is_null(json_object_get(got, "promotion")));
    /* a row written before match and shadow existed: none of either */
    assert_int_equal(json_array_size(json_object_get(got, "match")), 0);
    assert_true(json_is_array(json_object_get(got, "match")));
    assert_true(json_is_null(json_object_get(got, "shadow")));
    assert_string_equal(json_string_value(json_object_get(got, "timestamp")),
                        "2023-11-14T22:13:20.123Z");
    assert_null(strchr(text, '\n')); /* compact: the signed bytes are the sent bytes */
    json_decref(got);
    free(text);
    /* docs/contract.md "Routing strategies": the body carries match and shadow as the payload has
     * them */
    json_object_set_new(d.payload, "match",
                        json_pack("[{s:s, s:s, s:i, s:s}]", "header", "x-tenant", "value", "acme",
                                  "version", 5, "artifact", "sha256:00"));
    json_object_set_new(
        d.payload, "shadow",
        json_pack("{s:i, s:i, s:s}", "version", 6, "percent", 25, "artifact", "sha256:11"));
    text = push_webhook_body(&d, 0);
    got = json_loads(text, 0, NULL);
    assert_true(json_equal(json_object_get(got, "match"), json_object_get(d.payload, "match")));
    assert_true(json_equal(json_object_get(got, "shadow"), json_object_get(d.payload, "shadow")));
    json_decref(got);
    free(text);
    /* a promotion step says which */
    json_object_set_new(d.payload, "promotion", json_pack("{s:s}", "id", "p_1"));
    text = push_webhook_body(&d, 0);
    got = json_loads(text, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(json_object_get(got, "promotion"), "id")),
                        "p_1");
    assert_null(json_object_get(got, "event")); /* a plain step: no event */
    json_decref(got);
    free(text);
    /* docs/contract.md "Live canary analysis": an automatic rollback says why */
    json_object_set_new(d.payload, "event",
                        json_pack("{s:s, s:s}", "type", "analysis.failed", "detail",
                                  "automatic rollback: metric error_rate of v4: candidate rate "
                                  "0.3 is over max 0.05 (candidate 0.3, baseline v3 0)"));
    text = push_webhook_body(&d, 0);
    got = json_loads(text, 0, NULL);
    assert_true(json_equal(json_object_get(got, "event"), json_object_get(d.payload, "event")));
    json_decref(got);
    free(text);
    json_decref(routes);
    json_decref(d.payload);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_key_of_whsec_secrets),
        cmocka_unit_test(test_key_refuses_bad_base64),
        cmocka_unit_test(test_key_of_raw_secrets),
        cmocka_unit_test(test_signature_vectors),
        cmocka_unit_test(test_validate),
        cmocka_unit_test(test_validate_makes_a_secret),
        cmocka_unit_test(test_body),
    };

    return cmocka_run_group_tests_name("unit_gateways_webhook", tests, NULL, NULL);
}
