/*
 * test_router.c - server/router.c: srv_route_match() against the real route
 * tables (method + path -> route, captured and validated path parameters),
 * and srv_route_foreach().
 *
 * No server is started: a zeroed struct srv_req is all the matcher needs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "http/http.h"

#define HEX64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define DIGEST "sha256:" HEX64

static void req_free(struct srv_req *r)
{
    unsigned i;

    for (i = 0; i < SRV_MAX_PARAMS; i++) {
        free(r->params[i].value);
        r->params[i].value = NULL;
    }
    r->nparams = 0;
}

/* ---- known routes ------------------------------------------------------------------------ */

static const struct {
    const char *method, *path;
    const char *route_method, *pattern; /* what must match */
    const char *p1, *v1, *p2, *v2;      /* captured parameters, in order */
} match_cases[] = {
    {"GET", "/healthz", "GET", "/healthz", NULL, NULL, NULL, NULL},
    {"GET", "/readyz", "GET", "/readyz", NULL, NULL, NULL, NULL},
    {"GET", "/api/v1/whoami", "GET", "/api/v1/whoami", NULL, NULL, NULL, NULL},
    {"GET", "/api/v1/signing-keys", "GET", "/api/v1/signing-keys", NULL, NULL, NULL, NULL},
    {"POST", "/api/v1/tokens", "POST", "/api/v1/tokens", NULL, NULL, NULL, NULL},
    {"GET", "/api/v1/tokens", "GET", "/api/v1/tokens", NULL, NULL, NULL, NULL},
    {"DELETE", "/api/v1/tokens/tok_0123abcd", "DELETE", "/api/v1/tokens/{id}", "id", "tok_0123abcd",
     NULL, NULL},
    {"POST", "/api/v1/blobs", "POST", "/api/v1/blobs", NULL, NULL, NULL, NULL},
    {"GET", "/api/v1/blobs/" DIGEST, "GET", "/api/v1/blobs/{digest}", "digest", DIGEST, NULL, NULL},
    {"POST", "/api/v1/models", "POST", "/api/v1/models", NULL, NULL, NULL, NULL},
    {"GET", "/api/v1/models", "GET", "/api/v1/models", NULL, NULL, NULL, NULL},
    {"GET", "/api/v1/models/resnet-50", "GET", "/api/v1/models/{model}", "model", "resnet-50", NULL,
     NULL},
    {"PATCH", "/api/v1/models/bert.base_v2", "PATCH", "/api/v1/models/{model}", "model",
     "bert.base_v2", NULL, NULL},
    {"POST", "/api/v1/models/m/versions", "POST", "/api/v1/models/{model}/versions", "model", "m",
     NULL, NULL},
    {"GET", "/api/v1/models/m/versions", "GET", "/api/v1/models/{model}/versions", "model", "m",
     NULL, NULL},
    {"GET", "/api/v1/models/llama/versions/3", "GET", "/api/v1/models/{model}/versions/{n}",
     "model", "llama", "n", "3"},
    {"PATCH", "/api/v1/models/llama/versions/12", "PATCH", "/api/v1/models/{model}/versions/{n}",
     "model", "llama", "n", "12"},
    {"POST", "/api/v1/models/llama/versions/1/metrics", "POST",
     "/api/v1/models/{model}/versions/{n}/metrics", "model", "llama", "n", "1"},
    {"GET", "/api/v1/models/llama/versions/9223372036854775807/artifact", "GET",
     "/api/v1/models/{model}/versions/{n}/artifact", "model", "llama", "n", "9223372036854775807"},
    {"GET", "/api/v1/models/llama/versions/2/files", "GET",
     "/api/v1/models/{model}/versions/{n}/files", "model", "llama", "n", "2"},
    {"GET", "/api/v1/models/llama/versions/2/signature", "GET",
     "/api/v1/models/{model}/versions/{n}/signature", "model", "llama", "n", "2"},
    {"POST", "/api/v1/datasets", "POST", "/api/v1/datasets", NULL, NULL, NULL, NULL},
    {"GET", "/api/v1/datasets/" DIGEST, "GET", "/api/v1/datasets/{digest}", "digest", DIGEST, NULL,
     NULL},
    {"GET", "/api/v1/datasets/" DIGEST "/versions", "GET", "/api/v1/datasets/{digest}/versions",
     "digest", DIGEST, NULL, NULL},
    {"GET", "/api/v1/audit", "GET", "/api/v1/audit", NULL, NULL, NULL, NULL},
    {"GET", "/api/v1/audit/verify", "GET", "/api/v1/audit/verify", NULL, NULL, NULL, NULL},
    /* HEAD is answered by the GET route. */
    {"HEAD", "/healthz", "GET", "/healthz", NULL, NULL, NULL, NULL},
    {"HEAD", "/api/v1/models/resnet", "GET", "/api/v1/models/{model}", "model", "resnet", NULL,
     NULL},
    {"HEAD", "/api/v1/blobs/" DIGEST, "GET", "/api/v1/blobs/{digest}", "digest", DIGEST, NULL,
     NULL},
    {"HEAD", "/api/v1/models/llama/versions/4/artifact", "GET",
     "/api/v1/models/{model}/versions/{n}/artifact", "model", "llama", "n", "4"},
    /* The OCI distribution API: references are tags or digests. */
    {"GET", "/v2/", "GET", "/v2/", NULL, NULL, NULL, NULL},
    {"GET", "/v2/token", "GET", "/v2/token", NULL, NULL, NULL, NULL},
    {"GET", "/v2/fraud/manifests/v1", "GET", "/v2/{model}/manifests/{ref}", "model", "fraud", "ref",
     "v1"},
    {"HEAD", "/v2/fraud/manifests/production", "GET", "/v2/{model}/manifests/{ref}", "model",
     "fraud", "ref", "production"},
    {"GET", "/v2/fraud/manifests/" DIGEST, "GET", "/v2/{model}/manifests/{ref}", "model", "fraud",
     "ref", DIGEST},
    {"GET", "/v2/fraud/manifests/Release_2.0-rc1", "GET", "/v2/{model}/manifests/{ref}", "model",
     "fraud", "ref", "Release_2.0-rc1"},
    {"PUT", "/v2/fraud/manifests/v1", "PUT", "/v2/{model}/manifests/{ref}", "model", "fraud", "ref",
     "v1"},
    {"GET", "/v2/fraud/blobs/" DIGEST, "GET", "/v2/{model}/blobs/{digest}", "model", "fraud",
     "digest", DIGEST},
    {"POST", "/v2/fraud/blobs/uploads/", "POST", "/v2/{model}/blobs/uploads/", "model", "fraud",
     NULL, NULL},
    {"GET", "/v2/fraud/tags/list", "GET", "/v2/{model}/tags/list", "model", "fraud", NULL, NULL},
    {"GET", "/v2/fraud/referrers/" DIGEST, "GET", "/v2/{model}/referrers/{digest}", "model",
     "fraud", "digest", DIGEST},
};

