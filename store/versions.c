/*
 * versions.c - immutable model versions with their datasets and the
 * append-only metric history.
 */
#include "store_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../common/util.h"

/* Columns of the main version row, joined with its model and blob. */
#define VERSION_SELECT                                                                             \
    "SELECT v.id, m.name, v.version, v.artifact, b.size, b.media_type, b.files, v.image, "         \
    "v.run_id, v.source, v.params, v.tags, v.smoke, v.resources, v.description, "                  \
    "v.created_at, v.created_by, sg.keyid "                                                        \
    "FROM versions v JOIN models m ON m.id = v.model_id JOIN blobs b ON b.digest = v.artifact "    \
    "LEFT JOIN version_signatures sg ON sg.version_id = v.id "

static void set_json_or_skip(json_t *obj, const char *key, json_t *v)
{
    if (v == NULL || json_is_null(v)) {
        json_decref(v);
        return;
    }
    json_object_set_new(obj, key, v);
}

static enum mg_code load_datasets(struct store_conn *c, int64_t vid, json_t *ver,
                                  struct mg_error *err)
{
    static const char sql[] = "SELECT digest, name, uri, role FROM version_datasets "
                              "WHERE version_id = ? ORDER BY ord";
    sqlite3_stmt *s = store_stmt(c, sql, err);
    json_t *arr = json_array();
    int r;

    if (s == NULL) {
        json_decref(arr);
        return err->code;
    }
    sqlite3_bind_int64(s, 1, vid);
    while ((r = sqlite3_step(s)) == SQLITE_ROW) {
        json_t *d = json_pack("{s:o, s:o}", "digest", store_col_json_string(s, 0), "role",
                              store_col_json_string(s, 3));
        set_json_or_skip(d, "name", store_col_json_string(s, 1));
        set_json_or_skip(d, "uri", store_col_json_string(s, 2));
        json_array_append_new(arr, d);
    }
    sqlite3_reset(s);
    json_object_set_new(ver, "datasets", arr);
    return r == SQLITE_DONE ? MG_OK : store_db_error(c, r, err);
}

static enum mg_code load_metrics(struct store_conn *c, int64_t vid, json_t *ver,
                                 struct mg_error *err)
{
    static const char sql[] = "SELECT name, value, by, at FROM version_metrics "
                              "WHERE version_id = ? ORDER BY seq";
    sqlite3_stmt *s = store_stmt(c, sql, err);
    json_t *metrics = json_object(), *hist = json_array();
    int r;

    if (s == NULL) {
        json_decref(metrics);
        json_decref(hist);
        return err->code;
    }
    sqlite3_bind_int64(s, 1, vid);
    while ((r = sqlite3_step(s)) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(s, 0);
        double value = sqlite3_column_double(s, 1);
        json_object_set_new(metrics, name, json_real(value));
        json_array_append_new(hist, json_pack("{s:s, s:f, s:o, s:o}", "name", name, "value", value,
                                              "by", store_col_json_string(s, 2), "at",
                                              store_col_json_string(s, 3)));
    }
    sqlite3_reset(s);
    json_object_set_new(ver, "metrics", metrics);
    json_object_set_new(ver, "metrics_history", hist);
    return r == SQLITE_DONE ? MG_OK : store_db_error(c, r, err);
}

/* The aliases this version was rolled back from. */
static enum mg_code load_bad_for(struct store_conn *c, int64_t vid, json_t *ver,
                                 struct mg_error *err)
{
    static const char sql[] = "SELECT a.name FROM versions v "
                              "JOIN aliases a ON a.model_id = v.model_id "
                              "JOIN alias_bad b ON b.alias_id = a.id AND b.version = v.version "
                              "WHERE v.id = ? ORDER BY a.name";
    sqlite3_stmt *s = store_stmt(c, sql, err);
    json_t *arr = json_array();
    int r;

