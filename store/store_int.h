/*
 * store_int.h - internals shared by the SQLite store's files. Nothing outside
 * store/ includes this.
 */
#ifndef STORE_INT_H
#define STORE_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <sqlite3.h>

#include "store.h"

/* One SQLite connection with its prepared-statement cache, keyed by the
 * address of the (static) SQL text. The cache grows to hold every statement
 * the connection has used and never evicts one: a statement a caller is still
 * stepping must not be finalized under it. `changes` is
 * sqlite3_total_changes64() when the write transaction began. */
struct store_conn {
    sqlite3 *db;
    struct {
        const char *sql;
        sqlite3_stmt *stmt;
    } * cache;
    unsigned ncache, capcache;
    int64_t changes;
};

struct store {
    char *data_dir;
    char *db_path;
    char *blob_dir; /* <data>/blobs/sha256 */
    char *tmp_dir;  /* <data>/blobs/tmp */
    struct store_archive_limits archive;
    struct store_archive_counters archive_counters; /* archive.counters points here */
    const struct sign_keyring *keys;

    int lock_fd; /* flock'd <data>/modelgated.lock: one process per data directory */

    pthread_mutex_t wlock; /* serialises writers */
    struct store_conn writer;
    _Atomic uint64_t epoch;   /* bumped after every committed write: store_data_epoch() */
    _Atomic int hash_threads; /* uploads hashed on a thread of their own now (blobs.c) */

    /* Recently authenticated tokens, by SHA-256 of the secret. Entries live
     * TOKEN_CACHE_MS; revoking any token through this store empties it at
     * once (other replicas, later, see a revocation within that time). */
    pthread_mutex_t tlock;
    struct {
        uint8_t hash[32];
        struct store_principal who;
        int64_t until_ms;
    } tcache[64];
    uint64_t tcache_epoch;

    pthread_mutex_t rlock;
    pthread_cond_t rcond;
    struct store_conn *readers;
    unsigned char *rbusy;
    unsigned nreaders;
};

/* Borrow a read connection inside a read transaction (a consistent snapshot).
 * Blocks while all are busy. Never fails: a failure to BEGIN is reported by
 * the first statement. */
struct store_conn *store_read_begin(struct store *st);
void store_read_end(struct store *st, struct store_conn *c);

/* Take the writer inside BEGIN IMMEDIATE. NULL on failure (err filled). */
struct store_conn *store_write_begin(struct store *st, struct mg_error *err);

/* COMMIT when rc == MG_OK, else ROLLBACK; releases the writer. Returns rc, or
 * the commit's error. */
enum mg_code store_write_end(struct store *st, struct store_conn *c, enum mg_code rc,
                             struct mg_error *err);

/* Cached prepared statement, reset and unbound. NULL on failure (err filled). */
sqlite3_stmt *store_stmt(struct store_conn *c, const char *sql, struct mg_error *err);

/* Map a SQLite result code to an error (MG_ENOSPC for SQLITE_FULL, MG_ECONFLICT
 * for a constraint, MG_EDB otherwise). */
enum mg_code store_db_error(struct store_conn *c, int rc, struct mg_error *err);

/* Run one parameterless statement in its own write transaction. */
enum mg_code store_write_sql(struct store *st, const char *sql, struct mg_error *err);

/* Step a statement expected to finish (INSERT/UPDATE/DELETE). */
enum mg_code store_exec_stmt(struct store_conn *c, sqlite3_stmt *s, struct mg_error *err);

/* Bind helpers: text may be NULL (binds NULL). */
int store_bind_text(sqlite3_stmt *s, int i, const char *text);

/* A column as a NEW json string, or json null when SQL NULL. */
json_t *store_col_json_string(sqlite3_stmt *s, int i);

/* Parse a JSON-text column; json null when SQL NULL or unparsable. NEW ref. */
json_t *store_col_json(sqlite3_stmt *s, int i);

/* Compact, key-sorted JSON text of v (malloc'd) or NULL. */
char *store_json_text(const json_t *v);

/* Current time as an RFC 3339 string. */
void store_now(char out[32]);

/* Append an audit entry in the writer's open transaction.
 * detail is BORROWED (may be NULL → {}). */
enum mg_code store_audit_append(struct store_conn *c, const char *actor, const char *action,
                                const char *target, const json_t *detail, struct mg_error *err);

/* Model id by name, in any open transaction. MG_ENOTFOUND if missing. */
enum mg_code store_model_id(struct store_conn *c, const char *name, int64_t *id,
                            struct mg_error *err);

/* Version row id for (model, n). MG_ENOTFOUND if the model or version is missing. */
/* Every name in teams (a JSON array of strings) is a team that exists; MG_EINVAL naming
 * "teams" and the first unknown one otherwise. */
enum mg_code store_teams_exist(struct store_conn *c, const json_t *teams, struct mg_error *err);

/* store_smoke_enqueue inside the caller's write transaction (a promotion queues its
 * candidate's test in the transaction that creates it). */
enum mg_code store_smoke_enqueue_in(struct store_conn *c, const char *model, int64_t version,
                                    const char *trigger, const char *gpu_mode, json_t **out,
                                    bool *created, struct mg_error *err);

enum mg_code store_version_id(struct store_conn *c, const char *model, int64_t n, int64_t *id,
                              struct mg_error *err);

/* Apply an alias change inside the writer's open transaction (release.c). */
enum mg_code store_release_apply_alias(struct store_conn *c, const char *actor,
                                       const struct store_alias_change *a, const char *at,
                                       struct mg_error *err);

/* Path of a blob file: <blob_dir>/<2 hex>/<64 hex>. out must hold PATH_MAX. */
void store_blob_path(const struct store *st, const char *digest, char *out, size_t outsz);

/* Page tokens are the decimal text of a cursor (a row id or version); names
 * use the name itself. These validate what a client sent back. */
bool store_page_cursor(const struct store_page *page, int64_t *cursor);

#endif
