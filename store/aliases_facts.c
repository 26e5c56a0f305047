/*
 * aliases_facts.c - what decisions about an alias read (store_release.h store_alias_facts,
 * store_alias_facts_until): its row, rollback marks, guard and history in one snapshot; the
 * history whole, or newest first in pages until the caller's test says the entries read
 * decide, with only the archived and deleted versions those entries route.
 */
#include "store_int.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The alias's row, for alias_facts: its model's id *mid, and when the alias has a row its
 * *aid, *gen, *deleted, and its routes, match and shadow (NEW). */
static enum mg_code alias_row(struct db_conn *c, const char *model, const char *alias, int64_t *mid,
                              int64_t *aid, int64_t *gen, bool *deleted, json_t **routes,
                              json_t **match, json_t **shadow, struct mg_error *err)
{
    static const char sql_alias[] = "SELECT id, generation, routes, deleted, match_rules, shadow "
                                    "FROM aliases WHERE model_id = ? AND name = ?";
    struct db_stmt *s;
    enum mg_code rc;
    bool row;

    if ((rc = store_model_id(c, model, mid, err)) != MG_OK)
        return rc;
    s = db_prepare(c, sql_alias);
    db_bind_i64(s, 1, *mid);
    db_bind_text(s, 2, alias);
    if ((rc = db_step(s, &row, err)) != MG_OK || !row)
        return rc;
    *aid = db_col_i64(s, 0);
    *gen = db_col_i64(s, 1);
    *routes = store_col_json(s, 2);
    *deleted = db_col_i64(s, 3) != 0;
    *match = store_alias_col_match(s, 4);
    *shadow = store_alias_col_shadow(s, 5);
    db_reset(s);
    return MG_OK;
}

/* Rollback marks ({"version","generation"} into bad) and, when all_gone, every archived and
 * deleted version of the model (numbers into gone, in version order), for alias_facts. */
static enum mg_code bad_and_gone(struct db_conn *c, int64_t mid, int64_t aid, json_t *bad,
                                 json_t *gone, bool all_gone, struct mg_error *err)
{
    static const char sql_bad[] = "SELECT version, generation FROM alias_bad WHERE alias_id = ?";
    static const char sql_gone[] = "SELECT version FROM versions WHERE model_id = ? AND "
                                   "status <> 'ready' ORDER BY version";
    struct db_stmt *s;
    enum mg_code rc = MG_OK;
    bool row;

    if (aid != 0) {
        s = db_prepare(c, sql_bad);
        db_bind_i64(s, 1, aid);
        while ((rc = db_step(s, &row, err)) == MG_OK && row)
            json_array_append_new(bad,
                                  json_pack("{s:I, s:I}", "version", (json_int_t)db_col_i64(s, 0),
                                            "generation", (json_int_t)db_col_i64(s, 1)));
        if (rc != MG_OK)
            return rc;
    }
    if (!all_gone)
        return MG_OK;
    s = db_prepare(c, sql_gone);
    db_bind_i64(s, 1, mid);
    while ((rc = db_step(s, &row, err)) == MG_OK && row)
        json_array_append_new(gone, json_integer(db_col_i64(s, 0)));
    return rc;
}

/* For store_alias_facts_until: of the versions the history entries from index `from` route,
 * those not yet looked up (in `checked`) that are archived or deleted, into gone. A model's
 * lifecycle may have archived thousands of versions; only those the history read names
 * matter to the decisions on it. */
static enum mg_code gone_of_entries(struct db_conn *c, int64_t mid, const json_t *hist, size_t from,
                                    json_t *checked, json_t *gone, struct mg_error *err)
{
    static const char sql[] = "SELECT 1 FROM versions WHERE model_id = ? AND version = ? AND "
                              "status <> 'ready'";
    enum mg_code rc = MG_OK;

    for (size_t i = from; i < json_array_size(hist) && rc == MG_OK; i++) {
        json_t *r;
        size_t k;

        json_array_foreach(json_object_get(json_array_get(hist, i), "routes"), k, r)
        {
            int64_t v = json_integer_value(json_object_get(r, "version"));
            char key[24];
            struct db_stmt *s;
            bool row;

            snprintf(key, sizeof(key), "%lld", (long long)v);
            if (json_object_get(checked, key) != NULL)
                continue;
            json_object_set_new(checked, key, json_true());
            s = db_prepare(c, sql);
            db_bind_i64(s, 1, mid);
            db_bind_i64(s, 2, v);
            if ((rc = db_step(s, &row, err)) != MG_OK)
                break;
            if (row) {
                json_array_append_new(gone, json_integer(v));
                db_reset(s);
            }
        }
    }
    return rc;
}

