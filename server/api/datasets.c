/*
 * datasets.c - /api/v1/datasets: register, read with lineage, and the
 * versions trained on a dataset or anything derived from it.
 */
#include "api.h"

#include <stdio.h>
#include <string.h>

#include "../../common/util.h"

static void create(struct srv_req *r)
{
    static const char *const allowed[] = {"digest", "name", "uri", "parents", "description", NULL};
    const char *digest, *s;
    json_t *parents, *p, *out = NULL;
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
    rc = store_dataset_create(r->srv->store, r->who.name, r->body, &out, &created, &err);
    api_reply_result(r, rc, created ? 201 : 200, out, &err);
}

static void get(struct srv_req *r)
{
    json_t *out = NULL;
    struct mg_error err;
    enum mg_code rc = store_dataset_get(r->srv->store, srv_param(r, "digest"), &out, &err);

    api_reply_result(r, rc, 200, out, &err);
}

static void versions(struct srv_req *r)
{
    json_t *out = NULL;
    struct mg_error err;
    enum mg_code rc = store_dataset_versions(r->srv->store, srv_param(r, "digest"), &out, &err);

    api_reply_result(r, rc, 200, out, &err);
}

const struct srv_route srv_routes_datasets[] = {
    {"POST", "/api/v1/datasets", STORE_ROLE_PUBLISHER, SRV_BODY_JSON, create, NULL, NULL, NULL},
    {"GET", "/api/v1/datasets/{digest}", STORE_ROLE_READER, SRV_BODY_NONE, get, NULL, NULL, NULL},
    {"GET", "/api/v1/datasets/{digest}/versions", STORE_ROLE_READER, SRV_BODY_NONE, versions, NULL,
     NULL, NULL},
    {NULL, NULL, 0, 0, NULL, NULL, NULL, NULL},
};
