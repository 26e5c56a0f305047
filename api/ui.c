/*
 * ui.c - the reviewer UI: its static files (compiled in from web/) and its
 * sessions. Signing in trades a pasted token for an HttpOnly, SameSite=Strict
 * session cookie and a CSRF token that the page sends with every change.
 */
#include "api.h"

#include <stdio.h>
#include <string.h>

#include "../base/embedded.h"
#include "../base/util.h"

extern const struct mg_embedded web_files[];
extern const unsigned web_files_count;

/* What the pages may load: themselves, nothing else. */
#define UI_CSP                                                                                     \
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "              \
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

static const char *content_type(const char *name)
{
    const char *dot = strrchr(name, '.');

    if (dot && strcmp(dot, ".html") == 0)
        return "text/html; charset=utf-8";
    if (dot && strcmp(dot, ".js") == 0)
        return "text/javascript; charset=utf-8";
    if (dot && strcmp(dot, ".css") == 0)
        return "text/css; charset=utf-8";
    if (dot && strcmp(dot, ".svg") == 0)
        return "image/svg+xml";
    return "application/octet-stream";
}

static void serve(struct srv_req *r, const char *name)
{
    unsigned i;

    for (i = 0; i < web_files_count; i++) {
        if (strcmp(web_files[i].name, name) == 0) {
            srv_reply_bytes(r, 200, content_type(name), web_files[i].data, web_files[i].len);
            srv_reply_header(r, "Content-Security-Policy", UI_CSP);
            srv_reply_header(r, "X-Frame-Options", "DENY");
            srv_reply_header(r, "Referrer-Policy", "no-referrer");
            srv_reply_header(r, "Cache-Control", "no-cache");
            return;
        }
    }
    srv_fail(r, MG_ENOTFOUND, NULL, "no such file: %s", name);
}

static void index_page(struct srv_req *r)
{
    serve(r, "index.html");
}

static void static_file(struct srv_req *r)
{
    serve(r, srv_param(r, "file"));
}

static void set_cookie(struct srv_req *r, const char *value, bool clear)
{
    char cookie[256];

    snprintf(cookie, sizeof(cookie), "%s=%s; Path=/; HttpOnly; SameSite=Strict%s%s",
             SRV_SESSION_COOKIE, value, r->srv->tls ? "; Secure" : "", clear ? "; Max-Age=0" : "");
    srv_reply_header(r, "Set-Cookie", cookie);
}

static void sign_in(struct srv_req *r)
{
    static const char *const allowed[] = {"token", NULL};
    char id[STORE_SESSION_ID_LEN + 1], csrf[STORE_CSRF_LEN + 1];
    struct store_principal who;
    const char *token;
    struct mg_error err;

    /* No signing a victim into someone else's session from another site. */
    if (!srv_same_origin(r)) {
        srv_fail(r, MG_EFORBIDDEN, NULL,
                 "sign in from this server's own page (reached through a proxy or a DNS name? "
                 "start modelgated with --public-url)");
        return;
    }
    if (!api_object(r, r->body, allowed) ||
        !api_string(r, r->body, "token", "token", true, 256, &token))
        return;
    if (store_session_open(r->srv->store, token, strlen(token), id, csrf, &who, &err) != MG_OK) {
        srv_reply_error(r, &err);
        return;
    }
    srv_reply_json(r, 200,
                   json_pack("{s:s, s:o, s:s}", "name", who.name, "roles",
                             store_roles_to_json(who.roles), "csrf", csrf));
    set_cookie(r, id, false);
}

static void session_info(struct srv_req *r)
{
    if (!r->via_session) {
        srv_fail(r, MG_EUNAUTH, NULL, "no UI session; sign in first");
        return;
    }
    srv_reply_json(r, 200,
                   json_pack("{s:s, s:o, s:s}", "name", r->who.name, "roles",
                             store_roles_to_json(r->who.roles), "csrf", r->csrf));
}

static void sign_out(struct srv_req *r)
{
    const char *id = srv_cookie(r, SRV_SESSION_COOKIE);
    struct mg_error err;

    if (id && store_session_close(r->srv->store, id, strlen(id), &err) != MG_OK) {
        srv_reply_error(r, &err);
        return;
    }
    srv_reply_empty(r, 204);
    set_cookie(r, "", true);
}

const struct srv_route api_routes_ui[] = {
    {"GET", "/", MG_NEED_PUBLIC, SRV_BODY_NONE, index_page, NULL, NULL, NULL},
    {"GET", "/static/{file}", MG_NEED_PUBLIC, SRV_BODY_NONE, static_file, NULL, NULL, NULL},
    {"POST", "/ui/session", MG_NEED_PUBLIC, SRV_BODY_JSON, sign_in, NULL, NULL, NULL},
    {"GET", "/ui/session", MG_NEED_ANY, SRV_BODY_NONE, session_info, NULL, NULL, NULL},
    {"DELETE", "/ui/session", MG_NEED_ANY, SRV_BODY_NONE, sign_out, NULL, NULL, NULL},
    {NULL, NULL, 0, 0, NULL, NULL, NULL, NULL},
};
