/*
 * test_blobs.c - store/blobs.c: streamed uploads (hashing, digest checks, size caps, abort),
 * reads and opens of stored blobs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "base/util.h"
#include "store_fixture.h"
#include "tests/unit/artifact/weights_writer.h"

/* Upload bytes in chunks of `chunk`; on success *blob is the commit's record. */
static enum mg_code upload(struct fx *fx, const void *data, size_t n, size_t chunk, uint64_t max,
                           const char *expected, json_t **blob, bool *created)
{
    struct store_blob_upload *up = NULL;
    const char *p = data;
    size_t off = 0;
    enum mg_code rc;

    mg_error_clear(&fx->err);
    rc = store_blob_upload_begin(fx->st, max, &up, &fx->err);
    if (rc != MG_OK)
        return rc;
    while (off < n) {
        size_t k = n - off < chunk ? n - off : chunk;
        rc = store_blob_upload_write(up, p + off, k, &fx->err);
        if (rc != MG_OK) {
            store_blob_upload_abort(&up);
            return rc;
        }
        off += k;
    }
    rc = store_blob_upload_commit(&up, "alice", expected, blob, created, &fx->err);
    assert_null(up);
    return rc;
}

static void test_blob_upload_commit(void **state)
{
    struct fx *fx = *state;
    static const char data[] = "hello, model registry\n";
    char digest[72], p[256];
    json_t *blob = NULL, *got = NULL;
    bool created = false;
    int fd = -1;
    uint64_t size = 0;
    char buf[64];

    fx_digest(data, strlen(data), digest);
    assert_int_equal(upload(fx, data, strlen(data), 5, 1 << 20, digest, &blob, &created), MG_OK);
    assert_true(created);
    assert_string_equal(json_string_value(json_object_get(blob, "digest")), digest);
    assert_int_equal(json_integer_value(json_object_get(blob, "size")), strlen(data));
    assert_string_equal(json_string_value(json_object_get(blob, "media_type")),
                        "application/octet-stream");
    assert_true(json_is_null(json_object_get(blob, "files")));
    json_decref(blob);

    /* In place under blobs/sha256/<2 hex>/<hex>; no temp file left. */
    snprintf(p, sizeof(p), "%s/blobs/sha256/%.2s/%s", fx->dir, digest + 7, digest + 7);
    assert_int_equal(access(p, R_OK), 0);
    assert_int_equal(fx_files_under(fx, "blobs/tmp"), 0);
    assert_int_equal(fx_files_under(fx, "blobs/sha256"), 1);

    assert_int_equal(store_blob_get(fx->st, digest, &got, &fx->err), MG_OK);
    assert_string_equal(json_string_value(json_object_get(got, "created_by")), "alice");
    assert_true(fx_is_rfc3339_ms(json_string_value(json_object_get(got, "created_at"))));
    json_decref(got);

    assert_int_equal(store_blob_open(fx->st, digest, &fd, &size, &fx->err), MG_OK);
    assert_int_equal(size, strlen(data));
    assert_int_equal(read(fd, buf, sizeof(buf)), (ssize_t)strlen(data));
    assert_memory_equal(buf, data, strlen(data));
    close(fd);
    assert_int_equal(fx_audit_count_action(fx, "blob.create"), 1);

    /* Without an expected digest the commit is accepted as well. */
    assert_int_equal(upload(fx, "other", 5, 2, 1 << 20, NULL, &blob, &created), MG_OK);
    assert_true(created);
    json_decref(blob);
    assert_int_equal(fx_files_under(fx, "blobs/sha256"), 2);
}

/* Past its first MiB an upload is hashed on a thread of its own through a
 * ring of chunks: the digest must not depend on how the body was cut. */
static void fill_random(uint8_t *p, size_t n, uint32_t seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (uint8_t)(seed >> 24);
    }
}

