/*
 * policy.c - see policy.h.
 */
#include "policy.h"
#include "schema.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The shortest text that reads back as the same double (15, 16 or 17 digits): a gate's
 * "expected" and "detail" never show a value other than the one compared. */
static const char *dbl(double v, char out[32])
{
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(out, 32, "%.*g", prec, v);
        if (strtod(out, NULL) == v)
            break;
    }
    return out;
}

static const char *const op_names[] = {">=", ">", "<=", "<", "="};

const char *gate_op_name(enum gate_op op)
{
    return op_names[op];
}

bool gate_op_parse(const char *s, enum gate_op *op)
{
    size_t i;

    for (i = 0; s && i < sizeof(op_names) / sizeof(op_names[0]); i++) {
        if (strcmp(s, op_names[i]) == 0) {
            *op = (enum gate_op)i;
            return true;
        }
    }
    return false;
}

void gate_policy_empty(struct gate_policy *p)
{
    memset(p, 0, sizeof(*p));
    p->steps[0] = 100;
    p->nsteps = 1;
    p->auto_advance = true;
    p->gpu = GATE_GPU_NONE;
}

static bool only_keys(const json_t *o, const char *const *allowed, const char **bad)
{
    const char *k;
    json_t *v;
    size_t i;

    json_object_foreach((json_t *)o, k, v)
    {
        bool ok = false;
        for (i = 0; allowed[i] && !ok; i++)
            ok = strcmp(k, allowed[i]) == 0;
        if (!ok) {
            *bad = k;
            return false;
        }
    }
    return true;
}

static bool metric_name_ok(const char *s)
{
    size_t n = strlen(s), i;

    if (n == 0 || n > 128)
        return false;
    for (i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              strchr("_.:/-", c) != NULL))
            return false;
    }
    return true;
}

static enum mg_code parse_threshold(const json_t *t, size_t i, struct gate_threshold *out,
                                    struct mg_error *err)
{
    static const char *const keys[] = {
        "metric", "op", "value", "baseline", "max_regression", "max_regression_pct", NULL};
    char field[64];
    const char *bad, *metric, *op;
    json_t *v;

    memset(out, 0, sizeof(*out));
    snprintf(field, sizeof(field), "thresholds[%zu]", i);
    if (!json_is_object(t))
        return mg_fail(err, MG_EINVAL, field, "%s must be an object", field);
    if (!only_keys(t, keys, &bad))
        return mg_fail(err, MG_EINVAL, field, "%s has an unknown field '%.64s'", field, bad);
    metric = json_string_value(json_object_get(t, "metric"));
    if (metric == NULL || !metric_name_ok(metric))
        return mg_fail(err, MG_EINVAL, field,
                       "%s.metric must name a metric (^[A-Za-z0-9_.:/-]{1,128}$)", field);
    snprintf(out->metric, sizeof(out->metric), "%s", metric);
    op = json_string_value(json_object_get(t, "op"));
    if (!gate_op_parse(op, &out->op))
        return mg_fail(err, MG_EINVAL, field, "%s.op must be one of >= > <= < =", field);
    v = json_object_get(t, "baseline");
    if (v && !json_is_boolean(v))
        return mg_fail(err, MG_EINVAL, field, "%s.baseline must be true or false", field);
    out->baseline = json_is_true(v);
    v = json_object_get(t, "value");
    if (!out->baseline) {
        if (!json_is_number(v) || !isfinite(json_number_value(v)))
            return mg_fail(err, MG_EINVAL, field,
                           "%s.value must be a finite number (or set baseline: true)", field);
        if (json_object_get(t, "max_regression") || json_object_get(t, "max_regression_pct"))
            return mg_fail(err, MG_EINVAL, field,
                           "%s: max_regression and max_regression_pct apply only with "
                           "baseline: true",
                           field);
        out->value = json_number_value(v);
        return MG_OK;
    }
    if (v)
        return mg_fail(err, MG_EINVAL, field,
                       "%s: a baseline threshold takes max_regression or "
                       "max_regression_pct, not value",
                       field);
    v = json_object_get(t, "max_regression");
    if (v) {
        if (!json_is_number(v) || !isfinite(json_number_value(v)) || json_number_value(v) < 0)
            return mg_fail(err, MG_EINVAL, field, "%s.max_regression must be a number >= 0", field);
        out->has_regression = true;
        out->max_regression = json_number_value(v);
    }
    v = json_object_get(t, "max_regression_pct");
    if (v) {
        if (!json_is_number(v) || !isfinite(json_number_value(v)) || json_number_value(v) < 0 ||
            json_number_value(v) > 100)
            return mg_fail(err, MG_EINVAL, field,
                           "%s.max_regression_pct must be a number from 0 to 100", field);
        out->has_regression_pct = true;
        out->max_regression_pct = json_number_value(v);
    }
    if (out->has_regression && out->has_regression_pct)
        return mg_fail(err, MG_EINVAL, field,
                       "%s: give max_regression or max_regression_pct, not both", field);
    return MG_OK;
}

#define PHASE_SECONDS_MAX (7 * 24 * 3600)

