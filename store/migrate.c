/*
 * migrate.c - copy an embedded installation (its SQLite records, blobs and
 * public signing keys) to the shared backends replicas use: a PostgreSQL
 * database and a blob backend (a shared directory, S3 or an OCI registry).
 *
 * The source stays read-only meanwhile: it is opened like a server opens it,
 * so its directory lock keeps a modelgated off it. Every row is copied with
 * ON CONFLICT DO NOTHING and every blob that is already there (whole, under its
 * digest) is skipped, so a run that stopped half-way is simply run again.
 */
#include "store_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../artifact/sign.h"
#include "../os/file.h"
#include "../base/util.h"

/* Every table, parents before children (foreign keys). schema_migrations,
 * replicas and signing_keys are the destination's own. */
static const char *const tables[] = {
    "tokens",
    "teams",
    "blobs",
    "blob_files",
    "blob_teams",
    "team_quotas",
    "models",
    "retention",
    "versions",
    "version_datasets",
    "version_metrics",
    "datasets",
    "dataset_parents",
    "version_signatures",
    "audit",
    "audit_head",
    "aliases",
    "alias_history",
    "alias_bad",
    "policies",
    "promotions",
    "promotion_approvals",
    "promotion_events",
    "promotion_intervals",
    "gateways",
    "outbox",
    "smoke_tests",
    "ui_sessions",
    "gateway_names",
    "model_epochs",
    "oci_manifests",
    "oci_scan_refs",
    "identity_groups",
    "trusted_publishers",
    "exchange_jti",
    "alias_attestations",
    "attestation_versions",
    "oci_attestation_manifests",
};

/* Identity columns whose sequences must move past the ids copied. */
static const char *const identities[][2] = {
    {"models", "id"}, {"versions", "id"},         {"aliases", "id"},
    {"audit", "seq"}, {"version_metrics", "seq"}, {"promotion_events", "seq"},
};

/* Copy one table; *copied counts rows the destination did not have. The SQL
 * texts live in text[] until both stores are closed (statement caches key on
 * their addresses). */
static enum mg_code copy_table(struct store *src, struct store *dst, const char *table,
                               char **sel_text, char **ins_text, int64_t *rows, int64_t *copied,
                               struct mg_error *err)
{
    struct db_conn *r = store_read_begin(src), *w = NULL;
    struct db_stmt *s, *ins;
    enum mg_code rc;
    bool row;
    int n = 0, i;

    *rows = *copied = 0;
    if (asprintf(sel_text, "SELECT * FROM %s", table) < 0) {
        *sel_text = NULL;
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    s = db_prepare(r, *sel_text);
    if ((w = store_write_begin(dst, err)) == NULL) {
        rc = err->code;
        goto out;
    }
    while ((rc = db_step(s, &row, err)) == MG_OK && row) {
        if (*ins_text == NULL) {
            /* The column list of the source: the destination has every one of them. */
            size_t cap = 64 + strlen(table);
            char *t;

            n = db_col_count(s);
            for (i = 0; i < n; i++)
                cap += strlen(db_col_name(s, i)) + 8;
            if ((t = malloc(cap)) == NULL) {
                rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
                break;
            }
            snprintf(t, cap, "INSERT INTO %s (", table);
            for (i = 0; i < n; i++)
                snprintf(t + strlen(t), cap - strlen(t), "%s%s", i ? ", " : "", db_col_name(s, i));
            snprintf(t + strlen(t), cap - strlen(t), ") VALUES (");
            for (i = 0; i < n; i++)
                snprintf(t + strlen(t), cap - strlen(t), "%s?", i ? ", " : "");
            snprintf(t + strlen(t), cap - strlen(t), ") ON CONFLICT DO NOTHING");
            *ins_text = t;
        }
        ins = db_prepare(w, *ins_text);
        for (i = 0; i < n; i++) {
            switch (db_col_type(s, i)) {
            case DB_INTEGER:
                db_bind_i64(ins, i + 1, db_col_i64(s, i));
                break;
            case DB_FLOAT:
                db_bind_double(ins, i + 1, db_col_double(s, i));
                break;
            case DB_TEXT:
                db_bind_text(ins, i + 1, db_col_text(s, i));
                break;
            case DB_BLOB:
                db_bind_blob(ins, i + 1, db_col_blob(s, i), db_col_bytes(s, i));
                break;
            default:
                db_bind_null(ins, i + 1);
            }
        }
        if ((rc = db_exec(ins, err)) != MG_OK) {
            char why[MG_ERR_MSG_MAX];

            db_reset(s);
            snprintf(why, sizeof(why), "%s", err->message);
            mg_fail(err, rc, NULL, "copying table %s: %s", table, why);
            break;
        }
        (*rows)++;
        *copied += db_changes(ins);
    }
out:
    if (w)
        rc = store_write_end(dst, w, rc, err);
    store_read_end(src, r);
    return rc;
}

/* Move the destination's identity sequences past the ids copied. */
static enum mg_code advance_sequences(struct store *dst, char **texts, struct mg_error *err)
{
    struct db_conn *w = store_write_begin(dst, err);
    enum mg_code rc = MG_OK;
    size_t i;

