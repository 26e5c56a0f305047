/*
 * test_release.c - release control's aliases (control/release.c, release_aliases.c) and the
 * seams to the workers (control/control.c), with no HTTP and no worker: a real SQLite store
 * and recording fakes in ctl->gw and ctl->rn (ctl_fixture.h).
 *
 * A direct set of an unprotected alias moves the generation, reaches the outbox and kicks the
 * gateways, after the gateways checked it and listed their names for it; a gateway that
 * cannot apply it, or whose name does not fit, refuses it and nothing changes; a protected
 * alias refuses direct changes; rollback goes back to the last-known-good and marks the
 * version it left bad; the crash point fires only when named; empty worker tables do the
 * harmless thing (a wait wakes, queueing a test is MG_EUNAVAIL).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "control/release_int.h"
#include "ctl_fixture.h"

static json_t *routes_of(int64_t version)
{
    return json_pack("[{s:I, s:i}]", "version", (json_int_t)version, "weight", 100);
}

/* The routes record of routes and shadow (either may be NULL), in one of 8 slots used in
 * turn. */
static const struct mg_routes *rec_of(const json_t *routes, const json_t *shadow)
{
    static struct mg_routes ring[8];
    static unsigned next;
    struct mg_routes *r = &ring[next++ % 8];

    *r = fx_routes(routes, NULL, shadow);
    return r;
}

static size_t history_len(struct cfx *c, const char *model, const char *alias)
{
    struct store_page page = {.limit = 1000, .page_token = NULL};
    json_t *h = NULL;
    size_t n;

    if (store_alias_history(c->fx->st, model, alias, &page, &h, &c->fx->err) != MG_OK)
        fail_msg("store_alias_history: %s", c->fx->err.message);
    n = json_array_size(json_object_get(h, "items"));
    json_decref(h);
    return n;
}

/* The newest history entry's field (NEW copy of a string, "" when none). */
static char *history_top(struct cfx *c, const char *model, const char *alias, const char *field)
{
    struct store_page page = {.limit = 1, .page_token = NULL};
    json_t *h = NULL;
    const char *v;
    char *out;

    if (store_alias_history(c->fx->st, model, alias, &page, &h, &c->fx->err) != MG_OK)
        fail_msg("store_alias_history: %s", c->fx->err.message);
    v = json_string_value(json_object_get(json_array_get(json_object_get(h, "items"), 0), field));
    out = strdup(v ? v : "");
    json_decref(h);
    return out;
}

/* Unprotected: the gateways check the change, list their names for it, the store commits it
 * (generation, history, the edge gateway's outbox row), then the gateways are kicked. */
