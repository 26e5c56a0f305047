/*
 * http.c - libmicrohttpd glue: daemon setup, the access handler state
 * machine, authentication, body handling, replies and the request log.
 */
#include "http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "../common/util.h"
#include "cache.h"
#include "metrics.h"

/* Bytes of an oversize chunked body we drain before closing the connection. */
#define DRAIN_MAX (16u << 20)

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
    {MG_ETOOBIG, 413, "payload_too_large"},
    {MG_ERANGE, 416, "range_not_satisfiable"},
    {MG_EMEDIA, 415, "unsupported_media_type"},
    {MG_ENOSPC, 507, "insufficient_storage"},
    {MG_EUNAVAIL, 503, "unavailable"},
};

void srv_reply_error(struct srv_req *r, const struct mg_error *err)
{
    unsigned status = 500;
    const char *name = "internal", *msg;
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
        fprintf(stderr, "error: %s %s: %s\n", r->method, r->path ? r->path : "", err->message);
        msg = "internal error; the server log has the details";
    } else {
        msg = err->message[0] ? err->message : "request failed";
    }
    e = json_pack("{s:{s:s, s:s}}", "error", "code", name, "message", msg);
    if (e && err->field[0])
        json_object_set_new(json_object_get(e, "error"), "field", json_string(err->field));
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

static void set_response(struct srv_req *r, unsigned status, struct MHD_Response *resp,
                         uint64_t bytes)
{
    if (r->resp)
        MHD_destroy_response(r->resp);
    r->resp = resp;
    r->status = status;
    r->resp_bytes = bytes;
}

void srv_reply_bytes(struct srv_req *r, unsigned status, const char *content_type, const void *data,
                     size_t len)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(len, (void *)data, MHD_RESPMEM_MUST_COPY);

    if (resp == NULL) {
        set_response(r, 500, NULL, 0);
        return;
    }
    if (content_type)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    if (r->srv->tls)
        MHD_add_response_header(resp, "Strict-Transport-Security", "max-age=31536000");
    set_response(r, status, resp, len);
}

void srv_reply_json(struct srv_req *r, unsigned status, json_t *v)
{
    char *text;

    if (v == NULL) {
        static const char oom[] =
            "{\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}";
        srv_reply_bytes(r, 500, "application/json; charset=utf-8", oom, sizeof(oom) - 1);
        return;
    }
    text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(15));
    json_decref(v);
    if (text == NULL) {
        srv_reply_json(r, 500, NULL);
        return;
    }
    srv_reply_bytes(r, status, "application/json; charset=utf-8", text, strlen(text));
    free(text);
}

static void reply_cached_body(const char *body, size_t len, void *arg)
{
    srv_reply_bytes(arg, 200, "application/json; charset=utf-8", body, len);
}

bool srv_reply_cached(struct srv_req *r, const char *key, uint64_t *epoch)
{
    /* Read before the handler's reads begin: what they see is at least this new. */
    *epoch = store_data_epoch(r->srv->store);
    return srv_cache_use(r->srv->cache, key, *epoch, reply_cached_body, r);
}

void srv_reply_json_keep(struct srv_req *r, json_t *v, const char *key, uint64_t epoch)
{
    char *text = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(15)) : NULL;

    if (text == NULL) {
        srv_reply_json(r, 200, v);
        return;
    }
    json_decref(v);
    srv_cache_put(r->srv->cache, key, epoch, text, strlen(text));
    srv_reply_bytes(r, 200, "application/json; charset=utf-8", text, strlen(text));
    free(text);
}

void srv_reply_empty(struct srv_req *r, unsigned status)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);

    if (resp && r->srv->tls)
        MHD_add_response_header(resp, "Strict-Transport-Security", "max-age=31536000");
    set_response(r, resp ? status : 500, resp, 0);
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
    set_response(r, status, resp, len);
}

void srv_reply_header(struct srv_req *r, const char *key, const char *value)
{
    if (r->resp)
        MHD_add_response_header(r->resp, key, value);
}

void srv_defer(struct srv_req *r, const char *model, const char *alias, int64_t gen, int64_t wait_s,
               const char *id, unsigned status, void (*on_resume)(struct srv_req *r))
{
    set_response(r, 0, NULL, 0);
    r->deferred = true;
    r->on_resume = on_resume;
    snprintf(r->wait_model, sizeof(r->wait_model), "%s", model);
    snprintf(r->wait_alias, sizeof(r->wait_alias), "%s", alias);
    snprintf(r->wait_id, sizeof(r->wait_id), "%s", id ? id : "");
    r->wait_gen = gen;
    r->wait_status = status;
    r->wait_deadline = mg_now_ms() + wait_s * 1000;
}

