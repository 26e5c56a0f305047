/*
 * schema_undo.h - take a test's database back to an earlier release's schema, for the
 * tests that check an upgrade (test_teams, test_tenancy).
 *
 * Migrations are applied by position, so a database "of the previous release" must lack
 * every migration after it, not only the one a test is about: each migration after the
 * second release (015 on) has one undo row in schema_undo.c, for SQLite and PostgreSQL.
 * A migration without a row fails every caller, naming the file.
 */
#ifndef MG_IT_SCHEMA_UNDO_H
#define MG_IT_SCHEMA_UNDO_H

#include "harness.h"

/*
 * Undo every migration numbered above `keep` (14 or more: the second release's last is
 * 014) on the stopped server's database, newest first, and forget them in
 * schema_migrations. Returns how many migrations it took back.
 */
int it_schema_back(struct mg_server *s, unsigned keep);

#endif
