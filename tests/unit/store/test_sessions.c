/*
 * test_sessions.c - store/sessions.c: reviewer UI sessions opened with a
 * token, looked up by cookie value (acting as that token, with its CSRF
 * token), expired when idle or old, and closed; a revoked token ends them.
 *
 * Idle and age limits are tested by moving a session's stored times back under
 * the API (the store closed), not by waiting.
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

#define MINUTE_MS ((int64_t)60000)
#define HOUR_MS (60 * MINUTE_MS)

struct session {
    char secret[STORE_TOKEN_SECRET_LEN + 1];
    char token_id[24];
    char id[STORE_SESSION_ID_LEN + 1];
    char csrf[STORE_CSRF_LEN + 1];
};

/* A token named name (reviewer, team "ml") and a session opened with it. */
static void open_session(struct fx *fx, const char *name, struct session *s)
{
    json_t *teams = json_pack("[s]", "ml"), *tok = NULL, *team = NULL;
    struct store_principal who;

    if (store_team_create(fx->st, "admin", "ml", &team, &fx->err) != MG_OK &&
        fx->err.code != MG_ECONFLICT)
        fail_msg("store_team_create: %s", fx->err.message);
    json_decref(team);
    if (store_token_create(fx->st, "admin", name, MG_ROLE_REVIEWER, teams, NULL, &tok, &fx->err) !=
        MG_OK)
        fail_msg("store_token_create: %s", fx->err.message);
    snprintf(s->secret, sizeof(s->secret), "%s", json_string_value(json_object_get(tok, "token")));
    snprintf(s->token_id, sizeof(s->token_id), "%s", json_string_value(json_object_get(tok, "id")));
    json_decref(tok);
    json_decref(teams);
    memset(&who, 0, sizeof(who));
    if (store_session_open(fx->st, s->secret, strlen(s->secret), s->id, s->csrf, &who, &fx->err) !=
        MG_OK)
        fail_msg("store_session_open: %s", fx->err.message);
    assert_string_equal(who.name, name);
}

static enum mg_code check(struct fx *fx, const struct session *s, int64_t idle_ms, int64_t max_ms,
                          struct store_principal *who)
{
    char csrf[STORE_CSRF_LEN + 1] = "";
    enum mg_code rc;

    memset(who, 0, sizeof(*who));
    rc = store_session_check(fx->st, s->id, strlen(s->id), idle_ms, max_ms, who, csrf);
    if (rc == MG_OK)
        assert_string_equal(csrf, s->csrf);
    return rc;
}

/* Move every session's times back by ms (the store is reopened). */
static void age(struct fx *fx, const char *column, int64_t ms)
{
    char sql[128];

    store_close(&fx->st);
    snprintf(sql, sizeof(sql), "UPDATE ui_sessions SET %s = %s - %lld", column, column,
             (long long)ms);
    fx_db_exec(fx, sql);
    fx_reopen(fx);
}

static bool b64url(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", s[i]) ==
                NULL ||
            s[i] == '\0')
            return false;
    return s[n] == '\0';
}

static void test_open_and_check(void **state)
{
    struct fx *fx = *state;
    struct session s, t;
    struct store_principal who;

    open_session(fx, "rita", &s);
    assert_true(b64url(s.id, STORE_SESSION_ID_LEN));
    assert_true(b64url(s.csrf, STORE_CSRF_LEN));
    assert_string_not_equal(s.id, s.csrf);
    assert_int_equal(fx_audit_count_action(fx, "session.open"), 1);

    /* The session acts as its token: name, roles, teams. */
    assert_int_equal(check(fx, &s, HOUR_MS, 12 * HOUR_MS, &who), MG_OK);
    assert_string_equal(who.name, "rita");
    assert_string_equal(who.id, s.token_id);
    assert_int_equal(who.roles, MG_ROLE_REVIEWER);
    assert_int_equal(who.nteams, 1);
    assert_string_equal(who.teams[0], "ml");

    /* A second session of the same token is another session. */
    memset(&t, 0, sizeof(t));
    memcpy(t.secret, s.secret, sizeof(s.secret));
    assert_int_equal(
        store_session_open(fx->st, t.secret, strlen(t.secret), t.id, t.csrf, &who, &fx->err),
        MG_OK);
    assert_string_not_equal(t.id, s.id);
    assert_string_not_equal(t.csrf, s.csrf);
    assert_int_equal(check(fx, &t, HOUR_MS, 12 * HOUR_MS, &who), MG_OK);

    /* Only the cookie's hash is stored. */
    store_close(&fx->st);
    {
        char sql[200], hex[65];

        mg_sha256_hex(s.id, strlen(s.id), hex);
        snprintf(sql, sizeof(sql),
                 "SELECT count(*) FROM ui_sessions WHERE lower(hex(id_hash)) = '%s'", hex);
        assert_int_equal(fx_db_int(fx, sql), 1);
        snprintf(sql, sizeof(sql),
                 "SELECT count(*) FROM ui_sessions WHERE instr(CAST(id_hash AS TEXT), '%s') > 0",
                 s.id);
        assert_int_equal(fx_db_int(fx, sql), 0);
        assert_int_equal(fx_db_int(fx, "SELECT count(*) FROM ui_sessions"), 2);
    }
    fx_reopen(fx);
    /* ... and sessions outlive a restart. */
    assert_int_equal(check(fx, &s, HOUR_MS, 12 * HOUR_MS, &who), MG_OK);
}

