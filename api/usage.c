/*
 * usage.c - PUT/GET /api/v1/teams/{team}/quota and GET /api/v1/usage (docs/contract.md "Quotas and
 * cost").
 */
#include "api.h"

#include <string.h>

static void quota_put(struct srv_req *r)
{
    static const char *const allowed[] = {"storage_bytes", NULL};
    const char *team = srv_param(r, "team");
    json_t *v, *out = NULL; /* v BORROWED */
    struct mg_error err;
    int64_t bytes;

    if (!api_object(r, r->body, allowed))
        return;
    v = json_object_get(r->body, "storage_bytes");
    if (v == NULL || (!json_is_null(v) && (!json_is_integer(v) || json_integer_value(v) < 0))) {
        srv_fail(r, MG_EINVAL, "storage_bytes",
                 "send {\"storage_bytes\":N} with N a whole number of bytes >= 0 (null removes "
                 "the quota)");
        return;
    }
    bytes = (int64_t)json_integer_value(v);
    if (store_quota_set(r->srv->store, r->who.name, team, json_is_null(v) ? NULL : &bytes, &out,
                        &err) != MG_OK)
        srv_reply_error(r, &err);
    else
        srv_reply_json(r, 200, out);
}

static void quota_get(struct srv_req *r)
{
    const char *team = srv_param(r, "team");
    json_t *out = NULL;
    struct mg_error err;

    if (store_quota_get(r->srv->store, team, &out, &err) != MG_OK)
        srv_reply_error(r, &err);
    else
        srv_reply_json(r, 200, out);
}

/* GET /api/v1/usage?by=team|model: what each team or model keeps and spends. Under
 * --read-scope team a team token sees its own teams and the models it may read. */
static void usage(struct srv_req *r)
{
    const char *by = srv_query(r, "by");
    bool by_model = by != NULL && strcmp(by, "model") == 0;
    bool scoped =
        r->srv->cfg->read_scope_team && r->who.nteams > 0 && !(r->who.roles & MG_ROLE_ADMIN);
    json_t *out = NULL, *items, *item; /* items, item BORROWED */
    struct mg_error err;
    size_t i, k;

    if (by != NULL && !by_model && strcmp(by, "team") != 0) {
        srv_fail(r, MG_EINVAL, "by", "by is 'team' or 'model'");
        return;
    }
    if (store_usage(r->srv->store, by_model, &out, &err) != MG_OK) {
        srv_reply_error(r, &err);
        return;
    }
    items = json_object_get(out, "items");
    for (i = 0; scoped && i < json_array_size(items);) {
        bool keep = false;

        item = json_array_get(items, i);
        if (by_model) {
            keep = srv_model_visible(r, json_object_get(item, "owners"));
        } else {
            for (k = 0; k < r->who.nteams && !keep; k++)
                keep =
                    strcmp(r->who.teams[k], json_string_value(json_object_get(item, "team"))) == 0;
        }
        if (keep)
            i++;
        else
            json_array_remove(items, i);
    }
    srv_reply_json(r, 200, out);
}

const struct srv_route api_routes_usage[] = {
    {"GET", "/api/v1/usage", MG_ROLE_READER, SRV_BODY_NONE, usage, NULL, NULL, NULL},
    {"PUT", "/api/v1/teams/{team}/quota", MG_ROLE_ADMIN, SRV_BODY_JSON, quota_put, NULL, NULL,
     NULL},
    {"GET", "/api/v1/teams/{team}/quota", MG_ROLE_READER, SRV_BODY_NONE, quota_get, NULL, NULL,
     NULL},
    {NULL, NULL, 0, 0, NULL, NULL, NULL, NULL},
};
