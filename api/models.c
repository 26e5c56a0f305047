/*
 * models.c - /api/v1/models: create, list, get, patch.
 */
#include "api.h"

#include <string.h>

#include "../base/util.h"
#include "markdown.h"

/* A model card: Markdown, newlines and tabs allowed. */
#define README_MAX 65536

static bool check_description(struct srv_req *r, const json_t *body)
{
    const char *d;

    return api_string(r, body, "description", "description", false, 16384, &d);
}

static bool check_readme(struct srv_req *r, const json_t *body)
{
    json_t *v = json_object_get(body, "readme");
    const char *s;
    size_t n;

    if (v == NULL)
        return true;
    if (!json_is_string(v)) {
        srv_fail(r, MG_EINVAL, "readme", "'readme' must be a string of Markdown");
        return false;
    }
    s = json_string_value(v);
    n = json_string_length(v);
    if (n > README_MAX) {
        srv_fail(r, MG_EINVAL, "readme",
                 "'readme' is %zu bytes; a model card holds at most %d bytes (64 KiB): shorten "
                 "it or link to a longer document",
                 n, README_MAX);
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];

        if ((c < 0x20 && c != '\n' && c != '\r' && c != '\t') || c == 0x7f) {
            srv_fail(r, MG_EINVAL, "readme",
                     "'readme' holds a control character at byte %zu; only tabs and line breaks "
                     "are allowed",
                     i);
            return false;
        }
    }
    return true;
}

/* {"metric": "higher"|"lower"}: which way is better for each metric. */
static bool check_directions(struct srv_req *r, const json_t *body)
{
    json_t *v = json_object_get(body, "metric_directions"), *d;
    const char *k;

    if (v == NULL)
        return true;
    if (!json_is_object(v) || json_object_size(v) > 1000) {
        srv_fail(r, MG_EINVAL, "metric_directions",
                 "'metric_directions' must be an object of at most 1000 metric names, each "
                 "\"higher\" or \"lower\"");
        return false;
    }
    json_object_foreach(v, k, d)
    {
        const char *w = json_string_value(d);

        if (!api_metric_name_ok(k, strlen(k))) {
            srv_fail(r, MG_EINVAL, "metric_directions",
                     "metric names match ^[A-Za-z0-9_.:/-]{1,128}$; '%.64s' does not", k);
            return false;
        }
        if (w == NULL || (strcmp(w, "higher") != 0 && strcmp(w, "lower") != 0)) {
            srv_fail(r, MG_EINVAL, "metric_directions",
                     "metric_directions['%.64s'] must be \"higher\" or \"lower\"", k);
            return false;
        }
    }
    return true;
}

static bool check_card(struct srv_req *r, const json_t *body)
{
    return check_description(r, body) && check_readme(r, body) && check_directions(r, body);
}

static void create(struct srv_req *r)
{
    static const char *const allowed[] = {"name",   "description",       "tags",
                                          "readme", "metric_directions", NULL};
    const char *name;
    json_t *tags, *out = NULL;
    struct mg_error err;
    enum mg_code rc;

    if (!api_object(r, r->body, allowed) ||
        !api_string(r, r->body, "name", "name", true, 63, &name) || !check_card(r, r->body))
        return;
    if (!mg_valid_model_name(name, strlen(name))) {
        srv_fail(r, MG_EINVAL, "name", "model names match ^[a-z0-9][a-z0-9._-]{0,62}$");
        return;
    }
    tags = json_object_get(r->body, "tags");
    if (tags && !api_tags(r, tags, "tags"))
        return;
    /* A trusted publisher's token creates only the models it names. */
    if (r->who.nmodels > 0 && !srv_authorize(r, name, NULL))
        return;
    /* A new model is owned by the creating token's teams (none for a global token). */
    if (r->who.nteams > 0 && !(r->who.roles & MG_ROLE_ADMIN)) {
        json_t *owners = json_array();

        for (size_t i = 0; owners != NULL && i < r->who.nteams; i++)
            json_array_append_new(owners, json_string(r->who.teams[i]));
        if (owners == NULL || json_object_set_new(r->body, "owners", owners) != 0) {
            srv_fail(r, MG_ENOMEM, NULL, "out of memory");
            return;
        }
    }
    rc = store_model_create(r->srv->store, r->who.name, r->body, &out, &err);
    api_reply_result(r, rc, 201, out, &err);
}

