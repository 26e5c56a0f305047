/*
 * test_archives.c - archive inspection on upload (docs/contract.md "Blobs"): media type
 * sniffing, the file count, every kind of unsafe entry refused with 400 and
 * nothing kept, and a version's /files listing of a good tar.gz.
 *
 * The archives are built here with libarchive's write API, in memory.
 */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <archive.h>
#include <archive_entry.h>

enum fmt { FMT_TAR, FMT_TAR_GZ, FMT_ZIP, FMT_RAW_GZ };

enum kind { K_FILE, K_DIR, K_SYMLINK, K_HARDLINK, K_CHR, K_BLK, K_FIFO };

struct entry {
    enum kind kind;
    const char *path;
    const char *data; /* file content, or the link target */
};

struct abuf {
    unsigned char *p;
    size_t len;
    size_t cap;
};

static la_ssize_t on_write(struct archive *a, void *ud, const void *buf, size_t n)
{
    struct abuf *b = ud;

    (void)a;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 65536;
        unsigned char *p;

        while (cap < b->len + n)
            cap *= 2;
        p = realloc(b->p, cap);
        if (p == NULL)
            return -1;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, buf, n);
    b->len += n;
    return (la_ssize_t)n;
}

/* Build an archive of the entries; the caller frees out->p. */
static void build(enum fmt fmt, const struct entry *e, size_t n, struct abuf *out)
{
    struct archive *a = archive_write_new();

    memset(out, 0, sizeof(*out));
    assert_non_null(a);
    switch (fmt) {
    case FMT_TAR:
        assert_int_equal(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
        break;
    case FMT_TAR_GZ:
        assert_int_equal(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
        assert_int_equal(archive_write_add_filter_gzip(a), ARCHIVE_OK);
        break;
    case FMT_ZIP:
        assert_int_equal(archive_write_set_format_zip(a), ARCHIVE_OK);
        break;
    case FMT_RAW_GZ:
        assert_int_equal(archive_write_set_format_raw(a), ARCHIVE_OK);
        assert_int_equal(archive_write_add_filter_gzip(a), ARCHIVE_OK);
        break;
    }
    assert_int_equal(archive_write_open(a, out, NULL, on_write, NULL), ARCHIVE_OK);
    for (size_t i = 0; i < n; i++) {
        struct archive_entry *ae = archive_entry_new();
        size_t len = 0;

        archive_entry_set_pathname(ae, e[i].path);
        archive_entry_set_mtime(ae, 1700000000, 0);
        archive_entry_set_perm(ae, 0644);
        switch (e[i].kind) {
        case K_FILE:
            len = strlen(e[i].data);
            archive_entry_set_filetype(ae, AE_IFREG);
            archive_entry_set_size(ae, (la_int64_t)len);
            break;
        case K_DIR:
            archive_entry_set_filetype(ae, AE_IFDIR);
            archive_entry_set_perm(ae, 0755);
            break;
        case K_SYMLINK:
            archive_entry_set_filetype(ae, AE_IFLNK);
            archive_entry_set_symlink(ae, e[i].data);
            break;
        case K_HARDLINK:
            archive_entry_set_filetype(ae, AE_IFREG);
            archive_entry_set_hardlink(ae, e[i].data);
            archive_entry_set_size(ae, 0);
            break;
        case K_CHR:
            archive_entry_set_filetype(ae, AE_IFCHR);
            archive_entry_set_rdevmajor(ae, 1);
            archive_entry_set_rdevminor(ae, 3);
            break;
        case K_BLK:
            archive_entry_set_filetype(ae, AE_IFBLK);
            archive_entry_set_rdevmajor(ae, 8);
            archive_entry_set_rdevminor(ae, 0);
            break;
        case K_FIFO:
            archive_entry_set_filetype(ae, AE_IFIFO);
            break;
        }
        if (archive_write_header(a, ae) != ARCHIVE_OK)
            fail_msg("libarchive refused entry '%s': %s", e[i].path, archive_error_string(a));
        if (len > 0)
            assert_int_equal(archive_write_data(a, e[i].data, len), (la_ssize_t)len);
        archive_entry_free(ae);
    }
    assert_int_equal(archive_write_close(a), ARCHIVE_OK);
    archive_write_free(a);
    assert_true(out->len > 0);
}

static const struct entry good[] = {
    {K_DIR, "model", NULL},
    {K_FILE, "model/config.json", "{\"layers\": 2, \"hidden\": 16}\n"},
    {K_FILE, "model/weights.bin", "0123456789abcdef0123456789abcdef0123456789abcdef"},
    {K_FILE, "README.md", "# tiny model\n"},
};

#define N_GOOD (sizeof(good) / sizeof(good[0]))

static void expect_archive(struct mg_server *s, enum fmt fmt, const char *media_type)
{
    struct abuf b;
    struct it_resp *r;

    build(fmt, good, N_GOOD, &b);
    r = it_upload(s, b.p, b.len, NULL);
    it_expect_status(s, r, 201);
    assert_string_equal(it_jstr(r->json, "media_type"), media_type);
    assert_int_equal(it_jint(r->json, "files"), 3);
    assert_int_equal(it_jint(r->json, "size"), b.len);
    free(b.p);
}

static void test_good_archives(void **state)
{
    struct mg_server *s = *state;

    expect_archive(s, FMT_TAR_GZ, "application/gzip");
    expect_archive(s, FMT_TAR, "application/x-tar");
    expect_archive(s, FMT_ZIP, "application/zip");
}

static void test_gzip_that_is_not_a_tar(void **state)
{
    static const struct entry raw[] = {{K_FILE, "data", "just some compressed text\n"}};
    struct mg_server *s = *state;
    struct abuf b;
    struct it_resp *r;

    build(FMT_RAW_GZ, raw, 1, &b);
    r = it_upload(s, b.p, b.len, NULL);
    it_expect_status(s, r, 201);
    assert_string_equal(it_jstr(r->json, "media_type"), "application/gzip");
    assert_true(json_is_null(json_object_get(r->json, "files")));
    free(b.p);
}

struct unsafe_case {
    const char *what;
    enum fmt fmt;
    struct entry bad;
};

static const struct unsafe_case unsafe[] = {
    {"absolute path", FMT_TAR, {K_FILE, "/etc/evil", "x"}},
    {"dot-dot path", FMT_TAR, {K_FILE, "../evil", "x"}},
    {"dot-dot inside a path", FMT_TAR, {K_FILE, "model/../../evil", "x"}},
    {"symlink to an absolute path", FMT_TAR, {K_SYMLINK, "model/link", "/etc/passwd"}},
    {"symlink leaving the root", FMT_TAR, {K_SYMLINK, "model/up", "../../../etc/passwd"}},
    {"hardlink to an absolute path", FMT_TAR, {K_HARDLINK, "model/hard", "/etc/passwd"}},
    {"hardlink leaving the root", FMT_TAR, {K_HARDLINK, "model/hard2", "../../secret"}},
    {"character device", FMT_TAR, {K_CHR, "model/null", NULL}},
    {"block device", FMT_TAR, {K_BLK, "model/sda", NULL}},
    {"FIFO", FMT_TAR, {K_FIFO, "model/fifo", NULL}},
    {"zip with dot-dot", FMT_ZIP, {K_FILE, "../evil", "x"}},
    {"zip with an absolute path", FMT_ZIP, {K_FILE, "/tmp/evil", "x"}},
    {"tar.gz with dot-dot", FMT_TAR_GZ, {K_FILE, "../evil", "x"}},
    {"tar.gz with a device", FMT_TAR_GZ, {K_CHR, "dev/zero", NULL}},
};

static void test_unsafe_archives_are_refused(void **state)
{
    struct mg_server *s = *state;

    for (size_t i = 0; i < sizeof(unsafe) / sizeof(unsafe[0]); i++) {
        struct entry e[N_GOOD + 1];
        char digest[IT_DIGEST_LEN + 1];
        char path[160];
        struct abuf b;
        struct it_resp *r;

        /* The bad entry among good ones, after them: every entry is checked. */
        memcpy(e, good, sizeof(good));
        e[N_GOOD] = unsafe[i].bad;
        build(unsafe[i].fmt, e, N_GOOD + 1, &b);
        it_digest(b.p, b.len, digest);
        r = it_request(s, "POST", "/api/v1/blobs", s->admin_token, "application/octet-stream", b.p,
                       b.len);
        free(b.p);
        if (r->status != 400)
            print_error("case: %s\n", unsafe[i].what);
        it_expect_error(s, r, 400, "invalid_argument");

        /* Nothing kept. */
        snprintf(path, sizeof(path), "/api/v1/blobs/%s", digest);
        r = it_request(s, "HEAD", path, s->admin_token, NULL, NULL, 0);
        if (r->status != 404)
            print_error("case: %s\n", unsafe[i].what);
        it_expect_status(s, r, 404);
        assert_int_equal(it_blob_leftovers(s), 0);
        it_release(s);
    }
}

static void test_version_files_list_the_archive(void **state)
{
    struct mg_server *s = *state;
    char digest[IT_DIGEST_LEN + 1];
    char body[256];
    struct abuf b;
    struct it_resp *r;
    json_t *art, *items, *it;
    size_t i;
    size_t seen = 0;

    build(FMT_TAR_GZ, good, N_GOOD, &b);
    r = it_upload(s, b.p, b.len, digest);

    r = it_jreq(s, "POST", "/api/v1/models", s->admin_token, "{\"name\":\"archive-model\"}");
    it_expect_status(s, r, 201);
    snprintf(body, sizeof(body), "{\"artifact\":\"%s\"}", digest);
    r = it_jreq(s, "POST", "/api/v1/models/archive-model/versions", s->admin_token, body);
    it_expect_status(s, r, 201);
    art = it_jobj(r->json, "artifact");
    assert_string_equal(it_jstr(art, "digest"), digest);
    assert_int_equal(it_jint(art, "size"), b.len);
    assert_string_equal(it_jstr(art, "media_type"), "application/gzip");
    assert_int_equal(it_jint(art, "files"), 3);

    r = it_get(s, "/api/v1/models/archive-model/versions/1/files", s->admin_token);
    it_expect_status(s, r, 200);
    items = it_jarr(r->json, "items");
    assert_int_equal(json_array_size(items), 3);
    json_array_foreach(items, i, it)
    {
        const char *path = it_jstr(it, "path");
        bool found = false;

        for (size_t k = 0; k < N_GOOD; k++) {
            char want[IT_DIGEST_LEN + 1];

            if (good[k].kind != K_FILE || strcmp(good[k].path, path) != 0)
                continue;
            found = true;
            seen++;
            it_digest(good[k].data, strlen(good[k].data), want);
            assert_int_equal(it_jint(it, "size"), strlen(good[k].data));
            assert_string_equal(it_jstr(it, "digest"), want);
        }
        if (!found)
            fail_msg("unexpected path '%s' in %s", path, r->body);
    }
    assert_int_equal(seen, 3);

    /* The artifact route serves the archive's bytes, like a blob GET. */
    r = it_get(s, "/api/v1/models/archive-model/versions/1/artifact", s->admin_token);
    it_expect_status(s, r, 200);
    assert_int_equal(r->len, b.len);
    assert_memory_equal(r->body, b.p, b.len);
    {
        char etag[80];

        snprintf(etag, sizeof(etag), "\"%s\"", digest);
        assert_non_null(it_header(r, "ETag"));
        assert_string_equal(it_header(r, "ETag"), etag);
    }
    free(b.p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_good_archives, it_test_teardown),
        cmocka_unit_test_teardown(test_gzip_that_is_not_a_tar, it_test_teardown),
        cmocka_unit_test_teardown(test_unsafe_archives_are_refused, it_test_teardown),
        cmocka_unit_test_teardown(test_version_files_list_the_archive, it_test_teardown),
    };

    return it_main_result(cmocka_run_group_tests_name("integration_archives", tests, it_group_setup,
                                                      it_group_teardown));
}
