/*
 * test_analysis.c - gates/analysis.c (docs/contract.md "Live canary analysis"): the policy's
 * "analysis" block (valid and invalid bodies, the field each refusal names, the canonical
 * round trip), placeholder expansion, and the judgement as tables: value and ratio metrics,
 * the one-sided two-proportion test, interval verdicts, streaks, the action after an
 * interval and "may this phase end now".
 *
 * Each table checks every row and reports every mismatch before failing.
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

#include "gates/analysis.h"
#include "gates/policy.h"
#include "gates/rollout.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

static json_t *load(const char *text)
{
    json_error_t e;
    json_t *j = json_loads(text, 0, &e);

    if (j == NULL)
        fail_msg("bad test JSON %s: %s", text, e.text);
    return j;
}

/* The docs/contract.md example, with {{…}} placeholders. */
static const char example[] =
    "{\"provider\": {\"kind\": \"prometheus\", \"url\": \"http://127.0.0.1:9090/\"},"
    " \"interval_seconds\": 10, \"failure_limit\": 2, \"inconclusive_limit\": 12,"
    " \"on_inconclusive\": \"hold\", \"metrics\": ["
    "  {\"name\": \"error_rate\", \"kind\": \"ratio\","
    "   \"errors\": \"sum(increase(http_requests_total{version=\\\"{{version}}\\\","
    "code=~\\\"5..\\\"}[{{interval}}]))\","
    "   \"total\": \"sum(increase(http_requests_total{version=\\\"{{version}}\\\"}"
    "[{{interval}}]))\","
    "   \"max\": 0.02, \"max_increase\": 0.005, \"min_total\": 50, \"confidence\": 0.95},"
    "  {\"name\": \"p95_latency_ms\", \"kind\": \"value\","
    "   \"query\": \"1000 * histogram_quantile(0.95, sum by (le) "
    "(rate(http_request_duration_seconds_bucket{version=\\\"{{version}}\\\"}[{{interval}}])))\","
    "   \"max\": 500, \"max_regression_pct\": 20}]}";

static void test_parse_example(void **state)
{
    struct gate_analysis a;
    struct mg_error err = {0};
    json_t *j = load(example), *canon, *again_j;
    struct gate_analysis again;

    (void)state;
    assert_int_equal(gate_analysis_parse(j, &a, &err), MG_OK);
    assert_true(a.enabled);
    assert_string_equal(a.url, "http://127.0.0.1:9090"); /* trailing slash dropped */
    assert_int_equal(a.interval_seconds, 10);
    assert_int_equal(a.failure_limit, 2);
    assert_int_equal(a.inconclusive_limit, 12);
    assert_int_equal(a.on_inconclusive, GATE_ON_INCONCLUSIVE_HOLD);
    assert_int_equal(a.nmetrics, 2);
    assert_int_equal(a.metrics[0].kind, GATE_METRIC_RATIO);
    assert_true(a.metrics[0].has_max && a.metrics[0].max == 0.02);
    assert_true(a.metrics[0].has_max_increase && a.metrics[0].max_increase == 0.005);
    assert_true(a.metrics[0].min_total == 50 && a.metrics[0].confidence == 0.95);
    assert_non_null(strstr(a.metrics[0].q[1], "{{interval}}"));
    assert_int_equal(a.metrics[1].kind, GATE_METRIC_VALUE);
    assert_true(a.metrics[1].has_max && a.metrics[1].max == 500);
    assert_true(a.metrics[1].has_max_regression_pct && a.metrics[1].max_regression_pct == 20);
    assert_false(a.metrics[1].has_min);

    /* canonical → parse → canonical is stable */
    canon = gate_analysis_to_json(&a);
    assert_non_null(canon);
    assert_int_equal(gate_analysis_parse(canon, &again, &err), MG_OK);
    again_j = gate_analysis_to_json(&again);
    assert_true(json_equal(canon, again_j));
    json_decref(again_j);
    json_decref(canon);
    json_decref(j);
}

