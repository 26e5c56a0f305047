/*
 * response.c - replies: errors mapped to HTTP statuses (the only place), JSON, bytes, files
 * and cached bodies, and the headers every reply carries (no-store unless a route says
 * otherwise, nosniff, HSTS under TLS).
 */
#include "http.h"
#include "http_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <pthread.h>

#include "../base/json.h"
#include "../base/text.h"
#include "../base/util.h"
#include "cache.h"

/* ---- errors → HTTP: the only place ------------------------------------ */

static const struct {
    enum mg_code code;
    unsigned status;
    const char *name;
} error_map[] = {
    {MG_EINVAL, 400, "invalid_argument"},
    {MG_EDIGEST, 400, "digest_mismatch"},
    {MG_EUNAUTH, 401, "unauthenticated"},
    {MG_EFORBIDDEN, 403, "forbidden"},
    {MG_ESELFAPPROVAL, 403, "self_approval"},
    {MG_ENOTFOUND, 404, "not_found"},
    {MG_EMETHOD, 405, "method_not_allowed"},
    {MG_ECONFLICT, 409, "conflict"},
    {MG_ESTALE, 409, "conflict"},
    {MG_EPROTECTED, 409, "alias_protected"},
    {MG_EINPROGRESS, 409, "promotion_in_progress"},
    {MG_ENOKNOWNGOOD, 409, "no_known_good"},
    {MG_ENOLKG, 404, "no_known_good"},
    {MG_EGONE, 410, "gone"},
    {MG_ETOOBIG, 413, "payload_too_large"},
    {MG_ERANGE, 416, "range_not_satisfiable"},
    {MG_EMEDIA, 415, "unsupported_media_type"},
    {MG_ENOSPC, 507, "insufficient_storage"},
    {MG_EQUOTA, 507, "quota_exceeded"},
    {MG_EUNAVAIL, 503, "unavailable"},
};

/*
 * The distribution spec's error code for a refusal under /v2/ (its "Error Codes" table):
 * what the handler named (r->oci_code), else what the error's kind means there. Only the
 * body's shape differs: the status is the same as anywhere.
 */
static const char *oci_error_code(const struct srv_req *r, const struct mg_error *err,
                                  unsigned status)
{
    if (r->oci_code != NULL)
        return r->oci_code;
    switch (err->code) {
    case MG_EUNAUTH:
        return "UNAUTHORIZED";
    case MG_EFORBIDDEN:
    case MG_ESELFAPPROVAL:
        return "DENIED";
    case MG_ENOTFOUND:
        return "NAME_UNKNOWN"; /* a model that does not exist (or that the token may not see) */
    case MG_EINVAL:
    case MG_EDIGEST:
        if (strcmp(err->field, "model") == 0)
            return "NAME_INVALID";
        if (strcmp(err->field, "digest") == 0)
            return "DIGEST_INVALID";
        return "UNSUPPORTED";
    case MG_ETOOBIG:
        return "SIZE_INVALID";
    default:
        return status >= 500 ? "UNKNOWN" : "UNSUPPORTED";
    }
}

void srv_reply_error(struct srv_req *r, const struct mg_error *err)
{
    unsigned status = 500;
    const char *name = "internal", *msg;
    /* Messages quote what the client sent, cut to a length: a cut can split a character,
     * and JSON (and a log line) must stay valid UTF-8 whatever was quoted. */
    char safe[MG_ERR_MSG_MAX * 4], field[MG_ERR_FIELD_MAX * 4];
    size_t i;
    json_t *e;

    for (i = 0; i < sizeof(error_map) / sizeof(error_map[0]); i++) {
        if (error_map[i].code == err->code) {
            status = error_map[i].status;
            name = error_map[i].name;
            break;
        }
    }
    /* Internal errors may name server paths: log them, tell the client less. */
    if (status == 500) {
        fprintf(stderr, "error: %s %s: %s\n", r->method, r->path ? r->path : "",
                mg_log_escape(err->message, safe, sizeof(safe), false));
        msg = "internal error; the server log has the details";
    } else {
        msg = err->message[0] ? mg_log_escape(err->message, safe, sizeof(safe), true)
                              : "request failed";
    }
    if (r->oci) {
        srv_reply_json(r, status,
                       json_pack("{s:[{s:s, s:s}]}", "errors", "code",
                                 oci_error_code(r, err, status), "message", msg));
        return;
    }
    e = json_pack("{s:{s:s, s:s}}", "error", "code", name, "message", msg);
    if (e && err->field[0])
        json_object_set_new(json_object_get(e, "error"), "field",
                            json_string(mg_log_escape(err->field, field, sizeof(field), true)));
    srv_reply_json(r, status, e);
}

