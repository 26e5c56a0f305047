/*
 * sessions.c - reviewer UI sessions: a random cookie value (only its hash
 * is stored) bound to the token that signed in, with its CSRF token.
 */
#include "store_int.h"

#include <string.h>

#include <openssl/sha.h>

#include "../base/util.h"

/* 32 random bytes as 43 base64url characters. */
static bool random_b64url(char out[44])
{
    static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    uint8_t raw[33];
    size_t i;

    if (!mg_random_bytes(raw, 32))
        return false;
    raw[32] = 0;
    for (i = 0; i < 43; i++) {
        size_t bit = i * 6, byte = bit / 8, off = bit % 8;
        unsigned v = ((unsigned)raw[byte] << 8 | raw[byte + 1]);
        out[i] = b64url[(v >> (10 - off)) & 63];
    }
    out[43] = '\0';
    return true;
}

enum mg_code store_session_open(struct store *st, const char *secret, size_t n,
                                char id_out[STORE_SESSION_ID_LEN + 1],
                                char csrf_out[STORE_CSRF_LEN + 1], struct store_principal *who,
                                struct mg_error *err)
{
    static const char sql[] = "INSERT INTO ui_sessions (id_hash, token_id, csrf, created_ms, "
                              "last_ms) VALUES (?, ?, ?, ?, ?)";
    struct db_conn *c;
    struct db_stmt *s;
    uint8_t hash[32];
    int64_t now = store_clock_ms(st); /* the cluster's clock: any replica checks it */
    enum mg_code rc;

    if (store_token_authenticate(st, secret, n, who) != MG_OK)
        return mg_fail(err, MG_EUNAUTH, "token", "that token is unknown or was revoked");
    if (!random_b64url(id_out) || !random_b64url(csrf_out))
        return mg_fail(err, MG_EIO, NULL, "the random number generator failed");
    mg_sha256(id_out, STORE_SESSION_ID_LEN, hash);
    if ((c = store_write_begin(st, err)) == NULL)
        return err->code;
    s = db_prepare(c, sql);
    db_bind_blob(s, 1, hash, sizeof(hash));
    db_bind_text(s, 2, who->id);
    db_bind_text(s, 3, csrf_out);
    db_bind_i64(s, 4, now);
    db_bind_i64(s, 5, now);
    if ((rc = db_exec(s, err)) != MG_OK)
        goto out;
    rc = store_audit_append(c, who->name, "session.open", who->id, STORE_NO_MODEL, NULL, err);
out:
    return store_write_end(st, c, rc, err);
}

enum mg_code store_session_check(struct store *st, const char *id, size_t n, int64_t idle_ms,
                                 int64_t max_ms, struct store_principal *who,
                                 char csrf_out[STORE_CSRF_LEN + 1])
{
    static const char sql[] =
        "SELECT t.id, t.name, t.roles, s.csrf, s.created_ms, s.last_ms, s.id_hash, t.teams, "
        "t.aliases, t.person_issuer, t.person_subject "
        "FROM ui_sessions s JOIN tokens t ON t.id = s.token_id "
        "WHERE s.id_hash = ? AND t.revoked_at IS NULL";
    static const char sql_touch[] = "UPDATE ui_sessions SET last_ms = ? WHERE id_hash = ?";
    struct db_conn *c;
    struct db_stmt *s;
    uint8_t hash[32];
    int64_t now = store_clock_ms(st), last = 0, created = 0;
    enum mg_code rc;
    bool row;

    if (n != STORE_SESSION_ID_LEN)
        return MG_EUNAUTH;
    mg_sha256(id, n, hash);
    c = store_read_one(st);
    s = db_prepare(c, sql);
    db_bind_blob(s, 1, hash, sizeof(hash));
    if ((rc = db_step(s, &row, NULL)) == MG_OK) {
        rc = MG_EUNAUTH;
        if (row && db_col_bytes(s, 6) == 32 && mg_ct_equal(db_col_blob(s, 6), hash, 32)) {
            snprintf(who->id, sizeof(who->id), "%s", db_col_text(s, 0));
            snprintf(who->name, sizeof(who->name), "%s", db_col_text(s, 1));
            who->roles = (unsigned)db_col_i64(s, 2);
            store_principal_scopes(who, db_col_text(s, 7), db_col_text(s, 8));
            snprintf(who->kind, sizeof(who->kind), "token");
            snprintf(who->issuer, sizeof(who->issuer), "%s",
                     db_col_null(s, 9) ? "" : db_col_text(s, 9));
            snprintf(who->subject, sizeof(who->subject), "%s",
                     db_col_null(s, 10) ? "" : db_col_text(s, 10));
            snprintf(csrf_out, STORE_CSRF_LEN + 1, "%s", db_col_text(s, 3));
            created = db_col_i64(s, 4);
            last = db_col_i64(s, 5);
            rc = MG_OK;
        }
        db_reset(s);
    }
    store_read_end(st, c);
    if (rc != MG_OK)
        return rc;
    if (now - last > idle_ms || now - created > max_ms)
        return MG_EUNAUTH;
    /* Refresh the idle clock at most every 10 s: reads stay reads. A failed
     * refresh only means the next request tries again. */
    if (now - last > 10000 && (c = store_write_begin(st, NULL)) != NULL) {
        s = db_prepare(c, sql_touch);
        db_bind_i64(s, 1, now);
        db_bind_blob(s, 2, hash, sizeof(hash));
        store_write_end(st, c, db_exec(s, NULL), NULL);
    }
    return MG_OK;
}

enum mg_code store_session_close(struct store *st, const char *id, size_t n, struct mg_error *err)
{
    static const char sql[] = "DELETE FROM ui_sessions WHERE id_hash = ?";
    struct db_conn *c;
    struct db_stmt *s;
    uint8_t hash[32];

    mg_sha256(id, n, hash);
    if ((c = store_write_begin(st, err)) == NULL)
        return err->code;
    s = db_prepare(c, sql);
    db_bind_blob(s, 1, hash, sizeof(hash));
    return store_write_end(st, c, db_exec(s, err), err);
}
