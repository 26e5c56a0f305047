/*
 * test_jwt.c - identity/jwt.c: JWKS parsing and JWT verification. Tokens are minted here
 * with cjose (mint.h); every refusal class has its own test, and each checks the check it
 * names (err.field) and that the message quotes no part of the token.
 */
#include "mint.h"

#include "identity/jwt.h"

#define ISS "https://idp.example"
#define AUD "modelgate"
#define NOW 1800000000

struct fx {
    cjose_jwk_t *rsa, *ec, *other;
    struct id_jwks *keys;
    char *jwks_text;
};

static json_t *claims_at(int64_t iat, int64_t exp)
{
    json_t *c =
        json_pack("{s:s, s:s, s:s, s:I, s:I, s:s}", "iss", ISS, "aud", AUD, "sub", "user-42", "iat",
                  (json_int_t)iat, "exp", (json_int_t)exp, "email", "ada@example.com");
    assert_non_null(c);
    return c;
}

static json_t *good_claims(void)
{
    return claims_at(NOW - 10, NOW + 600);
}

static int setup(void **state)
{
    struct fx *f = calloc(1, sizeof(*f));
    struct mg_error err = {0};
    cjose_jwk_t *pub[2];

    assert_non_null(f);
    f->rsa = mint_rsa("rsa-1", 2048);
    f->ec = mint_ec("ec-1");
    f->other = mint_rsa("rsa-unpublished", 2048);
    pub[0] = f->rsa;
    pub[1] = f->ec;
    f->jwks_text = mint_jwks(pub, 2);
    assert_int_equal(id_jwks_parse(f->jwks_text, strlen(f->jwks_text), &f->keys, &err), MG_OK);
    assert_int_equal(id_jwks_count(f->keys), 2);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fx *f = *state;

    id_jwks_free(&f->keys);
    assert_null(f->keys);
    cjose_jwk_release(f->rsa);
    cjose_jwk_release(f->ec);
    cjose_jwk_release(f->other);
    free(f->jwks_text);
    free(f);
    return 0;
}

static const struct id_jwt_expect expect = {ISS, AUD, NOW, 60};

/* The token is refused by the check named field, and the message quotes none of it. */
static void refused(const struct fx *f, const char *token, const struct id_jwt_expect *e,
                    const char *field)
{
    struct mg_error err = {0};
    json_t *claims = (json_t *)0x1;
    const char *dot1 = strchr(token, '.'), *dot2 = strrchr(token, '.');

    assert_int_equal(id_jwt_verify(token, strlen(token), f->keys, e, &claims, &err), MG_EUNAUTH);
    assert_null(claims);
    assert_string_equal(err.field, field);
    assert_true(err.message[0] != '\0');
    assert_null(strstr(err.message, token));
    if (dot1 && dot2 && dot1 != dot2) {
        char part[17];
        /* no 16-character run of the header, the payload or the signature */
        snprintf(part, sizeof(part), "%.16s", token);
        assert_null(strstr(err.message, part));
        snprintf(part, sizeof(part), "%.16s", dot1 + 1);
        assert_null(strstr(err.message, part));
        if (strlen(dot2 + 1) >= 16) {
            snprintf(part, sizeof(part), "%.16s", dot2 + 1);
            assert_null(strstr(err.message, part));
        }
    }
    assert_null(strstr(err.message, "user-42"));
}

static void test_accepts_rs256_ps256_es256(void **state)
{
    struct fx *f = *state;
    static const char *const algs[] = {"RS256", "PS256", "ES256"};

    for (size_t i = 0; i < 3; i++) {
        json_t *c = good_claims(), *got = NULL;
        const cjose_jwk_t *k = i < 2 ? f->rsa : f->ec;
        char *t = mint_sign(k, algs[i], i < 2 ? "rsa-1" : "ec-1", c);
        struct mg_error err = {0};

        assert_int_equal(id_jwt_verify(t, strlen(t), f->keys, &expect, &got, &err), MG_OK);
        assert_string_equal(json_string_value(json_object_get(got, "sub")), "user-42");
        assert_string_equal(json_string_value(json_object_get(got, "email")), "ada@example.com");
        json_decref(got);
        json_decref(c);
        free(t);
    }
}