static void test_alias_set_commits_and_kicks(void **state)
{
    struct cfx *c = *state;
    json_t *routes = routes_of(1), *out = NULL;
    const struct cfx_call *k;

    cfx_model(c, "m", 2, NULL);
    assert_int_equal(cfx_generation(c, "m", "prod"), 0);
    assert_int_equal(cfx_outbox_gen(c, "m", "prod"), -1);
    cfx_calls_reset(c);

    assert_int_equal(
        rel_alias_set(&c->ctl, "dep", "m", "prod", rec_of(routes, NULL), &out, &c->fx->err), MG_OK);
    assert_int_equal(json_integer_value(json_object_get(out, "generation")), 1);
    cfx_expect_routes(json_object_get(out, "routes"), 1, 1, 100);
    /* A direct set at 100% is known good at once. */
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(out, "last_known_good"), "version")), 1);
    json_decref(out);
    assert_int_equal(cfx_generation(c, "m", "prod"), 1);
    assert_int_equal(cfx_outbox_gen(c, "m", "prod"), 1);
    assert_int_equal(history_len(c, "m", "prod"), 1);
    assert_int_equal(cfx_lkg(c, "m", "prod"), 1);

    /* The calls, in order: check, names for the commit, kick after it. */
    assert_true(c->ncalls >= 3);
    assert_string_equal(c->calls[0].what, "gw.alias_check");
    assert_string_equal(c->calls[0].model, "m");
    assert_string_equal(c->calls[0].alias, "prod");
    assert_int_equal(json_array_size(c->calls[0].match), 0); /* none: [] and null */
    assert_true(json_is_null(c->calls[0].shadow));
    assert_string_equal(c->calls[1].what, "gw.alias_names");
    cfx_expect_routes(c->calls[1].routes, 1, 1, 100);
    assert_string_equal(c->calls[2].what, "gw.kick");
    assert_int_equal(cfx_count(c, "gw.kick"), 1);

    /* The next set moves everything on by one. */
    json_decref(routes);
    routes = json_pack("[{s:i, s:i}, {s:i, s:i}]", "version", 1, "weight", 70, "version", 2,
                       "weight", 30);
    assert_int_equal(
        rel_alias_set(&c->ctl, "dep", "m", "prod", rec_of(routes, NULL), NULL, &c->fx->err), MG_OK);
    assert_int_equal(cfx_generation(c, "m", "prod"), 2);
    assert_int_equal(cfx_outbox_gen(c, "m", "prod"), 2);
    assert_int_equal(cfx_count(c, "gw.kick"), 2);
    cfx_expect_alias_routes(c, "m", "prod", 2, 1, 70, 2, 30);
    k = cfx_last(c, "gw.alias_names");
    cfx_expect_routes(k->routes, 2, 1, 70, 2, 30);
    /* A split is not known good: the LKG stays v1. */
    assert_int_equal(cfx_lkg(c, "m", "prod"), 1);
    json_decref(routes);
}

/* A gateway hearing the alias cannot apply the shadow: MG_EINVAL naming it, and nothing
 * changed — no generation, no history, no outbox row, no kick, no names claimed. */
static void test_alias_set_refused_by_gateway_check(void **state)
{
    struct cfx *c = *state;
    json_t *routes = routes_of(1);
    json_t *shadow = json_pack("{s:i, s:i}", "version", 2, "percent", 100), *out = NULL;

    cfx_model(c, "m", 2, NULL);
    cfx_alias_to(c, "m", "prod", 1);
    cfx_calls_reset(c);
    c->refuse_check = "lb-haproxy";

    assert_int_equal(
        rel_alias_set(&c->ctl, "dep", "m", "prod", rec_of(routes, shadow), &out, &c->fx->err),
        MG_EINVAL);
    assert_null(out);
    assert_non_null(strstr(c->fx->err.message, "lb-haproxy"));
    assert_int_equal(cfx_count(c, "gw.alias_check"), 1);
    assert_int_equal(
        json_integer_value(json_object_get(cfx_last(c, "gw.alias_check")->shadow, "version")), 2);
    assert_int_equal(cfx_count(c, "gw.alias_names"), 0);
    assert_int_equal(cfx_count(c, "gw.kick"), 0);
    assert_int_equal(cfx_generation(c, "m", "prod"), 1);
    assert_int_equal(cfx_outbox_gen(c, "m", "prod"), 1);
    assert_int_equal(history_len(c, "m", "prod"), 1);
    {
        json_t *a = cfx_alias(c, "m", "prod");

        assert_true(json_is_null(json_object_get(a, "shadow")));
        json_decref(a);
    }

    /* The same change passes once the gateway can apply it. */
    c->refuse_check = NULL;
    assert_int_equal(
        rel_alias_set(&c->ctl, "dep", "m", "prod", rec_of(routes, shadow), NULL, &c->fx->err),
        MG_OK);
    assert_int_equal(cfx_generation(c, "m", "prod"), 2);
    assert_int_equal(cfx_outbox_gen(c, "m", "prod"), 2);
    json_decref(routes);
    json_decref(shadow);
}

/* A gateway whose template makes a name that does not fit refuses the commit: nothing
 * changes. Names a gateway lists are shown on the alias. */