static void test_known_routes_match(void **state)
{
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(match_cases) / sizeof(match_cases[0]); i++) {
        struct srv_req r;
        enum mg_code rc;
        unsigned want_params = (match_cases[i].p1 != NULL) + (match_cases[i].p2 != NULL);

        memset(&r, 0, sizeof(r));
        rc = srv_route_match(&r, api_routes, match_cases[i].method, match_cases[i].path);
        if (rc != MG_OK)
            fail_msg("%s %s: code %d (%s)", match_cases[i].method, match_cases[i].path, rc,
                     r.err.message);
        assert_non_null(r.route);
        if (strcmp(r.route->method, match_cases[i].route_method) != 0 ||
            strcmp(r.route->pattern, match_cases[i].pattern) != 0)
            fail_msg("%s %s matched %s %s", match_cases[i].method, match_cases[i].path,
                     r.route->method, r.route->pattern);
        assert_non_null(r.route->handle);
        assert_int_equal(r.nparams, want_params);
        if (match_cases[i].p1) {
            assert_non_null(srv_param(&r, match_cases[i].p1));
            assert_string_equal(srv_param(&r, match_cases[i].p1), match_cases[i].v1);
        }
        if (match_cases[i].p2) {
            assert_non_null(srv_param(&r, match_cases[i].p2));
            assert_string_equal(srv_param(&r, match_cases[i].p2), match_cases[i].v2);
        }
        assert_null(srv_param(&r, "nonexistent"));
        req_free(&r);
    }
}

