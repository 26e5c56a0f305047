/*
 * versions.c - immutable model versions with their datasets and the
 * append-only metric history.
 */
#include "store_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/text.h"
#include "../base/util.h"
#include "version_text.h"

/* The Version w holds (rc: how writing it went) as json_t, for callers that decide on it or
 * add to it: version_text_write is the one writer of the document. */
static enum mg_code version_parsed(enum mg_code rc, struct mg_jw *w, json_t **out,
                                   struct mg_error *err)
{
    size_t len;
    char *text;

    if (rc != MG_OK) {
        mg_jw_free(w);
        return rc;
    }
    if ((text = mg_jw_done(w, &len)) == NULL ||
        (*out = json_loadb(text, len, JSON_ALLOW_NUL, NULL)) == NULL)
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    free(text);
    return rc;
}

/* The full Version whose version_sql_by_* row s is on (stepped; reset here), in its
 * transaction, as json_t. */
static enum mg_code version_from_row(struct db_conn *c, struct db_stmt *s, json_t **out,
                                     struct mg_error *err)
{
    struct mg_jw w = {0};

    return version_parsed(version_text_write(c, s, &w, NULL, NULL, err), &w, out, err);
}

/* Load a full Version by row id, in any open transaction. */
static enum mg_code version_load(struct db_conn *c, int64_t vid, json_t **out, struct mg_error *err)
{
    struct db_stmt *s = db_prepare(c, version_sql_by_id(c));
    enum mg_code rc;
    bool row;

    db_bind_i64(s, 1, vid);
    if ((rc = db_step(s, &row, err)) != MG_OK)
        return rc;
    if (!row)
        return mg_fail(err, MG_ENOTFOUND, NULL, "version does not exist");
    return version_from_row(c, s, out, err);
}

static enum mg_code insert_metrics(struct db_conn *c, int64_t vid, const char *actor,
                                   const struct mg_metric *m, size_t n, bool *changed,
                                   struct mg_error *err)
{
    static const char sql_get[] =
        "SELECT value FROM version_metrics WHERE version_id = ? AND name = ?";
    static const char sql_ins[] = "INSERT INTO version_metrics (version_id, name, value, by, "
                                  "at) VALUES (?, ?, ?, ?, ?)";
    char at[32];
    struct db_stmt *s;
    enum mg_code rc;
    size_t i;

    store_now(at);
    for (i = 0; i < n; i++) {
        double d = m[i].value;
        bool row;

        s = db_prepare(c, sql_get);
        db_bind_i64(s, 1, vid);
        db_bind_text(s, 2, m[i].name);
        if ((rc = db_step(s, &row, err)) != MG_OK)
            return rc;
        if (row) {
            double have = db_col_double(s, 0);
            char num[32];

            db_reset(s);
            if (have != d)
                return mg_fail(err, MG_ECONFLICT, "metrics",
                               "metric '%s' already has the value %s; metrics are "
                               "append-only, record a new name instead",
                               m[i].name, mg_fmt_double(have, num, sizeof(num)));
            continue;
        }
        s = db_prepare(c, sql_ins);
        db_bind_i64(s, 1, vid);
        db_bind_text(s, 2, m[i].name);
        db_bind_double(s, 3, d);
        db_bind_text(s, 4, actor);
        db_bind_text(s, 5, at);
        if ((rc = db_exec(s, err)) != MG_OK)
            return rc;
        *changed = true;
    }
    return MG_OK;
}

static enum mg_code insert_datasets(struct db_conn *c, int64_t vid,
                                    const struct mg_version_new *req, struct mg_error *err)
{
    static const char sql[] = "INSERT INTO version_datasets (version_id, ord, digest, name, "
                              "uri, role) VALUES (?, ?, ?, ?, ?, ?)";
    struct db_stmt *s;
    enum mg_code rc;
    size_t i;

    for (i = 0; i < req->ndatasets; i++) {
        const struct mg_dataset_use *d = &req->datasets[i];

        s = db_prepare(c, sql);
        db_bind_i64(s, 1, vid);
        db_bind_i64(s, 2, (int64_t)i);
        db_bind_text(s, 3, d->digest);
        db_bind_text(s, 4, d->name);
        db_bind_text(s, 5, d->uri);
        db_bind_text(s, 6, d->role);
        if ((rc = db_exec(s, err)) != MG_OK)
            return rc;
    }
    return MG_OK;
}

