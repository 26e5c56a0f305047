/*
 * test_leader_epoch.c - leader-only jobs commit under the leader epoch they started with
 * (M27): the garbage collector's and retention's claims and the sweeps of dead replicas'
 * work, the analysis' intervals, the periodic smoke re-tests (store_smoke_enqueue), the
 * reconciler's drift marks of host-less gateways (store_outbox_drift) and the background
 * rescan's scan reports (store_blob_scan_backfill) check the lease (holder, epoch, expiry) in
 * their own transaction. A store of this process joins a daemon's PostgreSQL database; the
 * lease is moved to this store at the next epoch directly in the database, as a takeover
 * would: a call with the epoch before (a job that checked leadership before the takeover)
 * changes nothing and answers MG_EUNAVAIL; the same call at the new epoch commits. On SQLite
 * (one process, always the leader) every epoch is the leader's: the calls commit as before.
 */
#include "harness.h"
#include "sys.h"

#include <libpq-fe.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"

#define HOST "leader-epoch-host"

static struct mg_server *srv;
static struct store *st;
static char dir[] = "/tmp/mg-leader-epoch-XXXXXX";

static int teardown(void **state)
{
    char cmd[64];

    (void)state;
    store_close(&st);
    it_server_free(&srv);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    if (dir[strlen(dir) - 1] != 'X' && system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", dir);
    return 0;
}

static void open_store(const char *database)
{
    struct store_options opt;
    struct mg_error err;

    snprintf(dir, sizeof(dir), "/tmp/mg-leader-epoch-XXXXXX"); /* each test's own */
    assert_non_null(mkdtemp(dir));
    memset(&opt, 0, sizeof(opt));
    opt.data_dir = dir;
    opt.database = database;
    opt.read_conns = 2;
    opt.host_name = HOST; /* its gateways' rows are this replica's, not the leader's */
    store_archive_limits_default(&opt.archive);
    if (store_open(&opt, &st, &err) != MG_OK)
        fail_msg("store_open: %s", err.message);
}

/* SQL on the test store's database: the daemon's PostgreSQL (pg), or, with pg NULL, the
 * store's own SQLite file. Returns the first value of the first row, or -1 for none. */
static long long sql_value(PGconn *pg, const char *sql)
{
    char path[96];
    sqlite3 *db = NULL;
    sqlite3_stmt *s = NULL;
    long long v = -1;
    int rc;

    if (pg) {
        PGresult *r = PQexec(pg, sql);

        if (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK)
            fail_msg("%s: %s", sql, PQerrorMessage(pg));
        if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0)
            v = atoll(PQgetvalue(r, 0, 0));
        PQclear(r);
        return v;
    }
    snprintf(path, sizeof(path), "%s/modelgate.db", dir);
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, sql, -1, &s, NULL) != SQLITE_OK)
        fail_msg("%s: %s", sql, db ? sqlite3_errmsg(db) : "out of memory");
    sqlite3_busy_timeout(db, 10000);
    if ((rc = sqlite3_step(s)) == SQLITE_ROW)
        v = sqlite3_column_int64(s, 0);
    else if (rc != SQLITE_DONE)
        fail_msg("%s: %s", sql, sqlite3_errmsg(db));
    sqlite3_finalize(s);
    sqlite3_close(db);
    return v;
}

/* Wait until the daemon leads under some epoch N, then take the lease over as a new leader
 * would: this process's store holds it at N + 1 for ten minutes. Returns N. */
static long long take_over(PGconn *pg)
{
    int64_t deadline = it_deadline(30000);
    long long epoch;
    char sql[256];

    while ((epoch = sql_value(pg, "SELECT epoch FROM leader_lease WHERE id = 1")) < 1 &&
           it_now_ms() < deadline)
        it_pause_ms(100);
    assert_true(epoch >= 1);
    snprintf(sql, sizeof(sql),
             "UPDATE leader_lease SET holder = '%s', epoch = %lld, until_ms = until_ms + 600000 "
             "WHERE id = 1 AND epoch = %lld RETURNING epoch",
             store_replica_id(st), epoch + 1, epoch);
    assert_int_equal(sql_value(pg, sql), epoch + 1);
    return epoch;
}

/* A blob stored through this process's store (its bytes in its own data directory), then
 * stripped of its scan report as if stored before the scanner: its digest into digest. */
