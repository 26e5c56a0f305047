/*
 * test_analysis.c - store/analysis.c: the intervals live canary analysis records for a
 * promotion: appended in order, read back newest first with every field, the same interval
 * recorded once when two replicas measure it, only the newest STORE_INTERVALS_KEPT kept, and
 * each promotion's intervals its own.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "store_fixture.h"

static void promotion(struct fx *fx, const char *id)
{
    json_t *p = NULL,
           *rec = json_pack("{s:s, s:s, s:s, s:i, s:i, s:s, s:s, s:{}, s:[], s:i, s:i, s:i}", "id",
                            id, "model", "m", "alias", id, "version", 2, "baseline_version", 1,
                            "state", "rolling_out", "reason", "r", "policy", "gates", "step_index",
                            0, "weight", 10, "next_step_at_ms", 0);

    assert_non_null(rec);
    if (fx_promotion_create(fx, rec, "created", NULL, NULL, &p) != MG_OK)
        fail_msg("store_promotion_create: %s", fx->err.message);
    json_decref(rec);
    json_decref(p);
}

static bool record(struct fx *fx, const char *id, int64_t at, int64_t not_before,
                   const char *verdict)
{
    json_t *metrics = json_pack("[{s:s, s:f, s:n, s:s, s:s}]", "name", "error_rate", "candidate",
                                0.25, "baseline", "verdict", verdict, "detail", "why");
    struct store_interval in = {.promotion = id,
                                .at_ms = at,
                                .not_before_ms = not_before,
                                .phase = "steps",
                                .step_index = 0,
                                .weight = 10,
                                .verdict = verdict,
                                .metrics = metrics};
    bool recorded = false;

    if (store_interval_record(fx->st, &in, &recorded, &fx->err) != MG_OK)
        fail_msg("store_interval_record: %s", fx->err.message);
    json_decref(metrics);
    return recorded;
}

static void test_record_and_list(void **state)
{
    struct fx *fx = *state;
    json_t *list = NULL, *it;

    fx_model_versions(fx, "m", 2);
    promotion(fx, "prm_a");
    promotion(fx, "prm_b");
    assert_true(record(fx, "prm_a", 1000000, 999000, "inconclusive"));
    assert_true(record(fx, "prm_a", 1010000, 1005000, "failed"));
    /* another replica measured the same interval: not recorded twice */
    assert_false(record(fx, "prm_a", 1010400, 1005400, "passed"));
    assert_true(record(fx, "prm_b", 1010000, 1005000, "passed"));

    assert_int_equal(store_intervals_list(fx->st, "prm_a", 500, &list, &fx->err), MG_OK);
    assert_int_equal(json_array_size(list), 2);
    it = json_array_get(list, 0); /* newest first */
    assert_string_equal(json_string_value(json_object_get(it, "verdict")), "failed");
    assert_int_equal(json_integer_value(json_object_get(it, "_at_ms")), 1010000);
    assert_int_equal(json_integer_value(json_object_get(it, "seq")), 2);
    assert_string_equal(json_string_value(json_object_get(it, "phase")), "steps");
    assert_int_equal(json_integer_value(json_object_get(it, "step_index")), 0);
    assert_int_equal(json_integer_value(json_object_get(it, "weight")), 10);
    assert_true(fx_is_rfc3339_ms(json_string_value(json_object_get(it, "at"))));
    assert_true(json_real_value(json_object_get(json_array_get(json_object_get(it, "metrics"), 0),
                                                "candidate")) == 0.25);
    assert_true(json_is_null(
        json_object_get(json_array_get(json_object_get(it, "metrics"), 0), "baseline")));
    json_decref(list);
    assert_int_equal(store_intervals_list(fx->st, "prm_a", 1, &list, &fx->err), MG_OK);
    assert_int_equal(json_array_size(list), 1);
    json_decref(list);
    assert_int_equal(store_intervals_list(fx->st, "prm_b", 500, &list, &fx->err), MG_OK);
    assert_int_equal(json_array_size(list), 1);
    json_decref(list);
    assert_int_equal(store_intervals_list(fx->st, "prm_none", 500, &list, &fx->err), MG_OK);
    assert_int_equal(json_array_size(list), 0);
    json_decref(list);
}

static void test_newest_kept(void **state)
{
    struct fx *fx = *state;
    json_t *list = NULL;
    int i;

    fx_model_versions(fx, "m", 2);
    promotion(fx, "prm_k");
    for (i = 1; i <= STORE_INTERVALS_KEPT + 7; i++)
        assert_true(record(fx, "prm_k", (int64_t)i * 1000, (int64_t)i * 1000 - 500, "passed"));
    assert_int_equal(store_intervals_list(fx->st, "prm_k", 10000, &list, &fx->err), MG_OK);
    assert_int_equal(json_array_size(list), STORE_INTERVALS_KEPT);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(list, 0), "seq")),
                     STORE_INTERVALS_KEPT + 7);
    assert_int_equal(
        json_integer_value(json_object_get(json_array_get(list, STORE_INTERVALS_KEPT - 1), "seq")),
        8);
    json_decref(list);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_record_and_list, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_newest_kept, fx_setup, fx_teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
