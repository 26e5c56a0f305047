/*
 * haproxy.c - apply routes through HAProxy's runtime API (TCP "host:port" or
 * "unix:/path"), one connection per step in prompt mode (commands one a line, answers
 * read line by line, so a backend of any size fits): read the backend (`show servers
 * state`), then, behind the delivery's fence (push_fence), `set weight <backend>/<server>
 * <w>` for each server whose weight differs (routed versions get theirs, every other
 * server 0) and read the backend back in the same session. HAProxy's own error text
 * ("No such server.") becomes the delivery's error.
 *
 * Header match rules (docs/contract.md "Routing strategies") go into a map the gateway's config
 * names
 * ("map"): read with `show map`; when it differs, replaced atomically with a new version of
 * it (`prepare map`, `add map @<ver>` for each rule, `commit map @<ver>`) and read back; no
 * reload. A key is "<header>=<value>" (a header name holds no '='), its value the pinned
 * version's server. The backend's config, written once, looks each header up and pins with
 * `use-server` (README). HAProxy copies no requests: a generation with a shadow is refused.
 */
#include "push.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "../base/util.h"
#include "../gates/routing.h"

#define HAPROXY_IO_MS 3000
#define NAME_MAX_LEN 128
#define MAP_MAX_LEN 320

static bool name_template_ok(const char *t)
{
    char probe[NAME_MAX_LEN + 64];
    size_t i;

    if (t[0] == '\0')
        return false; /* "set weight /v1" names nothing */
    for (i = 0; t[i]; i++) {
        char c = t[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              strchr("_-.:{}", c)))
            return false;
    }
    return push_expand(t, "m", "a", 1, probe, sizeof(probe));
}

/* An absolute path of characters the runtime API takes as one word (no space, ';', '\\',
 * '#' or control character), with known placeholders. */
static bool map_template_ok(const char *t)
{
    char probe[MAP_MAX_LEN];
    size_t i;

    if (t[0] != '/' || strlen(t) > 200 || strstr(t, "/../") != NULL)
        return false;
    for (i = 0; t[i]; i++) {
        unsigned char c = (unsigned char)t[i];

        if (c <= 0x20 || c >= 0x7f || strchr(";\\#\"'", c) != NULL)
            return false;
    }
    return push_expand(t, "m", "a", 1, probe, sizeof(probe));
}

/* "unix:/path", or "host:port" with a port connect_to() can use. */
static bool address_ok(const char *addr)
{
    const char *colon = strrchr(addr, ':');
    int64_t port;

    if (strlen(addr) > 200)
        return false;
    if (strncmp(addr, "unix:", 5) == 0)
        return addr[5] == '/'; /* a relative path would depend on the server's cwd */
    return colon != NULL && colon != addr && mg_parse_i64(colon + 1, 1, 65535, &port);
}

enum mg_code push_haproxy_validate(const struct push_env *env, const json_t *body, json_t **config,
                                   char **secret, struct mg_error *err)
{
    (void)env;
    *secret = NULL;
    const char *addr = json_string_value(json_object_get(body, "address"));
    const char *be = json_string_value(json_object_get(body, "backend"));
    const char *ctl = json_string_value(json_object_get(body, "server"));
    json_t *map = json_object_get(body, "map");
    const char *k;
    json_t *v;

    json_object_foreach((json_t *)body, k, v)
    {
        if (strcmp(k, "kind") && strcmp(k, "address") && strcmp(k, "backend") &&
            strcmp(k, "server") && strcmp(k, "models") && strcmp(k, "aliases") && strcmp(k, "map"))
            return mg_fail(err, MG_EINVAL, k, "unknown field '%.64s' for an haproxy gateway", k);
    }
    if (map != NULL && (!json_is_string(map) || !map_template_ok(json_string_value(map))))
        return mg_fail(err, MG_EINVAL, "map",
                       "map is the path of a map file HAProxy loaded, as its config names it, "
                       "such as /etc/haproxy/maps/{model}_{alias}.map");
    if (addr == NULL || !address_ok(addr))
        return mg_fail(err, MG_EINVAL, "address",
                       "address is the runtime API as host:port or unix:/path/to/socket");
    if (be == NULL || !name_template_ok(be))
        return mg_fail(err, MG_EINVAL, "backend",
                       "backend is a name template such as be_{model}_{alias}");
    if (ctl == NULL || !name_template_ok(ctl) || strstr(ctl, "{version}") == NULL)
        return mg_fail(err, MG_EINVAL, "server",
                       "server is a name template with {version}, such as v{version}");
    *config = json_pack("{s:s, s:s, s:s}", "address", addr, "backend", be, "server", ctl);
    if (*config && map && json_object_set(*config, "map", map) != 0) {
        json_decref(*config);
        *config = NULL;
    }
    return *config ? MG_OK : mg_fail(err, MG_ENOMEM, NULL, "out of memory");
}

