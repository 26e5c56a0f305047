/*
 * health.c - liveness, readiness and identity.
 */
#include "../http/http.h"

static void healthz(struct srv_req *r)
{
    srv_reply_json(r, 200, json_pack("{s:s}", "status", "ok"));
}

static void readyz(struct srv_req *r)
{
    struct mg_error err = {0};

    if (store_ready(r->srv->store, &err))
        srv_reply_json(r, 200, json_pack("{s:s}", "status", "ready"));
    else
        srv_fail(r, MG_EUNAVAIL, NULL, "not ready: %s",
                 err.message[0] ? err.message
                                : "the database or the blob backend does not take writes");
}

static void whoami(struct srv_req *r)
{
    json_t *teams = json_array(), *aliases = json_array();
    size_t i;

    for (i = 0; teams && i < r->who.nteams; i++)
        json_array_append_new(teams, json_string(r->who.teams[i]));
    for (i = 0; aliases && i < r->who.naliases; i++)
        json_array_append_new(aliases, json_string(r->who.aliases[i]));
    json_t *out =
        json_pack("{s:s, s:s, s:o, s:o, s:o}", "id", r->who.id, "name", r->who.name, "roles",
                  store_roles_to_json(r->who.roles), "teams", teams, "aliases", aliases);

    /* docs/contract.md "Identity": who the IdP says this is */
    if (out && r->identity)
        json_object_set(out, "identity", r->identity);
    else if (out && r->who.issuer[0])
        json_object_set_new(
            out, "identity",
            json_pack("{s:s, s:s}", "issuer", r->who.issuer, "subject", r->who.subject));
    srv_reply_json(r, 200, out);
}

static void cluster(struct srv_req *r)
{
    json_t *out = NULL;
    struct mg_error err;
    enum mg_code rc = store_cluster(r->srv->store, &out, &err);

    if (rc != MG_OK) {
        srv_reply_error(r, &err);
        return;
    }
    srv_reply_json(r, 200, out);
}

const struct srv_route api_routes_health[] = {
    {"GET", "/healthz", MG_NEED_PUBLIC, SRV_BODY_NONE, healthz, NULL, NULL, NULL},
    {"GET", "/readyz", MG_NEED_PUBLIC, SRV_BODY_NONE, readyz, NULL, NULL, NULL},
    {"GET", "/api/v1/whoami", MG_NEED_ANY, SRV_BODY_NONE, whoami, NULL, NULL, NULL},
    {"GET", "/api/v1/cluster", MG_ROLE_ADMIN, SRV_BODY_NONE, cluster, NULL, NULL, NULL},
    {NULL, NULL, 0, 0, NULL, NULL, NULL, NULL},
};
