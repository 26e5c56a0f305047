/*
 * fuzz_policy.c - Policy bodies (PUT /api/v1/models/{model}/policies/{alias})
 * through gate_policy_parse(), and gate evaluation (gate_evaluate(),
 * gate_approval_check(), gate_approval_tally()) with the parsed policy and
 * fuzzed facts about a candidate.
 *
 * Input: a JSON document. Either a Policy body as the API takes it (it is
 * then evaluated against a fixed candidate), or an envelope
 *   {"policy": Policy, "candidate": {metric: number}, "baseline": {…}|null,
 *    "baseline_version": n, "signature": "valid|invalid|missing",
 *    "image": "…"|null, "image_pinned": bool, "datasets_total": n,
 *    "datasets_unregistered": n, "vram_gib": x, "largest_gpu_gib": x,
 *    "candidate_schema": {"inputs","outputs"}, "baseline_schema": {…},
 *    "smoke": 0..4, "approvals": [{"by": "…", "approve": bool}],
 *    "include_approvals": bool}
 * whose facts fill struct gate_input (missing ones get neutral values).
 *
 * Checked besides memory safety:
 * - a policy that parses has a canonical JSON which, dumped, loaded and
 *   parsed again, gives the same canonical JSON (what PUT stores is what a
 *   later promotion snapshots);
 * - a refused policy says why (message) and leaves the output untouched;
 * - a GateReport is {"passed","pending","gates"} with one gate per configured
 *   check, each with a known status, and passed/pending agree with them;
 * - the document's "match" and "shadow" (an alias body's routing strategies, docs/contract.md
 *   "Routing strategies") through gate_routing_parse(): accepted ones hold only valid
 *   headers, values and percents; refused ones say why and which field, and write nothing.
 */
#include "fuzz.h"

#include <math.h>

#include "gates/policy.h"
#include "gates/routing.h"

#define MAX_APPROVALS 64

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

/* Round trip through the canonical form. */
static void check_canonical(const struct gate_policy *p)
{
    json_t *canon = gate_policy_to_json(p), *again_j, *canon2;
    struct gate_policy again;
    struct mg_error err = {0};
    char *text;

    FUZZ_CHECK(canon != NULL, "gate_policy_to_json returned NULL");
    text = json_dumps(canon, JSON_COMPACT);
    FUZZ_CHECK(text != NULL, "the canonical policy does not serialise");
    again_j = json_loads(text, JSON_REJECT_DUPLICATES, NULL);
    FUZZ_CHECK(again_j != NULL, "the canonical policy does not load: %s", text);
    FUZZ_CHECK(gate_policy_parse(again_j, &again, &err) == MG_OK,
               "the canonical policy %s is refused: %s (%s)", text, err.message, err.field);
    canon2 = gate_policy_to_json(&again);
    FUZZ_CHECK(canon2 != NULL && json_equal(canon, canon2), "canonical form changed: %s", text);
    json_decref(canon2);
    json_decref(again_j);
    free(text);
    json_decref(canon);
}

static double number_or(const json_t *o, const char *k, double dflt)
{
    json_t *v = json_object_get(o, k);

    return json_is_number(v) ? json_number_value(v) : dflt;
}

static size_t count_or(const json_t *o, const char *k, size_t dflt, size_t max)
{
    json_t *v = json_object_get(o, k);
    json_int_t n = json_is_integer(v) ? json_integer_value(v) : (json_int_t)dflt;

    return n < 0 ? 0 : (size_t)n > max ? max : (size_t)n;
}

