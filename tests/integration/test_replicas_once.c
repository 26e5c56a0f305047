/*
 * test_replicas_once.c - what several replicas on one PostgreSQL database must do
 * exactly once (M9's hazards):
 *
 *   - replicas cold-starting at the same moment on an empty database migrate it once
 *     and create the first admin token once (one admin.token among them);
 *   - smoke tests queued over the replicas each run on exactly one of them, even
 *     when a replica restarts meanwhile (its start requeues only what it ran itself,
 *     never another replica's running test);
 *   - a replica whose host clock is an hour off agrees with the others on what time it
 *     is (the database's clock): it is listed alive, and a UI session another replica
 *     opened a moment ago is valid there, not an hour idle.
 *
 * Meaningful only on PostgreSQL (pg_integration_test_replicas_once); on SQLite every
 * test skips.
 */
#include "harness.h"
#include "sys.h"
#include "api.h"
#include "runner_common.h"

#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libpq-fe.h>

#define NREP 3

static char dir[IT_PATH_MAX];     /* scratch: data dirs, logs, the smoke script */
static struct mg_server *r[NREP]; /* the smoke test's replicas */
static struct it_proc cold[NREP]; /* the cold start's processes */

static void need_pg(void)
{
    if (!it_on_postgres()) {
        print_message("(skipped: replicas share a PostgreSQL database; this runs as "
                      "pg_integration_test_replicas_once)\n");
        skip();
    }
}

static int group_setup(void **state)
{
    (void)state;
    if (it_on_postgres())
        it_mkdtemp(dir, "once");
    return 0;
}

/* Whatever a test left running. */
static int test_teardown(void **state)
{
    (void)state;
    for (int i = NREP - 1; i >= 0; i--) { /* the joined ones first: the first drops the database */
        it_proc_stop(&cold[i]);
        it_server_free(&r[i]);
    }
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    if (dir[0] != '\0')
        it_rmtree(dir);
    return 0;
}

/* ---- the test cluster's PostgreSQL ------------------------------------------------ */

static const char *pg_user(void)
{
    struct passwd *pw;

    if (getuid() == 0)
        return "nobody"; /* scripts/pg-test.sh runs the server as nobody then */
    pw = getpwuid(getuid());
    return pw ? pw->pw_name : "postgres";
}

/* URL of database db on the test cluster. */
static const char *pg_url(const char *db, char *out, size_t n)
{
    return it_fmt(out, n, "postgresql:///%s?host=%s&user=%s", db, getenv("MG_PG_DIR"), pg_user());
}

/* Run sql on database db; the first column of its first row (malloc'd), or NULL. */
static char *pg_sql(const char *db, const char *sql)
{
    char url[IT_PATH_MAX + 128];
    PGconn *c = PQconnectdb(pg_url(db, url, sizeof(url)));
    PGresult *r;
    char *out = NULL;

    if (PQstatus(c) != CONNECTION_OK)
        fail_msg("libpq %s: %s", url, PQerrorMessage(c));
    r = PQexec(c, sql);
    if (PQresultStatus(r) != PGRES_TUPLES_OK && PQresultStatus(r) != PGRES_COMMAND_OK)
        fail_msg("%s: %s", sql, PQerrorMessage(c));
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0)
        out = strdup(PQgetvalue(r, 0, 0));
    PQclear(r);
    PQfinish(c);
    return out;
}

static long pg_count(const char *db, const char *sql)
{
    char *v = pg_sql(db, sql);
    long n = v ? atol(v) : -1;

    free(v);
    return n;
}

/* ---- 1. cold starts at once --------------------------------------------------------- */

