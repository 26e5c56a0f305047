/*
 * audit.c - the append-only, hash-chained audit log.
 *
 * hash(n) = sha256(hash(n-1) || canonical(n)), where canonical(n) is the
 * compact, key-sorted JSON of {"action","actor","at","detail","seq","target"}
 * and hash(0) is 64 zeros. audit_head mirrors the newest (seq, hash) so that
 * removing rows from the end is detected as well as edits, deletions and
 * reorderings in the middle.
 */
#include "store_int.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "../base/util.h"

static const char zero_hash[] = "0000000000000000000000000000000000000000000000000000000000000000";

/* hex sha256(prev_hex || canonical JSON of the entry) into out. */
static bool entry_hash(const char *prev, int64_t seq, const char *at, const char *actor,
                       const char *action, const char *target, json_t *detail, char out[65])
{
    json_t *e;
    char *text;
    EVP_MD_CTX *ctx;
    unsigned char md[32];
    unsigned mdlen = 0;
    bool ok = false;

    e = json_pack("{s:s, s:s, s:s, s:O, s:I, s:s}", "action", action, "actor", actor, "at", at,
                  "detail", detail, "seq", (json_int_t)seq, "target", target);
    if (e == NULL)
        return false;
    text = store_json_text(e);
    json_decref(e);
    if (text == NULL)
        return false;
    ctx = EVP_MD_CTX_new();
    if (ctx && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1 &&
        EVP_DigestUpdate(ctx, prev, strlen(prev)) == 1 &&
        EVP_DigestUpdate(ctx, text, strlen(text)) == 1 &&
        EVP_DigestFinal_ex(ctx, md, &mdlen) == 1 && mdlen == 32) {
        mg_hex_encode(md, 32, out);
        ok = true;
    }
    EVP_MD_CTX_free(ctx);
    free(text);
    return ok;
}

enum mg_code store_audit_append(struct db_conn *c, const char *actor, const char *action,
                                const char *target, const char *model, const json_t *detail,
                                struct mg_error *err)
{
    static const char sql_head[] = "SELECT seq, hash FROM audit_head WHERE id = 1";
    static const char sql_teams[] =
        "SELECT teams FROM tokens WHERE name = ? AND revoked_at IS NULL";
    static const char sql_ins[] = "INSERT INTO audit (seq, at, actor, action, target, detail, "
                                  "prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?)";
    static const char sql_set_head[] =
        "INSERT INTO audit_head (id, seq, hash) VALUES (1, ?, ?) "
        "ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash";
    struct db_stmt *s;
    int64_t seq = 1;
    char prev[65], hash[65], at[32];
    json_t *d = detail ? json_deep_copy(detail) : json_object();
    char *dtext = NULL;
    enum mg_code rc = MG_OK;
    bool row;

    if (d == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    /* The actor's teams (docs/contract.md "Teams"): who acted for which team stays in the chain. */
    if (json_is_object(d)) {
        s = db_prepare(c, sql_teams);
        db_bind_text(s, 1, actor);
        if ((rc = db_step(s, &row, err)) != MG_OK)
            goto out;
        if (row) {
            json_t *teams = store_col_json(s, 0);

            if (json_array_size(teams) > 0)
                json_object_set(d, "actor_teams", teams);
            json_decref(teams);
            db_reset(s);
        }
    }
    memcpy(prev, zero_hash, sizeof(prev));
    s = db_prepare(c, sql_head);
    if ((rc = db_step(s, &row, err)) != MG_OK)
        goto out;
    if (row) {
        const char *h = db_col_text(s, 1);
        seq = db_col_i64(s, 0) + 1;
        if (h && strlen(h) == 64)
            memcpy(prev, h, 65);
        db_reset(s);
    }

    store_now(at);
    dtext = store_json_text(d);
    if (dtext == NULL || !entry_hash(prev, seq, at, actor, action, target, d, hash)) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    s = db_prepare(c, sql_ins);
    db_bind_i64(s, 1, seq);
    db_bind_text(s, 2, at);
    db_bind_text(s, 3, actor);
    db_bind_text(s, 4, action);
    db_bind_text(s, 5, target);
    db_bind_text(s, 6, dtext);
    db_bind_text(s, 7, prev);
    db_bind_text(s, 8, hash);
    if ((rc = db_exec(s, err)) != MG_OK)
        goto out;
    s = db_prepare(c, sql_set_head);
    db_bind_i64(s, 1, seq);
    db_bind_text(s, 2, hash);
    if ((rc = db_exec(s, err)) != MG_OK)
        goto out;
    /* The write changed the model (its versions, aliases, policy): its epoch moves, and
     * cached answers about it are stale from this commit on. */
    if (model != NULL)
        rc = store_model_bump(c, model, err);
out:
    free(dtext);
    json_decref(d);
    return rc;
}

static json_t *row_json(struct db_stmt *s)
{
    return json_pack("{s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "seq",
                     (json_int_t)db_col_i64(s, 0), "at", store_col_json_string(s, 1), "actor",
                     store_col_json_string(s, 2), "action", store_col_json_string(s, 3), "target",
                     store_col_json_string(s, 4), "detail", store_col_json(s, 5), "prev_hash",
                     store_col_json_string(s, 6), "hash", store_col_json_string(s, 7));
}

static enum mg_code page_row(struct db_stmt *s, void *ctx, json_t **item, char cursor[128],
                             struct mg_error *err)
{
    (void)ctx;
    snprintf(cursor, 128, "%lld", (long long)db_col_i64(s, 0));
    *item = row_json(s);
    return *item ? MG_OK : mg_fail(err, MG_ENOMEM, NULL, "out of memory");
}

enum mg_code store_audit_list(struct store *st, int64_t after, unsigned limit, json_t **out,
                              struct mg_error *err)
{
    static const char sql[] = "SELECT seq, at, actor, action, target, detail, prev_hash, hash "
                              "FROM audit WHERE seq > ? ORDER BY seq LIMIT ?";
    struct db_conn *c = store_read_one(st);
    struct db_stmt *s = db_prepare(c, sql);
    struct store_page page = {.limit = limit};
    enum mg_code rc;

