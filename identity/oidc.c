/*
 * oidc.c - an OpenID provider's discovery document and JWKS cache (see oidc.h).
 */
#include "identity/oidc.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "identity/jwt.h"

/* A JWKS shared by the verifiers that took it; freed when the last one lets go. */
struct keyset {
    struct id_jwks *keys;
    int refs; /* under id_oidc.lock */
};

struct id_oidc {
    char *issuer;
    int64_t leeway_s, refetch_interval_ms, jwks_ttl_ms;
    id_fetch_fn fetch;
    void *fetch_ctx;

    pthread_mutex_t lock;
    struct keyset *current; /* NULL until a fetch succeeds */
    int64_t fetched_ms;     /* when current was fetched */
    int64_t attempt_ms;     /* when the last fetch started; 0: never */
    char *authorization_endpoint, *token_endpoint;
    char last_error[MG_ERR_MSG_MAX];
    uint64_t fetches;
};

bool id_url_allowed(const char *url)
{
    static const char *const loopback[] = {"http://127.", "http://[::1]",
                                           "http://localhost:", "http://localhost/"};

    if (url == NULL)
        return false;
    if (strncmp(url, "https://", 8) == 0)
        return url[8] != '\0' && url[8] != '/';
    for (size_t i = 0; i < sizeof(loopback) / sizeof(loopback[0]); i++)
        if (strncmp(url, loopback[i], strlen(loopback[i])) == 0)
            return true;
    return false;
}

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
    struct mg_buf *b = arg;

    if (n && size > SIZE_MAX / n)
        return 0;
    return mg_buf_append(b, p, size * n) == MG_OK ? size * n : 0;
}

enum mg_code id_fetch_curl(void *ctx, const char *url, struct mg_buf *body, struct mg_error *err)
{
    CURL *c = curl_easy_init();
    CURLcode cc;
    long status = 0;
    enum mg_code rc = MG_OK;

    (void)ctx;
    if (c == NULL)
        return mg_fail(err, MG_EUNAVAIL, NULL, "cannot start libcurl");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "modelgate-oidc/1");
    cc = curl_easy_perform(c);
    if (cc != CURLE_OK) {
        rc = mg_fail(err, MG_EUNAVAIL, NULL, "cannot fetch %s: %s", url,
                     cc == CURLE_WRITE_ERROR ? "the answer is too large" : curl_easy_strerror(cc));
        goto out;
    }
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    if (status != 200)
        rc = mg_fail(err, MG_EUNAVAIL, NULL, "%s answered HTTP %ld", url, status);
out:
    curl_easy_cleanup(c);
    return rc;
}

enum mg_code id_oidc_new(const struct id_oidc_options *opt, struct id_oidc **out,
                         struct mg_error *err)
{
    struct id_oidc *o;

