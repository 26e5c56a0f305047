/*
 * promotions.c - promotion records: creation (with its first alias change
 * when no gate waits), reads with approvals and events, lists, and the
 * queries the timer needs.
 */
#include "store_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/util.h"

#define PROMO_COLS                                                                                 \
    "p.id, m.name, p.alias, p.version, p.baseline_version, p.state, p.reason, p.policy, "          \
    "p.gates, p.step_index, p.weight, p.next_step_at, p.rev, p.created_by, p.created_at, "         \
    "p.updated_at"

/* A promotion's approvals (*out NEW). A failing read is an error, never an empty list: a
 * promotion must not look unapproved because the database hiccuped. */
static enum mg_code approvals(struct store_conn *c, const char *id, json_t **out,
                              struct mg_error *err)
{
    static const char sql[] = "SELECT by, decision, comment, at, teams FROM promotion_approvals "
                              "WHERE promotion_id = ? ORDER BY at, by";
    sqlite3_stmt *s;
    json_t *list = json_array();
    enum mg_code rc = MG_OK;
    int r;

    *out = NULL;
    if (list == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    if ((s = store_stmt(c, sql, err)) == NULL) {
        json_decref(list);
        return err->code;
    }
    store_bind_text(s, 1, id);
    while ((r = sqlite3_step(s)) == SQLITE_ROW)
        json_array_append_new(
            list,
            json_pack("{s:o, s:o, s:o, s:o, s:o}", "by", store_col_json_string(s, 0), "decision",
                      store_col_json_string(s, 1), "comment", store_col_json_string(s, 2), "at",
                      store_col_json_string(s, 3), "teams", store_col_json(s, 4)));
    if (r != SQLITE_DONE)
        rc = store_db_error(c, r, err);
    sqlite3_reset(s);
    if (rc == MG_OK)
        *out = list;
    else
        json_decref(list);
    return rc;
}

/* A promotion's events (*out NEW); errors as approvals(). */
static enum mg_code events(struct store_conn *c, const char *id, json_t **out, struct mg_error *err)
{
    static const char sql[] = "SELECT at, type, detail FROM promotion_events "
                              "WHERE promotion_id = ? ORDER BY seq";
    sqlite3_stmt *s;
    json_t *list = json_array();
    enum mg_code rc = MG_OK;
    int r;

    *out = NULL;
    if (list == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    if ((s = store_stmt(c, sql, err)) == NULL) {
        json_decref(list);
        return err->code;
    }
    store_bind_text(s, 1, id);
    while ((r = sqlite3_step(s)) == SQLITE_ROW)
        json_array_append_new(list, json_pack("{s:o, s:o, s:o}", "at", store_col_json_string(s, 0),
                                              "type", store_col_json_string(s, 1), "detail",
                                              store_col_json_string(s, 2)));
    if (r != SQLITE_DONE)
        rc = store_db_error(c, r, err);
    sqlite3_reset(s);
    if (rc == MG_OK)
        *out = list;
    else
        json_decref(list);
    return rc;
}

/* The Promotion object from the current row of a PROMO_COLS statement (*out NEW). */
static enum mg_code promo_row(struct store_conn *c, sqlite3_stmt *s, json_t **out,
                              struct mg_error *err)
{
    const char *id = (const char *)sqlite3_column_text(s, 0);
    json_t *appr = NULL, *ev = NULL, *policy;
    enum mg_code rc;

    *out = NULL;
    if ((rc = approvals(c, id, &appr, err)) != MG_OK)
        return rc;
    if ((rc = events(c, id, &ev, err)) != MG_OK) {
        json_decref(appr);
        return rc;
    }
    policy = store_col_json(s, 7);
    int64_t next = sqlite3_column_int64(s, 11);
    json_t *baseline = sqlite3_column_type(s, 4) == SQLITE_NULL
                           ? json_null()
                           : json_integer(sqlite3_column_int64(s, 4));
    json_t *next_at = json_null(), *p;
    json_t *steps = json_object_get(json_object_get(policy, "rollout"), "steps");

