/*
 * db_sqlite.c - the database layer (db.h) over SQLite: one sqlite3 handle per
 * connection, statements prepared once and cached by the address of their
 * text, failures kept in the statement until its step reports them.
 */
#include "db.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct db_stmt {
    struct db_conn *conn;
    const char *sql;
    sqlite3_stmt *st; /* NULL when preparing failed */
    int rc;           /* first failure of prepare or bind since db_prepare, else SQLITE_OK */
    char msg[256];    /* its message, copied: SQLite's own is overwritten by the next call */
};

struct db_conn {
    sqlite3 *db;
    struct db_stmt **cache; /* one allocation each: handles stay put when the array grows */
    unsigned ncache, capcache;
    struct db_stmt failed; /* handed out when a statement cannot be prepared or cached */
};

/* The error a SQLite result code means, with the message SQLite gave. */
static enum mg_code fail_rc(int rc, const char *msg, struct mg_error *err)
{
    switch (rc & 0xff) {
    case SQLITE_FULL:
        return mg_fail(err, MG_ENOSPC, NULL, "the server's disk is full; free space and retry");
    case SQLITE_CONSTRAINT:
        return mg_fail(err, MG_ECONFLICT, NULL, "conflicting record: %s", msg);
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return mg_fail(err, MG_EUNAVAIL, NULL, "the database is busy; retry shortly");
    case SQLITE_NOMEM:
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    default:
        return mg_fail(err, MG_EDB, NULL, "database error: %s", msg);
    }
}

static void keep_failure(struct db_stmt *s, int rc, const char *msg)
{
    if (s->rc != SQLITE_OK)
        return; /* the first failure is the one to report */
    s->rc = rc;
    snprintf(s->msg, sizeof(s->msg), "%s", msg ? msg : sqlite3_errstr(rc));
}

static enum mg_code exec_text(sqlite3 *db, const char *sql, struct mg_error *err)
{
    char *msg = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    enum mg_code code = MG_OK;

    if (rc != SQLITE_OK)
        code = fail_rc(rc, msg ? msg : sqlite3_errmsg(db), err);
    sqlite3_free(msg);
    return code;
}

enum mg_code db_open(const struct db_open_options *opt, struct db_conn **out, struct mg_error *err)
{
    int flags = opt->writer ? SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE : SQLITE_OPEN_READONLY;
    struct db_conn *c = calloc(1, sizeof(*c));
    enum mg_code rc;
    int r;

