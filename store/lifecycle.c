/*
 * lifecycle.c - version status (ready, archived, deleted), retention rules,
 * usage and storage figures (docs/contract.md "Lifecycle").
 *
 * Whether a version may be archived or deleted is decided above the store
 * (gates/lifecycle.c, on facts read here in one snapshot); the change commits
 * only if every alias of the model is still at the generation the decision
 * saw, so nothing routed, last-known-good or promoted meanwhile is touched.
 */
#include "store_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/util.h"

/* ---- facts ------------------------------------------------------------------ */

static enum mg_code facts_versions(struct db_conn *c, int64_t mid, json_t *out,
                                   struct mg_error *err)
{
    static const char sql[] = "SELECT version, status, created_at FROM versions "
                              "WHERE model_id = ? ORDER BY version DESC";
    struct db_stmt *s = db_prepare(c, sql);
    json_t *arr = json_array();
    enum mg_code rc;
    bool row;

    db_bind_i64(s, 1, mid);
    while ((rc = db_step(s, &row, err)) == MG_OK && row)
        json_array_append_new(
            arr, json_pack("{s:I, s:o, s:o}", "version", (json_int_t)db_col_i64(s, 0), "status",
                           store_col_json_string(s, 1), "created_at", store_col_json_string(s, 2)));
    json_object_set_new(out, "versions", arr);
    return rc;
}

static enum mg_code facts_promotions(struct db_conn *c, int64_t mid, json_t *out,
                                     struct mg_error *err)
{
    static const char sql[] = "SELECT id, alias, version FROM promotions WHERE model_id = ? "
                              "AND state IN ('evaluating', 'awaiting_approval', 'rolling_out')";
    struct db_stmt *s = db_prepare(c, sql);
    json_t *arr = json_array();
    enum mg_code rc;
    bool row;

    db_bind_i64(s, 1, mid);
    while ((rc = db_step(s, &row, err)) == MG_OK && row)
        json_array_append_new(arr, json_pack("{s:o, s:o, s:I}", "id", store_col_json_string(s, 0),
                                             "alias", store_col_json_string(s, 1), "version",
                                             (json_int_t)db_col_i64(s, 2)));
    json_object_set_new(out, "promotions", arr);
    return rc;
}

static enum mg_code facts_aliases(struct db_conn *c, const char *model, int64_t mid, json_t *out,
                                  struct mg_error *err)
{
    static const char sql[] = "SELECT name FROM aliases WHERE model_id = ? ORDER BY name";
    struct db_stmt *s = db_prepare(c, sql);
    json_t *names = json_array(), *arr = json_array(), *n;
    enum mg_code rc;
    size_t i;
    bool row;

    db_bind_i64(s, 1, mid);
    while ((rc = db_step(s, &row, err)) == MG_OK && row)
        json_array_append_new(names, store_col_json_string(s, 0));
    json_array_foreach(names, i, n)
    {
        json_t *f = NULL;

        if (rc != MG_OK)
            break;
        if ((rc = store_alias_facts_in(c, model, json_string_value(n), &f, err)) == MG_OK) {
            json_object_set(f, "alias", n);
            json_array_append_new(arr, f);
        }
    }
    json_decref(names);
    json_object_set_new(out, "aliases", arr);
    return rc;
}

enum mg_code store_lifecycle_facts(struct store *st, const char *model, json_t **out,
                                   struct mg_error *err)
{
    struct db_conn *c = store_read_begin(st);
    json_t *f = json_object();
    int64_t mid;
    enum mg_code rc;

    if ((rc = store_model_id(c, model, &mid, err)) == MG_OK &&
        (rc = facts_versions(c, mid, f, err)) == MG_OK &&
        (rc = facts_promotions(c, mid, f, err)) == MG_OK)
        rc = facts_aliases(c, model, mid, f, err);
    store_read_end(st, c);
    if (rc != MG_OK) {
        json_decref(f);
        return rc;
    }
    *out = f;
    return MG_OK;
}

/* ---- status changes ------------------------------------------------------- */

/* Every alias of the model (deleted ones too) is still at the generation in `want`. */
static enum mg_code generations_hold(struct db_conn *c, int64_t mid, const json_t *want,
                                     struct mg_error *err)
{
    static const char sql[] = "SELECT name, generation FROM aliases WHERE model_id = ?";
    struct db_stmt *s = db_prepare(c, sql);
    size_t seen = 0;
    enum mg_code rc;
    bool row, same = true;

