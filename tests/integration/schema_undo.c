/*
 * schema_undo.c - what each migration after the second release adds, undone (see
 * schema_undo.h). Add a row when you add a migration.
 */
#include "schema_undo.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

struct undo {
    unsigned number;    /* the migration file's number: 15 for 015_tenancy.sql */
    const char *sqlite; /* statements that take it back */
    const char *pg;     /* likewise on PostgreSQL (NULL: the same text) */
};

/* 015_tenancy: blob ownership, released bytes, datasets keyed by owner. */
#define UNDO_015_SQLITE                                                                            \
    "DROP TABLE blob_teams; ALTER TABLE blobs DROP COLUMN released; "                              \
    "CREATE TABLE d0 (digest TEXT PRIMARY KEY, name TEXT NOT NULL, uri TEXT, "                     \
    "description TEXT, created_at TEXT NOT NULL, created_by TEXT NOT NULL, "                       \
    "withdrawn_at TEXT, withdrawn_by TEXT, withdrawn_reason TEXT) WITHOUT ROWID; "                 \
    "INSERT INTO d0 SELECT digest, name, uri, description, created_at, created_by, "               \
    "withdrawn_at, withdrawn_by, withdrawn_reason FROM datasets; "                                 \
    "CREATE TABLE p0 (child TEXT NOT NULL REFERENCES d0(digest), parent TEXT NOT NULL "            \
    "REFERENCES d0(digest), PRIMARY KEY (child, parent)) WITHOUT ROWID; "                          \
    "INSERT INTO p0 SELECT child, parent FROM dataset_parents; "                                   \
    "DROP TABLE dataset_parents; DROP TABLE datasets; "                                            \
    "ALTER TABLE d0 RENAME TO datasets; ALTER TABLE p0 RENAME TO dataset_parents; "                \
    "CREATE INDEX dataset_parents_parent ON dataset_parents(parent); "
#define UNDO_015_PG                                                                                \
    "DROP TABLE blob_teams; ALTER TABLE blobs DROP COLUMN released; "                              \
    "DROP INDEX dataset_parents_child; "                                                           \
    "ALTER TABLE dataset_parents DROP CONSTRAINT dataset_parents_pkey; "                           \
    "ALTER TABLE dataset_parents DROP COLUMN owner; "                                              \
    "ALTER TABLE datasets DROP CONSTRAINT datasets_pkey; "                                         \
    "ALTER TABLE datasets DROP COLUMN owner; ALTER TABLE datasets ADD PRIMARY KEY (digest); "      \
    "ALTER TABLE dataset_parents ADD PRIMARY KEY (child, parent); "                                \
    "ALTER TABLE dataset_parents ADD FOREIGN KEY (child) REFERENCES datasets(digest); "            \
    "ALTER TABLE dataset_parents ADD FOREIGN KEY (parent) REFERENCES datasets(digest); "

/* 016_leader_lease: the leader lease, smoke-test claim tokens. */
#define UNDO_016 "DROP TABLE leader_lease; ALTER TABLE smoke_tests DROP COLUMN claim_token; "

/* 018_scan: the safety scan's reports and their OCI referrers. */
#define UNDO_018                                                                                   \
    "DROP TABLE oci_scan_refs; ALTER TABLE blobs DROP COLUMN scan; "                               \
    "ALTER TABLE versions DROP COLUMN scan; "

/* 019_identity: IdP groups, trusted publishers, attestations, SSO logins, persons. */
#define UNDO_019                                                                                   \
    "DROP TABLE identity_groups; "                                                                 \
    "ALTER TABLE versions DROP COLUMN publisher; "                                                 \
    "ALTER TABLE tokens DROP COLUMN person_issuer; "                                               \
    "ALTER TABLE tokens DROP COLUMN person_subject; "                                              \
    "DROP TABLE trusted_publishers; DROP TABLE exchange_jti; "                                     \
    "DROP TABLE alias_attestations; DROP TABLE attestation_versions; "                             \
    "DROP TABLE oci_attestation_manifests; "                                                       \
    "ALTER TABLE promotion_approvals DROP COLUMN issuer; "                                         \
    "ALTER TABLE promotion_approvals DROP COLUMN subject; "                                        \
    "DROP TABLE sso_logins; DROP INDEX tokens_live_name; "                                         \
    "CREATE UNIQUE INDEX tokens_live_name ON tokens(name) WHERE revoked_at IS NULL; "              \
    "ALTER TABLE tokens DROP COLUMN expires_ms; ALTER TABLE tokens DROP COLUMN models; "           \
    "ALTER TABLE tokens DROP COLUMN publisher; "

