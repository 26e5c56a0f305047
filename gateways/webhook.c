/*
 * webhook.c - POST the alias change to an HTTP(S) receiver, signed the
 * Standard Webhooks way: webhook-id (stable across retries),
 * webhook-timestamp, webhook-signature "v1,<base64 HMAC-SHA256(secret,
 * id.timestamp.body)>". No redirects, http/https only, and every resolved
 * address is checked against the allowlist when the socket is opened (so a
 * DNS answer cannot smuggle a forbidden address past a config-time check).
 */
#include "push_int.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "../base/text.h"
#include "../base/util.h"

#define WEBHOOK_SECRET_MIN 24
#define WEBHOOK_SECRET_MAX 512
/* Standard Webhooks secrets: "whsec_" + base64 of 24 to 64 bytes; we make 32. */
#define WHSEC_MIN 24
#define WHSEC_MAX 64
#define WHSEC_GENERATED 32
#define WEBHOOK_URL_MAX 2048
#define RESPONSE_MAX 4096

/* Check a URL: http/https, a host, no credentials; an IP-literal host must
 * pass the allowlist now (names are checked again at connect time). */
static enum mg_code check_url(const struct push_env *env, const char *url, struct mg_error *err)
{
    CURLU *u = curl_url();
    char *scheme = NULL, *host = NULL, *user = NULL;
    enum mg_code rc = MG_OK;
    struct sockaddr_in sin;
    struct sockaddr_in6 sin6;

    if (u == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
        curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK) {
        rc = mg_fail(err, MG_EINVAL, "url", "url is not a valid absolute http(s) URL");
        goto out;
    }
    if (strcasecmp(scheme, "http") != 0 && strcasecmp(scheme, "https") != 0) {
        rc = mg_fail(err, MG_EINVAL, "url", "webhook URLs must be http or https, not %s", scheme);
        goto out;
    }
    if (curl_url_get(u, CURLUPART_USER, &user, 0) == CURLUE_OK && user) {
        rc = mg_fail(err, MG_EINVAL, "url", "put no credentials in the URL; the secret signs it");
        goto out;
    }
    memset(&sin, 0, sizeof(sin));
    memset(&sin6, 0, sizeof(sin6));
    if (inet_pton(AF_INET, host, &sin.sin_addr) == 1) {
        sin.sin_family = AF_INET;
        if (!push_allow_check(env->allow, (struct sockaddr *)&sin))
            rc = mg_fail(err, MG_EINVAL, "url",
                         "webhooks may not go to %s (not in the allowed networks; see "
                         "--webhook-allow)",
                         host);
    } else if (host[0] == '[') {
        size_t n = strlen(host);
        char inner[64];
        if (n < 3 || n - 2 >= sizeof(inner)) {
            rc = mg_fail(err, MG_EINVAL, "url", "url has a malformed IPv6 host");
            goto out;
        }
        memcpy(inner, host + 1, n - 2);
        inner[n - 2] = '\0';
        if (inet_pton(AF_INET6, inner, &sin6.sin6_addr) == 1) {
            sin6.sin6_family = AF_INET6;
            if (!push_allow_check(env->allow, (struct sockaddr *)&sin6))
                rc = mg_fail(err, MG_EINVAL, "url",
                             "webhooks may not go to %s (not in the allowed networks; see "
                             "--webhook-allow)",
                             host);
        }
    }
out:
    curl_free(scheme);
    curl_free(host);
    curl_free(user);
    curl_url_cleanup(u);
    return rc;
}

/* "events": the promotion and quota events this webhook also wants, besides alias.updated. */
static const char *const WEBHOOK_EVENTS[] = {"alias.updated", "promotion.awaiting_approval",
                                             "promotion.rolled_back", "quota.threshold", NULL};

static enum mg_code check_events(const json_t *ev, struct mg_error *err)
{
    const json_t *v;
    size_t i;