    if (next > 0) {
        char buf[32];
        mg_time_format(next, buf);
        next_at = json_string(buf);
    }
    p = json_pack("{s:s, s:o, s:o, s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o,"
                  " s:{s:O, s:i, s:i, s:o}, s:o, s:I, s:I}",
                  "id", id, "model", store_col_json_string(s, 1), "alias",
                  store_col_json_string(s, 2), "version", (json_int_t)sqlite3_column_int64(s, 3),
                  "baseline_version", baseline, "state", store_col_json_string(s, 5), "reason",
                  store_col_json_string(s, 6), "created_by", store_col_json_string(s, 13),
                  "created_at", store_col_json_string(s, 14), "updated_at",
                  store_col_json_string(s, 15), "policy", policy, "gates", store_col_json(s, 8),
                  "approvals", appr, "events", ev, "rollout", "steps", steps ? steps : json_array(),
                  "step_index", sqlite3_column_int(s, 9), "weight", sqlite3_column_int(s, 10),
                  "next_step_at", next_at, "_unused", json_null(), "_rev",
                  (json_int_t)sqlite3_column_int64(s, 12), "_next_step_at_ms", (json_int_t)next);
    if (p == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    json_object_del(p, "_unused");
    *out = p;
    return MG_OK;
}

static enum mg_code promo_read(struct store_conn *c, const char *id, json_t **out,
                               struct mg_error *err)
{
    static const char sql[] = "SELECT " PROMO_COLS " FROM promotions p "
                              "JOIN models m ON m.id = p.model_id WHERE p.id = ?";
    sqlite3_stmt *s = store_stmt(c, sql, err);
    json_t *p = NULL;
    enum mg_code rc = MG_OK;
    int r;

    if (s == NULL)
        return err->code;
    store_bind_text(s, 1, id);
    r = sqlite3_step(s);
    if (r == SQLITE_ROW) {
        /* promo_row runs nested queries on other statements: copy nothing. */
        rc = promo_row(c, s, &p, err);
    }
    sqlite3_reset(s);
    if (r == SQLITE_DONE)
        return mg_fail(err, MG_ENOTFOUND, NULL, "promotion %s does not exist", id);
    if (r != SQLITE_ROW)
        return store_db_error(c, r, err);
    if (rc != MG_OK)
        return rc;
    *out = p;
    return MG_OK;
}

enum mg_code store_promotion_get(struct store *st, const char *id, json_t **out,
                                 struct mg_error *err)
{
    struct store_conn *c = store_read_begin(st);
    enum mg_code rc = promo_read(c, id, out, err);

    store_read_end(st, c);
    return rc;
}

enum mg_code store_promotion_create(struct store *st, const char *actor, const json_t *rec,
                                    const char *event_type, const char *event_detail,
                                    const struct store_alias_change *a, json_t **out,
                                    struct mg_error *err)
{
    static const char sql[] =
        "INSERT INTO promotions (id, model_id, alias, version, baseline_version, state, reason, "
        "policy, gates, step_index, weight, next_step_at, created_by, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
    static const char sql_ev[] =
        "INSERT INTO promotion_events (promotion_id, at, type, detail) VALUES (?, ?, ?, ?)";
    const char *id = json_string_value(json_object_get(rec, "id"));
    const char *model = json_string_value(json_object_get(rec, "model"));
    const char *alias = json_string_value(json_object_get(rec, "alias"));
    json_t *baseline = json_object_get(rec, "baseline_version"), *p = NULL, *detail;
    char *policy = store_json_text(json_object_get(rec, "policy"));
    char *gates = store_json_text(json_object_get(rec, "gates"));
    struct store_conn *c = store_write_begin(st, err);
    sqlite3_stmt *s;
    int64_t mid;
    char at[32];
    enum mg_code rc;

