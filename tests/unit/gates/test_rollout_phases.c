/*
 * test_rollout_phases.c - gates/rollout.c, the rollout phases before the steps (docs/contract.md
 * "Routing strategies": the candidate first gets shadow traffic while its smoke tests run,
 * then only requests with the internal header, then the weighted steps; a failure in any
 * phase rolls back): every phase against every event, phase names, and promo_init.
 *
 * The table checks every row and reports each mismatch before failing (test_rollout.c has
 * the states and steps without phases, and last-known-good).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "gates/rollout.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

#define BASE 1        /* the baseline version */
#define CAND 5        /* the candidate version */
#define T 100000      /* "now", ms since the epoch */
#define BAKE 1000     /* bake time of a step, ms */
#define SHADOW 3000   /* length of the shadow phase, ms */
#define INTERNAL 2000 /* length of the internal phase, ms */

/* Steps [10, 100]; shadow and internal phases as asked (sh: shadow phase; in: internal). */
#define P(st, base, autoadv, ph, idx, w, next, sh, in)                                             \
    {                                                                                              \
        .state = (st), .candidate = CAND, .baseline = (base), .steps = {10, 100}, .nsteps = 2,     \
        .bake_ms = BAKE, .auto_advance = (autoadv), .approvals_required = 0, .step_index = (idx),  \
        .weight = (w), .next_step_at = (next), .phase = (ph), .shadow_ms = (sh) ? SHADOW : 0,      \
        .has_internal = (in), .internal_header = "x-canary", .internal_value = "1",                \
        .internal_ms = INTERNAL                                                                    \
    }

/* Before the rollout: gates are being evaluated (no approvals needed). */
#define EVAL_BOTH P(PROMO_EVALUATING, BASE, true, PROMO_PHASE_NONE, -1, 0, 0, true, true)
#define EVAL_SHADOW P(PROMO_EVALUATING, BASE, true, PROMO_PHASE_NONE, -1, 0, 0, true, false)
#define EVAL_INTERNAL P(PROMO_EVALUATING, BASE, true, PROMO_PHASE_NONE, -1, 0, 0, false, true)
#define EVAL_NONE P(PROMO_EVALUATING, BASE, true, PROMO_PHASE_NONE, -1, 0, 0, false, false)
#define EVAL_NOBASE P(PROMO_EVALUATING, 0, true, PROMO_PHASE_NONE, -1, 0, 0, true, true)
#define EVAL_MANUAL P(PROMO_EVALUATING, BASE, false, PROMO_PHASE_NONE, -1, 0, 0, true, true)
#define AWAIT_BOTH P(PROMO_AWAITING_APPROVAL, BASE, true, PROMO_PHASE_NONE, -1, 0, 0, true, true)
/* In the shadow phase, its end due at T. */
#define SHADOWING P(PROMO_ROLLING_OUT, BASE, true, PROMO_PHASE_SHADOW, -1, 0, T, true, true)
#define SHADOWING_ONLY P(PROMO_ROLLING_OUT, BASE, true, PROMO_PHASE_SHADOW, -1, 0, T, true, false)
#define SHADOWING_MANUAL P(PROMO_ROLLING_OUT, BASE, false, PROMO_PHASE_SHADOW, -1, 0, 0, true, true)
/* In the internal phase, its end due at T. */
#define INTERNAL_PH P(PROMO_ROLLING_OUT, BASE, true, PROMO_PHASE_INTERNAL, -1, 0, T, true, true)
/* At step 0 (10%), the next step due at T. */
#define STEPPING P(PROMO_ROLLING_OUT, BASE, true, PROMO_PHASE_STEPS, 0, 10, T, true, true)

#define EV(k)                                                                                      \
    {                                                                                              \
        .kind = (k)                                                                                \
    }
#define EV_PENDING(k)                                                                              \
    {                                                                                              \
        .kind = (k), .smoke_pending = true                                                         \
    }
