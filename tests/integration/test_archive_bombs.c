/*
 * test_archive_bombs.c - bounded archives at upload (README --max-archive-ratio):
 * compression bombs in every format, a nested one, a PAX sparse file
 * declaring a huge size, a legitimate compressible model, and a file that is
 * also a directory.
 *
 * Bombs are generated here at run time. What is asserted is how many bytes
 * inspection expanded before refusing (from the error message and from
 * /metrics), never how long it took.
 */
#include "harness.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <archive.h>
#include <archive_entry.h>

#define MIB ((uint64_t)1 << 20)
#define FLOOR (32 * MIB) /* STORE_ARCHIVE_RATIO_FLOOR */
#define RATIO 200        /* the default --max-archive-ratio */

enum fmt { F_TAR_GZ, F_TAR_ZST, F_TAR_XZ, F_ZIP };

struct abuf {
    unsigned char *p;
    size_t len, cap;
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
        if ((p = realloc(b->p, cap)) == NULL)
            return -1;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, buf, n);
    b->len += n;
    return (la_ssize_t)n;
}

struct member {
    const char *path;
    uint64_t size;             /* bytes of zeros, when data is NULL */
    const unsigned char *data; /* or these bytes */
};

static void build(enum fmt fmt, const struct member *m, size_t n, struct abuf *out)
{
    static unsigned char zeros[1 << 20];
    struct archive *a = archive_write_new();

    memset(out, 0, sizeof(*out));
    assert_non_null(a);
    if (fmt == F_ZIP) {
        assert_int_equal(archive_write_set_format_zip(a), ARCHIVE_OK);
    } else {
        assert_int_equal(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
        if (fmt == F_TAR_GZ)
            assert_int_equal(archive_write_add_filter_gzip(a), ARCHIVE_OK);
        else if (fmt == F_TAR_ZST)
            assert_int_equal(archive_write_add_filter_zstd(a), ARCHIVE_OK);
        else {
            assert_int_equal(archive_write_add_filter_xz(a), ARCHIVE_OK);
            assert_int_equal(archive_write_set_filter_option(a, "xz", "compression-level", "1"),
                             ARCHIVE_OK);
        }
    }
    assert_int_equal(archive_write_open(a, out, NULL, on_write, NULL), ARCHIVE_OK);
    for (size_t i = 0; i < n; i++) {
        struct archive_entry *ae = archive_entry_new();
        uint64_t left = m[i].size;

        archive_entry_set_pathname(ae, m[i].path);
        archive_entry_set_filetype(ae, AE_IFREG);
        archive_entry_set_perm(ae, 0644);
        archive_entry_set_mtime(ae, 1700000000, 0);
        archive_entry_set_size(ae, (la_int64_t)m[i].size);
        assert_int_equal(archive_write_header(a, ae), ARCHIVE_OK);
        if (m[i].data != NULL) {
            assert_int_equal(archive_write_data(a, m[i].data, m[i].size), (la_ssize_t)m[i].size);
            left = 0;
        }
        while (left > 0) {
            size_t c = left < sizeof(zeros) ? (size_t)left : sizeof(zeros);
            assert_int_equal(archive_write_data(a, zeros, c), (la_ssize_t)c);
            left -= c;
        }
        archive_entry_free(ae);
    }
    assert_int_equal(archive_write_close(a), ARCHIVE_OK);
    archive_write_free(a);
}

/*
 * Upload b, expect 400 naming the ratio cap, nothing kept, and return the
 * bytes expanded when refused (from the message, checked against /metrics).
 */
static uint64_t expect_bomb_refused(struct mg_server *s, const char *what, const struct abuf *b)
{
    char digest[IT_DIGEST_LEN + 1], path[160], cap[32];
    uint64_t before = it_metric(s, "modelgate_archive_expanded_bytes_total");
    uint64_t refusals = it_metric(s, "modelgate_archive_ratio_refusals_total");
    uint64_t budget = (uint64_t)b->len * RATIO > FLOOR ? (uint64_t)b->len * RATIO : FLOOR;
    unsigned long long expanded = 0;
    const char *msg, *p;
    struct it_resp *r;

    it_digest(b->p, b->len, digest);
    r = it_request(s, "POST", "/api/v1/blobs", s->admin_token, "application/octet-stream", b->p,
                   b->len);
    if (r->status != 400)
        print_error("case: %s (%zu bytes)\n", what, b->len);
    it_expect_error(s, r, 400, "invalid_argument");
    msg = json_string_value(json_object_get(json_object_get(r->json, "error"), "message"));
    assert_non_null(msg);
    snprintf(cap, sizeof(cap), "more than %d:1", RATIO);
    if (strstr(msg, cap) == NULL || strstr(msg, "--max-archive-ratio") == NULL)
        fail_msg("%s: message does not name the cap: %s", what, msg);
    p = strstr(msg, "expanded ");
    assert_non_null(p);
    assert_int_equal(sscanf(p, "expanded %llu bytes", &expanded), 1);
    print_message("%s: %zu stored bytes, refused after %llu bytes expanded (cap %" PRIu64 ")\n",
                  what, b->len, expanded, budget);
    /* Bounded: never past the cap by more than one decompressed block. */
    assert_true(expanded <= budget + MIB);
    assert_true(it_metric(s, "modelgate_archive_expanded_bytes_total") - before <= budget + MIB);
    assert_int_equal(it_metric(s, "modelgate_archive_ratio_refusals_total"), refusals + 1);

    snprintf(path, sizeof(path), "/api/v1/blobs/%s", digest);
    r = it_request(s, "HEAD", path, s->admin_token, NULL, NULL, 0);
    it_expect_status(s, r, 404);
    assert_int_equal(it_data_dir_count(s, "blobs/tmp"), 0);
    it_release(s);
    return expanded;
}

/* One 128 MiB file of zeros: refused from its declared size, before any byte. */
static void test_bombs_refused_from_headers(void **state)
{
    static const struct member one[] = {{"weights.bin", 128 * MIB, NULL}};
    static const enum fmt fmts[] = {F_TAR_GZ, F_TAR_ZST, F_TAR_XZ, F_ZIP};
    static const char *const names[] = {"tar.gz", "tar.zst", "tar.xz", "zip"};
    struct mg_server *s = *state;

    for (size_t i = 0; i < 4; i++) {
        struct abuf b;

        build(fmts[i], one, 1, &b);
        assert_true(expect_bomb_refused(s, names[i], &b) <= FLOOR);
        free(b.p);
    }
}

/*
 * Many 8 MiB files, each within the cap on its own: they are expanded until
 * the running total would pass the cap, then decompression stops.
 */
static void test_bombs_refused_at_the_running_total(void **state)
{
    static const enum fmt fmts[] = {F_TAR_GZ, F_TAR_ZST, F_TAR_XZ, F_ZIP};
    static const char *const names[] = {"tar.gz", "tar.zst", "tar.xz", "zip"};
    struct member m[16];
    char paths[16][16];
    struct mg_server *s = *state;

    for (size_t k = 0; k < 16; k++) {
        snprintf(paths[k], sizeof(paths[k]), "shard-%02zu.bin", k);
        m[k] = (struct member){paths[k], 8 * MIB, NULL};
    }
    for (size_t i = 0; i < 4; i++) {
        struct abuf b;
        uint64_t expanded;

        build(fmts[i], m, 16, &b);
        expanded = expect_bomb_refused(s, names[i], &b);
        /* It did read up to the cap (the floor here): the count is real. */
        assert_true(expanded >= FLOOR - 8 * MIB);
        free(b.p);
    }
}

/* A tar.gz inside a tar.gz: the outer expansion is counted, the inner
 * archive is a file like any other and is not expanded. */
static void test_nested_bomb_is_not_expanded(void **state)
{
    static const struct member inner_m[] = {{"zeros.bin", 128 * MIB, NULL}};
    struct mg_server *s = *state;
    struct abuf inner, outer;
    struct member outer_m[1];
    uint64_t before, after;
    struct it_resp *r;

    build(F_TAR_GZ, inner_m, 1, &inner);
    outer_m[0] = (struct member){"inner.tar.gz", inner.len, inner.p};
    build(F_TAR_GZ, outer_m, 1, &outer);
    before = it_metric(s, "modelgate_archive_expanded_bytes_total");
    r = it_upload(s, outer.p, outer.len, NULL);
    it_expect_status(s, r, 201);
    assert_int_equal(it_jint(r->json, "files"), 1);
    after = it_metric(s, "modelgate_archive_expanded_bytes_total");
    print_message("nested: %zu stored, %zu inner, %" PRIu64 " bytes expanded\n", outer.len,
                  inner.len, after - before);
    assert_int_equal(after - before, inner.len);
    free(inner.p);
    free(outer.p);
}

/* ---- PAX sparse, by hand (GNU sparse format 1.0) ---------------------------------------- */

static void pax_record(char *out, size_t *off, const char *kv)
{
    size_t n = strlen(kv) + 3, len; /* " " "\n" and at least one digit */

    for (;;) {
        char tmp[32];
        len = (size_t)snprintf(tmp, sizeof(tmp), "%zu", n) + strlen(kv) + 2;
        if (len == n)
            break;
        n = len;
    }
    *off += (size_t)sprintf(out + *off, "%zu %s\n", n, kv);
}

static void ustar_header(unsigned char *h, const char *name, char type, uint64_t size)
{
    unsigned sum = 0;

    memset(h, 0, 512);
    snprintf((char *)h, 100, "%s", name);
    memcpy(h + 100, "0000644", 8);
    memcpy(h + 108, "0000000", 8);
    memcpy(h + 116, "0000000", 8);
    snprintf((char *)h + 124, 12, "%011llo", (unsigned long long)size);
    snprintf((char *)h + 136, 12, "%011o", 1700000000u);
    memset(h + 148, ' ', 8);
    h[156] = (unsigned char)type;
    memcpy(h + 257, "ustar", 6);
    memcpy(h + 263, "00", 2);
    for (size_t i = 0; i < 512; i++)
        sum += h[i];
    snprintf((char *)h + 148, 8, "%06o", sum);
    h[155] = ' ';
}

/* A tar of one sparse file declaring `realsize` bytes and holding 1 byte. */
static void build_sparse(uint64_t realsize, struct abuf *out)
{
    char pax[512], kv[96];
    size_t plen = 0;

    out->cap = out->len = 512 * 7;
    out->p = calloc(1, out->cap);
    assert_non_null(out->p);
    pax_record(pax, &plen, "GNU.sparse.major=1");
    pax_record(pax, &plen, "GNU.sparse.minor=0");
    pax_record(pax, &plen, "GNU.sparse.name=model/huge.bin");
    snprintf(kv, sizeof(kv), "GNU.sparse.realsize=%llu", (unsigned long long)realsize);
    pax_record(pax, &plen, kv);
    ustar_header(out->p, "PaxHeaders/huge.bin", 'x', plen);
    memcpy(out->p + 512, pax, plen);
    /* The file: a 512-byte map (1 region: offset 0, 1 byte), then the data. */
    ustar_header(out->p + 1024, "GNUSparseFile.0/huge.bin", '0', 1024);
    memcpy(out->p + 1536, "1\n0\n1\n", 6);
    out->p[2048] = 'x';
    /* two zero blocks end the archive (calloc) */
}

static void test_sparse_bomb_refused_from_header(void **state)
{
    struct mg_server *s = *state;
    struct abuf b;

    build_sparse((uint64_t)16 << 30, &b);
    assert_int_equal(expect_bomb_refused(s, "PAX sparse 16 GiB", &b), 0);
    free(b.p);
}

/* 10 MiB of text-like data compressing about 5:1 is a model, not a bomb. */
static void test_compressible_model_passes(void **state)
{
    static const char *const words[] = {"layer", "weight", "bias", "attention", "0.125", "-3.5e-2",
                                        "norm",  "head",   "\n",   "{\"k\":",   "}, "};
    struct mg_server *s = *state;
    size_t n = 10 * MIB, i = 0;
    unsigned char *text = malloc(n);
    uint32_t x = 12345;
    struct member m[1];
    struct abuf b;
    struct it_resp *r;

    assert_non_null(text);
    while (i < n) {
        const char *w;
        x = x * 1103515245u + 12345u;
        w = words[(x >> 16) % (sizeof(words) / sizeof(words[0]))];
        for (size_t k = 0; w[k] && i < n; k++)
            text[i++] = (unsigned char)w[k];
        if (i < n)
            text[i++] = (unsigned char)('a' + (x >> 8) % 26);
    }
    m[0] = (struct member){"model/params.txt", n, text};
    build(F_TAR_GZ, m, 1, &b);
    print_message("text model: %zu bytes stored for %zu (%.1f:1)\n", b.len, n,
                  (double)n / (double)b.len);
    r = it_upload(s, b.p, b.len, NULL);
    it_expect_status(s, r, 201);
    assert_int_equal(it_jint(r->json, "files"), 1);
    free(b.p);
    free(text);
}

/* "a" as a file and "a/b" (or "a/") as well: could never be extracted. */
static void test_file_that_is_also_a_directory(void **state)
{
    static const unsigned char x[] = "x";
    struct mg_server *s = *state;
    const struct member orders[2][2] = {
        {{"a", 1, x}, {"a/b", 1, x}},
        {{"a/b", 1, x}, {"a", 1, x}},
    };

    for (size_t i = 0; i < 2; i++) {
        struct abuf b;
        struct it_resp *r;
        const char *msg;

        build(F_TAR_GZ, orders[i], 2, &b);
        r = it_request(s, "POST", "/api/v1/blobs", s->admin_token, "application/octet-stream", b.p,
                       b.len);
        it_expect_error(s, r, 400, "invalid_argument");
        msg = json_string_value(json_object_get(json_object_get(r->json, "error"), "message"));
        assert_non_null(msg);
        if (strstr(msg, "'a'") == NULL || strstr(msg, "'a/b'") == NULL)
            fail_msg("message does not name both entries: %s", msg);
        free(b.p);
        it_release(s);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_bombs_refused_from_headers, it_test_teardown),
        cmocka_unit_test_teardown(test_bombs_refused_at_the_running_total, it_test_teardown),
        cmocka_unit_test_teardown(test_nested_bomb_is_not_expanded, it_test_teardown),
        cmocka_unit_test_teardown(test_sparse_bomb_refused_from_header, it_test_teardown),
        cmocka_unit_test_teardown(test_compressible_model_passes, it_test_teardown),
        cmocka_unit_test_teardown(test_file_that_is_also_a_directory, it_test_teardown),
    };

    return it_main_result(cmocka_run_group_tests_name("integration_archive_bombs", tests,
                                                      it_group_setup, it_group_teardown));
}
