/*
 * test_store.c - store/: the SQLite store against a real database file and
 * blob directory in a fresh mkdtemp() directory per test (no mocks).
 *
 * Where a test needs to look under the API (the schema_migrations table, a
 * tampered audit row), it closes the store and uses the sqlite3 C API on the
 * same file directly. The store is opened without signing keys.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <sqlite3.h>

#include "common/util.h"
#include "store/store.h"
#include "store/store_int.h" /* store_write_sql */

#define TMP_TEMPLATE "/tmp/test_store.XXXXXX"
#define ZERO_HASH "0000000000000000000000000000000000000000000000000000000000000000"

struct fx {
    char dir[sizeof(TMP_TEMPLATE)];
    struct store *st;
    struct mg_error err;
};

/* ---- fixture ---------------------------------------------------------------------------- */

static void path_of(const struct fx *fx, const char *rel, char *out, size_t n)
{
    snprintf(out, n, "%s/%s", fx->dir, rel);
}

static enum mg_code open_store_at(const char *dir, struct store **st, struct mg_error *err)
{
    struct store_options opt;

    memset(&opt, 0, sizeof(opt));
    opt.data_dir = dir;
    opt.sync_normal = true;
    opt.read_conns = 2;
    store_archive_limits_default(&opt.archive);
    opt.keys = NULL;
    return store_open(&opt, st, err);
}

static void reopen(struct fx *fx)
{
    store_close(&fx->st);
    assert_null(fx->st);
    mg_error_clear(&fx->err);
    if (open_store_at(fx->dir, &fx->st, &fx->err) != MG_OK)
        fail_msg("store_open: %s", fx->err.message);
}

static int fx_setup(void **state)
{
    struct fx *fx = calloc(1, sizeof(*fx));

    if (fx == NULL)
        return -1;
    memcpy(fx->dir, TMP_TEMPLATE, sizeof(TMP_TEMPLATE));
    if (mkdtemp(fx->dir) == NULL) {
        free(fx);
        return -1;
    }
    if (open_store_at(fx->dir, &fx->st, &fx->err) != MG_OK) {
        fprintf(stderr, "store_open: %s\n", fx->err.message);
        free(fx);
        return -1;
    }
    *state = fx;
    return 0;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int fx_teardown(void **state)
{
    struct fx *fx = *state;
    int r;

    store_close(&fx->st);
    r = nftw(fx->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    free(fx);
    return r;
}

/* ---- helpers ---------------------------------------------------------------------------- */

static void digest_of(const void *data, size_t n, char out[72])
{
    memcpy(out, "sha256:", 7);
    mg_sha256_hex(data, n, out + 7);
}

static int count_regular;

static int count_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)path;
    (void)sb;
    (void)ftw;
    if (flag == FTW_F)
        count_regular++;
    return 0;
}

/* Regular files under <data>/<rel>, recursively. */
static int files_under(const struct fx *fx, const char *rel)
{
    char p[256];

    path_of(fx, rel, p, sizeof(p));
    count_regular = 0;
    assert_int_equal(nftw(p, count_one, 16, FTW_PHYS), 0);
    return count_regular;
}

