/*
 * test_db_sqlite.c - the database layer (store/db.h) over SQLite: statements
 * are cached and never evicted under a caller, and every failure (preparing,
 * binding, stepping, committing) reaches the caller as an error at the step;
 * snapshots (db_snapshot) copy what is committed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "store/db.h"

#define TMP_TEMPLATE "/tmp/test_db_sqlite.XXXXXX"

struct fx {
    char dir[sizeof(TMP_TEMPLATE)];
    char path[sizeof(TMP_TEMPLATE) + 16];
    struct db_conn *c;
    struct mg_error err;
};

static int fx_setup(void **state)
{
    struct fx *fx = calloc(1, sizeof(*fx));
    struct db_open_options o = {0};

    if (fx == NULL)
        return -1;
    memcpy(fx->dir, TMP_TEMPLATE, sizeof(TMP_TEMPLATE));
    if (mkdtemp(fx->dir) == NULL) {
        free(fx);
        return -1;
    }
    snprintf(fx->path, sizeof(fx->path), "%s/t.db", fx->dir);
    o.path = fx->path;
    o.writer = true;
    if (db_open(&o, &fx->c, &fx->err) != MG_OK ||
        db_exec_script(fx->c,
                       "CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, "
                       "n INTEGER, x REAL, b BLOB)",
                       &fx->err) != MG_OK) {
        fprintf(stderr, "setup: %s\n", fx->err.message);
        return -1;
    }
    *state = fx;
    return 0;
}

static int fx_teardown(void **state)
{
    struct fx *fx = *state;
    char p[sizeof(fx->path) + 8];

    db_close(&fx->c);
    assert_null(fx->c);
    unlink(fx->path);
    snprintf(p, sizeof(p), "%s-wal", fx->path);
    unlink(p);
    snprintf(p, sizeof(p), "%s-shm", fx->path);
    unlink(p);
    rmdir(fx->dir);
    free(fx);
    return 0;
}

static void insert(struct fx *fx, const char *name, int64_t n)
{
    static const char sql[] = "INSERT INTO t (name, n) VALUES (?, ?)";
    struct db_stmt *s = db_prepare(fx->c, sql);

    db_bind_text(s, 1, name);
    db_bind_i64(s, 2, n);
    assert_int_equal(db_exec(s, &fx->err), MG_OK);
    assert_int_equal(db_changes(s), 1);
}

/* A connection keeps every statement it prepared: asking for the 65th, 200th
 * one never finalizes a statement a caller is still stepping. */
static void test_statement_cache_never_evicts(void **state)
{
    static char sqls[200][48];
    struct fx *fx = *state;
    struct db_stmt *outer, *s;
    bool row;

    for (int i = 0; i < 200; i++)
        snprintf(sqls[i], sizeof(sqls[i]), "SELECT %d UNION ALL SELECT %d", i, i + 1000);
    outer = db_prepare(fx->c, sqls[0]);
    assert_int_equal(db_step(outer, &row, &fx->err), MG_OK); /* mid-iteration */
    assert_true(row);
    for (int i = 1; i < 200; i++) {
        s = db_prepare(fx->c, sqls[i]);
        assert_int_equal(db_step(s, &row, &fx->err), MG_OK);
        assert_true(row);
        assert_int_equal(db_col_i64(s, 0), i);
        db_reset(s);
    }
    assert_int_equal(db_step(outer, &row, &fx->err), MG_OK); /* still the same statement */
    assert_true(row);
    assert_int_equal(db_col_i64(outer, 0), 1000);
    assert_int_equal(db_step(outer, &row, &fx->err), MG_OK);
    assert_false(row);
    assert_ptr_equal(db_prepare(fx->c, sqls[0]), outer); /* cached, not re-prepared */
}

/* SQL that does not prepare gives a handle anyway; its step says why, and a
 * later, good statement on the same connection is not affected. */
static void test_prepare_failure_reported_at_step(void **state)
{
    static const char bad[] = "SELEKT 1";
    static const char good[] = "SELECT 42";
    struct fx *fx = *state;
    struct db_stmt *s = db_prepare(fx->c, bad);
    bool row = true;

    assert_non_null(s);
    db_bind_text(s, 1, "ignored"); /* binding a failed statement is harmless */
    assert_int_equal(db_step(s, &row, &fx->err), MG_EDB);
    assert_false(row);
    assert_non_null(strstr(fx->err.message, "SELEKT"));
    assert_int_equal(db_exec(db_prepare(fx->c, bad), &fx->err), MG_EDB);
    s = db_prepare(fx->c, good);
    assert_int_equal(db_step(s, &row, &fx->err), MG_OK);
    assert_true(row);
    assert_int_equal(db_col_i64(s, 0), 42);
    db_reset(s);
}

