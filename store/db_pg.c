/*
 * db_pg.c - the database layer (db.h) over PostgreSQL with libpq.
 *
 * The store's SQL is written with SQLite's placeholders (? and ?N); each
 * statement is rewritten once to $N, prepared on its connection at its first
 * run (with the types of that run's parameters, so "?1 IS NULL" prepares),
 * and executed with text parameters (bytea in binary). A result is read
 * whole and stepped through row by row. Write transactions take one advisory
 * lock that every writer of every process takes, so, as with SQLite's single
 * writer, what a write transaction reads holds until it commits. A lost
 * connection is re-established at the next transaction's start and its
 * statements prepared again.
 */
#include "db_int.h"

#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

/* pg_type OIDs (catalog/pg_type_d.h, stable across releases). */
#define OID_BYTEA 17
#define OID_INT8 20
#define OID_TEXT 25
#define OID_FLOAT8 701

/* How long a session may sit idle inside a transaction (connect_now). */
#define DB_PG_IDLE_TXN_MS "5000"

/* The advisory lock every write transaction holds ("mgwr"). */
#define WRITE_LOCK_KEY "1835497330"

struct pg_stmt {
    struct db_stmt base;
    const char *sql;   /* the cache key: the caller's static text */
    char *text;        /* sql with $N placeholders */
    int nparams;       /* highest $N in text */
    char name[24];     /* prepared statement name on this connection */
    unsigned prepared; /* connection generation it was prepared in; 0: not yet */
    char **values;     /* per parameter: NULL for SQL NULL */
    int *lengths, *formats;
    unsigned *types;
    PGresult *res;
    int row, nrows;      /* row: the current row, -1 before the first */
    bool ran;            /* executed since the last reset */
    unsigned char *blob; /* a decoded bytea column, freed at the next step or reset */
    size_t blob_len;
    enum mg_code fail; /* first failure of rewrite or bind since db_prepare */
    char msg[256];
};

struct pg_conn {
    struct db_conn base;
    PGconn *pg;
    char *conninfo;
    char app_name[64]; /* "" when not set */
    char where[160];   /* "database D on H" for messages: never the password */
    struct pg_stmt **cache;
    unsigned ncache, capcache, next_name;
    unsigned generation; /* bumped when the connection is re-established */
    int64_t last_changes;
    struct pg_stmt failed;
    bool lost;     /* the last failure said the session is gone (class 08, 57P, or no answer) */
    bool read_one; /* DB_READ_ONE: statements run outside a transaction and are reads */
};

static const struct db_ops pg_ops;

static struct pg_conn *PC(struct db_conn *c)
{
    return (struct pg_conn *)c;
}

static struct pg_stmt *PS(struct db_stmt *s)
{
    return (struct pg_stmt *)s;
}

/* "database D on H" from the connection's own settings. */
static void describe(struct pg_conn *c)
{
    const char *db = c->pg ? PQdb(c->pg) : NULL, *host = c->pg ? PQhost(c->pg) : NULL;
    const char *port = c->pg ? PQport(c->pg) : NULL;

    snprintf(c->where, sizeof(c->where), "PostgreSQL database %s on %s%s%s", db && *db ? db : "?",
             host && *host ? host : "?", port && *port ? ":" : "", port && *port ? port : "");
}

/* A result's error as one of ours. res may be NULL (the connection failed). */
static enum mg_code fail_res(struct pg_conn *c, const PGresult *res, struct mg_error *err)
{
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    const char *msg = res ? PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    char text[200];

    if (msg == NULL)
        msg = PQerrorMessage(c->pg);
    snprintf(text, sizeof(text), "%s", msg ? msg : "unknown error");
    text[strcspn(text, "\n")] = '\0';
    c->lost = state == NULL || PQstatus(c->pg) != CONNECTION_OK || strncmp(state, "08", 2) == 0 ||
              strncmp(state, "57P", 3) == 0;
    if (c->lost)
        return mg_fail(err, MG_EUNAVAIL, NULL,
                       "the database is unavailable (%s: %s); retry shortly", c->where, text);
    if (strncmp(state, "23", 2) == 0)
        return mg_fail(err, MG_ECONFLICT, NULL, "conflicting record: %s", text);
    if (strcmp(state, "53100") == 0)
        return mg_fail(err, MG_ENOSPC, NULL, "the database's disk is full; free space and retry");
    if (strcmp(state, "40001") == 0 || strcmp(state, "40P01") == 0 ||
        strncmp(state, "53", 2) == 0 || strcmp(state, "55P03") == 0)
        return mg_fail(err, MG_EUNAVAIL, NULL, "the database is busy (%s); retry shortly", text);
    return mg_fail(err, MG_EDB, NULL, "database error: %s (SQLSTATE %s)", text, state);
}