static void test_alias_names_refused_and_shown(void **state)
{
    struct cfx *c = *state;
    json_t *routes = routes_of(2), *a, *names;

    cfx_model(c, "m", 2, NULL);
    cfx_alias_to(c, "m", "prod", 1);
    cfx_calls_reset(c);
    c->refuse_names = "edge-nginx";
    assert_int_equal(
        rel_alias_set(&c->ctl, "dep", "m", "prod", rec_of(routes, NULL), NULL, &c->fx->err),
        MG_EINVAL);
    assert_non_null(strstr(c->fx->err.message, "edge-nginx"));
    assert_int_equal(cfx_count(c, "gw.kick"), 0);
    assert_int_equal(cfx_generation(c, "m", "prod"), 1);
    assert_int_equal(cfx_outbox_gen(c, "m", "prod"), 1);

    c->refuse_names = NULL;
    c->names_gateway = "edge-nginx";
    assert_int_equal(
        rel_alias_set(&c->ctl, "dep", "m", "prod", rec_of(routes, NULL), NULL, &c->fx->err), MG_OK);
    a = cfx_alias(c, "m", "prod");
    names = json_object_get(json_object_get(a, "gateway_names"), "edge-nginx");
    assert_int_equal(json_array_size(names), 1);
    assert_string_equal(json_string_value(json_array_get(names, 0)), "m-prod");
    json_decref(a);
    json_decref(routes);
}

/* A policy protects the alias: a direct set or delete is MG_EPROTECTED and changes nothing.
 * Without one, a delete commits like a set. */
static void test_protected_alias_refuses_direct_changes(void **state)
{
    struct cfx *c = *state;
    json_t *routes = routes_of(2), *a;

    cfx_model(c, "m", 2, NULL);
    cfx_alias_to(c, "m", "prod", 1);
    cfx_alias_to(c, "m", "staging", 1);
    cfx_policy(c, "m", "prod", "{\"rollout\":{\"steps\":[100]}}");
    cfx_calls_reset(c);

    assert_int_equal(
        rel_alias_set(&c->ctl, "dep", "m", "prod", rec_of(routes, NULL), NULL, &c->fx->err),
        MG_EPROTECTED);
    assert_int_equal(rel_alias_delete(&c->ctl, "dep", "m", "prod", &c->fx->err), MG_EPROTECTED);
    assert_int_equal(cfx_count(c, "gw.kick"), 0);
    assert_int_equal(cfx_generation(c, "m", "prod"), 1);
    assert_int_equal(cfx_outbox_gen(c, "m", "prod"), 1);
    a = cfx_alias(c, "m", "prod");
    assert_true(json_is_true(json_object_get(a, "protected")));
    cfx_expect_routes(json_object_get(a, "routes"), 1, 1, 100);
    json_decref(a);

    /* Unprotected: deleted, the gateways hear it. */
    assert_int_equal(rel_alias_delete(&c->ctl, "dep", "m", "staging", &c->fx->err), MG_OK);
    assert_int_equal(cfx_count(c, "gw.kick"), 1);
    assert_int_equal(rel_alias_get(&c->ctl, "m", "staging", &a, &c->fx->err), MG_ENOTFOUND);
    assert_int_equal(cfx_outbox_gen(c, "m", "staging"), 2);
    assert_int_equal(rel_alias_delete(&c->ctl, "dep", "m", "staging", &c->fx->err), MG_ENOTFOUND);
    json_decref(routes);
}

/* Rollback: 100% to the last-known-good other than the newest routed version, which is
 * marked bad and is never the LKG again; with nowhere to go, MG_ENOKNOWNGOOD and nothing
 * changes. */
