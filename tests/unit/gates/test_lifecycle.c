/*
 * test_lifecycle.c - gates/lifecycle.c: which archive/unarchive/delete
 * requests the guards allow (every operation × status × what holds the
 * version), retention rules parsed and refused, and which versions a rule
 * selects (docs/contract.md "Lifecycle").
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "gates/lifecycle.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))
#define DAY 86400000LL
#define NOW (1000 * DAY)

/* ---- life_check ------------------------------------------------------------ */

enum holder { FREE, ROUTED, LKG, PROMO };

struct check_case {
    enum life_op op;
    enum life_status status;
    enum holder held;
    enum mg_code want;
    bool noop;
    const char *says; /* a part of the message, or NULL */
};

static const struct check_case checks[] = {
    /* archive */
    {LIFE_ARCHIVE, LIFE_READY, FREE, MG_OK, false, NULL},
    {LIFE_ARCHIVE, LIFE_READY, ROUTED, MG_ECONFLICT, false, "routed by alias 'production'"},
    {LIFE_ARCHIVE, LIFE_READY, LKG, MG_ECONFLICT, false, "last-known-good of alias 'staging'"},
    {LIFE_ARCHIVE, LIFE_READY, PROMO, MG_ECONFLICT, false, "active promotion p-1"},
    {LIFE_ARCHIVE, LIFE_ARCHIVED, FREE, MG_OK, true, NULL},
    {LIFE_ARCHIVE, LIFE_ARCHIVED, ROUTED, MG_OK, true, NULL},
    {LIFE_ARCHIVE, LIFE_DELETED, FREE, MG_ECONFLICT, false, "is deleted"},
    /* unarchive */
    {LIFE_UNARCHIVE, LIFE_ARCHIVED, FREE, MG_OK, false, NULL},
    {LIFE_UNARCHIVE, LIFE_READY, FREE, MG_OK, true, NULL},
    {LIFE_UNARCHIVE, LIFE_READY, ROUTED, MG_OK, true, NULL},
    {LIFE_UNARCHIVE, LIFE_DELETED, FREE, MG_ECONFLICT, false, "is deleted"},
    /* delete */
    {LIFE_DELETE, LIFE_READY, FREE, MG_OK, false, NULL},
    {LIFE_DELETE, LIFE_ARCHIVED, FREE, MG_OK, false, NULL},
    {LIFE_DELETE, LIFE_READY, ROUTED, MG_ECONFLICT, false, "routed by alias 'production'"},
    {LIFE_DELETE, LIFE_ARCHIVED, LKG, MG_ECONFLICT, false, "last-known-good"},
    {LIFE_DELETE, LIFE_READY, LKG, MG_ECONFLICT, false, "its rollback goes to"},
    {LIFE_DELETE, LIFE_READY, PROMO, MG_ECONFLICT, false, "abort the promotion first"},
    {LIFE_DELETE, LIFE_DELETED, FREE, MG_OK, true, NULL},
};

static void facts_for(enum life_status status, enum holder held, struct life_facts *f)
{
    memset(f, 0, sizeof(*f));
    f->version = 7;
    f->status = status;
    if (held == ROUTED)
        f->routed_by = "production";
    if (held == LKG)
        f->lkg_of = "staging";
    if (held == PROMO) {
        f->promotion = "p-1";
        f->promo_alias = "production";
    }
}

static void test_check_table(void **state)
{
    static const char *const ops[] = {"archive", "unarchive", "delete"};
    size_t i, bad = 0;

    (void)state;
    for (i = 0; i < N_ELEMS(checks); i++) {
        const struct check_case *c = &checks[i];
        struct life_facts f;
        struct mg_error err = {0};
        bool noop = !c->noop;
        enum mg_code rc;

        facts_for(c->status, c->held, &f);
        rc = life_check(c->op, &f, &noop, &err);
        if (rc != c->want || (rc == MG_OK && noop != c->noop) ||
            (c->says && strstr(err.message, c->says) == NULL)) {
            fprintf(stderr, "case %zu (%s of a %s version, holder %d): rc %d noop %d '%s'\n", i,
                    ops[c->op], life_status_name(c->status), c->held, rc, noop, err.message);
            bad++;
        }
    }
    assert_int_equal(bad, 0);
}

