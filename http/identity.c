/*
 * identity.c - the server's side of docs/contract.md "Identity": --oidc-issuer's provider, IdP JWTs
 * as bearer tokens (verified by identity/, mapped to roles, teams and aliases through the
 * store's group mappings), and the "publisher" a new version records.
 *
 * A refused JWT is answered with the check that failed, never with the token, and nothing
 * here logs a token.
 */
#include "http.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/crypto.h>

#include "../base/util.h"
#include "../identity/oidc.h"

#define MAX_GROUPS 64

enum mg_code srv_identity_setup(struct srv *srv, struct mg_error *err)
{
    const struct srv_config *cfg = srv->cfg;
    struct id_oidc_options opt = {0};
    struct stat st;

    srv->ci_issuers = id_registry_new(NULL, NULL);
    if (srv->ci_issuers == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    if (cfg->oidc_issuer == NULL)
        return MG_OK;
    if (cfg->oidc_client_id == NULL && cfg->oidc_audience == NULL)
        return mg_fail(err, MG_EINVAL, "oidc-client-id",
                       "--oidc-issuer needs --oidc-client-id (or at least --oidc-audience)");
    if (cfg->oidc_client_secret_file) {
        if (stat(cfg->oidc_client_secret_file, &st) != 0)
            return mg_fail(err, MG_EINVAL, "oidc-client-secret-file", "cannot read %s",
                           cfg->oidc_client_secret_file);
        if ((st.st_mode & 077) != 0)
            return mg_fail(err, MG_EINVAL, "oidc-client-secret-file",
                           "%s is readable by others; chmod 600 it", cfg->oidc_client_secret_file);
    }
    if (cfg->oidc_client_secret_file) {
        char *text = calloc(1, 4097);
        FILE *f = fopen(cfg->oidc_client_secret_file, "r");
        size_t n = f && text ? fread(text, 1, 4096, f) : 0;
        if (f)
            fclose(f);
        if (text == NULL || n == 0) {
            free(text);
            return mg_fail(err, MG_EINVAL, "oidc-client-secret-file", "cannot read %s",
                           cfg->oidc_client_secret_file);
        }
        while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == '\r'))
            text[--n] = '\0';
        srv->oidc_client_secret = text;
    }
    opt.issuer = cfg->oidc_issuer;
    return id_oidc_new(&opt, &srv->oidc, err);
}

void srv_identity_release(struct srv *srv)
{
    id_oidc_free(&srv->oidc);
    id_registry_free(&srv->ci_issuers);
    if (srv->oidc_client_secret) {
        OPENSSL_cleanse(srv->oidc_client_secret, strlen(srv->oidc_client_secret));
        free(srv->oidc_client_secret);
        srv->oidc_client_secret = NULL;
    }
}

bool srv_looks_like_jwt(const char *cred)
{
    const char *d1 = strchr(cred, '.'), *d2 = d1 ? strchr(d1 + 1, '.') : NULL;

    return strncmp(cred, "eyJ", 3) == 0 && d2 != NULL && strchr(d2 + 1, '.') == NULL;
}

/* The groups claim as up to MAX_GROUPS borrowed strings (a string claim is one group). */
static size_t groups_of(const json_t *claims, const char *claim, const char **out)
{
    json_t *g = json_object_get(claims, claim), *v;
    size_t n = 0, i;

    if (json_is_string(g)) {
        out[n++] = json_string_value(g);
        return n;
    }
    json_array_foreach(g, i, v)
    {
        if (n < MAX_GROUPS && json_is_string(v) && json_string_length(v) <= STORE_GROUP_NAME_MAX)
            out[n++] = json_string_value(v);
    }
    return n;
}

/* A display name for who.name (created_by, audit): the email when it fits, else the
 * subject, else a digest of both; never used to tell people apart (issuer and subject
 * are). */
static void display_name(const json_t *claims, const char *iss, const char *sub, char *out,
                         size_t cap)
{
    const char *email = json_string_value(json_object_get(claims, "email"));
    char hex[65], *both = NULL;

    if (email && strlen(email) < cap && strlen(email) > 0) {
        snprintf(out, cap, "%s", email);
        return;
    }
    if (strlen(sub) + 4 < cap) {
        snprintf(out, cap, "sub:%s", sub);
        return;
    }
    if (asprintf(&both, "%s %s", iss, sub) < 0)
        both = NULL;
    mg_sha256_hex(both ? both : sub, both ? strlen(both) : strlen(sub), hex);
    free(both);
    snprintf(out, cap, "sub:%.20s", hex);
}