void srv_defer_work(struct srv_req *r, void (*work)(struct srv_req *r),
                    void (*on_resume)(struct srv_req *r))
{
    set_response(r, 0, NULL, 0);
    r->deferred = true;
    r->work = work;
    r->on_resume = on_resume;
}

/*
 * A fixed pool for srv_defer_work: one thread per finished upload let a burst
 * of uploads hash and decompress all at once, without bound. Jobs queue FIFO.
 */
struct srv_workers {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct srv_req *head, *tail; /* queued, not yet started */
    uint64_t waiting;            /* queue length */
    uint64_t waited_total;       /* jobs that found every worker busy */
    unsigned busy, n;
    bool stop;
    pthread_t *threads;
};

static void run_work(struct srv_req *r)
{
    struct srv *srv = r->srv;

    r->work(r);
    MHD_resume_connection(r->conn);
    __atomic_sub_fetch(&srv->working, 1, __ATOMIC_SEQ_CST);
}

static void *worker_main(void *arg)
{
    struct srv_workers *w = arg;
    struct srv_req *r;

    pthread_mutex_lock(&w->lock);
    for (;;) {
        while (w->head == NULL && !w->stop)
            pthread_cond_wait(&w->cond, &w->lock);
        if (w->head == NULL)
            break; /* stopping, and nothing left */
        r = w->head;
        w->head = r->work_next;
        if (w->head == NULL)
            w->tail = NULL;
        w->waiting--;
        w->busy++;
        pthread_mutex_unlock(&w->lock);
        run_work(r);
        pthread_mutex_lock(&w->lock);
        w->busy--;
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

static void workers_stop(struct srv *srv)
{
    struct srv_workers *w = srv->workers;

    if (w == NULL)
        return;
    pthread_mutex_lock(&w->lock);
    w->stop = true;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
    for (unsigned i = 0; i < w->n; i++)
        pthread_join(w->threads[i], NULL);
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->lock);
    free(w->threads);
    free(w);
    srv->workers = NULL;
}

static enum mg_code workers_start(struct srv *srv, struct mg_error *err)
{
    unsigned want = srv->cfg->commit_workers ? srv->cfg->commit_workers : 4;
    struct srv_workers *w = calloc(1, sizeof(*w));

    if (w == NULL || (w->threads = calloc(want, sizeof(*w->threads))) == NULL) {
        free(w);
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->cond, NULL);
    srv->workers = w;
    for (; w->n < want; w->n++) {
        if (pthread_create(&w->threads[w->n], NULL, worker_main, w) != 0) {
            workers_stop(srv);
            return mg_fail(err, MG_EIO, NULL, "cannot start the upload commit workers");
        }
    }
    return MG_OK;
}

void srv_work_stats(struct srv *srv, uint64_t *waiting, uint64_t *waited_total)
{
    struct srv_workers *w = srv->workers;

    *waiting = *waited_total = 0;
    if (w == NULL)
        return;
    pthread_mutex_lock(&w->lock);
    *waiting = w->waiting;
    *waited_total = w->waited_total;
    pthread_mutex_unlock(&w->lock);
}

/* Queue r->work for the pool (the connection is already suspended). */
static void start_work(struct srv_req *r)
{
    struct srv_workers *w = r->srv->workers;

    __atomic_add_fetch(&r->srv->working, 1, __ATOMIC_SEQ_CST);
    if (w == NULL) {
        run_work(r); /* no pool (not started): do it here rather than not at all */
        return;
    }
    pthread_mutex_lock(&w->lock);
    r->work_next = NULL;
    if (w->tail)
        w->tail->work_next = r;
    else
        w->head = r;
    w->tail = r;
    if (w->busy + w->waiting >= w->n)
        w->waited_total++;
    w->waiting++;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

/* ---- request accessors ------------------------------------------------ */

const char *srv_query(const struct srv_req *r, const char *key)
{
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, key);
}

const char *srv_header(const struct srv_req *r, const char *key)
{
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, key);
}

bool srv_page(struct srv_req *r, struct store_page *page)
{
    const char *l = srv_query(r, "limit"), *t = srv_query(r, "page_token");
    int64_t n = 50;

    if (l && !mg_parse_i64(l, 1, 1000, &n)) {
        srv_fail(r, MG_EINVAL, "limit", "limit must be an integer from 1 to 1000");
        return false;
    }
    if (t && (strlen(t) == 0 || strlen(t) > 256)) {
        srv_fail(r, MG_EINVAL, "page_token", "page_token is not one this server issued");
        return false;
    }
    page->limit = (unsigned)n;
    page->page_token = t;
    return true;
}

/* ---- the request state machine ---------------------------------------- */

/* The per-request deadline (below) follows each request's progress. */
static void conn_request_begins(struct srv *srv, struct srv_req *r);
static void conn_request_ends(struct srv *srv, struct srv_req *r);