static void test_parse_defaults_and_policy(void **state)
{
    struct gate_policy p, q;
    struct mg_error err = {0};
    json_t *j, *canon;

    (void)state;
    j = load("{\"analysis\": {\"metrics\": [{\"name\": \"lat\", \"kind\": \"value\", "
             "\"query\": \"up\", \"min\": 1}]}}");
    assert_int_equal(gate_policy_parse(j, &p, &err), MG_OK);
    json_decref(j);
    assert_true(p.analysis.enabled);
    assert_string_equal(p.analysis.url, "");
    assert_int_equal(p.analysis.interval_seconds, 30);
    assert_int_equal(p.analysis.failure_limit, 2);
    assert_int_equal(p.analysis.inconclusive_limit, 12);
    canon = gate_policy_to_json(&p);
    assert_true(json_is_object(json_object_get(canon, "analysis")));
    assert_true(json_is_null(
        json_object_get(json_object_get(json_object_get(canon, "analysis"), "provider"), "url")));
    assert_int_equal(gate_policy_parse(canon, &q, &err), MG_OK);
    assert_true(q.analysis.enabled && q.analysis.nmetrics == 1);
    json_decref(canon);

    /* no analysis: disabled, and the canonical form says null */
    j = load("{}");
    assert_int_equal(gate_policy_parse(j, &p, &err), MG_OK);
    json_decref(j);
    assert_false(p.analysis.enabled);
    canon = gate_policy_to_json(&p);
    assert_true(json_is_null(json_object_get(canon, "analysis")));
    json_decref(canon);
}