#define EV_GATES_OK                                                                                \
    {                                                                                              \
        .kind = PROMO_EV_GATES                                                                     \
    }
#define EV_APPROVED                                                                                \
    {                                                                                              \
        .kind = PROMO_EV_APPROVALS, .satisfied = true                                              \
    }

/* What a row expects of the routes the actions set. */
enum want_routes {
    NONE,      /* set_routes false */
    BASE_ONLY, /* [{BASE, 100}] */
    SPLIT_10,  /* [{BASE, 90}, {CAND, 10}] */
    CAND_ONLY, /* [{CAND, 100}] */
};

struct row {
    const char *what;
    struct promo start;
    struct promo_event ev;
    int64_t now;
    bool conflict; /* MG_ECONFLICT: nothing else is checked */
    bool same;     /* MG_OK, the promotion unchanged and no actions: nothing else checked */
    enum promo_state state;
    enum promo_phase phase;
    int step_index, weight;
    int64_t next_step_at;
    enum want_routes routes;
    bool restore;
    bool match;     /* the internal rule: x-canary = 1 → CAND */
    int64_t shadow; /* the shadow version, 0 for none */
    const char *event;
};

#define REFUSED(what, start, ev)                                                                   \
    {                                                                                              \
        what, start, ev, T, true, false, 0, 0, 0, 0, 0, NONE, false, false, 0, ""                  \
    }
/* Nothing due: the promotion stays as it was, no actions. */
#define UNCHANGED(what, start, ev, now)                                                            \
    {                                                                                              \
        what, start, ev, now, false, true, 0, 0, 0, 0, 0, NONE, false, false, 0, ""                \
    }

