/*
 * blobs.c - POST /api/v1/blobs (streamed), HEAD and GET (with Range, ETag).
 */
#include "api.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../base/util.h"

struct upload {
    struct store_blob_upload *up;
    char expected[72];
    bool has_expected;
    /* the commit's outcome, made off the HTTP threads (commit_work) */
    enum mg_code rc;
    json_t *blob;
    bool created;
    struct mg_error err;
};

static enum mg_code upload_begin(struct srv_req *r)
{
    const char *d = srv_header(r, "X-Content-Digest");
    struct upload *u = calloc(1, sizeof(*u));

    if (u == NULL)
        return mg_fail(&r->err, MG_ENOMEM, NULL, "out of memory");
    r->stream = u;
    if (d != NULL) {
        if (!mg_valid_digest(d, strlen(d)))
            return mg_fail(&r->err, MG_EINVAL, "X-Content-Digest",
                           "X-Content-Digest must be sha256: followed by 64 lowercase hex");
        snprintf(u->expected, sizeof(u->expected), "%s", d);
        u->has_expected = true;
    }
    return store_blob_upload_begin_digest(r->srv->store, r->srv->cfg->max_blob_bytes,
                                          u->has_expected ? u->expected : NULL, &u->up, &r->err);
}

static enum mg_code upload_data(struct srv_req *r, const char *p, size_t n)
{
    struct upload *u = r->stream;

    return store_blob_upload_write(u->up, p, n, &r->err);
}

static void upload_cleanup(struct srv_req *r)
{
    struct upload *u = r->stream;

    if (u == NULL)
        return;
    store_blob_upload_abort(&u->up);
    json_decref(u->blob);
    free(u);
    r->stream = NULL;
}

/* fsync, digest check, archive inspection, rename, row: seconds for a big
 * archive, so it runs on a thread of its own (srv_defer_work). */
static void commit_work(struct srv_req *r)
{
    struct upload *u = r->stream;
    const char *teams[STORE_MAX_SCOPES];
    size_t i;

    /* The uploading token's teams hold the bytes once they commit (docs/contract.md "Tenancy"), and
     * the upload counts in each one's quota ("Quotas and cost"). */
    for (i = 0; i < r->who.nteams && i < STORE_MAX_SCOPES; i++)
        teams[i] = r->who.teams[i];
    store_blob_upload_teams(u->up, teams, i);
    u->rc = store_blob_upload_commit(&u->up, r->who.name, u->has_expected ? u->expected : NULL,
                                     &u->blob, &u->created, &u->err);
}

static void commit_reply(struct srv_req *r)
{
    struct upload *u = r->stream;

    if (u->rc != MG_OK) {
        srv_reply_error(r, &u->err);
        return;
    }
    srv_reply_json(r, u->created ? 201 : 200, u->blob);
    u->blob = NULL; /* stolen by the reply */
}

static void upload_finish(struct srv_req *r)
{
    srv_defer_work(r, commit_work, commit_reply);
}

/* Parse "bytes=a-b", "bytes=a-" or "bytes=-n" against size. Returns false if
 * unsatisfiable or malformed (multiple ranges are not supported). */
static bool parse_range(const char *h, uint64_t size, uint64_t *off, uint64_t *len)
{
    unsigned long long a, b;
    char tail;

    if (strncmp(h, "bytes=", 6) != 0 || strchr(h, ',') != NULL || size == 0)
        return false;
    h += 6;
    if (*h == '-') {
        if (sscanf(h + 1, "%llu%c", &a, &tail) != 1 || a == 0)
            return false;
        if (a > size)
            a = size;
        *off = size - a;
        *len = a;
        return true;
    }
    if (sscanf(h, "%llu-%c", &a, &tail) == 1 && h[strlen(h) - 1] == '-') {
        if (a >= size)
            return false;
        *off = a;
        *len = size - a;
        return true;
    }
    if (sscanf(h, "%llu-%llu%c", &a, &b, &tail) != 2 || b < a || a >= size)
        return false;
    if (b >= size)
        b = size - 1;
    *off = a;
    *len = b - a + 1;
    return true;
}

/* --blob-downloads redirect: 307 to a presigned URL (s3), valid this long. */
#define REDIRECT_TTL_S 300

/*
 * GET/HEAD of a blob's bytes, whatever the backend: ETag, If-None-Match, Range,
 * and the bytes (sendfile for file:, streamed for s3/oci), or a 307 to a
 * presigned URL with --blob-downloads redirect. The one place blob bytes are
 * served (the REST API here, OCI distribution later).
 */
