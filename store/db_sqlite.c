/*
 * db_sqlite.c - the database layer (db.h) over SQLite: one sqlite3 handle per
 * connection, statements prepared once and cached by the address of their
 * text, failures kept in the statement until its step reports them.
 */
#include "db_int.h"

#include <limits.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct lite_stmt {
    struct db_stmt base; /* base.conn: the lite_conn */
    const char *sql;
    sqlite3_stmt *st; /* NULL when preparing failed */
    int rc;           /* first failure of prepare or bind since db_prepare, else SQLITE_OK */
    char msg[256];    /* its message, copied: SQLite's own is overwritten by the next call */
};

struct lite_conn {
    struct db_conn base;
    sqlite3 *db;
    struct lite_stmt **cache; /* one allocation each: handles stay put when the array grows */
    unsigned ncache, capcache;
    struct lite_stmt failed; /* handed out when a statement cannot be prepared or cached */
};

static const struct db_ops lite_ops;

static struct lite_conn *LC(struct db_conn *c)
{
    return (struct lite_conn *)c;
}

static struct lite_stmt *LS(struct db_stmt *s)
{
    return (struct lite_stmt *)s;
}

static sqlite3 *DB(struct lite_stmt *s)
{
    return LC(s->base.conn)->db;
}

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

static void keep_failure(struct lite_stmt *s, int rc, const char *msg)
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

static void lite_close(struct db_conn *base)
{
    struct lite_conn *c = LC(base);
    unsigned i;

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
}

enum mg_code db_sqlite_open(const struct db_open_options *opt, struct db_conn **out,
                            struct mg_error *err)
{
    int flags = opt->writer ? SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE : SQLITE_OPEN_READONLY;
    struct lite_conn *c = calloc(1, sizeof(*c));
    enum mg_code rc;
    int r;

    *out = NULL;
    if (c == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    c->base.ops = &lite_ops;
    c->failed.base.conn = &c->base;
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
    *out = &c->base;
    return MG_OK;
fail:
    lite_close(&c->base);
    return rc;
}

static enum mg_code lite_exec_script(struct db_conn *c, const char *sql, struct mg_error *err)
{
    return exec_text(LC(c)->db, sql, err);
}

/* ---- transactions --------------------------------------------------------- */

static enum mg_code lite_begin(struct db_conn *c, enum db_txn kind, struct mg_error *err)
{
    static const char sql_read[] = "BEGIN";
    static const char sql_write[] = "BEGIN IMMEDIATE";

    if (kind == DB_READ_ONE)
        return MG_OK; /* each statement reads in a transaction of its own */
    /* Cached statements: sqlite3_exec would parse "BEGIN" on every read. */
    return db_exec(db_prepare(c, kind == DB_WRITE ? sql_write : sql_read), err);
}

/* A statement left stepping would keep the connection's snapshot past the end
 * of its transaction, and the next borrower would read old data. */
static void end_statements(sqlite3 *db)
{
    sqlite3_stmt *s;

    for (s = sqlite3_next_stmt(db, NULL); s; s = sqlite3_next_stmt(db, s)) {
        if (sqlite3_stmt_busy(s))
            sqlite3_reset(s);
    }
}

static void lite_rollback(struct db_conn *c)
{
    if (sqlite3_get_autocommit(LC(c)->db))
        return;
    end_statements(LC(c)->db);
    (void)exec_text(LC(c)->db, "ROLLBACK", NULL);
}

static enum mg_code lite_commit(struct db_conn *c, struct mg_error *err)
{
    static const char sql_commit[] = "COMMIT";
    enum mg_code rc;

    end_statements(LC(c)->db);
    if (sqlite3_get_autocommit(LC(c)->db))
        return MG_OK; /* no transaction (DB_READ_ONE): a statement left stepping is ended */
    rc = db_exec(db_prepare(c, sql_commit), err);
    if (rc != MG_OK)
        lite_rollback(c);
    return rc;
}

static bool lite_in_transaction(struct db_conn *c)
{
    return !sqlite3_get_autocommit(LC(c)->db);
}

/* ---- statements ----------------------------------------------------------- */

static struct db_stmt *failed_stmt(struct lite_conn *c, int rc, const char *msg)
{
    c->failed.rc = SQLITE_OK;
    c->failed.st = NULL;
    keep_failure(&c->failed, rc, msg);
    return &c->failed.base;
}

static struct db_stmt *lite_prepare(struct db_conn *base, const char *sql)
{
    struct lite_conn *c = LC(base);
    struct lite_stmt *s;
    sqlite3_stmt *st = NULL;
    unsigned i;
    int rc;