static const struct row rows[] = {
    /* ---- the rollout begins ---- */
    {"begin: shadow first", EVAL_BOTH, EV_GATES_OK, T, false, false, PROMO_ROLLING_OUT,
     PROMO_PHASE_SHADOW, -1, 0, T + SHADOW, BASE_ONLY, false, false, CAND, "shadow"},
    {"begin: shadow only", EVAL_SHADOW, EV_GATES_OK, T, false, false, PROMO_ROLLING_OUT,
     PROMO_PHASE_SHADOW, -1, 0, T + SHADOW, BASE_ONLY, false, false, CAND, "shadow"},
    {"begin: internal only", EVAL_INTERNAL, EV_GATES_OK, T, false, false, PROMO_ROLLING_OUT,
     PROMO_PHASE_INTERNAL, -1, 0, T + INTERNAL, BASE_ONLY, false, true, 0, "internal"},
    {"begin: no phases", EVAL_NONE, EV_GATES_OK, T, false, false, PROMO_ROLLING_OUT,
     PROMO_PHASE_STEPS, 0, 10, T + BAKE, SPLIT_10, false, false, 0, "step"},
    /* nothing to mirror, nothing for other requests to fall back on */
    {"begin: no baseline skips the phases", EVAL_NOBASE, EV_GATES_OK, T, false, false,
     PROMO_ROLLING_OUT, PROMO_PHASE_STEPS, 0, 100, T + BAKE, CAND_ONLY, false, false, 0, "step"},
    {"begin: auto_advance false sets no timer", EVAL_MANUAL, EV_GATES_OK, T, false, false,
     PROMO_ROLLING_OUT, PROMO_PHASE_SHADOW, -1, 0, 0, BASE_ONLY, false, false, CAND, "shadow"},
    {"begin: after the approvals", AWAIT_BOTH, EV_APPROVED, T, false, false, PROMO_ROLLING_OUT,
     PROMO_PHASE_SHADOW, -1, 0, T + SHADOW, BASE_ONLY, false, false, CAND, "shadow"},
    UNCHANGED("before the rollout: tick", EVAL_BOTH, EV(PROMO_EV_TICK), T + 10 * SHADOW),
    REFUSED("before the rollout: advance", EVAL_BOTH, EV(PROMO_EV_ADVANCE)),

    /* ---- shadow ---- */
    REFUSED("shadow: gates", SHADOWING, EV_GATES_OK),
    REFUSED("shadow: approvals", SHADOWING, EV_APPROVED),
    UNCHANGED("shadow: tick before its end", SHADOWING, EV(PROMO_EV_TICK), T - 1),
    /* the shadow phase never ends before the candidate's smoke test passed */
    UNCHANGED("shadow: tick at its end, smoke test running", SHADOWING, EV_PENDING(PROMO_EV_TICK),
              T),
    UNCHANGED("shadow: tick long after, smoke test running", SHADOWING, EV_PENDING(PROMO_EV_TICK),
              T + 10 * SHADOW),
    {"shadow: tick at its end: internal", SHADOWING, EV(PROMO_EV_TICK), T, false, false,
     PROMO_ROLLING_OUT, PROMO_PHASE_INTERNAL, -1, 0, T + INTERNAL, BASE_ONLY, false, true, 0,
     "internal"},
    {"shadow: tick after its end, no internal phase: first step", SHADOWING_ONLY, EV(PROMO_EV_TICK),
     T + 7, false, false, PROMO_ROLLING_OUT, PROMO_PHASE_STEPS, 0, 10, T + 7 + BAKE, SPLIT_10,
     false, false, 0, "step"},
    UNCHANGED("shadow: tick, auto_advance false", SHADOWING_MANUAL, EV(PROMO_EV_TICK),
              T + 10 * SHADOW),
    {"shadow: advance early", SHADOWING, EV(PROMO_EV_ADVANCE), T - 500, false, false,
     PROMO_ROLLING_OUT, PROMO_PHASE_INTERNAL, -1, 0, T - 500 + INTERNAL, BASE_ONLY, false, true, 0,
     "internal"},
    {"shadow: advance, auto_advance false", SHADOWING_MANUAL, EV(PROMO_EV_ADVANCE), T, false, false,
     PROMO_ROLLING_OUT, PROMO_PHASE_INTERNAL, -1, 0, 0, BASE_ONLY, false, true, 0, "internal"},
    REFUSED("shadow: advance while the smoke test runs", SHADOWING, EV_PENDING(PROMO_EV_ADVANCE)),
    {"shadow: abort", SHADOWING, EV(PROMO_EV_ABORT), T, false, false, PROMO_ABORTED,
     PROMO_PHASE_SHADOW, -1, 0, 0, BASE_ONLY, true, false, 0, "aborted"},
    {"shadow: rollback of the alias", SHADOWING, EV(PROMO_EV_ROLLBACK), T, false, false,
     PROMO_ROLLED_BACK, PROMO_PHASE_SHADOW, -1, 0, 0, NONE, false, false, 0, "rolled_back"},
    {"shadow: smoke test failed", SHADOWING, EV(PROMO_EV_SMOKE_FAILED), T, false, false,
     PROMO_ROLLED_BACK, PROMO_PHASE_SHADOW, -1, 0, 0, BASE_ONLY, true, false, 0, "rolled_back"},
    {"shadow: delivery failed", SHADOWING, EV(PROMO_EV_DELIVERY_FAILED), T, false, false,
     PROMO_ROLLED_BACK, PROMO_PHASE_SHADOW, -1, 0, 0, BASE_ONLY, true, false, 0, "rolled_back"},

    /* ---- internal ---- */
    REFUSED("internal: gates", INTERNAL_PH, EV_GATES_OK),
    REFUSED("internal: approvals", INTERNAL_PH, EV_APPROVED),
    UNCHANGED("internal: tick before its end", INTERNAL_PH, EV(PROMO_EV_TICK), T - 1),
    {"internal: tick at its end: first step", INTERNAL_PH, EV(PROMO_EV_TICK), T, false, false,
     PROMO_ROLLING_OUT, PROMO_PHASE_STEPS, 0, 10, T + BAKE, SPLIT_10, false, false, 0, "step"},
    /* only the shadow phase waits for a smoke test */
    {"internal: tick at its end, smoke test running", INTERNAL_PH, EV_PENDING(PROMO_EV_TICK), T,
     false, false, PROMO_ROLLING_OUT, PROMO_PHASE_STEPS, 0, 10, T + BAKE, SPLIT_10, false, false, 0,
     "step"},
    {"internal: advance", INTERNAL_PH, EV(PROMO_EV_ADVANCE), T - 900, false, false,
     PROMO_ROLLING_OUT, PROMO_PHASE_STEPS, 0, 10, T - 900 + BAKE, SPLIT_10, false, false, 0,
     "step"},
    {"internal: abort", INTERNAL_PH, EV(PROMO_EV_ABORT), T, false, false, PROMO_ABORTED,
     PROMO_PHASE_INTERNAL, -1, 0, 0, BASE_ONLY, true, false, 0, "aborted"},
    {"internal: rollback of the alias", INTERNAL_PH, EV(PROMO_EV_ROLLBACK), T, false, false,
     PROMO_ROLLED_BACK, PROMO_PHASE_INTERNAL, -1, 0, 0, NONE, false, false, 0, "rolled_back"},
    {"internal: smoke test failed", INTERNAL_PH, EV(PROMO_EV_SMOKE_FAILED), T, false, false,
     PROMO_ROLLED_BACK, PROMO_PHASE_INTERNAL, -1, 0, 0, BASE_ONLY, true, false, 0, "rolled_back"},
    {"internal: delivery failed", INTERNAL_PH, EV(PROMO_EV_DELIVERY_FAILED), T, false, false,
     PROMO_ROLLED_BACK, PROMO_PHASE_INTERNAL, -1, 0, 0, BASE_ONLY, true, false, 0, "rolled_back"},

    /* ---- steps ---- */
    REFUSED("steps: gates", STEPPING, EV_GATES_OK),
    REFUSED("steps: approvals", STEPPING, EV_APPROVED),
    UNCHANGED("steps: tick before the step is due", STEPPING, EV(PROMO_EV_TICK), T - 1),
    {"steps: tick due: the last step", STEPPING, EV(PROMO_EV_TICK), T, false, false,
     PROMO_SUCCEEDED, PROMO_PHASE_STEPS, 1, 100, 0, CAND_ONLY, false, false, 0, "succeeded"},
    {"steps: tick due, smoke test running", STEPPING, EV_PENDING(PROMO_EV_TICK), T, false, false,
     PROMO_SUCCEEDED, PROMO_PHASE_STEPS, 1, 100, 0, CAND_ONLY, false, false, 0, "succeeded"},
    {"steps: advance", STEPPING, EV(PROMO_EV_ADVANCE), T - 900, false, false, PROMO_SUCCEEDED,
     PROMO_PHASE_STEPS, 1, 100, 0, CAND_ONLY, false, false, 0, "succeeded"},
    {"steps: abort", STEPPING, EV(PROMO_EV_ABORT), T, false, false, PROMO_ABORTED,
     PROMO_PHASE_STEPS, 0, 0, 0, BASE_ONLY, true, false, 0, "aborted"},
    {"steps: rollback of the alias", STEPPING, EV(PROMO_EV_ROLLBACK), T, false, false,
     PROMO_ROLLED_BACK, PROMO_PHASE_STEPS, 0, 0, 0, NONE, false, false, 0, "rolled_back"},
    {"steps: smoke test failed", STEPPING, EV(PROMO_EV_SMOKE_FAILED), T, false, false,
     PROMO_ROLLED_BACK, PROMO_PHASE_STEPS, 0, 0, 0, BASE_ONLY, true, false, 0, "rolled_back"},
    {"steps: delivery failed", STEPPING, EV(PROMO_EV_DELIVERY_FAILED), T, false, false,
     PROMO_ROLLED_BACK, PROMO_PHASE_STEPS, 0, 0, 0, BASE_ONLY, true, false, 0, "rolled_back"},
};

