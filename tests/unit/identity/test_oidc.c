/*
 * test_oidc.c - identity/oidc.c: discovery, the JWKS cache, refetch on an unknown kid (at
 * most once a refetch interval), key rotation, and the URL rules. The provider is a fake
 * fetcher serving documents from memory, with a clock the test moves.
 */
#include "mint.h"

#include "identity/jwt.h"
#include "identity/oidc.h"

#define ISS "https://idp.example"
#define AUD "modelgate"
#define T0 ((int64_t)1800000000 * 1000)

struct provider {
    char *discovery;
    char *jwks;
    int discovery_gets, jwks_gets;
    bool down;
};

static enum mg_code fake_fetch(void *ctx, const char *url, struct mg_buf *body,
                               struct mg_error *err)
{
    struct provider *p = ctx;

    if (p->down)
        return mg_fail(err, MG_EUNAVAIL, NULL, "cannot fetch %s: down", url);
    if (strcmp(url, ISS "/.well-known/openid-configuration") == 0) {
        p->discovery_gets++;
        return mg_buf_puts(body, p->discovery);
    }
    if (strcmp(url, ISS "/jwks") == 0) {
        p->jwks_gets++;
        return mg_buf_puts(body, p->jwks);
    }
    return mg_fail(err, MG_EUNAVAIL, NULL, "%s answered HTTP 404", url);
}

static void publish(struct provider *p, cjose_jwk_t *const *keys, size_t n)
{
    free(p->jwks);
    p->jwks = mint_jwks(keys, n);
}

static char *token_for(const cjose_jwk_t *k, const char *kid, int64_t now_ms)
{
    json_t *c = json_pack("{s:s, s:s, s:s, s:I}", "iss", ISS, "aud", AUD, "sub", "ci-1", "exp",
                          (json_int_t)(now_ms / 1000 + 86400));
    char *t = mint_sign(k, "ES256", kid, c);

    json_decref(c);
    return t;
}

static enum mg_code verify(struct id_oidc *o, const char *t, int64_t now_ms, struct mg_error *err)
{
    json_t *claims = NULL;
    enum mg_code rc = id_oidc_verify(o, t, strlen(t), AUD, now_ms, &claims, err);

    if (rc == MG_OK)
        assert_string_equal(json_string_value(json_object_get(claims, "sub")), "ci-1");
    else
        assert_null(claims);
    json_decref(claims);
    return rc;
}

static struct id_oidc *provider_new(struct provider *p)
{
    struct id_oidc_options opt = {.issuer = ISS, .fetch = fake_fetch, .fetch_ctx = p};
    struct id_oidc *o = NULL;
    struct mg_error err = {0};

    p->discovery = strdup("{\"issuer\":\"" ISS "\",\"jwks_uri\":\"" ISS "/jwks\","
                          "\"authorization_endpoint\":\"" ISS "/auth\","
                          "\"token_endpoint\":\"" ISS "/token\"}");
    assert_int_equal(id_oidc_new(&opt, &o, &err), MG_OK);
    assert_string_equal(id_oidc_issuer(o), ISS);
    return o;
}

static void provider_free(struct provider *p, struct id_oidc **o)
{
    id_oidc_free(o);
    assert_null(*o);
    free(p->discovery);
    free(p->jwks);
}

