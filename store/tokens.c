/*
 * tokens.c - bearer tokens. Only SHA-256 of a secret is stored; a secret is
 * "mgt_" + 43 base64url characters (32 random bytes).
 */
#include "store_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include "../base/util.h"

/* Recently authenticated tokens, by SHA-256 of the secret. Entries live TOKEN_CACHE_MS;
 * revoking any token through this store empties it at once (other replicas, later, see a
 * revocation within that time). */
struct store_token_cache {
    pthread_mutex_t lock;
    struct {
        uint8_t hash[32];
        struct store_principal who;
        int64_t until_ms;
    } entries[64];
    uint64_t epoch;
};

enum mg_code store_token_cache_open(struct store *st, struct mg_error *err)
{
    struct store_token_cache *tc = calloc(1, sizeof(*tc));

    if (tc == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    pthread_mutex_init(&tc->lock, NULL);
    st->tokens = tc;
    return MG_OK;
}

void store_token_cache_close(struct store *st)
{
    if (st->tokens == NULL)
        return;
    pthread_mutex_destroy(&st->tokens->lock);
    OPENSSL_cleanse(st->tokens, sizeof(*st->tokens));
    free(st->tokens);
    st->tokens = NULL;
}

static void cache_clear(struct store *st);

static const struct {
    const char *name;
    unsigned bit;
} role_names[] = {
    {"admin", MG_ROLE_ADMIN},       {"publisher", MG_ROLE_PUBLISHER},
    {"reviewer", MG_ROLE_REVIEWER}, {"deployer", MG_ROLE_DEPLOYER},
    {"reader", MG_ROLE_READER},
};

unsigned store_role_from_name(const char *name)
{
    size_t i;

    for (i = 0; i < sizeof(role_names) / sizeof(role_names[0]); i++) {
        if (strcmp(name, role_names[i].name) == 0)
            return role_names[i].bit;
    }
    return 0;
}

json_t *store_roles_to_json(unsigned roles)
{
    json_t *a = json_array();
    size_t i;

    for (i = 0; a && i < sizeof(role_names) / sizeof(role_names[0]); i++) {
        if (roles & role_names[i].bit)
            json_array_append_new(a, json_string(role_names[i].name));
    }
    return a;
}

static bool new_secret(char out[STORE_TOKEN_SECRET_LEN + 1], uint8_t hash[32])
{
    static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    uint8_t raw[33];
    size_t i;

    if (!mg_random_bytes(raw, 32))
        return false;
    raw[32] = 0;
    memcpy(out, "mgt_", 4);
    /* 32 bytes → 43 base64url chars (the last holds 4 bits). */
    for (i = 0; i < 43; i++) {
        size_t bit = i * 6, byte = bit / 8, off = bit % 8;
        unsigned v = ((unsigned)raw[byte] << 8 | (byte + 1 < 33 ? raw[byte + 1] : 0));
        out[4 + i] = b64url[(v >> (10 - off)) & 63];
    }
    out[STORE_TOKEN_SECRET_LEN] = '\0';
    mg_sha256(out, STORE_TOKEN_SECRET_LEN, hash);
    return true;
}

void store_principal_scopes(struct store_principal *who, const char *teams_json,
                            const char *aliases_json)
{
    json_t *t = teams_json ? json_loads(teams_json, 0, NULL) : NULL;
    json_t *a = aliases_json ? json_loads(aliases_json, 0, NULL) : NULL;
    json_t *v;
    size_t i;

    who->nteams = who->naliases = 0;
    json_array_foreach(t, i, v)
    {
        if (who->nteams < STORE_MAX_SCOPES && json_is_string(v) &&
            json_string_length(v) < sizeof(who->teams[0]))
            snprintf(who->teams[who->nteams++], sizeof(who->teams[0]), "%s", json_string_value(v));
    }
    json_array_foreach(a, i, v)
    {
        if (who->naliases < STORE_MAX_SCOPES && json_is_string(v) &&
            json_string_length(v) < sizeof(who->aliases[0]))
            snprintf(who->aliases[who->naliases++], sizeof(who->aliases[0]), "%s",
                     json_string_value(v));
    }
    json_decref(t);
    json_decref(a);
}

enum mg_code store_teams_exist(struct db_conn *c, const json_t *teams, struct mg_error *err)
{
    static const char sql[] = "SELECT 1 FROM teams WHERE name = ?";
    struct db_stmt *s;
    json_t *v;
    size_t i;
    enum mg_code rc;
    bool row;

