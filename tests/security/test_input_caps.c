/*
 * test_input_caps.c - M18 findings 4, 10, 11 and tag values:
 * - numbers parse back to the same double (1.7976931348623157e308 came back as
 *   1.79769313486232e308, which overflows to infinity), and an integer metric beyond 2^53,
 *   which a double cannot hold, is refused rather than silently changed;
 * - a version holds at most 1000 metrics in all, and an append over the cap changes nothing;
 * - image references follow the OCI reference grammar (no shell metacharacters);
 * - tag values refuse control characters like other free text.
 */
#include "tests/integration/harness.h"
#include "tests/integration/api.h"

#include <math.h>
#include <string.h>

static struct mg_server *srv;
static char art[IT_DIGEST_LEN + 1];

static int setup(void **state)
{
    struct it_resp *r;

    srv = it_server_start(NULL);
    r = it_upload(srv, "input caps", 10, art);
    it_resp_free(srv, &r);
    it_model_create(srv, srv->admin_token, "caps");
    *state = srv;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    it_server_free(&srv);
    return 0;
}

static json_int_t version_with(const char *extra)
{
    char body[1024];
    struct it_resp *r;
    json_int_t n;

    snprintf(body, sizeof(body), "{\"artifact\":\"%s\"%s}", art, extra);
    r = it_jreq(srv, "POST", "/api/v1/models/caps/versions", srv->admin_token, body);
    it_expect_status(srv, r, 201);
    n = it_jint(r->json, "version");
    it_resp_free(srv, &r);
    return n;
}

static void test_numbers_round_trip(void **state)
{
    static const double values[] = {
        1.7976931348623157e308,   0.30000000000000004, 0.942, 4.9406564584124654e-324,
        -2.2250738585072014e-308, 9007199254740992.0,  1e-7};
    char extra[1024], path[128];
    size_t o = 0;
    json_int_t n;
    struct it_resp *r;
    json_t *m;

    (void)state;
    o += (size_t)snprintf(extra + o, sizeof(extra) - o, ",\"metrics\":{");
    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++)
        o += (size_t)snprintf(extra + o, sizeof(extra) - o, "%s\"m%zu\":%.17g", i ? "," : "", i,
                              values[i]);
    snprintf(extra + o, sizeof(extra) - o, "}");
    n = version_with(extra);
    snprintf(path, sizeof(path), "/api/v1/models/caps/versions/%lld", (long long)n);
    r = it_get(srv, path, srv->admin_token);
    it_expect_status(srv, r, 200);
    m = it_jobj(r->json, "metrics");
    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
        char k[8];
        double got;

        snprintf(k, sizeof(k), "m%zu", i);
        got = json_number_value(json_object_get(m, k));
        if (got != values[i] || !isfinite(got))
            fail_msg("metric %s: sent %.17g, got back %.17g (body %s)", k, values[i], got, r->body);
    }
    it_resp_free(srv, &r);
}

static void test_big_integer_metric_refused(void **state)
{
    char body[256];
    struct it_resp *r;

    (void)state;
    snprintf(body, sizeof(body), "{\"artifact\":\"%s\",\"metrics\":{\"n\":9007199254740993}}", art);
    r = it_jreq(srv, "POST", "/api/v1/models/caps/versions", srv->admin_token, body);
    it_expect_error_field(srv, r, 400, "invalid_argument", "metrics");
    assert_non_null(strstr(r->body, "2^53"));
    it_resp_free(srv, &r);
    /* params are kept as they were sent: exact */
    {
        json_int_t n = version_with(",\"params\":{\"seed\":9007199254740993}");
        char path[128];

        snprintf(path, sizeof(path), "/api/v1/models/caps/versions/%lld", (long long)n);
        r = it_get(srv, path, srv->admin_token);
        assert_non_null(strstr(r->body, "9007199254740993"));
        it_resp_free(srv, &r);
    }
}

