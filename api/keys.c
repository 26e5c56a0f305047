/*
 * keys.c - GET /api/v1/signing-keys: every public key that ever signed a
 * version, so bundles verify offline long after a rotation: each with the hint a bundle
 * names it by, and "active" on the one this server signs with now.
 */
#include "api.h"

#include "../control/control.h"

static void list(struct srv_req *r)
{
    const struct sign_keyring *keys;
    json_t *out = NULL;
    struct mg_error err;

    /* Replicas on one database publish every key any of them signs with there. */
    if (r->srv->cfg->database == NULL) {
        srv_reply_json(r, 200, sign_keyring_json(r->srv->ctl->keys));
        return;
    }
    keys = r->srv->ctl->keys;
    if (store_signing_keys(r->srv->store, keys && keys->active ? keys->active->keyid : NULL, &out,
                           &err) != MG_OK) {
        srv_reply_error(r, &err);
        return;
    }
    srv_reply_json(r, 200, out);
}

const struct srv_route api_routes_keys[] = {
    {"GET", "/api/v1/signing-keys", MG_NEED_PUBLIC, SRV_BODY_NONE, list, NULL, NULL, NULL},
    {NULL, NULL, 0, 0, NULL, NULL, NULL, NULL},
};
