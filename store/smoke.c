/*
 * smoke.c - the smoke-test queue and results.
 */
#include "store_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/util.h"

#define SMOKE_COLS                                                                                 \
    "t.id, m.name, v.version, t.profile, t.state, t.trigger, t.gpu_mode, t.gpu, t.created_at, "    \
    "t.started_at, t.finished_at, t.duration_ms, t.exit_code, t.latency, t.checks, t.log_tail, "   \
    "t.reason, t.peak_gpu_memory_mib, t.created_ms, t.throughput_rps, t.cost_per_1k_requests"
#define SMOKE_FROM                                                                                 \
    " FROM smoke_tests t JOIN versions v ON v.id = t.version_id JOIN models m ON m.id = "          \
    "v.model_id "

static json_t *col_real(struct db_stmt *s, int i)
{
    return db_col_null(s, i) ? json_null() : json_real(db_col_double(s, i));
}

static json_t *smoke_row(struct db_stmt *s)
{
    json_t *t = json_pack(
        "{s:o, s:o, s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o,"
        " s:o, s:o, s:o, s:o}",
        "id", store_col_json_string(s, 0), "model", store_col_json_string(s, 1), "version",
        (json_int_t)db_col_i64(s, 2), "profile", store_col_json_string(s, 3), "state",
        store_col_json_string(s, 4), "trigger", store_col_json_string(s, 5), "gpu_mode",
        store_col_json_string(s, 6), "gpu", store_col_json(s, 7), "created_at",
        store_col_json_string(s, 8), "started_at", store_col_json_string(s, 9), "finished_at",
        store_col_json_string(s, 10), "duration_ms", store_col_json_int(s, 11), "exit_code",
        store_col_json_int(s, 12), "latency_ms", store_col_json(s, 13), "checks",
        store_col_json(s, 14), "log_tail", store_col_json_string(s, 15), "reason",
        store_col_json_string(s, 16), "peak_gpu_memory_mib", store_col_json_int(s, 17));

    /* What serving costs (docs/contract.md "Quotas and cost"): null when not measured. */
    if (t != NULL && (json_object_set_new(t, "throughput_rps", col_real(s, 19)) != 0 ||
                      json_object_set_new(t, "cost_per_1k_requests", col_real(s, 20)) != 0)) {
        json_decref(t);
        t = NULL;
    }
    return t;
}

static enum mg_code smoke_read(struct db_conn *c, const char *id, json_t **out,
                               struct mg_error *err)
{
    static const char sql[] = "SELECT " SMOKE_COLS SMOKE_FROM "WHERE t.id = ?";
    struct db_stmt *s = db_prepare(c, sql);
    enum mg_code rc;
    bool row;

    db_bind_text(s, 1, id);
    if ((rc = db_step(s, &row, err)) != MG_OK)
        return rc;
    if (!row)
        return mg_fail(err, MG_ENOTFOUND, NULL, "smoke test %s does not exist", id);
    *out = smoke_row(s);
    db_reset(s);
    return *out ? MG_OK : mg_fail(err, MG_ENOMEM, NULL, "out of memory");
}

enum mg_code store_smoke_enqueue(struct store *st, int64_t leader_epoch, const char *model,
                                 int64_t version, const char *trigger, const char *gpu_mode,
                                 json_t **out, bool *created, struct mg_error *err)
{
    struct db_conn *c = store_write_begin(st, err);
    json_t *t = NULL;
    enum mg_code rc;

    *out = NULL;
    *created = false;
    if (c == NULL)
        return err->code;
    if ((rc = store_leader_holds(c, st, leader_epoch, err)) == MG_OK)
        rc = store_smoke_enqueue_in(c, model, version, trigger, gpu_mode, &t, created, err);
    rc = store_write_end(st, c, rc, err);
    if (rc == MG_OK) {
        *out = t;
    } else {
        json_decref(t);
        *created = false;
    }
    return rc;
}

