/*
 * test_routing.c - gates/routing.c: header names and values (docs/contract.md "Routing strategies":
 * lowercase HTTP tokens; 1-128 printable ASCII without '"' '\' ';' '{' '}' or spaces) and
 * the validation of an alias's match rules and shadow, as tables of cases.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "gates/routing.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

static void test_header_names(void **state)
{
    static const struct {
        const char *s;
        bool ok;
    } cases[] = {
        {"x-tenant", true},
        {"x", true},
        {"x_tenant", true},
        {"x.tenant", true},
        {"!#$%&'*+-.^_`|~", true},
        {"0", true},
        {"X-Tenant", false},
        {"x tenant", false},
        {"x:tenant", false},
        {"x\"y", false},
        {"x/y", false},
        {"x;y", false},
        {"x(y)", false},
        {"x,y", false},
        {"x=y", false},
        {"", false},
        {"\tx", false},
        {"x\x7f", false},
        {"x\xc3\xa9", false},
        {"x@y", false},
    };
    char longest[GATE_HEADER_NAME_MAX + 2];
    size_t i, bad = 0;

    (void)state;
    for (i = 0; i < N_ELEMS(cases); i++) {
        if (gate_header_name_ok(cases[i].s, strlen(cases[i].s)) != cases[i].ok) {
            print_error("header name \"%s\": want %s\n", cases[i].s,
                        cases[i].ok ? "ok" : "refused");
            bad++;
        }
    }
    memset(longest, 'h', sizeof(longest));
    assert_true(gate_header_name_ok(longest, GATE_HEADER_NAME_MAX));
    assert_false(gate_header_name_ok(longest, GATE_HEADER_NAME_MAX + 1));
    assert_false(gate_header_name_ok(NULL, 0));
    /* a NUL inside the given length is not a token character */
    assert_false(gate_header_name_ok("x\0y", 3));
    assert_int_equal(bad, 0);
}

static void test_header_values(void **state)
{
    static const struct {
        const char *s;
        bool ok;
    } cases[] = {
        {"acme", true},         {"1", true},        {"ACME", true},
        {"a=b", true},          {"a#b$c'd~", true}, {"!", true},
        {"(x)", true},          {"a,b", true},      {"a b", false},
        {"a\"b", false},        {"a\\b", false},    {"a;b", false},
        {"a{b", false},         {"a}b", false},     {"", false},
        {"a\tb", false},        {"a\nb", false},    {"a\x7f", false},
        {"caf\xc3\xa9", false}, {" a", false},
    };
    char longest[GATE_HEADER_VALUE_MAX + 2];
    size_t i, bad = 0;

    (void)state;
    for (i = 0; i < N_ELEMS(cases); i++) {
        if (gate_header_value_ok(cases[i].s, strlen(cases[i].s)) != cases[i].ok) {
            print_error("header value \"%s\": want %s\n", cases[i].s,
                        cases[i].ok ? "ok" : "refused");
            bad++;
        }
    }
    memset(longest, 'v', sizeof(longest));
    assert_true(gate_header_value_ok(longest, GATE_HEADER_VALUE_MAX));
    assert_false(gate_header_value_ok(longest, GATE_HEADER_VALUE_MAX + 1));
    assert_false(gate_header_value_ok("a\0b", 3));
    assert_int_equal(bad, 0);
}

