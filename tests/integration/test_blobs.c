/*
 * test_blobs.c - POST/HEAD/GET /api/v1/blobs: content addressing, the
 * X-Content-Digest check (nothing kept on a mismatch), deduplication, ETag,
 * Range and HEAD, streamed (chunked) uploads and digest validation in paths.
 */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/util.h"

/* "blobs/sha256/ab/abcdef…" for a digest. */
static void blob_rel(const char *digest, char out[128])
{
    const char *hex = digest + 7;

    snprintf(out, 128, "blobs/sha256/%.2s/%s", hex, hex);
}

static void expect_blob_record(const struct it_resp *r, const char *digest, size_t size)
{
    assert_string_equal(it_jstr(r->json, "digest"), digest);
    assert_int_equal(it_jint(r->json, "size"), size);
    assert_string_equal(it_jstr(r->json, "media_type"), "application/octet-stream");
    assert_true(json_is_null(json_object_get(r->json, "files")));
}

static void test_upload_then_identical_upload(void **state)
{
    struct mg_server *s = *state;
    static const char data[] = "weights of a very small model, version one";
    const size_t len = sizeof(data) - 1;
    char digest[IT_DIGEST_LEN + 1];
    char header[128];
    char rel[128];
    char path[IT_PATH_MAX];
    struct stat st;
    struct it_resp *r;

    it_digest(data, len, digest);
    snprintf(header, sizeof(header), "X-Content-Digest: %s", digest);
    {
        const char *headers[] = {header, NULL};

        r = it_request_h(s, "POST", "/api/v1/blobs", s->admin_token, "application/octet-stream",
                         data, len, headers);
    }
    it_expect_status(s, r, 201);
    expect_blob_record(r, digest, len);

    /* Stored once, under its digest, with the bytes sent. */
    assert_true(it_blob_stored(s, digest));
    if (strcmp(it_blob_kind(), "file") == 0) {
        blob_rel(digest, rel);
        it_data_path(s, rel, path);
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_size, len);
    }

    /* Same bytes again: 200 with the same record. */
    r = it_request(s, "POST", "/api/v1/blobs", s->admin_token, "application/octet-stream", data,
                   len);
    it_expect_status(s, r, 200);
    expect_blob_record(r, digest, len);
    {
        const char *headers[] = {header, NULL};

        r = it_request_h(s, "POST", "/api/v1/blobs", s->admin_token, "application/octet-stream",
                         data, len, headers);
    }
    it_expect_status(s, r, 200);
    expect_blob_record(r, digest, len);
}

static void test_digest_mismatch_keeps_nothing(void **state)
{
    struct mg_server *s = *state;
    static const char data[] = "bytes whose digest the client got wrong";
    const size_t len = sizeof(data) - 1;
    char actual[IT_DIGEST_LEN + 1];
    char claimed[IT_DIGEST_LEN + 1];
    char streamed[IT_DIGEST_LEN + 1];
    char header[128];
    char path[160];
    struct it_resp *r;
    const char *headers[] = {header, NULL};

    it_digest(data, len, actual);
    it_digest("something else", 14, claimed);
    snprintf(header, sizeof(header), "X-Content-Digest: %s", claimed);
    r = it_request_h(s, "POST", "/api/v1/blobs", s->admin_token, "application/octet-stream", data,
                     len, headers);
    it_expect_error(s, r, 400, "digest_mismatch");

    assert_false(it_blob_stored(s, actual));
    assert_false(it_blob_stored(s, claimed));
    assert_int_equal(it_blob_leftovers(s), 0);
    snprintf(path, sizeof(path), "/api/v1/blobs/%s", actual);
    r = it_request(s, "HEAD", path, s->admin_token, NULL, NULL, 0);
    it_expect_status(s, r, 404);
    r = it_get(s, path, s->admin_token);
    it_expect_error(s, r, 404, "not_found");
    snprintf(path, sizeof(path), "/api/v1/blobs/%s", claimed);
    r = it_request(s, "HEAD", path, s->admin_token, NULL, NULL, 0);
    it_expect_status(s, r, 404);

    /* A streamed (chunked) upload gets the same check. */
    r = it_upload_stream(s, s->admin_token, 200000, 7, true, headers, streamed);
    it_expect_error(s, r, 400, "digest_mismatch");
    assert_false(it_blob_stored(s, streamed));
    assert_int_equal(it_blob_leftovers(s), 0);

    /* A header that is not a digest at all is refused too. */
    snprintf(header, sizeof(header), "X-Content-Digest: md5:0123456789abcdef");
    r = it_request_h(s, "POST", "/api/v1/blobs", s->admin_token, "application/octet-stream", data,
                     len, headers);
    it_expect_status(s, r, 400);
    assert_non_null(it_error_code(r));
    assert_true(strcmp(it_error_code(r), "invalid_argument") == 0 ||
                strcmp(it_error_code(r), "digest_mismatch") == 0);
    assert_false(it_blob_stored(s, actual));
}

