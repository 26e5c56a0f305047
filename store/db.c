/*
 * db.c - opening the store: data directory layout, SQLite connections
 * (one writer, a pool of readers), migrations, transactions and the small
 * helpers every store file uses.
 */
#include "store_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/embedded.h"
#include "../common/util.h"

extern const struct mg_embedded store_migrations[];
extern const unsigned store_migrations_count;

#define BUSY_TIMEOUT_MS 10000

int store_schema_version(void)
{
    return (int)store_migrations_count;
}

void store_now(char out[32])
{
    mg_time_format(mg_now_ms(), out);
}

enum mg_code store_db_error(struct store_conn *c, int rc, struct mg_error *err)
{
    const char *msg = c && c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc);

    switch (rc & 0xff) {
    case SQLITE_FULL:
        return mg_fail(err, MG_ENOSPC, NULL, "the server's disk is full; free space and retry");
    case SQLITE_CONSTRAINT:
        return mg_fail(err, MG_ECONFLICT, NULL, "conflicting record: %s", msg);
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return mg_fail(err, MG_EUNAVAIL, NULL, "the database is busy; retry shortly");
    default:
        return mg_fail(err, MG_EDB, NULL, "database error: %s", msg);
    }
}

sqlite3_stmt *store_stmt(struct store_conn *c, const char *sql, struct mg_error *err)
{
    sqlite3_stmt *s = NULL;
    unsigned i;
    int rc;

    for (i = 0; i < c->ncache; i++) {
        if (c->cache[i].sql == sql) {
            s = c->cache[i].stmt;
            sqlite3_reset(s);
            sqlite3_clear_bindings(s);
            return s;
        }
    }
    rc = sqlite3_prepare_v3(c->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, NULL);
    if (rc != SQLITE_OK) {
        store_db_error(c, rc, err);
        return NULL;
    }
    if (c->ncache == c->capcache) {
        unsigned cap = c->capcache ? c->capcache * 2 : 64;
        void *grown = realloc(c->cache, cap * sizeof(*c->cache));

        if (grown == NULL) {
            sqlite3_finalize(s);
            mg_fail(err, MG_ENOMEM, NULL, "out of memory");
            return NULL;
        }
        c->cache = grown;
        c->capcache = cap;
    }
    c->cache[c->ncache].sql = sql;
    c->cache[c->ncache].stmt = s;
    c->ncache++;
    return s;
}

enum mg_code store_exec_stmt(struct store_conn *c, sqlite3_stmt *s, struct mg_error *err)
{
    int rc = sqlite3_step(s);

    if (rc == SQLITE_DONE || rc == SQLITE_ROW) {
        sqlite3_reset(s);
        return MG_OK;
    }
    store_db_error(c, rc, err);
    sqlite3_reset(s);
    return err ? err->code : MG_EDB;
}

int store_bind_text(sqlite3_stmt *s, int i, const char *text)
{
    if (text == NULL)
        return sqlite3_bind_null(s, i);
    return sqlite3_bind_text(s, i, text, -1, SQLITE_TRANSIENT);
}

json_t *store_col_json_string(sqlite3_stmt *s, int i)
{
    const unsigned char *t = sqlite3_column_text(s, i);

    if (t == NULL)
        return json_null();
    return json_stringn((const char *)t, (size_t)sqlite3_column_bytes(s, i));
}

json_t *store_col_json(sqlite3_stmt *s, int i)
{
    const unsigned char *t = sqlite3_column_text(s, i);
    json_t *v;

    if (t == NULL)
        return json_null();
    v = json_loadb((const char *)t, (size_t)sqlite3_column_bytes(s, i), JSON_DECODE_ANY, NULL);
    return v ? v : json_null();
}

char *store_json_text(const json_t *v)
{
    return json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
}

bool store_page_cursor(const struct store_page *page, int64_t *cursor)
{
    if (page == NULL || page->page_token == NULL) {
        *cursor = INT64_MAX;
        return true;
    }
    return mg_parse_i64(page->page_token, 1, INT64_MAX, cursor);
}