/* rollout.internal: {"header","value","seconds"}, or null for none. */
static enum mg_code parse_internal(const json_t *v, struct gate_policy *out, struct mg_error *err)
{
    static const char *const keys[] = {"header", "value", "seconds", NULL};
    json_t *h = json_object_get(v, "header"), *val = json_object_get(v, "value"),
           *sec = json_object_get(v, "seconds");
    const char *bad;

    if (json_is_null(v))
        return MG_OK;
    if (!json_is_object(v))
        return mg_fail(err, MG_EINVAL, "rollout.internal",
                       "rollout.internal must be {\"header\", \"value\", \"seconds\"} or null");
    if (!only_keys(v, keys, &bad))
        return mg_fail(err, MG_EINVAL, "rollout.internal",
                       "rollout.internal has an unknown field '%.64s'", bad);
    if (!json_is_string(h) || !gate_header_name_ok(json_string_value(h), json_string_length(h)))
        return mg_fail(err, MG_EINVAL, "rollout.internal.header",
                       "rollout.internal.header must be a lowercase HTTP header name (1 to %d of "
                       "a-z 0-9 !#$%%&'*+-.^_`|~), such as x-canary",
                       GATE_HEADER_NAME_MAX);
    if (!json_is_string(val) ||
        !gate_header_value_ok(json_string_value(val), json_string_length(val)))
        return mg_fail(err, MG_EINVAL, "rollout.internal.value",
                       "rollout.internal.value must be 1 to %d printable ASCII characters without "
                       "spaces, '\"', '\\', ';', '{' or '}'",
                       GATE_HEADER_VALUE_MAX);
    if (!json_is_integer(sec) || json_integer_value(sec) < 1 ||
        json_integer_value(sec) > PHASE_SECONDS_MAX)
        return mg_fail(err, MG_EINVAL, "rollout.internal.seconds",
                       "rollout.internal.seconds must be an integer from 1 to %d: how long only "
                       "requests with the header reach the candidate",
                       PHASE_SECONDS_MAX);
    out->has_internal = true;
    snprintf(out->internal_header, sizeof(out->internal_header), "%s", json_string_value(h));
    snprintf(out->internal_value, sizeof(out->internal_value), "%s", json_string_value(val));
    out->internal_seconds = json_integer_value(sec);
    return MG_OK;
}

static enum mg_code parse_rollout(const json_t *r, struct gate_policy *out, struct mg_error *err)
{
    static const char *const keys[] = {"steps",          "bake_seconds", "auto_advance",
                                       "shadow_seconds", "internal",     NULL};
    const char *bad;
    json_t *steps, *v;
    size_t i;

    if (!json_is_object(r))
        return mg_fail(err, MG_EINVAL, "rollout", "rollout must be an object");
    if (!only_keys(r, keys, &bad))
        return mg_fail(err, MG_EINVAL, "rollout", "rollout has an unknown field '%.64s'", bad);
    steps = json_object_get(r, "steps");
    if (steps) {
        if (!json_is_array(steps) || json_array_size(steps) == 0 ||
            json_array_size(steps) > GATE_MAX_STEPS)
            return mg_fail(err, MG_EINVAL, "rollout.steps",
                           "rollout.steps must be 1 to %d increasing percentages ending at 100",
                           GATE_MAX_STEPS);
        out->nsteps = json_array_size(steps);
        json_array_foreach(steps, i, v)
        {
            json_int_t w = json_is_integer(v) ? json_integer_value(v) : -1;
            if (w < 1 || w > 100 || (i > 0 && w <= out->steps[i - 1]))
                return mg_fail(err, MG_EINVAL, "rollout.steps",
                               "rollout.steps must be increasing integers from 1 to 100");
            out->steps[i] = (int)w;
        }
        if (out->steps[out->nsteps - 1] != 100)
            return mg_fail(err, MG_EINVAL, "rollout.steps", "rollout.steps must end at 100");
    }
    v = json_object_get(r, "bake_seconds");
    if (v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            json_integer_value(v) > PHASE_SECONDS_MAX)
            return mg_fail(err, MG_EINVAL, "rollout.bake_seconds",
                           "rollout.bake_seconds must be an integer from 0 to 604800");
        out->bake_seconds = json_integer_value(v);
    }
    v = json_object_get(r, "auto_advance");
    if (v) {
        if (!json_is_boolean(v))
            return mg_fail(err, MG_EINVAL, "rollout.auto_advance",
                           "rollout.auto_advance must be a boolean");
        out->auto_advance = json_is_true(v);
    }
    v = json_object_get(r, "shadow_seconds");
    if (v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            json_integer_value(v) > PHASE_SECONDS_MAX)
            return mg_fail(
                err, MG_EINVAL, "rollout.shadow_seconds",
                "rollout.shadow_seconds must be an integer from 0 (no shadow phase) to %d",
                PHASE_SECONDS_MAX);
        out->shadow_seconds = json_integer_value(v);
    }
    v = json_object_get(r, "internal");
    return v ? parse_internal(v, out, err) : MG_OK;
}

static enum mg_code parse_bool(const json_t *j, const char *key, bool *out, struct mg_error *err)
{
    json_t *v = json_object_get(j, key);

    if (v == NULL)
        return MG_OK;
    if (!json_is_boolean(v))
        return mg_fail(err, MG_EINVAL, key, "%s must be true or false", key);
    *out = json_is_true(v);
    return MG_OK;
}