    if (s == NULL) {
        json_decref(arr);
        return err->code;
    }
    sqlite3_bind_int64(s, 1, vid);
    while ((r = sqlite3_step(s)) == SQLITE_ROW)
        json_array_append_new(arr, store_col_json_string(s, 0));
    sqlite3_reset(s);
    json_object_set_new(ver, "bad_for", arr);
    return r == SQLITE_DONE ? MG_OK : store_db_error(c, r, err);
}

/* Build the Version object from the current row of a VERSION_SELECT statement. */
static json_t *version_row(sqlite3_stmt *s)
{
    json_t *files = sqlite3_column_type(s, 6) == SQLITE_NULL
                        ? json_null()
                        : json_integer(sqlite3_column_int64(s, 6));
    json_t *v = json_pack(
        "{s:o, s:I, s:{s:o, s:I, s:o, s:o}, s:o, s:o, s:o, s:o, s:o, s:o, s:s, s:n, s:[]}", "model",
        store_col_json_string(s, 1), "version", (json_int_t)sqlite3_column_int64(s, 2), "artifact",
        "digest", store_col_json_string(s, 3), "size", (json_int_t)sqlite3_column_int64(s, 4),
        "media_type", store_col_json_string(s, 5), "files", files, "params", store_col_json(s, 10),
        "tags", store_col_json(s, 11), "description", store_col_json_string(s, 14), "created_at",
        store_col_json_string(s, 15), "created_by", store_col_json_string(s, 16), "image",
        store_col_json_string(s, 7), "status", "ready", "signature", "bad_for");

    if (v == NULL)
        return NULL;
    set_json_or_skip(v, "run_id", store_col_json_string(s, 8));
    set_json_or_skip(v, "source", store_col_json(s, 9));
    set_json_or_skip(v, "smoke", store_col_json(s, 12));
    set_json_or_skip(v, "resources", store_col_json(s, 13));
    if (sqlite3_column_type(s, 17) != SQLITE_NULL) {
        char url[256];
        snprintf(url, sizeof(url), "/api/v1/models/%s/versions/%lld/signature",
                 (const char *)sqlite3_column_text(s, 1), (long long)sqlite3_column_int64(s, 2));
        json_object_set_new(
            v, "signature",
            json_pack("{s:o, s:s}", "keyid", store_col_json_string(s, 17), "url", url));
    }
    return v;
}

/* Load a full Version by row id, in any open transaction. */
static enum mg_code version_load(struct store_conn *c, int64_t vid, json_t **out,
                                 struct mg_error *err)
{
    static const char sql[] = VERSION_SELECT "WHERE v.id = ?";
    sqlite3_stmt *s = store_stmt(c, sql, err);
    json_t *v = NULL;
    enum mg_code rc;
    int r;

