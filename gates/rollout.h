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

#include "../common/mg.h"
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
    int64_t next_step_at; /* ms since epoch, 0 when no timer */
};

/* A fresh promotion from a policy: evaluating, no step taken. */
void promo_init(struct promo *p, const struct gate_policy *pol, int64_t candidate,
                int64_t baseline);

enum promo_event_kind {
    PROMO_EV_GATES,          /* gate report: gates_failed / gates_pending */
    PROMO_EV_APPROVALS,      /* tally changed: rejected / satisfied */
    PROMO_EV_TICK,           /* the clock moved */
    PROMO_EV_ADVANCE,        /* a deployer asked for the next step now */
    PROMO_EV_ABORT,          /* a deployer aborted */
    PROMO_EV_ROLLBACK,       /* the alias was rolled back */
    PROMO_EV_SMOKE_FAILED,   /* the candidate failed a smoke test */
    PROMO_EV_DELIVERY_FAILED /* a gateway could not apply a step */
};

struct promo_event {
    enum promo_event_kind kind;
    bool gates_failed, gates_pending; /* PROMO_EV_GATES */
    bool rejected, satisfied;         /* PROMO_EV_APPROVALS */
    const char *reason;               /* free text for the event log */
};

#define PROMO_MAX_ROUTES 2

struct promo_route {
    int64_t version;
    int weight;
};

struct promo_actions {
    bool set_routes; /* apply routes[] to the alias */
    bool restore;    /* put the alias back as it was before the promotion
                      * (routes[] holds the baseline at 100 when there is one) */
    struct promo_route routes[PROMO_MAX_ROUTES];
    size_t nroutes;
    char event[32]; /* event type for the log, "" for none */
    char detail[256];
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

enum lkg_kind {
    LKG_SET,      /* direct PUT of an unprotected alias */
    LKG_STEP,     /* a promotion's intermediate step */
    LKG_PROMOTED, /* a promotion's final step: it succeeded */
    LKG_ROLLBACK, /* a rollback */
    LKG_ABORT,    /* a promotion aborted or rolled back to its baseline */
    LKG_DELETE,   /* the alias was deleted */
};

struct lkg_entry {
    int64_t generation;
    enum lkg_kind kind;
    const struct promo_route *routes;
    size_t nroutes;
};

/* A version rolled back from the alias at `generation`. */
struct lkg_bad {
    int64_t version;
    int64_t generation;
};

/*
 * The last-known-good version: walking history newest first, the first
 * entry that is a direct set or a succeeded promotion putting one version at
 * 100%, whose version has not been rolled back since (no bad mark with a
 * later generation than the entry). `exclude` (0 for none) is skipped too
 * (rollback looks for a target other than the newest routed version).
 * Returns the version and the index of its entry, or 0.
 */
int64_t lkg_select(const struct lkg_entry *hist, size_t n, const struct lkg_bad *bad, size_t nbad,
                   int64_t exclude, size_t *entry_index);

/* The newest routed version: of the versions routed now (entry 0, newest
 * first), the one that most recently gained weight. 0 when nothing is routed. */
int64_t lkg_newest_routed(const struct lkg_entry *hist, size_t n);

#endif
