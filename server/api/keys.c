/*
 * keys.c - GET /api/v1/signing-keys: every public key that ever signed a
 * version, so bundles verify offline long after a rotation.
 */
#include "api.h"

static void list(struct srv_req *r)
{
    srv_reply_json(r, 200, sign_keyring_json(r->srv->keys));
}

const struct srv_route srv_routes_keys[] = {
    {"GET", "/api/v1/signing-keys", SRV_PUBLIC, SRV_BODY_NONE, list, NULL, NULL, NULL},
    {NULL, NULL, 0, 0, NULL, NULL, NULL, NULL},
};
