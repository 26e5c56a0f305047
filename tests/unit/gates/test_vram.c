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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_precision_bytes_table),
        cmocka_unit_test(test_estimated_vram_table),
        cmocka_unit_test(test_estimated_vram_worked_example),
        cmocka_unit_test(test_estimated_vram_null_precision),
        cmocka_unit_test(test_estimated_vram_scales_linearly),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
