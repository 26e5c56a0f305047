/*
 * test_nginx.c - the nginx gateway (server/push/nginx.c): which configs are refused and
 * why, the split_clients text for a set of routes (the last share is "*", zero weights
 * left out, an empty value for no routes, the longest names whole), and a delivery with
 * real test and reload commands: the file written 0644, the previous file kept when the
 * test fails, the failures' messages.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/util.h"
#include "gateways/push_int.h"

static char dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/mg-nginx-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    char cmd[128];

    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_validate(void **state)
{
    static const struct {
        const char *body;
        const char *field; /* NULL: accepted */
        const char *message;
    } cases[] = {
        {"{\"kind\":\"nginx\",\"file\":\"/etc/nginx/mg/{model}_{alias}.conf\","
         "\"upstream\":\"{model}_v{version}\"}",
         NULL, NULL},
        {"{\"file\":\"/a.conf\",\"upstream\":\"u{version}\",\"test_command\":[\"nginx\",\"-t\"],"
         "\"reload_command\":[\"systemctl\",\"reload\",\"nginx\"],\"models\":[\"a\"],"
         "\"aliases\":[\"b\"]}",
         NULL, NULL},
        {"{\"file\":\"/a.conf\",\"upstream\":\"u{version}\",\"reload\":[\"x\"]}", "reload",
         "unknown field 'reload' for an nginx gateway"},
        {"{\"upstream\":\"u{version}\"}", "file", "file is an absolute path template"},
        {"{\"file\":\"mg/a.conf\",\"upstream\":\"u{version}\"}", "file", "absolute path"},
        {"{\"file\":\"/etc/nginx/../a.conf\",\"upstream\":\"u{version}\"}", "file",
         "absolute path"},
        {"{\"file\":\"/etc/{owner}.conf\",\"upstream\":\"u{version}\"}", "file", "absolute path"},
        {"{\"file\":\"/a.conf\"}", "upstream", "upstream is a name template with {version}"},
        {"{\"file\":\"/a.conf\",\"upstream\":\"{model}\"}", "upstream", "with {version}"},
        {"{\"file\":\"/a.conf\",\"upstream\":\"u{version} ; evil\"}", "upstream", "with {version}"},
        {"{\"file\":\"/a.conf\",\"upstream\":\"u{version};\"}", "upstream", "with {version}"},
        {"{\"file\":\"/a.conf\",\"upstream\":\"$x{version}\"}", "upstream", "with {version}"},
        {"{\"file\":\"/a.conf\",\"upstream\":\"u{version}{\"}", "upstream", "with {version}"},
        {"{\"file\":\"/a.conf\",\"upstream\":\"u{version}\",\"test_command\":\"nginx -t\"}",
         "test_command", "test_command is an argv array"},
        {"{\"file\":\"/a.conf\",\"upstream\":\"u{version}\",\"test_command\":[]}", "test_command",
         "argv array"},
        {"{\"file\":\"/a.conf\",\"upstream\":\"u{version}\",\"test_command\":[\"nginx\",\"\"]}",
         "test_command", "argv array"},
        {"{\"file\":\"/a.conf\",\"upstream\":\"u{version}\",\"test_command\":[\"a\\u0000b\"]}",
         "test_command", "argv array"},
        {"{\"file\":\"/a.conf\",\"upstream\":\"u{version}\",\"reload_command\":[1]}",
         "reload_command", "reload_command is an argv array"},
    };
    struct push_env env = {0};

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        json_t *body = json_loads(cases[i].body, JSON_ALLOW_NUL, NULL), *config = NULL;
        struct mg_error err = {0};
        char *secret = (char *)"unset";
        enum mg_code rc;

        assert_non_null(body);
        rc = push_nginx_validate(&env, body, &config, &secret, &err);
        assert_null(secret);
        if (cases[i].field == NULL) {
            assert_int_equal(rc, MG_OK);
            assert_non_null(config);
            assert_int_equal(json_object_size(config), 4); /* filters are not the adapter's */
            assert_string_equal(json_string_value(json_object_get(config, "upstream")),
                                json_string_value(json_object_get(body, "upstream")));
            json_decref(config);
        } else {
            assert_int_equal(rc, MG_EINVAL);
            assert_string_equal(err.field, cases[i].field);
            assert_non_null(strstr(err.message, cases[i].message));
        }
        json_decref(body);
    }
}

