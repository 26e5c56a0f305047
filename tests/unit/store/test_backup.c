/*
 * test_backup.c - store/backup.c: store_backup writes a tar of a data
 * directory (a consistent database snapshot, the blobs, the keys) while its
 * store is open; store_restore lays it out in a new directory and checks every
 * blob and the audit chain, leaving nothing usable behind when they do not
 * verify.
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

#include "store_fixture.h"

/* The archive and the directory to restore into, both inside the fixture's directory (so
 * its teardown removes them): a backup takes only the database, blobs and keys. */
struct paths {
    char tar[256];
    char restored[256];
};

static void paths_of(const struct fx *fx, struct paths *p)
{
    fx_path(fx, "backup.tar", p->tar, sizeof(p->tar));
    fx_path(fx, "restored", p->restored, sizeof(p->restored));
}

/* Some of everything: blobs, models, versions, a dataset, an alias, a token. */
static void some_data(struct fx *fx)
{
    char art[72], other[72], ds[72], secret[STORE_TOKEN_SECRET_LEN + 1];
    json_t *req, *out = NULL, *owners;
    bool created;

    assert_int_equal(store_token_bootstrap(fx->st, secret, &created, &fx->err), MG_OK);
    fx_put_blob(fx, "weights one", art);
    fx_put_blob(fx, "weights two", other);
    fx_digest("dataset", 7, ds);
    req = json_pack("{s:s, s:s}", "digest", ds, "name", "train");
    owners = json_pack("[s]", "");
    assert_int_equal(store_dataset_create(fx->st, "alice", owners, req, &out, &created, &fx->err),
                     MG_OK);
    json_decref(owners);
    json_decref(out);
    json_decref(req);
    fx_model(fx, "a");
    fx_model(fx, "b");
    fx_version(fx, "a",
               json_pack("{s:s, s:{s:f}, s:[{s:s, s:s}]}", "artifact", art, "metrics", "auc", 0.91,
                         "datasets", "digest", ds, "role", "train"));
    fx_version(fx, "a", json_pack("{s:s}", "artifact", other));
    fx_version(fx, "b", json_pack("{s:s}", "artifact", art));
    fx_set_alias(fx, "a", "prod", 0, 2);
}

static void assert_same(json_t *a, json_t *b)
{
    if (!json_equal(a, b)) {
        char *ta = json_dumps(a, JSON_SORT_KEYS), *tb = json_dumps(b, JSON_SORT_KEYS);

        fail_msg("differ after restore:\n%s\n%s", ta, tb);
    }
    json_decref(a);
    json_decref(b);
}

static json_t *model(struct store *st, const char *name)
{
    json_t *out = NULL;
    struct mg_error err;

    if (store_model_get(st, name, &out, &err) != MG_OK)
        fail_msg("store_model_get(%s): %s", name, err.message);
    return out;
}

static json_t *versions(struct store *st, const char *name)
{
    struct store_page page = {.limit = 100};
    struct store_version_filter f = {0};
    json_t *out = NULL;
    struct mg_error err;

    if (store_version_list(st, name, &f, &page, &out, &err) != MG_OK)
        fail_msg("store_version_list(%s): %s", name, err.message);
    return out;
}

static json_t *alias(struct store *st)
{
    json_t *out = NULL;
    struct mg_error err;

    if (store_alias_get(st, "a", "prod", &out, &err) != MG_OK)
        fail_msg("store_alias_get: %s", err.message);
    return out;
}

static json_t *audit(struct store *st)
{
    json_t *out = NULL;
    struct mg_error err;

    if (store_audit_verify(st, &out, &err) != MG_OK)
        fail_msg("store_audit_verify: %s", err.message);
    return out;
}

static void test_round_trip(void **state)
{
    struct fx *fx = *state;
    struct paths p;
    json_t *summary = NULL;
    struct store *back = NULL;
    struct mg_error err;
    char art[72], part[300], buf[32];
    int fd;
    uint64_t size = 0;
    struct stat sb;

    paths_of(fx, &p);
    some_data(fx);

    /* While the store is open, as the server runs. */
    assert_int_equal(store_backup(fx->dir, NULL, p.tar, &summary, &fx->err), MG_OK);
    assert_string_equal(json_string_value(json_object_get(summary, "file")), p.tar);
    assert_int_equal(json_integer_value(json_object_get(summary, "blobs")), 2);
    assert_int_equal(json_integer_value(json_object_get(summary, "keys")), 0);
    json_decref(summary);
    assert_int_equal(stat(p.tar, &sb), 0);
    assert_true(sb.st_size > 0);
    /* Written under a temporary name and moved into place: nothing else is left. */
    snprintf(part, sizeof(part), "%s.part", p.tar);
    assert_int_equal(access(part, F_OK), -1);
    snprintf(part, sizeof(part), "%s.snapshot-db", p.tar);
    assert_int_equal(access(part, F_OK), -1);

    /* The store goes on after a backup; what it writes later is not in the archive. */
    fx_model(fx, "after");

    summary = NULL;
    assert_int_equal(store_restore(p.tar, p.restored, NULL, NULL, &summary, &fx->err), MG_OK);
    assert_string_equal(json_string_value(json_object_get(summary, "data_dir")), p.restored);
    assert_int_equal(json_integer_value(json_object_get(summary, "blobs")), 2);
    assert_true(json_is_true(json_object_get(json_object_get(summary, "audit"), "ok")));
    json_decref(summary);

    assert_int_equal(fx_open_at(p.restored, &back, &err), MG_OK);
    assert_same(model(fx->st, "a"), model(back, "a"));
    assert_same(model(fx->st, "b"), model(back, "b"));
    assert_same(versions(fx->st, "a"), versions(back, "a"));
    assert_same(versions(fx->st, "b"), versions(back, "b"));
    assert_same(alias(fx->st), alias(back));
    {
        json_t *m = NULL;

        assert_int_equal(store_model_get(back, "after", &m, &err), MG_ENOTFOUND);
        assert_null(m);
    }

    /* The blobs' bytes came along. */
    fx_digest("weights two", 11, art);
    assert_int_equal(store_blob_open(back, art, &fd, &size, &err), MG_OK);
    assert_int_equal(size, 11);
    assert_int_equal(read(fd, buf, sizeof(buf)), 11);
    assert_memory_equal(buf, "weights two", 11);
    close(fd);
    store_close(&back);
}