static void req_free(struct srv_req *r)
{
    unsigned i;

    if (r->route && r->route->stream_cleanup)
        r->route->stream_cleanup(r);
    for (i = 0; i < r->nparams; i++)
        free(r->params[i].value);
    if (r->resp)
        MHD_destroy_response(r->resp);
    json_decref(r->body);
    mg_buf_release(&r->raw);
    free(r->path);
    free(r);
}

static bool has_role(const struct srv_req *r, unsigned need)
{
    if (need == SRV_PUBLIC)
        return true;
    if (r->who.roles & STORE_ROLE_ADMIN)
        return true;
    if (need == SRV_ANY_ROLE)
        return r->who.roles != 0;
    return (r->who.roles & need) != 0;
}

static bool is_mutation(const char *m)
{
    return strcmp(m, "GET") != 0 && strcmp(m, "HEAD") != 0 && strcmp(m, "OPTIONS") != 0;
}

/* Origin must name this very server: scheme://Host. */
bool srv_same_origin(const struct srv_req *r)
{
    const char *origin = srv_header(r, "Origin"), *host = srv_header(r, MHD_HTTP_HEADER_HOST);
    const char *rest;

    if (origin == NULL || host == NULL)
        return false;
    if (strncmp(origin, "http://", 7) == 0 && !r->srv->tls)
        rest = origin + 7;
    else if (strncmp(origin, "https://", 8) == 0 && r->srv->tls)
        rest = origin + 8;
    else
        return false;
    return strcmp(rest, host) == 0;
}

/* A request from the UI: the session cookie, and for changes the CSRF token
 * in X-CSRF-Token plus a same-origin Origin header. */
static bool check_session(struct srv_req *r)
{
    const char *id = MHD_lookup_connection_value(r->conn, MHD_COOKIE_KIND, SRV_SESSION_COOKIE);
    const char *sent = srv_header(r, "X-CSRF-Token");
    char csrf[STORE_CSRF_LEN + 1];

    if (store_session_check(r->srv->store, id, strlen(id), SRV_SESSION_IDLE_MS, SRV_SESSION_MAX_MS,
                            &r->who, csrf) != MG_OK) {
        srv_fail(r, MG_EUNAUTH, NULL, "your session has ended; sign in again");
        return false;
    }
    r->authenticated = true;
    r->via_session = true;
    snprintf(r->csrf, sizeof(r->csrf), "%s", csrf);
    if (is_mutation(r->method)) {
        if (sent == NULL || strlen(sent) != STORE_CSRF_LEN ||
            !mg_ct_equal(sent, csrf, STORE_CSRF_LEN)) {
            srv_fail(r, MG_EFORBIDDEN, NULL,
                     "this change needs the session's CSRF token in X-CSRF-Token");
            return false;
        }
        if (!srv_same_origin(r)) {
            srv_fail(r, MG_EFORBIDDEN, NULL, "this change must come from this server's own pages");
            return false;
        }
    }
    if (!has_role(r, r->route->roles)) {
        srv_fail(r, MG_EFORBIDDEN, NULL, "'%s' lacks the role this needs", r->who.name);
        return false;
    }
    return true;
}

/* Authenticate and authorise; on failure an error reply is set. */
static bool check_access(struct srv_req *r)
{
    const char *h = srv_header(r, MHD_HTTP_HEADER_AUTHORIZATION);

    if (r->route->roles == SRV_PUBLIC)
        return true;
    if (h == NULL && MHD_lookup_connection_value(r->conn, MHD_COOKIE_KIND, SRV_SESSION_COOKIE))
        return check_session(r);
    if (h == NULL || strncasecmp(h, "Bearer ", 7) != 0) {
        srv_fail(r, MG_EUNAUTH, NULL,
                 "this endpoint needs an 'Authorization: Bearer <token>' header");
        return false;
    }
    h += 7;
    while (*h == ' ')
        h++;
    if (store_token_authenticate(r->srv->store, h, strlen(h), &r->who) != MG_OK) {
        srv_fail(r, MG_EUNAUTH, NULL, "the bearer token is unknown or was revoked");
        return false;
    }
    r->authenticated = true;
    if (!has_role(r, r->route->roles)) {
        json_t *roles = store_roles_to_json(r->route->roles & 0xff);
        char *need = json_dumps(roles, JSON_COMPACT);
        srv_fail(r, MG_EFORBIDDEN, NULL, "token '%s' lacks the role this needs (one of %s)",
                 r->who.name, need ? need : "?");
        free(need);
        json_decref(roles);
        return false;
    }
    return true;
}

static bool is_json_type(const char *ct)
{
    size_t n = strlen("application/json");

    if (ct == NULL || strncasecmp(ct, "application/json", n) != 0)
        return false;
    return ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ';
}