static enum mg_code exec_sql(struct store_conn *c, const char *sql, struct mg_error *err)
{
    char *msg = NULL;
    int rc = sqlite3_exec(c->db, sql, NULL, NULL, &msg);

    if (rc != SQLITE_OK) {
        enum mg_code code = store_db_error(c, rc, err);
        sqlite3_free(msg);
        return code;
    }
    return MG_OK;
}

static enum mg_code conn_open(struct store *st, struct store_conn *c, bool writer, bool sync_normal,
                              struct mg_error *err)
{
    int flags = writer ? SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE : SQLITE_OPEN_READONLY;
    int rc;

    memset(c, 0, sizeof(*c));
    rc = sqlite3_open_v2(st->db_path, &c->db, flags | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK)
        return mg_fail(err, MG_EDB, NULL, "cannot open database %s: %s", st->db_path,
                       c->db ? sqlite3_errmsg(c->db) : sqlite3_errstr(rc));
    sqlite3_busy_timeout(c->db, BUSY_TIMEOUT_MS);
    sqlite3_extended_result_codes(c->db, 1);
    if (writer) {
        if (exec_sql(c, "PRAGMA journal_mode=WAL", err) != MG_OK)
            return err->code;
        if (exec_sql(c, sync_normal ? "PRAGMA synchronous=NORMAL" : "PRAGMA synchronous=FULL",
                     err) != MG_OK)
            return err->code;
    }
    return exec_sql(c, "PRAGMA foreign_keys=ON", err);
}

static void conn_close(struct store_conn *c)
{
    unsigned i;

    for (i = 0; i < c->ncache; i++)
        sqlite3_finalize(c->cache[i].stmt);
    free(c->cache);
    c->cache = NULL;
    c->ncache = c->capcache = 0;
    if (c->db)
        sqlite3_close(c->db);
    c->db = NULL;
}

static enum mg_code migrate(struct store_conn *c, struct mg_error *err)
{
    static const char sql_create[] =
        "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, "
        "name TEXT NOT NULL, applied_at TEXT NOT NULL)";
    static const char sql_max[] = "SELECT coalesce(max(version), 0) FROM schema_migrations";
    static const char sql_record[] =
        "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)";
    sqlite3_stmt *s;
    int64_t have = 0;
    unsigned i;
    char now[32];

    if (exec_sql(c, sql_create, err) != MG_OK)
        return err->code;
    s = store_stmt(c, sql_max, err);
    if (s == NULL)
        return err->code;
    if (sqlite3_step(s) == SQLITE_ROW)
        have = sqlite3_column_int64(s, 0);
    sqlite3_reset(s);
    if (have > (int64_t)store_migrations_count)
        return mg_fail(err, MG_EINVAL, NULL,
                       "the database is at schema version %lld but this modelgated knows only "
                       "up to %u; run a newer modelgated or restore a backup",
                       (long long)have, store_migrations_count);
    for (i = (unsigned)have; i < store_migrations_count; i++) {
        const struct mg_embedded *m = &store_migrations[i];
        enum mg_code rc;

        if (exec_sql(c, "BEGIN IMMEDIATE", err) != MG_OK)
            return err->code;
        rc = exec_sql(c, (const char *)m->data, err);
        if (rc == MG_OK) {
            s = store_stmt(c, sql_record, err);
            if (s == NULL) {
                rc = err->code;
            } else {
                store_now(now);
                sqlite3_bind_int64(s, 1, (int64_t)i + 1);
                store_bind_text(s, 2, m->name);
                store_bind_text(s, 3, now);
                rc = store_exec_stmt(c, s, err);
            }
        }
        if (rc != MG_OK) {
            exec_sql(c, "ROLLBACK", NULL);
            char why[MG_ERR_MSG_MAX]; /* mg_fail writes err: not into itself */
            snprintf(why, sizeof(why), "%s", err->message);
            return mg_fail(err, rc, NULL, "migration %s failed: %s", m->name, why);
        }
        if (exec_sql(c, "COMMIT", err) != MG_OK)
            return err->code;
    }
    return MG_OK;
}

