/*
 * test_upload_rss.c - a 1 GiB upload is streamed to the blob backend (the data
 * directory, or S3 / an OCI registry as s3_integration_* / oci_integration_*): the
 * daemon's peak resident set (VmHWM) stays under 64 MiB, the stored blob has the
 * right digest and size, and a Range read in its middle gives the bytes sent. The body is generated
 * on the fly by the client; nothing is held in memory or written to a temp file on this side
 * either.
 *
 * Skipped under MG_SANITIZE=1: shadow memory makes RSS meaningless there.
 */
#include "harness.h"

#include <stdio.h>
#include <string.h>

#include "base/util.h"

#define GIB (1ull << 30)
#define RSS_LIMIT_KIB (64l * 1024)

static void test_one_gib_upload_in_constant_memory(void **state)
{
    struct mg_server *s = *state;
    char digest[IT_DIGEST_LEN + 1];
    char path[160];
    struct it_resp *r;
    long before, peak;
    int64_t t0, ms;

    if (it_sanitized())
        it_not_applicable("RSS means nothing under the sanitizers; the normal build measures it");
    before = it_server_peak_rss_kib(s);

    t0 = mg_mono_ms();
    r = it_upload_stream(s, s->admin_token, GIB, 2024, false, NULL, digest);
    ms = mg_mono_ms() - t0;
    it_expect_status(s, r, 201);
    assert_string_equal(it_jstr(r->json, "digest"), digest);
    assert_int_equal(it_jint(r->json, "size"), GIB);
    assert_string_equal(it_jstr(r->json, "media_type"), "application/octet-stream");

    peak = it_server_peak_rss_kib(s);
    print_message("1 GiB upload: %lld ms (%.0f MiB/s), daemon VmHWM %ld KiB before, %ld KiB "
                  "after\n",
                  (long long)ms, ms > 0 ? 1024.0 * 1000.0 / (double)ms : 0.0, before, peak);
    if (peak >= RSS_LIMIT_KIB)
        fail_msg("peak RSS %ld KiB >= %ld KiB during a 1 GiB upload", peak, RSS_LIMIT_KIB);

    snprintf(path, sizeof(path), "/api/v1/blobs/%s", digest);
    r = it_request(s, "HEAD", path, s->admin_token, NULL, NULL, 0);
    it_expect_status(s, r, 200);
    assert_non_null(it_header(r, "Content-Length"));
    assert_string_equal(it_header(r, "Content-Length"), "1073741824");

    /* A range across the middle (an S3 part boundary with 8 MiB parts): the bytes sent. */
    {
        static unsigned char want[3 << 20];
        const uint64_t off = GIB / 2 - (1u << 20);
        char range[96];
        const char *headers[] = {range, NULL};

        snprintf(range, sizeof(range), "Range: bytes=%llu-%llu", (unsigned long long)off,
                 (unsigned long long)(off + sizeof(want) - 1));
        r = it_request_h(s, "GET", path, s->admin_token, NULL, NULL, 0, headers);
        it_expect_status(s, r, 206);
        assert_int_equal(r->len, sizeof(want));
        it_pattern(2024, off, want, sizeof(want));
        assert_memory_equal(r->body, want, sizeof(want));
    }
    peak = it_server_peak_rss_kib(s);
    if (peak >= RSS_LIMIT_KIB)
        fail_msg("peak RSS %ld KiB >= %ld KiB after a range read", peak, RSS_LIMIT_KIB);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_one_gib_upload_in_constant_memory, it_test_teardown),
    };

    return it_main_result(cmocka_run_group_tests_name("integration_upload_rss", tests,
                                                      it_group_setup, it_group_teardown));
}
