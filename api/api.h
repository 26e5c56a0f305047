/*
 * api.h - request-body validation shared by the resource files in
 * server/api/. Each check sets a 400 reply naming the field and returns
 * false when the input is wrong.
 */
#ifndef SRV_API_H
#define SRV_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "../http/http.h"

/* Route tables, one per resource file (api/<resource>.c), each ended by an entry with
 * method NULL. */
extern const struct srv_route api_routes_health[];
extern const struct srv_route api_routes_tokens[];
extern const struct srv_route api_routes_blobs[];
extern const struct srv_route api_routes_models[];
extern const struct srv_route api_routes_versions[];
extern const struct srv_route api_routes_datasets[];
extern const struct srv_route api_routes_audit[];
extern const struct srv_route api_routes_keys[];
extern const struct srv_route api_routes_aliases[];
extern const struct srv_route api_routes_policies[];
extern const struct srv_route api_routes_promotions[];
extern const struct srv_route api_routes_gateways[];
extern const struct srv_route api_routes_runner[];
extern const struct srv_route api_routes_ui[];
extern const struct srv_route api_routes_metrics[];
extern const struct srv_route api_routes_oci[];
extern const struct srv_route api_routes_lifecycle[];
extern const struct srv_route api_routes_identity[];
extern const struct srv_route api_routes_sso[];
extern const struct srv_route api_routes_usage[];

/* All of them, NULL-ended: what modelgated answers (struct srv's routes). */
extern const struct srv_route *const api_routes[];

/* The body must be a JSON object whose keys are all in `allowed` (NULL-ended). */
bool api_object(struct srv_req *r, const json_t *body, const char *const *allowed);

/* Optional (or required) string member of at most maxlen bytes, no control
 * characters. *out is borrowed from obj, NULL when absent. */
bool api_string(struct srv_req *r, const json_t *obj, const char *key, const char *field,
                bool required, size_t maxlen, const char **out);

/* Tags: an object of at most 64 string → string pairs (keys ≤ 128 bytes and
 * without ':' so ?tag=k:v is unambiguous, values ≤ 1024 bytes). */
bool api_tags(struct srv_req *r, const json_t *v, const char *field);

/* Metrics: an object of name → finite number; names match
 * ^[A-Za-z0-9_.:/-]{1,128}$ (so ?metric=name>=x parses), at most 1000. */
bool api_metrics(struct srv_req *r, const json_t *v, const char *field);

/* A metric name as above. */
bool api_metric_name_ok(const char *s, size_t n);

/* body["roles"]: a non-empty array of role names, into a bit mask; false: reply set. */
bool api_roles(struct srv_req *r, unsigned *bits);

/* body[key]: an optional array of distinct strings, at most STORE_MAX_SCOPES, each accepted
 * by ok(); *out the array (BORROWED) or NULL when absent or empty; false: reply set. */
bool api_scope_list(struct srv_req *r, const char *key, bool (*ok)(const char *), const char *what,
                    const json_t **out);

/* A team name (docs/contract.md "Teams"). */
bool api_team_name_ok(const char *s);

/* Serve a stored blob's bytes (Range, ETag, If-None-Match); used by
 * GET /api/v1/blobs/{digest} and the version artifact route. */
void api_serve_blob(struct srv_req *r, const char *digest);

/* The one range a Range header asks for ("bytes=a-b", "bytes=a-", "bytes=-n") within size
 * bytes: *off and *len. False when it is malformed, unsatisfiable or asks for several
 * ranges (those are not served). */
bool api_range_parse(const char *h, uint64_t size, uint64_t *off, uint64_t *len);

/* ?wait=SECONDS (0..60, default 0) of alias and promotion changes: reply once
 * every gateway acknowledged the change, or at the deadline with `deliveries`
 * showing what is pending. False (400 sent) when malformed. */
bool api_wait(struct srv_req *r, int64_t *secs);

/* A write's reply deferred by ?wait (api_defer_wait): what on_resume needs. */
struct api_waiting {
    char model[64], alias[33], id[32];
    int64_t gen;
    unsigned status;
};

/* Answer once every gateway of (model, alias) acknowledged generation gen, or after wait_s
 * seconds (control.h ctl_gateways_wait): on_resume(r) then makes the reply from
 * api_waiting_of(r). id and status are kept for it. */
void api_defer_wait(struct srv_req *r, const char *model, const char *alias, int64_t gen,
                    int64_t wait_s, const char *id, unsigned status,
                    void (*on_resume)(struct srv_req *r));
const struct api_waiting *api_waiting_of(const struct srv_req *r);

/* Add a Version's derived fields (docs/contract.md): vram_estimate (the formula and its inputs) and
 * estimated_vram_gib, from resources when given, else from what was read of the artifact. */
void api_version_decorate(json_t *v);

/* Reply with a store result: 200 with the value, or the error. */
void api_reply_result(struct srv_req *r, enum mg_code rc, unsigned status, json_t *out,
                      const struct mg_error *err);

/* A store list call: one page as {"items","next_page_token"} (*out NEW). */
typedef enum mg_code (*api_fetch_fn)(struct srv_req *r, void *ctx, const struct store_page *page,
                                     json_t **out, struct mg_error *err);
/* May this caller see item? */
typedef enum mg_code (*api_keep_fn)(struct srv_req *r, const json_t *item, bool *keep,
                                    struct mg_error *err);

/*
 * One page of a list that hides some items from this caller (--read-scope team): pages of
 * the store are read until page->limit visible items are found (or the list ends), and
 * next_page_token is the cursor (item member cursor_key) of the last item answered, so a
 * page token never names an item the caller cannot see. *out NEW.
 */
enum mg_code api_page_visible(struct srv_req *r, void *ctx, const struct store_page *page,
                              api_fetch_fn fetch, api_keep_fn keep, const char *cursor_key,
                              json_t **out, struct mg_error *err);

#endif