static void test_validate_fills_default_commands(void **state)
{
    json_t *body = json_pack("{s:s, s:s}", "file", "/a.conf", "upstream", "u{version}");
    json_t *config = NULL, *want;
    struct push_env env = {0};
    struct mg_error err = {0};
    char *secret = NULL;

    (void)state;
    assert_int_equal(push_nginx_validate(&env, body, &config, &secret, &err), MG_OK);
    want = json_pack("{s:s, s:s, s:[s,s], s:[s,s,s]}", "file", "/a.conf", "upstream", "u{version}",
                     "test_command", "nginx", "-t", "reload_command", "nginx", "-s", "reload");
    assert_true(json_equal(config, want));
    json_decref(want);
    json_decref(config);
    json_decref(body);
}

static void delivery(struct store_delivery *d, const char *model, const char *alias,
                     const char *routes)
{
    memset(d, 0, sizeof(*d));
    snprintf(d->gateway, sizeof(d->gateway), "edge");
    snprintf(d->kind, sizeof(d->kind), "nginx");
    snprintf(d->model, sizeof(d->model), "%s", model);
    snprintf(d->alias, sizeof(d->alias), "%s", alias);
    d->generation = 7;
    d->payload = json_pack("{s:o}", "routes", json_loads(routes, 0, NULL));
    assert_non_null(d->payload);
}

static char *render(const struct store_delivery *d, const char *up)
{
    struct mg_buf b;

    mg_buf_init(&b, 1 << 16);
    if (!push_nginx_render(d, up, &b)) {
        mg_buf_release(&b);
        return NULL;
    }
    return b.data;
}

static void test_render(void **state)
{
    static const struct {
        const char *routes;
        const char *lines; /* between the header and "}" */
    } cases[] = {
        {"[{\"version\":1,\"weight\":100}]", "    * fraud_v1;\n"},
        {"[{\"version\":1,\"weight\":90},{\"version\":2,\"weight\":10}]",
         "    90% fraud_v1;\n    * fraud_v2;\n"},
        /* zero weights are left out, and "*" goes to the last that has a share */
        {"[{\"version\":1,\"weight\":90},{\"version\":2,\"weight\":10},{\"version\":3,"
         "\"weight\":0}]",
         "    90% fraud_v1;\n    * fraud_v2;\n"},
        {"[{\"version\":3,\"weight\":0},{\"version\":4,\"weight\":25},{\"version\":5,"
         "\"weight\":25},{\"version\":6,\"weight\":50}]",
         "    25% fraud_v4;\n    25% fraud_v5;\n    * fraud_v6;\n"},
        /* no routes (the alias was deleted): an empty value */
        {"[]", "    * \"\";\n"},
        {"[{\"version\":1,\"weight\":0}]", "    * \"\";\n"},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct store_delivery d;
        char want[512], *got;

        delivery(&d, "fraud", "production", cases[i].routes);
        snprintf(want, sizeof(want),
                 "# Managed by modelgate: model fraud, alias production, generation 7. Do not "
                 "edit.\nsplit_clients \"${request_id}\" $modelgate_fraud_production {\n%s}\n"
                 "split_clients \"${request_id}\" $modelgate_fraud_production_shadow {\n"
                 "    * \"\";\n}\n",
                 cases[i].lines);
        got = render(&d, "{model}_v{version}");
        assert_non_null(got);
        assert_string_equal(got, want);
        free(got);
        json_decref(d.payload);
    }
}

/* docs/contract.md "Routing strategies": match rules as chained maps ahead of the split, and the
 * shadow's own variable. */