/* approvals.groups: [{"team","min"}], distinct teams, minimums that fit in required. */
static enum mg_code parse_groups(const json_t *groups, struct gate_policy *p, struct mg_error *err)
{
    char field[64];
    json_t *g, *team, *min;
    size_t i, k;

    if (groups == NULL)
        return MG_OK;
    if (!json_is_array(groups) || json_array_size(groups) > GATE_MAX_GROUPS)
        return mg_fail(err, MG_EINVAL, "approvals.groups",
                       "approvals.groups is an array of at most %d {\"team\", \"min\"}",
                       GATE_MAX_GROUPS);
    json_array_foreach(groups, i, g)
    {
        team = json_object_get(g, "team");
        min = json_object_get(g, "min");
        snprintf(field, sizeof(field), "approvals.groups[%zu]", i);
        if (!json_is_object(g) || json_object_size(g) != 2 || !json_is_string(team) ||
            json_string_length(team) == 0 || json_string_length(team) > 63 ||
            !json_is_integer(min) || json_integer_value(min) < 1 ||
            json_integer_value(min) > GATE_MAX_APPROVALS)
            return mg_fail(
                err, MG_EINVAL, field,
                "each group is {\"team\": \"<team name>\", \"min\": N} with N from 1 to %d",
                GATE_MAX_APPROVALS);
        for (k = 0; k < i; k++) {
            if (strcmp(p->groups[k].team, json_string_value(team)) == 0)
                return mg_fail(err, MG_EINVAL, field, "team '%s' has two groups; give it one",
                               json_string_value(team));
        }
        snprintf(p->groups[i].team, sizeof(p->groups[i].team), "%s", json_string_value(team));
        p->groups[i].min = (int)json_integer_value(min);
    }
    p->ngroups = json_array_size(groups);
    /* groups may overlap (one approver in two teams): only each min must fit in required */
    for (i = 0; i < p->ngroups; i++) {
        if (p->groups[i].min > p->approvals_required)
            return mg_fail(err, MG_EINVAL, "approvals.groups",
                           "group '%s' asks for %d approvals but only %d are required; raise "
                           "approvals.required",
                           p->groups[i].team, p->groups[i].min, p->approvals_required);
    }
    return MG_OK;
}

enum mg_code gate_policy_parse(const json_t *j, struct gate_policy *out, struct mg_error *err)
{
    static const char *const keys[] = {"thresholds",
                                       "approvals",
                                       "require_signature",
                                       "require_pinned_image",
                                       "require_registered_datasets",
                                       "require_no_withdrawn_datasets",
                                       "schema",
                                       "smoke",
                                       "scan",
                                       "rollout",
                                       "analysis",
                                       NULL};
    struct gate_policy p;
    const char *bad;
    json_t *v, *t;
    size_t i;
    enum mg_code rc;

    gate_policy_empty(&p);
    if (!json_is_object(j))
        return mg_fail(err, MG_EINVAL, NULL, "the policy must be a JSON object");
    if (!only_keys(j, keys, &bad))
        return mg_fail(err, MG_EINVAL, bad, "unknown policy field '%.64s'", bad);
    v = json_object_get(j, "thresholds");
    if (v) {
        if (!json_is_array(v) || json_array_size(v) > GATE_MAX_THRESHOLDS)
            return mg_fail(err, MG_EINVAL, "thresholds",
                           "thresholds must be an array of at most %d", GATE_MAX_THRESHOLDS);
        json_array_foreach(v, i, t)
        {
            if ((rc = parse_threshold(t, i, &p.thresholds[i], err)) != MG_OK)
                return rc;
        }
        p.nthresholds = json_array_size(v);
    }
    v = json_object_get(j, "approvals");
    if (v) {
        json_t *req = json_object_get(v, "required"), *groups = json_object_get(v, "groups");
        size_t want = 1 + (groups != NULL);

        if (!json_is_object(v) || json_object_size(v) != want || !json_is_integer(req) ||
            json_integer_value(req) < 0 || json_integer_value(req) > GATE_MAX_APPROVALS)
            return mg_fail(err, MG_EINVAL, "approvals.required",
                           "approvals must be {\"required\": N, \"groups\"?: [...]} with N from 0 "
                           "to %d",
                           GATE_MAX_APPROVALS);
        p.approvals_required = (int)json_integer_value(req);
        if ((rc = parse_groups(groups, &p, err)) != MG_OK)
            return rc;
    }
    if ((rc = parse_bool(j, "require_signature", &p.require_signature, err)) != MG_OK ||
        (rc = parse_bool(j, "require_pinned_image", &p.require_pinned_image, err)) != MG_OK ||
        (rc = parse_bool(j, "require_registered_datasets", &p.require_registered_datasets, err)) !=
            MG_OK ||
        (rc = parse_bool(j, "require_no_withdrawn_datasets", &p.require_no_withdrawn_datasets,
                         err)) != MG_OK)
        return rc;
    v = json_object_get(j, "schema");
    if (v) {
        static const char *const ckeys[] = {"compatible_with_baseline", NULL};
        if (!json_is_object(v) || !only_keys(v, ckeys, &bad) ||
            parse_bool(v, "compatible_with_baseline", &p.schema_compatible, err) != MG_OK)
            return mg_fail(err, MG_EINVAL, "schema",
                           "schema must be {\"compatible_with_baseline\": bool}");
    }
    v = json_object_get(j, "smoke");
    if (v) {
        static const char *const skeys[] = {"required", "gpu", NULL};
        const char *gpu;
        if (!json_is_object(v) || !only_keys(v, skeys, &bad))
            return mg_fail(err, MG_EINVAL, "smoke",
                           "smoke must be {\"required\": bool, \"gpu\": "
                           "\"required|preferred|none\"}");
        if ((rc = parse_bool(v, "required", &p.smoke_required, err)) != MG_OK)
            return mg_fail(err, MG_EINVAL, "smoke.required",
                           "smoke.required must be true or false");
        gpu = json_string_value(json_object_get(v, "gpu"));
        if (json_object_get(v, "gpu")) {
            if (gpu && strcmp(gpu, "required") == 0)
                p.gpu = GATE_GPU_REQUIRED;
            else if (gpu && strcmp(gpu, "preferred") == 0)
                p.gpu = GATE_GPU_PREFERRED;
            else if (gpu && strcmp(gpu, "none") == 0)
                p.gpu = GATE_GPU_NONE;
            else
                return mg_fail(err, MG_EINVAL, "smoke.gpu",
                               "smoke.gpu must be required, preferred or none");
        }
    }
    v = json_object_get(j, "scan");
    if (v) {
        static const char *const sckeys[] = {"required", NULL};
        if (!json_is_object(v) || !only_keys(v, sckeys, &bad) ||
            parse_bool(v, "required", &p.scan_required, err) != MG_OK)
            return mg_fail(err, MG_EINVAL, "scan", "scan must be {\"required\": bool}");
    }
    v = json_object_get(j, "rollout");
    if (v && (rc = parse_rollout(v, &p, err)) != MG_OK)
        return rc;
    v = json_object_get(j, "analysis");
    if (v && (rc = gate_analysis_parse(v, &p.analysis, err)) != MG_OK)
        return rc;
    *out = p;
    return MG_OK;
}

