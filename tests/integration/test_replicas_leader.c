/*
 * test_replicas_leader.c - leadership is a lease (M27): two replicas on one PostgreSQL; the
 * leader is SIGSTOPped for 15 s in the middle of a rollout's bake. The other replica takes
 * the leadership over while the old one is still paused (the lease runs out on the
 * database's clock; a paused process cannot hold it the way it held a session's advisory
 * lock), and the rollout's next step fires there. Woken, the old leader knows it no longer
 * leads: it reports leader false and adds nothing to the promotion.
 *
 * Meaningful only on PostgreSQL (pg_integration_test_replicas_leader); on SQLite it skips.
 */
#include "harness.h"
#include "sys.h"
#include "api.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAUSE_MS 15000

static struct mg_server *rep[2];

static void need_pg(void)
{
    if (!it_on_postgres())
        it_not_applicable("replicas share a PostgreSQL database; this runs as "
                          "pg_integration_test_replicas_leader");
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 1; i >= 0; i--) { /* the joined one first: the first drops the database */
        if (rep[i] && rep[i]->pid > 0)
            kill(rep[i]->pid, SIGCONT);
        it_server_free(&rep[i]);
    }
    return 0;
}

/* Does replica i say it leads? */
static bool leads(int i)
{
    struct it_resp *r = it_get(rep[i], "/api/v1/cluster", rep[i]->admin_token);
    bool yes;

    it_expect_status(rep[i], r, 200);
    yes = json_is_true(json_object_get(r->json, "leader"));
    it_resp_free(rep[i], &r);
    return yes;
}

/* The one replica that says it leads, the same for 1.5 s (only those not paused asked). */
static int one_leader(int64_t timeout_ms, int paused)
{
    int64_t deadline = it_deadline(timeout_ms), since = it_now_ms();
    int last = -1;

    for (;;) {
        int n = 0, who = -1;

        for (int i = 0; i < 2; i++) {
            if (i != paused && leads(i)) {
                n++;
                who = i;
            }
        }
        if (n != 1 || who != last) {
            last = n == 1 ? who : -1;
            since = it_now_ms();
        } else if (it_now_ms() - since >= 1500) {
            return who;
        }
        if (it_now_ms() > deadline)
            fail_msg("no single leader among the running replicas (%d say so)", n);
        it_pause_ms(50);
    }
}

static size_t events_of(int i, const char *id, char *state, size_t n)
{
    struct it_resp *r = it_promotion_get(rep[i], rep[i]->admin_token, id);
    size_t k = json_array_size(it_jarr(r->json, "events"));

    snprintf(state, n, "%s", it_jstr(r->json, "state"));
    it_resp_free(rep[i], &r);
    return k;
}

static void test_paused_leader_is_replaced_and_does_not_act(void **state)
{
    char art[IT_DIGEST_LEN + 1], id[64], st[32];
    int leader, other;
    int64_t t_stop, t_over = 0, t_done = 0, step_at;
    size_t events;
    struct it_resp *r;

    (void)state;
    need_pg();
    rep[0] = it_server_start(NULL);
    rep[1] = it_server_join(rep[0], NULL);
    it_upload(rep[0], "leader test model bytes", 23, art);
    it_model_create(rep[0], rep[0]->admin_token, "lmodel");
    it_version_create(rep[0], rep[0]->admin_token, "lmodel", art, NULL);
    it_version_create(rep[0], rep[0]->admin_token, "lmodel", art, NULL);
    it_alias_to(rep[0], rep[0]->admin_token, "lmodel", "prod", 1, 0);
    it_policy_put(rep[0], "lmodel", "prod",
                  "{\"rollout\":{\"steps\":[50,100],\"bake_seconds\":9}}");

    leader = one_leader(15000, -1);
    other = 1 - leader;
    r = it_promote(rep[other], rep[other]->admin_token, "lmodel", 2, "prod", id);
    assert_string_equal(it_jstr(r->json, "state"), "rolling_out");
    assert_int_equal(it_jint(it_jobj(r->json, "rollout"), "weight"), 50);
    step_at = it_wall_ms_of(it_jstr(it_jobj(r->json, "rollout"), "next_step_at"));
    it_resp_free(rep[other], &r);

    /* Mid-bake: the leader pauses for 15 s; the step is due before it wakes. */
    if (kill(rep[leader]->pid, SIGSTOP) != 0)
        fail_msg("SIGSTOP: %s", strerror(errno));
    t_stop = it_now_ms();
    print_message("paused the leader (replica %d), %lld ms before the next step\n", leader,
                  (long long)(step_at - it_wall_now_ms()));
    while (it_now_ms() - t_stop < PAUSE_MS) {
        if (t_over == 0 && leads(other)) {
            t_over = it_now_ms();
            print_message("replica %d leads %lld ms after the pause began\n", other,
                          (long long)(t_over - t_stop));
        }
        if (t_done == 0) {
            events_of(other, id, st, sizeof(st));
            if (strcmp(st, "succeeded") == 0) {
                t_done = it_wall_now_ms();
                print_message("the step fired %lld ms after it was due, the old leader still "
                              "paused\n",
                              (long long)(t_done - step_at));
            }
        }
        it_pause_ms(50);
    }
    if (t_over == 0)
        fail_msg("no replica took the leadership over in the %d ms its leader was paused",
                 PAUSE_MS);
    if (t_done == 0)
        fail_msg("the rollout's step did not fire while its leader was paused (state %s)", st);
    events = events_of(other, id, st, sizeof(st));

    /* Woken, the old leader knows it lost the lease and adds nothing. */
    if (kill(rep[leader]->pid, SIGCONT) != 0)
        fail_msg("SIGCONT: %s", strerror(errno));
    assert_int_equal(one_leader(10000, -1), other);
    assert_false(leads(leader));
    assert_int_equal(events_of(leader, id, st, sizeof(st)), events);
    assert_string_equal(st, "succeeded");
    {
        json_t *a;

        r = it_alias_get(rep[leader], rep[leader]->admin_token, "lmodel", "prod");
        a = it_jarr(r->json, "routes");
        if (json_array_size(a) != 1 ||
            json_integer_value(json_object_get(json_array_get(a, 0), "version")) != 2)
            fail_msg("after the promotion lmodel/prod should route all to v2: %s", r->body);
        it_resp_free(rep[leader], &r);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paused_leader_is_replaced_and_does_not_act),
    };

    return it_main_result(cmocka_run_group_tests(tests, NULL, teardown));
}
