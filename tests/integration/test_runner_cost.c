/*
 * test_runner_cost.c - what serving a version costs, as a release gate (docs/contract.md "Quotas
 * and cost"), against the real daemon and its runner with shell-script profiles (no NVML: the tests
 * run on the CPU, the same with or without a GPU here):
 *   - a smoke test reports throughput_rps (the test's own figure, else its timed requests
 *     over its wall time) and cost_per_1k_requests = cost ÷ (3.6 × rps) from
 *     --smoke-profile-cost; null without a throughput or a cost;
 *   - a policy threshold "cost_per_1k_requests <= baseline + 10 %": a version twice as costly
 *     per request is rejected, a cheaper one ships;
 *   - no throughput measured, or no cost configured for the profile: rejected, with a detail
 *     saying what to fix;
 *   - --smoke-profile-cost naming no profile, or not a number, stops the server at start.
 */
#include "harness.h"
#include "sys.h"
#include "api.h"
#include "runner_common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static struct mg_server *srv;
static char dir[IT_PATH_MAX];
static char dep[128];

/* Each writes its output with a fixed throughput (or none). */
#define SCRIPT(rps)                                                                                \
    "printf '%s' '{\"latencies_ms\":[3,4,5],\"throughput_rps\":" rps ",\"checks\":[]}' "           \
    "> \"$MODELGATE_OUTPUT\"\n"
static const struct {
    const char *name, *script, *cost; /* cost: NULL when none is configured */
} PROFILES[] = {
    {"base", SCRIPT("200"), "7.2"},    /* 7.2 / (3.6 × 200) = 0.01 per 1000 */
    {"costly", SCRIPT("100"), "7.2"},  /* 0.02: twice as costly */
    {"cheap", SCRIPT("250"), "7.2"},   /* 0.008 */
    {"uncosted", SCRIPT("100"), NULL}, /* no --smoke-profile-cost */
    {"counted",
     "printf '%s' '{\"latencies_ms\":[1,2,3,4,5,6,7,8,9,10],\"checks\":[]}' "
     "> \"$MODELGATE_OUTPUT\"\n",
     "3.6"}, /* throughput from its 10 timed requests */
    {"silent", "printf '%s' '{\"checks\":[]}' > \"$MODELGATE_OUTPUT\"\n", NULL},
};
#define NPROFILES (sizeof(PROFILES) / sizeof(PROFILES[0]))

static int setup(void **state)
{
    char args[2 * NPROFILES + 4][IT_PATH_MAX + 128], name[64];
    const char *argv[2 * NPROFILES + 5];
    size_t n = 0, i;
    char *secret;

    it_mkdtemp(dir, "runcost");
    for (i = 0; i < NPROFILES; i++) {
        it_fmt(name, sizeof(name), "%s.sh", PROFILES[i].name);
        rc_write_script(dir, name, PROFILES[i].script, NULL);
        rc_profile_arg(args[n++], sizeof(args[0]), dir, PROFILES[i].name, "");
        if (PROFILES[i].cost)
            it_fmt(args[n++], sizeof(args[0]), "--smoke-profile-cost=%s=%s", PROFILES[i].name,
                   PROFILES[i].cost);
    }
    it_fmt(args[n++], sizeof(args[0]), "--nvml-library=%s/absent/libnvidia-ml.so.1", dir);
    it_fmt(args[n++], sizeof(args[0]), "--smoke-interval=0");
    /* at most IT_MAX_ARGS - 3 (PostgreSQL adds --database) */
    assert_true(n + 3 <= IT_MAX_ARGS);
    for (i = 0; i < n; i++)
        argv[i] = args[i];
    argv[n] = NULL;
    srv = it_server_start(argv);
    secret = it_token_create(srv, "dep", "deployer,reader", NULL);
    snprintf(dep, sizeof(dep), "%s", secret);
    free(secret);
    it_release(srv);
    *state = srv;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (srv != NULL) {
        it_server_stop(srv);
        it_server_free(&srv);
    }
    it_rmtree(dir);
    return 0;
}

/* A new version of model (created when version is the first) whose smoke profile is
 * profile; returns its number. */
