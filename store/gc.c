/*
 * gc.c - blob garbage collection (docs/contract.md "Lifecycle"): mark from live
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

#include "../base/util.h"
#include "blob.h"

/* Rows moved to 'deleting' per transaction. */
#define GC_BATCH 500
/* A leftover no live upload claims is removed only when this old at least, whatever the
 * grace period: a file: temp file of an upload in flight has no row to claim it, and its
 * age counts from its last write. */
#define GC_LEFTOVER_MIN_AGE_MS (15 * 60 * 1000)
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

enum mg_code store_job_claim(struct store *st, const char *job, int64_t leader_epoch,
                             int64_t now_ms, int64_t interval_ms, bool *claimed,
                             struct mg_error *err)
{
    /* A job first seen now first runs one interval later: a new installation has nothing
     * to collect, and its audit log does not open with an empty run. */
    static const char sql_ins[] =
        "INSERT INTO jobs (name, last_run_ms) VALUES (?1, ?2) ON CONFLICT (name) DO NOTHING";
    static const char sql_claim[] =
        "UPDATE jobs SET last_run_ms = ?1 WHERE name = ?2 AND last_run_ms <= ?3";
    struct db_conn *c = store_write_begin(st, err);
    struct db_stmt *s;
    enum mg_code rc;

    *claimed = false;
    if (c == NULL)
        return err->code;
    if ((rc = store_leader_holds(c, st, leader_epoch, err)) != MG_OK)
        return store_write_end(st, c, rc, err);
    s = db_prepare(c, sql_ins);
    db_bind_text(s, 1, job);
    db_bind_i64(s, 2, now_ms);
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
    return blob_delete(st->blobs, digest, err);
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
    /* Pins of a gone replica run (it died putting bytes): nothing puts under them now. */
    static const char sql_pins[] =
        "DELETE FROM blob_pins WHERE (replica = ?2 AND at_ms < ?3) OR (replica <> ?2 AND "
        "replica NOT IN (SELECT id FROM replicas WHERE last_seen_ms >= ?1))";
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
    {
        struct db_stmt *s = db_prepare(c, sql_pins);

        db_bind_i64(s, 1, now - STORE_REPLICA_DEAD_MS);
        db_bind_text(s, 2, store_replica_id(st));
        db_bind_i64(s, 3, st->started_ms);
        rc = db_exec(s, err);
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
    struct db_conn *c = store_read_one(st);
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
    detail = json_pack("{s:I, s:I, s:I, s:O, s:I, s:I}", "blobs", (json_int_t)rep->blobs, "bytes",
                       (json_int_t)rep->bytes, "grace_ms", (json_int_t)grace_ms, "digests", digests,
                       "failed", (json_int_t)rep->failed, "leftovers", (json_int_t)rep->leftovers);
    rc = detail ? store_audit_append(c, actor, "blob.gc", "blobs", STORE_NO_MODEL, detail, err)
                : mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    json_decref(detail);
    return store_write_end(st, c, rc, err);
}

/* ---- leftovers of uploads that never committed ------------------------------------ */

struct leftovers {
    struct store *st;
    json_t *live;    /* handles of uploads of live replicas (blob_uploads), as keys */
    json_t *reclaim; /* handles to reclaim */
    int64_t grace_ms;
};

static bool orphan_seen(const struct blob_orphan *o, void *arg)
{
    struct leftovers *l = arg;

    /* An upload of a live replica, or one too young to judge (a file: temp file of an upload
     * in flight has no row), stays. */
    if (o->owner != NULL && json_object_get(l->live, o->owner) != NULL)
        return true;
    if (o->age_ms < 0 || o->age_ms < l->grace_ms || o->age_ms < GC_LEFTOVER_MIN_AGE_MS)
        return true;
    json_array_append_new(l->reclaim, json_string(o->handle));
    return json_array_size(l->reclaim) < 10000;
}

/*
 * Remove what uploads left behind when they died or were aborted uncleanly: temp files,
 * S3 multipart uploads and temp objects, OCI upload sessions (known only by their
 * blob_uploads rows). An upload whose replica lives is never touched, nor anything younger
 * than the grace period.
 */
static enum mg_code gc_leftovers(struct store *st, int64_t grace_ms, int64_t *reclaimed,
                                 struct mg_error *err)
{
    /* Live: this process's own uploads (its replica id, begun since it started: the id
     * outlives a killed run of the same data directory), and those of live replicas. */
    static const char sql_rows[] =
        "SELECT id, handle, CASE WHEN (replica = ?2 AND started_at >= ?3) OR replica IN "
        "(SELECT id FROM replicas WHERE last_seen_ms >= ?1 AND id <> ?2) THEN 1 ELSE 0 END "
        "FROM blob_uploads";
    static const char sql_del[] = "DELETE FROM blob_uploads WHERE id = ?";
    struct leftovers l = {st, json_object(), json_array(), grace_ms};
    json_t *dead = json_array(), *h;
    char started[32];
    struct db_conn *c = store_read_one(st);
    struct db_stmt *s = db_prepare(c, sql_rows);
    enum mg_code rc;
    size_t i;
    bool row;

