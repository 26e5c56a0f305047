/*
 * test_restart.c - a graceful stop (SIGTERM, exit 0) and a start on the same
 * data directory keep everything: models, versions, datasets, blobs, tokens
 * (and revocations), the admin token file, and an audit chain that verifies.
 */
#include "harness.h"
#include "api.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const snapshot_paths[] = {
    "/api/v1/models/persist",
    "/api/v1/models/persist/versions",
    "/api/v1/models/persist/versions/1",
    "/api/v1/models/persist/versions/2",
    "/api/v1/models?limit=1000",
    "/api/v1/datasets/{parent}",
    "/api/v1/datasets/{child}",
    "/api/v1/datasets/{parent}/versions",
    "/api/v1/tokens",
};

#define N_SNAP (sizeof(snapshot_paths) / sizeof(snapshot_paths[0]))

struct world {
    char blob[IT_DIGEST_LEN + 1];
    char parent[IT_DIGEST_LEN + 1];
    char child[IT_DIGEST_LEN + 1];
    char *keeper;
    char *gone;
    json_t *snap[N_SNAP];
    json_t *verify;
    size_t audit_entries;
};

static void snap_path(const struct world *w, const char *tmpl, char out[256])
{
    if (strstr(tmpl, "{parent}") != NULL)
        snprintf(out, 256, "/api/v1/datasets/%s%s", w->parent, strstr(tmpl, "}") + 1);
    else if (strstr(tmpl, "{child}") != NULL)
        snprintf(out, 256, "/api/v1/datasets/%s%s", w->child, strstr(tmpl, "}") + 1);
    else
        snprintf(out, 256, "%s", tmpl);
}

static void build_world(struct mg_server *s, struct world *w)
{
    unsigned char data[5000];
    char tid[64];
    char path[160];
    struct it_resp *r;

    it_pattern(11, 0, data, sizeof(data));
    it_upload(s, data, sizeof(data), w->blob);
    it_digest("persisted parent data", 21, w->parent);
    it_digest("persisted child data", 20, w->child);
    w->keeper = it_token_create(s, "keeper", "publisher,reader", NULL);
    w->gone = it_token_create(s, "gone", "reader", tid);
    snprintf(path, sizeof(path), "/api/v1/tokens/%s", tid);
    r = it_request(s, "DELETE", path, s->admin_token, NULL, NULL, 0);
    it_expect_status(s, r, 204);

    r = it_jreq_v(
        s, "POST", "/api/v1/datasets", w->keeper,
        json_pack("{ss ss ss}", "digest", w->parent, "name", "parent", "uri", "s3://b/parent/"));
    it_expect_status(s, r, 201);
    r = it_jreq_v(
        s, "POST", "/api/v1/datasets", w->keeper,
        json_pack("{ss ss s[s]}", "digest", w->child, "name", "child", "parents", w->parent));
    it_expect_status(s, r, 201);

    r = it_jreq(s, "POST", "/api/v1/models", w->keeper,
                "{\"name\":\"persist\",\"description\":\"kept\",\"tags\":{\"team\":\"risk\"}}");
    it_expect_status(s, r, 201);
    r = it_jreq_v(
        s, "POST", "/api/v1/models/persist/versions", w->keeper,
        json_pack("{ss ss ss s{ss ss} s[{ss ss ss ss}] s{sf} s{si} s{ss} s{ss} s{sI ss} ss}",
                  "artifact", w->blob, "image", IT_IMAGE, "run_id", "train-1", "source", "repo",
                  "https://git.example/ml/persist", "commit", "abc123", "datasets", "digest",
                  w->child, "name", "child", "uri", "s3://b/child/", "role", "train", "metrics",
                  "auc", 0.93, "params", "epochs", 3, "tags", "team", "risk", "smoke", "profile",
                  "onnx", "resources", "parameters", (json_int_t)1000000, "precision", "int8",
                  "description", "v1"));
    it_expect_status(s, r, 201);
    r = it_jreq(s, "POST", "/api/v1/models/persist/versions/1/metrics", w->keeper,
                "{\"metrics\":{\"f1\":0.7}}");
    it_expect_status(s, r, 200);
    r = it_jreq(s, "PATCH", "/api/v1/models/persist/versions/1", w->keeper,
                "{\"tags\":{\"team\":\"risk\",\"state\":\"patched\"}}");
    it_expect_status(s, r, 200);
    r = it_jreq_v(s, "POST", "/api/v1/models/persist/versions", w->keeper,
                  json_pack("{ss}", "artifact", w->blob));
    it_expect_status(s, r, 201);
    it_release(s);
}

