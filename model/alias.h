/*
 * alias.h - where an alias sends traffic, as the layers pass it (docs/contract.md
 * "Routing strategies"): weighted routes, header match rules and a shadow copy.
 *
 * api/ fills it once from a validated body (the weights itself, match and shadow from
 * gates/routing.h's canonical form); release control fills it from its decisions; the store
 * reads it and writes its JSON once. A plain value: copy it freely; no thread safety needed.
 */
#ifndef MODEL_ALIAS_H
#define MODEL_ALIAS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "../base/mg.h"

#define MG_ROUTES_MAX 16       /* weighted routes of one alias */
#define MG_MATCH_MAX 16        /* match rules of one alias (gates/routing.h GATE_MATCH_MAX) */
#define MG_MATCH_HEADER_MAX 64 /* bytes of a header name (GATE_HEADER_NAME_MAX) */
#define MG_MATCH_VALUE_MAX 128 /* bytes of a header value (GATE_HEADER_VALUE_MAX) */

struct mg_route {
    int64_t version; /* >= 1 */
    int weight;      /* 0..100; an alias's weights sum to 100 */
};

struct mg_match_rule {
    char header[MG_MATCH_HEADER_MAX + 1];
    char value[MG_MATCH_VALUE_MAX + 1];
    int64_t version;
};

struct mg_shadow {
    int64_t version; /* 0: no shadow */
    int percent;     /* 1..100 */
};

struct mg_routes {
    size_t nroutes; /* 0 only when the alias is deleted */
    struct mg_route routes[MG_ROUTES_MAX];
    size_t nmatch;
    struct mg_match_rule match[MG_MATCH_MAX];
    struct mg_shadow shadow;
};

/* JSON of each part (NEW; NULL when out of memory), in the contract's member order:
 * [{"version","weight"}], [{"header","value","version"}] ([] for none), and
 * {"version","percent"} or JSON null for none. */
json_t *mg_routes_json(const struct mg_routes *r);
json_t *mg_match_json(const struct mg_routes *r);
json_t *mg_shadow_json(const struct mg_routes *r);

/*
 * *out from JSON already in those shapes (a validated body's canonical form, or an alias as
 * stored); each of routes, match and shadow may be NULL or null (none). MG_EINVAL (field
 * "routes", "match" or "shadow") for more entries than the record holds, a member of the
 * wrong type or a header or value too long; *out is zeroed first.
 */
enum mg_code mg_routes_from_json(const json_t *routes, const json_t *match, const json_t *shadow,
                                 struct mg_routes *out, struct mg_error *err);

#endif
