/*
 * sso.c - "Sign in with SSO" (docs/contract.md "Identity"): GET /ui/sso/login answers 302 to the
 * OpenID provider's authorization endpoint (authorization code + PKCE S256, with state and
 * nonce), GET /ui/sso/callback takes the state back (single use, kept in the database so
 * any replica can finish the sign-in), redeems the code at the token endpoint with the
 * PKCE verifier, verifies the ID token (identity/) and its nonce, maps the user's groups to
 * roles, and opens the same UI session a token sign-in opens.
 */
#include "api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <openssl/crypto.h>
#include <openssl/sha.h>

#include "../base/util.h"
#include "../identity/oidc.h"

#define SSO_MAX_AGE_MS (10 * 60 * 1000) /* a sign-in must come back within ten minutes */

/* n random bytes as unpadded base64url (out holds at least 4n/3+2). */
static bool random_b64url(size_t n, char *out)
{
    static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    uint8_t raw[48] = {0};
    size_t bits = n * 8, i;

    if (n > 45 || !mg_random_bytes(raw, n))
        return false;
    for (i = 0; i * 6 < bits; i++) {
        size_t bit = i * 6, byte = bit / 8, off = bit % 8;
        unsigned v = ((unsigned)raw[byte] << 8 | raw[byte + 1]);
        out[i] = b64url[(v >> (10 - off)) & 63];
    }
    out[i] = '\0';
    OPENSSL_cleanse(raw, sizeof(raw));
    return true;
}

/* base64url(SHA-256(verifier)): the PKCE S256 challenge. */
static void s256(const char *verifier, char out[48])
{
    static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    uint8_t d[SHA256_DIGEST_LENGTH + 1] = {0};
    size_t i;

    SHA256((const unsigned char *)verifier, strlen(verifier), d);
    for (i = 0; i * 6 < 256; i++) {
        size_t bit = i * 6, byte = bit / 8, off = bit % 8;
        unsigned v = ((unsigned)d[byte] << 8 | d[byte + 1]);
        out[i] = b64url[(v >> (10 - off)) & 63];
    }
    out[i] = '\0';
}

