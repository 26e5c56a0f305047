/*
 * jwt.c - JWKS parsing and JWT verification on top of cjose (see jwt.h).
 *
 * cjose does the JOSE work: base64url, compact JWS import, JWK import and the signature
 * check. This file only decides which algorithms and keys may be used and what the claims
 * must say. The header is decoded once before cjose sees the token so that an algorithm
 * outside the allowlist is refused by name, whatever cjose would have done with it.
 */
#include "identity/jwt.h"

#include <stdlib.h>
#include <string.h>

#include <cjose/cjose.h>

struct id_jwk {
    char *kid;        /* NULL when the JWKS entry has none */
    char alg[8];      /* the entry's "alg", or "" */
    cjose_jwk_t *jwk; /* owned */
    cjose_jwk_kty_t kty;
};

struct id_jwks {
    size_t n;
    struct id_jwk keys[];
};

/* The algorithms docs/contract.md allows that cjose can verify, and the key type each needs. */
static const struct {
    const char *name;
    cjose_jwk_kty_t kty;
} allowed_algs[] = {
    {"RS256", CJOSE_JWK_KTY_RSA},
    {"PS256", CJOSE_JWK_KTY_RSA},
    {"ES256", CJOSE_JWK_KTY_EC},
};

static int alg_index(const char *alg)
{
    for (size_t i = 0; i < sizeof(allowed_algs) / sizeof(allowed_algs[0]); i++)
        if (strcmp(alg, allowed_algs[i].name) == 0)
            return (int)i;
    return -1;
}

void id_jwks_free(struct id_jwks **keys)
{
    if (keys == NULL || *keys == NULL)
        return;
    for (size_t i = 0; i < (*keys)->n; i++) {
        free((*keys)->keys[i].kid);
        cjose_jwk_release((*keys)->keys[i].jwk);
    }
    free(*keys);
    *keys = NULL;
}

size_t id_jwks_count(const struct id_jwks *keys)
{
    return keys ? keys->n : 0;
}

bool id_jwks_has_kid(const struct id_jwks *keys, const char *kid)
{
    for (size_t i = 0; keys && kid && i < keys->n; i++)
        if (keys->keys[i].kid && strcmp(keys->keys[i].kid, kid) == 0)
            return true;
    return false;
}

/*
 * Whether s is unpadded base64url that cjose may decode. cjose 0.6.2 asserts (aborts the
 * process) on a length of 1 mod 4, so nothing reaches it unchecked: fuzz_jwt found this
 * (tests/fuzz/corpus/jwt/crash-cjose-base64url-length-1-mod-4-asserts).
 */
static bool b64url_ok(const char *s, size_t n)
{
    if (n % 4 == 1)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_'))
            return false;
    }
    return true;
}

/* One JWKS entry into *k; false when it is skipped. */
static bool jwk_load(json_t *entry, struct id_jwk *k)
{
    const char *kty = json_string_value(json_object_get(entry, "kty"));
    const char *use = json_string_value(json_object_get(entry, "use"));
    const char *alg = json_string_value(json_object_get(entry, "alg"));
    const char *kid = json_string_value(json_object_get(entry, "kid"));
    json_t *pub = NULL;
    char *text = NULL;
    cjose_err cerr;
    bool ok = false;

    memset(k, 0, sizeof(*k));
    if (!json_is_object(entry) || kty == NULL)
        return false;
    if (json_object_get(entry, "use") && (use == NULL || strcmp(use, "sig") != 0))
        return false;
    if (alg && alg_index(alg) < 0)
        return false; /* a key meant for an algorithm we refuse anyway */
    if (strcmp(kty, "RSA") != 0 && strcmp(kty, "EC") != 0)
        return false;
    /* Import only the public members: a JWKS that leaks "d" must not make us a signer. */
    pub = json_pack("{s:s}", "kty", kty);
    if (pub == NULL)
        goto out;
    {
        static const char *const members[] = {"n", "e", "crv", "x", "y"};
        for (size_t i = 0; i < sizeof(members) / sizeof(members[0]); i++) {
            json_t *v = json_object_get(entry, members[i]);
            if (v == NULL)
                continue;
            if (!json_is_string(v))
                goto out;
            /* crv is a name; the others go through cjose's base64url decoder */
            if (i != 2 && !b64url_ok(json_string_value(v), json_string_length(v)))
                goto out;
            if (json_object_set(pub, members[i], v) != 0)
                goto out;
        }
    }
    text = json_dumps(pub, JSON_COMPACT);
    if (text == NULL)
        goto out;
    k->jwk = cjose_jwk_import(text, strlen(text), &cerr);
    if (k->jwk == NULL)
        goto out;
    k->kty = cjose_jwk_get_kty(k->jwk, &cerr);
    if (k->kty == CJOSE_JWK_KTY_RSA) {
        if (cjose_jwk_get_keysize(k->jwk, &cerr) < ID_RSA_MIN_BITS)
            goto out;
    } else if (k->kty == CJOSE_JWK_KTY_EC) {
        if (cjose_jwk_EC_get_curve(k->jwk, &cerr) != CJOSE_JWK_EC_P_256)
            goto out;
    } else {
        goto out;
    }
    if (kid) {
        k->kid = strdup(kid);
        if (k->kid == NULL)
            goto out;
    }
    if (alg)
        snprintf(k->alg, sizeof(k->alg), "%s", alg);
    ok = true;
out:
    if (!ok) {
        cjose_jwk_release(k->jwk);
        free(k->kid);
        memset(k, 0, sizeof(*k));
    }
    free(text);
    json_decref(pub);
    return ok;
}

