/*
 * test_database_outage.c - modelgated on PostgreSQL when the database is not
 * there: at start it exits with one line naming the database (never its
 * password); while serving, losing the database gives 503 unavailable (never
 * a wrong answer, nothing half-written), and the server recovers by itself
 * once the database is back, without a restart; a restart of the database between reads
 * costs no read a 503.
 *
 * Runs its own PostgreSQL (scripts/pg-test.sh), so killing it disturbs no
 * other test; skipped where PostgreSQL's server binaries are not installed
 * (a failure instead with MG_REQUIRE_ALL=1).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api.h"
#include "harness.h"
#include "sys.h"

static char pgdir[IT_PATH_MAX];

/* scripts/pg-test.sh CMD pgdir [DB]; its stdout (first line) into out when given. */
static int pg(const char *cmd, const char *db, char *out, size_t n)
{
    char line[IT_PATH_MAX * 2 + 128];
    FILE *p;
    int status;

    it_fmt(line, sizeof(line), "bash '%s/scripts/pg-test.sh' %s '%s' %s 2>&1",
           getenv("MG_SOURCE_DIR"), cmd, pgdir, db ? db : "");
    if ((p = popen(line, "r")) == NULL)
        fail_msg("popen %s", line);
    if (out != NULL && fgets(out, (int)n, p) != NULL)
        out[strcspn(out, "\n")] = '\0';
    while (fgets(line, sizeof(line), p) != NULL)
        print_message("pg-test.sh: %s", line);
    status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int setup(void **state)
{
    (void)state;
    if (access("/usr/lib/postgresql", X_OK) != 0) {
        if (it_require_all())
            fail_msg("PostgreSQL's server is not installed (apt-get install postgresql)");
        return 0;
    }
    it_mkdtemp(pgdir, "outage-pg"); /* pg-test.sh hands it to the server's user */
    if (pg("start", NULL, NULL, 0) != 0)
        fail_msg("could not start a private PostgreSQL in %s", pgdir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (pgdir[0] != '\0')
        pg("stop", NULL, NULL, 0);
    return 0;
}

static void need_pg(void)
{
    if (pgdir[0] == '\0')
        it_skip("PostgreSQL's server is not installed");
}

/* An unreachable database at start: exit 1 with one line naming it, no password. */
static void test_unreachable_at_start(void **state)
{
    char dir[IT_PATH_MAX], log[IT_PATH_MAX], data[IT_PATH_MAX], *text;
    struct it_proc p;
    int status = 0;
    int64_t deadline = it_deadline(20000);

    (void)state;
    need_pg();
    it_mkdtemp(dir, "outage-start");
    it_fmt(data, sizeof(data), "%s/data", dir);
    it_fmt(log, sizeof(log), "%s/log", dir);
    it_proc_spawn(&p, "modelgated",
                  (const char *const[]){getenv("MODELGATED"), "--data-dir", data, "--listen",
                                        "127.0.0.1:0", "--database",
                                        "postgresql://mg:hunter2secret@127.0.0.1:1/registry"
                                        "?connect_timeout=5",
                                        NULL},
                  log);
    while (!it_proc_exited(&p, &status)) {
        if (it_now_ms() > deadline)
            fail_msg("modelgated kept running without its database");
        it_pause_ms(20);
    }
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 1);
    text = it_read_file(log, NULL);
    print_message("start-up says: %s", text);
    assert_non_null(strstr(text, "cannot connect to the database"));
    assert_non_null(strstr(text, "registry on 127.0.0.1:1"));
    assert_null(strstr(text, "hunter2secret"));
    assert_int_equal(strchr(text, '\n') - text + 1, (long)strlen(text)); /* one line */
    free(text);
    it_rmtree(dir);
}

/* Lost while serving: 503 unavailable for reads and writes, nothing written; back by
 * itself once the database is. */
static void test_lost_while_serving(void **state)
{
    char url[IT_PATH_MAX + 64], arg[IT_PATH_MAX + 64];
    struct mg_server *s;
    struct it_resp *r;
    int64_t deadline;

    (void)state;
    need_pg();
    if (pg("createdb", "outage", url, sizeof(url)) != 0)
        fail_msg("createdb failed");
    it_fmt(arg, sizeof(arg), "%s", url);
    s = it_server_start((const char *const[]){"--database", arg, NULL});
    it_model_create(s, s->admin_token, "before");

    pg("kill", NULL, NULL, 0);
    deadline = it_deadline(10000);
    for (;;) { /* the first request may still find its connection's backend dying */
        r = it_get(s, "/api/v1/models", s->admin_token);
        if (r->status == 503 || it_now_ms() > deadline)
            break;
        it_resp_free(s, &r);
        it_pause_ms(20);
    }
    it_expect_error(s, r, 503, "unavailable");
    it_resp_free(s, &r);
    r = it_get(s, "/api/v1/models/before", s->admin_token);
    it_expect_error(s, r, 503, "unavailable");
    it_resp_free(s, &r);
    r = it_jreq(s, "POST", "/api/v1/models", s->admin_token, "{\"name\":\"during\"}");
    it_expect_error(s, r, 503, "unavailable");
    it_resp_free(s, &r);
    r = it_get(s, "/readyz", NULL);
    it_expect_error(s, r, 503, "unavailable");
    it_resp_free(s, &r);
    /* A token not seen lately cannot be checked: that is 503 too, never 401 (which would
     * tell a client to throw a good token away). */
    r = it_get(s, "/api/v1/whoami", "mgt_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA");
    it_expect_error(s, r, 503, "unavailable");
    it_resp_free(s, &r);

    if (pg("restart", NULL, NULL, 0) != 0)
        fail_msg("PostgreSQL did not come back");
    deadline = it_deadline(20000);
    for (;;) {
        r = it_get(s, "/readyz", NULL);
        if (r->status == 200)
            break;
        if (it_now_ms() > deadline)
            fail_msg("not ready again after the database came back: %ld %s", r->status, r->body);
        it_resp_free(s, &r);
        it_pause_ms(50);
    }
    it_resp_free(s, &r);
    r = it_get(s, "/api/v1/models/before", s->admin_token);
    it_expect_status(s, r, 200);
    it_resp_free(s, &r);
    r = it_get(s, "/api/v1/models/during", s->admin_token);
    it_expect_error(s, r, 404, "not_found"); /* the refused write left nothing */
    it_resp_free(s, &r);
    r = it_get(s, "/api/v1/audit/verify", s->admin_token);
    it_expect_status(s, r, 200);
    assert_true(json_is_true(json_object_get(r->json, "ok")));
    it_resp_free(s, &r);
    it_model_create(s, s->admin_token, "after");
    it_server_stop(s);
    it_server_free(&s);
}

/* A restart of PostgreSQL between reads ends the readers' idle sessions. The next read
 * answers from a new session at once, never 503: the version read and the LKG read (each one
 * statement outside a transaction, DB_READ_ONE) run their statement once more on a new
 * session, and the alias read's BEGIN (a read transaction) reconnects. */
/* Cached reads that looked their answer up (a hit or a miss): 0 when the model's epoch was
 * not known (srv_reply_cached then reads past the cache). */
static unsigned long long cache_lookups(struct mg_server *s)
{
    return it_metric(s, "modelgate_response_cache_lookups_total{result=\"hit\"}") +
           it_metric(s, "modelgate_response_cache_lookups_total{result=\"miss\"}");
}

static void restart_between_reads(const char *db, const char *cache)
{
    bool cached = strcmp(cache, "on") == 0;
    char url[IT_PATH_MAX + 64], arg[IT_PATH_MAX + 64], art[IT_DIGEST_LEN + 1];
    const char *const paths[] = {"/api/v1/models/m/versions/1",
                                 "/api/v1/models/m/aliases/production/last-known-good",
                                 "/api/v1/models/m/aliases/production"};
    struct mg_server *s;
    struct it_resp *r;

    need_pg();
    if (pg("createdb", db, url, sizeof(url)) != 0)
        fail_msg("createdb failed");
    it_fmt(arg, sizeof(arg), "%s", url);
    s = it_server_start((const char *const[]){"--database", arg, "--response-cache", cache, NULL});
    it_model_create(s, s->admin_token, "m");
    r = it_upload(s, "restart bytes", 13, art);
    it_resp_free(s, &r);
    assert_int_equal(it_version_create(s, s->admin_token, "m", art, NULL), 1);
    assert_int_equal(it_alias_set(s, s->admin_token, "m", "production", "{\"version\":1}"), 1);
    for (int round = 0; round < 2; round++) {
        for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
            unsigned long long looked = 0;

            r = it_get(s, paths[i], s->admin_token); /* the readers' sessions, opened */
            it_expect_status(s, r, 200);
            it_resp_free(s, &r);
            if (cached)
                looked = cache_lookups(s);
            if (pg("restart", NULL, NULL, 0) != 0)
                fail_msg("PostgreSQL did not come back");
            r = it_get(s, paths[i], s->admin_token);
            it_expect_status(s, r, 200);
            assert_true(json_is_integer(json_object_get(r->json, "version")) ||
                        json_is_array(json_object_get(r->json, "routes")));
            it_resp_free(s, &r);
            /* The version and LKG reads are cached reads: the one after the restart knew
             * its model's epoch (read from the database when the restart took the lease
             * away) and looked its answer up, where a failed epoch read skips the cache. */
            if (cached && i < 2 && cache_lookups(s) != looked + 1)
                fail_msg("%s after a restart: %llu cache lookups, not 1 (the model's epoch "
                         "could not be read)",
                         paths[i], cache_lookups(s) - looked);
        }
    }
    it_server_stop(s);
    it_server_free(&s);
}

static void test_restart_between_reads(void **state)
{
    (void)state;
    restart_between_reads("restarts", "off");
}

/* With the response cache on, a read first learns the model's epoch, from the database
 * (model_epochs, one statement outside a transaction) when the restart took the replica's
 * lease away: that read too runs once more on a new session, and the answer is looked up in
 * the cache (counted) rather than read past it. */
static void test_restart_between_cached_reads(void **state)
{
    (void)state;
    restart_between_reads("restarts_cached", "on");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unreachable_at_start),
        cmocka_unit_test(test_lost_while_serving),
        cmocka_unit_test(test_restart_between_reads),
        cmocka_unit_test(test_restart_between_cached_reads),
    };

    return it_main_result(cmocka_run_group_tests(tests, setup, teardown));
}
