/*
 * oci.c - versions as OCI artifacts: the documents computed once per version (migration
 * 009, table oci_manifests) and what a digest names among a model's versions.
 */
#include "store_int.h"

#include <stdio.h>
#include <string.h>

#include "../base/util.h"

#define DOCS_COLUMNS                                                                               \
    "o.digest, o.manifest, o.config_digest, o.config, o.referrer_digest, o.referrer, "             \
    "o.bundle_digest"

/* The documents of the current row, from column `first` on (DOCS_COLUMNS), with their
 * version's number. NEW, or NULL without memory. */
static json_t *docs_row(struct db_stmt *s, int first, int64_t version)
{
    static const char *const names[] = {"digest",          "manifest", "config_digest", "config",
                                        "referrer_digest", "referrer", "bundle_digest"};
    json_t *d = json_pack("{s:I}", "version", (json_int_t)version);
    size_t i;

    for (i = 0; d && i < sizeof(names) / sizeof(names[0]); i++) {
        if (json_object_set_new(d, names[i], store_col_json_string(s, first + (int)i)) != 0) {
            json_decref(d);
            return NULL;
        }
    }
    return d;
}

/* A deleted version has no OCI documents to pull: its artifact is gone (docs/contract.md
 * "Lifecycle"). */
static enum mg_code not_deleted(struct db_conn *c, int64_t vid, const char *model, int64_t version,
                                struct mg_error *err)
{
    static const char sql[] = "SELECT 1 FROM versions WHERE id = ? AND status = 'deleted'";
    struct db_stmt *s = db_prepare(c, sql);
    enum mg_code rc;
    bool found;

    db_bind_i64(s, 1, vid);
    if ((rc = store_exists(s, &found, err)) != MG_OK)
        return rc;
    if (found)
        return mg_fail(err, MG_ENOTFOUND, NULL,
                       "version %lld of model '%s' was deleted: its artifact is gone",
                       (long long)version, model);
    return MG_OK;
}

/* The stored documents of version row vid: *out NULL when none. */
static enum mg_code docs_read(struct db_conn *c, int64_t vid, int64_t version, json_t **out,
                              struct mg_error *err)
{
    static const char sql[] = "SELECT " DOCS_COLUMNS " FROM oci_manifests o WHERE o.version_id = ?";
    struct db_stmt *s = db_prepare(c, sql);
    enum mg_code rc;
    bool row;

    *out = NULL;
    db_bind_i64(s, 1, vid);
    if ((rc = db_step(s, &row, err)) != MG_OK || !row)
        return rc;
    *out = docs_row(s, 0, version);
    db_reset(s);
    return *out ? MG_OK : mg_fail(err, MG_ENOMEM, NULL, "out of memory");
}

enum mg_code store_oci_get(struct store *st, const char *model, int64_t version, json_t **out,
                           struct mg_error *err)
{
    struct db_conn *c = store_read_begin(st);
    int64_t vid;
    json_t *d = NULL;
    enum mg_code rc = store_version_id(c, model, version, &vid, err);

    if (rc == MG_OK)
        rc = not_deleted(c, vid, model, version, err);
    if (rc == MG_OK && (rc = docs_read(c, vid, version, &d, err)) == MG_OK)
        *out = d;
    store_read_end(st, c);
    return rc;
}

enum mg_code store_oci_put(struct store *st, const char *model, int64_t version, const json_t *docs,
                           json_t **out, struct mg_error *err)
{
    static const char sql[] =
        "INSERT INTO oci_manifests (version_id, digest, manifest, config_digest, config, "
        "referrer_digest, referrer, bundle_digest, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (version_id) DO NOTHING";
    static const char *const names[] = {"digest",          "manifest", "config_digest", "config",
                                        "referrer_digest", "referrer", "bundle_digest"};
    struct db_conn *c = store_write_begin(st, err);
    struct db_stmt *s;
    int64_t vid;
    json_t *d = NULL;
    char at[32];
    enum mg_code rc;
    size_t i;

    if (c == NULL)
        return err->code;
    if ((rc = store_version_id(c, model, version, &vid, err)) != MG_OK)
        goto out;
    s = db_prepare(c, sql);
    db_bind_i64(s, 1, vid);
    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        db_bind_text(s, (int)i + 2, json_string_value(json_object_get(docs, names[i])));
    store_now(at);
    db_bind_text(s, 9, at);
    if ((rc = db_exec(s, err)) != MG_OK)
        goto out;
    /* Whoever was first, this is what is stored now, and what every later read returns. */
    if ((rc = docs_read(c, vid, version, &d, err)) == MG_OK && d == NULL)
        rc = mg_fail(err, MG_EDB, NULL, "the OCI documents of %s v%lld were not stored", model,
                     (long long)version);
out:
    rc = store_write_end(st, c, rc, err);
    if (rc == MG_OK)
        *out = d;
    else
        json_decref(d);
    return rc;
}