static bool is_dir(const char *p, mode_t *mode)
{
    struct stat sb;

    if (stat(p, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return false;
    *mode = sb.st_mode & 0777;
    return true;
}

/* Run SQL on the database file directly (the store must be closed). */
static void raw_exec(const struct fx *fx, const char *sql)
{
    char p[256];
    sqlite3 *db = NULL;
    char *msg = NULL;

    path_of(fx, "modelgate.db", p, sizeof(p));
    assert_int_equal(sqlite3_open_v2(p, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
        fail_msg("%s: %s", sql, msg);
    assert_int_equal(sqlite3_close(db), SQLITE_OK);
}

static int64_t db_int(const struct fx *fx, const char *sql)
{
    char p[256];
    sqlite3 *db = NULL;
    sqlite3_stmt *s = NULL;
    int64_t v = -1;

    path_of(fx, "modelgate.db", p, sizeof(p));
    assert_int_equal(sqlite3_open_v2(p, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK);
    if (sqlite3_step(s) == SQLITE_ROW)
        v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    assert_int_equal(sqlite3_close(db), SQLITE_OK);
    return v;
}

/* Upload bytes in chunks of `chunk`; on success *blob is the commit's record. */
static enum mg_code upload(struct fx *fx, const void *data, size_t n, size_t chunk, uint64_t max,
                           const char *expected, json_t **blob, bool *created)
{
    struct store_blob_upload *up = NULL;
    const char *p = data;
    size_t off = 0;
    enum mg_code rc;

    mg_error_clear(&fx->err);
    rc = store_blob_upload_begin(fx->st, max, &up, &fx->err);
    if (rc != MG_OK)
        return rc;
    while (off < n) {
        size_t k = n - off < chunk ? n - off : chunk;
        rc = store_blob_upload_write(up, p + off, k, &fx->err);
        if (rc != MG_OK) {
            store_blob_upload_abort(&up);
            return rc;
        }
        off += k;
    }
    rc = store_blob_upload_commit(&up, "alice", expected, blob, created, &fx->err);
    assert_null(up);
    return rc;
}

/* Store a small non-archive blob; digest_out receives its digest. */
static void put_blob(struct fx *fx, const char *text, char digest_out[72])
{
    json_t *blob = NULL;
    bool created = false;

    digest_of(text, strlen(text), digest_out);
    if (upload(fx, text, strlen(text), 1024, 1 << 20, digest_out, &blob, &created) != MG_OK)
        fail_msg("upload: %s", fx->err.message);
    json_decref(blob);
}

static json_t *audit_items(struct fx *fx)
{
    json_t *out = NULL, *items;

    if (store_audit_list(fx->st, 0, 1000, &out, &fx->err) != MG_OK)
        fail_msg("store_audit_list: %s", fx->err.message);
    items = json_incref(json_object_get(out, "items"));
    json_decref(out);
    assert_non_null(items);
    return items;
}

static size_t audit_count(struct fx *fx)
{
    json_t *items = audit_items(fx);
    size_t n = json_array_size(items);

    json_decref(items);
    return n;
}

static size_t audit_count_action(struct fx *fx, const char *action)
{
    json_t *items = audit_items(fx), *e;
    size_t i, n = 0;

    json_array_foreach(items, i, e)
    {
        if (strcmp(json_string_value(json_object_get(e, "action")), action) == 0)
            n++;
    }
    json_decref(items);
    return n;
}

static void make_model(struct fx *fx, const char *name)
{
    json_t *req = json_pack("{s:s}", "name", name), *out = NULL;

    if (store_model_create(fx->st, "alice", req, &out, &fx->err) != MG_OK)
        fail_msg("store_model_create(%s): %s", name, fx->err.message);
    json_decref(out);
    json_decref(req);
}

/* Create a version from a request built by the caller (req is consumed). */
static int64_t make_version(struct fx *fx, const char *model, json_t *req)
{
    json_t *out = NULL;
    int64_t n;

    assert_non_null(req);
    if (store_version_create(fx->st, "alice", model, req, &out, &fx->err) != MG_OK)
        fail_msg("store_version_create(%s): %s", model, fx->err.message);
    n = json_integer_value(json_object_get(out, "version"));
    json_decref(out);
    json_decref(req);
    return n;
}

static bool is_rfc3339_ms(const char *s)
{
    /* 2026-11-21T10:00:00.123Z */
    return s != NULL && strlen(s) == 24 && s[4] == '-' && s[7] == '-' && s[10] == 'T' &&
           s[13] == ':' && s[16] == ':' && s[19] == '.' && s[23] == 'Z';
}

/* ---- open, layout, migrations ------------------------------------------------------------ */

static void test_open_creates_layout(void **state)
{
    struct fx *fx = *state;
    char p[256];
    mode_t mode = 0;
    struct stat sb;

    path_of(fx, "blobs", p, sizeof(p));
    assert_true(is_dir(p, &mode));
    assert_int_equal(mode, 0700);
    path_of(fx, "blobs/sha256", p, sizeof(p));
    assert_true(is_dir(p, &mode));
    assert_int_equal(mode, 0700);
    path_of(fx, "blobs/tmp", p, sizeof(p));
    assert_true(is_dir(p, &mode));
    assert_int_equal(mode, 0700);
    path_of(fx, "modelgate.db", p, sizeof(p));
    assert_int_equal(stat(p, &sb), 0);
    assert_true(S_ISREG(sb.st_mode));
    assert_true(store_ready(fx->st));

    /* Every migration is recorded, numbered 1..N. */
    assert_true(store_schema_version() >= 2);
    store_close(&fx->st);
    /* The WAL is folded back on close: the database is one file at rest. */
    path_of(fx, "modelgate.db-wal", p, sizeof(p));
    assert_true(stat(p, &sb) != 0 || sb.st_size == 0);
    assert_int_equal(db_int(fx, "SELECT count(*) FROM schema_migrations"), store_schema_version());
    assert_int_equal(db_int(fx, "SELECT max(version) FROM schema_migrations"),
                     store_schema_version());
    assert_int_equal(db_int(fx, "SELECT min(version) FROM schema_migrations"), 1);
    /* ... and their tables exist. */
    assert_int_equal(db_int(fx, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND "
                                "name IN ('tokens','blobs','blob_files','models','versions',"
                                "'version_datasets','version_metrics','datasets',"
                                "'dataset_parents','audit','audit_head','version_signatures')"),
                     12);
}

static void test_open_creates_missing_data_dir(void **state)
{
    struct fx *fx = *state;
    char sub[256];
    struct store *st = NULL;
    struct mg_error err;
    mode_t mode = 0;

    path_of(fx, "nested-data", sub, sizeof(sub));
    assert_int_equal(open_store_at(sub, &st, &err), MG_OK);
    assert_non_null(st);
    assert_true(is_dir(sub, &mode));
    assert_int_equal(mode, 0700);
    store_close(&st);
    assert_null(st);
}

static void test_reopen_keeps_data_and_migrations(void **state)
{
    struct fx *fx = *state;
    json_t *m = NULL;

    make_model(fx, "resnet");
    reopen(fx);
    assert_int_equal(store_model_get(fx->st, "resnet", &m, &fx->err), MG_OK);
    assert_string_equal(json_string_value(json_object_get(m, "name")), "resnet");
    json_decref(m);
    reopen(fx); /* twice: migrations are not re-applied */
    store_close(&fx->st);
    assert_int_equal(db_int(fx, "SELECT count(*) FROM schema_migrations"), store_schema_version());
    assert_int_equal(db_int(fx, "SELECT count(*) FROM models"), 1);
    reopen(fx);
}

/* One process per data directory: a second open is refused, and the lock
 * goes with the store that held it. */
static void test_second_open_refused(void **state)
{
    struct fx *fx = *state;
    struct store *other = NULL;
    struct mg_error err;

    assert_int_equal(open_store_at(fx->dir, &other, &err), MG_EUNAVAIL);
    assert_null(other);
    assert_non_null(strstr(err.message, "in use by another modelgated process"));
    store_close(&fx->st);
    assert_int_equal(open_store_at(fx->dir, &other, &err), MG_OK);
    fx->st = other;
}

/* The epoch moves with every committed write, and only then. */
static void test_data_epoch(void **state)
{
    struct fx *fx = *state;
    json_t *m = NULL, *out = NULL;
    uint64_t e0, e1;

    e0 = store_data_epoch(fx->st);
    assert_int_equal(store_model_get(fx->st, "absent", &m, &fx->err), MG_ENOTFOUND);
    assert_int_equal(store_data_epoch(fx->st), e0); /* a read */
    make_model(fx, "resnet");
    e1 = store_data_epoch(fx->st);
    assert_true(e1 > e0);
    assert_int_equal(store_model_get(fx->st, "resnet", &m, &fx->err), MG_OK);
    json_decref(m);
    assert_int_equal(store_data_epoch(fx->st), e1);
    m = json_pack("{s:s}", "description", "changed");
    assert_int_equal(store_model_patch(fx->st, "bob", "resnet", m, &out, &fx->err), MG_OK);
    json_decref(out);
    json_decref(m);
    assert_true(store_data_epoch(fx->st) > e1);
    /* A write that fails, or commits without changing a row (an idle worker's
     * claim that finds nothing), leaves it alone. */
    e1 = store_data_epoch(fx->st);
    m = json_pack("{s:s}", "name", "resnet");
    assert_int_equal(store_model_create(fx->st, "bob", m, &out, &fx->err), MG_ECONFLICT);
    json_decref(m);
    assert_int_equal(store_write_sql(fx->st, "DELETE FROM models WHERE 0", &fx->err), MG_OK);
    assert_int_equal(store_data_epoch(fx->st), e1);
}

static void test_refuses_newer_schema(void **state)
{
    struct fx *fx = *state;
    struct store *sentinel = (struct store *)&fx->err, *st = sentinel;
    struct mg_error err;

    store_close(&fx->st);
    raw_exec(fx, "INSERT INTO schema_migrations(version,name,applied_at) "
                 "VALUES(999,'future','x')");
    mg_error_clear(&err);
    assert_int_equal(open_store_at(fx->dir, &st, &err), MG_EINVAL);
    assert_int_equal(err.code, MG_EINVAL);
    assert_ptr_equal(st, sentinel); /* out untouched */
    if (strstr(err.message, "999") == NULL)
        fail_msg("message does not name the version: %s", err.message);
    /* Nothing was changed by the refused open. */
    assert_int_equal(db_int(fx, "SELECT max(version) FROM schema_migrations"), 999);
    assert_int_equal(db_int(fx, "SELECT count(*) FROM schema_migrations"),
                     store_schema_version() + 1);
}

static void test_sweeps_interrupted_uploads(void **state)
{
    struct fx *fx = *state;
    char p[256];
    int fd;

    store_close(&fx->st);
    path_of(fx, "blobs/tmp/upload-xyz", p, sizeof(p));
    fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "partial", 7), 7);
    close(fd);
    path_of(fx, "blobs/tmp/upload-AbC123", p, sizeof(p));
    fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(files_under(fx, "blobs/tmp"), 2);
    reopen(fx);
    assert_int_equal(files_under(fx, "blobs/tmp"), 0);
    path_of(fx, "blobs/tmp/upload-xyz", p, sizeof(p));
    assert_int_equal(access(p, F_OK), -1);
}

/* ---- tokens ------------------------------------------------------------------------------ */

static void test_token_bootstrap_and_authenticate(void **state)
{
    struct fx *fx = *state;
    char secret[STORE_TOKEN_SECRET_LEN + 1], again[STORE_TOKEN_SECRET_LEN + 1], wrong[64];
    bool created = false;
    struct store_principal who;
    size_t i;

    assert_int_equal(store_token_bootstrap(fx->st, secret, &created, &fx->err), MG_OK);
    assert_true(created);
    assert_int_equal(strlen(secret), STORE_TOKEN_SECRET_LEN);
    assert_memory_equal(secret, "mgt_", 4);
    for (i = 4; i < STORE_TOKEN_SECRET_LEN; i++)
        assert_non_null(
            strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", secret[i]));

    /* Only once: a second bootstrap (also after a restart) creates nothing. */
    memset(again, 0, sizeof(again));
    assert_int_equal(store_token_bootstrap(fx->st, again, &created, &fx->err), MG_OK);
    assert_false(created);
    reopen(fx);
    assert_int_equal(store_token_bootstrap(fx->st, again, &created, &fx->err), MG_OK);
    assert_false(created);

    memset(&who, 0, sizeof(who));
    assert_int_equal(store_token_authenticate(fx->st, secret, strlen(secret), &who), MG_OK);
    assert_string_equal(who.name, "admin");
    assert_int_equal(who.roles, STORE_ROLE_ADMIN);
    assert_memory_equal(who.id, "tok_", 4);

    /* Wrong secrets: one character off, truncated, extended, empty, huge. */
    memcpy(wrong, secret, sizeof(secret));
    wrong[10] = wrong[10] == 'A' ? 'B' : 'A';
    assert_int_equal(store_token_authenticate(fx->st, wrong, strlen(wrong), &who), MG_EUNAUTH);
    assert_int_equal(store_token_authenticate(fx->st, secret, strlen(secret) - 1, &who),
                     MG_EUNAUTH);
    memcpy(wrong, secret, sizeof(secret));
    strcat(wrong, "x");
    assert_int_equal(store_token_authenticate(fx->st, wrong, strlen(wrong), &who), MG_EUNAUTH);
    assert_int_equal(store_token_authenticate(fx->st, "", 0, &who), MG_EUNAUTH);
    {
        char huge[1000];
        memset(huge, 'a', sizeof(huge));
        assert_int_equal(store_token_authenticate(fx->st, huge, sizeof(huge), &who), MG_EUNAUTH);
    }

    /* The secret itself is not stored, only its SHA-256. */
    store_close(&fx->st);
    {
        char sql[300], hex[65];
        mg_sha256_hex(secret, strlen(secret), hex);
        snprintf(sql, sizeof(sql),
                 "SELECT count(*) FROM tokens WHERE lower(hex(secret_hash)) = '%s'", hex);
        assert_int_equal(db_int(fx, sql), 1);
        snprintf(sql, sizeof(sql),
                 "SELECT count(*) FROM tokens WHERE instr(CAST(secret_hash AS TEXT), '%s') > 0 "
                 "OR instr(id, '%s') > 0 OR instr(name, '%s') > 0",
                 secret + 4, secret + 4, secret + 4);
        assert_int_equal(db_int(fx, sql), 0);
    }
    reopen(fx);
}

static void test_token_create_and_delete(void **state)
{
    struct fx *fx = *state;
    json_t *tok = NULL, *tok2 = NULL, *list = NULL;
    struct store_principal who;
    const char *secret, *id;
    char saved[STORE_TOKEN_SECRET_LEN + 1];

    assert_int_equal(store_token_create(fx->st, "admin", "ci",
                                        STORE_ROLE_PUBLISHER | STORE_ROLE_READER, NULL, NULL, &tok,
                                        &fx->err),
                     MG_OK);
    secret = json_string_value(json_object_get(tok, "token"));
    id = json_string_value(json_object_get(tok, "id"));
    assert_non_null(secret);
    assert_non_null(id);
    assert_string_equal(json_string_value(json_object_get(tok, "name")), "ci");
    assert_string_equal(json_string_value(json_object_get(tok, "created_by")), "admin");
    assert_true(is_rfc3339_ms(json_string_value(json_object_get(tok, "created_at"))));
    assert_int_equal(json_array_size(json_object_get(tok, "roles")), 2);
    snprintf(saved, sizeof(saved), "%s", secret);

    assert_int_equal(store_token_authenticate(fx->st, saved, strlen(saved), &who), MG_OK);
    assert_string_equal(who.name, "ci");
    assert_int_equal(who.roles, STORE_ROLE_PUBLISHER | STORE_ROLE_READER);
    assert_string_equal(who.id, id);

    /* Live names are unique. */
    assert_int_equal(
        store_token_create(fx->st, "admin", "ci", STORE_ROLE_READER, NULL, NULL, &tok2, &fx->err),
        MG_ECONFLICT);
    assert_string_equal(fx->err.field, "name");
    assert_null(tok2);

    /* The list never shows secrets. */
    assert_int_equal(store_token_list(fx->st, &list, &fx->err), MG_OK);
    assert_int_equal(json_array_size(json_object_get(list, "items")), 1);
    assert_null(json_object_get(json_array_get(json_object_get(list, "items"), 0), "token"));
    json_decref(list);

    /* Revoked: stops authenticating at once; a second delete finds nothing. */
    assert_int_equal(store_token_delete(fx->st, "admin", id, &fx->err), MG_OK);
    assert_int_equal(store_token_authenticate(fx->st, saved, strlen(saved), &who), MG_EUNAUTH);
    assert_int_equal(store_token_delete(fx->st, "admin", id, &fx->err), MG_ENOTFOUND);
    assert_int_equal(store_token_delete(fx->st, "admin", "tok_nope", &fx->err), MG_ENOTFOUND);
    assert_int_equal(store_token_list(fx->st, &list, &fx->err), MG_OK);
    assert_int_equal(json_array_size(json_object_get(list, "items")), 0);
    json_decref(list);

    /* The name is free again once revoked. */
    assert_int_equal(
        store_token_create(fx->st, "admin", "ci", STORE_ROLE_READER, NULL, NULL, &tok2, &fx->err),
        MG_OK);
    assert_string_not_equal(json_string_value(json_object_get(tok2, "token")), saved);
    assert_int_equal(audit_count_action(fx, "token.create"), 2);
    assert_int_equal(audit_count_action(fx, "token.delete"), 1);
    json_decref(tok2);
    json_decref(tok);
}

static void test_roles(void **state)
{
    json_t *a;

    (void)state;
    assert_int_equal(store_role_from_name("admin"), STORE_ROLE_ADMIN);
    assert_int_equal(store_role_from_name("reader"), STORE_ROLE_READER);
    assert_int_equal(store_role_from_name("deployer"), STORE_ROLE_DEPLOYER);
    assert_int_equal(store_role_from_name("Admin"), 0);
    assert_int_equal(store_role_from_name(""), 0);
    a = store_roles_to_json(STORE_ROLE_REVIEWER | STORE_ROLE_PUBLISHER);
    assert_int_equal(json_array_size(a), 2);
    assert_string_equal(json_string_value(json_array_get(a, 0)), "publisher");
    assert_string_equal(json_string_value(json_array_get(a, 1)), "reviewer");
    json_decref(a);
    a = store_roles_to_json(0);
    assert_int_equal(json_array_size(a), 0);
    json_decref(a);
}

/* ---- blobs ------------------------------------------------------------------------------- */

static void test_blob_upload_commit(void **state)
{
    struct fx *fx = *state;
    static const char data[] = "hello, model registry\n";
    char digest[72], p[256];
    json_t *blob = NULL, *got = NULL;
    bool created = false;
    int fd = -1;
    uint64_t size = 0;
    char buf[64];

    digest_of(data, strlen(data), digest);
    assert_int_equal(upload(fx, data, strlen(data), 5, 1 << 20, digest, &blob, &created), MG_OK);
    assert_true(created);
    assert_string_equal(json_string_value(json_object_get(blob, "digest")), digest);
    assert_int_equal(json_integer_value(json_object_get(blob, "size")), strlen(data));
    assert_string_equal(json_string_value(json_object_get(blob, "media_type")),
                        "application/octet-stream");
    assert_true(json_is_null(json_object_get(blob, "files")));
    json_decref(blob);

    /* In place under blobs/sha256/<2 hex>/<hex>; no temp file left. */
    snprintf(p, sizeof(p), "%s/blobs/sha256/%.2s/%s", fx->dir, digest + 7, digest + 7);
    assert_int_equal(access(p, R_OK), 0);
    assert_int_equal(files_under(fx, "blobs/tmp"), 0);
    assert_int_equal(files_under(fx, "blobs/sha256"), 1);

    assert_int_equal(store_blob_get(fx->st, digest, &got, &fx->err), MG_OK);
    assert_string_equal(json_string_value(json_object_get(got, "created_by")), "alice");
    assert_true(is_rfc3339_ms(json_string_value(json_object_get(got, "created_at"))));
    json_decref(got);

    assert_int_equal(store_blob_open(fx->st, digest, &fd, &size, &fx->err), MG_OK);
    assert_int_equal(size, strlen(data));
    assert_int_equal(read(fd, buf, sizeof(buf)), (ssize_t)strlen(data));
    assert_memory_equal(buf, data, strlen(data));
    close(fd);
    assert_int_equal(audit_count_action(fx, "blob.create"), 1);

    /* Without an expected digest the commit is accepted as well. */
    assert_int_equal(upload(fx, "other", 5, 2, 1 << 20, NULL, &blob, &created), MG_OK);
    assert_true(created);
    json_decref(blob);
    assert_int_equal(files_under(fx, "blobs/sha256"), 2);
}

/* Past its first MiB an upload is hashed on a thread of its own through a
 * ring of chunks: the digest must not depend on how the body was cut. */
static void fill_random(uint8_t *p, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (uint8_t)(seed >> 24);
    }
}

static size_t tmp_files(struct fx *fx)
{
    char p[256];
    size_t n = 0;
    DIR *d;
    struct dirent *e;

    path_of(fx, "blobs/tmp", p, sizeof(p));
    assert_non_null(d = opendir(p));
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static void test_blob_upload_large_any_cut(void **state)
{
    static const size_t cuts[] = {4096, 300001, 1u << 20, (1u << 20) + 1, 5u << 20, 6u << 20};
    struct fx *fx = *state;
    size_t n = (5u << 20) + 333;
    uint8_t *data = malloc(n);
    char digest[72], other[72];
    json_t *blob = NULL;
    bool created = false;

    assert_non_null(data);
    fill_random(data, n, 7);
    digest_of((const char *)data, n, digest);
    for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
        if (upload(fx, data, n, cuts[i], 1ull << 30, digest, &blob, &created) != MG_OK)
            fail_msg("chunks of %zu: %s", cuts[i], fx->err.message);
        assert_true(created == (i == 0));
        assert_string_equal(json_string_value(json_object_get(blob, "digest")), digest);
        assert_int_equal(json_integer_value(json_object_get(blob, "size")), n);
        json_decref(blob);
        blob = NULL;
    }
    /* One changed byte near the end, well past where the thread took over. */
    data[n - 10] ^= 1;
    digest_of((const char *)data, n, other);
    assert_string_not_equal(other, digest);
    assert_int_equal(upload(fx, data, n, 65536, 1ull << 30, digest, &blob, &created), MG_EDIGEST);
    assert_null(blob);
    assert_non_null(strstr(fx->err.message, other));
    assert_int_equal(tmp_files(fx), 0);
    free(data);
}

static void test_blob_upload_abort_while_hashing(void **state)
{
    struct fx *fx = *state;
    struct store_blob_upload *up = NULL;
    size_t n = 3u << 20;
    uint8_t *data = malloc(n);

    assert_non_null(data);
    fill_random(data, n, 11);
    assert_int_equal(store_blob_upload_begin(fx->st, 1ull << 30, &up, &fx->err), MG_OK);
    assert_int_equal(store_blob_upload_write(up, data, n, &fx->err), MG_OK);
    assert_int_equal(tmp_files(fx), 1);
    store_blob_upload_abort(&up);
    assert_null(up);
    assert_int_equal(tmp_files(fx), 0);
    free(data);
}

/* More big uploads at once than get a hashing thread: the rest hash inline,
 * every digest still right. */
static void test_blob_uploads_many_at_once(void **state)
{
    enum { N = 24 };
    struct fx *fx = *state;
    struct store_blob_upload *up[N];
    size_t n = (2u << 20) + 17;
    uint8_t *data = malloc(n);
    char digest[N][72];
    json_t *blob = NULL;
    bool created = false;

    assert_non_null(data);
    fill_random(data, n, 3);
    for (int i = 0; i < N; i++) {
        data[0] = (uint8_t)i;
        digest_of((const char *)data, n, digest[i]);
        assert_int_equal(store_blob_upload_begin(fx->st, 1ull << 30, &up[i], &fx->err), MG_OK);
        assert_int_equal(store_blob_upload_write(up[i], data, n / 2, &fx->err), MG_OK);
    }
    for (int i = 0; i < N; i++) {
        data[0] = (uint8_t)i;
        assert_int_equal(store_blob_upload_write(up[i], data + n / 2, n - n / 2, &fx->err), MG_OK);
        if (store_blob_upload_commit(&up[i], "alice", digest[i], &blob, &created, &fx->err) !=
            MG_OK)
            fail_msg("upload %d: %s", i, fx->err.message);
        assert_true(created);
        json_decref(blob);
        blob = NULL;
    }
    assert_int_equal(tmp_files(fx), 0);
    free(data);
}

static void test_blob_upload_wrong_digest(void **state)
{
    struct fx *fx = *state;
    static const char data[] = "the real bytes";
    char wrong[72], right[72];
    json_t *blob = NULL, *got = NULL;
    bool created = true;
    size_t before = audit_count(fx);

    digest_of("other bytes", 11, wrong);
    digest_of(data, strlen(data), right);
    assert_int_equal(upload(fx, data, strlen(data), 4, 1 << 20, wrong, &blob, &created),
                     MG_EDIGEST);
    assert_int_equal(fx->err.code, MG_EDIGEST);
    assert_null(blob);
    assert_non_null(strstr(fx->err.message, right + 7));
    /* Nothing kept: no temp file, no blob file, no row, no audit entry. */
    assert_int_equal(files_under(fx, "blobs/tmp"), 0);
    assert_int_equal(files_under(fx, "blobs/sha256"), 0);
    assert_int_equal(store_blob_get(fx->st, right, &got, &fx->err), MG_ENOTFOUND);
    assert_null(got);
    assert_int_equal(store_blob_get(fx->st, wrong, &got, &fx->err), MG_ENOTFOUND);
    assert_int_equal(audit_count(fx), before);

    /* An uppercase spelling of the right digest is not the right digest. */
    {
        char upper[72];
        size_t i;
        memcpy(upper, right, sizeof(upper));
        for (i = 7; upper[i]; i++)
            if (upper[i] >= 'a' && upper[i] <= 'f')
                upper[i] = (char)(upper[i] - 'a' + 'A');
        assert_int_equal(upload(fx, data, strlen(data), 4, 1 << 20, upper, &blob, &created),
                         MG_EDIGEST);
        assert_int_equal(files_under(fx, "blobs/tmp"), 0);
        assert_int_equal(files_under(fx, "blobs/sha256"), 0);
    }
}

static void test_blob_upload_idempotent(void **state)
{
    struct fx *fx = *state;
    static const char data[] = "same bytes twice";
    char digest[72];
    json_t *a = NULL, *b = NULL;
    bool created = false;

    digest_of(data, strlen(data), digest);
    assert_int_equal(upload(fx, data, strlen(data), 3, 1 << 20, digest, &a, &created), MG_OK);
    assert_true(created);
    assert_int_equal(upload(fx, data, strlen(data), 7, 1 << 20, digest, &b, &created), MG_OK);
    assert_false(created);
    assert_true(json_equal(a, b)); /* same record, without created_at/by */
    assert_null(json_object_get(b, "created_at"));
    json_decref(a);
    json_decref(b);
    assert_int_equal(files_under(fx, "blobs/tmp"), 0);
    assert_int_equal(files_under(fx, "blobs/sha256"), 1);
    assert_int_equal(audit_count_action(fx, "blob.create"), 1);
}

static void test_blob_upload_too_big(void **state)
{
    struct fx *fx = *state;
    struct store_blob_upload *up = NULL;
    json_t *blob = NULL;
    bool created = false;
    char digest[72];

    /* Exactly max is fine; one more byte is refused and not written. */
    assert_int_equal(store_blob_upload_begin(fx->st, 10, &up, &fx->err), MG_OK);
    assert_int_equal(store_blob_upload_write(up, "01234", 5, &fx->err), MG_OK);
    assert_int_equal(store_blob_upload_write(up, "56789", 5, &fx->err), MG_OK);
    assert_int_equal(store_blob_upload_write(up, "X", 1, &fx->err), MG_ETOOBIG);
    assert_int_equal(fx->err.code, MG_ETOOBIG);
    assert_int_equal(store_blob_upload_write(up, "", 0, &fx->err), MG_OK);
    /* The 11th byte did not reach the file or the hash. */
    digest_of("0123456789", 10, digest);
    assert_int_equal(store_blob_upload_commit(&up, "alice", digest, &blob, &created, &fx->err),
                     MG_OK);
    assert_null(up);
    assert_int_equal(json_integer_value(json_object_get(blob, "size")), 10);
    json_decref(blob);

    /* One oversized write on a fresh upload, then abort: nothing left behind. */
    assert_int_equal(store_blob_upload_begin(fx->st, 10, &up, &fx->err), MG_OK);
    assert_int_equal(store_blob_upload_write(up, "0123456789A", 11, &fx->err), MG_ETOOBIG);
    assert_int_equal(files_under(fx, "blobs/tmp"), 1);
    store_blob_upload_abort(&up);
    assert_null(up);
    assert_int_equal(files_under(fx, "blobs/tmp"), 0);
    store_blob_upload_abort(&up); /* NULL is fine */

    /* A huge n does not wrap the size check. */
    assert_int_equal(store_blob_upload_begin(fx->st, 10, &up, &fx->err), MG_OK);
    assert_int_equal(store_blob_upload_write(up, "abc", 3, &fx->err), MG_OK);
    assert_int_equal(store_blob_upload_write(up, "abc", SIZE_MAX, &fx->err), MG_ETOOBIG);
    store_blob_upload_abort(&up);
}

static void test_blob_get_missing(void **state)
{
    struct fx *fx = *state;
    json_t *b = NULL;
    int fd = -1;
    uint64_t size = 0;
    char digest[72];

    digest_of("never uploaded", 14, digest);
    assert_int_equal(store_blob_get(fx->st, digest, &b, &fx->err), MG_ENOTFOUND);
    assert_null(b);
    assert_int_equal(store_blob_open(fx->st, digest, &fd, &size, &fx->err), MG_ENOTFOUND);
    assert_int_equal(fd, -1);
}

/* ---- models ------------------------------------------------------------------------------ */

static void test_model_create_get(void **state)
{
    struct fx *fx = *state;
    json_t *req, *m = NULL, *got = NULL, *dup = NULL, *items, *last;
    size_t before;

    req = json_pack("{s:s, s:s, s:{s:s}}", "name", "resnet", "description", "image model", "tags",
                    "team", "vision");
    assert_int_equal(store_model_create(fx->st, "alice", req, &m, &fx->err), MG_OK);
    assert_string_equal(json_string_value(json_object_get(m, "name")), "resnet");
    assert_string_equal(json_string_value(json_object_get(m, "description")), "image model");
    assert_string_equal(json_string_value(json_object_get(json_object_get(m, "tags"), "team")),
                        "vision");
    assert_string_equal(json_string_value(json_object_get(m, "created_by")), "alice");
    assert_true(is_rfc3339_ms(json_string_value(json_object_get(m, "created_at"))));
    assert_true(json_is_null(json_object_get(m, "latest_version")));
    assert_int_equal(json_array_size(json_object_get(m, "aliases")), 0);

    assert_int_equal(store_model_get(fx->st, "resnet", &got, &fx->err), MG_OK);
    assert_true(json_equal(m, got));
    json_decref(got);

    /* The change and its audit record go together. */
    items = audit_items(fx);
    last = json_array_get(items, json_array_size(items) - 1);
    assert_string_equal(json_string_value(json_object_get(last, "action")), "model.create");
    assert_string_equal(json_string_value(json_object_get(last, "actor")), "alice");
    assert_string_equal(json_string_value(json_object_get(last, "target")), "resnet");
    json_decref(items);

    /* A second create conflicts and records nothing. */
    before = audit_count(fx);
    assert_int_equal(store_model_create(fx->st, "bob", req, &dup, &fx->err), MG_ECONFLICT);
    assert_string_equal(fx->err.field, "name");
    assert_null(dup);
    assert_int_equal(audit_count(fx), before);
    json_decref(req);
    json_decref(m);

    /* Optional members default. */
    req = json_pack("{s:s}", "name", "bare");
    assert_int_equal(store_model_create(fx->st, "alice", req, &m, &fx->err), MG_OK);
    assert_string_equal(json_string_value(json_object_get(m, "description")), "");
    assert_true(json_is_object(json_object_get(m, "tags")));
    assert_int_equal(json_object_size(json_object_get(m, "tags")), 0);
    json_decref(m);
    json_decref(req);

    got = NULL;
    assert_int_equal(store_model_get(fx->st, "nope", &got, &fx->err), MG_ENOTFOUND);
    assert_null(got);
    assert_non_null(strstr(fx->err.message, "nope"));
}

static void expect_names(const json_t *list, const char *const *names, size_t n)
{
    const json_t *items = json_object_get(list, "items");
    size_t i;

    assert_int_equal(json_array_size(items), n);
    for (i = 0; i < n; i++)
        assert_string_equal(json_string_value(json_object_get(json_array_get(items, i), "name")),
                            names[i]);
}

static void test_model_list_q_and_pages(void **state)
{
    struct fx *fx = *state;
    static const char *const all[] = {"alpha-1", "alpha-2", "alpha-3", "beta-1", "gamma"};
    static const char *const alpha[] = {"alpha-1", "alpha-2", "alpha-3"};
    static const char *const a_dash[] = {"alpha-1", "alpha-2", "alpha-3", "beta-1"};
    struct store_page page = {0};
    json_t *out = NULL;
    char token[64];

    /* Created out of order; listed by name. */
    make_model(fx, "gamma");
    make_model(fx, "alpha-2");
    make_model(fx, "beta-1");
    make_model(fx, "alpha-1");
    make_model(fx, "alpha-3");

    page.limit = 10;
    assert_int_equal(store_model_list(fx->st, NULL, &page, &out, &fx->err), MG_OK);
    expect_names(out, all, 5);
    assert_true(json_is_null(json_object_get(out, "next_page_token")));
    json_decref(out);

    /* A page exactly as large as what is left has no next page. */
    page.limit = 5;
    assert_int_equal(store_model_list(fx->st, NULL, &page, &out, &fx->err), MG_OK);
    expect_names(out, all, 5);
    assert_true(json_is_null(json_object_get(out, "next_page_token")));
    json_decref(out);

    /* q is a substring of the name. */
    assert_int_equal(store_model_list(fx->st, "alpha", &page, &out, &fx->err), MG_OK);
    expect_names(out, alpha, 3);
    json_decref(out);
    assert_int_equal(store_model_list(fx->st, "a-", &page, &out, &fx->err), MG_OK);
    expect_names(out, a_dash, 4);
    json_decref(out);
    assert_int_equal(store_model_list(fx->st, "zzz", &page, &out, &fx->err), MG_OK);
    expect_names(out, NULL, 0);
    assert_true(json_is_null(json_object_get(out, "next_page_token")));
    json_decref(out);
    /* LIKE wildcards are not wildcards. */
    assert_int_equal(store_model_list(fx->st, "%", &page, &out, &fx->err), MG_OK);
    expect_names(out, NULL, 0);
    json_decref(out);

    /* Pages of 2, with q. */
    page.limit = 2;
    assert_int_equal(store_model_list(fx->st, "a-", &page, &out, &fx->err), MG_OK);
    expect_names(out, a_dash, 2);
    assert_true(json_is_string(json_object_get(out, "next_page_token")));
    snprintf(token, sizeof(token), "%s",
             json_string_value(json_object_get(out, "next_page_token")));
    json_decref(out);
    page.page_token = token;
    assert_int_equal(store_model_list(fx->st, "a-", &page, &out, &fx->err), MG_OK);
    expect_names(out, a_dash + 2, 2);
    assert_true(json_is_null(json_object_get(out, "next_page_token")));
    json_decref(out);

    /* Pages of 2 over everything: 2 + 2 + 1. */
    page.page_token = NULL;
    {
        size_t seen = 0;
        int pages = 0;
        for (;;) {
            const json_t *next;
            assert_int_equal(store_model_list(fx->st, NULL, &page, &out, &fx->err), MG_OK);
            expect_names(out, all + seen, json_array_size(json_object_get(out, "items")));
            seen += json_array_size(json_object_get(out, "items"));
            pages++;
            next = json_object_get(out, "next_page_token");
            if (json_is_null(next)) {
                json_decref(out);
                break;
            }
            snprintf(token, sizeof(token), "%s", json_string_value(next));
            page.page_token = token;
            json_decref(out);
            assert_true(pages < 10);
        }
        assert_int_equal(seen, 5);
        assert_int_equal(pages, 3);
    }
}

static void test_model_patch(void **state)
{
    struct fx *fx = *state;
    json_t *req, *patch, *m = NULL;

    req = json_pack("{s:s, s:s, s:{s:s}}", "name", "llm", "description", "old", "tags", "a", "1");
    assert_int_equal(store_model_create(fx->st, "alice", req, &m, &fx->err), MG_OK);
    json_decref(m);
    json_decref(req);

    /* Description only: the tags stay. */
    patch = json_pack("{s:s}", "description", "new");
    assert_int_equal(store_model_patch(fx->st, "bob", "llm", patch, &m, &fx->err), MG_OK);
    assert_string_equal(json_string_value(json_object_get(m, "description")), "new");
    assert_string_equal(json_string_value(json_object_get(json_object_get(m, "tags"), "a")), "1");
    assert_string_equal(json_string_value(json_object_get(m, "created_by")), "alice");
    json_decref(m);
    json_decref(patch);

    /* Tags only: replaced whole; the description stays. */
    patch = json_pack("{s:{s:s}}", "tags", "b", "2");
    assert_int_equal(store_model_patch(fx->st, "bob", "llm", patch, &m, &fx->err), MG_OK);
    assert_string_equal(json_string_value(json_object_get(m, "description")), "new");
    assert_null(json_object_get(json_object_get(m, "tags"), "a"));
    assert_string_equal(json_string_value(json_object_get(json_object_get(m, "tags"), "b")), "2");
    json_decref(m);

    /* Persisted. */
    assert_int_equal(store_model_get(fx->st, "llm", &m, &fx->err), MG_OK);
    assert_string_equal(json_string_value(json_object_get(json_object_get(m, "tags"), "b")), "2");
    json_decref(m);
    assert_int_equal(audit_count_action(fx, "model.update"), 2);

    m = NULL;
    assert_int_equal(store_model_patch(fx->st, "bob", "nope", patch, &m, &fx->err), MG_ENOTFOUND);
    assert_null(m);
    assert_int_equal(audit_count_action(fx, "model.update"), 2);
    json_decref(patch);
}

/* ---- versions ---------------------------------------------------------------------------- */

static void test_version_numbers(void **state)
{
    struct fx *fx = *state;
    char art[72], missing[72];
    json_t *v = NULL, *m = NULL, *req;
    size_t before;

    put_blob(fx, "weights v1", art);
    make_model(fx, "llm");
    make_model(fx, "other");
    assert_int_equal(make_version(fx, "llm", json_pack("{s:s}", "artifact", art)), 1);
    assert_int_equal(make_version(fx, "llm", json_pack("{s:s}", "artifact", art)), 2);
    assert_int_equal(make_version(fx, "llm", json_pack("{s:s}", "artifact", art)), 3);
    /* Numbering is per model. */
    assert_int_equal(make_version(fx, "other", json_pack("{s:s}", "artifact", art)), 1);

    assert_int_equal(store_model_get(fx->st, "llm", &m, &fx->err), MG_OK);
    assert_int_equal(json_integer_value(json_object_get(m, "latest_version")), 3);
    json_decref(m);

    assert_int_equal(store_version_get(fx->st, "llm", 2, &v, &fx->err), MG_OK);
    assert_string_equal(json_string_value(json_object_get(v, "model")), "llm");
    assert_int_equal(json_integer_value(json_object_get(v, "version")), 2);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(v, "artifact"), "digest")), art);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(v, "artifact"), "size")),
                     strlen("weights v1"));
    assert_string_equal(json_string_value(json_object_get(v, "created_by")), "alice");
    assert_string_equal(json_string_value(json_object_get(v, "status")), "ready");
    assert_true(json_is_null(json_object_get(v, "signature"))); /* opened without keys */
    assert_int_equal(json_object_size(json_object_get(v, "metrics")), 0);
    assert_int_equal(json_array_size(json_object_get(v, "metrics_history")), 0);
    assert_int_equal(json_array_size(json_object_get(v, "datasets")), 0);
    json_decref(v);

    /* A missing artifact is refused, and does not use up a number. */
    before = audit_count(fx);
    digest_of("not uploaded", 12, missing);
    req = json_pack("{s:s}", "artifact", missing);
    v = NULL;
    assert_int_equal(store_version_create(fx->st, "alice", "llm", req, &v, &fx->err), MG_EINVAL);
    assert_string_equal(fx->err.field, "artifact");
    assert_null(v);
    assert_int_equal(store_version_create(fx->st, "alice", "nope", req, &v, &fx->err),
                     MG_ENOTFOUND);
    json_decref(req);
    assert_int_equal(audit_count(fx), before);
    assert_int_equal(make_version(fx, "llm", json_pack("{s:s}", "artifact", art)), 4);

    assert_int_equal(store_version_get(fx->st, "llm", 99, &v, &fx->err), MG_ENOTFOUND);
    assert_int_equal(store_version_get(fx->st, "nope", 1, &v, &fx->err), MG_ENOTFOUND);
    assert_null(v);
}

