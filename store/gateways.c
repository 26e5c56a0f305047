/*
 * gateways.c - the push targets (webhook, HAProxy, nginx, the runner): their
 * configuration and secrets, and each one's view of its outbox rows. A new or
 * changed gateway is handed every alias it hears at its current generation.
 */
#include "store_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "../base/util.h"

/* The gateway's outbox rows, as its "deliveries" (*out NEW). */
static enum mg_code gateway_deliveries(struct db_conn *c, const char *name, json_t **out,
                                       struct mg_error *err)
{
    static const char sql[] = "SELECT model, alias, generation, state, attempts, last_error, "
                              "next_attempt_at, acked_at FROM outbox WHERE gateway = ? "
                              "ORDER BY model, alias";
    struct db_stmt *s = db_prepare(c, sql);
    json_t *list = json_array();
    enum mg_code rc;
    bool row;

    db_bind_text(s, 1, name);
    while ((rc = db_step(s, &row, err)) == MG_OK && row) {
        int64_t next = db_col_i64(s, 6);
        char buf[32];
        json_t *d;

        mg_time_format(next, buf);
        d = json_pack(
            "{s:o, s:o, s:I, s:o, s:I, s:o, s:o, s:o}", "model", store_col_json_string(s, 0),
            "alias", store_col_json_string(s, 1), "generation", (json_int_t)db_col_i64(s, 2),
            "state", store_col_json_string(s, 3), "attempts", (json_int_t)db_col_i64(s, 4),
            "last_error", store_col_json_string(s, 5), "next_attempt_at",
            next > 0 ? json_string(buf) : json_null(), "acked_at", store_col_json_string(s, 7));
        json_array_append_new(list, d);
    }
    if (rc != MG_OK) {
        json_decref(list);
        return rc;
    }
    *out = list;
    return MG_OK;
}

static enum mg_code gateway_read(struct db_conn *c, const char *name, json_t **out,
                                 struct mg_error *err)
{
    static const char sql[] = "SELECT kind, config, models, aliases, disabled_reason, "
                              "created_at, updated_at FROM gateways WHERE name = ?";
    struct db_stmt *s = db_prepare(c, sql);
    json_t *g, *deliveries;
    enum mg_code rc;
    bool row;

    db_bind_text(s, 1, name);
    if ((rc = db_step(s, &row, err)) != MG_OK)
        return rc;
    if (!row)
        return mg_fail(err, MG_ENOTFOUND, NULL, "gateway '%s' does not exist", name);
    g = json_pack("{s:s, s:o, s:o, s:o, s:o, s:b, s:o, s:o, s:o}", "name", name, "kind",
                  store_col_json_string(s, 0), "config", store_col_json(s, 1), "models",
                  store_col_json(s, 2), "aliases", store_col_json(s, 3), "disabled",
                  !db_col_null(s, 4), "disabled_reason", store_col_json_string(s, 4), "created_at",
                  store_col_json_string(s, 5), "updated_at", store_col_json_string(s, 6));
    db_reset(s);
    if (g == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    if ((rc = gateway_deliveries(c, name, &deliveries, err)) != MG_OK) {
        json_decref(g);
        return rc;
    }
    json_object_set_new(g, "deliveries", deliveries);
    *out = g;
    return MG_OK;
}

/* Give a (new or changed) gateway the current state of every alias it hears. */
static enum mg_code enqueue_current(struct db_conn *c, const char *name, const char *at,
                                    struct mg_error *err)
{
    static const char sql_clear[] = "DELETE FROM outbox WHERE gateway = ?";
    /* The payload's routes are enriched with artifact and image, like
     * store_outbox_write() is given them for each change. */
    static const char sql[] =
        "INSERT INTO outbox (gateway, model, alias, generation, payload, state, attempts, "
        "last_error, next_attempt_at, written_ms, written_at, acked_at) "
        "SELECT g.name, m.name, a.name, a.generation, "
        "  json_object('routes', (SELECT json_group_array(json_object("
        "     'version', json_extract(r.value, '$.version'), "
        "     'weight', json_extract(r.value, '$.weight'), "
        "     'artifact', v.artifact, 'image', v.image)) "
        "   FROM json_each(a.routes) r LEFT JOIN versions v ON v.model_id = a.model_id "
        "     AND v.version = json_extract(r.value, '$.version')), "
        "   'promotion', a.promotion), "
        "  'pending', 0, NULL, 0, ?3, ?2, NULL "
        "FROM gateways g, aliases a JOIN models m ON m.id = a.model_id "
        "WHERE g.name = ?1 AND a.deleted = 0 "
        "AND (g.models IS NULL OR EXISTS (SELECT 1 FROM json_each(g.models) WHERE value = m.name)) "
        "AND (g.aliases IS NULL OR EXISTS (SELECT 1 FROM json_each(g.aliases) WHERE value = "
        "a.name))";
    static const char sql_pg[] =
        "INSERT INTO outbox (gateway, model, alias, generation, payload, state, attempts, "
        "last_error, next_attempt_at, written_ms, written_at, acked_at) "
        "SELECT g.name, m.name, a.name, a.generation, "
        "  jsonb_build_object('routes', coalesce((SELECT jsonb_agg(jsonb_build_object("
        "     'version', r.value -> 'version', 'weight', r.value -> 'weight', "
        "     'artifact', v.artifact, 'image', v.image) ORDER BY r.ord) "
        "   FROM jsonb_array_elements(a.routes::jsonb) WITH ORDINALITY r(value, ord) "
        "   LEFT JOIN versions v ON v.model_id = a.model_id "
        "     AND v.version = (r.value ->> 'version')::bigint), '[]'::jsonb), "
        "   'promotion', a.promotion)::text, "
        "  'pending', 0, NULL, 0, ?3, ?2, NULL "
        "FROM gateways g, aliases a JOIN models m ON m.id = a.model_id "
        "WHERE g.name = ?1 AND a.deleted = 0 "
        "AND (g.models IS NULL OR jsonb_exists(g.models::jsonb, m.name)) "
        "AND (g.aliases IS NULL OR jsonb_exists(g.aliases::jsonb, a.name))";
    struct db_stmt *s;
    enum mg_code rc;

