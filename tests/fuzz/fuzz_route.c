/*
 * fuzz_route.c - srv_route_match() (server/router.c) on arbitrary method and
 * path bytes, against the real route tables.
 *
 * Input: the first byte picks the method, the rest is the request path as
 * libmicrohttpd hands it over (already percent-decoded, cut at the first NUL).
 *
 * Checked besides memory safety:
 * - MG_OK: a route was chosen whose method is the request's (HEAD may take a
 *   GET route); every captured parameter is non-empty, holds no '/', passes
 *   its validator, and putting the parameters back into the pattern gives the
 *   path again (the matcher neither skipped nor invented bytes);
 * - MG_EINVAL: r->err says so, with a message;
 * - MG_ENOTFOUND / MG_EMETHOD: no parameter is left allocated.
 */
#include "fuzz.h"

#include "base/util.h"
#include "api/api.h"
#include "http/http.h"

static const char *const methods[] = {"GET",   "HEAD",   "POST",    "PUT",
                                      "PATCH", "DELETE", "OPTIONS", "get"};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

/* Does value pass the validator of placeholder `name`, as router.c defines it? */
static bool param_ok(const char *name, const char *v)
{
    size_t n = strlen(v), i;
    int64_t num;

    if (strcmp(name, "model") == 0)
        return mg_valid_model_name(v, n);
    if (strcmp(name, "alias") == 0)
        return mg_valid_alias_name(v, n);
    if (strcmp(name, "name") == 0)
        return mg_valid_gateway_name(v, n);
    if (strcmp(name, "digest") == 0)
        return mg_valid_digest(v, n);
    if (strcmp(name, "file") == 0)
        return mg_valid_model_name(v, n) && strstr(v, "..") == NULL;
    if (strcmp(name, "n") == 0)
        return mg_parse_i64(v, 1, INT64_MAX, &num);
    if (strcmp(name, "id") == 0) {
        if (n == 0 || n > 64)
            return false;
        for (i = 0; i < n; i++) {
            if (!strchr("abcdefghijklmnopqrstuvwxyz0123456789_-", v[i]))
                return false;
        }
        return true;
    }
    return false;
}

/* Rebuild the path from the route's pattern and the captured parameters. */
static void check_rebuild(const struct srv_req *r, const char *path)
{
    char out[8192];
    size_t o = 0;
    unsigned k = 0;
    const char *p;

    for (p = r->route->pattern; *p;) {
        if (*p == '{') {
            const char *e = strchr(p, '}');
            size_t vl;
            FUZZ_CHECK(e != NULL && k < r->nparams, "pattern %s", r->route->pattern);
            FUZZ_CHECK((size_t)(e - p - 1) == strlen(r->params[k].name) &&
                           memcmp(p + 1, r->params[k].name, (size_t)(e - p - 1)) == 0,
                       "parameter %u is '%s' in %s", k, r->params[k].name, r->route->pattern);
            vl = strlen(r->params[k].value);
            if (o + vl >= sizeof(out))
                return; /* longer than any valid parameter allows; not reached */
            memcpy(out + o, r->params[k].value, vl);
            o += vl;
            k++;
            p = e + 1;
            continue;
        }
        if (o + 1 >= sizeof(out))
            return;
        out[o++] = *p++;
    }
    out[o] = '\0';
    FUZZ_CHECK(k == r->nparams, "%u of %u parameters used", k, r->nparams);
    FUZZ_CHECK(strcmp(out, path) == 0, "rebuilt '%s' from '%s', request was '%s'", out,
               r->route->pattern, path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct srv_req r;
    const char *method;
    char *path;
    enum mg_code rc;
    unsigned i;

    if (size < 1)
        return 0;
    method = methods[data[0] % (sizeof(methods) / sizeof(methods[0]))];
    path = fuzz_strndup(data + 1, size - 1);
    memset(&r, 0, sizeof(r));

    rc = srv_route_match(&r, api_routes, method, path);
    switch (rc) {
    case MG_OK:
        FUZZ_CHECK(r.route != NULL, "MG_OK without a route for %s %s", method, path);
        FUZZ_CHECK(strcmp(r.route->method, method) == 0 ||
                       (strcmp(method, "HEAD") == 0 && strcmp(r.route->method, "GET") == 0),
                   "%s %s matched a %s route", method, path, r.route->method);
        FUZZ_CHECK(r.nparams <= SRV_MAX_PARAMS, "%u parameters", r.nparams);
        for (i = 0; i < r.nparams; i++) {
            const char *v = r.params[i].value;
            FUZZ_CHECK(v != NULL && v[0] != '\0' && strchr(v, '/') == NULL, "parameter %s = '%s'",
                       r.params[i].name, v ? v : "(null)");
            FUZZ_CHECK(param_ok(r.params[i].name, v), "parameter %s = '%s' passed the router",
                       r.params[i].name, v);
            FUZZ_CHECK(srv_param(&r, r.params[i].name) != NULL, "srv_param(%s)", r.params[i].name);
        }
        if (srv_param(&r, "n") != NULL)
            FUZZ_CHECK(srv_param_version(&r) >= 1, "version of '%s'", srv_param(&r, "n"));
        check_rebuild(&r, path);
        break;
    case MG_EINVAL:
        FUZZ_CHECK(r.err.code == MG_EINVAL && r.err.message[0] != '\0',
                   "MG_EINVAL without a message for %s %s", method, path);
        break;
    case MG_ENOTFOUND:
    case MG_EMETHOD:
        FUZZ_CHECK(r.nparams == 0, "%u parameters left after no match", r.nparams);
        break;
    default:
        FUZZ_CHECK(0, "unexpected code %d for %s %s", (int)rc, method, path);
    }

    for (i = 0; i < SRV_MAX_PARAMS; i++)
        free(r.params[i].value);
    free(path);
    return 0;
}
