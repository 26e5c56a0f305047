/*
 * test_text.c - common/text.c: UTF-8 validation, request target checks, method labels,
 * log and Prometheus label escaping. Tables of cases.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/text.h"

static void test_utf8(void **state)
{
    static const struct {
        const char *s;
        bool ok;
    } cases[] = {
        {"", true},
        {"plain ascii", true},
        {"\xc3\xa9t\xc3\xa9", true}, /* été */
        {"\xe2\x82\xac", true},      /* € */
        {"\xf0\x9f\x98\x80", true},  /* an emoji */
        {"\xff", false},             /* never a UTF-8 byte */
        {"\xc0\xaf", false},         /* overlong '/' */
        {"\xe0\x80\xaf", false},     /* overlong, 3 bytes */
        {"\xed\xa0\x80", false},     /* a surrogate */
        {"\xf4\x90\x80\x80", false}, /* beyond U+10FFFF */
        {"\xc3", false},             /* cut short */
        {"a\xe2\x82", false},        /* cut short */
        {"\x80", false},             /* a lone continuation byte */
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (mg_utf8_valid(cases[i].s, strlen(cases[i].s)) != cases[i].ok)
            fail_msg("case %zu: expected %s", i, cases[i].ok ? "valid" : "invalid");
    }
}

static void test_request_target(void **state)
{
    static const struct {
        const char *target;
        bool ok;
    } cases[] = {
        {"/api/v1/models", true},
        {"/api/v1/models/fraud/versions/1", true},
        {"/api/v1/models/%c3%a9", true},
        {"/api/v1/models?q=%00", true}, /* the query is not the path */
        {"/api/v1/models/a%20b", true},
        {"/api/v1/tokens%00junk", false},
        {"/static/app.js%00.html", false},
        {"/api/v1/models/%ff", false},
        {"/api/v1/models/%c0%af", false},
        {"/a%0d%0ab", false},
        {"/a%0A", false},
        {"/a%7f", false},
        {"/a\x01", false},
        {"/a\x7f", false},
        {"/a%", false},
        {"/a%4", false},
        {"/a%zz", false},
        {"/\xc3\xa9", true}, /* raw UTF-8 is UTF-8 */
        {"/\xff", false},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *why = mg_request_target_problem(cases[i].target);

        if ((why == NULL) != cases[i].ok)
            fail_msg("'%s': %s", cases[i].target, why ? why : "accepted");
        if (why != NULL && (strstr(why, "junk") || strstr(why, "\xff")))
            fail_msg("'%s': the reason echoes the bytes: %s", cases[i].target, why);
    }
}

static void test_methods(void **state)
{
    (void)state;
    assert_string_equal(mg_method_label("GET"), "GET");
    assert_string_equal(mg_method_label("DELETE"), "DELETE");
    assert_string_equal(mg_method_label("get"), "other");
    assert_string_equal(mg_method_label("X\"}9"), "other");
    assert_string_equal(mg_method_label("PROPFIND"), "other");
    assert_string_equal(mg_method_label(NULL), "other");
    assert_true(mg_method_valid("GET"));
    assert_true(mg_method_valid("M-SEARCH"));
    assert_false(mg_method_valid(""));
    assert_false(mg_method_valid(NULL));
    assert_false(mg_method_valid("X\"}9"));
    assert_false(mg_method_valid("A B"));
    assert_false(mg_method_valid("A\r\n"));
    assert_false(mg_method_valid("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")); /* 33 */
}

static void test_log_escape(void **state)
{
    char out[64];

    (void)state;
    assert_string_equal(mg_log_escape("/a\r\nb", out, sizeof(out), false), "/a\\x0d\\x0ab");
    assert_string_equal(mg_log_escape("/\xff\xfe", out, sizeof(out), false), "/\\xff\\xfe");
    assert_string_equal(mg_log_escape("a\\b", out, sizeof(out), false), "a\\x5cb");
    assert_string_equal(mg_log_escape("\xc3\xa9t\xc3\xa9", out, sizeof(out), false),
                        "\xc3\xa9t\xc3\xa9");
    /* JSON: control characters stay for the encoder (\uXXXX), bad bytes are rewritten */
    assert_string_equal(mg_log_escape("/a\nb\xff", out, sizeof(out), true), "/a\nb\\xff");
    assert_true(mg_utf8_valid(out, strlen(out)));
    /* cut to fit, never in the middle of an escape or a character */
    assert_string_equal(mg_log_escape("\xff\xff\xff", out, 9, false), "\\xff\\xff");
    assert_string_equal(mg_log_escape("a\xc3\xa9", out, 3, false), "a");
    assert_string_equal(mg_log_escape(NULL, out, sizeof(out), false), "");
    /* plain ASCII (copied whole): cut to fit too */
    assert_string_equal(mg_log_escape("/api/v1/models", out, 5, false), "/api");
    assert_string_equal(mg_log_escape("/api", out, 5, true), "/api");
    assert_string_equal(mg_log_escape("/a b~", out, sizeof(out), false), "/a b~");
    assert_string_equal(mg_log_escape("/a\x7f", out, sizeof(out), false), "/a\\x7f");
}

static void test_prom_label(void **state)
{
    char out[64];

    (void)state;
    assert_string_equal(mg_prom_label("gw-1", out, sizeof(out)), "gw-1");
    assert_string_equal(mg_prom_label("X\"}9", out, sizeof(out)), "X\\\"}9");
    assert_string_equal(mg_prom_label("a\\b\nc", out, sizeof(out)), "a\\\\b\\nc");
    assert_string_equal(mg_prom_label("\xff", out, sizeof(out)), "?");
    assert_string_equal(mg_prom_label("\"\"\"", out, 5), "\\\"\\\"");
    assert_string_equal(mg_prom_label(NULL, out, sizeof(out)), "");
}

