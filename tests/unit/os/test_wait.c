/*
 * test_wait.c - os/wait.c: a timed wait ends by the monotonic clock, a wake-up ends it early,
 * a deadline already gone returns at once; mg_wait_sleep sleeps through other wake-ups and
 * ends on its stop flag. No durations are asserted beyond "the deadline has passed".
 *
 * Where a helper thread must act while the test waits, the test holds the lock from before
 * the thread starts until it is inside the wait, so the thread's turn comes only then.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "base/util.h"
#include "os/wait.h"

struct fixture {
    pthread_mutex_t lock;
    struct mg_wait wake;
    bool flag;     /* under lock */
    bool set_flag; /* what the helper thread does: set flag, or only wake */
};

static int setup(void **state)
{
    static struct fixture f;

    pthread_mutex_init(&f.lock, NULL);
    mg_wait_init(&f.wake);
    f.flag = false;
    f.set_flag = false;
    *state = &f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    mg_wait_release(&f->wake);
    pthread_mutex_destroy(&f->lock);
    return 0;
}

/* Takes the lock (so the test is waiting), maybe sets the flag, wakes the wait. */
static void *helper(void *arg)
{
    struct fixture *f = arg;

    pthread_mutex_lock(&f->lock);
    if (f->set_flag)
        f->flag = true;
    pthread_cond_broadcast(&f->wake.cond);
    pthread_mutex_unlock(&f->lock);
    return NULL;
}

static void test_timeout_after_deadline(void **state)
{
    struct fixture *f = *state;
    int64_t deadline = mg_mono_ms() + 20;
    bool woken;

    pthread_mutex_lock(&f->lock);
    while ((woken = mg_wait_until(&f->wake, &f->lock, deadline)))
        ; /* nobody wakes it: only a spurious wake-up could */
    pthread_mutex_unlock(&f->lock);
    assert_false(woken);
    assert_true(mg_mono_ms() >= deadline);
}

static void test_past_deadline_returns_at_once(void **state)
{
    struct fixture *f = *state;
    int64_t now = mg_mono_ms();

    pthread_mutex_lock(&f->lock);
    assert_false(mg_wait_until(&f->wake, &f->lock, now - 1000));
    assert_false(mg_wait_until(&f->wake, &f->lock, now));
    assert_false(mg_wait_until(&f->wake, &f->lock, INT64_MIN));
    pthread_mutex_unlock(&f->lock);
}

static void test_wake_ends_it_early(void **state)
{
    struct fixture *f = *state;
    int64_t deadline = mg_mono_ms() + 600 * 1000; /* never reached: the test times out first */
    bool woken = true;
    pthread_t t;

    f->set_flag = true;
    pthread_mutex_lock(&f->lock);
    assert_int_equal(pthread_create(&t, NULL, helper, f), 0);
    while (!f->flag && woken)
        woken = mg_wait_until(&f->wake, &f->lock, deadline);
    pthread_mutex_unlock(&f->lock);
    pthread_join(t, NULL);
    assert_true(woken);
    assert_true(f->flag);
    assert_true(mg_mono_ms() < deadline);
}

static void test_sleep_ends_on_stop(void **state)
{
    struct fixture *f = *state;
    pthread_t t;
    bool slept;

    f->set_flag = true;
    pthread_mutex_lock(&f->lock);
    assert_int_equal(pthread_create(&t, NULL, helper, f), 0);
    slept = mg_wait_sleep(&f->wake, &f->lock, 600 * 1000, &f->flag);
    pthread_mutex_unlock(&f->lock);
    pthread_join(t, NULL);
    assert_false(slept);
    assert_true(f->flag);

    /* Already stopped: returns at once. */
    pthread_mutex_lock(&f->lock);
    assert_false(mg_wait_sleep(&f->wake, &f->lock, 600 * 1000, &f->flag));
    pthread_mutex_unlock(&f->lock);
}

static void test_sleep_sleeps_through_other_wakes(void **state)
{
    struct fixture *f = *state;
    int64_t start = mg_mono_ms();
    pthread_t t;
    bool slept;

    f->set_flag = false; /* the helper only wakes the wait */
    pthread_mutex_lock(&f->lock);
    assert_int_equal(pthread_create(&t, NULL, helper, f), 0);
    slept = mg_wait_sleep(&f->wake, &f->lock, 50, &f->flag);
    pthread_mutex_unlock(&f->lock);
    pthread_join(t, NULL);
    assert_true(slept);
    assert_false(f->flag);
    assert_true(mg_mono_ms() >= start + 50);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_timeout_after_deadline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_past_deadline_returns_at_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wake_ends_it_early, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sleep_ends_on_stop, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sleep_sleeps_through_other_wakes, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
