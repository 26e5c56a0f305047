/*
 * store_release.h - release control's records: aliases, policies, promotions, live canary
 * analysis, which versions the aliases route, and signed releases.
 *
 * Part of store.h, which includes it: include store.h. Its conventions (json_t ownership,
 * return values, out-parameters, thread safety) hold here.
 */
#ifndef STORE_RELEASE_H
#define STORE_RELEASE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "../base/mg.h"
#include "../model/alias.h"
#include "../model/history.h"
#include "../model/promotion.h"
#include "store_models.h"

struct store;

/* ---- aliases, policies, promotions ------------------------------------ */

/* Alias (docs/contract.md shape): {"model","alias","generation","routes":[{"version","weight",
 * "artifact","image"}],"match":[{"header","value","version","artifact","image"}],
 * "shadow":{"version","percent","artifact","image"}|null,"protected","promotion",
 * "last_known_good"?,"updated_at","deliveries"}. last_known_good is left for the caller
 * (a decision, gates/).
 * MG_ENOTFOUND when the alias does not exist or was deleted. */
enum mg_code store_alias_get(struct store *st, const char *model, const char *alias, json_t **out,
                             struct mg_error *err);

/* {"items":[Alias]} of a model's live aliases. */
enum mg_code store_alias_list(struct store *st, const char *model, json_t **out,
                              struct mg_error *err);

/* {"items":[{"generation","routes","match","shadow","at","by","reason","promotion","kind"}],
 *  "next_page_token"}, newest first. */
enum mg_code store_alias_history(struct store *st, const char *model, const char *alias,
                                 const struct store_page *page, json_t **out, struct mg_error *err);

/*
 * What decisions about an alias need, read in one snapshot:
 * {"exists","deleted","generation","routes","match","shadow","protected","promotion",
 *  "history":[{"generation","kind","routes","match","shadow","at"}] (newest first, complete),
 *  "bad":[{"version","generation"}]}. The model must exist (MG_ENOTFOUND); a missing alias
 * gives exists:false, generation 0.
 */
enum mg_code store_alias_facts(struct store *st, const char *model, const char *alias, json_t **out,
                               struct mg_error *err);

/*
 * store_alias_facts with "history" read newest first in pages (8, 32, 128 … entries) only
 * until enough(the facts so far, arg) is true (gates/rollout.h lkg_history_decides decides
 * this for release control), or the history (up to its newest 10 000 entries) ends. Then
 * "history" holds the entries read: the newest ones, maybe not all, and "unavailable" only
 * the archived and deleted versions those entries route (in the order met), not all of the
 * model's. enough NULL: all of both, as store_alias_facts.
 * A decision on an alias that has moved thousands of times costs what it does on a new one.
 */
typedef bool (*store_facts_enough)(const json_t *facts, void *arg);
enum mg_code store_alias_facts_until(struct store *st, const char *model, const char *alias,
                                     store_facts_enough enough, void *arg, json_t **out,
                                     struct mg_error *err);

/*
 * An alias's last-known-good, read in one transaction: its history newest first (at most the
 * newest 10 000 entries, as store_alias_facts reads) is handed one entry at a time to test,
 * with the alias's rollback marks as bad, until test passes (gates/rollout.h
 * lkg_entry_holds) for a version that is still ready; an archived or deleted one it passed
 * for joins bad (generation INT64_MAX: never again) and the walk goes on. Then *out holds
 * that entry's version, generation and time, and the version's artifact and image (NEW;
 * image NULL when none). out->version is 0 when no entry passes or the alias does not exist;
 * a missing model is MG_ENOTFOUND, as from store_model_id. Clear it with store_lkg_clear.
 */
struct store_lkg {
    int64_t version, generation;
    char at[64];
    char *artifact, *image;
};
typedef bool (*store_lkg_test)(const struct lkg_entry *e, const struct lkg_bad *bad, size_t nbad,
                               void *arg);
enum mg_code store_alias_lkg_find(struct store *st, const char *model, const char *alias,
                                  store_lkg_test test, void *arg, struct store_lkg *out,
                                  struct mg_error *err);
void store_lkg_clear(struct store_lkg *p);