enum mg_code id_jwks_parse(const char *json, size_t len, struct id_jwks **out, struct mg_error *err)
{
    json_t *doc = NULL, *list, *entry;
    struct id_jwks *set = NULL;
    enum mg_code rc = MG_OK;
    size_t i, n;

    *out = NULL;
    if (len > ID_JWKS_MAX)
        return mg_fail(err, MG_EINVAL, "jwks", "the JWKS is larger than %d bytes", ID_JWKS_MAX);
    doc = json_loadb(json, len, JSON_REJECT_DUPLICATES, NULL);
    list = json_object_get(doc, "keys");
    if (!json_is_array(list)) {
        rc = mg_fail(err, MG_EINVAL, "jwks", "the JWKS is not a JSON object with a \"keys\" array");
        goto out;
    }
    n = json_array_size(list);
    if (n > ID_JWKS_MAX_KEYS)
        n = ID_JWKS_MAX_KEYS;
    set = calloc(1, sizeof(*set) + n * sizeof(set->keys[0]));
    if (set == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory reading the JWKS");
        goto out;
    }
    json_array_foreach(list, i, entry)
    {
        if (i >= n)
            break;
        if (jwk_load(entry, &set->keys[set->n]))
            set->n++;
    }
    *out = set;
    set = NULL;
out:
    id_jwks_free(&set);
    json_decref(doc);
    return rc;
}

/* Decode a base64url segment to JSON (a new reference, or NULL). */
static json_t *segment_json(const char *seg, size_t n)
{
    uint8_t *raw = NULL;
    size_t raw_len = 0;
    cjose_err cerr;
    json_t *j;

    if (n == 0 || !b64url_ok(seg, n) || !cjose_base64url_decode(seg, n, &raw, &raw_len, &cerr))
        return NULL;
    j = json_loadb((const char *)raw, raw_len, JSON_REJECT_DUPLICATES, NULL);
    cjose_get_dealloc()(raw);
    if (j && !json_is_object(j)) {
        json_decref(j);
        j = NULL;
    }
    return j;
}

/* The header (segment 0) and, when payload is given, the payload (segment 1) as JSON. */
static enum mg_code split(const char *token, size_t len, json_t **header, json_t **payload,
                          struct mg_error *err)
{
    const char *dot1, *dot2, *end = token + len;