json_t *gate_policy_to_json(const struct gate_policy *p)
{
    static const char *const gpu[] = {"none", "preferred", "required"};
    json_t *th = json_array(), *steps = json_array(), *t, *appr, *internal, *analysis, *j;
    size_t i;

    for (i = 0; th && i < p->nthresholds; i++) {
        const struct gate_threshold *x = &p->thresholds[i];
        t = json_pack("{s:s, s:s}", "metric", x->metric, "op", gate_op_name(x->op));
        if (t == NULL)
            continue;
        if (x->baseline) {
            json_object_set_new(t, "baseline", json_true());
            if (x->has_regression)
                json_object_set_new(t, "max_regression", json_real(x->max_regression));
            if (x->has_regression_pct)
                json_object_set_new(t, "max_regression_pct", json_real(x->max_regression_pct));
        } else {
            json_object_set_new(t, "value", json_real(x->value));
        }
        json_array_append_new(th, t);
    }
    for (i = 0; steps && i < p->nsteps; i++)
        json_array_append_new(steps, json_integer(p->steps[i]));
    if (p->ngroups > 0) {
        json_t *groups = json_array();

        for (i = 0; groups && i < p->ngroups; i++)
            json_array_append_new(groups, json_pack("{s:s, s:i}", "team", p->groups[i].team, "min",
                                                    p->groups[i].min));
        appr = json_pack("{s:i, s:o}", "required", p->approvals_required, "groups", groups);
    } else {
        appr = json_pack("{s:i}", "required", p->approvals_required);
    }
    internal = p->has_internal
                   ? json_pack("{s:s, s:s, s:I}", "header", p->internal_header, "value",
                               p->internal_value, "seconds", (json_int_t)p->internal_seconds)
                   : json_null();
    analysis = p->analysis.enabled ? gate_analysis_to_json(&p->analysis) : json_null();
    j = json_pack(
        "{s:o, s:o, s:b, s:b, s:b, s:b, s:{s:b}, s:{s:b, s:s}, s:{s:o, s:I, s:b, s:I, s:o}, s:o}",
        "thresholds", th, "approvals", appr, "require_signature", p->require_signature,
        "require_pinned_image", p->require_pinned_image, "require_registered_datasets",
        p->require_registered_datasets, "require_no_withdrawn_datasets",
        p->require_no_withdrawn_datasets, "schema", "compatible_with_baseline",
        p->schema_compatible, "smoke", "required", p->smoke_required, "gpu", gpu[p->gpu], "rollout",
        "steps", steps, "bake_seconds", (json_int_t)p->bake_seconds, "auto_advance",
        p->auto_advance, "shadow_seconds", (json_int_t)p->shadow_seconds, "internal", internal,
        "analysis", analysis);

    /* Only when set: policies written before the scan existed keep their canonical form
     * (and digest). */
    if (j != NULL && p->scan_required)
        json_object_set_new(j, "scan", json_pack("{s:b}", "required", 1));
    return j;
}

/* ---- evaluation ------------------------------------------------------- */

