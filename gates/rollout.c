/*
 * rollout.c - see rollout.h.
 */
#include "rollout.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const char *const state_names[] = {
    "evaluating", "awaiting_approval", "rolling_out", "succeeded",
    "rejected",   "aborted",           "rolled_back",
};

const char *promo_state_name(enum promo_state s)
{
    return state_names[s];
}

bool promo_state_parse(const char *s, enum promo_state *out)
{
    size_t i;

    for (i = 0; s && i < sizeof(state_names) / sizeof(state_names[0]); i++) {
        if (strcmp(s, state_names[i]) == 0) {
            *out = (enum promo_state)i;
            return true;
        }
    }
    return false;
}

bool promo_state_active(enum promo_state s)
{
    return s == PROMO_EVALUATING || s == PROMO_AWAITING_APPROVAL || s == PROMO_ROLLING_OUT;
}

static const char *const phase_names[] = {NULL, "shadow", "internal", "steps"};

const char *promo_phase_name(enum promo_phase p)
{
    return phase_names[p];
}

bool promo_phase_parse(const char *s, enum promo_phase *out)
{
    size_t i;

    if (s == NULL || s[0] == '\0') {
        *out = PROMO_PHASE_NONE;
        return true;
    }
    for (i = 1; i < sizeof(phase_names) / sizeof(phase_names[0]); i++) {
        if (strcmp(s, phase_names[i]) == 0) {
            *out = (enum promo_phase)i;
            return true;
        }
    }
    return false;
}

void promo_init(struct promo *p, const struct gate_policy *pol, int64_t candidate, int64_t baseline)
{
    memset(p, 0, sizeof(*p));
    p->state = PROMO_EVALUATING;
    p->candidate = candidate;
    p->baseline = baseline;
    memcpy(p->steps, pol->steps, sizeof(p->steps));
    p->nsteps = pol->nsteps;
    p->bake_ms = pol->bake_seconds * 1000;
    p->auto_advance = pol->auto_advance;
    p->approvals_required = pol->approvals_required;
    p->step_index = -1;
    p->phase = PROMO_PHASE_NONE;
    p->shadow_ms = pol->shadow_seconds * 1000;
    p->has_internal = pol->has_internal;
    memcpy(p->internal_header, pol->internal_header, sizeof(p->internal_header));
    memcpy(p->internal_value, pol->internal_value, sizeof(p->internal_value));
    p->internal_ms = pol->internal_seconds * 1000;
}

static enum mg_code conflict(struct mg_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static enum mg_code conflict(struct mg_error *err, const char *fmt, ...)
{
    va_list ap;

    if (err) {
        err->code = MG_ECONFLICT;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof(err->message), fmt, ap);
        va_end(ap);
        err->field[0] = '\0';
    }
    return MG_ECONFLICT;
}

