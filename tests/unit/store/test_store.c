/*
 * test_store.c - store/ as a whole (store.c): opening (layout, migrations, the
 * per-directory lock, a newer schema refused, interrupted uploads swept),
 * store_ready, store_stats and the data epoch. The statement cache below it is
 * tested with the database layer (test_db_sqlite.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <sqlite3.h>

#include "base/util.h"
#include "store_fixture.h"

static bool is_dir(const char *p, mode_t *mode)
{
    struct stat sb;

    if (stat(p, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return false;
    *mode = sb.st_mode & 0777;
    return true;
}

static void test_open_creates_layout(void **state)
{
    struct fx *fx = *state;
    char p[256];
    mode_t mode = 0;
    struct stat sb;

    fx_path(fx, "blobs", p, sizeof(p));
    assert_true(is_dir(p, &mode));
    assert_int_equal(mode, 0700);
    fx_path(fx, "blobs/sha256", p, sizeof(p));
    assert_true(is_dir(p, &mode));
    assert_int_equal(mode, 0700);
    fx_path(fx, "blobs/tmp", p, sizeof(p));
    assert_true(is_dir(p, &mode));
    assert_int_equal(mode, 0700);
    fx_path(fx, "modelgate.db", p, sizeof(p));
    assert_int_equal(stat(p, &sb), 0);
    assert_true(S_ISREG(sb.st_mode));
    assert_true(store_ready(fx->st, NULL));

    /* Every migration is recorded, numbered 1..N. */
    assert_true(store_schema_version() >= 2);
    store_close(&fx->st);
    /* The WAL is folded back on close: the database is one file at rest. */
    fx_path(fx, "modelgate.db-wal", p, sizeof(p));
    assert_true(stat(p, &sb) != 0 || sb.st_size == 0);
    assert_int_equal(fx_db_int(fx, "SELECT count(*) FROM schema_migrations"),
                     store_schema_version());
    assert_int_equal(fx_db_int(fx, "SELECT max(version) FROM schema_migrations"),
                     store_schema_version());
    assert_int_equal(fx_db_int(fx, "SELECT min(version) FROM schema_migrations"), 1);
    /* ... and their tables exist. */
    assert_int_equal(fx_db_int(fx, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND "
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

    fx_path(fx, "nested-data", sub, sizeof(sub));
    assert_int_equal(fx_open_at(sub, &st, &err), MG_OK);
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

    fx_model(fx, "resnet");
    fx_reopen(fx);
    assert_int_equal(store_model_get(fx->st, "resnet", &m, &fx->err), MG_OK);
    assert_string_equal(json_string_value(json_object_get(m, "name")), "resnet");
    json_decref(m);
    fx_reopen(fx); /* twice: migrations are not re-applied */
    store_close(&fx->st);
    assert_int_equal(fx_db_int(fx, "SELECT count(*) FROM schema_migrations"),
                     store_schema_version());
    assert_int_equal(fx_db_int(fx, "SELECT count(*) FROM models"), 1);
    fx_reopen(fx);
}

/* One process per data directory: a second open is refused, and the lock
 * goes with the store that held it. */
static void test_second_open_refused(void **state)
{
    struct fx *fx = *state;
    struct store *other = NULL;
    struct mg_error err;

    assert_int_equal(fx_open_at(fx->dir, &other, &err), MG_EUNAVAIL);
    assert_null(other);
    assert_non_null(strstr(err.message, "in use by another modelgated process"));
    store_close(&fx->st);
    assert_int_equal(fx_open_at(fx->dir, &other, &err), MG_OK);
    fx->st = other;
}

/* A model's epoch moves with every committed change of that model, and only then. */
static void test_data_epoch(void **state)
{
    struct fx *fx = *state;
    json_t *m = NULL, *out = NULL;
    uint64_t e0, e1, o;

    fx_model(fx, "bert"); /* another model: its epoch must not move with resnet's */
    o = fx_epoch(fx, "bert");
    e0 = fx_epoch(fx, "resnet");
    assert_int_equal(store_model_get(fx->st, "absent", &m, &fx->err), MG_ENOTFOUND);
    assert_int_equal(fx_epoch(fx, "resnet"), e0); /* a read */
    fx_model(fx, "resnet");
    e1 = fx_epoch(fx, "resnet");
    assert_true(e1 != e0);
    assert_int_equal(store_model_get(fx->st, "resnet", &m, &fx->err), MG_OK);
    json_decref(m);
    assert_int_equal(fx_epoch(fx, "resnet"), e1);
    m = json_pack("{s:s}", "description", "changed");
    assert_int_equal(store_model_patch(fx->st, "bob", "resnet", m, &out, &fx->err), MG_OK);
    json_decref(out);
    json_decref(m);
    assert_true(fx_epoch(fx, "resnet") != e1);
    /* A write that fails, or commits without changing a row (an idle worker's
     * claim that finds nothing), leaves it alone. */
    e1 = fx_epoch(fx, "resnet");
    m = json_pack("{s:s}", "name", "resnet");
    assert_int_equal(store_model_create(fx->st, "bob", m, &out, &fx->err), MG_ECONFLICT);
    json_decref(m);
    {
        struct store_delivery d;
        json_t *job = NULL;
        bool found = true;

        assert_int_equal(store_outbox_claim(fx->st, mg_now_ms(), 1000, &d, &found, &fx->err),
                         MG_OK);
        assert_false(found);
        found = true;
        assert_int_equal(store_smoke_claim(fx->st, &job, &found, &fx->err), MG_OK);
        assert_false(found);
        assert_null(job);
        assert_int_equal(store_outbox_recover(fx->st, 0, &fx->err), MG_OK);
    }
    assert_int_equal(fx_epoch(fx, "resnet"), e1);
    assert_int_equal(fx_epoch(fx, "bert"), o); /* resnet's writes left bert's cache valid */
}

static void test_refuses_newer_schema(void **state)
{
    struct fx *fx = *state;
    struct store *sentinel = (struct store *)&fx->err, *st = sentinel;
    struct mg_error err;

    store_close(&fx->st);
    fx_db_exec(fx, "INSERT INTO schema_migrations(version,name,applied_at) "
                   "VALUES(999,'future','x')");
    mg_error_clear(&err);
    assert_int_equal(fx_open_at(fx->dir, &st, &err), MG_EINVAL);
    assert_int_equal(err.code, MG_EINVAL);
    assert_ptr_equal(st, sentinel); /* out untouched */
    if (strstr(err.message, "999") == NULL)
        fail_msg("message does not name the version: %s", err.message);
    /* Nothing was changed by the refused open. */
    assert_int_equal(fx_db_int(fx, "SELECT max(version) FROM schema_migrations"), 999);
    assert_int_equal(fx_db_int(fx, "SELECT count(*) FROM schema_migrations"),
                     store_schema_version() + 1);
}

static void test_sweeps_interrupted_uploads(void **state)
{
    struct fx *fx = *state;
    char p[256];
    int fd;

    store_close(&fx->st);
    fx_path(fx, "blobs/tmp/upload-xyz", p, sizeof(p));
    fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "partial", 7), 7);
    close(fd);
    fx_path(fx, "blobs/tmp/upload-AbC123", p, sizeof(p));
    fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(fx_files_under(fx, "blobs/tmp"), 2);
    fx_reopen(fx);
    assert_int_equal(fx_files_under(fx, "blobs/tmp"), 0);
    fx_path(fx, "blobs/tmp/upload-xyz", p, sizeof(p));
    assert_int_equal(access(p, F_OK), -1);
}