    if (s == NULL)
        return err->code;
    sqlite3_bind_int64(s, 1, vid);
    r = sqlite3_step(s);
    if (r == SQLITE_ROW)
        v = version_row(s);
    sqlite3_reset(s);
    if (r != SQLITE_ROW)
        return r == SQLITE_DONE ? mg_fail(err, MG_ENOTFOUND, NULL, "version does not exist")
                                : store_db_error(c, r, err);
    if (v == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    if ((rc = load_datasets(c, vid, v, err)) != MG_OK ||
        (rc = load_metrics(c, vid, v, err)) != MG_OK ||
        (rc = load_bad_for(c, vid, v, err)) != MG_OK) {
        json_decref(v);
        return rc;
    }
    *out = v;
    return MG_OK;
}

static enum mg_code insert_metrics(struct store_conn *c, int64_t vid, const char *actor,
                                   const json_t *metrics, bool *changed, struct mg_error *err)
{
    static const char sql_get[] =
        "SELECT value FROM version_metrics WHERE version_id = ? AND name = ?";
    static const char sql_ins[] = "INSERT INTO version_metrics (version_id, name, value, by, "
                                  "at) VALUES (?, ?, ?, ?, ?)";
    const char *name;
    json_t *val;
    char at[32];
    sqlite3_stmt *s;
    enum mg_code rc;

    store_now(at);
    json_object_foreach((json_t *)metrics, name, val)
    {
        double d = json_number_value(val);
        int r;

        if ((s = store_stmt(c, sql_get, err)) == NULL)
            return err->code;
        sqlite3_bind_int64(s, 1, vid);
        store_bind_text(s, 2, name);
        r = sqlite3_step(s);
        if (r == SQLITE_ROW) {
            double have = sqlite3_column_double(s, 0);
            sqlite3_reset(s);
            if (have != d)
                return mg_fail(err, MG_ECONFLICT, "metrics",
                               "metric '%s' already has the value %.17g; metrics are "
                               "append-only, record a new name instead",
                               name, have);
            continue;
        }
        sqlite3_reset(s);
        if (r != SQLITE_DONE)
            return store_db_error(c, r, err);
        if ((s = store_stmt(c, sql_ins, err)) == NULL)
            return err->code;
        sqlite3_bind_int64(s, 1, vid);
        store_bind_text(s, 2, name);
        sqlite3_bind_double(s, 3, d);
        store_bind_text(s, 4, actor);
        store_bind_text(s, 5, at);
        if ((rc = store_exec_stmt(c, s, err)) != MG_OK)
            return rc;
        *changed = true;
    }
    return MG_OK;
}

static enum mg_code insert_datasets(struct store_conn *c, int64_t vid, const json_t *datasets,
                                    struct mg_error *err)
{
    static const char sql[] = "INSERT INTO version_datasets (version_id, ord, digest, name, "
                              "uri, role) VALUES (?, ?, ?, ?, ?, ?)";
    size_t i;
    json_t *d;
    sqlite3_stmt *s;
    enum mg_code rc;

    json_array_foreach(datasets, i, d)
    {
        if ((s = store_stmt(c, sql, err)) == NULL)
            return err->code;
        sqlite3_bind_int64(s, 1, vid);
        sqlite3_bind_int64(s, 2, (int64_t)i);
        store_bind_text(s, 3, json_string_value(json_object_get(d, "digest")));
        store_bind_text(s, 4, json_string_value(json_object_get(d, "name")));
        store_bind_text(s, 5, json_string_value(json_object_get(d, "uri")));
        store_bind_text(s, 6, json_string_value(json_object_get(d, "role")));
        if ((rc = store_exec_stmt(c, s, err)) != MG_OK)
            return rc;
    }
    return MG_OK;
}

static enum mg_code blob_exists(struct store_conn *c, const char *digest, struct mg_error *err)
{
    static const char sql[] = "SELECT 1 FROM blobs WHERE digest = ?";
    sqlite3_stmt *s = store_stmt(c, sql, err);
    int r;

