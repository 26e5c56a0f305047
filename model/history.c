/*
 * history.c - an alias history entry's routes as the last-known-good choice reads them
 * (history.h).
 */
#include "history.h"

void mg_lkg_entry_routes(struct lkg_entry *e, const json_t *routes, const json_t *match,
                         const json_t *shadow, struct promo_route *r, size_t rcap, int64_t *pinned,
                         size_t pcap)
{
    size_t i;
    json_t *x;

    e->routes = r;
    e->nroutes = 0;
    json_array_foreach(routes, i, x)
    {
        if (i >= rcap)
            break;
        r[i].version = json_integer_value(json_object_get(x, "version"));
        r[i].weight = (int)json_integer_value(json_object_get(x, "weight"));
        e->nroutes = i + 1;
    }
    e->pinned = pinned;
    e->npinned = 0;
    json_array_foreach(match, i, x)
    {
        if (i >= pcap)
            break;
        pinned[i] = json_integer_value(json_object_get(x, "version"));
        e->npinned = i + 1;
    }
    e->shadow = json_integer_value(json_object_get(shadow, "version"));
}
