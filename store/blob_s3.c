/*
 * blob_s3.c - blobs in an S3 bucket: <prefix>sha256/<hex>. This file holds the backend's
 * configuration (the URL and the credentials), the one signed request every other part
 * sends, reading (HEAD, ranged GET, presigned URLs) and deleting, and the vtable (the
 * one backend with BLOB_CAN_PRESIGN; no local files, no descriptors).
 * Uploads are in blob_s3_upload.c, listing and reclaiming in blob_s3_list.c; the three
 * share blob_s3_int.h.
 *
 * Every request is signed by libcurl (CURLOPT_AWS_SIGV4); only presigned download
 * URLs are signed here (blob_presign.c). An upload is a multipart upload streamed
 * in parts (two part buffers, whatever the size): straight to the digest key when
 * the client declared the digest (completed only after the bytes hashed to it),
 * else to a unique temp key <prefix>uploads/<id> that is copied to the digest key
 * at commit. An upload that fits one part is a single PUT. Abort aborts the
 * multipart upload and removes the temp object.
 */
#include "blob_s3_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>

#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

#define SCHEME "s3://"

static enum mg_code s3_check_url(const char *url, struct mg_error *err)
{
    const char *b = url + strlen(SCHEME);
    size_t n = strcspn(b, "/?");

    if (n < 3 || n > 63 || strspn(b, "abcdefghijklmnopqrstuvwxyz0123456789.-") < n)
        return mg_fail(err, MG_EINVAL, "blobs",
                       "--blobs s3://BUCKET/prefix: the bucket name is 3 to 63 lowercase letters, "
                       "digits, '.' or '-'");
    return MG_OK;
}

/* s3://BUCKET[/PREFIX][?endpoint=…&region=…&path_style=true]; credentials from the file,
 * else the AWS_* environment. */
static enum mg_code s3_open(struct blob_backend *b, const char *url, const char *creds,
                            struct mg_error *err)
{
    struct s3_backend *s = calloc(1, sizeof(*s));
    const char *p = url + strlen(SCHEME), *q = strchr(p, '?');
    size_t bl = strcspn(p, "/?");
    char endpoint[512] = "", v[64];
    const char *ak = getenv("AWS_ACCESS_KEY_ID"), *sk = getenv("AWS_SECRET_ACCESS_KEY"),
               *tok = getenv("AWS_SESSION_TOKEN");

