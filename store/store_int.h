/*
 * store_int.h - internals shared by the store's files. Nothing outside store/
 * includes this. The store's files speak to the database through db.h only.
 */
#ifndef STORE_INT_H
#define STORE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include "blob.h"
#include "db.h"
#include "store.h"
#include "../artifact/introspect.h"
#include "../os/wait.h"

/* Direct-mapped per-model epochs (coherence.c): a write moves its model's slot. */
#define STORE_EPOCH_SLOTS 4096
/* A replica id: 16 hex digits. */
#define STORE_REPLICA_ID_LEN 16
/* Longest alias history handed to decision code (LKG looks back this far). */
#define STORE_FACTS_HISTORY_MAX 10000

struct store_coherence;
struct store_token_cache;
struct store_owners_memo;

/* Set up st->tokens (tokens.c), and free it: from store_open and store_close. */
enum mg_code store_token_cache_open(struct store *st, struct mg_error *err);
void store_token_cache_close(struct store *st);

/* Set up st->owners (models.c), and free it: from store_open and store_close. */
enum mg_code store_owners_memo_open(struct store *st, struct mg_error *err);
void store_owners_memo_close(struct store *st);

/* Set up st->coh (coherence.c), and free it: from store_open and store_close. */
enum mg_code store_coherence_open(struct store *st, struct mg_error *err);
void store_coherence_close(struct store *st);

struct store {
    char *data_dir;
    char *database; /* NULL: SQLite in data_dir; else the PostgreSQL URL */
    char *db_path;
    struct blob_backend *blobs; /* where blob bytes live (blob.h) */
    char *tmp_dir;              /* local scratch: file: <blobs>/tmp; remote: <data>/tmp (spools) */
    struct store_archive_limits archive;
    struct store_archive_counters archive_counters; /* archive.counters points here */
    struct art_scan_opts scan;
    bool scan_skip;                                  /* store_options.scan_skip */
    _Atomic uint64_t scan_findings[ART_SCAN_NRULES]; /* store_scan_totals() */
    const struct sign_keyring *keys;

    int lock_fd; /* flock'd <data>/modelgated.lock: one process per data directory */

    char replica_id[STORE_REPLICA_ID_LEN + 1]; /* this process, among those on the database */
    char host_name[256];                       /* delivers the gateways whose "host" names it */
    int64_t started_ms;
    _Atomic int64_t clock_offset_ms;    /* the database's clock less ours (heartbeat) */
    _Atomic bool leader;                /* runs the cluster's timers (cluster.c) */
    struct db_conn *leader_conn;        /* PostgreSQL: renews the leader lease */
    _Atomic int64_t leader_epoch;       /* the lease's epoch while leader (cluster.c) */
    _Atomic int64_t leader_deadline_ms; /* mg_mono_ms() the lease counts until here */
    struct db_conn *notify_conn;        /* PostgreSQL: LISTENs for other replicas\' changes */
    /* The read caches' epochs and their coherence across replicas (coherence.c). */
    struct store_coherence *coh;

    pthread_mutex_t wlock; /* serialises writers */
    struct db_conn *writer;
    _Atomic int hash_threads; /* uploads hashed on a thread of their own now (blobs.c) */

    struct store_token_cache *tokens; /* recently authenticated tokens (tokens.c) */
    struct store_owners_memo *owners; /* models' owners by epoch (models.c) */
    pthread_mutex_t gc_lock;          /* one garbage collection sweep at a time (gc.c) */

    pthread_mutex_t rlock;
    pthread_cond_t rcond;
    struct db_conn **readers;
    unsigned char *rbusy;
    unsigned nreaders;
    uint64_t rwaits; /* borrowers that found every reader busy (under rlock) */
};

/* Borrow a read connection inside a read transaction (a consistent snapshot).
 * Blocks while all are busy. Never fails: a failure to BEGIN is reported by
 * the first statement. */
struct db_conn *store_read_begin(struct store *st);

/* Borrow a read connection outside any transaction (DB_READ_ONE), for a read of one
 * statement: two round trips fewer on PostgreSQL. Ended by store_read_end. */
struct db_conn *store_read_one(struct store *st);
void store_read_end(struct store *st, struct db_conn *c);

/* Take the writer inside a write transaction. NULL on failure (err filled). */
struct db_conn *store_write_begin(struct store *st, struct mg_error *err);

/* Commit when rc == MG_OK, else roll back; releases the writer. Returns rc, or
 * the commit's error. */
enum mg_code store_write_end(struct store *st, struct db_conn *c, enum mg_code rc,
                             struct mg_error *err);

/* Borrow a read connection without a transaction, for one statement (a
 * single-statement read is consistent by itself); give it back after. */
