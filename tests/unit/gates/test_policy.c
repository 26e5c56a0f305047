/*
 * test_policy.c - gates/policy.c: parsing and validating a Policy
 * (docs/contract.md "Policies"), its canonical JSON, the gate evaluation that turns
 * a policy plus facts about a candidate into a GateReport, and the approval
 * rules (docs/design.md "Promotion and rollout" step 3).
 *
 * Everything here is pure, so every test is a table. Table tests check
 * every row and report each mismatch before failing, so one run shows
 * every broken case.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "gates/policy.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

/* The example policy of docs/contract.md "Policies", with gpu "required". */
static const char *const api_example =
    "{\"thresholds\": ["
    " {\"metric\": \"auc\", \"op\": \">=\", \"value\": 0.92},"
    " {\"metric\": \"p95_latency_ms\", \"op\": \"<=\", \"value\": 50},"
    " {\"metric\": \"auc\", \"op\": \">=\", \"baseline\": true, \"max_regression\": 0.005},"
    " {\"metric\": \"p95_latency_ms\", \"op\": \"<=\", \"baseline\": true,"
    "  \"max_regression_pct\": 10}],"
    " \"approvals\": {\"required\": 2},"
    " \"require_signature\": true,"
    " \"require_pinned_image\": true,"
    " \"require_registered_datasets\": false,"
    " \"smoke\": {\"required\": true, \"gpu\": \"required\"},"
    " \"rollout\": {\"steps\": [10, 50, 100], \"bake_seconds\": 300, \"auto_advance\": true}}";

#define IMG_PINNED                                                                                 \
    "registry.example/fraud@sha256:"                                                               \
    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define DS_DIGEST "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

static json_t *load(const char *text)
{
    json_error_t e;
    json_t *j = json_loads(text, JSON_DECODE_ANY, &e);

    if (j == NULL)
        fail_msg("test JSON does not parse (%s): %s", e.text, text);
    return j;
}

static bool policy_equal(const struct gate_policy *a, const struct gate_policy *b, char *why,
                         size_t whylen)
{
    size_t i;

#define DIFF(cond, ...)                                                                            \
    do {                                                                                           \
        if (cond) {                                                                                \
            snprintf(why, whylen, __VA_ARGS__);                                                    \
            return false;                                                                          \
        }                                                                                          \
    } while (0)
    DIFF(a->nthresholds != b->nthresholds, "nthresholds %zu != %zu", a->nthresholds,
         b->nthresholds);
    for (i = 0; i < a->nthresholds; i++) {
        const struct gate_threshold *x = &a->thresholds[i], *y = &b->thresholds[i];
        DIFF(strcmp(x->metric, y->metric) != 0, "thresholds[%zu].metric", i);
        DIFF(x->op != y->op, "thresholds[%zu].op", i);
        DIFF(x->baseline != y->baseline, "thresholds[%zu].baseline", i);
        DIFF(x->value != y->value, "thresholds[%zu].value %.17g != %.17g", i, x->value, y->value);
        DIFF(x->has_regression != y->has_regression, "thresholds[%zu].has_regression", i);
        DIFF(x->has_regression_pct != y->has_regression_pct, "thresholds[%zu].has_regression_pct",
             i);
        DIFF(x->max_regression != y->max_regression, "thresholds[%zu].max_regression", i);
        DIFF(x->max_regression_pct != y->max_regression_pct, "thresholds[%zu].max_regression_pct",
             i);
    }
    DIFF(a->approvals_required != b->approvals_required, "approvals_required %d != %d",
         a->approvals_required, b->approvals_required);
    DIFF(a->require_signature != b->require_signature, "require_signature");
    DIFF(a->require_pinned_image != b->require_pinned_image, "require_pinned_image");
    DIFF(a->require_registered_datasets != b->require_registered_datasets,
         "require_registered_datasets");
    DIFF(a->schema_compatible != b->schema_compatible, "schema_compatible");
    DIFF(a->smoke_required != b->smoke_required, "smoke_required");
    DIFF(a->gpu != b->gpu, "gpu %d != %d", (int)a->gpu, (int)b->gpu);
    DIFF(a->nsteps != b->nsteps, "nsteps %zu != %zu", a->nsteps, b->nsteps);
    for (i = 0; i < a->nsteps; i++)
        DIFF(a->steps[i] != b->steps[i], "steps[%zu] %d != %d", i, a->steps[i], b->steps[i]);
    DIFF(a->bake_seconds != b->bake_seconds, "bake_seconds");
    DIFF(a->auto_advance != b->auto_advance, "auto_advance");
    DIFF(a->shadow_seconds != b->shadow_seconds, "shadow_seconds");
    DIFF(a->has_internal != b->has_internal, "has_internal");
    DIFF(a->has_internal && (strcmp(a->internal_header, b->internal_header) != 0 ||
                             strcmp(a->internal_value, b->internal_value) != 0 ||
                             a->internal_seconds != b->internal_seconds),
         "internal");
#undef DIFF
    return true;
}

/* ---- gate_policy_empty / gate_policy_parse ----------------------------- */

static void test_policy_empty(void **state)
{
    struct gate_policy p, parsed;
    struct mg_error err;
    char why[128];
    json_t *j;

    (void)state;
    memset(&p, 0xA5, sizeof(p));
    gate_policy_empty(&p);
    assert_int_equal(p.nthresholds, 0);
    assert_int_equal(p.approvals_required, 0);
    assert_false(p.require_signature);
    assert_false(p.require_pinned_image);
    assert_false(p.require_registered_datasets);
    assert_false(p.smoke_required);
    assert_int_equal(p.gpu, GATE_GPU_NONE);
    assert_int_equal(p.nsteps, 1);
    assert_int_equal(p.steps[0], 100);
    assert_int_equal(p.bake_seconds, 0);
    assert_true(p.auto_advance);

    /* "{}" is the empty policy. */
    j = load("{}");
    memset(&err, 0, sizeof(err));
    assert_int_equal(gate_policy_parse(j, &parsed, &err), MG_OK);
    json_decref(j);
    if (!policy_equal(&p, &parsed, why, sizeof(why)))
        fail_msg("parse(\"{}\") differs from gate_policy_empty: %s", why);
}

static void test_policy_parse_api_example(void **state)
{
    struct gate_policy p;
    struct mg_error err;
    json_t *j = load(api_example);

    (void)state;
    memset(&err, 0, sizeof(err));
    assert_int_equal(gate_policy_parse(j, &p, &err), MG_OK);
    json_decref(j);

    assert_int_equal(p.nthresholds, 4);
    assert_string_equal(p.thresholds[0].metric, "auc");
    assert_int_equal(p.thresholds[0].op, GATE_OP_GE);
    assert_false(p.thresholds[0].baseline);
    assert_true(p.thresholds[0].value == 0.92);
    assert_string_equal(p.thresholds[1].metric, "p95_latency_ms");
    assert_int_equal(p.thresholds[1].op, GATE_OP_LE);
    assert_true(p.thresholds[1].value == 50);
    assert_true(p.thresholds[2].baseline);
    assert_true(p.thresholds[2].has_regression);
    assert_false(p.thresholds[2].has_regression_pct);
    assert_true(p.thresholds[2].max_regression == 0.005);
    assert_true(p.thresholds[3].baseline);
    assert_int_equal(p.thresholds[3].op, GATE_OP_LE);
    assert_false(p.thresholds[3].has_regression);
    assert_true(p.thresholds[3].has_regression_pct);
    assert_true(p.thresholds[3].max_regression_pct == 10);
    assert_int_equal(p.approvals_required, 2);
    assert_true(p.require_signature);
    assert_true(p.require_pinned_image);
    assert_false(p.require_registered_datasets);
    assert_true(p.smoke_required);
    assert_int_equal(p.gpu, GATE_GPU_REQUIRED);
    assert_int_equal(p.nsteps, 3);
    assert_int_equal(p.steps[0], 10);
    assert_int_equal(p.steps[1], 50);
    assert_int_equal(p.steps[2], 100);
    assert_int_equal(p.bake_seconds, 300);
    assert_true(p.auto_advance);
}

