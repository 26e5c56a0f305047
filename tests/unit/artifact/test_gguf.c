/*
 * test_gguf.c - artifact/gguf.c: GGUF v2/v3 metadata and tensor infos, on files written to
 * the published layout by weights_writer.h. Parameter counts are checked against the
 * architecture's own formula; dtypes and bytes against what the writer put in.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "artifact/introspect.h"
#include "weights_writer.h"

static const struct gg_llama llama7b = {32000, 4096, 11008, 32, 32, 32, 4096};

static json_t *read_ok(const struct wbuf *b)
{
    struct mg_error err = {0};
    json_t *out = NULL;

    if (art_introspect_buffer(b->p, b->n, "gguf", NULL, &out, &err) != MG_OK)
        fail_msg("refused: %s", err.message);
    return out;
}

static void read_bad(const struct wbuf *b, const char *want)
{
    struct mg_error err = {0};
    json_t *out = NULL;

    assert_int_equal(art_introspect_buffer(b->p, b->n, "gguf", NULL, &out, &err), MG_EINVAL);
    assert_null(out);
    if (strstr(err.message, want) == NULL || strstr(err.message, "byte offset") == NULL)
        fail_msg("message '%s' lacks '%s' or the offset", err.message, want);
}

static void test_llama7b_header(void **state)
{
    struct wbuf b = {0};
    uint64_t data, params = gg_llama_params(&llama7b), norms;
    json_t *o, *meta, *d;
    uint32_t version;

    (void)state;
    assert_int_equal(params, 6738415616ULL); /* LLaMA-7B as published */
    norms = llama7b.embd * (2 * llama7b.layers + 1);
    for (version = 2; version <= 3; version++) {
        gg_llama_write(&b, version, &llama7b, 0, &data);
        assert_true(b.n < 1 << 20); /* metadata only */
        o = read_ok(&b);
        assert_string_equal(json_string_value(json_object_get(o, "format")), "gguf");
        assert_int_equal(json_integer_value(json_object_get(o, "tensors")), 3 + 32 * 9);
        assert_int_equal(json_integer_value(json_object_get(o, "parameters")), params);
        d = json_object_get(o, "dtypes");
        assert_int_equal(json_integer_value(json_object_get(d, "F32")), norms);
        assert_int_equal(json_integer_value(json_object_get(d, "F16")), params - norms);
        assert_int_equal(json_integer_value(json_object_get(o, "weights_bytes")),
                         (params - norms) * 2 + norms * 4);
        assert_false(json_is_true(json_object_get(o, "data_complete")));
        meta = json_object_get(o, "metadata");
        assert_string_equal(json_string_value(json_object_get(meta, "general.architecture")),
                            "llama");
        assert_int_equal(json_integer_value(json_object_get(meta, "llama.context_length")), 4096);
        assert_int_equal(json_integer_value(json_object_get(meta, "llama.block_count")), 32);
        assert_int_equal(json_integer_value(json_object_get(meta, "llama.attention.head_count_kv")),
                         32);
        assert_int_equal(json_integer_value(json_object_get(meta, "llama.embedding_length")), 4096);
        assert_int_equal(json_integer_value(json_object_get(meta, "gguf.version")), version);
        /* Arrays and keys outside the list are not kept. */
        assert_null(json_object_get(meta, "tokenizer.ggml.tokens"));
        assert_null(json_object_get(meta, "llama.attention.layer_norm_rms_epsilon"));
        json_decref(o);
        wb_free(&b);
    }
}

static void test_small_model_with_data(void **state)
{
    static const struct gg_llama tiny = {64, 32, 48, 2, 4, 2, 128};
    struct wbuf b = {0};
    uint64_t data;
    json_t *o;

    (void)state;
    gg_llama_write(&b, 3, &tiny, 1, &data);
    o = read_ok(&b);
    assert_int_equal(json_integer_value(json_object_get(o, "parameters")), gg_llama_params(&tiny));
    assert_true(json_is_true(json_object_get(o, "data_complete")));
    json_decref(o);
    /* Sniffed as GGUF from its magic. */
    {
        struct mg_error err = {0};
        assert_int_equal(art_introspect_buffer(b.p, b.n, NULL, NULL, &o, &err), MG_OK);
        assert_string_equal(json_string_value(json_object_get(o, "format")), "gguf");
        json_decref(o);
    }
    wb_free(&b);
}

