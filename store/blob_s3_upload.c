/*
 * blob_s3_upload.c - uploads to the S3 backend (blob_s3.c has the overview): a multipart
 * upload fed part by part (blob_parts), completed at commit, then copied server-side from a
 * temp key to the digest key (UploadPartCopy above CopyObject's 5 GiB); aborting one.
 */
#include "blob_s3_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define COPY_MAX ((uint64_t)5 << 30)  /* CopyObject's limit */
#define COPY_PART ((uint64_t)1 << 30) /* UploadPartCopy range size above it */

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

static enum mg_code mpu_create(struct s3_put *p, struct mg_error *err)
{
    struct blob_http_resp r;
    enum mg_code rc;

    blob_http_resp_init(&r);
    rc = blob_s3_req(p->base.b, "POST", p->key, "uploads=", NULL, NULL, 0, false, &r, err);
    if (rc == MG_OK && r.status != 200)
        rc = blob_s3_status(p->base.b, "CreateMultipartUpload", &r, err);
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
    rc = blob_s3_req(p->base.b, "PUT", p->key, q, NULL, data, len, true, &r, err);
    if (rc == MG_OK && r.status != 200)
        rc = blob_s3_status(p->base.b, "UploadPart", &r, err);
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

enum mg_code blob_s3_put_begin(struct blob_backend *b, const char *expected, uint64_t max,
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
        blob_s3_digest_key(s, expected, p->key, sizeof(p->key));
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

enum mg_code blob_s3_put_write(struct blob_put *bp, const void *data, size_t n,
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
        rc = blob_s3_req(p->base.b, "POST", p->key, q, NULL, x.data, x.len, false, &r, err);
        /* S3 may answer 200 with an <Error> body when it fails late. */
        if (rc == MG_OK && (r.status != 200 || (r.body.data && strstr(r.body.data, "<Error>"))))
            rc = blob_s3_status(p->base.b, "CompleteMultipartUpload", &r, err);
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
            rc = blob_s3_req(b, "PUT", dst, NULL, extra, NULL, 0, false, &r, err);
            status = r.status;
            if (rc == MG_OK && (r.status != 200 || (r.body.data && strstr(r.body.data, "<Error>"))))
                rc = blob_s3_status(b, "CopyObject", &r, err);
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
        rc = blob_s3_req(b, "PUT", dst, q, extra, NULL, 0, false, &r, err);
        if (rc == MG_OK && r.status != 200)
            rc = blob_s3_status(b, "UploadPartCopy", &r, err);
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
            blob_s3_req(b, "DELETE", dst, q, NULL, NULL, 0, false, &r, &e2);
            blob_http_resp_release(&r);
            free(q);
        }
        free(eid);
    }
    free(mp.etags);
    return rc;
}

/* The digest key holds size bytes (whole: keys are only ever written complete). */
static bool s3_has(struct blob_backend *b, const char *digest, uint64_t size)
{
    struct mg_error e;
    uint64_t have = 0;

    return blob_s3_stat(b, digest, &have, &e) == MG_OK && have == size;
}

enum mg_code blob_s3_put_commit(struct blob_put *bp, const char *digest, struct mg_error *err)
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
        blob_s3_digest_key(p->s, digest, p->key, sizeof(p->key));
        p->temp = false;
    }
    /* Writing straight to the digest key: one commit of a digest at a time here, and none
     * when the blob is there already (the caller aborts ours). */
    if (!p->temp) {
        pthread_mutex_lock(l);
        if (s3_has(bp->b, digest, p->size)) {
            pthread_mutex_unlock(l);
            blob_s3_put_abort(bp); /* a leftover it leaves is listed by blob_orphans */
            return MG_OK;
        }
    }
    if (sent == 0) {
        /* One part or less: a single PUT. */
        struct blob_http_resp r;
        blob_http_resp_init(&r);
        rc = blob_s3_req(bp->b, "PUT", p->key, NULL, NULL, tail, tail_len, true, &r, err);
        if (rc == MG_OK && r.status != 200)
            rc = blob_s3_status(bp->b, "PutObject", &r, err);
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
    blob_s3_digest_key(p->s, digest, final, sizeof(final));
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
    if (blob_s3_delete_key(bp->b, p->key, err) == MG_OK)
        bp->handle[0] = '\0';
    return MG_OK;
}

bool blob_s3_put_abort(struct blob_put *bp)
{
    struct s3_put *p = (struct s3_put *)bp;
    struct mg_error e;
    bool ok = true;

    blob_parts_free(&p->parts); /* waits for a part in flight */
    if (p->upload_id[0] && blob_s3_abort_mpu(bp->b, p->key, p->upload_id, &e) != MG_OK)
        ok = false;
    if (ok)
        p->upload_id[0] = '\0';
    if (p->temp && bp->handle[0] && blob_s3_delete_key(bp->b, p->key, &e) != MG_OK)
        ok = false;
    return ok;
}

void blob_s3_put_free(struct blob_put *bp)
{
    struct s3_put *p = (struct s3_put *)bp;

    blob_parts_free(&p->parts);
    free(p->etags);
    free(p);
}
