/*
 * ctl_fixture.c - the shared setup of the release control tests (ctl_fixture.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_fixture.h"

/* ---- the fake worker tables ------------------------------------------------------------ */

static struct cfx_call *record(struct ctl *ctl, void *impl, const char *what, const char *model,
                               const char *alias)
{
    struct cfx *c = impl;
    struct cfx_call *k;

    (void)ctl;
    assert_non_null(c);
    if (c->ncalls == CFX_MAX_CALLS)
        fail_msg("more than %d calls through the worker tables", CFX_MAX_CALLS);
    k = &c->calls[c->ncalls++];
    if (getenv("CFX_TRACE"))
        fprintf(stderr, "call %s %s/%s\n", what, model ? model : "", alias ? alias : "");
    memset(k, 0, sizeof(*k));
    snprintf(k->what, sizeof(k->what), "%s", what);
    snprintf(k->model, sizeof(k->model), "%s", model ? model : "");
    snprintf(k->alias, sizeof(k->alias), "%s", alias ? alias : "");
    return k;
}

static json_t *copy_of(const json_t *j)
{
    return j ? json_deep_copy(j) : NULL;
}

static void gw_kick(struct ctl *ctl)
{
    record(ctl, ctl->gw.impl, "gw.kick", NULL, NULL);
}

static void gw_poke(struct ctl *ctl)
{
    record(ctl, ctl->gw.impl, "gw.poke", NULL, NULL);
}

static void gw_wait(struct ctl *ctl, const char *model, const char *alias, int64_t gen,
                    int64_t deadline_ms, void (*wake)(void *arg), void *arg)
{
    (void)deadline_ms;
    record(ctl, ctl->gw.impl, "gw.wait", model, alias)->gen = gen;
    wake(arg); /* every gateway acknowledged at once */
}

static enum mg_code gw_alias_names(struct ctl *ctl, const char *model, const char *alias,
                                   const json_t *routes, const json_t *match, const json_t *shadow,
                                   json_t **out, struct mg_error *err)
{
    struct cfx *c = ctl->gw.impl;
    struct cfx_call *k = record(ctl, c, "gw.alias_names", model, alias);
    char name[160];

    k->routes = copy_of(routes);
    k->match = copy_of(match);
    k->shadow = copy_of(shadow);
    *out = NULL;
    if (c->refuse_names)
        return mg_fail(err, MG_EINVAL, NULL, "gateway '%s' makes a name that does not fit",
                       c->refuse_names);
    *out = json_array();
    if (c->names_gateway) {
        snprintf(name, sizeof(name), "%s-%s", model, alias);
        json_array_append_new(*out, json_pack("{s:s, s:s, s:s}", "gateway", c->names_gateway,
                                              "name", name, "scope", "alias"));
    }
    return MG_OK;
}

static enum mg_code gw_alias_check(struct ctl *ctl, const char *model, const char *alias,
                                   const json_t *match, const json_t *shadow, struct mg_error *err)
{
    struct cfx *c = ctl->gw.impl;
    struct cfx_call *k = record(ctl, c, "gw.alias_check", model, alias);

    k->match = copy_of(match);
    k->shadow = copy_of(shadow);
    if (c->refuse_check)
        return mg_fail(err, MG_EINVAL, "shadow", "gateway '%s' (haproxy) cannot mirror requests",
                       c->refuse_check);
    return MG_OK;
}

static void gw_version_names(struct ctl *ctl, const char *model, const char *alias, int64_t version,
                             struct ctl_version_names *out)
{
    record(ctl, ctl->gw.impl, "gw.version_names", model, alias)->version = version;
    memset(out, 0, sizeof(*out));
}

static enum mg_code rn_enqueue(struct ctl *ctl, int64_t leader_epoch, const char *model,
                               int64_t version, const char *trigger, const char *gpu_mode,
                               json_t **out, struct mg_error *err)
{
    struct cfx_call *k = record(ctl, ctl->rn.impl, "rn.enqueue", model, NULL);
    json_t *t = NULL;
    bool created = false;
    enum mg_code rc;

    k->version = version;
    k->leader_epoch = leader_epoch;
    snprintf(k->trigger, sizeof(k->trigger), "%s", trigger ? trigger : "");
    snprintf(k->gpu_mode, sizeof(k->gpu_mode), "%s", gpu_mode ? gpu_mode : "");
    /* As runner_enqueue does: the test is queued in the store. */
    rc = store_smoke_enqueue(ctl->store, leader_epoch, model, version, trigger, gpu_mode, &t,
                             &created, err);
    if (rc == MG_OK && out)
        *out = t;
    else
        json_decref(t);
    return rc;
}

