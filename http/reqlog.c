/*
 * reqlog.c - the request log's lines, written in batches (reqlog.h).
 *
 * Two buffers: lines go into `fill`; a flush swaps it with `spare` under `lock` and writes
 * the full one after letting go of `lock`, so adding a line never waits for a write. `out`
 * lets one flush run at a time: batches reach the descriptor in the order they filled, and
 * `spare` is never swapped back while it is being written.
 */
#include "reqlog.h"

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../os/file.h"
#include "../os/wait.h"

struct srv_reqlog {
    int fd;
    pthread_mutex_t lock; /* fill, len, stop */
    pthread_mutex_t out;  /* held by the one flush that runs */
    struct mg_wait wake;  /* the writer: a first line is waiting, or stop */
    char *fill, *spare;   /* SRV_REQLOG_CAP bytes each */
    size_t len;           /* bytes waiting in fill */
    bool stop;
    pthread_t thread;
};

/* n bytes of whole lines, in writes of at most PIPE_BUF bytes where the lines allow (a longer
 * line goes in one write): on a pipe such a write is never split by another thread's message,
 * as a line written alone never was. */
static void write_lines(int fd, const char *p, size_t n)
{
    while (n > 0) {
        size_t k = n;

        if (k > PIPE_BUF) {
            k = PIPE_BUF;
            while (k > 0 && p[k - 1] != '\n')
                k--;
            if (k == 0) { /* one line past PIPE_BUF: to its end */
                const char *nl = memchr(p + PIPE_BUF, '\n', n - PIPE_BUF);

                k = nl ? (size_t)(nl - p) + 1 : n;
            }
        }
        (void)mg_write_all(fd, p, k, "the request log", NULL); /* as fprintf, drops on failure */
        p += k;
        n -= k;
    }
}

/* Write what is waiting, then extra (extra_n bytes; none when 0), in one flush's turn. */
static void flush_with(struct srv_reqlog *l, const char *extra, size_t extra_n)
{
    char *full;
    size_t n;

    pthread_mutex_lock(&l->out);
    pthread_mutex_lock(&l->lock);
    full = l->fill;
    n = l->len;
    l->fill = l->spare;
    l->spare = full;
    l->len = 0;
    pthread_mutex_unlock(&l->lock);
    write_lines(l->fd, full, n);
    if (extra_n > 0)
        write_lines(l->fd, extra, extra_n);
    pthread_mutex_unlock(&l->out);
}

static void flush(struct srv_reqlog *l)
{
    flush_with(l, NULL, 0);
}

void srv_reqlog_line(struct srv_reqlog *l, const char *line, size_t n)
{
    bool first;

    if (l == NULL) {
        write_lines(2, line, n);
        return;
    }
    if (n > SRV_REQLOG_CAP) { /* after what came before it */
        flush_with(l, line, n);
        return;
    }
    pthread_mutex_lock(&l->lock);
    while (l->len + n > SRV_REQLOG_CAP) {
        pthread_mutex_unlock(&l->lock);
        flush(l);
        pthread_mutex_lock(&l->lock);
    }
    first = l->len == 0;
    memcpy(l->fill + l->len, line, n);
    l->len += n;
    if (first)
        pthread_cond_signal(&l->wake.cond);
    pthread_mutex_unlock(&l->lock);
}

/* Waits for a first line, gives the batch SRV_REQLOG_FLUSH_MS to grow, writes it. */
static void *writer_main(void *arg)
{
    struct srv_reqlog *l = arg;

    pthread_mutex_lock(&l->lock);
    while (!l->stop) {
        if (l->len == 0) {
            pthread_cond_wait(&l->wake.cond, &l->lock);
            continue;
        }
        (void)mg_wait_sleep(&l->wake, &l->lock, SRV_REQLOG_FLUSH_MS, &l->stop);
        pthread_mutex_unlock(&l->lock);
        flush(l);
        pthread_mutex_lock(&l->lock);
    }
    pthread_mutex_unlock(&l->lock);
    return NULL;
}

/* What srv_reqlog_start made, its thread aside (joined, or never started). */
static void reqlog_free(struct srv_reqlog *l)
{
    pthread_mutex_destroy(&l->lock);
    pthread_mutex_destroy(&l->out);
    mg_wait_release(&l->wake);
    free(l->fill);
    free(l->spare);
    free(l);
}

enum mg_code srv_reqlog_start(struct srv_reqlog **out, int fd, struct mg_error *err)
{
    struct srv_reqlog *l = calloc(1, sizeof(*l));

    *out = NULL;
    if (l == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    l->fd = fd;
    pthread_mutex_init(&l->lock, NULL);
    pthread_mutex_init(&l->out, NULL);
    mg_wait_init(&l->wake);
    if ((l->fill = malloc(SRV_REQLOG_CAP)) == NULL || (l->spare = malloc(SRV_REQLOG_CAP)) == NULL) {
        reqlog_free(l);
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
    if (pthread_create(&l->thread, NULL, writer_main, l) != 0) {
        reqlog_free(l);
        return mg_fail(err, MG_EIO, NULL, "cannot start the request log's thread");
    }
    *out = l;
    return MG_OK;
}

void srv_reqlog_stop(struct srv_reqlog **lp)
{
    struct srv_reqlog *l = *lp;

    if (l == NULL)
        return;
    pthread_mutex_lock(&l->lock);
    l->stop = true;
    pthread_cond_signal(&l->wake.cond);
    pthread_mutex_unlock(&l->lock);
    pthread_join(l->thread, NULL);
    flush(l);
    reqlog_free(l);
    *lp = NULL;
}