static void test_version_metrics_append_only(void **state)
{
    struct fx *fx = *state;
    char art[72];
    json_t *metrics, *v = NULL;
    size_t before;

    put_blob(fx, "weights", art);
    make_model(fx, "llm");
    make_version(fx, "llm", json_pack("{s:s, s:{s:f}}", "artifact", art, "metrics", "acc", 0.9));

    /* The same value again: accepted, nothing new recorded. */
    before = audit_count(fx);
    metrics = json_pack("{s:f}", "acc", 0.9);
    assert_int_equal(store_version_add_metrics(fx->st, "bob", "llm", 1, metrics, &v, &fx->err),
                     MG_OK);
    assert_true(json_real_value(json_object_get(json_object_get(v, "metrics"), "acc")) == 0.9);
    assert_int_equal(json_array_size(json_object_get(v, "metrics_history")), 1);
    assert_int_equal(audit_count(fx), before);
    json_decref(v);
    json_decref(metrics);

    /* A different value for an existing name: conflict, and the new name in
     * the same request is not written either. */
    metrics = json_pack("{s:f, s:f}", "f1", 0.5, "acc", 0.8);
    v = NULL;
    assert_int_equal(store_version_add_metrics(fx->st, "bob", "llm", 1, metrics, &v, &fx->err),
                     MG_ECONFLICT);
    assert_null(v);
    assert_string_equal(fx->err.field, "metrics");
    assert_non_null(strstr(fx->err.message, "acc"));
    json_decref(metrics);
    assert_int_equal(store_version_get(fx->st, "llm", 1, &v, &fx->err), MG_OK);
    assert_null(json_object_get(json_object_get(v, "metrics"), "f1"));
    assert_true(json_real_value(json_object_get(json_object_get(v, "metrics"), "acc")) == 0.9);
    assert_int_equal(json_array_size(json_object_get(v, "metrics_history")), 1);
    json_decref(v);
    assert_int_equal(audit_count(fx), before);

    /* A new name is appended, with who and when. */
    metrics = json_pack("{s:f, s:f}", "acc", 0.9, "f1", 0.5);
    assert_int_equal(store_version_add_metrics(fx->st, "bob", "llm", 1, metrics, &v, &fx->err),
                     MG_OK);
    json_decref(metrics);
    assert_true(json_real_value(json_object_get(json_object_get(v, "metrics"), "f1")) == 0.5);
    {
        json_t *hist = json_object_get(v, "metrics_history"), *h;
        assert_int_equal(json_array_size(hist), 2);
        h = json_array_get(hist, 1);
        assert_string_equal(json_string_value(json_object_get(h, "name")), "f1");
        assert_string_equal(json_string_value(json_object_get(h, "by")), "bob");
        assert_true(is_rfc3339_ms(json_string_value(json_object_get(h, "at"))));
        h = json_array_get(hist, 0);
        assert_string_equal(json_string_value(json_object_get(h, "by")), "alice");
    }
    json_decref(v);
    assert_int_equal(audit_count_action(fx, "version.metrics"), 1);

    /* Unknown version. */
    metrics = json_pack("{s:f}", "x", 1.0);
    v = NULL;
    assert_int_equal(store_version_add_metrics(fx->st, "bob", "llm", 2, metrics, &v, &fx->err),
                     MG_ENOTFOUND);
    assert_null(v);
    json_decref(metrics);
}

