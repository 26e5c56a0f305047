/*
 * history.h - an alias's history as the last-known-good choice reads it (gates/rollout.h
 * lkg_select): one entry per generation, newest first, and the versions rolled back from
 * it. The store fills these straight from its rows for an LKG read; release control builds
 * them from an alias's facts. Plain values; no thread safety needed.
 */
#ifndef MODEL_HISTORY_H
#define MODEL_HISTORY_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <jansson.h>

/* A weighted route of a promotion step or history entry. */
struct promo_route {
    int64_t version;
    int weight;
};

enum lkg_kind {
    LKG_SET,      /* direct PUT of an unprotected alias */
    LKG_STEP,     /* a promotion's intermediate step */
    LKG_PROMOTED, /* a promotion's final step: it succeeded */
    LKG_ROLLBACK, /* a rollback */
    LKG_ABORT,    /* a promotion aborted or rolled back to its baseline */
    LKG_DELETE,   /* the alias was deleted */
};

struct lkg_entry {
    int64_t generation;
    enum lkg_kind kind;
    const struct promo_route *routes;
    size_t nroutes;
    const int64_t *pinned; /* the versions of the entry's match rules */
    size_t npinned;
    int64_t shadow; /* the entry's shadow version, 0 for none */
};

/* A version rolled back from the alias at `generation` (INT64_MAX: archived or deleted, so
 * never a last-known-good again). */
struct lkg_bad {
    int64_t version;
    int64_t generation;
};

/* The kind of a history entry from its stored name ("set" and anything unknown: LKG_SET). */
static inline enum lkg_kind mg_lkg_kind(const char *k)
{
    if (k == NULL)
        return LKG_SET;
    if (strcmp(k, "step") == 0)
        return LKG_STEP;
    if (strcmp(k, "promoted") == 0)
        return LKG_PROMOTED;
    if (strcmp(k, "rollback") == 0)
        return LKG_ROLLBACK;
    if (strcmp(k, "abort") == 0)
        return LKG_ABORT;
    if (strcmp(k, "delete") == 0)
        return LKG_DELETE;
    return LKG_SET;
}

/*
 * e's routes, pinned versions and shadow from an entry's stored JSON ([{"version","weight"}],
 * [{"header","value","version"}], and {"version","percent"} or null; any may be NULL), into
 * the caller's arrays routes (room for rcap) and pinned (room for pcap); entries past the room
 * are left out. generation and kind are the caller's.
 */
void mg_lkg_entry_routes(struct lkg_entry *e, const json_t *routes, const json_t *match,
                         const json_t *shadow, struct promo_route *r, size_t rcap, int64_t *pinned,
                         size_t pcap);

#endif
