/*
 * policies.c - /api/v1/models/{model}/policies/{alias}: a policy protects an
 * alias, which then moves only through promotions and rollbacks.
 */
#include "api.h"

#include "../../gates/policy.h"

static void put(struct srv_req *r)
{
    struct gate_policy pol;
    json_t *canon, *out = NULL;
    struct mg_error err;
    enum mg_code rc;

    if (gate_policy_parse(r->body, &pol, &err) != MG_OK) {
        srv_reply_error(r, &err);
        return;
    }
    canon = gate_policy_to_json(&pol);
    rc = store_policy_put(r->srv->store, r->who.name, srv_param(r, "model"), srv_param(r, "alias"),
                          canon, &out, &err);
    json_decref(canon);
    api_reply_result(r, rc, 200, out, &err);
}

static void get(struct srv_req *r)
{
    json_t *out = NULL;
    struct mg_error err;
    enum mg_code rc =
        store_policy_get(r->srv->store, srv_param(r, "model"), srv_param(r, "alias"), &out, &err);

    api_reply_result(r, rc, 200, out, &err);
}

static void delete (struct srv_req *r)
{
    struct mg_error err;

    if (store_policy_delete(r->srv->store, r->who.name, srv_param(r, "model"),
                            srv_param(r, "alias"), &err) != MG_OK)
        srv_reply_error(r, &err);
    else
        srv_reply_empty(r, 204);
}

#define P "/api/v1/models/{model}/policies/{alias}"
const struct srv_route srv_routes_policies[] = {
    {"PUT", P, STORE_ROLE_ADMIN, SRV_BODY_JSON, put, NULL, NULL, NULL},
    {"GET", P, STORE_ROLE_READER, SRV_BODY_NONE, get, NULL, NULL, NULL},
    {"DELETE", P, STORE_ROLE_ADMIN, SRV_BODY_NONE, delete, NULL, NULL, NULL},
    {NULL, NULL, 0, 0, NULL, NULL, NULL, NULL},
};