static void expect_versions(struct fx *fx, const struct store_version_filter *f,
                            const int64_t *want, size_t n)
{
    struct store_page page = {.limit = 50, .page_token = NULL};
    json_t *out = NULL, *items;
    size_t i;

    if (store_version_list(fx->st, "m", f, &page, &out, &fx->err) != MG_OK)
        fail_msg("store_version_list: %s", fx->err.message);
    items = json_object_get(out, "items");
    if (json_array_size(items) != n)
        fail_msg("got %zu versions, want %zu", json_array_size(items), n);
    for (i = 0; i < n; i++)
        assert_int_equal(json_integer_value(json_object_get(json_array_get(items, i), "version")),
                         want[i]);
    assert_true(json_is_null(json_object_get(out, "next_page_token")));
    json_decref(out);
}

static void test_version_list_filters(void **state)
{
    struct fx *fx = *state;
    char art[72], d1[72], d2[72];
    struct store_version_filter f;
    static const int64_t all[] = {3, 2, 1}, prod[] = {3, 2}, v1[] = {1}, v2[] = {2}, ge[] = {3, 2},
                         le[] = {3, 1};

    put_blob(fx, "weights", art);
    digest_of("dataset one", 11, d1);
    digest_of("dataset two", 11, d2);
    make_model(fx, "m");
    make_model(fx, "n");
    make_version(fx, "m",
                 json_pack("{s:s, s:{s:s}, s:[{s:s, s:s}], s:{s:f}}", "artifact", art, "tags",
                           "stage", "dev", "datasets", "digest", d1, "role", "train", "metrics",
                           "acc", 0.5));
    make_version(fx, "m",
                 json_pack("{s:s, s:{s:s}, s:[{s:s, s:s}], s:{s:f}}", "artifact", art, "tags",
                           "stage", "prod", "datasets", "digest", d2, "role", "eval", "metrics",
                           "acc", 0.9));
    make_version(fx, "m",
                 json_pack("{s:s, s:{s:s}, s:{s:f, s:f}}", "artifact", art, "tags", "stage", "prod",
                           "metrics", "acc", 0.7, "loss", 1.5));
    /* Another model's versions never show up. */
    make_version(fx, "n",
                 json_pack("{s:s, s:{s:s}, s:[{s:s, s:s}], s:{s:f}}", "artifact", art, "tags",
                           "stage", "prod", "datasets", "digest", d1, "role", "train", "metrics",
                           "acc", 0.99));

    memset(&f, 0, sizeof(f));
    expect_versions(fx, &f, all, 3);

    f.tag_key = "stage";
    f.tag_value = "prod";
    expect_versions(fx, &f, prod, 2);
    f.tag_value = "dev";
    expect_versions(fx, &f, v1, 1);
    f.tag_value = "qa";
    expect_versions(fx, &f, NULL, 0);
    f.tag_key = "team";
    f.tag_value = "prod";
    expect_versions(fx, &f, NULL, 0);

    memset(&f, 0, sizeof(f));
    f.dataset = d1;
    expect_versions(fx, &f, v1, 1);
    f.dataset = d2;
    expect_versions(fx, &f, v2, 1);

    memset(&f, 0, sizeof(f));
    f.metric = "acc";
    f.metric_value = 0.7;
    f.metric_op = ">=";
    expect_versions(fx, &f, ge, 2);
    f.metric_op = ">";
    expect_versions(fx, &f, v2, 1);
    f.metric_op = "<=";
    expect_versions(fx, &f, le, 2);
    f.metric_op = "<";
    expect_versions(fx, &f, v1, 1);
    f.metric_op = "=";
    f.metric_value = 0.9;
    expect_versions(fx, &f, v2, 1);
    f.metric = "f1"; /* nobody has it */
    f.metric_op = ">=";
    f.metric_value = 0;
    expect_versions(fx, &f, NULL, 0);

    /* Filters combine. */
    memset(&f, 0, sizeof(f));
    f.tag_key = "stage";
    f.tag_value = "prod";
    f.metric = "acc";
    f.metric_op = "<";
    f.metric_value = 0.8;
    {
        static const int64_t v3[] = {3};
        expect_versions(fx, &f, v3, 1);
    }
    f.dataset = d1;
    expect_versions(fx, &f, NULL, 0);

    /* Unknown model. */
    {
        struct store_page page = {.limit = 10};
        json_t *out = NULL;
        memset(&f, 0, sizeof(f));
        assert_int_equal(store_version_list(fx->st, "nope", &f, &page, &out, &fx->err),
                         MG_ENOTFOUND);
        assert_null(out);
    }
}

