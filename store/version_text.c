/*
 * version_text.c - the Version document (docs/contract.md "Versions") written straight from
 * its rows into one buffer (version_text.h).
 *
 * The stored documents (params, tags, source, smoke, resources, introspection, io_schema,
 * publisher, scan) are JSON text that store_json_text wrote; they are copied with their reals
 * shortened (mg_jw_raw) instead of being parsed into json_t and printed again. Members come
 * in the order the json_t version always had, so the text is byte for byte what
 * mg_json_text made of it: a read that misses the response cache allocates a handful of
 * buffers instead of two hundred values.
 */
#include "version_text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/json.h"
#include "db.h"

/* key: the column as a JSON string, or null when NULL. */
static void put_col_str(struct mg_jw *w, const char *key, struct db_stmt *s, int i)
{
    mg_jw_key(w, key);
    mg_jw_str(w, db_col_text(s, i), db_col_bytes(s, i));
}

/* key: the column's string, left out when NULL. */
static void put_col_str_opt(struct mg_jw *w, const char *key, struct db_stmt *s, int i)
{
    if (!db_col_null(s, i))
        put_col_str(w, key, s, i);
}

/* key: the column's stored document, or null when NULL. */
static void put_col_doc(struct mg_jw *w, const char *key, struct db_stmt *s, int i)
{
    const char *t = db_col_text(s, i);

    mg_jw_key(w, key);
    if (t == NULL)
        mg_jw_null(w);
    else
        mg_jw_raw(w, t, db_col_bytes(s, i));
}

/* key: the column's stored document, left out when NULL or null. */
static void put_col_doc_opt(struct mg_jw *w, const char *key, struct db_stmt *s, int i)
{
    const char *t = db_col_text(s, i);

    if (t != NULL && strcmp(t, "null") != 0)
        put_col_doc(w, key, s, i);
}

/* The version's datasets; *lineage set when one of them is withdrawn (in any owner's record)
 * or derived from another (in any owner's lineage): only then can the withdrawn-datasets query find
 * anything. Both are index lookups (datasets' key starts with digest; dataset_parents_child). */
static enum mg_code put_datasets(struct db_conn *c, int64_t vid, struct mg_jw *w, bool *lineage,
                                 struct mg_error *err)
{
    static const char sql[] =
        "SELECT vd.digest, vd.name, vd.uri, vd.role, CASE WHEN EXISTS (SELECT 1 FROM datasets d "
        "WHERE d.digest = vd.digest AND d.withdrawn_at IS NOT NULL) OR EXISTS (SELECT 1 FROM "
        "dataset_parents p WHERE p.child = vd.digest) THEN 1 ELSE 0 END "
        "FROM version_datasets vd WHERE vd.version_id = ? ORDER BY vd.ord";
    struct db_stmt *s = db_prepare(c, sql);
    enum mg_code rc;
    bool row;

    *lineage = false;
    db_bind_i64(s, 1, vid);
    mg_jw_key(w, "datasets");
    mg_jw_arr(w);
    while ((rc = db_step(s, &row, err)) == MG_OK && row) {
        mg_jw_obj(w);
        put_col_str(w, "digest", s, 0);
        put_col_str(w, "role", s, 3);
        put_col_str_opt(w, "name", s, 1);
        put_col_str_opt(w, "uri", s, 2);
        mg_jw_obj_end(w);
        if (db_col_i64(s, 4) != 0)
            *lineage = true;
    }
    mg_jw_arr_end(w);
    return rc;
}

/* "metrics" and "metrics_history", from one pass over the rows in the order they came (a name
 * is there once: version_metrics is UNIQUE (version_id, name)); the history is written aside
 * and spliced in after the metrics. */
static enum mg_code put_metrics(struct db_conn *c, int64_t vid, struct mg_jw *w,
                                struct mg_error *err)
{
    static const char sql[] = "SELECT name, value, by, at FROM version_metrics "
                              "WHERE version_id = ? ORDER BY seq";
    struct db_stmt *s = db_prepare(c, sql);
    struct mg_jw hist = {.depth = 1}; /* the history array's members */
    enum mg_code rc;
    bool row;

