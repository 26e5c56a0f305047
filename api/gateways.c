/*
 * gateways.c - /api/v1/gateways: push targets (webhook, haproxy, nginx; the
 * built-in runner is always there). Secrets are never returned.
 */
#include "api.h"

#include <stdlib.h>
#include <string.h>

#include "../control/control.h"

static void put(struct srv_req *r)
{
    const char *kind;
    json_t *config = NULL, *out = NULL;
    char *secret = NULL;
    bool created = false;
    struct mg_error err;
    enum mg_code rc;

    if (!json_is_object(r->body)) {
        srv_fail(r, MG_EINVAL, NULL, "the body must be a GatewayConfig object");
        return;
    }
    if (!api_string(r, r->body, "kind", "kind", true, 16, &kind))
        return;
    if (ctl_gateway_config_validate(r->srv->ctl, kind, r->body, &config, &secret, &err) != MG_OK ||
        ctl_gateway_check(r->srv->ctl, srv_param(r, "name"), kind, config,
                          json_object_get(r->body, "models"), json_object_get(r->body, "aliases"),
                          &err) != MG_OK) {
        json_decref(config);
        if (secret)
            memset(secret, 0, strlen(secret));
        free(secret);
        srv_reply_error(r, &err);
        return;
    }
    rc = store_gateway_put(r->srv->store, r->who.name, srv_param(r, "name"), kind, config, secret,
                           json_object_get(r->body, "models"), json_object_get(r->body, "aliases"),
                           &out, &created, &err);
    json_decref(config);
    /* A secret the server made is shown once, in this reply; never by GET. */
    if (rc == MG_OK && secret && strcmp(kind, "webhook") == 0 &&
        json_object_get(r->body, "secret") == NULL)
        json_object_set_new(out, "secret", json_string(secret));
    if (secret) {
        memset(secret, 0, strlen(secret));
        free(secret);
    }
    if (rc == MG_OK)
        ctl_gateways_kick(r->srv->ctl);
    api_reply_result(r, rc, created ? 201 : 200, out, &err);
}

static void list(struct srv_req *r)
{
    json_t *out = NULL;
    struct mg_error err;
    enum mg_code rc = store_gateway_list(r->srv->store, &out, &err);

    api_reply_result(r, rc, 200, out, &err);
}

static void get(struct srv_req *r)
{
    json_t *out = NULL;
    struct mg_error err;
    enum mg_code rc = store_gateway_get(r->srv->store, srv_param(r, "name"), &out, &err);

    api_reply_result(r, rc, 200, out, &err);
}

static void delete (struct srv_req *r)
{
    struct mg_error err;

    if (store_gateway_delete(r->srv->store, r->who.name, srv_param(r, "name"), &err) != MG_OK)
        srv_reply_error(r, &err);
    else
        srv_reply_empty(r, 204);
}

const struct srv_route api_routes_gateways[] = {
    {"PUT", "/api/v1/gateways/{name}", MG_ROLE_ADMIN, SRV_BODY_JSON, put, NULL, NULL, NULL},
    {"GET", "/api/v1/gateways", MG_ROLE_ADMIN, SRV_BODY_NONE, list, NULL, NULL, NULL},
    {"GET", "/api/v1/gateways/{name}", MG_ROLE_ADMIN, SRV_BODY_NONE, get, NULL, NULL, NULL},
    {"DELETE", "/api/v1/gateways/{name}", MG_ROLE_ADMIN, SRV_BODY_NONE, delete, NULL, NULL, NULL},
    {NULL, NULL, 0, 0, NULL, NULL, NULL, NULL},
};