static void rn_kick(struct ctl *ctl)
{
    record(ctl, ctl->rn.impl, "rn.kick", NULL, NULL);
}

static double rn_largest_gpu_gib(struct ctl *ctl)
{
    struct cfx *c = ctl->rn.impl;

    record(ctl, c, "rn.largest_gpu_gib", NULL, NULL);
    return c->largest_gpu_gib;
}

static void register_fakes(struct cfx *c)
{
    c->ctl.gw = (struct ctl_gateways){
        .impl = c,
        .kick = gw_kick,
        .poke = gw_poke,
        .wait = gw_wait,
        .alias_names = gw_alias_names,
        .alias_check = gw_alias_check,
        .version_names = gw_version_names,
    };
    c->ctl.rn = (struct ctl_runner){
        .impl = c,
        .enqueue = rn_enqueue,
        .kick = rn_kick,
        .largest_gpu_gib = rn_largest_gpu_gib,
    };
}

void cfx_unregister(struct cfx *c)
{
    memset(&c->ctl.gw, 0, sizeof(c->ctl.gw));
    memset(&c->ctl.rn, 0, sizeof(c->ctl.rn));
}

void cfx_calls_reset(struct cfx *c)
{
    for (size_t i = 0; i < c->ncalls; i++) {
        json_decref(c->calls[i].routes);
        json_decref(c->calls[i].match);
        json_decref(c->calls[i].shadow);
    }
    c->ncalls = 0;
}

size_t cfx_count(const struct cfx *c, const char *what)
{
    size_t n = 0;

    for (size_t i = 0; i < c->ncalls; i++)
        n += strcmp(c->calls[i].what, what) == 0;
    return n;
}

const struct cfx_call *cfx_last(const struct cfx *c, const char *what)
{
    for (size_t i = c->ncalls; i-- > 0;) {
        if (strcmp(c->calls[i].what, what) == 0)
            return &c->calls[i];
    }
    return NULL;
}

/* ---- setup ------------------------------------------------------------------------------ */

int cfx_setup(void **state)
{
    struct cfx *c = calloc(1, sizeof(*c));
    void *fs = NULL;

    if (c == NULL || fx_setup(&fs) != 0) {
        free(c);
        return -1;
    }
    c->fx = fs;
    c->ctl.cfg = &c->cfg; /* zeroed: SQLite, no options */
    c->ctl.store = c->fx->st;
    c->ctl.crash_at = NULL;
    c->largest_gpu_gib = -1;
    register_fakes(c);
    /* The runner gateway hears every alias: out of the way, so the outbox rows are edge's. */
    if (store_gateway_disable(c->fx->st, "runner", "not under test", &c->fx->err) != MG_OK) {
        fprintf(stderr, "store_gateway_disable: %s\n", c->fx->err.message);
        return -1;
    }
    fx_gateway(c->fx, "edge", NULL, NULL);
    *state = c;
    return 0;
}

int cfx_teardown(void **state)
{
    struct cfx *c = *state;
    void *fs = c->fx;
    int r;

    cfx_calls_reset(c);
    r = fx_teardown(&fs);
    free(c);
    return r;
}

/* ---- steps ------------------------------------------------------------------------------ */

void cfx_model(struct cfx *c, const char *model, int n, const double *aucs)
{
    char art[72];

    fx_put_blob(c->fx, "weights", art);
    fx_model(c->fx, model);
    for (int i = 1; i <= n; i++) {
        json_t *req = json_pack("{s:s}", "artifact", art);

        if (aucs)
            json_object_set_new(req, "metrics", json_pack("{s:f}", "auc", aucs[i - 1]));
        assert_int_equal(fx_version(c->fx, model, req), i);
    }
}

