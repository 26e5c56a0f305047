/*
 * datasets.c - registered datasets and their lineage (a DAG: a dataset's
 * parents must be registered before it, and a digest's record never changes).
 */
#include "store_int.h"

#include <stdlib.h>
#include <string.h>

#include "../base/util.h"

/* Longest lineage walk we answer; deeper graphs are cut (and say so). */
#define LINEAGE_MAX_ROWS 100000

/*
 * The record of digest that a reader with these owners sees (owners: JSON text of an array
 * of teams and "" for global records; NULL: any record, global first). A team reader's own
 * team's record comes before a global one. Its parents are that record's; its children
 * are those of records the reader sees.
 */
static enum mg_code dataset_read(struct db_conn *c, const char *digest, const char *owners,
                                 json_t **out, struct mg_error *err)
{
    static const char sql[] =
        "SELECT name, uri, description, created_at, created_by, "
        "withdrawn_at, withdrawn_by, withdrawn_reason, owner FROM datasets WHERE digest = ?1 "
        "AND (?2 IS NULL OR owner IN (SELECT value FROM json_each(?2))) "
        "ORDER BY CASE WHEN owner = '' THEN ?3 ELSE 1 - ?3 END, owner LIMIT 1";
    static const char sql_pg[] =
        "SELECT name, uri, description, created_at, created_by, "
        "withdrawn_at, withdrawn_by, withdrawn_reason, owner FROM datasets WHERE digest = ?1 "
        "AND (?2::text IS NULL OR owner IN (SELECT jsonb_array_elements_text(?2::jsonb))) "
        "ORDER BY CASE WHEN owner = '' THEN ?3::bigint ELSE 1 - ?3::bigint END, owner LIMIT 1";
    static const char sql_parents[] =
        "SELECT parent FROM dataset_parents WHERE child = ? AND owner = ? ORDER BY parent";
    static const char sql_children[] =
        "SELECT DISTINCT child FROM dataset_parents WHERE parent = ?1 "
        "AND (?2 IS NULL OR owner IN (SELECT value FROM json_each(?2))) ORDER BY child";
    static const char sql_children_pg[] =
        "SELECT DISTINCT child FROM dataset_parents WHERE parent = ?1 "
        "AND (?2::text IS NULL OR owner IN (SELECT jsonb_array_elements_text(?2::jsonb))) "
        "ORDER BY child";
    struct db_stmt *s = db_prepare(c, DB_SQL(c, sql, sql_pg));
    json_t *d = NULL, *parents = NULL, *children = NULL;
    char owner[STORE_TEAM_NAME_MAX + 1];
    enum mg_code rc;
    bool row;

    db_bind_text(s, 1, digest);
    db_bind_text(s, 2, owners);
    db_bind_i64(s, 3, owners != NULL ? 1 : 0);
    if ((rc = db_step(s, &row, err)) != MG_OK)
        return rc;
    if (!row)
        return mg_fail(err, MG_ENOTFOUND, NULL, "dataset %s is not registered", digest);
    d = json_pack("{s:s, s:o, s:o, s:o, s:o, s:o}", "digest", digest, "name",
                  store_col_json_string(s, 0), "uri", store_col_json_string(s, 1), "description",
                  store_col_json_string(s, 2), "created_at", store_col_json_string(s, 3),
                  "created_by", store_col_json_string(s, 4));
    if (d != NULL && !db_col_null(s, 5))
        json_object_set_new(d, "withdrawn",
                            json_pack("{s:o, s:o, s:o}", "at", store_col_json_string(s, 5), "by",
                                      store_col_json_string(s, 6), "reason",
                                      store_col_json_string(s, 7)));
    snprintf(owner, sizeof(owner), "%s", db_col_text(s, 8));
    db_reset(s);
    if (d == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    s = db_prepare(c, sql_parents);
    db_bind_text(s, 1, digest);
    db_bind_text(s, 2, owner);
    parents = json_array();
    while ((rc = db_step(s, &row, err)) == MG_OK && row)
        json_array_append_new(parents, store_col_json_string(s, 0));
    if (rc == MG_OK) {
        s = db_prepare(c, DB_SQL(c, sql_children, sql_children_pg));
        db_bind_text(s, 1, digest);
        db_bind_text(s, 2, owners);
        children = json_array();
        while ((rc = db_step(s, &row, err)) == MG_OK && row)
            json_array_append_new(children, store_col_json_string(s, 0));
    }
    if (rc != MG_OK) {
        json_decref(parents);
        json_decref(children);
        json_decref(d);
        return rc;
    }
    json_object_set_new(d, "parents", parents);
    json_object_set_new(d, "children", children);
    *out = d;
    return MG_OK;
}

/* Same record? Compares name, uri, description and the parent set. */
static bool same_dataset(const json_t *have, const json_t *req)
{
    static const char *keys[] = {"name", "uri", "description"};
    json_t *want_parents = json_object_get(req, "parents");
    json_t *have_parents = json_object_get(have, "parents");
    size_t i, j;
    json_t *p;

    for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        json_t *a = json_object_get(have, keys[i]), *b = json_object_get(req, keys[i]);
        if (b == NULL)
            b = json_null();
        if (!json_equal(a ? a : json_null(), b))
            return false;
    }
    /* Set equality: every wanted parent is had, and every had parent wanted. */
    json_array_foreach(want_parents, i, p)
    {
        bool found = false;
        for (j = 0; j < json_array_size(have_parents); j++)
            found = found || json_equal(p, json_array_get(have_parents, j));
        if (!found)
            return false;
    }
    json_array_foreach(have_parents, i, p)
    {
        bool found = false;
        for (j = 0; j < json_array_size(want_parents); j++)
            found = found || json_equal(p, json_array_get(want_parents, j));
        if (!found)
            return false;
    }
    return true;
}

