/*
 * test_rollout.c - gates/rollout.c: the promotion state machine
 * (state, event, now) → (new state, actions), state names, and
 * last-known-good selection (docs/design.md "Domain model" and "Promotion and
 * rollout"; docs/contract.md "Aliases" and "Promotions").
 *
 * Table tests check every row and report each mismatch before failing, so
 * one run shows every broken case.
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

#define BASE 1    /* the baseline version */
#define CAND 5    /* the candidate version */
#define T 100000  /* "now", ms since the epoch */
#define BAKE 1000 /* bake time, ms */
#define ANY -999  /* a field not checked */

/* ---- promo_step ------------------------------------------------------- */

/* A promotion with steps [10, 50, 100] and a 1000 ms bake. */
#define PROMO(st, base, appr, autoadv, idx, w, next)                                               \
    {                                                                                              \
        .state = (st), .candidate = CAND, .baseline = (base), .steps = {10, 50, 100}, .nsteps = 3, \
        .bake_ms = BAKE, .auto_advance = (autoadv), .approvals_required = (appr),                  \
        .step_index = (idx), .weight = (w), .next_step_at = (next)                                 \
    }
/* The same with a single step [100]. */
#define PROMO1(st, base, appr)                                                                     \
    {                                                                                              \
        .state = (st), .candidate = CAND, .baseline = (base), .steps = {100}, .nsteps = 1,         \
        .bake_ms = BAKE, .auto_advance = true, .approvals_required = (appr), .step_index = -1,     \
        .weight = 0, .next_step_at = 0                                                             \
    }

#define EVALUATING PROMO(PROMO_EVALUATING, BASE, 0, true, -1, 0, 0)
#define EVALUATING_APPR PROMO(PROMO_EVALUATING, BASE, 2, true, -1, 0, 0)
#define EVALUATING_NOBASE PROMO(PROMO_EVALUATING, 0, 0, true, -1, 0, 0)
#define EVALUATING_MANUAL PROMO(PROMO_EVALUATING, BASE, 0, false, -1, 0, 0)
#define AWAITING PROMO(PROMO_AWAITING_APPROVAL, BASE, 2, true, -1, 0, 0)
#define AWAITING_NOBASE PROMO(PROMO_AWAITING_APPROVAL, 0, 2, true, -1, 0, 0)
/* Rolling out at step 0 (10%), the next step due at T. */
#define ROLLING0 PROMO(PROMO_ROLLING_OUT, BASE, 0, true, 0, 10, T)
#define ROLLING0_APPR PROMO(PROMO_ROLLING_OUT, BASE, 2, true, 0, 10, T)
#define ROLLING0_NOBASE PROMO(PROMO_ROLLING_OUT, 0, 0, true, 0, 100, T)
#define ROLLING0_MANUAL PROMO(PROMO_ROLLING_OUT, BASE, 0, false, 0, 10, 0)
#define ROLLING0_NOTIMER PROMO(PROMO_ROLLING_OUT, BASE, 0, true, 0, 10, 0)
/* Rolling out at step 1 (50%), the last step (100%) due at T. */
#define ROLLING1 PROMO(PROMO_ROLLING_OUT, BASE, 0, true, 1, 50, T)

#define EV(k)                                                                                      \
    {                                                                                              \
        .kind = (k)                                                                                \
    }
#define EV_GATES(failed, pending)                                                                  \
    {                                                                                              \
        .kind = PROMO_EV_GATES, .gates_failed = (failed), .gates_pending = (pending)               \
    }
#define EV_APPROVALS(rej, sat)                                                                     \
    {                                                                                              \
        .kind = PROMO_EV_APPROVALS, .rejected = (rej), .satisfied = (sat)                          \
    }

#define R(v, w)                                                                                    \
    {                                                                                              \
        (v), (w)                                                                                   \
    }
#define NO_ROUTES                                                                                  \
    0,                                                                                             \
    {                                                                                              \
        {                                                                                          \
            0, 0                                                                                   \
        }                                                                                          \
    }

struct step_row {
    const char *what;
    struct promo start;
    struct promo_event ev;
    int64_t now;
    enum mg_code rc; /* MG_ECONFLICT: nothing else is checked but "no change" */
    enum promo_state state;
    int step_index, weight; /* ANY: not checked */
    int64_t next_step_at;
    bool set_routes, restore;
    size_t nroutes;
    struct promo_route routes[PROMO_MAX_ROUTES];
    const char *event; /* "" for none */
};

/* The result of a conflict: MG_ECONFLICT, the rest ignored. */
#define CONFLICT MG_ECONFLICT, 0, 0, 0, 0, false, false, NO_ROUTES, ""