static void test_quantized_types(void **state)
{
    struct wbuf b = {0};
    uint64_t ne[2] = {256, 4};
    json_t *o, *d;

    (void)state;
    gg_header(&b, 3, 3, 1);
    gg_kv_str(&b, "general.architecture", "llama");
    gg_tensor(&b, "q4", 2, ne, 2, 0);     /* Q4_0: 32 per 18 bytes → 32 blocks, 576 bytes */
    gg_tensor(&b, "q4k", 2, ne, 12, 576); /* Q4_K: 256 per 144 bytes → 4 blocks, 576 */
    gg_tensor(&b, "q8", 2, ne, 8, 1152);  /* Q8_0: 32 per 34 → 1088 */
    gg_align(&b, 32);
    o = read_ok(&b);
    d = json_object_get(o, "dtypes");
    assert_int_equal(json_integer_value(json_object_get(d, "Q4_0")), 1024);
    assert_int_equal(json_integer_value(json_object_get(d, "Q4_K")), 1024);
    assert_int_equal(json_integer_value(json_object_get(d, "Q8_0")), 1024);
    assert_int_equal(json_integer_value(json_object_get(o, "weights_bytes")), 576 + 576 + 1088);
    json_decref(o);
    wb_free(&b);
}

static void test_malformed(void **state)
{
    struct wbuf b = {0};
    uint64_t ne[2] = {30, 1};

    (void)state;
    wb_put(&b, "GGUF", 4);
    wb_le(&b, 1, 4);
    wb_le(&b, 0, 8);
    wb_le(&b, 0, 8);
    read_bad(&b, "only little-endian GGUF v2 and v3");
    wb_free(&b);
    wb_put(&b, "GGUF", 4);
    wb_le(&b, 0x03000000, 4); /* version 3 written big-endian */
    read_bad(&b, "big-endian");
    wb_free(&b);
    /* Huge counts are refused from the header, before anything is read or allocated. */
    gg_header(&b, 3, UINT64_MAX, 1);
    read_bad(&b, "more than the file holds");
    wb_free(&b);
    gg_header(&b, 3, 0, 1ULL << 60);
    read_bad(&b, "more than the file holds");
    wb_free(&b);
    /* A string length past the end of the file. */
    gg_header(&b, 3, 0, 1);
    wb_le(&b, 1ULL << 62, 8);
    wb_zeros(&b, 16);
    read_bad(&b, "claims");
    wb_free(&b);
    /* An array claiming more elements than bytes left. */
    gg_header(&b, 3, 0, 1);
    gg_str(&b, "tokenizer.ggml.tokens");
    wb_le(&b, G_ARRAY, 4);
    wb_le(&b, G_STRING, 4);
    wb_le(&b, 1ULL << 40, 8);
    wb_zeros(&b, 64);
    read_bad(&b, "elements");
    wb_free(&b);
    /* Bad UTF-8 in a key. */
    gg_header(&b, 3, 0, 1);
    gg_kv_str(&b, "general.\xff\xfe", "x");
    read_bad(&b, "UTF-8");
    wb_free(&b);
    /* Unknown value type, unknown tensor type, too many dimensions, misaligned offset,
     * a row not a whole number of blocks. */
    gg_header(&b, 3, 0, 1);
    gg_str(&b, "general.x");
    wb_le(&b, 99, 4);
    read_bad(&b, "unknown value type");
    wb_free(&b);
    gg_header(&b, 3, 1, 0);
    gg_tensor(&b, "t", 1, ne, 4, 0); /* Q4_2: removed from ggml */
    read_bad(&b, "unknown ggml type");
    wb_free(&b);
    gg_header(&b, 3, 1, 0);
    gg_str(&b, "t");
    wb_le(&b, 5, 4);
    wb_zeros(&b, 64);
    read_bad(&b, "dimensions");
    wb_free(&b);
    gg_header(&b, 3, 1, 0);
    gg_tensor(&b, "t", 1, ne, 0, 3);
    read_bad(&b, "alignment");
    wb_free(&b);
    gg_header(&b, 3, 1, 0);
    gg_tensor(&b, "t", 1, ne, 2, 0); /* 30 elements of Q4_0 (blocks of 32) */
    read_bad(&b, "block");
    wb_free(&b);
    gg_header(&b, 3, 0, 1);
    gg_kv_u64(&b, "general.alignment", 32); /* must be a u32 */
    read_bad(&b, "alignment");
    wb_free(&b);
}

static void test_truncations(void **state)
{
    static const struct gg_llama tiny = {64, 32, 48, 1, 4, 2, 128};
    struct wbuf b = {0};
    uint64_t data;
    size_t n;

    (void)state;
    gg_llama_write(&b, 3, &tiny, 0, &data);
    for (n = 0; n + 32 < b.n; n++) { /* the last bytes are alignment padding */
        struct mg_error err = {0};
        json_t *out = NULL;
        assert_int_equal(art_introspect_buffer(b.p, n, "gguf", NULL, &out, &err), MG_EINVAL);
        assert_null(out);
    }
    wb_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama7b_header),  cmocka_unit_test(test_small_model_with_data),
        cmocka_unit_test(test_quantized_types), cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_truncations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