static void test_status_names(void **state)
{
    enum life_status s;

    (void)state;
    assert_true(life_status_parse("archived", &s));
    assert_int_equal(s, LIFE_ARCHIVED);
    assert_string_equal(life_status_name(LIFE_DELETED), "deleted");
    assert_false(life_status_parse("gone", &s));
    assert_false(life_status_parse(NULL, &s));
}

/* ---- rules ------------------------------------------------------------------- */

static void test_rule_parse(void **state)
{
    static const struct {
        const char *json;
        enum mg_code want;
        const char *field;
    } cases[] = {
        {"{\"keep_last\":10,\"keep_days\":90,\"action\":\"archive\"}", MG_OK, ""},
        {"{\"keep_last\":0,\"action\":\"delete\"}", MG_OK, ""},
        {"{\"keep_days\":7,\"action\":\"delete\"}", MG_OK, ""},
        {"{\"action\":\"delete\"}", MG_EINVAL, "keep_last"},
        {"{\"keep_last\":5}", MG_EINVAL, "action"},
        {"{\"keep_last\":5,\"action\":\"purge\"}", MG_EINVAL, "action"},
        {"{\"keep_last\":-1,\"action\":\"delete\"}", MG_EINVAL, "keep_last"},
        {"{\"keep_last\":1.5,\"action\":\"delete\"}", MG_EINVAL, "keep_last"},
        {"{\"keep_days\":\"90\",\"action\":\"delete\"}", MG_EINVAL, "keep_days"},
        {"{\"keep_days\":36501,\"action\":\"delete\"}", MG_EINVAL, "keep_days"},
        {"{\"keep_last\":5,\"action\":\"delete\",\"keep_tags\":[]}", MG_EINVAL, "keep_tags"},
        {"[]", MG_EINVAL, ""},
    };
    size_t i, bad = 0;

    (void)state;
    for (i = 0; i < N_ELEMS(cases); i++) {
        json_t *j = json_loads(cases[i].json, 0, NULL);
        struct life_rule r;
        struct mg_error err = {0};
        enum mg_code rc = life_rule_parse(j, &r, &err);

        if (rc != cases[i].want || strcmp(err.field, cases[i].field) != 0) {
            fprintf(stderr, "rule %s: rc %d field '%s' (%s)\n", cases[i].json, rc, err.field,
                    err.message);
            bad++;
        }
        json_decref(j);
    }
    assert_int_equal(bad, 0);
}

static void test_rule_json_round_trip(void **state)
{
    json_t *in = json_loads("{\"keep_days\":30,\"action\":\"archive\"}", 0, NULL), *out, *again;
    struct life_rule r, r2;
    struct mg_error err;

    (void)state;
    assert_int_equal(life_rule_parse(in, &r, &err), MG_OK);
    out = life_rule_to_json(&r);
    assert_true(json_is_null(json_object_get(out, "keep_last")));
    assert_int_equal(json_integer_value(json_object_get(out, "keep_days")), 30);
    assert_string_equal(json_string_value(json_object_get(out, "action")), "archive");
    assert_int_equal(life_rule_parse(out, &r2, &err), MG_OK);
    again = life_rule_to_json(&r2);
    assert_true(json_equal(out, again));
    json_decref(in);
    json_decref(out);
    json_decref(again);
}

/* ---- selection ------------------------------------------------------------------ */

/* Versions 1..n, version i created (n - i) days before NOW, all ready and free. */
static void world(struct life_facts *f, size_t n)
{
    size_t i;

    memset(f, 0, n * sizeof(*f));
    for (i = 0; i < n; i++) {
        f[i].version = (int64_t)i + 1;
        f[i].status = LIFE_READY;
        f[i].created_ms = NOW - (int64_t)(n - 1 - i) * DAY;
    }
}