/* Run text on the simple protocol (several statements allowed). */
static enum mg_code run_simple(struct pg_conn *c, const char *sql, struct mg_error *err)
{
    PGresult *res = PQexec(c->pg, sql);
    ExecStatusType st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
    enum mg_code rc = MG_OK;

    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
        rc = fail_res(c, res, err);
    PQclear(res);
    return rc;
}

static enum mg_code connect_now(struct pg_conn *c, struct mg_error *err)
{
    if (c->pg == NULL) {
        /* The URL or conninfo first, expanded; application_name overrides its own. */
        const char *const keys[] = {"dbname", c->app_name[0] ? "application_name" : NULL, NULL};
        const char *const values[] = {c->conninfo, c->app_name, NULL};

        c->pg = PQconnectdbParams(keys, values, 1);
    } else
        PQreset(c->pg);
    describe(c);
    if (c->pg == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    if (PQstatus(c->pg) != CONNECTION_OK) {
        char text[200];

        snprintf(text, sizeof(text), "%s", PQerrorMessage(c->pg));
        text[strcspn(text, "\n")] = '\0';
        return mg_fail(err, MG_EUNAVAIL, NULL, "cannot connect to the database (%s): %s", c->where,
                       text);
    }
    c->generation++; /* statements prepared on the old session are gone */
    /* Times and text as the store writes them. Only parameters an ordinary role may set
     * (no lc_messages: superusers only): errors are told apart by SQLSTATE, never by their
     * text, which comes in the server's language. A session that sits inside a transaction
     * for 5 s belongs to a process that stopped (SIGSTOP, a paused VM): the server ends it,
     * so the writers' lock it may hold does not stall every replica until it wakes. The
     * store's transactions never pause. */
    return run_simple(c,
                      "SET TIME ZONE 'UTC'; SET client_min_messages = warning; "
                      "SET idle_in_transaction_session_timeout = "
                      "'" DB_PG_IDLE_TXN_MS "ms'",
                      err);
}

static void stmt_clear_result(struct pg_stmt *s)
{
    PQclear(s->res);
    s->res = NULL;
    PQfreemem(s->blob);
    s->blob = NULL;
    s->row = -1;
    s->nrows = 0;
    s->ran = false;
}

static void stmt_clear_binds(struct pg_stmt *s)
{
    int i;

    for (i = 0; i < s->nparams; i++) {
        free(s->values[i]);
        s->values[i] = NULL;
        s->lengths[i] = 0;
        s->formats[i] = 0;
        if (s->prepared == 0)
            s->types[i] = 0;
    }
}

static void stmt_free(struct pg_stmt *s)
{
    stmt_clear_result(s);
    stmt_clear_binds(s);
    free(s->values);
    free(s->lengths);
    free(s->formats);
    free(s->types);
    free(s->text);
    free(s);
}

static void pg_close(struct db_conn *base)
{
    struct pg_conn *c = PC(base);
    unsigned i;

    for (i = 0; i < c->ncache; i++)
        stmt_free(c->cache[i]);
    free(c->cache);
    if (c->pg)
        PQfinish(c->pg);
    free(c->conninfo);
    free(c);
}

enum mg_code db_pg_open(const struct db_open_options *opt, struct db_conn **out,
                        struct mg_error *err)
{
    struct pg_conn *c = calloc(1, sizeof(*c));
    enum mg_code rc;

