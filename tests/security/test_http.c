/*
 * test_http.c - M18: what an attacker sends at the HTTP layer, against the real daemon.
 *
 * - Targets with %00, control characters, malformed escapes or bytes that are not UTF-8
 *   are refused with 400 before routing, on every route of the OpenAPI document (so a new
 *   route is covered by construction), and the message never echoes the bytes.
 * - Each request is one log line, in text and JSON logs alike: CR/LF in a path cannot forge
 *   a line, and a path that is not UTF-8 is still logged.
 * - Framing that a proxy may read another way (Content-Length with Transfer-Encoding, two
 *   different Content-Length values) is refused with 400 and the connection closed: the
 *   request smuggled behind it is never answered.
 * - Hostile methods cannot break /metrics (promtool parses it) or grow its series: every
 *   method label is a standard method or "other".
 * - Authenticated bytes are never "public" to shared caches; one Cache-Control per reply.
 */
#include "tests/integration/harness.h"
#include "tests/integration/sys.h"

#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

static struct mg_server *srv;

/* Send req (then, with half_close, shut down the sending side), read until the server
 * closes or wait_ms pass; *closed tells which. */
static char *exchange_with(int port, const char *req, size_t len, bool half_close, int wait_ms,
                           bool *closed)
{
    int fd = it_connect(port);
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    int64_t deadline = it_deadline(wait_ms);

    assert_non_null(buf);
    *closed = false;
    while (len > 0) {
        ssize_t w = send(fd, req, len, MSG_NOSIGNAL);

        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break; /* the server may close before reading all: its reply is still there */
        req += w;
        len -= (size_t)w;
    }
    if (half_close)
        shutdown(fd, SHUT_WR);
    while (it_now_ms() < deadline && n < cap) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        ssize_t r;

        if (poll(&p, 1, 100) <= 0)
            continue;
        r = recv(fd, buf + n, cap - n, 0);
        if (r == 0 || (r < 0 && errno == ECONNRESET)) {
            *closed = true;
            break;
        }
        if (r > 0)
            n += (size_t)r;
    }
    buf[n] = '\0';
    close(fd);
    return buf;
}

static char *exchange(int port, const char *req, size_t len, bool *closed)
{
    return exchange_with(port, req, len, false, 5000, closed);
}

/* GET target as raw bytes with the admin token, on a connection the server may keep. */
static char *raw_get(const char *method, const char *target)
{
    char req[4096];
    bool closed;

    snprintf(req, sizeof(req),
             "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n"
             "Connection: close\r\n\r\n",
             method, target, srv->admin_token);
    return exchange(srv->port, req, strlen(req), &closed);
}

static long status_of(const char *resp)
{
    long st = 0;

    if (sscanf(resp, "HTTP/1.%*d %ld", &st) != 1)
        return 0;
    return st;
}

/* The JSON body of a raw response (NEW reference), or NULL. */
static json_t *body_of(const char *resp)
{
    const char *b = strstr(resp, "\r\n\r\n");

    return b ? json_loads(b + 4, 0, NULL) : NULL;
}

static void expect_refused_target(const char *target, const char *const *never_echoed)
{
    char *resp = raw_get("GET", target);
    json_t *body = body_of(resp);
    const char *msg;

    if (status_of(resp) != 400)
        fail_msg("GET %s: status %ld, expected 400:\n%.400s", target, status_of(resp), resp);
    if (body == NULL)
        fail_msg("GET %s: the 400 carries no JSON error body:\n%.400s", target, resp);
    assert_string_equal(json_string_value(json_object_get(json_object_get(body, "error"), "code")),
                        "invalid_argument");
    msg = json_string_value(json_object_get(json_object_get(body, "error"), "message"));
    assert_non_null(msg);
    for (size_t i = 0; never_echoed && never_echoed[i]; i++) {
        if (strstr(msg, never_echoed[i]) != NULL)
            fail_msg("GET %s: the message echoes '%s': %s", target, never_echoed[i], msg);
    }
    json_decref(body);
    free(resp);
}