static void test_cold_starts_migrate_and_bootstrap_once(void **state)
{
    (void)state;
    need_pg();
    for (int round = 0; round < 3; round++) {
        struct it_proc *p = cold;
        char db[64], url[IT_PATH_MAX + 128], sql[128], data[NREP][IT_PATH_MAX];
        int port[NREP], tokens = 0;

        it_fmt(db, sizeof(db), "once_%d_%d", (int)getpid(), round);
        free(pg_sql("postgres",
                    it_fmt(sql, sizeof(sql), "CREATE DATABASE %s OWNER " IT_PG_ROLE, db)));
        it_fmt(url, sizeof(url), "postgresql:///%s?host=%s&user=" IT_PG_ROLE, db,
               getenv("MG_PG_DIR"));
        memset(cold, 0, sizeof(cold));
        for (int i = 0; i < NREP; i++) {
            char listen[32], log[IT_PATH_MAX];

            it_fmt(data[i], sizeof(data[i]), "%s/cold-%d-%d", dir, round, i);
            if (mkdir(data[i], 0700) != 0)
                fail_msg("mkdir %s: %s", data[i], strerror(errno));
            port[i] = it_free_port();
            it_fmt(listen, sizeof(listen), "127.0.0.1:%d", port[i]);
            it_fmt(log, sizeof(log), "%s/cold-%d-%d.log", dir, round, i);
            /* All three at once: they race for the migrations and the first token. */
            it_proc_spawn(&p[i], "modelgated",
                          (const char *const[]){getenv("MODELGATED"), "--listen", listen,
                                                "--data-dir", data[i], "--database", url, NULL},
                          log);
        }
        for (int i = 0; i < NREP; i++)
            it_proc_wait_port(&p[i], port[i]); /* fails, with its log, if one gave up */
        for (int i = 0; i < NREP; i++) {
            char path[IT_PATH_MAX + 16];

            tokens += it_exists(it_fmt(path, sizeof(path), "%s/admin.token", data[i]));
        }
        print_message("round %d: three replicas started together; %d wrote admin.token\n", round,
                      tokens);
        assert_int_equal(tokens, 1);
        assert_int_equal(pg_count(db, "SELECT count(*) FROM tokens"), 1);
        assert_int_equal(pg_count(db, "SELECT count(*) FROM audit WHERE action = 'token.create'"),
                         1);
        assert_int_equal(pg_count(db, "SELECT count(*) FROM schema_migrations"),
                         pg_count(db, "SELECT max(version) FROM schema_migrations"));
        for (int i = 0; i < NREP; i++)
            it_proc_stop(&p[i]);
        free(pg_sql("postgres", it_fmt(sql, sizeof(sql), "DROP DATABASE %s", db)));
    }
}

/* ---- 2. smoke tests run once ---------------------------------------------------------- */

/* Notes in runs.log each run's start and end, with the version and where it ran (the
 * replica's data directory holds its model directories); slowly enough that runs overlap
 * a replica's restart. */
static const char ONCE_SH[] =
    "echo \"start $MODELGATE_VERSION $MODELGATE_MODEL_DIR\" >> @DIR@/runs.log\n"
    "sleep 1\n"
    "echo \"done $MODELGATE_VERSION $MODELGATE_MODEL_DIR\" >> @DIR@/runs.log\n"
    "printf '%s' '{\"latencies_ms\":[1,2,3],\"checks\":[]}' > \"$MODELGATE_OUTPUT\"\n";

#define SMOKE_VERSIONS 12

