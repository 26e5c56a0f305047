/*
 * quotas.c - storage quotas per team and usage (docs/contract.md "Quotas and cost").
 *
 * A team keeps the unique bytes its tokens uploaded (blob_teams) and those its models' live
 * versions cite, each digest counted once however many versions share it, plus what uploads
 * in flight reserved for it (quota_holds, valid while their pin lives). Every admission runs
 * inside the caller's write transaction: writes are serialised (SQLite's BEGIN IMMEDIATE,
 * PostgreSQL's write advisory lock taken at BEGIN), so the use read there is the one the
 * commit lands on and two replicas can never together take a team past its quota.
 */
#include "store_int.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* The digests a team keeps (?1 = team), in each dialect. */
#define TEAM_DIGESTS                                                                               \
    "SELECT digest FROM blob_teams WHERE team = ?1 UNION SELECT v.artifact FROM versions v "       \
    "JOIN models m ON m.id = v.model_id WHERE v.status <> 'deleted' AND EXISTS "                   \
    "(SELECT 1 FROM json_each(m.owners) j WHERE j.value = ?1)"
#define TEAM_DIGESTS_PG                                                                            \
    "SELECT digest FROM blob_teams WHERE team = ?1::text UNION SELECT v.artifact FROM versions v " \
    "JOIN models m ON m.id = v.model_id WHERE v.status <> 'deleted' AND "                          \
    "jsonb_exists(m.owners::jsonb, ?1::text)"
/* Its stored blobs (bytes not yet reclaimed by garbage collection), then the live holds of
 * digests not among them. */
#define TEAM_USE(digests)                                                                          \
    "WITH d(digest) AS (" digests "), k(digest, size) AS (SELECT b.digest, b.size FROM blobs b "   \
    "WHERE b.state <> 'reclaimed' AND b.digest IN (SELECT digest FROM d)) "                        \
    "SELECT (SELECT coalesce(sum(size), 0) FROM k) + (SELECT coalesce(sum(x.size), 0) FROM "       \
    "(SELECT DISTINCT h.digest, h.size FROM quota_holds h JOIN blob_pins p ON p.token = h.pin "    \
    "WHERE h.team = ?1 AND h.digest NOT IN (SELECT digest FROM k)) x), "                           \
    "EXISTS (SELECT 1 FROM k WHERE digest = ?2) OR EXISTS (SELECT 1 FROM quota_holds h "           \
    "JOIN blob_pins p ON p.token = h.pin WHERE h.team = ?1 AND h.digest = ?2)"

/* The bytes team keeps now, and whether digest (may be NULL) is among them. */
static enum mg_code team_use(struct db_conn *c, const char *team, const char *digest, int64_t *used,
                             bool *counted, struct mg_error *err)
{
    static const char sql[] = TEAM_USE(TEAM_DIGESTS);
    static const char sql_pg[] =
        "SELECT u.a::bigint, u.b::int FROM (" TEAM_USE(TEAM_DIGESTS_PG) ") AS u(a, b)";
    struct db_stmt *s = db_prepare(c, DB_SQL(c, sql, sql_pg));
    enum mg_code rc;
    bool row;

    *used = 0;
    *counted = false;
    db_bind_text(s, 1, team);
    db_bind_text(s, 2, digest ? digest : "");
    if ((rc = db_step(s, &row, err)) != MG_OK)
        return rc;
    if (row) {
        *used = db_col_i64(s, 0);
        *counted = db_col_i64(s, 1) != 0;
    }
    db_reset(s);
    return MG_OK;
}

/* The team's quota: *has false when it has none. With lock (a write transaction), its row
 * stays locked until the transaction ends: on PostgreSQL an admission does not rest on the
 * write lock every write transaction takes today alone (SQLite's writer is one anyway). */
static enum mg_code team_quota(struct db_conn *c, const char *team, bool lock, bool *has,
                               int64_t *quota, struct mg_error *err)
{
    static const char sql[] = "SELECT storage_bytes FROM team_quotas WHERE team = ?";
    static const char sql_lock_pg[] =
        "SELECT storage_bytes FROM team_quotas WHERE team = ? FOR UPDATE";
    struct db_stmt *s = db_prepare(c, lock ? DB_SQL(c, sql, sql_lock_pg) : sql);
    enum mg_code rc;

    *quota = 0;
    db_bind_text(s, 1, team);
    if ((rc = db_step(s, has, err)) != MG_OK)
        return rc;
    if (*has)
        *quota = db_col_i64(s, 0);
    db_reset(s);
    return MG_OK;
}

