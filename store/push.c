/*
 * push.c - gateways and the outbox they are fed from.
 *
 * The outbox holds desired state per (gateway, model, alias): the newest
 * generation only. A worker claims a row with a lease (so one delivery per
 * row is in flight, and a crashed worker's row comes back when the lease
 * ends), delivers, and records the outcome only for the generation it
 * delivered; a newer generation written meanwhile stays pending.
 */
#include "store_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "../common/util.h"

static json_t *gateway_deliveries(struct store_conn *c, const char *name)
{
    static const char sql[] = "SELECT model, alias, generation, state, attempts, last_error, "
                              "next_attempt_at, acked_at FROM outbox WHERE gateway = ? "
                              "ORDER BY model, alias";
    sqlite3_stmt *s = store_stmt(c, sql, NULL);
    json_t *out = json_array();

    if (s == NULL)
        return out;
    store_bind_text(s, 1, name);
    while (sqlite3_step(s) == SQLITE_ROW) {
        int64_t next = sqlite3_column_int64(s, 6);
        char buf[32];
        json_t *d;

        mg_time_format(next, buf);
        d = json_pack(
            "{s:o, s:o, s:I, s:o, s:I, s:o, s:o, s:o}", "model", store_col_json_string(s, 0),
            "alias", store_col_json_string(s, 1), "generation",
            (json_int_t)sqlite3_column_int64(s, 2), "state", store_col_json_string(s, 3),
            "attempts", (json_int_t)sqlite3_column_int64(s, 4), "last_error",
            store_col_json_string(s, 5), "next_attempt_at",
            next > 0 ? json_string(buf) : json_null(), "acked_at", store_col_json_string(s, 7));
        json_array_append_new(out, d);
    }
    sqlite3_reset(s);
    return out;
}

static enum mg_code gateway_read(struct store_conn *c, const char *name, json_t **out,
                                 struct mg_error *err)
{
    static const char sql[] = "SELECT kind, config, models, aliases, disabled_reason, "
                              "created_at, updated_at FROM gateways WHERE name = ?";
    sqlite3_stmt *s = store_stmt(c, sql, err);
    json_t *g = NULL;
    int r;

    if (s == NULL)
        return err->code;
    store_bind_text(s, 1, name);
    r = sqlite3_step(s);
    if (r == SQLITE_ROW)
        g = json_pack("{s:s, s:o, s:o, s:o, s:o, s:b, s:o, s:o, s:o}", "name", name, "kind",
                      store_col_json_string(s, 0), "config", store_col_json(s, 1), "models",
                      store_col_json(s, 2), "aliases", store_col_json(s, 3), "disabled",
                      sqlite3_column_type(s, 4) != SQLITE_NULL, "disabled_reason",
                      store_col_json_string(s, 4), "created_at", store_col_json_string(s, 5),
                      "updated_at", store_col_json_string(s, 6));
    sqlite3_reset(s);
    if (r == SQLITE_DONE)
        return mg_fail(err, MG_ENOTFOUND, NULL, "gateway '%s' does not exist", name);
    if (r != SQLITE_ROW)
        return store_db_error(c, r, err);
    if (g == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    json_object_set_new(g, "deliveries", gateway_deliveries(c, name));
    *out = g;
    return MG_OK;
}

/* Give a (new or changed) gateway the current state of every alias it hears. */
static enum mg_code enqueue_current(struct store_conn *c, const char *name, const char *at,
                                    struct mg_error *err)
{
    static const char sql_clear[] = "DELETE FROM outbox WHERE gateway = ?";
    /* The payload's routes are enriched with artifact and image, like
     * outbox_write() in release.c does for each change. */
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
    sqlite3_stmt *s;
    enum mg_code rc;

