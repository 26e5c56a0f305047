/*
 * authz.c - who is asking and may they: bearer tokens and UI sessions (with CSRF and
 * same-origin checks); under /v2/ (the OCI distribution API) bearer tokens or HTTP Basic
 * with the token as password, and 401s carrying the distribution token flow's challenge;
 * and every route's authorisation through the one decision in gates/authz.c
 * (srv_authorize).
 */
#include "http.h"
#include "http_int.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <openssl/crypto.h>

#include "../gates/authz.h"

/* The principal as gates/ sees it; the pointer arrays live in *buf. */
struct token_view {
    struct gate_token t;
    const char *teams[STORE_MAX_SCOPES], *aliases[STORE_MAX_SCOPES];
};

static void token_view(const struct store_principal *who, struct token_view *v)
{
    size_t i;

    for (i = 0; i < who->nteams && i < STORE_MAX_SCOPES; i++)
        v->teams[i] = who->teams[i];
    for (i = 0; i < who->naliases && i < STORE_MAX_SCOPES; i++)
        v->aliases[i] = who->aliases[i];
    v->t.name = who->name;
    v->t.roles = who->roles;
    v->t.teams = v->teams;
    v->t.nteams = who->nteams;
    v->t.aliases = v->aliases;
    v->t.naliases = who->naliases;
}

/* Whether model is one of who's model patterns (a name, or a prefix and '*'). */
static bool models_allow(const struct store_principal *who, const char *model)
{
    for (size_t i = 0; i < who->nmodels; i++) {
        const char *p = who->models[i];
        size_t n = strlen(p);
        if (n > 0 && p[n - 1] == '*' ? strncmp(model, p, n - 1) == 0 : strcmp(model, p) == 0)
            return true;
    }
    return false;
}

enum mg_code srv_decide(const struct srv_req *r, unsigned need, const char *model,
                        const char *alias, struct gate_decision *d, struct mg_error *err)
{
    struct token_view v;
    struct gate_model m = {model, NULL, 0};
    struct gate_request q = {need,  NULL,
                             alias, r->srv->cfg->read_scope_team ? GATE_READ_TEAM : GATE_READ_ALL,
                             NULL,  srv_param(r, "team")};
    const char *owners[STORE_MAX_SCOPES];
    json_t *own = NULL, *o;
    size_t i;

    token_view(&r->who, &v);
    /* Owners matter only to a token with teams: a global token never pays the lookup. */
    if (model != NULL && r->who.nteams > 0 && !(r->who.roles & MG_ROLE_ADMIN)) {
        enum mg_code rc = store_model_owners(r->srv->store, model, &own, err);

        if (rc == MG_OK) {
            json_array_foreach(own, i, o)
            {
                if (m.nowners < STORE_MAX_SCOPES && json_is_string(o))
                    owners[m.nowners++] = json_string_value(o);
            }
            m.owners = owners;
            q.model = &m;
        } else if (rc != MG_ENOTFOUND) {
            return rc;
        }
    }
    gate_authorize(&v.t, &q, d);
    json_decref(own);
    /* A trusted publisher's token reaches its models only (docs/contract.md "Trusted publishing").
     */
    if (d->allow && model != NULL && r->who.nmodels > 0 && !models_allow(&r->who, model)) {
        d->allow = false;
        d->status = 403;
        snprintf(d->reason, sizeof(d->reason),
                 "this token may reach only its trusted publisher's models, not '%.64s'", model);
    }
    return MG_OK;
}

bool srv_authorize(struct srv_req *r, const char *model, const char *alias)
{
    struct gate_decision d;
    struct mg_error err;

    if (srv_decide(r, r->route->roles, model, alias, &d, &err) != MG_OK) {
        srv_reply_error(r, &err);
        return false;
    }
    if (!d.allow) {
        srv_fail(r, d.status == 404 ? MG_ENOTFOUND : MG_EFORBIDDEN, NULL, "%s", d.reason);
        return false;
    }
    return true;
}