static enum mg_code blob_exists(struct db_conn *c, const char *digest, struct mg_error *err)
{
    static const char sql[] = "SELECT 1 FROM blobs WHERE digest = ? AND state = 'live'";
    struct db_stmt *s = db_prepare(c, sql);
    enum mg_code rc;
    bool found;

    db_bind_text(s, 1, digest);
    if ((rc = store_exists(s, &found, err)) != MG_OK || found)
        return rc;
    return mg_fail(err, MG_EINVAL, "artifact",
                   "artifact blob %s does not exist; upload it with POST /api/v1/blobs first",
                   digest);
}

/* Whether a stored blob was recognised as an archive (files is not NULL). */
static enum mg_code blob_is_archive(struct db_conn *c, const char *digest, bool *yes,
                                    struct mg_error *err)
{
    static const char sql[] = "SELECT 1 FROM blobs WHERE digest = ? AND files IS NOT NULL";
    struct db_stmt *s = db_prepare(c, sql);

    db_bind_text(s, 1, digest);
    return store_exists(s, yes, err);
}

/* JSON text of an optional member, or NULL when absent. */
static char *member_text(const json_t *req, const char *key)
{
    json_t *v = json_object_get(req, key);

    return v && !json_is_null(v) ? store_json_text(v) : NULL;
}

/* JSON text of a kept document, or NULL for none (NULL or null). */
static char *doc_text(const json_t *v)
{
    return v && !json_is_null(v) ? store_json_text(v) : NULL;
}

/* The signed datasets: each {"digest","name"?,"uri"?,"role"}; null when none was sent. */
static json_t *sign_datasets(const struct mg_version_new *req)
{
    json_t *arr;
    size_t i;

    if (!req->datasets_given)
        return json_null();
    arr = json_array();
    for (i = 0; arr != NULL && i < req->ndatasets; i++) {
        const struct mg_dataset_use *d = &req->datasets[i];
        json_t *o = json_pack("{s:s, s:s*, s:s*, s:s}", "digest", d->digest, "name", d->name, "uri",
                              d->uri, "role", d->role);

        if (json_array_append_new(arr, o) != 0) {
            json_decref(arr);
            arr = NULL;
        }
    }
    return arr;
}

static json_t *string_or_null(const char *s)
{
    return s ? json_string(s) : json_null();
}

/* The statement's "modelgate" predicate: the version's metadata at creation, its members in
 * this order: model, version, artifact, image, datasets, metrics, run_id, source,
 * created_at, created_by, publisher. */
static json_t *sign_meta(const char *model, int64_t n, const struct mg_version_new *req,
                         const char *at, const char *actor)
{
    json_t *m = json_pack("{s:s, s:I, s:s}", "model", model, "version", (json_int_t)n, "artifact",
                          req->artifact);

    if (m == NULL)
        return NULL;
    if (json_object_set_new(m, "image", string_or_null(req->image)) != 0 ||
        json_object_set_new(m, "datasets", sign_datasets(req)) != 0 ||
        json_object_set_new(m, "metrics",
                            req->metrics_given ? mg_metrics_json(req->metrics, req->nmetrics)
                                               : json_null()) != 0 ||
        json_object_set_new(m, "run_id", string_or_null(req->run_id)) != 0 ||
        json_object_set_new(m, "source", req->source ? json_deep_copy(req->source) : json_null()) !=
            0 ||
        json_object_set_new(m, "created_at", json_string(at)) != 0 ||
        json_object_set_new(m, "created_by", json_string(actor)) != 0) {
        json_decref(m);
        return NULL;
    }
    /* docs/contract.md "Identity": who published it, when the server recorded that */
    if (json_is_object(req->publisher) &&
        json_object_set_new(m, "publisher", json_deep_copy(req->publisher)) != 0) {
        json_decref(m);
        return NULL;
    }
    return m;
}