static bool has_dot_segment(const char *p)
{
    while (*p == '/') {
        size_t n = strcspn(p + 1, "/");
        if ((n == 0 && p[1] == '/') || (n == 1 && p[1] == '.') ||
            (n == 2 && p[1] == '.' && p[2] == '.'))
            return true;
        p += 1 + n;
    }
    return false;
}

/* First call for a request: route, auth, headers. Returns false when a reply
 * is already set and the body (if any) should not be read. */
static bool req_begin(struct srv_req *r, const char *method)
{
    const char *cl = srv_header(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
    uint64_t len = 0, cap;
    int64_t cl_n = 0;
    enum mg_code rc;

    /* "." / ".." / empty segments never name anything: refuse them instead of
     * guessing what a normalising proxy would have meant. */
    if (has_dot_segment(r->path)) {
        srv_fail(r, MG_EINVAL, NULL,
                 "the path has an empty, '.' or '..' segment; name resources directly");
        return false;
    }
    rc = srv_route_match(r, method, r->path);
    if (rc == MG_ENOTFOUND) {
        srv_fail(r, MG_ENOTFOUND, NULL, "no such endpoint: %s %s", method, r->path);
        return false;
    }
    if (rc == MG_EMETHOD) {
        srv_fail(r, MG_EMETHOD, NULL, "%s is not allowed on %s", method, r->path);
        return false;
    }
    /* Authentication comes before parameter validation: no oracle for callers
     * without a token. */
    if (!check_access(r))
        return false;
    if (rc == MG_EINVAL) {
        srv_reply_error(r, &r->err);
        return false;
    }
    if (cl && !mg_parse_i64(cl, 0, INT64_MAX, &cl_n)) {
        srv_fail(r, MG_EINVAL, NULL, "malformed Content-Length");
        return false;
    }
    len = (uint64_t)cl_n;
    if (r->route->body == SRV_BODY_JSON) {
        cap = r->srv->cfg->max_json_bytes;
        if (len > 0 && !is_json_type(srv_header(r, MHD_HTTP_HEADER_CONTENT_TYPE))) {
            srv_fail(r, MG_EMEDIA, NULL, "send the body as Content-Type: application/json");
            return false;
        }
        if (len > cap) {
            srv_fail(r, MG_ETOOBIG, NULL, "the JSON body is larger than the limit of %llu bytes",
                     (unsigned long long)cap);
            return false;
        }
        mg_buf_init(&r->raw, (size_t)cap);
    } else if (r->route->body == SRV_BODY_STREAM) {
        cap = r->srv->cfg->max_blob_bytes;
        if (len > cap) {
            srv_fail(r, MG_ETOOBIG, NULL, "the body is larger than the limit of %llu bytes",
                     (unsigned long long)cap);
            return false;
        }
        if (r->route->stream_begin(r) != MG_OK) {
            srv_reply_error(r, &r->err);
            return false;
        }
    }
    return true;
}

/* A body chunk. Errors are remembered and answered once the body ends. */
static void req_body(struct srv_req *r, const char *data, size_t n)
{
    __atomic_add_fetch(&r->body_bytes, n, __ATOMIC_RELAXED);
    if (r->failed)
        return;
    if (r->route->body == SRV_BODY_JSON) {
        if (r->raw.max > 0 && mg_buf_append(&r->raw, data, n) != MG_OK) {
            mg_fail(&r->err, MG_ETOOBIG, NULL,
                    "the JSON body is larger than the limit of %llu bytes",
                    (unsigned long long)r->raw.max);
            r->failed = true;
        }
    } else if (r->route->body == SRV_BODY_STREAM) {
        if (r->route->stream_data(r, data, n) != MG_OK)
            r->failed = true;
    }
}

/* The whole body is in: parse JSON if needed and call the handler. */
static void req_finish(struct srv_req *r)
{
    json_error_t jerr;

    if (r->failed) {
        srv_reply_error(r, &r->err);
        return;
    }
    if (r->route->body == SRV_BODY_JSON && r->raw.len > 0) {
        if (!is_json_type(srv_header(r, MHD_HTTP_HEADER_CONTENT_TYPE))) {
            srv_fail(r, MG_EMEDIA, NULL, "send the body as Content-Type: application/json");
            return;
        }
        r->body = json_loadb(r->raw.data, r->raw.len, JSON_REJECT_DUPLICATES, &jerr);
        if (r->body == NULL) {
            srv_fail(r, MG_EINVAL, NULL, "the body is not valid JSON (line %d, column %d: %s)",
                     jerr.line, jerr.column, jerr.text);
            return;
        }
        mg_buf_release(&r->raw);
    }
    r->route->handle(r);
    if (r->resp == NULL && !r->deferred)
        srv_fail(r, MG_EIO, NULL, "the handler produced no response");
}

static enum MHD_Result queue(struct srv_req *r)
{
    if (r->resp == NULL)
        return MHD_NO;
    r->queued = true;
    return MHD_queue_response(r->conn, r->status, r->resp);
}

static enum MHD_Result access_handler(void *cls, struct MHD_Connection *conn, const char *url,
                                      const char *method, const char *version,
                                      const char *upload_data, size_t *upload_data_size,
                                      void **con_cls)
{
    struct srv *srv = cls;
    struct srv_req *r = *con_cls;

    (void)version;
    if (r == NULL) {
        r = calloc(1, sizeof(*r));
        if (r == NULL)
            return MHD_NO;
        r->srv = srv;
        r->conn = conn;
        r->method = method;
        r->start_ms = mg_mono_ms();
        r->path = strdup(url);
        *con_cls = r;
        __atomic_add_fetch(&srv->inflight, 1, __ATOMIC_SEQ_CST);
        if (r->path == NULL)
            return MHD_NO;
        r->body_start_ms = r->start_ms;
        conn_request_begins(srv, r);
        if (!req_begin(r, method))
            return queue(r); /* reply now; the body is not read */
        return MHD_YES;
    }
    if (r->deferred) {
        /* Resumed after ?wait: make the reply now. */
        r->deferred = false;
        r->on_resume(r);
        if (r->resp == NULL)
            srv_fail(r, MG_EIO, NULL, "the handler produced no response");
        return queue(r);
    }
    if (r->queued) {
        *upload_data_size = 0; /* already answered; discard the rest */
        return MHD_YES;
    }
    if (r->resp != NULL) {
        /* Decided mid-body: read and discard the rest (bounded) and answer
         * when the body ends. Answering with unread data would make
         * libmicrohttpd reset the connection and the client never see it. */
        if (*upload_data_size == 0) {
            __atomic_store_n(&r->body_done, true, __ATOMIC_RELEASE);
            return queue(r);
        }
        r->drained += *upload_data_size;
        __atomic_add_fetch(&r->body_bytes, *upload_data_size, __ATOMIC_RELAXED);
        *upload_data_size = 0;
        return r->drained > DRAIN_MAX ? MHD_NO : MHD_YES;
    }
    if (*upload_data_size > 0) {
        req_body(r, upload_data, *upload_data_size);
        *upload_data_size = 0;
        if (r->failed)
            srv_reply_error(r, &r->err);
        return MHD_YES;
    }
    __atomic_store_n(&r->body_done, true, __ATOMIC_RELEASE);
    req_finish(r);
    if (r->deferred) {
        /* Suspend first, then hand over: a resume can never come before. */
        MHD_suspend_connection(conn);
        if (r->work)
            start_work(r);
        else
            push_wait(srv, r, r->wait_model, r->wait_alias, r->wait_gen, r->wait_deadline);
        return MHD_YES;
    }
    return queue(r);
}

static void log_request(const struct srv *srv, const struct srv_req *r)
{
    double ms = (double)(mg_mono_ms() - r->start_ms);
    char ts[32];
    const char *who = r->authenticated ? r->who.name : "-";

    mg_time_format(mg_now_ms(), ts);
    if (srv->cfg->log_json) {
        json_t *l = json_pack("{s:s, s:s, s:s, s:i, s:I, s:f, s:s}", "ts", ts, "method", r->method,
                              "path", r->path ? r->path : "", "status", (int)r->status, "bytes",
                              (json_int_t)r->resp_bytes, "duration_ms", ms, "token", who);
        char *text = l ? json_dumps(l, JSON_COMPACT) : NULL;
        if (text)
            fprintf(stderr, "%s\n", text);
        free(text);
        json_decref(l);
    } else {
        fprintf(stderr, "%s %s %s %u %lluB %.1fms token=%s\n", ts, r->method,
                r->path ? r->path : "", r->status, (unsigned long long)r->resp_bytes, ms, who);
    }
}

static void completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    struct srv *srv = cls;
    struct srv_req *r = *con_cls;

    (void)conn;
    if (r == NULL)
        return;
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && r->status == 0)
        r->status = 499; /* client went away or timed out before a reply */
    conn_request_ends(srv, r);
    log_request(srv, r);
    srv_metrics_request(srv->metrics, r->method, r->route ? r->route->pattern : NULL, r->status,
                        (double)(mg_mono_ms() - r->start_ms) / 1000.0);
    if (r->route && strncmp(r->route->pattern, "/api/v1/blobs", 13) == 0 &&
        strcmp(r->method, "POST") == 0)
        srv_metrics_blob_in(srv->metrics, r->body_bytes);
    else if (r->route && r->status / 100 == 2 &&
             (strstr(r->route->pattern, "/blobs/{digest}") ||
              strstr(r->route->pattern, "/artifact")))
        srv_metrics_blob_out(srv->metrics, r->resp_bytes);
    req_free(r);
    *con_cls = NULL;
    __atomic_sub_fetch(&srv->inflight, 1, __ATOMIC_SEQ_CST);
}

