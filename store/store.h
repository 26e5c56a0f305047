/*
 * store.h - the only door to persistent state: the database (SQLite today,
 * PostgreSQL later) and the content-addressed blob directory.
 *
 * The API is backend-neutral: no SQL, statements or connections cross it.
 * Records come back as jansson objects in the shapes of API.md; every json_t
 * returned through an out-parameter is a NEW reference owned by the caller.
 * json_t arguments are BORROWED.
 *
 * Every mutation runs in one write transaction that also appends its audit
 * entry, so a change and its audit record are committed together or not at
 * all. `actor` is the name of the token making the change.
 *
 * Thread safety: a struct store may be used from any number of threads at
 * once; reads use a small connection pool, writes are serialised.
 *
 * Return values: MG_OK, or an error code with `err` filled (message says
 * what was wrong and what to do). Out-parameters are untouched on failure.
 */
#ifndef STORE_H
#define STORE_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "../common/mg.h"
#include "archive.h"
#include "sign.h"

struct store;

struct store_options {
    const char *data_dir;     /* created (0700) if missing */
    bool sync_normal;         /* synchronous=NORMAL instead of FULL */
    unsigned read_conns;      /* read connection pool size (>= 1) */
    struct store_archive_limits archive;
    const struct sign_keyring *keys; /* signs new versions; BORROWED, outlives the store */
};

/* Open (creating and migrating if needed). A database written by a newer
 * modelgate is refused with MG_EINVAL. Temp files of interrupted uploads are
 * removed. */
enum mg_code store_open(const struct store_options *opt, struct store **out,
                        struct mg_error *err);

/* Close all connections and free; sets *st to NULL. No call may be in flight. */
void store_close(struct store **st);

/* True when the database accepts a write and the blob directory is writable. */
bool store_ready(struct store *st);

/* Schema version this binary writes (the number of the newest migration). */
int store_schema_version(void);

/* ---- tokens and roles ------------------------------------------------- */

enum store_role {
    STORE_ROLE_ADMIN = 1u << 0,
    STORE_ROLE_PUBLISHER = 1u << 1,
    STORE_ROLE_REVIEWER = 1u << 2,
    STORE_ROLE_DEPLOYER = 1u << 3,
    STORE_ROLE_READER = 1u << 4,
};

/* Bit for a role name, or 0 if unknown. */
unsigned store_role_from_name(const char *name);

/* JSON array of role names for a bit set. NEW reference. */
json_t *store_roles_to_json(unsigned roles);

#define STORE_TOKEN_NAME_MAX 64
#define STORE_TOKEN_SECRET_LEN 47 /* "mgt_" + 43 base64url chars */

struct store_principal {
    char id[24];
    char name[STORE_TOKEN_NAME_MAX + 1];
    unsigned roles;
};

/*
 * If no token exists at all, create an admin token named "admin" and write
 * its secret to secret_out (NUL-terminated); *created tells whether it did.
 */
enum mg_code store_token_bootstrap(struct store *st, char secret_out[STORE_TOKEN_SECRET_LEN + 1],
                                   bool *created, struct mg_error *err);

/* Create a token; *out = {"id","name","roles","token","created_at","created_by"}.
 * Names are unique among live tokens (MG_ECONFLICT). */
enum mg_code store_token_create(struct store *st, const char *actor, const char *name,
                                unsigned roles, json_t **out, struct mg_error *err);

/* *out = {"items":[{"id","name","roles","created_at","created_by"}]} (no secrets). */
enum mg_code store_token_list(struct store *st, json_t **out, struct mg_error *err);

/* Revoke: the token stops authenticating at once. */
enum mg_code store_token_delete(struct store *st, const char *actor, const char *id,
                                struct mg_error *err);

/* Look a secret up (by its SHA-256, compared in constant time).
 * MG_EUNAUTH if unknown or revoked. */
enum mg_code store_token_authenticate(struct store *st, const char *secret, size_t n,
                                      struct store_principal *out);

/* ---- blobs ------------------------------------------------------------ */

struct store_blob_upload;

/* Start a streamed upload into a temp file under the blob directory. */
enum mg_code store_blob_upload_begin(struct store *st, uint64_t max_bytes,
                                     struct store_blob_upload **out, struct mg_error *err);

/* Append bytes (hashed as they are written). MG_ETOOBIG past max_bytes,
 * MG_ENOSPC when the disk is full. */
enum mg_code store_blob_upload_write(struct store_blob_upload *up, const void *p, size_t n,
                                     struct mg_error *err);

/*
 * Finish: fsync, check `expected` ("sha256:<hex>" or NULL; mismatch →
 * MG_EDIGEST and nothing kept), inspect archives, rename into place, fsync
 * the directory, then commit the row. *created is false when the blob was
 * already stored. *blob = {"digest","size","media_type","files"}.
 * Always consumes *up (sets it to NULL).
 */
