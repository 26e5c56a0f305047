/*
 * mint.h - the identity tests' token factory: keys and signed JWTs made with cjose (the
 * library under test only verifies), plus hand-made bad tokens (alg "none", a tampered
 * payload) that no signing library would produce. Test code only.
 */
#ifndef MG_TEST_MINT_H
#define MG_TEST_MINT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjose/cjose.h>
#include <cmocka.h>
#include <jansson.h>

static inline cjose_jwk_t *mint_rsa(const char *kid, size_t bits)
{
    static const uint8_t e[] = {0x01, 0x00, 0x01};
    cjose_err cerr;
    cjose_jwk_t *k = cjose_jwk_create_RSA_random(bits, e, sizeof(e), &cerr);

    assert_non_null(k);
    assert_true(cjose_jwk_set_kid(k, kid, strlen(kid), &cerr));
    return k;
}

static inline cjose_jwk_t *mint_ec(const char *kid)
{
    cjose_err cerr;
    cjose_jwk_t *k = cjose_jwk_create_EC_random(CJOSE_JWK_EC_P_256, &cerr);

    assert_non_null(k);
    assert_true(cjose_jwk_set_kid(k, kid, strlen(kid), &cerr));
    return k;
}

/* {"keys":[public JWK…]} for n keys (a new string, free()). */
static inline char *mint_jwks(cjose_jwk_t *const *keys, size_t n)
{
    json_t *doc = json_pack("{s:[]}", "keys");
    cjose_err cerr;
    char *text;

    assert_non_null(doc);
    for (size_t i = 0; i < n; i++) {
        char *pub = cjose_jwk_to_json(keys[i], false, &cerr);
        json_t *j;
        assert_non_null(pub);
        j = json_loads(pub, 0, NULL);
        assert_non_null(j);
        assert_int_equal(json_object_set_new(j, "use", json_string("sig")), 0);
        assert_int_equal(json_array_append_new(json_object_get(doc, "keys"), j), 0);
        cjose_get_dealloc()(pub);
    }
    text = json_dumps(doc, JSON_COMPACT);
    assert_non_null(text);
    json_decref(doc);
    return text;
}

/* A compact JWS of claims signed by key with alg; kid as given (NULL: none). new string. */
static inline char *mint_sign(const cjose_jwk_t *key, const char *alg, const char *kid,
                              json_t *claims)
{
    cjose_err cerr;
    cjose_header_t *h = cjose_header_new(&cerr);
    char *payload = json_dumps(claims, JSON_COMPACT);
    cjose_jws_t *jws;
    const char *ser;
    char *out;

    assert_non_null(h);
    assert_non_null(payload);
    assert_true(cjose_header_set(h, CJOSE_HDR_ALG, alg, &cerr));
    if (kid)
        assert_true(cjose_header_set(h, CJOSE_HDR_KID, kid, &cerr));
    jws = cjose_jws_sign(key, h, (const uint8_t *)payload, strlen(payload), &cerr);
    assert_non_null(jws);
    assert_true(cjose_jws_export(jws, &ser, &cerr));
    out = strdup(ser);
    assert_non_null(out);
    cjose_jws_release(jws);
    cjose_header_release(h);
    free(payload);
    return out;
}

static inline char *mint_b64url(const void *p, size_t n)
{
    char *s = NULL, *out;
    size_t len = 0;
    cjose_err cerr;

    assert_true(cjose_base64url_encode(p, n, &s, &len, &cerr));
    out = strndup(s, len);
    cjose_get_dealloc()(s);
    return out;
}

/* header.payload.signature from parts (the signature given already encoded). */
static inline char *mint_raw(const char *header_json, const char *payload_json, const char *sig)
{
    char *h = mint_b64url(header_json, strlen(header_json));
    char *p = mint_b64url(payload_json, strlen(payload_json));
    char *out = NULL;

    assert_true(asprintf(&out, "%s.%s.%s", h, p, sig) > 0);
    free(h);
    free(p);
    return out;
}

/* The token with its payload replaced by payload_json (the signature kept). new string. */
static inline char *mint_tamper(const char *token, const char *payload_json)
{
    const char *d1 = strchr(token, '.'), *d2 = strrchr(token, '.');
    char *p = mint_b64url(payload_json, strlen(payload_json));
    char *out = NULL;

    assert_true(asprintf(&out, "%.*s.%s%s", (int)(d1 - token), token, p, d2) > 0);
    free(p);
    return out;
}

#endif