enum mg_code store_quota_admit(struct db_conn *c, const char *team, const char *digest,
                               int64_t size, struct mg_error *err)
{
    int64_t quota, used;
    bool has, counted;
    enum mg_code rc;

    if ((rc = team_quota(c, team, true, &has, &quota, err)) != MG_OK || !has)
        return rc;
    if ((rc = team_use(c, team, digest, &used, &counted, err)) != MG_OK || counted)
        return rc;
    if (size > quota || used > quota - size)
        return mg_fail(err, MG_EQUOTA, NULL,
                       "team '%s' has a storage quota of %" PRId64 " bytes and uses %" PRId64
                       "; %s adds %" PRId64
                       " more: delete versions it no longer needs or ask an admin to raise the "
                       "quota",
                       team, quota, used, digest, size);
    return MG_OK;
}

/*
 * Announce a crossing of 80 % or 100 % of team's quota to every webhook gateway whose
 * "events" list quota.threshold (docs/contract.md "Quotas and cost"): the team's alert level is
 * desired state, like an alias's routes, so it travels as an outbox row keyed (gateway, team,
 * "!quota")
 * ('!' is in no alias name) whose newest level is the one delivered. A level falling back is
 * recorded silently, so the next crossing is announced again.
 */
static enum mg_code quota_note(struct db_conn *c, const char *team, struct mg_error *err)
{
    static const char sql_level[] =
        "SELECT storage_bytes, alert_pct FROM team_quotas WHERE team = ?";
    static const char sql_set[] = "UPDATE team_quotas SET alert_pct = ? WHERE team = ?";
    static const char sql_out[] =
        "INSERT INTO outbox (gateway, model, alias, generation, payload, state, attempts, "
        "last_error, next_attempt_at, written_ms, written_at, acked_at) "
        "SELECT g.name, ?1, '!quota', ?2, ?3, 'pending', 0, NULL, 0, ?2, ?4, NULL FROM gateways g "
        "WHERE g.kind = 'webhook' "
        "AND EXISTS (SELECT 1 FROM json_each(g.config, '$.events') WHERE value = "
        "'quota.threshold') "
        "ON CONFLICT (gateway, model, alias) DO UPDATE SET generation = excluded.generation, "
        "payload = excluded.payload, state = 'pending', attempts = 0, last_error = NULL, "
        "next_attempt_at = 0, written_ms = excluded.written_ms, written_at = excluded.written_at, "
        "acked_at = NULL";
    static const char sql_out_pg[] =
        "INSERT INTO outbox (gateway, model, alias, generation, payload, state, attempts, "
        "last_error, next_attempt_at, written_ms, written_at, acked_at) "
        "SELECT g.name, ?1, '!quota', ?2, ?3, 'pending', 0, NULL, 0, ?2, ?4, NULL FROM gateways g "
        "WHERE g.kind = 'webhook' AND coalesce(jsonb_exists(g.config::jsonb -> 'events', "
        "'quota.threshold'), false) "
        "ON CONFLICT (gateway, model, alias) DO UPDATE SET generation = excluded.generation, "
        "payload = excluded.payload, state = 'pending', attempts = 0, last_error = NULL, "
        "next_attempt_at = 0, written_ms = excluded.written_ms, written_at = excluded.written_at, "
        "acked_at = NULL";
    struct db_stmt *s = db_prepare(c, sql_level);
    int64_t quota, was, used, level;
    enum mg_code rc;
    bool row, counted;
    char at[32], *text = NULL;
    json_t *payload;

    db_bind_text(s, 1, team);
    if ((rc = db_step(s, &row, err)) != MG_OK || !row)
        return rc;
    quota = db_col_i64(s, 0);
    was = db_col_i64(s, 1);
    db_reset(s);
    if ((rc = team_use(c, team, NULL, &used, &counted, err)) != MG_OK)
        return rc;
    level = used >= quota ? 100 : used >= quota - quota / 5 ? 80 : 0;
    if (level == was)
        return MG_OK;
    s = db_prepare(c, sql_set);
    db_bind_i64(s, 1, level);
    db_bind_text(s, 2, team);
    if ((rc = db_exec(s, err)) != MG_OK || level < was)
        return rc;
    store_now(at);
    /* {"event":{…}}: the body as sent, less its timestamp (push_webhook_body adds it). */
    payload = json_pack("{s:{s:s, s:s, s:I, s:I, s:I}}", "event", "type", "quota.threshold", "team",
                        team, "percent", (json_int_t)level, "storage_bytes", (json_int_t)quota,
                        "used_bytes", (json_int_t)used);
    if (payload == NULL || (text = store_json_text(payload)) == NULL) {
        json_decref(payload);
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
    json_decref(payload);
    s = db_prepare(c, DB_SQL(c, sql_out, sql_out_pg));
    db_bind_text(s, 1, team);
    db_bind_i64(s, 2, store_conn_clock_ms(c));
    db_bind_text(s, 3, text);
    db_bind_text(s, 4, at);
    rc = db_exec(s, err);
    free(text);
    if (rc == MG_OK && db_dialect(c) == DB_POSTGRES) /* wake every replica's push workers */
        rc = db_exec(db_prepare(c, "SELECT pg_notify('mg_change', '')"), err);
    return rc;
}

enum mg_code store_quota_note(struct db_conn *c, const char *const *teams, size_t nteams,
                              struct mg_error *err)
{
    enum mg_code rc = MG_OK;
    size_t i;