    s = db_prepare(c, sql_clear);
    db_bind_text(s, 1, name);
    if ((rc = db_exec(s, err)) != MG_OK)
        return rc;
    s = db_prepare(c, DB_SQL(c, sql, sql_pg));
    db_bind_text(s, 1, name);
    db_bind_text(s, 2, at);
    db_bind_i64(s, 3, store_conn_clock_ms(c));
    return db_exec(s, err);
}

enum mg_code store_gateway_put(struct store *st, const char *actor, const char *name,
                               const char *kind, const json_t *config, const char *secret,
                               const json_t *models, const json_t *aliases, json_t **out,
                               bool *created, struct mg_error *err)
{
    static const char sql_kind[] = "SELECT kind FROM gateways WHERE name = ?";
    static const char sql[] =
        "INSERT INTO gateways (name, kind, config, secret, models, aliases, disabled_reason, "
        "created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, NULL, ?7, ?7) "
        "ON CONFLICT (name) DO UPDATE SET kind = excluded.kind, config = excluded.config, "
        "secret = excluded.secret, models = excluded.models, aliases = excluded.aliases, "
        "disabled_reason = NULL, updated_at = excluded.updated_at";
    struct db_conn *c = store_write_begin(st, err);
    char *cfg = store_json_text(config);
    char *m = models ? store_json_text(models) : NULL,
         *a = aliases ? store_json_text(aliases) : NULL;
    struct db_stmt *s;
    json_t *g = NULL, *detail;
    char at[32];
    bool exists = false, row;
    enum mg_code rc = MG_OK;

    if (c == NULL) {
        free(cfg);
        free(m);
        free(a);
        return err->code;
    }
    /* A filter that failed to serialise must not be stored as NULL ("all"). */
    if (cfg == NULL || (models && m == NULL) || (aliases && a == NULL)) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    s = db_prepare(c, sql_kind);
    db_bind_text(s, 1, name);
    if ((rc = db_step(s, &row, err)) == MG_OK && row) {
        exists = true;
        if (strcmp(db_col_text(s, 0), "runner") == 0)
            rc = mg_fail(err, MG_ECONFLICT, "name",
                         "'%s' is the built-in smoke-test runner and cannot be changed", name);
        db_reset(s);
    }
    if (rc != MG_OK)
        goto out;
    s = db_prepare(c, sql);
    store_now(at);
    db_bind_text(s, 1, name);
    db_bind_text(s, 2, kind);
    db_bind_text(s, 3, cfg);
    db_bind_text(s, 4, secret);
    db_bind_text(s, 5, m);
    db_bind_text(s, 6, a);
    db_bind_text(s, 7, at);
    if ((rc = db_exec(s, err)) != MG_OK)
        goto out;
    if ((rc = enqueue_current(c, name, at, err)) != MG_OK)
        goto out;
    detail = json_pack("{s:s, s:O, s:O?, s:O?}", "kind", kind, "config", config, "models", models,
                       "aliases", aliases);
    rc = store_audit_append(c, actor, exists ? "gateway.update" : "gateway.create", name,
                            STORE_NO_MODEL, detail, err);
    json_decref(detail);
    if (rc == MG_OK)
        rc = gateway_read(c, name, &g, err);
out:
    free(cfg);
    free(m);
    free(a);
    rc = store_write_end(st, c, rc, err);
    if (rc == MG_OK) {
        *out = g;
        *created = !exists;
    } else {
        json_decref(g);
    }
    return rc;
}

enum mg_code store_gateway_get(struct store *st, const char *name, json_t **out,
                               struct mg_error *err)
{
    struct db_conn *c = store_read_begin(st);
    enum mg_code rc = gateway_read(c, name, out, err);