static int connect_to(const char *addr, char *err, size_t errsz)
{
    int fd = -1, rc;
    struct pollfd pfd;

    if (strncmp(addr, "unix:", 5) == 0) {
        struct sockaddr_un sun;
        memset(&sun, 0, sizeof(sun));
        sun.sun_family = AF_UNIX;
        if (strlen(addr + 5) >= sizeof(sun.sun_path)) {
            snprintf(err, errsz, "unix socket path too long");
            return -1;
        }
        memcpy(sun.sun_path, addr + 5, strlen(addr + 5) + 1);
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && connect(fd, (struct sockaddr *)&sun, sizeof(sun)) != 0) {
            snprintf(err, errsz, "cannot connect to %s: %s", addr, strerror(errno));
            close(fd);
            return -1;
        }
        return fd;
    } else {
        char host[128];
        const char *colon = strrchr(addr, ':');
        struct sockaddr_storage ss;
        socklen_t sl;
        int64_t port;
        size_t hl = (size_t)(colon - addr);

        memset(&ss, 0, sizeof(ss));
        if (hl >= sizeof(host) || !mg_parse_i64(colon + 1, 1, 65535, &port)) {
            snprintf(err, errsz, "bad runtime API address %s", addr);
            return -1;
        }
        memcpy(host, addr, hl);
        host[hl] = '\0';
        if (host[0] == '[' && hl > 2) {
            memmove(host, host + 1, hl - 2);
            host[hl - 2] = '\0';
        }
        if (inet_pton(AF_INET, host, &((struct sockaddr_in *)&ss)->sin_addr) == 1) {
            ((struct sockaddr_in *)&ss)->sin_family = AF_INET;
            ((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)port);
            sl = sizeof(struct sockaddr_in);
        } else if (inet_pton(AF_INET6, host, &((struct sockaddr_in6 *)&ss)->sin6_addr) == 1) {
            ((struct sockaddr_in6 *)&ss)->sin6_family = AF_INET6;
            ((struct sockaddr_in6 *)&ss)->sin6_port = htons((uint16_t)port);
            sl = sizeof(struct sockaddr_in6);
        } else {
            snprintf(err, errsz, "runtime API address must be numeric: %s", addr);
            return -1;
        }
        fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) {
            snprintf(err, errsz, "socket: %s", strerror(errno));
            return -1;
        }
        rc = connect(fd, (struct sockaddr *)&ss, sl);
        if (rc != 0 && errno == EINPROGRESS) {
            int soerr = 0;
            socklen_t len = sizeof(soerr);
            pfd.fd = fd;
            pfd.events = POLLOUT;
            if (poll(&pfd, 1, HAPROXY_IO_MS) == 1 &&
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) == 0 && soerr == 0)
                rc = 0;
            else
                errno = soerr ? soerr : ETIMEDOUT;
        }
        if (rc != 0) {
            snprintf(err, errsz, "cannot connect to HAProxy at %s: %s", addr, strerror(errno));
            close(fd);
            return -1;
        }
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
        return fd;
    }
}

