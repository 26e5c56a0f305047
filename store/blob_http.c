/*
 * blob_http.c - what the remote blob backends (s3, oci) share on top of libcurl:
 * replies captured with a cap, transport errors named after the backend, parts
 * sent by a thread while the next one fills, and downloads streamed by a thread
 * through a bounded buffer (so a slow client or a slow backend holds no more than
 * that buffer, and an HTTP thread never waits on the network). Both kinds of remote
 * reader (a stream, and the empty reader of a range of no bytes) carry their own
 * blob_reader_ops: neither hands out a descriptor.
 */
#include "blob_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>

#include "../os/wait.h"

#define STREAM_BUF (1u << 20)
/* A suspended download is resumed once this much is buffered (or the body ended): one
 * suspend/resume per libcurl chunk (16 KiB) cost more than the copying. */
#define STREAM_WAKE (256u << 10)
#define CONNECT_TIMEOUT_S 10L
#define STALL_SECONDS 60L

/*
 * Part buffers and rings come from mmap and go back with munmap: from malloc, once one
 * was freed glibc raised its mmap threshold above their size and later ones stayed in its
 * arenas after free, so the peak RSS of back-to-back uploads crept towards the cap.
 */
static void *big_alloc(size_t n)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    return p == MAP_FAILED ? NULL : p;
}

static void big_free(void *p, size_t n)
{
    if (p != NULL)
        munmap(p, n);
}

void blob_http_resp_init(struct blob_http_resp *r)
{
    memset(r, 0, sizeof(*r));
    mg_buf_init(&r->body, BLOB_ERR_BODY_MAX);
    r->last_modified_ms = -1;
}

void blob_http_resp_release(struct blob_http_resp *r)
{
    mg_buf_release(&r->body);
}

static void header_value(const char *p, size_t n, size_t name_len, char *out, size_t outsz)
{
    p += name_len;
    n -= name_len;
    while (n > 0 && (*p == ' ' || *p == '\t')) {
        p++;
        n--;
    }
    while (n > 0 && (p[n - 1] == '\r' || p[n - 1] == '\n' || p[n - 1] == ' '))
        n--;
    if (n >= outsz)
        n = outsz - 1;
    memcpy(out, p, n);
    out[n] = '\0';
}

static size_t on_header(char *p, size_t size, size_t nitems, void *ud)
{
    struct blob_http_resp *r = ud;
    size_t n = size * nitems;
    char num[32];

    if (n >= 5 && strncmp(p, "HTTP/", 5) == 0) {
        /* a new response (after a redirect or 100): forget the previous one's headers */
        r->location[0] = r->www_auth[0] = r->etag[0] = r->digest[0] = '\0';
        r->length = 0;
    } else if (n > 9 && strncasecmp(p, "Location:", 9) == 0) {
        header_value(p, n, 9, r->location, sizeof(r->location));
    } else if (n > 17 && strncasecmp(p, "WWW-Authenticate:", 17) == 0) {
        header_value(p, n, 17, r->www_auth, sizeof(r->www_auth));
    } else if (n > 5 && strncasecmp(p, "ETag:", 5) == 0) {
        header_value(p, n, 5, r->etag, sizeof(r->etag));
    } else if (n > 22 && strncasecmp(p, "Docker-Content-Digest:", 22) == 0) {
        header_value(p, n, 22, r->digest, sizeof(r->digest));
    } else if (n > 15 && strncasecmp(p, "Content-Length:", 15) == 0) {
        header_value(p, n, 15, num, sizeof(num));
        r->length = strtoull(num, NULL, 10);
    } else if (n > 14 && strncasecmp(p, "Last-Modified:", 14) == 0) {
        char v[64];
        header_value(p, n, 14, v, sizeof(v));
        r->last_modified_ms = (int64_t)curl_getdate(v, NULL) * 1000;
    }
    return n;
}

static size_t on_body(char *p, size_t size, size_t nitems, void *ud)
{
    struct blob_http_resp *r = ud;
    size_t n = size * nitems;

    /* Past the cap the rest is dropped, not an error: only small bodies matter. */
    if (mg_buf_append(&r->body, p, n) != MG_OK) {
        /* keep what fits */
    }
    return n;
}