/* Where the provider sends the browser back: --public-url, else this request's Host. */
static bool callback_url(struct srv_req *r, char *out, size_t cap)
{
    const char *host = srv_header(r, "Host");
    size_t n = host ? strlen(host) : 0;

    if (r->srv->cfg->public_url)
        return (size_t)snprintf(out, cap, "%s/ui/sso/callback", r->srv->cfg->public_url) < cap;
    if (n == 0 || n > 255 ||
        strspn(host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:[]") != n)
        return false;
    return (size_t)snprintf(out, cap, "%s://%s/ui/sso/callback", r->srv->tls ? "https" : "http",
                            host) < cap;
}

static bool sso_configured(struct srv_req *r)
{
    if (r->srv->oidc == NULL || r->srv->cfg->oidc_client_id == NULL) {
        srv_fail(r, MG_ENOTFOUND, NULL,
                 "single sign-on is not configured (modelgated --oidc-issuer and "
                 "--oidc-client-id)");
        return false;
    }
    return true;
}

/* A query component, percent-encoded (a new string). */
static char *esc(const char *s)
{
    char *e = curl_easy_escape(NULL, s, 0), *out = e ? strdup(e) : NULL;

    curl_free(e);
    return out;
}

static void login(struct srv_req *r)
{
    char state[64], nonce[64], verifier[64], challenge[48], cb[400], *authz = NULL, *token = NULL;
    char *e_client = NULL, *e_cb = NULL, *loc = NULL;
    struct mg_error err = {0};

    if (!sso_configured(r))
        return;
    if (!callback_url(r, cb, sizeof(cb))) {
        srv_fail(r, MG_EINVAL, NULL,
                 "cannot tell this server's address for the callback; start modelgated with "
                 "--public-url");
        return;
    }
    if (id_oidc_endpoints(r->srv->oidc, mg_now_ms(), &authz, &token, &err) != MG_OK) {
        srv_fail(r, MG_EUNAVAIL, NULL, "the identity provider cannot be reached: %s", err.message);
        return;
    }
    if (!random_b64url(32, state) || !random_b64url(32, nonce) || !random_b64url(32, verifier)) {
        srv_fail(r, MG_EIO, NULL, "the random number generator failed");
        goto out;
    }
    s256(verifier, challenge);
    if (store_sso_begin(r->srv->store, state, nonce, verifier, &err) != MG_OK) {
        srv_reply_error(r, &err);
        goto out;
    }
    e_client = esc(r->srv->cfg->oidc_client_id);
    e_cb = esc(cb);
    if (e_client == NULL || e_cb == NULL ||
        asprintf(&loc,
                 "%s%cresponse_type=code&client_id=%s&redirect_uri=%s&scope=openid%%20email%%"
                 "20profile&state=%s&nonce=%s&code_challenge=%s&code_challenge_method=S256",
                 authz, strchr(authz, '?') ? '&' : '?', e_client, e_cb, state, nonce,
                 challenge) < 0) {
        loc = NULL;
        srv_fail(r, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    srv_reply_empty(r, 302);
    srv_reply_header(r, "Location", loc);
out:
    OPENSSL_cleanse(verifier, sizeof(verifier));
    free(loc);
    free(e_client);
    free(e_cb);
    free(authz);
    free(token);
}

/* Redeem the code: the ID token (a new string) or NULL with a reply set. */
static char *redeem(struct srv_req *r, const char *token_url, const char *code,
                    const char *verifier, const char *cb)
{
    char *e_code = esc(code), *e_cb = esc(cb), *e_client = esc(r->srv->cfg->oidc_client_id);
    char *e_secret = r->srv->oidc_client_secret ? esc(r->srv->oidc_client_secret) : NULL;
    char *e_verifier = esc(verifier), *form = NULL, *id_token = NULL;
    struct mg_buf body;
    struct mg_error err = {0};
    json_t *j = NULL;
    long status = 0;

    mg_buf_init(&body, ID_DOC_MAX);
    if (e_code == NULL || e_cb == NULL || e_client == NULL || e_verifier == NULL ||
        asprintf(&form,
                 "grant_type=authorization_code&code=%s&redirect_uri=%s&client_id=%s"
                 "&code_verifier=%s%s%s",
                 e_code, e_cb, e_client, e_verifier, e_secret ? "&client_secret=" : "",
                 e_secret ? e_secret : "") < 0) {
        form = NULL;
        srv_fail(r, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    if (id_post_form(token_url, form, &body, &status, &err) != MG_OK) {
        srv_fail(r, MG_EUNAVAIL, NULL, "the identity provider cannot be reached: %s", err.message);
        goto out;
    }
    j = json_loadb(body.data ? body.data : "", body.len, 0, NULL);
    if (status != 200 || !json_is_string(json_object_get(j, "id_token"))) {
        srv_fail(r, MG_EUNAUTH, NULL,
                 "the identity provider did not redeem the sign-in (HTTP %ld: %.100s); start "
                 "again",
                 status,
                 json_string_value(json_object_get(j, "error"))
                     ? json_string_value(json_object_get(j, "error"))
                     : "no id_token");
        goto out;
    }
    id_token = strdup(json_string_value(json_object_get(j, "id_token")));
    if (id_token == NULL)
        srv_fail(r, MG_ENOMEM, NULL, "out of memory");
out:
    if (body.data)
        OPENSSL_cleanse(body.data, body.len);
    mg_buf_release(&body);
    if (form)
        OPENSSL_cleanse(form, strlen(form));
    if (e_secret)
        OPENSSL_cleanse(e_secret, strlen(e_secret));
    free(form);
    free(e_code);
    free(e_cb);
    free(e_client);
    free(e_secret);
    free(e_verifier);
    json_decref(j);
    return id_token;
}

static void callback(struct srv_req *r)
{
    const char *state = srv_query(r, "state"), *code = srv_query(r, "code");
    const char *idp_error = srv_query(r, "error");
    char *nonce = NULL, *verifier = NULL, *authz = NULL, *token_url = NULL, *id_token = NULL;
    char cb[400], secret[STORE_TOKEN_SECRET_LEN + 1], sid[STORE_SESSION_ID_LEN + 1];
    char csrf[STORE_CSRF_LEN + 1], cookie[256];
    struct store_principal who;
    json_t *claims = NULL;
    struct mg_error err = {0};
    enum mg_code rc;

    if (!sso_configured(r))
        return;
    if (state == NULL || strlen(state) > 128) {
        srv_fail(r, MG_EUNAUTH, "state", "the sign-in has no state; start again at /ui/sso/login");
        return;
    }
    /* Taken first, whatever follows: a state is good for one try only. */
    if ((rc = store_sso_take(r->srv->store, state, SSO_MAX_AGE_MS, &nonce, &verifier, &err)) !=
        MG_OK) {
        srv_reply_error(r, &err);
        return;
    }
    if (idp_error != NULL || code == NULL || strlen(code) > 2048) {
        srv_fail(r, MG_EUNAUTH, NULL, "the identity provider did not sign you in (%.64s)",
                 idp_error ? idp_error : "no code");
        goto out;
    }
    if (!callback_url(r, cb, sizeof(cb)) ||
        id_oidc_endpoints(r->srv->oidc, mg_now_ms(), &authz, &token_url, &err) != MG_OK) {
        srv_fail(r, MG_EUNAVAIL, NULL, "the identity provider cannot be reached; start again");
        goto out;
    }
    if ((id_token = redeem(r, token_url, code, verifier, cb)) == NULL)
        goto out;
    rc = id_oidc_verify(r->srv->oidc, id_token, strlen(id_token), r->srv->cfg->oidc_client_id,
                        mg_now_ms(), &claims, &err);
    if (rc != MG_OK) {
        srv_fail(r, rc == MG_EUNAUTH ? MG_EUNAUTH : MG_EUNAVAIL, NULL,
                 "the ID token was refused (%s check): %s", err.field, err.message);
        goto out;
    }
    if (!json_is_string(json_object_get(claims, "nonce")) ||
        strlen(json_string_value(json_object_get(claims, "nonce"))) != strlen(nonce) ||
        !mg_ct_equal(json_string_value(json_object_get(claims, "nonce")), nonce, strlen(nonce))) {
        srv_fail(r, MG_EUNAUTH, "nonce",
                 "the ID token's nonce is not this sign-in's (a replayed token?); start again");
        goto out;
    }
    if (!srv_identity_from_claims(r, claims))
        goto out;
    who = r->who;
    if ((rc = store_token_for_person(r->srv->store, &who, SRV_SESSION_MAX_MS, secret, &err)) !=
            MG_OK ||
        (rc = store_session_open(r->srv->store, secret, strlen(secret), sid, csrf, &who, &err)) !=
            MG_OK) {
        srv_reply_error(r, &err);
        goto out;
    }
    srv_reply_empty(r, 302);
    srv_reply_header(r, "Location", "/");
    snprintf(cookie, sizeof(cookie), "%s=%s; Path=/; HttpOnly; SameSite=Strict%s",
             SRV_SESSION_COOKIE, sid, r->srv->tls ? "; Secure" : "");
    srv_reply_header(r, "Set-Cookie", cookie);
out:
    OPENSSL_cleanse(secret, sizeof(secret));
    if (verifier)
        OPENSSL_cleanse(verifier, strlen(verifier));
    if (id_token)
        OPENSSL_cleanse(id_token, strlen(id_token));
    free(nonce);
    free(verifier);
    free(authz);
    free(token_url);
    free(id_token);
    json_decref(claims);
}

const struct srv_route api_routes_sso[] = {
    {"GET", "/ui/sso/login", MG_NEED_PUBLIC, SRV_BODY_NONE, login, NULL, NULL, NULL},
    {"GET", "/ui/sso/callback", MG_NEED_PUBLIC, SRV_BODY_NONE, callback, NULL, NULL, NULL},
    {NULL, NULL, 0, 0, NULL, NULL, NULL, NULL},
};
