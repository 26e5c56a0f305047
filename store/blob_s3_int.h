/*
 * blob_s3_int.h - what the S3 backend's files share: blob_s3.c (configuration, the signed
 * request, reading, deleting, the ops table), blob_s3_upload.c (multipart uploads and the
 * server-side copy at commit) and blob_s3_list.c (listing, orphans, reclaiming). Only they
 * include this.
 */
#ifndef STORE_BLOB_S3_INT_H
#define STORE_BLOB_S3_INT_H

#include "blob_int.h"

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

static inline struct s3_backend *sb(struct blob_backend *b)
{
    return b->impl;
}

/* ---- blob_s3.c -------------------------------------------------------------------------- */

/*
 * One signed request. body/len: the payload (sent as is; its SHA-256 is signed
 * unless unsigned_payload). key NULL: the bucket itself.
 */
enum mg_code blob_s3_req(struct blob_backend *b, const char *method, const char *key,
                         const char *query, const char *const *extra, const void *body, size_t len,
                         bool unsigned_payload, struct blob_http_resp *r, struct mg_error *err);

/* An unexpected status as an error naming the request and S3's error code. */
enum mg_code blob_s3_status(struct blob_backend *b, const char *what,
                            const struct blob_http_resp *r, struct mg_error *err);

/* The key a blob lives under: <prefix>sha256/<hex>. */
void blob_s3_digest_key(struct s3_backend *s, const char *digest, char *out, size_t outsz);

/* DeleteObject (a missing key is no error). */
enum mg_code blob_s3_delete_key(struct blob_backend *b, const char *key, struct mg_error *err);

/* AbortMultipartUpload (a missing upload is no error). */
enum mg_code blob_s3_abort_mpu(struct blob_backend *b, const char *key, const char *upload_id,
                               struct mg_error *err);

/* The blob's size (HeadObject); MG_ENOTFOUND when it is not there. */
enum mg_code blob_s3_stat(struct blob_backend *b, const char *digest, uint64_t *size,
                          struct mg_error *err);

/* ---- blob_s3_upload.c: the blob_ops upload entries ------------------------------------- */

enum mg_code blob_s3_put_begin(struct blob_backend *b, const char *expected, uint64_t max,
                               struct blob_put **out, struct mg_error *err);
enum mg_code blob_s3_put_write(struct blob_put *bp, const void *data, size_t n,
                               struct mg_error *err);
enum mg_code blob_s3_put_commit(struct blob_put *bp, const char *digest, struct mg_error *err);
bool blob_s3_put_abort(struct blob_put *bp);
void blob_s3_put_free(struct blob_put *bp);

/* ---- blob_s3_list.c: the blob_ops listing entries -------------------------------------- */

enum mg_code blob_s3_list(struct blob_backend *b,
                          bool (*cb)(const char *digest, uint64_t size, void *arg), void *arg,
                          struct mg_error *err);
enum mg_code blob_s3_orphans(struct blob_backend *b,
                             bool (*cb)(const struct blob_orphan *o, void *arg), void *arg,
                             struct mg_error *err);
enum mg_code blob_s3_reclaim(struct blob_backend *b, const char *handle, struct mg_error *err);

#endif