static const struct step_row step_rows[] = {
    /* ---- evaluating ---- */
    {"evaluating: gates failed", EVALUATING, EV_GATES(true, false), T, MG_OK, PROMO_REJECTED, -1, 0,
     0, false, false, NO_ROUTES, "rejected"},
    {"evaluating: gates failed and pending", EVALUATING, EV_GATES(true, true), T, MG_OK,
     PROMO_REJECTED, -1, 0, 0, false, false, NO_ROUTES, "rejected"},
    {"evaluating: gates pending", EVALUATING, EV_GATES(false, true), T, MG_OK, PROMO_EVALUATING, -1,
     0, 0, false, false, NO_ROUTES, "evaluating"},
    {"evaluating: gates passed, approvals needed", EVALUATING_APPR, EV_GATES(false, false), T,
     MG_OK, PROMO_AWAITING_APPROVAL, -1, 0, 0, false, false, NO_ROUTES, "gates_passed"},
    {"evaluating: gates passed, no approvals: first step",
     EVALUATING,
     EV_GATES(false, false),
     T,
     MG_OK,
     PROMO_ROLLING_OUT,
     0,
     10,
     T + BAKE,
     true,
     false,
     2,
     {R(BASE, 90), R(CAND, 10)},
     "step"},
    /* With no baseline there is nothing to split with: the candidate takes
     * the whole alias (routes always sum to 100). */
    {"evaluating: gates passed, no baseline",
     EVALUATING_NOBASE,
     EV_GATES(false, false),
     T,
     MG_OK,
     PROMO_ROLLING_OUT,
     0,
     ANY,
     T + BAKE,
     true,
     false,
     1,
     {R(CAND, 100)},
     "step"},
    {"evaluating: gates passed, single step [100]",
     PROMO1(PROMO_EVALUATING, BASE, 0),
     EV_GATES(false, false),
     T,
     MG_OK,
     PROMO_SUCCEEDED,
     0,
     100,
     0,
     true,
     false,
     1,
     {R(CAND, 100)},
     "succeeded"},
    {"evaluating: gates passed, single step [100], no baseline",
     PROMO1(PROMO_EVALUATING, 0, 0),
     EV_GATES(false, false),
     T,
     MG_OK,
     PROMO_SUCCEEDED,
     0,
     100,
     0,
     true,
     false,
     1,
     {R(CAND, 100)},
     "succeeded"},
    /* auto_advance false: the step is taken, but no timer is set
     * (rollout.h: next_step_at is 0 when there is no timer). */
    {"evaluating: gates passed, auto_advance false",
     EVALUATING_MANUAL,
     EV_GATES(false, false),
     T,
     MG_OK,
     PROMO_ROLLING_OUT,
     0,
     10,
     0,
     true,
     false,
     2,
     {R(BASE, 90), R(CAND, 10)},
     "step"},
    {"evaluating: approvals", EVALUATING_APPR, EV_APPROVALS(false, true), T, CONFLICT},
    {"evaluating: approvals rejected", EVALUATING_APPR, EV_APPROVALS(true, false), T, CONFLICT},
    {"evaluating: tick", EVALUATING, EV(PROMO_EV_TICK), T, MG_OK, PROMO_EVALUATING, -1, 0, 0, false,
     false, NO_ROUTES, ""},
    {"evaluating: advance", EVALUATING, EV(PROMO_EV_ADVANCE), T, CONFLICT},
    {"evaluating: abort", EVALUATING, EV(PROMO_EV_ABORT), T, MG_OK, PROMO_ABORTED, -1, 0, 0, false,
     false, NO_ROUTES, "aborted"},
    {"evaluating: rollback", EVALUATING, EV(PROMO_EV_ROLLBACK), T, MG_OK, PROMO_ROLLED_BACK, -1, 0,
     0, false, false, NO_ROUTES, "rolled_back"},
    {"evaluating: smoke failed", EVALUATING, EV(PROMO_EV_SMOKE_FAILED), T, MG_OK, PROMO_REJECTED,
     -1, 0, 0, false, false, NO_ROUTES, "rejected"},
    {"evaluating: delivery failed", EVALUATING, EV(PROMO_EV_DELIVERY_FAILED), T, MG_OK,
     PROMO_REJECTED, -1, 0, 0, false, false, NO_ROUTES, "rejected"},

    /* ---- awaiting_approval ---- */
    {"awaiting: gates passed", AWAITING, EV_GATES(false, false), T, CONFLICT},
    {"awaiting: gates failed", AWAITING, EV_GATES(true, false), T, CONFLICT},
    {"awaiting: approvals rejected", AWAITING, EV_APPROVALS(true, false), T, MG_OK, PROMO_REJECTED,
     -1, 0, 0, false, false, NO_ROUTES, "rejected"},
    {"awaiting: approvals rejected and satisfied", AWAITING, EV_APPROVALS(true, true), T, MG_OK,
     PROMO_REJECTED, -1, 0, 0, false, false, NO_ROUTES, "rejected"},
    {"awaiting: approvals not yet enough", AWAITING, EV_APPROVALS(false, false), T, MG_OK,
     PROMO_AWAITING_APPROVAL, -1, 0, 0, false, false, NO_ROUTES, ""},
    {"awaiting: approvals satisfied: first step",
     AWAITING,
     EV_APPROVALS(false, true),
     T,
     MG_OK,
     PROMO_ROLLING_OUT,
     0,
     10,
     T + BAKE,
     true,
     false,
     2,
     {R(BASE, 90), R(CAND, 10)},
     "step"},
    {"awaiting: approvals satisfied, no baseline",
     AWAITING_NOBASE,
     EV_APPROVALS(false, true),
     T,
     MG_OK,
     PROMO_ROLLING_OUT,
     0,
     ANY,
     T + BAKE,
     true,
     false,
     1,
     {R(CAND, 100)},
     "step"},
    {"awaiting: approvals satisfied, single step [100]",
     PROMO1(PROMO_AWAITING_APPROVAL, BASE, 2),
     EV_APPROVALS(false, true),
     T,
     MG_OK,
     PROMO_SUCCEEDED,
     0,
     100,
     0,
     true,
     false,
     1,
     {R(CAND, 100)},
     "succeeded"},
    {"awaiting: tick", AWAITING, EV(PROMO_EV_TICK), T, MG_OK, PROMO_AWAITING_APPROVAL, -1, 0, 0,
     false, false, NO_ROUTES, ""},
    {"awaiting: advance", AWAITING, EV(PROMO_EV_ADVANCE), T, CONFLICT},
    {"awaiting: abort", AWAITING, EV(PROMO_EV_ABORT), T, MG_OK, PROMO_ABORTED, -1, 0, 0, false,
     false, NO_ROUTES, "aborted"},
    {"awaiting: rollback", AWAITING, EV(PROMO_EV_ROLLBACK), T, MG_OK, PROMO_ROLLED_BACK, -1, 0, 0,
     false, false, NO_ROUTES, "rolled_back"},
    {"awaiting: smoke failed", AWAITING, EV(PROMO_EV_SMOKE_FAILED), T, MG_OK, PROMO_REJECTED, -1, 0,
     0, false, false, NO_ROUTES, "rejected"},
    {"awaiting: delivery failed", AWAITING, EV(PROMO_EV_DELIVERY_FAILED), T, MG_OK, PROMO_REJECTED,
     -1, 0, 0, false, false, NO_ROUTES, "rejected"},

    /* ---- rolling_out ---- */
    {"rolling: gates", ROLLING0, EV_GATES(false, false), T, CONFLICT},
    {"rolling: gates failed", ROLLING0, EV_GATES(true, false), T, CONFLICT},
    {"rolling: approvals", ROLLING0_APPR, EV_APPROVALS(false, true), T, CONFLICT},
    {"rolling: approvals rejected", ROLLING0_APPR, EV_APPROVALS(true, false), T, CONFLICT},
    {"rolling: tick before the step is due", ROLLING0, EV(PROMO_EV_TICK), T - 1, MG_OK,
     PROMO_ROLLING_OUT, 0, 10, T, false, false, NO_ROUTES, ""},
    {"rolling: tick long before", ROLLING0, EV(PROMO_EV_TICK), 0, MG_OK, PROMO_ROLLING_OUT, 0, 10,
     T, false, false, NO_ROUTES, ""},
    {"rolling: tick exactly when due",
     ROLLING0,
     EV(PROMO_EV_TICK),
     T,
     MG_OK,
     PROMO_ROLLING_OUT,
     1,
     50,
     T + BAKE,
     true,
     false,
     2,
     {R(BASE, 50), R(CAND, 50)},
     "step"},
    {"rolling: tick after due",
     ROLLING0,
     EV(PROMO_EV_TICK),
     T + 500,
     MG_OK,
     PROMO_ROLLING_OUT,
     1,
     50,
     T + 500 + BAKE,
     true,
     false,
     2,
     {R(BASE, 50), R(CAND, 50)},
     "step"},
    {"rolling: tick, auto_advance false", ROLLING0_MANUAL, EV(PROMO_EV_TICK), T + 5 * BAKE, MG_OK,
     PROMO_ROLLING_OUT, 0, 10, 0, false, false, NO_ROUTES, ""},
    {"rolling: tick, auto_advance false, stale timer",
     PROMO(PROMO_ROLLING_OUT, BASE, 0, false, 0, 10, T), EV(PROMO_EV_TICK), T + 5 * BAKE, MG_OK,
     PROMO_ROLLING_OUT, 0, 10, T, false, false, NO_ROUTES, ""},
    {"rolling: tick, no timer", ROLLING0_NOTIMER, EV(PROMO_EV_TICK), T, MG_OK, PROMO_ROLLING_OUT, 0,
     10, 0, false, false, NO_ROUTES, ""},
    {"rolling: tick due at the last step: succeeded",
     ROLLING1,
     EV(PROMO_EV_TICK),
     T,
     MG_OK,
     PROMO_SUCCEEDED,
     2,
     100,
     0,
     true,
     false,
     1,
     {R(CAND, 100)},
     "succeeded"},
    {"rolling: tick, no baseline",
     ROLLING0_NOBASE,
     EV(PROMO_EV_TICK),
     T,
     MG_OK,
     PROMO_ROLLING_OUT,
     1,
     ANY,
     T + BAKE,
     true,
     false,
     1,
     {R(CAND, 100)},
     "step"},
    {"rolling: advance before the step is due",
     ROLLING0,
     EV(PROMO_EV_ADVANCE),
     T - 500,
     MG_OK,
     PROMO_ROLLING_OUT,
     1,
     50,
     T - 500 + BAKE,
     true,
     false,
     2,
     {R(BASE, 50), R(CAND, 50)},
     "step"},
    {"rolling: advance to the last step: succeeded",
     ROLLING1,
     EV(PROMO_EV_ADVANCE),
     T - 500,
     MG_OK,
     PROMO_SUCCEEDED,
     2,
     100,
     0,
     true,
     false,
     1,
     {R(CAND, 100)},
     "succeeded"},
    {"rolling: advance, auto_advance false (no timer)",
     ROLLING0_MANUAL,
     EV(PROMO_EV_ADVANCE),
     T,
     MG_OK,
     PROMO_ROLLING_OUT,
     1,
     50,
     0,
     true,
     false,
     2,
     {R(BASE, 50), R(CAND, 50)},
     "step"},
    /* Abort and automatic rollback put the baseline back at 100%; the
     * candidate then holds 0% (rollout.h: weight is the candidate's current
     * weight); step_index keeps how far it got. */
    {"rolling: abort",
     ROLLING0,
     EV(PROMO_EV_ABORT),
     T,
     MG_OK,
     PROMO_ABORTED,
     0,
     0,
     0,
     true,
     true,
     1,
     {R(BASE, 100)},
     "aborted"},
    {"rolling: abort at step 1",
     ROLLING1,
     EV(PROMO_EV_ABORT),
     T,
     MG_OK,
     PROMO_ABORTED,
     1,
     0,
     0,
     true,
     true,
     1,
     {R(BASE, 100)},
     "aborted"},
    {"rolling: abort, no baseline", ROLLING0_NOBASE, EV(PROMO_EV_ABORT), T, MG_OK, PROMO_ABORTED, 0,
     0, 0, true, true, NO_ROUTES, "aborted"},
    /* The rollback itself moves the alias; the promotion only ends. */
    {"rolling: rollback", ROLLING0, EV(PROMO_EV_ROLLBACK), T, MG_OK, PROMO_ROLLED_BACK, 0, 0, 0,
     false, false, NO_ROUTES, "rolled_back"},
    {"rolling: smoke failed",
     ROLLING0,
     EV(PROMO_EV_SMOKE_FAILED),
     T,
     MG_OK,
     PROMO_ROLLED_BACK,
     0,
     0,
     0,
     true,
     true,
     1,
     {R(BASE, 100)},
     "rolled_back"},
    {"rolling: delivery failed",
     ROLLING1,
     EV(PROMO_EV_DELIVERY_FAILED),
     T,
     MG_OK,
     PROMO_ROLLED_BACK,
     1,
     0,
     0,
     true,
     true,
     1,
     {R(BASE, 100)},
     "rolled_back"},
    {"rolling: smoke failed, no baseline", ROLLING0_NOBASE, EV(PROMO_EV_SMOKE_FAILED), T, MG_OK,
     PROMO_ROLLED_BACK, 0, 0, 0, true, true, NO_ROUTES, "rolled_back"},
};