static size_t tmp_files(struct fx *fx)
{
    char p[256];
    size_t n = 0;
    DIR *d;
    struct dirent *e;

    fx_path(fx, "blobs/tmp", p, sizeof(p));
    assert_non_null(d = opendir(p));
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static void test_blob_upload_large_any_cut(void **state)
{
    static const size_t cuts[] = {4096, 300001, 1u << 20, (1u << 20) + 1, 5u << 20, 6u << 20};
    struct fx *fx = *state;
    size_t n = (5u << 20) + 333;
    uint8_t *data = malloc(n);
    char digest[72], other[72];
    json_t *blob = NULL;
    bool created = false;

    assert_non_null(data);
    fill_random(data, n, 7);
    fx_digest((const char *)data, n, digest);
    for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
        if (upload(fx, data, n, cuts[i], 1ull << 30, digest, &blob, &created) != MG_OK)
            fail_msg("chunks of %zu: %s", cuts[i], fx->err.message);
        assert_true(created == (i == 0));
        assert_string_equal(json_string_value(json_object_get(blob, "digest")), digest);
        assert_int_equal(json_integer_value(json_object_get(blob, "size")), n);
        json_decref(blob);
        blob = NULL;
    }
    /* One changed byte near the end, well past where the thread took over. */
    data[n - 10] ^= 1;
    fx_digest((const char *)data, n, other);
    assert_string_not_equal(other, digest);
    assert_int_equal(upload(fx, data, n, 65536, 1ull << 30, digest, &blob, &created), MG_EDIGEST);
    assert_null(blob);
    assert_non_null(strstr(fx->err.message, other));
    assert_int_equal(tmp_files(fx), 0);
    free(data);
}

static void test_blob_upload_abort_while_hashing(void **state)
{
    struct fx *fx = *state;
    struct store_blob_upload *up = NULL;
    size_t n = 3u << 20;
    uint8_t *data = malloc(n);

    assert_non_null(data);
    fill_random(data, n, 11);
    assert_int_equal(store_blob_upload_begin(fx->st, 1ull << 30, &up, &fx->err), MG_OK);
    assert_int_equal(store_blob_upload_write(up, data, n, &fx->err), MG_OK);
    assert_int_equal(tmp_files(fx), 1);
    store_blob_upload_abort(&up);
    assert_null(up);
    assert_int_equal(tmp_files(fx), 0);
    free(data);
}

/* More big uploads at once than get a hashing thread: the rest hash inline,
 * every digest still right. */
static void test_blob_uploads_many_at_once(void **state)
{
    enum { N = 24 };
    struct fx *fx = *state;
    struct store_blob_upload *up[N];
    size_t n = (2u << 20) + 17;
    uint8_t *data = malloc(n);
    char digest[N][72];
    json_t *blob = NULL;
    bool created = false;

    assert_non_null(data);
    fill_random(data, n, 3);
    for (int i = 0; i < N; i++) {
        data[0] = (uint8_t)i;
        fx_digest((const char *)data, n, digest[i]);
        assert_int_equal(store_blob_upload_begin(fx->st, 1ull << 30, &up[i], &fx->err), MG_OK);
        assert_int_equal(store_blob_upload_write(up[i], data, n / 2, &fx->err), MG_OK);
    }
    for (int i = 0; i < N; i++) {
        data[0] = (uint8_t)i;
        assert_int_equal(store_blob_upload_write(up[i], data + n / 2, n - n / 2, &fx->err), MG_OK);
        if (store_blob_upload_commit(&up[i], "alice", digest[i], &blob, &created, &fx->err) !=
            MG_OK)
            fail_msg("upload %d: %s", i, fx->err.message);
        assert_true(created);
        json_decref(blob);
        blob = NULL;
    }
    assert_int_equal(tmp_files(fx), 0);
    free(data);
}

