/*
 * release_aliases.c - release control, aliases: reading them with their last-known-good, direct
 * changes, rollback.
 */
#include "release.h"
#include "release_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../base/util.h"
#include "../gates/policy.h"
#include "../gates/rollout.h"
#include "../gates/vram.h"
#include "../artifact/sign.h"

/* ---- aliases ---------------------------------------------------------- */

void rel_add_lkg(json_t *alias, const json_t *facts)
{
    json_t *entry = NULL;
    int64_t v = rel_facts_lkg(facts, 0, &entry);

    if (v)
        json_object_set_new(alias, "last_known_good",
                            json_pack("{s:I, s:O}", "version", (json_int_t)v, "since",
                                      json_object_get(entry, "at")));
}

/* docs/contract.md "Routing strategies": the alias shows each gateway's names for it,
 * {"gateway_names":{"<gateway>":[…]}} (what ctl_alias_names lists and the store claims). */
static void add_gateway_names(struct ctl *ctl, const char *model, const char *alias, json_t *a)
{
    json_t *names = NULL, *by = json_object(), *n, *list;
    struct mg_error err;
    size_t i;

    if (by == NULL)
        return;
    if (ctl_alias_names(ctl, model, alias, json_object_get(a, "routes"),
                        json_object_get(a, "match"), json_object_get(a, "shadow"), &names,
                        &err) == MG_OK) {
        json_array_foreach(names, i, n)
        {
            const char *gw = json_string_value(json_object_get(n, "gateway"));

            if (gw == NULL)
                continue;
            if ((list = json_object_get(by, gw)) == NULL) {
                list = json_array();
                json_object_set_new(by, gw, list);
            }
            json_array_append(list, json_object_get(n, "name"));
        }
    }
    json_decref(names);
    json_object_set_new(a, "gateway_names", by);
}

enum mg_code rel_alias_get(struct ctl *ctl, const char *model, const char *alias, json_t **out,
                           struct mg_error *err)
{
    json_t *a = NULL, *facts = NULL;

    if (store_alias_get(ctl->store, model, alias, &a, err) != MG_OK)
        return err->code;
    if (rel_alias_facts(ctl, model, alias, &facts, err) != MG_OK) {
        json_decref(a);
        return err->code;
    }
    rel_add_lkg(a, facts);
    json_decref(facts);
    add_gateway_names(ctl, model, alias, a);
    *out = a;
    return MG_OK;
}

/* The reply of a write: the alias as the write committed it (a, stolen), with the LKG and
 * gateway names added, not whatever a concurrent write made of it since. */
static enum mg_code written(struct ctl *ctl, const char *model, const char *alias, json_t *a,
                            json_t **out, struct mg_error *err)
{
    json_t *facts = NULL;

    if (out == NULL) { /* the caller wants no answer (as set, advance and abort allow) */
        json_decref(a);
        return MG_OK;
    }
    if (a == NULL) /* a delete, or no alias to read: answer what is there */
        return rel_alias_get(ctl, model, alias, out, err);
    if (rel_alias_facts(ctl, model, alias, &facts, err) != MG_OK) {
        json_decref(a);
        return err->code;
    }
    rel_add_lkg(a, facts);
    json_decref(facts);
    add_gateway_names(ctl, model, alias, a);
    *out = a;
    return MG_OK;
}

enum mg_code rel_alias_at(struct ctl *ctl, const char *model, const char *alias, int64_t gen,
                          json_t **out, struct mg_error *err)
{
    static const char *const fields[] = {"routes", "match", "shadow"};
    struct store_page page = {.limit = 1000, .page_token = NULL};
    json_t *a = NULL, *hist = NULL, *e;
    enum mg_code rc;
    size_t i;

    if ((rc = rel_alias_get(ctl, model, alias, &a, err)) != MG_OK)
        return rc;
    if (json_integer_value(json_object_get(a, "generation")) == gen || gen <= 0 ||
        store_alias_history(ctl->store, model, alias, &page, &hist, err) != MG_OK) {
        *out = a;
        return MG_OK;
    }
    json_array_foreach(json_object_get(hist, "items"), i, e)
    {
        if (json_integer_value(json_object_get(e, "generation")) != gen)
            continue;
        json_object_set_new(a, "generation", json_integer(gen));
        for (size_t f = 0; f < sizeof(fields) / sizeof(fields[0]); f++) {
            json_t *v = json_object_get(e, fields[f]);
            json_object_set(a, fields[f], v ? v : json_null());
        }
        add_gateway_names(ctl, model, alias, a);
        break;
    }
    json_decref(hist);
    *out = a;
    return MG_OK;
}

