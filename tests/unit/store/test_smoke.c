/*
 * test_smoke.c - store/smoke.c: the smoke-test queue (one open test per
 * version, claims oldest first, recovery after a crash), results, the reads
 * the API and gates make, and the versions routed by live aliases.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "base/util.h"
#include "store_fixture.h"

/*
 * The queue is ordered by the millisecond a test was queued in (created_ms); tests queued in
 * the same millisecond come out in no defined order (test_order_within_one_millisecond).
 * Tests that check an order queue each test in a millisecond of its own: this waits for the
 * clock to tick, at most 1 ms, and synchronises with nothing.
 */
static void next_millisecond(void)
{
    int64_t t = mg_now_ms();

    while (mg_now_ms() == t)
        ;
}

/* Queue a test of m/version; *id receives its id. Returns created. */
static bool enqueue(struct fx *fx, int64_t version, const char *trigger, char id[32])
{
    json_t *t = NULL;
    bool created = false;

    if (store_smoke_enqueue(fx->st, 0, "m", version, trigger, "none", &t, &created, &fx->err) !=
        MG_OK)
        fail_msg("store_smoke_enqueue: %s", fx->err.message);
    snprintf(id, 32, "%s", json_string_value(json_object_get(t, "id")));
    json_decref(t);
    return created;
}

/* Claim the next test (NEW), or NULL when none is queued. */
static json_t *claim(struct fx *fx)
{
    json_t *job = NULL;
    bool found = false;

    if (store_smoke_claim(fx->st, &job, &found, &fx->err) != MG_OK)
        fail_msg("store_smoke_claim: %s", fx->err.message);
    assert_true(found == (job != NULL));
    return job;
}

static void finish(struct fx *fx, const char *id, const char *result_state)
{
    json_t *r = json_pack("{s:s}", "state", result_state);

    if (store_smoke_finish(fx->st, id, r, &fx->err) != MG_OK)
        fail_msg("store_smoke_finish: %s", fx->err.message);
    json_decref(r);
}

static json_t *newest(struct fx *fx, int64_t version)
{
    json_t *out = NULL, *t;

    if (store_smoke_list(fx->st, "m", version, &out, &fx->err) != MG_OK)
        fail_msg("store_smoke_list: %s", fx->err.message);
    t = json_incref(json_array_get(json_object_get(out, "items"), 0));
    json_decref(out);
    return t;
}

static void counts(struct fx *fx, int64_t queued, int64_t running)
{
    int64_t q = -1, r = -1;

    assert_int_equal(store_smoke_counts(fx->st, &q, &r, &fx->err), MG_OK);
    assert_int_equal(q, queued);
    assert_int_equal(r, running);
}

/* While a test of a version is queued or running, enqueueing hands back that test. */
static void test_enqueue_idempotent_while_open(void **state)
{
    struct fx *fx = *state;
    char id[32], again[32], third[32];
    json_t *t = NULL, *job;
    bool created = false;

    fx_model_versions(fx, "m", 2);
    assert_int_equal(
        store_smoke_enqueue(fx->st, 0, "m", 1, "manual", "preferred", &t, &created, &fx->err),
        MG_OK);
    assert_true(created);
    snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(t, "id")));
    assert_memory_equal(id, "smk_", 4);
    assert_string_equal(json_string_value(json_object_get(t, "model")), "m");
    assert_int_equal(json_integer_value(json_object_get(t, "version")), 1);
    assert_string_equal(json_string_value(json_object_get(t, "state")), "queued");
    assert_string_equal(json_string_value(json_object_get(t, "trigger")), "manual");
    assert_string_equal(json_string_value(json_object_get(t, "gpu_mode")), "preferred");
    assert_true(fx_is_rfc3339_ms(json_string_value(json_object_get(t, "created_at"))));
    assert_true(json_is_null(json_object_get(t, "started_at")));
    json_decref(t);

    /* Queued: the same test, whatever the trigger. */
    assert_false(enqueue(fx, 1, "route", again));
    assert_string_equal(again, id);
    counts(fx, 1, 0);
    /* Another version has its own. */
    next_millisecond();
    assert_true(enqueue(fx, 2, "route", third));
    assert_string_not_equal(third, id);
    counts(fx, 2, 0);

    /* Running: still the same test. */
    job = claim(fx);
    assert_string_equal(json_string_value(json_object_get(job, "id")), id);
    json_decref(job);
    assert_false(enqueue(fx, 1, "periodic", again));
    assert_string_equal(again, id);
    counts(fx, 1, 1);

    /* Finished: the next enqueue is a new test. */
    finish(fx, id, "passed");
    assert_true(enqueue(fx, 1, "periodic", again));
    assert_string_not_equal(again, id);
    counts(fx, 2, 0);

    t = NULL;
    assert_int_equal(
        store_smoke_enqueue(fx->st, 0, "m", 9, "manual", "none", &t, &created, &fx->err),
        MG_ENOTFOUND);
    assert_null(t);
    assert_int_equal(
        store_smoke_enqueue(fx->st, 0, "x", 1, "manual", "none", &t, &created, &fx->err),
        MG_ENOTFOUND);
}