static void test_param_version(void **state)
{
    struct srv_req r;

    (void)state;
    memset(&r, 0, sizeof(r));
    assert_int_equal(srv_route_match(&r, api_routes, "GET", "/api/v1/models/m/versions/42"), MG_OK);
    assert_int_equal(srv_param_version(&r), 42);
    assert_string_equal(srv_param(&r, "model"), "m");
    req_free(&r);

    memset(&r, 0, sizeof(r));
    assert_int_equal(srv_route_match(&r, api_routes, "GET",
                                     "/api/v1/models/m/versions/9223372036854775807/files"),
                     MG_OK);
    assert_int_equal(srv_param_version(&r), INT64_MAX);
    req_free(&r);

    /* No {n} in the route: 0. */
    memset(&r, 0, sizeof(r));
    assert_int_equal(srv_route_match(&r, api_routes, "GET", "/api/v1/models/m"), MG_OK);
    assert_int_equal(srv_param_version(&r), 0);
    assert_null(srv_param(&r, "n"));
    req_free(&r);
}

/* The same request record is reused: a second match replaces the first's params. */
static void test_rematch_replaces_params(void **state)
{
    struct srv_req r;

    (void)state;
    memset(&r, 0, sizeof(r));
    assert_int_equal(srv_route_match(&r, api_routes, "GET", "/api/v1/models/first/versions/1"),
                     MG_OK);
    assert_int_equal(srv_route_match(&r, api_routes, "GET", "/api/v1/models/second"), MG_OK);
    assert_int_equal(r.nparams, 1);
    assert_string_equal(srv_param(&r, "model"), "second");
    assert_null(srv_param(&r, "n"));
    req_free(&r);
}

/* ---- not found and wrong method ---------------------------------------------------------- */

static void test_unknown_paths_not_found(void **state)
{
    static const char *const paths[] = {
        "",
        "/index.html", /* the UI is "/" and "/static/{file}" */
        "/api",
        "/api/v1",
        "/api/v1/",
        "/api/v1/nope",
        "/api/v2/models",
        "/healthz/",
        "/healthzz",
        "/HEALTHZ",
        "healthz",
        "//healthz",
        "/api/v1/models/",
        "/api/v1//models",
        "/api/v1/models//versions",
        "/api/v1/models/a/b", /* an extra segment is not a model name */
        "/api/v1/models/a/b/c",
        "/api/v1/models/m/versions/",
        "/api/v1/models/m/versions/1/",
        "/api/v1/models/m/versions/1/nope",
        "/api/v1/models/m/versions/1/metrics/x",
        "/api/v1/blobs/",
        "/api/v1/tokens/",
        "/api/v1/audit/verify/x",
        "/api/v1/models?x=1/versions",
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        struct srv_req r;
        enum mg_code rc;

        memset(&r, 0, sizeof(r));
        rc = srv_route_match(&r, api_routes, "GET", paths[i]);
        if (rc != MG_ENOTFOUND)
            fail_msg("GET \"%s\": code %d, want MG_ENOTFOUND", paths[i], rc);
        assert_int_equal(r.nparams, 0);
        req_free(&r);
    }
}

static void test_wrong_method(void **state)
{
    static const struct {
        const char *method, *path;
    } cases[] = {
        {"POST", "/healthz"},
        {"DELETE", "/api/v1/models"},
        {"PUT", "/api/v1/models"},
        {"PUT", "/api/v1/models/resnet"},
        {"DELETE", "/api/v1/models/resnet"},
        {"POST", "/api/v1/models/resnet"},
        {"DELETE", "/api/v1/models/m/versions/1/files"},
        {"GET", "/api/v1/models/m/versions/1/metrics"},
        {"PATCH", "/api/v1/tokens"},
        {"GET", "/api/v1/tokens/tok_1"},
        {"POST", "/api/v1/audit/verify"},
        {"GET", "/api/v1/blobs"},
        {"HEAD", "/api/v1/blobs"}, /* HEAD only stands in for GET */
        {"HEAD", "/api/v1/tokens/tok_1"},
        {"get", "/healthz"}, /* methods are case-sensitive */
        {"", "/healthz"},
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct srv_req r;
        enum mg_code rc;

        memset(&r, 0, sizeof(r));
        rc = srv_route_match(&r, api_routes, cases[i].method, cases[i].path);
        if (rc != MG_EMETHOD)
            fail_msg("%s %s: code %d, want MG_EMETHOD", cases[i].method, cases[i].path, rc);
        assert_int_equal(r.nparams, 0);
        req_free(&r);
    }
}

/* ---- invalid parameters ------------------------------------------------------------------ */