    json_array_foreach(teams, i, v)
    {
        s = db_prepare(c, sql);
        db_bind_text(s, 1, json_string_value(v));
        if ((rc = db_step(s, &row, err)) != MG_OK)
            return rc;
        if (!row)
            return mg_fail(err, MG_EINVAL, "teams",
                           "team '%s' does not exist; create it with POST /api/v1/teams",
                           json_string_value(v));
        db_reset(s);
    }
    return MG_OK;
}

/* Compact JSON text of a list (NULL: empty), malloc'd, or NULL when out of memory. */
static char *list_text(const json_t *v)
{
    return v ? json_dumps(v, JSON_COMPACT) : strdup("[]");
}

/* expires_ms 0: a token that never expires (its name unique among live ones). */
static enum mg_code insert_token(struct db_conn *c, const char *actor, const char *name,
                                 unsigned roles, const json_t *teams, const json_t *aliases,
                                 int64_t expires_ms, char secret[STORE_TOKEN_SECRET_LEN + 1],
                                 char id[24], char at[32], struct mg_error *err)
{
    static const char sql[] =
        "INSERT INTO tokens (id, name, roles, secret_hash, created_at, created_by, teams, "
        "aliases, expires_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)";
    struct db_stmt *s;
    uint8_t hash[32], rid[8];
    json_t *detail;
    char *tt = NULL, *at_ = NULL;
    enum mg_code rc;

    if (teams && (rc = store_teams_exist(c, teams, err)) != MG_OK)
        return rc;
    tt = list_text(teams);
    at_ = list_text(aliases);
    if (tt == NULL || at_ == NULL) {
        free(tt);
        free(at_);
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }

    if (!new_secret(secret, hash) || !mg_random_bytes(rid, sizeof(rid))) {
        rc = mg_fail(err, MG_EIO, NULL, "the random number generator failed");
        goto out;
    }
    memcpy(id, "tok_", 4);
    mg_hex_encode(rid, sizeof(rid), id + 4);
    store_now(at);
    s = db_prepare(c, sql);
    db_bind_text(s, 1, id);
    db_bind_text(s, 2, name);
    db_bind_i64(s, 3, (int)roles);
    db_bind_blob(s, 4, hash, sizeof(hash));
    db_bind_text(s, 5, at);
    db_bind_text(s, 6, actor);
    db_bind_text(s, 7, tt);
    db_bind_text(s, 8, at_);
    if (expires_ms)
        db_bind_i64(s, 9, expires_ms);
    else
        db_bind_null(s, 9);
    rc = db_exec(s, err);
    if (rc == MG_ECONFLICT) {
        rc =
            mg_fail(err, MG_ECONFLICT, "name",
                    "a live token named '%s' already exists; delete it or pick another name", name);
        goto out;
    }
    if (rc != MG_OK)
        goto out;
    detail = json_pack("{s:s, s:o, s:o, s:o}", "name", name, "roles", store_roles_to_json(roles),
                       "teams", teams ? json_incref((json_t *)teams) : json_array(), "aliases",
                       aliases ? json_incref((json_t *)aliases) : json_array());
    rc = store_audit_append(c, actor, "token.create", id, STORE_NO_MODEL, detail, err);
    json_decref(detail);
out:
    free(tt);
    free(at_);
    return rc;
}

enum mg_code store_token_bootstrap(struct store *st, char secret_out[STORE_TOKEN_SECRET_LEN + 1],
                                   bool *created, struct mg_error *err)
{
    static const char sql[] = "SELECT count(*) FROM tokens";
    struct db_conn *c = store_write_begin(st, err);
    struct db_stmt *s;
    char id[24], at[32];
    enum mg_code rc = MG_OK;
    int64_t n = 0;
    bool row;

    if (c == NULL)
        return err->code;
    *created = false;
    s = db_prepare(c, sql);
    if ((rc = db_step(s, &row, err)) != MG_OK)
        goto out;
    if (row)
        n = db_col_i64(s, 0);
    db_reset(s);
    if (n == 0) {
        rc = insert_token(c, "modelgated", "admin", MG_ROLE_ADMIN, NULL, NULL, 0, secret_out, id,
                          at, err);
        *created = rc == MG_OK;
    }
out:
    return store_write_end(st, c, rc, err);
}

enum mg_code store_token_create(struct store *st, const char *actor, const char *name,
                                unsigned roles, const json_t *teams, const json_t *aliases,
                                json_t **out, struct mg_error *err)
{
    struct db_conn *c = store_write_begin(st, err);
    char secret[STORE_TOKEN_SECRET_LEN + 1], id[24], at[32];
    enum mg_code rc;

    if (c == NULL)
        return err->code;
    rc = insert_token(c, actor, name, roles, teams, aliases, 0, secret, id, at, err);
    rc = store_write_end(st, c, rc, err);
    if (rc == MG_OK) {
        *out = json_pack("{s:s, s:s, s:o, s:o, s:o, s:s, s:s, s:s}", "id", id, "name", name,
                         "roles", store_roles_to_json(roles), "teams",
                         teams ? json_deep_copy(teams) : json_array(), "aliases",
                         aliases ? json_deep_copy(aliases) : json_array(), "token", secret,
                         "created_at", at, "created_by", actor);
        if (*out == NULL)
            rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
    OPENSSL_cleanse(secret, sizeof(secret));
    return rc;
}

enum mg_code store_token_set_person(struct store *st, const char *id, const char *issuer,
                                    const char *subject, struct mg_error *err)
{
    static const char sql[] =
        "UPDATE tokens SET person_issuer = ?, person_subject = ? WHERE id = ?";
    struct db_conn *c = store_write_begin(st, err);
    struct db_stmt *s;
    enum mg_code rc;

    if (c == NULL)
        return err->code;
    s = db_prepare(c, sql);
    db_bind_text(s, 1, issuer);
    db_bind_text(s, 2, subject);
    db_bind_text(s, 3, id);
    rc = db_exec(s, err);
    rc = store_write_end(st, c, rc, err);
    if (rc == MG_OK)
        cache_clear(st);
    return rc;
}

enum mg_code store_token_list(struct store *st, json_t **out, struct mg_error *err)
{
    static const char sql[] = "SELECT id, name, roles, created_at, created_by, teams, aliases "
                              "FROM tokens WHERE revoked_at IS NULL ORDER BY created_at, id";
    struct db_conn *c = store_read_one(st);
    struct db_stmt *s;
    json_t *items = json_array();
    enum mg_code rc = MG_OK;
    bool row;

    s = db_prepare(c, sql);
    while ((rc = db_step(s, &row, err)) == MG_OK && row) {
        json_array_append_new(
            items,
            json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "id", store_col_json_string(s, 0),
                      "name", store_col_json_string(s, 1), "roles",
                      store_roles_to_json((unsigned)(int)db_col_i64(s, 2)), "created_at",
                      store_col_json_string(s, 3), "created_by", store_col_json_string(s, 4),
                      "teams", store_col_json(s, 5), "aliases", store_col_json(s, 6)));
    }
    db_reset(s);
    if (rc == MG_OK)
        *out = json_pack("{s:O, s:n}", "items", items, "next_page_token");
    json_decref(items);
    store_read_end(st, c);
    return rc;
}

enum mg_code store_token_delete(struct store *st, const char *actor, const char *id,
                                struct mg_error *err)
{
    static const char sql[] =
        "UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL";
    struct db_conn *c = store_write_begin(st, err);
    struct db_stmt *s;
    char at[32];
    enum mg_code rc;

