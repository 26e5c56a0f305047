/*
 * promotions.c - /api/v1/promotions: create, list, read, approve or reject,
 * advance, abort.
 */
#include "api.h"

#include "../gates/authz.h"
#include "../gates/policy.h"

#include <string.h>

#include "../base/util.h"
#include "../gates/rollout.h"
#include "../control/release.h"

static void resume_promotion(struct srv_req *r)
{
    json_t *out = NULL;
    struct mg_error err;
    const struct api_waiting *w = api_waiting_of(r);
    enum mg_code rc = rel_promotion_get(r->srv->ctl, w->id, &out, &err);

    api_reply_result(r, rc, w->status, out, &err);
}

/* Reply with the promotion now, or once its alias's gateways caught up. */
static void reply_promotion(struct srv_req *r, enum mg_code rc, unsigned status, json_t *p,
                            const struct mg_error *err, int64_t wait)
{
    const char *model = json_string_value(json_object_get(p, "model"));
    const char *alias = json_string_value(json_object_get(p, "alias"));
    json_t *a = NULL;
    struct mg_error aerr;

    if (rc == MG_OK && wait > 0 && rel_alias_get(r->srv->ctl, model, alias, &a, &aerr) == MG_OK) {
        api_defer_wait(r, model, alias, json_integer_value(json_object_get(a, "generation")), wait,
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

    if (rel_promotion_get(r->srv->ctl, id, &p, &err) != MG_OK) {
        srv_reply_error(r, &err);
        return false;
    }
    ok = srv_authorize(r, json_string_value(json_object_get(p, "model")),
                       json_string_value(json_object_get(p, "alias")));
    json_decref(p);
    return ok;
}

/* The query of a promotion list, for fetch_promotions. */
struct promo_query {
    const char *state, *model, *alias;
};

static enum mg_code fetch_promotions(struct srv_req *r, void *ctx, const struct store_page *page,
                                     json_t **out, struct mg_error *err)
{
    const struct promo_query *q = ctx;

    return store_promotion_list(r->srv->store, q->state, q->model, q->alias, page, out, err);
}

/* --read-scope team: promotions of the models this token may see. */
static enum mg_code keep_visible(struct srv_req *r, const json_t *item, bool *keep,
                                 struct mg_error *err)
{
    const char *m = json_string_value(json_object_get(item, "model"));
    json_t *owners = NULL;
    enum mg_code rc = store_model_owners(r->srv->store, m ? m : "", &owners, err);

    *keep = rc == MG_OK && srv_model_visible(r, owners);
    json_decref(owners);
    return rc == MG_ENOTFOUND ? MG_OK : rc;
}

/* A page token is a promotion's id: under --read-scope team only one this token may see
 * (another team's would tell that it exists). */
static bool token_visible(struct srv_req *r, const char *id)
{
    json_t *p = NULL;
    struct mg_error err;
    bool keep = false;

    if (rel_promotion_get(r->srv->ctl, id, &p, &err) == MG_OK &&
        keep_visible(r, p, &keep, &err) == MG_OK && keep) {
        json_decref(p);
        return true;
    }
    json_decref(p);
    srv_fail(r, MG_EINVAL, "page_token", "page_token is not one this server issued");
    return false;
}

/*
 * What the caller may do with promotion p: {"can_decide":bool,"reason":string|null}, so the
 * UI shows read-only what this token may not decide, and says why. The same rules as the
 * approval route: the reviewer role, the model's teams, separation of duties, one decision.
 */
static json_t *viewer(struct srv_req *r, const json_t *p)
{
    const char *model = json_string_value(json_object_get(p, "model"));
    const char *state = json_string_value(json_object_get(p, "state"));
    struct gate_approval existing[64];
    const char *contrib[64];
    size_t n = 0, nc = 0, i;
    struct gate_decision d;
    struct mg_error err;
    json_t *a, *ver = NULL, *h;
    char why[MG_ERR_MSG_MAX] = "";

    if (state == NULL || strcmp(state, "awaiting_approval") != 0) {
        snprintf(why, sizeof(why), "the promotion is not awaiting approval");
    } else if (srv_decide(r, MG_ROLE_REVIEWER, model, NULL, &d, &err) != MG_OK) {
        snprintf(why, sizeof(why), "%s", err.message);
    } else if (!d.allow) {
        snprintf(why, sizeof(why), "%s", d.reason);
    } else if (store_version_get(r->srv->store, model,
                                 json_integer_value(json_object_get(p, "version")), &ver,
                                 &err) != MG_OK) {
        snprintf(why, sizeof(why), "%s", err.message);
    } else {
        json_array_foreach(json_object_get(p, "approvals"), i, a)
        {
            if (n < 64) {
                existing[n].by = json_string_value(json_object_get(a, "by"));
                existing[n].approve = true;
                existing[n].teams = NULL;
                existing[n].nteams = 0;
                n++;
            }
        }
        json_array_foreach(json_object_get(ver, "metrics_history"), i, h)
        {
            if (nc < 64)
                contrib[nc++] = json_string_value(json_object_get(h, "by"));
        }
        json_t *pub = json_object_get(ver, "publisher"); /* BORROWED */
        if (gate_same_person(r->who.issuer, r->who.subject,
                             json_string_value(json_object_get(pub, "issuer")),
                             json_string_value(json_object_get(pub, "subject"))))
            snprintf(why, sizeof(why),
                     "you published this version (through another credential) and cannot "
                     "approve its promotion");
        else if (gate_approval_check(r->who.name,
                                     json_string_value(json_object_get(ver, "created_by")), contrib,
                                     nc, json_string_value(json_object_get(p, "created_by")),
                                     existing, n, &err) != MG_OK)
            snprintf(why, sizeof(why), "%s", err.message);
    }
    json_decref(ver);
    return json_pack("{s:b, s:o}", "can_decide", why[0] == '\0', "reason",
                     why[0] ? json_string(why) : json_null());
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
    rc = rel_promotion_create(r->srv->ctl, &r->who, model, json_integer_value(v), alias, reason,
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
    if (r->srv->cfg->read_scope_team && r->who.nteams > 0 && !(r->who.roles & MG_ROLE_ADMIN)) {
        struct promo_query q = {state, model, alias};

        if (page.page_token && !token_visible(r, page.page_token))
            return;
        rc = api_page_visible(r, &q, &page, fetch_promotions, keep_visible, "id", &out, &err);
    } else {
        rc = store_promotion_list(r->srv->store, state, model, alias, &page, &out, &err);
    }
    if (rc == MG_OK && state != NULL && strcmp(state, "awaiting_approval") == 0) {
        json_t *item;
        size_t i;

        /* the review queue: say which of them this token may decide */
        json_array_foreach(json_object_get(out, "items"), i, item)
            json_object_set_new(item, "viewer", viewer(r, item));
    }
    api_reply_result(r, rc, 200, out, &err);
}

static void get(struct srv_req *r)
{
    json_t *out = NULL;
    struct mg_error err;
    enum mg_code rc;

    if (!authorize_promotion(r, srv_param(r, "id")))
        return;
    rc = rel_promotion_get(r->srv->ctl, srv_param(r, "id"), &out, &err);
    if (rc == MG_OK)
        json_object_set_new(out, "viewer", viewer(r, out));
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
    rc = rel_promotion_decide(r->srv->ctl, &r->who, srv_param(r, "id"), approve, comment, &out,
                              &err);
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
    rc = rel_promotion_advance(r->srv->ctl, r->who.name, srv_param(r, "id"), &out, &err);
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
    rc = rel_promotion_abort(r->srv->ctl, r->who.name, srv_param(r, "id"),
                             reason ? reason : "aborted by a deployer", &out, &err);
    reply_promotion(r, rc, 200, out, &err, wait);
}

const struct srv_route api_routes_promotions[] = {
    {"POST", "/api/v1/promotions", MG_ROLE_DEPLOYER, SRV_BODY_JSON, create, NULL, NULL, NULL},
    {"GET", "/api/v1/promotions", MG_ROLE_READER, SRV_BODY_NONE, list, NULL, NULL, NULL},
    {"GET", "/api/v1/promotions/{id}", MG_ROLE_READER, SRV_BODY_NONE, get, NULL, NULL, NULL},
    {"POST", "/api/v1/promotions/{id}/approvals", MG_ROLE_REVIEWER, SRV_BODY_JSON, decide, NULL,
     NULL, NULL},
    {"POST", "/api/v1/promotions/{id}/advance", MG_ROLE_DEPLOYER, SRV_BODY_JSON, advance, NULL,
     NULL, NULL},
    {"POST", "/api/v1/promotions/{id}/abort", MG_ROLE_DEPLOYER, SRV_BODY_JSON, abort_, NULL, NULL,
     NULL},
    {NULL, NULL, 0, 0, NULL, NULL, NULL, NULL},
};