static int resource_order(const void *a, const void *b)
{
    return sign_path_cmp(((const struct sign_resource *)a)->name,
                         ((const struct sign_resource *)b)->name);
}

/* Sign the new version with the active key and store the bundle, inside the
 * version's transaction: a version never exists unsigned. */
static enum mg_code sign_version(struct store *st, struct db_conn *c, int64_t vid,
                                 const char *model, int64_t n, const struct mg_version_new *req,
                                 const char *at, const char *actor, struct mg_error *err)
{
    static const char sql_files[] =
        "SELECT path, sha256 FROM blob_files WHERE digest = ? ORDER BY path";
    static const char sql_ins[] =
        "INSERT INTO version_signatures (version_id, keyid, bundle) VALUES (?, ?, ?)";
    struct sign_resource *res = NULL;
    size_t nres = 0, cap = 0, i;
    char subject[128], *bundle = NULL;
    json_t *meta = NULL;
    struct db_stmt *s;
    enum mg_code rc = MG_OK;
    const char *artifact = req->artifact;
    bool row, archive = false;

    if (st->keys == NULL || st->keys->active == NULL)
        return MG_OK; /* a store opened without keys (tools, tests) signs nothing */
    s = db_prepare(c, sql_files);
    db_bind_text(s, 1, artifact);
    while ((rc = db_step(s, &row, err)) == MG_OK && row) {
        const char *hex = db_col_text(s, 1);
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
        res[nres].name = strdup(db_col_text(s, 0));
        if (res[nres].name == NULL || hex == NULL || !mg_hex_decode(hex, 32, res[nres].digest)) {
            free((char *)res[nres].name);
            rc = mg_fail(err, MG_EDB, NULL, "corrupt file manifest of %s", artifact);
            break;
        }
        nres++;
    }
    db_reset(s);
    if (rc != MG_OK)
        goto out;
    /* The manifest in model_signing's path order, whatever order the database used. */
    if (nres > 1)
        qsort(res, nres, sizeof(*res), resource_order);
    if (nres == 0 && (rc = blob_is_archive(c, artifact, &archive, err)) != MG_OK)
        goto out;
    if (nres == 0 && !archive) {
        res = calloc(1, sizeof(*res));
        if (res == NULL || (res[0].name = strdup(".")) == NULL) {
            rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
            goto out;
        }
        mg_hex_decode(artifact + 7, 32, res[0].digest);
        nres = 1;
    }
    snprintf(subject, sizeof(subject), "%s-v%lld", model, (long long)n);
    meta = sign_meta(model, n, req, at, actor);
    if (meta == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    if ((rc = sign_bundle_create(st->keys->active, subject, res, nres, meta, &bundle, err)) !=
        MG_OK)
        goto out;
    s = db_prepare(c, sql_ins);
    db_bind_i64(s, 1, vid);
    db_bind_text(s, 2, st->keys->active->keyid);
    db_bind_text(s, 3, bundle);
    rc = db_exec(s, err);
out:
    for (i = 0; i < nres; i++)
        free((char *)res[i].name);
    free(res);
    free(bundle);
    json_decref(meta);
    return rc;
}

enum mg_code store_version_create(struct store *st, const char *actor, const char *model,
                                  const struct mg_version_new *req, json_t **out,
                                  struct mg_error *err)
{
    /* The model's row is the counter: the update takes its lock, so versions are
     * numbered 1, 2, 3… without gaps or duplicates whoever else creates one. */
    static const char sql_next[] = "UPDATE models SET latest_version = "
                                   "coalesce(latest_version, 0) + 1 WHERE id = ? "
                                   "RETURNING latest_version";
    static const char sql_ins[] =
        "INSERT INTO versions (model_id, version, artifact, image, run_id, source, params, "
        "tags, smoke, resources, description, created_at, created_by, introspection, io_schema, "
        "publisher, scan) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id";
    const char *artifact = req->artifact;
    char *source = doc_text(req->source), *smoke = doc_text(req->smoke);
    char *resources = doc_text(req->resources);
    char *intro = doc_text(req->introspection), *io = doc_text(req->io_schema);
    char *publisher = doc_text(req->publisher);
    char *scan = doc_text(req->scan);
    char *params_t = req->params ? store_json_text(req->params) : strdup("{}");
    char *tags_t = req->tags ? store_json_text(req->tags) : strdup("{}");
    struct db_conn *c = NULL;
    struct db_stmt *s;
    int64_t mid, n = 0, vid = 0;
    char at[32], target[128];
    json_t *v = NULL, *detail;
    bool changed = false, row;
    enum mg_code rc = MG_OK;

    if (params_t == NULL || tags_t == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto done;
    }
    if ((c = store_write_begin(st, err)) == NULL) {
        rc = err->code;
        goto done;
    }
    /* A version's bytes count in its owners' quotas (docs/contract.md "Quotas and cost"). */
    if ((rc = store_model_id(c, model, &mid, err)) != MG_OK ||
        (rc = blob_exists(c, artifact, err)) != MG_OK ||
        (rc = store_quota_admit_model(c, mid, artifact, err)) != MG_OK)
        goto out;
    s = db_prepare(c, sql_next);
    db_bind_i64(s, 1, mid);
    if ((rc = db_step(s, &row, err)) != MG_OK)
        goto out;
    if (!row) {
        rc = mg_fail(err, MG_ENOTFOUND, NULL, "model '%s' does not exist", model);
        goto out;
    }
    n = db_col_i64(s, 0);
    if ((rc = db_exec(s, err)) != MG_OK) /* a RETURNING statement ends at its last step */
        goto out;
    s = db_prepare(c, sql_ins);
    store_now(at);
    db_bind_i64(s, 1, mid);
    db_bind_i64(s, 2, n);
    db_bind_text(s, 3, artifact);
    db_bind_text(s, 4, req->image);
    db_bind_text(s, 5, req->run_id);
    db_bind_text(s, 6, source);
    db_bind_text(s, 7, params_t);
    db_bind_text(s, 8, tags_t);
    db_bind_text(s, 9, smoke);
    db_bind_text(s, 10, resources);
    db_bind_text(s, 11, req->description ? req->description : "");
    db_bind_text(s, 12, at);
    db_bind_text(s, 13, actor);
    db_bind_text(s, 14, intro);
    db_bind_text(s, 15, io);
    db_bind_text(s, 16, publisher);
    db_bind_text(s, 17, scan);
    if ((rc = db_step(s, &row, err)) != MG_OK)
        goto out;
    vid = row ? db_col_i64(s, 0) : 0;
    if ((rc = db_exec(s, err)) != MG_OK)
        goto out;
    if ((rc = insert_datasets(c, vid, req, err)) != MG_OK)
        goto out;
    if ((rc = insert_metrics(c, vid, actor, req->metrics, req->nmetrics, &changed, err)) != MG_OK)
        goto out;
    if ((rc = sign_version(st, c, vid, model, n, req, at, actor, err)) != MG_OK ||
        (rc = store_quota_note_model(c, mid, err)) != MG_OK)
        goto out;
    snprintf(target, sizeof(target), "%s/v%lld", model, (long long)n);
    detail = json_pack("{s:s}", "artifact", artifact);
    rc = store_audit_append(c, actor, "version.create", target, model, detail, err);
    json_decref(detail);
    if (rc == MG_OK)
        rc = version_load(c, vid, &v, err);
out:
    rc = store_write_end(st, c, rc, err);
done:
    free(source);
    free(smoke);
    free(resources);
    free(intro);
    free(io);
    free(publisher);
    free(scan);
    free(params_t);
    free(tags_t);
    if (rc == MG_OK)
        *out = v;
    else
        json_decref(v);
    return rc;
}

/* The Version (model, version) written into w by name and number, read alone (one:
 * DB_READ_ONE) or in a read transaction of its own. Alone, a version that needs more
 * statements (version_text_alone) sets *again and nothing is written. With no row,
 * store_version_id says what is missing, as it always did. */
static enum mg_code version_read(struct store *st, bool one, struct mg_jw *w, const char *model,
                                 int64_t version, char **resources, char **introspection,
                                 bool *again, struct mg_error *err)
{
    struct db_conn *c = one ? store_read_one(st) : store_read_begin(st);
    struct db_stmt *s = db_prepare(c, version_sql_by_name(c));
    int64_t vid;
    enum mg_code rc;
    bool row;

    *again = false;
    db_bind_text(s, 1, model);
    db_bind_i64(s, 2, version);
    if ((rc = db_step(s, &row, err)) == MG_OK) {
        if (row && one && !version_text_alone(s))
            *again = true;
        else if (row)
            rc = version_text_write(c, s, w, resources, introspection, err);
        else if ((rc = store_version_id(c, model, version, &vid, err)) == MG_OK)
            rc = mg_fail(err, MG_ENOTFOUND, NULL, "version does not exist");
    }
    store_read_end(st, c);
    return rc;
}

/* Where one statement holds the Version (PostgreSQL), it is read on its own (DB_READ_ONE: no
 * BEGIN or COMMIT, two round trips fewer) unless it needs more statements; otherwise in one
 * read transaction. */
static enum mg_code version_get(struct store *st, const char *model, int64_t version,
                                struct mg_jw *w, char **resources, char **introspection,
                                struct mg_error *err)
{
    bool again = false;

    if (version_text_one_statement(st->writer)) {
        enum mg_code rc =
            version_read(st, true, w, model, version, resources, introspection, &again, err);

        if (rc != MG_OK || !again)
            return rc;
    }
    return version_read(st, false, w, model, version, resources, introspection, &again, err);
}

enum mg_code store_version_get(struct store *st, const char *model, int64_t version, json_t **out,
                               struct mg_error *err)
{
    struct mg_jw w = {0};

    return version_parsed(version_get(st, model, version, &w, NULL, NULL, err), &w, out, err);
}

enum mg_code store_version_get_text(struct store *st, const char *model, int64_t version,
                                    struct store_version_text *out, struct mg_error *err)
{
    struct mg_jw w = {0};
    enum mg_code rc;

    *out = (struct store_version_text){0};
    rc = version_get(st, model, version, &w, &out->resources, &out->introspection, err);
    if (rc == MG_OK && (out->text = mg_jw_done(&w, &out->len)) == NULL)
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    mg_jw_free(&w);
    if (rc != MG_OK)
        store_version_text_clear(out);
    return rc;
}

void store_version_text_clear(struct store_version_text *v)
{
    free(v->text);
    free(v->resources);
    free(v->introspection);
    *v = (struct store_version_text){0};
}

enum mg_code store_version_brief_in(struct db_conn *c, const char *model, int64_t version,
                                    json_t **out, struct mg_error *err)
{
    static const char sql[] = "SELECT v.artifact, v.image FROM versions v JOIN models m ON "
                              "m.id = v.model_id WHERE m.name = ? AND v.version = ?";
    struct db_stmt *s = db_prepare(c, sql);
    enum mg_code rc;
    bool row;

    db_bind_text(s, 1, model);
    db_bind_i64(s, 2, version);
    if ((rc = db_step(s, &row, err)) == MG_OK && row) {
        *out = json_pack("{s:o, s:o}", "artifact", store_col_json_string(s, 0), "image",
                         store_col_json_string(s, 1));
        rc = *out ? MG_OK : mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    } else if (rc == MG_OK) {
        rc = mg_fail(err, MG_ENOTFOUND, NULL, "version %lld of model '%s' does not exist",
                     (long long)version, model);
    }
    db_reset(s);
    return rc;
}

enum mg_code store_version_brief(struct store *st, const char *model, int64_t version, json_t **out,
                                 struct mg_error *err)
{
    struct db_conn *c = store_read_begin(st);
    enum mg_code rc = store_version_brief_in(c, model, version, out, err);

    store_read_end(st, c);
    return rc;
}

/* A page's row: the whole Version, loaded with nested queries on other statements. */
static enum mg_code list_row(struct db_stmt *s, void *ctx, json_t **item, char cursor[128],
                             struct mg_error *err)
{
    snprintf(cursor, 128, "%lld", (long long)db_col_i64(s, 1));
    return version_load(ctx, db_col_i64(s, 0), item, err);
}

/* One ?tag= filter (parameters k, v) and one ?metric= filter (name n, operator o, value x);
 * a slot whose key or name is NULL holds for every version. */
#define TAG_SQL(k, v)                                                                              \
    "AND (?" k " IS NULL OR EXISTS (SELECT 1 FROM json_each(v.tags) t "                            \
    "     WHERE t.key = ?" k " AND t.type = 'text' AND t.value = ?" v ")) "
#define TAG_SQL_PG(k, v)                                                                           \
    "AND (?" k "::text IS NULL OR (jsonb_typeof(v.tags::jsonb -> ?" k "::text) = 'string' "        \
    "     AND v.tags::jsonb ->> ?" k "::text = ?" v "::text)) "
#define METRIC_SQL(n, o, x, no)                                                                    \
    "AND (?" n " IS NULL OR EXISTS (SELECT 1 FROM version_metrics mm "                             \
    "     WHERE mm.version_id = v.id AND mm.name = ?" n " AND CASE ?" o " "                        \
    "       WHEN '>=' THEN mm.value >= ?" x " WHEN '>' THEN mm.value > ?" x " "                    \
    "       WHEN '<=' THEN mm.value <= ?" x " WHEN '<' THEN mm.value < ?" x " "                    \
    "       WHEN '=' THEN mm.value = ?" x " ELSE " no " END)) "

enum mg_code store_version_list(struct store *st, const char *model,
                                const struct store_version_filter *f, const struct store_page *page,
                                json_t **out, struct mg_error *err)
{
    /* ?1 model, ?2 cursor, ?5 dataset, ?9 limit, ?10 status; tags (3,4) (11,12) (13,14)
     * (15,16); metrics (6,7,8) (17,18,19) (20,21,22) (23,24,25). */
    static const int tag_params[STORE_VERSION_FILTERS_MAX] = {3, 11, 13, 15};
    static const int metric_params[STORE_VERSION_FILTERS_MAX] = {6, 17, 20, 23};
    /* clang-format off */
    static const char sql[] =
        "SELECT v.id, v.version FROM versions v WHERE v.model_id = ?1 AND v.version < ?2 "
        TAG_SQL("3", "4") TAG_SQL("11", "12") TAG_SQL("13", "14") TAG_SQL("15", "16")
        "AND (?5 IS NULL OR EXISTS (SELECT 1 FROM version_datasets d "
        "     WHERE d.version_id = v.id AND d.digest = ?5)) "
        METRIC_SQL("6", "7", "8", "0") METRIC_SQL("17", "18", "19", "0")
        METRIC_SQL("20", "21", "22", "0") METRIC_SQL("23", "24", "25", "0")
        "AND (?10 IS NULL OR v.status = ?10) "
        "ORDER BY v.version DESC LIMIT ?9";
    static const char sql_pg[] =
        "SELECT v.id, v.version FROM versions v WHERE v.model_id = ?1 AND v.version < ?2 "
        TAG_SQL_PG("3", "4") TAG_SQL_PG("11", "12") TAG_SQL_PG("13", "14")
        TAG_SQL_PG("15", "16")
        "AND (?5::text IS NULL OR EXISTS (SELECT 1 FROM version_datasets d "
        "     WHERE d.version_id = v.id AND d.digest = ?5)) "
        METRIC_SQL("6::text", "7::text", "8", "false")
        METRIC_SQL("17::text", "18::text", "19", "false")
        METRIC_SQL("20::text", "21::text", "22", "false")
        METRIC_SQL("23::text", "24::text", "25", "false")
        "AND (?10::text IS NULL OR v.status = ?10::text) "
        "ORDER BY v.version DESC LIMIT ?9";
    /* clang-format on */
    struct db_conn *c = store_read_begin(st);
    struct db_stmt *s;
    int64_t mid, cursor;
    enum mg_code rc;
    int i;

    if ((rc = store_model_id(c, model, &mid, err)) != MG_OK ||
        (rc = store_page_cursor(page, &cursor, err)) != MG_OK)
        goto out;
    s = db_prepare(c, DB_SQL(c, sql, sql_pg));
    db_bind_i64(s, 1, mid);
    db_bind_i64(s, 2, cursor);
    for (i = 0; i < STORE_VERSION_FILTERS_MAX; i++) {
        bool tag = f->tags[i].key != NULL, metric = f->metrics[i].name != NULL;

        db_bind_text(s, tag_params[i], f->tags[i].key);
        db_bind_text(s, tag_params[i] + 1, tag ? f->tags[i].value : NULL);
        db_bind_text(s, metric_params[i], f->metrics[i].name);
        db_bind_text(s, metric_params[i] + 1, metric ? f->metrics[i].op : NULL);
        db_bind_double(s, metric_params[i] + 2, metric ? f->metrics[i].value : 0);
    }
    db_bind_text(s, 5, f->dataset);
    db_bind_text(s, 10, f->status);
    rc = store_page_rows(s, 9, page, list_row, c, out, err);
out:
    store_read_end(st, c);
    return rc;
}

/* A deleted version's record is kept as it was: MG_ECONFLICT for changes to it. */
static enum mg_code not_deleted(struct db_conn *c, int64_t vid, const char *model, int64_t n,
                                struct mg_error *err)
{
    static const char sql[] = "SELECT 1 FROM versions WHERE id = ? AND status = 'deleted'";
    struct db_stmt *s = db_prepare(c, sql);
    enum mg_code rc;
    bool found;

    db_bind_i64(s, 1, vid);
    if ((rc = store_exists(s, &found, err)) != MG_OK)
        return rc;
    if (found)
        return mg_fail(err, MG_ECONFLICT, NULL,
                       "version %lld of model '%s' is deleted; its record is kept as it was",
                       (long long)n, model);
    return MG_OK;
}

enum mg_code store_version_patch(struct store *st, const char *actor, const char *model,
                                 int64_t version, const json_t *patch, json_t **out,
                                 struct mg_error *err)
{
    static const char sql[] = "UPDATE versions SET description = coalesce(?, description), "
                              "tags = coalesce(?, tags) WHERE id = ?";
    const char *desc = json_string_value(json_object_get(patch, "description"));
    char *tags = member_text(patch, "tags"), target[128];
    struct db_conn *c = store_write_begin(st, err);
    struct db_stmt *s;
    int64_t vid;
    json_t *v = NULL;
    enum mg_code rc;

    if (c == NULL) {
        free(tags);
        return err->code;
    }
    if ((rc = store_version_id(c, model, version, &vid, err)) != MG_OK ||
        (rc = not_deleted(c, vid, model, version, err)) != MG_OK)
        goto out;
    s = db_prepare(c, sql);
    db_bind_text(s, 1, desc);
    db_bind_text(s, 2, tags);
    db_bind_i64(s, 3, vid);
    if ((rc = db_exec(s, err)) != MG_OK)
        goto out;
    snprintf(target, sizeof(target), "%s/v%lld", model, (long long)version);
    if ((rc = store_audit_append(c, actor, "version.update", target, model, patch, err)) == MG_OK)
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
static enum mg_code metrics_within_cap(struct db_conn *c, int64_t vid, struct mg_error *err)
{
    static const char sql[] = "SELECT count(*) FROM version_metrics WHERE version_id = ?";
    struct db_stmt *s;
    int64_t n = 0;
    bool row;

    enum mg_code rc;

    s = db_prepare(c, sql);
    db_bind_i64(s, 1, vid);
    if ((rc = db_step(s, &row, err)) != MG_OK)
        return rc;
    if (row)
        n = db_col_i64(s, 0);
    db_reset(s);
    if (n > STORE_METRICS_MAX)
        return mg_fail(err, MG_EINVAL, "metrics",
                       "a version holds at most %d metrics; this call would make %lld",
                       STORE_METRICS_MAX, (long long)n);
    return MG_OK;
}

enum mg_code store_version_add_metrics(struct store *st, const char *actor, const char *model,
                                       int64_t version, const struct mg_metric *metrics, size_t n,
                                       json_t **out, struct mg_error *err)
{
    struct db_conn *c = store_write_begin(st, err);
    int64_t vid;
    json_t *v = NULL, *detail;
    bool changed = false;
    char target[128];
    enum mg_code rc;

    if (c == NULL)
        return err->code;
    if ((rc = store_version_id(c, model, version, &vid, err)) != MG_OK ||
        (rc = not_deleted(c, vid, model, version, err)) != MG_OK)
        goto out;
    if ((rc = insert_metrics(c, vid, actor, metrics, n, &changed, err)) != MG_OK)
        goto out;
    if ((rc = metrics_within_cap(c, vid, err)) != MG_OK)
        goto out; /* rolled back: nothing of this call is kept */
    snprintf(target, sizeof(target), "%s/v%lld", model, (long long)version);
    if (changed) {
        if ((detail = mg_metrics_json(metrics, n)) == NULL)
            rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        else
            rc = store_audit_append(c, actor, "version.metrics", target, model, detail, err);
        json_decref(detail);
    }
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
    struct db_conn *c = store_read_begin(st);
    struct db_stmt *s;
    int64_t vid;
    json_t *items = json_array();
    enum mg_code rc;
    bool row;

    if ((rc = store_version_id(c, model, version, &vid, err)) != MG_OK)
        goto out;
    s = db_prepare(c, sql);
    db_bind_i64(s, 1, vid);
    while ((rc = db_step(s, &row, err)) == MG_OK && row) {
        char digest[72];
        snprintf(digest, sizeof(digest), "sha256:%s", db_col_text(s, 2));
        json_array_append_new(items,
                              json_pack("{s:o, s:I, s:s}", "path", store_col_json_string(s, 0),
                                        "size", (json_int_t)db_col_i64(s, 1), "digest", digest));
    }
    db_reset(s);
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
    struct db_conn *c = store_read_begin(st);
    struct db_stmt *s;
    int64_t vid;
    enum mg_code rc;
    bool row;

    if ((rc = store_version_id(c, model, version, &vid, err)) != MG_OK)
        goto out;
    s = db_prepare(c, sql);
    db_bind_i64(s, 1, vid);
    if ((rc = db_step(s, &row, err)) == MG_OK && row) {
        size_t n = db_col_bytes(s, 0);
        char *b = malloc(n + 1);

        if (b == NULL) {
            rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        } else {
            memcpy(b, db_col_text(s, 0), n);
            b[n] = '\0';
            *bundle = b;
            *len = n;
        }
        db_reset(s);
    } else if (rc == MG_OK) {
        rc = mg_fail(err, MG_ENOTFOUND, NULL, "version %lld of '%s' has no signature",
                     (long long)version, model);
    }
out:
    store_read_end(st, c);
    return rc;
}

enum mg_code store_version_usable(struct db_conn *c, int64_t mid, const char *model,
                                  int64_t version, const char *use, struct mg_error *err)
{
    static const char sql[] = "SELECT status FROM versions WHERE model_id = ? AND version = ?";
    struct db_stmt *s = db_prepare(c, sql);
    char status[16] = "";
    enum mg_code rc;
    bool row;

    db_bind_i64(s, 1, mid);
    db_bind_i64(s, 2, version);
    if ((rc = db_step(s, &row, err)) != MG_OK)
        return rc;
    if (!row)
        return mg_fail(err, MG_ENOTFOUND, NULL, "version %lld of model '%s' does not exist",
                       (long long)version, model);
    snprintf(status, sizeof(status), "%s", db_col_text(s, 0));
    db_reset(s);
    if (strcmp(status, "ready") == 0)
        return MG_OK;
    return mg_fail(err, MG_ECONFLICT, NULL, "version %lld of model '%s' is %s and cannot be %s%s",
                   (long long)version, model, status, use,
                   strcmp(status, "archived") == 0 ? "; unarchive it first" : "");
}