static void check_report(const struct gate_policy *p, const json_t *report, bool approvals)
{
    static const char *const statuses[] = {"passed", "failed", "pending", "running", "skipped"};
    json_t *gates = json_object_get(report, "gates"), *g;
    bool failed = false, pending = false;
    size_t i, k, expected = p->nthresholds;

    FUZZ_CHECK(json_is_object(report) && json_is_array(gates), "malformed GateReport");
    expected += p->require_signature + p->require_pinned_image + p->require_registered_datasets +
                p->require_no_withdrawn_datasets + p->schema_compatible +
                (p->gpu == GATE_GPU_REQUIRED) + p->smoke_required +
                (approvals && p->approvals_required > 0);
    FUZZ_CHECK(json_array_size(gates) == expected, "%zu gates, expected %zu",
               json_array_size(gates), expected);
    json_array_foreach(gates, i, g)
    {
        const char *s = json_string_value(json_object_get(g, "status"));
        bool known = false;
        FUZZ_CHECK(json_is_object(g) && s != NULL, "gate %zu is malformed", i);
        FUZZ_CHECK(json_is_string(json_object_get(g, "name")) &&
                       json_is_string(json_object_get(g, "kind")),
                   "gate %zu has no name or kind", i);
        for (k = 0; k < sizeof(statuses) / sizeof(statuses[0]); k++)
            known = known || strcmp(s, statuses[k]) == 0;
        FUZZ_CHECK(known, "gate %zu has status '%s'", i, s);
        failed = failed || strcmp(s, "failed") == 0;
        pending = pending || strcmp(s, "pending") == 0 || strcmp(s, "running") == 0;
    }
    FUZZ_CHECK(json_is_true(json_object_get(report, "passed")) == (!failed && !pending),
               "passed disagrees with the gates");
    FUZZ_CHECK(json_is_true(json_object_get(report, "pending")) == (!failed && pending),
               "pending disagrees with the gates");
}

static void evaluate(const struct gate_policy *p, const json_t *facts)
{
    static const json_t *dflt_candidate;
    struct gate_approval approvals[MAX_APPROVALS];
    struct gate_input in;
    json_t *cand, *base, *list, *a, *report;
    const char *sig;
    size_t i, n = 0;
    bool rejected, satisfied;
    int approved;

    if (dflt_candidate == NULL)
        dflt_candidate = json_pack("{s:f, s:f}", "auc", 0.95, "p95_latency_ms", 40.0);
    memset(&in, 0, sizeof(in));
    in.policy = p;
    cand = json_object_get(facts, "candidate");
    in.candidate_metrics = json_is_object(cand) ? cand : dflt_candidate;
    base = json_object_get(facts, "baseline");
    in.baseline_metrics = json_is_object(base) ? base : NULL;
    in.baseline_version = (int64_t)count_or(facts, "baseline_version", 0, INT32_MAX);
    sig = json_string_value(json_object_get(facts, "signature"));
    in.signature = sig && strcmp(sig, "valid") == 0     ? GATE_SIG_VALID
                   : sig && strcmp(sig, "invalid") == 0 ? GATE_SIG_INVALID
                                                        : GATE_SIG_MISSING;
    in.signature_detail = json_string_value(json_object_get(facts, "signature_detail"));
    in.image = json_string_value(json_object_get(facts, "image"));
    in.image_pinned = json_is_true(json_object_get(facts, "image_pinned"));
    /* store/ counts these: never more unregistered than there are datasets. */
    in.datasets_total = count_or(facts, "datasets_total", 0, 256);
    in.datasets_unregistered = count_or(facts, "datasets_unregistered", 0, in.datasets_total);
    in.first_unregistered = json_string_value(json_object_get(facts, "first_unregistered"));
    in.has_vram = json_is_number(json_object_get(facts, "vram_gib"));
    in.vram_gib = number_or(facts, "vram_gib", 0);
    in.largest_gpu_gib = number_or(facts, "largest_gpu_gib", -1);
    in.candidate_schema = json_object_get(facts, "candidate_schema"); /* any JSON: the gate */
    in.baseline_schema = json_object_get(facts, "baseline_schema");   /* must not trust it */
    in.smoke = (enum gate_smoke)count_or(facts, "smoke", 0, GATE_SMOKE_FAILED);
    in.smoke_detail = json_string_value(json_object_get(facts, "smoke_detail"));
    list = json_object_get(facts, "approvals");
    json_array_foreach(list, i, a)
    {
        const char *by = json_string_value(json_object_get(a, "by"));
        if (n == MAX_APPROVALS || by == NULL)
            continue;
        /* gate_approval_check guards what the store keeps: only new deciders. */
        if (gate_approval_check(by, "author", NULL, 0, "creator", approvals, n, NULL) != MG_OK)
            continue;
        approvals[n].by = by;
        approvals[n].approve = json_is_true(json_object_get(a, "approve"));
        approvals[n].teams = NULL;
        approvals[n].nteams = 0;
        n++;
    }
    in.approvals = approvals;
    in.napprovals = n;

    gate_approval_tally(p, approvals, n, &rejected, &satisfied, &approved);
    FUZZ_CHECK(approved >= 0 && (size_t)approved <= n, "%d approved of %zu", approved, n);
    FUZZ_CHECK(!(rejected && satisfied), "rejected and satisfied at once");

    report = gate_evaluate(&in, true);
    FUZZ_CHECK(report != NULL, "gate_evaluate returned NULL");
    check_report(p, report, true);
    json_decref(report);
    report = gate_evaluate(&in, json_is_true(json_object_get(facts, "include_approvals")));
    FUZZ_CHECK(report != NULL, "gate_evaluate returned NULL");
    check_report(p, report, json_is_true(json_object_get(facts, "include_approvals")));
    json_decref(report);
}