    if ((s = store_stmt(c, sql_clear, err)) == NULL)
        return err->code;
    store_bind_text(s, 1, name);
    if ((rc = store_exec_stmt(c, s, err)) != MG_OK)
        return rc;
    if ((s = store_stmt(c, sql, err)) == NULL)
        return err->code;
    store_bind_text(s, 1, name);
    store_bind_text(s, 2, at);
    sqlite3_bind_int64(s, 3, mg_now_ms());
    return store_exec_stmt(c, s, err);
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
    struct store_conn *c = store_write_begin(st, err);
    char *cfg = store_json_text(config);
    char *m = models ? store_json_text(models) : NULL,
         *a = aliases ? store_json_text(aliases) : NULL;
    sqlite3_stmt *s;
    json_t *g = NULL, *detail;
    char at[32];
    bool exists = false;
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
    if ((s = store_stmt(c, sql_kind, err)) == NULL) {
        rc = err->code;
        goto out;
    }
    store_bind_text(s, 1, name);
    if (sqlite3_step(s) == SQLITE_ROW) {
        exists = true;
        if (strcmp((const char *)sqlite3_column_text(s, 0), "runner") == 0)
            rc = mg_fail(err, MG_ECONFLICT, "name",
                         "'%s' is the built-in smoke-test runner and cannot be changed", name);
    }
    sqlite3_reset(s);
    if (rc != MG_OK)
        goto out;
    if ((s = store_stmt(c, sql, err)) == NULL) {
        rc = err->code;
        goto out;
    }
    store_now(at);
    store_bind_text(s, 1, name);
    store_bind_text(s, 2, kind);
    store_bind_text(s, 3, cfg);
    store_bind_text(s, 4, secret);
    store_bind_text(s, 5, m);
    store_bind_text(s, 6, a);
    store_bind_text(s, 7, at);
    if ((rc = store_exec_stmt(c, s, err)) != MG_OK)
        goto out;
    if ((rc = enqueue_current(c, name, at, err)) != MG_OK)
        goto out;
    detail = json_pack("{s:s, s:O, s:O?, s:O?}", "kind", kind, "config", config, "models", models,
                       "aliases", aliases);
    rc = store_audit_append(c, actor, exists ? "gateway.update" : "gateway.create", name, detail,
                            err);
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
    struct store_conn *c = store_read_begin(st);
    enum mg_code rc = gateway_read(c, name, out, err);

    store_read_end(st, c);
    return rc;
}

enum mg_code store_gateway_list(struct store *st, json_t **out, struct mg_error *err)
{
    static const char sql[] = "SELECT name FROM gateways ORDER BY name";
    struct store_conn *c = store_read_begin(st);
    sqlite3_stmt *s;
    json_t *names = json_array(), *items = json_array(), *n, *g;
    size_t i;
    enum mg_code rc = MG_OK;

    if ((s = store_stmt(c, sql, err)) == NULL) {
        rc = err->code;
        goto out;
    }
    while (sqlite3_step(s) == SQLITE_ROW)
        json_array_append_new(names, store_col_json_string(s, 0));
    sqlite3_reset(s);
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
    struct store_conn *c = store_write_begin(st, err);
    sqlite3_stmt *s;
    enum mg_code rc;

    if (c == NULL)
        return err->code;
    if (strcmp(name, "runner") == 0) {
        rc = mg_fail(err, MG_ECONFLICT, NULL,
                     "'runner' is the built-in smoke-test runner and cannot be deleted");
        goto out;
    }
    if ((s = store_stmt(c, sql_out, err)) == NULL) {
        rc = err->code;
        goto out;
    }
    store_bind_text(s, 1, name);
    if ((rc = store_exec_stmt(c, s, err)) != MG_OK)
        goto out;
    if ((s = store_stmt(c, sql, err)) == NULL) {
        rc = err->code;
        goto out;
    }
    store_bind_text(s, 1, name);
    if ((rc = store_exec_stmt(c, s, err)) != MG_OK)
        goto out;
    if (sqlite3_changes(c->db) == 0) {
        rc = mg_fail(err, MG_ENOTFOUND, NULL, "gateway '%s' does not exist", name);
        goto out;
    }
    rc = store_audit_append(c, actor, "gateway.delete", name, NULL, err);
out:
    return store_write_end(st, c, rc, err);
}

enum mg_code store_gateway_disable(struct store *st, const char *name, const char *reason,
                                   struct mg_error *err)
{
    static const char sql[] =
        "UPDATE gateways SET disabled_reason = ?, updated_at = ? WHERE name = ?";
    struct store_conn *c = store_write_begin(st, err);
    sqlite3_stmt *s;
    char at[32];
    json_t *detail;
    enum mg_code rc;