static enum mg_code make_dir(const char *path, struct mg_error *err)
{
    if (mkdir(path, 0700) != 0 && errno != EEXIST)
        return mg_fail(err, MG_EIO, NULL, "cannot create directory %s: %s", path, strerror(errno));
    return MG_OK;
}

/* Interrupted uploads leave temp files; none is referenced by a row. */
static void sweep_tmp(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;

    if (d == NULL)
        return;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "upload-", 7) == 0)
            unlinkat(dirfd(d), e->d_name, 0);
    }
    closedir(d);
}

static char *path_join(const char *a, const char *b)
{
    size_t n = strlen(a) + strlen(b) + 2;
    char *p = malloc(n);

    if (p)
        snprintf(p, n, "%s/%s", a, b);
    return p;
}

/* The files that hold secrets (webhook secrets in the database and its WAL, the admin
 * token) are 0600 whatever mode an older version, a restore tool or a umask left them in.
 * New files are 0600 through modelgated's umask (077).
 *
 * By path, never by opening them: closing any descriptor of a file releases every POSIX
 * lock this process holds on it, and SQLite's locks on the database and its shm are such
 * locks; another process could then take the shm for its own and truncate it under our map.
 * lstat first: a link is left alone. */
static void tighten_modes(const char *data_dir)
{
    static const char *const names[] = {"modelgate.db", "modelgate.db-wal", "modelgate.db-shm",
                                        "admin.token", "modelgated.lock"};
    struct stat sb;
    size_t i;

    for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char *path = path_join(data_dir, names[i]);

        if (path == NULL)
            return;
        if (lstat(path, &sb) == 0 && S_ISREG(sb.st_mode) && (sb.st_mode & 077) != 0)
            (void)chmod(path, 0600);
        free(path);
    }
}

/* One process owns a data directory: two daemons would run two outboxes, two
 * runners and two timers over the same rows, and store_data_epoch() would miss
 * the other one's writes. The lock dies with the process (kill -9 included). */
static enum mg_code lock_dir(struct store *st, struct mg_error *err)
{
    char *path = path_join(st->data_dir, "modelgated.lock");