CURL *blob_http_easy(struct blob_http_resp *r)
{
    CURL *c = curl_easy_init();
    CURLcode cr = CURLE_OK;

    if (c == NULL)
        return NULL;
    cr |= curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    cr |= curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    cr |= curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, CONNECT_TIMEOUT_S);
    cr |= curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    cr |= curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, STALL_SECONDS);
    cr |= curl_easy_setopt(c, CURLOPT_USERAGENT, "modelgated");
    cr |= curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    cr |= curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
    cr |= curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    cr |= curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
    if (cr != CURLE_OK) {
        curl_easy_cleanup(c);
        return NULL;
    }
    return c;
}

enum mg_code blob_http_perform(CURL *c, struct blob_http_resp *r, const char *desc,
                               struct mg_error *err)
{
    char errbuf[CURL_ERROR_SIZE] = "";
    CURLcode cr;

    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
    cr = curl_easy_perform(c);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, NULL);
    r->status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
    if (cr != CURLE_OK)
        return mg_fail(err, MG_EUNAVAIL, NULL, "the blob backend (%s) is unreachable: %s", desc,
                       errbuf[0] ? errbuf : curl_easy_strerror(cr));
    return MG_OK;
}

void blob_xml_value(const char *xml, size_t len, const char *tag, char *out, size_t outsz)
{
    char open[96], close[96];
    const char *a, *b;
    size_t n;

    out[0] = '\0';
    if (xml == NULL || len == 0)
        return;
    snprintf(open, sizeof(open), "<%s>", tag);
    snprintf(close, sizeof(close), "</%s>", tag);
    a = memmem(xml, len, open, strlen(open));
    if (a == NULL)
        return;
    a += strlen(open);
    b = memmem(a, len - (size_t)(a - xml), close, strlen(close));
    if (b == NULL)
        return;
    n = (size_t)(b - a);
    if (n >= outsz)
        n = outsz - 1;
    memcpy(out, a, n);
    out[n] = '\0';
}

/* ---- parts ---------------------------------------------------------------- */

struct blob_parts {
    size_t part;
    uint8_t *buf[2];
    size_t len[2];
    unsigned cur; /* the buffer being filled */
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool busy; /* the sender holds buf[!cur] */
    bool stop;
    bool failed;
    unsigned index; /* parts handed over so far */
    unsigned busy_index;
    struct mg_error err;
    blob_part_send_fn send;
    void *arg;
};

