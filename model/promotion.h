/*
 * promotion.h - a new promotion as release control hands it to the store
 * (docs/contract.md "Promotions"). Header only: release control fills it once
 * (control/release_promotions.c), the store reads only its fields.
 *
 * Strings and json_t members are BORROWED and must outlive the call they are passed to.
 */
#ifndef MODEL_PROMOTION_H
#define MODEL_PROMOTION_H

#include <stdint.h>

#include <jansson.h>

struct mg_promotion_new {
    char id[24];                 /* "prm_" and its random part */
    const char *model, *alias;   /* validated names */
    int64_t version;             /* the candidate */
    int64_t baseline_version;    /* the alias's last-known-good, or 0 for none */
    const char *state;           /* gates/rollout.h's promo_state_name() */
    const char *phase;           /* promo_phase_name(), or NULL */
    const char *reason;          /* or NULL */
    int step_index, weight;      /* the rollout's position (-1: before the first step) */
    int64_t next_step_at_ms;     /* when the clock moves it next (0: not scheduled) */
    const json_t *policy;        /* the policy snapshot, as gates/ wrote it (stored as given) */
    const json_t *gates;         /* the gate report's "gates" array (stored as given) */
    const char *creator_issuer;  /* the creator as a person (separation of duties), */
    const char *creator_subject; /* both or neither, else NULL */
    const char *smoke_gpu;       /* "required", "preferred" or "none": queue the candidate's smoke
                                  * test with the promotion; NULL: no test */
};

#endif