/* History entries alias_facts reads first when a caller decides as it goes; each next page
 * is 4 times larger (PostgreSQL sends a statement's whole result at once). */
#define FACTS_PAGE 8

/* store_alias_facts_in, and store_alias_facts_until's history read in pages. */
static enum mg_code alias_facts(struct db_conn *c, const char *model, const char *alias,
                                store_facts_enough enough, void *arg, json_t **out,
                                struct mg_error *err)
{
    struct db_stmt *s;
    int64_t mid = 0, aid = 0, gen = 0;
    json_t *routes = NULL, *hist = json_array(), *bad = json_array(), *promo = NULL;
    json_t *gone = json_array(), *checked = json_object();
    json_t *match = NULL, *shadow = NULL;
    bool deleted = false, prot = false, row;
    enum mg_code rc;

    *out = NULL;
    if ((rc = alias_row(c, model, alias, &mid, &aid, &gen, &deleted, &routes, &match, &shadow,
                        err)) != MG_OK)
        goto out;
    /* Archived and deleted versions: never a last-known-good or rollback target. */
    if ((rc = bad_and_gone(c, mid, aid, bad, gone, enough == NULL, err)) != MG_OK)
        goto out;
    if ((rc = store_alias_guard(c, mid, alias, &prot, &promo, err)) != MG_OK)
        goto out;
    *out = json_pack(
        "{s:b, s:b, s:I, s:o, s:o, s:o, s:b, s:o, s:O, s:O, s:O}", "exists", aid != 0 && !deleted,
        "deleted", deleted, "generation", (json_int_t)gen, "routes", routes ? routes : json_array(),
        "match", match ? match : json_array(), "shadow", shadow ? shadow : json_null(), "protected",
        prot, "promotion", promo, "history", hist, "bad", bad, "unavailable", gone);
    routes = match = shadow = NULL;
    if (*out == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    /* The history, newest first, into the facts' own array: all of it (up to the cap) in one
     * statement, or page by page until enough says the entries so far decide. */
    for (int64_t seen = 0, below = INT64_MAX, page = enough ? FACTS_PAGE : STORE_FACTS_HISTORY_MAX;
         aid != 0 && seen < STORE_FACTS_HISTORY_MAX; page *= 4) {
        int64_t got = 0;

        s = store_alias_history_page(c, aid, below, seen, &page);
        while ((rc = db_step(s, &row, err)) == MG_OK && row) {
            got++;
            below = db_col_i64(s, 0);
            json_array_append_new(
                hist,
                json_pack("{s:I, s:o, s:o, s:o, s:o, s:o}", "generation", (json_int_t)below, "kind",
                          store_col_json_string(s, 1), "routes", store_col_json(s, 2), "at",
                          store_col_json_string(s, 3), "match", store_alias_col_match(s, 4),
                          "shadow", store_alias_col_shadow(s, 5)));
        }
        if (rc != MG_OK || (enough && (rc = gone_of_entries(c, mid, hist, (size_t)seen, checked,
                                                            gone, err)) != MG_OK))
            goto out;
        seen += got;
        if (got < page || (enough && enough(*out, arg)))
            break; /* the oldest entry was in this page, or the caller has what it needs */
    }
out:
    if (rc != MG_OK) {
        json_decref(*out);
        *out = NULL;
    }
    json_decref(routes);
    json_decref(match);
    json_decref(shadow);
    json_decref(hist);
    json_decref(bad);
    json_decref(gone);
    json_decref(checked);
    return rc;
}

enum mg_code store_alias_facts_in(struct db_conn *c, const char *model, const char *alias,
                                  json_t **out, struct mg_error *err)
{
    return alias_facts(c, model, alias, NULL, NULL, out, err);
}

enum mg_code store_alias_facts(struct store *st, const char *model, const char *alias, json_t **out,
                               struct mg_error *err)
{
    return store_alias_facts_until(st, model, alias, NULL, NULL, out, err);
}

enum mg_code store_alias_facts_until(struct store *st, const char *model, const char *alias,
                                     store_facts_enough enough, void *arg, json_t **out,
                                     struct mg_error *err)
{
    struct db_conn *c = store_read_begin(st);
    enum mg_code rc = alias_facts(c, model, alias, enough, arg, out, err);

    store_read_end(st, c);
    return rc;
}
