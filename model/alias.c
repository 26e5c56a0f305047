/*
 * alias.c - an alias's routes between the record (alias.h) and their JSON.
 */
#include "alias.h"

#include <string.h>

json_t *mg_routes_json(const struct mg_routes *r)
{
    json_t *a = json_array();
    size_t i;

    for (i = 0; a != NULL && i < r->nroutes; i++) {
        if (json_array_append_new(a, json_pack("{s:I, s:i}", "version",
                                               (json_int_t)r->routes[i].version, "weight",
                                               r->routes[i].weight)) != 0) {
            json_decref(a);
            a = NULL;
        }
    }
    return a;
}

json_t *mg_match_json(const struct mg_routes *r)
{
    json_t *a = json_array();
    size_t i;

    for (i = 0; a != NULL && i < r->nmatch; i++) {
        const struct mg_match_rule *m = &r->match[i];

        if (json_array_append_new(a, json_pack("{s:s, s:s, s:I}", "header", m->header, "value",
                                               m->value, "version", (json_int_t)m->version)) != 0) {
            json_decref(a);
            a = NULL;
        }
    }
    return a;
}

json_t *mg_shadow_json(const struct mg_routes *r)
{
    if (r->shadow.version == 0)
        return json_null();
    return json_pack("{s:I, s:i}", "version", (json_int_t)r->shadow.version, "percent",
                     r->shadow.percent);
}

/* s into buf (size n) when it is a string that fits. */
static bool copy_string(const json_t *s, char *buf, size_t n)
{
    if (!json_is_string(s) || json_string_length(s) >= n)
        return false;
    memcpy(buf, json_string_value(s), json_string_length(s) + 1);
    return true;
}

enum mg_code mg_routes_from_json(const json_t *routes, const json_t *match, const json_t *shadow,
                                 struct mg_routes *out, struct mg_error *err)
{
    const json_t *e;
    size_t i;

    memset(out, 0, sizeof(*out));
    if (routes != NULL && !json_is_null(routes)) {
        if (!json_is_array(routes) || json_array_size(routes) > MG_ROUTES_MAX)
            return mg_fail(err, MG_EINVAL, "routes", "routes must be an array of at most %d",
                           MG_ROUTES_MAX);
        json_array_foreach(routes, i, e)
        {
            const json_t *v = json_object_get(e, "version"), *w = json_object_get(e, "weight");

            if (!json_is_integer(v) || !json_is_integer(w))
                return mg_fail(err, MG_EINVAL, "routes",
                               "each route needs an integer version and weight");
            out->routes[i].version = json_integer_value(v);
            out->routes[i].weight = (int)json_integer_value(w);
        }
        out->nroutes = json_array_size(routes);
    }
    if (match != NULL && !json_is_null(match)) {
        if (!json_is_array(match) || json_array_size(match) > MG_MATCH_MAX)
            return mg_fail(err, MG_EINVAL, "match", "match must be an array of at most %d",
                           MG_MATCH_MAX);
        json_array_foreach(match, i, e)
        {
            struct mg_match_rule *m = &out->match[i];
            const json_t *v = json_object_get(e, "version");

            if (!copy_string(json_object_get(e, "header"), m->header, sizeof(m->header)) ||
                !copy_string(json_object_get(e, "value"), m->value, sizeof(m->value)) ||
                !json_is_integer(v))
                return mg_fail(err, MG_EINVAL, "match",
                               "each match rule needs a header, a value and an integer version");
            m->version = json_integer_value(v);
        }
        out->nmatch = json_array_size(match);
    }
    if (shadow != NULL && !json_is_null(shadow)) {
        const json_t *v = json_object_get(shadow, "version"),
                     *p = json_object_get(shadow, "percent");

        if (!json_is_integer(v) || json_integer_value(v) < 1 || !json_is_integer(p))
            return mg_fail(err, MG_EINVAL, "shadow",
                           "shadow needs an integer version >= 1 and percent");
        out->shadow.version = json_integer_value(v);
        out->shadow.percent = (int)json_integer_value(p);
    }
    return MG_OK;
}