    for (i = 0; i < c->ncache; i++) {
        s = c->cache[i];
        if (s->sql == sql) {
            sqlite3_reset(s->st);
            sqlite3_clear_bindings(s->st);
            s->rc = SQLITE_OK;
            return &s->base;
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
    s->base.conn = base;
    s->sql = sql;
    s->st = st;
    c->cache[c->ncache++] = s;
    return &s->base;
}

static void bound(struct lite_stmt *s, int rc)
{
    if (rc != SQLITE_OK)
        keep_failure(s, rc, sqlite3_errmsg(DB(s)));
}

static void lite_bind_text(struct db_stmt *base, int i, const char *text)
{
    struct lite_stmt *s = LS(base);

    if (s->st == NULL)
        return;
    bound(s, text ? sqlite3_bind_text(s->st, i, text, -1, SQLITE_TRANSIENT)
                  : sqlite3_bind_null(s->st, i));
}

static void lite_bind_i64(struct db_stmt *base, int i, int64_t v)
{
    struct lite_stmt *s = LS(base);

    if (s->st)
        bound(s, sqlite3_bind_int64(s->st, i, v));
}

static void lite_bind_double(struct db_stmt *base, int i, double v)
{
    struct lite_stmt *s = LS(base);

    if (s->st)
        bound(s, sqlite3_bind_double(s->st, i, v));
}

static void lite_bind_blob(struct db_stmt *base, int i, const void *p, size_t n)
{
    struct lite_stmt *s = LS(base);

    if (s->st == NULL)
        return;
    if (n > INT32_MAX) {
        keep_failure(s, SQLITE_TOOBIG, NULL);
        return;
    }
    bound(s, sqlite3_bind_blob(s->st, i, p, (int)n, SQLITE_TRANSIENT));
}

static void lite_bind_null(struct db_stmt *base, int i)
{
    struct lite_stmt *s = LS(base);

    if (s->st)
        bound(s, sqlite3_bind_null(s->st, i));
}

static enum mg_code lite_step(struct db_stmt *base, bool *row, struct mg_error *err)
{
    struct lite_stmt *s = LS(base);
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
    code = fail_rc(rc, sqlite3_errmsg(DB(s)), err);
    sqlite3_reset(s->st);
    return code;
}

static void lite_reset(struct db_stmt *base)
{
    if (LS(base)->st)
        sqlite3_reset(LS(base)->st);
}

static int64_t lite_changes(struct db_stmt *base)
{
    return sqlite3_changes64(DB(LS(base)));
}

static bool lite_col_null(struct db_stmt *s, int i)
{
    return sqlite3_column_type(LS(s)->st, i) == SQLITE_NULL;
}

static int64_t lite_col_i64(struct db_stmt *s, int i)
{
    return sqlite3_column_int64(LS(s)->st, i);
}

static double lite_col_double(struct db_stmt *s, int i)
{
    return sqlite3_column_double(LS(s)->st, i);
}

static const char *lite_col_text(struct db_stmt *s, int i)
{
    return (const char *)sqlite3_column_text(LS(s)->st, i);
}

static const void *lite_col_blob(struct db_stmt *s, int i)
{
    return sqlite3_column_blob(LS(s)->st, i);
}

static size_t lite_col_bytes(struct db_stmt *s, int i)
{
    return (size_t)sqlite3_column_bytes(LS(s)->st, i);
}

static int lite_col_count(struct db_stmt *s)
{
    return LS(s)->st ? sqlite3_column_count(LS(s)->st) : 0;
}

static const char *lite_col_name(struct db_stmt *s, int i)
{
    return sqlite3_column_name(LS(s)->st, i);
}

static enum db_type lite_col_type(struct db_stmt *s, int i)
{
    switch (sqlite3_column_type(LS(s)->st, i)) {
    case SQLITE_INTEGER:
        return DB_INTEGER;
    case SQLITE_FLOAT:
        return DB_FLOAT;
    case SQLITE_TEXT:
        return DB_TEXT;
    case SQLITE_BLOB:
        return DB_BLOB;
    default:
        return DB_NULL;
    }
}

static enum mg_code lite_listen(struct db_conn *c, const char *channel, struct mg_error *err)
{
    (void)c;
    (void)channel;
    (void)err;
    return MG_OK;
}

static enum mg_code lite_wait_notify(struct db_conn *c, const char *channel, int timeout_ms,
                                     db_notify_fn fn, void *arg, struct mg_error *err)
{
    struct timespec ts = {timeout_ms / 1000, (long)(timeout_ms % 1000) * 1000000L};

    (void)c;
    (void)channel;
    (void)fn;
    (void)arg;
    (void)err;
    nanosleep(&ts, NULL);
    return MG_OK;
}

static unsigned lite_session(const struct db_conn *c)
{
    (void)c;
    return 1;
}

static void lite_disconnect(struct db_conn *c)
{
    (void)c;
}

static const struct db_ops lite_ops = {
    .dialect = DB_SQLITE,
    .close = lite_close,
    .exec_script = lite_exec_script,
    .begin = lite_begin,
    .commit = lite_commit,
    .rollback = lite_rollback,
    .in_transaction = lite_in_transaction,
    .prepare = lite_prepare,
    .bind_text = lite_bind_text,
    .bind_i64 = lite_bind_i64,
    .bind_double = lite_bind_double,
    .bind_blob = lite_bind_blob,
    .bind_null = lite_bind_null,
    .step = lite_step,
    .reset = lite_reset,
    .changes = lite_changes,
    .col_null = lite_col_null,
    .col_i64 = lite_col_i64,
    .col_double = lite_col_double,
    .col_text = lite_col_text,
    .col_blob = lite_col_blob,
    .col_bytes = lite_col_bytes,
    .col_count = lite_col_count,
    .col_name = lite_col_name,
    .col_type = lite_col_type,
    .listen = lite_listen,
    .wait_notify = lite_wait_notify,
    .session = lite_session,
    .disconnect = lite_disconnect,
};

/* ---- snapshots (db_snapshot) ------------------------------------------------- */

enum mg_code db_sqlite_snapshot(const struct db_open_options *opt, const char *dest,
                                struct mg_error *err)
{
    const char *path = opt->path;
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

void db_sqlite_file_remove(const char *path)
{
    static const char *const sides[] = {"", "-wal", "-shm"};
    char p[PATH_MAX + 8];

    for (size_t i = 0; i < sizeof(sides) / sizeof(sides[0]); i++) {
        snprintf(p, sizeof(p), "%s%s", path, sides[i]);
        unlink(p);
    }
}