static enum mg_code fetch_models(struct srv_req *r, void *ctx, const struct store_page *page,
                                 json_t **out, struct mg_error *err)
{
    return store_model_list(r->srv->store, ctx, page, out, err);
}

/* --read-scope team: the models this token may see. */
static enum mg_code keep_visible(struct srv_req *r, const json_t *item, bool *keep,
                                 struct mg_error *err)
{
    (void)err;
    *keep = srv_model_visible(r, json_object_get(item, "owners"));
    return MG_OK;
}

static void list(struct srv_req *r)
{
    struct store_page page;
    const char *q = srv_query(r, "q");
    json_t *out = NULL;
    struct mg_error err;
    enum mg_code rc;

    if (!srv_page(r, &page))
        return;
    if (page.page_token && !mg_valid_model_name(page.page_token, strlen(page.page_token))) {
        srv_fail(r, MG_EINVAL, "page_token", "page_token is not one this server issued");
        return;
    }
    if (q && strlen(q) > 63) {
        srv_fail(r, MG_EINVAL, "q", "q is at most 63 characters");
        return;
    }
    q = q && *q ? q : NULL;
    if (r->srv->cfg->read_scope_team && r->who.nteams > 0 && !(r->who.roles & MG_ROLE_ADMIN))
        rc = api_page_visible(r, (void *)q, &page, fetch_models, keep_visible, "name", &out, &err);
    else
        rc = store_model_list(r->srv->store, q, &page, &out, &err);
    api_reply_result(r, rc, 200, out, &err);
}

static void get(struct srv_req *r)
{
    json_t *out = NULL;
    struct mg_error err;
    enum mg_code rc = store_model_get(r->srv->store, srv_param(r, "model"), &out, &err);

    api_reply_result(r, rc, 200, out, &err);
}

static void patch(struct srv_req *r)
{
    static const char *const allowed[] = {"description", "tags", "readme", "metric_directions",
                                          NULL};
    json_t *tags, *out = NULL;
    struct mg_error err;
    enum mg_code rc;

    if (!api_object(r, r->body, allowed) || !check_card(r, r->body))
        return;
    tags = json_object_get(r->body, "tags");
    if (tags && !api_tags(r, tags, "tags"))
        return;
    rc = store_model_patch(r->srv->store, r->who.name, srv_param(r, "model"), r->body, &out, &err);
    api_reply_result(r, rc, 200, out, &err);
}

/* The model card as Markdown and as the tree the UI draws (markdown.h). */
static void readme(struct srv_req *r)
{
    json_t *m = NULL, *doc, *out = NULL;
    const char *md;
    struct mg_error err;
    enum mg_code rc = store_model_get(r->srv->store, srv_param(r, "model"), &m, &err);

    if (rc == MG_OK) {
        md = json_string_value(json_object_get(m, "readme"));
        md = md ? md : "";
        doc = srv_markdown_doc(md, strlen(md));
        out = doc ? json_pack("{s:s, s:s, s:o}", "model", srv_param(r, "model"), "markdown", md,
                              "doc", doc)
                  : NULL;
        if (out == NULL)
            rc = mg_fail(&err, MG_ENOMEM, NULL, "out of memory");
    }
    json_decref(m);
    api_reply_result(r, rc, 200, out, &err);
}

const struct srv_route api_routes_models[] = {
    {"POST", "/api/v1/models", MG_ROLE_PUBLISHER, SRV_BODY_JSON, create, NULL, NULL, NULL},
    {"GET", "/api/v1/models", MG_ROLE_READER, SRV_BODY_NONE, list, NULL, NULL, NULL},
    {"GET", "/api/v1/models/{model}", MG_ROLE_READER, SRV_BODY_NONE, get, NULL, NULL, NULL},
    {"GET", "/api/v1/models/{model}/readme", MG_ROLE_READER, SRV_BODY_NONE, readme, NULL, NULL,
     NULL},
    {"PATCH", "/api/v1/models/{model}", MG_ROLE_PUBLISHER, SRV_BODY_JSON, patch, NULL, NULL, NULL},
    {NULL, NULL, 0, 0, NULL, NULL, NULL, NULL},
};
