/*
 * analysis.c - see analysis.h.
 */
#include "analysis.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool only_keys(const json_t *o, const char *const *allowed, const char **bad)
{
    const char *k;
    json_t *v;

    json_object_foreach((json_t *)o, k, v)
    {
        bool ok = false;
        for (size_t i = 0; allowed[i] && !ok; i++)
            ok = strcmp(k, allowed[i]) == 0;
        if (!ok) {
            *bad = k;
            return false;
        }
    }
    return true;
}

/* ---- placeholders ------------------------------------------------------ */

static const char *const placeholder_names[] = {
    "model", "alias", "version", "interval", "haproxy.backend", "haproxy.server", "nginx.upstream",
};

#define NPLACEHOLDERS (sizeof(placeholder_names) / sizeof(placeholder_names[0]))

static const char *placeholder_value(const struct gate_placeholders *v, size_t i)
{
    const char *vals[NPLACEHOLDERS] = {v->model,         v->alias,           v->version,
                                       v->interval,      v->haproxy_backend, v->haproxy_server,
                                       v->nginx_upstream};
    return vals[i];
}

/* The placeholder at s ("{{name}}"): its index, its length in *len; -1 unknown (then
 * *len is the length of the whole "{{…}}", or 0 when unterminated). */
static int placeholder_at(const char *s, size_t *len)
{
    const char *end = strstr(s + 2, "}}");
    size_t n;

    *len = 0;
    if (end == NULL)
        return -1;
    n = (size_t)(end - (s + 2));
    *len = n + 4;
    for (size_t i = 0; i < NPLACEHOLDERS; i++) {
        if (strlen(placeholder_names[i]) == n && strncmp(s + 2, placeholder_names[i], n) == 0)
            return (int)i;
    }
    return -1;
}

/* Every placeholder of a template is known; else the unknown ones, named, in err. */
static enum mg_code check_template(const char *t, const char *field, struct mg_error *err)
{
    char unknown[200] = "";
    size_t used = 0, len;

    for (const char *p = strstr(t, "{{"); p; p = strstr(p + 2, "{{")) {
        if (placeholder_at(p, &len) >= 0) {
            p += len - 2;
            continue;
        }
        if (len == 0)
            return mg_fail(err, MG_EINVAL, field, "%s has a '{{' without its '}}'", field);
        if (used < sizeof(unknown) - 1)
            used += (size_t)snprintf(unknown + used, sizeof(unknown) - used, "%s%.*s",
                                     used ? ", " : "", (int)(len > 64 ? 64 : len), p);
        p += len - 2;
    }
    if (used)
        return mg_fail(err, MG_EINVAL, field,
                       "%s has unknown placeholders: %s (known: {{model}}, {{alias}}, {{version}}, "
                       "{{interval}}, {{haproxy.backend}}, {{haproxy.server}}, {{nginx.upstream}})",
                       field, unknown);
    return MG_OK;
}

enum mg_code gate_analysis_expand(const char *tmpl, const struct gate_placeholders *v, char *out,
                                  size_t cap, struct mg_error *err)
{
    size_t o = 0, len;
    const char *p = tmpl;

    if (cap == 0)
        return MG_ETOOBIG;
    while (*p) {
        if (p[0] == '{' && p[1] == '{') {
            int i = placeholder_at(p, &len);
            const char *val;

            if (i < 0)
                return mg_fail(err, MG_EINVAL, NULL, "unknown placeholder %.*s",
                               (int)(len ? len : 2), p);
            val = placeholder_value(v, (size_t)i);
            if (val == NULL)
                return mg_fail(err, MG_EINVAL, NULL,
                               "placeholder {{%s}} has no value: no gateway of the alias names "
                               "versions that way",
                               placeholder_names[i]);
            for (; *val; val++) {
                const char *esc = *val == '\\'   ? "\\\\"
                                  : *val == '"'  ? "\\\""
                                  : *val == '\n' ? "\\n"
                                                 : NULL;
                size_t n = esc ? strlen(esc) : 1;

                if (o + n >= cap)
                    goto toobig;
                if (esc)
                    memcpy(out + o, esc, n);
                else
                    out[o] = *val;
                o += n;
            }
            p += len;
            continue;
        }
        if (o + 1 >= cap)
            goto toobig;
        out[o++] = *p++;
    }
    out[o] = '\0';
    return MG_OK;
toobig:
    out[0] = '\0';
    if (err) {
        mg_fail(err, MG_EINVAL, NULL, "the expanded query is longer than %zu bytes", cap - 1);
        err->code = MG_ETOOBIG;
    }
    return MG_ETOOBIG;
}

