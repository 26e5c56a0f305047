/*
 * test_authz.c - gates/authz.c: the one authorisation decision, as tables over every
 * kind of route (public, any token, reader, publisher, reviewer, deployer, admin) × every
 * role × token scope (global, team, aliases) × model ownership × --read-scope.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "gates/authz.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

static const char *const risk[] = {"risk"};
static const char *const ads[] = {"ads"};
static const char *const ads_risk[] = {"ads", "risk"};
static const char *const staging[] = {"staging", "dev-*"};

static const struct gate_model fraud = {"fraud", risk, 1};
static const struct gate_model shared = {"shared", ads_risk, 2};
static const struct gate_model orphan = {"orphan", NULL, 0};

enum scope { GLOBAL, TEAM_RISK, TEAM_ADS, ALIASES };

static struct gate_token token(unsigned roles, enum scope sc)
{
    struct gate_token t = {"tok", roles, NULL, 0, NULL, 0};

    if (sc == TEAM_RISK)
        t.teams = risk, t.nteams = 1;
    else if (sc == TEAM_ADS)
        t.teams = ads, t.nteams = 1;
    else if (sc == ALIASES)
        t.aliases = staging, t.naliases = 2;
    return t;
}

/* Every role × every route kind, global tokens: the role matrix, every role reads. */
static void test_roles(void **state)
{
    static const unsigned roles[] = {MG_ROLE_ADMIN, MG_ROLE_PUBLISHER, MG_ROLE_REVIEWER,
                                     MG_ROLE_DEPLOYER, MG_ROLE_READER};
    static const unsigned needs[] = {MG_NEED_PUBLIC,    MG_NEED_ANY,      MG_ROLE_READER,
                                     MG_ROLE_PUBLISHER, MG_ROLE_REVIEWER, MG_ROLE_DEPLOYER,
                                     MG_ROLE_ADMIN};
    size_t i, j, bad = 0;

    (void)state;
    for (i = 0; i < N_ELEMS(roles); i++) {
        for (j = 0; j < N_ELEMS(needs); j++) {
            struct gate_token t = token(roles[i], GLOBAL);
            struct gate_request q = {needs[j], &fraud, NULL, GATE_READ_ALL, NULL, NULL};
            struct gate_decision d;
            bool want = needs[j] == MG_NEED_PUBLIC || needs[j] == MG_NEED_ANY ||
                        needs[j] == MG_ROLE_READER || roles[i] == MG_ROLE_ADMIN ||
                        roles[i] == needs[j];

            gate_authorize(&t, &q, &d);
            if (d.allow != want || (!d.allow && (d.status != 403 || d.reason[0] == '\0'))) {
                print_error("role %#x need %#x: allow %d (want %d) %u %s\n", roles[i], needs[j],
                            d.allow, want, d.status, d.reason);
                bad++;
            }
        }
    }
    assert_int_equal(bad, 0);
}