    if (c == NULL)
        return err->code;
    s = db_prepare(c, sql);
    store_now(at);
    db_bind_text(s, 1, at);
    db_bind_text(s, 2, id);
    if ((rc = db_exec(s, err)) != MG_OK)
        goto out;
    if (db_changes(s) == 0) {
        rc = mg_fail(err, MG_ENOTFOUND, NULL, "token '%s' does not exist", id);
        goto out;
    }
    rc = store_audit_append(c, actor, "token.delete", id, STORE_NO_MODEL, NULL, err);
out:
    rc = store_write_end(st, c, rc, err);
    if (rc == MG_OK)
        cache_clear(st); /* the token stops working at once */
    return rc;
}

#define TOKEN_CACHE_MS 1000

static bool cache_get(struct store *st, const uint8_t hash[32], struct store_principal *out)
{
    size_t i = hash[0] % (sizeof(st->tokens->entries) / sizeof(st->tokens->entries[0]));
    bool hit = false;

    pthread_mutex_lock(&st->tokens->lock);
    if (st->tokens->entries[i].until_ms > mg_mono_ms() &&
        mg_ct_equal(st->tokens->entries[i].hash, hash, 32)) {
        *out = st->tokens->entries[i].who;
        hit = true;
    }
    pthread_mutex_unlock(&st->tokens->lock);
    return hit;
}

static void cache_put(struct store *st, const uint8_t hash[32], uint64_t epoch,
                      const struct store_principal *who)
{
    size_t i = hash[0] % (sizeof(st->tokens->entries) / sizeof(st->tokens->entries[0]));

    pthread_mutex_lock(&st->tokens->lock);
    if (epoch == st->tokens->epoch) { /* no revocation since the lookup began */
        memcpy(st->tokens->entries[i].hash, hash, 32);
        st->tokens->entries[i].who = *who;
        st->tokens->entries[i].until_ms = mg_mono_ms() + TOKEN_CACHE_MS;
    }
    pthread_mutex_unlock(&st->tokens->lock);
}

static void cache_clear(struct store *st)
{
    pthread_mutex_lock(&st->tokens->lock);
    memset(st->tokens->entries, 0, sizeof(st->tokens->entries));
    st->tokens->epoch++;
    pthread_mutex_unlock(&st->tokens->lock);
}

enum mg_code store_token_authenticate(struct store *st, const char *secret, size_t n,
                                      struct store_principal *out)
{
    static const char sql[] = "SELECT id, name, roles, secret_hash, teams, aliases, "
                              "person_issuer, person_subject, expires_ms, models, publisher "
                              "FROM tokens WHERE secret_hash = ? AND revoked_at IS NULL";
    struct db_conn *c;
    struct db_stmt *s;
    uint8_t hash[32];
    enum mg_code rc;
    uint64_t epoch;
    bool row;