    *out = NULL;
    if (opt->issuer == NULL || !id_url_allowed(opt->issuer))
        return mg_fail(err, MG_EINVAL, "issuer",
                       "the OIDC issuer must be an https:// URL (http:// only on loopback)");
    o = calloc(1, sizeof(*o));
    if (o == NULL || (o->issuer = strdup(opt->issuer)) == NULL) {
        free(o);
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
    o->leeway_s = opt->leeway_s > 0 ? opt->leeway_s : ID_LEEWAY_S;
    o->refetch_interval_ms =
        opt->refetch_interval_ms > 0 ? opt->refetch_interval_ms : ID_REFETCH_INTERVAL_MS;
    o->jwks_ttl_ms = opt->jwks_ttl_ms > 0 ? opt->jwks_ttl_ms : ID_JWKS_TTL_MS;
    o->fetch = opt->fetch ? opt->fetch : id_fetch_curl;
    o->fetch_ctx = opt->fetch_ctx;
    pthread_mutex_init(&o->lock, NULL);
    *out = o;
    return MG_OK;
}

static void keyset_put(struct id_oidc *o, struct keyset **ks)
{
    bool last;

    if (*ks == NULL)
        return;
    pthread_mutex_lock(&o->lock);
    last = --(*ks)->refs == 0;
    pthread_mutex_unlock(&o->lock);
    if (last) {
        id_jwks_free(&(*ks)->keys);
        free(*ks);
    }
    *ks = NULL;
}

void id_oidc_free(struct id_oidc **o)
{
    if (o == NULL || *o == NULL)
        return;
    keyset_put(*o, &(*o)->current);
    pthread_mutex_destroy(&(*o)->lock);
    free((*o)->authorization_endpoint);
    free((*o)->token_endpoint);
    free((*o)->issuer);
    free(*o);
    *o = NULL;
}

const char *id_oidc_issuer(const struct id_oidc *o)
{
    return o->issuer;
}

uint64_t id_oidc_jwks_fetches(struct id_oidc *o)
{
    uint64_t n;

    pthread_mutex_lock(&o->lock);
    n = o->fetches;
    pthread_mutex_unlock(&o->lock);
    return n;
}

/* A string member that must be an allowed URL; a new copy, or NULL. */
static char *url_member(json_t *doc, const char *name)
{
    const char *s = json_string_value(json_object_get(doc, name));

    return s && id_url_allowed(s) ? strdup(s) : NULL;
}

/*
 * Fetch the discovery document and the JWKS, and install them. Runs without the lock; the
 * caller has claimed the attempt (attempt_ms) under it.
 */
static enum mg_code refresh(struct id_oidc *o, int64_t now_ms, struct mg_error *err)
{
    struct mg_buf body;
    json_t *doc = NULL;
    char *url = NULL, *jwks_uri = NULL, *authz = NULL, *token = NULL;
    struct id_jwks *keys = NULL;
    struct keyset *ks = NULL, *old = NULL;
    const char *iss;
    size_t n = strlen(o->issuer);
    enum mg_code rc;

