/*
 * store_lifecycle.h - the lifecycle of versions: archiving, deleting, retention, usage and
 * garbage collection.
 *
 * Part of store.h, which includes it: include store.h. Its conventions (json_t ownership,
 * return values, out-parameters, thread safety) hold here.
 */
#ifndef STORE_LIFECYCLE_H
#define STORE_LIFECYCLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "../base/mg.h"

struct store;

/* ---- lifecycle: archive, delete, retention, usage ------------------------ */

/*
 * What lifecycle decisions about a model need, read in one snapshot (*out NEW):
 * {"versions":[{"version","status","created_at"}] (newest first),
 *  "promotions":[{"id","alias","version"}] (active ones),
 *  "aliases":[{"alias", …store_alias_facts…}] (every alias, deleted ones too)}.
 */
enum mg_code store_lifecycle_facts(struct store *st, const char *model, json_t **out,
                                   struct mg_error *err);

/* A status change of one or more versions, decided on store_lifecycle_facts. */
struct store_status_change {
    const char *model;
    const int64_t *versions;
    size_t n;
    const char *status;         /* "archived", "ready" (unarchive) or "deleted" */
    const char *reason;         /* the deletion reason, or NULL */
    const json_t *generations;  /* {alias: generation} of every alias the decision saw */
    const char *action;         /* the audit action: version.archive, retention.run, … */
    const json_t *audit_detail; /* more audit detail (BORROWED) or NULL */
};

/*
 * Commit a status change in one transaction with its audit entry: one entry
 * naming the version when n == 1 and audit_detail is NULL, else one for the
 * model listing every version. MG_ESTALE (nothing changed) when an alias of
 * the model moved past the generation the decision saw, a promotion of one of
 * the versions began, or a version's status is not what the change expects
 * (archive: ready; unarchive: archived; delete: not deleted).
 */
enum mg_code store_version_set_status(struct store *st, const char *actor,
                                      const struct store_status_change *ch, struct mg_error *err);

/* {"<n>": "archived"|"deleted"} of the model's versions that are not ready (*out NEW). */
enum mg_code store_versions_unavailable(struct store *st, const char *model, json_t **out,
                                        struct mg_error *err);

/* A model's retention rule (validated by gates/lifecycle.c), audited. */
enum mg_code store_retention_put(struct store *st, const char *actor, const char *model,
                                 const json_t *rule, struct mg_error *err);

/* The rule, or json null when the model has none (*out NEW). MG_ENOTFOUND: no model. */
enum mg_code store_retention_get(struct store *st, const char *model, json_t **out,
                                 struct mg_error *err);

/* Claim the models whose rule last ran at least interval_ms before now_ms (at most 100):
 * their last run becomes now_ms, so each is run once per interval whichever replica asks.
 * *models: JSON array of model names (NEW). leader_epoch > 0: claimed only while this
 * replica still holds the leader lease at that epoch, else MG_EUNAVAIL (store_release_commit). */
enum mg_code store_retention_claim(struct store *st, int64_t leader_epoch, int64_t now_ms,
                                   int64_t interval_ms, json_t **models, struct mg_error *err);

/* {"versions":{"ready","archived","deleted"},"bytes","bytes_unique"} (NEW): bytes of the
 * stored blobs the model's versions (not deleted) reference; unique: those no other
 * model's versions reference. */
enum mg_code store_model_usage(struct store *st, const char *model, json_t **out,
                               struct mg_error *err);

/* Bytes the deletion of these versions would free: the live blobs they reference that no
 * other version (not deleted) and no dataset holds. */
enum mg_code store_bytes_reclaimable(struct store *st, const char *model, const int64_t *versions,
                                     size_t n, int64_t *bytes, struct mg_error *err);

/* Claim a cluster-wide periodic job: *claimed when it last ran at least interval_ms before
 * now_ms (its last run becomes now_ms), so it runs once per interval on one replica.
 * leader_epoch: as for store_retention_claim. */
enum mg_code store_job_claim(struct store *st, const char *job, int64_t leader_epoch,
                             int64_t now_ms, int64_t interval_ms, bool *claimed,
                             struct mg_error *err);

struct store_gc_report {
    int64_t blobs;     /* blobs whose bytes were removed (dry run: would be) */
    int64_t bytes;     /* their bytes */
    int64_t failed;    /* blobs the backend would not remove now (left for the next run) */
    int64_t leftovers; /* leftovers of dead uploads removed (temp files, multipart uploads,
                        * temp objects, upload sessions) */
    /* Called (when set) once a batch is marked 'deleting' and before its bytes go: the
     * crash tests die there. */
    void (*after_mark)(void *arg);
    void *arg;
};

/*
 * Garbage-collect blobs that no version (not deleted), no dataset (not withdrawn) and no
 * upload in flight references, and that nobody has uploaded for grace_ms; then the leftovers
 * of uploads that died (older than grace_ms, of no live replica). A dry run only counts
 * blobs. rep's hook is read; its figures are written. A run that removes anything is audited
 * ("blob.gc") with the digests it removed. Safe against concurrent uploads of the same bytes and
 * against a kill at any point (the next run finishes what a dead one began).
 */
enum mg_code store_gc(struct store *st, const char *actor, int64_t grace_ms, bool dry_run,
                      struct store_gc_report *rep, struct mg_error *err);

/* Bytes and count of every stored blob (for /metrics). */
enum mg_code store_storage_bytes(struct store *st, int64_t *bytes, int64_t *blobs,
                                 struct mg_error *err);

#endif
