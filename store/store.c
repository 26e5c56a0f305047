/*
 * store.c - opening the store: data directory layout, database connections
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
#include <time.h>
#include <unistd.h>

#include "../base/embedded.h"
#include "../base/util.h"

extern const struct mg_embedded store_migrations[];
extern const unsigned store_migrations_count;
extern const struct mg_embedded store_migrations_pg[];
extern const unsigned store_migrations_pg_count;

#define BUSY_TIMEOUT_MS 10000

int store_schema_version(void)
{
    return (int)store_migrations_count;
}

void store_now(char out[32])
{
    mg_time_format(mg_now_ms(), out);
}

enum mg_code store_exists(struct db_stmt *s, bool *found, struct mg_error *err)
{
    enum mg_code rc = db_step(s, found, err);

    db_reset(s);
    return rc;
}

json_t *store_col_json_string(struct db_stmt *s, int i)
{
    const char *t = db_col_text(s, i);
    size_t n, k;

    if (t == NULL)
        return json_null();
    /* ASCII needs no UTF-8 check (jansson's costs a call per byte); anything else gets it. */
    n = (size_t)db_col_bytes(s, i);
    for (k = 0; k < n && (unsigned char)t[k] < 0x80; k++)
        ;
    return k == n ? json_stringn_nocheck(t, n) : json_stringn(t, n);
}

json_t *store_col_json_int(struct db_stmt *s, int i)
{
    return db_col_null(s, i) ? json_null() : json_integer(db_col_i64(s, i));
}

json_t *store_col_json(struct db_stmt *s, int i)
{
    const char *t = db_col_text(s, i);
    json_t *v;

    if (t == NULL)
        return json_null();
    v = json_loadb(t, db_col_bytes(s, i), JSON_DECODE_ANY, NULL);
    return v ? v : json_null();
}

char *store_col_strdup(struct db_stmt *s, int i)
{
    const char *t = db_col_text(s, i);

    return t ? strdup(t) : NULL;
}

char *store_json_text(const json_t *v)
{
    return json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
}

enum mg_code store_page_cursor(const struct store_page *page, int64_t *cursor, struct mg_error *err)
{
    if (page == NULL || page->page_token == NULL) {
        *cursor = INT64_MAX;
        return MG_OK;
    }
    if (!mg_parse_i64(page->page_token, 1, INT64_MAX, cursor))
        return mg_fail(err, MG_EINVAL, "page_token", "page_token is not one this server issued");
    return MG_OK;
}

