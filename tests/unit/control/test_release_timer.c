/*
 * test_release_timer.c - release control's rollout clock (control/release_timer.c): rel_tick
 * takes a step once the store's clock passed its time, and not before; a manual rollout
 * never moves on its own; the timer thread does the same by itself. No HTTP, no worker: a
 * real SQLite store and recording fakes (ctl_fixture.h).
 *
 * Time: a bake of 0 s makes each step due at once (deterministic); one test lets a 1 s bake
 * pass on the real clock, polling rel_tick with a deadline, and checks no step came early.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl_fixture.h"

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

/* The promotion's stored next step time (ms), 0 when none. */
static int64_t next_step_ms(struct cfx *c, const char *id)
{
    json_t *p = NULL;
    int64_t v;

    if (store_promotion_get(c->fx->st, id, &p, &c->fx->err) != MG_OK)
        fail_msg("store_promotion_get(%s): %s", id, c->fx->err.message);
    v = json_integer_value(json_object_get(p, "_next_step_at_ms"));
    json_decref(p);
    return v;
}

/* The stored state, without going through release control (safe while the timer runs). */
static bool stored_state_is(struct cfx *c, const char *id, const char *state)
{
    json_t *p = NULL;
    bool is;

    if (store_promotion_get(c->fx->st, id, &p, &c->fx->err) != MG_OK)
        fail_msg("store_promotion_get(%s): %s", id, c->fx->err.message);
    is = strcmp(json_string_value(json_object_get(p, "state")), state) == 0;
    json_decref(p);
    return is;
}

/* Bake 0: each step is due as soon as it is taken; each tick takes one. */
static void test_tick_takes_due_steps(void **state)
{
    struct cfx *c = *state;
    char id[64];

    cfx_model(c, "m", 2, NULL);
    cfx_alias_to(c, "m", "prod", 1);
    cfx_policy(c, "m", "prod", "{\"rollout\":{\"steps\":[10,50,100],\"bake_seconds\":0}}");
    json_decref(cfx_promote(c, "m", 2, "prod", id));
    cfx_expect_state(c, id, "rolling_out");
    cfx_expect_alias_routes(c, "m", "prod", 2, 1, 90, 2, 10);
    assert_true(next_step_ms(c, id) > 0);
    cfx_calls_reset(c);

    rel_tick(&c->ctl, store_clock_ms(c->fx->st));
    assert_int_equal(cfx_rollout_int(c, id, "step_index"), 1);
    cfx_expect_alias_routes(c, "m", "prod", 2, 1, 50, 2, 50);
    assert_int_equal(cfx_outbox_gen(c, "m", "prod"), 3);
    assert_int_equal(cfx_count(c, "gw.kick"), 1);
    assert_true(cfx_has_event(c, id, "step", "step 2 of 3"));

    rel_tick(&c->ctl, store_clock_ms(c->fx->st));
    cfx_expect_state(c, id, "succeeded");
    cfx_expect_alias_routes(c, "m", "prod", 1, 2, 100);
    assert_int_equal(cfx_lkg(c, "m", "prod"), 2);
    assert_int_equal(next_step_ms(c, id), 0);
    assert_true(cfx_has_event(c, id, "succeeded", NULL));

    /* Nothing left to do: a tick changes nothing. */
    cfx_calls_reset(c);
    assert_int_equal(rel_tick(&c->ctl, store_clock_ms(c->fx->st)), 0);
    assert_int_equal(cfx_generation(c, "m", "prod"), 4);
    assert_int_equal(cfx_count(c, "gw.kick"), 0);
}

/* A step whose bake has not passed is not taken; the tick says when it is due. */
static void test_tick_waits_for_the_bake(void **state)
{
    struct cfx *c = *state;
    char id[64];
    int64_t due;

    cfx_model(c, "m", 2, NULL);
    cfx_alias_to(c, "m", "prod", 1);
    cfx_policy(c, "m", "prod", "{\"rollout\":{\"steps\":[10,100],\"bake_seconds\":3600}}");
    json_decref(cfx_promote(c, "m", 2, "prod", id));
    due = next_step_ms(c, id);
    assert_true(due > store_clock_ms(c->fx->st) + 3000 * 1000);
    cfx_calls_reset(c);

    assert_int_equal(rel_tick(&c->ctl, store_clock_ms(c->fx->st)), due);
    assert_int_equal(rel_tick(&c->ctl, store_clock_ms(c->fx->st)), due);
    cfx_expect_state(c, id, "rolling_out");
    assert_int_equal(cfx_rollout_int(c, id, "step_index"), 0);
    assert_int_equal(cfx_generation(c, "m", "prod"), 2);
    assert_int_equal(cfx_count(c, "gw.kick"), 0);

    /* A deployer need not wait. */
    assert_int_equal(rel_promotion_advance(&c->ctl, "dep", id, NULL, &c->fx->err), MG_OK);
    cfx_expect_state(c, id, "succeeded");
    assert_int_equal(rel_tick(&c->ctl, store_clock_ms(c->fx->st)), 0);
}