/* A parameter index out of range is a bind failure: kept, reported by the step,
 * and the statement runs normally once prepared again. */
static void test_bind_failure_reported_at_step(void **state)
{
    static const char sql[] = "SELECT ?";
    struct fx *fx = *state;
    struct db_stmt *s = db_prepare(fx->c, sql);
    bool row;

    db_bind_i64(s, 7, 1);
    assert_int_equal(db_step(s, &row, &fx->err), MG_EDB);
    assert_false(row);
    s = db_prepare(fx->c, sql);
    db_bind_i64(s, 1, 5);
    assert_int_equal(db_step(s, &row, &fx->err), MG_OK);
    assert_true(row);
    assert_int_equal(db_col_i64(s, 0), 5);
    db_reset(s);
}

/* Every column type round-trips; NULL is told apart from 0 and "". */
static void test_columns(void **state)
{
    static const char ins[] = "INSERT INTO t (name, n, x, b) VALUES (?, ?, ?, ?)";
    static const char sel[] = "SELECT name, n, x, b FROM t WHERE name = ?";
    static const uint8_t blob[4] = {0, 1, 2, 255};
    struct fx *fx = *state;
    struct db_stmt *s = db_prepare(fx->c, ins);
    bool row;

    db_bind_text(s, 1, "a");
    db_bind_null(s, 2);
    db_bind_double(s, 3, 0.1);
    db_bind_blob(s, 4, blob, sizeof(blob));
    assert_int_equal(db_exec(s, &fx->err), MG_OK);
    s = db_prepare(fx->c, sel);
    db_bind_text(s, 1, "a");
    assert_int_equal(db_step(s, &row, &fx->err), MG_OK);
    assert_true(row);
    assert_string_equal(db_col_text(s, 0), "a");
    assert_int_equal(db_col_bytes(s, 0), 1);
    assert_true(db_col_null(s, 1));
    assert_false(db_col_null(s, 2));
    assert_true(db_col_double(s, 2) == 0.1);
    assert_int_equal(db_col_bytes(s, 3), sizeof(blob));
    assert_memory_equal(db_col_blob(s, 3), blob, sizeof(blob));
    assert_int_equal(db_step(s, &row, &fx->err), MG_OK);
    assert_false(row);
    /* NULL text binds NULL: the NOT NULL constraint says so. */
    s = db_prepare(fx->c, ins);
    db_bind_text(s, 1, NULL);
    assert_int_equal(db_exec(s, &fx->err), MG_ECONFLICT);
}

/* A constraint is MG_ECONFLICT naming what conflicted; nothing was written. */
static void test_constraint_is_conflict(void **state)
{
    static const char count[] = "SELECT count(*) FROM t";
    struct fx *fx = *state;
    struct db_stmt *s;
    bool row;

    insert(fx, "dup", 1);
    s = db_prepare(fx->c, "INSERT INTO t (name, n) VALUES ('dup', 2)");
    assert_int_equal(db_exec(s, &fx->err), MG_ECONFLICT);
    assert_non_null(strstr(fx->err.message, "t.name"));
    s = db_prepare(fx->c, count);
    assert_int_equal(db_step(s, &row, &fx->err), MG_OK);
    assert_int_equal(db_col_i64(s, 0), 1);
    db_reset(s);
}

/* RETURNING gives the row it wrote, and the write holds once stepped to the end. */
static void test_returning(void **state)
{
    static const char sql[] = "UPDATE t SET n = n + 1 WHERE name = ? RETURNING n";
    struct fx *fx = *state;
    struct db_stmt *s;
    bool row;

    insert(fx, "c", 41);
    s = db_prepare(fx->c, sql);
    db_bind_text(s, 1, "c");
    assert_int_equal(db_step(s, &row, &fx->err), MG_OK);
    assert_true(row);
    assert_int_equal(db_col_i64(s, 0), 42);
    assert_int_equal(db_exec(s, &fx->err), MG_OK);
    s = db_prepare(fx->c, sql);
    db_bind_text(s, 1, "c");
    assert_int_equal(db_step(s, &row, &fx->err), MG_OK);
    assert_int_equal(db_col_i64(s, 0), 43);
    assert_int_equal(db_exec(s, &fx->err), MG_OK);
}