    *out = NULL;
    if (c == NULL || (c->conninfo = strdup(opt->url)) == NULL) {
        free(c);
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
    if (opt->app_name)
        snprintf(c->app_name, sizeof(c->app_name), "%s", opt->app_name);
    c->base.ops = &pg_ops;
    c->failed.base.conn = &c->base;
    if ((rc = connect_now(c, err)) != MG_OK) {
        pg_close(&c->base);
        return rc;
    }
    *out = &c->base;
    return MG_OK;
}

static enum mg_code pg_exec_script(struct db_conn *c, const char *sql, struct mg_error *err)
{
    return run_simple(PC(c), sql, err);
}

/* ---- transactions --------------------------------------------------------- */

static void end_statements(struct pg_conn *c)
{
    unsigned i;

    for (i = 0; i < c->ncache; i++)
        stmt_clear_result(c->cache[i]);
}

static enum mg_code pg_begin(struct db_conn *base, enum db_txn kind, struct mg_error *err)
{
    struct pg_conn *c = PC(base);
    enum mg_code rc = MG_OK;

    c->read_one = false;
    for (int attempt = 0; attempt < 2; attempt++) {
        if (PQstatus(c->pg) != CONNECTION_OK && (rc = connect_now(c, err)) != MG_OK)
            return rc;
        if (PQtransactionStatus(c->pg) != PQTRANS_IDLE)
            (void)run_simple(c, "ROLLBACK", NULL);
        c->lost = false;
        if (kind == DB_READ_ONE) {
            /* No BEGIN to find a session the server ended while it sat idle: pg_step runs
             * the first statement once more on a new one instead. */
            c->read_one = true;
            return MG_OK;
        }
        rc = run_simple(c,
                        kind == DB_WRITE ? "BEGIN ISOLATION LEVEL READ COMMITTED; "
                                           "SELECT pg_advisory_xact_lock(" WRITE_LOCK_KEY ")"
                                         : "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY",
                        err);
        if (rc == MG_OK || attempt > 0 || !(c->lost || PQstatus(c->pg) != CONNECTION_OK))
            return rc;
        /* The server went away while the connection sat idle (a restart ends idle sessions
         * with 57P01, which libpq may report before it marks the connection bad): nothing
         * was done yet, so once more on a new session. */
        if ((rc = connect_now(c, err)) != MG_OK)
            return rc;
    }
    return rc;
}

static void pg_rollback(struct db_conn *base)
{
    struct pg_conn *c = PC(base);

    end_statements(c);
    c->read_one = false;
    if (c->pg && PQstatus(c->pg) == CONNECTION_OK && PQtransactionStatus(c->pg) != PQTRANS_IDLE)
        (void)run_simple(c, "ROLLBACK", NULL);
}

static bool pg_in_transaction(struct db_conn *base)
{
    struct pg_conn *c = PC(base);

    return c->pg && PQstatus(c->pg) == CONNECTION_OK && PQtransactionStatus(c->pg) != PQTRANS_IDLE;
}

static enum mg_code pg_commit(struct db_conn *base, struct mg_error *err)
{
    struct pg_conn *c = PC(base);
    PGTransactionStatusType ts;
    enum mg_code rc;

