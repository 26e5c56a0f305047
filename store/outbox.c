/*
 * outbox.c - the outbox: the desired state of each (gateway, model, alias),
 * written in the transaction of the change that makes it (the newest
 * generation only). A worker claims a row with a lease (so one delivery per
 * row is in flight, and a crashed worker's row comes back when the lease
 * ends), delivers, and records the outcome only for the generation it
 * delivered; a newer generation written meanwhile stays pending.
 */
#include "store_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "../base/util.h"

/* PostgreSQL: tell every replica (at commit) that the outbox moved. */
static enum mg_code notify_change(struct db_conn *c, struct mg_error *err)
{
    static const char sql[] = "SELECT pg_notify('mg_change', '')";

    return db_dialect(c) == DB_POSTGRES ? db_exec(db_prepare(c, sql), err) : MG_OK;
}

enum mg_code store_outbox_write(struct db_conn *c, const char *model, const char *alias,
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
    static const char sql_pg[] =
        "INSERT INTO outbox (gateway, model, alias, generation, payload, state, attempts, "
        "last_error, next_attempt_at, written_ms, written_at, acked_at) "
        "SELECT g.name, ?1, ?2, ?3, ?4, 'pending', 0, NULL, 0, ?6, ?5, NULL FROM gateways g "
        "WHERE (g.models IS NULL OR jsonb_exists(g.models::jsonb, ?1::text)) "
        "AND (g.aliases IS NULL OR jsonb_exists(g.aliases::jsonb, ?2::text)) "
        "ON CONFLICT (gateway, model, alias) DO UPDATE SET generation = excluded.generation, "
        "payload = excluded.payload, state = 'pending', attempts = 0, last_error = NULL, "
        "next_attempt_at = 0, written_ms = excluded.written_ms, written_at = excluded.written_at, "
        "acked_at = NULL";
    struct db_stmt *s = db_prepare(c, DB_SQL(c, sql, sql_pg));
    char *text = store_json_text(payload);
    enum mg_code rc;

    if (text == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    db_bind_text(s, 1, model);
    db_bind_text(s, 2, alias);
    db_bind_i64(s, 3, gen);
    db_bind_text(s, 4, text);
    db_bind_text(s, 5, at);
    db_bind_i64(s, 6, store_conn_clock_ms(c)); /* lag is measured on this clock */
    if ((rc = db_exec(s, err)) == MG_OK)
        rc = notify_change(c, err);
    free(text);
    return rc;
}

enum mg_code store_outbox_event(struct db_conn *c, const char *model, const char *alias,
                                const char *promotion, const char *type, const json_t *event,
                                const char *at, struct mg_error *err)
{
    static const char sql[] =
        "INSERT INTO outbox (gateway, model, alias, generation, payload, state, attempts, "
        "last_error, next_attempt_at, written_ms, written_at, acked_at) "
        "SELECT g.name, ?1, ?2, 0, ?4, 'pending', 0, NULL, 0, ?6, ?5, NULL FROM gateways g "
        "WHERE g.kind = 'webhook' "
        "AND EXISTS (SELECT 1 FROM json_each(g.config, '$.events') WHERE value = ?7) "
        "AND (g.models IS NULL OR EXISTS (SELECT 1 FROM json_each(g.models) WHERE value = ?1)) "
        "AND (g.aliases IS NULL OR EXISTS (SELECT 1 FROM json_each(g.aliases) WHERE value = ?3)) "
        "ON CONFLICT (gateway, model, alias) DO UPDATE SET payload = excluded.payload, "
        "state = 'pending', attempts = 0, last_error = NULL, next_attempt_at = 0, "
        "written_ms = excluded.written_ms, written_at = excluded.written_at, acked_at = NULL";
    static const char sql_pg[] =
        "INSERT INTO outbox (gateway, model, alias, generation, payload, state, attempts, "
        "last_error, next_attempt_at, written_ms, written_at, acked_at) "
        "SELECT g.name, ?1, ?2, 0, ?4, 'pending', 0, NULL, 0, ?6, ?5, NULL FROM gateways g "
        "WHERE g.kind = 'webhook' AND coalesce(jsonb_exists(g.config::jsonb -> 'events', "
        "?7::text), false) "
        "AND (g.models IS NULL OR jsonb_exists(g.models::jsonb, ?1::text)) "
        "AND (g.aliases IS NULL OR jsonb_exists(g.aliases::jsonb, ?3::text)) "
        "ON CONFLICT (gateway, model, alias) DO UPDATE SET payload = excluded.payload, "
        "state = 'pending', attempts = 0, last_error = NULL, next_attempt_at = 0, "
        "written_ms = excluded.written_ms, written_at = excluded.written_at, acked_at = NULL";
    struct db_stmt *s = db_prepare(c, DB_SQL(c, sql, sql_pg));
    json_t *payload = json_pack("{s:O}", "event", (json_t *)event);
    char key[40], *text = payload ? store_json_text(payload) : NULL;
    const char *code = strcmp(type, "promotion.rolled_back") == 0 ? "rb"
                       : strcmp(type, "analysis.failed") == 0     ? "af"
                                                                  : "aa";
    enum mg_code rc;

    json_decref(payload);
    if (text == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    /* '!' is in no alias name, so the key never meets an alias's own row. */
    snprintf(key, sizeof(key), "!%s:%.28s", code, promotion); /* fits store_delivery.alias */
    db_bind_text(s, 1, model);
    db_bind_text(s, 2, key);
    db_bind_text(s, 3, alias);
    db_bind_text(s, 4, text);
    db_bind_text(s, 5, at);
    db_bind_i64(s, 6, store_conn_clock_ms(c));
    db_bind_text(s, 7, type);
    if ((rc = db_exec(s, err)) == MG_OK)
        rc = notify_change(c, err);
    free(text);
    return rc;
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
    /* A lease whose holder is gone is free: ?3 is this replica (alive), ?5 the oldest
     * heartbeat of a live one. */
#define OUTBOX_DUE                                                                                 \
    "o.state != 'in_sync' AND o.next_attempt_at <= ?1 AND g.disabled_reason IS NULL AND "          \
    "coalesce(" CONFIG_HOST ", ?6) = ?6 AND "                                                      \
    "(o.lease_until <= ?1 OR o.lease_owner IS NULL OR (o.lease_owner != ?3 AND "                   \
    "o.lease_owner NOT IN (SELECT r.id FROM replicas r WHERE r.last_seen_ms > ?5))) "
    /* A gateway with a "host" goes out only from the replica on that host (?6). */
#define CONFIG_HOST "json_extract(g.config, '$.host')"
    static const char sql[] =
        "UPDATE outbox SET lease_until = ?2, lease_owner = ?3, lease_token = ?4 "
        "WHERE (gateway, model, alias) = ("
        "  SELECT o.gateway, o.model, o.alias FROM outbox o JOIN gateways g ON g.name = o.gateway"
        "  WHERE " OUTBOX_DUE "ORDER BY o.next_attempt_at, o.written_ms LIMIT 1) "
        "RETURNING gateway, model, alias, generation, payload, attempts, written_ms";
#undef CONFIG_HOST
#define CONFIG_HOST "(g.config::jsonb ->> 'host')"
    /* Rows another replica's worker is claiming right now are skipped, not waited for. */
    static const char sql_pg[] =
        "UPDATE outbox SET lease_until = ?2, lease_owner = ?3, lease_token = ?4 "
        "WHERE (gateway, model, alias) = ("
        "  SELECT o.gateway, o.model, o.alias FROM outbox o JOIN gateways g ON g.name = o.gateway"
        "  WHERE " OUTBOX_DUE "ORDER BY o.next_attempt_at, o.written_ms LIMIT 1 "
        "  FOR UPDATE OF o SKIP LOCKED) "
        "RETURNING gateway, model, alias, generation, payload, attempts, written_ms";
#undef OUTBOX_DUE
#undef CONFIG_HOST
    static const char sql_gw[] = "SELECT kind, config, secret FROM gateways WHERE name = ?";
    struct db_conn *c = store_write_begin(st, err);
    struct db_stmt *s;
    enum mg_code rc = MG_OK;
    uint8_t rnd[8];
    char token[17] = "";
    bool row;

    if (c == NULL)
        return err->code;
    *found = false;
    if (!mg_random_bytes(rnd, sizeof(rnd))) {
        rc = mg_fail(err, MG_EIO, NULL, "no random bytes for a lease token");
        goto out;
    }
    mg_hex_encode(rnd, sizeof(rnd), token);
    s = db_prepare(c, DB_SQL(c, sql, sql_pg));
    db_bind_i64(s, 1, now_ms);
    db_bind_i64(s, 2, now_ms + lease_ms);
    db_bind_text(s, 3, store_replica_id(st));
    db_bind_text(s, 4, token);
    db_bind_i64(s, 5, now_ms - STORE_REPLICA_DEAD_MS);
    db_bind_text(s, 6, st->host_name);
    if ((rc = db_step(s, &row, err)) == MG_OK && row) {
        memset(out, 0, sizeof(*out)); /* *out is the caller's until a row is claimed */
        memcpy(out->lease_token, token, sizeof(token));
        snprintf(out->gateway, sizeof(out->gateway), "%s", db_col_text(s, 0));
        snprintf(out->model, sizeof(out->model), "%s", db_col_text(s, 1));
        snprintf(out->alias, sizeof(out->alias), "%s", db_col_text(s, 2));
        out->generation = db_col_i64(s, 3);
        out->payload = store_col_json(s, 4);
        out->attempts = (int)db_col_i64(s, 5);
        out->written_ms = db_col_i64(s, 6);
        *found = true;
        rc = db_exec(s, err); /* a RETURNING statement ends at its last step */
    }
    if (rc != MG_OK || !*found)
        goto out;
    s = db_prepare(c, sql_gw);
    db_bind_text(s, 1, out->gateway);
    if ((rc = db_step(s, &row, err)) == MG_OK && row) {
        snprintf(out->kind, sizeof(out->kind), "%s", db_col_text(s, 0));
        out->config = store_col_json(s, 1);
        out->secret = store_col_strdup(s, 2);
        db_reset(s);
    }
out:
    rc = store_write_end(st, c, rc, err);
    if (rc != MG_OK && *found) {
        store_delivery_release(out);
        *found = false;
    }
    /* A failure can hide a commit (the reply lost with the connection): the caller
     * releases this token once the database answers again. */
    if (rc != MG_OK)
        memcpy(out->lease_token, token, sizeof(token));
    return rc;
}

/* A claim that no longer holds its row (or gave up): release the lease if it is still
 * this claim's (superseded: the newer generation then goes out), and when the claim sent
 * something, make a newer generation pending again. */
static enum mg_code let_go(struct db_conn *c, const struct store_delivery *d, struct mg_error *err)
{
    static const char sql_release[] =
        "UPDATE outbox SET lease_until = 0, lease_owner = NULL, lease_token = NULL "
        "WHERE gateway = ?1 AND model = ?2 AND alias = ?3 AND lease_token = ?4";
    /* What this claim sent may have reached the gateway after a newer generation that
     * another claim delivered (this one had lost its lease): the newer one goes out
     * again, and whoever holds it now loses its lease (its own record then fails). */
    static const char sql_redeliver[] =
        "UPDATE outbox SET state = 'pending', next_attempt_at = 0, acked_at = NULL, "
        "lease_until = 0, lease_owner = NULL, lease_token = NULL "
        "WHERE gateway = ?1 AND model = ?2 AND alias = ?3 AND generation > ?4 "
        "AND (lease_token IS NULL OR lease_token != ?5)";
    struct db_stmt *s;
    enum mg_code rc;

    if (d->touched) {
        s = db_prepare(c, sql_redeliver);
        db_bind_text(s, 1, d->gateway);
        db_bind_text(s, 2, d->model);
        db_bind_text(s, 3, d->alias);
        db_bind_i64(s, 4, d->generation);
        db_bind_text(s, 5, d->lease_token);
        if ((rc = db_exec(s, err)) != MG_OK)
            return rc;
        if (db_changes(s) > 0)
            fprintf(stderr,
                    "modelgated: push %s %s/%s: generation %lld went out after this claim "
                    "lost its lease; the newest generation goes out again\n",
                    d->gateway, d->model, d->alias, (long long)d->generation);
    }
    s = db_prepare(c, sql_release);
    db_bind_text(s, 1, d->gateway);
    db_bind_text(s, 2, d->model);
    db_bind_text(s, 3, d->alias);
    db_bind_text(s, 4, d->lease_token);
    return db_exec(s, err);
}

enum mg_code store_outbox_done(struct store *st, const struct store_delivery *d, bool ok,
                               const char *error, int64_t next_attempt_ms, struct mg_error *err)
{
    /* Only the generation that was delivered is settled, and only by the claim that
     * still holds the row (its token); a newer generation written meanwhile keeps its
     * pending state and is due at once. */
    static const char sql_ok[] =
        "UPDATE outbox SET state = 'in_sync', attempts = attempts + 1, last_error = NULL, "
        "next_attempt_at = ?6, acked_at = ?4, lease_until = 0, lease_owner = NULL, "
        "lease_token = NULL WHERE gateway = ?1 AND model = ?2 AND alias = ?3 "
        "AND generation = ?5 AND lease_token = ?7";
    static const char sql_fail[] =
        "UPDATE outbox SET state = 'failing', attempts = attempts + 1, last_error = ?4, "
        "next_attempt_at = ?6, lease_until = 0, lease_owner = NULL, lease_token = NULL "
        "WHERE gateway = ?1 AND model = ?2 AND alias = ?3 AND generation = ?5 "
        "AND lease_token = ?7";
    /* An event, once delivered, is done: nothing keeps a state for it. */
    static const char sql_forget[] = "DELETE FROM outbox WHERE gateway = ?1 AND model = ?2 "
                                     "AND alias = ?3 AND state = 'in_sync'";
    struct db_conn *c = store_write_begin(st, err);
    struct db_stmt *s;
    char at[32];
    enum mg_code rc;

    if (c == NULL)
        return err->code;
    s = db_prepare(c, ok ? sql_ok : sql_fail);
    store_now(at);
    db_bind_text(s, 1, d->gateway);
    db_bind_text(s, 2, d->model);
    db_bind_text(s, 3, d->alias);
    db_bind_text(s, 4, ok ? at : error);
    db_bind_i64(s, 5, d->generation);
    db_bind_i64(s, 6, ok ? 0 : next_attempt_ms);
    db_bind_text(s, 7, d->lease_token);
    if ((rc = db_exec(s, err)) != MG_OK)
        goto out;
    if (db_changes(s) == 0) {
        rc = let_go(c, d, err); /* superseded, or the lease was lost */
    } else if (ok && d->alias[0] == '!') {
        s = db_prepare(c, sql_forget);
        db_bind_text(s, 1, d->gateway);
        db_bind_text(s, 2, d->model);
        db_bind_text(s, 3, d->alias);
        rc = db_exec(s, err);
    }
    if (rc == MG_OK)
        rc = notify_change(c, err);
out:
    return store_write_end(st, c, rc, err);
}

enum mg_code store_outbox_abort(struct store *st, const struct store_delivery *d,
                                struct mg_error *err)
{
    struct db_conn *c = store_write_begin(st, err);
    enum mg_code rc;

    if (c == NULL)
        return err->code;
    if ((rc = let_go(c, d, err)) == MG_OK)
        rc = notify_change(c, err);
    return store_write_end(st, c, rc, err);
}

enum mg_code store_outbox_fence(struct store *st, const struct store_delivery *d, bool *held,
                                struct mg_error *err)
{
    /* ?6: the oldest heartbeat of a live replica (others may take the leases of one not
     * seen since), or none on SQLite, where this process is the only one. */
    static const char sql[] =
        "SELECT count(*) FROM outbox o WHERE o.gateway = ?1 AND o.model = ?2 AND o.alias = ?3 "
        "AND o.generation = ?4 AND o.lease_token = ?5 AND o.lease_until > ?7 "
        "AND (CAST(?6 AS BIGINT) IS NULL OR EXISTS (SELECT 1 FROM replicas r WHERE r.id = "
        "o.lease_owner "
        "AND r.last_seen_ms > ?6))";
    struct db_conn *c;
    struct db_stmt *s;
    enum mg_code rc;
    int64_t now = store_clock_ms(st);
    bool row;

    *held = false;
    if ((c = store_read_one(st)) == NULL)
        return mg_fail(err, MG_EDB, NULL, "no database connection");
    s = db_prepare(c, sql);
    db_bind_text(s, 1, d->gateway);
    db_bind_text(s, 2, d->model);
    db_bind_text(s, 3, d->alias);
    db_bind_i64(s, 4, d->generation);
    db_bind_text(s, 5, d->lease_token);
    if (st->database)
        db_bind_i64(s, 6, now - STORE_REPLICA_DEAD_MS);
    else
        db_bind_null(s, 6);
    db_bind_i64(s, 7, now);
    if ((rc = db_step(s, &row, err)) == MG_OK && row) {
        *held = db_col_i64(s, 0) == 1;
        db_reset(s);
    }
    store_read_end(st, c);
    return rc;
}

enum mg_code store_outbox_next_due(struct store *st, int64_t *next_ms, struct mg_error *err)
{
    static const char sql[] = "SELECT min(max(o.next_attempt_at, o.lease_until)) FROM outbox o "
                              "JOIN gateways g ON g.name = o.gateway "
                              "WHERE o.state != 'in_sync' AND g.disabled_reason IS NULL";
    static const char sql_pg[] =
        "SELECT min(greatest(o.next_attempt_at, o.lease_until)) FROM outbox o "
        "JOIN gateways g ON g.name = o.gateway "
        "WHERE o.state != 'in_sync' AND g.disabled_reason IS NULL";
    struct db_conn *c = store_read_begin(st);
    struct db_stmt *s = db_prepare(c, DB_SQL(c, sql, sql_pg));
    enum mg_code rc;
    bool row;

    *next_ms = 0;
    if ((rc = db_step(s, &row, err)) == MG_OK && row) {
        if (!db_col_null(s, 0))
            *next_ms = db_col_i64(s, 0);
        db_reset(s);
    }
    store_read_end(st, c);
    return rc;
}

enum mg_code store_outbox_synced(struct store *st, const char *model, const char *alias,
                                 int64_t gen, bool *synced, struct mg_error *err)
{
    static const char sql[] = "SELECT count(*) FROM outbox WHERE model = ? AND alias = ? AND "
                              "NOT (state = 'in_sync' AND generation >= ?)";
    struct db_conn *c = store_read_one(st);
    struct db_stmt *s = db_prepare(c, sql);
    enum mg_code rc;
    bool row;

    *synced = false;
    db_bind_text(s, 1, model);
    db_bind_text(s, 2, alias);
    db_bind_i64(s, 3, gen);
    if ((rc = db_step(s, &row, err)) == MG_OK && row) {
        *synced = db_col_i64(s, 0) == 0;
        db_reset(s);
    }
    store_read_end(st, c);
    return rc;
}

enum mg_code store_outbox_release(struct store *st, const char *token, struct mg_error *err)
{
    static const char sql[] = "UPDATE outbox SET lease_until = 0, lease_owner = NULL, "
                              "lease_token = NULL WHERE lease_token = ?";
    struct db_conn *c = store_write_begin(st, err);
    struct db_stmt *s;

    if (c == NULL)
        return err->code;
    s = db_prepare(c, sql);
    db_bind_text(s, 1, token);
    return store_write_end(st, c, db_exec(s, err), err);
}

enum mg_code store_outbox_recover(struct store *st, int64_t leader_epoch, struct mg_error *err)
{
    static const char sql[] =
        "UPDATE outbox SET lease_until = 0, lease_owner = NULL, lease_token = NULL "
        "WHERE lease_until != 0 AND (lease_owner IS NULL OR (lease_owner != ?2 AND "
        "lease_owner NOT IN (SELECT id FROM replicas WHERE last_seen_ms > ?1)))";

    return store_sweep_dead(st, leader_epoch, sql, err);
}

enum mg_code store_outbox_in_sync(struct store *st, int64_t leader_epoch,
                                  struct store_delivery **out, size_t *n, struct mg_error *err)
{
#define HOST_OK(h) "(" h " = ?1 OR (" h " IS NULL AND ?2 = 1)) "
    static const char sql[] =
        "SELECT o.gateway, o.model, o.alias, o.generation, o.payload, g.kind, g.config "
        "FROM outbox o JOIN gateways g ON g.name = o.gateway "
        "WHERE o.state = 'in_sync' AND g.disabled_reason IS NULL AND " HOST_OK(
            "json_extract(g.config, '$.host')") "ORDER BY o.gateway, o.model, o.alias LIMIT ?3";
    static const char sql_pg[] =
        "SELECT o.gateway, o.model, o.alias, o.generation, o.payload, g.kind, g.config "
        "FROM outbox o JOIN gateways g ON g.name = o.gateway "
        "WHERE o.state = 'in_sync' AND g.disabled_reason IS NULL AND " HOST_OK(
            "(g.config::jsonb ->> 'host')") "ORDER BY o.gateway, o.model, o.alias LIMIT ?3";
#undef HOST_OK
    struct db_conn *c = store_read_begin(st);
    struct store_delivery *list = NULL;
    struct db_stmt *s;
    size_t count = 0, cap = 0;
    enum mg_code rc;
    bool row;

    *out = NULL;
    *n = 0;
    s = db_prepare(c, DB_SQL(c, sql, sql_pg));
    db_bind_text(s, 1, st->host_name);
    db_bind_i64(s, 2, leader_epoch > 0 ? 1 : 0);
    db_bind_i64(s, 3, STORE_RECONCILE_MAX);
    while ((rc = db_step(s, &row, err)) == MG_OK && row) {
        struct store_delivery *d;

        if (count == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            struct store_delivery *nl = realloc(list, ncap * sizeof(*nl));

            if (nl == NULL) {
                db_reset(s);
                rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
                break;
            }
            list = nl;
            cap = ncap;
        }
        d = &list[count++];
        memset(d, 0, sizeof(*d));
        snprintf(d->gateway, sizeof(d->gateway), "%s", db_col_text(s, 0));
        snprintf(d->model, sizeof(d->model), "%s", db_col_text(s, 1));
        snprintf(d->alias, sizeof(d->alias), "%s", db_col_text(s, 2));
        d->generation = db_col_i64(s, 3);
        d->payload = store_col_json(s, 4);
        snprintf(d->kind, sizeof(d->kind), "%s", db_col_text(s, 5));
        d->config = store_col_json(s, 6);
        /* No host (the query's other case is this replica's host): the leader's row. */
        if (!json_is_string(json_object_get(d->config, "host")))
            d->leader_epoch = leader_epoch;
    }
    store_read_end(st, c);
    if (rc != MG_OK) {
        for (size_t i = 0; i < count; i++)
            store_delivery_release(&list[i]);
        free(list);
        return rc;
    }
    *out = list;
    *n = count;
    return MG_OK;
}

enum mg_code store_outbox_drift(struct store *st, const struct store_delivery *d, const char *found,
                                bool *marked, struct mg_error *err)
{
    static const char sql[] =
        "UPDATE outbox SET state = 'pending', last_error = ?5, next_attempt_at = 0, "
        "acked_at = NULL WHERE gateway = ?1 AND model = ?2 AND alias = ?3 AND generation = ?4 "
        "AND state = 'in_sync'";
    struct db_conn *c = store_write_begin(st, err);
    struct db_stmt *s;
    char text[600];
    json_t *detail = NULL;
    enum mg_code rc;

    *marked = false;
    if (c == NULL)
        return err->code;
    /* A host-less gateway's row is the leader's: a leader that lost the lease since its
     * pass began marks nothing and writes no audit entry. */
    if ((rc = store_leader_holds(c, st, d->leader_epoch, err)) != MG_OK)
        goto out;
    snprintf(text, sizeof(text), "drift: %s; generation %lld is delivered again", found,
             (long long)d->generation);
    s = db_prepare(c, sql);
    db_bind_text(s, 1, d->gateway);
    db_bind_text(s, 2, d->model);
    db_bind_text(s, 3, d->alias);
    db_bind_i64(s, 4, d->generation);
    db_bind_text(s, 5, text);
    if ((rc = db_exec(s, err)) != MG_OK || db_changes(s) == 0)
        goto out; /* a newer generation, or one already being delivered: nothing to repair */
    detail = json_pack("{s:s, s:s, s:I, s:s}", "model", d->model, "alias", d->alias, "generation",
                       (json_int_t)d->generation, "found", found);
    if (detail == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    if ((rc = store_audit_append(c, "modelgated", "gateway.drift", d->gateway, STORE_NO_MODEL,
                                 detail, err)) == MG_OK)
        rc = notify_change(c, err);
    *marked = rc == MG_OK;
out:
    json_decref(detail);
    rc = store_write_end(st, c, rc, err);
    if (rc != MG_OK)
        *marked = false;
    return rc;
}