struct db_conn *store_read_borrow(struct store *st);
void store_read_return(struct store *st, struct db_conn *c);

/* coherence.c: a write of the open transaction changed model: its epoch moves
 * (in the database, and in this process once the transaction commits). */
enum mg_code store_model_bump(struct db_conn *c, const char *model, struct mg_error *err);
/* At the end of a write transaction (under wlock): publish (or drop) the moved
 * epochs here. With PostgreSQL, the sequence number store_cache_sync must wait for
 * (other replicas held cache leases), else 0. */
int64_t store_epochs_commit(struct store *st, bool committed);
/* After such a commit, outside wlock: wait until every other replica holding a cache
 * lease acknowledged seq, or its lease ran out (STORE_CACHE_LEASE_MS at most). */
void store_cache_sync(struct store *st, int64_t seq);
/* The heartbeat's lease renewal: _begin decides (whether the listener is sound) and
 * notes the time it is sent; the renewal statement writes cache_until_ms (lease ms
 * from the database's clock, 0: none), cache_seen (seen) and NOTIFYs echo_text;
 * _end, once it committed, reads the epochs and takes the lease here. */
struct store_renewal {
    int64_t sent;  /* CLOCK_BOOTTIME ms before the renewal went out */
    int64_t seen;  /* ep_seen then */
    uint64_t gen;  /* coh_gen then */
    uint64_t echo; /* this renewal's echo */
    bool lease;    /* renew (else withdraw) the lease */
    char echo_text[64];
};
void store_cache_renew_begin(struct store *st, struct store_renewal *r);
void store_cache_renew_end(struct store *st, const struct store_renewal *r, bool committed);
/* store_clock_ms of the store a writer connection belongs to (this host's clock for a
 * connection outside a store). */
int64_t store_conn_clock_ms(struct db_conn *c);
/* This replica's id (kept in <data_dir>/replica-id), and leadership to match the
 * engine. */
enum mg_code store_replica_init(struct store *st, struct mg_error *err);
/* Run a sweep of leases of dead replicas in its own write transaction: in sql,
 * ?1 is the oldest heartbeat of a live replica and ?2 this replica's id. */
enum mg_code store_sweep_dead(struct store *st, int64_t leader_epoch, const char *sql,
                              struct mg_error *err);

/* Inside a write transaction: MG_OK while this replica holds the leader lease at epoch
 * (locked FOR SHARE until the commit), else MG_EUNAVAIL. MG_OK at once for epoch <= 0 (work
 * that is not leader-only) and with SQLite (the one process leads). */
enum mg_code store_leader_holds(struct db_conn *c, struct store *st, int64_t epoch,
                                struct mg_error *err);

/* At open: leases and running tests this replica id held before (a previous run
 * of this data directory, which its lock proves gone) are free again. */
enum mg_code store_recover_own(struct store *st, struct mg_error *err);
/* SQLite at start: every other replica row is a process that is gone (the
 * data directory's lock says so). */
enum mg_code store_replica_forget_others(struct store *st, struct mg_error *err);

/* Run a query and say whether it returned a row (the rest are not read). */
enum mg_code store_exists(struct db_stmt *s, bool *found, struct mg_error *err);

/* A column as a NEW json string, or json null when SQL NULL. */
json_t *store_col_json_string(struct db_stmt *s, int i);

/* A column as a NEW json integer, or json null when SQL NULL. */
json_t *store_col_json_int(struct db_stmt *s, int i);

/* Parse a JSON-text column; json null when SQL NULL or unparsable. NEW ref. */
json_t *store_col_json(struct db_stmt *s, int i);

/* A text column as a malloc'd copy (NULL for SQL NULL or no memory). */
char *store_col_strdup(struct db_stmt *s, int i);

/* Compact, key-sorted JSON text of v (malloc'd) or NULL. */
char *store_json_text(const json_t *v);

/* Bind a blob's formats (NULL = []) at parameter i and its introspection (NULL binds NULL)
 * at i + 1, as JSON text. */
/* The safety scan (scan.c): scan a local file with the store's options and count its
 * findings (*report NEW); count a report's findings; the report of a plain blob nothing
 * in which the scanner reads (NEW). */
enum mg_code store_scan_path(struct store *st, const char *path, json_t **report,
                             struct mg_error *err);
void store_scan_count(struct store *st, const json_t *report);
json_t *store_scan_plain_clean(void);

enum mg_code store_bind_introspection(struct db_stmt *s, int i, const json_t *formats,
                                      const json_t *intro, struct mg_error *err);

/* Current time as an RFC 3339 string. */
void store_now(char out[32]);

