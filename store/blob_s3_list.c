/*
 * blob_s3_list.c - listing the S3 backend's bucket (blob_s3.c has the overview): the blobs
 * under <prefix>sha256/ (ListObjectsV2), the uploads a crash left behind (multipart uploads
 * and temp objects under <prefix>uploads/) and reclaiming one of them.
 */
#include "blob_s3_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* GET on the bucket with the query head (may be "") + "prefix=" + the encoded prefix + tail;
 * anything but 200 is an error naming op. *r (initialised here) holds the answer either
 * way: the caller releases it. */
static enum mg_code bucket_get(struct blob_backend *b, const char *head, const char *prefix,
                               const char *tail, const char *op, struct blob_http_resp *r,
                               struct mg_error *err)
{
    char *ep = blob_sigv4_encode(prefix, false), *q = NULL;
    enum mg_code rc;

    blob_http_resp_init(r);
    if (ep == NULL || asprintf(&q, "%sprefix=%s%s", head, ep, tail) < 0) {
        free(ep);
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
    free(ep);
    rc = blob_s3_req(b, "GET", NULL, q, NULL, NULL, 0, false, r, err);
    free(q);
    if (rc == MG_OK && r->status != 200)
        rc = blob_s3_status(b, op, r, err);
    return rc;
}

enum mg_code blob_s3_list(struct blob_backend *b,
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
        char *et = blob_sigv4_encode(token, false), *head = NULL;
        bool more;

        if (et == NULL ||
            asprintf(&head, "%s%s%slist-type=2&", token[0] ? "continuation-token=" : "",
                     token[0] ? et : "", token[0] ? "&" : "") < 0) {
            free(et);
            return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        }
        free(et);
        rc = bucket_get(b, head, prefix, "", "ListObjectsV2", &r, err);
        free(head);
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

enum mg_code blob_s3_orphans(struct blob_backend *b,
                             bool (*cb)(const struct blob_orphan *o, void *arg), void *arg,
                             struct mg_error *err)
{
    struct s3_backend *s = sb(b);
    struct orphan_ctx o = {s, cb, arg, true};
    struct blob_http_resp r;
    char prefix[600];
    enum mg_code rc;
    bool more;

    /* Multipart uploads anywhere under the prefix (to temp or digest keys). */
    rc = bucket_get(b, "", s->prefix, "&uploads=", "ListMultipartUploads", &r, err);
    more = rc == MG_OK && xml_each(r.body.data, r.body.len, "Upload", orphan_one, &o);
    blob_http_resp_release(&r);
    if (rc != MG_OK || !more)
        return rc;
    /* Temp objects of uploads that completed but were never copied. */
    o.uploads = false;
    snprintf(prefix, sizeof(prefix), "%suploads/", s->prefix);
    rc = bucket_get(b, "list-type=2&", prefix, "", "ListObjectsV2", &r, err);
    if (rc == MG_OK)
        xml_each(r.body.data, r.body.len, "Contents", orphan_one, &o);
    blob_http_resp_release(&r);
    return rc;
}

/* "key?uploadId=ID": abort that upload. "key": a temp key's object and its multipart
 * uploads, or (a digest key) only its multipart uploads. */
enum mg_code blob_s3_reclaim(struct blob_backend *b, const char *handle, struct mg_error *err)
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
        return blob_s3_abort_mpu(b, key, q + 10, err);
    snprintf(tmp_prefix, sizeof(tmp_prefix), "%suploads/", s->prefix);
    {
        /* every multipart upload on this key */
        struct blob_http_resp r;
        const char *p;

        rc = bucket_get(b, "", key, "&uploads=", "ListMultipartUploads", &r, err);
        for (p = r.body.data; rc == MG_OK && p && (p = strstr(p, "<Upload>")) != NULL; p++) {
            const char *z = strstr(p, "</Upload>");
            char k[700], id[512];
            if (z == NULL)
                break;
            blob_xml_value(p, (size_t)(z - p), "Key", k, sizeof(k));
            blob_xml_value(p, (size_t)(z - p), "UploadId", id, sizeof(id));
            if (strcmp(k, key) == 0 && id[0])
                rc = blob_s3_abort_mpu(b, key, id, err);
        }
        blob_http_resp_release(&r);
        if (rc != MG_OK)
            return rc;
    }
    if (strncmp(key, tmp_prefix, strlen(tmp_prefix)) == 0)
        return blob_s3_delete_key(b, key, err);
    return MG_OK;
}