void srv_fail(struct srv_req *r, enum mg_code code, const char *field, const char *fmt, ...)
{
    va_list ap;

    r->err.code = code;
    va_start(ap, fmt);
    vsnprintf(r->err.message, sizeof(r->err.message), fmt, ap);
    va_end(ap);
    snprintf(r->err.field, sizeof(r->err.field), "%s", field ? field : "");
    srv_reply_error(r, &r->err);
}

/* ---- replies ---------------------------------------------------------- */

void srv_set_response(struct srv_req *r, unsigned status, struct MHD_Response *resp, uint64_t bytes)
{
    if (r->resp)
        MHD_destroy_response(r->resp);
    r->resp = resp;
    r->status = status;
    r->resp_bytes = bytes;
}

/* data as the reply; MHD_RESPMEM_MUST_FREE hands a malloc'd buffer over (freed with the
 * response, or here when none could be made) instead of copying it. */
static void reply_buffer(struct srv_req *r, unsigned status, const char *content_type, void *data,
                         size_t len, enum MHD_ResponseMemoryMode mode)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, data, mode);

    if (resp == NULL) {
        if (mode == MHD_RESPMEM_MUST_FREE)
            free(data);
        srv_set_response(r, 500, NULL, 0);
        return;
    }
    if (content_type)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    if (r->srv->tls)
        MHD_add_response_header(resp, "Strict-Transport-Security", "max-age=31536000");
    srv_set_response(r, status, resp, len);
}

void srv_reply_bytes(struct srv_req *r, unsigned status, const char *content_type, const void *data,
                     size_t len)
{
    reply_buffer(r, status, content_type, (void *)data, len, MHD_RESPMEM_MUST_COPY);
}

/* v as a reply's text (new; free it), or NULL: every real as the shortest text that
 * reads back as the same double ("0.942", never "0.94199999999999995"). */
static char *reply_text(const json_t *v, size_t *len)
{
    return mg_json_text(v, len);
}

void srv_reply_json(struct srv_req *r, unsigned status, json_t *v)
{
    char *text;
    size_t len;

    if (v == NULL) {
        static const char oom[] =
            "{\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}";
        srv_reply_bytes(r, 500, "application/json; charset=utf-8", oom, sizeof(oom) - 1);
        return;
    }
    text = reply_text(v, &len);
    json_decref(v);
    if (text == NULL) {
        srv_reply_json(r, 500, NULL);
        return;
    }
    reply_buffer(r, status, "application/json; charset=utf-8", text, len, MHD_RESPMEM_MUST_FREE);
}

static void reply_cached_body(const char *body, size_t len, void *arg)
{
    srv_reply_bytes(arg, 200, "application/json; charset=utf-8", body, len);
}

bool srv_reply_cached(struct srv_req *r, const char *model, const char *key, uint64_t *epoch)
{
    struct mg_error err;

    /* Read before the handler's reads begin: what they see is at least this new. */
    if (r->srv->cache == NULL || store_model_epoch(r->srv->store, model, epoch, &err) != MG_OK) {
        *epoch = SRV_CACHE_NO_EPOCH; /* not known: neither served from nor kept */
        return false;
    }
    return srv_cache_use(r->srv->cache, key, *epoch, reply_cached_body, r);
}

void srv_reply_json_keep(struct srv_req *r, json_t *v, const char *key, uint64_t epoch)
{
    size_t len = 0;
    char *text = v ? reply_text(v, &len) : NULL;

    if (text == NULL) {
        srv_reply_json(r, 200, v);
        return;
    }
    json_decref(v);
    srv_reply_text_keep(r, text, len, key, epoch);
}

void srv_reply_text_keep(struct srv_req *r, char *text, size_t len, const char *key, uint64_t epoch)
{
    if (epoch != SRV_CACHE_NO_EPOCH)
        srv_cache_put(r->srv->cache, key, epoch, text, len);
    reply_buffer(r, 200, "application/json; charset=utf-8", text, len, MHD_RESPMEM_MUST_FREE);
}

void srv_reply_empty(struct srv_req *r, unsigned status)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);

    if (resp && r->srv->tls)
        MHD_add_response_header(resp, "Strict-Transport-Security", "max-age=31536000");
    srv_set_response(r, resp ? status : 500, resp, 0);
}

/* HEAD replies carry no body: the reader is never called. */
static ssize_t no_body(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)cls;
    (void)pos;
    (void)buf;
    (void)max;
    return MHD_CONTENT_READER_END_WITH_ERROR;
}