static void test_aud_array_and_leeway(void **state)
{
    struct fx *f = *state;
    json_t *c = claims_at(NOW - 100, NOW - 30), *got = NULL; /* expired 30 s ago: in leeway */
    struct mg_error err = {0};
    char *t;

    json_object_set_new(c, "aud", json_pack("[s,s]", "other", AUD));
    json_object_set_new(c, "nbf", json_integer(NOW + 30)); /* 30 s early: in leeway */
    t = mint_sign(f->rsa, "RS256", "rsa-1", c);
    assert_int_equal(id_jwt_verify(t, strlen(t), f->keys, &expect, &got, &err), MG_OK);
    json_decref(got);
    free(t);
    json_decref(c);
}

static void test_refuses_alg_none(void **state)
{
    struct fx *f = *state;
    json_t *c = good_claims();
    char *payload = json_dumps(c, JSON_COMPACT);
    char *t = mint_raw("{\"alg\":\"none\",\"kid\":\"rsa-1\"}", payload, "");
    char *t2 = mint_raw("{\"alg\":\"None\",\"kid\":\"rsa-1\"}", payload, "");

    refused(f, t, &expect, "alg");
    refused(f, t2, &expect, "alg");
    free(t);
    free(t2);
    free(payload);
    json_decref(c);
}

/* The classic confusion: HMAC keyed with the RSA public key the verifier holds. */
static void test_refuses_hs256_with_rsa_public_key(void **state)
{
    struct fx *f = *state;
    cjose_err cerr;
    char *pub = cjose_jwk_to_json(f->rsa, false, &cerr);
    cjose_jwk_t *oct;
    json_t *c = good_claims();
    char *t;

    assert_non_null(pub);
    oct = cjose_jwk_create_oct_spec((const uint8_t *)pub, strlen(pub), &cerr);
    assert_non_null(oct);
    t = mint_sign(oct, "HS256", "rsa-1", c);
    refused(f, t, &expect, "alg");
    free(t);
    json_decref(c);
    cjose_jwk_release(oct);
    cjose_get_dealloc()(pub);
}

static void test_refuses_unpublished_kid(void **state)
{
    struct fx *f = *state;
    json_t *c = good_claims();
    char *t = mint_sign(f->other, "RS256", "rsa-unpublished", c);
    /* the same unpublished key claiming a published kid fails on the signature */
    char *t2 = mint_sign(f->other, "RS256", "rsa-1", c);
    /* an EC kid named with an RSA algorithm: no key of that type has that kid */
    char *t3 = mint_sign(f->other, "RS256", "ec-1", c);

    refused(f, t, &expect, "kid");
    refused(f, t2, &expect, "signature");
    refused(f, t3, &expect, "kid");
    free(t);
    free(t2);
    free(t3);
    json_decref(c);
}

static void test_refuses_expired(void **state)
{
    struct fx *f = *state;
    json_t *c = claims_at(NOW - 1000, NOW - 61);
    char *t = mint_sign(f->rsa, "RS256", "rsa-1", c);
    json_t *c2 = claims_at(NOW - 1000, NOW);
    char *t2;

    json_object_del(c2, "exp");
    t2 = mint_sign(f->rsa, "RS256", "rsa-1", c2);
    refused(f, t, &expect, "exp");
    refused(f, t2, &expect, "exp"); /* no exp at all */
    free(t);
    free(t2);
    json_decref(c);
    json_decref(c2);
}

static void test_refuses_not_yet_valid(void **state)
{
    struct fx *f = *state;
    json_t *c = good_claims();
    char *t;

    json_object_set_new(c, "nbf", json_integer(NOW + 61));
    t = mint_sign(f->ec, "ES256", "ec-1", c);
    refused(f, t, &expect, "nbf");
    free(t);
    json_decref(c);
}