static size_t check_routes(const char *what, const struct promo_actions *a,
                           const struct step_row *w)
{
    size_t i;

    if (a->nroutes != w->nroutes) {
        print_error("%s: %zu route(s), want %zu\n", what, a->nroutes, w->nroutes);
        return 1;
    }
    for (i = 0; i < w->nroutes; i++) {
        if (a->routes[i].version != w->routes[i].version ||
            a->routes[i].weight != w->routes[i].weight) {
            print_error("%s: routes[%zu] = {v%lld, %d}, want {v%lld, %d}\n", what, i,
                        (long long)a->routes[i].version, a->routes[i].weight,
                        (long long)w->routes[i].version, w->routes[i].weight);
            return 1;
        }
    }
    return 0;
}

/* Compare a successful step with the row; print and count mismatches. */
static size_t check_step(const struct step_row *w, const struct promo *n,
                         const struct promo_actions *a)
{
    const struct promo *s = &w->start;
    size_t bad = 0, i;

#define WANT(cond, ...)                                                                            \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            print_error(__VA_ARGS__);                                                              \
            bad++;                                                                                 \
        }                                                                                          \
    } while (0)
    WANT(n->state == w->state, "%s: state %s, want %s\n", w->what, promo_state_name(n->state),
         promo_state_name(w->state));
    WANT(n->step_index == w->step_index, "%s: step_index %d, want %d\n", w->what, n->step_index,
         w->step_index);
    WANT(w->weight == ANY || n->weight == w->weight, "%s: weight %d, want %d\n", w->what, n->weight,
         w->weight);
    WANT(n->next_step_at == w->next_step_at, "%s: next_step_at %lld, want %lld\n", w->what,
         (long long)n->next_step_at, (long long)w->next_step_at);
    /* What the event never touches. */
    WANT(n->candidate == s->candidate && n->baseline == s->baseline && n->nsteps == s->nsteps &&
             n->bake_ms == s->bake_ms && n->auto_advance == s->auto_advance &&
             n->approvals_required == s->approvals_required,
         "%s: the plan changed\n", w->what);
    for (i = 0; i < s->nsteps; i++)
        WANT(n->steps[i] == s->steps[i], "%s: steps[%zu] changed\n", w->what, i);
    WANT(a->set_routes == w->set_routes, "%s: set_routes %d, want %d\n", w->what, a->set_routes,
         w->set_routes);
    WANT(a->restore == w->restore, "%s: restore %d, want %d\n", w->what, a->restore, w->restore);
    if (w->set_routes || a->set_routes)
        bad += check_routes(w->what, a, w);
    if (a->set_routes && a->nroutes > 0) {
        int sum = 0;
        for (i = 0; i < a->nroutes; i++)
            sum += a->routes[i].weight;
        WANT(sum == 100, "%s: route weights sum to %d, not 100\n", w->what, sum);
    }
    WANT(strcmp(a->event, w->event) == 0, "%s: event \"%s\", want \"%s\"\n", w->what, a->event,
         w->event);
    WANT(a->event[0] == '\0' || a->detail[0] != '\0', "%s: event \"%s\" without a detail\n",
         w->what, a->event);
