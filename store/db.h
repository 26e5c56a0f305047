/*
 * db.h - the thin database layer under store/: connections, transactions and
 * prepared statements, with nothing of any one engine in its types. The store's
 * files write their domain SQL against this; db_sqlite.c implements it over
 * SQLite (and, for several replicas, a libpq implementation sits beside it).
 * Nothing outside store/ includes this.
 *
 * Errors cannot be lost: a statement has exactly one place where its failure
 * shows, the db_step or db_exec that runs it, and both must be checked (the
 * compiler refuses to build code that drops their result). db_prepare never
 * fails on its own; a failure to prepare or to bind is kept in the statement
 * and reported by the step. So the usual shapes are:
 *
 *     s = db_prepare(c, sql);                 one statement, run to the end
 *     db_bind_i64(s, 1, id);
 *     if ((rc = db_exec(s, err)) != MG_OK)
 *         goto out;
 *
 *     while ((rc = db_step(s, &row, err)) == MG_OK && row)   rows
 *         ... db_col_text(s, 0) ...
 *     if (rc != MG_OK)
 *         goto out;
 *
 * Thread safety: a connection and its statements belong to one thread at a
 * time (the store lends connections out; see store_int.h).
 */
#ifndef STORE_DB_H
#define STORE_DB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../base/mg.h"

#define DB_MUST_CHECK __attribute__((warn_unused_result))

struct db_conn;
struct db_stmt;

/* ---- connections ---------------------------------------------------------- */

enum db_dialect { DB_SQLITE, DB_POSTGRES };

struct db_open_options {
    const char *path;     /* SQLite: the database file */
    const char *url;      /* PostgreSQL: a libpq URI or conninfo; when set, path is unused */
    bool writer;          /* SQLite: a read-write connection (creates the file) */
    bool sync_normal;     /* SQLite writer: synchronous=NORMAL instead of FULL */
    int busy_timeout_ms;  /* SQLite: how long to wait for a lock */
    const char *app_name; /* PostgreSQL: application_name (pg_stat_activity); NULL: libpq's */
};

/* Open a connection; *out is NEW (db_close). On failure *out is NULL and err
 * says which database and why (never a password). */
enum mg_code db_open(const struct db_open_options *opt, struct db_conn **out,
                     struct mg_error *err) DB_MUST_CHECK;

/* Finalize every cached statement and close. Sets *c to NULL; NULL is fine. */
void db_close(struct db_conn **c);

/* A pointer the connection carries for its owner (the store it belongs to). */
void db_set_context(struct db_conn *c, void *ctx);
void *db_context(struct db_conn *c);

/* Which SQL the connection speaks. Where the engines spell a statement
 * differently the store keeps both spellings side by side and picks one with
 * DB_SQL (each spelling a static string, so the statement cache keys on it). */
enum db_dialect db_dialect(const struct db_conn *c);
#define DB_SQL(c, sqlite_text, pg_text) (db_dialect(c) == DB_POSTGRES ? (pg_text) : (sqlite_text))

/* Run SQL text that may hold several statements and takes no parameters
 * (migrations, pragmas). Not cached. */
enum mg_code db_exec_script(struct db_conn *c, const char *sql, struct mg_error *err) DB_MUST_CHECK;

/* ---- transactions --------------------------------------------------------- */

/* A read transaction sees one consistent snapshot. A write transaction takes
 * the database's one write lock at its start (SQLite: BEGIN IMMEDIATE;
 * PostgreSQL: a transaction-scoped advisory lock every writer of every
 * process takes), so what it reads stays true until it commits. On
 * PostgreSQL a lost connection is re-established here, outside any
 * transaction; failing that, MG_EUNAVAIL. */
enum db_txn {
    DB_READ,
    DB_WRITE,
    /* No transaction: each statement is its own read, with its own snapshot, so it suits a
     * read of one statement (on PostgreSQL, two round trips fewer: no BEGIN, no COMMIT). A
     * lost connection is re-established here as for DB_READ, and a first statement that finds
     * the session gone (a restart ends idle sessions) runs once more on a new one. */
    DB_READ_ONE
};

enum mg_code db_begin(struct db_conn *c, enum db_txn kind, struct mg_error *err) DB_MUST_CHECK;

/* Commit. Statements still open on the connection are ended first (a read
 * left stepping must not hold its snapshot past the end of the transaction).
 * On failure the transaction is rolled back. */
enum mg_code db_commit(struct db_conn *c, struct mg_error *err) DB_MUST_CHECK;

/* Roll back if a transaction is open; otherwise nothing. Never fails in a way
 * the caller could act on. */
void db_rollback(struct db_conn *c);

/* Whether a transaction is open on c (not so under DB_READ_ONE): for a read of several
 * statements that must share one snapshot to check that they do. */
bool db_in_transaction(struct db_conn *c);