/* Policies that must parse; `check` names a field to look at afterwards. */
static void test_policy_parse_valid_table(void **state)
{
    static const struct {
        const char *json;
        int approvals; /* -1: don't check */
        int nsteps;    /* -1: don't check */
        enum gate_gpu gpu;
        int64_t bake; /* -1: don't check */
    } cases[] = {
        {"{}", 0, 1, GATE_GPU_NONE, 0},
        {"{\"thresholds\": []}", 0, 1, GATE_GPU_NONE, 0},
        {"{\"approvals\": {\"required\": 0}}", 0, 1, GATE_GPU_NONE, 0},
        {"{\"approvals\": {\"required\": 16}}", 16, 1, GATE_GPU_NONE, 0},
        {"{\"rollout\": {\"steps\": [100]}}", -1, 1, GATE_GPU_NONE, 0},
        {"{\"rollout\": {\"steps\": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 100]}}", -1,
         16, GATE_GPU_NONE, 0},
        {"{\"rollout\": {\"bake_seconds\": 0}}", -1, -1, GATE_GPU_NONE, 0},
        {"{\"rollout\": {\"bake_seconds\": 604800}}", -1, -1, GATE_GPU_NONE, 604800},
        {"{\"rollout\": {}}", -1, 1, GATE_GPU_NONE, 0},
        {"{\"smoke\": {\"gpu\": \"preferred\"}}", -1, -1, GATE_GPU_PREFERRED, -1},
        {"{\"smoke\": {\"gpu\": \"none\"}}", -1, -1, GATE_GPU_NONE, -1},
        {"{\"smoke\": {\"gpu\": \"required\"}}", -1, -1, GATE_GPU_REQUIRED, -1},
        {"{\"smoke\": {}}", -1, -1, GATE_GPU_NONE, -1},
        {"{\"thresholds\": [{\"metric\": \"auc\", \"op\": \">=\", \"baseline\": true}]}", -1, -1,
         GATE_GPU_NONE, -1},
        {"{\"thresholds\": [{\"metric\": \"auc\", \"op\": \">=\", \"baseline\": false, "
         "\"value\": 1}]}",
         -1, -1, GATE_GPU_NONE, -1},
        {"{\"thresholds\": [{\"metric\": \"auc\", \"op\": \"<=\", \"baseline\": true, "
         "\"max_regression_pct\": 100}]}",
         -1, -1, GATE_GPU_NONE, -1},
        {"{\"thresholds\": [{\"metric\": \"auc\", \"op\": \"<=\", \"baseline\": true, "
         "\"max_regression_pct\": 0}]}",
         -1, -1, GATE_GPU_NONE, -1},
        {"{\"thresholds\": [{\"metric\": \"auc\", \"op\": \">=\", \"baseline\": true, "
         "\"max_regression\": 0}]}",
         -1, -1, GATE_GPU_NONE, -1},
        {"{\"thresholds\": [{\"metric\": \"eval/acc:top-1.v2\", \"op\": \"=\", \"value\": -3}]}",
         -1, -1, GATE_GPU_NONE, -1},
    };
    size_t i, bad = 0;

    (void)state;
    for (i = 0; i < N_ELEMS(cases); i++) {
        struct gate_policy p;
        struct mg_error err;
        json_t *j = load(cases[i].json);
        enum mg_code rc;

        memset(&err, 0, sizeof(err));
        rc = gate_policy_parse(j, &p, &err);
        json_decref(j);
        if (rc != MG_OK) {
            print_error("parse(%s) = %d (%s: %s), want MG_OK\n", cases[i].json, rc, err.field,
                        err.message);
            bad++;
            continue;
        }
        if ((cases[i].approvals >= 0 && p.approvals_required != cases[i].approvals) ||
            (cases[i].nsteps >= 0 && (int)p.nsteps != cases[i].nsteps) || p.gpu != cases[i].gpu ||
            (cases[i].bake >= 0 && p.bake_seconds != cases[i].bake)) {
            print_error("parse(%s): approvals %d nsteps %zu gpu %d bake %lld\n", cases[i].json,
                        p.approvals_required, p.nsteps, (int)p.gpu, (long long)p.bake_seconds);
            bad++;
        }
    }
    assert_int_equal(bad, 0);
}

/* Each invalid policy and the JSON path the error must point at. */
static void test_policy_parse_invalid_table(void **state)
{
#define TH(body) "{\"thresholds\": [" body "]}"
#define OK_TH "{\"metric\": \"auc\", \"op\": \">=\", \"value\": 0.9}"
    static const struct {
        const char *json;
        const char *field;
    } cases[] = {
        /* the whole body */
        {"[]", ""},
        {"\"policy\"", ""},
        {"null", ""},
        /* unknown top-level field */
        {"{\"thresold\": []}", "thresold"},
        {"{\"approvals\": {\"required\": 1}, \"rollouts\": {}}", "rollouts"},
        /* thresholds */
        {"{\"thresholds\": {}}", "thresholds"},
        {"{\"thresholds\": \"auc>=0.9\"}", "thresholds"},
        {"{\"thresholds\": null}", "thresholds"},
        {TH("1"), "thresholds[0]"},
        {TH("{\"op\": \">=\", \"value\": 0.9}"), "thresholds[0]"}, /* missing metric */
        {TH("{\"metric\": \"\", \"op\": \">=\", \"value\": 0.9}"), "thresholds[0]"},
        {TH("{\"metric\": 7, \"op\": \">=\", \"value\": 0.9}"), "thresholds[0]"},
        {TH("{\"metric\": \"a b\", \"op\": \">=\", \"value\": 0.9}"), "thresholds[0]"},
        {TH("{\"metric\": \"auc\", \"value\": 0.9}"), "thresholds[0]"}, /* missing op */
        {TH("{\"metric\": \"auc\", \"op\": \"=>\", \"value\": 0.9}"), "thresholds[0]"},
        {TH("{\"metric\": \"auc\", \"op\": \"==\", \"value\": 0.9}"), "thresholds[0]"},
        {TH("{\"metric\": \"auc\", \"op\": \"ge\", \"value\": 0.9}"), "thresholds[0]"},
        {TH("{\"metric\": \"auc\", \"op\": \"\", \"value\": 0.9}"), "thresholds[0]"},
        {TH("{\"metric\": \"auc\", \"op\": 1, \"value\": 0.9}"), "thresholds[0]"},
        {TH("{\"metric\": \"auc\", \"op\": \">=\"}"), "thresholds[0]"}, /* no value */
        {TH("{\"metric\": \"auc\", \"op\": \">=\", \"value\": null}"), "thresholds[0]"},
        {TH("{\"metric\": \"auc\", \"op\": \">=\", \"value\": \"NaN\"}"), "thresholds[0]"},
        {TH("{\"metric\": \"auc\", \"op\": \">=\", \"value\": \"Infinity\"}"), "thresholds[0]"},
        {TH("{\"metric\": \"auc\", \"op\": \">=\", \"value\": true}"), "thresholds[0]"},
        {TH("{\"metric\": \"auc\", \"op\": \">=\", \"value\": 0.9, \"baseline\": \"yes\"}"),
         "thresholds[0]"},
        {TH("{\"metric\": \"auc\", \"op\": \">=\", \"value\": 0.9, \"baseline\": true}"),
         "thresholds[0]"},
        {TH("{\"metric\": \"auc\", \"op\": \">=\", \"value\": 0.9, \"max_regression\": 0.1}"),
         "thresholds[0]"},
        {TH("{\"metric\": \"auc\", \"op\": \">=\", \"value\": 0.9, \"baseline\": false, "
            "\"max_regression_pct\": 5}"),
         "thresholds[0]"},
        {TH("{\"metric\": \"auc\", \"op\": \">=\", \"baseline\": true, \"max_regression\": 0.1, "
            "\"max_regression_pct\": 5}"),
         "thresholds[0]"},
        {TH("{\"metric\": \"auc\", \"op\": \">=\", \"baseline\": true, \"max_regression\": -0.1}"),
         "thresholds[0]"},
        {TH("{\"metric\": \"auc\", \"op\": \">=\", \"baseline\": true, "
            "\"max_regression_pct\": -1}"),
         "thresholds[0]"},
        {TH("{\"metric\": \"auc\", \"op\": \">=\", \"baseline\": true, "
            "\"max_regression_pct\": 100.5}"),
         "thresholds[0]"},
        {TH("{\"metric\": \"auc\", \"op\": \">=\", \"baseline\": true, "
            "\"max_regression_pct\": 101}"),
         "thresholds[0]"},
        {TH("{\"metric\": \"auc\", \"op\": \">=\", \"baseline\": true, "
            "\"max_regression\": \"0.1\"}"),
         "thresholds[0]"},
        {TH("{\"metric\": \"auc\", \"op\": \">=\", \"value\": 0.9, \"threshold\": 1}"),
         "thresholds[0]"},
        {TH(OK_TH ", " OK_TH ", {\"metric\": \"auc\", \"op\": \"!=\", \"value\": 1}"),
         "thresholds[2]"},
        /* approvals */
        {"{\"approvals\": {\"required\": -1}}", "approvals.required"},
        {"{\"approvals\": {\"required\": 1.5}}", "approvals.required"},
        {"{\"approvals\": {\"required\": \"2\"}}", "approvals.required"},
        {"{\"approvals\": {\"required\": true}}", "approvals.required"},
        {"{\"approvals\": {\"required\": 17}}", "approvals.required"},
        {"{\"approvals\": {\"required\": 1, \"reviewers\": [\"rita\"]}}", "approvals.required"},
        {"{\"approvals\": {}}", "approvals.required"},
        {"{\"approvals\": 2}", "approvals.required"},
        /* rollout */
        {"{\"rollout\": []}", "rollout"},
        {"{\"rollout\": {\"stepz\": [100]}}", "rollout"},
        {"{\"rollout\": {\"steps\": []}}", "rollout.steps"},
        {"{\"rollout\": {\"steps\": 100}}", "rollout.steps"},
        {"{\"rollout\": {\"steps\": [50, 10, 100]}}", "rollout.steps"},
        {"{\"rollout\": {\"steps\": [10, 10, 100]}}", "rollout.steps"},
        {"{\"rollout\": {\"steps\": [10, 50]}}", "rollout.steps"},
        {"{\"rollout\": {\"steps\": [50]}}", "rollout.steps"},
        {"{\"rollout\": {\"steps\": [0, 100]}}", "rollout.steps"},
        {"{\"rollout\": {\"steps\": [-10, 100]}}", "rollout.steps"},
        {"{\"rollout\": {\"steps\": [10, 101]}}", "rollout.steps"},
        {"{\"rollout\": {\"steps\": [101]}}", "rollout.steps"},
        {"{\"rollout\": {\"steps\": [10.5, 100]}}", "rollout.steps"},
        {"{\"rollout\": {\"steps\": [\"10\", 100]}}", "rollout.steps"},
        {"{\"rollout\": {\"steps\": [100, 100]}}", "rollout.steps"},
        {"{\"rollout\": {\"steps\": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, "
         "100]}}",
         "rollout.steps"},
        {"{\"rollout\": {\"bake_seconds\": -1}}", "rollout.bake_seconds"},
        {"{\"rollout\": {\"bake_seconds\": 1.5}}", "rollout.bake_seconds"},
        {"{\"rollout\": {\"bake_seconds\": \"300\"}}", "rollout.bake_seconds"},
        {"{\"rollout\": {\"auto_advance\": \"yes\"}}", "rollout.auto_advance"},
        {"{\"rollout\": {\"auto_advance\": 1}}", "rollout.auto_advance"},
        /* rollout phases (docs/contract.md "Routing strategies") */
        {"{\"rollout\": {\"shadow_seconds\": -1}}", "rollout.shadow_seconds"},
        {"{\"rollout\": {\"shadow_seconds\": 604801}}", "rollout.shadow_seconds"},
        {"{\"rollout\": {\"shadow_seconds\": 1.5}}", "rollout.shadow_seconds"},
        {"{\"rollout\": {\"shadow_seconds\": \"600\"}}", "rollout.shadow_seconds"},
        {"{\"rollout\": {\"internal\": true}}", "rollout.internal"},
        {"{\"rollout\": {\"internal\": {\"header\": \"x-canary\", \"value\": \"1\", "
         "\"seconds\": 60, \"percent\": 5}}}",
         "rollout.internal"},
        {"{\"rollout\": {\"internal\": {\"value\": \"1\", \"seconds\": 60}}}",
         "rollout.internal.header"},
        {"{\"rollout\": {\"internal\": {\"header\": \"X-Canary\", \"value\": \"1\", "
         "\"seconds\": 60}}}",
         "rollout.internal.header"},
        {"{\"rollout\": {\"internal\": {\"header\": \"x canary\", \"value\": \"1\", "
         "\"seconds\": 60}}}",
         "rollout.internal.header"},
        {"{\"rollout\": {\"internal\": {\"header\": \"x:y\", \"value\": \"1\", "
         "\"seconds\": 60}}}",
         "rollout.internal.header"},
        {"{\"rollout\": {\"internal\": {\"header\": \"\", \"value\": \"1\", "
         "\"seconds\": 60}}}",
         "rollout.internal.header"},
        {"{\"rollout\": {\"internal\": {\"header\": \"x-canary\", \"seconds\": 60}}}",
         "rollout.internal.value"},
        {"{\"rollout\": {\"internal\": {\"header\": \"x-canary\", \"value\": \"\", "
         "\"seconds\": 60}}}",
         "rollout.internal.value"},
        {"{\"rollout\": {\"internal\": {\"header\": \"x-canary\", \"value\": \"a b\", "
         "\"seconds\": 60}}}",
         "rollout.internal.value"},
        {"{\"rollout\": {\"internal\": {\"header\": \"x-canary\", \"value\": \"a;b\", "
         "\"seconds\": 60}}}",
         "rollout.internal.value"},
        {"{\"rollout\": {\"internal\": {\"header\": \"x-canary\", \"value\": \"{x}\", "
         "\"seconds\": 60}}}",
         "rollout.internal.value"},
        {"{\"rollout\": {\"internal\": {\"header\": \"x-canary\", \"value\": 1, "
         "\"seconds\": 60}}}",
         "rollout.internal.value"},
        {"{\"rollout\": {\"internal\": {\"header\": \"x-canary\", \"value\": \"1\"}}}",
         "rollout.internal.seconds"},
        {"{\"rollout\": {\"internal\": {\"header\": \"x-canary\", \"value\": \"1\", "
         "\"seconds\": 0}}}",
         "rollout.internal.seconds"},
        {"{\"rollout\": {\"internal\": {\"header\": \"x-canary\", \"value\": \"1\", "
         "\"seconds\": 604801}}}",
         "rollout.internal.seconds"},
        /* smoke */
        {"{\"smoke\": true}", "smoke"},
        {"{\"smoke\": {\"required\": true, \"gpus\": 1}}", "smoke"},
        {"{\"smoke\": {\"gpu\": \"always\"}}", "smoke.gpu"},
        {"{\"smoke\": {\"gpu\": \"Required\"}}", "smoke.gpu"},
        {"{\"smoke\": {\"gpu\": 1}}", "smoke.gpu"},
        {"{\"smoke\": {\"gpu\": null}}", "smoke.gpu"},
        {"{\"smoke\": {\"required\": \"yes\"}}", "smoke.required"},
        /* booleans */
        {"{\"require_signature\": \"true\"}", "require_signature"},
        {"{\"require_signature\": 1}", "require_signature"},
        {"{\"require_pinned_image\": null}", "require_pinned_image"},
        {"{\"require_registered_datasets\": 0}", "require_registered_datasets"},
        {"{\"schema\": true}", "schema"},
        {"{\"schema\": {\"compatible_with_baseline\": 1}}", "schema"},
        {"{\"schema\": {\"compatible\": true}}", "schema"},
    };
#undef TH
#undef OK_TH
    size_t i, bad = 0;

    (void)state;
    for (i = 0; i < N_ELEMS(cases); i++) {
        struct gate_policy p;
        struct mg_error err;
        json_t *j = load(cases[i].json);
        enum mg_code rc;

        memset(&err, 0, sizeof(err));
        rc = gate_policy_parse(j, &p, &err);
        json_decref(j);
        if (rc != MG_EINVAL || err.code != MG_EINVAL) {
            print_error("parse(%s) = %d (err.code %d), want MG_EINVAL\n", cases[i].json, rc,
                        err.code);
            bad++;
            continue;
        }
        if (strcmp(err.field, cases[i].field) != 0) {
            print_error("parse(%s): field \"%s\", want \"%s\"\n", cases[i].json, err.field,
                        cases[i].field);
            bad++;
        }
        if (err.message[0] == '\0') {
            print_error("parse(%s): empty message\n", cases[i].json);
            bad++;
        }
    }
    assert_int_equal(bad, 0);
}