/* Ready means a write goes through and the blob directory takes files; the
 * probe itself leaves nothing behind (no epoch change, no temp file). */
static void test_ready(void **state)
{
    struct fx *fx = *state;
    char tmp[256], aside[256];
    uint64_t e0 = fx_epoch(fx, "any");
    int fd;

    assert_true(store_ready(fx->st, NULL));
    assert_true(store_ready(fx->st, NULL));
    assert_int_equal(fx_epoch(fx, "any"), e0);
    assert_int_equal(fx_files_under(fx, "blobs/tmp"), 0);

    /* blobs/tmp replaced by a file: no temp file can be made there (even as root). */
    fx_path(fx, "blobs/tmp", tmp, sizeof(tmp));
    fx_path(fx, "tmp-aside", aside, sizeof(aside));
    assert_int_equal(rename(tmp, aside), 0);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    close(fd);
    assert_false(store_ready(fx->st, NULL));
    assert_int_equal(unlink(tmp), 0);
    assert_int_equal(rename(aside, tmp), 0);
    assert_true(store_ready(fx->st, NULL));
}

static int64_t stat_count(const json_t *stats, const char *group, const char *state)
{
    return json_integer_value(json_object_get(json_object_get(stats, group), state));
}

/* The delivery rows of one gateway in one state, from store_stats' "deliveries". */
static int64_t delivery_count(const json_t *stats, const char *gateway, const char *state)
{
    const json_t *d;
    size_t i;

    json_array_foreach(json_object_get(stats, "deliveries"), i, d)
    {
        if (strcmp(json_string_value(json_object_get(d, "gateway")), gateway) == 0 &&
            strcmp(json_string_value(json_object_get(d, "state")), state) == 0)
            return json_integer_value(json_object_get(d, "count"));
    }
    return 0;
}

