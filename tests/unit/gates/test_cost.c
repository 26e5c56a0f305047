/*
 * test_cost.c - gates/cost.c and the serving-cost thresholds of gates/policy.c (docs/contract.md
 * "Quotas and cost"): throughput from a test's own figure or its timed requests, cost per
 * thousand requests = cost ÷ (3.6 × rps), and thresholds on throughput_rps and
 * cost_per_1k_requests, absolute or relative to the baseline, with a clear pending/failed
 * detail when nothing was measured or no cost is configured.
 *
 * Pure, so every test is a table; each row's mismatch is reported before failing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "gates/cost.h"
#include "gates/policy.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

static bool near(double a, double b)
{
    return fabs(a - b) <= 1e-9 * fmax(1.0, fabs(b));
}

static void test_throughput(void **state)
{
    static const struct {
        const char *what;
        double reported;
        size_t samples;
        double wall_s;
        bool ok;
        double rps;
    } rows[] = {
        {"the test's own figure wins", 250, 10, 2, true, 250},
        {"else timed requests over wall time", NAN, 100, 4, true, 25},
        {"a negative figure is none", -1, 30, 3, true, 10},
        {"zero is none", 0, 30, 3, true, 10},
        {"nothing timed", NAN, 0, 3, false, 0},
        {"no wall time", NAN, 10, 0, false, 0},
        {"infinite figure is none", INFINITY, 0, 1, false, 0},
    };
    size_t i, bad = 0;

    (void)state;
    for (i = 0; i < N_ELEMS(rows); i++) {
        double rps = -1;
        bool ok = gate_throughput(rows[i].reported, rows[i].samples, rows[i].wall_s, &rps);

        if (ok != rows[i].ok || !near(rps, rows[i].rps)) {
            print_error("%s: got %d %g, want %d %g\n", rows[i].what, ok, rps, rows[i].ok,
                        rows[i].rps);
            bad++;
        }
    }
    assert_int_equal(bad, 0);
}

static void test_cost_per_1k(void **state)
{
    static const struct {
        double cost, rps;
        bool ok;
        double want;
    } rows[] = {
        {3.6, 1, true, 1.0},                           /* 3600 requests for 3.6: 1 per thousand */
        {2.0, 100, true, 2.0 / 360}, {0, 50, true, 0}, /* a free machine */
        {4.0, 0, false, 0},                            /* no throughput */
        {-1, 10, false, 0},                            /* no cost */
        {NAN, 10, false, 0},
    };
    size_t i, bad = 0;

    (void)state;
    for (i = 0; i < N_ELEMS(rows); i++) {
        double got = -1;
        bool ok = gate_cost_per_1k(rows[i].cost, rows[i].rps, &got);

        if (ok != rows[i].ok || !near(got, rows[i].want)) {
            print_error("row %zu: got %d %g, want %d %g\n", i, ok, got, rows[i].ok, rows[i].want);
            bad++;
        }
    }
    assert_int_equal(bad, 0);
}

#define PASSED(rps, cost)                                                                          \
    {                                                                                              \
        GATE_SMOKE_PASSED, true, true, rps, cost, "gpu-a10"                                        \
    }

static const struct gate_serving s_base = PASSED(100, 1.0);
static const struct gate_serving s_double = PASSED(50, 2.0);   /* twice as costly */
static const struct gate_serving s_cheaper = PASSED(125, 0.8); /* cheaper */
static const struct gate_serving s_edge = PASSED(91, 1.1);     /* exactly 10 % more */
static const struct gate_serving s_no_cost = {GATE_SMOKE_PASSED, true, false, 80, 0, "cpu"};
static const struct gate_serving s_no_rps = {GATE_SMOKE_PASSED, false, false, 0, 0, "cpu"};
static const struct gate_serving s_queued = {GATE_SMOKE_QUEUED, false, false, 0, 0, NULL};
static const struct gate_serving s_running = {GATE_SMOKE_RUNNING, false, false, 0, 0, NULL};
static const struct gate_serving s_failed = {GATE_SMOKE_FAILED, false, false, 0, 0, NULL};

static const char *const cost_10pct =
    "{\"thresholds\":[{\"metric\":\"cost_per_1k_requests\",\"op\":\"<=\",\"baseline\":true,"
    "\"max_regression_pct\":10}]";
static const char *const rps_abs =
    "{\"thresholds\":[{\"metric\":\"throughput_rps\",\"op\":\">=\",\"value\":60}]";
static const char *const cost_abs =
    "{\"thresholds\":[{\"metric\":\"cost_per_1k_requests\",\"op\":\"<=\",\"value\":1.5}]";