/* ---- per-request deadlines (slowloris) -------------------------------- */

/* One open connection, and its request while it is being read. */
struct srv_conn {
    int fd;
    int64_t since_ms;  /* the current request's first byte could come from now */
    struct srv_req *r; /* set once the headers are in, NULL between requests */
    struct srv_conn *prev, *next;
};

struct srv_reaper {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool stop;
    struct srv_conn *conns;
    int64_t header_ms;
    uint64_t min_rate;
};

static void notify_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                              enum MHD_ConnectionNotificationCode code)
{
    struct srv *srv = cls;
    struct srv_reaper *rp = srv->reaper;
    struct srv_conn *c = *socket_context;
    const union MHD_ConnectionInfo *info;

    if (rp == NULL)
        return;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        c = calloc(1, sizeof(*c));
        info = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (c == NULL || info == NULL) {
            free(c);
            return;
        }
        c->fd = info->connect_fd;
        c->since_ms = mg_mono_ms();
        pthread_mutex_lock(&rp->lock);
        c->next = rp->conns;
        if (rp->conns)
            rp->conns->prev = c;
        rp->conns = c;
        pthread_mutex_unlock(&rp->lock);
        *socket_context = c;
    } else if (c != NULL) {
        pthread_mutex_lock(&rp->lock);
        if (c->prev)
            c->prev->next = c->next;
        else
            rp->conns = c->next;
        if (c->next)
            c->next->prev = c->prev;
        pthread_mutex_unlock(&rp->lock);
        free(c);
        *socket_context = NULL;
    }
}

