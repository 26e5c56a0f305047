/*
 * test_blob_backends.c - store/blob.c's table of backend vtables (blob_int.h): every
 * backend fills every slot, schemes and kinds are unique and pick their backend, an
 * unknown scheme gives the error listing every backend's form, and each backend's
 * capability bits (blob_can.h) say what it does: presigned URLs, descriptors to
 * sendfile, local files. The remote backends are opened without a network call (their
 * open makes none) and asked only what needs none; readers are checked through their
 * own vtables, a streamed one against a port nothing listens on.
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
#include "store/blob_int.h"
#include "store_fixture.h"

/* A URL each backend opens without a network call; a backend added to the table needs
 * one here (the test fails naming it). */
static const struct {
    const char *kind, *url;
    bool creds; /* give the credentials file */
} samples[] = {
    {"file", NULL /* file:<fixture dir>/fb */, false},
    {"s3", "s3://bucket/pre?endpoint=http://127.0.0.1:9&path_style=true", true},
    {"oci", "oci://127.0.0.1:9/team/models?insecure=true", false},
};

static const char *sample_url(struct fx *fx, const char *kind, bool *creds, char *buf, size_t n)
{
    for (size_t i = 0; i < sizeof(samples) / sizeof(samples[0]); i++) {
        if (strcmp(samples[i].kind, kind) != 0)
            continue;
        *creds = samples[i].creds;
        if (samples[i].url != NULL)
            return samples[i].url;
        snprintf(buf, n, "file:%s/fb", fx->dir);
        return buf;
    }
    fail_msg("backend %s has no sample URL in this test", kind);
    return NULL;
}

static void test_every_slot_filled(void **state)
{
    (void)state;
    assert_true(blob_nbackends >= 3);
    for (size_t i = 0; i < blob_nbackends; i++) {
        const struct blob_ops *o = blob_backends[i];
        assert_non_null(o);
        /* every slot of struct blob_ops: a slot added there goes here too */
#define SLOT(f)                                                                                    \
    if (o->f == NULL)                                                                              \
    fail_msg("backend %zu (%s): slot " #f " is empty", i, o->kind ? o->kind : "?")
        SLOT(kind);
        SLOT(scheme);
        SLOT(usage);
        SLOT(check_url);
        SLOT(open);
        SLOT(check);
        SLOT(put_begin);
        SLOT(put_write);
        SLOT(put_local_path);
        SLOT(put_commit);
        SLOT(put_abort);
        SLOT(put_free);
        SLOT(stat);
        SLOT(local_path);
        SLOT(read_open);
        SLOT(presign);
        SLOT(del);
        SLOT(list);
        SLOT(orphans);
        SLOT(reclaim);
        SLOT(close);
#undef SLOT
        assert_true(o->kind[0] && o->scheme[0] && o->usage[0]);
        /* the form it shows starts with its scheme */
        assert_memory_equal(o->usage, o->scheme, strlen(o->scheme));
        /* no bit outside blob_can.h */
        assert_int_equal(
            o->supports & ~(unsigned)(BLOB_CAN_PRESIGN | BLOB_CAN_SENDFILE | BLOB_CAN_LOCAL_FILES),
            0);
        /* the slot fillers go with a clear bit, the backend's own code with a set one */
        assert_int_equal(o->presign != blob_no_presign, (o->supports & BLOB_CAN_PRESIGN) != 0);
        assert_int_equal(o->local_path != blob_no_local_path,
                         (o->supports & BLOB_CAN_LOCAL_FILES) != 0);
        assert_int_equal(o->put_local_path != blob_no_put_local_path,
                         (o->supports & BLOB_CAN_LOCAL_FILES) != 0);
    }
}

static void test_schemes_unique_and_picked(void **state)
{
    struct mg_error err;

    (void)state;
    for (size_t i = 0; i < blob_nbackends; i++) {
        const struct blob_ops *a = blob_backends[i];
        const char *k;

        for (size_t j = 0; j < blob_nbackends; j++) {
            const struct blob_ops *b = blob_backends[j];
            if (i == j)
                continue;
            assert_string_not_equal(a->kind, b->kind);
            /* no scheme starts another: the pick by prefix is never ambiguous */
            if (strncmp(a->scheme, b->scheme, strlen(a->scheme)) == 0)
                fail_msg("scheme %s starts %s", a->scheme, b->scheme);
        }
        /* its scheme picks it: its usage form (placeholders in capitals) is its kind or
         * an error of its own check, not the front end's "--blobs is …" */
        memset(&err, 0, sizeof(err));
        k = blob_url_kind(a->usage, &err);
        if (k != NULL)
            assert_string_equal(k, a->kind);
        else if (strncmp(err.message, "--blobs is ", 11) == 0)
            fail_msg("%s: %s", a->usage, err.message);
    }
    /* no URL: the first backend (file:, in the data directory) */
    assert_string_equal(blob_url_kind(NULL, &err), blob_backends[0]->kind);
    assert_string_equal(blob_backends[0]->kind, "file");
}

/* Today's messages, byte for byte: the front end's for an unknown scheme, each
 * backend's own for its syntax. */
static void test_url_errors_unchanged(void **state)
{
    static const struct {
        const char *url, *message;
    } cases[] = {
        {"http://x", "--blobs is file:/DIR, s3://BUCKET/PREFIX?endpoint=…&region=… or "
                     "oci://HOST:PORT/REPOSITORY, not 'http://x'"},
        {"", "--blobs is file:/DIR, s3://BUCKET/PREFIX?endpoint=…&region=… or "
             "oci://HOST:PORT/REPOSITORY, not ''"},
        {"file:relative", "--blobs file: takes an absolute directory (file:/srv/blobs)"},
        {"s3://ab", "--blobs s3://BUCKET/prefix: the bucket name is 3 to 63 lowercase letters, "
                    "digits, '.' or '-'"},
        {"oci://host/", "--blobs oci://HOST:PORT/REPOSITORY: name the registry and a repository"},
    };
    struct fx *fx = *state;
    char tmp[600];
    struct blob_options o = {.tmp_dir = tmp};
    struct blob_backend *b = NULL;
    struct mg_error err;

    snprintf(tmp, sizeof(tmp), "%s/scratch", fx->dir);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        memset(&err, 0, sizeof(err));
        assert_null(blob_url_kind(cases[i].url, &err));
        assert_int_equal(err.code, MG_EINVAL);
        assert_string_equal(err.field, "blobs");
        assert_string_equal(err.message, cases[i].message);
        /* blob_open picks the same way and says the same */
        memset(&err, 0, sizeof(err));
        o.url = cases[i].url;
        assert_int_equal(blob_open(&o, &b, &err), MG_EINVAL);
        assert_null(b);
        assert_string_equal(err.message, cases[i].message);
        /* and so does the store's check, which the daemon's option parsing calls */
        assert_null(store_blobs_url_kind(cases[i].url, &err));
        assert_string_equal(err.message, cases[i].message);
    }
}

