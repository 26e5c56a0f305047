/*
 * release.h - the release engine: reads facts from the store, asks gates/
 * for decisions, and commits them with optimistic concurrency (a change is
 * decided on a generation/revision and committed only if it still holds;
 * otherwise it is decided again). Used by the alias and promotion handlers
 * and by the timer thread.
 *
 * Every function is thread-safe and returns MG_OK or an error in err.
 * json_t results are NEW references.
 */
#ifndef SRV_RELEASE_H
#define SRV_RELEASE_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "control.h"
#include "../store/store.h"

/* Alias with last_known_good filled in. */
enum mg_code rel_alias_get(struct ctl *ctl, const char *model, const char *alias, json_t **out,
                           struct mg_error *err);

/* rel_alias_get, but describing generation gen (from the alias history) when a newer write
 * changed the alias since: the answer of a write's ?wait. */
enum mg_code rel_alias_at(struct ctl *ctl, const char *model, const char *alias, int64_t gen,
                          json_t **out, struct mg_error *err);

/* {"items":[Alias]} with last_known_good filled in. */
enum mg_code rel_alias_list(struct ctl *ctl, const char *model, json_t **out, struct mg_error *err);

/* Direct set of an unprotected alias: its routes, match rules and shadow (model/alias.h;
 * BORROWED), validated by the caller. MG_EINVAL naming the gateway when one that hears
 * the alias cannot apply them (HAProxy and a shadow); nothing changes then. */
enum mg_code rel_alias_set(struct ctl *ctl, const char *actor, const char *model, const char *alias,
                           const struct mg_routes *routes, json_t **out, struct mg_error *err);

enum mg_code rel_alias_delete(struct ctl *ctl, const char *actor, const char *model,
                              const char *alias, struct mg_error *err);

/* {"model","alias","version","artifact","image","signature_url","since","generation"};
 * MG_ENOKNOWNGOOD when none. */
enum mg_code rel_lkg(struct ctl *ctl, const char *model, const char *alias, json_t **out,
                     struct mg_error *err);

/* 100% to the last-known-good other than the newest routed version, which is
 * marked bad and loses its match rules and shadow; ends an active promotion as
 * rolled_back. */
enum mg_code rel_rollback(struct ctl *ctl, const char *actor, const char *model, const char *alias,
                          const char *reason, json_t **out, struct mg_error *err);

/* The GateReport `version` would get for `alias` now (dry run). */
enum mg_code rel_gates_dry_run(struct ctl *ctl, const char *model, int64_t version,
                               const char *alias, json_t **out, struct mg_error *err);

/* POST /promotions. */
enum mg_code rel_promotion_create(struct ctl *ctl, const struct store_principal *who,
                                  const char *model, int64_t version, const char *alias,
                                  const char *reason, json_t **out, struct mg_error *err);

/* POST /promotions/{id}/approvals: decision "approve" or "reject". */
enum mg_code rel_promotion_decide(struct ctl *ctl, const struct store_principal *who,
                                  const char *id, bool approve, const char *comment, json_t **out,
                                  struct mg_error *err);

/* POST /promotions/{id}/advance. */
enum mg_code rel_promotion_advance(struct ctl *ctl, const char *actor, const char *id, json_t **out,
                                   struct mg_error *err);

/* POST /promotions/{id}/abort. */
enum mg_code rel_promotion_abort(struct ctl *ctl, const char *actor, const char *id,
                                 const char *reason, json_t **out, struct mg_error *err);

/* GET /promotions/{id} (internal fields removed). */
enum mg_code rel_promotion_get(struct ctl *ctl, const char *id, json_t **out, struct mg_error *err);

/* A smoke test of (model, version) finished in `state` (passed, failed,
 * error): re-evaluate waiting gates, and roll back a rolling-out promotion
 * whose candidate failed. An error (no such profile, the runner's own
 * trouble) says nothing about the model and rolls nothing back. */
void rel_smoke_finished(struct ctl *ctl, const char *model, int64_t version, const char *state,
                        const char *reason);

/* A gateway could not apply a rollout step of promotion `id` after retries:
 * roll the promotion back if it is still rolling out. */
void rel_delivery_failed(struct ctl *ctl, const char *id, const char *gateway, const char *error);

/* One pass of the clock: take due rollout steps, re-evaluate waiting gates.
 * Returns the ms time of the next due step (0 when none). */
int64_t rel_tick(struct ctl *ctl, int64_t now_ms);

/* Live canary analysis (release_analysis.c): a thread that, on the leader, measures every
 * rolling-out promotion whose policy has "analysis" each interval and rolls back on its own.
 * Reads --prometheus-credentials first (MG_EINVAL naming what is wrong with the file). */
enum mg_code rel_analysis_start(struct ctl *ctl, struct mg_error *err);
void rel_analysis_stop(struct ctl *ctl);

/* POST .../policies/{alias}/analysis/dry-run: the alias's policy's queries run once for
 * `version` and the alias's last-known-good, judged as one interval, nothing recorded:
 * {"at","version","baseline_version","phase":null,"weight":null,"verdict","metrics","detail"?}.
 * MG_EINVAL (field "analysis") when the policy has none. Blocks for the queries: call it
 * off the HTTP threads. */
enum mg_code rel_analysis_dry_run(struct ctl *ctl, const char *model, const char *alias,
                                  int64_t version, json_t **out, struct mg_error *err);

/* The timer thread: ticks when a step is due (and at least every second). */
enum mg_code rel_timer_start(struct ctl *ctl, struct mg_error *err);
void rel_timer_stop(struct ctl *ctl);
/* Wake the timer (a promotion changed). */
void rel_timer_kick(struct ctl *ctl);

#endif