static void test_version_list_pages(void **state)
{
    struct fx *fx = *state;
    char art[72], token[32];
    struct store_version_filter f;
    struct store_page page = {.limit = 2, .page_token = NULL};
    json_t *out = NULL, *items;
    int i;

    put_blob(fx, "weights", art);
    make_model(fx, "m");
    for (i = 0; i < 3; i++)
        make_version(fx, "m", json_pack("{s:s}", "artifact", art));
    memset(&f, 0, sizeof(f));

    assert_int_equal(store_version_list(fx->st, "m", &f, &page, &out, &fx->err), MG_OK);
    items = json_object_get(out, "items");
    assert_int_equal(json_array_size(items), 2);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(items, 0), "version")), 3);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(items, 1), "version")), 2);
    assert_true(json_is_string(json_object_get(out, "next_page_token")));
    snprintf(token, sizeof(token), "%s",
             json_string_value(json_object_get(out, "next_page_token")));
    json_decref(out);

    page.page_token = token;
    assert_int_equal(store_version_list(fx->st, "m", &f, &page, &out, &fx->err), MG_OK);
    items = json_object_get(out, "items");
    assert_int_equal(json_array_size(items), 1);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(items, 0), "version")), 1);
    assert_true(json_is_null(json_object_get(out, "next_page_token")));
    json_decref(out);

    /* Tokens the server did not issue. */
    out = NULL;
    page.page_token = "abc";
    assert_int_equal(store_version_list(fx->st, "m", &f, &page, &out, &fx->err), MG_EINVAL);
    assert_string_equal(fx->err.field, "page_token");
    page.page_token = "0";
    assert_int_equal(store_version_list(fx->st, "m", &f, &page, &out, &fx->err), MG_EINVAL);
    page.page_token = "-1";
    assert_int_equal(store_version_list(fx->st, "m", &f, &page, &out, &fx->err), MG_EINVAL);
    assert_null(out);
}