static void test_table(void **state)
{
    static const struct {
        const char *what;
        unsigned roles;
        enum scope sc;
        unsigned need;
        const struct gate_model *model;
        const char *alias;
        enum gate_read_scope rs;
        unsigned status; /* 200 allow, else the denial */
        const char *reason_part;
    } cases[] = {
        {"team publisher on its team's model", MG_ROLE_PUBLISHER, TEAM_RISK, MG_ROLE_PUBLISHER,
         &fraud, NULL, GATE_READ_ALL, 200, NULL},
        {"team publisher on another team's model", MG_ROLE_PUBLISHER, TEAM_ADS, MG_ROLE_PUBLISHER,
         &fraud, NULL, GATE_READ_ALL, 403, "owned by team risk"},
        {"the denial names the token's team", MG_ROLE_PUBLISHER, TEAM_ADS, MG_ROLE_PUBLISHER,
         &fraud, NULL, GATE_READ_ALL, 403, "acts only for team ads"},
        {"team deployer on another team's model", MG_ROLE_DEPLOYER, TEAM_ADS, MG_ROLE_DEPLOYER,
         &fraud, "production", GATE_READ_ALL, 403, "risk"},
        {"team reviewer on another team's model", MG_ROLE_REVIEWER, TEAM_ADS, MG_ROLE_REVIEWER,
         &fraud, NULL, GATE_READ_ALL, 403, "risk"},
        {"a model of two teams", MG_ROLE_DEPLOYER, TEAM_ADS, MG_ROLE_DEPLOYER, &shared,
         "production", GATE_READ_ALL, 200, NULL},
        {"a model of no team", MG_ROLE_PUBLISHER, TEAM_RISK, MG_ROLE_PUBLISHER, &orphan, NULL,
         GATE_READ_ALL, 403, "no team"},
        {"global publisher on any model", MG_ROLE_PUBLISHER, GLOBAL, MG_ROLE_PUBLISHER, &fraud,
         NULL, GATE_READ_ALL, 200, NULL},
        {"no model yet (create)", MG_ROLE_PUBLISHER, TEAM_ADS, MG_ROLE_PUBLISHER, NULL, NULL,
         GATE_READ_ALL, 200, NULL},
        {"reading another team's model, read scope all", MG_ROLE_READER, TEAM_ADS, MG_ROLE_READER,
         &fraud, NULL, GATE_READ_ALL, 200, NULL},
        {"reading another team's model, read scope team", MG_ROLE_READER, TEAM_ADS, MG_ROLE_READER,
         &fraud, NULL, GATE_READ_TEAM, 404, "does not exist"},
        {"a publisher reading another team's model, read scope team", MG_ROLE_PUBLISHER, TEAM_ADS,
         MG_ROLE_READER, &fraud, NULL, GATE_READ_TEAM, 404, "does not exist"},
        {"a publisher writing another team's model, read scope team: missing, owners unsaid",
         MG_ROLE_PUBLISHER, TEAM_ADS, MG_ROLE_PUBLISHER, &fraud, NULL, GATE_READ_TEAM, 404,
         "model 'fraud' does not exist"},
        {"reading its own team's model, read scope team", MG_ROLE_REVIEWER, TEAM_RISK,
         MG_ROLE_READER, &fraud, NULL, GATE_READ_TEAM, 200, NULL},
        {"a global reader, read scope team", MG_ROLE_READER, GLOBAL, MG_ROLE_READER, &fraud, NULL,
         GATE_READ_TEAM, 200, NULL},
        {"admin is global", MG_ROLE_ADMIN, TEAM_ADS, MG_ROLE_DEPLOYER, &fraud, "production",
         GATE_READ_TEAM, 200, NULL},
        {"alias-scoped deployer on staging", MG_ROLE_DEPLOYER, ALIASES, MG_ROLE_DEPLOYER, &fraud,
         "staging", GATE_READ_ALL, 200, NULL},
        {"alias-scoped deployer on a prefix match", MG_ROLE_DEPLOYER, ALIASES, MG_ROLE_DEPLOYER,
         &fraud, "dev-eu", GATE_READ_ALL, 200, NULL},
        {"alias-scoped deployer on production", MG_ROLE_DEPLOYER, ALIASES, MG_ROLE_DEPLOYER, &fraud,
         "production", GATE_READ_ALL, 403, "only to alias staging, dev-*"},
        {"the prefix is a prefix, not a substring", MG_ROLE_DEPLOYER, ALIASES, MG_ROLE_DEPLOYER,
         &fraud, "prod-dev-x", GATE_READ_ALL, 403, "dev-*"},
        {"an exact name is exact", MG_ROLE_DEPLOYER, ALIASES, MG_ROLE_DEPLOYER, &fraud, "staging2",
         GATE_READ_ALL, 403, "staging"},
        {"alias scope does not limit reading", MG_ROLE_DEPLOYER, ALIASES, MG_ROLE_READER, &fraud,
         "production", GATE_READ_ALL, 200, NULL},
        {"alias scope limits deployer routes only", MG_ROLE_PUBLISHER | MG_ROLE_DEPLOYER, ALIASES,
         MG_ROLE_PUBLISHER, &fraud, "production", GATE_READ_ALL, 200, NULL},
        {"a deployer route about no alias", MG_ROLE_DEPLOYER, ALIASES, MG_ROLE_DEPLOYER, &fraud,
         NULL, GATE_READ_ALL, 200, NULL},
        {"no role at all", 0, GLOBAL, MG_ROLE_READER, &fraud, NULL, GATE_READ_ALL, 403, "no role"},
        {"team scope checked before alias scope", MG_ROLE_DEPLOYER, TEAM_ADS, MG_ROLE_DEPLOYER,
         &fraud, "staging", GATE_READ_ALL, 403, "owned by team risk"},
    };
    size_t i, bad = 0;

    (void)state;
    for (i = 0; i < N_ELEMS(cases); i++) {
        struct gate_token t = token(cases[i].roles, cases[i].sc);
        struct gate_request q = {cases[i].need, cases[i].model, cases[i].alias,
                                 cases[i].rs,   NULL,           NULL};
        struct gate_decision d;

        gate_authorize(&t, &q, &d);
        if ((cases[i].status == 200) != d.allow || (!d.allow && d.status != cases[i].status) ||
            (cases[i].reason_part && strstr(d.reason, cases[i].reason_part) == NULL)) {
            print_error("%s: allow %d status %u reason '%s'\n", cases[i].what, d.allow, d.status,
                        d.reason);
            bad++;
        }
    }
    assert_int_equal(bad, 0);
}