static size_t check_routes(const struct row *w, const struct promo_actions *a)
{
    static const struct {
        size_t n;
        struct promo_route r[2];
    } want[] = {
        [NONE] = {0, {{0, 0}}},
        [BASE_ONLY] = {1, {{BASE, 100}}},
        [SPLIT_10] = {2, {{BASE, 90}, {CAND, 10}}},
        [CAND_ONLY] = {1, {{CAND, 100}}},
    };
    size_t i;

    if (a->set_routes != (w->routes != NONE)) {
        print_error("%s: set_routes %d\n", w->what, a->set_routes);
        return 1;
    }
    if (w->routes == NONE)
        return 0;
    if (a->nroutes != want[w->routes].n) {
        print_error("%s: %zu route(s), want %zu\n", w->what, a->nroutes, want[w->routes].n);
        return 1;
    }
    for (i = 0; i < a->nroutes; i++) {
        if (a->routes[i].version != want[w->routes].r[i].version ||
            a->routes[i].weight != want[w->routes].r[i].weight) {
            print_error("%s: routes[%zu] = {v%lld, %d}\n", w->what, i,
                        (long long)a->routes[i].version, a->routes[i].weight);
            return 1;
        }
    }
    return 0;
}

static size_t check(const struct row *w, const struct promo *n, const struct promo_actions *a)
{
    size_t bad = 0;

#define WANT(cond, ...)                                                                            \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            print_error(__VA_ARGS__);                                                              \
            bad++;                                                                                 \
        }                                                                                          \
    } while (0)
    WANT(n->state == w->state, "%s: state %s, want %s\n", w->what, promo_state_name(n->state),
         promo_state_name(w->state));
    WANT(n->phase == w->phase, "%s: phase %d, want %d\n", w->what, (int)n->phase, (int)w->phase);
    WANT(n->step_index == w->step_index, "%s: step_index %d, want %d\n", w->what, n->step_index,
         w->step_index);
    WANT(n->weight == w->weight, "%s: weight %d, want %d\n", w->what, n->weight, w->weight);
    WANT(n->next_step_at == w->next_step_at, "%s: next_step_at %lld, want %lld\n", w->what,
         (long long)n->next_step_at, (long long)w->next_step_at);
    WANT(n->shadow_ms == w->start.shadow_ms && n->has_internal == w->start.has_internal &&
             n->internal_ms == w->start.internal_ms && n->candidate == CAND &&
             n->baseline == w->start.baseline,
         "%s: the plan changed\n", w->what);
    bad += check_routes(w, a);
    WANT(a->restore == w->restore, "%s: restore %d, want %d\n", w->what, a->restore, w->restore);
    /* A promotion's change is the whole generation: no rule or shadow but the phase's. */
    WANT(!a->set_routes || a->has_match == w->match, "%s: has_match %d, want %d\n", w->what,
         a->has_match, w->match);
    WANT(!w->match || (strcmp(a->match_header, "x-canary") == 0 &&
                       strcmp(a->match_value, "1") == 0 && a->match_version == CAND),
         "%s: match rule %s: %s -> v%lld\n", w->what, a->match_header, a->match_value,
         (long long)a->match_version);
    WANT(!a->set_routes || a->shadow == w->shadow, "%s: shadow v%lld, want v%lld\n", w->what,
         (long long)a->shadow, (long long)w->shadow);
    WANT(strcmp(a->event, w->event) == 0, "%s: event \"%s\", want \"%s\"\n", w->what, a->event,
         w->event);
    WANT(a->event[0] == '\0' || a->detail[0] != '\0', "%s: event without a detail\n", w->what);
