/*
 * aliases.c - aliases: routes, generations, history and bad marks; the alias
 * half of a release commit (store_alias_apply) with its gateway-name claims. What
 * decisions about an alias read is in aliases_facts.c, its last-known-good in
 * aliases_lkg.c.
 *
 * Decisions (which routes) are made by the caller with gates/ on what it
 * read; the apply checks that what it read still holds (the generation) and
 * otherwise answers MG_ESTALE.
 */
#include "store_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/util.h"

/* Items of list (objects with a "version": routes, match rules) copied with each version's
 * artifact and image added (*out NEW): what gateways, the runner and readers are told. */
static enum mg_code enriched(struct db_conn *c, int64_t model_id, const json_t *list, json_t **out,
                             struct mg_error *err)
{
    static const char sql[] =
        "SELECT artifact, image FROM versions WHERE model_id = ? AND version = ?";
    json_t *res = json_array(), *r;
    enum mg_code rc = MG_OK;
    size_t i;
    bool row;

    if (res == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    json_array_foreach(list, i, r)
    {
        json_int_t v = json_integer_value(json_object_get(r, "version"));
        json_t *e = json_deep_copy(r);
        struct db_stmt *s = db_prepare(c, sql);

        if (e == NULL || json_array_append_new(res, e) != 0) {
            rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
            break;
        }
        db_bind_i64(s, 1, model_id);
        db_bind_i64(s, 2, v);
        if ((rc = db_step(s, &row, err)) != MG_OK)
            break;
        if (row) {
            json_object_set_new(e, "artifact", store_col_json_string(s, 0));
            json_object_set_new(e, "image", store_col_json_string(s, 1));
            db_reset(s);
        }
    }
    if (rc != MG_OK) {
        json_decref(res);
        return rc;
    }
    *out = res;
    return MG_OK;
}

/* A shadow ({"version","percent"} or null) enriched like a route (*out NEW). */
static enum mg_code shadow_enriched(struct db_conn *c, int64_t model_id, const json_t *shadow,
                                    json_t **out, struct mg_error *err)
{
    json_t *one, *list = NULL;
    enum mg_code rc;

    if (!json_is_object(shadow)) {
        *out = json_null();
        return MG_OK;
    }
    if ((one = json_pack("[O]", shadow)) == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    rc = enriched(c, model_id, one, &list, err);
    json_decref(one);
    if (rc != MG_OK)
        return rc;
    *out = json_incref(json_array_get(list, 0));
    json_decref(list);
    return MG_OK;
}

json_t *store_alias_col_match(struct db_stmt *s, int i)
{
    json_t *v = store_col_json(s, i);

    if (json_is_array(v))
        return v;
    json_decref(v);
    return json_array();
}

json_t *store_alias_col_shadow(struct db_stmt *s, int i)
{
    json_t *v = store_col_json(s, i);

    if (json_is_object(v))
        return v;
    json_decref(v);
    return json_null();
}

/* *id: the id of the alias's active promotion as a json string, or json null (NEW). */
static enum mg_code active_promotion(struct db_conn *c, int64_t model_id, const char *alias,
                                     json_t **id, struct mg_error *err)
{
    static const char sql[] = "SELECT id FROM promotions WHERE model_id = ? AND alias = ? AND "
                              "state IN ('evaluating', 'awaiting_approval', 'rolling_out')";
    struct db_stmt *s = db_prepare(c, sql);
    enum mg_code rc;
    bool row;

    *id = NULL;
    db_bind_i64(s, 1, model_id);
    db_bind_text(s, 2, alias);
    if ((rc = db_step(s, &row, err)) != MG_OK)
        return rc;
    *id = row ? store_col_json_string(s, 0) : json_null();
    db_reset(s);
    return MG_OK;
}

enum mg_code store_alias_guard(struct db_conn *c, int64_t model_id, const char *alias,
                               bool *protected_, json_t **promotion, struct mg_error *err)
{
    enum mg_code rc = store_policy_exists(c, model_id, alias, protected_, err);

    return rc == MG_OK ? active_promotion(c, model_id, alias, promotion, err) : rc;
}

/* The alias's outbox rows, as its "deliveries" (*out NEW). */
static enum mg_code deliveries(struct db_conn *c, const char *model, const char *alias,
                               json_t **out, struct mg_error *err)
{
    static const char sql[] = "SELECT gateway, generation, state, attempts, last_error, "
                              "acked_at FROM outbox WHERE model = ? AND alias = ? ORDER BY gateway";
    struct db_stmt *s = db_prepare(c, sql);
    json_t *list = json_array();
    enum mg_code rc;
    bool row;

    db_bind_text(s, 1, model);
    db_bind_text(s, 2, alias);
    while ((rc = db_step(s, &row, err)) == MG_OK && row)
        json_array_append_new(
            list, json_pack("{s:o, s:I, s:o, s:I, s:o, s:o}", "gateway",
                            store_col_json_string(s, 0), "generation", (json_int_t)db_col_i64(s, 1),
                            "state", store_col_json_string(s, 2), "attempts",
                            (json_int_t)db_col_i64(s, 3), "last_error", store_col_json_string(s, 4),
                            "acked_at", store_col_json_string(s, 5)));
    if (rc != MG_OK) {
        json_decref(list);
        return rc;
    }
    *out = list;
    return MG_OK;
}

enum mg_code store_alias_read(struct db_conn *c, const char *model, const char *alias, json_t **out,
                              struct mg_error *err)
{
    static const char sql[] = "SELECT generation, routes, updated_at, deleted, match_rules, "
                              "shadow FROM aliases WHERE model_id = ? AND name = ?";
    struct db_stmt *s;
    int64_t mid, gen;
    json_t *raw = NULL, *routes = NULL, *a = NULL, *promo = NULL, *deliv = NULL, *updated;
    json_t *raw_match = NULL, *raw_shadow = NULL, *match = NULL, *shadow = NULL;
    bool prot = false, row;
    enum mg_code rc;

    if ((rc = store_model_id(c, model, &mid, err)) != MG_OK ||
        (rc = store_alias_guard(c, mid, alias, &prot, &promo, err)) != MG_OK)
        return rc;
    s = db_prepare(c, sql);
    db_bind_i64(s, 1, mid);
    db_bind_text(s, 2, alias);
    if ((rc = db_step(s, &row, err)) != MG_OK)
        goto out;
    if (!row) {
        rc = mg_fail(err, MG_ENOTFOUND, NULL, "model '%s' has no alias '%s'", model, alias);
        goto out;
    }
    if (db_col_i64(s, 3) != 0) {
        db_reset(s);
        rc = mg_fail(err, MG_ENOTFOUND, NULL, "alias '%s' of model '%s' was deleted", alias, model);
        goto out;
    }
    gen = db_col_i64(s, 0);
    raw = store_col_json(s, 1);
    updated = store_col_json_string(s, 2);
    raw_match = store_alias_col_match(s, 4);
    raw_shadow = store_alias_col_shadow(s, 5);
    db_reset(s);
    if ((rc = enriched(c, mid, raw, &routes, err)) != MG_OK ||
        (rc = enriched(c, mid, raw_match, &match, err)) != MG_OK ||
        (rc = shadow_enriched(c, mid, raw_shadow, &shadow, err)) != MG_OK ||
        (rc = deliveries(c, model, alias, &deliv, err)) != MG_OK) {
        json_decref(updated);
        goto out;
    }
    a = json_pack("{s:s, s:s, s:I, s:O, s:O, s:O, s:b, s:O, s:n, s:o, s:O}", "model", model,
                  "alias", alias, "generation", (json_int_t)gen, "routes", routes, "match", match,
                  "shadow", shadow, "protected", prot, "promotion", promo, "last_known_good",
                  "updated_at", updated, "deliveries", deliv);
    if (a == NULL)
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
out:
    json_decref(raw);
    json_decref(raw_match);
    json_decref(raw_shadow);
    json_decref(match);
    json_decref(shadow);
    json_decref(routes);
    json_decref(promo);
    json_decref(deliv);
    if (rc == MG_OK)
        *out = a;
    return rc;
}

enum mg_code store_alias_get(struct store *st, const char *model, const char *alias, json_t **out,
                             struct mg_error *err)
{
    struct db_conn *c = store_read_begin(st);
    enum mg_code rc = store_alias_read(c, model, alias, out, err);

    store_read_end(st, c);
    return rc;
}

enum mg_code store_alias_list(struct store *st, const char *model, json_t **out,
                              struct mg_error *err)
{
    static const char sql[] =
        "SELECT name FROM aliases WHERE model_id = ? AND deleted = 0 ORDER BY name";
    struct db_conn *c = store_read_begin(st);
    struct db_stmt *s;
    json_t *names = json_array(), *items = json_array(), *n, *a;
    int64_t mid;
    size_t i;
    enum mg_code rc;
    bool row;

    if ((rc = store_model_id(c, model, &mid, err)) != MG_OK)
        goto out;
    s = db_prepare(c, sql);
    db_bind_i64(s, 1, mid);
    while ((rc = db_step(s, &row, err)) == MG_OK && row)
        json_array_append_new(names, store_col_json_string(s, 0));
    if (rc != MG_OK)
        goto out;
    json_array_foreach(names, i, n)
    {
        if ((rc = store_alias_read(c, model, json_string_value(n), &a, err)) != MG_OK)
            goto out;
        json_array_append_new(items, a);
    }
    *out = json_pack("{s:O}", "items", items);
out:
    json_decref(names);
    json_decref(items);
    store_read_end(st, c);
    return rc;
}

static enum mg_code alias_id(struct db_conn *c, const char *model, const char *alias, int64_t *mid,
                             int64_t *aid, struct mg_error *err)
{
    static const char sql[] = "SELECT id FROM aliases WHERE model_id = ? AND name = ?";
    struct db_stmt *s;
    enum mg_code rc;
    bool row;

    if ((rc = store_model_id(c, model, mid, err)) != MG_OK)
        return rc;
    s = db_prepare(c, sql);
    db_bind_i64(s, 1, *mid);
    db_bind_text(s, 2, alias);
    if ((rc = db_step(s, &row, err)) != MG_OK)
        return rc;
    if (!row)
        return mg_fail(err, MG_ENOTFOUND, NULL, "model '%s' has no alias '%s'", model, alias);
    *aid = db_col_i64(s, 0);
    db_reset(s);
    return MG_OK;
}

static enum mg_code history_row(struct db_stmt *s, void *ctx, json_t **item, char cursor[128],
                                struct mg_error *err)
{
    int64_t gen = db_col_i64(s, 0);

    (void)ctx;
    snprintf(cursor, 128, "%lld", (long long)gen);
    *item =
        json_pack("{s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "generation", (json_int_t)gen,
                  "routes", store_col_json(s, 1), "match", store_alias_col_match(s, 7), "shadow",
                  store_alias_col_shadow(s, 8), "at", store_col_json_string(s, 2), "by",
                  store_col_json_string(s, 3), "reason", store_col_json_string(s, 4), "promotion",
                  store_col_json_string(s, 5), "kind", store_col_json_string(s, 6));
    return *item ? MG_OK : mg_fail(err, MG_ENOMEM, NULL, "out of memory");
}

enum mg_code store_alias_history(struct store *st, const char *model, const char *alias,
                                 const struct store_page *page, json_t **out, struct mg_error *err)
{
    static const char sql[] = "SELECT generation, routes, at, by, reason, promotion, kind, "
                              "match_rules, shadow "
                              "FROM alias_history WHERE alias_id = ? AND generation < ? "
                              "ORDER BY generation DESC LIMIT ?";
    struct db_conn *c = store_read_begin(st);
    struct db_stmt *s;
    int64_t mid, aid = 0, cursor;
    enum mg_code rc;

    if ((rc = alias_id(c, model, alias, &mid, &aid, err)) != MG_OK ||
        (rc = store_page_cursor(page, &cursor, err)) != MG_OK)
        goto out;
    s = db_prepare(c, sql);
    db_bind_i64(s, 1, aid);
    db_bind_i64(s, 2, cursor);
    rc = store_page_rows(s, 3, page, history_row, NULL, out, err);
out:
    store_read_end(st, c);
    return rc;
}

/* Does model `mid` have version v (*found), and may it take traffic? A version that is
 * archived or deleted cannot (MG_ECONFLICT naming field). */
static enum mg_code version_exists(struct db_conn *c, int64_t mid, const char *model, int64_t v,
                                   const char *field, bool *found, struct mg_error *err)
{
    static const char sql[] = "SELECT status FROM versions WHERE model_id = ? AND version = ?";
    struct db_stmt *s = db_prepare(c, sql);
    char status[16] = "";
    enum mg_code rc;
    bool row;

    db_bind_i64(s, 1, mid);
    db_bind_i64(s, 2, v);
    *found = false;
    if ((rc = db_step(s, &row, err)) != MG_OK || !row)
        return rc;
    *found = true;
    snprintf(status, sizeof(status), "%s", db_col_text(s, 0));
    db_reset(s);
    if (strcmp(status, "ready") != 0)
        return mg_fail(err, MG_ECONFLICT, field,
                       "version %lld of model '%s' is %s and cannot be routed%s", (long long)v,
                       model, status,
                       strcmp(status, "archived") == 0 ? "; unarchive it first" : "");
    return MG_OK;
}

/* Every version a change routes (routes, match rules, shadow) must exist for the model and be
 * ready; the error names the field. */
static enum mg_code check_versions(struct db_conn *c, int64_t mid,
                                   const struct store_alias_change *a, struct mg_error *err)
{
    const struct mg_routes *r = a->routes;
    size_t i;
    enum mg_code rc;
    bool found;
    char field[48];

    for (i = 0; i < r->nroutes; i++) {
        int64_t v = r->routes[i].version;

        if ((rc = version_exists(c, mid, a->model, v, "routes", &found, err)) != MG_OK)
            return rc;
        if (!found)
            return mg_fail(err, MG_EINVAL, "routes", "model '%s' has no version %lld", a->model,
                           (long long)v);
    }
    for (i = 0; i < r->nmatch; i++) {
        int64_t v = r->match[i].version;

        snprintf(field, sizeof(field), "match[%zu].version", i);
        if ((rc = version_exists(c, mid, a->model, v, field, &found, err)) != MG_OK)
            return rc;
        if (!found)
            return mg_fail(err, MG_EINVAL, field, "%s: model '%s' has no version %lld", field,
                           a->model, (long long)v);
    }
    if (r->shadow.version != 0) {
        int64_t v = r->shadow.version;

        if ((rc = version_exists(c, mid, a->model, v, "shadow.version", &found, err)) != MG_OK)
            return rc;
        if (!found)
            return mg_fail(err, MG_EINVAL, "shadow.version",
                           "shadow.version: model '%s' has no version %lld", a->model,
                           (long long)v);
    }
    return MG_OK;
}

/* Claim the gateway object names of a change for its (model, alias); see
 * store_alias_change.names. */
static enum mg_code claim_names(struct db_conn *c, const struct store_alias_change *a,
                                struct mg_error *err)
{
    static const char sql_ins[] = "INSERT INTO gateway_names (gateway, name, model, alias) "
                                  "VALUES (?, ?, ?, ?) ON CONFLICT (gateway, name) DO NOTHING";
    static const char sql_get[] =
        "SELECT model, alias FROM gateway_names WHERE gateway = ? AND name = ?";
    json_t *n;
    size_t i;
    bool row;

    json_array_foreach(a->names, i, n)
    {
        const char *gw = json_string_value(json_object_get(n, "gateway"));
        const char *name = json_string_value(json_object_get(n, "name"));
        const char *scope = json_string_value(json_object_get(n, "scope"));
        bool model_scope = scope && strcmp(scope, "model") == 0;
        const char *want_alias = model_scope ? "*" : a->alias;
        char owner_model[80] = "", owner_alias[40] = "";
        struct db_stmt *s;
        enum mg_code rc;

        if (gw == NULL || name == NULL)
            continue;
        s = db_prepare(c, sql_ins);
        db_bind_text(s, 1, gw);
        db_bind_text(s, 2, name);
        db_bind_text(s, 3, a->model);
        db_bind_text(s, 4, want_alias);
        if ((rc = db_exec(s, err)) != MG_OK)
            return rc;
        s = db_prepare(c, sql_get);
        db_bind_text(s, 1, gw);
        db_bind_text(s, 2, name);
        if ((rc = db_step(s, &row, err)) != MG_OK)
            return rc;
        if (!row) /* inserted or kept just above, in this transaction */
            return mg_fail(err, MG_EDB, NULL, "gateway name '%.200s' vanished", name);
        snprintf(owner_model, sizeof(owner_model), "%s", db_col_text(s, 0));
        snprintf(owner_alias, sizeof(owner_alias), "%s", db_col_text(s, 1));
        db_reset(s);
        if (strcmp(owner_model, a->model) != 0 ||
            (!model_scope && strcmp(owner_alias, want_alias) != 0))
            return mg_fail(err, MG_ECONFLICT, "alias",
                           "gateway '%s' already uses the name '%.200s' for model '%s'%s%s%s; "
                           "two aliases never share a gateway name: rename one, or change the "
                           "gateway's template",
                           gw, name, owner_model, strcmp(owner_alias, "*") ? " alias '" : "",
                           strcmp(owner_alias, "*") ? owner_alias : "",
                           strcmp(owner_alias, "*") ? "'" : "");
    }
    return MG_OK;
}

enum mg_code store_alias_apply(struct db_conn *c, const struct sign_key *key, const char *actor,
                               const struct store_alias_change *a, const char *at,
                               struct mg_error *err)
{
    static const char sql_get[] =
        "SELECT id, generation FROM aliases WHERE model_id = ? AND name = ?";
    static const char sql_ins[] =
        "INSERT INTO aliases (model_id, name, generation, routes, deleted, promotion, "
        "updated_at, updated_by, match_rules, shadow) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "RETURNING id";
    static const char sql_upd[] =
        "UPDATE aliases SET generation = ?, routes = ?, deleted = ?, promotion = ?, "
        "updated_at = ?, updated_by = ?, match_rules = ?, shadow = ? WHERE id = ?";
    static const char sql_hist[] =
        "INSERT INTO alias_history (alias_id, generation, routes, kind, reason, promotion, at, "
        "by, match_rules, shadow) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
    static const char sql_bad[] =
        "INSERT INTO alias_bad (alias_id, version, generation, at, by, reason) "
        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (alias_id, version) DO UPDATE SET "
        "generation = excluded.generation, at = excluded.at, by = excluded.by, "
        "reason = excluded.reason";
    bool deleting = strcmp(a->kind, "delete") == 0;
    int64_t mid, aid = 0, gen = 0;
    struct db_stmt *s;
    char *routes = NULL, *match = NULL, *shadow = NULL, target[160];
    json_t *payload = NULL, *detail = NULL, *e_routes = NULL, *e_match = NULL, *e_shadow = NULL;
    json_t *j_routes = NULL, *j_match = NULL, *j_shadow = NULL; /* the change's, written once */
    enum mg_code rc;
    bool row;

    if ((rc = store_model_id(c, a->model, &mid, err)) != MG_OK)
        return rc;
    if (a->require_unprotected) {
        bool prot = true;

        if ((rc = store_policy_exists(c, mid, a->alias, &prot, err)) != MG_OK)
            return rc;
        if (prot)
            return mg_fail(err, MG_EPROTECTED, NULL,
                           "alias '%s' is protected by a policy; create a promotion instead",
                           a->alias);
    }
    s = db_prepare(c, sql_get);
    db_bind_i64(s, 1, mid);
    db_bind_text(s, 2, a->alias);
    if ((rc = db_step(s, &row, err)) != MG_OK)
        return rc;
    if (row) {
        aid = db_col_i64(s, 0);
        gen = db_col_i64(s, 1);
        db_reset(s);
    }
    if (a->expected_generation != gen)
        return mg_fail(err, MG_ESTALE, NULL,
                       "alias '%s' changed meanwhile (generation %lld, not %lld); read it and "
                       "try again",
                       a->alias, (long long)gen, (long long)a->expected_generation);
    if ((rc = check_versions(c, mid, a, err)) != MG_OK)
        return rc;
    /* Stored as NULL when there are none: the columns came after the first release. */
    if ((j_routes = mg_routes_json(a->routes)) == NULL ||
        (j_match = mg_match_json(a->routes)) == NULL ||
        (j_shadow = mg_shadow_json(a->routes)) == NULL ||
        (routes = store_json_text(j_routes)) == NULL ||
        (a->routes->nmatch > 0 && (match = store_json_text(j_match)) == NULL) ||
        (a->routes->shadow.version != 0 && (shadow = store_json_text(j_shadow)) == NULL)) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    gen++;
    s = db_prepare(c, aid ? sql_upd : sql_ins);
    if (aid) {
        db_bind_i64(s, 1, gen);
        db_bind_text(s, 2, routes);
        db_bind_i64(s, 3, deleting);
        db_bind_text(s, 4, a->promotion);
        db_bind_text(s, 5, at);
        db_bind_text(s, 6, actor);
        db_bind_text(s, 7, match);
        db_bind_text(s, 8, shadow);
        db_bind_i64(s, 9, aid);
    } else {
        db_bind_i64(s, 1, mid);
        db_bind_text(s, 2, a->alias);
        db_bind_i64(s, 3, gen);
        db_bind_text(s, 4, routes);
        db_bind_i64(s, 5, deleting);
        db_bind_text(s, 6, a->promotion);
        db_bind_text(s, 7, at);
        db_bind_text(s, 8, actor);
        db_bind_text(s, 9, match);
        db_bind_text(s, 10, shadow);
    }
    if (!aid) {
        if ((rc = db_step(s, &row, err)) != MG_OK)
            goto out;
        aid = row ? db_col_i64(s, 0) : 0;
    }
    if ((rc = db_exec(s, err)) != MG_OK)
        goto out;
    s = db_prepare(c, sql_hist);
    db_bind_i64(s, 1, aid);
    db_bind_i64(s, 2, gen);
    db_bind_text(s, 3, routes);
    db_bind_text(s, 4, a->kind);
    db_bind_text(s, 5, a->reason);
    db_bind_text(s, 6, a->promotion);
    db_bind_text(s, 7, at);
    db_bind_text(s, 8, actor);
    db_bind_text(s, 9, match);
    db_bind_text(s, 10, shadow);
    if ((rc = db_exec(s, err)) != MG_OK)
        goto out;
    /* docs/contract.md "Signed releases": the generation is signed with the change that makes it.
     */
    if ((rc = store_attest_generation(c, key, mid, aid, a, j_routes, j_match, j_shadow, gen, at,
                                      actor, err)) != MG_OK)
        goto out;
    if (a->mark_bad) {
        s = db_prepare(c, sql_bad);
        db_bind_i64(s, 1, aid);
        db_bind_i64(s, 2, a->mark_bad);
        db_bind_i64(s, 3, gen);
        db_bind_text(s, 4, at);
        db_bind_text(s, 5, actor);
        db_bind_text(s, 6, a->reason);
        if ((rc = db_exec(s, err)) != MG_OK)
            goto out;
    }
    if ((rc = enriched(c, mid, j_routes, &e_routes, err)) != MG_OK ||
        (rc = enriched(c, mid, match ? j_match : NULL, &e_match, err)) != MG_OK ||
        (rc = shadow_enriched(c, mid, j_shadow, &e_shadow, err)) != MG_OK)
        goto out;
    /* What every gateway is told: the whole generation. */
    payload = json_pack("{s:O, s:O, s:O, s:s?}", "routes", e_routes, "match", e_match, "shadow",
                        e_shadow, "promotion", a->promotion);
    if (payload == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    if (a->event_type) /* why the alias moved, for the gateways that want to know */
        json_object_set_new(
            payload, "event",
            json_pack("{s:s, s:s?}", "type", a->event_type, "detail", a->event_detail));
    if (a->names && (rc = claim_names(c, a, err)) != MG_OK)
        goto out;
    if ((rc = store_outbox_write(c, a->model, a->alias, gen, payload, at, err)) != MG_OK)
        goto out;
    snprintf(target, sizeof(target), "%s/%s", a->model, a->alias);
    detail = json_pack("{s:I, s:O, s:s, s:s?, s:s?}", "generation", (json_int_t)gen, "routes",
                       j_routes, "kind", a->kind, "reason", a->reason, "promotion", a->promotion);
    if (detail && match)
        json_object_set(detail, "match", j_match);
    if (detail && shadow)
        json_object_set(detail, "shadow", j_shadow);
    if (detail && a->mark_bad)
        json_object_set_new(detail, "marked_bad", json_integer(a->mark_bad));
    rc = store_audit_append(c, actor, deleting ? "alias.delete" : "alias.update", target, a->model,
                            detail, err);
out:
    free(routes);
    free(match);
    free(shadow);
    json_decref(e_routes);
    json_decref(e_match);
    json_decref(e_shadow);
    json_decref(j_routes);
    json_decref(j_match);
    json_decref(j_shadow);
    json_decref(payload);
    json_decref(detail);
    return rc;
}

/* ---- which versions an alias routes -------------------------------------- */

bool store_generation_routes(const json_t *routes, const json_t *match, const json_t *shadow,
                             int64_t version)
{
    json_t *r;
    size_t i;

    json_array_foreach(routes, i, r)
    {
        if (json_integer_value(json_object_get(r, "version")) == version &&
            json_integer_value(json_object_get(r, "weight")) > 0)
            return true;
    }
    json_array_foreach(match, i, r)
    {
        if (json_integer_value(json_object_get(r, "version")) == version)
            return true;
    }
    return json_is_object(shadow) &&
           json_integer_value(json_object_get(shadow, "version")) == version;
}

json_t *store_generation_versions(const json_t *routes, const json_t *match, const json_t *shadow)
{
    json_t *out = json_array(), *lists[3], *r;
    size_t i, k, j;

    lists[0] = (json_t *)routes;
    lists[1] = (json_t *)match;
    lists[2] = json_is_object(shadow) ? json_pack("[O]", shadow) : NULL;
    for (k = 0; out && k < 3; k++) {
        json_array_foreach(lists[k], i, r)
        {
            json_int_t v = json_integer_value(json_object_get(r, "version"));
            bool seen = false;

            if (k == 0 && json_integer_value(json_object_get(r, "weight")) <= 0)
                continue;
            for (j = 0; j < json_array_size(out) && !seen; j++)
                seen = json_integer_value(json_array_get(out, j)) == v;
            if (!seen && v > 0 && json_array_append_new(out, json_integer(v)) != 0) {
                json_decref(out);
                out = NULL;
                break;
            }
        }
    }
    json_decref(lists[2]);
    return out;
}

enum mg_code store_version_routed_in(struct db_conn *c, int64_t model_id, int64_t version,
                                     json_t **aliases, struct mg_error *err)
{
    static const char sql[] = "SELECT name, routes, match_rules, shadow FROM aliases "
                              "WHERE model_id = ? AND deleted = 0 ORDER BY name";
    struct db_stmt *s = db_prepare(c, sql);
    json_t *names = json_array();
    enum mg_code rc;
    bool row;

    if (names == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    db_bind_i64(s, 1, model_id);
    while ((rc = db_step(s, &row, err)) == MG_OK && row) {
        json_t *routes = store_col_json(s, 1), *match = store_alias_col_match(s, 2),
               *shadow = store_alias_col_shadow(s, 3);

        if (store_generation_routes(routes, match, shadow, version))
            json_array_append_new(names, store_col_json_string(s, 0));
        json_decref(routes);
        json_decref(match);
        json_decref(shadow);
    }
    if (rc != MG_OK) {
        json_decref(names);
        return rc;
    }
    *aliases = names;
    return MG_OK;
}

enum mg_code store_version_routed(struct store *st, const char *model, int64_t version,
                                  json_t **aliases, struct mg_error *err)
{
    struct db_conn *c = store_read_begin(st);
    int64_t mid;
    enum mg_code rc = store_model_id(c, model, &mid, err);

    if (rc == MG_OK)
        rc = store_version_routed_in(c, mid, version, aliases, err);
    store_read_end(st, c);
    return rc;
}

enum mg_code store_routed_versions(struct store *st, json_t **out, struct mg_error *err)
{
    static const char sql[] = "SELECT m.name, a.routes, a.match_rules, a.shadow FROM aliases a "
                              "JOIN models m ON m.id = a.model_id WHERE a.deleted = 0 "
                              "ORDER BY m.name";
    struct db_conn *c = store_read_one(st);
    struct db_stmt *s = db_prepare(c, sql);
    json_t *items = json_array(), *x;
    enum mg_code rc;
    bool row;
    size_t i, k;

    while ((rc = db_step(s, &row, err)) == MG_OK && row) {
        json_t *routes = store_col_json(s, 1), *match = store_alias_col_match(s, 2),
               *shadow = store_alias_col_shadow(s, 3);
        json_t *vs = store_generation_versions(routes, match, shadow), *v;
        const char *model = db_col_text(s, 0);

        json_array_foreach(vs, i, v)
        {
            size_t at = json_array_size(items);
            int cmp = 1;

            /* kept sorted by (model, version), each pair once */
            json_array_foreach(items, k, x)
            {
                cmp = strcmp(json_string_value(json_object_get(x, "model")), model);
                if (cmp == 0)
                    cmp = json_integer_value(json_object_get(x, "version")) < json_integer_value(v)
                              ? -1
                              : json_integer_value(json_object_get(x, "version")) >
                                    json_integer_value(v);
                if (cmp >= 0) {
                    at = k;
                    break;
                }
            }
            if (at == json_array_size(items) || cmp != 0)
                json_array_insert_new(items, at,
                                      json_pack("{s:s, s:O}", "model", model, "version", v));
        }
        json_decref(vs);
        json_decref(routes);
        json_decref(match);
        json_decref(shadow);
    }
    if (rc == MG_OK)
        *out = json_incref(items);
    json_decref(items);
    store_read_end(st, c);
    return rc;
}

enum mg_code store_alias_strategies(struct store *st, json_t **out, struct mg_error *err)
{
    static const char sql[] = "SELECT m.name, a.name, a.match_rules, a.shadow FROM aliases a "
                              "JOIN models m ON m.id = a.model_id WHERE a.deleted = 0 AND "
                              "(a.match_rules IS NOT NULL OR a.shadow IS NOT NULL) "
                              "ORDER BY m.name, a.name";
    struct db_conn *c = store_read_one(st);
    struct db_stmt *s = db_prepare(c, sql);
    json_t *items = json_array();
    enum mg_code rc;
    bool row;

    while ((rc = db_step(s, &row, err)) == MG_OK && row)
        json_array_append_new(
            items, json_pack("{s:o, s:o, s:o, s:o}", "model", store_col_json_string(s, 0), "alias",
                             store_col_json_string(s, 1), "match", store_alias_col_match(s, 2),
                             "shadow", store_alias_col_shadow(s, 3)));
    if (rc == MG_OK)
        *out = json_incref(items);
    json_decref(items);
    store_read_end(st, c);
    return rc;
}