    db_bind_i64(s, 1, mid);
    while ((rc = db_step(s, &row, err)) == MG_OK && row) {
        json_t *g = json_object_get(want, db_col_text(s, 0));

        seen++;
        if (!json_is_integer(g) || json_integer_value(g) != db_col_i64(s, 1))
            same = false;
    }
    if (rc != MG_OK)
        return rc;
    if (!same || seen != json_object_size(want))
        return mg_fail(err, MG_ESTALE, NULL,
                       "an alias of the model changed meanwhile; read it and try again");
    return MG_OK;
}

/* No active promotion has version as its candidate (a promotion created after the facts
 * were read moves no alias generation). */
static enum mg_code not_promoted(struct db_conn *c, int64_t mid, int64_t version,
                                 struct mg_error *err)
{
    static const char sql[] = "SELECT 1 FROM promotions WHERE model_id = ? AND version = ? AND "
                              "state IN ('evaluating', 'awaiting_approval', 'rolling_out')";
    struct db_stmt *s = db_prepare(c, sql);
    enum mg_code rc;
    bool found;

    db_bind_i64(s, 1, mid);
    db_bind_i64(s, 2, version);
    if ((rc = store_exists(s, &found, err)) != MG_OK)
        return rc;
    if (found)
        return mg_fail(err, MG_ESTALE, NULL,
                       "a promotion of version %lld began meanwhile; read it and try again",
                       (long long)version);
    return MG_OK;
}

static enum mg_code set_one(struct db_conn *c, int64_t mid, int64_t version, const char *status,
                            const char *actor, const char *reason, const char *at,
                            struct mg_error *err)
{
    static const char sql_archive[] =
        "UPDATE versions SET status = 'archived', archived_at = ?, archived_by = ? "
        "WHERE model_id = ? AND version = ? AND status = 'ready'";
    static const char sql_unarchive[] =
        "UPDATE versions SET status = 'ready', archived_at = NULL, archived_by = NULL "
        "WHERE model_id = ? AND version = ? AND status = 'archived'";
    static const char sql_delete[] =
        "UPDATE versions SET status = 'deleted', deleted_at = ?, deleted_by = ?, "
        "deletion_reason = ?3 WHERE model_id = ?4 AND version = ?5 AND status <> 'deleted'";
    static const char sql_release[] =
        "UPDATE blobs SET released = 1 WHERE digest = "
        "(SELECT artifact FROM versions WHERE model_id = ?1 AND version = ?2) "
        "AND NOT EXISTS (SELECT 1 FROM versions v WHERE v.artifact = blobs.digest "
        "AND v.status <> 'deleted')";
    struct db_stmt *s;
    enum mg_code rc;

    if (strcmp(status, "ready") == 0) {
        s = db_prepare(c, sql_unarchive);
        db_bind_i64(s, 1, mid);
        db_bind_i64(s, 2, version);
    } else if (strcmp(status, "archived") == 0) {
        s = db_prepare(c, sql_archive);
        db_bind_text(s, 1, at);
        db_bind_text(s, 2, actor);
        db_bind_i64(s, 3, mid);
        db_bind_i64(s, 4, version);
    } else {
        s = db_prepare(c, sql_delete);
        db_bind_text(s, 1, at);
        db_bind_text(s, 2, actor);
        db_bind_text(s, 3, reason);
        db_bind_i64(s, 4, mid);
        db_bind_i64(s, 5, version);
    }
    if ((rc = db_exec(s, err)) != MG_OK)
        return rc;
    if (db_changes(s) != 1)
        return mg_fail(err, MG_ESTALE, NULL,
                       "version %lld changed status meanwhile; read it and try again",
                       (long long)version);
    if (strcmp(status, "deleted") == 0) {
        /* The last live version citing the artifact went: its bytes are released (gone to
         * all but admins, and cited again only once uploaded again). */
        s = db_prepare(c, sql_release);
        db_bind_i64(s, 1, mid);
        db_bind_i64(s, 2, version);
        rc = db_exec(s, err);
    }
    return rc;
}

