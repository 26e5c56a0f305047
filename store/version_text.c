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

/* The Version's statements (version_text.h), keyed by KEY. VERSION_ROW is the version's row:
 * columns 0-27 its members; 28 is 1 when an alias was rolled back from the version (else the
 * bad_for query has nothing to find and is skipped); 29 (LINEAGE) is 1 when one of its
 * datasets is withdrawn (in any owner's record) or derived from another (in any owner's
 * lineage): only then can the withdrawn-datasets query find anything. Then a row's kind
 * (30: 0), its order (31) and the columns of the rows after it (32-36), NULL here.
 *
 * Then come the version's datasets in order (kind 1: digest, name, uri, role) and its metrics
 * in order (kind 2: name, by, at, and the value in the last column). On PostgreSQL they are
 * the same statement's next rows (VERSION_ROWS: one round trip, where three statements in a
 * transaction were five). On SQLite they are two statements more by the version's id, the
 * datasets' last column saying each one's lineage as column 29 does (in-process statements
 * cost less than SQLite's merge of the union's rows: ~25 000 instructions more a read). The typed
 * NULLs give PostgreSQL each column's type in the union's first branch. */
#define VERSION_NULLS6 "NULL, NULL, NULL, NULL, NULL, NULL, "
#define VERSION_NULLS30 VERSION_NULLS6 VERSION_NULLS6 VERSION_NULLS6 VERSION_NULLS6 VERSION_NULLS6
#define VERSION_OF "FROM versions v JOIN models m ON m.id = v.model_id "
#define VERSION_ROW(KEY, LINEAGE)                                                                  \
    "SELECT v.id, m.name, v.version, v.artifact, b.size, b.media_type, b.files, v.image, "         \
    "v.run_id, v.source, v.params, v.tags, v.smoke, v.resources, v.description, "                  \
    "v.created_at, v.created_by, sg.keyid, v.status, v.archived_at, v.archived_by, v.deleted_at, " \
    "v.deleted_by, v.deletion_reason, v.introspection, v.io_schema, v.publisher, v.scan, "         \
    "CASE WHEN EXISTS (SELECT 1 FROM aliases a JOIN alias_bad ab ON ab.alias_id = a.id "           \
    "WHERE a.model_id = v.model_id AND ab.version = v.version) THEN 1 ELSE 0 END, " LINEAGE        \
    ", 0, 0, CAST(NULL AS TEXT), CAST(NULL AS TEXT), CAST(NULL AS TEXT), "                         \
    "CAST(NULL AS TEXT), CAST(NULL AS DOUBLE PRECISION) " VERSION_OF                               \
    "JOIN blobs b ON b.digest = v.artifact "                                                       \
    "LEFT JOIN version_signatures sg ON sg.version_id = v.id WHERE " KEY
#define VERSION_ROWS(KEY)                                                                          \
    VERSION_ROW(KEY, VERSION_LINEAGE)                                                              \
    " UNION ALL SELECT " VERSION_NULLS30                                                           \
    "1, vd.ord, vd.digest, vd.name, vd.uri, vd.role, NULL " VERSION_OF                             \
    "JOIN version_datasets vd ON vd.version_id = v.id WHERE " KEY                                  \
    " UNION ALL SELECT " VERSION_NULLS30                                                           \
    "2, vm.seq, vm.name, vm.by, vm.at, NULL, vm.value " VERSION_OF                                 \
    "JOIN version_metrics vm ON vm.version_id = v.id WHERE " KEY " ORDER BY 31, 32"
/* Dataset vd is withdrawn (in any owner's record) or derived from another (in any owner's
 * lineage): two index probes (datasets' key starts with digest; dataset_parents_child). */
#define DATASET_LINEAGE                                                                            \
    "(EXISTS (SELECT 1 FROM datasets d WHERE d.digest = vd.digest AND d.withdrawn_at IS NOT "      \
    "NULL) OR EXISTS (SELECT 1 FROM dataset_parents p WHERE p.child = vd.digest))"
#define VERSION_LINEAGE                                                                            \
    "CASE WHEN EXISTS (SELECT 1 FROM version_datasets vd WHERE vd.version_id = v.id "              \
    "AND " DATASET_LINEAGE ") THEN 1 ELSE 0 END"
#define VERSION_KEY_NAME "m.name = ?1 AND v.version = ?2"
#define VERSION_KEY_ID "v.id = ?1"

static const char sql_datasets[] = "SELECT 1, vd.ord, vd.digest, vd.name, vd.uri, vd.role, "
                                   "CASE WHEN " DATASET_LINEAGE " THEN 1 ELSE 0 END "
                                   "FROM version_datasets vd WHERE vd.version_id = ?1 "
                                   "ORDER BY vd.ord";
static const char sql_metrics[] = "SELECT 2, seq, name, by, at, NULL, value FROM version_metrics "
                                  "WHERE version_id = ?1 ORDER BY seq";

bool version_text_one_statement(const struct db_conn *c)
{
    return db_dialect(c) == DB_POSTGRES;
}

const char *version_sql_by_name(const struct db_conn *c)
{
    return DB_SQL(c, VERSION_ROW(VERSION_KEY_NAME, "0"), VERSION_ROWS(VERSION_KEY_NAME));
}