/* Bytes (docs/contract.md "Tenancy"): held through an upload by one's team or a readable citing
 * model; otherwise missing under --read-scope team; released bytes gone but to admins. */
static void test_bytes(void **state)
{
    static const struct gate_model by_risk[] = {{"fraud", risk, 1}};
    static const struct gate_model by_none[] = {{"orphan", NULL, 0}};
    static const struct {
        const char *what;
        unsigned roles;
        enum scope sc;
        enum gate_read_scope rs;
        const char *const *up;
        size_t nup;
        const struct gate_model *cit;
        size_t ncit;
        bool released;
        unsigned status;
    } cases[] = {
        {"uploaded by its team", MG_ROLE_READER, TEAM_RISK, GATE_READ_TEAM, risk, 1, NULL, 0, false,
         200},
        {"cited by its team's model", MG_ROLE_READER, TEAM_RISK, GATE_READ_TEAM, NULL, 0, by_risk,
         1, false, 200},
        {"another team's upload", MG_ROLE_READER, TEAM_ADS, GATE_READ_TEAM, risk, 1, NULL, 0, false,
         404},
        {"cited by another team's model", MG_ROLE_PUBLISHER, TEAM_ADS, GATE_READ_TEAM, NULL, 0,
         by_risk, 1, false, 404},
        {"cited only by a model of no team", MG_ROLE_READER, TEAM_ADS, GATE_READ_TEAM, NULL, 0,
         by_none, 1, false, 404},
        {"uploaded by a global token", MG_ROLE_READER, TEAM_ADS, GATE_READ_TEAM, NULL, 0, NULL, 0,
         false, 404},
        {"one of two uploading teams", MG_ROLE_READER, TEAM_ADS, GATE_READ_TEAM, ads_risk, 2, NULL,
         0, false, 200},
        {"read scope all", MG_ROLE_READER, TEAM_ADS, GATE_READ_ALL, risk, 1, NULL, 0, false, 200},
        {"a global token", MG_ROLE_READER, GLOBAL, GATE_READ_TEAM, risk, 1, NULL, 0, false, 200},
        {"admin", MG_ROLE_ADMIN, TEAM_ADS, GATE_READ_TEAM, risk, 1, NULL, 0, true, 200},
        {"released, own team", MG_ROLE_READER, TEAM_RISK, GATE_READ_TEAM, risk, 1, NULL, 0, true,
         410},
        {"released, global token", MG_ROLE_PUBLISHER, GLOBAL, GATE_READ_ALL, NULL, 0, NULL, 0, true,
         410},
        {"released, another team: missing, not gone", MG_ROLE_READER, TEAM_ADS, GATE_READ_TEAM,
         risk, 1, NULL, 0, true, 404},
    };
    size_t i, bad = 0;

    (void)state;
    for (i = 0; i < N_ELEMS(cases); i++) {
        struct gate_token t = token(cases[i].roles, cases[i].sc);
        struct gate_bytes b = {"sha256:ab",  cases[i].up,   cases[i].nup,
                               cases[i].cit, cases[i].ncit, cases[i].released};
        struct gate_request q = {MG_ROLE_READER, NULL, NULL, cases[i].rs, &b, NULL};
        struct gate_decision d;

        gate_authorize(&t, &q, &d);
        if ((cases[i].status == 200) != d.allow || (!d.allow && d.status != cases[i].status) ||
            (!d.allow && strstr(d.reason, "sha256:ab") == NULL)) {
            print_error("%s: allow %d status %u reason '%s'\n", cases[i].what, d.allow, d.status,
                        d.reason);
            bad++;
        }
    }
    assert_int_equal(bad, 0);
}

