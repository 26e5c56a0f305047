/*
 * test_limits.c - size caps: a server started with --max-blob-bytes 1024 and
 * --max-json-bytes 512 answers 413 payload_too_large past them, keeps
 * nothing of a refused upload, and still accepts bodies at the limit.
 */
#include "harness.h"
#include "sys.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int setup(void **state)
{
    static const char *const args[] = {"--max-blob-bytes", "1024", "--max-json-bytes", "512", NULL};

    *state = it_server_start(args);
    return 0;
}

static void test_blob_at_the_limit_is_accepted(void **state)
{
    struct mg_server *s = *state;
    unsigned char data[1024];
    struct it_resp *r;

    it_pattern(1, 0, data, sizeof(data));
    r = it_upload(s, data, sizeof(data), NULL);
    it_expect_status(s, r, 201);
    assert_int_equal(it_jint(r->json, "size"), 1024);
}

/* blobs/tmp empties: the refused upload's temp file goes when the request is cleaned up,
 * which may come a moment after the answer (seen under load, M29 runs two at a time). */
static void expect_tmp_empty(const struct mg_server *s)
{
    int64_t deadline = it_deadline(5000);

    while (it_data_dir_count(s, "blobs/tmp") != 0) {
        if (it_now_ms() > deadline)
            fail_msg("%zu files left in blobs/tmp after a refused upload",
                     it_data_dir_count(s, "blobs/tmp"));
        it_pause_ms(5);
    }
}

static void test_blob_over_the_limit(void **state)
{
    struct mg_server *s = *state;
    unsigned char data[1025];
    char digest[IT_DIGEST_LEN + 1];
    char path[160];
    struct it_resp *r;

    it_pattern(2, 0, data, sizeof(data));
    it_digest(data, sizeof(data), digest);
    r = it_request(s, "POST", "/api/v1/blobs", s->admin_token, "application/octet-stream", data,
                   sizeof(data));
    it_expect_error(s, r, 413, "payload_too_large");
    snprintf(path, sizeof(path), "/api/v1/blobs/%s", digest);
    r = it_request(s, "HEAD", path, s->admin_token, NULL, NULL, 0);
    it_expect_status(s, r, 404);
    expect_tmp_empty(s);

    /* Without a Content-Length the cap is enforced while streaming. */
    r = it_upload_stream(s, s->admin_token, 4096, 3, true, NULL, digest);
    it_expect_error(s, r, 413, "payload_too_large");
    snprintf(path, sizeof(path), "/api/v1/blobs/%s", digest);
    r = it_request(s, "HEAD", path, s->admin_token, NULL, NULL, 0);
    it_expect_status(s, r, 404);
    expect_tmp_empty(s);

    /* The server is still fine afterwards. */
    r = it_get(s, "/healthz", NULL);
    it_expect_status(s, r, 200);
}

/* {"name":"<name>","description":"xxx…"} of exactly `size` bytes. */
static char *json_of_size(const char *name, size_t size)
{
    char *out = malloc(size + 1);
    int head;

    assert_non_null(out);
    head = snprintf(out, size + 1, "{\"name\":\"%s\",\"description\":\"", name);
    assert_true(head > 0 && (size_t)head + 2 <= size);
    memset(out + head, 'x', size - (size_t)head - 2);
    memcpy(out + size - 2, "\"}", 2);
    out[size] = '\0';
    return out;
}

static void test_json_over_the_limit(void **state)
{
    struct mg_server *s = *state;
    char *body;
    struct it_resp *r;

    body = json_of_size("small-enough", 512);
    r = it_jreq(s, "POST", "/api/v1/models", s->admin_token, body);
    free(body);
    it_expect_status(s, r, 201);

    body = json_of_size("too-big", 600);
    r = it_jreq(s, "POST", "/api/v1/models", s->admin_token, body);
    free(body);
    it_expect_error(s, r, 413, "payload_too_large");
    r = it_get(s, "/api/v1/models/too-big", s->admin_token);
    it_expect_error(s, r, 404, "not_found");

    /* The JSON cap holds on every JSON endpoint, PATCH included. */
    body = json_of_size("small-enough", 4096);
    r = it_jreq(s, "PATCH", "/api/v1/models/small-enough", s->admin_token, body);
    free(body);
    it_expect_error(s, r, 413, "payload_too_large");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_blob_at_the_limit_is_accepted, it_test_teardown),
        cmocka_unit_test_teardown(test_blob_over_the_limit, it_test_teardown),
        cmocka_unit_test_teardown(test_json_over_the_limit, it_test_teardown),
    };

    return it_main_result(
        cmocka_run_group_tests_name("integration_limits", tests, setup, it_group_teardown));
}