/*
 * A runtime API session in prompt mode, on one connection: "prompt", the commands (one a
 * line), "quit", written while the answers are read. HAProxy ends each answer with the
 * prompt "\n> ", so the answer of command i starts after the i+1-th prompt. Answers are
 * read line by line (each line capped, the whole answer not), so a backend of any size
 * can be listed.
 */
#define HAPROXY_LINE_MAX 8192
/* Commands of one session: a backend's servers, one command each, and a bit more. */
#define HAPROXY_BATCH_MAX (8 * 1024 * 1024)

struct batch {
    struct mg_buf text; /* the commands, one a line */
    size_t n;
};

/* on_line(ctx, i, line): a non-empty line of command i's answer; false stops the session
 * (ctx's own error). */
typedef bool (*hap_line_fn)(void *ctx, size_t i, const char *line);

static void batch_init(struct batch *b)
{
    mg_buf_init(&b->text, HAPROXY_BATCH_MAX);
    b->n = 0;
}

static bool batch_add(struct batch *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static bool batch_add(struct batch *b, const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (n <= 0 || (size_t)n >= sizeof(line) - 1 ||
        mg_buf_append(&b->text, line, (size_t)n) != MG_OK ||
        mg_buf_append(&b->text, "\n", 1) != MG_OK)
        return false;
    b->n++;
    return true;
}

struct reader {
    char line[HAPROXY_LINE_MAX];
    size_t len;
    long answer; /* -1: the answer of "prompt" itself */
    hap_line_fn fn;
    void *ctx;
    bool stopped;
};

static bool reader_line(struct reader *r)
{
    char *l = r->line;

    r->line[r->len] = '\0';
    r->len = 0;
    if (l[0] == '>' && l[1] == ' ') {
        r->answer++;
        l += 2;
    }
    if (l[0] == '\0' || r->answer < 0)
        return true;
    if (!r->fn(r->ctx, (size_t)r->answer, l)) {
        r->stopped = true;
        return false;
    }
    return true;
}

static bool session(const char *addr, const struct batch *b, hap_line_fn fn, void *ctx, char *err,
                    size_t errsz)
{
    static const char head[] = "prompt\n", tail[] = "quit\n";
    struct reader *r = calloc(1, sizeof(*r));
    size_t hn = sizeof(head) - 1, tn = sizeof(tail) - 1, total = hn + b->text.len + tn, off = 0;
    bool ok = false;
    char buf[4096];
    int fd = -1;

    if (r == NULL) {
        snprintf(err, errsz, "out of memory");
        return false;
    }
    r->answer = -1;
    r->fn = fn;
    r->ctx = ctx;
    if ((fd = connect_to(addr, err, errsz)) < 0)
        goto out;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
    for (;;) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN | (off < total ? POLLOUT : 0)};
        ssize_t got;

        if (poll(&pfd, 1, HAPROXY_IO_MS) != 1) {
            snprintf(err, errsz, "HAProxy did not answer in time (%ld of %zu answers)",
                     r->answer < 0 ? 0 : r->answer, b->n);
            goto out;
        }
        if ((pfd.revents & POLLOUT) && off < total) {
            const char *p;
            size_t len;
            ssize_t w;

            if (off < hn) {
                p = head + off;
                len = hn - off;
            } else if (off < hn + b->text.len) {
                p = b->text.data + (off - hn);
                len = b->text.len - (off - hn);
            } else {
                p = tail + (off - hn - b->text.len);
                len = total - off;
            }
            w = send(fd, p, len, MSG_NOSIGNAL);
            if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
                snprintf(err, errsz, "cannot send to HAProxy: %s", strerror(errno));
                goto out;
            }
            if (w > 0)
                off += (size_t)w;
        }
        if (!(pfd.revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
        got = recv(fd, buf, sizeof(buf), 0);
        if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            continue;
        if (got < 0) {
            snprintf(err, errsz, "reading HAProxy's answer failed: %s", strerror(errno));
            goto out;
        }
        if (got == 0)
            break;
        for (ssize_t i = 0; i < got; i++) {
            if (buf[i] == '\n') {
                if (!reader_line(r))
                    goto out;
            } else if (r->len + 1 >= sizeof(r->line)) {
                snprintf(err, errsz, "HAProxy answered a line longer than %d bytes",
                         HAPROXY_LINE_MAX);
                goto out;
            } else {
                r->line[r->len++] = buf[i];
            }
        }
    }
    if (r->len > 0 && !reader_line(r)) /* the last prompt has no newline */
        goto out;
    if (r->answer < (long)b->n) {
        snprintf(err, errsz, "HAProxy closed the runtime API after %ld of %zu answers",
                 r->answer < 0 ? 0 : r->answer, b->n);
        goto out;
    }
    ok = true;
out:
    if (!ok && r->stopped)
        err[0] = '\0'; /* the callback's error is the one to report */
    if (fd >= 0)
        close(fd);
    free(r);
    return ok;
}