/* ---- parsing ----------------------------------------------------------- */

static enum mg_code number(const json_t *m, const char *key, const char *field, double lo,
                           double hi, bool *has, double *out, struct mg_error *err)
{
    json_t *v = json_object_get(m, key);
    char f[96];

    if (v == NULL)
        return MG_OK;
    snprintf(f, sizeof(f), "%s.%s", field, key);
    if (!json_is_number(v) || !isfinite(json_number_value(v)) || json_number_value(v) < lo ||
        json_number_value(v) > hi)
        return mg_fail(err, MG_EINVAL, f, "%s must be a number from %g to %g", f, lo, hi);
    if (has)
        *has = true;
    *out = json_number_value(v);
    return MG_OK;
}

static enum mg_code query(const json_t *m, const char *key, const char *field, char *out,
                          struct mg_error *err)
{
    json_t *v = json_object_get(m, key);
    char f[96];

    snprintf(f, sizeof(f), "%s.%s", field, key);
    if (!json_is_string(v) || json_string_length(v) == 0 ||
        json_string_length(v) > GATE_ANALYSIS_QUERY_MAX ||
        strlen(json_string_value(v)) != json_string_length(v))
        return mg_fail(err, MG_EINVAL, f, "%s must be a PromQL query of 1 to %d bytes", f,
                       GATE_ANALYSIS_QUERY_MAX);
    memcpy(out, json_string_value(v), json_string_length(v) + 1);
    return check_template(out, f, err);
}

static bool name_ok(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > GATE_ANALYSIS_NAME_MAX)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-'))
            return false;
    }
    return true;
}

static enum mg_code parse_metric(const json_t *j, size_t i, struct gate_analysis_metric *m,
                                 struct mg_error *err)
{
    static const char *const vkeys[] = {
        "name", "kind", "query", "max", "min", "max_regression", "max_regression_pct", NULL};
    static const char *const rkeys[] = {"name",         "kind",      "errors",     "total", "max",
                                        "max_increase", "min_total", "confidence", NULL};
    char field[48];
    const char *kind, *name, *bad;
    enum mg_code rc;