static void test_get_head_etag_range(void **state)
{
    struct mg_server *s = *state;
    unsigned char data[1000];
    char digest[IT_DIGEST_LEN + 1];
    char path[160];
    char etag[80];
    struct it_resp *r;

    it_pattern(42, 0, data, sizeof(data));
    r = it_upload(s, data, sizeof(data), digest);
    assert_int_equal(it_jint(r->json, "size"), sizeof(data));
    snprintf(path, sizeof(path), "/api/v1/blobs/%s", digest);
    snprintf(etag, sizeof(etag), "\"%s\"", digest);

    r = it_get(s, path, s->admin_token);
    it_expect_status(s, r, 200);
    assert_int_equal(r->len, sizeof(data));
    assert_memory_equal(r->body, data, sizeof(data));
    assert_non_null(it_header(r, "ETag"));
    assert_string_equal(it_header(r, "ETag"), etag);

    {
        const char *headers[] = {"Range: bytes=0-9", NULL};

        r = it_request_h(s, "GET", path, s->admin_token, NULL, NULL, 0, headers);
    }
    it_expect_status(s, r, 206);
    assert_int_equal(r->len, 10);
    assert_memory_equal(r->body, data, 10);
    assert_non_null(it_header(r, "Content-Range"));
    assert_string_equal(it_header(r, "Content-Range"), "bytes 0-9/1000");

    {
        const char *headers[] = {"Range: bytes=990-", NULL};

        r = it_request_h(s, "GET", path, s->admin_token, NULL, NULL, 0, headers);
    }
    it_expect_status(s, r, 206);
    assert_int_equal(r->len, 10);
    assert_memory_equal(r->body, data + 990, 10);

    {
        const char *headers[] = {"Range: bytes=100-199", NULL};

        r = it_request_h(s, "GET", path, s->admin_token, NULL, NULL, 0, headers);
    }
    it_expect_status(s, r, 206);
    assert_int_equal(r->len, 100);
    assert_memory_equal(r->body, data + 100, 100);

    r = it_request(s, "HEAD", path, s->admin_token, NULL, NULL, 0);
    it_expect_status(s, r, 200);
    assert_int_equal(r->len, 0);
    assert_non_null(it_header(r, "Content-Length"));
    assert_string_equal(it_header(r, "Content-Length"), "1000");
}

static void test_chunked_upload(void **state)
{
    struct mg_server *s = *state;
    char digest[IT_DIGEST_LEN + 1];
    char path[160];
    struct it_resp *r;
    unsigned char tail[16];
    unsigned char want[16];
    const uint64_t size = 3u << 20;

    r = it_upload_stream(s, s->admin_token, size, 99, true, NULL, digest);
    it_expect_status(s, r, 201);
    assert_string_equal(it_jstr(r->json, "digest"), digest);
    assert_int_equal(it_jint(r->json, "size"), size);

    /* The stored bytes are the ones streamed: check the last 16. */
    snprintf(path, sizeof(path), "/api/v1/blobs/%s", digest);
    {
        const char *headers[] = {"Range: bytes=3145712-3145727", NULL};

        r = it_request_h(s, "GET", path, s->admin_token, NULL, NULL, 0, headers);
    }
    it_expect_status(s, r, 206);
    assert_int_equal(r->len, 16);
    memcpy(tail, r->body, 16);
    it_pattern(99, size - 16, want, 16);
    assert_memory_equal(tail, want, 16);

    /* The same bytes with a Content-Length are the same blob. */
    r = it_upload_stream(s, s->admin_token, size, 99, false, NULL, NULL);
    it_expect_status(s, r, 200);
    assert_string_equal(it_jstr(r->json, "digest"), digest);
    assert_int_equal(it_blob_leftovers(s), 0);
}

static void test_blob_paths_are_validated(void **state)
{
    static const char *const bad[] = {
        "/api/v1/blobs/sha256:xyz",
        ("/api/v1/blobs/sha256:"
         "ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789"),
        "/api/v1/blobs/sha512:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        "/api/v1/blobs/..",
        "/api/v1/blobs/%2e%2e",
        "/api/v1/blobs/..%2f..%2fadmin.token",
        "/api/v1/blobs/0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
    };
    struct mg_server *s = *state;
    struct it_resp *r;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        r = it_get(s, bad[i], s->admin_token);
        it_expect_error(s, r, 400, "invalid_argument");
        r = it_request(s, "HEAD", bad[i], s->admin_token, NULL, NULL, 0);
        it_expect_status(s, r, 400);
    }
    r = it_get(s,
               "/api/v1/blobs/"
               "sha256:0000000000000000000000000000000000000000000000000000000000000000",
               s->admin_token);
    it_expect_error(s, r, 404, "not_found");
}