/* The connection's tracking record, or NULL. */
static struct srv_conn *conn_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

    return info ? info->socket_context : NULL;
}

/* Headers are in: the deadline now watches the body. */
static void conn_request_begins(struct srv *srv, struct srv_req *r)
{
    struct srv_conn *c;

    if (srv->reaper == NULL || (c = conn_of(r->conn)) == NULL)
        return;
    pthread_mutex_lock(&srv->reaper->lock);
    c->r = r;
    pthread_mutex_unlock(&srv->reaper->lock);
}

/* The request is over: the next one's headers get the full deadline. */
static void conn_request_ends(struct srv *srv, struct srv_req *r)
{
    struct srv_conn *c;

    if (srv->reaper == NULL || (c = conn_of(r->conn)) == NULL)
        return;
    pthread_mutex_lock(&srv->reaper->lock);
    if (c->r == r)
        c->r = NULL;
    c->since_ms = mg_mono_ms();
    pthread_mutex_unlock(&srv->reaper->lock);
}

static bool too_slow(const struct srv_reaper *rp, const struct srv_conn *c, int64_t now)
{
    const struct srv_req *r = c->r;
    int64_t elapsed;

    if (r == NULL)
        return now - c->since_ms > rp->header_ms; /* headers still trickling */
    if (__atomic_load_n(&r->body_done, __ATOMIC_ACQUIRE))
        return false; /* answering, or waiting on ?wait: not the client's pace */
    elapsed = now - r->body_start_ms;
    return elapsed > rp->header_ms && __atomic_load_n(&r->body_bytes, __ATOMIC_RELAXED) * 1000 <
                                          rp->min_rate * (uint64_t)elapsed;
}

static void *reaper_main(void *arg)
{
    struct srv_reaper *rp = arg;

    pthread_mutex_lock(&rp->lock);
    while (!rp->stop) {
        struct timespec ts;
        int64_t now = mg_mono_ms();
        struct srv_conn *c;

        for (c = rp->conns; c; c = c->next) {
            if (c->fd >= 0 && too_slow(rp, c, now)) {
                /* libmicrohttpd sees the socket end and closes it. */
                shutdown(c->fd, SHUT_RDWR);
                c->fd = -1;
            }
        }
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 250 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&rp->cond, &rp->lock, &ts);
    }
    pthread_mutex_unlock(&rp->lock);
    return NULL;
}

static enum mg_code reaper_start(struct srv *srv, struct mg_error *err)
{
    struct srv_reaper *rp = calloc(1, sizeof(*rp));

