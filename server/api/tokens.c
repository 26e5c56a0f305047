/*
 * tokens.c - POST/GET/DELETE /api/v1/tokens (admin).
 */
#include "api.h"

#include <string.h>

static bool token_name_ok(const char *s)
{
    size_t i, n = strlen(s);

    if (n == 0 || n > STORE_TOKEN_NAME_MAX)
        return false;
    for (i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.' || c == '@'))
            return false;
    }
    return true;
}

static void create(struct srv_req *r)
{
    static const char *const allowed[] = {"name", "roles", NULL};
    const char *name;
    json_t *roles, *v, *out = NULL;
    unsigned bits = 0;
    size_t i;
    struct mg_error err;

    if (!api_object(r, r->body, allowed) ||
        !api_string(r, r->body, "name", "name", true, STORE_TOKEN_NAME_MAX, &name))
        return;
    if (!token_name_ok(name)) {
        srv_fail(r, MG_EINVAL, "name",
                 "token names are 1 to 64 characters of letters, digits and - _ . @");
        return;
    }
    roles = json_object_get(r->body, "roles");
    if (!json_is_array(roles) || json_array_size(roles) == 0) {
        srv_fail(r, MG_EINVAL, "roles",
                 "'roles' must be a non-empty array of admin, publisher, reviewer, deployer, "
                 "reader");
        return;
    }
    json_array_foreach(roles, i, v)
    {
        unsigned bit = json_is_string(v) ? store_role_from_name(json_string_value(v)) : 0;
        if (bit == 0) {
            srv_fail(r, MG_EINVAL, "roles",
                     "unknown role at roles[%zu]; use admin, publisher, reviewer, deployer or "
                     "reader",
                     i);
            return;
        }
        bits |= bit;
    }
    if (store_token_create(r->srv->store, r->who.name, name, bits, &out, &err) != MG_OK) {
        srv_reply_error(r, &err);
        return;
    }
    srv_reply_json(r, 201, out);
}

static void list(struct srv_req *r)
{
    json_t *out = NULL;
    struct mg_error err;

    if (store_token_list(r->srv->store, &out, &err) != MG_OK)
        srv_reply_error(r, &err);
    else
        srv_reply_json(r, 200, out);
}

static void delete (struct srv_req *r)
{
    struct mg_error err;

    if (store_token_delete(r->srv->store, r->who.name, srv_param(r, "id"), &err) != MG_OK)
        srv_reply_error(r, &err);
    else
        srv_reply_empty(r, 204);
}

const struct srv_route srv_routes_tokens[] = {
    {"POST", "/api/v1/tokens", STORE_ROLE_ADMIN, SRV_BODY_JSON, create, NULL, NULL, NULL},
    {"GET", "/api/v1/tokens", STORE_ROLE_ADMIN, SRV_BODY_NONE, list, NULL, NULL, NULL},
    {"DELETE", "/api/v1/tokens/{id}", STORE_ROLE_ADMIN, SRV_BODY_NONE, delete, NULL, NULL, NULL},
    {NULL, NULL, 0, 0, NULL, NULL, NULL, NULL},
};