/* docs/contract.md "Routing strategies": the rollout's shadow and internal phases. */
static void test_policy_parse_phases(void **state)
{
    struct gate_policy p;
    struct mg_error err;
    json_t *j;

    (void)state;
    j = load("{\"rollout\": {\"shadow_seconds\": 600, \"internal\": {\"header\": "
             "\"x-canary\", \"value\": \"1\", \"seconds\": 300}, \"steps\": [10, 50, 100]}}");
    assert_int_equal(gate_policy_parse(j, &p, &err), MG_OK);
    json_decref(j);
    assert_int_equal(p.shadow_seconds, 600);
    assert_true(p.has_internal);
    assert_string_equal(p.internal_header, "x-canary");
    assert_string_equal(p.internal_value, "1");
    assert_int_equal(p.internal_seconds, 300);
    assert_int_equal(p.nsteps, 3);
    /* any lowercase token and any printable value but the few refused characters */
    j = load("{\"rollout\": {\"internal\": {\"header\": \"x.canary_1!\", \"value\": "
             "\"a=b#c'~\", \"seconds\": 604800}}}");
    assert_int_equal(gate_policy_parse(j, &p, &err), MG_OK);
    json_decref(j);
    assert_int_equal(p.shadow_seconds, 0);
    assert_string_equal(p.internal_header, "x.canary_1!");
    assert_string_equal(p.internal_value, "a=b#c'~");
    /* none by default, and with null */
    j = load("{\"rollout\": {\"internal\": null}}");
    assert_int_equal(gate_policy_parse(j, &p, &err), MG_OK);
    json_decref(j);
    assert_false(p.has_internal);
    assert_int_equal(p.shadow_seconds, 0);
}

/* 64 thresholds parse; 65 do not. */
static void test_policy_parse_threshold_count(void **state)
{
    size_t n;

    (void)state;
    for (n = GATE_MAX_THRESHOLDS; n <= GATE_MAX_THRESHOLDS + 1; n++) {
        json_t *th = json_array(), *j;
        struct gate_policy p;
        struct mg_error err;
        size_t i;

        for (i = 0; i < n; i++)
            json_array_append_new(th, json_pack("{s:s, s:s, s:f}", "metric", "auc", "op",
                                                ">=", "value", (double)i / 100));
        j = json_pack("{s:o}", "thresholds", th);
        assert_non_null(j);
        memset(&err, 0, sizeof(err));
        if (n == GATE_MAX_THRESHOLDS) {
            assert_int_equal(gate_policy_parse(j, &p, &err), MG_OK);
            assert_int_equal(p.nthresholds, GATE_MAX_THRESHOLDS);
            assert_true(p.thresholds[63].value == 0.63);
        } else {
            assert_int_equal(gate_policy_parse(j, &p, &err), MG_EINVAL);
            assert_string_equal(err.field, "thresholds");
        }
        json_decref(j);
    }
}

/* parse → gate_policy_to_json → parse gives the same policy, and the
 * canonical JSON names every field. */
