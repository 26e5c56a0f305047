/*
 * api.h - the REST calls most integration tests make on the way to what they
 * test: models, versions, aliases, policies and promotions.
 *
 * Every call asserts the usual success status (cmocka) unless it says
 * otherwise, and reports the request and the answer on failure, like
 * harness.h. Responses returned are owned by the server (see harness.h).
 */
#ifndef MG_IT_API_H
#define MG_IT_API_H

#include "harness.h"

#define IT_HEX64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
/* The image every test version is built with. */
#define IT_IMAGE "registry.example/serve@sha256:" IT_HEX64

/* ---- models and versions ------------------------------------------------ */

/* POST /models {"name": name} with token; asserts 201. */
void it_model_create(struct mg_server *s, const char *token, const char *name);

/* POST a version of model with token: {"artifact", "image": IT_IMAGE} plus the
 * members of extra (an object, STOLEN; NULL for none). Asserts 201; returns
 * the version's number. */
json_int_t it_version_create(struct mg_server *s, const char *token, const char *model,
                             const char *artifact, json_t *extra);

/* ---- aliases ------------------------------------------------------------ */

/* PUT the alias (body: JSON text) with ?wait=wait_s when wait_s > 0; asserts
 * 200 and returns the Alias answer. */
struct it_resp *it_alias_put(struct mg_server *s, const char *token, const char *model,
                             const char *alias, const char *body, int wait_s);

/* it_alias_put without waiting; returns the alias's new generation. */
json_int_t it_alias_set(struct mg_server *s, const char *token, const char *model,
                        const char *alias, const char *body);

/* it_alias_put of {"version": version}. */
void it_alias_to(struct mg_server *s, const char *token, const char *model, const char *alias,
                 json_int_t version, int wait_s);

/* GET the Alias with token; asserts 200. */
struct it_resp *it_alias_get(struct mg_server *s, const char *token, const char *model,
                             const char *alias);

/* A routes array as "v1:80,v2:20" (in the given order), for comparisons and messages. */
void it_routes_text(const json_t *routes, char *out, size_t n);

/* ---- policies and promotions ---------------------------------------------- */

/* PUT a policy (JSON text) with the admin token; asserts 200. */
void it_policy_put(struct mg_server *s, const char *model, const char *alias, const char *policy);

/* POST /promotions {model, version, alias, reason} with token; the answer, not asserted. */
struct it_resp *it_promotion_post(struct mg_server *s, const char *token, const char *model,
                                  json_int_t version, const char *alias);

/* it_promotion_post asserting 201; the Promotion's id goes to id. */
struct it_resp *it_promote(struct mg_server *s, const char *token, const char *model,
                           json_int_t version, const char *alias, char id[64]);

/* GET /promotions/{id} with token; asserts 200. */
struct it_resp *it_promotion_get(struct mg_server *s, const char *token, const char *id);

/* Is a promotion state final (succeeded, rejected, aborted, rolled_back)? */
bool it_promotion_final(const char *state);

/*
 * Poll GET /promotions/{id} (with token) until its state is `state`; fails
 * when another final state is reached or at it_deadline(timeout_ms). Returns
 * that answer.
 */
#define it_promotion_wait(s, token, id, state, timeout_ms)                                         \
    it_promotion_wait_at(s, token, id, state, timeout_ms, __FILE__, __LINE__)
struct it_resp *it_promotion_wait_at(struct mg_server *s, const char *token, const char *id,
                                     const char *state, int64_t timeout_ms, const char *file,
                                     int line);

/* The first gate of a GateReport/Promotion "gates" array with this kind whose
 * name contains name_part (NULL: any name), or NULL. Borrowed. */
json_t *it_gate_find(const json_t *gates, const char *kind, const char *name_part);

#endif