    memset(m, 0, sizeof(*m));
    snprintf(field, sizeof(field), "analysis.metrics[%zu]", i);
    if (!json_is_object(j))
        return mg_fail(err, MG_EINVAL, field, "%s must be an object", field);
    name = json_string_value(json_object_get(j, "name"));
    if (name == NULL || !name_ok(name))
        return mg_fail(err, MG_EINVAL, field, "%s.name must be 1 to %d of A-Z a-z 0-9 _ . -", field,
                       GATE_ANALYSIS_NAME_MAX);
    snprintf(m->name, sizeof(m->name), "%s", name);
    kind = json_string_value(json_object_get(j, "kind"));
    if (kind && strcmp(kind, "value") == 0) {
        m->kind = GATE_METRIC_VALUE;
        if (!only_keys(j, vkeys, &bad))
            return mg_fail(err, MG_EINVAL, field, "%s (kind value) has an unknown field '%.64s'",
                           field, bad);
        if ((rc = query(j, "query", field, m->q[0], err)) != MG_OK ||
            (rc = number(j, "max", field, -1e300, 1e300, &m->has_max, &m->max, err)) != MG_OK ||
            (rc = number(j, "min", field, -1e300, 1e300, &m->has_min, &m->min, err)) != MG_OK ||
            (rc = number(j, "max_regression", field, 0, 1e300, &m->has_max_regression,
                         &m->max_regression, err)) != MG_OK ||
            (rc = number(j, "max_regression_pct", field, 0, 1e6, &m->has_max_regression_pct,
                         &m->max_regression_pct, err)) != MG_OK)
            return rc;
        if (!m->has_max && !m->has_min)
            return mg_fail(err, MG_EINVAL, field,
                           "%s needs max (lower is better) or min (higher is better); "
                           "max_regression and max_regression_pct follow that direction",
                           field);
        if (m->has_max && m->has_min && (m->has_max_regression || m->has_max_regression_pct))
            return mg_fail(err, MG_EINVAL, field,
                           "%s has both max and min, so a regression has no direction; keep one "
                           "of them or drop max_regression/max_regression_pct",
                           field);
        if (m->has_max && m->has_min && m->min > m->max)
            return mg_fail(err, MG_EINVAL, field, "%s: min is above max", field);
        if (m->has_max_regression && m->has_max_regression_pct)
            return mg_fail(err, MG_EINVAL, field,
                           "%s: give max_regression or max_regression_pct, not both", field);
        return MG_OK;
    }
    if (kind && strcmp(kind, "ratio") == 0) {
        bool has_total = false, has_conf = false;

        m->kind = GATE_METRIC_RATIO;
        m->confidence = 0.95;
        if (!only_keys(j, rkeys, &bad))
            return mg_fail(err, MG_EINVAL, field, "%s (kind ratio) has an unknown field '%.64s'",
                           field, bad);
        if ((rc = query(j, "errors", field, m->q[0], err)) != MG_OK ||
            (rc = query(j, "total", field, m->q[1], err)) != MG_OK ||
            (rc = number(j, "max", field, 0, 1, &m->has_max, &m->max, err)) != MG_OK ||
            (rc = number(j, "max_increase", field, 0, 1, &m->has_max_increase, &m->max_increase,
                         err)) != MG_OK ||
            (rc = number(j, "min_total", field, 0, 1e15, &has_total, &m->min_total, err)) !=
                MG_OK ||
            (rc = number(j, "confidence", field, 0.5, 0.9999, &has_conf, &m->confidence, err)) !=
                MG_OK)
            return rc;
        if (!m->has_max && !m->has_max_increase)
            return mg_fail(err, MG_EINVAL, field,
                           "%s needs max (the highest rate allowed) or max_increase (over the "
                           "baseline's rate), or both",
                           field);
        return MG_OK;
    }
    snprintf(field + strlen(field), sizeof(field) - strlen(field), ".kind");
    return mg_fail(err, MG_EINVAL, field, "%s must be \"value\" or \"ratio\"", field);
}

static enum mg_code parse_provider(const json_t *v, struct gate_analysis *a, struct mg_error *err)
{
    static const char *const keys[] = {"kind", "url", NULL};
    const char *bad, *kind, *url;
    json_t *u;

    if (!json_is_object(v) || !only_keys(v, keys, &bad))
        return mg_fail(
            err, MG_EINVAL, "analysis.provider",
            "analysis.provider must be {\"kind\": \"prometheus\", \"url\"?: \"http://…\"}");
    kind = json_string_value(json_object_get(v, "kind"));
    if (kind == NULL || strcmp(kind, "prometheus") != 0)
        return mg_fail(err, MG_EINVAL, "analysis.provider.kind",
                       "analysis.provider.kind must be \"prometheus\" (the only provider)");
    u = json_object_get(v, "url");
    if (u == NULL || json_is_null(u))
        return MG_OK;
    url = json_string_value(u);
    if (url == NULL || json_string_length(u) > GATE_ANALYSIS_URL_MAX ||
        strlen(url) != json_string_length(u) ||
        (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0) || strlen(url) < 9 ||
        strpbrk(url, " \t\r\n?#") != NULL)
        return mg_fail(err, MG_EINVAL, "analysis.provider.url",
                       "analysis.provider.url must be an http:// or https:// URL of the Prometheus "
                       "HTTP API (at most %d bytes, no query), e.g. http://127.0.0.1:9090",
                       GATE_ANALYSIS_URL_MAX);
    snprintf(a->url, sizeof(a->url), "%s", url);
    /* one canonical spelling: no trailing slash */
    while (strlen(a->url) > 8 && a->url[strlen(a->url) - 1] == '/')
        a->url[strlen(a->url) - 1] = '\0';
    return MG_OK;
}