#undef WANT
    return bad;
}

static void test_phase_table(void **state)
{
    size_t i, bad = 0;

    (void)state;
    for (i = 0; i < N_ELEMS(rows); i++) {
        const struct row *w = &rows[i];
        struct promo next, sentinel_p;
        struct promo_actions acts, sentinel_a;
        struct mg_error err;
        enum mg_code rc;

        memset(&next, 0xA5, sizeof(next));
        memset(&acts, 0xA5, sizeof(acts));
        memcpy(&sentinel_p, &next, sizeof(next));
        memcpy(&sentinel_a, &acts, sizeof(acts));
        memset(&err, 0, sizeof(err));
        rc = promo_step(&w->start, &w->ev, w->now, &next, &acts, &err);
        if (w->conflict) {
            if (rc != MG_ECONFLICT || err.code != MG_ECONFLICT || err.message[0] == '\0' ||
                memcmp(&next, &sentinel_p, sizeof(next)) != 0 ||
                memcmp(&acts, &sentinel_a, sizeof(acts)) != 0) {
                print_error("%s: rc %d, want a refusal that changes nothing (%s)\n", w->what, rc,
                            err.message);
                bad++;
            }
            continue;
        }
        if (rc != MG_OK) {
            print_error("%s: rc %d (%s)\n", w->what, rc, err.message);
            bad++;
            continue;
        }
        if (w->same) {
            if (memcmp(&next, &w->start, sizeof(next)) != 0 || acts.set_routes ||
                acts.event[0] != '\0') {
                print_error("%s: changed (%s, phase %d, event \"%s\")\n", w->what,
                            promo_state_name(next.state), (int)next.phase, acts.event);
                bad++;
            }
            continue;
        }
        bad += check(w, &next, &acts);
    }
    assert_int_equal(bad, 0);
}

