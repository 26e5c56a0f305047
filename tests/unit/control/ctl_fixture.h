/*
 * ctl_fixture.h - what the release control tests (tests/unit/control/test_release*.c) share:
 * a real store on a fresh data directory (tests/unit/store/store_fixture.h), a struct ctl
 * over it, and FAKE worker tables in ctl->gw and ctl->rn that record every call control
 * makes through them. No HTTP, no gateway pool, no runner: what is tested is control's
 * decisions (read back from the store) and the calls it makes through the seams.
 *
 * The fakes answer as the real workers would when everything goes well (a wait wakes at
 * once, a check passes, names are listed for one gateway when asked); knobs in struct cfx
 * make them refuse. rn.enqueue queues the test in the store, as runner_enqueue does, so
 * the shadow phase sees it pending. CFX_TRACE=1 in the environment prints each call.
 */
#ifndef CTL_FIXTURE_H
#define CTL_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "control/control.h"
#include "control/release.h"
#include "model/config.h"
#include "../store/store_fixture.h"

#define CFX_MAX_CALLS 512

/* One call through a worker table, as control made it. */
struct cfx_call {
    char what[24]; /* "gw.kick", "gw.alias_names", "gw.alias_check", "gw.wait", "rn.enqueue", ... */
    char model[64], alias[64];
    int64_t version;      /* rn.enqueue */
    int64_t gen;          /* gw.wait */
    int64_t leader_epoch; /* rn.enqueue */
    char trigger[16], gpu_mode[16];
    json_t *routes, *match, *shadow; /* copies (alias_names, alias_check), or NULL */
};

struct cfx {
    struct fx *fx; /* the store fixture: fx->st, fx->err */
    struct srv_config cfg;
    struct ctl ctl;
    struct cfx_call calls[CFX_MAX_CALLS];
    size_t ncalls;
    /* Knobs for the fakes. */
    const char *refuse_check;  /* alias_check refuses, naming this gateway (NULL: passes) */
    const char *refuse_names;  /* alias_names refuses, naming this gateway (NULL: lists) */
    const char *names_gateway; /* alias_names lists "<gw>:<model>-<alias>" for this gateway */
    double largest_gpu_gib;    /* what rn.largest_gpu_gib reports */
};

/* cmocka setup/teardown: *state becomes a struct cfx with an open store, a webhook gateway
 * "edge" hearing every alias (so changes reach the outbox), the built-in runner gateway
 * disabled, and both worker tables registered with the fakes. */
int cfx_setup(void **state);
int cfx_teardown(void **state);

/* Leave the worker tables empty (no gateway pool, no runner linked in). */
void cfx_unregister(struct cfx *c);

/* Forget the calls recorded so far. */
void cfx_calls_reset(struct cfx *c);

/* How many calls named `what` were recorded; the last of them (or NULL). */
size_t cfx_count(const struct cfx *c, const char *what);
const struct cfx_call *cfx_last(const struct cfx *c, const char *what);

/* A model with versions 1..n, version i with metrics {"auc": aucs[i-1]} (aucs may be NULL:
 * no metrics), all of one artifact. */
void cfx_model(struct cfx *c, const char *model, int n, const double *aucs);

/* Put a policy (JSON text) on (model, alias). */
void cfx_policy(struct cfx *c, const char *model, const char *alias, const char *policy);

/* Set the alias to one version at 100% through release control (rel_alias_set). */
void cfx_alias_to(struct cfx *c, const char *model, const char *alias, int64_t version);

/* The alias as release control reads it (NEW); fails the test when it cannot. */
json_t *cfx_alias(struct cfx *c, const char *model, const char *alias);

/* The alias's generation (0 when it does not exist). */
int64_t cfx_generation(struct cfx *c, const char *model, const char *alias);

/* Assert routes hold exactly these (version, weight) pairs, in any order. */
#define cfx_expect_routes(routes, n, ...)                                                          \
    cfx_expect_routes_at(routes, n, (const int64_t[]){__VA_ARGS__}, __FILE__, __LINE__)
void cfx_expect_routes_at(const json_t *routes, size_t n, const int64_t *pairs, const char *file,
                          int line);

/* The alias's current routes must be exactly these pairs. */
#define cfx_expect_alias_routes(c, model, alias, n, ...)                                           \
    do {                                                                                           \
        json_t *cfx_a_ = cfx_alias(c, model, alias);                                               \
        cfx_expect_routes_at(json_object_get(cfx_a_, "routes"), n, (const int64_t[]){__VA_ARGS__}, \
                             __FILE__, __LINE__);                                                  \
        json_decref(cfx_a_);                                                                       \
    } while (0)

/* The edge gateway's outbox row for (model, alias): its generation, -1 when there is none. */
int64_t cfx_outbox_gen(struct cfx *c, const char *model, const char *alias);

/* The last-known-good version (rel_lkg), 0 when there is none. */
int64_t cfx_lkg(struct cfx *c, const char *model, const char *alias);

/* A principal with a name (no teams, no person). */
struct store_principal cfx_who(const char *name);

/* Create a promotion as "dep"; fails the test unless MG_OK. *id receives its id; returns the
 * Promotion (NEW). */
json_t *cfx_promote(struct cfx *c, const char *model, int64_t version, const char *alias,
                    char id[64]);

/* The promotion as release control reads it (NEW), and its state / rollout fields. */
json_t *cfx_promotion(struct cfx *c, const char *id);
void cfx_expect_state_at(struct cfx *c, const char *id, const char *state, const char *file,
                         int line);
#define cfx_expect_state(c, id, state) cfx_expect_state_at(c, id, state, __FILE__, __LINE__)
int64_t cfx_rollout_int(struct cfx *c, const char *id, const char *field);

/* Is `version` marked bad for the alias (the version's bad_for lists it)? */
bool cfx_bad_for(struct cfx *c, const char *model, int64_t version, const char *alias);

/* Does an event of `type` appear in the promotion's events, with detail containing `part`
 * (NULL: any)? */
bool cfx_has_event(struct cfx *c, const char *id, const char *type, const char *part);

/* Run the newest smoke test of (model, version) to an end: claim it and finish it in `state`
 * (passed, failed, error) with a reason, as a runner would record it. */
void cfx_smoke_finish(struct cfx *c, const char *model, int64_t version, const char *state,
                      const char *reason);

/* The newest smoke test's state of (model, version), or "" when none. */
const char *cfx_smoke_state(struct cfx *c, const char *model, int64_t version, char out[16]);

#endif
