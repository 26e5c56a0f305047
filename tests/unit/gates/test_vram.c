/*
 * test_vram.c - gates/vram.c: bytes per parameter by precision and the
 * estimated inference memory, parameters x bytes x 1.3 / 2^30 GiB.
 * Pure arithmetic, so every test is a table.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "gates/vram.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

/* Relative comparison: the estimate is a double computed the same way. */
static bool close_to(double got, double want)
{
    if (want == 0.0)
        return got == 0.0;
    return fabs(got - want) <= 1e-12 * fabs(want);
}

static void test_precision_bytes_table(void **state)
{
    static const struct {
        const char *name;
        bool ok;
        double bytes;
    } cases[] = {
        {"fp32", true, 4.0},    {"fp16", true, 2.0}, {"bf16", true, 2.0}, {"int8", true, 1.0},
        {"int4", true, 0.5},    {"FP16", false, 0},  {"Fp32", false, 0},  {"fp8", false, 0},
        {"fp64", false, 0},     {"int2", false, 0},  {"", false, 0},      {"fp16 ", false, 0},
        {" fp16", false, 0},    {"fp1", false, 0},   {"fp160", false, 0}, {"float16", false, 0},
        {"bfloat16", false, 0}, {"int", false, 0},
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        double b = -1.0;
        bool ok = gate_precision_bytes(cases[i].name, &b);
        if (ok != cases[i].ok)
            fail_msg("gate_precision_bytes(\"%s\") returned %d", cases[i].name, ok);
        if (ok && b != cases[i].bytes)
            fail_msg("gate_precision_bytes(\"%s\") gave %g, want %g", cases[i].name, b,
                     cases[i].bytes);
        if (!ok && b != -1.0)
            fail_msg("gate_precision_bytes(\"%s\") wrote its out-parameter on failure",
                     cases[i].name);
    }
    {
        double b = -1.0;
        assert_false(gate_precision_bytes(NULL, &b));
        assert_true(b == -1.0);
    }
}

static void test_estimated_vram_table(void **state)
{
    static const struct {
        int64_t params;
        const char *precision;
        bool ok;
        double gib;
    } cases[] = {
        /* The worked example: 7e9 fp16 -> 7e9 * 2 * 1.3 / 2^30 (about 16.95 GiB). */
        {7000000000LL, "fp16", true, 7e9 * 2 * 1.3 / GIB},
        {7000000000LL, "bf16", true, 7e9 * 2 * 1.3 / GIB},
        {7000000000LL, "fp32", true, 7e9 * 4 * 1.3 / GIB},
        {7000000000LL, "int8", true, 7e9 * 1 * 1.3 / GIB},
        {7000000000LL, "int4", true, 7e9 * 0.5 * 1.3 / GIB},
        {70000000000LL, "fp16", true, 70e9 * 2 * 1.3 / GIB},
        {1LL << 30, "int8", true, 1.3}, /* 2^30 one-byte parameters: exactly 1.3 GiB */
        {1LL << 30, "fp32", true, 5.2},
        {1LL << 31, "int4", true, 1.3},
        {0, "fp16", true, 0.0},
        {1, "fp32", true, 4 * 1.3 / GIB},
        {INT64_MAX, "fp32", true, (double)INT64_MAX * 4 * 1.3 / GIB},
        {-1, "fp16", false, 0}, /* negative parameter counts */
        {-7000000000LL, "fp32", false, 0},
        {INT64_MIN, "int8", false, 0},
        {7000000000LL, "fp8", false, 0}, /* unknown precisions */
        {7000000000LL, "FP16", false, 0},
        {7000000000LL, "", false, 0},
        {0, "nope", false, 0},
        {-1, "nope", false, 0},
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        double g = -1.0;
        bool ok = gate_estimated_vram_gib(cases[i].params, cases[i].precision, &g);
        if (ok != cases[i].ok)
            fail_msg("gate_estimated_vram_gib(%lld, \"%s\") returned %d",
                     (long long)cases[i].params, cases[i].precision, ok);
        if (ok && !close_to(g, cases[i].gib))
            fail_msg("gate_estimated_vram_gib(%lld, \"%s\") = %.17g, want %.17g",
                     (long long)cases[i].params, cases[i].precision, g, cases[i].gib);
        if (!ok && g != -1.0)
            fail_msg("gate_estimated_vram_gib(%lld, \"%s\") wrote its out-parameter on failure",
                     (long long)cases[i].params, cases[i].precision);
    }
}

static void test_estimated_vram_worked_example(void **state)
{
    double g = 0;

    (void)state;
    assert_true(gate_estimated_vram_gib(7000000000LL, "fp16", &g));
    assert_true(close_to(g, 7e9 * 2 * 1.3 / GIB));
    assert_true(g > 16.94 && g < 16.96);
    /* The 1.3 overhead is included: weights alone would be about 13.04 GiB. */
    assert_true(g > 7e9 * 2 / GIB * 1.29);
}

