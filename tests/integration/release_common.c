/*
 * release_common.c - see release_common.h.
 */
#include "release_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rel_ctx cx;

static void rel_ctx_init(struct rel_ctx *c)
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

static void rel_ctx_free(struct rel_ctx *c)
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

int rel_group_setup(void **state)
{
    rel_ctx_init(&cx);
    *state = cx.s;
    return 0;
}

int rel_group_teardown(void **state)
{
    rel_ctx_free(&cx);
    *state = NULL;
    return 0;
}

/* ---- versions and aliases --------------------------------------------------- */

json_t *rel_metrics(double auc, double p95)
{
    json_t *metrics = json_object();

    if (auc >= 0)
        json_object_set_new(metrics, "auc", json_real(auc));
    if (p95 >= 0)
        json_object_set_new(metrics, "p95_latency_ms", json_real(p95));
    return json_pack("{so}", "metrics", metrics);
}

bool rel_routes_match(const json_t *routes, size_t n, const json_int_t *pairs)
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

void rel_expect_routes_at(struct rel_ctx *c, const struct it_resp *resp, const json_t *routes,
                          size_t n, const json_int_t *pairs, const char *file, int line)
{
    char got[512], want[512];
    size_t o = 0;

    (void)c;
    if (rel_routes_match(routes, n, pairs))
        return;
    it_routes_text(routes, got, sizeof(got));
    want[0] = '\0';
    for (size_t i = 0; i < n && o < sizeof(want); i++)
        o += (size_t)snprintf(want + o, sizeof(want) - o, "%sv%lld:%lld", i ? "," : "",
                              (long long)pairs[2 * i], (long long)pairs[2 * i + 1]);
    print_error("routes %s, want %s (version:weight; any order)\n", got, want);
    if (resp != NULL)
        print_error("request: %s\nstatus: %ld\nbody: %.2000s\n", resp->desc, resp->status,
                    resp->body);
    _fail(file, line);
}

json_int_t rel_lkg(struct rel_ctx *c, const char *model, const char *alias)
{
    char path[256];
    struct it_resp *r = it_get(
        c->s,
        it_fmt(path, sizeof(path), "/api/v1/models/%s/aliases/%s/last-known-good", model, alias),
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

bool rel_bad_for(struct rel_ctx *c, const char *model, json_int_t version, const char *alias)
{
    char path[256];
    struct it_resp *r = it_get(
        c->s,
        it_fmt(path, sizeof(path), "/api/v1/models/%s/versions/%lld", model, (long long)version),
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

/* ---- promotions --------------------------------------------------------- */

struct it_resp *rel_decide(struct rel_ctx *c, const char *token, const char *id,
                           const char *decision, const char *comment)
{
    char path[256];
    json_t *body = json_pack("{ss}", "decision", decision);

    if (comment != NULL)
        json_object_set_new(body, "comment", json_string(comment));
    return it_jreq_v(c->s, "POST",
                     it_fmt(path, sizeof(path), "/api/v1/promotions/%s/approvals", id), token,
                     body);
}

const char *rel_state(const struct it_resp *r)
{
    return it_jstr(r->json, "state");
}

void rel_expect_state_at(const struct it_resp *r, const char *state, const char *file, int line)
{
    const char *got = json_string_value(json_object_get(r->json, "state"));

    if (got != NULL && strcmp(got, state) == 0)
        return;
    print_error("promotion state %s, want %s\nrequest: %s\nstatus: %ld\nbody: %.3000s\n",
                got ? got : "(none)", state, r->desc, r->status, r->body);
    _fail(file, line);
}

/* ---- gates -------------------------------------------------------------- */

void rel_expect_gate_at(const json_t *gates, const char *kind, const char *name_part,
                        const char *status, const char *file, int line)
{
    json_t *g = it_gate_find(gates, kind, name_part);
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

double rel_gate_observed(const json_t *gates, const char *kind, const char *name_part)
{
    json_t *g = it_gate_find(gates, kind, name_part);
    json_t *o = json_object_get(g, "observed");

    if (!json_is_number(o)) {
        char *dump = json_dumps(g, JSON_COMPACT);

        fail_msg("gate %s: observed is not a number", dump ? dump : "(missing)");
    }
    return json_number_value(o);
}

bool rel_gate_expects(const json_t *gates, const char *kind, const char *name_part, double bound)
{
    json_t *e = json_object_get(it_gate_find(gates, kind, name_part), "expected");
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

void rel_expect_audit_ok(struct mg_server *s)
{
    struct it_resp *r = it_get(s, "/api/v1/audit/verify", s->admin_token);

    it_expect_status(s, r, 200);
    if (!json_is_true(json_object_get(r->json, "ok")))
        fail_msg("audit chain does not verify: %s", r->body);
    assert_true(it_jint(r->json, "entries") > 0);
    it_resp_free(s, &r);
}
