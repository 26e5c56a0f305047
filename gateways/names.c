/*
 * names.c - the object names gateways derive from (model, alias, version), one-to-one, and
 * what each kind of gateway can apply of an alias's routing strategies (push_alias_check).
 *
 * nginx variables: $modelgate_<enc(model)>_<enc(alias)>, where enc keeps [a-z0-9] and
 * writes '-' as "_0", '.' as "_1" and '_' as "_2". Why that is one-to-one: in an encoded
 * name every '_' is followed by a digit, and an alias starts with a letter, so the one '_'
 * followed by a letter is the separator; everything before it decodes to the model and
 * everything after to the alias, each escape to one character. (A suffix after the alias
 * begins with '_' and a letter too, so it stays unambiguous: "_shadow", the shadow's
 * variable, and the include file's own "_split" and "_pin<N>".) "fraud"/"production" keeps
 * its old name, $modelgate_fraud_production.
 *
 * Template names (nginx include files and upstreams, HAProxy backends) expand {model} and
 * {alias} as they are, so a template can still make two aliases collide ("{model}{alias}":
 * "ab"+"c" and "a"+"bc"); push_alias_names() lists every name an alias change uses, and the
 * store claims them per gateway in the change's transaction, refusing one another alias holds.
 */
#include "push.h"

#include "../control/control.h"

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

/* Every version a generation names (weighted routes, even at 0, then match rules, then the
 * shadow), for upstream names: *out NEW array of the route-like objects. */
static json_t *named_versions(const json_t *routes, const json_t *match, const json_t *shadow)
{
    json_t *all = json_array();

    if (all == NULL)
        return NULL;
    if (json_is_array(routes))
        json_array_extend(all, (json_t *)routes);
    if (json_is_array(match))
        json_array_extend(all, (json_t *)match);
    if (json_is_object(shadow))
        json_array_append(all, (json_t *)shadow);
    return all;
}