/* A reader's vtable is whole; returns what take_fd gave (closed here). */
static int reader_take_fd(struct blob_reader *r)
{
    uint64_t off = 99;
    int fd;

    assert_non_null(r->ops);
    assert_non_null(r->ops->read);
    assert_non_null(r->ops->take_fd);
    assert_non_null(r->ops->close);
    fd = blob_reader_take_fd(r, &off);
    if (fd >= 0) {
        assert_int_equal(off, 0);
        close(fd);
    } else {
        assert_int_equal(off, 99); /* untouched */
    }
    return fd;
}

/* Each backend's bits against what it does. */
static void test_capabilities_match_behaviour(void **state)
{
    struct fx *fx = *state;
    char tmp[600], creds[600], url[600], path[4096], want[700], digest[72] = "sha256:";
    struct mg_error err;
    int fd;

    snprintf(tmp, sizeof(tmp), "%s/scratch", fx->dir);
    snprintf(creds, sizeof(creds), "%s/creds", fx->dir);
    fd = open(creds, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "AK:SK\n", 6), 6);
    close(fd);
    mg_sha256_hex("hello blob", 10, digest + 7);

    for (size_t i = 0; i < blob_nbackends; i++) {
        const struct blob_ops *ops = blob_backends[i];
        struct blob_options o = {.tmp_dir = tmp};
        struct blob_backend *b = NULL;
        struct blob_reader *r = NULL;
        char *u = NULL;
        bool use_creds = false;
        size_t got = 1;
        bool wb = true;
        char buf[16];

        o.url = sample_url(fx, ops->kind, &use_creds, url, sizeof(url));
        o.credentials = use_creds ? creds : NULL;
        if (blob_open(&o, &b, &err) != MG_OK)
            fail_msg("%s: %s", o.url, err.message);
        assert_string_equal(blob_kind(b), ops->kind);
        assert_int_equal(blob_can(b, BLOB_CAN_PRESIGN), (ops->supports & BLOB_CAN_PRESIGN) != 0);
        assert_int_equal(blob_can(b, BLOB_CAN_SENDFILE), (ops->supports & BLOB_CAN_SENDFILE) != 0);
        assert_int_equal(blob_can(b, BLOB_CAN_LOCAL_FILES),
                         (ops->supports & BLOB_CAN_LOCAL_FILES) != 0);

        /* presign: a signed URL with the bit, today's error without */
        if (blob_can(b, BLOB_CAN_PRESIGN)) {
            assert_int_equal(blob_presign(b, digest, 60, &u, &err), MG_OK);
            assert_non_null(strstr(u, digest + 7));
            assert_non_null(strstr(u, "X-Amz-Signature="));
            free(u);
        } else {
            assert_int_equal(blob_presign(b, digest, 60, &u, &err), MG_EINVAL);
            assert_null(u);
            assert_string_equal(err.field, "blob-downloads");
            snprintf(want, sizeof(want),
                     "--blob-downloads redirect needs an s3:// blob backend, not %s", ops->kind);
            assert_string_equal(err.message, want);
        }

        /* local files: paths with the bit (scratch beside the blobs), none without
         * (scratch is the one given) */
        path[0] = '\0';
        if (blob_can(b, BLOB_CAN_LOCAL_FILES)) {
            struct blob_put *p = NULL;
            struct stat sb;

            assert_true(blob_local_path(b, digest, path, sizeof(path)));
            assert_int_not_equal(stat(path, &sb), 0); /* not stored yet */
            assert_int_equal(blob_put_begin(b, NULL, 100, &p, &err), MG_OK);
            assert_non_null(blob_put_local_path(p));
            assert_int_equal(blob_put_write(p, "hello blob", 10, &err), MG_OK);
            assert_int_equal(stat(blob_put_local_path(p), &sb), 0);
            assert_int_equal(sb.st_size, 10);
            assert_int_equal(blob_put_commit(&p, digest, &err), MG_OK);
            assert_int_equal(stat(path, &sb), 0);
            assert_int_equal(sb.st_size, 10);
            snprintf(want, sizeof(want), "%s/fb/tmp", fx->dir); /* file: <dir>/tmp */
            assert_string_equal(blob_tmp_dir(b), want);
            assert_int_equal(stat(blob_tmp_dir(b), &sb), 0);
            assert_true(S_ISDIR(sb.st_mode));
        } else {
            assert_false(blob_local_path(b, digest, path, sizeof(path)));
            assert_string_equal(path, "");
            assert_string_equal(blob_tmp_dir(b), tmp);
        }

        /* sendfile: a descriptor from a reader of stored bytes with the bit; remote
         * backends answer an empty range without a request, through a reader of their
         * own that has none */
        if (blob_can(b, BLOB_CAN_SENDFILE)) {
            assert_true(blob_can(b, BLOB_CAN_LOCAL_FILES)); /* the blob was stored above */
            assert_int_equal(blob_read_open(b, digest, 0, 10, &r, &err), MG_OK);
            assert_true(reader_take_fd(r) >= 0);
            /* handed over: reading says so */
            assert_int_equal(blob_reader_read(r, buf, sizeof(buf), &got, &wb, NULL, NULL, &err),
                             MG_EIO);
            blob_reader_close(&r);
        } else {
            assert_int_equal(blob_read_open(b, digest, 0, 0, &r, &err), MG_OK);
            assert_int_equal(reader_take_fd(r), -1);
            assert_int_equal(blob_reader_read(r, buf, sizeof(buf), &got, &wb, NULL, NULL, &err),
                             MG_OK);
            assert_int_equal(got, 0);
            assert_false(wb);
            blob_reader_close(&r);
        }
        assert_null(r);
        blob_close(&b);
    }
}

