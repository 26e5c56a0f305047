/*
 * analysis.h - live canary analysis (docs/contract.md "Live canary analysis"): the policy's
 * "analysis" block (parsing, validation, canonical JSON, placeholder expansion) and the
 * judgement of a rollout on live serving metrics, as pure functions:
 *
 *   metric samples (candidate, baseline) -> metric verdict  (gate_analysis_judge_*)
 *   metric verdicts                      -> interval verdict (gate_interval_verdict)
 *   interval history                     -> streaks          (gate_analysis_streaks)
 *   streaks + limits                     -> what to do       (gate_analysis_decide)
 *   time + streaks                       -> may the phase end (gate_analysis_may_end)
 *
 * No I/O, no clock: every fact is an argument. Thread-safe.
 */
#ifndef GATE_ANALYSIS_H
#define GATE_ANALYSIS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "../base/mg.h"

#define GATE_ANALYSIS_MAX_METRICS 8
#define GATE_ANALYSIS_QUERY_MAX 2048 /* bytes of one PromQL template */
#define GATE_ANALYSIS_URL_MAX 512
#define GATE_ANALYSIS_NAME_MAX 64
#define GATE_ANALYSIS_INTERVALS_KEPT 500 /* promotion "analysis.intervals" */

enum gate_metric_kind { GATE_METRIC_VALUE, GATE_METRIC_RATIO };

enum gate_on_inconclusive { GATE_ON_INCONCLUSIVE_HOLD, GATE_ON_INCONCLUSIVE_ROLLBACK };

struct gate_analysis_metric {
    char name[GATE_ANALYSIS_NAME_MAX + 1];
    enum gate_metric_kind kind;
    /* value: q[0] is "query". ratio: q[0] is "errors", q[1] is "total". */
    char q[2][GATE_ANALYSIS_QUERY_MAX + 1];
    bool has_max, has_min, has_max_regression, has_max_regression_pct, has_max_increase;
    double max, min, max_regression, max_regression_pct, max_increase;
    double min_total;  /* ratio: fewer candidate requests → inconclusive */
    double confidence; /* ratio: of the one-sided two-proportion test, in (0.5, 1) */
};

struct gate_analysis {
    bool enabled;                        /* the policy has an "analysis" block */
    char url[GATE_ANALYSIS_URL_MAX + 1]; /* provider.url; "" → the server's --prometheus-url */
    int64_t interval_seconds;
    int failure_limit;
    int inconclusive_limit;
    enum gate_on_inconclusive on_inconclusive;
    struct gate_analysis_metric metrics[GATE_ANALYSIS_MAX_METRICS];
    size_t nmetrics;
};

/*
 * Parse and validate a policy's "analysis" value into *out (which is written only on
 * success). MG_EINVAL with the JSON path ("analysis.metrics[1].max", ...) in err->field
 * and a sentence saying what to fix; unknown placeholders are named.
 */
enum mg_code gate_analysis_parse(const json_t *j, struct gate_analysis *out, struct mg_error *err);

/* The canonical JSON (every field present), NEW; NULL when !a->enabled. */
json_t *gate_analysis_to_json(const struct gate_analysis *a);

/* ---- placeholders ------------------------------------------------------ */

/* What the placeholders of a query stand for when one version is measured (BORROWED
 * strings; NULL when the alias has no gateway that names it so). */
struct gate_placeholders {
    const char *model, *alias, *version, *interval;
    const char *haproxy_backend, *haproxy_server, *nginx_upstream;
};

/*
 * Expand {{model}}, {{alias}}, {{version}}, {{interval}}, {{haproxy.backend}},
 * {{haproxy.server}}, {{nginx.upstream}} in tmpl into out (cap bytes, NUL-terminated);
 * substituted values are escaped for a PromQL string literal (\ and " and newlines).
 * MG_EINVAL naming the placeholder when it has no value here (no such gateway), or an
 * unknown one; MG_ETOOBIG when the result does not fit.
 */
enum mg_code gate_analysis_expand(const char *tmpl, const struct gate_placeholders *v, char *out,
                                  size_t cap, struct mg_error *err);

/* ---- judgement --------------------------------------------------------- */

enum gate_verdict { GATE_VERDICT_PASSED, GATE_VERDICT_FAILED, GATE_VERDICT_INCONCLUSIVE };

/* "passed", "failed", "inconclusive"; and back (false for anything else). */
const char *gate_verdict_name(enum gate_verdict v);
bool gate_verdict_parse(const char *s, enum gate_verdict *out);