enum mg_code store_smoke_enqueue_in(struct db_conn *c, const char *model, int64_t version,
                                    const char *trigger, const char *gpu_mode, json_t **out,
                                    bool *created, struct mg_error *err)
{
    static const char sql_status[] = "SELECT 1 FROM versions WHERE id = ? AND status = 'deleted'";
    static const char sql_open[] = "SELECT id FROM smoke_tests WHERE version_id = ? AND "
                                   "state IN ('queued', 'running') ORDER BY created_ms LIMIT 1";
    static const char sql_profile[] =
        "SELECT json_extract(smoke, '$.profile') FROM versions WHERE id = ?";
    static const char sql_profile_pg[] =
        "SELECT smoke::jsonb ->> 'profile' FROM versions WHERE id = ?";
    static const char sql_ins[] =
        "INSERT INTO smoke_tests (id, version_id, profile, state, trigger, gpu_mode, created_at, "
        "created_ms) VALUES (?, ?, ?, 'queued', ?, ?, ?, "
        "max(?7, (SELECT coalesce(max(created_ms), 0) + 1 FROM smoke_tests)))";
    /* created_ms orders the queue: strictly increasing (the write lock is held), so
     * tests queued within one millisecond keep their order. */
    static const char sql_ins_pg[] =
        "INSERT INTO smoke_tests (id, version_id, profile, state, trigger, gpu_mode, created_at, "
        "created_ms) VALUES (?, ?, ?, 'queued', ?, ?, ?, "
        "greatest(?7, (SELECT coalesce(max(created_ms), 0) + 1 FROM smoke_tests)))";
    struct db_stmt *s;
    int64_t vid;
    char id[24], at[32], *existing = NULL, *profile = NULL;
    uint8_t rnd[8];
    json_t *t = NULL;
    enum mg_code rc;
    bool row;

    *out = NULL;
    *created = false;
    if ((rc = store_version_id(c, model, version, &vid, err)) != MG_OK)
        goto out;
    s = db_prepare(c, sql_status);
    db_bind_i64(s, 1, vid);
    if ((rc = store_exists(s, &row, err)) != MG_OK)
        goto out;
    if (row) {
        rc = mg_fail(err, MG_EGONE, NULL,
                     "version %lld of model '%s' is deleted: its artifact is gone and cannot be "
                     "tested",
                     (long long)version, model);
        goto out;
    }
    s = db_prepare(c, sql_open);
    db_bind_i64(s, 1, vid);
    if ((rc = db_step(s, &row, err)) != MG_OK)
        goto out;
    if (row) {
        existing = store_col_strdup(s, 0);
        db_reset(s);
    }
    if (existing) {
        rc = smoke_read(c, existing, &t, err);
        goto out;
    }
    s = db_prepare(c, DB_SQL(c, sql_profile, sql_profile_pg));
    db_bind_i64(s, 1, vid);
    if ((rc = db_step(s, &row, err)) != MG_OK)
        goto out;
    if (row) {
        profile = store_col_strdup(s, 0);
        db_reset(s);
    }
    if (!mg_random_bytes(rnd, sizeof(rnd))) {
        rc = mg_fail(err, MG_EIO, NULL, "no random bytes for a smoke test id");
        goto out;
    }
    memcpy(id, "smk_", 4);
    mg_hex_encode(rnd, sizeof(rnd), id + 4);
    store_now(at);
    s = db_prepare(c, DB_SQL(c, sql_ins, sql_ins_pg));
    db_bind_text(s, 1, id);
    db_bind_i64(s, 2, vid);
    db_bind_text(s, 3, profile);
    db_bind_text(s, 4, trigger);
    db_bind_text(s, 5, gpu_mode);
    db_bind_text(s, 6, at);
    db_bind_i64(s, 7, store_conn_clock_ms(c)); /* the queue's order, cluster-wide */
    if ((rc = db_exec(s, err)) != MG_OK)
        goto out;
    *created = true;
    rc = smoke_read(c, id, &t, err);
out:
    free(existing);
    free(profile);
    if (rc == MG_OK)
        *out = t;
    else
        json_decref(t);
    return rc;
}

