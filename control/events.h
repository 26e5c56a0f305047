/*
 * events.h - how the workers (gateway delivery in server/push/, the smoke-test runner in
 * server/runner/) report to release control: one event struct passed to one function.
 *
 * The workers include this header and nothing of release control; release control reaches
 * the workers only through their public kick/enqueue calls (push_kick, runner_enqueue,
 * runner_kick). So there is no circle between them.
 */
#ifndef SRV_EVENTS_H
#define SRV_EVENTS_H

#include <stdint.h>

struct srv;

enum srv_event_kind {
    /* A smoke test of (model, version) finished in state (passed, failed, error), with an
     * optional reason: waiting gates are evaluated again, and a rolling-out promotion whose
     * candidate failed is rolled back. */
    SRV_EV_SMOKE_FINISHED,
    /* A gateway could not apply a rollout step of promotion `promotion` after retries: the
     * promotion is rolled back if it is still rolling out. */
    SRV_EV_DELIVERY_FAILED,
};

struct srv_event {
    enum srv_event_kind kind;
    const char *model;     /* SMOKE_FINISHED */
    int64_t version;       /* SMOKE_FINISHED */
    const char *state;     /* SMOKE_FINISHED */
    const char *reason;    /* SMOKE_FINISHED (may be NULL) */
    const char *promotion; /* DELIVERY_FAILED */
    const char *gateway;   /* DELIVERY_FAILED */
    const char *error;     /* DELIVERY_FAILED */
};

/* Hand an event to release control. Runs on the caller's thread; the strings are borrowed
 * for the call. Thread-safe. */
void srv_event_post(struct srv *srv, const struct srv_event *ev);

#endif