static void test_parse_invalid_table(void **state)
{
    static const struct {
        const char *json; /* the analysis value */
        const char *field;
        const char *says; /* in the message */
    } cases[] = {
        {"[]", "analysis", "object"},
        {"{\"metrics\": [], \"x\": 1}", "analysis", "unknown field 'x'"},
        {"{\"metrics\": []}", "analysis.metrics", "1 to 8"},
        {"{}", "analysis.metrics", "array"},
        {"{\"provider\": {\"kind\": \"datadog\"}, \"metrics\": []}", "analysis.provider.kind",
         "prometheus"},
        {"{\"provider\": {\"kind\": \"prometheus\", \"url\": \"ftp://x\"}, \"metrics\": []}",
         "analysis.provider.url", "http"},
        {"{\"provider\": {\"kind\": \"prometheus\", \"url\": \"http://h/?q=1\"}, \"metrics\": []}",
         "analysis.provider.url", "no query"},
        {"{\"interval_seconds\": 0, \"metrics\": []}", "analysis.interval_seconds", "1 to 3600"},
        {"{\"interval_seconds\": 1.5, \"metrics\": []}", "analysis.interval_seconds", "integer"},
        {"{\"failure_limit\": 0, \"metrics\": []}", "analysis.failure_limit", "1 to 100"},
        {"{\"inconclusive_limit\": 501, \"metrics\": []}", "analysis.inconclusive_limit",
         "1 to 500"},
        {"{\"on_inconclusive\": \"ignore\", \"metrics\": []}", "analysis.on_inconclusive", "hold"},
        {"{\"metrics\": [1]}", "analysis.metrics[0]", "object"},
        {"{\"metrics\": [{\"name\": \"a b\", \"kind\": \"value\", \"query\": \"up\", "
         "\"max\": 1}]}",
         "analysis.metrics[0]", "name"},
        {"{\"metrics\": [{\"name\": \"a\", \"kind\": \"gauge\", \"query\": \"up\"}]}",
         "analysis.metrics[0].kind", "\"value\" or \"ratio\""},
        {"{\"metrics\": [{\"name\": \"a\", \"kind\": \"value\", \"max\": 1}]}",
         "analysis.metrics[0].query", "PromQL"},
        {"{\"metrics\": [{\"name\": \"a\", \"kind\": \"value\", \"query\": \"\", \"max\": 1}]}",
         "analysis.metrics[0].query", "PromQL"},
        {"{\"metrics\": [{\"name\": \"a\", \"kind\": \"value\", \"query\": \"up\"}]}",
         "analysis.metrics[0]", "max"},
        {"{\"metrics\": [{\"name\": \"a\", \"kind\": \"value\", \"query\": \"up\", \"max\": 1, "
         "\"min\": 0, \"max_regression\": 1}]}",
         "analysis.metrics[0]", "no direction"},
        {"{\"metrics\": [{\"name\": \"a\", \"kind\": \"value\", \"query\": \"up\", \"max\": 1, "
         "\"max_regression\": 1, \"max_regression_pct\": 5}]}",
         "analysis.metrics[0]", "not both"},
        {"{\"metrics\": [{\"name\": \"a\", \"kind\": \"value\", \"query\": \"up\", \"max\": "
         "\"1\"}]}",
         "analysis.metrics[0].max", "number"},
        {"{\"metrics\": [{\"name\": \"a\", \"kind\": \"value\", \"query\": \"up\", \"max\": 1, "
         "\"errors\": \"x\"}]}",
         "analysis.metrics[0]", "unknown field 'errors'"},
        {"{\"metrics\": [{\"name\": \"a\", \"kind\": \"value\", \"query\": "
         "\"up{v=\\\"{{versoin}}\\\", b=\\\"{{haproxy.bakend}}\\\"}\", \"max\": 1}]}",
         "analysis.metrics[0].query", "{{versoin}}, {{haproxy.bakend}}"},
        {"{\"metrics\": [{\"name\": \"a\", \"kind\": \"value\", \"query\": \"up{{\", "
         "\"max\": 1}]}",
         "analysis.metrics[0].query", "without its"},
        {"{\"metrics\": [{\"name\": \"e\", \"kind\": \"ratio\", \"errors\": \"a\", "
         "\"max\": 0.1}]}",
         "analysis.metrics[0].total", "PromQL"},
        {"{\"metrics\": [{\"name\": \"e\", \"kind\": \"ratio\", \"errors\": \"a\", "
         "\"total\": \"b\"}]}",
         "analysis.metrics[0]", "max_increase"},
        {"{\"metrics\": [{\"name\": \"e\", \"kind\": \"ratio\", \"errors\": \"a\", "
         "\"total\": \"b\", \"max\": 1.5}]}",
         "analysis.metrics[0].max", "0 to 1"},
        {"{\"metrics\": [{\"name\": \"e\", \"kind\": \"ratio\", \"errors\": \"a\", "
         "\"total\": \"b\", \"max\": 0.1, \"confidence\": 1}]}",
         "analysis.metrics[0].confidence", "0.5"},
        {"{\"metrics\": [{\"name\": \"e\", \"kind\": \"ratio\", \"errors\": \"a\", "
         "\"total\": \"b\", \"max\": 0.1, \"min_total\": -1}]}",
         "analysis.metrics[0].min_total", "number"},
        {"{\"metrics\": [{\"name\": \"e\", \"kind\": \"ratio\", \"errors\": \"a\", "
         "\"total\": \"b\", \"max\": 0.1},"
         " {\"name\": \"e\", \"kind\": \"value\", \"query\": \"up\", \"max\": 1}]}",
         "analysis.metrics[1].name", "two metrics"},
    };
    size_t bad = 0;

    (void)state;
    for (size_t i = 0; i < N_ELEMS(cases); i++) {
        struct gate_analysis a;
        struct mg_error err = {0};
        json_t *j = load(cases[i].json);
        enum mg_code rc;

        memset(&a, 0x5a, sizeof(a));
        rc = gate_analysis_parse(j, &a, &err);
        json_decref(j);
        if (rc != MG_EINVAL || strcmp(err.field, cases[i].field) != 0 ||
            strstr(err.message, cases[i].says) == NULL) {
            print_error("case %zu %s: rc %d field '%s' message '%s'; want field '%s' saying "
                        "'%s'\n",
                        i, cases[i].json, rc, err.field, err.message, cases[i].field,
                        cases[i].says);
            bad++;
        }
        if (((unsigned char *)&a)[0] != 0x5a) {
            print_error("case %zu: a refused analysis was written out\n", i);
            bad++;
        }
    }
    /* Through the policy: the field keeps its path. */
    {
        struct gate_policy p;
        struct mg_error err = {0};
        json_t *j = load("{\"analysis\": {\"metrics\": [{\"name\": \"a\", \"kind\": \"value\", "
                         "\"query\": \"up\"}]}}");

        if (gate_policy_parse(j, &p, &err) != MG_EINVAL ||
            strcmp(err.field, "analysis.metrics[0]") != 0) {
            print_error("policy: field '%s'\n", err.field);
            bad++;
        }
        json_decref(j);
    }
    if (bad)
        fail_msg("%zu of %zu cases wrong", bad, N_ELEMS(cases));
}

