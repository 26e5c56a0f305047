/*
 * scan.c - the safety scan reports kept per blob and copied into versions (docs/contract.md
 * "Artifact safety scan"); artifact/scan.h reads the bytes, this file only remembers
 * what it said, counts the findings, and runs a rescan.
 */
#include "store_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void store_scan_count(struct store *st, const json_t *report)
{
    json_t *f;
    size_t i;
    int k;

    json_array_foreach(json_object_get(report, "findings"), i, f)
    {
        if ((k = art_scan_rule_index(json_string_value(json_object_get(f, "rule")))) >= 0)
            atomic_fetch_add_explicit(&st->scan_findings[k], 1, memory_order_relaxed);
    }
}

void store_scan_totals(struct store *st, uint64_t out[ART_SCAN_NRULES])
{
    int i;

    for (i = 0; i < ART_SCAN_NRULES; i++)
        out[i] = atomic_load_explicit(&st->scan_findings[i], memory_order_relaxed);
}

enum mg_code store_scan_path(struct store *st, const char *path, json_t **report,
                             struct mg_error *err)
{
    struct art_scan_opts o = st->scan;
    enum mg_code rc;

    /* zips inside archives are read through their central directory from a scratch file */
    o.spill = art_scan_spill_tmp;
    o.spill_ctx = st->tmp_dir;
    rc = art_scan_file(path, &o, report, err);

    if (rc == MG_OK)
        store_scan_count(st, *report);
    return rc;
}

json_t *store_scan_plain_clean(void)
{
    return json_pack("{s:s, s:s, s:[]}", "verdict", "clean", "scanner", ART_SCANNER, "findings");
}

enum mg_code store_blob_scan(struct store *st, const char *digest, json_t **out,
                             struct mg_error *err)
{
    static const char sql[] = "SELECT scan FROM blobs WHERE digest = ?";
    struct db_conn *c = store_read_one(st);
    struct db_stmt *s = db_prepare(c, sql);
    enum mg_code rc;
    bool row;

    *out = NULL;
    db_bind_text(s, 1, digest);
    if ((rc = db_step(s, &row, err)) == MG_OK && row) {
        if (!db_col_null(s, 0) && (*out = store_col_json(s, 0)) != NULL && json_is_null(*out)) {
            json_decref(*out);
            *out = NULL;
        }
    } else if (rc == MG_OK) {
        rc = mg_fail(err, MG_EINVAL, "artifact",
                     "artifact blob %s does not exist; upload it with POST /api/v1/blobs first",
                     digest);
    }
    db_reset(s);
    store_read_end(st, c);
    return rc;
}

/*
 * Replace the report of the blob and of the versions citing it, in one transaction.
 * leader_epoch > 0: the background rescan, which commits only while this replica leads at
 * that epoch (MG_EUNAVAIL) and only for a blob that still has no report (*recorded false,
 * MG_OK: a rescan by hand, or another leader, was first; or the blob went).
 */
static enum mg_code rescan_write(struct store *st, const char *actor, const char *digest,
                                 int64_t leader_epoch, const json_t *report, bool *recorded,
                                 struct mg_error *err)
{
    static const char sql_blob[] = "UPDATE blobs SET scan = ? WHERE digest = ? AND state = 'live'";
    static const char sql_unscanned[] =
        "UPDATE blobs SET scan = ? WHERE digest = ? AND state = 'live' AND scan IS NULL";
    static const char sql_models[] = "SELECT DISTINCT m.name FROM versions v JOIN models m ON "
                                     "m.id = v.model_id WHERE v.artifact = ?";
    static const char sql_versions[] = "UPDATE versions SET scan = ? WHERE artifact = ?";
    struct db_conn *c = store_write_begin(st, err);
    char *text = store_json_text(report), *model;
    struct db_stmt *s;
    enum mg_code rc;
    json_t *detail, *models = json_array();
    size_t i;
    bool row;

