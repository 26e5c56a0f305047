/*
 * release.c - aliases (routes, generations, history, bad marks), policies,
 * and the one transaction that commits an alias change and/or a promotion
 * change together with its outbox rows and audit entry.
 *
 * Decisions (which routes, which state) are made by the caller with gates/
 * on what it read; the commit checks that what it read still holds
 * (generation, revision) and otherwise answers MG_ECONFLICT.
 */
#include "store_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/util.h"

/* Longest history handed to decision code (LKG looks back this far). */
#define FACTS_HISTORY_MAX 10000

/* Routes [{version, weight}] enriched with each version's artifact and image. */
static json_t *routes_enriched(struct store_conn *c, int64_t model_id, const json_t *routes)
{
    static const char sql[] =
        "SELECT artifact, image FROM versions WHERE model_id = ? AND version = ?";
    json_t *out = json_array(), *r;
    size_t i;

    json_array_foreach(routes, i, r)
    {
        json_int_t v = json_integer_value(json_object_get(r, "version"));
        json_t *e = json_pack("{s:I, s:O}", "version", v, "weight", json_object_get(r, "weight"));
        sqlite3_stmt *s = store_stmt(c, sql, NULL);

        if (e == NULL)
            continue;
        if (s) {
            sqlite3_bind_int64(s, 1, model_id);
            sqlite3_bind_int64(s, 2, v);
            if (sqlite3_step(s) == SQLITE_ROW) {
                json_object_set_new(e, "artifact", store_col_json_string(s, 0));
                json_object_set_new(e, "image", store_col_json_string(s, 1));
            }
            sqlite3_reset(s);
        }
        json_array_append_new(out, e);
    }
    return out;
}

/* Is the alias protected by a policy? A database error is an error, never
 * "unprotected": that answer would let a direct write skip the gates. */
static enum mg_code policy_exists(struct store_conn *c, int64_t model_id, const char *alias,
                                  bool *yes, struct mg_error *err)
{
    static const char sql[] = "SELECT 1 FROM policies WHERE model_id = ? AND alias = ?";
    sqlite3_stmt *s;
    int r;

    /* Protected until the database says otherwise, even on a path that forgets rc. */
    *yes = true;
    if ((s = store_stmt(c, sql, err)) == NULL)
        return err->code;
    sqlite3_bind_int64(s, 1, model_id);
    store_bind_text(s, 2, alias);
    r = sqlite3_step(s);
    sqlite3_reset(s);
    if (r != SQLITE_ROW && r != SQLITE_DONE)
        return store_db_error(c, r, err);
    *yes = r == SQLITE_ROW;
    return MG_OK;
}

/* *id: the id of the alias's active promotion as a json string, or json null. */
static enum mg_code active_promotion(struct store_conn *c, int64_t model_id, const char *alias,
                                     json_t **id, struct mg_error *err)
{
    static const char sql[] = "SELECT id FROM promotions WHERE model_id = ? AND alias = ? AND "
                              "state IN ('evaluating', 'awaiting_approval', 'rolling_out')";
    sqlite3_stmt *s = store_stmt(c, sql, err);
    int r;

    if (s == NULL)
        return err->code;
    sqlite3_bind_int64(s, 1, model_id);
    store_bind_text(s, 2, alias);
    r = sqlite3_step(s);
    *id = r == SQLITE_ROW ? store_col_json_string(s, 0) : json_null();
    sqlite3_reset(s);
    if (r != SQLITE_ROW && r != SQLITE_DONE) {
        json_decref(*id);
        *id = NULL;
        return store_db_error(c, r, err);
    }
    return MG_OK;
}

/* Both facts of an alias that its readers show: protected and promotion. */
static enum mg_code alias_guard(struct store_conn *c, int64_t model_id, const char *alias,
                                bool *protected_, json_t **promotion, struct mg_error *err)
{
    enum mg_code rc = policy_exists(c, model_id, alias, protected_, err);

    return rc == MG_OK ? active_promotion(c, model_id, alias, promotion, err) : rc;
}