/* Claims take the oldest queued test first, each once, and say what the runner needs. */
static void test_claim_oldest_first(void **state)
{
    enum { N = 12 };
    struct fx *fx = *state;
    char ids[N][32], art[72];
    json_t *job;

    fx_model_versions(fx, "m", N);
    fx_digest("weights", 7, art);
    assert_null(claim(fx));
    for (int i = 0; i < N; i++) {
        next_millisecond();
        assert_true(enqueue(fx, i + 1, "manual", ids[i]));
    }

    for (int i = 0; i < N; i++) {
        job = claim(fx);
        assert_non_null(job);
        if (strcmp(json_string_value(json_object_get(job, "id")), ids[i]) != 0)
            fail_msg("claim %d took %s (version %lld), not the oldest %s", i,
                     json_string_value(json_object_get(job, "id")),
                     (long long)json_integer_value(json_object_get(job, "version")), ids[i]);
        assert_string_equal(json_string_value(json_object_get(job, "model")), "m");
        assert_int_equal(json_integer_value(json_object_get(job, "version")), i + 1);
        assert_string_equal(json_string_value(json_object_get(job, "gpu_mode")), "none");
        assert_string_equal(
            json_string_value(json_object_get(json_object_get(job, "artifact"), "digest")), art);
        assert_string_equal(
            json_string_value(json_object_get(json_object_get(job, "artifact"), "media_type")),
            "application/octet-stream");
        json_decref(job);
    }
    assert_null(claim(fx));
    counts(fx, 0, N);
}

/*
 * Tests queued in the same millisecond are claimed (and listed, and picked as "latest") in
 * the order they were queued: created_ms is strictly increasing (it was the clock alone,
 * so ties came out in the order of their random ids).
 */
static void test_order_within_one_millisecond(void **state)
{
    enum { N = 12 };
    struct fx *fx = *state;
    char ids[N][32];
    json_t *job;

    fx_model_versions(fx, "m", N);
    for (int i = 0; i < N; i++)
        assert_true(enqueue(fx, i + 1, "manual", ids[i]));
    for (int i = 0; i < N; i++) {
        job = claim(fx);
        assert_non_null(job);
        assert_string_equal(json_string_value(json_object_get(job, "id")), ids[i]);
        json_decref(job);
    }
}

/* The result is recorded as given; members left out stay null. */
static void test_finish_records_result(void **state)
{
    struct fx *fx = *state;
    char id[32], other[32];
    json_t *r, *t, *job;

    fx_model_versions(fx, "m", 2);
    enqueue(fx, 1, "manual", id);
    job = claim(fx);
    json_decref(job);
    t = newest(fx, 1);
    assert_string_equal(json_string_value(json_object_get(t, "state")), "running");
    assert_true(fx_is_rfc3339_ms(json_string_value(json_object_get(t, "started_at"))));
    json_decref(t);

    r = json_pack("{s:s, s:{s:s, s:i}, s:i, s:{s:f}, s:[{s:s, s:b}], s:s, s:i, s:i}", "state",
                  "failed", "gpu", "name", "H100", "index", 0, "exit_code", 3, "latency_ms", "p50",
                  12.5, "checks", "name", "http", "ok", 0, "log_tail", "boom", "duration_ms", 4321,
                  "peak_gpu_memory_mib", 2048);
    json_object_set_new(r, "reason", json_string("exit code 3"));
    assert_int_equal(store_smoke_finish(fx->st, id, r, &fx->err), MG_OK);
    t = newest(fx, 1);
    assert_string_equal(json_string_value(json_object_get(t, "id")), id);
    assert_string_equal(json_string_value(json_object_get(t, "state")), "failed");
    assert_true(json_equal(json_object_get(t, "gpu"), json_object_get(r, "gpu")));
    assert_int_equal(json_integer_value(json_object_get(t, "exit_code")), 3);
    assert_true(json_equal(json_object_get(t, "latency_ms"), json_object_get(r, "latency_ms")));
    assert_true(json_equal(json_object_get(t, "checks"), json_object_get(r, "checks")));
    assert_string_equal(json_string_value(json_object_get(t, "log_tail")), "boom");
    assert_string_equal(json_string_value(json_object_get(t, "reason")), "exit code 3");
    assert_int_equal(json_integer_value(json_object_get(t, "duration_ms")), 4321);
    assert_int_equal(json_integer_value(json_object_get(t, "peak_gpu_memory_mib")), 2048);
    assert_true(fx_is_rfc3339_ms(json_string_value(json_object_get(t, "finished_at"))));
    json_decref(t);
    json_decref(r);
    counts(fx, 0, 0);

    /* Only a state: the rest is null, the checks empty, the log empty. */
    enqueue(fx, 2, "manual", other);
    json_decref(claim(fx));
    finish(fx, other, "error");
    t = newest(fx, 2);
    assert_string_equal(json_string_value(json_object_get(t, "state")), "error");
    assert_true(json_is_null(json_object_get(t, "gpu")));
    assert_true(json_is_null(json_object_get(t, "exit_code")));
    assert_true(json_is_null(json_object_get(t, "latency_ms")));
    assert_true(json_is_null(json_object_get(t, "duration_ms")));
    assert_true(json_is_null(json_object_get(t, "reason")));
    assert_int_equal(json_array_size(json_object_get(t, "checks")), 0);
    assert_true(json_is_array(json_object_get(t, "checks")));
    assert_string_equal(json_string_value(json_object_get(t, "log_tail")), "");
    json_decref(t);
}