/* Register one owner's record of the dataset (its parents are checked by the caller). */
static enum mg_code dataset_insert(struct db_conn *c, const char *actor, const char *owner,
                                   const json_t *req, const char *at, struct mg_error *err)
{
    static const char sql[] = "INSERT INTO datasets (digest, owner, name, uri, description, "
                              "created_at, created_by) VALUES (?, ?, ?, ?, ?, ?, ?)";
    static const char sql_parent[] = "INSERT INTO dataset_parents (owner, child, parent) "
                                     "VALUES (?, ?, ?) ON CONFLICT DO NOTHING";
    const char *digest = json_string_value(json_object_get(req, "digest"));
    struct db_stmt *s = db_prepare(c, sql);
    enum mg_code rc;
    json_t *p;
    size_t i;

    db_bind_text(s, 1, digest);
    db_bind_text(s, 2, owner);
    db_bind_text(s, 3, json_string_value(json_object_get(req, "name")));
    db_bind_text(s, 4, json_string_value(json_object_get(req, "uri")));
    db_bind_text(s, 5, json_string_value(json_object_get(req, "description")));
    db_bind_text(s, 6, at);
    db_bind_text(s, 7, actor);
    if ((rc = db_exec(s, err)) != MG_OK)
        return rc;
    json_array_foreach(json_object_get(req, "parents"), i, p)
    {
        s = db_prepare(c, sql_parent);
        db_bind_text(s, 1, owner);
        db_bind_text(s, 2, digest);
        db_bind_text(s, 3, json_string_value(p));
        if ((rc = db_exec(s, err)) != MG_OK)
            return rc;
    }
    return MG_OK;
}

static enum mg_code dataset_users(struct db_conn *c, const char *digest, const char *scope,
                                  json_t **out, struct mg_error *err);
static enum mg_code users_bump(struct db_conn *c, const json_t *users, struct mg_error *err);

enum mg_code store_dataset_create(struct store *st, const char *actor, const json_t *owners,
                                  const json_t *req, json_t **out, bool *created,
                                  struct mg_error *err)
{
    /* A parent must be one the registering owner sees: its own record, or a global one (a
     * global registration may name any). */
    static const char sql_exists[] = "SELECT 1 FROM datasets WHERE digest = ?1 AND "
                                     "(owner = ?2 OR owner = '' OR ?2 = '')";
    const char *digest = json_string_value(json_object_get(req, "digest"));
    json_t *parents = json_object_get(req, "parents"), *p, *o, *have = NULL, *users = NULL;
    char *scope = store_json_text(owners), one[2 * STORE_TEAM_NAME_MAX + 8];
    struct db_conn *c;
    struct db_stmt *s;
    char at[32];
    size_t i, j, inserted = 0;
    enum mg_code rc = MG_OK;