static json_t *gate(const char *name, const char *kind, const char *status, json_t *observed,
                    json_t *expected, const char *detail)
{
    json_t *g = json_pack("{s:s, s:s, s:s}", "name", name, "kind", kind, "status", status);

    if (g == NULL) {
        json_decref(observed);
        json_decref(expected);
        return NULL;
    }
    json_object_set_new(g, "observed", observed ? observed : json_null());
    json_object_set_new(g, "expected", expected ? expected : json_null());
    json_object_set_new(g, "detail", detail ? json_string(detail) : json_null());
    return g;
}

/* A bound computed from a baseline carries binary rounding (100 * 1.13 is
 * 113.00000000000001): values on the bound as a person writes it pass. */
static bool compare_bound(double a, enum gate_op op, double bound)
{
    double tol = 1e-9 * fmax(1.0, fabs(bound));

    switch (op) {
    case GATE_OP_GE:
        return a >= bound - tol;
    case GATE_OP_GT:
        return a > bound + tol; /* strict: on the bound is not past it */
    case GATE_OP_LE:
        return a <= bound + tol;
    case GATE_OP_LT:
        return a < bound - tol;
    case GATE_OP_EQ:
        return fabs(a - bound) <= tol;
    }
    return false;
}

static bool compare(double a, enum gate_op op, double b)
{
    switch (op) {
    case GATE_OP_GE:
        return a >= b;
    case GATE_OP_GT:
        return a > b;
    case GATE_OP_LE:
        return a <= b;
    case GATE_OP_LT:
        return a < b;
    case GATE_OP_EQ:
        return a == b;
    }
    return false;
}

/* A metric as a finite double. */
static bool metric_of(const json_t *metrics, const char *name, double *out)
{
    json_t *v = json_object_get(metrics, name);

    if (!json_is_number(v))
        return false;
    *out = json_number_value(v);
    return true;
}

/*
 * A serving measurement (throughput or cost per thousand requests) of sv into *out. False
 * with *status and detail saying why there is none: pending while a smoke test is on its
 * way, failed when none will come or it measured nothing usable.
 */
static bool serving_of(const struct gate_serving *sv, bool cost, bool smoke_required, double *out,
                       const char **status, char *detail, size_t dn)
{
    const char *what = cost ? GATE_METRIC_COST : GATE_METRIC_THROUGHPUT;
    enum gate_smoke st = sv ? sv->smoke : GATE_SMOKE_NONE;

    *status = "failed";
    if (st != GATE_SMOKE_PASSED) {
        if (st == GATE_SMOKE_QUEUED || st == GATE_SMOKE_RUNNING ||
            (st == GATE_SMOKE_NONE && smoke_required)) {
            *status = "pending";
            snprintf(detail, dn, "waiting for a passed smoke test to measure %s", what);
        } else if (st == GATE_SMOKE_FAILED) {
            snprintf(detail, dn, "no passed smoke test measured %s: the latest one failed", what);
        } else {
            snprintf(detail, dn,
                     "no passed smoke test measured %s: queue one (POST .../smoke-tests) or set "
                     "smoke.required in the policy",
                     what);
        }
        return false;
    }
    if (!sv->has_rps) {
        snprintf(detail, dn,
                 "the smoke test measured no throughput: its output needs throughput_rps or "
                 "latencies_ms");
        return false;
    }
    if (cost && !sv->has_cost) {
        snprintf(detail, dn,
                 "no cost is configured for smoke profile '%.64s': start modelgated with "
                 "--smoke-profile-cost %.64s=COST_PER_HOUR",
                 sv->profile ? sv->profile : "", sv->profile ? sv->profile : "NAME");
        return false;
    }
    *out = cost ? sv->cost_per_1k : sv->rps;
    return true;
}

