/*
 * rollout.h - the promotion state machine and last-known-good selection,
 * as pure functions: (state, event, now) → (new state, actions).
 *
 * States: evaluating → awaiting_approval → rolling_out → succeeded, or
 * rejected | aborted | rolled_back. server/ persists the state, executes
 * the actions (set routes, record events) in one store transaction, and
 * feeds events back: gate results, approvals, timer ticks, advance, abort,
 * rollback, smoke failures, delivery failures.
 */
#ifndef GATE_ROLLOUT_H
#define GATE_ROLLOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../base/mg.h"
#include "../model/history.h"
#include "policy.h"

enum promo_state {
    PROMO_EVALUATING,
    PROMO_AWAITING_APPROVAL,
    PROMO_ROLLING_OUT,
    PROMO_SUCCEEDED,
    PROMO_REJECTED,
    PROMO_ABORTED,
    PROMO_ROLLED_BACK,
};

const char *promo_state_name(enum promo_state s);
bool promo_state_parse(const char *s, enum promo_state *out);
bool promo_state_active(enum promo_state s);

/*
 * Where a rolling-out promotion is (docs/contract.md "Routing strategies"): the candidate first
 * gets a copy of every request while the baseline answers them (shadow; its smoke tests run
 * meanwhile), then only the requests carrying the policy's internal header (internal),
 * then the weighted steps. A policy without those phases, or a promotion without a
 * baseline to mirror or to fall back on, goes straight to the steps. NONE: the rollout has
 * not begun.
 */
enum promo_phase {
    PROMO_PHASE_NONE,
    PROMO_PHASE_SHADOW,
    PROMO_PHASE_INTERNAL,
    PROMO_PHASE_STEPS,
};

/* "shadow", "internal", "steps"; NULL for NONE. */
const char *promo_phase_name(enum promo_phase p);
/* The phase of a name; NULL or "" is NONE. false for anything else. */
bool promo_phase_parse(const char *s, enum promo_phase *out);

struct promo {
    enum promo_state state;
    int64_t candidate; /* version */
    int64_t baseline;  /* version, 0 when none */
    int steps[GATE_MAX_STEPS];
    size_t nsteps;
    int64_t bake_ms;
    bool auto_advance;
    int approvals_required;
    int step_index;       /* -1 before the first step */
    int weight;           /* candidate's current weight */
    int64_t next_step_at; /* ms since epoch, 0 when no timer (the end of a phase, too) */
    enum promo_phase phase;
    int64_t shadow_ms; /* length of the shadow phase, 0 for none */
    bool has_internal; /* an internal phase: */
    char internal_header[GATE_HEADER_NAME_MAX + 1];
    char internal_value[GATE_HEADER_VALUE_MAX + 1];
    int64_t internal_ms;
};

/* A fresh promotion from a policy: evaluating, no step taken. */
void promo_init(struct promo *p, const struct gate_policy *pol, int64_t candidate,
                int64_t baseline);

enum promo_event_kind {
    PROMO_EV_GATES,           /* gate report: gates_failed / gates_pending */
    PROMO_EV_APPROVALS,       /* tally changed: rejected / satisfied */
    PROMO_EV_TICK,            /* the clock moved (smoke_pending: see below) */
    PROMO_EV_ADVANCE,         /* a deployer asked for the next step or phase now */
    PROMO_EV_ABORT,           /* a deployer aborted */
    PROMO_EV_ROLLBACK,        /* the alias was rolled back */
    PROMO_EV_SMOKE_FAILED,    /* the candidate failed a smoke test */
    PROMO_EV_DELIVERY_FAILED, /* a gateway could not apply a step */
    PROMO_EV_ANALYSIS         /* live canary analysis decided (analysis_rollback, reason) */
};