static void test_hostile_targets(void **state)
{
    static const char *const never[] = {"junk", "Forged", "\xff", "\r", "\n", NULL};
    static const char *const targets[] = {
        "/api/v1/tokens%00junk",
        "/static/app.js%00.html",
        "/api/v1/models/%ff",
        "/api/v1/models/%c0%af",    /* overlong '/' */
        "/api/v1/models/%ed%a0%80", /* a UTF-16 surrogate */
        "/api/v1/models/a%0d%0aX-Forged:%201",
        "/api/v1/models/%7f",
        "/api/v1/models/%zz",
        "/api/v1/models/%",
        "/api/v1/models/fraud/versions/1%00",
        "/healthz%00",
    };
    char *resp;

    (void)state;
    for (size_t i = 0; i < sizeof(targets) / sizeof(targets[0]); i++)
        expect_refused_target(targets[i], never);

    /* a well-formed UTF-8 name is not refused for its encoding (404: no such model) */
    resp = raw_get("GET", "/api/v1/models/%c3%a9t%c3%a9");
    assert_int_not_equal(status_of(resp), 500);
    assert_int_not_equal(status_of(resp), 0);
    free(resp);
    /* a query string keeps its own rules: a NUL there does not touch the path check */
    resp = raw_get("GET", "/api/v1/models?q=fr");
    assert_int_equal(status_of(resp), 200);
    free(resp);
}

/* Every route of the OpenAPI document, with each path parameter replaced by a hostile
 * value: 400 before routing, never a 5xx, and never a reply shared caches may keep. */
static void test_route_sweep(void **state)
{
    static const char *const hostile[] = {"%00", "%ff", "a%0a", "x%00.html", "%e2%80"};
    struct it_resp *doc = it_get(srv, "/openapi.json", NULL);
    const char *path;
    json_t *ops;
    size_t routes = 0;

    (void)state;
    assert_int_equal(doc->status, 200);
    assert_non_null(doc->json);
    json_object_foreach(json_object_get(doc->json, "paths"), path, ops)
    {
        const char *method;
        json_t *op;

        json_object_foreach(ops, method, op)
        {
            char up[16];
            size_t k;

            if (strcmp(method, "parameters") == 0)
                continue;
            for (k = 0; method[k] && k < sizeof(up) - 1; k++)
                up[k] = (char)toupper((unsigned char)method[k]);
            up[k] = '\0';
            for (size_t h = 0; h < sizeof(hostile) / sizeof(hostile[0]); h++) {
                char target[1024], *resp;
                const char *p = path;
                size_t o = 0;

                /* every {param} becomes the hostile value; a route without parameters gets
                 * it appended to its last segment */
                while (*p && o < sizeof(target) - 64) {
                    if (*p == '{') {
                        o += (size_t)snprintf(target + o, sizeof(target) - o, "%s", hostile[h]);
                        p = strchr(p, '}');
                        assert_non_null(p);
                        p++;
                    } else {
                        target[o++] = *p++;
                    }
                }
                target[o] = '\0';
                if (strchr(path, '{') == NULL)
                    snprintf(target + o, sizeof(target) - o, "%s", hostile[h]);
                resp = raw_get(up, target);
                if (status_of(resp) != 400)
                    fail_msg("%s %s: status %ld, expected 400:\n%.300s", up, target,
                             status_of(resp), resp);
                free(resp);
            }
            routes++;
        }
    }
    assert_true(routes > 40);
    it_release(srv);
}