static json_t *threshold_gate(const struct gate_input *in, const struct gate_threshold *t)
{
    char name[192], expected[128], detail[256], d1[32], d2[32];
    double cand, base, bound;
    bool serving =
        strcmp(t->metric, GATE_METRIC_THROUGHPUT) == 0 || strcmp(t->metric, GATE_METRIC_COST) == 0;
    bool cost = strcmp(t->metric, GATE_METRIC_COST) == 0;
    const char *status;
    bool has_base;

    snprintf(name, sizeof(name), "%s %s %s", t->metric, gate_op_name(t->op),
             t->baseline ? "baseline" : "value");
    if (!t->baseline)
        snprintf(name, sizeof(name), "%s %s %s", t->metric, gate_op_name(t->op), dbl(t->value, d1));
    if (serving) {
        if (!serving_of(in->candidate_serving, cost, in->policy->smoke_required, &cand, &status,
                        detail, sizeof(detail)))
            return gate(name, "threshold", status, NULL, NULL, detail);
    } else if (!metric_of(in->candidate_metrics, t->metric, &cand)) {
        snprintf(detail, sizeof(detail), "the candidate has no metric '%s'", t->metric);
        return gate(name, "threshold", "failed", NULL, NULL, detail);
    }
    if (!isfinite(cand)) {
        snprintf(detail, sizeof(detail), "metric '%s' is not a finite number", t->metric);
        return gate(name, "threshold", "failed", json_real(0), NULL, detail);
    }
    if (!t->baseline) {
        bool ok = compare(cand, t->op, t->value);
        snprintf(expected, sizeof(expected), "%s %s", gate_op_name(t->op), dbl(t->value, d1));
        return gate(name, "threshold", ok ? "passed" : "failed", json_real(cand),
                    json_string(expected), NULL);
    }
    if (serving)
        has_base = in->baseline_version > 0 && serving_of(in->baseline_serving, cost, false, &base,
                                                          &status, detail, sizeof(detail));
    else
        has_base =
            in->baseline_metrics != NULL && metric_of(in->baseline_metrics, t->metric, &base);
    if (!has_base || !isfinite(base))
        return gate(name, "threshold", "passed", json_real(cand), NULL, "no baseline");
    /* Higher-is-better ops allow the candidate to fall by the regression;
     * lower-is-better ops allow it to rise; '=' allows either, by that much. */
    if (t->op == GATE_OP_GE || t->op == GATE_OP_GT) {
        bound = t->has_regression_pct ? base * (1 - t->max_regression_pct / 100)
                                      : base - (t->has_regression ? t->max_regression : 0);
    } else if (t->op == GATE_OP_LE || t->op == GATE_OP_LT) {
        bound = t->has_regression_pct ? base * (1 + t->max_regression_pct / 100)
                                      : base + (t->has_regression ? t->max_regression : 0);
    } else {
        double tol = t->has_regression_pct ? fabs(base) * t->max_regression_pct / 100
                                           : (t->has_regression ? t->max_regression : 0);
        bool ok = fabs(cand - base) <= tol + 1e-9 * fmax(1.0, fabs(base));
        snprintf(expected, sizeof(expected), "within %s of baseline v%lld (%s)", dbl(tol, d1),
                 (long long)in->baseline_version, dbl(base, d2));
        return gate(name, "threshold", ok ? "passed" : "failed", json_real(cand),
                    json_string(expected), NULL);
    }
    snprintf(expected, sizeof(expected), "%s %s", gate_op_name(t->op), dbl(bound, d1));
    snprintf(detail, sizeof(detail), "baseline v%lld has %s", (long long)in->baseline_version,
             dbl(base, d2));
    return gate(name, "threshold", compare_bound(cand, t->op, bound) ? "passed" : "failed",
                json_real(cand), json_string(expected), detail);
}

void gate_approval_tally(const struct gate_policy *p, const struct gate_approval *a, size_t n,
                         bool *rejected, bool *satisfied, int *approved)
{
    size_t i, j;

    *rejected = false;
    *approved = 0;
    for (i = 0; i < n; i++) {
        bool repeat = false;
        for (j = 0; j < i && !repeat; j++)
            repeat = strcmp(a[i].by, a[j].by) == 0;
        if (repeat)
            continue; /* N distinct reviewers, whatever the input holds */
        if (a[i].approve)
            (*approved)++;
        else
            *rejected = true;
    }
    *satisfied = !*rejected && *approved >= p->approvals_required;
    if (*satisfied && p->ngroups > 0) {
        char missing[160];

        *satisfied = gate_approval_missing(p, a, n, missing, sizeof(missing))[0] == '\0';
    }
}

/* Distinct approvers (approve == true) in a[] whose teams include `team`. */
static int group_count(const char *team, const struct gate_approval *a, size_t n)
{
    size_t i, j, k;
    int count = 0;

    for (i = 0; i < n; i++) {
        bool repeat = false, member = false;

        for (j = 0; j < i && !repeat; j++)
            repeat = strcmp(a[i].by, a[j].by) == 0;
        if (repeat || !a[i].approve)
            continue;
        for (k = 0; k < a[i].nteams && !member; k++)
            member = a[i].teams[k] != NULL && strcmp(a[i].teams[k], team) == 0;
        count += member;
    }
    return count;
}

const char *gate_approval_missing(const struct gate_policy *p, const struct gate_approval *a,
                                  size_t n, char *buf, size_t cap)
{
    size_t g;

    buf[0] = '\0';
    for (g = 0; g < p->ngroups; g++) {
        int have = group_count(p->groups[g].team, a, n);

        if (have < p->groups[g].min) {
            snprintf(buf, cap, "%s: %d of %d", p->groups[g].team, have, p->groups[g].min);
            break;
        }
    }
    return buf;
}

bool gate_same_person(const char *issuer_a, const char *subject_a, const char *issuer_b,
                      const char *subject_b)
{
    if (issuer_a == NULL || subject_a == NULL || issuer_b == NULL || subject_b == NULL)
        return false;
    if (issuer_a[0] == '\0' || subject_a[0] == '\0')
        return false;
    return strcmp(issuer_a, issuer_b) == 0 && strcmp(subject_a, subject_b) == 0;
}

enum mg_code gate_approval_check(const char *by, const char *version_author,
                                 const char *const *contributors, size_t ncontrib,
                                 const char *promotion_creator,
                                 const struct gate_approval *existing, size_t n,
                                 struct mg_error *err)
{
    size_t i;