    end_statements(c);
    c->read_one = false;
    if (PQstatus(c->pg) != CONNECTION_OK)
        return fail_res(c, NULL, err);
    ts = PQtransactionStatus(c->pg);
    if (ts == PQTRANS_IDLE)
        return MG_OK;
    if (ts == PQTRANS_INERROR) {
        pg_rollback(base);
        return mg_fail(err, MG_EDB, NULL,
                       "database error: a statement failed, so the transaction was rolled back");
    }
    if ((rc = run_simple(c, "COMMIT", err)) != MG_OK)
        pg_rollback(base);
    return rc;
}

/* ---- statements ----------------------------------------------------------- */

static void keep_failure(struct pg_stmt *s, enum mg_code code, const char *msg)
{
    if (s->fail != MG_OK)
        return;
    s->fail = code;
    snprintf(s->msg, sizeof(s->msg), "%s", msg);
}

/* SQLite placeholders to PostgreSQL's: ?N stays N, a bare ? is one more than
 * the largest so far (SQLite's rule). Quoted text and identifiers are left as
 * they are. NULL when out of memory. */
static char *rewrite(const char *sql, int *nparams)
{
    size_t n = strlen(sql);
    char *out = malloc(n * 4 + 1), *o = out;
    int max = 0;

    if (out == NULL)
        return NULL;
    while (*sql) {
        char ch = *sql;

        if (ch == '\'' || ch == '"') {
            *o++ = *sql++;
            while (*sql && *sql != ch)
                *o++ = *sql++;
            if (*sql)
                *o++ = *sql++;
            continue;
        }
        if (ch != '?') {
            *o++ = *sql++;
            continue;
        }
        sql++;
        if (isdigit((unsigned char)*sql)) {
            int k = 0;

            while (isdigit((unsigned char)*sql) && k < 100000)
                k = k * 10 + (*sql++ - '0');
            if (k > max)
                max = k;
            o += sprintf(o, "$%d", k);
        } else {
            o += sprintf(o, "$%d", ++max);
        }
    }
    *o = '\0';
    *nparams = max;
    return out;
}

static struct db_stmt *failed_stmt(struct pg_conn *c, const char *msg)
{
    c->failed.fail = MG_OK;
    keep_failure(&c->failed, MG_ENOMEM, msg);
    return &c->failed.base;
}

static struct db_stmt *pg_prepare(struct db_conn *base, const char *sql)
{
    struct pg_conn *c = PC(base);
    struct pg_stmt *s;
    unsigned i;
    int np = 0;

    for (i = 0; i < c->ncache; i++) {
        s = c->cache[i];
        if (s->sql == sql) {
            stmt_clear_result(s);
            stmt_clear_binds(s);
            s->fail = MG_OK;
            return &s->base;
        }
    }
    if (c->ncache == c->capcache) {
        unsigned cap = c->capcache ? c->capcache * 2 : 64;
        void *grown = realloc(c->cache, cap * sizeof(*c->cache));

        if (grown == NULL)
            return failed_stmt(c, "out of memory");
        c->cache = grown;
        c->capcache = cap;
    }
    if ((s = calloc(1, sizeof(*s))) == NULL || (s->text = rewrite(sql, &np)) == NULL) {
        free(s);
        return failed_stmt(c, "out of memory");
    }
    s->nparams = np;
    s->values = calloc((size_t)np + 1, sizeof(*s->values));
    s->lengths = calloc((size_t)np + 1, sizeof(*s->lengths));
    s->formats = calloc((size_t)np + 1, sizeof(*s->formats));
    s->types = calloc((size_t)np + 1, sizeof(*s->types));
    if (!s->values || !s->lengths || !s->formats || !s->types) {
        stmt_free(s);
        return failed_stmt(c, "out of memory");
    }
    s->base.conn = base;
    s->sql = sql;
    s->row = -1;
    snprintf(s->name, sizeof(s->name), "mg%u", ++c->next_name);
    c->cache[c->ncache++] = s;
    return &s->base;
}

/* Parameter i's slot, or NULL (failure kept) when out of range. */
static bool slot(struct pg_stmt *s, int i)
{
    if (s->base.conn == NULL || s == &PC(s->base.conn)->failed)
        return false;
    if (i < 1 || i > s->nparams) {
        char msg[64];

        snprintf(msg, sizeof(msg), "parameter %d is out of range", i);
        keep_failure(s, MG_EDB, msg);
        return false;
    }
    free(s->values[i - 1]);
    s->values[i - 1] = NULL;
    s->lengths[i - 1] = 0;
    s->formats[i - 1] = 0;
    return true;
}

static void set_value(struct pg_stmt *s, int i, const char *text, unsigned type)
{
    if ((s->values[i - 1] = strdup(text)) == NULL)
        keep_failure(s, MG_ENOMEM, "out of memory");
    if (s->prepared == 0)
        s->types[i - 1] = type;
}

static void pg_bind_text(struct db_stmt *base, int i, const char *text)
{
    struct pg_stmt *s = PS(base);

    if (slot(s, i) && text)
        set_value(s, i, text, OID_TEXT);
}

static void pg_bind_i64(struct db_stmt *base, int i, int64_t v)
{
    struct pg_stmt *s = PS(base);
    char buf[24];

    if (!slot(s, i))
        return;
    snprintf(buf, sizeof(buf), "%" PRId64, v);
    set_value(s, i, buf, OID_INT8);
}

static void pg_bind_double(struct db_stmt *base, int i, double v)
{
    struct pg_stmt *s = PS(base);
    char buf[32];

    if (!slot(s, i))
        return;
    snprintf(buf, sizeof(buf), "%.17g", v);
    set_value(s, i, buf, OID_FLOAT8);
}

static void pg_bind_blob(struct db_stmt *base, int i, const void *p, size_t n)
{
    struct pg_stmt *s = PS(base);

    if (!slot(s, i))
        return;
    if (n > INT32_MAX || (s->values[i - 1] = malloc(n ? n : 1)) == NULL) {
        keep_failure(s, MG_ENOMEM, "out of memory");
        return;
    }
    memcpy(s->values[i - 1], p, n);
    s->lengths[i - 1] = (int)n;
    s->formats[i - 1] = 1;
    if (s->prepared == 0)
        s->types[i - 1] = OID_BYTEA;
}

static void pg_bind_null(struct db_stmt *base, int i)
{
    (void)slot(PS(base), i);
}

static bool is_write_status(const char *status)
{
    return strncmp(status, "INSERT", 6) == 0 || strncmp(status, "UPDATE", 6) == 0 ||
           strncmp(status, "DELETE", 6) == 0;
}

/* Prepare s on its connection, with the types of the parameters bound now. A
 * failure to prepare must not abort the caller's transaction (SQLite's does
 * not), so inside one it runs under a savepoint. */
static enum mg_code prepare(struct pg_conn *c, struct pg_stmt *s, struct mg_error *err)
{
    bool in_txn = PQtransactionStatus(c->pg) == PQTRANS_INTRANS;
    enum mg_code rc = MG_OK;
    const char *state;
    PGresult *p;