    if (s == NULL)
        return err->code;
    store_bind_text(s, 1, digest);
    r = sqlite3_step(s);
    sqlite3_reset(s);
    if (r == SQLITE_ROW)
        return MG_OK;
    if (r != SQLITE_DONE)
        return store_db_error(c, r, err);
    return mg_fail(err, MG_EINVAL, "artifact",
                   "artifact blob %s does not exist; upload it with POST /api/v1/blobs first",
                   digest);
}

/* Whether a stored blob was recognised as an archive (files is not NULL). */
static bool blob_is_archive(struct store_conn *c, const char *digest)
{
    static const char sql[] = "SELECT files IS NOT NULL FROM blobs WHERE digest = ?";
    sqlite3_stmt *s = store_stmt(c, sql, NULL);
    bool yes = false;

    if (s == NULL)
        return false;
    store_bind_text(s, 1, digest);
    if (sqlite3_step(s) == SQLITE_ROW)
        yes = sqlite3_column_int(s, 0) != 0;
    sqlite3_reset(s);
    return yes;
}

/* JSON text of an optional member, or NULL when absent. */
static char *member_text(const json_t *req, const char *key)
{
    json_t *v = json_object_get(req, key);

    return v && !json_is_null(v) ? store_json_text(v) : NULL;
}

/* The statement's "modelgate" predicate: the version's metadata at creation. */
static json_t *sign_meta(const char *model, int64_t n, const char *artifact, const json_t *req,
                         const char *at, const char *actor)
{
    static const char *const copy[] = {"image", "datasets", "metrics", "run_id", "source"};
    json_t *m = json_pack("{s:s, s:I, s:s}", "model", model, "version", (json_int_t)n, "artifact",
                          artifact);
    size_t i;

    if (m == NULL)
        return NULL;
    for (i = 0; i < sizeof(copy) / sizeof(copy[0]); i++) {
        json_t *v = json_object_get(req, copy[i]);
        json_object_set_new(m, copy[i], v ? json_deep_copy(v) : json_null());
    }
    json_object_set_new(m, "created_at", json_string(at));
    json_object_set_new(m, "created_by", json_string(actor));
    return m;
}

static int resource_order(const void *a, const void *b)
{
    return sign_path_cmp(((const struct sign_resource *)a)->name,
                         ((const struct sign_resource *)b)->name);
}

/* Sign the new version with the active key and store the bundle, inside the
 * version's transaction: a version never exists unsigned. */
static enum mg_code sign_version(struct store *st, struct store_conn *c, int64_t vid,
                                 const char *model, int64_t n, const char *artifact,
                                 const json_t *req, const char *at, const char *actor,
                                 struct mg_error *err)
{
    static const char sql_files[] =
        "SELECT path, sha256 FROM blob_files WHERE digest = ? ORDER BY path";
    static const char sql_ins[] =
        "INSERT INTO version_signatures (version_id, keyid, bundle) VALUES (?, ?, ?)";
    struct sign_resource *res = NULL;
    size_t nres = 0, cap = 0, i;
    char subject[128], *bundle = NULL;
    json_t *meta = NULL;
    sqlite3_stmt *s;
    enum mg_code rc = MG_OK;
    int r;

