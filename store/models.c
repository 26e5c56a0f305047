/*
 * models.c - models: create, get, list, patch.
 */
#include "store_int.h"

#include <stdlib.h>
#include <string.h>

#include "../common/util.h"

#define MODEL_COLS "name, description, tags, created_at, created_by, latest_version, owners"

static json_t *model_row(sqlite3_stmt *s)
{
    json_t *latest = sqlite3_column_type(s, 5) == SQLITE_NULL
                         ? json_null()
                         : json_integer(sqlite3_column_int64(s, 5));

    return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:[], s:o}", "name",
                     store_col_json_string(s, 0), "description", store_col_json_string(s, 1),
                     "tags", store_col_json(s, 2), "created_at", store_col_json_string(s, 3),
                     "created_by", store_col_json_string(s, 4), "latest_version", latest, "aliases",
                     "owners", store_col_json(s, 6));
}

/* [{"alias","routes"}] of the model's live aliases. */
static json_t *model_aliases(struct store_conn *c, const char *name)
{
    static const char sql[] = "SELECT a.name, a.routes FROM aliases a JOIN models m "
                              "ON m.id = a.model_id WHERE m.name = ? AND a.deleted = 0 "
                              "ORDER BY a.name";
    sqlite3_stmt *s = store_stmt(c, sql, NULL);
    json_t *out = json_array();

    if (s == NULL)
        return out;
    store_bind_text(s, 1, name);
    while (sqlite3_step(s) == SQLITE_ROW)
        json_array_append_new(out, json_pack("{s:o, s:o}", "alias", store_col_json_string(s, 0),
                                             "routes", store_col_json(s, 1)));
    sqlite3_reset(s);
    return out;
}

static enum mg_code model_read(struct store_conn *c, const char *name, json_t **out,
                               struct mg_error *err)
{
    static const char sql[] = "SELECT " MODEL_COLS " FROM models WHERE name = ?";
    sqlite3_stmt *s = store_stmt(c, sql, err);
    enum mg_code rc;
    int r;

    if (s == NULL)
        return err->code;
    store_bind_text(s, 1, name);
    r = sqlite3_step(s);
    if (r == SQLITE_ROW) {
        *out = model_row(s);
        rc = *out ? MG_OK : mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        if (*out)
            json_object_set_new(*out, "aliases", model_aliases(c, name));
    } else if (r == SQLITE_DONE) {
        rc = mg_fail(err, MG_ENOTFOUND, NULL, "model '%s' does not exist", name);
    } else {
        rc = store_db_error(c, r, err);
    }
    sqlite3_reset(s);
    return rc;
}

