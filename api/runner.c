/*
 * runner.c - GET /api/v1/runner and the smoke tests of a version.
 */
#include "api.h"

#include <string.h>

#include "../gates/authz.h"
#include "../control/control.h"

static void info(struct srv_req *r)
{
    srv_reply_json(r, 200, ctl_runner_info(r->srv->ctl));
}

static void list(struct srv_req *r)
{
    json_t *out = NULL;
    struct mg_error err;
    enum mg_code rc =
        store_smoke_list(r->srv->store, srv_param(r, "model"), srv_param_version(r), &out, &err);

    api_reply_result(r, rc, 200, out, &err);
}

/* An alias-scoped deployer tests only versions that no alias outside its scope routes: a
 * smoke test runs the version's image on the runner's machines, on behalf of whoever
 * deploys it. Each routing alias goes through the one decision (gate_authorize). */
static bool routed_in_scope(struct srv_req *r)
{
    const char *model = srv_param(r, "model");
    json_t *aliases = NULL, *a;
    struct gate_decision d;
    struct mg_error err;
    enum mg_code rc;
    size_t i;
    bool ok = true;

    if (r->who.naliases == 0 || (r->who.roles & MG_ROLE_ADMIN))
        return true;
    rc = store_version_routed(r->srv->store, model, srv_param_version(r), &aliases, &err);
    if (rc == MG_ENOTFOUND)
        return true; /* the enqueue answers 404 */
    if (rc != MG_OK) {
        srv_reply_error(r, &err);
        return false;
    }
    json_array_foreach(aliases, i, a)
    {
        if ((rc = srv_decide(r, MG_ROLE_DEPLOYER, model, json_string_value(a), &d, &err)) !=
            MG_OK) {
            srv_reply_error(r, &err);
            ok = false;
            break;
        }
        if (!d.allow) {
            srv_fail(r, d.status == 404 ? MG_ENOTFOUND : MG_EFORBIDDEN, NULL,
                     "version %lld of model '%s' is routed by alias '%s', outside this token's "
                     "aliases; %s",
                     (long long)srv_param_version(r), model, json_string_value(a), d.reason);
            ok = false;
            break;
        }
    }
    json_decref(aliases);
    return ok;
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
    if (!routed_in_scope(r))
        return;
    rc = ctl_runner_enqueue(r->srv->ctl, 0, srv_param(r, "model"), srv_param_version(r), "manual",
                            gpu, &out, &err);
    api_reply_result(r, rc, 202, out, &err);
}

const struct srv_route api_routes_runner[] = {
    {"GET", "/api/v1/runner", MG_ROLE_READER, SRV_BODY_NONE, info, NULL, NULL, NULL},
    {"GET", "/api/v1/models/{model}/versions/{n}/smoke-tests", MG_ROLE_READER, SRV_BODY_NONE, list,
     NULL, NULL, NULL},
    {"POST", "/api/v1/models/{model}/versions/{n}/smoke-tests", MG_ROLE_DEPLOYER, SRV_BODY_JSON,
     queue_test, NULL, NULL, NULL},
    {NULL, NULL, 0, 0, NULL, NULL, NULL, NULL},
};
