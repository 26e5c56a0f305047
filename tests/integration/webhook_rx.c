/*
 * webhook_rx.c - see webhook_rx.h.
 */
#include "webhook_rx.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#define RX_MAX_HUNG 8
#define RX_REQ_MAX (64 * 1024)
#define RX_SKEW_S 300

struct rx {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int wake[2]; /* a pipe: the main thread pokes the poll loop */
    int port;
    int lfd; /* listening socket, -1 while down (thread-owned) */
    char secret[128];
    char bind_error[128];
    /* commands: the main thread sets want_up and bumps cmd; the thread acks */
    bool want_up;
    bool stop;
    unsigned cmd, acked;
    /* behaviour for the next requests */
    int fail_next;      /* answer this many with 500 */
    int retry_after_s;  /* with Retry-After: N on those (0: none) */
    int status;         /* otherwise answer this (default 200) */
    char location[256]; /* Location header for a 3xx */
    bool hang;          /* read requests but never answer them */
    int hung[RX_MAX_HUNG];
    size_t n_hung;
    /* what arrived */
    struct rx_rec recs[RX_MAX_RECS];
    size_t n;
    /* the npm library's verifier: a Node co-process (pid 0 when not running) */
    pid_t lib_pid;
    FILE *lib_in, *lib_out;
};

/* ---- the npm standardwebhooks library as a second verifier ------------------ */

/* Without node or the package: the test is skipped, or fails when MG_REQUIRE_ALL=1 (CI
 * installs both). Called before the receiver allocates anything (a skip jumps out). */
static void rx_lib_need(void)
{
    const char *src = getenv("MG_SOURCE_DIR");
    char pkg[IT_PATH_MAX];

    it_fmt(pkg, sizeof(pkg), "%s/tests/ui/node_modules/standardwebhooks/package.json",
           src ? src : ".");
    if (src == NULL || access(pkg, R_OK) != 0 || system("command -v node >/dev/null 2>&1") != 0)
        it_skip("node or the npm standardwebhooks package is missing (%s)", pkg);
}

