/*
 * models.c - models: create, get, list, patch.
 */
#include "store_int.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/util.h"

/* Lists leave out the readme (up to 64 KiB each); a single model carries it (column 8). */
#define MODEL_COLS                                                                                 \
    "name, description, tags, created_at, created_by, latest_version, owners, metric_directions"

static json_t *model_row(struct db_stmt *s, bool with_readme)
{
    json_t *latest = db_col_null(s, 5) ? json_null() : json_integer(db_col_i64(s, 5));
    json_t *m =
        json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:[], s:o, s:o}", "name",
                  store_col_json_string(s, 0), "description", store_col_json_string(s, 1), "tags",
                  store_col_json(s, 2), "created_at", store_col_json_string(s, 3), "created_by",
                  store_col_json_string(s, 4), "latest_version", latest, "aliases", "owners",
                  store_col_json(s, 6), "metric_directions", store_col_json(s, 7));

    if (m != NULL && with_readme &&
        json_object_set_new(m, "readme", store_col_json_string(s, 8)) != 0) {
        json_decref(m);
        return NULL;
    }
    return m;
}

/* m (a Model) gains "aliases": [{"alias","routes"}] of its live aliases. */
static enum mg_code add_aliases(struct db_conn *c, json_t *m, struct mg_error *err)
{
    static const char sql[] = "SELECT a.name, a.routes FROM aliases a JOIN models m "
                              "ON m.id = a.model_id WHERE m.name = ? AND a.deleted = 0 "
                              "ORDER BY a.name";
    struct db_stmt *s = db_prepare(c, sql);
    json_t *list = json_array();
    enum mg_code rc;
    bool row;

    db_bind_text(s, 1, json_string_value(json_object_get(m, "name")));
    while ((rc = db_step(s, &row, err)) == MG_OK && row)
        json_array_append_new(list, json_pack("{s:o, s:o}", "alias", store_col_json_string(s, 0),
                                              "routes", store_col_json(s, 1)));
    if (rc == MG_OK && json_object_set_new(m, "aliases", list) == 0)
        return MG_OK;
    if (rc == MG_OK)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    json_decref(list);
    return rc;
}

static enum mg_code model_read(struct db_conn *c, const char *name, json_t **out,
                               struct mg_error *err)
{
    static const char sql[] = "SELECT " MODEL_COLS ", readme FROM models WHERE name = ?";
    struct db_stmt *s = db_prepare(c, sql);
    json_t *m;
    enum mg_code rc;
    bool row;

    db_bind_text(s, 1, name);
    if ((rc = db_step(s, &row, err)) != MG_OK)
        return rc;
    if (!row)
        return mg_fail(err, MG_ENOTFOUND, NULL, "model '%s' does not exist", name);
    m = model_row(s, true);
    db_reset(s);
    if (m == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    if ((rc = add_aliases(c, m, err)) != MG_OK) {
        json_decref(m);
        return rc;
    }
    *out = m;
    return MG_OK;
}

enum mg_code store_model_create(struct store *st, const char *actor, const json_t *req,
                                json_t **out, struct mg_error *err)
{
    static const char sql[] = "INSERT INTO models (name, description, tags, created_at, "
                              "created_by, owners, readme, metric_directions) "
                              "VALUES (?, ?, ?, ?, ?, ?, ?, ?)";
    const char *name = json_string_value(json_object_get(req, "name"));
    const char *desc = json_string_value(json_object_get(req, "description"));
    const char *readme = json_string_value(json_object_get(req, "readme"));
    json_t *tags = json_object_get(req, "tags");
    json_t *dirs = json_object_get(req, "metric_directions");
    json_t *owners = json_object_get(req, "owners"); /* the creating token's teams */
    struct db_conn *c = NULL;
    struct db_stmt *s;
    char at[32], *tags_text, *owners_text, *dirs_text;
    json_t *m = NULL;
    enum mg_code rc;

    tags_text = tags && json_is_object(tags) ? store_json_text(tags) : strdup("{}");
    owners_text = owners && json_is_array(owners) ? store_json_text(owners) : strdup("[]");
    dirs_text = dirs && json_is_object(dirs) ? store_json_text(dirs) : strdup("{}");
    if (tags_text == NULL || owners_text == NULL || dirs_text == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto done;
    }
    if ((c = store_write_begin(st, err)) == NULL) {
        rc = err->code;
        goto done;
    }
    s = db_prepare(c, sql);
    store_now(at);
    db_bind_text(s, 1, name);
    db_bind_text(s, 2, desc ? desc : "");
    db_bind_text(s, 3, tags_text);
    db_bind_text(s, 4, at);
    db_bind_text(s, 5, actor);
    db_bind_text(s, 6, owners_text);
    db_bind_text(s, 7, readme ? readme : "");
    db_bind_text(s, 8, dirs_text);
    rc = db_exec(s, err);
    if (rc == MG_ECONFLICT) {
        rc = mg_fail(err, MG_ECONFLICT, "name", "model '%s' already exists", name);
        goto out;
    }
    if (rc == MG_OK)
        rc = store_audit_append(c, actor, "model.create", name, name, req, err);
    if (rc == MG_OK)
        rc = model_read(c, name, &m, err);
out:
    rc = store_write_end(st, c, rc, err);
done:
    free(tags_text);
    free(owners_text);
    free(dirs_text);
    if (rc == MG_OK)
        *out = m;
    else
        json_decref(m);
    return rc;
}

enum mg_code store_model_get(struct store *st, const char *name, json_t **out, struct mg_error *err)
{
    struct db_conn *c = store_read_begin(st);
    enum mg_code rc = model_read(c, name, out, err);