const char *version_sql_by_id(const struct db_conn *c)
{
    return DB_SQL(c, VERSION_ROW(VERSION_KEY_ID, "0"), VERSION_ROWS(VERSION_KEY_ID));
}

/* Columns of the version's row; COL_KIND is where the rows after it start in VERSION_ROWS. */
enum { COL_BAD = 28, COL_LINEAGE, COL_KIND };

bool version_text_alone(struct db_stmt *s)
{
    return db_col_i64(s, COL_BAD) == 0 && db_col_i64(s, COL_LINEAGE) == 0;
}

/* The next row's kind (its column at) into *kind (3: no row left). */
static enum mg_code next_kind(struct db_stmt *s, int at, int64_t *kind, struct mg_error *err)
{
    bool row;
    enum mg_code rc = db_step(s, &row, err);

    *kind = rc == MG_OK && row ? db_col_i64(s, at) : 3;
    return rc;
}

/* "datasets", "metrics" and "metrics_history" from s's next rows (kinds 1 and 2 in column
 * at, in order; a metric's name is there once: version_metrics is UNIQUE (version_id,
 * name)); the history is written aside and spliced in after the metrics. */
static enum mg_code put_rows(struct db_stmt *ds, struct db_stmt *ms, int at, struct mg_jw *w,
                             bool *lineage, struct mg_error *err)
{
    struct mg_jw hist = {.depth = 1}; /* the history array's members */
    const int sub = at + 2, real = at + 6;
    struct db_stmt *s = ds;
    int64_t kind;
    enum mg_code rc = next_kind(s, at, &kind, err);

    mg_jw_key(w, "datasets");
    mg_jw_arr(w);
    for (; rc == MG_OK && kind == 1; rc = next_kind(s, at, &kind, err)) {
        mg_jw_obj(w);
        put_col_str(w, "digest", s, sub);
        put_col_str(w, "role", s, sub + 3);
        put_col_str_opt(w, "name", s, sub + 1);
        put_col_str_opt(w, "uri", s, sub + 2);
        mg_jw_obj_end(w);
        if (!db_col_null(s, real) && db_col_i64(s, real) != 0)
            *lineage = true;
    }
    mg_jw_arr_end(w);
    if (ms != ds && rc == MG_OK)
        rc = next_kind(s = ms, at, &kind, err);
    mg_jw_key(w, "metrics");
    mg_jw_obj(w);
    for (; rc == MG_OK && kind == 2; rc = next_kind(s, at, &kind, err)) {
        double value = db_col_double(s, real);

        mg_jw_key(w, db_col_text(s, sub));
        mg_jw_real(w, value);
        mg_jw_obj(&hist);
        put_col_str(&hist, "name", s, sub);
        mg_jw_key(&hist, "value");
        mg_jw_real(&hist, value);
        put_col_str(&hist, "by", s, sub + 1);
        put_col_str(&hist, "at", s, sub + 2);
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
 * (doc) or a string, and its column in the Version's statement. */
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
    bool bad = db_col_i64(s, COL_BAD) != 0, lineage = db_col_i64(s, COL_LINEAGE) != 0;
    /* The members after "bad_for" (tail), and the datasets and metrics after them (rows),
     * written before the statement is let go (the nested queries run after db_reset) and
     * spliced in after it: depth 1 with a member already there, so each starts with its
     * comma. */
    struct mg_jw tail = {.depth = 1, .more = 2}, rows = {.depth = 1, .more = 2};
    enum mg_code rc;

    if ((!version_text_one_statement(c) || bad || lineage) && !db_in_transaction(c)) {
        /* The statements after the row would each read a snapshot of their own. */
        db_reset(s);
        return mg_fail(err, MG_EIO, NULL,
                       "internal error: a Version of several statements read outside a "
                       "transaction");
    }
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
    if (version_text_one_statement(c)) {
        rc = put_rows(s, s, COL_KIND, &rows, &lineage, err);
        db_reset(s);
    } else {
        struct db_stmt *ds = db_prepare(c, sql_datasets), *ms = db_prepare(c, sql_metrics);

        db_reset(s);
        db_bind_i64(ds, 1, vid);
        db_bind_i64(ms, 1, vid);
        rc = put_rows(ds, ms, 0, &rows, &lineage, err); /* a statement left stepping on failure
                                                         * ends with the transaction */
    }
    if (rc == MG_OK && (rc = put_strings(c, vid, w, "bad_for", sql_bad_for, bad, err)) == MG_OK) {
        mg_jw_bytes(w, tail.p, tail.n);
        mg_jw_bytes(w, rows.p, rows.n);
        if (tail.failed || rows.failed)
            w->failed = true;
        rc = put_strings(c, vid, w, "withdrawn_datasets",
                         DB_SQL(c, sql_withdrawn, sql_withdrawn_pg), lineage, err);
    }
    mg_jw_obj_end(w);
    mg_jw_free(&tail);
    mg_jw_free(&rows);
    if (rc != MG_OK && resources != NULL) {
        free(*resources);
        free(*introspection);
        *resources = *introspection = NULL;
    }
    return rc;
}
