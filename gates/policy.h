/*
 * policy.h - promotion policies: parsing and validation, and the pure gate
 * evaluation that turns a policy plus facts about a candidate into a
 * GateReport (docs/contract.md "Policies").
 *
 * No I/O, no clock, no database: every fact is an argument. Uses jansson for
 * the JSON shapes it parses and produces. Thread-safe.
 */
#ifndef GATE_POLICY_H
#define GATE_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "../base/mg.h"
#include "analysis.h"
#include "routing.h"

#define GATE_MAX_THRESHOLDS 64
#define GATE_MAX_STEPS 16
#define GATE_MAX_APPROVALS 16

enum gate_op { GATE_OP_GE, GATE_OP_GT, GATE_OP_LE, GATE_OP_LT, GATE_OP_EQ };

struct gate_threshold {
    char metric[129];
    enum gate_op op;
    bool baseline; /* relative to the baseline's value */
    double value;  /* absolute threshold (baseline == false) */
    bool has_regression, has_regression_pct;
    double max_regression, max_regression_pct;
};

enum gate_gpu { GATE_GPU_NONE, GATE_GPU_PREFERRED, GATE_GPU_REQUIRED };

#define GATE_MAX_GROUPS 8

/* At least `min` of the approvals come from tokens of `team` (docs/contract.md "Teams"). */
struct gate_approval_group {
    char team[64];
    int min;
};

struct gate_policy {
    struct gate_threshold thresholds[GATE_MAX_THRESHOLDS];
    size_t nthresholds;
    int approvals_required;
    struct gate_approval_group groups[GATE_MAX_GROUPS];
    size_t ngroups;
    bool require_signature;
    bool require_pinned_image;
    bool require_registered_datasets;
    bool require_no_withdrawn_datasets; /* docs/contract.md "Lifecycle": withdrawn data blocks */
    bool schema_compatible;             /* "schema":{"compatible_with_baseline":true} */
    bool smoke_required;
    bool scan_required; /* "scan":{"required":true}: the artifact scanned clean */
    enum gate_gpu gpu;
    int steps[GATE_MAX_STEPS]; /* increasing, ending at 100 */
    size_t nsteps;
    int64_t bake_seconds;
    bool auto_advance;
    /* Phases before the steps (docs/contract.md "Routing strategies"): the candidate first gets a
     * copy of every request for shadow_seconds (0: no shadow phase), then only the requests whose
     * internal_header equals internal_value for internal_seconds (has_internal). */
    int64_t shadow_seconds;
    bool has_internal;
    char internal_header[GATE_HEADER_NAME_MAX + 1];
    char internal_value[GATE_HEADER_VALUE_MAX + 1];
    int64_t internal_seconds;
    /* Live canary analysis (docs/contract.md "Live canary analysis"); analysis.enabled false: none.
     */
    struct gate_analysis analysis;
};

/* The empty policy: no gates, one step to 100%, auto-advance. */
void gate_policy_empty(struct gate_policy *p);

/* Parse and validate a Policy body. MG_EINVAL with the JSON path in
 * err->field and a sentence saying what to fix. */
enum mg_code gate_policy_parse(const json_t *j, struct gate_policy *out, struct mg_error *err);

/* The canonical JSON of a policy (every field present). NEW reference. */
json_t *gate_policy_to_json(const struct gate_policy *p);

/* "auc>=0.9"-style operator text, and back. */
const char *gate_op_name(enum gate_op op);
bool gate_op_parse(const char *s, enum gate_op *op);

/* ---- evaluation ------------------------------------------------------- */

enum gate_sig { GATE_SIG_MISSING, GATE_SIG_INVALID, GATE_SIG_VALID };

enum gate_smoke {
    GATE_SMOKE_NONE, /* no test recorded yet */
    GATE_SMOKE_QUEUED,
    GATE_SMOKE_RUNNING,
    GATE_SMOKE_PASSED,
    GATE_SMOKE_FAILED,
};

struct gate_approval {
    const char *by;
    bool approve;
    const char *const *teams; /* the approver's teams when deciding (BORROWED), or NULL */
    size_t nteams;
};

