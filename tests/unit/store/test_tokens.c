/*
 * test_tokens.c - store/tokens.c: the bootstrap token, token creation, revocation and
 * authentication, roles, and teams (with the scopes a token carries).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "base/util.h"
#include "store_fixture.h"

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
    fx_reopen(fx);
    assert_int_equal(store_token_bootstrap(fx->st, again, &created, &fx->err), MG_OK);
    assert_false(created);

    memset(&who, 0, sizeof(who));
    assert_int_equal(store_token_authenticate(fx->st, secret, strlen(secret), &who), MG_OK);
    assert_string_equal(who.name, "admin");
    assert_int_equal(who.roles, MG_ROLE_ADMIN);
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
        assert_int_equal(fx_db_int(fx, sql), 1);
        snprintf(sql, sizeof(sql),
                 "SELECT count(*) FROM tokens WHERE instr(CAST(secret_hash AS TEXT), '%s') > 0 "
                 "OR instr(id, '%s') > 0 OR instr(name, '%s') > 0",
                 secret + 4, secret + 4, secret + 4);
        assert_int_equal(fx_db_int(fx, sql), 0);
    }
    fx_reopen(fx);
}

static void test_token_create_and_delete(void **state)
{
    struct fx *fx = *state;
    json_t *tok = NULL, *tok2 = NULL, *list = NULL;
    struct store_principal who;
    const char *secret, *id;
    char saved[STORE_TOKEN_SECRET_LEN + 1];

    assert_int_equal(store_token_create(fx->st, "admin", "ci", MG_ROLE_PUBLISHER | MG_ROLE_READER,
                                        NULL, NULL, &tok, &fx->err),
                     MG_OK);
    secret = json_string_value(json_object_get(tok, "token"));
    id = json_string_value(json_object_get(tok, "id"));
    assert_non_null(secret);
    assert_non_null(id);
    assert_string_equal(json_string_value(json_object_get(tok, "name")), "ci");
    assert_string_equal(json_string_value(json_object_get(tok, "created_by")), "admin");
    assert_true(fx_is_rfc3339_ms(json_string_value(json_object_get(tok, "created_at"))));
    assert_int_equal(json_array_size(json_object_get(tok, "roles")), 2);
    snprintf(saved, sizeof(saved), "%s", secret);

    assert_int_equal(store_token_authenticate(fx->st, saved, strlen(saved), &who), MG_OK);
    assert_string_equal(who.name, "ci");
    assert_int_equal(who.roles, MG_ROLE_PUBLISHER | MG_ROLE_READER);
    assert_string_equal(who.id, id);

    /* Live names are unique. */
    assert_int_equal(
        store_token_create(fx->st, "admin", "ci", MG_ROLE_READER, NULL, NULL, &tok2, &fx->err),
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
        store_token_create(fx->st, "admin", "ci", MG_ROLE_READER, NULL, NULL, &tok2, &fx->err),
        MG_OK);
    assert_string_not_equal(json_string_value(json_object_get(tok2, "token")), saved);
    assert_int_equal(fx_audit_count_action(fx, "token.create"), 2);
    assert_int_equal(fx_audit_count_action(fx, "token.delete"), 1);
    json_decref(tok2);
    json_decref(tok);
}

static void test_roles(void **state)
{
    json_t *a;

    (void)state;
    assert_int_equal(store_role_from_name("admin"), MG_ROLE_ADMIN);
    assert_int_equal(store_role_from_name("reader"), MG_ROLE_READER);
    assert_int_equal(store_role_from_name("deployer"), MG_ROLE_DEPLOYER);
    assert_int_equal(store_role_from_name("Admin"), 0);
    assert_int_equal(store_role_from_name(""), 0);
    a = store_roles_to_json(MG_ROLE_REVIEWER | MG_ROLE_PUBLISHER);
    assert_int_equal(json_array_size(a), 2);
    assert_string_equal(json_string_value(json_array_get(a, 0)), "publisher");
    assert_string_equal(json_string_value(json_array_get(a, 1)), "reviewer");
    json_decref(a);
    a = store_roles_to_json(0);
    assert_int_equal(json_array_size(a), 0);
    json_decref(a);
}