enum mg_code push_alias_names(struct ctl *ctl, const char *model, const char *alias,
                              const json_t *routes_only, const json_t *match, const json_t *shadow,
                              json_t **out, struct mg_error *err)
{
    json_t *gws = NULL, *g, *names = json_array(), *r;
    json_t *routes = named_versions(routes_only, match, shadow);
    enum mg_code rc;
    size_t i, k;
    char name[512];

    *out = NULL;
    if (names == NULL || routes == NULL) {
        json_decref(names);
        json_decref(routes);
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
    if ((rc = store_gateway_configs(ctl->store, &gws, err)) != MG_OK) {
        json_decref(names);
        json_decref(routes);
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
            if (strlen(name) + 8 > sizeof(name) || add(names, gw, strcat(name, "_shadow"), "alias"))
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
            const char *map = json_string_value(json_object_get(cfg, "map"));

            if (be && (!push_expand(be, model, alias, 0, name, sizeof(name)) ||
                       add(names, gw, name, "alias") != 0))
                goto too_long;
            if (map && (!push_expand(map, model, alias, 0, name, sizeof(name)) ||
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
        json_decref(routes);
        return rc;
    }
    json_decref(gws);
    json_decref(routes);
    *out = names;
    return MG_OK;
}

/* nginx reads a request header as $http_<name> with '-' as '_': only names of a-z, 0-9 and
 * '-' have one variable of their own ('_' is ignored in headers by default). */
static bool nginx_header_ok(const char *h)
{
    for (; h && *h; h++) {
        if (!((*h >= 'a' && *h <= 'z') || (*h >= '0' && *h <= '9') || *h == '-'))
            return false;
    }
    return h != NULL;
}

/* Can gateway gw of `kind` with `cfg` apply these match rules and shadow of (model, alias)?
 * MG_EINVAL naming the gateway and the field otherwise. */
static enum mg_code gateway_can(const char *gw, const char *kind, const json_t *cfg,
                                const char *model, const char *alias, const json_t *match,
                                const json_t *shadow, struct mg_error *err)
{
    json_t *r;
    size_t k;
    char field[48];

    if (strcmp(kind, "haproxy") == 0) {
        if (json_is_object(shadow))
            return mg_fail(err, MG_EINVAL, "shadow",
                           "gateway '%s' (HAProxy) serves model '%s' alias '%s' and cannot copy "
                           "requests to a shadow; leave shadow out, or serve the alias through "
                           "nginx or a webhook",
                           gw, model, alias);
        if (json_array_size(match) > 0 && json_object_get(cfg, "map") == NULL)
            return mg_fail(err, MG_EINVAL, "match",
                           "gateway '%s' (HAProxy) serves model '%s' alias '%s' and pins headers "
                           "through a map: give the gateway a \"map\" (see README, \"Routing "
                           "strategies\"), or leave match out",
                           gw, model, alias);
    } else if (strcmp(kind, "nginx") == 0) {
        json_array_foreach(match, k, r)
        {
            const char *h = json_string_value(json_object_get(r, "header"));

            if (nginx_header_ok(h))
                continue;
            snprintf(field, sizeof(field), "match[%zu].header", k);
            return mg_fail(err, MG_EINVAL, field,
                           "gateway '%s' (nginx) serves model '%s' alias '%s' and reads headers "
                           "only by names of a-z, 0-9 and '-', not '%s'",
                           gw, model, alias, h ? h : "");
        }
    }
    return MG_OK;
}

enum mg_code push_alias_check(struct ctl *ctl, const char *model, const char *alias,
                              const json_t *match, const json_t *shadow, struct mg_error *err)
{
    json_t *gws = NULL, *g;
    enum mg_code rc = MG_OK;
    size_t i;

    if (json_array_size(match) == 0 && !json_is_object(shadow))
        return MG_OK;
    if ((rc = store_gateway_configs(ctl->store, &gws, err)) != MG_OK)
        return rc;
    json_array_foreach(gws, i, g)
    {
        const char *gw = json_string_value(json_object_get(g, "name"));
        const char *kind = json_string_value(json_object_get(g, "kind"));

        if (gw == NULL || kind == NULL || !hears(g, model, alias))
            continue;
        if ((rc = gateway_can(gw, kind, json_object_get(g, "config"), model, alias, match, shadow,
                              err)) != MG_OK)
            break;
    }
    json_decref(gws);
    return rc;
}

enum mg_code push_gateway_check(struct ctl *ctl, const char *name, const char *kind,
                                const json_t *config, const json_t *models, const json_t *aliases,
                                struct mg_error *err)
{
    json_t *list = NULL, *a, *g;
    enum mg_code rc;
    size_t i;
    char why[MG_ERR_MSG_MAX];

    if (strcmp(kind, "haproxy") != 0 && strcmp(kind, "nginx") != 0)
        return MG_OK;
    g = json_pack("{s:O?, s:O?}", "models", models, "aliases", aliases);
    if (g == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    if ((rc = store_alias_strategies(ctl->store, &list, err)) != MG_OK) {
        json_decref(g);
        return rc;
    }
    json_array_foreach(list, i, a)
    {
        const char *model = json_string_value(json_object_get(a, "model"));
        const char *alias = json_string_value(json_object_get(a, "alias"));

        if (model == NULL || alias == NULL || !hears(g, model, alias))
            continue;
        if ((rc = gateway_can(name, kind, config, model, alias, json_object_get(a, "match"),
                              json_object_get(a, "shadow"), err)) != MG_OK) {
            snprintf(why, sizeof(why), "%s", err->message);
            rc = mg_fail(err, MG_EINVAL, "aliases",
                         "%s; change the alias first, or leave it out of the gateway's models or "
                         "aliases",
                         why);
            break;
        }
    }
    json_decref(list);
    json_decref(g);
    return rc;
}

void push_version_names(struct ctl *ctl, const char *model, const char *alias, int64_t version,
                        struct ctl_version_names *out)
{
    json_t *gws = NULL, *g;
    struct mg_error err;
    size_t i;

    memset(out, 0, sizeof(*out));
    if (store_gateway_configs(ctl->store, &gws, &err) != MG_OK)
        return;
    json_array_foreach(gws, i, g)
    {
        const char *kind = json_string_value(json_object_get(g, "kind"));
        const json_t *cfg = json_object_get(g, "config");

        if (kind == NULL || !hears(g, model, alias))
            continue;
        if (strcmp(kind, "haproxy") == 0 && !out->has_haproxy) {
            const char *be = json_string_value(json_object_get(cfg, "backend"));
            const char *sv = json_string_value(json_object_get(cfg, "server"));

            out->has_haproxy =
                be && sv &&
                push_expand(be, model, alias, version, out->backend, sizeof(out->backend)) &&
                push_expand(sv, model, alias, version, out->server, sizeof(out->server));
        } else if (strcmp(kind, "nginx") == 0 && !out->has_nginx) {
            const char *up = json_string_value(json_object_get(cfg, "upstream"));

            out->has_nginx =
                up && push_expand(up, model, alias, version, out->upstream, sizeof(out->upstream));
        }
    }
    json_decref(gws);
}