static void *parts_main(void *arg)
{
    struct blob_parts *p = arg;

    pthread_mutex_lock(&p->lock);
    for (;;) {
        unsigned i;
        struct mg_error e;
        enum mg_code rc;

        while (!p->busy && !p->stop)
            pthread_cond_wait(&p->cond, &p->lock);
        if (!p->busy)
            break;
        i = !p->cur;
        pthread_mutex_unlock(&p->lock);
        rc = p->send(p->arg, p->buf[i], p->len[i], p->busy_index, &e);
        pthread_mutex_lock(&p->lock);
        if (rc != MG_OK && !p->failed) {
            p->failed = true;
            p->err = e;
        }
        p->busy = false;
        pthread_cond_broadcast(&p->cond);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

enum mg_code blob_parts_new(size_t part_bytes, blob_part_send_fn send, void *arg,
                            struct blob_parts **out, struct mg_error *err)
{
    struct blob_parts *p = calloc(1, sizeof(*p));

    if (p == NULL || (p->buf[0] = big_alloc(part_bytes)) == NULL) {
        free(p);
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
    p->part = part_bytes;
    p->send = send;
    p->arg = arg;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->cond, NULL);
    if (pthread_create(&p->thread, NULL, parts_main, p) != 0) {
        pthread_mutex_destroy(&p->lock);
        pthread_cond_destroy(&p->cond);
        big_free(p->buf[0], part_bytes);
        free(p);
        return mg_fail(err, MG_ENOMEM, NULL, "cannot start an upload thread");
    }
    *out = p;
    return MG_OK;
}

/* Wait until the sender is idle; its failure, if any, becomes ours. */
static enum mg_code parts_wait(struct blob_parts *p, struct mg_error *err)
{
    enum mg_code rc = MG_OK;

    pthread_mutex_lock(&p->lock);
    while (p->busy)
        pthread_cond_wait(&p->cond, &p->lock);
    if (p->failed) {
        *err = p->err;
        rc = p->err.code;
    }
    pthread_mutex_unlock(&p->lock);
    return rc;
}

enum mg_code blob_parts_write(struct blob_parts *p, const void *data, size_t n,
                              struct mg_error *err)
{
    const uint8_t *q = data;
    enum mg_code rc;

    while (n > 0) {
        size_t k = p->part - p->len[p->cur];
        if (k > n)
            k = n;
        memcpy(p->buf[p->cur] + p->len[p->cur], q, k);
        p->len[p->cur] += k;
        q += k;
        n -= k;
        if (p->len[p->cur] < p->part)
            continue;
        if ((rc = parts_wait(p, err)) != MG_OK)
            return rc;
        if (p->buf[!p->cur] == NULL && (p->buf[!p->cur] = big_alloc(p->part)) == NULL)
            return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        pthread_mutex_lock(&p->lock);
        p->busy = true;
        p->busy_index = p->index++;
        p->cur = !p->cur;
        p->len[p->cur] = 0;
        pthread_cond_broadcast(&p->cond);
        pthread_mutex_unlock(&p->lock);
    }
    return MG_OK;
}

enum mg_code blob_parts_finish(struct blob_parts *p, const uint8_t **tail, size_t *tail_len,
                               unsigned *sent, struct mg_error *err)
{
    enum mg_code rc = parts_wait(p, err);

    if (rc != MG_OK)
        return rc;
    *tail = p->buf[p->cur];
    *tail_len = p->len[p->cur];
    *sent = p->index;
    return MG_OK;
}

void blob_parts_free(struct blob_parts **pp)
{
    struct blob_parts *p = *pp;

    if (p == NULL)
        return;
    pthread_mutex_lock(&p->lock);
    p->stop = true;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->thread, NULL);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->cond);
    big_free(p->buf[0], p->part);
    big_free(p->buf[1], p->part);
    free(p);
    *pp = NULL;
}

/* ---- streamed downloads --------------------------------------------------- */

struct blob_stream {
    struct blob_reader base; /* stream_reader_ops */
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    CURL *c;
    struct curl_slist *headers;
    bool (*retry)(CURL *c, struct curl_slist **headers, void *arg);
    void *retry_arg;
    char desc[300];
    uint8_t *buf;
    size_t head, count; /* ring: bytes [head, head+count) mod STREAM_BUF */
    bool passing;       /* the reply is 200/206: its body is the blob's bytes */
    bool done, failed, cancel;
    struct mg_error err;
    void (*wake)(void *arg);
    void *wake_arg;
    struct blob_http_resp resp;
};

/* Call and clear the registered wake-up; lock held on entry, released for the call. */
static void stream_wake_locked(struct blob_stream *s)
{
    void (*w)(void *) = s->wake;
    void *a = s->wake_arg;

    s->wake = NULL;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    if (w)
        w(a);
    pthread_mutex_lock(&s->lock);
}

static size_t stream_write(char *p, size_t size, size_t nitems, void *ud)
{
    struct blob_stream *s = ud;
    size_t n = size * nitems, left = n;
    long status = 0;

    curl_easy_getinfo(s->c, CURLINFO_RESPONSE_CODE, &status);
    if (status != 200 && status != 206)
        return on_body(p, size, nitems, &s->resp);
    pthread_mutex_lock(&s->lock);
    s->passing = true;
    while (left > 0) {
        size_t tail, k;

        while (s->count == STREAM_BUF && !s->cancel)
            pthread_cond_wait(&s->cond, &s->lock);
        if (s->cancel) {
            pthread_mutex_unlock(&s->lock);
            return 0;
        }
        tail = (s->head + s->count) % STREAM_BUF;
        k = STREAM_BUF - s->count;
        if (k > STREAM_BUF - tail)
            k = STREAM_BUF - tail;
        if (k > left)
            k = left;
        memcpy(s->buf + tail, p, k);
        s->count += k;
        p += k;
        left -= k;
        if (s->wake == NULL || s->count >= STREAM_WAKE)
            stream_wake_locked(s);
    }
    pthread_mutex_unlock(&s->lock);
    return n;
}