static void test_fmt_double(void **state)
{
    static const double v[] = {0.942, 0.1 + 0.2, 1.7976931348623157e308, 4.9406564584124654e-324,
                               1e21,  -0.0,      9007199254740993.0,     0.905};
    char out[32];

    (void)state;
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
        assert_true(strtod(mg_fmt_double(v[i], out, sizeof(out)), NULL) == v[i]);
    assert_string_equal(mg_fmt_double(0.942, out, sizeof(out)), "0.942"); /* shortest */
    assert_string_equal(mg_fmt_double(0.1 + 0.2, out, sizeof(out)), "0.30000000000000004");
}

/* The printf loop mg_fmt_double was before its decimal shortcut: the reference. */
static void fmt_double_printf(double v, char *out, size_t cap)
{
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(out, cap, "%.*g", prec, v);
        if (strtod(out, NULL) == v)
            break;
    }
}

static void expect_fmt_same(double v)
{
    char got[40], want[40];

    mg_fmt_double(v, got, sizeof(got));
    fmt_double_printf(v, want, sizeof(want));
    if (strcmp(got, want) != 0)
        fail_msg("mg_fmt_double(%a) = \"%s\", printf's loop \"%s\"", v, got, want);
}

/* The shortcut for short decimals writes what the printf loop writes, byte for byte: short
 * decimals of every length and scale, their neighbours, the range's edges, random bits. */
static void test_fmt_double_shortcut(void **state)
{
    static const double edges[] = {1e-4,
                                   1e-5,
                                   9.9999999999999e-5,
                                   1e14,
                                   99999999999999.9,
                                   99999999999999.99,
                                   1e15,
                                   123456789012345.0,
                                   0.5,
                                   2.0,
                                   16.95,
                                   1.3,
                                   41.5,
                                   0.001,
                                   7e9,
                                   0.1,
                                   0.7,
                                   1e-3,
                                   5e-324,
                                   0.0,
                                   -0.0,
                                   1.0 / 3.0,
                                   2.675,
                                   1.005,
                                   0.3,
                                   9007199254740993.0};
    uint64_t x = 0x9e3779b97f4a7c15ull;
    char out[40];

    (void)state;
    for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++) {
        expect_fmt_same(edges[i]);
        expect_fmt_same(-edges[i]);
        expect_fmt_same(nextafter(edges[i], 0));
        expect_fmt_same(nextafter(edges[i], 1e300));
    }
    for (int i = 0; i < 200000; i++) {
        double v, p = 1;
        int digits, scale;
        uint64_t m;

        x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift64 */
        digits = 1 + (int)(x % 17);
        scale = (int)((x >> 8) % 24);
        m = (x >> 16) % 100000000000000000ull;
        for (int d = 17; d > digits; d--)
            m /= 10;
        for (int s = 0; s < scale; s++)
            p *= 10;
        v = (double)m / p;
        expect_fmt_same(v);
        expect_fmt_same(-v);
        expect_fmt_same(nextafter(v, 0));
        expect_fmt_same(nextafter(v, 1e300));
        memcpy(&v, &x, sizeof(v)); /* any bits */
        if (v == v)
            expect_fmt_same(v);
    }
    assert_string_equal(mg_fmt_double(0.0001, out, sizeof(out)), "0.0001");
    assert_string_equal(mg_fmt_double(-41.5, out, sizeof(out)), "-41.5");
    assert_string_equal(mg_fmt_double(12.0, out, sizeof(out)), "12");
    assert_string_equal(mg_fmt_double(1e14, out, sizeof(out)), "100000000000000");
}

/* Reals in JSON text as their shortest round-trip text; nothing else changes. */
static void test_json_short_reals(void **state)
{
    static const struct {
        const char *in, *out;
    } cases[] = {
        {"{\"auc\":0.94199999999999995}", "{\"auc\":0.942}"},
        {"[0.30000000000000004,-0.0,3.0,1e+22,12,-7,9007199254740993]",
         "[0.30000000000000004,-0.0,3.0,1e+22,12,-7,9007199254740993]"},
        {"{\"a\": [\n  1.1000000000000001,\n  -2.5e-07\n]}", "{\"a\": [\n  1.1,\n  -2.5e-07\n]}"},
        /* numbers inside strings, escaped quotes included, stay as they are */
        {"{\"m\":\"0.94199999999999995 \\\" 0.10000000000000001\",\"v\":0.10000000000000001}",
         "{\"m\":\"0.94199999999999995 \\\" 0.10000000000000001\",\"v\":0.1}"},
        {"\"\\\\\"", "\"\\\\\""},
        {"", ""},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *out = mg_json_short_reals(cases[i].in);

        assert_non_null(out);
        assert_string_equal(out, cases[i].out);
        free(out);
    }
}

/* mg_fmt_i64 writes what %lld does, the ends of the range included. */
static void test_fmt_i64(void **state)
{
    static const int64_t cases[] = {0,       7,          -1,        10,        -10,          499,
                                    1000000, 7000000000, INT64_MAX, INT64_MIN, INT64_MIN + 1};
    char num[MG_FMT_INT_LEN], want[32];

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t n;
        const char *d = mg_fmt_i64(cases[i], num, &n);

        snprintf(want, sizeof(want), "%lld", (long long)cases[i]);
        assert_int_equal(n, strlen(want));
        assert_memory_equal(d, want, n);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_fmt_i64),
        cmocka_unit_test(test_request_target),
        cmocka_unit_test(test_methods),
        cmocka_unit_test(test_log_escape),
        cmocka_unit_test(test_prom_label),
        cmocka_unit_test(test_fmt_double),
        cmocka_unit_test(test_fmt_double_shortcut),
        cmocka_unit_test(test_json_short_reals),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
