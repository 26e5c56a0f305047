/*
 * http.c - libmicrohttpd glue: daemon setup, the access handler state machine, deferred
 * replies, per-request deadlines (slowloris) and the request log. Reading a request is
 * request.c, deciding who may is authz.c, replying is response.c.
 */
#include "http.h"
#include "http_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <pthread.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "../os/wait.h"
#include "../base/text.h"
#include "../gates/authz.h"
#include "../base/util.h"
#include "cache.h"
#include "reqlog.h"
#include "../os/metrics.h"

/* Bytes of an oversize chunked body we drain before closing the connection. */
#define DRAIN_MAX (16u << 20)

void srv_defer(struct srv_req *r, void *ctx, void (*start)(struct srv_req *r),
               void (*on_resume)(struct srv_req *r))
{
    srv_set_response(r, 0, NULL, 0);
    r->deferred = true;
    free(r->defer_ctx);
    r->defer_ctx = ctx;
    r->defer_start = start;
    r->on_resume = on_resume;
}

void srv_resume(struct srv_req *r)
{
    MHD_resume_connection(r->conn);
}

void srv_defer_work(struct srv_req *r, void (*work)(struct srv_req *r),
                    void (*on_resume)(struct srv_req *r))
{
    srv_set_response(r, 0, NULL, 0);
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

/* ---- the request state machine ---------------------------------------- */

/* The per-request deadline (below) follows each request's progress. */
static void conn_request_begins(struct srv *srv, struct srv_req *r);
static void conn_request_ends(struct srv *srv, struct srv_req *r);

static enum MHD_Result queue(struct srv_req *r)
{
    if (r->resp == NULL)
        return MHD_NO;
    r->queued = true;
    return MHD_queue_response(r->conn, r->status, r->resp);
}

/* A request's record, counted in flight until completed() frees it. raw_target may be NULL. */
static struct srv_req *req_new(struct srv *srv, struct MHD_Connection *conn, const char *raw_target)
{
    struct srv_req *r = calloc(1, sizeof(*r));

    if (r == NULL)
        return NULL;
    r->srv = srv;
    r->conn = conn;
    r->start_ms = mg_mono_ms();
    if (raw_target != NULL) {
        r->target_problem = mg_request_target_problem(raw_target);
        r->raw_path = strndup(raw_target, strcspn(raw_target, "?"));
    }
    __atomic_add_fetch(&srv->inflight, 1, __ATOMIC_SEQ_CST);
    return r;
}

/* libmicrohttpd's first word of a request: its target as sent, before decoding. The record
 * made here is what access_handler and completed() see; so even a request libmicrohttpd
 * refuses itself (headers too large) is logged. */
static void *target_seen(void *cls, const char *uri, struct MHD_Connection *conn)
{
    return req_new(cls, conn, uri);
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn, const char *url,
                              const char *method, const char *version, const char *upload_data,
                              size_t *upload_data_size, void **con_cls)
{
    struct srv *srv = cls;
    struct srv_req *r = *con_cls;

    (void)version;
    if (r == NULL) {
        /* The target callback could not allocate: start here, without the raw target. */
        if ((r = req_new(srv, conn, NULL)) == NULL)
            return MHD_NO;
        *con_cls = r;
    }
    if (r->method == NULL) {
        r->method = method;
        r->conn = conn;
        r->path = strdup(url);
        if (r->path == NULL)
            return MHD_NO;
        r->body_start_ms = mg_mono_ms();
        conn_request_begins(srv, r);
        if (!srv_req_begin(r, method)) {
            if (r->no_drain || !srv_req_body_on_its_way(r))
                return queue(r); /* reply now; no body comes, or none is to be read */
            srv_req_close_after_reply(r);
            return MHD_YES; /* drain the body below, then reply */
        }
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
        srv_req_body(r, upload_data, *upload_data_size);
        *upload_data_size = 0;
        if (r->failed) {
            srv_reply_error(r, &r->err);
            srv_req_close_after_reply(r);
        }
        return MHD_YES;
    }
    __atomic_store_n(&r->body_done, true, __ATOMIC_RELEASE);
    srv_req_finish(r);
    if (r->deferred) {
        /* Suspend first, then hand over: a resume can never come before. */
        MHD_suspend_connection(conn);
        if (r->work)
            start_work(r);
        else
            r->defer_start(r);
        return MHD_YES;
    }
    return queue(r);
}

/* libmicrohttpd's access handler: handle(), counted in r->calls, so that peer_gone never
 * takes a request whose handler is busy (a token's lookup, a backend's slow write) for a
 * stuck one. The request was made in target_seen; handle() never frees it. */
static enum MHD_Result access_handler(void *cls, struct MHD_Connection *conn, const char *url,
                                      const char *method, const char *version,
                                      const char *upload_data, size_t *upload_data_size,
                                      void **con_cls)
{
    struct srv_req *r = *con_cls;
    enum MHD_Result ret;

    if (r != NULL)
        __atomic_add_fetch(&r->calls, 1, __ATOMIC_RELEASE);
    ret = handle(cls, conn, url, method, version, upload_data, upload_data_size, con_cls);
    if (r != NULL)
        __atomic_add_fetch(&r->calls, 1, __ATOMIC_RELEASE);
    return ret;
}

/* A request log line being written into a fixed buffer, cut short (never past its last
 * byte, kept for the newline) rather than overrun. */
struct log_line {
    char b[1536];
    size_t n;
};

static void line_put(struct log_line *l, const char *s, size_t k)
{
    if (k > sizeof(l->b) - 1 - l->n)
        k = sizeof(l->b) - 1 - l->n;
    memcpy(l->b + l->n, s, k);
    l->n += k;
}

static void line_str(struct log_line *l, const char *s)
{
    line_put(l, s, strlen(s));
}

static void line_int(struct log_line *l, int64_t v)
{
    char num[MG_FMT_INT_LEN];
    size_t n;
    const char *d = mg_fmt_i64(v, num, &n);

    line_put(l, d, n);
}

/* One line per request, whatever the client sent: the path as sent (or decoded when the
 * target was not seen) and the method are escaped (mg_log_escape), so a line can neither
 * be forged with CR/LF nor dropped for bytes that are not UTF-8. */
static void log_request(const struct srv *srv, const struct srv_req *r)
{
    int64_t ms = mg_mono_ms() - r->start_ms;
    char ts[32], path[1024], method[80];
    const char *who = r->authenticated ? r->who.name : "-";
    const char *p = r->raw_path ? r->raw_path : (r->path ? r->path : "");
    bool json = srv->cfg->log_json;
    struct log_line l;

    mg_time_format(mg_now_ms(), ts);
    mg_log_escape(p, path, sizeof(path), json);
    mg_log_escape(r->method ? r->method : "-", method, sizeof(method), json);
    if (json) {
        json_t *o = json_pack("{s:s, s:s, s:s, s:i, s:I, s:f, s:s}", "ts", ts, "method", method,
                              "path", path, "status", (int)r->status, "bytes",
                              (json_int_t)r->resp_bytes, "duration_ms", (double)ms, "token", who);
        char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
        size_t tl = text ? strlen(text) : 0;
        char *t = text ? realloc(text, tl + 2) : NULL;
        int n;

        json_decref(o);
        if (t != NULL) { /* the whole object, however long: a cut one is no JSON */
            t[tl] = '\n';
            srv_reqlog_line(srv->reqlog, t, tl + 1);
            free(t);
            return;
        }
        free(text);
        n = snprintf(l.b, sizeof(l.b),
                     "{\"ts\":\"%s\",\"status\":%u,\"error\":\"log line not encodable\"}\n", ts,
                     r->status);
        if (n > 0 && (size_t)n < sizeof(l.b))
            srv_reqlog_line(srv->reqlog, l.b, (size_t)n);
        return;
    }
    /* "<ts> <method> <path> <status> <bytes>B <ms>.0ms token=<name>": the duration counts
     * whole milliseconds (mg_mono_ms), written as %.1f always wrote them. */
    l.n = 0;
    line_str(&l, ts);
    line_put(&l, " ", 1);
    line_str(&l, method);
    line_put(&l, " ", 1);
    line_str(&l, path);
    line_put(&l, " ", 1);
    line_int(&l, r->status);
    line_put(&l, " ", 1);
    line_int(&l, (int64_t)r->resp_bytes);
    line_put(&l, "B ", 2);
    line_int(&l, ms > 0 ? ms : 0);
    line_put(&l, ".0ms token=", 11);
    line_str(&l, who);
    l.b[l.n++] = '\n'; /* line_put left a byte for it */
    srv_reqlog_line(srv->reqlog, l.b, l.n);
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
    srv_metrics_request(srv->metrics, mg_method_label(r->method),
                        r->route ? r->route->pattern : NULL, r->status,
                        (double)(mg_mono_ms() - r->start_ms) / 1000.0);
    if (r->route && strncmp(r->route->pattern, "/api/v1/blobs", 13) == 0 && r->method != NULL &&
        strcmp(r->method, "POST") == 0)
        srv_metrics_blob_in(srv->metrics, r->body_bytes);
    else if (r->route && r->status / 100 == 2 &&
             (strstr(r->route->pattern, "/blobs/{digest}") ||
              strstr(r->route->pattern, "/artifact")))
        srv_metrics_blob_out(srv->metrics, r->resp_bytes);
    srv_req_free(r);
    *con_cls = NULL;
    __atomic_sub_fetch(&srv->inflight, 1, __ATOMIC_SEQ_CST);
}

/* ---- per-request deadlines (slowloris) -------------------------------- */

/* One open connection, and its request while it is being read. */
struct srv_conn {
    int fd;
    int64_t since_ms;  /* the current request's first byte could come from now */
    struct srv_req *r; /* set once the headers are in, NULL between requests */
    uint64_t changes;  /* requests begun or ended on the connection */
    /* peer_gone's last look: when, and the progress it saw (changes, r's calls) */
    int64_t seen_ms;
    uint64_t seen_changes, seen_calls;
    struct srv_conn *prev, *next;
};

struct srv_reaper {
    pthread_t thread;
    pthread_mutex_t lock;
    struct mg_wait wake;
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
    c->changes++;
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
    c->changes++;
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

/* The least time a connection must make no progress before peer_gone ends it. */
#define GONE_MS 1000

/* With epoll (edge-triggered), libmicrohttpd 0.9.75 takes a short read for "nothing more to
 * read": when the peer's FIN came in with its last bytes no later event comes, and the
 * connection would wait out the whole timeout (an upload cut off by a cancelled CI job kept
 * its temp file that long). It is stuck when nothing moved for GONE_MS (no request begun or
 * ended, no call of the handler, which is where every body byte comes in), the peer has closed
 * its side and nothing is left to read: no request can come of it. A request whose handler is
 * running, or whose body is all in (being answered), is never taken for stuck; the system
 * calls are made only for a connection that made no progress since the last look, at most
 * once a GONE_MS. */
static bool peer_gone(struct srv_conn *c, int64_t now)
{
    struct pollfd p = {.fd = c->fd, .events = POLLRDHUP};
    const struct srv_req *r = c->r;
    uint64_t calls = 0;
    bool same;
    int unread = -1;

    if (r != NULL) {
        if (__atomic_load_n(&r->body_done, __ATOMIC_ACQUIRE))
            return false;
        calls = __atomic_load_n(&r->calls, __ATOMIC_ACQUIRE);
        if (calls % 2 == 1)
            return false;
    }
    if (now - c->seen_ms < GONE_MS)
        return false;
    same = c->seen_changes == c->changes && c->seen_calls == calls;
    c->seen_ms = now;
    c->seen_changes = c->changes;
    c->seen_calls = calls;
    return same && poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0 &&
           ioctl(c->fd, FIONREAD, &unread) == 0 && unread == 0;
}

static void *reaper_main(void *arg)
{
    struct srv_reaper *rp = arg;

    pthread_mutex_lock(&rp->lock);
    while (!rp->stop) {
        int64_t now = mg_mono_ms();
        struct srv_conn *c;

        for (c = rp->conns; c; c = c->next) {
            if (c->fd >= 0 && (too_slow(rp, c, now) || peer_gone(c, now))) {
                /* libmicrohttpd sees the socket end and closes it. */
                shutdown(c->fd, SHUT_RDWR);
                c->fd = -1;
            }
        }
        (void)mg_wait_until(&rp->wake, &rp->lock, mg_mono_ms() + 250);
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
    mg_wait_init(&rp->wake);
    rp->header_ms = (int64_t)srv->cfg->timeout_s * 1000;
    rp->min_rate = srv->cfg->min_body_rate;
    if (pthread_create(&rp->thread, NULL, reaper_main, rp) != 0) {
        pthread_mutex_destroy(&rp->lock);
        mg_wait_release(&rp->wake);
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
    pthread_cond_signal(&rp->wake.cond);
    pthread_mutex_unlock(&rp->lock);
    pthread_join(rp->thread, NULL);
    /* The daemon is stopped: its CLOSED notifications freed every record. */
    pthread_mutex_destroy(&rp->lock);
    mg_wait_release(&rp->wake);
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
    if (srv_reqlog_start(&srv->reqlog, STDERR_FILENO, err) != MG_OK)
        return err->code;
    if (reaper_start(srv, err) != MG_OK) {
        srv_reqlog_stop(&srv->reqlog);
        return err->code;
    }
    if (workers_start(srv, err) != MG_OK) {
        reaper_stop(srv);
        srv_reqlog_stop(&srv->reqlog);
        return err->code;
    }
    /* MHD_USE_AUTO: epoll on Linux (poll elsewhere). With poll, a connection whose next
     * request came in just after a round's poll() waited that whole round too: ~1 request in
     * every round's worth took two rounds, the p99 of 32 connections at twice the median.
     * With epoll that tail is gone, req/s and CPU unchanged (bench/reads-M25.md, eighth pass,
     * where the likely cause is). */
    flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_USE_ITC |
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
            MHD_OPTION_URI_LOG_CALLBACK, target_seen, srv, MHD_OPTION_NOTIFY_COMPLETED, completed,
            srv, MHD_OPTION_NOTIFY_CONNECTION, notify_connection, srv, MHD_OPTION_ARRAY, tls,
            MHD_OPTION_END);
    }
    /* libmicrohttpd copies nothing: the PEMs stay until srv_stop(). */
    if (srv->daemon == NULL) {
        workers_stop(srv);
        reaper_stop(srv);
        srv_reqlog_stop(&srv->reqlog);
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
    srv_reqlog_stop(&srv->reqlog); /* every request has completed: its line is written */
}