    *recorded = false;
    if (c == NULL) {
        free(text);
        json_decref(models);
        return err->code;
    }
    if (text == NULL || models == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    if ((rc = store_leader_holds(c, st, leader_epoch, err)) != MG_OK)
        goto out;
    s = db_prepare(c, leader_epoch > 0 ? sql_unscanned : sql_blob);
    db_bind_text(s, 1, text);
    db_bind_text(s, 2, digest);
    if ((rc = db_exec(s, err)) != MG_OK)
        goto out;
    if (db_changes(s) != 1) {
        if (leader_epoch <= 0)
            rc = mg_fail(err, MG_ENOTFOUND, NULL, "blob %s does not exist", digest);
        goto out;
    }
    *recorded = true;
    s = db_prepare(c, sql_models);
    db_bind_text(s, 1, digest);
    while ((rc = db_step(s, &row, err)) == MG_OK && row)
        json_array_append_new(models, store_col_json_string(s, 0));
    db_reset(s);
    if (rc != MG_OK)
        goto out;
    s = db_prepare(c, sql_versions);
    db_bind_text(s, 1, text);
    db_bind_text(s, 2, digest);
    if ((rc = db_exec(s, err)) != MG_OK)
        goto out;
    for (i = 0; i < json_array_size(models); i++) {
        model = (char *)json_string_value(json_array_get(models, i));
        if (model && (rc = store_model_bump(c, model, err)) != MG_OK)
            goto out;
    }
    detail = json_pack("{s:O, s:I}", "verdict", json_object_get(report, "verdict"), "findings",
                       (json_int_t)json_array_size(json_object_get(report, "findings")));
    /* each model citing the blob was bumped above */
    rc = store_audit_append(c, actor, "blob.rescan", digest, STORE_NO_MODEL, detail, err);
    json_decref(detail);
out:
    free(text);
    json_decref(models);
    return store_write_end(st, c, rc, err);
}

/* Copy the blob's bytes to a local file, scan them, and record the report (rescan_write). */
static enum mg_code rescan(struct store *st, const char *actor, const char *digest,
                           int64_t leader_epoch, json_t **out, struct mg_error *err)
{
    char path[4096];
    json_t *blob = NULL;
    enum mg_code rc;
    bool recorded = false;
    int fd;

    *out = NULL;
    if ((rc = store_blob_get(st, digest, &blob, err)) != MG_OK)
        return rc;
    snprintf(path, sizeof(path), "%s/rescan-XXXXXX", st->tmp_dir);
    if ((fd = mkostemp(path, O_CLOEXEC)) < 0) {
        json_decref(blob);
        return mg_fail(err, MG_EIO, NULL, "cannot create a local copy of the blob: %s",
                       strerror(errno));
    }
    rc = store_blob_copy_to_fd(
        st, digest, (uint64_t)json_integer_value(json_object_get(blob, "size")), fd, err);
    json_decref(blob);
    if (rc == MG_OK)
        rc = store_scan_path(st, path, out, err);
    unlink(path);
    close(fd);
    if (rc == MG_OK)
        rc = rescan_write(st, actor, digest, leader_epoch, *out, &recorded, err);
    if (rc != MG_OK || !recorded) {
        json_decref(*out);
        *out = NULL;
    }
    return rc;
}

enum mg_code store_blob_rescan(struct store *st, const char *actor, const char *digest,
                               json_t **out, struct mg_error *err)
{
    return rescan(st, actor, digest, 0, out, err);
}

/* ---- the background rescan of blobs stored before the scanner ---------------------------- */

enum mg_code store_scan_unscanned_count(struct store *st, int64_t *n, struct mg_error *err)
{
    static const char sql[] = "SELECT count(*) FROM blobs WHERE state = 'live' AND scan IS NULL";
    struct db_conn *c = store_read_one(st);
    struct db_stmt *s = db_prepare(c, sql);
    enum mg_code rc;
    bool row;

    *n = 0;
    if ((rc = db_step(s, &row, err)) == MG_OK && row)
        *n = db_col_i64(s, 0);
    db_reset(s);
    store_read_end(st, c);
    return rc;
}

enum mg_code store_scan_unscanned(struct store *st, const char *after, int64_t limit, json_t **out,
                                  struct mg_error *err)
{
    static const char sql[] = "SELECT digest FROM blobs WHERE state = 'live' AND scan IS NULL "
                              "AND digest > ? ORDER BY digest LIMIT ?";
    struct db_conn *c = store_read_one(st);
    struct db_stmt *s = db_prepare(c, sql);
    enum mg_code rc;
    bool row;

    *out = json_array();
    if (*out == NULL) {
        store_read_end(st, c);
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
    db_bind_text(s, 1, after);
    db_bind_i64(s, 2, limit);
    while ((rc = db_step(s, &row, err)) == MG_OK && row)
        json_array_append_new(*out, store_col_json_string(s, 0));
    db_reset(s);
    store_read_end(st, c);
    if (rc != MG_OK) {
        json_decref(*out);
        *out = NULL;
    }
    return rc;
}

enum mg_code store_blob_scan_backfill(struct store *st, int64_t leader_epoch, const char *actor,
                                      const char *digest, json_t **out, struct mg_error *err)
{
    if (leader_epoch <= 0) {
        *out = NULL;
        return mg_fail(err, MG_EINVAL, NULL, "the background rescan runs only as the leader");
    }
    return rescan(st, actor, digest, leader_epoch, out, err);
}

/* ---- the report as an OCI referrer ------------------------------------------------------ */

enum mg_code store_oci_scan_put(struct store *st, const char *model, int64_t version,
                                const char *digest, const char *kind, const char *body,
                                struct mg_error *err)
{
    static const char sql[] = "INSERT INTO oci_scan_refs (digest, version_id, kind, body) "
                              "VALUES (?, ?, ?, ?) ON CONFLICT (digest, version_id) DO NOTHING";
    struct db_conn *c = store_write_begin(st, err);
    struct db_stmt *s;
    int64_t vid;
    enum mg_code rc;

    if (c == NULL)
        return err->code;
    if ((rc = store_version_id(c, model, version, &vid, err)) == MG_OK) {
        s = db_prepare(c, sql);
        db_bind_text(s, 1, digest);
        db_bind_i64(s, 2, vid);
        db_bind_text(s, 3, kind);
        db_bind_text(s, 4, body);
        rc = db_exec(s, err);
    }
    return store_write_end(st, c, rc, err);
}

enum mg_code store_oci_scan_find(struct store *st, const char *model, const char *digest,
                                 const char *kind, char **body, struct mg_error *err)
{
    static const char sql[] =
        "SELECT r.body FROM oci_scan_refs r JOIN versions v ON v.id = r.version_id JOIN models m "
        "ON m.id = v.model_id WHERE r.digest = ? AND r.kind = ? AND m.name = ? AND "
        "v.status <> 'deleted' LIMIT 1";
    struct db_conn *c = store_read_one(st);
    struct db_stmt *s = db_prepare(c, sql);
    enum mg_code rc;
    bool row;

    *body = NULL;
    db_bind_text(s, 1, digest);
    db_bind_text(s, 2, kind);
    db_bind_text(s, 3, model);
    if ((rc = db_step(s, &row, err)) == MG_OK) {
        if (!row)
            rc = mg_fail(err, MG_ENOTFOUND, NULL, "%s is not known in model '%s'", digest, model);
        else if ((*body = store_col_strdup(s, 0)) == NULL)
            rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
    db_reset(s);
    store_read_end(st, c);
    return rc;
}