enum mg_code store_blob_upload_commit(struct store_blob_upload **up, const char *actor,
                                      const char *expected, json_t **blob, bool *created,
                                      struct mg_error *err);

/* Drop an unfinished upload and its temp file. Sets *up to NULL. */
void store_blob_upload_abort(struct store_blob_upload **up);

/* {"digest","size","media_type","files","created_at","created_by"}; MG_ENOTFOUND. */
enum mg_code store_blob_get(struct store *st, const char *digest, json_t **out,
                            struct mg_error *err);

/* Open a stored blob for reading; the caller closes *fd. */
enum mg_code store_blob_open(struct store *st, const char *digest, int *fd, uint64_t *size,
                             struct mg_error *err);

/* ---- models ----------------------------------------------------------- */

struct store_page {
    unsigned limit;         /* 1..1000 */
    const char *page_token; /* from a previous next_page_token, or NULL */
};

/* req: {"name","description"?,"tags"?} already validated for types and name.
 * MG_ECONFLICT if it exists. *out = Model. */
enum mg_code store_model_create(struct store *st, const char *actor, const json_t *req,
                                json_t **out, struct mg_error *err);

enum mg_code store_model_get(struct store *st, const char *name, json_t **out,
                             struct mg_error *err);

/* q: substring of the name, or NULL. *out = {"items":[Model],"next_page_token"}. */
enum mg_code store_model_list(struct store *st, const char *q, const struct store_page *page,
                              json_t **out, struct mg_error *err);

/* patch: {"description"?,"tags"?} validated. */
enum mg_code store_model_patch(struct store *st, const char *actor, const char *name,
                               const json_t *patch, json_t **out, struct mg_error *err);

/* ---- versions --------------------------------------------------------- */

/* req: a validated VersionCreate. The artifact blob must exist (MG_EINVAL,
 * field "artifact"). *out = Version. */
enum mg_code store_version_create(struct store *st, const char *actor, const char *model,
                                  const json_t *req, json_t **out, struct mg_error *err);

enum mg_code store_version_get(struct store *st, const char *model, int64_t version,
                               json_t **out, struct mg_error *err);

struct store_version_filter {
    const char *tag_key;   /* with tag_value: ?tag=k:v */
    const char *tag_value;
    const char *dataset;   /* ?dataset=<digest>, direct use */
    const char *metric;    /* ?metric=name<op>value */
    const char *metric_op; /* ">=", ">", "<=", "<", "=" */
    double metric_value;
};

/* Newest first. *out = {"items":[Version],"next_page_token"}. */
enum mg_code store_version_list(struct store *st, const char *model,
                                const struct store_version_filter *f,
                                const struct store_page *page, json_t **out,
                                struct mg_error *err);

/* patch: {"description"?,"tags"?} validated. */
enum mg_code store_version_patch(struct store *st, const char *actor, const char *model,
                                 int64_t version, const json_t *patch, json_t **out,
                                 struct mg_error *err);

/* metrics: {name: finite number}. Names already present with the same value are
 * accepted unchanged; a different value → MG_ECONFLICT, nothing written. */
enum mg_code store_version_add_metrics(struct store *st, const char *actor, const char *model,
                                       int64_t version, const json_t *metrics, json_t **out,
                                       struct mg_error *err);

/* *out = {"items":[{"path","size","digest"}]} of the version's artifact. */
enum mg_code store_version_files(struct store *st, const char *model, int64_t version,
                                 json_t **out, struct mg_error *err);

/* The version's model-signing bundle, exactly as stored (malloc'd text). */
enum mg_code store_version_signature(struct store *st, const char *model, int64_t version,
                                     char **bundle, size_t *len, struct mg_error *err);

/* ---- datasets --------------------------------------------------------- */

/* req validated: {"digest","name","uri"?,"parents"?,"description"?}. Parents
 * must be registered. *created false when an identical record existed;
 * MG_ECONFLICT when it differs. */
enum mg_code store_dataset_create(struct store *st, const char *actor, const json_t *req,
                                  json_t **out, bool *created, struct mg_error *err);

enum mg_code store_dataset_get(struct store *st, const char *digest, json_t **out,
                               struct mg_error *err);

/* Versions that used the dataset directly or through any descendant:
 * {"items":[{"model","version","role","via":[digest…]}]}; `via` is the path of
 * descendant digests from `digest` (exclusive) to the one the version used. */
enum mg_code store_dataset_versions(struct store *st, const char *digest, json_t **out,
                                    struct mg_error *err);

/* ---- audit ------------------------------------------------------------ */

/* {"items":[{"seq","at","actor","action","target","detail","prev_hash","hash"}],
 *  "next_page_token"}; entries with seq > after, oldest first. */
enum mg_code store_audit_list(struct store *st, int64_t after, unsigned limit, json_t **out,
                              struct mg_error *err);

/* Recompute the chain: {"ok","entries","head","first_bad_seq"?}. */
enum mg_code store_audit_verify(struct store *st, json_t **out, struct mg_error *err);

#endif
