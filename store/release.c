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

#include "../common/util.h"

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
        "INSERT INTO promotion_events (promotion_id, at, type, detail) VALUES (?, ?, ?, ?)";
    struct db_stmt *s;
    char *gates = p->gates ? store_json_text(p->gates) : NULL;
    json_t *detail = NULL;
    enum mg_code rc;

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
        /* the person, when the credential is one's (API.md "Identity") */
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
        if ((rc = db_exec(s, err)) != MG_OK)
            goto out;
    }
    detail = json_pack("{s:s, s:s?, s:s?, s:s?}", "state", p->state, "event", p->event_type,
                       "detail", p->event_detail, "approval", p->approval_decision);
    rc = store_audit_append(c, actor, p->approval_by ? "promotion.decide" : "promotion.update",
                            p->id, detail, err);
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