enum mg_code store_model_create(struct store *st, const char *actor, const json_t *req,
                                json_t **out, struct mg_error *err)
{
    static const char sql[] = "INSERT INTO models (name, description, tags, created_at, "
                              "created_by, owners) VALUES (?, ?, ?, ?, ?, ?)";
    const char *name = json_string_value(json_object_get(req, "name"));
    const char *desc = json_string_value(json_object_get(req, "description"));
    json_t *tags = json_object_get(req, "tags");
    json_t *owners = json_object_get(req, "owners"); /* the creating token's teams */
    struct store_conn *c;
    sqlite3_stmt *s;
    char at[32], *tags_text, *owners_text;
    json_t *m = NULL;
    enum mg_code rc;

    tags_text = tags && json_is_object(tags) ? store_json_text(tags) : strdup("{}");
    owners_text = owners && json_is_array(owners) ? store_json_text(owners) : strdup("[]");
    if (tags_text == NULL || owners_text == NULL) {
        free(tags_text);
        free(owners_text);
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
    if ((c = store_write_begin(st, err)) == NULL) {
        free(tags_text);
        free(owners_text);
        return err->code;
    }
    if ((s = store_stmt(c, sql, err)) == NULL) {
        rc = err->code;
        goto out;
    }
    store_now(at);
    store_bind_text(s, 1, name);
    store_bind_text(s, 2, desc ? desc : "");
    store_bind_text(s, 3, tags_text);
    store_bind_text(s, 4, at);
    store_bind_text(s, 5, actor);
    store_bind_text(s, 6, owners_text);
    rc = store_exec_stmt(c, s, err);
    if (rc == MG_ECONFLICT) {
        rc = mg_fail(err, MG_ECONFLICT, "name", "model '%s' already exists", name);
        goto out;
    }
    if (rc == MG_OK)
        rc = store_audit_append(c, actor, "model.create", name, req, err);
    if (rc == MG_OK)
        rc = model_read(c, name, &m, err);
out:
    free(tags_text);
    free(owners_text);
    rc = store_write_end(st, c, rc, err);
    if (rc == MG_OK)
        *out = m;
    else
        json_decref(m);
    return rc;
}

enum mg_code store_model_get(struct store *st, const char *name, json_t **out, struct mg_error *err)
{
    struct store_conn *c = store_read_begin(st);
    enum mg_code rc = model_read(c, name, out, err);

    store_read_end(st, c);
    return rc;
}

enum mg_code store_model_list(struct store *st, const char *q, const struct store_page *page,
                              json_t **out, struct mg_error *err)
{
    static const char sql[] = "SELECT " MODEL_COLS " FROM models "
                              "WHERE (?1 IS NULL OR instr(name, ?1) > 0) "
                              "AND (?2 IS NULL OR name > ?2) ORDER BY name LIMIT ?3";
    struct store_conn *c = store_read_begin(st);
    sqlite3_stmt *s;
    json_t *items = json_array(), *next = json_null();
    enum mg_code rc = MG_OK;
    unsigned n = 0;
    int r;

    if ((s = store_stmt(c, sql, err)) == NULL) {
        rc = err->code;
        goto out;
    }
    store_bind_text(s, 1, q);
    store_bind_text(s, 2, page->page_token);
    sqlite3_bind_int64(s, 3, (int64_t)page->limit + 1);
    while ((r = sqlite3_step(s)) == SQLITE_ROW) {
        if (n == page->limit) {
            json_t *last = json_array_get(items, n - 1);
            json_decref(next);
            next = json_copy(json_object_get(last, "name"));
            break;
        }
        json_t *m = model_row(s);
        if (m)
            json_object_set_new(m, "aliases",
                                model_aliases(c, (const char *)sqlite3_column_text(s, 0)));
        json_array_append_new(items, m);
        n++;
    }
    if (r != SQLITE_ROW && r != SQLITE_DONE)
        rc = store_db_error(c, r, err);
    sqlite3_reset(s);
    if (rc == MG_OK)
        *out = json_pack("{s:O, s:O}", "items", items, "next_page_token", next);
out:
    json_decref(items);
    json_decref(next);
    store_read_end(st, c);
    return rc;
}

enum mg_code store_model_patch(struct store *st, const char *actor, const char *name,
                               const json_t *patch, json_t **out, struct mg_error *err)
{
    static const char sql[] = "UPDATE models SET description = coalesce(?, description), "
                              "tags = coalesce(?, tags) WHERE name = ?";
    const char *desc = json_string_value(json_object_get(patch, "description"));
    json_t *tags = json_object_get(patch, "tags");
    struct store_conn *c;
    sqlite3_stmt *s;
    char *tags_text = NULL;
    json_t *m = NULL;
    enum mg_code rc;

    if (tags && (tags_text = store_json_text(tags)) == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    if ((c = store_write_begin(st, err)) == NULL) {
        free(tags_text);
        return err->code;
    }
    if ((s = store_stmt(c, sql, err)) == NULL) {
        rc = err->code;
        goto out;
    }
    store_bind_text(s, 1, desc);
    store_bind_text(s, 2, tags_text);
    store_bind_text(s, 3, name);
    if ((rc = store_exec_stmt(c, s, err)) != MG_OK)
        goto out;
    if (sqlite3_changes(c->db) == 0) {
        rc = mg_fail(err, MG_ENOTFOUND, NULL, "model '%s' does not exist", name);
        goto out;
    }
    rc = store_audit_append(c, actor, "model.update", name, patch, err);
    if (rc == MG_OK)
        rc = model_read(c, name, &m, err);
out:
    free(tags_text);
    rc = store_write_end(st, c, rc, err);
    if (rc == MG_OK)
        *out = m;
    else
        json_decref(m);
    return rc;
}

enum mg_code store_model_owners(struct store *st, const char *model, json_t **out,
                                struct mg_error *err)
{
    static const char sql[] = "SELECT owners FROM models WHERE name = ?";
    struct store_conn *c = store_read_begin(st);
    sqlite3_stmt *s;
    enum mg_code rc;
    int r;

    *out = NULL;
    if ((s = store_stmt(c, sql, err)) == NULL) {
        rc = err->code;
        goto out;
    }
    store_bind_text(s, 1, model);
    r = sqlite3_step(s);
    if (r == SQLITE_ROW) {
        *out = store_col_json(s, 0);
        rc =
            json_is_array(*out) ? MG_OK : mg_fail(err, MG_EDB, NULL, "corrupt owners of %s", model);
    } else if (r == SQLITE_DONE) {
        rc = mg_fail(err, MG_ENOTFOUND, NULL, "model '%s' does not exist", model);
    } else {
        rc = store_db_error(c, r, err);
    }
    sqlite3_reset(s);
out:
    store_read_end(st, c);
    if (rc != MG_OK) {
        json_decref(*out);
        *out = NULL;
    }
    return rc;
}

enum mg_code store_model_set_owners(struct store *st, const char *actor, const char *model,
                                    const json_t *teams, json_t **out, struct mg_error *err)
{
    static const char sql[] = "UPDATE models SET owners = ? WHERE name = ?";
    struct store_conn *c;
    sqlite3_stmt *s;
    json_t *m = NULL, *detail = NULL;
    char *text = store_json_text(teams);
    enum mg_code rc = MG_OK;

    *out = NULL;
    if (text == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    if ((c = store_write_begin(st, err)) == NULL) {
        free(text);
        return err->code;
    }
    if ((rc = store_teams_exist(c, teams, err)) != MG_OK)
        goto out;
    if ((s = store_stmt(c, sql, err)) == NULL) {
        rc = err->code;
        goto out;
    }
    store_bind_text(s, 1, text);
    store_bind_text(s, 2, model);
    if ((rc = store_exec_stmt(c, s, err)) != MG_OK)
        goto out;
    if (sqlite3_changes(c->db) == 0) {
        rc = mg_fail(err, MG_ENOTFOUND, NULL, "model '%s' does not exist", model);
        goto out;
    }
    detail = json_pack("{s:O}", "owners", (json_t *)teams);
    if ((rc = store_audit_append(c, actor, "model.owners", model, detail, err)) == MG_OK)
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
