/*
 * store_gateways.h - gateways, the outbox of deliveries to them, and smoke tests.
 *
 * Part of store.h, which includes it: include store.h. Its conventions (json_t ownership,
 * return values, out-parameters, thread safety) hold here.
 */
#ifndef STORE_GATEWAYS_H
#define STORE_GATEWAYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "../base/mg.h"

struct store;

/* ---- gateways and the outbox ------------------------------------------ */

/*
 * Create or replace a gateway. config is the kind's settings without the
 * secret (validated by the caller); models/aliases are JSON arrays or NULL
 * (all). Clears a disabled gateway's reason. The gateway is given the
 * current state of every live alias it hears, in the same transaction.
 * *out is the Gateway; *created tells 201 from 200. The built-in "runner"
 * cannot be replaced (MG_ECONFLICT).
 */
enum mg_code store_gateway_put(struct store *st, const char *actor, const char *name,
                               const char *kind, const json_t *config, const char *secret,
                               const json_t *models, const json_t *aliases, json_t **out,
                               bool *created, struct mg_error *err);

/* Gateway: {"name","kind","config","models","aliases","disabled","disabled_reason",
 * "created_at","updated_at","deliveries":[{"model","alias","generation","state",
 * "attempts","last_error","next_attempt_at","acked_at"}]} — never the secret. */
enum mg_code store_gateway_get(struct store *st, const char *name, json_t **out,
                               struct mg_error *err);
enum mg_code store_gateway_list(struct store *st, json_t **out, struct mg_error *err);

/* Every gateway's {"name","kind","config","models","aliases","disabled"} (no deliveries, no
 * secret): what deciding which gateways hear an alias needs. *out NEW array. */
enum mg_code store_gateway_configs(struct store *st, json_t **out, struct mg_error *err);
enum mg_code store_gateway_delete(struct store *st, const char *actor, const char *name,
                                  struct mg_error *err);

/* Stop delivering to a gateway (e.g. a webhook answered 410), with a reason. */
enum mg_code store_gateway_disable(struct store *st, const char *name, const char *reason,
                                   struct mg_error *err);

/* One outbox row claimed by a worker. */
struct store_delivery {
    char gateway[64];
    char kind[16];
    json_t *config; /* NEW reference */
    char *secret;   /* malloc'd, or NULL */
    char model[64];
    char alias[33];
    int64_t generation;
    json_t *payload; /* {"routes":[…],"match":[…],"shadow":{…}|null,"promotion"} NEW */
    int attempts;    /* before this one */
    int64_t written_ms;
    char lease_token[17]; /* the claim's own: its outcome counts only while it holds */
    bool touched;         /* the delivery sent something to the gateway (store_outbox_done) */
    int64_t leader_epoch; /* > 0: a host-less gateway's row, the leader's to reconcile under
                           * this epoch (store_outbox_in_sync, store_outbox_drift) */
};

void store_delivery_release(struct store_delivery *d);

/*
 * Claim the oldest due row (not in sync, next attempt due, gateway enabled, and
 * either unleased, its lease expired, or its holder a replica not seen for
 * STORE_REPLICA_DEAD_MS) for lease_ms, as this replica with a fresh token.
 * now_ms is store_clock_ms(). *found false when none is due. On failure only
 * out->lease_token is set: the token of the lease that may have committed
 * unseen, for store_outbox_release.
 */
enum mg_code store_outbox_claim(struct store *st, int64_t now_ms, int64_t lease_ms,
                                struct store_delivery *out, bool *found, struct mg_error *err);

/*
 * Record a delivery's outcome and release the lease, if the claim's lease still
 * holds (d->lease_token): a claim that lost its lease (it expired and another
 * replica took the row) changes nothing. If a newer generation was written
 * meanwhile the row stays pending for it (superseded). ok → in_sync; otherwise
 * failing with error and the next attempt time (store_clock_ms()). When the claim no
 * longer holds and d->touched (it sent something, which may have reached the gateway
 * after a newer generation), a newer generation of the row is made pending again and
 * its lease, whoever holds it, is revoked: it goes out once more, after this write.
 */
enum mg_code store_outbox_done(struct store *st, const struct store_delivery *d, bool ok,
                               const char *error, int64_t next_attempt_ms, struct mg_error *err);

/*
 * The fence of a delivery, checked before each thing it sends to a gateway: *held is true
 * while d's claim still holds the row (its token, its generation, the lease not expired)
 * and, with PostgreSQL, this replica is still alive in the others' eyes (a heartbeat within
 * STORE_REPLICA_DEAD_MS; after that they may take its leases). A claim that no longer holds
 * sends nothing more and records nothing (store_outbox_release).
 */
enum mg_code store_outbox_fence(struct store *st, const struct store_delivery *d, bool *held,
                                struct mg_error *err);

/* A delivery whose fence failed: records nothing; releases d's lease if it still holds
 * it and, when d->touched, makes a newer generation pending again (as store_outbox_done
 * does for a claim that lost its lease). */
enum mg_code store_outbox_abort(struct store *st, const struct store_delivery *d,
                                struct mg_error *err);

/* The most in-sync rows one reconciler pass checks. */
#define STORE_RECONCILE_MAX 10000