static void test_teams(void **state)
{
    struct fx *fx = *state;
    json_t *t = NULL, *list = NULL, *items;
    char longest[STORE_TEAM_NAME_MAX + 2];

    assert_int_equal(store_team_create(fx->st, "admin", "vision", &t, &fx->err), MG_OK);
    assert_string_equal(json_string_value(json_object_get(t, "name")), "vision");
    assert_true(fx_is_rfc3339_ms(json_string_value(json_object_get(t, "created_at"))));
    json_decref(t);
    assert_int_equal(store_team_create(fx->st, "admin", "ml-2", &t, &fx->err), MG_OK);
    json_decref(t);

    t = NULL;
    assert_int_equal(store_team_create(fx->st, "admin", "vision", &t, &fx->err), MG_ECONFLICT);
    assert_string_equal(fx->err.field, "name");
    assert_null(t);
    /* Names: 1-63 of a-z, 0-9 and '-', not starting with '-'. */
    assert_int_equal(store_team_create(fx->st, "admin", "", &t, &fx->err), MG_EINVAL);
    assert_int_equal(store_team_create(fx->st, "admin", "-ml", &t, &fx->err), MG_EINVAL);
    assert_int_equal(store_team_create(fx->st, "admin", "Vision", &t, &fx->err), MG_EINVAL);
    assert_int_equal(store_team_create(fx->st, "admin", "a_b", &t, &fx->err), MG_EINVAL);
    memset(longest, 'a', STORE_TEAM_NAME_MAX + 1);
    longest[STORE_TEAM_NAME_MAX + 1] = '\0';
    assert_int_equal(store_team_create(fx->st, "admin", longest, &t, &fx->err), MG_EINVAL);
    assert_string_equal(fx->err.field, "name");
    longest[STORE_TEAM_NAME_MAX] = '\0';
    assert_int_equal(store_team_create(fx->st, "admin", longest, &t, &fx->err), MG_OK);
    json_decref(t);
    assert_int_equal(fx_audit_count_action(fx, "team.create"), 3);

    assert_int_equal(store_team_list(fx->st, &list, &fx->err), MG_OK);
    items = json_object_get(list, "items");
    assert_int_equal(json_array_size(items), 3);
    assert_string_equal(json_string_value(json_object_get(json_array_get(items, 0), "name")),
                        longest);
    assert_string_equal(json_string_value(json_object_get(json_array_get(items, 1), "name")),
                        "ml-2");
    assert_string_equal(json_string_value(json_object_get(json_array_get(items, 2), "name")),
                        "vision");
    assert_true(json_is_null(json_object_get(list, "next_page_token")));
    json_decref(list);
}

/* A token's teams must exist; its teams and alias patterns come back with the principal. */
static void test_token_scopes(void **state)
{
    struct fx *fx = *state;
    json_t *teams = json_pack("[s, s]", "vision", "ml"), *unknown = json_pack("[s]", "nope"),
           *aliases = json_pack("[s, s]", "staging", "canary-*"), *t = NULL, *tok = NULL;
    struct store_principal who;
    const char *secret;

    assert_int_equal(store_team_create(fx->st, "admin", "vision", &t, &fx->err), MG_OK);
    json_decref(t);
    assert_int_equal(store_team_create(fx->st, "admin", "ml", &t, &fx->err), MG_OK);
    json_decref(t);

    assert_int_equal(
        store_token_create(fx->st, "admin", "ci", MG_ROLE_DEPLOYER, unknown, NULL, &tok, &fx->err),
        MG_EINVAL);
    assert_string_equal(fx->err.field, "teams");
    assert_non_null(strstr(fx->err.message, "nope"));
    assert_null(tok);
    assert_int_equal(fx_audit_count_action(fx, "token.create"), 0);

    assert_int_equal(
        store_token_create(fx->st, "admin", "ci", MG_ROLE_DEPLOYER, teams, aliases, &tok, &fx->err),
        MG_OK);
    assert_true(json_equal(json_object_get(tok, "teams"), teams));
    assert_true(json_equal(json_object_get(tok, "aliases"), aliases));
    secret = json_string_value(json_object_get(tok, "token"));
    memset(&who, 0, sizeof(who));
    assert_int_equal(store_token_authenticate(fx->st, secret, strlen(secret), &who), MG_OK);
    assert_int_equal(who.nteams, 2);
    assert_string_equal(who.teams[0], "vision");
    assert_string_equal(who.teams[1], "ml");
    assert_int_equal(who.naliases, 2);
    assert_string_equal(who.aliases[1], "canary-*");
    json_decref(tok);
    json_decref(teams);
    json_decref(unknown);
    json_decref(aliases);
}