/* ---- weights ------------------------------------------------------------ */

/* A backend's servers as `show servers state` lists them. */
#define HAPROXY_SERVERS_MAX 100000

struct server {
    char name[NAME_MAX_LEN];
    int weight; /* srv_uweight */
};

struct servers {
    struct server *s;
    size_t n, cap;
    size_t answer; /* the answer that lists them */
    char error[320];
};

static void servers_release(struct servers *sv)
{
    free(sv->s);
    memset(sv, 0, sizeof(*sv));
}

/* `show servers state` lines: "1" (the format), "# ..." (the fields), then "be_id be_name
 * srv_id srv_name srv_addr srv_op_state srv_admin_state srv_uweight ...". Other answers'
 * lines (set weight) are errors. */
static bool on_state(void *ctx, size_t i, const char *line)
{
    struct servers *sv = ctx;
    char name[NAME_MAX_LEN];
    int w;

    if (i != sv->answer) {
        snprintf(sv->error, sizeof(sv->error), "%.300s", line);
        return false;
    }
    if (line[0] == '#' || strcmp(line, "1") == 0)
        return true;
    if (strstr(line, "Can't find backend") || strstr(line, "No such backend")) {
        snprintf(sv->error, sizeof(sv->error), "No such backend (%.200s)", line);
        return false;
    }
    if (sscanf(line, "%*s %*s %*s %127s %*s %*s %*s %d", name, &w) != 2)
        return true;
    if (sv->n == sv->cap) {
        size_t cap = sv->cap ? sv->cap * 2 : 64;
        struct server *s;

        if (sv->n >= HAPROXY_SERVERS_MAX || (s = realloc(sv->s, cap * sizeof(*s))) == NULL) {
            snprintf(sv->error, sizeof(sv->error), "the backend lists more than %d servers",
                     HAPROXY_SERVERS_MAX);
            return false;
        }
        sv->s = s;
        sv->cap = cap;
    }
    snprintf(sv->s[sv->n].name, sizeof(sv->s[sv->n].name), "%s", name);
    sv->s[sv->n++].weight = w;
    return true;
}

/* The weight the routes give server `name` (0 when none routes to it). */
static int wanted(const struct store_delivery *d, const char *srvt, const char *name)
{
    json_t *r;
    size_t i;
    char n[NAME_MAX_LEN];

    json_array_foreach(json_object_get(d->payload, "routes"), i, r)
    {
        if (push_expand(srvt, d->model, d->alias, json_integer_value(json_object_get(r, "version")),
                        n, sizeof(n)) &&
            strcmp(n, name) == 0)
            return (int)json_integer_value(json_object_get(r, "weight"));
    }
    return 0;
}

