/*
 * push_common.c - see push_common.h.
 */
#include "push_common.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <curl/curl.h>
#include <dirent.h>

/* ---- HAProxy runtime API ------------------------------------------------ */

char *pc_haproxy_cmd(int port, const char *cmd)
{
    int fd = it_connect(port);
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

int pc_haproxy_weight(int port, const char *be, const char *srv)
{
    char cmd[256];
    char *reply;
    int w = -1;

    reply = pc_haproxy_cmd(port, it_fmt(cmd, sizeof(cmd), "get weight %s/%s\n", be, srv));
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

static size_t pc_on_body(char *p, size_t size, size_t n, void *arg)
{
    struct pc_body *b = arg;
    size_t len = size * n, room = sizeof(b->buf) - 1 - b->len;

    memcpy(b->buf + b->len, p, len < room ? len : room);
    b->len += len < room ? len : room;
    b->buf[b->len] = '\0';
    return len;
}

void pc_count(const char *url, int n, size_t k, const char *const *names, int *counts)
{
    pc_count_h(url, NULL, n, k, names, counts);
}

void pc_count_h(const char *url, const char *header, int n, size_t k, const char *const *names,
                int *counts)
{
    CURL *c = curl_easy_init();
    struct curl_slist *h = header ? curl_slist_append(NULL, header) : NULL;
    int i;

    if (c == NULL || (header && h == NULL))
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
        if (h != NULL)
            curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
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
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
}

void pc_expect_split_at(int n, size_t k, const char *const *names, const int *counts,
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

/* ---- gateways and deliveries ---------------------------------------------- */

void pc_gateway_put(struct mg_server *s, const char *name, const char *config)
{
    char path[256], host[256] = "localhost";
    json_t *c = json_loads(config, 0, NULL);
    const char *kind = json_string_value(json_object_get(c, "kind"));
    const char *addr = json_string_value(json_object_get(c, "address"));
    char *text = NULL;
    struct it_resp *r;

    /* Replicas on PostgreSQL deliver a host-local gateway from one host: name ours. */
    if (it_on_postgres() && kind && json_object_get(c, "host") == NULL &&
        (strcmp(kind, "nginx") == 0 ||
         (strcmp(kind, "haproxy") == 0 && addr && strncmp(addr, "unix:", 5) == 0))) {
        gethostname(host, sizeof(host) - 1);
        json_object_set_new(c, "host", json_string(host));
        text = json_dumps(c, JSON_COMPACT);
    }
    r = it_jreq(s, "PUT", it_fmt(path, sizeof(path), "/api/v1/gateways/%s", name), s->admin_token,
                text ? text : config);
    free(text);
    json_decref(c);

    if (r->status != 200 && r->status != 201)
        it_expect_status(s, r, 201);
    it_resp_free(s, &r);
}

void pc_gateway_delete(struct mg_server *s, const char *name)
{
    char path[256];
    struct it_resp *r =
        it_request(s, "DELETE", it_fmt(path, sizeof(path), "/api/v1/gateways/%s", name),
                   s->admin_token, NULL, NULL, 0);

    it_expect_status(s, r, 204);
    it_resp_free(s, &r);
}

struct it_resp *pc_gateway_get(struct mg_server *s, const char *name)
{
    char path[256];
    struct it_resp *r =
        it_get(s, it_fmt(path, sizeof(path), "/api/v1/gateways/%s", name), s->admin_token);

    it_expect_status(s, r, 200);
    return r;
}

json_t *pc_gw_delivery(const json_t *gw, const char *model, const char *alias)
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

json_t *pc_alias_delivery(const json_t *alias, const char *gateway)
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

bool pc_all_in_sync(const json_t *alias)
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

void pc_dump_server_notes(const struct mg_server *s, size_t max_lines)
{
    char *log = it_read_file(s->log_path, NULL);
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

struct it_resp *pc_wait_delivery_at(struct mg_server *s, const char *gw, const char *model,
                                    const char *alias, json_int_t gen, const char *state,
                                    int64_t timeout_ms, const char *file, int line)
{
    int64_t deadline = it_deadline(timeout_ms);

    for (;;) {
        struct it_resp *r = pc_gateway_get(s, gw);
        json_t *d = pc_gw_delivery(r->json, model, alias);
        const char *st = json_string_value(json_object_get(d, "state"));

        if (d != NULL &&
            (gen == 0 || json_integer_value(json_object_get(d, "generation")) == gen) &&
            st != NULL && strcmp(st, state) == 0)
            return r;
        if (it_now_ms() > deadline) {
            print_error("gateway %s, %s/%s: want generation %lld %s; the gateway is: %.3000s\n", gw,
                        model, alias, (long long)gen, state, r->body);
            pc_dump_server_notes(s, 12);
            _fail(file, line);
        }
        it_resp_free(s, &r);
        it_pause_ms(20);
    }
}

/* ---- nginx reloads --------------------------------------------------------- */

size_t pc_children(pid_t parent, pid_t *out, size_t max)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    size_t n = 0;

    if (d == NULL)
        fail_msg("opendir /proc: %s", strerror(errno));
    while ((e = readdir(d)) != NULL && n < max) {
        char path[300], buf[512], *p;
        FILE *f;
        int ppid = 0;

        if (e->d_name[0] < '1' || e->d_name[0] > '9')
            continue;
        f = fopen(it_fmt(path, sizeof(path), "/proc/%s/stat", e->d_name), "re");
        if (f == NULL)
            continue;
        if (fgets(buf, sizeof(buf), f) != NULL && (p = strrchr(buf, ')')) != NULL &&
            sscanf(p + 1, " %*c %d", &ppid) == 1 && ppid == parent)
            out[n++] = (pid_t)atoi(e->d_name);
        fclose(f);
    }
    closedir(d);
    return n;
}

void pc_wait_replaced(pid_t parent, const pid_t *old, size_t nold, int64_t timeout_ms)
{
    int64_t deadline = it_deadline(timeout_ms);

    for (;;) {
        pid_t now[PC_MAX_CHILDREN];
        size_t n = pc_children(parent, now, PC_MAX_CHILDREN);
        bool stale = false;

        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < nold; j++)
                stale = stale || now[i] == old[j];
        if (n > 0 && !stale)
            return;
        if (it_now_ms() > deadline)
            fail_msg("nginx (pid %d) did not replace its workers after the reload", (int)parent);
        it_pause_ms(10);
    }
}
