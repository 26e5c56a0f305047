/*
 * haproxy.c - apply routes through HAProxy's runtime API (TCP "host:port" or
 * "unix:/path"): `set weight <backend>/<server> <w>` for each routed version,
 * weight 0 for every other server of the backend (`show servers state`),
 * then `get weight` to confirm. HAProxy's own error text ("No such
 * server.") becomes the delivery's error.
 *
 * Header match rules (API.md "Routing strategies") go into a map the gateway's config names
 * ("map"), replaced atomically with a new version of it (`prepare map`, `add map @<ver>`
 * for each rule, `commit map @<ver>`) and read back with `show map`; no reload. A key is
 * "<header>=<value>" (a header name holds no '='), its value the pinned version's server.
 * The backend's config, written once, looks each header up and pins with `use-server`
 * (README). HAProxy copies no requests: a generation with a shadow is refused.
 */
#include "push.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "../../common/util.h"
#include "../../gates/routing.h"

#define HAPROXY_IO_MS 3000
#define HAPROXY_REPLY_MAX (256 * 1024)
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
    const char *srv = json_string_value(json_object_get(body, "server"));
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
    if (srv == NULL || !name_template_ok(srv) || strstr(srv, "{version}") == NULL)
        return mg_fail(err, MG_EINVAL, "server",
                       "server is a name template with {version}, such as v{version}");
    *config = json_pack("{s:s, s:s, s:s}", "address", addr, "backend", be, "server", srv);
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

/* One runtime API command (non-interactive: HAProxy answers and closes).
 * The reply goes to *out (malloc'd). Returns false on transport errors. */
static bool command(const char *addr, const char *cmd, char **out, char *err, size_t errsz)
{
    struct mg_buf b;
    int fd = connect_to(addr, err, errsz);
    size_t n = strlen(cmd), off = 0;
    struct pollfd pfd;
    char buf[4096];

    *out = NULL;
    if (fd < 0)
        return false;
    while (off < n) {
        ssize_t w = send(fd, cmd + off, n - off, MSG_NOSIGNAL);
        if (w <= 0) {
            snprintf(err, errsz, "cannot send to HAProxy: %s", strerror(errno));
            close(fd);
            return false;
        }
        off += (size_t)w;
    }
    mg_buf_init(&b, HAPROXY_REPLY_MAX);
    pfd.fd = fd;
    pfd.events = POLLIN;
    for (;;) {
        ssize_t r;
        if (poll(&pfd, 1, HAPROXY_IO_MS) != 1) {
            snprintf(err, errsz, "HAProxy did not answer '%.*s' in time", (int)strcspn(cmd, "\n"),
                     cmd);
            close(fd);
            mg_buf_release(&b);
            return false;
        }
        r = recv(fd, buf, sizeof(buf), 0);
        if (r == 0)
            break;
        if (r < 0 || mg_buf_append(&b, buf, (size_t)r) != MG_OK) {
            snprintf(err, errsz, "reading HAProxy's answer failed");
            close(fd);
            mg_buf_release(&b);
            return false;
        }
    }
    close(fd);
    if (mg_buf_append(&b, "", 0) != MG_OK) {
        mg_buf_release(&b);
        return false;
    }
    *out = b.data ? b.data : strdup("");
    return *out != NULL;
}

/* HAProxy answers a successful `set weight` with an empty line. */
static bool blank(const char *s)
{
    while (*s == '\n' || *s == '\r' || *s == ' ')
        s++;
    return *s == '\0';
}

static void trim_copy(char *dst, size_t n, const char *src)
{
    size_t len = strcspn(src, "\n");

    snprintf(dst, n, "%.*s", (int)len, src);
}

