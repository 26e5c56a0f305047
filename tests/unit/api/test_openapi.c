/*
 * test_openapi.c - schema/openapi.json against the routes the server really
 * registers (srv_route_foreach):
 *   - the document is JSON, OpenAPI 3.1 (no 3.0 "nullable" left: a null is a
 *     "null" type or alternative, as 3.1 reads it), with the bearer and session
 *     security schemes;
 *   - every registered (method, pattern) is documented, and every documented
 *     operation is registered (HEAD is answered by GET routes, so a
 *     documented HEAD needs a GET route that the router hands HEAD to);
 *   - every {placeholder} of a path is declared as a required path parameter
 *     of the operation (or its path item), and nothing else is;
 *   - every $ref (and discriminator mapping) resolves;
 *   - each operation's role, security, request body kind and error replies
 *     agree with its route;
 *   - the path parameters' patterns agree with the router's validation: the
 *     documented example is accepted, and a set of probe values gets the
 *     same verdict from the document and from srv_route_match().
 *
 * The file is read from $MG_SOURCE_DIR/schema/openapi.json (tests/CMakeLists.txt
 * sets MG_SOURCE_DIR for every test). No server is started.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <ctype.h>
#include <regex.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "http/http.h"

#define MAX_ROUTES 512
#define PROBLEMS_MAX 16384

static json_t *doc;

static const struct srv_route *routes[MAX_ROUTES];
static size_t nroutes;

/* ---- helpers ------------------------------------------------------------------------------ */

/* Problems found by a test, reported all at once. */
struct problems {
    char text[PROBLEMS_MAX];
    size_t len;
    unsigned count;
};