    if (scope == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    if ((c = store_write_begin(st, err)) == NULL) {
        free(scope);
        return err->code;
    }
    store_now(at);
    json_array_foreach(owners, j, o)
    {
        const char *owner = json_string_value(o);
        json_t *only = json_pack("[s]", owner);
        char *text = only ? store_json_text(only) : NULL;

        /* this owner's record: the same one again is fine, a different one is not */
        json_decref(only);
        if (text == NULL) {
            rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
            goto out;
        }
        snprintf(one, sizeof(one), "%s", text);
        free(text);
        rc = dataset_read(c, digest, one, &have, err);
        if (rc == MG_OK) {
            bool same = same_dataset(have, req);

            json_decref(have);
            have = NULL;
            if (same)
                continue;
            rc = mg_fail(err, MG_ECONFLICT, "digest",
                         "dataset %s is already registered with different name, uri, "
                         "description or parents; a digest's record cannot change",
                         digest);
            goto out;
        }
        if (rc != MG_ENOTFOUND)
            goto out;
        json_array_foreach(parents, i, p)
        {
            bool found;

            if (strcmp(json_string_value(p), digest) == 0) {
                rc = mg_fail(err, MG_EINVAL, "parents", "a dataset cannot be its own parent");
                goto out;
            }
            s = db_prepare(c, sql_exists);
            db_bind_text(s, 1, json_string_value(p));
            db_bind_text(s, 2, owner);
            if ((rc = store_exists(s, &found, err)) != MG_OK)
                goto out;
            if (!found) {
                rc = mg_fail(err, MG_EINVAL, "parents",
                             "parent dataset %s is not registered; register it first",
                             json_string_value(p));
                goto out;
            }
        }
        if ((rc = dataset_insert(c, actor, owner, req, at, err)) != MG_OK)
            goto out;
        inserted++;
    }
    /* A record with parents joins the digest's lineage to theirs: versions trained on it (or
     * on what derives from it) may now show a withdrawn ancestor, so each of their models'
     * cached answers moves on. */
    if (inserted > 0 && json_array_size(parents) > 0 &&
        ((rc = dataset_users(c, digest, NULL, &users, err)) != MG_OK ||
         (rc = users_bump(c, users, err)) != MG_OK))
        goto out;
    if (inserted > 0 && (rc = store_audit_append(c, actor, "dataset.create", digest, STORE_NO_MODEL,
                                                 req, err)) != MG_OK)
        goto out;
    rc = dataset_read(c, digest, scope, &have, err);
    *created = inserted > 0;
out:
    free(scope);
    json_decref(users);
    rc = store_write_end(st, c, rc, err);
    if (rc == MG_OK)
        *out = have;
    else
        json_decref(have);
    return rc;
}

/* The owners filter as JSON text (NEW; NULL for none); false when out of memory. */
static bool scope_text(const json_t *owners, char **text)
{
    *text = owners != NULL ? store_json_text(owners) : NULL;
    return owners == NULL || *text != NULL;
}

enum mg_code store_dataset_get(struct store *st, const json_t *owners, const char *digest,
                               json_t **out, struct mg_error *err)
{
    struct db_conn *c;
    enum mg_code rc;
    char *scope;

    if (!scope_text(owners, &scope))
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    c = store_read_begin(st);
    rc = dataset_read(c, digest, scope, out, err);
    store_read_end(st, c);
    free(scope);
    return rc;
}

/* Versions that used digest directly or through any descendant, in the shape of
 * store_dataset_versions' items (*out NEW), in the caller's transaction. */
static enum mg_code dataset_users(struct db_conn *c, const char *digest, const char *scope,
                                  json_t **out, struct mg_error *err)
{
    /* Breadth-first over descendants; `via` is the JSON path of digests walked.
     * UNION (not UNION ALL) plus the depth bound keep diamonds finite. */
    static const char sql[] =
        "WITH RECURSIVE d(digest, via, depth) AS ("
        "  SELECT ?1, json_array(), 0"
        "  UNION"
        "  SELECT p.child, json_insert(d.via, '$[#]', p.child), d.depth + 1"
        "  FROM dataset_parents p JOIN d ON p.parent = d.digest WHERE d.depth < 64"
        "  AND (?2 IS NULL OR p.owner IN (SELECT value FROM json_each(?2)))"
        "  LIMIT 100000"
        ") "
        "SELECT m.name, v.version, vd.role, d.via, m.owners FROM d "
        "JOIN version_datasets vd ON vd.digest = d.digest "
        "JOIN versions v ON v.id = vd.version_id JOIN models m ON m.id = v.model_id "
        "ORDER BY d.depth, m.name, v.version, vd.role";
    /* PostgreSQL allows no LIMIT inside the recursion; it evaluates a recursive
     * query only as far as its reader fetches, so the limit goes outside. It cannot
     * estimate how many datasets the recursion finds either, and guessing dozens it
     * would hash-join every model (a scan that grows with the registry): each
     * dataset's versions are looked up by index, and each version's model by its id. */
    static const char sql_pg[] =
        "WITH RECURSIVE d(digest, via, depth) AS ("
        "  SELECT ?1::text, '[]'::jsonb, 0"
        "  UNION"
        "  SELECT p.child, d.via || to_jsonb(p.child), d.depth + 1"
        "  FROM dataset_parents p JOIN d ON p.parent = d.digest WHERE d.depth < 64"
        "  AND (?2::text IS NULL OR p.owner IN (SELECT jsonb_array_elements_text(?2::jsonb)))"
        ") "
        "SELECT x.name, x.version, x.role, d.via::text, x.owners "
        "FROM (SELECT * FROM d LIMIT 100000) d "
        "CROSS JOIN LATERAL (SELECT m.name, m.owners, v.version, vd.role "
        "FROM version_datasets vd "
        "JOIN versions v ON v.id = vd.version_id JOIN models m ON m.id = v.model_id "
        "WHERE vd.digest = d.digest) x "
        "ORDER BY d.depth, x.name, x.version, x.role";
    struct db_stmt *s = db_prepare(c, DB_SQL(c, sql, sql_pg));
    json_t *items = json_array(), *seen = json_object();
    enum mg_code rc;
    int rows = 0;
    bool row;

    db_bind_text(s, 1, digest);
    db_bind_text(s, 2, scope);
    while ((rc = db_step(s, &row, err)) == MG_OK && row && rows++ < LINEAGE_MAX_ROWS) {
        char key[256];
        const char *model = db_col_text(s, 0);
        const char *role = db_col_text(s, 2);
        int64_t ver = db_col_i64(s, 1);

        /* Keep the shortest path to each (model, version, role). */
        snprintf(key, sizeof(key), "%s\n%lld\n%s", model, (long long)ver, role);
        if (json_object_get(seen, key))
            continue;
        json_object_set_new(seen, key, json_true());
        json_array_append_new(items,
                              json_pack("{s:s, s:I, s:s, s:o, s:o}", "model", model, "version",
                                        (json_int_t)ver, "role", role, "via", store_col_json(s, 3),
                                        "_owners", store_col_json(s, 4)));
    }
    db_reset(s);
    json_decref(seen);
    if (rc != MG_OK) {
        json_decref(items);
        return rc;
    }
    *out = items;
    return MG_OK;
}

/* Move the epoch of each model that dataset_users' items name, once each (their versions'
 * withdrawn_datasets may have changed). */
static enum mg_code users_bump(struct db_conn *c, const json_t *users, struct mg_error *err)
{
    json_t *seen = json_object(), *u;
    enum mg_code rc = MG_OK;
    size_t i;

