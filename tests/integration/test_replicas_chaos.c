/*
 * test_replicas_chaos.c - a bounded nemesis over two replicas on one PostgreSQL (M27):
 * rounds of alias writes and concurrent promotions on whichever replicas run, each round
 * ended by one fault in turn: kill -9 of a replica (restarted), a SIGSTOP of a replica
 * past the leader lease (woken again), a restart of PostgreSQL. A real HAProxy is the
 * gateway of every alias, with the reconciler on. Then the checker:
 *
 *   - every acknowledged write (a 200 with its generation) is in its alias's history with
 *     the routes it wrote, and generations are dense (1..newest, no gap, no repeat);
 *   - versions are numbered densely;
 *   - at most one active promotion per alias;
 *   - the audit chain verifies;
 *   - HAProxy ends at each alias's newest generation, every delivery in sync;
 *   - exactly one replica leads.
 *
 * Meaningful only on PostgreSQL (pg_integration_test_replicas_chaos, run serially: it
 * restarts the suite's PostgreSQL); on SQLite it skips.
 */
#include "harness.h"
#include "sys.h"
#include "api.h"
#include "push_common.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpq-fe.h>

#define ROUNDS 6
#define WRITES 8
#define NALIAS 2
#define PAUSE_MS 7000 /* past the leader lease (5 s), short of being taken for dead */

static const char *const ALIASES[NALIAS] = {"a", "b"};

static char dir[IT_PATH_MAX];
static struct it_proc hap;
static int stats_port;
static struct mg_server *rep[2];

/* What the clients were told: for each alias and generation, the version it routes to
 * (0: nothing acknowledged at that generation). */
#define MAX_GEN 256
static int acked[NALIAS][MAX_GEN];

static void need_pg(void)
{
    if (!it_on_postgres())
        it_not_applicable("replicas share a PostgreSQL database; this runs as "
                          "pg_integration_test_replicas_chaos");
}

static void haproxy_start(void)
{
    char cfg[2048], path[IT_PATH_MAX], log[IT_PATH_MAX];
    size_t len = 0;

    len += (size_t)snprintf(cfg + len, sizeof(cfg) - len,
                            "global\n"
                            "    stats socket ipv4@127.0.0.1:%d level admin\n"
                            "    nbthread 1\n"
                            "defaults\n"
                            "    mode http\n"
                            "    timeout connect 2s\n"
                            "    timeout client 10s\n"
                            "    timeout server 10s\n",
                            stats_port);
    for (int a = 0; a < NALIAS; a++)
        len += (size_t)snprintf(cfg + len, sizeof(cfg) - len,
                                "backend be_chaos_%s\n"
                                "    server v1 127.0.0.1:9 weight 1\n"
                                "    server v2 127.0.0.1:9 weight 1\n"
                                "    server v3 127.0.0.1:9 weight 1\n",
                                ALIASES[a]);
    it_write_file(it_fmt(path, sizeof(path), "%s/haproxy.cfg", dir), cfg);
    it_fmt(log, sizeof(log), "%s/haproxy.log", dir);
    it_proc_spawn(&hap, "haproxy", (const char *const[]){PC_HAPROXY, "-db", "-f", path, NULL}, log);
    it_proc_wait_port(&hap, stats_port);
}

static int setup(void **state)
{
    (void)state;
    if (!it_on_postgres())
        return 0;
    it_mkdtemp(dir, "chaos");
    stats_port = it_free_port();
    haproxy_start();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 1; i >= 0; i--) { /* the joined one first: the first drops the database */
        if (rep[i] && rep[i]->pid > 0)
            kill(rep[i]->pid, SIGCONT);
        it_server_free(&rep[i]);
    }
    it_proc_stop(&hap);
    if (dir[0])
        it_rmtree(dir);
    return 0;
}

static void pg_restart(void)
{
    const char *src = getenv("MG_SOURCE_DIR"), *pgdir = getenv("MG_PG_DIR");
    char cmd[IT_PATH_MAX * 3];
    int rc;

    if (src == NULL || pgdir == NULL)
        fail_msg("MG_SOURCE_DIR and MG_PG_DIR are needed to restart PostgreSQL");
    rc = system(it_fmt(cmd, sizeof(cmd), "bash '%s/scripts/pg-test.sh' restart '%s'", src, pgdir));
    if (rc != 0)
        fail_msg("%s: exit status 0x%x", cmd, rc);
}

/* The first column of the first row of sql on the replicas' database, as a number. */
static long pg_long(const char *sql)
{
    PGconn *pg = PQconnectdb(rep[0]->database);
    PGresult *res;
    long v = -1;

    if (PQstatus(pg) != CONNECTION_OK)
        fail_msg("libpq: %s", PQerrorMessage(pg));
    res = PQexec(pg, sql);
    if (PQresultStatus(res) != PGRES_TUPLES_OK)
        fail_msg("%s: %s", sql, PQerrorMessage(pg));
    if (PQntuples(res) > 0 && !PQgetisnull(res, 0, 0))
        v = strtol(PQgetvalue(res, 0, 0), NULL, 10);
    PQclear(res);
    PQfinish(pg);
    return v;
}

