/*
 * runner.c - GET /api/v1/runner and the smoke tests of a version.
 */
#include "api.h"

#include <string.h>

#include "../runner/runner.h"

static void info(struct srv_req *r)
{
    srv_reply_json(r, 200, runner_info(r->srv));
}

static void list(struct srv_req *r)
{
    json_t *out = NULL;
    struct mg_error err;
    enum mg_code rc =
        store_smoke_list(r->srv->store, srv_param(r, "model"), srv_param_version(r), &out, &err);

    api_reply_result(r, rc, 200, out, &err);
}

static void queue_test(struct srv_req *r)
{
    static const char *const allowed[] = {"gpu", NULL};
    const char *gpu = "preferred";
    json_t *out = NULL;
    struct mg_error err;
    enum mg_code rc;

    if (r->body && (!api_object(r, r->body, allowed) ||
                    !api_string(r, r->body, "gpu", "gpu", false, 16, &gpu)))
        return;
    if (gpu == NULL)
        gpu = "preferred";
    if (strcmp(gpu, "required") != 0 && strcmp(gpu, "preferred") != 0 && strcmp(gpu, "none") != 0) {
        srv_fail(r, MG_EINVAL, "gpu", "gpu is required, preferred or none");
        return;
    }
    rc = runner_enqueue(r->srv, srv_param(r, "model"), srv_param_version(r), "manual", gpu, &out,
                        &err);
    api_reply_result(r, rc, 202, out, &err);
}

const struct srv_route srv_routes_runner[] = {
    {"GET", "/api/v1/runner", STORE_ROLE_READER, SRV_BODY_NONE, info, NULL, NULL, NULL},
    {"GET", "/api/v1/models/{model}/versions/{n}/smoke-tests", STORE_ROLE_READER, SRV_BODY_NONE,
     list, NULL, NULL, NULL},
    {"POST", "/api/v1/models/{model}/versions/{n}/smoke-tests", STORE_ROLE_DEPLOYER, SRV_BODY_JSON,
     queue_test, NULL, NULL, NULL},
    {NULL, NULL, 0, 0, NULL, NULL, NULL, NULL},
};