/* One answer from the provider. */
enum gate_sample_state {
    GATE_SAMPLE_OK,     /* a finite number */
    GATE_SAMPLE_NODATA, /* an empty vector */
    GATE_SAMPLE_ERROR,  /* the provider erred, timed out or answered nonsense */
};

struct gate_sample {
    enum gate_sample_state state;
    double value;       /* GATE_SAMPLE_OK */
    const char *detail; /* GATE_SAMPLE_ERROR: why (BORROWED), may be NULL */
};

/* A metric's verdict for one interval, with the values to show (NAN when none). */
struct gate_metric_result {
    enum gate_verdict verdict;
    double candidate, baseline; /* value, or ratio's rate */
    char detail[320];
};

/*
 * kind value. has_baseline false: the promotion has no baseline version (relative bounds
 * are skipped, as threshold gates do); true: base is the baseline's sample, and a relative
 * bound with no baseline data is inconclusive.
 */
void gate_analysis_judge_value(const struct gate_analysis_metric *m, const struct gate_sample *cand,
                               bool has_baseline, const struct gate_sample *base,
                               struct gate_metric_result *out);

/*
 * kind ratio: rate = errors / total. An empty errors vector with a total reads as 0
 * errors (no series of that error code yet). Inconclusive while the candidate's total is
 * below min_total; failed when the rate is over max, or over the baseline's by more than
 * max_increase and gate_two_proportion_higher() at the metric's confidence.
 */
void gate_analysis_judge_ratio(const struct gate_analysis_metric *m,
                               const struct gate_sample *cand_errors,
                               const struct gate_sample *cand_total, bool has_baseline,
                               const struct gate_sample *base_errors,
                               const struct gate_sample *base_total,
                               struct gate_metric_result *out);

/*
 * One-sided two-proportion z-test (pooled, with Yates' continuity correction): is the rate e1/n1
 * higher than e2/n2 at `confidence` (e.g. 0.95)? Counts may be fractional (Prometheus increase()).
 * False when either n is not positive or the pooled rate is 0 or 1. *p_value (may be NULL) gets the
 * one-sided p-value (1 when the test cannot run).
 */
bool gate_two_proportion_higher(double e1, double n1, double e2, double n2, double confidence,
                                double *p_value);

/* failed if any failed; else inconclusive if any inconclusive; else passed (also for 0). */
enum gate_verdict gate_interval_verdict(const enum gate_verdict *metrics, size_t n);

/* One recorded interval, as streaks need it. */
struct gate_interval {
    enum gate_verdict verdict;
    int phase;      /* enum promo_phase of the rollout when it was measured */
    int step_index; /* the step, -1 in shadow and internal */
};

struct gate_streaks {
    int consecutive_failures;     /* failed intervals since the last passed one (an
                                   * inconclusive one neither adds nor ends the streak) */
    int consecutive_inconclusive; /* inconclusive intervals since the last conclusive one */
    int passed_in_stage;          /* passed intervals of (phase, step_index) */
};

/* Streaks over the history, newest FIRST, for the stage (phase, step_index) the rollout
 * is in now. */
void gate_analysis_streaks(const struct gate_interval *hist, size_t n, int phase, int step_index,
                           struct gate_streaks *out);

enum gate_analysis_action {
    GATE_ANALYSIS_CONTINUE,              /* keep measuring */
    GATE_ANALYSIS_ROLLBACK_FAILED,       /* failure_limit reached */
    GATE_ANALYSIS_INCONCLUSIVE_HOLD,     /* inconclusive_limit just reached: say so, stay */
    GATE_ANALYSIS_ROLLBACK_INCONCLUSIVE, /* inconclusive_limit reached, on_inconclusive
                                          * rollback */
};

/* After an interval was recorded: what now? HOLD is answered once, when the streak
 * reaches the limit exactly (the event is not repeated every interval). */
enum gate_analysis_action gate_analysis_decide(const struct gate_analysis *a,
                                               const struct gate_streaks *s);

/*
 * May the rollout leave its phase or step now? Only after its time (due_ms, 0: no timer
 * is never due) AND at least one passed interval in it AND with no failure streak open AND
 * the newest interval not inconclusive (missing data now never moves a rollout on).
 * Without analysis, the time alone decides.
 */
bool gate_analysis_may_end(const struct gate_analysis *a, const struct gate_streaks *s,
                           int64_t now_ms, int64_t due_ms);

#endif
