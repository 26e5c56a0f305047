/*
 * db_int.h - what the two implementations of the database layer (db.h) share:
 * each connection and statement starts with a pointer to its engine's table
 * of operations, and db.c calls through it. Only db.c, db_sqlite.c and
 * db_pg.c include this.
 */
#ifndef STORE_DB_INT_H
#define STORE_DB_INT_H

#include "db.h"

struct db_ops {
    enum db_dialect dialect;
    void (*close)(struct db_conn *c);
    enum mg_code (*exec_script)(struct db_conn *c, const char *sql, struct mg_error *err);
    enum mg_code (*begin)(struct db_conn *c, enum db_txn kind, struct mg_error *err);
    enum mg_code (*commit)(struct db_conn *c, struct mg_error *err);
    void (*rollback)(struct db_conn *c);
    bool (*in_transaction)(struct db_conn *c);
    struct db_stmt *(*prepare)(struct db_conn *c, const char *sql);
    void (*bind_text)(struct db_stmt *s, int i, const char *text);
    void (*bind_i64)(struct db_stmt *s, int i, int64_t v);
    void (*bind_double)(struct db_stmt *s, int i, double v);
    void (*bind_blob)(struct db_stmt *s, int i, const void *p, size_t n);
    void (*bind_null)(struct db_stmt *s, int i);
    enum mg_code (*step)(struct db_stmt *s, bool *row, struct mg_error *err);
    void (*reset)(struct db_stmt *s);
    int64_t (*changes)(struct db_stmt *s);
    bool (*col_null)(struct db_stmt *s, int i);
    int64_t (*col_i64)(struct db_stmt *s, int i);
    double (*col_double)(struct db_stmt *s, int i);
    const char *(*col_text)(struct db_stmt *s, int i);
    const void *(*col_blob)(struct db_stmt *s, int i);
    size_t (*col_bytes)(struct db_stmt *s, int i);
    int (*col_count)(struct db_stmt *s);
    const char *(*col_name)(struct db_stmt *s, int i);
    enum db_type (*col_type)(struct db_stmt *s, int i);
    enum mg_code (*listen)(struct db_conn *c, const char *channel, struct mg_error *err);
    enum mg_code (*wait_notify)(struct db_conn *c, const char *channel, int timeout_ms,
                                db_notify_fn fn, void *arg, struct mg_error *err);
    unsigned (*session)(const struct db_conn *c);
    void (*disconnect)(struct db_conn *c);
};

/* The first member of every engine's connection and statement. */
struct db_conn {
    const struct db_ops *ops;
    void *ctx; /* db_set_context */
};

struct db_stmt {
    struct db_conn *conn;
};

enum mg_code db_sqlite_open(const struct db_open_options *opt, struct db_conn **out,
                            struct mg_error *err);
enum mg_code db_pg_open(const struct db_open_options *opt, struct db_conn **out,
                        struct mg_error *err);
/* db_snapshot, by engine (chosen as db_open chooses). */
enum mg_code db_sqlite_snapshot(const struct db_open_options *opt, const char *dest,
                                struct mg_error *err);
enum mg_code db_pg_snapshot(const struct db_open_options *opt, const char *dest,
                            struct mg_error *err);
void db_sqlite_file_remove(const char *path);

#endif