    db_bind_i64(s, 1, vid);
    mg_jw_key(w, "metrics");
    mg_jw_obj(w);
    while ((rc = db_step(s, &row, err)) == MG_OK && row) {
        double value = db_col_double(s, 1);

        mg_jw_key(w, db_col_text(s, 0));
        mg_jw_real(w, value);
        mg_jw_obj(&hist);
        put_col_str(&hist, "name", s, 0);
        mg_jw_key(&hist, "value");
        mg_jw_real(&hist, value);
        put_col_str(&hist, "by", s, 2);
        put_col_str(&hist, "at", s, 3);
        mg_jw_obj_end(&hist);
    }
    mg_jw_obj_end(w);
    mg_jw_key(w, "metrics_history");
    mg_jw_arr(w);
    mg_jw_bytes(w, hist.p, hist.n);
    mg_jw_arr_end(w);
    if (hist.failed)
        w->failed = true;
    mg_jw_free(&hist);
    return rc;
}

/* key: the strings the first column of sql (its ?1 the version's id) gives; [] without a
 * query when !run. */
static enum mg_code put_strings(struct db_conn *c, int64_t vid, struct mg_jw *w, const char *key,
                                const char *sql, bool run, struct mg_error *err)
{
    struct db_stmt *s;
    enum mg_code rc = MG_OK;
    bool row;

    mg_jw_key(w, key);
    mg_jw_arr(w);
    if (run) {
        s = db_prepare(c, sql);
        db_bind_i64(s, 1, vid);
        while ((rc = db_step(s, &row, err)) == MG_OK && row)
            mg_jw_str(w, db_col_text(s, 0), db_col_bytes(s, 0));
    }
    mg_jw_arr_end(w);
    return rc;
}

/* "bad_for": the aliases this version was rolled back from (no query unless the row says
 * there are any). */
static const char sql_bad_for[] = "SELECT a.name FROM versions v "
                                  "JOIN aliases a ON a.model_id = v.model_id "
                                  "JOIN alias_bad b ON b.alias_id = a.id AND b.version = v.version "
                                  "WHERE v.id = ?1 ORDER BY a.name";

/* "withdrawn_datasets": the withdrawn datasets the version was trained on, directly or
 * through the data sets those were derived from (docs/contract.md "Lifecycle"). Only records
 * its model's owners registered, or global ones, count (docs/contract.md "Tenancy"): another
 * team's record of the same digest, its derivations and its withdrawal never reach it.
 * Lineage starts at the version's own datasets (put_datasets ran first): when none of them is
 * withdrawn or derived from another, nothing can be, and the recursive query is skipped. It
 * was a fifth of a version read's instructions, and its ephemeral tables' page caches (~80 KiB
 * each, allocated and trimmed back per read) cost ~40 page faults a read. */
#define WITHDRAWN_LINEAGE                                                                          \
    "anc(digest) AS ("                                                                             \
    " SELECT digest FROM version_datasets WHERE version_id = ?1"                                   \
    " UNION SELECT p.parent FROM dataset_parents p JOIN anc ON p.child = anc.digest"               \
    " WHERE p.owner IN (SELECT team FROM own)) "                                                   \
    "SELECT DISTINCT d.digest FROM datasets d JOIN anc ON anc.digest = d.digest "                  \
    "WHERE d.withdrawn_at IS NOT NULL AND d.owner IN (SELECT team FROM own) "                      \
    "ORDER BY d.digest"
static const char sql_withdrawn[] = "WITH RECURSIVE own(team) AS ("
                                    " SELECT j.value FROM versions v JOIN models m ON "
                                    "m.id = v.model_id, json_each(m.owners) j WHERE v.id = ?1 "
                                    "UNION SELECT ''), " WITHDRAWN_LINEAGE;
static const char sql_withdrawn_pg[] = "WITH RECURSIVE own(team) AS ("
                                       " SELECT jsonb_array_elements_text(m.owners::jsonb) "
                                       "FROM versions v JOIN models m ON m.id = v.model_id "
                                       "WHERE v.id = ?1 UNION SELECT ''), " WITHDRAWN_LINEAGE;

/* A stored document's text (NEW), or NULL when absent or null: what a member left out of
 * the Version reads as. Copied, not parsed: the caller parses it only when it needs it (an
 * introspection with GGUF metadata runs to kilobytes). *failed when out of memory. */
