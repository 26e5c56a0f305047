/*
 * release_common.h - helpers shared by the test_release_*.c programs
 * (aliases, policies, promotions, gates, rollout, last-known-good and
 * rollback; milestone M3). Header-only: static inline, so a program that
 * uses only some of them still builds with -Wall -Werror.
 *
 * Every helper asserts (cmocka) and reports the request and the answer on
 * failure, like harness.h.
 */
#ifndef MG_IT_RELEASE_COMMON_H
#define MG_IT_RELEASE_COMMON_H

#include "harness.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define REL_HEX64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define REL_IMAGE "registry.example/serve@sha256:" REL_HEX64

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

static inline int64_t rel_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline int64_t rel_deadline_ms(int64_t normal)
{
    return it_sanitized() ? normal * 3 : normal;
}

static inline void rel_pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

/* snprintf into a path buffer, failing when it does not fit. */
static inline const char *rel_path(char *buf, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline const char *rel_path(char *buf, size_t n, const char *fmt, ...)
{
    va_list ap;
    int k;

    va_start(ap, fmt);
    k = vsnprintf(buf, n, fmt, ap);
    va_end(ap);
    if (k < 0 || (size_t)k >= n)
        fail_msg("path too long: %s", fmt);
    return buf;
}

static inline void rel_ctx_init(struct rel_ctx *c)
{
    struct mg_server *s;

    memset(c, 0, sizeof(*c));
    c->s = s = it_server_start(NULL);
    c->t.pub = it_token_create(s, "pub", "publisher,reader", NULL);
    c->t.dep = it_token_create(s, "dep", "deployer,reader", NULL);
    c->t.rev_a = it_token_create(s, "rev-a", "reviewer,reader", NULL);
    c->t.rev_b = it_token_create(s, "rev-b", "reviewer,reader", NULL);
    c->t.rev_c = it_token_create(s, "rev-c", "reviewer,reader", NULL);
    c->t.rd = it_token_create(s, "rd", "reader", NULL);
    c->t.noread = it_token_create(s, "noread", "publisher,reviewer,deployer", NULL);
    c->t.pubrev = it_token_create(s, "pubrev", "publisher,reviewer,reader", NULL);
    c->t.deprev = it_token_create(s, "deprev", "deployer,reviewer,reader", NULL);
    it_upload(s, "release test model bytes", 24, c->art);
    it_release(s);
}

static inline void rel_ctx_free(struct rel_ctx *c)
{
    char **all[] = {&c->t.pub, &c->t.dep,    &c->t.rev_a,  &c->t.rev_b, &c->t.rev_c,
                    &c->t.rd,  &c->t.noread, &c->t.pubrev, &c->t.deprev};

    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
        free(*all[i]);
        *all[i] = NULL;
    }
    if (c->s != NULL) {
        it_server_stop(c->s);
        it_server_free(&c->s);
    }
}

/* Each release program runs its tests against one server and one set of
 * tokens: cx, made by the group setup and freed by the group teardown. */
static struct rel_ctx cx;

static inline int rel_group_setup(void **state)
{
    rel_ctx_init(&cx);
    *state = cx.s;
    return 0;
}

static inline int rel_group_teardown(void **state)
{
    rel_ctx_free(&cx);
    *state = NULL;
    return 0;
}

/* ---- models and versions ---------------------------------------------- */

static inline void rel_model(struct rel_ctx *c, const char *token, const char *name)
{
    struct it_resp *r =
        it_jreq_v(c->s, "POST", "/api/v1/models", token, json_pack("{ss}", "name", name));

    it_expect_status(c->s, r, 201);
    it_resp_free(c->s, &r);
}

/*
 * A version of `model` authored by `token`, with the metrics given
 * (p95 < 0 leaves p95_latency_ms out; auc < 0 leaves auc out). Returns its
 * number.
 */
static inline json_int_t rel_version(struct rel_ctx *c, const char *token, const char *model,
                                     double auc, double p95)
{
    char path[256];
    json_t *metrics = json_object();
    struct it_resp *r;
    json_int_t n;

    if (auc >= 0)
        json_object_set_new(metrics, "auc", json_real(auc));
    if (p95 >= 0)
        json_object_set_new(metrics, "p95_latency_ms", json_real(p95));
    r = it_jreq_v(
        c->s, "POST", rel_path(path, sizeof(path), "/api/v1/models/%s/versions", model), token,
        json_pack("{ss ss so}", "artifact", c->art, "image", REL_IMAGE, "metrics", metrics));
    it_expect_status(c->s, r, 201);
    n = it_jint(r->json, "version");
    it_resp_free(c->s, &r);
    return n;
}

