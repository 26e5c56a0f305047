/*
 * identity.c - PUT/GET/DELETE /api/v1/identity/groups[/{group}] (admin): an IdP group's
 * roles, teams and aliases (docs/contract.md "Identity"); PUT/GET/DELETE
 * /api/v1/trusted-publishers[/{name}] (admin) and POST /api/v1/tokens/exchange (RFC 8693,
 * no auth: the CI token is the credential) (docs/contract.md "Trusted publishing").
 */
#include "api.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "../base/util.h"
#include "../gates/authz.h"
#include "../identity/jwt.h"
#include "../identity/oidc.h"

#define GRANT_TOKEN_EXCHANGE "urn:ietf:params:oauth:grant-type:token-exchange"
#define TYPE_ID_TOKEN "urn:ietf:params:oauth:token-type:id_token"
#define TYPE_JWT "urn:ietf:params:oauth:token-type:jwt"
#define TYPE_ACCESS_TOKEN "urn:ietf:params:oauth:token-type:access_token"
#define MAX_CLAIM_RULES 16

static void group_put(struct srv_req *r)
{
    static const char *const allowed[] = {"roles", "teams", "aliases", NULL};
    const json_t *teams = NULL, *aliases = NULL;
    json_t *out = NULL;
    unsigned bits = 0;
    struct mg_error err;

    if (!api_object(r, r->body, allowed) || !api_roles(r, &bits) ||
        !api_scope_list(r, "teams", api_team_name_ok, "team name", &teams) ||
        !api_scope_list(r, "aliases", gate_alias_pattern_valid,
                        "alias name or prefix with a trailing '*' (\"dev-*\")", &aliases))
        return;
    if (teams != NULL && (bits & MG_ROLE_ADMIN)) {
        srv_fail(r, MG_EINVAL, "teams", "an admin is always global; give the group no teams");
        return;
    }
    if (store_identity_group_put(r->srv->store, r->who.name, srv_param(r, "group"), bits, teams,
                                 aliases, &out, &err) != MG_OK) {
        srv_reply_error(r, &err);
        return;
    }
    srv_reply_json(r, 200, out);
}

static void group_list(struct srv_req *r)
{
    json_t *out = NULL;
    struct mg_error err;

    if (store_identity_group_list(r->srv->store, &out, &err) != MG_OK)
        srv_reply_error(r, &err);
    else
        srv_reply_json(r, 200, out);
}

static void group_delete(struct srv_req *r)
{
    struct mg_error err;

    if (store_identity_group_delete(r->srv->store, r->who.name, srv_param(r, "group"), &err) !=
        MG_OK)
        srv_reply_error(r, &err);
    else
        srv_reply_empty(r, 204);
}

/* ---- trusted publishers ------------------------------------------------------------ */

static bool model_pattern_ok(const char *s)
{
    size_t n = strlen(s);

    if (n > 0 && s[n - 1] == '*')
        n--; /* "fraud-*": a prefix */
    return n > 0 && n <= 63 && mg_valid_model_name(s, n);
}

/* claims: 1 to MAX_CLAIM_RULES string values, each non-empty. */
static bool claim_rules(struct srv_req *r, const json_t *v)
{
    const char *k;
    json_t *e;

    if (!json_is_object(v) || json_object_size(v) == 0 || json_object_size(v) > MAX_CLAIM_RULES) {
        srv_fail(r, MG_EINVAL, "claims",
                 "'claims' is an object of 1 to %d claim rules such as {\"repository\": "
                 "\"acme/fraud\"}: without one, every token of the issuer would do",
                 MAX_CLAIM_RULES);
        return false;
    }
    json_object_foreach((json_t *)v, k, e)
    {
        if (strlen(k) == 0 || strlen(k) > 64 || !json_is_string(e) || json_string_length(e) == 0 ||
            json_string_length(e) > 256 || strcmp(json_string_value(e), "*") == 0) {
            srv_fail(r, MG_EINVAL, "claims",
                     "claims.%.64s must be a value of 1 to 256 characters (exact, or a prefix "
                     "ending in '*'; a lone '*' matches anything and is refused)",
                     k);
            return false;
        }
    }
    return true;
}