    if (c == NULL) {
        free(policy);
        free(gates);
        return err->code;
    }
    if (policy == NULL || gates == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    if ((rc = store_model_id(c, model, &mid, err)) != MG_OK)
        goto out;
    if ((s = store_stmt(c, sql, err)) == NULL) {
        rc = err->code;
        goto out;
    }
    store_now(at);
    store_bind_text(s, 1, id);
    sqlite3_bind_int64(s, 2, mid);
    store_bind_text(s, 3, alias);
    sqlite3_bind_int64(s, 4, json_integer_value(json_object_get(rec, "version")));
    if (json_is_integer(baseline))
        sqlite3_bind_int64(s, 5, json_integer_value(baseline));
    store_bind_text(s, 6, json_string_value(json_object_get(rec, "state")));
    store_bind_text(s, 7, json_string_value(json_object_get(rec, "reason")));
    store_bind_text(s, 8, policy);
    store_bind_text(s, 9, gates);
    sqlite3_bind_int64(s, 10, json_integer_value(json_object_get(rec, "step_index")));
    sqlite3_bind_int64(s, 11, json_integer_value(json_object_get(rec, "weight")));
    sqlite3_bind_int64(s, 12, json_integer_value(json_object_get(rec, "next_step_at_ms")));
    store_bind_text(s, 13, actor);
    store_bind_text(s, 14, at);
    store_bind_text(s, 15, at);
    rc = store_exec_stmt(c, s, err);
    if (rc == MG_ECONFLICT) {
        rc = mg_fail(err, MG_EINPROGRESS, NULL,
                     "alias '%s' of model '%s' already has an active promotion; wait for it, "
                     "or abort it",
                     alias, model);
        goto out;
    }
    if (rc != MG_OK)
        goto out;
    if ((s = store_stmt(c, sql_ev, err)) == NULL) {
        rc = err->code;
        goto out;
    }
    store_bind_text(s, 1, id);
    store_bind_text(s, 2, at);
    store_bind_text(s, 3, event_type);
    store_bind_text(s, 4, event_detail);
    if ((rc = store_exec_stmt(c, s, err)) != MG_OK)
        goto out;
    detail = json_pack("{s:s, s:s, s:O, s:s}", "model", model, "alias", alias, "version",
                       json_object_get(rec, "version"), "state",
                       json_string_value(json_object_get(rec, "state")));
    rc = store_audit_append(c, actor, "promotion.create", id, detail, err);
    json_decref(detail);
    if (rc == MG_OK && a)
        rc = store_release_apply_alias(c, actor, a, at, err);
    /* The candidate's smoke test is queued with the promotion, in this transaction: a crash
     * after the commit cannot leave a smoke gate waiting for a test nobody runs. */
    if (rc == MG_OK && json_is_string(json_object_get(rec, "_smoke_gpu"))) {
        json_t *t = NULL;
        bool created;

        rc = store_smoke_enqueue_in(
            c, model, json_integer_value(json_object_get(rec, "version")), "promotion",
            json_string_value(json_object_get(rec, "_smoke_gpu")), &t, &created, err);
        json_decref(t);
    }
    if (rc == MG_OK)
        rc = promo_read(c, id, &p, err);
out:
    free(policy);
    free(gates);
    rc = store_write_end(st, c, rc, err);
    if (rc == MG_OK)
        *out = p;
    else
        json_decref(p);
    return rc;
}

enum mg_code store_promotion_list(struct store *st, const char *state, const char *model,
                                  const char *alias, const struct store_page *page, json_t **out,
                                  struct mg_error *err)
{
    /* Page token: the rowid-free cursor "created_at|id" would need parsing;
     * promotions sort by (created_at, id) and the token is the last id. */
    static const char sql[] =
        "SELECT " PROMO_COLS " FROM promotions p JOIN models m ON m.id = p.model_id "
        "WHERE (?1 IS NULL OR p.state = ?1) AND (?2 IS NULL OR m.name = ?2) "
        "AND (?3 IS NULL OR p.alias = ?3) AND (?4 IS NULL OR (p.created_at, p.id) < "
        "  (SELECT created_at, id FROM promotions WHERE id = ?4)) "
        "ORDER BY p.created_at DESC, p.id DESC LIMIT ?5";
    struct store_conn *c = store_read_begin(st);
    sqlite3_stmt *s;
    json_t *items = json_array(), *next = json_null();
    unsigned n = 0;
    enum mg_code rc = MG_OK;
    int r;

