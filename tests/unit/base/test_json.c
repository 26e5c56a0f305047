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
/* Strings with a byte to escape, or a UTF-8 sequence, at every offset of every length up to
 * 40, so each lands in every position of the 8-byte words the writer tests at once, and
 * after them: the same text as jansson's, through a value and through mg_jw_str. */
static void test_strings_every_offset(void **state)
{
    static const char *const odd[] = {"\"",
                                      "\\",
                                      "\n",
                                      "\t",
                                      "\x01",
                                      "\x1f",
                                      "\x7f",
                                      " ",
                                      "\xc3\xa9",
                                      "\xe2\x82\xac",
                                      "\xf0\x9f\x98\x80",
                                      "/"};
    char buf[64];

    (void)state;
    for (size_t k = 0; k < sizeof(odd) / sizeof(odd[0]); k++) {
        size_t w = strlen(odd[k]);

        for (size_t len = 0; len <= 40; len++) {
            for (size_t at = 0; at <= len; at++) {
                struct mg_jw jw = {0};
                json_t *v;
                char *want, *got;

                memset(buf, 'a', len);
                memcpy(buf + at, odd[k], w);
                memset(buf + at + w, 'b', len - at);
                v = json_stringn(buf, len + w);
                assert_non_null(v);
                same(v);
                want = old_text(v);
                mg_jw_str(&jw, buf, len + w);
                got = mg_jw_done(&jw, NULL);
                assert_non_null(got);
                assert_string_equal(got, want);
                free(got);
                free(want);
                json_decref(v);
            }
        }
    }
}

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

/* mg_jw_raw of a stored document (json_dumps, sorted keys, 17 digits) gives what
 * mg_json_text gives for the parsed document: the Version's stored members are copied so. */
static void test_writer_raw(void **state)
{
    static const char *const docs[] = {
        "{}",
        "[]",
        "{\"a\":1,\"b\":[true,false,null],\"c\":{\"d\":\"e\"},\"z\":-9223372036854775807}",
        "{\"auc\":0.942,\"lr\":0.001,\"n\":7000000000,\"p95\":41.5,\"x\":3.0,\"y\":-0.0}",
        "[0.1,0.30000000000000004,1e22,1e-7,-2.5e-7,5e-324,1.7976931348623157e308,100.0]",
        ("{\"s\":\"quote \\\" backslash \\\\ 0.5 -1e3 \\\"9.5\\\" tab "
         "\\t\",\"t\":\"\\\\\",\"u\":2.50}"),
        "{\"ctl\":\"\\u0001\\u001f\",\"uni\":\"\\u00e9\\u4e2d\\ud83d\\ude00\",\"e\":1E+2}",
        "\"only 0.1 a string\"",
        "-0.25",
    };
    json_error_t e;

    (void)state;
    for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
        json_t *v = json_loads(docs[i], JSON_DECODE_ANY, &e);
        char *stored, *want, *got;
        struct mg_jw w = {0};
        size_t len = 0;

        assert_non_null(v);
        stored = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
        assert_non_null(stored);
        json_decref(v);
        v = json_loads(stored, JSON_DECODE_ANY, &e); /* the stored order is the parsed order */
        want = mg_json_text(v, NULL);
        mg_jw_raw(&w, stored, strlen(stored));
        got = mg_jw_done(&w, &len);
        assert_non_null(got);
        assert_string_equal(got, want);
        assert_int_equal(len, strlen(want));
        free(stored);
        free(want);
        free(got);
        json_decref(v);
    }
}

/* Members and elements written one by one: commas, nesting, strings, numbers, null; a
 * reopened object; what mg_json_text gives for the same value. */
static void test_writer_members(void **state)
{
    json_t *e = json_pack("{s:f, s:[i, s]}", "gib", 1.5, "parts", 2, "x");
    json_t *want_v = json_pack("{s:s, s:I, s:{s:n, s:[]}, s:[f, s, {s:s}], s:O, s:o}", "a\"b",
                               "c\nd", "n", (json_int_t)-42, "o", "z", "e", "arr", 0.1, "s", "k",
                               "v", "doc", e, "nul", json_null());
    struct mg_jw w = {0}, re = {0};
    char *want = mg_json_text(want_v, NULL), *got, *again;
    size_t len;

    (void)state;
    mg_jw_obj(&w);
    mg_jw_key(&w, "a\"b");
    mg_jw_str(&w, "c\nd", 3);
    mg_jw_key(&w, "n");
    mg_jw_int(&w, -42);
    mg_jw_key(&w, "o");
    mg_jw_obj(&w);
    mg_jw_key(&w, "z");
    mg_jw_null(&w);
    mg_jw_key(&w, "e");
    mg_jw_arr(&w);
    mg_jw_arr_end(&w);
    mg_jw_obj_end(&w);
    mg_jw_key(&w, "arr");
    mg_jw_arr(&w);
    mg_jw_real(&w, 0.1);
    mg_jw_str(&w, "s", 1);
    mg_jw_obj(&w);
    mg_jw_key(&w, "k");
    mg_jw_str(&w, "v", 1);
    mg_jw_obj_end(&w);
    mg_jw_arr_end(&w);
    mg_jw_key(&w, "doc");
    mg_jw_value(&w, e);
    mg_jw_key(&w, "nul");
    mg_jw_str(&w, NULL, 0);
    mg_jw_obj_end(&w);
    got = mg_jw_done(&w, &len);
    assert_non_null(got);
    assert_string_equal(got, want);
    assert_int_equal(len, strlen(want));

    /* Reopened: members go before the closing brace, after a comma; none for "{}". */
    mg_jw_reopen(&re, got, len);
    mg_jw_key(&re, "more");
    mg_jw_int(&re, 1);
    mg_jw_obj_end(&re);
    again = mg_jw_done(&re, NULL);
    json_object_set_new(want_v, "more", json_integer(1));
    free(want);
    want = mg_json_text(want_v, NULL);
    assert_string_equal(again, want);
    free(again);
    mg_jw_reopen(&re, "{}", 2);
    mg_jw_key(&re, "k");
    mg_jw_int(&re, 2);
    mg_jw_obj_end(&re);
    again = mg_jw_done(&re, NULL);
    assert_string_equal(again, "{\"k\":2}");
    free(again);
    free(got);
    free(want);
    json_decref(want_v);
    json_decref(e);
}

/* Failures end in NULL: invalid UTF-8, nesting past 63, reopening what is not an object. */
static void test_writer_failures(void **state)
{
    struct mg_jw w = {0};
    int i;

    (void)state;
    mg_jw_arr(&w);
    mg_jw_str(&w, "\xff\xfe", 2);
    mg_jw_arr_end(&w);
    assert_null(mg_jw_done(&w, NULL));
    for (i = 0; i < 64; i++)
        mg_jw_arr(&w);
    assert_null(mg_jw_done(&w, NULL));
    mg_jw_reopen(&w, "[1]", 3);
    assert_null(mg_jw_done(&w, NULL));
    mg_jw_int(&w, 1);
    mg_jw_free(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shapes),          cmocka_unit_test(test_strings_every_offset),
        cmocka_unit_test(test_reals),           cmocka_unit_test(test_invalid_utf8),
        cmocka_unit_test(test_writer_raw),      cmocka_unit_test(test_writer_members),
        cmocka_unit_test(test_writer_failures),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
