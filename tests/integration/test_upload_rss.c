/*
 * test_upload_rss.c - a 1 GiB upload is streamed to disk: the daemon's peak
 * resident set (VmHWM) stays under 64 MiB, and the stored blob has the right
 * digest and size. The body is generated on the fly by the client; nothing
 * is held in memory or written to a temp file on this side either.
 *
 * Skipped under MG_SANITIZE=1: shadow memory makes RSS meaningless there.
 */
#include "harness.h"

#include <stdio.h>
#include <string.h>

#include "common/util.h"

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
        skip();
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
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_one_gib_upload_in_constant_memory, it_test_teardown),
    };

    return cmocka_run_group_tests_name("integration_upload_rss", tests, it_group_setup,
                                       it_group_teardown);
}