    if (w == NULL)
        return err->code;
    for (i = 0; rc == MG_OK && i < sizeof(identities) / sizeof(identities[0]); i++) {
        if (asprintf(&texts[i],
                     "SELECT setval(pg_get_serial_sequence('%s', '%s'), "
                     "coalesce((SELECT max(%s) FROM %s), 0) + 1, false)",
                     identities[i][0], identities[i][1], identities[i][1], identities[i][0]) < 0) {
            texts[i] = NULL;
            rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
            break;
        }
        rc = db_exec(db_prepare(w, texts[i]), err);
    }
    return store_write_end(dst, w, rc, err);
}

/* Copy a blob unless the destination holds it already (committed blobs are whole:
 * a backend shows a blob under its digest only after checking it); verified by its
 * digest on the way. */
static enum mg_code copy_blob(struct store *src, struct store *dst, const char *digest,
                              uint64_t size, bool *copied, struct mg_error *err)
{
    uint64_t have = 0;
    struct mg_error e;

    *copied = false;
    if (blob_stat(dst->blobs, digest, &have, &e) == MG_OK && have == size)
        return MG_OK; /* copied by an earlier run, or the same backend */
    if (blob_copy(src->blobs, dst->blobs, digest, size, err) != MG_OK)
        return err->code;
    *copied = true;
    return MG_OK;
}

static enum mg_code copy_blobs(struct store *src, struct store *dst, int64_t *count,
                               int64_t *copied, struct mg_error *err)
{
    static const char sql[] = "SELECT digest, size FROM blobs WHERE state = 'live' ORDER BY digest";
    struct db_conn *r = store_read_begin(src);
    struct db_stmt *s = db_prepare(r, sql);
    enum mg_code rc;
    bool row, did;

    *count = *copied = 0;
    while ((rc = db_step(s, &row, err)) == MG_OK && row) {
        if ((rc = copy_blob(src, dst, db_col_text(s, 0), (uint64_t)db_col_i64(s, 1), &did, err)) !=
            MG_OK) {
            db_reset(s);
            break;
        }
        (*count)++;
        *copied += did;
    }
    store_read_end(src, r);
    return rc;
}

enum mg_code store_migrate(const struct store_migrate_options *o, json_t **summary,
                           struct mg_error *err)
{
    struct store_options so = {0}, dopt = {0};
    struct store *src = NULL, *dst = NULL;
    char scratch[PATH_MAX], *sel[sizeof(tables) / sizeof(tables[0])] = {0};
    char *ins[sizeof(tables) / sizeof(tables[0])] = {0};
    char *seq[sizeof(identities) / sizeof(identities[0])] = {0};
    json_t *counts = json_object(), *audit = NULL;
    int64_t rows, copied, blobs = 0, blobs_copied = 0;
    enum mg_code rc;
    size_t i;

    *summary = NULL;
    so.data_dir = o->data_dir;
    so.read_conns = 1;
    store_archive_limits_default(&so.archive);
    if ((rc = store_open(&so, &src, err)) != MG_OK)
        goto out;
    /* The destination's own process state (its lock, and its blob directory unless
     * one is given) lives in a scratch directory beside the source's. */
    snprintf(scratch, sizeof(scratch), "%s/migrate-to", o->data_dir);
    dopt.data_dir = scratch;
    dopt.database = o->to_database;
    dopt.blobs = o->to_blobs;
    dopt.blobs_credentials = o->to_blobs_credentials;
    dopt.read_conns = 1;
    dopt.archive = so.archive;
    if ((rc = store_open(&dopt, &dst, err)) != MG_OK)
        goto out;
    for (i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
        if ((rc = copy_table(src, dst, tables[i], &sel[i], &ins[i], &rows, &copied, err)) != MG_OK)
            goto out;
        json_object_set_new(
            counts, tables[i],
            json_pack("{s:I, s:I}", "rows", (json_int_t)rows, "copied", (json_int_t)copied));
    }
    if (db_dialect(dst->writer) == DB_POSTGRES && (rc = advance_sequences(dst, seq, err)) != MG_OK)
        goto out;
    for (i = 0; o->keys && i < o->keys->n; i++) {
        const struct sign_key *k = &o->keys->keys[i];

        if ((rc = store_signing_key_publish(dst, k->keyid, k->hint, k->public_pem, err)) != MG_OK)
            goto out;
    }
    if (o->to_blobs && (rc = copy_blobs(src, dst, &blobs, &blobs_copied, err)) != MG_OK)
        goto out;
    if ((rc = store_audit_verify(dst, &audit, err)) != MG_OK)
        goto out;
    if (!json_is_true(json_object_get(audit, "ok"))) {
        rc = mg_fail(err, MG_EDB, NULL,
                     "the audit chain does not verify in the destination (first bad entry %lld)",
                     (long long)json_integer_value(json_object_get(audit, "first_bad_seq")));
        goto out;
    }
    *summary = json_pack("{s:O, s:{s:I, s:I}, s:O, s:I}", "tables", counts, "blobs", "count",
                         (json_int_t)blobs, "copied", (json_int_t)blobs_copied, "audit", audit,
                         "public_keys", (json_int_t)(o->keys ? o->keys->n : 0));
    if (*summary == NULL)
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
out:
    store_close(&dst);
    store_close(&src);
    for (i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
        free(sel[i]);
        free(ins[i]);
    }
    for (i = 0; i < sizeof(identities) / sizeof(identities[0]); i++)
        free(seq[i]);
    json_decref(counts);
    json_decref(audit);
    return rc;
}
