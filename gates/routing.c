/*
 * routing.c - see routing.h.
 */
#include "routing.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static enum mg_code oom(struct mg_error *err)
{
    mg_fail(err, MG_EINVAL, NULL, "out of memory");
    if (err)
        err->code = MG_ENOMEM;
    return MG_ENOMEM;
}

bool gate_header_name_ok(const char *s, size_t n)
{
    size_t i;

    if (s == NULL || n == 0 || n > GATE_HEADER_NAME_MAX)
        return false;
    for (i = 0; i < n; i++) {
        char c = s[i];

        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL)))
            return false;
    }
    return true;
}

bool gate_header_value_ok(const char *s, size_t n)
{
    size_t i;

    if (s == NULL || n == 0 || n > GATE_HEADER_VALUE_MAX)
        return false;
    for (i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];

        if (c <= 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == ';' || c == '{' || c == '}')
            return false;
    }
    return true;
}

static bool only(const json_t *o, const char *const *keys, const char **bad)
{
    const char *k;
    json_t *v;

    json_object_foreach((json_t *)o, k, v)
    {
        size_t i;
        bool ok = false;

        for (i = 0; keys[i] && !ok; i++)
            ok = strcmp(k, keys[i]) == 0;
        if (!ok) {
            *bad = k;
            return false;
        }
    }
    return true;
}

static bool version_ok(const json_t *v)
{
    return json_is_integer(v) && json_integer_value(v) >= 1;
}

/* One rule of match[i], checked against the rules before it; *out NEW. */
static enum mg_code parse_rule(const json_t *list, size_t i, json_t **out, struct mg_error *err)
{
    static const char *const keys[] = {"header", "value", "version", NULL};
    const json_t *r = json_array_get(list, i);
    json_t *h, *v, *ver;
    const char *bad = NULL;
    char field[48];
    size_t k;

    snprintf(field, sizeof(field), "match[%zu]", i);
    if (!json_is_object(r))
        return mg_fail(err, MG_EINVAL, field,
                       "%s must be an object {\"header\", \"value\", \"version\"}", field);
    if (!only(r, keys, &bad))
        return mg_fail(err, MG_EINVAL, field, "%s has an unknown field '%.64s'", field, bad);
    h = json_object_get(r, "header");
    v = json_object_get(r, "value");
    ver = json_object_get(r, "version");
    snprintf(field, sizeof(field), "match[%zu].header", i);
    if (!json_is_string(h) || !gate_header_name_ok(json_string_value(h), json_string_length(h)))
        return mg_fail(err, MG_EINVAL, field,
                       "%s must be a lowercase HTTP header name (1 to %d of a-z 0-9 "
                       "!#$%%&'*+-.^_`|~), such as x-tenant",
                       field, GATE_HEADER_NAME_MAX);
    snprintf(field, sizeof(field), "match[%zu].value", i);
    if (!json_is_string(v) || !gate_header_value_ok(json_string_value(v), json_string_length(v)))
        return mg_fail(err, MG_EINVAL, field,
                       "%s must be 1 to %d printable ASCII characters without spaces, '\"', '\\', "
                       "';', '{' or '}'",
                       field, GATE_HEADER_VALUE_MAX);
    snprintf(field, sizeof(field), "match[%zu].version", i);
    if (!version_ok(ver))
        return mg_fail(err, MG_EINVAL, field, "%s must be an integer version >= 1", field);
    for (k = 0; k < i; k++) {
        const json_t *o = json_array_get(list, k);

        if (json_equal(h, json_object_get(o, "header")) &&
            json_equal(v, json_object_get(o, "value"))) {
            snprintf(field, sizeof(field), "match[%zu]", i);
            return mg_fail(err, MG_EINVAL, field,
                           "%s repeats header '%s' value '%s' of match[%zu]; each header and value "
                           "pins one version",
                           field, json_string_value(h), json_string_value(v), k);
        }
    }
    *out = json_pack("{s:O, s:O, s:O}", "header", h, "value", v, "version", ver);
    return *out ? MG_OK : oom(err);
}

static enum mg_code parse_shadow(const json_t *shadow, json_t **out, struct mg_error *err)
{
    static const char *const keys[] = {"version", "percent", NULL};
    json_t *ver, *pct;
    const char *bad = NULL;

    if (shadow == NULL || json_is_null(shadow)) {
        *out = json_null();
        return MG_OK;
    }
    if (!json_is_object(shadow))
        return mg_fail(err, MG_EINVAL, "shadow",
                       "shadow must be {\"version\", \"percent\"} or null");
    if (!only(shadow, keys, &bad))
        return mg_fail(err, MG_EINVAL, "shadow", "shadow has an unknown field '%.64s'", bad);
    ver = json_object_get(shadow, "version");
    pct = json_object_get(shadow, "percent");
    if (!version_ok(ver))
        return mg_fail(err, MG_EINVAL, "shadow.version",
                       "shadow.version must be an integer version >= 1");
    if (pct != NULL &&
        (!json_is_integer(pct) || json_integer_value(pct) < 1 || json_integer_value(pct) > 100))
        return mg_fail(err, MG_EINVAL, "shadow.percent",
                       "shadow.percent must be an integer from 1 to 100 (the share of requests "
                       "copied to the shadow)");
    *out = json_pack("{s:O, s:I}", "version", ver, "percent",
                     pct ? json_integer_value(pct) : (json_int_t)100);
    return *out ? MG_OK : oom(err);
}

enum mg_code gate_routing_parse(const json_t *match, const json_t *shadow, json_t **match_out,
                                json_t **shadow_out, struct mg_error *err)
{
    json_t *list = json_array(), *rule = NULL, *sh = NULL;
    enum mg_code rc = MG_OK;
    size_t i;

    if (list == NULL)
        return oom(err);
    if (match != NULL && !json_is_null(match) &&
        (!json_is_array(match) || json_array_size(match) > GATE_MATCH_MAX)) {
        rc = mg_fail(err, MG_EINVAL, "match",
                     "match must be an array of at most %d {\"header\", \"value\", "
                     "\"version\"}",
                     GATE_MATCH_MAX);
        goto out;
    }
    for (i = 0; json_is_array(match) && i < json_array_size(match); i++) {
        if ((rc = parse_rule(match, i, &rule, err)) != MG_OK)
            goto out;
        if (json_array_append_new(list, rule) != 0) {
            rc = oom(err);
            goto out;
        }
    }
    if ((rc = parse_shadow(shadow, &sh, err)) != MG_OK)
        goto out;
    *match_out = list;
    *shadow_out = sh;
    return MG_OK;
out:
    json_decref(list);
    return rc;
}