    if (version_author && strcmp(by, version_author) == 0) {
        mg_fail(err, MG_EINVAL, NULL,
                "'%s' registered this version and cannot approve its promotion; ask "
                "another reviewer",
                by);
        if (err)
            err->code = MG_ESELFAPPROVAL;
        return MG_ESELFAPPROVAL;
    }
    for (i = 0; i < ncontrib; i++) {
        if (contributors[i] != NULL && strcmp(by, contributors[i]) == 0) {
            mg_fail(err, MG_EINVAL, NULL,
                    "'%s' changed this version's gate inputs (appended a metric) and cannot "
                    "approve its promotion; ask another reviewer",
                    by);
            if (err)
                err->code = MG_ESELFAPPROVAL;
            return MG_ESELFAPPROVAL;
        }
    }
    if (promotion_creator && strcmp(by, promotion_creator) == 0) {
        mg_fail(err, MG_EINVAL, NULL,
                "'%s' started this promotion and cannot approve it; ask another "
                "reviewer",
                by);
        if (err)
            err->code = MG_ESELFAPPROVAL;
        return MG_ESELFAPPROVAL;
    }
    for (i = 0; i < n; i++) {
        if (strcmp(existing[i].by, by) == 0) {
            mg_fail(err, MG_EINVAL, NULL, "'%s' already decided on this promotion", by);
            if (err)
                err->code = MG_ECONFLICT;
            return MG_ECONFLICT;
        }
    }
    return MG_OK;
}

static json_t *approval_gate(const struct gate_input *in)
{
    char obs[64], exp[64];
    bool rejected, satisfied;
    int approved;

    gate_approval_tally(in->policy, in->approvals, in->napprovals, &rejected, &satisfied,
                        &approved);
    snprintf(obs, sizeof(obs), "%d approved", approved);
    snprintf(exp, sizeof(exp), "%d approvals", in->policy->approvals_required);
    if (rejected)
        return gate("approvals", "approval", "failed", json_string(obs), json_string(exp),
                    "a reviewer rejected the promotion");
    if (!satisfied && in->policy->ngroups > 0) {
        char missing[160], detail[200];

        gate_approval_missing(in->policy, in->approvals, in->napprovals, missing, sizeof(missing));
        snprintf(detail, sizeof(detail), "waiting for reviewers%s%s", missing[0] ? "; " : "",
                 missing);
        return gate("approvals", "approval", "pending", json_string(obs), json_string(exp), detail);
    }
    return gate("approvals", "approval", satisfied ? "passed" : "pending", json_string(obs),
                json_string(exp), satisfied ? NULL : "waiting for reviewers");
}

static json_t *signature_gate(const struct gate_input *in)
{
    switch (in->signature) {
    case GATE_SIG_VALID:
        return gate("signature", "signature", "passed", json_string("valid"), json_string("valid"),
                    NULL);
    case GATE_SIG_INVALID:
        return gate("signature", "signature", "failed", json_string("invalid"),
                    json_string("valid"), in->signature_detail);
    case GATE_SIG_MISSING:
        break;
    }
    return gate("signature", "signature", "failed", json_string("missing"), json_string("valid"),
                "the version has no signature bundle");
}

static json_t *image_gate(const struct gate_input *in)
{
    if (in->image == NULL)
        return gate("pinned image", "image", "failed", json_null(),
                    json_string("image pinned by digest"), "the version names no image");
    return gate("pinned image", "image", in->image_pinned ? "passed" : "failed",
                json_string(in->image), json_string("image pinned by digest"),
                in->image_pinned ? NULL : "the image is not pinned by a sha256 digest");
}

/* docs/contract.md "Lifecycle": a version trained on withdrawn data, directly or through a derived
 * data set, must not be promoted. */
static json_t *withdrawn_gate(const struct gate_input *in)
{
    char obs[64], detail[192];

    snprintf(obs, sizeof(obs), "%zu withdrawn", in->datasets_withdrawn);
    if (in->datasets_withdrawn == 0)
        return gate("no withdrawn datasets", "datasets", "passed", json_string(obs),
                    json_string("none withdrawn"), NULL);
    snprintf(detail, sizeof(detail),
             "trained on withdrawn dataset %s (directly or through data derived from it)",
             in->first_withdrawn ? in->first_withdrawn : "?");
    return gate("no withdrawn datasets", "datasets", "failed", json_string(obs),
                json_string("none withdrawn"), detail);
}

static json_t *datasets_gate(const struct gate_input *in)
{
    char obs[64], detail[160];

    snprintf(obs, sizeof(obs), "%zu of %zu registered",
             in->datasets_total - in->datasets_unregistered, in->datasets_total);
    if (in->datasets_unregistered == 0)
        return gate("registered datasets", "datasets", "passed", json_string(obs),
                    json_string("all registered"), NULL);
    snprintf(detail, sizeof(detail), "dataset %s is not registered",
             in->first_unregistered ? in->first_unregistered : "?");
    return gate("registered datasets", "datasets", "failed", json_string(obs),
                json_string("all registered"), detail);
}