static void test_rollback_to_last_known_good(void **state)
{
    struct cfx *c = *state;
    json_t *out = NULL;
    char *kind, *reason;

    cfx_model(c, "m", 3, NULL);
    cfx_alias_to(c, "m", "prod", 1);
    cfx_alias_to(c, "m", "prod", 2);
    assert_int_equal(cfx_lkg(c, "m", "prod"), 2);
    cfx_calls_reset(c);

    assert_int_equal(
        rel_rollback(&c->ctl, "dep", "m", "prod", "bad predictions", &out, &c->fx->err), MG_OK);
    cfx_expect_routes(json_object_get(out, "routes"), 1, 1, 100);
    assert_int_equal(json_integer_value(json_object_get(out, "generation")), 3);
    json_decref(out);
    assert_int_equal(cfx_outbox_gen(c, "m", "prod"), 3);
    assert_int_equal(cfx_count(c, "gw.kick"), 1);
    assert_true(cfx_bad_for(c, "m", 2, "prod"));
    assert_false(cfx_bad_for(c, "m", 1, "prod"));
    assert_int_equal(cfx_lkg(c, "m", "prod"), 1);
    kind = history_top(c, "m", "prod", "kind");
    reason = history_top(c, "m", "prod", "reason");
    assert_string_equal(kind, "rollback");
    assert_string_equal(reason, "bad predictions");
    free(kind);
    free(reason);

    /* v3 set directly, rolled back: back to v1, skipping v2 (rolled back once). */
    cfx_alias_to(c, "m", "prod", 3);
    assert_int_equal(cfx_lkg(c, "m", "prod"), 3);
    assert_int_equal(rel_rollback(&c->ctl, "dep", "m", "prod", "again", &out, &c->fx->err), MG_OK);
    json_decref(out);
    out = NULL;
    cfx_expect_alias_routes(c, "m", "prod", 1, 1, 100);
    assert_true(cfx_bad_for(c, "m", 3, "prod"));

    /* Nothing else to go back to. */
    cfx_calls_reset(c);
    assert_int_equal(rel_rollback(&c->ctl, "dep", "m", "prod", "no", &out, &c->fx->err),
                     MG_ENOKNOWNGOOD);
    assert_null(out);
    assert_int_equal(cfx_generation(c, "m", "prod"), 5);
    assert_int_equal(cfx_outbox_gen(c, "m", "prod"), 5);
    assert_int_equal(cfx_count(c, "gw.kick"), 0);
    assert_false(cfx_bad_for(c, "m", 1, "prod"));
}

/* The LKG read: none on a fresh alias (MG_ENOLKG), then the version with its artifact. */
static void test_lkg(void **state)
{
    struct cfx *c = *state;
    json_t *l = NULL;

    cfx_model(c, "m", 1, NULL);
    assert_int_equal(rel_lkg(&c->ctl, "m", "prod", &l, &c->fx->err), MG_ENOLKG);
    assert_null(l);
    cfx_alias_to(c, "m", "prod", 1);
    assert_int_equal(rel_lkg(&c->ctl, "m", "prod", &l, &c->fx->err), MG_OK);
    assert_int_equal(json_integer_value(json_object_get(l, "version")), 1);
    assert_int_equal(json_integer_value(json_object_get(l, "generation")), 1);
    assert_non_null(strstr(json_string_value(json_object_get(l, "signature_url")),
                           "/models/m/versions/1/signature"));
    assert_true(strncmp(json_string_value(json_object_get(l, "artifact")), "sha256:", 7) == 0);
    json_decref(l);
}

/* rel_lkg (history read newest first, only until an entry holds) agrees with the choice made
 * on the whole facts (rel_facts_lkg over store_alias_facts), with that entry's generation and
 * time. */
static size_t *last_partial; /* when set: how many entries rel_alias_facts read last */