static void test_version_patch(void **state)
{
    struct fx *fx = *state;
    char art[72];
    json_t *patch, *v = NULL;

    put_blob(fx, "weights", art);
    make_model(fx, "m");
    make_version(fx, "m",
                 json_pack("{s:s, s:s, s:{s:s}}", "artifact", art, "description", "first", "tags",
                           "stage", "dev"));
    patch = json_pack("{s:{s:s}}", "tags", "stage", "prod");
    assert_int_equal(store_version_patch(fx->st, "bob", "m", 1, patch, &v, &fx->err), MG_OK);
    assert_string_equal(json_string_value(json_object_get(json_object_get(v, "tags"), "stage")),
                        "prod");
    assert_string_equal(json_string_value(json_object_get(v, "description")), "first");
    json_decref(v);
    v = NULL;
    assert_int_equal(store_version_patch(fx->st, "bob", "m", 2, patch, &v, &fx->err), MG_ENOTFOUND);
    assert_null(v);
    json_decref(patch);
    assert_int_equal(audit_count_action(fx, "version.update"), 1);
}

static void test_version_brief(void **state)
{
    struct fx *fx = *state;
    char art[72];
    json_t *v = NULL;

    put_blob(fx, "weights", art);
    make_model(fx, "m");
    make_version(fx, "m", json_pack("{s:s, s:s}", "artifact", art, "image", "reg/x@sha256:ab"));
    make_version(fx, "m", json_pack("{s:s}", "artifact", art));
    assert_int_equal(store_version_brief(fx->st, "m", 1, &v, &fx->err), MG_OK);
    assert_string_equal(json_string_value(json_object_get(v, "artifact")), art);
    assert_string_equal(json_string_value(json_object_get(v, "image")), "reg/x@sha256:ab");
    assert_int_equal(json_object_size(v), 2);
    json_decref(v);
    v = NULL;
    assert_int_equal(store_version_brief(fx->st, "m", 2, &v, &fx->err), MG_OK);
    assert_true(json_is_null(json_object_get(v, "image")));
    json_decref(v);
    v = NULL;
    assert_int_equal(store_version_brief(fx->st, "m", 3, &v, &fx->err), MG_ENOTFOUND);
    assert_int_equal(store_version_brief(fx->st, "nope", 1, &v, &fx->err), MG_ENOTFOUND);
    assert_null(v);
}

/* ---- datasets ---------------------------------------------------------------------------- */

static enum mg_code dataset_create(struct fx *fx, json_t *req, bool *created)
{
    json_t *out = NULL;
    enum mg_code rc;

    assert_non_null(req);
    mg_error_clear(&fx->err);
    rc = store_dataset_create(fx->st, "alice", req, &out, created, &fx->err);
    if (rc == MG_OK) {
        assert_non_null(out);
        assert_string_equal(json_string_value(json_object_get(out, "digest")),
                            json_string_value(json_object_get(req, "digest")));
    } else {
        assert_null(out);
    }
    json_decref(out);
    json_decref(req);
    return rc;
}

