/*
 * test_alias.c - an alias's routes between the record and JSON (model/alias.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "model/alias.h"

/* JSON text of v (compact, in its own member order), compared with want; v is consumed. */
static void expect_text(json_t *v, const char *want)
{
    char *t;

    assert_non_null(v);
    t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    assert_non_null(t);
    assert_string_equal(t, want);
    free(t);
    json_decref(v);
}

/* The stored shapes come back member for member, in the contract's order. */
static void test_round_trip(void **state)
{
    json_t *routes = json_pack("[{s:i, s:i}, {s:i, s:i}]", "weight", 90, "version", 1, "version", 2,
                               "weight", 10);
    json_t *match =
        json_pack("[{s:s, s:s, s:i}]", "version", "x", "header", "x-canary", "value", "1");
    json_t *shadow = json_pack("{s:i, s:i}", "percent", 25, "version", 3);
    struct mg_routes r;
    struct mg_error err;

    (void)state;
    /* "version" above is a string in match: refused */
    assert_int_equal(mg_routes_from_json(routes, match, shadow, &r, &err), MG_EINVAL);
    assert_string_equal(err.field, "match");
    json_decref(match);
    match = json_pack("[{s:i, s:s, s:s}]", "version", 2, "header", "x-canary", "value", "1");
    assert_int_equal(mg_routes_from_json(routes, match, shadow, &r, &err), MG_OK);
    assert_int_equal(r.nroutes, 2);
    assert_int_equal(r.routes[0].version, 1);
    assert_int_equal(r.routes[0].weight, 90);
    assert_int_equal(r.nmatch, 1);
    assert_string_equal(r.match[0].header, "x-canary");
    assert_int_equal(r.shadow.version, 3);
    assert_int_equal(r.shadow.percent, 25);
    expect_text(mg_routes_json(&r),
                "[{\"version\":1,\"weight\":90},{\"version\":2,\"weight\":10}]");
    expect_text(mg_match_json(&r), "[{\"header\":\"x-canary\",\"value\":\"1\",\"version\":2}]");
    expect_text(mg_shadow_json(&r), "{\"version\":3,\"percent\":25}");
    json_decref(routes);
    json_decref(match);
    json_decref(shadow);
}

/* None of anything: no routes (a deleted alias), [] match rules and a null shadow. */
static void test_none(void **state)
{
    static const struct mg_routes none;
    struct mg_routes r;
    struct mg_error err;
    json_t *null = json_null();

    (void)state;
    assert_int_equal(mg_routes_from_json(NULL, null, null, &r, &err), MG_OK);
    assert_int_equal(r.nroutes, 0);
    assert_int_equal(r.nmatch, 0);
    assert_int_equal(r.shadow.version, 0);
    expect_text(mg_routes_json(&none), "[]");
    expect_text(mg_match_json(&none), "[]");
    expect_text(mg_shadow_json(&none), "null");
    json_decref(null);
}

/* More than the record holds, or text longer than its buffers, is refused, not cut. */
static void test_limits(void **state)
{
    json_t *routes = json_array(), *match;
    struct mg_routes r;
    struct mg_error err;
    char header[MG_MATCH_HEADER_MAX + 2];
    int i;

    (void)state;
    for (i = 0; i <= MG_ROUTES_MAX; i++)
        json_array_append_new(routes, json_pack("{s:i, s:i}", "version", i + 1, "weight", 0));
    assert_int_equal(mg_routes_from_json(routes, NULL, NULL, &r, &err), MG_EINVAL);
    assert_string_equal(err.field, "routes");
    json_decref(routes);
    memset(header, 'h', sizeof(header) - 1);
    header[sizeof(header) - 1] = '\0';
    match = json_pack("[{s:s, s:s, s:i}]", "header", header, "value", "v", "version", 1);
    assert_int_equal(mg_routes_from_json(NULL, match, NULL, &r, &err), MG_EINVAL);
    json_decref(match);
    header[MG_MATCH_HEADER_MAX] = '\0'; /* exactly the most a header may hold */
    match = json_pack("[{s:s, s:s, s:i}]", "header", header, "value", "v", "version", 1);
    assert_int_equal(mg_routes_from_json(NULL, match, NULL, &r, &err), MG_OK);
    assert_int_equal(strlen(r.match[0].header), MG_MATCH_HEADER_MAX);
    json_decref(match);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_none),
        cmocka_unit_test(test_limits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