    if (c == NULL)
        return err->code;
    if ((s = store_stmt(c, sql, err)) == NULL) {
        rc = err->code;
        goto out;
    }
    store_now(at);
    store_bind_text(s, 1, reason);
    store_bind_text(s, 2, at);
    store_bind_text(s, 3, name);
    if ((rc = store_exec_stmt(c, s, err)) != MG_OK)
        goto out;
    detail = json_pack("{s:s}", "reason", reason);
    rc = store_audit_append(c, "modelgated", "gateway.disable", name, detail, err);
    json_decref(detail);
out:
    return store_write_end(st, c, rc, err);
}

void store_delivery_release(struct store_delivery *d)
{
    json_decref(d->config);
    json_decref(d->payload);
    if (d->secret)
        OPENSSL_cleanse(d->secret, strlen(d->secret));
    free(d->secret);
    memset(d, 0, sizeof(*d));
}

enum mg_code store_outbox_claim(struct store *st, int64_t now_ms, int64_t lease_ms,
                                struct store_delivery *out, bool *found, struct mg_error *err)
{
    static const char sql[] =
        "UPDATE outbox SET lease_until = ?2 WHERE (gateway, model, alias) = ("
        "  SELECT o.gateway, o.model, o.alias FROM outbox o JOIN gateways g ON g.name = o.gateway"
        "  WHERE o.state != 'in_sync' AND o.next_attempt_at <= ?1 AND o.lease_until <= ?1"
        "  AND g.disabled_reason IS NULL ORDER BY o.next_attempt_at, o.written_ms LIMIT 1) "
        "RETURNING gateway, model, alias, generation, payload, attempts, written_ms";
    static const char sql_gw[] = "SELECT kind, config, secret FROM gateways WHERE name = ?";
    struct store_conn *c = store_write_begin(st, err);
    sqlite3_stmt *s;
    enum mg_code rc = MG_OK;
    int r;

    if (c == NULL)
        return err->code;
    *found = false;
    if ((s = store_stmt(c, sql, err)) == NULL) {
        rc = err->code;
        goto out;
    }
    sqlite3_bind_int64(s, 1, now_ms);
    sqlite3_bind_int64(s, 2, now_ms + lease_ms);
    r = sqlite3_step(s);
    if (r == SQLITE_ROW) {
        memset(out, 0, sizeof(*out));
        snprintf(out->gateway, sizeof(out->gateway), "%s", sqlite3_column_text(s, 0));
        snprintf(out->model, sizeof(out->model), "%s", sqlite3_column_text(s, 1));
        snprintf(out->alias, sizeof(out->alias), "%s", sqlite3_column_text(s, 2));
        out->generation = sqlite3_column_int64(s, 3);
        out->payload = store_col_json(s, 4);
        out->attempts = sqlite3_column_int(s, 5);
        out->written_ms = sqlite3_column_int64(s, 6);
        *found = true;
        r = sqlite3_step(s); /* finish the statement */
    }
    if (r != SQLITE_DONE)
        rc = store_db_error(c, r, err);
    sqlite3_reset(s);
    if (rc != MG_OK || !*found)
        goto out;
    if ((s = store_stmt(c, sql_gw, err)) == NULL) {
        rc = err->code;
        goto out;
    }
    store_bind_text(s, 1, out->gateway);
    if (sqlite3_step(s) == SQLITE_ROW) {
        snprintf(out->kind, sizeof(out->kind), "%s", sqlite3_column_text(s, 0));
        out->config = store_col_json(s, 1);
        if (sqlite3_column_text(s, 2))
            out->secret = strdup((const char *)sqlite3_column_text(s, 2));
    }
    sqlite3_reset(s);
out:
    rc = store_write_end(st, c, rc, err);
    if (rc != MG_OK && *found) {
        store_delivery_release(out);
        *found = false;
    }
    return rc;
}

enum mg_code store_outbox_done(struct store *st, const struct store_delivery *d, bool ok,
                               const char *error, int64_t next_attempt_ms, struct mg_error *err)
{
    /* Only the generation that was delivered is settled; a newer one written
     * meanwhile keeps its pending state and is due at once. */
    static const char sql_ok[] =
        "UPDATE outbox SET state = 'in_sync', attempts = attempts + 1, last_error = NULL, "
        "next_attempt_at = 0, acked_at = ?4, lease_until = 0 WHERE gateway = ?1 AND model = ?2 AND "
        "alias = ?3 "
        "AND generation = ?5";
    static const char sql_fail[] =
        "UPDATE outbox SET state = 'failing', attempts = attempts + 1, last_error = ?4, "
        "next_attempt_at = ?6, lease_until = 0 WHERE gateway = ?1 AND model = ?2 AND alias = ?3 "
        "AND generation = ?5";
    static const char sql_release[] = "UPDATE outbox SET lease_until = 0 WHERE gateway = ?1 "
                                      "AND model = ?2 AND alias = ?3";
    struct store_conn *c = store_write_begin(st, err);
    sqlite3_stmt *s;
    char at[32];
    enum mg_code rc;

    if (c == NULL)
        return err->code;
    if ((s = store_stmt(c, ok ? sql_ok : sql_fail, err)) == NULL) {
        rc = err->code;
        goto out;
    }
    store_now(at);
    store_bind_text(s, 1, d->gateway);
    store_bind_text(s, 2, d->model);
    store_bind_text(s, 3, d->alias);
    store_bind_text(s, 4, ok ? at : error);
    sqlite3_bind_int64(s, 5, d->generation);
    if (!ok)
        sqlite3_bind_int64(s, 6, next_attempt_ms);
    if ((rc = store_exec_stmt(c, s, err)) != MG_OK)
        goto out;
    if (sqlite3_changes(c->db) == 0) {
        /* Superseded: release the lease so the newer generation goes out. */
        if ((s = store_stmt(c, sql_release, err)) == NULL) {
            rc = err->code;
            goto out;
        }
        store_bind_text(s, 1, d->gateway);
        store_bind_text(s, 2, d->model);
        store_bind_text(s, 3, d->alias);
        rc = store_exec_stmt(c, s, err);
    }
out:
    return store_write_end(st, c, rc, err);
}

enum mg_code store_outbox_next_due(struct store *st, int64_t *next_ms, struct mg_error *err)
{
    static const char sql[] = "SELECT min(max(o.next_attempt_at, o.lease_until)) FROM outbox o "
                              "JOIN gateways g ON g.name = o.gateway "
                              "WHERE o.state != 'in_sync' AND g.disabled_reason IS NULL";
    struct store_conn *c = store_read_begin(st);
    sqlite3_stmt *s = store_stmt(c, sql, err);
    enum mg_code rc = MG_OK;