static void test_dataset_create_identical_conflict(void **state)
{
    struct fx *fx = *state;
    char d1[72], d2[72], d9[72];
    bool created = false;
    json_t *d = NULL;
    size_t before;

    digest_of("raw", 3, d1);
    digest_of("clean", 5, d2);
    digest_of("unregistered", 12, d9);

    assert_int_equal(dataset_create(fx,
                                    json_pack("{s:s, s:s, s:s}", "digest", d1, "name", "raw", "uri",
                                              "s3://bucket/raw"),
                                    &created),
                     MG_OK);
    assert_true(created);

    /* Identical again: fine, nothing new. */
    before = audit_count(fx);
    created = true;
    assert_int_equal(dataset_create(fx,
                                    json_pack("{s:s, s:s, s:s}", "digest", d1, "name", "raw", "uri",
                                              "s3://bucket/raw"),
                                    &created),
                     MG_OK);
    assert_false(created);
    assert_int_equal(audit_count(fx), before);
    /* An explicit empty parent list is the same record. */
    assert_int_equal(dataset_create(fx,
                                    json_pack("{s:s, s:s, s:s, s:[]}", "digest", d1, "name", "raw",
                                              "uri", "s3://bucket/raw", "parents"),
                                    &created),
                     MG_OK);
    assert_false(created);

    /* Different name, uri or description: conflict. */
    assert_int_equal(dataset_create(fx,
                                    json_pack("{s:s, s:s, s:s}", "digest", d1, "name", "raw2",
                                              "uri", "s3://bucket/raw"),
                                    &created),
                     MG_ECONFLICT);
    assert_string_equal(fx->err.field, "digest");
    assert_int_equal(
        dataset_create(fx, json_pack("{s:s, s:s}", "digest", d1, "name", "raw"), &created),
        MG_ECONFLICT);
    assert_int_equal(dataset_create(fx,
                                    json_pack("{s:s, s:s, s:s, s:s}", "digest", d1, "name", "raw",
                                              "uri", "s3://bucket/raw", "description", "x"),
                                    &created),
                     MG_ECONFLICT);
    assert_int_equal(audit_count(fx), before);

    /* Parents must be registered; nothing is written otherwise. */
    assert_int_equal(
        dataset_create(fx,
                       json_pack("{s:s, s:s, s:[s]}", "digest", d2, "name", "clean", "parents", d9),
                       &created),
        MG_EINVAL);
    assert_string_equal(fx->err.field, "parents");
    assert_int_equal(store_dataset_get(fx->st, d2, &d, &fx->err), MG_ENOTFOUND);
    assert_null(d);

    assert_int_equal(
        dataset_create(fx,
                       json_pack("{s:s, s:s, s:[s]}", "digest", d2, "name", "clean", "parents", d1),
                       &created),
        MG_OK);
    assert_true(created);
    /* The same digest without its parent: a different record, so a conflict. */
    assert_int_equal(
        dataset_create(fx, json_pack("{s:s, s:s}", "digest", d2, "name", "clean"), &created),
        MG_ECONFLICT);

    assert_int_equal(store_dataset_get(fx->st, d1, &d, &fx->err), MG_OK);
    assert_string_equal(json_string_value(json_object_get(d, "name")), "raw");
    assert_string_equal(json_string_value(json_object_get(d, "uri")), "s3://bucket/raw");
    assert_int_equal(json_array_size(json_object_get(d, "parents")), 0);
    assert_int_equal(json_array_size(json_object_get(d, "children")), 1);
    assert_string_equal(json_string_value(json_array_get(json_object_get(d, "children"), 0)), d2);
    assert_string_equal(json_string_value(json_object_get(d, "created_by")), "alice");
    json_decref(d);
    assert_int_equal(store_dataset_get(fx->st, d2, &d, &fx->err), MG_OK);
    assert_string_equal(json_string_value(json_array_get(json_object_get(d, "parents"), 0)), d1);
    json_decref(d);
    assert_int_equal(audit_count_action(fx, "dataset.create"), 2);
}

/* The API accepts a parent listed twice; the stored parent set has it once.
 * Retrying exactly the same request must still be "identical". */
static void test_dataset_duplicate_parent_retry_is_identical(void **state)
{
    struct fx *fx = *state;
    char d1[72], d2[72];
    bool created = false;
    json_t *d = NULL;

    digest_of("p", 1, d1);
    digest_of("c", 1, d2);
    assert_int_equal(
        dataset_create(fx, json_pack("{s:s, s:s}", "digest", d1, "name", "p"), &created), MG_OK);
    assert_int_equal(dataset_create(fx,
                                    json_pack("{s:s, s:s, s:[s, s]}", "digest", d2, "name", "c",
                                              "parents", d1, d1),
                                    &created),
                     MG_OK);
    assert_true(created);
    assert_int_equal(store_dataset_get(fx->st, d2, &d, &fx->err), MG_OK);
    assert_int_equal(json_array_size(json_object_get(d, "parents")), 1);
    json_decref(d);
    created = true;
    assert_int_equal(dataset_create(fx,
                                    json_pack("{s:s, s:s, s:[s, s]}", "digest", d2, "name", "c",
                                              "parents", d1, d1),
                                    &created),
                     MG_OK);
    assert_false(created);
}

/* A record with parents {a, b} is not the same as a request naming [a, a]. */
static void test_dataset_duplicate_parent_is_not_another_set(void **state)
{
    struct fx *fx = *state;
    char a[72], b[72], c[72];
    bool created = false;

    digest_of("a", 1, a);
    digest_of("b", 1, b);
    digest_of("c", 1, c);
    assert_int_equal(
        dataset_create(fx, json_pack("{s:s, s:s}", "digest", a, "name", "a"), &created), MG_OK);
    assert_int_equal(
        dataset_create(fx, json_pack("{s:s, s:s}", "digest", b, "name", "b"), &created), MG_OK);
    assert_int_equal(
        dataset_create(fx,
                       json_pack("{s:s, s:s, s:[s, s]}", "digest", c, "name", "c", "parents", a, b),
                       &created),
        MG_OK);
    assert_int_equal(
        dataset_create(fx,
                       json_pack("{s:s, s:s, s:[s, s]}", "digest", c, "name", "c", "parents", a, a),
                       &created),
        MG_ECONFLICT);
}

/* One item of store_dataset_versions. */
static void expect_use(const json_t *item, const char *model, int64_t version, const char *role,
                       const char *const *via, size_t nvia)
{
    const json_t *v = json_object_get(item, "via");
    size_t i;

    assert_non_null(item);
    assert_string_equal(json_string_value(json_object_get(item, "model")), model);
    assert_int_equal(json_integer_value(json_object_get(item, "version")), version);
    assert_string_equal(json_string_value(json_object_get(item, "role")), role);
    assert_true(json_is_array(v));
    if (json_array_size(v) != nvia)
        fail_msg("%s v%lld: via has %zu entries, want %zu", model, (long long)version,
                 json_array_size(v), nvia);
    for (i = 0; i < nvia; i++)
        assert_string_equal(json_string_value(json_array_get(v, i)), via[i]);
}

static void test_dataset_versions_transitive(void **state)
{
    struct fx *fx = *state;
    char art[72], d1[72], d2[72], d3[72], d4[72], d5[72], d6[72];
    bool created;
    json_t *out = NULL, *items;

    put_blob(fx, "weights", art);
    digest_of("d1", 2, d1);
    digest_of("d2", 2, d2);
    digest_of("d3", 2, d3);
    digest_of("d4", 2, d4);
    digest_of("d5", 2, d5);
    digest_of("d6", 2, d6);
    /* d1 -> d2 -> d3 -> d4, and d1 -> d4 directly (a diamond). */
    assert_int_equal(
        dataset_create(fx, json_pack("{s:s, s:s}", "digest", d1, "name", "raw"), &created), MG_OK);
    assert_int_equal(
        dataset_create(fx,
                       json_pack("{s:s, s:s, s:[s]}", "digest", d2, "name", "clean", "parents", d1),
                       &created),
        MG_OK);
    assert_int_equal(
        dataset_create(fx,
                       json_pack("{s:s, s:s, s:[s]}", "digest", d3, "name", "dedup", "parents", d2),
                       &created),
        MG_OK);
    assert_int_equal(dataset_create(fx,
                                    json_pack("{s:s, s:s, s:[s, s]}", "digest", d4, "name", "mix",
                                              "parents", d1, d3),
                                    &created),
                     MG_OK);
    /* The parent set is a set: order does not make it a different record. */
    assert_int_equal(dataset_create(fx,
                                    json_pack("{s:s, s:s, s:[s, s]}", "digest", d4, "name", "mix",
                                              "parents", d3, d1),
                                    &created),
                     MG_OK);
    assert_false(created);

    make_model(fx, "m");
    make_version(fx, "m",
                 json_pack("{s:s, s:[{s:s, s:s}]}", "artifact", art, "datasets", "digest", d3,
                           "role", "train"));
    make_version(fx, "m",
                 json_pack("{s:s, s:[{s:s, s:s}]}", "artifact", art, "datasets", "digest", d1,
                           "role", "eval"));
    make_version(fx, "m",
                 json_pack("{s:s, s:[{s:s, s:s}]}", "artifact", art, "datasets", "digest", d4,
                           "role", "train"));
    /* d5 is used by a version but never registered. */
    make_version(fx, "m",
                 json_pack("{s:s, s:[{s:s, s:s}]}", "artifact", art, "datasets", "digest", d5,
                           "role", "train"));

    /* From d1: its direct user first, then descendants by depth, each
     * (model, version, role) once, by its shortest path. */
    assert_int_equal(store_dataset_versions(fx->st, d1, &out, &fx->err), MG_OK);
    items = json_object_get(out, "items");
    assert_int_equal(json_array_size(items), 3);
    expect_use(json_array_get(items, 0), "m", 2, "eval", NULL, 0);
    {
        const char *via_d4[] = {d4};
        const char *via_d3[] = {d2, d3};
        expect_use(json_array_get(items, 1), "m", 3, "train", via_d4, 1);
        expect_use(json_array_get(items, 2), "m", 1, "train", via_d3, 2);
    }
    json_decref(out);

    assert_int_equal(store_dataset_versions(fx->st, d3, &out, &fx->err), MG_OK);
    items = json_object_get(out, "items");
    assert_int_equal(json_array_size(items), 2);
    {
        const char *via_d4[] = {d4};
        expect_use(json_array_get(items, 0), "m", 1, "train", NULL, 0);
        expect_use(json_array_get(items, 1), "m", 3, "train", via_d4, 1);
    }
    json_decref(out);

    /* Used directly though unregistered: still answered. */
    assert_int_equal(store_dataset_versions(fx->st, d5, &out, &fx->err), MG_OK);
    items = json_object_get(out, "items");
    assert_int_equal(json_array_size(items), 1);
    expect_use(json_array_get(items, 0), "m", 4, "train", NULL, 0);
    json_decref(out);

    /* Neither registered nor used. */
    out = NULL;
    assert_int_equal(store_dataset_versions(fx->st, d6, &out, &fx->err), MG_ENOTFOUND);
    assert_null(out);
    assert_int_equal(store_dataset_get(fx->st, d6, &out, &fx->err), MG_ENOTFOUND);
    assert_null(out);
}