enum mg_code store_version_set_status(struct store *st, const char *actor,
                                      const struct store_status_change *ch, struct mg_error *err)
{
    struct db_conn *c = store_write_begin(st, err);
    json_t *detail = NULL, *list = json_array();
    int64_t mid;
    char at[32], target[160];
    size_t i;
    enum mg_code rc;

    if (c == NULL) {
        json_decref(list);
        return err->code;
    }
    store_now(at);
    if ((rc = store_model_id(c, ch->model, &mid, err)) != MG_OK ||
        (rc = generations_hold(c, mid, ch->generations, err)) != MG_OK)
        goto out;
    for (i = 0; i < ch->n; i++) {
        if (strcmp(ch->status, "ready") != 0 &&
            (rc = not_promoted(c, mid, ch->versions[i], err)) != MG_OK)
            goto out;
        if ((rc = set_one(c, mid, ch->versions[i], ch->status, actor, ch->reason, at, err)) !=
            MG_OK)
            goto out;
        json_array_append_new(list, json_integer(ch->versions[i]));
    }
    if (ch->n == 1 && ch->audit_detail == NULL) {
        snprintf(target, sizeof(target), "%s/v%lld", ch->model, (long long)ch->versions[0]);
        detail = json_pack("{s:s, s:s?}", "status", ch->status, "reason", ch->reason);
    } else {
        snprintf(target, sizeof(target), "%s", ch->model);
        detail = ch->audit_detail ? json_deep_copy(ch->audit_detail) : json_object();
        json_object_set_new(detail, "status", json_string(ch->status));
        json_object_set(detail, "versions", list);
    }
    if (detail == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    rc = store_audit_append(c, actor, ch->action, target, ch->model, detail, err);
out:
    json_decref(detail);
    json_decref(list);
    return store_write_end(st, c, rc, err);
}

/* ---- retention ---------------------------------------------------------------- */

enum mg_code store_retention_put(struct store *st, const char *actor, const char *model,
                                 const json_t *rule, struct mg_error *err)
{
    static const char sql[] =
        "INSERT INTO retention (model_id, rule, updated_at, updated_by) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (model_id) DO UPDATE SET rule = excluded.rule, "
        "updated_at = excluded.updated_at, updated_by = excluded.updated_by";
    struct db_conn *c = store_write_begin(st, err);
    struct db_stmt *s;
    char at[32], *text = NULL;
    int64_t mid;
    enum mg_code rc;

    if (c == NULL)
        return err->code;
    if ((rc = store_model_id(c, model, &mid, err)) != MG_OK)
        goto out;
    if ((text = store_json_text(rule)) == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    store_now(at);
    s = db_prepare(c, sql);
    db_bind_i64(s, 1, mid);
    db_bind_text(s, 2, text);
    db_bind_text(s, 3, at);
    db_bind_text(s, 4, actor);
    if ((rc = db_exec(s, err)) == MG_OK)
        rc = store_audit_append(c, actor, "retention.update", model, STORE_NO_MODEL, rule, err);
out:
    free(text);
    return store_write_end(st, c, rc, err);
}

enum mg_code store_retention_get(struct store *st, const char *model, json_t **out,
                                 struct mg_error *err)
{
    static const char sql[] = "SELECT rule FROM retention WHERE model_id = ?";
    struct db_conn *c = store_read_begin(st);
    struct db_stmt *s;
    int64_t mid;
    enum mg_code rc;
    bool row;

    if ((rc = store_model_id(c, model, &mid, err)) != MG_OK)
        goto out;
    s = db_prepare(c, sql);
    db_bind_i64(s, 1, mid);
    if ((rc = db_step(s, &row, err)) != MG_OK)
        goto out;
    *out = row ? store_col_json(s, 0) : json_null();
    db_reset(s);
out:
    store_read_end(st, c);
    return rc;
}

enum mg_code store_retention_claim(struct store *st, int64_t leader_epoch, int64_t now_ms,
                                   int64_t interval_ms, json_t **models, struct mg_error *err)
{
    static const char sql_due[] = "SELECT m.name, r.model_id FROM retention r "
                                  "JOIN models m ON m.id = r.model_id "
                                  "WHERE r.last_run_ms <= ? ORDER BY r.last_run_ms LIMIT 100";
    static const char sql_claim[] =
        "UPDATE retention SET last_run_ms = ? WHERE model_id = ? AND last_run_ms <= ?";
    struct db_conn *c = store_write_begin(st, err);
    json_t *due = json_array(), *claimed = json_array(), *d;
    struct db_stmt *s = NULL;
    size_t i;
    enum mg_code rc;
    bool row;

    if (c == NULL) {
        json_decref(due);
        json_decref(claimed);
        return err->code;
    }
    if ((rc = store_leader_holds(c, st, leader_epoch, err)) == MG_OK) {
        s = db_prepare(c, sql_due);
        db_bind_i64(s, 1, now_ms - interval_ms);
    }
    while (rc == MG_OK && (rc = db_step(s, &row, err)) == MG_OK && row)
        json_array_append_new(
            due, json_pack("[o, I]", store_col_json_string(s, 0), (json_int_t)db_col_i64(s, 1)));
    json_array_foreach(due, i, d)
    {
        if (rc != MG_OK)
            break;
        s = db_prepare(c, sql_claim);
        db_bind_i64(s, 1, now_ms);
        db_bind_i64(s, 2, json_integer_value(json_array_get(d, 1)));
        db_bind_i64(s, 3, now_ms - interval_ms);
        if ((rc = db_exec(s, err)) == MG_OK && db_changes(s) == 1)
            json_array_append(claimed, json_array_get(d, 0));
    }
    json_decref(due);
    rc = store_write_end(st, c, rc, err);
    if (rc != MG_OK) {
        json_decref(claimed);
        return rc;
    }
    *models = claimed;
    return MG_OK;
}

/* ---- usage ---------------------------------------------------------------------- */

/* Sum of the live blobs' sizes that the model's versions (not deleted) reference;
 * with `unique`, only those no other model's versions reference. */
static enum mg_code usage_bytes(struct db_conn *c, int64_t mid, bool unique, int64_t *out,
                                struct mg_error *err)
{
    static const char sql[] =
        "SELECT coalesce(sum(b.size), 0) FROM blobs b WHERE b.state = 'live' AND b.digest IN "
        "(SELECT artifact FROM versions WHERE model_id = ?1 AND status <> 'deleted') "
        "AND (?2 = 0 OR NOT EXISTS (SELECT 1 FROM versions o WHERE o.artifact = b.digest "
        "AND o.model_id <> ?1 AND o.status <> 'deleted'))";
    struct db_stmt *s = db_prepare(c, sql);
    enum mg_code rc;
    bool row;

    db_bind_i64(s, 1, mid);
    db_bind_i64(s, 2, unique);
    if ((rc = db_step(s, &row, err)) == MG_OK && row)
        *out = db_col_i64(s, 0);
    db_reset(s);
    return rc;
}

enum mg_code store_model_usage(struct store *st, const char *model, json_t **out,
                               struct mg_error *err)
{
    static const char sql[] = "SELECT status, count(*) FROM versions WHERE model_id = ? "
                              "GROUP BY status";
    struct db_conn *c = store_read_begin(st);
    json_t *counts = json_pack("{s:i, s:i, s:i}", "ready", 0, "archived", 0, "deleted", 0);
    struct db_stmt *s;
    int64_t mid, bytes = 0, unique = 0;
    enum mg_code rc;
    bool row;

    if ((rc = store_model_id(c, model, &mid, err)) != MG_OK)
        goto out;
    s = db_prepare(c, sql);
    db_bind_i64(s, 1, mid);
    while ((rc = db_step(s, &row, err)) == MG_OK && row)
        json_object_set_new(counts, db_col_text(s, 0), json_integer(db_col_i64(s, 1)));
    if (rc != MG_OK || (rc = usage_bytes(c, mid, false, &bytes, err)) != MG_OK ||
        (rc = usage_bytes(c, mid, true, &unique, err)) != MG_OK)
        goto out;
    *out = json_pack("{s:O, s:I, s:I}", "versions", counts, "bytes", (json_int_t)bytes,
                     "bytes_unique", (json_int_t)unique);
    if (*out == NULL)
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
out:
    json_decref(counts);
    store_read_end(st, c);
    return rc;
}

enum mg_code store_storage_bytes(struct store *st, int64_t *bytes, int64_t *blobs,
                                 struct mg_error *err)
{
    static const char sql[] =
        "SELECT coalesce(sum(size), 0), count(*) FROM blobs WHERE state = 'live'";
    struct db_conn *c = store_read_one(st);
    struct db_stmt *s = db_prepare(c, sql);
    enum mg_code rc;
    bool row;

    if ((rc = db_step(s, &row, err)) == MG_OK && row) {
        *bytes = db_col_i64(s, 0);
        *blobs = db_col_i64(s, 1);
    }
    db_reset(s);
    store_read_end(st, c);
    return rc;
}

enum mg_code store_versions_unavailable(struct store *st, const char *model, json_t **out,
                                        struct mg_error *err)
{
    static const char sql[] = "SELECT version, status FROM versions WHERE model_id = ? AND "
                              "status <> 'ready'";
    struct db_conn *c = store_read_begin(st);
    json_t *m = json_object();
    struct db_stmt *s;
    int64_t mid;
    enum mg_code rc;
    bool row;

    if ((rc = store_model_id(c, model, &mid, err)) == MG_OK) {
        s = db_prepare(c, sql);
        db_bind_i64(s, 1, mid);
        while ((rc = db_step(s, &row, err)) == MG_OK && row) {
            char key[24];

            snprintf(key, sizeof(key), "%lld", (long long)db_col_i64(s, 0));
            json_object_set_new(m, key, store_col_json_string(s, 1));
        }
    }
    store_read_end(st, c);
    if (rc != MG_OK) {
        json_decref(m);
        return rc;
    }
    *out = m;
    return MG_OK;
}