void cfx_policy(struct cfx *c, const char *model, const char *alias, const char *policy)
{
    json_error_t je;
    json_t *j = json_loads(policy, 0, &je), *out = NULL;

    if (j == NULL)
        fail_msg("policy is not JSON: %s: %s", je.text, policy);
    if (store_policy_put(c->fx->st, "admin", model, alias, j, &out, &c->fx->err) != MG_OK)
        fail_msg("store_policy_put(%s/%s): %s", model, alias, c->fx->err.message);
    json_decref(out);
    json_decref(j);
}

void cfx_alias_to(struct cfx *c, const char *model, const char *alias, int64_t version)
{
    struct mg_routes routes = {.nroutes = 1, .routes = {{version, 100}}};
    json_t *out = NULL;

    if (rel_alias_set(&c->ctl, "dep", model, alias, &routes, &out, &c->fx->err) != MG_OK)
        fail_msg("rel_alias_set(%s/%s): %s", model, alias, c->fx->err.message);
    json_decref(out);
}

json_t *cfx_alias(struct cfx *c, const char *model, const char *alias)
{
    json_t *a = NULL;

    if (rel_alias_get(&c->ctl, model, alias, &a, &c->fx->err) != MG_OK)
        fail_msg("rel_alias_get(%s/%s): %s", model, alias, c->fx->err.message);
    return a;
}

int64_t cfx_generation(struct cfx *c, const char *model, const char *alias)
{
    json_t *facts = NULL;
    int64_t g;

    if (store_alias_facts(c->fx->st, model, alias, &facts, &c->fx->err) != MG_OK)
        fail_msg("store_alias_facts(%s/%s): %s", model, alias, c->fx->err.message);
    g = json_integer_value(json_object_get(facts, "generation"));
    json_decref(facts);
    return g;
}

static bool routes_match(const json_t *routes, size_t n, const int64_t *pairs)
{
    size_t i, j;
    json_t *r;

    if (json_array_size(routes) != n)
        return false;
    for (i = 0; i < n; i++) {
        bool found = false;

        json_array_foreach(routes, j, r)
        {
            if (json_integer_value(json_object_get(r, "version")) == pairs[2 * i] &&
                json_integer_value(json_object_get(r, "weight")) == pairs[2 * i + 1])
                found = true;
        }
        if (!found)
            return false;
    }
    return true;
}

void cfx_expect_routes_at(const json_t *routes, size_t n, const int64_t *pairs, const char *file,
                          int line)
{
    if (!routes_match(routes, n, pairs)) {
        char *text = routes ? json_dumps(routes, JSON_COMPACT) : NULL;
        char want[256] = "";
        size_t off = 0;

        for (size_t i = 0; i < n && off < sizeof(want); i++)
            off +=
                (size_t)snprintf(want + off, sizeof(want) - off, "%s{v%lld: %lld}", i ? ", " : "",
                                 (long long)pairs[2 * i], (long long)pairs[2 * i + 1]);
        fprintf(stderr, "%s:%d: routes %s, want %s\n", file, line, text ? text : "(none)", want);
        free(text);
        fail_msg("%s:%d: unexpected routes", file, line);
    }
}

int64_t cfx_outbox_gen(struct cfx *c, const char *model, const char *alias)
{
    json_t *d = fx_delivery(c->fx, "edge", model, alias);
    int64_t g = d ? json_integer_value(json_object_get(d, "generation")) : -1;

    json_decref(d);
    return g;
}

int64_t cfx_lkg(struct cfx *c, const char *model, const char *alias)
{
    json_t *l = NULL;
    struct mg_error err;
    enum mg_code rc = rel_lkg(&c->ctl, model, alias, &l, &err);
    int64_t v;

    if (rc == MG_ENOLKG)
        return 0;
    if (rc != MG_OK)
        fail_msg("rel_lkg(%s/%s): %s", model, alias, err.message);
    v = json_integer_value(json_object_get(l, "version"));
    json_decref(l);
    return v;
}

struct store_principal cfx_who(const char *name)
{
    struct store_principal p;

    memset(&p, 0, sizeof(p));
    snprintf(p.name, sizeof(p.name), "%s", name);
    snprintf(p.kind, sizeof(p.kind), "token");
    return p;
}