static size_t count_lines_with(const char *text, const char *needle)
{
    size_t n = 0;

    for (const char *p = text; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

/* The text log: one line per request, none forged. */
static void test_log_lines_text(void **state)
{
    char *resp, *log;
    size_t len;
    const char *line;

    (void)state;
    resp = raw_get("GET", "/api/v1/models/a%0d%0a2026-01-01T00:00:00.000Z%20GET%20/FORGED%20200");
    free(resp);
    resp = raw_get("GET", "/api/v1/models/%ff%fe");
    free(resp);
    resp = raw_get("GET", "/api/v1/models/ok-name");
    free(resp);
    /* Lines are written in batches, in order (http/reqlog.h): once the last request's line is
     * there, so are the two before it. Other tests' lines may still arrive: each of these
     * requests is counted by its own path. */
    for (int64_t d = it_deadline(5000);; it_pause_ms(20)) {
        log = it_read_file(srv->log_path, &len);
        if (count_lines_with(log, " GET /api/v1/models/ok-name ") > 0 || it_now_ms() > d)
            break;
        free(log);
    }
    assert_int_equal(count_lines_with(log, " GET /api/v1/models/ok-name "), 1);
    /* as sent, on one line of its own */
    assert_int_equal(count_lines_with(log, " GET /api/v1/models/a%0d%0a2026-01-01"), 1);
    assert_int_equal(count_lines_with(log, " GET /api/v1/models/%ff%fe ") +
                         count_lines_with(log, " GET /api/v1/models/\\xff\\xfe "),
                     1);
    for (line = log; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        if (strncmp(line, "2026-01-01T00:00:00.000Z", 24) == 0 || strncmp(line, " GET", 4) == 0)
            fail_msg("a forged log line: %.120s", line);
    }
    free(log);
}

/* The JSON log: every line parses, including a path that decodes to bytes that are not
 * UTF-8 and a method with a quote in it. */
static void test_log_lines_json(void **state)
{
    struct mg_server *j = it_server_start((const char *const[]){"--log-format", "json", NULL});
    char req[512], *resp, *log, *line, *save = NULL;
    bool closed;
    size_t len, n = 0, seen_ff = 0;

    (void)state;
    snprintf(req, sizeof(req),
             "GET /api/v1/models/\xff%%0a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    free(exchange(j->port, req, strlen(req), &closed));
    snprintf(req, sizeof(req),
             "GET /api/v1/models/%%ff HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    free(exchange(j->port, req, strlen(req), &closed));
    resp = NULL;
    it_server_stop(j);
    log = it_read_file(j->log_path, &len);
    for (line = strtok_r(log, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        json_t *l;

        if (line[0] != '{')
            continue; /* startup notes */
        l = json_loads(line, 0, NULL);
        if (l == NULL)
            fail_msg("a JSON log line that does not parse: %.200s", line);
        if (strstr(json_string_value(json_object_get(l, "path")) ?: "", "\\xff") ||
            strstr(json_string_value(json_object_get(l, "path")) ?: "", "%ff"))
            seen_ff++;
        n++;
        json_decref(l);
    }
    assert_true(n >= 2);
    assert_true(seen_ff >= 2); /* neither request went unlogged */
    free(log);
    free(resp);
    it_server_free(&j);
}

static void expect_refused_and_closed(const char *req, const char *what)
{
    bool closed;
    char *resp = exchange(srv->port, req, strlen(req), &closed);

    if (status_of(resp) != 400)
        fail_msg("%s: status %ld, expected 400:\n%.400s", what, status_of(resp), resp);
    if (!closed)
        fail_msg("%s: the connection stayed open after the 400", what);
    if (strstr(resp, "HTTP/1.1 200") != NULL || strstr(resp, "\"status\":\"ok\"") != NULL)
        fail_msg("%s: the request smuggled behind it was answered:\n%.600s", what, resp);
    if (count_lines_with(resp, "HTTP/1.1 ") != 1)
        fail_msg("%s: more than one reply:\n%.600s", what, resp);
    free(resp);
}

static void test_framing(void **state)
{
    char req[1024];
    bool closed;
    char *resp;

    (void)state;
    snprintf(req, sizeof(req),
             "POST /api/v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
             "Content-Type: application/json\r\nContent-Length: 4\r\n"
             "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
             srv->admin_token);
    expect_refused_and_closed(req, "Content-Length with Transfer-Encoding");
    snprintf(req, sizeof(req),
             "POST /api/v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
             "Content-Type: application/json\r\nContent-Length: 15\r\nContent-Length: 0\r\n\r\n"
             "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
             srv->admin_token);
    expect_refused_and_closed(req, "two different Content-Length values");
    snprintf(req, sizeof(req),
             "POST /api/v1/models HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
             "Content-Length: 0\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
    expect_refused_and_closed(req, "Transfer-Encoding then Content-Length, no token");

    /* the same value twice is one length (RFC 9110 §8.6 allows a list of equal values) */
    snprintf(req, sizeof(req),
             "POST /api/v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"
             "Content-Type: application/json\r\nContent-Length: 17\r\nContent-Length: 17\r\n"
             "Connection: close\r\n\r\n{\"name\":\"twice\"}",
             srv->admin_token);
    resp = exchange(srv->port, req, strlen(req), &closed);
    assert_int_not_equal(status_of(resp), 500);
    free(resp);
}

/* A client that shuts down its sending side after its request (as an HTTP/1.0 client or a
 * TCP proxy passing a FIN on may) is answered, and the connection ends then (within about
 * 2.5 s), not at the 60 s timeout. With epoll, no event follows a FIN that came in with the
 * request (http.c, peer_gone); an upload cut off mid-body is
 * test_blobs:test_aborted_upload_leaves_nothing. (A request answered later, after work on
 * another thread or ?wait, may get no answer on a half-closed connection: libmicrohttpd takes
 * the end of the stream it reads meanwhile for an abort, with poll as with epoll.) */
static void test_half_closed_client(void **state)
{
    const char req[] = "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
    bool closed;
    char *resp;

    (void)state;
    resp = exchange_with(srv->port, req, strlen(req), true, 10000, &closed);
    assert_int_equal(status_of(resp), 200);
    if (!closed)
        fail_msg("the server kept a half-closed connection open 10 s after answering it");
    free(resp);
}

static void test_metrics_hostile_methods(void **state)
{
    static const char *const methods[] = {
        "X\"}9",    "get",  "PROPFIND",
        "M-SEARCH", "X\\y", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"};
    char path[IT_PATH_MAX + 32], cmd[IT_PATH_MAX * 3], m[64];
    struct it_resp *r;
    const char *p;
    size_t before = 0, after = 0;

    (void)state;
    r = it_get(srv, "/metrics", srv->admin_token);
    before = count_lines_with(r->body, "modelgate_http_requests_total{");
    it_resp_free(srv, &r);
    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
        free(raw_get(methods[i], "/healthz"));
    for (int i = 0; i < 40; i++) {
        snprintf(m, sizeof(m), "LONGMETHOD%dXYZ", i);
        free(raw_get(m, "/healthz"));
    }
    r = it_get(srv, "/metrics", srv->admin_token);
    assert_int_equal(r->status, 200);
    /* every method label is standard or "other" */
    for (p = r->body; (p = strstr(p, "method=\"")) != NULL;) {
        static const char *const ok[] = {"GET\"",   "HEAD\"",   "POST\"",    "PUT\"",
                                         "PATCH\"", "DELETE\"", "OPTIONS\"", "other\""};
        bool good = false;

        p += 8;
        for (size_t k = 0; k < sizeof(ok) / sizeof(ok[0]); k++)
            good |= strncmp(p, ok[k], strlen(ok[k])) == 0;
        if (!good)
            fail_msg("a method label that is neither standard nor 'other': %.40s", p);
    }
    /* 46 odd methods added at most a handful of series (per route and status), not 46 */
    after = count_lines_with(r->body, "modelgate_http_requests_total{");
    assert_true(after <= before + 8);
    snprintf(path, sizeof(path), "%s/metrics.txt", srv->root);
    it_write_file(path, r->body);
    snprintf(cmd, sizeof(cmd), "promtool check metrics < '%s' > '%s.out' 2>&1", path, path);
    if (system(cmd) != 0) {
        snprintf(cmd, sizeof(cmd), "%s.out", path);
        fail_msg("promtool refuses /metrics:\n%s", it_read_file(cmd, NULL));
    }
    it_resp_free(srv, &r);
}

static size_t header_count(const struct it_resp *r, const char *name)
{
    size_t n = 0;

    for (size_t i = 0; i < r->n_headers; i++)
        n += strcasecmp(r->headers[i].name, name) == 0;
    return n;
}

static void test_cache_control(void **state)
{
    static const char data[] = "private model bytes";
    char digest[IT_DIGEST_LEN + 1], path[256];
    struct it_resp *r;
    const char *cc;

    (void)state;
    it_digest(data, sizeof(data) - 1, digest);
    r = it_upload(srv, data, sizeof(data) - 1, NULL);
    it_resp_free(srv, &r);
    snprintf(path, sizeof(path), "/api/v1/blobs/%s", digest);
    r = it_get(srv, path, srv->admin_token);
    assert_int_equal(r->status, 200);
    assert_int_equal(header_count(r, "Cache-Control"), 1);
    cc = it_header(r, "Cache-Control");
    assert_non_null(cc);
    assert_null(strstr(cc, "public"));
    assert_non_null(strstr(cc, "private"));
    it_resp_free(srv, &r);

    static const char *const pages[] = {"/",        "/static/app.js", "/api/v1/models",
                                        "/healthz", "/openapi.json",  "/api/v1/signing-keys"};
    for (size_t i = 0; i < sizeof(pages) / sizeof(pages[0]); i++) {
        r = it_get(srv, pages[i], srv->admin_token);
        if (header_count(r, "Cache-Control") > 1)
            fail_msg("GET %s: %zu Cache-Control headers", pages[i],
                     header_count(r, "Cache-Control"));
        cc = it_header(r, "Cache-Control");
        if (cc && strstr(cc, "public"))
            fail_msg("GET %s: Cache-Control %s", pages[i], cc);
        it_resp_free(srv, &r);
    }
}

/* Fill a path template's {params} with plausible names (fraud, production, 1, ...). */
static void fill_template(const char *path, char *out, size_t cap)
{
    size_t o = 0;

    while (*path && o + 80 < cap) {
        if (*path == '{') {
            const char *end = strchr(path, '}');
            const char *v = "x";

            assert_non_null(end);
            if (strncmp(path, "{n}", 3) == 0)
                v = "1";
            else if (strncmp(path, "{model}", 7) == 0)
                v = "fraud";
            else if (strncmp(path, "{alias}", 7) == 0)
                v = "production";
            else if (strncmp(path, "{digest}", 8) == 0)
                v = "sha256:0000000000000000000000000000000000000000000000000000000000000000";
            else if (strncmp(path, "{name}", 6) == 0)
                v = "gw";
            o += (size_t)snprintf(out + o, cap - o, "%s", v);
            path = end + 1;
        } else {
            out[o++] = *path++;
        }
    }
    out[o] = '\0';
}

/* CSRF with a "simple" request (MLflow's text/plain class): every route that takes a JSON
 * body refuses any other Content-Type with 415, whatever credentials come with it, so a
 * cross-site form post can never carry a change. Swept from the OpenAPI document. */
static void test_json_routes_refuse_other_types(void **state)
{
    static const char *const types[] = {"text/plain", "application/x-www-form-urlencoded",
                                        "multipart/form-data; boundary=x"};
    struct it_resp *doc = it_get(srv, "/openapi.json", NULL);
    const char *path, *method;
    json_t *ops, *op;
    size_t swept = 0;

    (void)state;
    json_object_foreach(json_object_get(doc->json, "paths"), path, ops)
    {
        json_object_foreach(ops, method, op)
        {
            json_t *content =
                json_object_get(json_object_get(op, "requestBody"), "content"); /* BORROWED */
            char target[512], up[16];
            size_t k;

            if (json_object_get(content, "application/json") == NULL)
                continue;
            for (k = 0; method[k] && k < sizeof(up) - 1; k++)
                up[k] = (char)toupper((unsigned char)method[k]);
            up[k] = '\0';
            fill_template(path, target, sizeof(target));
            for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
                struct it_resp *r;

                /* A route documented to take this type too (RFC 8693's token exchange takes
                 * a form; its credential is in the body, never a cookie) is not swept for it. */
                if (json_object_get(content, types[t]) != NULL)
                    continue;
                r = it_treq(srv, up, target, srv->admin_token, types[t],
                            "{\"name\":\"csrf\",\"decision\":\"approve\"}");

                if (r->status != 415)
                    fail_msg("%s %s with %s: %ld, expected 415: %s", up, target, types[t],
                             r->status, r->body);
                it_resp_free(srv, &r);
            }
            swept++;
        }
    }
    assert_true(swept >= 15);
    it_resp_free(srv, &doc);
}

/* distribution CVE-2023-2253 class (a list size the client picks): every list route caps
 * ?limit, refusing what is over it with 400 rather than building a huge reply. */
static void test_list_limits_are_capped(void **state)
{
    struct it_resp *doc = it_get(srv, "/openapi.json", NULL);
    const char *path;
    json_t *ops;
    size_t swept = 0;

    (void)state;
    json_object_foreach(json_object_get(doc->json, "paths"), path, ops)
    {
        json_t *get = json_object_get(ops, "get"), *params, *pm;
        bool has_limit = false;
        size_t i;
        char target[600], base[512];
        struct it_resp *r;

        params = json_object_get(get, "parameters");
        json_array_foreach(params, i, pm)
        {
            const char *name = json_string_value(json_object_get(pm, "name"));
            const char *ref = json_string_value(json_object_get(pm, "$ref"));

            has_limit |= (name && strcmp(name, "limit") == 0) ||
                         (ref && strcmp(ref, "#/components/parameters/limit") == 0);
        }
        if (!has_limit)
            continue;
        fill_template(path, base, sizeof(base));
        snprintf(target, sizeof(target), "%s?limit=100000000", base);
        r = it_get(srv, target, srv->admin_token);
        if (r->status != 400 && r->status != 404)
            fail_msg("GET %s: %ld, expected 400: %.200s", target, r->status, r->body);
        it_resp_free(srv, &r);
        swept++;
    }
    assert_true(swept >= 3);
    it_resp_free(srv, &doc);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hostile_targets),
        cmocka_unit_test(test_route_sweep),
        cmocka_unit_test(test_log_lines_text),
        cmocka_unit_test(test_log_lines_json),
        cmocka_unit_test(test_framing),
        cmocka_unit_test(test_half_closed_client),
        cmocka_unit_test(test_metrics_hostile_methods),
        cmocka_unit_test(test_cache_control),
        cmocka_unit_test(test_json_routes_refuse_other_types),
        cmocka_unit_test(test_list_limits_are_capped),
    };
    int rc;

    srv = it_server_start(NULL);
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    it_server_free(&srv);
    return it_main_result(rc);
}
