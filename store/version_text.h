/*
 * version_text.h - the Version document written from its rows (store-private).
 */
#ifndef MG_STORE_VERSION_TEXT_H
#define MG_STORE_VERSION_TEXT_H

#include <jansson.h>
#include <stdbool.h>

#include "../base/json.h"
#include "../base/mg.h"

struct db_conn;
struct db_stmt;

/* The Version's statement on c: the version's row keyed by model name (?1) and number (?2), or
 * by the version's id (?1). Where version_text_one_statement (PostgreSQL, whose round trips
 * are what a read costs), its datasets and metrics come as the statement's next rows, so a
 * read of its own (DB_READ_ONE) sees them in one snapshot; elsewhere version_text_write reads
 * them with a statement more, in the caller's read transaction. */
const char *version_sql_by_name(const struct db_conn *c);
const char *version_sql_by_id(const struct db_conn *c);
bool version_text_one_statement(const struct db_conn *c);

/* Whether the Version whose row s is on is written by the statement alone: no alias was rolled
 * back from it and none of its datasets can be withdrawn through its lineage. Otherwise
 * version_text_write runs more statements, which must share the statement's transaction. */
bool version_text_alone(struct db_stmt *s);

/*
 * The whole Version (docs/contract.md "Versions") whose row s (a version_sql_by_* statement)
 * is on (stepped; reset here) into w, on c: the row, its datasets and metrics, then, unless
 * version_text_alone, its rollbacks and withdrawn lineage, each a statement on c in its open
 * transaction (MG_EIO, nothing written, when more than one statement would run outside one). With
 * resources non-NULL, *resources and *introspection get those stored documents' text (NEW; NULL
 * when absent or null), for the reply's decorations; they are NULL again on failure.
 */
enum mg_code version_text_write(struct db_conn *c, struct db_stmt *s, struct mg_jw *w,
                                char **resources, char **introspection, struct mg_error *err);

#endif