static void test_expand(void **state)
{
    struct gate_placeholders v = {.model = "fraud",
                                  .alias = "production",
                                  .version = "7",
                                  .interval = "10s",
                                  .haproxy_backend = "be_fraud_production",
                                  .haproxy_server = "v7",
                                  .nginx_upstream = NULL};
    struct gate_placeholders evil = {
        .model = "a\"b\\c\nd", .alias = "x", .version = "1", .interval = "1s"};
    struct mg_error err = {0};
    char out[256], small[16];

    (void)state;
    assert_int_equal(gate_analysis_expand("sum(rate(x{model=\"{{model}}\",alias=\"{{alias}}\","
                                          "v=\"{{version}}\"}[{{interval}}]))",
                                          &v, out, sizeof(out), &err),
                     MG_OK);
    assert_string_equal(out, "sum(rate(x{model=\"fraud\",alias=\"production\",v=\"7\"}[10s]))");
    assert_int_equal(gate_analysis_expand("haproxy_server_http_responses_total{proxy=\"{{haproxy."
                                          "backend}}\",server=\"{{haproxy.server}}\"}",
                                          &v, out, sizeof(out), &err),
                     MG_OK);
    assert_string_equal(out, "haproxy_server_http_responses_total{proxy=\"be_fraud_production\","
                             "server=\"v7\"}");
    /* escaped for a PromQL string literal */
    assert_int_equal(gate_analysis_expand("m{x=\"{{model}}\"}", &evil, out, sizeof(out), &err),
                     MG_OK);
    assert_string_equal(out, "m{x=\"a\\\"b\\\\c\\nd\"}");
    /* a gateway that is not there */
    assert_int_equal(gate_analysis_expand("{{nginx.upstream}}", &v, out, sizeof(out), &err),
                     MG_EINVAL);
    assert_non_null(strstr(err.message, "{{nginx.upstream}}"));
    assert_int_equal(gate_analysis_expand("{{nope}}", &v, out, sizeof(out), &err), MG_EINVAL);
    /* too long */
    assert_int_equal(
        gate_analysis_expand("{{alias}}{{alias}}{{alias}}", &v, small, sizeof(small), &err),
        MG_ETOOBIG);
    assert_string_equal(small, "");
    /* braces that are no placeholder pass through */
    assert_int_equal(gate_analysis_expand("x{a=\"b\"}", &v, out, sizeof(out), &err), MG_OK);
    assert_string_equal(out, "x{a=\"b\"}");
}

/* ---- judgement --------------------------------------------------------- */

#define OK(x)                                                                                      \
    {                                                                                              \
        GATE_SAMPLE_OK, (x), NULL                                                                  \
    }
#define NODATA                                                                                     \
    {                                                                                              \
        GATE_SAMPLE_NODATA, 0, NULL                                                                \
    }
#define ERR                                                                                        \
    {                                                                                              \
        GATE_SAMPLE_ERROR, 0, "Prometheus timed out"                                               \
    }
#define P GATE_VERDICT_PASSED
#define F GATE_VERDICT_FAILED
#define I GATE_VERDICT_INCONCLUSIVE

static void test_judge_value_table(void **state)
{
    /* lat: max 500, +20 % over the baseline; score: min 0.9, -0.05 under the baseline */
    struct gate_analysis_metric lat = {.name = "lat",
                                       .kind = GATE_METRIC_VALUE,
                                       .has_max = true,
                                       .max = 500,
                                       .has_max_regression_pct = true,
                                       .max_regression_pct = 20};
    struct gate_analysis_metric score = {.name = "score",
                                         .kind = GATE_METRIC_VALUE,
                                         .has_min = true,
                                         .min = 0.9,
                                         .has_max_regression = true,
                                         .max_regression = 0.05};
    struct gate_analysis_metric abs_only = {
        .name = "abs", .kind = GATE_METRIC_VALUE, .has_max = true, .max = 10};
    static const struct gate_sample nan_s = {GATE_SAMPLE_OK, NAN, NULL};
    static const struct gate_sample inf_s = {GATE_SAMPLE_OK, INFINITY, NULL};
    const struct {
        const struct gate_analysis_metric *m;
        struct gate_sample cand;
        bool has_base;
        struct gate_sample base;
        enum gate_verdict want;
        const char *says;
    } cases[] = {
        {&lat, OK(100), true, OK(100), P, "within"},
        {&lat, OK(120), true, OK(100), P, "within"},       /* on the bound */
        {&lat, OK(120.5), true, OK(100), F, "over 120"},   /* past +20 % */
        {&lat, OK(501), true, OK(480), F, "over max 500"}, /* absolute first */
        {&lat, OK(300), false, NODATA, P, "no baseline"},  /* no baseline version */
        {&lat, OK(300), true, NODATA, I, "no data for the baseline"},
        {&lat, OK(300), true, ERR, I, "timed out"},
        {&lat, NODATA, true, OK(100), I, "no data for the candidate"},
        {&lat, ERR, true, OK(100), I, "timed out"},
        {&lat, nan_s, true, OK(100), I, "not a finite"},
        {&lat, inf_s, true, OK(100), I, "not a finite"},
        {&lat, OK(700), true, nan_s, F, "max"}, /* a bad candidate fails without a baseline */
        {&score, OK(0.95), true, OK(0.97), P, "within"},
        {&score, OK(0.91), true, OK(0.97), F, "under 0.92 (baseline 0.97 - 0.05)"},
        {&score, OK(0.89), true, OK(0.9), F, "under min"},
        {&abs_only, OK(9), true, NODATA, P, "within"}, /* no relative bound: no baseline needed */
        {&abs_only, OK(11), true, NODATA, F, "over max 10"},
    };
    size_t bad = 0;

    (void)state;
    for (size_t i = 0; i < N_ELEMS(cases); i++) {
        struct gate_metric_result r;

        gate_analysis_judge_value(cases[i].m, &cases[i].cand, cases[i].has_base, &cases[i].base,
                                  &r);
        if (r.verdict != cases[i].want || strstr(r.detail, cases[i].says) == NULL) {
            print_error("case %zu: %s '%s', want %s saying '%s'\n", i, gate_verdict_name(r.verdict),
                        r.detail, gate_verdict_name(cases[i].want), cases[i].says);
            bad++;
        }
    }
    if (bad)
        fail_msg("%zu of %zu cases wrong", bad, N_ELEMS(cases));
}

