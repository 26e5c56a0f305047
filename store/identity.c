/*
 * identity.c - IdP groups mapped to roles, teams and aliases (docs/contract.md "Identity"): an SSO
 * user's principal is the union of their groups' mappings.
 */
#include "store_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/util.h"

static json_t *group_row(struct db_stmt *s)
{
    return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o}", "group", store_col_json_string(s, 0),
                     "roles", store_roles_to_json((unsigned)db_col_i64(s, 1)), "teams",
                     store_col_json(s, 2), "aliases", store_col_json(s, 3), "updated_at",
                     store_col_json_string(s, 4), "updated_by", store_col_json_string(s, 5));
}

enum mg_code store_identity_group_put(struct store *st, const char *actor, const char *group,
                                      unsigned roles, const json_t *teams, const json_t *aliases,
                                      json_t **out, struct mg_error *err)
{
    static const char sql_del[] = "DELETE FROM identity_groups WHERE name = ?";
    static const char sql_ins[] = "INSERT INTO identity_groups (name, roles, teams, aliases, "
                                  "updated_at, updated_by) VALUES (?, ?, ?, ?, ?, ?)";
    struct db_conn *c = NULL;
    struct db_stmt *s;
    char *tt = teams ? json_dumps(teams, JSON_COMPACT) : strdup("[]");
    char *at_ = aliases ? json_dumps(aliases, JSON_COMPACT) : strdup("[]");
    char at[32];
    json_t *detail = NULL;
    enum mg_code rc;

    *out = NULL;
    if (tt == NULL || at_ == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto done;
    }
    if ((c = store_write_begin(st, err)) == NULL) {
        rc = err->code;
        goto done;
    }
    if (teams && (rc = store_teams_exist(c, teams, err)) != MG_OK)
        goto out;
    s = db_prepare(c, sql_del);
    db_bind_text(s, 1, group);
    if ((rc = db_exec(s, err)) != MG_OK)
        goto out;
    store_now(at);
    s = db_prepare(c, sql_ins);
    db_bind_text(s, 1, group);
    db_bind_i64(s, 2, (int64_t)roles);
    db_bind_text(s, 3, tt);
    db_bind_text(s, 4, at_);
    db_bind_text(s, 5, at);
    db_bind_text(s, 6, actor);
    if ((rc = db_exec(s, err)) != MG_OK)
        goto out;
    *out = json_pack(
        "{s:s, s:o, s:o, s:o, s:s, s:s}", "group", group, "roles", store_roles_to_json(roles),
        "teams", teams ? json_deep_copy(teams) : json_array(), "aliases",
        aliases ? json_deep_copy(aliases) : json_array(), "updated_at", at, "updated_by", actor);
    if (*out == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    detail = json_deep_copy(*out);
    rc = store_audit_append(c, actor, "identity.group.put", group, STORE_NO_MODEL, detail, err);
out:
    rc = store_write_end(st, c, rc, err);
    if (rc != MG_OK) {
        json_decref(*out);
        *out = NULL;
    }
done:
    json_decref(detail);
    free(tt);
    free(at_);
    return rc;
}

enum mg_code store_identity_group_list(struct store *st, json_t **out, struct mg_error *err)
{
    static const char sql[] = "SELECT name, roles, teams, aliases, updated_at, updated_by "
                              "FROM identity_groups ORDER BY name";
    struct db_conn *c = store_read_one(st);
    struct db_stmt *s = db_prepare(c, sql);
    json_t *items = json_array();
    enum mg_code rc;
    bool row;

    *out = NULL;
    while ((rc = db_step(s, &row, err)) == MG_OK && row)
        json_array_append_new(items, group_row(s));
    db_reset(s);
    store_read_end(st, c);
    if (rc == MG_OK && (*out = json_pack("{s:o}", "items", items)) == NULL)
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    else if (rc != MG_OK)
        json_decref(items);
    return rc;
}

/* Delete the row named `name` (sql: DELETE ... WHERE name = ? RETURNING name) and audit it
 * under `action`, in one transaction; 404 "<what> '<name>' <missing>" when there is none. */
static enum mg_code delete_named(struct store *st, const char *actor, const char *sql,
                                 const char *name, const char *what, const char *missing,
                                 const char *action, struct mg_error *err)
{
    struct db_conn *c = store_write_begin(st, err);
    struct db_stmt *s;
    enum mg_code rc;
    bool row;

    if (c == NULL)
        return err->code;
    s = db_prepare(c, sql);
    db_bind_text(s, 1, name);
    if ((rc = db_step(s, &row, err)) != MG_OK)
        goto out;
    if ((rc = db_exec(s, err)) != MG_OK)
        goto out;
    if (!row) {
        rc = mg_fail(err, MG_ENOTFOUND, NULL, "%s '%s' %s", what, name, missing);
        goto out;
    }
    rc = store_audit_append(c, actor, action, name, STORE_NO_MODEL, NULL, err);
out:
    return store_write_end(st, c, rc, err);
}

enum mg_code store_identity_group_delete(struct store *st, const char *actor, const char *group,
                                         struct mg_error *err)
{
    return delete_named(st, actor, "DELETE FROM identity_groups WHERE name = ? RETURNING name",
                        group, "group", "has no mapping", "identity.group.delete", err);
}

/* Append the JSON array text's strings to list (n of max, each under width), skipping
 * duplicates. */
static void add_scopes(const char *text, char *list, size_t width, size_t *n, size_t max)
{
    json_t *a = text ? json_loads(text, 0, NULL) : NULL, *v;
    size_t i, k;

    json_array_foreach(a, i, v)
    {
        const char *s = json_string_value(v);
        bool dup = false;

        if (s == NULL || strlen(s) >= width)
            continue;
        for (k = 0; k < *n && !dup; k++)
            dup = strcmp(list + k * width, s) == 0;
        if (!dup && *n < max)
            snprintf(list + (*n)++ * width, width, "%s", s);
    }
    json_decref(a);
}

enum mg_code store_identity_resolve(struct store *st, const char *const *groups, size_t ngroups,
                                    struct store_principal *who, size_t *mapped,
                                    struct mg_error *err)
{
    static const char sql[] = "SELECT roles, teams, aliases FROM identity_groups WHERE name = ?";
    struct db_conn *c;
    struct db_stmt *s;
    enum mg_code rc = MG_OK;
    bool row, global_teams = false, global_aliases = false;
    size_t i;

    *mapped = 0;
    who->roles = 0;
    who->nteams = who->naliases = 0;
    if (ngroups == 0)
        return MG_OK;
    c = store_read_one(st);
    for (i = 0; i < ngroups && rc == MG_OK; i++) {
        s = db_prepare(c, sql);
        db_bind_text(s, 1, groups[i]);
        if ((rc = db_step(s, &row, err)) != MG_OK)
            break;
        if (row) {
            (*mapped)++;
            who->roles |= (unsigned)db_col_i64(s, 0);
            /* A mapping with no teams (or no aliases) is global, as a token with none is:
             * the union with anything is then global too. */
            if (strcmp(db_col_text(s, 1), "[]") == 0)
                global_teams = true;
            else
                add_scopes(db_col_text(s, 1), who->teams[0], sizeof(who->teams[0]), &who->nteams,
                           STORE_MAX_SCOPES);
            if (strcmp(db_col_text(s, 2), "[]") == 0)
                global_aliases = true;
            else
                add_scopes(db_col_text(s, 2), who->aliases[0], sizeof(who->aliases[0]),
                           &who->naliases, STORE_MAX_SCOPES);
        }
        db_reset(s);
    }
    store_read_end(st, c);
    if (global_teams)
        who->nteams = 0;
    if (global_aliases)
        who->naliases = 0;
    return rc;
}

/* ---- trusted publishers -------------------------------------------------------------- */

/* The stored config with its name and creation. NEW, or NULL. */
static json_t *publisher_row(struct db_stmt *s)
{
    json_t *cfg = store_col_json(s, 1);

    if (!json_is_object(cfg)) {
        json_decref(cfg);
        return NULL;
    }
    json_object_set_new(cfg, "name", store_col_json_string(s, 0));
    json_object_set_new(cfg, "created_at", store_col_json_string(s, 2));
    json_object_set_new(cfg, "created_by", store_col_json_string(s, 3));
    return cfg;
}

enum mg_code store_trusted_publisher_put(struct store *st, const char *actor, const char *name,
                                         const json_t *config, json_t **out, struct mg_error *err)
{
    static const char sql_del[] = "DELETE FROM trusted_publishers WHERE name = ?";
    static const char sql_ins[] = "INSERT INTO trusted_publishers (name, issuer, config, "
                                  "created_at, created_by) VALUES (?, ?, ?, ?, ?)";
    const char *issuer = json_string_value(json_object_get(config, "issuer"));
    struct db_conn *c = NULL;
    struct db_stmt *s;
    char *text = json_dumps(config, JSON_COMPACT | JSON_SORT_KEYS), at[32];
    enum mg_code rc;

    *out = NULL;
    if (text == NULL || issuer == NULL) {
        free(text);
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
    if ((c = store_write_begin(st, err)) == NULL) {
        free(text);
        return err->code;
    }
    if (json_object_get(config, "teams") &&
        (rc = store_teams_exist(c, json_object_get(config, "teams"), err)) != MG_OK)
        goto out;
    s = db_prepare(c, sql_del);
    db_bind_text(s, 1, name);
    if ((rc = db_exec(s, err)) != MG_OK)
        goto out;
    store_now(at);
    s = db_prepare(c, sql_ins);
    db_bind_text(s, 1, name);
    db_bind_text(s, 2, issuer);
    db_bind_text(s, 3, text);
    db_bind_text(s, 4, at);
    db_bind_text(s, 5, actor);
    if ((rc = db_exec(s, err)) != MG_OK)
        goto out;
    rc = store_audit_append(c, actor, "trusted_publisher.put", name, STORE_NO_MODEL,
                            (json_t *)config, err);
    if (rc == MG_OK) {
        *out = json_deep_copy(config);
        if (*out == NULL) {
            rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
            goto out;
        }
        json_object_set_new(*out, "name", json_string(name));
        json_object_set_new(*out, "created_at", json_string(at));
        json_object_set_new(*out, "created_by", json_string(actor));
    }
out:
    rc = store_write_end(st, c, rc, err);
    if (rc != MG_OK) {
        json_decref(*out);
        *out = NULL;
    }
    free(text);
    return rc;
}

enum mg_code store_trusted_publisher_get(struct store *st, const char *name, json_t **out,
                                         struct mg_error *err)
{
    static const char sql[] = "SELECT name, config, created_at, created_by "
                              "FROM trusted_publishers WHERE name = ?";
    struct db_conn *c = store_read_one(st);
    struct db_stmt *s = db_prepare(c, sql);
    enum mg_code rc;
    bool row;

    *out = NULL;
    db_bind_text(s, 1, name);
    if ((rc = db_step(s, &row, err)) == MG_OK) {
        if (!row)
            rc = mg_fail(err, MG_ENOTFOUND, NULL, "trusted publisher '%s' does not exist", name);
        else if ((*out = publisher_row(s)) == NULL)
            rc = mg_fail(err, MG_EDB, NULL, "trusted publisher '%s' is stored malformed", name);
    }
    db_reset(s);
    store_read_end(st, c);
    return rc;
}

enum mg_code store_trusted_publisher_list(struct store *st, const char *issuer, json_t **out,
                                          struct mg_error *err)
{
    static const char sql_all[] = "SELECT name, config, created_at, created_by "
                                  "FROM trusted_publishers ORDER BY name";
    static const char sql_iss[] = "SELECT name, config, created_at, created_by "
                                  "FROM trusted_publishers WHERE issuer = ? ORDER BY name";
    struct db_conn *c = store_read_one(st);
    struct db_stmt *s = db_prepare(c, issuer ? sql_iss : sql_all);
    json_t *items = json_array(), *row_j;
    enum mg_code rc;
    bool row;

    *out = NULL;
    if (issuer)
        db_bind_text(s, 1, issuer);
    while ((rc = db_step(s, &row, err)) == MG_OK && row)
        if ((row_j = publisher_row(s)) != NULL)
            json_array_append_new(items, row_j);
    db_reset(s);
    store_read_end(st, c);
    if (rc == MG_OK && (*out = json_pack("{s:o}", "items", items)) == NULL)
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    else if (rc != MG_OK)
        json_decref(items);
    return rc;
}

enum mg_code store_trusted_publisher_delete(struct store *st, const char *actor, const char *name,
                                            struct mg_error *err)
{
    return delete_named(st, actor, "DELETE FROM trusted_publishers WHERE name = ? RETURNING name",
                        name, "trusted publisher", "does not exist", "trusted_publisher.delete",
                        err);
}

/* ---- single sign-on ------------------------------------------------------------------ */

static void state_hash(const char *state, char hex[65])
{
    mg_sha256_hex(state, strlen(state), hex);
}

enum mg_code store_sso_begin(struct store *st, const char *state, const char *nonce,
                             const char *verifier, struct mg_error *err)
{
    static const char sql_purge[] = "DELETE FROM sso_logins WHERE created_ms < ?";
    static const char sql[] = "INSERT INTO sso_logins (state_hash, nonce, code_verifier, "
                              "created_ms) VALUES (?, ?, ?, ?)";
    struct db_conn *c = store_write_begin(st, err);
    struct db_stmt *s;
    char hex[65];
    int64_t now = mg_now_ms();
    enum mg_code rc;

    if (c == NULL)
        return err->code;
    s = db_prepare(c, sql_purge); /* sign-ins never finished: an hour is plenty */
    db_bind_i64(s, 1, now - 3600 * 1000);
    if ((rc = db_exec(s, err)) != MG_OK)
        goto out;
    state_hash(state, hex);
    s = db_prepare(c, sql);
    db_bind_text(s, 1, hex);
    db_bind_text(s, 2, nonce);
    db_bind_text(s, 3, verifier);
    db_bind_i64(s, 4, now);
    rc = db_exec(s, err);
out:
    return store_write_end(st, c, rc, err);
}

enum mg_code store_sso_take(struct store *st, const char *state, int64_t max_age_ms, char **nonce,
                            char **verifier, struct mg_error *err)
{
    static const char sql[] = "DELETE FROM sso_logins WHERE state_hash = ? "
                              "RETURNING nonce, code_verifier, created_ms";
    struct db_conn *c = store_write_begin(st, err);
    struct db_stmt *s;
    char hex[65];
    enum mg_code rc;
    bool row;

    *nonce = *verifier = NULL;
    if (c == NULL)
        return err->code;
    state_hash(state, hex);
    s = db_prepare(c, sql);
    db_bind_text(s, 1, hex);
    if ((rc = db_step(s, &row, err)) != MG_OK)
        goto out;
    if (!row) {
        rc = mg_fail(err, MG_EUNAUTH, "state",
                     "this sign-in is unknown or was already used; start again");
    } else if (db_col_i64(s, 2) < mg_now_ms() - max_age_ms) {
        rc = mg_fail(err, MG_EUNAUTH, "state", "this sign-in took too long; start again");
    } else {
        *nonce = strdup(db_col_text(s, 0));
        *verifier = strdup(db_col_text(s, 1));
        if (*nonce == NULL || *verifier == NULL)
            rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
    if (rc == MG_OK || rc == MG_EUNAUTH) {
        enum mg_code rc2 = db_exec(s, err); /* finish the statement; the row stays deleted */
        if (rc == MG_OK)
            rc = rc2;
    }
out:
    if (rc == MG_EUNAUTH) {
        /* commit the delete: a stale state must not be usable later either */
        struct mg_error keep = *err;
        (void)store_write_end(st, c, MG_OK, err);
        *err = keep;
    } else {
        rc = store_write_end(st, c, rc, err);
    }
    if (rc != MG_OK) {
        free(*nonce);
        free(*verifier);
        *nonce = *verifier = NULL;
    }
    return rc;
}
