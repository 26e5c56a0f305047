/*
 * router.c - matching a request path against the route tables and
 * validating path parameters by their placeholder names.
 */
#include "http.h"

#include <stdlib.h>
#include <string.h>

#include "../base/util.h"

void srv_route_foreach(const struct srv_route *const *tables,
                       void (*fn)(const struct srv_route *route, void *arg), void *arg)
{
    const struct srv_route *r;

    for (; *tables != NULL; tables++) {
        for (r = *tables; r->method != NULL; r++)
            fn(r, arg);
    }
}

static bool valid_id(const char *s, size_t n)
{
    size_t i;

    if (n == 0 || n > 64)
        return false;
    for (i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-'))
            return false;
    }
    return true;
}

/* A team name: ^[a-z0-9][a-z0-9-]{0,62}$ (docs/contract.md "Teams"). */
static bool valid_team(const char *s, size_t n)
{
    size_t i;

    if (n == 0 || n > 63 || s[0] == '-')
        return false;
    for (i = 0; i < n; i++) {
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
            return false;
    }
    return true;
}

/* An OCI reference: a tag ([A-Za-z0-9_][A-Za-z0-9._-]{0,127}, the distribution spec's
 * grammar) or a sha256 digest. */
static bool valid_ref(const char *s, size_t n)
{
    size_t i;

    if (mg_valid_digest(s, n))
        return true;
    if (n == 0 || n > 128 || s[0] == '.' || s[0] == '-')
        return false;
    for (i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-'))
            return false;
    }
    return true;
}

/* An IdP group's name: printable ASCII without '/' (the path's separator) or spaces, at
 * most 128 bytes. */
static bool valid_group(const char *s, size_t n)
{
    if (n == 0 || n > 128)
        return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] <= ' ' || s[i] == '/' || s[i] >= 0x7f)
            return false;
    return true;
}

/* Validate a captured segment by placeholder name; fills r->err on failure. */
static bool valid_param(struct srv_req *r, const char *name, size_t nlen, const char *v,
                        size_t vlen)
{
    int64_t n;
    char buf[32];

#define IS(lit) (nlen == sizeof(lit) - 1 && memcmp(name, lit, nlen) == 0)
    if (IS("model") && mg_valid_model_name(v, vlen))
        return true;
    if (IS("alias") && mg_valid_alias_name(v, vlen))
        return true;
    if (IS("name") && mg_valid_gateway_name(v, vlen))
        return true;
    if (IS("digest") && mg_valid_digest(v, vlen))
        return true;
    if (IS("team") && valid_team(v, vlen))
        return true;
    if (IS("id") && valid_id(v, vlen))
        return true;
    if (IS("ref") && valid_ref(v, vlen))
        return true;
    if (IS("file") && mg_valid_model_name(v, vlen) && memmem(v, vlen, "..", 2) == NULL)
        return true; /* a static file name such as app.js */
    if (IS("group") && valid_group(v, vlen))
        return true;
    if (IS("n") && vlen < sizeof(buf)) {
        memcpy(buf, v, vlen);
        buf[vlen] = '\0';
        if (mg_parse_i64(buf, 1, INT64_MAX, &n))
            return true;
    }
    if (IS("model"))
        mg_fail(&r->err, MG_EINVAL, "model",
                "model names match ^[a-z0-9][a-z0-9._-]{0,62}$; '%.*s' does not",
                (int)(vlen > 80 ? 80 : vlen), v);
    else if (IS("alias"))
        mg_fail(&r->err, MG_EINVAL, "alias", "alias names match ^[a-z][a-z0-9-]{0,31}$");
    else if (IS("name"))
        mg_fail(&r->err, MG_EINVAL, "name", "gateway names match ^[a-z0-9][a-z0-9_-]{0,62}$");
    else if (IS("team"))
        mg_fail(&r->err, MG_EINVAL, "team", "team names match ^[a-z0-9][a-z0-9-]{0,62}$");
    else if (IS("digest"))
        mg_fail(&r->err, MG_EINVAL, "digest", "digests are sha256: followed by 64 lowercase hex");
    else if (IS("n"))
        mg_fail(&r->err, MG_EINVAL, "version", "version numbers are integers starting at 1");
    else if (IS("ref") && memchr(v, ':', vlen) != NULL)
        mg_fail(&r->err, MG_EINVAL, "digest", "digests are sha256: followed by 64 lowercase hex");
    else if (IS("group"))
        mg_fail(&r->err, MG_EINVAL, "group",
                "group names are 1 to 128 printable ASCII characters without '/' or spaces");
    else if (IS("ref"))
        mg_fail(&r->err, MG_EINVAL, "reference",
                "a reference is a tag ([A-Za-z0-9_][A-Za-z0-9._-]{0,127}) or a sha256 digest");
    else
        mg_fail(&r->err, MG_EINVAL, "id", "malformed identifier in the path");
#undef IS
    return false;
}

