/*
 * aliases_lkg.c - an alias's last-known-good read from its rows (store_release.h
 * store_alias_lkg_find): the model and alias in one statement, the rollback marks in
 * another, then the history newest first, one entry at a time, only until the caller's test
 * (gates/rollout.h lkg_entry_holds) passes and the version it names is still ready (one that
 * was archived or deleted becomes a bad mark, and the walk goes on).
 *
 * Typically that is the newest entry or the one before it, so a read costs the same for an
 * alias with ten thousand generations as for one with two; nothing is built as json_t. On
 * PostgreSQL the common case is one statement (lkg_one), the walk only what it leaves.
 */
#include "store_int.h"

#include <stdint.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/util.h"

#define LKG_PAGE 8 /* history entries read by the first statement; each next reads 4 times more */

/* A mark that version v does not hold since generation (INT64_MAX: never again) into bad. */
static enum mg_code lkg_bad_add(struct mg_buf *bad, int64_t v, int64_t generation,
                                struct mg_error *err)
{
    struct lkg_bad b = {v, generation};

    return mg_buf_append(bad, &b, sizeof(b)) == MG_OK
               ? MG_OK
               : mg_fail(err, MG_ENOMEM, NULL, "out of memory");
}

/* The rollback marks, as struct lkg_bad records in bad (mg_buf_init'd by the caller). The
 * archived and deleted versions (generation INT64_MAX: never again) join them as the walk
 * meets them (lkg_brief): a model whose lifecycle archived thousands of versions would
 * otherwise read them all on every read. */
static enum mg_code lkg_bad_marks(struct db_conn *c, int64_t aid, struct mg_buf *bad,
                                  struct mg_error *err)
{
    static const char sql[] = "SELECT version, generation FROM alias_bad WHERE alias_id = ?";
    struct db_stmt *s = db_prepare(c, sql);
    enum mg_code rc;
    bool row;

    db_bind_i64(s, 1, aid);
    while ((rc = db_step(s, &row, err)) == MG_OK && row) {
        if ((rc = lkg_bad_add(bad, db_col_i64(s, 0), db_col_i64(s, 1), err)) != MG_OK)
            break; /* the statement left stepping ends with the read */
    }
    return rc;
}

/* One history row's entry (columns at..at+5: generation, kind, routes, at, match_rules,
 * shadow), its routes into the caller's arrays (stored JSON: history.h). */
static void lkg_entry_read(struct db_stmt *s, int at, struct lkg_entry *e,
                           struct promo_route routes[MG_ROUTES_MAX], int64_t pinned[MG_MATCH_MAX])
{
    json_t *r = store_col_json(s, at + 2), *m = store_col_json(s, at + 4);
    json_t *sh = store_col_json(s, at + 5);

    memset(e, 0, sizeof(*e));
    e->generation = db_col_i64(s, at);
    e->kind = mg_lkg_kind(db_col_text(s, at + 1));
    mg_lkg_entry_routes(e, r, m, sh, routes, MG_ROUTES_MAX, pinned, MG_MATCH_MAX);
    json_decref(r);
    json_decref(m);
    json_decref(sh);
}

/* The entry e that holds, from its row s (its "at" in column at_col), as the answer. */
static void lkg_held(struct store_lkg *out, const struct lkg_entry *e, struct db_stmt *s,
                     int at_col)
{
    const char *at = db_col_text(s, at_col);

    out->version = e->routes[0].version;
    out->generation = e->generation;
    snprintf(out->at, sizeof(out->at), "%s", at ? at : "");
}

/* The held version's artifact and image (NEW; image NULL when it has none) from columns col
 * and col + 1 of s. */
static enum mg_code lkg_files(struct store_lkg *out, struct db_stmt *s, int col,
                              struct mg_error *err)
{
    out->artifact = store_col_strdup(s, col);
    out->image = store_col_strdup(s, col + 1);
    return out->artifact == NULL || (out->image == NULL && !db_col_null(s, col + 1))
               ? mg_fail(err, MG_ENOMEM, NULL, "out of memory")
               : MG_OK;
}

/* The chosen version's artifact and image (lkg_files), when it is ready (*ready; archived or
 * deleted: nothing set). */
static enum mg_code lkg_brief(struct db_conn *c, int64_t mid, const char *model, int64_t v,
                              struct store_lkg *out, bool *ready, struct mg_error *err)
{
    static const char sql[] = "SELECT artifact, image, status = 'ready' FROM versions "
                              "WHERE model_id = ? AND version = ?";
    struct db_stmt *s = db_prepare(c, sql);
    enum mg_code rc;
    bool row;

