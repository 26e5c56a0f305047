/*
 * blob_s3.c - blobs in an S3 bucket: <prefix>sha256/<hex>.
 *
 * Every request is signed by libcurl (CURLOPT_AWS_SIGV4); only presigned download
 * URLs are signed here (blob_presign.c). An upload is a multipart upload streamed
 * in parts (two part buffers, whatever the size): straight to the digest key when
 * the client declared the digest (completed only after the bytes hashed to it),
 * else to a unique temp key <prefix>uploads/<id> that is copied to the digest key
 * at commit. An upload that fits one part is a single PUT. Abort aborts the
 * multipart upload and removes the temp object.
 */
#include "blob_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

#include <openssl/crypto.h>

#define COPY_MAX ((uint64_t)5 << 30)  /* CopyObject's limit */
#define COPY_PART ((uint64_t)1 << 30) /* UploadPartCopy range size above it */
#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

struct s3_backend {
    char bucket[64];
    char prefix[512];   /* "" or "a/b/" */
    char scheme[8];     /* http, https */
    char hostport[256]; /* endpoint host[:port] */
    char region[64];
    bool path_style;
    char *access, *secret, *token;
    char sigv4[128]; /* "aws:amz:<region>:s3" */
    /* Commits of one digest copy to its key one at a time in this process (the second then
     * finds the blob there); by digest, so other blobs' commits do not wait. */
    pthread_mutex_t copy_lock[16];
};

struct s3_put {
    struct blob_put base;
    struct s3_backend *s;
    char key[700];
    bool temp; /* key is under <prefix>uploads/: copy at commit */
    char upload_id[512];
    struct blob_parts *parts;
    char (*etags)[80];
    unsigned netags, cap;
    uint64_t size;
    uint64_t part_bytes;
};

static struct s3_backend *sb(struct blob_backend *b)
{
    return b->impl;
}

enum mg_code blob_s3_open(struct blob_backend *b, const char *url, const char *creds,
                          struct mg_error *err)
{
    struct s3_backend *s = calloc(1, sizeof(*s));
    const char *p = url + 5, *q = strchr(p, '?');
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
static enum mg_code s3_req(struct blob_backend *b, const char *method, const char *key,
                           const char *query, const char *const *extra, const void *body,
                           size_t len, bool unsigned_payload, struct blob_http_resp *r,
                           struct mg_error *err)
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
static enum mg_code s3_status(struct blob_backend *b, const char *what,
                              const struct blob_http_resp *r, struct mg_error *err)
{
    char code[64], msg[200];

    blob_xml_value(r->body.data, r->body.len, "Code", code, sizeof(code));
    blob_xml_value(r->body.data, r->body.len, "Message", msg, sizeof(msg));
    return mg_fail(err, r->status >= 500 ? MG_EUNAVAIL : MG_EIO, NULL,
                   "the %s answered %ld to %s%s%s%s%s", b->desc, r->status, what,
                   code[0] ? ": " : "", code, msg[0] ? " - " : "", msg);
}

static void digest_key(struct s3_backend *s, const char *digest, char *out, size_t outsz)
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
    rc = s3_req(b, "GET", NULL, q, NULL, NULL, 0, false, &r, err);
    if (rc == MG_OK && r.status != 200)
        rc = s3_status(b, "a bucket listing", &r, err);
    blob_http_resp_release(&r);
    return rc;
}

/* ---- upload --------------------------------------------------------------- */

static enum mg_code mpu_create(struct s3_put *p, struct mg_error *err)
{
    struct blob_http_resp r;
    enum mg_code rc;

    blob_http_resp_init(&r);
    rc = s3_req(p->base.b, "POST", p->key, "uploads=", NULL, NULL, 0, false, &r, err);
    if (rc == MG_OK && r.status != 200)
        rc = s3_status(p->base.b, "CreateMultipartUpload", &r, err);
    if (rc == MG_OK) {
        blob_xml_value(r.body.data, r.body.len, "UploadId", p->upload_id, sizeof(p->upload_id));
        if (p->upload_id[0] == '\0')
            rc = mg_fail(err, MG_EIO, NULL, "the %s gave no UploadId", p->base.b->desc);
    }
    blob_http_resp_release(&r);
    return rc;
}