/* ---- aliases ------------------------------------------------------------ */

/* PUT the alias to one version with the deployer token; asserts 200. */
static inline void rel_alias_set(struct rel_ctx *c, const char *model, const char *alias,
                                 json_int_t version)
{
    char path[256];
    struct it_resp *r = it_jreq_v(
        c->s, "PUT", rel_path(path, sizeof(path), "/api/v1/models/%s/aliases/%s", model, alias),
        c->t.dep, json_pack("{sI}", "version", version));

    it_expect_status(c->s, r, 200);
    it_resp_free(c->s, &r);
}

/* GET the Alias (reader); asserts 200. Owned by the server until released. */
static inline struct it_resp *rel_alias_get(struct rel_ctx *c, const char *model, const char *alias)
{
    char path[256];
    struct it_resp *r = it_get(
        c->s, rel_path(path, sizeof(path), "/api/v1/models/%s/aliases/%s", model, alias), c->t.rd);

    it_expect_status(c->s, r, 200);
    return r;
}

/* "[{v,w},...]" of a routes array (version and weight only), for messages. */
static inline void rel_routes_text(const json_t *routes, char *out, size_t n)
{
    size_t i, o = 0;
    json_t *x;

    o += (size_t)snprintf(out + o, n - o, "[");
    json_array_foreach(routes, i, x)
    {
        if (o >= n)
            break;
        o += (size_t)snprintf(out + o, n - o, "%s{%lld,%lld}", i ? "," : "",
                              (long long)json_integer_value(json_object_get(x, "version")),
                              (long long)json_integer_value(json_object_get(x, "weight")));
    }
    if (o < n)
        snprintf(out + o, n - o, "]");
}

/*
 * Do routes hold exactly these (version, weight) pairs, in any order?
 * pairs: n pairs of json_int_t version, int weight.
 */
static inline bool rel_routes_match(const json_t *routes, size_t n, const json_int_t *pairs)
{
    size_t i, j;
    json_t *x;

    if (!json_is_array(routes) || json_array_size(routes) != n)
        return false;
    for (i = 0; i < n; i++) {
        bool found = false;
        json_array_foreach(routes, j, x)
        {
            if (json_integer_value(json_object_get(x, "version")) == pairs[2 * i] &&
                json_integer_value(json_object_get(x, "weight")) == pairs[2 * i + 1])
                found = true;
        }
        if (!found)
            return false;
    }
    return true;
}

#define rel_expect_routes(c, resp, routes, n, ...)                                                 \
    rel_expect_routes_at(c, resp, routes, n, (const json_int_t[]){__VA_ARGS__}, __FILE__, __LINE__)

static inline void rel_expect_routes_at(struct rel_ctx *c, const struct it_resp *resp,
                                        const json_t *routes, size_t n, const json_int_t *pairs,
                                        const char *file, int line)
{
    char got[512], want[512];
    size_t o = 0;

    (void)c;
    if (rel_routes_match(routes, n, pairs))
        return;
    rel_routes_text(routes, got, sizeof(got));
    o += (size_t)snprintf(want, sizeof(want), "[");
    for (size_t i = 0; i < n && o < sizeof(want); i++)
        o += (size_t)snprintf(want + o, sizeof(want) - o, "%s{%lld,%lld}", i ? "," : "",
                              (long long)pairs[2 * i], (long long)pairs[2 * i + 1]);
    if (o < sizeof(want))
        snprintf(want + o, sizeof(want) - o, "]");
    print_error("routes %s, want %s (version, weight; any order)\n", got, want);
    if (resp != NULL)
        print_error("request: %s\nstatus: %ld\nbody: %.2000s\n", resp->desc, resp->status,
                    resp->body);
    _fail(file, line);
}

/* Assert the alias's routes now. */
#define rel_expect_alias_routes(c, model, alias, n, ...)                                           \
    do {                                                                                           \
        struct it_resp *rel_a_ = rel_alias_get(c, model, alias);                                   \
        rel_expect_routes_at(c, rel_a_, json_object_get(rel_a_->json, "routes"), n,                \
                             (const json_int_t[]){__VA_ARGS__}, __FILE__, __LINE__);               \
        it_resp_free((c)->s, &rel_a_);                                                             \
    } while (0)

/*
 * The alias's last-known-good version through GET .../last-known-good: the
 * version, or 0 when the answer is 404 no_known_good. Anything else fails.
 */
