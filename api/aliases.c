/*
 * aliases.c - /api/v1/models/{model}/aliases: read, direct set and delete of
 * unprotected aliases, history, last-known-good and rollback.
 */
#include "api.h"

#include <string.h>

#include "../base/util.h"
#include "../gates/routing.h"
#include "../http/cache.h"
#include "../control/release.h"
#include "../model/alias.h"

static bool parse_weights(struct srv_req *r, const json_t *v, const json_t *list,
                          struct mg_routes *out);

/* Validate {"version":n} or {"routes":[{"version","weight"}]}, each with optional "match"
 * and "shadow" (docs/contract.md "Routing strategies"), into *out. */
static bool parse_routes(struct srv_req *r, struct mg_routes *out)
{
    static const char *const allowed[] = {"version", "routes", "match", "shadow", NULL};
    struct mg_error err;
    json_t *v, *list, *match = NULL, *shadow = NULL;
    enum mg_code rc;

    memset(out, 0, sizeof(*out));
    if (!api_object(r, r->body, allowed))
        return false;
    v = json_object_get(r->body, "version");
    list = json_object_get(r->body, "routes");
    if ((v == NULL) == (list == NULL)) {
        srv_fail(r, MG_EINVAL, NULL, "give either {\"version\": n} or {\"routes\": [...]}");
        return false;
    }
    if (!parse_weights(r, v, list, out))
        return false;
    /* gates/ checks match and shadow and gives their canonical form; the record takes it. */
    rc = gate_routing_parse(json_object_get(r->body, "match"), json_object_get(r->body, "shadow"),
                            &match, &shadow, &err);
    if (rc == MG_OK) {
        struct mg_routes ms;

        if ((rc = mg_routes_from_json(NULL, match, shadow, &ms, &err)) == MG_OK) {
            memcpy(out->match, ms.match, sizeof(out->match));
            out->nmatch = ms.nmatch;
            out->shadow = ms.shadow;
        }
    }
    json_decref(match);
    json_decref(shadow);
    if (rc != MG_OK) {
        srv_reply_error(r, &err);
        return false;
    }
    return true;
}

/* The weighted half of parse_routes: {"version"} or {"routes"}. */
static bool parse_weights(struct srv_req *r, const json_t *v, const json_t *list,
                          struct mg_routes *out)
{
    json_t *x;
    size_t i, j;
    int64_t sum = 0;
    char field[48];

    if (v) {
        if (!json_is_integer(v) || json_integer_value(v) < 1) {
            srv_fail(r, MG_EINVAL, "version", "version must be an integer >= 1");
            return false;
        }
        out->routes[0].version = json_integer_value(v);
        out->routes[0].weight = 100;
        out->nroutes = 1;
        return true;
    }
    if (!json_is_array(list) || json_array_size(list) == 0 ||
        json_array_size(list) > MG_ROUTES_MAX) {
        srv_fail(r, MG_EINVAL, "routes", "routes must be an array of 1 to 16 {version, weight}");
        return false;
    }
    json_array_foreach(list, i, x)
    {
        static const char *const rkeys[] = {"version", "weight", NULL};
        json_t *ver = json_object_get(x, "version"), *w = json_object_get(x, "weight");
        snprintf(field, sizeof(field), "routes[%zu]", i);
        if (!json_is_object(x) || !api_object(r, x, rkeys))
            return false;
        if (!json_is_integer(ver) || json_integer_value(ver) < 1 || !json_is_integer(w) ||
            json_integer_value(w) < 0 || json_integer_value(w) > 100) {
            srv_fail(r, MG_EINVAL, field,
                     "%s needs an integer version >= 1 and an integer weight from 0 to 100", field);
            return false;
        }
        for (j = 0; j < i; j++) {
            if (json_equal(ver, json_object_get(json_array_get(list, j), "version"))) {
                srv_fail(r, MG_EINVAL, field, "%s repeats version %lld; versions must be distinct",
                         field, (long long)json_integer_value(ver));
                return false;
            }
        }
        sum += json_integer_value(w);
        out->routes[i].version = json_integer_value(ver);
        out->routes[i].weight = (int)json_integer_value(w);
    }
    if (sum != 100) {
        srv_fail(r, MG_EINVAL, "routes", "route weights must sum to 100, not %lld", (long long)sum);
        return false;
    }
    out->nroutes = json_array_size(list);
    return true;
}

static void resume_alias(struct srv_req *r)
{
    json_t *out = NULL;
    struct mg_error err;
    const struct api_waiting *w = api_waiting_of(r);
    enum mg_code rc = rel_alias_at(r->srv->ctl, w->model, w->alias, w->gen, &out, &err);

    api_reply_result(r, rc, 200, out, &err);
}

