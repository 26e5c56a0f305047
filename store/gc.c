/*
 * gc.c - blob garbage collection (API.md "Lifecycle"): mark from live
 * versions, datasets and uploads in flight; sweep only blobs nobody has sent
 * for longer than the grace period.
 *
 * A sweep is three steps, each safe to die in:
 *   1. one write transaction moves the chosen rows to 'deleting' (owner = this
 *      replica), re-checking every condition as it does, so an upload that
 *      pinned or refreshed a blob a moment before keeps it;
 *   2. the bytes are removed from the backend (removing what is already gone
 *      is fine);
 *   3. a write transaction marks them 'reclaimed'.
 * An upload of bytes whose row is 'deleting' waits for step 3 (or for the
 * collector to be declared dead) and then stores them again, so the race of a
 * sweep with an upload of the same bytes loses nothing. A collector that died
 * between 1 and 3 leaves 'deleting' rows that the next run (on any replica)
 * finishes once the owner is dead.
 */
#include "store_int.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/util.h"

/* Rows moved to 'deleting' per transaction. */
#define GC_BATCH 500
/* Digests named in a run's audit entry (the count and bytes are always whole). */
#define GC_AUDIT_MAX 1000

/* The conditions under which a live blob may go: nothing alive holds it. */
#define GC_UNREFERENCED                                                                            \
    "b.state = 'live' AND b.last_used_ms < ?1 "                                                    \
    "AND NOT EXISTS (SELECT 1 FROM versions v WHERE v.artifact = b.digest "                        \
    "AND v.status <> 'deleted') "                                                                  \
    "AND NOT EXISTS (SELECT 1 FROM datasets d WHERE d.digest = b.digest "                          \
    "AND d.withdrawn_at IS NULL) "                                                                 \
    "AND NOT EXISTS (SELECT 1 FROM blob_pins p WHERE p.digest = b.digest) "

enum mg_code store_job_claim(struct store *st, const char *job, int64_t now_ms, int64_t interval_ms,
                             bool *claimed, struct mg_error *err)
{
    static const char sql_ins[] =
        "INSERT INTO jobs (name, last_run_ms) VALUES (?, 0) ON CONFLICT (name) DO NOTHING";
    static const char sql_claim[] =
        "UPDATE jobs SET last_run_ms = ?1 WHERE name = ?2 AND last_run_ms <= ?3";
    struct db_conn *c = store_write_begin(st, err);
    struct db_stmt *s;
    enum mg_code rc;

    *claimed = false;
    if (c == NULL)
        return err->code;
    s = db_prepare(c, sql_ins);
    db_bind_text(s, 1, job);
    if ((rc = db_exec(s, err)) == MG_OK) {
        s = db_prepare(c, sql_claim);
        db_bind_i64(s, 1, now_ms);
        db_bind_text(s, 2, job);
        db_bind_i64(s, 3, now_ms - interval_ms);
        if ((rc = db_exec(s, err)) == MG_OK)
            *claimed = db_changes(s) == 1;
    }
    return store_write_end(st, c, rc, err);
}