/* ---- audit ------------------------------------------------------------------------------- */

/* A few mutations so that the log has several entries. */
static void some_history(struct fx *fx)
{
    char secret[STORE_TOKEN_SECRET_LEN + 1];
    bool created;
    json_t *patch = json_pack("{s:s}", "description", "d"), *out = NULL;

    assert_int_equal(store_token_bootstrap(fx->st, secret, &created, &fx->err), MG_OK);
    make_model(fx, "a");
    make_model(fx, "b");
    assert_int_equal(store_model_patch(fx->st, "carol", "a", patch, &out, &fx->err), MG_OK);
    json_decref(out);
    json_decref(patch);
}

static json_t *verify(struct fx *fx)
{
    json_t *out = NULL;

    if (store_audit_verify(fx->st, &out, &fx->err) != MG_OK)
        fail_msg("store_audit_verify: %s", fx->err.message);
    assert_non_null(out);
    return out;
}

static void test_audit_empty(void **state)
{
    struct fx *fx = *state;
    json_t *v = verify(fx);

    assert_true(json_is_true(json_object_get(v, "ok")));
    assert_int_equal(json_integer_value(json_object_get(v, "entries")), 0);
    assert_string_equal(json_string_value(json_object_get(v, "head")), ZERO_HASH);
    assert_null(json_object_get(v, "first_bad_seq"));
    json_decref(v);
}

static void test_audit_list_and_verify_ok(void **state)
{
    struct fx *fx = *state;
    json_t *out = NULL, *items, *v;
    size_t i, n;
    const char *prev = ZERO_HASH;

    some_history(fx);
    items = audit_items(fx);
    n = json_array_size(items);
    assert_int_equal(n, 4);
    for (i = 0; i < n; i++) {
        json_t *e = json_array_get(items, i);
        assert_int_equal(json_integer_value(json_object_get(e, "seq")), (json_int_t)i + 1);
        assert_string_equal(json_string_value(json_object_get(e, "prev_hash")), prev);
        assert_int_equal(strlen(json_string_value(json_object_get(e, "hash"))), 64);
        assert_true(is_rfc3339_ms(json_string_value(json_object_get(e, "at"))));
        assert_true(json_is_object(json_object_get(e, "detail")));
        prev = json_string_value(json_object_get(e, "hash"));
    }
    assert_string_equal(json_string_value(json_object_get(json_array_get(items, 0), "action")),
                        "token.create");
    assert_string_equal(json_string_value(json_object_get(json_array_get(items, 3), "actor")),
                        "carol");

    v = verify(fx);
    assert_true(json_is_true(json_object_get(v, "ok")));
    assert_int_equal(json_integer_value(json_object_get(v, "entries")), 4);
    assert_string_equal(json_string_value(json_object_get(v, "head")), prev);
    assert_null(json_object_get(v, "first_bad_seq"));
    json_decref(v);

    /* Pages: after=0 limit 3, then the rest. */
    assert_int_equal(store_audit_list(fx->st, 0, 3, &out, &fx->err), MG_OK);
    assert_int_equal(json_array_size(json_object_get(out, "items")), 3);
    assert_string_equal(json_string_value(json_object_get(out, "next_page_token")), "3");
    json_decref(out);
    assert_int_equal(store_audit_list(fx->st, 3, 3, &out, &fx->err), MG_OK);
    assert_int_equal(json_array_size(json_object_get(out, "items")), 1);
    assert_int_equal(json_integer_value(
                         json_object_get(json_array_get(json_object_get(out, "items"), 0), "seq")),
                     4);
    assert_true(json_is_null(json_object_get(out, "next_page_token")));
    json_decref(out);
    assert_int_equal(store_audit_list(fx->st, 0, 4, &out, &fx->err), MG_OK);
    assert_true(json_is_null(json_object_get(out, "next_page_token")));
    json_decref(out);
    json_decref(items);

    /* Still intact after a restart. */
    reopen(fx);
    v = verify(fx);
    assert_true(json_is_true(json_object_get(v, "ok")));
    json_decref(v);
}

static void test_audit_tamper_detected(void **state)
{
    struct fx *fx = *state;
    json_t *v;

    some_history(fx);
    store_close(&fx->st);
    raw_exec(fx, "UPDATE audit SET actor='mallory' WHERE seq=2");
    reopen(fx);
    v = verify(fx);
    assert_true(json_is_false(json_object_get(v, "ok")));
    assert_int_equal(json_integer_value(json_object_get(v, "first_bad_seq")), 2);
    json_decref(v);
}

static void test_audit_tamper_detail_detected(void **state)
{
    struct fx *fx = *state;
    json_t *v;

    some_history(fx);
    store_close(&fx->st);
    raw_exec(fx, "UPDATE audit SET detail='{\"name\":\"x\"}' WHERE seq=3");
    reopen(fx);
    v = verify(fx);
    assert_true(json_is_false(json_object_get(v, "ok")));
    assert_int_equal(json_integer_value(json_object_get(v, "first_bad_seq")), 3);
    json_decref(v);
}

static void test_audit_middle_deletion_detected(void **state)
{
    struct fx *fx = *state;
    json_t *v;

    some_history(fx);
    store_close(&fx->st);
    raw_exec(fx, "DELETE FROM audit WHERE seq=2");
    reopen(fx);
    v = verify(fx);
    assert_true(json_is_false(json_object_get(v, "ok")));
    assert_int_equal(json_integer_value(json_object_get(v, "first_bad_seq")), 2);
    json_decref(v);
}

static void test_audit_truncation_detected(void **state)
{
    struct fx *fx = *state;
    json_t *v;

    some_history(fx);
    store_close(&fx->st);
    raw_exec(fx, "DELETE FROM audit WHERE seq=(SELECT max(seq) FROM audit)");
    reopen(fx);
    v = verify(fx);
    assert_true(json_is_false(json_object_get(v, "ok")));
    assert_int_equal(json_integer_value(json_object_get(v, "entries")), 3);
    assert_int_equal(json_integer_value(json_object_get(v, "first_bad_seq")), 4);
    json_decref(v);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, fx_setup, fx_teardown)
    const struct CMUnitTest tests[] = {
        T(test_open_creates_layout),
        T(test_open_creates_missing_data_dir),
        T(test_reopen_keeps_data_and_migrations),
        T(test_refuses_newer_schema),
        T(test_second_open_refused),
        T(test_data_epoch),
        T(test_sweeps_interrupted_uploads),
        T(test_token_bootstrap_and_authenticate),
        T(test_token_create_and_delete),
        cmocka_unit_test(test_roles),
        T(test_blob_upload_commit),
        T(test_blob_upload_large_any_cut),
        T(test_blob_upload_abort_while_hashing),
        T(test_blob_uploads_many_at_once),
        T(test_blob_upload_wrong_digest),
        T(test_blob_upload_idempotent),
        T(test_blob_upload_too_big),
        T(test_blob_get_missing),
        T(test_model_create_get),
        T(test_model_list_q_and_pages),
        T(test_model_patch),
        T(test_version_numbers),
        T(test_version_metrics_append_only),
        T(test_version_list_filters),
        T(test_version_list_pages),
        T(test_version_patch),
        T(test_version_brief),
        T(test_dataset_create_identical_conflict),
        T(test_dataset_duplicate_parent_retry_is_identical),
        T(test_dataset_duplicate_parent_is_not_another_set),
        T(test_dataset_versions_transitive),
        T(test_audit_empty),
        T(test_audit_list_and_verify_ok),
        T(test_audit_tamper_detected),
        T(test_audit_tamper_detail_detected),
        T(test_audit_middle_deletion_detected),
        T(test_audit_truncation_detected),
    };
#undef T

    return cmocka_run_group_tests(tests, NULL, NULL);
}
