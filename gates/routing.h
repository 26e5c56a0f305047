/*
 * routing.h - an alias's routing strategies beyond weights (docs/contract.md "Routing strategies"):
 * header match rules, which serve a request 100% by one version before the weights apply,
 * and a shadow, which receives copies of a share of the requests and whose answers are
 * discarded. Validation of both, shared by the alias API and the policy's internal phase.
 *
 * Pure: no I/O, no clock, no database (a version's existence is the store's to check).
 * Thread-safe.
 */
#ifndef GATE_ROUTING_H
#define GATE_ROUTING_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "../base/mg.h"

#define GATE_MATCH_MAX 16         /* match rules one alias may carry */
#define GATE_HEADER_NAME_MAX 64   /* bytes of a header name */
#define GATE_HEADER_VALUE_MAX 128 /* bytes of a header value */

/* A header name: 1 to GATE_HEADER_NAME_MAX lowercase HTTP token characters (RFC 9110
 * tchar without upper case letters). n is the length (no NUL expected inside). */
bool gate_header_name_ok(const char *s, size_t n);

/* A header value: 1 to GATE_HEADER_VALUE_MAX printable ASCII characters other than space,
 * '"', '\\', ';', '{' and '}' (so it can be written into gateway configs and commands
 * without quoting). */
bool gate_header_value_ok(const char *s, size_t n);

/*
 * Validate the "match" and "shadow" members of an alias body (either may be NULL: absent).
 * match: an array of at most GATE_MATCH_MAX {"header","value","version"} with distinct
 * (header, value) pairs; shadow: null or {"version", "percent"?} with percent an integer
 * from 1 to 100 (100 when left out). Versions are integers >= 1; whether they exist is the
 * caller's to check. On success *match_out gets the canonical array ([] when absent) and
 * *shadow_out the canonical object or JSON null, both NEW. MG_EINVAL with the JSON path
 * ("match[2].header", "shadow.percent") in err->field otherwise.
 */
enum mg_code gate_routing_parse(const json_t *match, const json_t *shadow, json_t **match_out,
                                json_t **shadow_out, struct mg_error *err);

#endif