static const struct server *find_server(const struct servers *sv, const char *name)
{
    for (size_t i = 0; i < sv->n; i++)
        if (strcmp(sv->s[i].name, name) == 0)
            return &sv->s[i];
    return NULL;
}

/* Read the backend's servers (one session); false with res->error set. */
static bool read_servers(const char *addr, const char *be, struct servers *sv,
                         struct push_result *res)
{
    struct batch b;
    char err[256] = "";
    bool ok;

    batch_init(&b);
    memset(sv, 0, sizeof(*sv));
    ok = batch_add(&b, "show servers state %s", be) &&
         session(addr, &b, on_state, sv, err, sizeof(err));
    mg_buf_release(&b.text);
    if (!ok)
        snprintf(res->error, sizeof(res->error), "show servers state %.100s: %.300s", be,
                 err[0] ? err : sv->error);
    return ok;
}

/*
 * The weights: each routed server gets its weight, every other server of the backend 0.
 * The backend is read first (one session); only servers whose weight differs are set, all
 * on one connection and behind the fence, and the same session reads the backend back.
 * *drift is set when a generation this gateway already acknowledged was found changed.
 */
static void set_weights(const struct push_env *env, const struct store_delivery *d,
                        const char *addr, const char *be, const char *srvt, struct servers *sv,
                        struct push_result *res)
{
    json_t *routes = json_object_get(d->payload, "routes"), *r;
    struct servers after;
    struct batch b;
    char name[NAME_MAX_LEN], err[256] = "";
    size_t i;

    memset(&after, 0, sizeof(after));
    batch_init(&b);
    json_array_foreach(routes, i, r)
    {
        int64_t v = json_integer_value(json_object_get(r, "version"));
        if (!push_expand(srvt, d->model, d->alias, v, name, sizeof(name))) {
            snprintf(res->error, sizeof(res->error),
                     "the server template gives a name too long for model %.64s version %lld; "
                     "nothing was sent",
                     d->model, (long long)v);
            goto out;
        }
        if (find_server(sv, name) == NULL) {
            snprintf(res->error, sizeof(res->error),
                     "set weight %.100s/%.100s: No such server. (HAProxy's backend has no "
                     "server of that name; nothing was sent)",
                     be, name);
            goto out;
        }
    }
    for (i = 0; i < sv->n; i++) {
        int w = wanted(d, srvt, sv->s[i].name);

        if (sv->s[i].weight != w && !batch_add(&b, "set weight %s/%s %d", be, sv->s[i].name, w)) {
            snprintf(res->error, sizeof(res->error), "too many weight changes for one batch");
            goto out;
        }
    }
    if (b.n == 0) {
        res->ok = true; /* HAProxy holds these weights already */
        goto out;
    }
    after.answer = b.n;
    if (!batch_add(&b, "show servers state %s", be)) {
        snprintf(res->error, sizeof(res->error), "too many weight changes for one batch");
        goto out;
    }
    if (!push_fence(env, d, res))
        goto out;
    if (!session(addr, &b, on_state, &after, err, sizeof(err))) {
        snprintf(res->error, sizeof(res->error), "set weight on %.100s: %.300s", be,
                 err[0] ? err : after.error);
        goto out;
    }
    for (i = 0; i < after.n; i++) {
        int w = wanted(d, srvt, after.s[i].name);

        if (after.s[i].weight != w) {
            snprintf(res->error, sizeof(res->error),
                     "after the change HAProxy reports %.100s/%.100s at weight %d, not %d", be,
                     after.s[i].name, after.s[i].weight, w);
            goto out;
        }
    }
    res->ok = true;
out:
    mg_buf_release(&b.text);
    servers_release(&after);
}

/* ---- the header map ------------------------------------------------------ */