static void test_two_proportion_table(void **state)
{
    static const struct {
        double e1, n1, e2, n2, conf;
        bool want;
    } cases[] = {
        {50, 1000, 10, 1000, 0.95, true},  /* 5 % against 1 %: clear */
        {2, 40, 1, 2000, 0.95, true},      /* 5 % of 40 against 0.05 %: already clear */
        {1, 60, 50, 10000, 0.95, false},   /* one error at low traffic against 0.5 %: not sure */
        {3, 60, 20, 2000, 0.95, true},     /* 5 % of 60 against 1 % of 2000: z ≈ 2.9 */
        {10, 100, 10, 1000, 0.95, true},   /* 10 % of 100 against 1 % of 1000 */
        {10, 1000, 10, 1000, 0.95, false}, /* equal */
        {5, 1000, 50, 1000, 0.95, false},  /* lower: one-sided */
        {0, 1000, 0, 1000, 0.95, false},   /* no errors at all */
        {1000, 1000, 1000, 1000, 0.95, false}, /* all errors: nothing to tell */
        {10, 0, 10, 1000, 0.95, false},        /* no candidate traffic */
        {10, 100, 0, 0, 0.95, false},          /* no baseline traffic */
        {15, 100, 5, 100, 0.95, true},         /* 15 % against 5 %, z ≈ 2.12 > 1.645 */
        {15, 100, 5, 100, 0.99, false},        /* ... but not at 99 % (z < 2.33) */
        {12, 100, 5, 100, 0.95, false},        /* 12 % against 5 % of 100 each: z ≈ 1.52 */
        {1e9, 1e9, 0, 1, 0.95, true},          /* extremes stay finite */
        {NAN, 100, 1, 100, 0.95, false},
    };
    size_t bad = 0;

    (void)state;
    for (size_t i = 0; i < N_ELEMS(cases); i++) {
        double pv = -1;
        bool got = gate_two_proportion_higher(cases[i].e1, cases[i].n1, cases[i].e2, cases[i].n2,
                                              cases[i].conf, &pv);
        if (got != cases[i].want || !(pv >= 0 && pv <= 1) || (got && !(pv < 1 - cases[i].conf))) {
            print_error("case %zu: %d (p %g), want %d\n", i, got, pv, cases[i].want);
            bad++;
        }
    }
    if (bad)
        fail_msg("%zu of %zu cases wrong", bad, N_ELEMS(cases));
}