/* ---- statements ----------------------------------------------------------- */

/*
 * The prepared statement for sql on c, reset and with no bindings. sql must be
 * a string that outlives the connection (a static const array): statements are
 * cached per connection, keyed by the text's address. Never NULL: when
 * preparing fails, the handle carries the failure and the step reports it. The
 * handle is BORROWED from the connection; a later db_prepare of the same sql on
 * the same connection resets it.
 */
struct db_stmt *db_prepare(struct db_conn *c, const char *sql);

/* Bind parameter i (1-based). A failure is kept and reported by the step. */
void db_bind_text(struct db_stmt *s, int i, const char *text); /* NULL binds NULL */
void db_bind_i64(struct db_stmt *s, int i, int64_t v);
void db_bind_double(struct db_stmt *s, int i, double v);
void db_bind_blob(struct db_stmt *s, int i, const void *p, size_t n);
void db_bind_null(struct db_stmt *s, int i);

/*
 * Run to the next row. MG_OK with *row true: the row's columns can be read
 * until the next step or reset. MG_OK with *row false: no more rows; the
 * statement is reset. Anything else: the failure (of preparing, binding or
 * stepping) is in err, *row is false and the statement is reset. Constraint
 * violations are MG_ECONFLICT, a full disk MG_ENOSPC, a busy database
 * MG_EUNAVAIL, everything else MG_EDB.
 */
enum mg_code db_step(struct db_stmt *s, bool *row, struct mg_error *err) DB_MUST_CHECK;

/* Run a statement whose rows are not wanted (INSERT, UPDATE, DELETE) to its
 * end, then reset it. */
enum mg_code db_exec(struct db_stmt *s, struct mg_error *err) DB_MUST_CHECK;

/* Stop reading rows before the end (the rest are not wanted). */
void db_reset(struct db_stmt *s);

/* Rows changed by the last INSERT, UPDATE or DELETE run on the statement's
 * connection. */
int64_t db_changes(struct db_stmt *s);

/* The shape of a result (for copying whole tables): how many columns, each
 * one's name (BORROWED), and the type of a value in the current row. */
enum db_type { DB_NULL, DB_INTEGER, DB_FLOAT, DB_TEXT, DB_BLOB };
int db_col_count(struct db_stmt *s);
const char *db_col_name(struct db_stmt *s, int i);
enum db_type db_col_type(struct db_stmt *s, int i);

/* Columns of the current row, 0-based. Text and blobs are BORROWED, valid
 * until the next step or reset; text is NUL-terminated; NULL for SQL NULL. */
bool db_col_null(struct db_stmt *s, int i);
int64_t db_col_i64(struct db_stmt *s, int i);
double db_col_double(struct db_stmt *s, int i);
const char *db_col_text(struct db_stmt *s, int i);
const void *db_col_blob(struct db_stmt *s, int i);
size_t db_col_bytes(struct db_stmt *s, int i);

/* ---- notifications (PostgreSQL) ------------------------------------------- */

/* Start listening on channel (a plain identifier) on this connection. */
enum mg_code db_listen(struct db_conn *c, const char *channel, struct mg_error *err) DB_MUST_CHECK;

/* One notification's payload (BORROWED: valid during the call only). */
typedef void (*db_notify_fn)(void *arg, const char *payload);

/* Wait up to timeout_ms for notifications on a listening connection and pass
 * each one that came (all pending are consumed) to fn, in the order they were
 * sent. A lost connection fails the call; the next call re-establishes it and
 * listens again (db_session then tells a new session: what was sent meanwhile
 * is lost). SQLite: sleeps. */
enum mg_code db_wait_notify(struct db_conn *c, const char *channel, int timeout_ms, db_notify_fn fn,
                            void *arg, struct mg_error *err) DB_MUST_CHECK;

/* Which session with its server the connection is on: a number that changes
 * whenever the connection is re-established, 0 while it is down (PostgreSQL).
 * SQLite: always 1. */
unsigned db_session(const struct db_conn *c);

/* End the connection's session now (a listener that stopped hearing): the next
 * transaction or wait starts a new one. SQLite: nothing. */
void db_disconnect(struct db_conn *c);

/* ---- snapshots -------------------------------------------------------------- */

/* Copy the database opt names into the file dest (which may exist, empty), as one
 * consistent snapshot taken while writers go on; dest then opens with db_open as a
 * path. The embedded database copies itself (SQLite's online backup API); a server's
 * database cannot be copied into a file here (PostgreSQL: MG_EINVAL, back it up with
 * pg_dump). */
enum mg_code db_snapshot(const struct db_open_options *opt, const char *dest,
                         struct mg_error *err) DB_MUST_CHECK;

/* Remove the database file at path (a snapshot, or an embedded database nothing has
 * open) and the side files its engine keeps beside it; what is not there is skipped. */
void db_file_remove(const char *path);

#endif