struct map_answer {
    const json_t *want; /* {"key": "server"} */
    size_t list;        /* the answer of `show map` */
    size_t prepare;     /* the answer of `prepare map`, or SIZE_MAX */
    unsigned long ver;  /* prepare's version */
    bool unknown;       /* the map is not loaded */
    size_t seen;
    bool differs;
    char why[320];
};

static bool on_map(void *ctx, size_t i, const char *line)
{
    _Static_assert(GATE_HEADER_NAME_MAX + GATE_HEADER_VALUE_MAX + 2 == 194, "%193s below");
    char ref[64], key[GATE_HEADER_NAME_MAX + GATE_HEADER_VALUE_MAX + 2], val[NAME_MAX_LEN];
    struct map_answer *m = ctx;
    const char *w;

    if (strstr(line, "Unknown map") != NULL) {
        m->unknown = true;
        return true;
    }
    if (i == m->prepare) {
        if (sscanf(line, "New version created: %lu", &m->ver) != 1) {
            snprintf(m->why, sizeof(m->why), "prepare map: %.280s", line);
            return false;
        }
        return true;
    }
    if (i != m->list) {
        snprintf(m->why, sizeof(m->why), "%.300s", line);
        return false;
    }
    if (sscanf(line, "%63s %193s %127s", ref, key, val) != 3) {
        snprintf(m->why, sizeof(m->why), "show map answered '%.200s'", line);
        return false;
    }
    w = json_string_value(json_object_get(m->want, key));
    if (w == NULL || strcmp(w, val) != 0) {
        snprintf(m->why, sizeof(m->why), "the map holds '%.200s %.100s'", key, val);
        m->differs = true;
    }
    m->seen++;
    return true;
}

/* `show map` (after `prepare map` when prepare): does the map hold exactly want? */
static bool map_read(const char *addr, const char *map, bool prepare, struct map_answer *m,
                     struct push_result *res)
{
    struct batch b;
    char err[256] = "";
    bool ok;

    m->seen = 0;
    m->differs = false;
    m->unknown = false;
    m->why[0] = '\0';
    m->prepare = prepare ? 0 : SIZE_MAX;
    m->list = prepare ? 1 : 0;
    batch_init(&b);
    ok = (!prepare || batch_add(&b, "prepare map %s", map)) && batch_add(&b, "show map %s", map) &&
         session(addr, &b, on_map, m, err, sizeof(err));
    mg_buf_release(&b.text);
    if (!ok) {
        snprintf(res->error, sizeof(res->error), "map %.200s: %.280s", map, err[0] ? err : m->why);
        return false;
    }
    if (!m->differs && m->seen != json_object_size(m->want)) {
        snprintf(m->why, sizeof(m->why), "the map holds %zu entries, not %zu", m->seen,
                 json_object_size(m->want));
        m->differs = true;
    }
    return true;
}

/* The match rules into the map: read it; when it differs, a new version with one entry per
 * rule, committed at once and read back, all on one connection behind the fence. */
/* The map the match rules want ({"<header>=<value>": "<server>"}) into *want (NEW); false
 * with res->error set when a pinned server's name does not fit or HAProxy has no such
 * server in the backend (use-server would ignore it). */
static bool map_want(const struct store_delivery *d, const char *be, const char *srvt,
                     const struct servers *sv, json_t **want, struct push_result *res)
{
    json_t *match = json_object_get(d->payload, "match"), *r;
    char name[NAME_MAX_LEN];
    size_t i;

    if ((*want = json_object()) == NULL) {
        snprintf(res->error, sizeof(res->error), "out of memory");
        return false;
    }
    json_array_foreach(match, i, r)
    {
        char k[GATE_HEADER_NAME_MAX + GATE_HEADER_VALUE_MAX + 2];
        int64_t ver = json_integer_value(json_object_get(r, "version"));

        if (!push_expand(srvt, d->model, d->alias, ver, name, sizeof(name))) {
            snprintf(res->error, sizeof(res->error),
                     "the server template gives a name too long for model %.64s version %lld; "
                     "nothing was sent",
                     d->model, (long long)ver);
            goto fail;
        }
        if (find_server(sv, name) == NULL) {
            snprintf(res->error, sizeof(res->error),
                     "get weight %.100s/%.100s (pinned by a match rule): No such server.", be,
                     name);
            goto fail;
        }
        snprintf(k, sizeof(k), "%s=%s", json_string_value(json_object_get(r, "header")),
                 json_string_value(json_object_get(r, "value")));
        json_object_set_new(*want, k, json_string(name));
    }
    return true;
fail:
    json_decref(*want);
    *want = NULL;
    return false;
}