    store_read_end(st, c);
    return rc;
}

enum mg_code store_gateway_list(struct store *st, json_t **out, struct mg_error *err)
{
    static const char sql[] = "SELECT name FROM gateways ORDER BY name";
    struct db_conn *c = store_read_begin(st);
    struct db_stmt *s;
    json_t *names = json_array(), *items = json_array(), *n, *g;
    size_t i;
    enum mg_code rc;
    bool row;

    s = db_prepare(c, sql);
    while ((rc = db_step(s, &row, err)) == MG_OK && row)
        json_array_append_new(names, store_col_json_string(s, 0));
    if (rc != MG_OK)
        goto out;
    json_array_foreach(names, i, n)
    {
        if ((rc = gateway_read(c, json_string_value(n), &g, err)) != MG_OK)
            goto out;
        json_array_append_new(items, g);
    }
    *out = json_pack("{s:O, s:n}", "items", items, "next_page_token");
out:
    json_decref(names);
    json_decref(items);
    store_read_end(st, c);
    return rc;
}

enum mg_code store_gateway_delete(struct store *st, const char *actor, const char *name,
                                  struct mg_error *err)
{
    static const char sql_out[] = "DELETE FROM outbox WHERE gateway = ?";
    static const char sql[] = "DELETE FROM gateways WHERE name = ? AND kind != 'runner'";
    struct db_conn *c = store_write_begin(st, err);
    struct db_stmt *s;
    enum mg_code rc;

    if (c == NULL)
        return err->code;
    if (strcmp(name, "runner") == 0) {
        rc = mg_fail(err, MG_ECONFLICT, NULL,
                     "'runner' is the built-in smoke-test runner and cannot be deleted");
        goto out;
    }
    s = db_prepare(c, sql_out);
    db_bind_text(s, 1, name);
    if ((rc = db_exec(s, err)) != MG_OK)
        goto out;
    s = db_prepare(c, sql);
    db_bind_text(s, 1, name);
    if ((rc = db_exec(s, err)) != MG_OK)
        goto out;
    if (db_changes(s) == 0) {
        rc = mg_fail(err, MG_ENOTFOUND, NULL, "gateway '%s' does not exist", name);
        goto out;
    }
    rc = store_audit_append(c, actor, "gateway.delete", name, STORE_NO_MODEL, NULL, err);
out:
    return store_write_end(st, c, rc, err);
}

enum mg_code store_gateway_disable(struct store *st, const char *name, const char *reason,
                                   struct mg_error *err)
{
    static const char sql[] =
        "UPDATE gateways SET disabled_reason = ?, updated_at = ? WHERE name = ?";
    struct db_conn *c = store_write_begin(st, err);
    struct db_stmt *s;
    char at[32];
    json_t *detail;
    enum mg_code rc;

    if (c == NULL)
        return err->code;
    s = db_prepare(c, sql);
    store_now(at);
    db_bind_text(s, 1, reason);
    db_bind_text(s, 2, at);
    db_bind_text(s, 3, name);
    if ((rc = db_exec(s, err)) != MG_OK)
        goto out;
    if (db_changes(s) == 0) {
        rc = mg_fail(err, MG_ENOTFOUND, NULL, "gateway '%s' does not exist", name);
        goto out;
    }
    detail = json_pack("{s:s}", "reason", reason);
    rc = store_audit_append(c, "modelgated", "gateway.disable", name, STORE_NO_MODEL, detail, err);
    json_decref(detail);
out:
    return store_write_end(st, c, rc, err);
}

enum mg_code store_gateway_configs(struct store *st, json_t **out, struct mg_error *err)
{
    static const char sql[] = "SELECT name, kind, config, models, aliases, disabled_reason "
                              "FROM gateways ORDER BY name";
    struct db_conn *c = store_read_one(st);
    struct db_stmt *s;
    json_t *items = json_array();
    enum mg_code rc = MG_OK;
    bool row;

    *out = NULL;
    s = db_prepare(c, sql);
    while ((rc = db_step(s, &row, err)) == MG_OK && row)
        json_array_append_new(
            items, json_pack("{s:o, s:o, s:o, s:o, s:o, s:b}", "name", store_col_json_string(s, 0),
                             "kind", store_col_json_string(s, 1), "config", store_col_json(s, 2),
                             "models", store_col_json(s, 3), "aliases", store_col_json(s, 4),
                             "disabled", !db_col_null(s, 5)));
    db_reset(s);
    if (rc == MG_OK) {
        *out = items;
        items = NULL;
    }
    json_decref(items);
    store_read_end(st, c);
    return rc;
}
