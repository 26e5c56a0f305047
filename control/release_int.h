/*
 * release_int.h - what the files of release control (release.c: facts into gate inputs and
 * committing a change; release_aliases.c; release_promotions.c; release_timer.c) share with
 * each other and nobody else.
 */
#ifndef SRV_RELEASE_INT_H
#define SRV_RELEASE_INT_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "../gates/policy.h"
#include "../gates/rollout.h"
#include "../store/store.h"
#include "control.h"

/* Attempts at a decision when others keep changing the same alias/promotion. Each round
 * at least one of the racing writers commits, so N writers at once all get through within
 * N rounds: 16 covers the HTTP threads of several replicas writing one alias (5 let an
 * unconditional PUT answer 409 when 8 raced on PostgreSQL under ASan). */
#define RETRIES 16

/* Each approval's teams, as pointers into the JSON list (BORROWED from it). */
struct rel_approval_teams {
    const char *v[STORE_MAX_SCOPES];
};

/*
 * Apply one event to a stored promotion: read it, decide, commit — again if
 * the promotion or its alias changed meanwhile. `decide` fills the event
 * (and may refuse); approval_* are recorded with the change.
 */
struct rel_decision {
    struct promo_event ev;
    const char *approval_by, *approval_decision, *approval_comment;
    /* the approver's person (docs/contract.md "Identity"), "" when the credential has none */
    const char *approval_issuer, *approval_subject;
    json_t *approval_teams;          /* the decider's teams (approval groups), BORROWED, or NULL */
    const char *approval_teams_text; /* the same as JSON text, for the store */
    bool refresh_gates;              /* re-evaluate the gates for the stored report */
    int64_t leader_epoch; /* > 0: the rollout clock's, commits only under this leader epoch */
};

int64_t rel_facts_lkg(const json_t *facts, int64_t exclude, json_t **entry);

/* The facts release control decides on (store_alias_facts), with only as much of the
 * history, newest first, as rel_facts_lkg (nothing excluded, and the newest routed version
 * excluded) and rel_facts_newest_routed need to answer as on the whole of it. */
enum mg_code rel_alias_facts(struct ctl *ctl, const char *model, const char *alias, json_t **out,
                             struct mg_error *err);

int64_t rel_facts_newest_routed(const json_t *facts);

enum mg_code rel_load_policy(struct ctl *ctl, const char *model, const char *alias,
                             struct gate_policy *pol, json_t **snapshot, struct mg_error *err);

size_t rel_approvals_of(const json_t *list, struct gate_approval *a,
                        struct rel_approval_teams *teams, size_t max);

enum mg_code rel_evaluate(struct ctl *ctl, const char *model, const json_t *ver, int64_t baseline,
                          const struct gate_policy *pol, const json_t *approvals,
                          bool include_approvals, int64_t since_ms, json_t **report,
                          struct mg_error *err);

/* ctl_alias_names of the routes r would give (model, alias): *names NEW. */
enum mg_code rel_alias_names(struct ctl *ctl, const char *model, const char *alias,
                             const struct mg_routes *r, json_t **names, struct mg_error *err);

/* Commit through store_release_commit; *alias_out (may be NULL) receives the alias as this
 * change left it, read in the change's own transaction (NEW). */
enum mg_code rel_commit_change(struct ctl *ctl, const char *actor, struct store_alias_change *a,
                               const struct store_promotion_change *pc, json_t **alias_out,
                               struct mg_error *err);

void rel_add_lkg(json_t *alias, const json_t *facts);

enum mg_code rel_promo_of(const json_t *p, struct promo *out, struct gate_policy *pol,
                          struct mg_error *err);

const char *rel_alias_kind(const struct promo *next, const struct promo_actions *a);

void rel_strip_internal(json_t *p);

/* Live canary analysis holds the promotion's stage: it may not end at now_ms yet (no passed
 * interval of its own, or a failure streak open). false without analysis. */
bool rel_analysis_wait(struct ctl *ctl, const char *id, const struct gate_policy *pol,
                       const struct promo *cur, int64_t now_ms);

/* Set the Promotion's "analysis" ({"consecutive_failures","consecutive_inconclusive",
 * "passed_in_stage","intervals":[…oldest first]}, or null without analysis). */
void rel_analysis_add(struct ctl *ctl, json_t *p);

enum mg_code rel_apply_event(struct ctl *ctl, const char *actor, const char *id,
                             struct rel_decision *d, json_t **out, struct mg_error *err);

#endif
