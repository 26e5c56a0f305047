/*
 * attest.c - signed release attestations (docs/contract.md "Signed releases"): every alias
 * generation is signed in the transaction that writes it, as an in-toto Statement v1 in a
 * Sigstore bundle (DSSE), predicateType https://modelgate.dev/release/v1. Its subjects are
 * the routed versions' artifact digests; its predicate holds the routes, match and shadow,
 * the policy's digest, the promotion's gate results and approvals, the versions' publishers
 * and the previous generation's attestation digest (the SHA-256 of its signed statement),
 * so each generation links to the one before.
 */
#include "store_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../artifact/sign.h"
#include "../base/util.h"

#define RELEASE_PREDICATE_TYPE "https://modelgate.dev/release/v1"
#define STATEMENT_TYPE "https://in-toto.io/Statement/v1"

/* Add version n (once) to the subjects and publishers. */
static enum mg_code add_version(struct db_conn *c, int64_t mid, const char *model, int64_t n,
                                json_t *subjects, json_t *publishers, struct mg_error *err)
{
    static const char sql[] =
        "SELECT artifact, publisher FROM versions WHERE model_id = ? AND version = ?";
    struct db_stmt *s;
    char name[96];
    json_t *e;
    size_t i;
    enum mg_code rc;
    bool row;

    snprintf(name, sizeof(name), "%s-v%lld", model, (long long)n);
    json_array_foreach(subjects, i, e)
    {
        if (strcmp(json_string_value(json_object_get(e, "name")), name) == 0)
            return MG_OK;
    }
    s = db_prepare(c, sql);
    db_bind_i64(s, 1, mid);
    db_bind_i64(s, 2, n);
    if ((rc = db_step(s, &row, err)) != MG_OK)
        return rc;
    if (row) {
        const char *art = db_col_text(s, 0);
        json_array_append_new(subjects,
                              json_pack("{s:s, s:{s:s}}", "name", name, "digest", "sha256",
                                        strncmp(art, "sha256:", 7) == 0 ? art + 7 : art));
        json_array_append_new(publishers,
                              json_pack("{s:I, s:o}", "version", (json_int_t)n, "publisher",
                                        db_col_null(s, 1) ? json_null() : store_col_json(s, 1)));
    }
    db_reset(s);
    return MG_OK;
}

/* The promotion's policy digest, gate results and approvals into the predicate. */
static enum mg_code add_promotion(struct db_conn *c, const char *id, json_t *pred,
                                  struct mg_error *err)
{
    static const char sql_p[] = "SELECT policy, gates FROM promotions WHERE id = ?";
    static const char sql_a[] = "SELECT by, decision, comment, at, issuer, subject "
                                "FROM promotion_approvals WHERE promotion_id = ? ORDER BY at, by";
    json_t *approvals = json_array();
    struct db_stmt *s;
    char hex[65], digest[72];
    enum mg_code rc;
    bool row;

    s = db_prepare(c, sql_p);
    db_bind_text(s, 1, id);
    if ((rc = db_step(s, &row, err)) != MG_OK)
        goto out;
    if (row) {
        mg_sha256_hex(db_col_text(s, 0), strlen(db_col_text(s, 0)), hex);
        snprintf(digest, sizeof(digest), "sha256:%s", hex);
        json_object_set_new(pred, "policy_digest", json_string(digest));
        json_object_set_new(pred, "gates", store_col_json(s, 1));
    }
    db_reset(s);
    s = db_prepare(c, sql_a);
    db_bind_text(s, 1, id);
    while ((rc = db_step(s, &row, err)) == MG_OK && row)
        json_array_append_new(
            approvals,
            json_pack("{s:o, s:o, s:o, s:o, s:o}", "by", store_col_json_string(s, 0), "decision",
                      store_col_json_string(s, 1), "comment", store_col_json_string(s, 2), "at",
                      store_col_json_string(s, 3), "identity",
                      db_col_null(s, 4)
                          ? json_null()
                          : json_pack("{s:o, s:o}", "issuer", store_col_json_string(s, 4),
                                      "subject", store_col_json_string(s, 5))));
    db_reset(s);
out:
    json_object_set_new(pred, "approvals", approvals);
    return rc;
}