/* The match rules into the map: read it; when it differs, a new version with one entry per
 * rule, committed at once and read back, all on one connection behind the fence. */
static void set_map(const struct push_env *env, const struct store_delivery *d, const char *addr,
                    const char *be, const char *srvt, const char *map, const struct servers *sv,
                    struct push_result *res)
{
    json_t *want = NULL, *v;
    struct map_answer m;
    struct batch b;
    char err[256] = "";
    const char *key;

    batch_init(&b);
    if (!map_want(d, be, srvt, sv, &want, res))
        goto out;
    memset(&m, 0, sizeof(m));
    m.want = want;
    if (!map_read(addr, map, false, &m, res))
        goto out;
    if (m.unknown && json_object_size(want) == 0) {
        res->ok = true; /* a backend that pins nothing need not load a map */
        goto out;
    }
    if (!m.unknown && !m.differs) {
        res->ok = true; /* HAProxy holds this map already */
        goto out;
    }
    if (!push_fence(env, d, res))
        goto out;
    if (!map_read(addr, map, true, &m, res))
        goto out;
    if (m.unknown) {
        snprintf(res->error, sizeof(res->error), "prepare map %.200s: Unknown map", map);
        goto out;
    }
    json_object_foreach(want, key, v)
    {
        if (!batch_add(&b, "add map @%lu %s %s %s", m.ver, map, key, json_string_value(v)))
            break;
    }
    if (!batch_add(&b, "commit map @%lu %s", m.ver, map)) {
        snprintf(res->error, sizeof(res->error), "too many map entries for one batch");
        goto out;
    }
    m.prepare = SIZE_MAX;
    m.list = b.n;
    m.seen = 0;
    m.differs = false;
    m.why[0] = '\0';
    if (!batch_add(&b, "show map %s", map)) {
        snprintf(res->error, sizeof(res->error), "too many map entries for one batch");
        goto out;
    }
    if (!push_fence(env, d, res))
        goto out;
    if (!session(addr, &b, on_map, &m, err, sizeof(err))) {
        snprintf(res->error, sizeof(res->error), "map %.200s: %.280s", map, err[0] ? err : m.why);
        goto out;
    }
    if (m.differs || m.seen != json_object_size(want)) {
        snprintf(res->error, sizeof(res->error), "show map %.200s after the commit: %.280s", map,
                 m.why[0] ? m.why : "entries missing");
        goto out;
    }
    res->ok = true;
out:
    mg_buf_release(&b.text);
    json_decref(want);
}

void push_haproxy_deliver(const struct push_env *env, const struct store_delivery *d,
                          struct push_result *res)
{
    const char *addr = json_string_value(json_object_get(d->config, "address"));
    const char *bet = json_string_value(json_object_get(d->config, "backend"));
    const char *srvt = json_string_value(json_object_get(d->config, "server"));
    const char *mapt = json_string_value(json_object_get(d->config, "map"));
    json_t *shadow = json_object_get(d->payload, "shadow");
    char be[NAME_MAX_LEN], map[MAP_MAX_LEN];
    struct servers sv;

