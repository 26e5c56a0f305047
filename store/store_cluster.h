/*
 * store_cluster.h - the cluster: replicas sharing one PostgreSQL database (liveness, the leader
 * lease, cache leases), the cluster's signing keys, migrating an embedded installation to
 * shared backends, and the schema version.
 *
 * Part of store.h, which includes it: include store.h. Its conventions (json_t ownership,
 * return values, out-parameters, thread safety) hold here.
 */
#ifndef STORE_CLUSTER_H
#define STORE_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "../base/mg.h"
#include "../artifact/sign.h"

struct store;

/* ---- the cluster (several processes on one PostgreSQL database) --------- */

/* A replica not seen for this long is dead: its leases may be taken over. */
#define STORE_REPLICA_DEAD_MS 10000
/* GET /api/v1/cluster lists replicas seen this recently. */
#define STORE_REPLICA_LISTED_MS 30000

/* This process's id among the replicas (16 hex digits, new at every start). */
const char *store_replica_id(const struct store *st);

/*
 * Wake-ups between replicas (PostgreSQL's LISTEN/NOTIFY): a committed outbox row
 * or delivery outcome notifies every replica, so workers and ?wait requests
 * react at once instead of at their next poll (the polling stays, bounding the
 * delay when a notification is lost); a rotation of the cluster's signing key
 * likewise. Blocks up to timeout_ms for notifications on a connection of its
 * own and says in *wake what they were about. The same call keeps this
 * replica's response cache coherent (store_model_epoch): it applies other
 * replicas' changes and acknowledges them. SQLite: sleeps the timeout (one
 * process hears its own changes directly). One caller at a time, in a loop.
 */
struct store_wake {
    bool outbox; /* outbox rows or delivery outcomes changed */
    bool keys;   /* the cluster's signing key changed (store_signing_key_current) */
};
enum mg_code store_wait_change(struct store *st, int timeout_ms, struct store_wake *wake,
                               struct mg_error *err);

/* "sqlite" or "postgresql". */
const char *store_database_kind(const struct store *st);

/* Now, in milliseconds, on the database's clock (PostgreSQL: measured at each
 * heartbeat; SQLite: this host's). Leases and deadlines use it, so every
 * replica means the same instant. */
int64_t store_clock_ms(struct store *st);

/* Record that this process is alive and serves at address; refresh the clock
 * offset and keep or seek the leadership. Call about once a second. */
enum mg_code store_replica_heartbeat(struct store *st, const char *address, const char *version,
                                     struct mg_error *err);

/* The leader lease (PostgreSQL): its length on the database's clock, and how long before
 * its end the holder stops counting itself leader (renewed with every heartbeat). */
#define STORE_LEADER_LEASE_MS 5000
#define STORE_LEADER_MARGIN_MS 1000

/* Whether this process runs the cluster's timers (rollout steps, periodic
 * smoke tests, recovery of dead replicas' work) now. SQLite: always. With
 * PostgreSQL: the holder of the leader lease (one row, with an expiry on the
 * database's clock and an epoch), until STORE_LEADER_MARGIN_MS before the
 * lease ends unless renewed; once it ran out (the holder died, paused or
 * lost the database), another replica takes it at its next heartbeat, with
 * the next epoch. */
bool store_leader(struct store *st);

/* The epoch of the leadership this process holds now, 0 when it does not lead (SQLite: 1).
 * Leader-only work passes it to the commit it leads to (store_promotion_change.
 * leader_epoch), which then holds only while the lease is still that epoch's. */
int64_t store_leader_epoch(struct store *st);

/* A replica that stops cleanly gives its leader lease up (PostgreSQL): another takes it at
 * its next heartbeat instead of when the lease runs out. This process leads no more. */
enum mg_code store_leader_resign(struct store *st, struct mg_error *err);

/* {"replicas":[{"id","address","version","started_at","last_seen","self"}],
 *  "database","blobs","replica","leader"}; replicas seen in the last 30 s. */
enum mg_code store_cluster(struct store *st, json_t **out, struct mg_error *err);

/* The epoch of model's data: it moves with every committed change of the model
 * (its versions, aliases, policies), on any replica; a cached answer about the
 * model built after reading epoch E is current while the epoch is still E. With
 * PostgreSQL, while this replica holds a cache lease (store_cache_leased) the
 * epoch is known here: a write on any replica returns only after every replica
 * holding a lease applied it, or after that lease ran out. Without one, this
 * reads the database (one read shared by the calls waiting for it). */
