/*
 * promotions.c - promotion records: creation (with its first alias change
 * when no gate waits), reads with approvals and events, lists, and the
 * queries the timer needs.
 */
#include "store_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/util.h"

#define PROMO_COLS                                                                                 \
    "p.id, m.name, p.alias, p.version, p.baseline_version, p.state, p.reason, p.policy, "          \
    "p.gates, p.step_index, p.weight, p.next_step_at, p.rev, p.created_by, p.created_at, "         \
    "p.updated_at, p.phase, p.creator_issuer, p.creator_subject"

/* A promotion's approvals (*out NEW). A failing read is an error, never an empty list: a
 * promotion must not look unapproved because the database hiccuped. */
static enum mg_code approvals(struct db_conn *c, const char *id, json_t **out, struct mg_error *err)
{
    static const char sql[] = "SELECT by, decision, comment, at, teams, issuer, subject "
                              "FROM promotion_approvals WHERE promotion_id = ? ORDER BY at, by";
    struct db_stmt *s;
    json_t *list = json_array();
    enum mg_code rc = MG_OK;
    bool row;

    *out = NULL;
    if (list == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    s = db_prepare(c, sql);
    db_bind_text(s, 1, id);
    while ((rc = db_step(s, &row, err)) == MG_OK && row) {
        json_t *a =
            json_pack("{s:o, s:o, s:o, s:o, s:o}", "by", store_col_json_string(s, 0), "decision",
                      store_col_json_string(s, 1), "comment", store_col_json_string(s, 2), "at",
                      store_col_json_string(s, 3), "teams", store_col_json(s, 4));
        /* the decider as a person (docs/contract.md "Identity"), when the credential was one's */
        if (a && !db_col_null(s, 5))
            json_object_set_new(a, "identity",
                                json_pack("{s:o, s:o}", "issuer", store_col_json_string(s, 5),
                                          "subject", store_col_json_string(s, 6)));
        json_array_append_new(list, a);
    }
    db_reset(s);
    if (rc == MG_OK)
        *out = list;
    else
        json_decref(list);
    return rc;
}

/* A promotion's events (*out NEW); errors as approvals(). */
static enum mg_code events(struct db_conn *c, const char *id, json_t **out, struct mg_error *err)
{
    static const char sql[] = "SELECT at, type, detail, actor FROM promotion_events "
                              "WHERE promotion_id = ? ORDER BY seq";
    struct db_stmt *s;
    json_t *list = json_array();
    enum mg_code rc = MG_OK;
    bool row;

    *out = NULL;
    if (list == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    s = db_prepare(c, sql);
    db_bind_text(s, 1, id);
    while ((rc = db_step(s, &row, err)) == MG_OK && row) {
        json_t *e = json_pack("{s:o, s:o, s:o}", "at", store_col_json_string(s, 0), "type",
                              store_col_json_string(s, 1), "detail", store_col_json_string(s, 2));

        /* Events written before migration 022 do not know who made them. */
        if (e != NULL && !db_col_null(s, 3))
            json_object_set_new(e, "by", store_col_json_string(s, 3));
        json_array_append_new(list, e);
    }
    db_reset(s);
    if (rc == MG_OK)
        *out = list;
    else
        json_decref(list);
    return rc;
}

/* The Promotion object from the current row of a PROMO_COLS statement (*out NEW). */
static enum mg_code promo_row(struct db_conn *c, struct db_stmt *s, json_t **out,
                              struct mg_error *err)
{
    const char *id = db_col_text(s, 0);
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
    int64_t next = db_col_i64(s, 11);
    json_t *baseline = db_col_null(s, 4) ? json_null() : json_integer(db_col_i64(s, 4));
    json_t *next_at = json_null(), *p;
    json_t *steps = json_object_get(json_object_get(policy, "rollout"), "steps");