static void test_refuses_wrong_audience(void **state)
{
    struct fx *f = *state;
    json_t *c = good_claims();
    char *t, *t2;

    json_object_set_new(c, "aud", json_string("someone-else"));
    t = mint_sign(f->rsa, "RS256", "rsa-1", c);
    json_object_del(c, "aud");
    t2 = mint_sign(f->rsa, "RS256", "rsa-1", c);
    refused(f, t, &expect, "aud");
    refused(f, t2, &expect, "aud");
    free(t);
    free(t2);
    json_decref(c);
}

static void test_refuses_wrong_issuer(void **state)
{
    struct fx *f = *state;
    json_t *c = good_claims();
    char *t;

    json_object_set_new(c, "iss", json_string("https://evil.example"));
    t = mint_sign(f->rsa, "RS256", "rsa-1", c);
    refused(f, t, &expect, "iss");
    free(t);
    json_decref(c);
}

static void test_refuses_tampered_payload(void **state)
{
    struct fx *f = *state;
    json_t *c = good_claims();
    char *t = mint_sign(f->rsa, "RS256", "rsa-1", c), *bad, *payload;
    char *t2 = mint_sign(f->ec, "ES256", "ec-1", c);
    char *bad2;

    json_object_set_new(c, "sub", json_string("admin"));
    payload = json_dumps(c, JSON_COMPACT);
    bad = mint_tamper(t, payload);
    bad2 = mint_tamper(t2, payload);
    refused(f, bad, &expect, "signature");
    refused(f, bad2, &expect, "signature");
    /* one changed signature byte */
    t[strlen(t) - 5] = t[strlen(t) - 5] == 'A' ? 'B' : 'A';
    refused(f, t, &expect, "signature");
    free(t);
    free(t2);
    free(bad);
    free(bad2);
    free(payload);
    json_decref(c);
}

static void test_refuses_crit_and_garbage(void **state)
{
    struct fx *f = *state;
    static const char *const garbage[] = {"", "a", "a.b", "a.b.c.d", "!!!.???.***",
                                          "eyJhbGciOiJSUzI1NiJ9..", "e30.e30.e30",
                                          /* cjose aborts on these lengths (1 mod 4) */
                                          "eyJhb.e30.AAAA", "e30.e30.AAAAA", "e30.eyJhb.AAAA"};
    json_t *c = good_claims();
    char *payload = json_dumps(c, JSON_COMPACT);
    char *t = mint_raw("{\"alg\":\"RS256\",\"kid\":\"rsa-1\",\"crit\":[\"exp\"],\"exp\":1}",
                       payload, "AAAA");

    refused(f, t, &expect, "crit");
    for (size_t i = 0; i < sizeof(garbage) / sizeof(garbage[0]); i++) {
        struct mg_error err = {0};
        json_t *claims = NULL;
        assert_int_equal(
            id_jwt_verify(garbage[i], strlen(garbage[i]), f->keys, &expect, &claims, &err),
            MG_EUNAUTH);
        assert_null(claims);
    }
    free(t);
    free(payload);
    json_decref(c);
}

static void test_oversized_token(void **state)
{
    struct fx *f = *state;
    size_t n = ID_JWT_MAX + 1;
    char *t = malloc(n + 1);

    memset(t, 'a', n);
    t[n] = '\0';
    refused(f, t, &expect, "token");
    free(t);
}