static void unscanned_blob(PGconn *pg, char digest[80])
{
    static const char pk[] = "cos\nsystem\n(S'echo pwned'\ntR.";
    struct store_blob_upload *up = NULL;
    struct mg_error err;
    json_t *blob = NULL;
    bool created = false;
    char sql[256];

    assert_int_equal(store_blob_upload_begin(st, 1 << 20, &up, &err), MG_OK);
    assert_int_equal(store_blob_upload_write(up, pk, sizeof(pk) - 1, &err), MG_OK);
    if (store_blob_upload_commit(&up, "test", NULL, &blob, &created, &err) != MG_OK)
        fail_msg("store_blob_upload_commit: %s", err.message);
    snprintf(digest, 80, "%s", json_string_value(json_object_get(blob, "digest")));
    json_decref(blob);
    snprintf(sql, sizeof(sql), "UPDATE blobs SET scan = NULL WHERE digest = '%s' RETURNING 1",
             digest);
    assert_int_equal(sql_value(pg, sql), 1);
}

static long long scanned(PGconn *pg, const char *digest)
{
    char sql[256];

    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM blobs WHERE digest = '%s' AND scan IS NOT NULL", digest);
    return sql_value(pg, sql);
}

static void test_stale_epoch_writes_nothing(void **state)
{
    struct mg_error err;
    json_t *models = NULL;
    bool claimed = false, recorded = false;
    json_t *metrics = json_array();
    struct store_interval rec = {.promotion = "p-none",
                                 .phase = "steps",
                                 .step_index = 0,
                                 .weight = 10,
                                 .verdict = "passed",
                                 .metrics = metrics};
    char digest[80];
    json_t *report = NULL;
    long long epoch = -1;
    int64_t now;
    PGconn *pg;

    (void)state;
    srv = it_server_start(NULL);
    if (!it_on_postgres()) {
        open_store(NULL);
        now = store_clock_ms(st);
        assert_int_equal(store_leader_epoch(st), 1);
        assert_int_equal(store_job_claim(st, "gc", 7, now, 0, &claimed, &err), MG_OK);
        assert_true(claimed);
        assert_int_equal(store_retention_claim(st, 7, now, 0, &models, &err), MG_OK);
        json_decref(models);
        assert_int_equal(store_smoke_recover(st, 7, &err), MG_OK);
        assert_int_equal(store_outbox_recover(st, 7, &err), MG_OK);
        json_decref(metrics);
        return;
    }
    open_store(srv->database);
    pg = PQconnectdb(srv->database);
    assert_int_equal(PQstatus(pg), CONNECTION_OK);
    epoch = take_over(pg); /* the daemon led under N; this store holds N + 1 now */
    now = store_clock_ms(st);

    /* Jobs decided under N: nothing commits. */
    assert_int_equal(store_job_claim(st, "gc-stale", epoch, now, 0, &claimed, &err), MG_EUNAVAIL);
    assert_false(claimed);
    assert_int_equal(sql_value(pg, "SELECT count(*) FROM jobs WHERE name = 'gc-stale'"), 0);
    models = NULL;
    assert_int_equal(store_retention_claim(st, epoch, now, 0, &models, &err), MG_EUNAVAIL);
    assert_null(models);
    assert_int_equal(store_smoke_recover(st, epoch, &err), MG_EUNAVAIL);
    assert_int_equal(store_outbox_recover(st, epoch, &err), MG_EUNAVAIL);
    rec.leader_epoch = epoch; /* an analysis interval measured before the takeover */
    assert_int_equal(store_interval_record(st, &rec, &recorded, &err), MG_EUNAVAIL);
    assert_false(recorded);
    assert_int_equal(sql_value(pg, "SELECT count(*) FROM promotion_intervals"), 0);
    unscanned_blob(pg, digest); /* the background rescan of a blob stored before the scanner */
    assert_int_equal(store_blob_scan_backfill(st, epoch, "modelgated", digest, &report, &err),
                     MG_EUNAVAIL);
    assert_null(report);
    assert_int_equal(scanned(pg, digest), 0);

    /* The same work under N + 1 commits. */
    assert_int_equal(store_job_claim(st, "gc-current", epoch + 1, now, 0, &claimed, &err), MG_OK);
    assert_true(claimed);
    assert_int_equal(sql_value(pg, "SELECT count(*) FROM jobs WHERE name = 'gc-current'"), 1);
    assert_int_equal(store_retention_claim(st, epoch + 1, now, 0, &models, &err), MG_OK);
    json_decref(models);
    assert_int_equal(store_smoke_recover(st, epoch + 1, &err), MG_OK);
    assert_int_equal(store_outbox_recover(st, epoch + 1, &err), MG_OK);
    assert_int_equal(store_blob_scan_backfill(st, epoch + 1, "modelgated", digest, &report, &err),
                     MG_OK);
    assert_string_equal(json_string_value(json_object_get(report, "verdict")), "unsafe");
    json_decref(report);
    assert_int_equal(scanned(pg, digest), 1);

    /* A lease that ran out is no one's: the epoch's holder does not commit either. */
    assert_int_equal(sql_value(pg, "UPDATE leader_lease SET until_ms = 0 WHERE id = 1 "
                                   "RETURNING until_ms"),
                     0);
    assert_int_equal(store_job_claim(st, "gc-expired", epoch + 1, now, 0, &claimed, &err),
                     MG_EUNAVAIL);
    assert_int_equal(sql_value(pg, "SELECT count(*) FROM jobs WHERE name = 'gc-expired'"), 0);
    PQfinish(pg);
    json_decref(metrics);
}