static void test_invalid_params(void **state)
{
    static const struct {
        const char *method, *path, *field;
    } cases[] = {
        {"GET", "/api/v1/models/UPPER", "model"},
        {"GET", "/api/v1/models/Resnet", "model"},
        {"PATCH", "/api/v1/models/UPPER", "model"},
        {"GET", "/api/v1/models/..", "model"},
        {"GET", "/api/v1/models/.", "model"},
        {"GET", "/api/v1/models/%2e%2e", "model"},
        {"GET", "/api/v1/models/%2e%2e/versions", "model"},
        {"GET", "/api/v1/models/-a", "model"},
        {"GET", "/api/v1/models/_a", "model"},
        {"GET", "/api/v1/models/.a", "model"},
        {"GET",
         "/api/v1/models/"
         "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
         "model"}, /* 64 characters */
        {"GET", "/api/v1/models/m/versions/0", "version"},
        {"GET", "/api/v1/models/m/versions/abc", "version"},
        {"GET", "/api/v1/models/m/versions/007", "version"},
        {"GET", "/api/v1/models/m/versions/-1", "version"},
        {"GET", "/api/v1/models/m/versions/+1", "version"},
        {"GET", "/api/v1/models/m/versions/1.0", "version"},
        {"GET", "/api/v1/models/m/versions/9223372036854775808", "version"},
        {"GET", "/api/v1/models/m/versions/99999999999999999999999999999999999999", "version"},
        {"PATCH", "/api/v1/models/m/versions/0", "version"},
        {"POST", "/api/v1/models/m/versions/007/metrics", "version"},
        {"GET", "/api/v1/models/m/versions/abc/files", "version"},
        {"GET", "/api/v1/blobs/sha256:abc", "digest"},
        {"GET", "/api/v1/blobs/" HEX64, "digest"},
        {"GET",
         "/api/v1/blobs/sha256:"
         "0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef",
         "digest"},
        {"GET", "/api/v1/datasets/sha256:zz/versions", "digest"},
        {"DELETE", "/api/v1/tokens/TOK", "id"},
        {"DELETE", "/api/v1/tokens/tok.1", "id"},
        {"DELETE", "/api/v1/tokens/%2e%2e", "id"},
        {"GET", "/v2/Fraud/manifests/v1", "model"},
        {"GET", "/v2/fraud/manifests/sha256:abc", "digest"},
        {"GET", "/v2/fraud/manifests/sha512:" HEX64, "digest"},
        {"GET", "/v2/fraud/manifests/.hidden", "reference"},
        {"GET", "/v2/fraud/manifests/-v1", "reference"},
        {"GET", "/v2/fraud/manifests/a+b", "reference"},
        {"GET",
         "/v2/fraud/manifests/"
         "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
         "x"
         "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
         "reference"}, /* 129 characters */
        {"GET", "/v2/fraud/blobs/" HEX64, "digest"},
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct srv_req r;
        enum mg_code rc;

        memset(&r, 0, sizeof(r));
        rc = srv_route_match(&r, api_routes, cases[i].method, cases[i].path);
        if (rc != MG_EINVAL)
            fail_msg("%s %s: code %d, want MG_EINVAL", cases[i].method, cases[i].path, rc);
        assert_int_equal(r.err.code, MG_EINVAL);
        if (strcmp(r.err.field, cases[i].field) != 0)
            fail_msg("%s %s: field \"%s\", want \"%s\"", cases[i].method, cases[i].path,
                     r.err.field, cases[i].field);
        assert_true(strlen(r.err.message) > 0);
        req_free(&r);
    }
}

/* The model-name message quotes the bad name, capped so that a huge path
 * cannot make a huge message. */
static void test_invalid_model_message(void **state)
{
    struct srv_req r;
    char path[400];

    (void)state;
    memset(&r, 0, sizeof(r));
    assert_int_equal(srv_route_match(&r, api_routes, "GET", "/api/v1/models/UPPER"), MG_EINVAL);
    assert_non_null(strstr(r.err.message, "UPPER"));
    req_free(&r);

    memset(&r, 0, sizeof(r));
    snprintf(path, sizeof(path), "/api/v1/models/");
    memset(path + strlen(path), 'A', 300);
    path[strlen("/api/v1/models/") + 300] = '\0';
    assert_int_equal(srv_route_match(&r, api_routes, "GET", path), MG_EINVAL);
    assert_string_equal(r.err.field, "model");
    assert_true(strlen(r.err.message) < 200);
    req_free(&r);
}

/* ---- srv_route_foreach ------------------------------------------------------------------- */

