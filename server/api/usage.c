/*
 * usage.c - PUT/GET /api/v1/teams/{team}/quota and GET /api/v1/usage (API.md "Quotas and
 * cost").
 */
#include "api.h"

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

const struct srv_route srv_routes_usage[] = {
    {"PUT", "/api/v1/teams/{team}/quota", STORE_ROLE_ADMIN, SRV_BODY_JSON, quota_put, NULL, NULL,
     NULL},
    {"GET", "/api/v1/teams/{team}/quota", STORE_ROLE_READER, SRV_BODY_NONE, quota_get, NULL, NULL,
     NULL},
    {NULL, NULL, 0, 0, NULL, NULL, NULL, NULL},
};