/* The event log says where the rollout was when it rolled back, and what each phase does. */
static void test_phase_details(void **state)
{
    static const struct {
        struct promo start;
        struct promo_event ev;
        const char *part;
    } cases[] = {
        {SHADOWING,
         {.kind = PROMO_EV_SMOKE_FAILED, .reason = "smoke test of v5 failed: boom"},
         "automatic rollback during the shadow phase: smoke test of v5 failed: boom"},
        {INTERNAL_PH, {.kind = PROMO_EV_DELIVERY_FAILED}, "during the internal phase"},
        {EVAL_BOTH, {.kind = PROMO_EV_GATES}, "v5 gets a copy of every request for 3 s"},
        {SHADOWING, {.kind = PROMO_EV_TICK}, "requests with x-canary: 1 go to v5 for 2 s"},
        {STEPPING, {.kind = PROMO_EV_SMOKE_FAILED}, "automatic rollback: smoke test failed"},
        {EVAL_NOBASE, {.kind = PROMO_EV_GATES}, "the shadow and internal phases are skipped"},
    };
    size_t i;

    (void)state;
    for (i = 0; i < N_ELEMS(cases); i++) {
        struct promo next;
        struct promo_actions acts;
        struct mg_error err;

        assert_int_equal(promo_step(&cases[i].start, &cases[i].ev, T, &next, &acts, &err), MG_OK);
        if (strstr(acts.detail, cases[i].part) == NULL)
            fail_msg("case %zu: detail \"%s\" lacks \"%s\"", i, acts.detail, cases[i].part);
    }
}