    for (i = 0; i < nteams && rc == MG_OK; i++)
        rc = quota_note(c, teams[i], err);
    return rc;
}

/* The owner teams of model mid (at most STORE_MAX_SCOPES). */
static enum mg_code model_owners(struct db_conn *c, int64_t mid,
                                 char teams[STORE_MAX_SCOPES][STORE_TEAM_NAME_MAX + 1], size_t *n,
                                 struct mg_error *err)
{
    static const char sql_owners[] =
        "SELECT j.value FROM models m, json_each(m.owners) j WHERE m.id = ? ORDER BY 1";
    static const char sql_owners_pg[] = "SELECT t FROM models m, "
                                        "jsonb_array_elements_text(m.owners::jsonb) t "
                                        "WHERE m.id = ? ORDER BY 1";
    struct db_stmt *s = db_prepare(c, DB_SQL(c, sql_owners, sql_owners_pg));
    enum mg_code rc;
    bool row;

    *n = 0;
    db_bind_i64(s, 1, mid);
    while ((rc = db_step(s, &row, err)) == MG_OK && row) {
        const char *t = db_col_text(s, 0);

        if (*n < STORE_MAX_SCOPES && t != NULL && strlen(t) <= STORE_TEAM_NAME_MAX)
            memcpy(teams[(*n)++], t, strlen(t) + 1);
    }
    return rc;
}

enum mg_code store_quota_note_model(struct db_conn *c, int64_t mid, struct mg_error *err)
{
    char teams[STORE_MAX_SCOPES][STORE_TEAM_NAME_MAX + 1];
    size_t n, i;
    enum mg_code rc = model_owners(c, mid, teams, &n, err);

    for (i = 0; rc == MG_OK && i < n; i++)
        rc = quota_note(c, teams[i], err);
    return rc;
}

enum mg_code store_quota_admit_model(struct db_conn *c, int64_t mid, const char *digest,
                                     struct mg_error *err)
{
    static const char sql_size[] = "SELECT size FROM blobs WHERE digest = ?";
    char teams[STORE_MAX_SCOPES][STORE_TEAM_NAME_MAX + 1];
    struct db_stmt *s = db_prepare(c, sql_size);
    size_t n = 0, i;
    int64_t size = 0;
    enum mg_code rc;
    bool row;

    db_bind_text(s, 1, digest);
    if ((rc = db_step(s, &row, err)) != MG_OK)
        return rc;
    if (row)
        size = db_col_i64(s, 0);
    db_reset(s);
    if ((rc = model_owners(c, mid, teams, &n, err)) != MG_OK)
        return rc;
    for (i = 0; rc == MG_OK && i < n; i++)
        rc = store_quota_admit(c, teams[i], digest, size, err);
    return rc;
}

enum mg_code store_quota_uses(struct db_conn *c, const json_t *teams, int64_t *used,
                              struct mg_error *err)
{
    enum mg_code rc = MG_OK;
    json_t *t;
    size_t i;
    bool counted;

    json_array_foreach(teams, i, t)
    {
        if (i >= STORE_MAX_SCOPES || rc != MG_OK)
            break;
        used[i] = 0;
        if (json_is_string(t))
            rc = team_use(c, json_string_value(t), NULL, &used[i], &counted, err);
    }
    return rc;
}

enum mg_code store_quota_grown(struct db_conn *c, const json_t *teams, const int64_t *before,
                               const char *why, struct mg_error *err)
{
    enum mg_code rc = MG_OK;
    int64_t quota, used;
    json_t *t;
    size_t i;
    bool has, counted;

    json_array_foreach(teams, i, t)
    {
        const char *team = json_string_value(t);

        if (i >= STORE_MAX_SCOPES || rc != MG_OK || team == NULL)
            break;
        if ((rc = team_quota(c, team, true, &has, &quota, err)) != MG_OK || !has ||
            (rc = team_use(c, team, NULL, &used, &counted, err)) != MG_OK)
            continue;
        if (used > quota && used > before[i])
            rc = mg_fail(err, MG_EQUOTA, NULL,
                         "team '%s' has a storage quota of %" PRId64 " bytes and uses %" PRId64
                         "; %s would take it to %" PRId64
                         ": raise the quota first or choose another owner",
                         team, quota, before[i], why, used);
        else
            rc = quota_note(c, team, err);
    }
    return rc;
}

static enum mg_code team_exists(struct db_conn *c, const char *team, struct mg_error *err)
{
    static const char sql[] = "SELECT 1 FROM teams WHERE name = ?";
    struct db_stmt *s = db_prepare(c, sql);
    enum mg_code rc;
    bool found;