static void expect_lkg_as_facts(struct cfx *c, const char *alias)
{
    json_t *facts = NULL, *entry = NULL, *l = NULL;
    int64_t want;
    enum mg_code rc;

    assert_int_equal(store_alias_facts(c->ctl.store, "m", alias, &facts, &c->fx->err), MG_OK);
    want = rel_facts_lkg(facts, 0, &entry);
    rc = rel_lkg(&c->ctl, "m", alias, &l, &c->fx->err);
    if (want == 0) {
        assert_int_equal(rc, MG_ENOLKG);
        assert_null(l);
    } else {
        assert_int_equal(rc, MG_OK);
        assert_int_equal(json_integer_value(json_object_get(l, "version")), want);
        assert_int_equal(json_integer_value(json_object_get(l, "generation")),
                         json_integer_value(json_object_get(entry, "generation")));
        assert_string_equal(json_string_value(json_object_get(l, "since")),
                            json_string_value(json_object_get(entry, "at")));
    }
    json_decref(l);
    /* The facts release control decides on read only the newest entries that decide, and
     * decide as the whole history does. */
    {
        json_t *part = NULL, *pentry = NULL;
        int64_t newest = rel_facts_newest_routed(facts);

        assert_int_equal(rel_alias_facts(&c->ctl, "m", alias, &part, &c->fx->err), MG_OK);
        assert_int_equal(rel_facts_lkg(part, 0, &pentry), want);
        assert_ptr_equal(pentry == NULL, entry == NULL);
        if (entry)
            assert_int_equal(json_integer_value(json_object_get(pentry, "generation")),
                             json_integer_value(json_object_get(entry, "generation")));
        assert_int_equal(rel_facts_newest_routed(part), newest);
        assert_int_equal(rel_facts_lkg(part, newest, NULL), rel_facts_lkg(facts, newest, NULL));
        assert_int_equal(json_integer_value(json_object_get(part, "generation")),
                         json_integer_value(json_object_get(facts, "generation")));
        assert_true(json_array_size(json_object_get(part, "history")) <=
                    json_array_size(json_object_get(facts, "history")));
        if (last_partial != NULL)
            *last_partial = json_array_size(json_object_get(part, "history"));
        json_decref(part);
    }
    json_decref(facts);
}

static void test_lkg_reads_history_as_facts_do(void **state)
{
    struct cfx *c = *state;
    const int64_t two[] = {2};
    struct store_status_change ch = {"m", two, 1, "archived", NULL, NULL, "version.archive", NULL};
    json_t *out = NULL, *gens = NULL;
    int i;

    cfx_model(c, "m", 4, NULL);
    expect_lkg_as_facts(c, "prod");
    for (i = 0; i < 40; i++) /* a long history: v1, v2, v3, v1, ... */
        cfx_alias_to(c, "m", "prod", 1 + i % 3);
    {
        size_t read = 0;

        last_partial = &read;
        expect_lkg_as_facts(c, "prod");
        last_partial = NULL;
        assert_int_equal(read, 8); /* the first page decides */
    }
    assert_int_equal(cfx_lkg(c, "m", "prod"), 1);
    /* Rolled back: v1 is bad from now on, the one before it (v3) is the LKG. */
    assert_int_equal(rel_rollback(&c->ctl, "dep", "m", "prod", "bad", &out, &c->fx->err), MG_OK);
    json_decref(out);
    expect_lkg_as_facts(c, "prod");
    assert_int_equal(cfx_lkg(c, "m", "prod"), 3);
    cfx_alias_to(c, "m", "prod", 2);
    cfx_alias_to(c, "m", "prod", 4);
    cfx_alias_to(c, "m", "prod", 1);
    expect_lkg_as_facts(c, "prod");
    /* Archived: v2 is never the LKG again; deeper in history v3 still is one. */
    gens = json_pack("{s:I}", "prod", (json_int_t)cfx_generation(c, "m", "prod"));
    ch.generations = gens;
    cfx_alias_to(c, "m", "prod", 2);
    json_object_set_new(gens, "prod", json_integer(cfx_generation(c, "m", "prod")));
    cfx_alias_to(c, "m", "prod", 4);
    json_object_set_new(gens, "prod", json_integer(cfx_generation(c, "m", "prod")));
    assert_int_equal(store_version_set_status(c->ctl.store, "alice", &ch, &c->fx->err), MG_OK);
    json_decref(gens);
    expect_lkg_as_facts(c, "prod");
    assert_int_equal(cfx_lkg(c, "m", "prod"), 4);
    /* v4 rolled back: past the rollback entry, v4 (bad) and v2 (archived), to v1. */
    assert_int_equal(rel_rollback(&c->ctl, "dep", "m", "prod", "bad", &out, &c->fx->err), MG_OK);
    json_decref(out);
    out = NULL;
    expect_lkg_as_facts(c, "prod");
    assert_int_equal(cfx_lkg(c, "m", "prod"), 1);
    /* The LKG 46 entries deep (the read goes past its first pages): v3 and v4 set in turn,
     * then both archived. */
    for (i = 0; i < 45; i++)
        cfx_alias_to(c, "m", "prod", 3 + i % 2);
    {
        const int64_t both[] = {3, 4};
        struct store_status_change ch2 = {"m", both, 2, "archived", NULL, NULL, "version.archive",
                                          NULL};

        gens = json_pack("{s:I}", "prod", (json_int_t)cfx_generation(c, "m", "prod"));
        ch2.generations = gens;
        assert_int_equal(store_version_set_status(c->ctl.store, "alice", &ch2, &c->fx->err), MG_OK);
        json_decref(gens);
    }
    {
        size_t read = 0;

        last_partial = &read;
        expect_lkg_as_facts(c, "prod");
        last_partial = NULL;
        /* Past the first page (8) to the LKG 46 entries deep, not the 95 entries there are. */
        assert_true(read > 8 && read < 95);
    }
    assert_int_equal(cfx_lkg(c, "m", "prod"), 1);
    /* No alias: no LKG; no model: the model's not-found. */
    expect_lkg_as_facts(c, "canary");
    assert_int_equal(rel_lkg(&c->ctl, "nope", "prod", &out, &c->fx->err), MG_ENOTFOUND);
    assert_null(out);
}

