/*
 * cluster.c - several processes on one database: each registers itself as a
 * replica and heartbeats; the heartbeat also reads the database's clock (so
 * leases and deadlines are in one clock whichever host sets them) and keeps or
 * seeks the leadership that runs the cluster's timers once, and renews the
 * replica's cache lease (coherence.c).
 */
#include "store_int.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../os/file.h"
#include "../base/util.h"

/* The leader lease (PostgreSQL, migration 016): kept by its holder while it lasts, taken
 * with the next epoch once it ran out on the database's clock (?2: its length). A holder
 * whose own lease ran out also takes the next epoch: what it decided before is void. */
static const char sql_lease[] =
    "WITH t AS (SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms) "
    "INSERT INTO leader_lease AS l (id, holder, epoch, until_ms) "
    "SELECT 1, ?1, 1, t.ms + ?2 FROM t ON CONFLICT (id) DO UPDATE SET "
    "holder = excluded.holder, until_ms = excluded.until_ms, "
    "epoch = CASE WHEN l.holder = excluded.holder AND l.until_ms > excluded.until_ms - ?2 "
    "THEN l.epoch ELSE l.epoch + 1 END "
    "WHERE l.holder = excluded.holder OR l.until_ms <= excluded.until_ms - ?2 "
    "RETURNING epoch";

int64_t store_clock_ms(struct store *st)
{
    return mg_now_ms() + atomic_load(&st->clock_offset_ms);
}

int64_t store_conn_clock_ms(struct db_conn *c)
{
    struct store *st = db_context(c);

    return st ? store_clock_ms(st) : mg_now_ms();
}

const char *store_replica_id(const struct store *st)
{
    return st->replica_id;
}

bool store_leader(struct store *st)
{
    if (st->database == NULL)
        return true;
    return atomic_load(&st->leader) && mg_mono_ms() < atomic_load(&st->leader_deadline_ms);
}

int64_t store_leader_epoch(struct store *st)
{
    if (st->database == NULL)
        return 1;
    return store_leader(st) ? atomic_load(&st->leader_epoch) : 0;
}

void store_set_keys(struct store *st, const struct sign_keyring *keys)
{
    pthread_mutex_lock(&st->wlock); /* versions are signed inside write transactions */
    st->keys = keys;
    pthread_mutex_unlock(&st->wlock);
}

const char *store_database_kind(const struct store *st)
{
    return st->database ? "postgresql" : "sqlite";
}

enum mg_code store_replica_init(struct store *st, struct mg_error *err)
{
    char path[PATH_MAX], text[40];
    uint8_t rnd[8];
    ssize_t n = -1;
    int fd;

    atomic_store(&st->leader, st->database == NULL); /* SQLite: the only process */
    /* One id per data directory: the lock on the directory proves the process that
     * used it before is gone, so what it held under this id is free (store_open). */
    snprintf(path, sizeof(path), "%s/replica-id", st->data_dir);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) >= 0) {
        n = read(fd, text, sizeof(text) - 1);
        close(fd);
    }
    if (n >= 16) {
        text[n] = '\0';
        if (strspn(text, "0123456789abcdef") >= 16) {
            memcpy(st->replica_id, text, 16);
            st->replica_id[16] = '\0';
            return MG_OK;
        }
    }
    if (!mg_random_bytes(rnd, sizeof(rnd)))
        return mg_fail(err, MG_EIO, NULL, "no random bytes for a replica id");
    mg_hex_encode(rnd, sizeof(rnd), st->replica_id);
    return mg_file_write_atomic(path, st->replica_id, 16, 0600, err);
}

enum mg_code store_recover_own(struct store *st, struct mg_error *err)
{
    static const char sql_outbox[] =
        "UPDATE outbox SET lease_until = 0, lease_owner = NULL, lease_token = NULL "
        "WHERE lease_owner = ?";
    static const char sql_smoke[] = "UPDATE smoke_tests SET state = 'queued', started_at = NULL, "
                                    "owner = NULL, lease_until = 0 "
                                    "WHERE state = 'running' AND owner = ?";
    struct db_conn *c = store_write_begin(st, err);
    struct db_stmt *s;
    enum mg_code rc;