#undef WANT
    return bad;
}

static void test_promo_step_table(void **state)
{
    size_t i, bad = 0;

    (void)state;
    for (i = 0; i < N_ELEMS(step_rows); i++) {
        const struct step_row *w = &step_rows[i];
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
        if (rc != w->rc) {
            print_error("%s: rc %d, want %d (%s)\n", w->what, rc, w->rc, err.message);
            bad++;
            continue;
        }
        if (rc != MG_OK) {
            if (err.code != rc || err.message[0] == '\0') {
                print_error("%s: err.code %d, message \"%s\"\n", w->what, err.code, err.message);
                bad++;
            }
            if (memcmp(&next, &sentinel_p, sizeof(next)) != 0 ||
                memcmp(&acts, &sentinel_a, sizeof(acts)) != 0) {
                print_error("%s: a refused event wrote its out-parameters\n", w->what);
                bad++;
            }
            continue;
        }
        bad += check_step(w, &next, &acts);
    }
    assert_int_equal(bad, 0);
}

/* Terminal states refuse every event, whatever its flags and time. */
static void test_promo_step_terminal(void **state)
{
    static const struct promo starts[] = {
        PROMO(PROMO_SUCCEEDED, BASE, 0, true, 2, 100, 0),
        PROMO(PROMO_REJECTED, BASE, 2, true, -1, 0, 0),
        PROMO(PROMO_ABORTED, BASE, 0, true, 0, 0, 0),
        PROMO(PROMO_ROLLED_BACK, BASE, 0, true, 1, 0, 0),
        /* a terminal state with a stale timer is still terminal */
        PROMO(PROMO_ABORTED, BASE, 0, true, 0, 10, T),
    };
    static const struct promo_event events[] = {
        EV_GATES(false, false),    EV_GATES(true, false),        EV_GATES(false, true),
        EV_APPROVALS(false, true), EV_APPROVALS(true, false),    EV(PROMO_EV_TICK),
        EV(PROMO_EV_ADVANCE),      EV(PROMO_EV_ABORT),           EV(PROMO_EV_ROLLBACK),
        EV(PROMO_EV_SMOKE_FAILED), EV(PROMO_EV_DELIVERY_FAILED),
    };
    static const int64_t nows[] = {0, T, T + 10 * BAKE};
    size_t s, e, t, bad = 0;

    (void)state;
    for (s = 0; s < N_ELEMS(starts); s++) {
        for (e = 0; e < N_ELEMS(events); e++) {
            for (t = 0; t < N_ELEMS(nows); t++) {
                struct promo next, sentinel;
                struct promo_actions acts;
                struct mg_error err;
                enum mg_code rc;

                memset(&next, 0xA5, sizeof(next));
                memcpy(&sentinel, &next, sizeof(next));
                memset(&err, 0, sizeof(err));
                rc = promo_step(&starts[s], &events[e], nows[t], &next, &acts, &err);
                if (rc != MG_ECONFLICT || err.code != MG_ECONFLICT || err.message[0] == '\0' ||
                    memcmp(&next, &sentinel, sizeof(next)) != 0) {
                    print_error("%s + event %d at %lld: rc %d, err.code %d \"%s\"\n",
                                promo_state_name(starts[s].state), (int)events[e].kind,
                                (long long)nows[t], rc, err.code, err.message);
                    bad++;
                }
            }
        }
    }
    assert_int_equal(bad, 0);
}