    *header = NULL;
    if (payload)
        *payload = NULL;
    if (len == 0 || len > ID_JWT_MAX)
        return mg_fail(err, MG_EUNAUTH, "token", "the token is empty or longer than %d bytes",
                       ID_JWT_MAX);
    dot1 = memchr(token, '.', len);
    dot2 = dot1 ? memchr(dot1 + 1, '.', (size_t)(end - dot1 - 1)) : NULL;
    if (dot2 == NULL || memchr(dot2 + 1, '.', (size_t)(end - dot2 - 1)) != NULL)
        return mg_fail(err, MG_EUNAUTH, "token",
                       "the token is not a compact JWS (three base64url parts joined by dots)");
    if (!b64url_ok(dot2 + 1, (size_t)(end - dot2 - 1)))
        return mg_fail(err, MG_EUNAUTH, "token", "the token's signature is not base64url");
    *header = segment_json(token, (size_t)(dot1 - token));
    if (*header == NULL)
        return mg_fail(err, MG_EUNAUTH, "token", "the token's header is not base64url JSON");
    if (payload) {
        *payload = segment_json(dot1 + 1, (size_t)(dot2 - dot1 - 1));
        if (*payload == NULL) {
            json_decref(*header);
            *header = NULL;
            return mg_fail(err, MG_EUNAUTH, "token", "the token's payload is not base64url JSON");
        }
    }
    return MG_OK;
}

enum mg_code id_jwt_peek_kid(const char *token, size_t len, char **kid, struct mg_error *err)
{
    json_t *header;
    const char *k;
    enum mg_code rc;

    *kid = NULL;
    rc = split(token, len, &header, NULL, err);
    if (rc != MG_OK)
        return rc;
    k = json_string_value(json_object_get(header, "kid"));
    if (k && (*kid = strdup(k)) == NULL)
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    json_decref(header);
    return rc;
}

enum mg_code id_jwt_peek_issuer(const char *token, size_t len, char **iss, struct mg_error *err)
{
    json_t *header, *payload;
    const char *s;
    enum mg_code rc;

    *iss = NULL;
    rc = split(token, len, &header, &payload, err);
    if (rc != MG_OK)
        return rc;
    s = json_string_value(json_object_get(payload, "iss"));
    if (s == NULL)
        rc = mg_fail(err, MG_EUNAUTH, "iss", "the token has no \"iss\" claim");
    else if ((*iss = strdup(s)) == NULL)
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    json_decref(header);
    json_decref(payload);
    return rc;
}

/* The key for kid and alg; NULL when the set has none that fits. */
static const struct id_jwk *key_for(const struct id_jwks *keys, const char *kid, int alg)
{
    const struct id_jwk *only = NULL;
    size_t fitting = 0;

    for (size_t i = 0; keys && i < keys->n; i++) {
        const struct id_jwk *k = &keys->keys[i];
        if (k->kty != allowed_algs[alg].kty)
            continue;
        if (k->alg[0] && strcmp(k->alg, allowed_algs[alg].name) != 0)
            continue;
        if (kid) {
            if (k->kid && strcmp(k->kid, kid) == 0)
                return k;
            continue;
        }
        only = k;
        fitting++;
    }
    /* No kid in the header: only an unambiguous set (one fitting key) will do. */
    return fitting == 1 ? only : NULL;
}

static bool aud_holds(json_t *aud, const char *want)
{
    json_t *v;
    size_t i;

    if (json_is_string(aud))
        return strcmp(json_string_value(aud), want) == 0;
    json_array_foreach(aud, i, v)
    {
        if (json_is_string(v) && strcmp(json_string_value(v), want) == 0)
            return true;
    }
    return false;
}

/* A NumericDate claim: false when it is present but not a number. */
static bool numeric_date(json_t *claims, const char *name, bool *present, int64_t *out)
{
    json_t *v = json_object_get(claims, name);

    *present = v != NULL;
    if (v == NULL)
        return true;
    if (!json_is_number(v))
        return false;
    *out = (int64_t)json_number_value(v);
    return true;
}

static enum mg_code check_claims(json_t *claims, const struct id_jwt_expect *expect,
                                 struct mg_error *err)
{
    const char *iss = json_string_value(json_object_get(claims, "iss"));
    int64_t exp = 0, nbf = 0;
    bool has_exp, has_nbf;