/* A route about one team (its quota): under --read-scope team a team token reaches only its
 * own teams; global and admin tokens, and every token without the scope, reach every team. */
static void test_team_routes(void **state)
{
    static const struct {
        const char *what;
        unsigned roles;
        enum scope sc;
        enum gate_read_scope rs;
        const char *team;
        unsigned status;
    } cases[] = {
        {"own team", MG_ROLE_READER, TEAM_RISK, GATE_READ_TEAM, "risk", 200},
        {"another team", MG_ROLE_READER, TEAM_ADS, GATE_READ_TEAM, "risk", 404},
        {"another team, publisher", MG_ROLE_PUBLISHER, TEAM_ADS, GATE_READ_TEAM, "risk", 404},
        {"a prefix of its team", MG_ROLE_READER, TEAM_RISK, GATE_READ_TEAM, "ris", 404},
        {"another team, read scope all", MG_ROLE_READER, TEAM_ADS, GATE_READ_ALL, "risk", 200},
        {"a global token", MG_ROLE_READER, GLOBAL, GATE_READ_TEAM, "risk", 200},
        {"an alias-scoped token", MG_ROLE_DEPLOYER, ALIASES, GATE_READ_TEAM, "risk", 200},
        {"admin with a team", MG_ROLE_ADMIN, TEAM_ADS, GATE_READ_TEAM, "risk", 200},
    };
    size_t i, bad = 0;

    (void)state;
    for (i = 0; i < N_ELEMS(cases); i++) {
        struct gate_token t = token(cases[i].roles, cases[i].sc);
        struct gate_request q = {MG_ROLE_READER, NULL, NULL, cases[i].rs, NULL, cases[i].team};
        struct gate_decision d;

        gate_authorize(&t, &q, &d);
        if ((cases[i].status == 200) != d.allow || (!d.allow && d.status != cases[i].status) ||
            (!d.allow && strstr(d.reason, cases[i].team) == NULL)) {
            print_error("%s: allow %d status %u reason '%s'\n", cases[i].what, d.allow, d.status,
                        d.reason);
            bad++;
        }
    }
    assert_int_equal(bad, 0);
}

static void test_alias_patterns(void **state)
{
    static const struct {
        const char *p;
        bool ok;
    } cases[] = {
        {"staging", true},
        {"dev-*", true},
        {"*", true},
        {"d*", true},
        {"", false},
        {"Prod", false},
        {"-x*", false},
        {"a b", false},
        {"st*g", false},
        {"staging**", false},
        {"1abc", false},
        {"dev_*", false},
        {"a23456789012345678901234567890123", false},
    };
    size_t i;

    (void)state;
    for (i = 0; i < N_ELEMS(cases); i++) {
        if (gate_alias_pattern_valid(cases[i].p) != cases[i].ok)
            fail_msg("'%s': expected %s", cases[i].p, cases[i].ok ? "valid" : "invalid");
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roles),          cmocka_unit_test(test_table),
        cmocka_unit_test(test_bytes),          cmocka_unit_test(test_team_routes),
        cmocka_unit_test(test_alias_patterns),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
