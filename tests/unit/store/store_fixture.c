/*
 * store_fixture.c - the shared setup of the store/ unit tests (store_fixture.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <sqlite3.h>

#include "base/util.h"
#include "store_fixture.h"

enum mg_code fx_open_at(const char *dir, struct store **st, struct mg_error *err)
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

void fx_reopen(struct fx *fx)
{
    store_close(&fx->st);
    assert_null(fx->st);
    mg_error_clear(&fx->err);
    if (fx_open_at(fx->dir, &fx->st, &fx->err) != MG_OK)
        fail_msg("store_open: %s", fx->err.message);
}

int fx_setup(void **state)
{
    struct fx *fx = calloc(1, sizeof(*fx));

    if (fx == NULL)
        return -1;
    memcpy(fx->dir, FX_TMP_TEMPLATE, sizeof(FX_TMP_TEMPLATE));
    if (mkdtemp(fx->dir) == NULL) {
        free(fx);
        return -1;
    }
    if (fx_open_at(fx->dir, &fx->st, &fx->err) != MG_OK) {
        fprintf(stderr, "store_open: %s\n", fx->err.message);
        fx_rm_tree(fx->dir);
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

int fx_rm_tree(const char *dir)
{
    return nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

int fx_teardown(void **state)
{
    struct fx *fx = *state;
    int r;

    store_close(&fx->st);
    r = fx_rm_tree(fx->dir);
    free(fx);
    return r;
}

void fx_path(const struct fx *fx, const char *rel, char *out, size_t n)
{
    snprintf(out, n, "%s/%s", fx->dir, rel);
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

int fx_files_under(const struct fx *fx, const char *rel)
{
    char p[256];

    fx_path(fx, rel, p, sizeof(p));
    count_regular = 0;
    assert_int_equal(nftw(p, count_one, 16, FTW_PHYS), 0);
    return count_regular;
}

void fx_digest(const void *data, size_t n, char out[72])
{
    memcpy(out, "sha256:", 7);
    mg_sha256_hex(data, n, out + 7);
}

bool fx_is_rfc3339_ms(const char *s)
{
    return s != NULL && strlen(s) == 24 && s[4] == '-' && s[7] == '-' && s[10] == 'T' &&
           s[13] == ':' && s[16] == ':' && s[19] == '.' && s[23] == 'Z';
}

void fx_put_blob(struct fx *fx, const char *text, char digest_out[72])
{
    struct store_blob_upload *up = NULL;
    json_t *blob = NULL;
    bool created = false;

    fx_digest(text, strlen(text), digest_out);
    if (store_blob_upload_begin(fx->st, 1 << 20, &up, &fx->err) != MG_OK)
        fail_msg("store_blob_upload_begin: %s", fx->err.message);
    if (store_blob_upload_write(up, text, strlen(text), &fx->err) != MG_OK) {
        store_blob_upload_abort(&up);
        fail_msg("store_blob_upload_write: %s", fx->err.message);
    }
    if (store_blob_upload_commit(&up, "alice", digest_out, &blob, &created, &fx->err) != MG_OK)
        fail_msg("store_blob_upload_commit: %s", fx->err.message);
    json_decref(blob);
}

void fx_model(struct fx *fx, const char *name)
{
    json_t *req = json_pack("{s:s}", "name", name), *out = NULL;

    if (store_model_create(fx->st, "alice", req, &out, &fx->err) != MG_OK)
        fail_msg("store_model_create(%s): %s", name, fx->err.message);
    json_decref(out);
    json_decref(req);
}

enum mg_code fx_version_create(struct fx *fx, const char *model, const json_t *req, json_t **out)
{
    struct mg_version_new rec;
    enum mg_code rc;

    if ((rc = mg_version_new_init(&rec, req, &fx->err)) != MG_OK)
        return rc;
    /* what the server would read or add, when a test gives it */
    rec.introspection = json_object_get(req, "introspection");
    rec.scan = json_object_get(req, "scan");
    rec.io_schema = json_object_get(req, "io_schema");
    rec.publisher = json_object_get(req, "publisher");
    rc = store_version_create(fx->st, "alice", model, &rec, out, &fx->err);
    mg_version_new_release(&rec);
    return rc;
}

struct mg_routes fx_routes(const json_t *routes, const json_t *match, const json_t *shadow)
{
    struct mg_routes r;
    struct mg_error err;

    if (mg_routes_from_json(routes, match, shadow, &r, &err) != MG_OK)
        fail_msg("mg_routes_from_json: %s", err.message);
    return r;
}

const struct mg_routes *fx_routes_of(const json_t *routes)
{
    static struct mg_routes ring[16]; /* a test holds a few at once */
    static unsigned next;
    struct mg_routes *r = &ring[next++ % 16];

    *r = fx_routes(routes, NULL, NULL);
    return r;
}

enum mg_code fx_promotion_create(struct fx *fx, const json_t *rec, const char *event_type,
                                 const char *event_detail, const struct store_alias_change *a,
                                 json_t **out)
{
    struct mg_promotion_new p = {0};
    const json_t *b = json_object_get(rec, "baseline_version");

    snprintf(p.id, sizeof(p.id), "%s", json_string_value(json_object_get(rec, "id")));
    p.model = json_string_value(json_object_get(rec, "model"));
    p.alias = json_string_value(json_object_get(rec, "alias"));
    p.version = json_integer_value(json_object_get(rec, "version"));
    p.baseline_version = json_is_integer(b) ? json_integer_value(b) : 0;
    p.state = json_string_value(json_object_get(rec, "state"));
    p.phase = json_string_value(json_object_get(rec, "phase"));
    p.reason = json_string_value(json_object_get(rec, "reason"));
    p.step_index = (int)json_integer_value(json_object_get(rec, "step_index"));
    p.weight = (int)json_integer_value(json_object_get(rec, "weight"));
    p.next_step_at_ms = json_integer_value(json_object_get(rec, "next_step_at_ms"));
    p.policy = json_object_get(rec, "policy");
    p.gates = json_object_get(rec, "gates");
    p.smoke_gpu = json_string_value(json_object_get(rec, "_smoke_gpu"));
    p.creator_issuer = json_string_value(json_object_get(rec, "_creator_issuer"));
    p.creator_subject = json_string_value(json_object_get(rec, "_creator_subject"));
    return store_promotion_create(fx->st, "alice", &p, event_type, event_detail, a, out, &fx->err);
}