static void test_aborted_upload_leaves_nothing(void **state)
{
    struct mg_server *s = *state;
    int64_t deadline;
    struct it_resp *r;

    it_upload_abort(s, s->admin_token, 64u << 20, 4u << 20);
    /* The server notices the dropped connection and removes its temp file. */
    deadline = mg_mono_ms() + 10000;
    while (it_blob_leftovers(s) != 0) {
        struct timespec ts = {0, 10 * 1000 * 1000};

        if (mg_mono_ms() > deadline)
            fail_msg("a temp file of the dropped upload is still in blobs/tmp after 10 s");
        nanosleep(&ts, NULL);
    }
    r = it_get(s, "/healthz", NULL);
    it_expect_status(s, r, 200);
    r = it_upload_stream(s, s->admin_token, 64u << 20, 5, false, NULL, NULL);
    it_expect_status(s, r, 201);
}

static void test_parallel_identical_uploads(void **state)
{
    struct mg_server *s = *state;
    enum { N = 8 };
    static unsigned char data[100000];
    struct it_spec specs[N];
    struct it_resp *out[N];
    char digest[IT_DIGEST_LEN + 1];
    int created = 0;

    it_pattern(77, 0, data, sizeof(data));
    it_digest(data, sizeof(data), digest);
    for (int i = 0; i < N; i++)
        specs[i] =
            (struct it_spec){"POST", "/api/v1/blobs", s->admin_token, "application/octet-stream",
                             data,   sizeof(data)};
    it_request_parallel(s, N, specs, out);
    for (int i = 0; i < N; i++) {
        if (out[i]->status == 201)
            created++;
        else
            it_expect_status(s, out[i], 200);
        assert_string_equal(it_jstr(out[i]->json, "digest"), digest);
        assert_int_equal(it_jint(out[i]->json, "size"), sizeof(data));
    }
    assert_int_equal(created, 1);
    assert_true(it_blob_stored(s, digest));
    assert_int_equal(it_blob_leftovers(s), 0);
}

/*
 * With one commit worker, a burst of different uploads queues behind it:
 * every one is still committed, and nothing is left waiting afterwards.
 */
static void test_commit_workers_are_bounded(void **state)
{
    static const char *const args[] = {"--commit-workers", "1", NULL};
    enum { N = 12, LEN = 1 << 20 };
    struct mg_server *s = it_server_start(args);
    struct it_spec specs[N];
    struct it_resp *out[N];
    char digest[N][IT_DIGEST_LEN + 1], path[160];
    unsigned char *data = malloc((size_t)N * LEN);

    (void)state;
    assert_non_null(data);
    for (int i = 0; i < N; i++) {
        it_pattern(1000 + (uint32_t)i, 0, data + (size_t)i * LEN, LEN);
        it_digest(data + (size_t)i * LEN, LEN, digest[i]);
        specs[i] = (struct it_spec){"POST",
                                    "/api/v1/blobs",
                                    s->admin_token,
                                    "application/octet-stream",
                                    data + (size_t)i * LEN,
                                    LEN};
    }
    it_request_parallel(s, N, specs, out);
    for (int i = 0; i < N; i++) {
        it_expect_status(s, out[i], 201);
        assert_string_equal(it_jstr(out[i]->json, "digest"), digest[i]);
    }
    for (int i = 0; i < N; i++) {
        struct it_resp *r;
        snprintf(path, sizeof(path), "/api/v1/blobs/%.*s", IT_DIGEST_LEN, digest[i]);
        r = it_request(s, "HEAD", path, s->admin_token, NULL, NULL, 0);
        it_expect_status(s, r, 200);
    }
    assert_int_equal(it_metric(s, "modelgate_upload_commit_waiting"), 0);
    /* How many had to wait depends on timing; that the counter is there does not. */
    (void)it_metric(s, "modelgate_upload_commit_waited_total");
    assert_int_equal(it_blob_leftovers(s), 0);
    free(data);
    it_server_stop(s);
    it_server_free(&s);
}

static void test_blob_error_bodies(void **state)
{
    struct mg_server *s = *state;
    struct it_resp *r;

    /* Every error is the documented shape, whatever the route. */
    r = it_get(s, "/api/v1/no-such-route", s->admin_token);
    it_expect_status(s, r, 404);
    it_expect_error(s, r, 404, "not_found");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_upload_then_identical_upload, it_test_teardown),
        cmocka_unit_test_teardown(test_digest_mismatch_keeps_nothing, it_test_teardown),
        cmocka_unit_test_teardown(test_get_head_etag_range, it_test_teardown),
        cmocka_unit_test_teardown(test_chunked_upload, it_test_teardown),
        cmocka_unit_test_teardown(test_blob_paths_are_validated, it_test_teardown),
        cmocka_unit_test_teardown(test_parallel_identical_uploads, it_test_teardown),
        cmocka_unit_test_teardown(test_blob_error_bodies, it_test_teardown),
        cmocka_unit_test(test_commit_workers_are_bounded),
        /* Last: when it fails, the temp file it leaves must not fail the others. */
        cmocka_unit_test_teardown(test_aborted_upload_leaves_nothing, it_test_teardown),
    };

    return it_main_result(
        cmocka_run_group_tests_name("integration_blobs", tests, it_group_setup, it_group_teardown));
}