static void test_blob_upload_wrong_digest(void **state)
{
    struct fx *fx = *state;
    static const char data[] = "the real bytes";
    char wrong[72], right[72];
    json_t *blob = NULL, *got = NULL;
    bool created = true;
    size_t before = fx_audit_count(fx);

    fx_digest("other bytes", 11, wrong);
    fx_digest(data, strlen(data), right);
    assert_int_equal(upload(fx, data, strlen(data), 4, 1 << 20, wrong, &blob, &created),
                     MG_EDIGEST);
    assert_int_equal(fx->err.code, MG_EDIGEST);
    assert_null(blob);
    assert_non_null(strstr(fx->err.message, right + 7));
    /* Nothing kept: no temp file, no blob file, no row, no audit entry. */
    assert_int_equal(fx_files_under(fx, "blobs/tmp"), 0);
    assert_int_equal(fx_files_under(fx, "blobs/sha256"), 0);
    assert_int_equal(store_blob_get(fx->st, right, &got, &fx->err), MG_ENOTFOUND);
    assert_null(got);
    assert_int_equal(store_blob_get(fx->st, wrong, &got, &fx->err), MG_ENOTFOUND);
    assert_int_equal(fx_audit_count(fx), before);

    /* An uppercase spelling of the right digest is not the right digest. */
    {
        char upper[72];
        size_t i;
        memcpy(upper, right, sizeof(upper));
        for (i = 7; upper[i]; i++)
            if (upper[i] >= 'a' && upper[i] <= 'f')
                upper[i] = (char)(upper[i] - 'a' + 'A');
        assert_int_equal(upload(fx, data, strlen(data), 4, 1 << 20, upper, &blob, &created),
                         MG_EDIGEST);
        assert_int_equal(fx_files_under(fx, "blobs/tmp"), 0);
        assert_int_equal(fx_files_under(fx, "blobs/sha256"), 0);
    }
}

static void test_blob_upload_idempotent(void **state)
{
    struct fx *fx = *state;
    static const char data[] = "same bytes twice";
    char digest[72];
    json_t *a = NULL, *b = NULL;
    bool created = false;

    fx_digest(data, strlen(data), digest);
    assert_int_equal(upload(fx, data, strlen(data), 3, 1 << 20, digest, &a, &created), MG_OK);
    assert_true(created);
    assert_int_equal(upload(fx, data, strlen(data), 7, 1 << 20, digest, &b, &created), MG_OK);
    assert_false(created);
    assert_true(json_equal(a, b)); /* same record, without created_at/by */
    assert_null(json_object_get(b, "created_at"));
    json_decref(a);
    json_decref(b);
    assert_int_equal(fx_files_under(fx, "blobs/tmp"), 0);
    assert_int_equal(fx_files_under(fx, "blobs/sha256"), 1);
    assert_int_equal(fx_audit_count_action(fx, "blob.create"), 1);
}

static void test_blob_upload_too_big(void **state)
{
    struct fx *fx = *state;
    struct store_blob_upload *up = NULL;
    json_t *blob = NULL;
    bool created = false;
    char digest[72];

    /* Exactly max is fine; one more byte is refused and not written. */
    assert_int_equal(store_blob_upload_begin(fx->st, 10, &up, &fx->err), MG_OK);
    assert_int_equal(store_blob_upload_write(up, "01234", 5, &fx->err), MG_OK);
    assert_int_equal(store_blob_upload_write(up, "56789", 5, &fx->err), MG_OK);
    assert_int_equal(store_blob_upload_write(up, "X", 1, &fx->err), MG_ETOOBIG);
    assert_int_equal(fx->err.code, MG_ETOOBIG);
    assert_int_equal(store_blob_upload_write(up, "", 0, &fx->err), MG_OK);
    /* The 11th byte did not reach the file or the hash. */
    fx_digest("0123456789", 10, digest);
    assert_int_equal(store_blob_upload_commit(&up, "alice", digest, &blob, &created, &fx->err),
                     MG_OK);
    assert_null(up);
    assert_int_equal(json_integer_value(json_object_get(blob, "size")), 10);
    json_decref(blob);

    /* One oversized write on a fresh upload, then abort: nothing left behind. */
    assert_int_equal(store_blob_upload_begin(fx->st, 10, &up, &fx->err), MG_OK);
    assert_int_equal(store_blob_upload_write(up, "0123456789A", 11, &fx->err), MG_ETOOBIG);
    assert_int_equal(fx_files_under(fx, "blobs/tmp"), 1);
    store_blob_upload_abort(&up);
    assert_null(up);
    assert_int_equal(fx_files_under(fx, "blobs/tmp"), 0);
    store_blob_upload_abort(&up); /* NULL is fine */

    /* A huge n does not wrap the size check. */
    assert_int_equal(store_blob_upload_begin(fx->st, 10, &up, &fx->err), MG_OK);
    assert_int_equal(store_blob_upload_write(up, "abc", 3, &fx->err), MG_OK);
    assert_int_equal(store_blob_upload_write(up, "abc", SIZE_MAX, &fx->err), MG_ETOOBIG);
    store_blob_upload_abort(&up);
}