static void *stream_main(void *arg)
{
    struct blob_stream *s = arg;
    struct mg_error e = {0};
    enum mg_code rc = MG_OK;
    int attempt;

    for (attempt = 0; attempt < 2; attempt++) {
        mg_buf_release(&s->resp.body);
        blob_http_resp_init(&s->resp);
        curl_easy_setopt(s->c, CURLOPT_HTTPHEADER, s->headers);
        rc = blob_http_perform(s->c, &s->resp, s->desc, &e);
        if (rc == MG_OK && s->resp.status == 401 && !s->passing && attempt == 0 && s->retry &&
            s->retry(s->c, &s->headers, s->retry_arg))
            continue;
        break;
    }
    if (rc == MG_OK && s->resp.status != 200 && s->resp.status != 206)
        rc = mg_fail(&e, s->resp.status == 401 || s->resp.status == 403 ? MG_EUNAVAIL : MG_EIO,
                     NULL, "the blob backend (%s) answered %ld to a download: %.200s", s->desc,
                     s->resp.status, s->resp.body.data ? s->resp.body.data : "");
    pthread_mutex_lock(&s->lock);
    if (rc != MG_OK && !s->cancel) {
        s->failed = true;
        s->err = e;
    }
    s->done = true;
    stream_wake_locked(s);
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

static const struct blob_reader_ops stream_reader_ops;

enum mg_code blob_stream_start(CURL *c, struct curl_slist *headers, const char *desc,
                               bool (*retry)(CURL *c, struct curl_slist **headers, void *arg),
                               void *arg, struct blob_reader **out, struct mg_error *err)
{
    struct blob_stream *s = calloc(1, sizeof(*s));

    if (s == NULL || (s->buf = big_alloc(STREAM_BUF)) == NULL) {
        free(s);
        curl_slist_free_all(headers);
        curl_easy_cleanup(c);
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
    s->c = c;
    s->headers = headers;
    s->retry = retry;
    s->retry_arg = arg;
    snprintf(s->desc, sizeof(s->desc), "%s", desc);
    blob_http_resp_init(&s->resp);
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    curl_easy_setopt(c, CURLOPT_BUFFERSIZE, (long)STREAM_WAKE);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, stream_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, s);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &s->resp);
    if (pthread_create(&s->thread, NULL, stream_main, s) != 0) {
        pthread_mutex_destroy(&s->lock);
        pthread_cond_destroy(&s->cond);
        blob_http_resp_release(&s->resp);
        curl_slist_free_all(headers);
        curl_easy_cleanup(c);
        big_free(s->buf, STREAM_BUF);
        free(s);
        return mg_fail(err, MG_ENOMEM, NULL, "cannot start a download thread");
    }
    s->base.ops = &stream_reader_ops;
    *out = &s->base;
    return MG_OK;
}

static enum mg_code stream_read(struct blob_reader *r, void *buf, size_t n, size_t *got,
                                bool *would_block, void (*wake)(void *arg), void *arg,
                                struct mg_error *err)
{
    struct blob_stream *s = (struct blob_stream *)r;
    enum mg_code rc = MG_OK;
    uint8_t *out = buf;

    pthread_mutex_lock(&s->lock);
    while (s->count == 0 && !s->done && wake == NULL)
        pthread_cond_wait(&s->cond, &s->lock);
    if (s->count > 0) {
        size_t k = s->count < n ? s->count : n, first = STREAM_BUF - s->head;
        if (first > k)
            first = k;
        memcpy(out, s->buf + s->head, first);
        memcpy(out + first, s->buf, k - first);
        s->head = (s->head + k) % STREAM_BUF;
        s->count -= k;
        *got = k;
        pthread_cond_broadcast(&s->cond);
    } else if (s->failed) {
        *err = s->err;
        rc = s->err.code;
    } else if (!s->done) {
        s->wake = wake;
        s->wake_arg = arg;
        *would_block = true;
    }
    pthread_mutex_unlock(&s->lock);
    return rc;
}

static void stream_close(struct blob_reader *r)
{
    struct blob_stream *s = (struct blob_stream *)r;

    pthread_mutex_lock(&s->lock);
    s->cancel = true;
    s->wake = NULL;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->thread, NULL);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->cond);
    blob_http_resp_release(&s->resp);
    curl_slist_free_all(s->headers);
    curl_easy_cleanup(s->c);
    big_free(s->buf, STREAM_BUF);
    free(s);
}