/* From the gates to success through every phase, driven by the clock alone. */
static void test_phase_walk(void **state)
{
    static const struct {
        enum promo_event_kind kind;
        bool pending;
        int64_t now;
        enum promo_phase phase;
        enum promo_state state;
        const char *event;
    } walk[] = {
        {PROMO_EV_GATES, false, 1000, PROMO_PHASE_SHADOW, PROMO_ROLLING_OUT, "shadow"},
        {PROMO_EV_TICK, false, 3999, PROMO_PHASE_SHADOW, PROMO_ROLLING_OUT, ""},
        {PROMO_EV_TICK, true, 4000, PROMO_PHASE_SHADOW, PROMO_ROLLING_OUT, ""},
        {PROMO_EV_TICK, false, 4500, PROMO_PHASE_INTERNAL, PROMO_ROLLING_OUT, "internal"},
        {PROMO_EV_TICK, false, 6499, PROMO_PHASE_INTERNAL, PROMO_ROLLING_OUT, ""},
        {PROMO_EV_TICK, false, 6500, PROMO_PHASE_STEPS, PROMO_ROLLING_OUT, "step"},
        {PROMO_EV_TICK, false, 7500, PROMO_PHASE_STEPS, PROMO_SUCCEEDED, "succeeded"},
    };
    struct promo cur = EVAL_BOTH, next;
    struct promo_actions acts;
    struct mg_error err;
    size_t i;

    (void)state;
    for (i = 0; i < N_ELEMS(walk); i++) {
        struct promo_event ev = {.kind = walk[i].kind, .smoke_pending = walk[i].pending};

        if (promo_step(&cur, &ev, walk[i].now, &next, &acts, &err) != MG_OK)
            fail_msg("walk %zu: %s", i, err.message);
        if (next.phase != walk[i].phase || next.state != walk[i].state ||
            strcmp(acts.event, walk[i].event) != 0)
            fail_msg("walk %zu at %lld: phase %d, %s, event \"%s\"", i, (long long)walk[i].now,
                     (int)next.phase, promo_state_name(next.state), acts.event);
        cur = next;
    }
}

static void test_phase_names(void **state)
{
    static const struct {
        enum promo_phase p;
        const char *name;
    } cases[] = {
        {PROMO_PHASE_SHADOW, "shadow"},
        {PROMO_PHASE_INTERNAL, "internal"},
        {PROMO_PHASE_STEPS, "steps"},
    };
    static const char *const bogus[] = {"SHADOW", "step", "none", "shadow ", "internal\n", "-"};
    enum promo_phase back;
    size_t i;

    (void)state;
    assert_null(promo_phase_name(PROMO_PHASE_NONE));
    for (i = 0; i < N_ELEMS(cases); i++) {
        back = PROMO_PHASE_NONE;
        assert_string_equal(promo_phase_name(cases[i].p), cases[i].name);
        assert_true(promo_phase_parse(cases[i].name, &back));
        assert_int_equal(back, cases[i].p);
    }
    back = PROMO_PHASE_STEPS;
    assert_true(promo_phase_parse(NULL, &back));
    assert_int_equal(back, PROMO_PHASE_NONE);
    back = PROMO_PHASE_STEPS;
    assert_true(promo_phase_parse("", &back));
    assert_int_equal(back, PROMO_PHASE_NONE);
    for (i = 0; i < N_ELEMS(bogus); i++) {
        back = (enum promo_phase)99;
        if (promo_phase_parse(bogus[i], &back))
            fail_msg("promo_phase_parse(\"%s\") accepted", bogus[i]);
        assert_int_equal(back, 99);
    }
}

static void test_promo_init_phases(void **state)
{
    struct gate_policy pol;
    struct promo p;

    (void)state;
    gate_policy_empty(&pol);
    pol.shadow_seconds = 600;
    pol.has_internal = true;
    snprintf(pol.internal_header, sizeof(pol.internal_header), "x-canary");
    snprintf(pol.internal_value, sizeof(pol.internal_value), "yes");
    pol.internal_seconds = 300;
    memset(&p, 0xA5, sizeof(p));
    promo_init(&p, &pol, 7, 6);
    assert_int_equal(p.phase, PROMO_PHASE_NONE);
    assert_int_equal(p.shadow_ms, 600000);
    assert_true(p.has_internal);
    assert_string_equal(p.internal_header, "x-canary");
    assert_string_equal(p.internal_value, "yes");
    assert_int_equal(p.internal_ms, 300000);
    gate_policy_empty(&pol);
    promo_init(&p, &pol, 7, 6);
    assert_int_equal(p.shadow_ms, 0);
    assert_false(p.has_internal);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_phase_table),       cmocka_unit_test(test_phase_details),
        cmocka_unit_test(test_phase_walk),        cmocka_unit_test(test_phase_names),
        cmocka_unit_test(test_promo_init_phases),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
