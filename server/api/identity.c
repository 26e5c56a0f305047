/*
 * identity.c - PUT/GET/DELETE /api/v1/identity/groups[/{group}] (admin): an IdP group's
 * roles, teams and aliases (API.md "Identity").
 */
#include "api.h"

#include <string.h>

#include "../../gates/authz.h"

static void group_put(struct srv_req *r)
{
    static const char *const allowed[] = {"roles", "teams", "aliases", NULL};
    const json_t *teams = NULL, *aliases = NULL;
    json_t *out = NULL;
    unsigned bits = 0;
    struct mg_error err;

    if (!api_object(r, r->body, allowed) || !api_roles(r, &bits) ||
        !api_scope_list(r, "teams", api_team_name_ok, "team name", &teams) ||
        !api_scope_list(r, "aliases", gate_alias_pattern_valid,
                        "alias name or prefix with a trailing '*' (\"dev-*\")", &aliases))
        return;
    if (teams != NULL && (bits & STORE_ROLE_ADMIN)) {
        srv_fail(r, MG_EINVAL, "teams", "an admin is always global; give the group no teams");
        return;
    }
    if (store_identity_group_put(r->srv->store, r->who.name, srv_param(r, "group"), bits, teams,
                                 aliases, &out, &err) != MG_OK) {
        srv_reply_error(r, &err);
        return;
    }
    srv_reply_json(r, 200, out);
}

static void group_list(struct srv_req *r)
{
    json_t *out = NULL;
    struct mg_error err;

    if (store_identity_group_list(r->srv->store, &out, &err) != MG_OK)
        srv_reply_error(r, &err);
    else
        srv_reply_json(r, 200, out);
}

static void group_delete(struct srv_req *r)
{
    struct mg_error err;

    if (store_identity_group_delete(r->srv->store, r->who.name, srv_param(r, "group"), &err) !=
        MG_OK)
        srv_reply_error(r, &err);
    else
        srv_reply_empty(r, 204);
}

const struct srv_route srv_routes_identity[] = {
    {"GET", "/api/v1/identity/groups", STORE_ROLE_ADMIN, SRV_BODY_NONE, group_list, NULL, NULL,
     NULL},
    {"PUT", "/api/v1/identity/groups/{group}", STORE_ROLE_ADMIN, SRV_BODY_JSON, group_put, NULL,
     NULL, NULL},
    {"DELETE", "/api/v1/identity/groups/{group}", STORE_ROLE_ADMIN, SRV_BODY_NONE, group_delete,
     NULL, NULL, NULL},
    {NULL, NULL, 0, 0, NULL, NULL, NULL, NULL},
};
