/*
 * release.c - the one transaction that commits an alias change and/or a
 * promotion change, together with its outbox rows and audit entries.
 *
 * Decisions (which routes, which state) are made by the caller with gates/
 * on what it read; the commit checks that what it read still holds
 * (generation, revision) and otherwise answers MG_ESTALE.
 */
#include "store_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/util.h"

enum mg_code store_promotion_notify(struct db_conn *c, const char *actor, const char *id,
                                    const char *state, const char *detail, const char *at,
                                    struct mg_error *err)
{
    static const char sql[] = "SELECT m.name, p.alias, p.version, p.baseline_version, "
                              "p.reason, p.created_by FROM promotions p "
                              "JOIN models m ON m.id = p.model_id WHERE p.id = ?";
    const char *type = strcmp(state, "awaiting_approval") == 0 ? "promotion.awaiting_approval"
                       : strcmp(state, "rolled_back") == 0     ? "promotion.rolled_back"
                                                               : NULL;
    struct db_stmt *s;
    json_t *ev = NULL;
    enum mg_code rc;
    bool row;
    char model[64], alias[64];

    if (type == NULL)
        return MG_OK;
    s = db_prepare(c, sql);
    db_bind_text(s, 1, id);
    if ((rc = db_step(s, &row, err)) != MG_OK)
        return rc;
    if (!row) {
        db_reset(s);
        return mg_fail(err, MG_ENOTFOUND, NULL, "promotion %s does not exist", id);
    }
    snprintf(model, sizeof(model), "%s", db_col_text(s, 0));
    snprintf(alias, sizeof(alias), "%s", db_col_text(s, 1));
    ev = json_pack("{s:s, s:s, s:s, s:s, s:I, s:o, s:s, s:o, s:o, s:o, s:s, s:s}", "type", type,
                   "promotion", id, "model", model, "alias", alias, "version",
                   (json_int_t)db_col_i64(s, 2), "baseline_version",
                   db_col_null(s, 3) ? json_null() : json_integer(db_col_i64(s, 3)), "state", state,
                   "reason", store_col_json_string(s, 4), "requested_by",
                   store_col_json_string(s, 5), "detail",
                   detail ? json_string(detail) : json_null(), "at", at, "by", actor);
    db_reset(s);
    if (ev == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    rc = store_outbox_event(c, model, alias, id, type, ev, at, err);
    json_decref(ev);
    return rc;
}

/* The state a promotion is in now, into out (empty when it does not exist). */
static enum mg_code promotion_state(struct db_conn *c, const char *id, char out[32],
                                    struct mg_error *err)
{
    static const char sql[] = "SELECT state FROM promotions WHERE id = ?";
    struct db_stmt *s = db_prepare(c, sql);
    enum mg_code rc;
    bool row;

    out[0] = '\0';
    db_bind_text(s, 1, id);
    if ((rc = db_step(s, &row, err)) == MG_OK && row)
        snprintf(out, 32, "%s", db_col_text(s, 0));
    db_reset(s);
    return rc;
}

static enum mg_code apply_promotion(struct db_conn *c, const char *actor,
                                    const struct store_promotion_change *p, const char *at,
                                    struct mg_error *err)
{
    static const char sql_upd[] =
        "UPDATE promotions SET state = ?, step_index = ?, weight = ?, next_step_at = ?, "
        "gates = coalesce(?, gates), rev = rev + 1, updated_at = ?, phase = ? "
        "WHERE id = ? AND rev = ?";
    static const char sql_appr[] = "INSERT INTO promotion_approvals (promotion_id, by, decision, "
                                   "comment, at, teams, issuer, subject) "
                                   "VALUES (?, ?, ?, ?, ?, ?, ?, ?)";
    static const char sql_ev[] =
        "INSERT INTO promotion_events (promotion_id, at, type, detail, actor) "
        "VALUES (?, ?, ?, ?, ?)";
    struct db_stmt *s;
    char *gates = p->gates ? store_json_text(p->gates) : NULL;
    json_t *detail = NULL;
    char was[32];
    enum mg_code rc;