    if (next > 0) {
        char buf[32];
        mg_time_format(next, buf);
        next_at = json_string(buf);
    }
    p = json_pack(
        "{s:s, s:o, s:o, s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o,"
        " s:{s:o, s:i, s:i, s:o, s:o}, s:o, s:I, s:I}",
        "id", id, "model", store_col_json_string(s, 1), "alias", store_col_json_string(s, 2),
        "version", (json_int_t)db_col_i64(s, 3), "baseline_version", baseline, "state",
        store_col_json_string(s, 5), "reason", store_col_json_string(s, 6), "created_by",
        store_col_json_string(s, 13), "created_at", store_col_json_string(s, 14), "updated_at",
        store_col_json_string(s, 15), "policy", policy, "gates", store_col_json(s, 8), "approvals",
        appr, "events", ev, "rollout", "steps", steps ? json_incref(steps) : json_array(),
        "step_index", (int)db_col_i64(s, 9), "weight", (int)db_col_i64(s, 10), "next_step_at",
        next_at, "phase", store_col_json_string(s, 16), "_unused", json_null(), "_rev",
        (json_int_t)db_col_i64(s, 12), "_next_step_at_ms", (json_int_t)next);
    if (p == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    json_object_del(p, "_unused");
    /* the creator as a person (docs/contract.md "Identity"), for separation of duties; internal */
    if (!db_col_null(s, 17) &&
        json_object_set_new(p, "_creator",
                            json_pack("{s:o, s:o}", "issuer", store_col_json_string(s, 17),
                                      "subject", store_col_json_string(s, 18))) != 0) {
        json_decref(p);
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
    *out = p;
    return MG_OK;
}

static enum mg_code promo_read(struct db_conn *c, const char *id, json_t **out,
                               struct mg_error *err)
{
    static const char sql[] = "SELECT " PROMO_COLS " FROM promotions p "
                              "JOIN models m ON m.id = p.model_id WHERE p.id = ?";
    struct db_stmt *s = db_prepare(c, sql);
    json_t *p = NULL;
    enum mg_code rc = MG_OK;
    bool row;

    db_bind_text(s, 1, id);
    if ((rc = db_step(s, &row, err)) != MG_OK)
        return rc;
    if (!row)
        return mg_fail(err, MG_ENOTFOUND, NULL, "promotion %s does not exist", id);
    /* promo_row runs nested queries on other statements: copy nothing. */
    rc = promo_row(c, s, &p, err);
    db_reset(s);
    if (rc != MG_OK)
        return rc;
    *out = p;
    return MG_OK;
}

enum mg_code store_promotion_get(struct store *st, const char *id, json_t **out,
                                 struct mg_error *err)
{
    struct db_conn *c = store_read_begin(st);
    enum mg_code rc = promo_read(c, id, out, err);

    store_read_end(st, c);
    return rc;
}

enum mg_code store_promotion_create(struct store *st, const char *actor,
                                    const struct mg_promotion_new *rec, const char *event_type,
                                    const char *event_detail, const struct store_alias_change *a,
                                    json_t **out, struct mg_error *err)
{
    static const char sql[] =
        "INSERT INTO promotions (id, model_id, alias, version, baseline_version, state, reason, "
        "policy, gates, step_index, weight, next_step_at, created_by, created_at, updated_at, "
        "phase, creator_issuer, creator_subject) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
    static const char sql_ev[] =
        "INSERT INTO promotion_events (promotion_id, at, type, detail, actor) "
        "VALUES (?, ?, ?, ?, ?)";
    const char *id = rec->id, *model = rec->model, *alias = rec->alias;
    json_t *p = NULL, *detail;
    char *policy = rec->policy ? store_json_text(rec->policy) : NULL;
    char *gates = rec->gates ? store_json_text(rec->gates) : NULL;
    struct db_conn *c = store_write_begin(st, err);
    struct db_stmt *s;
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
    if ((rc = store_model_id(c, model, &mid, err)) != MG_OK ||
        (rc = store_version_usable(c, mid, model, rec->version, "promoted", err)) != MG_OK)
        goto out;
    s = db_prepare(c, sql);
    store_now(at);
    db_bind_text(s, 1, id);
    db_bind_i64(s, 2, mid);
    db_bind_text(s, 3, alias);
    db_bind_i64(s, 4, rec->version);
    if (rec->baseline_version != 0)
        db_bind_i64(s, 5, rec->baseline_version);
    db_bind_text(s, 6, rec->state);
    db_bind_text(s, 7, rec->reason);
    db_bind_text(s, 8, policy);
    db_bind_text(s, 9, gates);
    db_bind_i64(s, 10, rec->step_index);
    db_bind_i64(s, 11, rec->weight);
    db_bind_i64(s, 12, rec->next_step_at_ms);
    db_bind_text(s, 13, actor);
    db_bind_text(s, 14, at);
    db_bind_text(s, 15, at);
    db_bind_text(s, 16, rec->phase);
    db_bind_text(s, 17, rec->creator_issuer);
    db_bind_text(s, 18, rec->creator_subject);
    rc = db_exec(s, err);
    if (rc == MG_ECONFLICT) {
        rc = mg_fail(err, MG_EINPROGRESS, NULL,
                     "alias '%s' of model '%s' already has an active promotion; wait for it, "
                     "or abort it",
                     alias, model);
        goto out;
    }
    if (rc != MG_OK)
        goto out;
    s = db_prepare(c, sql_ev);
    db_bind_text(s, 1, id);
    db_bind_text(s, 2, at);
    db_bind_text(s, 3, event_type);
    db_bind_text(s, 4, event_detail);
    db_bind_text(s, 5, actor);
    if ((rc = db_exec(s, err)) != MG_OK)
        goto out;
    detail = json_pack("{s:s, s:s, s:I, s:s}", "model", model, "alias", alias, "version",
                       (json_int_t)rec->version, "state", rec->state);
    rc = store_audit_append(c, actor, "promotion.create", id, STORE_NO_MODEL, detail, err);
    json_decref(detail);
    if (rc == MG_OK) /* one that waits for reviewers at once: teams hear of it */
        rc = store_promotion_notify(c, actor, id, rec->state, event_detail, at, err);
    if (rc == MG_OK && a)
        rc = store_alias_apply(c, STORE_ACTIVE_KEY(st), actor, a, at, err);
    /* The candidate's smoke test is queued with the promotion, in this transaction: a crash
     * after the commit cannot leave a smoke gate waiting for a test nobody runs. */
    if (rc == MG_OK && rec->smoke_gpu != NULL) {
        json_t *t = NULL;
        bool created;

        rc = store_smoke_enqueue_in(c, model, rec->version, "promotion", rec->smoke_gpu, &t,
                                    &created, err);
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

static enum mg_code list_row(struct db_stmt *s, void *ctx, json_t **item, char cursor[128],
                             struct mg_error *err)
{
    enum mg_code rc = promo_row(ctx, s, item, err);

    if (rc != MG_OK)
        return rc;
    json_object_del(*item, "_rev");
    json_object_del(*item, "_next_step_at_ms");
    json_object_del(*item, "_creator");
    snprintf(cursor, 128, "%s", json_string_value(json_object_get(*item, "id")));
    return MG_OK;
}

enum mg_code store_promotion_list(struct store *st, const char *state, const char *model,
                                  const char *alias, const struct store_page *page, json_t **out,
                                  struct mg_error *err)
{
    /* Promotions sort by (created_at, id); the page token is the last id. */
    static const char sql[] =
        "SELECT " PROMO_COLS " FROM promotions p JOIN models m ON m.id = p.model_id "
        "WHERE (?1 IS NULL OR p.state = ?1) AND (?2 IS NULL OR m.name = ?2) "
        "AND (?3 IS NULL OR p.alias = ?3) AND (?4 IS NULL OR (p.created_at, p.id) < "
        "  (SELECT created_at, id FROM promotions WHERE id = ?4)) "
        "ORDER BY p.created_at DESC, p.id DESC LIMIT ?5";
    static const char sql_token[] = "SELECT 1 FROM promotions WHERE id = ?";
    struct db_conn *c = store_read_begin(st);
    struct db_stmt *s;
    enum mg_code rc;
    bool known;

    if (page->page_token) {
        s = db_prepare(c, sql_token);
        db_bind_text(s, 1, page->page_token);
        if ((rc = store_exists(s, &known, err)) != MG_OK)
            goto out;
        if (!known) {
            rc = mg_fail(err, MG_EINVAL, "page_token", "page_token is not one this server issued");
            goto out;
        }
    }
    s = db_prepare(c, sql);
    db_bind_text(s, 1, state);
    db_bind_text(s, 2, model);
    db_bind_text(s, 3, alias);
    db_bind_text(s, 4, page->page_token);
    rc = store_page_rows(s, 5, page, list_row, c, out, err);
out:
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
    struct db_conn *c = store_read_begin(st);
    struct db_stmt *s;
    json_t *due = json_array(), *eval = json_array();
    int64_t next_at = 0;
    enum mg_code rc;
    bool row;

    s = db_prepare(c, sql_due);
    db_bind_i64(s, 1, now_ms);
    while ((rc = db_step(s, &row, err)) == MG_OK && row)
        json_array_append_new(due, store_col_json_string(s, 0));
    if (rc != MG_OK)
        goto out;
    s = db_prepare(c, sql_next);
    db_bind_i64(s, 1, now_ms);
    if ((rc = db_step(s, &row, err)) != MG_OK)
        goto out;
    if (row) {
        next_at = db_col_i64(s, 0);
        db_reset(s);
    }
    s = db_prepare(c, sql_eval);
    while ((rc = db_step(s, &row, err)) == MG_OK && row)
        json_array_append_new(eval, store_col_json_string(s, 0));
    if (rc != MG_OK)
        goto out;
    *out = json_pack("{s:O, s:O, s:I}", "due", due, "evaluating", eval, "next_at_ms",
                     (json_int_t)next_at);
out:
    json_decref(due);
    json_decref(eval);
    store_read_end(st, c);
    return rc;
}