    db_bind_i64(s, 1, mid);
    db_bind_i64(s, 2, v);
    if ((rc = db_step(s, &row, err)) != MG_OK)
        return rc;
    if (!row)
        return mg_fail(err, MG_ENOTFOUND, NULL, "version %lld of model '%s' does not exist",
                       (long long)v, model);
    if (!(*ready = db_col_i64(s, 2) != 0)) {
        db_reset(s);
        return MG_OK;
    }
    rc = lkg_files(out, s, 0, err);
    db_reset(s);
    return rc;
}

/* PostgreSQL: the read in one statement outside a transaction (DB_READ_ONE: one round trip,
 * where BEGIN, four statements and COMMIT were six) for the common case, where the newest
 * LKG_PAGE entries decide it: the model and alias (kind 0: the model's id, and the alias's
 * in column 7, NULL when there is none), the rollback marks (kind 1: version, and generation
 * in column 7), then the newest entries (kind 2, newest first: columns 1-6 as the history
 * page's), each with the version its first route names (what the walk holds) joined through
 * the routes' JSON: artifact, image and whether it is ready (columns 8-10). */
static const char sql_lkg_one_pg[] =
    "WITH a AS (SELECT m.id AS mid, al.id AS aid FROM models m LEFT JOIN aliases al "
    "ON al.model_id = m.id AND al.name = ?1 WHERE m.name = ?2) "
    "SELECT 0, a.mid, CAST(NULL AS TEXT), CAST(NULL AS TEXT), CAST(NULL AS TEXT), "
    "CAST(NULL AS TEXT), CAST(NULL AS TEXT), a.aid, CAST(NULL AS TEXT), CAST(NULL AS TEXT), "
    "CAST(NULL AS BOOLEAN) FROM a "
    "UNION ALL SELECT 1, b.version, NULL, NULL, NULL, NULL, NULL, b.generation, NULL, NULL, "
    "NULL FROM alias_bad b JOIN a ON b.alias_id = a.aid "
    "UNION ALL (SELECT 2, h.generation, h.kind, h.routes, h.at, h.match_rules, h.shadow, NULL, "
    "v.artifact, v.image, v.status = 'ready' FROM a JOIN alias_history h ON h.alias_id = a.aid "
    "LEFT JOIN versions v ON v.model_id = a.mid AND "
    "v.version = (h.routes::jsonb -> 0 ->> 'version')::bigint "
    "ORDER BY h.generation DESC LIMIT ?3) ORDER BY 1, 2 DESC";

/* sql_lkg_one_pg's answer into out, *decided when it is the walk's. Not decided (the walk
 * reads again, in a transaction, and says it): no such model; the version an entry holds not
 * ready any more, or gone; no entry holding among a full page. */
static enum mg_code lkg_one(struct store *st, const char *model, const char *alias,
                            store_lkg_test test, void *arg, struct store_lkg *out, bool *decided,
                            struct mg_error *err)
{
    struct db_conn *c = store_read_one(st);
    struct db_stmt *s = db_prepare(c, sql_lkg_one_pg);
    struct mg_buf bad;
    int64_t got = 0;
    enum mg_code rc;
    bool row;

    *decided = false;
    mg_buf_init(&bad, SIZE_MAX);
    db_bind_text(s, 1, alias);
    db_bind_text(s, 2, model);
    db_bind_i64(s, 3, LKG_PAGE);
    if ((rc = db_step(s, &row, err)) != MG_OK || !row)
        goto done;
    *decided = true;
    if (db_col_null(s, 7)) /* no such alias: no last-known-good */
        goto done;
    while ((rc = db_step(s, &row, err)) == MG_OK && row && db_col_i64(s, 0) == 1) {
        if ((rc = lkg_bad_add(&bad, db_col_i64(s, 1), db_col_i64(s, 7), err)) != MG_OK)
            goto done;
    }
    for (; rc == MG_OK && row; rc = db_step(s, &row, err)) {
        struct promo_route routes[MG_ROUTES_MAX];
        int64_t pinned[MG_MATCH_MAX];
        struct lkg_entry e;

        got++;
        lkg_entry_read(s, 1, &e, routes, pinned);
        if (!test(&e, (const struct lkg_bad *)bad.data, bad.len / sizeof(struct lkg_bad), arg))
            continue;
        if (db_col_null(s, 10) || db_col_i64(s, 10) == 0) {
            *decided = false; /* archived, deleted or gone: the walk goes on past it */
            break;
        }
        lkg_held(out, &e, s, 4);
        rc = lkg_files(out, s, 8, err);
        break;
    }
    if (rc == MG_OK && out->version == 0 && got >= LKG_PAGE)
        *decided = false; /* older entries may hold */
done:
    store_read_end(st, c); /* ends the statement if it is still stepping */
    mg_buf_release(&bad);
    if (rc != MG_OK || !*decided)
        store_lkg_clear(out);
    if (rc != MG_OK)
        *decided = true;
    return rc;
}

