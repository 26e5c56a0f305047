/*
 * promotions.c - /api/v1/promotions: create, list, read, approve or reject,
 * advance, abort.
 */
#include "api.h"

#include <string.h>

#include "../../common/util.h"
#include "../../gates/rollout.h"
#include "../release.h"

static void resume_promotion(struct srv_req *r)
{
    json_t *out = NULL;
    struct mg_error err;
    enum mg_code rc = rel_promotion_get(r->srv, r->wait_id, &out, &err);

    api_reply_result(r, rc, r->wait_status, out, &err);
}

/* Reply with the promotion now, or once its alias's gateways caught up. */
static void reply_promotion(struct srv_req *r, enum mg_code rc, unsigned status, json_t *p,
                            const struct mg_error *err, int64_t wait)
{
    const char *model = json_string_value(json_object_get(p, "model"));
    const char *alias = json_string_value(json_object_get(p, "alias"));
    json_t *a = NULL;
    struct mg_error aerr;

    if (rc == MG_OK && wait > 0 && rel_alias_get(r->srv, model, alias, &a, &aerr) == MG_OK) {
        srv_defer(r, model, alias, json_integer_value(json_object_get(a, "generation")), wait,
                  json_string_value(json_object_get(p, "id")), status, resume_promotion);
        json_decref(a);
        json_decref(p);
        return;
    }
    api_reply_result(r, rc, status, p, err);
}

/* Promotion routes name only an id: authorise against the promotion's model and alias,
 * once it is known. On refusal the reply is set and false returned. */
static bool authorize_promotion(struct srv_req *r, const char *id)
{
    json_t *p = NULL;
    struct mg_error err;
    bool ok;

    if (rel_promotion_get(r->srv, id, &p, &err) != MG_OK) {
        srv_reply_error(r, &err);
        return false;
    }
    ok = srv_authorize(r, json_string_value(json_object_get(p, "model")),
                       json_string_value(json_object_get(p, "alias")));
    json_decref(p);
    return ok;
}

/* --read-scope team: leave out promotions of models this token may not see. */
static enum mg_code filter_visible(struct srv_req *r, json_t *out, struct mg_error *err)
{
    json_t *items = json_object_get(out, "items"), *owners; /* BORROWED */
    size_t i = 0;
    enum mg_code rc;

    if (!r->srv->cfg->read_scope_team || r->who.nteams == 0)
        return MG_OK;
    while (i < json_array_size(items)) {
        const char *m = json_string_value(json_object_get(json_array_get(items, i), "model"));

        if ((rc = store_model_owners(r->srv->store, m ? m : "", &owners, err)) != MG_OK &&
            rc != MG_ENOTFOUND)
            return rc;
        if (rc == MG_OK && srv_model_visible(r, owners))
            i++;
        else
            json_array_remove(items, i);
        json_decref(owners);
    }
    return MG_OK;
}

static void create(struct srv_req *r)
{
    static const char *const allowed[] = {"model", "version", "alias", "reason", NULL};
    const char *model, *alias, *reason;
    json_t *v, *out = NULL;
    struct mg_error err;
    int64_t wait;
    enum mg_code rc;

    if (!api_wait(r, &wait) || !api_object(r, r->body, allowed) ||
        !api_string(r, r->body, "model", "model", true, 63, &model) ||
        !api_string(r, r->body, "alias", "alias", true, 32, &alias) ||
        !api_string(r, r->body, "reason", "reason", false, 1024, &reason))
        return;
    if (!mg_valid_model_name(model, strlen(model))) {
        srv_fail(r, MG_EINVAL, "model", "model names match ^[a-z0-9][a-z0-9._-]{0,62}$");
        return;
    }
    if (!mg_valid_alias_name(alias, strlen(alias))) {
        srv_fail(r, MG_EINVAL, "alias", "alias names match ^[a-z][a-z0-9-]{0,31}$");
        return;
    }
    v = json_object_get(r->body, "version");
    if (!json_is_integer(v) || json_integer_value(v) < 1) {
        srv_fail(r, MG_EINVAL, "version", "version must be an integer >= 1");
        return;
    }
    if (!srv_authorize(r, model, alias))
        return;
    rc = rel_promotion_create(r->srv, r->who.name, model, json_integer_value(v), alias, reason,
                              &out, &err);
    reply_promotion(r, rc, 201, out, &err, wait);
}