    if (in_txn && (rc = run_simple(c, "SAVEPOINT mg_prepare", err)) != MG_OK)
        return rc;
    p = PQprepare(c->pg, s->name, s->text, s->nparams, (const Oid *)s->types);
    state = p ? PQresultErrorField(p, PG_DIAG_SQLSTATE) : NULL;
    if (state && (strcmp(state, "42P08") == 0 || strcmp(state, "42P18") == 0)) {
        /* A parameter bound NULL whose type nothing in the statement tells
         * ("?1 IS NULL OR …"): such parameters are text in the store's SQL. */
        for (int i = 0; i < s->nparams; i++) {
            if (s->types[i] == 0)
                s->types[i] = OID_TEXT;
        }
        PQclear(p);
        if (in_txn)
            (void)run_simple(c, "ROLLBACK TO SAVEPOINT mg_prepare", NULL);
        p = PQprepare(c->pg, s->name, s->text, s->nparams, (const Oid *)s->types);
    }
    if (p == NULL || PQresultStatus(p) != PGRES_COMMAND_OK) {
        rc = fail_res(c, p, err);
        if (in_txn)
            (void)run_simple(c, "ROLLBACK TO SAVEPOINT mg_prepare", NULL);
    }
    PQclear(p);
    if (in_txn && PQstatus(c->pg) == CONNECTION_OK)
        (void)run_simple(c, "RELEASE SAVEPOINT mg_prepare", NULL);
    return rc;
}

static enum mg_code run(struct pg_stmt *s, struct mg_error *err)
{
    struct pg_conn *c = PC(s->base.conn);
    ExecStatusType st;
    const char *status;

    if (PQstatus(c->pg) != CONNECTION_OK)
        return fail_res(c, NULL, err);
    if (s->prepared != c->generation) {
        enum mg_code rc = prepare(c, s, err);

        if (rc != MG_OK)
            return rc;
        s->prepared = c->generation;
    }
    s->res = PQexecPrepared(c->pg, s->name, s->nparams, (const char *const *)s->values, s->lengths,
                            s->formats, 0);
    st = s->res ? PQresultStatus(s->res) : PGRES_FATAL_ERROR;
    if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
        enum mg_code rc = fail_res(c, s->res, err);