    if (rp == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    pthread_mutex_init(&rp->lock, NULL);
    pthread_cond_init(&rp->cond, NULL);
    rp->header_ms = (int64_t)srv->cfg->timeout_s * 1000;
    rp->min_rate = srv->cfg->min_body_rate;
    if (pthread_create(&rp->thread, NULL, reaper_main, rp) != 0) {
        pthread_mutex_destroy(&rp->lock);
        pthread_cond_destroy(&rp->cond);
        free(rp);
        return mg_fail(err, MG_EIO, NULL, "cannot start the deadline thread");
    }
    srv->reaper = rp;
    return MG_OK;
}

static void reaper_stop(struct srv *srv)
{
    struct srv_reaper *rp = srv->reaper;

    if (rp == NULL)
        return;
    pthread_mutex_lock(&rp->lock);
    rp->stop = true;
    pthread_cond_signal(&rp->cond);
    pthread_mutex_unlock(&rp->lock);
    pthread_join(rp->thread, NULL);
    /* The daemon is stopped: its CLOSED notifications freed every record. */
    pthread_mutex_destroy(&rp->lock);
    pthread_cond_destroy(&rp->cond);
    free(rp);
    srv->reaper = NULL;
}

/* ---- daemon ----------------------------------------------------------- */

static enum mg_code parse_listen(const char *s, struct sockaddr_storage *ss, bool *v6,
                                 struct mg_error *err)
{
    char host[128];
    const char *colon;
    int64_t port;
    size_t hl;

    memset(ss, 0, sizeof(*ss));
    if (s[0] == '[') {
        const char *e = strchr(s, ']');
        if (e == NULL || e[1] != ':')
            goto bad;
        hl = (size_t)(e - s - 1);
        colon = e + 1;
        if (hl >= sizeof(host))
            goto bad;
        memcpy(host, s + 1, hl);
    } else {
        colon = strrchr(s, ':');
        if (colon == NULL)
            goto bad;
        hl = (size_t)(colon - s);
        if (hl >= sizeof(host))
            goto bad;
        memcpy(host, s, hl);
    }
    host[hl] = '\0';
    if (!mg_parse_i64(colon + 1, 0, 65535, &port))
        goto bad;
    if (inet_pton(AF_INET, host, &((struct sockaddr_in *)ss)->sin_addr) == 1) {
        struct sockaddr_in *sin = (struct sockaddr_in *)ss;
        sin->sin_family = AF_INET;
        sin->sin_port = htons((uint16_t)port);
        *v6 = false;
        return MG_OK;
    }
    if (inet_pton(AF_INET6, host, &((struct sockaddr_in6 *)ss)->sin6_addr) == 1) {
        struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons((uint16_t)port);
        *v6 = true;
        return MG_OK;
    }
bad:
    return mg_fail(err, MG_EINVAL, "listen",
                   "--listen wants HOST:PORT with a numeric address, e.g. 127.0.0.1:8470 or "
                   "[::1]:8470, not '%s'",
                   s);
}

void srv_tls_release(struct srv *srv)
{
    free(srv->tls_cert_pem);
    if (srv->tls_key_pem) {
        OPENSSL_cleanse(srv->tls_key_pem, strlen(srv->tls_key_pem));
        free(srv->tls_key_pem);
    }
    srv->tls_cert_pem = srv->tls_key_pem = NULL;
}

/* Read a whole PEM file (at most 1 MiB). */
static char *read_pem(const char *path, struct mg_error *err)
{
    FILE *f = fopen(path, "re");
    struct mg_buf b;
    char buf[4096];
    size_t n;

    if (f == NULL) {
        mg_fail(err, MG_EINVAL, "tls", "cannot read %s: %s", path, strerror(errno));
        return NULL;
    }
    mg_buf_init(&b, 1u << 20);
    while ((n = fread(buf, 1, sizeof(buf), f)) > 0) {
        if (mg_buf_append(&b, buf, n) != MG_OK) {
            fclose(f);
            mg_buf_release(&b);
            mg_fail(err, MG_EINVAL, "tls", "%s is larger than 1 MiB", path);
            return NULL;
        }
    }
    fclose(f);
    if (b.len == 0 || strstr(b.data, "-----BEGIN ") == NULL) {
        mg_buf_release(&b);
        mg_fail(err, MG_EINVAL, "tls", "%s is not a PEM file", path);
        return NULL;
    }
    return b.data;
}

enum mg_code srv_tls_load(struct srv *srv, struct mg_error *err)
{
    BIO *bc = NULL, *bk = NULL;
    X509 *x = NULL;
    EVP_PKEY *k = NULL;
    enum mg_code rc = MG_OK;