    if (s == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    b->impl = s;
    for (size_t i = 0; i < sizeof(s->copy_lock) / sizeof(s->copy_lock[0]); i++)
        pthread_mutex_init(&s->copy_lock[i], NULL);
    memcpy(s->bucket, p, bl);
    p += bl;
    if (*p == '/') {
        size_t pl = q ? (size_t)(q - p - 1) : strlen(p + 1);
        if (pl >= sizeof(s->prefix) - 2)
            return mg_fail(err, MG_EINVAL, "blobs", "the s3 prefix is too long");
        memcpy(s->prefix, p + 1, pl);
        while (pl > 0 && s->prefix[pl - 1] == '/')
            s->prefix[--pl] = '\0';
        if (pl > 0)
            s->prefix[pl++] = '/';
        if (strstr(s->prefix, "..") || strstr(s->prefix, "//"))
            return mg_fail(err, MG_EINVAL, "blobs", "the s3 prefix may not hold '..' or '//'");
    }
    snprintf(s->region, sizeof(s->region), "us-east-1");
    if (q && blob_query_param(q + 1, "region", v, sizeof(v))) {
        if (v[0] == '\0' || strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(v))
            return mg_fail(err, MG_EINVAL, "blobs", "region= is an S3 region such as eu-west-1");
        snprintf(s->region, sizeof(s->region), "%s", v);
    }
    if (q && blob_query_param(q + 1, "path_style", v, sizeof(v)))
        s->path_style = strcmp(v, "true") == 0;
    if (q && blob_query_param(q + 1, "endpoint", endpoint, sizeof(endpoint))) {
        const char *h;
        if (strncmp(endpoint, "http://", 7) == 0)
            snprintf(s->scheme, sizeof(s->scheme), "http");
        else if (strncmp(endpoint, "https://", 8) == 0)
            snprintf(s->scheme, sizeof(s->scheme), "https");
        else
            return mg_fail(err, MG_EINVAL, "blobs",
                           "endpoint= is http(s)://HOST[:PORT], e.g. http://127.0.0.1:9000");
        h = endpoint + strlen(s->scheme) + 3;
        snprintf(s->hostport, sizeof(s->hostport), "%.*s", (int)strcspn(h, "/"), h);
        if (s->hostport[0] == '\0')
            return mg_fail(err, MG_EINVAL, "blobs", "endpoint= names no host");
    } else {
        snprintf(s->scheme, sizeof(s->scheme), "https");
        snprintf(s->hostport, sizeof(s->hostport), "s3.%s.amazonaws.com", s->region);
    }
    snprintf(s->sigv4, sizeof(s->sigv4), "aws:amz:%s:s3", s->region);
    snprintf(b->desc, sizeof(b->desc), "s3 bucket '%.63s' at %.5s://%.200s", s->bucket, s->scheme,
             s->hostport);
    if (creds != NULL)
        return blob_read_credentials(creds, "ACCESS_KEY:SECRET_KEY", &s->access, &s->secret, err);
    if (ak == NULL || sk == NULL || !ak[0] || !sk[0])
        return mg_fail(err, MG_EINVAL, "blobs-credentials",
                       "the s3 backend needs credentials: --blobs-credentials FILE "
                       "(ACCESS_KEY:SECRET_KEY, mode 0600) or AWS_ACCESS_KEY_ID and "
                       "AWS_SECRET_ACCESS_KEY");
    s->access = strdup(ak);
    s->secret = strdup(sk);
    if (tok && tok[0])
        s->token = strdup(tok);
    if (!s->access || !s->secret || (tok && tok[0] && !s->token))
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    return MG_OK;
}

static void s3_close(struct blob_backend *b)
{
    struct s3_backend *s = sb(b);

    if (s->secret)
        OPENSSL_cleanse(s->secret, strlen(s->secret));
    if (s->token)
        OPENSSL_cleanse(s->token, strlen(s->token));
    free(s->access);
    free(s->secret);
    free(s->token);
    for (size_t i = 0; i < sizeof(s->copy_lock) / sizeof(s->copy_lock[0]); i++)
        pthread_mutex_destroy(&s->copy_lock[i]);
    free(s);
    b->impl = NULL;
}

/* scheme://host/bucket (path style) or scheme://bucket.host, plus "/" + key. */
static char *object_url(struct s3_backend *s, const char *key, const char *query)
{
    char *ek = blob_sigv4_encode(key ? key : "", true), *url = NULL;
    int n;

    if (ek == NULL)
        return NULL;
    if (s->path_style)
        n = asprintf(&url, "%s://%s/%s%s%s%s%s", s->scheme, s->hostport, s->bucket,
                     ek[0] ? "/" : "", ek, query ? "?" : "", query ? query : "");
    else
        n = asprintf(&url, "%s://%s.%s/%s%s%s", s->scheme, s->bucket, s->hostport, ek,
                     query ? "?" : "", query ? query : "");
    free(ek);
    return n < 0 ? NULL : url;
}

/*
 * One signed request. body/len: the payload (sent as is; its SHA-256 is signed
 * unless unsigned_payload). key NULL: the bucket itself.
 */
enum mg_code blob_s3_req(struct blob_backend *b, const char *method, const char *key,
                         const char *query, const char *const *extra, const void *body, size_t len,
                         bool unsigned_payload, struct blob_http_resp *r, struct mg_error *err)
{
    struct s3_backend *s = sb(b);
    struct curl_slist *h = NULL, *n;
    char *url = object_url(s, key, query), sha[96], hex[65];
    CURL *c = NULL;
    CURLcode cr = CURLE_OK;
    enum mg_code rc;

    if (url == NULL || (c = blob_http_easy(r)) == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    if (unsigned_payload) {
        snprintf(sha, sizeof(sha), "x-amz-content-sha256: UNSIGNED-PAYLOAD");
    } else if (len == 0) {
        snprintf(sha, sizeof(sha), "x-amz-content-sha256: %s", EMPTY_SHA256);
    } else {
        mg_sha256_hex(body, len, hex);
        snprintf(sha, sizeof(sha), "x-amz-content-sha256: %s", hex);
    }
    /* No "Expect:" to suppress 100-continue: curl would sign the empty header. */
    if ((h = curl_slist_append(NULL, sha)) == NULL)
        goto nomem;
    if (s->token) {
        char *t = NULL;
        if (asprintf(&t, "x-amz-security-token: %s", s->token) < 0)
            goto nomem;
        n = curl_slist_append(h, t);
        OPENSSL_cleanse(t, strlen(t));
        free(t);
        if (n == NULL)
            goto nomem;
        h = n;
    }
    for (; extra && *extra; extra++) {
        if ((n = curl_slist_append(h, *extra)) == NULL)
            goto nomem;
        h = n;
    }
    if (body != NULL) {
        if ((n = curl_slist_append(h, "Content-Type: application/octet-stream")) == NULL)
            goto nomem;
        h = n;
    }
    cr |= curl_easy_setopt(c, CURLOPT_URL, url);
    cr |= curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    cr |= curl_easy_setopt(c, CURLOPT_AWS_SIGV4, s->sigv4);
    cr |= curl_easy_setopt(c, CURLOPT_USERNAME, s->access);
    cr |= curl_easy_setopt(c, CURLOPT_PASSWORD, s->secret);
    if (strcmp(method, "HEAD") == 0)
        cr |= curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    else if (strcmp(method, "GET") != 0)
        cr |= curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    if (body != NULL) {
        cr |= curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        cr |= curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
        /* A part goes out 512 KiB a send, not 64 KiB (libcurl's default). */
        if (len > (64u << 10))
            cr |= curl_easy_setopt(c, CURLOPT_UPLOAD_BUFFERSIZE, 512L << 10);
    }
    if (cr != CURLE_OK) {
        rc = mg_fail(err, MG_EIO, NULL, "cannot set up a request to the %s", b->desc);
        goto out;
    }
    rc = blob_http_perform(c, r, b->desc, err);
    if (rc == MG_OK && (r->status == 401 || r->status == 403)) {
        char code[64];
        blob_xml_value(r->body.data, r->body.len, "Code", code, sizeof(code));
        rc = mg_fail(err, MG_EUNAVAIL, NULL,
                     "the %s refused modelgated's credentials (%ld %s); check "
                     "--blobs-credentials or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY",
                     b->desc, r->status, code[0] ? code : "AccessDenied");
    }
    goto out;
nomem:
    rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
out:
    curl_slist_free_all(h);
    if (c)
        curl_easy_cleanup(c);
    free(url);
    return rc;
}

/* An unexpected status as an error naming the request and S3's error code. */
enum mg_code blob_s3_status(struct blob_backend *b, const char *what,
                            const struct blob_http_resp *r, struct mg_error *err)
{
    char code[64], msg[200];

    blob_xml_value(r->body.data, r->body.len, "Code", code, sizeof(code));
    blob_xml_value(r->body.data, r->body.len, "Message", msg, sizeof(msg));
    return mg_fail(err, r->status >= 500 ? MG_EUNAVAIL : MG_EIO, NULL,
                   "the %s answered %ld to %s%s%s%s%s", b->desc, r->status, what,
                   code[0] ? ": " : "", code, msg[0] ? " - " : "", msg);
}

void blob_s3_digest_key(struct s3_backend *s, const char *digest, char *out, size_t outsz)
{
    snprintf(out, outsz, "%ssha256/%s", s->prefix, digest + 7);
}

static enum mg_code s3_check(struct blob_backend *b, struct mg_error *err)
{
    struct blob_http_resp r;
    enum mg_code rc;
    char q[600];
    char *ep = blob_sigv4_encode(sb(b)->prefix, false);

    if (ep == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    snprintf(q, sizeof(q), "list-type=2&max-keys=1&prefix=%s", ep);
    free(ep);
    blob_http_resp_init(&r);
    rc = blob_s3_req(b, "GET", NULL, q, NULL, NULL, 0, false, &r, err);
    if (rc == MG_OK && r.status != 200)
        rc = blob_s3_status(b, "a bucket listing", &r, err);
    blob_http_resp_release(&r);
    return rc;
}

enum mg_code blob_s3_delete_key(struct blob_backend *b, const char *key, struct mg_error *err)
{
    struct blob_http_resp r;
    enum mg_code rc;

    blob_http_resp_init(&r);
    rc = blob_s3_req(b, "DELETE", key, NULL, NULL, NULL, 0, false, &r, err);
    if (rc == MG_OK && r.status != 204 && r.status != 200 && r.status != 404)
        rc = blob_s3_status(b, "DeleteObject", &r, err);
    blob_http_resp_release(&r);
    return rc;
}

enum mg_code blob_s3_abort_mpu(struct blob_backend *b, const char *key, const char *upload_id,
                               struct mg_error *err)
{
    struct blob_http_resp r;
    char *q = NULL, *eid = blob_sigv4_encode(upload_id, false);
    enum mg_code rc;

    if (eid == NULL || asprintf(&q, "uploadId=%s", eid) < 0) {
        free(eid);
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
    free(eid);
    blob_http_resp_init(&r);
    rc = blob_s3_req(b, "DELETE", key, q, NULL, NULL, 0, false, &r, err);
    if (rc == MG_OK && r.status != 204 && r.status != 200 && r.status != 404)
        rc = blob_s3_status(b, "AbortMultipartUpload", &r, err);
    blob_http_resp_release(&r);
    free(q);
    return rc;
}

/* ---- reading -------------------------------------------------------------- */

enum mg_code blob_s3_stat(struct blob_backend *b, const char *digest, uint64_t *size,
                          struct mg_error *err)
{
    struct blob_http_resp r;
    char key[700];
    enum mg_code rc;

    blob_s3_digest_key(sb(b), digest, key, sizeof(key));
    blob_http_resp_init(&r);
    rc = blob_s3_req(b, "HEAD", key, NULL, NULL, NULL, 0, false, &r, err);
    if (rc == MG_OK && r.status == 404)
        rc = mg_fail(err, MG_ENOTFOUND, NULL, "blob %s is not in the %s", digest, b->desc);
    else if (rc == MG_OK && r.status != 200)
        rc = blob_s3_status(b, "HeadObject", &r, err);
    if (rc == MG_OK)
        *size = r.length;
    blob_http_resp_release(&r);
    return rc;
}

static enum mg_code s3_read_open(struct blob_backend *b, const char *digest, uint64_t off,
                                 uint64_t len, struct blob_reader **out, struct mg_error *err)
{
    struct s3_backend *s = sb(b);
    struct blob_http_resp dummy;
    struct curl_slist *h = NULL, *n;
    char key[700], range[96], *url;
    CURL *c;

    if (len == 0)
        return blob_empty_reader(out, err);
    blob_s3_digest_key(s, digest, key, sizeof(key));
    url = object_url(s, key, NULL);
    blob_http_resp_init(&dummy);
    c = blob_http_easy(&dummy); /* the stream points header capture at its own */
    blob_http_resp_release(&dummy);
    snprintf(range, sizeof(range), "Range: bytes=%llu-%llu", (unsigned long long)off,
             (unsigned long long)(off + len - 1));
    if (url == NULL || c == NULL || (h = curl_slist_append(NULL, range)) == NULL ||
        (n = curl_slist_append(h, "x-amz-content-sha256: " EMPTY_SHA256)) == NULL)
        goto nomem;
    h = n;
    if (s->token) {
        char *t = NULL;
        if (asprintf(&t, "x-amz-security-token: %s", s->token) < 0)
            goto nomem;
        n = curl_slist_append(h, t);
        free(t);
        if (n == NULL)
            goto nomem;
        h = n;
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_AWS_SIGV4, s->sigv4);
    curl_easy_setopt(c, CURLOPT_USERNAME, s->access);
    curl_easy_setopt(c, CURLOPT_PASSWORD, s->secret);
    free(url);
    return blob_stream_start(c, h, b->desc, NULL, NULL, out, err);
nomem:
    free(url);
    curl_slist_free_all(h);
    if (c)
        curl_easy_cleanup(c);
    return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
}

static enum mg_code s3_presign(struct blob_backend *b, const char *digest, unsigned ttl_s,
                               char **url, struct mg_error *err)
{
    struct s3_backend *s = sb(b);
    struct blob_sigv4 sg = {0};
    char key[700], host[400], *ek, *path = NULL, *q;
    char date[20];
    time_t now = time(NULL);
    struct tm tm;

    blob_s3_digest_key(s, digest, key, sizeof(key));
    if ((ek = blob_sigv4_encode(key, true)) == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    if (s->path_style) {
        snprintf(host, sizeof(host), "%s", s->hostport);
        if (asprintf(&path, "/%s/%s", s->bucket, ek) < 0)
            path = NULL;
    } else {
        snprintf(host, sizeof(host), "%s.%s", s->bucket, s->hostport);
        if (asprintf(&path, "/%s", ek) < 0)
            path = NULL;
    }
    free(ek);
    if (path == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    gmtime_r(&now, &tm);
    strftime(date, sizeof(date), "%Y%m%dT%H%M%SZ", &tm);
    sg.access_key = s->access;
    sg.secret_key = s->secret;
    sg.session_token = s->token;
    sg.region = s->region;
    sg.host = host;
    sg.path = path;
    sg.amz_date = date;
    sg.expires_s = ttl_s;
    q = blob_sigv4_presign_query(&sg);
    if (q == NULL || asprintf(url, "%s://%s%s?%s", s->scheme, host, path, q) < 0) {
        *url = NULL;
        free(q);
        free(path);
        return mg_fail(err, MG_ENOMEM, NULL, "cannot presign a URL");
    }
    free(q);
    free(path);
    return MG_OK;
}

/* ---- deleting ------------------------------------------------------------- */

static enum mg_code s3_del(struct blob_backend *b, const char *digest, struct mg_error *err)
{
    char key[700];

    blob_s3_digest_key(sb(b), digest, key, sizeof(key));
    return blob_s3_delete_key(b, key, err);
}

const struct blob_ops blob_s3_ops = {
    .kind = "s3",
    .scheme = SCHEME,
    .usage = "s3://BUCKET/PREFIX?endpoint=…&region=…",
    .supports = BLOB_CAN_PRESIGN,
    .check_url = s3_check_url,
    .open = s3_open,
    .check = s3_check,
    .put_begin = blob_s3_put_begin,
    .put_write = blob_s3_put_write,
    .put_local_path = blob_no_put_local_path,
    .put_commit = blob_s3_put_commit,
    .put_abort = blob_s3_put_abort,
    .put_free = blob_s3_put_free,
    .stat = blob_s3_stat,
    .local_path = blob_no_local_path,
    .read_open = s3_read_open,
    .presign = s3_presign,
    .del = s3_del,
    .list = blob_s3_list,
    .orphans = blob_s3_orphans,
    .reclaim = blob_s3_reclaim,
    .close = s3_close,
};