    db_bind_text(s, 1, team);
    if ((rc = store_exists(s, &found, err)) != MG_OK || found)
        return rc;
    return mg_fail(err, MG_ENOTFOUND, NULL, "team '%s' does not exist", team);
}

static enum mg_code quota_read(struct db_conn *c, const char *team, json_t **out,
                               struct mg_error *err)
{
    int64_t quota, used;
    bool has, counted;
    enum mg_code rc;

    *out = NULL;
    if ((rc = team_exists(c, team, err)) != MG_OK ||
        (rc = team_quota(c, team, false, &has, &quota, err)) != MG_OK ||
        (rc = team_use(c, team, NULL, &used, &counted, err)) != MG_OK)
        return rc;
    *out = json_pack("{s:s, s:o, s:I}", "team", team, "storage_bytes",
                     has ? json_integer(quota) : json_null(), "used_bytes", (json_int_t)used);
    return *out ? MG_OK : mg_fail(err, MG_ENOMEM, NULL, "out of memory");
}

enum mg_code store_quota_set(struct store *st, const char *actor, const char *team,
                             const int64_t *bytes, json_t **out, struct mg_error *err)
{
    static const char sql_set[] =
        "INSERT INTO team_quotas (team, storage_bytes, alert_pct, updated_at, updated_by) "
        "VALUES (?1, ?2, 0, ?3, ?4) ON CONFLICT (team) DO UPDATE SET "
        "storage_bytes = excluded.storage_bytes, updated_at = excluded.updated_at, "
        "updated_by = excluded.updated_by";
    static const char sql_drop[] = "DELETE FROM team_quotas WHERE team = ?";
    struct db_conn *c;
    struct db_stmt *s;
    json_t *detail = NULL;
    char at[32];
    enum mg_code rc;

    *out = NULL;
    if ((c = store_write_begin(st, err)) == NULL)
        return err->code;
    if ((rc = team_exists(c, team, err)) != MG_OK)
        goto out;
    if (bytes != NULL) {
        s = db_prepare(c, sql_set);
        store_now(at);
        db_bind_text(s, 1, team);
        db_bind_i64(s, 2, *bytes);
        db_bind_text(s, 3, at);
        db_bind_text(s, 4, actor);
    } else {
        s = db_prepare(c, sql_drop);
        db_bind_text(s, 1, team);
    }
    if ((rc = db_exec(s, err)) != MG_OK)
        goto out;
    detail = json_pack("{s:o}", "storage_bytes", bytes ? json_integer(*bytes) : json_null());
    if ((rc = store_audit_append(c, actor, "team.quota", team, STORE_NO_MODEL, detail, err)) !=
            MG_OK ||
        (rc = quota_note(c, team, err)) != MG_OK)
        goto out;
    rc = quota_read(c, team, out, err);
out:
    json_decref(detail);
    rc = store_write_end(st, c, rc, err);
    if (rc != MG_OK) {
        json_decref(*out);
        *out = NULL;
    }
    return rc;
}

enum mg_code store_quota_get(struct store *st, const char *team, json_t **out, struct mg_error *err)
{
    struct db_conn *c = store_read_begin(st);
    enum mg_code rc = quota_read(c, team, out, err);

