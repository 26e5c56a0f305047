/*
 * keys.c - GET /api/v1/signing-keys: every public key that ever signed a
 * version, so bundles verify offline long after a rotation.
 */
#include "api.h"

static void list(struct srv_req *r)
{
    json_t *out = NULL;
    struct mg_error err;

    /* Replicas on one database publish every key any of them signs with there. */
    if (r->srv->cfg->database == NULL) {
        srv_reply_json(r, 200, sign_keyring_json(r->srv->keys));
        return;
    }
    if (store_signing_keys(r->srv->store, &out, &err) != MG_OK) {
        srv_reply_error(r, &err);
        return;
    }
    srv_reply_json(r, 200, out);
}

const struct srv_route srv_routes_keys[] = {
    {"GET", "/api/v1/signing-keys", SRV_PUBLIC, SRV_BODY_NONE, list, NULL, NULL, NULL},
    {NULL, NULL, 0, 0, NULL, NULL, NULL, NULL},
};