static enum mg_code part_put(struct s3_put *p, const uint8_t *data, size_t len, unsigned index,
                             struct mg_error *err)
{
    struct blob_http_resp r;
    char *q = NULL, *eid = blob_sigv4_encode(p->upload_id, false);
    enum mg_code rc;

    if (eid == NULL || asprintf(&q, "partNumber=%u&uploadId=%s", index + 1, eid) < 0) {
        free(eid);
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
    free(eid);
    blob_http_resp_init(&r);
    rc = s3_req(p->base.b, "PUT", p->key, q, NULL, data, len, true, &r, err);
    if (rc == MG_OK && r.status != 200)
        rc = s3_status(p->base.b, "UploadPart", &r, err);
    if (rc == MG_OK && r.etag[0] == '\0')
        rc = mg_fail(err, MG_EIO, NULL, "the %s gave no ETag for a part", p->base.b->desc);
    if (rc == MG_OK && index >= p->cap) {
        unsigned cap = p->cap ? p->cap * 2 : 64;
        void *e = realloc(p->etags, cap * sizeof(*p->etags));
        if (e == NULL)
            rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        else {
            p->etags = e;
            p->cap = cap;
        }
    }
    if (rc == MG_OK) {
        snprintf(p->etags[index], sizeof(p->etags[index]), "%.79s", r.etag);
        p->netags = index + 1;
    }
    blob_http_resp_release(&r);
    free(q);
    return rc;
}

/* The parts' sender thread: the first part creates the multipart upload. */
static enum mg_code send_part(void *arg, const uint8_t *data, size_t len, unsigned index,
                              struct mg_error *err)
{
    struct s3_put *p = arg;
    enum mg_code rc;

    if (index >= BLOB_MAX_PARTS - 1)
        return mg_fail(err, MG_ETOOBIG, NULL, "the upload needs more than %u S3 parts",
                       BLOB_MAX_PARTS);
    if (index == 0 && (rc = mpu_create(p, err)) != MG_OK)
        return rc;
    return part_put(p, data, len, index, err);
}

static enum mg_code s3_put_begin(struct blob_backend *b, const char *expected, uint64_t max,
                                 struct blob_put **out, struct mg_error *err)
{
    struct s3_backend *s = sb(b);
    struct s3_put *p = calloc(1, sizeof(*p));
    uint64_t part = b->part_bytes;
    uint8_t id[16];
    char hex[33];
    enum mg_code rc;

    if (p == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    p->base.b = b;
    p->s = s;
    /* Parts big enough for max_bytes in 10,000 of them (rounded up to a MiB). */
    if (max / (BLOB_MAX_PARTS - 1) + 1 > part)
        part = ((max / (BLOB_MAX_PARTS - 1) >> 20) + 1) << 20;
    p->part_bytes = part;
    if (expected != NULL) {
        digest_key(s, expected, p->key, sizeof(p->key));
    } else {
        if (!mg_random_bytes(id, sizeof(id))) {
            free(p);
            return mg_fail(err, MG_EIO, NULL, "no randomness for an upload id");
        }
        mg_hex_encode(id, sizeof(id), hex);
        snprintf(p->key, sizeof(p->key), "%suploads/%s", s->prefix, hex);
        p->temp = true;
    }
    snprintf(p->base.handle, sizeof(p->base.handle), "%s", p->key);
    if ((rc = blob_parts_new(part, send_part, p, &p->parts, err)) != MG_OK) {
        free(p);
        return rc;
    }
    *out = &p->base;
    return MG_OK;
}

static enum mg_code s3_put_write(struct blob_put *bp, const void *data, size_t n,
                                 struct mg_error *err)
{
    struct s3_put *p = (struct s3_put *)bp;

    p->size += n;
    return blob_parts_write(p->parts, data, n, err);
}

static enum mg_code mpu_complete(struct s3_put *p, struct mg_error *err)
{
    struct blob_http_resp r;
    struct mg_buf x;
    char line[160], *q = NULL, *eid = blob_sigv4_encode(p->upload_id, false);
    enum mg_code rc = MG_OK;
    unsigned i;

