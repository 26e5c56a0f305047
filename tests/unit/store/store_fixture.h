/*
 * store_fixture.h - what every tests/unit/store/test_*.c program shares: a
 * store opened on a fresh mkdtemp() data directory per test (no mocks), and
 * the few steps most tests begin with (a blob, a model, versions, an alias).
 *
 * Every helper fails the running test (cmocka fail_msg) on an unexpected
 * error, so a test reads as the steps it takes. The store is opened without
 * signing keys.
 */
#ifndef STORE_FIXTURE_H
#define STORE_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "store/store.h"

#define FX_TMP_TEMPLATE "/tmp/test_store.XXXXXX"

struct fx {
    char dir[sizeof(FX_TMP_TEMPLATE)];
    struct store *st;
    struct mg_error err;
};

/* cmocka setup/teardown: *state becomes a struct fx with an open store; the
 * teardown closes it and removes the directory. */
int fx_setup(void **state);
int fx_teardown(void **state);

/* Open a store on dir as the fixture does (sync NORMAL, two readers, default archive limits). */
enum mg_code fx_open_at(const char *dir, struct store **st, struct mg_error *err);

/* Close and open the fixture's store again on the same directory. */
void fx_reopen(struct fx *fx);

/* Remove dir and everything under it; 0 on success. */
int fx_rm_tree(const char *dir);

/* <data dir>/<rel> into out. */
void fx_path(const struct fx *fx, const char *rel, char *out, size_t n);

/* Regular files under <data dir>/<rel>, recursively. */
int fx_files_under(const struct fx *fx, const char *rel);

/* "sha256:<hex>" of data. */
void fx_digest(const void *data, size_t n, char out[72]);

/* An RFC 3339 time with milliseconds, as the store writes them: 2026-11-21T10:00:00.123Z. */
bool fx_is_rfc3339_ms(const char *s);

/* Store a small non-archive blob holding text; digest_out receives its digest. */
void fx_put_blob(struct fx *fx, const char *text, char digest_out[72]);

/* Create a model with only a name. */
void fx_model(struct fx *fx, const char *name);

/* store_version_create by "alice" of a VersionCreate body (BORROWED), through its record;
 * the body may also carry what the server adds (introspection, scan, io_schema, publisher). */
enum mg_code fx_version_create(struct fx *fx, const char *model, const json_t *req, json_t **out);

/* The routes record of JSON in the contract's shapes (each may be NULL); fails the test when
 * it does not convert. */
struct mg_routes fx_routes(const json_t *routes, const json_t *match, const json_t *shadow);

/* fx_routes of weighted routes alone, in one of 16 slots reused in turn (valid until 16
 * more calls). */
const struct mg_routes *fx_routes_of(const json_t *routes);

/* store_promotion_create by "alice" of a promotion written as JSON (BORROWED): the record's
 * fields by name ("id", "model", …, "_smoke_gpu", "_creator_issuer", "_creator_subject"). */
enum mg_code fx_promotion_create(struct fx *fx, const json_t *rec, const char *event_type,
                                 const char *event_detail, const struct store_alias_change *a,
                                 json_t **out);

/* Create a version from a request built by the caller (req is consumed); its number. */
int64_t fx_version(struct fx *fx, const char *model, json_t *req);

/* A model with versions 1..n of one shared artifact (blob text "weights"). */
void fx_model_versions(struct fx *fx, const char *model, int n);

/* Route all of alias to version through store_release_commit (kind "set"), deciding on
 * generation expected; returns the new generation. */
int64_t fx_set_alias(struct fx *fx, const char *model, const char *alias, int64_t expected,
                     int64_t version);

/* Create or replace a webhook gateway (config {"url"}, secret "s3cret") hearing the models and
 * aliases in the JSON arrays given (BORROWED; NULL: all). */
void fx_gateway(struct fx *fx, const char *name, const json_t *models, const json_t *aliases);

/* The gateway's delivery of (model, alias) as store_gateway_get shows it (NEW), or NULL. */
json_t *fx_delivery(struct fx *fx, const char *gateway, const char *model, const char *alias);

/* The audit log, oldest first (NEW reference), and counts over it. */
json_t *fx_audit_items(struct fx *fx);
size_t fx_audit_count(struct fx *fx);
size_t fx_audit_count_action(struct fx *fx, const char *action);

/* Run SQL on the database file directly, under the API (the store must be closed). */
void fx_db_exec(const struct fx *fx, const char *sql);

/* The first column of the first row of sql, or -1 without a row (the store must be closed). */
int64_t fx_db_int(const struct fx *fx, const char *sql);

/* store_model_epoch of model; asserts it could be read. */
uint64_t fx_epoch(struct fx *fx, const char *model);

#endif