    if (st->keys == NULL || st->keys->active == NULL)
        return MG_OK; /* a store opened without keys (tools, tests) signs nothing */
    if ((s = store_stmt(c, sql_files, err)) == NULL)
        return err->code;
    store_bind_text(s, 1, artifact);
    while ((r = sqlite3_step(s)) == SQLITE_ROW) {
        const char *hex = (const char *)sqlite3_column_text(s, 1);
        if (nres == cap) {
            size_t ncap = cap ? cap * 2 : 64;
            struct sign_resource *nr = realloc(res, ncap * sizeof(*res));
            if (nr == NULL) {
                rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
                break;
            }
            res = nr;
            cap = ncap;
        }
        res[nres].name = strdup((const char *)sqlite3_column_text(s, 0));
        if (res[nres].name == NULL || hex == NULL || !mg_hex_decode(hex, 32, res[nres].digest)) {
            free((char *)res[nres].name);
            rc = mg_fail(err, MG_EDB, NULL, "corrupt file manifest of %s", artifact);
            break;
        }
        nres++;
    }
    sqlite3_reset(s);
    if (rc != MG_OK)
        goto out;
    if (r != SQLITE_DONE && r != SQLITE_ROW) {
        rc = store_db_error(c, r, err);
        goto out;
    }
    /* The manifest in model_signing's path order, whatever order the database used. */
    if (nres > 1)
        qsort(res, nres, sizeof(*res), resource_order);
    if (nres == 0 && !blob_is_archive(c, artifact)) {
        res = calloc(1, sizeof(*res));
        if (res == NULL || (res[0].name = strdup(".")) == NULL) {
            rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
            goto out;
        }
        mg_hex_decode(artifact + 7, 32, res[0].digest);
        nres = 1;
    }
    snprintf(subject, sizeof(subject), "%s-v%lld", model, (long long)n);
    meta = sign_meta(model, n, artifact, req, at, actor);
    if (meta == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    if ((rc = sign_bundle_create(st->keys->active, subject, res, nres, meta, &bundle, err)) !=
        MG_OK)
        goto out;
    if ((s = store_stmt(c, sql_ins, err)) == NULL) {
        rc = err->code;
        goto out;
    }
    sqlite3_bind_int64(s, 1, vid);
    store_bind_text(s, 2, st->keys->active->keyid);
    store_bind_text(s, 3, bundle);
    rc = store_exec_stmt(c, s, err);
out:
    for (i = 0; i < nres; i++)
        free((char *)res[i].name);
    free(res);
    free(bundle);
    json_decref(meta);
    return rc;
}

enum mg_code store_version_create(struct store *st, const char *actor, const char *model,
                                  const json_t *req, json_t **out, struct mg_error *err)
{
    static const char sql_next[] =
        "SELECT coalesce(max(version), 0) + 1 FROM versions WHERE model_id = ?";
    static const char sql_ins[] =
        "INSERT INTO versions (model_id, version, artifact, image, run_id, source, params, "
        "tags, smoke, resources, description, created_at, created_by) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
    static const char sql_latest[] = "UPDATE models SET latest_version = ? WHERE id = ?";
    const char *artifact = json_string_value(json_object_get(req, "artifact"));
    const char *desc = json_string_value(json_object_get(req, "description"));
    json_t *params = json_object_get(req, "params"), *tags = json_object_get(req, "tags");
    json_t *metrics = json_object_get(req, "metrics"), *ds = json_object_get(req, "datasets");
    char *source = member_text(req, "source"), *smoke = member_text(req, "smoke");
    char *resources = member_text(req, "resources");
    char *params_t = params ? store_json_text(params) : strdup("{}");
    char *tags_t = tags ? store_json_text(tags) : strdup("{}");
    struct store_conn *c = NULL;
    sqlite3_stmt *s;
    int64_t mid, n = 0, vid = 0;
    char at[32], target[128];
    json_t *v = NULL, *detail;
    bool changed = false;
    enum mg_code rc = MG_OK;

    if (params_t == NULL || tags_t == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto done;
    }
    if ((c = store_write_begin(st, err)) == NULL) {
        rc = err->code;
        goto done;
    }
    if ((rc = store_model_id(c, model, &mid, err)) != MG_OK ||
        (rc = blob_exists(c, artifact, err)) != MG_OK)
        goto out;
    if ((s = store_stmt(c, sql_next, err)) == NULL) {
        rc = err->code;
        goto out;
    }
    sqlite3_bind_int64(s, 1, mid);
    if (sqlite3_step(s) == SQLITE_ROW)
        n = sqlite3_column_int64(s, 0);
    sqlite3_reset(s);
    if ((s = store_stmt(c, sql_ins, err)) == NULL) {
        rc = err->code;
        goto out;
    }
    store_now(at);
    sqlite3_bind_int64(s, 1, mid);
    sqlite3_bind_int64(s, 2, n);
    store_bind_text(s, 3, artifact);
    store_bind_text(s, 4, json_string_value(json_object_get(req, "image")));
    store_bind_text(s, 5, json_string_value(json_object_get(req, "run_id")));
    store_bind_text(s, 6, source);
    store_bind_text(s, 7, params_t);
    store_bind_text(s, 8, tags_t);
    store_bind_text(s, 9, smoke);
    store_bind_text(s, 10, resources);
    store_bind_text(s, 11, desc ? desc : "");
    store_bind_text(s, 12, at);
    store_bind_text(s, 13, actor);
    if ((rc = store_exec_stmt(c, s, err)) != MG_OK)
        goto out;
    vid = sqlite3_last_insert_rowid(c->db);
    if (ds && (rc = insert_datasets(c, vid, ds, err)) != MG_OK)
        goto out;
    if (metrics && (rc = insert_metrics(c, vid, actor, metrics, &changed, err)) != MG_OK)
        goto out;
    if ((s = store_stmt(c, sql_latest, err)) == NULL) {
        rc = err->code;
        goto out;
    }
    sqlite3_bind_int64(s, 1, n);
    sqlite3_bind_int64(s, 2, mid);
    if ((rc = store_exec_stmt(c, s, err)) != MG_OK)
        goto out;
    if ((rc = sign_version(st, c, vid, model, n, artifact, req, at, actor, err)) != MG_OK)
        goto out;
    snprintf(target, sizeof(target), "%s/v%lld", model, (long long)n);
    detail = json_pack("{s:s}", "artifact", artifact);
    rc = store_audit_append(c, actor, "version.create", target, detail, err);
    json_decref(detail);
    if (rc == MG_OK)
        rc = version_load(c, vid, &v, err);
out:
    rc = store_write_end(st, c, rc, err);
done:
    free(source);
    free(smoke);
    free(resources);
    free(params_t);
    free(tags_t);
    if (rc == MG_OK)
        *out = v;
    else
        json_decref(v);
    return rc;
}

enum mg_code store_version_get(struct store *st, const char *model, int64_t version, json_t **out,
                               struct mg_error *err)
{
    struct store_conn *c = store_read_begin(st);
    int64_t vid;
    enum mg_code rc = store_version_id(c, model, version, &vid, err);

