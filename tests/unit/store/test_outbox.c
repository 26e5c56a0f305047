/*
 * test_outbox.c - store/outbox.c (was push.c): the desired state per
 * (gateway, model, alias) that workers deliver: claims with a lease, the
 * outcome of a delivery (in sync, or failing with a retry time), a newer
 * generation superseding an older one, the next due time, recovery of leases
 * after a restart, and whether every gateway has acknowledged a generation.
 *
 * Time is passed in (now_ms), so leases and retries are tested without waiting.
 * Most tests disable the built-in runner gateway, which hears every alias, so
 * that claims see only the gateway under test.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include <jansson.h>

#include "store_fixture.h"

#define T0 ((int64_t)4000000000000) /* a fixed "now" (in 2096), after any written_ms */

/* m with versions 1 and 2, the gateway "edge" hearing everything, the runner disabled. */
static void edge_only(struct fx *fx)
{
    fx_model_versions(fx, "m", 2);
    if (store_gateway_disable(fx->st, "runner", "not under test", &fx->err) != MG_OK)
        fail_msg("store_gateway_disable: %s", fx->err.message);
    fx_gateway(fx, "edge", NULL, NULL);
}

static bool claim(struct fx *fx, int64_t now, int64_t lease, struct store_delivery *d)
{
    bool found = false;

    if (store_outbox_claim(fx->st, now, lease, d, &found, &fx->err) != MG_OK)
        fail_msg("store_outbox_claim: %s", fx->err.message);
    return found;
}

static void done(struct fx *fx, const struct store_delivery *d, bool ok, const char *error,
                 int64_t next)
{
    if (store_outbox_done(fx->st, d, ok, error, next, &fx->err) != MG_OK)
        fail_msg("store_outbox_done: %s", fx->err.message);
}

static int64_t next_due(struct fx *fx)
{
    int64_t next = -1;

    if (store_outbox_next_due(fx->st, &next, &fx->err) != MG_OK)
        fail_msg("store_outbox_next_due: %s", fx->err.message);
    return next;
}

static const char *delivery_state(struct fx *fx, const char *alias, char out[16])
{
    json_t *d = fx_delivery(fx, "edge", "m", alias);

    assert_non_null(d);
    snprintf(out, 16, "%s", json_string_value(json_object_get(d, "state")));
    json_decref(d);
    return out;
}

/* An alias change queues a row for the gateway; a claim hands out everything delivering it
 * takes: the gateway's kind, config and secret, and the enriched routes. */
static void test_change_enqueues_and_claim_delivers(void **state)
{
    struct fx *fx = *state;
    struct store_delivery d;
    json_t *r;
    char art[72];

    edge_only(fx);
    fx_digest("weights", 7, art);
    assert_false(claim(fx, T0, 1000, &d)); /* nothing yet */
    assert_int_equal(next_due(fx), 0);

    assert_int_equal(fx_set_alias(fx, "m", "prod", 0, 1), 1);
    assert_true(claim(fx, T0, 1000, &d));
    assert_string_equal(d.gateway, "edge");
    assert_string_equal(d.kind, "webhook");
    assert_string_equal(json_string_value(json_object_get(d.config, "url")),
                        "https://gw.example/hook");
    assert_non_null(d.secret);
    assert_string_equal(d.secret, "s3cret");
    assert_string_equal(d.model, "m");
    assert_string_equal(d.alias, "prod");
    assert_int_equal(d.generation, 1);
    assert_int_equal(d.attempts, 0);
    assert_true(d.written_ms > 0 && d.written_ms <= T0);
    assert_int_equal(json_array_size(json_object_get(d.payload, "routes")), 1);
    r = json_array_get(json_object_get(d.payload, "routes"), 0);
    assert_int_equal(json_integer_value(json_object_get(r, "version")), 1);
    assert_int_equal(json_integer_value(json_object_get(r, "weight")), 100);
    assert_string_equal(json_string_value(json_object_get(r, "artifact")), art);
    assert_true(json_is_null(json_object_get(d.payload, "promotion")));
    store_delivery_release(&d);
    assert_null(d.payload);
    assert_null(d.secret);
}