int64_t fx_version(struct fx *fx, const char *model, json_t *req)
{
    json_t *out = NULL;
    int64_t n;

    assert_non_null(req);
    if (fx_version_create(fx, model, req, &out) != MG_OK)
        fail_msg("store_version_create(%s): %s", model, fx->err.message);
    n = json_integer_value(json_object_get(out, "version"));
    json_decref(out);
    json_decref(req);
    return n;
}

void fx_model_versions(struct fx *fx, const char *model, int n)
{
    char art[72];

    fx_put_blob(fx, "weights", art);
    fx_model(fx, model);
    for (int i = 1; i <= n; i++)
        assert_int_equal(fx_version(fx, model, json_pack("{s:s}", "artifact", art)), i);
}

int64_t fx_set_alias(struct fx *fx, const char *model, const char *alias, int64_t expected,
                     int64_t version)
{
    struct store_alias_change a;
    json_t *routes = json_pack("[{s:I, s:i}]", "version", (json_int_t)version, "weight", 100);
    struct mg_routes rt = fx_routes(routes, NULL, NULL);
    json_t *out = NULL;
    int64_t gen;

    memset(&a, 0, sizeof(a));
    a.model = model;
    a.alias = alias;
    a.expected_generation = expected;
    a.routes = &rt;
    a.kind = "set";
    if (store_release_commit(fx->st, "alice", &a, NULL, &out, &fx->err) != MG_OK)
        fail_msg("store_release_commit(%s/%s): %s", model, alias, fx->err.message);
    gen = json_integer_value(json_object_get(out, "generation"));
    json_decref(out);
    json_decref(routes);
    return gen;
}

void fx_gateway(struct fx *fx, const char *name, const json_t *models, const json_t *aliases)
{
    json_t *config = json_pack("{s:s}", "url", "https://gw.example/hook"), *out = NULL;
    bool created = false;

    if (store_gateway_put(fx->st, "alice", name, "webhook", config, "s3cret", models, aliases, &out,
                          &created, &fx->err) != MG_OK)
        fail_msg("store_gateway_put(%s): %s", name, fx->err.message);
    json_decref(out);
    json_decref(config);
}

json_t *fx_delivery(struct fx *fx, const char *gateway, const char *model, const char *alias)
{
    json_t *g = NULL, *d, *found = NULL;
    size_t i;

    if (store_gateway_get(fx->st, gateway, &g, &fx->err) != MG_OK)
        fail_msg("store_gateway_get(%s): %s", gateway, fx->err.message);
    json_array_foreach(json_object_get(g, "deliveries"), i, d)
    {
        if (strcmp(json_string_value(json_object_get(d, "model")), model) == 0 &&
            strcmp(json_string_value(json_object_get(d, "alias")), alias) == 0) {
            assert_null(found); /* one row per (gateway, model, alias) */
            found = json_incref(d);
        }
    }
    json_decref(g);
    return found;
}

json_t *fx_audit_items(struct fx *fx)
{
    json_t *out = NULL, *items;

    if (store_audit_list(fx->st, 0, 1000, &out, &fx->err) != MG_OK)
        fail_msg("store_audit_list: %s", fx->err.message);
    items = json_incref(json_object_get(out, "items"));
    json_decref(out);
    assert_non_null(items);
    return items;
}

size_t fx_audit_count(struct fx *fx)
{
    json_t *items = fx_audit_items(fx);
    size_t n = json_array_size(items);

    json_decref(items);
    return n;
}

size_t fx_audit_count_action(struct fx *fx, const char *action)
{
    json_t *items = fx_audit_items(fx), *e;
    size_t i, n = 0;

    json_array_foreach(items, i, e)
    {
        if (strcmp(json_string_value(json_object_get(e, "action")), action) == 0)
            n++;
    }
    json_decref(items);
    return n;
}

void fx_db_exec(const struct fx *fx, const char *sql)
{
    char p[256];
    sqlite3 *db = NULL;
    char *msg = NULL;

    fx_path(fx, "modelgate.db", p, sizeof(p));
    assert_int_equal(sqlite3_open_v2(p, &db, SQLITE_OPEN_READWRITE, NULL), SQLITE_OK);
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
        fail_msg("%s: %s", sql, msg);
    assert_int_equal(sqlite3_close(db), SQLITE_OK);
}

int64_t fx_db_int(const struct fx *fx, const char *sql)
{
    char p[256];
    sqlite3 *db = NULL;
    sqlite3_stmt *s = NULL;
    int64_t v = -1;

    fx_path(fx, "modelgate.db", p, sizeof(p));
    assert_int_equal(sqlite3_open_v2(p, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK);
    if (sqlite3_step(s) == SQLITE_ROW)
        v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    assert_int_equal(sqlite3_close(db), SQLITE_OK);
    return v;
}

uint64_t fx_epoch(struct fx *fx, const char *model)
{
    uint64_t e = 0;

    if (store_model_epoch(fx->st, model, &e, &fx->err) != MG_OK)
        fail_msg("store_model_epoch(%s): %s", model, fx->err.message);
    return e;
}