    if (rc == MG_OK)
        rc = version_load(c, vid, out, err);
    store_read_end(st, c);
    return rc;
}

enum mg_code store_version_brief(struct store *st, const char *model, int64_t version, json_t **out,
                                 struct mg_error *err)
{
    static const char sql[] = "SELECT v.artifact, v.image FROM versions v JOIN models m ON "
                              "m.id = v.model_id WHERE m.name = ? AND v.version = ?";
    struct store_conn *c = store_read_begin(st);
    sqlite3_stmt *s = store_stmt(c, sql, err);
    enum mg_code rc;
    int r;

    if (s == NULL) {
        rc = err->code;
        goto out;
    }
    store_bind_text(s, 1, model);
    sqlite3_bind_int64(s, 2, version);
    r = sqlite3_step(s);
    if (r == SQLITE_ROW) {
        *out = json_pack("{s:o, s:o}", "artifact", store_col_json_string(s, 0), "image",
                         store_col_json_string(s, 1));
        rc = *out ? MG_OK : mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    } else if (r == SQLITE_DONE) {
        rc = mg_fail(err, MG_ENOTFOUND, NULL, "version %lld of model '%s' does not exist",
                     (long long)version, model);
    } else {
        rc = store_db_error(c, r, err);
    }
    sqlite3_reset(s);
out:
    store_read_end(st, c);
    return rc;
}

enum mg_code store_version_list(struct store *st, const char *model,
                                const struct store_version_filter *f, const struct store_page *page,
                                json_t **out, struct mg_error *err)
{
    static const char sql[] =
        "SELECT v.id, v.version FROM versions v WHERE v.model_id = ?1 AND v.version < ?2 "
        "AND (?3 IS NULL OR EXISTS (SELECT 1 FROM json_each(v.tags) t "
        "     WHERE t.key = ?3 AND t.type = 'text' AND t.value = ?4)) "
        "AND (?5 IS NULL OR EXISTS (SELECT 1 FROM version_datasets d "
        "     WHERE d.version_id = v.id AND d.digest = ?5)) "
        "AND (?6 IS NULL OR EXISTS (SELECT 1 FROM version_metrics mm "
        "     WHERE mm.version_id = v.id AND mm.name = ?6 AND CASE ?7 "
        "       WHEN '>=' THEN mm.value >= ?8 WHEN '>' THEN mm.value > ?8 "
        "       WHEN '<=' THEN mm.value <= ?8 WHEN '<' THEN mm.value < ?8 "
        "       WHEN '=' THEN mm.value = ?8 ELSE 0 END)) "
        "ORDER BY v.version DESC LIMIT ?9";
    struct store_conn *c = store_read_begin(st);
    sqlite3_stmt *s;
    int64_t mid, cursor, ids[1001], last = 0;
    unsigned n = 0, i;
    json_t *items = json_array(), *next = json_null();
    enum mg_code rc;
    int r;

    if ((rc = store_model_id(c, model, &mid, err)) != MG_OK)
        goto out;
    if (!store_page_cursor(page, &cursor)) {
        rc = mg_fail(err, MG_EINVAL, "page_token", "page_token is not one this server issued");
        goto out;
    }
    if ((s = store_stmt(c, sql, err)) == NULL) {
        rc = err->code;
        goto out;
    }
    sqlite3_bind_int64(s, 1, mid);
    sqlite3_bind_int64(s, 2, cursor);
    store_bind_text(s, 3, f->tag_key);
    store_bind_text(s, 4, f->tag_value);
    store_bind_text(s, 5, f->dataset);
    store_bind_text(s, 6, f->metric);
    store_bind_text(s, 7, f->metric_op);
    sqlite3_bind_double(s, 8, f->metric_value);
    sqlite3_bind_int64(s, 9, (int64_t)page->limit + 1);
    while ((r = sqlite3_step(s)) == SQLITE_ROW && n < page->limit && n < 1000) {
        ids[n++] = sqlite3_column_int64(s, 0);
        last = sqlite3_column_int64(s, 1);
    }
    if (r == SQLITE_ROW) {
        char buf[24];
        snprintf(buf, sizeof(buf), "%lld", (long long)last);
        json_decref(next);
        next = json_string(buf);
    } else if (r != SQLITE_DONE) {
        rc = store_db_error(c, r, err);
    }
    sqlite3_reset(s);
    for (i = 0; rc == MG_OK && i < n; i++) {
        json_t *v;
        if ((rc = version_load(c, ids[i], &v, err)) == MG_OK)
            json_array_append_new(items, v);
    }
    if (rc == MG_OK)
        *out = json_pack("{s:O, s:O}", "items", items, "next_page_token", next);
out:
    json_decref(items);
    json_decref(next);
    store_read_end(st, c);
    return rc;
}

enum mg_code store_version_patch(struct store *st, const char *actor, const char *model,
                                 int64_t version, const json_t *patch, json_t **out,
                                 struct mg_error *err)
{
    static const char sql[] = "UPDATE versions SET description = coalesce(?, description), "
                              "tags = coalesce(?, tags) WHERE id = ?";
    const char *desc = json_string_value(json_object_get(patch, "description"));
    char *tags = member_text(patch, "tags"), target[128];
    struct store_conn *c = store_write_begin(st, err);
    sqlite3_stmt *s;
    int64_t vid;
    json_t *v = NULL;
    enum mg_code rc;

