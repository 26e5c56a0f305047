/*
 * tokens.c - POST/GET/DELETE /api/v1/tokens (admin), POST/GET /api/v1/teams, and
 * PUT /api/v1/models/{model}/owners (docs/contract.md "Teams").
 */
#include "api.h"

#include <string.h>

#include "../gates/authz.h"

static bool token_name_ok(const char *s)
{
    size_t i, n = strlen(s);

    if (n == 0 || n > STORE_TOKEN_NAME_MAX)
        return false;
    for (i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.' || c == '@'))
            return false;
    }
    return true;
}

/*
 * An optional array of distinct strings at body[key], at most STORE_MAX_SCOPES, each
 * accepted by ok(). *out: the array (BORROWED) or NULL when absent or empty. On a bad
 * value the reply is set and false returned.
 */
bool api_scope_list(struct srv_req *r, const char *key, bool (*ok)(const char *), const char *what,
                    const json_t **out)
{
    json_t *v = json_object_get(r->body, key), *e; /* BORROWED */
    size_t i, j;

    *out = NULL;
    if (v == NULL || json_is_null(v))
        return true;
    if (!json_is_array(v) || json_array_size(v) > STORE_MAX_SCOPES) {
        srv_fail(r, MG_EINVAL, key, "'%s' is an array of at most %d %s", key, STORE_MAX_SCOPES,
                 what);
        return false;
    }
    json_array_foreach(v, i, e)
    {
        if (!json_is_string(e) || !ok(json_string_value(e))) {
            srv_fail(r, MG_EINVAL, key, "%s[%zu] is not a valid %s", key, i, what);
            return false;
        }
        for (j = 0; j < i; j++) {
            if (json_equal(e, json_array_get(v, j))) {
                srv_fail(r, MG_EINVAL, key, "%s[%zu] repeats '%s'", key, i, json_string_value(e));
                return false;
            }
        }
    }
    *out = json_array_size(v) ? v : NULL;
    return true;
}

bool api_team_name_ok(const char *s)
{
    size_t i, n = strlen(s);

    if (n == 0 || n > STORE_TEAM_NAME_MAX || s[0] == '-')
        return false;
    for (i = 0; i < n; i++) {
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
            return false;
    }
    return true;
}

bool api_roles(struct srv_req *r, unsigned *bits)
{
    json_t *roles = json_object_get(r->body, "roles"), *v;
    size_t i;

    *bits = 0;
    if (!json_is_array(roles) || json_array_size(roles) == 0) {
        srv_fail(r, MG_EINVAL, "roles",
                 "'roles' must be a non-empty array of admin, publisher, reviewer, deployer, "
                 "reader");
        return false;
    }
    json_array_foreach(roles, i, v)
    {
        unsigned bit = json_is_string(v) ? store_role_from_name(json_string_value(v)) : 0;
        if (bit == 0) {
            srv_fail(r, MG_EINVAL, "roles",
                     "unknown role at roles[%zu]; use admin, publisher, reviewer, deployer or "
                     "reader",
                     i);
            return false;
        }
        *bits |= bit;
    }
    return true;
}

static void create(struct srv_req *r)
{
    static const char *const allowed[] = {"name", "roles", "teams", "aliases", NULL};
    const json_t *teams = NULL, *aliases = NULL;
    const char *name;
    json_t *out = NULL;
    unsigned bits = 0;
    struct mg_error err;

    if (!api_object(r, r->body, allowed) ||
        !api_string(r, r->body, "name", "name", true, STORE_TOKEN_NAME_MAX, &name))
        return;
    if (!token_name_ok(name)) {
        srv_fail(r, MG_EINVAL, "name",
                 "token names are 1 to 64 characters of letters, digits and - _ . @");
        return;
    }
    if (!api_roles(r, &bits) ||
        !api_scope_list(r, "teams", api_team_name_ok, "team name", &teams) ||
        !api_scope_list(r, "aliases", gate_alias_pattern_valid,
                        "alias name or prefix with a trailing '*' (\"dev-*\")", &aliases))
        return;
    if (teams != NULL && (bits & MG_ROLE_ADMIN)) {
        srv_fail(r, MG_EINVAL, "teams", "an admin token is always global; give it no teams");
        return;
    }
    if (store_token_create(r->srv->store, r->who.name, name, bits, teams, aliases, &out, &err) !=
        MG_OK) {
        srv_reply_error(r, &err);
        return;
    }
    /* A token a person created is that person's for separation of duties (docs/contract.md
     * "Identity"). */
    if (r->who.issuer[0] &&
        store_token_set_person(r->srv->store, json_string_value(json_object_get(out, "id")),
                               r->who.issuer, r->who.subject, &err) != MG_OK) {
        json_decref(out);
        srv_reply_error(r, &err);
        return;
    }
    srv_reply_json(r, 201, out);
}