static inline json_int_t rel_lkg(struct rel_ctx *c, const char *model, const char *alias)
{
    char path[256];
    struct it_resp *r = it_get(
        c->s,
        rel_path(path, sizeof(path), "/api/v1/models/%s/aliases/%s/last-known-good", model, alias),
        c->t.rd);
    json_int_t v;

    if (r->status == 404) {
        it_expect_error(c->s, r, 404, "no_known_good");
        it_resp_free(c->s, &r);
        return 0;
    }
    it_expect_status(c->s, r, 200);
    v = it_jint(r->json, "version");
    it_resp_free(c->s, &r);
    return v;
}

/* Does the version's bad_for list name the alias? */
static inline bool rel_bad_for(struct rel_ctx *c, const char *model, json_int_t version,
                               const char *alias)
{
    char path[256];
    struct it_resp *r = it_get(
        c->s,
        rel_path(path, sizeof(path), "/api/v1/models/%s/versions/%lld", model, (long long)version),
        c->t.rd);
    json_t *bad, *x;
    size_t i;
    bool found = false;

    it_expect_status(c->s, r, 200);
    bad = it_jarr(r->json, "bad_for");
    json_array_foreach(bad, i, x)
    {
        if (json_is_string(x) && strcmp(json_string_value(x), alias) == 0)
            found = true;
    }
    it_resp_free(c->s, &r);
    return found;
}

/* ---- policies ----------------------------------------------------------- */

/* PUT a policy (JSON text) with the admin token; asserts 200. */
static inline void rel_policy_put(struct rel_ctx *c, const char *model, const char *alias,
                                  const char *policy)
{
    char path[256];
    struct it_resp *r = it_jreq(
        c->s, "PUT", rel_path(path, sizeof(path), "/api/v1/models/%s/policies/%s", model, alias),
        c->s->admin_token, policy);

    it_expect_status(c->s, r, 200);
    it_resp_free(c->s, &r);
}

/* ---- promotions --------------------------------------------------------- */

/* POST /promotions with `token`; returns the response (not asserted). */
static inline struct it_resp *rel_promote_as(struct rel_ctx *c, const char *token,
                                             const char *model, json_int_t version,
                                             const char *alias)
{
    return it_jreq_v(c->s, "POST", "/api/v1/promotions", token,
                     json_pack("{ss sI ss ss}", "model", model, "version", version, "alias", alias,
                               "reason", "integration test"));
}

/* POST /promotions as the deployer; asserts 201 and copies the id. */
static inline struct it_resp *rel_promote(struct rel_ctx *c, const char *model, json_int_t version,
                                          const char *alias, char id[64])
{
    struct it_resp *r = rel_promote_as(c, c->t.dep, model, version, alias);

    it_expect_status(c->s, r, 201);
    snprintf(id, 64, "%s", it_jstr(r->json, "id"));
    assert_true(id[0] != '\0');
    return r;
}

static inline struct it_resp *rel_promotion_get(struct rel_ctx *c, const char *id)
{
    char path[256];
    struct it_resp *r =
        it_get(c->s, rel_path(path, sizeof(path), "/api/v1/promotions/%s", id), c->t.rd);

    it_expect_status(c->s, r, 200);
    return r;
}

/* POST an approval decision (comment may be NULL: left out). */
static inline struct it_resp *rel_decide(struct rel_ctx *c, const char *token, const char *id,
                                         const char *decision, const char *comment)
{
    char path[256];
    json_t *body = json_pack("{ss}", "decision", decision);

    if (comment != NULL)
        json_object_set_new(body, "comment", json_string(comment));
    return it_jreq_v(c->s, "POST",
                     rel_path(path, sizeof(path), "/api/v1/promotions/%s/approvals", id), token,
                     body);
}

static inline const char *rel_state(const struct it_resp *r)
{
    return it_jstr(r->json, "state");
}

static inline void rel_expect_state_at(const struct it_resp *r, const char *state, const char *file,
                                       int line)
{
    const char *got = json_string_value(json_object_get(r->json, "state"));

    if (got != NULL && strcmp(got, state) == 0)
        return;
    print_error("promotion state %s, want %s\nrequest: %s\nstatus: %ld\nbody: %.3000s\n",
                got ? got : "(none)", state, r->desc, r->status, r->body);
    _fail(file, line);
}
#define rel_expect_state(r, state) rel_expect_state_at(r, state, __FILE__, __LINE__)

static inline bool rel_terminal(const char *state)
{
    return strcmp(state, "succeeded") == 0 || strcmp(state, "rejected") == 0 ||
           strcmp(state, "aborted") == 0 || strcmp(state, "rolled_back") == 0;
}

/*
 * Poll GET /promotions/{id} until its state is `state`; fails when another
 * final state is reached or at the deadline. Returns the last answer.
 */