/* Append an audit entry in the writer's open transaction, and state what the write
 * changed for the response cache (http/cache.h): model names the model whose cached
 * answers (its versions, aliases, last-known-good, policy) the write may change, and its
 * epoch moves (store_model_bump); STORE_NO_MODEL when it changes none of them, or when the
 * write bumped each model it changed itself (one write, several models). Every write
 * decides here, not by its action's name. detail is BORROWED (may be NULL → {}). */
#define STORE_NO_MODEL ((const char *)NULL)
enum mg_code store_audit_append(struct db_conn *c, const char *actor, const char *action,
                                const char *target, const char *model, const json_t *detail,
                                struct mg_error *err);

/* Model id by name, in any open transaction. MG_ENOTFOUND if missing. */
enum mg_code store_model_id(struct db_conn *c, const char *name, int64_t *id, struct mg_error *err);

/* Every name in teams (a JSON array of strings) is a team that exists; MG_EINVAL naming
 * "teams" and the first unknown one otherwise. */
enum mg_code store_teams_exist(struct db_conn *c, const json_t *teams, struct mg_error *err);

/*
 * Quotas (quotas.c), inside the caller's write transaction: may team keep digest (size
 * bytes) besides what it keeps now? MG_OK when the team has no quota, already keeps or holds
 * the digest, or stays within its quota with it; else MG_EQUOTA naming the team, its quota
 * and its use. Nothing is written.
 */
enum mg_code store_quota_admit(struct db_conn *c, const char *team, const char *digest,
                               int64_t size, struct mg_error *err);
/* The same for every owner team of model mid citing digest (a stored blob). */
enum mg_code store_quota_admit_model(struct db_conn *c, int64_t mid, const char *digest,
                                     struct mg_error *err);
/* After a change of these teams' (or model mid's owners') use, in its transaction: announce
 * a crossing of 80 % or 100 % of a quota to the webhook gateways (an outbox row). */
enum mg_code store_quota_note(struct db_conn *c, const char *const *teams, size_t nteams,
                              struct mg_error *err);
enum mg_code store_quota_note_model(struct db_conn *c, int64_t mid, struct mg_error *err);
/* Owners changing (docs/contract.md "Quotas and cost"): store_quota_uses gives each team's use now
 * (teams: a JSON array of at most STORE_MAX_SCOPES names; used[i] for teams[i]); after the
 * change, store_quota_grown refuses (MG_EQUOTA, naming the team, its quota, its use and `why`)
 * when a team's use grew past its quota, and announces crossings otherwise. */
enum mg_code store_quota_uses(struct db_conn *c, const json_t *teams, int64_t *used,
                              struct mg_error *err);
enum mg_code store_quota_grown(struct db_conn *c, const json_t *teams, const int64_t *before,
                               const char *why, struct mg_error *err);

/* store_smoke_enqueue inside the caller's write transaction (a promotion queues its
 * candidate's test in the transaction that creates it). */
enum mg_code store_smoke_enqueue_in(struct db_conn *c, const char *model, int64_t version,
                                    const char *trigger, const char *gpu_mode, json_t **out,
                                    bool *created, struct mg_error *err);

/* Version row id for (model, n). MG_ENOTFOUND if the model or version is missing. */
enum mg_code store_version_id(struct db_conn *c, const char *model, int64_t n, int64_t *id,
                              struct mg_error *err);

/* aliases.c: apply an alias change inside the writer's open transaction (a new
 * generation, its history row, bad mark, name claims, outbox rows and audit
 * entry); MG_ESTALE when the alias moved past a->expected_generation. */
enum mg_code store_alias_apply(struct db_conn *c, const struct sign_key *key, const char *actor,
                               const struct store_alias_change *a, const char *at,
                               struct mg_error *err);

/* attest.c: sign generation gen of alias aid (model mid) as a release attestation and store
 * it, in the writer's open transaction. key NULL signs nothing. */
enum mg_code store_attest_generation(struct db_conn *c, const struct sign_key *key, int64_t mid,
                                     int64_t aid, const struct store_alias_change *a,
                                     const json_t *routes, const json_t *match,
                                     const json_t *shadow, int64_t gen, const char *at,
                                     const char *actor, struct mg_error *err);

/* attest.c: an attestation's OCI referrer manifest ({"kind":"attestation","digest",
 * "manifest"}) or bundle ({"kind":"attestation_bundle","bundle"}) by digest, in any open
 * transaction; *out NULL when the digest is neither. */
enum mg_code store_oci_find_attestation(struct db_conn *c, int64_t mid, const char *digest,
                                        json_t **out, struct mg_error *err);

/* The key new signatures are made with, or NULL for a store opened without keys. */
#define STORE_ACTIVE_KEY(st) ((st)->keys ? (st)->keys->active : NULL)

/* aliases.c: store_version_routed inside any open transaction (a write that must refuse a
 * routed version checks in its own transaction). */