    if (iss == NULL || expect->issuer == NULL || strcmp(iss, expect->issuer) != 0)
        return mg_fail(err, MG_EUNAUTH, "iss",
                       "the token was issued by another issuer than the one configured");
    if (expect->audience && !aud_holds(json_object_get(claims, "aud"), expect->audience))
        return mg_fail(err, MG_EUNAUTH, "aud",
                       "the token's audience (\"aud\") does not include '%s'", expect->audience);
    if (!numeric_date(claims, "exp", &has_exp, &exp) || !has_exp)
        return mg_fail(err, MG_EUNAUTH, "exp", "the token has no numeric \"exp\" claim");
    if (expect->now_s > exp + expect->leeway_s)
        return mg_fail(err, MG_EUNAUTH, "exp", "the token has expired; get a fresh one");
    if (!numeric_date(claims, "nbf", &has_nbf, &nbf))
        return mg_fail(err, MG_EUNAUTH, "nbf", "the token's \"nbf\" claim is not a number");
    if (has_nbf && expect->now_s + expect->leeway_s < nbf)
        return mg_fail(err, MG_EUNAUTH, "nbf",
                       "the token is not valid yet (\"nbf\" is in the future); check clocks");
    if (!json_is_string(json_object_get(claims, "sub")) ||
        json_string_length(json_object_get(claims, "sub")) == 0)
        return mg_fail(err, MG_EUNAUTH, "sub", "the token has no \"sub\" claim");
    return MG_OK;
}

enum mg_code id_jwt_verify(const char *token, size_t len, const struct id_jwks *keys,
                           const struct id_jwt_expect *expect, json_t **claims,
                           struct mg_error *err)
{
    json_t *header = NULL, *payload = NULL;
    const struct id_jwk *key;
    cjose_jws_t *jws = NULL;
    cjose_err cerr;
    const char *alg, *kid;
    enum mg_code rc;
    int a;

    *claims = NULL;
    rc = split(token, len, &header, &payload, err);
    if (rc != MG_OK)
        return rc;
    alg = json_string_value(json_object_get(header, "alg"));
    if (alg == NULL) {
        rc = mg_fail(err, MG_EUNAUTH, "alg", "the token's header names no algorithm");
        goto out;
    }
    a = alg_index(alg);
    if (a < 0) {
        /* The header's alg is attacker-chosen text: name only what is allowed. */
        rc = mg_fail(err, MG_EUNAUTH, "alg",
                     "the token's algorithm is not allowed (RS256, PS256 or ES256 only; never "
                     "none or HMAC)");
        goto out;
    }
    if (json_object_get(header, "crit")) {
        rc = mg_fail(err, MG_EUNAUTH, "crit",
                     "the token's header has critical extensions (\"crit\"), which are not "
                     "supported");
        goto out;
    }
    kid = json_string_value(json_object_get(header, "kid"));
    if (json_object_get(header, "kid") && kid == NULL) {
        rc = mg_fail(err, MG_EUNAUTH, "kid", "the token's \"kid\" is not a string");
        goto out;
    }
    key = key_for(keys, kid, a);
    if (key == NULL) {
        rc = mg_fail(err, MG_EUNAUTH, "kid",
                     "the token's signing key is not among the issuer's published %s keys",
                     allowed_algs[a].name);
        goto out;
    }
    jws = cjose_jws_import(token, len, &cerr);
    if (jws == NULL || !cjose_jws_verify(jws, key->jwk, &cerr)) {
        rc = mg_fail(err, MG_EUNAUTH, "signature", "the token's signature does not verify");
        goto out;
    }
    /* cjose verified what it parsed; insist it parsed the header we checked. */
    {
        const char *calg = cjose_header_get(cjose_jws_get_protected(jws), CJOSE_HDR_ALG, &cerr);
        if (calg == NULL || strcmp(calg, allowed_algs[a].name) != 0) {
            rc = mg_fail(err, MG_EUNAUTH, "alg", "the token's algorithm is not allowed");
            goto out;
        }
    }
    /* The claims are what cjose verified, not our earlier reading of the same segment. */
    {
        uint8_t *plain = NULL;
        size_t plain_len = 0;
        json_decref(payload);
        payload = NULL;
        if (cjose_jws_get_plaintext(jws, &plain, &plain_len, &cerr))
            payload = json_loadb((const char *)plain, plain_len, JSON_REJECT_DUPLICATES, NULL);
        if (!json_is_object(payload)) {
            rc = mg_fail(err, MG_EUNAUTH, "token", "the token's payload is not a JSON object");
            goto out;
        }
    }
    rc = check_claims(payload, expect, err);
    if (rc != MG_OK)
        goto out;
    *claims = payload;
    payload = NULL;
out:
    cjose_jws_release(jws);
    json_decref(header);
    json_decref(payload);
    return rc;
}