    mg_time_format(st->started_ms, started);
    db_bind_i64(s, 1, store_clock_ms(st) - STORE_REPLICA_DEAD_MS);
    db_bind_text(s, 2, store_replica_id(st));
    db_bind_text(s, 3, started);
    while ((rc = db_step(s, &row, err)) == MG_OK && row) {
        const char *handle = db_col_text(s, 1);

        if (db_col_i64(s, 2) != 0)
            json_object_set_new(l.live, handle, json_true());
        else
            json_array_append_new(dead, json_pack("[s, s]", db_col_text(s, 0), handle));
    }
    store_read_end(st, c);
    if (rc != MG_OK)
        goto out;
    if ((rc = blob_orphans(st->blobs, orphan_seen, &l, err)) != MG_OK)
        goto out;
    json_array_foreach(l.reclaim, i, h)
    {
        if ((rc = blob_reclaim(st->blobs, json_string_value(h), err)) != MG_OK)
            goto out;
        (*reclaimed)++;
    }
    /* Uploads of dead replicas: what their rows name goes (oci sessions are known only so),
     * then the rows. */
    json_array_foreach(dead, i, h)
    {
        struct db_conn *w;

        if ((rc = blob_reclaim(st->blobs, json_string_value(json_array_get(h, 1)), err)) != MG_OK)
            goto out;
        if ((w = store_write_begin(st, err)) == NULL) {
            rc = err->code;
            goto out;
        }
        s = db_prepare(w, sql_del);
        db_bind_text(s, 1, json_string_value(json_array_get(h, 0)));
        if ((rc = store_write_end(st, w, db_exec(s, err), err)) != MG_OK)
            goto out;
        (*reclaimed)++;
    }
out:
    json_decref(l.live);
    json_decref(l.reclaim);
    json_decref(dead);
    return rc;
}

enum mg_code store_gc(struct store *st, const char *actor, int64_t grace_ms, bool dry_run,
                      struct store_gc_report *rep, struct mg_error *err)
{
    int64_t cutoff = store_clock_ms(st) - grace_ms;
    json_t *named = json_array();
    enum mg_code rc = MG_OK;

    rep->blobs = rep->bytes = rep->failed = rep->leftovers = 0;
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
        if (rep->after_mark)
            rep->after_mark(rep->arg); /* tests: a crash between the marks and the deletes */
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
    if (rc == MG_OK && (rc = gc_leftovers(st, grace_ms, &rep->leftovers, err)) != MG_OK)
        rep->failed++;
    { /* every run is audited (docs/contract.md), one that found nothing too */
        struct mg_error e2;
        enum mg_code arc = gc_audit(st, actor, rep, named, grace_ms, rc == MG_OK ? err : &e2);

        if (rc == MG_OK)
            rc = arc;
    }
    pthread_mutex_unlock(&st->gc_lock);
    json_decref(named);
    return rc;
}
