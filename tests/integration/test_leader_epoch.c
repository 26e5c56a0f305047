/*
 * test_leader_epoch.c - leader-only jobs commit under the leader epoch they started with
 * (M27): the garbage collector's and retention's claims and the sweeps of dead replicas'
 * work, the analysis' intervals and the background rescan's reports check the lease (holder, epoch,
 * expiry) in their own transaction. A store of this process joins a daemon's PostgreSQL database;
 * the lease is moved to this store at the next epoch directly in the database, as a takeover would:
 * a call with the epoch before (a job that checked leadership before the takeover) changes nothing
 * and answers MG_EUNAVAIL; the same call at the new epoch commits. On SQLite (one process, always
 * the leader) every epoch is the leader's: the calls commit as before.
 */
#include "harness.h"
#include "sys.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"

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

    assert_non_null(mkdtemp(dir));
    memset(&opt, 0, sizeof(opt));
    opt.data_dir = dir;
    opt.database = database;
    opt.read_conns = 2;
    store_archive_limits_default(&opt.archive);
    if (store_open(&opt, &st, &err) != MG_OK)
        fail_msg("store_open: %s", err.message);
}

/* One value of the first row of sql on the daemon's database, or -1 for no row. */
static long long pg_value(PGconn *pg, const char *sql)
{
    PGresult *r = PQexec(pg, sql);
    long long v = -1;

    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        fail_msg("%s: %s", sql, PQerrorMessage(pg));
    if (PQntuples(r) > 0)
        v = atoll(PQgetvalue(r, 0, 0));
    PQclear(r);
    return v;
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
    assert_int_equal(pg_value(pg, sql), 1);
}

static long long scanned(PGconn *pg, const char *digest)
{
    char sql[256];

    snprintf(sql, sizeof(sql),
             "SELECT count(*) FROM blobs WHERE digest = '%s' AND scan IS NOT NULL", digest);
    return pg_value(pg, sql);
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
    char sql[256], digest[80];
    json_t *report = NULL;
    long long epoch = -1;
    int64_t deadline, now;
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
    /* The daemon leads under some epoch N. */
    deadline = it_deadline(30000);
    while ((epoch = pg_value(pg, "SELECT epoch FROM leader_lease WHERE id = 1")) < 1 &&
           it_now_ms() < deadline)
        it_pause_ms(100);
    assert_true(epoch >= 1);
    /* A takeover: this store holds the lease now, at N + 1, for ten minutes. */
    snprintf(sql, sizeof(sql),
             "UPDATE leader_lease SET holder = '%s', epoch = %lld, until_ms = until_ms + 600000 "
             "WHERE id = 1 AND epoch = %lld RETURNING epoch",
             store_replica_id(st), epoch + 1, epoch);
    assert_int_equal(pg_value(pg, sql), epoch + 1);
    now = store_clock_ms(st);

    /* Jobs decided under N: nothing commits. */
    assert_int_equal(store_job_claim(st, "gc-stale", epoch, now, 0, &claimed, &err), MG_EUNAVAIL);
    assert_false(claimed);
    assert_int_equal(pg_value(pg, "SELECT count(*) FROM jobs WHERE name = 'gc-stale'"), 0);
    models = NULL;
    assert_int_equal(store_retention_claim(st, epoch, now, 0, &models, &err), MG_EUNAVAIL);
    assert_null(models);
    assert_int_equal(store_smoke_recover(st, epoch, &err), MG_EUNAVAIL);
    assert_int_equal(store_outbox_recover(st, epoch, &err), MG_EUNAVAIL);
    rec.leader_epoch = epoch; /* an analysis interval measured before the takeover */
    assert_int_equal(store_interval_record(st, &rec, &recorded, &err), MG_EUNAVAIL);
    assert_false(recorded);
    assert_int_equal(pg_value(pg, "SELECT count(*) FROM promotion_intervals"), 0);
    unscanned_blob(pg, digest); /* the background rescan of a blob stored before the scanner */
    assert_int_equal(store_blob_scan_backfill(st, epoch, "modelgated", digest, &report, &err),
                     MG_EUNAVAIL);
    assert_null(report);
    assert_int_equal(scanned(pg, digest), 0);

    /* The same work under N + 1 commits. */
    assert_int_equal(store_job_claim(st, "gc-current", epoch + 1, now, 0, &claimed, &err), MG_OK);
    assert_true(claimed);
    assert_int_equal(pg_value(pg, "SELECT count(*) FROM jobs WHERE name = 'gc-current'"), 1);
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
    assert_int_equal(pg_value(pg, "UPDATE leader_lease SET until_ms = 0 WHERE id = 1 "
                                  "RETURNING until_ms"),
                     0);
    assert_int_equal(store_job_claim(st, "gc-expired", epoch + 1, now, 0, &claimed, &err),
                     MG_EUNAVAIL);
    assert_int_equal(pg_value(pg, "SELECT count(*) FROM jobs WHERE name = 'gc-expired'"), 0);
    PQfinish(pg);
    json_decref(metrics);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stale_epoch_writes_nothing),
    };
    return it_main_result(cmocka_run_group_tests(tests, NULL, teardown));
}