    mg_buf_init(&x, (size_t)p->netags * 160 + 256);
    if (eid == NULL || mg_buf_puts(&x, "<CompleteMultipartUpload>") != MG_OK)
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    for (i = 0; rc == MG_OK && i < p->netags; i++) {
        snprintf(line, sizeof(line), "<Part><PartNumber>%u</PartNumber><ETag>%s</ETag></Part>",
                 i + 1, p->etags[i]);
        if (mg_buf_puts(&x, line) != MG_OK)
            rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
    if (rc == MG_OK && (mg_buf_puts(&x, "</CompleteMultipartUpload>") != MG_OK ||
                        asprintf(&q, "uploadId=%s", eid) < 0)) {
        q = NULL;
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
    if (rc == MG_OK) {
        blob_http_resp_init(&r);
        rc = s3_req(p->base.b, "POST", p->key, q, NULL, x.data, x.len, false, &r, err);
        /* S3 may answer 200 with an <Error> body when it fails late. */
        if (rc == MG_OK && (r.status != 200 || (r.body.data && strstr(r.body.data, "<Error>"))))
            rc = s3_status(p->base.b, "CompleteMultipartUpload", &r, err);
        blob_http_resp_release(&r);
    }
    if (rc == MG_OK)
        p->upload_id[0] = '\0'; /* done: nothing to abort */
    free(q);
    free(eid);
    mg_buf_release(&x);
    return rc;
}

/* Copy key src to key dst inside the bucket, server-side. */
static enum mg_code s3_copy(struct blob_backend *b, const char *src, const char *dst, uint64_t size,
                            struct mg_error *err)
{
    struct s3_backend *s = sb(b);
    struct blob_http_resp r;
    char *esrc = blob_sigv4_encode(src, true), hdr[1024], range[128], *q = NULL;
    struct s3_put mp = {0};
    enum mg_code rc = MG_OK;
    uint64_t off;
    unsigned i = 0;

    if (esrc == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    snprintf(hdr, sizeof(hdr), "x-amz-copy-source: /%s/%s", s->bucket, esrc);
    free(esrc);
    if (size <= COPY_MAX) {
        const char *extra[] = {hdr, NULL};
        unsigned attempt;

        /* The source was written a moment ago: a store that is not read-after-write
         * consistent (S3-compatible servers behind caches or replication, s3rver under
         * concurrent writes) may not find it yet. AWS S3 itself never answers 404 here. */
        for (attempt = 0; attempt < 4; attempt++) {
            long status;

            blob_http_resp_init(&r);
            rc = s3_req(b, "PUT", dst, NULL, extra, NULL, 0, false, &r, err);
            status = r.status;
            if (rc == MG_OK && (r.status != 200 || (r.body.data && strstr(r.body.data, "<Error>"))))
                rc = s3_status(b, "CopyObject", &r, err);
            blob_http_resp_release(&r);
            if (rc == MG_OK || status != 404)
                break;
            usleep(50000u << attempt);
        }
        return rc;
    }
    /* Over 5 GiB: a multipart upload whose parts are copied ranges. */
    mp.base.b = b;
    mp.s = s;
    snprintf(mp.key, sizeof(mp.key), "%s", dst);
    if ((rc = mpu_create(&mp, err)) != MG_OK)
        return rc;
    for (off = 0; rc == MG_OK && off < size; off += COPY_PART, i++) {
        const char *extra[] = {hdr, range, NULL};
        uint64_t end = off + COPY_PART < size ? off + COPY_PART - 1 : size - 1;
        char *eid = blob_sigv4_encode(mp.upload_id, false);

        snprintf(range, sizeof(range), "x-amz-copy-source-range: bytes=%llu-%llu",
                 (unsigned long long)off, (unsigned long long)end);
        if (eid == NULL || asprintf(&q, "partNumber=%u&uploadId=%s", i + 1, eid) < 0) {
            free(eid);
            q = NULL;
            rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
            break;
        }
        free(eid);
        blob_http_resp_init(&r);
        rc = s3_req(b, "PUT", dst, q, extra, NULL, 0, false, &r, err);
        if (rc == MG_OK && r.status != 200)
            rc = s3_status(b, "UploadPartCopy", &r, err);
        if (rc == MG_OK) {
            char etag[80];
            blob_xml_value(r.body.data, r.body.len, "ETag", etag, sizeof(etag));
            if (i >= mp.cap) {
                unsigned cap = mp.cap ? mp.cap * 2 : 16;
                void *e = realloc(mp.etags, cap * sizeof(*mp.etags));
                if (e == NULL)
                    rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
                else {
                    mp.etags = e;
                    mp.cap = cap;
                }
            }
            if (rc == MG_OK) {
                /* the XML body quotes the ETag as &quot;…&quot; */
                snprintf(mp.etags[i], sizeof(mp.etags[i]), "%s", etag);
                mp.netags = i + 1;
            }
        }
        blob_http_resp_release(&r);
        free(q);
        q = NULL;
    }
    if (rc == MG_OK)
        rc = mpu_complete(&mp, err);
    if (rc != MG_OK && mp.upload_id[0]) {
        /* best effort; a leftover is listed by blob_orphans */
        struct mg_error e2;
        char *eid = blob_sigv4_encode(mp.upload_id, false);
        if (eid && asprintf(&q, "uploadId=%s", eid) >= 0) {
            blob_http_resp_init(&r);
            s3_req(b, "DELETE", dst, q, NULL, NULL, 0, false, &r, &e2);
            blob_http_resp_release(&r);
            free(q);
        }
        free(eid);
    }
    free(mp.etags);
    return rc;
}

static enum mg_code s3_delete_key(struct blob_backend *b, const char *key, struct mg_error *err)
{
    struct blob_http_resp r;
    enum mg_code rc;

    blob_http_resp_init(&r);
    rc = s3_req(b, "DELETE", key, NULL, NULL, NULL, 0, false, &r, err);
    if (rc == MG_OK && r.status != 204 && r.status != 200 && r.status != 404)
        rc = s3_status(b, "DeleteObject", &r, err);
    blob_http_resp_release(&r);
    return rc;
}

static enum mg_code s3_abort_mpu(struct blob_backend *b, const char *key, const char *upload_id,
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
    rc = s3_req(b, "DELETE", key, q, NULL, NULL, 0, false, &r, err);
    if (rc == MG_OK && r.status != 204 && r.status != 200 && r.status != 404)
        rc = s3_status(b, "AbortMultipartUpload", &r, err);
    blob_http_resp_release(&r);
    free(q);
    return rc;
}

static enum mg_code s3_stat(struct blob_backend *b, const char *digest, uint64_t *size,
                            struct mg_error *err);
static bool s3_put_abort(struct blob_put *bp);

/* The digest key holds size bytes (whole: keys are only ever written complete). */
static bool s3_has(struct blob_backend *b, const char *digest, uint64_t size)
{
    struct mg_error e;
    uint64_t have = 0;

    return s3_stat(b, digest, &have, &e) == MG_OK && have == size;
}

static enum mg_code s3_put_commit(struct blob_put *bp, const char *digest, struct mg_error *err)
{
    struct s3_put *p = (struct s3_put *)bp;
    const uint8_t *tail;
    size_t tail_len;
    unsigned sent;
    char final[700];
    enum mg_code rc;

    pthread_mutex_t *l =
        &p->s->copy_lock[strtoul((char[3]){digest[7], digest[8], 0}, NULL, 16) % 16];

    if ((rc = blob_parts_finish(p->parts, &tail, &tail_len, &sent, err)) != MG_OK)
        return rc;
    /* One part or less, and the digest known now: the bytes go straight to the digest key,
     * one request instead of a temp object, its copy and its delete. */
    if (sent == 0 && p->temp) {
        digest_key(p->s, digest, p->key, sizeof(p->key));
        p->temp = false;
    }
    /* Writing straight to the digest key: one commit of a digest at a time here, and none
     * when the blob is there already (the caller aborts ours). */
    if (!p->temp) {
        pthread_mutex_lock(l);
        if (s3_has(bp->b, digest, p->size)) {
            pthread_mutex_unlock(l);
            s3_put_abort(bp); /* a leftover it leaves is listed by blob_orphans */
            return MG_OK;
        }
    }
    if (sent == 0) {
        /* One part or less: a single PUT. */
        struct blob_http_resp r;
        blob_http_resp_init(&r);
        rc = s3_req(bp->b, "PUT", p->key, NULL, NULL, tail, tail_len, true, &r, err);
        if (rc == MG_OK && r.status != 200)
            rc = s3_status(bp->b, "PutObject", &r, err);
        blob_http_resp_release(&r);
    } else {
        if (tail_len > 0)
            rc = part_put(p, tail, tail_len, sent, err);
        if (rc == MG_OK)
            rc = mpu_complete(p, err);
    }
    if (!p->temp)
        pthread_mutex_unlock(l);
    if (rc != MG_OK || !p->temp)
        return rc;
    digest_key(p->s, digest, final, sizeof(final));
    /* Content-addressed: when the digest key holds the blob already (a concurrent upload of
     * the same bytes got there first, even while our copy failed on it), ours is not needed. */
    {
        pthread_mutex_lock(l);
        if (s3_has(bp->b, digest, p->size))
            rc = MG_OK;
        else if ((rc = s3_copy(bp->b, p->key, final, p->size, err)) != MG_OK &&
                 s3_has(bp->b, digest, p->size))
            rc = MG_OK;
        pthread_mutex_unlock(l);
    }
    if (rc != MG_OK)
        return rc;
    /* The temp object is a leftover now; failing to remove it fails nothing. */
    if (s3_delete_key(bp->b, p->key, err) == MG_OK)
        bp->handle[0] = '\0';
    return MG_OK;
}

static bool s3_put_abort(struct blob_put *bp)
{
    struct s3_put *p = (struct s3_put *)bp;
    struct mg_error e;
    bool ok = true;

    blob_parts_free(&p->parts); /* waits for a part in flight */
    if (p->upload_id[0] && s3_abort_mpu(bp->b, p->key, p->upload_id, &e) != MG_OK)
        ok = false;
    if (ok)
        p->upload_id[0] = '\0';
    if (p->temp && bp->handle[0] && s3_delete_key(bp->b, p->key, &e) != MG_OK)
        ok = false;
    return ok;
}

static void s3_put_free(struct blob_put *bp)
{
    struct s3_put *p = (struct s3_put *)bp;

    blob_parts_free(&p->parts);
    free(p->etags);
    free(p);
}

/* ---- reading -------------------------------------------------------------- */

static enum mg_code s3_stat(struct blob_backend *b, const char *digest, uint64_t *size,
                            struct mg_error *err)
{
    struct blob_http_resp r;
    char key[700];
    enum mg_code rc;

    digest_key(sb(b), digest, key, sizeof(key));
    blob_http_resp_init(&r);
    rc = s3_req(b, "HEAD", key, NULL, NULL, NULL, 0, false, &r, err);
    if (rc == MG_OK && r.status == 404)
        rc = mg_fail(err, MG_ENOTFOUND, NULL, "blob %s is not in the %s", digest, b->desc);
    else if (rc == MG_OK && r.status != 200)
        rc = s3_status(b, "HeadObject", &r, err);
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

    if (len == 0) {
        struct blob_reader *r = calloc(1, sizeof(*r));
        if (r == NULL)
            return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        r->fd = -1;
        *out = r;
        return MG_OK;
    }
    digest_key(s, digest, key, sizeof(key));
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

    digest_key(s, digest, key, sizeof(key));
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

/* ---- housekeeping --------------------------------------------------------- */

static enum mg_code s3_del(struct blob_backend *b, const char *digest, struct mg_error *err)
{
    char key[700];

    digest_key(sb(b), digest, key, sizeof(key));
    return s3_delete_key(b, key, err);
}

/* Call fn on each <tag>…</tag> block of an XML body. */
static bool xml_each(const char *xml, size_t len, const char *tag,
                     bool (*fn)(const char *blk, size_t n, void *arg), void *arg)
{
    char open[64], close[64];
    const char *p = xml, *end = xml + len;

    snprintf(open, sizeof(open), "<%s>", tag);
    snprintf(close, sizeof(close), "</%s>", tag);
    while (p && p < end) {
        const char *a = memmem(p, (size_t)(end - p), open, strlen(open)), *z;
        if (a == NULL)
            break;
        z = memmem(a, (size_t)(end - a), close, strlen(close));
        if (z == NULL)
            break;
        if (!fn(a, (size_t)(z - a), arg))
            return false;
        p = z + strlen(close);
    }
    return true;
}

struct list_ctx {
    struct s3_backend *s;
    bool (*cb)(const char *digest, uint64_t size, void *arg);
    void *arg;
    char last[700];
};

static bool list_one(const char *blk, size_t n, void *arg)
{
    struct list_ctx *l = arg;
    char key[700], size[32], digest[80];
    const char *hex;
    size_t pl = strlen(l->s->prefix) + 7;

    blob_xml_value(blk, n, "Key", key, sizeof(key));
    blob_xml_value(blk, n, "Size", size, sizeof(size));
    snprintf(l->last, sizeof(l->last), "%s", key);
    if (strlen(key) != pl + 64)
        return true;
    hex = key + pl;
    if (strspn(hex, "0123456789abcdef") != 64)
        return true;
    snprintf(digest, sizeof(digest), "sha256:%s", hex);
    return l->cb(digest, strtoull(size, NULL, 10), l->arg);
}

static enum mg_code s3_list(struct blob_backend *b,
                            bool (*cb)(const char *digest, uint64_t size, void *arg), void *arg,
                            struct mg_error *err)
{
    struct s3_backend *s = sb(b);
    struct list_ctx l = {s, cb, arg, ""};
    char prefix[600], token[1024] = "", trunc[16];
    enum mg_code rc = MG_OK;

    snprintf(prefix, sizeof(prefix), "%ssha256/", s->prefix);
    for (;;) {
        struct blob_http_resp r;
        char *ep = blob_sigv4_encode(prefix, false), *et = blob_sigv4_encode(token, false),
             *q = NULL;
        bool more;

        if (ep == NULL || et == NULL ||
            asprintf(&q, "%s%s%slist-type=2&prefix=%s", token[0] ? "continuation-token=" : "",
                     token[0] ? et : "", token[0] ? "&" : "", ep) < 0) {
            free(ep);
            free(et);
            return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        }
        free(ep);
        free(et);
        blob_http_resp_init(&r);
        rc = s3_req(b, "GET", NULL, q, NULL, NULL, 0, false, &r, err);
        free(q);
        if (rc == MG_OK && r.status != 200)
            rc = s3_status(b, "ListObjectsV2", &r, err);
        if (rc != MG_OK) {
            blob_http_resp_release(&r);
            return rc;
        }
        more = xml_each(r.body.data, r.body.len, "Contents", list_one, &l);
        blob_xml_value(r.body.data, r.body.len, "IsTruncated", trunc, sizeof(trunc));
        blob_xml_value(r.body.data, r.body.len, "NextContinuationToken", token, sizeof(token));
        blob_http_resp_release(&r);
        if (!more || strcmp(trunc, "true") != 0 || token[0] == '\0')
            break;
    }
    return MG_OK;
}

struct orphan_ctx {
    struct s3_backend *s;
    bool (*cb)(const struct blob_orphan *o, void *arg);
    void *arg;
    bool uploads; /* multipart uploads, else temp objects */
};

static int64_t iso_ms(const char *t)
{
    int64_t ms;

    return t[0] && mg_time_parse(t, &ms) ? ms : -1;
}

static bool orphan_one(const char *blk, size_t n, void *arg)
{
    struct orphan_ctx *o = arg;
    char key[700], id[512], when[64], handle[BLOB_HANDLE_MAX];
    struct blob_orphan bo;
    int64_t at;

    blob_xml_value(blk, n, "Key", key, sizeof(key));
    blob_xml_value(blk, n, o->uploads ? "Initiated" : "LastModified", when, sizeof(when));
    at = iso_ms(when);
    if (o->uploads) {
        blob_xml_value(blk, n, "UploadId", id, sizeof(id));
        snprintf(handle, sizeof(handle), "%s?uploadId=%s", key, id);
    } else {
        snprintf(handle, sizeof(handle), "%s", key);
    }
    bo.handle = handle;
    bo.owner = key;
    bo.what = o->uploads ? "multipart upload" : "temp object";
    bo.age_ms = at >= 0 ? mg_now_ms() - at : -1;
    return o->cb(&bo, o->arg);
}

static enum mg_code s3_orphans(struct blob_backend *b,
                               bool (*cb)(const struct blob_orphan *o, void *arg), void *arg,
                               struct mg_error *err)
{
    struct s3_backend *s = sb(b);
    struct orphan_ctx o = {s, cb, arg, true};
    struct blob_http_resp r;
    char prefix[600], *ep, *q = NULL;
    enum mg_code rc;
    bool more;

    /* Multipart uploads anywhere under the prefix (to temp or digest keys). */
    if ((ep = blob_sigv4_encode(s->prefix, false)) == NULL ||
        asprintf(&q, "prefix=%s&uploads=", ep) < 0) {
        free(ep);
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
    free(ep);
    blob_http_resp_init(&r);
    rc = s3_req(b, "GET", NULL, q, NULL, NULL, 0, false, &r, err);
    free(q);
    if (rc == MG_OK && r.status != 200)
        rc = s3_status(b, "ListMultipartUploads", &r, err);
    more = rc == MG_OK && xml_each(r.body.data, r.body.len, "Upload", orphan_one, &o);
    blob_http_resp_release(&r);
    if (rc != MG_OK || !more)
        return rc;
    /* Temp objects of uploads that completed but were never copied. */
    o.uploads = false;
    snprintf(prefix, sizeof(prefix), "%suploads/", s->prefix);
    if ((ep = blob_sigv4_encode(prefix, false)) == NULL ||
        asprintf(&q, "list-type=2&prefix=%s", ep) < 0) {
        free(ep);
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
    free(ep);
    blob_http_resp_init(&r);
    rc = s3_req(b, "GET", NULL, q, NULL, NULL, 0, false, &r, err);
    free(q);
    if (rc == MG_OK && r.status != 200)
        rc = s3_status(b, "ListObjectsV2", &r, err);
    if (rc == MG_OK)
        xml_each(r.body.data, r.body.len, "Contents", orphan_one, &o);
    blob_http_resp_release(&r);
    return rc;
}

/* "key?uploadId=ID": abort that upload. "key": a temp key's object and its multipart
 * uploads, or (a digest key) only its multipart uploads. */
static enum mg_code s3_reclaim(struct blob_backend *b, const char *handle, struct mg_error *err)
{
    struct s3_backend *s = sb(b);
    char key[700], tmp_prefix[600];
    const char *q = strstr(handle, "?uploadId=");
    size_t kl = q ? (size_t)(q - handle) : strlen(handle);
    size_t pl = strlen(s->prefix);
    enum mg_code rc;

    if (kl >= sizeof(key) || strncmp(handle, s->prefix, pl) != 0)
        return mg_fail(err, MG_EINVAL, NULL, "'%.200s' is not an upload of the %s", handle,
                       b->desc);
    memcpy(key, handle, kl);
    key[kl] = '\0';
    if (q != NULL)
        return s3_abort_mpu(b, key, q + 10, err);
    snprintf(tmp_prefix, sizeof(tmp_prefix), "%suploads/", s->prefix);
    {
        /* every multipart upload on this key */
        struct blob_http_resp r;
        char *ep = blob_sigv4_encode(key, false), *qq = NULL;
        const char *p;

        if (ep == NULL || asprintf(&qq, "prefix=%s&uploads=", ep) < 0) {
            free(ep);
            return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        }
        free(ep);
        blob_http_resp_init(&r);
        rc = s3_req(b, "GET", NULL, qq, NULL, NULL, 0, false, &r, err);
        free(qq);
        if (rc == MG_OK && r.status != 200)
            rc = s3_status(b, "ListMultipartUploads", &r, err);
        for (p = r.body.data; rc == MG_OK && p && (p = strstr(p, "<Upload>")) != NULL; p++) {
            const char *z = strstr(p, "</Upload>");
            char k[700], id[512];
            if (z == NULL)
                break;
            blob_xml_value(p, (size_t)(z - p), "Key", k, sizeof(k));
            blob_xml_value(p, (size_t)(z - p), "UploadId", id, sizeof(id));
            if (strcmp(k, key) == 0 && id[0])
                rc = s3_abort_mpu(b, key, id, err);
        }
        blob_http_resp_release(&r);
        if (rc != MG_OK)
            return rc;
    }
    if (strncmp(key, tmp_prefix, strlen(tmp_prefix)) == 0)
        return s3_delete_key(b, key, err);
    return MG_OK;
}

const struct blob_ops blob_s3_ops = {
    .kind = "s3",
    .check = s3_check,
    .put_begin = s3_put_begin,
    .put_write = s3_put_write,
    .put_commit = s3_put_commit,
    .put_abort = s3_put_abort,
    .put_free = s3_put_free,
    .stat = s3_stat,
    .read_open = s3_read_open,
    .presign = s3_presign,
    .del = s3_del,
    .list = s3_list,
    .orphans = s3_orphans,
    .reclaim = s3_reclaim,
    .close = s3_close,
};
