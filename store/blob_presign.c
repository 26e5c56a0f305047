/*
 * blob_presign.c - SigV4 query-string presigning of S3 GETs (--blob-downloads
 * redirect). libcurl signs the requests it sends (CURLOPT_AWS_SIGV4) but cannot
 * make a URL for someone else to send, so this is the one signer of our own: a
 * canonical request with UNSIGNED-PAYLOAD and the host header only, per "Authenticating
 * Requests: Using Query Parameters (AWS Signature Version 4)". Pure: no clock, no I/O.
 */
#include "blob_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

char *blob_sigv4_encode(const char *s, bool keep_slash)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(s), i, o = 0;
    char *out;

    if (n > (SIZE_MAX - 1) / 3 || (out = malloc(n * 3 + 1)) == NULL)
        return NULL;
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
            out[o++] = (char)c;
        } else {
            out[o++] = '%';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
    }
    out[o] = '\0';
    return out;
}

static bool hmac(const void *key, size_t klen, const char *msg, uint8_t out[32])
{
    unsigned len = 0;

    return HMAC(EVP_sha256(), key, (int)klen, (const unsigned char *)msg, strlen(msg), out, &len) !=
               NULL &&
           len == 32;
}

char *blob_sigv4_presign_query(const struct blob_sigv4 *s)
{
    char date[9], scope[256], *cred = NULL, *token = NULL, *query = NULL, *canon = NULL,
                              *sts = NULL, *out = NULL;
    char hash[65], sig[65];
    uint8_t k[32], k2[32];
    char *secret = NULL;
    int n;

    if (strlen(s->amz_date) != 16)
        return NULL;
    memcpy(date, s->amz_date, 8);
    date[8] = '\0';
    snprintf(scope, sizeof(scope), "%s/%s/s3/aws4_request", date, s->region);
    {
        char credential[512];
        snprintf(credential, sizeof(credential), "%s/%s", s->access_key, scope);
        cred = blob_sigv4_encode(credential, false);
    }
    if (cred == NULL ||
        (s->session_token && (token = blob_sigv4_encode(s->session_token, false)) == NULL))
        goto out;
    /* The parameters in byte order of their names (X-Amz-Security-Token sorts before
     * X-Amz-SignedHeaders: 'e' < 'i'). */
    n = asprintf(&query,
                 "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=%s&X-Amz-Date=%s"
                 "&X-Amz-Expires=%u%s%s&X-Amz-SignedHeaders=host",
                 cred, s->amz_date, s->expires_s, token ? "&X-Amz-Security-Token=" : "",
                 token ? token : "");
    if (n < 0) {
        query = NULL;
        goto out;
    }
    n = asprintf(&canon, "GET\n%s\n%s\nhost:%s\n\nhost\nUNSIGNED-PAYLOAD", s->path, query, s->host);
    if (n < 0) {
        canon = NULL;
        goto out;
    }
    mg_sha256_hex(canon, strlen(canon), hash);
    if (asprintf(&sts, "AWS4-HMAC-SHA256\n%s\n%s\n%s", s->amz_date, scope, hash) < 0) {
        sts = NULL;
        goto out;
    }
    if (asprintf(&secret, "AWS4%s", s->secret_key) < 0) {
        secret = NULL;
        goto out;
    }
    if (!hmac(secret, strlen(secret), date, k) || !hmac(k, 32, s->region, k2) ||
        !hmac(k2, 32, "s3", k) || !hmac(k, 32, "aws4_request", k2) || !hmac(k2, 32, sts, k))
        goto out;
    mg_hex_encode(k, 32, sig);
    if (asprintf(&out, "%s&X-Amz-Signature=%s", query, sig) < 0)
        out = NULL;
out:
    OPENSSL_cleanse(k, sizeof(k));
    OPENSSL_cleanse(k2, sizeof(k2));
    if (secret) {
        OPENSSL_cleanse(secret, strlen(secret));
        free(secret);
    }
    free(cred);
    free(token);
    free(query);
    free(canon);
    free(sts);
    return out;
}
