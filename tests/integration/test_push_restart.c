/*
 * test_push_restart.c - milestone M4: deliveries survive the server dying.
 * kill -9 with deliveries pending (the receiver refusing connections), a
 * restart on the same data directory, then the receiver comes up: it gets
 * the newest generation, once. And kill -9 while a delivery is in flight
 * (the receiver holds the request without answering): after the restart
 * the delivery is made again promptly, not after the dead worker's lease.
 */
#include "harness.h"
#include "sys.h"
#include "api.h"
#include "push_common.h"
#include "webhook_rx.h"

#include <string.h>

#define SECRET "whsec-modelgate-restart-0123456789abcdef"

static struct mg_server *srv;
static char art[IT_DIGEST_LEN + 1];

static int setup(void **state)
{
    srv = it_server_start(PC_SERVER_ARGS);
    it_upload(srv, "restart test model bytes", 24, art);
    it_release(srv);
    *state = srv;
    return 0;
}

static int teardown(void **state)
{
    if (srv != NULL) {
        if (srv->pid != 0)
            it_server_stop(srv);
        it_server_free(&srv);
    }
    *state = NULL;
    return 0;
}

static void expect_only(struct rx *x, json_int_t gen, const char *what)
{
    struct rx_rec recs[16];
    size_t n = rx_snapshot(x, recs, 16), ok = 0;

    for (size_t i = 0; i < n; i++) {
        if (!recs[i].sig_ok || !recs[i].ts_ok)
            fail_msg("%s: delivery %zu did not verify (id '%s')", what, i, recs[i].id);
        if (recs[i].gen != gen)
            fail_msg("%s: delivery %zu is of generation %lld, want only %lld", what, i,
                     (long long)recs[i].gen, (long long)gen);
        ok += recs[i].status == 200;
    }
    if (ok != 1)
        fail_msg("%s: %zu acknowledged deliveries of generation %lld, want 1", what, ok,
                 (long long)gen);
}

static void test_kill9_with_pending_deliveries(void **state)
{
    struct mg_server *s = *state;
    struct rx *x = rx_start(SECRET, false);
    struct it_resp *r;
    json_int_t gen = 0;

    it_model_create(s, s->admin_token, "rs-pending");
    it_version_create(s, s->admin_token, "rs-pending", art, NULL);
    it_version_create(s, s->admin_token, "rs-pending", art, NULL);
    rx_gateway_put(srv, "rs-pending", x, ",\"models\":[\"rs-pending\"]");
    for (int i = 0; i < 4; i++)
        gen = it_alias_set(s, s->admin_token, "rs-pending", "production",
                           i % 2 ? "{\"version\":1}" : "{\"version\":2}");
    pc_wait_delivery(s, "rs-pending", "rs-pending", "production", gen, "failing", 10000);
    /* Kill between two attempts (none in flight): a delivery in flight at
     * the kill is test_kill9_during_a_delivery's case. */
    {
        int64_t deadline = it_deadline(10000);

        for (;;) {
            json_t *d;
            const char *next;

            r = pc_gateway_get(s, "rs-pending");
            d = pc_gw_delivery(r->json, "rs-pending", "production");
            next = json_string_value(json_object_get(d, "next_attempt_at"));
            if (next != NULL && it_wall_now_ms() + 30 < it_wall_ms_of(next))
                break;
            if (it_now_ms() > deadline)
                fail_msg("no moment between two attempts: %s", r->body);
            it_resp_free(s, &r);
            it_pause_ms(5);
        }
        it_resp_free(s, &r);
    }
    it_server_kill9(s);
    it_server_restart(s);
    /* Still owed after the restart. */
    r = pc_gateway_get(s, "rs-pending");
    {
        json_t *d = pc_gw_delivery(r->json, "rs-pending", "production");
        const char *st;

        assert_non_null(d);
        assert_int_equal(it_jint(d, "generation"), gen);
        st = it_jstr(d, "state");
        if (strcmp(st, "failing") != 0 && strcmp(st, "pending") != 0)
            fail_msg("after kill -9 and restart the delivery is %s: %s", st, r->body);
    }
    assert_int_equal(rx_count(x), 0);

    rx_set_up(x, true);
    pc_wait_delivery(s, "rs-pending", "rs-pending", "production", gen, "in_sync", 10000);
    expect_only(x, gen, "receiver up after the restart");
    r = it_alias_get(s, s->admin_token, "rs-pending", "production");
    assert_true(pc_all_in_sync(r->json));
    pc_gateway_delete(s, "rs-pending");
    rx_stop(&x);
}

static void test_kill9_during_a_delivery(void **state)
{
    struct mg_server *s = *state;
    struct rx *x = rx_start(SECRET, true);
    int64_t t0, took;
    json_int_t gen;

    it_model_create(s, s->admin_token, "rs-inflight");
    it_version_create(s, s->admin_token, "rs-inflight", art, NULL);
    rx_gateway_put(srv, "rs-inflight", x, ",\"models\":[\"rs-inflight\"]");
    rx_set_hang(x, true);
    gen = it_alias_set(s, s->admin_token, "rs-inflight", "production", "{\"version\":1}");
    rx_wait_count(x, 1, 10000); /* the worker is waiting for our answer */

    it_server_kill9(s);
    rx_set_hang(x, false);
    it_server_restart(s);
    t0 = it_now_ms();
    /* A fresh process owns no delivery: it must not wait out the killed
     * worker's claim on the row (a two-minute lease) before trying again. */
    for (;;) {
        struct it_resp *r = pc_gateway_get(s, "rs-inflight");
        json_t *d = pc_gw_delivery(r->json, "rs-inflight", "production");

        if (d != NULL && strcmp(it_jstr(d, "state"), "in_sync") == 0)
            break;
        if (it_now_ms() - t0 > (it_sanitized() ? 60000 : 20000)) {
            pc_dump_server_notes(s, 12);
            fail_msg("20 s after the restart the delivery that was in flight when the server "
                     "was killed has not been tried again (attempts %lld, receiver saw %zu "
                     "requests): the dead process's claim on the row outlives it: %s",
                     d ? (long long)it_jint(d, "attempts") : -1LL, rx_count(x), r->body);
        }
        it_resp_free(s, &r);
        it_pause_ms(50);
    }
    took = it_now_ms() - t0;
    print_message("delivered %lld ms after the restart\n", (long long)took);
    {
        struct rx_rec recs[8];
        size_t n = rx_snapshot(x, recs, 8);

        assert_int_equal(n, 2);
        assert_int_equal(recs[0].status, 0); /* held, never answered */
        assert_int_equal(recs[1].status, 200);
        assert_int_equal(recs[1].gen, gen);
        assert_string_equal(recs[0].id, recs[1].id);
    }
    pc_gateway_delete(s, "rs-inflight");
    rx_stop(&x);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_kill9_with_pending_deliveries, it_test_teardown),
        cmocka_unit_test_teardown(test_kill9_during_a_delivery, it_test_teardown),
    };

    return it_main_result(cmocka_run_group_tests(tests, setup, teardown));
}
