/*
 * test_ops_slowloris.c - milestone M8, faults: slow clients cannot hold the
 * server. With --timeout 2, twenty connections trickle their request headers
 * one byte a second (slowloris) and five send complete headers of a blob
 * upload, then trickle the body one byte a second. Meanwhile normal clients
 * keep being answered quickly (each request under a second), and every slow
 * connection is closed by the server once the per-request deadline passes
 * (EOF or a reset within about timeout + 2 s of its start), whatever bytes
 * keep trickling in. An idle connection (nothing sent at all) is the control:
 * it goes away after the idle timeout. The slow uploads' temp files are gone
 * afterwards.
 *
 * Sleeping to trickle bytes is the point here; nothing waits by sleeping.
 */
#include "harness.h"
#include "sys.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <curl/curl.h>

#define TIMEOUT_S 2
#define N_HEAD 20
#define N_BODY 5
#define N_IDLE 1
#define N_SLOW (N_HEAD + N_BODY + N_IDLE)

enum slow_kind { SLOW_HEAD, SLOW_BODY, SLOW_IDLE };

struct slow {
    int fd;
    enum slow_kind kind;
    int64_t opened_ms;
    int64_t closed_ms; /* 0 while open */
    const char *how;   /* "EOF", "reset", "send failed" */
    size_t trickled;   /* bytes sent one at a time */
    size_t answered;   /* bytes the server sent back before closing */
};

struct trickler {
    pthread_t thread;
    struct slow conns[N_SLOW];
    volatile bool stop;
    pthread_mutex_t lock;
};

static struct mg_server *srv;

static const char *kind_name(enum slow_kind k)
{
    return k == SLOW_HEAD ? "header-trickling" : k == SLOW_BODY ? "body-trickling" : "idle";
}

static void send_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            fail_msg("send to the server: %s", strerror(errno));
        p += w;
        n -= (size_t)w;
    }
}

static void mark_closed(struct trickler *t, struct slow *c, const char *how)
{
    pthread_mutex_lock(&t->lock);
    if (c->closed_ms == 0) {
        c->closed_ms = it_now_ms();
        c->how = how;
    }
    pthread_mutex_unlock(&t->lock);
}

/* One byte a second on each open connection (but the idle ones); notice
 * closes at once through poll. */
static void *trickle_main(void *arg)
{
    struct trickler *t = arg;
    int64_t next_tick = it_now_ms() + 1000;

    while (!t->stop) {
        struct pollfd pfd[N_SLOW];
        size_t idx[N_SLOW], n = 0;
        int64_t now = it_now_ms();
        int wait = next_tick > now ? (int)(next_tick - now) : 0;

        for (size_t i = 0; i < N_SLOW; i++) {
            if (t->conns[i].closed_ms == 0) {
                pfd[n].fd = t->conns[i].fd;
                pfd[n].events = POLLIN;
                pfd[n].revents = 0;
                idx[n++] = i;
            }
        }
        if (n == 0)
            break;
        if (wait > 100)
            wait = 100; /* look at t->stop now and then */
        if (poll(pfd, n, wait) > 0) {
            for (size_t k = 0; k < n; k++) {
                struct slow *c = &t->conns[idx[k]];
                char buf[512];
                ssize_t r;

                if (pfd[k].revents == 0)
                    continue;
                r = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
                if (r == 0)
                    mark_closed(t, c, "EOF");
                else if (r < 0 && errno != EAGAIN && errno != EINTR)
                    mark_closed(t, c, errno == ECONNRESET ? "reset" : "recv error");
                else if (r > 0)
                    c->answered += (size_t)r;
            }
        }
        if (it_now_ms() >= next_tick) {
            next_tick += 1000;
            for (size_t i = 0; i < N_SLOW; i++) {
                struct slow *c = &t->conns[i];

                if (c->closed_ms != 0 || c->kind == SLOW_IDLE)
                    continue;
                if (send(c->fd, "a", 1, MSG_NOSIGNAL | MSG_DONTWAIT) != 1) {
                    if (errno == EPIPE || errno == ECONNRESET)
                        mark_closed(t, c, "send failed");
                } else {
                    c->trickled++;
                }
            }
        }
    }
    return NULL;
}