static void test_blob_get_missing(void **state)
{
    struct fx *fx = *state;
    json_t *b = NULL;
    int fd = -1;
    uint64_t size = 0;
    char digest[72];

    fx_digest("never uploaded", 14, digest);
    assert_int_equal(store_blob_get(fx->st, digest, &b, &fx->err), MG_ENOTFOUND);
    assert_null(b);
    assert_int_equal(store_blob_open(fx->st, digest, &fd, &size, &fx->err), MG_ENOTFOUND);
    assert_int_equal(fd, -1);
}

/* The upload reads weight headers: formats are recorded with the blob, the summary is kept
 * for version creation, and a malformed header keeps nothing. */
static void test_blob_formats(void **state)
{
    static const struct st_tensor t[] = {{"w", "F16", 2, 2, {3, 5}}};
    struct fx *fx = *state;
    struct wbuf st = {0};
    json_t *blob = NULL, *got = NULL, *intro = NULL;
    char digest[72];
    bool created;

    st_write(&st, t, 1, NULL);
    assert_int_equal(upload(fx, st.p, st.n, 7, 1 << 20, NULL, &blob, &created), MG_OK);
    assert_string_equal(json_string_value(json_array_get(json_object_get(blob, "formats"), 0)),
                        "safetensors");
    snprintf(digest, sizeof(digest), "%s", json_string_value(json_object_get(blob, "digest")));
    json_decref(blob);
    assert_int_equal(store_blob_get(fx->st, digest, &got, &fx->err), MG_OK);
    assert_int_equal(json_array_size(json_object_get(got, "formats")), 1);
    json_decref(got);
    assert_int_equal(store_blob_introspection(fx->st, digest, &intro, &fx->err), MG_OK);
    assert_int_equal(json_integer_value(json_object_get(intro, "parameters")), 15);
    json_decref(intro);
    /* Uploading it again answers from the row. */
    assert_int_equal(upload(fx, st.p, st.n, 7, 1 << 20, NULL, &blob, &created), MG_OK);
    assert_false(created);
    assert_int_equal(json_array_size(json_object_get(blob, "formats")), 1);
    json_decref(blob);
    /* Plain bytes: no formats, no introspection. */
    assert_int_equal(upload(fx, "plain", 5, 5, 1 << 20, NULL, &blob, &created), MG_OK);
    assert_int_equal(json_array_size(json_object_get(blob, "formats")), 0);
    snprintf(digest, sizeof(digest), "%s", json_string_value(json_object_get(blob, "digest")));
    json_decref(blob);
    assert_int_equal(store_blob_introspection(fx->st, digest, &intro, &fx->err), MG_OK);
    assert_null(intro);
    /* A broken header: refused, nothing kept. */
    st.p[9] = '[';
    assert_int_equal(upload(fx, st.p, st.n, 7, 1 << 20, NULL, &blob, &created), MG_EINVAL);
    assert_non_null(strstr(fx->err.message, "byte offset"));
    assert_int_equal(fx_files_under(fx, "blobs/sha256"), 2);
    assert_int_equal(fx_files_under(fx, "blobs/tmp"), 0);
    wb_free(&st);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, fx_setup, fx_teardown)
    const struct CMUnitTest tests[] = {
        T(test_blob_upload_commit),
        T(test_blob_upload_large_any_cut),
        T(test_blob_upload_abort_while_hashing),
        T(test_blob_uploads_many_at_once),
        T(test_blob_upload_wrong_digest),
        T(test_blob_upload_idempotent),
        T(test_blob_upload_too_big),
        T(test_blob_get_missing),
        T(test_blob_formats),
    };
#undef T

    return cmocka_run_group_tests(tests, NULL, NULL);
}
