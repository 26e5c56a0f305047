/*
 * datasets.c - /api/v1/datasets: register, read with lineage, and the
 * versions trained on a dataset or anything derived from it.
 */
#include "api.h"

#include <stdio.h>
#include <string.h>

#include "../base/util.h"

/*
 * Whose dataset records (docs/contract.md "Tenancy"): a token with teams registers records of its
 * teams and reads those and global ones; a global token (admin included) registers global
 * records ([""]) and reads every record (NULL when reading). NEW; NULL when out of memory
 * (or, reading, for a global token).
 */
static json_t *scope(const struct srv_req *r, bool reading)
{
    bool team = r->who.nteams > 0 && !(r->who.roles & MG_ROLE_ADMIN);
    json_t *a;
    size_t i;

    if (reading && !team)
        return NULL;
    if ((a = json_array()) == NULL)
        return NULL;
    for (i = 0; team && i < r->who.nteams; i++)
        json_array_append_new(a, json_string(r->who.teams[i]));
    if (reading || !team)
        json_array_append_new(a, json_string(""));
    return a;
}

static void create(struct srv_req *r)
{
    static const char *const allowed[] = {"digest", "name", "uri", "parents", "description", NULL};
    const char *digest, *s;
    json_t *parents, *p, *out = NULL, *owners;
    char field[32];
    bool created = false;
    struct mg_error err;
    enum mg_code rc;
    size_t i;

    if (!api_object(r, r->body, allowed) ||
        !api_string(r, r->body, "digest", "digest", true, 71, &digest) ||
        !api_string(r, r->body, "name", "name", true, 256, &s) ||
        !api_string(r, r->body, "uri", "uri", false, 2048, &s) ||
        !api_string(r, r->body, "description", "description", false, 16384, &s))
        return;
    if (!mg_valid_digest(digest, strlen(digest))) {
        srv_fail(r, MG_EINVAL, "digest", "digest must be sha256: followed by 64 lowercase hex");
        return;
    }
    parents = json_object_get(r->body, "parents");
    if (parents && (!json_is_array(parents) || json_array_size(parents) > 64)) {
        srv_fail(r, MG_EINVAL, "parents", "'parents' must be an array of at most 64 digests");
        return;
    }
    json_array_foreach(parents, i, p)
    {
        size_t j;
        snprintf(field, sizeof(field), "parents[%zu]", i);
        if (!json_is_string(p) || !mg_valid_digest(json_string_value(p), json_string_length(p))) {
            srv_fail(r, MG_EINVAL, field, "%s must be sha256: followed by 64 lowercase hex", field);
            return;
        }
        for (j = 0; j < i; j++) {
            if (json_equal(p, json_array_get(parents, j))) {
                srv_fail(r, MG_EINVAL, field, "%s repeats parents[%zu]; list each parent once",
                         field, j);
                return;
            }
        }
    }
    /* A digest of stored bytes is cited only by a token that may read them (docs/contract.md
     * "Tenancy"); a digest of data kept elsewhere (no blob) is the record's alone. */
    if (!srv_authorize_bytes(r, digest, "digest"))
        return;
    if ((owners = scope(r, false)) == NULL) {
        srv_fail(r, MG_ENOMEM, NULL, "out of memory");
        return;
    }
    rc = store_dataset_create(r->srv->store, r->who.name, owners, r->body, &out, &created, &err);
    json_decref(owners);
    api_reply_result(r, rc, created ? 201 : 200, out, &err);
}

static void get(struct srv_req *r)
{
    json_t *out = NULL, *owners = scope(r, true);
    struct mg_error err;
    enum mg_code rc = store_dataset_get(r->srv->store, owners, srv_param(r, "digest"), &out, &err);

    json_decref(owners);
    api_reply_result(r, rc, 200, out, &err);
}

static void versions(struct srv_req *r)
{
    json_t *out = NULL, *owners = scope(r, true), *items, *item;
    struct mg_error err;
    enum mg_code rc =
        store_dataset_versions(r->srv->store, owners, srv_param(r, "digest"), &out, &err);
    size_t i = 0;

    json_decref(owners);
    /* only the models this token can read */
    items = json_object_get(out, "items");
    while (rc == MG_OK && i < json_array_size(items)) {
        item = json_array_get(items, i);
        if (srv_model_visible(r, json_object_get(item, "_owners"))) {
            json_object_del(item, "_owners");
            i++;
        } else {
            json_array_remove(items, i);
        }
    }
    api_reply_result(r, rc, 200, out, &err);
}

const struct srv_route api_routes_datasets[] = {
    {"POST", "/api/v1/datasets", MG_ROLE_PUBLISHER, SRV_BODY_JSON, create, NULL, NULL, NULL},
    {"GET", "/api/v1/datasets/{digest}", MG_ROLE_READER, SRV_BODY_NONE, get, NULL, NULL, NULL},
    {"GET", "/api/v1/datasets/{digest}/versions", MG_ROLE_READER, SRV_BODY_NONE, versions, NULL,
     NULL, NULL},
    {NULL, NULL, 0, 0, NULL, NULL, NULL, NULL},
};