/* An event's reason reaches the log detail. */
static void test_promo_step_reason(void **state)
{
    static const struct {
        struct promo start;
        enum promo_event_kind kind;
    } cases[] = {
        {ROLLING0, PROMO_EV_ABORT},           {EVALUATING, PROMO_EV_ABORT},
        {ROLLING0, PROMO_EV_ROLLBACK},        {ROLLING0, PROMO_EV_SMOKE_FAILED},
        {ROLLING0, PROMO_EV_DELIVERY_FAILED}, {EVALUATING, PROMO_EV_SMOKE_FAILED},
    };
    size_t i;

    (void)state;
    for (i = 0; i < N_ELEMS(cases); i++) {
        struct promo_event ev = {.kind = cases[i].kind, .reason = "canary p99 doubled"};
        struct promo next;
        struct promo_actions acts;
        struct mg_error err;

        assert_int_equal(promo_step(&cases[i].start, &ev, T, &next, &acts, &err), MG_OK);
        if (strstr(acts.detail, "canary p99 doubled") == NULL)
            fail_msg("case %zu: detail \"%s\" lacks the reason", i, acts.detail);
    }
}

static void test_promo_init(void **state)
{
    struct gate_policy pol;
    struct promo p;

    (void)state;
    gate_policy_empty(&pol);
    pol.steps[0] = 10;
    pol.steps[1] = 50;
    pol.steps[2] = 100;
    pol.nsteps = 3;
    pol.bake_seconds = 300;
    pol.auto_advance = false;
    pol.approvals_required = 2;
    memset(&p, 0xA5, sizeof(p));
    promo_init(&p, &pol, 7, 6);
    assert_int_equal(p.state, PROMO_EVALUATING);
    assert_int_equal(p.candidate, 7);
    assert_int_equal(p.baseline, 6);
    assert_int_equal(p.nsteps, 3);
    assert_int_equal(p.steps[0], 10);
    assert_int_equal(p.steps[1], 50);
    assert_int_equal(p.steps[2], 100);
    assert_int_equal(p.bake_ms, 300000);
    assert_false(p.auto_advance);
    assert_int_equal(p.approvals_required, 2);
    assert_int_equal(p.step_index, -1);
    assert_int_equal(p.weight, 0);
    assert_int_equal(p.next_step_at, 0);
}

/* Steps [10, 50, 100], bake 1000 ms, driven by ticks from the gate result
 * to success; then the promotion refuses everything. */
static void test_promo_walk(void **state)
{
    static const struct {
        enum promo_event_kind kind;
        int64_t now;
        enum promo_state state;
        int step_index, weight;
        int64_t next_step_at;
        size_t nroutes;
        struct promo_route routes[2];
    } walk[] = {
        {PROMO_EV_TICK, 500, PROMO_EVALUATING, -1, 0, 0, 0, {{0, 0}}},
        {PROMO_EV_GATES, 1000, PROMO_ROLLING_OUT, 0, 10, 2000, 2, {R(BASE, 90), R(CAND, 10)}},
        {PROMO_EV_TICK, 1001, PROMO_ROLLING_OUT, 0, 10, 2000, 0, {{0, 0}}},
        {PROMO_EV_TICK, 1999, PROMO_ROLLING_OUT, 0, 10, 2000, 0, {{0, 0}}},
        {PROMO_EV_TICK, 2000, PROMO_ROLLING_OUT, 1, 50, 3000, 2, {R(BASE, 50), R(CAND, 50)}},
        {PROMO_EV_TICK, 2000, PROMO_ROLLING_OUT, 1, 50, 3000, 0, {{0, 0}}},
        {PROMO_EV_TICK, 2999, PROMO_ROLLING_OUT, 1, 50, 3000, 0, {{0, 0}}},
        {PROMO_EV_TICK, 3250, PROMO_SUCCEEDED, 2, 100, 0, 1, {R(CAND, 100)}},
    };
    struct gate_policy pol;
    struct promo cur, next;
    struct promo_actions acts;
    struct mg_error err;
    struct promo_event ev;
    size_t i, k;

    (void)state;
    gate_policy_empty(&pol);
    pol.steps[0] = 10;
    pol.steps[1] = 50;
    pol.steps[2] = 100;
    pol.nsteps = 3;
    pol.bake_seconds = 1;
    promo_init(&cur, &pol, CAND, BASE);
    for (i = 0; i < N_ELEMS(walk); i++) {
        memset(&ev, 0, sizeof(ev));
        ev.kind = walk[i].kind;
        memset(&err, 0, sizeof(err));
        if (promo_step(&cur, &ev, walk[i].now, &next, &acts, &err) != MG_OK)
            fail_msg("walk step %zu: %s", i, err.message);
        if (next.state != walk[i].state || next.step_index != walk[i].step_index ||
            next.weight != walk[i].weight || next.next_step_at != walk[i].next_step_at)
            fail_msg("walk step %zu at %lld: %s step %d weight %d next %lld", i,
                     (long long)walk[i].now, promo_state_name(next.state), next.step_index,
                     next.weight, (long long)next.next_step_at);
        assert_int_equal(acts.set_routes, walk[i].nroutes > 0);
        assert_int_equal(acts.nroutes, walk[i].nroutes);
        for (k = 0; k < walk[i].nroutes; k++) {
            assert_int_equal(acts.routes[k].version, walk[i].routes[k].version);
            assert_int_equal(acts.routes[k].weight, walk[i].routes[k].weight);
        }
        assert_false(acts.restore);
        cur = next;
    }
    assert_string_equal(acts.event, "succeeded");
    memset(&ev, 0, sizeof(ev));
    ev.kind = PROMO_EV_TICK;
    assert_int_equal(promo_step(&cur, &ev, 10000, &next, &acts, &err), MG_ECONFLICT);
    ev.kind = PROMO_EV_ABORT;
    assert_int_equal(promo_step(&cur, &ev, 10000, &next, &acts, &err), MG_ECONFLICT);
}

/* ---- state names ------------------------------------------------------ */