enum mg_code store_smoke_claim(struct store *st, json_t **job, bool *found, struct mg_error *err)
{
    static const char sql_next[] =
        "SELECT t.id, m.name, v.version, t.profile, t.gpu_mode, v.artifact, b.media_type, "
        "b.files, v.smoke, v.resources, v.introspection FROM smoke_tests t JOIN versions v ON v.id "
        "= t.version_id "
        "JOIN models m ON m.id = v.model_id JOIN blobs b ON b.digest = v.artifact "
        "WHERE t.state = 'queued' ORDER BY t.created_ms LIMIT 1";
    static const char sql_next_pg[] =
        "SELECT t.id, m.name, v.version, t.profile, t.gpu_mode, v.artifact, b.media_type, "
        "b.files, v.smoke, v.resources, v.introspection FROM smoke_tests t JOIN versions v ON v.id "
        "= t.version_id "
        "JOIN models m ON m.id = v.model_id JOIN blobs b ON b.digest = v.artifact "
        "WHERE t.state = 'queued' ORDER BY t.created_ms LIMIT 1 FOR UPDATE OF t SKIP LOCKED";
    static const char sql_run[] =
        "UPDATE smoke_tests SET state = 'running', started_at = ?, owner = ?, lease_until = ?, "
        "claim_token = ? WHERE id = ? AND state = 'queued'";
    struct db_conn *c = store_write_begin(st, err);
    struct db_stmt *s;
    json_t *j = NULL;
    char at[32], token[17];
    uint8_t rnd[8];
    enum mg_code rc = MG_OK;
    bool row;

    if (c == NULL)
        return err->code;
    *found = false;
    if (!mg_random_bytes(rnd, sizeof(rnd))) {
        rc = mg_fail(err, MG_EIO, NULL, "no random bytes for a claim token");
        goto out;
    }
    mg_hex_encode(rnd, sizeof(rnd), token);
    s = db_prepare(c, DB_SQL(c, sql_next, sql_next_pg));
    if ((rc = db_step(s, &row, err)) != MG_OK || !row)
        goto out;
    j = json_pack("{s:o, s:o, s:I, s:o, s:o, s:{s:o, s:o, s:o}, s:o, s:o, s:o}", "id",
                  store_col_json_string(s, 0), "model", store_col_json_string(s, 1), "version",
                  (json_int_t)db_col_i64(s, 2), "profile", store_col_json_string(s, 3), "gpu_mode",
                  store_col_json_string(s, 4), "artifact", "digest", store_col_json_string(s, 5),
                  "media_type", store_col_json_string(s, 6), "files", store_col_json_int(s, 7),
                  "smoke", store_col_json(s, 8), "resources", store_col_json(s, 9), "introspection",
                  store_col_json(s, 10));
    db_reset(s);
    if (j == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    s = db_prepare(c, sql_run);
    store_now(at);
    db_bind_text(s, 1, at);
    db_bind_text(s, 2, store_replica_id(st));
    db_bind_i64(s, 3, store_clock_ms(st));
    db_bind_text(s, 4, token);
    db_bind_text(s, 5, json_string_value(json_object_get(j, "id")));
    /* Claimed only if this update moved it out of 'queued': with several
     * processes on one database, another may have taken it first. */
    if ((rc = db_exec(s, err)) == MG_OK)
        *found = db_changes(s) == 1;
    if (*found && json_object_set_new(j, "claim", json_string(token)) != 0)
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
out:
    rc = store_write_end(st, c, rc, err);
    if (rc == MG_OK && *found)
        *job = j;
    else
        json_decref(j);
    return rc;
}

enum mg_code store_smoke_finish(struct store *st, const char *id, const json_t *r,
                                struct mg_error *err)
{
    static const char sql[] =
        "UPDATE smoke_tests SET state = ?, gpu = ?, exit_code = ?, latency = ?, checks = ?, "
        "log_tail = coalesce(?, ''), reason = ?, duration_ms = ?, peak_gpu_memory_mib = ?, "
        "finished_at = ?, owner = NULL, claim_token = NULL, throughput_rps = ?11, "
        "cost_per_1k_requests = ?12 "
        "WHERE id = ?13 AND (CASE WHEN CAST(?15 AS TEXT) IS NULL THEN (owner = ?14 OR owner IS "
        "NULL) "
        "ELSE (claim_token = ?15 AND state = 'running') END)";
    struct db_conn *c = store_write_begin(st, err);
    struct db_stmt *s;
    char at[32], *gpu = NULL, *lat = NULL, *checks = NULL;
    json_t *v;
    enum mg_code rc;