    memset(&sv, 0, sizeof(sv));
    if (!addr || !bet || !srvt || !push_expand(bet, d->model, d->alias, 0, be, sizeof(be)) ||
        (mapt && !push_expand(mapt, d->model, d->alias, 0, map, sizeof(map)))) {
        snprintf(res->error, sizeof(res->error), "gateway misconfigured");
        return;
    }
    if (json_is_object(shadow)) {
        snprintf(res->error, sizeof(res->error),
                 "HAProxy cannot copy requests to a shadow (v%lld); nothing was sent: remove "
                 "the shadow, or serve the alias through nginx or a webhook",
                 (long long)json_integer_value(json_object_get(shadow, "version")));
        return;
    }
    if (json_array_size(json_object_get(d->payload, "match")) > 0 && mapt == NULL) {
        snprintf(res->error, sizeof(res->error),
                 "the alias pins headers and the gateway names no \"map\" to put them in; "
                 "nothing was sent");
        return;
    }
    if (!read_servers(addr, be, &sv, res))
        return;
    set_weights(env, d, addr, be, srvt, &sv, res);
    if (res->ok && mapt) {
        res->ok = false;
        set_map(env, d, addr, be, srvt, map, &sv, res);
    }
    servers_release(&sv);
}

/* Where a delivery of d would write: address, backend and map (mapt NULL: none); false when
 * the gateway's config cannot make them. */
static bool targets(const struct store_delivery *d, const char **addr, char be[NAME_MAX_LEN],
                    const char **srvt, const char **mapt, char map[MAP_MAX_LEN])
{
    const char *bet = json_string_value(json_object_get(d->config, "backend"));

    *addr = json_string_value(json_object_get(d->config, "address"));
    *srvt = json_string_value(json_object_get(d->config, "server"));
    *mapt = json_string_value(json_object_get(d->config, "map"));
    return *addr && bet && *srvt && push_expand(bet, d->model, d->alias, 0, be, NAME_MAX_LEN) &&
           (!*mapt || push_expand(*mapt, d->model, d->alias, 0, map, MAP_MAX_LEN));
}

bool push_haproxy_check(const struct push_env *env, const struct store_delivery *d, bool *drift,
                        char *why, size_t whylen)
{
    const char *addr, *srvt, *mapt;
    char be[NAME_MAX_LEN], map[MAP_MAX_LEN];
    struct push_result res;
    struct servers sv;
    json_t *want = NULL;
    bool ok = false;

    (void)env;
    *drift = false;
    memset(&res, 0, sizeof(res));
    memset(&sv, 0, sizeof(sv));
    if (!targets(d, &addr, be, &srvt, &mapt, map)) {
        snprintf(why, whylen, "gateway misconfigured");
        return false;
    }
    if (!read_servers(addr, be, &sv, &res)) {
        snprintf(why, whylen, "%s", res.error);
        return false;
    }
    ok = true;
    for (size_t i = 0; i < sv.n && !*drift; i++) {
        int w = wanted(d, srvt, sv.s[i].name);

        if (sv.s[i].weight != w) {
            snprintf(why, whylen, "HAProxy has %.100s/%.100s at weight %d, not %d", be,
                     sv.s[i].name, sv.s[i].weight, w);
            *drift = true;
        }
    }
    if (!*drift && mapt && !map_want(d, be, srvt, &sv, &want, &res)) {
        snprintf(why, whylen, "%s", res.error);
        *drift = true;
    }
    if (!*drift && mapt) {
        struct map_answer m;

        memset(&m, 0, sizeof(m));
        m.want = want;
        if (!map_read(addr, map, false, &m, &res)) {
            snprintf(why, whylen, "%s", res.error);
            ok = false;
        } else if (m.unknown ? json_object_size(want) > 0 : m.differs) {
            snprintf(why, whylen, "map %.200s: %.280s", map, m.unknown ? "not loaded" : m.why);
            *drift = true;
        }
    }
    json_decref(want);
    servers_release(&sv);
    return ok;
}