static void test_judge_ratio_table(void **state)
{
    /* error_rate: max 2 %, max +0.5 % over the baseline at 95 %, at least 50 requests */
    struct gate_analysis_metric er = {.name = "error_rate",
                                      .kind = GATE_METRIC_RATIO,
                                      .has_max = true,
                                      .max = 0.02,
                                      .has_max_increase = true,
                                      .max_increase = 0.005,
                                      .min_total = 50,
                                      .confidence = 0.95};
    struct gate_analysis_metric rel = er;
    const struct {
        const struct gate_analysis_metric *m;
        struct gate_sample ce, ct;
        bool has_base;
        struct gate_sample be, bt;
        enum gate_verdict want;
        const char *says;
    } cases[] = {
        {&er, OK(1), OK(1000), true, OK(10), OK(10000), P, "within"},
        {&er, NODATA, OK(1000), true, NODATA, OK(10000), P, "within"}, /* no 5xx series */
        {&er, OK(50), OK(1000), true, OK(10), OK(10000), F, "over max 0.02"},
        {&er, OK(1), OK(49), true, OK(10), OK(10000), I, "too few requests"},
        {&er, OK(0), NODATA, true, OK(10), OK(10000), I, "no data for the candidate's total"},
        {&er, ERR, OK(1000), true, OK(10), OK(10000), I, "timed out"},
        {&er, OK(1), ERR, true, OK(10), OK(10000), I, "timed out"},
        /* 1.5 % against 0.1 %: over +0.5 % and significant */
        {&rel, OK(15), OK(1000), true, OK(10), OK(10000), F, "significant"},
        /* one error of 60 (1.7 %) against 0.5 %: over +0.5 %, but one error proves little */
        {&rel, OK(1), OK(60), true, OK(50), OK(10000), P, "not significantly"},
        /* no baseline version: the absolute max alone */
        {&rel, OK(15), OK(1000), false, NODATA, NODATA, P, "no baseline"},
        /* baseline without data: max_increase cannot be judged */
        {&rel, OK(15), OK(1000), true, NODATA, NODATA, I, "needed for max_increase"},
        {&rel, OK(15), OK(1000), true, OK(0), OK(0), I, "no requests to the baseline"},
        /* extrapolated errors above the total are clamped: 100 % > 2 % */
        {&er, OK(1200), OK(1000), true, OK(10), OK(10000), F, "over max"},
        {&er, OK(-1), OK(1000), true, OK(10), OK(10000), I, "negative"},
    };
    size_t bad = 0;

    (void)state;
    rel.has_max = false;
    for (size_t i = 0; i < N_ELEMS(cases); i++) {
        struct gate_metric_result r;

        gate_analysis_judge_ratio(cases[i].m, &cases[i].ce, &cases[i].ct, cases[i].has_base,
                                  &cases[i].be, &cases[i].bt, &r);
        if (r.verdict != cases[i].want || strstr(r.detail, cases[i].says) == NULL) {
            print_error("case %zu: %s '%s', want %s saying '%s'\n", i, gate_verdict_name(r.verdict),
                        r.detail, gate_verdict_name(cases[i].want), cases[i].says);
            bad++;
        }
        if (r.verdict == F && !(r.candidate >= 0 && r.candidate <= 1)) {
            print_error("case %zu: failed without the candidate's rate (%g)\n", i, r.candidate);
            bad++;
        }
    }
    if (bad)
        fail_msg("%zu of %zu cases wrong", bad, N_ELEMS(cases));
}

static void test_interval_verdict_table(void **state)
{
    static const struct {
        enum gate_verdict m[3];
        size_t n;
        enum gate_verdict want;
    } cases[] = {
        {{P}, 0, P},       {{P, P, P}, 3, P}, {{P, I, P}, 3, I},
        {{I, F, P}, 3, F}, {{F}, 1, F},       {{I, I}, 2, I},
    };
    size_t bad = 0;

    (void)state;
    for (size_t i = 0; i < N_ELEMS(cases); i++) {
        if (gate_interval_verdict(cases[i].m, cases[i].n) != cases[i].want) {
            print_error("case %zu wrong\n", i);
            bad++;
        }
    }
    assert_string_equal(gate_verdict_name(I), "inconclusive");
    {
        enum gate_verdict v;
        assert_true(gate_verdict_parse("failed", &v) && v == F);
        assert_false(gate_verdict_parse("pass", &v));
        assert_false(gate_verdict_parse(NULL, &v));
    }
    if (bad)
        fail_msg("%zu cases wrong", bad);
}

#define STEPS 3 /* enum promo_phase PROMO_PHASE_STEPS */
#define SHADOW 1