static void test_estimated_vram_null_precision(void **state)
{
    double g = -1.0;

    (void)state;
    assert_false(gate_estimated_vram_gib(7000000000LL, NULL, &g));
    assert_true(g == -1.0);
}

static void test_estimated_vram_scales_linearly(void **state)
{
    static const char *const precisions[] = {"fp32", "fp16", "bf16", "int8", "int4"};
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(precisions) / sizeof(precisions[0]); i++) {
        double one, two;
        assert_true(gate_estimated_vram_gib(1000000000LL, precisions[i], &one));
        assert_true(gate_estimated_vram_gib(2000000000LL, precisions[i], &two));
        assert_true(close_to(two, 2 * one));
    }
}

static json_t *j(const char *s)
{
    json_t *v = s ? json_loads(s, 0, NULL) : NULL;

    if (s && v == NULL)
        fail_msg("bad test JSON %s", s);
    return v;
}

/* gate_vram_estimate(): which source wins and what each formula gives. */
static void test_estimate_table(void **state)
{
#define LLAMA_META                                                                                 \
    "\"metadata\":{\"general.architecture\":\"llama\",\"llama.block_count\":32,"                   \
    "\"llama.context_length\":4096,\"llama.embedding_length\":4096,"                               \
    "\"llama.attention.head_count\":32"
    static const struct {
        const char *what, *resources, *intro, *source;
        double bytes; /* expected total before /2^30; < 0: no estimate */
        int64_t kv;
    } cases[] = {
        {"resources win", "{\"parameters\":7000000000,\"precision\":\"fp16\"}",
         "{\"weights_bytes\":1000}", "resources", 7e9 * 2 * 1.3, 0},
        {"weights only", NULL, "{\"weights_bytes\":1000000}", "introspection", 1e6 * 1.2, 0},
        {"incomplete resources fall back", "{\"precision\":\"fp16\"}",
         "{\"weights_bytes\":1000000}", "introspection", 1e6 * 1.2, 0},
        {"kv heads default to heads", NULL, "{\"weights_bytes\":1000," LLAMA_META "}}",
         "introspection", 1000 * 1.2 + 2.0 * 32 * 32 * 128 * 4096 * 2,
         2LL * 32 * 32 * 128 * 4096 * 2},
        {"grouped-query attention", NULL,
         "{\"weights_bytes\":1000," LLAMA_META ",\"llama.attention.head_count_kv\":8}}",
         "introspection", 1000 * 1.2 + 2.0 * 32 * 8 * 128 * 4096 * 2,
         2LL * 32 * 8 * 128 * 4096 * 2},
        {"explicit key length", NULL,
         "{\"weights_bytes\":0," LLAMA_META ",\"llama.attention.key_length\":64}}", "introspection",
         2.0 * 32 * 32 * 64 * 4096 * 2, 2LL * 32 * 32 * 64 * 4096 * 2},
        {"missing context: weights only", NULL,
         "{\"weights_bytes\":10,\"metadata\":{\"general.architecture\":\"llama\","
         "\"llama.block_count\":32,\"llama.embedding_length\":4096,"
         "\"llama.attention.head_count\":32}}",
         "introspection", 12, 0},
        {"nothing", NULL, "{\"format\":\"onnx\"}", NULL, -1, 0},
        {"nothing at all", NULL, NULL, NULL, -1, 0},
    };
#undef LLAMA_META
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *r = j(cases[i].resources), *in = j(cases[i].intro);
        json_t *e = gate_vram_estimate(r, in), *v;
        double gib = -1;

        if (cases[i].bytes < 0) {
            assert_null(e);
        } else {
            assert_non_null(e);
            assert_string_equal(json_string_value(json_object_get(e, "source")), cases[i].source);
            if (!close_to(json_number_value(json_object_get(e, "gib")), cases[i].bytes / GIB))
                fail_msg("%s: %g GiB, want %g", cases[i].what,
                         json_number_value(json_object_get(e, "gib")), cases[i].bytes / GIB);
            assert_int_equal(json_integer_value(json_object_get(e, "kv_cache_bytes")), cases[i].kv);
            assert_non_null(json_string_value(json_object_get(e, "formula")));
            v = json_pack("{s:O*, s:O*}", "resources", r, "introspection", in);
            assert_true(gate_version_vram_gib(v, &gib));
            assert_true(close_to(gib, cases[i].bytes / GIB));
            json_decref(v);
        }
        json_decref(e);
        json_decref(r);
        json_decref(in);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_estimate_table),
        cmocka_unit_test(test_precision_bytes_table),
        cmocka_unit_test(test_estimated_vram_table),
        cmocka_unit_test(test_estimated_vram_worked_example),
        cmocka_unit_test(test_estimated_vram_null_precision),
        cmocka_unit_test(test_estimated_vram_scales_linearly),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