static void test_rotation(void **state)
{
    struct provider p = {0};
    struct id_oidc *o = provider_new(&p);
    cjose_jwk_t *a = mint_ec("a"), *b = mint_ec("b"), *c = mint_ec("c");
    cjose_jwk_t *set[2];
    struct mg_error err = {0};
    char *ta, *tb, *tc;
    int64_t now = T0;

    (void)state;
    set[0] = a;
    publish(&p, set, 1);
    ta = token_for(a, "a", now);
    tb = token_for(b, "b", now);
    tc = token_for(c, "c", now);
    assert_int_equal(verify(o, ta, now, &err), MG_OK);
    assert_int_equal(p.jwks_gets, 1);
    assert_int_equal(verify(o, ta, now + 1000, &err), MG_OK);
    assert_int_equal(p.jwks_gets, 1); /* cached */

    /* The provider adds b: a token signed by b makes the cache refetch once and accepts it */
    set[1] = b;
    publish(&p, set, 2);
    now += ID_REFETCH_INTERVAL_MS;
    assert_int_equal(verify(o, tb, now, &err), MG_OK);
    assert_int_equal(p.jwks_gets, 2);
    assert_int_equal(id_oidc_jwks_fetches(o), 2);

    /* An unknown kid within the interval fetches nothing more: refused, no load on the IdP */
    assert_int_equal(verify(o, tc, now + 1000, &err), MG_EUNAUTH);
    assert_string_equal(err.field, "kid");
    assert_int_equal(verify(o, tc, now + 2000, &err), MG_EUNAUTH);
    assert_int_equal(p.jwks_gets, 2);

    /* The provider retires a: a still verifies until the cache refetches... */
    set[0] = b;
    publish(&p, set, 1);
    assert_int_equal(verify(o, ta, now + 3000, &err), MG_OK);
    /* ...which the next unknown kid after the interval triggers; then a is refused */
    now += ID_REFETCH_INTERVAL_MS;
    assert_int_equal(verify(o, tc, now, &err), MG_EUNAUTH);
    assert_int_equal(p.jwks_gets, 3);
    assert_int_equal(verify(o, ta, now + 1, &err), MG_EUNAUTH);
    assert_string_equal(err.field, "kid");
    assert_int_equal(verify(o, tb, now + 2, &err), MG_OK);

    /* The TTL refetches by itself too */
    set[0] = a;
    publish(&p, set, 1);
    now += ID_JWKS_TTL_MS;
    assert_int_equal(verify(o, ta, now, &err), MG_OK);
    assert_int_equal(verify(o, tb, now + 1, &err), MG_EUNAUTH);

    free(ta);
    free(tb);
    free(tc);
    cjose_jwk_release(a);
    cjose_jwk_release(b);
    cjose_jwk_release(c);
    provider_free(&p, &o);
}

static void test_provider_down(void **state)
{
    struct provider p = {0};
    struct id_oidc *o = provider_new(&p);
    cjose_jwk_t *a = mint_ec("a");
    struct mg_error err = {0};
    char *ta, *authz = NULL, *tok = NULL;
    int64_t now = T0;

    (void)state;
    publish(&p, &a, 1);
    ta = token_for(a, "a", now);
    p.down = true;
    assert_int_equal(verify(o, ta, now, &err), MG_EUNAVAIL);
    assert_non_null(strstr(err.message, "down"));
    /* within the interval nothing is fetched again, even with the provider back */
    p.down = false;
    assert_int_equal(verify(o, ta, now + 1000, &err), MG_EUNAVAIL);
    assert_int_equal(p.discovery_gets, 0);
    now += ID_REFETCH_INTERVAL_MS;
    assert_int_equal(verify(o, ta, now, &err), MG_OK);
    assert_int_equal(id_oidc_endpoints(o, now, &authz, &tok, &err), MG_OK);
    assert_string_equal(authz, ISS "/auth");
    assert_string_equal(tok, ISS "/token");
    free(authz);
    free(tok);

    /* A failing TTL refetch keeps the keys it had */
    p.down = true;
    now += ID_JWKS_TTL_MS;
    assert_int_equal(verify(o, ta, now, &err), MG_OK);

    free(ta);
    cjose_jwk_release(a);
    provider_free(&p, &o);
}

static void test_discovery_must_name_the_issuer(void **state)
{
    struct provider p = {0};
    struct id_oidc *o = provider_new(&p);
    cjose_jwk_t *a = mint_ec("a");
    struct mg_error err = {0};
    char *ta;

    (void)state;
    publish(&p, &a, 1);
    free(p.discovery);
    p.discovery = strdup("{\"issuer\":\"https://evil.example\",\"jwks_uri\":\"" ISS "/jwks\"}");
    ta = token_for(a, "a", T0);
    assert_int_equal(verify(o, ta, T0, &err), MG_EUNAVAIL);
    assert_non_null(strstr(err.message, "does not name issuer"));
    assert_int_equal(p.jwks_gets, 0);
    /* a plain-http jwks_uri off loopback is refused too */
    free(p.discovery);
    p.discovery = strdup("{\"issuer\":\"" ISS "\",\"jwks_uri\":\"http://idp.example/jwks\"}");
    assert_int_equal(verify(o, ta, T0 + ID_REFETCH_INTERVAL_MS, &err), MG_EUNAVAIL);
    assert_non_null(strstr(err.message, "jwks_uri"));
    free(ta);
    cjose_jwk_release(a);
    provider_free(&p, &o);
}