/* An alias body's match rules and shadow, as PUT .../aliases/{alias} takes them. */
static void routing(const json_t *doc)
{
    json_t *match = (json_t *)0x1, *shadow = (json_t *)0x1, *r;
    struct mg_error err = {0};
    size_t i;

    if (!json_is_object(doc))
        return;
    if (gate_routing_parse(json_object_get(doc, "match"), json_object_get(doc, "shadow"), &match,
                           &shadow, &err) != MG_OK) {
        FUZZ_CHECK(err.code == MG_EINVAL && err.message[0] != '\0' && err.field[0] != '\0',
                   "routing refused with code %d, message '%s', field '%s'", (int)err.code,
                   err.message, err.field);
        FUZZ_CHECK(match == (json_t *)0x1 && shadow == (json_t *)0x1,
                   "refused routing was written out");
        return;
    }
    FUZZ_CHECK(json_is_array(match) && json_array_size(match) <= GATE_MATCH_MAX,
               "accepted match is not a short array");
    json_array_foreach(match, i, r)
    {
        json_t *h = json_object_get(r, "header"), *v = json_object_get(r, "value");

        FUZZ_CHECK(json_is_string(h) &&
                       gate_header_name_ok(json_string_value(h), json_string_length(h)) &&
                       json_is_string(v) &&
                       gate_header_value_ok(json_string_value(v), json_string_length(v)) &&
                       json_integer_value(json_object_get(r, "version")) >= 1,
                   "accepted an invalid match rule");
    }
    FUZZ_CHECK(json_is_null(shadow) ||
                   (json_integer_value(json_object_get(shadow, "version")) >= 1 &&
                    json_integer_value(json_object_get(shadow, "percent")) >= 1 &&
                    json_integer_value(json_object_get(shadow, "percent")) <= 100),
               "accepted an invalid shadow");
    json_decref(match);
    json_decref(shadow);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *doc, *body, *facts;
    struct gate_policy p, untouched;
    struct mg_error err;
    json_error_t jerr;
    enum mg_code rc;

    doc = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, &jerr);
    if (doc == NULL)
        return 0;
    routing(doc);
    body = json_object_get(doc, "policy");
    facts = body ? doc : NULL;
    if (body == NULL)
        body = doc;

    memset(&p, 0xa5, sizeof(p));
    memcpy(&untouched, &p, sizeof(p));
    memset(&err, 0, sizeof(err));
    rc = gate_policy_parse(body, &p, &err);
    if (rc != MG_OK) {
        FUZZ_CHECK(rc == MG_EINVAL && err.code == MG_EINVAL && err.message[0] != '\0',
                   "refused with code %d and message '%s'", (int)rc, err.message);
        FUZZ_CHECK(memcmp(&p, &untouched, sizeof(p)) == 0, "a refused policy was written out");
        json_decref(doc);
        return 0;
    }
    FUZZ_CHECK(p.nthresholds <= GATE_MAX_THRESHOLDS && p.nsteps >= 1 &&
                   p.nsteps <= GATE_MAX_STEPS && p.steps[p.nsteps - 1] == 100,
               "parsed policy out of range");
    check_canonical(&p);
    evaluate(&p, facts);
    json_decref(doc);
    return 0;
}