static enum mg_code integer(const json_t *j, const char *key, json_int_t lo, json_int_t hi,
                            json_int_t *out, struct mg_error *err)
{
    json_t *v = json_object_get(j, key);
    char f[64];

    if (v == NULL)
        return MG_OK;
    snprintf(f, sizeof(f), "analysis.%s", key);
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return mg_fail(err, MG_EINVAL, f, "%s must be an integer from %lld to %lld", f,
                       (long long)lo, (long long)hi);
    *out = json_integer_value(v);
    return MG_OK;
}

enum mg_code gate_analysis_parse(const json_t *j, struct gate_analysis *out, struct mg_error *err)
{
    static const char *const keys[] = {"provider",
                                       "interval_seconds",
                                       "failure_limit",
                                       "inconclusive_limit",
                                       "on_inconclusive",
                                       "metrics",
                                       NULL};
    struct gate_analysis *a;
    json_int_t interval = 30, flimit = 2, ilimit = 12;
    const char *bad, *oi;
    json_t *v, *m;
    size_t i;
    enum mg_code rc = MG_OK;

    if (json_is_null(j)) {
        memset(out, 0, sizeof(*out));
        return MG_OK;
    }
    if (!json_is_object(j))
        return mg_fail(err, MG_EINVAL, "analysis", "analysis must be an object or null");
    if (!only_keys(j, keys, &bad))
        return mg_fail(err, MG_EINVAL, "analysis", "analysis has an unknown field '%.64s'", bad);
    if ((a = calloc(1, sizeof(*a))) == NULL) {
        mg_fail(err, MG_EINVAL, NULL, "out of memory");
        if (err)
            err->code = MG_ENOMEM;
        return MG_ENOMEM;
    }
    a->enabled = true;
    v = json_object_get(j, "provider");
    if (v && (rc = parse_provider(v, a, err)) != MG_OK)
        goto out;
    if ((rc = integer(j, "interval_seconds", 1, 3600, &interval, err)) != MG_OK ||
        (rc = integer(j, "failure_limit", 1, 100, &flimit, err)) != MG_OK ||
        (rc = integer(j, "inconclusive_limit", 1, GATE_ANALYSIS_INTERVALS_KEPT, &ilimit, err)) !=
            MG_OK)
        goto out;
    a->interval_seconds = interval;
    a->failure_limit = (int)flimit;
    a->inconclusive_limit = (int)ilimit;
    v = json_object_get(j, "on_inconclusive");
    oi = json_string_value(v);
    if (v && (oi == NULL || (strcmp(oi, "hold") != 0 && strcmp(oi, "rollback") != 0))) {
        rc = mg_fail(err, MG_EINVAL, "analysis.on_inconclusive",
                     "analysis.on_inconclusive must be \"hold\" or \"rollback\"");
        goto out;
    }
    a->on_inconclusive = oi && strcmp(oi, "rollback") == 0 ? GATE_ON_INCONCLUSIVE_ROLLBACK
                                                           : GATE_ON_INCONCLUSIVE_HOLD;
    v = json_object_get(j, "metrics");
    if (!json_is_array(v) || json_array_size(v) == 0 ||
        json_array_size(v) > GATE_ANALYSIS_MAX_METRICS) {
        rc = mg_fail(err, MG_EINVAL, "analysis.metrics",
                     "analysis.metrics must be an array of 1 to %d metrics",
                     GATE_ANALYSIS_MAX_METRICS);
        goto out;
    }
    json_array_foreach(v, i, m)
    {
        if ((rc = parse_metric(m, i, &a->metrics[i], err)) != MG_OK)
            goto out;
        for (size_t k = 0; k < i; k++) {
            if (strcmp(a->metrics[k].name, a->metrics[i].name) == 0) {
                char f[48];
                snprintf(f, sizeof(f), "analysis.metrics[%zu].name", i);
                rc =
                    mg_fail(err, MG_EINVAL, f, "two metrics are named '%s'; give each its own name",
                            a->metrics[i].name);
                goto out;
            }
        }
    }
    a->nmetrics = json_array_size(v);
    *out = *a;
out:
    free(a);
    return rc;
}

