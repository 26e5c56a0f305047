/*
 * events.c - see events.h: the one door from the workers into release control.
 */
#include "events.h"

#include "release.h"

void srv_event_post(struct srv *srv, const struct srv_event *ev)
{
    switch (ev->kind) {
    case SRV_EV_SMOKE_FINISHED:
        rel_smoke_finished(srv, ev->model, ev->version, ev->state, ev->reason);
        break;
    case SRV_EV_DELIVERY_FAILED:
        rel_delivery_failed(srv, ev->promotion, ev->gateway, ev->error);
        break;
    }
}
