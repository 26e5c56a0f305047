/*
 * wait.h - timed waits on the monotonic clock.
 *
 * A struct mg_wait is a condition variable whose timeouts run on CLOCK_MONOTONIC, so
 * a wall-clock jump (NTP, an operator's `date`) neither stretches a sleep nor makes a
 * worker spin. Deadlines are mg_mono_ms() values (base/util.h).
 *
 * The mutex is the caller's, passed to each wait: it guards the caller's predicate
 * (stop flags, queues), often more than one wait shares it, and one mutex may serve two
 * waits that are woken for different reasons. Wake a wait with
 * pthread_cond_broadcast(&w->cond) or pthread_cond_signal(&w->cond), and wait without a
 * deadline with pthread_cond_wait(&w->cond, lock); only timed waits must come through
 * here (a pthread_cond_timedwait on w->cond would read the deadline on the wrong clock).
 *
 * The usual loops:
 *
 *     pthread_mutex_lock(&x->lock);
 *     while (mg_wait_sleep(&x->wake, &x->lock, TICK_MS, &x->stop)) {
 *         pthread_mutex_unlock(&x->lock);
 *         tick(x);                              // every TICK_MS until stopped
 *         pthread_mutex_lock(&x->lock);
 *     }
 *     pthread_mutex_unlock(&x->lock);
 *
 *     int64_t deadline = mg_mono_ms() + ms;     // until a predicate holds or time is up
 *     while (!x->stop && !x->kicked && mg_wait_until(&x->wake, &x->lock, deadline))
 *         ;
 *
 * Thread-safe as pthread condition variables are.
 */
#ifndef MG_OS_WAIT_H
#define MG_OS_WAIT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct mg_wait {
    pthread_cond_t cond; /* on CLOCK_MONOTONIC; only mg_wait_init makes one */
};

/* Initialise w (its condition variable on CLOCK_MONOTONIC). Cannot fail on Linux. */
void mg_wait_init(struct mg_wait *w);

/* Destroy w; nobody may be waiting on it. */
void mg_wait_release(struct mg_wait *w);

/*
 * Wait on w once, with lock held (it is released while waiting and held again on
 * return), until woken or until deadline_mono_ms. Returns false on timeout, and then
 * mg_mono_ms() >= deadline_mono_ms; returns at once with false when the deadline has
 * already passed. True means woken, possibly spuriously or for another waiter's reason:
 * the caller looks at its predicate and calls again with the same deadline.
 */
bool mg_wait_until(struct mg_wait *w, pthread_mutex_t *lock, int64_t deadline_mono_ms);

/*
 * Sleep ms milliseconds, with lock held, unless *stop becomes true (read under lock;
 * whoever sets it wakes w). Other wake-ups are slept through. Returns true when the time
 * passed with *stop still false, false as soon as *stop is true (at once if it already is).
 */
bool mg_wait_sleep(struct mg_wait *w, pthread_mutex_t *lock, int64_t ms, const volatile bool *stop);

#endif