/* A claim holds the row for lease_ms: nobody else gets it until the lease ends. */
static void test_claim_lease(void **state)
{
    struct fx *fx = *state;
    struct store_delivery d;

    edge_only(fx);
    assert_int_equal(fx_set_alias(fx, "m", "prod", 0, 1), 1);
    assert_int_equal(next_due(fx), 0); /* due at once */
    assert_true(claim(fx, T0, 1000, &d));
    store_delivery_release(&d);

    assert_false(claim(fx, T0, 1000, &d));
    assert_false(claim(fx, T0 + 999, 1000, &d));
    assert_int_equal(next_due(fx), T0 + 1000);
    /* The worker that held it died: the row comes back when the lease ends. */
    assert_true(claim(fx, T0 + 1000, 1000, &d));
    assert_int_equal(d.generation, 1);
    assert_int_equal(d.attempts, 0);
    store_delivery_release(&d);
}

/* ok: in sync (acknowledged, attempt counted); nothing left to claim or wait for. */
static void test_done_ok(void **state)
{
    struct fx *fx = *state;
    struct store_delivery d;
    json_t *row;
    char st[16];

    edge_only(fx);
    assert_int_equal(fx_set_alias(fx, "m", "prod", 0, 1), 1);
    assert_true(claim(fx, T0, 60000, &d));
    done(fx, &d, true, NULL, 0);
    store_delivery_release(&d);

    assert_string_equal(delivery_state(fx, "prod", st), "in_sync");
    row = fx_delivery(fx, "edge", "m", "prod");
    assert_int_equal(json_integer_value(json_object_get(row, "attempts")), 1);
    assert_true(fx_is_rfc3339_ms(json_string_value(json_object_get(row, "acked_at"))));
    assert_true(json_is_null(json_object_get(row, "last_error")));
    assert_true(json_is_null(json_object_get(row, "next_attempt_at")));
    json_decref(row);
    assert_false(claim(fx, T0 + 3600000, 1000, &d));
    assert_int_equal(next_due(fx), 0);

    /* The next change is pending again. */
    assert_int_equal(fx_set_alias(fx, "m", "prod", 1, 2), 2);
    assert_string_equal(delivery_state(fx, "prod", st), "pending");
    assert_true(claim(fx, T0, 1000, &d));
    assert_int_equal(d.generation, 2);
    store_delivery_release(&d);
}

/* A failure is recorded with its error and retried at the time given, not before. */
static void test_done_failure_retries(void **state)
{
    struct fx *fx = *state;
    struct store_delivery d;
    json_t *row;
    char st[16];

    edge_only(fx);
    assert_int_equal(fx_set_alias(fx, "m", "prod", 0, 1), 1);
    assert_true(claim(fx, T0, 60000, &d));
    done(fx, &d, false, "HTTP 503", T0 + 5000);
    store_delivery_release(&d);

    assert_string_equal(delivery_state(fx, "prod", st), "failing");
    row = fx_delivery(fx, "edge", "m", "prod");
    assert_int_equal(json_integer_value(json_object_get(row, "attempts")), 1);
    assert_string_equal(json_string_value(json_object_get(row, "last_error")), "HTTP 503");
    assert_true(fx_is_rfc3339_ms(json_string_value(json_object_get(row, "next_attempt_at"))));
    assert_true(json_is_null(json_object_get(row, "acked_at")));
    json_decref(row);

    /* The lease went with the outcome; the retry time holds it back. */
    assert_int_equal(next_due(fx), T0 + 5000);
    assert_false(claim(fx, T0 + 4999, 1000, &d));
    assert_true(claim(fx, T0 + 5000, 1000, &d));
    assert_int_equal(d.attempts, 1);
    done(fx, &d, true, NULL, 0);
    store_delivery_release(&d);
    row = fx_delivery(fx, "edge", "m", "prod");
    assert_string_equal(json_string_value(json_object_get(row, "state")), "in_sync");
    assert_int_equal(json_integer_value(json_object_get(row, "attempts")), 2);
    assert_true(json_is_null(json_object_get(row, "last_error")));
    json_decref(row);
}

/* A newer generation written while an older one is out keeps the row pending: the outcome of
 * the older one settles nothing, and the newer one goes out next, at once. */