static json_int_t version_with(const char *model, const char *profile)
{
    char art[IT_DIGEST_LEN + 1], text[128];
    struct it_resp *r;

    it_fmt(text, sizeof(text), "%s weights for %s", model, profile);
    r = it_upload(srv, text, strlen(text), art);
    it_resp_free(srv, &r);
    return it_version_create(srv, srv->admin_token, model, art, rc_smoke_spec(profile, 0, 0, NULL));
}

/* Run a smoke test of the version and return it finished (borrowed, see rc_smoke_wait). */
static json_t *smoke(const char *model, json_int_t v)
{
    char id[64];
    struct it_resp *r = rc_smoke_post(srv, dep, model, v, NULL, id);

    it_resp_free(srv, &r);
    return rc_smoke_wait(srv, model, v, id, 20000);
}

static bool near(double a, double b)
{
    return fabs(a - b) <= 1e-9 * fmax(1.0, fabs(b));
}

static void test_smoke_tests_report_throughput_and_cost(void **state)
{
    json_t *t;
    double rps;

    (void)state;
    it_model_create(srv, srv->admin_token, "meter");
    /* the test's own throughput; cost 7.2 an hour over 200 requests a second */
    t = smoke("meter", version_with("meter", "base"));
    assert_string_equal(it_jstr(t, "state"), "passed");
    assert_true(near(it_jnum(t, "throughput_rps"), 200));
    assert_true(near(it_jnum(t, "cost_per_1k_requests"), 0.01));
    /* no cost configured: the throughput alone */
    t = smoke("meter", version_with("meter", "uncosted"));
    assert_true(near(it_jnum(t, "throughput_rps"), 100));
    assert_true(json_is_null(json_object_get(t, "cost_per_1k_requests")));
    /* its timed requests over its wall time: some rate, and the cost follows it exactly */
    t = smoke("meter", version_with("meter", "counted"));
    rps = it_jnum(t, "throughput_rps");
    assert_true(rps > 0);
    assert_true(near(it_jnum(t, "cost_per_1k_requests") * rps, 1.0)); /* 3.6 / 3.6 */
    /* nothing to count: neither */
    t = smoke("meter", version_with("meter", "silent"));
    assert_string_equal(it_jstr(t, "state"), "passed");
    assert_true(json_is_null(json_object_get(t, "throughput_rps")));
    assert_true(json_is_null(json_object_get(t, "cost_per_1k_requests")));
}

/* Promote version v of model to production under the cost gate: the final promotion. */
static struct it_resp *promote(const char *model, json_int_t v, const char *final)
{
    char pid[64];
    struct it_resp *r = it_promote(srv, dep, model, v, "production", pid);

    it_resp_free(srv, &r);
    return it_promotion_wait(srv, srv->admin_token, pid, final, 30000);
}

static void expect_cost_gate(struct it_resp *r, const char *status, const char *detail_part)
{
    json_t *g = it_gate_find(it_jarr(r->json, "gates"), "threshold", "cost_per_1k_requests");

    assert_non_null(g);
    assert_string_equal(it_jstr(g, "status"), status);
    if (detail_part != NULL)
        rc_expect_contains(it_jstr(g, "detail"), detail_part);
}

static void test_cost_gate_relative_to_baseline(void **state)
{
    json_int_t v1, v2, v3, v4, v5;
    struct it_resp *r;
    json_t *g;

    (void)state;
    it_model_create(srv, srv->admin_token, "svc");
    /* the baseline: production's last-known-good, measured at 0.01 per 1000 */
    v1 = version_with("svc", "base");
    assert_string_equal(it_jstr(smoke("svc", v1), "state"), "passed");
    it_alias_to(srv, srv->admin_token, "svc", "production", v1, 0);
    it_policy_put(srv, "svc", "production",
                  "{\"thresholds\":[{\"metric\":\"cost_per_1k_requests\",\"op\":\"<=\","
                  "\"baseline\":true,\"max_regression_pct\":10}],"
                  "\"smoke\":{\"required\":true,\"gpu\":\"none\"}}");

    /* twice as costly per request: rejected, naming the baseline's figure */
    v2 = version_with("svc", "costly");
    r = promote("svc", v2, "rejected");
    expect_cost_gate(r, "failed", "baseline v1 has 0.01");
    g = it_gate_find(it_jarr(r->json, "gates"), "threshold", "cost_per_1k_requests");
    assert_true(near(it_jnum(g, "observed"), 0.02));
    it_resp_free(srv, &r);

    /* no cost configured for its profile: rejected, saying which flag to set */
    v4 = version_with("svc", "uncosted");
    r = promote("svc", v4, "rejected");
    expect_cost_gate(r, "failed", "--smoke-profile-cost uncosted=");
    it_resp_free(srv, &r);

    /* no throughput measured: rejected, saying what the output needs */
    v5 = version_with("svc", "silent");
    r = promote("svc", v5, "rejected");
    expect_cost_gate(r, "failed", "measured no throughput");
    it_resp_free(srv, &r);

    /* cheaper: ships */
    v3 = version_with("svc", "cheap");
    r = promote("svc", v3, "succeeded");
    expect_cost_gate(r, "passed", NULL);
    it_resp_free(srv, &r);
}