    if ((rc = promotion_state(c, p->id, was, err)) != MG_OK)
        goto out;
    s = db_prepare(c, sql_upd);
    db_bind_text(s, 1, p->state);
    db_bind_i64(s, 2, p->step_index);
    db_bind_i64(s, 3, p->weight);
    db_bind_i64(s, 4, p->next_step_at);
    db_bind_text(s, 5, gates);
    db_bind_text(s, 6, at);
    db_bind_text(s, 7, p->phase);
    db_bind_text(s, 8, p->id);
    db_bind_i64(s, 9, p->expected_rev);
    if ((rc = db_exec(s, err)) != MG_OK)
        goto out;
    if (db_changes(s) == 0) {
        rc = mg_fail(err, MG_ESTALE, NULL, "promotion %s changed meanwhile; read it and try again",
                     p->id);
        goto out;
    }
    if (p->approval_by) {
        s = db_prepare(c, sql_appr);
        db_bind_text(s, 1, p->id);
        db_bind_text(s, 2, p->approval_by);
        db_bind_text(s, 3, p->approval_decision);
        db_bind_text(s, 4, p->approval_comment);
        db_bind_text(s, 5, at);
        db_bind_text(s, 6, p->approval_teams ? p->approval_teams : "[]");
        /* the person, when the credential is one's (docs/contract.md "Identity") */
        db_bind_text(s, 7, p->approval_issuer && p->approval_issuer[0] ? p->approval_issuer : NULL);
        db_bind_text(s, 8,
                     p->approval_issuer && p->approval_issuer[0] ? p->approval_subject : NULL);
        if ((rc = db_exec(s, err)) != MG_OK) {
            if (rc == MG_ECONFLICT)
                mg_fail(err, MG_ECONFLICT, NULL, "'%s' already decided on this promotion",
                        p->approval_by);
            goto out;
        }
    }
    if (p->event_type) {
        s = db_prepare(c, sql_ev);
        db_bind_text(s, 1, p->id);
        db_bind_text(s, 2, at);
        db_bind_text(s, 3, p->event_type);
        db_bind_text(s, 4, p->event_detail);
        db_bind_text(s, 5, actor);
        if ((rc = db_exec(s, err)) != MG_OK)
            goto out;
    }
    /* Entering a state teams hear about: a webhook event in this same transaction. */
    if (strcmp(was, p->state) != 0 &&
        (rc = store_promotion_notify(c, actor, p->id, p->state, p->event_detail, at, err)) != MG_OK)
        goto out;
    detail = json_pack("{s:s, s:s?, s:s?, s:s?}", "state", p->state, "event", p->event_type,
                       "detail", p->event_detail, "approval", p->approval_decision);
    rc = store_audit_append(c, actor, p->approval_by ? "promotion.decide" : "promotion.update",
                            p->id, STORE_NO_MODEL, detail, err);
out:
    free(gates);
    json_decref(detail);
    return rc;
}

enum mg_code store_release_commit(struct store *st, const char *actor,
                                  const struct store_alias_change *a,
                                  const struct store_promotion_change *p, json_t **alias_out,
                                  struct mg_error *err)
{
    struct db_conn *c = store_write_begin(st, err);
    json_t *out = NULL;
    char at[32];
    enum mg_code rc = MG_OK;

    if (c == NULL)
        return err->code;
    store_now(at);
    if (p && (rc = store_leader_holds(c, st, p->leader_epoch, err)) != MG_OK)
        goto out;
    if (p && (rc = apply_promotion(c, actor, p, at, err)) != MG_OK)
        goto out;
    if (a && (rc = store_alias_apply(c, STORE_ACTIVE_KEY(st), actor, a, at, err)) != MG_OK)
        goto out;
    if (a && alias_out && strcmp(a->kind, "delete") != 0)
        rc = store_alias_read(c, a->model, a->alias, &out, err);
out:
    rc = store_write_end(st, c, rc, err);
    if (rc == MG_OK && alias_out)
        *alias_out = out;
    else
        json_decref(out);
    return rc;
}