enum mg_code store_version_routed_in(struct db_conn *c, int64_t model_id, int64_t version,
                                     json_t **aliases, struct mg_error *err);

/* aliases.c: an alias in the API shape, in any open transaction.
 * MG_ENOTFOUND when missing or deleted. *out NEW. */
enum mg_code store_alias_read(struct db_conn *c, const char *model, const char *alias, json_t **out,
                              struct mg_error *err);

/* versions.c: MG_OK when the version is ready; MG_ECONFLICT saying it is archived or
 * deleted and cannot be `use` ("promoted", "routed"); MG_ENOTFOUND when missing. */
enum mg_code store_version_usable(struct db_conn *c, int64_t mid, const char *model,
                                  int64_t version, const char *use, struct mg_error *err);

/* aliases.c, for aliases_facts.c: the stored match_rules column as an array ([] for NULL)
 * and the shadow column as an object or null (both NEW); both facts of an alias that its
 * readers show, protected and its active promotion (a json string or null, NEW). */
json_t *store_alias_col_match(struct db_stmt *s, int i);
json_t *store_alias_col_shadow(struct db_stmt *s, int i);
enum mg_code store_alias_guard(struct db_conn *c, int64_t model_id, const char *alias,
                               bool *protected_, json_t **promotion, struct mg_error *err);

/* aliases_lkg.c: the next page of alias aid's history, newest first (prepared and bound,
 * not stepped): the entries below generation `below`, at most *page of them, *page first cut
 * to what STORE_FACTS_HISTORY_MAX leaves after `seen`. Columns: generation, kind, routes,
 * at, match_rules, shadow. */
struct db_stmt *store_alias_history_page(struct db_conn *c, int64_t aid, int64_t below,
                                         int64_t seen, int64_t *page);

/* aliases_facts.c: store_alias_facts in the caller's open transaction. */
enum mg_code store_alias_facts_in(struct db_conn *c, const char *model, const char *alias,
                                  json_t **out, struct mg_error *err);
/* store_version_brief on an open connection (in its transaction). */
enum mg_code store_version_brief_in(struct db_conn *c, const char *model, int64_t version,
                                    json_t **out, struct mg_error *err);

/* policies.c: whether (model, alias) has a policy. On any error *yes stays
 * true: a failed read must never make an alias look unprotected. */
enum mg_code store_policy_exists(struct db_conn *c, int64_t model_id, const char *alias, bool *yes,
                                 struct mg_error *err);

/* outbox.c: write the desired state (payload BORROWED) of generation gen for
 * every gateway that hears (model, alias), replacing any older pending one. */
enum mg_code store_outbox_write(struct db_conn *c, const char *model, const char *alias,
                                int64_t gen, const json_t *payload, const char *at,
                                struct mg_error *err);

/* outbox.c: a promotion event ("promotion.awaiting_approval", "promotion.rolled_back") for
 * every webhook gateway that asked for it in its config's "events" and hears (model, alias):
 * one row per event, keyed "!<code>:<promotion id>" in the alias column (never an alias
 * name), with payload {"event": event} (BORROWED). Deleted once delivered. */
enum mg_code store_outbox_event(struct db_conn *c, const char *model, const char *alias,
                                const char *promotion, const char *type, const json_t *event,
                                const char *at, struct mg_error *err);

/* release.c, promotions.c: the event for a promotion that entered state `state` (only
 * awaiting_approval and rolled_back make one; others do nothing). */
enum mg_code store_promotion_notify(struct db_conn *c, const char *actor, const char *id,
                                    const char *state, const char *detail, const char *at,
                                    struct mg_error *err);

/*
 * Pagination, written once. A list statement returns rows in cursor order and
 * takes the number of rows to return as parameter limit_param; store_page_rows
 * binds it to page->limit + 1 (the extra row only says that a next page
 * exists), steps the statement, turns each row into an item with row() and
 * makes *out = {"items":[…],"next_page_token":<cursor of the last item>|null}
 * (NEW). row() sets *item (NEW) and writes the row's cursor text (a name, or a
 * decimal number) into cursor, or fails with err filled; the first failure
 * ends the list.
 */
typedef enum mg_code (*store_row_fn)(struct db_stmt *s, void *ctx, json_t **item, char cursor[128],
                                     struct mg_error *err);

enum mg_code store_page_rows(struct db_stmt *s, int limit_param, const struct store_page *page,
                             store_row_fn row, void *ctx, json_t **out, struct mg_error *err);

/* A numeric page token: the decimal text of a cursor (a row id or version)
 * that this server issued; INT64_MAX without one. MG_EINVAL naming page_token
 * otherwise. */
enum mg_code store_page_cursor(const struct store_page *page, int64_t *cursor,
                               struct mg_error *err);

#endif