static void test_render_strategies(void **state)
{
    static const struct {
        const char *payload;
        const char *want; /* after the header line */
    } cases[] = {
        /* one rule: the map is the alias's variable, its default the split */
        {"{\"routes\":[{\"version\":1,\"weight\":100}],"
         "\"match\":[{\"header\":\"x-tenant\",\"value\":\"acme\",\"version\":2}],"
         "\"shadow\":null}",
         "map $http_x_tenant $modelgate_fraud_production {\n"
         "    \"~^acme$\" fraud_v2;\n"
         "    default $modelgate_fraud_production_split;\n}\n"
         "split_clients \"${request_id}\" $modelgate_fraud_production_split {\n"
         "    * fraud_v1;\n}\n"
         "split_clients \"${request_id}\" $modelgate_fraud_production_shadow {\n"
         "    * \"\";\n}\n"},
        /* two rules in order; every character but letters and digits escaped (case kept);
         * a shadow of every request */
        {"{\"routes\":[{\"version\":1,\"weight\":90},{\"version\":2,\"weight\":10}],"
         "\"match\":[{\"header\":\"x-canary\",\"value\":\"1\",\"version\":3},"
         "{\"header\":\"x-tenant\",\"value\":\"Acme.eu$1\",\"version\":2}],"
         "\"shadow\":{\"version\":3,\"percent\":100}}",
         "map $http_x_canary $modelgate_fraud_production {\n"
         "    \"~^1$\" fraud_v3;\n"
         "    default $modelgate_fraud_production_pin1;\n}\n"
         "map $http_x_tenant $modelgate_fraud_production_pin1 {\n"
         "    \"~^Acme\\\\.eu\\\\$1$\" fraud_v2;\n"
         "    default $modelgate_fraud_production_split;\n}\n"
         "split_clients \"${request_id}\" $modelgate_fraud_production_split {\n"
         "    90% fraud_v1;\n    * fraud_v2;\n}\n"
         "split_clients \"${request_id}\" $modelgate_fraud_production_shadow {\n"
         "    * fraud_v3;\n}\n"},
        /* a shadow of a share of requests, no rules */
        {"{\"routes\":[{\"version\":1,\"weight\":100}],\"match\":[],"
         "\"shadow\":{\"version\":4,\"percent\":25}}",
         "split_clients \"${request_id}\" $modelgate_fraud_production {\n"
         "    * fraud_v1;\n}\n"
         "split_clients \"${request_id}\" $modelgate_fraud_production_shadow {\n"
         "    25% fraud_v4;\n    * \"\";\n}\n"},
    };
    const char *head = "# Managed by modelgate: model fraud, alias production, generation 7. "
                       "Do not edit.\n";

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct store_delivery d;
        char *got;

        delivery(&d, "fraud", "production", "[]");
        json_decref(d.payload);
        d.payload = json_loads(cases[i].payload, 0, NULL);
        assert_non_null(d.payload);
        got = render(&d, "{model}_v{version}");
        assert_non_null(got);
        assert_true(strncmp(got, head, strlen(head)) == 0);
        assert_string_equal(got + strlen(head), cases[i].want);
        free(got);
        json_decref(d.payload);
    }
    /* a header nginx has no variable for is refused, not written */
    {
        struct store_delivery d;

        delivery(&d, "fraud", "production", "[]");
        json_decref(d.payload);
        d.payload = json_loads("{\"routes\":[{\"version\":1,\"weight\":100}],\"match\":"
                               "[{\"header\":\"x.tenant\",\"value\":\"a\",\"version\":1}]}",
                               0, NULL);
        assert_null(render(&d, "{model}_v{version}"));
        json_decref(d.payload);
    }
}

static void test_render_longest_names(void **state)
{
    char model[64], alias[33], var[256], want[400], *got;
    struct store_delivery d;

    (void)state;
    /* every character escaped: the variable is 199 bytes */
    memset(model, '-', 63);
    model[0] = 'a';
    model[63] = '\0';
    memset(alias, '-', 32);
    alias[0] = 'a';
    alias[32] = '\0';
    delivery(&d, model, alias, "[{\"version\":12,\"weight\":100}]");
    assert_true(push_nginx_variable(model, alias, var, sizeof(var)));
    assert_int_equal(strlen(var), 199);
    got = render(&d, "up_v{version}");
    assert_non_null(got);
    snprintf(want, sizeof(want), "split_clients \"${request_id}\" $%s {\n    * up_v12;\n}\n", var);
    assert_non_null(strstr(got, want));
    free(got);
    /* an upstream name past 255 bytes is refused, not cut */
    {
        char up[300];

        memset(up, 'u', 254);
        snprintf(up + 254, sizeof(up) - 254, "{version}");
        assert_null(render(&d, up)); /* 254 + "12" */
        up[1] = '\0';
        memmove(up + 1, up + 254, strlen("{version}") + 1);
        got = render(&d, up);
        assert_non_null(strstr(got, "    * u12;\n"));
        free(got);
    }
    json_decref(d.payload);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    char *text;
    long n;

    if (f == NULL)
        return NULL;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    rewind(f);
    text = malloc((size_t)n + 1);
    assert_non_null(text);
    assert_int_equal(fread(text, 1, (size_t)n, f), (size_t)n);
    text[n] = '\0';
    fclose(f);
    return text;
}