/* 020_analysis: live canary analysis's intervals. */
#define UNDO_020 "DROP TABLE promotion_intervals; "

/* 021_quotas: team storage quotas, quota holds, the index on blob_teams(team), smoke tests' serving
 * cost (the same text on PostgreSQL). */
#define UNDO_021                                                                                   \
    "DROP TABLE team_quotas; DROP TABLE quota_holds; DROP INDEX blob_teams_team; "                 \
    "ALTER TABLE smoke_tests DROP COLUMN throughput_rps; "                                         \
    "ALTER TABLE smoke_tests DROP COLUMN cost_per_1k_requests; "

/* 022_model_readme: model cards, metric directions, who made a promotion event. */
#define UNDO_022                                                                                   \
    "ALTER TABLE models DROP COLUMN readme; "                                                      \
    "ALTER TABLE models DROP COLUMN metric_directions; "                                           \
    "ALTER TABLE promotion_events DROP COLUMN actor; "

/* 023_promotion_creator: the person who created a promotion. */
#define UNDO_023                                                                                   \
    "ALTER TABLE promotions DROP COLUMN creator_issuer; "                                          \
    "ALTER TABLE promotions DROP COLUMN creator_subject; "

/* 024_metrics_order: the index a version read walks its metrics by. */
#define UNDO_024 "DROP INDEX version_metrics_order; "

static const struct undo undos[] = {
    {15, UNDO_015_SQLITE, UNDO_015_PG},
    {16, UNDO_016, NULL},
    {18, UNDO_018, NULL},
    {19, UNDO_019, NULL},
    {20, UNDO_020, NULL},
    {21, UNDO_021, NULL},
    {22, UNDO_022, NULL},
    {23, UNDO_023, NULL},
    {24, UNDO_024, NULL},
};
#define NUNDOS (sizeof(undos) / sizeof(undos[0]))

/* The numbers of the migration files above 014 in the source tree must be exactly the
 * rows above: a new migration without its undo fails here, by name. */
static void check_rows(void)
{
    const char *src = getenv("MG_SOURCE_DIR");
    char dir[IT_PATH_MAX];
    struct dirent *e;
    size_t found = 0;
    DIR *d;

    if (src == NULL)
        fail_msg("it_schema_back: MG_SOURCE_DIR is not set (ctest sets it)");
    snprintf(dir, sizeof(dir), "%s/schema/migrations", src);
    if ((d = opendir(dir)) == NULL)
        fail_msg("it_schema_back: cannot read %s", dir);
    while ((e = readdir(d)) != NULL) {
        unsigned n;
        size_t i;

        if (sscanf(e->d_name, "%3u_", &n) != 1 || n <= 14 || !strstr(e->d_name, ".sql"))
            continue;
        for (i = 0; i < NUNDOS && undos[i].number != n; i++)
            ;
        if (i == NUNDOS) {
            char name[256]; /* e is closedir's to free */

            snprintf(name, sizeof(name), "%s", e->d_name);
            closedir(d);
            fail_msg("it_schema_back: migration %s has no undo row in "
                     "tests/integration/schema_undo.c",
                     name);
        }
        found++;
    }
    closedir(d);
    if (found != NUNDOS)
        fail_msg("it_schema_back: schema_undo.c has %zu rows but %s has %zu migrations above "
                 "014",
                 (size_t)NUNDOS, dir, found);
}

int it_schema_back(struct mg_server *s, unsigned keep)
{
    char sql[128];
    unsigned applied = 14; /* 001 to 014, then each row at or below keep */
    size_t i;
    int undone = 0;

    if (keep < 14)
        fail_msg("it_schema_back: migrations up to 014 are the caller's to undo");
    check_rows();
    for (i = 0; i < NUNDOS; i++)
        if (undos[i].number <= keep)
            applied++;
    for (i = NUNDOS; i-- > 0;) {
        if (undos[i].number <= keep)
            continue;
        it_sql_exec(s, s->database[0] != '\0' && undos[i].pg ? undos[i].pg : undos[i].sqlite);
        undone++;
    }
    snprintf(sql, sizeof(sql), "DELETE FROM schema_migrations WHERE version > %u", applied);
    if (it_sql_exec(s, sql) != undone)
        fail_msg("it_schema_back: schema_migrations did not hold the %d migrations above %u",
                 undone, keep);
    return undone;
}