    db_bind_i64(s, 1, after);
    rc = store_page_rows(s, 2, &page, page_row, NULL, out, err);
    store_read_end(st, c);
    return rc;
}

enum mg_code store_audit_list_desc(struct store *st, int64_t after, int64_t before, unsigned limit,
                                   json_t **out, struct mg_error *err)
{
    static const char sql[] = "SELECT seq, at, actor, action, target, detail, prev_hash, hash "
                              "FROM audit WHERE seq > ? AND seq < ? ORDER BY seq DESC LIMIT ?";
    struct db_conn *c = store_read_one(st);
    struct db_stmt *s = db_prepare(c, sql);
    struct store_page page = {.limit = limit};
    enum mg_code rc;

    db_bind_i64(s, 1, after);
    db_bind_i64(s, 2, before > 0 ? before : INT64_MAX);
    rc = store_page_rows(s, 3, &page, page_row, NULL, out, err);
    store_read_end(st, c);
    return rc;
}

enum mg_code store_audit_verify(struct store *st, json_t **out, struct mg_error *err)
{
    static const char sql[] = "SELECT seq, at, actor, action, target, detail, prev_hash, hash "
                              "FROM audit ORDER BY seq";
    static const char sql_head[] = "SELECT seq, hash FROM audit_head WHERE id = 1";
    struct db_conn *c = store_read_begin(st);
    struct db_stmt *s;
    char prev[65], calc[65];
    int64_t expect_seq = 1, bad = 0, entries = 0;
    enum mg_code rc;
    bool row;

    memcpy(prev, zero_hash, sizeof(prev));
    s = db_prepare(c, sql);
    while ((rc = db_step(s, &row, err)) == MG_OK && row) {
        int64_t seq = db_col_i64(s, 0);
        const char *at = db_col_text(s, 1);
        const char *actor = db_col_text(s, 2);
        const char *action = db_col_text(s, 3);
        const char *target = db_col_text(s, 4);
        const char *ph = db_col_text(s, 6);
        const char *h = db_col_text(s, 7);
        json_t *detail = store_col_json(s, 5);
        bool ok;

        entries++;
        ok = seq == expect_seq && at && actor && action && target && ph && h &&
             strcmp(ph, prev) == 0 &&
             entry_hash(prev, seq, at, actor, action, target, detail, calc) && strcmp(calc, h) == 0;
        json_decref(detail);
        if (!ok) {
            bad = seq < expect_seq ? seq : expect_seq;
            db_reset(s);
            break;
        }
        memcpy(prev, h, 65);
        expect_seq++;
    }
    if (rc == MG_OK && bad == 0) {
        /* The head must agree with the last row: catches truncation. */
        int64_t hseq = 0;
        const char *hh = NULL;
        s = db_prepare(c, sql_head);
        if ((rc = db_step(s, &row, err)) == MG_OK && row) {
            hseq = db_col_i64(s, 0);
            hh = db_col_text(s, 1);
        }
        if (rc == MG_OK &&
            (hseq != expect_seq - 1 || (hseq > 0 && (hh == NULL || strcmp(hh, prev) != 0))))
            bad = expect_seq;
        db_reset(s);
    }
    if (rc == MG_OK) {
        *out = json_pack("{s:b, s:I, s:s}", "ok", bad == 0, "entries", (json_int_t)entries, "head",
                         prev);
        if (*out && bad)
            json_object_set_new(*out, "first_bad_seq", json_integer(bad));
        if (*out == NULL)
            rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
    store_read_end(st, c);
    return rc;
}