    if (c == NULL)
        return err->code;
    s = db_prepare(c, sql_outbox);
    db_bind_text(s, 1, st->replica_id);
    if ((rc = db_exec(s, err)) == MG_OK) {
        s = db_prepare(c, sql_smoke);
        db_bind_text(s, 1, st->replica_id);
        rc = db_exec(s, err);
    }
    return store_write_end(st, c, rc, err);
}

/* Keep or seek the leader lease on the leader connection. The lease counts here until
 * STORE_LEADER_MARGIN_MS before it ends on the database's clock (measured from before the
 * renewal was sent, on this host's monotonic clock): a leader that cannot renew steps down
 * before another replica may take over. */
static void lead(struct store *st)
{
    int64_t sent = mg_mono_ms(), epoch = 0;
    struct mg_error err;
    struct db_stmt *s;
    bool row, won = false;

    if (st->leader_conn == NULL)
        return;
    if (db_begin(st->leader_conn, DB_WRITE, &err) != MG_OK)
        return; /* no answer: the deadline steps down if it lasts */
    s = db_prepare(st->leader_conn, sql_lease);
    db_bind_text(s, 1, st->replica_id);
    db_bind_i64(s, 2, STORE_LEADER_LEASE_MS);
    if (db_step(s, &row, &err) == MG_OK) {
        if (row) {
            won = true;
            epoch = db_col_i64(s, 0);
        }
        if (row && db_exec(s, &err) != MG_OK)
            won = false;
    }
    if (db_commit(st->leader_conn, &err) != MG_OK) {
        db_rollback(st->leader_conn);
        return; /* unknown outcome: as if unanswered */
    }
    if (won) {
        atomic_store(&st->leader_epoch, epoch);
        atomic_store(&st->leader_deadline_ms,
                     sent + STORE_LEADER_LEASE_MS - STORE_LEADER_MARGIN_MS);
    }
    atomic_store(&st->leader, won);
}

enum mg_code store_replica_heartbeat(struct store *st, const char *address, const char *version,
                                     struct mg_error *err)
{
    static const char sql[] =
        "INSERT INTO replicas (id, address, version, started_at, last_seen_ms) "
        "VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (id) DO UPDATE SET address = excluded.address, "
        "last_seen_ms = excluded.last_seen_ms RETURNING ?5";
    /* The database's clock; and the cache lease (?5: its length, 0: none) with what this
     * replica has applied, and the echo its listener must hear. */
    static const char sql_pg[] =
        "WITH t AS (SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms) "
        "INSERT INTO replicas (id, address, version, started_at, last_seen_ms, cache_until_ms, "
        "cache_seen) SELECT ?1, ?2, ?3, ?4, t.ms, CASE WHEN ?5 > 0 THEN t.ms + ?5 ELSE 0 END, "
        "?6 FROM t ON CONFLICT (id) DO UPDATE SET address = excluded.address, "
        "last_seen_ms = excluded.last_seen_ms, cache_until_ms = excluded.cache_until_ms, "
        "cache_seen = greatest(replicas.cache_seen, excluded.cache_seen) "
        "RETURNING last_seen_ms, pg_notify('mg_change', ?7)";
    /* Rows of processes gone for an hour are history. */
    static const char sql_forget[] = "DELETE FROM replicas WHERE last_seen_ms < ?";
    struct store_renewal renewal;
    struct db_conn *c;
    struct db_stmt *s;
    int64_t before, after, db_ms = 0;
    char started[32];
    enum mg_code rc;
    bool row;