static json_t *deliveries(struct store_conn *c, const char *model, const char *alias)
{
    static const char sql[] = "SELECT gateway, generation, state, attempts, last_error, "
                              "acked_at FROM outbox WHERE model = ? AND alias = ? ORDER BY gateway";
    sqlite3_stmt *s = store_stmt(c, sql, NULL);
    json_t *out = json_array();

    if (s == NULL)
        return out;
    store_bind_text(s, 1, model);
    store_bind_text(s, 2, alias);
    while (sqlite3_step(s) == SQLITE_ROW)
        json_array_append_new(
            out, json_pack("{s:o, s:I, s:o, s:I, s:o, s:o}", "gateway", store_col_json_string(s, 0),
                           "generation", (json_int_t)sqlite3_column_int64(s, 1), "state",
                           store_col_json_string(s, 2), "attempts",
                           (json_int_t)sqlite3_column_int64(s, 3), "last_error",
                           store_col_json_string(s, 4), "acked_at", store_col_json_string(s, 5)));
    sqlite3_reset(s);
    return out;
}

/* Read an alias in the API shape. MG_ENOTFOUND when missing or deleted. */
static enum mg_code alias_read(struct store_conn *c, const char *model, const char *alias,
                               json_t **out, struct mg_error *err)
{
    static const char sql[] = "SELECT generation, routes, updated_at, deleted FROM aliases "
                              "WHERE model_id = ? AND name = ?";
    sqlite3_stmt *s;
    int64_t mid;
    json_t *routes = NULL, *a = NULL, *promo = NULL;
    bool prot = false;
    int r;

    if (store_model_id(c, model, &mid, err) != MG_OK)
        return err->code;
    if (alias_guard(c, mid, alias, &prot, &promo, err) != MG_OK)
        return err->code;
    if ((s = store_stmt(c, sql, err)) == NULL) {
        json_decref(promo);
        return err->code;
    }
    sqlite3_bind_int64(s, 1, mid);
    store_bind_text(s, 2, alias);
    r = sqlite3_step(s);
    if (r == SQLITE_ROW && sqlite3_column_int(s, 3) == 0) {
        json_t *raw = store_col_json(s, 1);
        routes = routes_enriched(c, mid, raw);
        json_decref(raw);
        a = json_pack("{s:s, s:s, s:I, s:o, s:b, s:o, s:n, s:o}", "model", model, "alias", alias,
                      "generation", (json_int_t)sqlite3_column_int64(s, 0), "routes", routes,
                      "protected", prot, "promotion", json_incref(promo), "last_known_good",
                      "updated_at", store_col_json_string(s, 2));
    }
    sqlite3_reset(s);
    json_decref(promo);
    if (r != SQLITE_ROW && r != SQLITE_DONE)
        return store_db_error(c, r, err);
    if (a == NULL)
        return r == SQLITE_ROW && routes == NULL
                   ? mg_fail(err, MG_ENOTFOUND, NULL, "alias '%s' of model '%s' was deleted", alias,
                             model)
                   : mg_fail(err, MG_ENOTFOUND, NULL, "model '%s' has no alias '%s'", model, alias);
    json_object_set_new(a, "deliveries", deliveries(c, model, alias));
    *out = a;
    return MG_OK;
}

enum mg_code store_alias_get(struct store *st, const char *model, const char *alias, json_t **out,
                             struct mg_error *err)
{
    struct store_conn *c = store_read_begin(st);
    enum mg_code rc = alias_read(c, model, alias, out, err);

    store_read_end(st, c);
    return rc;
}

enum mg_code store_alias_list(struct store *st, const char *model, json_t **out,
                              struct mg_error *err)
{
    static const char sql[] =
        "SELECT name FROM aliases WHERE model_id = ? AND deleted = 0 ORDER BY name";
    struct store_conn *c = store_read_begin(st);
    sqlite3_stmt *s;
    json_t *names = json_array(), *items = json_array(), *n, *a;
    int64_t mid;
    size_t i;
    enum mg_code rc;