    if (n == 0 || n > 256)
        return MG_EUNAUTH;
    mg_sha256(secret, n, hash);
    if (cache_get(st, hash, out))
        return out->expires_ms != 0 && out->expires_ms <= mg_now_ms() ? MG_EUNAUTH : MG_OK;
    pthread_mutex_lock(&st->tokens->lock);
    epoch = st->tokens->epoch;
    pthread_mutex_unlock(&st->tokens->lock);
    c = store_read_one(st);
    s = db_prepare(c, sql);
    db_bind_blob(s, 1, hash, sizeof(hash));
    /* A database error is that error (the server answers 500/503), never
     * "unknown token". */
    if ((rc = db_step(s, &row, NULL)) == MG_OK) {
        rc = MG_EUNAUTH;
        if (row && db_col_bytes(s, 3) == 32 && mg_ct_equal(db_col_blob(s, 3), hash, 32)) {
            snprintf(out->id, sizeof(out->id), "%s", db_col_text(s, 0));
            snprintf(out->name, sizeof(out->name), "%s", db_col_text(s, 1));
            out->roles = (unsigned)db_col_i64(s, 2);
            store_principal_scopes(out, db_col_text(s, 4), db_col_text(s, 5));
            snprintf(out->kind, sizeof(out->kind), "token");
            snprintf(out->issuer, sizeof(out->issuer), "%s",
                     db_col_null(s, 6) ? "" : db_col_text(s, 6));
            snprintf(out->subject, sizeof(out->subject), "%s",
                     db_col_null(s, 7) ? "" : db_col_text(s, 7));
            out->expires_ms = db_col_null(s, 8) ? 0 : db_col_i64(s, 8);
            out->nmodels = 0;
            {
                json_t *m = json_loads(db_col_text(s, 9), 0, NULL), *v;
                size_t i;
                json_array_foreach(m, i, v)
                {
                    if (out->nmodels < STORE_MAX_SCOPES && json_is_string(v) &&
                        json_string_length(v) < sizeof(out->models[0]))
                        snprintf(out->models[out->nmodels++], sizeof(out->models[0]), "%s",
                                 json_string_value(v));
                }
                json_decref(m);
            }
            if (!db_col_null(s, 10))
                snprintf(out->kind, sizeof(out->kind), "trusted");
            rc = out->expires_ms != 0 && out->expires_ms <= mg_now_ms() ? MG_EUNAUTH : MG_OK;
        }
        db_reset(s);
    }
    store_read_end(st, c);
    if (rc == MG_OK)
        cache_put(st, hash, epoch, out);
    return rc;
}

enum mg_code store_token_exchange(struct store *st, const struct store_exchange *x,
                                  char secret_out[STORE_TOKEN_SECRET_LEN + 1], struct mg_error *err)
{
    static const char sql_purge[] = "DELETE FROM exchange_jti WHERE expires_ms < ?";
    static const char sql_jti[] =
        "INSERT INTO exchange_jti (issuer, jti, expires_ms) VALUES (?, ?, ?)";
    static const char sql_extra[] =
        "UPDATE tokens SET expires_ms = ?, models = ?, publisher = ?, person_issuer = ?, "
        "person_subject = ? WHERE id = ?";
    struct db_conn *c = store_write_begin(st, err);
    struct db_stmt *s;
    char name[STORE_TOKEN_NAME_MAX + 1], id[24], at[32], *models = NULL, *pub = NULL;
    int64_t now = mg_now_ms();
    enum mg_code rc;

    if (c == NULL)
        return err->code;
    s = db_prepare(c, sql_purge);
    db_bind_i64(s, 1, now);
    if ((rc = db_exec(s, err)) != MG_OK)
        goto out;
    s = db_prepare(c, sql_jti);
    db_bind_text(s, 1, x->issuer);
    db_bind_text(s, 2, x->jti);
    db_bind_i64(s, 3, x->jti_expires_ms);
    rc = db_exec(s, err);
    if (rc == MG_ECONFLICT) {
        rc = mg_fail(err, MG_ECONFLICT, "jti",
                     "this CI token (its jti) was already exchanged; a token is exchanged once");
        goto out;
    }
    if (rc != MG_OK)
        goto out;
    /* Named after the publisher (expiring tokens' names need not be unique). */
    snprintf(name, sizeof(name), "%s", x->publisher);
    models = list_text(x->models);
    pub = json_dumps(x->publisher_json, JSON_COMPACT);
    if (models == NULL || pub == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    if ((rc = insert_token(c, "trusted-publishing", name, x->roles, x->teams, x->aliases,
                           now + x->ttl_ms, secret_out, id, at, err)) != MG_OK)
        goto out;
    s = db_prepare(c, sql_extra);
    db_bind_i64(s, 1, now + x->ttl_ms);
    db_bind_text(s, 2, models);
    db_bind_text(s, 3, pub);
    db_bind_text(s, 4, x->issuer);
    db_bind_text(s, 5, x->subject);
    db_bind_text(s, 6, id);
    rc = db_exec(s, err);
out:
    free(models);
    free(pub);
    rc = store_write_end(st, c, rc, err);
    if (rc != MG_OK)
        OPENSSL_cleanse(secret_out, STORE_TOKEN_SECRET_LEN + 1);
    return rc;
}

enum mg_code store_token_publisher(struct store *st, const char *id, json_t **out,
                                   struct mg_error *err)
{
    static const char sql[] = "SELECT publisher FROM tokens WHERE id = ?";
    struct db_conn *c = store_read_one(st);
    struct db_stmt *s = db_prepare(c, sql);
    enum mg_code rc;
    bool row;

    *out = NULL;
    db_bind_text(s, 1, id);
    if ((rc = db_step(s, &row, err)) == MG_OK && row && !db_col_null(s, 0))
        *out = json_loads(db_col_text(s, 0), 0, NULL);
    db_reset(s);
    store_read_end(st, c);
    return rc;
}

/* ---- teams --------------------------------------------------------------- */

static bool valid_team_name(const char *s)
{
    size_t n = strlen(s), i;

    if (n == 0 || n > STORE_TEAM_NAME_MAX)
        return false;
    for (i = 0; i < n; i++) {
        char ch = s[i];

        if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || (i > 0 && ch == '-')))
            return false;
    }
    return true;
}