    store_cache_renew_begin(st, &renewal);
    before = mg_now_ms();
    if ((c = store_write_begin(st, err)) == NULL)
        return err->code;
    mg_time_format(st->started_ms, started);
    s = db_prepare(c, DB_SQL(c, sql, sql_pg));
    db_bind_text(s, 1, st->replica_id);
    db_bind_text(s, 2, address ? address : "");
    db_bind_text(s, 3, version ? version : "");
    db_bind_text(s, 4, started);
    if (db_dialect(c) == DB_SQLITE) { /* PostgreSQL reads its own clock */
        db_bind_i64(s, 5, before);
    } else {
        db_bind_i64(s, 5, renewal.lease ? STORE_CACHE_LEASE_MS : 0);
        db_bind_i64(s, 6, renewal.seen);
        db_bind_text(s, 7, renewal.echo_text);
    }
    if ((rc = db_step(s, &row, err)) != MG_OK)
        goto out;
    if (row)
        db_ms = db_col_i64(s, 0);
    if ((rc = db_exec(s, err)) != MG_OK)
        goto out;
    s = db_prepare(c, sql_forget);
    db_bind_i64(s, 1, db_ms - 3600 * 1000);
    rc = db_exec(s, err);
out:
    rc = store_write_end(st, c, rc, err);
    after = mg_now_ms();
    store_cache_renew_end(st, &renewal, rc == MG_OK);
    /* The database's clock, less half the round trip. On SQLite it is ours. */
    if (rc == MG_OK && st->database)
        atomic_store(&st->clock_offset_ms, db_ms - (before + after) / 2);
    if (st->database)
        lead(st);
    return rc;
}

enum mg_code store_leader_resign(struct store *st, struct mg_error *err)
{
    static const char sql[] = "UPDATE leader_lease SET until_ms = 0 WHERE id = 1 AND holder = ?";
    struct db_conn *c;
    struct db_stmt *s;

    if (st->database == NULL)
        return MG_OK;
    atomic_store(&st->leader, false);
    if ((c = store_write_begin(st, err)) == NULL)
        return err->code;
    s = db_prepare(c, sql);
    db_bind_text(s, 1, st->replica_id);
    return store_write_end(st, c, db_exec(s, err), err);
}

enum mg_code store_replica_forget_others(struct store *st, struct mg_error *err)
{
    static const char sql[] = "DELETE FROM replicas WHERE id != ?";
    struct db_conn *c = store_write_begin(st, err);
    struct db_stmt *s;

    if (c == NULL)
        return err->code;
    s = db_prepare(c, sql);
    db_bind_text(s, 1, st->replica_id);
    return store_write_end(st, c, db_exec(s, err), err);
}

enum mg_code store_cluster(struct store *st, json_t **out, struct mg_error *err)
{
    /* SQLite: one process, which leads. PostgreSQL: the holder of the leader lease while
     * it counts itself leader (until STORE_LEADER_MARGIN_MS, ?3, before the lease ends on
     * the database's clock; ?2 binds there too, so both spellings take the same
     * parameters). */
    static const char sql[] =
        "SELECT id, address, version, started_at, last_seen_ms, id = ?2 AND ?3 IS NOT NULL "
        "FROM replicas WHERE last_seen_ms > ?1 ORDER BY started_at, id";
    static const char sql_pg[] =
        "SELECT r.id, r.address, r.version, r.started_at, r.last_seen_ms, (EXISTS (SELECT 1 "
        "FROM leader_lease l WHERE l.id = 1 AND l.holder = r.id AND l.until_ms - ?3 > "
        "(extract(epoch FROM clock_timestamp()) * 1000)::bigint))::int "
        "FROM replicas r WHERE r.last_seen_ms > ?1 AND ?2::text IS NOT NULL "
        "ORDER BY r.started_at, r.id";
    struct db_conn *c = store_read_begin(st);
    struct db_stmt *s = db_prepare(c, DB_SQL(c, sql, sql_pg));
    json_t *list = json_array();
    enum mg_code rc;
    bool row;