static void test_policy_round_trip(void **state)
{
    static const char *const cases[] = {
        NULL, /* api_example */
        "{}",
        "{\"thresholds\": [{\"metric\": \"loss\", \"op\": \"<\", \"value\": 0.125},"
        " {\"metric\": \"acc\", \"op\": \">\", \"value\": -1e-9},"
        " {\"metric\": \"acc\", \"op\": \"=\", \"baseline\": true},"
        " {\"metric\": \"f1\", \"op\": \"<=\", \"baseline\": true, \"max_regression_pct\": 0},"
        " {\"metric\": \"f1\", \"op\": \">=\", \"baseline\": true, \"max_regression\": 0.1}],"
        " \"approvals\": {\"required\": 16}, \"require_registered_datasets\": true,"
        " \"schema\": {\"compatible_with_baseline\": true},"
        " \"smoke\": {\"required\": false, \"gpu\": \"preferred\"},"
        " \"rollout\": {\"steps\": [1, 99, 100], \"bake_seconds\": 604800, "
        "\"auto_advance\": false}}",
        "{\"rollout\": {\"shadow_seconds\": 600, \"internal\": {\"header\": \"x-canary\", "
        "\"value\": \"~1$\", \"seconds\": 300}, \"steps\": [10, 50, 100]}}",
        "{\"rollout\": {\"shadow_seconds\": 0, \"internal\": null}}",
    };
    static const char *const top[] = {"thresholds",
                                      "approvals",
                                      "require_signature",
                                      "require_pinned_image",
                                      "require_registered_datasets",
                                      "schema",
                                      "smoke",
                                      "rollout"};
    size_t i, k;

    (void)state;
    for (i = 0; i < N_ELEMS(cases); i++) {
        struct gate_policy a, b;
        struct mg_error err;
        char why[128];
        json_t *j = load(cases[i] ? cases[i] : api_example), *canon;

        memset(&err, 0, sizeof(err));
        assert_int_equal(gate_policy_parse(j, &a, &err), MG_OK);
        json_decref(j);
        canon = gate_policy_to_json(&a);
        assert_non_null(canon);
        for (k = 0; k < N_ELEMS(top); k++)
            if (json_object_get(canon, top[k]) == NULL)
                fail_msg("case %zu: canonical JSON lacks '%s'", i, top[k]);
        assert_non_null(json_object_get(json_object_get(canon, "smoke"), "gpu"));
        assert_non_null(json_object_get(json_object_get(canon, "rollout"), "bake_seconds"));
        assert_non_null(json_object_get(json_object_get(canon, "rollout"), "auto_advance"));
        assert_non_null(json_object_get(json_object_get(canon, "rollout"), "shadow_seconds"));
        assert_non_null(json_object_get(json_object_get(canon, "rollout"), "internal"));
        assert_int_equal(gate_policy_parse(canon, &b, &err), MG_OK);
        json_decref(canon);
        if (!policy_equal(&a, &b, why, sizeof(why)))
            fail_msg("case %zu: round trip differs: %s", i, why);
    }
}

static void test_op_names(void **state)
{
    static const struct {
        const char *s;
        bool ok;
        enum gate_op op;
    } cases[] = {
        {">=", true, GATE_OP_GE}, {">", true, GATE_OP_GT}, {"<=", true, GATE_OP_LE},
        {"<", true, GATE_OP_LT},  {"=", true, GATE_OP_EQ}, {"==", false, 0},
        {"=>", false, 0},         {"", false, 0},          {">= ", false, 0},
        {"!=", false, 0},         {NULL, false, 0},
    };
    size_t i;

    (void)state;
    for (i = 0; i < N_ELEMS(cases); i++) {
        enum gate_op op = (enum gate_op)99;
        bool ok = gate_op_parse(cases[i].s, &op);
        if (ok != cases[i].ok)
            fail_msg("gate_op_parse(\"%s\") = %d", cases[i].s ? cases[i].s : "(null)", ok);
        if (ok) {
            assert_int_equal(op, cases[i].op);
            assert_string_equal(gate_op_name(op), cases[i].s);
        }
    }
}

/* ---- gate_evaluate ---------------------------------------------------- */

#define NO_DETAIL "\x01" /* the gate's detail must be null */

struct want_gate {
    const char *name, *kind, *status;
    const char *observed; /* JSON text; NULL: not checked */
    const char *expected; /* JSON text; NULL: not checked */
    const char *detail;   /* NULL: not checked; NO_DETAIL: must be null */
};

/* JSON values equal, numbers compared by value (integer 50 == real 50.0). */
static bool json_same(const json_t *a, const json_t *b)
{
    if (json_is_number(a) && json_is_number(b))
        return json_number_value(a) == json_number_value(b);
    return json_equal((json_t *)a, (json_t *)b);
}