static void woke(void *arg)
{
    (*(int *)arg)++;
}

/* No worker linked in: every wrapper does the harmless thing, and release control still
 * commits (the outbox holds the change for whichever replica delivers). */
static void test_empty_worker_tables(void **state)
{
    struct cfx *c = *state;
    json_t *t = NULL, *names = NULL, *payload = json_pack("{s:[]}", "routes");
    struct ctl_version_names vn;
    uint64_t ex = 7, hits = 7;
    char *secret = NULL, st[16];
    int wakes = 0;

    cfx_model(c, "m", 1, NULL);
    cfx_unregister(c);

    assert_int_equal(ctl_runner_enqueue(&c->ctl, 0, "m", 1, "manual", "none", &t, &c->fx->err),
                     MG_EUNAVAIL);
    assert_null(t);
    assert_non_null(strstr(c->fx->err.message, "runner"));
    assert_string_equal(cfx_smoke_state(c, "m", 1, st), ""); /* nothing queued */
    assert_int_equal(ctl_runner_enqueue_routes(&c->ctl, "m", "prod", payload, &c->fx->err),
                     MG_EUNAVAIL);
    assert_null(ctl_runner_info(&c->ctl));
    assert_true(ctl_runner_largest_gpu_gib(&c->ctl) < 0);
    ctl_runner_cache_stats(&c->ctl, &ex, &hits);
    assert_int_equal(ex, 0);
    assert_int_equal(hits, 0);
    ctl_runner_kick(&c->ctl);

    ctl_gateways_wait(&c->ctl, "m", "prod", 1, 0, woke, &wakes);
    assert_int_equal(wakes, 1);
    assert_int_equal(ctl_alias_names(&c->ctl, "m", "prod", NULL, NULL, NULL, &names, &c->fx->err),
                     MG_OK);
    assert_true(json_is_array(names) && json_array_size(names) == 0);
    json_decref(names);
    assert_int_equal(ctl_alias_check(&c->ctl, "m", "prod", NULL, NULL, &c->fx->err), MG_OK);
    assert_int_equal(ctl_gateway_check(&c->ctl, "g", "webhook", NULL, NULL, NULL, &c->fx->err),
                     MG_OK);
    memset(&vn, 0x5a, sizeof(vn));
    ctl_version_names(&c->ctl, "m", "prod", 1, &vn);
    assert_false(vn.has_haproxy);
    assert_false(vn.has_nginx);
    assert_int_equal(
        ctl_gateway_config_validate(&c->ctl, "webhook", payload, &t, &secret, &c->fx->err),
        MG_EUNAVAIL);
    ctl_gateways_kick(&c->ctl);
    ctl_gateways_poke(&c->ctl);

    cfx_alias_to(c, "m", "prod", 1);
    assert_int_equal(cfx_generation(c, "m", "prod"), 1);
    assert_int_equal(cfx_outbox_gen(c, "m", "prod"), 1);
    assert_int_equal(c->ncalls, 0);
    json_decref(payload);
}