/*
 * What a version's smoke tests measured of serving it (docs/contract.md "Quotas and cost"), for the
 * thresholds on the metrics GATE_METRIC_THROUGHPUT and GATE_METRIC_COST: taken from its
 * latest passed test (smoke GATE_SMOKE_PASSED); without one, smoke is the state of its newest
 * test (GATE_SMOKE_NONE: none), and a threshold on them is pending while a test is queued or
 * running (or none yet but the policy requires one) and failed otherwise, saying why.
 */
#define GATE_METRIC_THROUGHPUT "throughput_rps"
#define GATE_METRIC_COST "cost_per_1k_requests"
struct gate_serving {
    enum gate_smoke smoke;
    bool has_rps, has_cost;
    double rps, cost_per_1k;
    const char *profile; /* the passed test's smoke profile, or NULL */
};

/* Everything the gates look at; metrics are JSON objects name → number. */
struct gate_input {
    const struct gate_policy *policy;
    const json_t *candidate_metrics;
    const json_t *baseline_metrics; /* NULL when there is no baseline */
    /* Serving measurements (NULL: nothing known, as GATE_SMOKE_NONE); the baseline's only
     * count when it has a passed test with the value. */
    const struct gate_serving *candidate_serving;
    const struct gate_serving *baseline_serving;
    int64_t baseline_version; /* 0 when none */

    enum gate_sig signature;
    const char *signature_detail; /* why invalid, or NULL */

    const char *image; /* NULL when the version names none */
    bool image_pinned;

    size_t datasets_total;
    size_t datasets_unregistered;
    const char *first_unregistered; /* a digest, or NULL */
    size_t datasets_withdrawn;      /* withdrawn datasets it was trained on, directly or not */
    const char *first_withdrawn;    /* a digest, or NULL */

    /* Input/output schemas (gate_version_schema()); NULL when the version has none. */
    const json_t *candidate_schema;
    const json_t *baseline_schema;

    bool has_vram;
    double vram_gib;
    double largest_gpu_gib; /* < 0 when the runner reports no GPU */

    enum gate_smoke smoke;
    const char *smoke_detail;

    /* The version's safety scan report ({"verdict","findings"}), or NULL when it has none. */
    const json_t *scan;

    const struct gate_approval *approvals;
    size_t napprovals;
};

/*
 * Evaluate every gate of the policy. Returns a NEW GateReport:
 * {"passed","pending","gates":[{"name","kind","status","observed","expected","detail"}]}.
 * passed: no gate failed and none is pending. pending: none failed, some
 * pending (approvals not yet given, smoke not yet run). With
 * include_approvals false the approval gate is left out (the dry run for CI
 * and the pre-approval phase).
 */
json_t *gate_evaluate(const struct gate_input *in, bool include_approvals);

/* Can `by` decide on a promotion? MG_ESELFAPPROVAL when by is the version's
 * author, one of the `ncontrib` names that changed the version's gate inputs since
 * (appended a metric), or the promotion's creator; MG_ECONFLICT when by already
 * decided. contributors may be NULL when ncontrib is 0. */
/*
 * Whether two credentials belong to the same person (docs/contract.md "Identity": separation of
 * duties compares people): both name an issuer and a subject, and both are equal. A
 * credential without a person (NULL or "") is nobody's, and the same as nobody.
 */
bool gate_same_person(const char *issuer_a, const char *subject_a, const char *issuer_b,
                      const char *subject_b);

/* The first approval group still short of its minimum, as "risk: 0 of 1" in buf (empty
 * when every group is satisfied). Counts distinct approvers who approved. */
const char *gate_approval_missing(const struct gate_policy *p, const struct gate_approval *a,
                                  size_t n, char *buf, size_t cap);

enum mg_code gate_approval_check(const char *by, const char *version_author,
                                 const char *const *contributors, size_t ncontrib,
                                 const char *promotion_creator,
                                 const struct gate_approval *existing, size_t n,
                                 struct mg_error *err);

/* Approval tally: rejected (any reject), satisfied (>= required approvals). */
void gate_approval_tally(const struct gate_policy *p, const struct gate_approval *a, size_t n,
                         bool *rejected, bool *satisfied, int *approved);

#endif