/* The weights: routed servers get theirs, every other server of the backend 0, read back. */
static void set_weights(const struct store_delivery *d, const char *addr, const char *be,
                        const char *srvt, struct push_result *res)
{
    json_t *routes = json_object_get(d->payload, "routes"), *r;
    char name[NAME_MAX_LEN], cmd[512], *reply = NULL, *line, *save = NULL;
    char err[256] = "";
    size_t i;

    /* 1. the routed servers get their weights */
    json_array_foreach(routes, i, r)
    {
        int64_t v = json_integer_value(json_object_get(r, "version"));
        int w = (int)json_integer_value(json_object_get(r, "weight"));
        if (!push_expand(srvt, d->model, d->alias, v, name, sizeof(name))) {
            snprintf(res->error, sizeof(res->error),
                     "the server template gives a name too long for model %.64s version %lld; "
                     "nothing was sent",
                     d->model, (long long)v);
            return;
        }
        snprintf(cmd, sizeof(cmd), "set weight %s/%s %d\n", be, name, w);
        if (!command(addr, cmd, &reply, err, sizeof(err))) {
            snprintf(res->error, sizeof(res->error), "%s", err);
            return;
        }
        if (!blank(reply)) {
            trim_copy(err, sizeof(err), reply);
            snprintf(res->error, sizeof(res->error), "set weight %.100s/%.100s: %.200s", be, name,
                     err);
            free(reply);
            return;
        }
        free(reply);
    }
    /* 2. every other server of the backend gets 0 */
    snprintf(cmd, sizeof(cmd), "show servers state %s\n", be);
    if (!command(addr, cmd, &reply, err, sizeof(err))) {
        snprintf(res->error, sizeof(res->error), "%s", err);
        return;
    }
    for (line = strtok_r(reply, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char f_be_id[32], f_be[NAME_MAX_LEN], f_id[32], f_srv[NAME_MAX_LEN];
        bool routed = false;

        if (line[0] == '#' || strcmp(line, "1") == 0)
            continue;
        if (strstr(line, "Can't find backend") || strstr(line, "No such backend")) {
            snprintf(res->error, sizeof(res->error), "show servers state %.100s: %.200s", be, line);
            free(reply);
            return;
        }
        if (sscanf(line, "%31s %127s %31s %127s", f_be_id, f_be, f_id, f_srv) != 4)
            continue;
        json_array_foreach(routes, i, r)
        {
            if (push_expand(srvt, d->model, d->alias,
                            json_integer_value(json_object_get(r, "version")), name, sizeof(name)))
                routed = routed || strcmp(name, f_srv) == 0;
        }
        if (!routed) {
            char *rep = NULL;
            snprintf(cmd, sizeof(cmd), "set weight %s/%s 0\n", be, f_srv);
            if (!command(addr, cmd, &rep, err, sizeof(err)) || !blank(rep)) {
                if (rep)
                    trim_copy(err, sizeof(err), rep);
                snprintf(res->error, sizeof(res->error), "set weight %.100s/%.100s 0: %.200s", be,
                         f_srv, err);
                free(rep);
                free(reply);
                return;
            }
            free(rep);
        }
    }
    free(reply);
    /* 3. read back what HAProxy now has */
    json_array_foreach(routes, i, r)
    {
        int w = (int)json_integer_value(json_object_get(r, "weight")), got = -1;
        if (!push_expand(srvt, d->model, d->alias,
                         json_integer_value(json_object_get(r, "version")), name, sizeof(name))) {
            snprintf(res->error, sizeof(res->error),
                     "the server template gives a name too long for model %.64s; nothing was "
                     "sent",
                     d->model);
            return;
        }
        snprintf(cmd, sizeof(cmd), "get weight %s/%s\n", be, name);
        if (!command(addr, cmd, &reply, err, sizeof(err))) {
            snprintf(res->error, sizeof(res->error), "%s", err);
            return;
        }
        if (sscanf(reply, "%d", &got) != 1 || got != w) {
            trim_copy(err, sizeof(err), reply);
            snprintf(res->error, sizeof(res->error),
                     "get weight %.100s/%.100s says '%.200s', expected %d", be, name, err, w);
            free(reply);
            return;
        }
        free(reply);
    }
    res->ok = true;
}

/* One runtime API command whose success is an empty answer; false with res->error set. */
static bool quiet(const char *addr, const char *cmd, struct push_result *res)
{
    char err[256] = "", *reply = NULL;
    bool ok;

    if (!command(addr, cmd, &reply, err, sizeof(err))) {
        snprintf(res->error, sizeof(res->error), "%s", err);
        return false;
    }
    ok = blank(reply);
    if (!ok) {
        trim_copy(err, sizeof(err), reply);
        snprintf(res->error, sizeof(res->error), "%.*s: %.200s", (int)strcspn(cmd, "\n"), cmd, err);
    }
    free(reply);
    return ok;
}

/* The server a match rule pins, into name; false (res->error set) when the template does
 * not fit or HAProxy has no such server in the backend (use-server would ignore it). */
static bool pinned_server(const struct store_delivery *d, const char *addr, const char *be,
                          const char *srvt, const json_t *rule, char *name, size_t cap,
                          struct push_result *res)
{
    int64_t v = json_integer_value(json_object_get(rule, "version"));
    char cmd[512], err[256] = "", *reply = NULL;
    int w;

    if (!push_expand(srvt, d->model, d->alias, v, name, cap)) {
        snprintf(res->error, sizeof(res->error),
                 "the server template gives a name too long for model %.64s version %lld; "
                 "nothing was sent",
                 d->model, (long long)v);
        return false;
    }
    snprintf(cmd, sizeof(cmd), "get weight %s/%s\n", be, name);
    if (!command(addr, cmd, &reply, err, sizeof(err))) {
        snprintf(res->error, sizeof(res->error), "%s", err);
        return false;
    }
    if (sscanf(reply, "%d", &w) != 1) {
        trim_copy(err, sizeof(err), reply);
        snprintf(res->error, sizeof(res->error),
                 "get weight %.100s/%.100s (pinned by a match "
                 "rule): %.200s",
                 be, name, err);
        free(reply);
        return false;
    }
    free(reply);
    return true;
}

/* Does `show map` list exactly the entries of want ({"key": "value"})? */
static bool map_holds(const char *reply, const json_t *want, char *why, size_t whylen)
{
    char *copy = strdup(reply), *line, *save = NULL;
    size_t seen = 0;
    bool ok = copy != NULL;

    for (line = copy ? strtok_r(copy, "\n", &save) : NULL; ok && line;
         line = strtok_r(NULL, "\n", &save)) {
        _Static_assert(GATE_HEADER_NAME_MAX + GATE_HEADER_VALUE_MAX + 2 == 194, "%193s below");
        char ref[64], key[GATE_HEADER_NAME_MAX + GATE_HEADER_VALUE_MAX + 2], val[NAME_MAX_LEN];
        const char *w;

        if (sscanf(line, "%63s %193s %127s", ref, key, val) != 3) {
            snprintf(why, whylen, "show map answered '%.200s'", line);
            ok = false;
            break;
        }
        w = json_string_value(json_object_get(want, key));
        if (w == NULL || strcmp(w, val) != 0) {
            snprintf(why, whylen, "the map holds '%.200s %.100s'", key, val);
            ok = false;
        }
        seen++;
    }
    if (ok && seen != json_object_size(want)) {
        snprintf(why, whylen, "the map holds %zu entries, not %zu", seen, json_object_size(want));
        ok = false;
    }
    free(copy);
    return ok;
}

/* The match rules into the map: a new version with one entry per rule, committed at once,
 * read back. */
static void set_map(const struct store_delivery *d, const char *addr, const char *be,
                    const char *srvt, const char *map, struct push_result *res)
{
    json_t *match = json_object_get(d->payload, "match"), *r, *want = json_object();
    char cmd[1024], name[NAME_MAX_LEN], err[256] = "", why[320] = "", *reply = NULL;
    unsigned long ver = 0;
    size_t i;

    if (want == NULL) {
        snprintf(res->error, sizeof(res->error), "out of memory");
        return;
    }
    json_array_foreach(match, i, r)
    {
        char key[GATE_HEADER_NAME_MAX + GATE_HEADER_VALUE_MAX + 2];

        if (!pinned_server(d, addr, be, srvt, r, name, sizeof(name), res))
            goto out;
        snprintf(key, sizeof(key), "%s=%s", json_string_value(json_object_get(r, "header")),
                 json_string_value(json_object_get(r, "value")));
        json_object_set_new(want, key, json_string(name));
    }
    snprintf(cmd, sizeof(cmd), "prepare map %s\n", map);
    if (!command(addr, cmd, &reply, err, sizeof(err))) {
        snprintf(res->error, sizeof(res->error), "%s", err);
        goto out;
    }
    if (json_object_size(want) == 0 && strstr(reply, "Unknown map") != NULL) {
        res->ok = true; /* a backend that pins nothing need not load a map */
        goto out;
    }
    if (sscanf(reply, "New version created: %lu", &ver) != 1) {
        trim_copy(err, sizeof(err), reply);
        snprintf(res->error, sizeof(res->error), "prepare map %.200s: %.200s", map, err);
        goto out;
    }
    free(reply);
    reply = NULL;
    {
        const char *key;
        json_t *v;

        json_object_foreach(want, key, v)
        {
            snprintf(cmd, sizeof(cmd), "add map @%lu %s %s %s\n", ver, map, key,
                     json_string_value(v));
            if (!quiet(addr, cmd, res))
                goto out;
        }
    }
    snprintf(cmd, sizeof(cmd), "commit map @%lu %s\n", ver, map);
    if (!quiet(addr, cmd, res))
        goto out;
    snprintf(cmd, sizeof(cmd), "show map %s\n", map);
    if (!command(addr, cmd, &reply, err, sizeof(err))) {
        snprintf(res->error, sizeof(res->error), "%s", err);
        goto out;
    }
    if (!map_holds(reply, want, why, sizeof(why))) {
        snprintf(res->error, sizeof(res->error), "show map %.200s after the commit: %.280s", map,
                 why);
        goto out;
    }
    res->ok = true;
out:
    free(reply);
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

    (void)env;
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
    set_weights(d, addr, be, srvt, res);
    if (res->ok && mapt) {
        res->ok = false;
        set_map(d, addr, be, srvt, map, res);
    }
}