/* A trusted publisher's exchange: the jti once, the token scoped, expiring, and a person's. */
static void test_token_exchange(void **state)
{
    struct fx *fx = *state;
    char secret[STORE_TOKEN_SECRET_LEN + 1], again[STORE_TOKEN_SECRET_LEN + 1];
    json_t *models = json_pack("[s,s]", "fraud", "fraud-*"), *pub, *got = NULL;
    struct store_principal who;
    struct store_exchange x = {0};

    pub = json_pack("{s:s, s:s}", "kind", "trusted", "name", "ci");
    x.issuer = "https://ci.example";
    x.jti = "run-1";
    x.jti_expires_ms = mg_now_ms() + 600000;
    x.publisher = "ci";
    x.roles = MG_ROLE_PUBLISHER;
    x.models = models;
    x.ttl_ms = 600000;
    x.subject = "repo:acme/fraud";
    x.publisher_json = pub;
    assert_int_equal(store_token_exchange(fx->st, &x, secret, &fx->err), MG_OK);
    assert_int_equal(store_token_authenticate(fx->st, secret, strlen(secret), &who), MG_OK);
    assert_int_equal(who.roles, MG_ROLE_PUBLISHER);
    assert_int_equal(who.nmodels, 2);
    assert_string_equal(who.models[1], "fraud-*");
    assert_string_equal(who.kind, "trusted");
    assert_string_equal(who.issuer, "https://ci.example");
    assert_string_equal(who.subject, "repo:acme/fraud");
    assert_true(who.expires_ms > mg_now_ms());
    assert_int_equal(store_token_publisher(fx->st, who.id, &got, &fx->err), MG_OK);
    assert_true(json_equal(got, pub));
    json_decref(got);

    /* the same jti again: refused, and no second token */
    assert_int_equal(store_token_exchange(fx->st, &x, again, &fx->err), MG_ECONFLICT);
    assert_string_equal(fx->err.field, "jti");

    /* a token past its lifetime stops authenticating */
    x.jti = "run-2";
    x.ttl_ms = -1000;
    assert_int_equal(store_token_exchange(fx->st, &x, again, &fx->err), MG_OK);
    assert_int_equal(store_token_authenticate(fx->st, again, strlen(again), &who), MG_EUNAUTH);

    /* an expired jti is purged by a later exchange (and could be used again) */
    x.jti = "run-3";
    x.jti_expires_ms = mg_now_ms() - 1;
    x.ttl_ms = 600000;
    assert_int_equal(store_token_exchange(fx->st, &x, again, &fx->err), MG_OK);
    x.jti = "run-4";
    x.jti_expires_ms = mg_now_ms() + 600000;
    assert_int_equal(store_token_exchange(fx->st, &x, again, &fx->err), MG_OK);
    x.jti = "run-3";
    assert_int_equal(store_token_exchange(fx->st, &x, again, &fx->err), MG_OK);
    json_decref(models);
    json_decref(pub);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, fx_setup, fx_teardown)
    const struct CMUnitTest tests[] = {
        T(test_token_bootstrap_and_authenticate),
        T(test_token_create_and_delete),
        cmocka_unit_test(test_roles),
        T(test_teams),
        T(test_token_scopes),
        T(test_token_exchange),
    };
#undef T

    return cmocka_run_group_tests(tests, NULL, NULL);
}