struct promo_event {
    enum promo_event_kind kind;
    bool gates_failed, gates_pending; /* PROMO_EV_GATES */
    bool rejected, satisfied;         /* PROMO_EV_APPROVALS */
    /* TICK, ADVANCE: the candidate's smoke test of the shadow phase is still queued or
     * running. A shadow phase never ends before it passed: a due tick waits, an advance
     * is refused. */
    bool smoke_pending;
    /* TICK: live canary analysis does not let the phase or step end yet (no passed
     * interval in it, or a failure streak open): a due tick waits. A deployer's advance
     * is not held. */
    bool analysis_wait;
    /* ANALYSIS: roll back (failure_limit reached, or on_inconclusive: rollback), else only
     * record analysis_event; analysis_event is "analysis.failed" or "analysis.inconclusive". */
    bool analysis_rollback;
    const char *analysis_event;
    const char *reason; /* free text for the event log */
};

#define PROMO_MAX_ROUTES 2

struct promo_actions {
    bool set_routes; /* apply routes[] to the alias */
    bool restore;    /* put the alias back as it was before the promotion
                      * (routes[] holds the baseline at 100 when there is one) */
    struct promo_route routes[PROMO_MAX_ROUTES];
    size_t nroutes;
    /* With set_routes, the rest of the alias's generation: a promotion's change replaces
     * its match rules and shadow with these (none outside the shadow and internal phases). */
    bool has_match; /* one rule: internal_header = internal_value → match_version */
    char match_header[GATE_HEADER_NAME_MAX + 1];
    char match_value[GATE_HEADER_VALUE_MAX + 1];
    int64_t match_version;
    int64_t shadow; /* the shadow version (a copy of every request), 0 for none */
    char event[32]; /* event type for the log, "" for none */
    char detail[448];
};

/*
 * Apply one event. Returns MG_OK with *next and *acts filled, or
 * MG_ECONFLICT (message says why) when the event is not allowed in the
 * current state — nothing changes then. A TICK that is not due returns MG_OK
 * with *next == *cur and no actions.
 */
enum mg_code promo_step(const struct promo *cur, const struct promo_event *ev, int64_t now,
                        struct promo *next, struct promo_actions *acts, struct mg_error *err);

/* ---- last-known-good -------------------------------------------------- */

/*
 * The last-known-good version: walking history newest first, the first
 * entry that is a direct set or a succeeded promotion putting one version at
 * 100% (every match rule of the entry pinning that same version too: a
 * version that some requests bypass does not hold the whole alias; a shadow
 * answers no one and does not count), whose version has not been rolled back
 * since (no bad mark with a later generation than the entry). `exclude` (0
 * for none) is skipped too (rollback looks for a target other than the
 * newest routed version). Returns the version and the index of its entry, or 0.
 */
int64_t lkg_select(const struct lkg_entry *hist, size_t n, const struct lkg_bad *bad, size_t nbad,
                   int64_t exclude, size_t *entry_index);

/* lkg_select's test of one entry: does e hold its one version (e->routes[0]) as the
 * last-known-good? For a caller reading history one entry at a time, newest first: the first
 * entry that passes is lkg_select's choice. */
bool lkg_entry_holds(const struct lkg_entry *e, const struct lkg_bad *bad, size_t nbad,
                     int64_t exclude);

/* The newest routed version: of the versions routed now (entry 0, newest
 * first: a weight above 0, a match rule or the shadow), the one that most
 * recently became routed. 0 when nothing is routed. */
int64_t lkg_newest_routed(const struct lkg_entry *hist, size_t n);

/*
 * Do the newest n entries of a history decide what the whole history would: lkg_newest_routed,
 * and lkg_select with nothing excluded and with the newest routed version excluded (both
 * found among them)? For a reader of history in pages, newest first (store_alias_facts_until):
 * once this holds it can stop. False for n == 0.
 */
bool lkg_history_decides(const struct lkg_entry *hist, size_t n, const struct lkg_bad *bad,
                         size_t nbad);

#endif
