/*
 * models.c - /api/v1/models: create, list, get, patch.
 */
#include "api.h"

#include <string.h>

#include "../../common/util.h"

static bool check_description(struct srv_req *r, const json_t *body)
{
    const char *d;

    return api_string(r, body, "description", "description", false, 16384, &d);
}

static void create(struct srv_req *r)
{
    static const char *const allowed[] = {"name", "description", "tags", NULL};
    const char *name;
    json_t *tags, *out = NULL;
    struct mg_error err;
    enum mg_code rc;

    if (!api_object(r, r->body, allowed) ||
        !api_string(r, r->body, "name", "name", true, 63, &name) || !check_description(r, r->body))
        return;
    if (!mg_valid_model_name(name, strlen(name))) {
        srv_fail(r, MG_EINVAL, "name", "model names match ^[a-z0-9][a-z0-9._-]{0,62}$");
        return;
    }
    tags = json_object_get(r->body, "tags");
    if (tags && !api_tags(r, tags, "tags"))
        return;
    /* A new model is owned by the creating token's teams (none for a global token). */
    if (r->who.nteams > 0 && !(r->who.roles & STORE_ROLE_ADMIN)) {
        json_t *owners = json_array();

        for (size_t i = 0; owners != NULL && i < r->who.nteams; i++)
            json_array_append_new(owners, json_string(r->who.teams[i]));
        if (owners == NULL || json_object_set_new(r->body, "owners", owners) != 0) {
            srv_fail(r, MG_ENOMEM, NULL, "out of memory");
            return;
        }
    }
    rc = store_model_create(r->srv->store, r->who.name, r->body, &out, &err);
    api_reply_result(r, rc, 201, out, &err);
}

static enum mg_code fetch_models(struct srv_req *r, void *ctx, const struct store_page *page,
                                 json_t **out, struct mg_error *err)
{
    return store_model_list(r->srv->store, ctx, page, out, err);
}

/* --read-scope team: the models this token may see. */
static enum mg_code keep_visible(struct srv_req *r, const json_t *item, bool *keep,
                                 struct mg_error *err)
{
    (void)err;
    *keep = srv_model_visible(r, json_object_get(item, "owners"));
    return MG_OK;
}

static void list(struct srv_req *r)
{
    struct store_page page;
    const char *q = srv_query(r, "q");
    json_t *out = NULL;
    struct mg_error err;
    enum mg_code rc;

    if (!srv_page(r, &page))
        return;
    if (page.page_token && !mg_valid_model_name(page.page_token, strlen(page.page_token))) {
        srv_fail(r, MG_EINVAL, "page_token", "page_token is not one this server issued");
        return;
    }
    if (q && strlen(q) > 63) {
        srv_fail(r, MG_EINVAL, "q", "q is at most 63 characters");
        return;
    }
    q = q && *q ? q : NULL;
    if (r->srv->cfg->read_scope_team && r->who.nteams > 0 && !(r->who.roles & STORE_ROLE_ADMIN))
        rc = api_page_visible(r, (void *)q, &page, fetch_models, keep_visible, "name", &out, &err);
    else
        rc = store_model_list(r->srv->store, q, &page, &out, &err);
    api_reply_result(r, rc, 200, out, &err);
}

static void get(struct srv_req *r)
{
    json_t *out = NULL;
    struct mg_error err;
    enum mg_code rc = store_model_get(r->srv->store, srv_param(r, "model"), &out, &err);

    api_reply_result(r, rc, 200, out, &err);
}

static void patch(struct srv_req *r)
{
    static const char *const allowed[] = {"description", "tags", NULL};
    json_t *tags, *out = NULL;
    struct mg_error err;
    enum mg_code rc;

    if (!api_object(r, r->body, allowed) || !check_description(r, r->body))
        return;
    tags = json_object_get(r->body, "tags");
    if (tags && !api_tags(r, tags, "tags"))
        return;
    rc = store_model_patch(r->srv->store, r->who.name, srv_param(r, "model"), r->body, &out, &err);
    api_reply_result(r, rc, 200, out, &err);
}

const struct srv_route srv_routes_models[] = {
    {"POST", "/api/v1/models", STORE_ROLE_PUBLISHER, SRV_BODY_JSON, create, NULL, NULL, NULL},
    {"GET", "/api/v1/models", STORE_ROLE_READER, SRV_BODY_NONE, list, NULL, NULL, NULL},
    {"GET", "/api/v1/models/{model}", STORE_ROLE_READER, SRV_BODY_NONE, get, NULL, NULL, NULL},
    {"PATCH", "/api/v1/models/{model}", STORE_ROLE_PUBLISHER, SRV_BODY_JSON, patch, NULL, NULL,
     NULL},
    {NULL, NULL, 0, 0, NULL, NULL, NULL, NULL},
};
