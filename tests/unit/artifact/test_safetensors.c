/*
 * test_safetensors.c - artifact/safetensors.c: the header reader, on files written by the
 * tests' own writer (weights_writer.h). Debian 12 packages no python3-safetensors, so the
 * writer here is the only producer; counts and dtypes are checked against what it wrote.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "artifact/introspect.h"
#include "weights_writer.h"

static json_t *read_ok(const struct wbuf *b, const char *format)
{
    struct mg_error err = {0};
    json_t *out = NULL;

    assert_int_equal(art_introspect_buffer(b->p, b->n, format, NULL, &out, &err), MG_OK);
    assert_non_null(out);
    return out;
}

static void read_bad(const struct wbuf *b, const struct art_introspect_limits *lim,
                     const char *want)
{
    struct mg_error err = {0};
    json_t *out = NULL;

    assert_int_equal(art_introspect_buffer(b->p, b->n, "safetensors", lim, &out, &err), MG_EINVAL);
    assert_null(out);
    if (strstr(err.message, want) == NULL || strstr(err.message, "byte offset") == NULL)
        fail_msg("message '%s' lacks '%s' or the offset", err.message, want);
}

static void test_counts_and_dtypes(void **state)
{
    static const struct st_tensor t[] = {
        {"model.embed.weight", "F16", 2, 2, {4, 8}},
        {"model.norm.weight", "BF16", 2, 1, {3}},
        {"lm_head.weight", "F32", 4, 3, {2, 2, 2}},
        {"positions", "I64", 8, 1, {5}},
        {"scale", "F32", 4, 0, {0}},
    };
    struct wbuf b = {0};
    json_t *o, *d;

    (void)state;
    st_write(&b, t, 5, "{\"format\":\"pt\",\"source\":\"unit test\"}");
    o = read_ok(&b, "safetensors");
    assert_string_equal(json_string_value(json_object_get(o, "format")), "safetensors");
    assert_int_equal(json_integer_value(json_object_get(o, "tensors")), 5);
    assert_int_equal(json_integer_value(json_object_get(o, "parameters")), 32 + 3 + 8 + 5 + 1);
    assert_int_equal(json_integer_value(json_object_get(o, "weights_bytes")),
                     32 * 2 + 3 * 2 + 8 * 4 + 5 * 8 + 4);
    d = json_object_get(o, "dtypes");
    assert_int_equal(json_object_size(d), 4);
    assert_int_equal(json_integer_value(json_object_get(d, "F16")), 32);
    assert_int_equal(json_integer_value(json_object_get(d, "BF16")), 3);
    assert_int_equal(json_integer_value(json_object_get(d, "F32")), 9);
    assert_int_equal(json_integer_value(json_object_get(d, "I64")), 5);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(o, "metadata"), "format")), "pt");
    assert_true(json_is_true(json_object_get(o, "data_complete")));
    json_decref(o);
    /* The same bytes are recognised without being told the format. */
    o = read_ok(&b, NULL);
    assert_string_equal(json_string_value(json_object_get(o, "format")), "safetensors");
    json_decref(o);
    wb_free(&b);
}

static void test_empty_header(void **state)
{
    struct wbuf b = {0};
    json_t *o;

    (void)state;
    st_write(&b, NULL, 0, NULL);
    o = read_ok(&b, "safetensors");
    assert_int_equal(json_integer_value(json_object_get(o, "tensors")), 0);
    assert_int_equal(json_integer_value(json_object_get(o, "parameters")), 0);
    json_decref(o);
    wb_free(&b);
}

/* A file from a raw header text and n data bytes. */
static void raw(struct wbuf *b, const char *header, size_t data)
{
    wb_le(b, strlen(header), 8);
    wb_put(b, header, strlen(header));
    wb_zeros(b, data);
}

static void test_malformed(void **state)
{
    static const struct {
        const char *header;
        size_t data;
        const char *want;
    } cases[] = {
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, "span 4 bytes"},
        {"{\"a\":{\"dtype\":\"F99\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "unknown dtype"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, "shape"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", 4, "begin <= end"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
         12, "without gaps"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
         8, "without gaps"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 9, "holds 9 bytes"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 2, "holds 2 bytes"},
        {"{\"a\":{\"dtype\":\"F32\"}}", 0, "needs"},
        {"{\"a\":1,\"a\":2}", 0, "does not parse"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}", 4, "does not parse"},
        {"[1,2]", 0, "start with"},
        {"{\"\xc3\x28\":{}}", 0, "does not parse"}, /* bad UTF-8 in a tensor name */
        {"{\"__metadata__\":{\"k\":1}}", 0, "__metadata__"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],"
         "\"data_offsets\":[0,4]}}",
         4, "overflows"},
    };
    struct wbuf b = {0};
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        raw(&b, cases[i].header, cases[i].data);
        read_bad(&b, NULL, cases[i].want);
        wb_free(&b);
    }
}

static void test_truncations_and_lengths(void **state)
{
    static const struct st_tensor t[] = {{"w", "F16", 2, 2, {16, 16}}};
    struct art_introspect_limits lim;
    struct wbuf b = {0}, cut;
    size_t n;

    (void)state;
    st_write(&b, t, 1, NULL);
    /* Every proper prefix is refused, never read past. */
    for (n = 0; n < b.n; n++) {
        struct mg_error err = {0};
        json_t *out = NULL;
        cut.p = b.p;
        cut.n = n;
        assert_int_equal(art_introspect_buffer(cut.p, cut.n, "safetensors", NULL, &out, &err),
                         MG_EINVAL);
        assert_null(out);
    }
    wb_free(&b);
    /* A huge header length is refused from the 8 bytes alone, naming the cap. */
    wb_le(&b, UINT64_MAX - 7, 8);
    wb_put(&b, "{}", 2);
    read_bad(&b, NULL, "over the cap");
    wb_free(&b);
    art_introspect_limits_default(&lim);
    lim.max_safetensors_header = 16;
    raw(&b, "{\"__metadata__\":{\"a\":\"b\"}}", 0);
    read_bad(&b, &lim, "cap of 16 bytes");
    wb_free(&b);
    lim.max_safetensors_header = 1 << 20;
    lim.max_json_values = 3;
    raw(&b, "{\"__metadata__\":{\"a\":\"b\",\"c\":\"d\",\"e\":\"f\"}}", 0);
    read_bad(&b, &lim, "JSON values");
    wb_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_counts_and_dtypes),
        cmocka_unit_test(test_empty_header),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_truncations_and_lengths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