static json_t *load(const char *text)
{
    json_error_t e;
    json_t *j;

    if (text == NULL)
        return NULL;
    j = json_loads(text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
    if (j == NULL)
        fail_msg("test JSON does not parse (%s): %s", e.text, text);
    return j;
}

static void test_parse_valid(void **state)
{
    static const struct {
        const char *match, *shadow; /* NULL: absent */
        const char *want_match, *want_shadow;
    } cases[] = {
        {NULL, NULL, "[]", "null"},
        {"[]", "null", "[]", "null"},
        {"null", NULL, "[]", "null"},
        {"[{\"header\":\"x-tenant\",\"value\":\"acme\",\"version\":2}]", NULL,
         "[{\"header\":\"x-tenant\",\"value\":\"acme\",\"version\":2}]", "null"},
        /* the same header with another value, another header with the same value */
        {"[{\"header\":\"x-tenant\",\"value\":\"acme\",\"version\":2},"
         "{\"header\":\"x-tenant\",\"value\":\"beta\",\"version\":3},"
         "{\"header\":\"x-canary\",\"value\":\"acme\",\"version\":3}]",
         NULL,
         "[{\"header\":\"x-tenant\",\"value\":\"acme\",\"version\":2},"
         "{\"header\":\"x-tenant\",\"value\":\"beta\",\"version\":3},"
         "{\"header\":\"x-canary\",\"value\":\"acme\",\"version\":3}]",
         "null"},
        {NULL, "{\"version\":2,\"percent\":100}", "[]", "{\"version\":2,\"percent\":100}"},
        {NULL, "{\"version\":2,\"percent\":1}", "[]", "{\"version\":2,\"percent\":1}"},
        /* percent left out: every request */
        {NULL, "{\"version\":7}", "[]", "{\"version\":7,\"percent\":100}"},
    };
    size_t i;

    (void)state;
    for (i = 0; i < N_ELEMS(cases); i++) {
        json_t *m = load(cases[i].match), *sh = load(cases[i].shadow), *mo = NULL, *so = NULL;
        json_t *wm = load(cases[i].want_match), *ws = load(cases[i].want_shadow);
        struct mg_error err;

        memset(&err, 0, sizeof(err));
        if (gate_routing_parse(m, sh, &mo, &so, &err) != MG_OK)
            fail_msg("case %zu refused: %s (%s)", i, err.message, err.field);
        if (!json_equal(mo, wm) || !json_equal(so, ws)) {
            char *a = json_dumps(mo, JSON_ENCODE_ANY), *b = json_dumps(so, JSON_ENCODE_ANY);
            fail_msg("case %zu: match %s shadow %s", i, a, b);
        }
        json_decref(m);
        json_decref(sh);
        json_decref(mo);
        json_decref(so);
        json_decref(wm);
        json_decref(ws);
    }
}

static void test_parse_invalid(void **state)
{
    static const struct {
        const char *match, *shadow;
        const char *field;
    } cases[] = {
        {"{}", NULL, "match"},
        {"\"x-tenant\"", NULL, "match"},
        {"[1]", NULL, "match[0]"},
        {"[{\"header\":\"x-tenant\",\"value\":\"acme\",\"version\":2,\"weight\":5}]", NULL,
         "match[0]"},
        {"[{\"value\":\"acme\",\"version\":2}]", NULL, "match[0].header"},
        {"[{\"header\":\"X-Tenant\",\"value\":\"acme\",\"version\":2}]", NULL, "match[0].header"},
        {"[{\"header\":\"x tenant\",\"value\":\"acme\",\"version\":2}]", NULL, "match[0].header"},
        {"[{\"header\":\"x-tenant:\",\"value\":\"acme\",\"version\":2}]", NULL, "match[0].header"},
        {"[{\"header\":\"\",\"value\":\"acme\",\"version\":2}]", NULL, "match[0].header"},
        {"[{\"header\":7,\"value\":\"acme\",\"version\":2}]", NULL, "match[0].header"},
        {"[{\"header\":\"x-tenant\",\"version\":2}]", NULL, "match[0].value"},
        {"[{\"header\":\"x-tenant\",\"value\":\"\",\"version\":2}]", NULL, "match[0].value"},
        {"[{\"header\":\"x-tenant\",\"value\":\"ac me\",\"version\":2}]", NULL, "match[0].value"},
        {"[{\"header\":\"x-tenant\",\"value\":\"a\\\"b\",\"version\":2}]", NULL, "match[0].value"},
        {"[{\"header\":\"x-tenant\",\"value\":\"a\\\\b\",\"version\":2}]", NULL, "match[0].value"},
        {"[{\"header\":\"x-tenant\",\"value\":\"a;b\",\"version\":2}]", NULL, "match[0].value"},
        {"[{\"header\":\"x-tenant\",\"value\":\"a{b}\",\"version\":2}]", NULL, "match[0].value"},
        {"[{\"header\":\"x-tenant\",\"value\":\"a\\u0000b\",\"version\":2}]", NULL,
         "match[0].value"},
        {"[{\"header\":\"x-tenant\",\"value\":\"caf\\u00e9\",\"version\":2}]", NULL,
         "match[0].value"},
        {"[{\"header\":\"x-tenant\",\"value\":1,\"version\":2}]", NULL, "match[0].value"},
        {"[{\"header\":\"x-tenant\",\"value\":\"acme\"}]", NULL, "match[0].version"},
        {"[{\"header\":\"x-tenant\",\"value\":\"acme\",\"version\":0}]", NULL, "match[0].version"},
        {"[{\"header\":\"x-tenant\",\"value\":\"acme\",\"version\":\"2\"}]", NULL,
         "match[0].version"},
        {"[{\"header\":\"x-tenant\",\"value\":\"acme\",\"version\":2.5}]", NULL,
         "match[0].version"},
        {"[{\"header\":\"x-tenant\",\"value\":\"acme\",\"version\":2},"
         "{\"header\":\"x-tenant\",\"value\":\"acme\",\"version\":3}]",
         NULL, "match[1]"},
        {NULL, "2", "shadow"},
        {NULL, "[]", "shadow"},
        {NULL, "{\"version\":2,\"weight\":10}", "shadow"},
        {NULL, "{}", "shadow.version"},
        {NULL, "{\"version\":0}", "shadow.version"},
        {NULL, "{\"version\":\"2\"}", "shadow.version"},
        {NULL, "{\"version\":2,\"percent\":0}", "shadow.percent"},
        {NULL, "{\"version\":2,\"percent\":101}", "shadow.percent"},
        {NULL, "{\"version\":2,\"percent\":-5}", "shadow.percent"},
        {NULL, "{\"version\":2,\"percent\":12.5}", "shadow.percent"},
        {NULL, "{\"version\":2,\"percent\":\"50\"}", "shadow.percent"},
        {NULL, "{\"version\":2,\"percent\":null}", "shadow.percent"},
    };
    size_t i, bad = 0;

    (void)state;
    for (i = 0; i < N_ELEMS(cases); i++) {
        json_t *m = load(cases[i].match), *sh = load(cases[i].shadow);
        json_t *mo = (json_t *)0x1, *so = (json_t *)0x1;
        struct mg_error err;
        enum mg_code rc;

        memset(&err, 0, sizeof(err));
        rc = gate_routing_parse(m, sh, &mo, &so, &err);
        if (rc != MG_EINVAL || err.code != MG_EINVAL || strcmp(err.field, cases[i].field) != 0 ||
            err.message[0] == '\0' || mo != (json_t *)0x1 || so != (json_t *)0x1) {
            print_error("match %s shadow %s: rc %d field \"%s\" (%s), want \"%s\"\n",
                        cases[i].match ? cases[i].match : "-",
                        cases[i].shadow ? cases[i].shadow : "-", rc, err.field, err.message,
                        cases[i].field);
            bad++;
        }
        json_decref(m);
        json_decref(sh);
    }
    assert_int_equal(bad, 0);
}

/* At most GATE_MATCH_MAX rules. */
static void test_parse_rule_count(void **state)
{
    size_t n;

    (void)state;
    for (n = GATE_MATCH_MAX; n <= GATE_MATCH_MAX + 1; n++) {
        json_t *list = json_array(), *mo = NULL, *so = NULL;
        struct mg_error err;
        char value[16];
        size_t i;

        for (i = 0; i < n; i++) {
            snprintf(value, sizeof(value), "t%zu", i);
            json_array_append_new(list, json_pack("{s:s, s:s, s:i}", "header", "x-tenant", "value",
                                                  value, "version", 1));
        }
        memset(&err, 0, sizeof(err));
        if (n == GATE_MATCH_MAX) {
            assert_int_equal(gate_routing_parse(list, NULL, &mo, &so, &err), MG_OK);
            assert_int_equal(json_array_size(mo), GATE_MATCH_MAX);
        } else {
            assert_int_equal(gate_routing_parse(list, NULL, &mo, &so, &err), MG_EINVAL);
            assert_string_equal(err.field, "match");
        }
        json_decref(list);
        json_decref(mo);
        json_decref(so);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_header_names),     cmocka_unit_test(test_header_values),
        cmocka_unit_test(test_parse_valid),      cmocka_unit_test(test_parse_invalid),
        cmocka_unit_test(test_parse_rule_count),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