static void test_wrong_secret_or_cookie(void **state)
{
    struct fx *fx = *state;
    struct session s, bad;
    struct store_principal who;
    char id[STORE_SESSION_ID_LEN + 1], csrf[STORE_CSRF_LEN + 1];

    open_session(fx, "rita", &s);
    assert_int_equal(store_session_open(fx->st, "mgt_nope", 8, id, csrf, &who, &fx->err),
                     MG_EUNAUTH);
    assert_string_equal(fx->err.field, "token");
    assert_int_equal(fx_audit_count_action(fx, "session.open"), 1);

    bad = s;
    bad.id[5] = bad.id[5] == 'A' ? 'B' : 'A';
    assert_int_equal(check(fx, &bad, HOUR_MS, 12 * HOUR_MS, &who), MG_EUNAUTH);
    assert_int_equal(store_session_check(fx->st, s.id, STORE_SESSION_ID_LEN - 1, HOUR_MS,
                                         12 * HOUR_MS, &who, csrf),
                     MG_EUNAUTH);
    assert_int_equal(store_session_check(fx->st, "", 0, HOUR_MS, 12 * HOUR_MS, &who, csrf),
                     MG_EUNAUTH);
    /* The CSRF token is not a cookie. */
    memcpy(bad.id, s.csrf, sizeof(bad.id));
    assert_int_equal(check(fx, &bad, HOUR_MS, 12 * HOUR_MS, &who), MG_EUNAUTH);
}

/* Idle longer than idle_ms, or older than max_ms: expired. A check refreshes the idle clock. */
static void test_expiry(void **state)
{
    struct fx *fx = *state;
    struct session s;
    struct store_principal who;

    open_session(fx, "rita", &s);
    age(fx, "last_ms", 31 * MINUTE_MS);
    assert_int_equal(check(fx, &s, 30 * MINUTE_MS, 12 * HOUR_MS, &who), MG_EUNAUTH);
    /* Expired is not deleted: a longer idle limit still accepts it, and refreshes it. */
    assert_int_equal(check(fx, &s, HOUR_MS, 12 * HOUR_MS, &who), MG_OK);
    assert_int_equal(check(fx, &s, 30 * MINUTE_MS, 12 * HOUR_MS, &who), MG_OK);
    assert_int_equal(check(fx, &s, 1 * MINUTE_MS, 12 * HOUR_MS, &who), MG_OK);

    /* Age counts from opening, whatever the use since. */
    age(fx, "created_ms", 13 * HOUR_MS);
    assert_int_equal(check(fx, &s, HOUR_MS, 12 * HOUR_MS, &who), MG_EUNAUTH);
    assert_int_equal(check(fx, &s, HOUR_MS, 14 * HOUR_MS, &who), MG_OK);
}

static void test_close(void **state)
{
    struct fx *fx = *state;
    struct session s, t;
    struct store_principal who;

    open_session(fx, "rita", &s);
    open_session(fx, "sam", &t);
    assert_int_equal(store_session_close(fx->st, s.id, strlen(s.id), &fx->err), MG_OK);
    assert_int_equal(check(fx, &s, HOUR_MS, 12 * HOUR_MS, &who), MG_EUNAUTH);
    assert_int_equal(check(fx, &t, HOUR_MS, 12 * HOUR_MS, &who), MG_OK); /* only that one */
    assert_int_equal(store_session_close(fx->st, s.id, strlen(s.id), &fx->err), MG_OK);
}

/* Revoking the token ends its sessions at once. */
static void test_revoked_token_ends_sessions(void **state)
{
    struct fx *fx = *state;
    struct session s;
    struct store_principal who;
    char id[STORE_SESSION_ID_LEN + 1], csrf[STORE_CSRF_LEN + 1];

    open_session(fx, "rita", &s);
    assert_int_equal(check(fx, &s, HOUR_MS, 12 * HOUR_MS, &who), MG_OK);
    assert_int_equal(store_token_delete(fx->st, "admin", s.token_id, &fx->err), MG_OK);
    assert_int_equal(check(fx, &s, HOUR_MS, 12 * HOUR_MS, &who), MG_EUNAUTH);
    assert_int_equal(
        store_session_open(fx->st, s.secret, strlen(s.secret), id, csrf, &who, &fx->err),
        MG_EUNAUTH);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, fx_setup, fx_teardown)
    const struct CMUnitTest tests[] = {
        T(test_open_and_check), T(test_wrong_secret_or_cookie),      T(test_expiry),
        T(test_close),          T(test_revoked_token_ends_sessions),
    };
#undef T

    return cmocka_run_group_tests(tests, NULL, NULL);
}
