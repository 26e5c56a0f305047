/*
 * events.h - how the workers (gateway delivery in gateways/, the smoke-test runner in
 * runner/) report to release control: one event struct passed to one function.
 *
 * The workers include this header and control.h, nothing else of release control; release
 * control reaches the workers only through the tables they registered (control.h: struct
 * ctl_gateways, struct ctl_runner). So there is no circle between them.
 */
#ifndef CTL_EVENTS_H
#define CTL_EVENTS_H

#include <stdint.h>

struct ctl;

enum ctl_event_kind {
    /* A smoke test of (model, version) finished in state (passed, failed, error), with an
     * optional reason: waiting gates are evaluated again, and a rolling-out promotion whose
     * candidate failed is rolled back. */
    CTL_EV_SMOKE_FINISHED,
    /* A gateway could not apply a rollout step of promotion `promotion` after retries: the
     * promotion is rolled back if it is still rolling out. */
    CTL_EV_DELIVERY_FAILED,
};

struct ctl_event {
    enum ctl_event_kind kind;
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
void ctl_event_post(struct ctl *ctl, const struct ctl_event *ev);

#endif
