/*
 * test_reqlog.c - the request log's batches (http/reqlog.c): every line reaches the
 * descriptor whole, once, in the order it was added, while the log runs and when it stops.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "http/reqlog.h"

/* A pipe whose read end a thread drains into memory until end of file. */
struct sink {
    size_t chunk; /* bytes a read takes: small, so a writer often finds the pipe full */
    int fd[2];
    pthread_t thread;
    pthread_mutex_t lock;
    char *got;
    size_t len, cap;
};

static void *drain(void *arg)
{
    struct sink *k = arg;
    char buf[8192];
    ssize_t n;

    while ((n = read(k->fd[0], buf, k->chunk ? k->chunk : sizeof(buf))) != 0) {
        if (n < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        pthread_mutex_lock(&k->lock);
        if (k->len + (size_t)n > k->cap) {
            k->cap = (k->len + (size_t)n) * 2;
            k->got = realloc(k->got, k->cap);
            assert_non_null(k->got);
        }
        memcpy(k->got + k->len, buf, (size_t)n);
        k->len += (size_t)n;
        pthread_mutex_unlock(&k->lock);
    }
    return NULL;
}

static struct sink *sink_open(void)
{
    struct sink *k = calloc(1, sizeof(*k));

    assert_non_null(k);
    assert_int_equal(pipe2(k->fd, O_CLOEXEC), 0);
    pthread_mutex_init(&k->lock, NULL);
    assert_int_equal(pthread_create(&k->thread, NULL, drain, k), 0);
    return k;
}

/* Stop the log (its last batch written), close the pipe, and return everything read. */
static char *sink_close(struct sink *k, struct srv_reqlog **l, size_t *len)
{
    char *got;

    srv_reqlog_stop(l);
    assert_null(*l);
    close(k->fd[1]);
    pthread_join(k->thread, NULL);
    close(k->fd[0]);
    pthread_mutex_destroy(&k->lock);
    got = k->got ? k->got : strdup("");
    *len = k->len;
    free(k);
    return got;
}

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void add(struct srv_reqlog *l, const char *fmt, ...)
{
    char line[256];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    assert_true(n > 0 && (size_t)n < sizeof(line));
    srv_reqlog_line(l, line, (size_t)n);
}

/* A line reaches the descriptor while the log runs: the writer flushes a batch on its own,
 * with no more lines after it and no stop. */
static void test_a_line_arrives_while_running(void **state)
{
    struct sink *k = sink_open();
    struct srv_reqlog *l;
    int64_t deadline = now_ms() + 10000;
    bool seen = false;
    size_t len;
    char *got;

    (void)state;
    assert_int_equal(srv_reqlog_start(&l, k->fd[1], NULL), 0);
    add(l, "GET /first 200\n");
    while (!seen && now_ms() < deadline) {
        struct timespec ts = {0, 5 * 1000 * 1000};

        pthread_mutex_lock(&k->lock);
        seen = k->len == strlen("GET /first 200\n");
        pthread_mutex_unlock(&k->lock);
        if (!seen)
            nanosleep(&ts, NULL);
    }
    assert_true(seen);
    got = sink_close(k, &l, &len);
    assert_int_equal(len, strlen("GET /first 200\n"));
    assert_memory_equal(got, "GET /first 200\n", len);
    free(got);
}

/* Lines far past one batch's capacity (each full batch written by the thread that finds it
 * full) come out whole, once and in order; what is left is written at stop. */
static void test_order_across_full_batches(void **state)
{
    struct sink *k = sink_open();
    struct srv_reqlog *l;
    size_t len, at = 0;
    char *got, want[64];
    const int lines = 20000; /* ~580 KiB: 18 batches */

    (void)state;
    assert_int_equal(srv_reqlog_start(&l, k->fd[1], NULL), 0);
    for (int i = 0; i < lines; i++)
        add(l, "GET /api/v1/models/m%06d 200\n", i);
    got = sink_close(k, &l, &len);
    for (int i = 0; i < lines; i++) {
        int n = snprintf(want, sizeof(want), "GET /api/v1/models/m%06d 200\n", i);

        assert_true(at + (size_t)n <= len);
        if (memcmp(got + at, want, (size_t)n) != 0)
            fail_msg("line %d is '%.*s', want '%s'", i, n, got + at, want);
        at += (size_t)n;
    }
    assert_int_equal(at, len);
    free(got);
}

/* A line longer than a batch goes out whole, after the lines added before it. */
static void test_a_line_longer_than_a_batch(void **state)
{
    struct sink *k = sink_open();
    struct srv_reqlog *l;
    size_t big = SRV_REQLOG_CAP + 100, len;
    char *line = malloc(big), *got;

    (void)state;
    assert_non_null(line);
    memset(line, 'x', big - 1);
    line[big - 1] = '\n';
    assert_int_equal(srv_reqlog_start(&l, k->fd[1], NULL), 0);
    add(l, "before\n");
    srv_reqlog_line(l, line, big);
    add(l, "after\n");
    got = sink_close(k, &l, &len);
    assert_int_equal(len, 7 + big + 6);
    assert_memory_equal(got, "before\n", 7);
    assert_memory_equal(got + 7, line, big);
    assert_memory_equal(got + 7 + big, "after\n", 6);
    free(got);
    free(line);
}

#define THREADS 4
#define PER_THREAD 5000

struct adder {
    struct srv_reqlog *l;
    int id;
};

static void *adder_main(void *arg)
{
    struct adder *a = arg;

    for (int i = 0; i < PER_THREAD; i++)
        add(a->l, "thread %d line %05d of the request log\n", a->id, i);
    return NULL;
}

/* Lines added by several threads at once: none torn or lost, each thread's in its order. */
static void test_threads_at_once(void **state)
{
    struct sink *k = sink_open();
    struct srv_reqlog *l;
    pthread_t t[THREADS];
    struct adder a[THREADS];
    int next[THREADS] = {0};
    size_t len;
    char *got, *p, *end;

    (void)state;
    assert_int_equal(srv_reqlog_start(&l, k->fd[1], NULL), 0);
    for (int i = 0; i < THREADS; i++) {
        a[i] = (struct adder){l, i};
        assert_int_equal(pthread_create(&t[i], NULL, adder_main, &a[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    got = sink_close(k, &l, &len);
    for (p = got; p < got + len; p = end + 1) {
        int id, n, used = 0;

        end = memchr(p, '\n', (size_t)(got + len - p));
        assert_non_null(end);
        if (sscanf(p, "thread %d line %d of the request log%n", &id, &n, &used) != 2 ||
            p + used != end || id < 0 || id >= THREADS)
            fail_msg("a torn line: '%.*s'", (int)(end - p), p);
        if (n != next[id])
            fail_msg("thread %d: line %d came where %d was due", id, n, next[id]);
        next[id]++;
    }
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(next[i], PER_THREAD);
    free(got);
}

struct other {
    int fd;
};

static void *other_main(void *arg)
{
    struct other *o = arg;
    char line[64];

    for (int i = 0; i < PER_THREAD * 2; i++) {
        int n = snprintf(line, sizeof(line), "modelgated: another message %05d\n", i);

        assert_int_equal(write(o->fd, line, (size_t)n), n);
    }
    return NULL;
}

/* Messages written to the same pipe by another thread, as fprintf(stderr) writes them, while
 * batches go out through a pipe that is often full: no line of either is split by the other
 * (a batch goes in writes of at most PIPE_BUF bytes, of whole lines). */
static void test_other_writers_split_no_line(void **state)
{
    struct sink *k = sink_open();
    struct srv_reqlog *l;
    struct adder a = {0};
    struct other o;
    pthread_t ta, to;
    int ours = 0, theirs = 0;
    size_t len;
    char *got, *p, *end;

    (void)state;
    k->chunk = 100;
    o.fd = k->fd[1];
    assert_int_equal(srv_reqlog_start(&l, k->fd[1], NULL), 0);
    a.l = l;
    assert_int_equal(pthread_create(&ta, NULL, adder_main, &a), 0);
    assert_int_equal(pthread_create(&to, NULL, other_main, &o), 0);
    pthread_join(ta, NULL);
    pthread_join(to, NULL);
    got = sink_close(k, &l, &len);
    for (p = got; p < got + len; p = end + 1) {
        int id, n, used = 0;

        end = memchr(p, '\n', (size_t)(got + len - p));
        assert_non_null(end);
        if (sscanf(p, "thread %d line %d of the request log%n", &id, &n, &used) == 2 &&
            p + used == end && n == ours) {
            ours++;
            continue;
        }
        used = 0;
        if (sscanf(p, "modelgated: another message %d%n", &n, &used) == 1 && p + used == end &&
            n == theirs) {
            theirs++;
            continue;
        }
        fail_msg("a split line: '%.*s'", (int)(end - p), p);
    }
    assert_int_equal(ours, PER_THREAD);
    assert_int_equal(theirs, PER_THREAD * 2);
    free(got);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_line_arrives_while_running),
        cmocka_unit_test(test_order_across_full_batches),
        cmocka_unit_test(test_a_line_longer_than_a_batch),
        cmocka_unit_test(test_threads_at_once),
        cmocka_unit_test(test_other_writers_split_no_line),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