/* Rollback undoes; commit keeps, even with a read left mid-iteration. */
static void test_transactions(void **state)
{
    static const char all[] = "SELECT name FROM t ORDER BY name";
    struct fx *fx = *state;
    struct db_stmt *s;
    bool row;

    assert_int_equal(db_begin(fx->c, DB_WRITE, &fx->err), MG_OK);
    insert(fx, "gone", 1);
    db_rollback(fx->c);
    db_rollback(fx->c); /* none open: nothing happens */
    s = db_prepare(fx->c, all);
    assert_int_equal(db_step(s, &row, &fx->err), MG_OK);
    assert_false(row);

    assert_int_equal(db_begin(fx->c, DB_WRITE, &fx->err), MG_OK);
    insert(fx, "kept", 1);
    insert(fx, "kept2", 2);
    s = db_prepare(fx->c, all);
    assert_int_equal(db_step(s, &row, &fx->err), MG_OK); /* left stepping */
    assert_true(row);
    assert_int_equal(db_commit(fx->c, &fx->err), MG_OK);
    assert_int_equal(db_commit(fx->c, &fx->err), MG_OK); /* none open: nothing happens */
    s = db_prepare(fx->c, all);
    assert_int_equal(db_step(s, &row, &fx->err), MG_OK);
    assert_string_equal(db_col_text(s, 0), "kept");
    db_reset(s);
}

/* A second writer's BEGIN IMMEDIATE waits out the busy timeout, then is
 * MG_EUNAVAIL ("busy"), never a hang or a wrong answer. */
static void test_busy_is_unavailable(void **state)
{
    struct fx *fx = *state;
    struct db_open_options o = {.path = fx->path, .writer = true, .busy_timeout_ms = 50};
    struct db_conn *other = NULL;

    assert_int_equal(db_open(&o, &other, &fx->err), MG_OK);
    assert_int_equal(db_begin(fx->c, DB_WRITE, &fx->err), MG_OK);
    assert_int_equal(db_begin(other, DB_WRITE, &fx->err), MG_EUNAVAIL);
    db_rollback(fx->c);
    assert_int_equal(db_begin(other, DB_WRITE, &fx->err), MG_OK);
    db_rollback(other);
    db_close(&other);
}

/* Opening a database that cannot be opened names it. */
static void test_open_failure(void **state)
{
    struct fx *fx = *state;
    struct db_open_options o = {.path = "/nonexistent/dir/x.db", .writer = true};
    struct db_conn *c = (struct db_conn *)1;

    assert_int_equal(db_open(&o, &c, &fx->err), MG_EDB);
    assert_null(c);
    assert_non_null(strstr(fx->err.message, "/nonexistent/dir/x.db"));
}

/* db_snapshot copies what is committed while a writer goes on; the copy opens as a
 * database of its own, and db_file_remove takes it and its side files away. A server's
 * database is not copied into a file. */
static void test_snapshot(void **state)
{
    struct fx *fx = *state;
    char snap[sizeof(fx->dir) + 16], side[sizeof(snap) + 8];
    struct db_open_options src = {.path = fx->path}, o = {.path = snap};
    struct db_open_options pg = {.url = "postgresql://127.0.0.1:1/none"};
    struct db_conn *c = NULL;
    struct db_stmt *s;
    bool row;

    snprintf(snap, sizeof(snap), "%s/snap.db", fx->dir);
    insert(fx, "a", 1);
    insert(fx, "b", 2);
    assert_int_equal(db_begin(fx->c, DB_WRITE, &fx->err), MG_OK);
    insert(fx, "uncommitted", 3);
    assert_int_equal(db_snapshot(&src, snap, &fx->err), MG_OK);
    db_rollback(fx->c);

    assert_int_equal(db_open(&o, &c, &fx->err), MG_OK);
    s = db_prepare(c, "SELECT count(*), group_concat(name) FROM (SELECT name FROM t ORDER BY id)");
    assert_int_equal(db_step(s, &row, &fx->err), MG_OK);
    assert_true(row);
    assert_int_equal(db_col_i64(s, 0), 2);
    assert_string_equal(db_col_text(s, 1), "a,b");
    db_reset(s);
    db_close(&c);

    db_file_remove(snap);
    assert_int_not_equal(access(snap, F_OK), 0);
    snprintf(side, sizeof(side), "%s-wal", snap);
    assert_int_not_equal(access(side, F_OK), 0);
    snprintf(side, sizeof(side), "%s-shm", snap);
    assert_int_not_equal(access(side, F_OK), 0);
    db_file_remove(snap); /* nothing there: nothing to do */

    assert_int_equal(db_snapshot(&pg, snap, &fx->err), MG_EINVAL);
    assert_non_null(strstr(fx->err.message, "pg_dump"));
    assert_int_not_equal(access(snap, F_OK), 0);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, fx_setup, fx_teardown)
    const struct CMUnitTest tests[] = {
        T(test_statement_cache_never_evicts),
        T(test_prepare_failure_reported_at_step),
        T(test_bind_failure_reported_at_step),
        T(test_columns),
        T(test_constraint_is_conflict),
        T(test_returning),
        T(test_transactions),
        T(test_busy_is_unavailable),
        T(test_open_failure),
        T(test_snapshot),
    };
#undef T
    return cmocka_run_group_tests(tests, NULL, NULL);
}