static void test_newer_generation_supersedes(void **state)
{
    struct fx *fx = *state;
    struct store_delivery d;
    char st[16];

    edge_only(fx);
    assert_int_equal(fx_set_alias(fx, "m", "prod", 0, 1), 1);
    assert_true(claim(fx, T0, 60000, &d));
    assert_int_equal(d.generation, 1);
    assert_int_equal(fx_set_alias(fx, "m", "prod", 1, 2), 2);
    done(fx, &d, true, NULL, 0); /* generation 1 delivered */
    store_delivery_release(&d);

    assert_string_equal(delivery_state(fx, "prod", st), "pending");
    assert_true(claim(fx, T0, 60000, &d)); /* the lease was released */
    assert_int_equal(d.generation, 2);
    assert_int_equal(json_integer_value(json_object_get(
                         json_array_get(json_object_get(d.payload, "routes"), 0), "version")),
                     2);
    /* A failure of the superseded generation does not mark the newer one failing either. */
    assert_int_equal(fx_set_alias(fx, "m", "prod", 2, 1), 3);
    done(fx, &d, false, "timeout", T0 + 60000);
    store_delivery_release(&d);
    assert_string_equal(delivery_state(fx, "prod", st), "pending");

    /* Pending generations that were never claimed: only the newest ever goes out. */
    assert_int_equal(fx_set_alias(fx, "m", "prod", 3, 2), 4);
    assert_int_equal(fx_set_alias(fx, "m", "prod", 4, 1), 5);
    assert_true(claim(fx, T0, 60000, &d));
    assert_int_equal(d.generation, 5);
    done(fx, &d, true, NULL, 0);
    store_delivery_release(&d);
    assert_false(claim(fx, T0 + 3600000, 1000, &d));
    assert_string_equal(delivery_state(fx, "prod", st), "in_sync");
}

/* next_due: the earliest of retry times and lease ends over rows not in sync. */
static void test_next_due(void **state)
{
    struct fx *fx = *state;
    struct store_delivery a, b;

    edge_only(fx);
    assert_int_equal(next_due(fx), 0);
    assert_int_equal(fx_set_alias(fx, "m", "prod", 0, 1), 1);
    assert_int_equal(fx_set_alias(fx, "m", "canary", 0, 1), 1);
    assert_true(claim(fx, T0, 1000, &a));
    assert_true(claim(fx, T0, 1000, &b));
    assert_string_not_equal(a.alias, b.alias);
    done(fx, &a, false, "refused", T0 + 30000);
    assert_int_equal(next_due(fx), T0 + 1000); /* b's lease ends first */
    done(fx, &b, false, "refused", T0 + 20000);
    assert_int_equal(next_due(fx), T0 + 20000);
    store_delivery_release(&b);
    assert_true(claim(fx, T0 + 20000, 1000, &b)); /* b's retry is due */
    done(fx, &b, true, NULL, 0);
    assert_int_equal(next_due(fx), T0 + 30000);
    store_delivery_release(&a);
    assert_true(claim(fx, T0 + 30000, 1000, &a));
    done(fx, &a, true, NULL, 0);
    assert_int_equal(next_due(fx), 0);
    store_delivery_release(&a);
    store_delivery_release(&b);
}

/* An outcome counts only while its claim's lease holds: once the lease ended and the
 * row was claimed again, the late outcome of the first claim changes nothing. */
static void test_lost_lease_outcome_is_dropped(void **state)
{
    struct fx *fx = *state;
    struct store_delivery first, second;
    char st[16];

    edge_only(fx);
    assert_int_equal(fx_set_alias(fx, "m", "prod", 0, 1), 1);
    assert_true(claim(fx, T0, 1000, &first));
    assert_true(claim(fx, T0 + 1000, 1000, &second)); /* the first lease ended */
    assert_string_not_equal(first.lease_token, second.lease_token);
    done(fx, &first, true, NULL, 0); /* late: ignored */
    assert_string_equal(delivery_state(fx, "prod", st), "pending");
    assert_false(claim(fx, T0 + 1500, 1000, &first)); /* the second lease still holds */
    done(fx, &second, false, "refused", T0 + 5000);
    assert_string_equal(delivery_state(fx, "prod", st), "failing");
    store_delivery_release(&first);
    store_delivery_release(&second);
}

/* A lease this replica could not confirm (its claim's reply was lost) is released by its
 * token: the row is due again at once, not after the lease. */