enum mg_code store_bytes_reclaimable(struct store *st, const char *model, const int64_t *versions,
                                     size_t n, int64_t *bytes, struct mg_error *err)
{
    /* The distinct live blobs of these versions that no other version (not deleted) and no
     * dataset still holds. */
    static const char sql_art[] = "SELECT v.artifact FROM versions v JOIN models m ON "
                                  "m.id = v.model_id WHERE m.name = ? AND v.version = ?";
    static const char sql_held[] =
        "SELECT b.size, "
        "(SELECT count(*) FROM versions v WHERE v.artifact = b.digest AND v.status <> 'deleted'),"
        " EXISTS (SELECT 1 FROM datasets d WHERE d.digest = b.digest AND d.withdrawn_at IS NULL)"
        " FROM blobs b WHERE b.digest = ? AND b.state = 'live'";
    struct db_conn *c = store_read_begin(st);
    json_t *count = json_object(), *k;
    const char *digest;
    enum mg_code rc = MG_OK;
    size_t i;
    bool row;

    *bytes = 0;
    /* How many of the listed versions hold each blob. */
    for (i = 0; i < n && rc == MG_OK; i++) {
        struct db_stmt *s = db_prepare(c, sql_art);

        db_bind_text(s, 1, model);
        db_bind_i64(s, 2, versions[i]);
        if ((rc = db_step(s, &row, err)) == MG_OK && row) {
            const char *d = db_col_text(s, 0);
            json_int_t have = json_integer_value(json_object_get(count, d));

            json_object_set_new(count, d, json_integer(have + 1));
        }
        db_reset(s);
    }
    json_object_foreach(count, digest, k)
    {
        struct db_stmt *s;

        if (rc != MG_OK)
            break;
        s = db_prepare(c, sql_held);
        db_bind_text(s, 1, digest);
        if ((rc = db_step(s, &row, err)) == MG_OK && row &&
            db_col_i64(s, 1) <= json_integer_value(k) && db_col_i64(s, 2) == 0)
            *bytes += db_col_i64(s, 0);
        db_reset(s);
    }
    json_decref(count);
    store_read_end(st, c);
    return rc;
}

/* Remove a blob's bytes from the backend; bytes already gone are fine. */
static enum mg_code gc_remove_bytes(struct store *st, const char *digest, struct mg_error *err)
{
    char path[PATH_MAX];

    store_blob_path(st, digest, path, sizeof(path));
    if (unlink(path) != 0 && errno != ENOENT)
        return mg_fail(err, MG_EIO, NULL, "cannot remove %s: %s", path, strerror(errno));
    return MG_OK;
}

/* The digests (with sizes) this run sweeps: rows it moves to 'deleting' now, plus rows
 * left 'deleting' by a collector that is gone (a dead replica, or this replica's previous
 * run). *rows: [[digest, size]…] (NEW). */
static enum mg_code gc_mark(struct store *st, int64_t cutoff_ms, json_t **rows,
                            struct mg_error *err)
{
    static const char sql_take[] =
        "UPDATE blobs SET state = 'deleting', gc_owner = ?2, gc_at_ms = ?3 "
        "WHERE digest IN (SELECT b.digest FROM blobs b WHERE " GC_UNREFERENCED "LIMIT ?4) "
        "RETURNING digest, size";
    static const char sql_orphaned[] =
        "UPDATE blobs SET gc_owner = ?2, gc_at_ms = ?3 WHERE state = 'deleting' "
        "AND (gc_owner IS NULL OR gc_owner = ?2 OR gc_owner NOT IN "
        "(SELECT id FROM replicas WHERE last_seen_ms >= ?1)) RETURNING digest, size";
    struct db_conn *c = store_write_begin(st, err);
    int64_t now = store_clock_ms(st);
    json_t *out = json_array();
    const char *sqls[2] = {sql_orphaned, sql_take};
    enum mg_code rc = MG_OK;
    unsigned k;
    bool row;

    if (c == NULL) {
        json_decref(out);
        return err->code;
    }
    for (k = 0; k < 2 && rc == MG_OK; k++) {
        struct db_stmt *s = db_prepare(c, sqls[k]);

        db_bind_i64(s, 1, k == 0 ? now - STORE_REPLICA_DEAD_MS : cutoff_ms);
        db_bind_text(s, 2, store_replica_id(st));
        db_bind_i64(s, 3, now);
        if (k == 1)
            db_bind_i64(s, 4, GC_BATCH);
        while ((rc = db_step(s, &row, err)) == MG_OK && row)
            json_array_append_new(out, json_pack("[o, I]", store_col_json_string(s, 0),
                                                 (json_int_t)db_col_i64(s, 1)));
    }
    rc = store_write_end(st, c, rc, err);
    if (rc != MG_OK) {
        json_decref(out);
        return rc;
    }
    *rows = out;
    return MG_OK;
}

/* Step 3 for one blob: its bytes are gone. */
static enum mg_code gc_reclaimed(struct store *st, const char *digest, struct mg_error *err)
{
    static const char sql[] = "UPDATE blobs SET state = 'reclaimed', gc_owner = NULL "
                              "WHERE digest = ? AND state = 'deleting' AND gc_owner = ?";
    struct db_conn *c = store_write_begin(st, err);
    struct db_stmt *s;
    enum mg_code rc;