/* Model "m" with versions 1 and 2, through the store. */
static void model_versions(void)
{
    static const char weights[] = "leader epoch weights";
    struct store_blob_upload *up = NULL;
    struct mg_error err;
    char digest[IT_DIGEST_LEN + 1];
    struct mg_version_new rec = {0};
    json_t *out = NULL, *req;
    bool created = false;

    it_digest(weights, strlen(weights), digest);
    if (store_blob_upload_begin(st, 1 << 20, &up, &err) != MG_OK ||
        store_blob_upload_write(up, weights, strlen(weights), &err) != MG_OK ||
        store_blob_upload_commit(&up, "alice", digest, &out, &created, &err) != MG_OK)
        fail_msg("upload: %s", err.message);
    json_decref(out);
    req = json_pack("{s:s}", "name", "m");
    if (store_model_create(st, "alice", req, &out, &err) != MG_OK)
        fail_msg("store_model_create: %s", err.message);
    json_decref(out);
    json_decref(req);
    snprintf(rec.artifact, sizeof(rec.artifact), "%s", digest);
    for (int i = 0; i < 2; i++) {
        if (store_version_create(st, "alice", "m", &rec, &out, &err) != MG_OK)
            fail_msg("store_version_create: %s", err.message);
        json_decref(out);
    }
}

/* A host-less gateway "gw-lead" whose row m/prod is in sync at generation 1, and one bound to
 * this replica's host ("gw-here"), written as a delivery would leave them. */
static void gateways_in_sync(PGconn *pg)
{
    assert_int_equal(
        sql_value(pg, "INSERT INTO gateways (name, kind, config, created_at, updated_at) VALUES "
                      "('gw-lead', 'webhook', '{\"url\":\"http://127.0.0.1:9/hook\"}', "
                      "'2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z')"),
        -1);
    assert_int_equal(
        sql_value(pg,
                  "INSERT INTO gateways (name, kind, config, created_at, updated_at) VALUES "
                  "('gw-here', 'webhook', '{\"url\":\"http://127.0.0.1:9/hook\",\"host\":\"" HOST
                  "\"}', '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z')"),
        -1);
    assert_int_equal(
        sql_value(pg, "INSERT INTO outbox (gateway, model, alias, generation, payload, state, "
                      "written_at) SELECT name, 'm', 'prod', 1, "
                      "'{\"routes\":[],\"match\":[],\"shadow\":null}', 'in_sync', "
                      "'2026-01-01T00:00:00.000Z' FROM gateways WHERE name LIKE 'gw-%'"),
        -1);
}

/* The in-sync row of gateway gw in list (n rows), or NULL. */
static struct store_delivery *row_of(struct store_delivery *list, size_t n, const char *gw)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(list[i].gateway, gw) == 0)
            return &list[i];
    return NULL;
}

static void free_rows(struct store_delivery *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        store_delivery_release(&list[i]);
    free(list);
}

/* The periodic re-test and the reconciler's drift mark of a host-less gateway, as a leader
 * whose lease moved on: nothing is queued, marked or audited; at the new epoch both commit. */