    store_read_end(st, c);
    return rc;
}

/* Smoke-test machine time, in seconds, of the versions v selects (all, and on a GPU). */
#define SMOKE_MS(where, extra)                                                                     \
    "(SELECT CAST(coalesce(sum(s.duration_ms), 0) AS BIGINT) FROM smoke_tests s JOIN versions v "  \
    "ON v.id = s.version_id JOIN models m2 ON m2.id = v.model_id WHERE s.duration_ms IS NOT NULL " \
    "AND " where extra ")"
#define OWNED_BY_T "EXISTS (SELECT 1 FROM json_each(m2.owners) j WHERE j.value = t.name)"
#define OWNED_BY_T_PG "jsonb_exists(m2.owners::jsonb, t.name)"
#define LIVE_VERSIONS(where)                                                                       \
    "(SELECT count(*) FROM versions v JOIN models m2 ON m2.id = v.model_id "                       \
    "WHERE v.status <> 'deleted' AND " where ")"

#define BY_TEAM(owned)                                                                             \
    "SELECT t.name, q.storage_bytes, " LIVE_VERSIONS(owned) ", " SMOKE_MS(                         \
        owned, "") ", " SMOKE_MS(owned,                                                            \
                                 " AND s.gpu IS NOT NULL") " FROM teams t LEFT JOIN team_quotas "  \
                                                           "q ON q.team = t.name "                 \
                                                           "ORDER BY t.name"

static enum mg_code usage_by_team(struct db_conn *c, json_t *items, struct mg_error *err)
{
    static const char sql[] = BY_TEAM(OWNED_BY_T);
    static const char sql_pg[] = BY_TEAM(OWNED_BY_T_PG);
    struct db_stmt *s = db_prepare(c, DB_SQL(c, sql, sql_pg));
    enum mg_code rc;
    json_t *item;
    size_t i;
    bool row;

    while ((rc = db_step(s, &row, err)) == MG_OK && row) {
        item = json_pack("{s:o, s:o, s:I, s:f, s:f}", "team", store_col_json_string(s, 0),
                         "quota_bytes", store_col_json_int(s, 1), "versions",
                         (json_int_t)db_col_i64(s, 2), "smoke_seconds",
                         (double)db_col_i64(s, 3) / 1000.0, "smoke_gpu_seconds",
                         (double)db_col_i64(s, 4) / 1000.0);
        if (item == NULL || json_array_append_new(items, item) != 0) {
            db_reset(s);
            return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        }
    }
    if (rc != MG_OK)
        return rc;
    /* The bytes each keeps, once the list is read (one statement at a time). */
    json_array_foreach(items, i, item)
    {
        int64_t used;
        bool counted;

        if ((rc = team_use(c, json_string_value(json_object_get(item, "team")), NULL, &used,
                           &counted, err)) != MG_OK)
            return rc;
        json_object_set_new(item, "storage_bytes", json_integer(used));
    }
    return MG_OK;
}

#define MODEL_BYTES                                                                                \
    "(SELECT CAST(coalesce(sum(b.size), 0) AS BIGINT) FROM blobs b WHERE b.state <> 'reclaimed' "  \
    "AND b.digest IN (SELECT v.artifact FROM versions v WHERE v.model_id = m.id "                  \
    "AND v.status <> 'deleted'))"
#define BY_MODEL                                                                                   \
    "SELECT m.name, m.owners, " MODEL_BYTES                                                        \
    ", " LIVE_VERSIONS("m2.id = m.id") ", " SMOKE_MS("m2.id = m.id", "") ", " SMOKE_MS(            \
        "m2.id = m.id", " AND s.gpu IS NOT NULL") " FROM models m "                                \
                                                  "ORDER BY m.name"

static enum mg_code usage_by_model(struct db_conn *c, json_t *items, struct mg_error *err)
{
    static const char sql[] = BY_MODEL;
    struct db_stmt *s = db_prepare(c, sql);
    enum mg_code rc;
    json_t *item;
    bool row;

    while ((rc = db_step(s, &row, err)) == MG_OK && row) {
        item = json_pack("{s:o, s:o, s:I, s:I, s:f, s:f}", "model", store_col_json_string(s, 0),
                         "owners", store_col_json(s, 1), "storage_bytes",
                         (json_int_t)db_col_i64(s, 2), "versions", (json_int_t)db_col_i64(s, 3),
                         "smoke_seconds", (double)db_col_i64(s, 4) / 1000.0, "smoke_gpu_seconds",
                         (double)db_col_i64(s, 5) / 1000.0);
        if (item == NULL || json_array_append_new(items, item) != 0) {
            db_reset(s);
            return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        }
    }
    return rc;
}

enum mg_code store_usage(struct store *st, bool by_model, json_t **out, struct mg_error *err)
{
    struct db_conn *c = store_read_begin(st);
    json_t *items = json_array();
    enum mg_code rc;

    *out = NULL;
    if (items == NULL)
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    else
        rc = by_model ? usage_by_model(c, items, err) : usage_by_team(c, items, err);
    store_read_end(st, c);
    if (rc == MG_OK &&
        (*out = json_pack("{s:s, s:O}", "by", by_model ? "model" : "team", "items", items)) == NULL)
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    json_decref(items);
    return rc;
}