static void test_promo_state_names(void **state)
{
    static const struct {
        enum promo_state s;
        const char *name;
        bool active;
    } cases[] = {
        {PROMO_EVALUATING, "evaluating", true},
        {PROMO_AWAITING_APPROVAL, "awaiting_approval", true},
        {PROMO_ROLLING_OUT, "rolling_out", true},
        {PROMO_SUCCEEDED, "succeeded", false},
        {PROMO_REJECTED, "rejected", false},
        {PROMO_ABORTED, "aborted", false},
        {PROMO_ROLLED_BACK, "rolled_back", false},
    };
    static const char *const bogus[] = {"",           "ROLLING_OUT", "rolling-out", "rolling_out ",
                                        "succeed",    "done",        "active",      "evaluating\n",
                                        "rolledback", NULL};
    size_t i;

    (void)state;
    for (i = 0; i < N_ELEMS(cases); i++) {
        enum promo_state back = (enum promo_state)99;
        assert_string_equal(promo_state_name(cases[i].s), cases[i].name);
        assert_true(promo_state_parse(cases[i].name, &back));
        assert_int_equal(back, cases[i].s);
        if (promo_state_active(cases[i].s) != cases[i].active)
            fail_msg("promo_state_active(%s) != %d", cases[i].name, cases[i].active);
    }
    for (i = 0; i < N_ELEMS(bogus); i++) {
        enum promo_state back = (enum promo_state)99;
        if (promo_state_parse(bogus[i], &back))
            fail_msg("promo_state_parse(\"%s\") accepted", bogus[i] ? bogus[i] : "(null)");
        assert_int_equal(back, 99);
    }
}

/* ---- last-known-good -------------------------------------------------- */

static const struct promo_route r1[] = {R(1, 100)};
static const struct promo_route r2[] = {R(2, 100)};
static const struct promo_route r3[] = {R(3, 100)};
static const struct promo_route r5[] = {R(5, 100)};
static const struct promo_route r7[] = {R(7, 100)};
static const struct promo_route r1_90_5_10[] = {R(1, 90), R(5, 10)};
static const struct promo_route r1_50_5_50[] = {R(1, 50), R(5, 50)};
static const struct promo_route r1_50_2_50[] = {R(1, 50), R(2, 50)};
static const struct promo_route r1_50_7_50[] = {R(1, 50), R(7, 50)};
static const struct promo_route r1_100_2_0[] = {R(1, 100), R(2, 0)};

#define E(gen, kind, routes)                                                                       \
    {                                                                                              \
        (gen), (kind), (routes), N_ELEMS(routes), NULL, 0, 0                                       \
    }
#define E0(gen, kind)                                                                              \
    {                                                                                              \
        (gen), (kind), NULL, 0, NULL, 0, 0                                                         \
    }
/* An entry with match rules pinning `pinned` (an array) and a shadow (0: none). */
#define EM(gen, kind, routes, pinned, shadow)                                                      \
    {                                                                                              \
        (gen), (kind), (routes), N_ELEMS(routes), (pinned), N_ELEMS(pinned), (shadow)              \
    }
#define ES(gen, kind, routes, shadow)                                                              \
    {                                                                                              \
        (gen), (kind), (routes), N_ELEMS(routes), NULL, 0, (shadow)                                \
    }

/* Histories, newest first. */
static const struct lkg_entry h_set[] = {E(1, LKG_SET, r3)};
static const struct lkg_entry h_promoted[] = {
    E(4, LKG_PROMOTED, r5),
    E(3, LKG_STEP, r1_50_5_50),
    E(2, LKG_STEP, r1_90_5_10),
    E(1, LKG_SET, r1),
};
static const struct lkg_entry h_rolling[] = {
    E(3, LKG_STEP, r1_50_5_50),
    E(2, LKG_STEP, r1_90_5_10),
    E(1, LKG_SET, r1),
};
static const struct lkg_entry h_aborted[] = {
    E(4, LKG_ABORT, r1),
    E(3, LKG_STEP, r1_50_5_50),
    E(2, LKG_STEP, r1_90_5_10),
    E(1, LKG_SET, r2),
};
static const struct lkg_entry h_rolled_back[] = {
    E(3, LKG_ROLLBACK, r2),
    E(2, LKG_PROMOTED, r3),
    E(1, LKG_SET, r2),
};
static const struct lkg_entry h_rollback_only[] = {E(1, LKG_ROLLBACK, r2)};
static const struct lkg_entry h_steps_only[] = {
    E(2, LKG_STEP, r1_50_5_50),
    E(1, LKG_STEP, r1_90_5_10),
};
static const struct lkg_entry h_split_set[] = {
    E(2, LKG_SET, r1_50_2_50),
    E(1, LKG_SET, r1),
};
static const struct lkg_entry h_two_sets[] = {
    E(2, LKG_SET, r7),
    E(1, LKG_SET, r1),
};
static const struct lkg_entry h_deleted[] = {E0(2, LKG_DELETE), E(1, LKG_SET, r1)};
static const struct lkg_entry h_new_route[] = {
    E(2, LKG_SET, r1_50_7_50),
    E(1, LKG_SET, r7),
};
static const struct lkg_entry h_zero_weight[] = {E(1, LKG_SET, r1_100_2_0)};
/* docs/contract.md "Routing strategies": match rules and the shadow are part of the generation. */
static const int64_t pin3[] = {3}, pin7[] = {7}, pin7_7[] = {7, 7}, pin3_7[] = {3, 7};
/* v7 at 100% but a tenant pinned to v3: v7 does not hold the whole alias */
static const struct lkg_entry h_pinned_other[] = {
    EM(2, LKG_SET, r7, pin3, 0),
    E(1, LKG_SET, r1),
};
static const struct lkg_entry h_pin_added[] = {
    EM(2, LKG_SET, r7, pin3, 0),
    E(1, LKG_SET, r7),
};
/* pins to the version that holds 100% anyway do not count against it */
static const struct lkg_entry h_pinned_same[] = {
    EM(2, LKG_SET, r7, pin7_7, 0),
    E(1, LKG_SET, r1),
};
static const struct lkg_entry h_pinned_mixed[] = {
    EM(2, LKG_SET, r7, pin3_7, 0),
    E(1, LKG_SET, r1),
};
/* a shadow answers nobody: v1 still holds the whole alias */
static const struct lkg_entry h_shadowed[] = {
    ES(2, LKG_SET, r1, 7),
    E(1, LKG_SET, r1),
};
/* a promotion's phases: shadow, then internal, then a step */
static const struct lkg_entry h_phases[] = {
    EM(3, LKG_STEP, r1, pin7, 0),
    ES(2, LKG_STEP, r1, 7),
    E(1, LKG_SET, r1),
};
static const struct lkg_entry h_shadow_phase[] = {
    ES(2, LKG_STEP, r1, 7),
    E(1, LKG_SET, r1),
};
/* v3 pinned for long, v7 shadowed just now: v7 is the newest routed */
static const struct lkg_entry h_pin_then_shadow[] = {
    EM(3, LKG_SET, r1, pin3, 7),
    EM(2, LKG_SET, r1, pin3, 0),
    E(1, LKG_SET, r1),
};