static bool leads(int i)
{
    struct it_resp *r = it_get(rep[i], "/api/v1/cluster", rep[i]->admin_token);
    bool yes = r->status == 200 && json_is_true(json_object_get(r->json, "leader"));

    it_resp_free(rep[i], &r);
    return yes;
}

/* One alias write on replica i: acknowledged (200) or not. */
static void write_alias(int i, int a, int version)
{
    char path[128], body[32];
    struct it_resp *r;

    it_fmt(path, sizeof(path), "/api/v1/models/chaos/aliases/%s", ALIASES[a]);
    it_fmt(body, sizeof(body), "{\"version\":%d}", version);
    r = it_jreq(rep[i], "PUT", path, rep[i]->admin_token, body);
    if (r->status == 200) {
        json_int_t g = it_jint(r->json, "generation");
        json_int_t v = it_jint(json_array_get(it_jarr(r->json, "routes"), 0), "version");

        if (g <= 0 || g >= MAX_GEN)
            fail_msg("generation %lld out of the test's range", (long long)g);
        if (v != version)
            fail_msg("PUT {\"version\":%d} answered routes of v%lld", version, (long long)v);
        if (acked[a][g] != 0)
            fail_msg("generation %lld of alias %s acknowledged twice", (long long)g, ALIASES[a]);
        acked[a][g] = version;
    }
    it_resp_free(rep[i], &r);
}

/* Several promotions of the protected alias at once: at most one may be created. */
static void promote_burst(int i)
{
    struct it_spec specs[6];
    struct it_resp *out[6];
    char body[6][128];
    int created = 0;

    for (int k = 0; k < 6; k++) {
        it_fmt(body[k], sizeof(body[k]),
               "{\"model\":\"chaos\",\"version\":%d,\"alias\":\"p\",\"reason\":\"chaos\"}",
               k % 3 + 1);
        specs[k] =
            (struct it_spec){"POST",  "/api/v1/promotions", rep[i]->admin_token, "application/json",
                             body[k], strlen(body[k])};
    }
    it_request_parallel(rep[i], 6, specs, out);
    for (int k = 0; k < 6; k++)
        created += out[k]->status == 201;
    if (created > 1)
        fail_msg("%d promotions of chaos/p created at once", created);
    it_release(rep[i]);
}

static void round_writes(const bool *up, int round)
{
    for (int w = 0; w < WRITES; w++) {
        int i = up[w % 2] ? w % 2 : 1 - w % 2;

        write_alias(i, w % NALIAS, (round + w) % 3 + 1);
    }
    promote_burst(up[0] ? 0 : 1);
}

/* HAProxy holds version v at 100 and the others at 0 in alias a's backend? */
static bool at_version(int a, int v)
{
    char be[32];

    it_fmt(be, sizeof(be), "be_chaos_%s", ALIASES[a]);
    for (int s = 1; s <= 3; s++) {
        char name[8];

        if (pc_haproxy_weight(stats_port, be, it_fmt(name, sizeof(name), "v%d", s)) !=
            (s == v ? 100 : 0))
            return false;
    }
    return true;
}