enum mg_code store_page_rows(struct db_stmt *s, int limit_param, const struct store_page *page,
                             store_row_fn row, void *ctx, json_t **out, struct mg_error *err)
{
    json_t *items = json_array(), *item = NULL;
    char cursor[128] = "", last[128] = "";
    enum mg_code rc;
    unsigned n = 0;
    bool more = false, have;

    *out = NULL;
    if (items == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    db_bind_i64(s, limit_param, (int64_t)page->limit + 1);
    while ((rc = db_step(s, &have, err)) == MG_OK && have) {
        if (n == page->limit) {
            more = true; /* the extra row: a next page exists */
            db_reset(s);
            break;
        }
        if ((rc = row(s, ctx, &item, cursor, err)) != MG_OK) {
            db_reset(s);
            break;
        }
        if (json_array_append_new(items, item) != 0) {
            db_reset(s);
            rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
            break;
        }
        memcpy(last, cursor, sizeof(last));
        n++;
    }
    if (rc == MG_OK)
        *out = json_pack("{s:o, s:o}", "items", items, "next_page_token",
                         more ? json_string(last) : json_null());
    else
        json_decref(items);
    if (rc == MG_OK && *out == NULL)
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    return rc;
}

/*
 * Bring the schema up to date, one migration per write transaction. The
 * version is read inside each transaction, under the write lock, so processes
 * starting at once against one PostgreSQL database apply each migration once:
 * the others find it done.
 */
static enum mg_code migrate(struct db_conn *c, struct mg_error *err)
{
    static const char sql_create[] =
        "CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, "
        "name TEXT NOT NULL, applied_at TEXT NOT NULL)";
    static const char sql_max[] = "SELECT coalesce(max(version), 0) FROM schema_migrations";
    static const char sql_record[] =
        "INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)";
    bool pg = db_dialect(c) == DB_POSTGRES;
    const struct mg_embedded *set = pg ? store_migrations_pg : store_migrations;
    unsigned count = pg ? store_migrations_pg_count : store_migrations_count;
    struct db_stmt *s;
    char now[32];
    enum mg_code rc;
    bool row;

    if (count != store_migrations_count)
        return mg_fail(err, MG_EINVAL, NULL,
                       "this build has %u SQLite but %u PostgreSQL migrations",
                       store_migrations_count, count);
    for (;;) {
        const struct mg_embedded *m;
        int64_t have = 0;

        if ((rc = db_begin(c, DB_WRITE, err)) != MG_OK)
            return rc;
        if ((rc = db_exec_script(c, sql_create, err)) != MG_OK)
            goto fail;
        s = db_prepare(c, sql_max);
        if ((rc = db_step(s, &row, err)) != MG_OK)
            goto fail;
        if (row)
            have = db_col_i64(s, 0);
        db_reset(s);
        if (have > (int64_t)count) {
            rc = mg_fail(err, MG_EINVAL, NULL,
                         "the database is at schema version %lld but this modelgated knows only "
                         "up to %u; run a newer modelgated or restore a backup",
                         (long long)have, count);
            goto fail;
        }
        if (have == (int64_t)count)
            return db_commit(c, err);
        m = &set[have];
        if ((rc = db_exec_script(c, (const char *)m->data, err)) == MG_OK) {
            s = db_prepare(c, sql_record);
            store_now(now);
            db_bind_i64(s, 1, have + 1);
            db_bind_text(s, 2, m->name);
            db_bind_text(s, 3, now);
            rc = db_exec(s, err);
        }
        if (rc == MG_OK)
            rc = db_commit(c, err);
        if (rc != MG_OK) {
            char why[MG_ERR_MSG_MAX]; /* mg_fail writes err: not into itself */

            db_rollback(c);
            snprintf(why, sizeof(why), "%s", err->message);
            return mg_fail(err, rc, NULL, "migration %s failed: %s", m->name, why);
        }
    }
fail:
    db_rollback(c);
    return rc;
}

static enum mg_code make_dir(const char *path, struct mg_error *err)
{
    if (mkdir(path, 0700) != 0 && errno != EEXIST)
        return mg_fail(err, MG_EIO, NULL, "cannot create directory %s: %s", path, strerror(errno));
    return MG_OK;
}

/* Interrupted uploads leave temp files; none is referenced by a row. A blob
 * directory other processes share may hold their uploads in flight (written to
 * as they go): there only files left alone for SWEEP_SHARED_AGE_S go. */
#define SWEEP_SHARED_AGE_S 600
static void sweep_tmp(const char *dir, bool shared)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    struct stat sb;
    time_t now = time(NULL);

    if (d == NULL)
        return;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "upload-", 7) != 0 && strncmp(e->d_name, "spool-", 6) != 0 &&
            strncmp(e->d_name, "materialize-", 12) != 0)
            continue;
        if (shared && (fstatat(dirfd(d), e->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 ||
                       now - sb.st_mtime < SWEEP_SHARED_AGE_S))
            continue;
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
 * runners and two timers over the same rows, and this process's model epochs would
 * miss the other one's writes. The lock dies with the process (kill -9 included). */
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
    bool shared;

    st = calloc(1, sizeof(*st));
    if (st == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    pthread_mutex_init(&st->wlock, NULL);
    pthread_mutex_init(&st->rlock, NULL);
    pthread_mutex_init(&st->gc_lock, NULL);
    pthread_cond_init(&st->rcond, NULL);
    st->lock_fd = -1;
    st->archive = opt->archive;
    st->archive.counters = &st->archive_counters;
    art_scan_opts_default(&st->scan);
    if (opt->scan.max_pickle_stack != 0)
        st->scan = opt->scan;
    st->scan.allow = opt->scan.allow;
    st->scan.n_allow = opt->scan.n_allow;
    st->scan_skip = opt->scan_skip;
    st->keys = opt->keys;
    st->nreaders = opt->read_conns ? opt->read_conns : 4;
    st->data_dir = strdup(opt->data_dir);
    st->started_ms = mg_now_ms();
    if (store_coherence_open(st, err) != MG_OK || store_token_cache_open(st, err) != MG_OK ||
        store_owners_memo_open(st, err) != MG_OK)
        goto fail; /* rc is MG_ENOMEM, their only failure */
    if (opt->database && (st->database = strdup(opt->database)) == NULL)
        goto fail;
    if (opt->host_name)
        snprintf(st->host_name, sizeof(st->host_name), "%s", opt->host_name);
    else if (gethostname(st->host_name, sizeof(st->host_name) - 1) != 0)
        snprintf(st->host_name, sizeof(st->host_name), "localhost");
    st->db_path = path_join(opt->data_dir, "modelgate.db");
    blobs = opt->blobs ? strdup(opt->blobs) : NULL;
    if (blobs == NULL && st->data_dir && asprintf(&blobs, "file:%s/blobs", opt->data_dir) < 0)
        blobs = NULL;
    if (!st->data_dir || !st->db_path || !blobs)
        goto fail;
    shared = opt->blobs != NULL;
    /* Scratch is the data directory's tmp/ unless the backend keeps its own (file: the
     * blob directory's tmp/, same disk: spools rename-free): blob_tmp_dir once open. */
    st->tmp_dir = path_join(opt->data_dir, "tmp");
    st->readers = calloc(st->nreaders, sizeof(*st->readers));
    st->rbusy = calloc(st->nreaders, 1);
    if (!st->tmp_dir || !st->readers || !st->rbusy) {
        mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto fail;
    }
    if ((rc = make_dir(st->data_dir, err)) != MG_OK)
        goto fail;
    {
        struct blob_options bo = {
            .url = blobs, .credentials = opt->blobs_credentials, .tmp_dir = st->tmp_dir};
        if ((rc = blob_open(&bo, &st->blobs, err)) != MG_OK)
            goto fail;
        free(st->tmp_dir);
        if ((st->tmp_dir = strdup(blob_tmp_dir(st->blobs))) == NULL) {
            rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
            goto fail;
        }
    }
    if ((rc = lock_dir(st, err)) != MG_OK)
        goto fail;
    sweep_tmp(st->tmp_dir, shared && blob_can(st->blobs, BLOB_CAN_LOCAL_FILES));
    if ((rc = store_replica_init(st, err)) != MG_OK)
        goto fail;
    tighten_modes(st->data_dir);

    {
        /* PostgreSQL sessions say whose they are and what for (pg_stat_activity). */
        char app[4][48];
        struct db_open_options o = {.path = st->db_path,
                                    .url = opt->database,
                                    .writer = true,
                                    .sync_normal = opt->sync_normal,
                                    .app_name = app[0]};

        snprintf(app[0], sizeof(app[0]), "modelgated %s writer", st->replica_id);
        snprintf(app[1], sizeof(app[1]), "modelgated %s reader", st->replica_id);
        snprintf(app[2], sizeof(app[2]), "modelgated %s leader", st->replica_id);
        snprintf(app[3], sizeof(app[3]), "modelgated %s listener", st->replica_id);
        if ((rc = db_open(&o, &st->writer, err)) != MG_OK)
            goto fail;
        db_set_context(st->writer, st);
        if ((rc = migrate(st->writer, err)) != MG_OK)
            goto fail;
        o.writer = false;
        o.app_name = app[1];
        for (i = 0; i < st->nreaders; i++) {
            if ((rc = db_open(&o, &st->readers[i], err)) != MG_OK)
                goto fail;
        }
        o.app_name = app[2];
        if (st->database && (rc = db_open(&o, &st->leader_conn, err)) != MG_OK)
            goto fail;
        o.app_name = app[3];
        if (st->database && ((rc = db_open(&o, &st->notify_conn, err)) != MG_OK ||
                             (rc = db_listen(st->notify_conn, "mg_change", err)) != MG_OK))
            goto fail;
    }
    if ((st->database == NULL && (rc = store_replica_forget_others(st, err)) != MG_OK) ||
        (rc = store_recover_own(st, err)) != MG_OK)
        goto fail;
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
    /* Readers first: the writer folds the WAL back as it closes, so the
     * database is one file at rest. */
    for (i = 0; st->readers && i < st->nreaders; i++)
        db_close(&st->readers[i]);
    db_close(&st->leader_conn);
    db_close(&st->notify_conn);
    db_close(&st->writer);
    pthread_mutex_destroy(&st->wlock);
    pthread_mutex_destroy(&st->rlock);
    store_token_cache_close(st);
    store_owners_memo_close(st);
    pthread_mutex_destroy(&st->gc_lock);
    pthread_cond_destroy(&st->rcond);
    store_coherence_close(st);
    free(st->readers);
    free(st->rbusy);
    free(st->data_dir);
    free(st->database);
    free(st->db_path);
    blob_close(&st->blobs);
    free(st->tmp_dir);
    if (st->lock_fd >= 0)
        close(st->lock_fd);
    free(st);
    *stp = NULL;
}

struct db_conn *store_read_begin(struct store *st)
{
    struct db_conn *c = store_read_borrow(st);

    if (db_begin(c, DB_READ, NULL) != MG_OK) {
        /* Reads then run without one snapshot; a broken connection shows in
         * the first statement's error. */
    }
    return c;
}

struct db_conn *store_read_one(struct store *st)
{
    struct db_conn *c = store_read_borrow(st);

    if (db_begin(c, DB_READ_ONE, NULL) != MG_OK) {
        /* Not connected: the first statement says so. */
    }
    return c;
}

void store_read_end(struct store *st, struct db_conn *c)
{
    /* Ends any statement left stepping, so the next borrower does not read
     * old data under a model's new epoch. */
    if (db_commit(c, NULL) != MG_OK) {
        /* A read transaction has nothing to lose; db_commit rolled it back. */
    }
    store_read_return(st, c);
}

struct db_conn *store_read_borrow(struct store *st)
{
    unsigned i;
    struct db_conn *c = NULL;

    pthread_mutex_lock(&st->rlock);
    while (c == NULL) {
        for (i = 0; i < st->nreaders; i++) {
            if (!st->rbusy[i]) {
                st->rbusy[i] = 1;
                c = st->readers[i];
                break;
            }
        }
        if (c == NULL) {
            st->rwaits++;
            pthread_cond_wait(&st->rcond, &st->rlock);
        }
    }
    pthread_mutex_unlock(&st->rlock);
    return c;
}

void store_read_return(struct store *st, struct db_conn *c)
{
    unsigned i;

    pthread_mutex_lock(&st->rlock);
    for (i = 0; i < st->nreaders; i++) {
        if (st->readers[i] == c)
            st->rbusy[i] = 0;
    }
    pthread_cond_signal(&st->rcond);
    pthread_mutex_unlock(&st->rlock);
}

struct db_conn *store_write_begin(struct store *st, struct mg_error *err)
{
    pthread_mutex_lock(&st->wlock);
    if (db_begin(st->writer, DB_WRITE, err) != MG_OK) {
        pthread_mutex_unlock(&st->wlock);
        return NULL;
    }
    return st->writer;
}

enum mg_code store_write_end(struct store *st, struct db_conn *c, enum mg_code rc,
                             struct mg_error *err)
{
    int64_t sync;

    if (rc == MG_OK)
        rc = db_commit(c, err);
    else
        db_rollback(c);
    /* After the commit is visible: a reader that sees a model's new epoch sees
     * the data. */
    sync = store_epochs_commit(st, rc == MG_OK);
    pthread_mutex_unlock(&st->wlock);
    /* Not done before other replicas' caches stopped answering with what was true
     * before (the write's caller replies next). Other writers go on meanwhile. */
    if (sync > 0)
        store_cache_sync(st, sync);
    return rc;
}

bool store_ready(struct store *st, struct mg_error *err)
{
    struct mg_error e;
    struct db_conn *c;
    bool ok;

    if (err == NULL)
        err = &e;
    c = store_write_begin(st, err);
    if (c == NULL)
        return false;
    ok = db_exec_script(c,
                        "CREATE TEMP TABLE IF NOT EXISTS readyz_probe (x INTEGER); "
                        "INSERT INTO readyz_probe VALUES (1); DELETE FROM readyz_probe",
                        err) == MG_OK;
    store_write_end(st, c, MG_EIO, &e); /* roll back: the probe leaves nothing */
    if (!ok)
        return false;
    return blob_check(st->blobs, err) == MG_OK;
}

const char *store_blobs_url_kind(const char *url, struct mg_error *err)
{
    return blob_url_kind(url, err);
}

const char *store_blobs_kind(const struct store *st)
{
    return blob_kind(st->blobs);
}

bool store_blobs_can(const struct store *st, enum blob_can what)
{
    return blob_can(st->blobs, what);
}

enum mg_code store_blob_presign(struct store *st, const char *digest, unsigned ttl_s, char **url,
                                struct mg_error *err)
{
    return blob_presign(st->blobs, digest, ttl_s, url, err);
}

enum mg_code store_model_id(struct db_conn *c, const char *name, int64_t *id, struct mg_error *err)
{
    static const char sql[] = "SELECT id FROM models WHERE name = ?";
    struct db_stmt *s = db_prepare(c, sql);
    enum mg_code rc;
    bool row;

    db_bind_text(s, 1, name);
    if ((rc = db_step(s, &row, err)) != MG_OK)
        return rc;
    if (!row)
        return mg_fail(err, MG_ENOTFOUND, NULL, "model '%s' does not exist", name);
    *id = db_col_i64(s, 0);
    db_reset(s);
    return MG_OK;
}

enum mg_code store_version_id(struct db_conn *c, const char *model, int64_t n, int64_t *id,
                              struct mg_error *err)
{
    static const char sql[] = "SELECT v.id FROM versions v JOIN models m ON m.id = v.model_id "
                              "WHERE m.name = ? AND v.version = ?";
    struct db_stmt *s;
    int64_t mid;
    enum mg_code rc;
    bool row;

    if ((rc = store_model_id(c, model, &mid, err)) != MG_OK)
        return rc;
    s = db_prepare(c, sql);
    db_bind_text(s, 1, model);
    db_bind_i64(s, 2, n);
    if ((rc = db_step(s, &row, err)) != MG_OK)
        return rc;
    if (!row)
        return mg_fail(err, MG_ENOTFOUND, NULL, "model '%s' has no version %lld", model,
                       (long long)n);
    *id = db_col_i64(s, 0);
    db_reset(s);
    return MG_OK;
}

/* Rows of (text key, count) into an object. */
static enum mg_code group_counts(struct db_conn *c, const char *sql, json_t *into,
                                 struct mg_error *err)
{
    struct db_stmt *s = db_prepare(c, sql);
    enum mg_code rc;
    bool row;

    while ((rc = db_step(s, &row, err)) == MG_OK && row)
        json_object_set_new(into, db_col_text(s, 0), json_integer(db_col_i64(s, 1)));
    return rc;
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
    static const char sql_leases[] =
        "SELECT coalesce(sum(CASE WHEN lease_owner = ? THEN 1 ELSE 0 END), 0), "
        "coalesce(sum(CASE WHEN lease_owner != ? THEN 1 ELSE 0 END), 0) "
        "FROM outbox WHERE lease_until > ?";
    static const char sql_live[] = "SELECT count(*) FROM replicas WHERE last_seen_ms > ?";
    static const char sql_lag[] =
        "SELECT g.name, coalesce(max(CASE WHEN o.state != 'in_sync' THEN ? - o.written_ms END), 0) "
        "FROM gateways g LEFT JOIN outbox o ON o.gateway = g.name GROUP BY g.name";
    struct db_conn *c = store_read_begin(st);
    json_t *promo = json_object(), *smoke = json_object(), *deliv = json_array();
    json_t *lag = json_object();
    struct db_stmt *s;
    char path[PATH_MAX];
    struct stat sb;
    int64_t wal = 0, db = 0, now = store_clock_ms(st), mine = 0, others = 0, live = 0;
    unsigned busy = 0, i;
    uint64_t waits;
    enum mg_code rc;
    bool row;

    *out = NULL;
    if ((rc = group_counts(c, sql_promo, promo, err)) != MG_OK ||
        (rc = group_counts(c, sql_smoke, smoke, err)) != MG_OK)
        goto out;
    s = db_prepare(c, sql_deliv);
    while ((rc = db_step(s, &row, err)) == MG_OK && row)
        json_array_append_new(
            deliv, json_pack("{s:o, s:o, s:I}", "gateway", store_col_json_string(s, 0), "state",
                             store_col_json_string(s, 1), "count", (json_int_t)db_col_i64(s, 2)));
    if (rc != MG_OK)
        goto out;
    s = db_prepare(c, sql_lag);
    db_bind_i64(s, 1, now);
    while ((rc = db_step(s, &row, err)) == MG_OK && row)
        json_object_set_new(lag, db_col_text(s, 0), json_real((double)db_col_i64(s, 1) / 1000.0));
    if (rc != MG_OK)
        goto out;
    s = db_prepare(c, sql_leases);
    db_bind_text(s, 1, st->replica_id);
    db_bind_text(s, 2, st->replica_id);
    db_bind_i64(s, 3, store_clock_ms(st));
    if ((rc = db_step(s, &row, err)) == MG_OK && row) {
        mine = db_col_i64(s, 0);
        others = db_col_i64(s, 1);
        db_reset(s);
    }
    if (rc != MG_OK)
        goto out;
    s = db_prepare(c, sql_live);
    db_bind_i64(s, 1, store_clock_ms(st) - STORE_REPLICA_DEAD_MS);
    if ((rc = db_step(s, &row, err)) == MG_OK && row) {
        live = db_col_i64(s, 0);
        db_reset(s);
    }
out:
    store_read_end(st, c);
    if (rc != MG_OK) {
        json_decref(promo);
        json_decref(smoke);
        json_decref(deliv);
        json_decref(lag);
        return rc;
    }
    snprintf(path, sizeof(path), "%s-wal", st->db_path);
    if (stat(path, &sb) == 0)
        wal = sb.st_size;
    if (stat(st->db_path, &sb) == 0)
        db = sb.st_size;
    pthread_mutex_lock(&st->rlock);
    for (i = 0; i < st->nreaders; i++)
        busy += st->rbusy[i];
    waits = st->rwaits;
    pthread_mutex_unlock(&st->rlock);
    *out = json_pack("{s:o, s:o, s:o, s:o, s:I, s:I, s:s, s:{s:i, s:i, s:I}, s:{s:I, s:I}, s:I, "
                     "s:b}",
                     "promotions", promo, "smoke_tests", smoke, "deliveries", deliv,
                     "delivery_lag_seconds", lag, "wal_bytes", (json_int_t)wal, "db_bytes",
                     (json_int_t)db, "database", store_database_kind(st), "pool", "readers",
                     (int)st->nreaders, "busy", (int)busy, "waits", (json_int_t)waits,
                     "outbox_leases", "self", (json_int_t)mine, "others", (json_int_t)others,
                     "replicas_live", (json_int_t)live, "leader", store_leader(st));
    return *out ? MG_OK : mg_fail(err, MG_ENOMEM, NULL, "out of memory");
}