    *out = NULL;
    db_bind_i64(s, 1, store_clock_ms(st) - STORE_REPLICA_LISTED_MS);
    db_bind_text(s, 2, st->replica_id);
    db_bind_i64(s, 3, STORE_LEADER_MARGIN_MS);
    while ((rc = db_step(s, &row, err)) == MG_OK && row) {
        char seen[32];

        mg_time_format(db_col_i64(s, 4), seen);
        json_array_append_new(
            list,
            json_pack("{s:o, s:o, s:o, s:o, s:s, s:b, s:b}", "id", store_col_json_string(s, 0),
                      "address", store_col_json_string(s, 1), "version",
                      store_col_json_string(s, 2), "started_at", store_col_json_string(s, 3),
                      "last_seen", seen, "self", strcmp(db_col_text(s, 0), st->replica_id) == 0,
                      "leader", db_col_i64(s, 5) != 0));
    }
    store_read_end(st, c);
    if (rc != MG_OK) {
        json_decref(list);
        return rc;
    }
    *out = json_pack("{s:o, s:s, s:s, s:s, s:b}", "replicas", list, "database",
                     store_database_kind(st), "blobs", store_blobs_kind(st), "replica",
                     st->replica_id, "leader", store_leader(st));
    return *out ? MG_OK : mg_fail(err, MG_ENOMEM, NULL, "out of memory");
}

/* ---- the cluster's signing keys ------------------------------------------ */

/* The key the cluster signs with: the newest activated (rows from before activation
 * times existed: the first stored). */
#define CLUSTER_KEY_ORDER "ORDER BY activated_ms DESC, created_at, keyid LIMIT 1"

/* Parameters 1-5 of a signing_keys insert: keyid, hint, the two PEMs, created now. */
static void bind_key(struct db_stmt *s, const char *keyid, const char *hint, const char *public_pem,
                     const char *private_pem)
{
    char at[32];

    store_now(at);
    db_bind_text(s, 1, keyid);
    db_bind_text(s, 2, hint);
    db_bind_text(s, 3, public_pem);
    db_bind_text(s, 4, private_pem);
    db_bind_text(s, 5, at);
}

