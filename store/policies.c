/*
 * policies.c - the policy of each (model, alias): an alias with one is
 * protected and moves only through promotions.
 */
#include "store_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/util.h"

/* Is the alias protected by a policy? A database error is an error, never
 * "unprotected": that answer would let a direct write skip the gates. */
enum mg_code store_policy_exists(struct db_conn *c, int64_t model_id, const char *alias, bool *yes,
                                 struct mg_error *err)
{
    static const char sql[] = "SELECT 1 FROM policies WHERE model_id = ? AND alias = ?";
    struct db_stmt *s;
    enum mg_code rc;
    bool found;

    /* Protected until the database says otherwise, even on a path that forgets rc. */
    *yes = true;
    s = db_prepare(c, sql);
    db_bind_i64(s, 1, model_id);
    db_bind_text(s, 2, alias);
    if ((rc = store_exists(s, &found, err)) != MG_OK)
        return rc;
    *yes = found;
    return MG_OK;
}

/* ---- policies --------------------------------------------------------- */

enum mg_code store_policy_put(struct store *st, const char *actor, const char *model,
                              const char *alias, const json_t *policy, json_t **out,
                              struct mg_error *err)
{
    static const char sql[] =
        "INSERT INTO policies (model_id, alias, policy, updated_at, updated_by) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (model_id, alias) DO UPDATE SET "
        "policy = excluded.policy, updated_at = excluded.updated_at, "
        "updated_by = excluded.updated_by";
    struct db_conn *c = store_write_begin(st, err);
    struct db_stmt *s;
    char at[32], *text = store_json_text(policy), target[160];
    int64_t mid;
    enum mg_code rc;

    if (c == NULL) {
        free(text);
        return err->code;
    }
    if (text == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    if ((rc = store_model_id(c, model, &mid, err)) != MG_OK)
        goto out;
    s = db_prepare(c, sql);
    store_now(at);
    db_bind_i64(s, 1, mid);
    db_bind_text(s, 2, alias);
    db_bind_text(s, 3, text);
    db_bind_text(s, 4, at);
    db_bind_text(s, 5, actor);
    if ((rc = db_exec(s, err)) != MG_OK)
        goto out;
    snprintf(target, sizeof(target), "%s/%s", model, alias);
    rc = store_audit_append(c, actor, "policy.put", target, model, policy, err);
out:
    free(text);
    rc = store_write_end(st, c, rc, err);
    if (rc == MG_OK)
        *out = json_deep_copy(policy);
    return rc;
}

enum mg_code store_policy_get(struct store *st, const char *model, const char *alias, json_t **out,
                              struct mg_error *err)
{
    static const char sql[] = "SELECT policy FROM policies WHERE model_id = ? AND alias = ?";
    struct db_conn *c = store_read_begin(st);
    struct db_stmt *s;
    int64_t mid;
    enum mg_code rc;
    bool row;

    if ((rc = store_model_id(c, model, &mid, err)) != MG_OK)
        goto out;
    s = db_prepare(c, sql);
    db_bind_i64(s, 1, mid);
    db_bind_text(s, 2, alias);
    if ((rc = db_step(s, &row, err)) == MG_OK && row) {
        *out = store_col_json(s, 0);
        db_reset(s);
    } else if (rc == MG_OK) {
        rc = mg_fail(err, MG_ENOTFOUND, NULL, "alias '%s' of model '%s' has no policy", alias,
                     model);
    }
out:
    store_read_end(st, c);
    return rc;
}

enum mg_code store_policy_delete(struct store *st, const char *actor, const char *model,
                                 const char *alias, struct mg_error *err)
{
    static const char sql[] = "DELETE FROM policies WHERE model_id = ? AND alias = ?";
    struct db_conn *c = store_write_begin(st, err);
    struct db_stmt *s;
    char target[160];
    int64_t mid;
    enum mg_code rc;

    if (c == NULL)
        return err->code;
    if ((rc = store_model_id(c, model, &mid, err)) != MG_OK)
        goto out;
    s = db_prepare(c, sql);
    db_bind_i64(s, 1, mid);
    db_bind_text(s, 2, alias);
    if ((rc = db_exec(s, err)) != MG_OK)
        goto out;
    if (db_changes(s) == 0) {
        rc = mg_fail(err, MG_ENOTFOUND, NULL, "alias '%s' of model '%s' has no policy", alias,
                     model);
        goto out;
    }
    snprintf(target, sizeof(target), "%s/%s", model, alias);
    rc = store_audit_append(c, actor, "policy.delete", target, model, NULL, err);
out:
    return store_write_end(st, c, rc, err);
}