static void list(struct srv_req *r)
{
    json_t *out = NULL;
    struct mg_error err;

    if (store_token_list(r->srv->store, &out, &err) != MG_OK)
        srv_reply_error(r, &err);
    else
        srv_reply_json(r, 200, out);
}

static void delete (struct srv_req *r)
{
    struct mg_error err;

    if (store_token_delete(r->srv->store, r->who.name, srv_param(r, "id"), &err) != MG_OK)
        srv_reply_error(r, &err);
    else
        srv_reply_empty(r, 204);
}

static void team_create(struct srv_req *r)
{
    static const char *const allowed[] = {"name", NULL};
    const char *name;
    json_t *out = NULL;
    struct mg_error err;

    if (!api_object(r, r->body, allowed) ||
        !api_string(r, r->body, "name", "name", true, STORE_TEAM_NAME_MAX, &name))
        return;
    if (!api_team_name_ok(name)) {
        srv_fail(r, MG_EINVAL, "name",
                 "a team name is 1 to 63 of a-z, 0-9 and '-', not starting with '-'");
        return;
    }
    if (store_team_create(r->srv->store, r->who.name, name, &out, &err) != MG_OK)
        srv_reply_error(r, &err);
    else
        srv_reply_json(r, 201, out);
}

static void team_list(struct srv_req *r)
{
    json_t *out = NULL;
    struct mg_error err;

    if (store_team_list(r->srv->store, &out, &err) != MG_OK)
        srv_reply_error(r, &err);
    else
        srv_reply_json(r, 200, out);
}

static void owners_put(struct srv_req *r)
{
    static const char *const allowed[] = {"teams", NULL};
    const json_t *teams = NULL;
    json_t *out = NULL, *empty = NULL;
    struct mg_error err;

    if (!api_object(r, r->body, allowed))
        return;
    if (!json_is_array(json_object_get(r->body, "teams"))) {
        srv_fail(r, MG_EINVAL, "teams",
                 "send {\"teams\":[\"risk\", ...]} (an empty array: no owner)");
        return;
    }
    if (!api_scope_list(r, "teams", api_team_name_ok, "team name", &teams))
        return;
    if (teams == NULL && (empty = json_array()) == NULL) {
        srv_fail(r, MG_ENOMEM, NULL, "out of memory");
        return;
    }
    if (store_model_set_owners(r->srv->store, r->who.name, srv_param(r, "model"),
                               teams ? teams : empty, &out, &err) != MG_OK)
        srv_reply_error(r, &err);
    else
        srv_reply_json(r, 200, out);
    json_decref(empty);
}

const struct srv_route api_routes_tokens[] = {
    {"POST", "/api/v1/teams", MG_ROLE_ADMIN, SRV_BODY_JSON, team_create, NULL, NULL, NULL},
    {"GET", "/api/v1/teams", MG_ROLE_READER, SRV_BODY_NONE, team_list, NULL, NULL, NULL},
    {"PUT", "/api/v1/models/{model}/owners", MG_ROLE_ADMIN, SRV_BODY_JSON, owners_put, NULL, NULL,
     NULL},
    {"POST", "/api/v1/tokens", MG_ROLE_ADMIN, SRV_BODY_JSON, create, NULL, NULL, NULL},
    {"GET", "/api/v1/tokens", MG_ROLE_ADMIN, SRV_BODY_NONE, list, NULL, NULL, NULL},
    {"DELETE", "/api/v1/tokens/{id}", MG_ROLE_ADMIN, SRV_BODY_NONE, delete, NULL, NULL, NULL},
    {NULL, NULL, 0, 0, NULL, NULL, NULL, NULL},
};