/* A gate on throughput alone needs no cost; without any smoke test coming it fails clearly. */
static void test_throughput_gate_and_no_test(void **state)
{
    json_int_t v1, v2;
    struct it_resp *r;
    json_t *g;

    (void)state;
    it_model_create(srv, srv->admin_token, "tput");
    v1 = version_with("tput", "uncosted");
    it_policy_put(srv, "tput", "production",
                  "{\"thresholds\":[{\"metric\":\"throughput_rps\",\"op\":\">=\",\"value\":50}],"
                  "\"smoke\":{\"required\":true,\"gpu\":\"none\"}}");
    r = promote("tput", v1, "succeeded");
    g = it_gate_find(it_jarr(r->json, "gates"), "threshold", "throughput_rps");
    assert_string_equal(it_jstr(g, "status"), "passed");
    it_resp_free(srv, &r);
    /* a policy that asks for a cost but never for a smoke test: nothing will measure it */
    it_model_create(srv, srv->admin_token, "untested");
    v2 = version_with("untested", "base");
    it_policy_put(srv, "untested", "production",
                  "{\"thresholds\":[{\"metric\":\"cost_per_1k_requests\",\"op\":\"<=\","
                  "\"value\":1}]}");
    r = promote("untested", v2, "rejected");
    expect_cost_gate(r, "failed", "no passed smoke test measured cost_per_1k_requests");
    it_resp_free(srv, &r);
}

/* A cost for a profile that does not exist, or that is not a number: the server says so
 * and does not start. */
static void test_bad_cost_flag_stops_start(void **state)
{
    static const char *const bad[][2] = {
        {"--smoke-profile-cost=nosuch=1", "no --smoke-profile defines"},
        {"--smoke-profile-cost=base=cheap", "is not a number"},
        {"--smoke-profile-cost=base=-2", "is not a number"},
        {"--smoke-profile-cost=base", "NAME=COST"},
    };
    char prof[IT_PATH_MAX + 128], cmd[4 * IT_PATH_MAX], out[IT_PATH_MAX], data[IT_PATH_MAX];
    size_t i;
    int st;

    (void)state;
    rc_profile_arg(prof, sizeof(prof), dir, "base", "");
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *text;

        it_fmt(data, sizeof(data), "%s/bad%zu", dir, i);
        it_fmt(out, sizeof(out), "%s/bad%zu.log", dir, i);
        /* timeout: a server that started anyway is killed (124) and fails the test */
        it_fmt(cmd, sizeof(cmd),
               "timeout 10 '%s' --listen 127.0.0.1:0 --data-dir '%s' --port-file '%s.port' "
               "--smoke-interval=0 '%s' '%s' >'%s' 2>&1",
               getenv("MODELGATED"), data, data, prof, bad[i][0], out);
        st = system(cmd);
        assert_true(WIFEXITED(st));
        assert_int_not_equal(WEXITSTATUS(st), 0);
        assert_int_not_equal(WEXITSTATUS(st), 124);
        text = it_read_file(out, NULL);
        assert_non_null(text);
        rc_expect_contains(text, bad[i][1]);
        free(text);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_smoke_tests_report_throughput_and_cost),
        cmocka_unit_test(test_cost_gate_relative_to_baseline),
        cmocka_unit_test(test_throughput_gate_and_no_test),
        cmocka_unit_test(test_bad_cost_flag_stops_start),
    };

    return it_main_result(cmocka_run_group_tests(tests, setup, teardown));
}