/* The audit chain is restored as it was: same entries, same head. */
static void test_round_trip_audit(void **state)
{
    struct fx *fx = *state;
    struct paths p;
    json_t *summary = NULL;
    struct store *back = NULL;
    struct mg_error err;

    paths_of(fx, &p);
    some_data(fx);
    assert_int_equal(store_backup(fx->dir, NULL, p.tar, &summary, &fx->err), MG_OK);
    json_decref(summary);
    summary = NULL;
    assert_int_equal(store_restore(p.tar, p.restored, NULL, NULL, &summary, &fx->err), MG_OK);
    json_decref(summary);
    assert_int_equal(fx_open_at(p.restored, &back, &err), MG_OK);
    assert_same(audit(fx->st), audit(back));
    store_close(&back);
}

/* Only into a new or empty directory: a live data directory is never overwritten. */
static void test_restore_refuses_non_empty_dir(void **state)
{
    struct fx *fx = *state;
    struct paths p;
    json_t *summary = NULL, *m = NULL;
    char keep[300];
    int fd;

    paths_of(fx, &p);
    some_data(fx);
    assert_int_equal(store_backup(fx->dir, NULL, p.tar, &summary, &fx->err), MG_OK);
    json_decref(summary);
    summary = NULL;

    assert_int_equal(mkdir(p.restored, 0700), 0);
    snprintf(keep, sizeof(keep), "%s/notes.txt", p.restored);
    fd = open(keep, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(store_restore(p.tar, p.restored, NULL, NULL, &summary, &fx->err), MG_EINVAL);
    assert_null(summary);
    assert_non_null(strstr(fx->err.message, "not empty"));
    assert_int_equal(access(keep, F_OK), 0); /* not removed either */

    /* An empty directory is fine. */
    assert_int_equal(unlink(keep), 0);
    assert_int_equal(store_restore(p.tar, p.restored, NULL, NULL, &summary, &fx->err), MG_OK);
    json_decref(summary);
    assert_int_equal(store_model_get(fx->st, "a", &m, &fx->err), MG_OK);
    json_decref(m);
}

static void expect_restore_refused(struct fx *fx, const struct paths *p, const char *why)
{
    json_t *summary = NULL;
    char db[300];

    assert_int_equal(store_backup(fx->dir, NULL, p->tar, &summary, &fx->err), MG_OK);
    json_decref(summary);
    summary = NULL;
    assert_int_equal(store_restore(p->tar, p->restored, NULL, NULL, &summary, &fx->err), MG_EINVAL);
    assert_null(summary);
    if (strstr(fx->err.message, why) == NULL)
        fail_msg("'%s' does not say '%s'", fx->err.message, why);
    /* Nothing usable is left behind. */
    snprintf(db, sizeof(db), "%s/modelgate.db", p->restored);
    assert_int_equal(access(db, F_OK), -1);
}

/* A blob file altered on disk is copied as it is; the restore finds it. */
static void test_restore_finds_damaged_blob(void **state)
{
    struct fx *fx = *state;
    struct paths p;
    char art[72], path[300];
    int fd;

    paths_of(fx, &p);
    some_data(fx);
    fx_digest("weights one", 11, art);
    snprintf(path, sizeof(path), "%s/blobs/sha256/%.2s/%s", fx->dir, art + 7, art + 7);
    assert_int_equal(chmod(path, 0600), 0);
    fd = open(path, O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "W", 1), 1);
    close(fd);
    expect_restore_refused(fx, &p, "damaged");
}

/* An audit chain edited under the API does not restore. */
static void test_restore_finds_tampered_audit(void **state)
{
    struct fx *fx = *state;
    struct paths p;

    paths_of(fx, &p);
    some_data(fx);
    store_close(&fx->st);
    fx_db_exec(fx, "UPDATE audit SET actor = 'mallory' WHERE seq = 2");
    fx_reopen(fx);
    expect_restore_refused(fx, &p, "audit");
}

static void test_backup_needs_a_data_dir(void **state)
{
    struct fx *fx = *state;
    struct paths p;
    json_t *summary = NULL;
    char empty[300];

    paths_of(fx, &p);
    snprintf(empty, sizeof(empty), "%s/empty", fx->dir);
    assert_int_equal(mkdir(empty, 0700), 0);
    assert_int_equal(store_backup(empty, NULL, p.tar, &summary, &fx->err), MG_EINVAL);
    assert_null(summary);
    assert_int_equal(access(p.tar, F_OK), -1);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, fx_setup, fx_teardown)
    const struct CMUnitTest tests[] = {
        T(test_round_trip),
        T(test_round_trip_audit),
        T(test_restore_refuses_non_empty_dir),
        T(test_restore_finds_damaged_blob),
        T(test_restore_finds_tampered_audit),
        T(test_backup_needs_a_data_dir),
    };
#undef T

    return cmocka_run_group_tests(tests, NULL, NULL);
}