    if (c == NULL)
        return err->code;
    s = db_prepare(c, sql);
    db_bind_text(s, 1, digest);
    db_bind_text(s, 2, store_replica_id(st));
    rc = db_exec(s, err);
    return store_write_end(st, c, rc, err);
}

static enum mg_code gc_dry(struct store *st, int64_t cutoff_ms, struct store_gc_report *rep,
                           struct mg_error *err)
{
    static const char sql[] =
        "SELECT count(*), coalesce(sum(b.size), 0) FROM blobs b WHERE " GC_UNREFERENCED;
    struct db_conn *c = store_read_begin(st);
    struct db_stmt *s = db_prepare(c, sql);
    enum mg_code rc;
    bool row;

    db_bind_i64(s, 1, cutoff_ms);
    if ((rc = db_step(s, &row, err)) == MG_OK && row) {
        rep->blobs = db_col_i64(s, 0);
        rep->bytes = db_col_i64(s, 1);
    }
    db_reset(s);
    store_read_end(st, c);
    return rc;
}

static enum mg_code gc_audit(struct store *st, const char *actor, const struct store_gc_report *rep,
                             json_t *digests, int64_t grace_ms, struct mg_error *err)
{
    struct db_conn *c = store_write_begin(st, err);
    json_t *detail;
    enum mg_code rc;

    if (c == NULL)
        return err->code;
    detail = json_pack("{s:I, s:I, s:I, s:O, s:I}", "blobs", (json_int_t)rep->blobs, "bytes",
                       (json_int_t)rep->bytes, "grace_ms", (json_int_t)grace_ms, "digests", digests,
                       "failed", (json_int_t)rep->failed);
    rc = detail ? store_audit_append(c, actor, "blob.gc", "blobs", detail, err)
                : mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    json_decref(detail);
    return store_write_end(st, c, rc, err);
}

enum mg_code store_gc(struct store *st, const char *actor, int64_t grace_ms, bool dry_run,
                      struct store_gc_report *rep, struct mg_error *err)
{
    int64_t cutoff = store_clock_ms(st) - grace_ms;
    json_t *named = json_array();
    enum mg_code rc = MG_OK;

    memset(rep, 0, sizeof(*rep));
    if (dry_run) {
        json_decref(named);
        return gc_dry(st, cutoff, rep, err);
    }
    pthread_mutex_lock(&st->gc_lock); /* one sweep at a time in this process */
    for (;;) {
        json_t *rows = NULL, *r;
        size_t i;

        if ((rc = gc_mark(st, cutoff, &rows, err)) != MG_OK)
            break;
        if (json_array_size(rows) == 0) {
            json_decref(rows);
            break;
        }
        json_array_foreach(rows, i, r)
        {
            const char *digest = json_string_value(json_array_get(r, 0));
            struct mg_error e2;

            if (gc_remove_bytes(st, digest, &e2) != MG_OK) {
                fprintf(stderr, "modelgated: gc: %s stays for the next run: %s\n", digest,
                        e2.message);
                rep->failed++;
                continue;
            }
            if ((rc = gc_reclaimed(st, digest, err)) != MG_OK)
                break;
            rep->blobs++;
            rep->bytes += json_integer_value(json_array_get(r, 1));
            if (json_array_size(named) < GC_AUDIT_MAX)
                json_array_append(named, json_array_get(r, 0));
        }
        json_decref(rows);
        if (rc != MG_OK || rep->failed > 0)
            break; /* a backend that refuses deletes: try again at the next run */
    }
    if (rep->blobs > 0 || rep->failed > 0) {
        struct mg_error e2;
        enum mg_code arc = gc_audit(st, actor, rep, named, grace_ms, rc == MG_OK ? err : &e2);

        if (rc == MG_OK)
            rc = arc;
    }
    pthread_mutex_unlock(&st->gc_lock);
    json_decref(named);
    return rc;
}