static json_t *schema_gate(const struct gate_input *in)
{
    char detail[400], exp[64], obs[64];
    json_t *g, *diff;
    size_t breaking = 0, i;
    json_t *d;

    if (in->baseline_version <= 0)
        return gate("schema compatible", "schema", "passed", NULL, NULL, "no baseline");
    snprintf(exp, sizeof(exp), "compatible with v%lld", (long long)in->baseline_version);
    if (in->baseline_schema == NULL)
        return gate("schema compatible", "schema", "passed", NULL, json_string(exp),
                    "the baseline has no input/output schema");
    if (in->candidate_schema == NULL)
        return gate("schema compatible", "schema", "failed", json_string("no schema"),
                    json_string(exp),
                    "the candidate has no input/output schema: upload a format the server "
                    "reads (ONNX) or declare io_schema");
    diff = gate_schema_diff(in->baseline_schema, in->candidate_schema);
    json_array_foreach(diff, i, d) breaking += json_is_true(json_object_get(d, "breaking"));
    snprintf(obs, sizeof(obs), "%zu difference%s, %zu breaking", json_array_size(diff),
             json_array_size(diff) == 1 ? "" : "s", breaking);
    if (gate_schema_compatible(in->baseline_schema, in->candidate_schema, detail, sizeof(detail)))
        g = gate("schema compatible", "schema", "passed", json_string(obs), json_string(exp),
                 json_array_size(diff) ? "only compatible differences" : NULL);
    else
        g = gate("schema compatible", "schema", "failed", json_string(obs), json_string(exp),
                 detail);
    if (g != NULL && diff != NULL)
        json_object_set(g, "diff", diff);
    json_decref(diff);
    return g;
}

static json_t *fit_gate(const struct gate_input *in)
{
    char exp[64], detail[160], d1[32], d2[32];

    if (!in->has_vram)
        return gate("fits GPU", "fit", "skipped", NULL, NULL,
                    "no VRAM estimate: the version declares no resources.parameters/precision "
                    "and the server read no weight sizes from its artifact");
    if (in->largest_gpu_gib < 0)
        return gate("fits GPU", "fit", "failed", json_real(in->vram_gib), NULL,
                    "the policy requires a GPU and the runner reports none");
    snprintf(exp, sizeof(exp), "<= %s GiB", dbl(in->largest_gpu_gib, d1));
    snprintf(detail, sizeof(detail), "estimated %s GiB against the largest GPU's %s GiB",
             dbl(in->vram_gib, d2), d1);
    return gate("fits GPU", "fit", in->vram_gib <= in->largest_gpu_gib ? "passed" : "failed",
                json_real(in->vram_gib), json_string(exp), detail);
}

static json_t *smoke_gate(const struct gate_input *in)
{
    static const char *const st[] = {"pending", "pending", "running", "passed", "failed"};
    static const char *const obs[] = {"not run", "queued", "running", "passed", "failed"};

    return gate("smoke test", "smoke", st[in->smoke], json_string(obs[in->smoke]),
                json_string("passed"),
                in->smoke_detail
                    ? in->smoke_detail
                    : (in->smoke == GATE_SMOKE_NONE ? "waiting for the smoke-test runner" : NULL));
}

/* Passes only on "clean": unsafe, unknown and a version scanned by no scanner fail, naming
 * the first finding. */
static json_t *scan_gate(const struct gate_input *in)
{
    const char *v = json_string_value(json_object_get(in->scan, "verdict"));
    json_t *f = json_array_get(json_object_get(in->scan, "findings"), 0);
    const char *member = json_string_value(json_object_get(f, "member"));
    char detail[400];

    if (v == NULL)
        return gate("artifact scan", "scan", "failed", json_string("not scanned"),
                    json_string("clean"),
                    "the artifact was stored before the safety scan existed; an admin can "
                    "POST /api/v1/blobs/{digest}/rescan");
    if (strcmp(v, "clean") == 0)
        return gate("artifact scan", "scan", "passed", json_string(v), json_string("clean"), NULL);
    snprintf(detail, sizeof(detail), "%s%s%s%s", member ? member : "", member ? ": " : "",
             f ? json_string_value(json_object_get(f, "detail")) : "the scanner found no detail",
             strcmp(v, "unknown") == 0 ? " (unknown is not clean: default-deny)" : "");
    return gate("artifact scan", "scan", "failed", json_string(v), json_string("clean"), detail);
}

json_t *gate_evaluate(const struct gate_input *in, bool include_approvals)
{
    const struct gate_policy *p = in->policy;
    json_t *gates = json_array(), *g, *report;
    bool failed = false, pending = false;
    size_t i;

    if (gates == NULL)
        return NULL;
    for (i = 0; i < p->nthresholds; i++)
        json_array_append_new(gates, threshold_gate(in, &p->thresholds[i]));
    if (p->require_signature)
        json_array_append_new(gates, signature_gate(in));
    if (p->require_pinned_image)
        json_array_append_new(gates, image_gate(in));
    if (p->require_registered_datasets)
        json_array_append_new(gates, datasets_gate(in));
    if (p->require_no_withdrawn_datasets)
        json_array_append_new(gates, withdrawn_gate(in));
    if (p->schema_compatible)
        json_array_append_new(gates, schema_gate(in));
    if (p->gpu == GATE_GPU_REQUIRED)
        json_array_append_new(gates, fit_gate(in));
    if (p->smoke_required)
        json_array_append_new(gates, smoke_gate(in));
    if (p->scan_required)
        json_array_append_new(gates, scan_gate(in));
    if (include_approvals && p->approvals_required > 0)
        json_array_append_new(gates, approval_gate(in));
    json_array_foreach(gates, i, g)
    {
        const char *s = json_string_value(json_object_get(g, "status"));
        failed = failed || (s && strcmp(s, "failed") == 0);
        pending = pending || (s && (strcmp(s, "pending") == 0 || strcmp(s, "running") == 0));
    }
    report = json_pack("{s:b, s:b, s:o}", "passed", !failed && !pending, "pending",
                       !failed && pending, "gates", gates);
    return report;
}