    if (ev == NULL)
        return MG_OK;
    if (!json_is_array(ev) || json_array_size(ev) > 8)
        return mg_fail(err, MG_EINVAL, "events",
                       "'events' is a list of event types: promotion.awaiting_approval, "
                       "promotion.rolled_back, quota.threshold (alias.updated is always sent)");
    json_array_foreach(ev, i, v)
    {
        const char *t = json_string_value(v);
        size_t k;

        for (k = 0; t != NULL && WEBHOOK_EVENTS[k] != NULL; k++)
            if (strcmp(t, WEBHOOK_EVENTS[k]) == 0)
                break;
        if (t == NULL || WEBHOOK_EVENTS[k] == NULL)
            return mg_fail(err, MG_EINVAL, "events",
                           "unknown event type '%.64s'; webhooks know alias.updated, "
                           "promotion.awaiting_approval, promotion.rolled_back and "
                           "quota.threshold",
                           t ? t : "(not a string)");
    }
    return MG_OK;
}

enum mg_code push_webhook_validate(const struct push_env *env, const json_t *body, json_t **config,
                                   char **secret, struct mg_error *err)
{
    const char *url = json_string_value(json_object_get(body, "url"));
    json_t *sec = json_object_get(body, "secret");
    const char *k;
    json_t *v;
    enum mg_code rc;

    json_object_foreach((json_t *)body, k, v)
    {
        if (strcmp(k, "kind") && strcmp(k, "url") && strcmp(k, "secret") && strcmp(k, "models") &&
            strcmp(k, "aliases") && strcmp(k, "events"))
            return mg_fail(err, MG_EINVAL, k, "unknown field '%.64s' for a webhook gateway", k);
    }
    if ((rc = check_events(json_object_get(body, "events"), err)) != MG_OK)
        return rc;
    if (url == NULL || strlen(url) > WEBHOOK_URL_MAX)
        return mg_fail(err, MG_EINVAL, "url", "a webhook needs 'url' (at most %d bytes)",
                       WEBHOOK_URL_MAX);
    if ((rc = check_url(env, url, err)) != MG_OK)
        return rc;
    if (sec == NULL || json_is_null(sec)) {
        /* None given: make a Standard Webhooks secret; the PUT's reply shows it once. */
        uint8_t raw[WHSEC_GENERATED];
        char *b64;

        if (!mg_random_bytes(raw, sizeof(raw)))
            return mg_fail(err, MG_EIO, NULL, "the random number generator failed");
        b64 = mg_base64_encode(raw, sizeof(raw));
        OPENSSL_cleanse(raw, sizeof(raw));
        if (b64 == NULL || (*secret = malloc(strlen(b64) + 7)) == NULL) {
            free(b64);
            return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        }
        snprintf(*secret, strlen(b64) + 7, "whsec_%s", b64);
        OPENSSL_cleanse(b64, strlen(b64));
        free(b64);
    } else {
        const char *v = json_string_value(sec);
        uint8_t key[WEBHOOK_SECRET_MAX];
        size_t keylen = 0;

        if (!json_is_string(sec) || strlen(v) != json_string_length(sec))
            return mg_fail(err, MG_EINVAL, "secret", "'secret' is a string");
        if (strncmp(v, "whsec_", 6) == 0) {
            if (!push_webhook_key(v, key, &keylen))
                return mg_fail(err, MG_EINVAL, "secret",
                               "a whsec_ secret is 'whsec_' and the standard base64 of %d to %d "
                               "random bytes; generate one, or omit 'secret' to have one made",
                               WHSEC_MIN, WHSEC_MAX);
            OPENSSL_cleanse(key, sizeof(key));
        } else if (json_string_length(sec) < WEBHOOK_SECRET_MIN ||
                   json_string_length(sec) > WEBHOOK_SECRET_MAX) {
            return mg_fail(err, MG_EINVAL, "secret",
                           "a webhook needs a 'secret': a Standard Webhooks 'whsec_...' secret, or "
                           "%d to %d raw bytes (or omit it to have one made)",
                           WEBHOOK_SECRET_MIN, WEBHOOK_SECRET_MAX);
        }
        *secret = strdup(v);
    }
    *config = json_pack("{s:s}", "url", url);
    if (*config != NULL && json_object_get(body, "events") != NULL &&
        json_object_set(*config, "events", json_object_get(body, "events")) != 0) {
        json_decref(*config);
        *config = NULL;
    }
    if (*config == NULL || *secret == NULL) {
        json_decref(*config);
        free(*secret);
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
    return MG_OK;
}

char *push_webhook_body(const struct store_delivery *d, int64_t now_ms)
{
    char ts[32];
    json_t *b;
    char *text, *exact;

    json_t *match = json_object_get(d->payload, "match");
    json_t *shadow = json_object_get(d->payload, "shadow");
    json_t *promo = json_object_get(d->payload, "promotion");
    json_t *event = json_object_get(d->payload, "event");

    mg_time_format(now_ms, ts);
    /* An event row (a promotion's, store_outbox_event, or a team crossing 80 % or 100 % of
     * its storage quota, docs/contract.md "Quotas and cost"; their aliases start with '!'): its own
     * body, with the time it is sent. An alias change may carry an event too (an automatic
     * rollback's analysis.failed): that stays an alias.updated body with "event" in it. */
    if (json_is_object(event) && d->alias[0] == '!') {
        b = json_deep_copy(event);
        if (b == NULL || json_object_set_new(b, "timestamp", json_string(ts)) != 0) {
            json_decref(b);
            return NULL;
        }
        text = json_dumps(b, JSON_COMPACT);
        json_decref(b);
        return text;
    }
    /* Rows written before match and shadow existed carry neither: none. */
    b = json_pack("{s:s, s:s, s:s, s:I, s:O, s:o, s:o, s:O, s:s}", "type", "alias.updated", "model",
                  d->model, "alias", d->alias, "generation", (json_int_t)d->generation, "routes",
                  json_object_get(d->payload, "routes"), "match",
                  json_is_array(match) ? json_incref(match) : json_array(), "shadow",
                  json_is_object(shadow) ? json_incref(shadow) : json_null(), "promotion",
                  promo ? promo : json_null(), "timestamp", ts);
    if (b && json_is_object(json_object_get(d->payload, "event")))
        json_object_set(b, "event", json_object_get(d->payload, "event"));
    exact = b ? json_dumps(b, JSON_COMPACT | JSON_REAL_PRECISION(17)) : NULL;
    json_decref(b);
    text = exact ? mg_json_short_reals(exact) : NULL; /* "0.1", never "0.10000000000000001" */
    free(exact);
    return text;
}

struct sink {
    char buf[RESPONSE_MAX];
    size_t len;
    int64_t retry_after_ms;
};

static size_t on_body(char *p, size_t size, size_t n, void *arg)
{
    struct sink *s = arg;
    size_t len = size * n, room = sizeof(s->buf) - 1 - s->len;

    memcpy(s->buf + s->len, p, len < room ? len : room);
    s->len += len < room ? len : room;
    return len; /* keep reading, but keep only the first bytes */
}

static size_t on_header(char *p, size_t size, size_t n, void *arg)
{
    struct sink *s = arg;
    size_t len = size * n;

    if (len > 12 && strncasecmp(p, "Retry-After:", 12) == 0) {
        long secs = strtol(p + 12, NULL, 10);
        if (secs > 0 && secs <= 3600)
            s->retry_after_ms = secs * 1000;
    }
    return len;
}

/* The SSRF guard: refuse to open a socket to a forbidden address. */
static curl_socket_t open_socket(void *arg, curlsocktype purpose, struct curl_sockaddr *a)
{
    const struct push_env *env = arg;

    (void)purpose;
    if (!push_allow_check(env->allow, &a->addr))
        return CURL_SOCKET_BAD;
    return socket(a->family, a->socktype, a->protocol);
}

bool push_webhook_key(const char *secret, uint8_t key[512], size_t *keylen)
{
    size_t n = strlen(secret);
    uint8_t *dec;

    *keylen = 0;
    if (strncmp(secret, "whsec_", 6) != 0) {
        if (n > 512)
            return false;
        memcpy(key, secret, n); /* a raw secret is its own key */
        *keylen = n;
        return true;
    }
    /* Standard Webhooks: the key is the base64 after the prefix, decoded. */
    dec = mg_base64_decode(secret + 6, n - 6, keylen);
    if (dec == NULL || *keylen < WHSEC_MIN || *keylen > WHSEC_MAX) {
        if (dec)
            OPENSSL_cleanse(dec, *keylen);
        free(dec);
        *keylen = 0;
        return false;
    }
    memcpy(key, dec, *keylen);
    OPENSSL_cleanse(dec, *keylen);
    free(dec);
    return true;
}

bool push_webhook_sign(const char *secret, const char *id, const char *ts, const char *body,
                       char out[64])
{
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned maclen = 0;
    struct mg_buf msg;
    char *b64;
    bool ok = false;
    uint8_t key[512];
    size_t keylen;

    if (!push_webhook_key(secret, key, &keylen))
        return false;
    mg_buf_init(&msg, SIZE_MAX / 2);
    if (mg_buf_puts(&msg, id) == MG_OK && mg_buf_puts(&msg, ".") == MG_OK &&
        mg_buf_puts(&msg, ts) == MG_OK && mg_buf_puts(&msg, ".") == MG_OK &&
        mg_buf_puts(&msg, body) == MG_OK &&
        HMAC(EVP_sha256(), key, (int)keylen, (const unsigned char *)msg.data, msg.len, mac,
             &maclen) != NULL) {
        b64 = mg_base64_encode(mac, maclen);
        if (b64) {
            snprintf(out, 64, "v1,%s", b64);
            free(b64);
            ok = true;
        }
    }
    OPENSSL_cleanse(key, sizeof(key));
    mg_buf_release(&msg);
    return ok;
}

void push_webhook_deliver(const struct push_env *env, const struct store_delivery *d,
                          struct push_result *res)
{
    const char *url = json_string_value(json_object_get(d->config, "url"));
    int64_t now = mg_now_ms();
    char *body = push_webhook_body(d, now);
    char id[256], ts[24], sig[64], hdr[320];
    struct curl_slist *h = NULL;
    struct sink sink;
    CURL *c = NULL;
    CURLcode cc;
    long status = 0;

    memset(&sink, 0, sizeof(sink));
    if (body == NULL || url == NULL || d->secret == NULL) {
        snprintf(res->error, sizeof(res->error), "gateway misconfigured (no url or secret)");
        goto out;
    }
    /* Stable across retries of this generation: receivers dedupe on it. */
    snprintf(id, sizeof(id), "mg_%s_%s_%s_%lld", d->gateway, d->model, d->alias,
             (long long)d->generation);
    snprintf(ts, sizeof(ts), "%lld", (long long)(now / 1000));
    if (!push_webhook_sign(d->secret, id, ts, body, sig)) {
        snprintf(res->error, sizeof(res->error), "cannot sign the delivery");
        goto out;
    }
    c = curl_easy_init();
    if (c == NULL) {
        snprintf(res->error, sizeof(res->error), "cannot start libcurl");
        goto out;
    }
    h = curl_slist_append(h, "Content-Type: application/json");
    snprintf(hdr, sizeof(hdr), "webhook-id: %s", id);
    h = curl_slist_append(h, hdr);
    snprintf(hdr, sizeof(hdr), "webhook-timestamp: %s", ts);
    h = curl_slist_append(h, hdr);
    snprintf(hdr, sizeof(hdr), "webhook-signature: %s", sig);
    h = curl_slist_append(h, hdr);
    h = curl_slist_append(h, "Expect:");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 15000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &sink);
    curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, open_socket);
    curl_easy_setopt(c, CURLOPT_OPENSOCKETDATA, (void *)env);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "modelgate-webhook/1");
    if (!push_fence(env, d, res))
        goto out;
    cc = curl_easy_perform(c);
    if (cc != CURLE_OK) {
        snprintf(res->error, sizeof(res->error), "%s%s", curl_easy_strerror(cc),
                 cc == CURLE_COULDNT_CONNECT ? " (or the address is not allowed)" : "");
        goto out;
    }
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    sink.buf[sink.len] = '\0';
    if (status >= 200 && status < 300) {
        res->ok = true;
    } else {
        size_t i;
        for (i = 0; i < sink.len; i++) {
            if (!isprint((unsigned char)sink.buf[i]))
                sink.buf[i] = ' ';
        }
        snprintf(res->error, sizeof(res->error), "HTTP %ld%s%s%.200s", status,
                 status >= 300 && status < 400 ? " (redirects are not followed)" : "",
                 sink.len ? ": " : "", sink.buf);
        res->gone = status == 410;
        res->retry_after_ms = sink.retry_after_ms;
    }
out:
    curl_slist_free_all(h);
    if (c)
        curl_easy_cleanup(c);
    free(body);
}
