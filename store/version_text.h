/*
 * version_text.h - the Version document written from its rows (store-private).
 */
#ifndef MG_STORE_VERSION_TEXT_H
#define MG_STORE_VERSION_TEXT_H

#include <jansson.h>

#include "../base/json.h"
#include "../base/mg.h"

struct db_conn;
struct db_stmt;

/*
 * The whole Version (docs/contract.md "Versions") whose VERSION_SELECT row s is on (stepped;
 * reset here) into w, in c's open transaction: the row, then its rollbacks, datasets, metrics
 * and withdrawn lineage, each a statement on c. With resources non-NULL, *resources and
 * *introspection get those stored documents' text (NEW; NULL when absent or null), for the
 * reply's decorations; they are NULL again on failure.
 */
enum mg_code version_text_write(struct db_conn *c, struct db_stmt *s, struct mg_jw *w,
                                char **resources, char **introspection, struct mg_error *err);

#endif
