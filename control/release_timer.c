/*
 * release_timer.c - release control, the clock: rollout steps and bakes that come due, on a thread
 * of their own.
 */
#include "release.h"
#include "release_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../os/wait.h"
#include "../base/util.h"
#include "../gates/policy.h"
#include "../gates/rollout.h"
#include "../gates/vram.h"
#include "../artifact/sign.h"

/* ---- the clock -------------------------------------------------------- */

int64_t rel_tick(struct ctl *ctl, int64_t now_ms)
{
    json_t *pending = NULL, *id;
    struct mg_error err;
    struct rel_decision d;
    size_t i;
    int64_t next, epoch = store_leader_epoch(ctl->store);

    if (epoch == 0)
        return 0; /* no longer the leader */
    if (store_promotion_pending(ctl->store, now_ms, &pending, &err) != MG_OK)
        return 0;
    json_array_foreach(json_object_get(pending, "due"), i, id)
    {
        memset(&d, 0, sizeof(d));
        d.ev.kind = PROMO_EV_TICK;
        d.ev.reason = "bake time elapsed";
        d.leader_epoch = epoch;
        if (rel_apply_event(ctl, "modelgated", json_string_value(id), &d, NULL, &err) != MG_OK)
            fprintf(stderr, "modelgated: promotion %s: %s\n", json_string_value(id), err.message);
    }
    /* Evaluating promotions wait on gates (the smoke test): look again. */
    json_array_foreach(json_object_get(pending, "evaluating"), i, id)
    {
        memset(&d, 0, sizeof(d));
        d.ev.kind = PROMO_EV_GATES;
        d.ev.reason = "smoke test";
        d.refresh_gates = true;
        d.leader_epoch = epoch;
        if (rel_apply_event(ctl, "modelgated", json_string_value(id), &d, NULL, &err) != MG_OK &&
            err.code != MG_ECONFLICT)
            fprintf(stderr, "modelgated: promotion %s: %s\n", json_string_value(id), err.message);
    }
    next = json_integer_value(json_object_get(pending, "next_at_ms"));
    json_decref(pending);
    return next;
}

struct rel_timer {
    pthread_t thread;
    pthread_mutex_t lock;
    struct mg_wait wake;
    bool stop;
    bool kicked;
};

static void *timer_main(void *arg)
{
    struct ctl *ctl = arg;
    struct rel_timer *t = ctl->timer;

    pthread_mutex_lock(&t->lock);
    while (!t->stop) {
        int64_t now, next, wait_ms, deadline;

        t->kicked = false;
        pthread_mutex_unlock(&t->lock);
        now = store_clock_ms(ctl->store);
        /* One replica (the leader) runs the cluster's rollout clock; the others
         * look again each second, ready to take over. */
        next = store_leader(ctl->store) ? rel_tick(ctl, now) : 0;
        pthread_mutex_lock(&t->lock);
        if (t->stop || t->kicked)
            continue;
        /* Sleep until the next step is due, but at least once a second look
         * again (other replicas may have scheduled steps). */
        wait_ms = next > now ? next - now : 1000;
        if (wait_ms > 1000)
            wait_ms = 1000;
        deadline = mg_mono_ms() + wait_ms;
        while (!t->stop && !t->kicked && mg_wait_until(&t->wake, &t->lock, deadline))
            ;
    }
    pthread_mutex_unlock(&t->lock);
    return NULL;
}

enum mg_code rel_timer_start(struct ctl *ctl, struct mg_error *err)
{
    struct rel_timer *t = calloc(1, sizeof(*t));

    if (t == NULL)
        return mg_fail(err, MG_ENOMEM, NULL, "out of memory");
    pthread_mutex_init(&t->lock, NULL);
    mg_wait_init(&t->wake);
    ctl->timer = t;
    if (pthread_create(&t->thread, NULL, timer_main, ctl) != 0) {
        ctl->timer = NULL;
        pthread_mutex_destroy(&t->lock);
        mg_wait_release(&t->wake);
        free(t);
        return mg_fail(err, MG_EIO, NULL, "cannot start the timer thread");
    }
    return MG_OK;
}

void rel_timer_kick(struct ctl *ctl)
{
    struct rel_timer *t = ctl->timer;

    if (t == NULL)
        return;
    pthread_mutex_lock(&t->lock);
    t->kicked = true;
    pthread_cond_signal(&t->wake.cond);
    pthread_mutex_unlock(&t->lock);
}

void rel_timer_stop(struct ctl *ctl)
{
    struct rel_timer *t = ctl->timer;

    if (t == NULL)
        return;
    pthread_mutex_lock(&t->lock);
    t->stop = true;
    pthread_cond_signal(&t->wake.cond);
    pthread_mutex_unlock(&t->lock);
    pthread_join(t->thread, NULL);
    pthread_mutex_destroy(&t->lock);
    mg_wait_release(&t->wake);
    free(t);
    ctl->timer = NULL;
}
