/*
 * policies.c - /api/v1/models/{model}/policies/{alias}: a policy protects an
 * alias, which then moves only through promotions and rollbacks.
 */
#include "api.h"

#include <stdlib.h>

#include "../gates/policy.h"
#include "../control/release.h"

static void put(struct srv_req *r)
{
    struct gate_policy pol;
    json_t *canon, *out = NULL;
    struct mg_error err;
    enum mg_code rc;

    if (gate_policy_parse(r->body, &pol, &err) != MG_OK) {
        srv_reply_error(r, &err);
        return;
    }
    canon = gate_policy_to_json(&pol);
    rc = store_policy_put(r->srv->store, r->who.name, srv_param(r, "model"), srv_param(r, "alias"),
                          canon, &out, &err);
    json_decref(canon);
    api_reply_result(r, rc, 200, out, &err);
}

static void get(struct srv_req *r)
{
    json_t *out = NULL;
    struct mg_error err;
    enum mg_code rc =
        store_policy_get(r->srv->store, srv_param(r, "model"), srv_param(r, "alias"), &out, &err);

    api_reply_result(r, rc, 200, out, &err);
}

static void delete (struct srv_req *r)
{
    struct mg_error err;

    if (store_policy_delete(r->srv->store, r->who.name, srv_param(r, "model"),
                            srv_param(r, "alias"), &err) != MG_OK)
        srv_reply_error(r, &err);
    else
        srv_reply_empty(r, 204);
}

/* POST .../analysis/dry-run {"version": n}: the queries run on a worker thread (they wait
 * on Prometheus), the request suspended meanwhile. */
struct dry_run {
    int64_t version;
    json_t *out;
    struct mg_error err;
    enum mg_code rc;
};

static void dry_run_work(struct srv_req *r)
{
    struct dry_run *d = r->stream;

    d->rc = rel_analysis_dry_run(r->srv->ctl, srv_param(r, "model"), srv_param(r, "alias"),
                                 d->version, &d->out, &d->err);
}

static void dry_run_reply(struct srv_req *r)
{
    struct dry_run *d = r->stream;

    api_reply_result(r, d->rc, 200, d->out, &d->err);
    d->out = NULL; /* stolen by the reply */
}

static void dry_run_cleanup(struct srv_req *r)
{
    struct dry_run *d = r->stream;

    if (d == NULL)
        return;
    json_decref(d->out);
    free(d);
    r->stream = NULL;
}

static void dry_run(struct srv_req *r)
{
    static const char *const allowed[] = {"version", NULL};
    json_t *v = json_object_get(r->body, "version");
    struct dry_run *d;

    if (!api_object(r, r->body, allowed))
        return;
    if (!json_is_integer(v) || json_integer_value(v) < 1) {
        srv_fail(r, MG_EINVAL, "version", "version is the number of the version to measure");
        return;
    }
    if ((d = calloc(1, sizeof(*d))) == NULL) {
        srv_fail(r, MG_ENOMEM, NULL, "out of memory");
        return;
    }
    d->version = json_integer_value(v);
    r->stream = d;
    srv_defer_work(r, dry_run_work, dry_run_reply);
}

#define P "/api/v1/models/{model}/policies/{alias}"
const struct srv_route api_routes_policies[] = {
    {"PUT", P, MG_ROLE_ADMIN, SRV_BODY_JSON, put, NULL, NULL, NULL},
    {"GET", P, MG_ROLE_READER, SRV_BODY_NONE, get, NULL, NULL, NULL},
    {"DELETE", P, MG_ROLE_ADMIN, SRV_BODY_NONE, delete, NULL, NULL, NULL},
    {"POST", P "/analysis/dry-run", MG_ROLE_DEPLOYER, SRV_BODY_JSON, dry_run, NULL, NULL,
     dry_run_cleanup},
    {NULL, NULL, 0, 0, NULL, NULL, NULL, NULL},
};