    if (c == NULL) {
        free(tags);
        return err->code;
    }
    if ((rc = store_version_id(c, model, version, &vid, err)) != MG_OK)
        goto out;
    if ((s = store_stmt(c, sql, err)) == NULL) {
        rc = err->code;
        goto out;
    }
    store_bind_text(s, 1, desc);
    store_bind_text(s, 2, tags);
    sqlite3_bind_int64(s, 3, vid);
    if ((rc = store_exec_stmt(c, s, err)) != MG_OK)
        goto out;
    snprintf(target, sizeof(target), "%s/v%lld", model, (long long)version);
    if ((rc = store_audit_append(c, actor, "version.update", target, patch, err)) == MG_OK)
        rc = version_load(c, vid, &v, err);
out:
    free(tags);
    rc = store_write_end(st, c, rc, err);
    if (rc == MG_OK)
        *out = v;
    else
        json_decref(v);
    return rc;
}

/* A version holds at most STORE_METRICS_MAX metrics in all: one version once grew to 33 000
 * (a 10 MB GET, echoed whole on every append). */
static enum mg_code metrics_within_cap(struct store_conn *c, int64_t vid, struct mg_error *err)
{
    static const char sql[] = "SELECT count(*) FROM version_metrics WHERE version_id = ?";
    sqlite3_stmt *s;
    int64_t n = 0;
    int r;

    if ((s = store_stmt(c, sql, err)) == NULL)
        return err->code;
    sqlite3_bind_int64(s, 1, vid);
    r = sqlite3_step(s);
    if (r == SQLITE_ROW)
        n = sqlite3_column_int64(s, 0);
    sqlite3_reset(s);
    if (r != SQLITE_ROW)
        return store_db_error(c, r, err);
    if (n > STORE_METRICS_MAX)
        return mg_fail(err, MG_EINVAL, "metrics",
                       "a version holds at most %d metrics; this call would make %lld",
                       STORE_METRICS_MAX, (long long)n);
    return MG_OK;
}

enum mg_code store_version_add_metrics(struct store *st, const char *actor, const char *model,
                                       int64_t version, const json_t *metrics, json_t **out,
                                       struct mg_error *err)
{
    struct store_conn *c = store_write_begin(st, err);
    int64_t vid;
    json_t *v = NULL;
    bool changed = false;
    char target[128];
    enum mg_code rc;