static void problem(struct problems *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void problem(struct problems *p, const char *fmt, ...)
{
    va_list ap;
    int n;

    p->count++;
    if (p->len + 2 >= sizeof(p->text))
        return;
    va_start(ap, fmt);
    n = vsnprintf(p->text + p->len, sizeof(p->text) - p->len - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    p->len += (size_t)n;
    if (p->len > sizeof(p->text) - 2)
        p->len = sizeof(p->text) - 2;
    p->text[p->len++] = '\n';
    p->text[p->len] = '\0';
}

static void report(const struct problems *p, const char *what)
{
    if (p->count > 0)
        fail_msg("%u problem(s) with %s:\n%s", p->count, what, p->text);
}

static void collect_route(const struct srv_route *route, void *arg)
{
    (void)arg;
    if (nroutes < MAX_ROUTES)
        routes[nroutes++] = route;
}

static void lower(const char *in, char *out, size_t outsz)
{
    size_t i;

    for (i = 0; in[i] && i + 1 < outsz; i++)
        out[i] = (char)tolower((unsigned char)in[i]);
    out[i] = '\0';
}

static void upper(const char *in, char *out, size_t outsz)
{
    size_t i;

    for (i = 0; in[i] && i + 1 < outsz; i++)
        out[i] = (char)toupper((unsigned char)in[i]);
    out[i] = '\0';
}

static bool is_http_method(const char *k)
{
    static const char *const methods[] = {"get",  "put",   "post",  "delete", "options",
                                          "head", "patch", "trace", NULL};
    size_t i;

    for (i = 0; methods[i]; i++) {
        if (strcmp(k, methods[i]) == 0)
            return true;
    }
    return false;
}

/* The value a local JSON pointer ("#/a/b~1c") names in doc, or NULL. */
static json_t *pointer(const char *ref)
{
    json_t *cur = doc;
    const char *p;
    char tok[256];

    if (ref == NULL || strncmp(ref, "#/", 2) != 0)
        return NULL;
    p = ref + 2;
    while (cur != NULL) {
        size_t n = strcspn(p, "/"), i, o = 0;

        for (i = 0; i < n && o + 1 < sizeof(tok); i++) {
            if (p[i] == '~' && i + 1 < n && (p[i + 1] == '0' || p[i + 1] == '1')) {
                tok[o++] = p[i + 1] == '0' ? '~' : '/';
                i++;
            } else {
                tok[o++] = p[i];
            }
        }
        tok[o] = '\0';
        if (json_is_object(cur)) {
            cur = json_object_get(cur, tok);
        } else if (json_is_array(cur)) {
            char *end;
            unsigned long idx = strtoul(tok, &end, 10);
            cur = (*tok && *end == '\0') ? json_array_get(cur, idx) : NULL;
        } else {
            cur = NULL;
        }
        if (p[n] == '\0')
            break;
        p += n + 1;
    }
    return cur;
}

/* Follow $ref (a few levels) to the object it names. */
static json_t *deref(json_t *v)
{
    int depth;

    for (depth = 0; depth < 16 && json_is_object(v); depth++) {
        json_t *r = json_object_get(v, "$ref");
        if (!json_is_string(r))
            return v;
        v = pointer(json_string_value(r));
    }
    return v;
}

static json_t *paths(void)
{
    return json_object_get(doc, "paths");
}

/* The documented operation for (method, pattern), or NULL. */
static json_t *operation(const char *method, const char *pattern)
{
    char m[16];

    lower(method, m, sizeof(m));
    return json_object_get(json_object_get(paths(), pattern), m);
}

/* The registered route for (method, pattern), or NULL. */
static const struct srv_route *route_of(const char *method, const char *pattern)
{
    size_t i;

    for (i = 0; i < nroutes; i++) {
        if (strcmp(routes[i]->method, method) == 0 && strcmp(routes[i]->pattern, pattern) == 0)
            return routes[i];
    }
    return NULL;
}

/* The resolved path parameter `name` of an operation (operation level first,
 * then the path item), or NULL. */
static json_t *path_param(json_t *item, json_t *op, const char *name)
{
    json_t *lists[2], *p;
    size_t i, k;

    lists[0] = json_object_get(op, "parameters");
    lists[1] = json_object_get(item, "parameters");
    for (k = 0; k < 2; k++) {
        json_array_foreach(lists[k], i, p)
        {
            json_t *d = deref(p);
            const char *in = json_string_value(json_object_get(d, "in"));
            const char *n = json_string_value(json_object_get(d, "name"));
            if (in && n && strcmp(in, "path") == 0 && strcmp(n, name) == 0)
                return d;
        }
    }
    return NULL;
}

/* The placeholder names of a template, in order. Returns how many (max 8). */
static size_t placeholders(const char *tmpl, char names[8][32])
{
    const char *p = tmpl;
    size_t n = 0;

    while ((p = strchr(p, '{')) != NULL && n < 8) {
        const char *e = strchr(p, '}');
        size_t len;
        if (e == NULL)
            break;
        len = (size_t)(e - p - 1);
        if (len >= 32)
            len = 31;
        memcpy(names[n], p + 1, len);
        names[n][len] = '\0';
        n++;
        p = e + 1;
    }
    return n;
}

/* Write tmpl with each placeholder replaced by values[i] (NULL: keep). */
static void fill(const char *tmpl, const char *const *values, char *out, size_t outsz)
{
    const char *p = tmpl;
    size_t o = 0, k = 0;

    while (*p && o + 1 < outsz) {
        if (*p == '{') {
            const char *e = strchr(p, '}');
            const char *v = values[k++];
            size_t vl = strlen(v);
            if (o + vl >= outsz)
                break;
            memcpy(out + o, v, vl);
            o += vl;
            p = e ? e + 1 : p + strlen(p);
            continue;
        }
        out[o++] = *p++;
    }
    out[o] = '\0';
}

static void req_release(struct srv_req *r)
{
    unsigned i;

    for (i = 0; i < SRV_MAX_PARAMS; i++) {
        free(r->params[i].value);
        r->params[i].value = NULL;
    }
    r->nparams = 0;
}

/* The role a route needs, as the document names it. */
static void role_name(unsigned roles, char *out, size_t outsz)
{
    json_t *names;

    if (roles == MG_NEED_PUBLIC) {
        snprintf(out, outsz, "public");
        return;
    }
    if (roles == MG_NEED_ANY) {
        snprintf(out, outsz, "any");
        return;
    }
    names = store_roles_to_json(roles & 0xffu);
    if (json_array_size(names) == 1)
        snprintf(out, outsz, "%s", json_string_value(json_array_get(names, 0)));
    else
        snprintf(out, outsz, "?");
    json_decref(names);
}

/* ---- setup -------------------------------------------------------------------------------- */

static int setup(void **state)
{
    const char *dir = getenv("MG_SOURCE_DIR");
    char path[4096];
    json_error_t err;

    (void)state;
    if (dir == NULL) {
        fprintf(stderr, "MG_SOURCE_DIR is not set; run this test through ctest\n");
        return -1;
    }
    snprintf(path, sizeof(path), "%s/schema/openapi.json", dir);
    doc = json_load_file(path, JSON_REJECT_DUPLICATES, &err);
    if (doc == NULL) {
        fprintf(stderr, "%s: line %d, column %d: %s\n", path, err.line, err.column, err.text);
        return -1;
    }
    nroutes = 0;
    srv_route_foreach(api_routes, collect_route, NULL);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    json_decref(doc);
    doc = NULL;
    return 0;
}

/* ---- the document ------------------------------------------------------------------------- */

static void test_document_is_openapi_303(void **state)
{
    json_t *info = json_object_get(doc, "info"), *schemes, *bearer, *cookie;

    (void)state;
    assert_true(json_is_object(doc));
    assert_string_equal(json_string_value(json_object_get(doc, "openapi")), "3.1.0");
    {
        char *text = json_dumps(doc, JSON_COMPACT);

        assert_non_null(text);
        assert_null(strstr(text, "\"nullable\":")); /* OpenAPI 3.0's; 3.1 lists "null" */
        free(text);
    }
    assert_true(json_is_string(json_object_get(info, "title")));
    assert_true(json_is_string(json_object_get(info, "version")));
    assert_true(json_is_object(paths()));
    assert_true(json_object_size(paths()) > 0);

    schemes = json_object_get(json_object_get(doc, "components"), "securitySchemes");
    bearer = json_object_get(schemes, "bearerAuth");
    assert_string_equal(json_string_value(json_object_get(bearer, "type")), "http");
    assert_string_equal(json_string_value(json_object_get(bearer, "scheme")), "bearer");
    cookie = json_object_get(schemes, "sessionCookie");
    assert_string_equal(json_string_value(json_object_get(cookie, "type")), "apiKey");
    assert_string_equal(json_string_value(json_object_get(cookie, "in")), "cookie");
    assert_string_equal(json_string_value(json_object_get(cookie, "name")), SRV_SESSION_COOKIE);

    /* Error is {"error":{"code","message","field"}}. */
    {
        json_t *e = deref(json_object_get(
            json_object_get(json_object_get(json_object_get(doc, "components"), "schemas"),
                            "Error"),
            "properties"));
        json_t *inner = deref(json_object_get(e, "error"));
        json_t *props = json_object_get(inner, "properties");
        assert_non_null(json_object_get(props, "code"));
        assert_non_null(json_object_get(props, "message"));
        assert_non_null(json_object_get(props, "field"));
    }
}

static void test_routes_are_registered(void **state)
{
    (void)state;
    /* A sanity check of the harness itself. */
    assert_true(nroutes > 10);
    assert_true(nroutes < MAX_ROUTES);
}

/* ---- routes <-> operations ---------------------------------------------------------------- */

static void test_every_route_is_documented(void **state)
{
    struct problems p = {0};
    size_t i;

    (void)state;
    for (i = 0; i < nroutes; i++) {
        if (!json_is_object(operation(routes[i]->method, routes[i]->pattern)))
            problem(&p, "%s %s is registered but not in schema/openapi.json", routes[i]->method,
                    routes[i]->pattern);
    }
    report(&p, "registered routes missing from the document");
}

static void test_every_operation_is_registered(void **state)
{
    struct problems p = {0};
    const char *path, *key;
    json_t *item, *op;

    (void)state;
    json_object_foreach(paths(), path, item)
    {
        if (!json_is_object(item)) {
            problem(&p, "paths['%s'] is not an object", path);
            continue;
        }
        json_object_foreach(item, key, op)
        {
            char m[16];

            if (!is_http_method(key)) {
                if (strcmp(key, "parameters") != 0 && strcmp(key, "summary") != 0 &&
                    strcmp(key, "description") != 0 && strcmp(key, "servers") != 0 &&
                    strncmp(key, "x-", 2) != 0)
                    problem(&p, "paths['%s'] has an unexpected member '%s'", path, key);
                continue;
            }
            upper(key, m, sizeof(m));
            if (route_of(m, path) != NULL)
                continue;
            if (strcmp(m, "HEAD") == 0 && route_of("GET", path) != NULL)
                continue; /* the router answers HEAD with the GET route */
            problem(&p, "%s %s is documented but the server registers no such route", m, path);
        }
    }
    report(&p, "documented operations the server does not serve");
}

/* A documented HEAD must really reach the GET route through the router. */
static void test_documented_head_reaches_get_route(void **state)
{
    struct problems p = {0};
    const char *path;
    json_t *item;

    (void)state;
    json_object_foreach(paths(), path, item)
    {
        char names[8][32], url[1024], buf[8][128];
        const char *values[8];
        size_t n, i;
        struct srv_req r;
        enum mg_code rc;

        if (json_object_get(item, "head") == NULL)
            continue;
        n = placeholders(path, names);
        for (i = 0; i < n; i++) {
            json_t *prm = path_param(item, json_object_get(item, "head"), names[i]);
            json_t *ex = json_object_get(prm, "example");
            if (json_is_integer(ex))
                snprintf(buf[i], sizeof(buf[i]), "%lld", (long long)json_integer_value(ex));
            else
                snprintf(buf[i], sizeof(buf[i]), "%s",
                         json_is_string(ex) ? json_string_value(ex) : "x");
            values[i] = buf[i];
        }
        fill(path, values, url, sizeof(url));
        memset(&r, 0, sizeof(r));
        rc = srv_route_match(&r, api_routes, "HEAD", url);
        if (rc != MG_OK || r.route == NULL || strcmp(r.route->method, "GET") != 0 ||
            strcmp(r.route->pattern, path) != 0)
            problem(&p, "HEAD %s (as %s) does not reach the GET route", path, url);
        req_release(&r);
    }
    report(&p, "documented HEAD operations");
}

/* ---- path parameters ---------------------------------------------------------------------- */

static void check_declared(struct problems *p, const char *path, json_t *item, const char *method,
                           json_t *op)
{
    char names[8][32];
    size_t n = placeholders(path, names), i, j;
    json_t *lists[2], *prm;
    size_t k;

    for (i = 0; i < n; i++) {
        json_t *d;
        for (j = 0; j < i; j++) {
            if (strcmp(names[i], names[j]) == 0)
                problem(p, "%s %s repeats the placeholder {%s}", method, path, names[i]);
        }
        d = path_param(item, op, names[i]);
        if (d == NULL) {
            problem(p, "%s %s: path parameter {%s} is not declared", method, path, names[i]);
            continue;
        }
        if (!json_is_true(json_object_get(d, "required")))
            problem(p, "%s %s: path parameter {%s} must be required: true", method, path, names[i]);
        if (!json_is_object(deref(json_object_get(d, "schema"))))
            problem(p, "%s %s: path parameter {%s} has no schema", method, path, names[i]);
    }
    /* Conversely: every declared path parameter is in the template. */
    lists[0] = json_object_get(op, "parameters");
    lists[1] = json_object_get(item, "parameters");
    for (k = 0; k < 2; k++) {
        json_array_foreach(lists[k], i, prm)
        {
            json_t *d = deref(prm);
            const char *in = json_string_value(json_object_get(d, "in"));
            const char *nm = json_string_value(json_object_get(d, "name"));
            bool found = false;

            if (d == NULL || in == NULL || nm == NULL) {
                problem(p, "%s %s: parameters[%zu] lacks name or in", method, path, i);
                continue;
            }
            if (strcmp(in, "path") != 0)
                continue;
            for (j = 0; j < n && !found; j++)
                found = strcmp(names[j], nm) == 0;
            if (!found)
                problem(p, "%s %s declares path parameter '%s' that is not in the template", method,
                        path, nm);
        }
    }
}

static void test_path_parameters_are_declared(void **state)
{
    struct problems p = {0};
    const char *path, *key;
    json_t *item, *op;

    (void)state;
    json_object_foreach(paths(), path, item)
    {
        json_object_foreach(item, key, op)
        {
            char m[16];
            if (!is_http_method(key))
                continue;
            upper(key, m, sizeof(m));
            check_declared(&p, path, item, m, op);
        }
    }
    report(&p, "path parameters");
}

/* ---- $ref --------------------------------------------------------------------------------- */

static void walk_refs(struct problems *p, json_t *v, const char *where)
{
    const char *k;
    json_t *x;
    size_t i;
    char sub[512];

    if (json_is_object(v)) {
        json_object_foreach(v, k, x)
        {
            if (strcmp(k, "$ref") == 0) {
                if (!json_is_string(x))
                    problem(p, "%s: $ref is not a string", where);
                else if (pointer(json_string_value(x)) == NULL)
                    problem(p, "%s: $ref '%s' does not resolve", where, json_string_value(x));
                continue;
            }
            if (strcmp(k, "discriminator") == 0) {
                const char *mk;
                json_t *mv;
                json_object_foreach(json_object_get(x, "mapping"), mk, mv)
                {
                    if (!json_is_string(mv) || pointer(json_string_value(mv)) == NULL)
                        problem(p, "%s: discriminator mapping '%s' does not resolve", where, mk);
                }
            }
            snprintf(sub, sizeof(sub), "%s/%s", where, k);
            walk_refs(p, x, sub);
        }
    } else if (json_is_array(v)) {
        json_array_foreach(v, i, x)
        {
            snprintf(sub, sizeof(sub), "%s/%zu", where, i);
            walk_refs(p, x, sub);
        }
    }
}

static void test_every_ref_resolves(void **state)
{
    struct problems p = {0};

    (void)state;
    walk_refs(&p, doc, "#");
    report(&p, "$ref");
}

/* ---- operations agree with their routes --------------------------------------------------- */

static bool has_response(json_t *op, const char *status)
{
    return json_object_get(json_object_get(op, "responses"), status) != NULL;
}

static void test_operations_match_routes(void **state)
{
    struct problems p = {0};
    json_t *ids = json_object();
    json_t *schemes = json_object_get(json_object_get(doc, "components"), "securitySchemes");
    size_t i;

    (void)state;
    for (i = 0; i < nroutes; i++) {
        const struct srv_route *rt = routes[i];
        json_t *op = operation(rt->method, rt->pattern), *sec, *s, *body, *content;
        const char *id, *doc_role;
        char role[32];
        size_t j;

        if (!json_is_object(op))
            continue; /* reported by test_every_route_is_documented */
        if (!json_is_string(json_object_get(op, "summary")))
            problem(&p, "%s %s has no summary", rt->method, rt->pattern);
        id = json_string_value(json_object_get(op, "operationId"));
        if (id) {
            if (json_object_get(ids, id))
                problem(&p, "%s %s repeats operationId %s", rt->method, rt->pattern, id);
            json_object_set_new(ids, id, json_true());
        }
        if (!json_is_object(json_object_get(op, "responses")) ||
            json_object_size(json_object_get(op, "responses")) == 0)
            problem(&p, "%s %s has no responses", rt->method, rt->pattern);

        role_name(rt->roles, role, sizeof(role));
        doc_role = json_string_value(json_object_get(op, "x-modelgate-role"));
        if (doc_role == NULL || strcmp(doc_role, role) != 0)
            problem(&p, "%s %s: x-modelgate-role is '%s', the route needs '%s'", rt->method,
                    rt->pattern, doc_role ? doc_role : "(none)", role);

        sec = json_object_get(op, "security");
        if (sec == NULL)
            sec = json_object_get(doc, "security");
        if (rt->roles == MG_NEED_PUBLIC) {
            if (!json_is_array(sec) || json_array_size(sec) != 0)
                problem(&p, "%s %s is public: it needs security: []", rt->method, rt->pattern);
        } else {
            if (!json_is_array(sec) || json_array_size(sec) == 0)
                problem(&p, "%s %s needs a token: security must name bearerAuth or sessionCookie",
                        rt->method, rt->pattern);
            json_array_foreach(sec, j, s)
            {
                const char *name;
                json_t *scopes;
                json_object_foreach(s, name, scopes)
                {
                    if (json_object_get(schemes, name) == NULL)
                        problem(&p, "%s %s: security scheme '%s' is not defined", rt->method,
                                rt->pattern, name);
                }
            }
            if (!has_response(op, "401"))
                problem(&p, "%s %s needs a token: document 401", rt->method, rt->pattern);
            /* 403: a role it may lack, or a session change without its CSRF token. */
            if ((rt->roles != MG_NEED_ANY || strcmp(rt->method, "GET") != 0) &&
                !has_response(op, "403"))
                problem(&p, "%s %s can be refused: document 403", rt->method, rt->pattern);
        }

        body = deref(json_object_get(op, "requestBody"));
        content = json_object_get(body, "content");
        switch (rt->body) {
        case SRV_BODY_NONE:
        case SRV_BODY_REFUSED:
            if (body != NULL)
                problem(&p, "%s %s reads no body but documents a requestBody", rt->method,
                        rt->pattern);
            break;
        case SRV_BODY_FORM:
            if (json_object_get(content, "application/x-www-form-urlencoded") == NULL)
                problem(&p, "%s %s takes a form body: document it", rt->method, rt->pattern);
            /* and JSON too: */
            /* fall through */
        case SRV_BODY_JSON:
            if (json_object_get(content, "application/json") == NULL)
                problem(&p, "%s %s takes a JSON body: document requestBody application/json",
                        rt->method, rt->pattern);
            if (!has_response(op, "413") || !has_response(op, "415"))
                problem(&p, "%s %s takes a JSON body: document 413 and 415", rt->method,
                        rt->pattern);
            break;
        case SRV_BODY_STREAM:
            if (json_object_get(content, "application/octet-stream") == NULL)
                problem(&p, "%s %s streams its body: document application/octet-stream", rt->method,
                        rt->pattern);
            if (!has_response(op, "413"))
                problem(&p, "%s %s streams its body: document 413", rt->method, rt->pattern);
            break;
        }
        if (strchr(rt->pattern, '{') && !has_response(op, "400"))
            problem(&p, "%s %s validates path parameters: document 400", rt->method, rt->pattern);
    }
    json_decref(ids);
    report(&p, "operations against their routes");
}

/* ---- path parameter patterns against the router ------------------------------------------- */

/* Does the document accept `v` for this (resolved) parameter schema? */
static bool doc_accepts(json_t *schema, const char *v, bool *known)
{
    const char *type = json_string_value(json_object_get(schema, "type"));
    json_t *pat = json_object_get(schema, "pattern");
    json_t *maxl = json_object_get(schema, "maxLength"),
           *minl = json_object_get(schema, "minLength");
    size_t len = strlen(v);

    *known = true;
    if (type && strcmp(type, "integer") == 0) {
        json_t *min = json_object_get(schema, "minimum");
        char *end;
        long long n;
        const char *d = v;

        /* How an integer is written in a URL: decimal, no '+', no leading zeros. */
        if (*d == '-')
            d++;
        if (!isdigit((unsigned char)*d) || (d[0] == '0' && d[1] != '\0'))
            return false;
        n = strtoll(v, &end, 10);
        if (*end != '\0')
            return false;
        return !json_is_integer(min) || n >= json_integer_value(min);
    }
    if (json_is_integer(maxl) && (json_int_t)len > json_integer_value(maxl))
        return false;
    if (json_is_integer(minl) && (json_int_t)len < json_integer_value(minl))
        return false;
    if (json_is_string(pat)) {
        regex_t re;
        bool ok;
        if (regcomp(&re, json_string_value(pat), REG_EXTENDED | REG_NOSUB) != 0) {
            *known = false;
            return false;
        }
        ok = regexec(&re, v, 0, NULL, 0) == 0;
        regfree(&re);
        return ok;
    }
    *known = false; /* a free-form string: no verdict */
    return true;
}

static void example_of(json_t *prm, json_t *schema, char *out, size_t outsz)
{
    json_t *ex = json_object_get(prm, "example");

    if (ex == NULL) /* a 3.1 schema's examples are a list */
        ex = json_array_get(json_object_get(schema, "examples"), 0);
    if (json_is_integer(ex))
        snprintf(out, outsz, "%lld", (long long)json_integer_value(ex));
    else if (json_is_string(ex))
        snprintf(out, outsz, "%s", json_string_value(ex));
    else
        out[0] = '\0';
}

static void test_path_parameter_patterns_match_router(void **state)
{
    static const char *const probes[] = {
        "a",
        "z9",
        "0",
        "9a",
        "A",
        "Abc",
        "-a",
        "a-",
        "_a",
        "a_b",
        "a-b",
        "a.b",
        "a..b",
        ".a",
        "a.",
        "app.js",
        "fraud.v2",
        "tok_0123456789abcdef",
        "prm_0123456789abcdef",
        "a b",
        "a%2e",
        "%2e%2e",
        "1",
        "42",
        "01",
        "-1",
        "1.5",
        "x",
        "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",   /* 63 */
        "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",  /* 64 */
        "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", /* 65 */
        "abcdefghijklmnopqrstuvwxyzabcdef",                                  /* 32 */
        "abcdefghijklmnopqrstuvwxyzabcdefg",                                 /* 33 */
        "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "sha256:0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef",
        "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcde",
        "sha512:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        NULL};
    struct problems p = {0};
    size_t i;

    (void)state;
    for (i = 0; i < nroutes; i++) {
        const struct srv_route *rt = routes[i];
        json_t *op = operation(rt->method, rt->pattern);
        json_t *item = json_object_get(paths(), rt->pattern);
        char names[8][32], examples[8][128], url[1024];
        const char *values[8];
        json_t *prms[8], *schemas[8];
        size_t n = placeholders(rt->pattern, names), k, j;
        struct srv_req r;
        enum mg_code rc;
        bool complete = true;

        if (n == 0 || op == NULL)
            continue;
        for (k = 0; k < n; k++) {
            bool known;
            prms[k] = path_param(item, op, names[k]);
            schemas[k] = deref(json_object_get(prms[k], "schema"));
            if (prms[k] == NULL || schemas[k] == NULL) {
                complete = false; /* reported by test_path_parameters_are_declared */
                break;
            }
            example_of(prms[k], schemas[k], examples[k], sizeof(examples[k]));
            if (examples[k][0] == '\0') {
                problem(&p, "%s %s: {%s} has no example", rt->method, rt->pattern, names[k]);
                complete = false;
                break;
            }
            if (!doc_accepts(schemas[k], examples[k], &known) && known)
                problem(&p, "%s %s: the example '%s' of {%s} does not match its own schema",
                        rt->method, rt->pattern, examples[k], names[k]);
            values[k] = examples[k];
        }
        if (!complete)
            continue;

        /* The examples reach this very route. */
        fill(rt->pattern, values, url, sizeof(url));
        memset(&r, 0, sizeof(r));
        rc = srv_route_match(&r, api_routes, rt->method, url);
        if (rc != MG_OK || r.route != rt)
            problem(&p, "%s %s: the documented examples (%s) are refused by the router: %s",
                    rt->method, rt->pattern, url, r.err.message);
        req_release(&r);

        /* Each probe gets the same verdict from the document and the router. */
        for (k = 0; k < n; k++) {
            for (j = 0; probes[j]; j++) {
                const char *saved = values[k];
                bool known, doc_ok = doc_accepts(schemas[k], probes[j], &known);
                bool router_ok;

                if (!known)
                    continue;
                values[k] = probes[j];
                fill(rt->pattern, values, url, sizeof(url));
                values[k] = saved;
                memset(&r, 0, sizeof(r));
                rc = srv_route_match(&r, api_routes, rt->method, url);
                if (rc == MG_OK && r.route != rt) {
                    req_release(&r);
                    continue; /* another route took it (a literal segment): no verdict */
                }
                router_ok = rc == MG_OK;
                if (rc != MG_OK && rc != MG_EINVAL) {
                    req_release(&r);
                    continue;
                }
                if (doc_ok != router_ok)
                    problem(&p, "%s %s: {%s} = '%s': the document %s it, the router %s it",
                            rt->method, rt->pattern, names[k], probes[j],
                            doc_ok ? "accepts" : "refuses", router_ok ? "accepts" : "refuses");
                req_release(&r);
            }
        }
    }
    report(&p, "path parameter patterns against the router");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_document_is_openapi_303),
        cmocka_unit_test(test_routes_are_registered),
        cmocka_unit_test(test_every_route_is_documented),
        cmocka_unit_test(test_every_operation_is_registered),
        cmocka_unit_test(test_documented_head_reaches_get_route),
        cmocka_unit_test(test_path_parameters_are_declared),
        cmocka_unit_test(test_every_ref_resolves),
        cmocka_unit_test(test_operations_match_routes),
        cmocka_unit_test(test_path_parameter_patterns_match_router),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