static int setup(void **state)
{
    srv = it_server_start((const char *const[]){"--timeout", "2", NULL});
    *state = srv;
    return 0;
}

static int teardown(void **state)
{
    if (srv != NULL) {
        it_server_stop(srv);
        it_server_free(&srv);
    }
    *state = NULL;
    return 0;
}

static void open_slow(struct slow *c, enum slow_kind kind)
{
    char head[1024];

    memset(c, 0, sizeof(*c));
    c->kind = kind;
    c->fd = it_connect(srv->port);
    if (c->fd < 0)
        fail_msg("cannot connect to the server: %s", strerror(errno));
    c->opened_ms = it_now_ms();
    if (kind == SLOW_HEAD) {
        /* A request line and the start of a header that never ends. */
        it_fmt(head, sizeof(head),
               "GET /api/v1/models HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nX-Slow: ", srv->port);
        send_all(c->fd, head, strlen(head));
    } else if (kind == SLOW_BODY) {
        /* Complete, authorised headers of an upload whose body never ends. */
        it_fmt(head, sizeof(head),
               "POST /api/v1/blobs HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
               "Authorization: Bearer %s\r\nContent-Type: application/octet-stream\r\n"
               "Content-Length: 1000000\r\n\r\n",
               srv->port, srv->admin_token);
        send_all(c->fd, head, strlen(head));
    }
}