enum mg_code rel_alias_list(struct ctl *ctl, const char *model, json_t **out, struct mg_error *err)
{
    json_t *list = NULL, *a;
    size_t i;

    if (store_alias_list(ctl->store, model, &list, err) != MG_OK)
        return err->code;
    json_array_foreach(json_object_get(list, "items"), i, a)
    {
        json_t *facts = NULL;
        if (rel_alias_facts(ctl, model, json_string_value(json_object_get(a, "alias")), &facts,
                            err) == MG_OK)
            rel_add_lkg(a, facts);
        json_decref(facts);
    }
    *out = list;
    return MG_OK;
}

/* Read facts, commit a direct change; again when the alias changed meanwhile. */
static enum mg_code alias_change(struct ctl *ctl, const char *actor, const char *model,
                                 const char *alias, const char *kind,
                                 const struct mg_routes *routes, json_t **out, struct mg_error *err)
{
    struct store_alias_change a;
    json_t *facts = NULL, *committed = NULL;
    enum mg_code rc = MG_ESTALE;
    int attempt;

    for (attempt = 0; attempt < RETRIES && rc == MG_ESTALE; attempt++) {
        json_decref(facts);
        facts = NULL;
        if ((rc = rel_alias_facts(ctl, model, alias, &facts, err)) != MG_OK)
            break;
        if (strcmp(kind, "delete") == 0 && !json_is_true(json_object_get(facts, "exists"))) {
            rc = mg_fail(err, MG_ENOTFOUND, NULL, "model '%s' has no alias '%s'", model, alias);
            break;
        }
        memset(&a, 0, sizeof(a));
        a.model = model;
        a.alias = alias;
        a.expected_generation = json_integer_value(json_object_get(facts, "generation"));
        a.routes = routes;
        a.kind = kind;
        a.require_unprotected = true;
        rc = rel_commit_change(ctl, actor, &a, NULL, out ? &committed : NULL, err);
    }
    if (rc == MG_OK)
        ctl_gateways_kick(ctl);
    if (rc == MG_OK && out)
        rc = written(ctl, model, alias, committed, out, err);
    json_decref(facts);
    return rc;
}

enum mg_code rel_alias_set(struct ctl *ctl, const char *actor, const char *model, const char *alias,
                           const struct mg_routes *routes, json_t **out, struct mg_error *err)
{
    json_t *match = mg_match_json(routes), *shadow = mg_shadow_json(routes);
    enum mg_code rc;

    /* What a gateway cannot apply is refused before anything changes. */
    if (match == NULL || shadow == NULL)
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    else
        rc = ctl_alias_check(ctl, model, alias, match, shadow, err);
    json_decref(match);
    json_decref(shadow);
    if (rc != MG_OK)
        return rc;
    return alias_change(ctl, actor, model, alias, "set", routes, out, err);
}

enum mg_code rel_alias_delete(struct ctl *ctl, const char *actor, const char *model,
                              const char *alias, struct mg_error *err)
{
    static const struct mg_routes none;

    return alias_change(ctl, actor, model, alias, "delete", &none, NULL, err);
}

/* store_alias_lkg_find's test for an LKG read: the first entry, newest first, that holds. */
static bool lkg_holds(const struct lkg_entry *e, const struct lkg_bad *bad, size_t nbad, void *arg)
{
    (void)arg;
    return lkg_entry_holds(e, bad, nbad, 0);
}

enum mg_code rel_lkg(struct ctl *ctl, const char *model, const char *alias, json_t **out,
                     struct mg_error *err)
{
    struct store_lkg p;
    char url[256];
    enum mg_code rc;