enum mg_code store_signing_key_share(struct store *st, const char *keyid, const char *hint,
                                     const char *public_pem, const char *private_pem,
                                     char **shared_pem, struct mg_error *err)
{
    static const char sql_get[] = "SELECT private_pem FROM signing_keys "
                                  "WHERE private_pem IS NOT NULL " CLUSTER_KEY_ORDER;
    static const char sql_ins[] =
        "INSERT INTO signing_keys (keyid, hint, public_pem, private_pem, created_at, "
        "last_active_ms, activated_ms) VALUES (?, ?, ?, ?, ?, ?, ?6) ON CONFLICT (keyid) "
        "DO UPDATE SET private_pem = excluded.private_pem, activated_ms = excluded.activated_ms";
    struct db_conn *c = store_write_begin(st, err);
    struct db_stmt *s;
    enum mg_code rc;
    bool row;

    *shared_pem = NULL;
    if (c == NULL)
        return err->code;
    /* Under the write lock: replicas starting at once agree on the first key stored. */
    s = db_prepare(c, sql_get);
    if ((rc = db_step(s, &row, err)) != MG_OK)
        goto out;
    if (row) {
        *shared_pem = store_col_strdup(s, 0);
        db_reset(s);
        if (*shared_pem == NULL)
            rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    s = db_prepare(c, sql_ins);
    bind_key(s, keyid, hint, public_pem, private_pem);
    db_bind_i64(s, 6, store_clock_ms(st));
    if ((rc = db_exec(s, err)) == MG_OK && (*shared_pem = strdup(private_pem)) == NULL)
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
out:
    rc = store_write_end(st, c, rc, err);
    if (rc != MG_OK) {
        free(*shared_pem);
        *shared_pem = NULL;
    }
    return rc;
}

enum mg_code store_signing_key_current(struct store *st, char keyid[65], char **private_pem,
                                       struct mg_error *err)
{
    static const char sql[] = "SELECT keyid, private_pem FROM signing_keys "
                              "WHERE private_pem IS NOT NULL " CLUSTER_KEY_ORDER;
    struct db_conn *c = store_read_one(st);
    struct db_stmt *s = db_prepare(c, sql);
    enum mg_code rc;
    bool row;

    *private_pem = NULL;
    keyid[0] = '\0';
    if ((rc = db_step(s, &row, err)) == MG_OK && row) {
        snprintf(keyid, 65, "%s", db_col_text(s, 0));
        if ((*private_pem = store_col_strdup(s, 1)) == NULL)
            rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        db_reset(s);
    } else if (rc == MG_OK) {
        rc = mg_fail(err, MG_ENOTFOUND, NULL, "the database holds no signing key to share");
    }
    store_read_end(st, c);
    return rc;
}

enum mg_code store_signing_key_rotate(const char *database, const char *keyid, const char *hint,
                                      const char *public_pem, const char *private_pem,
                                      struct mg_error *err)
{
    static const char sql_schema[] = "SELECT coalesce(max(version), 0) FROM schema_migrations";
    static const char sql_ins[] =
        "INSERT INTO signing_keys (keyid, hint, public_pem, private_pem, created_at, "
        "last_active_ms, activated_ms) VALUES (?, ?, ?, ?, ?, 0, "
        "(extract(epoch FROM clock_timestamp()) * 1000)::bigint) ON CONFLICT (keyid) DO UPDATE "
        "SET private_pem = excluded.private_pem, activated_ms = excluded.activated_ms";
    static const char sql_notify[] = "SELECT pg_notify('mg_change', 'k')";
    struct db_open_options o = {.url = database};
    struct db_conn *c = NULL;
    struct db_stmt *s;
    json_t *detail = NULL;
    enum mg_code rc;
    bool row;

    if ((rc = db_open(&o, &c, err)) != MG_OK)
        return rc;
    if (db_dialect(c) != DB_POSTGRES) {
        rc = mg_fail(err, MG_EINVAL, NULL, "--database must be a PostgreSQL URL");
        goto out;
    }
    if ((rc = db_begin(c, DB_WRITE, err)) != MG_OK)
        goto out;
    /* The same schema as the replicas' (they migrate at start): else the key would land
     * where they do not look. */
    s = db_prepare(c, sql_schema);
    if ((rc = db_step(s, &row, err)) != MG_OK)
        goto out;
    if (!row || db_col_i64(s, 0) != store_schema_version()) {
        rc = mg_fail(err, MG_EINVAL, NULL,
                     "the database is at schema version %lld, this modelgated at %d: rotate "
                     "with the modelgated the replicas run",
                     row ? (long long)db_col_i64(s, 0) : 0LL, store_schema_version());
        db_reset(s);
        goto out;
    }
    db_reset(s);
    s = db_prepare(c, sql_ins);
    bind_key(s, keyid, hint, public_pem, private_pem);
    if ((rc = db_exec(s, err)) != MG_OK)
        goto out;
    if ((detail = json_pack("{s:s}", "keyid", keyid)) == NULL) {
        rc = mg_fail(err, MG_ENOMEM, NULL, "out of memory");
        goto out;
    }
    if ((rc = store_audit_append(c, "modelgated", "signing_key.rotate", keyid, STORE_NO_MODEL,
                                 detail, err)) != MG_OK)
        goto out;
    s = db_prepare(c, sql_notify); /* delivered at the commit */
    rc = db_exec(s, err);
out:
    if (rc == MG_OK)
        rc = db_commit(c, err);
    else if (c != NULL)
        db_rollback(c);
    json_decref(detail);
    db_close(&c);
    return rc;
}

enum mg_code store_signing_key_publish(struct store *st, const char *keyid, const char *hint,
                                       const char *public_pem, struct mg_error *err)
{
    static const char sql[] =
        "INSERT INTO signing_keys (keyid, hint, public_pem, private_pem, created_at, "
        "last_active_ms) VALUES (?, ?, ?, NULL, ?, ?) ON CONFLICT (keyid) DO UPDATE SET "
        "last_active_ms = excluded.last_active_ms";
    struct db_conn *c = store_write_begin(st, err);
    struct db_stmt *s;
    char at[32];

    if (c == NULL)
        return err->code;
    s = db_prepare(c, sql);
    store_now(at);
    db_bind_text(s, 1, keyid);
    db_bind_text(s, 2, hint);
    db_bind_text(s, 3, public_pem);
    db_bind_text(s, 4, at);
    db_bind_i64(s, 5, store_clock_ms(st));
    return store_write_end(st, c, db_exec(s, err), err);
}

enum mg_code store_signing_keys(struct store *st, const char *signing_keyid, json_t **out,
                                struct mg_error *err)
{
    static const char sql[] = "SELECT keyid, hint, public_pem, created_at "
                              "FROM signing_keys ORDER BY created_at DESC, keyid";
    struct db_conn *c = store_read_one(st);
    struct db_stmt *s = db_prepare(c, sql);
    json_t *items = json_array();
    enum mg_code rc;
    bool row;

    *out = NULL;
    while ((rc = db_step(s, &row, err)) == MG_OK && row) {
        const char *keyid = db_col_text(s, 0);
        bool active = signing_keyid != NULL && keyid != NULL && strcmp(keyid, signing_keyid) == 0;

        json_array_append_new(
            items, json_pack("{s:o, s:o, s:s, s:o, s:o, s:b}", "keyid", store_col_json_string(s, 0),
                             "hint", store_col_json_string(s, 1), "algorithm", "ecdsa-p256-sha256",
                             "public_key_pem", store_col_json_string(s, 2), "created_at",
                             store_col_json_string(s, 3), "active", active));
    }
    store_read_end(st, c);
    if (rc == MG_OK && (*out = json_pack("{s:o}", "items", items)) != NULL)
        return MG_OK;
    if (rc == MG_OK)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    json_decref(items);
    return rc;
}

enum mg_code store_signing_key_by_hint(struct store *st, const char *hint, char **public_pem,
                                       struct mg_error *err)
{
    static const char sql[] = "SELECT public_pem FROM signing_keys WHERE hint = ?";
    struct db_conn *c = store_read_one(st);
    struct db_stmt *s = db_prepare(c, sql);
    enum mg_code rc;
    bool row;

    *public_pem = NULL;
    db_bind_text(s, 1, hint);
    if ((rc = db_step(s, &row, err)) == MG_OK && row) {
        *public_pem = store_col_strdup(s, 0);
        db_reset(s);
    } else if (rc == MG_OK) {
        rc = mg_fail(err, MG_ENOTFOUND, NULL, "no signing key has the hint %.64s", hint);
    }
    store_read_end(st, c);
    return rc;
}

/* Leader-only work commits only while this replica holds the leader lease at the epoch it
 * decided under; the row stays locked (FOR SHARE) until the commit, so a takeover waits
 * for it. PostgreSQL only: on SQLite the one process leads; epoch 0: not leader-only. */
enum mg_code store_leader_holds(struct db_conn *c, struct store *st, int64_t epoch,
                                struct mg_error *err)
{
    static const char sql[] =
        "SELECT epoch FROM leader_lease WHERE id = 1 AND holder = ?1 AND epoch = ?2 "
        "AND until_ms > (extract(epoch FROM clock_timestamp()) * 1000)::bigint FOR SHARE";
    struct db_stmt *s;
    enum mg_code rc;
    bool row = false;

    if (epoch <= 0 || db_dialect(c) != DB_POSTGRES)
        return MG_OK;
    s = db_prepare(c, sql);
    db_bind_text(s, 1, store_replica_id(st));
    db_bind_i64(s, 2, epoch);
    if ((rc = db_step(s, &row, err)) != MG_OK)
        return rc;
    if (row)
        db_reset(s);
    return row ? MG_OK
               : mg_fail(err, MG_EUNAVAIL, NULL,
                         "this replica no longer leads (leader epoch %lld ended); the leader "
                         "now does this work",
                         (long long)epoch);
}

enum mg_code store_sweep_dead(struct store *st, int64_t leader_epoch, const char *sql,
                              struct mg_error *err)
{
    struct db_conn *c = store_write_begin(st, err);
    struct db_stmt *s;
    enum mg_code rc;

    if (c == NULL)
        return err->code;
    if ((rc = store_leader_holds(c, st, leader_epoch, err)) == MG_OK) {
        s = db_prepare(c, sql);
        db_bind_i64(s, 1, store_clock_ms(st) - STORE_REPLICA_DEAD_MS);
        db_bind_text(s, 2, store_replica_id(st));
        rc = db_exec(s, err);
    }
    return store_write_end(st, c, rc, err);
}