static void list(struct srv_req *r)
{
    const char *state = srv_query(r, "state"), *model = srv_query(r, "model");
    const char *alias = srv_query(r, "alias");
    enum promo_state s;
    struct store_page page;
    json_t *out = NULL;
    struct mg_error err;
    enum mg_code rc;

    if (!srv_page(r, &page))
        return;
    if (state && !promo_state_parse(state, &s)) {
        srv_fail(r, MG_EINVAL, "state",
                 "state is one of evaluating, awaiting_approval, rolling_out, succeeded, "
                 "rejected, aborted, rolled_back");
        return;
    }
    if (model && !mg_valid_model_name(model, strlen(model))) {
        srv_fail(r, MG_EINVAL, "model", "model names match ^[a-z0-9][a-z0-9._-]{0,62}$");
        return;
    }
    if (alias && !mg_valid_alias_name(alias, strlen(alias))) {
        srv_fail(r, MG_EINVAL, "alias", "alias names match ^[a-z][a-z0-9-]{0,31}$");
        return;
    }
    rc = store_promotion_list(r->srv->store, state, model, alias, &page, &out, &err);
    if (rc == MG_OK)
        rc = filter_visible(r, out, &err);
    api_reply_result(r, rc, 200, out, &err);
}

static void get(struct srv_req *r)
{
    json_t *out = NULL;
    struct mg_error err;
    enum mg_code rc;

    if (!authorize_promotion(r, srv_param(r, "id")))
        return;
    rc = rel_promotion_get(r->srv, srv_param(r, "id"), &out, &err);
    api_reply_result(r, rc, 200, out, &err);
}

static void decide(struct srv_req *r)
{
    static const char *const allowed[] = {"decision", "comment", NULL};
    const char *decision, *comment;
    json_t *out = NULL;
    struct mg_error err;
    int64_t wait;
    bool approve;
    enum mg_code rc;

    if (!api_wait(r, &wait) || !api_object(r, r->body, allowed) ||
        !api_string(r, r->body, "decision", "decision", true, 16, &decision) ||
        !api_string(r, r->body, "comment", "comment", false, 4096, &comment))
        return;
    if (strcmp(decision, "approve") != 0 && strcmp(decision, "reject") != 0) {
        srv_fail(r, MG_EINVAL, "decision", "decision is approve or reject");
        return;
    }
    approve = strcmp(decision, "approve") == 0;
    if (!approve && (comment == NULL || *comment == '\0')) {
        srv_fail(r, MG_EINVAL, "comment", "a rejection needs a comment saying why");
        return;
    }
    if (!authorize_promotion(r, srv_param(r, "id")))
        return;
    rc = rel_promotion_decide(r->srv, &r->who, srv_param(r, "id"), approve, comment, &out, &err);
    reply_promotion(r, rc, 200, out, &err, wait);
}

static void advance(struct srv_req *r)
{
    json_t *out = NULL;
    struct mg_error err;
    int64_t wait;
    enum mg_code rc;

    if (!api_wait(r, &wait) || !authorize_promotion(r, srv_param(r, "id")))
        return;
    rc = rel_promotion_advance(r->srv, r->who.name, srv_param(r, "id"), &out, &err);
    reply_promotion(r, rc, 200, out, &err, wait);
}

static void abort_(struct srv_req *r)
{
    static const char *const allowed[] = {"reason", NULL};
    const char *reason = NULL;
    json_t *out = NULL;
    struct mg_error err;
    int64_t wait;
    enum mg_code rc;

    if (!api_wait(r, &wait))
        return;
    if (r->body && (!api_object(r, r->body, allowed) ||
                    !api_string(r, r->body, "reason", "reason", false, 1024, &reason)))
        return;
    if (!authorize_promotion(r, srv_param(r, "id")))
        return;
    rc = rel_promotion_abort(r->srv, r->who.name, srv_param(r, "id"),
                             reason ? reason : "aborted by a deployer", &out, &err);
    reply_promotion(r, rc, 200, out, &err, wait);
}

const struct srv_route srv_routes_promotions[] = {
    {"POST", "/api/v1/promotions", STORE_ROLE_DEPLOYER, SRV_BODY_JSON, create, NULL, NULL, NULL},
    {"GET", "/api/v1/promotions", STORE_ROLE_READER, SRV_BODY_NONE, list, NULL, NULL, NULL},
    {"GET", "/api/v1/promotions/{id}", STORE_ROLE_READER, SRV_BODY_NONE, get, NULL, NULL, NULL},
    {"POST", "/api/v1/promotions/{id}/approvals", STORE_ROLE_REVIEWER, SRV_BODY_JSON, decide, NULL,
     NULL, NULL},
    {"POST", "/api/v1/promotions/{id}/advance", STORE_ROLE_DEPLOYER, SRV_BODY_JSON, advance, NULL,
     NULL, NULL},
    {"POST", "/api/v1/promotions/{id}/abort", STORE_ROLE_DEPLOYER, SRV_BODY_JSON, abort_, NULL,
     NULL, NULL},
    {NULL, NULL, 0, 0, NULL, NULL, NULL, NULL},
};