/* The alias's current policy digest (no promotion): what protected it at the time. */
static enum mg_code add_policy(struct db_conn *c, int64_t mid, const char *alias, json_t *pred,
                               struct mg_error *err)
{
    static const char sql[] = "SELECT policy FROM policies WHERE model_id = ? AND alias = ?";
    struct db_stmt *s = db_prepare(c, sql);
    char hex[65], digest[72];
    enum mg_code rc;
    bool row;

    db_bind_i64(s, 1, mid);
    db_bind_text(s, 2, alias);
    if ((rc = db_step(s, &row, err)) != MG_OK)
        return rc;
    if (row) {
        mg_sha256_hex(db_col_text(s, 0), strlen(db_col_text(s, 0)), hex);
        snprintf(digest, sizeof(digest), "sha256:%s", hex);
        json_object_set_new(pred, "policy_digest", json_string(digest));
    } else {
        json_object_set_new(pred, "policy_digest", json_null());
    }
    db_reset(s);
    return MG_OK;
}

enum mg_code store_attest_generation(struct db_conn *c, const struct sign_key *key, int64_t mid,
                                     int64_t aid, const struct store_alias_change *a,
                                     const json_t *routes, const json_t *match,
                                     const json_t *shadow, int64_t gen, const char *at,
                                     const char *actor, struct mg_error *err)
{
    static const char sql_prev[] = "SELECT payload_sha256 FROM alias_attestations "
                                   "WHERE alias_id = ? AND generation = ?";
    static const char sql_ins[] = "INSERT INTO alias_attestations (alias_id, generation, keyid, "
                                  "bundle, payload_sha256, bundle_sha256) "
                                  "VALUES (?, ?, ?, ?, ?, ?)";
    static const char sql_ver[] = "INSERT INTO attestation_versions (model_id, version, "
                                  "alias_id, generation) VALUES (?, ?, ?, ?)";
    json_t *subjects = json_array(), *publishers = json_array(), *pred = NULL, *stmt = NULL, *e;
    char *bundle = NULL, payload[65], prev[72] = "", bundle_hex[65];
    struct db_stmt *s;
    enum mg_code rc = MG_OK;
    size_t i;
    bool row;

    if (key == NULL)
        goto out; /* a store opened without keys (tools, tests) signs nothing */
    if (subjects == NULL || publishers == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    for (i = 0; i < a->routes->nroutes; i++) {
        if ((rc = add_version(c, mid, a->model, a->routes->routes[i].version, subjects, publishers,
                              err)) != MG_OK)
            goto out;
    }
    for (i = 0; i < a->routes->nmatch; i++) {
        if ((rc = add_version(c, mid, a->model, a->routes->match[i].version, subjects, publishers,
                              err)) != MG_OK)
            goto out;
    }
    if (a->routes->shadow.version != 0 &&
        (rc = add_version(c, mid, a->model, a->routes->shadow.version, subjects, publishers,
                          err)) != MG_OK)
        goto out;
    s = db_prepare(c, sql_prev);
    db_bind_i64(s, 1, aid);
    db_bind_i64(s, 2, gen - 1);
    if ((rc = db_step(s, &row, err)) != MG_OK)
        goto out;
    if (row)
        snprintf(prev, sizeof(prev), "sha256:%s", db_col_text(s, 0));
    db_reset(s);
    pred = json_pack("{s:s, s:s, s:I, s:s, s:s?, s:s, s:s, s:s?, s:O, s:O?, s:O?, s:O}", "model",
                     a->model, "alias", a->alias, "generation", (json_int_t)gen, "kind", a->kind,
                     "reason", a->reason, "at", at, "by", actor, "promotion", a->promotion,
                     "routes", routes, "match", a->routes->nmatch ? match : NULL, "shadow",
                     a->routes->shadow.version ? shadow : NULL, "publishers", publishers);
    if (pred == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    if (a->promotion != NULL)
        rc = add_promotion(c, a->promotion, pred, err);
    else
        rc = add_policy(c, mid, a->alias, pred, err);
    if (rc != MG_OK)
        goto out;
    json_object_set_new(pred, "scans", json_null()); /* no artifact scan on this server yet */
    json_object_set_new(
        pred, "previous",
        prev[0] ? json_pack("{s:I, s:s}", "generation", (json_int_t)(gen - 1), "digest", prev)
                : json_null());
    /* A generation routing nothing (a delete) names the alias itself as its subject. */
    if (json_array_size(subjects) == 0) {
        char name[128], hex[65];
        snprintf(name, sizeof(name), "%s/%s@%lld", a->model, a->alias, (long long)gen);
        mg_sha256_hex(name, strlen(name), hex);
        json_array_append_new(subjects,
                              json_pack("{s:s, s:{s:s}}", "name", name, "digest", "sha256", hex));
    }
    stmt = json_pack("{s:s, s:O, s:s, s:O}", "_type", STATEMENT_TYPE, "subject", subjects,
                     "predicateType", RELEASE_PREDICATE_TYPE, "predicate", pred);
    if (stmt == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    if ((rc = sign_dsse_create(key, stmt, &bundle, payload, err)) != MG_OK)
        goto out;
    s = db_prepare(c, sql_ins);
    db_bind_i64(s, 1, aid);
    db_bind_i64(s, 2, gen);
    db_bind_text(s, 3, key->keyid);
    db_bind_text(s, 4, bundle);
    db_bind_text(s, 5, payload);
    mg_sha256_hex(bundle, strlen(bundle), bundle_hex);
    db_bind_text(s, 6, bundle_hex);
    if ((rc = db_exec(s, err)) != MG_OK)
        goto out;
    json_array_foreach(publishers, i, e)
    {
        s = db_prepare(c, sql_ver);
        db_bind_i64(s, 1, mid);
        db_bind_i64(s, 2, json_integer_value(json_object_get(e, "version")));
        db_bind_i64(s, 3, aid);
        db_bind_i64(s, 4, gen);
        if ((rc = db_exec(s, err)) != MG_OK)
            goto out;
    }
out:
    free(bundle);
    json_decref(stmt);
    json_decref(pred);
    json_decref(subjects);
    json_decref(publishers);
    return rc;
}

enum mg_code store_alias_attestation(struct store *st, const char *model, const char *alias,
                                     int64_t generation, char **bundle, struct mg_error *err)
{
    static const char sql[] =
        "SELECT t.bundle FROM alias_attestations t JOIN aliases a ON a.id = t.alias_id "
        "JOIN models m ON m.id = a.model_id WHERE m.name = ? AND a.name = ? AND t.generation = ?";
    struct db_conn *c = store_read_one(st);
    struct db_stmt *s = db_prepare(c, sql);
    enum mg_code rc;
    bool row;

    *bundle = NULL;
    db_bind_text(s, 1, model);
    db_bind_text(s, 2, alias);
    db_bind_i64(s, 3, generation);
    if ((rc = db_step(s, &row, err)) == MG_OK) {
        if (!row)
            rc = mg_fail(err, MG_ENOTFOUND, NULL,
                         "alias '%s' of model '%s' has no signed generation %lld", alias, model,
                         (long long)generation);
        else if ((*bundle = strdup(db_col_text(s, 0))) == NULL)
            rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
    db_reset(s);
    store_read_end(st, c);
    return rc;
}

enum mg_code store_version_attestations(struct store *st, const char *model, int64_t version,
                                        json_t **out, struct mg_error *err)
{
    static const char sql[] =
        "SELECT a.name, t.generation, t.bundle_sha256, length(t.bundle) FROM attestation_versions "
        "v "
        "JOIN models m ON m.id = v.model_id JOIN aliases a ON a.id = v.alias_id "
        "JOIN alias_attestations t ON t.alias_id = v.alias_id AND t.generation = v.generation "
        "WHERE m.name = ? AND v.version = ? ORDER BY a.name, t.generation";
    struct db_conn *c = store_read_one(st);
    struct db_stmt *s = db_prepare(c, sql);
    json_t *items = json_array();
    char digest[72];
    enum mg_code rc;
    bool row;

    *out = NULL;
    db_bind_text(s, 1, model);
    db_bind_i64(s, 2, version);
    while ((rc = db_step(s, &row, err)) == MG_OK && row) {
        snprintf(digest, sizeof(digest), "sha256:%s", db_col_text(s, 2));
        json_array_append_new(items,
                              json_pack("{s:s, s:I, s:s, s:I}", "alias", db_col_text(s, 0),
                                        "generation", (json_int_t)db_col_i64(s, 1), "bundle_digest",
                                        digest, "bundle_size", (json_int_t)db_col_i64(s, 3)));
    }
    db_reset(s);
    store_read_end(st, c);
    if (rc == MG_OK)
        *out = items;
    else
        json_decref(items);
    return rc;
}

enum mg_code store_oci_attestation_put(struct store *st, const char *model, const char *digest,
                                       const char *manifest, struct mg_error *err)
{
    static const char sql[] =
        "INSERT INTO oci_attestation_manifests (model_id, digest, manifest) VALUES (?, ?, ?) "
        "ON CONFLICT (model_id, digest) DO NOTHING";
    struct db_conn *c = store_write_begin(st, err);
    struct db_stmt *s;
    int64_t mid;
    enum mg_code rc;

    if (c == NULL)
        return err->code;
    if ((rc = store_model_id(c, model, &mid, err)) != MG_OK)
        goto out;
    s = db_prepare(c, sql);
    db_bind_i64(s, 1, mid);
    db_bind_text(s, 2, digest);
    db_bind_text(s, 3, manifest);
    rc = db_exec(s, err);
out:
    return store_write_end(st, c, rc, err);
}

enum mg_code store_oci_find_attestation(struct db_conn *c, int64_t mid, const char *digest,
                                        json_t **out, struct mg_error *err)
{
    static const char sql_m[] =
        "SELECT manifest FROM oci_attestation_manifests WHERE model_id = ? AND digest = ?";
    static const char sql_b[] =
        "SELECT t.bundle FROM alias_attestations t JOIN aliases a ON a.id = t.alias_id "
        "WHERE a.model_id = ? AND t.bundle_sha256 = ? LIMIT 1";
    struct db_stmt *s = db_prepare(c, sql_m);
    enum mg_code rc;
    bool row;

    *out = NULL;
    db_bind_i64(s, 1, mid);
    db_bind_text(s, 2, digest);
    if ((rc = db_step(s, &row, err)) != MG_OK)
        return rc;
    if (row)
        *out = json_pack("{s:s, s:s, s:s}", "kind", "attestation", "digest", digest, "manifest",
                         db_col_text(s, 0));
    db_reset(s);
    if (row)
        return *out ? MG_OK : mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    if (strncmp(digest, "sha256:", 7) != 0)
        return MG_OK;
    s = db_prepare(c, sql_b);
    db_bind_i64(s, 1, mid);
    db_bind_text(s, 2, digest + 7);
    if ((rc = db_step(s, &row, err)) != MG_OK)
        return rc;
    if (row)
        *out = json_pack("{s:s, s:s}", "kind", "attestation_bundle", "bundle", db_col_text(s, 0));
    db_reset(s);
    return row && *out == NULL ? mg_fail(err, MG_ENOMEM, NULL, "out of memory") : MG_OK;
}