static void test_jwks_skips_unusable_keys(void **state)
{
    cjose_jwk_t *small = mint_rsa("small", 1024), *ok = mint_ec("ec-ok");
    cjose_jwk_t *pair[2] = {small, ok};
    char *text = mint_jwks(pair, 2);
    json_t *doc = json_loads(text, 0, NULL), *enc;
    struct id_jwks *keys = NULL;
    struct mg_error err = {0};
    char *again;

    (void)state;
    /* an encryption key and an HMAC secret are skipped too */
    enc = json_deep_copy(json_array_get(json_object_get(doc, "keys"), 1));
    json_object_set_new(enc, "use", json_string("enc"));
    json_object_set_new(enc, "kid", json_string("enc-1"));
    json_array_append_new(json_object_get(doc, "keys"), enc);
    json_array_append_new(json_object_get(doc, "keys"),
                          json_pack("{s:s,s:s,s:s}", "kty", "oct", "k", "c2VjcmV0", "kid", "h"));
    /* an EC key whose x has a length cjose would abort on */
    json_array_append_new(json_object_get(doc, "keys"),
                          json_pack("{s:s,s:s,s:s,s:s,s:s}", "kty", "EC", "crv", "P-256", "x",
                                    "AAAAA", "y", "AAAA", "kid", "cut"));
    again = json_dumps(doc, JSON_COMPACT);
    assert_int_equal(id_jwks_parse(again, strlen(again), &keys, &err), MG_OK);
    assert_int_equal(id_jwks_count(keys), 1);
    assert_true(id_jwks_has_kid(keys, "ec-ok"));
    assert_false(id_jwks_has_kid(keys, "small"));
    assert_false(id_jwks_has_kid(keys, "enc-1"));
    assert_false(id_jwks_has_kid(keys, "h"));
    assert_false(id_jwks_has_kid(keys, "cut"));
    id_jwks_free(&keys);
    assert_int_equal(id_jwks_parse("{\"nokeys\":1}", 12, &keys, &err), MG_EINVAL);
    assert_null(keys);
    assert_int_equal(id_jwks_parse("not json", 8, &keys, &err), MG_EINVAL);
    free(again);
    free(text);
    json_decref(doc);
    cjose_jwk_release(small);
    cjose_jwk_release(ok);
}

static void test_no_kid_needs_one_fitting_key(void **state)
{
    struct fx *f = *state;
    json_t *c = good_claims(), *got = NULL;
    char *t = mint_sign(f->rsa, "RS256", NULL, c);
    struct mg_error err = {0};

    /* one RSA key in the set: unambiguous */
    assert_int_equal(id_jwt_verify(t, strlen(t), f->keys, &expect, &got, &err), MG_OK);
    json_decref(got);
    free(t);
    json_decref(c);
}

static void test_peek(void **state)
{
    struct fx *f = *state;
    json_t *c = good_claims();
    char *t = mint_sign(f->rsa, "RS256", "rsa-1", c), *kid = NULL, *iss = NULL;
    struct mg_error err = {0};

    assert_int_equal(id_jwt_peek_kid(t, strlen(t), &kid, &err), MG_OK);
    assert_string_equal(kid, "rsa-1");
    assert_int_equal(id_jwt_peek_issuer(t, strlen(t), &iss, &err), MG_OK);
    assert_string_equal(iss, ISS);
    free(kid);
    free(iss);
    free(t);
    json_decref(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_accepts_rs256_ps256_es256),
        cmocka_unit_test(test_aud_array_and_leeway),
        cmocka_unit_test(test_refuses_alg_none),
        cmocka_unit_test(test_refuses_hs256_with_rsa_public_key),
        cmocka_unit_test(test_refuses_unpublished_kid),
        cmocka_unit_test(test_refuses_expired),
        cmocka_unit_test(test_refuses_not_yet_valid),
        cmocka_unit_test(test_refuses_wrong_audience),
        cmocka_unit_test(test_refuses_wrong_issuer),
        cmocka_unit_test(test_refuses_tampered_payload),
        cmocka_unit_test(test_refuses_crit_and_garbage),
        cmocka_unit_test(test_oversized_token),
        cmocka_unit_test(test_jwks_skips_unusable_keys),
        cmocka_unit_test(test_no_kid_needs_one_fitting_key),
        cmocka_unit_test(test_peek),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