static const char *const rps_rel =
    "{\"thresholds\":[{\"metric\":\"throughput_rps\",\"op\":\">=\",\"baseline\":true,"
    "\"max_regression_pct\":20}]";

static void test_serving_thresholds(void **state)
{
    static const struct {
        const char *what;
        const char *policy; /* without the closing brace */
        const char *more;   /* more policy members, "" or ",\"smoke\":{...}" */
        const struct gate_serving *cand, *base;
        const char *status; /* of the threshold gate */
        const char *detail; /* a part of its detail, or NULL */
    } rows[] = {
        {"twice as costly fails a 10 % relative gate", cost_10pct, "", &s_double, &s_base, "failed",
         "baseline v3"},
        {"a cheaper one passes", cost_10pct, "", &s_cheaper, &s_base, "passed", NULL},
        {"exactly 10 % more passes", cost_10pct, "", &s_edge, &s_base, "passed", NULL},
        {"no baseline measurement: passes", cost_10pct, "", &s_double, NULL, "passed",
         "no baseline"},
        {"a baseline without a cost: no baseline", cost_10pct, "", &s_double, &s_no_cost, "passed",
         "no baseline"},
        {"no cost configured for the profile", cost_10pct, "", &s_no_cost, &s_base, "failed",
         "--smoke-profile-cost cpu=COST_PER_HOUR"},
        {"no throughput measured", cost_10pct, "", &s_no_rps, &s_base, "failed",
         "measured no throughput"},
        {"no throughput: throughput gate too", rps_abs, "", &s_no_rps, NULL, "failed",
         "measured no throughput"},
        {"queued: pending", cost_10pct, "", &s_queued, &s_base, "pending",
         "waiting for a passed smoke test to measure cost_per_1k_requests"},
        {"running: pending", rps_abs, "", &s_running, NULL, "pending", "waiting"},
        {"none yet, smoke required: pending", cost_abs, ",\"smoke\":{\"required\":true}", NULL,
         NULL, "pending", "waiting"},
        {"none and none coming: failed", cost_abs, "", NULL, NULL, "failed", "set smoke.required"},
        {"the latest failed: failed", cost_abs, "", &s_failed, NULL, "failed", "failed"},
        {"absolute cost under the bound", cost_abs, "", &s_base, NULL, "passed", NULL},
        {"absolute cost over the bound", cost_abs, "", &s_double, NULL, "failed", NULL},
        {"absolute throughput under the floor", rps_abs, "", &s_double, NULL, "failed", NULL},
        {"absolute throughput over the floor", rps_abs, "", &s_base, NULL, "passed", NULL},
        {"throughput no more than 20 % lower", rps_rel, "", &s_cheaper, &s_base, "passed", NULL},
        {"throughput halved", rps_rel, "", &s_double, &s_base, "failed", NULL},
        {"no cost needed for a throughput gate", rps_abs, "", &s_no_cost, NULL, "passed", NULL},
    };
    size_t i, bad = 0;

    (void)state;
    for (i = 0; i < N_ELEMS(rows); i++) {
        char text[512];
        json_t *j, *r, *g;
        struct gate_policy p;
        struct gate_input in;
        struct mg_error err;
        const char *status, *detail;

        snprintf(text, sizeof(text), "%s%s}", rows[i].policy, rows[i].more);
        j = json_loads(text, 0, NULL);
        assert_non_null(j);
        assert_int_equal(gate_policy_parse(j, &p, &err), MG_OK);
        json_decref(j);
        memset(&in, 0, sizeof(in));
        in.policy = &p;
        in.candidate_metrics = json_object();
        in.candidate_serving = rows[i].cand;
        in.baseline_serving = rows[i].base;
        in.baseline_version = rows[i].base ? 3 : 0;
        in.baseline_metrics = rows[i].base ? in.candidate_metrics : NULL;
        in.smoke = GATE_SMOKE_PASSED;
        r = gate_evaluate(&in, true);
        assert_non_null(r);
        g = json_array_get(json_object_get(r, "gates"), 0);
        status = json_string_value(json_object_get(g, "status"));
        detail = json_string_value(json_object_get(g, "detail"));
        if (status == NULL || strcmp(status, rows[i].status) != 0 ||
            (rows[i].detail && (detail == NULL || strstr(detail, rows[i].detail) == NULL))) {
            print_error("%s: status %s detail '%s', want %s '%s'\n", rows[i].what,
                        status ? status : "(none)", detail ? detail : "", rows[i].status,
                        rows[i].detail ? rows[i].detail : "");
            bad++;
        }
        json_decref((json_t *)in.candidate_metrics);
        json_decref(r);
    }
    assert_int_equal(bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_throughput),
        cmocka_unit_test(test_cost_per_1k),
        cmocka_unit_test(test_serving_thresholds),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