    if ((s = store_stmt(c, sql, err)) == NULL) {
        rc = err->code;
        goto out;
    }
    store_bind_text(s, 1, state);
    store_bind_text(s, 2, model);
    store_bind_text(s, 3, alias);
    store_bind_text(s, 4, page->page_token);
    sqlite3_bind_int64(s, 5, (int64_t)page->limit + 1);
    while ((r = sqlite3_step(s)) == SQLITE_ROW) {
        json_t *p;
        if (n == page->limit) {
            json_decref(next);
            next = json_copy(json_object_get(json_array_get(items, n - 1), "id"));
            break;
        }
        if ((rc = promo_row(c, s, &p, err)) != MG_OK)
            break;
        json_object_del(p, "_rev");
        json_object_del(p, "_next_step_at_ms");
        json_array_append_new(items, p);
        n++;
    }
    if (rc == MG_OK && r != SQLITE_ROW && r != SQLITE_DONE)
        rc = store_db_error(c, r, err);
    sqlite3_reset(s);
    if (rc == MG_OK)
        *out = json_pack("{s:O, s:O}", "items", items, "next_page_token", next);
out:
    json_decref(items);
    json_decref(next);
    store_read_end(st, c);
    return rc;
}

enum mg_code store_promotion_pending(struct store *st, int64_t now_ms, json_t **out,
                                     struct mg_error *err)
{
    static const char sql_due[] = "SELECT id FROM promotions WHERE state = 'rolling_out' AND "
                                  "next_step_at > 0 AND next_step_at <= ? ORDER BY next_step_at";
    static const char sql_next[] = "SELECT min(next_step_at) FROM promotions WHERE "
                                   "state = 'rolling_out' AND next_step_at > ?";
    static const char sql_eval[] = "SELECT id FROM promotions WHERE state = 'evaluating'";
    struct store_conn *c = store_read_begin(st);
    sqlite3_stmt *s;
    json_t *due = json_array(), *eval = json_array();
    int64_t next_at = 0;
    enum mg_code rc = MG_OK;

    if ((s = store_stmt(c, sql_due, err)) == NULL) {
        rc = err->code;
        goto out;
    }
    sqlite3_bind_int64(s, 1, now_ms);
    while (sqlite3_step(s) == SQLITE_ROW)
        json_array_append_new(due, store_col_json_string(s, 0));
    sqlite3_reset(s);
    if ((s = store_stmt(c, sql_next, err)) == NULL) {
        rc = err->code;
        goto out;
    }
    sqlite3_bind_int64(s, 1, now_ms);
    if (sqlite3_step(s) == SQLITE_ROW)
        next_at = sqlite3_column_int64(s, 0);
    sqlite3_reset(s);
    if ((s = store_stmt(c, sql_eval, err)) == NULL) {
        rc = err->code;
        goto out;
    }
    while (sqlite3_step(s) == SQLITE_ROW)
        json_array_append_new(eval, store_col_json_string(s, 0));
    sqlite3_reset(s);
    *out = json_pack("{s:O, s:O, s:I}", "due", due, "evaluating", eval, "next_at_ms",
                     (json_int_t)next_at);
out:
    json_decref(due);
    json_decref(eval);
    store_read_end(st, c);
    return rc;
}
