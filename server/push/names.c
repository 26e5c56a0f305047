/*
 * names.c - the object names gateways derive from (model, alias, version), one-to-one.
 *
 * nginx variables: $modelgate_<enc(model)>_<enc(alias)>, where enc keeps [a-z0-9] and
 * writes '-' as "_0", '.' as "_1" and '_' as "_2". Why that is one-to-one: in an encoded
 * name every '_' is followed by a digit, and an alias starts with a letter, so the one '_'
 * followed by a letter is the separator; everything before it decodes to the model and
 * everything after to the alias, each escape to one character. (A "_shadow" suffix, being
 * '_' and a letter after the alias, stays unambiguous as well.) "fraud"/"production" keeps
 * its old name, $modelgate_fraud_production.
 *
 * Template names (nginx include files and upstreams, HAProxy backends) expand {model} and
 * {alias} as they are, so a template can still make two aliases collide ("{model}{alias}":
 * "ab"+"c" and "a"+"bc"); push_alias_names() lists every name an alias change uses, and the
 * store claims them per gateway in the change's transaction, refusing one another alias holds.
 */
#include "push.h"

#include "../http.h"

#include <stdio.h>
#include <string.h>

bool push_name_encode(const char *in, char *out, size_t cap)
{
    size_t o = 0;

    for (; *in; in++) {
        const char *esc = *in == '-' ? "_0" : *in == '.' ? "_1" : *in == '_' ? "_2" : NULL;
        size_t n = esc ? 2 : 1;

        if (!esc && !((*in >= 'a' && *in <= 'z') || (*in >= '0' && *in <= '9')))
            return false; /* not a model or alias character: no name for it */
        if (o + n >= cap)
            return false;
        if (esc) {
            memcpy(out + o, esc, 2);
        } else {
            out[o] = *in;
        }
        o += n;
    }
    if (o >= cap)
        return false;
    out[o] = '\0';
    return true;
}

bool push_nginx_variable(const char *model, const char *alias, char *out, size_t cap)
{
    char m[160], a[80];

    if (!push_name_encode(model, m, sizeof(m)) || !push_name_encode(alias, a, sizeof(a)))
        return false;
    return (size_t)snprintf(out, cap, "modelgate_%s_%s", m, a) < cap;
}

/* Does a gateway (a store_gateway_configs() item) hear (model, alias)? */
static bool hears(const json_t *g, const char *model, const char *alias)
{
    const json_t *models = json_object_get(g, "models"), *aliases = json_object_get(g, "aliases");
    const json_t *v;
    size_t i;
    bool m = !json_is_array(models), a = !json_is_array(aliases);

    json_array_foreach(models, i, v) m =
        m || (json_is_string(v) && strcmp(json_string_value(v), model) == 0);
    json_array_foreach(aliases, i, v) a =
        a || (json_is_string(v) && strcmp(json_string_value(v), alias) == 0);
    return m && a;
}

static int add(json_t *names, const char *gw, const char *name, const char *scope)
{
    return json_array_append_new(
        names, json_pack("{s:s, s:s, s:s}", "gateway", gw, "name", name, "scope", scope));
}

enum mg_code push_alias_names(struct srv *srv, const char *model, const char *alias,
                              const json_t *routes, json_t **out, struct mg_error *err)
{
    json_t *gws = NULL, *g, *names = json_array(), *r;
    enum mg_code rc;
    size_t i, k;
    char name[512];

    *out = NULL;
    if (names == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    if ((rc = store_gateway_configs(srv->store, &gws, err)) != MG_OK) {
        json_decref(names);
        return rc;
    }
    json_array_foreach(gws, i, g)
    {
        const char *gw = json_string_value(json_object_get(g, "name"));
        const char *kind = json_string_value(json_object_get(g, "kind"));
        const json_t *cfg = json_object_get(g, "config");

        if (gw == NULL || kind == NULL || !hears(g, model, alias))
            continue;
        if (strcmp(kind, "nginx") == 0) {
            const char *file = json_string_value(json_object_get(cfg, "file"));
            const char *up = json_string_value(json_object_get(cfg, "upstream"));

            if (!push_nginx_variable(model, alias, name, sizeof(name)) ||
                add(names, gw, name, "alias") != 0)
                goto too_long;
            if (file && (!push_expand(file, model, alias, 0, name, sizeof(name)) ||
                         add(names, gw, name, "alias") != 0))
                goto too_long;
            json_array_foreach(routes, k, r)
            {
                if (up && (!push_expand(up, model, alias,
                                        json_integer_value(json_object_get(r, "version")), name,
                                        sizeof(name)) ||
                           add(names, gw, name, "model") != 0))
                    goto too_long;
            }
        } else if (strcmp(kind, "haproxy") == 0) {
            const char *be = json_string_value(json_object_get(cfg, "backend"));
            const char *sv = json_string_value(json_object_get(cfg, "server"));

            if (be && (!push_expand(be, model, alias, 0, name, sizeof(name)) ||
                       add(names, gw, name, "alias") != 0))
                goto too_long;
            json_array_foreach(routes, k, r)
            {
                if (sv && !push_expand(sv, model, alias,
                                       json_integer_value(json_object_get(r, "version")), name,
                                       sizeof(name)))
                    goto too_long;
            }
        }
        continue;
    too_long:
        rc = mg_fail(err, MG_EINVAL, "alias",
                     "gateway '%s' cannot name model '%s' alias '%s': a name its templates make "
                     "is too long; shorten the template or the names",
                     gw, model, alias);
        json_decref(gws);
        json_decref(names);
        return rc;
    }
    json_decref(gws);
    *out = names;
    return MG_OK;
}