    /* The choice and the chosen version's brief in one read transaction (one BEGIN, one
     * snapshot), reading history only back to the entry chosen. */
    if ((rc = store_alias_lkg_find(ctl->store, model, alias, lkg_holds, NULL, &p, err)) != MG_OK)
        return rc;
    if (p.version == 0) {
        rc = mg_fail(err, MG_ENOLKG, NULL,
                     "alias '%s' of model '%s' has no last-known-good version yet", alias, model);
        goto out;
    }
    snprintf(url, sizeof(url), "/api/v1/models/%s/versions/%lld/signature", model,
             (long long)p.version);
    *out = json_pack("{s:s, s:s, s:I, s:s, s:o, s:s, s:s, s:I}", "model", model, "alias", alias,
                     "version", (json_int_t)p.version, "artifact", p.artifact, "image",
                     p.image ? json_string(p.image) : json_null(), "signature_url", url, "since",
                     p.at, "generation", (json_int_t)p.generation);
    if (*out == NULL)
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
out:
    store_lkg_clear(&p);
    return rc;
}

enum mg_code rel_rollback(struct ctl *ctl, const char *actor, const char *model, const char *alias,
                          const char *reason, json_t **out, struct mg_error *err)
{
    json_t *committed = NULL;
    enum mg_code rc = MG_ESTALE;
    int attempt;

    for (attempt = 0; attempt < RETRIES && rc == MG_ESTALE; attempt++) {
        struct store_alias_change a;
        struct store_promotion_change pc;
        struct mg_routes routes;
        json_t *facts = NULL, *p = NULL, *match = NULL, *shadow, *r;
        int64_t newest, target;
        bool has_promo = false;
        size_t i;

        if ((rc = rel_alias_facts(ctl, model, alias, &facts, err)) != MG_OK)
            return rc;
        newest = rel_facts_newest_routed(facts);
        target = rel_facts_lkg(facts, newest, NULL);
        if (target == 0) {
            rc = mg_fail(err, MG_ENOKNOWNGOOD, NULL,
                         "alias '%s' has no known-good version other than v%lld to roll back to",
                         alias, (long long)newest);
            json_decref(facts);
            return rc;
        }
        /* The rolled-back version loses its match rules and its shadow; the rest stay. */
        match = json_array();
        json_array_foreach(json_object_get(facts, "match"), i, r)
        {
            if (json_integer_value(json_object_get(r, "version")) != newest)
                json_array_append(match, r);
        }
        shadow = json_object_get(facts, "shadow");
        if (json_integer_value(json_object_get(shadow, "version")) == newest)
            shadow = NULL;
        rc = mg_routes_from_json(NULL, match, shadow, &routes, err);
        json_decref(match);
        if (rc != MG_OK) {
            json_decref(facts);
            return rc;
        }
        routes.routes[0].version = target;
        routes.routes[0].weight = 100;
        routes.nroutes = 1;
        memset(&a, 0, sizeof(a));
        a.model = model;
        a.alias = alias;
        a.expected_generation = json_integer_value(json_object_get(facts, "generation"));
        a.routes = &routes;
        a.kind = "rollback";
        a.reason = reason;
        a.mark_bad = newest;
        memset(&pc, 0, sizeof(pc));
        if (!json_is_null(json_object_get(facts, "promotion")) &&
            store_promotion_get(ctl->store, json_string_value(json_object_get(facts, "promotion")),
                                &p, err) == MG_OK) {
            has_promo = true;
            a.promotion = json_string_value(json_object_get(p, "id"));
            pc.id = a.promotion;
            pc.expected_rev = json_integer_value(json_object_get(p, "_rev"));
            pc.state = "rolled_back";
            pc.phase = json_string_value(
                json_object_get(json_object_get(p, "rollout"), "phase")); /* where it ended */
            pc.step_index = (int)json_integer_value(
                json_object_get(json_object_get(p, "rollout"), "step_index"));
            pc.weight = 0;
            pc.next_step_at = 0;
            pc.event_type = "rolled_back";
            pc.event_detail = reason;
        }
        json_decref(committed);
        committed = NULL;
        rc = rel_commit_change(ctl, actor, &a, has_promo ? &pc : NULL, &committed, err);
        json_decref(facts);
        json_decref(p);
    }
    if (rc == MG_OK) {
        rel_timer_kick(ctl);
        ctl_gateways_kick(ctl);
        rc = written(ctl, model, alias, committed, out, err);
        committed = NULL;
    }
    json_decref(committed);
    return rc;
}