    *out = NULL;
    if (c == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    c->failed.conn = c;
    r = sqlite3_open_v2(opt->path, &c->db, flags | SQLITE_OPEN_NOMUTEX, NULL);
    if (r != SQLITE_OK) {
        rc = mg_fail(err, MG_EDB, NULL, "cannot open database %s: %s", opt->path,
                     c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(r));
        goto fail;
    }
    sqlite3_busy_timeout(c->db, opt->busy_timeout_ms > 0 ? opt->busy_timeout_ms : 10000);
    sqlite3_extended_result_codes(c->db, 1);
    if (opt->writer) {
        if ((rc = exec_text(c->db, "PRAGMA journal_mode=WAL", err)) != MG_OK)
            goto fail;
        if ((rc = exec_text(
                 c->db, opt->sync_normal ? "PRAGMA synchronous=NORMAL" : "PRAGMA synchronous=FULL",
                 err)) != MG_OK)
            goto fail;
    }
    if ((rc = exec_text(c->db, "PRAGMA foreign_keys=ON", err)) != MG_OK)
        goto fail;
    *out = c;
    return MG_OK;
fail:
    db_close(&c);
    return rc;
}

void db_close(struct db_conn **cp)
{
    struct db_conn *c = *cp;
    unsigned i;

    if (c == NULL)
        return;
    for (i = 0; i < c->ncache; i++) {
        sqlite3_finalize(c->cache[i]->st);
        free(c->cache[i]);
    }
    free(c->cache);
    if (c->db) {
        /* A writer folds the WAL back so the database is one file at rest; on a
         * read-only connection this is a harmless no-op. */
        if (!sqlite3_db_readonly(c->db, "main"))
            sqlite3_wal_checkpoint_v2(c->db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
        sqlite3_close(c->db);
    }
    free(c);
    *cp = NULL;
}

enum mg_code db_exec_script(struct db_conn *c, const char *sql, struct mg_error *err)
{
    return exec_text(c->db, sql, err);
}

/* ---- transactions --------------------------------------------------------- */

enum mg_code db_begin(struct db_conn *c, enum db_txn kind, struct mg_error *err)
{
    static const char sql_read[] = "BEGIN";
    static const char sql_write[] = "BEGIN IMMEDIATE";

    /* Cached statements: sqlite3_exec would parse "BEGIN" on every read. */
    return db_exec(db_prepare(c, kind == DB_WRITE ? sql_write : sql_read), err);
}

enum mg_code db_commit(struct db_conn *c, struct mg_error *err)
{
    static const char sql_commit[] = "COMMIT";
    sqlite3_stmt *s;
    enum mg_code rc;

    if (sqlite3_get_autocommit(c->db))
        return MG_OK;
    /* A statement left stepping would keep this connection's snapshot past the
     * COMMIT, and the next borrower would read old data: end them all first. */
    for (s = sqlite3_next_stmt(c->db, NULL); s; s = sqlite3_next_stmt(c->db, s)) {
        if (sqlite3_stmt_busy(s))
            sqlite3_reset(s);
    }
    rc = db_exec(db_prepare(c, sql_commit), err);
    if (rc != MG_OK)
        db_rollback(c);
    return rc;
}

void db_rollback(struct db_conn *c)
{
    sqlite3_stmt *s;

    if (sqlite3_get_autocommit(c->db))
        return;
    for (s = sqlite3_next_stmt(c->db, NULL); s; s = sqlite3_next_stmt(c->db, s)) {
        if (sqlite3_stmt_busy(s))
            sqlite3_reset(s);
    }
    (void)exec_text(c->db, "ROLLBACK", NULL);
}

int64_t db_total_changes(struct db_conn *c)
{
    return sqlite3_total_changes64(c->db);
}

/* ---- statements ----------------------------------------------------------- */

static struct db_stmt *failed_stmt(struct db_conn *c, int rc, const char *msg)
{
    c->failed.rc = SQLITE_OK;
    c->failed.st = NULL;
    keep_failure(&c->failed, rc, msg);
    return &c->failed;
}

struct db_stmt *db_prepare(struct db_conn *c, const char *sql)
{
    struct db_stmt *s;
    sqlite3_stmt *st = NULL;
    unsigned i;
    int rc;

    for (i = 0; i < c->ncache; i++) {
        s = c->cache[i];
        if (s->sql == sql) {
            sqlite3_reset(s->st);
            sqlite3_clear_bindings(s->st);
            s->rc = SQLITE_OK;
            return s;
        }
    }
    rc = sqlite3_prepare_v3(c->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &st, NULL);
    if (rc != SQLITE_OK)
        return failed_stmt(c, rc, sqlite3_errmsg(c->db));
    if (c->ncache == c->capcache) {
        unsigned cap = c->capcache ? c->capcache * 2 : 64;
        void *grown = realloc(c->cache, cap * sizeof(*c->cache));

        if (grown == NULL) {
            sqlite3_finalize(st);
            return failed_stmt(c, SQLITE_NOMEM, NULL);
        }
        c->cache = grown;
        c->capcache = cap;
    }
    if ((s = calloc(1, sizeof(*s))) == NULL) {
        sqlite3_finalize(st);
        return failed_stmt(c, SQLITE_NOMEM, NULL);
    }
    s->conn = c;
    s->sql = sql;
    s->st = st;
    c->cache[c->ncache++] = s;
    return s;
}

static void bound(struct db_stmt *s, int rc)
{
    if (rc != SQLITE_OK)
        keep_failure(s, rc, sqlite3_errmsg(s->conn->db));
}

void db_bind_text(struct db_stmt *s, int i, const char *text)
{
    if (s->st == NULL)
        return;
    bound(s, text ? sqlite3_bind_text(s->st, i, text, -1, SQLITE_TRANSIENT)
                  : sqlite3_bind_null(s->st, i));
}

void db_bind_i64(struct db_stmt *s, int i, int64_t v)
{
    if (s->st)
        bound(s, sqlite3_bind_int64(s->st, i, v));
}

void db_bind_double(struct db_stmt *s, int i, double v)
{
    if (s->st)
        bound(s, sqlite3_bind_double(s->st, i, v));
}

void db_bind_blob(struct db_stmt *s, int i, const void *p, size_t n)
{
    if (s->st == NULL)
        return;
    if (n > INT32_MAX) {
        keep_failure(s, SQLITE_TOOBIG, NULL);
        return;
    }
    bound(s, sqlite3_bind_blob(s->st, i, p, (int)n, SQLITE_TRANSIENT));
}

void db_bind_null(struct db_stmt *s, int i)
{
    if (s->st)
        bound(s, sqlite3_bind_null(s->st, i));
}

enum mg_code db_step(struct db_stmt *s, bool *row, struct mg_error *err)
{
    enum mg_code code;
    int rc;

    *row = false;
    if (s->rc != SQLITE_OK) {
        code = fail_rc(s->rc, s->msg, err);
        if (s->st)
            sqlite3_reset(s->st);
        return code;
    }
    rc = sqlite3_step(s->st);
    if (rc == SQLITE_ROW) {
        *row = true;
        return MG_OK;
    }
    if (rc == SQLITE_DONE) {
        sqlite3_reset(s->st);
        return MG_OK;
    }
    code = fail_rc(rc, sqlite3_errmsg(s->conn->db), err);
    sqlite3_reset(s->st);
    return code;
}

enum mg_code db_exec(struct db_stmt *s, struct mg_error *err)
{
    enum mg_code rc;
    bool row;

    while ((rc = db_step(s, &row, err)) == MG_OK && row)
        ;
    return rc;
}

void db_reset(struct db_stmt *s)
{
    if (s->st)
        sqlite3_reset(s->st);
}

int64_t db_changes(struct db_stmt *s)
{
    return sqlite3_changes64(s->conn->db);
}

bool db_col_null(struct db_stmt *s, int i)
{
    return sqlite3_column_type(s->st, i) == SQLITE_NULL;
}

int64_t db_col_i64(struct db_stmt *s, int i)
{
    return sqlite3_column_int64(s->st, i);
}

double db_col_double(struct db_stmt *s, int i)
{
    return sqlite3_column_double(s->st, i);
}

const char *db_col_text(struct db_stmt *s, int i)
{
    return (const char *)sqlite3_column_text(s->st, i);
}

const void *db_col_blob(struct db_stmt *s, int i)
{
    return sqlite3_column_blob(s->st, i);
}

size_t db_col_bytes(struct db_stmt *s, int i)
{
    return (size_t)sqlite3_column_bytes(s->st, i);
}

/* ---- the embedded database only ------------------------------------------- */

enum mg_code db_sqlite_snapshot(const char *path, const char *dest, struct mg_error *err)
{
    sqlite3 *src = NULL, *dst = NULL;
    sqlite3_backup *b;
    enum mg_code out = MG_OK;
    int rc;

    if (sqlite3_open_v2(path, &src, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK ||
        sqlite3_open_v2(dest, &dst, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) !=
            SQLITE_OK) {
        out = mg_fail(err, MG_EDB, NULL, "cannot open the database for backup: %s",
                      sqlite3_errmsg(dst ? dst : src));
        goto done;
    }
    sqlite3_busy_timeout(src, 10000);
    b = sqlite3_backup_init(dst, "main", src, "main");
    if (b == NULL) {
        out = mg_fail(err, MG_EDB, NULL, "backup failed: %s", sqlite3_errmsg(dst));
        goto done;
    }
    /* All pages in one step: a consistent snapshot even while writers go on. */
    rc = sqlite3_backup_step(b, -1);
    sqlite3_backup_finish(b);
    if (rc != SQLITE_DONE)
        out = mg_fail(err, MG_EDB, NULL, "backup failed: %s", sqlite3_errstr(rc));
done:
    sqlite3_close(src);
    sqlite3_close(dst);
    return out;
}