static void test_release_by_token(void **state)
{
    struct fx *fx = *state;
    struct store_delivery d;
    char token[17];

    edge_only(fx);
    assert_int_equal(fx_set_alias(fx, "m", "prod", 0, 1), 1);
    assert_true(claim(fx, T0, 3600000, &d));
    memcpy(token, d.lease_token, sizeof(token));
    store_delivery_release(&d);
    assert_false(claim(fx, T0, 1000, &d)); /* held */
    assert_int_equal(store_outbox_release(fx->st, "0000000000000000", &fx->err), MG_OK);
    assert_false(claim(fx, T0, 1000, &d)); /* another token frees nothing */
    assert_int_equal(store_outbox_release(fx->st, token, &fx->err), MG_OK);
    assert_true(claim(fx, T0, 1000, &d));
    assert_string_equal(d.alias, "prod");
    store_delivery_release(&d);
}

/* A restart of the same data directory frees what its previous run held at once; recover
 * (the leader's sweep of dead replicas' leases) then finds nothing. */
static void test_recover(void **state)
{
    struct fx *fx = *state;
    struct store_delivery d;

    edge_only(fx);
    assert_int_equal(store_outbox_recover(fx->st, 0, &fx->err), MG_OK); /* nothing to recover */
    assert_int_equal(fx_set_alias(fx, "m", "prod", 0, 1), 1);
    assert_true(claim(fx, T0, 3600000, &d));
    store_delivery_release(&d);
    assert_false(claim(fx, T0, 1000, &d));

    fx_reopen(fx);                     /* the server restarts: its data directory, its replica id */
    assert_int_equal(next_due(fx), 0); /* what the previous run held is free at once */
    assert_int_equal(store_outbox_recover(fx->st, 0, &fx->err), MG_OK);
    assert_int_equal(next_due(fx), 0);
    assert_true(claim(fx, T0, 1000, &d));
    assert_string_equal(d.alias, "prod");
    assert_int_equal(d.generation, 1);
    store_delivery_release(&d);
}

/* Synced only when every gateway that hears the alias (the runner included) acknowledged
 * the generation or a newer one. */
static void test_synced_waits_for_every_gateway(void **state)
{
    struct fx *fx = *state;
    struct store_delivery d[2], extra;
    bool synced = true;
    int edge;

    fx_model_versions(fx, "m", 2);
    fx_gateway(fx, "edge", NULL, NULL);
    assert_int_equal(fx_set_alias(fx, "m", "prod", 0, 1), 1);
    assert_int_equal(store_outbox_synced(fx->st, "m", "prod", 1, &synced, &fx->err), MG_OK);
    assert_false(synced);

    assert_true(claim(fx, T0, 60000, &d[0]));
    assert_true(claim(fx, T0, 60000, &d[1]));
    assert_false(claim(fx, T0, 60000, &extra)); /* two gateways, two rows */
    edge = strcmp(d[0].gateway, "edge") == 0 ? 0 : 1;
    assert_string_equal(d[edge].gateway, "edge");
    assert_string_equal(d[1 - edge].gateway, "runner");

    done(fx, &d[edge], true, NULL, 0);
    assert_int_equal(store_outbox_synced(fx->st, "m", "prod", 1, &synced, &fx->err), MG_OK);
    assert_false(synced);
    done(fx, &d[1 - edge], true, NULL, 0);
    assert_int_equal(store_outbox_synced(fx->st, "m", "prod", 1, &synced, &fx->err), MG_OK);
    assert_true(synced);
    /* A generation not yet written is not synced; an older one is. */
    assert_int_equal(store_outbox_synced(fx->st, "m", "prod", 2, &synced, &fx->err), MG_OK);
    assert_false(synced);
    assert_int_equal(fx_set_alias(fx, "m", "prod", 1, 2), 2);
    assert_int_equal(store_outbox_synced(fx->st, "m", "prod", 1, &synced, &fx->err), MG_OK);
    assert_false(synced); /* the gateways now move to 2 */
    store_delivery_release(&d[0]);
    store_delivery_release(&d[1]);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, fx_setup, fx_teardown)
    const struct CMUnitTest tests[] = {
        T(test_change_enqueues_and_claim_delivers),
        T(test_claim_lease),
        T(test_done_ok),
        T(test_done_failure_retries),
        T(test_newer_generation_supersedes),
        T(test_next_due),
        T(test_lost_lease_outcome_is_dropped),
        T(test_release_by_token),
        T(test_recover),
        T(test_synced_waits_for_every_gateway),
    };
#undef T

    return cmocka_run_group_tests(tests, NULL, NULL);
}