/* A stream hands out no descriptor: its bytes come through stream_read. */
static int stream_take_fd(struct blob_reader *r, uint64_t *offset)
{
    (void)r;
    (void)offset;
    return -1;
}

static const struct blob_reader_ops stream_reader_ops = {
    .read = stream_read,
    .take_fd = stream_take_fd,
    .close = stream_close,
};

/* ---- empty reader (a range of no bytes: nothing to fetch) ------------------ */

static enum mg_code empty_read(struct blob_reader *r, void *buf, size_t n, size_t *got,
                               bool *would_block, void (*wake)(void *arg), void *arg,
                               struct mg_error *err)
{
    (void)r;
    (void)buf;
    (void)n;
    (void)got;
    (void)would_block;
    (void)wake;
    (void)arg;
    (void)err;
    return MG_OK; /* *got stays 0: the end */
}

static void empty_close(struct blob_reader *r)
{
    free(r);
}

static const struct blob_reader_ops empty_reader_ops = {
    .read = empty_read,
    .take_fd = stream_take_fd,
    .close = empty_close,
};

enum mg_code blob_empty_reader(struct blob_reader **out, struct mg_error *err)
{
    struct blob_reader *r = calloc(1, sizeof(*r));

    if (r == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    r->ops = &empty_reader_ops;
    *out = r;
    return MG_OK;
}

/* ---- streamed uploads ----------------------------------------------------- */

#define PIPE_BUF_BYTES (4u << 20)
/* The sender takes the bytes once this much is buffered (or the body ended, or PIPE_LINGER_MS
 * after the first of them came): waking it for every 32 KiB the HTTP thread reads cost a
 * context switch and a send each, more than the copying. */
#define PIPE_WAKE (256u << 10)
#define PIPE_LINGER_MS 10

struct blob_pipe {
    pthread_t thread;
    pthread_mutex_t lock;
    struct mg_wait wake; /* bytes came or went, the body ended, the request ended */
    CURL *c;
    struct curl_slist *headers;
    char desc[300];
    uint8_t *buf;
    size_t head, count;
    size_t want;  /* what the waiting sender waits for; 0 when it is not waiting */
    bool writing; /* the writer waits for room */
    bool eof, cancel, done;
    enum mg_code rc;
    struct mg_error err;
    struct blob_http_resp resp;
};

static size_t pipe_read(char *out, size_t size, size_t nitems, void *ud)
{
    struct blob_pipe *p = ud;
    size_t n = size * nitems, k, first, want = n < PIPE_WAKE ? n : PIPE_WAKE;
    int64_t until = 0; /* mg_mono_ms(): the sender lingers until then for more bytes */

    pthread_mutex_lock(&p->lock);
    while (p->count < want && !p->eof && !p->cancel) {
        p->want = want;
        if (p->count == 0) {
            pthread_cond_wait(&p->wake.cond, &p->lock); /* the first byte wakes it */
            continue;
        }
        if (until == 0)
            until = mg_mono_ms() + PIPE_LINGER_MS;
        if (!mg_wait_until(&p->wake, &p->lock, until))
            break;
    }
    p->want = 0;
    if (p->cancel) {
        pthread_mutex_unlock(&p->lock);
        return CURL_READFUNC_ABORT;
    }
    k = p->count < n ? p->count : n;
    first = PIPE_BUF_BYTES - p->head;
    if (first > k)
        first = k;
    memcpy(out, p->buf + p->head, first);
    memcpy(out + first, p->buf, k - first);
    p->head = (p->head + k) % PIPE_BUF_BYTES;
    p->count -= k;
    if (p->writing)
        pthread_cond_broadcast(&p->wake.cond);
    pthread_mutex_unlock(&p->lock);
    return k;
}

static void *pipe_main(void *arg)
{
    struct blob_pipe *p = arg;
    struct mg_error e = {0};
    enum mg_code rc = blob_http_perform(p->c, &p->resp, p->desc, &e);

    pthread_mutex_lock(&p->lock);
    p->rc = rc;
    p->err = e;
    p->done = true;
    pthread_cond_broadcast(&p->wake.cond);
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

enum mg_code blob_pipe_start(CURL *c, struct curl_slist *headers, const char *desc,
                             struct blob_pipe **out, struct mg_error *err)
{
    struct blob_pipe *p = calloc(1, sizeof(*p));

    if (p == NULL || (p->buf = big_alloc(PIPE_BUF_BYTES)) == NULL) {
        free(p);
        curl_slist_free_all(headers);
        curl_easy_cleanup(c);
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
    p->c = c;
    p->headers = headers;
    snprintf(p->desc, sizeof(p->desc), "%s", desc);
    blob_http_resp_init(&p->resp);
    pthread_mutex_init(&p->lock, NULL);
    mg_wait_init(&p->wake);
    curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(c, CURLOPT_UPLOAD_BUFFERSIZE, 512L << 10); /* 64 KiB by default */
    curl_easy_setopt(c, CURLOPT_READFUNCTION, pipe_read);
    curl_easy_setopt(c, CURLOPT_READDATA, p);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &p->resp);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &p->resp);
    if (pthread_create(&p->thread, NULL, pipe_main, p) != 0) {
        pthread_mutex_destroy(&p->lock);
        mg_wait_release(&p->wake);
        blob_http_resp_release(&p->resp);
        curl_slist_free_all(headers);
        curl_easy_cleanup(c);
        big_free(p->buf, PIPE_BUF_BYTES);
        free(p);
        return mg_fail(err, MG_ENOMEM, NULL, "cannot start an upload thread");
    }
    *out = p;
    return MG_OK;
}

enum mg_code blob_pipe_write(struct blob_pipe *p, const void *data, size_t n, struct mg_error *err)
{
    const uint8_t *q = data;