static void publisher_put(struct srv_req *r)
{
    static const char *const allowed[] = {"issuer", "audience", "claims",      "roles", "teams",
                                          "models", "aliases",  "ttl_seconds", NULL};
    const json_t *teams = NULL, *aliases = NULL, *models = NULL;
    const char *issuer, *aud;
    json_t *cfg = NULL, *out = NULL, *ttl;
    unsigned bits = 0;
    struct mg_error err;

    if (!api_object(r, r->body, allowed) ||
        !api_string(r, r->body, "issuer", "issuer", true, STORE_ISSUER_MAX, &issuer) ||
        !api_string(r, r->body, "audience", "audience", true, 255, &aud))
        return;
    if (!id_url_allowed(issuer)) {
        srv_fail(r, MG_EINVAL, "issuer",
                 "'issuer' is the CI system's OpenID issuer, an https:// URL (http:// only on "
                 "loopback)");
        return;
    }
    if (!claim_rules(r, json_object_get(r->body, "claims")) || !api_roles(r, &bits) ||
        !api_scope_list(r, "teams", api_team_name_ok, "team name", &teams) ||
        !api_scope_list(r, "aliases", gate_alias_pattern_valid,
                        "alias name or prefix with a trailing '*' (\"dev-*\")", &aliases) ||
        !api_scope_list(r, "models", model_pattern_ok,
                        "model name or prefix with a trailing '*' (\"fraud-*\")", &models))
        return;
    if (bits & MG_ROLE_ADMIN) {
        srv_fail(r, MG_EINVAL, "roles", "a trusted publisher cannot grant admin");
        return;
    }
    ttl = json_object_get(r->body, "ttl_seconds");
    if (ttl &&
        (!json_is_integer(ttl) || json_integer_value(ttl) < 60 || json_integer_value(ttl) > 3600)) {
        srv_fail(r, MG_EINVAL, "ttl_seconds", "'ttl_seconds' is an integer from 60 to 3600");
        return;
    }
    cfg = json_deep_copy(r->body);
    if (cfg == NULL || json_object_set_new(cfg, "roles", store_roles_to_json(bits)) != 0 ||
        (ttl == NULL && json_object_set_new(cfg, "ttl_seconds", json_integer(900)) != 0)) {
        json_decref(cfg);
        srv_fail(r, MG_ENOMEM, NULL, "out of memory");
        return;
    }
    if (store_trusted_publisher_put(r->srv->store, r->who.name, srv_param(r, "name"), cfg, &out,
                                    &err) != MG_OK)
        srv_reply_error(r, &err);
    else
        srv_reply_json(r, 200, out);
    json_decref(cfg);
}

static void publisher_get(struct srv_req *r)
{
    json_t *out = NULL;
    struct mg_error err;

    if (store_trusted_publisher_get(r->srv->store, srv_param(r, "name"), &out, &err) != MG_OK)
        srv_reply_error(r, &err);
    else
        srv_reply_json(r, 200, out);
}

static void publisher_list(struct srv_req *r)
{
    json_t *out = NULL;
    struct mg_error err;

    if (store_trusted_publisher_list(r->srv->store, NULL, &out, &err) != MG_OK)
        srv_reply_error(r, &err);
    else
        srv_reply_json(r, 200, out);
}

static void publisher_delete(struct srv_req *r)
{
    struct mg_error err;

    if (store_trusted_publisher_delete(r->srv->store, r->who.name, srv_param(r, "name"), &err) !=
        MG_OK)
        srv_reply_error(r, &err);
    else
        srv_reply_empty(r, 204);
}

/* ---- POST /api/v1/tokens/exchange ------------------------------------------------------ */