static size_t select_text(const struct life_rule *r, const struct life_facts *f, size_t n,
                          char *out, size_t cap)
{
    int64_t pick[64];
    size_t m = life_retention_select(r, f, n, NOW, pick), i, off = 0;

    out[0] = '\0';
    for (i = 0; i < m && off < cap; i++)
        off += (size_t)snprintf(out + off, cap - off, "%s%lld", i ? "," : "", (long long)pick[i]);
    return m;
}

static void test_select_keep_last(void **state)
{
    struct life_facts f[10];
    struct life_rule r = {.keep_last = 3, .has_keep_last = true, .action = LIFE_DELETE};
    char got[256];

    (void)state;
    world(f, 10);
    select_text(&r, f, 10, got, sizeof(got));
    assert_string_equal(got, "7,6,5,4,3,2,1");
    /* Held versions stay whatever their age or rank. */
    f[5].routed_by = "production"; /* v6 */
    f[3].lkg_of = "production";    /* v4 */
    f[1].promotion = "p";          /* v2 */
    f[0].ever_routed = true;       /* v1 */
    select_text(&r, f, 10, got, sizeof(got));
    assert_string_equal(got, "7,5,3");
    /* Deleted versions count for nothing; archived ones count and are deleted too. */
    f[9].status = LIFE_DELETED; /* v10 */
    f[6].status = LIFE_ARCHIVED;
    select_text(&r, f, 10, got, sizeof(got));
    assert_string_equal(got, "5,3");
    r.action = LIFE_ARCHIVE; /* archive touches only ready versions */
    f[4].status = LIFE_ARCHIVED;
    select_text(&r, f, 10, got, sizeof(got));
    assert_string_equal(got, "3");
}

static void test_select_keep_days(void **state)
{
    struct life_facts f[10];
    struct life_rule r = {.keep_days = 4, .has_keep_days = true, .action = LIFE_ARCHIVE};
    char got[256];

    (void)state;
    world(f, 10);
    /* Ages 9..0 days: versions younger than 4 days (v7..v10) stay. */
    select_text(&r, f, 10, got, sizeof(got));
    assert_string_equal(got, "6,5,4,3,2,1");
    /* Both limits: a version goes only when it is past both. */
    r.keep_last = 8;
    r.has_keep_last = true;
    select_text(&r, f, 10, got, sizeof(got));
    assert_string_equal(got, "2,1");
    r.keep_last = 0;
    select_text(&r, f, 10, got, sizeof(got));
    assert_string_equal(got, "6,5,4,3,2,1");
}

static void test_select_order_and_empty(void **state)
{
    struct life_facts f[4];
    struct life_rule r = {.keep_last = 1, .has_keep_last = true, .action = LIFE_DELETE};
    struct life_facts tmp;
    char got[64];

    (void)state;
    world(f, 4);
    /* Any input order: the newest is kept by rank, the rest come out newest first. */
    tmp = f[0];
    f[0] = f[3];
    f[3] = tmp;
    select_text(&r, f, 4, got, sizeof(got));
    assert_string_equal(got, "3,2,1");
    assert_int_equal(select_text(&r, f, 0, got, sizeof(got)), 0);
    r.keep_last = 10;
    assert_int_equal(select_text(&r, f, 4, got, sizeof(got)), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_table),
        cmocka_unit_test(test_status_names),
        cmocka_unit_test(test_rule_parse),
        cmocka_unit_test(test_rule_json_round_trip),
        cmocka_unit_test(test_select_keep_last),
        cmocka_unit_test(test_select_keep_days),
        cmocka_unit_test(test_select_order_and_empty),
    };

    return cmocka_run_group_tests_name("unit_gates_lifecycle", tests, NULL, NULL);
}