    pthread_mutex_lock(&p->lock);
    while (n > 0) {
        size_t tail, k;

        while (p->count == PIPE_BUF_BYTES && !p->done) {
            p->writing = true;
            pthread_cond_wait(&p->wake.cond, &p->lock);
        }
        p->writing = false;
        if (p->done) {
            /* the request ended before the body did: its reply says why */
            enum mg_code rc = p->rc != MG_OK ? p->rc : MG_EUNAVAIL;
            if (p->rc != MG_OK)
                *err = p->err;
            else
                mg_fail(err, rc, NULL, "the blob backend (%s) ended the upload early (%ld)",
                        p->desc, p->resp.status);
            pthread_mutex_unlock(&p->lock);
            return rc;
        }
        tail = (p->head + p->count) % PIPE_BUF_BYTES;
        k = PIPE_BUF_BYTES - p->count;
        if (k > PIPE_BUF_BYTES - tail)
            k = PIPE_BUF_BYTES - tail;
        if (k > n)
            k = n;
        memcpy(p->buf + tail, q, k);
        /* The sender is woken by the first byte (it then lingers for more) and by enough. */
        if (p->want > 0 && (p->count == 0 || p->count + k >= p->want))
            pthread_cond_broadcast(&p->wake.cond);
        p->count += k;
        q += k;
        n -= k;
    }
    pthread_mutex_unlock(&p->lock);
    return MG_OK;
}

enum mg_code blob_pipe_finish(struct blob_pipe *p, struct blob_http_resp **resp,
                              struct mg_error *err)
{
    enum mg_code rc;

    pthread_mutex_lock(&p->lock);
    p->eof = true;
    pthread_cond_broadcast(&p->wake.cond);
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->thread, NULL);
    p->thread = 0;
    rc = p->rc;
    if (rc != MG_OK)
        *err = p->err;
    *resp = &p->resp;
    return rc;
}

void blob_pipe_free(struct blob_pipe **pp)
{
    struct blob_pipe *p = *pp;

    if (p == NULL)
        return;
    if (p->thread) {
        pthread_mutex_lock(&p->lock);
        p->cancel = true;
        pthread_cond_broadcast(&p->wake.cond);
        pthread_mutex_unlock(&p->lock);
        pthread_join(p->thread, NULL);
    }
    pthread_mutex_destroy(&p->lock);
    mg_wait_release(&p->wake);
    blob_http_resp_release(&p->resp);
    curl_slist_free_all(p->headers);
    curl_easy_cleanup(p->c);
    big_free(p->buf, PIPE_BUF_BYTES);
    free(p);
    *pp = NULL;
}