/* A digest among the stored documents of the model's versions. */
static enum mg_code find_docs(struct db_conn *c, int64_t mid, const char *digest, json_t **out,
                              struct mg_error *err)
{
    static const char sql[] =
        "SELECT v.version, CASE WHEN o.digest = ?2 THEN 'manifest' "
        "WHEN o.referrer_digest = ?2 THEN 'referrer' WHEN o.config_digest = ?2 THEN 'config' "
        "ELSE 'bundle' END, " DOCS_COLUMNS " FROM oci_manifests o "
        "JOIN versions v ON v.id = o.version_id WHERE v.model_id = ?1 AND (o.digest = ?2 OR "
        "o.referrer_digest = ?2 OR o.config_digest = ?2 OR o.bundle_digest = ?2) "
        "AND v.status <> 'deleted' ORDER BY v.version LIMIT 1";
    struct db_stmt *s = db_prepare(c, sql);
    enum mg_code rc;
    bool row;

    db_bind_i64(s, 1, mid);
    db_bind_text(s, 2, digest);
    if ((rc = db_step(s, &row, err)) != MG_OK || !row)
        return rc;
    *out = docs_row(s, 2, db_col_i64(s, 0));
    if (*out != NULL)
        json_object_set_new(*out, "kind", json_string(db_col_text(s, 1)));
    db_reset(s);
    return *out ? MG_OK : mg_fail(err, MG_ENOMEM, NULL, "out of memory");
}

/* A digest that is a version's whole artifact. */
static enum mg_code find_artifact(struct db_conn *c, int64_t mid, const char *digest, json_t **out,
                                  struct mg_error *err)
{
    static const char sql[] =
        "SELECT v.version, b.size, b.media_type FROM versions v JOIN blobs b ON "
        "b.digest = v.artifact WHERE v.model_id = ? AND v.artifact = ? AND v.status <> 'deleted' "
        "AND b.state = 'live' ORDER BY v.version LIMIT 1";
    struct db_stmt *s = db_prepare(c, sql);
    enum mg_code rc;
    bool row;

    db_bind_i64(s, 1, mid);
    db_bind_text(s, 2, digest);
    if ((rc = db_step(s, &row, err)) != MG_OK || !row)
        return rc;
    *out = json_pack("{s:s, s:I, s:I, s:o}", "kind", "artifact", "version",
                     (json_int_t)db_col_i64(s, 0), "size", (json_int_t)db_col_i64(s, 1),
                     "media_type", store_col_json_string(s, 2));
    db_reset(s);
    return *out ? MG_OK : mg_fail(err, MG_ENOMEM, NULL, "out of memory");
}

/* A digest that is one file of a version's archive (blob_files.sha256 is bare hex). */
static enum mg_code find_file(struct db_conn *c, int64_t mid, const char *digest, json_t **out,
                              struct mg_error *err)
{
    static const char sql[] = "SELECT v.version, v.artifact, f.path, f.size FROM versions v "
                              "JOIN blob_files f ON f.digest = v.artifact "
                              "WHERE v.model_id = ? AND f.sha256 = ? AND v.status <> 'deleted' "
                              "ORDER BY v.version LIMIT 1";
    struct db_stmt *s = db_prepare(c, sql);
    enum mg_code rc;
    bool row;

    db_bind_i64(s, 1, mid);
    db_bind_text(s, 2, digest + 7);
    if ((rc = db_step(s, &row, err)) != MG_OK || !row)
        return rc;
    *out = json_pack("{s:s, s:I, s:o, s:o, s:I}", "kind", "file", "version",
                     (json_int_t)db_col_i64(s, 0), "artifact", store_col_json_string(s, 1), "path",
                     store_col_json_string(s, 2), "size", (json_int_t)db_col_i64(s, 3));
    db_reset(s);
    return *out ? MG_OK : mg_fail(err, MG_ENOMEM, NULL, "out of memory");
}

enum mg_code store_oci_find(struct store *st, const char *model, const char *digest, json_t **out,
                            struct mg_error *err)
{
    struct db_conn *c = store_read_begin(st);
    int64_t mid;
    json_t *v = NULL;
    enum mg_code rc;

    if (!mg_valid_digest(digest, strlen(digest))) {
        rc = mg_fail(err, MG_EINVAL, "digest", "digests are sha256: followed by 64 lowercase hex");
        goto out;
    }
    if ((rc = store_model_id(c, model, &mid, err)) != MG_OK) {
        if (rc == MG_ENOTFOUND)
            rc = mg_fail(err, MG_ENOTFOUND, "model", "model '%s' does not exist", model);
        goto out;
    }
    if ((rc = find_docs(c, mid, digest, &v, err)) != MG_OK || v != NULL)
        goto out;
    if ((rc = find_artifact(c, mid, digest, &v, err)) != MG_OK || v != NULL)
        goto out;
    if ((rc = find_file(c, mid, digest, &v, err)) != MG_OK || v != NULL)
        goto out;
    /* release attestations as referrers (docs/contract.md "Signed releases") */
    if ((rc = store_oci_find_attestation(c, mid, digest, &v, err)) != MG_OK || v != NULL)
        goto out;
    rc = mg_fail(err, MG_ENOTFOUND, NULL, "model '%s' has nothing with digest %s", model, digest);
out:
    store_read_end(st, c);
    if (rc == MG_OK)
        *out = v;
    else
        json_decref(v);
    return rc;
}