enum mg_code store_team_create(struct store *st, const char *actor, const char *name, json_t **out,
                               struct mg_error *err)
{
    static const char sql[] = "INSERT INTO teams (name, created_at, created_by) VALUES (?, ?, ?)";
    struct db_conn *c;
    struct db_stmt *s;
    char at[32];
    enum mg_code rc;

    *out = NULL;
    if (!valid_team_name(name))
        return mg_fail(err, MG_EINVAL, "name",
                       "a team name is 1-63 of a-z, 0-9 and '-', not starting with '-'");
    if ((c = store_write_begin(st, err)) == NULL)
        return err->code;
    s = db_prepare(c, sql);
    store_now(at);
    db_bind_text(s, 1, name);
    db_bind_text(s, 2, at);
    db_bind_text(s, 3, actor);
    rc = db_exec(s, err);
    if (rc == MG_ECONFLICT) {
        rc = mg_fail(err, MG_ECONFLICT, "name", "team '%s' already exists", name);
        goto out;
    }
    if (rc == MG_OK)
        rc = store_audit_append(c, actor, "team.create", name, STORE_NO_MODEL, NULL, err);
out:
    rc = store_write_end(st, c, rc, err);
    if (rc == MG_OK && (*out = json_pack("{s:s, s:s}", "name", name, "created_at", at)) == NULL)
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    return rc;
}