    if ((rc = store_model_id(c, model, &mid, err)) != MG_OK)
        goto out;
    if ((s = store_stmt(c, sql, err)) == NULL) {
        rc = err->code;
        goto out;
    }
    sqlite3_bind_int64(s, 1, mid);
    while (sqlite3_step(s) == SQLITE_ROW)
        json_array_append_new(names, store_col_json_string(s, 0));
    sqlite3_reset(s);
    json_array_foreach(names, i, n)
    {
        if ((rc = alias_read(c, model, json_string_value(n), &a, err)) != MG_OK)
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

static enum mg_code alias_id(struct store_conn *c, const char *model, const char *alias,
                             int64_t *mid, int64_t *aid, struct mg_error *err)
{
    static const char sql[] = "SELECT id FROM aliases WHERE model_id = ? AND name = ?";
    sqlite3_stmt *s;
    int r;

    if (store_model_id(c, model, mid, err) != MG_OK)
        return err->code;
    if ((s = store_stmt(c, sql, err)) == NULL)
        return err->code;
    sqlite3_bind_int64(s, 1, *mid);
    store_bind_text(s, 2, alias);
    r = sqlite3_step(s);
    *aid = r == SQLITE_ROW ? sqlite3_column_int64(s, 0) : 0;
    sqlite3_reset(s);
    if (r == SQLITE_ROW)
        return MG_OK;
    if (r != SQLITE_DONE)
        return store_db_error(c, r, err);
    return mg_fail(err, MG_ENOTFOUND, NULL, "model '%s' has no alias '%s'", model, alias);
}

enum mg_code store_alias_history(struct store *st, const char *model, const char *alias,
                                 const struct store_page *page, json_t **out, struct mg_error *err)
{
    static const char sql[] = "SELECT generation, routes, at, by, reason, promotion, kind "
                              "FROM alias_history WHERE alias_id = ? AND generation < ? "
                              "ORDER BY generation DESC LIMIT ?";
    struct store_conn *c = store_read_begin(st);
    sqlite3_stmt *s;
    int64_t mid, aid, cursor, last = 0;
    json_t *items = json_array(), *next = json_null();
    unsigned n = 0;
    enum mg_code rc;
    int r;

    if ((rc = alias_id(c, model, alias, &mid, &aid, err)) != MG_OK)
        goto out;
    if (!store_page_cursor(page, &cursor)) {
        rc = mg_fail(err, MG_EINVAL, "page_token", "page_token is not one this server issued");
        goto out;
    }
    if ((s = store_stmt(c, sql, err)) == NULL) {
        rc = err->code;
        goto out;
    }
    sqlite3_bind_int64(s, 1, aid);
    sqlite3_bind_int64(s, 2, cursor);
    sqlite3_bind_int64(s, 3, (int64_t)page->limit + 1);
    while ((r = sqlite3_step(s)) == SQLITE_ROW && n < page->limit) {
        last = sqlite3_column_int64(s, 0);
        json_array_append_new(
            items, json_pack("{s:I, s:o, s:o, s:o, s:o, s:o, s:o}", "generation", (json_int_t)last,
                             "routes", store_col_json(s, 1), "at", store_col_json_string(s, 2),
                             "by", store_col_json_string(s, 3), "reason",
                             store_col_json_string(s, 4), "promotion", store_col_json_string(s, 5),
                             "kind", store_col_json_string(s, 6)));
        n++;
    }
    if (r == SQLITE_ROW) {
        char buf[24];
        snprintf(buf, sizeof(buf), "%lld", (long long)last);
        json_decref(next);
        next = json_string(buf);
    }
    sqlite3_reset(s);
    *out = json_pack("{s:O, s:O}", "items", items, "next_page_token", next);
out:
    json_decref(items);
    json_decref(next);
    store_read_end(st, c);
    return rc;
}

enum mg_code store_alias_facts(struct store *st, const char *model, const char *alias, json_t **out,
                               struct mg_error *err)
{
    static const char sql_alias[] =
        "SELECT id, generation, routes, deleted FROM aliases WHERE model_id = ? AND name = ?";
    static const char sql_hist[] = "SELECT generation, kind, routes, at FROM alias_history "
                                   "WHERE alias_id = ? ORDER BY generation DESC LIMIT ?";
    static const char sql_bad[] = "SELECT version, generation FROM alias_bad WHERE alias_id = ?";
    struct store_conn *c = store_read_begin(st);
    sqlite3_stmt *s;
    int64_t mid, aid = 0, gen = 0;
    json_t *routes = NULL, *hist = json_array(), *bad = json_array(), *promo = NULL;
    bool deleted = false, prot = false;
    enum mg_code rc;

    if ((rc = store_model_id(c, model, &mid, err)) != MG_OK)
        goto out;
    if ((s = store_stmt(c, sql_alias, err)) == NULL) {
        rc = err->code;
        goto out;
    }
    sqlite3_bind_int64(s, 1, mid);
    store_bind_text(s, 2, alias);
    if (sqlite3_step(s) == SQLITE_ROW) {
        aid = sqlite3_column_int64(s, 0);
        gen = sqlite3_column_int64(s, 1);
        routes = store_col_json(s, 2);
        deleted = sqlite3_column_int(s, 3) != 0;
    }
    sqlite3_reset(s);
    if (aid != 0) {
        if ((s = store_stmt(c, sql_hist, err)) == NULL) {
            rc = err->code;
            goto out;
        }
        sqlite3_bind_int64(s, 1, aid);
        sqlite3_bind_int64(s, 2, FACTS_HISTORY_MAX);
        while (sqlite3_step(s) == SQLITE_ROW)
            json_array_append_new(hist, json_pack("{s:I, s:o, s:o, s:o}", "generation",
                                                  (json_int_t)sqlite3_column_int64(s, 0), "kind",
                                                  store_col_json_string(s, 1), "routes",
                                                  store_col_json(s, 2), "at",
                                                  store_col_json_string(s, 3)));
        sqlite3_reset(s);
        if ((s = store_stmt(c, sql_bad, err)) == NULL) {
            rc = err->code;
            goto out;
        }
        sqlite3_bind_int64(s, 1, aid);
        while (sqlite3_step(s) == SQLITE_ROW)
            json_array_append_new(
                bad, json_pack("{s:I, s:I}", "version", (json_int_t)sqlite3_column_int64(s, 0),
                               "generation", (json_int_t)sqlite3_column_int64(s, 1)));
        sqlite3_reset(s);
    }
    if ((rc = alias_guard(c, mid, alias, &prot, &promo, err)) != MG_OK)
        goto out;
    *out = json_pack("{s:b, s:b, s:I, s:o, s:b, s:o, s:O, s:O}", "exists", aid != 0 && !deleted,
                     "deleted", deleted, "generation", (json_int_t)gen, "routes",
                     routes ? routes : json_array(), "protected", prot, "promotion", promo,
                     "history", hist, "bad", bad);
    routes = NULL;
    if (*out == NULL)
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
out:
    json_decref(routes);
    json_decref(hist);
    json_decref(bad);
    store_read_end(st, c);
    return rc;
}

/* Every routed version must exist for the model. */
static enum mg_code check_route_versions(struct store_conn *c, int64_t mid, const char *model,
                                         const json_t *routes, struct mg_error *err)
{
    static const char sql[] = "SELECT 1 FROM versions WHERE model_id = ? AND version = ?";
    json_t *r;
    size_t i;

    json_array_foreach(routes, i, r)
    {
        sqlite3_stmt *s = store_stmt(c, sql, err);
        json_int_t v = json_integer_value(json_object_get(r, "version"));
        int rc;

        if (s == NULL)
            return err->code;
        sqlite3_bind_int64(s, 1, mid);
        sqlite3_bind_int64(s, 2, v);
        rc = sqlite3_step(s);
        sqlite3_reset(s);
        if (rc != SQLITE_ROW)
            return mg_fail(err, MG_EINVAL, "routes", "model '%s' has no version %lld", model,
                           (long long)v);
    }
    return MG_OK;
}

/* Claim the gateway object names of a change for its (model, alias); see
 * store_alias_change.names. */
static enum mg_code claim_names(struct store_conn *c, const struct store_alias_change *a,
                                struct mg_error *err)
{
    static const char sql_ins[] = "INSERT INTO gateway_names (gateway, name, model, alias) "
                                  "VALUES (?, ?, ?, ?) ON CONFLICT (gateway, name) DO NOTHING";
    static const char sql_get[] =
        "SELECT model, alias FROM gateway_names WHERE gateway = ? AND name = ?";
    json_t *n;
    size_t i;
    int r;

    json_array_foreach(a->names, i, n)
    {
        const char *gw = json_string_value(json_object_get(n, "gateway"));
        const char *name = json_string_value(json_object_get(n, "name"));
        const char *scope = json_string_value(json_object_get(n, "scope"));
        bool model_scope = scope && strcmp(scope, "model") == 0;
        const char *want_alias = model_scope ? "*" : a->alias;
        char owner_model[80] = "", owner_alias[40] = "";
        sqlite3_stmt *s;
        enum mg_code rc;

        if (gw == NULL || name == NULL)
            continue;
        if ((s = store_stmt(c, sql_ins, err)) == NULL)
            return err->code;
        store_bind_text(s, 1, gw);
        store_bind_text(s, 2, name);
        store_bind_text(s, 3, a->model);
        store_bind_text(s, 4, want_alias);
        if ((rc = store_exec_stmt(c, s, err)) != MG_OK)
            return rc;
        if ((s = store_stmt(c, sql_get, err)) == NULL)
            return err->code;
        store_bind_text(s, 1, gw);
        store_bind_text(s, 2, name);
        r = sqlite3_step(s);
        if (r == SQLITE_ROW) {
            snprintf(owner_model, sizeof(owner_model), "%s", sqlite3_column_text(s, 0));
            snprintf(owner_alias, sizeof(owner_alias), "%s", sqlite3_column_text(s, 1));
        }
        sqlite3_reset(s);
        if (r != SQLITE_ROW)
            return store_db_error(c, r, err);
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

/* Write the desired state for every gateway that hears (model, alias). */
static enum mg_code outbox_write(struct store_conn *c, const char *model, const char *alias,
                                 int64_t gen, const json_t *payload, const char *at,
                                 struct mg_error *err)
{
    static const char sql[] =
        "INSERT INTO outbox (gateway, model, alias, generation, payload, state, attempts, "
        "last_error, next_attempt_at, written_ms, written_at, acked_at) "
        "SELECT g.name, ?1, ?2, ?3, ?4, 'pending', 0, NULL, 0, ?6, ?5, NULL FROM gateways g "
        "WHERE (g.models IS NULL OR EXISTS (SELECT 1 FROM json_each(g.models) WHERE value = ?1)) "
        "AND (g.aliases IS NULL OR EXISTS (SELECT 1 FROM json_each(g.aliases) WHERE value = ?2)) "
        "ON CONFLICT (gateway, model, alias) DO UPDATE SET generation = excluded.generation, "
        "payload = excluded.payload, state = 'pending', attempts = 0, last_error = NULL, "
        "next_attempt_at = 0, written_ms = excluded.written_ms, written_at = excluded.written_at, "
        "acked_at = NULL";
    sqlite3_stmt *s = store_stmt(c, sql, err);
    char *text = store_json_text(payload);
    enum mg_code rc;

    if (s == NULL || text == NULL) {
        free(text);
        return s ? mg_fail(err, MG_ENOMEM, NULL, "out of memory") : err->code;
    }
    store_bind_text(s, 1, model);
    store_bind_text(s, 2, alias);
    sqlite3_bind_int64(s, 3, gen);
    store_bind_text(s, 4, text);
    store_bind_text(s, 5, at);
    sqlite3_bind_int64(s, 6, mg_now_ms());
    rc = store_exec_stmt(c, s, err);
    free(text);
    return rc;
}

static enum mg_code apply_alias(struct store_conn *c, const char *actor,
                                const struct store_alias_change *a, const char *at,
                                struct mg_error *err)
{
    static const char sql_get[] =
        "SELECT id, generation FROM aliases WHERE model_id = ? AND name = ?";
    static const char sql_ins[] =
        "INSERT INTO aliases (model_id, name, generation, routes, deleted, promotion, "
        "updated_at, updated_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?)";
    static const char sql_upd[] = "UPDATE aliases SET generation = ?, routes = ?, deleted = ?, "
                                  "promotion = ?, updated_at = ?, updated_by = ? WHERE id = ?";
    static const char sql_hist[] =
        "INSERT INTO alias_history (alias_id, generation, routes, kind, reason, promotion, at, "
        "by) VALUES (?, ?, ?, ?, ?, ?, ?, ?)";
    static const char sql_bad[] =
        "INSERT INTO alias_bad (alias_id, version, generation, at, by, reason) "
        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (alias_id, version) DO UPDATE SET "
        "generation = excluded.generation, at = excluded.at, by = excluded.by, "
        "reason = excluded.reason";
    bool deleting = strcmp(a->kind, "delete") == 0;
    int64_t mid, aid = 0, gen = 0;
    sqlite3_stmt *s;
    char *routes = NULL, target[160];
    json_t *payload = NULL, *detail = NULL;
    enum mg_code rc;
    int r;

    if ((rc = store_model_id(c, a->model, &mid, err)) != MG_OK)
        return rc;
    if (a->require_unprotected) {
        bool prot = true;

        if ((rc = policy_exists(c, mid, a->alias, &prot, err)) != MG_OK)
            return rc;
        if (prot)
            return mg_fail(err, MG_EPROTECTED, NULL,
                           "alias '%s' is protected by a policy; create a promotion instead",
                           a->alias);
    }
    if ((s = store_stmt(c, sql_get, err)) == NULL)
        return err->code;
    sqlite3_bind_int64(s, 1, mid);
    store_bind_text(s, 2, a->alias);
    r = sqlite3_step(s);
    if (r == SQLITE_ROW) {
        aid = sqlite3_column_int64(s, 0);
        gen = sqlite3_column_int64(s, 1);
    }
    sqlite3_reset(s);
    if (r != SQLITE_ROW && r != SQLITE_DONE)
        return store_db_error(c, r, err);
    if (a->expected_generation != gen)
        return mg_fail(err, MG_ESTALE, NULL,
                       "alias '%s' changed meanwhile (generation %lld, not %lld); read it and "
                       "try again",
                       a->alias, (long long)gen, (long long)a->expected_generation);
    if ((rc = check_route_versions(c, mid, a->model, a->routes, err)) != MG_OK)
        return rc;
    if ((routes = store_json_text(a->routes)) == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    gen++;
    s = store_stmt(c, aid ? sql_upd : sql_ins, err);
    if (s == NULL) {
        rc = err->code;
        goto out;
    }
    if (aid) {
        sqlite3_bind_int64(s, 1, gen);
        store_bind_text(s, 2, routes);
        sqlite3_bind_int(s, 3, deleting);
        store_bind_text(s, 4, a->promotion);
        store_bind_text(s, 5, at);
        store_bind_text(s, 6, actor);
        sqlite3_bind_int64(s, 7, aid);
    } else {
        sqlite3_bind_int64(s, 1, mid);
        store_bind_text(s, 2, a->alias);
        sqlite3_bind_int64(s, 3, gen);
        store_bind_text(s, 4, routes);
        sqlite3_bind_int(s, 5, deleting);
        store_bind_text(s, 6, a->promotion);
        store_bind_text(s, 7, at);
        store_bind_text(s, 8, actor);
    }
    if ((rc = store_exec_stmt(c, s, err)) != MG_OK)
        goto out;
    if (!aid)
        aid = sqlite3_last_insert_rowid(c->db);
    if ((s = store_stmt(c, sql_hist, err)) == NULL) {
        rc = err->code;
        goto out;
    }
    sqlite3_bind_int64(s, 1, aid);
    sqlite3_bind_int64(s, 2, gen);
    store_bind_text(s, 3, routes);
    store_bind_text(s, 4, a->kind);
    store_bind_text(s, 5, a->reason);
    store_bind_text(s, 6, a->promotion);
    store_bind_text(s, 7, at);
    store_bind_text(s, 8, actor);
    if ((rc = store_exec_stmt(c, s, err)) != MG_OK)
        goto out;
    if (a->mark_bad) {
        if ((s = store_stmt(c, sql_bad, err)) == NULL) {
            rc = err->code;
            goto out;
        }
        sqlite3_bind_int64(s, 1, aid);
        sqlite3_bind_int64(s, 2, a->mark_bad);
        sqlite3_bind_int64(s, 3, gen);
        store_bind_text(s, 4, at);
        store_bind_text(s, 5, actor);
        store_bind_text(s, 6, a->reason);
        if ((rc = store_exec_stmt(c, s, err)) != MG_OK)
            goto out;
    }
    payload = json_pack("{s:o, s:s?}", "routes", routes_enriched(c, mid, a->routes), "promotion",
                        a->promotion);
    if (a->names && (rc = claim_names(c, a, err)) != MG_OK)
        goto out;
    if ((rc = outbox_write(c, a->model, a->alias, gen, payload, at, err)) != MG_OK)
        goto out;
    snprintf(target, sizeof(target), "%s/%s", a->model, a->alias);
    detail = json_pack("{s:I, s:O, s:s, s:s?, s:s?}", "generation", (json_int_t)gen, "routes",
                       a->routes, "kind", a->kind, "reason", a->reason, "promotion", a->promotion);
    if (a->mark_bad)
        json_object_set_new(detail, "marked_bad", json_integer(a->mark_bad));
    rc = store_audit_append(c, actor, deleting ? "alias.delete" : "alias.update", target, detail,
                            err);
out:
    free(routes);
    json_decref(payload);
    json_decref(detail);
    return rc;
}

static enum mg_code apply_promotion(struct store_conn *c, const char *actor,
                                    const struct store_promotion_change *p, const char *at,
                                    struct mg_error *err)
{
    static const char sql_upd[] =
        "UPDATE promotions SET state = ?, step_index = ?, weight = ?, next_step_at = ?, "
        "gates = coalesce(?, gates), rev = rev + 1, updated_at = ? WHERE id = ? AND rev = ?";
    static const char sql_appr[] = "INSERT INTO promotion_approvals (promotion_id, by, decision, "
                                   "comment, at, teams) VALUES (?, ?, ?, ?, ?, ?)";
    static const char sql_ev[] =
        "INSERT INTO promotion_events (promotion_id, at, type, detail) VALUES (?, ?, ?, ?)";
    sqlite3_stmt *s;
    char *gates = p->gates ? store_json_text(p->gates) : NULL;
    json_t *detail = NULL;
    enum mg_code rc;

    if ((s = store_stmt(c, sql_upd, err)) == NULL) {
        rc = err->code;
        goto out;
    }
    store_bind_text(s, 1, p->state);
    sqlite3_bind_int(s, 2, p->step_index);
    sqlite3_bind_int(s, 3, p->weight);
    sqlite3_bind_int64(s, 4, p->next_step_at);
    store_bind_text(s, 5, gates);
    store_bind_text(s, 6, at);
    store_bind_text(s, 7, p->id);
    sqlite3_bind_int64(s, 8, p->expected_rev);
    if ((rc = store_exec_stmt(c, s, err)) != MG_OK)
        goto out;
    if (sqlite3_changes(c->db) == 0) {
        rc = mg_fail(err, MG_ESTALE, NULL, "promotion %s changed meanwhile; read it and try again",
                     p->id);
        goto out;
    }
    if (p->approval_by) {
        if ((s = store_stmt(c, sql_appr, err)) == NULL) {
            rc = err->code;
            goto out;
        }
        store_bind_text(s, 1, p->id);
        store_bind_text(s, 2, p->approval_by);
        store_bind_text(s, 3, p->approval_decision);
        store_bind_text(s, 4, p->approval_comment);
        store_bind_text(s, 5, at);
        store_bind_text(s, 6, p->approval_teams ? p->approval_teams : "[]");
        if ((rc = store_exec_stmt(c, s, err)) != MG_OK) {
            if (rc == MG_ECONFLICT)
                mg_fail(err, MG_ECONFLICT, NULL, "'%s' already decided on this promotion",
                        p->approval_by);
            goto out;
        }
    }
    if (p->event_type) {
        if ((s = store_stmt(c, sql_ev, err)) == NULL) {
            rc = err->code;
            goto out;
        }
        store_bind_text(s, 1, p->id);
        store_bind_text(s, 2, at);
        store_bind_text(s, 3, p->event_type);
        store_bind_text(s, 4, p->event_detail);
        if ((rc = store_exec_stmt(c, s, err)) != MG_OK)
            goto out;
    }
    detail = json_pack("{s:s, s:s?, s:s?, s:s?}", "state", p->state, "event", p->event_type,
                       "detail", p->event_detail, "approval", p->approval_decision);
    rc = store_audit_append(c, actor, p->approval_by ? "promotion.decide" : "promotion.update",
                            p->id, detail, err);
out:
    free(gates);
    json_decref(detail);
    return rc;
}

enum mg_code store_release_commit(struct store *st, const char *actor,
                                  const struct store_alias_change *a,
                                  const struct store_promotion_change *p, json_t **alias_out,
                                  struct mg_error *err)
{
    struct store_conn *c = store_write_begin(st, err);
    json_t *out = NULL;
    char at[32];
    enum mg_code rc = MG_OK;

    if (c == NULL)
        return err->code;
    store_now(at);
    if (p && (rc = apply_promotion(c, actor, p, at, err)) != MG_OK)
        goto out;
    if (a && (rc = apply_alias(c, actor, a, at, err)) != MG_OK)
        goto out;
    if (a && alias_out && strcmp(a->kind, "delete") != 0)
        rc = alias_read(c, a->model, a->alias, &out, err);
out:
    rc = store_write_end(st, c, rc, err);
    if (rc == MG_OK && alias_out)
        *alias_out = out;
    else
        json_decref(out);
    return rc;
}

/* ---- policies --------------------------------------------------------- */

enum mg_code store_policy_put(struct store *st, const char *actor, const char *model,
                              const char *alias, const json_t *policy, json_t **out,
                              struct mg_error *err)
{
    static const char sql[] =
        "INSERT INTO policies (model_id, alias, policy, updated_at, updated_by) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (model_id, alias) DO UPDATE SET "
        "policy = excluded.policy, updated_at = excluded.updated_at, "
        "updated_by = excluded.updated_by";
    struct store_conn *c = store_write_begin(st, err);
    sqlite3_stmt *s;
    char at[32], *text = store_json_text(policy), target[160];
    int64_t mid;
    enum mg_code rc;

    if (c == NULL) {
        free(text);
        return err->code;
    }
    if (text == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    if ((rc = store_model_id(c, model, &mid, err)) != MG_OK)
        goto out;
    if ((s = store_stmt(c, sql, err)) == NULL) {
        rc = err->code;
        goto out;
    }
    store_now(at);
    sqlite3_bind_int64(s, 1, mid);
    store_bind_text(s, 2, alias);
    store_bind_text(s, 3, text);
    store_bind_text(s, 4, at);
    store_bind_text(s, 5, actor);
    if ((rc = store_exec_stmt(c, s, err)) != MG_OK)
        goto out;
    snprintf(target, sizeof(target), "%s/%s", model, alias);
    rc = store_audit_append(c, actor, "policy.put", target, policy, err);
out:
    free(text);
    rc = store_write_end(st, c, rc, err);
    if (rc == MG_OK)
        *out = json_deep_copy(policy);
    return rc;
}

enum mg_code store_policy_get(struct store *st, const char *model, const char *alias, json_t **out,
                              struct mg_error *err)
{
    static const char sql[] = "SELECT policy FROM policies WHERE model_id = ? AND alias = ?";
    struct store_conn *c = store_read_begin(st);
    sqlite3_stmt *s;
    int64_t mid;
    enum mg_code rc;

    if ((rc = store_model_id(c, model, &mid, err)) != MG_OK)
        goto out;
    if ((s = store_stmt(c, sql, err)) == NULL) {
        rc = err->code;
        goto out;
    }
    sqlite3_bind_int64(s, 1, mid);
    store_bind_text(s, 2, alias);
    if (sqlite3_step(s) == SQLITE_ROW)
        *out = store_col_json(s, 0);
    else
        rc = mg_fail(err, MG_ENOTFOUND, NULL, "alias '%s' of model '%s' has no policy", alias,
                     model);
    sqlite3_reset(s);
out:
    store_read_end(st, c);
    return rc;
}

enum mg_code store_policy_delete(struct store *st, const char *actor, const char *model,
                                 const char *alias, struct mg_error *err)
{
    static const char sql[] = "DELETE FROM policies WHERE model_id = ? AND alias = ?";
    struct store_conn *c = store_write_begin(st, err);
    sqlite3_stmt *s;
    char target[160];
    int64_t mid;
    enum mg_code rc;

    if (c == NULL)
        return err->code;
    if ((rc = store_model_id(c, model, &mid, err)) != MG_OK)
        goto out;
    if ((s = store_stmt(c, sql, err)) == NULL) {
        rc = err->code;
        goto out;
    }
    sqlite3_bind_int64(s, 1, mid);
    store_bind_text(s, 2, alias);
    if ((rc = store_exec_stmt(c, s, err)) != MG_OK)
        goto out;
    if (sqlite3_changes(c->db) == 0) {
        rc = mg_fail(err, MG_ENOTFOUND, NULL, "alias '%s' of model '%s' has no policy", alias,
                     model);
        goto out;
    }
    snprintf(target, sizeof(target), "%s/%s", model, alias);
    rc = store_audit_append(c, actor, "policy.delete", target, NULL, err);
out:
    return store_write_end(st, c, rc, err);
}

enum mg_code store_release_apply_alias(struct store_conn *c, const char *actor,
                                       const struct store_alias_change *a, const char *at,
                                       struct mg_error *err)
{
    return apply_alias(c, actor, a, at, err);
}
