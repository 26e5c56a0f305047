/*
 * release_common.h - what the test_release_*.c programs (aliases, policies,
 * promotions, gates, rollout, last-known-good and rollback; milestone M3)
 * share beyond api.h: one server with a token per role, routes and gates
 * checked with messages that show both sides.
 *
 * Every helper asserts (cmocka) and reports the request and the answer on
 * failure, like harness.h.
 */
#ifndef MG_IT_RELEASE_COMMON_H
#define MG_IT_RELEASE_COMMON_H

#include "api.h"
#include "harness.h"
#include "sys.h"

/* Tokens every release program uses; names are the token names ("by"). */
struct rel_tokens {
    char *pub;    /* publisher,reader: authors the versions */
    char *dep;    /* deployer,reader: starts promotions, sets aliases */
    char *rev_a;  /* reviewer,reader */
    char *rev_b;  /* reviewer,reader */
    char *rev_c;  /* reviewer,reader */
    char *rd;     /* reader */
    char *noread; /* publisher,reviewer,deployer: everything but reader */
    char *pubrev; /* publisher,reviewer,reader: authors a version, then tries to approve */
    char *deprev; /* deployer,reviewer,reader: starts a promotion, then tries to approve */
};

struct rel_ctx {
    struct mg_server *s;
    struct rel_tokens t;
    char art[IT_DIGEST_LEN + 1]; /* one stored blob, the artifact of every version */
};

/* Each release program runs its tests against one server and one set of
 * tokens: cx, made by rel_group_setup and freed by rel_group_teardown. */
extern struct rel_ctx cx;

/* Group setup: start the server, create the tokens and the artifact in cx; *state = cx.s. */
int rel_group_setup(void **state);

/* Group teardown: stop the server and free cx. */
int rel_group_teardown(void **state);

/* ---- versions and aliases --------------------------------------------------- */

/* {"metrics": {"auc": auc, "p95_latency_ms": p95}} for it_version_create (new
 * reference); a negative value leaves its metric out. */
json_t *rel_metrics(double auc, double p95);

/*
 * Do routes hold exactly these (version, weight) pairs, in any order?
 * pairs: n pairs of json_int_t version, int weight.
 */
bool rel_routes_match(const json_t *routes, size_t n, const json_int_t *pairs);

/* Assert routes hold exactly the (version, weight) pairs given, in any order;
 * resp (may be NULL) is shown on failure. */
#define rel_expect_routes(c, resp, routes, n, ...)                                                 \
    rel_expect_routes_at(c, resp, routes, n, (const json_int_t[]){__VA_ARGS__}, __FILE__, __LINE__)
void rel_expect_routes_at(struct rel_ctx *c, const struct it_resp *resp, const json_t *routes,
                          size_t n, const json_int_t *pairs, const char *file, int line);

/* Assert the alias's routes now (GET with the reader token). */
#define rel_expect_alias_routes(c, model, alias, n, ...)                                           \
    do {                                                                                           \
        struct it_resp *rel_a_ = it_alias_get((c)->s, (c)->t.rd, model, alias);                    \
        rel_expect_routes_at(c, rel_a_, json_object_get(rel_a_->json, "routes"), n,                \
                             (const json_int_t[]){__VA_ARGS__}, __FILE__, __LINE__);               \
        it_resp_free((c)->s, &rel_a_);                                                             \
    } while (0)

/* The alias's last-known-good version (GET .../last-known-good, reader), or 0
 * when the answer is 404 no_known_good. Anything else fails. */
json_int_t rel_lkg(struct rel_ctx *c, const char *model, const char *alias);

/* Does the version's bad_for list name the alias? */
bool rel_bad_for(struct rel_ctx *c, const char *model, json_int_t version, const char *alias);

/* ---- promotions --------------------------------------------------------- */

/* POST an approval decision with token (comment may be NULL: left out); the
 * answer, not asserted. */
struct it_resp *rel_decide(struct rel_ctx *c, const char *token, const char *id,
                           const char *decision, const char *comment);

/* A Promotion answer's state (asserted to be a string). Borrowed. */
const char *rel_state(const struct it_resp *r);

/* Assert a Promotion answer is in state. */
#define rel_expect_state(r, state) rel_expect_state_at(r, state, __FILE__, __LINE__)
void rel_expect_state_at(const struct it_resp *r, const char *state, const char *file, int line);

/* ---- gates -------------------------------------------------------------- */

/* Assert one gate's shape (GateReport.gates[i]: name, kind, status, observed,
 * expected, detail) and status; see it_gate_find for kind and name_part. */
#define rel_expect_gate(gates, kind, name_part, status)                                            \
    rel_expect_gate_at(gates, kind, name_part, status, __FILE__, __LINE__)
void rel_expect_gate_at(const json_t *gates, const char *kind, const char *name_part,
                        const char *status, const char *file, int line);

/* A gate's observed value as a number (fails when it is not one). */
double rel_gate_observed(const json_t *gates, const char *kind, const char *name_part);

/* Does a gate's expected value state the bound (a number, or text holding it)? */
bool rel_gate_expects(const json_t *gates, const char *kind, const char *name_part, double bound);

/* ---- audit -------------------------------------------------------------- */

/* GET /audit/verify: asserts ok and at least one entry. */
void rel_expect_audit_ok(struct mg_server *s);

#endif
