/*
 * test_blob.c - store/blob.c and blob_file.c: --blobs URL parsing and the errors it gives,
 * credentials files (0600 enforced), and the file backend's interface for garbage
 * collection (list, delete, orphans, reclaim) and ranged reads.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/util.h"
#include "store/blob.h"
#include "store_fixture.h"

static void test_url_kinds(void **state)
{
    static const struct {
        const char *url, *kind;
    } ok[] = {
        {"file:/srv/blobs", "file"},
        {"s3://bucket", "s3"},
        {"s3://my.bucket-1/pre/fix?endpoint=http://127.0.0.1:9000&region=eu-west-1&path_style=true",
         "s3"},
        {"oci://registry:5000/team/models", "oci"},
        {"oci://127.0.0.1:5000/mg?insecure=true", "oci"},
    };
    static const char *const bad[] = {
        "file:relative", "s3://",    "s3://ab", "s3://Upper/x",       "oci://host", "oci://host/",
        "oci:///repo",   "http://x", "",        "s3://bucket_name/x",
    };
    struct mg_error err;
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        const char *k = blob_url_kind(ok[i].url, &err);
        if (k == NULL || strcmp(k, ok[i].kind) != 0)
            fail_msg("%s: %s", ok[i].url, k ? k : err.message);
    }
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (blob_url_kind(bad[i], &err) != NULL)
            fail_msg("%s accepted", bad[i]);
        assert_int_equal(err.code, MG_EINVAL);
        assert_string_equal(err.field, "blobs");
    }
}

static enum mg_code open_url(struct fx *fx, const char *url, const char *creds,
                             struct blob_backend **b)
{
    char tmp[600];
    struct blob_options o = {.url = url, .credentials = creds, .tmp_dir = tmp};

    snprintf(tmp, sizeof(tmp), "%s/scratch", fx->dir);
    return blob_open(&o, b, &fx->err);
}

static void test_open_errors_and_credentials(void **state)
{
    struct fx *fx = *state;
    struct blob_backend *b = NULL;
    char path[600];
    int fd;

    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    assert_int_equal(open_url(fx, "s3://bucket/p?endpoint=ftp://x", NULL, &b), MG_EINVAL);
    assert_non_null(strstr(fx->err.message, "endpoint="));
    assert_int_equal(open_url(fx, "s3://bucket/p?region=EU WEST", NULL, &b), MG_EINVAL);
    assert_int_equal(open_url(fx, "s3://bucket/a/../b", NULL, &b), MG_EINVAL);
    /* no credentials anywhere */
    assert_int_equal(open_url(fx, "s3://bucket/p", NULL, &b), MG_EINVAL);
    assert_non_null(strstr(fx->err.message, "AWS_ACCESS_KEY_ID"));
    assert_int_equal(open_url(fx, "oci://h:5000/Bad_Repo", NULL, &b), MG_EINVAL);

    /* a credentials file: 0600 enforced, one line a:b */
    snprintf(path, sizeof(path), "%s/creds", fx->dir);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "AK:SK\n", 6), 6);
    close(fd);
    chmod(path, 0644);
    assert_int_equal(open_url(fx, "s3://bucket/p", path, &b), MG_EINVAL);
    assert_non_null(strstr(fx->err.message, "chmod 600"));
    chmod(path, 0600);
    assert_int_equal(open_url(fx, "s3://bucket/p", path, &b), MG_OK);
    assert_string_equal(blob_kind(b), "s3");
    assert_non_null(strstr(blob_describe(b), "s3 bucket 'bucket' at https://s3.us-east-1"));
    blob_close(&b);
    fd = open(path, O_WRONLY | O_TRUNC);
    assert_int_equal(write(fd, "no-colon\n", 9), 9);
    close(fd);
    assert_int_equal(open_url(fx, "oci://h:5000/repo", path, &b), MG_EINVAL);
    assert_null(b);
}

static bool count_one(const char *digest, uint64_t size, void *arg)
{
    (void)digest;
    (void)size;
    (*(int *)arg)++;
    return true;
}

static bool first_orphan(const struct blob_orphan *o, void *arg)
{
    snprintf(arg, 600, "%s", o->handle);
    assert_string_equal(o->handle, o->owner);
    assert_true(o->age_ms >= 0);
    return false;
}

static void test_file_backend_gc_interface(void **state)
{
    struct fx *fx = *state;
    struct blob_backend *b = NULL;
    struct blob_put *p = NULL;
    struct blob_reader *r = NULL;
    char url[600], digest[72] = "sha256:", orphan[600] = "", buf[16];
    uint64_t size = 0;
    size_t got;
    bool wb;
    int n = 0;

    snprintf(url, sizeof(url), "file:%s/fb", fx->dir);
    assert_int_equal(open_url(fx, url, NULL, &b), MG_OK);
    mg_sha256_hex("hello blob", 10, digest + 7);
    assert_int_equal(blob_put_begin(b, NULL, 100, &p, &fx->err), MG_OK);
    assert_non_null(blob_put_local_path(p));
    assert_int_equal(blob_put_write(p, "hello blob", 10, &fx->err), MG_OK);
    /* in flight: an orphan candidate, named by the put's handle */
    assert_int_equal(blob_orphans(b, first_orphan, orphan, &fx->err), MG_OK);
    assert_string_equal(orphan, blob_put_handle(p));
    assert_int_equal(blob_put_commit(&p, digest, &fx->err), MG_OK);
    assert_null(p);
    assert_int_equal(blob_stat(b, digest, &size, &fx->err), MG_OK);
    assert_int_equal(size, 10);
    assert_int_equal(blob_list(b, count_one, &n, &fx->err), MG_OK);
    assert_int_equal(n, 1);
    /* ranged read */
    assert_int_equal(blob_read_open(b, digest, 6, 4, &r, &fx->err), MG_OK);
    assert_int_equal(blob_reader_read(r, buf, sizeof(buf), &got, &wb, NULL, NULL, &fx->err), MG_OK);
    assert_int_equal(got, 4);
    assert_memory_equal(buf, "blob", 4);
    blob_reader_close(&r);
    /* a presigned URL is s3's alone */
    {
        char *u = NULL;
        assert_int_equal(blob_presign(b, digest, 60, &u, &fx->err), MG_EINVAL);
    }
    /* an aborted upload leaves nothing; a reclaim outside the temp dir is refused */
    assert_int_equal(blob_put_begin(b, NULL, 100, &p, &fx->err), MG_OK);
    assert_true(blob_put_abort(&p));
    orphan[0] = '\0';
    assert_int_equal(blob_orphans(b, first_orphan, orphan, &fx->err), MG_OK);
    assert_string_equal(orphan, "");
    assert_int_equal(blob_reclaim(b, "/etc/passwd", &fx->err), MG_EINVAL);
    /* delete, twice: idempotent */
    assert_int_equal(blob_delete(b, digest, &fx->err), MG_OK);
    assert_int_equal(blob_delete(b, digest, &fx->err), MG_OK);
    assert_int_equal(blob_stat(b, digest, &size, &fx->err), MG_ENOTFOUND);
    blob_close(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_url_kinds),
        cmocka_unit_test_setup_teardown(test_open_errors_and_credentials, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_file_backend_gc_interface, fx_setup, fx_teardown),
    };

    return cmocka_run_group_tests_name("unit_store_blob", tests, NULL, NULL);
}