static void note(struct promo_actions *a, const char *event, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void note(struct promo_actions *a, const char *event, const char *fmt, ...)
{
    va_list ap;

    snprintf(a->event, sizeof(a->event), "%s", event);
    va_start(ap, fmt);
    vsnprintf(a->detail, sizeof(a->detail), fmt, ap);
    va_end(ap);
}

/* Take step i: routes [{baseline, 100-w}, {candidate, w}] (or just the
 * candidate), then either finish or set the bake timer. */
static void take_step(struct promo *n, struct promo_actions *a, int i, int64_t now)
{
    int w;

    if (i < 0 || (size_t)i >= n->nsteps)
        i = (int)n->nsteps - 1; /* past the end: the last step (100) */
    w = n->steps[i];
    n->state = PROMO_ROLLING_OUT;
    n->phase = PROMO_PHASE_STEPS;
    n->step_index = i;
    a->set_routes = true;
    a->nroutes = 0;
    if (n->baseline != 0 && w < 100) {
        a->routes[a->nroutes++] = (struct promo_route){n->baseline, 100 - w};
        a->routes[a->nroutes++] = (struct promo_route){n->candidate, w};
        n->weight = w;
    } else {
        /* Nothing to split with: the candidate takes everything, and the steps
         * still pace the rollout (bake time, smoke tests) before success. */
        a->routes[a->nroutes++] = (struct promo_route){n->candidate, 100};
        n->weight = 100;
    }
    if (w == 100) {
        n->state = PROMO_SUCCEEDED;
        n->next_step_at = 0;
        note(a, "succeeded", "v%lld holds 100%% of the alias", (long long)n->candidate);
        return;
    }
    n->next_step_at = n->auto_advance ? now + n->bake_ms : 0;
    note(a, "step", "step %d of %zu: v%lld at %d%%%s", i + 1, n->nsteps, (long long)n->candidate, w,
         i == 0 && n->baseline == 0 && (n->shadow_ms > 0 || n->has_internal)
             ? " (no baseline to mirror or fall back on: the shadow and internal phases are "
               "skipped)"
             : "");
}

/* Phases before the steps: the baseline answers every request. */
static void phase_routes(struct promo *n, struct promo_actions *a, enum promo_phase phase,
                         int64_t len_ms, int64_t now)
{
    n->state = PROMO_ROLLING_OUT;
    n->phase = phase;
    n->step_index = -1;
    n->weight = 0;
    n->next_step_at = n->auto_advance ? now + len_ms : 0;
    a->set_routes = true;
    a->nroutes = 0;
    a->routes[a->nroutes++] = (struct promo_route){n->baseline, 100};
}

static void enter_shadow(struct promo *n, struct promo_actions *a, int64_t now)
{
    phase_routes(n, a, PROMO_PHASE_SHADOW, n->shadow_ms, now);
    a->shadow = n->candidate;
    note(a, "shadow",
         "shadow phase: v%lld gets a copy of every request for %lld s while v%lld answers "
         "them; its smoke tests run meanwhile",
         (long long)n->candidate, (long long)(n->shadow_ms / 1000), (long long)n->baseline);
}

static void enter_internal(struct promo *n, struct promo_actions *a, int64_t now)
{
    phase_routes(n, a, PROMO_PHASE_INTERNAL, n->internal_ms, now);
    a->has_match = true;
    memcpy(a->match_header, n->internal_header, sizeof(a->match_header));
    memcpy(a->match_value, n->internal_value, sizeof(a->match_value));
    a->match_version = n->candidate;
    note(a, "internal",
         "internal phase: requests with %s: %s go to v%lld for %lld s; all others to v%lld",
         n->internal_header, n->internal_value, (long long)n->candidate,
         (long long)(n->internal_ms / 1000), (long long)n->baseline);
}

/* From where the rollout is to what comes next: a phase, or the next step. */
static void advance(struct promo *n, struct promo_actions *a, int64_t now)
{
    switch (n->phase) {
    case PROMO_PHASE_NONE:
        if (n->step_index >= 0) /* stepping since before phases were recorded */
            take_step(n, a, n->step_index + 1, now);
        else if (n->baseline != 0 && n->shadow_ms > 0)
            enter_shadow(n, a, now);
        else if (n->baseline != 0 && n->has_internal)
            enter_internal(n, a, now);
        else
            take_step(n, a, 0, now);
        break;
    case PROMO_PHASE_SHADOW:
        if (n->has_internal)
            enter_internal(n, a, now);
        else
            take_step(n, a, 0, now);
        break;
    case PROMO_PHASE_INTERNAL:
        take_step(n, a, 0, now);
        break;
    case PROMO_PHASE_STEPS:
        take_step(n, a, n->step_index + 1, now);
        break;
    }
}

/* Back to the baseline (or to the alias's state before the promotion). */
static void restore(struct promo *n, struct promo_actions *a, enum promo_state to)
{
    bool touched = n->step_index >= 0 || n->phase != PROMO_PHASE_NONE;

    n->state = to;
    n->next_step_at = 0;
    n->weight = 0;
    if (!touched)
        return; /* no route was ever changed */
    a->restore = true;
    a->set_routes = true;
    a->nroutes = 0;
    if (n->baseline != 0)
        a->routes[a->nroutes++] = (struct promo_route){n->baseline, 100};
}

/* After gates and approvals are settled: start rolling out. */
static void start_rollout(struct promo *n, struct promo_actions *a, int64_t now)
{
    n->phase = PROMO_PHASE_NONE;
    advance(n, a, now);
}

enum mg_code promo_step(const struct promo *cur, const struct promo_event *ev, int64_t now,
                        struct promo *next, struct promo_actions *acts, struct mg_error *err)
{
    struct promo n = *cur;
    struct promo_actions a;
    const char *why = ev->reason ? ev->reason : "";

    memset(&a, 0, sizeof(a));
    if (!promo_state_active(cur->state))
        return conflict(err, "the promotion is already %s", promo_state_name(cur->state));

    switch (ev->kind) {
    case PROMO_EV_GATES:
        if (cur->state != PROMO_EVALUATING)
            return conflict(err, "gates are evaluated only while evaluating, not %s",
                            promo_state_name(cur->state));
        if (ev->gates_failed) {
            n.state = PROMO_REJECTED;
            note(&a, "rejected", "a gate failed%s%s", *why ? ": " : "", why);
        } else if (ev->gates_pending) {
            note(&a, "evaluating", "waiting for %s", *why ? why : "pending gates");
        } else if (cur->approvals_required > 0) {
            n.state = PROMO_AWAITING_APPROVAL;
            note(&a, "gates_passed", "gates passed; %d approval(s) needed",
                 cur->approvals_required);
        } else {
            start_rollout(&n, &a, now);
        }
        break;
    case PROMO_EV_APPROVALS:
        if (cur->state != PROMO_AWAITING_APPROVAL)
            return conflict(err, "the promotion is %s, not awaiting approval",
                            promo_state_name(cur->state));
        if (ev->rejected) {
            n.state = PROMO_REJECTED;
            note(&a, "rejected", "a reviewer rejected it%s%s", *why ? ": " : "", why);
        } else if (ev->satisfied) {
            start_rollout(&n, &a, now);
        }
        break;
    case PROMO_EV_TICK:
        if (cur->state != PROMO_ROLLING_OUT || !cur->auto_advance || cur->next_step_at == 0 ||
            now < cur->next_step_at)
            break; /* nothing due */
        if (cur->phase == PROMO_PHASE_SHADOW && ev->smoke_pending)
            break; /* the shadow phase ends once the candidate's smoke test passed */
        if (ev->analysis_wait)
            break; /* live analysis has not yet passed this phase or step */
        advance(&n, &a, now);
        break;
    case PROMO_EV_ADVANCE:
        if (cur->state != PROMO_ROLLING_OUT)
            return conflict(err, "only a rolling-out promotion can advance; this one is %s",
                            promo_state_name(cur->state));
        if (cur->phase == PROMO_PHASE_SHADOW && ev->smoke_pending)
            return conflict(err,
                            "the smoke test of v%lld is still running; the shadow phase "
                            "ends once it passed",
                            (long long)cur->candidate);
        advance(&n, &a, now);
        break;
    case PROMO_EV_ABORT:
        restore(&n, &a, PROMO_ABORTED);
        note(&a, "aborted", "%s", *why ? why : "aborted by a deployer");
        break;
    case PROMO_EV_ROLLBACK:
        n.state = PROMO_ROLLED_BACK;
        n.next_step_at = 0;
        n.weight = 0;
        note(&a, "rolled_back", "%s", *why ? why : "the alias was rolled back");
        break;
    case PROMO_EV_ANALYSIS: {
        const char *type = ev->analysis_event ? ev->analysis_event : "analysis.failed";

        if (cur->state != PROMO_ROLLING_OUT)
            return conflict(err,
                            "live analysis judges only a rolling-out promotion; this one is %s",
                            promo_state_name(cur->state));
        if (ev->analysis_rollback) {
            restore(&n, &a, PROMO_ROLLED_BACK);
            note(&a, type, "automatic rollback: %s", *why ? why : "live analysis failed");
        } else {
            note(&a, type, "%s", *why ? why : "live analysis is inconclusive");
        }
        break;
    }
    case PROMO_EV_SMOKE_FAILED:
    case PROMO_EV_DELIVERY_FAILED:
        if (cur->state == PROMO_ROLLING_OUT) {
            restore(&n, &a, PROMO_ROLLED_BACK);
            bool phase = cur->phase == PROMO_PHASE_SHADOW || cur->phase == PROMO_PHASE_INTERNAL;

            note(&a, "rolled_back", "automatic rollback%s%s%s: %s", phase ? " during the " : "",
                 phase ? promo_phase_name(cur->phase) : "", phase ? " phase" : "",
                 *why ? why
                      : (ev->kind == PROMO_EV_SMOKE_FAILED ? "smoke test failed"
                                                           : "delivery failed"));
        } else {
            n.state = PROMO_REJECTED;
            note(&a, "rejected", "%s",
                 *why ? why
                      : (ev->kind == PROMO_EV_SMOKE_FAILED ? "smoke test failed"
                                                           : "delivery failed"));
        }
        break;
    }
    *next = n;
    *acts = a;
    return MG_OK;
}

/* ---- last-known-good -------------------------------------------------- */

/* Was v rolled back after generation gen? */
static bool bad_since(const struct lkg_bad *bad, size_t n, int64_t v, int64_t gen)
{
    size_t i;

    for (i = 0; i < n; i++) {
        if (bad[i].version == v && bad[i].generation > gen)
            return true;
    }
    return false;
}

/* Do all of the entry's match rules (if any) pin v? */
static bool pins_only(const struct lkg_entry *e, int64_t v)
{
    size_t i;

    for (i = 0; i < e->npinned; i++) {
        if (e->pinned[i] != v)
            return false;
    }
    return true;
}

bool lkg_entry_holds(const struct lkg_entry *e, const struct lkg_bad *bad, size_t nbad,
                     int64_t exclude)
{
    int64_t v;

    if (e->kind != LKG_SET && e->kind != LKG_PROMOTED)
        return false;
    if (e->nroutes != 1 || e->routes[0].weight != 100)
        return false;
    v = e->routes[0].version;
    return v != exclude && !bad_since(bad, nbad, v, e->generation) && pins_only(e, v);
}

int64_t lkg_select(const struct lkg_entry *hist, size_t n, const struct lkg_bad *bad, size_t nbad,
                   int64_t exclude, size_t *entry_index)
{
    size_t i;

    for (i = 0; i < n; i++) {
        if (!lkg_entry_holds(&hist[i], bad, nbad, exclude))
            continue;
        if (entry_index)
            *entry_index = i;
        return hist[i].routes[0].version;
    }
    return 0;
}

/* Does the entry route v: a weight above 0, a match rule, or the shadow? */
static bool routes_version(const struct lkg_entry *e, int64_t v)
{
    size_t i;

    for (i = 0; i < e->nroutes; i++) {
        if (e->routes[i].version == v && e->routes[i].weight > 0)
            return true;
    }
    for (i = 0; i < e->npinned; i++) {
        if (e->pinned[i] == v)
            return true;
    }
    return v != 0 && e->shadow == v;
}

/* Of the newest entry's routed versions, is v newer than best (see lkg_newest_routed)? */
static void consider(const struct lkg_entry *hist, size_t n, int64_t v, int64_t *best,
                     size_t *best_since)
{
    size_t since = 0, k;

    if (v == 0 || !routes_version(&hist[0], v))
        return;
    /* How far back has v been routed without a break? */
    for (k = 1; k < n && routes_version(&hist[k], v); k++)
        since = k;
    /* Smaller `since` = routed more recently; ties → higher version. */
    if (since < *best_since || (since == *best_since && v > *best)) {
        *best = v;
        *best_since = since;
    }
}

int64_t lkg_newest_routed(const struct lkg_entry *hist, size_t n)
{
    int64_t best = 0;
    size_t best_since = SIZE_MAX, i;

    if (n == 0)
        return 0;
    for (i = 0; i < hist[0].nroutes; i++)
        consider(hist, n, hist[0].routes[i].version, &best, &best_since);
    for (i = 0; i < hist[0].npinned; i++)
        consider(hist, n, hist[0].pinned[i], &best, &best_since);
    consider(hist, n, hist[0].shadow, &best, &best_since);
    return best;
}

/* The i-th version entry e names (its routes, then its pins, then its shadow; 0 for none). */
static int64_t named_version(const struct lkg_entry *e, size_t i)
{
    if (i < e->nroutes)
        return e->routes[i].version;
    i -= e->nroutes;
    return i < e->npinned ? e->pinned[i] : e->shadow;
}

bool lkg_history_decides(const struct lkg_entry *hist, size_t n, const struct lkg_bad *bad,
                         size_t nbad)
{
    size_t names, reaching = 0, ending = 0;
    int64_t newest;

    if (n == 0)
        return false;
    /* lkg_newest_routed: a version routed through all n entries may have been routed
     * further back still, so it ranks below any whose run began inside them (the winner is
     * known), but two or more such versions and nothing else rank by what is older. */
    names = hist[0].nroutes + hist[0].npinned + 1;
    for (size_t i = 0; i < names; i++) {
        int64_t v = named_version(&hist[0], i);
        bool again = false;
        size_t k = 1;

        for (size_t j = 0; j < i && !again; j++)
            again = named_version(&hist[0], j) == v;
        if (again || v == 0 || !routes_version(&hist[0], v))
            continue;
        while (k < n && routes_version(&hist[k], v))
            k++;
        if (k == n)
            reaching++;
        else
            ending++;
    }
    if (ending == 0 && reaching > 1)
        return false;
    /* lkg_select, with nothing excluded and with the newest routed version excluded: the
     * first entry, newest first, that holds is among these n or the answer is further back. */
    newest = lkg_newest_routed(hist, n);
    return lkg_select(hist, n, bad, nbad, 0, NULL) != 0 &&
           (newest == 0 || lkg_select(hist, n, bad, nbad, newest, NULL) != 0);
}