    if (srv->cfg->tls_cert == NULL && srv->cfg->tls_key == NULL)
        return MG_OK;
    if ((srv->cfg->tls_cert == NULL) != (srv->cfg->tls_key == NULL))
        return mg_fail(err, MG_EINVAL, "tls", "give both --tls-cert and --tls-key");
    if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
        return mg_fail(err, MG_EINVAL, "tls", "this libmicrohttpd was built without TLS");
    if ((srv->tls_cert_pem = read_pem(srv->cfg->tls_cert, err)) == NULL ||
        (srv->tls_key_pem = read_pem(srv->cfg->tls_key, err)) == NULL) {
        rc = err->code;
        goto out;
    }
    bc = BIO_new_mem_buf(srv->tls_cert_pem, -1);
    bk = BIO_new_mem_buf(srv->tls_key_pem, -1);
    x = bc ? PEM_read_bio_X509(bc, NULL, NULL, NULL) : NULL;
    k = bk ? PEM_read_bio_PrivateKey(bk, NULL, NULL, NULL) : NULL;
    if (x == NULL)
        rc = mg_fail(err, MG_EINVAL, "tls-cert", "%s holds no PEM certificate", srv->cfg->tls_cert);
    else if (k == NULL)
        rc = mg_fail(err, MG_EINVAL, "tls-key", "%s holds no (unencrypted) PEM private key",
                     srv->cfg->tls_key);
    else if (X509_check_private_key(x, k) != 1)
        rc =
            mg_fail(err, MG_EINVAL, "tls-key", "the key in %s does not match the certificate in %s",
                    srv->cfg->tls_key, srv->cfg->tls_cert);
    ERR_clear_error();
out:
    X509_free(x);
    EVP_PKEY_free(k);
    BIO_free(bc);
    BIO_free(bk);
    if (rc != MG_OK) {
        srv_tls_release(srv);
        return rc;
    }
    srv->tls = true;
    return MG_OK;
}

enum mg_code srv_start(struct srv *srv, struct mg_error *err)
{
    struct sockaddr_storage ss;
    const union MHD_DaemonInfo *info;
    bool v6 = false;
    unsigned flags;
    char *cert = srv->tls_cert_pem, *key = srv->tls_key_pem;

    if (parse_listen(srv->cfg->listen, &ss, &v6, err) != MG_OK)
        return err->code;
    if (reaper_start(srv, err) != MG_OK)
        return err->code;
    if (workers_start(srv, err) != MG_OK) {
        reaper_stop(srv);
        return err->code;
    }
    flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC |
            MHD_ALLOW_SUSPEND_RESUME | (v6 ? MHD_USE_IPv6 : 0) | (srv->tls ? MHD_USE_TLS : 0);
    {
        struct MHD_OptionItem tls[] = {
            {srv->tls ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, 0, cert},
            {MHD_OPTION_HTTPS_MEM_KEY, 0, key},
            {MHD_OPTION_END, 0, NULL},
        };
        srv->daemon = MHD_start_daemon(
            flags, 0, NULL, NULL, access_handler, srv, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
            MHD_OPTION_THREAD_POOL_SIZE, (unsigned)srv->cfg->threads,
            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)srv->cfg->conn_memory,
            MHD_OPTION_CONNECTION_LIMIT, (unsigned)srv->cfg->conn_limit,
            MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)srv->cfg->per_ip_limit,
            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)srv->cfg->timeout_s,
            MHD_OPTION_NOTIFY_COMPLETED, completed, srv, MHD_OPTION_NOTIFY_CONNECTION,
            notify_connection, srv, MHD_OPTION_ARRAY, tls, MHD_OPTION_END);
    }
    /* libmicrohttpd copies nothing: the PEMs stay until srv_stop(). */
    if (srv->daemon == NULL) {
        workers_stop(srv);
        reaper_stop(srv);
        return mg_fail(err, MG_EIO, "listen", "cannot listen on %s (in use, or not permitted)",
                       srv->cfg->listen);
    }
    info = MHD_get_daemon_info(srv->daemon, MHD_DAEMON_INFO_BIND_PORT);
    srv->port = info ? info->port : 0;
    return MG_OK;
}

void srv_stop(struct srv *srv, int grace_ms)
{
    int64_t deadline = mg_mono_ms() + grace_ms;
    struct timespec ts = {0, 20 * 1000 * 1000};

    if (srv->daemon == NULL)
        return;
    /* Stop accepting; in-flight requests go on. */
    {
        MHD_socket lfd = MHD_quiesce_daemon(srv->daemon);

        if (lfd != MHD_INVALID_SOCKET)
            close(lfd);
    }
    while (__atomic_load_n(&srv->inflight, __ATOMIC_SEQ_CST) > 0 && mg_mono_ms() < deadline)
        nanosleep(&ts, NULL);
    /* A suspended request must be resumed before the daemon stops: work
     * threads always finish (and resume), so wait for them however long. */
    while (__atomic_load_n(&srv->working, __ATOMIC_SEQ_CST) > 0)
        nanosleep(&ts, NULL);
    workers_stop(srv);
    MHD_stop_daemon(srv->daemon);
    srv->daemon = NULL;
    reaper_stop(srv);
}