    mg_buf_init(&body, ID_DOC_MAX);
    if (asprintf(&url, "%.*s/.well-known/openid-configuration",
                 (int)(n && o->issuer[n - 1] == '/' ? n - 1 : n), o->issuer) < 0) {
        url = NULL;
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    rc = o->fetch(o->fetch_ctx, url, &body, err);
    if (rc != MG_OK)
        goto out;
    doc = json_loadb(body.data ? body.data : "", body.len, JSON_REJECT_DUPLICATES, NULL);
    iss = json_string_value(json_object_get(doc, "issuer"));
    if (iss == NULL || strcmp(iss, o->issuer) != 0) {
        rc = mg_fail(err, MG_EUNAVAIL, "issuer",
                     "the discovery document at %s does not name issuer %s", url, o->issuer);
        goto out;
    }
    jwks_uri = url_member(doc, "jwks_uri");
    if (jwks_uri == NULL) {
        rc = mg_fail(err, MG_EUNAVAIL, "jwks_uri",
                     "the discovery document at %s has no usable jwks_uri (https:// only)", url);
        goto out;
    }
    authz = url_member(doc, "authorization_endpoint");
    token = url_member(doc, "token_endpoint");
    mg_buf_release(&body);
    mg_buf_init(&body, ID_DOC_MAX);
    rc = o->fetch(o->fetch_ctx, jwks_uri, &body, err);
    if (rc != MG_OK)
        goto out;
    rc = id_jwks_parse(body.data ? body.data : "", body.len, &keys, err);
    if (rc != MG_OK) {
        rc = mg_fail(err, MG_EUNAVAIL, "jwks", "the JWKS at %s is not usable: %s", jwks_uri,
                     err ? err->message : "malformed");
        goto out;
    }
    ks = calloc(1, sizeof(*ks));
    if (ks == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    ks->keys = keys;
    ks->refs = 1;
    keys = NULL;
    pthread_mutex_lock(&o->lock);
    old = o->current;
    o->current = ks;
    o->fetched_ms = now_ms;
    o->fetches++;
    o->last_error[0] = '\0';
    free(o->authorization_endpoint);
    free(o->token_endpoint);
    o->authorization_endpoint = authz;
    o->token_endpoint = token;
    authz = token = NULL;
    pthread_mutex_unlock(&o->lock);
    keyset_put(o, &old);
out:
    if (rc != MG_OK && err) {
        pthread_mutex_lock(&o->lock);
        snprintf(o->last_error, sizeof(o->last_error), "%s", err->message);
        pthread_mutex_unlock(&o->lock);
    }
    id_jwks_free(&keys);
    free(authz);
    free(token);
    free(jwks_uri);
    free(url);
    json_decref(doc);
    mg_buf_release(&body);
    return rc;
}

/*
 * Claim a fetch when one is due: the cache is empty or stale (want_new false), or a kid was
 * unknown (want_new true); never twice within the refetch interval.
 */
static bool claim_fetch(struct id_oidc *o, int64_t now_ms, bool want_new)
{
    bool due;

    pthread_mutex_lock(&o->lock);
    due = want_new || o->current == NULL || now_ms - o->fetched_ms >= o->jwks_ttl_ms;
    if (due && o->attempt_ms != 0 && now_ms - o->attempt_ms < o->refetch_interval_ms)
        due = false;
    if (due)
        o->attempt_ms = now_ms;
    pthread_mutex_unlock(&o->lock);
    return due;
}

static struct keyset *keyset_get(struct id_oidc *o)
{
    struct keyset *ks;

    pthread_mutex_lock(&o->lock);
    ks = o->current;
    if (ks)
        ks->refs++;
    pthread_mutex_unlock(&o->lock);
    return ks;
}

enum mg_code id_oidc_verify(struct id_oidc *o, const char *token, size_t len, const char *audience,
                            int64_t now_ms, json_t **claims, struct mg_error *err)
{
    struct id_jwt_expect expect = {
        .issuer = o->issuer, .audience = audience, .now_s = now_ms / 1000, .leeway_s = o->leeway_s};
    struct mg_error ferr = {0};
    struct keyset *ks;
    bool fetched = false;
    enum mg_code rc;

    *claims = NULL;
    if (claim_fetch(o, now_ms, false)) {
        (void)refresh(o, now_ms, &ferr); /* a failure keeps the previous set */
        fetched = true;
    }
    for (;;) {
        ks = keyset_get(o);
        if (ks == NULL) {
            pthread_mutex_lock(&o->lock);
            rc = mg_fail(err, MG_EUNAVAIL, NULL,
                         "the identity provider's signing keys are not available (%s)",
                         o->last_error[0] ? o->last_error : "not fetched yet");
            pthread_mutex_unlock(&o->lock);
            return rc;
        }
        rc = id_jwt_verify(token, len, ks->keys, &expect, claims, err);
        keyset_put(o, &ks);
        /* An unknown kid may be a rotation: fetch once (rate-limited) and try again. */
        if (rc == MG_EUNAUTH && err && strcmp(err->field, "kid") == 0 && !fetched &&
            claim_fetch(o, now_ms, true)) {
            fetched = true;
            if (refresh(o, now_ms, &ferr) == MG_OK)
                continue;
        }
        return rc;
    }
}

enum mg_code id_oidc_endpoints(struct id_oidc *o, int64_t now_ms, char **authorization,
                               char **token, struct mg_error *err)
{
    enum mg_code rc = MG_OK;

    *authorization = *token = NULL;
    if (claim_fetch(o, now_ms, false))
        (void)refresh(o, now_ms, err);
    pthread_mutex_lock(&o->lock);
    if (o->authorization_endpoint == NULL || o->token_endpoint == NULL) {
        rc = mg_fail(err, MG_EUNAVAIL, NULL,
                     "the identity provider's discovery document is not available (%s)",
                     o->last_error[0] ? o->last_error
                                      : "it names no authorization or token "
                                        "endpoint");
    } else {
        *authorization = strdup(o->authorization_endpoint);
        *token = strdup(o->token_endpoint);
        if (*authorization == NULL || *token == NULL) {
            free(*authorization);
            free(*token);
            *authorization = *token = NULL;
            rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        }
    }
    pthread_mutex_unlock(&o->lock);
    return rc;
}

struct id_registry {
    pthread_mutex_t lock;
    id_fetch_fn fetch;
    void *fetch_ctx;
    size_t n;
    struct id_oidc *list[ID_REGISTRY_MAX];
};

struct id_registry *id_registry_new(id_fetch_fn fetch, void *fetch_ctx)
{
    struct id_registry *reg = calloc(1, sizeof(*reg));

    if (reg == NULL)
        return NULL;
    pthread_mutex_init(&reg->lock, NULL);
    reg->fetch = fetch;
    reg->fetch_ctx = fetch_ctx;
    return reg;
}

void id_registry_free(struct id_registry **reg)
{
    if (reg == NULL || *reg == NULL)
        return;
    for (size_t i = 0; i < (*reg)->n; i++)
        id_oidc_free(&(*reg)->list[i]);
    pthread_mutex_destroy(&(*reg)->lock);
    free(*reg);
    *reg = NULL;
}

enum mg_code id_registry_get(struct id_registry *reg, const char *issuer, struct id_oidc **out,
                             struct mg_error *err)
{
    struct id_oidc_options opt = {
        .issuer = issuer, .fetch = reg->fetch, .fetch_ctx = reg->fetch_ctx};
    enum mg_code rc = MG_OK;

    *out = NULL;
    pthread_mutex_lock(&reg->lock);
    for (size_t i = 0; i < reg->n; i++) {
        if (strcmp(reg->list[i]->issuer, issuer) == 0) {
            *out = reg->list[i];
            goto out;
        }
    }
    if (reg->n == ID_REGISTRY_MAX) {
        rc = mg_fail(err, MG_ETOOBIG, NULL, "more than %d OpenID issuers are in use",
                     ID_REGISTRY_MAX);
        goto out;
    }
    if ((rc = id_oidc_new(&opt, out, err)) == MG_OK)
        reg->list[reg->n++] = *out;
out:
    pthread_mutex_unlock(&reg->lock);
    return rc;
}

bool id_claims_match(const json_t *rules, const json_t *claims, const char **failed)
{
    const char *name;
    json_t *want;

    *failed = NULL;
    json_object_foreach((json_t *)rules, name, want)
    {
        const char *w = json_string_value(want);
        const char *have = json_string_value(json_object_get(claims, name));
        size_t wn = w ? strlen(w) : 0;
        bool ok;

        if (w == NULL || have == NULL)
            ok = false;
        else if (wn > 0 && w[wn - 1] == '*')
            ok = strncmp(have, w, wn - 1) == 0;
        else
            ok = strcmp(have, w) == 0;
        if (!ok) {
            *failed = name;
            return false;
        }
    }
    return true;
}

enum mg_code id_post_form(const char *url, const char *form, struct mg_buf *body, long *status,
                          struct mg_error *err)
{
    CURL *c = curl_easy_init();
    struct curl_slist *h = NULL;
    CURLcode cc;
    enum mg_code rc = MG_OK;

    *status = 0;
    if (c == NULL)
        return mg_fail(err, MG_EUNAVAIL, NULL, "cannot start libcurl");
    h = curl_slist_append(h, "Content-Type: application/x-www-form-urlencoded");
    h = curl_slist_append(h, "Accept: application/json");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 10000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, form);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "modelgate-oidc/1");
    cc = curl_easy_perform(c);
    if (cc != CURLE_OK)
        rc = mg_fail(err, MG_EUNAVAIL, NULL, "cannot reach %s: %s", url,
                     cc == CURLE_WRITE_ERROR ? "the answer is too large" : curl_easy_strerror(cc));
    else
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return rc;
}
