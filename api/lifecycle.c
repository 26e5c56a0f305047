/*
 * lifecycle.c - docs/contract.md "Lifecycle": archive, unarchive and delete a version,
 * retention rules and their runs, a model's storage usage, blob garbage
 * collection, and withdrawing a dataset.
 */
#include "api.h"

#include <string.h>

#include "../base/util.h"
#include "../gates/lifecycle.h"
#include "../control/lifecycle.h"

/* ?dry_run=true|false; absent means true: a destructive run is asked for by name. */
static bool dry_run_arg(struct srv_req *r, bool *dry)
{
    const char *v = srv_query(r, "dry_run");

    if (v == NULL || strcmp(v, "true") == 0) {
        *dry = true;
        return true;
    }
    if (strcmp(v, "false") == 0) {
        *dry = false;
        return true;
    }
    srv_fail(r, MG_EINVAL, "dry_run",
             "dry_run is true or false (false removes; true, the default, only lists)");
    return false;
}

/* A reason from the body: required for deletions and withdrawals, for the audit log. */
static bool reason_arg(struct srv_req *r, const char **reason)
{
    static const char *const allowed[] = {"reason", NULL};

    if (r->body == NULL) {
        srv_fail(r, MG_EINVAL, "reason",
                 "send {\"reason\": \"…\"}: the audit log records why this was removed");
        return false;
    }
    if (!api_object(r, r->body, allowed) ||
        !api_string(r, r->body, "reason", "reason", true, 1024, reason))
        return false;
    if ((*reason)[0] == '\0') {
        srv_fail(r, MG_EINVAL, "reason", "reason must not be empty");
        return false;
    }
    return true;
}

static void apply(struct srv_req *r, enum life_op op, const char *reason)
{
    json_t *out = NULL;
    struct mg_error err;
    enum mg_code rc = ctl_life_apply(r->srv->ctl, r->who.name, srv_param(r, "model"),
                                     srv_param_version(r), op, reason, &out, &err);

    if (rc == MG_OK)
        api_version_decorate(out);
    api_reply_result(r, rc, 200, out, &err);
}

static void archive(struct srv_req *r)
{
    apply(r, LIFE_ARCHIVE, NULL);
}

static void unarchive(struct srv_req *r)
{
    apply(r, LIFE_UNARCHIVE, NULL);
}

static void delete_version(struct srv_req *r)
{
    const char *reason;

    if (reason_arg(r, &reason))
        apply(r, LIFE_DELETE, reason);
}

static void retention_put(struct srv_req *r)
{
    struct life_rule rule;
    json_t *canon = NULL;
    struct mg_error err;
    enum mg_code rc;

    if (r->body == NULL) {
        srv_fail(r, MG_EINVAL, NULL,
                 "send a rule {\"keep_last\": 10, \"keep_days\": 90, \"action\": "
                 "\"archive|delete\"}");
        return;
    }
    if ((rc = life_rule_parse(r->body, &rule, &err)) != MG_OK) {
        srv_reply_error(r, &err);
        return;
    }
    if ((canon = life_rule_to_json(&rule)) == NULL) {
        srv_fail(r, MG_ENOMEM, NULL, "out of memory");
        return;
    }
    rc = store_retention_put(r->srv->store, r->who.name, srv_param(r, "model"), canon, &err);
    if (rc == MG_OK) {
        srv_reply_json(r, 200, canon);
        return;
    }
    json_decref(canon);
    srv_reply_error(r, &err);
}

static void retention_get(struct srv_req *r)
{
    json_t *out = NULL;
    struct mg_error err;
    enum mg_code rc = store_retention_get(r->srv->store, srv_param(r, "model"), &out, &err);

    api_reply_result(r, rc, 200, out, &err);
}

static void retention_run(struct srv_req *r)
{
    json_t *out = NULL;
    struct mg_error err;
    enum mg_code rc;
    bool dry;

    if (!dry_run_arg(r, &dry))
        return;
    rc = ctl_retention_run(r->srv->ctl, r->who.name, srv_param(r, "model"), dry, &out, &err);
    api_reply_result(r, rc, 200, out, &err);
}

static void usage(struct srv_req *r)
{
    json_t *out = NULL;
    struct mg_error err;
    enum mg_code rc = store_model_usage(r->srv->store, srv_param(r, "model"), &out, &err);

    api_reply_result(r, rc, 200, out, &err);
}

static void gc(struct srv_req *r)
{
    json_t *out = NULL;
    struct mg_error err;
    enum mg_code rc;
    bool dry;

    if (!dry_run_arg(r, &dry))
        return;
    rc = ctl_gc_run(r->srv->ctl, r->who.name, dry, &out, &err);
    api_reply_result(r, rc, 200, out, &err);
}

static void withdraw(struct srv_req *r)
{
    const char *reason;
    json_t *out = NULL;
    struct mg_error err;
    bool changed = false;
    enum mg_code rc;

    if (!reason_arg(r, &reason))
        return;
    rc = store_dataset_withdraw(r->srv->store, r->who.name, srv_param(r, "digest"), reason, &out,
                                &changed, &err);
    /* changed or not, the answer is the dataset as withdrawn (the first withdrawal stands) */
    api_reply_result(r, rc, 200, out, &err);
}

#define M "/api/v1/models/{model}"
const struct srv_route api_routes_lifecycle[] = {
    {"POST", M "/versions/{n}/archive", MG_ROLE_PUBLISHER, SRV_BODY_NONE, archive, NULL, NULL,
     NULL},
    {"POST", M "/versions/{n}/unarchive", MG_ROLE_PUBLISHER, SRV_BODY_NONE, unarchive, NULL, NULL,
     NULL},
    {"DELETE", M "/versions/{n}", MG_ROLE_ADMIN, SRV_BODY_JSON, delete_version, NULL, NULL, NULL},
    {"PUT", M "/retention", MG_ROLE_ADMIN, SRV_BODY_JSON, retention_put, NULL, NULL, NULL},
    {"GET", M "/retention", MG_ROLE_READER, SRV_BODY_NONE, retention_get, NULL, NULL, NULL},
    {"POST", M "/retention/run", MG_ROLE_ADMIN, SRV_BODY_NONE, retention_run, NULL, NULL, NULL},
    {"GET", M "/usage", MG_ROLE_READER, SRV_BODY_NONE, usage, NULL, NULL, NULL},
    {"POST", "/api/v1/admin/gc", MG_ROLE_ADMIN, SRV_BODY_NONE, gc, NULL, NULL, NULL},
    {"POST", "/api/v1/datasets/{digest}/withdraw", MG_ROLE_ADMIN, SRV_BODY_JSON, withdraw, NULL,
     NULL, NULL},
    {NULL, NULL, 0, 0, NULL, NULL, NULL, NULL},
};