void api_serve_blob(struct srv_req *r, const char *digest)
{
    const char *range = srv_header(r, "Range");
    const char *inm = srv_header(r, "If-None-Match");
    const char *media;
    char etag[80], cr[96];
    json_t *meta = NULL;
    uint64_t size, off = 0, len;
    struct blob_reader *rd = NULL;
    struct mg_error err;
    bool is_get = strcmp(r->method, "GET") == 0, partial = false;

    if (store_blob_get(r->srv->store, digest, &meta, &err) != MG_OK) {
        srv_reply_error(r, &err);
        return;
    }
    size = (uint64_t)json_integer_value(json_object_get(meta, "size"));
    media = json_string_value(json_object_get(meta, "media_type"));
    snprintf(etag, sizeof(etag), "\"%s\"", digest);
    if (inm && strstr(inm, etag) != NULL) {
        json_decref(meta);
        srv_reply_empty(r, 304);
        srv_reply_header(r, "ETag", etag);
        return;
    }
    if (is_get && r->srv->cfg->blob_redirect) {
        char *url = NULL;

        if (store_blob_presign(r->srv->store, digest, REDIRECT_TTL_S, &url, &err) != MG_OK) {
            json_decref(meta);
            srv_reply_error(r, &err);
            return;
        }
        srv_reply_empty(r, 307);
        srv_reply_header(r, "Location", url);
        srv_reply_header(r, "Cache-Control", "no-store");
        free(url);
        json_decref(meta);
        return;
    }
    len = size;
    if (range && is_get) {
        if (!parse_range(range, size, &off, &len)) {
            json_decref(meta);
            srv_fail(r, MG_ERANGE, "Range",
                     "the Range header asks for bytes outside the blob's %" PRIu64
                     " bytes or uses multiple ranges",
                     size);
            snprintf(cr, sizeof(cr), "bytes */%" PRIu64, size);
            srv_reply_header(r, "Content-Range", cr);
            return;
        }
        partial = true;
    }
    if (is_get && store_blob_read_open(r->srv->store, digest, off, len, &rd, &err) != MG_OK) {
        json_decref(meta);
        srv_reply_error(r, &err);
        return;
    }
    srv_reply_blob(r, partial ? 206 : 200, media, rd, len);
    if (partial) {
        snprintf(cr, sizeof(cr), "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64, off, off + len - 1,
                 size);
        srv_reply_header(r, "Content-Range", cr);
    }
    srv_reply_header(r, "ETag", etag);
    srv_reply_header(r, "Accept-Ranges", "bytes");
    /* private: the bytes need a token, so no shared cache (a proxy in front) may keep them
     * for the next caller (RFC 9111 §5.2.2.7); the token holder's own cache may. */
    srv_reply_header(r, "Cache-Control", "private, max-age=31536000, immutable");
    json_decref(meta);
}

static void get(struct srv_req *r)
{
    /* By digest alone: only bytes this token's teams uploaded or may read through a model
     * (docs/contract.md "Tenancy"), and none once released. */
    if (srv_authorize_bytes(r, srv_param(r, "digest"), NULL))
        api_serve_blob(r, srv_param(r, "digest"));
}

/* POST /api/v1/blobs/{digest}/rescan (admin): the scan again, under today's allowlist;
 * answers the Blob with its new "scan". */
static void rescan(struct srv_req *r)
{
    const char *digest = srv_param(r, "digest");
    json_t *scan = NULL, *out = NULL;
    struct mg_error err;
    enum mg_code rc;

    rc = store_blob_rescan(r->srv->store, r->who.name, digest, &scan, &err);
    if (rc == MG_OK)
        rc = store_blob_get(r->srv->store, digest, &out, &err);
    json_decref(scan);
    api_reply_result(r, rc, 200, out, &err);
}

const struct srv_route api_routes_blobs[] = {
    {"POST", "/api/v1/blobs", MG_ROLE_PUBLISHER, SRV_BODY_STREAM, upload_finish, upload_begin,
     upload_data, upload_cleanup},
    {"GET", "/api/v1/blobs/{digest}", MG_ROLE_READER, SRV_BODY_NONE, get, NULL, NULL, NULL},
    {"POST", "/api/v1/blobs/{digest}/rescan", MG_ROLE_ADMIN, SRV_BODY_NONE, rescan, NULL, NULL,
     NULL},
    {NULL, NULL, 0, 0, NULL, NULL, NULL, NULL},
};