/* A version's tests, newest first; the latest one that is fresh enough for a gate. */
static void test_list_and_latest(void **state)
{
    struct fx *fx = *state;
    char first[32], second[32];
    json_t *out = NULL, *items;
    int64_t before;

    fx_model_versions(fx, "m", 2);
    assert_int_equal(store_smoke_latest(fx->st, "m", 1, 0, &out, &fx->err), MG_ENOTFOUND);
    assert_null(out);
    enqueue(fx, 1, "manual", first);
    json_decref(claim(fx));
    finish(fx, first, "passed");
    before = mg_now_ms() - 60000;
    next_millisecond();
    enqueue(fx, 1, "route", second);

    assert_int_equal(store_smoke_list(fx->st, "m", 1, &out, &fx->err), MG_OK);
    items = json_object_get(out, "items");
    assert_int_equal(json_array_size(items), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(items, 0), "id")), second);
    assert_string_equal(json_string_value(json_object_get(json_array_get(items, 1), "id")), first);
    json_decref(out);
    assert_int_equal(store_smoke_list(fx->st, "m", 2, &out, &fx->err), MG_OK);
    assert_int_equal(json_array_size(json_object_get(out, "items")), 0);
    json_decref(out);
    assert_int_equal(store_smoke_list(fx->st, "m", 3, &out, &fx->err), MG_ENOTFOUND);

    /* The queued one is the latest whatever `since` is. */
    assert_int_equal(store_smoke_latest(fx->st, "m", 1, 0, &out, &fx->err), MG_OK);
    assert_string_equal(json_string_value(json_object_get(out, "id")), second);
    json_decref(out);
    assert_int_equal(store_smoke_latest(fx->st, "m", 1, mg_now_ms() + 3600000, &out, &fx->err),
                     MG_OK);
    assert_string_equal(json_string_value(json_object_get(out, "id")), second);
    json_decref(out);

    /* Once finished: latest only for a `since` at or before its finish. */
    json_decref(claim(fx));
    finish(fx, second, "passed");
    assert_int_equal(store_smoke_latest(fx->st, "m", 1, before, &out, &fx->err), MG_OK);
    assert_string_equal(json_string_value(json_object_get(out, "id")), second);
    json_decref(out);
    out = NULL;
    assert_int_equal(store_smoke_latest(fx->st, "m", 1, mg_now_ms() + 3600000, &out, &fx->err),
                     MG_ENOTFOUND);
    assert_null(out);
}

/* Tests left running by a crash go back to the queue and are claimed again. */
static void test_recover(void **state)
{
    struct fx *fx = *state;
    char id[32];
    json_t *job, *t;

    fx_model_versions(fx, "m", 1);
    assert_int_equal(store_smoke_recover(fx->st, 0, &fx->err), MG_OK); /* nothing to recover */
    enqueue(fx, 1, "manual", id);
    json_decref(claim(fx));
    assert_null(claim(fx));

    fx_reopen(fx);
    assert_int_equal(store_smoke_recover(fx->st, 0, &fx->err), MG_OK);
    counts(fx, 1, 0);
    t = newest(fx, 1);
    assert_string_equal(json_string_value(json_object_get(t, "state")), "queued");
    assert_true(json_is_null(json_object_get(t, "started_at")));
    json_decref(t);
    job = claim(fx);
    assert_non_null(job);
    assert_string_equal(json_string_value(json_object_get(job, "id")), id);
    json_decref(job);
}

