/*
 * wait.c - timed waits on the monotonic clock (wait.h).
 */
#include "wait.h"

#include <errno.h>
#include <time.h>

#include "../base/util.h"

void mg_wait_init(struct mg_wait *w)
{
    pthread_condattr_t ca;

    /* Linux supports CLOCK_MONOTONIC for condition variables; none of these fails there. */
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cond, &ca);
    pthread_condattr_destroy(&ca);
}

void mg_wait_release(struct mg_wait *w)
{
    pthread_cond_destroy(&w->cond);
}

bool mg_wait_until(struct mg_wait *w, pthread_mutex_t *lock, int64_t deadline_mono_ms)
{
    struct timespec ts;

    if (mg_mono_ms() >= deadline_mono_ms)
        return false;
    /* mg_mono_ms() is CLOCK_MONOTONIC in whole milliseconds: the same clock as the cond's. */
    ts.tv_sec = (time_t)(deadline_mono_ms / 1000);
    ts.tv_nsec = (long)(deadline_mono_ms % 1000) * 1000000L;
    return pthread_cond_timedwait(&w->cond, lock, &ts) != ETIMEDOUT;
}

bool mg_wait_sleep(struct mg_wait *w, pthread_mutex_t *lock, int64_t ms, const volatile bool *stop)
{
    int64_t deadline = mg_mono_ms() + ms;

    while (!*stop && mg_wait_until(w, lock, deadline))
        ;
    return !*stop;
}