/* The static name of a placeholder starting at p (just after '{'). Every pattern tried
 * asks (most fail after their first placeholder), so lengths are compared before bytes. */
static const char *param_name(const char *p, size_t *len)
{
#define NAME(s)                                                                                    \
    {                                                                                              \
        s, sizeof(s) - 1                                                                           \
    }
    static const struct {
        const char *s;
        size_t n;
    } names[] = {NAME("model"), NAME("alias"), NAME("name"), NAME("digest"), NAME("id"),
                 NAME("n"),     NAME("file"),  NAME("ref"),  NAME("group"),  NAME("team")};
#undef NAME
    const char *e = strchr(p, '}');
    size_t n = e ? (size_t)(e - p) : 0, i;

    *len = n;
    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (names[i].n == n && memcmp(names[i].s, p, n) == 0)
            return names[i].s;
    }
    return NULL;
}

static void free_params(struct srv_req *r)
{
    unsigned i;

    for (i = 0; i < r->nparams; i++) {
        free(r->params[i].value);
        r->params[i].value = NULL;
    }
    r->nparams = 0;
}

/* Does path have the shape of pattern? Captures the placeholder segments, copied only once
 * the whole pattern matched (most patterns tried fail after a capture or two). */
static bool match(struct srv_req *r, const char *pat, const char *path)
{
    const char *p = pat, *u = path, *names[SRV_MAX_PARAMS], *vals[SRV_MAX_PARAMS];
    size_t lens[SRV_MAX_PARAMS];
    unsigned n = 0, i;

    free_params(r);
    while (*p && *u) {
        if (*p == '{') {
            size_t nlen, ulen = strcspn(u, "/");
            const char *name = param_name(p + 1, &nlen);
            if (name == NULL || ulen == 0 || n >= SRV_MAX_PARAMS)
                return false;
            names[n] = name;
            vals[n] = u;
            lens[n++] = ulen;
            p += nlen + 2;
            u += ulen;
            continue;
        }
        if (*p++ != *u++)
            return false;
    }
    if (*p != '\0' || *u != '\0')
        return false;
    for (i = 0; i < n; i++) {
        r->params[r->nparams].name = names[i];
        r->params[r->nparams].value = strndup(vals[i], lens[i]);
        if (r->params[r->nparams++].value == NULL)
            return false;
    }
    return true;
}

enum mg_code srv_route_match(struct srv_req *r, const struct srv_route *const *tables,
                             const char *method, const char *path)
{
    const struct srv_route *rt;
    bool path_found = false;
    unsigned i;

    for (; *tables != NULL; tables++) {
        for (rt = *tables; rt->method != NULL; rt++) {
            if (!match(r, rt->pattern, path))
                continue;
            /* HEAD is answered by the GET route (libmicrohttpd drops the body). */
            if (strcmp(rt->method, method) != 0 &&
                !(strcmp(method, "HEAD") == 0 && strcmp(rt->method, "GET") == 0)) {
                path_found = true;
                continue;
            }
            r->route = rt;
            for (i = 0; i < r->nparams; i++) {
                const char *name = r->params[i].name, *v = r->params[i].value;
                if (!valid_param(r, name, strlen(name), v, strlen(v)))
                    return MG_EINVAL;
            }
            return MG_OK;
        }
    }
    free_params(r);
    return path_found ? MG_EMETHOD : MG_ENOTFOUND;
}

const char *srv_param(const struct srv_req *r, const char *name)
{
    unsigned i;

    for (i = 0; i < r->nparams; i++) {
        if (strcmp(r->params[i].name, name) == 0)
            return r->params[i].value;
    }
    return NULL;
}

int64_t srv_param_version(const struct srv_req *r)
{
    int64_t n = 0;
    const char *v = srv_param(r, "n");

    if (v == NULL || !mg_parse_i64(v, 1, INT64_MAX, &n))
        return 0;
    return n;
}
