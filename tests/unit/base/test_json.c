/* mg_json_text: byte for byte the text of json_dumps + mg_json_short_reals, which it
 * replaced on the reply path. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/json.h"
#include "base/text.h"

/* What replies used to be: jansson's text with 17 digits, reals shortened afterwards. */
static char *old_text(const json_t *v)
{
    char *exact = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(17));
    char *text = exact ? mg_json_short_reals(exact) : NULL;

    free(exact);
    return text;
}

static void same(const json_t *v)
{
    char *want = old_text(v);
    size_t len = 0;
    char *got = mg_json_text(v, &len);

    assert_non_null(want);
    assert_non_null(got);
    assert_string_equal(got, want);
    assert_int_equal(len, strlen(want));
    free(want);
    free(got);
}

static void test_shapes(void **state)
{
    static const char *const docs[] = {
        "{}",
        "[]",
        "{\"a\":1,\"b\":[true,false,null],\"c\":{\"d\":\"e\"},\"z\":-9223372036854775807}",
        "{\"auc\":0.942,\"p95\":41.5,\"lr\":0.001,\"n\":7000000000,\"x\":3.0,\"y\":-0.0}",
        ("[0.1,0.30000000000000004,1e22,1e-7,-2.5e-7,123456789012345678.0,5e-324,"
         "1.7976931348623157e308,100.0,1e15,1e16,1e17,0.5,2.2250738585072014e-308]"),
        "{\"s\":\"quote \\\" backslash \\\\ slash / tab \\t nl \\n cr \\r bs \\b ff \\f\"}",
        "{\"ctl\":\"\\u0001\\u001f\\u007f\",\"uni\":\"\\u00e9\\u4e2d\\ud83d\\ude00 \\u2028\"}",
        "{\"z\":1,\"a\":2,\"m\":3,\"b\":{\"y\":1,\"x\":2}}",
        "{\"nul\":\"a\\u0000b\"}",
    };
    json_error_t e;

    (void)state;
    for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
        json_t *v = json_loads(docs[i], JSON_ALLOW_NUL, &e);

        assert_non_null(v);
        same(v);
        json_decref(v);
    }
    /* bare values (JSON_ENCODE_ANY) */
    json_t *any[] = {
        json_string("x\"y"), json_integer(-3),        json_real(2.0),          json_true(),
        json_null(),         json_integer(INT64_MIN), json_integer(INT64_MAX), json_integer(0),
        json_integer(-10),   json_integer(1000000)};
    for (size_t i = 0; i < sizeof(any) / sizeof(any[0]); i++) {
        same(any[i]);
        json_decref(any[i]);
    }
}

/* Many doubles, from every part of the range: the shortest text is the same both ways. */
static void test_reals(void **state)
{
    uint64_t x = 0x9E3779B97F4A7C15u;
    json_t *a = json_array();

    (void)state;
    for (int i = 0; i < 20000; i++) {
        double d;

        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        memcpy(&d, &x, sizeof(d));
        if (d != d || d - d != 0) /* NaN and infinities cannot be JSON reals */
            continue;
        json_array_append_new(a, json_real(d));
        json_array_append_new(a, json_real((double)(x % 100000) / 1000.0));
    }
    same(a);
    json_decref(a);
}

/* A string that is not UTF-8 fails both ways (a 500, as before). */
static void test_invalid_utf8(void **state)
{
    json_t *v = json_pack("{s:o}", "k", json_stringn_nocheck("\xff\xfe", 2));

    (void)state;
    assert_non_null(v);
    assert_null(json_dumps(v, JSON_COMPACT));
    assert_null(mg_json_text(v, NULL));
    json_decref(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shapes),
        cmocka_unit_test(test_reals),
        cmocka_unit_test(test_invalid_utf8),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