    if (seen == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    json_array_foreach(users, i, u)
    {
        const char *model = json_string_value(json_object_get(u, "model"));

        if (model == NULL || json_object_get(seen, model) != NULL)
            continue;
        if (json_object_set_new(seen, model, json_true()) != 0) {
            rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
            break;
        }
        if ((rc = store_model_bump(c, model, err)) != MG_OK)
            break;
    }
    json_decref(seen);
    return rc;
}

enum mg_code store_dataset_versions(struct store *st, const json_t *owners, const char *digest,
                                    json_t **out, struct mg_error *err)
{
    struct db_conn *c;
    struct db_stmt *s;
    json_t *items = NULL, *probe = NULL;
    enum mg_code rc;
    char *scope;
    bool row;

    if (!scope_text(owners, &scope))
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    c = store_read_begin(st);
    /* Registered, or at least used directly by a version: otherwise 404. */
    rc = dataset_read(c, digest, scope, &probe, err);
    json_decref(probe);
    if (rc == MG_ENOTFOUND) {
        static const char sql_used[] = "SELECT 1 FROM version_datasets WHERE digest = ?";
        s = db_prepare(c, sql_used);
        db_bind_text(s, 1, digest);
        if ((rc = store_exists(s, &row, err)) != MG_OK)
            goto out;
        if (!row) {
            rc = MG_ENOTFOUND; /* err already says so */
            goto out;
        }
    }
    if (rc == MG_OK && (rc = dataset_users(c, digest, scope, &items, err)) == MG_OK) {
        *out = json_pack("{s:o}", "items", items);
        if (*out == NULL)
            rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
out:
    store_read_end(st, c);
    free(scope);
    return rc;
}

enum mg_code store_datasets_unregistered(struct store *st, const char *model, const json_t *digests,
                                         size_t *unregistered, json_t **first, struct mg_error *err)
{
    /* registered for this model: a global record, or one its owners registered */
    static const char sql[] =
        "SELECT 1 FROM datasets WHERE digest = ?1 AND (owner = '' OR owner IN "
        "(SELECT j.value FROM models m, json_each(m.owners) j WHERE m.name = ?2))";
    static const char sql_pg[] =
        "SELECT 1 FROM datasets WHERE digest = ?1 AND (owner = '' OR owner IN "
        "(SELECT jsonb_array_elements_text(m.owners::jsonb) FROM models m WHERE m.name = ?2))";
    struct db_conn *c = store_read_begin(st);
    json_t *d;
    size_t i, n = 0;
    enum mg_code rc = MG_OK;

    *first = NULL;
    json_array_foreach(digests, i, d)
    {
        struct db_stmt *s = db_prepare(c, DB_SQL(c, sql, sql_pg));
        bool found;

        db_bind_text(s, 1, json_string_value(d));
        db_bind_text(s, 2, model);
        if ((rc = store_exists(s, &found, err)) != MG_OK)
            break;
        if (!found && n++ == 0)
            *first = json_copy(d);
    }
    store_read_end(st, c);
    if (rc != MG_OK) {
        json_decref(*first);
        *first = NULL;
        return rc;
    }
    *unregistered = n;
    return MG_OK;
}

enum mg_code store_dataset_withdraw(struct store *st, const char *actor, const char *digest,
                                    const char *reason, json_t **out, bool *changed,
                                    struct mg_error *err)
{
    static const char sql[] = "UPDATE datasets SET withdrawn_at = ?, withdrawn_by = ?, "
                              "withdrawn_reason = ? WHERE digest = ? AND withdrawn_at IS NULL";
    struct db_conn *c = store_write_begin(st, err);
    struct db_stmt *s;
    json_t *d = NULL, *detail = NULL, *users = NULL, *u;
    char at[32];
    size_t i;
    enum mg_code rc;

    if (c == NULL)
        return err->code;
    *changed = false;
    if ((rc = dataset_read(c, digest, NULL, &d, err)) != MG_OK)
        goto out;
    if (json_object_get(d, "withdrawn") != NULL)
        goto out; /* withdrawn before: the first withdrawal stands */
    store_now(at);
    s = db_prepare(c, sql);
    db_bind_text(s, 1, at);
    db_bind_text(s, 2, actor);
    db_bind_text(s, 3, reason);
    db_bind_text(s, 4, digest);
    if ((rc = db_exec(s, err)) != MG_OK)
        goto out;
    *changed = true;
    /* The versions it marks are named in the audit entry, and each of their models' cached
     * answers moves on (they now show withdrawn_datasets). */
    if ((rc = dataset_users(c, digest, NULL, &users, err)) != MG_OK ||
        (rc = users_bump(c, users, err)) != MG_OK)
        goto out;
    json_array_foreach(users, i, u) json_object_del(u, "_owners");
    detail = json_pack("{s:s?, s:O}", "reason", reason, "versions", users);
    /* users_bump moved each model above */
    if ((rc = store_audit_append(c, actor, "dataset.withdraw", digest, STORE_NO_MODEL, detail,
                                 err)) != MG_OK)
        goto out;
    json_decref(d);
    d = NULL;
    rc = dataset_read(c, digest, NULL, &d, err);
out:
    json_decref(detail);
    json_decref(users);
    rc = store_write_end(st, c, rc, err);
    if (rc == MG_OK)
        *out = d;
    else
        json_decref(d);
    return rc;
}