/* One change to an alias, decided by the caller on the state it read. */
struct store_alias_change {
    const char *model;
    const char *alias;
    int64_t expected_generation; /* the generation the decision was made on */
    /* routes (none when deleting), match rules and shadow, validated (model/alias.h); the
     * store writes their JSON. Never NULL. */
    const struct mg_routes *routes;
    const char *kind;         /* set, step, promoted, rollback, abort, delete */
    const char *reason;       /* may be NULL */
    const char *promotion;    /* promotion id, or NULL */
    int64_t mark_bad;         /* version to mark bad for the alias, 0 for none */
    bool require_unprotected; /* MG_EPROTECTED when a policy protects the alias */
    /* Gateway object names this change uses: [{"gateway","name","scope":"alias"|"model"}]
     * (NULL: none). Each is claimed for (model, alias) — or for the model alone with scope
     * "model" — in the same transaction; one another alias already holds → MG_ECONFLICT
     * naming it, and nothing changes. */
    const json_t *names;
    /* A release event behind the change ("analysis.failed", ...) that gateways are told
     * about (the outbox payload's "event"), or NULL. */
    const char *event_type, *event_detail;
};

/* One change to a promotion, decided on the revision it read. */
struct store_promotion_change {
    const char *id;
    int64_t expected_rev;
    const char *state;
    const char *phase; /* rollout phase: shadow, internal, steps; NULL before the rollout */
    int step_index;
    int weight;
    int64_t next_step_at;                  /* ms since epoch, 0 for none */
    const json_t *gates;                   /* new gate list, or NULL to keep */
    const char *event_type, *event_detail; /* appended when event_type != NULL */
    const char *approval_by, *approval_decision, *approval_comment; /* when approval_by */
    const char *approval_teams; /* the decider's teams, JSON array text, or NULL for none */
    const char *approval_issuer, *approval_subject; /* the decider as a person, or ""/NULL */
    /* > 0: leader-only work (the rollout clock), decided under this leader epoch
     * (store_leader_epoch): with PostgreSQL it commits only while this replica still holds
     * the leader lease at that epoch, else MG_EUNAVAIL and nothing changes. */
    int64_t leader_epoch;
};

/*
 * Commit an alias change and/or a promotion change in one transaction, with
 * the alias history, an outbox row per gateway that hears the alias, and the
 * audit entry. MG_ESTALE when expected_generation or expected_rev no
 * longer hold (someone else changed it: read again and decide again);
 * MG_ECONFLICT when the approver already decided. *alias_out (may be NULL) receives the
 * alias after the change.
 */
enum mg_code store_release_commit(struct store *st, const char *actor,
                                  const struct store_alias_change *a,
                                  const struct store_promotion_change *p, json_t **alias_out,
                                  struct mg_error *err);

/* Policies: the canonical policy JSON (validated by gates/). */
enum mg_code store_policy_put(struct store *st, const char *actor, const char *model,
                              const char *alias, const json_t *policy, json_t **out,
                              struct mg_error *err);
enum mg_code store_policy_get(struct store *st, const char *model, const char *alias, json_t **out,
                              struct mg_error *err);
enum mg_code store_policy_delete(struct store *st, const char *actor, const char *model,
                                 const char *alias, struct mg_error *err);

/*
 * Create a promotion from its record (model/promotion.h; BORROWED). The first event is
 * recorded; `a` (may be NULL) is applied in the same transaction (the first rollout step
 * when no gate waits); with rec->smoke_gpu the candidate's smoke test is queued in it too.
 * The creator as a person is read back as "_creator":{"issuer","subject"}. MG_EINPROGRESS
 * when the alias already has an active promotion.
 */
enum mg_code store_promotion_create(struct store *st, const char *actor,
                                    const struct mg_promotion_new *rec, const char *event_type,
                                    const char *event_detail, const struct store_alias_change *a,
                                    json_t **out, struct mg_error *err);

/* Promotion (docs/contract.md shape) plus "_rev" and "_next_step_at_ms" for callers
 * that change it (strip them before replying). */
enum mg_code store_promotion_get(struct store *st, const char *id, json_t **out,
                                 struct mg_error *err);

/* Newest first; filters may be NULL. */
enum mg_code store_promotion_list(struct store *st, const char *state, const char *model,
                                  const char *alias, const struct store_page *page, json_t **out,
                                  struct mg_error *err);

/* Ids of promotions that need the clock: rolling out with a step due at or
 * before now_ms, and all evaluating ones (they wait on the runner).
 * {"due":[id…],"evaluating":[id…],"next_at_ms":earliest future step or 0}. */
