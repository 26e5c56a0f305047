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

#include "../common/util.h"

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

enum mg_code store_audit_append(struct store_conn *c, const char *actor, const char *action,
                                const char *target, const json_t *detail, struct mg_error *err)
{
    static const char sql_head[] = "SELECT seq, hash FROM audit_head WHERE id = 1";
    static const char sql_teams[] =
        "SELECT teams FROM tokens WHERE name = ? AND revoked_at IS NULL";
    static const char sql_ins[] = "INSERT INTO audit (seq, at, actor, action, target, detail, "
                                  "prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?)";
    static const char sql_set_head[] =
        "INSERT INTO audit_head (id, seq, hash) VALUES (1, ?, ?) "
        "ON CONFLICT (id) DO UPDATE SET seq = excluded.seq, hash = excluded.hash";
    sqlite3_stmt *s;
    int64_t seq = 1;
    char prev[65], hash[65], at[32];
    json_t *d = detail ? json_deep_copy(detail) : json_object();
    char *dtext = NULL;
    enum mg_code rc = MG_OK;

    if (d == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    /* The actor's teams (API.md "Teams"): who acted for which team stays in the chain. */
    if (json_is_object(d) && (s = store_stmt(c, sql_teams, err)) != NULL) {
        store_bind_text(s, 1, actor);
        if (sqlite3_step(s) == SQLITE_ROW) {
            json_t *teams = store_col_json(s, 0);

            if (json_array_size(teams) > 0)
                json_object_set(d, "actor_teams", teams);
            json_decref(teams);
        }
        sqlite3_reset(s);
    }
    memcpy(prev, zero_hash, sizeof(prev));
    if ((s = store_stmt(c, sql_head, err)) == NULL) {
        rc = err->code;
        goto out;
    }
    if (sqlite3_step(s) == SQLITE_ROW) {
        const unsigned char *h = sqlite3_column_text(s, 1);
        seq = sqlite3_column_int64(s, 0) + 1;
        if (h && strlen((const char *)h) == 64)
            memcpy(prev, h, 65);
    }
    sqlite3_reset(s);

    store_now(at);
    dtext = store_json_text(d);
    if (dtext == NULL || !entry_hash(prev, seq, at, actor, action, target, d, hash)) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    if ((s = store_stmt(c, sql_ins, err)) == NULL) {
        rc = err->code;
        goto out;
    }
    sqlite3_bind_int64(s, 1, seq);
    store_bind_text(s, 2, at);
    store_bind_text(s, 3, actor);
    store_bind_text(s, 4, action);
    store_bind_text(s, 5, target);
    store_bind_text(s, 6, dtext);
    store_bind_text(s, 7, prev);
    store_bind_text(s, 8, hash);
    if ((rc = store_exec_stmt(c, s, err)) != MG_OK)
        goto out;
    if ((s = store_stmt(c, sql_set_head, err)) == NULL) {
        rc = err->code;
        goto out;
    }
    sqlite3_bind_int64(s, 1, seq);
    store_bind_text(s, 2, hash);
    rc = store_exec_stmt(c, s, err);
out:
    free(dtext);
    json_decref(d);
    return rc;
}

static json_t *row_json(sqlite3_stmt *s)
{
    return json_pack("{s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "seq",
                     (json_int_t)sqlite3_column_int64(s, 0), "at", store_col_json_string(s, 1),
                     "actor", store_col_json_string(s, 2), "action", store_col_json_string(s, 3),
                     "target", store_col_json_string(s, 4), "detail", store_col_json(s, 5),
                     "prev_hash", store_col_json_string(s, 6), "hash", store_col_json_string(s, 7));
}

enum mg_code store_audit_list(struct store *st, int64_t after, unsigned limit, json_t **out,
                              struct mg_error *err)
{
    static const char sql[] = "SELECT seq, at, actor, action, target, detail, prev_hash, hash "
                              "FROM audit WHERE seq > ? ORDER BY seq LIMIT ?";
    struct store_conn *c = store_read_begin(st);
    sqlite3_stmt *s;
    json_t *items = json_array(), *row;
    int64_t last = after;
    unsigned n = 0;
    enum mg_code rc = MG_OK;
    int r;

    if ((s = store_stmt(c, sql, err)) == NULL) {
        rc = err->code;
        goto out;
    }
    sqlite3_bind_int64(s, 1, after);
    sqlite3_bind_int64(s, 2, (int64_t)limit + 1);
    while ((r = sqlite3_step(s)) == SQLITE_ROW) {
        if (n == limit)
            break;
        row = row_json(s);
        last = sqlite3_column_int64(s, 0);
        if (row == NULL || json_array_append_new(items, row) != 0) {
            rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
            break;
        }
        n++;
    }
    if (rc == MG_OK && r != SQLITE_ROW && r != SQLITE_DONE)
        rc = store_db_error(c, r, err);
    if (rc == MG_OK) {
        json_t *next = json_null();
        if (r == SQLITE_ROW) {
            char buf[24];
            snprintf(buf, sizeof(buf), "%lld", (long long)last);
            next = json_string(buf);
        }
        *out = json_pack("{s:O, s:o}", "items", items, "next_page_token", next);
        if (*out == NULL)
            rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
    sqlite3_reset(s);
out:
    json_decref(items);
    store_read_end(st, c);
    return rc;
}

enum mg_code store_audit_verify(struct store *st, json_t **out, struct mg_error *err)
{
    static const char sql[] = "SELECT seq, at, actor, action, target, detail, prev_hash, hash "
                              "FROM audit ORDER BY seq";
    static const char sql_head[] = "SELECT seq, hash FROM audit_head WHERE id = 1";
    struct store_conn *c = store_read_begin(st);
    sqlite3_stmt *s;
    char prev[65], calc[65];
    int64_t expect_seq = 1, bad = 0, entries = 0;
    enum mg_code rc = MG_OK;
    int r;

    memcpy(prev, zero_hash, sizeof(prev));
    if ((s = store_stmt(c, sql, err)) == NULL) {
        rc = err->code;
        goto out;
    }
    while ((r = sqlite3_step(s)) == SQLITE_ROW) {
        int64_t seq = sqlite3_column_int64(s, 0);
        const char *at = (const char *)sqlite3_column_text(s, 1);
        const char *actor = (const char *)sqlite3_column_text(s, 2);
        const char *action = (const char *)sqlite3_column_text(s, 3);
        const char *target = (const char *)sqlite3_column_text(s, 4);
        const char *ph = (const char *)sqlite3_column_text(s, 6);
        const char *h = (const char *)sqlite3_column_text(s, 7);
        json_t *detail = store_col_json(s, 5);
        bool ok;

        entries++;
        ok = seq == expect_seq && at && actor && action && target && ph && h &&
             strcmp(ph, prev) == 0 &&
             entry_hash(prev, seq, at, actor, action, target, detail, calc) && strcmp(calc, h) == 0;
        json_decref(detail);
        if (!ok) {
            bad = seq < expect_seq ? seq : expect_seq;
            break;
        }
        memcpy(prev, h, 65);
        expect_seq++;
    }
    if (bad == 0 && r != SQLITE_ROW && r != SQLITE_DONE)
        rc = store_db_error(c, r, err);
    sqlite3_reset(s);
    if (rc == MG_OK && bad == 0) {
        /* The head must agree with the last row: catches truncation. */
        int64_t hseq = 0;
        const char *hh = NULL;
        if ((s = store_stmt(c, sql_head, err)) == NULL) {
            rc = err->code;
            goto out;
        }
        if (sqlite3_step(s) == SQLITE_ROW) {
            hseq = sqlite3_column_int64(s, 0);
            hh = (const char *)sqlite3_column_text(s, 1);
        }
        if (hseq != expect_seq - 1 || (hseq > 0 && (hh == NULL || strcmp(hh, prev) != 0)))
            bad = expect_seq;
        sqlite3_reset(s);
    }
    if (rc == MG_OK) {
        *out = json_pack("{s:b, s:I, s:s}", "ok", bad == 0, "entries", (json_int_t)entries, "head",
                         prev);
        if (*out && bad)
            json_object_set_new(*out, "first_bad_seq", json_integer(bad));
        if (*out == NULL)
            rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    }
out:
    store_read_end(st, c);
    return rc;
}