json_t *cfx_promote(struct cfx *c, const char *model, int64_t version, const char *alias,
                    char id[64])
{
    struct store_principal dep = cfx_who("dep");
    json_t *p = NULL;

    if (rel_promotion_create(&c->ctl, &dep, model, version, alias, "test", &p, &c->fx->err) !=
        MG_OK)
        fail_msg("rel_promotion_create(%s v%lld -> %s): %s", model, (long long)version, alias,
                 c->fx->err.message);
    snprintf(id, 64, "%s", json_string_value(json_object_get(p, "id")));
    assert_true(strncmp(id, "prm_", 4) == 0);
    return p;
}

json_t *cfx_promotion(struct cfx *c, const char *id)
{
    json_t *p = NULL;

    if (rel_promotion_get(&c->ctl, id, &p, &c->fx->err) != MG_OK)
        fail_msg("rel_promotion_get(%s): %s", id, c->fx->err.message);
    return p;
}

void cfx_expect_state_at(struct cfx *c, const char *id, const char *state, const char *file,
                         int line)
{
    json_t *p = cfx_promotion(c, id);
    const char *s = json_string_value(json_object_get(p, "state"));

    if (s == NULL || strcmp(s, state) != 0) {
        char *text = json_dumps(p, JSON_COMPACT);

        fprintf(stderr, "%s:%d: promotion %s is %s, want %s: %s\n", file, line, id,
                s ? s : "(none)", state, text ? text : "");
        free(text);
        json_decref(p);
        fail_msg("%s:%d: unexpected promotion state", file, line);
    }
    json_decref(p);
}

int64_t cfx_rollout_int(struct cfx *c, const char *id, const char *field)
{
    json_t *p = cfx_promotion(c, id);
    int64_t v = json_integer_value(json_object_get(json_object_get(p, "rollout"), field));

    json_decref(p);
    return v;
}

bool cfx_bad_for(struct cfx *c, const char *model, int64_t version, const char *alias)
{
    json_t *v = NULL, *a;
    size_t i;
    bool found = false;

    if (store_version_get(c->fx->st, model, version, &v, &c->fx->err) != MG_OK)
        fail_msg("store_version_get(%s v%lld): %s", model, (long long)version, c->fx->err.message);
    json_array_foreach(json_object_get(v, "bad_for"), i, a)
    {
        if (strcmp(json_string_value(a), alias) == 0)
            found = true;
    }
    json_decref(v);
    return found;
}

bool cfx_has_event(struct cfx *c, const char *id, const char *type, const char *part)
{
    json_t *p = cfx_promotion(c, id), *e;
    size_t i;
    bool found = false;

    json_array_foreach(json_object_get(p, "events"), i, e)
    {
        const char *t = json_string_value(json_object_get(e, "type"));
        const char *d = json_string_value(json_object_get(e, "detail"));

        if (t && strcmp(t, type) == 0 && (part == NULL || (d && strstr(d, part))))
            found = true;
    }
    json_decref(p);
    return found;
}

void cfx_smoke_finish(struct cfx *c, const char *model, int64_t version, const char *state,
                      const char *reason)
{
    json_t *job = NULL, *res;
    bool found = false;

    if (store_smoke_claim(c->fx->st, &job, &found, &c->fx->err) != MG_OK)
        fail_msg("store_smoke_claim: %s", c->fx->err.message);
    if (!found)
        fail_msg("no smoke test of %s v%lld is queued", model, (long long)version);
    assert_string_equal(json_string_value(json_object_get(job, "model")), model);
    assert_int_equal(json_integer_value(json_object_get(job, "version")), version);
    res = json_pack("{s:s, s:s?, s:O}", "state", state, "reason", reason, "claim",
                    json_object_get(job, "claim"));
    if (store_smoke_finish(c->fx->st, json_string_value(json_object_get(job, "id")), res,
                           &c->fx->err) != MG_OK)
        fail_msg("store_smoke_finish: %s", c->fx->err.message);
    json_decref(res);
    json_decref(job);
}

const char *cfx_smoke_state(struct cfx *c, const char *model, int64_t version, char out[16])
{
    json_t *t = NULL;
    struct mg_error err;

    out[0] = '\0';
    if (store_smoke_latest(c->fx->st, model, version, 0, &t, &err) == MG_OK)
        snprintf(out, 16, "%s", json_string_value(json_object_get(t, "state")));
    json_decref(t);
    return out;
}