json_t *gate_analysis_to_json(const struct gate_analysis *a)
{
    json_t *metrics, *m, *j;

    if (!a->enabled)
        return NULL;
    if ((metrics = json_array()) == NULL)
        return NULL;
    for (size_t i = 0; i < a->nmetrics; i++) {
        const struct gate_analysis_metric *x = &a->metrics[i];

        if (x->kind == GATE_METRIC_VALUE) {
            m = json_pack("{s:s, s:s, s:s}", "name", x->name, "kind", "value", "query", x->q[0]);
            if (m && x->has_max)
                json_object_set_new(m, "max", json_real(x->max));
            if (m && x->has_min)
                json_object_set_new(m, "min", json_real(x->min));
            if (m && x->has_max_regression)
                json_object_set_new(m, "max_regression", json_real(x->max_regression));
            if (m && x->has_max_regression_pct)
                json_object_set_new(m, "max_regression_pct", json_real(x->max_regression_pct));
        } else {
            m = json_pack("{s:s, s:s, s:s, s:s, s:f, s:f}", "name", x->name, "kind", "ratio",
                          "errors", x->q[0], "total", x->q[1], "min_total", x->min_total,
                          "confidence", x->confidence);
            if (m && x->has_max)
                json_object_set_new(m, "max", json_real(x->max));
            if (m && x->has_max_increase)
                json_object_set_new(m, "max_increase", json_real(x->max_increase));
        }
        if (m == NULL || json_array_append_new(metrics, m) != 0) {
            json_decref(metrics);
            return NULL;
        }
    }
    j = json_pack("{s:{s:s, s:o}, s:I, s:i, s:i, s:s, s:o}", "provider", "kind", "prometheus",
                  "url", a->url[0] ? json_string(a->url) : json_null(), "interval_seconds",
                  (json_int_t)a->interval_seconds, "failure_limit", a->failure_limit,
                  "inconclusive_limit", a->inconclusive_limit, "on_inconclusive",
                  a->on_inconclusive == GATE_ON_INCONCLUSIVE_ROLLBACK ? "rollback" : "hold",
                  "metrics", metrics);
    return j;
}

/* ---- judgement --------------------------------------------------------- */

static const char *const verdict_names[] = {"passed", "failed", "inconclusive"};

const char *gate_verdict_name(enum gate_verdict v)
{
    return verdict_names[v];
}

bool gate_verdict_parse(const char *s, enum gate_verdict *out)
{
    for (size_t i = 0; s && i < 3; i++) {
        if (strcmp(s, verdict_names[i]) == 0) {
            *out = (enum gate_verdict)i;
            return true;
        }
    }
    return false;
}

/* The shortest text that reads back as the same double. */
static const char *dbl(double v, char out[32])
{
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(out, 32, "%.*g", prec, v);
        if (strtod(out, NULL) == v)
            break;
    }
    return out;
}

/* A measured value: six significant digits are plenty to read (bounds use dbl()). */
static const char *meas(double v, char out[32])
{
    snprintf(out, 32, "%.6g", v);
    return out;
}