/* Reply with the alias now, or once its gateways caught up (?wait). */
static void reply_alias(struct srv_req *r, enum mg_code rc, json_t *out, const struct mg_error *err,
                        int64_t wait)
{
    if (rc == MG_OK && wait > 0) {
        api_defer_wait(r, srv_param(r, "model"), srv_param(r, "alias"),
                       json_integer_value(json_object_get(out, "generation")), wait, NULL, 200,
                       resume_alias);
        json_decref(out);
        return;
    }
    api_reply_result(r, rc, 200, out, err);
}

static void list(struct srv_req *r)
{
    json_t *out = NULL;
    struct mg_error err;
    enum mg_code rc = rel_alias_list(r->srv->ctl, srv_param(r, "model"), &out, &err);

    api_reply_result(r, rc, 200, out, &err);
}

static void get(struct srv_req *r)
{
    json_t *out = NULL;
    struct mg_error err;
    enum mg_code rc =
        rel_alias_get(r->srv->ctl, srv_param(r, "model"), srv_param(r, "alias"), &out, &err);

    api_reply_result(r, rc, 200, out, &err);
}

static void put(struct srv_req *r)
{
    struct mg_routes routes;
    json_t *out = NULL;
    struct mg_error err;
    int64_t wait;
    enum mg_code rc;

    if (api_wait(r, &wait) && parse_routes(r, &routes)) {
        rc = rel_alias_set(r->srv->ctl, r->who.name, srv_param(r, "model"), srv_param(r, "alias"),
                           &routes, &out, &err);
        reply_alias(r, rc, out, &err, wait);
    }
}

static void delete (struct srv_req *r)
{
    struct mg_error err;

    if (rel_alias_delete(r->srv->ctl, r->who.name, srv_param(r, "model"), srv_param(r, "alias"),
                         &err) != MG_OK)
        srv_reply_error(r, &err);
    else
        srv_reply_empty(r, 204);
}

static void history(struct srv_req *r)
{
    struct store_page page;
    json_t *out = NULL;
    struct mg_error err;
    enum mg_code rc;

    if (!srv_page(r, &page))
        return;
    rc = store_alias_history(r->srv->store, srv_param(r, "model"), srv_param(r, "alias"), &page,
                             &out, &err);
    api_reply_result(r, rc, 200, out, &err);
}

/* CI asks this on every deploy: answered from the response cache while
 * nothing has been written since. */
static void lkg(struct srv_req *r)
{
    const char *model = srv_param(r, "model"), *alias = srv_param(r, "alias");
    char key[SRV_CACHE_KEY_MAX];
    json_t *out = NULL;
    struct mg_error err;
    uint64_t epoch;
    enum mg_code rc;

    snprintf(key, sizeof(key), "lkg\n%s\n%s", model, alias);
    if (srv_reply_cached(r, model, key, &epoch))
        return;
    rc = rel_lkg(r->srv->ctl, model, alias, &out, &err);
    if (rc == MG_OK)
        srv_reply_json_keep(r, out, key, epoch);
    else
        srv_reply_error(r, &err);
}

static void rollback(struct srv_req *r)
{
    static const char *const allowed[] = {"reason", NULL};
    const char *reason = NULL;
    json_t *out = NULL;
    struct mg_error err;
    int64_t wait;
    enum mg_code rc;

    if (!api_wait(r, &wait))
        return;
    if (r->body && (!api_object(r, r->body, allowed) ||
                    !api_string(r, r->body, "reason", "reason", false, 1024, &reason)))
        return;
    rc = rel_rollback(r->srv->ctl, r->who.name, srv_param(r, "model"), srv_param(r, "alias"),
                      reason ? reason : "rollback requested", &out, &err);
    reply_alias(r, rc, out, &err, wait);
}

#define A "/api/v1/models/{model}/aliases"
const struct srv_route api_routes_aliases[] = {
    {"GET", A, MG_ROLE_READER, SRV_BODY_NONE, list, NULL, NULL, NULL},
    {"GET", A "/{alias}", MG_ROLE_READER, SRV_BODY_NONE, get, NULL, NULL, NULL},
    {"PUT", A "/{alias}", MG_ROLE_DEPLOYER, SRV_BODY_JSON, put, NULL, NULL, NULL},
    {"DELETE", A "/{alias}", MG_ROLE_DEPLOYER, SRV_BODY_NONE, delete, NULL, NULL, NULL},
    {"GET", A "/{alias}/history", MG_ROLE_READER, SRV_BODY_NONE, history, NULL, NULL, NULL},
    {"GET", A "/{alias}/last-known-good", MG_ROLE_READER, SRV_BODY_NONE, lkg, NULL, NULL, NULL},
    {"POST", A "/{alias}/rollback", MG_ROLE_DEPLOYER, SRV_BODY_JSON, rollback, NULL, NULL, NULL},
    {NULL, NULL, 0, 0, NULL, NULL, NULL, NULL},
};
