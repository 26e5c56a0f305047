/*
 * admin.c - the commands a CI job and an operator need beside the release flow:
 * `models`, `promotions`, `alias set` and `token create`.
 */
#include "mgc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/util.h"

/* "1=90,2=10" of an alias's routes; "-" for none. */
static void routes_text(const json_t *routes, char *out, size_t n)
{
    json_t *r; /* BORROWED */
    size_t i, len = 0;

    out[0] = '\0';
    json_array_foreach(routes, i, r)
    {
        int w = snprintf(out + len, n - len, "%sv%lld=%lld", i ? "," : "",
                         (long long)json_integer_value(json_object_get(r, "version")),
                         (long long)json_integer_value(json_object_get(r, "weight")));
        if (w < 0 || (size_t)w >= n - len)
            break;
        len += (size_t)w;
    }
    if (out[0] == '\0')
        snprintf(out, n, "-");
}

/* ---- models ------------------------------------------------------------------------------- */

int mgc_cmd_models(struct mgc *c, const struct mgc_args *a)
{
    const char *q = mgc_opt(a, "q");
    json_t *list = NULL, *items, *m, *al; /* NEW, then BORROWED */
    struct mgc_table t;
    char path[512], latest[32], aliases[512];
    char *eq = NULL;
    size_t i, j;
    int rc;

    if ((rc = mgc_connect(c)) != MGC_OK)
        return rc;
    if (q != NULL && (eq = mgc_escape(c, q)) == NULL)
        return mgc_fail("out of memory");
    snprintf(path, sizeof(path), "/api/v1/models?limit=1000%s%s", eq ? "&q=" : "", eq ? eq : "");
    free(eq);
    if ((rc = mgc_call(c, "GET", path, NULL, &list)) != MGC_OK)
        return rc;
    if (c->json) {
        rc = mgc_print_json(list);
        json_decref(list);
        return rc;
    }
    items = json_object_get(list, "items");
    mgc_table_init(&t, 4);
    mgc_table_row(&t, "MODEL", "LATEST", "ALIASES", "CREATED");
    json_array_foreach(items, i, m)
    {
        size_t len = 0;

        if (json_is_integer(json_object_get(m, "latest_version")))
            snprintf(latest, sizeof(latest), "v%lld",
                     (long long)json_integer_value(json_object_get(m, "latest_version")));
        else
            snprintf(latest, sizeof(latest), "-");
        aliases[0] = '\0';
        json_array_foreach(json_object_get(m, "aliases"), j, al)
        {
            char routes[256];
            int w;

            routes_text(json_object_get(al, "routes"), routes, sizeof(routes));
            w = snprintf(aliases + len, sizeof(aliases) - len, "%s%s:%s", j ? " " : "",
                         mgc_str(al, "alias", "?"), routes);
            if (w < 0 || (size_t)w >= sizeof(aliases) - len)
                break;
            len += (size_t)w;
        }
        mgc_table_row(&t, mgc_str(m, "name", "?"), latest, aliases[0] ? aliases : NULL,
                      mgc_str(m, "created_at", NULL));
    }
    if (json_array_size(items) == 0)
        fprintf(stderr, "no models%s\n", q ? " match" : " yet");
    else
        mgc_table_print(&t);
    mgc_table_release(&t);
    json_decref(list);
    return MGC_OK;
}

/* ---- promotions --------------------------------------------------------------------------- */

int mgc_cmd_promotions(struct mgc *c, const struct mgc_args *a)
{
    static const char *const keys[] = {"state", "model", "alias"};
    json_t *list = NULL, *items, *p; /* NEW, then BORROWED */
    struct mgc_table t;
    char path[1024], num[32];
    size_t i, len;
    int rc;

    if (mgc_opt(a, "model") && !mgc_check_model(c, mgc_opt(a, "model")))
        return MGC_USAGE;
    if (mgc_opt(a, "alias") && !mgc_check_alias(c, mgc_opt(a, "alias")))
        return MGC_USAGE;
    if ((rc = mgc_connect(c)) != MGC_OK)
        return rc;
    len = (size_t)snprintf(path, sizeof(path), "/api/v1/promotions?limit=1000");
    for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        const char *v = mgc_opt(a, keys[i]);
        char *e;

        if (v == NULL)
            continue;
        if ((e = mgc_escape(c, v)) == NULL)
            return mgc_fail("out of memory");
        len += (size_t)snprintf(path + len, sizeof(path) - len, "&%s=%s", keys[i], e);
        free(e);
        if (len >= sizeof(path))
            return mgc_usage(c, "the filters are too long");
    }
    if ((rc = mgc_call(c, "GET", path, NULL, &list)) != MGC_OK)
        return rc;
    if (c->json) {
        rc = mgc_print_json(list);
        json_decref(list);
        return rc;
    }
    items = json_object_get(list, "items");
    mgc_table_init(&t, 6);
    mgc_table_row(&t, "ID", "MODEL", "ALIAS", "VERSION", "STATE", "CREATED");
    json_array_foreach(items, i, p)
    {
        snprintf(num, sizeof(num), "v%lld",
                 (long long)json_integer_value(json_object_get(p, "version")));
        mgc_table_row(&t, mgc_str(p, "id", "?"), mgc_str(p, "model", "?"), mgc_str(p, "alias", "?"),
                      num, mgc_str(p, "state", "?"), mgc_str(p, "created_at", NULL));
    }
    if (json_array_size(items) == 0)
        fprintf(stderr, "no promotions match\n");
    else
        mgc_table_print(&t);
    mgc_table_release(&t);
    json_decref(list);
    return MGC_OK;
}

/* ---- alias set ---------------------------------------------------------------------------- */