static inline struct it_resp *rel_wait_state_at(struct rel_ctx *c, const char *id,
                                                const char *state, int64_t timeout_ms,
                                                const char *file, int line)
{
    int64_t deadline = rel_now_ms() + rel_deadline_ms(timeout_ms);

    for (;;) {
        struct it_resp *r = rel_promotion_get(c, id);
        const char *got = rel_state(r);

        if (strcmp(got, state) == 0)
            return r;
        if (rel_terminal(got) || rel_now_ms() > deadline) {
            print_error("waiting for promotion %s to be %s: it is %s%s\nbody: %.3000s\n", id, state,
                        got, rel_terminal(got) ? " (final)" : " at the deadline", r->body);
            it_server_dump_log(c->s, 2048);
            _fail(file, line);
        }
        it_resp_free(c->s, &r);
        rel_pause_ms(50);
    }
}
#define rel_wait_state(c, id, state, timeout_ms)                                                   \
    rel_wait_state_at(c, id, state, timeout_ms, __FILE__, __LINE__)

/*
 * The first gate of a GateReport/Promotion "gates" array with this kind
 * whose name contains name_part (NULL: any), or NULL.
 */
static inline json_t *rel_find_gate(const json_t *gates, const char *kind, const char *name_part)
{
    size_t i;
    json_t *g;

    json_array_foreach(gates, i, g)
    {
        const char *k = json_string_value(json_object_get(g, "kind"));
        const char *n = json_string_value(json_object_get(g, "name"));

        if (k == NULL || strcmp(k, kind) != 0)
            continue;
        if (name_part == NULL || (n != NULL && strstr(n, name_part) != NULL))
            return g;
    }
    return NULL;
}

/* Assert one gate's shape (GateReport.gates[i]) and status. */
static inline void rel_expect_gate_at(const json_t *gates, const char *kind, const char *name_part,
                                      const char *status, const char *file, int line)
{
    json_t *g = rel_find_gate(gates, kind, name_part);
    const char *st;

    if (g == NULL) {
        char *dump = json_dumps(gates, JSON_COMPACT);

        print_error("no gate of kind %s named like '%s' in %.3000s\n", kind,
                    name_part ? name_part : "*", dump ? dump : "?");
        free(dump);
        _fail(file, line);
    }
    st = json_string_value(json_object_get(g, "status"));
    if (st == NULL || strcmp(st, status) != 0 || !json_is_string(json_object_get(g, "name")) ||
        json_object_get(g, "observed") == NULL || json_object_get(g, "expected") == NULL ||
        json_object_get(g, "detail") == NULL) {
        char *dump = json_dumps(g, JSON_COMPACT);

        print_error("gate %s, want status %s and members name, kind, status, observed, "
                    "expected, detail\n",
                    dump ? dump : "?", status);
        free(dump);
        _fail(file, line);
    }
}
#define rel_expect_gate(gates, kind, name_part, status)                                            \
    rel_expect_gate_at(gates, kind, name_part, status, __FILE__, __LINE__)

/* A gate's observed value as a number (fails when it is not one). */
static inline double rel_gate_observed(const json_t *gates, const char *kind, const char *name_part)
{
    json_t *g = rel_find_gate(gates, kind, name_part);
    json_t *o = json_object_get(g, "observed");

    if (!json_is_number(o)) {
        char *dump = json_dumps(g, JSON_COMPACT);

        fail_msg("gate %s: observed is not a number", dump ? dump : "(missing)");
    }
    return json_number_value(o);
}

/* Does a gate's expected value state the bound (a number, or text holding it)? */
static inline bool rel_gate_expects(const json_t *gates, const char *kind, const char *name_part,
                                    double bound)
{
    json_t *e = json_object_get(rel_find_gate(gates, kind, name_part), "expected");
    char a[64], b[64];

    if (json_is_number(e))
        return fabs(json_number_value(e) - bound) < 1e-9;
    if (!json_is_string(e))
        return false;
    snprintf(a, sizeof(a), "%g", bound);
    snprintf(b, sizeof(b), "%.15g", bound);
    return strstr(json_string_value(e), a) != NULL || strstr(json_string_value(e), b) != NULL;
}

/* ---- audit -------------------------------------------------------------- */

static inline void rel_expect_audit_ok(struct mg_server *s)
{
    struct it_resp *r = it_get(s, "/api/v1/audit/verify", s->admin_token);

    it_expect_status(s, r, 200);
    if (!json_is_true(json_object_get(r->json, "ok")))
        fail_msg("audit chain does not verify: %s", r->body);
    assert_true(it_jint(r->json, "entries") > 0);
    it_resp_free(s, &r);
}

#endif
