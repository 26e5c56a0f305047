/*
 * test_version.c - a validated VersionCreate body into its record (model/version.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

#include "model/version.h"

#define D1 "sha256:1111111111111111111111111111111111111111111111111111111111111111"
#define D2 "sha256:2222222222222222222222222222222222222222222222222222222222222222"

static void test_full_body(void **state)
{
    json_t *b = json_pack("{s:s, s:s, s:s, s:s, s:{s:s}, s:[{s:s, s:s, s:s}, {s:s, s:s, s:s}],"
                          " s:{s:f, s:i}, s:{s:i}, s:{s:s}, s:n, s:{s:s}}",
                          "artifact", D1, "image", "r@sha256:ab", "run_id", "run-7", "description",
                          "d", "source", "repo", "git", "datasets", "digest", D1, "role", "train",
                          "name", "a", "role", "eval", "digest", D2, "uri", "s3://x", "metrics",
                          "auc", 0.91, "n", 3, "params", "lr", 2, "tags", "team", "risk", "smoke",
                          "resources", "precision", "fp16");
    struct mg_version_new v;
    struct mg_error err;
    json_t *m;

    (void)state;
    assert_non_null(b);
    assert_int_equal(mg_version_new_init(&v, b, &err), MG_OK);
    assert_string_equal(v.artifact, D1);
    assert_string_equal(v.image, "r@sha256:ab");
    assert_string_equal(v.run_id, "run-7");
    assert_string_equal(v.description, "d");
    assert_true(v.datasets_given);
    assert_int_equal(v.ndatasets, 2);
    assert_string_equal(v.datasets[0].digest, D1);
    assert_string_equal(v.datasets[0].role, "train");
    assert_string_equal(v.datasets[0].name, "a");
    assert_null(v.datasets[0].uri);
    assert_string_equal(v.datasets[1].digest, D2);
    assert_string_equal(v.datasets[1].role, "eval");
    assert_null(v.datasets[1].name);
    assert_string_equal(v.datasets[1].uri, "s3://x");
    /* metrics keep the body's order and whether each was an integer */
    assert_true(v.metrics_given);
    assert_int_equal(v.nmetrics, 2);
    assert_string_equal(v.metrics[0].name, "auc");
    assert_true(v.metrics[0].value == 0.91);
    assert_false(v.metrics[0].integral);
    assert_string_equal(v.metrics[1].name, "n");
    assert_true(v.metrics[1].value == 3.0);
    assert_true(v.metrics[1].integral);
    /* free-form and kept-as-sent documents are borrowed; null reads as NULL */
    assert_ptr_equal(v.params, json_object_get(b, "params"));
    assert_ptr_equal(v.tags, json_object_get(b, "tags"));
    assert_ptr_equal(v.source, json_object_get(b, "source"));
    assert_ptr_equal(v.resources, json_object_get(b, "resources"));
    assert_null(v.smoke);
    /* the server's readings are the caller's to set */
    assert_null(v.introspection);
    assert_null(v.scan);
    assert_null(v.io_schema);
    assert_null(v.publisher);
    /* echoed metrics spell each number as it came */
    m = mg_metrics_json(v.metrics, v.nmetrics);
    assert_true(json_equal(m, json_object_get(b, "metrics")));
    assert_true(json_is_integer(json_object_get(m, "n")));
    assert_true(json_is_real(json_object_get(m, "auc")));
    json_decref(m);
    mg_version_new_release(&v);
    assert_null(v.datasets);
    assert_null(v.metrics);
    json_decref(b);
}

/* Absent, empty and null are told apart where a record echoes them. */
static void test_minimal_and_empty(void **state)
{
    json_t *b = json_pack("{s:s, s:n, s:n}", "artifact", D1, "image", "run_id");
    struct mg_version_new v;
    struct mg_error err;

    (void)state;
    assert_int_equal(mg_version_new_init(&v, b, &err), MG_OK);
    assert_null(v.image);
    assert_null(v.run_id);
    assert_null(v.description);
    assert_false(v.datasets_given);
    assert_false(v.metrics_given);
    assert_int_equal(v.ndatasets, 0);
    assert_int_equal(v.nmetrics, 0);
    assert_null(v.params);
    mg_version_new_release(&v);
    json_decref(b);

    b = json_pack("{s:s, s:[], s:{}}", "artifact", D1, "datasets", "metrics");
    assert_int_equal(mg_version_new_init(&v, b, &err), MG_OK);
    assert_true(v.datasets_given);
    assert_true(v.metrics_given);
    assert_int_equal(v.ndatasets, 0);
    assert_int_equal(v.nmetrics, 0);
    mg_version_new_release(&v);
    mg_version_new_release(&v); /* twice is harmless */
    json_decref(b);
}

static void test_not_an_object(void **state)
{
    json_t *b = json_array();
    struct mg_version_new v;
    struct mg_error err;
    struct mg_metric *m = (struct mg_metric *)&v;
    size_t n = 9;

    (void)state;
    assert_int_equal(mg_version_new_init(&v, b, &err), MG_EINVAL);
    assert_int_equal(mg_metrics_from_json(b, &m, &n, &err), MG_EINVAL);
    assert_null(m);
    assert_int_equal(n, 0);
    json_decref(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_body),
        cmocka_unit_test(test_minimal_and_empty),
        cmocka_unit_test(test_not_an_object),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