static void test_stale_epoch_queues_and_marks_nothing(void **state)
{
    struct mg_error err;
    struct store_delivery *list = NULL, *d;
    size_t n = 0;
    json_t *t = NULL;
    bool created = false, marked = false;
    long long epoch = -1;
    PGconn *pg = NULL;

    (void)state;
    srv = it_server_start(NULL);
    if (!it_on_postgres()) {
        /* One process, always the leader: any epoch commits, as before. */
        open_store(NULL);
        model_versions();
        gateways_in_sync(NULL);
        assert_int_equal(store_smoke_enqueue(st, 7, "m", 1, "periodic", "none", &t, &created, &err),
                         MG_OK);
        assert_true(created);
        json_decref(t);
        assert_int_equal(store_outbox_in_sync(st, 7, &list, &n, &err), MG_OK);
        assert_non_null(d = row_of(list, n, "gw-lead"));
        assert_int_equal(d->leader_epoch, 7);
        assert_int_equal(row_of(list, n, "gw-here")->leader_epoch, 0);
        assert_int_equal(store_outbox_drift(st, d, "weights differ", &marked, &err), MG_OK);
        assert_true(marked);
        free_rows(list, n);
        assert_int_equal(sql_value(NULL, "SELECT count(*) FROM audit WHERE action = "
                                         "'gateway.drift'"),
                         1);
        return;
    }
    open_store(srv->database);
    pg = PQconnectdb(srv->database);
    assert_int_equal(PQstatus(pg), CONNECTION_OK);
    model_versions();
    gateways_in_sync(pg);
    epoch = take_over(pg);

    /* A pass that began under N: no re-test is queued. */
    assert_int_equal(store_smoke_enqueue(st, epoch, "m", 1, "periodic", "none", &t, &created, &err),
                     MG_EUNAVAIL);
    assert_false(created);
    assert_null(t);
    assert_int_equal(sql_value(pg, "SELECT count(*) FROM smoke_tests"), 0);
    /* Its reconciler pass lists the host-less row under N, and marking it changes nothing:
     * the row stays in sync, no gateway.drift entry is written. A row of this host's gateway
     * is not leader-only work. */
    assert_int_equal(store_outbox_in_sync(st, 0, &list, &n, &err), MG_OK);
    assert_null(row_of(list, n, "gw-lead"));
    free_rows(list, n);
    assert_int_equal(store_outbox_in_sync(st, epoch, &list, &n, &err), MG_OK);
    assert_non_null(d = row_of(list, n, "gw-lead"));
    assert_int_equal(d->leader_epoch, epoch);
    assert_int_equal(row_of(list, n, "gw-here")->leader_epoch, 0);
    assert_int_equal(store_outbox_drift(st, d, "weights differ", &marked, &err), MG_EUNAVAIL);
    assert_false(marked);
    free_rows(list, n);
    assert_int_equal(sql_value(pg, "SELECT count(*) FROM outbox WHERE gateway = 'gw-lead' AND "
                                   "state = 'in_sync' AND last_error IS NULL"),
                     1);
    assert_int_equal(sql_value(pg, "SELECT count(*) FROM audit WHERE action = 'gateway.drift'"), 0);

    /* Under N + 1 both commit. */
    assert_int_equal(
        store_smoke_enqueue(st, epoch + 1, "m", 1, "periodic", "none", &t, &created, &err), MG_OK);
    assert_true(created);
    json_decref(t);
    assert_int_equal(sql_value(pg, "SELECT count(*) FROM smoke_tests"), 1);
    assert_int_equal(store_outbox_in_sync(st, epoch + 1, &list, &n, &err), MG_OK);
    assert_non_null(d = row_of(list, n, "gw-lead"));
    assert_int_equal(store_outbox_drift(st, d, "weights differ", &marked, &err), MG_OK);
    assert_true(marked);
    free_rows(list, n);
    assert_int_equal(sql_value(pg, "SELECT count(*) FROM audit WHERE action = 'gateway.drift' "
                                   "AND target = 'gw-lead'"),
                     1);

    /* An expired lease: nothing is queued. */
    assert_int_equal(sql_value(pg, "UPDATE leader_lease SET until_ms = 0 WHERE id = 1 "
                                   "RETURNING until_ms"),
                     0);
    assert_int_equal(
        store_smoke_enqueue(st, epoch + 1, "m", 2, "periodic", "none", &t, &created, &err),
        MG_EUNAVAIL);
    assert_int_equal(sql_value(pg, "SELECT count(*) FROM smoke_tests"), 1);
    PQfinish(pg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_stale_epoch_writes_nothing, teardown),
        cmocka_unit_test_teardown(test_stale_epoch_queues_and_marks_nothing, teardown),
    };
    return it_main_result(cmocka_run_group_tests(tests, NULL, NULL));
}