        stmt_clear_result(s);
        return rc;
    }
    s->ran = true;
    s->row = -1;
    s->nrows = st == PGRES_TUPLES_OK ? PQntuples(s->res) : 0;
    /* Like sqlite3_changes: only an INSERT, UPDATE or DELETE counts. */
    status = PQcmdStatus(s->res);
    if (status && is_write_status(status))
        c->last_changes = strtoll(PQcmdTuples(s->res), NULL, 10);
    return MG_OK;
}

static enum mg_code pg_step(struct db_stmt *base, bool *row, struct mg_error *err)
{
    struct pg_stmt *s = PS(base);
    enum mg_code rc;

    *row = false;
    PQfreemem(s->blob);
    s->blob = NULL;
    if (s->fail != MG_OK) {
        rc = mg_fail(err, s->fail == MG_ENOMEM ? MG_ENOMEM : MG_EDB, NULL, "database error: %s",
                     s->msg);
        stmt_clear_result(s);
        return rc;
    }
    if (!s->ran && (rc = run(s, err)) != MG_OK) {
        struct pg_conn *c = PC(base->conn);

        /* A read outside a transaction that found the session gone: nothing was done, so
         * once more on a new session (pg_begin's retry, for DB_READ_ONE). Once only. */
        if (!c->read_one || !c->lost)
            return rc;
        c->read_one = false;
        if ((rc = connect_now(c, err)) != MG_OK || (rc = run(s, err)) != MG_OK)
            return rc;
    }
    if (++s->row < s->nrows) {
        *row = true;
        return MG_OK;
    }
    stmt_clear_result(s);
    return MG_OK;
}

static void pg_reset(struct db_stmt *base)
{
    stmt_clear_result(PS(base));
}

static int64_t pg_changes(struct db_stmt *base)
{
    return PC(base->conn)->last_changes;
}

static bool pg_col_null(struct db_stmt *base, int i)
{
    struct pg_stmt *s = PS(base);

    return s->res == NULL || PQgetisnull(s->res, s->row, i);
}

static int64_t pg_col_i64(struct db_stmt *base, int i)
{
    struct pg_stmt *s = PS(base);
    const char *v;

    if (pg_col_null(base, i))
        return 0;
    v = PQgetvalue(s->res, s->row, i);
    if (v[0] == 't' && v[1] == '\0') /* a boolean */
        return 1;
    return strtoll(v, NULL, 10);
}

static double pg_col_double(struct db_stmt *base, int i)
{
    struct pg_stmt *s = PS(base);

    return pg_col_null(base, i) ? 0.0 : strtod(PQgetvalue(s->res, s->row, i), NULL);
}

static const char *pg_col_text(struct db_stmt *base, int i)
{
    struct pg_stmt *s = PS(base);

    return pg_col_null(base, i) ? NULL : PQgetvalue(s->res, s->row, i);
}

static const void *pg_col_blob(struct db_stmt *base, int i)
{
    struct pg_stmt *s = PS(base);

    if (pg_col_null(base, i))
        return NULL;
    if (PQftype(s->res, i) != OID_BYTEA)
        return PQgetvalue(s->res, s->row, i);
    PQfreemem(s->blob);
    s->blob = PQunescapeBytea((const unsigned char *)PQgetvalue(s->res, s->row, i), &s->blob_len);
    return s->blob;
}

static size_t pg_col_bytes(struct db_stmt *base, int i)
{
    struct pg_stmt *s = PS(base);

    if (pg_col_null(base, i))
        return 0;
    if (PQftype(s->res, i) == OID_BYTEA)
        return pg_col_blob(base, i) ? s->blob_len : 0;
    return (size_t)PQgetlength(s->res, s->row, i);
}

static int pg_col_count(struct db_stmt *base)
{
    return PS(base)->res ? PQnfields(PS(base)->res) : 0;
}

static const char *pg_col_name(struct db_stmt *base, int i)
{
    return PQfname(PS(base)->res, i);
}

static enum db_type pg_col_type(struct db_stmt *base, int i)
{
    if (pg_col_null(base, i))
        return DB_NULL;
    switch (PQftype(PS(base)->res, i)) {
    case OID_INT8:
    case 21: /* int2 */
    case 23: /* int4 */
        return DB_INTEGER;
    case OID_FLOAT8:
    case 700: /* float4 */
        return DB_FLOAT;
    case OID_BYTEA:
        return DB_BLOB;
    default:
        return DB_TEXT;
    }
}

static enum mg_code pg_listen(struct db_conn *base, const char *channel, struct mg_error *err)
{
    struct pg_conn *c = PC(base);
    char sql[96];