enum mg_code store_promotion_pending(struct store *st, int64_t now_ms, json_t **out,
                                     struct mg_error *err);

/* ---- live canary analysis ---------------------------------------------- */

#define STORE_INTERVALS_KEPT 500 /* per promotion, the newest */

/* One analysis interval of a promotion (strings BORROWED). */
struct store_interval {
    const char *promotion;
    int64_t at_ms;         /* the instant both versions were measured at */
    int64_t not_before_ms; /* record it only if none of the promotion is newer than this
                            * (another replica measured the same interval) */
    const char *phase;     /* shadow, internal, steps */
    int step_index;
    int weight;
    const char *verdict;   /* passed, failed, inconclusive */
    const json_t *metrics; /* [{"name","candidate","baseline","verdict","detail"}] */
    int64_t leader_epoch;  /* > 0: recorded only while this replica leads at this epoch
                            * (store_promotion_change.leader_epoch), else MG_EUNAVAIL */
};

/* Append an interval and drop those past the newest STORE_INTERVALS_KEPT. *recorded false
 * (MG_OK) when a newer one was there already. */
enum mg_code store_interval_record(struct store *st, const struct store_interval *in,
                                   bool *recorded, struct mg_error *err);

/* The newest `limit` intervals of a promotion, newest first (*out NEW):
 * [{"seq","at","_at_ms","phase","step_index","weight","verdict","metrics"}]; "at" is when
 * it was recorded (this host's clock, like events), _at_ms the instant measured. */
enum mg_code store_intervals_list(struct store *st, const char *promotion, size_t limit,
                                  json_t **out, struct mg_error *err);

/* Which of these dataset digests are registered for model (a global record, or one its
 * owners registered): *unregistered gets the count of those that are not and *first the
 * first of them (NEW json string or NULL). */
enum mg_code store_datasets_unregistered(struct store *st, const char *model, const json_t *digests,
                                         size_t *unregistered, json_t **first,
                                         struct mg_error *err);

/*
 * Routed versions (docs/contract.md "Routing strategies"): a version is routed by an alias when the
 * alias's current generation gives it a weight above 0, names it in a match rule, or makes
 * it the shadow. This is the one notion of "routed" the runner tests by and the lifecycle
 * guards refuse by (a routed version is neither archived nor deleted).
 */

/* Does a generation (routes [{version, weight}], match [{…, version}] or NULL, shadow
 * {version, …} or null/NULL) route `version`? Pure; thread-safe. */
bool store_generation_routes(const json_t *routes, const json_t *match, const json_t *shadow,
                             int64_t version);

/* The distinct versions a generation routes, weighted routes first, then match rules, then
 * the shadow: a NEW array of integers (NULL when out of memory). Pure; thread-safe. */
json_t *store_generation_versions(const json_t *routes, const json_t *match, const json_t *shadow);

/* The live aliases of `model` that route `version`: *aliases NEW array of names (empty when
 * none). MG_ENOTFOUND when the model does not exist. */
enum mg_code store_version_routed(struct store *st, const char *model, int64_t version,
                                  json_t **aliases, struct mg_error *err);

/* [{"model","alias","match","shadow"}] of every live alias with match rules or a shadow
 * (what a new gateway must be able to apply). */
enum mg_code store_alias_strategies(struct store *st, json_t **out, struct mg_error *err);

/* [{"model","version"}] of every version some live alias routes, sorted, each once. */
enum mg_code store_routed_versions(struct store *st, json_t **out, struct mg_error *err);

/* ---- signed releases (docs/contract.md "Signed releases") --------------------------------------
 */

/* The Sigstore bundle signing an alias generation (*bundle malloc'd JSON text), MG_ENOTFOUND
 * when there is none (no such alias or generation, or one from before signing began). */
enum mg_code store_alias_attestation(struct store *st, const char *model, const char *alias,
                                     int64_t generation, char **bundle, struct mg_error *err);

/* The signed generations routing a version: [{"alias","generation","bundle_digest",
 * "bundle_size"}] (NEW), by alias and generation. */
enum mg_code store_version_attestations(struct store *st, const char *model, int64_t version,
                                        json_t **out, struct mg_error *err);

/* Keep an attestation's OCI referrer manifest under its digest (kept once: the same digest
 * is the same bytes). */
enum mg_code store_oci_attestation_put(struct store *st, const char *model, const char *digest,
                                       const char *manifest, struct mg_error *err);

#endif
