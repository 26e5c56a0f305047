/*
 * push_common.h - helpers shared by the test_push_*.c programs (pushing
 * alias changes to gateways; milestone M4): scratch directories, free
 * loopback ports, child processes (HAProxy, nginx) started and stopped by
 * the test, the HAProxy runtime API, counting which backend answered N
 * requests, and the REST calls every push test makes.
 *
 * Header-only: static inline, so a program that uses only some of them
 * still builds with -Wall -Werror. Every helper asserts (cmocka) and says
 * what went wrong, like harness.h. Main thread only.
 */
#ifndef MG_IT_PUSH_COMMON_H
#define MG_IT_PUSH_COMMON_H

#include "harness.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#define PC_HEX64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define PC_IMAGE "registry.example/serve@sha256:" PC_HEX64
#define PC_HAPROXY "/usr/sbin/haproxy"
#define PC_NGINX "/usr/sbin/nginx"

/* Fast retries: the tests watch several attempts within seconds. */
#define PC_SERVER_ARGS                                                                             \
    (const char *const[])                                                                          \
    {                                                                                              \
        "--push-backoff-base-ms", "50", "--push-backoff-max-ms", "400", NULL                       \
    }

/* ---- time --------------------------------------------------------------- */

static inline int64_t pc_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A deadline `ms` from now (three times longer under sanitizers). */
static inline int64_t pc_deadline(int64_t ms)
{
    return pc_now_ms() + (it_sanitized() ? ms * 3 : ms);
}

/* The pause between two polls; never used as synchronisation by itself. */
static inline void pc_pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

/* RFC 3339 UTC ("2026-11-21T10:00:00.123Z") -> ms since the epoch. */
static inline int64_t pc_wall_ms_of(const char *t)
{
    struct tm tm;
    int ms = 0;

    memset(&tm, 0, sizeof(tm));
    if (t == NULL || sscanf(t, "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                            &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms) < 6)
        fail_msg("not an RFC 3339 time: %s", t ? t : "(null)");
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return (int64_t)timegm(&tm) * 1000 + ms;
}

/* The wall clock in ms (what the server's timestamps are in). */
static inline int64_t pc_wall_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- text and files ----------------------------------------------------- */

/* snprintf into buf, failing when it does not fit; returns buf. */
static inline const char *pc_fmt(char *buf, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline const char *pc_fmt(char *buf, size_t n, const char *fmt, ...)
{
    va_list ap;
    int k;

    va_start(ap, fmt);
    k = vsnprintf(buf, n, fmt, ap);
    va_end(ap);
    if (k < 0 || (size_t)k >= n)
        fail_msg("text too long for its buffer: %s", fmt);
    return buf;
}

static inline void pc_write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "we");

    if (f == NULL)
        fail_msg("cannot write %s: %s", path, strerror(errno));
    if (fputs(text, f) == EOF || fclose(f) != 0)
        fail_msg("cannot write %s: %s", path, strerror(errno));
}

/* The whole file (malloc'd, NUL-terminated; *len without the NUL), or NULL
 * when it does not exist. */
static inline char *pc_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "re");
    char *buf = NULL;
    size_t n = 0, cap = 0, r;

    if (f == NULL) {
        if (errno != ENOENT)
            fail_msg("cannot read %s: %s", path, strerror(errno));
        return NULL;
    }
    do {
        if (cap - n < 4096) {
            cap = cap ? cap * 2 : 8192;
            buf = realloc(buf, cap + 1);
            if (buf == NULL)
                fail_msg("out of memory");
        }
        r = fread(buf + n, 1, cap - n, f);
        n += r;
    } while (r > 0);
    fclose(f);
    buf[n] = '\0';
    if (len != NULL)
        *len = n;
    return buf;
}

/* A fresh scratch directory under $TMPDIR (or /tmp). */
static inline void pc_mkdtemp(char out[IT_PATH_MAX], const char *tag)
{
    const char *tmp = getenv("TMPDIR");

    pc_fmt(out, IT_PATH_MAX, "%s/mg-%s.XXXXXX", tmp && *tmp ? tmp : "/tmp", tag);
    if (mkdtemp(out) == NULL)
        fail_msg("mkdtemp %s: %s", out, strerror(errno));
}

static inline int pc_rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