/* A streamed reader (remote backends' downloads) answers through its own vtable: no
 * descriptor, and a transport failure as MG_EUNAVAIL naming the backend. */
static void test_stream_reader_vtable(void **state)
{
    struct blob_http_resp dummy;
    struct blob_reader *r = NULL;
    struct mg_error err;
    char buf[16];
    size_t got = 0;
    bool wb = false;
    CURL *c;

    (void)state;
    blob_http_resp_init(&dummy);
    c = blob_http_easy(&dummy);
    blob_http_resp_release(&dummy);
    assert_non_null(c);
    curl_easy_setopt(c, CURLOPT_URL, "http://127.0.0.1:9/nothing-listens-here");
    assert_int_equal(blob_stream_start(c, NULL, "test backend", NULL, NULL, &r, &err), MG_OK);
    assert_int_equal(reader_take_fd(r), -1);
    assert_int_equal(blob_reader_read(r, buf, sizeof(buf), &got, &wb, NULL, NULL, &err),
                     MG_EUNAVAIL);
    assert_int_equal(got, 0);
    assert_non_null(strstr(err.message, "test backend"));
    blob_reader_close(&r);
    assert_null(r);
}

/* Above store/: the daemon asks store_blobs_can, not the kind's name. */
static void test_store_blobs_can(void **state)
{
    struct fx *fx = *state;

    assert_string_equal(store_blobs_kind(fx->st), "file");
    assert_false(store_blobs_can(fx->st, BLOB_CAN_PRESIGN));
    assert_true(store_blobs_can(fx->st, BLOB_CAN_SENDFILE));
    assert_true(store_blobs_can(fx->st, BLOB_CAN_LOCAL_FILES));
    assert_false(store_blobs_can(fx->st, BLOB_CAN_PRESIGN | BLOB_CAN_SENDFILE));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_slot_filled),
        cmocka_unit_test(test_schemes_unique_and_picked),
        cmocka_unit_test_setup_teardown(test_url_errors_unchanged, fx_setup, fx_teardown),
        cmocka_unit_test_setup_teardown(test_capabilities_match_behaviour, fx_setup, fx_teardown),
        cmocka_unit_test(test_stream_reader_vtable),
        cmocka_unit_test_setup_teardown(test_store_blobs_can, fx_setup, fx_teardown),
    };

    return cmocka_run_group_tests_name("unit_store_blob_backends", tests, NULL, NULL);
}