    if (c == NULL)
        return err->code;
    if ((v = json_object_get(r, "gpu")) && !json_is_null(v))
        gpu = store_json_text(v);
    if ((v = json_object_get(r, "latency_ms")) && !json_is_null(v))
        lat = store_json_text(v);
    checks = (v = json_object_get(r, "checks")) ? store_json_text(v) : strdup("[]");
    s = db_prepare(c, sql);
    store_now(at);
    db_bind_text(s, 1, json_string_value(json_object_get(r, "state")));
    db_bind_text(s, 2, gpu);
    if (json_is_integer(v = json_object_get(r, "exit_code")))
        db_bind_i64(s, 3, json_integer_value(v));
    db_bind_text(s, 4, lat);
    db_bind_text(s, 5, checks ? checks : "[]");
    db_bind_text(s, 6, json_string_value(json_object_get(r, "log_tail")));
    db_bind_text(s, 7, json_string_value(json_object_get(r, "reason")));
    if (json_is_integer(v = json_object_get(r, "duration_ms")))
        db_bind_i64(s, 8, json_integer_value(v));
    if (json_is_integer(v = json_object_get(r, "peak_gpu_memory_mib")))
        db_bind_i64(s, 9, json_integer_value(v));
    db_bind_text(s, 10, at);
    if (json_is_number(v = json_object_get(r, "throughput_rps")))
        db_bind_double(s, 11, json_number_value(v));
    if (json_is_number(v = json_object_get(r, "cost_per_1k_requests")))
        db_bind_double(s, 12, json_number_value(v));
    db_bind_text(s, 13, id);
    db_bind_text(s, 14, store_replica_id(st));
    db_bind_text(s, 15, json_string_value(json_object_get(r, "claim")));
    /* Not ours any more: this replica was taken for dead and the test queued again. */
    if ((rc = db_exec(s, err)) == MG_OK && db_changes(s) == 0)
        rc = mg_fail(err, MG_ENOTFOUND, NULL,
                     "smoke test %s does not exist or another replica runs it now", id);
    free(gpu);
    free(lat);
    free(checks);
    return store_write_end(st, c, rc, err);
}

enum mg_code store_smoke_list(struct store *st, const char *model, int64_t version, json_t **out,
                              struct mg_error *err)
{
    static const char sql[] = "SELECT " SMOKE_COLS SMOKE_FROM
                              "WHERE t.version_id = ? ORDER BY t.created_ms DESC LIMIT 100";
    struct db_conn *c = store_read_begin(st);
    struct db_stmt *s;
    json_t *items = json_array();
    int64_t vid;
    enum mg_code rc;
    bool row;