static void result(struct gate_metric_result *r, enum gate_verdict v, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void result(struct gate_metric_result *r, enum gate_verdict v, const char *fmt, ...)
{
    va_list ap;

    r->verdict = v;
    va_start(ap, fmt);
    vsnprintf(r->detail, sizeof(r->detail), fmt, ap);
    va_end(ap);
}

/* A sample that is not a usable number: why, for the detail; NULL when usable. */
static const char *unusable(const struct gate_sample *s, const char *who, char *buf, size_t cap)
{
    if (s->state == GATE_SAMPLE_OK && isfinite(s->value))
        return NULL;
    if (s->state == GATE_SAMPLE_NODATA)
        snprintf(buf, cap, "no data for the %s", who);
    else if (s->state == GATE_SAMPLE_OK)
        snprintf(buf, cap, "the %s's value is not a finite number", who);
    else
        snprintf(buf, cap, "%s: %s", who, s->detail ? s->detail : "the provider did not answer");
    return buf;
}

void gate_analysis_judge_value(const struct gate_analysis_metric *m, const struct gate_sample *cand,
                               bool has_baseline, const struct gate_sample *base,
                               struct gate_metric_result *out)
{
    char why[280], d1[32], d2[32], d3[32], d4[32];
    double c, b, bound;
    bool relative = m->has_max_regression || m->has_max_regression_pct;

    memset(out, 0, sizeof(*out));
    out->candidate = NAN;
    out->baseline = NAN;
    if (has_baseline && base->state == GATE_SAMPLE_OK && isfinite(base->value))
        out->baseline = base->value;
    if (unusable(cand, "candidate", why, sizeof(why))) {
        result(out, GATE_VERDICT_INCONCLUSIVE, "%s", why);
        return;
    }
    c = out->candidate = cand->value;
    if (m->has_max && c > m->max) {
        result(out, GATE_VERDICT_FAILED, "candidate %s is over max %s", meas(c, d1),
               dbl(m->max, d2));
        return;
    }
    if (m->has_min && c < m->min) {
        result(out, GATE_VERDICT_FAILED, "candidate %s is under min %s", meas(c, d1),
               dbl(m->min, d2));
        return;
    }
    if (!relative) {
        result(out, GATE_VERDICT_PASSED, "within bounds");
        return;
    }
    if (!has_baseline) {
        result(out, GATE_VERDICT_PASSED, "within bounds; no baseline to compare with");
        return;
    }
    if (unusable(base, "baseline", why, sizeof(why))) {
        result(out, GATE_VERDICT_INCONCLUSIVE, "%s (needed for the regression bound)", why);
        return;
    }
    b = base->value;
    if (m->has_max) { /* lower is better: the candidate may rise by the regression */
        bound = m->has_max_regression_pct ? b + fabs(b) * m->max_regression_pct / 100
                                          : b + m->max_regression;
        if (c > bound + 1e-9 * fmax(1.0, fabs(bound))) {
            result(out, GATE_VERDICT_FAILED, "candidate %s is over %.6g (baseline %s + %s%s)",
                   meas(c, d1), bound, meas(b, d3),
                   m->has_max_regression_pct ? dbl(m->max_regression_pct, d4)
                                             : dbl(m->max_regression, d4),
                   m->has_max_regression_pct ? "%" : "");
            return;
        }
    } else { /* higher is better: the candidate may fall by the regression */
        bound = m->has_max_regression_pct ? b - fabs(b) * m->max_regression_pct / 100
                                          : b - m->max_regression;
        if (c < bound - 1e-9 * fmax(1.0, fabs(bound))) {
            result(out, GATE_VERDICT_FAILED, "candidate %s is under %.6g (baseline %s - %s%s)",
                   meas(c, d1), bound, meas(b, d3),
                   m->has_max_regression_pct ? dbl(m->max_regression_pct, d4)
                                             : dbl(m->max_regression, d4),
                   m->has_max_regression_pct ? "%" : "");
            return;
        }
    }
    result(out, GATE_VERDICT_PASSED, "within bounds and within the regression allowed");
}

bool gate_two_proportion_higher(double e1, double n1, double e2, double n2, double confidence,
                                double *p_value)
{
    double p1, p2, p, se, z, pv;

    if (p_value)
        *p_value = 1;
    if (!(n1 > 0) || !(n2 > 0) || !(e1 >= 0) || !(e2 >= 0) || !isfinite(n1) || !isfinite(n2))
        return false;
    e1 = fmin(e1, n1);
    e2 = fmin(e2, n2);
    p1 = e1 / n1;
    p2 = e2 / n2;
    p = (e1 + e2) / (n1 + n2);
    se = sqrt(p * (1 - p) * (1 / n1 + 1 / n2));
    if (!(se > 0))
        return false;
    /* Yates' continuity correction: counts are whole requests, and without it a single
     * error at low traffic reads as far more certain than it is. */
    z = (p1 - p2 - 0.5 * (1 / n1 + 1 / n2)) / se;
    pv = 0.5 * erfc(z / sqrt(2.0)); /* P(Z >= z) */
    if (p_value)
        *p_value = pv;
    return pv < 1 - confidence;
}

void gate_analysis_judge_ratio(const struct gate_analysis_metric *m,
                               const struct gate_sample *cand_errors,
                               const struct gate_sample *cand_total, bool has_baseline,
                               const struct gate_sample *base_errors,
                               const struct gate_sample *base_total, struct gate_metric_result *out)
{
    char why[280], d1[32], d2[32], d3[32], d4[32];
    double ce, ct, be = 0, bt = 0, cr, br = NAN, pv;
    bool base_ok = false;

    memset(out, 0, sizeof(*out));
    out->candidate = NAN;
    out->baseline = NAN;
    if (unusable(cand_total, "candidate's total", why, sizeof(why))) {
        result(out, GATE_VERDICT_INCONCLUSIVE, "%s", why);
        return;
    }
    ct = cand_total->value;
    if (cand_errors->state == GATE_SAMPLE_NODATA) {
        ce = 0; /* no series with that error yet */
    } else if (unusable(cand_errors, "candidate's errors", why, sizeof(why))) {
        result(out, GATE_VERDICT_INCONCLUSIVE, "%s", why);
        return;
    } else {
        ce = cand_errors->value;
    }
    if (ct < 0 || ce < 0) {
        result(out, GATE_VERDICT_INCONCLUSIVE, "the candidate's counts are negative (%s, %s)",
               meas(ce, d1), meas(ct, d2));
        return;
    }
    if (has_baseline && base_total->state == GATE_SAMPLE_OK && isfinite(base_total->value) &&
        base_total->value > 0 &&
        (base_errors->state == GATE_SAMPLE_NODATA ||
         (base_errors->state == GATE_SAMPLE_OK && isfinite(base_errors->value) &&
          base_errors->value >= 0))) {
        bt = base_total->value;
        be = base_errors->state == GATE_SAMPLE_OK ? fmin(base_errors->value, bt) : 0;
        br = out->baseline = be / bt;
        base_ok = true;
    }
    if (ct <= 0 || ct < m->min_total) {
        out->candidate = ct > 0 ? fmin(ce, ct) / ct : NAN;
        result(out, GATE_VERDICT_INCONCLUSIVE, "too few requests to the candidate: %s of %s",
               meas(ct, d1), dbl(m->min_total, d2));
        return;
    }
    ce = fmin(ce, ct); /* increase() extrapolates each series on its own */
    cr = out->candidate = ce / ct;
    if (m->has_max && cr > m->max) {
        result(out, GATE_VERDICT_FAILED, "candidate rate %s (%s of %s) is over max %s",
               meas(cr, d1), meas(ce, d2), meas(ct, d3), dbl(m->max, d4));
        return;
    }
    if (!m->has_max_increase) {
        result(out, GATE_VERDICT_PASSED, "rate within max");
        return;
    }
    if (!has_baseline) {
        result(out, GATE_VERDICT_PASSED, "rate within max; no baseline to compare with");
        return;
    }
    if (!base_ok) {
        if (unusable(base_total, "baseline's total", why, sizeof(why)) == NULL &&
            unusable(base_errors, "baseline's errors", why, sizeof(why)) == NULL)
            snprintf(why, sizeof(why), "no requests to the baseline");
        result(out, GATE_VERDICT_INCONCLUSIVE, "%s (needed for max_increase)", why);
        return;
    }
    if (cr > br + m->max_increase) {
        bool higher = gate_two_proportion_higher(ce, ct, be, bt, m->confidence, &pv);

        if (higher) {
            result(out, GATE_VERDICT_FAILED,
                   "candidate rate %s is over baseline %s + %s, significant at %s "
                   "(p = %.3g)",
                   meas(cr, d1), meas(br, d2), dbl(m->max_increase, d3), dbl(m->confidence, d4),
                   pv);
            return;
        }
        result(out, GATE_VERDICT_PASSED,
               "candidate rate %s is over baseline %s + %s but not significantly (p = %.3g)",
               meas(cr, d1), meas(br, d2), dbl(m->max_increase, d3), pv);
        return;
    }
    result(out, GATE_VERDICT_PASSED, "rate within max and within max_increase of the baseline");
}

enum gate_verdict gate_interval_verdict(const enum gate_verdict *metrics, size_t n)
{
    enum gate_verdict v = GATE_VERDICT_PASSED;

    for (size_t i = 0; i < n; i++) {
        if (metrics[i] == GATE_VERDICT_FAILED)
            return GATE_VERDICT_FAILED;
        if (metrics[i] == GATE_VERDICT_INCONCLUSIVE)
            v = GATE_VERDICT_INCONCLUSIVE;
    }
    return v;
}

void gate_analysis_streaks(const struct gate_interval *hist, size_t n, int phase, int step_index,
                           struct gate_streaks *out)
{
    bool failures_done = false, inconclusive_done = false;

    memset(out, 0, sizeof(*out));
    for (size_t i = 0; i < n; i++) {
        const struct gate_interval *h = &hist[i];

        if (!failures_done) {
            if (h->verdict == GATE_VERDICT_FAILED)
                out->consecutive_failures++;
            else if (h->verdict == GATE_VERDICT_PASSED)
                failures_done = true;
        }
        if (!inconclusive_done) {
            if (h->verdict == GATE_VERDICT_INCONCLUSIVE)
                out->consecutive_inconclusive++;
            else
                inconclusive_done = true;
        }
        if (h->verdict == GATE_VERDICT_PASSED && h->phase == phase && h->step_index == step_index)
            out->passed_in_stage++;
    }
}

enum gate_analysis_action gate_analysis_decide(const struct gate_analysis *a,
                                               const struct gate_streaks *s)
{
    if (!a->enabled)
        return GATE_ANALYSIS_CONTINUE;
    if (s->consecutive_failures >= a->failure_limit)
        return GATE_ANALYSIS_ROLLBACK_FAILED;
    if (s->consecutive_inconclusive >= a->inconclusive_limit) {
        if (a->on_inconclusive == GATE_ON_INCONCLUSIVE_ROLLBACK)
            return GATE_ANALYSIS_ROLLBACK_INCONCLUSIVE;
        if (s->consecutive_inconclusive == a->inconclusive_limit)
            return GATE_ANALYSIS_INCONCLUSIVE_HOLD;
    }
    return GATE_ANALYSIS_CONTINUE;
}

bool gate_analysis_may_end(const struct gate_analysis *a, const struct gate_streaks *s,
                           int64_t now_ms, int64_t due_ms)
{
    if (due_ms == 0 || now_ms < due_ms)
        return false;
    if (!a->enabled)
        return true;
    /* and the newest interval is not missing data: a rollout never moves on blind */
    return s->passed_in_stage > 0 && s->consecutive_failures == 0 &&
           s->consecutive_inconclusive == 0;
}
