/*
 * db.c - the database layer's entry points: pick the engine at open, then
 * hand every call to the connection's own table of operations (db_int.h).
 */
#include "db_int.h"

#include <stddef.h>

enum mg_code db_open(const struct db_open_options *opt, struct db_conn **out, struct mg_error *err)
{
    return opt->url ? db_pg_open(opt, out, err) : db_sqlite_open(opt, out, err);
}

enum mg_code db_snapshot(const struct db_open_options *opt, const char *dest, struct mg_error *err)
{
    return opt->url ? db_pg_snapshot(opt, dest, err) : db_sqlite_snapshot(opt, dest, err);
}

void db_file_remove(const char *path)
{
    db_sqlite_file_remove(path); /* only the embedded database lives in files */
}

void db_close(struct db_conn **c)
{
    if (*c == NULL)
        return;
    (*c)->ops->close(*c);
    *c = NULL;
}

void db_set_context(struct db_conn *c, void *ctx)
{
    c->ctx = ctx;
}

void *db_context(struct db_conn *c)
{
    return c->ctx;
}

enum db_dialect db_dialect(const struct db_conn *c)
{
    return c->ops->dialect;
}

enum mg_code db_exec_script(struct db_conn *c, const char *sql, struct mg_error *err)
{
    return c->ops->exec_script(c, sql, err);
}

enum mg_code db_begin(struct db_conn *c, enum db_txn kind, struct mg_error *err)
{
    return c->ops->begin(c, kind, err);
}

enum mg_code db_commit(struct db_conn *c, struct mg_error *err)
{
    return c->ops->commit(c, err);
}

void db_rollback(struct db_conn *c)
{
    c->ops->rollback(c);
}

bool db_in_transaction(struct db_conn *c)
{
    return c->ops->in_transaction(c);
}

struct db_stmt *db_prepare(struct db_conn *c, const char *sql)
{
    return c->ops->prepare(c, sql);
}

void db_bind_text(struct db_stmt *s, int i, const char *text)
{
    s->conn->ops->bind_text(s, i, text);
}

void db_bind_i64(struct db_stmt *s, int i, int64_t v)
{
    s->conn->ops->bind_i64(s, i, v);
}

void db_bind_double(struct db_stmt *s, int i, double v)
{
    s->conn->ops->bind_double(s, i, v);
}

void db_bind_blob(struct db_stmt *s, int i, const void *p, size_t n)
{
    s->conn->ops->bind_blob(s, i, p, n);
}

void db_bind_null(struct db_stmt *s, int i)
{
    s->conn->ops->bind_null(s, i);
}

enum mg_code db_step(struct db_stmt *s, bool *row, struct mg_error *err)
{
    return s->conn->ops->step(s, row, err);
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
    s->conn->ops->reset(s);
}

int64_t db_changes(struct db_stmt *s)
{
    return s->conn->ops->changes(s);
}

bool db_col_null(struct db_stmt *s, int i)
{
    return s->conn->ops->col_null(s, i);
}

int64_t db_col_i64(struct db_stmt *s, int i)
{
    return s->conn->ops->col_i64(s, i);
}

double db_col_double(struct db_stmt *s, int i)
{
    return s->conn->ops->col_double(s, i);
}

const char *db_col_text(struct db_stmt *s, int i)
{
    return s->conn->ops->col_text(s, i);
}

const void *db_col_blob(struct db_stmt *s, int i)
{
    return s->conn->ops->col_blob(s, i);
}

size_t db_col_bytes(struct db_stmt *s, int i)
{
    return s->conn->ops->col_bytes(s, i);
}

enum mg_code db_listen(struct db_conn *c, const char *channel, struct mg_error *err)
{
    return c->ops->listen(c, channel, err);
}

enum mg_code db_wait_notify(struct db_conn *c, const char *channel, int timeout_ms, db_notify_fn fn,
                            void *arg, struct mg_error *err)
{
    return c->ops->wait_notify(c, channel, timeout_ms, fn, arg, err);
}

unsigned db_session(const struct db_conn *c)
{
    return c->ops->session(c);
}

void db_disconnect(struct db_conn *c)
{
    c->ops->disconnect(c);
}

int db_col_count(struct db_stmt *s)
{
    return s->conn->ops->col_count(s);
}

const char *db_col_name(struct db_stmt *s, int i)
{
    return s->conn->ops->col_name(s, i);
}

enum db_type db_col_type(struct db_stmt *s, int i)
{
    return s->conn->ops->col_type(s, i);
}