/* Versions routed with weight > 0 by live aliases, once each. */
static void test_routed_versions(void **state)
{
    struct fx *fx = *state;
    json_t *routes = json_pack("[{s:i, s:i}, {s:i, s:i}]", "version", 2, "weight", 100, "version",
                               3, "weight", 0),
           *none = json_array(), *out = NULL, *e;
    struct store_alias_change a;

    fx_model_versions(fx, "m", 3);
    assert_int_equal(store_routed_versions(fx->st, &out, &fx->err), MG_OK);
    assert_int_equal(json_array_size(out), 0);
    json_decref(out);

    assert_int_equal(fx_set_alias(fx, "m", "prod", 0, 1), 1);
    assert_int_equal(fx_set_alias(fx, "m", "stable", 0, 1), 1);
    memset(&a, 0, sizeof(a));
    a.model = "m";
    a.alias = "canary";
    a.routes = fx_routes_of(routes);
    a.kind = "set";
    assert_int_equal(store_release_commit(fx->st, "alice", &a, NULL, NULL, &fx->err), MG_OK);

    assert_int_equal(store_routed_versions(fx->st, &out, &fx->err), MG_OK);
    assert_int_equal(json_array_size(out), 2); /* 1 (twice), 2; not 3 at weight 0 */
    e = json_array_get(out, 0);
    assert_string_equal(json_string_value(json_object_get(e, "model")), "m");
    assert_int_equal(json_integer_value(json_object_get(e, "version")), 1);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(out, 1), "version")), 2);
    json_decref(out);

    /* A deleted alias routes nothing. */
    a.expected_generation = 1;
    a.routes = fx_routes_of(none);
    a.kind = "delete";
    assert_int_equal(store_release_commit(fx->st, "alice", &a, NULL, NULL, &fx->err), MG_OK);
    assert_int_equal(store_routed_versions(fx->st, &out, &fx->err), MG_OK);
    assert_int_equal(json_array_size(out), 1);
    json_decref(out);
    json_decref(routes);
    json_decref(none);
}

/* M27: a claim's result counts only while that claim runs the test. A claim that lapsed
 * (the test queued again and claimed anew) records nothing, neither before nor after the
 * new claim finished. */
static void test_lapsed_claim_records_nothing(void **state)
{
    struct fx *fx = *state;
    json_t *first, *second, *r, *t;
    char id[32];

    fx_model_versions(fx, "m", 1);
    enqueue(fx, 1, "manual", id);
    first = claim(fx);
    assert_non_null(json_object_get(first, "claim"));
    fx_reopen(fx); /* this process restarted: its running test is queued again */
    assert_int_equal(store_smoke_recover(fx->st, 0, &fx->err), MG_OK);
    second = claim(fx);
    assert_non_null(second);
    assert_string_not_equal(json_string_value(json_object_get(first, "claim")),
                            json_string_value(json_object_get(second, "claim")));
    r = json_pack("{s:s, s:O}", "state", "failed", "claim", json_object_get(first, "claim"));
    assert_int_equal(store_smoke_finish(fx->st, id, r, &fx->err), MG_ENOTFOUND);
    json_decref(r);
    r = json_pack("{s:s, s:O}", "state", "passed", "claim", json_object_get(second, "claim"));
    assert_int_equal(store_smoke_finish(fx->st, id, r, &fx->err), MG_OK);
    json_decref(r);
    /* the lapsed claim, once the test is finished: still nothing */
    r = json_pack("{s:s, s:O}", "state", "failed", "claim", json_object_get(first, "claim"));
    assert_int_equal(store_smoke_finish(fx->st, id, r, &fx->err), MG_ENOTFOUND);
    json_decref(r);
    t = newest(fx, 1);
    assert_string_equal(json_string_value(json_object_get(t, "state")), "passed");
    json_decref(t);
    json_decref(first);
    json_decref(second);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, fx_setup, fx_teardown)
    const struct CMUnitTest tests[] = {
        T(test_enqueue_idempotent_while_open),
        T(test_claim_oldest_first),
        T(test_order_within_one_millisecond),
        T(test_finish_records_result),
        T(test_list_and_latest),
        T(test_recover),
        T(test_routed_versions),
        T(test_lapsed_claim_records_nothing),
    };
#undef T

    return cmocka_run_group_tests(tests, NULL, NULL);
}