    store_read_end(st, c);
    return rc;
}

static enum mg_code list_row(struct db_stmt *s, void *ctx, json_t **item, char cursor[128],
                             struct mg_error *err)
{
    struct db_conn *c = ctx;
    json_t *m = model_row(s, false);
    enum mg_code rc;

    if (m == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    snprintf(cursor, 128, "%s", db_col_text(s, 0));
    if ((rc = add_aliases(c, m, err)) != MG_OK) {
        json_decref(m);
        return rc;
    }
    *item = m;
    return MG_OK;
}

enum mg_code store_model_list(struct store *st, const char *q, const struct store_page *page,
                              json_t **out, struct mg_error *err)
{
    static const char sql[] = "SELECT " MODEL_COLS " FROM models "
                              "WHERE (?1 IS NULL OR instr(name, ?1) > 0) "
                              "AND (?2 IS NULL OR name > ?2) ORDER BY name LIMIT ?3";
    static const char sql_pg[] = "SELECT " MODEL_COLS " FROM models "
                                 "WHERE (?1::text IS NULL OR strpos(name, ?1) > 0) "
                                 "AND (?2::text IS NULL OR name > ?2) ORDER BY name LIMIT ?3";
    struct db_conn *c = store_read_begin(st);
    struct db_stmt *s = db_prepare(c, DB_SQL(c, sql, sql_pg));
    enum mg_code rc;

    db_bind_text(s, 1, q);
    db_bind_text(s, 2, page->page_token);
    rc = store_page_rows(s, 3, page, list_row, c, out, err);
    store_read_end(st, c);
    return rc;
}

enum mg_code store_model_patch(struct store *st, const char *actor, const char *name,
                               const json_t *patch, json_t **out, struct mg_error *err)
{
    static const char sql[] = "UPDATE models SET description = coalesce(?, description), "
                              "tags = coalesce(?, tags), readme = coalesce(?, readme), "
                              "metric_directions = coalesce(?, metric_directions) WHERE name = ?";
    const char *desc = json_string_value(json_object_get(patch, "description"));
    const char *readme = json_string_value(json_object_get(patch, "readme"));
    json_t *tags = json_object_get(patch, "tags");
    json_t *dirs = json_object_get(patch, "metric_directions");
    struct db_conn *c;
    struct db_stmt *s;
    char *tags_text = NULL, *dirs_text = NULL;
    json_t *m = NULL;
    enum mg_code rc;

    if ((tags && (tags_text = store_json_text(tags)) == NULL) ||
        (json_is_object(dirs) && (dirs_text = store_json_text(dirs)) == NULL)) {
        free(tags_text);
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
    if ((c = store_write_begin(st, err)) == NULL) {
        free(tags_text);
        free(dirs_text);
        return err->code;
    }
    s = db_prepare(c, sql);
    db_bind_text(s, 1, desc);
    db_bind_text(s, 2, tags_text);
    db_bind_text(s, 3, readme);
    db_bind_text(s, 4, dirs_text);
    db_bind_text(s, 5, name);
    if ((rc = db_exec(s, err)) != MG_OK)
        goto out;
    if (db_changes(s) == 0) {
        rc = mg_fail(err, MG_ENOTFOUND, NULL, "model '%s' does not exist", name);
        goto out;
    }
    rc = store_audit_append(c, actor, "model.update", name, name, patch, err);
    if (rc == MG_OK)
        rc = model_read(c, name, &m, err);
out:
    free(tags_text);
    free(dirs_text);
    rc = store_write_end(st, c, rc, err);
    if (rc == MG_OK)
        *out = m;
    else
        json_decref(m);
    return rc;
}

/* A model's owners as last read, by a slot of its name, kept with the model's epoch
 * (coherence.c) at that read: every request of a token with teams is authorised by them
 * (http/authz.c), and only a write that moves the epoch changes them (store_model_set_owners
 * names the model to its audit append; creating a model does too, and none is deleted). An entry
 * serves while the epoch is still the one it was read under, and only while the epochs in
 * memory are current (store_cache_leased: SQLite, or PostgreSQL under a cache lease): the
 * promise a cached response keeps. */
#define OWNERS_SLOTS 64
#define OWNERS_NAME_MAX 127

struct store_owners_memo {
    pthread_mutex_t lock;
    struct {
        char model[OWNERS_NAME_MAX + 1]; /* "" when empty */
        uint64_t epoch;
        char *owners; /* the JSON array's text */
    } e[OWNERS_SLOTS];
};

enum mg_code store_owners_memo_open(struct store *st, struct mg_error *err)
{
    struct store_owners_memo *m = calloc(1, sizeof(*m));

    if (m == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    pthread_mutex_init(&m->lock, NULL);
    st->owners = m;
    return MG_OK;
}

void store_owners_memo_close(struct store *st)
{
    if (st->owners == NULL)
        return;
    for (size_t i = 0; i < OWNERS_SLOTS; i++)
        free(st->owners->e[i].owners);
    pthread_mutex_destroy(&st->owners->lock);
    free(st->owners);
    st->owners = NULL;
}

static size_t owners_slot(const char *model)
{
    return mg_fnv1a(model) % OWNERS_SLOTS;
}

/* The model's owners under epoch, into *out, when the memo has them. */
static bool owners_recall(struct store *st, const char *model, uint64_t epoch, json_t **out)
{
    struct store_owners_memo *m = st->owners;
    size_t i = owners_slot(model);

    *out = NULL;
    pthread_mutex_lock(&m->lock);
    if (m->e[i].owners != NULL && m->e[i].epoch == epoch && strcmp(m->e[i].model, model) == 0)
        *out = json_loads(m->e[i].owners, 0, NULL); /* written by store_json_text: an array */
    pthread_mutex_unlock(&m->lock);
    return *out != NULL;
}

static void owners_remember(struct store *st, const char *model, uint64_t epoch,
                            const json_t *owners)
{
    struct store_owners_memo *m = st->owners;
    size_t i = owners_slot(model);
    char *text;

    if (strlen(model) > OWNERS_NAME_MAX || (text = store_json_text(owners)) == NULL)
        return;
    pthread_mutex_lock(&m->lock);
    free(m->e[i].owners);
    m->e[i].owners = text;
    m->e[i].epoch = epoch;
    snprintf(m->e[i].model, sizeof(m->e[i].model), "%s", model);
    pthread_mutex_unlock(&m->lock);
}

enum mg_code store_model_owners(struct store *st, const char *model, json_t **out,
                                struct mg_error *err)
{
    static const char sql[] = "SELECT owners FROM models WHERE name = ?";
    struct db_conn *c;
    struct db_stmt *s;
    struct mg_error ignored;
    uint64_t epoch = 0;
    enum mg_code rc;
    bool row, memo;

    *out = NULL;
    /* The epoch before the read: a write that lands after it moves the epoch past the
     * entry this read leaves. */
    memo = store_cache_leased(st) && store_model_epoch(st, model, &epoch, &ignored) == MG_OK;
    if (memo && owners_recall(st, model, epoch, out))
        return MG_OK;
    c = store_read_one(st);
    s = db_prepare(c, sql);
    db_bind_text(s, 1, model);
    if ((rc = db_step(s, &row, err)) == MG_OK && row) {
        *out = store_col_json(s, 0);
        rc =
            json_is_array(*out) ? MG_OK : mg_fail(err, MG_EDB, NULL, "corrupt owners of %s", model);
    } else if (rc == MG_OK) {
        rc = mg_fail(err, MG_ENOTFOUND, NULL, "model '%s' does not exist", model);
    }
    db_reset(s);
    store_read_end(st, c);
    if (rc != MG_OK) {
        json_decref(*out);
        *out = NULL;
    } else if (memo) {
        owners_remember(st, model, epoch, *out);
    }
    return rc;
}

enum mg_code store_model_set_owners(struct store *st, const char *actor, const char *model,
                                    const json_t *teams, json_t **out, struct mg_error *err)
{
    static const char sql[] = "UPDATE models SET owners = ? WHERE name = ?";
    struct db_conn *c;
    struct db_stmt *s;
    json_t *m = NULL, *detail = NULL;
    char *text = store_json_text(teams);
    int64_t before[STORE_MAX_SCOPES] = {0};
    char why[128];
    enum mg_code rc = MG_OK;

    *out = NULL;
    if (text == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    if ((c = store_write_begin(st, err)) == NULL) {
        free(text);
        return err->code;
    }
    /* A new owner keeps the bytes the model's versions cite: within its quota. */
    if ((rc = store_teams_exist(c, teams, err)) != MG_OK ||
        (rc = store_quota_uses(c, teams, before, err)) != MG_OK)
        goto out;
    s = db_prepare(c, sql);
    db_bind_text(s, 1, text);
    db_bind_text(s, 2, model);
    if ((rc = db_exec(s, err)) != MG_OK)
        goto out;
    if (db_changes(s) == 0) {
        rc = mg_fail(err, MG_ENOTFOUND, NULL, "model '%s' does not exist", model);
        goto out;
    }
    snprintf(why, sizeof(why), "owning model '%s'", model);
    if ((rc = store_quota_grown(c, teams, before, why, err)) != MG_OK)
        goto out;
    detail = json_pack("{s:O}", "owners", (json_t *)teams);
    if ((rc = store_audit_append(c, actor, "model.owners", model, model, detail, err)) == MG_OK)
        rc = model_read(c, model, &m, err);
out:
    free(text);
    json_decref(detail);
    rc = store_write_end(st, c, rc, err);
    if (rc == MG_OK)
        *out = m;
    else
        json_decref(m);
    return rc;
}