/* With the fakes registered, the wrappers reach them (and the wait's wake comes from the
 * table, not from the wrapper). */
static void test_registered_tables_are_called(void **state)
{
    struct cfx *c = *state;
    json_t *t = NULL;
    int wakes = 0;
    char st[16];

    cfx_model(c, "m", 1, NULL);
    ctl_gateways_wait(&c->ctl, "m", "prod", 4, 0, woke, &wakes);
    assert_int_equal(wakes, 1);
    assert_int_equal(cfx_count(c, "gw.wait"), 1);
    assert_int_equal(cfx_last(c, "gw.wait")->gen, 4);
    assert_int_equal(ctl_runner_enqueue(&c->ctl, 0, "m", 1, "manual", "none", &t, &c->fx->err),
                     MG_OK);
    assert_string_equal(json_string_value(json_object_get(t, "state")), "queued");
    json_decref(t);
    assert_int_equal(cfx_count(c, "rn.enqueue"), 1);
    assert_string_equal(cfx_last(c, "rn.enqueue")->trigger, "manual");
    assert_string_equal(cfx_smoke_state(c, "m", 1, st), "queued");
    c->largest_gpu_gib = 24;
    assert_true(ctl_runner_largest_gpu_gib(&c->ctl) == 24);
}

/* The crash point dies (exit 86) only where MODELGATED_TEST_CRASH_AT names it. */
static void test_crash_point(void **state)
{
    struct cfx *c = *state;
    pid_t pid;
    int status = 0;

    c->ctl.crash_at = NULL;
    ctl_crash_point(&c->ctl, "promotion-created");
    c->ctl.crash_at = "gc-marked";
    ctl_crash_point(&c->ctl, "promotion-created");
    /* Still alive. Named: the child dies there at once. */
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        c->ctl.crash_at = "promotion-created";
        ctl_crash_point(&c->ctl, "promotion-created");
        _exit(0);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 86);
    c->ctl.crash_at = NULL;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_alias_set_commits_and_kicks, cfx_setup, cfx_teardown),
        cmocka_unit_test_setup_teardown(test_alias_set_refused_by_gateway_check, cfx_setup,
                                        cfx_teardown),
        cmocka_unit_test_setup_teardown(test_alias_names_refused_and_shown, cfx_setup,
                                        cfx_teardown),
        cmocka_unit_test_setup_teardown(test_protected_alias_refuses_direct_changes, cfx_setup,
                                        cfx_teardown),
        cmocka_unit_test_setup_teardown(test_rollback_to_last_known_good, cfx_setup, cfx_teardown),
        cmocka_unit_test_setup_teardown(test_lkg_reads_history_as_facts_do, cfx_setup,
                                        cfx_teardown),
        cmocka_unit_test_setup_teardown(test_lkg, cfx_setup, cfx_teardown),
        cmocka_unit_test_setup_teardown(test_empty_worker_tables, cfx_setup, cfx_teardown),
        cmocka_unit_test_setup_teardown(test_registered_tables_are_called, cfx_setup, cfx_teardown),
        cmocka_unit_test_setup_teardown(test_crash_point, cfx_setup, cfx_teardown),
    };

    return cmocka_run_group_tests_name("unit_control_release", tests, NULL, NULL);
}