static void test_stats(void **state)
{
    struct fx *fx = *state;
    json_t *s = NULL, *t = NULL, *rec, *p = NULL;
    bool created = false;

    /* Empty: no groups, the built-in runner without lag, a database on disk. */
    assert_int_equal(store_stats(fx->st, &s, &fx->err), MG_OK);
    assert_int_equal(json_object_size(json_object_get(s, "promotions")), 0);
    assert_int_equal(json_object_size(json_object_get(s, "smoke_tests")), 0);
    assert_int_equal(json_array_size(json_object_get(s, "deliveries")), 0);
    assert_true(json_number_value(
                    json_object_get(json_object_get(s, "delivery_lag_seconds"), "runner")) == 0);
    assert_true(json_integer_value(json_object_get(s, "db_bytes")) > 0);
    assert_true(json_is_integer(json_object_get(s, "wal_bytes")));
    json_decref(s);

    /* An alias change (the runner hears every alias), a queued smoke test and a promotion. */
    fx_model_versions(fx, "m", 2);
    fx_set_alias(fx, "m", "prod", 0, 1);
    assert_int_equal(
        store_smoke_enqueue(fx->st, 0, "m", 1, "manual", "none", &t, &created, &fx->err), MG_OK);
    json_decref(t);
    rec = json_pack("{s:s, s:s, s:s, s:i, s:i, s:s, s:{s:{s:[i]}}, s:[], s:i, s:i, s:i}", "id",
                    "prm_stats", "model", "m", "alias", "prod", "version", 2, "baseline_version", 1,
                    "state", "awaiting_approval", "policy", "rollout", "steps", 100, "gates",
                    "step_index", -1, "weight", 0, "next_step_at_ms", 0);
    assert_int_equal(fx_promotion_create(fx, rec, "created", NULL, NULL, &p), MG_OK);
    json_decref(p);
    json_decref(rec);

    assert_int_equal(store_stats(fx->st, &s, &fx->err), MG_OK);
    assert_int_equal(stat_count(s, "promotions", "awaiting_approval"), 1);
    assert_int_equal(stat_count(s, "smoke_tests", "queued"), 1);
    assert_int_equal(delivery_count(s, "runner", "pending"), 1);
    assert_int_equal(delivery_count(s, "runner", "in_sync"), 0);
    assert_true(json_number_value(
                    json_object_get(json_object_get(s, "delivery_lag_seconds"), "runner")) >= 0);
    json_decref(s);
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
        T(test_sweeps_interrupted_uploads),
        T(test_ready),
        T(test_data_epoch),
        T(test_stats),
    };
#undef T

    return cmocka_run_group_tests(tests, NULL, NULL);
}