    if ((rc = store_version_id(c, model, version, &vid, err)) != MG_OK)
        goto out;
    s = db_prepare(c, sql);
    db_bind_i64(s, 1, vid);
    while ((rc = db_step(s, &row, err)) == MG_OK && row)
        json_array_append_new(items, smoke_row(s));
    if (rc == MG_OK)
        *out = json_pack("{s:O}", "items", items);
out:
    json_decref(items);
    store_read_end(st, c);
    return rc;
}

enum mg_code store_smoke_latest(struct store *st, const char *model, int64_t version,
                                int64_t since_ms, json_t **out, struct mg_error *err)
{
    /* Fresh enough: not finished before `since` (a test already queued or
     * running when a promotion began counts; dedup may have handed it out). */
    static const char sql[] =
        "SELECT " SMOKE_COLS SMOKE_FROM "WHERE t.version_id = ? AND (t.finished_at IS NULL OR "
        "t.finished_at >= ?) ORDER BY t.created_ms DESC LIMIT 1";
    struct db_conn *c = store_read_begin(st);
    struct db_stmt *s;
    int64_t vid;
    char since[32];
    enum mg_code rc;
    bool row;

    if ((rc = store_version_id(c, model, version, &vid, err)) != MG_OK)
        goto out;
    s = db_prepare(c, sql);
    db_bind_i64(s, 1, vid);
    mg_time_format(since_ms, since);
    db_bind_text(s, 2, since);
    if ((rc = db_step(s, &row, err)) != MG_OK)
        goto out;
    if (!row) {
        rc = mg_fail(err, MG_ENOTFOUND, NULL, "no smoke test yet");
        goto out;
    }
    *out = smoke_row(s);
    db_reset(s);
    if (*out == NULL)
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
out:
    store_read_end(st, c);
    return rc;
}

enum mg_code store_smoke_latest_passed(struct store *st, const char *model, int64_t version,
                                       json_t **out, struct mg_error *err)
{
    static const char sql[] =
        "SELECT " SMOKE_COLS SMOKE_FROM "WHERE t.version_id = ? AND t.state = 'passed' "
        "ORDER BY t.created_ms DESC LIMIT 1";
    struct db_conn *c = store_read_begin(st);
    struct db_stmt *s;
    int64_t vid;
    enum mg_code rc;
    bool row;

    *out = NULL;
    if ((rc = store_version_id(c, model, version, &vid, err)) != MG_OK)
        goto out;
    s = db_prepare(c, sql);
    db_bind_i64(s, 1, vid);
    if ((rc = db_step(s, &row, err)) != MG_OK)
        goto out;
    if (!row) {
        rc = mg_fail(err, MG_ENOTFOUND, NULL, "no passed smoke test yet");
        goto out;
    }
    *out = smoke_row(s);
    db_reset(s);
    if (*out == NULL)
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
out:
    store_read_end(st, c);
    return rc;
}

enum mg_code store_smoke_counts(struct store *st, int64_t *queued, int64_t *running,
                                struct mg_error *err)
{
    static const char sql[] = "SELECT coalesce(sum(CASE WHEN state = 'queued' THEN 1 END), 0), "
                              "coalesce(sum(CASE WHEN state = 'running' THEN 1 END), 0) "
                              "FROM smoke_tests "
                              "WHERE state IN ('queued', 'running')";
    struct db_conn *c = store_read_one(st);
    struct db_stmt *s = db_prepare(c, sql);
    enum mg_code rc;
    bool row;

    *queued = *running = 0;
    if ((rc = db_step(s, &row, err)) == MG_OK && row) {
        *queued = db_col_i64(s, 0);
        *running = db_col_i64(s, 1);
        db_reset(s);
    }
    store_read_end(st, c);
    return rc;
}

enum mg_code store_smoke_recover(struct store *st, int64_t leader_epoch, struct mg_error *err)
{
    static const char sql[] =
        "UPDATE smoke_tests SET state = 'queued', started_at = NULL, owner = NULL, lease_until = 0 "
        "WHERE state = 'running' AND (owner IS NULL OR (owner != ?2 AND owner NOT IN "
        "(SELECT id FROM replicas WHERE last_seen_ms > ?1)))";

    return store_sweep_dead(st, leader_epoch, sql, err);
}
