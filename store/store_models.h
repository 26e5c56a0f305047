/*
 * store_models.h - models, versions (and versions as OCI artifacts), datasets, and the page of a
 * listing (struct store_page) the other lists take too.
 *
 * Part of store.h, which includes it: include store.h. Its conventions (json_t ownership,
 * return values, out-parameters, thread safety) hold here.
 */
#ifndef STORE_MODELS_H
#define STORE_MODELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "../base/mg.h"
#include "../model/version.h"

struct store;

/* ---- models ----------------------------------------------------------- */

struct store_page {
    unsigned limit;         /* 1..1000 */
    const char *page_token; /* from a previous next_page_token, or NULL */
};

/* req: {"name","description"?,"tags"?,"readme"?,"metric_directions"?} already validated
 * for types and name. MG_ECONFLICT if it exists. *out = Model (with "readme"). */
enum mg_code store_model_create(struct store *st, const char *actor, const json_t *req,
                                json_t **out, struct mg_error *err);

enum mg_code store_model_get(struct store *st, const char *name, json_t **out,
                             struct mg_error *err);

/* q: substring of the name, or NULL. *out = {"items":[Model],"next_page_token"}; list
 * items leave out "readme". */
enum mg_code store_model_list(struct store *st, const char *q, const struct store_page *page,
                              json_t **out, struct mg_error *err);

/* patch: {"description"?,"tags"?,"readme"?,"metric_directions"?} validated; each given
 * member replaces the stored one. */
enum mg_code store_model_patch(struct store *st, const char *actor, const char *name,
                               const json_t *patch, json_t **out, struct mg_error *err);

/* ---- versions --------------------------------------------------------- */

/* req: a validated VersionCreate as its record (model/version.h; BORROWED), with what the
 * server read (introspection, scan), the normalised io_schema and the publisher, each kept
 * as given. The artifact blob must exist (MG_EINVAL, field "artifact"). *out = Version. */
enum mg_code store_version_create(struct store *st, const char *actor, const char *model,
                                  const struct mg_version_new *req, json_t **out,
                                  struct mg_error *err);

/*
 * The Version as reply text: byte for byte mg_json_text of store_version_get's value, written
 * from the rows without building it. resources and introspection are those stored documents'
 * text (NULL when absent or null), for the reply's own members, to parse only when needed.
 * Clear it with store_version_text_clear.
 */
struct store_version_text {
    char *text;
    size_t len;
    char *resources, *introspection;
};
enum mg_code store_version_get_text(struct store *st, const char *model, int64_t version,
                                    struct store_version_text *out, struct mg_error *err);
void store_version_text_clear(struct store_version_text *v);
enum mg_code store_version_get(struct store *st, const char *model, int64_t version, json_t **out,
                               struct mg_error *err);

/* What a deployer needs of a version, without its lineage, metrics or
 * params: {"artifact": digest, "image": image or null}. MG_ENOTFOUND when
 * the model or version does not exist. */
enum mg_code store_version_brief(struct store *st, const char *model, int64_t version, json_t **out,
                                 struct mg_error *err);

/* How many ?tag= and how many ?metric= filters one listing takes. */
#define STORE_VERSION_FILTERS_MAX 4

/* Every filter given must hold (AND); unused slots have key / name NULL. */
struct store_version_filter {
    struct {
        const char *key; /* ?tag=k:v */
        const char *value;
    } tags[STORE_VERSION_FILTERS_MAX];
    const char *dataset; /* ?dataset=<digest>, direct use */
    struct {
        const char *name; /* ?metric=name<op>value */
        const char *op;   /* ">=", ">", "<=", "<", "=" */
        double value;
    } metrics[STORE_VERSION_FILTERS_MAX];
    const char *status; /* ?status=: "ready", "archived", "deleted", or NULL for all */
};

/* Newest first. *out = {"items":[Version],"next_page_token"}. */
enum mg_code store_version_list(struct store *st, const char *model,
                                const struct store_version_filter *f, const struct store_page *page,
                                json_t **out, struct mg_error *err);

/* patch: {"description"?,"tags"?} validated. */
enum mg_code store_version_patch(struct store *st, const char *actor, const char *model,
                                 int64_t version, const json_t *patch, json_t **out,
                                 struct mg_error *err);

/* metrics: n validated metrics (BORROWED). Names already present with the same value are
 * accepted unchanged; a different value → MG_ECONFLICT, nothing written. */