struct visit {
    const struct srv_route *seen[256];
    unsigned n;
    unsigned bad_pattern;
};

static void visit_route(const struct srv_route *route, void *arg)
{
    struct visit *v = arg;

    if (v->n < sizeof(v->seen) / sizeof(v->seen[0]))
        v->seen[v->n] = route;
    v->n++;
    if (route->pattern == NULL || route->pattern[0] != '/')
        v->bad_pattern++;
}

static bool was_seen(const struct visit *v, const struct srv_route *route)
{
    unsigned i;

    for (i = 0; i < v->n; i++) {
        if (v->seen[i] == route)
            return true;
    }
    return false;
}

static void test_route_foreach_visits_every_route(void **state)
{
    const struct srv_route *const tables[] = {
        api_routes_health,    api_routes_tokens,   api_routes_blobs,      api_routes_models,
        api_routes_versions,  api_routes_datasets, api_routes_audit,      api_routes_keys,
        api_routes_aliases,   api_routes_policies, api_routes_promotions, api_routes_gateways,
        api_routes_runner,    api_routes_ui,       api_routes_metrics,    api_routes_oci,
        api_routes_lifecycle, api_routes_identity, api_routes_sso,        api_routes_usage,
    };
    struct visit v;
    unsigned total = 0;
    size_t t;
    const struct srv_route *r;

    (void)state;
    memset(&v, 0, sizeof(v));
    srv_route_foreach(api_routes, visit_route, &v);
    assert_true(v.n <= sizeof(v.seen) / sizeof(v.seen[0]));
    assert_int_equal(v.bad_pattern, 0);
    for (t = 0; t < sizeof(tables) / sizeof(tables[0]); t++) {
        for (r = tables[t]; r->method != NULL; r++) {
            total++;
            if (!was_seen(&v, r))
                fail_msg("srv_route_foreach skipped %s %s", r->method, r->pattern);
            assert_non_null(r->pattern);
            assert_int_equal(r->pattern[0], '/');
            assert_non_null(r->handle);
        }
    }
    assert_int_equal(v.n, total);
    assert_true(total >= 26);
}

/* Every registered route is reachable by srv_route_match with sample
 * parameter values (no route is shadowed by an earlier one). */
static void test_every_route_reachable(void **state)
{
    struct visit v;
    unsigned i;

    (void)state;
    memset(&v, 0, sizeof(v));
    srv_route_foreach(api_routes, visit_route, &v);
    for (i = 0; i < v.n; i++) {
        const struct srv_route *rt = v.seen[i];
        char path[512];
        const char *p = rt->pattern;
        size_t o = 0;
        struct srv_req r;
        enum mg_code rc;

        while (*p && o < sizeof(path) - 80) {
            if (*p == '{') {
                const char *e = strchr(p, '}');
                const char *val = "x";
                assert_non_null(e);
                if (strncmp(p, "{model}", 7) == 0)
                    val = "m";
                else if (strncmp(p, "{n}", 3) == 0)
                    val = "1";
                else if (strncmp(p, "{digest}", 8) == 0)
                    val = DIGEST;
                else if (strncmp(p, "{id}", 4) == 0)
                    val = "tok_1";
                else if (strncmp(p, "{alias}", 7) == 0)
                    val = "prod";
                else if (strncmp(p, "{name}", 6) == 0)
                    val = "gw";
                else if (strncmp(p, "{ref}", 5) == 0)
                    val = "v1";
                o += (size_t)snprintf(path + o, sizeof(path) - o, "%s", val);
                p = e + 1;
            } else {
                path[o++] = *p++;
            }
        }
        path[o] = '\0';
        memset(&r, 0, sizeof(r));
        rc = srv_route_match(&r, api_routes, rt->method, path);
        if (rc != MG_OK || r.route != rt)
            fail_msg("%s %s (from %s) did not reach its own route (code %d)", rt->method, path,
                     rt->pattern, rc);
        req_free(&r);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_routes_match),
        cmocka_unit_test(test_param_version),
        cmocka_unit_test(test_rematch_replaces_params),
        cmocka_unit_test(test_unknown_paths_not_found),
        cmocka_unit_test(test_wrong_method),
        cmocka_unit_test(test_invalid_params),
        cmocka_unit_test(test_invalid_model_message),
        cmocka_unit_test(test_route_foreach_visits_every_route),
        cmocka_unit_test(test_every_route_reachable),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