/* "2" → {"version":2}; "1=90,2=10" → {"routes":[…]}. NULL (usage printed) when malformed. */
static json_t *alias_body(const struct mgc *c, const char *spec)
{
    json_t *routes, *body = NULL; /* NEW */
    char *copy, *save = NULL, *part;
    int64_t n;

    if (strchr(spec, '=') == NULL) {
        if (!mgc_parse_int(c, "the version", spec, 1, INT64_MAX, &n))
            return NULL;
        return json_pack("{s:I}", "version", (json_int_t)n);
    }
    if ((routes = json_array()) == NULL || (copy = strdup(spec)) == NULL) {
        json_decref(routes);
        mgc_fail("out of memory");
        return NULL;
    }
    for (part = strtok_r(copy, ",", &save); part; part = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(part, '=');
        int64_t w;

        if (eq == NULL) {
            mgc_usage(c, "routes look like 1=90,2=10 (version=weight, weights sum to 100)");
            goto out;
        }
        *eq = '\0';
        if (!mgc_parse_int(c, "a route's version", part, 1, INT64_MAX, &n) ||
            !mgc_parse_int(c, "a route's weight", eq + 1, 0, 100, &w))
            goto out;
        json_array_append_new(
            routes, json_pack("{s:I, s:I}", "version", (json_int_t)n, "weight", (json_int_t)w));
    }
    body = json_pack("{s:O}", "routes", routes);
out:
    free(copy);
    json_decref(routes);
    return body;
}

int mgc_cmd_alias(struct mgc *c, const struct mgc_args *a)
{
    const char *model = a->pos[1], *alias = a->pos[2];
    json_t *body, *al = NULL, *d; /* NEW, NEW, BORROWED */
    char path[256], routes[256];
    int64_t wait = 0;
    size_t i, pending = 0;
    int rc;

    if (strcmp(a->pos[0], "set") != 0)
        return mgc_usage(c, "unknown alias action '%s' (there is: set)", a->pos[0]);
    if (!mgc_check_model(c, model) || !mgc_check_alias(c, alias))
        return MGC_USAGE;
    if (mgc_opt(a, "wait") && !mgc_parse_int(c, "--wait", mgc_opt(a, "wait"), 0, 60, &wait))
        return MGC_USAGE;
    if ((body = alias_body(c, a->pos[3])) == NULL)
        return MGC_USAGE;
    if ((rc = mgc_connect(c)) != MGC_OK) {
        json_decref(body);
        return rc;
    }
    if (wait > 0)
        snprintf(path, sizeof(path), "/api/v1/models/%s/aliases/%s?wait=%lld", model, alias,
                 (long long)wait);
    else
        snprintf(path, sizeof(path), "/api/v1/models/%s/aliases/%s", model, alias);
    rc = mgc_call(c, "PUT", path, body, &al);
    json_decref(body);
    if (rc != MGC_OK)
        return rc;
    json_array_foreach(json_object_get(al, "deliveries"), i, d)
    {
        if (strcmp(mgc_str(d, "state", ""), "in_sync") != 0)
            pending++;
    }
    if (c->json) {
        rc = mgc_print_json(al);
    } else {
        routes_text(json_object_get(al, "routes"), routes, sizeof(routes));
        printf("%s/%s routes %s (generation %lld)\n", model, alias, routes,
               (long long)json_integer_value(json_object_get(al, "generation")));
    }
    if (rc == MGC_OK && wait > 0 && pending > 0) {
        mgc_fail("timed out after %lld s: %zu gateway(s) have not applied it", (long long)wait,
                 pending);
        rc = MGC_TIMEOUT;
    }
    json_decref(al);
    return rc;
}

/* ---- token create ------------------------------------------------------------------------- */

/* The values of a repeatable option as a JSON array of strings (NEW). */
static json_t *opt_list(const struct mgc_args *a, const char *name)
{
    json_t *list = json_array();
    const char *v;

    for (int i = 0; list && (v = mgc_opt_nth(a, name, i)) != NULL; i++)
        json_array_append_new(list, json_string(v));
    return list;
}

int mgc_cmd_token(struct mgc *c, const struct mgc_args *a)
{
    const char *name = a->pos[1];
    json_t *body, *out = NULL, *roles; /* NEW */
    int rc;

    if (strcmp(a->pos[0], "create") != 0)
        return mgc_usage(c, "unknown token action '%s' (there is: create)", a->pos[0]);
    if (mgc_opt(a, "role") == NULL)
        return mgc_usage(c, "give the token's roles with --role (reader, publisher, reviewer, "
                            "deployer, admin; repeat for several)");
    roles = opt_list(a, "role");
    body = json_pack("{s:s, s:o}", "name", name, "roles", roles);
    if (body && mgc_opt(a, "team"))
        json_object_set_new(body, "teams", opt_list(a, "team"));
    if (body && mgc_opt(a, "alias"))
        json_object_set_new(body, "aliases", opt_list(a, "alias"));
    if (body == NULL)
        return mgc_fail("the name is not valid UTF-8");
    if ((rc = mgc_connect(c)) != MGC_OK) {
        json_decref(body);
        return rc;
    }
    rc = mgc_call(c, "POST", "/api/v1/tokens", body, &out);
    json_decref(body);
    if (rc != MGC_OK)
        return rc;
    if (c->json) {
        rc = mgc_print_json(out);
    } else {
        /* The secret alone on stdout, so TOKEN=$(modelgate token create …) works. */
        printf("%s\n", mgc_str(out, "token", ""));
        fprintf(stderr, "token '%s' (id %s) created; its secret is shown only this once\n", name,
                mgc_str(out, "id", "?"));
    }
    json_decref(out);
    return rc;
}