static void test_url_rules(void **state)
{
    static const struct {
        const char *url;
        bool ok;
    } cases[] = {
        {"https://idp.example", true},
        {"https://idp.example/realms/x", true},
        {"http://127.0.0.1:8080", true},
        {"http://[::1]:9000/", true},
        {"http://localhost:3000", true},
        {"http://idp.example", false},
        {"http://localhost.evil.example", false},
        {"https://", false},
        {"ftp://idp.example", false},
        {"", false},
    };
    struct id_oidc_options opt = {.issuer = "http://idp.example"};
    struct id_oidc *o = NULL;
    struct mg_error err = {0};

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        if (id_url_allowed(cases[i].url) != cases[i].ok)
            fail_msg("%s: expected %s", cases[i].url, cases[i].ok ? "allowed" : "refused");
    assert_int_equal(id_oidc_new(&opt, &o, &err), MG_EINVAL);
    assert_null(o);
}

/* Trusted publishers' claim rules: exact, or a prefix ending in '*'; strings only. */
static void test_claims_match(void **state)
{
    static const struct {
        const char *rules, *claims, *failed; /* failed NULL: a match */
    } cases[] = {
        {"{\"repository\":\"acme/fraud\"}", "{\"repository\":\"acme/fraud\"}", NULL},
        {"{\"repository\":\"acme/fraud\"}", "{\"repository\":\"acme/fraud2\"}", "repository"},
        {"{\"ref\":\"refs/tags/v*\"}", "{\"ref\":\"refs/tags/v1.2\"}", NULL},
        {"{\"ref\":\"refs/tags/v*\"}", "{\"ref\":\"refs/heads/v1\"}", "ref"},
        {"{\"ref\":\"refs/heads/main\",\"environment\":\"release\"}",
         "{\"ref\":\"refs/heads/main\"}", "environment"}, /* a missing claim */
        {"{\"run\":\"1\"}", "{\"run\":1}", "run"},        /* not a string */
        {"{\"a\":\"x\"}", "{\"a\":\"x\",\"b\":\"extra\"}", NULL},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *r = json_loads(cases[i].rules, 0, NULL), *c = json_loads(cases[i].claims, 0, NULL);
        const char *failed = NULL;
        bool ok = id_claims_match(r, c, &failed);

        if (ok != (cases[i].failed == NULL) ||
            (!ok && (failed == NULL || strcmp(failed, cases[i].failed) != 0)))
            fail_msg("case %zu: got %s (%s)", i, ok ? "match" : "mismatch", failed ? failed : "-");
        json_decref(r);
        json_decref(c);
    }
}

static void test_registry(void **state)
{
    struct id_registry *reg = id_registry_new(NULL, NULL);
    struct id_oidc *a = NULL, *b = NULL, *again = NULL;
    struct mg_error err = {0};
    char url[64];

    (void)state;
    assert_non_null(reg);
    assert_int_equal(id_registry_get(reg, "https://ci.example", &a, &err), MG_OK);
    assert_int_equal(id_registry_get(reg, "https://other.example", &b, &err), MG_OK);
    assert_int_equal(id_registry_get(reg, "https://ci.example", &again, &err), MG_OK);
    assert_ptr_equal(a, again);
    assert_ptr_not_equal(a, b);
    assert_int_equal(id_registry_get(reg, "http://ci.example", &again, &err), MG_EINVAL);
    for (int i = 2; i < ID_REGISTRY_MAX; i++) {
        snprintf(url, sizeof(url), "https://ci%d.example", i);
        assert_int_equal(id_registry_get(reg, url, &again, &err), MG_OK);
    }
    assert_int_equal(id_registry_get(reg, "https://one-too-many.example", &again, &err),
                     MG_ETOOBIG);
    id_registry_free(&reg);
    assert_null(reg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rotation),
        cmocka_unit_test(test_provider_down),
        cmocka_unit_test(test_discovery_must_name_the_issuer),
        cmocka_unit_test(test_url_rules),
        cmocka_unit_test(test_claims_match),
        cmocka_unit_test(test_registry),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