enum mg_code store_model_epoch(struct store *st, const char *model, uint64_t *epoch,
                               struct mg_error *err);

/* How long a cache lease lasts from its renewal (each heartbeat renews it): the
 * longest a replica that stopped answering (stopped, partitioned) can hold up
 * writes on the others. */
#define STORE_CACHE_LEASE_MS 3000

/* Whether store_model_epoch answers without asking the database now (SQLite:
 * always). */
bool store_cache_leased(struct store *st);

/* This replica answers nothing from a cache (--response-cache off, or it is
 * stopping): it holds no cache lease from now on, so writes on the others do not
 * wait for it. */
void store_cache_off(struct store *st);

/* For /metrics: whether this replica holds a cache lease (false on SQLite); how
 * many writes waited for other replicas holding one to apply them, and the seconds
 * they waited in all. */
void store_cache_counts(struct store *st, bool *leased, uint64_t *waits, double *wait_s);

/* ---- the cluster's signing keys ------------------------------------------ */

/* The private key (PEM, malloc'd into *shared_pem) every replica of the cluster
 * signs with: the first one ever offered, which this call offers (keyid, hint,
 * public_pem, private_pem of this replica's key) when the database has none. */
enum mg_code store_signing_key_share(struct store *st, const char *keyid, const char *hint,
                                     const char *public_pem, const char *private_pem,
                                     char **shared_pem, struct mg_error *err);

/* The key the cluster signs with now (the newest activated): its keyid and its
 * private PEM (malloc'd into *private_pem; the caller cleanses and frees it).
 * MG_ENOTFOUND when the database holds none. */
enum mg_code store_signing_key_current(struct store *st, char keyid[65], char **private_pem,
                                       struct mg_error *err);

/* `modelgated keys rotate --database URL`: make this key (keyid, hint, PEMs of a
 * key just generated) the one the cluster signs with, on a connection of its own
 * (no store: a running replica holds the data directory), audited, and NOTIFY
 * every replica, which follows at once (store_wait_change's wake->keys) or at its
 * next poll. The database must be at this build's schema version. */
enum mg_code store_signing_key_rotate(const char *database, const char *keyid, const char *hint,
                                      const char *public_pem, const char *private_pem,
                                      struct mg_error *err);

/* Publish a key this replica signs with (at every heartbeat). */
enum mg_code store_signing_key_publish(struct store *st, const char *keyid, const char *hint,
                                       const char *public_pem, struct mg_error *err);

/* Every key published in the database, as GET /api/v1/signing-keys answers: "hint" is
 * the bundle's verificationMaterial.publicKey.hint; "active" is true only for signing_keyid
 * (the key the asking replica signs with now; NULL: none). */
enum mg_code store_signing_keys(struct store *st, const char *signing_keyid, json_t **out,
                                struct mg_error *err);

/* The public PEM (malloc'd) of the published key with this hint; MG_ENOTFOUND. */
enum mg_code store_signing_key_by_hint(struct store *st, const char *hint, char **public_pem,
                                       struct mg_error *err);

/* ---- migrating an embedded installation to shared backends ---------------- */

struct store_migrate_options {
    const char *data_dir;    /* the SQLite installation (locked while copying) */
    const char *to_database; /* a PostgreSQL URL */
    const char *to_blobs;    /* a --blobs URL (file:, s3://, oci://), or NULL to leave blobs where
                              * they are */
    const char *to_blobs_credentials; /* its credentials file, or NULL */
    const struct sign_keyring *keys;  /* the installation's keys: public halves published */
};

/*
 * Copy every record (the audit chain included), the public halves of the
 * signing keys and (with to_blobs) every blob, verified, to the shared
 * backends. Resumable: rows and blobs already there are skipped. Fails unless
 * the destination's audit chain verifies afterwards. *summary (NEW):
 * {"tables":{name:{"rows","copied"}},"blobs":{"count","copied"},"audit":{…},
 * "public_keys":N}.
 */
enum mg_code store_migrate(const struct store_migrate_options *o, json_t **summary,
                           struct mg_error *err);

/* Sign new versions with keys from now on (BORROWED, outlives the store). */
void store_set_keys(struct store *st, const struct sign_keyring *keys);

/* Schema version this binary writes (the number of the newest migration). */
int store_schema_version(void);

#endif