    if (PQstatus(c->pg) != CONNECTION_OK) {
        enum mg_code rc = connect_now(c, err);

        if (rc != MG_OK)
            return rc;
    }
    snprintf(sql, sizeof(sql), "LISTEN %s", channel);
    return run_simple(c, sql, err);
}

/* Pass every notification libpq holds already to fn; true when there was one. */
static bool drain_notifies(struct pg_conn *c, db_notify_fn fn, void *arg)
{
    PGnotify *n;
    bool any = false;

    while ((n = PQnotifies(c->pg)) != NULL) {
        any = true;
        if (fn != NULL)
            fn(arg, n->extra ? n->extra : "");
        PQfreemem(n);
    }
    return any;
}

static enum mg_code pg_wait_notify(struct db_conn *base, const char *channel, int timeout_ms,
                                   db_notify_fn fn, void *arg, struct mg_error *err)
{
    struct pg_conn *c = PC(base);
    struct pollfd pfd;
    enum mg_code rc;

    if (PQstatus(c->pg) != CONNECTION_OK && (rc = pg_listen(base, channel, err)) != MG_OK)
        return rc;
    /* Notifications that arrived while a statement ran on this connection are held by
     * libpq already: the socket would not wake for them. */
    if (drain_notifies(c, fn, arg))
        return MG_OK;
    pfd.fd = PQsocket(c->pg);
    pfd.events = POLLIN;
    pfd.revents = 0;
    if (pfd.fd >= 0 && poll(&pfd, 1, timeout_ms) < 0 && errno != EINTR)
        return mg_fail(err, MG_EIO, NULL, "poll: %s", strerror(errno));
    if (PQconsumeInput(c->pg) != 1 || PQstatus(c->pg) != CONNECTION_OK)
        return fail_res(c, NULL, err); /* the next call listens again on a new session */
    drain_notifies(c, fn, arg);
    return MG_OK;
}

static unsigned pg_session(const struct db_conn *base)
{
    const struct pg_conn *c = (const struct pg_conn *)base;

    return PQstatus(c->pg) == CONNECTION_OK ? c->generation : 0;
}

static void pg_disconnect(struct db_conn *base)
{
    struct pg_conn *c = PC(base);

    end_statements(c);
    if (c->pg != NULL)
        PQfinish(c->pg);
    c->pg = NULL; /* connect_now starts afresh */
}

static const struct db_ops pg_ops = {
    .dialect = DB_POSTGRES,
    .close = pg_close,
    .exec_script = pg_exec_script,
    .begin = pg_begin,
    .commit = pg_commit,
    .rollback = pg_rollback,
    .in_transaction = pg_in_transaction,
    .prepare = pg_prepare,
    .bind_text = pg_bind_text,
    .bind_i64 = pg_bind_i64,
    .bind_double = pg_bind_double,
    .bind_blob = pg_bind_blob,
    .bind_null = pg_bind_null,
    .step = pg_step,
    .reset = pg_reset,
    .changes = pg_changes,
    .col_null = pg_col_null,
    .col_i64 = pg_col_i64,
    .col_double = pg_col_double,
    .col_text = pg_col_text,
    .col_blob = pg_col_blob,
    .col_bytes = pg_col_bytes,
    .col_count = pg_col_count,
    .col_name = pg_col_name,
    .col_type = pg_col_type,
    .listen = pg_listen,
    .wait_notify = pg_wait_notify,
    .session = pg_session,
    .disconnect = pg_disconnect,
};

/* ---- snapshots (db_snapshot) ------------------------------------------------- */

enum mg_code db_pg_snapshot(const struct db_open_options *opt, const char *dest,
                            struct mg_error *err)
{
    (void)opt;
    (void)dest;
    return mg_fail(err, MG_EINVAL, NULL,
                   "a PostgreSQL database is not copied into a file by modelgate; back it up "
                   "with pg_dump");
}