/* Remove a scratch directory (kept when MG_KEEP_DATA=1). */
static inline void pc_rmtree(const char *path)
{
    const char *keep = getenv("MG_KEEP_DATA");

    if (path == NULL || path[0] == '\0')
        return;
    if (keep != NULL && strcmp(keep, "1") == 0) {
        print_message("keeping %s (MG_KEEP_DATA=1)\n", path);
        return;
    }
    nftw(path, pc_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- loopback ports ----------------------------------------------------- */

/* A TCP port on 127.0.0.1 that was free a moment ago (the kernel's choice). */
static inline int pc_free_port(void)
{
    struct sockaddr_in a;
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0)
        fail_msg("cannot find a free loopback port: %s", strerror(errno));
    close(fd);
    return ntohs(a.sin_port);
}

/* Connect to 127.0.0.1:port; the fd or -1. */
static inline int pc_connect(int port)
{
    struct sockaddr_in a;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    if (fd < 0)
        return -1;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* ---- child processes ---------------------------------------------------- */

struct pc_proc {
    pid_t pid; /* 0 when not running */
    char name[32];
    char log[IT_PATH_MAX];
};

static inline void pc_dump_log(const struct pc_proc *p)
{
    char *text = pc_read_file(p->log, NULL);
    size_t n = text ? strlen(text) : 0;

    print_error("---- %s log (%s) ----\n%s\n---- end of log ----\n", p->name, p->log,
                text ? text + (n > 4000 ? n - 4000 : 0) : "(none)");
    free(text);
}

/* Start argv[0] with stdout and stderr appended to log; it dies with us. */
static inline void pc_spawn(struct pc_proc *p, const char *name, const char *const *argv,
                            const char *log)
{
    pid_t pid;

    memset(p, 0, sizeof(*p));
    snprintf(p->name, sizeof(p->name), "%s", name);
    snprintf(p->log, sizeof(p->log), "%s", log);
    pid = fork();
    if (pid < 0)
        fail_msg("fork: %s", strerror(errno));
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        int nul = open("/dev/null", O_RDONLY);

        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (fd < 0 || nul < 0 || dup2(nul, 0) < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
            _exit(126);
        execv(argv[0], (char *const *)argv);
        dprintf(2, "exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    p->pid = pid;
}

/* Has the child exited? Reaps it and clears pid when so. */
static inline bool pc_exited(struct pc_proc *p, int *status)
{
    if (p->pid == 0)
        return true;
    if (waitpid(p->pid, status, WNOHANG) == p->pid) {
        p->pid = 0;
        return true;
    }
    return false;
}

/* Wait until something accepts on 127.0.0.1:port; fails when the child
 * exits first or at the deadline. */
static inline void pc_wait_port(struct pc_proc *p, int port)
{
    int64_t deadline = pc_deadline(15000);
    int status = 0;

    for (;;) {
        int fd = pc_connect(port);

        if (fd >= 0) {
            close(fd);
            return;
        }
        if (pc_exited(p, &status)) {
            pc_dump_log(p);
            fail_msg("%s exited (status 0x%x) before listening on port %d", p->name, status, port);
        }
        if (pc_now_ms() > deadline) {
            pc_dump_log(p);
            fail_msg("%s does not listen on port %d", p->name, port);
        }
        pc_pause_ms(10);
    }
}

/* SIGTERM, wait (deadline, then SIGKILL). */
static inline void pc_stop(struct pc_proc *p)
{
    int64_t deadline = pc_now_ms() + 10000;
    int status;

    if (p->pid == 0)
        return;
    kill(p->pid, SIGTERM);
    while (!pc_exited(p, &status)) {
        if (pc_now_ms() > deadline) {
            kill(p->pid, SIGKILL);
            waitpid(p->pid, &status, 0);
            p->pid = 0;
            break;
        }
        pc_pause_ms(10);
    }
}

/* kill -9 the daemon (no clean shutdown); it_server_restart() then starts a
 * fresh process on the same data directory. */
static inline void pc_server_kill9(struct mg_server *s)
{
    int status;

    if (s->pid == 0)
        fail_msg("the server is not running");
    if (kill(s->pid, SIGKILL) != 0)
        fail_msg("kill -9 %d: %s", (int)s->pid, strerror(errno));
    waitpid(s->pid, &status, 0);
    s->pid = 0;
}

/* ---- HAProxy runtime API ------------------------------------------------ */

/* One command on the runtime API at 127.0.0.1:port; the reply, malloc'd. */
static inline char *pc_haproxy_cmd(int port, const char *cmd)
{
    int fd = pc_connect(port);
    size_t n = 0, cap = 4096;
    char *out = malloc(cap + 1);
    struct pollfd pfd;

    if (fd < 0)
        fail_msg("cannot connect to the HAProxy runtime API on port %d: %s", port, strerror(errno));
    if (out == NULL)
        fail_msg("out of memory");
    if (send(fd, cmd, strlen(cmd), MSG_NOSIGNAL) != (ssize_t)strlen(cmd))
        fail_msg("cannot send '%s' to HAProxy: %s", cmd, strerror(errno));
    pfd.fd = fd;
    pfd.events = POLLIN;
    for (;;) {
        ssize_t r;

        if (poll(&pfd, 1, 5000) != 1)
            fail_msg("HAProxy did not answer '%s'", cmd);
        if (n == cap && (out = realloc(out, (cap *= 2) + 1)) == NULL)
            fail_msg("out of memory");
        r = recv(fd, out + n, cap - n, 0);
        if (r < 0)
            fail_msg("reading HAProxy's answer to '%s': %s", cmd, strerror(errno));
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    out[n] = '\0';
    return out;
}

/* `get weight be/srv`: the current weight. */
static inline int pc_haproxy_weight(int port, const char *be, const char *srv)
{
    char cmd[256];
    char *reply;
    int w = -1;

    reply = pc_haproxy_cmd(port, pc_fmt(cmd, sizeof(cmd), "get weight %s/%s\n", be, srv));
    if (sscanf(reply, "%d", &w) != 1)
        fail_msg("get weight %s/%s: HAProxy answered '%s'", be, srv, reply);
    free(reply);
    return w;
}

/* ---- counting who answered ---------------------------------------------- */

struct pc_body {
    char buf[64];
    size_t len;
};

static inline size_t pc_on_body(char *p, size_t size, size_t n, void *arg)
{
    struct pc_body *b = arg;
    size_t len = size * n, room = sizeof(b->buf) - 1 - b->len;

    memcpy(b->buf + b->len, p, len < room ? len : room);
    b->len += len < room ? len : room;
    b->buf[b->len] = '\0';
    return len;
}

/*
 * n GETs of url, each on a new connection (so every request is balanced
 * afresh, whatever the proxy does with kept-alive ones). counts[i] gets how
 * many bodies were exactly names[i]; any other answer fails.
 */
static inline void pc_count(const char *url, int n, size_t k, const char *const *names, int *counts)
{
    CURL *c = curl_easy_init();
    int i;

    if (c == NULL)
        fail_msg("curl_easy_init failed");
    memset(counts, 0, k * sizeof(*counts));
    for (i = 0; i < n; i++) {
        struct pc_body b = {{0}, 0};
        long status = 0;
        CURLcode rc;
        size_t j;

        curl_easy_reset(c);
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
        curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
        curl_easy_setopt(c, CURLOPT_FORBID_REUSE, 1L);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, pc_on_body);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
        rc = curl_easy_perform(c);
        if (rc != CURLE_OK)
            fail_msg("GET %s (request %d of %d): %s", url, i + 1, n, curl_easy_strerror(rc));
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        for (j = 0; j < k; j++) {
            if (strcmp(b.buf, names[j]) == 0)
                break;
        }
        if (status != 200 || j == k)
            fail_msg("GET %s (request %d of %d): status %ld, body '%s'", url, i + 1, n, status,
                     b.buf);
        counts[j]++;
    }
    curl_easy_cleanup(c);
}

/*
 * Assert a split: n requests, counts[i] within +-5 percentage points of
 * want_pct[i] (an exact 0 or 100 must be exact).
 */
#define pc_expect_split(n, k, names, counts, ...)                                                  \
    pc_expect_split_at(n, k, names, counts, (const int[]){__VA_ARGS__}, __FILE__, __LINE__)

static inline void pc_expect_split_at(int n, size_t k, const char *const *names, const int *counts,
                                      const int *want_pct, const char *file, int line)
{
    bool ok = true;
    char got[256] = "", want[256] = "";
    size_t i, o1 = 0, o2 = 0;

    for (i = 0; i < k; i++) {
        double pct = 100.0 * counts[i] / n;

        if (want_pct[i] == 0 || want_pct[i] == 100)
            ok = ok && counts[i] * 100 == want_pct[i] * n;
        else
            ok = ok && pct >= want_pct[i] - 5.0 && pct <= want_pct[i] + 5.0;
        o1 += (size_t)snprintf(got + o1, sizeof(got) - o1, " %s=%.1f%%", names[i], pct);
        o2 += (size_t)snprintf(want + o2, sizeof(want) - o2, " %s=%d%%", names[i], want_pct[i]);
    }
    if (ok)
        return;
    print_error("split of %d requests:%s; want%s (+-5 points)\n", n, got, want);
    _fail(file, line);
}

/* ---- REST --------------------------------------------------------------- */

static inline void pc_model(struct mg_server *s, const char *name)
{
    struct it_resp *r =
        it_jreq_v(s, "POST", "/api/v1/models", s->admin_token, json_pack("{ss}", "name", name));

    it_expect_status(s, r, 201);
    it_resp_free(s, &r);
}

/* A version of model with artifact art; returns its number. */
static inline json_int_t pc_version(struct mg_server *s, const char *model, const char *art)
{
    char path[256];
    struct it_resp *r =
        it_jreq_v(s, "POST", pc_fmt(path, sizeof(path), "/api/v1/models/%s/versions", model),
                  s->admin_token, json_pack("{ss ss}", "artifact", art, "image", PC_IMAGE));
    json_int_t n;

    it_expect_status(s, r, 201);
    n = it_jint(r->json, "version");
    it_resp_free(s, &r);
    return n;
}

/* PUT the alias (body: JSON text) with ?wait=wait_s when wait_s > 0;
 * asserts 200 and returns the Alias answer. */
static inline struct it_resp *pc_alias_put(struct mg_server *s, const char *model,
                                           const char *alias, const char *body, int wait_s)
{
    char path[256];
    struct it_resp *r;

    if (wait_s > 0)
        pc_fmt(path, sizeof(path), "/api/v1/models/%s/aliases/%s?wait=%d", model, alias, wait_s);
    else
        pc_fmt(path, sizeof(path), "/api/v1/models/%s/aliases/%s", model, alias);
    r = it_jreq(s, "PUT", path, s->admin_token, body);
    it_expect_status(s, r, 200);
    return r;
}

/* PUT the alias and return its new generation. */
static inline json_int_t pc_alias_set(struct mg_server *s, const char *model, const char *alias,
                                      const char *body)
{
    struct it_resp *r = pc_alias_put(s, model, alias, body, 0);
    json_int_t gen = it_jint(r->json, "generation");

    it_resp_free(s, &r);
    return gen;
}

static inline struct it_resp *pc_alias_get(struct mg_server *s, const char *model,
                                           const char *alias)
{
    char path[256];
    struct it_resp *r =
        it_get(s, pc_fmt(path, sizeof(path), "/api/v1/models/%s/aliases/%s", model, alias),
               s->admin_token);

    it_expect_status(s, r, 200);
    return r;
}

/* PUT /gateways/{name} (JSON text); asserts 200 or 201. */
static inline void pc_gateway_put(struct mg_server *s, const char *name, const char *config)
{
    char path[256];
    struct it_resp *r = it_jreq(s, "PUT", pc_fmt(path, sizeof(path), "/api/v1/gateways/%s", name),
                                s->admin_token, config);

    if (r->status != 200 && r->status != 201)
        it_expect_status(s, r, 201);
    it_resp_free(s, &r);
}

static inline void pc_gateway_delete(struct mg_server *s, const char *name)
{
    char path[256];
    struct it_resp *r =
        it_request(s, "DELETE", pc_fmt(path, sizeof(path), "/api/v1/gateways/%s", name),
                   s->admin_token, NULL, NULL, 0);

    it_expect_status(s, r, 204);
    it_resp_free(s, &r);
}

static inline struct it_resp *pc_gateway_get(struct mg_server *s, const char *name)
{
    char path[256];
    struct it_resp *r =
        it_get(s, pc_fmt(path, sizeof(path), "/api/v1/gateways/%s", name), s->admin_token);

    it_expect_status(s, r, 200);
    return r;
}

/* The Gateway's delivery row for (model, alias), or NULL. Borrowed. */
static inline json_t *pc_gw_delivery(const json_t *gw, const char *model, const char *alias)
{
    json_t *d;
    size_t i;

    json_array_foreach(json_object_get(gw, "deliveries"), i, d)
    {
        const char *m = json_string_value(json_object_get(d, "model"));
        const char *a = json_string_value(json_object_get(d, "alias"));

        if (m && a && strcmp(m, model) == 0 && strcmp(a, alias) == 0)
            return d;
    }
    return NULL;
}

/* The Alias's delivery to gateway, or NULL. Borrowed. */
static inline json_t *pc_alias_delivery(const json_t *alias, const char *gateway)
{
    json_t *d;
    size_t i;

    json_array_foreach(json_object_get(alias, "deliveries"), i, d)
    {
        const char *g = json_string_value(json_object_get(d, "gateway"));

        if (g && strcmp(g, gateway) == 0)
            return d;
    }
    return NULL;
}

/* The daemon's own notes (lines starting "modelgated:", e.g. failed pushes)
 * from the end of its log; the access log lines around them say little. */
static inline void pc_dump_server_notes(const struct mg_server *s, size_t max_lines)
{
    char *log = pc_read_file(s->log_path, NULL);
    const char *lines[64];
    size_t n = 0, k = 0;
    char *p, *save = NULL;

    if (log == NULL)
        return;
    for (p = strtok_r(log, "\n", &save); p != NULL; p = strtok_r(NULL, "\n", &save)) {
        if (strncmp(p, "modelgated:", 11) == 0) {
            lines[k % 64] = p;
            k++;
        }
    }
    n = k < max_lines ? k : max_lines;
    if (n > 64)
        n = 64;
    print_error("---- the server's last %zu notes (%s) ----\n", n, s->log_path);
    for (size_t i = k - n; i < k; i++)
        print_error("%.600s\n", lines[i % 64]);
    print_error("---- end of notes ----\n");
    free(log);
}

/*
 * Poll GET /gateways/{gw} until its row for (model, alias) is at generation
 * gen (0: any) in `state`; fails at the deadline with the last answer.
 * Returns that answer (owned by the server until released).
 */
#define pc_wait_delivery(s, gw, model, alias, gen, state, timeout_ms)                              \
    pc_wait_delivery_at(s, gw, model, alias, gen, state, timeout_ms, __FILE__, __LINE__)

static inline struct it_resp *pc_wait_delivery_at(struct mg_server *s, const char *gw,
                                                  const char *model, const char *alias,
                                                  json_int_t gen, const char *state,
                                                  int64_t timeout_ms, const char *file, int line)
{
    int64_t deadline = pc_deadline(timeout_ms);

    for (;;) {
        struct it_resp *r = pc_gateway_get(s, gw);
        json_t *d = pc_gw_delivery(r->json, model, alias);
        const char *st = json_string_value(json_object_get(d, "state"));

        if (d != NULL &&
            (gen == 0 || json_integer_value(json_object_get(d, "generation")) == gen) &&
            st != NULL && strcmp(st, state) == 0)
            return r;
        if (pc_now_ms() > deadline) {
            print_error("gateway %s, %s/%s: want generation %lld %s; the gateway is: %.3000s\n", gw,
                        model, alias, (long long)gen, state, r->body);
            pc_dump_server_notes(s, 12);
            _fail(file, line);
        }
        it_resp_free(s, &r);
        pc_pause_ms(20);
    }
}

/* Every delivery of the Alias answer is in_sync at the alias's generation. */
static inline bool pc_all_in_sync(const json_t *alias)
{
    json_int_t gen = json_integer_value(json_object_get(alias, "generation"));
    json_t *d;
    size_t i;

    if (json_array_size(json_object_get(alias, "deliveries")) == 0)
        return false;
    json_array_foreach(json_object_get(alias, "deliveries"), i, d)
    {
        const char *st = json_string_value(json_object_get(d, "state"));

        if (st == NULL || strcmp(st, "in_sync") != 0 ||
            json_integer_value(json_object_get(d, "generation")) != gen)
            return false;
    }
    return true;
}

#endif
