/*
 * lifecycle.h - archive, unarchive, delete, retention and blob garbage
 * collection (docs/contract.md "Lifecycle"): reads facts from the store, asks
 * gates/lifecycle.c, and commits only if the facts still hold (retrying when
 * an alias moved meanwhile). A thread of its own runs retention and GC
 * periodically on the replica that leads.
 *
 * Thread-safe; json_t results are NEW references.
 */
#ifndef SRV_LIFECYCLE_H
#define SRV_LIFECYCLE_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "../gates/lifecycle.h"
#include "control.h"
#include "../store/store.h"

/* Archive, unarchive or delete one version; *out is the Version after. MG_ECONFLICT naming
 * what holds it (routed, last-known-good, active candidate). */
enum mg_code ctl_life_apply(struct ctl *ctl, const char *actor, const char *model, int64_t version,
                            enum life_op op, const char *reason, json_t **out,
                            struct mg_error *err);

/* Run the model's retention rule (dry_run: list only). *out:
 * {"versions":[n…],"action","bytes_reclaimable","dry_run"}. MG_ENOTFOUND when the model has
 * no rule. */
enum mg_code ctl_retention_run(struct ctl *ctl, const char *actor, const char *model, bool dry_run,
                               json_t **out, struct mg_error *err);

/* Collect unreferenced blobs older than --gc-grace. *out: {"blobs","bytes","dry_run"}. */
enum mg_code ctl_gc_run(struct ctl *ctl, const char *actor, bool dry_run, json_t **out,
                        struct mg_error *err);

/* The periodic thread (retention every --retention-interval, GC every --gc-interval, and the
 * background rescan of blobs stored before the scanner, on the leader). */
enum mg_code ctl_lifecycle_start(struct ctl *ctl, struct mg_error *err);
void ctl_lifecycle_stop(struct ctl *ctl);

#endif