static void take_snapshot(struct mg_server *s, struct world *w)
{
    char path[256];
    struct it_resp *r;
    json_t *all = json_array();
    json_int_t after = 0;

    for (size_t i = 0; i < N_SNAP; i++) {
        snap_path(w, snapshot_paths[i], path);
        r = it_get(s, path, s->admin_token);
        it_expect_status(s, r, 200);
        w->snap[i] = json_incref(r->json);
    }
    r = it_get(s, "/api/v1/audit/verify", s->admin_token);
    it_expect_status(s, r, 200);
    assert_true(json_is_true(json_object_get(r->json, "ok")));
    w->verify = json_incref(r->json);
    for (;;) {
        snprintf(path, sizeof(path), "/api/v1/audit?after=%" JSON_INTEGER_FORMAT, after);
        r = it_get(s, path, s->admin_token);
        it_expect_status(s, r, 200);
        if (json_array_size(it_jarr(r->json, "items")) == 0)
            break;
        json_array_extend(all, it_jarr(r->json, "items"));
        after = it_jint(json_array_get(all, json_array_size(all) - 1), "seq");
    }
    w->audit_entries = json_array_size(all);
    json_decref(all);
    it_release(s);
}

static void check_world(struct mg_server *s, struct world *w)
{
    unsigned char data[5000];
    char path[256];
    struct it_resp *r;

    for (size_t i = 0; i < N_SNAP; i++) {
        snap_path(w, snapshot_paths[i], path);
        r = it_get(s, path, s->admin_token);
        it_expect_status(s, r, 200);
        if (!json_equal(r->json, w->snap[i])) {
            char *before = json_dumps(w->snap[i], JSON_COMPACT);

            fail_msg("GET %s changed across the restart:\nbefore: %s\nafter:  %s", path, before,
                     r->body);
        }
    }

    /* Blob bytes. */
    it_pattern(11, 0, data, sizeof(data));
    snprintf(path, sizeof(path), "/api/v1/blobs/%s", w->blob);
    r = it_get(s, path, w->keeper);
    it_expect_status(s, r, 200);
    assert_int_equal(r->len, sizeof(data));
    assert_memory_equal(r->body, data, sizeof(data));
    r = it_get(s, "/api/v1/models/persist/versions/1/artifact", w->keeper);
    it_expect_status(s, r, 200);
    assert_int_equal(r->len, sizeof(data));

    /* Tokens and revocations. */
    r = it_get(s, "/api/v1/whoami", w->keeper);
    it_expect_status(s, r, 200);
    assert_string_equal(it_jstr(r->json, "name"), "keeper");
    r = it_get(s, "/api/v1/whoami", w->gone);
    it_expect_error(s, r, 401, "unauthenticated");
    r = it_get(s, "/api/v1/whoami", s->admin_token);
    it_expect_status(s, r, 200);

    /* The audit chain survives and still verifies. */
    r = it_get(s, "/api/v1/audit/verify", s->admin_token);
    it_expect_status(s, r, 200);
    if (!json_is_true(json_object_get(r->json, "ok")))
        fail_msg("audit verify after restart: %s", r->body);
    assert_true(it_jint(r->json, "entries") >= (json_int_t)w->audit_entries);
    if (it_jint(r->json, "entries") == it_jint(w->verify, "entries"))
        assert_string_equal(it_jstr(r->json, "head"), it_jstr(w->verify, "head"));
    it_release(s);
}

static void test_restart_keeps_everything(void **state)
{
    struct mg_server *s = *state;
    struct world w;
    char admin_before[sizeof(s->admin_token)];
    int port_before;
    struct it_resp *r;

    memset(&w, 0, sizeof(w));
    build_world(s, &w);
    take_snapshot(s, &w);
    memcpy(admin_before, s->admin_token, sizeof(admin_before));
    port_before = s->port;

    for (int round = 0; round < 2; round++) {
        it_server_restart(s); /* asserts a clean exit 0 on SIGTERM */
        /* admin.token is not rewritten on a non-empty data directory. */
        assert_string_equal(s->admin_token, admin_before);
        print_message("restart %d: port %d -> %d\n", round + 1, port_before, s->port);
        check_world(s, &w);
    }

    /* Writes go on where they left off. */
    r = it_jreq_v(s, "POST", "/api/v1/models/persist/versions", w.keeper,
                  json_pack("{ss}", "artifact", w.blob));
    it_expect_status(s, r, 201);
    assert_int_equal(it_jint(r->json, "version"), 3);
    r = it_get(s, "/api/v1/models/persist", w.keeper);
    assert_int_equal(it_jint(r->json, "latest_version"), 3);
    r = it_jreq(s, "POST", "/api/v1/models", w.keeper, "{\"name\":\"persist\"}");
    it_expect_error(s, r, 409, "conflict");
    r = it_get(s, "/api/v1/audit/verify", s->admin_token);
    assert_true(json_is_true(json_object_get(r->json, "ok")));

    for (size_t i = 0; i < N_SNAP; i++)
        json_decref(w.snap[i]);
    json_decref(w.verify);
    free(w.keeper);
    free(w.gone);
}

static void test_ready_after_restart(void **state)
{
    struct mg_server *s = *state;
    struct it_resp *r;

    it_server_restart(s);
    r = it_get(s, "/healthz", NULL);
    it_expect_status(s, r, 200);
    assert_string_equal(it_jstr(r->json, "status"), "ok");
    r = it_get(s, "/readyz", NULL);
    it_expect_status(s, r, 200);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_restart_keeps_everything, it_test_teardown),
        cmocka_unit_test_teardown(test_ready_after_restart, it_test_teardown),
    };

    return it_main_result(cmocka_run_group_tests_name("integration_restart", tests, it_group_setup,
                                                      it_group_teardown));
}