/* Start swh_verify.mjs under node (rx_lib_need() said it is there). */
static void rx_lib_start(struct rx *x)
{
    const char *src = getenv("MG_SOURCE_DIR");
    char script[IT_PATH_MAX], line[64];
    int in[2], out[2];

    x->lib_pid = 0;
    it_fmt(script, sizeof(script), "%s/tests/integration/swh_verify.mjs", src ? src : ".");
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0)
        fail_msg("pipe: %s", strerror(errno));
    x->lib_pid = fork();
    if (x->lib_pid < 0)
        fail_msg("fork: %s", strerror(errno));
    if (x->lib_pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        execlp("node", "node", script, (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    x->lib_in = fdopen(in[1], "w");
    x->lib_out = fdopen(out[0], "r");
    if (x->lib_in == NULL || x->lib_out == NULL || fgets(line, sizeof(line), x->lib_out) == NULL ||
        strncmp(line, "ready", 5) != 0)
        fail_msg("the standardwebhooks verifier (%s) did not start", script);
}

static void rx_lib_stop(struct rx *x)
{
    int status;

    if (x->lib_pid <= 0)
        return;
    fclose(x->lib_in);
    fclose(x->lib_out);
    waitpid(x->lib_pid, &status, 0);
    x->lib_pid = 0;
}

/* Ask the library. Called with x->lock held (one question at a time). */
static bool rx_lib_verify(struct rx *x, const char *id, const char *ts, const char *sig,
                          const char *body)
{
    json_t *q;
    char *text, line[512] = "";
    bool ok;

    if (x->lib_pid <= 0)
        return true; /* skipped above unless running */
    q = json_pack("{s:s, s:s, s:s, s:s, s:s}", "secret", x->secret, "id", id, "timestamp", ts,
                  "signature", sig, "body", body);
    text = q ? json_dumps(q, JSON_COMPACT) : NULL;
    json_decref(q);
    if (text == NULL)
        return false;
    ok = fprintf(x->lib_in, "%s\n", text) > 0 && fflush(x->lib_in) == 0 &&
         fgets(line, sizeof(line), x->lib_out) != NULL && strncmp(line, "ok", 2) == 0;
    if (!ok)
        fprintf(stderr, "webhook receiver: the standardwebhooks library refused %s: %s", id, line);
    free(text);
    return ok;
}

/* ---- verification -------------------------------------------------------- */

/* Standard Webhooks signature of id.ts.body with secret: "v1,<base64>"
 * (empty when it cannot be computed). */
static void rx_sign(const char *secret, const char *id, const char *ts, const char *body,
                    size_t body_len, char out[64])
{
    unsigned char mac[EVP_MAX_MD_SIZE], b64[64];
    unsigned maclen = 0;
    size_t il = strlen(id), tl = strlen(ts), n = il + 1 + tl + 1 + body_len;
    unsigned char *msg = malloc(n);

    out[0] = '\0';
    if (msg == NULL)
        return;
    memcpy(msg, id, il);
    msg[il] = '.';
    memcpy(msg + il + 1, ts, tl);
    msg[il + 1 + tl] = '.';
    memcpy(msg + il + 2 + tl, body, body_len);
    /* The key: a whsec_ secret's base64 part decoded (Standard Webhooks), else the bytes. */
    unsigned char key[512];
    int keylen;
    const char *b = secret + 6;
    size_t bl = strlen(b);

    if (strncmp(secret, "whsec_", 6) == 0 && bl % 4 == 0 && bl / 4 * 3 <= sizeof(key)) {
        keylen = EVP_DecodeBlock(key, (const unsigned char *)b, (int)bl);
        if (keylen > 0 && bl >= 1 && b[bl - 1] == '=')
            keylen--;
        if (keylen > 0 && bl >= 2 && b[bl - 2] == '=')
            keylen--;
    } else {
        keylen = (int)strlen(secret) < (int)sizeof(key) ? (int)strlen(secret) : -1;
        if (keylen > 0)
            memcpy(key, secret, (size_t)keylen);
    }
    if (keylen > 0 && HMAC(EVP_sha256(), key, keylen, msg, n, mac, &maclen) != NULL &&
        maclen == 32) {
        EVP_EncodeBlock(b64, mac, (int)maclen);
        snprintf(out, 64, "v1,%.60s", (const char *)b64);
    }
    free(msg);
}

bool rx_verify(const char *secret, const char *id, const char *ts, const char *body,
               size_t body_len, const char *header)
{
    char want[64];
    size_t wl;
    const char *p = header;

    rx_sign(secret, id, ts, body, body_len, want);
    wl = strlen(want);
    if (wl == 0)
        return false;
    while (p && *p) {
        size_t n = strcspn(p, " ");

        if (n == wl && CRYPTO_memcmp(p, want, wl) == 0)
            return true;
        p += n;
        while (*p == ' ')
            p++;
    }
    return false;
}

/* ---- the listener thread ------------------------------------------------ */

static int rx_listen(int port, char *err, size_t errsz)
{
    struct sockaddr_in a;
    socklen_t len = sizeof(a);
    int one = 1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(fd, 64) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        snprintf(err, errsz, "cannot listen on 127.0.0.1:%d: %s", port, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    return fd;
}

/* Header value (case-insensitive name) in the raw header block, copied. */
static void rx_header(const char *head, const char *name, char *out, size_t outsz)
{
    size_t nl = strlen(name);
    const char *p = strstr(head, "\r\n");

    out[0] = '\0';
    while (p != NULL && p[2] != '\r') {
        const char *line = p + 2, *end = strstr(line, "\r\n");

        if (end == NULL)
            return;
        if ((size_t)(end - line) > nl && strncasecmp(line, name, nl) == 0 && line[nl] == ':') {
            const char *v = line + nl + 1;

            while (*v == ' ' || *v == '\t')
                v++;
            snprintf(out, outsz, "%.*s", (int)(end - v), v);
            return;
        }
        p = end;
    }
}

/* Read one request (headers and Content-Length body) from a blocking fd
 * within 5 s. *head and *body are malloc'd into one buffer: free(*head). */
static bool rx_read_request(int fd, char **head, char **body, size_t *body_len)
{
    char *buf = malloc(RX_REQ_MAX + 1);
    size_t n = 0, need = 0;
    char *hend = NULL;
    struct pollfd pfd = {fd, POLLIN, 0};
    int64_t deadline = it_now_ms() + 5000;

    if (buf == NULL)
        return false;
    for (;;) {
        ssize_t r;
        int64_t left = deadline - it_now_ms();

        if (left <= 0 || poll(&pfd, 1, (int)left) != 1)
            break;
        r = recv(fd, buf + n, RX_REQ_MAX - n, 0);
        if (r <= 0)
            break;
        n += (size_t)r;
        buf[n] = '\0';
        if (hend == NULL && (hend = strstr(buf, "\r\n\r\n")) != NULL) {
            char cl[32];

            hend[2] = '\0'; /* the header block ends with one CRLF */
            rx_header(buf, "Content-Length", cl, sizeof(cl));
            need = (size_t)(hend + 4 - buf) + (size_t)strtoul(cl, NULL, 10);
            if (need > RX_REQ_MAX)
                break;
        }
        if (hend != NULL && n >= need) {
            *head = buf;
            *body = hend + 4;
            *body_len = need - (size_t)(hend + 4 - buf);
            (*body)[*body_len] = '\0';
            return true;
        }
        if (n == RX_REQ_MAX)
            break;
    }
    free(buf);
    return false;
}

static void rx_answer(int fd, int status, int retry_after_s, const char *location)
{
    char resp[512];
    int k = snprintf(resp, sizeof(resp),
                     "HTTP/1.1 %d Test\r\nContent-Type: text/plain\r\nContent-Length: 4\r\n"
                     "Connection: close\r\n",
                     status);

    if (retry_after_s > 0)
        k += snprintf(resp + k, sizeof(resp) - (size_t)k, "Retry-After: %d\r\n", retry_after_s);
    if (location != NULL && location[0] != '\0')
        k += snprintf(resp + k, sizeof(resp) - (size_t)k, "Location: %s\r\n", location);
    snprintf(resp + k, sizeof(resp) - (size_t)k, "\r\n%s", status < 300 ? "ok\r\n" : "no\r\n");
    if (send(fd, resp, strlen(resp), MSG_NOSIGNAL) < 0) {
        /* the sender gave up; nothing to do */
    }
}

/* Handle one connection: read, verify, record, answer (or hold it). */
static void rx_serve(struct rx *x, int fd)
{
    char *head = NULL, *body = NULL, id[192], ts[32], sig[512];
    size_t body_len = 0;
    struct rx_rec rec;
    json_t *j;
    time_t now = time(NULL);
    int status, retry = 0;
    char location[256] = "";
    bool hold = false;

    memset(&rec, 0, sizeof(rec));
    if (!rx_read_request(fd, &head, &body, &body_len)) {
        close(fd);
        return;
    }
    rec.at_ms = it_now_ms();
    sscanf(head, "%*s %95s", rec.path);
    rx_header(head, "webhook-id", id, sizeof(id));
    rx_header(head, "webhook-timestamp", ts, sizeof(ts));
    rx_header(head, "webhook-signature", sig, sizeof(sig));
    snprintf(rec.id, sizeof(rec.id), "%s", id);
    rec.ts = strtoll(ts, NULL, 10);
    rec.ts_ok = ts[0] != '\0' && llabs((long long)(now - rec.ts)) <= RX_SKEW_S;
    rec.body = strdup(body);
    j = json_loads(body, 0, NULL);
    rec.gen = json_is_integer(json_object_get(j, "generation"))
                  ? json_integer_value(json_object_get(j, "generation"))
                  : -1;
    snprintf(rec.model, sizeof(rec.model), "%s",
             json_string_value(json_object_get(j, "model"))
                 ? json_string_value(json_object_get(j, "model"))
                 : "");
    snprintf(rec.alias, sizeof(rec.alias), "%s",
             json_string_value(json_object_get(j, "alias"))
                 ? json_string_value(json_object_get(j, "alias"))
                 : "");
    json_decref(j);

    pthread_mutex_lock(&x->lock);
    rec.lib_ok = rx_lib_verify(x, id, ts, sig, body);
    rec.sig_ok = id[0] != '\0' && rx_verify(x->secret, id, ts, body, body_len, sig) && rec.lib_ok;
    if (!rec.sig_ok) {
        status = 401;
    } else if (!rec.ts_ok) {
        status = 400;
    } else if (x->fail_next > 0) {
        x->fail_next--;
        status = 500;
        retry = x->retry_after_s;
    } else if (x->hang && x->n_hung < RX_MAX_HUNG) {
        status = 0;
        hold = true;
        x->hung[x->n_hung++] = fd;
    } else {
        status = x->status;
        snprintf(location, sizeof(location), "%s", x->location);
    }
    rec.status = status;
    if (x->n < RX_MAX_RECS)
        x->recs[x->n++] = rec;
    else
        free(rec.body);
    pthread_cond_broadcast(&x->cond);
    pthread_mutex_unlock(&x->lock);
    free(head);
    if (!hold) {
        rx_answer(fd, status, retry, location);
        close(fd);
    }
}

static void *rx_main(void *arg)
{
    struct rx *x = arg;

    for (;;) {
        struct pollfd pfd[2];
        int nfds = 1;

        pthread_mutex_lock(&x->lock);
        if (x->want_up && x->lfd < 0) {
            x->lfd = rx_listen(x->port, x->bind_error, sizeof(x->bind_error));
        } else if (!x->want_up && x->lfd >= 0) {
            close(x->lfd);
            x->lfd = -1;
        }
        if (!x->hang) {
            while (x->n_hung > 0)
                close(x->hung[--x->n_hung]);
        }
        if (x->acked != x->cmd) {
            x->acked = x->cmd;
            pthread_cond_broadcast(&x->cond);
        }
        if (x->stop) {
            if (x->lfd >= 0)
                close(x->lfd);
            x->lfd = -1;
            while (x->n_hung > 0)
                close(x->hung[--x->n_hung]);
            pthread_mutex_unlock(&x->lock);
            return NULL;
        }
        pfd[0].fd = x->wake[0];
        pfd[0].events = POLLIN;
        if (x->lfd >= 0) {
            pfd[1].fd = x->lfd;
            pfd[1].events = POLLIN;
            nfds = 2;
        }
        pthread_mutex_unlock(&x->lock);

        if (poll(pfd, (nfds_t)nfds, 1000) <= 0)
            continue;
        if (pfd[0].revents & POLLIN) {
            char b[64];
            if (read(x->wake[0], b, sizeof(b)) < 0) {
                /* nothing to drain */
            }
        }
        if (nfds == 2 && (pfd[1].revents & POLLIN)) {
            int fd = accept4(pfd[1].fd, NULL, NULL, SOCK_CLOEXEC);

            if (fd >= 0)
                rx_serve(x, fd);
        }
    }
}

/* Send a command to the thread and wait until it has been applied. */
static void rx_command(struct rx *x)
{
    int64_t deadline = it_now_ms() + 10000;

    x->cmd++;
    if (write(x->wake[1], "x", 1) != 1)
        fail_msg("cannot wake the receiver thread: %s", strerror(errno));
    while (x->acked != x->cmd) {
        struct timespec ts;

        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&x->cond, &x->lock, &ts);
        if (it_now_ms() > deadline) {
            pthread_mutex_unlock(&x->lock);
            fail_msg("the webhook receiver thread does not answer");
        }
    }
}

/* ---- the test's side ---------------------------------------------------- */

struct rx *rx_start(const char *secret, bool up)
{
    struct rx *x;

    rx_lib_need();
    x = calloc(1, sizeof(*x));
    if (x == NULL)
        fail_msg("out of memory");
    pthread_mutex_init(&x->lock, NULL);
    pthread_cond_init(&x->cond, NULL);
    if (pipe2(x->wake, O_CLOEXEC | O_NONBLOCK) != 0)
        fail_msg("pipe: %s", strerror(errno));
    snprintf(x->secret, sizeof(x->secret), "%s", secret);
    rx_lib_start(x);
    x->status = 200;
    x->lfd = -1;
    x->port = it_free_port();
    x->want_up = up;
    if (pthread_create(&x->thread, NULL, rx_main, x) != 0)
        fail_msg("cannot start the receiver thread");
    pthread_mutex_lock(&x->lock);
    rx_command(x);
    if (up && x->lfd < 0) {
        pthread_mutex_unlock(&x->lock);
        fail_msg("webhook receiver: %s", x->bind_error);
    }
    pthread_mutex_unlock(&x->lock);
    return x;
}

void rx_set_up(struct rx *x, bool up)
{
    pthread_mutex_lock(&x->lock);
    x->want_up = up;
    rx_command(x);
    if (up && x->lfd < 0) {
        pthread_mutex_unlock(&x->lock);
        fail_msg("webhook receiver: %s", x->bind_error);
    }
    pthread_mutex_unlock(&x->lock);
}

void rx_behave(struct rx *x, int fail_next, int retry_after_s, int status, const char *location)
{
    pthread_mutex_lock(&x->lock);
    x->fail_next = fail_next;
    x->retry_after_s = retry_after_s;
    x->status = status;
    snprintf(x->location, sizeof(x->location), "%s", location ? location : "");
    pthread_mutex_unlock(&x->lock);
}

void rx_set_hang(struct rx *x, bool hang)
{
    pthread_mutex_lock(&x->lock);
    x->hang = hang;
    rx_command(x);
    pthread_mutex_unlock(&x->lock);
}

size_t rx_count(struct rx *x)
{
    size_t n;

    pthread_mutex_lock(&x->lock);
    n = x->n;
    pthread_mutex_unlock(&x->lock);
    return n;
}

size_t rx_snapshot(struct rx *x, struct rx_rec *out, size_t max)
{
    size_t n;

    pthread_mutex_lock(&x->lock);
    n = x->n < max ? x->n : max;
    memcpy(out, x->recs, n * sizeof(*out));
    pthread_mutex_unlock(&x->lock);
    return n;
}

size_t rx_take(struct rx *x, struct rx_rec out[RX_MAX_RECS])
{
    size_t n;

    pthread_mutex_lock(&x->lock);
    n = x->n;
    memcpy(out, x->recs, n * sizeof(*out));
    x->n = 0;
    pthread_mutex_unlock(&x->lock);
    return n;
}

size_t rx_wait_count(struct rx *x, size_t n, int64_t timeout_ms)
{
    int64_t deadline = it_deadline(timeout_ms);
    size_t got;

    while ((got = rx_count(x)) < n) {
        if (it_now_ms() > deadline)
            fail_msg("the webhook receiver got %zu requests, want at least %zu", got, n);
        it_pause_ms(10);
    }
    return got;
}

const char *rx_url(const struct rx *x, const char *tag, char *out, size_t n)
{
    return it_fmt(out, n, "http://127.0.0.1:%d/hook/%s", x->port, tag);
}

void rx_gateway_put(struct mg_server *s, const char *name, const struct rx *x, const char *filters)
{
    char url[128], body[1024];

    rx_url(x, name, url, sizeof(url));
    pc_gateway_put(s, name,
                   it_fmt(body, sizeof(body),
                          "{\"kind\":\"webhook\",\"url\":\"%s\",\"secret\":\"%s\"%s}", url,
                          x->secret, filters));
}

void rx_stop(struct rx **xp)
{
    struct rx *x = *xp;

    if (x == NULL)
        return;
    pthread_mutex_lock(&x->lock);
    x->stop = true;
    x->cmd++;
    if (write(x->wake[1], "x", 1) != 1) {
        /* the thread still looks at stop within a second */
    }
    pthread_mutex_unlock(&x->lock);
    pthread_join(x->thread, NULL);
    rx_lib_stop(x);
    for (size_t i = 0; i < x->n; i++)
        free(x->recs[i].body);
    close(x->wake[0]);
    close(x->wake[1]);
    pthread_mutex_destroy(&x->lock);
    pthread_cond_destroy(&x->cond);
    free(x);
    *xp = NULL;
}