static void test_slow_clients_are_cut_off(void **state)
{
    struct mg_server *s = *state;
    struct trickler *t = calloc(1, sizeof(*t));
    /* The server must close a slow connection within timeout + 2 s of its
     * start; a sanitizer build gets two seconds more. */
    const int64_t allowed_ms = (TIMEOUT_S + 2) * 1000 + (it_sanitized() ? 2000 : 0);
    const int64_t fast_ms = it_sanitized() ? 3000 : 1000;
    int64_t start, watch_until, worst = 0;
    size_t normal = 0, open_after = 0;
    char worst_what[64] = "";
    bool failed = false;

    assert_non_null(t);
    pthread_mutex_init(&t->lock, NULL);
    for (size_t i = 0; i < N_SLOW; i++)
        open_slow(&t->conns[i], i < N_HEAD            ? SLOW_HEAD
                                : i < N_HEAD + N_BODY ? SLOW_BODY
                                                      : SLOW_IDLE);
    start = it_now_ms();
    if (pthread_create(&t->thread, NULL, trickle_main, t) != 0)
        fail_msg("cannot start the trickling thread");

    /* Normal clients, all along: public, authenticated and writing requests
     * on fresh connections, each timed. Watch for a while past the deadline
     * so a server that never cuts them off is seen to keep them. */
    watch_until = start + allowed_ms + 3000;
    while (it_now_ms() < watch_until) {
        static const char *const what[] = {"GET /healthz", "GET /api/v1/models",
                                           "POST /api/v1/blobs"};
        size_t k = normal % 3;
        int64_t t0 = it_now_ms(), took;
        struct it_resp *r;
        char body[64];

        /* A fresh connection each time: the server must accept new ones too. */
        curl_easy_cleanup(s->curl);
        s->curl = curl_easy_init();
        assert_non_null(s->curl);
        if (k == 0) {
            r = it_get(s, "/healthz", NULL);
            it_expect_status(s, r, 200);
        } else if (k == 1) {
            r = it_get(s, "/api/v1/models", s->admin_token);
            it_expect_status(s, r, 200);
        } else {
            snprintf(body, sizeof(body), "normal client upload %zu", normal);
            r = it_request(s, "POST", "/api/v1/blobs", s->admin_token, "application/octet-stream",
                           body, strlen(body));
            it_expect_status(s, r, 201);
        }
        took = it_now_ms() - t0;
        if (took > worst) {
            worst = took;
            snprintf(worst_what, sizeof(worst_what), "%s", what[k]);
        }
        it_resp_free(s, &r);
        normal++;
        it_pause_ms(50);
        /* Done early once every slow connection is gone. */
        pthread_mutex_lock(&t->lock);
        open_after = 0;
        for (size_t i = 0; i < N_SLOW; i++)
            open_after += t->conns[i].closed_ms == 0;
        pthread_mutex_unlock(&t->lock);
        if (open_after == 0 && it_now_ms() > start + allowed_ms)
            break;
    }
    t->stop = true;
    pthread_join(t->thread, NULL);

    print_message("%zu normal requests while %d connections trickled; slowest %lld ms (%s)\n",
                  normal, N_SLOW, (long long)worst, worst_what);
    if (worst > fast_ms) {
        print_error("a normal request took %lld ms (%s) while slow clients trickled; want < %lld "
                    "ms\n",
                    (long long)worst, worst_what, (long long)fast_ms);
        failed = true;
    }
    if (normal < 10) {
        print_error("only %zu normal requests were answered in %lld ms\n", normal,
                    (long long)(it_now_ms() - start));
        failed = true;
    }
    for (int kind = SLOW_HEAD; kind <= SLOW_IDLE; kind++) {
        size_t n = 0, late = 0, open = 0;
        int64_t longest = 0;
        size_t trickled = 0;

        for (size_t i = 0; i < N_SLOW; i++) {
            const struct slow *c = &t->conns[i];

            if ((int)c->kind != kind)
                continue;
            n++;
            trickled = c->trickled > trickled ? c->trickled : trickled;
            if (c->closed_ms == 0) {
                open++;
                continue;
            }
            if (c->closed_ms - c->opened_ms > longest)
                longest = c->closed_ms - c->opened_ms;
            if (c->closed_ms - c->opened_ms > allowed_ms)
                late++;
        }
        print_message("%zu %s connections: %zu closed (longest after %lld ms), %zu still open "
                      "after %lld ms having trickled up to %zu bytes each\n",
                      n, kind_name((enum slow_kind)kind), n - open, (long long)longest, open,
                      (long long)(it_now_ms() - start), trickled);
        if (open > 0 || late > 0) {
            print_error("%zu of %zu %s connections were still open after %lld ms and %zu were "
                        "closed later than %lld ms after they started, with --timeout %d: the "
                        "server must cut a request off at its deadline however slowly its bytes "
                        "keep coming\n",
                        open, n, kind_name((enum slow_kind)kind), (long long)(it_now_ms() - start),
                        late, (long long)allowed_ms, TIMEOUT_S);
            failed = true;
        }
    }
    for (size_t i = 0; i < N_SLOW; i++)
        close(t->conns[i].fd);
    pthread_mutex_destroy(&t->lock);
    free(t);

    /* The slow uploads' temp files go with their connections. */
    {
        int64_t deadline = it_deadline(5000);

        while (it_data_dir_count(s, "blobs/tmp") != 0) {
            if (it_now_ms() > deadline) {
                print_error("%zu upload temp files are left in blobs/tmp after the slow uploads "
                            "were cut off\n",
                            it_data_dir_count(s, "blobs/tmp"));
                failed = true;
                break;
            }
            it_pause_ms(20);
        }
    }
    /* And the server still serves. */
    {
        struct it_resp *r = it_get(s, "/healthz", NULL);

        it_expect_status(s, r, 200);
    }
    if (failed) {
        it_server_dump_log(s, 3000);
        fail_msg("slow clients were not handled; see above");
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_slow_clients_are_cut_off, it_test_teardown),
    };

    return it_main_result(cmocka_run_group_tests(tests, setup, teardown));
}
