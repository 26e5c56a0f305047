/*
 * analysis.c - the intervals live canary analysis measured for a promotion (docs/contract.md "Live
 * canary analysis"): appended by the leader, the newest STORE_INTERVALS_KEPT kept, read back
 * newest first for the decisions (gates/analysis.c) and for the Promotion's "analysis".
 */
#include "store_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/util.h"

enum mg_code store_interval_record(struct store *st, const struct store_interval *in,
                                   bool *recorded, struct mg_error *err)
{
    static const char sql_last[] = "SELECT coalesce(max(seq), 0), coalesce(max(at_ms), 0) "
                                   "FROM promotion_intervals WHERE promotion_id = ?";
    static const char sql_ins[] =
        "INSERT INTO promotion_intervals (promotion_id, seq, at, at_ms, phase, step_index, "
        "weight, verdict, metrics) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)";
    static const char sql_prune[] =
        "DELETE FROM promotion_intervals WHERE promotion_id = ? AND seq <= ?";
    struct db_conn *c;
    struct db_stmt *s;
    char *metrics = store_json_text(in->metrics), at[32];
    int64_t seq = 0, last = 0;
    enum mg_code rc;
    bool row;

    *recorded = false;
    if (metrics == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    if ((c = store_write_begin(st, err)) == NULL) {
        free(metrics);
        return err->code;
    }
    if ((rc = store_leader_holds(c, st, in->leader_epoch, err)) != MG_OK)
        goto out;
    s = db_prepare(c, sql_last);
    db_bind_text(s, 1, in->promotion);
    if ((rc = db_step(s, &row, err)) == MG_OK && row) {
        seq = db_col_i64(s, 0);
        last = db_col_i64(s, 1);
    }
    db_reset(s);
    if (rc != MG_OK)
        goto out;
    if (last > in->not_before_ms) {
        goto out; /* another replica measured this interval already */
    }
    /* "at" is when the verdict was recorded, on the clock every event's "at" uses (this
     * host's), so a stage's events and its intervals read in causal order; at_ms, the
     * instant measured, is on the cluster's clock (store_clock_ms) for the dedup above. */
    store_now(at);
    s = db_prepare(c, sql_ins);
    db_bind_text(s, 1, in->promotion);
    db_bind_i64(s, 2, seq + 1);
    db_bind_text(s, 3, at);
    db_bind_i64(s, 4, in->at_ms);
    db_bind_text(s, 5, in->phase);
    db_bind_i64(s, 6, in->step_index);
    db_bind_i64(s, 7, in->weight);
    db_bind_text(s, 8, in->verdict);
    db_bind_text(s, 9, metrics);
    if ((rc = db_exec(s, err)) != MG_OK)
        goto out;
    s = db_prepare(c, sql_prune);
    db_bind_text(s, 1, in->promotion);
    db_bind_i64(s, 2, seq + 1 - STORE_INTERVALS_KEPT);
    if ((rc = db_exec(s, err)) == MG_OK)
        *recorded = true;
out:
    free(metrics);
    return store_write_end(st, c, rc, err);
}

enum mg_code store_intervals_list(struct store *st, const char *promotion, size_t limit,
                                  json_t **out, struct mg_error *err)
{
    static const char sql[] = "SELECT seq, at, at_ms, phase, step_index, weight, verdict, metrics "
                              "FROM promotion_intervals WHERE promotion_id = ? "
                              "ORDER BY seq DESC LIMIT ?";
    struct db_conn *c = store_read_begin(st);
    struct db_stmt *s;
    json_t *list = json_array();
    enum mg_code rc = MG_OK;
    bool row;

    *out = NULL;
    if (list == NULL) {
        store_read_end(st, c);
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
    s = db_prepare(c, sql);
    db_bind_text(s, 1, promotion);
    db_bind_i64(s, 2, (int64_t)limit);
    while ((rc = db_step(s, &row, err)) == MG_OK && row) {
        json_t *m = store_col_json(s, 7);

        json_array_append_new(
            list, json_pack("{s:I, s:o, s:I, s:o, s:I, s:I, s:o, s:o}", "seq",
                            (json_int_t)db_col_i64(s, 0), "at", store_col_json_string(s, 1),
                            "_at_ms", (json_int_t)db_col_i64(s, 2), "phase",
                            store_col_json_string(s, 3), "step_index", (json_int_t)db_col_i64(s, 4),
                            "weight", (json_int_t)db_col_i64(s, 5), "verdict",
                            store_col_json_string(s, 6), "metrics", m ? m : json_array()));
    }
    db_reset(s);
    store_read_end(st, c);
    if (rc == MG_OK)
        *out = list;
    else
        json_decref(list);
    return rc;
}