static char *dump(const json_t *j)
{
    return j ? json_dumps(j, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
}

/* Compare one gate of a report with what is wanted; print and count
 * mismatches. */
static size_t check_gate(const char *what, size_t idx, const json_t *g, const struct want_gate *w)
{
    static const char *const strs[] = {"name", "kind", "status"};
    const char *vals[3] = {w->name, w->kind, w->status};
    size_t bad = 0, k;

    for (k = 0; k < 3; k++) {
        const char *got = json_string_value(json_object_get(g, strs[k]));
        if (vals[k] && (got == NULL || strcmp(got, vals[k]) != 0)) {
            print_error("%s: gates[%zu].%s = \"%s\", want \"%s\"\n", what, idx, strs[k],
                        got ? got : "(missing)", vals[k]);
            bad++;
        }
    }
    for (k = 0; k < 2; k++) {
        const char *key = k == 0 ? "observed" : "expected";
        const char *text = k == 0 ? w->observed : w->expected;
        json_t *want, *got = json_object_get(g, key);
        if (text == NULL)
            continue;
        want = load(text);
        if (got == NULL || !json_same(got, want)) {
            char *s = dump(got);
            print_error("%s: gates[%zu].%s = %s, want %s\n", what, idx, key, s ? s : "(missing)",
                        text);
            free(s);
            bad++;
        }
        json_decref(want);
    }
    if (w->detail) {
        const json_t *d = json_object_get(g, "detail");
        bool ok = strcmp(w->detail, NO_DETAIL) == 0
                      ? json_is_null(d)
                      : json_is_string(d) && strcmp(json_string_value(d), w->detail) == 0;
        if (!ok) {
            char *s = dump(d);
            print_error("%s: gates[%zu].detail = %s, want %s\n", what, idx, s ? s : "(missing)",
                        strcmp(w->detail, NO_DETAIL) == 0 ? "null" : w->detail);
            free(s);
            bad++;
        }
    }
    return bad;
}

static size_t check_report(const char *what, const json_t *r, bool passed, bool pending,
                           const struct want_gate *gates, size_t ngates)
{
    const json_t *arr = json_object_get(r, "gates");
    size_t bad = 0, i;

    if (r == NULL) {
        print_error("%s: gate_evaluate returned NULL\n", what);
        return 1;
    }
    if (!json_is_boolean(json_object_get(r, "passed")) ||
        json_is_true(json_object_get(r, "passed")) != passed) {
        print_error("%s: passed is not %s\n", what, passed ? "true" : "false");
        bad++;
    }
    if (!json_is_boolean(json_object_get(r, "pending")) ||
        json_is_true(json_object_get(r, "pending")) != pending) {
        print_error("%s: pending is not %s\n", what, pending ? "true" : "false");
        bad++;
    }
    if (!json_is_array(arr) || json_array_size(arr) != ngates) {
        char *s = dump(arr);
        print_error("%s: gates = %s, want %zu gate(s)\n", what, s ? s : "(missing)", ngates);
        free(s);
        return bad + 1;
    }
    for (i = 0; i < ngates; i++) {
        const json_t *g = json_array_get(arr, i);
        static const char *const keys[] = {"name",     "kind",     "status",
                                           "observed", "expected", "detail"};
        size_t k;
        for (k = 0; k < N_ELEMS(keys); k++) {
            if (json_object_get(g, keys[k]) == NULL) {
                print_error("%s: gates[%zu] lacks '%s'\n", what, i, keys[k]);
                bad++;
            }
        }
        bad += check_gate(what, i, g, &gates[i]);
    }
    return bad;
}

/* A policy holding the single threshold t. */
static void one_threshold(struct gate_policy *p, const char *metric, enum gate_op op, bool baseline,
                          double value, int reg_kind, double reg)
{
    struct gate_threshold *t = &p->thresholds[0];

    gate_policy_empty(p);
    p->nthresholds = 1;
    snprintf(t->metric, sizeof(t->metric), "%s", metric);
    t->op = op;
    t->baseline = baseline;
    t->value = value;
    t->has_regression = reg_kind == 1;
    t->has_regression_pct = reg_kind == 2;
    if (reg_kind == 1)
        t->max_regression = reg;
    if (reg_kind == 2)
        t->max_regression_pct = reg;
}

/* Every op, absolute: below, at and above the boundary 0.5. */
static void test_evaluate_absolute_ops(void **state)
{
    static const struct {
        enum gate_op op;
        double cand;
        bool pass;
    } cases[] = {
        {GATE_OP_GE, 0.25, false},
        {GATE_OP_GE, 0.5, true},
        {GATE_OP_GE, 0.75, true},
        {GATE_OP_GT, 0.25, false},
        {GATE_OP_GT, 0.5, false},
        {GATE_OP_GT, 0.75, true},
        {GATE_OP_LE, 0.25, true},
        {GATE_OP_LE, 0.5, true},
        {GATE_OP_LE, 0.75, false},
        {GATE_OP_LT, 0.25, true},
        {GATE_OP_LT, 0.5, false},
        {GATE_OP_LT, 0.75, false},
        {GATE_OP_EQ, 0.25, false},
        {GATE_OP_EQ, 0.5, true},
        {GATE_OP_EQ, 0.75, false},
        /* just either side of the boundary */
        {GATE_OP_GE, 0.49999999999999994, false},
        {GATE_OP_LE, 0.50000000000000011, false},
        {GATE_OP_GT, 0.50000000000000011, true},
        {GATE_OP_LT, 0.49999999999999994, true},
        /* integers in the metrics compare too */
        {GATE_OP_GE, 1, true},
        {GATE_OP_LE, 0, true},
        {GATE_OP_GE, -0.0, false},
    };
    size_t i, bad = 0;

    (void)state;
    for (i = 0; i < N_ELEMS(cases); i++) {
        struct gate_policy p;
        struct gate_input in;
        char what[96], name[64], obs[64], exp[64];
        json_t *cand, *r;
        struct want_gate w;

        one_threshold(&p, "auc", cases[i].op, false, 0.5, 0, 0);
        memset(&in, 0, sizeof(in));
        in.policy = &p;
        cand = cases[i].cand == 1 || cases[i].cand == 0
                   ? json_pack("{s:I}", "auc", (json_int_t)cases[i].cand)
                   : json_pack("{s:f}", "auc", cases[i].cand);
        in.candidate_metrics = cand;
        snprintf(what, sizeof(what), "auc=%.17g %s 0.5", cases[i].cand, gate_op_name(cases[i].op));
        snprintf(name, sizeof(name), "auc %s 0.5", gate_op_name(cases[i].op));
        snprintf(obs, sizeof(obs), "%.17g", cases[i].cand);
        snprintf(exp, sizeof(exp), "\"%s 0.5\"", gate_op_name(cases[i].op));
        w = (struct want_gate){name, "threshold", cases[i].pass ? "passed" : "failed",
                               obs,  exp,         NO_DETAIL};
        r = gate_evaluate(&in, true);
        bad += check_report(what, r, cases[i].pass, false, &w, 1);
        json_decref(r);
        json_decref(cand);
    }
    assert_int_equal(bad, 0);
}

/* Relative thresholds (docs/contract.md): for >=, candidate >= baseline - max_regression
 * or baseline * (1 - pct/100); for <=, candidate <= baseline + max_regression or
 * baseline * (1 + pct/100). */
static void test_evaluate_relative(void **state)
{
    static const struct {
        enum gate_op op;
        int reg_kind; /* 0 none, 1 max_regression, 2 max_regression_pct */
        double reg, base, cand;
        bool pass;
        const char *expected; /* JSON text, NULL: not checked */
    } cases[] = {
        /* >= with max_regression 0.25 from 0.5: bound 0.25 */
        {GATE_OP_GE, 1, 0.25, 0.5, 0.25, true, "\">= 0.25\""},
        /* A computed bound tolerates 1e-9 relative rounding; these sit clearly past it. */
        {GATE_OP_GE, 1, 0.25, 0.5, 0.2499999, false, "\">= 0.25\""},
        {GATE_OP_GE, 1, 0.25, 0.5, 0.125, false, "\">= 0.25\""},
        {GATE_OP_GE, 1, 0.25, 0.5, 0.5, true, "\">= 0.25\""},
        {GATE_OP_GE, 1, 0.25, 0.5, 0.75, true, "\">= 0.25\""},
        /* >= with max_regression_pct 25 from 200: bound 150 */
        {GATE_OP_GE, 2, 25, 200, 150, true, "\">= 150\""},
        {GATE_OP_GE, 2, 25, 200, 149.5, false, "\">= 150\""},
        {GATE_OP_GE, 2, 25, 200, 250, true, "\">= 150\""},
        {GATE_OP_GE, 2, 100, 200, 0, true, "\">= 0\""},
        {GATE_OP_GE, 2, 0, 200, 199.5, false, "\">= 200\""},
        /* >= without a regression: no worse than the baseline */
        {GATE_OP_GE, 0, 0, 0.5, 0.5, true, "\">= 0.5\""},
        {GATE_OP_GE, 0, 0, 0.5, 0.25, false, "\">= 0.5\""},
        /* <= with max_regression 0.25 from 0.5: bound 0.75 */
        {GATE_OP_LE, 1, 0.25, 0.5, 0.75, true, "\"<= 0.75\""},
        {GATE_OP_LE, 1, 0.25, 0.5, 0.7500001, false, "\"<= 0.75\""},
        {GATE_OP_LE, 1, 0.25, 0.5, 0.875, false, "\"<= 0.75\""},
        {GATE_OP_LE, 1, 0.25, 0.5, 0.5, true, "\"<= 0.75\""},
        {GATE_OP_LE, 1, 0.25, 0.5, 0.125, true, "\"<= 0.75\""},
        /* <= with max_regression_pct 25 from 200: bound 250 */
        {GATE_OP_LE, 2, 25, 200, 250, true, "\"<= 250\""},
        {GATE_OP_LE, 2, 25, 200, 250.5, false, "\"<= 250\""},
        {GATE_OP_LE, 2, 25, 200, 100, true, "\"<= 250\""},
        {GATE_OP_LE, 0, 0, 40, 40, true, "\"<= 40\""},
        {GATE_OP_LE, 0, 0, 40, 40.5, false, "\"<= 40\""},
        /* strict ops against the same bounds */
        {GATE_OP_GT, 1, 0.25, 0.5, 0.25, false, "\"> 0.25\""},
        {GATE_OP_GT, 1, 0.25, 0.5, 0.375, true, "\"> 0.25\""},
        {GATE_OP_LT, 2, 25, 200, 250, false, "\"< 250\""},
        {GATE_OP_LT, 2, 25, 200, 249.5, true, "\"< 250\""},
        /* Exactly on the bound as a person writes it in decimal: the policy
         * says "at most 13% slower than 100 ms", and 113 ms is that. */
        {GATE_OP_LE, 2, 13, 100, 113, true, NULL},
        {GATE_OP_LE, 2, 16, 50, 58, true, NULL},
        {GATE_OP_LE, 1, 0.1, 0.7, 0.8, true, NULL},
        {GATE_OP_GE, 1, 0.01, 0.07, 0.06, true, NULL},
        {GATE_OP_GE, 2, 70, 10, 3, true, NULL},
        {GATE_OP_GE, 1, 0.005, 0.93, 0.925, true, NULL},
    };
    size_t i, bad = 0;

    (void)state;
    for (i = 0; i < N_ELEMS(cases); i++) {
        struct gate_policy p;
        struct gate_input in;
        char what[160], name[64], obs[64], detail[96];
        json_t *cand, *base, *r;
        struct want_gate w;

        one_threshold(&p, "lat", cases[i].op, true, 0, cases[i].reg_kind, cases[i].reg);
        cand = json_pack("{s:f}", "lat", cases[i].cand);
        base = json_pack("{s:f, s:f}", "lat", cases[i].base, "other", 1.0);
        memset(&in, 0, sizeof(in));
        in.policy = &p;
        in.candidate_metrics = cand;
        in.baseline_metrics = base;
        in.baseline_version = 3;
        snprintf(what, sizeof(what), "cand %.17g %s baseline %.17g (%s %g)", cases[i].cand,
                 gate_op_name(cases[i].op), cases[i].base,
                 cases[i].reg_kind == 1   ? "max_regression"
                 : cases[i].reg_kind == 2 ? "max_regression_pct"
                                          : "no regression",
                 cases[i].reg);
        snprintf(name, sizeof(name), "lat %s baseline", gate_op_name(cases[i].op));
        snprintf(obs, sizeof(obs), "%.17g", cases[i].cand);
        snprintf(detail, sizeof(detail), "baseline v3 has %.17g", cases[i].base);
        w = (struct want_gate){name, "threshold",       cases[i].pass ? "passed" : "failed",
                               obs,  cases[i].expected, cases[i].expected ? detail : NULL};
        r = gate_evaluate(&in, true);
        bad += check_report(what, r, cases[i].pass, false, &w, 1);
        json_decref(r);
        json_decref(cand);
        json_decref(base);
    }
    assert_int_equal(bad, 0);
}

/* NaN and ±inf candidates never pass, whatever the op. jansson refuses to
 * hold non-finite reals (json_real returns NULL), so such a metric reaches
 * the gate as missing or as a non-number; either way it must fail. */
static void test_evaluate_non_finite_never_passes(void **state)
{
    static const double values[] = {NAN, INFINITY, -INFINITY};
    static const enum gate_op ops[] = {GATE_OP_GE, GATE_OP_GT, GATE_OP_LE, GATE_OP_LT, GATE_OP_EQ};
    size_t v, o, rel, bad = 0;

    (void)state;
    for (v = 0; v < N_ELEMS(values); v++) {
        for (o = 0; o < N_ELEMS(ops); o++) {
            for (rel = 0; rel < 2; rel++) {
                struct gate_policy p;
                struct gate_input in;
                json_t *cand = json_object(), *base = json_pack("{s:f}", "auc", 0.5), *r;
                char what[96];
                struct want_gate w = {NULL, "threshold", "failed", NULL, NULL, NULL};

                /* Whatever jansson does with the value, the candidate has no
                 * finite "auc". */
                json_object_set_new(cand, "auc", json_real(values[v]));
                one_threshold(&p, "auc", ops[o], rel == 1, 0.5, rel == 1 ? 2 : 0,
                              rel == 1 ? 100 : 0);
                memset(&in, 0, sizeof(in));
                in.policy = &p;
                in.candidate_metrics = cand;
                in.baseline_metrics = base;
                in.baseline_version = 1;
                snprintf(what, sizeof(what), "auc=%g %s %s", values[v], gate_op_name(ops[o]),
                         rel ? "baseline (pct 100)" : "0.5");
                r = gate_evaluate(&in, true);
                bad += check_report(what, r, false, false, &w, 1);
                json_decref(r);
                json_decref(cand);
                json_decref(base);
            }
        }
    }
    /* The same for metrics written as strings ("NaN", "Infinity"). */
    for (v = 0; v < 3; v++) {
        static const char *const texts[] = {"{\"auc\": \"NaN\"}", "{\"auc\": \"Infinity\"}",
                                            "{\"auc\": null}"};
        struct gate_policy p;
        struct gate_input in;
        json_t *cand = load(texts[v]), *r;
        struct want_gate w = {"auc >= 0.5", "threshold", "failed", "null", NULL, NULL};

        one_threshold(&p, "auc", GATE_OP_GE, false, 0.5, 0, 0);
        memset(&in, 0, sizeof(in));
        in.policy = &p;
        in.candidate_metrics = cand;
        r = gate_evaluate(&in, true);
        bad += check_report(texts[v], r, false, false, &w, 1);
        json_decref(r);
        json_decref(cand);
    }
    assert_int_equal(bad, 0);
}

/* How a threshold shows in the report: name and expected as a person wrote
 * the policy, not the binary expansion of the double. */
static void test_evaluate_threshold_display(void **state)
{
    struct gate_policy p;
    struct gate_input in;
    json_t *cand = load("{\"auc\": 0.95}"), *r;
    struct want_gate w = {"auc >= 0.92", "threshold", "passed", "0.95", "\">= 0.92\"", NO_DETAIL};
    size_t bad;

    (void)state;
    one_threshold(&p, "auc", GATE_OP_GE, false, 0.92, 0, 0);
    memset(&in, 0, sizeof(in));
    in.policy = &p;
    in.candidate_metrics = cand;
    r = gate_evaluate(&in, true);
    bad = check_report("auc 0.95 >= 0.92", r, true, false, &w, 1);
    json_decref(r);
    json_decref(cand);
    assert_int_equal(bad, 0);
}

static const struct gate_approval two_approve[] = {{"rita", true, NULL, 0}, {"sam", true, NULL, 0}};
static const struct gate_approval one_approve[] = {{"rita", true, NULL, 0}};
static const struct gate_approval one_reject[] = {{"rita", true, NULL, 0}, {"sam", false, NULL, 0}};
static const struct gate_approval only_reject[] = {{"sam", false, NULL, 0}};

struct eval_row {
    const char *what;
    const char *policy;    /* JSON */
    const char *candidate; /* JSON metrics */
    const char *baseline;  /* JSON metrics, NULL: no baseline */
    struct gate_input in;  /* .policy and the metrics are filled in from the above */
    bool include_approvals;
    bool passed, pending;
    size_t ngates;
    struct want_gate gates[9];
};

#define ABS_AUC "{\"thresholds\": [{\"metric\": \"auc\", \"op\": \">=\", \"value\": 0.5}]}"
#define REL_AUC                                                                                    \
    "{\"thresholds\": [{\"metric\": \"auc\", \"op\": \">=\", \"baseline\": true, "                 \
    "\"max_regression\": 0.25}]}"
#define SIG "{\"require_signature\": true}"
#define PIN "{\"require_pinned_image\": true}"
#define DS "{\"require_registered_datasets\": true}"
#define FIT "{\"smoke\": {\"gpu\": \"required\"}}"
#define SMOKE "{\"smoke\": {\"required\": true}}"
#define APPR "{\"approvals\": {\"required\": 2}}"

static const struct eval_row eval_rows[] = {
    {"empty policy", "{}", "{}", NULL, {0}, true, true, false, 0, {{0}}},
    /* thresholds and baselines */
    {"relative, no baseline",
     REL_AUC,
     "{\"auc\": 0.25}",
     NULL,
     {0},
     true,
     true,
     false,
     1,
     {{"auc >= baseline", "threshold", "passed", "0.25", NULL, "no baseline"}}},
    {"relative, baseline lacks the metric",
     REL_AUC,
     "{\"auc\": 0.25}",
     "{\"f1\": 0.9}",
     {.baseline_version = 4},
     true,
     true,
     false,
     1,
     {{"auc >= baseline", "threshold", "passed", "0.25", NULL, "no baseline"}}},
    {"relative, candidate lacks the metric",
     REL_AUC,
     "{\"f1\": 0.9}",
     "{\"auc\": 0.9}",
     {.baseline_version = 4},
     true,
     false,
     false,
     1,
     {{"auc >= baseline", "threshold", "failed", "null", NULL,
       "the candidate has no metric 'auc'"}}},
    {"absolute, candidate lacks the metric",
     ABS_AUC,
     "{}",
     NULL,
     {0},
     true,
     false,
     false,
     1,
     {{"auc >= 0.5", "threshold", "failed", "null", NULL, "the candidate has no metric 'auc'"}}},
    {"absolute, metric is a string",
     ABS_AUC,
     "{\"auc\": \"0.9\"}",
     NULL,
     {0},
     true,
     false,
     false,
     1,
     {{"auc >= 0.5", "threshold", "failed", "null", NULL, NULL}}},
    /* signature */
    {"signature valid",
     SIG,
     "{}",
     NULL,
     {.signature = GATE_SIG_VALID},
     true,
     true,
     false,
     1,
     {{"signature", "signature", "passed", "\"valid\"", "\"valid\"", NO_DETAIL}}},
    {"signature invalid",
     SIG,
     "{}",
     NULL,
     {.signature = GATE_SIG_INVALID, .signature_detail = "digest mismatch"},
     true,
     false,
     false,
     1,
     {{"signature", "signature", "failed", "\"invalid\"", "\"valid\"", "digest mismatch"}}},
    {"signature missing",
     SIG,
     "{}",
     NULL,
     {.signature = GATE_SIG_MISSING},
     true,
     false,
     false,
     1,
     {{"signature", "signature", "failed", "\"missing\"", "\"valid\"",
       "the version has no signature bundle"}}},
    {"signature not required: no gate",
     "{\"require_signature\": false}",
     "{}",
     NULL,
     {.signature = GATE_SIG_MISSING},
     true,
     true,
     false,
     0,
     {{0}}},
    /* pinned image */
    {"image pinned",
     PIN,
     "{}",
     NULL,
     {.image = IMG_PINNED, .image_pinned = true},
     true,
     true,
     false,
     1,
     {{"pinned image", "image", "passed", "\"" IMG_PINNED "\"", "\"image pinned by digest\"",
       NO_DETAIL}}},
    {"image not pinned",
     PIN,
     "{}",
     NULL,
     {.image = "registry.example/fraud:latest", .image_pinned = false},
     true,
     false,
     false,
     1,
     {{"pinned image", "image", "failed", "\"registry.example/fraud:latest\"",
       "\"image pinned by digest\"", "the image is not pinned by a sha256 digest"}}},
    {"no image",
     PIN,
     "{}",
     NULL,
     {.image = NULL},
     true,
     false,
     false,
     1,
     {{"pinned image", "image", "failed", "null", "\"image pinned by digest\"",
       "the version names no image"}}},
    /* datasets */
    {"datasets all registered",
     DS,
     "{}",
     NULL,
     {.datasets_total = 3},
     true,
     true,
     false,
     1,
     {{"registered datasets", "datasets", "passed", "\"3 of 3 registered\"", "\"all registered\"",
       NO_DETAIL}}},
    {"no datasets at all",
     DS,
     "{}",
     NULL,
     {.datasets_total = 0},
     true,
     true,
     false,
     1,
     {{"registered datasets", "datasets", "passed", "\"0 of 0 registered\"", NULL, NULL}}},
    {"one dataset unregistered",
     DS,
     "{}",
     NULL,
     {.datasets_total = 3, .datasets_unregistered = 1, .first_unregistered = DS_DIGEST},
     true,
     false,
     false,
     1,
     {{"registered datasets", "datasets", "failed", "\"2 of 3 registered\"", "\"all registered\"",
       "dataset " DS_DIGEST " is not registered"}}},
    /* fit: only when the policy requires a GPU */
    {"fit, no resources declared",
     FIT,
     "{}",
     NULL,
     {.has_vram = false, .largest_gpu_gib = 80},
     true,
     true,
     false,
     1,
     {{"fits GPU", "fit", "skipped", "null", "null", NULL}}},
    {"fit, runner reports no GPU",
     FIT,
     "{}",
     NULL,
     {.has_vram = true, .vram_gib = 16.5, .largest_gpu_gib = -1},
     true,
     false,
     false,
     1,
     {{"fits GPU", "fit", "failed", "16.5", NULL,
       "the policy requires a GPU and the runner reports none"}}},
    {"fit, fits",
     FIT,
     "{}",
     NULL,
     {.has_vram = true, .vram_gib = 16.5, .largest_gpu_gib = 24},
     true,
     true,
     false,
     1,
     {{"fits GPU", "fit", "passed", "16.5", "\"<= 24 GiB\"", NULL}}},
    {"fit, exactly the GPU's size",
     FIT,
     "{}",
     NULL,
     {.has_vram = true, .vram_gib = 24, .largest_gpu_gib = 24},
     true,
     true,
     false,
     1,
     {{"fits GPU", "fit", "passed", "24", NULL, NULL}}},
    {"fit, does not fit",
     FIT,
     "{}",
     NULL,
     {.has_vram = true, .vram_gib = 84.5, .largest_gpu_gib = 80},
     true,
     false,
     false,
     1,
     {{"fits GPU", "fit", "failed", "84.5", "\"<= 80 GiB\"", NULL}}},
    {"fit, gpu preferred: no fit gate",
     "{\"smoke\": {\"gpu\": \"preferred\"}}",
     "{}",
     NULL,
     {.has_vram = true, .vram_gib = 84.5, .largest_gpu_gib = -1},
     true,
     true,
     false,
     0,
     {{0}}},
    {"fit, gpu none: no fit gate",
     "{\"smoke\": {\"gpu\": \"none\"}}",
     "{}",
     NULL,
     {.has_vram = true, .vram_gib = 84.5, .largest_gpu_gib = 1},
     true,
     true,
     false,
     0,
     {{0}}},
    /* smoke */
    {"smoke not run",
     SMOKE,
     "{}",
     NULL,
     {.smoke = GATE_SMOKE_NONE},
     true,
     false,
     true,
     1,
     {{"smoke test", "smoke", "pending", "\"not run\"", "\"passed\"", NULL}}},
    {"smoke queued",
     SMOKE,
     "{}",
     NULL,
     {.smoke = GATE_SMOKE_QUEUED},
     true,
     false,
     true,
     1,
     {{"smoke test", "smoke", "pending", "\"queued\"", "\"passed\"", NULL}}},
    {"smoke running",
     SMOKE,
     "{}",
     NULL,
     {.smoke = GATE_SMOKE_RUNNING},
     true,
     false,
     true,
     1,
     {{"smoke test", "smoke", "running", "\"running\"", "\"passed\"", NULL}}},
    {"smoke passed",
     SMOKE,
     "{}",
     NULL,
     {.smoke = GATE_SMOKE_PASSED},
     true,
     true,
     false,
     1,
     {{"smoke test", "smoke", "passed", "\"passed\"", "\"passed\"", NULL}}},
    {"smoke failed",
     SMOKE,
     "{}",
     NULL,
     {.smoke = GATE_SMOKE_FAILED, .smoke_detail = "HTTP 500 from /predict"},
     true,
     false,
     false,
     1,
     {{"smoke test", "smoke", "failed", "\"failed\"", "\"passed\"", "HTTP 500 from /predict"}}},
    {"smoke not required: no gate",
     "{\"smoke\": {\"required\": false}}",
     "{}",
     NULL,
     {.smoke = GATE_SMOKE_FAILED},
     true,
     true,
     false,
     0,
     {{0}}},
    /* approvals */
    {"approvals 0 of 2",
     APPR,
     "{}",
     NULL,
     {.approvals = NULL, .napprovals = 0},
     true,
     false,
     true,
     1,
     {{"approvals", "approval", "pending", "\"0 approved\"", "\"2 approvals\"", NULL}}},
    {"approvals 1 of 2",
     APPR,
     "{}",
     NULL,
     {.approvals = one_approve, .napprovals = 1},
     true,
     false,
     true,
     1,
     {{"approvals", "approval", "pending", "\"1 approved\"", "\"2 approvals\"", NULL}}},
    {"approvals 2 of 2",
     APPR,
     "{}",
     NULL,
     {.approvals = two_approve, .napprovals = 2},
     true,
     true,
     false,
     1,
     {{"approvals", "approval", "passed", "\"2 approved\"", "\"2 approvals\"", NULL}}},
    {"approvals: one reject after an approve",
     APPR,
     "{}",
     NULL,
     {.approvals = one_reject, .napprovals = 2},
     true,
     false,
     false,
     1,
     {{"approvals", "approval", "failed", "\"1 approved\"", "\"2 approvals\"", NULL}}},
    {"approvals: only a reject",
     APPR,
     "{}",
     NULL,
     {.approvals = only_reject, .napprovals = 1},
     true,
     false,
     false,
     1,
     {{"approvals", "approval", "failed", NULL, NULL, NULL}}},
    {"approvals left out (dry run)",
     APPR,
     "{}",
     NULL,
     {.approvals = NULL, .napprovals = 0},
     false,
     true,
     false,
     0,
     {{0}}},
    {"approvals left out even when rejected",
     APPR,
     "{}",
     NULL,
     {.approvals = one_reject, .napprovals = 2},
     false,
     true,
     false,
     0,
     {{0}}},
    {"no approvals required: no gate",
     "{\"approvals\": {\"required\": 0}}",
     "{}",
     NULL,
     {.approvals = only_reject, .napprovals = 1},
     true,
     true,
     false,
     0,
     {{0}}},
    /* combinations: a failure wins over pending */
    {"failed and pending",
     "{\"require_signature\": true, \"smoke\": {\"required\": true}}",
     "{}",
     NULL,
     {.signature = GATE_SIG_MISSING, .smoke = GATE_SMOKE_RUNNING},
     true,
     false,
     false,
     2,
     {{"signature", "signature", "failed", NULL, NULL, NULL},
      {"smoke test", "smoke", "running", NULL, NULL, NULL}}},
    /* The docs/contract.md example, every fact good: every gate, in order. */
    {"docs/contract.md example, all good",
     NULL,
     "{\"auc\": 0.9375, \"p95_latency_ms\": 44}",
     "{\"auc\": 0.9375, \"p95_latency_ms\": 40}",
     {.baseline_version = 6,
      .signature = GATE_SIG_VALID,
      .image = IMG_PINNED,
      .image_pinned = true,
      .datasets_total = 1,
      .datasets_unregistered = 1,
      .has_vram = true,
      .vram_gib = 16,
      .largest_gpu_gib = 80,
      .smoke = GATE_SMOKE_PASSED,
      .approvals = two_approve,
      .napprovals = 2},
     true,
     true,
     false,
     9,
     {{"auc >= 0.92", "threshold", "passed", "0.9375", NULL, NO_DETAIL},
      {"p95_latency_ms <= 50", "threshold", "passed", "44", "\"<= 50\"", NO_DETAIL},
      {"auc >= baseline", "threshold", "passed", "0.9375", NULL, "baseline v6 has 0.9375"},
      {"p95_latency_ms <= baseline", "threshold", "passed", "44", "\"<= 44\"",
       "baseline v6 has 40"},
      {"signature", "signature", "passed", NULL, NULL, NULL},
      {"pinned image", "image", "passed", NULL, NULL, NULL},
      {"fits GPU", "fit", "passed", NULL, NULL, NULL},
      {"smoke test", "smoke", "passed", NULL, NULL, NULL},
      {"approvals", "approval", "passed", NULL, NULL, NULL}}},
    {"docs/contract.md example, latency regressed past 10%",
     NULL,
     "{\"auc\": 0.9375, \"p95_latency_ms\": 44.5}",
     "{\"auc\": 0.9375, \"p95_latency_ms\": 40}",
     {.baseline_version = 6,
      .signature = GATE_SIG_VALID,
      .image = IMG_PINNED,
      .image_pinned = true,
      .has_vram = true,
      .vram_gib = 16,
      .largest_gpu_gib = 80,
      .smoke = GATE_SMOKE_PASSED},
     false,
     false,
     false,
     8,
     {{"auc >= 0.92", "threshold", "passed", NULL, NULL, NULL},
      {"p95_latency_ms <= 50", "threshold", "passed", NULL, NULL, NULL},
      {"auc >= baseline", "threshold", "passed", NULL, NULL, NULL},
      {"p95_latency_ms <= baseline", "threshold", "failed", "44.5", "\"<= 44\"", NULL},
      {"signature", "signature", "passed", NULL, NULL, NULL},
      {"pinned image", "image", "passed", NULL, NULL, NULL},
      {"fits GPU", "fit", "passed", NULL, NULL, NULL},
      {"smoke test", "smoke", "passed", NULL, NULL, NULL}}},
};

static void test_evaluate_table(void **state)
{
    size_t i, bad = 0;

    (void)state;
    for (i = 0; i < N_ELEMS(eval_rows); i++) {
        const struct eval_row *row = &eval_rows[i];
        struct gate_policy p;
        struct gate_input in = row->in;
        struct mg_error err;
        json_t *pj = load(row->policy ? row->policy : api_example);
        json_t *cand = load(row->candidate);
        json_t *base = row->baseline ? load(row->baseline) : NULL;
        json_t *r;

        memset(&err, 0, sizeof(err));
        if (gate_policy_parse(pj, &p, &err) != MG_OK)
            fail_msg("%s: test policy does not parse: %s", row->what, err.message);
        in.policy = &p;
        in.candidate_metrics = cand;
        in.baseline_metrics = base;
        r = gate_evaluate(&in, row->include_approvals);
        bad += check_report(row->what, r, row->passed, row->pending, row->gates, row->ngates);
        json_decref(r);
        json_decref(pj);
        json_decref(cand);
        json_decref(base);
    }
    assert_int_equal(bad, 0);
}

/* The scan gate passes only on a clean report: unsafe, unknown and none fail, naming the
 * first finding; "scan" round-trips and appears in the canonical form only when set. */
static void test_evaluate_scan(void **state)
{
    static const struct {
        const char *report; /* NULL: the version has none */
        const char *status, *detail_part;
    } rows[] = {
        {NULL, "failed", "rescan"},
        {"{\"verdict\":\"clean\",\"findings\":[]}", "passed", NULL},
        {"{\"verdict\":\"unsafe\",\"findings\":[{\"member\":\"a/data.pkl\",\"detail\":"
         "\"imports os.system\"}]}",
         "failed", "a/data.pkl: imports os.system"},
        {"{\"verdict\":\"unknown\",\"findings\":[{\"member\":null,\"detail\":\"truncated\"}]}",
         "failed", "default-deny"},
    };
    struct gate_policy p;
    struct gate_input in;
    struct mg_error err;
    json_t *pj = load("{\"scan\": {\"required\": true}}"), *r, *g, *back;
    size_t i;

    (void)state;
    assert_int_equal(gate_policy_parse(pj, &p, &err), MG_OK);
    assert_true(p.scan_required);
    back = gate_policy_to_json(&p);
    assert_true(json_is_true(json_object_get(json_object_get(back, "scan"), "required")));
    json_decref(back);
    for (i = 0; i < N_ELEMS(rows); i++) {
        memset(&in, 0, sizeof(in));
        in.policy = &p;
        in.scan = rows[i].report ? load(rows[i].report) : NULL;
        r = gate_evaluate(&in, true);
        g = json_array_get(json_object_get(r, "gates"), 0);
        assert_string_equal(json_string_value(json_object_get(g, "kind")), "scan");
        assert_string_equal(json_string_value(json_object_get(g, "status")), rows[i].status);
        if (rows[i].detail_part)
            assert_non_null(
                strstr(json_string_value(json_object_get(g, "detail")), rows[i].detail_part));
        assert_int_equal(json_is_true(json_object_get(r, "passed")),
                         strcmp(rows[i].status, "passed") == 0);
        json_decref(r);
        json_decref((json_t *)in.scan);
    }
    json_decref(pj);
    pj = load("{}");
    assert_int_equal(gate_policy_parse(pj, &p, &err), MG_OK);
    back = gate_policy_to_json(&p);
    assert_null(json_object_get(back, "scan"));
    json_decref(back);
    json_decref(pj);
    pj = load("{\"scan\": {\"required\": 1}}");
    assert_int_equal(gate_policy_parse(pj, &p, &err), MG_EINVAL);
    assert_string_equal(err.field, "scan");
    json_decref(pj);
}

/* ---- approvals -------------------------------------------------------- */

static void test_approval_check_table(void **state)
{
    static const struct gate_approval carol_yes[] = {{"carol", true, NULL, 0}};
    static const struct gate_approval carol_no[] = {{"dave", true, NULL, 0},
                                                    {"carol", false, NULL, 0}};
    static const struct gate_approval dave_yes[] = {{"dave", true, NULL, 0}};
    static const struct gate_approval alice_yes[] = {{"alice", true, NULL, 0}};
    static const char *const eve[] = {"eve"};
    static const char *const eve_and_null[] = {NULL, "eve"};
    static const struct {
        const char *by, *author, *creator;
        const struct gate_approval *existing;
        size_t n;
        enum mg_code rc;
        const char *const *contrib;
        size_t ncontrib;
    } cases[] = {
        {"alice", "alice", "bob", NULL, 0, MG_ESELFAPPROVAL, NULL, 0}, /* the version's author */
        {"bob", "alice", "bob", NULL, 0, MG_ESELFAPPROVAL, NULL, 0},   /* the promotion's creator */
        {"alice", "alice", "alice", NULL, 0, MG_ESELFAPPROVAL, NULL, 0}, /* both */
        {"alice", "alice", "bob", alice_yes, 1, MG_ESELFAPPROVAL, NULL,
         0},                                                            /* self wins over decided */
        {"carol", "alice", "bob", carol_yes, 1, MG_ECONFLICT, NULL, 0}, /* already approved */
        {"carol", "alice", "bob", carol_no, 2, MG_ECONFLICT, NULL, 0},  /* already rejected */
        {"carol", "alice", "bob", NULL, 0, MG_OK, NULL, 0},             /* another reviewer */
        {"carol", "alice", "bob", dave_yes, 1, MG_OK, NULL, 0},         /* another one decided */
        {"carol", NULL, NULL, NULL, 0, MG_OK, NULL, 0},                 /* unknown author/creator */
        {"alicex", "alice", "bob", NULL, 0, MG_OK, NULL, 0},            /* names match exactly */
        {"alic", "alice", "bob", NULL, 0, MG_OK, NULL, 0},
        {"eve", "alice", "bob", NULL, 0, MG_ESELFAPPROVAL, eve, 1},          /* appended a metric */
        {"eve", "alice", "bob", NULL, 0, MG_ESELFAPPROVAL, eve_and_null, 2}, /* among others */
        {"carol", "alice", "bob", NULL, 0, MG_OK, eve, 1},                   /* not a contributor */
        {"eve", "alice", "bob", carol_yes, 1, MG_ESELFAPPROVAL, eve, 1},
    };
    size_t i, bad = 0;

    (void)state;
    for (i = 0; i < N_ELEMS(cases); i++) {
        struct mg_error err;
        enum mg_code rc;

        memset(&err, 0, sizeof(err));
        rc = gate_approval_check(cases[i].by, cases[i].author, cases[i].contrib, cases[i].ncontrib,
                                 cases[i].creator, cases[i].existing, cases[i].n, &err);
        if (rc != cases[i].rc) {
            print_error("case %zu: %s (author %s, creator %s): %d, want %d\n", i, cases[i].by,
                        cases[i].author ? cases[i].author : "-",
                        cases[i].creator ? cases[i].creator : "-", rc, cases[i].rc);
            bad++;
            continue;
        }
        if (rc != MG_OK && (err.code != rc || err.message[0] == '\0')) {
            print_error("case %zu: err.code %d, message \"%s\"\n", i, err.code, err.message);
            bad++;
        }
    }
    assert_int_equal(bad, 0);
}

static void test_approval_tally_table(void **state)
{
    static const struct gate_approval three[] = {
        {"a", true, NULL, 0}, {"b", true, NULL, 0}, {"c", true, NULL, 0}};
    static const struct gate_approval mixed[] = {
        {"a", true, NULL, 0}, {"b", true, NULL, 0}, {"c", false, NULL, 0}};
    static const struct {
        int required;
        const struct gate_approval *a;
        size_t n;
        bool rejected, satisfied;
        int approved;
    } cases[] = {
        {0, NULL, 0, false, true, 0},         {2, NULL, 0, false, false, 0},
        {2, one_approve, 1, false, false, 1}, {2, two_approve, 2, false, true, 2},
        {2, three, 3, false, true, 3},        {3, three, 3, false, true, 3},
        {4, three, 3, false, false, 3},       {2, one_reject, 2, true, false, 1},
        {1, mixed, 3, true, false, 2},        {0, only_reject, 1, true, false, 0},
    };
    size_t i;

    (void)state;
    for (i = 0; i < N_ELEMS(cases); i++) {
        struct gate_policy p;
        bool rejected = !cases[i].rejected, satisfied = !cases[i].satisfied;
        int approved = -1;

        gate_policy_empty(&p);
        p.approvals_required = cases[i].required;
        gate_approval_tally(&p, cases[i].a, cases[i].n, &rejected, &satisfied, &approved);
        if (rejected != cases[i].rejected || satisfied != cases[i].satisfied ||
            approved != cases[i].approved)
            fail_msg("case %zu: rejected %d satisfied %d approved %d, want %d %d %d", i, rejected,
                     satisfied, approved, cases[i].rejected, cases[i].satisfied, cases[i].approved);
    }
}

/* Separation of duties compares people (docs/contract.md "Identity"): issuer and subject both. */
static void test_same_person_table(void **state)
{
    static const struct {
        const char *ia, *sa, *ib, *sb;
        bool same;
    } cases[] = {
        {"https://idp", "alice", "https://idp", "alice", true},
        {"https://idp", "alice", "https://idp", "bob", false},
        {"https://idp", "alice", "https://other", "alice", false}, /* another IdP's alice */
        {"", "", "", "", false},                                   /* two tokens of nobody */
        {NULL, NULL, NULL, NULL, false},
        {"https://idp", "alice", NULL, NULL, false},
        {"https://idp", "", "https://idp", "", false},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        if (gate_same_person(cases[i].ia, cases[i].sa, cases[i].ib, cases[i].sb) != cases[i].same)
            fail_msg("case %zu: expected %s", i, cases[i].same ? "same" : "different");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_policy_empty),
        cmocka_unit_test(test_policy_parse_api_example),
        cmocka_unit_test(test_policy_parse_valid_table),
        cmocka_unit_test(test_policy_parse_invalid_table),
        cmocka_unit_test(test_policy_parse_phases),
        cmocka_unit_test(test_policy_parse_threshold_count),
        cmocka_unit_test(test_policy_round_trip),
        cmocka_unit_test(test_op_names),
        cmocka_unit_test(test_evaluate_absolute_ops),
        cmocka_unit_test(test_evaluate_relative),
        cmocka_unit_test(test_evaluate_non_finite_never_passes),
        cmocka_unit_test(test_evaluate_threshold_display),
        cmocka_unit_test(test_evaluate_table),
        cmocka_unit_test(test_evaluate_scan),
        cmocka_unit_test(test_approval_check_table),
        cmocka_unit_test(test_approval_tally_table),
        cmocka_unit_test(test_same_person_table),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