bool srv_authorize_bytes(struct srv_req *r, const char *digest, const char *field)
{
    struct token_view v;
    struct gate_bytes b = {digest, NULL, 0, NULL, 0, false};
    struct gate_request q = {r->route->roles,
                             NULL,
                             NULL,
                             r->srv->cfg->read_scope_team ? GATE_READ_TEAM : GATE_READ_ALL,
                             &b,
                             NULL};
    struct gate_decision d;
    struct gate_model *citers = NULL;
    const char **names = NULL, **teams = NULL;
    json_t *h = NULL, *a, *o;
    struct mg_error err;
    enum mg_code rc;
    size_t i, j, n;
    bool ok = false;

    if (r->who.roles & MG_ROLE_ADMIN)
        return true; /* admin reads every stored byte, released ones too */
    rc = store_blob_holders(r->srv->store, digest, &h, &err);
    if (rc == MG_ENOTFOUND)
        return true;
    if (rc != MG_OK) {
        srv_reply_error(r, &err);
        return false;
    }
    a = json_object_get(h, "uploaders");
    n = json_array_size(json_object_get(h, "citers"));
    teams = calloc(json_array_size(a) + 1, sizeof(*teams));
    citers = calloc(n + 1, sizeof(*citers));
    names = calloc((n + 1) * STORE_MAX_SCOPES, sizeof(*names));
    if (teams == NULL || citers == NULL || names == NULL) {
        srv_fail(r, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    json_array_foreach(a, i, o) teams[b.nuploaders++] = json_string_value(o);
    b.uploaders = teams;
    json_array_foreach(json_object_get(h, "citers"), i, a)
    {
        citers[i].name = "";
        citers[i].owners = names + i * STORE_MAX_SCOPES;
        json_array_foreach(a, j, o)
        {
            if (citers[i].nowners < STORE_MAX_SCOPES && json_is_string(o))
                names[i * STORE_MAX_SCOPES + citers[i].nowners++] = json_string_value(o);
        }
    }
    b.citers = citers;
    b.nciters = n;
    b.released = json_is_true(json_object_get(h, "released"));
    token_view(&r->who, &v);
    gate_authorize(&v.t, &q, &d);
    if (!d.allow)
        srv_fail(r,
                 d.status == 404   ? MG_ENOTFOUND
                 : d.status == 410 ? MG_EGONE
                                   : MG_EFORBIDDEN,
                 field, "%s", d.reason);
    ok = d.allow;
out:
    free(teams);
    free(citers);
    free(names);
    json_decref(h);
    return ok;
}

bool srv_model_visible(const struct srv_req *r, const json_t *owners)
{
    struct token_view v;
    const char *names[STORE_MAX_SCOPES];
    struct gate_model m = {"", names, 0};
    json_t *o;
    size_t i;

    if (!r->srv->cfg->read_scope_team || r->who.nteams == 0 || (r->who.roles & MG_ROLE_ADMIN))
        return true;
    json_array_foreach(owners, i, o)
    {
        if (m.nowners < STORE_MAX_SCOPES && json_is_string(o))
            names[m.nowners++] = json_string_value(o);
    }
    token_view(&r->who, &v);
    return gate_team_owns(&v.t, &m);
}

/* Every route's authorisation, from its path: the model and alias it names, if any.
 * Handlers that learn the model from the body or a stored promotion call
 * srv_authorize() again with it. */
static bool authorize_route(struct srv_req *r)
{
    return srv_authorize(r, srv_param(r, "model"), srv_param(r, "alias"));
}

static bool is_mutation(const char *m)
{
    return strcmp(m, "GET") != 0 && strcmp(m, "HEAD") != 0 && strcmp(m, "OPTIONS") != 0;
}

/* Host is an IP literal or localhost, with an optional port: a name nobody can point
 * elsewhere through DNS. */
static bool host_is_literal(const char *host)
{
    char name[80];
    const char *colon;
    size_t n;
    unsigned char addr[16];

    if (host[0] == '[') { /* [v6]:port */
        const char *end = strchr(host, ']');

        if (end == NULL || (size_t)(end - host - 1) >= sizeof(name))
            return false;
        memcpy(name, host + 1, (size_t)(end - host - 1));
        name[end - host - 1] = '\0';
        return inet_pton(AF_INET6, name, addr) == 1 && (end[1] == '\0' || end[1] == ':');
    }
    colon = strchr(host, ':');
    n = colon ? (size_t)(colon - host) : strlen(host);
    if (n >= sizeof(name))
        return false;
    memcpy(name, host, n);
    name[n] = '\0';
    return strcasecmp(name, "localhost") == 0 || inet_pton(AF_INET, name, addr) == 1;
}

/*
 * Origin must name this very server. With --public-url, it must be that origin (what a
 * browser behind a proxy sees). Without it, scheme://Host, and only when Host is an IP
 * literal or localhost: a DNS name in Host may be an attacker's that was rebound to us
 * (DNS rebinding), and would make its own origin look like ours.
 */
bool srv_same_origin(const struct srv_req *r)
{
    const char *origin = srv_header(r, "Origin"), *host = srv_header(r, MHD_HTTP_HEADER_HOST);
    const char *rest;

    if (origin == NULL)
        return false;
    if (r->srv->cfg->public_url != NULL)
        return strcasecmp(origin, r->srv->cfg->public_url) == 0;
    if (host == NULL || !host_is_literal(host))
        return false;
    if (strncmp(origin, "http://", 7) == 0 && !r->srv->tls)
        rest = origin + 7;
    else if (strncmp(origin, "https://", 8) == 0 && r->srv->tls)
        rest = origin + 8;
    else
        return false;
    return strcmp(rest, host) == 0;
}

/* The credentials could not be checked (the database failed): 503 when it is
 * busy or unreachable, 500 otherwise; never "unauthenticated", which would
 * tell a client to throw away a good token. */
static void fail_unchecked(struct srv_req *r, enum mg_code rc)
{
    srv_fail(r, rc == MG_EUNAVAIL ? MG_EUNAVAIL : MG_EDB, NULL,
             "the server could not check these credentials: its database is unavailable; "
             "retry shortly");
}

/* A request from the UI: the session cookie, and for changes the CSRF token
 * in X-CSRF-Token plus a same-origin Origin header. */
static bool check_session(struct srv_req *r)
{
    const char *id = MHD_lookup_connection_value(r->conn, MHD_COOKIE_KIND, SRV_SESSION_COOKIE);
    const char *sent = srv_header(r, "X-CSRF-Token");
    char csrf[STORE_CSRF_LEN + 1];
    enum mg_code rc = store_session_check(r->srv->store, id, strlen(id), SRV_SESSION_IDLE_MS,
                                          SRV_SESSION_MAX_MS, &r->who, csrf);

    if (rc != MG_OK) {
        if (rc == MG_EUNAUTH)
            srv_fail(r, MG_EUNAUTH, NULL, "your session has ended; sign in again");
        else
            fail_unchecked(r, rc);
        return false;
    }
    r->authenticated = true;
    r->via_session = true;
    snprintf(r->csrf, sizeof(r->csrf), "%s", csrf);
    if (is_mutation(r->method)) {
        if (sent == NULL || strlen(sent) != STORE_CSRF_LEN ||
            !mg_ct_equal(sent, csrf, STORE_CSRF_LEN)) {
            srv_fail(r, MG_EFORBIDDEN, NULL,
                     "this change needs the session's CSRF token in X-CSRF-Token");
            return false;
        }
        if (!srv_same_origin(r)) {
            srv_fail(r, MG_EFORBIDDEN, NULL,
                     "this change must come from this server's own pages (reached through a "
                     "proxy or a DNS name? start modelgated with --public-url)");
            return false;
        }
    }
    return authorize_route(r);
}

/* ---- the OCI distribution API (docs/contract.md "OCI distribution (read-only)")
 * ------------------- */

bool srv_oci_credentials(const struct srv_req *r, char *out, size_t cap)
{
    const char *h = srv_header(r, MHD_HTTP_HEADER_AUTHORIZATION), *colon;
    uint8_t *dec;
    size_t n, dlen = 0, plen;
    bool ok = false;

    if (h == NULL || cap == 0)
        return false;
    if (strncasecmp(h, "Bearer ", 7) == 0) {
        for (h += 7; *h == ' ';)
            h++;
        n = strlen(h);
        if (n == 0 || n >= cap)
            return false;
        memcpy(out, h, n + 1);
        return true;
    }
    if (strncasecmp(h, "Basic ", 6) != 0)
        return false;
    for (h += 6; *h == ' ';)
        h++;
    /* Basic: base64 of "user:password"; the user name is not used, the password is the
     * token (any name works: skopeo, oras and docker all insist on one). */
    n = strlen(h);
    if (n == 0 || n > 1024 || (dec = mg_base64_decode(h, n, &dlen)) == NULL)
        return false;
    colon = memchr(dec, ':', dlen);
    if (colon != NULL) {
        plen = dlen - (size_t)(colon + 1 - (const char *)dec);
        if (plen > 0 && plen < cap && memchr(colon + 1, '\0', plen) == NULL) {
            memcpy(out, colon + 1, plen);
            out[plen] = '\0';
            ok = true;
        }
    }
    OPENSSL_cleanse(dec, dlen);
    free(dec);
    return ok;
}

/* The URL clients reach this server at: --public-url, else the scheme and the Host the
 * client sent (the host it connected to), else the listening address. */
static void public_base(const struct srv_req *r, char *out, size_t cap)
{
    const char *host = srv_header(r, MHD_HTTP_HEADER_HOST);
    size_t n = host ? strlen(host) : 0;

    if (r->srv->cfg->public_url != NULL) {
        snprintf(out, cap, "%s", r->srv->cfg->public_url);
        return;
    }
    /* Only a host[:port] goes into the challenge: nothing that could close its quotes. */
    if (n == 0 || n > 255 ||
        strspn(host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:[]") != n)
        host = r->srv->cfg->listen;
    snprintf(out, cap, "%s://%s", r->srv->tls ? "https" : "http", host);
}

/*
 * 401 for an OCI request, with the challenge clients answer: the token endpoint's realm
 * (the distribution token flow: skopeo, oras, docker fetch a token there with the Basic
 * credentials they were given), or, from the token endpoint itself, Basic.
 */
static void oci_unauthorized(struct srv_req *r, const char *message)
{
    const char *model = srv_param(r, "model");
    char base[300], challenge[640];

    srv_fail(r, MG_EUNAUTH, NULL, "%s", message);
    /* Docker's clients read the API version from the ping's answer, a 401 included. */
    srv_reply_header(r, "Docker-Distribution-API-Version", "registry/2.0");
    if (strcmp(r->route->pattern, "/v2/token") == 0) {
        srv_reply_header(r, "WWW-Authenticate", "Basic realm=\"modelgate\", charset=\"UTF-8\"");
        return;
    }
    public_base(r, base, sizeof(base));
    if (model != NULL && mg_valid_model_name(model, strlen(model)))
        snprintf(challenge, sizeof(challenge),
                 "Bearer realm=\"%s/v2/token\",service=\"modelgate\","
                 "scope=\"repository:%s:pull\"",
                 base, model);
    else
        snprintf(challenge, sizeof(challenge), "Bearer realm=\"%s/v2/token\",service=\"modelgate\"",
                 base);
    srv_reply_header(r, "WWW-Authenticate", challenge);
}

/* An OCI request: a token as bearer or as Basic's password (never the UI's cookie). */
static bool check_oci(struct srv_req *r)
{
    char secret[256];
    enum mg_code rc;

    if (!srv_oci_credentials(r, secret, sizeof(secret))) {
        oci_unauthorized(r, "this registry needs a modelgate token: log in with any user name "
                            "and the token as the password, or send it as a bearer token");
        return false;
    }
    rc = store_token_authenticate(r->srv->store, secret, strlen(secret), &r->who);
    OPENSSL_cleanse(secret, sizeof(secret));
    if (rc != MG_OK) {
        if (rc == MG_EUNAUTH)
            oci_unauthorized(r, "the token is unknown or was revoked");
        else
            fail_unchecked(r, rc);
        return false;
    }
    r->authenticated = true;
    return authorize_route(r);
}

/* Authenticate and authorise; on failure an error reply is set. */
bool srv_check_access(struct srv_req *r)
{
    const char *h = srv_header(r, MHD_HTTP_HEADER_AUTHORIZATION);
    enum mg_code rc;

    if (r->route->roles == MG_NEED_PUBLIC)
        return true;
    if (r->oci)
        return check_oci(r);
    if (h == NULL && MHD_lookup_connection_value(r->conn, MHD_COOKIE_KIND, SRV_SESSION_COOKIE))
        return check_session(r);
    if (h == NULL || strncasecmp(h, "Bearer ", 7) != 0) {
        srv_fail(r, MG_EUNAUTH, NULL,
                 "this endpoint needs an 'Authorization: Bearer <token>' header");
        return false;
    }
    h += 7;
    while (*h == ' ')
        h++;
    /* An IdP's JWT (docs/contract.md "Identity"): never looked up as a modelgate token. */
    if (srv_looks_like_jwt(h))
        return srv_identity_authenticate(r, h) && authorize_route(r);
    if ((rc = store_token_authenticate(r->srv->store, h, strlen(h), &r->who)) != MG_OK) {
        if (rc == MG_EUNAUTH)
            srv_fail(r, MG_EUNAUTH, NULL, "the bearer token is unknown or was revoked");
        else
            fail_unchecked(r, rc);
        return false;
    }
    r->authenticated = true;
    return authorize_route(r);
}