    *next_ms = 0;
    if (s == NULL) {
        rc = err->code;
    } else {
        if (sqlite3_step(s) == SQLITE_ROW && sqlite3_column_type(s, 0) != SQLITE_NULL)
            *next_ms = sqlite3_column_int64(s, 0);
        sqlite3_reset(s);
    }
    store_read_end(st, c);
    return rc;
}

enum mg_code store_outbox_synced(struct store *st, const char *model, const char *alias,
                                 int64_t gen, bool *synced, struct mg_error *err)
{
    static const char sql[] = "SELECT count(*) FROM outbox WHERE model = ? AND alias = ? AND "
                              "NOT (state = 'in_sync' AND generation >= ?)";
    struct store_conn *c = store_read_begin(st);
    sqlite3_stmt *s = store_stmt(c, sql, err);
    enum mg_code rc = MG_OK;

    *synced = false;
    if (s == NULL) {
        rc = err->code;
    } else {
        store_bind_text(s, 1, model);
        store_bind_text(s, 2, alias);
        sqlite3_bind_int64(s, 3, gen);
        if (sqlite3_step(s) == SQLITE_ROW)
            *synced = sqlite3_column_int64(s, 0) == 0;
        sqlite3_reset(s);
    }
    store_read_end(st, c);
    return rc;
}

enum mg_code store_outbox_recover(struct store *st, struct mg_error *err)
{
    static const char sql[] = "UPDATE outbox SET lease_until = 0 WHERE lease_until != 0";

    return store_write_sql(st, sql, err);
}

enum mg_code store_gateway_configs(struct store *st, json_t **out, struct mg_error *err)
{
    static const char sql[] = "SELECT name, kind, config, models, aliases, disabled_reason "
                              "FROM gateways ORDER BY name";
    struct store_conn *c = store_read_begin(st);
    sqlite3_stmt *s;
    json_t *items = json_array();
    enum mg_code rc = MG_OK;
    int r;

    *out = NULL;
    if ((s = store_stmt(c, sql, err)) == NULL) {
        rc = err->code;
        goto out;
    }
    while ((r = sqlite3_step(s)) == SQLITE_ROW)
        json_array_append_new(
            items, json_pack("{s:o, s:o, s:o, s:o, s:o, s:b}", "name", store_col_json_string(s, 0),
                             "kind", store_col_json_string(s, 1), "config", store_col_json(s, 2),
                             "models", store_col_json(s, 3), "aliases", store_col_json(s, 4),
                             "disabled", sqlite3_column_type(s, 5) != SQLITE_NULL));
    if (r != SQLITE_DONE)
        rc = store_db_error(c, r, err);
    sqlite3_reset(s);
    if (rc == MG_OK) {
        *out = items;
        items = NULL;
    }
out:
    json_decref(items);
    store_read_end(st, c);
    return rc;
}