    if (path == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    st->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (st->lock_fd < 0) {
        mg_fail(err, MG_EIO, NULL, "cannot open %s: %s", path, strerror(errno));
        free(path);
        return err->code;
    }
    if (flock(st->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        if (errno == EWOULDBLOCK)
            mg_fail(err, MG_EUNAVAIL, NULL,
                    "data directory %s is in use by another modelgated process; stop it or "
                    "use another --data-dir",
                    st->data_dir);
        else
            mg_fail(err, MG_EIO, NULL, "cannot lock %s: %s", path, strerror(errno));
        free(path);
        return err->code;
    }
    free(path);
    return MG_OK;
}

enum mg_code store_open(const struct store_options *opt, struct store **out, struct mg_error *err)
{
    struct store *st;
    char *blobs = NULL;
    enum mg_code rc = MG_ENOMEM;
    unsigned i;

    st = calloc(1, sizeof(*st));
    if (st == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    pthread_mutex_init(&st->wlock, NULL);
    pthread_mutex_init(&st->rlock, NULL);
    pthread_mutex_init(&st->tlock, NULL);
    pthread_cond_init(&st->rcond, NULL);
    st->lock_fd = -1;
    st->archive = opt->archive;
    st->archive.counters = &st->archive_counters;
    st->keys = opt->keys;
    st->nreaders = opt->read_conns ? opt->read_conns : 4;
    st->data_dir = strdup(opt->data_dir);
    st->db_path = path_join(opt->data_dir, "modelgate.db");
    blobs = path_join(opt->data_dir, "blobs");
    if (!st->data_dir || !st->db_path || !blobs)
        goto fail;
    st->blob_dir = path_join(blobs, "sha256");
    st->tmp_dir = path_join(blobs, "tmp");
    st->readers = calloc(st->nreaders, sizeof(*st->readers));
    st->rbusy = calloc(st->nreaders, 1);
    if (!st->blob_dir || !st->tmp_dir || !st->readers || !st->rbusy) {
        mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto fail;
    }
    if ((rc = make_dir(st->data_dir, err)) != MG_OK || (rc = make_dir(blobs, err)) != MG_OK ||
        (rc = make_dir(st->blob_dir, err)) != MG_OK || (rc = make_dir(st->tmp_dir, err)) != MG_OK)
        goto fail;
    if ((rc = lock_dir(st, err)) != MG_OK)
        goto fail;
    sweep_tmp(st->tmp_dir);
    tighten_modes(st->data_dir);

    if ((rc = conn_open(st, &st->writer, true, opt->sync_normal, err)) != MG_OK)
        goto fail;
    if ((rc = migrate(&st->writer, err)) != MG_OK)
        goto fail;
    for (i = 0; i < st->nreaders; i++) {
        if ((rc = conn_open(st, &st->readers[i], false, false, err)) != MG_OK)
            goto fail;
    }
    tighten_modes(st->data_dir); /* the WAL and shm the connections just made */
    free(blobs);
    *out = st;
    return MG_OK;
fail:
    free(blobs);
    store_close(&st);
    return rc == MG_ENOMEM ? mg_fail(err, rc, NULL, "out of memory") : rc;
}

void store_close(struct store **stp)
{
    struct store *st = *stp;
    unsigned i;

    if (st == NULL)
        return;
    for (i = 0; st->readers && i < st->nreaders; i++)
        conn_close(&st->readers[i]);
    if (st->writer.db) {
        /* Fold the WAL back so the database is one file at rest. */
        sqlite3_wal_checkpoint_v2(st->writer.db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
        conn_close(&st->writer);
    }
    pthread_mutex_destroy(&st->wlock);
    pthread_mutex_destroy(&st->rlock);
    pthread_mutex_destroy(&st->tlock);
    pthread_cond_destroy(&st->rcond);
    free(st->readers);
    free(st->rbusy);
    free(st->data_dir);
    free(st->db_path);
    free(st->blob_dir);
    free(st->tmp_dir);
    if (st->lock_fd >= 0)
        close(st->lock_fd);
    free(st);
    *stp = NULL;
}

struct store_conn *store_read_begin(struct store *st)
{
    unsigned i;
    struct store_conn *c = NULL;

    pthread_mutex_lock(&st->rlock);
    while (c == NULL) {
        for (i = 0; i < st->nreaders; i++) {
            if (!st->rbusy[i]) {
                st->rbusy[i] = 1;
                c = &st->readers[i];
                break;
            }
        }
        if (c == NULL)
            pthread_cond_wait(&st->rcond, &st->rlock);
    }
    pthread_mutex_unlock(&st->rlock);
    /* Cached statements: sqlite3_exec would parse "BEGIN" on every read. */
    {
        static const char sql_begin[] = "BEGIN";
        sqlite3_stmt *s = store_stmt(c, sql_begin, NULL);
        if (s) {
            sqlite3_step(s);
            sqlite3_reset(s);
        }
    }
    return c;
}

void store_read_end(struct store *st, struct store_conn *c)
{
    unsigned i = (unsigned)(c - st->readers);

    if (!sqlite3_get_autocommit(c->db)) {
        static const char sql_commit[] = "COMMIT";
        sqlite3_stmt *s;

        /* A statement left stepping would keep this connection's snapshot
         * past the COMMIT, and the next borrower would read old data under a
         * new data epoch (store_data_epoch): end them all first. */
        for (s = sqlite3_next_stmt(c->db, NULL); s; s = sqlite3_next_stmt(c->db, s)) {
            if (sqlite3_stmt_busy(s))
                sqlite3_reset(s);
        }
        s = store_stmt(c, sql_commit, NULL);
        if (s) {
            sqlite3_step(s);
            sqlite3_reset(s);
        } else {
            sqlite3_exec(c->db, "COMMIT", NULL, NULL, NULL);
        }
    }
    pthread_mutex_lock(&st->rlock);
    st->rbusy[i] = 0;
    pthread_cond_signal(&st->rcond);
    pthread_mutex_unlock(&st->rlock);
}

struct store_conn *store_write_begin(struct store *st, struct mg_error *err)
{
    pthread_mutex_lock(&st->wlock);
    if (exec_sql(&st->writer, "BEGIN IMMEDIATE", err) != MG_OK) {
        pthread_mutex_unlock(&st->wlock);
        return NULL;
    }
    st->writer.changes = sqlite3_total_changes64(st->writer.db);
    return &st->writer;
}

enum mg_code store_write_end(struct store *st, struct store_conn *c, enum mg_code rc,
                             struct mg_error *err)
{
    if (rc == MG_OK)
        rc = exec_sql(c, "COMMIT", err);
    if (rc != MG_OK && !sqlite3_get_autocommit(c->db))
        exec_sql(c, "ROLLBACK", NULL);
    /* After the commit is visible: a reader that sees the new epoch sees the
     * data. Only commits that changed rows count, so the polls of idle push
     * and runner workers (a claim that finds nothing) leave caches alone. */
    if (rc == MG_OK && sqlite3_total_changes64(c->db) != c->changes)
        atomic_fetch_add(&st->epoch, 1);
    pthread_mutex_unlock(&st->wlock);
    return rc;
}

uint64_t store_data_epoch(struct store *st)
{
    return atomic_load(&st->epoch);
}

bool store_ready(struct store *st)
{
    struct mg_error err;
    struct store_conn *c;
    char path[PATH_MAX];
    int fd;
    bool ok;

    c = store_write_begin(st, &err);
    if (c == NULL)
        return false;
    ok = exec_sql(c,
                  "CREATE TEMP TABLE IF NOT EXISTS readyz_probe (x); "
                  "INSERT INTO readyz_probe VALUES (1); DELETE FROM readyz_probe",
                  &err) == MG_OK;
    store_write_end(st, c, MG_EIO, &err); /* roll back: the probe leaves nothing */
    snprintf(path, sizeof(path), "%s/readyz-XXXXXX", st->tmp_dir);
    fd = mkstemp(path);
    if (fd < 0)
        return false;
    close(fd);
    unlink(path);
    return ok;
}

enum mg_code store_model_id(struct store_conn *c, const char *name, int64_t *id,
                            struct mg_error *err)
{
    static const char sql[] = "SELECT id FROM models WHERE name = ?";
    sqlite3_stmt *s = store_stmt(c, sql, err);
    int rc;

    if (s == NULL)
        return err->code;
    store_bind_text(s, 1, name);
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        *id = sqlite3_column_int64(s, 0);
        sqlite3_reset(s);
        return MG_OK;
    }
    sqlite3_reset(s);
    if (rc != SQLITE_DONE)
        return store_db_error(c, rc, err);
    return mg_fail(err, MG_ENOTFOUND, NULL, "model '%s' does not exist", name);
}

enum mg_code store_version_id(struct store_conn *c, const char *model, int64_t n, int64_t *id,
                              struct mg_error *err)
{
    static const char sql[] = "SELECT v.id FROM versions v JOIN models m ON m.id = v.model_id "
                              "WHERE m.name = ? AND v.version = ?";
    sqlite3_stmt *s;
    int64_t mid;
    int rc;

    if (store_model_id(c, model, &mid, err) != MG_OK)
        return err->code;
    s = store_stmt(c, sql, err);
    if (s == NULL)
        return err->code;
    store_bind_text(s, 1, model);
    sqlite3_bind_int64(s, 2, n);
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
        *id = sqlite3_column_int64(s, 0);
        sqlite3_reset(s);
        return MG_OK;
    }
    sqlite3_reset(s);
    if (rc != SQLITE_DONE)
        return store_db_error(c, rc, err);
    return mg_fail(err, MG_ENOTFOUND, NULL, "model '%s' has no version %lld", model, (long long)n);
}

static void group_counts(struct store_conn *c, const char *sql, json_t *into)
{
    sqlite3_stmt *s = store_stmt(c, sql, NULL);

    if (s == NULL)
        return;
    while (sqlite3_step(s) == SQLITE_ROW)
        json_object_set_new(into, (const char *)sqlite3_column_text(s, 0),
                            json_integer(sqlite3_column_int64(s, 1)));
    sqlite3_reset(s);
}

void store_archive_totals(struct store *st, struct store_archive_counters *out)
{
    out->expanded_bytes = __atomic_load_n(&st->archive_counters.expanded_bytes, __ATOMIC_RELAXED);
    out->ratio_refusals = __atomic_load_n(&st->archive_counters.ratio_refusals, __ATOMIC_RELAXED);
}

enum mg_code store_stats(struct store *st, json_t **out, struct mg_error *err)
{
    static const char sql_promo[] = "SELECT state, count(*) FROM promotions GROUP BY state";
    static const char sql_smoke[] = "SELECT state, count(*) FROM smoke_tests GROUP BY state";
    static const char sql_deliv[] =
        "SELECT gateway, state, count(*) FROM outbox GROUP BY gateway, state";
    static const char sql_lag[] =
        "SELECT g.name, coalesce(max(CASE WHEN o.state != 'in_sync' THEN ? - o.written_ms END), 0) "
        "FROM gateways g LEFT JOIN outbox o ON o.gateway = g.name GROUP BY g.name";
    struct store_conn *c = store_read_begin(st);
    json_t *promo = json_object(), *smoke = json_object(), *deliv = json_array();
    json_t *lag = json_object();
    sqlite3_stmt *s;
    char path[PATH_MAX];
    struct stat sb;
    int64_t wal = 0, db = 0, now = mg_now_ms();

    group_counts(c, sql_promo, promo);
    group_counts(c, sql_smoke, smoke);
    if ((s = store_stmt(c, sql_deliv, NULL)) != NULL) {
        while (sqlite3_step(s) == SQLITE_ROW)
            json_array_append_new(deliv, json_pack("{s:o, s:o, s:I}", "gateway",
                                                   store_col_json_string(s, 0), "state",
                                                   store_col_json_string(s, 1), "count",
                                                   (json_int_t)sqlite3_column_int64(s, 2)));
        sqlite3_reset(s);
    }
    if ((s = store_stmt(c, sql_lag, NULL)) != NULL) {
        sqlite3_bind_int64(s, 1, now);
        while (sqlite3_step(s) == SQLITE_ROW)
            json_object_set_new(lag, (const char *)sqlite3_column_text(s, 0),
                                json_real((double)sqlite3_column_int64(s, 1) / 1000.0));
        sqlite3_reset(s);
    }
    store_read_end(st, c);
    snprintf(path, sizeof(path), "%s-wal", st->db_path);
    if (stat(path, &sb) == 0)
        wal = sb.st_size;
    if (stat(st->db_path, &sb) == 0)
        db = sb.st_size;
    *out = json_pack("{s:o, s:o, s:o, s:o, s:I, s:I}", "promotions", promo, "smoke_tests", smoke,
                     "deliveries", deliv, "delivery_lag_seconds", lag, "wal_bytes", (json_int_t)wal,
                     "db_bytes", (json_int_t)db);
    return *out ? MG_OK : mg_fail(err, MG_ENOMEM, NULL, "out of memory");
}

enum mg_code store_write_sql(struct store *st, const char *sql, struct mg_error *err)
{
    struct store_conn *c = store_write_begin(st, err);
    sqlite3_stmt *s;
    enum mg_code rc;

    if (c == NULL)
        return err->code;
    if ((s = store_stmt(c, sql, err)) == NULL)
        rc = err->code;
    else
        rc = store_exec_stmt(c, s, err);
    return store_write_end(st, c, rc, err);
}