static void test_streaks_table(void **state)
{
    static const struct {
        struct gate_interval h[8]; /* newest first */
        size_t n;
        int phase, step;
        struct gate_streaks want;
    } cases[] = {
        {{{P, STEPS, 0}}, 0, STEPS, 0, {0, 0, 0}},
        {{{P, STEPS, 0}, {F, STEPS, 0}}, 2, STEPS, 0, {0, 0, 1}},
        {{{F, STEPS, 0}, {F, STEPS, 0}, {P, STEPS, 0}}, 3, STEPS, 0, {2, 0, 1}},
        /* an inconclusive interval neither ends nor grows a failure streak */
        {{{F, STEPS, 0}, {I, STEPS, 0}, {F, STEPS, 0}, {P, STEPS, 0}}, 4, STEPS, 0, {2, 0, 1}},
        {{{I, STEPS, 0}, {I, STEPS, 0}, {F, STEPS, 0}}, 3, STEPS, 0, {1, 2, 0}},
        {{{I, STEPS, 1}, {I, STEPS, 1}, {I, STEPS, 0}, {P, STEPS, 0}}, 4, STEPS, 1, {0, 3, 0}},
        /* passes of an earlier stage do not count for this one */
        {{{I, STEPS, 1}, {P, STEPS, 0}, {P, SHADOW, -1}}, 3, STEPS, 1, {0, 1, 0}},
        {{{P, STEPS, 1}, {I, STEPS, 1}, {P, STEPS, 0}}, 3, STEPS, 1, {0, 0, 1}},
        {{{P, SHADOW, -1}, {P, SHADOW, -1}}, 2, SHADOW, -1, {0, 0, 2}},
    };
    size_t bad = 0;

    (void)state;
    for (size_t i = 0; i < N_ELEMS(cases); i++) {
        struct gate_streaks s;

        gate_analysis_streaks(cases[i].h, cases[i].n, cases[i].phase, cases[i].step, &s);
        if (s.consecutive_failures != cases[i].want.consecutive_failures ||
            s.consecutive_inconclusive != cases[i].want.consecutive_inconclusive ||
            s.passed_in_stage != cases[i].want.passed_in_stage) {
            print_error("case %zu: %d %d %d, want %d %d %d\n", i, s.consecutive_failures,
                        s.consecutive_inconclusive, s.passed_in_stage,
                        cases[i].want.consecutive_failures, cases[i].want.consecutive_inconclusive,
                        cases[i].want.passed_in_stage);
            bad++;
        }
    }
    if (bad)
        fail_msg("%zu of %zu cases wrong", bad, N_ELEMS(cases));
}

static void test_decide_and_may_end_table(void **state)
{
    struct gate_analysis hold = {.enabled = true,
                                 .failure_limit = 2,
                                 .inconclusive_limit = 3,
                                 .on_inconclusive = GATE_ON_INCONCLUSIVE_HOLD};
    struct gate_analysis rollback = hold, off = {.enabled = false};
    const struct {
        const struct gate_analysis *a;
        struct gate_streaks s;
        enum gate_analysis_action want;
    } decide[] = {
        {&hold, {0, 0, 1}, GATE_ANALYSIS_CONTINUE},
        {&hold, {1, 0, 0}, GATE_ANALYSIS_CONTINUE},
        {&hold, {2, 0, 0}, GATE_ANALYSIS_ROLLBACK_FAILED},
        {&hold, {3, 5, 0}, GATE_ANALYSIS_ROLLBACK_FAILED},
        {&hold, {0, 2, 0}, GATE_ANALYSIS_CONTINUE},
        {&hold, {0, 3, 0}, GATE_ANALYSIS_INCONCLUSIVE_HOLD},
        {&hold, {0, 4, 0}, GATE_ANALYSIS_CONTINUE}, /* said once */
        {&rollback, {0, 3, 0}, GATE_ANALYSIS_ROLLBACK_INCONCLUSIVE},
        {&rollback, {0, 9, 0}, GATE_ANALYSIS_ROLLBACK_INCONCLUSIVE},
        {&off, {9, 9, 0}, GATE_ANALYSIS_CONTINUE},
    };
    const struct {
        const struct gate_analysis *a;
        struct gate_streaks s;
        int64_t now, due;
        bool want;
    } may_end[] = {
        {&hold, {0, 0, 1}, 1000, 1000, true},
        {&hold, {0, 0, 1}, 999, 1000, false},  /* time first */
        {&hold, {0, 0, 0}, 5000, 1000, false}, /* no passed interval: missing data never ends */
        {&hold, {0, 4, 0}, 5000, 1000, false},
        {&hold, {1, 0, 3}, 5000, 1000, false}, /* an open failure streak */
        {&hold, {0, 2, 1}, 5000, 1000, false}, /* passed once, but no data now: wait */
        {&hold, {0, 0, 1}, 5000, 0, false},    /* no timer: a deployer advances */
        {&off, {0, 0, 0}, 1000, 1000, true},   /* no analysis: time alone */
        {&off, {0, 0, 0}, 999, 1000, false},
    };
    size_t bad = 0;

    (void)state;
    rollback.on_inconclusive = GATE_ON_INCONCLUSIVE_ROLLBACK;
    for (size_t i = 0; i < N_ELEMS(decide); i++) {
        if (gate_analysis_decide(decide[i].a, &decide[i].s) != decide[i].want) {
            print_error("decide case %zu: %d, want %d\n", i,
                        (int)gate_analysis_decide(decide[i].a, &decide[i].s), (int)decide[i].want);
            bad++;
        }
    }
    for (size_t i = 0; i < N_ELEMS(may_end); i++) {
        if (gate_analysis_may_end(may_end[i].a, &may_end[i].s, may_end[i].now, may_end[i].due) !=
            may_end[i].want) {
            print_error("may_end case %zu wrong\n", i);
            bad++;
        }
    }
    if (bad)
        fail_msg("%zu cases wrong", bad);
}