static char *doc_copy(const char *t, bool *failed)
{
    char *c;

    if (t == NULL || strcmp(t, "null") == 0)
        return NULL;
    if ((c = strdup(t)) == NULL)
        *failed = true;
    return c;
}

/* The members left out when NULL, after "bad_for", in the Version's order: a stored document
 * (doc) or a string, and its VERSION_SELECT column. */
static const struct {
    const char *key;
    int col;
    bool doc;
} optional[] = {
    {"run_id", 8, false},        {"source", 9, true},        {"smoke", 12, true},
    {"resources", 13, true},     {"archived_at", 19, false}, {"archived_by", 20, false},
    {"deleted_at", 21, false},   {"deleted_by", 22, false},  {"deletion_reason", 23, false},
    {"introspection", 24, true}, {"io_schema", 25, true},    {"publisher", 26, true},
    {"scan", 27, true},
};

enum mg_code version_text_write(struct db_conn *c, struct db_stmt *s, struct mg_jw *w,
                                char **resources, char **introspection, struct mg_error *err)
{
    int64_t vid = db_col_i64(s, 0);
    bool bad = db_col_i64(s, 28) != 0, lineage = false;
    /* The members after "bad_for", written before the row is let go (the nested queries
     * run after db_reset) and spliced in after it: depth 1 with a member already there, so
     * each starts with its comma. */
    struct mg_jw tail = {.depth = 1, .more = 2};
    enum mg_code rc;

    mg_jw_obj(w);
    put_col_str(w, "model", s, 1);
    mg_jw_key(w, "version");
    mg_jw_int(w, db_col_i64(s, 2));
    mg_jw_key(w, "artifact");
    mg_jw_obj(w);
    put_col_str(w, "digest", s, 3);
    mg_jw_key(w, "size");
    mg_jw_int(w, db_col_i64(s, 4));
    put_col_str(w, "media_type", s, 5);
    mg_jw_key(w, "files");
    if (db_col_null(s, 6))
        mg_jw_null(w);
    else
        mg_jw_int(w, db_col_i64(s, 6));
    mg_jw_obj_end(w);
    put_col_doc(w, "params", s, 10);
    put_col_doc(w, "tags", s, 11);
    put_col_str(w, "description", s, 14);
    put_col_str(w, "created_at", s, 15);
    put_col_str(w, "created_by", s, 16);
    put_col_str(w, "image", s, 7);
    put_col_str(w, "status", s, 18);
    mg_jw_key(w, "signature");
    if (db_col_null(s, 17)) {
        mg_jw_null(w);
    } else {
        char url[256];

        snprintf(url, sizeof(url), "/api/v1/models/%s/versions/%lld/signature", db_col_text(s, 1),
                 (long long)db_col_i64(s, 2));
        mg_jw_obj(w);
        put_col_str(w, "keyid", s, 17);
        mg_jw_key(w, "url");
        mg_jw_str(w, url, strlen(url));
        mg_jw_obj_end(w);
    }
    for (size_t i = 0; i < sizeof(optional) / sizeof(optional[0]); i++)
        (optional[i].doc ? put_col_doc_opt : put_col_str_opt)(&tail, optional[i].key, s,
                                                              optional[i].col);
    if (resources != NULL) {
        *resources = doc_copy(db_col_text(s, 13), &w->failed);
        *introspection = doc_copy(db_col_text(s, 24), &w->failed);
    }
    db_reset(s);
    if ((rc = put_strings(c, vid, w, "bad_for", sql_bad_for, bad, err)) == MG_OK) {
        mg_jw_bytes(w, tail.p, tail.n);
        if (tail.failed)
            w->failed = true;
        if ((rc = put_datasets(c, vid, w, &lineage, err)) == MG_OK &&
            (rc = put_metrics(c, vid, w, err)) == MG_OK)
            rc = put_strings(c, vid, w, "withdrawn_datasets",
                             DB_SQL(c, sql_withdrawn, sql_withdrawn_pg), lineage, err);
    }
    mg_jw_obj_end(w);
    mg_jw_free(&tail);
    if (rc != MG_OK && resources != NULL) {
        free(*resources);
        free(*introspection);
        *resources = *introspection = NULL;
    }
    return rc;
}
