/*
 * events.c - see events.h: the one door from the workers into release control.
 */
#include "events.h"

#include "release.h"

void ctl_event_post(struct ctl *ctl, const struct ctl_event *ev)
{
    switch (ev->kind) {
    case CTL_EV_SMOKE_FINISHED:
        rel_smoke_finished(ctl, ev->model, ev->version, ev->state, ev->reason);
        break;
    case CTL_EV_DELIVERY_FAILED:
        rel_delivery_failed(ctl, ev->promotion, ev->gateway, ev->error);
        break;
    }
}