void srv_reply_head(struct srv_req *r, unsigned status, const char *content_type, uint64_t len)
{
    struct MHD_Response *resp = MHD_create_response_from_callback(len, 4096, no_body, NULL, NULL);

    if (resp == NULL) {
        srv_set_response(r, 500, NULL, 0);
        return;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    if (r->srv->tls)
        MHD_add_response_header(resp, "Strict-Transport-Security", "max-age=31536000");
    srv_set_response(r, status, resp, 0);
}

void srv_reply_fd(struct srv_req *r, unsigned status, const char *content_type, int fd,
                  uint64_t offset, uint64_t len)
{
    struct MHD_Response *resp = MHD_create_response_from_fd_at_offset64(len, fd, offset);

    if (resp == NULL) {
        close(fd);
        srv_fail(r, MG_EIO, NULL, "cannot stream the file");
        return;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    if (r->srv->tls)
        MHD_add_response_header(resp, "Strict-Transport-Security", "max-age=31536000");
    srv_set_response(r, status, resp, len);
}

/* ---- blob bytes from any backend ------------------------------------------ */

/* A streamed blob reply: the content reader never waits for the backend; when no
 * byte is ready it suspends the connection, and the reader's thread resumes it. */
struct blob_reply {
    struct srv *srv;
    struct MHD_Connection *conn;
    struct blob_reader *rd;
    pthread_mutex_t lock;
    bool suspended, closing;
};

static void blob_reply_wake(void *arg)
{
    struct blob_reply *b = arg;

    pthread_mutex_lock(&b->lock);
    if (b->suspended && !b->closing) {
        b->suspended = false;
        MHD_resume_connection(b->conn);
        __atomic_sub_fetch(&b->srv->working, 1, __ATOMIC_SEQ_CST);
    }
    pthread_mutex_unlock(&b->lock);
}

static ssize_t blob_reply_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct blob_reply *b = cls;
    struct mg_error err;
    size_t got = 0;
    bool wb = false;
    enum mg_code rc;

    (void)pos;
    if (b->rd == NULL) /* HEAD: never called for the body */
        return MHD_CONTENT_READER_END_OF_STREAM;
    pthread_mutex_lock(&b->lock);
    rc = blob_reader_read(b->rd, buf, max, &got, &wb, blob_reply_wake, b, &err);
    if (rc == MG_OK && got == 0 && wb) {
        /* Suspended before the lock goes, so the wake-up finds it suspended. */
        b->suspended = true;
        __atomic_add_fetch(&b->srv->working, 1, __ATOMIC_SEQ_CST);
        MHD_suspend_connection(b->conn);
    }
    pthread_mutex_unlock(&b->lock);
    if (rc != MG_OK) {
        fprintf(stderr, "modelgated: a blob download failed: %s\n", err.message);
        return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    if (got > 0)
        return (ssize_t)got;
    return wb ? 0 : MHD_CONTENT_READER_END_OF_STREAM;
}

static void blob_reply_free(void *cls)
{
    struct blob_reply *b = cls;

    pthread_mutex_lock(&b->lock);
    b->closing = true;
    pthread_mutex_unlock(&b->lock);
    blob_reader_close(&b->rd); /* joins the reader's thread: no wake-up after this */
    pthread_mutex_destroy(&b->lock);
    free(b);
}

void srv_reply_blob(struct srv_req *r, unsigned status, const char *content_type,
                    struct blob_reader *rd, uint64_t len)
{
    struct MHD_Response *resp;
    struct blob_reply *b;
    uint64_t off;
    int fd = rd ? blob_reader_take_fd(rd, &off) : -1;

    if (fd >= 0) {
        blob_reader_close(&rd);
        srv_reply_fd(r, status, content_type, fd, off, len);
        return;
    }
    if ((b = calloc(1, sizeof(*b))) == NULL) {
        blob_reader_close(&rd);
        srv_fail(r, MG_ENOMEM, NULL, "out of memory");
        return;
    }
    b->srv = r->srv;
    b->conn = r->conn;
    b->rd = rd;
    pthread_mutex_init(&b->lock, NULL);
    resp = MHD_create_response_from_callback(len, 256 * 1024, blob_reply_read, b, blob_reply_free);
    if (resp == NULL) {
        blob_reply_free(b);
        srv_fail(r, MG_EIO, NULL, "cannot stream the blob");
        return;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    if (r->srv->tls)
        MHD_add_response_header(resp, "Strict-Transport-Security", "max-age=31536000");
    srv_set_response(r, status, resp, len);
}

void srv_reply_header(struct srv_req *r, const char *key, const char *value)
{
    const char *old;

    if (r->resp == NULL)
        return;
    /* One Cache-Control per response: a route's own replaces the default no-store. */
    if (strcasecmp(key, MHD_HTTP_HEADER_CACHE_CONTROL) == 0 &&
        (old = MHD_get_response_header(r->resp, MHD_HTTP_HEADER_CACHE_CONTROL)) != NULL) {
        char copy[128];

        snprintf(copy, sizeof(copy), "%s", old);
        MHD_del_response_header(r->resp, MHD_HTTP_HEADER_CACHE_CONTROL, copy);
    }
    MHD_add_response_header(r->resp, key, value);
}