enum mg_code store_alias_lkg_find(struct store *st, const char *model, const char *alias,
                                  store_lkg_test test, void *arg, struct store_lkg *out,
                                  struct mg_error *err)
{
    static const char sql_alias[] =
        "SELECT m.id, a.id FROM models m "
        "LEFT JOIN aliases a ON a.model_id = m.id AND a.name = ? WHERE m.name = ?";
    struct db_conn *c;
    struct db_stmt *s;
    struct mg_buf bad;
    int64_t mid = 0, aid = 0;
    enum mg_code rc;
    bool row;

    memset(out, 0, sizeof(*out));
    if (db_dialect(st->writer) == DB_POSTGRES) {
        bool decided;

        if ((rc = lkg_one(st, model, alias, test, arg, out, &decided, err)) != MG_OK || decided)
            return rc;
    }
    c = store_read_begin(st);
    s = db_prepare(c, sql_alias);
    mg_buf_init(&bad, SIZE_MAX);
    db_bind_text(s, 1, alias);
    db_bind_text(s, 2, model);
    if ((rc = db_step(s, &row, err)) != MG_OK)
        goto done;
    if (!row) { /* no such model: store_model_id's answer */
        rc = store_model_id(c, model, &mid, err);
        goto done;
    }
    mid = db_col_i64(s, 0);
    aid = db_col_null(s, 1) ? 0 : db_col_i64(s, 1);
    db_reset(s);
    if (aid == 0) /* no such alias: no last-known-good */
        goto done;
    if ((rc = lkg_bad_marks(c, aid, &bad, err)) != MG_OK)
        goto done;
    for (int64_t seen = 0, below = INT64_MAX, page = LKG_PAGE;
         rc == MG_OK && out->version == 0 && seen < STORE_FACTS_HISTORY_MAX; page *= 4) {
        int64_t got = 0;
        bool held = false, ready = false;

        s = store_alias_history_page(c, aid, below, seen, &page);
        while ((rc = db_step(s, &row, err)) == MG_OK && row) {
            struct promo_route routes[MG_ROUTES_MAX];
            int64_t pinned[MG_MATCH_MAX];
            struct lkg_entry e;

            got++;
            lkg_entry_read(s, 0, &e, routes, pinned);
            below = e.generation;
            if (!test(&e, (const struct lkg_bad *)bad.data, bad.len / sizeof(struct lkg_bad), arg))
                continue;
            held = true;
            lkg_held(out, &e, s, 3);
            db_reset(s);
            break;
        }
        seen += got;
        if (rc != MG_OK ||
            (held && (rc = lkg_brief(c, mid, model, out->version, out, &ready, err)) != MG_OK))
            break;
        if (held && !ready) {
            /* Archived or deleted since: never the LKG again; the walk goes on past it. */
            if ((rc = lkg_bad_add(&bad, out->version, INT64_MAX, err)) != MG_OK)
                break;
            out->version = 0;
            page /= 4; /* the same page size again, from the entry after this one */
            continue;
        }
        if (got < page)
            break; /* the history's oldest entry was in this page */
    }
done:
    store_read_end(st, c);
    mg_buf_release(&bad);
    if (rc != MG_OK)
        store_lkg_clear(out);
    return rc;
}

struct db_stmt *store_alias_history_page(struct db_conn *c, int64_t aid, int64_t below,
                                         int64_t seen, int64_t *page)
{
    /* In pages, newest first: PostgreSQL sends a statement's whole result at once, so one
     * statement over the whole history would move every entry however soon a walk ends. */
    static const char sql[] =
        "SELECT generation, kind, routes, at, match_rules, shadow FROM alias_history "
        "WHERE alias_id = ? AND generation < ? ORDER BY generation DESC LIMIT ?";
    struct db_stmt *s = db_prepare(c, sql);

    if (*page > STORE_FACTS_HISTORY_MAX - seen)
        *page = STORE_FACTS_HISTORY_MAX - seen;
    db_bind_i64(s, 1, aid);
    db_bind_i64(s, 2, below);
    db_bind_i64(s, 3, *page);
    return s;
}

void store_lkg_clear(struct store_lkg *p)
{
    free(p->artifact);
    free(p->image);
    memset(p, 0, sizeof(*p));
}