/*
 * The in-sync rows this replica's reconciler checks against their gateways' live state:
 * those of enabled gateways whose "host" is this replica's, and, when leader_epoch > 0 (the
 * leader's pass, store_leader_epoch), those of gateways without a host, which carry that
 * epoch in their leader_epoch (up to STORE_RECONCILE_MAX). *out NEW: n deliveries without
 * secret or lease; store_delivery_release each, then free(*out).
 */
enum mg_code store_outbox_in_sync(struct store *st, int64_t leader_epoch,
                                  struct store_delivery **out, size_t *n, struct mg_error *err);

/*
 * The gateway was found off d's generation (found: what differs, for last_error and the
 * audit): when the row is still in sync at that generation, it becomes pending again (the
 * workers deliver it once more) with last_error "drift: ...", and a gateway.drift audit
 * entry is written, in one transaction; *marked then. Nothing when the row moved on.
 * d->leader_epoch > 0 (a host-less gateway's row): with PostgreSQL only while this replica
 * still holds the leader lease at that epoch, else MG_EUNAVAIL and nothing changes.
 */
enum mg_code store_outbox_drift(struct store *st, const struct store_delivery *d, const char *found,
                                bool *marked, struct mg_error *err);

/* Release the lease with this token (a claim or outcome whose commit this replica
 * could not confirm). Nothing when no row holds it. */
enum mg_code store_outbox_release(struct store *st, const char *token, struct mg_error *err);

/* Void the leases of replicas not seen for STORE_REPLICA_DEAD_MS (with SQLite:
 * every earlier run of this server, which owned the database alone): their rows
 * are due again at once. A live replica's lease is never voided. leader_epoch > 0: the
 * leader's periodic sweep, which with PostgreSQL changes nothing and answers MG_EUNAVAIL
 * unless this replica still holds the lease at that epoch (store_leader_epoch); 0: at start. */
enum mg_code store_outbox_recover(struct store *st, int64_t leader_epoch, struct mg_error *err);

/* Earliest time a row becomes due (ms), or 0 when nothing waits. */
enum mg_code store_outbox_next_due(struct store *st, int64_t *next_ms, struct mg_error *err);

/* Has every gateway of (model, alias) acknowledged generation >= gen? */
enum mg_code store_outbox_synced(struct store *st, const char *model, const char *alias,
                                 int64_t gen, bool *synced, struct mg_error *err);

/* ---- smoke tests --------------------------------------------------------- */

/*
 * Queue a smoke test of a version unless one is already queued or running
 * (then *out is that one and *created false). trigger: route, promotion,
 * periodic, manual; gpu_mode: required, preferred, none. *out = SmokeTest.
 * leader_epoch > 0: leader-only work (the periodic re-tests), queued only while this
 * replica still holds the leader lease at that epoch, else MG_EUNAVAIL and nothing is
 * queued (store_retention_claim); 0: anyone's.
 */
enum mg_code store_smoke_enqueue(struct store *st, int64_t leader_epoch, const char *model,
                                 int64_t version, const char *trigger, const char *gpu_mode,
                                 json_t **out, bool *created, struct mg_error *err);

/* Take the oldest queued test (it becomes running). *job = {"id","model","version",
 * "profile","gpu_mode","artifact":{"digest","media_type","files"},"smoke","resources",
 * "claim"}: "claim" is this claim's own token (pass it back in the result). */
enum mg_code store_smoke_claim(struct store *st, json_t **job, bool *found, struct mg_error *err);

/* Record the outcome: result = {"state","gpu","exit_code","latency_ms","checks","log_tail",
 * "reason","duration_ms","peak_gpu_memory_mib","claim"} (missing members stay NULL).
 * With "claim" (the job's), the result counts only while that claim still runs the test;
 * without, while this replica owns it or nobody does. MG_ENOTFOUND otherwise (the test
 * is unknown, or this claim lapsed: it was taken for dead and queued again, perhaps
 * already run elsewhere): the result is then dropped. */
enum mg_code store_smoke_finish(struct store *st, const char *id, const json_t *result,
                                struct mg_error *err);

/* {"items":[SmokeTest]} of a version, newest first (at most 100). */
enum mg_code store_smoke_list(struct store *st, const char *model, int64_t version, json_t **out,
                              struct mg_error *err);

/* The newest test of a version not finished before since_ms (queued, running,
 * or finished since); MG_ENOTFOUND if none. */
enum mg_code store_smoke_latest(struct store *st, const char *model, int64_t version,
                                int64_t since_ms, json_t **out, struct mg_error *err);

/* The newest passed smoke test of (model, version), whenever it ran: *out NEW SmokeTest
 * (with throughput_rps and cost_per_1k_requests, null when not measured); MG_ENOTFOUND when
 * none passed. */
enum mg_code store_smoke_latest_passed(struct store *st, const char *model, int64_t version,
                                       json_t **out, struct mg_error *err);

enum mg_code store_smoke_counts(struct store *st, int64_t *queued, int64_t *running,
                                struct mg_error *err);

/* Tests left running by replicas not seen for STORE_REPLICA_DEAD_MS (with
 * SQLite: by an earlier run of this server) go back to the queue. Run at start
 * and, by the leader, periodically. A live replica's test is left alone. leader_epoch: as
 * for store_outbox_recover. */
enum mg_code store_smoke_recover(struct store *st, int64_t leader_epoch, struct mg_error *err);

#endif