enum mg_code store_version_add_metrics(struct store *st, const char *actor, const char *model,
                                       int64_t version, const struct mg_metric *metrics, size_t n,
                                       json_t **out, struct mg_error *err);

/* *out = {"items":[{"path","size","digest"}]} of the version's artifact. */
enum mg_code store_version_files(struct store *st, const char *model, int64_t version, json_t **out,
                                 struct mg_error *err);

/* The version's model-signing bundle, exactly as stored (malloc'd text). */
enum mg_code store_version_signature(struct store *st, const char *model, int64_t version,
                                     char **bundle, size_t *len, struct mg_error *err);

/* ---- versions as OCI artifacts (docs/contract.md "OCI distribution (read-only)") --- */

/*
 * The OCI documents kept for a version (computed once by the server with
 * artifact/modelpack.h, then served byte-identical for ever):
 * {"version","digest","manifest","config_digest","config","referrer_digest","referrer",
 *  "bundle_digest"}, the documents as JSON strings of their exact bytes, the referrer
 * members null when the version is unsigned. MG_OK with *out NULL when none is kept yet;
 * MG_ENOTFOUND when the model or version does not exist.
 */
enum mg_code store_oci_get(struct store *st, const char *model, int64_t version, json_t **out,
                           struct mg_error *err);

/*
 * Keep docs (that shape; "version" ignored; BORROWED) as the version's documents unless some
 * are kept already (another request or replica was first). Either way *out (NEW) is what is
 * kept now, which every later read returns. Derived data, readable by whoever reads the
 * version: not audited, and no model epoch moves.
 */
enum mg_code store_oci_put(struct store *st, const char *model, int64_t version, const json_t *docs,
                           json_t **out, struct mg_error *err);

/*
 * What `digest` names among model's versions, the first of (each NEW, with "kind"):
 *   "manifest" | "referrer" | "config" | "bundle": a version's kept documents (the
 *        store_oci_get shape) hold it;
 *   "artifact": {"version","size","media_type"}, a version's whole artifact;
 *   "file": {"version","artifact","path","size"}, a regular file of a version's archive.
 * MG_ENOTFOUND with field "model" when the model does not exist, without a field when
 * nothing of the model has the digest; MG_EINVAL for a malformed digest.
 */
enum mg_code store_oci_find(struct store *st, const char *model, const char *digest, json_t **out,
                            struct mg_error *err);

/* ---- datasets --------------------------------------------------------- */

/* req validated: {"digest","name","uri"?,"parents"?,"description"?}. Parents
 * must be registered. *created false when an identical record existed;
 * MG_ECONFLICT when it differs. */
enum mg_code store_dataset_create(struct store *st, const char *actor, const json_t *owners,
                                  const json_t *req, json_t **out, bool *created,
                                  struct mg_error *err);

/*
 * Dataset records belong to teams (docs/contract.md "Tenancy"). owners, on create: the owners the
 * record is registered for, one record each (the token's teams, or [""] for a global
 * token); its parents must be records the owner sees (its own or global ones; a global
 * registration may name any). owners, on reads: the owners whose records the reader sees
 * (its teams and ""), or NULL for every record; a team's own record is shown before a
 * global one.
 */
enum mg_code store_dataset_get(struct store *st, const json_t *owners, const char *digest,
                               json_t **out, struct mg_error *err);

/* Versions that used the dataset directly or through any descendant (following the
 * derivations of records the reader sees):
 * {"items":[{"model","version","role","via":[digest…],"_owners":[team]}]}; `via` is the
 * path of descendant digests from `digest` (exclusive) to the one the version used;
 * _owners are its model's (for the caller to filter by, then drop). */
enum mg_code store_dataset_versions(struct store *st, const json_t *owners, const char *digest,
                                    json_t **out, struct mg_error *err);

/* Mark a dataset withdrawn (docs/contract.md "Lifecycle"): every version trained on it, directly or
 * through derived data, then shows it in "withdrawn_datasets". Audited with the versions it
 * marks. A dataset withdrawn before keeps its first withdrawal (*changed false).
 * MG_ENOTFOUND for an unregistered digest. *out: the Dataset (NEW). */
enum mg_code store_dataset_withdraw(struct store *st, const char *actor, const char *digest,
                                    const char *reason, json_t **out, bool *changed,
                                    struct mg_error *err);

#endif