bool srv_identity_authenticate(struct srv_req *r, const char *jwt)
{
    const struct srv_config *cfg = r->srv->cfg;
    const char *aud = cfg->oidc_audience ? cfg->oidc_audience : cfg->oidc_client_id;
    json_t *claims = NULL;
    struct mg_error err = {0};
    enum mg_code rc;
    bool ok = false;

    if (r->srv->oidc == NULL) {
        srv_fail(r, MG_EUNAUTH, NULL,
                 "the bearer token looks like a JWT, but this server trusts no OpenID provider "
                 "(--oidc-issuer); use a modelgate token");
        return false;
    }
    rc = id_oidc_verify(r->srv->oidc, jwt, strlen(jwt), aud, mg_now_ms(), &claims, &err);
    if (rc == MG_EUNAUTH) {
        srv_fail(r, MG_EUNAUTH, NULL, "the bearer JWT was refused (%s check): %s", err.field,
                 err.message);
        goto out;
    }
    if (rc != MG_OK) {
        srv_fail(r, rc == MG_ENOMEM ? MG_ENOMEM : MG_EUNAVAIL, NULL,
                 "the bearer JWT could not be checked: %s; retry shortly", err.message);
        goto out;
    }
    ok = srv_identity_from_claims(r, claims);
out:
    json_decref(claims);
    return ok;
}

bool srv_identity_from_claims(struct srv_req *r, const json_t *claims)
{
    const struct srv_config *cfg = r->srv->cfg;
    const char *claim = cfg->oidc_groups_claim ? cfg->oidc_groups_claim : "groups";
    const char *groups[MAX_GROUPS], *iss, *sub;
    json_t *glist = NULL;
    struct mg_error err = {0};
    size_t ngroups, mapped = 0, i;
    enum mg_code rc;
    bool ok = false;

    iss = json_string_value(json_object_get(claims, "iss"));
    sub = json_string_value(json_object_get(claims, "sub"));
    if (strlen(iss) > STORE_ISSUER_MAX || strlen(sub) > STORE_SUBJECT_MAX) {
        srv_fail(r, MG_EUNAUTH, NULL, "the bearer JWT's iss or sub is longer than 255 bytes");
        goto out;
    }
    memset(&r->who, 0, sizeof(r->who));
    snprintf(r->who.id, sizeof(r->who.id), "idp");
    snprintf(r->who.kind, sizeof(r->who.kind), "sso");
    snprintf(r->who.issuer, sizeof(r->who.issuer), "%s", iss);
    snprintf(r->who.subject, sizeof(r->who.subject), "%s", sub);
    display_name(claims, iss, sub, r->who.name, sizeof(r->who.name));
    ngroups = groups_of(claims, claim, groups);
    glist = json_array();
    for (i = 0; glist && i < ngroups; i++)
        json_array_append_new(glist, json_string(groups[i]));
    r->identity = json_pack("{s:s, s:s, s:O?, s:O}", "issuer", iss, "subject", sub, "email",
                            json_object_get(claims, "email"), "groups", glist);
    if (glist == NULL || r->identity == NULL) {
        srv_fail(r, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    rc = store_identity_resolve(r->srv->store, groups, ngroups, &r->who, &mapped, &err);
    if (rc != MG_OK) {
        srv_reply_error(r, &err);
        goto out;
    }
    r->authenticated = true;
    if (mapped == 0 || r->who.roles == 0) {
        char seen[320] = "";
        size_t used = 0;
        for (i = 0; i < ngroups && used < sizeof(seen); i++)
            used += (size_t)snprintf(seen + used, sizeof(seen) - used, "%s%s", i ? ", " : "",
                                     groups[i]);
        srv_fail(r, MG_EFORBIDDEN, NULL,
                 "signed in as %s, but none of your groups (%s) maps to a role; an admin maps "
                 "one with PUT /api/v1/identity/groups/{group}",
                 r->who.name, ngroups ? seen : "none in the token");
        goto out;
    }
    ok = true;
out:
    json_decref(glist);
    return ok;
}

json_t *srv_identity_publisher(const struct srv_req *r)
{
    json_t *p = NULL;
    struct mg_error err;

    /* A token a trusted publisher's exchange issued: what the exchange recorded. */
    if (strcmp(r->who.kind, "trusted") == 0 &&
        store_token_publisher(r->srv->store, r->who.id, &p, &err) == MG_OK && p != NULL)
        return p;
    p = json_pack("{s:s, s:s}", "kind", r->who.kind[0] ? r->who.kind : "token", "name",
                  r->who.name);

    if (p && r->who.issuer[0]) {
        json_object_set_new(p, "issuer", json_string(r->who.issuer));
        json_object_set_new(p, "subject", json_string(r->who.subject));
    }
    return p;
}