static void test_metrics_cap(void **state)
{
    json_int_t n = version_with("");
    char path[128], *body = malloc(64 * 1024);
    struct it_resp *r;
    size_t o;

    (void)state;
    assert_non_null(body);
    snprintf(path, sizeof(path), "/api/v1/models/caps/versions/%lld/metrics", (long long)n);
    for (int round = 0; round < 2; round++) {
        o = (size_t)snprintf(body, 64 * 1024, "{\"metrics\":{");
        for (int i = 0; i < 500; i++)
            o += (size_t)snprintf(body + o, 64 * 1024 - o, "%s\"r%d_%d\":%d", i ? "," : "", round,
                                  i, i);
        snprintf(body + o, 64 * 1024 - o, "}}");
        r = it_jreq(srv, "POST", path, srv->admin_token, body);
        it_expect_status(srv, r, 200);
        assert_int_equal(json_object_size(it_jobj(r->json, "metrics")), 500 * (round + 1));
        it_resp_free(srv, &r);
    }
    /* the 1001st metric: refused naming the cap, nothing of the call kept */
    r = it_jreq(srv, "POST", path, srv->admin_token, "{\"metrics\":{\"one_more\":1,\"two\":2}}");
    it_expect_error_field(srv, r, 400, "invalid_argument", "metrics");
    assert_non_null(strstr(r->body, "1000"));
    it_resp_free(srv, &r);
    snprintf(path, sizeof(path), "/api/v1/models/caps/versions/%lld", (long long)n);
    r = it_get(srv, path, srv->admin_token);
    assert_int_equal(json_object_size(it_jobj(r->json, "metrics")), 1000);
    assert_null(json_object_get(it_jobj(r->json, "metrics"), "one_more"));
    it_resp_free(srv, &r);
    free(body);
}

static void test_image_reference_grammar(void **state)
{
    static const char *const bad[] = {
        "a';$(id)|<>@sha256:", "registry.example/Team/serve@sha256:",
        "a//b@sha256:",        "serve:tag with space@sha256:",
        "`id`@sha256:",
    };
    char body[512];
    struct it_resp *r;

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(body, sizeof(body),
                 "{\"artifact\":\"%s\",\"image\":\"%s0123456789abcdef0123456789abcdef0123456789"
                 "abcdef0123456789abcdef\"}",
                 art, bad[i]);
        r = it_jreq(srv, "POST", "/api/v1/models/caps/versions", srv->admin_token, body);
        it_expect_error_field(srv, r, 400, "invalid_argument", "image");
        it_resp_free(srv, &r);
    }
    version_with(",\"image\":\"ghcr.io/org/serve-api:2024.01@sha256:0123456789abcdef0123456789"
                 "abcdef0123456789abcdef0123456789abcdef\"");
}

static void test_tag_values_refuse_control_characters(void **state)
{
    static const char *const bad[] = {"\\u001b[31mred", "a\\r\\nInjected: 1", "tab\\there",
                                      "del\\u007f"};
    char body[512];
    struct it_resp *r;

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(body, sizeof(body), "{\"tags\":{\"team\":\"%s\"}}", bad[i]);
        r = it_jreq(srv, "PATCH", "/api/v1/models/caps", srv->admin_token, body);
        it_expect_error_field(srv, r, 400, "invalid_argument", "tags");
        it_resp_free(srv, &r);
        snprintf(body, sizeof(body), "{\"artifact\":\"%s\",\"tags\":{\"team\":\"%s\"}}", art,
                 bad[i]);
        r = it_jreq(srv, "POST", "/api/v1/models/caps/versions", srv->admin_token, body);
        it_expect_error_field(srv, r, 400, "invalid_argument", "tags");
        it_resp_free(srv, &r);
    }
    r = it_get(srv, "/api/v1/models/caps", srv->admin_token);
    assert_null(strstr(r->body, "Injected"));
    it_resp_free(srv, &r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_numbers_round_trip),
        cmocka_unit_test(test_big_integer_metric_refused),
        cmocka_unit_test(test_metrics_cap),
        cmocka_unit_test(test_image_reference_grammar),
        cmocka_unit_test(test_tag_values_refuse_control_characters),
    };

    return it_main_result(cmocka_run_group_tests(tests, setup, teardown));
}
