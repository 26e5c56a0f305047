/*
 * test_sod.c - M18: separation of duties covers everyone who changed a version's gate
 * inputs. A token with publisher+reviewer appended the metric that made someone else's
 * version pass its threshold, then approved that promotion: only the version's author and
 * the promotion's creator were excluded. Now whoever appended a metric is excluded too.
 */
#include "tests/integration/harness.h"
#include "tests/integration/sys.h"
#include "tests/integration/api.h"

#include <string.h>

static struct mg_server *srv;

static const char *promotion_state(const char *id)
{
    static char state[64];
    struct it_resp *r = it_promotion_get(srv, srv->admin_token, id);

    snprintf(state, sizeof(state), "%s", it_jstr(r->json, "state"));
    it_resp_free(srv, &r);
    return state;
}

static void test_metric_appender_cannot_approve(void **state)
{
    char *alice = it_token_create(srv, "alice", "publisher", NULL);
    char *eve = it_token_create(srv, "eve", "publisher,reviewer", NULL);
    char *carol = it_token_create(srv, "carol", "reviewer", NULL);
    char *dep = it_token_create(srv, "dep", "deployer", NULL);
    char art[IT_DIGEST_LEN + 1], body[512], id[64], path[160];
    struct it_resp *r;

    (void)state;
    r = it_upload(srv, "sod model bytes", 15, art);
    it_resp_free(srv, &r);
    r = it_jreq(srv, "POST", "/api/v1/models", alice, "{\"name\":\"fraud\"}");
    it_expect_status(srv, r, 201);
    it_resp_free(srv, &r);
    snprintf(body, sizeof(body), "{\"artifact\":\"%s\",\"metrics\":{\"loss\":0.2}}", art);
    r = it_jreq(srv, "POST", "/api/v1/models/fraud/versions", alice, body);
    it_expect_status(srv, r, 201);
    it_resp_free(srv, &r);
    r = it_jreq(srv, "PUT", "/api/v1/models/fraud/policies/production", srv->admin_token,
                "{\"thresholds\":[{\"metric\":\"auc\",\"op\":\">=\",\"value\":0.9}],"
                "\"approvals\":{\"required\":1}}");
    it_expect_status(srv, r, 200);
    it_resp_free(srv, &r);

    /* eve supplies the metric that makes alice's version pass */
    r = it_jreq(srv, "POST", "/api/v1/models/fraud/versions/1/metrics", eve,
                "{\"metrics\":{\"auc\":0.95}}");
    it_expect_status(srv, r, 200);
    it_resp_free(srv, &r);
    r = it_jreq(srv, "POST", "/api/v1/promotions", dep,
                "{\"model\":\"fraud\",\"version\":1,\"alias\":\"production\"}");
    it_expect_status(srv, r, 201);
    snprintf(id, sizeof(id), "%s", it_jstr(r->json, "id"));
    it_resp_free(srv, &r);
    for (int64_t d = it_deadline(10000); strcmp(promotion_state(id), "awaiting_approval") != 0;
         it_pause_ms(20)) {
        if (it_now_ms() > d)
            fail_msg("the promotion never awaited approval: %s", promotion_state(id));
    }

    snprintf(path, sizeof(path), "/api/v1/promotions/%s/approvals", id);
    r = it_jreq(srv, "POST", path, eve, "{\"decision\":\"approve\",\"comment\":\"lgtm\"}");
    it_expect_error(srv, r, 403, "self_approval");
    assert_non_null(
        strstr(json_string_value(json_object_get(json_object_get(r->json, "error"), "message")),
               "metric"));
    it_resp_free(srv, &r);
    assert_string_equal(promotion_state(id), "awaiting_approval");

    /* someone who touched nothing approves */
    r = it_jreq(srv, "POST", path, carol, "{\"decision\":\"approve\",\"comment\":\"checked\"}");
    it_expect_status(srv, r, 200);
    it_resp_free(srv, &r);
    assert_string_not_equal(promotion_state(id), "awaiting_approval");
    free(alice);
    free(eve);
    free(carol);
    free(dep);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_metric_appender_cannot_approve),
    };
    int rc;

    srv = it_server_start(NULL);
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    it_server_free(&srv);
    return it_main_result(rc);
}