static void test_smoke_tests_run_once(void **state)
{
    char profile[IT_PATH_MAX * 2], blobs[IT_PATH_MAX + 8], blob_dir[IT_PATH_MAX],
        art[IT_DIGEST_LEN + 1], ids[SMOKE_VERSIONS][64], log[IT_PATH_MAX];
    json_int_t v[SMOKE_VERSIONS];
    char *runs, *ended, *line, *save = NULL;
    int started[SMOKE_VERSIONS + 1] = {0};
    bool on_restarted[SMOKE_VERSIONS + 1] = {false};

    (void)state;
    need_pg();
    rc_write_script(dir, "once.sh", ONCE_SH, NULL);
    rc_profile_arg(profile, sizeof(profile), dir, "once", "");
    it_fmt(blob_dir, sizeof(blob_dir), "%s/blobs", dir);
    if (mkdir(blob_dir, 0700) != 0 && errno != EEXIST)
        fail_msg("mkdir %s: %s", blob_dir, strerror(errno));
    it_fmt(blobs, sizeof(blobs), "file:%s", blob_dir);
    {
        const char *const args[] = {profile, "--blobs", blobs, NULL};

        r[0] = it_server_start(args);
        for (int i = 1; i < NREP; i++)
            r[i] = it_server_join(r[0], args);
    }
    it_upload(r[0], "smoke once bytes", 16, art);
    it_model_create(r[0], r[0]->admin_token, "once");
    for (int i = 0; i < SMOKE_VERSIONS; i++)
        v[i] = it_version_create(r[i % NREP], r[0]->admin_token, "once", art,
                                 rc_smoke_spec("once", 0, 0, NULL));
    /* Queued on every replica in turn; replica 2 restarts twice while they run. */
    for (int i = 0; i < SMOKE_VERSIONS; i++) {
        struct it_resp *resp =
            rc_smoke_post(r[i % NREP], r[0]->admin_token, "once", v[i], "{}", ids[i]);

        it_resp_free(r[i % NREP], &resp);
        if (i == SMOKE_VERSIONS / 3 || i == 2 * SMOKE_VERSIONS / 3)
            it_server_restart(r[1]); /* others' tests are running now */
    }
    for (int i = 0; i < SMOKE_VERSIONS; i++) {
        json_t *t = rc_smoke_wait(r[(i + 1) % NREP], "once", v[i], ids[i], 60000);

        if (strcmp(it_jstr(t, "state"), "passed") != 0)
            fail_msg("smoke test %s of version %lld: %s (%s), want passed; log: %s", ids[i],
                     (long long)v[i], it_jstr(t, "state"), rc_reason(t),
                     json_string_value(json_object_get(t, "log_tail")));
    }
    /* Each ran once, on some replica. A run that the restart of its own replica cut short
     * (before its result was recorded) runs again: its replica requeues what it ran. No
     * other run does: a start that requeued another replica's running test would make a
     * run on that replica followed by another. */
    runs = it_read_file(it_fmt(log, sizeof(log), "%s/runs.log", dir), NULL);
    ended = strdup(runs); /* for messages: runs is cut into lines below */
    if (ended == NULL)
        fail_msg("out of memory");
    for (line = strtok_r(runs, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
        char what[8], where[IT_PATH_MAX];
        long n = 0;

        if (sscanf(line, "%7s %ld %511s", what, &n, where) != 3 || n < 1 || n > SMOKE_VERSIONS)
            fail_msg("runs.log has a line from no test of ours: %s", line);
        if (strcmp(what, "start") != 0)
            continue;
        if (started[n]++ > 0 && !on_restarted[n])
            fail_msg("the smoke test of version %ld ran again after a run on a replica that "
                     "did not restart:\n%s",
                     n, ended);
        on_restarted[n] = strncmp(where, r[1]->data_dir, strlen(r[1]->data_dir)) == 0;
    }
    for (int i = 0; i < SMOKE_VERSIONS; i++) {
        if (started[v[i]] < 1)
            fail_msg("the smoke test of version %lld never ran", (long long)v[i]);
        if (started[v[i]] > 1)
            print_message("version %lld's test, cut short by its replica's restart, ran "
                          "again\n",
                          (long long)v[i]);
    }
    free(ended);
    free(runs);
}

/* ---- 3. a host clock an hour off ------------------------------------------------------- */

static void test_skewed_clock(void **state)
{
    char cookie[256], origin[64], host[64];
    const char *set_cookie;
    struct it_resp *resp;
    json_t *c;

    (void)state;
    need_pg();
    r[0] = it_server_start(NULL);
    setenv("MODELGATED_TEST_CLOCK_SKEW_MS", "3600000", 1); /* replica 2's host: an hour ahead */
    r[1] = it_server_join(r[0], NULL);
    unsetenv("MODELGATED_TEST_CLOCK_SKEW_MS");

    /* Listed alive by the other: heartbeats are on the database's clock. */
    resp = it_get(r[0], "/api/v1/cluster", r[0]->admin_token);
    it_expect_status(r[0], resp, 200);
    c = it_jarr(resp->json, "replicas");
    if (json_array_size(c) != 2)
        fail_msg("replica 1 lists %zu live replicas, want 2: %s", json_array_size(c), resp->body);
    it_resp_free(r[0], &resp);

    /* A UI session opened on replica 1 is checked on replica 2 (idle 30 min at most). */
    {
        char body[256];
        const char *const hdrs[] = {
            it_fmt(origin, sizeof(origin), "Origin: http://127.0.0.1:%d", r[0]->port),
            it_fmt(host, sizeof(host), "Host: 127.0.0.1:%d", r[0]->port), NULL};

        it_fmt(body, sizeof(body), "{\"token\":\"%s\"}", r[0]->admin_token);
        resp = it_request_h(r[0], "POST", "/ui/session", NULL, "application/json", body,
                            strlen(body), hdrs);
        it_expect_status(r[0], resp, 200);
        set_cookie = it_header(resp, "Set-Cookie");
        if (set_cookie == NULL)
            fail_msg("signing in set no cookie");
        it_fmt(cookie, sizeof(cookie), "Cookie: %.*s", (int)strcspn(set_cookie, ";"), set_cookie);
        it_resp_free(r[0], &resp);
    }
    {
        const char *const hdrs[] = {cookie, NULL};

        resp = it_request_h(r[1], "GET", "/ui/session", NULL, NULL, NULL, 0, hdrs);
        if (resp->status != 200)
            fail_msg("a session opened a moment ago on replica 1 answers %ld on replica 2, "
                     "whose host clock is an hour ahead: %s",
                     resp->status, resp->body);
        it_resp_free(r[1], &resp);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_cold_starts_migrate_and_bootstrap_once, test_teardown),
        cmocka_unit_test_teardown(test_smoke_tests_run_once, test_teardown),
        cmocka_unit_test_teardown(test_skewed_clock, test_teardown),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