    if (c == NULL)
        return err->code;
    if ((rc = store_version_id(c, model, version, &vid, err)) != MG_OK)
        goto out;
    if ((rc = insert_metrics(c, vid, actor, metrics, &changed, err)) != MG_OK)
        goto out;
    if ((rc = metrics_within_cap(c, vid, err)) != MG_OK)
        goto out; /* rolled back: nothing of this call is kept */
    snprintf(target, sizeof(target), "%s/v%lld", model, (long long)version);
    if (changed)
        rc = store_audit_append(c, actor, "version.metrics", target, metrics, err);
    if (rc == MG_OK)
        rc = version_load(c, vid, &v, err);
out:
    rc = store_write_end(st, c, rc, err);
    if (rc == MG_OK)
        *out = v;
    else
        json_decref(v);
    return rc;
}

enum mg_code store_version_files(struct store *st, const char *model, int64_t version, json_t **out,
                                 struct mg_error *err)
{
    static const char sql[] = "SELECT f.path, f.size, f.sha256 FROM versions v "
                              "JOIN blob_files f ON f.digest = v.artifact "
                              "WHERE v.id = ? ORDER BY f.path";
    struct store_conn *c = store_read_begin(st);
    sqlite3_stmt *s;
    int64_t vid;
    json_t *items = json_array();
    enum mg_code rc;
    int r;

    if ((rc = store_version_id(c, model, version, &vid, err)) != MG_OK)
        goto out;
    if ((s = store_stmt(c, sql, err)) == NULL) {
        rc = err->code;
        goto out;
    }
    sqlite3_bind_int64(s, 1, vid);
    while ((r = sqlite3_step(s)) == SQLITE_ROW) {
        char digest[72];
        snprintf(digest, sizeof(digest), "sha256:%s", (const char *)sqlite3_column_text(s, 2));
        json_array_append_new(
            items, json_pack("{s:o, s:I, s:s}", "path", store_col_json_string(s, 0), "size",
                             (json_int_t)sqlite3_column_int64(s, 1), "digest", digest));
    }
    if (r != SQLITE_DONE)
        rc = store_db_error(c, r, err);
    sqlite3_reset(s);
    if (rc == MG_OK)
        *out = json_pack("{s:O}", "items", items);
out:
    json_decref(items);
    store_read_end(st, c);
    return rc;
}

enum mg_code store_version_signature(struct store *st, const char *model, int64_t version,
                                     char **bundle, size_t *len, struct mg_error *err)
{
    static const char sql[] = "SELECT bundle FROM version_signatures WHERE version_id = ?";
    struct store_conn *c = store_read_begin(st);
    sqlite3_stmt *s;
    int64_t vid;
    enum mg_code rc;
    int r;

    if ((rc = store_version_id(c, model, version, &vid, err)) != MG_OK)
        goto out;
    if ((s = store_stmt(c, sql, err)) == NULL) {
        rc = err->code;
        goto out;
    }
    sqlite3_bind_int64(s, 1, vid);
    r = sqlite3_step(s);
    if (r == SQLITE_ROW) {
        size_t n = (size_t)sqlite3_column_bytes(s, 0);
        char *b = malloc(n + 1);
        if (b == NULL) {
            rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        } else {
            memcpy(b, sqlite3_column_text(s, 0), n);
            b[n] = '\0';
            *bundle = b;
            *len = n;
        }
    } else if (r == SQLITE_DONE) {
        rc = mg_fail(err, MG_ENOTFOUND, NULL, "version %lld of '%s' has no signature",
                     (long long)version, model);
    } else {
        rc = store_db_error(c, r, err);
    }
    sqlite3_reset(s);
out:
    store_read_end(st, c);
    return rc;
}