/* auto_advance false: the clock never moves the rollout; only advance does. */
static void test_manual_rollout_never_ticks(void **state)
{
    struct cfx *c = *state;
    char id[64];

    cfx_model(c, "m", 2, NULL);
    cfx_alias_to(c, "m", "prod", 1);
    cfx_policy(c, "m", "prod",
               "{\"rollout\":{\"steps\":[25,50,100],\"bake_seconds\":0,\"auto_advance\":false}}");
    json_decref(cfx_promote(c, "m", 2, "prod", id));
    assert_int_equal(next_step_ms(c, id), 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(rel_tick(&c->ctl, store_clock_ms(c->fx->st)), 0);
    assert_int_equal(cfx_rollout_int(c, id, "step_index"), 0);
    cfx_expect_alias_routes(c, "m", "prod", 2, 1, 75, 2, 25);
    assert_int_equal(rel_promotion_advance(&c->ctl, "dep", id, NULL, &c->fx->err), MG_OK);
    cfx_expect_alias_routes(c, "m", "prod", 2, 1, 50, 2, 50);
}

/* A 1 s bake on the real clock: ticking all along, the step comes once the store's clock
 * passed its time, never before. */
static void test_tick_on_the_real_clock(void **state)
{
    struct cfx *c = *state;
    char id[64];
    int64_t due, deadline, stepped_at = 0;

    cfx_model(c, "m", 2, NULL);
    cfx_alias_to(c, "m", "prod", 1);
    cfx_policy(c, "m", "prod", "{\"rollout\":{\"steps\":[50,100],\"bake_seconds\":1}}");
    json_decref(cfx_promote(c, "m", 2, "prod", id));
    due = next_step_ms(c, id);
    assert_true(due > 0);
    deadline = store_clock_ms(c->fx->st) + 30000;
    while (store_clock_ms(c->fx->st) < deadline) {
        int64_t before = store_clock_ms(c->fx->st);

        rel_tick(&c->ctl, before);
        if (stored_state_is(c, id, "succeeded")) {
            stepped_at = store_clock_ms(c->fx->st);
            break;
        }
        /* Not yet: the alias still splits. */
        cfx_expect_alias_routes(c, "m", "prod", 2, 1, 50, 2, 50);
        pause_ms(20);
    }
    if (stepped_at == 0)
        fail_msg("the rollout clock did not take the step due at %lld within 30 s", (long long)due);
    assert_true(stepped_at >= due);
    cfx_expect_alias_routes(c, "m", "prod", 1, 2, 100);
    assert_int_equal(cfx_lkg(c, "m", "prod"), 2);
}

/* The timer thread ticks by itself: started, it takes the due steps; kicked and stopped
 * cleanly. */
static void test_timer_thread(void **state)
{
    struct cfx *c = *state;
    char id[64];
    int64_t deadline;

    cfx_model(c, "m", 2, NULL);
    cfx_alias_to(c, "m", "prod", 1);
    cfx_policy(c, "m", "prod", "{\"rollout\":{\"steps\":[10,50,100],\"bake_seconds\":0}}");
    json_decref(cfx_promote(c, "m", 2, "prod", id));
    cfx_calls_reset(c);

    assert_int_equal(rel_timer_start(&c->ctl, &c->fx->err), MG_OK);
    assert_non_null(c->ctl.timer);
    rel_timer_kick(&c->ctl);
    deadline = store_clock_ms(c->fx->st) + 30000;
    while (!stored_state_is(c, id, "succeeded") && store_clock_ms(c->fx->st) < deadline)
        pause_ms(20);
    rel_timer_stop(&c->ctl);
    assert_null(c->ctl.timer);
    cfx_expect_state(c, id, "succeeded");
    cfx_expect_alias_routes(c, "m", "prod", 1, 2, 100);
    assert_int_equal(cfx_count(c, "gw.kick"), 2); /* 50%, then 100% */
    rel_timer_kick(&c->ctl);                      /* stopped: a no-op */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_tick_takes_due_steps, cfx_setup, cfx_teardown),
        cmocka_unit_test_setup_teardown(test_tick_waits_for_the_bake, cfx_setup, cfx_teardown),
        cmocka_unit_test_setup_teardown(test_manual_rollout_never_ticks, cfx_setup, cfx_teardown),
        cmocka_unit_test_setup_teardown(test_tick_on_the_real_clock, cfx_setup, cfx_teardown),
        cmocka_unit_test_setup_teardown(test_timer_thread, cfx_setup, cfx_teardown),
    };

    return cmocka_run_group_tests_name("unit_control_release_timer", tests, NULL, NULL);
}
