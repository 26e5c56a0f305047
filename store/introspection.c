/*
 * introspection.c - the weight formats and header summaries recorded per blob at upload
 * (artifact/introspect.h reads them; this file only remembers them).
 */
#include "store_int.h"

#include <stdlib.h>
#include <string.h>

enum mg_code store_bind_introspection(struct db_stmt *s, int i, const json_t *formats,
                                      const json_t *intro, struct mg_error *err)
{
    char *f = formats ? store_json_text(formats) : strdup("[]"); /* none read: none found */
    char *t = intro ? store_json_text(intro) : NULL;
    enum mg_code rc = MG_OK;

    if (f == NULL || (intro != NULL && t == NULL))
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    db_bind_text(s, i, f);
    db_bind_text(s, i + 1, t);
    free(f);
    free(t);
    return rc;
}

enum mg_code store_blob_introspection(struct store *st, const char *digest, json_t **out,
                                      struct mg_error *err)
{
    static const char sql[] = "SELECT introspection FROM blobs WHERE digest = ?";
    struct db_conn *c = store_read_one(st);
    struct db_stmt *s = db_prepare(c, sql);
    enum mg_code rc;
    bool row;

    *out = NULL;
    db_bind_text(s, 1, digest);
    if ((rc = db_step(s, &row, err)) == MG_OK && row) {
        if (!db_col_null(s, 0) && (*out = store_col_json(s, 0)) != NULL && json_is_null(*out)) {
            json_decref(*out);
            *out = NULL;
        }
    } else if (rc == MG_OK) {
        rc = mg_fail(err, MG_EINVAL, "artifact",
                     "artifact blob %s does not exist; upload it with POST /api/v1/blobs first",
                     digest);
    }
    db_reset(s);
    store_read_end(st, c);
    return rc;
}