enum mg_code store_team_list(struct store *st, json_t **out, struct mg_error *err)
{
    static const char sql[] = "SELECT name, created_at FROM teams ORDER BY name";
    struct db_conn *c = store_read_one(st);
    struct db_stmt *s;
    json_t *items = json_array();
    enum mg_code rc = MG_OK;
    bool row;

    *out = NULL;
    s = db_prepare(c, sql);
    while ((rc = db_step(s, &row, err)) == MG_OK && row)
        json_array_append_new(items, json_pack("{s:o, s:o}", "name", store_col_json_string(s, 0),
                                               "created_at", store_col_json_string(s, 1)));
    db_reset(s);
    if (rc == MG_OK)
        *out = json_pack("{s:O, s:n}", "items", items, "next_page_token");
    json_decref(items);
    store_read_end(st, c);
    return rc;
}

enum mg_code store_token_for_person(struct store *st, const struct store_principal *who,
                                    int64_t ttl_ms, char secret_out[STORE_TOKEN_SECRET_LEN + 1],
                                    struct mg_error *err)
{
    static const char sql_extra[] = "UPDATE tokens SET expires_ms = ?, person_issuer = ?, "
                                    "person_subject = ? WHERE id = ?";
    struct db_conn *c = store_write_begin(st, err);
    json_t *teams = json_array(), *aliases = json_array();
    struct db_stmt *s;
    char name[STORE_TOKEN_NAME_MAX + 1], id[24], at[32];
    enum mg_code rc;
    size_t i;

    if (c == NULL) {
        json_decref(teams);
        json_decref(aliases);
        return err->code;
    }
    for (i = 0; teams && i < who->nteams; i++)
        json_array_append_new(teams, json_string(who->teams[i]));
    for (i = 0; aliases && i < who->naliases; i++)
        json_array_append_new(aliases, json_string(who->aliases[i]));
    if (teams == NULL || aliases == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    /* The person's display name (expiring tokens' names need not be unique). */
    snprintf(name, sizeof(name), "%s", who->name);
    for (i = 0; name[i]; i++) /* token names: letters, digits and - _ . @ */
        if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.@", name[i]))
            name[i] = '_';
    if ((rc = insert_token(c, who->name, name, who->roles, who->nteams ? teams : NULL,
                           who->naliases ? aliases : NULL, mg_now_ms() + ttl_ms, secret_out, id, at,
                           err)) != MG_OK)
        goto out;
    s = db_prepare(c, sql_extra);
    db_bind_i64(s, 1, mg_now_ms() + ttl_ms);
    db_bind_text(s, 2, who->issuer);
    db_bind_text(s, 3, who->subject);
    db_bind_text(s, 4, id);
    rc = db_exec(s, err);
out:
    json_decref(teams);
    json_decref(aliases);
    rc = store_write_end(st, c, rc, err);
    if (rc != MG_OK)
        OPENSSL_cleanse(secret_out, STORE_TOKEN_SECRET_LEN + 1);
    return rc;
}