/* 400 invalid_grant naming the check that failed; never the token. */
static void invalid_grant(struct srv_req *r, const char *check, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void invalid_grant(struct srv_req *r, const char *check, const char *fmt, ...)
{
    char msg[MG_ERR_MSG_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    srv_reply_json(r, 400,
                   json_pack("{s:{s:s, s:s, s:s}}", "error", "code", "invalid_grant", "message",
                             msg, "field", check));
}

/* The publisher object versions record: the rule claims' values from the token. NEW. */
static json_t *trusted_publisher_json(const json_t *p, const json_t *claims)
{
    json_t *seen = json_object(), *v;
    const char *k;

    json_object_foreach(json_object_get(p, "claims"), k, v)
    {
        json_t *c = json_object_get(claims, k);
        if (json_is_string(c))
            json_object_set(seen, k, c);
    }
    return json_pack("{s:s, s:O, s:O, s:O, s:o}", "kind", "trusted", "name",
                     json_object_get(p, "name"), "issuer", json_object_get(claims, "iss"),
                     "subject", json_object_get(claims, "sub"), "claims", seen);
}

static void exchange(struct srv_req *r)
{
    static const char *const allowed[] = {
        "grant_type", "subject_token", "subject_token_type", "requested_token_type",
        "audience",   "scope",         "resource",           NULL};
    const char *grant, *token, *type, *jti;
    char *iss = NULL, secret[STORE_TOKEN_SECRET_LEN + 1], why[MG_ERR_MSG_MAX] = "";
    char check[MG_ERR_FIELD_MAX] = "";
    json_t *pubs = NULL, *p, *claims = NULL, *match = NULL, *pj = NULL;
    struct id_oidc *oidc;
    struct store_exchange x;
    struct mg_error err = {0};
    enum mg_code rc;
    size_t i;

    if (!api_object(r, r->body, allowed) ||
        !api_string(r, r->body, "grant_type", "grant_type", true, 128, &grant) ||
        !api_string(r, r->body, "subject_token", "subject_token", true, ID_JWT_MAX, &token) ||
        !api_string(r, r->body, "subject_token_type", "subject_token_type", true, 128, &type))
        return;
    if (strcmp(grant, GRANT_TOKEN_EXCHANGE) != 0) {
        invalid_grant(r, "grant_type", "grant_type must be " GRANT_TOKEN_EXCHANGE);
        return;
    }
    if (strcmp(type, TYPE_ID_TOKEN) != 0 && strcmp(type, TYPE_JWT) != 0) {
        invalid_grant(r, "subject_token_type",
                      "subject_token_type must be " TYPE_ID_TOKEN " or " TYPE_JWT);
        return;
    }
    if (id_jwt_peek_issuer(token, strlen(token), &iss, &err) != MG_OK) {
        invalid_grant(r, err.field[0] ? err.field : "subject_token", "%s", err.message);
        goto out;
    }
    if (strlen(iss) > STORE_ISSUER_MAX ||
        store_trusted_publisher_list(r->srv->store, iss, &pubs, &err) != MG_OK ||
        json_array_size(json_object_get(pubs, "items")) == 0) {
        if (err.code != MG_OK && err.code != MG_EINVAL)
            srv_reply_error(r, &err);
        else
            invalid_grant(r, "iss", "no trusted publisher trusts this token's issuer");
        goto out;
    }
    if ((rc = id_registry_get(r->srv->ci_issuers, iss, &oidc, &err)) != MG_OK) {
        invalid_grant(r, "iss", "%s", err.message);
        goto out;
    }
    json_array_foreach(json_object_get(pubs, "items"), i, p)
    {
        const char *aud = json_string_value(json_object_get(p, "audience")), *failed = NULL;

        json_decref(claims);
        claims = NULL;
        memset(&err, 0, sizeof(err));
        rc = id_oidc_verify(oidc, token, strlen(token), aud, mg_now_ms(), &claims, &err);
        if (rc == MG_EUNAUTH) {
            snprintf(check, sizeof(check), "%s", err.field);
            snprintf(why, sizeof(why), "%s", err.message);
            continue;
        }
        if (rc != MG_OK) {
            srv_fail(r, MG_EUNAVAIL, NULL, "the CI token could not be checked: %s; retry shortly",
                     err.message);
            goto out;
        }
        if (!id_claims_match(json_object_get(p, "claims"), claims, &failed)) {
            snprintf(check, sizeof(check), "claims.%.64s", failed);
            snprintf(why, sizeof(why),
                     "the token's '%.64s' claim does not match trusted publisher '%s'", failed,
                     json_string_value(json_object_get(p, "name")));
            continue;
        }
        match = p;
        break;
    }
    if (match == NULL) {
        invalid_grant(r, check, "%s", why);
        goto out;
    }
    jti = json_string_value(json_object_get(claims, "jti"));
    if (jti == NULL || strlen(jti) == 0 || strlen(jti) > 255) {
        invalid_grant(r, "jti", "the CI token has no \"jti\", so it could be replayed");
        goto out;
    }
    pj = trusted_publisher_json(match, claims);
    if (pj == NULL) {
        srv_fail(r, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    memset(&x, 0, sizeof(x));
    x.issuer = iss;
    x.jti = jti;
    x.jti_expires_ms =
        ((int64_t)json_number_value(json_object_get(claims, "exp")) + ID_LEEWAY_S) * 1000;
    x.publisher = json_string_value(json_object_get(match, "name"));
    for (i = 0; i < json_array_size(json_object_get(match, "roles")); i++)
        x.roles |= store_role_from_name(
            json_string_value(json_array_get(json_object_get(match, "roles"), i)));
    x.teams =
        json_array_size(json_object_get(match, "teams")) ? json_object_get(match, "teams") : NULL;
    x.aliases = json_array_size(json_object_get(match, "aliases"))
                    ? json_object_get(match, "aliases")
                    : NULL;
    x.models =
        json_array_size(json_object_get(match, "models")) ? json_object_get(match, "models") : NULL;
    x.ttl_ms = json_integer_value(json_object_get(match, "ttl_seconds")) * 1000;
    x.subject = json_string_value(json_object_get(claims, "sub"));
    x.publisher_json = pj;
    rc = store_token_exchange(r->srv->store, &x, secret, &err);
    if (rc == MG_ECONFLICT) {
        invalid_grant(r, "jti", "%s", err.message);
        goto out;
    }
    if (rc != MG_OK) {
        srv_reply_error(r, &err);
        goto out;
    }
    srv_reply_json(r, 200,
                   json_pack("{s:s, s:s, s:s, s:I}", "access_token", secret, "issued_token_type",
                             TYPE_ACCESS_TOKEN, "token_type", "Bearer", "expires_in",
                             (json_int_t)(x.ttl_ms / 1000)));
    OPENSSL_cleanse(secret, sizeof(secret));
out:
    json_decref(pj);
    json_decref(claims);
    json_decref(pubs);
    free(iss);
}

/* ---- signed releases ------------------------------------------------------------------- */

static void attestation(struct srv_req *r)
{
    char *bundle = NULL;
    struct mg_error err;

    if (store_alias_attestation(r->srv->store, srv_param(r, "model"), srv_param(r, "alias"),
                                srv_param_version(r), &bundle, &err) != MG_OK) {
        srv_reply_error(r, &err);
        return;
    }
    srv_reply_bytes(r, 200, "application/json", bundle, strlen(bundle));
    free(bundle);
}

const struct srv_route api_routes_identity[] = {
    {"GET", "/api/v1/models/{model}/aliases/{alias}/history/{n}/attestation", MG_ROLE_READER,
     SRV_BODY_NONE, attestation, NULL, NULL, NULL},
    {"POST", "/api/v1/tokens/exchange", MG_NEED_PUBLIC, SRV_BODY_FORM, exchange, NULL, NULL, NULL},
    {"GET", "/api/v1/trusted-publishers", MG_ROLE_ADMIN, SRV_BODY_NONE, publisher_list, NULL, NULL,
     NULL},
    {"GET", "/api/v1/trusted-publishers/{name}", MG_ROLE_ADMIN, SRV_BODY_NONE, publisher_get, NULL,
     NULL, NULL},
    {"PUT", "/api/v1/trusted-publishers/{name}", MG_ROLE_ADMIN, SRV_BODY_JSON, publisher_put, NULL,
     NULL, NULL},
    {"DELETE", "/api/v1/trusted-publishers/{name}", MG_ROLE_ADMIN, SRV_BODY_NONE, publisher_delete,
     NULL, NULL, NULL},
    {"GET", "/api/v1/identity/groups", MG_ROLE_ADMIN, SRV_BODY_NONE, group_list, NULL, NULL, NULL},
    {"PUT", "/api/v1/identity/groups/{group}", MG_ROLE_ADMIN, SRV_BODY_JSON, group_put, NULL, NULL,
     NULL},
    {"DELETE", "/api/v1/identity/groups/{group}", MG_ROLE_ADMIN, SRV_BODY_NONE, group_delete, NULL,
     NULL, NULL},
    {NULL, NULL, 0, 0, NULL, NULL, NULL, NULL},
};