static void check(void)
{
    int64_t deadline;
    int n = 0, who = -1;

    /* One leader among the replicas, the same for 1.5 s. */
    deadline = it_deadline(20000);
    for (int64_t since = it_now_ms(), last = -1;;) {
        n = 0;
        for (int i = 0; i < 2; i++)
            if (leads(i)) {
                n++;
                who = i;
            }
        if (n != 1 || who != last) {
            last = n == 1 ? who : -1;
            since = it_now_ms();
        } else if (it_now_ms() - since >= 1500) {
            break;
        }
        if (it_now_ms() > deadline)
            fail_msg("%d replicas say they lead", n);
        it_pause_ms(50);
    }
    /* Acknowledged writes present, generations dense. */
    for (int a = 0; a < NALIAS; a++) {
        struct it_resp *r;
        json_t *items, *e;
        json_int_t newest;
        bool seen[MAX_GEN] = {false};
        char path[160];
        size_t k;

        it_fmt(path, sizeof(path), "/api/v1/models/chaos/aliases/%s/history?limit=1000",
               ALIASES[a]);
        r = it_get(rep[0], path, rep[0]->admin_token);
        it_expect_status(rep[0], r, 200);
        items = it_jarr(r->json, "items");
        newest = it_jint(json_array_get(items, 0), "generation");
        json_array_foreach(items, k, e)
        {
            json_int_t g = it_jint(e, "generation");
            json_int_t v = json_integer_value(
                json_object_get(json_array_get(json_object_get(e, "routes"), 0), "version"));

            if (g <= 0 || g >= MAX_GEN || seen[g])
                fail_msg("alias %s: generation %lld repeated or out of range", ALIASES[a],
                         (long long)g);
            seen[g] = true;
            if (acked[a][g] != 0 && acked[a][g] != v)
                fail_msg("alias %s: acknowledged generation %lld routed v%d, history says v%lld",
                         ALIASES[a], (long long)g, acked[a][g], (long long)v);
        }
        for (json_int_t g = 1; g <= newest; g++)
            if (!seen[g])
                fail_msg("alias %s: generation %lld missing (newest %lld)", ALIASES[a],
                         (long long)g, (long long)newest);
        for (int g = (int)newest + 1; g < MAX_GEN; g++)
            if (acked[a][g] != 0)
                fail_msg("alias %s: acknowledged generation %d lost", ALIASES[a], g);
        /* The gateway at the newest generation. */
        {
            int v = (int)json_integer_value(json_object_get(
                json_array_get(json_object_get(json_array_get(items, 0), "routes"), 0), "version"));

            it_resp_free(rep[0], &r);
            r = pc_wait_delivery(rep[0], "hap", "chaos", ALIASES[a], newest, "in_sync", 30000);
            it_resp_free(rep[0], &r);
            deadline = it_deadline(10000);
            while (!at_version(a, v)) {
                if (it_now_ms() > deadline)
                    fail_msg("alias %s: HAProxy is not at generation %lld (v%d)", ALIASES[a],
                             (long long)newest, v);
                it_pause_ms(50);
            }
            print_message("alias %s: generations 1..%lld dense, acknowledged ones present, "
                          "HAProxy at v%d\n",
                          ALIASES[a], (long long)newest, v);
        }
    }
    /* Versions dense; one active promotion at most; the audit verifies. */
    assert_int_equal(pg_long("SELECT count(*) FROM versions v JOIN models m ON m.id = "
                             "v.model_id WHERE m.name = 'chaos'"),
                     pg_long("SELECT max(version) FROM versions v JOIN models m ON m.id = "
                             "v.model_id WHERE m.name = 'chaos'"));
    {
        long most = pg_long("SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM "
                            "promotions WHERE state NOT IN ('succeeded', 'rejected', "
                            "'aborted', 'rolled_back') GROUP BY model_id, alias) t");
        if (most > 1)
            fail_msg("%ld active promotions of one alias", most);
    }
    {
        struct it_resp *r = it_get(rep[0], "/api/v1/audit/verify", rep[0]->admin_token);

        it_expect_status(rep[0], r, 200);
        if (!json_is_true(json_object_get(r->json, "ok")))
            fail_msg("audit chain does not verify: %s", r->body);
        it_resp_free(rep[0], &r);
    }
}

static void test_bounded_nemesis(void **state)
{
    const char *const args[] = {"--push-backoff-base-ms",
                                "50",
                                "--push-backoff-max-ms",
                                "400",
                                "--reconcile-interval-ms",
                                "500",
                                NULL};
    char art[IT_DIGEST_LEN + 1], body[512];
    bool up[2] = {true, true};

    (void)state;
    need_pg();
    rep[0] = it_server_start(args);
    rep[1] = it_server_join(rep[0], args);
    it_upload(rep[0], "chaos model bytes", 17, art);
    it_model_create(rep[0], rep[0]->admin_token, "chaos");
    for (int v = 1; v <= 3; v++)
        assert_int_equal(it_version_create(rep[0], rep[0]->admin_token, "chaos", art, NULL), v);
    pc_gateway_put(rep[0], "hap",
                   it_fmt(body, sizeof(body),
                          "{\"kind\":\"haproxy\",\"address\":\"127.0.0.1:%d\","
                          "\"backend\":\"be_{model}_{alias}\",\"server\":\"v{version}\","
                          "\"models\":[\"chaos\"],\"aliases\":[\"a\",\"b\"]}",
                          stats_port));
    it_alias_to(rep[0], rep[0]->admin_token, "chaos", "p", 1, 0);
    it_policy_put(rep[0], "chaos", "p", "{\"rollout\":{\"steps\":[50,100],\"bake_seconds\":1}}");
    it_release(rep[0]);

    for (int round = 0; round < ROUNDS; round++) {
        int victim = round % 2;

        round_writes(up, round);
        switch (round % 3) {
        case 0: /* kill -9, then restart */
            it_server_kill9(rep[victim]);
            up[victim] = false;
            round_writes(up, round);
            it_server_restart(rep[victim]);
            up[victim] = true;
            print_message("round %d: killed and restarted replica %d\n", round, victim);
            break;
        case 1: { /* paused past the leader lease */
            int64_t until;

            if (kill(rep[victim]->pid, SIGSTOP) != 0)
                fail_msg("SIGSTOP: %s", strerror(errno));
            up[victim] = false;
            until = it_now_ms() + PAUSE_MS;
            round_writes(up, round);
            while (it_now_ms() < until)
                it_pause_ms(50);
            if (kill(rep[victim]->pid, SIGCONT) != 0)
                fail_msg("SIGCONT: %s", strerror(errno));
            up[victim] = true;
            print_message("round %d: paused replica %d for %d ms\n", round, victim, PAUSE_MS);
            break;
        }
        default: /* PostgreSQL restarted */
            pg_restart();
            round_writes(up, round);
            print_message("round %d: restarted PostgreSQL\n", round);
            break;
        }
    }
    check();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bounded_nemesis),
    };

    return it_main_result(cmocka_run_group_tests(tests, setup, teardown));
}