static void test_lkg_select_table(void **state)
{
    static const struct lkg_bad bad3[] = {{3, INT64_MAX}};
    static const struct lkg_bad bad5[] = {{5, INT64_MAX}};
    static const struct lkg_bad bad7_1[] = {{7, INT64_MAX}, {1, INT64_MAX}};
    static const struct lkg_bad bad1[] = {{1, INT64_MAX}};
    static const struct {
        const char *what;
        const struct lkg_entry *h;
        size_t n;
        const struct lkg_bad *bad;
        size_t nbad;
        int64_t exclude;
        int64_t version;
        size_t index;
    } cases[] = {
        {"direct set", h_set, N_ELEMS(h_set), NULL, 0, 0, 3, 0},
        {"promotion steps then promoted", h_promoted, N_ELEMS(h_promoted), NULL, 0, 0, 5, 0},
        {"rollout in progress: the old set", h_rolling, N_ELEMS(h_rolling), NULL, 0, 0, 1, 2},
        {"abort entry ignored", h_aborted, N_ELEMS(h_aborted), NULL, 0, 0, 2, 3},
        {"rollback entry ignored", h_rolled_back, N_ELEMS(h_rolled_back), bad3, 1, 0, 2, 2},
        {"rollback entry alone", h_rollback_only, N_ELEMS(h_rollback_only), NULL, 0, 0, 0, 0},
        {"bad version skipped", h_promoted, N_ELEMS(h_promoted), bad5, 1, 0, 1, 3},
        {"exclude skipped", h_promoted, N_ELEMS(h_promoted), NULL, 0, 5, 1, 3},
        {"exclude and bad", h_two_sets, N_ELEMS(h_two_sets), bad1, 1, 7, 0, 0},
        {"exclude newest", h_two_sets, N_ELEMS(h_two_sets), NULL, 0, 7, 1, 1},
        {"both bad", h_two_sets, N_ELEMS(h_two_sets), bad7_1, 2, 0, 0, 0},
        {"newest of two sets", h_two_sets, N_ELEMS(h_two_sets), NULL, 0, 0, 7, 0},
        {"split set is not known-good", h_split_set, N_ELEMS(h_split_set), NULL, 0, 0, 1, 1},
        {"only steps", h_steps_only, N_ELEMS(h_steps_only), NULL, 0, 0, 0, 0},
        {"deleted then older set", h_deleted, N_ELEMS(h_deleted), NULL, 0, 0, 1, 1},
        {"empty history", NULL, 0, NULL, 0, 0, 0, 0},
        {"a pin to another version: not known-good", h_pinned_other, N_ELEMS(h_pinned_other), NULL,
         0, 0, 1, 1},
        {"pins to the same version", h_pinned_same, N_ELEMS(h_pinned_same), NULL, 0, 0, 7, 0},
        {"one pin of two elsewhere", h_pinned_mixed, N_ELEMS(h_pinned_mixed), NULL, 0, 0, 1, 1},
        {"a shadow does not count", h_shadowed, N_ELEMS(h_shadowed), NULL, 0, 0, 1, 0},
        {"phases are steps", h_phases, N_ELEMS(h_phases), NULL, 0, 0, 1, 2},
    };
    size_t i, bad = 0;

    (void)state;
    for (i = 0; i < N_ELEMS(cases); i++) {
        size_t idx = 12345;
        int64_t v =
            lkg_select(cases[i].h, cases[i].n, cases[i].bad, cases[i].nbad, cases[i].exclude, &idx);
        if (v != cases[i].version) {
            print_error("%s: v%lld, want v%lld\n", cases[i].what, (long long)v,
                        (long long)cases[i].version);
            bad++;
        } else if (v != 0 && idx != cases[i].index) {
            print_error("%s: entry %zu, want %zu\n", cases[i].what, idx, cases[i].index);
            bad++;
        }
        /* entry_index may be NULL */
        if (lkg_select(cases[i].h, cases[i].n, cases[i].bad, cases[i].nbad, cases[i].exclude,
                       NULL) != cases[i].version) {
            print_error("%s: differs with entry_index NULL\n", cases[i].what);
            bad++;
        }
    }
    assert_int_equal(bad, 0);
}