static void deliver(const char *test_cmd, const char *reload_cmd, const char *routes,
                    struct push_result *res)
{
    struct store_delivery d;
    struct push_env env = {0};
    char file[128];

    snprintf(file, sizeof(file), "%s/{model}_{alias}.conf", dir);
    delivery(&d, "fraud", "production", routes);
    d.config = json_pack("{s:s, s:s, s:[s], s:[s]}", "file", file, "upstream", "fraud_v{version}",
                         "test_command", test_cmd, "reload_command", reload_cmd);
    assert_non_null(d.config);
    memset(res, 0, sizeof(*res));
    push_nginx_deliver(&env, &d, res);
    json_decref(d.config);
    json_decref(d.payload);
}

static void test_deliver(void **state)
{
    static const char *const v1 = "[{\"version\":1,\"weight\":100}]";
    static const char *const v2 = "[{\"version\":1,\"weight\":50},{\"version\":2,\"weight\":50}]";
    struct push_result res;
    char path[128], *text;
    struct stat st;

    (void)state;
    snprintf(path, sizeof(path), "%s/fraud_production.conf", dir);
    /* a failed test with no previous file leaves none */
    deliver("false", "true", v1, &res);
    assert_false(res.ok);
    assert_non_null(strstr(res.error, "the nginx config test failed (exit 1); the previous "
                                      "file was kept"));
    assert_int_equal(access(path, F_OK), -1);

    deliver("true", "true", v1, &res);
    assert_true(res.ok);
    assert_string_equal(res.error, "");
    text = slurp(path);
    assert_non_null(text);
    assert_non_null(strstr(text, "$modelgate_fraud_production {\n    * fraud_v1;\n}\n"));
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0644);
    free(text);

    /* a failed test puts the previous file back */
    deliver("false", "true", v2, &res);
    assert_false(res.ok);
    assert_non_null(strstr(res.error, "the previous file was kept"));
    text = slurp(path);
    assert_non_null(strstr(text, "    * fraud_v1;\n"));
    assert_null(strstr(text, "fraud_v2"));
    free(text);

    /* a failed reload is a failed delivery; the tested file stays */
    deliver("true", "false", v2, &res);
    assert_false(res.ok);
    assert_non_null(strstr(res.error, "the nginx reload failed (exit 1)"));
    text = slurp(path);
    assert_non_null(strstr(text, "    50% fraud_v1;\n    * fraud_v2;\n"));
    free(text);

    /* a command that cannot start */
    deliver("/nonexistent/nginx", "true", v1, &res);
    assert_false(res.ok);
    assert_non_null(strstr(res.error, "the nginx config test failed"));
}

static void test_deliver_misconfigured(void **state)
{
    struct store_delivery d;
    struct push_env env = {0};
    struct push_result res = {0};

    (void)state;
    delivery(&d, "fraud", "production", "[]");
    d.config = json_pack("{s:s}", "file", "/tmp/x.conf"); /* no upstream */
    push_nginx_deliver(&env, &d, &res);
    assert_false(res.ok);
    assert_string_equal(res.error, "gateway misconfigured");
    json_decref(d.config);
    json_decref(d.payload);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_validate),
        cmocka_unit_test(test_validate_fills_default_commands),
        cmocka_unit_test(test_render),
        cmocka_unit_test(test_render_strategies),
        cmocka_unit_test(test_render_longest_names),
        cmocka_unit_test_setup_teardown(test_deliver, setup, teardown),
        cmocka_unit_test(test_deliver_misconfigured),
    };

    return cmocka_run_group_tests_name("unit_gateways_nginx", tests, NULL, NULL);
}