/* The rollout state machine's side: a tick that analysis holds waits; an analysis event
 * rolls back to the baseline at 100 (or only records itself); not outside a rollout. */
static void test_rollout_events(void **state)
{
    struct gate_policy pol;
    struct promo cur, next;
    struct promo_actions acts;
    struct promo_event ev;
    struct mg_error err = {0};

    (void)state;
    gate_policy_empty(&pol);
    pol.steps[0] = 10;
    pol.steps[1] = 100;
    pol.nsteps = 2;
    pol.bake_seconds = 1;
    promo_init(&cur, &pol, 5, 1);
    cur.state = PROMO_ROLLING_OUT;
    cur.phase = PROMO_PHASE_STEPS;
    cur.step_index = 0;
    cur.weight = 10;
    cur.next_step_at = 1000;

    memset(&ev, 0, sizeof(ev));
    ev.kind = PROMO_EV_TICK;
    ev.analysis_wait = true;
    assert_int_equal(promo_step(&cur, &ev, 5000, &next, &acts, &err), MG_OK);
    assert_false(acts.set_routes);
    assert_int_equal(next.step_index, 0);
    ev.analysis_wait = false;
    assert_int_equal(promo_step(&cur, &ev, 5000, &next, &acts, &err), MG_OK);
    assert_true(acts.set_routes);
    assert_int_equal(next.state, PROMO_SUCCEEDED);

    memset(&ev, 0, sizeof(ev));
    ev.kind = PROMO_EV_ANALYSIS;
    ev.analysis_rollback = true;
    ev.analysis_event = "analysis.failed";
    ev.reason = "metric error_rate: candidate 0.05 over max 0.02";
    assert_int_equal(promo_step(&cur, &ev, 5000, &next, &acts, &err), MG_OK);
    assert_int_equal(next.state, PROMO_ROLLED_BACK);
    assert_true(acts.set_routes && acts.restore);
    assert_int_equal(acts.nroutes, 1);
    assert_int_equal(acts.routes[0].version, 1);
    assert_int_equal(acts.routes[0].weight, 100);
    assert_string_equal(acts.event, "analysis.failed");
    assert_non_null(strstr(acts.detail, "error_rate"));

    ev.analysis_rollback = false;
    ev.analysis_event = "analysis.inconclusive";
    assert_int_equal(promo_step(&cur, &ev, 5000, &next, &acts, &err), MG_OK);
    assert_int_equal(next.state, PROMO_ROLLING_OUT);
    assert_false(acts.set_routes);
    assert_string_equal(acts.event, "analysis.inconclusive");

    cur.state = PROMO_AWAITING_APPROVAL;
    assert_int_equal(promo_step(&cur, &ev, 5000, &next, &acts, &err), MG_ECONFLICT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_example),
        cmocka_unit_test(test_parse_defaults_and_policy),
        cmocka_unit_test(test_parse_invalid_table),
        cmocka_unit_test(test_expand),
        cmocka_unit_test(test_judge_value_table),
        cmocka_unit_test(test_two_proportion_table),
        cmocka_unit_test(test_judge_ratio_table),
        cmocka_unit_test(test_interval_verdict_table),
        cmocka_unit_test(test_streaks_table),
        cmocka_unit_test(test_decide_and_may_end_table),
        cmocka_unit_test(test_rollout_events),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