static void test_lkg_newest_routed_table(void **state)
{
    static const struct {
        const char *what;
        const struct lkg_entry *h;
        size_t n;
        int64_t version;
    } cases[] = {
        {"direct set", h_set, N_ELEMS(h_set), 3},
        {"during a rollout: the candidate", h_rolling, N_ELEMS(h_rolling), 5},
        {"during a rollout, first step", h_rolling + 1, N_ELEMS(h_rolling) - 1, 5},
        {"after success: the candidate", h_promoted, N_ELEMS(h_promoted), 5},
        {"after an abort: the baseline", h_aborted, N_ELEMS(h_aborted), 1},
        {"after a rollback: its target", h_rolled_back, N_ELEMS(h_rolled_back), 2},
        {"newest of two sets", h_two_sets, N_ELEMS(h_two_sets), 7},
        /* v1 joined v7 last, so v1 gained weight most recently although it
         * is the older version */
        {"newly added older version", h_new_route, N_ELEMS(h_new_route), 1},
        {"zero-weight route is not routed", h_zero_weight, N_ELEMS(h_zero_weight), 1},
        {"deleted: no routes", h_deleted, N_ELEMS(h_deleted), 0},
        {"empty history", NULL, 0, 0},
        /* a match rule or the shadow routes a version as much as a weight does */
        {"a pin added to a set", h_pin_added, N_ELEMS(h_pin_added), 3},
        {"set and pinned at once: the higher version", h_pinned_other, N_ELEMS(h_pinned_other), 7},
        {"the shadow", h_shadowed, N_ELEMS(h_shadowed), 7},
        {"shadow phase: the candidate", h_shadow_phase, N_ELEMS(h_shadow_phase), 7},
        {"internal phase after shadow: the candidate", h_phases, N_ELEMS(h_phases), 7},
        {"shadowed after a long pin", h_pin_then_shadow, N_ELEMS(h_pin_then_shadow), 7},
    };
    size_t i, bad = 0;

    (void)state;
    for (i = 0; i < N_ELEMS(cases); i++) {
        int64_t v = lkg_newest_routed(cases[i].h, cases[i].n);
        if (v != cases[i].version) {
            print_error("%s: v%lld, want v%lld\n", cases[i].what, (long long)v,
                        (long long)cases[i].version);
            bad++;
        }
    }
    assert_int_equal(bad, 0);
}

/* Two versions split for a while, after a set: which became routed last is only known where
 * one of them was not routed yet. */
static const struct lkg_entry h_split_long[] = {
    E(4, LKG_SET, r1_50_5_50),
    E(3, LKG_SET, r1_50_5_50),
    E(2, LKG_SET, r1),
    E(1, LKG_SET, r2),
};
/* v7 shadowed beside v1 for two entries, after v7 held the alias: v1 became routed last,
 * which the two newest entries alone cannot tell (both are routed through them). */
static const struct lkg_entry h_shadow_long[] = {
    ES(3, LKG_SET, r1, 7),
    ES(2, LKG_SET, r1, 7),
    E(1, LKG_SET, r7),
};
/* Set to v1 again and again: the version before it is further back. */
static const struct lkg_entry h_same_again[] = {
    E(4, LKG_SET, r1),
    E(3, LKG_SET, r1),
    E(2, LKG_SET, r1),
    E(1, LKG_SET, r3),
};

/* lkg_history_decides: the fewest newest entries that decide (0: none do, the reader goes to
 * the history's end), and wherever it says they decide, they give what the whole does. */
static void test_lkg_history_decides_table(void **state)
{
    static const struct lkg_bad bad5[] = {{5, INT64_MAX}};
    static const struct {
        const char *what;
        const struct lkg_entry *h;
        size_t n;
        const struct lkg_bad *bad;
        size_t nbad;
        size_t decides_at;
    } cases[] = {
        {"one set: nothing to roll back to", h_set, N_ELEMS(h_set), NULL, 0, 0},
        {"two sets", h_two_sets, N_ELEMS(h_two_sets), NULL, 0, 2},
        {"promoted: back to the set before the steps", h_promoted, N_ELEMS(h_promoted), NULL, 0, 4},
        {"promoted, v5 bad", h_promoted, N_ELEMS(h_promoted), bad5, 1, 4},
        {"rolling out: the LKG under the steps", h_rolling, N_ELEMS(h_rolling), NULL, 0, 3},
        {"aborted", h_aborted, N_ELEMS(h_aborted), NULL, 0, 4},
        {"rolled back", h_rolled_back, N_ELEMS(h_rolled_back), NULL, 0, 2},
        {"only steps: no LKG anywhere", h_steps_only, N_ELEMS(h_steps_only), NULL, 0, 0},
        {"deleted", h_deleted, N_ELEMS(h_deleted), NULL, 0, 2},
        {"a new older route", h_new_route, N_ELEMS(h_new_route), NULL, 0, 2},
        {"split for two entries: the third tells which came last", h_split_long,
         N_ELEMS(h_split_long), NULL, 0, 3},
        {"a shadow as long as the route: the entry before tells", h_shadow_long,
         N_ELEMS(h_shadow_long), NULL, 0, 3},
        {"the same version again and again", h_same_again, N_ELEMS(h_same_again), NULL, 0, 4},
        {"a pin added to a set", h_pin_added, N_ELEMS(h_pin_added), NULL, 0, 2},
        {"shadowed after a long pin", h_pin_then_shadow, N_ELEMS(h_pin_then_shadow), NULL, 0, 3},
        {"empty", NULL, 0, NULL, 0, 0},
    };
    size_t i, bad = 0;

    (void)state;
    for (i = 0; i < N_ELEMS(cases); i++) {
        const struct lkg_entry *h = cases[i].h;
        size_t n = cases[i].n, first = 0, wi = 0, pi = 0;
        int64_t newest = lkg_newest_routed(h, n);
        int64_t whole = lkg_select(h, n, cases[i].bad, cases[i].nbad, 0, &wi);
        int64_t before = lkg_select(h, n, cases[i].bad, cases[i].nbad, newest, NULL);

        for (size_t k = 0; k <= n; k++) {
            if (!lkg_history_decides(h, k, cases[i].bad, cases[i].nbad))
                continue;
            if (first == 0)
                first = k;
            if (lkg_newest_routed(h, k) != newest ||
                lkg_select(h, k, cases[i].bad, cases[i].nbad, 0, &pi) != whole || pi != wi ||
                lkg_select(h, k, cases[i].bad, cases[i].nbad, newest, NULL) != before) {
                print_error("%s: %zu entries decide otherwise than all %zu\n", cases[i].what, k, n);
                bad++;
            }
        }
        if (first != cases[i].decides_at) {
            print_error("%s: decided at %zu entries, want %zu\n", cases[i].what, first,
                        cases[i].decides_at);
            bad++;
        }
    }
    assert_int_equal(bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_promo_step_table),
        cmocka_unit_test(test_promo_step_terminal),
        cmocka_unit_test(test_promo_step_reason),
        cmocka_unit_test(test_promo_init),
        cmocka_unit_test(test_promo_walk),
        cmocka_unit_test(test_promo_state_names),
        cmocka_unit_test(test_lkg_select_table),
        cmocka_unit_test(test_lkg_newest_routed_table),
        cmocka_unit_test(test_lkg_history_decides_table),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
